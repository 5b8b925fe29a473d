"""Benchmark: ``bashgym serve`` with concurrent requests batched into one generate call vs one at a time, same run.

    .venv/bin/python benchmarks/bench_serving.py [--clients 8] [--max-tokens 48] [--rounds 2] [--adapter DIR]

Two servers over the SAME loaded model, on free loopback ports: ``batched`` (the batching queue, up to
``--clients`` requests per generate call, ``--max-wait-ms`` 20 as ``bashgym serve``) and ``one at a time`` (``max_batch=1``: the queue hands
the engine one request per call, which is what a server without batching does). Each round, ``--clients`` clients
send their requests at once over HTTP (the first turn of held-out scenarios, rendered as the evaluation renders
them, greedy, ``--max-tokens`` each) and the wall time until the last reply is measured; setups alternate over
``--rounds``. Also reported: completion tokens per second, and how many replies differ between the two setups
(greedy: 0 expected, a float near-tie may flip one). Model: the configured base (offline SmolLM2-135M-Instruct by
default), optionally with ``--adapter``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _chats(n: int) -> list[list[dict[str, str]]]:
    from bashgym_assets.rollout.transcript import initial_messages
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.gate import HELD_OUT, split_for

    bundles, _ = load_pack()
    held = sorted((b for b in bundles if split_for(b.id) == HELD_OUT), key=lambda b: b.id)
    return [[m.model_dump() for m in initial_messages(b)] for b in held[:n]]


def _round(url: str, chats: list[list[dict[str, str]]], max_tokens: int) -> tuple[float, list[str], int]:
    import httpx

    def ask(messages: list[dict[str, str]]) -> dict:
        r = httpx.post(url + "/chat/completions", timeout=600, json={
            "model": "bashgym-operator", "messages": messages, "max_tokens": max_tokens, "temperature": 0})
        r.raise_for_status()
        return r.json()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(chats)) as ex:
        out = list(ex.map(ask, chats))
    took = time.perf_counter() - t0
    return took, [o["choices"][0]["message"]["content"] for o in out], sum(o["usage"]["completion_tokens"]
                                                                         for o in out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-wait-ms", type=float, default=20.0, help="the batched server's wait (serve's default)")
    ap.add_argument("--adapter")
    ap.add_argument("--base")
    args = ap.parse_args(argv)

    from bashgym_assets.serving.app import LocalServer, create_app
    from bashgym_assets.serving.batching import Batcher
    from bashgym_assets.serving.engine import ChatEngine
    from bashgym_assets.training import base_model as bm

    base = args.base or bm.resolve_base_model(prepare=True)
    engine = ChatEngine(base, args.adapter, max_context_tokens=2048, max_batch=args.clients).load()
    chats = _chats(args.clients)
    load_start = os.getloadavg()[0]
    setups = {"batched": Batcher(engine, max_batch=args.clients, max_wait_s=args.max_wait_ms / 1000),
              "one at a time": Batcher(engine, max_batch=1, max_wait_s=0.0)}
    times: dict[str, list[float]] = {k: [] for k in setups}
    tokens: dict[str, int] = {}
    replies: dict[str, list[str]] = {}
    servers = {k: LocalServer(create_app(engine, b)).__enter__() for k, b in setups.items()}
    try:
        _round(servers["batched"].url, chats[:2], 4)  # warm-up: first-call costs out of the measurement
        for _ in range(args.rounds):
            for name, srv in servers.items():
                took, texts, n_tokens = _round(srv.url, chats, args.max_tokens)
                times[name].append(took)
                tokens[name], replies[name] = n_tokens, texts
    finally:
        for srv in servers.values():
            srv.__exit__(None, None, None)
    load_end = os.getloadavg()[0]
    differ = sum(a != b for a, b in zip(replies["batched"], replies["one at a time"], strict=True))
    print(f"model: {engine.source}; {args.clients} concurrent clients, max wait {args.max_wait_ms:g} ms, greedy, max_tokens {args.max_tokens}, "
          f"{args.rounds} round(s); {os.cpu_count()} cores, 1-minute load {load_start:.1f} at the start and "
          f"{load_end:.1f} at the end; batch sizes seen: {dict(setups['batched'].batch_sizes)} vs "
          f"{dict(setups['one at a time'].batch_sizes)}\n")
    print("| setup | seconds for all replies (median) | rounds | completion tokens | tokens/s |")
    print("|---|---:|---:|---:|---:|")
    for name in setups:
        med = statistics.median(times[name])
        print(f"| {name} | {med:.2f} | {', '.join(f'{t:.2f}' for t in times[name])} | {tokens[name]} | "
              f"{tokens[name] / med:.1f} |")
    ratio = statistics.median(times["batched"]) / statistics.median(times["one at a time"])
    print(f"\nratio batched / one at a time: **{ratio:.2f}**; replies that differ: {differ} of {args.clients}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
