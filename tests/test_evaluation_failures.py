"""The failure-detail classifier (``evaluation.failures``) on recorded transcripts, and where its classes show up:
the episode row (old lake rows still read), the summary, the report and the MLflow metrics."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from failure_transcripts import CLEAN_TMP, COUNT_DIR1, LINES_TO_ANSWER, Case, cases, recorded

from bashgym_assets.evaluation import failures, report, tracking
from bashgym_assets.evaluation.metrics import EVAL_EPISODE_SCHEMA, EvalEpisode, summarize

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_recorded_episode_gets_its_detail_class(case: Case) -> None:
    d = failures.diagnose(case.episode, case.scenario)
    assert d.detail == case.detail, d.evidence
    assert set(case.also) <= set(d.tags), d.evidence
    assert d.tags[:1] == ([case.detail] if case.detail else [])
    assert set(d.evidence) == set(d.tags) and all(d.evidence.values())


def test_every_class_is_covered_three_times_and_negatives_get_none() -> None:
    counts = Counter(c.detail for c in CASES)
    for cls in failures.DETAIL_CLASSES:
        assert counts[cls] >= 3, cls
    negatives = [c for c in CASES if not c.detail]
    assert {c.episode.failure_class for c in negatives} == {
        "",
        "setup_failed",
        "sandbox_error",
        "operator_error",
    }


def test_the_issues_examples_say_why() -> None:
    by_name = {c.name: c for c in CASES}
    d = failures.diagnose(by_name["cd-home-dir1-then-exit"].episode, COUNT_DIR1)
    assert "/root/dir1" in d.evidence["wrong_path"] and "/app/dir1" in d.evidence["wrong_path"]
    d = failures.diagnose(by_name["ls-wc-five-times"].episode, COUNT_DIR1)
    assert d.evidence["repeated_command"] == "`ls -l | wc -l` 5 times"
    d = failures.diagnose(by_name["bash-l-answer-txt"].episode, LINES_TO_ANSWER)
    assert "answer.txt" in d.evidence["wrong_output_file"]


def test_without_the_scenario_the_transcript_still_says_where_and_who() -> None:
    """Old rows or a scenario gone: the orientation gives the user and directory, the task its values."""
    ep = next(c.episode for c in CASES if c.name == "cd-home-dir1-then-exit")
    facts = failures.facts_of_messages(ep.messages)
    assert (facts.user, facts.start_dir, facts.home) == ("root", "/app", "/root")
    assert failures.diagnose(ep).detail == "wrong_path"  # bash named /root/dir1, which is nowhere on the map
    ep = next(c.episode for c in CASES if c.name == "exit-at-once")
    assert failures.diagnose(ep).detail == "premature_exit"


def test_a_cd_that_failed_does_not_move_the_working_directory() -> None:
    ep = recorded(
        COUNT_DIR1,
        [
            ("cd /srv/dir1", "bash: cd: /srv/dir1: No such file or directory\n[exit code: 1]"),
            ("ls dir1 | wc -l > answer.txt", "[exit code: 0]"),
            ("exit", None),
        ],
    )
    steps = failures.steps_of(ep, failures.facts_of_bundle(COUNT_DIR1))
    assert [s.cwd for s in steps] == ["/app", "/app", "/app"]
    d = failures.diagnose(ep, COUNT_DIR1)
    assert d.detail == "wrong_path" and "wrong_output_file" not in d.tags  # answer.txt was written, in /app


def test_state_changing_commands() -> None:
    def changes(text: str) -> bool:
        return any(failures.state_changing(c) for c in failures.shell.parse(text).commands)

    for text in ("ls -la", "cat a | grep x | wc -l", "find . -name '*.tmp'", "sed 's/a/b/' f", "git status"):
        assert not changes(text), text
    for text in (
        "echo x > f",
        "find . -delete",
        "sed -i 's/a/b/' f",
        "sort -o out in",
        "python3 fix.py",
        "rm f",
    ):
        assert changes(text), text
    assert not changes("ls > /dev/null 2>&1")


def test_diagnosis_is_deterministic_and_stored_on_the_row() -> None:
    stored = [failures.with_detail(c.episode, c.scenario).failure_detail for c in CASES]
    assert stored == [failures.with_detail(c.episode, c.scenario).failure_detail for c in CASES]
    annotated = failures.annotate([c.episode for c in CASES], [c.scenario for c in CASES])
    assert [failures.detail_of(e) for e in annotated] == [c.detail for c in CASES]
    assert annotated[0].failure_detail.startswith("wrong_path,")


def test_old_lake_rows_without_the_field_still_read() -> None:
    old_schema = pa.schema([f for f in EVAL_EPISODE_SCHEMA if f.name != "failure_detail"])
    old_row = {k: v for k, v in CASES[0].episode.model_dump().items() if k != "failure_detail"}
    old = pa.Table.from_pylist([old_row], schema=old_schema)
    new = pa.Table.from_pylist(
        [failures.with_detail(CASES[0].episode, CASES[0].scenario).model_dump()], schema=EVAL_EPISODE_SCHEMA
    )
    rows = pa.concat_tables([old, new], promote_options="permissive").to_pylist()
    eps = [EvalEpisode.model_validate(r) for r in rows]
    assert [failures.detail_of(e) for e in eps] == ["", "wrong_path"]
    assert EvalEpisode.model_validate(old_row).failure_detail == ""


def _annotated() -> list[EvalEpisode]:
    eps = failures.annotate([c.episode for c in CASES], [c.scenario for c in CASES])
    base = [
        failures.with_detail(e.model_copy(update={"model": "base"}), COUNT_DIR1)
        for e in eps
        if e.scenario_id == COUNT_DIR1.id
    ]
    return eps + base


def test_counts_per_model_and_set_in_the_summary_report_and_mlflow_metrics() -> None:
    eps = _annotated()
    cand = [e for e in eps if e.model == "candidate"]
    s = summarize("candidate", cand)
    assert s.failure_details["wrong_path"] == 3 and s.failure_details["other"] == 3
    assert sum(s.failure_details.values()) == len([c for c in CASES if c.detail])
    assert tracking._metrics([s])["candidate_detail_wrong_flag"] == 3

    set_of = {c.scenario.id: ("fit" if c.scenario.id == COUNT_DIR1.id else "unseen") for c in CASES}
    by_set = report.split_by_set(eps, set_of)
    rows = report.failure_detail_rows(by_set)
    assert [(r["set"], r["model"]) for r in rows] == [
        ("fit", "candidate"),
        ("fit", "base"),
        ("unseen", "candidate"),
    ]
    fit = rows[0]
    assert fit["wrong_path"] == 1 and fit["premature_exit"] == 1 and fit["repeated_command"] == 1
    assert fit["failed"] == sum(fit[c] for c in failures.DETAIL_CLASSES)
    metrics = tracking.detail_metrics(rows)
    assert (
        metrics["fit/base_detail_wrong_path"] == 1 and metrics["unseen/candidate_failed"] == rows[2]["failed"]
    )

    md = report.failure_details_report(by_set, per_class=3, transcripts_of="candidate")
    assert "| set | model | n | failed |" in md
    for cls in failures.DETAIL_CLASSES:
        section = md.split(f"### {cls}\n", 1)[1].split("\n### ", 1)[0]
        assert 1 <= section.count("by `candidate`") <= 3, cls
    wp = md.split("### wrong_path\n", 1)[1].split("\n### ", 1)[0]
    assert section and wp.count("by `candidate`") == 3 and "failed: wrong_result / wrong_path" in wp


def test_three_transcripts_per_class_prefer_different_scenarios() -> None:
    same = [
        failures.with_detail(recorded(CLEAN_TMP, [("pwd", "/home/operator\n[exit code: 0]")] * 10), CLEAN_TMP)
        for _ in range(4)
    ]
    other = failures.with_detail(
        recorded(COUNT_DIR1, [("ls", "dir1\n[exit code: 0]")] * 3 + [("exit", None)])
    )
    picked = report.detail_transcripts([*same, other], per_class=3)["repeated_command"]
    assert len(picked) == 3 and {e.scenario_id for e in picked} == {CLEAN_TMP.id, COUNT_DIR1.id}


@pytest.mark.slow
def test_the_evaluation_run_in_mlflow_carries_the_counts_and_the_table(settings, tmp_path) -> None:
    from bashgym_assets.training import registry

    eps = _annotated()
    by_set = {"fit": [e for e in eps if e.scenario_id == COUNT_DIR1.id], "unseen": eps}
    rows = report.failure_detail_rows(by_set)
    (tmp_path / "comparison.md").write_text("table")
    (tmp_path / "failure_details.md").write_text(
        report.failure_details_report(by_set, transcripts_of="candidate")
    )
    links = tracking.log_to_mlflow(
        settings,
        eval_id="eval-details",
        summaries=[summarize("candidate", [e for e in eps if e.model == "candidate"])],
        decision=tracking._manual("1", "test", False),
        promoted=False,
        candidate_run_id=None,
        specs=[],
        report_dir=tmp_path,
        failure_details=rows,
    )
    c = registry.client(settings)
    run = c.get_run(links["evaluation_run_id"])
    assert run.data.metrics["candidate_detail_wrong_path"] == 3
    assert run.data.metrics["fit/base_detail_wrong_path"] == 1
    assert run.data.metrics["unseen/candidate_failed"] == rows[2]["failed"]
    names = {a.path for a in c.list_artifacts(links["evaluation_run_id"])}
    assert {"failure_details.md", "failure_details.json"} <= names
