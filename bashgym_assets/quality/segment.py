"""Cutting a session into task examples: one segment per piece of work a user asked for.

A session often holds several tasks. A new segment starts before a step when (first rule that applies wins):

* ``new_prompt``  the step answers a different real user prompt than the previous step (``Step.prompt_index``
                  points at a ``Prompt`` of kind ``user`` or ``slash_command``, both typed by the user; compaction
                  summaries, meta lines, interrupts, system reminders and subagent tasks do not cut);
* ``gap``         more than ``gap`` (default 5 minutes) passed since the previous step ended (or started);
* ``git_commit``  the previous step was a successful ``git commit`` (a commit closes a piece of work);
* ``cwd_change``  the main agent's working directory moved to another tree (neither folder inside the other:
                  ``cd src`` inside the project is not a new task, switching to another checkout is).

The first segment's boundary is ``start``. Every segment carries its own prompt: the real user prompt in effect at
its first step (so the third task of a session is not labelled with the session's first request).
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from bashgym_assets.sessions import Prompt, Session, Step

DEFAULT_GAP = timedelta(minutes=5)
BOUNDARIES = ("start", "new_prompt", "gap", "git_commit", "cwd_change")
#: Prompt kinds (``bashgym_assets.ingest``) that a person typed to start a piece of work.
TASK_PROMPT_KINDS = frozenset({"user", "slash_command"})
_GIT_COMMIT = re.compile(r"(?:^|[;&|]\s*|\s)git\s+(?:-[cC]\s+\S+\s+)*commit\b")


class Segment(BaseModel):
    """One task example cut from a session."""

    segment_id: str = Field(description="stable: derived from the session id and the first step's position")
    session_id: str
    repo: str
    segment_index: int
    prompt: str
    prompt_index: int | None = None
    steps: list[Step]
    started_at: datetime | None = None
    ended_at: datetime | None = None
    boundary: str
    cwd: str | None = None


def segment_id_for(session_id: str, first_step_index: int) -> str:
    """Same session and same first step -> same id, across re-materializations."""
    digest = hashlib.sha1(f"{session_id}\x00{first_step_index}".encode()).hexdigest()[:16]
    return f"seg-{digest}"


def is_git_commit(step: Step) -> bool:
    cmd = step.command or ""
    return bool(cmd) and _GIT_COMMIT.search(cmd) is not None


def _different_tree(a: str | None, b: str | None) -> bool:
    if not a or not b or a == b:
        return False
    a_, b_ = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return not (a_.startswith(b_) or b_.startswith(a_))


def _user_prompt_index(session: Session, step: Step, current: int | None) -> int | None:
    """The real user prompt a step answers; non-user prompts (summaries, slash commands) keep the current one."""
    idx = step.prompt_index
    if idx is None:
        return current
    prompt = _prompt_by_index(session, idx)
    if prompt is None or prompt.kind not in TASK_PROMPT_KINDS:
        return current
    return idx


def _prompt_by_index(session: Session, idx: int) -> Prompt | None:
    for p in session.prompts:
        if p.index == idx:
            return p
    return None


def segment_session(session: Session, gap: timedelta = DEFAULT_GAP) -> list[Segment]:
    """The session's steps cut into segments (steps in order; segments without steps are not produced)."""
    steps = sorted(session.steps, key=lambda s: s.index)
    if not steps:
        return []
    groups: list[tuple[str, int | None, list[Step]]] = []
    current_prompt: int | None = None
    prev: Step | None = None
    main_cwd: str | None = session.cwd
    for step in steps:
        prompt_idx = _user_prompt_index(session, step, current_prompt)
        boundary: str | None = None
        if prev is None:
            boundary = "start"
        elif prompt_idx != current_prompt and prompt_idx is not None:
            boundary = "new_prompt"
        else:
            prev_t = prev.finished_at or prev.started_at
            if prev_t and step.started_at and step.started_at - prev_t > gap:
                boundary = "gap"
            elif is_git_commit(prev) and prev.success is not False:
                boundary = "git_commit"
            elif not step.sidechain and _different_tree(main_cwd, step.cwd):
                boundary = "cwd_change"
        if boundary is not None:
            groups.append((boundary, prompt_idx, [step]))
        else:
            groups[-1][2].append(step)
        if not step.sidechain and step.cwd:
            main_cwd = step.cwd
        current_prompt = prompt_idx
        prev = step

    out: list[Segment] = []
    for i, (boundary, prompt_idx, seg_steps) in enumerate(groups):
        prompt = _prompt_by_index(session, prompt_idx) if prompt_idx is not None else None
        if prompt is None:  # steps before any real prompt: fall back to the first user prompt of the session
            prompt = next((p for p in session.prompts if p.kind in TASK_PROMPT_KINDS), None)
        times = [t for s in seg_steps for t in (s.started_at, s.finished_at) if t is not None]
        out.append(
            Segment(
                segment_id=segment_id_for(session.session_id, seg_steps[0].index),
                session_id=session.session_id,
                repo=session.repo,
                segment_index=i,
                prompt=prompt.text if prompt else "",
                prompt_index=prompt.index if prompt else None,
                steps=seg_steps,
                started_at=min(times) if times else None,
                ended_at=max(times) if times else None,
                boundary=boundary,
                cwd=next((s.cwd for s in seg_steps if s.cwd), session.cwd),
            )
        )
    return out
