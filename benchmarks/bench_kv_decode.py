"""Batched greedy decode steps: the preallocated KV cache vs transformers' DynamicCache, in the same run.

``KVGenerator`` decodes every live conversation together on one left-padded cache. transformers' ``DynamicLayer``
appends each step's key/value with ``torch.cat``, copying the whole batch's cache every step; the preallocated
layer (``kv_decode._preallocated_cache``) writes the step in place. Same model (the offline SmolLM2), same
random prompts, a fixed number of new tokens (no stop token), both paths alternated per size.

    .venv/bin/python benchmarks/bench_kv_decode.py [--sizes 8x200 8x1200] [--tokens 32]
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import machine  # noqa: E402


def decode_ms_per_step(model, prompts: list[list[int]], tokens: int, preallocate: bool) -> float:  # noqa: ANN001
    from bashgym_assets.inference.kv_decode import KVGenerator

    gen = KVGenerator(model, stop_ids=[], pad_id=0, max_new_tokens=tokens, preallocate=preallocate)
    gen.generate(prompts)
    return 1000 * gen.stats.decode_s / max(1, gen.stats.decode_steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["1x200", "8x200", "8x1200"], help="ROWSxCONTEXT")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "kv_decode.md"))
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM

    from bashgym_assets.training.base_model import resolve_base_model

    model = AutoModelForCausalLM.from_pretrained(resolve_base_model(), dtype=torch.float32).eval()
    load = os.getloadavg()[0]
    rows = []
    for size in args.sizes:
        batch, context = (int(x) for x in size.split("x"))
        torch.manual_seed(0)
        prompts = [torch.randint(100, 40000, (context + 7 * i,)).tolist() for i in range(batch)]
        old = decode_ms_per_step(model, prompts, args.tokens, preallocate=False)
        new = decode_ms_per_step(model, prompts, args.tokens, preallocate=True)
        rows.append(f"| {batch} | {context} | {old:.0f} | {new:.0f} | {new / old:.2f} |")
        print(rows[-1], flush=True)
    lines = [
        "# Batched decode steps: preallocated KV cache vs DynamicCache",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_kv_decode.py --sizes {' '.join(args.sizes)} "
        f"--tokens {args.tokens}`  ",
        f"Machine: {machine()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average at start {load:.1f}",
        "",
        "| rows | context tokens | DynamicCache ms/step | preallocated ms/step | ratio |",
        "|---:|---:|---:|---:|---:|",
        *rows,
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
