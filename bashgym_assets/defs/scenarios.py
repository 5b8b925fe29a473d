"""Scenarios in Dagster: ``scenario_candidates`` (pack + imports + teacher + external evaluation suites) and
``gated_scenarios`` (the reference gate in real sandboxes, train/held-out split, ``gate_rejections`` with reasons).

Thin on purpose: loading, authoring and the gate live in ``bashgym_assets.scenarios``.
"""

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from bashgym_assets import images
from bashgym_assets.config import get_settings
from bashgym_assets.defs.metadata import code_version, counts_table, lake_file_metadata, table
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.scenarios.authoring import author_bundles
from bashgym_assets.scenarios.bundle import BundleError, parse_bundle
from bashgym_assets.scenarios.candidates import (
    PACK_DIR,
    candidate_rows,
    collect_candidates,
    load_pack,
    merge_candidates,
    origin,
    quarantine_rows,
    sample_pack,
)
from bashgym_assets.scenarios.external import suite_of
from bashgym_assets.scenarios.factory.generate import bundled_twin_tasks, evaluation_tasks
from bashgym_assets.scenarios.factory.intake import generated_candidates
from bashgym_assets.scenarios.factory.similarity import guard_train_bundles
from bashgym_assets.scenarios.gate import (
    HELD_OUT,
    TRAIN,
    GateLimits,
    GateResult,
    gate_bundles,
    is_external,
    reason_counts,
    split_for,
)
from bashgym_assets.scenarios.report import bar_chart_md
from bashgym_assets.scenarios.suite import (
    GATED_SCHEMA,
    QUARANTINE_SCHEMA,
    REJECTION_SCHEMA,
    gate_refusal_line,
    import_folders,
    refused_by_gate,
)
from bashgym_assets.scenarios.variants import make_pack_variants

CANDIDATE_SCHEMA = pa.schema(
    [
        ("scenario_id", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.int32()),
        ("user", pa.string()),
        ("announced", pa.bool_()),
        ("origin", pa.string()),
        ("source", pa.string()),
        ("task", pa.string()),
        ("bundle_json", pa.string()),
    ]
)
PENDING_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("task", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.int32()),
        ("setup", pa.string()),
        ("check", pa.string()),
        ("user", pa.string()),
        ("source", pa.string()),
        ("reason", pa.string()),
    ]
)
# QUARANTINE_SCHEMA, GATED_SCHEMA and REJECTION_SCHEMA (imported above) live in scenarios.suite: `bashgym suite gate`
# writes the same tables, in partitions of its own.


class CandidatesConfig(dg.Config):
    """Where candidates come from. Teacher authoring runs only when ``BASHGYM_TEACHER_MODEL`` names a model."""

    include_pack: bool = True
    import_dir: str | None = None  # default: $BASHGYM_SCENARIO_IMPORT_DIR, else <home>/scenario_imports
    authored: int = 20  # bundles to request from the teacher (when one is configured)
    seed: int = 0
    # Train-only augmentation: up to N variants (other names and values) of each train-split pack bundle,
    # gated like every candidate. Default: $BASHGYM_SCENARIO_VARIANTS, else 0 (the demo's gate stays as it
    # was); a training run wants more, e.g. 4.
    variants_per_scenario: int | None = None
    include_external: bool = True  # the suites of $BASHGYM_EVAL_SUITE_DIRS (evaluation only: always held out)
    # Smoke runs (`bashgym demo --quick`): only this many pack bundles, a deterministic slice with both splits and
    # every category (scenarios.candidates.sample_pack); imports, teacher bundles and suites are not cut.
    pack_sample: int | None = None
    # The task factory's tasks (``generated_scenarios``, every materialized family partition): all of them, or the
    # first N of each family (the demo's slice); 0 leaves them out.
    generated_per_family: int | None = None
    generated_max: int | None = None  # at most this many generated tasks, round-robin across families
    # A learning-study profile (issue 38): of the factory's train families only these (None: every one); the
    # held-out families are always taken (the ``unseen`` set). Unknown, held-out or validation families are refused.
    train_families: list[str] | None = None
    # False: the pack's held-out tasks only (the ``bundled`` set), none of its train tasks: a study profile trains
    # on its families alone, as the study's arms did.
    pack_train: bool = True
    # Public data (scenarios/public_data.py, scenarios/nl2bash.py): a hub dataset name or a local folder/file of
    # the shell-tasks dataset, and of NL2Bash-style {nl, cmd} pairs. Default: $BASHGYM_SHELL_TASKS,
    # $BASHGYM_NL2BASH, else none. Records without a reference wait in scenario_pending for a solver.
    shell_tasks: str | None = None
    nl2bash: str | None = None
    public_limit: int | None = None  # at most this many records of each public source
    # Pending public tasks the teacher (BASHGYM_TEACHER_MODEL, when it names a model) tries to prove by solving
    # them in a sandbox (rollout/pending.py): a proof's commands become the reference, then the gate decides.
    solve_pending: int = 20


class GateConfig(dg.Config):
    # sandboxes at once; default (None): the CPU cores (gate.default_parallelism). More only starves each of them
    # and turns the gate's timers into verdicts on the machine's load (issue 40)
    max_parallel: int | None = None
    command_timeout_s: float = 30.0


def _public_candidates(config: CandidatesConfig) -> tuple[list, list, list[BundleError], dict[str, dict]]:
    """Bundles, pending tasks, quarantine and counts of the configured public sources."""
    from bashgym_assets.scenarios.nl2bash import load_nl2bash
    from bashgym_assets.scenarios.public_data import load_shell_tasks

    bundles, pending, quarantine, counts = [], [], [], {}
    settings = get_settings()
    shell_tasks = config.shell_tasks or settings.shell_tasks
    if shell_tasks:
        got = load_shell_tasks(shell_tasks, limit=config.public_limit)
        bundles += got.bundles
        pending += got.pending
        quarantine += got.quarantine
        counts[f"shell-tasks: {shell_tasks}"] = {**got.counts()}
    pairs = config.nl2bash or settings.nl2bash
    if pairs:
        nl2bash = load_nl2bash(pairs, limit=config.public_limit)
        bundles += nl2bash.bundles
        quarantine += nl2bash.quarantine
        n = nl2bash.counts()  # pairs carry their reference: none waits for a solver
        counts[f"nl2bash: {pairs}"] = {
            "records": n["records"],
            "bundles": n["bundles"],
            "pending": 0,
            "quarantined": n["quarantined"],
        }
    return bundles, pending, quarantine, counts


@dg.asset(
    group_name="scenarios",
    kinds={"python", "parquet"},
    deps=[dg.AssetDep("generated_scenarios", partition_mapping=dg.AllPartitionMapping())],
    description="Candidate shell-task bundles: the bundled pack, the task factory's generated tasks (every "
    "materialized family of generated_scenarios), imported scenario files (bundles or shell tasks), (when "
    "BASHGYM_TEACHER_MODEL names a model) teacher-authored bundles and the external evaluation suites "
    "of BASHGYM_EVAL_SUITE_DIRS (Terminal-Bench/Harbor, ext- ids, always held out). Bad input is "
    "quarantined.",
)
def scenario_candidates(
    context: dg.AssetExecutionContext, config: CandidatesConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    settings = bashgym.settings()
    lake = bashgym.lake()
    import_dir = Path(config.import_dir) if config.import_dir else settings.scenario_import_dir
    authored, authoring_errors, authoring_note = [], [], "no teacher configured (BASHGYM_TEACHER_MODEL)"
    teacher = settings.teacher_model
    if teacher and teacher != "reference" and config.authored > 0:
        existing, _ = load_pack() if config.include_pack else ([], [])
        report = author_bundles(
            teacher, config.authored, api_base=settings.teacher_api_base, seed=config.seed, existing=existing
        )
        authored = report.bundles
        authoring_errors = [
            BundleError(source=f"teacher:{teacher}:{f.axes.category}/d{f.axes.difficulty}", reason=f.reason)
            for f in report.failures
        ]
        authoring_errors += [
            BundleError(source=f"teacher:{teacher}", reason=f"near-duplicate of an existing task: {i}")
            for i in report.duplicates
        ]
        authoring_note = (
            f"`{teacher}`: {len(report.bundles)} bundles from {report.attempts} requests, "
            f"{len(report.failures)} failed, {len(report.duplicates)} near-duplicates dropped"
        )
        context.log.info(authoring_note)
    if config.train_families is not None:
        from bashgym_assets.evaluation.learning_study import check_families

        check_families(config.train_families)  # a typo must not train on nothing
    cands = collect_candidates(
        PACK_DIR if config.include_pack else None, import_dir, authored, authoring_errors
    )
    if not config.pack_train:
        cands.bundles = [b for b in cands.bundles if origin(b) != "pack" or split_for(b.id) == HELD_OUT]
        context.log.info("pack_train=False: only the pack's held-out tasks (the bundled set) are kept")
    if config.pack_sample is not None:
        sampled = {
            b.id
            for b in sample_pack(
                [b for b in cands.bundles if origin(b) == "pack"], config.pack_sample, split_for
            )
        }
        cands.bundles = [b for b in cands.bundles if origin(b) != "pack" or b.id in sampled]
        context.log.info(f"pack_sample={config.pack_sample}: {len(sampled)} pack bundles kept")
    n_variants = (
        config.variants_per_scenario
        if config.variants_per_scenario is not None
        else settings.scenario_variants
    )
    variants = make_pack_variants(cands.bundles, n_variants, seed=config.seed)
    cands.bundles.extend(variants)  # ids <parent>.var-<k>: they share the parent's (train) split
    public, pending, public_quarantine, public_counts = _public_candidates(config)
    cands.bundles.extend(public)  # ids st.* / nl2bash.*: hash split like the pack's
    cands.quarantine.extend(public_quarantine)
    generated, generated_quarantine = generated_candidates(
        lake, config.generated_per_family, config.generated_max, config.train_families
    )
    cands.bundles.extend(generated)  # ids gen.<family>.<hash>: their family's recorded split
    cands.quarantine.extend(generated_quarantine)
    suite_dirs = settings.eval_suite_dirs if config.include_external else []
    suites = import_folders(suite_dirs)
    external = [b for s in suites for b in s.bundles]
    external_quarantine = [q for s in suites for q in s.quarantine]
    # A suite refused whole ends here, and the run would still succeed: say it loudly (log and metadata), without
    # failing the other inputs of the run.
    refused_suites = [why for s in suites if (why := s.refusal()) is not None]
    for why in refused_suites:
        context.log.warning(f"external suite refused whole: {why}")
    bundles, dupes = merge_candidates(cands.bundles, external)
    quarantine = cands.quarantine + [q.to_bundle_error() for q in external_quarantine] + dupes
    solved_note = "no pending tasks"
    if pending and teacher and teacher != "reference" and config.solve_pending > 0:
        from bashgym_assets.rollout.pending import solve_pending
        from bashgym_assets.serving.router import make_operator  # every operator kind, routed: included

        solver = make_operator(teacher, api_base=settings.teacher_api_base)
        solved = solve_pending(
            pending[: config.solve_pending], solver, bashgym.sandbox_image_tag(), max_parallel=2
        )
        proved_ids = {b.id for b in solved.proved}
        bundles += solved.proved  # still gated downstream, like every candidate
        public += solved.proved
        pending = [*solved.pending, *pending[config.solve_pending :]]
        tried = min(len(solved.pending) + len(proved_ids), config.solve_pending)
        solved_note = f"teacher {teacher} proved {len(proved_ids)} of {tried} pending tasks tried"
        context.log.info(solved_note)
    elif pending:
        solved_note = (
            f"{len(pending)} pending tasks wait for a solver (set BASHGYM_TEACHER_MODEL; "
            "rollout/pending.solve_pending takes any operator, the champion too)"
        )
    if (
        public
    ):  # imported train tasks never near-copy an evaluation task (factory tasks were guarded when drawn)
        public_ids = {b.id for b in public}
        evaluation = [
            *evaluation_tasks(suite_dirs),  # the whole pack's held-out split, even when not included
            *(b for b in bundles if split_for(b.id) == HELD_OUT and b.id not in public_ids),
        ]
        kept, near_copies = guard_train_bundles(
            [b for b in bundles if b.id in public_ids], evaluation, split_for, copies=bundled_twin_tasks()
        )
        kept_ids = {b.id for b in kept}
        bundles = [b for b in bundles if b.id not in public_ids or b.id in kept_ids]
        quarantine += [BundleError(source=b.source or b.id, reason=why) for b, why in near_copies]
    lake.write(
        "scenario_pending",
        [p.model_dump(mode="json") | {"setup": json.dumps(p.setup)} for p in pending],
        schema=PENDING_SCHEMA,
    )
    rows = [
        {**r, "origin": "external"} if is_external(str(r["scenario_id"])) else r
        for r in candidate_rows(bundles)
    ]
    lake.write("scenario_candidates", rows, schema=CANDIDATE_SCHEMA)
    lake.write("scenario_candidates_quarantine", quarantine_rows(quarantine), schema=QUARANTINE_SCHEMA)
    by_cat = Counter(b.category for b in bundles)
    by_diff = Counter(b.difficulty for b in bundles)
    cat_rows = [
        [c, n, sum(1 for b in bundles if b.category == c and b.announced)] for c, n in sorted(by_cat.items())
    ]
    by_origin = Counter(str(r["origin"]) for r in rows)
    imported = Counter(suite_of(b.source) for b in bundles if is_external(b.id))
    refused = Counter(q.suite for q in external_quarantine)
    return dg.MaterializeResult(
        metadata={
            "candidates": dg.MetadataValue.int(len(bundles)),
            "quarantined": dg.MetadataValue.int(len(quarantine)),
            "categories": dg.MetadataValue.int(len(by_cat)),
            "by_origin": dg.MetadataValue.json(dict(sorted(by_origin.items()))),
            "external_imported": dg.MetadataValue.int(sum(imported.values())),
            "external_quarantined": dg.MetadataValue.int(len(external_quarantine)),
            "external_refused_suites": dg.MetadataValue.int(len(refused_suites)),
            "external_warnings": dg.MetadataValue.md(
                "\n".join(f"- **refused whole**: {why}" for why in refused_suites)
                if refused_suites
                else "_every configured external suite imported at least one task_"
            ),
            "external_suites": (
                table(
                    ["suite", "imported (held out)", "quarantined"],
                    [[s, imported[s], refused[s]] for s in sorted(set(imported) | set(refused))],
                )
                if imported or refused
                else dg.MetadataValue.md(
                    f"_no external suites ({len(suite_dirs)} folders in BASHGYM_EVAL_SUITE_DIRS)_"
                )
            ),
            "external_quarantine": dg.MetadataValue.table(
                [
                    dg.TableRecord(
                        {"suite": q.suite, "task": q.task, "layout": q.layout, "reason": q.reason[:300]}
                    )
                    for q in external_quarantine[:200]
                ],
                schema=dg.TableSchema(
                    columns=[dg.TableColumn(name, "string") for name in ("suite", "task", "layout", "reason")]
                ),
            ),
            "by_difficulty": dg.MetadataValue.json({str(k): v for k, v in sorted(by_diff.items())}),
            "by_category": table(["category", "bundles", "announced (provider mode)"], cat_rows),
            "teacher": dg.MetadataValue.text(authoring_note),
            "variants": dg.MetadataValue.int(len(variants)),
            "generated": dg.MetadataValue.int(len(generated)),
            "public_sources": (
                table(
                    ["source", "records", "bundles", "pending (wait for a solver)", "quarantined"],
                    [[k, *v.values()] for k, v in public_counts.items()],
                )
                if public_counts
                else dg.MetadataValue.md("_no public data configured_")
            ),
            "pending": dg.MetadataValue.int(len(pending)),
            "pending_solver": dg.MetadataValue.text(solved_note),
            "generated_families": dg.MetadataValue.int(len({b.id.split(".")[1] for b in generated})),
            "variants_by_category": (
                table(
                    ["category", f"variants (up to {n_variants} per train pack scenario)"],
                    [list(kv) for kv in sorted(Counter(v.category for v in variants).items())],
                )
                if variants
                else dg.MetadataValue.md(f"_no variants (variants_per_scenario={n_variants})_")
            ),
            "import_dir": dg.MetadataValue.path(str(import_dir)),
            "quarantine": (
                table(["source", "reason"], [[q.source, q.reason[:200]] for q in quarantine[:40]])
                if quarantine
                else dg.MetadataValue.md("_nothing quarantined_")
            ),
            **lake_file_metadata(lake, "scenario_candidates"),
        }
    )


@dg.asset(
    group_name="scenarios",
    kinds={"docker", "parquet"},
    deps=["scenario_candidates", "sandbox_image"],
    code_version=code_version("bashgym_assets.scenarios.gate", "bashgym_assets.scenarios.bundle"),
    description="Candidates admitted by the reference gate (setup ok, check fails untouched, reference passes) in "
    "fresh sandboxes, split train/held-out by a stable hash of the id; rejections in gate_rejections.",
)
def gated_scenarios(
    context: dg.AssetExecutionContext, config: GateConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    lake = bashgym.lake()
    images.ensure_docker_engine()
    image = bashgym.sandbox_image_tag()
    if not images.image_exists(image):
        raise dg.Failure(f"sandbox image {image} is missing: materialize the sandbox_image asset first")
    bundles = [parse_bundle(row["bundle_json"]) for row in lake.read_rows("scenario_candidates")]
    done = Counter[str]()
    started = time.monotonic()
    every = max(10, len(bundles) // 50)

    def progress(result: GateResult) -> None:
        done[result.reason] += 1
        n = sum(done.values())
        if n % every == 0 or n == len(bundles):
            rate = n / max(time.monotonic() - started, 1e-6)
            eta = (len(bundles) - n) / rate if rate else 0.0
            context.log.info(f"gated {n}/{len(bundles)} ({rate:.1f}/s, ETA {eta:.0f} s): {dict(done)}")

    results = gate_bundles(
        bundles,
        image,
        max_parallel=config.max_parallel,
        limits=GateLimits(command_timeout_s=config.command_timeout_s),
        progress=progress,
    )
    admitted = [r for r in results if r.admitted]
    rejected = [r for r in results if not r.admitted]
    refused_suites = refused_by_gate(results)  # said loudly: the run itself succeeds for the other candidates
    for suite, rs in refused_suites.items():
        context.log.warning(gate_refusal_line(suite, rs))
    lake.write(
        "gated_scenarios",
        [{k: r.model_dump()[k] for k in GATED_SCHEMA.names} for r in admitted],
        schema=GATED_SCHEMA,
    )
    lake.write(
        "gate_rejections",
        [{k: r.model_dump()[k] for k in REJECTION_SCHEMA.names} for r in rejected],
        schema=REJECTION_SCHEMA,
    )
    counts = reason_counts(results)
    cats = sorted({r.category for r in results})
    cat_rows: list[list[Any]] = []  # category, candidates, admitted, train, held out
    for c in cats:
        rs = [r for r in results if r.category == c]
        cat_rows.append(
            [
                c,
                len(rs),
                sum(r.admitted for r in rs),
                sum(r.split == TRAIN for r in rs),
                sum(r.split == HELD_OUT for r in rs),
            ]
        )
    total_s = sum(r.duration_s for r in results)
    return dg.MaterializeResult(
        metadata={
            "candidates": dg.MetadataValue.int(len(results)),
            "admitted": dg.MetadataValue.int(len(admitted)),
            "rejected": dg.MetadataValue.int(len(rejected)),
            "external_refused_suites": dg.MetadataValue.int(len(refused_suites)),
            "external_warnings": dg.MetadataValue.md(
                "\n".join(
                    f"- **refused whole**: {gate_refusal_line(s, rs)}" for s, rs in refused_suites.items()
                )
                if refused_suites
                else "_no external suite was refused whole by the gate_"
            ),
            "admitted_rate": dg.MetadataValue.float(
                round(len(admitted) / len(results), 4) if results else 0.0
            ),
            "train": dg.MetadataValue.int(sum(r.split == TRAIN for r in admitted)),
            "held_out": dg.MetadataValue.int(sum(r.split == HELD_OUT for r in admitted)),
            "counts_by_reason": dg.MetadataValue.json(counts),
            "by_category": table(["category", "candidates", "admitted", "train", "held out"], cat_rows),
            "gate_reasons": counts_table(
                dict(sorted(counts.items(), key=lambda kv: -kv[1])), "reason", "scenarios"
            ),
            "admitted_plot": dg.MetadataValue.md(
                bar_chart_md(
                    [r[0] for r in cat_rows],
                    {"candidates": [r[1] for r in cat_rows], "admitted": [r[2] for r in cat_rows]},
                    "gate by category",
                    "bundles",
                )
            )
            if cat_rows
            else dg.MetadataValue.md("_no candidates_"),
            "rejections": (
                table(
                    ["scenario", "reason", "detail"],
                    [[r.scenario_id, r.reason, r.detail[:160]] for r in rejected[:40]],
                )
                if rejected
                else dg.MetadataValue.md("_none_")
            ),
            **lake_file_metadata(lake, "gated_scenarios"),
            "sandbox_seconds": dg.MetadataValue.float(round(total_s, 1)),
            "image": dg.MetadataValue.text(image),
        }
    )


defs = dg.Definitions(assets=[scenario_candidates, gated_scenarios])
