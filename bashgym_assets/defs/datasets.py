"""SFT and DPO datasets (CPU location): built from every repo partition of ``tiered_traces`` plus
``verified_trajectories`` (and, for DPO, the GPU location's ``student_rollouts``), written unpartitioned with their
source columns, guarded by a blocking check that no row derives from or contains a held-out scenario."""

from typing import Any

import dagster as dg
import pyarrow as pa

from bashgym_assets.defs.automation import DOWNSTREAM
from bashgym_assets.defs.metadata import code_version, counts_table, lake_metadata
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.lake import Lake
from bashgym_assets.training_data import build as ds

TIERED_TRACES = dg.AssetKey("tiered_traces")
VERIFIED_TRAJECTORIES = dg.AssetKey("verified_trajectories")
STUDENT_ROLLOUTS = dg.AssetKey("student_rollouts")  # GPU location: the student's own attempts
GATED_SCENARIOS = dg.AssetKey("gated_scenarios")


class SFTDatasetConfig(dg.Config):
    """Short renders: command outputs of trajectories longer than this many characters keep their head, a marker
    and the exit code (``build.shorten_observations``); None keeps them whole."""

    observation_chars: int | None = None
    # False: no rows from agent-session traces (tiered_traces), only verified scenario trajectories (a learning-study
    # profile trains on its task families alone, as the study's arms did)
    include_traces: bool = True


def _rows(lake: Lake, asset: str, partitioned: bool) -> list[dict[str, Any]]:
    """All rows of an upstream table, or none if it was never materialized (a fresh install has no traces)."""
    try:
        table = lake.read_all(asset) if partitioned else lake.read(asset)
    except FileNotFoundError:
        return []
    return table.to_pylist()


def _heldout(lake: Lake) -> list[ds.HeldOut]:
    """Every evaluation task: the pipeline's held-out split and the suites `bashgym suite gate` admitted."""
    from bashgym_assets.scenarios.suite import gated_rows

    return ds.heldout_from_rows(gated_rows(lake))


def _token_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Token counts under the base model's tokenizer when it is prepared (tokenizer only, no weights)."""
    from bashgym_assets.training.base_model import BaseModelError, resolve_base_model

    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(resolve_base_model(prepare=False))
    except (BaseModelError, OSError, ValueError) as exc:
        return {
            "note": f"no tokenizer yet ({exc.__class__.__name__}): materialize base_model for token counts"
        }
    return ds.token_stats(tok, rows)


def _write(lake: Lake, name: str, result: ds.BuildResult, schema: pa.Schema) -> tuple[pa.Table, str]:
    table = pa.Table.from_pylist(result.rows, schema=schema)
    path = lake.write(name, table)
    lake.write(f"{name}_quarantine", [q.model_dump() for q in result.quarantine], schema=ds.QUARANTINE_SCHEMA)
    return table, str(path)


def _sample_md(rows: list[dict[str, Any]], column: str, limit: int = 6) -> str:
    if not rows:
        return "(empty)"
    msgs = rows[0][column]
    return "\n".join(f"- **{m['role']}**: `{m['content'][:160].replace('`', chr(39))}`" for m in msgs[:limit])


def _result(table: pa.Table, path: str, result: ds.BuildResult, sample_column: str) -> dg.MaterializeResult:
    rows = result.rows
    sources: dict[str, int] = {}
    for r in rows:
        key = r.get("repo") or (f"scenario:{r['scenario_id']}" if r.get("scenario_id") else r["source_kind"])
        sources[key] = sources.get(key, 0) + 1
    reasons: dict[str, int] = {}
    for q in result.quarantine:
        reasons[q.reason] = reasons.get(q.reason, 0) + 1
    version = ds.data_version(table)
    return dg.MaterializeResult(
        metadata={
            "rows": dg.MetadataValue.int(table.num_rows),
            "train": dg.MetadataValue.int(sum(r["split"] == "train" for r in rows)),
            "validation": dg.MetadataValue.int(sum(r["split"] == "validation" for r in rows)),
            "quarantined": dg.MetadataValue.int(len(result.quarantine)),
            "counts": counts_table(result.counts, "stage", "rows"),
            "sources": counts_table(dict(sorted(sources.items())), "source", "rows"),
            "quarantine_reasons": counts_table(
                dict(sorted(reasons.items(), key=lambda kv: -kv[1])), "reason", "rows"
            ),
            "tokens": counts_table(_token_stats(rows), "statistic", "value"),
            **lake_metadata(table),
            "sample": dg.MetadataValue.md(_sample_md(rows, sample_column)),
            "path": dg.MetadataValue.path(path),
            "dataset_version": dg.MetadataValue.text(version),
            "load_with": dg.MetadataValue.md(
                f"```python\nfrom bashgym_assets.training_data.build import load_hf_dataset\n"
                f"dd = load_hf_dataset('{path}')\n```"
            ),
        },
        data_version=dg.DataVersion(version),
    )


@dg.asset(
    group_name="datasets",
    kinds={"parquet"},
    deps=[TIERED_TRACES, VERIFIED_TRAJECTORIES, GATED_SCENARIOS],
    code_version=code_version("bashgym_assets.training_data.build", "bashgym_assets.training_data.render"),
    automation_condition=DOWNSTREAM,
    description="SFT examples (chat messages) from gold trace segments (every repo) and kept trajectories, "
    "deduplicated, with a stable train/validation split and a source column per row.",
)
def sft_dataset(
    context: dg.AssetExecutionContext, config: SFTDatasetConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    lake = bashgym.lake()
    result = ds.build_sft(
        _rows(lake, "tiered_traces", True) if config.include_traces else [],
        _rows(lake, "verified_trajectories", False),
        _heldout(lake),
        observation_chars=config.observation_chars,
    )
    table, path = _write(lake, "sft_dataset", result, ds.SFT_SCHEMA)
    context.log.info(f"sft_dataset: {table.num_rows} rows, {len(result.quarantine)} quarantined")
    return _result(table, path, result, "messages")


@dg.asset(
    group_name="datasets",
    kinds={"parquet"},
    deps=[TIERED_TRACES, VERIFIED_TRAJECTORIES, STUDENT_ROLLOUTS, GATED_SCENARIOS],
    code_version=code_version("bashgym_assets.training_data.build", "bashgym_assets.training_data.render"),
    automation_condition=DOWNSTREAM,
    description="DPO pairs on the same task (a clean trajectory of one scenario, from the reference, a teacher or "
    "the student, vs a failed attempt of the same scenario, e.g. the student's own from "
    "student_rollouts; passing vs failed trace segments of one prompt), split at the first assistant "
    "turn where they differ: the shared prefix is the prompt.",
)
def dpo_dataset(context: dg.AssetExecutionContext, bashgym: BashgymHome) -> dg.MaterializeResult:
    from bashgym_assets.evaluation.student import pairable

    lake = bashgym.lake()
    # The student's attempts (absent until student_rollouts ran); infrastructure failures never pair.
    student, infra = pairable(_rows(lake, "student_rollouts", False))
    result = ds.build_dpo(
        _rows(lake, "tiered_traces", True),
        _rows(lake, "verified_trajectories", False) + student,
        _heldout(lake),
    )
    result.counts["student_attempts"] = len(student) + infra
    result.counts["student_infrastructure_failures_dropped"] = infra
    student_ids = {str(t["trajectory_id"]) for t in student}
    result.counts["pairs_with_student_rejected"] = sum(
        r["rejected_source"].rsplit("/", 1)[-1] in student_ids for r in result.rows
    )
    table, path = _write(lake, "dpo_dataset", result, ds.DPO_SCHEMA)
    context.log.info(
        f"dpo_dataset: {table.num_rows} pairs ({result.counts['pairs_with_student_rejected']} with a "
        f"student failure), {len(result.quarantine)} quarantined"
    )
    return _result(table, path, result, "chosen")


def _contamination(lake: Lake, asset: str) -> dg.AssetCheckResult:
    heldout = _heldout(lake)
    rows = _rows(lake, asset, partitioned=False)
    bad = ds.contamination_violations(rows, heldout)
    table = "| row | source | reason |\n|---|---|---|\n" + "\n".join(
        f"| {b['row']} | {b['source']} | {b['reason']} |" for b in bad[:50]
    )
    return dg.AssetCheckResult(
        passed=not bad,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "rows_checked": dg.MetadataValue.int(len(rows)),
            "heldout_scenarios": dg.MetadataValue.int(len(heldout)),
            "violations": dg.MetadataValue.int(len(bad)),
            "details": dg.MetadataValue.md(table if bad else "no held-out task in any row"),
        },
    )


@dg.asset_check(
    asset=sft_dataset,
    blocking=True,
    description="No row derives from or contains the task of a held-out scenario (blocks training).",
)
def sft_dataset_no_heldout(bashgym: BashgymHome) -> dg.AssetCheckResult:
    return _contamination(bashgym.lake(), "sft_dataset")


@dg.asset_check(
    asset=dpo_dataset,
    blocking=True,
    description="No pair derives from or contains the task of a held-out scenario (blocks training).",
)
def dpo_dataset_no_heldout(bashgym: BashgymHome) -> dg.AssetCheckResult:
    return _contamination(bashgym.lake(), "dpo_dataset")


defs = dg.Definitions(
    assets=[sft_dataset, dpo_dataset], asset_checks=[sft_dataset_no_heldout, dpo_dataset_no_heldout]
)
