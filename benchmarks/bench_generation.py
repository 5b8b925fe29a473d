"""Benchmark: generation with a LoRA adapter kept as a PEFT wrapper vs merged into the base weights, same run.

    .venv/bin/python benchmarks/bench_generation.py [--adapter DIR] [--batch 16] [--new-tokens 64] [--rounds 2]

The evaluation and the student rollouts generate with ``LocalModelOperator``, which merges the adapter into the base
once at load (``merge_and_unload``): the function is the same, but every linear layer becomes one matmul instead of
three. This script measures what that buys on the prompts the evaluation really sends (the first turn of held-out
scenarios, rendered by ``rollout.transcript``), batched and left-padded as the operator does, greedy, with a fixed
number of new tokens so both setups do the same work; the setups alternate over ``--rounds``. It also reports how
many greedy replies differ between the two (float rounding may flip a near-tie; 0 is the expected figure).
Default adapter: the newest under the data folder's ``artifacts/adapters``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _prompts(tokenizer, n: int) -> list[list[int]]:
    from bashgym_assets.rollout.transcript import initial_messages
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.gate import HELD_OUT, split_for

    bundles, _ = load_pack()
    held = sorted((b for b in bundles if split_for(b.id) == HELD_OUT), key=lambda b: b.id)
    out = []
    for b in (held * (n // max(1, len(held)) + 1))[:n]:
        msgs = [m.model_dump() for m in initial_messages(b)]
        ids = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)
        out.append(list(ids["input_ids"]))
    return out


def _generate(model, prompts: list[list[int]], new_tokens: int, pad: int) -> tuple[float, list[list[int]]]:
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    att = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p)
        att[row, width - len(p) :] = 1
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=att,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=pad,
            temperature=None,
            top_p=None,
            top_k=None,
        )
    return time.perf_counter() - t0, out[:, width:].tolist()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--adapter", help="LoRA adapter folder (default: the newest in the data folder)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)

    from _machine import machine
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bashgym_assets.config import get_settings
    from bashgym_assets.training import base_model as bm

    base = bm.resolve_base_model(prepare=True)
    adapter = args.adapter
    if not adapter:
        found = sorted(
            (get_settings().home / "artifacts" / "adapters").glob("*/adapter_config.json"),
            key=lambda p: p.stat().st_mtime,
        )
        if not found:
            ap.error("no adapter in the data folder: pass --adapter (run `make demo` first)")
        adapter = str(found[-1].parent)
    tok = AutoTokenizer.from_pretrained(base)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    prompts = _prompts(tok, args.batch)
    wrapped = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter).eval()
    merged = (
        PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter)
        .merge_and_unload()
        .eval()
    )
    _generate(merged, prompts[:2], 4, pad)  # warm-up, untimed
    _generate(wrapped, prompts[:2], 4, pad)
    times = {"peft wrapper": 0.0, "merged": 0.0}
    outputs: dict[str, list[list[int]]] = {}
    for _ in range(args.rounds):
        for label, model in (("peft wrapper", wrapped), ("merged", merged)):
            seconds, out = _generate(model, prompts, args.new_tokens, pad)
            times[label] += seconds
            outputs[label] = out
    tokens = args.rounds * args.batch * args.new_tokens
    differ = sum(a != b for a, b in zip(outputs["peft wrapper"], outputs["merged"], strict=True))
    print(
        f"Command: .venv/bin/python benchmarks/bench_generation.py --batch {args.batch} --new-tokens "
        f"{args.new_tokens} --rounds {args.rounds}"
    )
    print(f"Machine: {machine()}, load average {os.getloadavg()[0]:.1f}; adapter {adapter}")
    print(
        f"{args.batch} held-out first-turn prompts (mean {sum(map(len, prompts)) / len(prompts):.0f} tokens), "
        f"greedy, {args.new_tokens} new tokens each, {args.rounds} rounds alternating\n"
    )
    print("| setup | seconds | new tokens/s |\n|---|---:|---:|")
    for label, seconds in times.items():
        print(f"| {label} | {seconds:.1f} | {tokens / seconds:.1f} |")
    print(
        f"\n**merged vs wrapper: {times['peft wrapper'] / times['merged']:.2f}x**; greedy replies that differ: "
        f"{differ} of {args.batch}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
