"""Hostile values and encodings: coerced or quarantined with a reason, never failing a file or a partition.

Every case goes through the lake and is read back (``sessions_from_table``): a value that is written but
cannot be read back is as much a failure as one that crashes the write.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bashgym_assets.ingest import pipeline
from bashgym_assets.ingest.base import parse_ts
from bashgym_assets.ingest.bashgym_trace import BashGymTraceAdapter
from bashgym_assets.ingest.claude_code import ClaudeCodeAdapter
from bashgym_assets.ingest.hook import capture_event
from bashgym_assets.ingest.hook_capture import HookCaptureAdapter
from bashgym_assets.ingest.pipeline import QUARANTINE, RAW_SESSIONS, ingest_repo, session_table
from bashgym_assets.lake import Lake
from bashgym_assets.sessions import Session, sessions_from_table

ADAPTER = ClaudeCodeAdapter()
CWD = "/work/repo-x"


def _settle(path: Path) -> Path:
    old = time.time() - 60
    os.utime(path, (old, old))
    return path


def _obj(kind: str, uuid: str, **fields) -> dict:
    return {
        "type": kind,
        "uuid": uuid,
        "sessionId": "s",
        "cwd": CWD,
        "timestamp": "2026-01-01T00:00:00Z",
        **fields,
    }


def _prompt(text: str = "do things", uuid: str = "p") -> dict:
    return _obj("user", uuid, message={"role": "user", "content": text})


def _call(i: int, command: str = "echo", tool_id: str | None = None, **fields) -> dict:
    return _obj(
        "assistant",
        f"a{i}",
        message={
            "id": f"m{i}",
            "content": [
                {
                    "type": "tool_use",
                    "id": tool_id or f"t{i}",
                    "name": "Bash",
                    "input": {"command": f"{command} {i}"},
                }
            ],
        },
        **fields,
    )


def _result(i: int, content: object = "ok", tool_id: str | None = None, **fields) -> dict:
    return _obj(
        "user",
        f"r{i}",
        message={
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id or f"t{i}", "content": content}],
        },
        **fields,
    )


def _write(path: Path, lines: list[dict | bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join((x if isinstance(x, bytes) else orjson.dumps(x)) + b"\n" for x in lines))
    return _settle(path)


def _good(path: Path, n: int = 2) -> Path:
    lines: list[dict | bytes] = [_prompt()]
    for i in range(n):
        lines += [_call(i), _result(i)]
    return _write(path, lines)


def _roundtrip(lake: Lake, repo: str = "repo-x") -> list[Session]:
    """What a later stage sees: the partition read back from parquet into models."""
    return sessions_from_table(lake.read(RAW_SESSIONS, repo))


# ---- 6. out-of-range and wrong-type values ----------------------------------------------------------------
WRAPPED, DROPPED = {"steps.exit_code:wrapped_to_int32": 1}, {"steps.exit_code:out_of_range": 1}


@pytest.mark.parametrize(
    ("text", "exit_code_field", "want", "note"),
    [
        ("Exit code 3221225477\nsegfault", None, -1073741819, WRAPPED),  # Git Bash on Windows: 0xC0000005
        ("Exit code 4294967295", None, -1, WRAPPED),
        ("failed", 3221225477, -1073741819, WRAPPED),
        ("failed", 2**40, None, DROPPED),  # no 32-bit reading of it: unknown, still a failure
        ("Exit code 99999999999999999999999999999", None, None, DROPPED),
        ("Exit code -2147483649", None, None, DROPPED),
        ("failed", 2**64 + 5, 1, None),  # orjson reads it as a float: no exit code, so is_error's 1
    ],
)
def test_exit_codes_beyond_int32_are_wrapped_or_dropped_never_crash(
    tmp_path: Path, settings, text: str, exit_code_field: int | None, want: int | None, note: dict | None
) -> None:
    traces = tmp_path / "traces"
    extra = {"toolUseResult": {"exitCode": exit_code_field}} if exit_code_field is not None else {}
    raw = json.dumps(
        _result(0, text, **extra)
        | {
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t0", "content": text, "is_error": True}],
            }
        }
    )
    _write(traces / "bad.jsonl", [_prompt(), _call(0), raw.encode()])
    _good(traces / "good.jsonl")
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    assert report.sessions == 2 and report.quarantine == []
    bad = next(s for s in _roundtrip(lake) if s.session_id == "bad")
    (step,) = bad.steps
    assert step.exit_code == want and step.success is False and step.is_error
    assert bad.extra.get("coerced") == note


@pytest.mark.parametrize("value", [2**63, 2**64 + 1, -5, 1e400, "12", [1], 1.5, True])
def test_token_counts_that_are_no_int64_count_make_the_total_none(
    tmp_path: Path, settings, value: object
) -> None:
    traces = tmp_path / "traces"
    good_usage = {"input_tokens": 7, "output_tokens": 3}
    bad_line = orjson.dumps(
        _obj(
            "assistant",
            "a9",
            message={"id": "m9", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}},
        )
    )
    bad_line = bad_line.replace(
        b'"input_tokens":1', b'"input_tokens":' + (b"1e400" if value == 1e400 else json.dumps(value).encode())
    )
    lines = [
        _prompt(),
        _obj("assistant", "a1", message={"id": "m1", "content": [], "usage": good_usage}),
        bad_line,
    ]
    _write(traces / "s.jsonl", lines)
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    assert report.sessions == 1 and report.quarantine == []
    (s,) = _roundtrip(lake)
    assert s.input_tokens is None and s.output_tokens == 4  # the other fields keep their real totals
    assert s.extra["coerced"] == {"input_tokens:out_of_range": 1}


@pytest.mark.parametrize(
    "stamp",
    [
        "0001-01-01T00:00:00+05:00",  # year 0 in UTC: written, then unreadable, before the fix
        "9999-12-31T23:59:59-05:00",  # year 10000 in UTC
        "0001-01-01T00:00:00Z",
        "1200-01-01T00:00:00Z",
        1e300,
        -1e20,
        float("nan"),
    ],
)
def test_out_of_range_timestamps_become_none_and_the_partition_reads_back(
    tmp_path: Path, settings, stamp: object
) -> None:
    traces = tmp_path / "traces"
    raw = orjson.dumps(_call(0, timestamp="STAMP")).replace(
        b'"STAMP"', b"NaN" if stamp != stamp else json.dumps(stamp).encode()
    )
    _write(traces / "s.jsonl", [_prompt(), raw, _result(0)])
    lake = Lake(settings)
    assert ingest_repo(lake, [traces], "repo-x").quarantine == []
    (s,) = _roundtrip(lake)
    assert s.steps[0].started_at is None and s.steps[0].success is True
    assert s.started_at is not None and s.started_at.year == 2026 and s.extra["unusable_timestamps"] == 1
    assert lake.connect().execute("select count(*) from raw_sessions").fetchall() == [(1,)]


def test_out_of_range_datetimes_from_any_adapter_are_caught_at_the_boundary() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from bashgym_assets.ingest.base import conform_session

    assert parse_ts("0001-01-01T00:00:00+05:00") is None and parse_ts(2**80) is None
    s = Session(
        session_id="x",
        source_format="f",
        source_path="p",
        repo="r",
        started_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        ended_at=datetime(2026, 1, 1),
    )  # naive: taken as UTC
    conform_session(s)
    assert s.started_at is None and s.ended_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert s.extra["coerced"] == {"started_at:out_of_range": 1}
    assert sessions_from_table(session_table([s]))[0].ended_at == datetime(2026, 1, 1, tzinfo=UTC)


def test_lists_and_objects_where_string_ids_belong(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    lines = [
        _prompt(),
        _obj(
            "assistant",
            ["not", "a", "uuid"],
            message={
                "id": ["m"],
                "content": [
                    {"type": "tool_use", "id": ["t", "0"], "name": ["Bash"], "input": {"command": "ls"}}
                ],
            },
        ),
        _obj(
            "user",
            "r0",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": ["t", "0"], "content": "x"}],
            },
        ),  # unhashable: crashed before
        _obj(
            "user",
            "r1",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": {"id": "t0"}, "content": "x"}],
            },
        ),
        _obj(["assistant"], "a2", message={"content": []}),
        _obj(
            "assistant",
            "a3",
            agentId=["x"],
            isSidechain=True,
            message={
                "content": [{"type": "tool_use", "id": "t3", "name": {"n": 1}, "input": [[[["deep"]]]]}]
            },
        ),
        _call(4),
        _result(4),
    ]
    _write(traces / "s.jsonl", lines)
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    assert report.quarantine == []
    (s,) = _roundtrip(lake)
    assert [(st.tool_name, st.tool_use_id, st.success) for st in s.steps] == [
        ('["Bash"]', None, None),
        ('{"n":1}', "t3", None),
        ("Bash", "t4", True),
    ]
    assert s.extra["orphan_results"] == 2 and s.extra["line_types"]["<list>"] == 1


def test_wrong_types_in_hook_captures_and_trace_documents(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    events = [
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": ["a", "b"],
            "cwd": {"path": CWD},
            "prompt": "go",
        },
        {
            "hook_event_name": "PostToolUse",
            "session_id": "h1",
            "cwd": ["/x"],
            "tool_name": "Bash",
            "tool_use_id": ["t"],
            "tool_input": {"command": "ls"},
            "tool_response": {"stdout": ["a"], "exitCode": 2**33},
        },
        {
            "hook_event_name": "PostToolUse",
            "session_id": "h1",
            "cwd": 42,
            "tool_name": ["Read"],
            "tool_response": [[1, 2]],
            "bashgym_captured_at": "0001-01-01T00:00:00+05:00",
        },
        {
            "hook_event_name": "PostToolUse",
            "session_id": "h1",
            "cwd": CWD,
            "tool_name": "Bash",
            "tool_input": {"command": "pwd"},
            "tool_response": {"stdout": CWD, "exitCode": 3221225477},
        },
    ]
    for event in events:
        capture_event(json.dumps(event).encode(), traces)
    hook_file = next(traces.glob("*.hook.jsonl"))
    _settle(hook_file)
    (h,) = HookCaptureAdapter().parse(hook_file).sessions
    assert h.session_id == "h1" and h.cwd == CWD
    assert [(st.tool_name, st.cwd, st.exit_code, st.tool_use_id) for st in h.steps] == [
        ("Bash", None, None, None),
        ('["Read"]', None, 0, None),
        ("Bash", CWD, -1073741819, None),
    ]
    assert h.steps[1].started_at is None and h.extra["unusable_timestamps"] == 1

    doc = {
        "trace": [
            {
                "step_id": ["1"],
                "tool_name": "Bash",
                "command": "make",
                "exit_code": "3221225477",
                "cwd": ["/a"],
                "repo": {"path": 7, "git_remote": {"u": 1}},
                "timestamp": "0001-01-01T00:00:00+05:00",
                "output": {"o": 1},
            },
            {"step_id": 2, "tool_name": "Bash", "command": "ls", "exit_code": 2**70, "cwd": CWD},
        ],
        "metadata": {"session_id": {"id": 1}, "user_prompt": ["not text"], "model": 5},
        "primary_repo": [CWD],
    }
    trace = traces / "session_t1.json"
    trace.write_text(json.dumps(doc))
    _settle(trace)
    (t,) = BashGymTraceAdapter().parse(trace).sessions
    assert t.session_id == "t1" and t.cwd == CWD and t.repo_remote is None and t.model is None
    assert [(st.tool_use_id, st.exit_code, st.success, st.cwd) for st in t.steps] == [
        (None, -1073741819, False, None),
        ("2", None, False, CWD),
    ]
    assert t.steps[0].output == '{"o":1}'
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    assert report.sessions == 2 and report.quarantine == []
    assert {s.session_id for s in _roundtrip(lake)} == {"h1", "t1"}


def test_json_nested_past_the_serializer_and_parser_limits(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    deep_input = b"[" * 300 + b"1" + b"]" * 300  # orjson reads it, but writes at most 254 levels
    too_deep = b"[" * 5000 + b"]" * 5000  # past every parser's limit
    call = orjson.dumps(_call(0)).replace(
        b'{"command":"echo 0"}', b'{"command":"echo 0","x":' + deep_input + b"}"
    )
    result = orjson.dumps(_result(1)).replace(
        b'"content":"ok"', b'"content":[{"type":"weird","v":' + deep_input + b"}]"
    )
    line_too_deep = b'{"type":"user","uuid":"z","message":{"content":' + too_deep + b"}}"
    _write(
        traces / "s.jsonl",
        [_prompt(), call, _result(0), _call(1), result, line_too_deep, _call(2), _result(2)],
    )
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    (q,) = report.quarantine
    assert q.line == 6 and "nested deeper" in q.reason
    (s,) = _roundtrip(lake)
    assert [st.success for st in s.steps] == [True, True, True]
    assert s.steps[0].command == "echo 0" and "nested deeper than 200 levels: cut" in s.steps[0].input
    assert "cut" in s.steps[1].output and s.extra["json_cut_too_deep"] == 2


def test_huge_strings_where_ids_and_paths_belong(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    huge = "/x" * 5000  # no path: longer than PATH_MAX, used to crash repo detection
    lines = [
        _obj("user", "p", cwd=huge, version="v" * 10_000, message={"role": "user", "content": "go"}),
        _call(0, tool_id="t" * 10_000, cwd=huge),
        _result(0, tool_id="t" * 10_000),
    ]
    _write(traces / "s.jsonl", lines)
    outcome = ADAPTER.parse(traces / "s.jsonl")
    (s,) = outcome.sessions
    assert s.cwd is None and s.agent_version is None and s.repo_path is None
    assert s.steps[0].tool_use_id is None and s.steps[0].cwd is None and s.steps[0].success is True
    assert s.extra["coerced"]["steps.tool_use_id:too_long"] == 1


def test_one_file_that_makes_the_adapter_raise_never_fails_the_partition(
    tmp_path: Path, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = tmp_path / "traces"
    for name in ("a", "boom", "c"):
        _good(traces / f"{name}.jsonl")
    lake = Lake(settings)
    assert ingest_repo(lake, [traces], "repo-x").sessions == 3
    real_parse = ClaudeCodeAdapter.parse

    def parse(self, path, repo_of=None):
        if path.stem == "boom":
            raise RuntimeError("adapter bug on this one file")
        return real_parse(self, path, repo_of)

    monkeypatch.setattr(ClaudeCodeAdapter, "parse", parse)
    _good(traces / "d.jsonl")
    report = ingest_repo(lake, [traces], "repo-x")
    (q,) = report.quarantine
    assert (
        q.file.endswith("boom.jsonl")
        and q.line is None
        and "RuntimeError: adapter bug on this one file" in q.reason
    )
    assert lake.read_rows(QUARANTINE, "repo-x")[0]["reason"] == q.reason
    # the other files land; what the failing file gave before is carried over, not lost
    assert sorted(s.session_id for s in _roundtrip(lake)) == ["a", "boom", "c", "d"]
    assert report.carried_over == 1


def test_a_session_that_cannot_be_written_is_quarantined_alone(
    tmp_path: Path, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = tmp_path / "traces"
    for name in ("a", "b", "c"):
        _good(traces / f"{name}.jsonl")
    real_table = pipeline.session_table

    def table(sessions):
        if any(s.session_id == "b" for s in sessions):
            raise pa.ArrowInvalid("cannot convert this one")
        return real_table(sessions)

    monkeypatch.setattr(pipeline, "session_table", table)
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    assert report.sessions == 2
    (q,) = report.quarantine
    assert q.file.endswith("b.jsonl") and "ArrowInvalid: cannot convert this one" in q.reason
    assert sorted(s.session_id for s in _roundtrip(lake)) == ["a", "c"]


def test_rows_of_an_earlier_run_that_cannot_be_read_back_are_quarantined(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    gone = _good(traces / "gone.jsonl")
    _good(traces / "kept.jsonl")
    lake = Lake(settings)
    ingest_repo(lake, [traces], "repo-x")
    path = lake.table_path(RAW_SESSIONS, "repo-x")  # poison it as the old code did: a year-0 start
    table = pq.read_table(path)
    starts = table.column("started_at").cast(pa.int64()).to_pylist()
    starts[
        [r["session_id"] for r in table.select(["session_id"]).to_pylist()].index("gone")
    ] = -62135614800000000
    table = table.set_column(
        table.schema.get_field_index("started_at"),
        "started_at",
        pa.array(starts, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
    )
    pq.write_table(table, path)
    gone.unlink()  # carried over from the old file, where it cannot be read
    report = ingest_repo(lake, [traces], "repo-x")
    (q,) = report.quarantine
    assert "previously imported session gone cannot be read back" in q.reason
    assert [s.session_id for s in _roundtrip(lake)] == ["kept"]


# ---- 7. encodings: lone surrogates, BOMs, UTF-16, CRLF, invalid UTF-8 ------------------------------------
def test_lone_surrogate_escapes_are_replaced_and_the_line_kept(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    cut = orjson.dumps(_result(0, "PLACEHOLDER")).replace(b"PLACEHOLDER", b"emoji cut mid-way: \\ud83d| rest")
    low = orjson.dumps(_result(1, "PLACEHOLDER")).replace(b"PLACEHOLDER", b"\\ude00 then \\\\ud83d literal")
    pair = orjson.dumps(_result(2, "PLACEHOLDER")).replace(b"PLACEHOLDER", b"\\ud83d\\ude00 whole")
    key = b'{"type":"user","uuid":"k","message":{"role":"user","content":"x"},"\\udc80key":"\\ud800\\ud800"}'
    _write(traces / "s.jsonl", [_prompt(), _call(0), cut, _call(1), low, _call(2), pair, key])
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    assert report.quarantine == []
    (s,) = _roundtrip(lake)
    assert [st.output for st in s.steps] == [
        "emoji cut mid-way: \ufffd| rest",
        "\ufffd then \\ud83d literal",
        "\U0001f600 whole",
    ]
    assert s.extra["repaired_lines"] == {"lone_surrogate": 3}
    assert [p.text for p in s.prompts] == ["do things", "x"]


def test_bom_utf16_crlf_and_invalid_utf8_keep_every_line(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    lines = [_prompt(), _call(0), _result(0, "caf\u00e9 \u2713"), _call(1), _result(1)]
    text = "".join(orjson.dumps(x).decode() + "\r\n" for x in lines)
    (traces / "bom.jsonl").parent.mkdir(parents=True)
    (traces / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (traces / "le.jsonl").write_bytes(text.encode("utf-16"))  # BOM + little endian
    (traces / "be.jsonl").write_bytes(b"\xfe\xff" + text.encode("utf-16-be"))
    (traces / "u32.jsonl").write_bytes(text.encode("utf-32"))
    (traces / "crlf.jsonl").write_bytes(text.encode())
    (traces / "latin1.jsonl").write_bytes(text.encode().replace("caf\u00e9".encode(), b"caf\xe9 \xff"))
    for p in traces.iterdir():
        _settle(p)
        assert ADAPTER.peek_cwd(p) == CWD, p.name
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    assert report.quarantine == [] and report.sessions == 6
    by_id = {s.session_id: s for s in _roundtrip(lake)}
    for name, s in by_id.items():
        assert [p.text for p in s.prompts] == ["do things"], name
        assert [st.success for st in s.steps] == [True, True], name
        want = "caf\ufffd \ufffd \u2713" if name == "latin1" else "caf\u00e9 \u2713"
        assert s.steps[0].output == want, name
    assert by_id["bom"].extra["repaired_lines"] == {"bom": 1}
    assert by_id["latin1"].extra["repaired_lines"] == {"invalid_utf8": 1}
    assert by_id["le"].extra["encodings"] == ["utf-16"] and by_id["u32"].extra["encodings"] == ["utf-32"]
    assert "repaired_lines" not in by_id["crlf"].extra


def test_undecodable_file_names_reach_the_lake(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    name = os.fsdecode(b"sess-\xff\xfe.jsonl")  # bytes no UTF-8 decoder accepts: a surrogate-escaped str
    _good(traces / name)
    _write(traces / os.fsdecode(b"bad-\xff.jsonl"), [_prompt(), b"not json"])
    lake = Lake(settings)
    report = ingest_repo(lake, [traces], "repo-x")
    s, _ = sorted(_roundtrip(lake), key=lambda x: -len(x.steps))
    assert "\ufffd" in s.source_path and s.session_id == "sess-\ufffd\ufffd"
    assert s.extra["coerced"] == {"session_id:lone_surrogates": 1, "source_path:lone_surrogates": 1}
    (q,) = lake.read_rows(QUARANTINE, "repo-x")
    assert "\ufffd" in q["file"] and len(report.quarantine) == 1


def test_the_hook_captures_events_orjson_refuses(tmp_path: Path) -> None:
    from bashgym_assets.ingest.jsonsafe import json_text, lenient_loads

    raw = (
        b'{"hook_event_name":"PostToolUse","session_id":"h2","cwd":"/w/r","tool_name":"Bash",'
        b'"tool_input":{"command":"cat x","deep":' + b"[" * 300 + b"]" * 300 + b"},"
        b'"tool_response":{"stdout":"cut \\ud83d","big":' + str(2**70).encode() + b"}}"
    )
    path = capture_event(raw, tmp_path)
    _settle(path)
    outcome = HookCaptureAdapter().parse(path)
    assert outcome.quarantine == []
    (step,) = outcome.sessions[0].steps
    assert step.output == "cut \ufffd" and step.command == "cat x"
    assert lenient_loads(b'{"a": NaN, "b": 1e400}')[1] == ["non_finite_number"]
    assert json_text({"x": float("inf")}) == '{"x":null}'


def test_bashgym_trace_documents_with_bom_and_surrogates(tmp_path: Path) -> None:
    doc = json.dumps(
        {
            "trace": [
                {
                    "step_id": "1",
                    "tool_name": "Bash",
                    "command": "ls",
                    "output": "PH",
                    "exit_code": 0,
                    "cwd": CWD,
                }
            ]
        }
    ).replace("PH", "\\ud83d cut")
    path = tmp_path / "session_x.json"
    path.write_bytes(doc.encode("utf-16"))
    _settle(path)
    (s,) = BashGymTraceAdapter().parse(path).sessions
    assert s.steps[0].output == "\ufffd cut" and s.extra["repaired"] == ["utf16", "lone_surrogate"]


# ---- 8. subagent tool calls carried by progress lines ---------------------------------------------------
def _progress(
    uuid: str, agent: str, parent: str, role: str, content: list, ts: str = "2026-01-01T00:00:05Z", **data
) -> dict:
    inner = {
        "type": role,
        "uuid": f"inner-{uuid}",
        "timestamp": ts,
        "message": {
            "role": role,
            "content": content,
            **(
                {
                    "id": f"msg-{uuid}",
                    "model": "claude-haiku",
                    "usage": {"input_tokens": 100, "output_tokens": 10},
                }
                if role == "assistant"
                else {}
            ),
        },
    }
    return _obj(
        "progress",
        uuid,
        timestamp=ts,
        toolUseID=f"agent_msg_{uuid}",
        parentToolUseID=parent,
        data={"type": "agent_progress", "agentId": agent, "prompt": "explore", "message": inner, **data},
    )


def _task_session(extra_progress: list[dict] | None = None) -> list[dict]:
    sub_call = [{"type": "tool_use", "id": "sub1", "name": "Bash", "input": {"command": "grep -r TODO"}}]
    sub_result = [
        {"type": "tool_result", "tool_use_id": "sub1", "content": "Exit code 1\nno match", "is_error": True}
    ]
    return [
        _prompt("first task"),
        _obj(
            "assistant",
            "a0",
            timestamp="2026-01-01T00:00:01Z",
            message={
                "id": "m0",
                "content": [
                    {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "explore"}}
                ],
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        ),
        _obj(
            "progress",
            "tick1",
            timestamp="2026-01-01T00:00:02Z",
            toolUseID="bash-progress-0",
            parentToolUseID="task1",
            data={"type": "bash_progress", "output": "...", "elapsedTimeSeconds": 3},
        ),
        _obj("progress", "tick2", data={"type": "hook_progress", "hookEvent": "PostToolUse", "command": "x"}),
        _progress(
            "pp0",
            "a1",
            "task1",
            "assistant",
            [{"type": "text", "text": "let me look"}],
            ts="2026-01-01T00:00:03Z",
        ),
        _progress("pp1", "a1", "task1", "assistant", sub_call, ts="2026-01-01T00:00:04Z"),
        _progress("pp2", "a1", "task1", "user", sub_result, ts="2026-01-01T00:00:06Z"),
        *(extra_progress or []),
        _obj(
            "user",
            "r0",
            timestamp="2026-01-01T00:00:09Z",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "task1", "content": "found nothing"}],
            },
        ),
        _prompt("second task", uuid="p2") | {"timestamp": "2026-01-01T00:00:10Z"},
        _call(5, timestamp="2026-01-01T00:00:11Z"),
        _result(5, timestamp="2026-01-01T00:00:12Z"),
    ]


def test_subagent_calls_only_in_progress_lines_become_sidechain_steps(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", _task_session())
    (s,) = ADAPTER.parse(path).sessions
    assert [
        (st.tool_name, st.tool_use_id, st.sidechain, st.agent_id, st.parent_tool_use_id, st.prompt_index)
        for st in s.steps
    ] == [
        ("Task", "task1", False, None, None, 0),
        ("Bash", "sub1", True, "a1", "task1", 0),
        ("Bash", "t5", False, None, None, 1),
    ]
    sub = s.steps[1]
    assert (sub.command, sub.exit_code, sub.success, sub.output) == (
        "grep -r TODO",
        1,
        False,
        "Exit code 1\nno match",
    )
    assert sub.started_at.second == 4 and sub.finished_at.second == 6
    assert s.extra["skipped_types"] == {"progress": 3}  # two ticks and the subagent's text-only message
    assert s.extra["agent_progress_lines"] == 2 and s.extra["progress_tool_uses_imported"] == 1
    assert (s.input_tokens, s.output_tokens) == (205, 21)  # the subagent's two messages count, text-only too


def test_progress_calls_already_in_the_subagent_file_or_the_session_are_not_counted_twice(
    tmp_path: Path,
) -> None:
    dup_of_main = _progress(
        "pp3",
        "a1",
        "task1",
        "assistant",
        [{"type": "tool_use", "id": "t5", "name": "Bash", "input": {"command": "echo 5"}}],
    )
    path = _write(tmp_path / "s.jsonl", _task_session([dup_of_main]))
    side = [
        _obj("user", "sa0", isSidechain=True, agentId="a1", message={"role": "user", "content": "explore"}),
        _obj(
            "assistant",
            "inner-pp1",
            isSidechain=True,
            agentId="a1",
            timestamp="2026-01-01T00:00:04Z",
            message={
                "id": "msg-pp1",
                "content": [
                    {"type": "tool_use", "id": "sub1", "name": "Bash", "input": {"command": "grep -r TODO"}}
                ],
                "usage": {"input_tokens": 100, "output_tokens": 10},
            },
        ),
        _obj(
            "user",
            "inner-pp2",
            isSidechain=True,
            agentId="a1",
            timestamp="2026-01-01T00:00:06Z",
            message={
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "sub1",
                        "content": "Exit code 1\nno match",
                        "is_error": True,
                    }
                ],
            },
        ),
    ]
    _write(tmp_path / "s" / "subagents" / "agent-a1.jsonl", side)
    (s,) = ADAPTER.parse(path).sessions
    assert [(st.tool_use_id, st.sidechain, st.agent_id, st.parent_tool_use_id) for st in s.steps] == [
        ("task1", False, None, None),
        ("sub1", True, "a1", "task1"),
        ("t5", False, None, None),
    ]
    assert s.steps[1].exit_code == 1 and s.extra.get("duplicate_results") is None
    assert s.extra["progress_tool_uses_known"] == 2 and "progress_tool_uses_imported" not in s.extra
    assert s.input_tokens == 305  # msg-pp1 is in the file and in a progress line: counted once (+ pp0, pp3)


def test_progress_steps_land_in_the_lake(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    _write(traces / "s.jsonl", _task_session())
    lake = Lake(settings)
    ingest_repo(lake, [traces], "repo-x")
    (s,) = _roundtrip(lake)
    assert [st.parent_tool_use_id for st in s.steps] == [None, "task1", None]
    con = lake.connect()
    assert con.execute(
        "select count(*) from (select unnest(steps) as st from raw_sessions) "
        "where st.parent_tool_use_id = 'task1'"
    ).fetchall() == [(1,)]


def test_a_line_the_importer_fails_on_is_quarantined_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bashgym_assets.ingest import claude_code

    real = claude_code._SessionBuilder._assistant

    def assistant(self, line, *args):
        if line.get("uuid") == "a1":
            raise KeyError("a shape nobody foresaw")
        return real(self, line, *args)

    monkeypatch.setattr(claude_code._SessionBuilder, "_assistant", assistant)
    outcome = ADAPTER.parse(_good(tmp_path / "s.jsonl", n=3))
    (q,) = outcome.quarantine
    assert q.line == 4 and "KeyError" in q.reason and '"uuid":"a1"' in q.snippet
    assert [st.tool_use_id for st in outcome.sessions[0].steps] == ["t0", "t2"]


# ---- shapes met in published logs of other Claude Code versions ------------------------------------------------
def test_an_async_subagent_answers_the_prompt_that_launched_it(tmp_path: Path) -> None:
    """2.1.x: an async Agent call returns at once with ``toolUseResult.agentId``; its subagent file's steps run
    after the user's next prompt and no progress line links them. The agent id on the result is the link."""
    path = _write(
        tmp_path / "s.jsonl",
        [
            _prompt("audit the docs") | {"timestamp": "2026-01-01T00:00:00Z"},
            _obj(
                "assistant",
                "a0",
                timestamp="2026-01-01T00:00:01Z",
                message={
                    "id": "m0",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "agent1",
                            "name": "Agent",
                            "input": {"prompt": "map the code"},
                        }
                    ],
                },
            ),
            _obj(
                "user",
                "r0",
                timestamp="2026-01-01T00:00:02Z",
                toolUseResult={"status": "async_launched", "isAsync": True, "agentId": "abc123"},
                message={
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "agent1", "content": "Async agent launched"}
                    ],
                },
            ),
            _prompt("now fix the README", uuid="p2") | {"timestamp": "2026-01-01T00:00:10Z"},
            _call(5, timestamp="2026-01-01T00:00:11Z"),
            _result(5, timestamp="2026-01-01T00:00:12Z"),
        ],
    )
    _write(
        tmp_path / "s" / "subagents" / "agent-abc123.jsonl",
        [
            _obj(
                "user",
                "s0",
                isSidechain=True,
                agentId="abc123",
                timestamp="2026-01-01T00:00:20Z",
                message={"role": "user", "content": "map the code"},
            ),
            _call(7, command="find .", isSidechain=True, agentId="abc123", timestamp="2026-01-01T00:00:21Z"),
            _result(7, isSidechain=True, agentId="abc123", timestamp="2026-01-01T00:00:22Z"),
        ],
    )
    (s,) = ADAPTER.parse(path).sessions
    sub = next(st for st in s.steps if st.tool_use_id == "t7")
    assert (sub.sidechain, sub.agent_id, sub.parent_tool_use_id) == (True, "abc123", "agent1")
    assert s.prompts[sub.prompt_index].text == "audit the docs"  # not the prompt typed meanwhile


def test_a_session_of_subagent_lines_only_keeps_its_version_and_branch(tmp_path: Path) -> None:
    lines = [
        _obj(
            "user",
            "s0",
            isSidechain=True,
            agentId="a9",
            version="2.1.220",
            gitBranch="main",
            message={"role": "user", "content": "review the spec"},
        ),
        _call(1, isSidechain=True, agentId="a9", version="2.1.220", gitBranch="main"),
        _result(1, isSidechain=True, agentId="a9", version="2.1.220", gitBranch="main"),
    ]
    (s,) = ADAPTER.parse(_write(tmp_path / "orphan" / "subagents" / "agent-a9.jsonl", lines)).sessions
    assert (s.agent_version, s.git_branch, len(s.steps)) == ("2.1.220", "main", 1)


def test_a_reused_tool_use_id_keeps_every_call_its_result_and_its_cost(tmp_path: Path) -> None:
    """Logs shared with their ids scrubbed (every id ``REDACTED``): three calls, three results, three costs.
    The same call logged twice, and a streamed message's lines, still count once."""

    def call(i: int, command: str, request: str) -> dict:
        return _obj(
            "assistant",
            f"a{i}",
            requestId=request,
            message={
                "id": "REDACTED",
                "content": [
                    {"type": "tool_use", "id": "REDACTED", "name": "Bash", "input": {"command": command}}
                ],
                "usage": {"input_tokens": 10, "output_tokens": i},
            },
        )

    lines = [
        _prompt(),
        call(1, "ls", "req1"),
        _result(1, "one", tool_id="REDACTED"),
        call(2, "pwd", "req2"),
        _result(2, "two", tool_id="REDACTED"),
        call(3, "ls", "req1") | {"uuid": "copy-of-a1"},  # the first call again: a duplicate, not a call
        call(4, "id", "req4"),
        _result(4, "four", tool_id="REDACTED"),
    ]
    (s,) = ADAPTER.parse(_write(tmp_path / "s.jsonl", lines)).sessions
    assert [(st.command, st.output) for st in s.steps] == [("ls", "one"), ("pwd", "two"), ("id", "four")]
    assert s.extra["reused_tool_use_ids"] == 2 and s.extra["duplicate_tool_uses"] == 1
    assert (s.input_tokens, s.output_tokens) == (30, 3 + 2 + 4)  # req1 counted once, at its largest


def test_jsonl_of_another_agent_is_quarantined_and_stream_json_finds_its_cwd(tmp_path: Path) -> None:
    foreign = _write(
        tmp_path / "f.jsonl",
        [
            {"ts": 1786387696.1, "sessionId": "f", "cwd": CWD, "role": "user", "content": "read hello.txt"},
            {
                "ts": 1786387698.7,
                "sessionId": "f",
                "role": "assistant",
                "content": "reading",
                "tool_calls": [],
            },
        ],
    )
    outcome = ADAPTER.parse(foreign)
    assert not outcome.sessions
    (q,) = outcome.quarantine
    assert (
        q.reason == "not a Claude Code log: 2 JSON lines, none with a 'type' field (another agent's format?)"
    )
    assert q.snippet == "keys of the first line: ts, sessionId, cwd, role, content"
    # ``claude -p --output-format stream-json``: the working directory is on the system/init line only
    stream = _write(
        tmp_path / "st.jsonl",
        [
            {"type": "system", "subtype": "init", "cwd": CWD, "session_id": "st", "tools": ["Bash"]},
            {
                "type": "assistant",
                "message": {
                    "id": "m1",
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
                },
            },
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}],
                },
            },
            {"type": "result", "subtype": "success", "is_error": False, "session_id": "st"},
        ],
    )
    (s,) = ADAPTER.parse(stream).sessions
    assert s.cwd == CWD and [(st.command, st.output) for st in s.steps] == [("ls", "a.txt")]


def test_workflow_subagents_nested_under_subagents_join_their_session(tmp_path: Path) -> None:
    """``<sid>/subagents/workflows/<wf>/agent-*.jsonl`` (agents of a workflow) belong to ``<sid>.jsonl`` like
    ``<sid>/subagents/agent-*.jsonl``; the workflow's ``journal.jsonl`` is its bookkeeping, not a session."""
    main = _write(tmp_path / "s.jsonl", [_prompt("sweep the docs"), _call(0), _result(0)])
    wf = tmp_path / "s" / "subagents" / "workflows" / "wf_1"
    agent = _write(
        wf / "agent-ag1.jsonl",
        [
            _obj(
                "user",
                "w0",
                isSidechain=True,
                agentId="ag1",
                sessionId="s#agent-ag1",
                message={"role": "user", "content": "sweep batch a"},
            ),
            _call(
                1, command="grep -rl TODO docs/a", isSidechain=True, agentId="ag1", sessionId="s#agent-ag1"
            ),
            _result(1, isSidechain=True, agentId="ag1", sessionId="s#agent-ag1"),
        ],
    )
    journal = _write(wf / "journal.jsonl", [{"type": "started", "key": "v2:x", "agentId": "ag1"}])
    assert (ADAPTER.matches(main), ADAPTER.matches(agent), ADAPTER.matches(journal)) == (True, False, False)
    outcome = ADAPTER.parse(main)
    (s,) = outcome.sessions
    assert [(st.command, st.sidechain, st.agent_id) for st in s.steps] == [
        ("echo 0", False, None),
        ("grep -rl TODO docs/a 1", True, "ag1"),
    ]
    assert outcome.files == [str(main), str(agent)] and not outcome.quarantine


def test_hook_captures_of_two_sessions_in_one_file_stay_apart_and_results_read_right(tmp_path: Path) -> None:
    """The hook names ``a/b`` and ``a:b`` both ``a-b.hook.jsonl``: each id keeps its own prompt and steps. And a
    tool result's shape says how it went: ``"error": null`` is no error, ``interrupted`` is no success, an
    ``exitCode`` of ``"2"`` or ``2.0`` counts, and output that merely starts with "Exit code 3" is content."""

    def event(sid: str, name: str, ts: str, **fields) -> dict:
        return {"hook_event_name": name, "session_id": sid, "cwd": CWD, "bashgym_captured_at": ts, **fields}

    def bash(sid: str, ts: str, command: str, response: object, **fields) -> dict:
        return event(
            sid,
            "PostToolUse",
            ts,
            tool_name="Bash",
            tool_input={"command": command},
            tool_response=response,
            **fields,
        )

    path = _write(
        tmp_path / "a-b.hook.jsonl",
        [
            event("a/b", "UserPromptSubmit", "2026-01-01T00:00:05Z", prompt="build it"),
            event("a:b", "UserPromptSubmit", "2026-01-01T00:00:06Z", prompt="clean up"),
            bash("a/b", "2026-01-01T00:00:09Z", "make", {"stdout": "ok"}, error=None),
            bash("a:b", "2026-01-01T00:00:07Z", "rm -rf build", {"stdout": "", "interrupted": True}),
            bash("a/b", "2026-01-01T00:00:02Z", "make test", {"stdout": "", "exitCode": "2"}),
            bash(
                "a/b",
                "2026-01-01T00:00:10Z",
                "cat notes.txt",
                {"stdout": "Exit code 3 is what the tool returns"},
            ),
            bash("a:b", "2026-01-01T00:00:08Z", "pytest", {"stdout": "", "exitCode": 2.0}),
        ],
    )
    outcome = HookCaptureAdapter().parse(path)
    by_id = {s.session_id: s for s in outcome.sessions}
    assert sorted(by_id) == ["a/b", "a:b"] and not outcome.quarantine
    ab, colon = by_id["a/b"], by_id["a:b"]
    assert [p.text for p in ab.prompts] == ["build it"] and [p.text for p in colon.prompts] == ["clean up"]
    assert [(st.command, st.exit_code, st.success) for st in ab.steps] == [
        ("make", 0, True),
        ("make test", 2, False),
        ("cat notes.txt", 0, True),
    ]
    assert [(st.command, st.success) for st in colon.steps] == [("rm -rf build", False), ("pytest", False)]
    assert colon.steps[1].exit_code == 2
    assert (ab.started_at.second, ab.ended_at.second) == (2, 10)  # out of order: the earliest and the latest


def test_a_trace_document_being_rewritten_keeps_its_earlier_rows(tmp_path: Path, settings) -> None:
    """Bash Gym's own hook rewrites its trace after every tool call: a partition run in that moment used to drop
    the session (the unsettled file was skipped and, as it still existed, nothing carried its rows over).
    Exit codes written as text are read only when they are numbers (``"--1"`` and ``"²"`` crashed the step)."""
    traces = tmp_path / "traces"
    doc = {
        "trace": [
            {
                "step_id": "1",
                "tool_name": "Bash",
                "command": "ls",
                "output": "a",
                "exit_code": "0",
                "cwd": CWD,
            },
            {
                "step_id": "2",
                "tool_name": "Bash",
                "command": "false",
                "output": "",
                "exit_code": "--1",
                "cwd": CWD,
            },
            {
                "step_id": "3",
                "tool_name": "Bash",
                "command": "true",
                "output": "",
                "exit_code": "²",
                "cwd": CWD,
            },
        ],
        "metadata": {"session_id": "live", "task": "list it"},
    }
    path = traces / "session_live.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    _settle(path)
    lake = Lake(settings)
    ingest_repo(lake, [traces], "repo-x")
    (s,) = _roundtrip(lake)
    assert [(st.command, st.exit_code) for st in s.steps] == [("ls", 0), ("false", None), ("true", None)]
    assert [st.prompt_index for st in s.steps] == [0, 0, 0] and s.prompts[0].text == "list it"
    doc["trace"].append(
        {"step_id": "4", "tool_name": "Bash", "command": "pwd", "output": CWD, "exit_code": 0, "cwd": CWD}
    )
    path.write_text(json.dumps(doc))  # just rewritten: not read yet
    ingest_repo(lake, [traces], "repo-x")
    assert [len(s.steps) for s in _roundtrip(lake)] == [3]
    _settle(path)
    ingest_repo(lake, [traces], "repo-x")
    assert [len(s.steps) for s in _roundtrip(lake)] == [4]


def test_two_different_traces_under_one_session_id_leave_a_quarantine_record(
    tmp_path: Path, settings
) -> None:
    traces = tmp_path / "traces"
    for name, command in (("a.json", "ls"), ("b.json", "make")):
        path = traces / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "trace": [
                        {
                            "step_id": "1",
                            "tool_name": "Bash",
                            "command": command,
                            "output": "",
                            "exit_code": 0,
                            "cwd": CWD,
                        }
                    ],
                    "metadata": {"session_id": "same"},
                }
            )
        )
        _settle(path)
    report = ingest_repo(Lake(settings), [traces], "repo-x")
    assert report.sessions == 1 and report.duplicates_dropped == 1
    (q,) = report.quarantine
    assert q.file.endswith("b.json") and "duplicate session id 'same' with other content" in q.reason
    assert str(traces / "a.json") in q.reason


def test_epoch_times_in_any_unit_and_negative_markers() -> None:
    """Epoch seconds, milli-, micro- and nanoseconds name the same instant; -1 is a "not set" marker, not 1969."""
    want = datetime(2026, 1, 1, tzinfo=UTC)
    assert [
        parse_ts(v) for v in (1767225600, 1767225600_000, 1767225600_000_000, 1767225600_000_000_000)
    ] == [want] * 4
    assert parse_ts(-1) is None and parse_ts(-5.0) is None and parse_ts(0) is not None
