"""Guardrail flags over recorded work: trace steps (commands and tool outputs) and trajectory turns.

One :class:`SafetySummary` per segment or trajectory: how many steps ran a blocked command, how many a command with
only warnings, how many tool outputs carried injection markers, and the flags themselves (capped, so one noisy
segment cannot bloat the lake). ``quality.safety`` turns it into a penalty and the tier rule; the SFT/DPO builders
re-check assistant turns with :func:`unsafe_turn` so nothing blocked reaches a training row, old data included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, Field

from bashgym_assets.guardrails.commands import classify_command
from bashgym_assets.guardrails.injection import scan_injection
from bashgym_assets.guardrails.models import BLOCK, REFUSAL_PREFIX, Verdict
from bashgym_assets.shell import is_exit_command

MAX_FLAGS = 50


class SafetyFlag(BaseModel):
    """One finding on one step (traces) or message (trajectories)."""

    index: int = Field(description="Step.index for a trace, message position for a trajectory")
    source: Literal["command", "output"]
    rule: str
    severity: str
    match: str
    explanation: str


SAFETY_FLAG_ARROW_TYPE = pa.struct(
    [
        ("index", pa.int32()),
        ("source", pa.string()),
        ("rule", pa.string()),
        ("severity", pa.string()),
        ("match", pa.string()),
        ("explanation", pa.string()),
    ]
)


class SafetySummary(BaseModel):
    blocked: int = 0  # steps/turns whose command a block rule fired on
    warned: int = 0  # steps/turns whose command only warn rules fired on
    injections: int = 0  # tool outputs / observations with injection markers
    flags: list[SafetyFlag] = Field(default_factory=list)
    truncated: bool = False

    @property
    def blocked_rules(self) -> list[str]:
        return sorted({f.rule for f in self.flags if f.severity == BLOCK})

    def rule_counts(self) -> dict[str, int]:
        return dict(Counter(f.rule for f in self.flags))


def _add(summary: SafetySummary, index: int, source: str, verdict: Verdict) -> None:
    for f in verdict.findings:
        if len(summary.flags) >= MAX_FLAGS:
            summary.truncated = True
            return
        summary.flags.append(
            SafetyFlag(
                index=index,
                source=source,  # type: ignore[arg-type]
                rule=f.rule,
                severity=f.severity,
                match=f.match,
                explanation=f.explanation,
            )
        )


def _count_command(summary: SafetySummary, index: int, verdict: Verdict) -> None:
    if verdict.blocked:
        summary.blocked += 1
    elif verdict.warned:
        summary.warned += 1
    _add(summary, index, "command", verdict)


def flag_steps(steps: Iterable[Any]) -> SafetySummary:
    """Flags for trace steps (``sessions.Step`` or their dicts): each command, each tool output."""
    summary = SafetySummary()
    for s in steps:
        get = s.get if isinstance(s, Mapping) else lambda k, _s=s: getattr(_s, k, None)
        index = int(get("index") or 0)
        command = get("command")
        if command:
            _count_command(summary, index, classify_command(command, cwd=get("cwd")))
        output = get("output")
        if output:
            v = scan_injection(output)
            if v.findings:
                summary.injections += 1
                _add(summary, index, "output", v)
    return summary


def flag_messages(messages: Sequence[Any], home: str | None = None, cwd: str | None = None) -> SafetySummary:
    """Flags for a trajectory: assistant turns are commands, user turns after the task are observations."""
    summary = SafetySummary()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, Mapping) else getattr(m, "role", "")
        content = (m.get("content") if isinstance(m, Mapping) else getattr(m, "content", "")) or ""
        if role == "assistant":
            if is_exit_command(content):  # ends the session, runs nothing
                continue
            if content.startswith(REFUSAL_PREFIX):  # the guard stopped a blocked command here
                summary.blocked += 1
                if len(summary.flags) < MAX_FLAGS:
                    summary.flags.append(
                        SafetyFlag(
                            index=i,
                            source="command",
                            rule="guard_refused",
                            severity=BLOCK,
                            match=content[:200],
                            explanation="the guarded operator refused a blocked command in this turn",
                        )
                    )
                continue
            _count_command(summary, i, classify_command(content, cwd=cwd, home=home))
        elif role == "user" and i >= 2:
            v = scan_injection(content)
            if v.findings:
                summary.injections += 1
                _add(summary, i, "output", v)
    return summary


def unsafe_turn(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The first assistant turn that runs a blocked command (or where the guard refused one), as a quarantine
    reason; None when there is none."""
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        content = str(m.get("content") or "")
        if is_exit_command(content):
            continue
        if content.startswith(REFUSAL_PREFIX):
            return f"assistant turn {i} is a guard refusal of a blocked command"
        v = classify_command(content)
        if v.blocked:
            f = next(f for f in v.findings if f.severity == BLOCK)
            return f"assistant turn {i} runs a blocked command ({f.rule}: {f.match[:120]})"
    return None
