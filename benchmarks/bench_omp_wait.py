"""OpenMP's waiting policy on a shared 2-core machine: batched greedy generation with spinning vs sleeping waits.

Each setting runs in its own process (the policy is read when the OpenMP runtime starts, i.e. at torch's import):
``OMP_WAIT_POLICY=ACTIVE`` (GNU libgomp spins; what torch did here before bashgym set PASSIVE), ``PASSIVE`` (what
every bashgym process now sets unless the user chose), and one thread (no waits at all). Reports wall and CPU
seconds of the same ``generate`` and the load average around it: the ratio matters, since the machine is shared.

    .venv/bin/python benchmarks/bench_omp_wait.py --batch 8 --tokens 32 --reps 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, os, sys, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
model_dir, batch, tokens, reps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
tok = AutoTokenizer.from_pretrained(model_dir)
tok.padding_side = "left"
model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
chats = [[{"role": "user", "content": f"List the files in /srv/data{i} by size, then count the lines of report{i}.txt"}]
         for i in range(batch)]
enc = tok.apply_chat_template(chats, add_generation_prompt=True, padding=True, return_tensors="pt", return_dict=True)
out = []
for _ in range(reps):
    w, c = time.perf_counter(), time.process_time()
    with torch.no_grad():
        model.generate(**enc, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    out.append({"wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c})
print("RESULT " + json.dumps(out))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model folder (default: the converted offline SmolLM2)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args()
    if args.model is None:
        from bashgym_assets.training.base_model import resolve_base_model

        args.model = resolve_base_model()
    settings = [
        ("ACTIVE, 2 threads", "ACTIVE", 2),
        ("PASSIVE, 2 threads", "PASSIVE", 2),
        ("1 thread", "PASSIVE", 1),
    ]
    print(
        f"model {args.model}; batch {args.batch} x {args.tokens} greedy tokens, {args.reps} reps each; "
        f"{os.cpu_count()} cores\n"
    )
    print("| setting | load avg before | wall s (each rep) | CPU s (each rep) |\n|---|---|---|---|")
    for label, policy, threads in settings:
        env = dict(os.environ, OMP_WAIT_POLICY=policy)
        load = os.getloadavg()[0]
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                args.model,
                str(args.batch),
                str(args.tokens),
                str(args.reps),
                str(threads),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"| {label} | {load:.1f} | failed: {proc.stderr[-300:]!r} | |")
            continue
        reps = json.loads(line.removeprefix("RESULT "))
        walls = ", ".join(f"{r['wall_s']:.1f}" for r in reps)
        cpus = ", ".join(f"{r['cpu_s']:.1f}" for r in reps)
        print(f"| {label} | {load:.1f} | {walls} | {cpus} |", flush=True)
        time.sleep(1)


if __name__ == "__main__":
    main()
