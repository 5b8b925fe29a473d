"""The decision log: every routing decision as a row of the lake table ``routing_decisions``.

Its own module because the record outlives the router: the server, the evaluator and an episode's check all
write or amend the same rows, and a notebook reads them back (``routing_summary``) without building a router.
Only pyarrow and the lake; no model, no HTTP client.

``DecisionLog`` buffers rows and writes them as a new partition file once ``flush_every`` rows are waiting or the
oldest has waited ``flush_interval_s`` seconds, and on close/exit; each write is atomic, so a crash loses at most
that last minute and a quiet server writes one file a minute, not one per request. A row carries what the
answering model reported (token counts, finish reason: a teacher's ``length`` stays ``length``), the student's
reply when it answered first and was overruled (``student_reply``), and the truth when the fallback failed too
(``reason`` says who failed, ``error`` why). ``outcome`` is filled in when it becomes known (``record_outcome``:
e.g. ``clean``/``failed`` after an episode's check).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

ROUTING_TABLE = "routing_decisions"


class RoutingDecision(BaseModel):
    """One routed request: the lake's ``routing_decisions`` row."""

    request_id: str
    decided_at: datetime
    strategy: str
    chosen: str  # student | teacher
    model: str  # the chosen model's name
    student_model: str
    teacher_model: str
    confidence: float | None = None  # the student's mean/min token log-probability, when it answered first
    threshold: float | None = None
    complexity: float | None = None
    student_share: float | None = None
    reason: str
    latency_s: float  # the whole routed request
    student_latency_s: float | None = None
    teacher_latency_s: float | None = None
    completion_tokens: int = 0
    error: str = ""
    outcome: str = ""  # filled in when known (record_outcome): clean | failed | ...
    conversation_id: str = ""
    scenario_id: str = ""
    turn: int = 0
    source: str = ""  # operator | server
    prompt_tokens: int = 0  # as the answering model counted them
    finish_reason: str = ""  # the answering model's: stop | length | error
    student_reply: str = ""  # what the student wrote, when it answered first (kept when overruled)
    student_completion_tokens: int | None = None


ROUTING_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("decided_at", pa.timestamp("us", tz="UTC")),
        ("strategy", pa.string()),
        ("chosen", pa.string()),
        ("model", pa.string()),
        ("student_model", pa.string()),
        ("teacher_model", pa.string()),
        ("confidence", pa.float64()),
        ("threshold", pa.float64()),
        ("complexity", pa.float64()),
        ("student_share", pa.float64()),
        ("reason", pa.string()),
        ("latency_s", pa.float64()),
        ("student_latency_s", pa.float64()),
        ("teacher_latency_s", pa.float64()),
        ("completion_tokens", pa.int64()),
        ("error", pa.string()),
        ("outcome", pa.string()),
        ("conversation_id", pa.string()),
        ("scenario_id", pa.string()),
        ("turn", pa.int32()),
        ("source", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("finish_reason", pa.string()),
        ("student_reply", pa.string()),
        ("student_completion_tokens", pa.int64()),
    ]
)


class DecisionLog:
    """Buffered, crash-tolerant appends to the lake table ``routing_decisions``.

    Rows are never rewritten in bulk: each flush writes the buffer as a NEW partition file (atomic, through
    ``Lake.write``), named by time, this log's id and a sequence number, so concurrent routers (a server and an
    evaluation) never overwrite each other and a crash loses only the unflushed buffer. The buffer is written in
    batches: when ``flush_every`` rows wait, or when the oldest has waited ``flush_interval_s`` seconds (a
    background thread checks, ``flush_if_due``), so light traffic writes one file per interval, not one per
    request; ``close`` (also at interpreter exit, and the server's shutdown) writes the rest, and a row appended
    after ``close`` is written at once. ``clock`` is the time source of the age check."""

    KEEP_WRITTEN = 256

    def __init__(
        self,
        lake: Any,
        flush_every: int = 32,
        flush_interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lake = lake
        self.flush_every = max(1, flush_every)
        self.flush_interval_s = flush_interval_s
        self.clock = clock
        self.log_id = uuid.uuid4().hex[:8]
        self._rows: list[dict[str, Any]] = []
        self._oldest: float | None = None  # when the oldest buffered row arrived (clock)
        self._closed = False
        # partition -> its rows, for outcomes that arrive after the flush; the newest KEEP_WRITTEN partitions only,
        # so a long-running server's memory stays bounded (an outcome for an older row is not recorded)
        self._written: dict[str, list[dict[str, Any]]] = {}
        self._seq = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="routing-log", daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        with contextlib.suppress(Exception):  # the data folder may be gone (a test's); nothing to report to
            self.close()

    def _tick(self) -> None:
        while not self._stop.wait(max(0.01, min(self.flush_interval_s / 2, 1.0))):
            with contextlib.suppress(Exception):  # a failed periodic flush keeps the rows for the next one
                self.flush_if_due()

    def flush_if_due(self) -> str | None:
        """Flush when the oldest buffered row has waited ``flush_interval_s``; the partition written, else None."""
        with self._lock:
            if self._oldest is None or self.clock() - self._oldest < self.flush_interval_s:
                return None
            return self.flush()

    def append(self, decisions: Sequence[RoutingDecision]) -> None:
        with self._lock:
            if decisions and self._oldest is None:
                self._oldest = self.clock()
            self._rows.extend(d.model_dump() for d in decisions)
            if len(self._rows) >= self.flush_every or self._closed:
                self.flush()

    def flush(self) -> str | None:
        """Write the buffered rows as one new partition; returns its name (None when there was nothing)."""
        with self._lock:
            if not self._rows:
                return None
            self._seq += 1
            partition = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{self.log_id}-{self._seq:05d}"
            self.lake.write(ROUTING_TABLE, self._rows, partition=partition, schema=ROUTING_SCHEMA)
            self._written[partition], self._rows, self._oldest = self._rows, [], None
            while len(self._written) > self.KEEP_WRITTEN:
                self._written.pop(next(iter(self._written)))
            return partition

    def record_outcome(
        self,
        outcome: str,
        *,
        request_ids: Sequence[str] = (),
        conversation_id: str = "",
        scenario_id: str = "",
    ) -> int:
        """Set ``outcome`` on this log's rows that match; flushed partitions holding them are rewritten (small,
        atomic). Returns how many rows were updated."""
        ids = set(request_ids)

        def hit(r: dict[str, Any]) -> bool:
            return (
                r["request_id"] in ids
                or (conversation_id != "" and r["conversation_id"] == conversation_id)
                or (scenario_id != "" and r["scenario_id"] == scenario_id)
            )

        n = 0
        with self._lock:
            for r in self._rows:
                if hit(r):
                    r["outcome"], n = outcome, n + 1
            for partition, rows in self._written.items():
                changed = [r for r in rows if hit(r)]
                for r in changed:
                    r["outcome"] = outcome
                if changed:
                    n += len(changed)
                    self.lake.write(ROUTING_TABLE, rows, partition=partition, schema=ROUTING_SCHEMA)
        return n

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._stop.set()
        atexit.unregister(self._at_exit)
        self.flush()


def routing_summary(lake: Any, bucket: str = "day") -> list[dict[str, Any]]:
    """The student's share and success over time, per ``bucket`` (DuckDB ``date_trunc`` unit) and strategy:
    requests, the student's share of them, mean student confidence, and the clean rate of the outcomes known for
    each side (None where none is known yet). What a dashboard or notebook plots; [] before any decision."""
    if ROUTING_TABLE not in lake.assets():
        return []
    if bucket not in {"minute", "hour", "day", "week", "month"}:
        raise ValueError(f"bucket {bucket!r}: minute, hour, day, week or month")
    con = lake.connect()
    cur = con.execute(f"""
        SELECT date_trunc('{bucket}', decided_at) AS bucket, strategy, count(*) AS requests,
               avg((chosen = 'student')::INT) AS student_share, avg(confidence) AS mean_confidence,
               avg(CASE WHEN outcome <> '' THEN (outcome = 'clean')::INT END)
                   FILTER (WHERE chosen = 'student') AS student_clean_rate,
               avg(CASE WHEN outcome <> '' THEN (outcome = 'clean')::INT END)
                   FILTER (WHERE chosen = 'teacher') AS teacher_clean_rate
        FROM {ROUTING_TABLE} GROUP BY 1, 2 ORDER BY 1, 2""")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
