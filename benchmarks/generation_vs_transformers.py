"""Benchmark: our continuous decoder vs transformers' own continuous batching vs plain ``generate``, same run.

    .venv/bin/python benchmarks/generation_vs_transformers.py [--prompts 16] [--budgets 16,32,48] [--rounds 2]
    .venv/bin/python benchmarks/generation_vs_transformers.py --quick [--model DIR]   # seconds: what the test runs

Issue 30 asks that where transformers' own generation matches ours, the two are measured in the same run and ours
is kept only where it wins. The same greedy requests go through

1. **ours**: ``inference.continuous.ContinuousDecoder`` over a ``KVGenerator`` with each request's own token budget,
   prompt-lookup drafting on (``--no-draft``: off, to see what it adds), a fresh KV store each round: what
   ``bashgym serve`` (``serving.engine``) builds and what the evaluation and the student rollouts step through
   ``LocalReplyStream``;
2. **transformers CB**: the ``ContinuousBatchingManager`` that ``model.generate_batch`` wraps (its context manager,
   one ``add_request`` per prompt, so each request keeps its own ``max_new_tokens``; ``generate_batch`` takes one
   budget for all), the paged cache sized to the workload (by default it takes 60% of the machine's RAM on a
   CPU), the rest of its configuration (256-token pages, SDPA attention: no flash kernels on a CPU) its defaults;
3. **generate**: one left-padded ``model.generate`` over all prompts up to the largest budget, each row then cut to
   its own budget: the reference the outputs are compared to.

The prompts are the evaluation's: held-out scenarios of the bundled pack rendered with the model's chat template, at
turn 1 to 4 (earlier turns replayed from the scenario's reference commands with short observations), so their
lengths vary; budgets cycle through ``--budgets``. Same model, same thread count (``OMP_NUM_THREADS`` set before
torch loads, so transformers' generation thread gets it too), the setups alternating over ``--rounds`` in a rotating
order, one untimed warm-up each. Reported: wall and CPU seconds (the whole process, every thread), new tokens/s
(tokens up to and including each reply's stop token, within its budget), ours' tokens/s over each setup's, and how
many replies are token-identical to ``generate``'s (floating-point summation order may flip a near-tie).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import append_report, machine  # noqa: E402

OURS = "ours: ContinuousDecoder (eval, serve)"
THEIRS = "transformers: continuous batching"
PLAIN = "transformers: generate, padded batch"
SETUPS = (OURS, THEIRS, PLAIN)
QUICK = {"prompts": 4, "budgets": "8,16", "rounds": 1, "max_turn": 2}


def _observation(bundle: Any, turn: int) -> str:
    """A short, plausible output for the reference command of ``turn``: a file of the scenario, or a listing."""
    from bashgym_assets.rollout.transcript import render_observation

    files = list((bundle.files or {}).items())
    if files:
        name, content = files[turn % len(files)]
        stdout = f"{name}\n{str(content)[:400]}"
    else:
        stdout = "\n".join(
            f"-rw-r--r-- 1 {bundle.user} {bundle.user} {1024 * (i + 1)} Nov 26 10:0{i} item{i}.txt"
            for i in range(4)
        )
    result = SimpleNamespace(
        stdout=stdout,
        stderr="",
        exit_code=0,
        timed_out=False,
        stdout_truncated_bytes=0,
        stderr_truncated_bytes=0,
    )
    return render_observation(result)


def build_prompts(tokenizer: Any, n: int, max_turn: int) -> list[list[int]]:
    """``n`` evaluation prompts: held-out scenarios at turn 1..``max_turn`` (their earlier turns replayed)."""
    from bashgym_assets.rollout.transcript import initial_messages
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.gate import HELD_OUT, split_for

    bundles, _ = load_pack()
    held = sorted((b for b in bundles if split_for(b.id) == HELD_OUT), key=lambda b: b.id)
    out = []
    for i in range(n):
        bundle = held[i % len(held)]
        messages = [m.model_dump() for m in initial_messages(bundle)]
        for turn, command in enumerate(list(bundle.reference or [])[: i % max(1, max_turn)]):
            messages.append({"role": "assistant", "content": command})
            messages.append({"role": "user", "content": _observation(bundle, turn)})
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True
        )
        out.append(list(ids["input_ids"]))
    return out


def cut(tokens: list[int], stop: set[int], budget: int) -> list[int]:
    """A reply as every setup counts it: up to and including its first stop token, at most ``budget`` tokens."""
    tokens = tokens[:budget]
    end = next((i for i, t in enumerate(tokens) if t in stop), None)
    return tokens if end is None else tokens[: end + 1]


def run_ours(
    model: Any, prompts: list[list[int]], budgets: list[int], stop: list[int], pad: int, draft: bool = True
) -> list[list[int]]:
    """What ``serving.engine`` builds: a fresh ``KVGenerator`` (no KV carried over from the last round) under a
    ``ContinuousDecoder``, every request submitted with its own budget, stepped until all have ended."""
    from bashgym_assets.inference.continuous import ContinuousDecoder
    from bashgym_assets.inference.kv_decode import KVGenerator

    decoder = ContinuousDecoder(KVGenerator(model, stop, pad, max(budgets)), max_rows=32, speculate=draft)
    for key, (prompt, budget) in enumerate(zip(prompts, budgets, strict=True)):
        decoder.submit(key, prompt, max_new_tokens=budget)
    got: dict[Any, list[int]] = {}
    while decoder.busy:
        for key, ids, _ in decoder.step():
            got[key] = ids
    return [got[i] for i in range(len(prompts))]


def run_theirs(
    model: Any, prompts: list[list[int]], budgets: list[int], stop: list[int], pad: int
) -> list[list[int]]:
    """transformers' continuous batching as ``generate_batch`` runs it (its context manager, warm-up and result
    loop), one ``add_request`` per prompt so each keeps its own budget; the paged cache sized to the workload."""
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    from transformers.generation.continuous_batching.utils import WorkloadHints

    page = 256
    blocks = sum(math.ceil((len(p) + b) / page) for p, b in zip(prompts, budgets, strict=True)) + 4
    config = GenerationConfig(
        max_new_tokens=max(budgets), do_sample=False, eos_token_id=stop, pad_token_id=pad
    )
    cb = ContinuousBatchingConfig(page_size=page, num_blocks=blocks)
    hints = WorkloadHints(
        max_prompt_length=max(map(len, prompts)), max_generated_length=max(budgets), num_requests=len(prompts)
    )
    results: dict[str, list[int]] = {}
    with model.continuous_batching_context_manager(
        generation_config=config, continuous_batching_config=cb, block=True, timeout=5, workload_hints=hints
    ) as manager:
        ids = [
            manager.add_request(p, request_id=f"r{i}", max_new_tokens=b, eos_token_id=stop)
            for i, (p, b) in enumerate(zip(prompts, budgets, strict=True))
        ]
        while len(results) < len(ids):
            result = manager.get_result(timeout=1)
            if result is None:
                if not manager.is_running():
                    raise RuntimeError("transformers' generation thread ended before every request finished")
                continue
            if result.is_finished():
                if result.error is not None:
                    raise RuntimeError(
                        f"transformers' continuous batching failed {result.request_id}: {result.error}"
                    )
                results[result.request_id] = list(result.generated_tokens)
    return [results[f"r{i}"] for i in range(len(prompts))]


def run_plain(
    model: Any, prompts: list[list[int]], budgets: list[int], stop: list[int], pad: int
) -> list[list[int]]:
    """One left-padded ``generate`` over every prompt, greedy, to the largest budget (rows are cut afterwards)."""
    import torch

    from bashgym_assets.rollout.operators import left_pad

    input_ids, attention = left_pad(prompts, pad)
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            max_new_tokens=max(budgets),
            do_sample=False,
            eos_token_id=stop,
            pad_token_id=pad,
            use_cache=True,
            temperature=None,
            top_p=None,
            top_k=None,
        )
    return [row[input_ids.shape[1] :].tolist() for row in out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--model", help="model folder (default: the offline SmolLM2-135M-Instruct, as training uses)"
    )
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--budgets", default="16,32,48", help="max_new_tokens, cycled over the prompts")
    ap.add_argument("--max-turn", type=int, default=4, help="prompts are at turn 1..this of their scenario")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--no-draft", action="store_true", help="ours without prompt-lookup drafting (what it adds)"
    )
    ap.add_argument("--quick", action="store_true", help=f"a few seconds' worth: {QUICK} (for the test)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "generation_vs_transformers.md"))
    args = ap.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    import bashgym_assets  # noqa: F401 - sets OMP_WAIT_POLICY=PASSIVE before torch loads, as bashgym does

    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch: transformers' own thread reads it too
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from bashgym_assets.inference.turns import stop_token_ids

    hf_logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    if args.model:
        model_dir = args.model
    else:
        from bashgym_assets.training.base_model import resolve_base_model

        model_dir = resolve_base_model(prepare=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    stop = stop_token_ids(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop[0]
    prompts = build_prompts(tokenizer, args.prompts, args.max_turn)
    cycle = [int(b) for b in str(args.budgets).split(",")]
    budgets = [cycle[i % len(cycle)] for i in range(len(prompts))]

    runners = {
        OURS: functools.partial(run_ours, draft=not args.no_draft),
        THEIRS: run_theirs,
        PLAIN: run_plain,
    }
    load_start = os.getloadavg()[0]
    for setup in SETUPS:  # warm-up, untimed: first-call allocations and kernel choices
        runners[setup](model, prompts[:2], [4, 4], stop, pad)
    wall = dict.fromkeys(SETUPS, 0.0)
    cpu = dict.fromkeys(SETUPS, 0.0)
    rounds: dict[str, list[float]] = {s: [] for s in SETUPS}
    outputs: dict[str, list[list[int]]] = {}
    stop_set = set(stop)
    for r in range(args.rounds):
        for setup in SETUPS[r % 3 :] + SETUPS[: r % 3]:  # rotate who goes first
            w0, c0 = time.perf_counter(), time.process_time()
            raw = runners[setup](model, prompts, budgets, stop, pad)
            w, c = time.perf_counter() - w0, time.process_time() - c0
            wall[setup] += w
            cpu[setup] += c
            rounds[setup].append(w)
            outputs[setup] = [cut(t, stop_set, b) for t, b in zip(raw, budgets, strict=True)]
            print(f"round {r + 1}: {setup}: {w:.1f} s", file=sys.stderr, flush=True)
    load_end = os.getloadavg()[0]

    reference = outputs[PLAIN]
    tokens = {s: args.rounds * sum(map(len, outputs[s])) for s in SETUPS}
    rate = {s: tokens[s] / wall[s] for s in SETUPS}
    lengths = sorted(map(len, prompts))
    command = (
        "Command: `.venv/bin/python benchmarks/generation_vs_transformers.py "
        + (
            "--quick"
            if args.quick
            else f"--prompts {args.prompts} --budgets {args.budgets} --max-turn {args.max_turn} --rounds {args.rounds}"
        )
        + (" --no-draft" if args.no_draft else "")
        + f" --threads {args.threads}`"
    )
    lines = [
        "",
        f"## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC" + (" (quick)" if args.quick else ""),
        "",
        command + "  ",
        f"Machine: {machine()}; load average {load_start:.1f} at the start, {load_end:.1f} at the end  ",
        f"Model: `{Path(model_dir).name}` (float32, attention `{model.config._attn_implementation}`), torch "
        f"{torch.__version__}, {args.threads} threads; {len(prompts)} greedy requests, prompts {lengths[0]}-"
        f"{lengths[-1]} tokens (median {lengths[len(lengths) // 2]}), max_new_tokens {args.budgets} cycled, "
        f"{args.rounds} round(s) alternating"
        + ("; ours WITHOUT prompt-lookup drafting" if args.no_draft else ""),
        "",
        "| setup | wall s | CPU s | new tokens | new tokens/s | ours vs this (tokens/s) | ours vs this (CPU s) "
        "| outputs identical to generate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in SETUPS:
        same = sum(a == b for a, b in zip(outputs[s], reference, strict=True))
        identical = "(reference)" if s == PLAIN else f"{same}/{len(prompts)}"
        lines.append(
            f"| {s} | {wall[s] / args.rounds:.1f} | {cpu[s] / args.rounds:.1f} | {tokens[s] // args.rounds} | "
            f"{rate[s]:.1f} | {rate[OURS] / rate[s]:.2f}x | {cpu[s] / cpu[OURS]:.2f}x | {identical} |"
        )
    per_round = "; ".join(f"{s}: " + ", ".join(f"{w:.1f}" for w in rounds[s]) for s in SETUPS)
    lines += ["", f"Wall seconds per round: {per_round}", ""]
    report = "\n".join(lines)
    print(report)
    append_report(
        Path(args.out),
        "Generation: our continuous decoder vs transformers' continuous batching vs generate",
        "generation_vs_transformers.py",
        report,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
