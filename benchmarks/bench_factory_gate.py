"""Benchmark: the gate certifying the task factory's tasks, the new path against today's, in the same run.

    .venv/bin/python benchmarks/bench_factory_gate.py [--per-family 2] [--rounds 2] [--parallel 8]
    .venv/bin/python benchmarks/bench_factory_gate.py --scale --per-family 90      # every task, new path only

Today's path (the baseline, as the gate ran before the factory): a separate exec for the check on the untouched
setup and for the workdir test, the engine's ``docker diff`` for root sessions' tool baseline and tamper check,
the engine's container list with sizes for the disk watchdog (every 0.5 s per sandbox), and 4 sandboxes at once
(the ``gated_scenarios`` default then). The new path: setup, workdir test and the check before in one exec
(``Sandbox.setup(then=...)``), the layer diff and size read from the overlay2 upper folder on the host, no
tamper check of the checker's tools for the reference (its author wrote the check too), and ``--parallel``
sandboxes. Both give every task the full proof in a fresh sandbox: setup, check fails before,
reference, check passes after. Rounds alternate (baseline, new, baseline, new) on the same tasks; the figure
is tasks per second and the ratio. The target: 5,000 tasks within 15 minutes on 2 cores (>= 5.5 per second).

Needs the Docker engine and the sandbox image (``python -m bashgym_assets.images``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import machine  # noqa: E402

from bashgym_assets import images  # noqa: E402
from bashgym_assets.sandbox.sandbox import Sandbox  # noqa: E402
from bashgym_assets.scenarios.factory.generate import generate  # noqa: E402
from bashgym_assets.scenarios.gate import gate_bundles  # noqa: E402

BASELINE_PARALLEL = 4


@contextlib.contextmanager
def todays_path() -> Iterator[None]:
    """The gate as it ran before: no combined setup exec, no inline check, the engine's layer diff."""
    setup, check_command, upper, session = (
        Sandbox.setup,
        Sandbox.check_command,
        Sandbox._upper_dir,
        Sandbox.session,
    )
    Sandbox.setup = lambda self, then=(): setup(self)  # type: ignore[method-assign]
    Sandbox.check_command = lambda self, script, timeout_s=30.0: None  # type: ignore[method-assign]
    Sandbox._upper_dir = lambda self: None  # type: ignore[method-assign]
    Sandbox.session = lambda self, verify_tools=True: session(self)  # type: ignore[method-assign]
    try:
        yield
    finally:
        Sandbox.setup, Sandbox.check_command, Sandbox._upper_dir, Sandbox.session = (
            setup,
            check_command,
            upper,
            session,
        )


def interleave(bundles: list) -> list:
    """Families in turn, so a slice of the list is a mix of categories and of root and user tasks."""
    by_family: dict[str, list] = {}
    for b in bundles:
        by_family.setdefault(b.id.split(".")[1], []).append(b)
    out = []
    while any(by_family.values()):
        for queue in by_family.values():
            if queue:
                out.append(queue.pop(0))
    return out


def gate(bundles: list, image: str, parallel: int) -> tuple[float, Counter[str]]:
    start = time.perf_counter()
    results = gate_bundles(bundles, image, max_parallel=parallel)
    return time.perf_counter() - start, Counter(r.reason for r in results)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-family", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--scale", action="store_true", help="gate every drawn task once, new path only")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "factory_gate.md")
    args = ap.parse_args(argv)

    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    t0 = time.perf_counter()
    run = generate(args.per_family, seed=0)
    bundles = interleave(run.bundles)
    users = Counter(b.user for b in bundles)
    head = (
        f"{machine()}\n{len(bundles)} tasks from {len(run.yields)} families ({users['root']} as root), drawn "
        f"in {time.perf_counter() - t0:.1f} s; image {image}"
    )
    print(head, flush=True)
    lines = [
        f"# Factory gate benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        head,
        "",
        f"`{' '.join(['.venv/bin/python', 'benchmarks/bench_factory_gate.py', *(argv or sys.argv[1:])])}`",
        "",
    ]
    if args.scale:
        wall, reasons = gate(bundles, image, args.parallel)
        row = (
            f"every task, new path, {args.parallel} sandboxes: {len(bundles)} in {wall:.0f} s = "
            f"{len(bundles) / wall:.2f}/s; {dict(reasons)}"
        )
        print(row, flush=True)
        lines.append(row)
    else:
        lines += [
            "| round | path | sandboxes | tasks | seconds | tasks/s | outcomes |",
            "|---|---|---|---|---|---|---|",
        ]
        rates: dict[str, list[float]] = {"today": [], "new": []}
        for r in range(1, args.rounds + 1):
            for name in ("today", "new"):
                parallel = BASELINE_PARALLEL if name == "today" else args.parallel
                ctx = todays_path() if name == "today" else contextlib.nullcontext()
                with ctx:
                    wall, reasons = gate(bundles, image, parallel)
                rate = len(bundles) / wall
                rates[name].append(rate)
                row = f"| {r} | {name} | {parallel} | {len(bundles)} | {wall:.1f} | {rate:.2f} | {dict(reasons)} |"
                print(row, flush=True)
                lines.append(row)
        today, new = sum(rates["today"]) / args.rounds, sum(rates["new"]) / args.rounds
        summary = (
            f"\nmean: today {today:.2f}/s, new {new:.2f}/s: **{new / today:.2f}x**; 5,000 tasks at the new "
            f"rate: {5000 / new / 60:.1f} min (target 15 min, 5.5/s)"
        )
        print(summary)
        lines.append(summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
