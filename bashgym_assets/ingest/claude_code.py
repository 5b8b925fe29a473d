"""Claude Code session logs (``~/.claude/projects/<encoded-cwd>/<sessionId>.jsonl``) -> canonical sessions.

Written to the documented format of Claude Code 1.0.x and 2.x rather than to particular files:

- every line is one JSON object with a ``type``; ``user`` and ``assistant`` lines carry the conversation,
  everything else (``summary``, ``system``, ``file-history-snapshot``, ``progress``, ``queue-operation``, and
  types that do not exist yet) is counted in ``extra["skipped_types"]`` and otherwise ignored;
- one API message is split over several ``assistant`` lines sharing ``message.id``: token usage is counted
  once per id (the largest value seen, since streaming lines may carry partial counts);
- ``tool_use`` blocks are paired with the ``tool_result`` of the same id; exit codes come from ``Exit code N``
  at the start of a failed result (2.x), from ``toolUseResult.exitCode`` where present, else 1 for
  ``is_error`` and 0 for a result without an error;
- subagent (``Task``) work appears inline as ``isSidechain`` lines (1.0.x), in ``agent-*.jsonl`` files beside
  the session (1.0.x) or in ``<sessionId>/subagents/agent-*.jsonl`` (2.x): all of it becomes sidechain steps;
- newer 2.x logs also stream subagent work into the main file as ``progress`` lines with
  ``data.type == "agent_progress"`` (``data.agentId``, ``data.message`` = one subagent user/assistant message,
  ``parentToolUseID`` = the Task call). When the subagent file is gone (or was never written) these are the
  only record of its tool calls, so their ``tool_use``/``tool_result`` blocks become sidechain steps with
  ``agent_id`` and ``parent_tool_use_id`` set and their usage is counted (once per message id). They are merged
  after every file of the session was read and only for tool-use ids seen nowhere else: the subagent file's
  own copy of a call always wins, so nothing is counted twice. Other progress ticks (``bash_progress``,
  ``hook_progress``, ``mcp_progress`` ..., and agent_progress text) carry no tool call and are only counted;
- lines orjson rejects are repaired where that loses nothing else (UTF-8/16 BOM, invalid UTF-8 bytes and lone
  surrogate escapes become U+FFFD, see ``jsonsafe``) and counted in ``extra["repaired_lines"]``; values that do
  not fit the lake (exit codes beyond int32, token counts beyond int64, out-of-range timestamps, wrong types)
  are coerced by ``conform_session`` and counted in ``extra["coerced"]``; a line that still makes the importer
  fail is quarantined on its own, never costing the rest of the file;
- slash-command echoes, expanded command bodies (``isMeta``), compaction summaries, interrupts and local
  command output are recorded as prompts of their own ``kind``, never as the user's task (``kind="user"``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import orjson

from bashgym_assets.ingest.base import (
    INT64_MAX,
    LineReader,
    ParseOutcome,
    QuarantineRecord,
    RepoResolver,
    conform_session,
    parse_ts,
    snippet_of,
    trusted,
)
from bashgym_assets.ingest.jsonsafe import bom_encoding, json_text, lenient_loads
from bashgym_assets.ingest.repos import resolve_repo
from bashgym_assets.sessions import Prompt, Session, Step

_EXIT_RE = re.compile(r"^\s*(?:Error: )?Exit code (-?\d+)")
CWD_RE = re.compile(rb'"cwd"\s*:\s*"((?:[^"\\]|\\.)*)"')
_SID_RE = re.compile(rb'"sessionId"\s*:\s*"([^"]+)"')
_AGENT_FILE = re.compile(r"^agent-.+\.jsonl$")
_PEEK_BYTES = 256 * 1024
#: Prompt kinds that are things the user typed: steps answer the latest of these.
TASK_KINDS = frozenset({"user", "slash_command"})
MAX_BAD_LINES_LISTED = 200
#: usage field in the log -> Session column
TOKEN_COLUMNS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_creation_tokens",
}
TOKEN_FIELDS = tuple(TOKEN_COLUMNS)


def classify_user_text(text: str, line: dict[str, Any]) -> str:
    """Prompt kind of a user message's text, so only real tasks count as ``user``."""
    stripped = text.lstrip()
    if line.get("isCompactSummary") or stripped.startswith("This session is being continued from a previous"):
        return "compaction_summary"
    if line.get("isMeta"):
        return "meta"
    if "<command-name>" in stripped[:2000] or stripped.startswith("<command-message>"):
        return "slash_command"
    if stripped.startswith(
        (
            "<local-command-stdout>",
            "<local-command-stderr>",
            "<bash-input>",
            "<bash-stdout>",
            "<bash-stderr>",
            "Caveat: The messages below were generated",
        )
    ):
        return "local_command"
    if stripped.startswith("[Request interrupted by user"):
        return "interrupt"
    if stripped.startswith("<system-reminder>") and stripped.rstrip().endswith("</system-reminder>"):
        return "system_reminder"
    if line.get("isSidechain"):
        return "subagent_task"
    return "user"


def as_text(value: Any, notes: Counter | None = None) -> str:
    """A string as it is, anything else as JSON text (never ``str()``: that recurses on deep nesting)."""
    if isinstance(value, str):
        return value
    return "" if value is None else json_text(value, notes)


def label(value: Any) -> str:
    """A counter key for a ``type``-like field: the string, or ``<list>`` etc. for a value of the wrong type."""
    return value if isinstance(value, str) else f"<{type(value).__name__}>"


def _result_text(content: Any, counters: Counter) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if not isinstance(block, dict):
                parts.append(as_text(block, counters))
            elif block.get("type") == "text":
                parts.append(as_text(block.get("text", ""), counters))
            elif block.get("type") == "image":
                counters["images"] += 1
                parts.append(_image_note(block))
            else:
                parts.append(json_text(block, counters))
        return "\n".join(parts)
    return as_text(content, counters)


def _image_note(block: dict[str, Any]) -> str:
    source = block.get("source") or {}
    data = source.get("data") if isinstance(source, dict) else None
    media = source.get("media_type") if isinstance(source, dict) else None
    return f"[image {label(media) if media else 'image'}, {len(data) if isinstance(data, str) else 0} bytes base64]"


def exit_code_of(text: str, is_error: bool, tool_use_result: Any) -> int:
    """Exit code of a tool result: ``Exit code N`` text (of a failed call: a file that starts with those words is
    content), then ``exitCode``, then ``is_error`` -> 1, else 0."""
    match = _EXIT_RE.match(text[:200]) if text and is_error else None
    if match:
        return int(match.group(1))
    if isinstance(tool_use_result, dict):
        for key in ("exitCode", "exit_code", "returnCode"):
            value = tool_use_result.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:  # 2.0; not a huge int
                return int(value)  # that was read back as an inexact float
            if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,20}\s*", value):
                return int(value)
    return 1 if is_error else 0


class _SessionBuilder:
    """Accumulates the lines of one session (main file and its subagent files)."""

    def __init__(self, session_id: str, source: Path):
        self.session_id = session_id
        self.source = source
        self.steps: list[Step] = []
        self.by_tool_id: dict[str, Step] = {}
        self.prompts: list[Prompt] = []
        self.task_prompt: int | None = None
        self.usage: dict[str, dict[str, int]] = {}
        self.models: Counter = Counter()
        self.counters: Counter = Counter()
        self.line_types: Counter = Counter()
        self.skipped: Counter = Counter()
        self.seen_uuids: set[str] = set()
        self.first_ts: datetime | None = None
        self.last_ts: datetime | None = None
        self.cwd: str | None = None
        self.side_cwd: str | None = None
        self.meta_cwd: str | None = None  # from a bookkeeping line (``claude -p`` stream-json's system/init)
        self.version: str | None = None
        self.branch: str | None = None
        # a session made only of subagent lines (an orphan ``agent-*.jsonl``) still has a version and a branch
        self.side_version: str | None = None
        self.side_branch: str | None = None
        self.request_of: dict[str, str] = {}  # message id -> the first request id seen with it
        self.reused_ids: dict[str, list[Step]] = {}  # a tool-use id repeated with another input: later calls
        self.summaries: list[str] = []
        self.first_keys = ""
        self.bad_tokens: Counter = (
            Counter()
        )  # usage fields with a value that is no count: their total is None
        # (role, message, time, agent id, parent tool-use id, cwd, toolUseResult) of agent_progress lines
        self.progress: list[tuple[str, dict, datetime | None, str | None, str | None, str | None, Any]] = []
        self.agent_parents: dict[str, str] = {}  # subagent id -> the Task tool-use id that started it

    # ---- one line ---------------------------------------------------------------------------------------
    def add(self, line: dict[str, Any], sidechain: bool = False, agent_id: str | None = None) -> None:
        kind = line.get("type")
        if not self.line_types:
            self.first_keys = "keys of the first line: " + ", ".join(map(str, list(line)[:12]))
        self.line_types[label(kind)] += 1
        uuid = line.get("uuid")
        if isinstance(uuid, str):
            if uuid in self.seen_uuids:
                self.counters["duplicate_lines"] += 1
                return
            self.seen_uuids.add(uuid)
        ts = parse_ts(line.get("timestamp"))
        if ts is None and line.get("timestamp") is not None:
            self.counters["unusable_timestamps"] += (
                1  # unparsable or out of range (see MIN_TS): the line stays
            )
        if ts is not None:
            if self.first_ts is None or ts < self.first_ts:
                self.first_ts = ts
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
        if kind == "summary":
            if isinstance(line.get("summary"), str):
                self.summaries.append(line["summary"])
            self.skipped["summary"] += 1
            return
        if kind == "progress":
            data = line.get("data")
            if (
                isinstance(data, dict)
                and data.get("type") == "agent_progress"
                and self._agent_progress(line, data, ts)
            ):
                return
            self.skipped["progress"] += 1  # a tick (bash/hook/mcp progress, subagent text): nothing to import
            return
        if kind not in ("user", "assistant"):
            if self.meta_cwd is None and isinstance(line.get("cwd"), str):
                self.meta_cwd = line["cwd"]
            self.skipped[label(kind)] += 1
            return
        side = sidechain or bool(line.get("isSidechain"))
        agent = line.get("agentId") if isinstance(line.get("agentId"), str) else agent_id
        if self.side_cwd is None and isinstance(line.get("cwd"), str):
            self.side_cwd = line["cwd"]
        if self.side_version is None and isinstance(line.get("version"), str):
            self.side_version = line["version"]
        if not self.side_branch and isinstance(line.get("gitBranch"), str) and line["gitBranch"]:
            self.side_branch = line["gitBranch"]
        if not side:
            if self.cwd is None and isinstance(line.get("cwd"), str):
                self.cwd = line["cwd"]
            if self.version is None and isinstance(line.get("version"), str):
                self.version = line["version"]
            if not self.branch and isinstance(line.get("gitBranch"), str) and line["gitBranch"]:
                self.branch = line["gitBranch"]
        message = line.get("message")
        if not isinstance(message, dict):
            self.counters["lines_without_message"] += 1
            return
        if kind == "assistant":
            self._assistant(line, message, ts, side, agent)
        else:
            self._user(line, message, ts, side)

    def _assistant(
        self, line: dict, message: dict, ts: datetime | None, side: bool, agent: str | None
    ) -> None:
        model = message.get("model")
        if isinstance(model, str) and model and model != "<synthetic>":
            self.models[model] += 1
        self._usage(message, line)
        content = message.get("content")
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "tool_use":
                self._tool_use(block, line, ts, side, agent)
            elif btype in ("thinking", "redacted_thinking"):
                self.counters["thinking_blocks"] += 1
            elif btype == "text":
                self.counters["assistant_texts"] += 1

    def _usage(self, message: dict, line: dict) -> None:
        """Token usage, once per API message (the largest value: streaming lines carry partial counts).

        A message is its id; the lines of one streamed message share it (and their request id). The same message
        id under a second, different request id (logs whose ids were scrubbed) is a second cost, not a repeat.
        A line without a request id (a subagent message copied into a progress line) is the message it names.

        A count that is not an integer in 0..int64 (a float, a string, 2**64 ...) makes that field's session
        total None rather than a silently wrong number; it is counted in ``extra["coerced"]``.
        """
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        mid, rid = message.get("id"), line.get("requestId")
        key = (
            next((k for k in (mid, rid, line.get("uuid")) if isinstance(k, str) and k), None)
            or f"line-{len(self.usage)}"
        )
        if key == mid and isinstance(rid, str) and rid and self.request_of.setdefault(mid, rid) != rid:
            key = f"{mid}|{rid}"
        slot = self.usage.setdefault(key, {})
        for field in TOKEN_FIELDS:
            value = usage.get(field)
            if value is None:
                continue
            if type(value) is not int or not 0 <= value <= INT64_MAX:
                self.bad_tokens[field] += 1
            elif value > slot.get(field, 0):
                slot[field] = value

    def _tool_use(self, block: dict, line: dict, ts: datetime | None, side: bool, agent: str | None) -> None:
        tool_id = block.get("id") if isinstance(block.get("id"), str) else None
        cwd = line.get("cwd") if isinstance(line.get("cwd"), str) else None
        if tool_id and tool_id in self.by_tool_id:
            tool_input = block.get("input")
            text = json_text(tool_input, Counter()) if tool_input is not None else ""
            if any(s.input == text for s in (self.by_tool_id[tool_id], *self.reused_ids.get(tool_id, ()))):
                self.counters["duplicate_tool_uses"] += 1  # the same call logged twice (a copied line)
                return
            # The same id for another call (ids scrubbed by whoever shared the log): a call of its own, whose
            # result is the next one with that id (``_tool_result``), not a duplicate to drop.
            self.counters["reused_tool_use_ids"] += 1
            step = self._new_step(block, None, ts, side, agent if side else None, cwd, None)
            step.__dict__["tool_use_id"] = tool_id
            self.reused_ids.setdefault(tool_id, []).append(step)
            return
        self._new_step(block, tool_id, ts, side, agent if side else None, cwd, None)

    def _new_step(
        self,
        block: dict,
        tool_id: str | None,
        ts: datetime | None,
        side: bool,
        agent: str | None,
        cwd: str | None,
        parent: str | None,
    ) -> Step:
        tool_input = block.get("input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        name = block.get("name")
        step = trusted(
            Step,
            index=len(self.steps),
            tool_name=as_text(name, self.counters) if name else "unknown",
            tool_use_id=tool_id,
            input=json_text(tool_input, self.counters) if tool_input is not None else "",
            command=command if isinstance(command, str) else None,
            output="",
            exit_code=None,
            success=None,
            is_error=False,
            cwd=cwd,
            started_at=ts,
            finished_at=None,
            sidechain=side,
            agent_id=agent,
            prompt_index=self.task_prompt,
            parent_tool_use_id=parent,
        )
        self.steps.append(step)
        if tool_id:
            self.by_tool_id[tool_id] = step
        return step

    # ---- subagent work streamed as progress lines -----------------------------------------------------
    def _agent_progress(self, line: dict, data: dict, ts: datetime | None) -> bool:
        """Keep the subagent tool calls/results of an ``agent_progress`` line for ``_merge_progress``.

        Returns False when the line carries none (the caller counts it as a skipped tick); usage is counted
        either way.
        """
        parent = line.get("parentToolUseID") if isinstance(line.get("parentToolUseID"), str) else None
        agent = data.get("agentId") if isinstance(data.get("agentId"), str) else None
        if agent and parent:
            self.agent_parents.setdefault(agent, parent)
        found = False
        extra = data.get("normalizedMessages")  # some 2.0.x builds: the messages so far, as a list
        for wrapped in [data.get("message"), *(extra if isinstance(extra, list) else [])]:
            inner = wrapped.get("message") if isinstance(wrapped, dict) else None
            if not isinstance(inner, dict) or not isinstance(inner.get("content"), list):
                continue
            role = wrapped.get("type") if wrapped.get("type") in ("user", "assistant") else inner.get("role")
            if role not in ("user", "assistant"):
                continue
            if role == "assistant":
                self._usage(inner, wrapped)  # text-only messages cost tokens too
            if not any(
                isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in inner["content"]
            ):
                continue
            cwd = wrapped.get("cwd") if isinstance(wrapped.get("cwd"), str) else line.get("cwd")
            self.progress.append(
                (
                    role,
                    inner,
                    parse_ts(wrapped.get("timestamp")) or ts,
                    agent,
                    parent,
                    cwd if isinstance(cwd, str) else None,
                    wrapped.get("toolUseResult"),
                )
            )
            found = True
        if found:
            self.counters["agent_progress_lines"] += 1
        return found

    def _merge_progress(self) -> None:
        """Subagent calls from progress lines whose tool-use id no file of the session had, with their results."""
        imported: set[str] = set()
        for role, inner, ts, agent, parent, cwd, _result in self.progress:
            if role != "assistant":
                continue
            for block in inner["content"]:
                if not isinstance(block, dict) or block.get("type") != "tool_use":
                    continue
                tool_id = block.get("id") if isinstance(block.get("id"), str) else None
                if not tool_id:  # cannot be matched against the subagent file: importing could count it twice
                    self.counters["progress_tool_uses_without_id"] += 1
                elif tool_id in self.by_tool_id:
                    if tool_id not in imported:
                        self.counters["progress_tool_uses_known"] += 1
                else:
                    self._new_step(block, tool_id, ts, True, agent, cwd, parent)
                    imported.add(tool_id)
                    self.counters["progress_tool_uses_imported"] += 1
        for role, inner, ts, _agent, _parent, _cwd, tool_use_result in self.progress:
            if role != "user":
                continue
            for block in inner["content"]:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                tool_id = block.get("tool_use_id")
                if (
                    isinstance(tool_id, str) and tool_id in imported
                ):  # results of calls known elsewhere come from there
                    step = self.by_tool_id[tool_id]
                    if step.success is None and step.finished_at is None:
                        self._fill_result(step, block, tool_use_result, ts)

    def _user(self, line: dict, message: dict, ts: datetime | None, side: bool) -> None:
        content = message.get("content")
        if isinstance(content, str):
            self._prompt(content, line, ts)
            return
        if not isinstance(content, list):
            return
        texts: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "tool_result":
                self._tool_result(block, line, ts)
            elif btype == "text":
                texts.append(as_text(block.get("text", ""), self.counters))
            elif btype == "image":
                self.counters["images"] += 1
                texts.append(_image_note(block))
        if texts:
            self._prompt("\n".join(texts), line, ts)

    def _prompt(self, text: str, line: dict, ts: datetime | None) -> None:
        kind = classify_user_text(text, line)
        self.prompts.append(trusted(Prompt, index=len(self.prompts), text=text, timestamp=ts, kind=kind))
        if kind in TASK_KINDS:
            self.task_prompt = len(self.prompts) - 1

    def _tool_result(self, block: dict, line: dict, ts: datetime | None) -> None:
        tool_id = block.get("tool_use_id")
        if not isinstance(tool_id, str) or (step := self.by_tool_id.get(tool_id)) is None:
            self.counters["orphan_results"] += 1
            return
        tool_use_result = line.get("toolUseResult")
        agent = tool_use_result.get("agentId") if isinstance(tool_use_result, dict) else None
        if isinstance(agent, str) and agent:  # a Task/Agent call's result names the subagent it started
            self.agent_parents.setdefault(agent, tool_id)
        open_steps = [
            s
            for s in (step, *self.reused_ids.get(tool_id, ()))
            if s.finished_at is None and s.success is None
        ]
        if not open_steps:
            self.counters["duplicate_results"] += 1
            return
        self._fill_result(open_steps[0], block, tool_use_result, ts)

    def _fill_result(self, step: Step, block: dict, tool_use_result: Any, ts: datetime | None) -> None:
        text = _result_text(block.get("content"), self.counters)
        is_error = bool(block.get("is_error"))
        code = exit_code_of(text, is_error, tool_use_result)
        fields = step.__dict__  # plain assignment: these values are typed already, skip pydantic's setattr
        fields["output"] = text
        fields["is_error"] = is_error
        fields["exit_code"] = code
        fields["success"] = (not is_error) and code == 0
        fields["finished_at"] = ts

    # ---- the session ------------------------------------------------------------------------------------
    def build(
        self, repo_of: RepoResolver, source_format: str, content_hash: str, n_agent_files: int
    ) -> Session:
        self._merge_progress()
        for step in self.steps:  # subagent-file steps learn their Task call from the progress lines
            if step.sidechain and step.parent_tool_use_id is None and step.agent_id in self.agent_parents:
                step.__dict__["parent_tool_use_id"] = self.agent_parents[step.agent_id]
        steps, prompts = self.steps, self.prompts
        if any(s.sidechain for s in steps) and all(s.started_at is not None for s in steps):
            # stable: same-time steps keep file order (cast: every started_at was just checked to be set)
            steps = sorted(steps, key=lambda s: cast(datetime, s.started_at))
        if n_agent_files and all(p.timestamp is not None for p in prompts):
            order = sorted(range(len(prompts)), key=lambda i: cast(datetime, prompts[i].timestamp))  # all set
            remap = {old: new for new, old in enumerate(order)}
            prompts = [prompts[i] for i in order]
            for i, prompt in enumerate(prompts):
                prompt.index = i
            for step in steps:
                step.prompt_index = remap.get(step.prompt_index) if step.prompt_index is not None else None
        answering = None
        for i, step in enumerate(steps):
            step.index = i
            if step.sidechain:  # subagent work answers the prompt its Task call answered
                parent = self.by_tool_id.get(step.parent_tool_use_id) if step.parent_tool_use_id else None
                step.prompt_index = (
                    parent.prompt_index if parent is not None and not parent.sidechain else answering
                )
            else:
                answering = step.prompt_index
        tokens: dict[str, int | None] = dict.fromkeys(TOKEN_FIELDS, 0)
        for slot in self.usage.values():
            for field, value in slot.items():
                tokens[field] += value  # type: ignore[operator]
        coerced: Counter = Counter()
        for field in TOKEN_FIELDS:
            if self.bad_tokens[field] or tokens[field] > INT64_MAX:  # type: ignore[operator]
                coerced[f"{TOKEN_COLUMNS[field]}:out_of_range"] += self.bad_tokens[field] or 1
                tokens[field] = None
        cwd = self.cwd or self.side_cwd or self.meta_cwd
        key, repo_path, remote = repo_of(cwd)
        extra: dict[str, Any] = {k: v for k, v in self.counters.items() if v}
        extra["line_types"] = dict(self.line_types)
        if self.skipped:
            extra["skipped_types"] = dict(self.skipped)
        if self.summaries:
            extra["summaries"] = self.summaries[:5]
        if n_agent_files:
            extra["subagent_files"] = n_agent_files
        if coerced:
            extra["coerced"] = dict(coerced)
        return trusted(
            Session,
            session_id=self.session_id,
            source_format=source_format,
            source_path=str(self.source),
            repo=key,
            repo_path=repo_path,
            repo_remote=remote,
            cwd=cwd,
            model=self.models.most_common(1)[0][0] if self.models else None,
            agent_version=self.version or self.side_version,
            git_branch=self.branch or self.side_branch,
            started_at=self.first_ts,
            ended_at=self.last_ts,
            **{TOKEN_COLUMNS[field]: value for field, value in tokens.items()},
            prompts=prompts,
            steps=steps,
            content_hash=content_hash,
            extra=extra,
        )


def read_json_records(
    reader: LineReader, out: list[QuarantineRecord], repairs: Counter | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each line of ``reader``; bad lines go to ``out`` with their reason.

    Lines orjson rejects get ``lenient_loads``'s lossless repairs (BOM, invalid UTF-8, lone surrogates,
    NaN) before they are given up on; each repair is counted in ``repairs``. At most ``MAX_BAD_LINES_LISTED``
    bad lines of one file are listed one by one (a binary file can have millions of "lines"); the rest are
    counted in one closing record.
    """
    path = str(reader.path)
    bad = 0

    def reject(lineno: int, raw: bytes, reason: str) -> None:
        nonlocal bad
        bad += 1
        if bad <= MAX_BAD_LINES_LISTED:
            out.append(
                QuarantineRecord(
                    file=path, line=lineno, reason=reason, snippet=snippet_of(raw), adapter=reader.adapter
                )
            )

    try:
        for lineno, raw in reader.lines():
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                try:
                    obj, fixed = lenient_loads(raw)
                except orjson.JSONDecodeError as exc:
                    reject(lineno, raw, _bad_line_reason(raw, exc, lineno == reader.unterminated_line))
                    continue
                if repairs is not None:
                    repairs.update(fixed)
            if not isinstance(obj, dict):
                reject(lineno, raw, f"not a JSON object ({type(obj).__name__})")
                continue
            yield lineno, obj
    except FileNotFoundError:
        out.append(
            QuarantineRecord(
                file=path, reason="file vanished before or while it was read", adapter=reader.adapter
            )
        )
    except OSError as exc:
        out.append(
            QuarantineRecord(
                file=path, reason=f"unreadable: {type(exc).__name__}: {exc}", adapter=reader.adapter
            )
        )
    if bad > MAX_BAD_LINES_LISTED:
        out.append(
            QuarantineRecord(
                file=path,
                adapter=reader.adapter,
                reason=f"{bad - MAX_BAD_LINES_LISTED} more bad lines not listed ({bad} in all)",
            )
        )
    out.extend(reader.quarantine)
    reader.quarantine.clear()


def read_json_lines(
    reader: LineReader, out: list[QuarantineRecord], repairs: Counter | None = None
) -> Iterator[dict[str, Any]]:
    """``read_json_records`` without the line numbers."""
    for _lineno, obj in read_json_records(reader, out, repairs):
        yield obj


def line_failed(path: Path, lineno: int, obj: Any, exc: Exception, adapter: str) -> QuarantineRecord:
    """The quarantine record of a parsed line the importer failed on (the rest of the file goes on)."""
    return QuarantineRecord(
        file=str(path),
        line=lineno,
        adapter=adapter,
        snippet=snippet_of(json_text(obj)[:800]),
        reason=f"line could not be imported: {type(exc).__name__}: {exc}",
    )


def _bad_line_reason(raw: bytes, exc: Exception, unterminated: bool) -> str:
    if b"\x00" in raw[:4096]:
        return "binary data (NUL bytes), not JSON"
    if "depth limit" in str(exc) or "recursion" in str(exc).lower():
        return f"JSON nested deeper than the parser allows (1024 levels): {exc}"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        note = f" (and invalid UTF-8 at byte {err.start})"
    else:
        note = ""
    if unterminated:
        return f"truncated last line (no newline at end of file): {exc}{note}"
    return f"invalid JSON: {exc}{note}"


def peek_first(path: Path, pattern: re.Pattern[bytes]) -> str | None:
    """The first match of ``pattern`` in the file's first 256 KB, JSON-unescaped (cheap: no full parse)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_PEEK_BYTES)
    except OSError:
        return None
    match = pattern.search(head)
    if not match:
        return None
    try:
        value = orjson.loads(b'"' + match.group(1) + b'"')
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def peek_cwd_jsonl(path: Path) -> str | None:
    """The top-level ``cwd`` of the first line that has one (nested ``cwd`` keys of other records ignored)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_PEEK_BYTES)
    except OSError:
        return None
    encoding = bom_encoding(head[:4])
    if encoding is not None:  # a UTF-16/32 file, as LineReader reads it
        head = head.decode(encoding, errors="replace").encode("utf-8", errors="replace")
    for raw in head.split(b"\n"):
        if b'"cwd"' not in raw:
            continue
        try:
            obj, _ = lenient_loads(raw)
        except orjson.JSONDecodeError:
            match = CWD_RE.search(raw)  # a line longer than the peek: fall back to the first match
            return peek_first(path, CWD_RE) if match and encoding is None else None
        if isinstance(obj, dict) and isinstance(obj.get("cwd"), str):
            return obj["cwd"]
    return None


@lru_cache(maxsize=1024)
def _beside_agents(folder: str, mtime_ns: int) -> dict[str, tuple[str, ...]]:
    """1.0.x layout: ``agent-*.jsonl`` beside session files, grouped by the ``sessionId`` inside them."""
    groups: dict[str, list[str]] = {}
    try:
        names = [e.name for e in os.scandir(folder) if _AGENT_FILE.match(e.name)]
    except OSError:
        return {}
    for name in sorted(names):
        sid = peek_first(Path(folder) / name, _SID_RE)
        if sid:
            groups.setdefault(sid, []).append(name)
    return {k: tuple(v) for k, v in groups.items()}


def _dir_mtime(folder: Path) -> int:
    try:
        return folder.stat().st_mtime_ns
    except OSError:
        return 0


def _session_of_subagents_tree(path: Path, depth: int = 4) -> Path | None:
    """The session file ``<dir>/<sid>.jsonl`` whose ``<dir>/<sid>/subagents/`` tree holds ``path`` (None when there
    is no such folder within ``depth`` levels, or no such session file)."""
    for folder in list(path.parents)[:depth]:
        if folder.name == "subagents":
            parent = folder.parent.parent / f"{folder.parent.name}.jsonl"
            return parent if parent.exists() else None
    return None


class ClaudeCodeAdapter:
    """Claude Code JSONL transcripts, 1.0.x and 2.x layouts."""

    name = "claude_code"
    priority = 20

    def claims(self, path: Path) -> bool:
        return path.suffix == ".jsonl" and not path.name.endswith(".hook.jsonl")

    def matches(self, path: Path) -> bool:
        if not self.claims(path):
            return False
        if _AGENT_FILE.match(path.name):
            return self._parent_of_agent(path) is None  # orphan subagent logs stand as sessions of their own
        # other files in a session's subagents tree (a workflow's journal.jsonl) are the agents' bookkeeping
        return _session_of_subagents_tree(path) is None

    def _parent_of_agent(self, path: Path) -> Path | None:
        parent = _session_of_subagents_tree(path)  # 2.x: <dir>/<sid>/subagents/[workflows/<wf>/]agent-*.jsonl
        if parent is not None:
            return parent
        sid = peek_first(path, _SID_RE)
        parent = path.parent / f"{sid}.jsonl" if sid else None
        return parent if parent is not None and parent.exists() else None

    def related_files(self, path: Path) -> list[Path]:
        if _AGENT_FILE.match(path.name):
            return []
        folder = path.parent / path.stem / "subagents"
        found = sorted(folder.rglob("agent-*.jsonl")) if folder.is_dir() else []  # workflows/<wf>/ nest them
        beside = _beside_agents(str(path.parent), _dir_mtime(path.parent)).get(path.stem, ())
        return found + [path.parent / name for name in beside]

    def peek_cwd(self, path: Path) -> str | None:
        return peek_cwd_jsonl(path)

    def parse(self, path: Path, repo_of: RepoResolver | None = None) -> ParseOutcome:
        outcome = ParseOutcome()
        builder = _SessionBuilder(path.stem, path)
        repairs: Counter = Counter()
        reader = LineReader(path, adapter=self.name)
        self._feed(builder, reader, outcome, repairs)
        digest = hashlib.sha1(reader.content_hash.encode())
        outcome.bytes_read += reader.bytes_read
        outcome.files.append(str(path))
        side_files = self.related_files(path)
        encodings = {reader.encoding}
        for side in side_files:
            side_reader = LineReader(side, adapter=self.name)
            self._feed(builder, side_reader, outcome, repairs, agent_id=side.stem.removeprefix("agent-"))
            digest.update(side_reader.content_hash.encode())
            outcome.bytes_read += side_reader.bytes_read
            outcome.files.append(str(side))
            encodings.add(side_reader.encoding)
        if (
            reader.bytes_read == 0
            and not any(q.line is None for q in outcome.quarantine)
            and not reader.pending_tail
        ):
            outcome.quarantine.append(
                QuarantineRecord(file=str(path), reason="empty file", adapter=self.name)
            )
            return outcome
        if not builder.line_types:
            if reader.bytes_read and not any(q.line is None for q in outcome.quarantine):
                outcome.quarantine.append(
                    QuarantineRecord(
                        file=str(path), reason="no valid session lines in file", adapter=self.name
                    )
                )
            return outcome
        if set(builder.line_types) == {"<NoneType>"}:  # JSON lines, none with a ``type``: another tool's log
            outcome.quarantine.append(
                QuarantineRecord(
                    file=str(path),
                    adapter=self.name,
                    snippet=builder.first_keys,
                    reason=f"not a Claude Code log: {builder.line_types['<NoneType>']} JSON lines, none with a "
                    "'type' field (another agent's format?)",
                )
            )
            return outcome
        if (
            builder.line_types.get("user", 0) + builder.line_types.get("assistant", 0) == 0
            and not builder.progress
        ):
            return (
                outcome  # only bookkeeping lines so far (a session that has not started): nothing to import
            )
        session = builder.build(repo_of or resolve_repo, self.name, digest.hexdigest(), len(side_files))
        if repairs:
            session.extra["repaired_lines"] = dict(repairs)
        if encodings != {"utf-8"}:
            session.extra["encodings"] = sorted(encodings)
        outcome.sessions.append(conform_session(session))
        return outcome

    def _feed(
        self,
        builder: _SessionBuilder,
        reader: LineReader,
        outcome: ParseOutcome,
        repairs: Counter,
        agent_id: str | None = None,
    ) -> None:
        """Every line of one file into ``builder``; a line the builder fails on is quarantined on its own."""
        for lineno, line in read_json_records(reader, outcome.quarantine, repairs):
            try:
                builder.add(line, sidechain=agent_id is not None, agent_id=agent_id)
            except Exception as exc:  # an input shape nobody foresaw: lose that line, not the file
                outcome.quarantine.append(line_failed(reader.path, lineno, line, exc, self.name))
