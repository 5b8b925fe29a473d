"""Operators behind one interface: given the conversation so far, type the next line into the terminal.

Three kinds: the offline ``reference`` operator (replays a bundle's reference solution, one command per turn, then
``exit``), a teacher model through litellm (any provider string), and a local transformers model (a base model,
optionally with a peft LoRA adapter), decoded greedily with a ChatML template. The episode loop in
``rollout.episode`` does not care which one it drives.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from bashgym_assets.rollout.transcript import EXIT_COMMAND, Message
from bashgym_assets.scenarios.llm import LLMError, chat_completion

# ChatML, as SmolLM2-Instruct uses it; applied when a tokenizer comes without a chat template.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
    " + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class OperatorError(RuntimeError):
    """The operator could not produce a reply (API error, timeout, model failure): the episode ends unterminated."""


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

    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 256, timeout_s: float = 60.0, num_retries: int = 0):
        self.model = model
        self.name = f"litellm:{model}"
        self.api_base = api_base
        self.api_key = api_key
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.num_retries = num_retries

    def complete(self, messages: list[dict[str, str]], temperature: float | None = None,
                 max_tokens: int | None = None) -> str:
        """One chat completion; every failure (HTTP, timeout, empty answer) becomes an ``OperatorError``."""
        try:
            return chat_completion(self.model, messages, api_base=self.api_base, api_key=self.api_key,
                                   temperature=self.temperature if temperature is None else temperature,
                                   max_tokens=max_tokens or self.max_tokens, timeout_s=self.timeout_s,
                                   num_retries=self.num_retries)
        except LLMError as exc:
            raise OperatorError(str(exc)) from exc

    def next_command(self, messages: list[Message]) -> str:
        return self.complete([m.model_dump() for m in messages])


class LocalModelOperator(Operator):
    """A local causal LM (folder saved with ``save_pretrained``), optionally with a peft adapter; greedy decoding.

    Unscaffolded by default: the evaluation drops a model into the scenario with no instruction, as sekft does.
    """

    def __init__(self, model_dir: str | Path | None = None, adapter_dir: str | Path | None = None,
                 max_new_tokens: int = 128, max_context_tokens: int = 2048, scaffolded: bool = False,
                 model: Any = None, tokenizer: Any = None, name: str | None = None):
        if model is None and model_dir is None:
            raise ValueError("LocalModelOperator needs model_dir or a loaded model + tokenizer")
        self.model_dir = str(model_dir) if model_dir else None
        self.adapter_dir = str(adapter_dir) if adapter_dir else None
        self.max_new_tokens = max_new_tokens
        self.max_context_tokens = max_context_tokens
        self.scaffolded = scaffolded
        self.name = name or ("local:" + Path(self.model_dir or "model").name
                             + (f"+{Path(self.adapter_dir).name}" if self.adapter_dir else ""))
        self._model = model
        self._tokenizer = tokenizer
        self._lock = threading.Lock()  # one generate at a time: torch modules are shared across pool threads

    def _load(self) -> tuple[Any, Any]:
        if self._model is None or self._tokenizer is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
            model = AutoModelForCausalLM.from_pretrained(self.model_dir)
            if self.adapter_dir:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, self.adapter_dir)
            model.eval()
            self._model, self._tokenizer = model, tokenizer
        if not getattr(self._tokenizer, "chat_template", None):
            self._tokenizer.chat_template = CHATML_TEMPLATE
        return self._model, self._tokenizer

    def _encode(self, tokenizer: Any, messages: list[dict[str, str]]) -> Any:
        """Token ids of the prompt; the oldest turns after system + task are dropped to fit the context."""
        keep = list(messages)
        budget = self.max_context_tokens - self.max_new_tokens
        while True:
            ids = tokenizer.apply_chat_template(keep, add_generation_prompt=True, return_tensors="pt",
                                                return_dict=True)["input_ids"]
            if ids.shape[-1] <= budget or len(keep) <= 3:
                return ids[:, -budget:]
            del keep[2:4]  # an assistant command and its observation

    def next_command(self, messages: list[Message]) -> str:
        import torch

        with self._lock:
            model, tokenizer = self._load()
            input_ids = self._encode(tokenizer, [m.model_dump() for m in messages])
            eos = [t for t in {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
                   if isinstance(t, int) and t >= 0]
            try:
                with torch.no_grad():
                    out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                         max_new_tokens=self.max_new_tokens, do_sample=False,
                                         eos_token_id=eos or None,
                                         pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                                         else (eos[0] if eos else 0))
            except Exception as exc:
                raise OperatorError(f"generation failed: {type(exc).__name__}: {exc}") from exc
            text = tokenizer.decode(out[0, input_ids.shape[-1]:], skip_special_tokens=True)
        return text.strip()


def make_operator(spec: str, api_base: str | None = None, adapter_dir: str | None = None, **kwargs: Any) -> Operator:
    """``reference``, ``local:<model_dir>`` or any litellm model string -> an operator."""
    if spec == "reference":
        return ReferenceOperator()
    if spec.startswith("local:"):
        return LocalModelOperator(spec.removeprefix("local:"), adapter_dir=adapter_dir, **kwargs)
    return LiteLLMOperator(spec, api_base=api_base, **kwargs)
