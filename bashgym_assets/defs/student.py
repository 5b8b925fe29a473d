"""GPU location: ``student_rollouts``, the model being trained (the champion, else the newest SFT adapter, else the
base model) making k sampled attempts at train scenarios in real sandboxes; one row per attempt with its reject
reason, in the same schema as ``verified_trajectories``, so ``dpo_dataset`` pairs the student's failures with a
clean trajectory of the same scenario.

Thin: the attempts, rows and tables are ``bashgym_assets.evaluation.student``.
"""

from pathlib import Path
from typing import Any

import dagster as dg

from bashgym_assets import images
from bashgym_assets.defs.automation import DOWNSTREAM
from bashgym_assets.defs.metadata import code_version, gated_scenario_rows
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.defs.training import base_model, sft_adapter
from bashgym_assets.evaluation import ModelSpec, report
from bashgym_assets.evaluation import student as st
from bashgym_assets.plots import md_table
from bashgym_assets.rollout.episode import TRAJECTORY_SCHEMA
from bashgym_assets.rollout.rollouts import kept_rate_by_category
from bashgym_assets.scenarios.bundle import parse_bundle
from bashgym_assets.scenarios.gate import TRAIN, split_for
from bashgym_assets.training import base_model as bm
from bashgym_assets.training.registry import REGISTERED_MODEL

GATED_SCENARIOS = dg.AssetKey("gated_scenarios")
STUDENT_CHOICES = ("auto", "champion", "sft", "base")


class StudentRolloutConfig(dg.Config, st.StudentSettings):
    """Who plays (``auto``: the MLflow champion, else the newest sft_adapter, else the base model; or
    ``champion``, ``sft``, ``base``, or an adapter folder) and how (``StudentSettings``, every field and default:
    samples, sampling, the episode caps of ``STUDENT_LIMITS``). The defaults fit the demo's CPU budget: a
    deterministic subset of ``max_scenarios`` train scenarios spread over the categories (None: all of them)."""

    student: str = "auto"
    max_scenarios: int | None = 24
    categories: list[str] = []
    sample_transcripts: int = 2

    def student_settings(self) -> st.StudentSettings:
        """The plain settings the run hands to ``run_student``: all of ``StudentSettings``' fields."""
        return st.StudentSettings.model_validate(
            self.model_dump(include=set(st.StudentSettings.model_fields))
        )


def _latest_meta(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, Any] | None:
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return None
    return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}


def _sft_spec(instance: dg.DagsterInstance, base: str) -> ModelSpec | None:
    meta = _latest_meta(instance, sft_adapter.key) or {}
    adapter = str(meta.get("adapter_dir") or "")
    if not adapter or not Path(adapter).exists():
        return None
    version = str(meta.get("model_version") or "") or None
    return st.adapter_spec(
        f"sft:{Path(adapter).name}", base, adapter, ref=str(meta.get("model_uri") or adapter), version=version
    )


def choose_student(
    choice: str, instance: dg.DagsterInstance, bashgym: BashgymHome, base: str
) -> tuple[ModelSpec, str]:
    """The student model and why it was chosen."""
    lake, settings = bashgym.lake(), bashgym.settings()
    if choice not in STUDENT_CHOICES:
        if not (Path(choice) / "adapter_config.json").exists():
            raise dg.Failure(f"student {choice!r}: not one of {STUDENT_CHOICES} nor an adapter folder")
        return st.adapter_spec(
            f"adapter:{Path(choice).name}", base, choice
        ), "an adapter folder from the run config"
    if choice in ("auto", "champion"):
        champion = st.champion_spec(
            REGISTERED_MODEL, base, lambda v: lake.artifact_dir("champions", f"v{v}"), settings
        )
        if champion is not None:
            return champion, f"the MLflow champion ({champion.ref})"
        if choice == "champion":
            raise dg.Failure(
                f"student 'champion': no version of {REGISTERED_MODEL} holds the alias 'champion'"
            )
    if choice in ("auto", "sft"):
        sft = _sft_spec(instance, base)
        if sft is not None:
            why = "the newest sft_adapter" + (" (no champion yet)" if choice == "auto" else "")
            return sft, why
        if choice == "sft":
            raise dg.Failure("student 'sft': no sft_adapter materialization with an adapter on disk")
    return st.base_spec(base), "the base model" + (
        " (no champion, no sft_adapter yet)" if choice == "auto" else ""
    )


def _table(rows: list[dict[str, Any]]) -> dg.MetadataValue:
    if not rows:
        return dg.MetadataValue.md("(none)")
    return dg.MetadataValue.md(md_table(list(rows[0]), [list(r.values()) for r in rows]))


@dg.asset(
    group_name="training",
    pool="gpu",
    kinds={"pytorch", "docker", "parquet"},
    code_version=code_version("bashgym_assets.evaluation.student", "bashgym_assets.rollout.episode"),
    deps=[GATED_SCENARIOS, base_model, sft_adapter],
    automation_condition=DOWNSTREAM,
    description="The student (MLflow champion, else the newest SFT adapter, else the base model) makes k sampled "
    "attempts (temperature > 0) at train scenarios in real sandboxes, batched in lockstep; one row per "
    "attempt (kept iff clean, reject_reason = failure class), schema of verified_trajectories, read "
    "by dpo_dataset to pair the student's failures with a clean trajectory of the same scenario.",
)
def student_rollouts(
    context: dg.AssetExecutionContext, config: StudentRolloutConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    lake = bashgym.lake()
    gated = gated_scenario_rows(lake)
    train = [
        parse_bundle(r["bundle_json"])
        for r in gated
        if r.get("admitted", True) and r["split"] == TRAIN and split_for(r["scenario_id"]) == TRAIN
    ]
    bundles = st.select_scenarios(train, config.max_scenarios, config.categories)
    if not bundles:
        raise dg.Failure("no admitted train scenario to roll the student out on")
    base = bm.resolve_base_model(bashgym.settings(), prepare=True)
    spec, why = choose_student(config.student, context.instance, bashgym, base)
    settings = config.student_settings()
    images.ensure_docker_engine()
    image = bashgym.sandbox_image_tag()
    context.log.info(
        f"student: {spec.label} ({spec.describe()}), {why}; {len(bundles)} of {len(train)} train "
        f"scenarios x {config.samples} samples at temperature {config.temperature}"
    )
    try:
        run = st.run_student(spec, bundles, image, settings, progress=context.log.info)
    except ValueError as exc:  # held-out scenario, temperature 0
        raise dg.Failure(str(exc)) from exc
    records = run.records
    lake.write("student_rollouts", [r.model_dump() for r in records], schema=TRAJECTORY_SCHEMA)
    clean = sum(r.kept for r in records)
    failed = st.scenarios_with_failure(records)
    by_cat = kept_rate_by_category(records)
    fails = st.failing_examples(run, limit=config.sample_transcripts)
    context.log.info(
        f"student_rollouts: {len(records)} attempts, {clean} clean, {len(failed)} of {len(bundles)} "
        f"scenarios with a failure, {run.wall_s:.0f} s"
    )
    return dg.MaterializeResult(
        metadata={
            "student": dg.MetadataValue.text(run.operator),
            "student_ref": dg.MetadataValue.text(spec.describe()),
            "student_version": dg.MetadataValue.text(spec.version or "unregistered"),
            "student_choice": dg.MetadataValue.text(f"{config.student}: {why}"),
            "attempts": dg.MetadataValue.int(len(records)),
            "dagster/row_count": dg.MetadataValue.int(len(records)),
            "clean": dg.MetadataValue.int(clean),
            "clean_rate": dg.MetadataValue.float(round(clean / len(records), 4) if records else 0.0),
            "scenarios": dg.MetadataValue.int(len(bundles)),
            "train_scenarios": dg.MetadataValue.int(len(train)),
            "scenarios_with_a_failure": dg.MetadataValue.int(len(failed)),
            "failure_classes": _table(st.failure_rows(records)),
            "by_category": _table(
                [
                    {
                        "category": r["category"],
                        "attempts": r["attempts"],
                        "clean": r["kept"],
                        "verified": r["verified"],
                        "terminated": r["terminated"],
                        "clean_rate": r["kept_rate"],
                    }
                    for r in by_cat
                ]
            ),
            "failing_transcripts": dg.MetadataValue.md(
                "\n\n".join(report.transcript_markdown(e) for e in fails) or "(no failing attempt)"
            ),
            "settings": dg.MetadataValue.json(settings.model_dump()),
            "wall_s": dg.MetadataValue.float(round(run.wall_s, 1)),
        },
    )


defs = dg.Definitions(assets=[student_rollouts])
