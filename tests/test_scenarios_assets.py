"""The three assets end to end in Dagster: candidates (imports + teacher over HTTP), the gate in real sandboxes,
reference rollouts; held-out scenarios provably absent from verified_trajectories."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from openai_server import OpenAIServer, scripted

from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.defs.scenarios import gated_scenarios, scenario_candidates
from bashgym_assets.defs.trajectories import verified_trajectories
from bashgym_assets.lake import Lake
from bashgym_assets.scenarios.gate import HELD_OUT, TRAIN, split_for

pytestmark = pytest.mark.docker


def ids_for(split: str, n: int) -> list[str]:
    return [i for i in (f"imp-{k}" for k in range(500)) if split_for(i) == split][:n]


def shell_task(task_id: str, n: int) -> dict:
    return {
        "id": task_id,
        "task": f"Write {n} into ~/n.txt",
        "category": "files",
        "difficulty_level": 1,
        "setup_commands": ["true"],
        "success_condition": f"grep -qx {n} /home/operator/n.txt",
        "reference": [f"echo {n} > ~/n.txt"],
    }


def test_assets_end_to_end(bashgym_home: Path, sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    imports = bashgym_home / "scenario_imports"
    imports.mkdir()
    train_ids, held_ids = ids_for(TRAIN, 3), ids_for(HELD_OUT, 2)
    tasks = [shell_task(i, n) for n, i in enumerate(train_ids + held_ids)]
    tasks.append({**shell_task("imp-bad-check", 99), "success_condition": "true"})  # passes before any action
    tasks.append({"task": "no check at all"})  # quarantined on import
    (imports / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    # seed 0's first taxonomy point is (files, announced): the teacher answers in provider mode
    teacher_bundle = {
        "task": "Create the directory ~/made",
        "category": "files",
        "difficulty": 1,
        "setup": [],
        "announcement": "You have new work orders: run `work-orders --help`.",
        "provider": {"name": "work-orders", "script": "#!/bin/bash\necho 'Create the directory ~/made'"},
        "check": "test -d /home/operator/made",
        "reference": ["work-orders --help", "mkdir ~/made"],
    }
    resources = {"bashgym": BashgymHome(home=str(bashgym_home))}
    with OpenAIServer(scripted(["not json", json.dumps(teacher_bundle)])) as server:
        monkeypatch.setenv("BASHGYM_TEACHER_MODEL", server.litellm_model)
        monkeypatch.setenv("BASHGYM_TEACHER_API_BASE", server.url)
        result = dg.materialize(
            [scenario_candidates],
            resources=resources,
            run_config={"ops": {"scenario_candidates": {"config": {"include_pack": False, "authored": 1}}}},
        )
    assert result.success
    meta = result.asset_materializations_for_node("scenario_candidates")[0].metadata
    assert meta["candidates"].value == 7 and meta["quarantined"].value == 1
    assert meta["by_origin"].value == {"import": 6, "teacher": 1}
    monkeypatch.setenv("BASHGYM_TEACHER_MODEL", "reference")

    result = dg.materialize(
        [gated_scenarios, verified_trajectories],
        resources=resources,
        selection=["gated_scenarios", "verified_trajectories"],
    )
    assert result.success
    gate_meta = result.asset_materializations_for_node("gated_scenarios")[0].metadata
    assert gate_meta["counts_by_reason"].value == {"admitted": 6, "check_passes_before_action": 1}
    lake = Lake(root=bashgym_home / "lake")
    gated = lake.read_rows("gated_scenarios")
    assert {r["scenario_id"]: r["split"] for r in gated if r["scenario_id"] in held_ids} == {
        i: HELD_OUT for i in held_ids
    }
    assert [r["reason"] for r in lake.read_rows("gate_rejections")] == ["check_passes_before_action"]

    traj = lake.read_rows("verified_trajectories")
    traj_ids = {r["scenario_id"] for r in traj}
    assert set(train_ids) <= traj_ids
    assert not traj_ids & set(held_ids)  # held-out scenarios never reach trajectories
    assert all(r["split"] == TRAIN and r["kept"] and r["operator"] == "reference" for r in traj)
    assert traj[0]["messages"][-1] == {"role": "assistant", "content": "exit"}
    tmeta = result.asset_materializations_for_node("verified_trajectories")[0].metadata
    assert tmeta["kept_rate"].value == 1.0 and tmeta["held_out_excluded"].value == len(held_ids)
    assert "kept" in tmeta["sample_transcripts"].value
    con = lake.connect()
    n = con.execute(
        "SELECT count(*) FROM verified_trajectories t JOIN gated_scenarios g USING (scenario_id) "
        "WHERE g.split = 'held_out'"
    ).fetchone()[0]
    assert n == 0


def test_pack_sample_is_a_small_deterministic_slice_with_both_splits(bashgym_home: Path) -> None:
    """`bashgym demo --quick` gates 16 pack scenarios: the same ones every time, both splits, every category
    first before a second of any, imports untouched."""
    from bashgym_assets.scenarios.candidates import load_pack, sample_pack

    pack, _ = load_pack()
    first, again = sample_pack(pack, 16, split_for), sample_pack(list(reversed(pack)), 16, split_for)
    assert [b.id for b in first] == [b.id for b in again] and len({b.id for b in first}) == 16
    splits = [split_for(b.id) for b in first]
    assert splits.count(HELD_OUT) == 6 and splits.count(TRAIN) == 10
    for split, n in ((TRAIN, 10), (HELD_OUT, 6)):  # categories in turn: no category twice before all once
        available = {b.category for b in pack if split_for(b.id) == split}
        assert len({b.category for b in first if split_for(b.id) == split}) == min(n, len(available))
    assert sample_pack(pack, 2, split_for) and {split_for(b.id) for b in sample_pack(pack, 2, split_for)} == {
        HELD_OUT,
        TRAIN,
    }
    assert len(sample_pack(pack, 10_000, split_for)) == len(pack)

    imports = bashgym_home / "scenario_imports"
    imports.mkdir()
    (imports / "tasks.json").write_text(json.dumps([shell_task("imp-x", 1)]), encoding="utf-8")
    result = dg.materialize(
        [scenario_candidates],
        resources={"bashgym": BashgymHome(home=str(bashgym_home))},
        run_config={"ops": {"scenario_candidates": {"config": {"pack_sample": 16}}}},
    )
    assert result.success
    rows = Lake(root=bashgym_home / "lake").read("scenario_candidates").to_pylist()
    assert sorted(r["scenario_id"] for r in rows) == sorted([b.id for b in first] + ["imp-x"])
