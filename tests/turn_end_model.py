"""A tiny chat model that, left alone, runs past the end of its turn: the test of every generation path's stops.

The tokenizer is the tiny ChatML one (``testing/tiny_model.py``) with its eos made ``</s>``, a token of its own,
while its chat template still closes a turn with ``<|im_end|>`` (a base model whose eos is not its turn end). The
weights make a bigram machine: attention and MLP outputs are zero, so the last hidden state is the normalised
embedding of the current token, and the untied lm_head maps "ls" to ``<|im_end|>`` and every other token to "ls".
A reply therefore reads ``ls <|im_end|> ls <|im_end|> ...`` and never reaches eos: a path that stops at eos only
returns "lslsls..." up to its budget, one that stops where the turn ends returns "ls".
"""

from __future__ import annotations

from pathlib import Path

REPLY = "ls"  # what a reply that stops at the turn end says
EOS = "</s>"
END_OF_TURN = "<|im_end|>"


def build_turn_end_model(out_dir: Path) -> Path:
    """Save the model described above (and its tokenizer) to ``out_dir``; SmolLM's pre-tokenizer layout, so that
    the exporter accepts it."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from bashgym_assets.testing.tiny_model import build_tiny_model, with_smollm_pre_tokenizer

    tiny = build_tiny_model(out_dir.parent / f"{out_dir.name}-tiny")
    tok = AutoTokenizer.from_pretrained(tiny)
    tok.add_special_tokens({"eos_token": EOS})
    reply, end = tok.convert_tokens_to_ids(REPLY), tok.convert_tokens_to_ids(END_OF_TURN)
    assert tok.convert_ids_to_tokens(reply) == REPLY and reply != end != tok.eos_token_id
    hidden = 64
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.zero_()  # the residual stream stays the token's embedding
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed.zero_()
        embed[:, 2] = 1.0  # every token but the two below: direction 2
        embed[reply] = 0.0
        embed[reply, 0] = 1.0
        embed[end] = 0.0
        embed[end, 1] = 1.0
        head.zero_()
        head[end, 0] = 10.0  # after "ls": the turn ends
        head[reply, 1] = head[reply, 2] = 10.0  # after the turn end, or anything else: "ls"
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return with_smollm_pre_tokenizer(out_dir)
