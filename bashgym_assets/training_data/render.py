"""Render a quality-tiered trace segment as chat ``messages`` in the same shape as a verified trajectory.

A trajectory (``bashgym_assets.rollout.transcript``) is: the system orientation (login banner), the user task,
then alternating assistant command / user observation (output + ``[exit code: N]``), ending with the assistant
typing ``exit``. A trace segment becomes the same: the orientation names the segment's working directory, its
user prompt is the task, each tool call is an assistant turn (the shell command itself for Bash-like tools,
``<Tool> <json input>`` for others) and its result the next user turn (long outputs are cut in the middle). A gold
segment is a finished task, so it ends with ``exit`` too: the model should learn to stop.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from bashgym_assets.rollout.transcript import EXIT_COMMAND, HOSTNAME

TRACE_USER = "operator"
MAX_OBSERVATION_CHARS = 2000
SHELL_TOOLS = {"bash", "shell", "terminal", "run_command", "execute_command"}


class Message(BaseModel):
    """One chat turn, as stored in the ``messages`` column (list<struct{role, content}>)."""

    role: str
    content: str


def clip_output(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """Keep the head and tail of a long output: the middle of a 50 kB log teaches nothing."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3):]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def step_command(step: Mapping[str, Any]) -> str:
    """The assistant turn for one tool call."""
    command = (step.get("command") or "").strip()
    tool = step.get("tool_name") or "tool"
    if command and (tool.lower() in SHELL_TOOLS or not step.get("input")):
        return command
    raw = step.get("input") or ""
    with contextlib.suppress(TypeError, ValueError):  # not JSON: keep the raw input text
        raw = json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return f"{tool} {raw}".strip()


def step_observation(step: Mapping[str, Any]) -> str:
    out = clip_output((step.get("output") or "").rstrip("\n"))
    code = step.get("exit_code")
    if code is None and step.get("success") is not None:
        code = 0 if step.get("success") else 1
    if code is not None:
        out = f"{out}\n[exit code: {code}]" if out else f"[exit code: {code}]"
    return out


def trace_orientation(cwd: str | None) -> str:
    """The same login banner a rollout shows, at the segment's working directory."""
    where = cwd or "~"
    return (f"You are logged in to {HOSTNAME} as {TRACE_USER}. Working directory: {where}.\n"
            f"{TRACE_USER}@{HOSTNAME}:{where}$")


def segment_messages(prompt: str, steps: Sequence[Mapping[str, Any]], add_exit: bool = True) -> list[dict[str, str]]:
    """Chat messages for one trace segment (sidechain/subagent steps are left out: not the operator's turns)."""
    ordered = [s for s in sorted(steps, key=lambda s: s.get("index") or 0) if not s.get("sidechain")]
    cwd = next((s.get("cwd") for s in ordered if s.get("cwd")), None)
    messages = [{"role": "system", "content": trace_orientation(cwd)}, {"role": "user", "content": prompt.strip()}]
    for step in ordered:
        messages.append({"role": "assistant", "content": step_command(step)})
        messages.append({"role": "user", "content": step_observation(step)})
    if add_exit:
        messages.append({"role": "assistant", "content": EXIT_COMMAND})
    return messages


_WS = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Lower-case, whitespace-collapsed text: the key for 'same task' and for contamination matching."""
    return _WS.sub(" ", (text or "").strip().lower())
