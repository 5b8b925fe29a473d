"""Bash Gym's own trace JSON (``~/.bashgym/traces/session_*.json``, ``data/gold_traces/*.json``).

Its hook (``post_tool_use.py``) keeps one JSON document per session: a list of step records
``{step_id, timestamp, tool_name, command, output, exit_code, cwd, success, repo: {path, name, git_remote,
git_branch, is_git_repo}}``. Finished traces wrap that list as ``{"trace": [...], "metadata": {...},
"primary_repo": {...}}`` (``steps`` is accepted too). Bad step records are quarantined one by one (``line`` is
the step's 1-based position); the rest of the file is still imported.

Documents are read leniently (``jsonsafe.lenient_loads``: BOM, UTF-16, invalid UTF-8, lone surrogates, NaN)
and nothing in them is trusted to have its documented type: paths, remotes and ids of another type are
ignored, outputs of another type are kept as JSON text, and the session goes through ``conform_session``
(exit codes wrapped to int32, out-of-range timestamps dropped ...) like every adapter's.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import orjson

from bashgym_assets.ingest.base import (
    MAX_LINE_BYTES,
    MAX_SHORT_CHARS,
    ParseOutcome,
    QuarantineRecord,
    RepoResolver,
    conform_session,
    file_settled,
    parse_ts,
    snippet_of,
    trusted,
)
from bashgym_assets.ingest.jsonsafe import json_text, lenient_loads
from bashgym_assets.ingest.repos import resolve_repo
from bashgym_assets.sessions import Prompt, Session, Step

_MAX_FILE_BYTES = 4 * MAX_LINE_BYTES


def _steps_and_meta(doc: Any) -> tuple[list[Any] | None, dict[str, Any]]:
    if isinstance(doc, list):
        return doc, {}
    if isinstance(doc, dict):
        for key in ("trace", "steps"):
            if isinstance(doc.get(key), list):
                meta = {k: v for k, v in doc.items() if k != key}
                if isinstance(doc.get("metadata"), dict):
                    meta = {**doc["metadata"], **meta}
                return doc[key], meta
    return None, {}


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json_text(value)


def _str(value: Any) -> str | None:
    """A path/name/remote as written; None for any other type or a value too long to be one."""
    return value if isinstance(value, str) and value and len(value) <= MAX_SHORT_CHARS else None


def _dict(value: Any) -> dict:
    """An object field (``repo``, ``primary_repo``); an empty one for any other type."""
    return value if isinstance(value, dict) else {}


def _id(value: Any) -> str | None:
    """A step or session id: a string, or an int written as one; None for lists, objects ..."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _str(value)


def _int_or_none(value: Any) -> int | None:
    """The exit code as an int of any size (``conform_session`` fits it to int32); None if it is no int."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,400}\s*", value):  # not "--1", not "²"
        return int(value)
    return None


class BashGymTraceAdapter:
    """Bash Gym trace JSON documents."""

    name = "bashgym_trace"
    priority = 10

    def claims(self, path: Path) -> bool:
        return path.suffix == ".json" and not path.name.startswith(".")

    def matches(self, path: Path) -> bool:
        return self.claims(path)

    def related_files(self, path: Path) -> list[Path]:
        return []

    def _load(self, path: Path) -> tuple[Any, bytes, list[str]]:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_FILE_BYTES + 1)
        if len(data) > _MAX_FILE_BYTES:
            raise ValueError(f"file larger than {_MAX_FILE_BYTES} bytes")
        doc, repairs = lenient_loads(data)
        return doc, data, repairs

    @staticmethod
    def _step(rec: dict[str, Any], index: int, prompt_index: int | None) -> Step:
        repo = _dict(rec.get("repo"))
        code = _int_or_none(rec.get("exit_code", rec.get("exitCode")))
        success = rec.get("success") if isinstance(rec.get("success"), bool) else None
        if success is None and code is not None:
            success = code == 0
        command = rec.get("command")
        ts = parse_ts(rec.get("timestamp"))
        name = rec.get("tool_name") or rec.get("tool")
        return trusted(
            Step,
            index=index,
            tool_name=name if isinstance(name, str) else _text(name),
            tool_use_id=_id(rec.get("step_id")),
            input=_text(rec.get("tool_input", {"command": command} if command is not None else None)),
            command=command if isinstance(command, str) else None,
            output=_text(rec.get("output")),
            exit_code=code,
            success=success,
            is_error=success is False,
            cwd=_str(rec.get("cwd")) or _str(repo.get("path")),
            started_at=ts,
            finished_at=ts,
            sidechain=False,
            agent_id=None,
            prompt_index=prompt_index,
        )

    def peek_cwd(self, path: Path) -> str | None:
        try:
            doc, _, _ = self._load(path)
        except (OSError, ValueError):
            return None
        steps, meta = _steps_and_meta(doc)
        primary = meta.get("primary_repo")
        if isinstance(primary, dict) and _str(primary.get("path")):
            return primary["path"]
        for step in steps or []:
            if isinstance(step, dict):
                repo = step.get("repo")
                if isinstance(repo, dict) and _str(repo.get("path")):
                    return repo["path"]
                if _str(step.get("cwd")):
                    return step["cwd"]
        return _str(meta.get("cwd"))

    def parse(self, path: Path, repo_of: RepoResolver | None = None) -> ParseOutcome:
        outcome = ParseOutcome(files=[str(path)])
        quarantine = outcome.quarantine
        try:
            if not file_settled(path):
                outcome.unsettled = True
                return outcome  # a document being rewritten: read it once it has settled
            doc, data, repairs = self._load(path)
        except FileNotFoundError:
            quarantine.append(
                QuarantineRecord(
                    file=str(path), reason="file vanished before or while it was read", adapter=self.name
                )
            )
            return outcome
        except orjson.JSONDecodeError as exc:
            raw = path.read_bytes()[:400] if path.exists() else b""
            reason = "empty file" if not raw.strip() else f"invalid JSON document: {exc}"
            quarantine.append(
                QuarantineRecord(file=str(path), reason=reason, snippet=snippet_of(raw), adapter=self.name)
            )
            return outcome
        except (OSError, ValueError) as exc:
            quarantine.append(
                QuarantineRecord(file=str(path), reason=f"unreadable: {exc}", adapter=self.name)
            )
            return outcome
        outcome.bytes_read = len(data)
        records, meta = _steps_and_meta(doc)
        if records is None:
            quarantine.append(
                QuarantineRecord(
                    file=str(path),
                    adapter=self.name,
                    snippet=snippet_of(data),
                    reason="not a Bash Gym trace (no list of steps)",
                )
            )
            return outcome
        task = meta.get("user_prompt") or meta.get("task") or meta.get("prompt")
        has_prompt = isinstance(task, str) and bool(task)  # steps point at the prompt only when there is one
        steps: list[Step] = []
        cwd: str | None = None
        remote: str | None = None
        branch: str | None = None
        for pos, rec in enumerate(records, start=1):
            if not isinstance(rec, dict) or not (rec.get("tool_name") or rec.get("tool")):
                quarantine.append(
                    QuarantineRecord(
                        file=str(path),
                        line=pos,
                        adapter=self.name,
                        snippet=snippet_of(_text(rec)),
                        reason="step record without tool_name",
                    )
                )
                continue
            try:
                step = self._step(rec, len(steps), 0 if has_prompt else None)
            except Exception as exc:  # a record shape nobody foresaw: lose that step, not the trace
                quarantine.append(
                    QuarantineRecord(
                        file=str(path),
                        line=pos,
                        adapter=self.name,
                        snippet=snippet_of(_text(rec)[:800]),
                        reason=f"step record could not be imported: {type(exc).__name__}: {exc}",
                    )
                )
                continue
            steps.append(step)
            repo = _dict(rec.get("repo"))
            cwd = cwd or _str(repo.get("path")) or step.cwd
            remote = remote or _str(repo.get("git_remote"))
            branch = branch or _str(repo.get("git_branch"))
        primary = _dict(meta.get("primary_repo"))
        cwd = _str(primary.get("path")) or cwd or _str(meta.get("cwd"))
        key, repo_path, detected_remote = (repo_of or resolve_repo)(cwd)
        prompts = []
        if has_prompt:
            prompts.append(
                trusted(Prompt, index=0, text=task, timestamp=parse_ts(meta.get("timestamp")), kind="user")
            )
        times = [s.started_at for s in steps if s.started_at is not None]
        extra: dict[str, Any] = {"records": len(records)}
        unusable = sum(
            1
            for r in records
            if isinstance(r, dict) and r.get("timestamp") is not None and parse_ts(r["timestamp"]) is None
        )
        if unusable:
            extra["unusable_timestamps"] = unusable  # unparsable or out of range: those steps have no time
        if repairs:
            extra["repaired"] = repairs
        outcome.sessions.append(
            conform_session(
                trusted(
                    Session,
                    session_id=_id(meta.get("session_id")) or path.stem.removeprefix("session_"),
                    source_format=self.name,
                    source_path=str(path),
                    repo=key,
                    repo_path=repo_path,
                    repo_remote=_str(primary.get("git_remote")) or remote or detected_remote,
                    cwd=cwd,
                    model=_str(meta.get("model")),
                    agent_version=None,
                    git_branch=_str(primary.get("git_branch")) or branch,
                    started_at=min(times) if times else None,
                    ended_at=max(times) if times else None,
                    input_tokens=0,
                    output_tokens=0,
                    cache_read_tokens=0,
                    cache_creation_tokens=0,
                    prompts=prompts,
                    steps=steps,
                    content_hash=hashlib.sha1(data).hexdigest(),
                    extra=extra,
                )
            )
        )
        return outcome
