"""Live-capture hook benchmark: one Claude Code hook call, old command vs new, through real processes.

    .venv/bin/python benchmarks/bench_hook.py [--calls 60] [--out benchmarks/results/hook.md]

Each call is what Claude Code does for a command hook: ``/bin/sh -c <command>`` with the hook's JSON (a
PostToolUse event of a Bash call with 2 KB of output) on stdin, timed from spawn to exit. The variants run
round-robin in the same loop, so the machine's load falls on all of them alike:

- old: the hook as committed before this change (``BASELINE_COMMIT``), extracted with ``git archive`` into a
  temporary folder and run with the command the installer wrote then,
  ``env BASHGYM_HOME=<home> <venv python> -m bashgym_assets.ingest.hook`` (the working directory is that
  folder, so ``-m`` finds the old package before the installed one);
- new: the command ``hook_installer.hook_command`` writes now (``<venv python> -I -S .../hook_entry.py``),
  run from an unrelated working directory as an agent's project would be;
- for reference: the new module through the old ``-m`` command (installs made before this change, until
  ``bashgym hooks install`` runs again), the new script without ``-S`` (what skipping site-packages saves), and
  the floor, ``<venv python> -I -S -c pass`` (an interpreter start and exit).

Afterwards the capture files are compared: old and new must hold the same lines apart from the timestamp, and
stderr must be empty for the new command. The report (exact command, machine, load) goes to
``benchmarks/results/hook.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _machine import machine  # noqa: E402

from bashgym_assets.ingest.hook_installer import HOOK_ENTRY, hook_command  # noqa: E402

#: HEAD when the standard-library hook was written: the ``-m`` hook with orjson, pydantic settings and the
#: ``bashgym_assets.ingest`` package imported on every call.
BASELINE_COMMIT = "4d27f6bd4c7e84bb8956a199a4b750ea87ca739d"
SESSION = "5b0c7f0e-3f1c-4a8e-9a51-2f6f1d0c9e11"
_STAMP = re.compile(rb'^\{"bashgym_captured_at":"[^"]*"')


def event_bytes() -> bytes:
    stdout = "\n".join(f"tests/test_module_{i:03d}.py::test_case_{i} PASSED [{i}%]" for i in range(40))
    event = {
        "session_id": SESSION,
        "transcript_path": f"/home/dev/.claude/projects/-home-dev-shop/{SESSION}.jsonl",
        "cwd": "/home/dev/shop",
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "pytest -q tests/", "description": "Run the test suite"},
        "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False},
        "tool_use_id": "toolu_01ABCDEFGHJKLMNPQRSTUVWX",
    }
    return json.dumps(event).encode()


def extract_baseline(dest: Path) -> None:
    archive = subprocess.run(
        ["git", "archive", BASELINE_COMMIT, "bashgym_assets"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=60, help="timed calls per variant")
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed calls per variant first (bytecode caches)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hook.md")
    args = parser.parse_args()
    python = sys.executable
    payload = event_bytes()
    load_start = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    with tempfile.TemporaryDirectory(prefix="bench-hook-") as tmp_name:
        tmp = Path(tmp_name)
        old_tree, project = tmp / "baseline", tmp / "project"
        old_tree.mkdir()
        project.mkdir()
        extract_baseline(old_tree)
        homes = {k: tmp / k for k in ("old", "new", "new_m", "new_site", "floor")}
        legacy = ["-m", "bashgym_assets.ingest.hook"]
        variants = {  # name -> (label, shell command, working directory)
            "old": (
                "old: `-m bashgym_assets.ingest.hook` at the baseline commit",
                shlex.join(["env", f"BASHGYM_HOME={homes['old']}", python, *legacy]),
                old_tree,
            ),
            "new": (
                "new: installed command, `-I -S hook_entry.py`",
                hook_command(homes["new"], python),
                project,
            ),
            "new_m": (
                "new module, old `-m` command (not re-installed)",
                shlex.join(["env", f"BASHGYM_HOME={homes['new_m']}", python, *legacy]),
                ROOT,
            ),
            "new_site": (
                "new script with `-I` only (site-packages loaded)",
                shlex.join(["env", f"BASHGYM_HOME={homes['new_site']}", python, "-I", str(HOOK_ENTRY)]),
                project,
            ),
            "floor": (
                "floor: `python -I -S -c pass`",
                shlex.join([python, "-I", "-S", "-c", "pass"]),
                project,
            ),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        stderr: dict[str, set[str]] = {k: set() for k in variants}
        for rnd in range(args.warmup + args.calls):
            for name, (_label, command, cwd) in variants.items():
                start = time.perf_counter()
                proc = subprocess.run(["/bin/sh", "-c", command], input=payload, capture_output=True, cwd=cwd)
                elapsed = (time.perf_counter() - start) * 1000
                if proc.returncode != 0 or proc.stdout:
                    raise SystemExit(f"{name}: exit {proc.returncode}, stdout {proc.stdout[:200]!r}")
                if proc.stderr:
                    last = proc.stderr.decode(errors="replace").strip().splitlines()[-1]
                    stderr[name].add(last if len(last) <= 120 else last[:120] + " ...")
                if rnd >= args.warmup:
                    times[name].append(elapsed)

        captured = {}
        for name in ("old", "new", "new_m", "new_site"):
            files = list((homes[name] / "traces").glob("*.hook.jsonl"))
            lines = [line for f in files for line in f.read_bytes().splitlines()]
            assert len(files) == 1 and len(lines) == args.warmup + args.calls, (name, files, len(lines))
            captured[name] = {_STAMP.sub(b"", line) for line in lines}
        same = all(captured[name] == captured["old"] for name in captured)
        assert same, "the new hook wrote other lines than the old one"
        assert not stderr["new"], stderr["new"]

    load_end = os.getloadavg()[0]
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["new"] / med["old"]
    cmd = (
        "`.venv/bin/python benchmarks/bench_hook.py"
        + (f" --calls {args.calls}" if args.calls != 60 else "")
        + "`"
    )
    lines = [
        "# Live-capture hook benchmark (issue 14)",
        "",
        f"Command: {cmd}  ",
        f"Machine: {machine()}, {started}; 1-minute load average {load_start:.1f} at the start, "
        f"{load_end:.1f} at the end (shared machine: the same-run ratio is the figure to compare).  ",
        f"Baseline: the hook at commit `{BASELINE_COMMIT[:10]}`, run with the command its installer wrote.  ",
        f"Each call: `/bin/sh -c <command>` with a {len(payload)}-byte PostToolUse event on stdin, spawn to exit; "
        f"{args.calls} timed calls per variant (after {args.warmup} untimed), variants round-robin.",
        "",
        "| variant | median ms | p95 ms | min ms |",
        "|---|---:|---:|---:|",
        *(f"| {variants[k][0]} | {med[k]:.1f} | {p95(v):.1f} | {min(v):.1f} |" for k, v in times.items()),
        "",
        f"- new / old (median): **{ratio:.3f}** ({med['old'] / med['new']:.0f}x faster); target <= 50 ms per call: "
        f"**{'met' if med['new'] <= 50 else 'not met'}** ({med['new']:.1f} ms median, {p95(times['new']):.1f} ms p95).",
        f"- the hook's own work over an interpreter start: {med['new'] - med['floor']:.1f} ms (median new - floor).",
        f"- `-S` saves {med['new_site'] - med['new']:.1f} ms a call; installs made before this change still pay "
        f"{med['new_m']:.0f} ms (the `-m` command imports the `bashgym_assets.ingest` package) until "
        "`bashgym hooks install` runs again.",
        f"- captured lines: identical for all four hooks apart from the timestamp: **{'yes' if same else 'no'}** "
        f"({args.warmup + args.calls} lines each).",
        "- stderr: "
        + "; ".join(
            f"{variants[k][0].split(':')[0]}: " + (" / ".join(sorted(v)) or "empty")
            for k, v in stderr.items()
            if k != "floor"
        ),
        "",
    ]
    report = "\n".join(lines)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
