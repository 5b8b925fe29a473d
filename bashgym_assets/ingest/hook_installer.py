"""Merge bashgym's live-capture hook into Claude Code's ``~/.claude/settings.json`` and take it out again.

The user's own hooks and every other setting are left as they were: install adds one entry per event (after
removing any older bashgym entry, so re-installing never duplicates), uninstall removes only entries whose
command runs the hook (``.../bashgym_assets/ingest/hook_entry.py``, or ``-m bashgym_assets.ingest.hook`` as
older versions installed it) and prunes the groups/events that only held them. The file is rewritten
atomically with a backup beside it; a settings file that is not valid JSON is never overwritten.

The command is ``env BASHGYM_HOME=<home> <this python> -I -S <.../hook_entry.py>``: the hook imports only the
standard library, so the interpreter starts without site-packages (``-S``), ``PYTHON*`` variables, the user site
and the agent's working directory (``-I``): about 30 ms a call, most of it the interpreter's start, instead of
0.9 s for ``-m`` (which imports the ``bashgym_assets.ingest`` package first; ``benchmarks/bench_hook.py``).
``hooks_status`` lists commands of the older form as ``outdated``; installing again replaces them.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bashgym_assets.config import get_settings
from bashgym_assets.lake import atomic_write_text

#: The script the installed command runs (by path: nothing of the package is imported).
HOOK_ENTRY = Path(__file__).resolve().with_name("hook_entry.py")
#: What marks bashgym's entries: the script above, and the ``-m`` module of older installs.
MARKER = "bashgym_assets/ingest/hook_entry.py"
LEGACY_MARKER = "bashgym_assets.ingest.hook"
#: PostToolUse and Stop carry the work; UserPromptSubmit keeps the user's task with the captured session.
EVENTS = ("PostToolUse", "Stop", "UserPromptSubmit")
_TOOL_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure"}


class HookSettingsError(RuntimeError):
    """The settings file cannot be merged safely (not JSON, or not the documented shape)."""


class HookStatus(BaseModel):
    settings_path: str
    installed: list[str]
    missing: list[str]
    commands: list[str]
    other_hooks: int
    #: installed commands of an older form (``python -m``, about 0.9 s a call): ``install`` again replaces them
    outdated: list[str] = []


def default_settings_path() -> Path:
    return Path.home() / ".claude" / "settings.json"


def hook_command(home: Path | None = None, python: str | None = None) -> str:
    """The command Claude Code runs: this interpreter on ``hook_entry.py`` with ``-I -S``, the data folder pinned
    (hooks get no env of ours)."""
    home = (home or get_settings().home).resolve()
    return shlex.join(["env", f"BASHGYM_HOME={home}", python or sys.executable, "-I", "-S", str(HOOK_ENTRY)])


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookSettingsError(
            f"{path} is not valid JSON ({exc}); fix it by hand, bashgym will not overwrite it"
        ) from exc
    if not isinstance(data, dict):
        raise HookSettingsError(f"{path} holds a JSON {type(data).__name__}, expected an object")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise HookSettingsError(f"{path}: 'hooks' must map event names to lists of matcher groups")
    return data


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        shutil.copy2(path, path.with_name(path.name + ".bashgym-backup"))
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _is_ours(hook: Any) -> bool:
    command = str(hook.get("command", "")) if isinstance(hook, dict) else ""
    return MARKER in command or LEGACY_MARKER in command


def _strip_ours(data: dict[str, Any]) -> int:
    """Remove bashgym entries in place; prune groups and events that held only them. Returns entries removed."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return 0
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            kept = [h for h in inner if not _is_ours(h)]
            removed += len(inner) - len(kept)
            if kept or not inner:
                kept_groups.append({**group, "hooks": kept})
        if kept_groups:
            hooks[event] = kept_groups
        elif groups:
            del hooks[event]
    if not hooks and removed:
        del data["hooks"]
    return removed


def install_hooks(
    settings_path: Path | None = None, command: str | None = None, events: tuple[str, ...] = EVENTS
) -> HookStatus:
    path = settings_path or default_settings_path()
    data = _load(path)
    _strip_ours(data)
    hooks = data.setdefault("hooks", {})
    entry = {"type": "command", "command": command or hook_command(), "timeout": 10}
    for event in events:
        group: dict[str, Any] = (
            {"matcher": "*", "hooks": [entry]} if event in _TOOL_EVENTS else {"hooks": [entry]}
        )
        hooks.setdefault(event, []).append(group)
    _save(path, data)
    return hooks_status(path)


def uninstall_hooks(settings_path: Path | None = None) -> int:
    """Remove bashgym's entries; returns how many were removed (0: the file is left untouched)."""
    path = settings_path or default_settings_path()
    data = _load(path)
    removed = _strip_ours(data)
    if removed:
        _save(path, data)
    return removed


def hooks_status(settings_path: Path | None = None, events: tuple[str, ...] = EVENTS) -> HookStatus:
    path = settings_path or default_settings_path()
    hooks = _load(path).get("hooks", {})
    installed, commands, other = [], [], 0
    for event, groups in hooks.items():
        for group in groups:
            for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                if _is_ours(hook):
                    installed.append(event)
                    commands.append(str(hook.get("command")))
                else:
                    other += 1
    return HookStatus(
        settings_path=str(path),
        installed=sorted(set(installed)),
        missing=[e for e in events if e not in installed],
        commands=sorted(set(commands)),
        other_hooks=other,
        outdated=sorted({c for c in commands if MARKER not in c}),
    )
