"""The live-capture hook: ``python -m bashgym_assets.ingest.hook`` with Claude Code's hook JSON on stdin.

Claude Code runs it on PostToolUse, Stop (and UserPromptSubmit, so captured sessions keep the user's task).
Each event becomes one line ``{"bashgym_captured_at": ..., **event}`` appended to
``<capture_dir>/<session_id>.hook.jsonl``. The line is written with one ``write`` on an ``O_APPEND``
descriptor under an exclusive ``flock``, so concurrent sessions and parallel tool calls never interleave
partial lines. ``HookCaptureAdapter`` reads these files back into ``raw_sessions``.

The hook never blocks or fails the agent: any error goes to stderr and the exit status is 0. Input orjson
refuses is repaired where that loses nothing else (lone surrogate escapes from output cut mid-emoji, a BOM,
invalid UTF-8: see ``jsonsafe``), and what orjson cannot write (nesting past 254 levels, ints beyond 64 bits)
is written by the standard library, so such an event is captured rather than lost.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from bashgym_assets.config import get_settings
from bashgym_assets.ingest.jsonsafe import MAX_JSON_DEPTH, json_bytes, lenient_loads

HOOK_SUFFIX = ".hook.jsonl"
#: Tool outputs above this are cut (with a note) so one capture line stays a sane size.
MAX_FIELD_CHARS = 1_000_000
_SAFE_ID = re.compile(r"[^A-Za-z0-9_.-]+")


def capture_path(capture_dir: Path, session_id: str | None) -> Path:
    sid = _SAFE_ID.sub("-", session_id or "").strip(".-") or "unknown-session"
    return capture_dir / f"{sid[:120]}{HOOK_SUFFIX}"


def _cap(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
        return value[:MAX_FIELD_CHARS] + f"\n[... {len(value) - MAX_FIELD_CHARS} characters cut by bashgym hook]"
    if depth >= MAX_JSON_DEPTH:  # deeper than anything is written (json_bytes cuts it): no recursion limit hit
        return value
    if isinstance(value, dict):
        return {k: _cap(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap(v, depth + 1) for v in value]
    return value


def append_locked(path: Path, data: bytes) -> None:
    """Append ``data`` (one whole line) under an exclusive lock, with a single write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def capture_event(raw: bytes, capture_dir: Path | None = None) -> Path:
    """Record one hook event (the raw stdin bytes); returns the file it went to."""
    folder = capture_dir or get_settings().capture_dir
    now = datetime.now(UTC).isoformat()
    try:
        event, _repairs = lenient_loads(raw)
        if not isinstance(event, dict):
            raise ValueError(f"hook input is a JSON {type(event).__name__}, not an object")
    except (orjson.JSONDecodeError, ValueError) as exc:
        record: dict[str, Any] = {"bashgym_captured_at": now, "hook_error": f"invalid hook input: {exc}",
                                  "raw": raw[:2000].decode("utf-8", errors="replace")}
        path = capture_path(folder, None)
    else:
        record = {"bashgym_captured_at": now, **_cap(event)}
        path = capture_path(folder, event.get("session_id") if isinstance(event.get("session_id"), str) else None)
    append_locked(path, json_bytes(record) + b"\n")
    return path


def main() -> int:
    try:
        capture_event(sys.stdin.buffer.read())
    except Exception as exc:  # never break the user's agent session
        print(f"bashgym hook: could not capture event: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
