"""The assistant-only loss mask, computed independently of any chat-template markers, and the mask report.

The single most important correctness detail of the trainer (sekft): loss only on what the model should say,
the commands and the end-of-turn token after each, so it learns to stop; the system orientation, the task and
every command output are -100, or the model learns to hallucinate the environment's replies.

Training itself tokenises through TRL (``assistant_only_loss=True`` with a training chat template whose
``{% generation %}`` blocks mark the assistant turns, see ``trainer.py``). This module is the reference those
markers are checked against: render the conversation once with the tokenizer's own chat template, find each
assistant turn's character span (by rendering the prefix before and after the turn, which for prefix-stable
templates like ChatML is exact), tokenise the whole text once with ``return_offsets_mapping`` and label a token
only if its characters fall inside an assistant span. It needs no markers, so it works for any prefix-stable
template, and a training template that marks too much or too little shows up as a difference.

``MaskReport`` (the ``--inspect`` report and the asset's ``mask`` metadata) summarises labelled examples,
whichever tokenisation produced them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from bashgym_assets.rollout.transcript import UNTRAINED, is_untrained

IGNORE_INDEX = -100


class MaskError(ValueError):
    """A conversation that cannot be rendered or masked (bad roles, template not prefix-stable ...)."""


@dataclass
class TokenizedExample:
    """One conversation as token ids with labels (-100 outside assistant turns)."""

    input_ids: list[int]
    labels: list[int]
    truncated: bool = False
    source: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)
    text: str = ""

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def n_trained(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE_INDEX)


def end_of_turn_token(tokenizer: Any) -> str:
    """The text of the token that closes a chat turn (``inference.turns``: the one generation stops at)."""
    from bashgym_assets.inference.turns import NoEndOfTurn
    from bashgym_assets.inference.turns import end_of_turn_token as from_template

    try:
        return from_template(tokenizer)
    except NoEndOfTurn as exc:
        raise MaskError(str(exc)) from exc


def _render(tokenizer: Any, messages: Sequence[dict[str, str]], add_generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(
        list(messages), tokenize=False, add_generation_prompt=add_generation_prompt
    )


def normalise_messages(messages: Iterable[Any], require_assistant: bool = True) -> list[dict[str, Any]]:
    """Plain ``{role, content}`` dicts (parquet gives dicts, pydantic gives models), validated; an assistant turn
    marked untrained keeps ``train: False`` (every other turn is trained as before).

    ``require_assistant=False`` for a DPO prompt, which ends before the first scored assistant turn.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"] if isinstance(m, dict) else m.role
        content = m["content"] if isinstance(m, dict) else m.content
        if role not in ("system", "user", "assistant"):
            raise MaskError(f"unknown role {role!r}")
        out.append({"role": role, "content": content or ""})
        if role == "assistant" and is_untrained(m):
            out[-1][UNTRAINED] = False
    if require_assistant and not any(m["role"] == "assistant" and not is_untrained(m) for m in out):
        raise MaskError("conversation has no trained assistant turn: nothing to train")
    return out


def assistant_spans(tokenizer: Any, messages: Sequence[dict[str, str]]) -> tuple[str, list[tuple[int, int]]]:
    """The rendered text and the character span of every trained assistant turn (content + end-of-turn token)."""
    messages = normalise_messages(messages)
    text = _render(tokenizer, messages)
    eot = end_of_turn_token(tokenizer)
    spans: list[tuple[int, int]] = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or is_untrained(m):
            continue
        before = _render(tokenizer, messages[:i], add_generation_prompt=True) if i else ""
        after = _render(tokenizer, messages[: i + 1])
        if not text.startswith(after) or not after.startswith(before):
            raise MaskError(
                "the chat template is not prefix-stable; cannot locate assistant turns by offsets"
            )
        start, end = len(before), len(after)
        turn = text[start:end]
        k = turn.rfind(eot)
        if k < 0:
            raise MaskError(f"assistant turn {i} is not closed by {eot!r}")
        spans.append((start, start + k + len(eot)))  # content + end-of-turn, not the newline after it
    return text, spans


def tokenize_conversation(
    tokenizer: Any,
    messages: Sequence[Any],
    max_length: int | None = None,
    source: str = "",
    keep_text: bool = False,
) -> TokenizedExample:
    """Tokenise once with offsets; label a token iff its characters lie inside an assistant span."""
    text, spans = assistant_spans(tokenizer, messages)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    labels = [IGNORE_INDEX] * len(ids)
    j = 0
    for t, (s, e) in enumerate(enc["offset_mapping"]):
        if e <= s:
            continue
        while j < len(spans) and spans[j][1] <= s:
            j += 1
        if j < len(spans) and spans[j][0] <= s and e <= spans[j][1]:
            labels[t] = ids[t]
    truncated = False
    if max_length is not None and len(ids) > max_length:
        ids, labels, truncated = ids[:max_length], labels[:max_length], True
    return TokenizedExample(
        ids, labels, truncated, source, spans if keep_text else [], text if keep_text else ""
    )


# ---- the --inspect report -------------------------------------------------------------------------------
class MaskReport(BaseModel):
    """Mask statistics without training: what fraction of tokens the loss sees, and a marked-up sample."""

    examples: int
    tokens: int
    trained_tokens: int
    trained_fraction: float
    truncated: int
    max_tokens: int
    mean_tokens: float
    examples_without_trained_tokens: int
    sample: str

    def markdown(self) -> str:
        return (
            "| examples | tokens | trained tokens | trained % | truncated | max tokens | mean tokens |\n"
            "|---|---|---|---|---|---|---|\n"
            f"| {self.examples} | {self.tokens} | {self.trained_tokens} | {100 * self.trained_fraction:.1f} | "
            f"{self.truncated} | {self.max_tokens} | {self.mean_tokens:.1f} |\n\n"
            "Sample (trained tokens between `[[` and `]]`):\n\n```\n" + self.sample + "\n```"
        )


def marked_sample(tokenizer: Any, ex: TokenizedExample, limit: int = 3000) -> str:
    """Decode an example with the trained runs wrapped in ``[[ ]]`` so a human can eyeball the mask."""
    out: list[str] = []
    run: list[int] = []  # token ids of the current trained or untrained run
    trained = False
    for tok, lab in zip(ex.input_ids, ex.labels, strict=True):
        is_trained = lab != IGNORE_INDEX
        if is_trained != trained and run:
            text = tokenizer.decode(run)
            out.append(f"[[{text}]]" if trained else text)
            run = []
        trained = is_trained
        run.append(tok)
    if run:
        text = tokenizer.decode(run)
        out.append(f"[[{text}]]" if trained else text)
    return "".join(out)[:limit]


def inspect_examples(tokenizer: Any, examples: Sequence[TokenizedExample]) -> MaskReport:
    tokens = sum(e.n_tokens for e in examples)
    trained = sum(e.n_trained for e in examples)
    return MaskReport(
        examples=len(examples),
        tokens=tokens,
        trained_tokens=trained,
        trained_fraction=trained / tokens if tokens else 0.0,
        truncated=sum(e.truncated for e in examples),
        max_tokens=max((e.n_tokens for e in examples), default=0),
        mean_tokens=tokens / len(examples) if examples else 0.0,
        examples_without_trained_tokens=sum(1 for e in examples if e.n_trained == 0),
        sample=marked_sample(tokenizer, examples[0]) if examples else "",
    )
