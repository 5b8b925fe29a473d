"""Operators behind one interface: given the conversation so far, type the next line into the terminal.

Three kinds: the offline ``reference`` operator (replays a bundle's reference solution, one command per turn, then
``exit``), a teacher model through litellm (any provider string), and a local transformers model (a base model,
optionally with a peft LoRA adapter), decoded greedily with a ChatML template. The episode loop in
``rollout.episode`` does not care which one it drives. ``GuardedOperator`` wraps any of them so that a reply the
guardrails block (``guardrails.classify_command``) is re-sampled or replaced by a refusal before a shell sees it.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.guardrails.commands import classify_command
from bashgym_assets.guardrails.models import BLOCK, REFUSAL_PREFIX, Finding, Verdict
from bashgym_assets.llm import LLMError, chat_completion
from bashgym_assets.rollout.transcript import EXIT_COMMAND, Message

# ChatML, as SmolLM2-Instruct uses it; applied when a tokenizer comes without a chat template.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
    " + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class OperatorError(RuntimeError):
    """The operator could not produce a reply (API error, timeout, model failure): the episode ends unterminated."""


class Reply(BaseModel):
    """One reply of a batch: the text, or the error that replaced it; ``truncated`` when generation hit its token
    cap instead of ending the turn (a sign of babble the evaluator uses)."""

    text: str = ""
    error: str | None = None
    truncated: bool = False
    new_tokens: int = 0
    # the model time charged to this reply where a batch shares the model (a decoder's steps divided among its
    # rows: what an episode's time cap counts); None: not known, the caller counts the call's latency
    charged_s: float | None = None


class Operator(ABC):
    """Types one line per turn. ``scaffolded`` operators are shown the scaffold instruction (teachers are)."""

    name: str = "operator"
    scaffolded: bool = True

    def for_scenario(self, bundle: Any) -> Operator:
        """An operator bound to one scenario (the reference operator needs its bundle); most return self."""
        return self

    @abstractmethod
    def next_command(self, messages: list[Message]) -> str:
        """The raw reply to the conversation so far (a command, ``exit``, or whatever the model wrote)."""

    def replies(self, conversations: Sequence[list[Message]]) -> list[Reply]:
        """One reply per conversation (the evaluator's lockstep turn). Default: one call each; a model that can
        batch overrides this. Never raises for one conversation: its error is in its ``Reply``."""
        out = []
        for messages in conversations:
            try:
                out.append(Reply(text=self.next_command(messages)))
            except OperatorError as exc:
                out.append(Reply(error=str(exc)))
        return out

    def sampling(self) -> dict[str, Any]:
        """Decoding settings, recorded with evaluation results."""
        return {}


class ReferenceOperator(Operator):
    """Replays the bundle's reference solution as turns, then types ``exit``: the offline, certain operator."""

    name = "reference"
    scaffolded = False

    def __init__(self, reference: list[str] | None = None):
        self.reference = [c for c in (reference or []) if c.strip()]

    def for_scenario(self, bundle: Any) -> ReferenceOperator:
        return ReferenceOperator(list(bundle.reference))

    def next_command(self, messages: list[Message]) -> str:
        # Stateless: the number of assistant turns so far says where in the reference we are.
        done = sum(1 for m in messages if m.role == "assistant")
        return self.reference[done] if done < len(self.reference) else EXIT_COMMAND


class LiteLLMOperator(Operator):
    """A model behind litellm: ``anthropic/...``, ``ollama/...``, ``openai/<name>`` with ``api_base`` ..."""

    scaffolded = True

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
        timeout_s: float = 60.0,
        num_retries: int = 0,
    ):
        self.model = model
        self.name = f"litellm:{model}"
        self.api_base = api_base
        self.api_key = api_key
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.num_retries = num_retries

    def complete(
        self, messages: list[dict[str, str]], temperature: float | None = None, max_tokens: int | None = None
    ) -> str:
        """One chat completion; every failure (HTTP, timeout, empty answer) becomes an ``OperatorError``."""
        try:
            return chat_completion(
                self.model,
                messages,
                api_base=self.api_base,
                api_key=self.api_key,
                temperature=self.temperature if temperature is None else temperature,
                max_tokens=max_tokens or self.max_tokens,
                timeout_s=self.timeout_s,
                num_retries=self.num_retries,
            )
        except LLMError as exc:
            raise OperatorError(str(exc)) from exc

    def next_command(self, messages: list[Message]) -> str:
        return self.complete([m.model_dump() for m in messages])

    def replies(self, conversations: Sequence[list[Message]]) -> list[Reply]:
        """Concurrent requests (the provider batches on its side); order kept, errors per conversation."""

        def one(messages: list[Message]) -> Reply:
            try:
                return Reply(text=self.next_command(messages))
            except OperatorError as exc:
                return Reply(error=str(exc))

        if len(conversations) <= 1:
            return [one(c) for c in conversations]
        with ThreadPoolExecutor(max_workers=min(8, len(conversations)), thread_name_prefix="litellm") as ex:
            return list(ex.map(one, conversations))

    def sampling(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "model": self.model}


def left_pad(prompts: list[list[int]], pad: int) -> tuple[Any, Any]:
    """(input_ids, attention_mask) of token-id prompts padded on the left, as a decoder-only ``generate`` wants:
    every row's last real token sits in the last column, so new tokens follow it directly."""
    import torch

    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, ids in enumerate(prompts):
        input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        attention[row, width - len(ids) :] = 1
    return input_ids, attention


def load_merged(model_dir: str | Path, adapter_dir: str | Path | None = None) -> tuple[Any, Any]:
    """(model in eval mode, tokenizer) of a saved causal LM, with a peft LoRA adapter merged in when given.

    Merged into the base weights once: the same function, but each linear layer is one matmul instead of three:
    1.28x the new tokens/s with identical greedy replies on a 2-core CPU (benchmarks/bench_generation.py).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    if adapter_dir:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    return model.eval(), tokenizer


class LocalModelOperator(Operator):
    """A local causal LM (folder saved with ``save_pretrained``), optionally with a peft adapter.

    Greedy by default (``temperature`` > 0 samples, seeded). ``replies`` generates for a whole batch of
    conversations in one ``generate`` call per micro-batch (left padding), which is what makes the evaluation
    fast on a CPU; ``next_command`` is the same path with a batch of one, so both give the same text.
    Unscaffolded by default: the evaluation drops a model into the scenario with no instruction, as sekft does.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        adapter_dir: str | Path | None = None,
        max_new_tokens: int = 128,
        max_context_tokens: int = 2048,
        scaffolded: bool = False,
        model: Any = None,
        tokenizer: Any = None,
        name: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        micro_batch: int = 16,
        kv_cache: bool | None = None,
    ):
        if not model_dir and (model is None or tokenizer is None):
            # _load() reads from model_dir whatever is not given: with neither, it has nothing to load
            raise ValueError("LocalModelOperator needs model_dir or a loaded model + tokenizer")
        self.model_dir = str(model_dir) if model_dir else None
        self.adapter_dir = str(adapter_dir) if adapter_dir else None
        self.max_new_tokens = max_new_tokens
        self.max_context_tokens = max_context_tokens
        self.scaffolded = scaffolded
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.micro_batch = max(1, micro_batch)
        self.name = name or (
            "local:"
            + Path(self.model_dir or "model").name
            + (f"+{Path(self.adapter_dir).name}" if self.adapter_dir else "")
        )
        self._model = model
        self._tokenizer = tokenizer
        self._generator: Any = None
        self._lock = threading.Lock()  # one generate at a time: torch modules are shared across pool threads
        # Greedy replies reuse each conversation's KV cache across turns (inference.kv_decode); None: the
        # BASHGYM_KV_CACHE environment variable decides (on by default). Any failure falls back to generate.
        from bashgym_assets.inference.kv_decode import kv_cache_enabled

        self.kv_cache = kv_cache_enabled(kv_cache)
        self._kv: Any = None
        self.kv_fallback: str | None = None  # why the cached path was given up, if it was
        self.continuous_stats: Any = None

    def sampling(self) -> dict[str, Any]:
        return {
            "do_sample": self.temperature > 0,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_new_tokens": self.max_new_tokens,
            "max_context_tokens": self.max_context_tokens,
        }

    def _load(self) -> tuple[Any, Any]:
        if self._model is None or self._tokenizer is None:
            if self.model_dir is None:  # __init__ refuses an operator without both and without a folder
                raise ValueError("LocalModelOperator needs model_dir or a loaded model + tokenizer")
            self._model, self._tokenizer = load_merged(self.model_dir, self.adapter_dir)
        if not getattr(self._tokenizer, "chat_template", None):
            self._tokenizer.chat_template = CHATML_TEMPLATE
        return self._model, self._tokenizer

    def _encode(self, tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of the prompt; the oldest turns after system + task are dropped to fit the context."""
        keep = list(messages)
        budget = self.max_context_tokens - self.max_new_tokens
        while True:
            ids = tokenizer.apply_chat_template(
                keep, add_generation_prompt=True, tokenize=True, return_dict=True
            )["input_ids"]
            ids = list(ids[0] if ids and isinstance(ids[0], list) else ids)
            if len(ids) <= budget or len(keep) <= 3:
                return ids[-budget:]
            del keep[2:4]  # an assistant command and its observation

    def _stop_ids(self, tokenizer: Any) -> list[int]:
        from bashgym_assets.inference.turns import stop_token_ids

        return stop_token_ids(tokenizer)

    def _generate(self, model: Any, tokenizer: Any, prompts: list[list[int]]) -> list[Reply]:
        """One left-padded ``generate`` over ``prompts``; each reply stops at its own end-of-turn token."""
        stop = self._stop_ids(tokenizer)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stop[0] if stop else 0)
        news = self._kv_generate(model, stop, pad, prompts)
        if news is None:
            news = self.generate_tokens(model, tokenizer, prompts)
        return self._to_replies(tokenizer, stop, pad, news)

    def generate_tokens(self, model: Any, tokenizer: Any, prompts: list[list[int]]) -> list[list[int]]:
        """The raw new token ids per prompt from one left-padded ``generate`` (greedy or sampled by this
        operator's settings), end-of-turn token and right padding included: GRPO trains on exactly these ids."""
        import torch

        stop = self._stop_ids(tokenizer)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stop[0] if stop else 0)
        input_ids, attention = left_pad(prompts, pad)
        width = input_ids.shape[1]
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "eos_token_id": stop or None,
            "pad_token_id": pad,
            "do_sample": self.temperature > 0,
            "use_cache": True,
        }  # a model loaded for training has its config's cache off
        if self.temperature > 0:
            # top_k 0: transformers would otherwise keep only the 50 likeliest tokens, which the continuous decoder
            # (the cached path) does not, nor TRL's GRPO (its top_k is 0), whose log-probabilities score the draws
            kwargs.update(temperature=self.temperature, top_p=self.top_p, top_k=0)
        else:  # silence the "sampling flags set but do_sample=False" warnings of some generation configs
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
        return [out[row, width:].tolist() for row in range(len(prompts))]

    def _kv_generate(
        self, model: Any, stop: list[int], pad: int, prompts: list[list[int]]
    ) -> list[list[int]] | None:
        """New tokens per prompt from the KV-reusing greedy decoder, or None: off, sampling, unsupported, failed."""
        if not self.kv_cache or self.temperature > 0 or self.kv_fallback:
            return None
        from bashgym_assets.inference.kv_decode import KVGenerator, unsupported_reason

        if self._kv is None or self._kv.model is not model:
            self.kv_fallback = unsupported_reason(model)
            if self.kv_fallback:
                return None
            self._kv = KVGenerator(model, stop, pad, self.max_new_tokens)
        try:
            return self._kv.generate(prompts)
        except Exception as exc:  # noqa: BLE001 - the plain generate path still works
            self.kv_fallback = f"{type(exc).__name__}: {exc}"
            self._kv = None
            return None

    def _to_replies(self, tokenizer: Any, stop: list[int], pad: int, news: list[list[int]]) -> list[Reply]:
        replies = []
        for new in news:
            ended = next((i for i, t in enumerate(new) if t in stop), None)
            body = new[:ended] if ended is not None else [t for t in new if t != pad]
            text = tokenizer.decode(body, skip_special_tokens=True).strip()
            replies.append(
                Reply(
                    text=text,
                    truncated=ended is None and len(new) >= self.max_new_tokens,
                    new_tokens=len(body),
                )
            )
        return replies

    def replies(self, conversations: Sequence[list[Message]]) -> list[Reply]:
        """Batched generation: prompts sorted by length into micro-batches (less padding), order restored."""
        import torch

        if not conversations:
            return []
        with self._lock:
            try:
                model, tokenizer = self._load()
                prompts = [self._encode(tokenizer, [m.model_dump() for m in c]) for c in conversations]
            except Exception as exc:  # noqa: BLE001 - a model that cannot even encode fails every conversation
                return [Reply(error=f"model failed: {type(exc).__name__}: {exc}") for _ in conversations]
            if self.temperature > 0 and self._generator is None:
                torch.manual_seed(
                    self.seed
                )  # sampling is reproducible for the same batches in the same order
                self._generator = True
            order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
            out: list[Reply | None] = [None] * len(prompts)
            for start in range(0, len(order), self.micro_batch):
                chunk = order[start : start + self.micro_batch]
                try:
                    got = self._generate(model, tokenizer, [prompts[i] for i in chunk])
                except Exception as exc:  # noqa: BLE001 - recorded per conversation, the run goes on
                    got = [Reply(error=f"generation failed: {type(exc).__name__}: {exc}") for _ in chunk]
                for i, reply in zip(chunk, got, strict=True):
                    out[i] = reply
        return [r for r in out if r is not None]

    def next_command(self, messages: list[Message]) -> str:
        reply = self.replies([messages])[0]
        if reply.error:
            raise OperatorError(reply.error)
        return reply.text

    def reply_stream(self, max_rows: int = 32) -> LocalReplyStream | None:
        """Continuous batching (``inference.continuous``) for callers that hand in conversations one by one and take
        each reply as soon as it ends (the evaluation, the student's sampled attempts), or None where the cached
        path does not apply (``BASHGYM_KV_CACHE=0``, a model it does not support, an earlier failure): use
        ``replies``. Sampled replies draw from a generator per reply, seeded from the operator's seed and the
        caller's ``sample_key`` (so k attempts at one task differ, and a rerun repeats them)."""
        if not self.kv_cache or self.kv_fallback:
            return None
        from bashgym_assets.inference.continuous import ContinuousDecoder
        from bashgym_assets.inference.kv_decode import KVGenerator, unsupported_reason

        with self._lock:
            model, tokenizer = self._load()
            self.kv_fallback = unsupported_reason(model)
            if self.kv_fallback:
                return None
            stop = self._stop_ids(tokenizer)
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stop[0] if stop else 0)
            if self._kv is None or self._kv.model is not model:
                self._kv = KVGenerator(model, stop, pad, self.max_new_tokens)
            decoder = ContinuousDecoder(self._kv, max_rows=max_rows)
            self.continuous_stats = decoder.stats  # the latest stream's counters (rows a step, rebuilds)
            return LocalReplyStream(self, tokenizer, stop, pad, decoder)


class LocalReplyStream:
    """A local model's replies, one conversation at a time in and each reply out as soon as it ends, decoded by a
    ``ContinuousDecoder`` (see ``LocalModelOperator.reply_stream``). Same replies as ``replies`` under greedy
    decoding (up to floating-point near-ties). Should the decoder fail, the conversations in flight are answered
    by the operator's plain ``replies`` path instead and the stream goes on that way: a decoder bug never costs an
    episode."""

    def __init__(self, operator: LocalModelOperator, tokenizer: Any, stop: list[int], pad: int, decoder: Any):
        self.operator = operator
        self.tokenizer = tokenizer
        self.stop, self.pad = stop, pad
        self.decoder = decoder
        self._asked: dict[Any, tuple[list[Message], float]] = {}
        self._ready: list[tuple[Any, Reply, float]] = []
        self.fallback: str | None = None  # why the decoder was given up (the plain path answers from then on)

    @property
    def busy(self) -> bool:
        return bool(self._asked) or bool(self._ready)

    def submit(self, key: Any, conversation: list[Message], sample_key: str = "") -> None:
        """Queue one conversation's next reply; ``sample_key`` (scenario, sample, turn) seeds a sampled reply."""
        import time

        self._asked[key] = (conversation, time.perf_counter())
        if self.decoder is None:
            return
        try:
            ids = self.operator._encode(self.tokenizer, [m.model_dump() for m in conversation])
        except Exception as exc:  # noqa: BLE001 - this conversation fails, the others go on
            del self._asked[key]
            self._ready.append((key, Reply(error=f"model failed: {type(exc).__name__}: {exc}"), 0.0))
            return
        op = self.operator
        if op.temperature > 0:
            import hashlib

            seed = int.from_bytes(hashlib.sha256(f"{op.seed}\0{sample_key}".encode()).digest()[:8], "big")
            self.decoder.submit(key, ids, temperature=op.temperature, top_p=op.top_p, seed=seed)
        else:
            self.decoder.submit(key, ids)

    def charged(self, key: Any) -> float | None:
        """The decoder's seconds charged so far to the reply being generated for ``key`` (its share of each
        step); None when not known (no reply of that key in flight, or the plain path answers)."""
        if self.decoder is None:
            return None
        with self.operator._lock:
            return self.decoder.charged(key)

    def cancel(self, key: Any) -> None:
        """Stop generating one conversation's reply (its episode ran out of time): it leaves the batch at once and
        its reply never comes."""
        self._asked.pop(key, None)
        self._ready = [r for r in self._ready if r[0] != key]
        if self.decoder is not None:
            with self.operator._lock:
                self.decoder.cancel(key)

    def step(self) -> list[tuple[Any, Reply, float]]:
        """Advance the decoder by one step: ``(key, reply, seconds since it was submitted)`` of replies that ended."""
        import time

        out, self._ready = self._ready, []
        if self.decoder is not None:
            try:
                with self.operator._lock:
                    got = self.decoder.step()
            except Exception as exc:  # noqa: BLE001 - fall back to the plain path for everything in flight
                self.fallback = self.operator.kv_fallback = (
                    f"continuous decoding: {type(exc).__name__}: {exc}"
                )
                self.decoder = None
                got = []
            charged = self.decoder.last_charged if self.decoder is not None else {}
            for key, ids, seconds in got:
                self._asked.pop(key, None)
                reply = self.operator._to_replies(self.tokenizer, self.stop, self.pad, [ids])[0]
                reply.charged_s = charged.get(key)
                out.append((key, reply, seconds))
            if self.decoder is not None:
                return out
        if self._asked:  # the plain path: every conversation still asked, in one batched ``replies`` call
            keys = list(self._asked)
            t0 = time.perf_counter()
            replies = self.operator.replies([self._asked[k][0] for k in keys])
            now = time.perf_counter()
            for r in replies:  # one batch: each row is charged its share of the call
                r.charged_s = (now - t0) / len(keys)
            out += [(k, r, now - self._asked[k][1]) for k, r in zip(keys, replies, strict=True)]
            self._asked.clear()
        return out

    @property
    def stats(self) -> Any:
        return self.decoder.stats if self.decoder is not None else None


class GuardEvent(BaseModel):
    """A reply the guard stopped: which turn, what the model wrote, the blocking findings and what was done."""

    turn: int = Field(description="assistant turns before this reply in its conversation")
    reply: str
    action: str = Field(
        description="resampled (another reply was asked for) | refused (the refusal was sent)"
    )
    rules: list[str]
    findings: list[Finding]


def refusal_text(verdict: Verdict) -> str:
    """The line sent instead of a blocked command: a shell comment, so a terminal runs nothing and the episode goes
    on; it names the rules, never the command."""
    rules = sorted({f.rule for f in verdict.findings if f.severity == BLOCK})
    return f"{REFUSAL_PREFIX} the command was blocked by the guardrails ({', '.join(rules)})"


class GuardedOperator(Operator):
    """Any operator with the command guardrails in front of its replies.

    A reply that a ``block`` rule fires on is re-sampled up to ``resamples`` times (useful only when the wrapped
    model samples; a greedy model gives the same reply again), then replaced by :func:`refusal_text`. Every stop is
    recorded in ``events`` (shared by the per-scenario copies ``for_scenario`` makes; thread-safe). ``warn``
    findings pass. Name: the wrapped operator's plus ``+guard``.
    """

    def __init__(
        self, inner: Operator, resamples: int = 0, events: list[GuardEvent] | None = None, lock: Any = None
    ) -> None:
        self.inner = inner
        self.resamples = max(0, resamples)
        self.name = f"{inner.name}+guard"
        self.scaffolded = inner.scaffolded
        self.events: list[GuardEvent] = events if events is not None else []
        self._lock = lock or threading.Lock()

    def for_scenario(self, bundle: Any) -> GuardedOperator:
        return GuardedOperator(self.inner.for_scenario(bundle), self.resamples, self.events, self._lock)

    def sampling(self) -> dict[str, Any]:
        return {**self.inner.sampling(), "guard": {"resamples": self.resamples}}

    def _record(self, messages: list[Message], reply: str, action: str, verdict: Verdict) -> None:
        blocking = [f for f in verdict.findings if f.severity == BLOCK]
        event = GuardEvent(
            turn=sum(m.role == "assistant" for m in messages),
            reply=reply,
            action=action,
            rules=sorted({f.rule for f in blocking}),
            findings=blocking,
        )
        with self._lock:
            self.events.append(event)

    @staticmethod
    def check(reply: str) -> Verdict:
        return classify_command(reply)

    def _guard(self, messages: list[Message], reply: Reply, again: Any) -> Reply:
        if reply.error:
            return reply
        verdict = self.check(reply.text)
        tries = 0
        while verdict.blocked and tries < self.resamples:
            tries += 1
            self._record(messages, reply.text, "resampled", verdict)
            reply = again()
            if reply.error:
                return reply
            verdict = self.check(reply.text)
        if verdict.blocked:
            self._record(messages, reply.text, "refused", verdict)
            return Reply(text=refusal_text(verdict), new_tokens=reply.new_tokens)
        return reply

    def next_command(self, messages: list[Message]) -> str:
        def again() -> Reply:
            try:
                return Reply(text=self.inner.next_command(messages))
            except OperatorError as exc:
                return Reply(error=str(exc))

        first = self.inner.next_command(
            messages
        )  # an OperatorError on the first try propagates, as unguarded
        reply = self._guard(messages, Reply(text=first), again)
        if reply.error:
            raise OperatorError(reply.error)
        return reply.text

    def replies(self, conversations: Sequence[list[Message]]) -> list[Reply]:
        """The wrapped operator's batch; only a blocked reply costs extra (one-conversation) calls."""
        out = list(self.inner.replies(conversations))
        for i, reply in enumerate(out):
            out[i] = self._guard(
                conversations[i], reply, lambda c=conversations[i]: self.inner.replies([c])[0]
            )
        return out

    def refusals(self) -> int:
        return sum(e.action == "refused" for e in self.events)


OperatorFactory = Callable[..., Operator]
# Operators that later layers build on this module add themselves here (``register_operator``): serving registers
# ``routed:`` (teacher/student routing over two operators of this module), so this module never imports serving.
# Callers above that layer take ``make_operator`` from ``serving.router``, which registers on import.
_FACTORIES: dict[str, tuple[OperatorFactory, str]] = {}


class UnknownOperator(ValueError):
    """A ``<name>:<rest>`` spec whose name no layer registered (and not a litellm ``provider/model`` string)."""


def register_operator(prefix: str, factory: OperatorFactory, help: str = "") -> None:
    """Make ``<prefix>:<rest>`` specs build ``factory(rest, api_base=..., adapter_dir=..., **kwargs)``."""
    _FACTORIES[prefix] = (factory, help)


def make_operator(
    spec: str,
    api_base: str | None = None,
    adapter_dir: str | None = None,
    guard: bool = False,
    guard_resamples: int = 0,
    **kwargs: Any,
) -> Operator:
    """``reference``, ``local:<model_dir>``, a registered ``<prefix>:<rest>`` (``routed:<strategy>[?options]``:
    teacher/student routing, registered by ``serving.router``; kwargs ``student``, ``teacher``; ``api_base`` is the
    teacher's) or any litellm model string -> an operator; ``guard``: wrapped in a ``GuardedOperator`` that refuses
    blocked commands."""
    op: Operator
    prefix, _, rest = spec.partition(":")
    if rest and prefix.isidentifier() and prefix != "local" and prefix not in _FACTORIES:
        # a bare name before ':' is an operator kind, never a litellm model (those are provider/model[:tag])
        known = ", ".join(f"{p}: ({h})" if h else f"{p}:" for p, (_, h) in sorted(_FACTORIES.items()))
        raise UnknownOperator(
            f"no operator kind {prefix!r} (spec {spec!r}): registered are {known or 'none'}; "
            "routed: comes with bashgym_assets.serving.router (take make_operator from there)"
        )
    if spec == "reference":
        op = ReferenceOperator()
    elif rest and prefix in _FACTORIES:
        op = _FACTORIES[prefix][0](rest, api_base=api_base, adapter_dir=adapter_dir, **kwargs)
    elif spec.startswith("local:"):
        op = LocalModelOperator(spec.removeprefix("local:"), adapter_dir=adapter_dir, **kwargs)
    else:
        op = LiteLLMOperator(spec, api_base=api_base, **kwargs)
    return GuardedOperator(op, resamples=guard_resamples) if guard else op
