"""Demo ingest benchmark: the bundled sample sessions through raw_sessions -> redacted_sessions -> tiered_traces
for every repository partition, the way ``make demo`` runs it now against the way it ran before, in the same run.

    .venv/bin/python benchmarks/bench_demo_ingest.py [--out benchmarks/results/demo_ingest.md]

- before: one ``dagster asset materialize --partition <repo>`` process per repository, on the CPU location's
  default (multiprocess) executor: each repository pays the imports, and each step its own process;
- now: ``bashgym_assets.demo.plan_main``: every partition in one process, one run per partition on the
  in-process executor (what ``demo.run_plan`` does for a partitioned step).

Each variant gets a fresh data folder and Dagster instance. Target (issue 14): ingest-to-tiers of the bundled
sample sessions <= 30 s in total on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import machine  # noqa: E402

ASSETS = ["raw_sessions", "redacted_sessions", "tiered_traces"]


def _prepare(home: Path) -> tuple[dict[str, str], list[str]]:
    env = {**os.environ, "BASHGYM_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    from bashgym_assets.ingest import SAMPLE_TRACES_DIR

    env["BASHGYM_TRACE_DIRS"] = str(SAMPLE_TRACES_DIR)
    env["DAGSTER_HOME"] = str(home / "dagster")
    script = (
        "from bashgym_assets.instance import ensure_dagster_home; ensure_dagster_home(); "
        "from bashgym_assets.cli import discover_repo_partitions; from bashgym_assets import demo; "
        "r = discover_repo_partitions(); demo.register_partitions(r); print(','.join(r))"
    )
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return env, out.stdout.strip().splitlines()[-1].split(",")


def before(home: Path) -> tuple[float, int]:
    env, repos = _prepare(home)
    dagster = str(Path(sys.executable).with_name("dagster"))
    started = time.monotonic()
    for repo in repos:
        subprocess.run(
            [
                dagster,
                "asset",
                "materialize",
                "-m",
                "bashgym_assets.definitions",
                "--select",
                ",".join(ASSETS),
                "--partition",
                repo,
            ],
            env=env,
            check=True,
            capture_output=True,
        )
    return time.monotonic() - started, len(repos)


def now(home: Path) -> tuple[float, int]:
    env, repos = _prepare(home)
    started = time.monotonic()
    payload = {
        "steps": [
            {
                "module": "bashgym_assets.definitions",
                "assets": ASSETS,
                "partitioned": True,
                "label": "ingest",
                "config": {},
            }
        ],
        "partitions": repos,
    }
    subprocess.run(
        [sys.executable, "-c", "from bashgym_assets.demo import plan_main; plan_main()", json.dumps(payload)],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.monotonic() - started, len(repos)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "demo_ingest.md"))
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-demo-ingest-") as tmp:
        new_s, n = now(Path(tmp) / "now")
        old_s, _ = before(Path(tmp) / "before")
    lines = [
        "# Demo ingest: sample sessions to tiers, every repository partition",
        "",
        "Command: `.venv/bin/python benchmarks/bench_demo_ingest.py`  ",
        f"Machine: {machine()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, 1-minute load "
        f"{load:.1f} at the start and {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| variant | repositories | seconds | per repository |",
        "|---|---:|---:|---:|",
        f"| before: one `dagster asset materialize` per repository (multiprocess executor) | {n} | {old_s:.1f} | "
        f"{old_s / n:.1f} |",
        f"| now: all partitions in one process (`demo.plan_main`, in-process executor) | {n} | {new_s:.1f} | "
        f"{new_s / n:.1f} |",
        "",
        f"Ratio now / before: **{new_s / old_s:.2f}** (target: <= 30 s in total; "
        f"{'met' if new_s <= 30 else 'not met'} here).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(
        json.dumps({"before_s": round(old_s, 1), "now_s": round(new_s, 1), "ratio": round(new_s / old_s, 3)})
    )


if __name__ == "__main__":
    main()
