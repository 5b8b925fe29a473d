"""Benchmark: ``bashgym serve`` with continuous batching, 8 concurrent clients of mixed reply lengths vs the same
requests sent one at a time, in one run over one loaded model.

    .venv/bin/python benchmarks/bench_serving.py [--clients 8] [--rounds 2] [--scale 1.0] [--no-speculate]
        [--base DIR] [--adapter DIR]

One server (the scheduler ``bashgym serve`` runs: ``Batcher``, up to ``--clients`` rows per decode step) on a free
loopback port. Each client streams one chat completion over HTTP (greedy, ``stream: true`` with usage): a mix of
short shell turns and long open-ended answers whose ``max_tokens`` range from 24 to 256 (``--scale`` multiplies
them), so replies end at very different times. Setups, alternating over ``--rounds``:

- ``sequential``: one client sends the requests one after another (each waits for the previous reply): the
  throughput of a server that serves one request at a time;
- ``concurrent``: all clients at once; requests join the running batch and each leaves when its reply ends.

Reported: the wall time until the last reply, completion tokens per second, the ratio of the two throughputs
(target >= 3x), time to first token and each setup's latency for the shortest request (a long reply must not
hold it back), and how many replies differ (greedy: 0 expected, a float near-tie may flip one). Then the
abandoned-client case: a client opens a ``--abandon-tokens`` stream, goes away after ``--abandon-after-s`` seconds,
and a short request follows; its latency is compared with the same short request on an idle server (the
cancelled request must not delay it). Model: the configured base (offline SmolLM2-135M-Instruct by default),
optionally with ``--adapter``. ``--no-speculate`` turns the decoder's prompt-lookup drafting off in both setups:
drafting only runs while at most 4 rows decode, so it mostly speeds up the sequential setup (SmolLM2's greedy
replies repeat themselves); without it the ratio is the batching alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SYSTEM = "You are a helpful assistant."
# (user message, max_tokens): short shell turns and long open-ended answers, mixed
REQUESTS = [
    (
        "Which command lists the files in the current folder, hidden ones included? Answer with the command only.",
        24,
    ),
    ("Write a detailed tutorial on the Unix find command with many examples and explanations.", 256),
    ("Explain step by step how to write a bash script that backs up a folder every night with cron.", 192),
    ("How do I count the lines of a file named notes.txt? One command.", 32),
    ("Describe in depth how file permissions work on Linux: users, groups, chmod, chown and umask.", 224),
    ("Write a long story about a system administrator who discovers a mysterious process on a server.", 160),
    ("List twenty useful git commands and explain what each one does.", 128),
    ("Explain the difference between a hard link and a symbolic link, with examples.", 96),
]


def _stream(
    url: str, model: str, messages: list[dict[str, str]], max_tokens: int, stop_after_s: float | None = None
) -> dict:
    """One streamed completion: its text, completion tokens, time to first content and total seconds."""
    import httpx

    t0 = time.perf_counter()
    first, text, tokens = None, [], 0
    with (
        httpx.Client(timeout=1800) as client,
        client.stream(
            "POST",
            url + "/chat/completions",
            json={
                "model": model,
                "messages": messages,
                "max_tokens": max_tokens,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        ) as r,
    ):
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line.removeprefix("data: "))
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
            for c in event.get("choices", []):
                if c["delta"].get("content"):
                    first = first or time.perf_counter() - t0
                    text.append(c["delta"]["content"])
            if stop_after_s is not None and time.perf_counter() - t0 > stop_after_s:
                break  # the client goes away: leaving the block closes the connection
    return {
        "text": "".join(text),
        "tokens": tokens,
        "ttft": first or 0.0,
        "seconds": time.perf_counter() - t0,
    }


def _round(url: str, model: str, chats: list[tuple[list[dict[str, str]], int]], concurrent: bool) -> dict:
    t0 = time.perf_counter()
    if concurrent:
        with ThreadPoolExecutor(len(chats)) as ex:
            out = list(ex.map(lambda c: _stream(url, model, *c), chats))
    else:
        out = [_stream(url, model, *c) for c in chats]
    return {"seconds": time.perf_counter() - t0, "replies": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every request's max_tokens")
    ap.add_argument("--abandon-tokens", type=int, default=400)
    ap.add_argument("--abandon-after-s", type=float, default=3.0)
    ap.add_argument(
        "--no-speculate",
        action="store_true",
        help="turn the decoder's prompt-lookup drafting off (it speeds up lone rows: the sequential setup)",
    )
    ap.add_argument("--adapter")
    ap.add_argument("--base")
    args = ap.parse_args(argv)

    from bashgym_assets.serving.app import LocalServer, create_app
    from bashgym_assets.serving.batching import Batcher
    from bashgym_assets.serving.engine import ChatEngine
    from bashgym_assets.training import base_model as bm

    base = args.base or bm.resolve_base_model(prepare=True)
    engine = ChatEngine(base, args.adapter, max_context_tokens=2048, max_batch=args.clients).load()
    picked = [REQUESTS[i % len(REQUESTS)] for i in range(args.clients)]
    chats = [
        (
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}],
            max(1, round(n * args.scale)),
        )
        for q, n in picked
    ]
    batcher = Batcher(engine, max_batch=args.clients, max_wait_s=0.02, speculate=not args.no_speculate)
    load_start = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {"sequential": [], "concurrent": []}
    with LocalServer(create_app(engine, batcher)) as srv:
        model = engine.name
        _stream(srv.url, model, chats[0][0], 4)  # warm-up: first-call costs out of the measurement
        for _ in range(args.rounds):
            for name in runs:
                runs[name].append(_round(srv.url, model, chats, concurrent=name == "concurrent"))
        # the abandoned client: a long stream that goes away, then a short request
        short = chats[min(range(len(chats)), key=lambda i: chats[i][1])]
        idle = _stream(srv.url, model, *short)
        cancelled_before = batcher.stats.cancelled
        gone = threading.Thread(
            target=_stream, args=(srv.url, model, chats[1][0], args.abandon_tokens, args.abandon_after_s)
        )
        gone.start()
        gone.join()
        after = _stream(srv.url, model, *short)
        cancelled = batcher.stats.cancelled - cancelled_before
        leftover = batcher.in_flight
    load_end = os.getloadavg()[0]

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    summary = {}
    for name, rounds in runs.items():
        tokens = sum(r["tokens"] for r in rounds[-1]["replies"])
        summary[name] = {
            "seconds": med([r["seconds"] for r in rounds]),
            "tokens": tokens,
            "ttft": med([x["ttft"] for r in rounds for x in r["replies"]]),
            "shortest": med([r["replies"][chats.index(short)]["seconds"] for r in rounds]),
        }
    differ = sum(
        a["text"] != b["text"]
        for a, b in zip(runs["sequential"][-1]["replies"], runs["concurrent"][-1]["replies"], strict=True)
    )
    print(
        f"model: {engine.source}; {args.clients} clients, max_tokens {[n for _, n in chats]}, greedy, streamed; "
        f"{args.rounds} round(s) per setup, alternating; prompt-lookup drafting "
        f"{'off' if args.no_speculate else 'on'}; {os.cpu_count()} cores, 1-minute load "
        f"{load_start:.1f} at the start and {load_end:.1f} at the end; rows per decode step (concurrent and "
        f"sequential together): {dict(sorted(batcher.batch_sizes.items()))}\n"
    )
    print(
        "| setup | seconds for all replies (median) | rounds (s) | completion tokens | tokens/s | "
        "median time to first token (s) | shortest request (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rounds in runs.items():
        s = summary[name]
        each = ", ".join(f"{r['seconds']:.2f}" for r in rounds)
        print(
            f"| {name} | {s['seconds']:.2f} | {each} | {s['tokens']} | "
            f"{s['tokens'] / s['seconds']:.1f} | {s['ttft']:.2f} | {s['shortest']:.2f} |"
        )
    ratio = (summary["concurrent"]["tokens"] / summary["concurrent"]["seconds"]) / (
        summary["sequential"]["tokens"] / summary["sequential"]["seconds"]
    )
    print(
        f"\nthroughput concurrent / sequential: **{ratio:.2f}x** (target >= 3x); replies that differ: {differ} of "
        f"{args.clients}"
    )
    print(
        f"\nabandoned client: a {args.abandon_tokens}-token stream closed after {args.abandon_after_s:g} s; "
        f"cancelled requests: {cancelled}, still in flight after: {leftover}; the short request "
        f"({short[1]} max_tokens) took {after['seconds']:.2f} s right after it vs {idle['seconds']:.2f} s on "
        "an idle server"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
