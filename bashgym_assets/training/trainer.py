"""LoRA SFT with the assistant-only mask and packing, optional 4-bit QLoRA, DPO on top of an SFT adapter.

A plain PEFT loop rather than TRL's trainers: SmolLM2's template has no generation markers (so TRL's own
assistant mask refuses it), we pack with restarting ``position_ids`` ourselves, and the same loop serves the
packed-vs-padded benchmark. The base model is loaded read-only; a run writes

* ``output_dir``: the adapter and nothing else (``adapter_config.json`` + ``adapter_model.safetensors``),
  atomically at the end, so a half-trained run never looks finished;
* ``checkpoint_dir``: adapter + optimizer + scheduler + RNG + history every ``save_every`` steps, so a killed
  run resumes where it stopped (``resume=True``) and ends bit-for-bit where an uninterrupted one would.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bashgym_assets.training.masking import (
    IGNORE_INDEX,
    Batch,
    MaskReport,
    TokenizedExample,
    inspect_examples,
    packed_batches,
    padded_batches,
    tokenize_conversation,
)

Messages = Sequence[dict[str, str]]
LogFn = Callable[[dict[str, float]], None]


class TrainConfig(BaseModel):
    """Everything a run needs; logged to MLflow as params."""

    base_model: str
    output_dir: str = Field(description="named run folder that ends up holding only the adapter")
    checkpoint_dir: str | None = Field(None, description="resumable state (default: <output_dir>.ckpt)")
    run_name: str = "run"
    max_length: int = 512
    batch_size: int = 4
    grad_accum: int = 1
    learning_rate: float = 2e-4
    epochs: float = 1.0
    max_steps: int | None = None
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: str | list[str] = "all-linear"
    packing: bool = True
    qlora: bool = False
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    attn_implementation: str = "sdpa"
    device: str | None = None
    seed: int = 0
    save_every: int = 50
    resume: bool = True
    # DPO only
    beta: float = 0.1

    def ckpt_dir(self) -> Path:
        return Path(self.checkpoint_dir) if self.checkpoint_dir else Path(f"{self.output_dir}.ckpt")


class TrainResult(BaseModel):
    """What a run did: its history is the per-step log (loss, lr, grad-norm, tokens)."""

    kind: str
    adapter_dir: str
    steps: int
    resumed_from_step: int = 0
    history: list[dict[str, float]]
    final_loss: float | None
    validation_loss: float | None = None
    train_examples: int
    train_tokens: int
    trained_tokens: int
    tokens_per_s: float
    wall_s: float
    trainable_parameters: int
    mask: MaskReport | None = None
    extra: dict[str, float] = Field(default_factory=dict)


def pick_device(config: TrainConfig) -> str:
    import torch

    if config.device:
        return config.device
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_tokenizer(base_model: str) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_base(config: TrainConfig) -> Any:
    """The frozen base model (fp32 / bf16, or 4-bit NF4 for QLoRA), with the KV cache off for packing."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, config.dtype)
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": config.attn_implementation}
    if config.qlora:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype,
            bnb_4bit_use_double_quant=True)
    model = AutoModelForCausalLM.from_pretrained(config.base_model, **kwargs)
    model.config.use_cache = False  # packing relies on position ids; no cache while training
    if config.qlora:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    else:
        model.to(pick_device(config))
    return model


def add_lora(model: Any, config: TrainConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=config.target_modules, task_type="CAUSAL_LM", bias="none")
    return get_peft_model(model, lora)


def tokenize_all(tokenizer: Any, conversations: Sequence[Messages], max_length: int) -> list[TokenizedExample]:
    return [tokenize_conversation(tokenizer, m, max_length=max_length) for m in conversations]


def inspect(base_model: str, conversations: Sequence[Messages], max_length: int = 512) -> MaskReport:
    """The ``--inspect`` report: mask statistics and a marked-up sample, without loading any weights."""
    tok = load_tokenizer(base_model)
    return inspect_examples(tok, tokenize_all(tok, conversations, max_length))


def make_batches(examples: Sequence[TokenizedExample], config: TrainConfig, pad_id: int, epoch: int) -> list[Batch]:
    seed = config.seed * 1000 + epoch
    if config.packing:
        return packed_batches(examples, config.max_length, config.batch_size, pad_id, seed=seed)
    return padded_batches(examples, config.max_length, config.batch_size, pad_id, seed=seed, pad_to_max=True)


def forward_loss(model: Any, batch: Batch, device: str) -> Any:
    kwargs: dict[str, Any] = {"input_ids": batch.input_ids.to(device), "labels": batch.labels.to(device),
                              "use_cache": False}
    if batch.position_ids is not None:
        kwargs["position_ids"] = batch.position_ids.to(device)
    if batch.attention_mask is not None:
        kwargs["attention_mask"] = batch.attention_mask.to(device)
    return model(**kwargs).loss


def evaluate_loss(model: Any, examples: Sequence[TokenizedExample], config: TrainConfig, pad_id: int) -> float | None:
    """Mean token loss on held-back examples (validation split), padded per batch, no packing."""
    import torch

    if not examples:
        return None
    device = pick_device(config)
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for b in padded_batches(examples, config.max_length, config.batch_size, pad_id, pad_to_max=False):
            k = int((b.labels[:, 1:] != IGNORE_INDEX).sum())
            if k:
                total += float(forward_loss(model, b, device)) * k
                n += k
    model.train()
    return total / n if n else None


# ---- checkpoints --------------------------------------------------------------------------------------
def _save_checkpoint(model: Any, optimizer: Any, scheduler: Any, step: int, history: list, ckpt: Path) -> None:
    import torch

    ckpt.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-ckpt.", dir=ckpt.parent))
    try:
        model.save_pretrained(tmp / "adapter")
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": step,
                    "python_rng": random.getstate(), "torch_rng": torch.get_rng_state()}, tmp / "state.pt")
        (tmp / "history.json").write_text(json.dumps(history))
        if ckpt.exists():
            shutil.rmtree(ckpt)
        os.replace(tmp, ckpt)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load_checkpoint(model: Any, optimizer: Any, scheduler: Any, ckpt: Path) -> tuple[int, list]:
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    set_peft_model_state_dict(model, load_file(str(ckpt / "adapter" / "adapter_model.safetensors")))
    state = torch.load(ckpt / "state.pt", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    random.setstate(state["python_rng"])
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"]), json.loads((ckpt / "history.json").read_text())


def _publish_adapter(model: Any, output_dir: Path) -> None:
    """Write only the adapter into the run folder, atomically (tmp folder + rename)."""
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{output_dir.name}.", dir=output_dir.parent))
    try:
        model.save_pretrained(tmp)
        for extra in tmp.iterdir():  # PEFT writes a README.md model card: the folder holds the adapter only
            if extra.name not in ("adapter_config.json", "adapter_model.safetensors"):
                extra.unlink() if extra.is_file() else shutil.rmtree(extra)
        if output_dir.exists():
            shutil.rmtree(output_dir)
        os.replace(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _make_optimizer(model: Any, config: TrainConfig, total_steps: int) -> tuple[Any, Any]:
    import torch
    from transformers import get_linear_schedule_with_warmup

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, config.warmup_steps, total_steps)
    return optimizer, scheduler


def _peak_memory_mb(device: str) -> float:
    import resource

    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- SFT ----------------------------------------------------------------------------------------------
def train_sft(config: TrainConfig, train: Sequence[Messages], validation: Sequence[Messages] = (),
              on_log: LogFn | None = None, stop_after: int | None = None) -> TrainResult:
    """LoRA SFT on chat conversations; loss on assistant turns only. ``stop_after`` simulates a crash (tests)."""
    import torch

    torch.manual_seed(config.seed)
    random.seed(config.seed)
    tokenizer = load_tokenizer(config.base_model)
    examples = tokenize_all(tokenizer, train, config.max_length)
    examples = [e for e in examples if e.n_trained > 0]
    if not examples:
        raise ValueError("no training example has an assistant token inside max_length")
    val_examples = [e for e in tokenize_all(tokenizer, validation, config.max_length) if e.n_trained > 0]
    pad_id = tokenizer.pad_token_id
    device = pick_device(config)
    model = add_lora(load_base(config), config)
    model.train()

    per_epoch = len(make_batches(examples, config, pad_id, 0))
    steps_per_epoch = max(1, math.ceil(per_epoch / config.grad_accum))
    total_steps = config.max_steps or max(1, math.ceil(steps_per_epoch * config.epochs))
    optimizer, scheduler = _make_optimizer(model, config, total_steps)

    ckpt = config.ckpt_dir()
    step, history = 0, []
    if config.resume and (ckpt / "state.pt").exists():
        step, history = _load_checkpoint(model, optimizer, scheduler, ckpt)
    resumed_from = step

    cache: dict[int, list[Batch]] = {}

    def micro_batch(i: int) -> Batch:  # a deterministic infinite stream: epoch e reshuffles with seed e
        epoch, k = divmod(i, per_epoch)
        if epoch not in cache:
            cache.clear()
            cache[epoch] = make_batches(examples, config, pad_id, epoch)
        return cache[epoch][k]

    tokens = 0
    t0 = time.perf_counter()
    while step < total_steps:
        optimizer.zero_grad(set_to_none=True)
        loss_sum, real = 0.0, 0
        for a in range(config.grad_accum):
            batch = micro_batch(step * config.grad_accum + a)
            loss = forward_loss(model, batch, device) / config.grad_accum
            loss.backward()
            loss_sum += float(loss.detach())
            real += batch.real_tokens
        grad_norm = torch.nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if p.requires_grad], config.max_grad_norm)
        lr = scheduler.get_last_lr()[0]
        optimizer.step()
        scheduler.step()
        step += 1
        tokens += real
        row = {"step": step, "loss": loss_sum, "learning_rate": lr, "grad_norm": float(grad_norm),
               "tokens": real, "epoch": step / steps_per_epoch}
        history.append(row)
        if on_log:
            on_log(row)
        if step % config.save_every == 0 or step == total_steps:
            _save_checkpoint(model, optimizer, scheduler, step, history, ckpt)
        if stop_after is not None and step >= stop_after and step < total_steps:
            raise KeyboardInterrupt(f"stopped after step {step} (simulated crash)")
    wall = time.perf_counter() - t0
    val_loss = evaluate_loss(model, val_examples, config, pad_id)
    _publish_adapter(model, Path(config.output_dir))
    return TrainResult(
        kind="sft", adapter_dir=config.output_dir, steps=step, resumed_from_step=resumed_from, history=history,
        final_loss=history[-1]["loss"] if history else None, validation_loss=val_loss,
        train_examples=len(examples), train_tokens=sum(e.n_tokens for e in examples),
        trained_tokens=sum(e.n_trained for e in examples), tokens_per_s=tokens / wall if wall > 0 else 0.0,
        wall_s=wall, trainable_parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
        mask=inspect_examples(tokenizer, examples),
        extra={"peak_memory_mb": _peak_memory_mb(device)})


# ---- DPO ----------------------------------------------------------------------------------------------
def _pair_examples(tokenizer: Any, pair: dict[str, Any], max_length: int) -> tuple[TokenizedExample, ...]:
    prompt = list(pair["prompt"])
    chosen = tokenize_conversation(tokenizer, prompt + list(pair["chosen"]), max_length, from_message=len(prompt))
    rejected = tokenize_conversation(tokenizer, prompt + list(pair["rejected"]), max_length,
                                     from_message=len(prompt))
    return chosen, rejected


def _sequence_logps(model: Any, examples: Sequence[TokenizedExample], pad_id: int, device: str) -> Any:
    """Sum of log-probabilities of the labelled (assistant, post-prompt) tokens of each example."""
    import torch

    width = max(e.n_tokens for e in examples)
    ids = torch.tensor([e.input_ids + [pad_id] * (width - e.n_tokens) for e in examples], device=device)
    labels = torch.tensor([e.labels + [IGNORE_INDEX] * (width - e.n_tokens) for e in examples], device=device)
    mask = torch.tensor([[1] * e.n_tokens + [0] * (width - e.n_tokens) for e in examples], device=device)
    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, :-1].float()
    target = labels[:, 1:]
    keep = target != IGNORE_INDEX
    logp = torch.log_softmax(logits, -1).gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (logp * keep).sum(-1)


def train_dpo(config: TrainConfig, pairs: Sequence[dict[str, Any]], sft_adapter: str,
              on_log: LogFn | None = None) -> TrainResult:
    """DPO on top of an SFT adapter: the policy starts from the SFT adapter and the reference IS the SFT model
    (its log-probs are computed once, before any update), so the preference moves away from SFT, not the base."""
    import torch
    import torch.nn.functional as F
    from peft import PeftModel

    torch.manual_seed(config.seed)
    tokenizer = load_tokenizer(config.base_model)
    pad_id = tokenizer.pad_token_id
    device = pick_device(config)
    data = [_pair_examples(tokenizer, p, config.max_length) for p in pairs]
    data = [(c, r) for c, r in data if c.n_trained and r.n_trained]
    if not data:
        raise ValueError("no DPO pair has scored tokens in both continuations inside max_length")
    model = PeftModel.from_pretrained(load_base(config), sft_adapter, is_trainable=True)
    model.eval()
    with torch.no_grad():
        ref = [(_sequence_logps(model, [c], pad_id, device)[0], _sequence_logps(model, [r], pad_id, device)[0])
               for c, r in data]
    model.train()
    per_epoch = math.ceil(len(data) / config.batch_size)
    total_steps = config.max_steps or max(1, math.ceil(per_epoch * config.epochs))
    optimizer, scheduler = _make_optimizer(model, config, total_steps)
    history = []
    order = list(range(len(data)))
    tokens = 0
    t0 = time.perf_counter()
    for step in range(1, total_steps + 1):
        k = (step - 1) % per_epoch
        if k == 0:
            random.Random(config.seed + step).shuffle(order)
        idx = order[k * config.batch_size:(k + 1) * config.batch_size]
        chosen = [data[i][0] for i in idx]
        rejected = [data[i][1] for i in idx]
        logps = _sequence_logps(model, chosen + rejected, pad_id, device)
        pc, pr = logps[: len(idx)], logps[len(idx):]
        rc = torch.stack([ref[i][0] for i in idx])
        rr = torch.stack([ref[i][1] for i in idx])
        margin = config.beta * ((pc - rc) - (pr - rr))
        loss = -F.logsigmoid(margin).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if p.requires_grad], config.max_grad_norm)
        lr = scheduler.get_last_lr()[0]
        optimizer.step()
        scheduler.step()
        real = sum(e.n_tokens for e in chosen + rejected)
        tokens += real
        row = {"step": step, "loss": float(loss.detach()), "learning_rate": lr, "grad_norm": float(grad_norm),
               "reward_accuracy": float((margin > 0).float().mean()), "reward_margin": float(margin.detach().mean()),
               "tokens": real}
        history.append(row)
        if on_log:
            on_log(row)
    wall = time.perf_counter() - t0
    _publish_adapter(model, Path(config.output_dir))
    return TrainResult(
        kind="dpo", adapter_dir=config.output_dir, steps=total_steps, history=history,
        final_loss=history[-1]["loss"], train_examples=len(data),
        train_tokens=sum(c.n_tokens + r.n_tokens for c, r in data),
        trained_tokens=sum(c.n_trained + r.n_trained for c, r in data),
        tokens_per_s=tokens / wall if wall > 0 else 0.0, wall_s=wall,
        trainable_parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
        extra={"peak_memory_mb": _peak_memory_mb(device),
               "final_reward_accuracy": history[-1]["reward_accuracy"]})


# ---- loading back -------------------------------------------------------------------------------------
def load_adapter(base_model: str, adapter_dir: str) -> tuple[Any, Any]:
    """Base + adapter ready to generate (the base folder is untouched)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    tok = load_tokenizer(base_model)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_model), adapter_dir)
    model.eval()
    return model, tok


def generate(model: Any, tokenizer: Any, messages: Messages, max_new_tokens: int = 32) -> str:
    """Greedy next assistant turn for a conversation."""
    import torch

    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    enc = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
