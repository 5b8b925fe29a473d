"""Benchmark: the behavioural evaluation, batched against one episode at a time, in the same run (episodes per
minute and the ratio).

    .venv/bin/python benchmarks/bench_eval.py [--limit 0] [--max-turns 10] [--adapter DIR] [--arms one,lockstep,continuous]

Arms, all greedy on the same model and scenarios, one after another in this process:

- ``one``: one at a time, how rollouts run an operator: one episode after another, one plain ``generate`` per
  turn (batch of one, no KV reuse). The baseline.
- ``lockstep``: ``evaluation.evaluate`` with ``continuous=False``: every live episode's turn in one batched call
  per micro-batch, KV reuse across turns (``inference.kv_decode``), a call lasting until its longest reply ends.
- ``continuous``: ``evaluation.evaluate`` as it runs by default: continuous batching (``inference.continuous``), each
  episode's prompt joining the running batch as soon as its command has run, each reply leaving it as it ends.

The script counts transcripts identical to one at a time (greedy: the same up to floating-point near-ties), and
episodes whose replies agree with one at a time for as long as the sandbox answered the same: the sandbox is not
deterministic (``ls -l`` prints the minute, a commit hash includes its time), and once an observation differs the
prompts differ, so the replies after it may too. A reply that differs after identical prompts is a decoder bug.
Default: the whole held-out split with the evaluation's 10-turn cap (target: >= 4x one at a time, and one model
over the split in under 5 minutes). Needs the Docker engine and the sandbox image.
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
from _machine import machine  # noqa: E402

ARMS = ("one", "lockstep", "continuous")


def replies_agree(a: list, b: list) -> bool:
    """Two transcripts of one scenario agree when their first difference is an observation (the sandbox's answer),
    not a reply: greedy replies to identical prompts must be identical."""
    for x, y in zip(a, b, strict=False):  # unequal lengths: decided after the loop
        if x != y:
            return _role(x) != "assistant" and _role(y) != "assistant"
    return len(a) == len(b)


def _role(message: object) -> str:
    return message["role"] if isinstance(message, dict) else getattr(message, "role", "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=0, help="the first N held-out scenarios (0: all of them)")
    ap.add_argument("--max-turns", type=int, default=10)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, default=16, help="lockstep's micro-batch")
    ap.add_argument("--max-rows", type=int, default=32, help="continuous batching's rows a decode step")
    ap.add_argument("--adapter", help="a LoRA adapter folder on the base (default: the base model alone)")
    ap.add_argument("--only", help="comma-separated held-out scenario ids (instead of --limit)")
    ap.add_argument(
        "--arms", default=",".join(ARMS), help=f"which of {', '.join(ARMS)} to run, in that order"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "eval.md")
    ap.add_argument("--episodes-json", type=Path, help="also write every arm's episodes (transcripts) here")
    args = ap.parse_args(argv)
    arms = [a for a in ARMS if a in args.arms.split(",")]

    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    base = bm.resolve_base_model(prepare=True)
    bundles, _ = load_pack()
    held = sorted((b for b in bundles if split_for(b.id) == HELD_OUT), key=lambda b: b.id)
    subset = held[: args.limit] if args.limit else held
    if args.only:
        subset = [b for b in held if b.id in args.only.split(",")]
    load = os.getloadavg()[0]
    print(f"{len(subset)} of {len(held)} held-out scenarios, base {base}, adapter {args.adapter}", flush=True)

    def operator(micro_batch: int, kv_cache: bool) -> LocalModelOperator:
        op = LocalModelOperator(
            base,
            adapter_dir=args.adapter,
            max_new_tokens=args.max_new_tokens,
            micro_batch=micro_batch,
            kv_cache=kv_cache,
        )
        op._load()  # load outside the timed region: every arm pays it once
        return op

    setups = {  # name, (micro-batch, KV reuse), settings; each arm's model is loaded when its turn comes
        "one": (
            "one at a time (max_live 1, batch 1, plain generate)",
            (1, False),
            EvalSettings(max_turns=args.max_turns, max_live=1, continuous=False),
        ),
        "lockstep": (
            f"lockstep batched + KV reuse (micro-batch {args.micro_batch})",
            (args.micro_batch, True),
            EvalSettings(max_turns=args.max_turns, continuous=False),
        ),
        "continuous": (
            f"continuous batching + KV reuse (up to {args.max_rows} rows)",
            (args.micro_batch, True),
            EvalSettings(max_turns=args.max_turns, max_rows=args.max_rows),
        ),
    }
    ops: dict[str, LocalModelOperator] = {}
    results: dict[str, tuple[object, float]] = {}
    for arm in arms:
        name, (micro_batch, kv_cache), settings = setups[arm]
        op = ops[arm] = operator(micro_batch, kv_cache)
        t0 = time.perf_counter()
        res = evaluate(op, subset, image, settings, label=arm, progress=print)
        results[arm] = (res, time.perf_counter() - t0)

    def agreement(ref: object, res: object) -> str:
        """``identical/n (replies agree/n)`` against the reference arm."""
        pairs = [(a.messages, b.messages) for a, b in zip(ref.episodes, res.episodes, strict=True)]
        n = len(pairs)
        return f"{sum(a == b for a, b in pairs)}/{n} ({sum(replies_agree(a, b) for a, b in pairs)}/{n})"

    rows = []
    for arm in arms:
        res, secs = results[arm]
        turns = sum(e.n_turns for e in res.episodes)
        rates = res.summary.rates
        same = agreement(results["one"][0], res) if "one" in results else "-"
        rows.append(
            f"| {setups[arm][0]} | {len(res.episodes)} | {turns} | {secs:.1f} | "
            f"{60 * len(res.episodes) / secs:.2f} | {same} | {rates['operate'].fmt()} | "
            f"{rates['terminate'].fmt()} | {rates['clean'].fmt()} |"
        )
    lines = [
        "## Evaluation benchmark (issue 11)",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_eval.py {' '.join(argv or sys.argv[1:])}`  ",
        f"Machine: {machine(docker=True)}, load average at start {load:.1f}  ",
        f"Model: {base}"
        + (f" + adapter {args.adapter}" if args.adapter else " (no adapter)")
        + f"; greedy, {args.max_new_tokens} new tokens max, {args.max_turns}-turn cap; "
        f"{len(subset)} of {len(held)} held-out scenarios",
        "",
        "| run | episodes | turns | wall s | episodes/min | transcripts = one at a time (replies agree while "
        "observations do) | operate | terminate "
        "| clean |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if "one" in results:
        one_s = results["one"][1]
        for arm in arms[1:]:
            ratio = one_s / results[arm][1]
            lines.append(
                f"- {arm} vs one at a time: **{ratio:.2f}x** episodes/min (target >= 4x: "
                f"{'met' if ratio >= 4 else 'NOT met'})"
            )
    if "lockstep" in results and "continuous" in results:
        lines.append(f"- continuous vs lockstep: {results['lockstep'][1] / results['continuous'][1]:.2f}x")
    for arm in [a for a in arms if a != "one"]:
        res, secs = results[arm]
        if len(subset) == len(held):
            lines.append(
                f"- {arm}, whole held-out split: **{secs / 60:.1f} min** (target < 5 min: "
                f"{'met' if secs < 300 else 'NOT met'})"
            )
        op = ops[arm]
        kv = op._kv.stats if op._kv is not None else None
        if kv is None:
            lines.append(f"- {arm}: KV reuse NOT used (fallback: {op.kv_fallback})")
            continue
        lines.append(
            f"- {arm}: {kv.reused_tokens} of {kv.prompt_tokens} prompt tokens read from the cache, "
            f"{kv.prefilled_tokens} prefilled ({kv.prefill_s:.1f} s), {kv.decode_steps} decode steps "
            f"({kv.decode_s:.1f} s)" + (f", {kv.calls} generate calls" if arm == "lockstep" else "")
        )
        cs = op.continuous_stats
        if arm == "continuous" and cs is not None:
            lines.append(
                f"- continuous: {cs.mean_rows:.1f} rows a decode step on average, {cs.joins} joins, "
                f"{cs.rebuilds} buffer rebuilds; prompt lookup in the tail: {cs.accepted} of {cs.drafted} "
                f"drafted tokens confirmed"
            )
    slow = sorted(results[arms[-1]][0].episodes, key=lambda e: -e.wall_s)[:3]
    lines.append(
        f"- {arms[-1]}, slowest episodes: "
        + "; ".join(
            f"{e.scenario_id} {e.wall_s:.0f} s, {e.n_turns} turns, "
            f"{sum(len(x.content) for x in e.messages if x.role == 'assistant')} characters typed, "
            f"{e.failure_class or 'clean'}"
            for e in slow
        )
    )
    if args.episodes_json:
        import json

        args.episodes_json.write_text(
            json.dumps({arm: [e.model_dump() for e in results[arm][0].episodes] for arm in arms}, default=str)
        )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
