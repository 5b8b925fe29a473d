"""A Hugging Face Llama-family folder (the merged model) written as a GGUF file with the ``gguf`` package's writer.

The ``gguf`` package (0.19) ships the writer (``GGUFWriter``), the tensor-name map (``TensorNameMap``), the
quantizers (``gguf.quants``) and the tokenizer-metadata helper (``SpecialVocab``: merges, special token ids,
chat template), but NOT a model converter: ``convert_hf_to_gguf.py`` lives in the llama.cpp repository, not in the
PyPI package (its ``scripts/`` only dump, edit and re-endian existing files). So the Llama mapping is written
here, following what that converter does for ``LlamaForCausalLM``:

* tensor names through ``gguf.get_tensor_name_map(MODEL_ARCH.LLAMA, n_layers)`` (``blk.N.attn_q.weight`` ...);
* ``q_proj`` / ``k_proj`` rows permuted from Hugging Face's rotate-half RoPE layout to GGML's interleaved one
  (``_permute``; transformers' GGUF loader undoes exactly this, ``LlamaTensorProcessor``);
* 1-D tensors (norms) stay F32; 2-D weights are F16 or Q8_0 (rows of a multiple of 32 values, else F16);
* no ``output.weight`` when the embeddings are tied (readers then tie ``token_embd``);
* tokenizer as ``gpt2`` BPE: every token, its type (control for special added tokens, user-defined for other
  added tokens, normal otherwise), the merges, bos/eos/pad/unk ids and the chat template (``SpecialVocab``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

FORMATS = ("f16", "q8_0")


class GGUFExportError(ValueError):
    """The folder cannot be written as a Llama GGUF (another architecture, an unmapped tensor ...)."""


class GGUFFileInfo(BaseModel):
    """One written GGUF file (export report, asset metadata)."""

    path: str
    format: str
    size_bytes: int
    tensors: int
    tokens: int
    pre_tokenizer: str


def _permute(weights: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """HF rotate-half rows -> GGML interleaved rows (llama.cpp's ``LlamaModel.permute``)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def pre_tokenizer_name(tokenizer_json: dict[str, Any]) -> str:
    """llama.cpp's name for how text is split before BPE (``tokenizer.ggml.pre``), read off tokenizer.json.

    SmolLM2's own tokenizer splits digits one by one before the GPT-2 byte-level regex: llama.cpp calls that
    ``smollm``. A plain byte-level regex split is ``gpt2``. Anything else is written as ``default`` (llama.cpp
    then uses its generic BPE split; transformers' loader ignores the name for both)."""
    pre = tokenizer_json.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    kinds = [p.get("type") for p in parts]
    digits = any(p.get("type") == "Digits" and p.get("individual_digits") for p in parts)
    if "ByteLevel" in kinds and digits:
        return "smollm"
    if kinds == ["ByteLevel"]:
        return "gpt2"
    return "default"


def _tokens(model_dir: Path, vocab_size: int) -> tuple[list[str], list[int], str]:
    """Every token id's text and GGUF token type, padded to the model's vocabulary size."""
    import gguf
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    tj = json.loads((model_dir / "tokenizer.json").read_text())
    model = tj.get("model", {})
    if model.get("type") != "BPE" or (tj.get("decoder") or {}).get("type") != "ByteLevel":
        raise GGUFExportError("only byte-level BPE tokenizers (gpt2 style) are supported")
    reverse = {i: t for t, i in tok.get_vocab().items()}
    added = tok.added_tokens_decoder  # id -> AddedToken
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(reverse[i])
            types.append(gguf.TokenType.CONTROL if added[i].special else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(reverse[i])
            types.append(gguf.TokenType.NORMAL)
    return tokens, [int(t) for t in types], pre_tokenizer_name(tj)


def write_gguf(model_dir: Path, out_path: Path, fmt: str = "f16", name: str = "bashgym-operator") -> GGUFFileInfo:
    """Write the Llama model in ``model_dir`` (safetensors + tokenizer) as one GGUF file of format ``fmt``."""
    import gguf
    import torch
    from gguf.quants import quantize
    from transformers import AutoConfig, AutoModelForCausalLM

    if fmt not in FORMATS:
        raise GGUFExportError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    model_dir, out_path = Path(model_dir), Path(out_path)
    config = AutoConfig.from_pretrained(model_dir)
    if config.model_type != "llama":
        raise GGUFExportError(f"model type {config.model_type!r}: only Llama-architecture models are mapped here")
    n_layers, n_head = config.num_hidden_layers, config.num_attention_heads
    n_head_kv = getattr(config, "num_key_value_heads", None) or n_head
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // n_head
    rope = getattr(config, "rope_parameters", None) or {}
    rope_theta = float(rope.get("rope_theta") or getattr(config, "rope_theta", 10000.0))
    if rope.get("rope_type", "default") not in ("default", None):
        raise GGUFExportError(f"rope scaling {rope.get('rope_type')!r} is not mapped")

    tokens, token_types, pre = _tokens(model_dir, config.vocab_size)
    arch = gguf.MODEL_ARCH.LLAMA
    writer = gguf.GGUFWriter(str(out_path), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name(name)
    writer.add_vocab_size(config.vocab_size)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_rope_dimension_count(head_dim)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_rope_freq_base(rope_theta)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if fmt == "f16" else gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    special = gguf.SpecialVocab(model_dir, load_merges=True, n_vocab=len(tokens))
    if not special.merges:
        raise GGUFExportError("tokenizer.json has no BPE merges")
    special.add_to_gguf(writer, quiet=True)  # merges, bos/eos/pad/unk ids, add_bos flag, chat template

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    names = gguf.get_tensor_name_map(arch, n_layers)
    count = 0
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight" and tied:
            continue
        if hf_name.endswith("rotary_emb.inv_freq"):
            continue
        new_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise GGUFExportError(f"no GGUF name for tensor {hf_name!r}")
        data = tensor.detach().to(torch.float32).numpy()
        if hf_name.endswith("q_proj.weight"):
            data = _permute(data, n_head, n_head)
        elif hf_name.endswith("k_proj.weight"):
            data = _permute(data, n_head, n_head_kv)
        if data.ndim == 1:
            writer.add_tensor(new_name, np.ascontiguousarray(data, dtype=np.float32))
        elif fmt == "q8_0" and data.shape[-1] % 32 == 0:
            q = gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(new_name, quantize(np.ascontiguousarray(data), q), raw_dtype=q)
        else:
            writer.add_tensor(new_name, np.ascontiguousarray(data, dtype=np.float16))
        count += 1
    out_path.parent.mkdir(parents=True, exist_ok=True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return GGUFFileInfo(path=str(out_path), format=fmt, size_bytes=out_path.stat().st_size, tensors=count,
                        tokens=len(tokens), pre_tokenizer=pre)
