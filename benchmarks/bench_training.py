"""Training throughput of LoRA SFT on the same model, data and tokens per optimizer step, in the same run:

- ``packed`` (the training default): TRL's ``SFTTrainer`` (``trainer.build_sft_trainer``) with bfd packing,
  padding-free rows whose position_ids restart per example, assistant-only loss, ONE packed row per micro-step and
  ``--batch-size`` micro-steps per optimizer step (gradient accumulation);
- ``packed-flat``: the same with ``--batch-size`` packed rows per micro-step, which padding-free collation flattens
  into one sequence (attention then spans batch x max length: the default before this benchmark);
- ``padded``: the naive setup, no packing, every row one example padded to max length;
- ``plain``: the packed rows of ``packed`` through a hand-written PyTorch loop (forward, backward, AdamW), the
  baseline for what TRL's Trainer costs around the same work (target: TRL >= 0.95x of it, issue 29);
- ``packed-stock``: ``packed`` with TRL 1.16's own ``compute_loss`` (every position through its chunked LM head,
  entropy and token accuracy over the vocabulary) instead of the lean loss (``TrainConfig.lean_loss``);
- ``packed-bf16``: ``packed`` with the base and LoRA in bfloat16 (worth it only where the CPU has avx512_bf16/AMX).

Each setup runs in its own child process so its peak memory is its own (CPU: the process's peak resident memory
sampled while it trains; GPU: torch's peak allocated over the timed steps), and the setups alternate over
``--rounds`` so that load from other processes on a shared machine hits both alike. Reported per setup: real
(non-padding) tokens per second, trained (assistant) tokens per second, the fraction of computed positions that
were padding, seconds per step and peak memory; then the ratio.

CPU (default, offline SmolLM2-135M-Instruct):
    .venv/bin/python benchmarks/bench_training.py --steps 6
GPU (one command; bf16 + SDPA, or --attn flash_attention_2 when flash-attn is installed):
    .venv/bin/python benchmarks/bench_training.py --device cuda --dtype bfloat16 --attn sdpa --steps 30 \
        --batch-size 16 --max-length 1024 [--base Qwen/Qwen2.5-Coder-1.5B-Instruct]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import append_report, machine  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "training.md"
MODES = ("padded", "packed-flat", "packed", "plain", "packed-stock", "packed-bf16")


def synthetic_conversations(n: int, seed: int = 0) -> list[list[dict[str, str]]]:
    """Trajectory-shaped conversations with a realistic spread of lengths (1-8 commands, short to long outputs)."""
    from bashgym_assets.testing.datasets import trajectory_messages

    rng = random.Random(seed)
    words = [
        "file",
        "data",
        "log",
        "report",
        "error",
        "warning",
        "backup",
        "config",
        "user",
        "group",
        "cache",
        "build",
        "test",
        "output",
        "line",
        "total",
        "drwxr-xr-x",
        "operator",
        "root",
        "tmp",
        "home",
        "var",
        "etc",
        "usr",
        "share",
        "lib",
        "bin",
    ]
    convs = []
    for i in range(n):
        k = rng.choice([1, 1, 2, 2, 3, 4, 6, 8])
        cmds, outs = [], []
        for j in range(k):
            cmds.append(
                f"{rng.choice(['ls -la', 'grep -rn', 'find . -name', 'wc -l', 'cat', 'sort -u'])} "
                f"{rng.choice(words)}{j}.txt"
            )
            outs.append(
                "\n".join(
                    " ".join(rng.choice(words) for _ in range(rng.randint(3, 10)))
                    for _ in range(rng.choice([0, 1, 2, 4, 8, 16]))
                )
            )
        convs.append(
            trajectory_messages(f"Task {i}: tidy the {rng.choice(words)} folder and report.", cmds, outs)
        )
    return convs


def lake_conversations(n: int) -> list[list[dict[str, str]]]:
    """The first ``n`` train conversations of the data folder's ``sft_dataset`` (e.g. the task factory's)."""
    from bashgym_assets.lake import Lake

    rows = [r for r in Lake().read("sft_dataset").to_pylist() if r["split"] == "train"]
    if not rows:
        raise SystemExit("sft_dataset has no train rows: materialize it first (or drop --lake)")
    return [r["messages"] for r in rows[:n]]


class RssSampler:
    """Peak resident memory of this process while active (a thread reading /proc/self/statm every 5 ms)."""

    def __init__(self) -> None:
        import threading

        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * self._page

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> RssSampler:
        self.peak = self._rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_child(args: argparse.Namespace) -> dict:
    """One setup, timed inside TRL's own training loop: ``SFTTrainer`` with bfd packing (padding-free rows,
    restarting position_ids) or without packing and every batch padded to max length (the naive baseline)."""
    import tempfile

    import torch
    from transformers import TrainerCallback

    from bashgym_assets.training.base_model import resolve_base_model
    from bashgym_assets.training.trainer import TrainConfig, build_sft_trainer, pick_device, prepared_examples

    torch.manual_seed(0)
    if args.threads:
        torch.set_num_threads(args.threads)
    base = args.base or resolve_base_model()
    workdir = Path(tempfile.mkdtemp(prefix="bench-training-"))
    # packed (the default): one packed row per micro-step, --batch-size rows per optimizer step (grad accumulation);
    # packed-flat: --batch-size packed rows per micro-step, which padding-free flattens into ONE sequence;
    # padded: no packing, every row padded to max length; plain: the packed rows through a hand-written loop.
    one_row = args.mode in ("packed", "plain", "packed-stock", "packed-bf16")
    cfg = TrainConfig(
        base_model=base,
        output_dir=str(workdir / "adapter"),
        max_length=args.max_length,
        batch_size=1 if one_row else args.batch_size,
        grad_accum=args.batch_size if one_row else 1,
        packing=args.mode != "padded",
        dtype="bfloat16" if args.mode == "packed-bf16" else args.dtype,
        lean_loss=args.mode != "packed-stock",
        attn_implementation=args.attn,
        device=args.device,
        lora_dropout=0.0,
        learning_rate=1e-4,
        max_steps=args.steps + 1,
        save_every=10**9,
        resume=False,
    )  # step 1 warms up, untimed
    trainer = build_sft_trainer(
        cfg, lake_conversations(args.examples) if args.lake else synthetic_conversations(args.examples)
    )
    if args.mode == "padded":
        trainer.data_collator.pad_to_multiple_of = (
            args.max_length
        )  # one example per row, padded to max length
    device = pick_device(cfg)
    examples = prepared_examples(trainer.train_dataset)
    batches: list[dict] = []
    totals = {"real": 0, "trained": 0, "computed": 0, "seconds": 0.0}
    step_fn = trainer.training_step

    def recording_step(model, inputs, num_items_in_batch=None):
        batches.append(inputs)
        return step_fn(model, inputs, num_items_in_batch)

    trainer.training_step = recording_step

    class Timer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            batches.clear()
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):  # after the optimizer step
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            if state.global_step == 1:
                if device.startswith("cuda"):
                    torch.cuda.reset_peak_memory_stats()
                return
            totals["seconds"] += time.perf_counter() - self.t0
            for b in batches:
                totals["real"] += (
                    int(b["attention_mask"].sum()) if "attention_mask" in b else b["input_ids"].numel()
                )
                totals["trained"] += int((b["labels"] != -100).sum())
                totals["computed"] += b["input_ids"].numel()

    trainer.add_callback(Timer())
    with RssSampler() as sampler:
        if args.mode == "plain":
            _plain_loop(trainer, cfg, args.steps + 1, totals)
        else:
            trainer.train()
    shutil.rmtree(workdir, ignore_errors=True)
    real, elapsed = totals["real"], totals["seconds"]
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else sampler.peak / 2**20
    return {
        "mode": args.mode,
        "steps": args.steps,
        "batches_per_epoch": len(trainer.get_train_dataloader()),
        "examples": len(examples),
        "real_tokens": real,
        "trained_tokens": totals["trained"],
        "computed_positions": totals["computed"],
        "seconds": elapsed,
        "tokens_per_s": real / elapsed,
        "trained_tokens_per_s": totals["trained"] / elapsed,
        "padding_fraction": 1 - real / totals["computed"],
        "s_per_step": elapsed / args.steps,
        "peak_memory_mb": peak,
        "epoch_tokens": sum(e.n_tokens for e in examples),
        "device": device,
        "base": base,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
    }


def _plain_loop(trainer, cfg, steps: int, totals: dict) -> None:
    """The baseline for TRL's loop: the same model, packed rows and optimizer settings, trained by a plain PyTorch
    loop (forward, loss on the labels, backward, AdamW step every ``grad_accum`` rows) with no Trainer around it."""
    import torch

    model = trainer.model
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=0.0)
    rows = iter(trainer.get_train_dataloader())
    for step in range(steps):
        t0 = time.perf_counter()
        counts = {"real": 0, "trained": 0, "computed": 0}
        for _ in range(cfg.grad_accum):
            batch = next(rows)
            batch = {k: v.to(model.device) if hasattr(v, "to") else v for k, v in batch.items()}
            counts["real"] += batch["input_ids"].numel()
            counts["trained"] += int((batch["labels"] != -100).sum())
            counts["computed"] += batch["input_ids"].numel()
            loss = model(**batch).loss / cfg.grad_accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step == 0:
            continue  # warm-up, untimed
        totals["seconds"] += time.perf_counter() - t0
        for k, v in counts.items():
            totals[k] += v


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--base", help="model folder or hub id (default: BASHGYM_BASE_MODEL or the offline SmolLM2)"
    )
    p.add_argument("--steps", type=int, default=6, help="timed optimizer steps per setup (after one warm-up)")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--examples", type=int, default=96)
    p.add_argument(
        "--lake",
        action="store_true",
        help="train on the first --examples train rows of the lake's sft_dataset instead of synthetic ones",
    )
    p.add_argument("--device", default=None, help="cpu | cuda (default: cuda if available)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--attn", default="sdpa", help="sdpa | eager | flash_attention_2")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    p.add_argument(
        "--rounds", type=int, default=2, help="alternate the setups this many times (shared machines)"
    )
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument(
        "--setups",
        default="padded,packed-flat,packed,plain",
        help=f"comma-separated setups to compare, from {', '.join(MODES)}",
    )
    p.add_argument("--no-write", action="store_true", help="print only; do not append to results/training.md")
    args = p.parse_args(argv)
    if args.mode:
        print("RESULT " + json.dumps(run_child(args)), flush=True)
        return 0
    setups = [m for m in args.setups.split(",") if m]
    if "packed" not in setups or set(setups) - set(MODES):
        p.error(f"--setups must include packed and name only {', '.join(MODES)}")
    runs: dict[str, list[dict]] = {m: [] for m in setups}
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"]
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for mode in setups:
            done = subprocess.run(
                [sys.executable, __file__, *passthrough, "--mode", mode], capture_output=True, text=True
            )
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if done.returncode != 0 or line is None:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            runs[mode].append(json.loads(line[7:]))
    load_after = os.getloadavg()[0]
    results = {}
    for mode, rs in runs.items():
        r = dict(rs[0])
        for k in ("real_tokens", "trained_tokens", "computed_positions", "seconds", "steps"):
            r[k] = sum(x[k] for x in rs)
        r["tokens_per_s"] = r["real_tokens"] / r["seconds"]
        r["trained_tokens_per_s"] = r["trained_tokens"] / r["seconds"]
        r["padding_fraction"] = 1 - r["real_tokens"] / r["computed_positions"]
        r["s_per_step"] = r["seconds"] / r["steps"]
        r["peak_memory_mb"] = max(x["peak_memory_mb"] for x in rs)
        results[mode] = r
    pk = results["packed"]
    cmd = "python benchmarks/bench_training.py " + " ".join(passthrough)
    rows = "\n".join(
        f"| {r['mode']} | {r['tokens_per_s']:.0f} | {r['trained_tokens_per_s']:.1f} | "
        f"{100 * r['padding_fraction']:.0f}% | {r['s_per_step']:.2f} | {r['peak_memory_mb']:.0f} | "
        f"{r['epoch_tokens'] / r['tokens_per_s'] / 60:.1f} |"
        for r in results.values()
    )
    device = pk["gpu"] or machine()
    report = (
        f"\n### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {Path(pk['base']).name} on "
        f"{pk['device']} ({args.dtype}, {args.attn}), batch {args.batch_size} x {args.max_length}\n\n"
        f"Command: `{cmd}`  \nMachine: {device}; torch {pk['torch']}; {pk['examples']} "
        f"{'of sft_dataset' if args.lake else 'synthetic trajectory-shaped'} conversations "
        f"({pk['epoch_tokens']} tokens), {args.rounds} rounds x {args.steps} timed steps per setup (after one warm-up step each), setups alternating, each in its own process; "
        f"1-min load average {load_before:.1f} before, {load_after:.1f} after (a shared machine).\n\n"
        "| setup | real tokens/s | trained tokens/s | padding | s/step | peak memory MiB | min per epoch |\n"
        "|---|---|---|---|---|---|---|\n"
        + rows
        + "\n\n"
        + "".join(
            f"**packed (TRL, one row per micro-step) vs {m}: {pk['tokens_per_s'] / r['tokens_per_s']:.2f}x real "
            f"tokens/s, {pk['peak_memory_mb'] / r['peak_memory_mb']:.2f}x peak memory.**  \n"
            for m, r in results.items()
            if m != "packed"
        )
    )
    print(report)
    if not args.no_write:
        append_report(
            RESULTS,
            "Training throughput: packed + masked LoRA SFT vs naive padding",
            "bench_training.py",
            report,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
