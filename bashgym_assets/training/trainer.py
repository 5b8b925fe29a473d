"""LoRA / QLoRA SFT and DPO on TRL's trainers (``SFTTrainer``, ``DPOTrainer``), plus the little TRL does not do.

TRL 1.16 does the training: tokenisation with the assistant-only mask (``assistant_only_loss=True``), best-fit
packing into padding-free batches whose ``position_ids`` restart at every example (transformers turns them into a
block-diagonal mask, so packed examples never see each other), the optimiser, accumulation, schedule, checkpoints
(``save_steps``) and ``resume_from_checkpoint``, evaluation on the validation split, and for DPO the reference
log-probabilities, precomputed once from a frozen copy of the SFT adapter. This module adds:

* the training chat template: TRL masks by the template's ``{% generation %}`` blocks, which SmolLM2's template
  lacks, so ``bashgym_assets/data/chat_templates`` ships ``<name>_training.jinja`` for each stock template
  ``<name>.jinja`` it recognises (byte-identical rendering, each assistant turn's content and end-of-turn token
  inside the block); other models use their own marked template or TRL's (Qwen, Llama 3, Gemma, Phi ...);
* ``on_log``: every optimizer step (and every evaluation) as a plain row with n/N and an ETA, so the Dagster
  asset and the CLI print progress and send the curves to MLflow while the run is going;
* the run folder: ``output_dir`` ends up holding only the adapter, written atomically at the end, so a
  half-trained run never looks finished; the Trainer's ``checkpoint-N`` folders live in ``checkpoint_dir``;
* the mask report (``MaskReport``), built from the labels TRL trains on, and a check of those labels against
  ``masking.tokenize_conversation`` on the first conversations (a template that marks too much or too little).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from bashgym_assets.training.masking import (
    IGNORE_INDEX,
    UNTRAINED,
    MaskError,
    MaskReport,
    TokenizedExample,
    inspect_examples,
    is_untrained,
    normalise_messages,
    tokenize_conversation,
)

Messages = Sequence[dict[str, str]]
LogFn = Callable[[dict[str, float]], None]

logger = logging.getLogger(__name__)

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "data" / "chat_templates"
PROGRESS_KEYS = ("total_steps", "eta_s")  # added to each on_log row, not part of the history
# Trainer log keys that are bookkeeping rather than a per-step curve
_SKIPPED_LOG_KEYS = {"step", "num_input_tokens_seen", "num_tokens", "total_flos"}
_RENAMED_LOG_KEYS = {"rewards/accuracies": "reward_accuracy", "rewards/margins": "reward_margin"}
# ``TrainHyperparams.lr_schedule`` -> transformers' scheduler (``constant_with_warmup``: flat after the warm-up)
LR_SCHEDULERS = {"linear": "linear", "constant": "constant_with_warmup"}


#: The two fields whose default GRPO changes (``training.grpo.GRPOHyperparams``): their type and text, declared once.
MaxSteps = Annotated[int | None, Field(description="stop after this many optimizer steps (CPU demos, tests)")]
LearningRate = Annotated[float, Field(description="peak learning rate (linear decay)")]


class SharedHyperparams(BaseModel):
    """How any run trains, SFT, DPO or GRPO: the fields every trainer honours. ``TrainHyperparams`` adds those of
    SFT and DPO; GRPO's run config is built on these (``training.grpo.GRPOHyperparams``), so none is declared
    twice."""

    max_steps: MaxSteps = None
    learning_rate: LearningRate = 2e-4
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="float32",
        description="training precision; auto: bfloat16 where the device computes it fast (a CUDA card with "
        "bf16, a CPU with AVX-512 BF16 or AMX), else float32",
    )
    qlora: bool = Field(default=False, description="load the base in 4-bit (bitsandbytes) under the LoRA")
    attn_implementation: str = Field(default="sdpa", description="transformers attention implementation")
    save_every: int = Field(default=50, description="checkpoint (and validate) every N steps")
    warmup_steps: int = Field(default=0, description="linear warmup steps")


class TrainHyperparams(SharedHyperparams):
    """How a run trains: the one definition the trainer's ``TrainConfig``, the training assets' run config
    (``defs.training.TrainRunConfig``) and ``python -m bashgym_assets.training`` share (TRL's pattern: one config
    beside the trainer, instead of the same fields copied into three places)."""

    epochs: float = Field(default=1.0, description="passes over the train rows")
    # One packed row per micro-step, four per optimizer step: padding-free packing flattens a whole micro-batch into
    # ONE sequence, so its attention is quadratic in batch_size x max_length; one row at a time keeps it per row
    # (1.75x the tokens/s of batch 4 at 0.37x the memory, same effective batch, 2-core CPU: BENCHMARKS.md).
    # On a GPU raise batch_size instead.
    batch_size: int = Field(default=1, description="packed rows per micro-step (CPU: 1 is fastest)")
    grad_accum: int = Field(default=4, description="micro-steps per optimizer step")
    max_length: int = Field(default=512, description="tokens per packed row")
    packing: bool = Field(default=True, description="pack conversations into rows (padding-free)")
    lora_r: int = Field(default=16, description="LoRA rank")
    lora_alpha: int = Field(default=32, description="LoRA alpha")
    # GRPO's KL coefficient is another quantity with the same TRL name: GRPOSettings.beta
    beta: float = Field(default=0.1, description="DPO only: the KL strength")
    # SFT only: easy tasks first (training.curriculum: needs a stage per train conversation, train_sft's ``stages``)
    curriculum: bool = Field(default=False, description="SFT: easy tasks first (sft_dataset's difficulty)")
    # The loss over the trained (assistant) positions only: the hidden states of those positions go through the LM
    # head, no entropy. TRL's CPU path scores every position of the 49k-token head, with its entropy
    # (BENCHMARKS.md, issue 29). False: TRL's own compute_loss.
    lean_loss: bool = Field(default=True, description="SFT: the loss over trained positions only, no entropy")
    # constant: the rate stays at its peak after the warm-up, so a run resumed with more epochs goes on with the same
    # schedule (the learning study trains in segments and evaluates between them: evaluation.learning_study)
    lr_schedule: Literal["linear", "constant"] = Field(
        default="linear", description="after the warm-up: linear decay to 0, or constant"
    )


def auto_dtype(device: str | None = None) -> Literal["float32", "bfloat16"]:
    """What ``dtype: auto`` trains in here: bfloat16 on a CUDA card that supports it or a CPU with AVX-512 BF16 or
    AMX (1.75x float32 on such a CPU: BENCHMARKS.md), float32 elsewhere (bfloat16 without those units is slower
    than float32 on a CPU). The CPU's from /proc/cpuinfo: torch offers no query for its bf16 units."""
    import torch

    if (device or "").startswith("cuda") or (device is None and torch.cuda.is_available()):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if {"avx512_bf16", "amx_bf16"} & cpu_flags() else "float32"


def cpu_flags() -> set[str]:
    """The CPU's feature flags (/proc/cpuinfo; none where it cannot be read)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return next(
        (set(line.split(":", 1)[1].split()) for line in cpuinfo.splitlines() if line.startswith("flags")),
        set(),
    )


class TrainConfig(TrainHyperparams):
    """Everything a run needs: how it trains (``TrainHyperparams``) and where; logged to MLflow as params.
    ``dtype: auto`` is resolved here, where the run trains, so what is logged and saved is the precision used."""

    base_model: str
    output_dir: str = Field(description="named run folder that ends up holding only the adapter")
    checkpoint_dir: str | None = Field(
        default=None, description="Trainer checkpoints (default: <output_dir>.ckpt)"
    )
    run_name: str = "run"
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lora_dropout: float = 0.05
    target_modules: str | list[str] = "all-linear"
    device: str | None = None
    seed: int = 0
    resume: bool = True
    start_adapter: str | None = Field(
        default=None,
        description="SFT: a LoRA adapter to train further (new rows on a fitted checkpoint) instead of a fresh one",
    )

    @model_validator(mode="after")
    def _resolve_auto_dtype(self) -> TrainConfig:
        if self.dtype == "auto":
            self.dtype = auto_dtype(self.device)
        return self

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


# ---- tokenizer and chat template ----------------------------------------------------------------------
def load_tokenizer(base_model: str) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def shipped_training_template(chat_template: str | None) -> Path | None:
    """Our training variant of a stock chat template we recognise (exact text match), or None."""
    if not chat_template:
        return None
    for stock in sorted(TEMPLATES_DIR.glob("*.jinja")):
        training = stock.with_name(f"{stock.stem}_training.jinja")
        if training.exists() and stock.read_text(encoding="utf-8").strip() == chat_template.strip():
            return training
    return None


def training_tokenizer(base_model: str) -> Any:
    """The tokenizer with a chat template TRL can mask by: the model's own when it already has ``{% generation %}``
    markers, else the shipped training variant of its stock template, else TRL's own for the families it knows."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    tok = load_tokenizer(base_model)
    if tok.chat_template and has_generation_markers(tok.chat_template):
        return tok
    shipped = shipped_training_template(tok.chat_template)
    if shipped is not None:
        tok.chat_template = shipped.read_text(encoding="utf-8")
        return tok
    try:
        tok.chat_template = get_training_chat_template(tok) or tok.chat_template
    except ValueError as exc:
        raise MaskError(
            f"{base_model}: its chat template has no {{% generation %}} markers and neither TRL nor "
            f"{TEMPLATES_DIR} has a training variant of it; add <name>.jinja (the stock template) and "
            "<name>_training.jinja (the same with each assistant turn inside a generation block)"
        ) from exc
    return tok


def tokenize_for_training(
    tokenizer: Any, messages: Sequence[Any], max_length: int | None = None
) -> TokenizedExample:
    """One conversation as TRL tokenises it for ``assistant_only_loss`` (the template's assistant mask -> labels)."""
    out = tokenizer.apply_chat_template(
        normalise_messages(messages), tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids = list(out["input_ids"])
    labels = [t if m else IGNORE_INDEX for t, m in zip(ids, out["assistant_masks"], strict=True)]
    truncated = max_length is not None and len(ids) > max_length
    if truncated:
        ids, labels = ids[:max_length], labels[:max_length]
    return TokenizedExample(ids, labels, truncated)


def check_training_template(tokenizer: Any, conversations: Sequence[Messages]) -> int:
    """How many of these conversations the training template labels differently from the offsets reference
    (``masking.tokenize_conversation``); 0 for a template that marks exactly the assistant turns + end token."""
    bad = 0
    for messages in conversations:
        try:
            reference = tokenize_conversation(tokenizer, messages)
        except MaskError:  # not prefix-stable: the reference cannot judge this template
            continue
        if tokenize_for_training(tokenizer, messages).labels != reference.labels:
            bad += 1
    return bad


def inspect(base_model: str, conversations: Sequence[Messages], max_length: int = 512) -> MaskReport:
    """The ``--inspect`` report: mask statistics and a marked-up sample, without loading any weights."""
    tok = training_tokenizer(base_model)
    return inspect_examples(tok, [tokenize_for_training(tok, m, max_length) for m in conversations])


# ---- model ----------------------------------------------------------------------------------------------
def load_base(config: TrainConfig) -> Any:
    """The frozen base model (fp32 / bf16, or 4-bit NF4 for QLoRA), with the KV cache off for packing."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, config.dtype)
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": config.attn_implementation}
    if config.qlora:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=dtype,
            bnb_4bit_use_double_quant=True,
        )
    model = AutoModelForCausalLM.from_pretrained(config.base_model, **kwargs)
    model.config.use_cache = False  # packing relies on position ids; no cache while training
    if config.qlora:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    else:
        # transformers wraps PreTrainedModel.to in a decorator whose annotation drops ``self``
        model.to(pick_device(config))
    return model


def lora_config(config: TrainConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=config.target_modules,
        task_type="CAUSAL_LM",
        bias="none",
    )


def trainer_args(config_cls: type, config: TrainConfig, evaluate: bool, **extra: Any) -> Any:
    """SFTConfig / DPOConfig with every CPU-relevant default set explicitly (TRL's own defaults are GPU ones:
    bf16 and gradient checkpointing on, lr 2e-5, and transformers reports to MLflow whenever it is installed, into a
    run of its own at cwd-relative URIs; the per-step rows go through ``on_log`` instead, see registry.LiveMetrics).
    ``activation_checkpointing`` is transformers 5's name for ``gradient_checkpointing``."""
    import dataclasses

    device = pick_device(config)
    if "max_length" in {
        f.name for f in dataclasses.fields(config_cls)
    }:  # GRPOConfig has none: episodes set it
        extra.setdefault("max_length", config.max_length)
    return config_cls(
        output_dir=str(config.ckpt_dir()),
        run_name=config.run_name,
        seed=config.seed,
        data_seed=config.seed,
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        learning_rate=config.learning_rate,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1,
        warmup_steps=config.warmup_steps,
        lr_scheduler_type=LR_SCHEDULERS[config.lr_schedule],
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        bf16=config.dtype == "bfloat16",
        fp16=config.dtype == "float16",
        activation_checkpointing=False,
        use_cpu=device == "cpu",
        dataloader_num_workers=0,
        dataloader_pin_memory=device != "cpu",
        logging_strategy="steps",
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_every,
        save_total_limit=2,
        eval_strategy="steps" if evaluate else "no",
        eval_steps=config.save_every if evaluate else None,
        report_to="none",
        disable_tqdm=True,
        **extra,
    )


# ---- per-step rows, progress, crash simulation ------------------------------------------------------------
def _train_row(entry: dict[str, Any], tokens_before: int) -> dict[str, float]:
    row: dict[str, float] = {"step": int(entry["step"])}
    for k, v in entry.items():
        if k in _SKIPPED_LOG_KEYS or k.startswith("train_") or not isinstance(v, int | float):
            continue
        row[_RENAMED_LOG_KEYS.get(k, k.replace("/", "_"))] = float(v)
    if "num_input_tokens_seen" in entry:
        row["tokens"] = int(entry["num_input_tokens_seen"]) - tokens_before
    return row


def _eval_row(entry: dict[str, Any]) -> dict[str, float]:
    row: dict[str, float] = {"step": int(entry["step"])}
    for k, v in entry.items():
        if not k.startswith("eval_") or k in ("eval_runtime", "eval_num_tokens") or k.endswith("_per_second"):
            continue
        if isinstance(v, int | float):
            row["validation_" + k.removeprefix("eval_").replace("/", "_")] = float(v)
    return row


def history_from_log(log_history: Sequence[dict[str, Any]]) -> tuple[list[dict[str, float]], float | None]:
    """The Trainer's ``state.log_history`` (restored on resume) as history rows + the last validation loss."""
    rows, val, seen = [], None, 0
    for entry in log_history:
        if "loss" in entry:
            rows.append(_train_row(entry, seen))
            seen = int(entry.get("num_input_tokens_seen", seen))
        elif "eval_loss" in entry:
            val = float(entry["eval_loss"])
    return rows, val


def progress_line(row: dict[str, float]) -> str:
    """One human line per on_log row: ``step 12/40 loss 0.8123 lr 1.20e-04 grad-norm 0.412 ETA 1m05s``."""
    n = f"{int(row['step'])}/{int(row['total_steps'])}" if "total_steps" in row else f"{int(row['step'])}"
    eta = row.get("eta_s")
    tail = f" ETA {int(eta // 60)}m{int(eta % 60):02d}s" if eta is not None else ""
    if "loss" not in row:
        return f"step {n}: validation loss {row.get('validation_loss', float('nan')):.4f}{tail}"
    extra = "".join(
        f" {k.replace('_', '-')} {row[k]:.3f}" for k in ("reward_accuracy", "reward_margin") if k in row
    )
    return (
        f"step {n}: loss {row['loss']:.4f} lr {row.get('learning_rate', 0.0):.2e} "
        f"grad-norm {row.get('grad_norm', float('nan')):.3f}{extra}{tail}"
    )


def progress_callbacks(on_log: LogFn | None, stop_after: int | None) -> tuple[Any, list[Any]]:
    """The progress callback (rows to ``on_log`` as each step is logged) and, in tests, a simulated crash."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):  # after a resume, state is the checkpoint's
            self.t0, self.step0 = time.perf_counter(), state.global_step
            self.tokens0 = self.tokens = state.num_input_tokens_seen

        def on_log(self, args, state, control, logs=None, **kwargs):
            entry = state.log_history[-1] if state.log_history else {}
            if "loss" in entry:
                row = _train_row(entry, self.tokens)
                self.tokens = int(entry.get("num_input_tokens_seen", self.tokens))
            elif "eval_loss" in entry:
                row = _eval_row(entry)
            else:
                return
            done = state.global_step - self.step0
            eta = (
                (time.perf_counter() - self.t0) / done * (state.max_steps - state.global_step)
                if done
                else None
            )
            if on_log is not None:
                on_log({**row, "total_steps": state.max_steps, **({"eta_s": eta} if eta is not None else {})})

    class StopAfter(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= stop_after and state.global_step < state.max_steps:
                raise KeyboardInterrupt(f"stopped after step {state.global_step} (simulated crash)")

    progress = Progress()
    return progress, [progress] + ([StopAfter()] if stop_after is not None else [])


def without_printer(trainer: Any) -> Any:
    """Without the Trainer's print-every-log-dict callback: progress goes through ``on_log`` instead."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer


_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_step(folder: Path) -> int | None:
    """The step a ``checkpoint-N`` folder holds, or None when the folder is incomplete: the Trainer writes
    ``trainer_state.json`` last, so a save cut short (a full disk, a kill) left none, or half of one."""
    import json

    try:
        return int(json.loads((folder / "trainer_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def resume_point(config: TrainConfig) -> tuple[str | None, int]:
    """The last complete checkpoint to resume from and its step; ``resume=False`` clears old checkpoints instead.

    An incomplete ``checkpoint-N`` (``checkpoint_step`` None: its save ran out of disk, or was killed) is removed
    with a warning, and the run resumes from the last complete one before it (or starts over): before, the
    Trainer's newest-folder rule picked it, and every rerun failed on its missing ``trainer_state.json``."""
    ckpt = config.ckpt_dir()
    if not ckpt.is_dir():
        return None, 0
    if not config.resume:
        shutil.rmtree(ckpt)
        return None, 0
    complete: list[tuple[int, int, Path]] = []
    for folder in ckpt.iterdir():
        named = _CHECKPOINT_RE.match(folder.name)
        if named is None or not folder.is_dir():
            continue
        step = checkpoint_step(folder)
        if step is None:
            logger.warning(
                "removing the incomplete checkpoint %s (no readable trainer_state.json: its save was cut short, "
                "by a full disk or a kill); the run resumes from the last complete one, if any",
                folder,
            )
            shutil.rmtree(folder, ignore_errors=True)
            continue
        complete.append((int(named.group(1)), step, folder))
    if not complete:
        return None, 0
    _, step, folder = max(complete)
    return str(folder), step


@contextlib.contextmanager
def full_disk_said(folder: Path) -> Iterator[None]:
    """A write under ``folder`` that failed for want of room raises ``OSError(ENOSPC)`` naming ``folder``
    (``faults.disk_full_error``), whatever the writer said (torch.save: "unexpected pos N vs M")."""
    from bashgym_assets.faults import disk_full_error

    try:
        yield
    except Exception as exc:
        full = disk_full_error(exc, folder)
        if full is None:
            raise
        raise full from exc


def run_training(trainer: Any, resume: str | None, config: TrainConfig) -> Any:
    """``trainer.train`` from ``resume``, a full disk under the checkpoint folder said as one (``full_disk_said``)."""
    with full_disk_said(config.ckpt_dir()):
        return trainer.train(resume_from_checkpoint=resume)


def publish_adapter(model: Any, output_dir: Path) -> None:
    """Write only the (default) adapter into the run folder, atomically (tmp folder + rename), with the modes the
    umask gives (as lake files have): another user's server, notebook or evaluation loads it."""
    from bashgym_assets.lake import follow_umask

    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{output_dir.name}.", dir=output_dir.parent))
    try:
        with full_disk_said(output_dir.parent):
            model.save_pretrained(tmp, selected_adapters=["default"])
        for extra in tmp.iterdir():  # PEFT writes a README.md model card: the folder holds the adapter only
            if extra.name not in ("adapter_config.json", "adapter_model.safetensors"):
                extra.unlink() if extra.is_file() else shutil.rmtree(extra)
        follow_umask(tmp)  # mkdtemp made it 0700 and safetensors 0600: other users must load it too
        if output_dir.exists():
            shutil.rmtree(output_dir)
        os.replace(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _peak_memory_mb(device: str) -> float:
    import resource

    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def trainable_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---- SFT ----------------------------------------------------------------------------------------------
def _chat_dataset(conversations: Sequence[Messages]) -> Any:
    from datasets import Dataset

    rows = [normalise_messages(m) for m in conversations]
    if any(is_untrained(m) for row in rows for m in row):
        # one schema for every turn (Arrow would give the others None): the templates read only ``False``
        rows = [[{**m, UNTRAINED: not is_untrained(m)} for m in row] for row in rows]
    return Dataset.from_list([{"messages": row} for row in rows])


def prepared_examples(dataset: Any) -> list[TokenizedExample]:
    """TRL's prepared SFT rows back as one example per conversation (a packed row splits at its seq_lengths)."""
    cols = ["input_ids", "labels"] + (["seq_lengths"] if "seq_lengths" in dataset.column_names else [])
    out = []
    for row in dataset.select_columns(cols).to_list():
        k = 0
        for n in row.get("seq_lengths") or [len(row["input_ids"])]:
            out.append(TokenizedExample(row["input_ids"][k : k + n], row["labels"][k : k + n]))
            k += n
    return out


def _sft_trainer_class() -> type:
    """``SFTTrainer`` with two additions, both switchable (``TrainConfig.lean_loss`` / ``curriculum``):

    * the lean loss: TRL 1.16 scores every position through its chunked LM head on CPU (only Triton devices
      compact to the trained positions) and computes the entropy over the 49k vocabulary for a metric. Here only
      the hidden states of trained positions reach the head, and the metrics are the loss and token accuracy. The
      loss is the same sum of token log-probabilities over the same denominator (``tests/test_curriculum.py``);
    * the curriculum: each stage's conversations are packed on their own and the packed rows are read in
      ``curriculum.curriculum_order`` (TRL would pack all stages together and shuffle).
    """
    import torch
    import torch.nn.functional as F
    from peft import PeftModel
    from trl import SFTTrainer

    class BashgymSFTTrainer(SFTTrainer):
        def __init__(
            self, *args: Any, lean_loss: bool = True, stages: Sequence[int] | None = None, **kwargs: Any
        ) -> None:
            self._lean_loss = lean_loss
            self._stages_in = list(stages) if stages is not None else None
            self.packed_stages: list[int] | None = None
            super().__init__(*args, **kwargs)

        def _prepare_dataset(self, dataset, processing_class, args, packing, formatting_func, dataset_name):
            if dataset_name != "train" or self._stages_in is None:
                return super()._prepare_dataset(
                    dataset, processing_class, args, packing, formatting_func, dataset_name
                )
            from datasets import concatenate_datasets

            parts, stages = [], []
            for stage in sorted(set(self._stages_in)):
                subset = dataset.select([i for i, s in enumerate(self._stages_in) if s == stage])
                part = super()._prepare_dataset(
                    subset,
                    processing_class,
                    args,
                    packing,
                    formatting_func,
                    f"{dataset_name} (stage {stage})",
                )
                parts.append(part)
                stages.extend([stage] * len(part))
            self.packed_stages = stages
            return concatenate_datasets(parts)

        def _get_train_sampler(self, train_dataset=None):
            if self.packed_stages is None:
                return super()._get_train_sampler(train_dataset)
            from bashgym_assets.training.curriculum import curriculum_sampler

            return curriculum_sampler(self.packed_stages, seed=self.args.seed)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if not self._lean_loss or return_outputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            mode = "train" if model.training else "eval"
            causal_lm = model.get_base_model() if isinstance(model, PeftModel) else model
            labels = inputs["labels"][:, 1:]
            mask = labels != IGNORE_INDEX
            forward = {k: v for k, v in inputs.items() if k != "labels"}
            forward["use_cache"] = False
            hidden = causal_lm.base_model(**forward).last_hidden_state[:, :-1]
            logits = causal_lm.get_output_embeddings()(hidden[mask]).float()
            targets = labels[mask]
            denominator = mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = F.cross_entropy(logits, targets, reduction="sum") / torch.as_tensor(denominator).clamp(
                min=1
            )
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes
            with torch.no_grad():
                n = int(targets.numel())
                correct = int((logits.argmax(-1) == targets).sum()) if n else 0
                self._metrics[mode]["mean_token_accuracy"].append(correct / n if n else 0.0)
                if mode == "train":
                    ids = inputs.get("position_ids", inputs.get("input_ids"))
                    self._total_train_tokens += (
                        int(inputs["attention_mask"].sum())
                        if "attention_mask" in inputs
                        else int(ids.size(1)) * int(ids.size(0))
                    )
                self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
            return loss

    return BashgymSFTTrainer


def build_sft_trainer(
    config: TrainConfig,
    train: Sequence[Messages],
    validation: Sequence[Messages] = (),
    callbacks: Sequence[Any] = (),
    stages: Sequence[int] | None = None,
) -> Any:
    """The ``SFTTrainer`` for a run (LoRA on the frozen base, assistant-only loss, packing), datasets prepared.
    ``stages`` (one per train conversation) with ``config.curriculum`` orders training easy-first."""
    from trl import SFTConfig

    curriculum_stages: list[int] | None = None
    if config.curriculum:
        if stages is None or len(stages) != len(train):
            raise ValueError("a curriculum needs one stage per train conversation")
        curriculum_stages = list(stages)
    tokenizer = training_tokenizer(config.base_model)
    args = trainer_args(
        SFTConfig,
        config,
        evaluate=bool(validation),
        packing=config.packing,
        packing_strategy="bfd",
        assistant_only_loss=True,
        include_num_input_tokens_seen="all" if config.packing else "non_padding",
    )
    model, peft = load_base(config), lora_config(config)
    if config.start_adapter:
        from peft import PeftModel

        model, peft = PeftModel.from_pretrained(model, config.start_adapter, is_trainable=True), None
    return without_printer(
        _sft_trainer_class()(
            model=model,
            args=args,
            train_dataset=_chat_dataset(train),
            eval_dataset=_chat_dataset(validation) if validation else None,
            processing_class=tokenizer,
            peft_config=peft,
            callbacks=list(callbacks),
            lean_loss=config.lean_loss,
            stages=curriculum_stages,
        )
    )


def _mask_report(trainer: Any, train: Sequence[Messages], max_length: int) -> tuple[MaskReport, list[Any]]:
    examples = prepared_examples(trainer.train_dataset)
    report = inspect_examples(trainer.processing_class, examples)
    if any(e.n_tokens >= max_length for e in examples):  # packing truncated in place: count from the source
        tok = trainer.processing_class
        truncated = sum(1 for m in train if len(tokenize_for_training(tok, m).input_ids) > max_length)
        report = report.model_copy(update={"truncated": truncated})
    return report, examples


def train_sft(
    config: TrainConfig,
    train: Sequence[Messages],
    validation: Sequence[Messages] = (),
    on_log: LogFn | None = None,
    stop_after: int | None = None,
    stages: Sequence[int] | None = None,
) -> TrainResult:
    """LoRA SFT on chat conversations; loss on assistant turns only. ``stop_after`` simulates a crash (tests).
    ``stages``: the curriculum stage of each train conversation (used when ``config.curriculum``)."""
    resume, resumed_from = resume_point(config)
    progress, callbacks = progress_callbacks(on_log, stop_after)
    trainer = build_sft_trainer(config, train, validation, callbacks, stages=stages)
    mismatched = check_training_template(trainer.processing_class, train[:8])
    if mismatched:
        logger.warning(
            "the training chat template labels %d of the first %d conversations differently from the "
            "offsets reference (masking.tokenize_conversation): check its generation blocks",
            mismatched,
            min(8, len(train)),
        )
    with_untrained = [m for m in train if any(is_untrained(t) for t in m)]
    if with_untrained and check_training_template(trainer.processing_class, with_untrained[:32]):
        raise MaskError(
            "the training chat template trains assistant turns marked 'train: false' (recovery rows' mistakes); "
            f"its generation blocks must leave such turns out, as {TEMPLATES_DIR}/*_training.jinja do"
        )
    mask, examples = _mask_report(trainer, train, config.max_length)
    if not any(e.n_trained for e in examples):
        raise ValueError("no training example has an assistant token inside max_length")
    out = run_training(trainer, resume, config)
    history, val_loss = history_from_log(trainer.state.log_history)
    publish_adapter(trainer.model, Path(config.output_dir))
    wall = float(out.metrics.get("train_runtime", 0.0))
    tokens = trainer.state.num_input_tokens_seen - progress.tokens0
    return TrainResult(
        kind="sft",
        adapter_dir=config.output_dir,
        steps=trainer.state.global_step,
        resumed_from_step=resumed_from,
        history=history,
        final_loss=history[-1]["loss"] if history else None,
        validation_loss=val_loss,
        train_examples=len(examples),
        train_tokens=sum(e.n_tokens for e in examples),
        trained_tokens=sum(e.n_trained for e in examples),
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        wall_s=wall,
        trainable_parameters=trainable_parameters(trainer.model),
        mask=mask,
        extra={
            "peak_memory_mb": _peak_memory_mb(pick_device(config)),
            "template_mismatches": float(mismatched),
        },
    )


# ---- DPO ----------------------------------------------------------------------------------------------
def _pair_dataset(pairs: Sequence[dict[str, Any]]) -> Any:
    from datasets import Dataset

    return Dataset.from_list(
        [
            {
                "prompt": normalise_messages(p["prompt"], require_assistant=False),
                "chosen": normalise_messages(p["chosen"]),
                "rejected": normalise_messages(p["rejected"]),
            }
            for p in pairs
        ]
    )


def train_dpo(
    config: TrainConfig, pairs: Sequence[dict[str, Any]], sft_adapter: str, on_log: LogFn | None = None
) -> TrainResult:
    """DPO on top of an SFT adapter: the policy starts from the SFT adapter and the reference IS the SFT model
    (TRL copies the adapter into a frozen ``ref`` adapter and precomputes its log-probs once, before any update),
    so the preference moves away from SFT, not from the base. Every token after the prompt is scored."""
    from peft import PeftModel
    from trl import DPOConfig, DPOTrainer

    resume, resumed_from = resume_point(config)
    tokenizer = load_tokenizer(config.base_model)
    dataset = _pair_dataset(pairs)
    if not any(
        len(
            tokenizer.apply_chat_template(
                list(p), add_generation_prompt=True, tokenize=True, return_dict=True
            )["input_ids"]
        )
        < config.max_length
        for p in dataset["prompt"]
    ):
        raise ValueError("no DPO pair has a prompt shorter than max_length: nothing would be scored")
    model = PeftModel.from_pretrained(load_base(config), sft_adapter, is_trainable=True)
    args = trainer_args(
        DPOConfig,
        config,
        evaluate=False,
        beta=config.beta,
        precompute_ref_log_probs=True,
        include_num_input_tokens_seen="non_padding",
    )
    progress, callbacks = progress_callbacks(on_log, None)
    trainer = without_printer(
        DPOTrainer(
            model=model,
            ref_model=None,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=callbacks,
        )
    )
    out = run_training(trainer, resume, config)
    history, _ = history_from_log(trainer.state.log_history)
    publish_adapter(trainer.model, Path(config.output_dir))
    data = trainer.train_dataset.select_columns(["prompt_ids", "chosen_ids", "rejected_ids"]).to_list()
    wall = float(out.metrics.get("train_runtime", 0.0))
    tokens = trainer.state.num_input_tokens_seen - progress.tokens0
    return TrainResult(
        kind="dpo",
        adapter_dir=config.output_dir,
        steps=trainer.state.global_step,
        resumed_from_step=resumed_from,
        history=history,
        final_loss=history[-1]["loss"] if history else None,
        train_examples=len(data),
        train_tokens=sum(
            2 * len(d["prompt_ids"]) + len(d["chosen_ids"]) + len(d["rejected_ids"]) for d in data
        ),
        trained_tokens=sum(len(d["chosen_ids"]) + len(d["rejected_ids"]) for d in data),
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        wall_s=wall,
        trainable_parameters=trainable_parameters(trainer.model),
        extra={
            "peak_memory_mb": _peak_memory_mb(pick_device(config)),
            **(
                {"reward_accuracy": history[-1]["reward_accuracy"]}
                if history and "reward_accuracy" in history[-1]
                else {}
            ),
        },
    )


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
    """Greedy next assistant turn for a conversation, ending where the turn ends (``inference.turns``) as the
    rollouts' and the evaluation's replies do, not at eos only."""
    import torch

    from bashgym_assets.inference.turns import turn_stops

    stops = turn_stops(tokenizer)
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    enc = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(
            **enc,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=stops.ids,
        )
    reply = stops.cut(out[0, enc["input_ids"].shape[1] :].tolist())
    return tokenizer.decode(reply, skip_special_tokens=True)
