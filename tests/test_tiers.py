"""Segmentation, the six metrics and tiers on sessions whose expected results were worked out by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bashgym_assets.lake import Lake
from bashgym_assets.quality.metrics import WEIGHTS, length_score, score_steps
from bashgym_assets.quality.overrides import (
    UnknownTrace,
    clear_override,
    demote_trace,
    load_overrides,
    promote_trace,
)
from bashgym_assets.quality.report import tier_histogram_png, tier_report_markdown
from bashgym_assets.quality.segment import segment_session
from bashgym_assets.quality.tiers import classify, tier_session, traces_from_table, traces_to_table
from bashgym_assets.sessions import Prompt, Session, Step

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _step(
    i: int,
    tool: str,
    *,
    cmd: str | None = None,
    inp: dict | None = None,
    ok: bool = True,
    at: float,
    cwd: str = "/w/app",
    prompt: int = 0,
    output: str = "",
) -> Step:
    start = T0 + timedelta(seconds=at)
    inp = inp if inp is not None else ({"command": cmd} if cmd else {})
    return Step(
        index=i,
        tool_name=tool,
        input=json.dumps(inp),
        command=cmd,
        output=output,
        exit_code=(0 if ok else 1) if tool == "Bash" else None,
        success=ok,
        is_error=not ok,
        cwd=cwd,
        started_at=start,
        finished_at=start + timedelta(seconds=2),
        prompt_index=prompt,
    )


def _session(steps: list[Step], prompts: list[Prompt], sid: str = "sess-1") -> Session:
    return Session(
        session_id=sid,
        source_format="claude_code",
        source_path=f"/x/{sid}.jsonl",
        repo="app",
        cwd="/w/app",
        prompts=prompts,
        steps=steps,
    )


# ---- segmentation ---------------------------------------------------------------------------------------


def _segmentation_session() -> Session:
    prompts = [
        Prompt(index=0, text="Add a --verbose flag to the CLI"),
        Prompt(index=1, text="Summary of the conversation so far ...", kind="compaction_summary"),
        Prompt(index=2, text="Now document the flag in the README"),
    ]
    steps = [
        _step(0, "Bash", cmd="ls", at=0),  # start
        _step(1, "Bash", cmd="cat cli.py", at=20, cwd="/w/app/src"),  # subdir: same task
        _step(2, "Edit", inp={"file_path": "/w/app/src/cli.py"}, at=40, cwd="/w/app/src"),
        _step(3, "Bash", cmd="pytest -q", at=600, cwd="/w/app"),  # 9+ minutes later: gap
        _step(4, "Bash", cmd="git add -A && git commit -m 'verbose flag'", at=620),
        _step(5, "Bash", cmd="git log -1", at=640, prompt=1),  # after a commit; summary
        _step(6, "Bash", cmd="ls", at=660, cwd="/w/other"),  # another tree
        _step(7, "Bash", cmd="cat README.md", at=680, cwd="/w/other", prompt=2),  # new real prompt
    ]
    return _session(steps, prompts)


def test_segment_boundaries_and_prompts() -> None:
    segs = segment_session(_segmentation_session())
    assert [[s.index for s in seg.steps] for seg in segs] == [[0, 1, 2], [3, 4], [5], [6], [7]]
    assert [seg.boundary for seg in segs] == ["start", "gap", "git_commit", "cwd_change", "new_prompt"]
    assert [seg.prompt for seg in segs] == ["Add a --verbose flag to the CLI"] * 4 + [
        "Now document the flag in the README"
    ]
    assert [seg.segment_index for seg in segs] == [0, 1, 2, 3, 4]
    assert segs[0].started_at == T0 and segs[0].ended_at == T0 + timedelta(seconds=42)


def test_segment_ids_are_stable_and_unique() -> None:
    a = [s.segment_id for s in segment_session(_segmentation_session())]
    b = [s.segment_id for s in segment_session(_segmentation_session())]
    assert a == b and len(set(a)) == len(a)
    assert all(i.startswith("seg-") for i in a)


def test_gap_threshold_is_five_minutes() -> None:
    steps = [
        _step(0, "Bash", cmd="ls", at=0),
        _step(1, "Bash", cmd="ls", at=2 + 300),
        _step(2, "Bash", cmd="ls", at=304 + 301),
    ]
    segs = segment_session(_session(steps, [Prompt(index=0, text="p")]))
    assert [[s.index for s in seg.steps] for seg in segs] == [[0, 1], [2]]


def test_failed_commit_does_not_cut() -> None:
    steps = [
        _step(0, "Bash", cmd="git commit -m x", ok=False, at=0),
        _step(1, "Bash", cmd="git status", at=20),
    ]
    assert len(segment_session(_session(steps, [Prompt(index=0, text="p")]))) == 1


# ---- metrics and tiers, worked out by hand -----------------------------------------------------------------


def _tiers_session() -> Session:
    prompts = [
        Prompt(index=i, text=t)
        for i, t in enumerate(
            [
                "fix the discount bug",
                "look at the files",
                "find foo",
                "finish the feature",
                "run the broken thing",
            ]
        )
    ]
    s: list[Step] = []

    def add(tool: str, prompt: int, **kw) -> None:
        s.append(_step(len(s), tool, at=20 * len(s), prompt=prompt, **kw))

    # A: gold. 8 steps all ok; 4 tools; pytest and ruff pass; pipes, &&, redirection, loop, $(), 2 files edited
    add("Read", 0, inp={"file_path": "/w/app/orders.py"})
    add("Grep", 0, inp={"pattern": "discount"})
    add("Edit", 0, inp={"file_path": "/w/app/orders.py", "old_string": "a", "new_string": "b"})
    add("Edit", 0, inp={"file_path": "/w/app/test_orders.py", "old_string": "c", "new_string": "d"})
    add("Bash", 0, cmd="pytest -q tests/test_orders.py 2>&1 | tail -5")
    add("Bash", 0, cmd="git diff --stat && git status")
    add("Bash", 0, cmd="ruff check . > /tmp/lint.txt")
    add("Bash", 0, cmd="for f in $(git diff --name-only); do wc -l $f; done")
    # B: silver. 4 Bash steps, one fails
    add("Bash", 1, cmd="ls")
    add("Bash", 1, cmd="cat a.txt", ok=False)
    add("Bash", 1, cmd="cat b.txt")
    add("Bash", 1, cmd="wc -l b.txt")
    # C: bronze. 5 Bash steps, two fail (the second a blind retry)
    add("Bash", 2, cmd="ls src")
    add("Bash", 2, cmd="cat src/x.py", ok=False)
    add("Bash", 2, cmd="cat src/x.py", ok=False)
    add("Bash", 2, cmd="find src -name '*.py' | xargs grep -n foo")
    add("Bash", 2, cmd="grep -rn foo src > hits.txt")
    # D: 9 of 10 steps ok, but the last test run (npm test) fails -> failed
    add("Read", 3, inp={"file_path": "/w/app/a.ts"})
    add("Edit", 3, inp={"file_path": "/w/app/a.ts"})
    add("Edit", 3, inp={"file_path": "/w/app/b.ts"})
    add("Read", 3, inp={"file_path": "/w/app/b.ts"})
    add("Bash", 3, cmd="pytest -x")
    add("Edit", 3, inp={"file_path": "/w/app/c.ts"})
    add("Bash", 3, cmd="pytest -x")
    add("Edit", 3, inp={"file_path": "/w/app/d.ts"})
    add("Bash", 3, cmd="ls")
    add("Bash", 3, cmd="npm test", ok=False)
    # E: everything fails
    for _ in range(3):
        add("Bash", 4, cmd="./deploy.sh", ok=False)
    return _session(s, prompts, sid="tiers-1")


def test_hand_computed_scores_and_tiers() -> None:
    traces = tier_session(_tiers_session())
    assert [t.tier for t in traces] == ["gold", "silver", "bronze", "failed", "failed"]
    a, b, c, d, e = traces
    # A: every metric is maxed (see the comment in _tiers_session)
    assert (
        a.quality_score == pytest.approx(1.0) and a.verification_passed is True and a.verification_runs == 2
    )
    # B: success 3/4; no verification 0.5; complexity 0.4*1/4 + 0 = 0.1; length exp(-(ln4-ln8)^2/2) = 0.7865;
    #    diversity 1/3; efficiency 3/4  -> 0.225 + 0.125 + 0.015 + 0.07865 + 0.03333 + 0.075 = 0.5520
    assert (b.success_rate, b.verification_score, b.complexity_score) == (0.75, 0.5, 0.1)
    assert b.length_score == pytest.approx(0.7865, abs=1e-4) and b.efficiency_score == 0.75
    assert b.quality_score == pytest.approx(0.5520, abs=1e-4) and b.verification_passed is None
    # C: success 3/5; complexity 0.1 + 0.6 * 3/6 (pipe, redirection, xargs) = 0.4; length(5) = 0.8954;
    #    efficiency 3/5 -> 0.18 + 0.125 + 0.06 + 0.08954 + 0.03333 + 0.06 = 0.5479: success < 0.75, so bronze
    assert (c.success_rate, c.complexity_score, c.efficiency_score) == (0.6, 0.4, 0.6)
    assert c.quality_score == pytest.approx(0.5479, abs=1e-4)
    # D: success 0.9 but the last verification (npm test) failed
    assert d.success_rate == 0.9 and d.verification_passed is False and "verification failed" in d.tier_reason
    assert d.verification_score == pytest.approx(0.5 * 2 / 3, abs=1e-4)
    # E: success 0 -> failed
    assert e.success_rate == 0.0 and "below bronze" in e.tier_reason
    assert [t.boundary for t in traces] == ["start"] + ["new_prompt"] * 4
    assert [t.prompt for t in traces] == [p.text for p in _tiers_session().prompts]


@pytest.mark.parametrize(
    ("success", "quality", "verified", "tier"),
    [
        (0.90, 0.75, None, "gold"),
        (0.89, 0.99, True, "silver"),
        (1.0, 0.74, True, "silver"),
        (0.75, 0.55, None, "silver"),
        (0.74, 0.90, None, "bronze"),
        (0.60, 0.40, None, "bronze"),
        (0.59, 0.99, True, "failed"),
        (0.99, 0.39, None, "failed"),
        (1.0, 1.0, False, "failed"),
    ],
)
def test_seed_thresholds(success: float, quality: float, verified: bool | None, tier: str) -> None:
    assert classify(success, quality, verified)[0] == tier


def test_weights_and_length_curve() -> None:
    assert sum(WEIGHTS.values()) == pytest.approx(1.0)
    assert length_score(8) == 1.0 and length_score(4) == pytest.approx(length_score(16))
    assert length_score(1) < length_score(2) < length_score(8) > length_score(30)


def test_no_results_means_no_success_evidence() -> None:
    steps = [Step(index=0, tool_name="Bash", command="ls", input="{}")]
    assert score_steps(steps).success_rate == 0.0


# ---- overrides --------------------------------------------------------------------------------------------


def test_promote_and_demote_survive_rematerialization(settings) -> None:
    session = _tiers_session()
    lake = Lake(settings)
    lake.write("tiered_traces", traces_to_table(tier_session(session)), "app")
    traces = traces_from_table(lake.read("tiered_traces", "app"))
    failed_id, gold_id = traces[4].segment_id, traces[0].segment_id

    promote_trace(failed_id, "deploy script was broken upstream; the agent's steps were right", settings)
    demote_trace(gold_id, "tests passed but it changed the wrong discount", settings)
    rows = {t.segment_id: t for t in traces_from_table(lake.read("tiered_traces", "app"))}
    assert rows[failed_id].tier == "gold" and rows[failed_id].override == "promote"
    assert rows[gold_id].tier == "failed" and rows[gold_id].override_reason.startswith("tests passed")
    assert rows[gold_id].computed_tier == "gold"

    # a later materialization recomputes everything and still applies the decisions
    again = {t.segment_id: t for t in tier_session(session, load_overrides(settings))}
    assert again[failed_id].tier == "gold" and again[gold_id].tier == "failed"
    assert "manually demoted" in again[gold_id].tier_reason

    assert clear_override(gold_id, settings) is True
    rows = {t.segment_id: t for t in traces_from_table(lake.read("tiered_traces", "app"))}
    assert rows[gold_id].tier == "gold" and rows[gold_id].override is None
    assert set(load_overrides(settings)) == {failed_id}


def test_override_input_is_checked(settings) -> None:
    lake = Lake(settings)
    lake.write("tiered_traces", traces_to_table(tier_session(_tiers_session())), "app")
    with pytest.raises(UnknownTrace, match="no trace 'seg-doesnotexist'"):
        promote_trace("seg-doesnotexist", "why not", settings)
    seg = traces_from_table(lake.read("tiered_traces", "app"))[0].segment_id
    with pytest.raises(ValueError, match="reason is required"):
        demote_trace(seg, "  ", settings)
    with pytest.raises(ValueError, match="not a trace id"):
        demote_trace("../../etc/passwd", "x", settings)


def test_report_has_plot_distributions_and_examples() -> None:
    traces = tier_session(_tiers_session())
    png = tier_histogram_png(traces)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    md = tier_report_markdown(traces, png)
    assert "data:image/png;base64," in md and "| quality_score |" in md
    assert "**Best**" in md and "**Worst**" in md and traces[0].segment_id in md
