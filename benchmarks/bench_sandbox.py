"""Sandbox benchmark: container ready time, per-command round trip, and scenario-gate throughput at 1/2/4 parallel
sandboxes, each measured against the sekft baseline (one ``docker exec`` per command, state replayed through files)
in the same run, on the same engine, image and containment settings.

    .venv/bin/python benchmarks/bench_sandbox.py [--commands 200] [--ready 10] [--scenarios 12] [--out FILE]

Writes a markdown report (default ``benchmarks/results/sandbox.md``) with the command line and the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import machine  # noqa: E402

from bashgym_assets.images import sandbox_image_tag  # noqa: E402
from bashgym_assets.sandbox import Sandbox, SandboxPool, SandboxSpec  # noqa: E402
from bashgym_assets.sandbox._exec import docker_client  # noqa: E402
from bashgym_assets.sandbox.models import SCENARIO_CAPABILITIES  # noqa: E402

LABELS = {"bashgym.bench": "sandbox"}


# ---- the baseline: sekft's design ------------------------------------------------------------------------------
class ExecPerCommand:
    """One container; every command is its own ``docker exec bash -c`` with cwd and exports replayed from files
    (sekft's dashdocker, with bash instead of dash). Same containment flags as the sandbox."""

    REPLAY = (
        '[ -f /tmp/.state/cwd ] && cd "$(cat /tmp/.state/cwd)"; [ -f /tmp/.state/env ] && . /tmp/.state/env; '
        "{ %s\n} </dev/null; rc=$?; pwd > /tmp/.state/cwd; export -p > /tmp/.state/env; exit $rc"
    )

    def __init__(self, image: str, files: dict[str, str] | None = None) -> None:
        self.client = docker_client()
        self.files = files or {}
        self.image = image

    def __enter__(self) -> ExecPerCommand:
        self.container = self.client.containers.run(
            self.image,
            ["sleep", "3600"],
            detach=True,
            init=True,
            network_mode="none",
            cap_drop=["ALL"],
            cap_add=SCENARIO_CAPABILITIES,
            security_opt=["no-new-privileges"],
            mem_limit="512m",
            nano_cpus=10**9,
            pids_limit=256,
            labels=LABELS,
            auto_remove=True,
        )
        self.exec_root("mkdir -p /tmp/.state && chown operator /tmp/.state")
        for path, content in self.files.items():
            self.exec_root(
                f"mkdir -p $(dirname {path}) && cat > {path} <<'BASHGYM_EOF'\n{content}\nBASHGYM_EOF"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.container.remove(force=True)

    def exec_root(self, command: str) -> tuple[int, bytes]:
        res = self.container.exec_run(["bash", "-c", command], user="0")
        return res.exit_code, res.output

    def run(self, command: str) -> tuple[int, bytes]:
        res = self.container.exec_run(
            ["bash", "-c", self.REPLAY % command], user="operator", workdir="/home/operator", demux=True
        )
        return res.exit_code, res.output


# ---- helpers -------------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ms(x: float) -> str:
    return f"{x * 1000:.2f}"


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


SMALL_COMMANDS = [
    "true",
    "echo hello",
    "pwd",
    "cd /tmp",
    "export X=1",
    "echo $X",
    "ls /",
    "cd ~",
    "x=$((1+2))",
    "printf '%s' abc",
]

# A synthetic gate scenario: files + setup, check fails first, a 5-command reference, check passes.
GATE_FILES = {
    "/home/operator/logs/app.log": "\n".join(
        f"2026-11-22 level={'ERROR' if i % 7 == 0 else 'INFO'} msg=event-{i}" for i in range(200)
    )
    + "\n"
}
GATE_SETUP = ["mkdir -p /srv/reports", "chown operator /srv/reports"]
GATE_REFERENCE = [
    "cd ~/logs",
    "grep -c ERROR app.log > /tmp/n",
    "export N=$(cat /tmp/n)",
    'echo "errors=$N" > /srv/reports/summary.txt',
    "cat /srv/reports/summary.txt",
]
GATE_CHECK = "grep -qx 'errors=29' /srv/reports/summary.txt"


def gate_ours(image: str) -> bool:
    with Sandbox(SandboxSpec(image=image, files=GATE_FILES, setup=GATE_SETUP, labels=LABELS)) as box:
        assert box.setup().ok
        if box.run_check(GATE_CHECK).exit_code == 0:
            return False
        s = box.session()
        for cmd in GATE_REFERENCE:
            s.run(cmd)
        return box.run_check(GATE_CHECK).exit_code == 0


def gate_baseline(image: str) -> bool:
    with ExecPerCommand(image, GATE_FILES) as box:
        for cmd in GATE_SETUP:
            assert box.exec_root(cmd)[0] == 0
        if box.exec_root(GATE_CHECK)[0] == 0:
            return False
        for cmd in GATE_REFERENCE:
            box.run(cmd)
        return box.exec_root(GATE_CHECK)[0] == 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commands", type=int, default=200)
    ap.add_argument("--ready", type=int, default=10)
    ap.add_argument("--scenarios", type=int, default=12)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sandbox.md")
    args = ap.parse_args(argv)
    image = sandbox_image_tag()
    lines: list[str] = []
    load_before = os.getloadavg()

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    # warm-up: the image's home skeleton is read once per process; the engine's caches warm
    with Sandbox(SandboxSpec(image=image, labels=LABELS)) as box:
        box.session().run("true")
    with ExecPerCommand(image) as base:
        base.run("true")

    # 1) container ready ------------------------------------------------------------------------------------------
    enter_t, ready_t, base_t = [], [], []
    for _ in range(args.ready):
        start = time.perf_counter()
        with Sandbox(SandboxSpec(image=image, labels=LABELS)) as box:
            enter_t.append(time.perf_counter() - start)
            s = box.session()
            s.run("true")
            ready_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        with ExecPerCommand(image) as base:
            base.run("true")
            base_t.append(time.perf_counter() - start)

    # 2) per-command round trip -------------------------------------------------------------------------------------
    cmds = [SMALL_COMMANDS[i % len(SMALL_COMMANDS)] for i in range(args.commands)]
    ours: list[float] = []
    with Sandbox(SandboxSpec(image=image, labels=LABELS)) as box:
        s = box.session()
        for c in cmds:
            start = time.perf_counter()
            r = s.run(c)
            ours.append(time.perf_counter() - start)
            assert r.exit_code == 0, r
    base_rt: list[float] = []
    plain_rt: list[float] = []
    with ExecPerCommand(image) as base:
        for c in cmds:
            base_rt.append(timed(lambda c=c: base.run(c)))
        for c in cmds:  # without state replay: the floor of any exec-per-command design
            plain_rt.append(timed(lambda c=c: base.container.exec_run(["bash", "-c", c], user="operator")))

    # 3) gate throughput --------------------------------------------------------------------------------------------
    throughput = []
    for n in (1, 2, 4):
        pool = SandboxPool(n)
        start = time.perf_counter()
        ok = pool.map(lambda _: gate_ours(image), range(args.scenarios))
        t_ours = time.perf_counter() - start
        start = time.perf_counter()
        ok_base = pool.map(lambda _: gate_baseline(image), range(args.scenarios))
        t_base = time.perf_counter() - start
        assert all(ok) and all(ok_base), (ok, ok_base)
        throughput.append((n, args.scenarios / t_ours, args.scenarios / t_base))

    # report ----------------------------------------------------------------------------------------------------
    engine = subprocess.run(
        ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True
    ).stdout.strip()
    say("# Sandbox benchmark")
    say()
    cmdline = " ".join(["benchmarks/bench_sandbox.py", *(argv if argv is not None else sys.argv[1:])])
    say(f"Command: `.venv/bin/python {cmdline}`")
    say()
    say(
        f"Machine: {machine()}, Docker engine "
        f"{engine}, image `{image}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. 1-minute load average "
        f"{load_before[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end (the machine is shared: absolute "
        "times move with the load, the same-run ratios much less)."
    )
    say()
    say(
        "Baseline (same run, same image and containment flags): sekft's design, one `docker exec bash -c` per command "
        "with the working directory and exports replayed through files; the gate baseline does setup, checks and "
        "reference through such execs too."
    )
    say()
    say("## Container ready")
    say()
    say("| measure | median ms | p95 ms |")
    say("|---|---:|---:|")
    say(
        f"| `Sandbox.__enter__` (create + seed + start) | {ms(statistics.median(enter_t))} | {ms(pct(enter_t, 0.95))} |"
    )
    say(
        f"| until the first command returned (`session().run('true')`) | {ms(statistics.median(ready_t))} | "
        f"{ms(pct(ready_t, 0.95))} |"
    )
    say(
        f"| baseline: `containers.run` + first `docker exec` | {ms(statistics.median(base_t))} | {ms(pct(base_t, 0.95))} |"
    )
    say()
    say(f"## Per-command round trip ({args.commands} small commands in one session)")
    say()
    say("| design | median ms | p95 ms |")
    say("|---|---:|---:|")
    say(
        f"| bashgym session (one `bash -i`, nonce framing) | {ms(statistics.median(ours))} | {ms(pct(ours, 0.95))} |"
    )
    say(
        f"| baseline: `docker exec` per command + state replay | {ms(statistics.median(base_rt))} | "
        f"{ms(pct(base_rt, 0.95))} |"
    )
    say(
        f"| `docker exec` per command, no replay (floor) | {ms(statistics.median(plain_rt))} | "
        f"{ms(pct(plain_rt, 0.95))} |"
    )
    say()
    ratio = statistics.median(ours) / statistics.median(base_rt)
    say(f"Median ratio session / baseline: **{ratio:.4f}** (target <= 0.1, and well under 20 ms median).")
    say()
    say(
        f"## Scenario-gate throughput ({args.scenarios} synthetic scenarios: files + 2 setup commands, check "
        "fails, 5-command reference, check passes)"
    )
    say()
    say(
        "| parallel sandboxes | bashgym scenarios/s | baseline scenarios/s | bashgym / baseline | bashgym speed-up vs 1 |"
    )
    say("|---:|---:|---:|---:|---:|")
    one = throughput[0][1]
    for n, t_ours, t_base in throughput:
        say(f"| {n} | {t_ours:.2f} | {t_base:.2f} | {t_ours / t_base:.2f} | {t_ours / one:.2f} |")
    say()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
