"""The task factory in Dagster: ``generated_scenarios``, one partition per task family.

Thin on purpose: families, drawing, dedupe and the near-duplicate guard live in ``bashgym_assets.scenarios.factory``.
One run can draw every family (a single-run backfill over the partition range: drawing is cheap, and the guard's
evaluation set is built once per run); the tasks then flow through ``scenario_candidates`` -> ``gated_scenarios``
-> ``verified_trajectories`` like the pack's, so the gate certifies every one.
"""

import warnings
from collections import Counter

import dagster as dg
import pyarrow as pa

from bashgym_assets.config import get_settings
from bashgym_assets.defs.metadata import code_version, counts_table, table
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.scenarios.factory.catalog import coverage, task_rows
from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.generate import evaluation_tasks, generate
from bashgym_assets.scenarios.factory.similarity import INSTRUCTION_MAX, histogram
from bashgym_assets.scenarios.factory.split import is_held_out_family
from bashgym_assets.scenarios.factory.variety import (
    COLLAPSED_MAX,
    MIN_TASKS_TO_JUDGE,
    VARIETY_HEADERS,
    collapse_warning,
    run_variety,
    start_distribution,
    start_rows,
    start_summary,
    variety_rows,
)
from bashgym_assets.scenarios.skills import GOAL_TWIN, SKELETON_TWIN

family_partitions = dg.StaticPartitionsDefinition(sorted(all_families()))
# One run over every family is what `bashgym factory` and the demo launch; Dagster marks the single-run backfill
# policy beta, and says so on every import of this module unless told it was read.
_SINGLE_RUN = dg.BackfillPolicy.single_run()
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`", category=dg.BetaWarning)

GENERATED_SCHEMA = pa.schema(
    [
        ("scenario_id", pa.string()),
        ("family", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.int32()),
        ("split", pa.string()),
        ("user", pa.string()),
        ("task", pa.string()),
        ("commands", pa.string()),
        ("source", pa.string()),
        ("bundle_json", pa.string()),
    ]
)
DROPS_SCHEMA = pa.schema(
    [("family", pa.string()), ("reason", pa.string()), ("count", pa.int64()), ("example", pa.string())]
)
SIMILARITY_SCHEMA = pa.schema(
    [
        ("scenario_id", pa.string()),
        ("goal_similarity", pa.float64()),
        ("skeleton_similarity", pa.float64()),
        ("nearest_eval_task", pa.string()),
        ("refused", pa.bool_()),
    ]
)


class FactoryConfig(dg.Config):
    """How many distinct tasks per family and from which seed (same seed, same tasks)."""

    per_family: int | None = (
        None  # default: Settings.factory_per_family ($BASHGYM_FACTORY_PER_FAMILY, else 55)
    )
    seed: int = 0
    max_draws_factor: int = 6  # give up on a family after this many draws per wanted task


def _per_family(config: FactoryConfig) -> int:
    return config.per_family if config.per_family is not None else get_settings().factory_per_family


@dg.asset(
    group_name="scenarios",
    kinds={"python", "parquet"},
    partitions_def=family_partitions,
    backfill_policy=_SINGLE_RUN,
    code_version=code_version(
        "bashgym_assets.scenarios.factory.generate",
        "bashgym_assets.scenarios.factory.similarity",
        "bashgym_assets.scenarios.factory.variety",
    ),
    description="Tasks drawn by the task factory, one partition per family (a shell skill as code): distinct "
    "instructions after names and numbers are normalised, held-out families recorded in "
    "scenarios/factory/split.py, train tasks too similar to any evaluation task refused. Every task "
    "still has to pass the gate downstream. Metadata counts the real variety: whole phrasings, solution "
    "skeletons and state-changing cores per family, families that collapse to one or two solutions flagged, "
    "and where tasks start (session user, start folder, shell variables set).",
)
def generated_scenarios(
    context: dg.AssetExecutionContext, config: FactoryConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    lake = bashgym.lake()
    settings = bashgym.settings()
    families = list(context.partition_keys)
    per_family = _per_family(config)
    eval_tasks = evaluation_tasks(settings.eval_suite_dirs)
    done = [0]

    def progress(y) -> None:
        done[0] += 1
        context.log.info(
            f"[{done[0]}/{len(families)}] {y.family}: {y.kept}/{y.wanted} distinct tasks in "
            f"{y.draws} draws {dict(y.drops) or ''}"
        )

    run = generate(
        per_family,
        seed=config.seed,
        families=families,
        eval_tasks=eval_tasks,
        max_draws_factor=config.max_draws_factor,
        progress=progress,
    )
    for y in run.yields:
        lake.write("generated_scenarios", task_rows(y.bundles), partition=y.family, schema=GENERATED_SCHEMA)
        drop_rows = [
            {
                "family": y.family,
                "reason": r,
                "count": n,
                "example": next((e for e in y.errors if e.startswith(r)), ""),
            }
            for r, n in sorted(y.drops.items())
        ]
        lake.write("generated_drops", drop_rows, partition=y.family, schema=DROPS_SCHEMA)
    by_family = {y.family: y for y in run.yields}
    kept_ids = {b.id for b in run.bundles}
    sims: dict[str, list[dict]] = {}
    for sid, instr, ref, nearest in run.similarities:
        fam = sid.split(".")[1]
        refused = sid not in kept_ids
        sims.setdefault(fam, []).append(
            {
                "scenario_id": sid,
                "goal_similarity": round(instr, 4),
                "skeleton_similarity": round(ref, 4),
                "nearest_eval_task": nearest,
                "refused": refused,
            }
        )
    for fam in families:
        if not is_held_out_family(fam):
            lake.write("generated_similarity", sims.get(fam, []), partition=fam, schema=SIMILARITY_SCHEMA)

    bundles = run.bundles
    cov = coverage(bundles)
    commands = Counter(c.split(" ")[0] for c in cov)
    drops = run.drops()
    goal_sims = [s[1] for s in run.similarities]
    skeleton_sims = [s[2] for s in run.similarities]
    samples = [[b.id.split(".")[1], b.difficulty, b.task[:220]] for y in run.yields for b in y.bundles[:2]]
    family_rows = [
        [
            y.family,
            y.category,
            "held-out" if y.held_out else "train",
            y.kept,
            y.draws,
            y.drops.get("duplicate_instruction", 0),
            y.drops.get("near_duplicate_of_eval", 0),
            y.drops.get("draw_error", 0) + y.drops.get("invalid_bundle", 0),
            y.exhausted,
        ]
        for y in run.yields
    ]
    for y in run.yields:
        for e in y.errors:
            context.log.warning(f"{y.family}: {e}")
    variety, vt = run_variety(run.yields)
    starts = start_distribution({y.family: y.bundles for y in run.yields})
    for v in variety:
        if v.collapsed:
            context.log.warning(collapse_warning(v))
    return dg.MaterializeResult(
        metadata={
            "tasks": dg.MetadataValue.int(len(bundles)),
            "families": dg.MetadataValue.int(len(families)),
            "held_out_families": dg.MetadataValue.int(sum(y.held_out for y in run.yields)),
            "held_out_tasks": dg.MetadataValue.int(sum(y.kept for y in run.yields if y.held_out)),
            "raw_draws": dg.MetadataValue.int(run.draws),
            "dropped_by_reason": counts_table(dict(drops.most_common()), "reason", "draws"),
            "per_family": table(
                [
                    "family",
                    "category",
                    "split",
                    "kept",
                    "draws",
                    "duplicate instruction",
                    "near-duplicate of eval",
                    "draw error",
                    "exhausted",
                ],
                family_rows,
            ),
            "by_difficulty": counts_table(
                {f"d{k}": v for k, v in sorted(Counter(b.difficulty for b in bundles).items())},
                "difficulty",
                "tasks",
            ),
            "by_category": counts_table(
                dict(sorted(Counter(b.category for b in bundles).items())), "category", "tasks"
            ),
            "whole_phrasings": dg.MetadataValue.int(vt.phrasings),
            "solution_skeletons": dg.MetadataValue.int(vt.skeletons),
            "state_changing_cores": dg.MetadataValue.int(vt.cores),
            "collapsed_families": dg.MetadataValue.int(vt.collapsed),
            "variety": dg.MetadataValue.md(
                f"{vt.tasks} tasks from **{vt.phrasings} whole phrasings** (median {vt.median_phrasings:g} a "
                f"family), **{vt.skeletons} distinct solution skeletons**, **{vt.cores} distinct state-changing "
                f"cores** ({vt.core_share:.0%} of the tasks; median {vt.median_cores:g} a family), {vt.commands} "
                f"commands, {vt.command_flags} command+flag combinations; {vt.collapsed} families collapse to "
                f"<= {COLLAPSED_MAX} cores (judged at >= {MIN_TASKS_TO_JUDGE} tasks). Counted by "
                "scenarios/factory/variety.py."
            ),
            "variety_per_family": table(VARIETY_HEADERS, variety_rows(variety)),
            "start_folders_by_user": table(*start_rows(starts)),
            "families_starting_elsewhere": dg.MetadataValue.int(starts.families_elsewhere),
            "tasks_with_shell_variables": dg.MetadataValue.int(starts.tasks_with_variables),
            "environments": dg.MetadataValue.md(start_summary(starts)),
            "command_flag_combinations": dg.MetadataValue.int(len(cov)),
            "commands": dg.MetadataValue.int(len(commands)),
            "coverage": table(["command+flag", "tasks"], [[k, v] for k, v in sorted(cov.items())]),
            "goal_similarity_to_eval": table(["band", "train tasks"], [list(r) for r in histogram(goal_sims)])
            if goal_sims
            else dg.MetadataValue.md("_no train family in this run_"),
            "skeleton_similarity_to_eval": table(
                ["band", "train tasks"], [list(r) for r in histogram(skeleton_sims)]
            )
            if skeleton_sims
            else dg.MetadataValue.md("_no train family in this run_"),
            "guard": dg.MetadataValue.md(
                f"{len(eval_tasks)} evaluation tasks (the clean bundled held-out split + external suites) + the "
                f"held-out families; refused: a skill twin (goal >= {GOAL_TWIN} and solution skeleton >= "
                f"{SKELETON_TWIN}, or the same skeleton; scenarios/skills.py) or a near-copied instruction (3-grams "
                f">= {INSTRUCTION_MAX}); {drops.get('near_duplicate_of_eval', 0)} refused in this run"
            ),
            "samples": table(["family", "difficulty", "instruction"], samples[:60]),
            "per_family_requested": dg.MetadataValue.int(per_family),
            "seed": dg.MetadataValue.int(config.seed),
            "exhausted_families": dg.MetadataValue.json(
                sorted(f for f, y in by_family.items() if y.exhausted)
            ),
        }
    )


defs = dg.Definitions(assets=[generated_scenarios])
