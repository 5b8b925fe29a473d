"""The canonical session schema every agent-log adapter produces and every later stage reads.

A ``Session`` is one agent session (one Claude Code ``<sessionId>.jsonl`` with its subagent files, one Bash Gym
trace JSON, ...) as an ordered list of ``Step`` records (one tool call with its result) plus the user's prompts.
It is stored one row per session in parquet (``SESSION_ARROW_SCHEMA``), steps and prompts as nested lists, so
DuckDB can ``UNNEST`` them and ``Session.from_row`` gets the model back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, Field


class Step(BaseModel):
    """One tool call and its result, in the order the agent made it."""

    index: int = Field(description="position in the session, 0-based")
    tool_name: str = Field(description="e.g. Bash, Read, Edit, Write, Grep, Task")
    tool_use_id: str | None = None
    input: str = Field(default="", description="the tool input as JSON text (for Bash: {'command': ...})")
    command: str | None = Field(default=None, description="the shell command for Bash-like tools")
    output: str = Field(
        default="", description="the tool result's text (images replaced by a [image ...] note)"
    )
    exit_code: int | None = Field(
        default=None, description="from 'Exit code N', exitCode, or 0/1 from is_error"
    )
    success: bool | None = Field(
        default=None, description="False on is_error or a non-zero exit code; None if no result"
    )
    is_error: bool = False
    cwd: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    sidechain: bool = Field(default=False, description="made by a subagent (Task) rather than the main agent")
    agent_id: str | None = Field(default=None, description="subagent id for sidechain steps")
    prompt_index: int | None = Field(
        default=None, description="index into Session.prompts of the prompt it answers"
    )
    parent_tool_use_id: str | None = Field(
        default=None, description="for sidechain steps: the Task call that ran them, where the log says"
    )


class Prompt(BaseModel):
    """A real user prompt: the task the user typed (not a tool result, slash-command echo or summary)."""

    index: int
    text: str
    timestamp: datetime | None = None
    kind: str = Field(default="user", description="user | slash_command | compaction_summary | ...")


class Session(BaseModel):
    """One agent session normalised to the canonical schema."""

    session_id: str
    source_format: str = Field(description="adapter that produced it: claude_code, bashgym_trace, ...")
    source_path: str
    repo: str = Field(description="sanitised partition key of the repository the session worked in")
    repo_path: str | None = Field(
        default=None, description="git toplevel or cwd the repo key was derived from"
    )
    repo_remote: str | None = None
    cwd: str | None = None
    model: str | None = None
    agent_version: str | None = None
    git_branch: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    #: token totals; None when a count in the log was not a number in 0..int64 (the total would be wrong)
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_read_tokens: int | None = 0
    cache_creation_tokens: int | None = 0
    prompts: list[Prompt] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    content_hash: str = Field(
        default="", description="hash of the bytes the session was parsed from (dedupe, cursor)"
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="adapter-specific counters (skipped types...)"
    )

    def to_row(self) -> dict[str, Any]:
        row = self.model_dump(mode="python")
        row["extra"] = _json_dumps(row["extra"])
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Session:
        row = dict(row)
        row.pop("_partition", None)
        if isinstance(row.get("extra"), str):
            row["extra"] = _json_loads(row["extra"])
        return cls.model_validate(row)


def _json_dumps(value: Any) -> str:
    import orjson

    return orjson.dumps(value, default=str).decode()


def _json_loads(text: str) -> Any:
    import orjson

    return orjson.loads(text) if text else {}


_TS = pa.timestamp("us", tz="UTC")

STEP_ARROW_TYPE = pa.struct(
    [
        ("index", pa.int32()),
        ("tool_name", pa.string()),
        ("tool_use_id", pa.string()),
        ("input", pa.large_string()),
        ("command", pa.large_string()),
        ("output", pa.large_string()),
        ("exit_code", pa.int32()),
        ("success", pa.bool_()),
        ("is_error", pa.bool_()),
        ("cwd", pa.string()),
        ("started_at", _TS),
        ("finished_at", _TS),
        ("sidechain", pa.bool_()),
        ("agent_id", pa.string()),
        ("prompt_index", pa.int32()),
        ("parent_tool_use_id", pa.string()),
    ]
)

PROMPT_ARROW_TYPE = pa.struct(
    [
        ("index", pa.int32()),
        ("text", pa.large_string()),
        ("timestamp", _TS),
        ("kind", pa.string()),
    ]
)

SESSION_ARROW_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("source_format", pa.string()),
        ("source_path", pa.string()),
        ("repo", pa.string()),
        ("repo_path", pa.string()),
        ("repo_remote", pa.string()),
        ("cwd", pa.string()),
        ("model", pa.string()),
        ("agent_version", pa.string()),
        ("git_branch", pa.string()),
        ("started_at", _TS),
        ("ended_at", _TS),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cache_read_tokens", pa.int64()),
        ("cache_creation_tokens", pa.int64()),
        ("prompts", pa.list_(PROMPT_ARROW_TYPE)),
        ("steps", pa.list_(STEP_ARROW_TYPE)),
        ("content_hash", pa.string()),
        ("extra", pa.large_string()),
    ]
)


def sessions_to_table(sessions: list[Session]) -> pa.Table:
    return pa.Table.from_pylist([s.to_row() for s in sessions], schema=SESSION_ARROW_SCHEMA)


def sessions_from_table(table: pa.Table) -> list[Session]:
    return [Session.from_row(r) for r in table.to_pylist()]
