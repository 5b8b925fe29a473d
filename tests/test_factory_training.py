"""The family split of the training-set builders, short renders and the four evaluation sets (issue 37: fit,
transfer, unseen, bundled; plus each external suite)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from bashgym_assets.evaluation import (
    BUNDLED,
    BUNDLED_TWINS,
    FIT,
    TRANSFER,
    UNSEEN,
    evaluation_bundles,
    evaluation_set,
    is_transfer_source,
    set_names,
    transfer_bundles,
)
from bashgym_assets.scenarios.bundle import load_folder
from bashgym_assets.scenarios.candidates import PACK_DIR
from bashgym_assets.scenarios.factory.family import family_of
from bashgym_assets.scenarios.factory.generate import generate
from bashgym_assets.scenarios.factory.split import BUNDLED_TRAIN_TWINS
from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES as HELD_OUT_FAMILY_NAMES
from bashgym_assets.scenarios.gate import HELD_OUT, TRAIN, split_for
from bashgym_assets.testing import datasets as syn
from bashgym_assets.training_data import build as ds


def _generated(per_family: int = 3):
    return generate(per_family, seed=0).bundles


def test_sft_rows_of_one_family_share_a_split_and_carry_family_and_difficulty():
    bundles = [b for b in _generated(4) if split_for(b.id) == TRAIN]
    trajectories = []
    for b in bundles:
        t = syn.trajectory(b.id, b.task, ["ls -l", "cat notes.txt"], kept=True)
        t["difficulty"] = b.difficulty
        trajectories.append(t)
    rows = ds.build_sft([], trajectories).rows
    assert len(rows) == len(bundles)
    splits: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        assert r["family"] == family_of(r["scenario_id"]) and r["difficulty"] in (1, 2, 3, 4)
        splits[r["family"]].add(r["split"])
    assert all(len(s) == 1 for s in splits.values())  # a family never straddles the split
    validation = {f for f, s in splits.items() if s == {"validation"}}
    assert 0 < len(validation) < len(splits) // 4  # about a tenth of the trained families
    assert not validation & set(HELD_OUT_FAMILY_NAMES)  # held-out families never reach the builders
    # a hand-written scenario keeps its own group: two of them may land on different sides
    assert ds.scenario_group("a-files-find") == "scenario:a-files-find"
    assert ds.scenario_group("gen.disk-usage-top.0123456789ab") == "family:disk-usage-top"


def test_dpo_pairs_of_generated_tasks_split_by_family_too():
    b = next(b for b in _generated(2) if split_for(b.id) == TRAIN)
    good = syn.trajectory(b.id, b.task, ["ls -l", "wc -l notes.txt"], kept=True)
    bad = syn.trajectory(b.id, b.task, ["ls -l", "wc notes.txt"], kept=False, sample_index=1)
    rows = ds.build_dpo([], [good, bad]).rows
    assert rows and rows[0]["split"] == ds.split_for(ds.scenario_group(b.id))
    assert rows[0]["task_key"] == f"scenario:{b.id}"  # pairs still pair attempts at the SAME task


def test_short_renders_cut_long_outputs_keep_exit_code_task_and_commands():
    long_out = "\n".join(f"/home/operator/data/file-{i:03d}.txt" for i in range(200))
    msgs = syn.trajectory_messages("x" * 900, ["find ~/data -type f", "exit"], [long_out, ""])
    short = ds.shorten_observations(msgs, 400)
    assert short[1] == msgs[1]  # the task is never cut
    assert [m["content"] for m in short if m["role"] == "assistant"] == [
        m["content"] for m in msgs if m["role"] == "assistant"
    ]
    out = short[3]["content"]
    assert len(out) <= 400 + 60 and out.endswith("[exit code: 0]")
    assert out.startswith("/home/operator/data/file-000.txt") and "more lines of output cut]" in out
    assert ds.shorten_observations(msgs, None) == msgs
    row = ds.build_sft(
        [],
        [{**syn.trajectory("s1", "t", ["find ~/data -type f"], kept=True, outputs=[long_out])}],
        observation_chars=400,
    ).rows[0]
    assert "more lines of output cut]" in row["messages"][3]["content"]


def _rows(generated):
    pack, _ = load_folder(PACK_DIR)
    return [
        {"scenario_id": b.id, "split": split_for(b.id), "task": b.task, "bundle_json": b.model_dump_json()}
        for b in list(pack) + list(generated)
    ]


def test_four_evaluation_sets_from_gated_rows():
    generated = _generated(5)
    rows = _rows(generated)
    sets = evaluation_bundles(
        rows, sets=[FIT, UNSEEN, BUNDLED, BUNDLED_TWINS], per_heldout_family=2, fit_sample=20, seed=1
    )
    bundled, families, fit = sets[BUNDLED], sets[UNSEEN], sets[FIT]
    assert bundled and all(not family_of(b.id) and split_for(b.id) == HELD_OUT for b in bundled)
    assert not {b.id for b in bundled} & set(BUNDLED_TRAIN_TWINS)  # the clean bundled set
    assert {b.id for b in sets[BUNDLED_TWINS]} == set(BUNDLED_TRAIN_TWINS)  # reported apart when asked
    per_family = defaultdict(int)
    for b in families:
        per_family[family_of(b.id)] += 1
    assert set(per_family) == set(HELD_OUT_FAMILY_NAMES) and set(per_family.values()) == {2}
    assert len(fit) == 20 and all(split_for(b.id) == TRAIN for b in fit)
    assert all(
        ds.split_for(ds.scenario_group(b.id)) == "train" for b in fit
    )  # trained families, not validation
    assert {evaluation_set(b.id, HELD_OUT) for b in families} == {UNSEEN}
    assert evaluation_set(bundled[0].id) == BUNDLED and evaluation_set(fit[0].id, TRAIN) == FIT
    assert evaluation_set(next(iter(BUNDLED_TRAIN_TWINS))) == BUNDLED_TWINS
    everything = evaluation_bundles(rows, per_heldout_family=None)
    assert len(everything[UNSEEN]) == sum(split_for(b.id) == HELD_OUT for b in generated)
    assert evaluation_bundles(rows, per_heldout_family=0)[UNSEEN] == []
    assert FIT not in evaluation_bundles(rows) and TRANSFER not in evaluation_bundles(rows)  # only when asked
    assert list(evaluation_bundles(rows)) == [UNSEEN, BUNDLED]


def test_transfer_draws_are_fresh_tasks_of_trained_families_under_the_reserved_seed():
    generated = _generated(3)
    rows = _rows(generated)
    transfer = transfer_bundles(rows, 2)
    trained = {family_of(b.id) for b in generated if split_for(b.id) == TRAIN}
    assert {family_of(b.id) for b in transfer} == trained
    assert all(is_transfer_source(b.source) for b in transfer)
    assert not {b.id for b in transfer} & {r["scenario_id"] for r in rows}  # in no training set
    assert not {b.task for b in transfer} & {r["task"] for r in rows}
    assert all(evaluation_set(b.id, TRAIN, b.source) == TRANSFER for b in transfer)
    # a draw that equals a gated training task is skipped
    planted = [*rows, {"scenario_id": transfer[0].id, "split": TRAIN, "task": transfer[0].task}]
    assert transfer[0].id not in {b.id for b in transfer_bundles(planted, 2)}
    assert transfer_bundles(rows, 0) == []


def test_set_names_take_the_four_names_and_suites():
    assert set_names([]) == ["unseen", "bundled"]
    assert set_names([], ["tb"]) == ["unseen", "bundled", "suite:tb"]
    assert set_names(["fit", "transfer", "tb"], ["tb"]) == ["fit", "transfer", "suite:tb"]
    with pytest.raises(ValueError, match="unknown evaluation set 'heldout'"):
        set_names(["heldout"])
