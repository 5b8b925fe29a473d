"""Files written by the live-capture hook (``<session_id>.hook.jsonl``) -> canonical sessions.

Each line is one Claude Code hook event (``UserPromptSubmit``, ``PostToolUse``, ``PostToolUseFailure``,
``Stop`` ...) plus ``bashgym_captured_at``. A session also present as a full transcript is kept from the
transcript (``ClaudeCodeAdapter`` has the higher priority), since that has tokens, thinking and subagents.

Hook input is whatever Claude Code (or a test harness) sent: fields of the wrong type are not trusted. A
``session_id`` or ``cwd`` that is not a string is ignored (the file name gives the id), tool names and
responses of other types are written as JSON text, and the finished session goes through ``conform_session``
like every adapter's. An event line the importer fails on is quarantined alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from bashgym_assets.ingest.base import (
    MAX_SHORT_CHARS,
    LineReader,
    ParseOutcome,
    QuarantineRecord,
    RepoResolver,
    conform_session,
    parse_ts,
    snippet_of,
    trusted,
)
from bashgym_assets.ingest.claude_code import (
    TASK_KINDS,
    as_text,
    classify_user_text,
    exit_code_of,
    label,
    line_failed,
    peek_cwd_jsonl,
    read_json_records,
)
from bashgym_assets.ingest.jsonsafe import json_text
from bashgym_assets.ingest.repos import resolve_repo
from bashgym_assets.sessions import Prompt, Session, Step

#: ``hook.HOOK_SUFFIX``, not imported from there: ``python -m bashgym_assets.ingest.hook`` (older installs)
#: imports this package first, and a package that imports the module being run makes runpy warn.
HOOK_SUFFIX = ".hook.jsonl"


def _response_text(response: Any) -> str:
    if isinstance(response, str):
        return response
    if isinstance(response, dict):
        if "stdout" in response or "stderr" in response:
            out = as_text(response.get("stdout") or "")
            err = as_text(response.get("stderr") or "")
            return out + ("\n" if out and err else "") + err
        for key in ("content", "output", "result", "message"):
            if isinstance(response.get(key), str):
                return response[key]
    if isinstance(response, list):
        return "\n".join(as_text(b.get("text", "")) if isinstance(b, dict) else as_text(b) for b in response)
    return as_text(response)


def _id_or_none(value: Any) -> str | None:
    """An id as written, or None for anything that is no id (a list, an object, a 10 MB string)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return value if isinstance(value, str) and value and len(value) <= MAX_SHORT_CHARS else None


class _HookSession:
    """What the events of one session id in a capture file add up to."""

    def __init__(self, sid: str | None) -> None:
        self.sid = sid
        self.steps: list[Step] = []
        self.prompts: list[Prompt] = []
        self.events: Counter = Counter()
        self.task: int | None = None
        self.cwd: str | None = None
        self.first: Any = None
        self.last: Any = None


class HookCaptureAdapter:
    """What ``bashgym_assets.ingest.hook`` captured."""

    name = "claude_code_hook"
    priority = 5

    def claims(self, path: Path) -> bool:
        return path.name.endswith(HOOK_SUFFIX)

    def matches(self, path: Path) -> bool:
        return self.claims(path)

    def related_files(self, path: Path) -> list[Path]:
        return []

    def peek_cwd(self, path: Path) -> str | None:
        return peek_cwd_jsonl(path)

    def parse(self, path: Path, repo_of: RepoResolver | None = None) -> ParseOutcome:
        outcome = ParseOutcome(files=[str(path)])
        reader = LineReader(path, adapter=self.name)
        repairs: Counter = Counter()
        # One file is one session, unless its events name several (two ids the hook's file naming maps to one
        # name, ``a/b`` and ``a:b``): each id then gets its own session, and nothing of one lands in the other.
        groups: dict[str | None, _HookSession] = {}
        current: _HookSession | None = None
        for lineno, event in read_json_records(reader, outcome.quarantine, repairs):
            if "hook_error" in event:
                outcome.quarantine.append(
                    QuarantineRecord(
                        file=str(path),
                        line=lineno,
                        reason=as_text(event["hook_error"]),
                        snippet=snippet_of(as_text(event.get("raw", ""))),
                        adapter=self.name,
                    )
                )
                continue
            sid = _id_or_none(event.get("session_id"))
            if sid is not None:
                if sid not in groups and list(groups) == [None]:  # events before the first id are that id's
                    groups[sid] = groups.pop(None)
                    groups[sid].sid = sid
                current = groups.setdefault(sid, _HookSession(sid))
            elif current is None:
                current = groups.setdefault(None, _HookSession(None))
            try:
                name = label(event.get("hook_event_name") or "unknown")
                ts = parse_ts(event.get("bashgym_captured_at"))
                if ts is None and event.get("bashgym_captured_at") is not None:
                    repairs["unusable_timestamps"] += 1  # unparsable or out of range: the event stays
                if name.startswith("PostToolUse") and event.get("tool_name"):
                    current.steps.append(self._step(event, name, len(current.steps), ts, current.task))
                elif name == "UserPromptSubmit" and isinstance(event.get("prompt"), str):
                    kind = classify_user_text(event["prompt"], {})
                    current.prompts.append(
                        trusted(
                            Prompt, index=len(current.prompts), text=event["prompt"], timestamp=ts, kind=kind
                        )
                    )
                    if kind in TASK_KINDS:
                        current.task = len(current.prompts) - 1
            except Exception as exc:  # an event shape nobody foresaw: lose that event, not the session
                outcome.quarantine.append(line_failed(path, lineno, event, exc, self.name))
                continue
            current.events[name] += 1
            if ts is not None:  # events can arrive out of order: the session spans the earliest to the latest
                current.first = ts if current.first is None else min(current.first, ts)
                current.last = ts if current.last is None else max(current.last, ts)
            if current.cwd is None and isinstance(event.get("cwd"), str):
                current.cwd = event["cwd"]
        outcome.bytes_read = reader.bytes_read
        if not groups:
            if reader.bytes_read == 0 and not reader.pending_tail and not outcome.quarantine:
                outcome.quarantine.append(
                    QuarantineRecord(file=str(path), reason="empty file", adapter=self.name)
                )
            return outcome
        unusable = repairs.pop("unusable_timestamps", 0)
        for group in groups.values():
            if not group.events:
                continue
            key, repo_path, remote = (repo_of or resolve_repo)(group.cwd)
            extra: dict[str, Any] = {"hook_events": dict(group.events)}
            if unusable:
                extra["unusable_timestamps"] = unusable
            if repairs:
                extra["repaired_lines"] = dict(repairs)
            if reader.encoding != "utf-8":
                extra["encodings"] = [reader.encoding]
            if len(groups) > 1:
                extra["sessions_in_file"] = len(groups)
            outcome.sessions.append(
                conform_session(
                    trusted(
                        Session,
                        session_id=group.sid or path.name.removesuffix(HOOK_SUFFIX),
                        source_format=self.name,
                        source_path=str(path),
                        repo=key,
                        repo_path=repo_path,
                        repo_remote=remote,
                        cwd=group.cwd,
                        model=None,
                        agent_version=None,
                        git_branch=None,
                        started_at=group.first,
                        ended_at=group.last,
                        input_tokens=0,
                        output_tokens=0,
                        cache_read_tokens=0,
                        cache_creation_tokens=0,
                        prompts=group.prompts,
                        steps=group.steps,
                        content_hash=reader.content_hash
                        if len(groups) == 1
                        else f"{reader.content_hash}:{group.sid}",
                        extra=extra,
                    )
                )
            )
        return outcome

    @staticmethod
    def _step(event: dict[str, Any], name: str, index: int, ts: Any, task: int | None) -> Step:
        tool_input = event.get("tool_input")
        response = event.get("tool_response")
        failed = name == "PostToolUseFailure" or event.get("error") not in (
            None,
            "",
            False,
        )  # "error": null is none
        text = _response_text(event.get("error") if failed and response is None else response)
        if isinstance(response, dict) and (response.get("is_error") or response.get("interrupted") is True):
            failed = True  # an interrupted command did not succeed
        code = exit_code_of(text, failed, response)
        if failed and code == 0:
            code = 1
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        return trusted(
            Step,
            index=index,
            tool_name=as_text(event["tool_name"]),
            tool_use_id=_id_or_none(event.get("tool_use_id")),
            input=json_text(tool_input) if tool_input is not None else "",
            command=command if isinstance(command, str) else None,
            output=text,
            exit_code=code,
            success=not failed and code == 0,
            is_error=failed,
            cwd=event["cwd"] if isinstance(event.get("cwd"), str) else None,
            started_at=ts,
            finished_at=ts,
            sidechain=False,
            agent_id=None,
            prompt_index=task,
        )
