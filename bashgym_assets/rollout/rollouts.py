"""Rollouts over train scenarios (stages B to D): N samples each, in parallel sandboxes, one row per attempt.

Held-out scenarios are refused here, by re-deriving the stable split from the id, so no caller can leak one into
training data by passing the wrong list.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from bashgym_assets.rollout import tracing
from bashgym_assets.rollout.episode import EpisodeLimits, TrajectoryRecord, run_episode
from bashgym_assets.rollout.operators import Operator
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.gate import HELD_OUT_FRACTION, TRAIN, split_for


class HeldOutScenarioError(ValueError):
    """A held-out scenario was passed to training rollouts."""


def check_train_only(bundles: Iterable[ScenarioBundle], held_out_fraction: float = HELD_OUT_FRACTION) -> None:
    held = [b.id for b in bundles if split_for(b.id, held_out_fraction) != TRAIN]
    if held:
        raise HeldOutScenarioError(
            f"{len(held)} held-out scenario(s) passed to rollouts: {', '.join(held[:5])}"
        )


def run_rollouts(
    bundles: Iterable[ScenarioBundle],
    operator: Operator,
    image: str | None,
    samples: int = 1,
    max_parallel: int = 2,
    limits: EpisodeLimits | None = None,
    held_out_fraction: float = HELD_OUT_FRACTION,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> list[TrajectoryRecord]:
    """Every (train scenario, sample) attempt as a ``TrajectoryRecord``, kept or rejected.

    ``on_progress(done, total, kept)`` is called as attempts finish (from the pool's threads, one at a time), so a
    long rollout shows n/N where the user is looking."""
    items = list(bundles)
    check_train_only(items, held_out_fraction)
    jobs = [(bundle, i) for bundle in items for i in range(samples)]
    lock = threading.Lock()
    tally = {"done": 0, "kept": 0}

    def one(job: tuple[ScenarioBundle, int]) -> TrajectoryRecord:
        bundle, index = job
        record = run_episode(bundle, operator, image, split=TRAIN, sample_index=index, limits=limits)
        if on_progress is not None:
            with lock:
                tally["done"] += 1
                tally["kept"] += bool(record.kept)
                on_progress(tally["done"], len(jobs), tally["kept"])
        return record

    if max_parallel <= 1:
        records = [one(j) for j in jobs]
    else:
        from bashgym_assets.sandbox import SandboxPool

        records = list(SandboxPool(max_parallel).map(one, jobs))
    if (sink := tracing.sink()) is not None:  # run_episode buffered one trace per attempt: write the rest now
        sink.flush()
    return records


def kept_rate_by_category(records: Iterable[TrajectoryRecord]) -> list[dict[str, Any]]:
    """Rows for a metadata table: attempts, kept, verified, terminated, clean, kept rate per category."""
    by_cat: dict[str, list[TrajectoryRecord]] = defaultdict(list)
    for r in records:
        by_cat[r.category].append(r)
    rows = []
    for cat in sorted(by_cat):
        rs = by_cat[cat]
        kept = sum(r.kept for r in rs)
        rows.append(
            {
                "category": cat,
                "attempts": len(rs),
                "kept": kept,
                "verified": sum(r.verified for r in rs),
                "terminated": sum(r.terminated for r in rs),
                "commands_only": sum(r.commands_only for r in rs),
                "kept_rate": round(kept / len(rs), 3) if rs else 0.0,
            }
        )
    return rows


def reject_reason_counts(records: Iterable[TrajectoryRecord]) -> dict[str, int]:
    return dict(Counter(r.reject_reason for r in records if not r.kept))


def render_transcript(record: TrajectoryRecord, max_chars: int = 2000) -> str:
    """A markdown view of one attempt, for asset metadata."""

    def fence_safe(text: str) -> str:
        return text.replace("`" * 3, "'" * 3)

    lines = [
        f"**{record.scenario_id}** ({record.category}, d{record.difficulty}) by `{record.operator}`: "
        f"{'kept' if record.kept else 'rejected: ' + record.reject_reason}",
        "",
        "```",
    ]
    for m in record.messages:
        prefix = {"system": "# ", "user": "", "assistant": "$ "}.get(m.role, "")
        lines.append("\n".join(prefix + fence_safe(line) for line in m.content.splitlines()))
    body = "\n".join(lines)
    if len(body) > max_chars:
        body = body[:max_chars] + "\n..."
    return body + "\n```"
