"""Honest yardsticks (issue 37): the evaluation split measured at the skill level (``scenarios/skills.py``).

For the recorded split (``factory/split.py``) and, for comparison, the retired one of 2026-11-26: each held-out
family's nearest train family (family score) against the train families' own nearest-neighbour scores; the bundled
held-out tasks with a train twin; the histogram of every evaluation task's best match among the train families'
tasks; and the pack's train tasks that the contamination check quarantines as twins of an evaluation task.

    .venv/bin/python benchmarks/yardsticks_report.py [--per-family 55] [--out benchmarks/results/yardsticks.md]

No sandbox, no model: drawing and comparing only (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import machine  # noqa: E402

from bashgym_assets.scenarios import skills  # noqa: E402
from bashgym_assets.scenarios.candidates import load_pack  # noqa: E402
from bashgym_assets.scenarios.factory.family import all_families  # noqa: E402
from bashgym_assets.scenarios.factory.generate import normalise_instruction  # noqa: E402
from bashgym_assets.scenarios.factory.similarity import histogram  # noqa: E402
from bashgym_assets.scenarios.factory.split import (  # noqa: E402
    BUNDLED_TRAIN_TWINS,
    HELD_OUT_FAMILIES,
    UNSEEN_BOUND,
)
from bashgym_assets.scenarios.gate import HELD_OUT, split_for  # noqa: E402

# The split of 2026-11-26, retired by issue 37 (kept here only to show what the measure says of it).
RETIRED_HELD_OUT = frozenset(
    {
        "archives-extract-member",
        "data-csv-top-n",
        "disk-largest-files-report",
        "environment-path-prepend",
        "files-move-older-than",
        "git-author-commit-count",
        "logs-count-status-codes",
        "networking-hosts-entry",
        "permissions-group-write-tree",
        "processes-kill-by-name",
        "scheduling-cron-add",
        "scripting-loop-rename",
        "text-replace-in-files",
        "users-create-in-group",
    }
)


def draws(per_family: int, seed: int = 0) -> dict[str, list[skills.SkillDoc]]:
    """``per_family`` distinct draws of every family (as the factory counts distinct), as skill documents."""
    out: dict[str, list[skills.SkillDoc]] = {}
    for name, fam in all_families().items():
        seen: set[str] = set()
        docs: list[skills.SkillDoc] = []
        for i in range(per_family * 6):
            if len(docs) >= per_family:
                break
            b, values = fam.make(f"{seed}:{i}")
            key = normalise_instruction(b.task, values)
            if key not in seen:
                seen.add(key)
                docs.append(skills.skill_doc(b.id, b.task, b.reference, group=name, values=values))
        out[name] = docs
    return out


def md_table(headers: list[str], rows: list[list[object]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(str(c) for c in r) + " |" for r in rows),
    ]


def split_lines(
    title: str, held: frozenset[str], groups: dict, scores: dict, bound: float | None = None
) -> list[str]:
    """A split's verdict: each held-out family's nearest train family against ``bound`` (the recorded one; None:
    the train families' p25 in this very run)."""
    train = [n for n in groups if n not in held]
    train_nn = [skills.nearest_family(scores, a, train)[1] for a in train]
    p25, med, p75 = (float(np.percentile(train_nn, q)) for q in (25, 50, 75))
    limit = p25 if bound is None else bound
    rows = []
    clean = 0
    for h in sorted(held & set(groups)):
        name, score = skills.nearest_family(scores, h, train)
        ok = score < limit and score < skills.FAMILY_TWIN
        clean += ok
        rows.append([h, name, f"{score:.2f}", "clean" if ok else "**within the train range**"])
    return [
        f"### {title}",
        "",
        f"Train families' nearest train family (family score): p25 {p25:.2f}, median {med:.2f}, p75 {p75:.2f}, "
        f"max {max(train_nn):.2f}. A held-out family is clean when its nearest train family scores below "
        + (
            f"the recorded bound {bound} (the p25 when the split was recorded)"
            if bound is not None
            else "the p25"
        )
        + f" and below the family twin threshold {skills.FAMILY_TWIN}: **{clean} of {len(rows)} clean**.",
        "",
        *md_table(["held-out family", "nearest train family", "family score", "verdict"], rows),
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-family", type=int, default=55)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    t0 = time.time()
    groups = draws(args.per_family)
    scores = skills.family_scores(groups)
    pack, _ = load_pack()
    bundled = [b for b in pack if split_for(b.id) == HELD_OUT]
    pack_train = [b for b in pack if split_for(b.id) != HELD_OUT]
    train = [n for n in groups if n not in HELD_OUT_FAMILIES]
    train_docs = [d for n in train for d in groups[n]]
    bundled_docs = [skills.skill_doc(b.id, b.task, b.reference) for b in bundled]
    bundled_matches = skills.best_matches(bundled_docs, train_docs)
    unseen_docs = [d for n in sorted(HELD_OUT_FAMILIES) for d in groups[n]]
    unseen_matches = skills.best_matches(unseen_docs, train_docs)
    clean_bundled = [d for d in bundled_docs if d.id not in BUNDLED_TRAIN_TWINS]
    bundled_index = skills.SkillIndex(bundled_docs)
    taught: set[str] = (
        set()
    )  # bundled tasks a train family teaches: >= 1 draw in 10 a twin (tests/test_skills.py)
    for name in train:
        share = bundled_index.scores(groups[name]).twin.mean(axis=0)
        taught |= {bundled_docs[j].id for j in np.flatnonzero(share >= 0.1)}
    pack_matches = skills.best_matches(
        [skills.skill_doc(b.id, b.task, b.reference) for b in pack_train], [*clean_bundled, *unseen_docs]
    )
    # the factory's guard: a train draw that is a skill twin of any evaluation task is refused (then redrawn)
    eval_docs = [*clean_bundled, *unseen_docs]
    refused_rows = skills.SkillIndex(eval_docs).scores(train_docs).twin.any(axis=1)
    guarded = [d for d, r in zip(train_docs, refused_rows, strict=True) if not r]
    after = skills.best_matches(eval_docs, guarded)
    by_family: dict[str, int] = {}
    for d, r in zip(train_docs, refused_rows, strict=True):
        if r:
            by_family[d.group] = by_family.get(d.group, 0) + 1
    lines = [
        "# Honest yardsticks: the evaluation split at the skill level",
        "",
        f"Machine: {machine()}",
        f"Command: `.venv/bin/python benchmarks/yardsticks_report.py --per-family {args.per_family}` "
        f"({time.time() - t0:.0f} s); draws: {args.per_family} distinct tasks a family, seed 0, "
        f"{sum(len(v) for v in groups.values())} tasks of {len(groups)} families.",
        f"Twin rule: goal >= {skills.GOAL_TWIN} and skeleton >= {skills.SKELETON_TWIN}, or skeleton >= "
        f"{skills.SAME_SOLUTION} and goal >= {skills.SAME_SOLUTION_GOAL}; family twin >= {skills.FAMILY_TWIN}.",
        "",
        *split_lines("The recorded split (2026-11-28)", HELD_OUT_FAMILIES, groups, scores, UNSEEN_BOUND),
        *split_lines(
            "The retired split (2026-11-26), measured the same way", RETIRED_HELD_OUT, groups, scores
        ),
        "### Bundled held-out tasks and their nearest train-family task",
        "",
        f"{sum(m.twin for m in bundled_matches)} of {len(bundled)} have a skill twin among the train families' "
        f"draws; {len(taught)} are *taught* (a family with one draw in ten or more a twin: "
        f"{', '.join(sorted(taught - set(BUNDLED_TRAIN_TWINS))) or 'every one'} "
        f"{'not ' if taught - set(BUNDLED_TRAIN_TWINS) else ''}recorded). The {len(BUNDLED_TRAIN_TWINS)} recorded "
        f"leave the `bundled` score; the other {len(bundled) - len(BUNDLED_TRAIN_TWINS)} are the clean set, and "
        "their stray twin draws are the guard's to refuse (below).",
        "",
        *md_table(
            ["bundled task", "nearest train task", "goal", "skeleton", "twin", "recorded"],
            [
                [m.id, m.nearest, f"{m.goal:.2f}", f"{m.skeleton:.2f}", m.twin, m.id in BUNDLED_TRAIN_TWINS]
                for m in sorted(bundled_matches, key=lambda m: -m.skill)
            ],
        ),
        "",
        "### Histogram of best matches: each evaluation task's skill score (min of goal and skeleton) with its "
        "nearest train-family task",
        "",
        *md_table(
            ["band", "unseen tasks", "clean bundled tasks", "bundled twins"],
            [
                [band, u, c, t]
                for (band, u), (_, c), (_, t) in zip(
                    histogram([m.skill for m in unseen_matches]),
                    histogram([m.skill for m in bundled_matches if m.id not in BUNDLED_TRAIN_TWINS]),
                    histogram([m.skill for m in bundled_matches if m.id in BUNDLED_TRAIN_TWINS]),
                    strict=True,
                )
            ],
        ),
        "",
        f"Skill twins among them: unseen {sum(m.twin for m in unseen_matches)} of {len(unseen_matches)}, clean "
        f"bundled {sum(m.twin for m in bundled_matches if m.id not in BUNDLED_TRAIN_TWINS)} of "
        f"{len(clean_bundled)}.",
        "",
        "### After the factory's guard",
        "",
        f"The guard refuses {int(refused_rows.sum())} of {len(train_docs)} train-family draws as skill twins of an "
        f"evaluation task (the factory draws others in their place); against what is left, skill twins: "
        f"**{sum(m.twin for m in after)} of {len(eval_docs)}** evaluation tasks (unseen + clean bundled). "
        "Most refused by family: "
        + ", ".join(f"{f} {n}" for f, n in sorted(by_family.items(), key=lambda kv: -kv[1])[:8])
        + ".",
        "",
        "### The pack's train tasks that are twins of an evaluation task (quarantined from every training set)",
        "",
        f"{sum(m.twin for m in pack_matches)} of {len(pack_train)}:",
        "",
        *md_table(
            ["pack train task", "evaluation task", "goal", "skeleton"],
            [[m.id, m.nearest, f"{m.goal:.2f}", f"{m.skeleton:.2f}"] for m in pack_matches if m.twin],
        ),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
