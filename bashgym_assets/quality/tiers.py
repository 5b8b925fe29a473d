"""Tiers: gold / silver / bronze / failed from the seed's thresholds, plus manual overrides.

=========  ==================  ================
tier       success rate >=     quality score >=
=========  ==================  ================
gold       0.90                0.75
silver     0.75                0.55
bronze     0.60                0.40
failed     anything else
=========  ==================  ================

A verification that ran and failed at the end forces ``failed`` whatever the scores (the work was left broken).
So does a step that ran a command the guardrails block (``quality.safety``: ``rm -rf /``, ``curl ... | sh``,
credential exfiltration, ...), and every guardrail finding lowers ``quality_score`` by ``safety_penalty`` (the
flags are kept per step in ``safety_findings``). A manual override wins over everything: ``promote`` makes a
trace gold, ``demote`` makes it failed, with the reason recorded beside it (``overrides.py`` stores them so they
survive re-materialization).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel

from bashgym_assets.guardrails.flags import SAFETY_FLAG_ARROW_TYPE, SafetyFlag, flag_steps
from bashgym_assets.quality.metrics import SegmentScores, score_steps
from bashgym_assets.quality.safety import safety_penalty, unsafe_reason
from bashgym_assets.quality.segment import DEFAULT_GAP, segment_session
from bashgym_assets.sessions import STEP_ARROW_TYPE, Session, Step

Tier = Literal["gold", "silver", "bronze", "failed"]
TIERS: tuple[Tier, ...] = ("gold", "silver", "bronze", "failed")
THRESHOLDS: tuple[tuple[Tier, float, float], ...] = (
    ("gold", 0.90, 0.75),
    ("silver", 0.75, 0.55),
    ("bronze", 0.60, 0.40),
)


class TierOverride(BaseModel):
    """A person's decision about one trace, kept in the data folder."""

    segment_id: str
    action: Literal["promote", "demote"]
    reason: str
    created_at: datetime


class TieredTrace(SegmentScores):
    """One row of ``tiered_traces``: a segment, its six scores (inherited), its tier and why."""

    segment_id: str
    session_id: str
    repo: str
    segment_index: int
    prompt: str
    steps: list[Step]
    started_at: datetime | None
    ended_at: datetime | None
    boundary: str
    computed_tier: str
    tier: str
    tier_reason: str
    override: str | None = None
    override_reason: str | None = None
    model: str | None = None
    source_format: str | None = None
    # Guardrails (None in rows written before they existed): steps with a blocked / only-warned command, tool
    # outputs with injection markers, the penalty already subtracted from quality_score, the flags per step.
    unsafe_blocked: int | None = None
    unsafe_warned: int | None = None
    injection_flags: int | None = None
    safety_penalty: float | None = None
    safety_findings: list[SafetyFlag] | None = None

    @property
    def blocked_rules(self) -> list[str]:
        return sorted({f.rule for f in self.safety_findings or [] if f.severity == "block"})


_TS = pa.timestamp("us", tz="UTC")
TIERED_TRACE_ARROW_SCHEMA = pa.schema(
    [
        ("segment_id", pa.string()),
        ("session_id", pa.string()),
        ("repo", pa.string()),
        ("segment_index", pa.int32()),
        ("prompt", pa.large_string()),
        ("steps", pa.list_(STEP_ARROW_TYPE)),
        ("started_at", _TS),
        ("ended_at", _TS),
        ("boundary", pa.string()),
        ("success_score", pa.float64()),
        ("verification_score", pa.float64()),
        ("complexity_score", pa.float64()),
        ("length_score", pa.float64()),
        ("tool_diversity_score", pa.float64()),
        ("efficiency_score", pa.float64()),
        ("quality_score", pa.float64()),
        ("success_rate", pa.float64()),
        ("verification_passed", pa.bool_()),
        ("verification_runs", pa.int32()),
        ("num_steps", pa.int32()),
        ("computed_tier", pa.string()),
        ("tier", pa.string()),
        ("tier_reason", pa.string()),
        ("override", pa.string()),
        ("override_reason", pa.string()),
        ("model", pa.string()),
        ("source_format", pa.string()),
        ("unsafe_blocked", pa.int32()),
        ("unsafe_warned", pa.int32()),
        ("injection_flags", pa.int32()),
        ("safety_penalty", pa.float64()),
        ("safety_findings", pa.list_(SAFETY_FLAG_ARROW_TYPE)),
    ]
)


def classify(
    success_rate: float,
    quality: float,
    verification_passed: bool | None,
    blocked: int = 0,
    blocked_rules: list[str] | None = None,
) -> tuple[Tier, str]:
    """The seed's thresholds; a failed final verification or a blocked command forces ``failed``."""
    if blocked:
        return "failed", unsafe_reason(blocked, blocked_rules or [])
    if verification_passed is False:
        return "failed", "verification failed (the last test/build run did not pass)"
    for tier, min_success, min_quality in THRESHOLDS:
        if success_rate >= min_success and quality >= min_quality:
            return (
                tier,
                f"success {success_rate:.2f} >= {min_success:.2f} and quality {quality:.2f} >= {min_quality:.2f}",
            )
    return "failed", f"success {success_rate:.2f} / quality {quality:.2f} below bronze (0.60 / 0.40)"


def apply_override(trace: TieredTrace, override: TierOverride | None) -> TieredTrace:
    """The tier after a manual decision (or the computed one when the decision was withdrawn)."""
    if override is None:
        if trace.override is None:
            return trace
        tier, reason = classify(
            trace.success_rate,
            trace.quality_score,
            trace.verification_passed,
            trace.unsafe_blocked or 0,
            trace.blocked_rules,
        )
        return trace.model_copy(
            update={"tier": tier, "tier_reason": reason, "override": None, "override_reason": None}
        )
    tier = "gold" if override.action == "promote" else "failed"
    return trace.model_copy(
        update={
            "tier": tier,
            "override": override.action,
            "override_reason": override.reason,
            "tier_reason": f"manually {override.action}d: {override.reason} (computed: {trace.computed_tier})",
        }
    )


def tier_session(
    session: Session, overrides: Mapping[str, TierOverride] | None = None, gap: Any = DEFAULT_GAP
) -> list[TieredTrace]:
    """Segments of one session, scored and tiered."""
    out = []
    for seg in segment_session(session, gap=gap):
        scores = score_steps(seg.steps)
        safety = flag_steps(seg.steps)
        penalty = safety_penalty(safety)
        scores.quality_score = round(max(0.0, scores.quality_score - penalty), 4)
        tier, reason = classify(
            scores.success_rate,
            scores.quality_score,
            scores.verification_passed,
            safety.blocked,
            safety.blocked_rules,
        )
        trace = TieredTrace(
            segment_id=seg.segment_id,
            session_id=seg.session_id,
            repo=seg.repo,
            segment_index=seg.segment_index,
            prompt=seg.prompt,
            steps=seg.steps,
            started_at=seg.started_at,
            ended_at=seg.ended_at,
            boundary=seg.boundary,
            **scores.model_dump(),
            computed_tier=tier,
            tier=tier,
            tier_reason=reason,
            model=session.model,
            source_format=session.source_format,
            unsafe_blocked=safety.blocked,
            unsafe_warned=safety.warned,
            injection_flags=safety.injections,
            safety_penalty=penalty,
            safety_findings=safety.flags,
        )
        out.append(apply_override(trace, (overrides or {}).get(seg.segment_id)))
    return out


def tier_sessions(
    sessions: Iterable[Session], overrides: Mapping[str, TierOverride] | None = None
) -> list[TieredTrace]:
    return [t for s in sessions for t in tier_session(s, overrides)]


def traces_to_table(traces: Iterable[TieredTrace]) -> pa.Table:
    return pa.Table.from_pylist(
        [t.model_dump(mode="python") for t in traces], schema=TIERED_TRACE_ARROW_SCHEMA
    )


def traces_from_table(table: pa.Table) -> list[TieredTrace]:
    rows = table.to_pylist()
    for r in rows:
        r.pop("_partition", None)
    return [TieredTrace.model_validate(r) for r in rows]
