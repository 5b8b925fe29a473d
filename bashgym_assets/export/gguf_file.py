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
  added tokens, normal otherwise), the merges, bos/eos/pad/unk ids, the add-bos/add-eos flags and the chat template
  (``SpecialVocab``), and the end-of-turn id (``tokenizer.ggml.eot_token_id``, from ``inference.turns``): llama.cpp
  and Ollama end generation at it as at eos, where the template closes a turn with another token than eos;
* ``tokenizer.ggml.pre``, the name of llama.cpp's pre-tokenizer (how text is split before BPE, and whether
  detokenizing cleans spaces before punctuation), chosen as the converter chooses it: the hash of the tokenizer's
  encoding of a fixed test text, looked up in llama.cpp's table (``pre_tokenizer_name``). A tokenizer that is not
  in the table is accepted only when its tokenizer.json is one of the few plain layouts that one llama.cpp
  pre-tokenizer reproduces exactly; anything else is refused (``GGUFExportError``): llama.cpp would load a wrong
  name with a silently different split, or not load the file at all;
* ``general.quantization_version`` (``GGML_QUANT_VERSION``) and ``general.type``, as the converter writes them.
"""

from __future__ import annotations

import hashlib
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
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


# convert_hf_to_gguf.py's test text: its encoding differs between every pre-tokenizer llama.cpp implements
CHKTXT = (
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 "
    "3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ "
    "------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, "
    "'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"
)
# sha256(str(tokenizer.encode(CHKTXT))) -> llama.cpp's name, from convert_hf_to_gguf.py's get_vocab_base_pre
# (byte-level BPE families; every name here is one the pinned llama.cpp, tools/llama, loads).
KNOWN_PRE_TOKENIZERS: dict[str, str] = {
    "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5": "llama-bpe",  # Meta-Llama-3-8B
    "049ecf7629871e3041641907f3de7c733e4dbfdc736f57d882ba0b0845599754": "deepseek-llm",
    "347715f544604f9118bb75ed199f68779f423cabb20db6de6f31b908d04d7821": "deepseek-coder",
    "8aeee3860c56296a157a1fe2fad249ec40aa59b1bb5709f4ade11c4e6fe652ed": "falcon",
    "9d032fcbd5501f4a38150912590928bfb36091efb5df11b8e2124b0390e3fb1e": "falcon3",
    "b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166": "mpt",  # and OLMo-1.7
    "35d91631860c815f952d711435f48d356ebac988362536bed955d43bfa436e34": "starcoder",  # starcoder2
    "3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454": "gpt-2",  # openai gpt2
    "32d85c31273f8019248f2559fed492d929ea28b17e51d81d3bb36fff23ca72b3": "stablelm2",
    "6221ad2852e85ce96f791f476e0b390cf9b474c9e3d1362f53a24a06dc8220ff": "refact",
    "9c2227e4dd922002fb81bde4fc02b0483ca4f12911410dee2255e4987644e3f8": "command-r",
    "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea": "qwen2",  # Qwen1.5
    "d4540891389ea895b53b399da6ac824becc30f2fba0e9ddbb98f92e55ca0e97c": "qwen2",  # Qwen3
    "a8594e3edff7c29c003940395316294b2c623e09894deebbc65f33f1515df79e": "dbrx",
    "c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d": "smaug-bpe",
    "c7ea5862a53e4272c035c8238367063e2b270d51faa48c0f09e9d5b54746c360": "poro-chat",
    "7fc505bd3104ca1083b150b17d088b59534ede9bde81f0dd2090967d7fe52cee": "viking",
    "b53802fb28e26d645c3a310b34bfe07da813026ec7c7716883404d5e0f8b1901": "jais",
    "7b3e7548e4308f52a76e8229e4e6cc831195d0d1df43aed21ac6c93da05fec5f": "codeshell",
    "63b97e4253352e6f357cc59ea5b583e3a680eaeaf2632188c2b952de2588485e": "tekken",  # Mistral-Nemo
    "855059429035d75a914d1eda9f10a876752e281a054a7a3d421ef0533e5b6249": "smollm",  # SmolLM / SmolLM2
    "3c30d3ad1d6b64202cd222813e7736c2db6e1bd6d67197090fc1211fbc612ae7": "bloom",
    "bc01ce58980e1db43859146dc51b1758b3b88729b217a74792e9f8d43e479d21": "gpt3-finnish",
    "4e2b24cc4770243d65a2c9ec19770a72f08cffc161adbb73fcbb6b7dd45a0aae": "exaone",
    "fcace8b9cac38ce847670c970cd5892031a753a1ef381abd1d9af00f713da085": "phi-2",
    "60824e3c0d9401f89943cbb2fff727f0e2d4c545ba4df2d6e4f09a6db0f5b450": "chameleon",
    "d4c8f286ea6b520b3d495c4455483cfa2302c0cfcd4be05d781b6a8a0a7cdaf1": "megrez",
    "877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5": "deepseek-v3",
    "b3f499bb4255f8ca19fccd664443283318f2fd2414d5e0b040fbdd0cc195d6c5": "deepseek-r1-qwen",
    "1431a23e583c97432bc230bff598d103ddb5a1f89960c8f1d1051aaa944d0b35": "minerva-7b",
    "d353350c764d8c3b39c763113960e4fb4919bea5fbf208a0e3b22e8469dc7406": "llama4",
    "0e9433cbbb161f89e264eb32e8e64bfe69e834973ffca5d41d3948a604a3e2a3": "pixtral",
    "a1e163ecab2e718a4c829d1148b6e86824ec36163bb71941c3dca9cd5ac25756": "mellum",
}
# Tokenizers outside the table (e.g. one trained from scratch) whose tokenizer.json says exactly what one llama.cpp
# pre-tokenizer does: no normalizer, a byte-level decoder, and this pre_tokenizer, with HF's
# clean_up_tokenization_spaces equal to llama.cpp's clean_spaces for that name (it decides whether detokenizing
# turns " 's" into "'s": SmolLM's must not, or `sed -i 's/a/b/'` comes back as `sed -i's/a/b/'`).
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
_DIGITS = {"type": "Digits", "individual_digits": True}
_LAYOUTS: tuple[tuple[tuple[dict[str, Any], ...], bool, str], ...] = (
    ((_BYTE_LEVEL,), True, "gpt-2"),  # the GPT-2 regex, spaces cleaned
    ((_DIGITS, _BYTE_LEVEL), False, "smollm"),  # digits one by one, then the GPT-2 regex; spaces kept
    ((_DIGITS, _BYTE_LEVEL), True, "starcoder"),  # the same split, spaces cleaned
)


def chkhsh(tokenizer: Any) -> str:
    """convert_hf_to_gguf.py's fingerprint of a tokenizer's pre-tokenizer (and vocabulary)."""
    return hashlib.sha256(str(tokenizer.encode(CHKTXT)).encode()).hexdigest()


def _layout_name(tokenizer_json: dict[str, Any], clean_up_spaces: bool) -> str | None:
    if tokenizer_json.get("normalizer") or (tokenizer_json.get("decoder") or {}).get("type") != "ByteLevel":
        return None
    pre = tokenizer_json.get("pre_tokenizer") or {}
    parts = (pre.get("pretokenizers") or []) if pre.get("type") == "Sequence" else [pre]

    def same(part: dict[str, Any], want: dict[str, Any]) -> bool:
        # trim_offsets only moves offsets, never the split
        return all(part.get(k, True if k == "use_regex" else None) == v for k, v in want.items())

    for layout, clean, name in _LAYOUTS:
        if (
            len(parts) == len(layout)
            and all(same(p, w) for p, w in zip(parts, layout, strict=True))
            and clean_up_spaces == clean
        ):
            return name
    return None


def pre_tokenizer_name(tokenizer: Any, tokenizer_json: dict[str, Any]) -> str:
    """llama.cpp's name for how ``tokenizer`` splits text before BPE (``tokenizer.ggml.pre``).

    As convert_hf_to_gguf.py: the hash of its encoding of ``CHKTXT`` in llama.cpp's table; else the plain
    tokenizer.json layouts that one llama.cpp pre-tokenizer reproduces exactly (``_LAYOUTS``); else refused."""
    digest = chkhsh(tokenizer)
    if digest in KNOWN_PRE_TOKENIZERS:
        return KNOWN_PRE_TOKENIZERS[digest]
    clean = bool(getattr(tokenizer, "clean_up_tokenization_spaces", False))
    name = _layout_name(tokenizer_json, clean)
    if name is None:
        raise GGUFExportError(
            f"unknown pre-tokenizer: llama.cpp has no pre-tokenizer known to split text as this tokenizer does "
            f"(chkhsh {digest} is not in convert_hf_to_gguf.py's table, and tokenizer.json's pre_tokenizer "
            f"{json.dumps(tokenizer_json.get('pre_tokenizer'))[:300]} with clean_up_tokenization_spaces={clean} is "
            "not a layout that one of them reproduces). Writing a guessed name would give a GGUF that llama.cpp "
            "refuses or tokenizes differently from the model's training; convert with llama.cpp's "
            "convert_hf_to_gguf.py once it knows this tokenizer"
        )
    return name


def special_token_flags(tokenizer: Any) -> dict[str, bool]:
    """Whether the tokenizer adds BOS / EOS to an encoded text (``tokenizer.ggml.add_{bos,eos}_token``), read off
    what it does rather than off config keys that transformers versions spell differently."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    starts = (
        len(full) > len(plain) and bos is not None and full[:1] == [bos] and full[1 : 1 + len(plain)] == plain
    )
    ends = (
        len(full) > len(plain)
        and eos is not None
        and full[-1:] == [eos]
        and full[-1 - len(plain) : -1] == plain
    )
    return {"bos": bool(starts), "eos": bool(ends)}


def _tokens(model_dir: Path, vocab_size: int) -> tuple[list[str], list[int], str, dict[str, bool]]:
    """Every token id's text and GGUF token type, padded to the model's vocabulary size; the pre-tokenizer name;
    the add-bos/add-eos flags."""
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
    return tokens, [int(t) for t in types], pre_tokenizer_name(tok, tj), special_token_flags(tok)


def write_gguf(
    model_dir: Path, out_path: Path, fmt: str = "f16", name: str = "bashgym-operator"
) -> GGUFFileInfo:
    """Write the Llama model in ``model_dir`` (safetensors + tokenizer) as one GGUF file of format ``fmt``."""
    import gguf
    import torch
    from gguf.quants import quantize
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from bashgym_assets.inference.turns import turn_stops

    if fmt not in FORMATS:
        raise GGUFExportError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    model_dir, out_path = Path(model_dir), Path(out_path)
    config = AutoConfig.from_pretrained(model_dir)
    if config.model_type != "llama":
        raise GGUFExportError(
            f"model type {config.model_type!r}: only Llama-architecture models are mapped here"
        )
    n_layers, n_head = config.num_hidden_layers, config.num_attention_heads
    n_head_kv = getattr(config, "num_key_value_heads", None) or n_head
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // n_head
    rope: dict[str, Any] = getattr(config, "rope_parameters", None) or {}
    # rope_parameters' (transformers 5) or the older config attribute: a number from the config's JSON
    theta: Any = rope.get("rope_theta") or getattr(config, "rope_theta", 10000.0)
    rope_theta = float(theta)
    if rope.get("rope_type", "default") not in ("default", None):
        raise GGUFExportError(f"rope scaling {rope.get('rope_type')!r} is not mapped")

    tokens, token_types, pre, add_special = _tokens(model_dir, config.vocab_size)
    arch = gguf.MODEL_ARCH.LLAMA
    writer = gguf.GGUFWriter(str(out_path), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_type(gguf.GGUFType.MODEL)
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
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    special = gguf.SpecialVocab(model_dir, load_merges=True, n_vocab=len(tokens))
    if not special.merges:
        raise GGUFExportError("tokenizer.json has no BPE merges")
    special.add_special_token = dict(add_special)  # what the HF tokenizer does, whatever SpecialVocab guessed
    special.add_to_gguf(writer, quiet=True)  # merges, bos/eos/pad/unk ids, add_bos/add_eos, chat template
    if "eot" not in special.special_token_ids:  # SpecialVocab sets it only from an odd post-processor
        writer.add_eot_token_id(turn_stops(AutoTokenizer.from_pretrained(model_dir)).end_of_turn_id)

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
    return GGUFFileInfo(
        path=str(out_path),
        format=fmt,
        size_bytes=out_path.stat().st_size,
        tensors=count,
        tokens=len(tokens),
        pre_tokenizer=pre,
    )
