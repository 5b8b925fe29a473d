"""The model behind ``bashgym serve`` and the router's in-process student: a base model with its LoRA adapter
merged, generating for a batch of chat requests at once, with per-token log-probabilities.

One ``generate`` call serves every request of a batch that shares the decoding settings (greedy, or one
temperature/top-p/seed); each request then keeps its own ``max_tokens`` and ``stop`` strings (the batch decodes
to the largest budget and every reply is cut at its own limit: under greedy decoding a token never depends on the
ones after it, so the cut reply is exactly the reply a lone request gets). Log-probabilities are those of the
model's own distribution (temperature 1, before any sampling transform), which is what a confidence measure wants.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.rollout.operators import CHATML_TEMPLATE, left_pad, load_merged


class ContextTooLong(ValueError):
    """The prompt plus the requested completion does not fit the model's context."""


class GenerationRequest(BaseModel):
    """One chat to complete (the engine's view of an OpenAI request)."""

    messages: list[dict[str, str]]
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: list[str] = Field(default_factory=list)
    logprobs: bool = False
    top_logprobs: int = 0
    seed: int | None = None
    trim: bool = False  # drop the oldest turns to fit the context (the router's student) instead of refusing


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprob(BaseModel):
    """OpenAI's ``choices[].logprobs.content[]`` item."""

    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class Generation(BaseModel):
    """One reply: the text, why it ended (``stop`` | ``length``), token counts, and log-probabilities if asked;
    or the ``error`` that replaced it (``error_code`` as OpenAI spells it, e.g. ``context_length_exceeded``)."""

    text: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[TokenLogprob] | None = None
    error: str | None = None
    error_code: str | None = None


class ChatEngine:
    """A causal LM (``save_pretrained`` folder or hub id) with an optional peft adapter merged into its weights.

    ``generate`` is thread-safe (one batch at a time: the torch module is shared); the batching queue in
    ``serving.app`` is what collects concurrent requests into one call.
    """

    def __init__(self, model_dir: str | Path | None = None, adapter_dir: str | Path | None = None,
                 name: str = "bashgym-operator", max_context_tokens: int = 2048, max_batch: int = 16,
                 model: Any = None, tokenizer: Any = None, source: str = "") -> None:
        if model is None and model_dir is None:
            raise ValueError("ChatEngine needs model_dir or a loaded model + tokenizer")
        self.model_dir = str(model_dir) if model_dir else None
        self.adapter_dir = str(adapter_dir) if adapter_dir else None
        self.name = name
        self.max_context_tokens = max_context_tokens
        self.max_batch = max(1, max_batch)
        self.source = source or (self.model_dir or "") + (f" + {self.adapter_dir}" if self.adapter_dir else "")
        self._model = model
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def load(self) -> ChatEngine:
        """Load (once) and return self; the server calls this before it listens, so the first request is fast."""
        with self._lock:
            self._load()
        return self

    def _load(self) -> tuple[Any, Any]:
        if self._model is None or self._tokenizer is None:
            model, tokenizer = load_merged(self.model_dir, self.adapter_dir)  # as LocalModelOperator does
            import torch

            if torch.cuda.is_available():  # a GPU when there is one (untested here: the build machines are CPU-only)
                model = model.to("cuda")
            model.eval()
            self._model, self._tokenizer = model, tokenizer
        if not getattr(self._tokenizer, "chat_template", None):
            self._tokenizer.chat_template = CHATML_TEMPLATE
        limit = getattr(self._model.config, "max_position_embeddings", None)
        if isinstance(limit, int) and limit > 0:
            self.max_context_tokens = min(self.max_context_tokens, limit)
        return self._model, self._tokenizer

    def stop_ids(self) -> list[int]:
        tok = self._tokenizer
        return sorted(t for t in {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
                      if isinstance(t, int) and t >= 0 and t != tok.unk_token_id)

    def encode(self, messages: list[dict[str, str]], max_tokens: int, trim: bool = False) -> list[int]:
        """The prompt's token ids; ``ContextTooLong`` unless ``trim`` (then the oldest turns after system + task
        go first, as ``LocalModelOperator`` does)."""
        _, tokenizer = self._load()
        keep = list(messages)
        budget = self.max_context_tokens - max_tokens
        if budget <= 0:
            raise ContextTooLong(f"max_tokens {max_tokens} leaves no room for a prompt in this model's "
                                 f"{self.max_context_tokens}-token context")
        while True:
            ids = tokenizer.apply_chat_template(keep, add_generation_prompt=True, tokenize=True,
                                                return_dict=True)["input_ids"]
            ids = list(ids[0] if ids and isinstance(ids[0], list) else ids)
            if len(ids) <= budget:
                return ids
            if not trim:
                raise ContextTooLong(f"This model's maximum context length is {self.max_context_tokens} tokens. "
                                     f"However, you requested {len(ids) + max_tokens} tokens ({len(ids)} in the "
                                     f"messages, {max_tokens} in the completion).")
            if len(keep) <= 3:
                return ids[-budget:]
            del keep[2:4]

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """One ``Generation`` per request, in order; a request's own failure (e.g. too long) is in its result."""
        with self._lock:
            model, tokenizer = self._load()
            out: list[Generation | None] = [None] * len(requests)
            prompts: dict[int, list[int]] = {}
            for i, req in enumerate(requests):
                try:
                    prompts[i] = self.encode(req.messages, req.max_tokens, trim=req.trim)
                except ContextTooLong as exc:
                    out[i] = Generation(error=str(exc), error_code="context_length_exceeded", finish_reason="error")
                except Exception as exc:  # noqa: BLE001 - a bad chat (template error) fails only itself
                    out[i] = Generation(error=f"{type(exc).__name__}: {exc}", error_code="invalid_messages",
                                        finish_reason="error")
            groups: dict[tuple, list[int]] = {}
            for i in prompts:
                req = requests[i]
                # a seeded sample is generated alone, so the same seed gives the same reply whatever else is queued
                key = ((False, 0.0, 1.0, None, -1) if req.temperature <= 0
                       else (True, req.temperature, req.top_p, req.seed, -1 if req.seed is None else i))
                groups.setdefault(key, []).append(i)
            for key, members in groups.items():
                members.sort(key=lambda i: len(prompts[i]))  # similar lengths together: less padding
                for start in range(0, len(members), self.max_batch):
                    chunk = members[start:start + self.max_batch]
                    try:
                        got = self._generate(model, tokenizer, key, [prompts[i] for i in chunk],
                                             [requests[i] for i in chunk])
                    except Exception as exc:  # noqa: BLE001 - reported per request, the server stays up
                        got = [Generation(error=f"generation failed: {type(exc).__name__}: {exc}",
                                          error_code="generation_failed", finish_reason="error") for _ in chunk]
                    for i, gen in zip(chunk, got, strict=True):
                        out[i] = gen
            return [g if g is not None else Generation(error="not generated", finish_reason="error") for g in out]

    def _generate(self, model: Any, tokenizer: Any, key: tuple, prompts: list[list[int]],
                  reqs: list[GenerationRequest]) -> list[Generation]:
        import torch

        do_sample, temperature, top_p, seed, _ = key
        stop = self.stop_ids()
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stop[0] if stop else 0)
        input_ids, attention = left_pad(prompts, pad)
        width = input_ids.shape[1]
        want_logprobs = any(r.logprobs for r in reqs)
        kwargs: dict[str, Any] = {"max_new_tokens": max(r.max_tokens for r in reqs), "eos_token_id": stop or None,
                                  "pad_token_id": pad, "do_sample": do_sample, "return_dict_in_generate": True,
                                  "output_logits": want_logprobs}
        if do_sample:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
            if seed is not None:
                torch.manual_seed(seed)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.no_grad():
            result = model.generate(input_ids=input_ids.to(model.device), attention_mask=attention.to(model.device),
                                    **kwargs)
        seqs = result.sequences[:, width:]
        logits = result.logits if want_logprobs else None
        return [self._finish(tokenizer, stop, seqs[row].tolist(), logits, row, reqs[row], len(prompts[row]))
                for row in range(len(prompts))]

    def _finish(self, tokenizer: Any, stop: list[int], new: list[int], logits: Any, row: int,
                req: GenerationRequest, prompt_len: int) -> Generation:
        """Cut one row at its end-of-turn token, its own ``max_tokens`` or its first stop string."""
        import torch

        ended = next((i for i, t in enumerate(new[:req.max_tokens]) if t in stop), None)
        body = new[:ended] if ended is not None else new[:req.max_tokens]
        finish = "stop" if ended is not None else "length"
        text = tokenizer.decode(body, skip_special_tokens=True)
        if req.stop and any(s in text for s in req.stop if s):
            # the shortest prefix whose text holds a stop string; the text ends before it
            for k in range(1, len(body) + 1):
                partial = tokenizer.decode(body[:k], skip_special_tokens=True)
                hits = [partial.index(s) for s in req.stop if s and s in partial]
                if hits:
                    body, text, finish = body[:k], partial[:min(hits)], "stop"
                    break
        lps = None
        if req.logprobs and logits is not None:
            lps = []
            for step, tid in enumerate(body):
                dist = torch.log_softmax(logits[step][row].float(), dim=-1)
                top = []
                if req.top_logprobs:
                    values, ids = torch.topk(dist, min(req.top_logprobs, dist.shape[-1]))
                    for v, t in zip(values.tolist(), ids.tolist(), strict=True):
                        s = tokenizer.decode([t])
                        top.append(TopLogprob(token=s, logprob=float(v), bytes=list(s.encode("utf-8"))))
                s = tokenizer.decode([tid])
                lps.append(TokenLogprob(token=s, logprob=float(dist[tid]), bytes=list(s.encode("utf-8")),
                                        top_logprobs=top))
        return Generation(text=text, finish_reason=finish,
                          prompt_tokens=prompt_len, completion_tokens=len(body), logprobs=lps)


def engine_from_registry(model_uri: str, base: str | None = None, name: str = "bashgym-operator",
                         settings: Any = None, **kwargs: Any) -> ChatEngine:
    """A registered adapter (``models:/bashgym-operator@champion``, ``models:/name/3``) on its base: the adapter
    is downloaded from MLflow into the data folder; the base is ``base``, else the version's ``base_model`` tag
    (what it was trained on), else the configured base model."""
    from bashgym_assets.config import get_settings, redact_uri
    from bashgym_assets.lake import Lake
    from bashgym_assets.training import registry

    settings = settings or get_settings()
    c = registry.client(settings)
    from mlflow.exceptions import MlflowException

    try:
        model_name, version = registry.model_version(c, model_uri)
    except MlflowException as exc:
        raise LookupError(f"{model_uri} is not in the registry at {redact_uri(settings.mlflow_tracking_uri)} "
                          f"({exc.message}): no champion until an evaluation promotes one (make demo; bashgym "
                          "promote --model N), or serve a folder with --adapter") from exc
    folder = Lake(settings).artifact_dir("downloads", f"{model_name}-v{version.version}")
    adapter = registry.download_adapter(f"models:/{model_name}/{version.version}", folder, settings)
    if not base:
        base = (version.tags or {}).get("base_model") or ""
        if not base or (base.startswith(("/", ".")) and not Path(base).exists()):
            from bashgym_assets.training import base_model as bm

            base = bm.resolve_base_model(settings, prepare=True)
    return ChatEngine(base, adapter, name=name,
                      source=f"{model_uri} (version {version.version}) on {base}", **kwargs)
