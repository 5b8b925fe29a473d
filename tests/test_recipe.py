"""The GPU recipe's job folder and its CPU fallback: the same recipe (SFT with the curriculum, then DPO from the
SFT adapter) at a smaller size, on a tiny locally built model."""

from __future__ import annotations

import json

import pytest

from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training import recipe
from bashgym_assets.training.trainer import load_adapter


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


def _sft_rows(n: int) -> list[dict]:
    return [
        {
            "messages": syn.trajectory_messages(f"task {i}", [f"ls dir{i}", "wc -l notes.txt"], ["a", "1"]),
            "split": "validation" if i % 10 == 0 else "train",
            "difficulty": 1 + i % 4,
            "family": f"fam{i % 5}",
            "scenario_id": f"gen.fam{i % 5}.{i:012x}",
            "source": "dropped",
        }
        for i in range(n)
    ]


def _pairs(n: int) -> list[dict]:
    out = []
    for i in range(n):
        conv = syn.trajectory_messages(f"task {i}", [f"ls dir{i}"], ["a"])
        out.append(
            {
                "prompt": conv[:2],
                "chosen": [{"role": "assistant", "content": f"ls dir{i}"}],
                "rejected": [{"role": "assistant", "content": "rm -rf dir"}],
                "split": "train",
            }
        )
    return out


def test_job_folder_round_trips_only_what_training_needs(tmp_path):
    counts = recipe.write_job(tmp_path / "job", _sft_rows(12), _pairs(3), recipe.Recipe(sft_epochs=2))
    assert counts == {"sft": 12, "dpo": 3}
    rows = recipe._read_jsonl(tmp_path / "job" / recipe.SFT_FILE)
    assert set(rows[0]) == {"messages", "split", "difficulty", "family", "scenario_id"}
    assert json.loads((tmp_path / "job" / recipe.RECIPE_FILE).read_text())["sft_epochs"] == 2
    assert [r["difficulty"] for r in recipe._take(rows, 0.25)] == [1, 1, 1]  # every 4th row, deterministic


@pytest.mark.slow
def test_cpu_fallback_trains_sft_then_dpo_and_writes_small_adapters(tiny_model, tmp_path):
    recipe.write_job(
        tmp_path / "job",
        _sft_rows(40),
        _pairs(8),
        recipe.Recipe(max_length=128, sft_epochs=1, dpo_learning_rate=1e-3),
    )
    lines: list[str] = []
    res = recipe.run(
        tmp_path / "job",
        tmp_path / "out",
        tiny_model,
        device="auto",
        scale=0.5,
        max_steps=2,
        log=lines.append,
    )
    assert res["device"] == "cpu" and res["rows"] == {"sft_train": 18, "sft_validation": 2, "dpo_train": 4}
    assert res["sft"]["steps"] == 2 and res["dpo"]["steps"] == 2
    assert any(line.startswith("[sft] step 2/2") for line in lines) and "stages {1: " in lines[0]
    saved = json.loads((tmp_path / "out" / recipe.RESULTS_FILE).read_text())
    assert saved["sft"]["history"] and saved["recipe"]["max_length"] == 128
    from safetensors.torch import load_file

    for kind in ("sft", "dpo"):
        weights = load_file(str(tmp_path / "out" / kind / "adapter_model.safetensors"))
        assert {str(t.dtype) for t in weights.values()} == {"torch.float16"}
        model, _ = load_adapter(
            tiny_model, str(tmp_path / "out" / kind)
        )  # loads back (cast to the base dtype)
        assert next(model.parameters()).dtype.is_floating_point
    with pytest.raises(ValueError, match="no train rows"):
        recipe.write_job(tmp_path / "empty", [])
        recipe.run(tmp_path / "empty", tmp_path / "out2", tiny_model, device="cpu")
