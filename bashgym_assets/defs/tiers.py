"""Stage 3 in Dagster: ``tiered_traces`` per repo (segments, six scores, tiers, manual overrides).

Thin on purpose: segmentation, scoring and tiers live in ``bashgym_assets.quality``. It reads
``redacted_sessions`` only, so nothing unredacted reaches a dataset, and only runs when the blocking
``no_secrets_left`` check on it passed.
"""

from collections import Counter

import dagster as dg

from bashgym_assets.defs.metadata import code_version, counts_table, lake_file_metadata
from bashgym_assets.defs.partitions import repo_partitions
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.lake import atomic_write_bytes
from bashgym_assets.privacy.pipeline import QUARANTINE_SCHEMA, parse_rows
from bashgym_assets.quality.overrides import TIERED_ASSET, load_overrides
from bashgym_assets.quality.report import safety_counts, tier_counts, tier_histogram_png, tier_report_markdown
from bashgym_assets.quality.tiers import tier_sessions, traces_to_table

QUARANTINE = "tiered_traces_quarantine"


@dg.asset(
    partitions_def=repo_partitions,
    deps=["redacted_sessions"],
    group_name="quality",
    kinds={"parquet", "duckdb"},
    code_version=code_version(
        "bashgym_assets.quality.segment",
        "bashgym_assets.quality.metrics",
        "bashgym_assets.quality.tiers",
        "bashgym_assets.quality.safety",
        "bashgym_assets.guardrails.commands",
        "bashgym_assets.guardrails.injection",
    ),
    description="Redacted sessions cut into task segments (new prompt, 5-minute gap, git commit, cwd change), "
    "each scored on the six metrics (success 30%, verification 25%, complexity 15%, length 10%, tool "
    "diversity 10%, efficiency 10%) and tiered gold/silver/bronze/failed; guardrails flag unsafe commands "
    "and prompt-injection markers per step (a penalty; a blocked command makes the segment failed); "
    "manual promotions and demotions (table `tier_overrides`) are applied on every materialization.",
)
def tiered_traces(context: dg.AssetExecutionContext, bashgym: BashgymHome) -> dg.MaterializeResult:
    repo = context.partition_key
    lake = bashgym.lake()
    sessions, bad = parse_rows(lake.read("redacted_sessions", repo).to_pylist())
    overrides = load_overrides(lake.settings)
    traces = tier_sessions(sessions, overrides)
    lake.write(TIERED_ASSET, traces_to_table(traces), repo)
    lake.write(QUARANTINE, [q.model_dump() for q in bad], repo, schema=QUARANTINE_SCHEMA)
    png = tier_histogram_png(traces)
    plot_path = atomic_write_bytes(lake.artifact_dir("tiers", repo) / "tier_histogram.png", png)
    counts = tier_counts(traces)
    safety = safety_counts(traces)
    context.log.info(
        f"{TIERED_ASSET}[{repo}]: {len(traces)} segments from {len(sessions)} sessions: {counts}"
    )
    return dg.MaterializeResult(
        metadata={
            "segments": dg.MetadataValue.int(len(traces)),
            "sessions": dg.MetadataValue.int(len(sessions)),
            **{f"tier_{t}": dg.MetadataValue.int(n) for t, n in counts.items()},
            "overrides_applied": dg.MetadataValue.int(sum(t.override is not None for t in traces)),
            "boundaries": dg.MetadataValue.json(dict(Counter(t.boundary for t in traces))),
            "quarantined": dg.MetadataValue.int(len(bad)),
            "unsafe_blocked_segments": dg.MetadataValue.int(safety["segments_with_blocked_command"]),
            "unsafe_warned_segments": dg.MetadataValue.int(safety["segments_with_warned_command"]),
            "injection_flagged_segments": dg.MetadataValue.int(safety["segments_with_injection_markers"]),
            "guardrail_rules": dg.MetadataValue.json(
                {k[5:]: v for k, v in safety.items() if k.startswith("rule:")}
            ),
            "report": dg.MetadataValue.md(tier_report_markdown(traces, png)),
            "tier_histogram": dg.MetadataValue.path(str(plot_path)),
            "tier_counts": counts_table(counts, "tier", "segments"),
            **lake_file_metadata(lake, TIERED_ASSET, repo),
        }
    )


defs = dg.Definitions(assets=[tiered_traces])
