"""Bad input never crashes the import, is quarantined with its reason, and never costs the valid lines."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bashgym_assets.ingest.base import MAX_LINE_BYTES
from bashgym_assets.ingest.claude_code import ClaudeCodeAdapter
from bashgym_assets.ingest.pipeline import QUARANTINE, ingest_repo
from bashgym_assets.ingest.repos import NO_REPO_KEY
from bashgym_assets.lake import Lake

ADAPTER = ClaudeCodeAdapter()


def _good_lines(n_tools: int, cwd: str = "/work/repo-x") -> list[bytes]:
    lines = [
        {
            "type": "user",
            "uuid": "p",
            "cwd": cwd,
            "sessionId": "s",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "do things"},
        }
    ]
    for i in range(n_tools):
        lines.append(
            {
                "type": "assistant",
                "uuid": f"a{i}",
                "cwd": cwd,
                "timestamp": "2026-01-01T00:00:01Z",
                "message": {
                    "id": f"m{i}",
                    "content": [
                        {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"echo {i}"}}
                    ],
                },
            }
        )
        lines.append(
            {
                "type": "user",
                "uuid": f"r{i}",
                "cwd": cwd,
                "timestamp": "2026-01-01T00:00:02Z",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": str(i)}],
                },
            }
        )
    return [json.dumps(x).encode() + b"\n" for x in lines]


def _settle(path: Path) -> None:
    old = time.time() - 60
    os.utime(path, (old, old))


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (b'{"type": "user", "message": {"content": "trunc\n', "invalid JSON"),
        (b"\x00\x01\x02\xff\xfe binary \x00 garbage\n", "binary data"),
        (
            b'{"type": "user", "message": {"content": "caf\xe9\n',
            "invalid UTF-8",
        ),  # valid JSON apart: kept, see below
        (b"[1, 2, 3]\n", "not a JSON object"),
    ],
)
def test_bad_line_in_the_middle_keeps_every_valid_line(tmp_path: Path, bad: bytes, reason: str) -> None:
    good = _good_lines(4)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(good[:3]) + bad + b"".join(good[3:]))
    _settle(path)
    outcome = ADAPTER.parse(path)
    (session,) = outcome.sessions
    assert len(session.steps) == 4 and all(s.success for s in session.steps)
    (q,) = outcome.quarantine
    assert q.line == 4 and reason in q.reason and q.file == str(path)


def test_truncated_last_line_of_a_finished_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_good_lines(2)) + b'{"type": "assistant", "mess')
    _settle(path)
    outcome = ADAPTER.parse(path)
    assert len(outcome.sessions[0].steps) == 2
    (q,) = outcome.quarantine
    assert q.line == 6 and "truncated last line" in q.reason


def test_half_written_last_line_of_a_live_file_is_left_for_later(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_good_lines(2)) + b'{"type": "assistant", "mess')  # mtime: just now
    outcome = ADAPTER.parse(path)
    assert len(outcome.sessions[0].steps) == 2 and outcome.quarantine == []


def test_huge_single_line_is_skipped_without_losing_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = _good_lines(3)
    blob = b'{"type": "user", "message": {"content": "' + b"x" * (50 * 1024 * 1024) + b'"}}\n'
    assert len(blob) > MAX_LINE_BYTES
    path.write_bytes(b"".join(good[:2]) + blob + b"".join(good[2:]))
    _settle(path)
    outcome = ADAPTER.parse(path)
    assert len(outcome.sessions[0].steps) == 3
    (q,) = outcome.quarantine
    assert q.line == 3 and "line too long" in q.reason and q.snippet.startswith('{"type": "user"')
    assert outcome.bytes_read == path.stat().st_size


def test_whole_file_problems(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    _settle(empty)
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(os.urandom(4096).replace(b"\n", b"") + b"\n")
    _settle(garbage)
    vanished = tmp_path / "gone.jsonl"
    folder = tmp_path / "dir.jsonl"
    folder.mkdir()

    assert [q.reason for q in ADAPTER.parse(empty).quarantine] == ["empty file"]
    g = ADAPTER.parse(garbage)
    assert g.sessions == [] and len(g.quarantine) == 2  # the bad line, then "no valid session lines"
    assert "no valid session lines" in g.quarantine[-1].reason
    assert "vanished" in ADAPTER.parse(vanished).quarantine[0].reason
    assert "unreadable" in ADAPTER.parse(folder).quarantine[0].reason


def test_quarantine_table_and_valid_sessions_land_in_the_lake(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    ok = traces / "ok.jsonl"
    ok.write_bytes(b"".join(_good_lines(2)) + b"not json at all\n")
    empty = traces / "empty.jsonl"
    empty.write_bytes(b"")
    for p in (ok, empty):
        _settle(p)
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    assert report.sessions == 1 and report.steps == 2
    rows = lake.read_rows(QUARANTINE, "repo-x")
    assert [(r["line"], r["reason"].split(":")[0]) for r in rows] == [(6, "invalid JSON")]
    catch_all = ingest_repo(lake, [traces], NO_REPO_KEY)  # a file with no cwd at all belongs to no repo
    assert catch_all.sessions == 0
    assert [r["reason"] for r in lake.read_rows(QUARANTINE, NO_REPO_KEY)] == ["empty file"]


def test_a_file_of_many_bad_lines_is_summarised_not_listed_line_by_line(tmp_path: Path) -> None:
    from bashgym_assets.ingest.claude_code import MAX_BAD_LINES_LISTED

    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_good_lines(1)) + b"garbage\n" * 5000 + b"".join(_good_lines(2)[1:]))
    _settle(path)
    outcome = ADAPTER.parse(path)
    assert len(outcome.sessions[0].steps) == 2  # t0, t1 (the repeated t0 lines dedupe by uuid)
    assert len(outcome.quarantine) == MAX_BAD_LINES_LISTED + 1
    assert (
        outcome.quarantine[-1].reason
        == f"{5000 - MAX_BAD_LINES_LISTED} more bad lines not listed (5000 in all)"
    )


def test_a_file_cut_and_deleted_while_it_is_read(tmp_path: Path) -> None:
    from bashgym_assets.ingest.base import LineReader
    from bashgym_assets.ingest.claude_code import read_json_lines

    path = tmp_path / "s.jsonl"
    lines = _good_lines(3000)  # several MB: more than one read chunk
    path.write_bytes(b"".join(lines))
    _settle(path)
    reader = LineReader(path)
    out: list = []
    stream = read_json_lines(reader, out)
    got = [next(stream) for _ in range(10)]
    with open(path, "r+b") as fh:  # another process truncates it mid-line, then deletes it
        fh.truncate(len(b"".join(lines)) // 2 + 7)
    path.unlink()
    got += list(stream)
    assert 10 < len(got) < len(lines)
    assert all(isinstance(x, dict) for x in got)
    assert len(out) <= 1 and all(q.line is not None for q in out)  # at most the cut line, quarantined
