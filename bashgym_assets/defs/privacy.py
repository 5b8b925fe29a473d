"""Stage 2 in Dagster: ``redacted_sessions`` per repo and the blocking check that re-scans it.

Thin on purpose: detection and replacement live in ``bashgym_assets.privacy``.
"""

import warnings
from collections import Counter

import dagster as dg
from pydantic import Field

from bashgym_assets.defs.metadata import code_version, lake_file_metadata, table
from bashgym_assets.defs.partitions import repo_partitions
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.privacy.pipeline import QUARANTINE, redact_rows, scan_sessions
from bashgym_assets.privacy.redactor import Redactor
from bashgym_assets.sessions import sessions_from_table

REDACTED = "redacted_sessions"


class RedactionConfig(dg.Config):
    disable_detectors: list[str] = Field(
        default_factory=list,
        description="Detector names to switch off when redacting (debugging only; the blocking check always "
        "scans with every detector, so anything this lets through stops the run).",
    )
    use_installed_spacy_model: bool = Field(
        False,
        description="Also detect names and places with a spaCy English model if the user installed one "
        "(en_core_web_sm/md/lg/trf); nothing is downloaded.",
    )


@dg.asset(
    partitions_def=repo_partitions,
    deps=["raw_sessions"],
    group_name="privacy",
    kinds={"parquet", "presidio"},
    code_version=code_version(
        "bashgym_assets.privacy.redactor",
        "bashgym_assets.privacy.detectors",
        "bashgym_assets.privacy.decoys",
        "bashgym_assets.privacy.urls",
        "bashgym_assets.privacy.pipeline",
    ),
    description="raw_sessions with secrets and personal data replaced by typed placeholders that are consistent "
    "within a session (<EMAIL_1> is the same address everywhere). presidio recognizers offline + "
    "secret detectors (cloud/SaaS keys, JWTs, private keys, credentials, entropy, user names).",
)
def redacted_sessions(
    context: dg.AssetExecutionContext, config: RedactionConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    repo = context.partition_key
    lake = bashgym.lake()
    rows = lake.read("raw_sessions", repo).to_pylist()
    result = redact_rows(
        rows, Redactor(disabled=config.disable_detectors, use_installed_ner=config.use_installed_spacy_model)
    )
    lake.write(REDACTED, result.table(), repo)
    lake.write(QUARANTINE, result.quarantine_table(), repo)
    by_entity = result.by_entity
    mb = result.bytes_scanned / 1e6
    context.log.info(
        f"{REDACTED}[{repo}]: {len(result.sessions)} sessions, {sum(by_entity.values())} spans "
        f"replaced, {len(result.quarantine)} quarantined, {mb:.2f} MB in {result.seconds:.2f}s"
    )
    per_session = sorted(result.reports, key=lambda r: -sum(r.by_entity.values()))[:10]
    return dg.MaterializeResult(
        metadata={
            "sessions": dg.MetadataValue.int(len(result.sessions)),
            "sessions_with_findings": dg.MetadataValue.int(sum(1 for r in result.reports if r.by_entity)),
            "spans_replaced": dg.MetadataValue.int(sum(by_entity.values())),
            "fields_scanned": dg.MetadataValue.int(sum(r.fields_scanned for r in result.reports)),
            "fields_changed": dg.MetadataValue.int(sum(r.fields_changed for r in result.reports)),
            "mb_scanned": dg.MetadataValue.float(round(mb, 3)),
            "mb_per_s": dg.MetadataValue.float(round(mb / result.seconds, 3) if result.seconds else 0.0),
            "quarantined": dg.MetadataValue.int(len(result.quarantine)),
            "disabled_detectors": dg.MetadataValue.json(config.disable_detectors),
            "by_entity": (
                table(["placeholder type", "spans"], [[k, v] for k, v in by_entity.most_common()])
                if by_entity
                else dg.MetadataValue.md("_nothing to redact_")
            ),
            "top_sessions": (
                table(
                    ["session", "spans", "distinct values", "fields changed"],
                    [
                        [r.session_id, sum(r.by_entity.values()), r.distinct_values, r.fields_changed]
                        for r in per_session
                    ],
                )
                if per_session
                else dg.MetadataValue.md("_no sessions_")
            ),
            "quarantine": (
                table(
                    ["session", "stage", "reason"],
                    [[q.session_id, q.stage, q.reason[:120]] for q in result.quarantine[:20]],
                )
                if result.quarantine
                else dg.MetadataValue.md(f"_nothing quarantined (table `{QUARANTINE}`)_")
            ),
            **lake_file_metadata(lake, REDACTED, repo),
        }
    )


def _no_secrets_left(context: dg.AssetCheckExecutionContext, bashgym: BashgymHome) -> dg.AssetCheckResult:
    repo = context.partition_key
    sessions = sessions_from_table(bashgym.lake().read(REDACTED, repo))
    findings = scan_sessions(sessions, Redactor())
    kinds = Counter(f.entity for f in findings)
    rows = [[f.session_id, f.field, f.entity, f.detector, f.preview] for f in findings[:25]]
    return dg.AssetCheckResult(
        passed=not findings,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "sessions_scanned": dg.MetadataValue.int(len(sessions)),
            "findings": dg.MetadataValue.int(len(findings)),
            "by_entity": dg.MetadataValue.json(dict(kinds)),
            "detail": (
                table(["session", "field", "entity", "detector", "preview"], rows)
                if rows
                else dg.MetadataValue.md("_clean_")
            ),
        },
        description=None if not findings else f"{len(findings)} secret/PII spans survived redaction",
    )


# Partitioned asset checks are flagged "preview" in Dagster 1.13; they are what lets the check scan the very
# partition the run wrote, so we use them and keep the warning out of every import.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", category=dg.PreviewWarning)
    no_secrets_left = dg.asset_check(
        name="no_secrets_left",
        asset=redacted_sessions,
        partitions_def=repo_partitions,
        blocking=True,
        description="Re-scans every field of redacted_sessions with every detector; anything still found fails the "
        "check with severity ERROR, which stops tiered_traces (and everything after it) in the same run.",
    )(_no_secrets_left)


defs = dg.Definitions(assets=[redacted_sessions], asset_checks=[no_secrets_left])
