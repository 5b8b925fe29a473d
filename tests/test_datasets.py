"""sft_dataset / dpo_dataset: rendering, sources, dedupe, split, DPO divergence, contamination, quarantine."""

from __future__ import annotations

import random

import dagster as dg
import pyarrow as pa
import pytest

from bashgym_assets.lake import Lake
from bashgym_assets.sessions import STEP_ARROW_TYPE
from bashgym_assets.testing import datasets as syn
from bashgym_assets.training_data import build as ds
from bashgym_assets.training_data.render import segment_messages


def _inputs():
    d = syn.demo_inputs()
    held = next(s for s in d["scenarios"] if s["split"] == "held_out")
    # a held-out scenario's rollout that leaked into the table, and a trace that quotes a held-out task
    d["trajectories"].append(
        syn.trajectory(
            held["id"], held["task"], ["find /tmp/cache -mtime +7 -delete"], kept=True, split="held_out"
        )
    )
    d["segments"].append(
        syn.segment(
            "sess-d", 0, f"please: {held['task']}", [syn.step(0, "ls /tmp/cache")], "gold", repo="repo-b"
        )
    )
    # broken input: a kept trajectory with no assistant turn
    bad = syn.trajectory("count-lines", "x", [], kept=True, sample_index=9, end_with_exit=False)
    d["trajectories"].append(bad)
    return d


def test_sft_rows_have_sources_dedupe_and_quarantine():
    d = _inputs()
    res = ds.build_sft(d["segments"], d["trajectories"], ds.heldout_from_rows(d["scenarios"]))
    rows = res.rows
    kinds = {r["source_kind"] for r in rows}
    assert kinds == {"trace", "trajectory"}
    # 4 scenarios x 2 identical kept copies -> 4 rows; gold segments sess-a#0 and sess-b#0
    assert sum(r["source_kind"] == "trajectory" for r in rows) == 4
    assert res.counts["duplicates"] == 4
    assert {r["source"] for r in rows if r["source_kind"] == "trace"} == {"trace:sess-a#0", "trace:sess-b#0"}
    for r in rows:
        assert r["source"] and (r["session_id"] or r["scenario_id"])
        assert r["messages"][0]["role"] == "system" and r["messages"][-1] == {
            "role": "assistant",
            "content": "exit",
        }
    reasons = sorted(q.reason for q in res.quarantine)
    assert any("'held_out' scenario" in x for x in reasons)
    assert any("held-out scenario purge-cache" in x for x in reasons)
    assert "no assistant turn" in reasons
    assert not ds.contamination_violations(rows, ds.heldout_from_rows(d["scenarios"]))


def test_trace_segment_renders_like_a_trajectory():
    msgs = segment_messages(
        "fix it", [syn.step(0, "pytest -q", "1 failed", 1, cwd="/w"), syn.step(1, "make", "ok", 0, cwd="/w")]
    )
    traj = syn.trajectory_messages("fix it", ["pytest -q"], ["1 failed"])
    assert [m["role"] for m in msgs] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert msgs[0]["content"].startswith("You are logged in to ") and traj[0]["content"].startswith(
        "You are logged in to "
    )
    assert msgs[3]["content"] == "1 failed\n[exit code: 1]"
    assert traj[3]["content"].endswith("[exit code: 0]")


def test_split_is_deterministic_and_grouped():
    d = syn.demo_inputs(copies=1)
    many = [
        syn.trajectory(f"s{i}", f"task number {i}", [f"echo {i}", f"echo {i}{j}"], kept=True, sample_index=j)
        for i in range(60)
        for j in range(2)
    ]
    a = ds.build_sft(d["segments"], many)
    shuffled = list(many)
    random.Random(1).shuffle(shuffled)
    b = ds.build_sft(list(reversed(d["segments"])), shuffled)
    assert a.rows == b.rows
    by_scenario: dict[str, set[str]] = {}
    for r in a.rows:
        by_scenario.setdefault(r["scenario_id"] or r["session_id"], set()).add(r["split"])
    assert all(len(s) == 1 for s in by_scenario.values())  # rollouts of one scenario never straddle the split
    n_val = sum(r["split"] == "validation" for r in a.rows)
    assert 0 < n_val < len(a.rows) // 3


def test_dpo_pairs_split_at_first_differing_assistant_turn():
    task = "Count the lines of data.txt."
    good = syn.trajectory("s1", task, ["ls", "wc -l < data.txt > count.txt"], kept=True, outputs=["data.txt"])
    bad = syn.trajectory("s1", task, ["ls", "cat data.txt"], kept=False, sample_index=1, outputs=["data.txt"])
    res = ds.build_dpo([], [good, bad])
    assert len(res.rows) == 1
    pair = res.rows[0]
    assert pair["split_turn"] == 4
    assert [m["content"] for m in pair["prompt"]][2:] == ["ls", "data.txt\n[exit code: 0]"]
    assert pair["chosen"][0] == {"role": "assistant", "content": "wc -l < data.txt > count.txt"}
    assert pair["rejected"][0] == {"role": "assistant", "content": "cat data.txt"}
    assert pair["chosen_source"] == "trajectory:s1/s1-0" and pair["rejected_source"] == "trajectory:s1/s1-1"


def test_dpo_ignores_environment_divergence_and_other_scenarios():
    a = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "t"},
        {"role": "assistant", "content": "ls"},
        {"role": "user", "content": "a"},
    ]
    b = a[:3] + [{"role": "user", "content": "b"}]
    assert ds.first_divergence(a, b) is None
    good = syn.trajectory("s1", "task one is here", ["ls"], kept=True)
    bad = syn.trajectory("s2", "task two is here", ["pwd"], kept=False)
    assert ds.build_dpo([], [good, bad]).rows == []


def test_dpo_from_traces_same_normalised_prompt():
    d = syn.demo_inputs()
    res = ds.build_dpo(d["segments"], [])
    assert len(res.rows) == 1
    pair = res.rows[0]
    assert pair["source_kind"] == "trace" and pair["repo"] == "repo-b"
    assert pair["chosen"][0]["content"] == "make docs" and pair["rejected"][0]["content"] == "make doc"


def test_contamination_check_finds_id_and_text():
    held = [ds.HeldOut(id="h1", task="Delete every file in /tmp/cache older than seven days.")]
    rows = [
        {"example_id": "a", "source": "x", "scenario_id": "h1", "messages": []},
        {
            "example_id": "b",
            "source": "y",
            "scenario_id": None,
            "messages": [
                {"role": "user", "content": "pls  DELETE every file in /tmp/cache older than seven days."}
            ],
        },
        {
            "example_id": "c",
            "source": "z",
            "scenario_id": "s",
            "messages": [{"role": "user", "content": "ok"}],
        },
    ]
    bad = ds.contamination_violations(rows, held)
    assert [b["row"] for b in bad] == ["a", "b"]


def _write_upstream(lake: Lake, d: dict) -> None:
    for repo in sorted({s["repo"] for s in d["segments"]}):
        segs = [s for s in d["segments"] if s["repo"] == repo]
        schema = pa.schema(
            [
                ("segment_id", pa.string()),
                ("session_id", pa.string()),
                ("repo", pa.string()),
                ("segment_index", pa.int32()),
                ("prompt", pa.large_string()),
                ("steps", pa.list_(STEP_ARROW_TYPE)),
                ("tier", pa.string()),
                ("quality_score", pa.float64()),
                ("verification_passed", pa.bool_()),
                ("override", pa.string()),
            ]
        )
        lake.write("tiered_traces", segs, partition=repo, schema=schema)
    lake.write("verified_trajectories", d["trajectories"])
    lake.write("gated_scenarios", d["scenarios"])


def test_assets_materialize_with_blocking_check_and_load_with_datasets(settings):
    from bashgym_assets.defs import datasets as dd
    from bashgym_assets.defs.resources import BashgymHome

    lake = Lake(settings)
    _write_upstream(lake, _inputs())
    res = dg.materialize(
        [dd.sft_dataset, dd.dpo_dataset, dd.sft_dataset_no_heldout, dd.dpo_dataset_no_heldout],
        resources={"bashgym": BashgymHome(home=str(settings.home))},
    )
    assert res.success
    checks = {e.check_name: e.passed for e in res.get_asset_check_evaluations()}
    assert checks == {"sft_dataset_no_heldout": True, "dpo_dataset_no_heldout": True}
    mat = res.asset_materializations_for_node("sft_dataset")[0]
    assert mat.metadata["rows"].value == 6 and mat.metadata["quarantined"].value == 3
    assert "repo-a" in [r.data["source"] for r in mat.metadata["sources"].records]
    assert mat.metadata["dagster/row_count"].value == 6
    assert "messages" in [c.name for c in mat.metadata["dagster/column_schema"].schema.columns]
    assert lake.read("sft_dataset_quarantine").num_rows == 3
    # every partition of tiered_traces was read
    assert {r for r in lake.read("sft_dataset").column("repo").to_pylist() if r} == {"repo-a", "repo-b"}
    hf = ds.load_hf_dataset(lake.table_path("sft_dataset"))
    assert len(hf["train"]) + len(hf["validation"]) == 6
    assert hf["train"][0]["messages"][0]["role"] == "system"
    assert all(spec.blocking for spec in dd.sft_dataset.check_specs)

    # a scenario moves to held-out after the dataset was built: the check (run alone) now fails
    scen = [dict(s, split="held_out") if s["id"] == "count-lines" else s for s in _inputs()["scenarios"]]
    lake.write("gated_scenarios", scen)
    res2 = dg.materialize(
        [dd.sft_dataset, dd.sft_dataset_no_heldout],
        selection=dg.AssetSelection.checks(dd.sft_dataset_no_heldout),
        resources={"bashgym": BashgymHome(home=str(settings.home))},
        raise_on_error=False,
    )
    ev = res2.get_asset_check_evaluations()[0]
    assert ev.passed is False and ev.metadata["violations"].value == 1


@pytest.mark.parametrize("empty", [True])
def test_assets_with_no_upstream_are_empty_not_fatal(settings, empty):
    from bashgym_assets.defs import datasets as dd
    from bashgym_assets.defs.resources import BashgymHome

    res = dg.materialize([dd.sft_dataset], resources={"bashgym": BashgymHome(home=str(settings.home))})
    assert res.success and Lake(settings).read("sft_dataset").num_rows == 0


def test_heldout_from_real_gated_rows_and_contamination() -> None:
    """gated_scenarios rows carry scenario_id + bundle_json (not id/task): the held-out list must still be built,
    so the contamination check sees held-out tasks on real data."""
    from bashgym_assets.scenarios.bundle import ScenarioBundle
    from bashgym_assets.scenarios.gate import HELD_OUT

    b = ScenarioBundle(
        id="purge-old-cache",
        task="Delete every file older than 7 days under ~/cache, keep the rest.",
        category="files",
        difficulty=1,
        setup=["true"],
        check="true",
        reference=["true"],
    )
    rows = [
        {"scenario_id": b.id, "admitted": True, "split": HELD_OUT, "bundle_json": b.model_dump_json()},
        {"scenario_id": "other", "admitted": True, "split": "train", "bundle_json": "{}"},
    ]
    held = ds.heldout_from_rows(rows)
    assert [(h.id, h.task) for h in held] == [(b.id, b.task)]
    leak = {
        "example_id": "x",
        "source": "trace:s#0",
        "scenario_id": None,
        "messages": [{"role": "user", "content": b.task}, {"role": "assistant", "content": "ls"}],
    }
    assert ds.contamination_violations([leak], held)


def test_sft_dataset_without_traces_keeps_only_scenario_trajectories(settings):
    """``include_traces: false`` (the learning-study profiles): the session traces' rows are left out, the
    verified trajectories' rows are all kept."""
    from bashgym_assets.defs import datasets as dd
    from bashgym_assets.defs.resources import BashgymHome

    lake = Lake(settings)
    _write_upstream(lake, _inputs())
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    assert dg.materialize([dd.sft_dataset], resources=resources).success
    every = lake.read_rows("sft_dataset")
    assert {r["source_kind"] for r in every} == {"trace", "trajectory"}
    config = {"ops": {"sft_dataset": {"config": {"include_traces": False}}}}
    assert dg.materialize([dd.sft_dataset], resources=resources, run_config=config).success
    rows = lake.read_rows("sft_dataset")
    assert {r["source_kind"] for r in rows} == {"trajectory"}
    assert sorted(r["example_id"] for r in rows) == sorted(
        r["example_id"] for r in every if r["source_kind"] == "trajectory"
    )
