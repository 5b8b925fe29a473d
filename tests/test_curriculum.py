"""The curriculum sampler and the trainer's lean loss (issue 29) on a tiny locally built model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training.curriculum import curriculum_order, curriculum_sampler, stage_counts, stage_of
from bashgym_assets.training.trainer import TrainConfig, build_sft_trainer, train_sft


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


def _conv(i: int, commands: int = 1) -> list[dict[str, str]]:
    return syn.trajectory_messages(
        f"task {i}: list the files",
        [f"ls -la dir{i}"] * commands + ["wc -l notes.txt"],
        ["total 12\nfile.txt"] * commands + ["42 notes.txt"],
    )


def _cfg(tiny_model: str, out: Path, **kw) -> TrainConfig:
    base = {
        "base_model": tiny_model,
        "output_dir": str(out),
        "batch_size": 1,
        "grad_accum": 1,
        "learning_rate": 3e-3,
        "lora_dropout": 0.0,
        "save_every": 1000,
        "max_length": 160,
    }
    base.update(kw)
    return TrainConfig(**base)


def test_curriculum_order_walks_the_stages_easy_first_and_shuffles_within_each():
    stages = [3, 1, 2, 1, 3, 2, 1, 4, 2, 1]
    order = curriculum_order(stages, seed=0, epoch=0)
    assert sorted(order) == list(range(len(stages)))
    assert [stages[i] for i in order] == sorted(stages)
    firsts = {tuple(curriculum_order(stages, seed=s)[:4]) for s in range(6)}
    assert len(firsts) > 1  # shuffled within stage 1, by seed
    assert curriculum_order(stages, 0, 1) != curriculum_order(stages, 0, 0)  # and by epoch
    assert curriculum_order(stages, 0, 1) == curriculum_order(stages, 0, 1)  # deterministic (resume)


def test_sampler_follows_set_epoch_and_stage_of_clamps():
    sampler = curriculum_sampler([2, 1, 2, 1], seed=3)
    assert len(sampler) == 4
    first = list(sampler)
    sampler.set_epoch(1)
    assert [[2, 1, 2, 1][i] for i in sampler] == [1, 1, 2, 2]
    assert list(sampler) == curriculum_order([2, 1, 2, 1], 3, 1) and first == curriculum_order(
        [2, 1, 2, 1], 3, 0
    )
    assert [stage_of({"difficulty": d}) for d in (None, 0, 1, 3, 4, 9)] == [1, 1, 1, 3, 4, 4]
    assert stage_counts([2, 1, 2]) == {1: 1, 2: 2}


@pytest.mark.slow
def test_curriculum_packs_each_stage_apart_and_trains_in_stage_order(tiny_model, tmp_path):
    convs = [_conv(i, commands=1 + i % 3) for i in range(12)]
    stages = [1 + i % 3 for i in range(12)]
    trainer = build_sft_trainer(_cfg(tiny_model, tmp_path / "cur", curriculum=True), convs, stages=stages)
    assert trainer.packed_stages == sorted(trainer.packed_stages)
    assert set(trainer.packed_stages) == {1, 2, 3}
    assert len(trainer.packed_stages) == len(trainer.train_dataset)
    loader = trainer.get_train_dataloader()
    seen = [int(b["input_ids"].shape[1]) for b in loader]
    by_row = [
        len(trainer.train_dataset[i]["input_ids"]) for i in curriculum_order(trainer.packed_stages, 0, 0)
    ]
    assert seen == by_row  # the dataloader reads the packed rows in curriculum order
    with pytest.raises(ValueError, match="one stage per train conversation"):
        build_sft_trainer(_cfg(tiny_model, tmp_path / "bad", curriculum=True), convs, stages=stages[:-1])
    result = train_sft(
        _cfg(tiny_model, tmp_path / "cur-run", curriculum=True, max_steps=4), convs, stages=stages
    )
    assert result.steps == 4 and result.final_loss is not None


def test_lean_loss_equals_trls_loss_on_the_same_batch(tiny_model, tmp_path):
    convs = [_conv(i, commands=2) for i in range(6)]
    lean = build_sft_trainer(_cfg(tiny_model, tmp_path / "lean", max_length=512), convs)
    stock = build_sft_trainer(_cfg(tiny_model, tmp_path / "stock", max_length=512, lean_loss=False), convs)
    stock.model.load_state_dict(lean.model.state_dict())
    batch = next(iter(lean.get_train_dataloader()))
    lean.model.eval()
    stock.model.eval()
    with torch.no_grad():
        a = lean.compute_loss(lean.model, dict(batch))
        b = stock.compute_loss(stock.model, dict(batch))
        a_n = lean.compute_loss(lean.model, dict(batch), num_items_in_batch=torch.tensor(7))
        b_n = stock.compute_loss(stock.model, dict(batch), num_items_in_batch=torch.tensor(7))
    assert torch.isclose(a, b, rtol=1e-4), (a, b)
    assert torch.isclose(a_n, b_n, rtol=1e-4), (a_n, b_n)
    assert lean._metrics["eval"]["mean_token_accuracy"] and "entropy" not in lean._metrics["eval"]
