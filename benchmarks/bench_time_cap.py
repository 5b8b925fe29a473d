"""Benchmark: what an episode's time cap counts, ``share`` (the default) against ``wall``, on one checkpoint of a
learning-study arm, one after the other in the same run.

    .venv/bin/python benchmarks/bench_time_cap.py --arm fit6-ga1 --epoch 6 [--caps share,wall] [--sets fit,transfer]

Under ``wall`` an episode is charged every second it waits, including the decode steps of the 31 other rows of its
batch, so on a loaded 2-core machine it can end at the cap after a turn or two (29 of 48 episodes of `fit6-ga1`
epoch 6's evaluation did). Under ``share`` it is charged its sandbox time and its own share of each decode step.
The same checkpoint, tasks and caps run under both; the report gives, per cap, the episodes the cap ended and after
how many turns, the clean rate, the failure classes and the wall time, and the tasks whose outcome differs. Run it
on a loaded machine to see the difference (say what loaded it); on an idle one both should agree. Needs the Docker
engine, the sandbox image and the arm's work folder (``benchmarks/learning_study.py --arm ...`` made it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bashgym_assets import images  # noqa: E402
from bashgym_assets.config import get_settings  # noqa: E402
from bashgym_assets.evaluation import FIT, TRANSFER, EvalSettings, ModelSpec, Sampling, compare  # noqa: E402
from bashgym_assets.evaluation import learning_study as ls  # noqa: E402
from bashgym_assets.lake import Lake  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import machine  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", required=True, help="a recorded arm of benchmarks/results/learning_study")
    ap.add_argument(
        "--epoch", type=int, required=True, help="its checkpoint to evaluate (or the one --run started from)"
    )
    ap.add_argument(
        "--run", default="", help="evaluate this run of the arm instead (a folder of its work folder)"
    )
    ap.add_argument("--caps", default="share,wall", help="the time caps to compare, in this order")
    ap.add_argument("--sets", default=f"{FIT},{TRANSFER}", help="the arm's sets to evaluate on")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "time_cap.md")
    args = ap.parse_args(argv)

    study = ls.StudyResult.model_validate_json(
        (ROOT / "benchmarks" / "results" / "learning_study" / f"{args.arm}.json").read_text()
    )
    arm = study.arm
    work = Lake(get_settings()).artifact_dir("learning_study", arm.name)
    data = ls.arm_data(arm, work)
    adapter = ls.start_adapter(work, arm, args.epoch, args.run)
    model = args.run or f"epoch {args.epoch}"
    tasks = {FIT: data.fit, TRANSFER: data.transfer}
    names = [s for s in args.sets.split(",") if s]
    bundles = [b for name in names for b in tasks[name]]
    spec = ModelSpec(
        label=f"{arm.name}-{args.run or f'e{args.epoch}'}",
        base=study.base_model,
        adapter=str(adapter),
        ref=str(adapter),
    )
    image = images.sandbox_image_tag()
    images.ensure_docker_engine()

    rows, outcomes = [], {}
    for cap in [c for c in args.caps.split(",") if c]:
        settings = EvalSettings(max_turns=arm.max_turns, time_cap=cap)
        t0 = time.monotonic()
        (result,) = compare(
            [spec],
            bundles,
            image,
            settings,
            Sampling(max_new_tokens=arm.max_new_tokens),
            eval_id=f"bench-time-cap-{cap}",
            progress=lambda line: print(line, flush=True),
        )
        wall = time.monotonic() - t0
        eps = result.episodes
        cut = [e for e in eps if e.end_reason == "time_cap"]
        outcomes[cap] = {e.scenario_id: e.clean for e in eps}
        rows.append(
            f"| {cap} | {len(eps)} | {sum(e.clean for e in eps)} ({sum(e.clean for e in eps) / len(eps):.0%}) | "
            f"{len(cut)} | {sum(e.n_turns for e in cut) / len(cut) if cut else 0:.1f} | "
            f"{', '.join(f'{k} {v}' for k, v in Counter(e.failure_class for e in eps if not e.clean).most_common())}"
            f" | {wall / 60:.1f} min |"
        )
        print(rows[-1], flush=True)
    caps = list(outcomes)
    differ = (
        sorted(t for t in outcomes[caps[0]] if outcomes[caps[0]][t] != outcomes[caps[1]].get(t))
        if len(caps) == 2
        else []
    )
    report = [
        f"## Time cap: share against wall, `{arm.name}` {model} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"Machine: {machine()}  ",
        f"Command: `python benchmarks/bench_time_cap.py {' '.join(argv if argv is not None else sys.argv[1:])}`  ",
        f"Tasks: {len(bundles)} ({', '.join(names)}); greedy, {arm.max_turns} turns, {arm.max_new_tokens} tokens a "
        f"reply, episode cap {EvalSettings().episode_timeout_s:g} s, up to {EvalSettings().max_rows} rows a decode step",
        "",
        "| time cap | episodes | clean | ended at the cap | turns before the cap (mean) | failures | wall |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Tasks whose outcome differs between the two: {len(differ)}"
        + (f" ({', '.join(differ)})" if differ else ""),
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(report))
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
