"""Benchmark: the reference gate and reference-operator rollouts over the bundled pack, in parallel sandboxes
against one at a time, in the same run (scenarios per minute and the ratio).

    .venv/bin/python benchmarks/bench_gate.py [--parallel 4] [--limit N] [--out benchmarks/results/scenarios.md]

Needs the Docker engine and the sandbox image (``python -m bashgym_assets.images``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import machine as _machine_line  # noqa: E402

from bashgym_assets import images  # noqa: E402
from bashgym_assets.rollout.operators import ReferenceOperator  # noqa: E402
from bashgym_assets.rollout.rollouts import run_rollouts  # noqa: E402
from bashgym_assets.scenarios.candidates import load_pack  # noqa: E402
from bashgym_assets.scenarios.gate import TRAIN, gate_bundles, reason_counts  # noqa: E402


def timed(fn):  # noqa: ANN001, ANN201
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0, help="only the first N pack bundles (0 = all)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scenarios.md")
    args = ap.parse_args(argv)

    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    bundles, errors = load_pack()
    if errors:
        print(f"{len(errors)} pack files did not load: {errors[:3]}", file=sys.stderr)
    if args.limit:
        bundles = bundles[: args.limit]
    n = len(bundles)
    print(f"{n} bundles, image {image}, parallel {args.parallel}", flush=True)

    # Warm-up: the first container start pays for page cache and image layers.
    gate_bundles(bundles[:2], image, max_parallel=2)

    gate_par, t_gate_par = timed(lambda: gate_bundles(bundles, image, max_parallel=args.parallel))
    print(f"gate parallel: {t_gate_par:.1f}s {reason_counts(gate_par)}", flush=True)
    gate_ser, t_gate_ser = timed(lambda: gate_bundles(bundles, image, max_parallel=1))
    print(f"gate serial:   {t_gate_ser:.1f}s {reason_counts(gate_ser)}", flush=True)

    by_id = {b.id: b for b in bundles}
    train = [by_id[r.scenario_id] for r in gate_par if r.admitted and r.split == TRAIN]
    op = ReferenceOperator()
    roll_par, t_roll_par = timed(lambda: run_rollouts(train, op, image, max_parallel=args.parallel))
    print(
        f"rollouts parallel: {t_roll_par:.1f}s kept {sum(r.kept for r in roll_par)}/{len(roll_par)}",
        flush=True,
    )
    roll_ser, t_roll_ser = timed(lambda: run_rollouts(train, op, image, max_parallel=1))
    print(
        f"rollouts serial:   {t_roll_ser:.1f}s kept {sum(r.kept for r in roll_ser)}/{len(roll_ser)}",
        flush=True,
    )

    def per_min(count: int, seconds: float) -> float:
        return count / seconds * 60 if seconds else 0.0

    rows = [
        (
            "gate (whole pack)",
            n,
            args.parallel,
            t_gate_par,
            t_gate_ser,
            f"{sum(r.admitted for r in gate_par)}/{n} admitted",
        ),
        (
            "reference rollouts (train split)",
            len(train),
            args.parallel,
            t_roll_par,
            t_roll_ser,
            f"{sum(r.kept for r in roll_par)}/{len(train)} kept",
        ),
    ]
    cmd = "python benchmarks/bench_gate.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        "# Scenarios: gate and reference rollouts, parallel sandboxes vs one at a time",
        "",
        f"Command: `{cmd.strip()}` (run from the repository root with `.venv/bin/python`)  ",
        f"Machine: {_machine_line(docker=True)}  ",
        f"Image: `{image}`; date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        "Both modes run the same bundles in the same run (after a 2-bundle warm-up); each scenario gets a fresh "
        "container (start, files, setup, check before, reference turns through a persistent shell, check after, "
        "removal).",
        "",
        "| stage | scenarios | parallel | parallel s | one-at-a-time s | parallel /min | one-at-a-time /min "
        "| speed-up | result |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, count, par, tp, ts, result in rows:
        lines.append(
            f"| {name} | {count} | {par} | {tp:.1f} | {ts:.1f} | {per_min(count, tp):.1f} | "
            f"{per_min(count, ts):.1f} | {ts / tp if tp else 0:.2f}x | {result} |"
        )
    rejected = [r for r in gate_par if not r.admitted]
    if rejected:
        lines += ["", "Rejected by the gate:", ""]
        lines += [f"- `{r.scenario_id}`: {r.reason}: {r.detail[:200]}".replace("\n", " / ") for r in rejected]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
