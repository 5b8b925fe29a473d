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

from bashgym_assets.config import add_field_options
from bashgym_assets.lake import Lake
from bashgym_assets.training.base_model import resolve_base_model
from bashgym_assets.training.curriculum import stage_of
from bashgym_assets.training.trainer import (
    TrainConfig,
    TrainHyperparams,
    inspect,
    progress_line,
    train_dpo,
    train_sft,
)

# the short names this command always had, beside the field names
ALIASES = {"learning_rate": ["--lr"], "attn_implementation": ["--attn"]}


def add_hyperparam_arguments(p: argparse.ArgumentParser) -> None:
    """One option per ``TrainHyperparams`` field (``--max-length``, ``--no-packing``, ...), its default and help
    from the field: the CLI cannot drift from the trainer's config."""
    add_field_options(p, TrainHyperparams, ALIASES)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bashgym_assets.training",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kind", choices=["sft", "dpo"])
    p.add_argument("--data", help="parquet file (default: the lake's sft_dataset / dpo_dataset)")
    p.add_argument("--base", help="base model folder or hub id")
    p.add_argument("--out", help="run folder that will hold only the adapter (name each run)")
    p.add_argument("--sft-adapter", help="DPO: the SFT adapter to start from (and use as reference)")
    p.add_argument(
        "--inspect", action="store_true", help="print mask statistics and a marked sample; no training"
    )
    add_hyperparam_arguments(p)
    args = p.parse_args(argv)

    table_name = f"{args.kind}_dataset"
    rows = (pq.read_table(args.data) if args.data else Lake().read(table_name)).to_pylist()
    train = [r for r in rows if r.get("split", "train") == "train"]
    base = args.base or resolve_base_model()
    if args.inspect:
        convs = (
            [r["messages"] for r in train]
            if args.kind == "sft"
            else [list(r["prompt"]) + list(r["chosen"]) for r in train]
        )
        print(inspect(base, convs, args.max_length).markdown())
        return 0
    if not args.out:
        p.error("--out is required to train (name each run's folder)")
    how = {name: getattr(args, name) for name in TrainHyperparams.model_fields}
    cfg = TrainConfig(
        **how, base_model=base, output_dir=args.out, run_name=args.out.rstrip("/").rsplit("/", 1)[-1]
    )

    def log(r: dict[str, float]) -> None:
        print(progress_line(r), flush=True)

    if args.kind == "sft":
        val = [r["messages"] for r in rows if r.get("split") == "validation"]
        stages = [stage_of(r) for r in train]  # the curriculum's (--curriculum): each row's difficulty
        result = train_sft(cfg, [r["messages"] for r in train], val, on_log=log, stages=stages)
    else:
        if not args.sft_adapter:
            p.error("dpo needs --sft-adapter")
        result = train_dpo(cfg, train, args.sft_adapter, on_log=log)
    print(result.model_dump_json(indent=2, exclude={"history", "mask"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
