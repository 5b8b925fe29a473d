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
from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training import registry

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
    """``sft_adapter`` materialized by Dagster on the demo dataset (tiny model, ONE step): its run has the live
    metrics and the dataset inputs, its version the ``candidate`` alias; then the same adapter registered once more
    directly (a second version, no training)."""
    import dagster as dg

    from bashgym_assets.defs import datasets as dd
    from bashgym_assets.defs import training as tr
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.lake import Lake

    root = tmp_path_factory.mktemp("mlflow-models")
    settings = Settings(home=root / "home")
    settings.ensure_dirs()
    tiny = str(build_tiny_model(root / "tiny"))
    demo = syn.demo_inputs()
    lake = Lake(settings)
    lake.write("verified_trajectories", demo["trajectories"])
    lake.write("gated_scenarios", demo["scenarios"])
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    with pytest.MonkeyPatch.context() as mp, dg.instance_for_test() as instance:
        mp.setenv("BASHGYM_BASE_MODEL", tiny)
        mp.delenv("BASHGYM_MLFLOW_UI_URL", raising=False)
        assert dg.materialize([dd.sft_dataset], instance=instance, resources=resources).success
        cfg = {"max_steps": 1, "max_length": 256}
        result = dg.materialize(
            [tr.base_model, tr.sft_adapter],
            instance=instance,
            resources=resources,
            run_config={"ops": {"sft_adapter": {"config": cfg}}},
        )
        assert result.success
        mat = result.asset_materializations_for_node("sft_adapter")[0]
    meta = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    reg1 = registry.RegisteredAdapter(
        run_id=meta["mlflow_run_id"],
        experiment_id=meta["mlflow_run"].split("/experiments/")[1].split("/")[0],
        run_name=meta["run_name"],
        artifact_uri="",
        model_name=registry.REGISTERED_MODEL,
        model_version=meta["model_version"],
        model_uri=meta["model_uri"],
        tracking_uri=meta["mlflow_tracking_uri"],
        logged_model_id=meta["mlflow_model"].removeprefix("models:/"),
        logged_model_uri=meta["mlflow_model"],
    )
    reg2 = registry.log_training_run(
        kind="sft",
        run_name="again",
        params={},
        history=[{"step": 1, "loss": 1.0}],
        summary={},
        adapter_dir=meta["adapter_dir"],
        tags={},
        settings=settings,
    )
    return {
        "settings": settings,
        "tiny": tiny,
        "run_id": reg1.run_id,
        "meta": meta,
        "reg1": reg1,
        "reg2": reg2,
        "root": root,
        "lake": lake,
    }


@pytest.mark.slow
def test_registered_adapter_loads_back_with_mlflow_pyfunc(trained):
    settings, reg = trained["settings"], trained["reg2"]
    with _plain_mlflow(settings) as mlflow:
        model = mlflow.pyfunc.load_model(f"models:/{registry.REGISTERED_MODEL}@candidate")
        reply = model.predict("list the files in dir1")
        assert isinstance(reply, str)
        assert isinstance(model.predict(CONV[:2], params={"max_new_tokens": 3}), str)
        batch = model.predict(["list the files", CONV[:2]], params={"max_new_tokens": 3})
        assert isinstance(batch, list) and len(batch) == 2 and all(isinstance(r, str) for r in batch)
        # the sampling params are in the signature: they reach predict (a seed reproduces its sample)
        assert {"temperature", "top_p", "seed"} <= {p.name for p in model.metadata.get_params_schema().params}
        sample = {"max_new_tokens": 6, "temperature": 1.5, "seed": 3}
        assert model.predict(CONV[:2], params=sample) == model.predict(CONV[:2], params=sample)
        # the base is a reference: pointing it elsewhere fails, so nothing of it travelled with the model
        with pytest.raises(Exception, match="nowhere"):
            mlflow.pyfunc.load_model(
                reg.model_uri, model_config={"base_model": str(trained["root"] / "nowhere")}
            )
    meta = model.metadata
    assert meta.metadata["base_model"] == trained["tiny"] and meta.metadata["base_model_copied"] is False
    assert model.model_config["base_model"] == trained["tiny"]  # what load_context reads
    # the same through the project's helper (no global MLflow state needed)
    assert isinstance(
        registry.load_model(reg.model_uri, settings).predict("ls", params={"max_new_tokens": 2}), str
    )


def test_artifact_store_holds_the_adapter_not_the_base_weights(trained):
    settings, reg = trained["settings"], trained["reg1"]
    stored = [p for p in (settings.mlflow_dir / "artifacts").rglob("*") if p.is_file()]
    names = {p.name for p in stored}
    base_files = {
        p.name for p in Path(trained["tiny"]).iterdir()
    }  # config.json, model.safetensors, tokenizer ...
    assert "adapter_model.safetensors" in names and "MLmodel" in names
    assert not names & (base_files - {"generation_config.json"}), names & base_files
    base_bytes = (Path(trained["tiny"]) / "model.safetensors").stat().st_size
    per_model = [p for p in stored if reg.logged_model_id in str(p)]
    assert per_model and sum(p.stat().st_size for p in per_model) < base_bytes
    c = registry.client(settings)
    adapter_files = {a.path for a in c.list_logged_model_artifacts(reg.logged_model_id, "artifacts/adapter")}
    assert adapter_files == {
        "artifacts/adapter/adapter_config.json",
        "artifacts/adapter/adapter_model.safetensors",
    }
    # the evaluation's path still gets the bare adapter folder
    back = registry.download_adapter(reg.model_uri, trained["root"] / "dl", settings)
    assert back.name == "adapter" and (back / "adapter_config.json").exists()
    # the model version keeps the lineage: its run, its logged model, the tags
    mv = c.get_model_version(registry.REGISTERED_MODEL, reg.model_version)
    assert mv.run_id == reg.run_id and mv.source == reg.logged_model_uri
    assert mv.tags["dataset_version"] == trained["meta"]["dataset_version"] and mv.tags["kind"] == "sft"
    assert mv.tags["base_model"] == trained["tiny"]
    run = c.get_run(reg.run_id)
    assert run.info.status == "FINISHED"
    assert [o.model_id for o in run.outputs.model_outputs] == [reg.logged_model_id]


def test_dataset_is_the_runs_input_and_metrics_arrived_per_step(trained):
    c = registry.client(trained["settings"])
    run = c.get_run(trained["run_id"])
    version = trained["meta"]["dataset_version"]
    inputs = {
        (d.dataset.name, d.dataset.digest, {t.key: t.value for t in d.tags}["mlflow.data.context"])
        for d in run.inputs.dataset_inputs
    }
    rows = trained["lake"].read("sft_dataset").to_pylist()
    splits = {r["split"] for r in rows}
    assert inputs == {
        (f"sft_dataset/{split}", version, "training" if split == "train" else split)
        for split in splits
        if split in ("train", "validation")
    }
    train = next(d.dataset for d in run.inputs.dataset_inputs if d.dataset.name == "sft_dataset/train")
    assert str(trained["lake"].table_path("sft_dataset")) in train.source
    n_train = sum(r["split"] == "train" for r in rows)
    assert f'"num_rows": {n_train}' in train.profile
    assert [m.step for m in c.get_metric_history(trained["run_id"], "loss")] == [1]  # logged live, once
    assert run.data.tags["dataset_version"] == version and run.data.tags["dagster_run_id"]


def test_candidate_and_champion_aliases_resolve(trained):
    settings = trained["settings"]
    reg1, reg2 = trained["reg1"], trained["reg2"]
    c = registry.client(settings)
    name = registry.REGISTERED_MODEL
    # every registration moves `candidate` to the newest version
    assert str(c.get_model_version_by_alias(name, promo.CANDIDATE).version) == reg2.model_version
    assert promo.alias_version(name, promo.CHAMPION, settings) is None
    decision = promo.PromotionDecision(
        promote=True,
        reason="test",
        incumbent="base",
        candidate_version=reg1.model_version,
        candidate_rates={},
        incumbent_rates={},
        test=promo.PairedTest(scenarios=0, candidate_better=0, incumbent_better=0, ties=0, p_value=1.0),
        rule="test",
    )
    assert promo.apply_decision(decision, name, settings)
    assert str(c.get_model_version_by_alias(name, promo.CHAMPION).version) == reg1.model_version
    assert str(c.get_model_version_by_alias(name, promo.CANDIDATE).version) == reg1.model_version
    back = registry.download_adapter(f"models:/{name}@champion", trained["root"] / "champ", settings)
    assert (back / "adapter_model.safetensors").exists()


def test_run_link_follows_the_configured_tracking_uri(monkeypatch, trained):
    monkeypatch.delenv("BASHGYM_MLFLOW_UI_URL", raising=False)
    reg = trained["reg1"]
    assert reg.run_link() == f"http://127.0.0.1:5000/#/experiments/{reg.experiment_id}/runs/{reg.run_id}"
    assert trained["meta"]["mlflow_run"] == reg.run_link()  # what the Dagster UI links
    assert (
        registry.run_url("https://mlflow.example.org/", "3", "abc")
        == "https://mlflow.example.org/#/experiments/3/runs/abc"
    )
    assert registry.run_url("file:///data/mlruns", "3", "abc").startswith("http://127.0.0.1:5000/#/")
    monkeypatch.setenv("BASHGYM_MLFLOW_UI_URL", "http://gpu-box:8080/")
    assert reg.run_link() == f"http://gpu-box:8080/#/experiments/{reg.experiment_id}/runs/{reg.run_id}"
    assert (
        registry.run_url("https://mlflow.example.org", "3", "abc")
        == "http://gpu-box:8080/#/experiments/3/runs/abc"
    )


def test_a_missing_version_or_deleted_adapter_files_is_one_clear_error(trained, tmp_path):
    """Not MLflow's 20-30 line traceback in serve/eval (issue 31): a LookupError / FileNotFoundError that
    ``bashgym``'s CLI prints as one ``error:`` line."""
    import shutil

    settings, reg = trained["settings"], trained["reg1"]
    with pytest.raises(LookupError, match="is not in the registry"):
        registry.download_adapter(f"models:/{registry.REGISTERED_MODEL}/999", tmp_path / "none", settings)
    copy = tmp_path / "store"
    shutil.copytree(settings.mlflow_dir / "artifacts", copy)
    try:
        for p in list((settings.mlflow_dir / "artifacts").rglob("adapter_model.safetensors")):
            if reg.logged_model_id in str(p):
                shutil.rmtree(p.parent)
        with pytest.raises(FileNotFoundError, match="registered but its adapter files are gone"):
            registry.download_adapter(reg.model_uri, tmp_path / "gone", settings)
    finally:
        shutil.rmtree(settings.mlflow_dir / "artifacts")
        shutil.copytree(copy, settings.mlflow_dir / "artifacts")
