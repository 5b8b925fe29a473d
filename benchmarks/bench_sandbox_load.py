"""Sandbox load sweep (issue 31): N sandboxes alive at once in ONE process, for N in 8, 16, 32, 64, 128.

    .venv/bin/python benchmarks/bench_sandbox_load.py [--sizes 8,16,32,64,128] [--workers 16] [--no-write]

For each N, in this one process: start N sandboxes with a thread pool of min(N, --workers) workers (as the
evaluation starts its live episodes), keep all N alive, open each one's operator session and run one short
command in it (``echo ok; ls /``, through the same pool), then close all N (through the same pool). Recorded per
N: the wall time until all N were started, the command round, the close, failures (a sandbox that failed to start
or whose command did not print ``ok`` with exit 0: counted, never fatal; the first error is kept), the process's
open file descriptors and threads at the peak (all N alive with their sessions open), host memory at the peak vs
before (``MemAvailable``), the Docker engine's RSS (dockerd) and its per-container shims', the 1-minute load
average, and the containers left behind after the close. Every sandbox is closed whatever happens (try/finally).
Descriptors are counted again right after the close and once settled (see ``settle``): the closed sandboxes' Docker
clients stay referenced until the lease renewer's next pass, so each N starts from a settled process.

The issue: "One process caps at ~127 live sandboxes ... 128 concurrent sandboxes must work (they did at 64: linear
slowdown, ~1 MB RAM each)". Linear here means the start time per sandbox stays flat as N grows; the conclusion line
divides it at the largest N by it at the smallest.

Appends a markdown report to ``benchmarks/results/sandbox_load.md`` (unless ``--no-write``) with the command line,
the machine and the load average. Needs the Docker engine and the sandbox image (``python -m bashgym_assets.images``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import resource
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import append_report, machine  # noqa: E402

from bashgym_assets import images  # noqa: E402
from bashgym_assets.sandbox import Sandbox, SandboxSpec, closing_sandboxes  # noqa: E402
from bashgym_assets.sandbox import sandbox as sandbox_module  # noqa: E402
from bashgym_assets.sandbox._exec import docker_client  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "sandbox_load.md"
LABEL = "bashgym.bench"
LABELS = {LABEL: "sandbox_load"}
COMMAND = "echo ok; ls /"
LINEAR_WITHIN = 1.5  # s per sandbox at the largest N over the smallest: at most this counts as linear


# ---- what the host says ------------------------------------------------------------------------------------
def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def mem_available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb(names: tuple[str, ...]) -> tuple[float | None, int]:
    """Summed VmRSS (MB) of the processes whose name starts with one of ``names``, and how many there are (None:
    none readable, e.g. the engine runs in another PID namespace or VM)."""
    total, count = 0, 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if not (proc / "comm").read_text().strip().startswith(names):
                continue
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    count += 1
                    break
    return (total / 1024 if count else None), count


def load1() -> float:
    with open("/proc/loadavg") as fh:
        return float(fh.read().split()[0])


def leftovers() -> int:
    """Containers of this benchmark that still exist (any state)."""
    with contextlib.suppress(Exception):
        return len(docker_client().containers.list(all=True, filters={"label": f"{LABEL}=sandbox_load"}))
    return -1


def settle() -> None:
    """Let go of what the closed sandboxes still hold. The lease renewer keeps its last list of live sandboxes
    until its next pass (up to a minute), and with it the closed ones, their sessions' streams and, through them,
    the Docker clients (with their pooled sockets) of the worker threads that opened them: woken, it drops them."""
    wake = getattr(sandbox_module, "_RENEW_WAKE", None)
    deadline = time.monotonic() + 10.0
    while True:
        if wake is not None:
            wake.set()
        time.sleep(0.25)
        gc.collect()
        held = sum(1 for o in gc.get_objects() if isinstance(o, Sandbox))
        if held <= 1 or time.monotonic() > deadline:  # the renewer's loop variable keeps the last one it saw
            return


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


# ---- one size ----------------------------------------------------------------------------------------------
def sweep_one(n: int, image: str, max_workers: int) -> dict:
    boxes: list[Sandbox | None] = [None] * n
    errors: dict[int, str] = {}  # sandbox index -> its first error (one failure per sandbox at most)
    lock = threading.Lock()

    def fail(i: int, why: str) -> None:
        with lock:
            errors.setdefault(i, why)

    def start(i: int) -> None:
        try:
            box = Sandbox(SandboxSpec(image=image, labels=LABELS))
            boxes[i] = box  # before start(): a half-started box is closed too
            box.start()
        except Exception as exc:  # noqa: BLE001 - one sandbox's failure is counted, not fatal
            fail(i, f"start: {first_line(exc)}")

    def command(i: int) -> None:
        box = boxes[i]
        if box is None or i in errors:
            return
        try:
            r = box.session().run(COMMAND)
            if r.exit_code != 0 or not r.stdout.startswith("ok"):
                fail(i, f"command: exit {r.exit_code}, stdout {r.stdout[:80]!r}, stderr {r.stderr[:120]!r}")
        except Exception as exc:  # noqa: BLE001
            fail(i, f"command: {first_line(exc)}")

    def close(i: int) -> None:
        box = boxes[i]
        if box is not None:
            box.close()  # idempotent, never raises

    workers = max(1, min(n, max_workers))
    row: dict = {"n": n, "workers": workers}
    mem_before = mem_available_mb()
    fds_before = open_fds()
    dockerd_before, _ = rss_mb(("dockerd",))
    t0 = time.perf_counter()
    with (
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="load") as pool,
        closing_sandboxes(lambda: boxes),
    ):
        starting = [pool.submit(start, i) for i in range(n)]
        try:
            wait(starting)
            row["started_s"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            list(pool.map(command, range(n)))
            row["command_s"] = time.perf_counter() - t1
            # the peak: all N alive, every session open
            row["peak_fds"] = open_fds()
            row["peak_threads"] = threads()
            row["mem_peak_used_mb"] = mem_before - mem_available_mb()
            row["dockerd_mb"], _ = rss_mb(("dockerd",))
            row["shim_mb"], row["shims"] = rss_mb(("containerd-shim",))
            row["load"] = load1()
        finally:
            for fut in starting:  # interrupted: what has not begun never starts, what has finishes first,
                fut.cancel()  # so no sandbox is closed halfway through its start
            wait(starting)
            t2 = time.perf_counter()
            list(pool.map(close, range(n)))
            row["close_s"] = time.perf_counter() - t2
    row["total_s"] = time.perf_counter() - t0
    row["fds_before"], row["fds_after"] = fds_before, open_fds()
    row["dockerd_before_mb"] = dockerd_before
    row["failures"] = len(errors)
    row["first_error"] = errors[min(errors)] if errors else ""
    for _ in range(20):  # --rm removal is asynchronous: give the engine a moment
        row["leftover"] = leftovers()
        if row["leftover"] <= 0:
            break
        time.sleep(0.5)
    return row


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "n/a" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,16,32,64,128", help="comma-separated numbers of live sandboxes")
    ap.add_argument("--workers", type=int, default=16, help="start/command/close pool: min(N, this) threads")
    ap.add_argument("--no-write", action="store_true", help=f"print only; do not append to {RESULTS.name}")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 1:
        ap.error("--sizes needs positive integers")

    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    load_before = load1()
    # warm-up, not timed: leftovers reaped, the image's home skeleton read once per process, engine caches warm
    with Sandbox(SandboxSpec(image=image, labels=LABELS)) as box:
        box.session().run("true")
    settle()

    rows = []
    for n in sizes:
        row = sweep_one(n, image, args.workers)
        settle()  # here: sweep_one's own list of the closed sandboxes is gone
        row["fds_settled"] = open_fds()
        rows.append(row)
        print(
            f"N={n}: started {row['started_s']:.1f} s, commands {row.get('command_s', float('nan')):.1f} s, "
            f"close {row['close_s']:.1f} s, failures {row['failures']}, peak fds {row.get('peak_fds')}, "
            f"load {row.get('load', float('nan')):.1f}",
            flush=True,
        )

    engine = "?"
    with contextlib.suppress(Exception):
        engine = docker_client().version().get("Version", "?")
    cmdline = " ".join(
        [
            ".venv/bin/python",
            "benchmarks/bench_sandbox_load.py",
            *(a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"),
        ]
    )
    lines = [
        f"\n## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {', '.join(map(str, sizes))} live sandboxes in "
        "one process",
        "",
        f"Command: `{cmdline}`  ",
        f"Machine: {machine()}; Docker engine {engine}, image `{image}`; process descriptor limit "
        f"{nofile[0]} (hard {nofile[1]}); 1-minute load average {load_before:.1f} at the start and {load1():.1f} at "
        "the end (a shared machine: memory and times move with the other work).",
        "",
        f"Each N: start with a pool of min(N, {args.workers}) threads, all N alive, one `{COMMAND}` in each one's "
        "session, close all N (same pool). Memory per sandbox: the drop of `MemAvailable` from before the starts "
        "to the peak, over N. Memory, dockerd and the containerd shims are host-wide: other work's containers "
        "count there too.",
        "",
        "| sandboxes | started in s | s per sandbox | command round s | close s | failures | peak fds | "
        "memory MB per sandbox | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        per_mb = r["mem_peak_used_mb"] / r["n"] if "mem_peak_used_mb" in r else None
        lines.append(
            f"| {r['n']} | {r['started_s']:.2f} | {r['started_s'] / r['n']:.3f} | "
            f"{fmt(r.get('command_s'), '.2f')} | {r['close_s']:.2f} | {r['failures']} | "
            f"{r.get('peak_fds', 'n/a')} | {fmt(per_mb, '.1f')} | {fmt(r.get('load'))} |"
        )
    lines += [
        "",
        "| sandboxes | total s | fds before / after close / settled | peak threads | "
        "dockerd RSS MB before / peak | shims on the host (RSS MB) | containers left | first error |",
        "|---:|---:|---|---:|---|---|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['total_s']:.2f} | {r['fds_before']} / {r['fds_after']} / "
            f"{r['fds_settled']} | {r.get('peak_threads', 'n/a')} | {fmt(r['dockerd_before_mb'], '.0f')} / "
            f"{fmt(r.get('dockerd_mb'), '.0f')} | {r.get('shims', 'n/a')} ({fmt(r.get('shim_mb'), '.0f')}) | "
            f"{r['leftover']} | {r['first_error'].replace('|', '/') or '-'} |"
        )
    small, large = rows[0], rows[-1]
    for r in rows:
        small = r if r["n"] < small["n"] else small
        large = r if r["n"] > large["n"] else large
    ratio = (large["started_s"] / large["n"]) / (small["started_s"] / small["n"])
    failures = sum(r["failures"] for r in rows)
    verdict = "linear" if ratio <= LINEAR_WITHIN else "NOT linear"
    lines += [
        "",
        f"**{verdict}**: s per sandbox at N={large['n']} is {ratio:.2f}x that at N={small['n']} "
        f"(linear: <= {LINEAR_WITHIN}x); failures {failures} over {sum(r['n'] for r in rows)} sandboxes; "
        f"containers left after the close: {sum(max(0, r['leftover']) for r in rows)}.",
        "",
    ]
    report = "\n".join(lines)
    print(report, flush=True)
    if not args.no_write:
        append_report(
            RESULTS,
            "Sandbox load sweep: N live sandboxes in one process (issue 31)",
            "bench_sandbox_load.py",
            report,
        )
        print(f"appended to {RESULTS}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
