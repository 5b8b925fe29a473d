"""A tiny, locally built chat model (ChatML, byte-level BPE, 2-layer Llama) for fast, offline tests.

It exercises exactly the code paths of the real base model (chat template, offsets, LoRA on every linear layer,
packing via position ids) in milliseconds, so unit tests do not need the 135 M-parameter SmolLM2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "ls -la /home/operator && cat notes.txt | grep -c error",
    "You are a shell operator. Run one command per turn; type exit when the task is done.",
    "find . -name '*.log' -mtime +7 -delete; tar -czf backup.tar.gz data/",
    "mkdir -p reports && sort -u names.txt > reports/unique.txt && wc -l reports/unique.txt",
    "chmod 600 secret.key; chown operator:operator secret.key; echo done",
    "git init && git add . && git commit -m 'initial commit' exit",
    "total 12 drwxr-xr-x 2 operator operator 4096 Nov 22 10:00 . -rw-r--r-- 1 operator 42 file.txt",
    "The quick brown fox jumps over the lazy dog 0123456789 [exit 1] No such file or directory",
]


def build_tiny_model(
    out_dir: Path,
    vocab_size: int = 512,
    hidden: int = 64,
    layers: int = 2,
    seed: int = 0,
    init_range: float = 0.5,
) -> Path:
    """Train a byte-level BPE on a small shell corpus and save a random tiny Llama + tokenizer to ``out_dir``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHATML_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
        initializer_range=init_range,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    fast.save_pretrained(out_dir)
    return out_dir


def with_smollm_pre_tokenizer(folder: Path) -> Path:
    """Give a tiny model SmolLM's own pre-tokenizer layout (digits one by one, then byte-level): a tokenizer
    trained from scratch is in no hash table, but this layout is one llama.cpp reproduces exactly (``smollm``), so
    the exporter accepts it."""
    import json

    tj = json.loads((folder / "tokenizer.json").read_text())
    tj["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [{"type": "Digits", "individual_digits": True}, tj["pre_tokenizer"]],
    }
    (folder / "tokenizer.json").write_text(json.dumps(tj))
    return folder


def random_lora_adapter(base: Path, out: Path, scale: float = 1.0, seed: int = 1) -> Path:
    """A random (non-zero) LoRA adapter on every linear layer of ``base``, its B matrices scaled by ``scale``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    peft_model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base),
        LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False),
    )
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.mul_(scale)
    peft_model.save_pretrained(str(out))
    return out


def register_adapter(settings: Any, base: Path, adapter: Path, run_name: str = "tiny") -> Any:
    """Log ``adapter`` as an SFT training run on ``base`` and register it, as a finished training would."""
    from bashgym_assets.training import registry

    return registry.log_training_run(
        kind="sft",
        run_name=run_name,
        params={},
        history=[],
        summary={},
        adapter_dir=str(adapter),
        tags={},
        settings=settings,
        base_model=str(base),
    )
