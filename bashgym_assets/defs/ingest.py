"""Stage 1 in Dagster: ``raw_sessions`` per repo, the sensor on the trace folders, and its job.

Thin on purpose: parsing, repo detection and scanning live in ``bashgym_assets.ingest``.
"""

import dagster as dg

from bashgym_assets.defs.metadata import code_version, lake_file_metadata, table
from bashgym_assets.defs.partitions import REPO_PARTITIONS, repo_partitions
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.ingest.pipeline import (
    QUARANTINE,
    RAW_SESSIONS,
    IngestReport,
    cursor_store,
    ingest_repo,
    not_yet_ingested,
)
from bashgym_assets.ingest.repos import NO_REPO_KEY
from bashgym_assets.ingest.scan import run_key, scan
from bashgym_assets.plots import figure_markdown, md_table

#: What a sensor-triggered run materialises for a changed repo: the whole per-repo chain, so new traces reach
#: the tiers (and the blocking secret check between them) without anyone clicking.
INGEST_SELECTION = dg.AssetSelection.assets("raw_sessions", "redacted_sessions", "tiered_traces")

trace_files = dg.AssetSpec(
    "trace_files",
    group_name="ingest",
    kinds={"file"},
    description="Agent session logs in the watched folders (BASHGYM_TRACE_DIRS: ~/.claude/projects and the "
    "live-capture folder). Read, never modified.",
)


def _tools_plot(report: IngestReport) -> str:
    """A bar chart of tool calls (and failures) as an embedded PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = report.tools.most_common(12)
    fig, ax = plt.subplots(figsize=(6, 2.8), dpi=90)
    ax.barh([t for t, _ in top][::-1], [n for _, n in top][::-1], color="#4c72b0")
    ax.set_xlabel("tool calls")
    ax.set_title(f"raw_sessions[{report.repo}]: {report.sessions} sessions, {report.steps} steps")
    fig.tight_layout()
    return figure_markdown(fig, "tools")


def _preview(report: IngestReport) -> str:
    parts = []
    for s in report.preview:
        task = next((p.text for p in s.prompts if p.kind in ("user", "slash_command")), "")
        parts.append(
            f"**{s.session_id}** ({s.source_format}, {s.model or 'model?'}, {len(s.steps)} steps)  \n"
            f"task: {task[:160]!r}"
        )
        rows = [
            [st.index, st.tool_name, (st.command or st.input)[:70], st.exit_code, st.success]
            for st in s.steps[:6]
        ]
        if rows:
            parts.append(md_table(["#", "tool", "command / input", "exit", "ok"], rows))
    return "\n\n".join(parts) or "_no sessions_"


def report_metadata(report: IngestReport) -> dict[str, dg.MetadataValue]:
    quarantine_rows = [
        [q.file.rsplit("/", 1)[-1], q.line, q.reason, q.snippet[:60]] for q in report.quarantine[:30]
    ]
    meta: dict[str, dg.MetadataValue] = {
        "sessions": dg.MetadataValue.int(report.sessions),
        "steps": dg.MetadataValue.int(report.steps),
        "failed_steps": dg.MetadataValue.int(report.failed_steps),
        "user_prompts": dg.MetadataValue.int(report.prompts),
        "files_parsed": dg.MetadataValue.int(report.files_parsed),
        "carried_over_sessions": dg.MetadataValue.int(report.carried_over),
        "duplicate_sessions_dropped": dg.MetadataValue.int(report.duplicates_dropped),
        "mb_read": dg.MetadataValue.float(round(report.bytes_read / 1e6, 3)),
        "seconds": dg.MetadataValue.float(round(report.seconds, 3)),
        "date_range": dg.MetadataValue.text(
            f"{report.first:%Y-%m-%d %H:%M} .. {report.last:%Y-%m-%d %H:%M} UTC"
            if report.first and report.last
            else "-"
        ),
        "tools": table(["tool", "calls"], [[t, n] for t, n in report.tools.most_common()] or [["(none)", 0]]),
        "formats": dg.MetadataValue.json(dict(report.formats)),
        "skipped_line_types": dg.MetadataValue.json(dict(report.skipped_types)),
        "quarantined": dg.MetadataValue.int(len(report.quarantine)),
        "quarantine": (
            table(["file", "line", "reason", "snippet"], quarantine_rows)
            if quarantine_rows
            else dg.MetadataValue.md(f"_nothing quarantined (table `{QUARANTINE}`)_")
        ),
        "preview": dg.MetadataValue.md(_preview(report)),
    }
    if report.steps:
        meta["tools_plot"] = dg.MetadataValue.md(_tools_plot(report))
    return meta


@dg.asset(
    partitions_def=repo_partitions,
    deps=[trace_files],
    group_name="ingest",
    kinds={"parquet", "duckdb"},
    code_version=code_version(
        "bashgym_assets.ingest.pipeline",
        "bashgym_assets.ingest.claude_code",
        "bashgym_assets.ingest.bashgym_trace",
        "bashgym_assets.ingest.hook_capture",
        "bashgym_assets.ingest.base",
    ),
    description="Every agent session found under the trace folders, in the canonical schema "
    "(bashgym_assets.sessions), one dynamic partition per repository (catch-all: "
    f"`{NO_REPO_KEY}`). Bad files/lines go to the `{QUARANTINE}` table with their reason.",
)
def raw_sessions(context: dg.AssetExecutionContext, bashgym: BashgymHome) -> dg.MaterializeResult:
    repo = context.partition_key
    settings = bashgym.settings()
    report = ingest_repo(bashgym.lake(), settings.trace_dirs, repo)
    context.log.info(
        f"raw_sessions[{repo}]: {report.sessions} sessions, {report.steps} steps, "
        f"{len(report.quarantine)} quarantined, {report.bytes_read / 1e6:.1f} MB in {report.seconds:.1f}s"
    )
    return dg.MaterializeResult(
        metadata={**report_metadata(report), **lake_file_metadata(bashgym.lake(), RAW_SESSIONS, repo)}
    )


ingest_repo_job = dg.define_asset_job(
    "ingest_repo_job",
    selection=INGEST_SELECTION,
    partitions_def=repo_partitions,
    description="Re-import one repository's sessions (what the trace-file sensor launches).",
)


@dg.sensor(
    job=ingest_repo_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Watches the trace folders; adds a repo partition for each new repository and requests a "
    "run only for repos whose files gained complete lines since they were last ingested.",
)
def trace_files_sensor(context: dg.SensorEvaluationContext, bashgym: BashgymHome) -> dg.SensorResult:
    lake = bashgym.lake()
    store = cursor_store(lake)
    result = scan(bashgym.settings().trace_dirs, store.load(context.cursor))
    known = set(context.instance.get_dynamic_partitions(REPO_PARTITIONS))
    new_keys = [repo for repo in result.repos if repo not in known]
    # new to this cursor but already ingested as they are (by `bashgym demo`, the UI, a sensor run before the
    # cursor was lost): no run, so `make ui` after `make demo` re-ingests nothing
    changed = not_yet_ingested(lake, result.changed, result.cursor.files)
    ingested = len(result.changed) - len(changed)
    requests = [
        dg.RunRequest(
            run_key=run_key(repo, result.cursor, files),
            partition_key=repo,
            tags={"bashgym/changed_files": str(len(files))},
        )
        for repo, files in sorted(changed.items())
    ]
    context.log.info(
        f"scanned {result.files_seen} files in {result.seconds:.2f}s: {len(requests)} repos changed"
        + (f" ({ingested} more already ingested as they are)" if ingested else "")
        + f", {len(result.waiting)} waiting for a complete line, {len(result.removed)} removed"
    )
    already = f"; {ingested} repos already ingested as they are" if ingested else ""
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[repo_partitions.build_add_request(new_keys)] if new_keys else [],
        cursor=store.save(result.cursor),
        skip_reason=None if requests else f"no changed trace files ({result.files_seen} watched{already})",
    )


defs = dg.Definitions(
    assets=[trace_files, raw_sessions], jobs=[ingest_repo_job], sensors=[trace_files_sensor]
)
