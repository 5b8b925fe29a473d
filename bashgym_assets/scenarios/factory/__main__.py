"""``python -m bashgym_assets.scenarios.factory``: draw tasks, optionally gate them in real sandboxes, report.

    python -m bashgym_assets.scenarios.factory --list
    python -m bashgym_assets.scenarios.factory --families files-move-older-than --per-family 3 --gate
    python -m bashgym_assets.scenarios.factory --per-family 90 --out /tmp/factory.jsonl

``--gate`` certifies every drawn task (setup, check fails before, reference, check passes after) and prints each
rejection with its reason and detail (exit 1 when any was rejected).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.generate import evaluation_tasks, generate
from bashgym_assets.scenarios.factory.split import is_held_out_family


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bashgym_assets.scenarios.factory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--list", action="store_true", help="list the families and exit")
    p.add_argument("--families", default="", help="comma-separated family names (default: all)")
    p.add_argument("--per-family", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="write the bundles as JSON Lines here")
    p.add_argument("--show", type=int, default=0, help="print this many sample instructions per family")
    p.add_argument("--gate", action="store_true", help="certify every task in a real sandbox")
    p.add_argument(
        "--parallel", type=int, default=None, help="sandboxes at once in the gate (default: the CPU cores)"
    )
    args = p.parse_args(argv)

    registry = all_families()
    if args.list:
        for name, fam in registry.items():
            flag = "held-out" if is_held_out_family(name) else "train"
            print(f"{name:40s} {fam.category:20s} {flag:8s} {fam.skill}")
        print(f"{len(registry)} families, {len({f.category for f in registry.values()})} categories")
        return 0
    names = [n.strip() for n in args.families.split(",") if n.strip()] or None
    t0 = time.monotonic()
    try:
        run = generate(args.per_family, seed=args.seed, families=names, eval_tasks=evaluation_tasks())
    except KeyError as exc:  # a misspelt family: say which, and where the list is
        print(f"error: {exc.args[0]} (see --list)", file=sys.stderr)
        return 2
    print(
        f"drew {run.draws} -> kept {len(run.bundles)} in {time.monotonic() - t0:.1f} s; drops {dict(run.drops())}"
    )
    for y in run.yields:
        print(
            f"  {y.family:40s} kept {y.kept}/{y.wanted} in {y.draws} draws {dict(y.drops)}"
            f"{' EXHAUSTED' if y.exhausted else ''}"
        )
        for e in y.errors:
            print(f"      ! {e}")
        for b in y.bundles[: args.show]:
            print(f"      d{b.difficulty} {b.task}")
    if args.out:
        args.out.write_text("".join(b.model_dump_json(exclude_none=True) + "\n" for b in run.bundles))
        print(f"wrote {args.out}")
    if not args.gate:
        return 0
    from bashgym_assets import images
    from bashgym_assets.scenarios.gate import gate_bundles

    images.ensure_docker_engine()
    t0 = time.monotonic()
    results = gate_bundles(run.bundles, images.sandbox_image_tag(), max_parallel=args.parallel)
    wall = time.monotonic() - t0
    print(
        f"gated {len(results)} in {wall:.1f} s ({len(results) / wall:.2f}/s): "
        f"{dict(Counter(r.reason for r in results))}"
    )
    bad = [r for r in results if not r.admitted]
    for r in bad:
        print(f"--- {r.scenario_id}: {r.reason}\n{r.detail}\n")
    by_family = Counter(r.scenario_id.split(".")[1] for r in results if r.admitted)
    print(json.dumps(dict(sorted(by_family.items())), indent=0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
