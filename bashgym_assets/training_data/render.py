"""Render a quality-tiered trace segment as chat ``messages`` in the same shape as a verified trajectory.

A trajectory (``bashgym_assets.rollout.transcript``) is: the system orientation (login banner), the user task,
then alternating assistant command / user observation (output + ``[exit code: N]``), ending with the assistant
typing ``exit``. A trace segment becomes the same: the orientation names the segment's working directory, its
user prompt is the task, each tool call is an assistant turn (the shell command it stands for:
``bashgym_assets.training_data.shell_render``) and its result the next user turn, as that shell would print it (long
outputs are cut in the middle). A gold segment is a finished task, so it ends with ``exit`` too: the model should
learn to stop. A step with no shell form is dropped, or cuts the segment (then it ends at the last command before
the cut, without ``exit``: the task was not finished there); ``RenderedSegment`` says which and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.rollout.transcript import EXIT_COMMAND, HOSTNAME
from bashgym_assets.training_data.shell_render import CUT, ShellTurn, Skipped, is_not_run, render_step

TRACE_USER = "operator"
MAX_OBSERVATION_CHARS = 2000


class Message(BaseModel):
    """One chat turn, as stored in the ``messages`` column (list<struct{role, content}>)."""

    role: str
    content: str


def clip_output(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """Keep the head and tail of a long output: the middle of a 50 kB log teaches nothing."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3) :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def format_observation(output: str, exit_code: int | None) -> str:
    """The user turn after a command: its output (clipped) and ``[exit code: N]``, as a rollout shows it."""
    out = clip_output((output or "").rstrip("\n"))
    if exit_code is not None:
        out = f"{out}\n[exit code: {exit_code}]" if out else f"[exit code: {exit_code}]"
    return out


def step_observation(turn: ShellTurn) -> str:
    return format_observation(turn.output, turn.exit_code)


def trace_orientation(cwd: str | None) -> str:
    """The same login banner a rollout shows, at the segment's working directory."""
    where = cwd or "~"
    return (
        f"You are logged in to {HOSTNAME} as {TRACE_USER}. Working directory: {where}.\n"
        f"{TRACE_USER}@{HOSTNAME}:{where}$"
    )


class RenderedSegment(BaseModel):
    """A segment's messages and what was left out of them."""

    messages: list[dict[str, str]]
    commands: int = 0
    skipped: list[Skipped] = Field(default_factory=list)
    cut: Skipped | None = None
    unfinished: Skipped | None = Field(
        None, description="the last step never ran (refused, rejected, interrupted)"
    )


def render_segment(prompt: str, steps: Sequence[Mapping[str, Any]], add_exit: bool = True) -> RenderedSegment:
    """Chat messages for one trace segment (sidechain/subagent steps are left out: not the operator's turns).

    A cut ends the messages at the last command before it (its observation and ``exit`` left out). So does a last
    step that never ran (the harness refused it, the user rejected or interrupted it): the work it stood for was
    not done, so ``exit`` would teach stopping before the task is finished. A segment with no command at all keeps
    only system + task, for the caller to refuse."""
    ordered = [s for s in sorted(steps, key=lambda s: s.get("index") or 0) if not s.get("sidechain")]
    cwd = next((s.get("cwd") for s in ordered if s.get("cwd")), None)
    messages = [
        {"role": "system", "content": trace_orientation(cwd)},
        {"role": "user", "content": prompt.strip()},
    ]
    skipped: list[Skipped] = []
    cut: Skipped | None = None
    unfinished: Skipped | None = None
    commands = 0
    for step in ordered:
        rendered = render_step(step)
        if isinstance(rendered, Skipped):
            skipped.append(rendered)
            unfinished = rendered if is_not_run(rendered) else None
            if rendered.action == CUT:
                cut = rendered
                break
            continue
        unfinished = None
        messages.append({"role": "assistant", "content": rendered.command})
        messages.append({"role": "user", "content": step_observation(rendered)})
        commands += 1
    if cut is not None or unfinished is not None:
        if commands:
            messages.pop()
    elif add_exit and commands:
        messages.append({"role": "assistant", "content": EXIT_COMMAND})
    return RenderedSegment(
        messages=messages, commands=commands, skipped=skipped, cut=cut, unfinished=unfinished
    )


def segment_messages(
    prompt: str, steps: Sequence[Mapping[str, Any]], add_exit: bool = True
) -> list[dict[str, str]]:
    """``render_segment(...).messages``."""
    return render_segment(prompt, steps, add_exit).messages


_WS = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Lower-case, whitespace-collapsed text: the key for 'same task' and for contamination matching."""
    return _WS.sub(" ", (text or "").strip().lower())
