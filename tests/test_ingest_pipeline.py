"""Repo keys, the Bash Gym trace adapter, and whole-partition ingest into the lake."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from bashgym_assets.ingest import SAMPLE_TRACES_DIR
from bashgym_assets.ingest.bashgym_trace import BashGymTraceAdapter
from bashgym_assets.ingest.hook import capture_event
from bashgym_assets.ingest.pipeline import RAW_SESSIONS, discover_repos, ingest_repo
from bashgym_assets.ingest.repos import NO_REPO_KEY, detect_repo, key_from_remote, sanitize_key
from bashgym_assets.lake import Lake
from bashgym_assets.sessions import sessions_from_table
from bashgym_assets.testing.traces import write_sample_traces


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("webshop", "webshop"),
        ("my repo/../x", "my-repo-.-x"),
        ("...", NO_REPO_KEY),
        ("", NO_REPO_KEY),
        ("a..b", "a.b"),
        ("Ünïcode proj", "n-code-proj"),
        ("-.hidden", "hidden"),
    ],
)
def test_sanitize_key(name: str, key: str) -> None:
    got = sanitize_key(name)
    assert got == key
    assert "/" not in got and ".." not in got


def test_repo_detection_from_git_and_from_paths(tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    (repo / "src" / "deep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/widgets.git"], check=True
    )
    info = detect_repo(str(repo / "src" / "deep"))
    assert info.key == "checkout" and info.path == str(repo) and info.remote.endswith("widgets.git")
    plain = tmp_path / "no-remote"
    plain.mkdir()
    subprocess.run(["git", "init", "-q", str(plain)], check=True)
    assert detect_repo(str(plain)).key == "no-remote"
    assert detect_repo("/home/demo/projects/webshop").key == "webshop"  # gone folder: its name
    for nowhere in (None, "", "/", "/home/demo", "/Users/dana", "/root"):
        assert detect_repo(nowhere).key == NO_REPO_KEY
    assert key_from_remote("https://gitlab.example.com/group/sub/proj.git") == "sub__proj"


def _settled(path: Path) -> Path:
    old = time.time() - 60
    os.utime(path, (old, old))
    return path


def test_bashgym_trace_adapter(tmp_path: Path) -> None:
    repo = {
        "path": "/home/u/code/api",
        "name": "api",
        "git_remote": "git@github.com:u/api.git",
        "git_branch": "dev",
        "is_git_repo": True,
    }
    steps = [
        {
            "step_id": "1",
            "timestamp": "2026-01-02T10:00:00+00:00",
            "tool_name": "Bash",
            "command": "pytest",
            "output": "1 failed",
            "exit_code": 1,
            "cwd": "/home/u/code/api",
            "success": False,
            "repo": repo,
        },
        {
            "step_id": "2",
            "timestamp": "2026-01-02T10:01:00+00:00",
            "tool_name": "Bash",
            "command": "pytest",
            "output": "3 passed",
            "exit_code": 0,
            "cwd": "/home/u/code/api",
            "success": True,
            "repo": repo,
        },
        {"no": "tool name"},
    ]
    raw = tmp_path / "session_20260102_100000_abcd1234.json"
    raw.write_text(json.dumps(steps))
    _settled(raw)
    wrapped = tmp_path / "gold.json"
    wrapped.write_text(
        json.dumps(
            {
                "trace": steps[:2],
                "metadata": {"session_id": "g1", "user_prompt": "fix tests"},
                "primary_repo": repo,
            }
        )
    )
    _settled(wrapped)
    adapter = BashGymTraceAdapter()
    out = adapter.parse(raw)
    (s,) = out.sessions
    assert (
        s.session_id == "20260102_100000_abcd1234"
        and s.repo == "api"
        and s.repo_remote == "git@github.com:u/api.git"
        and s.git_branch == "dev"
    )
    assert [(x.exit_code, x.success) for x in s.steps] == [(1, False), (0, True)]
    assert [(q.line, q.reason) for q in out.quarantine] == [(3, "step record without tool_name")]
    (g,) = adapter.parse(wrapped).sessions
    assert g.session_id == "g1" and g.prompts[0].text == "fix tests" and g.steps[1].prompt_index == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _settled(bad)
    assert "invalid JSON document" in adapter.parse(bad).quarantine[0].reason


def test_bundled_sample_traces_are_the_generator_output(tmp_path: Path) -> None:
    write_sample_traces(tmp_path)
    bundled = sorted(p.relative_to(SAMPLE_TRACES_DIR) for p in SAMPLE_TRACES_DIR.rglob("*.jsonl"))
    assert bundled == sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.jsonl"))
    assert 6 <= sum(1 for p in bundled if "subagents" not in str(p)) <= 12
    for rel in bundled:
        assert (SAMPLE_TRACES_DIR / rel).read_bytes() == (tmp_path / rel).read_bytes(), rel
    assert sum(p.stat().st_size for p in SAMPLE_TRACES_DIR.rglob("*")) < 300_000
    text = "".join(p.read_text() for p in SAMPLE_TRACES_DIR.rglob("*.jsonl"))
    for planted in ("AKIA", "ghp_", "@example.com", "S3cretPassw0rd!@db.internal"):
        assert planted in text


def test_ingest_sample_traces_into_the_lake(settings) -> None:
    lake = Lake(settings)
    dirs = [SAMPLE_TRACES_DIR]
    assert discover_repos(dirs) == [NO_REPO_KEY, "datapipe", "infra-scripts", "webshop"]
    report = ingest_repo(lake, dirs, "webshop")
    assert report.sessions == 3 and report.quarantine == [] and report.tools["Bash"] == 12
    sessions = sessions_from_table(lake.read(RAW_SESSIONS, "webshop"))
    assert {s.repo for s in sessions} == {"webshop"}
    assert sum(len(s.steps) for s in sessions) == report.steps == 20
    con = lake.connect()
    assert con.execute("select count(*) from raw_sessions").fetchall() == [(3,)]
    failed = con.execute(
        "select count(*) from (select unnest(steps) as s from raw_sessions) where s.success = false"
    )
    assert failed.fetchall() == [(report.failed_steps,)] and report.failed_steps == 4


def test_reingest_is_idempotent_and_keeps_sessions_whose_file_vanished(tmp_path: Path, settings) -> None:
    traces = tmp_path / "projects"
    write_sample_traces(traces)
    lake = Lake(settings)
    first = ingest_repo(lake, [traces], "datapipe")
    again = ingest_repo(lake, [traces], "datapipe")
    assert first.sessions == again.sessions == 2 and lake.read(RAW_SESSIONS, "datapipe").num_rows == 2
    victim = next((traces / "-home-demo-projects-datapipe").glob("*.jsonl"))
    victim.unlink()
    kept = ingest_repo(lake, [traces], "datapipe")
    assert kept.sessions == 2 and kept.carried_over == 1
    ids = lake.read(RAW_SESSIONS, "datapipe").column("session_id").to_pylist()
    assert sorted(ids) == sorted(set(ids)) and victim.stem in ids


def test_transcript_wins_over_the_hook_capture_of_the_same_session(tmp_path: Path, settings) -> None:
    traces = tmp_path / "projects"
    write_sample_traces(traces)
    transcript = next((traces / "-home-demo-projects-infra-scripts").glob("*.jsonl"))
    capture = tmp_path / "capture"
    for event in (
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": transcript.stem,
            "cwd": "/home/demo/projects/infra-scripts",
            "prompt": "write a backup script",
        },
        {
            "hook_event_name": "PostToolUse",
            "session_id": transcript.stem,
            "cwd": "/home/demo/projects/infra-scripts",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_response": {"stdout": "a", "stderr": ""},
        },
        {
            "hook_event_name": "PostToolUse",
            "session_id": "only-captured",
            "cwd": "/home/demo/projects/infra-scripts",
            "tool_name": "Bash",
            "tool_input": {"command": "make"},
            "tool_response": {"stdout": "ok", "stderr": ""},
        },
    ):
        capture_event(json.dumps(event).encode(), capture)
    lake = Lake(settings)
    report = ingest_repo(lake, [traces, capture], "infra-scripts")
    assert report.sessions == 3 and report.duplicates_dropped == 1
    by_id = {s.session_id: s for s in sessions_from_table(lake.read(RAW_SESSIONS, "infra-scripts"))}
    assert by_id[transcript.stem].source_format == "claude_code"
    assert by_id["only-captured"].source_format == "claude_code_hook"


def test_fast_table_build_equals_the_schema_helper() -> None:
    from bashgym_assets.ingest.pipeline import IngestReport, parse_sources, session_sources, session_table
    from bashgym_assets.sessions import Session, sessions_to_table

    sessions = list(parse_sources(session_sources([SAMPLE_TRACES_DIR]), IngestReport(repo="*")))
    assert len(sessions) == 8
    assert session_table(sessions).equals(sessions_to_table(sessions))
    for s in sessions:  # the unvalidated fast construction still yields valid models
        assert Session.model_validate(s.model_dump()) == s


def test_generated_corpus_imports_with_the_generator_totals(tmp_path: Path, settings) -> None:
    from bashgym_assets.testing.traces import generate_corpus

    totals = generate_corpus(tmp_path / "corpus", 3_000_000, seed=11, repos=3)
    lake = Lake(settings)
    dirs = [tmp_path / "corpus"]
    reports = [ingest_repo(lake, dirs, repo) for repo in discover_repos(dirs)]
    assert sum(r.sessions for r in reports) == totals["files"]
    assert sum(r.steps for r in reports) == totals["steps"]
    assert sum(r.failed_steps for r in reports) == totals["failed"]
    assert sum(r.bytes_read for r in reports) == totals["bytes"]
    assert all(r.quarantine == [] for r in reports)
    subagent_steps = (
        lake.connect()
        .execute("select count(*) from (select unnest(steps) as s from raw_sessions) where s.sidechain")
        .fetchall()[0][0]
    )
    assert subagent_steps == totals["subagent_files"]  # one Grep per generated subagent


def test_partition_ingest_uses_the_sensor_cursor_instead_of_reading_every_file(
    tmp_path: Path, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scale (issue 14): a partition run must not read the head of every other repo's file to find its own.

    With the sensor's cursor in the lake, only files changed since its tick are peeked; the result is the same.
    """
    from bashgym_assets.ingest.claude_code import ClaudeCodeAdapter
    from bashgym_assets.ingest.scan import CursorStore, _repo_key_cached, scan

    traces = tmp_path / "projects"
    write_sample_traces(traces)
    for path in traces.rglob("*.jsonl"):
        _settled(path)
    lake = Lake(settings)
    expected = ingest_repo(lake, [traces], "webshop").sessions
    store = CursorStore(lake.artifact_dir("ingest", "scan_cursors"))
    store.save(scan([traces]).cursor)
    moved = next((traces / "-home-demo-projects-datapipe").glob("*.jsonl"))  # rewritten after the tick
    moved.write_text(moved.read_text().replace("/home/demo/projects/datapipe", "/home/demo/projects/webshop"))
    peeked: list[str] = []
    real_peek = ClaudeCodeAdapter.peek_cwd
    monkeypatch.setattr(
        ClaudeCodeAdapter, "peek_cwd", lambda self, path: peeked.append(path.name) or real_peek(self, path)
    )
    _repo_key_cached.cache_clear()
    report = ingest_repo(lake, [traces], "webshop")
    assert peeked == [moved.name]  # without the index: every session file under the folders
    assert report.sessions == expected + 1
    assert moved.stem in lake.read(RAW_SESSIONS, "webshop").column("session_id").to_pylist()


def test_files_an_ingest_read_as_they_are_start_no_new_work(tmp_path: Path, settings) -> None:
    """Issue 40: `make ui` after `make demo` re-ingested every sample repository, because the trace sensor's cursor
    was new. An ingest records what it read; a scan's changes less those files is what is left to do."""
    from bashgym_assets.ingest.pipeline import ingested_files, not_yet_ingested
    from bashgym_assets.ingest.scan import scan

    traces = tmp_path / "projects"
    write_sample_traces(traces)
    for path in traces.rglob("*.jsonl"):
        _settled(path)
    lake = Lake(settings)
    for repo in ("webshop", "datapipe"):
        ingest_repo(lake, [traces], repo)  # what the demo (or any run of raw_sessions) does
    webshop = sorted(str(p) for p in (traces / "-home-demo-projects-webshop").glob("*.jsonl"))
    assert sorted(ingested_files(lake, "webshop")) == webshop
    # a session's subagent file is read with the session (not as a source of its own): on record too
    subagent = next((traces / "-home-demo-projects-datapipe").glob("*/subagents/agent-*.jsonl"))
    assert str(subagent) in ingested_files(lake, "datapipe")
    fresh = scan([traces])  # a sensor that never ticked over this data folder: every file is new to it
    assert {"webshop", "datapipe", "infra-scripts"} <= set(fresh.changed)
    assert str(subagent) in fresh.changed["datapipe"]
    todo = not_yet_ingested(lake, fresh.changed, fresh.cursor.files)
    assert "webshop" not in todo and "datapipe" not in todo
    assert todo["infra-scripts"] == fresh.changed["infra-scripts"]

    grown = Path(webshop[0])  # a file that changed since it was read is work again, and only that file
    with open(grown, "a") as fh:
        fh.write(grown.read_text().splitlines()[-1] + "\n")
    again = scan([traces], fresh.cursor)
    assert not_yet_ingested(lake, again.changed, again.cursor.files) == {"webshop": [str(grown)]}
    assert not_yet_ingested(lake, fresh.changed, scan([traces]).cursor.files)["webshop"] == [str(grown)]

    lake.delete(RAW_SESSIONS, "webshop")  # the partition gone: nothing is on record any more
    assert ingested_files(lake, "webshop") == {}
    assert "webshop" in not_yet_ingested(lake, fresh.changed, fresh.cursor.files)
