"""The adapters bashgym knows, in priority order. A new agent format is one more entry here."""

from __future__ import annotations

from pathlib import Path

from bashgym_assets.ingest.base import SessionAdapter
from bashgym_assets.ingest.bashgym_trace import BashGymTraceAdapter
from bashgym_assets.ingest.claude_code import ClaudeCodeAdapter
from bashgym_assets.ingest.hook_capture import HookCaptureAdapter

ADAPTERS: list[SessionAdapter] = [HookCaptureAdapter(), ClaudeCodeAdapter(), BashGymTraceAdapter()]


def claiming_adapter(path: Path) -> SessionAdapter | None:
    """The adapter whose format this file name belongs to (session or side file), if any."""
    for adapter in ADAPTERS:
        if adapter.claims(path):
            return adapter
    return None


def session_adapter(path: Path) -> SessionAdapter | None:
    """The adapter that parses this file as a session of its own, if any."""
    adapter = claiming_adapter(path)
    return adapter if adapter is not None and adapter.matches(path) else None
