"""The real thing on the offline SmolLM2-135M-Instruct (marked ``model``): an SFT adapter trained on CPU from
the datasets through the Dagster asset, registered in MLflow with its lineage, loaded back to generate."""

from __future__ import annotations

import dagster as dg
import pytest

from bashgym_assets.config import Settings
from bashgym_assets.defs import datasets as dd
from bashgym_assets.defs import training as tr
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.lake import Lake
from bashgym_assets.testing import datasets as syn
from bashgym_assets.training import base_model as bm
from bashgym_assets.training import registry
from bashgym_assets.training.trainer import generate, load_adapter

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="session")
def smollm2() -> str:
    """Fetched and converted once into the project's default data folder, reused by every later run."""
    info = bm.prepare_smollm2(Settings())
    return info.path


def test_smollm2_conversion_is_a_plain_transformers_folder(smollm2):
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(smollm2)
    assert cfg.architectures == ["LlamaForCausalLM"] and not hasattr(cfg, "quantization_config")
    assert bm.describe(smollm2).parameters == 134515008


def test_trl_labels_on_smollm2_equal_the_reference_mask(smollm2, tmp_path):
    """TRL tokenises with the shipped SmolLM2 training template: its labels are exactly the offsets reference."""
    from bashgym_assets.training.masking import tokenize_conversation
    from bashgym_assets.training.trainer import (
        TEMPLATES_DIR,
        TrainConfig,
        build_sft_trainer,
        prepared_examples,
    )

    convs = [
        syn.trajectory_messages(t[2], list(t[3]), [f"output of {c}\n[exit code: 0]" for c in t[3]])
        for t in syn.TASKS[:6]
    ]
    convs.append(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "\nexit\n"},
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "exitexit"},
        ]
    )
    cfg = TrainConfig(base_model=smollm2, output_dir=str(tmp_path / "run"), packing=False, max_length=2048)
    trainer = build_sft_trainer(cfg, convs)
    tok = trainer.processing_class
    assert tok.chat_template == (TEMPLATES_DIR / "smollm2_training.jinja").read_text(encoding="utf-8")
    examples = prepared_examples(trainer.train_dataset)
    assert [e.labels for e in examples] == [tokenize_conversation(tok, c).labels for c in convs]
    assert [e.input_ids for e in examples] == [tokenize_conversation(tok, c).input_ids for c in convs]


def test_sft_adapter_on_smollm2_through_dagster_registered_and_generating(smollm2, settings, monkeypatch):
    monkeypatch.setenv("BASHGYM_BASE_MODEL", smollm2)
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    lake = Lake(settings)
    d = syn.demo_inputs()
    lake.write("verified_trajectories", d["trajectories"])
    lake.write("gated_scenarios", d["scenarios"])
    with dg.instance_for_test() as instance:
        assert dg.materialize(
            [dd.sft_dataset, dd.sft_dataset_no_heldout], instance=instance, resources=resources
        ).success
        # 12 steps of 2 packed rows: the loss is under a twentieth of its start by step 7, and the reply is learnt
        cfg = {
            "max_steps": 12,
            "batch_size": 1,
            "grad_accum": 2,
            "max_length": 384,
            "learning_rate": 1e-3,
            "run_name": "smollm2-cpu",
        }
        result = dg.materialize(
            [tr.base_model, tr.sft_adapter],
            instance=instance,
            resources=resources,
            run_config={"ops": {"sft_adapter": {"config": cfg}}},
        )
        assert result.success
        mat = result.asset_materializations_for_node("sft_adapter")[0]
        run_id = result.run_id
    meta = mat.metadata
    assert meta["model_uri"].value == "models:/bashgym-operator/1"
    assert meta["loss_curve"].value.startswith("![loss curve](data:image/png;base64,")
    assert meta["dataset_version"].value == lake_version(lake)

    c = registry.client(settings)
    run = c.get_run(meta["mlflow_run_id"].value)
    assert run.data.tags["dagster_run_id"] == run_id
    assert run.data.params["dataset_version"] == meta["dataset_version"].value
    assert run.data.params["base_model"] == smollm2
    losses = [m.value for m in sorted(c.get_metric_history(run.info.run_id, "loss"), key=lambda m: m.step)]
    assert len(losses) == 12 and losses[-1] < 0.5 * losses[0], losses
    assert len(c.get_metric_history(run.info.run_id, "grad_norm")) == 12
    model_id = meta["mlflow_model"].value.removeprefix("models:/")  # the adapter is the run's pyfunc model
    artifacts = {a.path for a in c.list_logged_model_artifacts(model_id, "artifacts/adapter")}
    assert artifacts == {
        "artifacts/adapter/adapter_config.json",
        "artifacts/adapter/adapter_model.safetensors",
    }

    back = registry.download_adapter(meta["model_uri"].value, settings.home / "download", settings)
    model, tok = load_adapter(smollm2, str(back))
    task = next(t for t in syn.TASKS if t[0] == "lock-key")
    reply = generate(model, tok, syn.trajectory_messages(task[2], [])[:2], max_new_tokens=24).strip()
    assert reply == task[3][0], reply  # the trained first command, not prose


def lake_version(lake: Lake) -> str:
    from bashgym_assets.training_data.build import data_version

    return data_version(lake.read("sft_dataset"))
