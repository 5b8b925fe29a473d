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

``--paths`` picks the paths compared (default ``today,put,new``): ``put`` is the new path as it was until
2026-11-29, the seed written with ``put_archive`` into the created container (the engine mounts the container's
root for it: ~100 ms of its CPU) instead of a read-only bind of a host file. ``floor`` (always run, last) is what
no gate with a fresh sandbox per task can beat on this machine and engine: as many bare sandboxes as tasks, each
created, started, given three execs of ``true`` (the gate's setup, session and check) and removed, at the same
parallelism; the new path's share of that rate says how much is left to the task's own work and the harness.

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
from bashgym_assets.sandbox import sandbox as sandbox_module  # noqa: E402
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


@contextlib.contextmanager
def seed_by_put() -> Iterator[None]:
    """The seed written with ``put_archive`` before start, as every sandbox did until 2026-11-29."""
    bind_ok = sandbox_module.seed_bind_ok
    sandbox_module.seed_bind_ok = lambda: False  # type: ignore[assignment]
    try:
        yield
    finally:
        sandbox_module.seed_bind_ok = bind_ok  # type: ignore[assignment]


@contextlib.contextmanager
def path(name: str) -> Iterator[None]:
    if name == "today":
        with todays_path(), seed_by_put():
            yield
    elif name == "put":
        with seed_by_put():
            yield
    else:
        yield


def floor(count: int, image: str, parallel: int, execs: int = 3) -> float:
    """Seconds for ``count`` bare sandboxes (start, ``execs`` execs of ``true``, removal), ``parallel`` at once."""
    from bashgym_assets.sandbox import SandboxPool, SandboxSpec

    def one(_: int) -> None:
        with Sandbox(SandboxSpec(image=image)) as box:
            for _ in range(execs):
                box.run_as_root("true", timeout_s=30.0)

    start = time.perf_counter()
    list(SandboxPool(parallel).map(one, range(count)))
    return time.perf_counter() - start


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


REFUSALS: list[str] = []  # every refusal of any round, for the report: a path that loses a task says which


def gate(bundles: list, image: str, parallel: int) -> tuple[float, Counter[str]]:
    start = time.perf_counter()
    results = gate_bundles(bundles, image, max_parallel=parallel)
    wall = time.perf_counter() - start
    for r in results:
        if not r.admitted:
            REFUSALS.append(f"- {r.scenario_id}: {r.reason} (attempts {r.attempts}): `{r.detail[:600]!r}`")
            print(REFUSALS[-1], flush=True)
    return wall, Counter(r.reason for r in results)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-family", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--paths", default="today,put,new", help="comma-separated: today, put, new")
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
        names = [n for n in ("today", "put", "new") if n in args.paths.split(",")]
        rates: dict[str, list[float]] = {name: [] for name in names}
        for r in range(1, args.rounds + 1):
            for name in names:
                parallel = BASELINE_PARALLEL if name == "today" else args.parallel
                with path(name):
                    wall, reasons = gate(bundles, image, parallel)
                rate = len(bundles) / wall
                rates[name].append(rate)
                row = f"| {r} | {name} | {parallel} | {len(bundles)} | {wall:.1f} | {rate:.2f} | {dict(reasons)} |"
                print(row, flush=True)
                lines.append(row)
        wall = floor(len(bundles), image, args.parallel)
        bare = len(bundles) / wall
        row = f"| - | floor (bare sandboxes, 3 execs) | {args.parallel} | {len(bundles)} | {wall:.1f} | {bare:.2f} | - |"
        print(row, flush=True)
        lines.append(row)
        mean = {name: sum(found) / len(found) for name, found in rates.items()}
        parts = [f"{name} {rate:.2f}/s" for name, rate in mean.items()]
        summary = f"\nmean: {', '.join(parts)}"
        if "new" in mean:
            new = mean["new"]
            ratios = [f"new/{name} **{new / mean[name]:.2f}x**" for name in mean if name != "new"]
            summary += (
                f"; {'; '.join(ratios)}; new is {new / bare:.0%} of the floor ({bare:.2f}/s); 5,000 tasks at the "
                f"new rate: {5000 / new / 60:.1f} min (target 15 min, 5.5/s; the floor alone: "
                f"{5000 / bare / 60:.1f} min)"
            )
        print(summary)
        lines.append(summary)
    if REFUSALS:
        lines += ["", "Refusals:", *REFUSALS]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
