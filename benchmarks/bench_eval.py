"""Benchmark: the behavioural evaluation, lockstep batched generation against one episode at a time, in the same
run (episodes per minute and the ratio), with and without KV-cache reuse across turns, plus one model over the whole
held-out split.

    .venv/bin/python benchmarks/bench_eval.py [--limit 8] [--max-turns 6] [--adapter DIR] [--full]

"One at a time" is how rollouts run an operator: one episode after another, one ``generate`` per turn (batch of
one). "Batched" is ``evaluation.evaluate``: every live episode's turn in one left-padded ``generate`` per micro-batch,
commands run in parallel sandboxes. "Batched + KV reuse" is the same lockstep evaluation with
``rollout.kv_generation``: each episode's keys/values are kept across turns, so a turn only prefills what it adds,
and all live episodes decode together on one left-padded cache. The first two runs use the plain ``generate`` path
(``kv_cache=False``). Same model, same scenarios, greedy decoding, so all produce the same episodes (the script
counts transcripts identical to one at a time). ``--full`` also times the batched + KV evaluation over the whole
held-out split (target: under 5 minutes for one model). Needs the Docker engine and the sandbox image.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bashgym_assets import images  # noqa: E402
from bashgym_assets.evaluation import EvalSettings, evaluate  # noqa: E402
from bashgym_assets.rollout.operators import LocalModelOperator  # noqa: E402
from bashgym_assets.scenarios.candidates import load_pack  # noqa: E402
from bashgym_assets.scenarios.gate import HELD_OUT, split_for  # noqa: E402
from bashgym_assets.training import base_model as bm  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_gate import machine  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=8, help="held-out scenarios in the batched vs one-at-a-time run")
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--adapter", help="a LoRA adapter folder on the base (default: the base model alone)")
    ap.add_argument("--full", action="store_true", help="also time the whole held-out split, batched")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "eval.md")
    args = ap.parse_args(argv)

    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    base = bm.resolve_base_model(prepare=True)
    bundles, _ = load_pack()
    held = sorted((b for b in bundles if split_for(b.id) == HELD_OUT), key=lambda b: b.id)
    subset = held[: args.limit]
    load = os.getloadavg()[0]
    print(f"{len(subset)} of {len(held)} held-out scenarios, base {base}, adapter {args.adapter}", flush=True)

    def operator(micro_batch: int, kv_cache: bool = False) -> LocalModelOperator:
        op = LocalModelOperator(base, adapter_dir=args.adapter, max_new_tokens=args.max_new_tokens,
                                micro_batch=micro_batch, kv_cache=kv_cache)
        op._load()  # load outside the timed region: both runs pay it once
        return op

    rows = []
    single = EvalSettings(max_turns=args.max_turns, max_live=1)
    batched = EvalSettings(max_turns=args.max_turns)
    t0 = time.perf_counter()
    one = evaluate(operator(1), subset, image, single, label="one at a time", progress=print)
    one_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    many = evaluate(operator(args.micro_batch), subset, image, batched, label="batched", progress=print)
    many_s = time.perf_counter() - t0
    kv_op = operator(args.micro_batch, kv_cache=True)
    t0 = time.perf_counter()
    kv = evaluate(kv_op, subset, image, batched, label="batched + KV reuse", progress=print)
    kv_s = time.perf_counter() - t0
    stats = kv_op._kv.stats if kv_op._kv is not None else None

    def same_as_one(res: object) -> int:
        return sum(a.messages == b.messages for a, b in zip(one.episodes, res.episodes, strict=True))

    same, same_kv = same_as_one(many), same_as_one(kv)
    for name, res, secs in (("one at a time (max_live 1, batch 1), plain generate", one, one_s),
                            (f"batched (max_live 40, micro-batch {args.micro_batch}), plain generate", many, many_s),
                            (f"batched + KV reuse (max_live 40, micro-batch {args.micro_batch})", kv, kv_s)):
        turns = sum(e.n_turns for e in res.episodes)
        rows.append((name, len(res.episodes), turns, secs, 60 * len(res.episodes) / secs,
                     res.summary.rates["clean"].fmt()))
    ratio, ratio_kv = rows[1][4] / rows[0][4], rows[2][4] / rows[0][4]
    full_line = ""
    if args.full:
        t0 = time.perf_counter()
        whole = evaluate(operator(args.micro_batch, kv_cache=True), held, image, EvalSettings(max_turns=10),
                         label="full", progress=print)
        full_s = time.perf_counter() - t0
        full_line = (f"- whole held-out split ({len(held)} scenarios, 10-turn cap), batched + KV reuse: "
                     f"**{full_s / 60:.1f} "
                     f"min** (target < 5 min: {'met' if full_s < 300 else 'NOT met'}); rates: " + ", ".join(
                         f"{k} {r.fmt()}" for k, r in whole.summary.rates.items()))

    lines = [
        "## Evaluation benchmark (issue 11)", "",
        f"Command: `.venv/bin/python benchmarks/bench_eval.py {' '.join(argv or sys.argv[1:])}`  ",
        f"Machine: {machine()}, load average at start {load:.1f}  ",
        f"Model: {base}" + (f" + adapter {args.adapter}" if args.adapter else " (no adapter)")
        + f"; greedy, {args.max_new_tokens} new tokens max, {args.max_turns}-turn cap", "",
        "| run | episodes | turns | wall s | episodes/min | clean |", "|---|---|---|---|---|---|",
        *(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.2f} | {r[5]} |" for r in rows), "",
        f"- batched vs one at a time: **{ratio:.2f}x** episodes/min (target >= 4x: "
        f"{'met' if ratio >= 4 else 'NOT met'}); identical transcripts: {same}/{len(subset)}",
        f"- batched + KV reuse vs one at a time: **{ratio_kv:.2f}x** episodes/min (target >= 4x: "
        f"{'met' if ratio_kv >= 4 else 'NOT met'}); vs batched without reuse: {rows[2][4] / rows[1][4]:.2f}x; "
        f"transcripts identical to one at a time: {same_kv}/{len(subset)}",
    ]
    if stats is not None:
        lines.append(f"- KV reuse: {stats.reused_tokens} of {stats.prompt_tokens} prompt tokens read from the cache, "
                     f"{stats.prefilled_tokens} prefilled ({stats.prefill_s:.1f} s), {stats.decode_steps} batched "
                     f"decode steps ({stats.decode_s:.1f} s), {stats.calls} generate calls")
    else:
        lines.append(f"- KV reuse was NOT used (fallback: {kv_op.kv_fallback})")
    if full_line:
        lines.append(full_line)
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
