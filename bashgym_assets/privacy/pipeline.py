"""Redacting one partition of ``raw_sessions``: the plain function behind the ``redacted_sessions`` asset.

A row that does not parse as a ``Session``, or a session the redactor fails on, is quarantined with its reason
(never written unredacted); it stays in ``raw_sessions``, so nothing valid is lost.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Iterable

import pyarrow as pa
from pydantic import BaseModel, Field

from bashgym_assets.privacy.redactor import FieldFinding, Redactor, SessionRedaction
from bashgym_assets.sessions import Session, sessions_to_table

QUARANTINE = "redacted_sessions_quarantine"
QUARANTINE_SCHEMA = pa.schema(
    [("session_id", pa.string()), ("stage", pa.string()), ("reason", pa.large_string())]
)


class QuarantinedSession(BaseModel):
    session_id: str
    stage: str
    reason: str


class RedactionResult(BaseModel):
    """What redacting one partition produced, with the counts the asset reports."""

    model_config = {"arbitrary_types_allowed": True}

    sessions: list[Session] = Field(default_factory=list)
    reports: list[SessionRedaction] = Field(default_factory=list)
    quarantine: list[QuarantinedSession] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def by_entity(self) -> Counter[str]:
        c: Counter[str] = Counter()
        for r in self.reports:
            c.update(r.by_entity)
        return c

    @property
    def bytes_scanned(self) -> int:
        return sum(r.bytes_scanned for r in self.reports)

    def table(self) -> pa.Table:
        return sessions_to_table(self.sessions)

    def quarantine_table(self) -> pa.Table:
        return pa.Table.from_pylist([q.model_dump() for q in self.quarantine], schema=QUARANTINE_SCHEMA)


def parse_rows(rows: Iterable[dict]) -> tuple[list[Session], list[QuarantinedSession]]:
    sessions, bad = [], []
    for i, row in enumerate(rows):
        try:
            sessions.append(Session.from_row(row))
        except Exception as exc:  # any malformed row: quarantine, keep going
            bad.append(
                QuarantinedSession(
                    session_id=str(row.get("session_id") or f"row-{i}"),
                    stage="parse",
                    reason=f"{type(exc).__name__}: {str(exc)[:500]}",
                )
            )
    return sessions, bad


def redact_rows(rows: Iterable[dict], redactor: Redactor | None = None) -> RedactionResult:
    """Redact every session in ``rows`` (``raw_sessions`` rows)."""
    redactor = redactor or Redactor()
    sessions, bad = parse_rows(rows)
    result = RedactionResult(quarantine=bad)
    t0 = time.perf_counter()
    for s in sessions:
        try:
            red, report = redactor.redact_session(s)
        except Exception as exc:  # a redactor bug must not leak the session unredacted
            tb = traceback.format_exc(limit=3)
            result.quarantine.append(
                QuarantinedSession(
                    session_id=s.session_id,
                    stage="redact",
                    reason=f"{type(exc).__name__}: {exc}\n{tb}"[:2000],
                )
            )
            continue
        result.sessions.append(red)
        result.reports.append(report)
    result.seconds = time.perf_counter() - t0
    return result


def scan_sessions(sessions: Iterable[Session], redactor: Redactor | None = None) -> list[FieldFinding]:
    """Everything the (full) detector set still finds: the blocking check's evidence."""
    redactor = redactor or Redactor()
    return [f for s in sessions for f in redactor.scan_session(s)]
