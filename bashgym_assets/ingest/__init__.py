"""Stage 1: agent session logs -> canonical ``Session`` records (``raw_sessions``), per repository.

Public API:

- adapters: ``ClaudeCodeAdapter``, ``BashGymTraceAdapter``, ``HookCaptureAdapter`` (protocol ``SessionAdapter``,
  registry ``ADAPTERS``); each ``parse(path)`` returns a ``ParseOutcome`` (sessions + ``QuarantineRecord``s)
- repos: ``detect_repo(cwd)``, ``sanitize_key(name)``, ``NO_REPO_KEY`` (the catch-all partition)
- scanning: ``scan(dirs, cursor)`` -> ``ScanResult`` (changed repos, new ``ScanCursor``)
- materialising: ``ingest_repo(lake, dirs, repo)`` -> ``IngestReport``; ``discover_repos(dirs)``
- capture: ``python -I -S .../bashgym_assets/ingest/hook_entry.py`` (the hook, standard library only; see
  ``hook``), ``install_hooks`` / ``uninstall_hooks`` / ``hooks_status``, CLI
  ``python -m bashgym_assets.ingest.hooks_cli install|uninstall|status``
- demo data: ``SAMPLE_TRACES_DIR`` (bundled); generators for tests and benchmarks: ``testing.traces``
"""

from pathlib import Path

from bashgym_assets.ingest.base import ParseOutcome, QuarantineRecord, SessionAdapter
from bashgym_assets.ingest.bashgym_trace import BashGymTraceAdapter
from bashgym_assets.ingest.claude_code import ClaudeCodeAdapter
from bashgym_assets.ingest.hook_capture import HookCaptureAdapter
from bashgym_assets.ingest.hook_installer import hooks_status, install_hooks, uninstall_hooks
from bashgym_assets.ingest.pipeline import (
    QUARANTINE,
    QUARANTINE_SCHEMA,
    RAW_SESSIONS,
    IngestReport,
    discover_repos,
    ingest_repo,
)
from bashgym_assets.ingest.registry import ADAPTERS, session_adapter
from bashgym_assets.ingest.repos import NO_REPO_KEY, RepoInfo, detect_repo, sanitize_key
from bashgym_assets.ingest.scan import ScanCursor, ScanResult, scan

#: Synthetic Claude Code sessions shipped for the demo (3 repos + one session outside any repo).
SAMPLE_TRACES_DIR = Path(__file__).resolve().parent.parent / "data" / "sample_traces"

__all__ = [
    "ADAPTERS",
    "NO_REPO_KEY",
    "QUARANTINE",
    "QUARANTINE_SCHEMA",
    "RAW_SESSIONS",
    "SAMPLE_TRACES_DIR",
    "BashGymTraceAdapter",
    "ClaudeCodeAdapter",
    "HookCaptureAdapter",
    "IngestReport",
    "ParseOutcome",
    "QuarantineRecord",
    "RepoInfo",
    "ScanCursor",
    "ScanResult",
    "SessionAdapter",
    "detect_repo",
    "discover_repos",
    "hooks_status",
    "ingest_repo",
    "install_hooks",
    "sanitize_key",
    "scan",
    "session_adapter",
    "uninstall_hooks",
]
