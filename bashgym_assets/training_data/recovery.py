"""Recovery rows (issue 38): the student's own mistake shown as context, then the fix, proven in a sandbox.

A reference row shows only the straight road; a model that took a wrong turn at evaluation has never seen what to
do next, and the transcripts show it then repeats itself or exits. A recovery row starts from a real failed attempt
of the model at a task it trained on, cut where the attempt first left the reference: the reference's commands
before that point, the command the model chose instead (its mistake), then the reference from that step on.

The plan is only a claim until a fresh sandbox plays it (``ReferenceOperator`` with the plan's commands) and the
task's check passes: a mistake that the reference's own steps cannot undo (an archive extracted whole, a file
deleted) teaches nothing true, and its replay is dropped. In a kept row the mistake is marked ``train: False``
(``rollout.transcript.UNTRAINED``): the model sees it and its real output and learns the fix after it, never the mistake.

Plain functions over row and attempt dicts; the study (``evaluation.learning_study.recovery_on_top``) samples the
attempts, replays the plans and trains on the rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.rollout.transcript import EXIT_COMMAND, UNTRAINED


class RecoveryPlan(BaseModel):
    """One mistake of the model at one trained task and the reference's way back from it."""

    scenario_id: str
    prefix: list[str] = Field(
        description="the reference's commands before the mistake (the attempt typed them too)"
    )
    mistake: str = Field(description="the command the attempt typed where the reference goes on differently")
    fix: list[str] = Field(description="the reference from the mistake's step on")
    failure: str = Field(description="why the attempt failed (its reject reason)")

    @property
    def commands(self) -> list[str]:
        """What the replay types, before its ``exit``."""
        return [*self.prefix, self.mistake, *self.fix]

    @property
    def mistake_turn(self) -> int:
        """The mistake's index among the row's assistant turns."""
        return len(self.prefix)


def _field(record: Any, name: str) -> Any:
    return record.get(name) if isinstance(record, Mapping) else getattr(record, name, None)


def commands_of(messages: Iterable[Any]) -> list[str]:
    """The assistant turns' commands, whitespace-trimmed (an attempt's reply may carry a newline the row's lacks)."""
    out = []
    for m in messages:
        if _field(m, "role") == "assistant":
            out.append((_field(m, "content") or "").strip())
    return out


def _without_exit(commands: list[str]) -> list[str]:
    return commands[:-1] if commands and commands[-1] == EXIT_COMMAND else commands


def recovery_plans(
    references: Mapping[str, Sequence[Any]], attempts: Iterable[Any], per_task: int = 1
) -> tuple[list[RecoveryPlan], dict[str, int]]:
    """Plans from failed attempts: each cut at its first command that differs from the reference's (the reference
    row of its task, by scenario id), at most ``per_task`` distinct mistakes a task, in the attempts' order. The
    counts say why each other failed attempt gave no plan."""
    counts: Counter[str] = Counter()
    plans: list[RecoveryPlan] = []
    seen: set[tuple[str, str]] = set()
    per: Counter[str] = Counter()
    for attempt in attempts:
        if _field(attempt, "kept"):
            continue
        counts["attempts_failed"] += 1
        sid = str(_field(attempt, "scenario_id"))
        if sid not in references:
            counts["no_reference_row"] += 1
            continue
        reference = _without_exit(commands_of(references[sid]))
        typed = commands_of(_field(attempt, "messages") or [])
        k = next((i for i, (a, b) in enumerate(zip(reference, typed, strict=False)) if a != b), None)
        if k is None:  # the attempt typed the reference's commands (some or all) and stopped or went on after
            counts["no_wrong_command" if len(typed) <= len(reference) else "wrong_after_the_reference"] += 1
            continue
        mistake = typed[k]
        if not mistake or mistake == EXIT_COMMAND:
            counts["premature_exit"] += 1  # nothing to come back from: the session ended
            continue
        if (sid, mistake) in seen:
            counts["same_mistake_again"] += 1
            continue
        if per[sid] >= per_task:
            counts["over_per_task"] += 1
            continue
        seen.add((sid, mistake))
        per[sid] += 1
        plans.append(
            RecoveryPlan(
                scenario_id=sid,
                prefix=reference[:k],
                mistake=mistake,
                fix=reference[k:],
                failure=str(_field(attempt, "reject_reason") or "failed"),
            )
        )
    counts["planned"] = len(plans)
    return plans, dict(counts)


def mark_mistakes(
    rows: Iterable[Mapping[str, Any]], plans: Sequence[RecoveryPlan]
) -> tuple[list[dict[str, Any]], int]:
    """Each replayed row with its plan's mistake marked untrained, and how many rows matched no plan (a row whose
    commands are not a plan's, followed by ``exit``, is not a recovery row: it is dropped, never trained whole)."""
    by_commands = {(p.scenario_id, tuple(p.commands)): p for p in plans}
    out: list[dict[str, Any]] = []
    unmatched = 0
    for row in rows:
        commands = _without_exit(commands_of(row["messages"]))
        plan = by_commands.get((str(row.get("scenario_id")), tuple(commands)))
        if plan is None:
            unmatched += 1
            continue
        messages, turn = [], 0
        for m in row["messages"]:
            m = dict(m)
            if m.get("role") == "assistant":
                if turn == plan.mistake_turn:
                    m[UNTRAINED] = False
                turn += 1
            messages.append(m)
        out.append({**row, "messages": messages, "recovery_of": plan.failure, "mistake": plan.mistake})
    return out, unmatched
