"""One end-of-turn token for training masks, generation stops and GRPO (issue 30), read from the chat template.

A base model whose template closes a turn with a token that is not its eos must be trained to stop exactly
where generation stops: the tiny locally built model, given such a template, and the real SmolLM2 (ChatML).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bashgym_assets.inference import turns
from bashgym_assets.rollout.operators import LocalModelOperator
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training import grpo, masking

# Phi-style: a turn ends with <|end|>; the tokenizer's eos stays <|im_end|>, the name the old code guessed first
PHI_LIKE = (
    "{% for m in messages %}{{ '<|' + m['role'] + '|>\n' + m['content'] + '<|end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
CONV = [
    {"role": "system", "content": "You are a shell operator."},
    {"role": "user", "content": "list the files"},
    {"role": "assistant", "content": "ls -la"},
    {"role": "user", "content": "total 0"},
    {"role": "assistant", "content": "exit"},
]


@pytest.fixture(scope="module")
def phi_like(tmp_path_factory: pytest.TempPathFactory):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny")))
    tok.add_special_tokens(
        {"additional_special_tokens": ["<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]}
    )
    tok.chat_template = PHI_LIKE
    assert tok.eos_token == "<|im_end|>"
    return tok


def test_a_turn_that_ends_with_a_non_eos_token_is_trained_and_stopped_at_that_token(phi_like) -> None:
    end = phi_like.convert_tokens_to_ids("<|end|>")
    assert turns.end_of_turn_token(phi_like) == "<|end|>"
    assert grpo.end_of_turn_id(phi_like) == end
    # generation stops at it (and at eos, which a model may still emit)
    assert LocalModelOperator(model_dir="unused")._stop_ids(phi_like) == sorted({end, phi_like.eos_token_id})
    # the mask trains every assistant turn up to and including it
    ex = masking.tokenize_conversation(phi_like, CONV)
    trained = [t for t, label in zip(ex.input_ids, ex.labels, strict=True) if label != masking.IGNORE_INDEX]
    assert phi_like.decode(trained) == "ls -la<|end|>exit<|end|>"


def test_chatml_models_end_turns_with_im_end(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from bashgym_assets.training.base_model import resolve_base_model

    real = AutoTokenizer.from_pretrained(resolve_base_model())  # offline SmolLM2-135M-Instruct
    tiny = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "tiny"))
    for tok in (real, tiny):
        im_end = tok.convert_tokens_to_ids("<|im_end|>")
        assert turns.end_of_turn_token(tok) == "<|im_end|>"
        assert turns.stop_token_ids(tok) == sorted({im_end, tok.eos_token_id})


def test_a_tokenizer_without_template_falls_back_to_known_names_then_eos(phi_like) -> None:
    from copy import deepcopy

    bare = deepcopy(phi_like)
    bare.chat_template = None
    assert turns.end_of_turn_token(bare) == "<|im_end|>"  # the first known turn-closing name it has
