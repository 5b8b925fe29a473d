"""The live-capture hook (real processes, real file locks) and its settings.json installer."""

from __future__ import annotations

import fcntl
import json
import os
import random
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bashgym_assets.ingest import hook
from bashgym_assets.ingest.hook import capture_path
from bashgym_assets.ingest.hook_capture import HookCaptureAdapter
from bashgym_assets.ingest.hook_installer import (
    HOOK_ENTRY,
    LEGACY_MARKER,
    MARKER,
    HookSettingsError,
    hook_command,
    hooks_status,
    install_hooks,
    uninstall_hooks,
)

PY = sys.executable


def _run_hook(event: object, home: Path, raw: bytes | None = None) -> subprocess.CompletedProcess:
    """The hook as Claude Code runs it: the installed command, through a shell, the event on stdin."""
    data = raw if raw is not None else json.dumps(event).encode()
    proc = subprocess.run(
        ["/bin/sh", "-c", hook_command(home=home)], input=data, capture_output=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout == b"", proc
    return proc


def test_hook_appends_events_that_parse_back_into_a_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cwd = "/home/demo/projects/webshop"
    events = [
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "abc-123",
            "cwd": cwd,
            "prompt": "run the tests",
        },
        {
            "hook_event_name": "PostToolUse",
            "session_id": "abc-123",
            "cwd": cwd,
            "tool_name": "Bash",
            "tool_use_id": "toolu_1",
            "tool_input": {"command": "pytest -q"},
            "tool_response": {"stdout": "3 passed", "stderr": "", "interrupted": False},
        },
        {
            "hook_event_name": "PostToolUseFailure",
            "session_id": "abc-123",
            "cwd": cwd,
            "tool_name": "Bash",
            "tool_input": {"command": "make deploy"},
            "error": "Exit code 2\nmake: *** No rule to make target",
        },
        {
            "hook_event_name": "PostToolUse",
            "session_id": "abc-123",
            "cwd": cwd,
            "tool_name": "Read",
            "tool_input": {"file_path": "a.py"},
            "tool_response": {"type": "text", "file": {"content": "x"}},
        },
        {"hook_event_name": "Stop", "session_id": "abc-123", "cwd": cwd, "stop_hook_active": False},
    ]
    for event in events:
        proc = _run_hook(event, home)
        assert proc.returncode == 0, proc.stderr
    path = capture_path(home / "traces", "abc-123")
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(events)
    assert [json.loads(x)["hook_event_name"] for x in lines] == [e["hook_event_name"] for e in events]

    outcome = HookCaptureAdapter().parse(path)
    (s,) = outcome.sessions
    assert s.session_id == "abc-123" and s.repo == "webshop" and s.source_format == "claude_code_hook"
    assert [(x.tool_name, x.command, x.exit_code, x.success) for x in s.steps] == [
        ("Bash", "pytest -q", 0, True),
        ("Bash", "make deploy", 2, False),
        ("Read", None, 0, True),
    ]
    assert s.steps[0].output == "3 passed" and s.steps[0].prompt_index == 0
    assert [p.text for p in s.prompts] == ["run the tests"]
    assert s.extra["hook_events"]["Stop"] == 1


def test_hook_never_fails_the_agent_on_bad_input(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = _run_hook(None, home, raw=b"\xff not json")
    assert proc.returncode == 0 and proc.stderr == b""
    (path,) = (home / "traces").glob("*.hook.jsonl")
    outcome = HookCaptureAdapter().parse(path)
    assert outcome.sessions == [] and "invalid hook input" in outcome.quarantine[0].reason


WRITER = r"""
import json, sys
from pathlib import Path
from bashgym_assets.ingest.hook import capture_event
who, n, folder = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
for i in range(n):
    event = {"hook_event_name": "PostToolUse", "session_id": "shared", "cwd": "/w/repo", "tool_name": "Bash",
             "tool_input": {"command": f"echo {who}-{i}"}, "tool_response": {"stdout": "x" * 150_000}}
    capture_event(json.dumps(event).encode(), folder)
"""


@pytest.mark.slow
def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    procs = [subprocess.Popen([PY, "-c", WRITER, str(w), "40", str(folder)]) for w in range(8)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    lines = capture_path(folder, "shared").read_bytes().split(b"\n")
    assert lines[-1] == b""
    commands = [json.loads(line)["tool_input"]["command"] for line in lines[:-1]]
    assert sorted(commands) == sorted(f"echo {w}-{i}" for w in range(8) for i in range(40))
    (s,) = HookCaptureAdapter().parse(capture_path(folder, "shared")).sessions
    assert len(s.steps) == 320


USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}
        ],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def test_installer_round_trips_a_settings_file_with_user_hooks(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(USER_SETTINGS, indent=4))
    command = hook_command(home=tmp_path / "bg-home")

    status = install_hooks(path, command=command)
    assert status.installed == ["PostToolUse", "Stop", "UserPromptSubmit"] and status.missing == []
    assert status.other_hooks == 3
    install_hooks(path, command=command)  # twice: still one entry per event
    data = json.loads(path.read_text())
    assert data["model"] == "opus" and data["permissions"] == USER_SETTINGS["permissions"]
    assert data["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    for event in ("PostToolUse", "Stop"):
        assert data["hooks"][event][0] == USER_SETTINGS["hooks"][event][0]
        ours = [h for g in data["hooks"][event] for h in g["hooks"] if MARKER in h["command"]]
        assert len(ours) == 1 and ours[0]["command"] == command
    assert (path.parent / "settings.json.bashgym-backup").exists()

    # the installed command really captures when Claude Code runs it through a shell
    event = {
        "hook_event_name": "PostToolUse",
        "session_id": "via-shell",
        "cwd": "/x/y",
        "tool_name": "Bash",
        "tool_input": {"command": "true"},
        "tool_response": {"stdout": ""},
    }
    proc = subprocess.run(["bash", "-c", ours[0]["command"]], input=json.dumps(event).encode(), timeout=60)
    assert proc.returncode == 0
    assert capture_path(tmp_path / "bg-home" / "traces", "via-shell").exists()

    assert uninstall_hooks(path) == 3
    assert json.loads(path.read_text()) == USER_SETTINGS
    assert uninstall_hooks(path) == 0
    assert hooks_status(path).missing == ["PostToolUse", "Stop", "UserPromptSubmit"]


def test_installer_creates_a_missing_file_and_refuses_a_broken_one(tmp_path: Path) -> None:
    fresh = tmp_path / "new" / "settings.json"
    install_hooks(fresh, command="env BASHGYM_HOME=/x python -m bashgym_assets.ingest.hook")
    assert set(json.loads(fresh.read_text())["hooks"]) == {"PostToolUse", "Stop", "UserPromptSubmit"}
    assert uninstall_hooks(fresh) == 3 and json.loads(fresh.read_text()) == {}

    broken = tmp_path / "broken.json"
    broken.write_text('{"hooks": {,}')
    with pytest.raises(HookSettingsError, match="not valid JSON"):
        install_hooks(broken)
    assert broken.read_text() == '{"hooks": {,}'


def test_hooks_cli(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(USER_SETTINGS))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PY, "-m", "bashgym_assets.ingest.hooks_cli", *args, "--settings", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "BASHGYM_HOME": str(tmp_path / "h")},
        )

    assert cli("status").returncode == 3
    out = cli("install")
    assert out.returncode == 0 and "3 other hooks kept" in out.stdout
    status = cli("status")
    assert status.returncode == 0 and str(tmp_path / "h") in json.loads(status.stdout)["commands"][0]
    assert cli("uninstall").returncode == 0
    assert json.loads(path.read_text()) == USER_SETTINGS
    path.write_text("nope")
    bad = cli("install")
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr


# ---- the hook costs nothing: standard library only, safe under any input ------------------------------------

EVENT = {
    "hook_event_name": "PostToolUse",
    "session_id": "s-1",
    "cwd": "/w/repo",
    "tool_name": "Bash",
    "tool_input": {"command": "ls"},
    "tool_response": {"stdout": "a\nb", "stderr": ""},
}


def test_installed_command_imports_only_the_standard_library(tmp_path: Path) -> None:
    command = hook_command(home=tmp_path)
    assert " -I -S " in command and command.endswith(str(HOOK_ENTRY))
    proc = subprocess.run(
        ["/bin/sh", "-c", command.replace(" -I -S ", " -I -S -X importtime ")],
        input=json.dumps(EVENT).encode(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout == b""
    imported = {
        m.group(1).strip().split(".")[0]
        for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|( *\S+)$", proc.stderr.decode(), re.M)
    }
    assert "hook" in imported and "fcntl" in imported
    assert imported - {"hook"} <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    # the json package pulls in re, enum, functools ... (half the hook's time): the hot path does without
    assert not imported & {"json", "re", "pathlib", "datetime", "bashgym_assets", "orjson"}, imported
    assert "RuntimeWarning" not in proc.stderr.decode()
    assert len(capture_path(tmp_path / "traces", "s-1").read_bytes().splitlines()) == 1


def test_older_installs_command_still_works_without_runpy_warning(tmp_path: Path) -> None:
    proc = subprocess.run(
        [PY, "-m", LEGACY_MARKER],
        input=json.dumps(EVENT).encode(),
        capture_output=True,
        env={**os.environ, "BASHGYM_HOME": str(tmp_path)},
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc.stderr
    assert capture_path(tmp_path / "traces", "s-1").exists()
    assert HookCaptureAdapter().claims(capture_path(tmp_path, "x")) and hook.HOOK_SUFFIX == ".hook.jsonl"


def test_parallel_hook_processes_keep_every_line(tmp_path: Path) -> None:
    command = hook_command(home=tmp_path)
    procs = []
    for i in range(8):
        event = {
            **EVENT,
            "session_id": "par",
            "tool_input": {"command": f"echo {i}"},
            "tool_response": {"stdout": str(i) * 400_000},
        }  # 400 KB lines: many pipe buffers each
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        procs.append((proc, json.dumps(event).encode()))
    outs = [proc.communicate(data, timeout=120) for proc, data in procs]
    assert all(proc.returncode == 0 for proc, _ in procs) and outs == [(b"", b"")] * 8
    lines = capture_path(tmp_path / "traces", "par").read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 9
    records = [json.loads(line) for line in lines[:-1]]
    assert sorted(r["tool_input"]["command"] for r in records) == [f"echo {i}" for i in range(8)]
    assert all(r["tool_response"]["stdout"] == r["tool_input"]["command"][-1] * 400_000 for r in records)
    assert not (tmp_path / hook.ERROR_LOG).exists()


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"session_id": "t", "cut": ',
        b"\xff\xfe\x00garbage",
        b"[" * 100_000,
        b'{"session_id": "t2", "x": "\\ud83d", "n": NaN, "big": ' + b"9" * 5000 + b"}",
        b'\xef\xbb\xbf{"session_id": "t3", "bad": "\xff"}',
    ],
    ids=["empty", "text", "list", "truncated", "binary", "deep", "odd-values", "bom-invalid-utf8"],
)
def test_malformed_input_exits_0_quietly_and_is_kept(tmp_path: Path, raw: bytes) -> None:
    proc = _run_hook(None, tmp_path, raw=raw)
    assert proc.stderr == b""
    (path,) = (tmp_path / "traces").glob("*.hook.jsonl")
    (line,) = path.read_bytes().splitlines()
    record = json.loads(line)
    outcome = HookCaptureAdapter().parse(path)
    if path.name.startswith("t"):  # repaired and captured: lone surrogate, NaN, huge int, BOM, bad UTF-8
        assert record.get("x") in (None, "\ufffd") and record.get("n", None) is None
        assert "big" not in record or record["big"] is None
        assert outcome.quarantine == [] and outcome.sessions[0].session_id in ("t2", "t3")
    else:
        assert path.name == "unknown-session.hook.jsonl" and record["hook_error"].startswith(
            "invalid hook input"
        )
        assert outcome.sessions == [] and "invalid hook input" in outcome.quarantine[0].reason


def test_oversized_input_is_drained_and_recorded(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        ["/bin/sh", "-c", hook_command(home=tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    head = b'{"session_id": "big", "tool_response": {"stdout": "'
    proc.stdin.write(head + b"x" * (hook.MAX_INPUT_BYTES + 1000) + b'"}}')  # no BrokenPipeError: all read
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0 and proc.stdout.read() == b"" and proc.stderr.read() == b""
    (path,) = (tmp_path / "traces").glob("*.hook.jsonl")
    record = json.loads(path.read_bytes())
    assert path.name == "unknown-session.hook.jsonl" and "over" in record["hook_error"]
    assert record["raw"].startswith(head.decode()) and len(record["raw"]) == 2000
    assert "not captured" in (tmp_path / hook.ERROR_LOG).read_text()


def test_unwritable_target_exits_0_with_the_error_logged(tmp_path: Path) -> None:
    (tmp_path / "traces").write_text("a file where the capture folder should be")  # fails for root too
    proc = _run_hook(EVENT, tmp_path)
    assert proc.stderr == b""
    (log,) = (tmp_path / hook.ERROR_LOG).read_text().splitlines()
    assert "could not capture event" in log and ("NotADirectoryError" in log or "FileExistsError" in log)

    home = tmp_path / "home-is-a-file"
    home.write_text("")
    proc = _run_hook(EVENT, home)  # not even the error log: one line on stderr, still exit 0, no stdout
    assert proc.stderr.startswith(b"bashgym hook: ") and proc.stderr.count(b"\n") == 1


def test_lock_wait_is_bounded_and_the_line_still_written(tmp_path: Path) -> None:
    target = tmp_path / "held.hook.jsonl"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT)
    try:
        fcntl.flock(
            fd, fcntl.LOCK_EX
        )  # another writer holding the lock (flock: per open file, same process too)
        start = time.monotonic()
        assert hook.append_locked(target, b"line\n", lock_wait=0.3) is False
        assert 0.3 <= time.monotonic() - start < 5
    finally:
        os.close(fd)
    assert hook.append_locked(target, b"next\n", lock_wait=0.3) is True
    assert target.read_bytes() == b"line\nnext\n"


def test_stdin_read_is_bounded_in_time(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b'{"session_id"')
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            hook.read_input(read_end, timeout=0.3)  # the writer never closes its end
        assert time.monotonic() - start < 5
    finally:
        os.close(read_end)
        os.close(write_end)


def _old_line(raw: bytes, now: str) -> bytes:
    """What the hook wrote before it went standard-library only (orjson, via ``jsonsafe``)."""
    from bashgym_assets.ingest.jsonsafe import json_bytes, lenient_loads

    return json_bytes({"bashgym_captured_at": now, **lenient_loads(raw)[0]}) + b"\n"


COMPAT_INPUTS = [
    json.dumps(EVENT).encode(),
    json.dumps(
        {**EVENT, "tool_response": {"stdout": 'é ☃ 😀 \u2028 \x00\x1f\x7f "q" \\ / \t\r\n\b\f'}},
        ensure_ascii=False,
    ).encode(),
    json.dumps({**EVENT, "tool_response": {"stdout": "é ☃ 😀"}}).encode(),  # \\u escapes, surrogate pair
    b'{"session_id":"s","f":[0.5,1.0,-0.0,1e16,1e300,123456789.125,3.14],"i":[0,-1,9223372036854775807]}',
    b'{"session_id":"s","big":1180591620717411303424,"nan":NaN,"inf":-Infinity,"over":1e400}',
    b'{"session_id":"s","i":['
    + b",".join(b"9" * n for n in (3999, 4000, 4001, 4200))
    + b","
    + b",".join(b"-" + b"9" * n for n in (3998, 3999, 4000, 4300))
    + b"]}",
    b'{"session_id":"s","f":[1.5e-10,2.5e-300,0.0001,1e-3,1e300]}',
    b'{"session_id":"s","cut":"mid-emoji \\ud83d","pair":"\\ud83d\\ude00","esc":"\\\\ud83d"}',
    b'\xef\xbb\xbf{"session_id":"bom","x":"\xff\xfe bad utf-8"}',
    '{"session_id":"utf16","x":"ü"}'.encode("utf-16"),
    b'{"session_id":"s","deep":' + b"[" * 150 + b"]" * 150 + b',"e":{},"l":[],"t":true,"n":null}',
    json.dumps({"session_id": "dup", "bashgym_captured_at": "theirs", "a": {"b": [{"c": None}]}}).encode(),
]


@pytest.mark.parametrize("raw", COMPAT_INPUTS)
def test_lines_are_byte_identical_to_the_orjson_hook(raw: bytes) -> None:
    now = "2026-01-02T03:04:05.678901+00:00"
    _name, line = hook.build_line(raw, now)
    assert line == _old_line(raw, now)
    saved = hook._make_scanner, hook._make_encoder
    hook._make_scanner = hook._make_encoder = None  # without CPython's _json: the json package, same bytes
    try:
        assert hook.build_line(raw, now)[1] == line
    finally:
        hook._make_scanner, hook._make_encoder = saved


def test_small_floats_differ_in_spelling_only() -> None:
    raw, now = b'{"session_id":"s","f":[1e-9,1e-7,6.15e-05,4.6e-6]}', "2026-01-02T03:04:05+00:00"
    new, old = hook.build_line(raw, now)[1], _old_line(raw, now)
    assert new != old and json.loads(new) == json.loads(old)  # Python's 1e-07 where orjson wrote 1e-7


def test_long_fields_are_cut_and_names_match_the_old_rule() -> None:
    raw = json.dumps({"session_id": "s", "out": "x" * (hook.MAX_FIELD_CHARS + 5)}).encode()
    record = json.loads(hook.build_line(raw)[1])
    assert record["out"] == "x" * hook.MAX_FIELD_CHARS + "\n[... 5 characters cut by bashgym hook]"

    old_rule = re.compile(r"[^A-Za-z0-9_.-]+")
    rng = random.Random(7)
    alphabet = "aZ09_.-/ é😀\x00:..--"
    for _ in range(2000):
        sid = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        expected = old_rule.sub("-", sid).strip(".-") or "unknown-session"
        assert hook.capture_name(sid) == f"{expected[:120]}.hook.jsonl", sid
    assert hook.capture_name("x" * 300) == "x" * 120 + ".hook.jsonl" and hook.capture_name(None).startswith(
        "unk"
    )

    stamp = datetime.fromisoformat(hook.timestamp())
    assert stamp.tzinfo == UTC and abs((datetime.now(UTC) - stamp).total_seconds()) < 5


def test_status_flags_commands_of_older_installs(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    legacy = f"env BASHGYM_HOME=/x {PY} -m {LEGACY_MARKER}"
    install_hooks(path, command=legacy)
    assert hooks_status(path).outdated == [legacy]
    install_hooks(path, command=hook_command(home=tmp_path))  # replaces the old entries, no duplicates
    status = hooks_status(path)
    assert status.outdated == [] and status.missing == [] and status.commands == [hook_command(home=tmp_path)]
    groups = [g for event in json.loads(path.read_text())["hooks"].values() for g in event]
    assert sum(len(g["hooks"]) for g in groups) == 3


def test_an_event_of_many_large_fields_is_cut_to_a_line_the_importer_reads(tmp_path: Path) -> None:
    """Each field under the 1M-character cut, but 20 of them: an 18 MB line the importer (16 MB lines) dropped."""
    event = {
        "hook_event_name": "PostToolUse",
        "session_id": "big-patch",
        "cwd": "/work/repo-x",
        "tool_name": "Write",
        "tool_input": {"file_path": "/work/repo-x/a.txt"},
        "tool_response": {"structuredPatch": [{"lines": ["x" * 900_000]} for _ in range(20)]},
    }
    name, line = hook.build_line(json.dumps(event).encode())
    assert name == "big-patch.hook.jsonl" and len(line) <= hook.MAX_LINE_BYTES
    path = tmp_path / name
    path.write_bytes(line)
    old = time.time() - 60
    os.utime(path, (old, old))
    outcome = HookCaptureAdapter().parse(path)
    assert not outcome.quarantine and "cut by bashgym hook" in outcome.sessions[0].steps[0].output
