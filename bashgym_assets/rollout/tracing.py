"""Agent episodes as MLflow traces: one trace per episode (or routed request), one span per turn.

A turn span holds the model call (reply, latency, new tokens as MLflow token usage), the command sent to the
shell, its exit code and an output excerpt; the root span holds the scenario, the model and the outcome
(verified, clean, failure class), also as trace tags so ``mlflow.search_traces(filter_string="tags.clean =
'False'")`` and the UI's filters find failed episodes.

Why not the fluent ``mlflow.start_span``: it writes through a process-global OpenTelemetry provider bound to the
process-global tracking URI, which ``registry._fluent_tracking`` switches (and thereby resets the provider)
around every model load and log, and the evaluator advances many episodes in lockstep on shared worker threads.
So the turns are recorded here as plain data while the episode runs (no I/O, no global state), and finished
traces are built as MLflow ``Span`` entities (``Span.from_dict``, the trace JSON schema) and written to this
installation's store in ONE ``log_spans`` call per batch of episodes (``TraceSink.flush``): no per-turn write,
one SQLite transaction per batch. Trace ids of evaluation episodes are derived from (eval id, model, scenario,
sample), so a report can link a failing transcript to its trace without a lookup.

On by default once this installation's MLflow store exists (the SQLite file in the data folder: the first
training creates it, so every evaluation is traced; ``BASHGYM_TRACES=1`` creates it for rollouts before any
training). Off switch: ``BASHGYM_TRACES=0``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, Field

EVAL_EXPERIMENT = "bashgym-evaluation"  # = evaluation.tracking.EVAL_EXPERIMENT (same experiment as the runs)
ROLLOUT_EXPERIMENT = "bashgym-rollouts"
ROUTING_EXPERIMENT = "bashgym-routing"
EXCERPT_CHARS = 800
FLUSH_EVERY = 32  # traces buffered before a write (and at the end of a run)
FLUSH_AFTER_S = 10.0  # a long-lived caller (serving) writes at least this often


def enabled(settings: Any = None) -> bool:
    """``BASHGYM_TRACES`` 0/false/off/no: off; 1/true/on/yes: on; unset: on when the MLflow store already exists
    (creating a SQLite store costs seconds of schema migrations, which a test's throw-away data folder should
    not pay for an evaluation that nobody will open in the UI)."""
    from bashgym_assets.config import get_settings

    switch = get_settings().traces  # the process's switch as it is now, whenever ``settings`` was made
    if switch is not None:
        return switch
    uri = (settings or get_settings()).mlflow_tracking_uri
    return not uri.startswith("sqlite:///") or os.path.exists(uri.removeprefix("sqlite:///"))


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """Output kept in a span: the first ``limit`` characters and how many more there were."""
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


class TurnRecord(BaseModel):
    """One turn as it happened: the model's reply and what the shell made of it (no I/O to record)."""

    index: int
    start_ns: int
    end_ns: int = 0
    model_s: float = 0.0  # the model call (in lockstep: the batch's generation time)
    new_tokens: int = 0
    prompt_tokens: int = 0
    reply: str = ""
    kind: str = ""  # command | exit | prose | ... (transcript.TypedLine.kind)
    command: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    output: str = ""  # the observation, cut to EXCERPT_CHARS
    command_s: float = 0.0
    error: str = ""
    attributes: dict[str, Any] = Field(default_factory=dict)


class EpisodeTrace(BaseModel):
    """One episode (or routed request) being recorded; ``TraceSink.add`` writes it once finished."""

    name: str
    trace_id: str = ""  # "tr-<32 hex>"; derived (``trace_id_for``) or random
    experiment: str = EVAL_EXPERIMENT
    start_ns: int = Field(default_factory=time.time_ns)
    end_ns: int = 0
    inputs: Any = None
    outputs: Any = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    tags: dict[str, str] = Field(default_factory=dict)
    turns: list[TurnRecord] = Field(default_factory=list)
    error: str = ""

    def model_post_init(self, _context: Any) -> None:
        if not self.trace_id:
            self.trace_id = "tr-" + uuid.uuid4().hex

    @contextlib.contextmanager
    def turn_span(self, **attributes: Any) -> Iterator[TurnRecord]:
        """Time a block as one turn and record it (for live callers, e.g. the router): set the record's
        fields (``reply``, ``new_tokens``, ``model_s``, ``command`` ...) inside the block; an exception is
        recorded as the turn's error and re-raised."""
        turn = TurnRecord(index=len(self.turns), start_ns=time.time_ns(), attributes=dict(attributes))
        try:
            yield turn
        except BaseException as exc:
            turn.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            turn.end_ns = time.time_ns()
            self.turns.append(turn)

    def finish(
        self,
        outputs: Any = None,
        attributes: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
        error: str = "",
    ) -> EpisodeTrace:
        self.end_ns = self.end_ns or time.time_ns()
        if outputs is not None:
            self.outputs = outputs
        self.attributes.update(attributes or {})
        self.tags.update({k: str(v) for k, v in (tags or {}).items()})
        self.error = error or self.error
        return self


def trace_id_for(*parts: Any) -> str:
    """A stable MLflow trace id for an episode known by ``parts`` (eval id, model label, scenario, sample)."""
    return "tr-" + hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:32]


def eval_trace_id(eval_id: str, model: str, scenario_id: str, sample_index: int) -> str:
    return trace_id_for("eval", eval_id, model, scenario_id, sample_index)


# ---- entities ----------------------------------------------------------------------------------------------------
def _b64(value: int, length: int) -> str:
    import base64

    return base64.b64encode(value.to_bytes(length, "big")).decode()


def _span_dict(
    trace: EpisodeTrace,
    otel_trace: int,
    span_id: int,
    parent: int | None,
    name: str,
    span_type: str,
    start_ns: int,
    end_ns: int,
    inputs: Any,
    outputs: Any,
    attributes: Mapping[str, Any],
    error: str,
) -> dict[str, Any]:
    """A finished span in MLflow's trace JSON schema (attribute values JSON-encoded, as MLflow stores them)."""
    from mlflow.tracing.constant import SpanAttributeKey

    attrs = {
        SpanAttributeKey.REQUEST_ID: trace.trace_id,
        SpanAttributeKey.SPAN_TYPE: span_type,
        SpanAttributeKey.INPUTS: inputs,
        SpanAttributeKey.OUTPUTS: outputs,
        **attributes,
    }
    return {
        "trace_id": _b64(otel_trace, 16),
        "span_id": _b64(span_id, 8),
        "parent_span_id": _b64(parent, 8) if parent else None,
        "name": name,
        "start_time_unix_nano": start_ns,
        "end_time_unix_nano": max(end_ns, start_ns),
        "status": {"code": "STATUS_CODE_ERROR" if error else "STATUS_CODE_OK", "message": error},
        "attributes": {k: json.dumps(v, default=str) for k, v in attrs.items() if v is not None},
        "events": [],
        "links": [],
    }


def to_spans(trace: EpisodeTrace) -> list[Any]:
    """The episode as MLflow ``Span`` entities: a root (AGENT) span and one LLM span per turn."""
    from mlflow.entities import Span, SpanType
    from mlflow.tracing.constant import SpanAttributeKey, TraceTagKey

    otel_trace = int(trace.trace_id.removeprefix("tr-"), 16)
    root_id = int(hashlib.sha256(f"{trace.trace_id}/root".encode()).hexdigest()[:16], 16) or 1
    end = trace.end_ns or max([t.end_ns for t in trace.turns] + [trace.start_ns])
    tags = {TraceTagKey.TRACE_NAME: trace.name, **trace.tags}
    tag_attrs = {f"{SpanAttributeKey.TRACE_TAG_PREFIX}{k}": v for k, v in tags.items()}
    root_attrs = {**trace.attributes, **tag_attrs, "turns": len(trace.turns)}
    dicts = [
        _span_dict(
            trace,
            otel_trace,
            root_id,
            None,
            trace.name,
            SpanType.AGENT,
            trace.start_ns,
            end,
            trace.inputs,
            trace.outputs,
            root_attrs,
            trace.error,
        )
    ]
    for t in trace.turns:
        sid = int(hashlib.sha256(f"{trace.trace_id}/{t.index}".encode()).hexdigest()[:16], 16) or 2
        attrs: dict[str, Any] = {
            "turn": t.index,
            "reply_kind": t.kind,
            "command": t.command,
            "exit_code": t.exit_code,
            "timed_out": t.timed_out,
            "model_latency_s": round(t.model_s, 4),
            "command_s": round(t.command_s, 4),
            "new_tokens": t.new_tokens,
            **t.attributes,
        }
        if t.new_tokens or t.prompt_tokens:
            attrs[SpanAttributeKey.CHAT_USAGE] = {
                "input_tokens": t.prompt_tokens,
                "output_tokens": t.new_tokens,
                "total_tokens": t.prompt_tokens + t.new_tokens,
            }
        outputs = (
            {"reply": t.reply, "exit_code": t.exit_code, "output": t.output}
            if t.command
            else {"reply": t.reply}
        )
        dicts.append(
            _span_dict(
                trace,
                otel_trace,
                sid,
                root_id,
                f"turn {t.index + 1}: {t.kind or 'reply'}",
                SpanType.LLM,
                t.start_ns,
                t.end_ns or t.start_ns,
                None,
                outputs,
                attrs,
                t.error,
            )
        )
    return [Span.from_dict(d) for d in dicts]


# ---- writing -----------------------------------------------------------------------------------------------------
class TraceSink:
    """Buffers finished traces and writes them in batches to one tracking store (thread-safe)."""

    def __init__(
        self,
        tracking_uri: str,
        artifact_root: str | None = None,
        flush_every: int = FLUSH_EVERY,
        flush_after_s: float = FLUSH_AFTER_S,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.artifact_root = artifact_root
        self.flush_every = flush_every
        self.flush_after_s = flush_after_s
        self._buffer: list[EpisodeTrace] = []
        self._lock = threading.Lock()
        self._experiments: dict[str, str] = {}
        self._oldest = 0.0
        self.written = 0
        self.write_s = 0.0  # time spent writing (the overhead the evaluation pays for its traces)
        self.errors: list[str] = []
        self._client: Any = None

    def add(self, trace: EpisodeTrace) -> None:
        with self._lock:
            if not self._buffer:
                self._oldest = time.monotonic()
            self._buffer.append(trace)
            due = (
                len(self._buffer) >= self.flush_every or time.monotonic() - self._oldest >= self.flush_after_s
            )
        if due:
            self.flush()

    def experiment_id(self, name: str) -> str:
        if name not in self._experiments:
            from mlflow.tracking import MlflowClient

            from bashgym_assets.mlflow_store import get_or_create_experiment, prepare_store

            prepare_store(self.tracking_uri, self.artifact_root)
            c = MlflowClient(tracking_uri=self.tracking_uri)
            # its kind (mlflow_store.EXPERIMENT_KINDS): the rollouts' and the routing's hold traces only, the
            # evaluation's also holds its runs
            self._experiments[name] = get_or_create_experiment(c, name, self.artifact_root)
        return self._experiments[name]

    def flush(self) -> int:
        """Write every buffered trace: one ``log_spans`` call per experiment. Never raises (a tracing failure must
        not fail an evaluation); failures are kept in ``errors``. Returns how many traces were written."""
        from mlflow.tracing.client import TracingClient

        with self._lock:
            batch, self._buffer = self._buffer, []
        if not batch:
            return 0
        started = time.monotonic()
        by_exp: dict[str, list[Any]] = {}
        try:
            for trace in batch:
                by_exp.setdefault(self.experiment_id(trace.experiment), []).extend(to_spans(trace))
            client = self._client = self._client or TracingClient(self.tracking_uri)
            for exp_id, spans in by_exp.items():
                client.log_spans(exp_id, spans)
            self.written += len(batch)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"{type(exc).__name__}: {exc}"[:500])
        finally:
            self.write_s += time.monotonic() - started
        return len(batch)


_SINKS: dict[str, TraceSink] = {}
_SINKS_LOCK = threading.Lock()


def sink(settings: Any = None) -> TraceSink | None:
    """The process's sink for this installation's tracking store (None when traces are off)."""
    from bashgym_assets.config import get_settings

    settings = settings or get_settings()
    if not enabled(settings):
        return None
    uri = settings.mlflow_tracking_uri
    with _SINKS_LOCK:
        if uri not in _SINKS:
            settings.mlflow_dir.mkdir(parents=True, exist_ok=True)
            _SINKS[uri] = TraceSink(uri, settings.mlflow_artifact_root)
        return _SINKS[uri]


@atexit.register
def flush_all() -> None:
    """Write what every sink still holds (end of a run, process exit)."""
    for s in list(_SINKS.values()):
        s.flush()


# ---- from an episode driver --------------------------------------------------------------------------------------
def episode_trace(
    name: str,
    experiment: str,
    turns: list[TurnRecord],
    start_ns: int,
    *,
    inputs: Any,
    outputs: Any,
    attributes: Mapping[str, Any],
    trace_id: str = "",
    error: str = "",
) -> EpisodeTrace:
    """A finished episode's trace; ``attributes`` also become trace tags (searchable, shown in the UI list)."""
    tags = {k: str(v) for k, v in attributes.items() if v is not None}
    return EpisodeTrace(
        name=name,
        trace_id=trace_id,
        experiment=experiment,
        start_ns=start_ns,
        end_ns=max([t.end_ns for t in turns] + [time.time_ns()]),
        inputs=inputs,
        outputs=outputs,
        attributes=dict(attributes),
        tags=tags,
        turns=list(turns),
        error=error,
    )


def trace_url(ui_base: str, experiment_id: str, trace_id: str) -> str:
    """The trace opened in the MLflow UI (the experiment's Traces tab with the trace selected)."""
    return (
        f"{ui_base}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}&traceId={trace_id}"
    )


def eval_trace_link(
    eval_id: str, model: str, scenario_id: str, sample_index: int, settings: Any = None
) -> str | None:
    """The UI link of an evaluation episode's trace (None when traces are off or the experiment is missing)."""
    s = sink(settings)
    if s is None:
        return None
    from mlflow.tracking import MlflowClient

    from bashgym_assets.mlflow_store import ui_base_url

    try:
        exp = s._experiments.get(EVAL_EXPERIMENT)
        if not exp:
            found = MlflowClient(s.tracking_uri).get_experiment_by_name(EVAL_EXPERIMENT)
            if found is None:  # no evaluation experiment: no traces to link to
                return None
            exp = found.experiment_id
    except Exception:  # noqa: BLE001 - an unreachable store: no traces to link to
        return None
    return trace_url(
        ui_base_url(s.tracking_uri), exp, eval_trace_id(eval_id, model, scenario_id, sample_index)
    )


def turn_span(trace: EpisodeTrace, **attributes: Any) -> contextlib.AbstractContextManager[TurnRecord]:
    """``with tracing.turn_span(trace, model="student") as turn: ...`` - one timed turn of ``trace``."""
    return trace.turn_span(**attributes)


@contextlib.contextmanager
def traced(
    name: str,
    experiment: str = ROUTING_EXPERIMENT,
    inputs: Any = None,
    attributes: Mapping[str, Any] | None = None,
    settings: Any = None,
) -> Iterator[EpisodeTrace]:
    """A live trace for one request (e.g. a routed chat completion): yields an ``EpisodeTrace`` to add turns to
    (``turn_span``), set ``outputs``/``attributes`` on; handed to the sink at the end (nothing when off)."""
    trace = EpisodeTrace(name=name, experiment=experiment, inputs=inputs, attributes=dict(attributes or {}))
    error = ""
    try:
        yield trace
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        trace.finish(tags={k: v for k, v in trace.attributes.items() if v is not None}, error=error)
        if (s := sink(settings)) is not None:
            s.add(trace)
