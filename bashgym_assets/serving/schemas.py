"""The OpenAI chat-completions wire format, as much of it as ``bashgym serve`` honours (pydantic models).

Types are strict, as OpenAI's are: ``max_tokens: true`` or ``stream: "yes"`` is a 400, not a silent 1 or True.
A field that would change the answer and that the server cannot honour (tools, ``response_format`` other than
text, ``logit_bias``, non-zero penalties, image or audio parts, ...) is refused with a 400 naming it
(``ChatCompletionRequest.unsupported``), never ignored: a client must not believe it got what it asked for.
A field outside OpenAI's chat-completions API is refused too, as OpenAI refuses it (``Unknown parameter``, code
``unknown_parameter``): other servers' sampling extensions (``top_k``, ``repetition_penalty``, ``min_p``,
``best_of``, ``echo`` ...) would change the answer, and a misspelt field must not pass for the one it meant.
OpenAI's own fields that change nothing here (``user``, ``metadata``, ``store``, ``parallel_tool_calls``,
``service_tier``, the prompt-cache hints) are accepted.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, Strict, StrictBool, StrictInt, StrictStr, field_validator

from bashgym_assets.serving.engine import TokenLogprob

StrictNumber = Annotated[float, Strict()]  # an int or a float, never a bool or a string


class ChatMessage(BaseModel):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: StrictStr | list[dict[str, Any]] | None = None

    model_config = {"extra": "allow"}

    def as_dict(self) -> dict[str, str]:
        """The chat template's view: text parts joined; ``developer`` is OpenAI's newer name for ``system``."""
        if isinstance(self.content, list):
            text = "".join(str(p.get("text", "")) for p in self.content if p.get("type", "text") == "text")
        else:
            text = self.content or ""
        return {"role": "system" if self.role == "developer" else self.role, "content": text}

    def unsupported(self, i: int) -> tuple[str, str] | None:
        """(param, why) when this message asks for something the server cannot do, else None."""
        extra = self.model_extra or {}
        if self.role in ("tool", "function"):
            return (
                f"messages[{i}].role",
                f"'{self.role}' messages are not supported: this server has no tools",
            )
        for key in ("tool_calls", "function_call", "audio"):
            if extra.get(key):
                return f"messages[{i}].{key}", f"'{key}' is not supported by this model"
        if self.content is None:
            return (
                f"messages[{i}].content",
                "Invalid value for 'content': expected a string or an array of text parts, got null.",
            )
        if isinstance(self.content, list):
            for j, part in enumerate(self.content):
                kind = part.get("type")
                if kind != "text" or not isinstance(part.get("text"), str):
                    return f"messages[{i}].content[{j}]", (
                        f"content part type {kind!r} is not supported: this model reads text parts only"
                    )
        return None


# Sampling and output controls of other servers (vLLM, TGI, llama.cpp, transformers' ``generate``) and of OpenAI's
# legacy completions API: not OpenAI chat-completions fields. Each would change the answer; this server's decoder
# samples with temperature, top_p and a seed only, so each is refused, with a message that says so.
OTHER_SERVERS_SAMPLING = frozenset(
    {
        "top_k",
        "min_p",
        "typical_p",
        "repetition_penalty",
        "length_penalty",
        "no_repeat_ngram_size",
        "best_of",
        "echo",
        "suffix",
        "use_beam_search",
        "num_beams",
        "min_tokens",
        "ignore_eos",
        "stop_token_ids",
        "skip_special_tokens",
        "include_stop_str_in_output",
        "guided_json",
        "guided_regex",
        "guided_choice",
        "guided_grammar",
        "grammar",
        "mirostat",
        "do_sample",
        "max_new_tokens",
    }
)


def unknown_parameter(name: str) -> str:
    """The 400's message for a field outside OpenAI's chat-completions API (OpenAI's own wording first)."""
    if name in OTHER_SERVERS_SAMPLING:
        return (
            f"Unknown parameter: '{name}'. It is not an OpenAI chat-completions parameter, and this server "
            "cannot honour it (it samples with temperature, top_p and seed only); it is refused rather than "
            "ignored, as the answer would not be the one asked for."
        )
    return f"Unknown parameter: '{name}'."


class ChatCompletionRequest(BaseModel):
    model: StrictStr
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1)
    temperature: StrictNumber | None = Field(
        default=None, ge=0.0, le=2.0
    )  # None: OpenAI's 1; send 0 for greedy
    top_p: StrictNumber | None = Field(default=None, gt=0.0, le=1.0)
    n: StrictInt | None = Field(default=None, ge=1, le=8)
    stop: StrictStr | list[StrictStr] | None = None
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = Field(default=None, ge=0, le=20)
    seed: StrictInt | None = None
    stream: StrictBool | None = None
    stream_options: dict[str, Any] | None = None
    # accepted only where they change nothing (refused otherwise, see ``unsupported``)
    tools: list[Any] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    functions: list[Any] | None = None
    function_call: StrictStr | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    logit_bias: dict[str, Any] | None = None
    presence_penalty: StrictNumber | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: StrictNumber | None = Field(default=None, ge=-2.0, le=2.0)
    modalities: list[StrictStr] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None
    reasoning_effort: StrictStr | None = None
    verbosity: StrictStr | None = None
    moderation: dict[str, Any] | None = None
    # OpenAI's fields that change nothing here: accepted
    user: StrictStr | None = None
    metadata: dict[str, Any] | None = None
    store: StrictBool | None = None
    parallel_tool_calls: StrictBool | None = None
    service_tier: StrictStr | None = None
    prompt_cache_key: StrictStr | None = None
    prompt_cache_retention: StrictStr | None = None
    prompt_cache_options: dict[str, Any] | None = None
    safety_identifier: StrictStr | None = None

    model_config = {"extra": "allow"}  # kept, so that ``unsupported`` can name an unknown field

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list) and len(v) > 4:
            raise ValueError("at most 4 stop sequences")
        return v

    def stops(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    @property
    def choices(self) -> int:
        return self.n or 1

    @property
    def sampling_temperature(self) -> float:
        return 1.0 if self.temperature is None else float(self.temperature)

    @property
    def sampling_top_p(self) -> float:
        return 1.0 if self.top_p is None else float(self.top_p)

    def unsupported(self, routed: bool = False) -> tuple[str, str] | None:
        """(param, why) of the first thing asked that the server cannot honour (``routed``: through the router,
        which answers one choice without log-probabilities), else None."""
        # OpenAI refuses a field it does not know, and so does this server
        unknown = next(iter(self.model_extra or {}), None)
        if unknown is not None:
            return unknown, unknown_parameter(unknown)
        if self.tools:
            return "tools", "tools are not supported by this model"
        if self.functions:
            return "functions", "functions are not supported by this model"
        if self.tool_choice not in (None, "none", "auto"):
            return "tool_choice", "tool_choice is not supported by this model (it has no tools)"
        if self.function_call not in (None, "none", "auto"):
            return "function_call", "function_call is not supported by this model"
        if self.response_format and self.response_format.get("type", "text") != "text":
            return "response_format", (
                f"response_format {self.response_format.get('type')!r} is not supported: "
                "this model answers plain text only"
            )
        if self.logit_bias:
            return "logit_bias", "logit_bias is not supported by this model"
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name):
                return name, f"{name} is not supported by this model (only 0 is)"
        if self.modalities and set(self.modalities) != {"text"}:
            return "modalities", "this model produces text only"
        for name in (
            "audio",
            "prediction",
            "web_search_options",
            "reasoning_effort",
            "verbosity",
            "moderation",
        ):
            if getattr(self, name) is not None:
                return name, f"{name} is not supported by this model"
        if self.top_logprobs is not None and not self.logprobs:
            return "top_logprobs", "logprobs must be true when top_logprobs is set"
        for i, m in enumerate(self.messages):
            refused = m.unsupported(i)
            if refused:
                return refused
        if routed:
            if self.choices > 1:
                return "n", "the router answers one choice per request (n must be 1)"
            if self.logprobs:
                return "logprobs", "the router does not return log-probabilities"
        return None


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob]


class ResponseMessage(BaseModel):
    role: str = "assistant"
    content: str


class Choice(BaseModel):
    index: int
    message: ResponseMessage
    finish_reason: str
    logprobs: ChoiceLogprobs | None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str = Field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    object: str = "chat.completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None
    # bashgym's own: which model answered a routed request and why (clients ignore unknown fields)
    bashgym_route: dict[str, Any] | None = None


class ModelCard(BaseModel):
    id: str
    object: str = "model"
    created: int = 0
    owned_by: str = "bashgym"


class ModelList(BaseModel):
    object: str = "list"
    data: list[ModelCard]


class ErrorBody(BaseModel):
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorBody
