"""Bash Gym's own trace JSON (``~/.bashgym/traces/session_*.json``, ``data/gold_traces/*.json``).

Its hook (``post_tool_use.py``) keeps one JSON document per session: a list of step records
``{step_id, timestamp, tool_name, command, output, exit_code, cwd, success, repo: {path, name, git_remote,
git_branch, is_git_repo}}``. Finished traces wrap that list as ``{"trace": [...], "metadata": {...},
"primary_repo": {...}}`` (``steps`` is accepted too). Bad step records are quarantined one by one (``line`` is
the step's 1-based position); the rest of the file is still imported.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from bashgym_assets.ingest.base import (
    MAX_LINE_BYTES,
    ParseOutcome,
    QuarantineRecord,
    RepoResolver,
    file_settled,
    parse_ts,
    snippet_of,
    trusted,
)
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
    return value if isinstance(value, str) else orjson.dumps(value, default=str).decode()


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
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

    def _load(self, path: Path) -> tuple[Any, bytes]:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_FILE_BYTES + 1)
        if len(data) > _MAX_FILE_BYTES:
            raise ValueError(f"file larger than {_MAX_FILE_BYTES} bytes")
        return orjson.loads(data), data

    def peek_cwd(self, path: Path) -> str | None:
        try:
            doc, _ = self._load(path)
        except (OSError, ValueError):
            return None
        steps, meta = _steps_and_meta(doc)
        primary = meta.get("primary_repo")
        if isinstance(primary, dict) and isinstance(primary.get("path"), str):
            return primary["path"]
        for step in steps or []:
            if isinstance(step, dict):
                repo = step.get("repo")
                if isinstance(repo, dict) and isinstance(repo.get("path"), str):
                    return repo["path"]
                if isinstance(step.get("cwd"), str):
                    return step["cwd"]
        return meta.get("cwd") if isinstance(meta.get("cwd"), str) else None

    def parse(self, path: Path, repo_of: RepoResolver | None = None) -> ParseOutcome:
        outcome = ParseOutcome(files=[str(path)])
        quarantine = outcome.quarantine
        try:
            if not file_settled(path):
                return outcome  # a document being rewritten: read it once it has settled
            doc, data = self._load(path)
        except FileNotFoundError:
            quarantine.append(QuarantineRecord(file=str(path), reason="file vanished before or while it was read",
                                               adapter=self.name))
            return outcome
        except orjson.JSONDecodeError as exc:
            raw = path.read_bytes()[:400] if path.exists() else b""
            reason = "empty file" if not raw.strip() else f"invalid JSON document: {exc}"
            quarantine.append(QuarantineRecord(file=str(path), reason=reason, snippet=snippet_of(raw),
                                               adapter=self.name))
            return outcome
        except (OSError, ValueError) as exc:
            quarantine.append(QuarantineRecord(file=str(path), reason=f"unreadable: {exc}", adapter=self.name))
            return outcome
        outcome.bytes_read = len(data)
        records, meta = _steps_and_meta(doc)
        if records is None:
            quarantine.append(QuarantineRecord(file=str(path), adapter=self.name, snippet=snippet_of(data),
                                               reason="not a Bash Gym trace (no list of steps)"))
            return outcome
        steps: list[Step] = []
        cwd: str | None = None
        remote: str | None = None
        branch: str | None = None
        for pos, rec in enumerate(records, start=1):
            if not isinstance(rec, dict) or not (rec.get("tool_name") or rec.get("tool")):
                quarantine.append(QuarantineRecord(file=str(path), line=pos, adapter=self.name,
                                                   snippet=snippet_of(_text(rec)),
                                                   reason="step record without tool_name"))
                continue
            repo = rec.get("repo") if isinstance(rec.get("repo"), dict) else {}
            step_cwd = rec.get("cwd") if isinstance(rec.get("cwd"), str) else repo.get("path")
            cwd = cwd or repo.get("path") or step_cwd
            remote = remote or repo.get("git_remote")
            branch = branch or repo.get("git_branch")
            code = _int_or_none(rec.get("exit_code", rec.get("exitCode")))
            success = rec.get("success") if isinstance(rec.get("success"), bool) else None
            if success is None and code is not None:
                success = code == 0
            command = rec.get("command")
            ts = parse_ts(rec.get("timestamp"))
            steps.append(trusted(Step,
                index=len(steps), tool_name=str(rec.get("tool_name") or rec.get("tool")),
                tool_use_id=str(rec["step_id"]) if rec.get("step_id") is not None else None,
                input=_text(rec.get("tool_input", {"command": command} if command is not None else None)),
                command=command if isinstance(command, str) else None, output=_text(rec.get("output")),
                exit_code=code, success=success, is_error=success is False, cwd=step_cwd, started_at=ts,
                finished_at=ts, sidechain=False, agent_id=None, prompt_index=0 if meta.get("user_prompt") else None,
            ))
        primary = meta.get("primary_repo") if isinstance(meta.get("primary_repo"), dict) else {}
        cwd = primary.get("path") or cwd or meta.get("cwd")
        key, repo_path, detected_remote = (repo_of or resolve_repo)(cwd)
        prompts = []
        task = meta.get("user_prompt") or meta.get("task") or meta.get("prompt")
        if isinstance(task, str) and task:
            prompts.append(trusted(Prompt, index=0, text=task, timestamp=parse_ts(meta.get("timestamp")),
                                                  kind="user"))
        times = [s.started_at for s in steps if s.started_at is not None]
        outcome.sessions.append(trusted(Session,
            session_id=str(meta.get("session_id") or path.stem.removeprefix("session_")), source_format=self.name,
            source_path=str(path), repo=key, repo_path=repo_path,
            repo_remote=primary.get("git_remote") or remote or detected_remote, cwd=cwd,
            model=meta.get("model") if isinstance(meta.get("model"), str) else None, agent_version=None,
            git_branch=primary.get("git_branch") or branch, started_at=min(times) if times else None,
            ended_at=max(times) if times else None, input_tokens=0, output_tokens=0, cache_read_tokens=0,
            cache_creation_tokens=0, prompts=prompts, steps=steps,
            content_hash=hashlib.sha1(data).hexdigest(), extra={"records": len(records)},
        ))
        return outcome
