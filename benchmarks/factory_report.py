"""The task factory's report: what one seed draws, why draws were dropped, the family split, the command+flag
coverage, the real variety (whole phrasings, solution skeletons, state-changing cores, collapsed families), where
tasks start (user, folder, shell variables) and the similarity of train tasks to every evaluation task (what
BENCHMARKS.md quotes).

    .venv/bin/python benchmarks/factory_report.py [--per-family 55] [--seed 0] [--out benchmarks/results/factory.md]

No sandbox: the gate's side is ``bench_factory_gate.py`` and ``bashgym factory``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import machine  # noqa: E402

from bashgym_assets.config import get_settings  # noqa: E402
from bashgym_assets.scenarios.factory.catalog import coverage  # noqa: E402
from bashgym_assets.scenarios.factory.family import all_families  # noqa: E402
from bashgym_assets.scenarios.factory.generate import evaluation_tasks, generate  # noqa: E402
from bashgym_assets.scenarios.factory.similarity import histogram  # noqa: E402
from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES  # noqa: E402
from bashgym_assets.scenarios.factory.variety import (  # noqa: E402
    COLLAPSED_MAX,
    MIN_TASKS_TO_JUDGE,
    VARIETY_HEADERS,
    run_variety,
    start_distribution,
    start_rows,
    start_summary,
    variety_rows,
)


def md_table(headers: list[str], rows: list[list[object]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(str(c) for c in r) + " |" for r in rows),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-family", type=int, default=55)  # the factory default
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "factory.md")
    args = ap.parse_args(argv)

    families = all_families()
    evals = evaluation_tasks(get_settings().eval_suite_dirs)
    t0 = time.perf_counter()
    run = generate(args.per_family, seed=args.seed, eval_tasks=evals)
    wall = time.perf_counter() - t0
    bundles = run.bundles
    held = [b for y in run.yields if y.held_out for b in y.bundles]
    train = [b for y in run.yields if not y.held_out for b in y.bundles]
    cov = coverage(bundles)
    drops = run.drops()
    variety, vt = run_variety(run.yields)
    collapsed = [v.family for v in variety if v.collapsed]
    starts = start_distribution({y.family: y.bundles for y in run.yields})
    out = [
        f"# Task factory report ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        machine(),
        "",
        f"`.venv/bin/python benchmarks/factory_report.py --per-family {args.per_family} --seed {args.seed}`",
        "",
        f"- {len(families)} families over {len({f.category for f in families.values()})} categories; "
        f"{len(HELD_OUT_FAMILIES & set(families))} held out (a skill never trained)",
        f"- {len(bundles)} tasks with distinct normalised instructions ({len(train)} train, {len(held)} held-out "
        "families) from "
        f"{run.draws} raw draws in {wall:.1f} s; dropped: "
        + (", ".join(f"{r} {n}" for r, n in drops.most_common()) or "none"),
        f"- variety: {vt.phrasings} whole phrasings (median {vt.median_phrasings:g} a family), {vt.skeletons} "
        f"distinct solution skeletons, {vt.cores} distinct state-changing cores ({vt.core_share:.0%} of the "
        f"tasks; median {vt.median_cores:g} a family)",
        f"- {len(cov)} distinct command+flag combinations, {len({c.split(' ')[0] for c in cov})} commands",
        f"- {len(collapsed)} families collapse to <= {COLLAPSED_MAX} state-changing cores"
        + (f": {', '.join(collapsed)}" if collapsed else ""),
        f"- guard: {len(evals)} evaluation tasks (pack held-out + external suites) plus the held-out families'",
        f"- where tasks start: {start_summary(starts)}",
        "",
    ]
    out += ["## Difficulty and category", ""]
    out += md_table(
        ["difficulty", "tasks"], [[d, n] for d, n in sorted(Counter(b.difficulty for b in bundles).items())]
    )
    out.append("")
    out += md_table(
        ["category", "families", "tasks"],
        [
            [c, sum(f.category == c for f in families.values()), n]
            for c, n in sorted(Counter(b.category for b in bundles).items())
        ],
    )
    out += [
        "",
        "## Where tasks start",
        "",
        "The folder the operator's shell starts in (its home, a folder under it, or a top folder elsewhere) by "
        "session user; the prompt states both (`rollout/transcript.py`). " + start_summary(starts),
        "",
    ]
    out += md_table(*start_rows(starts))
    out += ["", "## Families (held-out ones marked)", ""]
    out += md_table(
        ["family", "category", "split", "kept", "draws", "dropped", "difficulties", "commands+flags"],
        [
            [
                y.family,
                y.category,
                "**held out**" if y.held_out else "train",
                y.kept,
                y.draws,
                dict(y.drops) or "",
                "-".join(str(d) for d in sorted({b.difficulty for b in y.bundles})),
                len(coverage(y.bundles)),
            ]
            for y in run.yields
        ],
    )
    out += [
        "",
        "## Variety per family",
        "",
        "Whole phrasings: the templates `World.phrase` picked (synonyms, intros and drawn values are not another "
        "one). Skeletons: the reference's commands, flags, pipes and redirects with arguments masked; cores: the "
        "same without look-only lines (`scenarios/skills.py`). Collapsed: <= "
        f"{COLLAPSED_MAX} cores over >= {MIN_TASKS_TO_JUDGE} tasks (`scenarios/factory/variety.py`).",
        "",
    ]
    out += md_table(VARIETY_HEADERS, [[str(c).replace("|", "\\|") for c in r] for r in variety_rows(variety)])
    out += [
        "",
        "## Similarity of kept train tasks to the nearest evaluation task",
        "",
        "Estimated Jaccard (MinHash, 128 permutations) of every train draw that reached the guard against "
        "every evaluation task; refused: instruction >= 0.5, or reference >= 0.7 with related wording.",
        "",
    ]
    instr = histogram([s[1] for s in run.similarities])
    ref = histogram([s[2] for s in run.similarities])
    out += md_table(
        ["band", "instruction (3-grams)", "reference (2-grams)"],
        [[a[0], a[1], b[1]] for a, b in zip(instr, ref, strict=True)],
    )
    top = sorted(run.similarities, key=lambda s: -s[1])[:8]
    out += ["", "Closest pairs (train task -> evaluation task):", ""]
    out += md_table(
        ["train task", "instruction", "reference", "nearest evaluation task"],
        [[s[0], f"{s[1]:.2f}", f"{s[2]:.2f}", s[3]] for s in top],
    )
    out += ["", "## Command+flag coverage (tasks using each)", ""]
    out.append(", ".join(f"`{k}` {v}" for k, v in sorted(cov.items(), key=lambda kv: (-kv[1], kv[0]))))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(out) + "\n")
    print("\n".join(out[:14]))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
