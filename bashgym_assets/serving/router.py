"""Teacher/student routing: which model answers a turn, decided by a strategy, every decision logged to the lake.

Strategies (``Strategy``):

``teacher_only`` / ``student_only``
    always the one model (baselines; ``student_only`` never falls back).
``confidence``
    the student answers first, with per-token log-probabilities; its confidence is the mean (``measure=mean``,
    default) or the minimum (``measure=min``) log-probability of its reply's tokens, in nats. Below ``threshold``
    (default -1.0, i.e. a geometric-mean token probability of e^-1 = 0.37) the student's reply is discarded and
    the teacher answers. A reply without log-probabilities or without tokens counts as not confident.
``complexity``
    ``task_complexity`` scores the task (the first user message: the same for every turn of an episode) from 0 to
    1; below ``complexity_threshold`` (default 0.5) the student answers, else the teacher.
``progressive``
    the student takes a share of the conversations equal to its measured clean rate on the behavioural
    evaluation, at least ``floor`` (default 0.1: it keeps being tried, so it keeps being measured) and at most
    ``cap`` (default 0.9). The rate is ``clean_rate`` when given, else read from the lake (``measured_clean_rate``:
    the latest evaluation's promotion decision, else the champion's ``eval_episodes``), and can be updated live
    (``update_student_performance``).
``random``
    A/B: the student takes ``student_share`` (default 0.5) of the conversations, drawn with ``seed``.

``progressive`` and ``random`` draw once per conversation (a hash of the seed and the conversation's opening
messages), not per turn: an episode is driven by one model, so its outcome can be credited to that model, and the
same seed routes the same conversations the same way whatever the order or concurrency. Whenever the student
fails (an error, a context overflow), the teacher answers, except under ``student_only``.

Every decision is a ``RoutingDecision`` row of the lake table ``routing_decisions`` (``DecisionLog``: buffered,
written as a new partition file once ``flush_every`` rows are waiting or the oldest has waited
``flush_interval_s`` seconds, and on close/exit; each write atomic, so a crash loses at most that last minute and
a quiet server writes one file a minute, not one per request). A row carries what the answering model reported
(token counts, finish reason: a teacher's ``length`` stays ``length``), the student's reply when it answered
first and was overruled (``student_reply``), and the truth when the fallback failed too (``reason`` says who
failed, ``error`` why). ``outcome`` is filled in when it becomes known (``record_outcome``: e.g. ``clean``/
``failed`` after an episode's check).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import math
import os
import re
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qsl

import pyarrow as pa
from pydantic import BaseModel, Field, field_validator

from bashgym_assets.rollout.operators import (
    LiteLLMOperator,
    Operator,
    OperatorError,
    Reply,
    make_operator,
    register_operator,
)
from bashgym_assets.rollout.transcript import Message
from bashgym_assets.serving.engine import ChatEngine, GenerationRequest

ROUTING_TABLE = "routing_decisions"
STUDENT, TEACHER = "student", "teacher"


class Strategy(StrEnum):
    TEACHER_ONLY = "teacher_only"
    STUDENT_ONLY = "student_only"
    CONFIDENCE = "confidence"
    COMPLEXITY = "complexity"
    PROGRESSIVE = "progressive"
    RANDOM = "random"


ALIASES = {
    "teacher": "teacher_only",
    "student": "student_only",
    "confidence_based": "confidence",
    "task_complexity": "complexity",
    "ab": "random",
    "random_sample": "random",
}


def parse_strategy(name: str) -> Strategy:
    key = name.strip().lower().replace("-", "_")
    try:
        return Strategy(ALIASES.get(key, key))
    except ValueError:
        raise ValueError(
            f"unknown routing strategy {name!r}: one of {', '.join(s.value for s in Strategy)}"
        ) from None


class RouterConfig(BaseModel):
    strategy: Strategy = Strategy.CONFIDENCE
    threshold: float = -1.0  # confidence: mean/min token log-probability (nats)
    measure: str = Field(default="mean", pattern="^(mean|min)$")
    complexity_threshold: float = 0.5
    student_share: float = Field(default=0.5, ge=0.0, le=1.0)  # random A/B
    floor: float = Field(default=0.1, ge=0.0, le=1.0)  # progressive
    cap: float = Field(default=0.9, ge=0.0, le=1.0)  # progressive
    clean_rate: float | None = Field(default=None, ge=0.0, le=1.0)  # progressive: given instead of measured
    seed: int = 0

    @field_validator("strategy", mode="before")
    @classmethod
    def _alias(cls, v: Any) -> Any:
        return parse_strategy(v) if isinstance(v, str) else v


class ChatParams(BaseModel):
    max_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    stop: list[str] = Field(default_factory=list)
    seed: int | None = None


class Answer(BaseModel):
    """A backend's reply to one conversation."""

    text: str = ""
    error: str | None = None
    error_code: str | None = None  # context_length_exceeded | invalid_request_error | upstream_error | ...
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[float] | None = None
    latency_s: float = 0.0


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


class Routed(BaseModel):
    answer: Answer
    decision: RoutingDecision


# ---- task complexity ---------------------------------------------------------------------------------------------
_STEP_MARKERS = re.compile(
    r"\b(then|after that|afterwards|also|finally|next)\b|;|\n\s*(?:\d+[.)]|[-*])\s", re.I
)
_HARD_TERMS = re.compile(
    r"\b(awk|sed|regex|regular expression|cron|crontab|systemd|docker|iptables|rebase|merge conflict|script|loop|"
    r"recursive(?:ly)?|parse|json|yaml|csv|permissions?|archive|compress|checksum|signal|process(?:es)?|"
    r"symlink|environment variable|port|daemon|pipeline|concurrent|race)\b",
    re.I,
)
_CONDITIONS = re.compile(r"\b(if|unless|every|each|only|except|without|unless|whose|which|that are)\b", re.I)


def task_complexity(task: str) -> tuple[float, str]:
    """A 0..1 score for how hard a shell task reads, and the reason, from four observable signals:

    - length: 0.25 x min(1, words / 60) (longer tasks say more that must be done);
    - steps: 0.1 per step marker ("then", "also", "finally", ";", a list item), at most 0.3;
    - hard tools and concepts (awk, sed, regex, cron, systemd, docker, json, permissions, processes, scripts,
      loops, recursion ...): 0.1 per distinct term, at most 0.3;
    - conditions and quantifiers ("if", "unless", "every", "each", "only", "except" ...): 0.05 each, at most 0.15.

    Deliberately simple and inspectable: the score and its parts are logged with each decision, and the
    threshold is a setting, so a user can see and tune what goes where."""
    words = len(task.split())
    length = 0.25 * min(1.0, words / 60)
    steps = min(0.3, 0.1 * len(_STEP_MARKERS.findall(task)))
    terms = sorted({m.lower() for m in _HARD_TERMS.findall(task)})
    hard = min(0.3, 0.1 * len(terms))
    conds = min(0.15, 0.05 * len(_CONDITIONS.findall(task)))
    score = round(min(1.0, length + steps + hard + conds), 4)
    reason = (
        f"complexity {score:.2f} = length {length:.2f} ({words} words) + steps {steps:.2f} + terms "
        f"{hard:.2f} ({', '.join(terms[:5]) or 'none'}) + conditions {conds:.2f}"
    )
    return score, reason


def task_text(messages: Sequence[dict[str, str]]) -> str:
    """The task: the first user message (in an episode, the scenario's task; it never changes across turns)."""
    return next((m["content"] for m in messages if m["role"] == "user"), "")


def conversation_id(messages: Sequence[dict[str, str]]) -> str:
    """A stable id of a conversation: a hash of its messages up to and including the first user message."""
    head = []
    for m in messages:
        head.append(f"{m['role']}\x00{m['content']}")
        if m["role"] == "user":
            break
    return hashlib.sha256("\x01".join(head).encode()).hexdigest()[:16]


def _uniform(seed: int, key: str) -> float:
    """A reproducible draw in [0, 1) for (seed, key)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# ---- the student's measured success --------------------------------------------------------------------------------
def measured_clean_rate(lake: Any) -> tuple[float | None, str]:
    """The serving student's clean rate on the latest behavioural evaluation, and where it came from.

    From ``promotion_decisions`` (the latest automatic decision): the candidate's clean rate when it was promoted
    or when there is no champion (then the candidate is what one serves), else the champion's (the incumbent).
    Else the mean clean rate of the ``champion`` rows of ``eval_episodes`` (held-out evaluations only: a
    ``--split train`` run measures fit). ``(None, why)`` when neither exists."""
    try:
        rows = [
            r
            for r in lake.read("promotion_decisions").to_pylist()
            if r.get("eval_id") and r.get("action") in ("promote", "keep")
        ]
    except FileNotFoundError:
        rows = []
    if rows:
        latest = max(rows, key=lambda r: r.get("decided_at") or "")
        if latest["promote"] or latest.get("incumbent") == "base":
            return float(
                latest["candidate_clean"]
            ), f"promotion_decisions {latest['eval_id']}: candidate clean rate"
        return float(
            latest["incumbent_clean"]
        ), f"promotion_decisions {latest['eval_id']}: champion clean rate"
    try:
        from bashgym_assets.evaluation.metrics import TRAIN_SPLIT_EVAL_PREFIX

        held_out = [p for p in lake.partitions("eval_episodes") if not p.startswith(TRAIN_SPLIT_EVAL_PREFIX)]
        eps = lake.read_all(
            "eval_episodes", held_out, columns=["model", "clean", "failure_class"]
        ).to_pylist()
    except FileNotFoundError:
        eps = []
    scored = [
        e
        for e in eps
        if e["model"] == "champion" and e["failure_class"] not in ("setup_failed", "sandbox_error")
    ]
    if scored:
        return sum(bool(e["clean"]) for e in scored) / len(
            scored
        ), f"eval_episodes: champion ({len(scored)} episodes)"
    return None, "no evaluation of the student in the lake"


# ---- backends --------------------------------------------------------------------------------------------------------
class Backend(ABC):
    """A model that completes chats (the student or the teacher)."""

    name: str = "model"

    def bind(self, bundle: Any) -> Backend:
        """A copy bound to one scenario (an operator teacher such as ``reference`` needs its bundle)."""
        return self

    @abstractmethod
    def complete(
        self, conversations: Sequence[list[dict[str, str]]], params: ChatParams, logprobs: bool = False
    ) -> list[Answer]:
        """One answer per conversation, in order; failures are in ``Answer.error``, never raised."""


class EngineBackend(Backend):
    """An in-process ``ChatEngine`` (or the server's batching queue in front of one): the whole batch of
    conversations is one generate call, with log-probabilities; long transcripts are trimmed, as the operators do."""

    def __init__(
        self, engine: ChatEngine, submit: Callable[[GenerationRequest], Any] | None = None, trim: bool = True
    ) -> None:
        self.engine = engine
        self.name = engine.name
        self.submit = submit
        self.trim = trim

    def complete(
        self, conversations: Sequence[list[dict[str, str]]], params: ChatParams, logprobs: bool = False
    ) -> list[Answer]:
        started = time.monotonic()
        reqs = [
            GenerationRequest(
                messages=list(c),
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                stop=params.stop,
                seed=params.seed,
                logprobs=logprobs,
                trim=self.trim,
            )
            for c in conversations
        ]
        if self.submit is not None:  # the server's queue: these join whatever else is being batched
            futures = [self.submit(r) for r in reqs]
            gens = [f.result() for f in futures]
        else:
            gens = self.engine.generate(reqs)
        took = time.monotonic() - started
        return [
            Answer(
                text=g.text,
                error=g.error,
                error_code=g.error_code,
                finish_reason=g.finish_reason,
                prompt_tokens=g.prompt_tokens,
                completion_tokens=g.completion_tokens,
                latency_s=took,
                logprobs=[t.logprob for t in g.logprobs] if g.logprobs is not None else None,
            )
            for g in gens
        ]


def upstream_error_code(exc: BaseException) -> str:
    """OpenAI's code for a failed upstream call: ``context_length_exceeded`` (the prompt does not fit the model:
    the client's to fix, a 400, never retried), ``invalid_request_error`` (another 400 of the upstream model),
    else ``upstream_error`` (a 502: the upstream is down or broken)."""
    import litellm

    text = str(exc).lower()
    if (
        isinstance(exc, litellm.ContextWindowExceededError)
        or "context_length_exceeded" in text
        or "maximum context length" in text
    ):
        return "context_length_exceeded"
    if isinstance(exc, litellm.BadRequestError):
        return "invalid_request_error"
    return "upstream_error"


class LiteLLMBackend(Backend):
    """Any litellm model string (``openai/<name>`` + ``api_base`` for ``bashgym serve`` or another
    OpenAI-compatible server); asks for log-probabilities when the strategy needs them. Concurrent requests."""

    def __init__(
        self, model: str, api_base: str | None = None, api_key: str | None = None, timeout_s: float = 60.0
    ) -> None:
        self.model = model
        self.name = model
        self.api_base = api_base
        self.api_key = (
            api_key or os.environ.get("BASHGYM_TEACHER_API_KEY") or ("sk-local" if api_base else None)
        )
        self.timeout_s = timeout_s

    def _one(self, messages: list[dict[str, str]], params: ChatParams, logprobs: bool) -> Answer:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "timeout": self.timeout_s,
            "num_retries": 0,
        }
        if params.stop:
            kwargs["stop"] = params.stop
        if params.top_p != 1.0:
            kwargs["top_p"] = params.top_p
        if logprobs:
            kwargs["logprobs"] = True
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        started = time.monotonic()
        try:
            response = litellm.completion(**kwargs)
            choice = response.choices[0]
            text = choice.message.content
            if text is None:
                raise ValueError("completion had no content")
        except Exception as exc:  # noqa: BLE001 - litellm maps provider errors onto many classes
            return Answer(
                error=f"{type(exc).__name__}: {exc}",
                error_code=upstream_error_code(exc),
                finish_reason="error",
                latency_s=time.monotonic() - started,
            )
        lps = None
        raw = getattr(choice, "logprobs", None)
        content = raw.get("content") if isinstance(raw, dict) else getattr(raw, "content", None)
        if content is not None:
            lps = [float(t["logprob"] if isinstance(t, dict) else t.logprob) for t in content]
        usage = getattr(response, "usage", None)
        return Answer(
            text=text,
            finish_reason=choice.finish_reason or "stop",
            logprobs=lps,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            latency_s=time.monotonic() - started,
        )

    def complete(
        self, conversations: Sequence[list[dict[str, str]]], params: ChatParams, logprobs: bool = False
    ) -> list[Answer]:
        if len(conversations) <= 1:
            return [self._one(list(c), params, logprobs) for c in conversations]
        with ThreadPoolExecutor(max_workers=min(8, len(conversations)), thread_name_prefix="route") as ex:
            return list(ex.map(lambda c: self._one(list(c), params, logprobs), conversations))


class OperatorBackend(Backend):
    """Any ``Operator`` as a backend (the ``reference`` operator as an offline teacher, a litellm teacher); a
    litellm operator's model is asked through ``LiteLLMBackend``, so its token counts, finish reason and error
    codes come through (the operator's ``complete`` returns the text only)."""

    def __init__(self, operator: Operator) -> None:
        self.operator = operator
        self.name = operator.name.removeprefix("litellm:")
        self._litellm = (
            LiteLLMBackend(
                operator.model,
                api_base=operator.api_base,
                api_key=operator.api_key,
                timeout_s=operator.timeout_s,
            )
            if isinstance(operator, LiteLLMOperator)
            else None
        )

    def bind(self, bundle: Any) -> OperatorBackend:
        bound = self.operator.for_scenario(bundle)
        return self if bound is self.operator else OperatorBackend(bound)

    def complete(
        self, conversations: Sequence[list[dict[str, str]]], params: ChatParams, logprobs: bool = False
    ) -> list[Answer]:
        started = time.monotonic()
        if self._litellm is not None:
            return self._litellm.complete(conversations, params, logprobs=logprobs)
        replies = self.operator.replies([[Message(**m) for m in c] for c in conversations])
        took = time.monotonic() - started
        return [
            Answer(
                text=r.text,
                error=r.error,
                completion_tokens=r.new_tokens,
                latency_s=took,
                finish_reason="error" if r.error else ("length" if r.truncated else "stop"),
            )
            for r in replies
        ]


# ---- the decision log ----------------------------------------------------------------------------------------------
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
                or (conversation_id and r["conversation_id"] == conversation_id)
                or (scenario_id and r["scenario_id"] == scenario_id)
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


# ---- the router ----------------------------------------------------------------------------------------------------
class Router:
    """Routes batches of conversations between a student and a teacher backend (see the module docstring)."""

    def __init__(
        self,
        config: RouterConfig,
        student: Backend,
        teacher: Backend,
        log: DecisionLog | None = None,
        lake: Any = None,
    ) -> None:
        self.config = config
        self.student = student
        self.teacher = teacher
        self.log = log
        self.clean_rate = config.clean_rate
        self.clean_rate_source = "given" if config.clean_rate is not None else ""
        self.scenarios: dict[
            str, str
        ] = {}  # task message -> scenario id (RoutedOperator.for_scenario fills it)
        if config.strategy == Strategy.PROGRESSIVE and self.clean_rate is None and lake is not None:
            self.clean_rate, self.clean_rate_source = measured_clean_rate(lake)

    def update_student_performance(self, clean_rate: float, source: str = "updated") -> None:
        """Progressive routing's input: the student's latest measured clean rate."""
        self.clean_rate, self.clean_rate_source = max(0.0, min(1.0, clean_rate)), source

    def progressive_share(self) -> float:
        c = self.config
        return min(c.cap, max(c.floor, self.clean_rate or 0.0))

    def bind(self, bundle: Any) -> Router:
        bound = Router.__new__(Router)
        bound.__dict__.update(self.__dict__)
        bound.student, bound.teacher = self.student.bind(bundle), self.teacher.bind(bundle)
        return bound

    def _plan(self, messages: list[dict[str, str]]) -> tuple[str, str, dict[str, Any]]:
        """(first model to ask, reason, extra decision fields) before anything is generated."""
        c = self.config
        s = c.strategy
        if s == Strategy.TEACHER_ONLY:
            return TEACHER, "strategy teacher_only", {}
        if s == Strategy.STUDENT_ONLY:
            return STUDENT, "strategy student_only", {}
        if s == Strategy.CONFIDENCE:
            return STUDENT, "", {"threshold": c.threshold}
        if s == Strategy.COMPLEXITY:
            score, why = task_complexity(task_text(messages))
            chosen = STUDENT if score < c.complexity_threshold else TEACHER
            rel = "<" if chosen == STUDENT else ">="
            return (
                chosen,
                f"{why} {rel} {c.complexity_threshold}",
                {"complexity": score, "threshold": c.complexity_threshold},
            )
        if s == Strategy.PROGRESSIVE:
            share = self.progressive_share()
            draw = _uniform(c.seed, conversation_id(messages))
            chosen = STUDENT if draw < share else TEACHER
            return (
                chosen,
                (
                    f"draw {draw:.3f} {'<' if chosen == STUDENT else '>='} student share {share:.2f} "
                    f"(clean rate {self.clean_rate if self.clean_rate is not None else 'unknown'} from "
                    f"{self.clean_rate_source or 'nowhere'}; floor {c.floor}, cap {c.cap})"
                ),
                {"student_share": share},
            )
        draw = _uniform(c.seed, conversation_id(messages))
        chosen = STUDENT if draw < c.student_share else TEACHER
        return (
            chosen,
            (
                f"A/B draw {draw:.3f} {'<' if chosen == STUDENT else '>='} student share "
                f"{c.student_share} (seed {c.seed})"
            ),
            {"student_share": c.student_share},
        )

    def confidence(self, logprobs: list[float] | None) -> float | None:
        if not logprobs:
            return None
        value = min(logprobs) if self.config.measure == "min" else sum(logprobs) / len(logprobs)
        return value if math.isfinite(value) else -1e9

    def route_many(
        self,
        conversations: Sequence[list[dict[str, str]]],
        params: ChatParams | None = None,
        scenario_id: str = "",
        source: str = "operator",
        request_ids: Sequence[str] | None = None,
    ) -> list[Routed]:
        """Route and answer every conversation: the student's share goes to the student in ONE batch, the
        teacher's (including the student's low-confidence or failed replies) concurrently; each decision logged."""
        params = params or ChatParams()
        started, started_ns = time.monotonic(), time.time_ns()
        convs = [list(c) for c in conversations]
        ids = list(request_ids) if request_ids else [f"route-{uuid.uuid4().hex[:16]}" for _ in convs]
        plans = [self._plan(c) for c in convs]
        answers: list[Answer | None] = [None] * len(convs)
        chosen = [p[0] for p in plans]
        reasons = [p[1] for p in plans]
        extras = [dict(p[2]) for p in plans]
        student_lat: list[float | None] = [None] * len(convs)
        teacher_lat: list[float | None] = [None] * len(convs)
        student_ans: list[Answer | None] = [None] * len(convs)  # the student's reply, also when overruled
        to_student = [i for i, p in enumerate(plans) if p[0] == STUDENT]
        if to_student:
            want_lp = self.config.strategy == Strategy.CONFIDENCE
            got = self.student.complete([convs[i] for i in to_student], params, logprobs=want_lp)
            for i, ans in zip(to_student, got, strict=True):
                student_lat[i] = ans.latency_s
                student_ans[i] = ans
                if ans.error and self.config.strategy != Strategy.STUDENT_ONLY:
                    chosen[i], reasons[i] = TEACHER, f"student failed ({ans.error[:200]})"
                    continue
                if want_lp:
                    conf = self.confidence(ans.logprobs)
                    extras[i]["confidence"] = conf
                    th = self.config.threshold
                    if conf is None:
                        chosen[i], reasons[i] = TEACHER, "student reply without token log-probabilities"
                        continue
                    if conf < th:
                        chosen[i] = TEACHER
                        reasons[i] = f"student {self.config.measure} logprob {conf:.3f} < threshold {th}"
                        continue
                    reasons[i] = f"student {self.config.measure} logprob {conf:.3f} >= threshold {th}"
                answers[i] = ans
        to_teacher = [i for i in range(len(convs)) if chosen[i] == TEACHER]
        if to_teacher:
            got = self.teacher.complete([convs[i] for i in to_teacher], params)
            for i, ans in zip(to_teacher, got, strict=True):
                teacher_lat[i] = ans.latency_s
                answers[i] = ans
                if ans.error:  # said as it is: the teacher did not answer
                    reasons[i] = f"{reasons[i]}; teacher failed ({ans.error[:200]})"
                elif student_ans[i] is not None and student_ans[i].error:
                    reasons[i] = f"{reasons[i]}; teacher answered"
        took = time.monotonic() - started
        now = datetime.now(UTC)
        out = []
        for i, ans in enumerate(answers):
            ans = ans or Answer(error="no answer", finish_reason="error")
            decision = RoutingDecision(
                request_id=ids[i],
                decided_at=now,
                strategy=self.config.strategy.value,
                chosen=chosen[i],
                model=self.student.name if chosen[i] == STUDENT else self.teacher.name,
                student_model=self.student.name,
                teacher_model=self.teacher.name,
                reason=reasons[i],
                latency_s=took,
                student_latency_s=student_lat[i],
                teacher_latency_s=teacher_lat[i],
                completion_tokens=ans.completion_tokens,
                error=ans.error or "",
                conversation_id=conversation_id(convs[i]),
                scenario_id=scenario_id or self.scenarios.get(task_text(convs[i]), ""),
                turn=sum(m["role"] == "assistant" for m in convs[i]),
                source=source,
                prompt_tokens=ans.prompt_tokens,
                finish_reason=ans.finish_reason,
                student_reply=student_ans[i].text if student_ans[i] is not None else "",
                student_completion_tokens=student_ans[i].completion_tokens
                if student_ans[i] is not None
                else None,
                **extras[i],
            )
            out.append(Routed(answer=ans, decision=decision))
        if self.log is not None:
            self.log.append([r.decision for r in out])
        if source != "operator":  # an operator's turns are traced by the episode that drives it
            self._trace(out, convs, started_ns)
        return out

    @staticmethod
    def _trace(routed: list[Routed], convs: list[list[dict[str, str]]], start_ns: int) -> None:
        """Each routed request the server answered becomes an MLflow trace (experiment ``bashgym-routing``): one
        span per model it called (the student, then the teacher when it took over), the decision as attributes."""
        from bashgym_assets.rollout import tracing

        sink = tracing.sink()
        if sink is None:
            return
        for r, conv in zip(routed, convs, strict=True):
            d, ans = r.decision, r.answer
            turns: list[tracing.TurnRecord] = []
            at = start_ns
            for who, model, latency in (
                (STUDENT, d.student_model, d.student_latency_s),
                (TEACHER, d.teacher_model, d.teacher_latency_s),
            ):
                if latency is None:
                    continue
                answered = d.chosen == who
                end = at + int(latency * 1e9)
                if answered:
                    reply, tokens, error, finish = (
                        ans.text,
                        ans.completion_tokens,
                        ans.error or "",
                        ans.finish_reason,
                    )
                else:  # the student's overruled (or failed) reply, as it was
                    reply, tokens = d.student_reply, d.student_completion_tokens or 0
                    error, finish = ("" if tokens or reply else "no usable reply"), "overruled"
                turns.append(
                    tracing.TurnRecord(
                        index=len(turns),
                        start_ns=at,
                        end_ns=end,
                        model_s=latency,
                        reply=tracing.excerpt(reply),
                        new_tokens=tokens,
                        prompt_tokens=ans.prompt_tokens if answered else 0,
                        error=error,
                        attributes={
                            "model": model,
                            "role": who,
                            "answered": answered,
                            "finish_reason": finish,
                        },
                    )
                )
                at = end
            attributes = {
                "strategy": d.strategy,
                "chosen": d.chosen,
                "model": d.model,
                "reason": d.reason,
                "confidence": d.confidence,
                "request_id": d.request_id,
                "finish_reason": d.finish_reason,
                "prompt_tokens": d.prompt_tokens,
                "completion_tokens": d.completion_tokens,
            }
            sink.add(
                tracing.episode_trace(
                    "routed_request",
                    tracing.ROUTING_EXPERIMENT,
                    turns,
                    start_ns,
                    inputs={"messages": conv[-6:]},
                    outputs={"reply": ans.text},
                    attributes=attributes,
                    error=ans.error or "",
                )
            )

    def record_outcome(self, outcome: str, **match: Any) -> int:
        return self.log.record_outcome(outcome, **match) if self.log is not None else 0


# ---- the routed operator ---------------------------------------------------------------------------------------------
class RoutedOperator(Operator):
    """``routed:<strategy>``: each turn (each lockstep batch in the evaluator) goes through a ``Router``.

    Unscaffolded like the evaluated models (the student was trained without the instruction). Decisions carry the
    scenario id (``for_scenario``); ``record_outcome`` fills the outcome in once the episode's check has run."""

    def __init__(
        self,
        router: Router,
        params: ChatParams | None = None,
        scenario_id: str = "",
        scaffolded: bool = False,
    ) -> None:
        self.router = router
        self.params = params or ChatParams()
        self.scenario_id = scenario_id
        self.scaffolded = scaffolded
        self.name = f"routed:{router.config.strategy.value}"

    def for_scenario(self, bundle: Any) -> RoutedOperator:
        """Self, unless the teacher must be bound to the scenario (``reference``): the evaluator batches one
        operator object's turns together, so the student generates every episode's turn in one call. The
        scenario's task is registered so decisions carry its id either way."""
        from bashgym_assets.rollout.transcript import task_message

        self.router.scenarios[task_message(bundle)] = getattr(bundle, "id", "")
        if self.router.teacher.bind(bundle) is self.router.teacher:
            return self
        return RoutedOperator(
            self.router.bind(bundle), self.params, getattr(bundle, "id", ""), self.scaffolded
        )

    def sampling(self) -> dict[str, Any]:
        return {
            **self.params.model_dump(),
            "router": self.router.config.model_dump(mode="json"),
            "student": self.router.student.name,
            "teacher": self.router.teacher.name,
        }

    def replies(self, conversations: Sequence[list[Message]]) -> list[Reply]:
        routed = self.router.route_many(
            [[m.model_dump() for m in c] for c in conversations],
            self.params,
            scenario_id=self.scenario_id,
            source="operator",
        )
        return [
            Reply(
                text=r.answer.text,
                error=r.answer.error,
                truncated=r.answer.finish_reason == "length",
                new_tokens=r.answer.completion_tokens,
            )
            for r in routed
        ]

    def next_command(self, messages: list[Message]) -> str:
        reply = self.replies([messages])[0]
        if reply.error:
            raise OperatorError(reply.error)
        return reply.text

    def record_outcome(self, outcome: str, scenario_id: str = "") -> int:
        """An episode's outcome (e.g. ``clean``/``failed``) on every decision of its scenario (``scenario_id``,
        default the one this copy is bound to)."""
        sid = scenario_id or self.scenario_id
        return self.router.record_outcome(outcome, scenario_id=sid) if sid else 0


# ---- construction from a spec string ---------------------------------------------------------------------------------
def parse_route_spec(spec: str) -> RouterConfig:
    """``confidence?threshold=-0.8&measure=min``, ``progressive?cap=0.8``, ``random?student_share=0.2&seed=3``."""
    name, _, query = spec.partition("?")
    fields: dict[str, Any] = {k: v for k, v in parse_qsl(query, strict_parsing=bool(query))}
    unknown = set(fields) - (set(RouterConfig.model_fields) - {"strategy"})
    if unknown:
        raise ValueError(f"unknown routing option(s) {sorted(unknown)}: {sorted(RouterConfig.model_fields)}")
    return RouterConfig(strategy=parse_strategy(name), **fields)


def student_backend(
    spec: str,
    adapter_dir: str | None = None,
    api_base: str | None = None,
    settings: Any = None,
    max_context_tokens: int = 2048,
) -> Backend:
    """``champion`` (default) or ``models:/...`` (the registered adapter on its base, in process), ``local:<dir>``
    (with ``adapter_dir``), or a litellm string such as ``openai/bashgym-operator`` + ``api_base`` (a running
    ``bashgym serve``; it returns log-probabilities)."""
    from bashgym_assets.serving.engine import engine_from_registry

    if spec == "champion" or spec.startswith("models:/"):
        from bashgym_assets.evaluation.promotion import CHAMPION
        from bashgym_assets.training.registry import REGISTERED_MODEL

        uri = f"models:/{REGISTERED_MODEL}@{CHAMPION}" if spec == "champion" else spec
        return EngineBackend(
            engine_from_registry(uri, settings=settings, max_context_tokens=max_context_tokens)
        )
    if spec.startswith("local:"):
        folder = spec.removeprefix("local:")
        return EngineBackend(
            ChatEngine(folder, adapter_dir, name=spec, max_context_tokens=max_context_tokens)
        )
    return LiteLLMBackend(spec, api_base=api_base)


def teacher_backend(spec: str | None = None, api_base: str | None = None, settings: Any = None) -> Backend:
    """Any operator spec (a litellm string, ``reference``); default: the configured teacher
    (``BASHGYM_TEACHER_MODEL`` / ``BASHGYM_TEACHER_API_BASE``)."""
    from bashgym_assets.config import get_settings

    settings = settings or get_settings()
    spec = spec or settings.teacher_model
    return OperatorBackend(make_operator(spec, api_base=api_base or settings.teacher_api_base))


def routed_operator(
    route: str,
    api_base: str | None = None,
    adapter_dir: str | None = None,
    student: str | None = None,
    teacher: str | None = None,
    student_api_base: str | None = None,
    max_new_tokens: int | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    lake: Any = None,
    settings: Any = None,
    **_ignored: Any,
) -> RoutedOperator:
    """The ``routed:<strategy>[?options]`` operator of ``make_operator``: ``student`` (default
    ``BASHGYM_ROUTER_STUDENT`` or ``champion``) and ``teacher`` (default the configured teacher, at ``api_base``),
    decisions logged to the lake of ``settings``."""
    from bashgym_assets.config import get_settings
    from bashgym_assets.lake import Lake

    settings = settings or get_settings()
    config = parse_route_spec(route)
    lake = lake or Lake(settings)
    s = student_backend(
        student or os.environ.get("BASHGYM_ROUTER_STUDENT") or "champion",
        adapter_dir,
        student_api_base or os.environ.get("BASHGYM_ROUTER_STUDENT_API_BASE"),
        settings,
    )
    t = teacher_backend(teacher, api_base, settings)
    router = Router(config, s, t, DecisionLog(lake), lake=lake)
    params = ChatParams(max_tokens=max_new_tokens or max_tokens or 128, temperature=temperature)
    return RoutedOperator(router, params)


# ``routed:`` specs: registered with the operators module on import (it never imports serving); callers above
# the episodes layer take ``make_operator`` from here so that the registration has happened
register_operator("routed", routed_operator, help="teacher/student routing: routed:<strategy>[?options]")
