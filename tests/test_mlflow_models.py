"""MLflow as users expect it: the adapter loads back with ``mlflow.pyfunc.load_model`` (the base referenced, not
copied), the dataset is the run's input, metrics arrive per step, the run link follows the tracking URI, and the
``candidate`` / ``champion`` aliases resolve. One tiny model, one adapter trained one step, shared by the module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bashgym_assets.config import Settings
from bashgym_assets.evaluation import promotion as promo
from bashgym_assets.training import registry
from bashgym_assets.training.tiny import build_tiny_model
from bashgym_assets.training.trainer import TrainConfig, train_sft
from bashgym_assets.training_data import synthetic as syn

CONV = syn.trajectory_messages("task: list the files", ["ls -la dir1"], ["total 12\nfile.txt"])


@contextlib.contextmanager
def _plain_mlflow(settings: Settings) -> Iterator[Any]:
    """What a user does: point MLflow's fluent API at the installation's SQLite store (restored afterwards)."""
    import mlflow
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    saved = tracking_utils._tracking_uri, registry_utils._registry_uri
    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    mlflow.set_registry_uri(settings.mlflow_tracking_uri)
    try:
        yield mlflow
    finally:
        mlflow.set_tracking_uri(saved[0])
        registry_utils._registry_uri = saved[1]
        import os

        os.environ.pop("MLFLOW_REGISTRY_URI", None)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One SFT step on the tiny model inside a started run with live metrics and dataset inputs, then registered
    twice (two versions of the same adapter)."""
    root = tmp_path_factory.mktemp("mlflow-models")
    settings = Settings(home=root / "home")
    settings.ensure_dirs()
    tiny = str(build_tiny_model(root / "tiny"))
    run_id = registry.start_training_run(kind="sft", run_name="one-step", tags={"base_model": tiny},
                                         settings=settings)
    rows = [{"example_id": f"e{i}", "split": "train" if i < 3 else "validation", "messages": CONV}
            for i in range(4)]
    names = registry.log_dataset_inputs(run_id, name="sft_dataset", version="0123456789abcdef",
                                        splits={"train": rows[:3], "validation": rows[3:]},
                                        source=str(root / "lake" / "sft_dataset.parquet"), settings=settings)
    res = train_sft(TrainConfig(base_model=tiny, output_dir=str(root / "adapter-run"), max_steps=1,
                                learning_rate=1e-3), [CONV] * 2, on_log=registry.LiveMetrics(run_id, settings))
    reg1 = registry.log_training_run(kind="sft", run_name="one-step", params={"lr": 1e-3}, history=res.history,
                                     summary={"loss": res.final_loss}, adapter_dir=res.adapter_dir,
                                     tags={"base_model": tiny, "dataset_version": "0123456789abcdef"},
                                     settings=settings, run_id=run_id)
    reg2 = registry.log_training_run(kind="sft", run_name="again", params={}, history=res.history, summary={},
                                     adapter_dir=res.adapter_dir, tags={}, settings=settings)
    return {"settings": settings, "tiny": tiny, "run_id": run_id, "names": names, "res": res, "reg1": reg1,
            "reg2": reg2, "root": root}


def test_registered_adapter_loads_back_with_mlflow_pyfunc(trained):
    settings, reg = trained["settings"], trained["reg2"]
    with _plain_mlflow(settings) as mlflow:
        model = mlflow.pyfunc.load_model(f"models:/{registry.REGISTERED_MODEL}@candidate")
        reply = model.predict("list the files in dir1")
        assert isinstance(reply, str)
        assert isinstance(model.predict(CONV[:2], params={"max_new_tokens": 3}), str)
        batch = model.predict(["list the files", CONV[:2]], params={"max_new_tokens": 3})
        assert isinstance(batch, list) and len(batch) == 2 and all(isinstance(r, str) for r in batch)
        # the base is a reference: pointing it elsewhere fails, so nothing of it travelled with the model
        with pytest.raises(Exception, match="nowhere"):
            mlflow.pyfunc.load_model(reg.model_uri, model_config={"base_model": str(trained["root"] / "nowhere")})
    meta = model.metadata
    assert meta.metadata["base_model"] == trained["tiny"] and meta.metadata["base_model_copied"] is False
    assert model.model_config["base_model"] == trained["tiny"]  # what load_context reads
    # the same through the project's helper (no global MLflow state needed)
    assert isinstance(registry.load_model(reg.model_uri, settings).predict("ls", params={"max_new_tokens": 2}), str)


def test_artifact_store_holds_the_adapter_not_the_base_weights(trained):
    settings, reg = trained["settings"], trained["reg1"]
    stored = [p for p in (settings.mlflow_dir / "artifacts").rglob("*") if p.is_file()]
    names = {p.name for p in stored}
    base_files = {p.name for p in Path(trained["tiny"]).iterdir()}  # config.json, model.safetensors, tokenizer ...
    assert "adapter_model.safetensors" in names and "MLmodel" in names
    assert not names & (base_files - {"generation_config.json"}), names & base_files
    base_bytes = (Path(trained["tiny"]) / "model.safetensors").stat().st_size
    per_model = [p for p in stored if reg.logged_model_id in str(p)]
    assert per_model and sum(p.stat().st_size for p in per_model) < base_bytes
    c = registry.client(settings)
    adapter_files = {a.path for a in c.list_logged_model_artifacts(reg.logged_model_id, "artifacts/adapter")}
    assert adapter_files == {"artifacts/adapter/adapter_config.json", "artifacts/adapter/adapter_model.safetensors"}
    # the evaluation's path still gets the bare adapter folder
    back = registry.download_adapter(reg.model_uri, trained["root"] / "dl", settings)
    assert back.name == "adapter" and (back / "adapter_config.json").exists()
    # the model version keeps the lineage: its run, its logged model, the tags
    mv = c.get_model_version(registry.REGISTERED_MODEL, reg.model_version)
    assert mv.run_id == reg.run_id and mv.source == reg.logged_model_uri
    assert mv.tags["dataset_version"] == "0123456789abcdef" and mv.tags["kind"] == "sft"
    assert mv.tags["base_model"] == trained["tiny"]
    run = c.get_run(reg.run_id)
    assert run.info.status == "FINISHED"
    assert [o.model_id for o in run.outputs.model_outputs] == [reg.logged_model_id]


def test_dataset_is_the_runs_input_and_metrics_arrived_per_step(trained):
    c = registry.client(trained["settings"])
    run = c.get_run(trained["run_id"])
    inputs = {(d.dataset.name, d.dataset.digest, {t.key: t.value for t in d.tags}["mlflow.data.context"])
              for d in run.inputs.dataset_inputs}
    assert inputs == {("sft_dataset/train", "0123456789abcdef", "training"),
                      ("sft_dataset/validation", "0123456789abcdef", "validation")}
    assert trained["names"] == ["sft_dataset/train", "sft_dataset/validation"]
    train = next(d.dataset for d in run.inputs.dataset_inputs if d.dataset.name.endswith("/train"))
    assert train.source.endswith('sft_dataset.parquet"}') and '"num_rows": 3' in train.profile
    assert [m.step for m in c.get_metric_history(trained["run_id"], "loss")] == [1]  # logged live, once


def test_candidate_and_champion_aliases_resolve(trained):
    settings = trained["settings"]
    reg1, reg2 = trained["reg1"], trained["reg2"]
    c = registry.client(settings)
    name = registry.REGISTERED_MODEL
    # every registration moves `candidate` to the newest version
    assert str(c.get_model_version_by_alias(name, promo.CANDIDATE).version) == reg2.model_version
    assert promo.alias_version(name, promo.CHAMPION, settings) is None
    decision = promo.PromotionDecision(
        promote=True, reason="test", incumbent="base", candidate_version=reg1.model_version, candidate_rates={},
        incumbent_rates={}, test=promo.PairedTest(scenarios=0, candidate_better=0, incumbent_better=0, ties=0,
                                                  p_value=1.0), rule="test")
    assert promo.apply_decision(decision, name, settings)
    assert str(c.get_model_version_by_alias(name, promo.CHAMPION).version) == reg1.model_version
    assert str(c.get_model_version_by_alias(name, promo.CANDIDATE).version) == reg1.model_version
    back = registry.download_adapter(f"models:/{name}@champion", trained["root"] / "champ", settings)
    assert (back / "adapter_model.safetensors").exists()


def test_run_link_follows_the_configured_tracking_uri(monkeypatch, trained):
    monkeypatch.delenv("BASHGYM_MLFLOW_UI_URL", raising=False)
    reg = trained["reg1"]
    assert reg.run_link() == f"http://127.0.0.1:5000/#/experiments/{reg.experiment_id}/runs/{reg.run_id}"
    assert registry.run_url("https://mlflow.example.org/", "3", "abc") == \
        "https://mlflow.example.org/#/experiments/3/runs/abc"
    assert registry.run_url("file:///data/mlruns", "3", "abc").startswith("http://127.0.0.1:5000/#/")
    monkeypatch.setenv("BASHGYM_MLFLOW_UI_URL", "http://gpu-box:8080/")
    assert reg.run_link() == f"http://gpu-box:8080/#/experiments/{reg.experiment_id}/runs/{reg.run_id}"
    assert registry.run_url("https://mlflow.example.org", "3", "abc") == "http://gpu-box:8080/#/experiments/3/runs/abc"
