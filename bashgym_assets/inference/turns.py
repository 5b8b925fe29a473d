"""Where a chat turn ends: one definition for training masks, generation stops and GRPO's episode tokens.

The training mask teaches the model to close each assistant turn with a token, generation stops at it, and GRPO
appends it when a reply was cut: if these three disagreed (say, a base model whose chat template closes a turn with
``<|end|>`` while its eos is ``</s>``), the model would be trained to stop where generation never stops. So the
token is read from the chat template itself (what the template writes right after an assistant message), and only
when the template does not say, from the usual names, then the eos token.

``turn_stops`` is the one answer to "where does generation stop" that every generation path takes: the decoder
(rollouts, evaluation, GRPO, ``bashgym serve``), ``trainer.generate``, the MLflow pyfunc model, and the export's
``generation_config.json``, GGUF metadata and Ollama Modelfile. The pyfunc model carries a copy of this file
(``training/pyfunc.py`` loads without bashgym installed), so it imports nothing from bashgym.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

# Turn-closing tokens of the common chat formats (ChatML, Llama 3, Phi, Gemma): the fallback when the template
# cannot be rendered with a probe message.
KNOWN_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>")
_PROBE = "bashgym-end-of-turn-probe"


class NoEndOfTurn(ValueError):
    """The tokenizer has neither a turn-closing token nor an eos token."""


def _token_id(tokenizer: Any, text: str) -> int | None:
    """The id of ``text`` when it is ONE token of the vocabulary (special or not), else None."""
    tid = tokenizer.convert_tokens_to_ids(text)
    if not isinstance(tid, int) or tid < 0 or (tid == tokenizer.unk_token_id and text != tokenizer.unk_token):
        return None
    return tid


def _from_template(tokenizer: Any) -> str | None:
    """What the chat template writes right after an assistant message's content, if that is one known token."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    conversation = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": _PROBE}]
    try:
        text = tokenizer.apply_chat_template(conversation, tokenize=False)
    except Exception:  # noqa: BLE001 - a template that rejects the probe (e.g. wants a system turn): use the names
        return None
    at = text.rfind(_PROBE)
    if at < 0:
        return None
    after = text[at + len(_PROBE) :].lstrip(" ")
    specials = sorted(
        {*tokenizer.all_special_tokens, *getattr(tokenizer, "added_tokens_encoder", {})},
        key=len,
        reverse=True,
    )
    for special in specials:  # the longest special/added token the tail starts with
        if special and after.startswith(special):
            return special
    word = after.split(None, 1)[0] if after.strip() else ""
    return word if word and _token_id(tokenizer, word) is not None else None


def end_of_turn_token(tokenizer: Any) -> str:
    """The text of the token that closes an assistant turn (``<|im_end|>`` for ChatML models)."""
    found = _from_template(tokenizer)
    if found:
        return found
    for candidate in KNOWN_END_OF_TURN:
        if candidate in tokenizer.get_vocab():
            return candidate
    if tokenizer.eos_token:
        return tokenizer.eos_token
    raise NoEndOfTurn("the tokenizer has no end-of-turn or eos token")


def end_of_turn_id(tokenizer: Any) -> int:
    """The id of ``end_of_turn_token``: what GRPO appends to a reply that was cut before it ended."""
    tid = _token_id(tokenizer, end_of_turn_token(tokenizer))
    if tid is None:
        raise NoEndOfTurn(f"the end-of-turn token {end_of_turn_token(tokenizer)!r} is not one token")
    return tid


class TurnStops(BaseModel):
    """Where generation stops for one tokenizer: the end-of-turn token and the eos token (a model may end either
    way), as ids (``generate``'s ``eos_token_id``, generation_config.json, GGUF) and as text (stop strings)."""

    model_config = ConfigDict(frozen=True)

    end_of_turn_id: int
    ids: list[int]  # sorted, end of turn and eos
    strings: list[str]  # the end-of-turn token's text first, then eos's when it differs

    def cut(self, new_ids: Sequence[int]) -> list[int]:
        """A reply's generated ids up to (without) its first stop: a turn-closing token that is not a special
        token would otherwise stay in the decoded text."""
        ends = set(self.ids)
        return list(next((new_ids[:i] for i, t in enumerate(new_ids) if t in ends), new_ids))


def turn_stops(tokenizer: Any) -> TurnStops:
    """The stops every generation path uses for ``tokenizer`` (see the module docstring)."""
    eot = end_of_turn_id(tokenizer)
    ids = {eot, tokenizer.eos_token_id}
    strings = [end_of_turn_token(tokenizer)]
    if tokenizer.eos_token and tokenizer.eos_token not in strings:
        strings.append(tokenizer.eos_token)
    return TurnStops(
        end_of_turn_id=eot,
        ids=sorted(t for t in ids if isinstance(t, int) and t >= 0),
        strings=strings,
    )


def stop_token_ids(tokenizer: Any) -> list[int]:
    """``turn_stops(tokenizer).ids``: what the decoder and serving pass as their stop ids."""
    return turn_stops(tokenizer).ids
