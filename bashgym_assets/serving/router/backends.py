"""The backends: the models a router sends conversations to (the student, the teacher), behind one interface.

Its own module because this is where the weight is: an in-process ``ChatEngine`` (torch and transformers, loaded
only when the engine loads), a litellm client (imported only when a call is made), or any rollout ``Operator``.
The policy and the decision log never need any of it. ``Backend.complete`` answers a batch of conversations and
never raises: a failure is an ``Answer.error`` (with OpenAI's error code), so the router can fall back.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.config import get_settings
from bashgym_assets.rollout.operators import LiteLLMOperator, Operator, make_operator
from bashgym_assets.rollout.transcript import Message
from bashgym_assets.serving.engine import ChatEngine, GenerationRequest


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
        self.api_key = api_key or get_settings().teacher_api_key or ("sk-local" if api_base else None)
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
        from bashgym_assets.training.registry import CHAMPION_ALIAS, REGISTERED_MODEL

        uri = f"models:/{REGISTERED_MODEL}@{CHAMPION_ALIAS}" if spec == "champion" else spec
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
    settings = settings or get_settings()
    spec = spec or settings.teacher_model
    return OperatorBackend(make_operator(spec, api_base=api_base or settings.teacher_api_base))
