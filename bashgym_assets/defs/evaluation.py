"""GPU location: ``benchmark_results``, the behavioural evaluation of the newest adapter against its base and the
current champion on the held-out scenarios, with the promotion decision as an asset check.

Thin: the evaluation is ``bashgym_assets.evaluation``; this module picks the models, writes the episodes to the
lake (``eval_episodes``, one partition per evaluation), logs to MLflow and reports metadata.
"""

import json
import time
from pathlib import Path
from typing import Any

import dagster as dg

from bashgym_assets import images
from bashgym_assets.defs.automation import DOWNSTREAM
from bashgym_assets.defs.grpo import grpo_adapter
from bashgym_assets.defs.metadata import code_version, gated_scenario_rows
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.defs.training import base_model, dpo_adapter, sft_adapter
from bashgym_assets.evaluation import (
    EVAL_EPISODE_SCHEMA,
    TRANSFER,
    EvalSettings,
    ModelSpec,
    Sampling,
    admitted,
    compare,
    evaluation_bundles,
    judges,
    report,
    set_names,
)
from bashgym_assets.evaluation import promotion as promo
from bashgym_assets.evaluation import tracking as eval_tracking
from bashgym_assets.evaluation.metrics import summarize
from bashgym_assets.evaluation.runner import LakeEpisodeWriter
from bashgym_assets.plots import png_markdown
from bashgym_assets.training import base_model as bm
from bashgym_assets.training.registry import REGISTERED_MODEL

GATED_SCENARIOS = dg.AssetKey("gated_scenarios")
ADAPTER_ASSETS = (sft_adapter.key, dpo_adapter.key, grpo_adapter.key)
PROMOTION_CHECK = "promotion_decision"


class EvalRunConfig(dg.Config, EvalSettings):
    """Launchpad settings of an evaluation (defaults: the whole held-out split, greedy, 10 turns): how episodes
    run (``EvalSettings``, the evaluator's own fields and defaults: caps, samples, sandboxes, batching) and what
    is evaluated and decided."""

    max_scenarios: int | None = None  # the first N held-out scenarios not from the task factory (by id)
    categories: list[str] = []
    # The evaluation sets (fit, transfer, unseen, bundled, suite:NAME; empty: unseen, bundled and every suite, plus
    # fit / transfer when their sizes below are set). Only unseen, bundled and the suites judge (promotion).
    sets: list[str] = []
    # unseen: this many tasks of each of the factory's held-out families (None: all of them, 0: none)
    heldout_per_family: int | None = 3
    fit_sample: int = 0  # fit: a sample of trained-family tasks (30 when fit is named in sets without a size)
    transfer_per_family: int = 0  # transfer: fresh draws per trained family (2 when named without a size)
    # Only the tasks of these external suites (a suite's name or a prefix of its ids, as `bashgym eval --suite`);
    # the factory's families and the fit sample are left out then, and the promotion rests on these tasks alone.
    suites: list[str] = []
    temperature: float = 0.0
    max_new_tokens: int = 128
    include_base: bool = True
    promote: bool = True
    alpha: float = 0.05
    max_rate_drop: float = 0.05


def _newest_adapter(instance: dg.DagsterInstance) -> tuple[dg.AssetKey, dict[str, Any]] | None:
    """The most recently materialized adapter asset and its metadata values."""
    best = None
    for key in ADAPTER_ASSETS:
        event = instance.get_latest_materialization_event(key)
        if event is None or event.asset_materialization is None:
            continue
        if best is None or event.timestamp > best[0]:
            meta = {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}
            best = (event.timestamp, key, meta)
    return (best[1], best[2]) if best else None


def _champion_spec(lake: Any, settings: Any, base: str, candidate_version: str | None) -> ModelSpec | None:
    """The current champion (MLflow alias) as a model to evaluate; None when there is none or it IS the candidate."""
    from bashgym_assets.training.registry import download_adapter

    version = promo.alias_version(REGISTERED_MODEL, promo.CHAMPION, settings)
    if version is None or str(version.version) == str(candidate_version):
        return None
    folder = lake.artifact_dir("champions", f"v{version.version}")
    adapter = folder / "adapter"
    if not (adapter / "adapter_config.json").exists():  # fetched once per version, then reused
        adapter = download_adapter(f"models:/{REGISTERED_MODEL}/{version.version}", folder, settings)
    return ModelSpec(
        label="champion",
        base=base,
        adapter=str(adapter),
        version=str(version.version),
        ref=f"models:/{REGISTERED_MODEL}/{version.version}",
    )


def _demoted_versions(lake: Any) -> list[str]:
    try:
        rows = lake.read("promotion_decisions").to_pylist()
    except FileNotFoundError:
        return []
    last: dict[str, str] = {}
    for r in sorted(rows, key=lambda r: r["decided_at"]):
        if r.get("candidate_version"):
            last[r["candidate_version"]] = r["action"]
    return [v for v, action in last.items() if action == "manual_demote"]


def _table(rows: list[dict[str, Any]]) -> dg.MetadataValue:
    """A list of flat dicts as a MetadataValue.table with a schema (types from the first row)."""
    if not rows:
        return dg.MetadataValue.md("(no rows)")

    def kind(v: Any) -> str:
        return (
            "bool"
            if isinstance(v, bool)
            else "int"
            if isinstance(v, int)
            else ("float" if isinstance(v, float) else "string")
        )

    schema = dg.TableSchema(columns=[dg.TableColumn(k, kind(v)) for k, v in rows[0].items()])
    return dg.MetadataValue.table([dg.TableRecord(r) for r in rows], schema=schema)


def promotion_check(
    decision: promo.PromotionDecision, promoted: bool, already: bool = False, applied: bool = True
) -> dg.AssetCheckResult:
    """The ``promotion_decision`` result: what the rule decided, worded for the UI.

    Keeping the incumbent is the normal outcome of most evaluations (a candidate must clearly beat it), not an
    error: the check passes and says "kept the incumbent" with the reason; a first-time user read the old red
    "Failed" as a broken pipeline. It fails (WARN) only when there was nothing to decide on: no held-out scenario
    evaluated for both models."""
    incumbent = (
        f"the champion (version {decision.incumbent_version})"
        if decision.incumbent == "champion"
        else "the base model"
    )
    candidate = f"version {decision.candidate_version}" if decision.candidate_version else "the candidate"
    if promoted:
        outcome = f"PROMOTED: {candidate} is the new champion"
    elif already:
        outcome = f"{candidate} already is the champion"
    elif decision.promote and not applied:
        outcome = f"not promoted: the rule would promote {candidate}, but this run had promote: false"
    else:
        outcome = f"kept the incumbent: {incumbent} stays; {candidate} not promoted"
    decided = decision.test.scenarios > 0
    description = (
        f"{outcome} ({decision.reason})"
        if decided
        else (f"no decision: no held-out scenario was evaluated for both models ({decision.reason})")
    )
    decision_md = (
        f"**{'PROMOTED' if promoted else 'not promoted'}**: {decision.reason}\n\nRule: {decision.rule}"
    )
    return dg.AssetCheckResult(
        check_name=PROMOTION_CHECK,
        passed=decided,
        severity=dg.AssetCheckSeverity.WARN,
        description=description,
        metadata={
            "outcome": dg.MetadataValue.text(outcome),
            "promoted": dg.MetadataValue.bool(promoted),
            "reason": dg.MetadataValue.text(decision.reason),
            "decision": dg.MetadataValue.md(decision_md),
            "numbers": dg.MetadataValue.json(json.loads(decision.model_dump_json())),
            "p_value": dg.MetadataValue.float(decision.test.p_value),
            "candidate_clean": dg.MetadataValue.float(decision.candidate_rates["clean"]),
            "incumbent_clean": dg.MetadataValue.float(decision.incumbent_rates["clean"]),
            "incumbent": dg.MetadataValue.text(decision.incumbent),
        },
    )


@dg.asset(
    group_name="evaluation",
    pool="gpu",
    kinds={"pytorch", "mlflow"},
    code_version=code_version(
        "bashgym_assets.evaluation.runner",
        "bashgym_assets.evaluation.metrics",
        "bashgym_assets.evaluation.promotion",
    ),
    deps=[GATED_SCENARIOS, base_model, sft_adapter, dpo_adapter, grpo_adapter],
    automation_condition=DOWNSTREAM,
    check_specs=[
        dg.AssetCheckSpec(
            PROMOTION_CHECK,
            asset="benchmark_results",
            description="The promotion rule applied to this evaluation. Its outcome is in "
            "the metadata: PROMOTED (the candidate is the new champion) or kept "
            "the incumbent (the usual result: the candidate did not clearly beat "
            "it), with the reason. Passes whenever the rule could be applied; "
            "fails (warning) only when no held-out scenario was evaluated for "
            "both models, so there were no numbers to decide on.",
        )
    ],
    description="The newest adapter (SFT, DPO or GRPO) against its base and the current champion, dropped with no "
    "scaffold into the held-out scenarios in real sandboxes: operate / terminate / verified / clean "
    "rates with 95% intervals, per category and difficulty. Episodes go to the lake (eval_episodes); "
    "the promotion rule may move the MLflow alias 'champion'.",
)
def benchmark_results(context: dg.AssetExecutionContext, config: EvalRunConfig, bashgym: BashgymHome):
    lake = bashgym.lake()
    settings = bashgym.settings()
    gated = gated_scenario_rows(lake)
    from bashgym_assets.scenarios.suite import known_suites, of_suites

    try:
        names = set_names(config.sets, known_suites(gated)) if config.sets else None
    except ValueError as exc:
        raise dg.Failure(str(exc)) from exc
    sets = evaluation_bundles(
        gated,
        sets=names,
        limit=config.max_scenarios,
        categories=config.categories,
        per_heldout_family=config.heldout_per_family,
        fit_sample=config.fit_sample,
        transfer_per_family=config.transfer_per_family,
    )
    if config.suites:
        sets = {name: of_suites(bs, config.suites) if judges(name) else [] for name, bs in sets.items()}
    if sets.get(TRANSFER):
        images.ensure_docker_engine()
        sets[TRANSFER] = admitted(sets[TRANSFER], bashgym.sandbox_image_tag(), progress=context.log.info)
    set_of = {b.id: name for name, bs in sets.items() for b in bs}
    bundles = [b for bs in sets.values() for b in bs]
    if not any(bs for name, bs in sets.items() if judges(name)):
        if config.suites:
            from bashgym_assets.scenarios.suite import known_suites

            raise dg.Failure(
                f"no admitted task of the suite(s) {', '.join(config.suites)} in gated_scenarios "
                f"(suites there: {', '.join(known_suites(gated)) or 'none'}; gate one with "
                "`bashgym suite gate PATH` or BASHGYM_EVAL_SUITE_DIRS)"
            )
        raise dg.Failure("no admitted held-out scenario to evaluate on (gated_scenarios has none)")
    newest = _newest_adapter(context.instance)
    if newest is None:
        raise dg.Failure("no adapter has been trained yet: materialize sft_adapter first")
    cand_key, cand_meta = newest
    base = bm.resolve_base_model(settings, prepare=True)
    cand_version = str(cand_meta.get("model_version") or "") or None
    specs = [
        ModelSpec(
            label="candidate",
            base=base,
            adapter=str(cand_meta["adapter_dir"]),
            version=cand_version,
            ref=str(cand_meta.get("model_uri") or cand_meta["adapter_dir"]),
        )
    ]
    champion = _champion_spec(lake, settings, base, cand_version)
    if champion is not None:
        specs.append(champion)
    # A DPO or GRPO candidate is also compared with the SFT adapter it was trained from (SFT vs SFT+DPO / SFT+GRPO),
    # unless that one is the champion already (then it is in the comparison under that label).
    sft_dir = (
        str(cand_meta.get("sft_adapter") or "") if cand_key in (dpo_adapter.key, grpo_adapter.key) else ""
    )
    sft_ref = str(cand_meta.get("sft_model_uri") or "")
    sft_ref = sft_dir if sft_ref in ("", "None") else sft_ref
    if sft_dir and Path(sft_dir).exists() and (champion is None or champion.ref != sft_ref):
        specs.insert(1, ModelSpec(label="sft", base=base, adapter=sft_dir, ref=sft_ref))
    if config.include_base or champion is None:
        specs.append(ModelSpec(label="base", base=base, ref=base))
    images.ensure_docker_engine()
    image = bashgym.sandbox_image_tag()
    eval_id = f"eval-{context.run_id[:8]}"
    context.log.info(
        f"{eval_id}: "
        + ", ".join(f"{len(bs)} {name}" for name, bs in sets.items() if bs)
        + f" x {config.samples} sample(s), models: "
        + ", ".join(f"{s.label} ({s.describe()})" for s in specs)
    )
    started_ms = int(time.time() * 1000)
    writer = LakeEpisodeWriter(lake, eval_id)  # finished episodes reach the lake as they finish
    results = compare(
        specs,
        bundles,
        image,
        EvalSettings.model_validate(config.model_dump(include=set(EvalSettings.model_fields))),
        Sampling(temperature=config.temperature, max_new_tokens=config.max_new_tokens),
        eval_id=eval_id,
        progress=context.log.info,
        sink=writer,
    )
    episodes = [e for r in results for e in r.episodes]
    lake.write(
        "eval_episodes", [e.model_dump() for e in episodes], partition=eval_id, schema=EVAL_EPISODE_SCHEMA
    )  # the whole evaluation, in model order (the writer's partition, replaced)
    # Every held-out figure (the promotion rule included) is over the judging sets only (unseen, bundled, suites);
    # fit and transfer measure trained skills and are reported apart.
    heldout = {
        r.summary.model: [e for e in r.episodes if judges(set_of.get(e.scenario_id, ""))] for r in results
    }
    summaries = [
        summarize(r.summary.model, heldout[r.summary.model], r.summary.wall_s, r.summary.sampling)
        for r in results
    ]
    set_summaries = {
        name: [
            summarize(
                r.summary.model,
                [e for e in r.episodes if set_of.get(e.scenario_id) == name],
                0.0,
                r.summary.sampling,
            )
            for r in results
        ]
        for name, bs in sets.items()
        if bs
    }

    by_label = heldout
    incumbent = "champion" if champion is not None else "base"
    decision = promo.decide(
        by_label["candidate"],
        by_label[incumbent],
        promo.PromotionRule(alpha=config.alpha, max_rate_drop=config.max_rate_drop),
        incumbent_kind=incumbent,
        candidate_version=cand_version,
        incumbent_version=champion.version if champion else None,
        demoted=_demoted_versions(lake),
    )
    already = (
        champion is None
        and cand_version is not None
        and (
            (v := promo.alias_version(REGISTERED_MODEL, promo.CHAMPION, settings)) is not None
            and str(v.version) == cand_version
        )
    )
    promoted = promo.apply_decision(decision, REGISTERED_MODEL, settings) if config.promote else False
    eval_tracking.record_decision(lake, decision, eval_id, "promote" if promoted else "keep")

    report_dir = lake.artifact_dir("reports", eval_id)
    png = report.rates_plot_png(summaries)
    (report_dir / "rates.png").write_bytes(png)
    n_heldout = sum(len(bs) for name, bs in sets.items() if judges(name))
    comparison_md = report.comparison_markdown(
        summaries, title=f"{eval_id}: held-out split, {n_heldout} scenarios"
    )
    comparison_md += "\n\n" + "\n\n".join(
        report.comparison_markdown(ss, title=f"{name}: {len(sets[name])} scenarios")
        for name, ss in set_summaries.items()
    )
    decision_md = (
        f"**{'PROMOTED' if promoted else 'not promoted'}**: {decision.reason}\n\nRule: {decision.rule}"
    )
    (report_dir / "comparison.md").write_text(comparison_md + "\n\n" + decision_md + "\n")
    fails = report.failing_transcripts(episodes, "candidate", limit=3)
    transcripts_md = "\n\n".join(report.transcript_markdown(e) for e in fails) or "(no failing episode)"
    (report_dir / "failing_transcripts.md").write_text(transcripts_md)
    # why episodes failed, per set and model (``evaluation.failures``), three transcripts a class
    by_set = report.split_by_set(episodes, set_of)
    detail_rows = report.failure_detail_rows(by_set)
    (report_dir / "failure_details.md").write_text(
        report.failure_details_report(by_set, transcripts_of="candidate")
    )
    links = eval_tracking.log_to_mlflow(
        settings,
        eval_id=eval_id,
        summaries=summaries,
        decision=decision,
        promoted=promoted,
        candidate_run_id=cand_meta.get("mlflow_run_id"),
        specs=specs,
        report_dir=report_dir,
        dagster_run_id=context.run_id,
        started_ms=started_ms,
        set_summaries=set_summaries,
        failure_details=detail_rows,
    )
    rows = report.comparison_rows(summaries)
    metadata = {
        "comparison": _table(rows),
        "comparison_md": dg.MetadataValue.md(comparison_md + "\n\n" + decision_md),
        "rates_plot": dg.MetadataValue.md(png_markdown(png, "rates per model and category")),
        "per_category": _table(report.per_category_rows(summaries)),
        "per_difficulty": _table(report.per_difficulty_rows(summaries)),
        "per_evaluation_set": _table(report.per_set_rows(set_summaries)),
        "failing_transcripts": dg.MetadataValue.md(transcripts_md),
        "failure_details": _table(detail_rows),
        "eval_id": dg.MetadataValue.text(eval_id),
        "candidate": dg.MetadataValue.text(f"{cand_key.to_user_string()}: {specs[0].describe()}"),
        "candidate_version": dg.MetadataValue.text(cand_version or "unregistered"),
        "champion_version": dg.MetadataValue.text(
            champion.version if champion is not None and champion.version is not None else "none"
        ),
        "scenarios": dg.MetadataValue.int(n_heldout),
        **{f"scenarios: {name}": dg.MetadataValue.int(len(bs)) for name, bs in sets.items()},
        **{
            f"{name}: {s.model} clean": dg.MetadataValue.float(s.rates["clean"].rate)
            for name, ss in set_summaries.items()
            for s in ss
        },
        "dagster/row_count": dg.MetadataValue.int(len(episodes)),
        "promoted": dg.MetadataValue.bool(promoted),
        "mlflow_evaluation_run": dg.MetadataValue.url(links["evaluation_run_link"]),
        "sampling": dg.MetadataValue.json(summaries[0].sampling),
        **{f"{s.model}_clean": dg.MetadataValue.float(s.rates["clean"].rate) for s in summaries},
    }
    check = promotion_check(decision, promoted=promoted, already=already, applied=config.promote)
    context.log.info(comparison_md + "\n\n" + decision_md)
    return dg.MaterializeResult(
        metadata=metadata, check_results=[check], data_version=dg.DataVersion(eval_id)
    )


def comparison_report_path(lake: Any, eval_id: str) -> Path:
    return lake.artifact_dir("reports", eval_id, create=False) / "comparison.md"


defs = dg.Definitions(assets=[benchmark_results])
