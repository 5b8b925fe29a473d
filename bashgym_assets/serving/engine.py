"""The model behind ``bashgym serve`` and the router's in-process student: a base model with its LoRA adapter
merged, generating for many chat requests at once, with per-token log-probabilities.

Requests are decoded by the evaluator's continuous-batching decoder (``inference.continuous.ContinuousDecoder``,
with its KV reuse across requests that share a prefix): each request is a row that joins the running batch at the
next decode step and leaves it when its reply ends (its end-of-turn token, its own ``max_tokens``, a stop string,
or a cancellation), so a long reply never holds a short one back. ``Decoding`` follows one row: it turns the
row's tokens into text as they come (the deltas a stream sends, holding back a partial UTF-8 character or the
start of a stop string), cuts the reply at a stop string and converts the log-probabilities. Greedy rows take the
argmax, as a lone ``generate`` does; sampled rows draw from their own seeded generator, so a seed gives the same
reply whatever else is in the batch. Log-probabilities are those of the model's own distribution (temperature 1,
before any sampling transform), which is what a confidence measure wants. Models the decoder does not support
(``inference.kv_decode.unsupported_reason``) or ``BASHGYM_KV_CACHE=0`` fall back to one transformers
``generate`` per batch (``_generate_batched``).

Message content is text: the prompt is tokenized with the chat template's own markers as special tokens and
everything a client wrote with special-token parsing off (``encode_chat``), so ``<|im_start|>`` typed into a
message is a few ordinary tokens, not a turn marker a client could inject.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.rollout.operators import CHATML_TEMPLATE, left_pad, load_merged

# Columns for new tokens the decoder's buffers keep free (rows with a larger budget make it grow them).
DECODE_ROOM = 256
_MARK = re.compile(
    "\ue000(\\d+)\ue001"
)  # a message's place in the rendered template (private-use characters)


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
    prompt: list[int] | None = (
        None  # the messages' token ids when the caller encoded them already (the server)
    )


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
    """One reply: the text, why it ended (``stop`` | ``length``; ``cancelled`` when its client went away), token
    counts, and log-probabilities if asked; or the ``error`` that replaced it (``error_code`` as OpenAI spells it,
    e.g. ``context_length_exceeded``)."""

    text: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[TokenLogprob] | None = None
    error: str | None = None
    error_code: str | None = None


@dataclass
class Delta:
    """What a stream sends next for one request: new text, the log-probabilities of the tokens it completes, and
    at the end the finish reason and the whole ``Generation`` (or its error)."""

    text: str = ""
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    generation: Generation | None = None


def _special_strings(tokenizer: Any) -> list[str]:
    found = set(getattr(tokenizer, "all_special_tokens", []) or [])
    for tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(tok, "special", False):
            found.add(str(tok.content))
    return sorted((t for t in found if t), key=len, reverse=True)


def encode_chat(
    tokenizer: Any, messages: Sequence[dict[str, str]], add_generation_prompt: bool = True
) -> list[int]:
    """The chat's token ids with its content read as text: the template is rendered with a placeholder for each
    message's content; the template's own special tokens (outside the placeholders) become their ids, and every
    run of text between them (template text and content together, as a plain tokenizer would see it) is tokenized
    with ``split_special_tokens``. Without special-token text in the content the ids are exactly the template's
    own tokenization; with it, ``<|im_start|>`` in a message is text, never a turn marker."""
    msgs = [dict(m) for m in messages]
    marked = [{**m, "content": f"\ue000{i}\ue001"} for i, m in enumerate(msgs)]
    rendered = tokenizer.apply_chat_template(
        marked, add_generation_prompt=add_generation_prompt, tokenize=False
    )
    specials = _special_strings(tokenizer)
    if any(rendered.count(f"\ue000{i}\ue001") != 1 for i in range(len(msgs))):
        # a template that drops, repeats or rewrites content: its own tokenization, unless that would parse
        # special tokens a client wrote
        if any(sp in str(m.get("content") or "") for m in msgs for sp in specials):
            raise ValueError("this chat template cannot keep special-token text in messages as text")
        template_ids = tokenizer.apply_chat_template(
            msgs, add_generation_prompt=add_generation_prompt, tokenize=True, return_dict=True
        )["input_ids"]
        return list(template_ids[0] if template_ids and isinstance(template_ids[0], list) else template_ids)
    pattern = re.compile("|".join(re.escape(sp) for sp in specials)) if specials else None
    ids: list[int] = []
    run: list[str] = []

    def flush() -> None:
        text = "".join(run)
        run.clear()
        if text:
            ids.extend(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    for k, piece in enumerate(_MARK.split(rendered)):
        if k % 2:  # a placeholder: the message's content, text whatever it holds
            run.append(str(msgs[int(piece)].get("content") or ""))
            continue
        pos = 0
        for m in pattern.finditer(piece) if pattern else ():
            run.append(piece[pos : m.start()])
            flush()
            ids.append(tokenizer.convert_tokens_to_ids(m.group()))
            pos = m.end()
        run.append(piece[pos:])
    flush()
    return ids


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many characters at the end of ``text`` could be the start of a stop string (not sent yet)."""
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), hold, -1):
            if text.endswith(s[:k]):
                hold = k
                break
    return hold


class Decoding:
    """One request on a ``ContinuousDecoder`` row: ``advance`` after each decoder step reads the row's new tokens,
    ends the reply at the end-of-turn token, ``max_tokens`` or a stop string, and (``stream``) returns the
    ``Delta`` to send; ``result`` is the finished ``Generation``."""

    def __init__(
        self, engine: ChatEngine, request: GenerationRequest, prompt: list[int], stream: bool = False
    ):
        self.engine = engine
        self.request = request
        self.prompt = prompt
        self.stream = stream
        self.stops = [s for s in request.stop if s]
        self.track_text = stream or bool(self.stops)
        self.stop_ids = set(engine.stop_ids())
        self.row: Any = None
        self.key: Any = None
        self.seen = 0  # row tokens read so far
        self.body: list[int] = []  # the reply's tokens (no end-of-turn token)
        self.ends: list[int] = []  # per body token: the length of the text up to and including it
        self._text = ""
        self.sent = 0  # characters of text sent (streams)
        self.lp_sent = 0  # tokens whose log-probabilities were sent
        self.finish: str | None = None
        self.cut = False  # ended by a stop string: the decoder has not ended the row itself

    @property
    def done(self) -> bool:
        return self.finish is not None

    @property
    def text(self) -> str:
        if not self.track_text:
            return self.engine.decode(self.body)
        return self._text

    def submit(self, decoder: Any, key: Any) -> Decoding:
        req = self.request
        self.key = key
        self.row = decoder.submit(
            key,
            self.prompt,
            req.max_tokens,
            temperature=req.temperature,
            top_p=req.top_p,
            seed=req.seed,
            top_logprobs=(req.top_logprobs or 0) if req.logprobs else None,
        )
        return self

    def advance(self, ended: bool = False) -> Delta | None:
        """Read the row's new tokens (``ended``: the decoder has handed the row back)."""
        gen = self.row.gen
        while self.finish is None and self.seen < len(gen):
            token = gen[self.seen]
            self.seen += 1
            if token in self.stop_ids:
                self.finish = "stop"
                break
            self.body.append(token)
            if self.track_text:
                text = self.engine.decode(self.body)
                hits = [text.find(s) for s in self.stops if s in text]
                if hits:
                    self._text, self.finish, self.cut = text[: min(hits)], "stop", True
                    self.ends.append(len(self._text))
                    break
                self._text = text
                self.ends.append(len(text.rstrip("\ufffd")))
            if self.seen >= self.request.max_tokens:
                self.finish = "length"
        if ended and self.finish is None:
            self.finish = "length"
        if not self.stream:
            return None
        if self.finish is None:
            safe = len(self._text.rstrip("\ufffd"))
            safe = max(self.sent, safe - _held_back(self._text[:safe], self.stops))
        else:
            safe = len(self._text)
        delta = Delta(text=self._text[self.sent : safe])
        self.sent = max(self.sent, safe)
        upto = len(self.body) if self.finish else self.lp_sent
        if not self.finish:
            while upto < len(self.body) and self.ends[upto] <= self.sent:
                upto += 1
        if self.request.logprobs and upto > self.lp_sent:
            delta.logprobs = self._logprobs(self.lp_sent, upto)
        self.lp_sent = upto
        if self.finish:
            delta.finish_reason, delta.generation = self.finish, self.result()
        return delta if delta.text or delta.logprobs or delta.finish_reason else None

    def _logprobs(self, lo: int, hi: int) -> list[TokenLogprob]:
        out = []
        for (lp, top_ids, top_lps), tid in zip(self.row.logprobs[lo:hi], self.body[lo:hi], strict=True):
            top = []
            for t, v in zip(top_ids, top_lps, strict=True):
                s = self.engine.decode([t])
                top.append(TopLogprob(token=s, logprob=v, bytes=list(s.encode("utf-8"))))
            s = self.engine.decode([tid])
            out.append(TokenLogprob(token=s, logprob=lp, bytes=list(s.encode("utf-8")), top_logprobs=top))
        return out

    def result(self) -> Generation:
        return Generation(
            text=self.text,
            finish_reason=self.finish or "length",
            prompt_tokens=len(self.prompt),
            completion_tokens=len(self.body),
            logprobs=self._logprobs(0, len(self.body)) if self.request.logprobs else None,
        )


class ChatEngine:
    """A causal LM (``save_pretrained`` folder or hub id) with an optional peft adapter merged into its weights.

    ``generate`` is thread-safe (one call at a time: the torch module and the KV store are shared); the serving
    scheduler (``serving.batching.Batcher``) steps its own long-lived decoder under the same ``lock``.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        adapter_dir: str | Path | None = None,
        name: str = "bashgym-operator",
        max_context_tokens: int = 2048,
        max_batch: int = 16,
        model: Any = None,
        tokenizer: Any = None,
        source: str = "",
    ) -> None:
        if not model_dir and (model is None or tokenizer is None):
            # load() reads from model_dir whatever is not given: with neither, it has nothing to load
            raise ValueError("ChatEngine needs model_dir or a loaded model + tokenizer")
        self.model_dir = str(model_dir) if model_dir else None
        self.adapter_dir = str(adapter_dir) if adapter_dir else None
        self.name = name
        self.max_context_tokens = max_context_tokens
        self.max_batch = max(1, max_batch)
        self.source = source or (self.model_dir or "") + (
            f" + {self.adapter_dir}" if self.adapter_dir else ""
        )
        self._model = model
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        self._tok_lock = threading.Lock()  # split_special_tokens flips shared state of a fast tokenizer
        self._kv: Any = None
        self.fallback: str | None = None  # why the continuous decoder is not used, if it is not

    @property
    def lock(self) -> threading.Lock:
        """Held around every forward pass (``generate``, a scheduler's decoder step)."""
        return self._lock

    def load(self) -> ChatEngine:
        """Load (once) and return self; the server calls this before it listens, so the first request is fast."""
        with self._lock:
            self._load()
        return self

    def _load(self) -> tuple[Any, Any]:
        if self._model is None or self._tokenizer is None:
            if self.model_dir is None:  # __init__ refuses an engine without both and without a folder
                raise ValueError("ChatEngine needs model_dir or a loaded model + tokenizer")
            model, tokenizer = load_merged(self.model_dir, self.adapter_dir)  # as LocalModelOperator does
            import torch

            if torch.cuda.is_available():  # a GPU when there is one
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
        """Where a reply ends: the end-of-turn token training taught (``inference.turns``) and eos."""
        from bashgym_assets.inference.turns import stop_token_ids

        return stop_token_ids(self._tokenizer)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=True)

    def encode(self, messages: list[dict[str, str]], max_tokens: int, trim: bool = False) -> list[int]:
        """The prompt's token ids (``encode_chat``: content is text); ``ContextTooLong`` unless ``trim`` (then the
        oldest turns after system + task go first, as ``LocalModelOperator`` does)."""
        _, tokenizer = self._load()
        keep = list(messages)
        budget = self.max_context_tokens - max_tokens
        if budget <= 0:
            raise ContextTooLong(
                f"max_tokens {max_tokens} leaves no room for a prompt in this model's "
                f"{self.max_context_tokens}-token context"
            )
        while True:
            with self._tok_lock:
                ids = encode_chat(tokenizer, keep)
            if len(ids) <= budget:
                return ids
            if not trim:
                raise ContextTooLong(
                    f"This model's maximum context length is {self.max_context_tokens} tokens. "
                    f"However, you requested {len(ids) + max_tokens} tokens ({len(ids)} in the "
                    f"messages, {max_tokens} in the completion). Please reduce the length of "
                    "the messages or completion."
                )
            if len(keep) <= 3:
                return ids[-budget:]
            del keep[2:4]

    def prompt_of(self, req: GenerationRequest) -> Generation | list[int]:
        """The request's prompt ids, or the ``Generation`` carrying why it cannot be generated."""
        if req.prompt is not None:
            return list(req.prompt)
        try:
            return self.encode(req.messages, req.max_tokens, trim=req.trim)
        except ContextTooLong as exc:
            return Generation(error=str(exc), error_code="context_length_exceeded", finish_reason="error")
        except Exception as exc:  # noqa: BLE001 - a bad chat (template error) fails only itself
            return Generation(
                error=f"{type(exc).__name__}: {exc}", error_code="invalid_messages", finish_reason="error"
            )

    def continuous_reason(self) -> str | None:
        """Why requests cannot go through the continuous decoder (None when they can)."""
        from bashgym_assets.inference.kv_decode import kv_cache_enabled, unsupported_reason

        if self.fallback:
            return self.fallback
        if not kv_cache_enabled():
            return "BASHGYM_KV_CACHE is off"
        model, _ = self._load()
        return unsupported_reason(model)

    def decoder(self, max_rows: int | None = None, speculate: bool = True) -> Any:
        """A ``ContinuousDecoder`` over this model; every decoder shares the engine's KV store, so step it only
        while holding ``lock``."""
        from bashgym_assets.inference.continuous import ContinuousDecoder
        from bashgym_assets.inference.kv_decode import KVGenerator

        model, tokenizer = self._load()
        if self._kv is None or self._kv.model is not model:
            stop = self.stop_ids()
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stop[0] if stop else 0)
            self._kv = KVGenerator(model, stop, pad, DECODE_ROOM)
        return ContinuousDecoder(self._kv, max_rows=max_rows or self.max_batch, speculate=speculate)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """One ``Generation`` per request, in order; a request's own failure (e.g. too long) is in its result."""
        with self._lock:
            self._load()
            if self.continuous_reason() is None:
                try:
                    return self._generate_continuous(requests)
                except Exception as exc:  # noqa: BLE001 - the batched generate path still works
                    self.fallback = f"continuous decoding failed: {type(exc).__name__}: {exc}"
            return self._generate_batched(requests)

    def _generate_continuous(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        decoder = self.decoder()
        out: list[Generation | None] = [None] * len(requests)
        live: dict[int, Decoding] = {}
        for i, req in enumerate(requests):
            prompt = self.prompt_of(req)
            if isinstance(prompt, Generation):
                out[i] = prompt
            else:
                live[i] = Decoding(self, req, prompt).submit(decoder, i)
        while live:
            ended = {key for key, _, _ in decoder.step()}
            for i, d in list(live.items()):
                d.advance(ended=i in ended)
                if d.done:
                    if d.cut:
                        decoder.cancel(i)
                    out[i] = d.result()
                    del live[i]
        return [g if g is not None else Generation(error="not generated", finish_reason="error") for g in out]

    def _generate_batched(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """The fallback: one transformers ``generate`` per group of requests that share the decoding settings
        (each request then cut at its own ``max_tokens`` and stop strings)."""
        model, tokenizer = self._load()
        out: list[Generation | None] = [None] * len(requests)
        prompts: dict[int, list[int]] = {}
        for i, req in enumerate(requests):
            prompt = self.prompt_of(req)
            if isinstance(prompt, Generation):
                out[i] = prompt
            else:
                prompts[i] = prompt
        groups: dict[tuple, list[int]] = {}
        for i in prompts:
            req = requests[i]
            # a seeded sample is generated alone, so the same seed gives the same reply whatever else is queued
            key = (
                (False, 0.0, 1.0, None, -1)
                if req.temperature <= 0
                else (True, req.temperature, req.top_p, req.seed, -1 if req.seed is None else i)
            )
            groups.setdefault(key, []).append(i)
        for key, members in groups.items():
            members.sort(key=lambda i: len(prompts[i]))  # similar lengths together: less padding
            for start in range(0, len(members), self.max_batch):
                chunk = members[start : start + self.max_batch]
                try:
                    got = self._generate(
                        model, tokenizer, key, [prompts[i] for i in chunk], [requests[i] for i in chunk]
                    )
                except Exception as exc:  # noqa: BLE001 - reported per request, the server stays up
                    got = [
                        Generation(
                            error=f"generation failed: {type(exc).__name__}: {exc}",
                            error_code="generation_failed",
                            finish_reason="error",
                        )
                        for _ in chunk
                    ]
                for i, gen in zip(chunk, got, strict=True):
                    out[i] = gen
        return [g if g is not None else Generation(error="not generated", finish_reason="error") for g in out]

    def _generate(
        self, model: Any, tokenizer: Any, key: tuple, prompts: list[list[int]], reqs: list[GenerationRequest]
    ) -> list[Generation]:
        import torch

        do_sample, temperature, top_p, seed, _ = key
        stop = self.stop_ids()
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stop[0] if stop else 0)
        input_ids, attention = left_pad(prompts, pad)
        width = input_ids.shape[1]
        want_logprobs = any(r.logprobs for r in reqs)
        kwargs: dict[str, Any] = {
            "max_new_tokens": max(r.max_tokens for r in reqs),
            "eos_token_id": stop or None,
            "pad_token_id": pad,
            "do_sample": do_sample,
            "return_dict_in_generate": True,
            "output_logits": want_logprobs,
        }
        if do_sample:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
            if seed is not None:
                torch.manual_seed(seed)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.no_grad():
            result = model.generate(
                input_ids=input_ids.to(model.device), attention_mask=attention.to(model.device), **kwargs
            )
        seqs = result.sequences[:, width:]
        logits = result.logits if want_logprobs else None
        return [
            self._finish(tokenizer, stop, seqs[row].tolist(), logits, row, reqs[row], len(prompts[row]))
            for row in range(len(prompts))
        ]

    def _finish(
        self,
        tokenizer: Any,
        stop: list[int],
        new: list[int],
        logits: Any,
        row: int,
        req: GenerationRequest,
        prompt_len: int,
    ) -> Generation:
        """Cut one row at its end-of-turn token, its own ``max_tokens`` or its first stop string."""
        import torch

        ended = next((i for i, t in enumerate(new[: req.max_tokens]) if t in stop), None)
        body = new[:ended] if ended is not None else new[: req.max_tokens]
        finish = "stop" if ended is not None else "length"
        text = tokenizer.decode(body, skip_special_tokens=True)
        if req.stop and any(s in text for s in req.stop if s):
            # the shortest prefix whose text holds a stop string; the text ends before it
            for k in range(1, len(body) + 1):
                partial = tokenizer.decode(body[:k], skip_special_tokens=True)
                hits = [partial.index(s) for s in req.stop if s and s in partial]
                if hits:
                    body, text, finish = body[:k], partial[: min(hits)], "stop"
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
                lps.append(
                    TokenLogprob(
                        token=s, logprob=float(dist[tid]), bytes=list(s.encode("utf-8")), top_logprobs=top
                    )
                )
        return Generation(
            text=text,
            finish_reason=finish,
            prompt_tokens=prompt_len,
            completion_tokens=len(body),
            logprobs=lps,
        )


def engine_from_registry(
    model_uri: str,
    base: str | None = None,
    name: str = "bashgym-operator",
    settings: Any = None,
    **kwargs: Any,
) -> ChatEngine:
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
        raise LookupError(
            f"{model_uri} is not in the registry at {redact_uri(settings.mlflow_tracking_uri)} "
            f"({exc.message}): no champion until an evaluation promotes one (make demo; bashgym "
            "promote --model N), or serve a folder with --adapter"
        ) from exc
    folder = Lake(settings).artifact_dir("downloads", f"{model_name}-v{version.version}")
    adapter = registry.download_adapter(f"models:/{model_name}/{version.version}", folder, settings)
    if not base:
        base = (version.tags or {}).get("base_model") or ""
        if not base or (base.startswith(("/", ".")) and not Path(base).exists()):
            from bashgym_assets.training import base_model as bm

            base = bm.resolve_base_model(settings, prepare=True)
    return ChatEngine(
        base, adapter, name=name, source=f"{model_uri} (version {version.version}) on {base}", **kwargs
    )
