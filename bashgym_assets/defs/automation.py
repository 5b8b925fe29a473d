"""Declarative automation: how a new trace file becomes a promoted champion without a click.

The chain, and what moves each link:

* new or appended trace file -> ``trace_files_sensor`` adds the repository partition and runs ``ingest_repo_job``
  (raw_sessions -> redacted_sessions -> tiered_traces) for that partition only;
* an updated upstream partition -> ``sft_dataset`` / ``dpo_dataset`` (automation condition ``DOWNSTREAM``);
* the nightly tick -> ``nightly_retraining`` trains only when a dataset's version changed since the last adapter
  (a schedule, not a condition: it must say *why* it skipped, with both versions, and choose SFT and/or DPO);
* a new adapter -> ``student_rollouts`` (its failures feed the next ``dpo_dataset``) and ``benchmark_results``,
  whose check applies the promotion rule.

Why automation conditions rather than asset sensors: they are evaluated against the asset graph itself (across
both code locations), wait for in-flight upstream runs, and record per asset why it was or was not requested,
which the UI shows on each asset's Automation tab. One automation-condition sensor per code location runs them;
both are on by default.
"""

from __future__ import annotations

import dagster as dg

#: Eager, but not held back by an upstream asset that was never materialized: the datasets must build from the
#: traces alone (no scenarios gated yet), and the evaluation must run for an SFT adapter when no DPO adapter exists.
DOWNSTREAM = (
    dg.AutomationCondition.eager()
    .without(~dg.AutomationCondition.any_deps_missing())
    .with_label("eager: an upstream partition updated (missing upstreams do not block)")
)


def automation_sensor(location: str) -> dg.AutomationConditionSensorDefinition:
    """The location's automation-condition sensor, running from the first start of the daemon."""
    return dg.AutomationConditionSensorDefinition(
        f"{location}_automation",
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
        description=f"Evaluates the automation conditions of the {location} code location's assets (datasets "
        "after new traces, evaluation and student attempts after a new adapter).",
    )
