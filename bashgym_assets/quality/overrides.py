"""Manual promotion and demotion of traces, kept in the lake so they survive re-materialization.

The decisions live in the unpartitioned lake table ``tier_overrides`` (one row per segment id, the latest decision
wins; visible in DuckDB as a view like every asset). ``tiered_traces`` reads them every time it is materialized,
and :func:`promote_trace` / :func:`demote_trace` also rewrite the already materialized row so the change shows at
once. These plain functions are what the CLI calls.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pyarrow as pa

from bashgym_assets.config import Settings
from bashgym_assets.lake import Lake
from bashgym_assets.quality.tiers import TierOverride, apply_override, traces_from_table, traces_to_table

OVERRIDES_ASSET = "tier_overrides"
TIERED_ASSET = "tiered_traces"
OVERRIDE_SCHEMA = pa.schema(
    [
        ("segment_id", pa.string()),
        ("action", pa.string()),
        ("reason", pa.large_string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
)
_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")


class UnknownTrace(LookupError):
    """The id names no materialized trace."""


def _lake(settings: Settings | None) -> Lake:
    lake = Lake(settings)
    lake.settings.ensure_dirs()
    return lake


def load_overrides(settings: Settings | None = None) -> dict[str, TierOverride]:
    lake = _lake(settings)
    if not lake.exists(OVERRIDES_ASSET):
        return {}
    return {r["segment_id"]: TierOverride.model_validate(r) for r in lake.read_rows(OVERRIDES_ASSET)}


def _save(lake: Lake, overrides: dict[str, TierOverride]) -> None:
    rows = [o.model_dump() for o in sorted(overrides.values(), key=lambda o: o.segment_id)]
    lake.write(OVERRIDES_ASSET, rows, schema=OVERRIDE_SCHEMA)


def _find_partition(lake: Lake, segment_id: str) -> str | None:
    for part in lake.partitions(TIERED_ASSET):
        ids = lake.read(TIERED_ASSET, part, columns=["segment_id"]).column("segment_id").to_pylist()
        if segment_id in ids:
            return part
    return None


def _refresh_row(lake: Lake, partition: str, segment_id: str, override: TierOverride | None) -> str:
    traces = traces_from_table(lake.read(TIERED_ASSET, partition))
    new_tier = ""
    for i, t in enumerate(traces):
        if t.segment_id == segment_id:
            traces[i] = apply_override(t, override)
            new_tier = traces[i].tier
    lake.write(TIERED_ASSET, traces_to_table(traces), partition)
    return new_tier


def set_override(
    segment_id: str, action: str, reason: str, settings: Settings | None = None, require_known: bool = True
) -> TierOverride:
    """Record a decision. ``require_known``: refuse ids that no materialized trace has (typos)."""
    if action not in ("promote", "demote"):
        raise ValueError(f"action must be 'promote' or 'demote', not {action!r}")
    if not _ID.match(segment_id or ""):
        raise ValueError(f"not a trace id: {segment_id!r} (expected something like 'seg-0123456789abcdef')")
    if not reason or not reason.strip():
        raise ValueError("a reason is required: say why this trace should be " + action + "d")
    lake = _lake(settings)
    partition = _find_partition(lake, segment_id)
    if partition is None and require_known:
        known = lake.partitions(TIERED_ASSET)
        raise UnknownTrace(
            f"no trace {segment_id!r} in tiered_traces "
            f"({'partitions: ' + ', '.join(known) if known else 'not materialized yet'})"
        )
    override = TierOverride(
        segment_id=segment_id,
        action=action,  # type: ignore[arg-type]
        reason=reason.strip(),
        created_at=datetime.now(UTC),
    )
    with lake.locked(OVERRIDES_ASSET):  # read-modify-write: a concurrent decision must not be lost
        overrides = load_overrides(lake.settings)
        overrides[segment_id] = override
        _save(lake, overrides)
    if partition is not None:
        _refresh_row(lake, partition, segment_id, override)
    return override


def promote_trace(segment_id: str, reason: str, settings: Settings | None = None) -> TierOverride:
    """Make a trace gold (e.g. a good trace the scores undervalue), recording why."""
    return set_override(segment_id, "promote", reason, settings)


def demote_trace(segment_id: str, reason: str, settings: Settings | None = None) -> TierOverride:
    """Make a trace failed (e.g. it 'passed' but did the wrong thing), recording why."""
    return set_override(segment_id, "demote", reason, settings)


def clear_override(segment_id: str, settings: Settings | None = None) -> bool:
    """Withdraw a decision; the computed tier applies again. Returns whether there was one."""
    lake = _lake(settings)
    with lake.locked(OVERRIDES_ASSET):
        overrides = load_overrides(lake.settings)
        if overrides.pop(segment_id, None) is None:
            return False
        _save(lake, overrides)
    partition = _find_partition(lake, segment_id)
    if partition is not None:
        _refresh_row(lake, partition, segment_id, None)
    return True
