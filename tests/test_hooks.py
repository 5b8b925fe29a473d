"""The live-capture hook (real processes, real file locks) and its settings.json installer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bashgym_assets.ingest.hook import capture_path
from bashgym_assets.ingest.hook_capture import HookCaptureAdapter
from bashgym_assets.ingest.hook_installer import (
    MARKER,
    HookSettingsError,
    hook_command,
    hooks_status,
    install_hooks,
    uninstall_hooks,
)

PY = sys.executable


def _run_hook(event: object, home: Path, raw: bytes | None = None) -> subprocess.CompletedProcess:
    data = raw if raw is not None else json.dumps(event).encode()
    return subprocess.run([PY, "-m", "bashgym_assets.ingest.hook"], input=data, capture_output=True,
                          env={**os.environ, "BASHGYM_HOME": str(home)}, timeout=60)


def test_hook_appends_events_that_parse_back_into_a_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cwd = "/home/demo/projects/webshop"
    events = [
        {"hook_event_name": "UserPromptSubmit", "session_id": "abc-123", "cwd": cwd, "prompt": "run the tests"},
        {"hook_event_name": "PostToolUse", "session_id": "abc-123", "cwd": cwd, "tool_name": "Bash",
         "tool_use_id": "toolu_1", "tool_input": {"command": "pytest -q"},
         "tool_response": {"stdout": "3 passed", "stderr": "", "interrupted": False}},
        {"hook_event_name": "PostToolUseFailure", "session_id": "abc-123", "cwd": cwd, "tool_name": "Bash",
         "tool_input": {"command": "make deploy"}, "error": "Exit code 2\nmake: *** No rule to make target"},
        {"hook_event_name": "PostToolUse", "session_id": "abc-123", "cwd": cwd, "tool_name": "Read",
         "tool_input": {"file_path": "a.py"}, "tool_response": {"type": "text", "file": {"content": "x"}}},
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
        ("Bash", "pytest -q", 0, True), ("Bash", "make deploy", 2, False), ("Read", None, 0, True)]
    assert s.steps[0].output == "3 passed" and s.steps[0].prompt_index == 0
    assert [p.text for p in s.prompts] == ["run the tests"]
    assert s.extra["hook_events"]["Stop"] == 1


def test_hook_never_fails_the_agent_on_bad_input(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = _run_hook(None, home, raw=b"\xff not json")
    assert proc.returncode == 0
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
        "PostToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}],
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
        assert len(ours) == 1
    assert (path.parent / "settings.json.bashgym-backup").exists()

    # the installed command really captures when Claude Code runs it through a shell
    event = {"hook_event_name": "PostToolUse", "session_id": "via-shell", "cwd": "/x/y", "tool_name": "Bash",
             "tool_input": {"command": "true"}, "tool_response": {"stdout": ""}}
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
        return subprocess.run([PY, "-m", "bashgym_assets.ingest.hooks_cli", *args, "--settings", str(path)],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "BASHGYM_HOME": str(tmp_path / "h")})

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
