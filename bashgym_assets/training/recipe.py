"""The training recipe as one self-contained job, for a machine with a GPU and no Docker, no network (issue 29).

Sandboxed episodes, evaluation and GRPO rollouts stay on the Docker machine; only SFT and DPO travel:

    # on the Docker machine: the datasets and the recipe as a folder (a few MB)
    python -m bashgym_assets.training.recipe export --out gpu_job
    # on the GPU machine (PyTorch, transformers, PEFT; TRL as a wheel), one command:
    python -m bashgym_assets.training.recipe run gpu_job --base <model folder or .gguf> --out $OUT
    # back here: the adapters are plain PEFT folders
    bashgym eval --adapter $OUT/sft --adapter $OUT/dpo --no-champion

``run`` trains SFT (curriculum, several epochs, large packed batches in bf16 on CUDA), then DPO on the pairs from
that SFT adapter, and writes each adapter (weights in float16 so each file stays small), ``results.json`` (per-step
history, wall times, tokens/s, the device) and a log. With no GPU it falls back to the CPU and the same recipe at a
smaller size (``--scale``: a slice of the rows, one row per micro-step, float32); the tests run that fallback.
The module imports only the trainer (no Dagster, MLflow, DuckDB or Docker), so it runs where those are absent.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

SFT_FILE, DPO_FILE, RECIPE_FILE, RESULTS_FILE = "sft.jsonl.gz", "dpo.jsonl.gz", "recipe.json", "results.json"


class Recipe(BaseModel):
    """What the job trains: SFT on the train rows (validation rows scored), then DPO from the SFT adapter."""

    sft_epochs: float = 3.0
    sft_learning_rate: float = 1e-3
    max_length: int = 1024
    curriculum: bool = True
    warmup_steps: int = 10
    dpo_epochs: float = 1.0
    dpo_learning_rate: float = 5e-6
    beta: float = 0.1
    lora_r: int = 16
    lora_alpha: int = 32
    seed: int = 0
    # CUDA: many packed rows per step in bf16; CPU: one row per micro-step (fastest there), float32
    gpu_batch_size: int = 16
    gpu_grad_accum: int = 1
    cpu_batch_size: int = 1
    cpu_grad_accum: int = 4


def _write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    n = 0
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, default=str) + "\n")
            n += 1
    return n


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_job(
    folder: Path,
    sft_rows: Iterable[Mapping[str, Any]],
    dpo_rows: Iterable[Mapping[str, Any]] = (),
    recipe: Recipe | None = None,
) -> dict[str, int]:
    """The job folder: SFT rows (messages, split, difficulty), DPO pairs (prompt, chosen, rejected, split), recipe."""
    folder.mkdir(parents=True, exist_ok=True)
    sft_keep = ("messages", "split", "difficulty", "family", "scenario_id")
    dpo_keep = ("prompt", "chosen", "rejected", "split", "scenario_id")
    counts = {
        "sft": _write_jsonl(folder / SFT_FILE, ({k: r.get(k) for k in sft_keep} for r in sft_rows)),
        "dpo": _write_jsonl(folder / DPO_FILE, ({k: r.get(k) for k in dpo_keep} for r in dpo_rows)),
    }
    (folder / RECIPE_FILE).write_text((recipe or Recipe()).model_dump_json(indent=2) + "\n")
    return counts


def export_from_lake(folder: Path, recipe: Recipe | None = None) -> dict[str, int]:
    """``export``: the lake's sft_dataset and dpo_dataset (held-out rows never reach them) as a job folder."""
    from bashgym_assets.lake import Lake

    lake = Lake()
    sft = lake.read("sft_dataset").to_pylist()
    dpo = lake.read("dpo_dataset").to_pylist() if "dpo_dataset" in lake.assets() else []
    return write_job(folder, sft, dpo, recipe)


def _device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


def _take(rows: Sequence[dict[str, Any]], scale: float) -> list[dict[str, Any]]:
    """A deterministic slice keeping every ``1/scale``-th row (all difficulties and families stay represented)."""
    if scale >= 1.0:
        return list(rows)
    step = max(1, round(1 / scale))
    return [r for i, r in enumerate(rows) if i % step == 0]


def compact_adapter(folder: Path) -> None:
    """Rewrite the adapter's weights in float16 (half the bytes; PEFT casts them back when it loads them)."""
    import torch
    from safetensors.torch import load_file, save_file

    path = folder / "adapter_model.safetensors"
    tensors = load_file(str(path))
    save_file(
        {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in tensors.items()},
        str(path),
        metadata={"format": "pt"},
    )


def run(
    job: Path,
    out: Path,
    base: str,
    device: str = "auto",
    scale: float | None = None,
    max_steps: int | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Train the job's recipe: SFT then (when there are pairs) DPO from it. Returns what ``results.json`` holds."""
    from bashgym_assets.training.curriculum import stage_counts, stage_of
    from bashgym_assets.training.trainer import TrainConfig, progress_line, train_dpo, train_sft

    recipe = Recipe.model_validate_json((job / RECIPE_FILE).read_text())
    device = _device(device)
    gpu = device.startswith("cuda")
    scale = scale if scale is not None else (1.0 if gpu else 0.05)
    sft_rows = _read_jsonl(job / SFT_FILE)
    train = _take([r for r in sft_rows if r.get("split", "train") == "train"], scale)
    validation = _take([r for r in sft_rows if r.get("split") == "validation"], scale)
    pairs = _take([r for r in _read_jsonl(job / DPO_FILE) if r.get("split", "train") == "train"], scale)
    if not train:
        raise ValueError(f"{job / SFT_FILE}: no train rows")
    out.mkdir(parents=True, exist_ok=True)
    # the fields both stages share; TrainConfig validates them (a typed dict would repeat its 13 fields)
    shared: dict[str, Any] = dict(
        base_model=base,
        device=device,
        max_length=recipe.max_length,
        lora_r=recipe.lora_r,
        lora_alpha=recipe.lora_alpha,
        seed=recipe.seed,
        max_steps=max_steps,
        batch_size=recipe.gpu_batch_size if gpu else recipe.cpu_batch_size,
        grad_accum=recipe.gpu_grad_accum if gpu else recipe.cpu_grad_accum,
        dtype="bfloat16" if gpu else "float32",
        save_every=10_000,
        resume=False,
    )
    stages = [stage_of(r) for r in train]
    log(
        f"[recipe] {device}: {len(train)} SFT rows (stages {stage_counts(stages)}), {len(validation)} validation, "
        f"{len(pairs)} DPO pairs, scale {scale}"
    )

    def progress(kind: str):
        return lambda row: log(f"[{kind}] " + progress_line(row))

    results: dict[str, Any] = {
        "device": device,
        "scale": scale,
        "recipe": recipe.model_dump(),
        "rows": {"sft_train": len(train), "sft_validation": len(validation), "dpo_train": len(pairs)},
    }
    if gpu:
        import torch

        results["device_name"] = torch.cuda.get_device_name(0)
    started = time.perf_counter()
    sft_cfg = TrainConfig(
        **shared,
        output_dir=str(out / "sft"),
        checkpoint_dir=str(out.parent / ".sft.ckpt"),
        run_name="recipe-sft",
        epochs=recipe.sft_epochs,
        learning_rate=recipe.sft_learning_rate,
        warmup_steps=recipe.warmup_steps,
        curriculum=recipe.curriculum,
    )
    sft = train_sft(
        sft_cfg,
        [r["messages"] for r in train],
        [r["messages"] for r in validation],
        on_log=progress("sft"),
        stages=stages,
    )
    compact_adapter(out / "sft")
    results["sft"] = json.loads(sft.model_dump_json(exclude={"mask"}))
    if pairs:
        dpo_cfg = TrainConfig(
            **shared,
            output_dir=str(out / "dpo"),
            checkpoint_dir=str(out.parent / ".dpo.ckpt"),
            run_name="recipe-dpo",
            epochs=recipe.dpo_epochs,
            learning_rate=recipe.dpo_learning_rate,
            beta=recipe.beta,
        )
        dpo = train_dpo(dpo_cfg, pairs, str(out / "sft"), on_log=progress("dpo"))
        compact_adapter(out / "dpo")
        results["dpo"] = json.loads(dpo.model_dump_json(exclude={"mask"}))
    results["wall_s"] = round(time.perf_counter() - started, 1)
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n")
    log(f"[recipe] done in {results['wall_s']} s: {out}")
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bashgym_assets.training.recipe",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="write the lake's datasets and the recipe as a job folder")
    ex.add_argument("--out", required=True)
    ex.add_argument("--sft-epochs", type=float, default=Recipe().sft_epochs)
    r = sub.add_parser("run", help="train the job (SFT, then DPO) on this machine's GPU, else its CPU")
    r.add_argument("job")
    r.add_argument("--base", required=True, help="base model folder (or hub id cached on that machine)")
    r.add_argument("--out", required=True, help="folder for the adapters and results.json")
    r.add_argument("--device", default="auto", help="auto (CUDA when present), cuda, cpu")
    r.add_argument(
        "--scale", type=float, help="fraction of the rows to train on (default: 1 on CUDA, 0.05 on CPU)"
    )
    r.add_argument("--max-steps", type=int, help="cap each stage's optimizer steps")
    args = p.parse_args(argv)
    if args.cmd == "export":
        counts = export_from_lake(Path(args.out), Recipe(sft_epochs=args.sft_epochs))
        print(f"{args.out}: {counts['sft']} SFT rows, {counts['dpo']} DPO pairs, {RECIPE_FILE}")
        return 0
    base = args.base
    if base.endswith(".gguf"):
        from bashgym_assets.training.base_model import convert_gguf

        base = convert_gguf(Path(base), Path(args.out).parent / "base-model").path
    run(
        Path(args.job),
        Path(args.out),
        base,
        device=args.device,
        scale=args.scale,
        max_steps=args.max_steps,
        log=lambda line: print(line, flush=True),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
