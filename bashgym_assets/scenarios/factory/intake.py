"""The factory's tasks as gate candidates: read back from the lake (``generated_scenarios``), re-validated.

Read back rather than re-drawn, so the gate certifies exactly the tasks the factory recorded (with their family,
split and similarity report), whatever code version draws next. A row that no longer validates is quarantined with
its reason; the others go on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from typing import Any

from bashgym_assets.scenarios.bundle import BundleError, ScenarioBundle, parse_bundle
from bashgym_assets.scenarios.factory.split import is_held_out_family

ASSET = "generated_scenarios"


def generated_candidates(
    lake: Any,
    per_family: int | None = None,
    at_most: int | None = None,
    train_families: Collection[str] | None = None,
) -> tuple[list[ScenarioBundle], list[BundleError]]:
    """Every family partition's tasks (or the first ``per_family`` of each; 0: none), in family order; with
    ``at_most``, that many taken round-robin across families (a smoke run still sees every category it can).
    ``train_families``: of the train families only these (a learning-study profile trains on a few); the held-out
    families are always taken, since they are the ``unseen`` set and never train."""
    if per_family == 0 or at_most == 0 or not lake.partitions(ASSET):
        return [], []
    rows = lake.read_all(ASSET, columns=["scenario_id", "family", "category", "bundle_json"]).to_pylist()
    by_family: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        family = row.get("family") or row.get("_partition") or ""
        if train_families is None or family in train_families or is_held_out_family(family):
            by_family[family].append(row)
    families = sorted(by_family)
    if at_most is not None:  # categories in turn: the first family of every category, then the second ...
        rank: dict[str, int] = {}
        seen: dict[str, int] = defaultdict(int)
        for f in families:
            category = by_family[f][0].get("category") or ""
            rank[f] = seen[category]
            seen[category] += 1
        families.sort(key=lambda f: (rank[f], by_family[f][0].get("category") or "", f))
    queues = [by_family[f][:per_family] if per_family else by_family[f] for f in families]
    if at_most is not None:
        picked: list[dict[str, Any]] = []
        depth = 0
        while len(picked) < at_most and any(depth < len(q) for q in queues):
            picked.extend(q[depth] for q in queues if depth < len(q))
            depth += 1
        queues = [picked[:at_most]]
    bundles: list[ScenarioBundle] = []
    errors: list[BundleError] = []
    for queue in queues:
        for row in queue:
            family = row.get("family") or row.get("_partition") or ""
            try:
                bundles.append(parse_bundle(row["bundle_json"], source=f"factory:{family}"))
            except (ValueError, TypeError) as exc:  # parse_bundle names the field
                errors.append(
                    BundleError(source=f"{ASSET}[{family}] {row.get('scenario_id')}", reason=str(exc)[:500])
                )
    return bundles, errors
