"""The student in the loop: the model being trained makes sampled attempts at TRAIN scenarios, and every attempt
becomes a ``TrajectoryRecord`` row (kept iff clean, the reject reason is the evaluator's failure class), so the
DPO builder can pair the student's own failures with a clean trajectory of the same scenario.

The attempts are played by the evaluator's lockstep runner (one batched generation per turn for every live
episode), with sampling (temperature > 0) so that k attempts at one scenario differ. It lives here, beside the
evaluator it reuses, because ``rollout`` must not import a later stage; what it produces is ``rollout``'s row.
Held-out scenarios are refused (``rollout.rollouts.check_train_only``) before any sandbox starts.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bashgym_assets.config import Settings
from bashgym_assets.evaluation import ModelSpec, Sampling, operator_for
from bashgym_assets.evaluation.metrics import INFRASTRUCTURE, OPERATOR_ERROR, EvalEpisode
from bashgym_assets.evaluation.runner import EvalSettings, evaluate
from bashgym_assets.rollout.episode import (
    STUDENT_LIMITS,
    TrajectoryRecord,
    limit_field,
    safety_fields,
    trajectory_id,
)
from bashgym_assets.rollout.operators import Operator
from bashgym_assets.rollout.rollouts import check_train_only
from bashgym_assets.rollout.transcript import COMMAND, EXIT
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.gate import HELD_OUT_FRACTION, TRAIN, split_for

OPERATOR_PREFIX = "student:"
# Rejections that say nothing about the student's behaviour: never the rejected side of a preference pair.
NOT_BEHAVIOUR = (*INFRASTRUCTURE, OPERATOR_ERROR)


class StudentSettings(BaseModel):
    """How the student plays: k samples per scenario at temperature > 0, short episodes (a CPU budget)."""

    samples: int = 2
    temperature: float = 0.8
    top_p: float = 0.95
    seed: int = 0
    max_turns: int = limit_field(STUDENT_LIMITS, "max_turns")
    max_new_tokens: int = 64
    max_context_tokens: int = 2048
    episode_timeout_s: float = limit_field(STUDENT_LIMITS, "episode_timeout_s")
    command_timeout_s: float = limit_field(STUDENT_LIMITS, "command_timeout_s")
    check_timeout_s: float = limit_field(STUDENT_LIMITS, "check_timeout_s")
    # prose/babble twice in a row: the failure is decided, stop paying for tokens
    max_unusable_in_a_row: int = limit_field(STUDENT_LIMITS, "max_unusable_in_a_row")
    max_live: int = 48
    micro_batch: int = 48  # one generate per turn: a CPU pays per decoding step, not per row

    def eval_settings(self) -> EvalSettings:
        return EvalSettings(
            samples=self.samples,
            max_turns=self.max_turns,
            episode_timeout_s=self.episode_timeout_s,
            command_timeout_s=self.command_timeout_s,
            check_timeout_s=self.check_timeout_s,
            max_live=self.max_live,
            max_unusable_in_a_row=self.max_unusable_in_a_row,
        )

    def sampling(self) -> Sampling:
        if self.temperature <= 0:
            raise ValueError(
                "student rollouts sample: temperature must be > 0 (k greedy attempts are identical)"
            )
        return Sampling(
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            max_new_tokens=self.max_new_tokens,
            max_context_tokens=self.max_context_tokens,
            micro_batch=self.micro_batch,
        )


class StudentRun(BaseModel):
    """The rows for the lake and the episodes they came from (for transcripts)."""

    operator: str
    records: list[TrajectoryRecord]
    episodes: list[EvalEpisode]
    wall_s: float


def _stable(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def select_scenarios(
    bundles: Iterable[ScenarioBundle],
    max_scenarios: int | None = None,
    categories: Sequence[str] = (),
    held_out_fraction: float = HELD_OUT_FRACTION,
) -> list[ScenarioBundle]:
    """A deterministic subset of the TRAIN scenarios, spread over the categories: each category's scenarios in a
    stable hash order, taken round-robin across categories (so 24 of 150 still cover every category), then sorted
    by id. Held-out ones are dropped here (and refused again where the episodes run)."""
    by_cat: dict[str, list[ScenarioBundle]] = defaultdict(list)
    for b in bundles:
        if split_for(b.id, held_out_fraction) != TRAIN or (categories and b.category not in categories):
            continue
        by_cat[b.category].append(b)
    queues = [sorted(v, key=lambda b: _stable(b.id)) for _, v in sorted(by_cat.items())]
    picked: list[ScenarioBundle] = []
    limit = max_scenarios if max_scenarios and max_scenarios > 0 else sum(len(q) for q in queues)
    while len(picked) < limit and any(queues):
        for q in queues:
            if q and len(picked) < limit:
                picked.append(q.pop(0))
    return sorted(picked, key=lambda b: b.id)


def to_record(e: EvalEpisode, operator: str) -> TrajectoryRecord:
    """One evaluator episode as a trajectory row: kept iff clean (and no blocked command: ``unsafe_command``),
    the failure class as the reject reason."""
    kinds = [k for k in e.reply_kinds.split(",") if k]
    safety = safety_fields(list(e.messages))
    unsafe = e.clean and bool(safety["unsafe_blocked"])
    return TrajectoryRecord(
        trajectory_id=trajectory_id(e.scenario_id, operator, e.sample_index),
        scenario_id=e.scenario_id,
        category=e.category,
        difficulty=e.difficulty,
        split=TRAIN,
        operator=operator,
        sample_index=e.sample_index,
        kept=e.clean and not unsafe,
        verified=e.verified,
        terminated=e.terminated,
        commands_only=all(k in (COMMAND, EXIT) for k in kinds),
        reject_reason="unsafe_command" if unsafe else "" if e.clean else e.failure_class,
        n_turns=e.n_turns,
        duration_s=e.wall_s,
        messages=list(e.messages),
        source=e.source,
        **safety,
    )


def run_student(
    spec: ModelSpec,
    bundles: Sequence[ScenarioBundle],
    image: str | None,
    settings: StudentSettings | None = None,
    progress: Callable[[str], None] | None = None,
    held_out_fraction: float = HELD_OUT_FRACTION,
) -> StudentRun:
    """k sampled attempts of the student model at each (train) scenario in real sandboxes, one row per attempt."""
    settings = settings or StudentSettings()
    check_train_only(bundles, held_out_fraction)  # before the model loads
    return attempts(
        operator_for(spec, settings.sampling()),
        spec.label,
        bundles,
        image,
        settings,
        model_ref=spec.describe(),
        progress=progress,
        held_out_fraction=held_out_fraction,
    )


def attempts(
    operator: Operator,
    label: str,
    bundles: Sequence[ScenarioBundle],
    image: str | None,
    settings: StudentSettings | None = None,
    model_ref: str | None = None,
    progress: Callable[[str], None] | None = None,
    held_out_fraction: float = HELD_OUT_FRACTION,
) -> StudentRun:
    """Any operator's attempts (lockstep, ``settings.samples`` each) as rows of operator ``student:<label>``."""
    settings = settings or StudentSettings()
    check_train_only(bundles, held_out_fraction)  # before any sandbox starts
    name = label if label.startswith(OPERATOR_PREFIX) else OPERATOR_PREFIX + label
    result = evaluate(
        operator,
        bundles,
        image,
        settings.eval_settings(),
        label=name,
        model_ref=model_ref or operator.name,
        progress=progress,
        trace_kind="student",
    )
    records = [to_record(e, name) for e in result.episodes]
    return StudentRun(operator=name, records=records, episodes=result.episodes, wall_s=result.summary.wall_s)


def pairable(rows: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], int]:
    """Student rows the DPO builder may use, and how many were dropped: a rejection that was the
    infrastructure's (setup, sandbox) or the generation's doing says nothing about what the student typed."""
    keep, dropped = [], 0
    for r in rows:
        if not r.get("kept") and r.get("reject_reason") in NOT_BEHAVIOUR:
            dropped += 1
            continue
        keep.append(r)
    return keep, dropped


def failure_rows(records: Sequence[TrajectoryRecord]) -> list[dict[str, Any]]:
    """Per failure class: attempts, scenarios, categories (a metadata table)."""
    by_class: dict[str, list[TrajectoryRecord]] = defaultdict(list)
    for r in records:
        if not r.kept:
            by_class[r.reject_reason or "unknown"].append(r)
    total = len(records)
    return [
        {
            "failure_class": c,
            "attempts": len(rs),
            "share": round(len(rs) / total, 3) if total else 0.0,
            "scenarios": len({r.scenario_id for r in rs}),
            "categories": ", ".join(f"{k} {v}" for k, v in Counter(r.category for r in rs).most_common()),
        }
        for c, rs in sorted(by_class.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]


def scenarios_with_failure(records: Sequence[TrajectoryRecord]) -> list[str]:
    return sorted({r.scenario_id for r in records if not r.kept and r.reject_reason not in NOT_BEHAVIOUR})


def failing_examples(run: StudentRun, limit: int = 2) -> list[EvalEpisode]:
    """A few failed episodes of different classes (the most telling first: not babble-only when avoidable)."""
    seen: set[str] = set()
    out: list[EvalEpisode] = []
    for e in run.episodes:
        if e.clean or e.failure_class in NOT_BEHAVIOUR or e.failure_class in seen:
            continue
        seen.add(e.failure_class)
        out.append(e)
        if len(out) >= limit:
            break
    return out


# ---- who the student is ------------------------------------------------------------------------------------------
def champion_spec(
    model_name: str, base: str, cache_dir: Callable[[str], Path], settings: Settings | None = None
) -> ModelSpec | None:
    """The MLflow champion as a local model (its adapter fetched once per version into ``cache_dir(version)``),
    or None when no version holds the alias."""
    from bashgym_assets.evaluation import promotion as promo
    from bashgym_assets.training.registry import download_adapter

    version = promo.alias_version(model_name, promo.CHAMPION, settings)
    if version is None:
        return None
    folder = cache_dir(str(version.version))
    adapter = folder / "adapter"
    if not (adapter / "adapter_config.json").exists():
        adapter = download_adapter(f"models:/{model_name}/{version.version}", folder, settings)
    return ModelSpec(
        label=f"champion-v{version.version}",
        base=base,
        adapter=str(adapter),
        version=str(version.version),
        ref=f"models:/{model_name}/{version.version}",
    )


def adapter_spec(
    label: str, base: str, adapter_dir: str, ref: str | None = None, version: str | None = None
) -> ModelSpec:
    return ModelSpec(label=label, base=base, adapter=adapter_dir, version=version, ref=ref or adapter_dir)


def base_spec(base: str) -> ModelSpec:
    return ModelSpec(label="base", base=base, ref=base)
