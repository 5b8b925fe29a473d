"""Benchmark: what MLflow traces of episodes cost an evaluation (``rollout.tracing``).

    .venv/bin/python benchmarks/bench_tracing.py [--episodes 8] [--repeats 2]

The same evaluation (the reference operator over ``--episodes`` synthetic scenarios, real sandboxes) runs with
traces off and on, alternating, in a fresh data folder whose MLflow store already exists (as after the first
training). Reported: wall time of each run, and the time the sink spent writing (``TraceSink.write_s``: building
the spans and the batched ``log_spans`` calls), which is the overhead itself (the per-turn recording is plain data
on the driver). Sandbox wall times vary by more than the overhead between runs, so the write time is the number
to read. Needs the Docker engine and the sandbox image.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bashgym_assets import images  # noqa: E402
from bashgym_assets.evaluation import EvalSettings, evaluate  # noqa: E402
from bashgym_assets.rollout import tracing  # noqa: E402
from bashgym_assets.rollout.operators import ReferenceOperator  # noqa: E402
from bashgym_assets.scenarios.bundle import ScenarioBundle  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_gate import machine  # noqa: E402


def _bundles(n: int) -> list[ScenarioBundle]:
    return [
        ScenarioBundle(
            id=f"bench-{i}",
            task=f"Write the word ok into ~/out-{i}.txt, then list it.",
            category="files",
            difficulty=1,
            setup=["true"],
            check=f"grep -qx ok /home/operator/out-{i}.txt",
            reference=[f"echo ok > ~/out-{i}.txt", f"ls -l ~/out-{i}.txt", f"cat ~/out-{i}.txt"],
            source="bench",
        )
        for i in range(n)
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    home = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    os.environ["BASHGYM_HOME"] = str(home)
    from mlflow import MlflowClient

    from bashgym_assets.config import get_settings

    settings = get_settings()
    settings.ensure_dirs()
    MlflowClient(tracking_uri=settings.mlflow_tracking_uri).search_experiments()  # the store exists
    bundles = _bundles(args.episodes)
    print(machine())
    rows = []
    for r in range(args.repeats):
        for mode in ("off", "on"):
            os.environ["BASHGYM_TRACES"] = "1" if mode == "on" else "0"
            tracing._SINKS.clear()
            t = time.monotonic()
            res = evaluate(
                ReferenceOperator(),
                bundles,
                image,
                EvalSettings(max_turns=6, max_live=4),
                eval_id=f"bench-{mode}-{r}",
                label="reference",
            )
            wall = time.monotonic() - t
            sink = tracing._SINKS.get(settings.mlflow_tracking_uri)
            turns = sum(e.n_turns for e in res.episodes)
            rows.append((mode, r, wall, sink.write_s if sink else 0.0, sink.written if sink else 0, turns))
            print(
                f"traces {mode:3} run {r}: {len(res.episodes)} episodes, {turns} turns, wall {wall:.2f} s, "
                f"trace writing {rows[-1][3]:.3f} s for {rows[-1][4]} traces",
                flush=True,
            )
    on = [x for x in rows if x[0] == "on"]
    off = [x for x in rows if x[0] == "off"]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    print(
        f"mean wall: off {mean([x[2] for x in off]):.2f} s, on {mean([x[2] for x in on]):.2f} s; "
        f"trace writing {mean([x[3] for x in on]):.3f} s per evaluation "
        f"({1000 * mean([x[3] / max(x[4], 1) for x in on]):.1f} ms per episode trace)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
