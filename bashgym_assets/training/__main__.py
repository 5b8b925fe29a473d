"""Train from a shell, outside Dagster (sekft's ``sft.py``): ``python -m bashgym_assets.training --help``.

    python -m bashgym_assets.training sft --out .bashgym/artifacts/adapters/run1 --max-steps 40
    python -m bashgym_assets.training sft --inspect                # mask statistics, no weights loaded
    python -m bashgym_assets.training dpo --sft-adapter <dir> --out <dir>

Data defaults to the lake's ``sft_dataset`` / ``dpo_dataset`` (train split); ``--data`` takes any parquet file
with the same columns. The base model defaults to ``BASHGYM_BASE_MODEL`` or the offline SmolLM2. Training runs on
TRL (``trainer.py``); each step prints ``step n/N: loss ... ETA``. A killed run started again with the same
``--out`` resumes from its last checkpoint (``<out>.ckpt``, every 50 steps).
"""

from __future__ import annotations

import argparse
import sys

import pyarrow.parquet as pq

from bashgym_assets.lake import Lake
from bashgym_assets.training.base_model import resolve_base_model
from bashgym_assets.training.trainer import TrainConfig, inspect, progress_line, train_dpo, train_sft


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bashgym_assets.training", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["sft", "dpo"])
    p.add_argument("--data", help="parquet file (default: the lake's sft_dataset / dpo_dataset)")
    p.add_argument("--base", help="base model folder or hub id")
    p.add_argument("--out", help="run folder that will hold only the adapter (name each run)")
    p.add_argument("--sft-adapter", help="DPO: the SFT adapter to start from (and use as reference)")
    p.add_argument("--inspect", action="store_true", help="print mask statistics and a marked sample; no training")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=2e-4)
    defaults = TrainConfig.model_fields
    p.add_argument("--batch-size", type=int, default=defaults["batch_size"].default,
                   help="packed rows per micro-step (CPU: 1 is fastest)")
    p.add_argument("--grad-accum", type=int, default=defaults["grad_accum"].default,
                   help="micro-steps per optimizer step")
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--no-packing", action="store_true")
    p.add_argument("--qlora", action="store_true", help="load the base in 4-bit (bitsandbytes) under the LoRA")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--attn", default="sdpa")
    args = p.parse_args(argv)

    table_name = f"{args.kind}_dataset"
    rows = (pq.read_table(args.data) if args.data else Lake().read(table_name)).to_pylist()
    train = [r for r in rows if r.get("split", "train") == "train"]
    base = args.base or resolve_base_model()
    if args.inspect:
        convs = [r["messages"] for r in train] if args.kind == "sft" else [
            list(r["prompt"]) + list(r["chosen"]) for r in train]
        print(inspect(base, convs, args.max_length).markdown())
        return 0
    if not args.out:
        p.error("--out is required to train (name each run's folder)")
    cfg = TrainConfig(base_model=base, output_dir=args.out, run_name=args.out.rstrip("/").rsplit("/", 1)[-1],
                      max_steps=args.max_steps, epochs=args.epochs, learning_rate=args.lr,
                      batch_size=args.batch_size, grad_accum=args.grad_accum, max_length=args.max_length,
                      packing=not args.no_packing,
                      qlora=args.qlora, dtype=args.dtype, attn_implementation=args.attn)

    def log(r: dict[str, float]) -> None:
        print(progress_line(r), flush=True)

    if args.kind == "sft":
        val = [r["messages"] for r in rows if r.get("split") == "validation"]
        result = train_sft(cfg, [r["messages"] for r in train], val, on_log=log)
    else:
        if not args.sft_adapter:
            p.error("dpo needs --sft-adapter")
        result = train_dpo(cfg, train, args.sft_adapter, on_log=log)
    print(result.model_dump_json(indent=2, exclude={"history", "mask"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
