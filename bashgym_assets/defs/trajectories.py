"""``verified_trajectories``: an operator plays every TRAIN scenario in fresh sandboxes; one row per attempt (kept
and rejected), so the DPO builder can pair pass/fail on the same scenario. Held-out scenarios never get here.

Thin on purpose: operators, episodes and rollouts live in ``bashgym_assets.rollout``.
"""

import dagster as dg

from bashgym_assets import images
from bashgym_assets.defs.metadata import code_version
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.plots import md_table
from bashgym_assets.rollout.episode import ROLLOUT_LIMITS, TRAJECTORY_SCHEMA, EpisodeLimits, limit_field
from bashgym_assets.rollout.rollouts import (
    kept_rate_by_category,
    reject_reason_counts,
    render_transcript,
    run_rollouts,
)
from bashgym_assets.scenarios.bundle import parse_bundle
from bashgym_assets.scenarios.gate import TRAIN, split_for
from bashgym_assets.scenarios.report import bar_chart_md


class RolloutConfig(dg.Config):
    """Which operator plays: ``reference`` (offline default), ``teacher`` (BASHGYM_TEACHER_MODEL through litellm),
    any litellm model string, or ``local:<model folder>`` (+ ``adapter_dir``)."""

    operator: str = "reference"
    api_base: str | None = None
    adapter_dir: str | None = None
    samples: int = 1
    max_parallel: int = 4  # sandboxes at once: Docker-bound, well over serial (benchmarks/bench_gate.py)
    max_turns: int = limit_field(ROLLOUT_LIMITS, "max_turns")
    episode_timeout_s: float = limit_field(ROLLOUT_LIMITS, "episode_timeout_s")
    temperature: float = 0.0
    sample_transcripts: int = 3
    guard: bool = False  # refuse commands the guardrails block (GuardedOperator)
    guard_resamples: int = 0  # ask a sampling operator again this many times before refusing

    def limits(self) -> EpisodeLimits:
        """The rollouts' caps: the two set here over the rest of ``ROLLOUT_LIMITS``."""
        return ROLLOUT_LIMITS.model_copy(
            update={"max_turns": self.max_turns, "episode_timeout_s": self.episode_timeout_s}
        )


@dg.asset(
    group_name="scenarios",
    kinds={"docker", "parquet"},
    code_version=code_version(
        "bashgym_assets.rollout.episode",
        "bashgym_assets.rollout.rollouts",
        "bashgym_assets.rollout.transcript",
    ),
    deps=["gated_scenarios"],
    description="One row per rollout attempt on a train scenario: kept iff terminated, verified by the check on "
    "the final container state, and commands only. Messages are the unscaffolded conversation.",
)
def verified_trajectories(
    context: dg.AssetExecutionContext, config: RolloutConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    settings = bashgym.settings()
    lake = bashgym.lake()
    images.ensure_docker_engine()
    image = bashgym.sandbox_image_tag()
    rows = lake.read_rows("gated_scenarios")
    train = [parse_bundle(r["bundle_json"]) for r in rows if r["split"] == TRAIN]
    held_out = len(rows) - len(train)
    spec, api_base = config.operator, config.api_base
    if spec == "teacher":
        spec, api_base = settings.teacher_model, api_base or settings.teacher_api_base
    kwargs = {}
    if not spec.startswith("local:") and spec != "reference":
        kwargs = {"temperature": config.temperature}
    # lazy: the code location loads without the serving stack; every operator kind, routed: included
    from bashgym_assets.serving.router import make_operator

    operator = make_operator(
        spec,
        api_base=api_base,
        adapter_dir=config.adapter_dir,
        guard=config.guard,
        guard_resamples=config.guard_resamples,
        **kwargs,
    )
    context.log.info(
        f"{operator.name}: {len(train)} train scenarios x {config.samples} samples "
        f"({held_out} held-out scenarios excluded)"
    )

    def progress(done: int, total: int, kept: int) -> None:
        if done % 10 == 0 or done == total:
            context.log.info(f"rolled out {done}/{total}: {kept} kept")

    records = run_rollouts(
        train,
        operator,
        image,
        samples=config.samples,
        max_parallel=config.max_parallel,
        limits=config.limits(),
        on_progress=progress,
    )
    leaked = [r.scenario_id for r in records if split_for(r.scenario_id) != TRAIN]
    if leaked:  # cannot happen (run_rollouts refuses them); checked again where the table is written
        raise dg.Failure(f"held-out scenarios reached trajectories: {leaked[:5]}")
    lake.write("verified_trajectories", [r.model_dump() for r in records], schema=TRAJECTORY_SCHEMA)
    by_cat = kept_rate_by_category(records)
    kept = sum(r.kept for r in records)
    samples = [r for r in records if r.kept][: config.sample_transcripts]
    samples += [r for r in records if not r.kept][:1]
    return dg.MaterializeResult(
        metadata={
            "operator": dg.MetadataValue.text(operator.name),
            "attempts": dg.MetadataValue.int(len(records)),
            "kept": dg.MetadataValue.int(kept),
            "kept_rate": dg.MetadataValue.float(round(kept / len(records), 4) if records else 0.0),
            "train_scenarios": dg.MetadataValue.int(len(train)),
            "held_out_excluded": dg.MetadataValue.int(held_out),
            "rejection_reasons": dg.MetadataValue.json(reject_reason_counts(records)),
            "unsafe_attempts": dg.MetadataValue.int(sum(bool(r.unsafe_blocked) for r in records)),
            "injection_flagged_attempts": dg.MetadataValue.int(sum(bool(r.injection_flags) for r in records)),
            "guard_refusals": dg.MetadataValue.int(getattr(operator, "refusals", lambda: 0)()),
            "kept_rate_by_category": dg.MetadataValue.md(
                md_table(
                    ["category", "attempts", "kept", "verified", "terminated", "commands only", "kept rate"],
                    [
                        [
                            r["category"],
                            r["attempts"],
                            r["kept"],
                            r["verified"],
                            r["terminated"],
                            r["commands_only"],
                            r["kept_rate"],
                        ]
                        for r in by_cat
                    ],
                )
            ),
            "kept_rate_plot": dg.MetadataValue.md(
                bar_chart_md(
                    [r["category"] for r in by_cat],
                    {"kept rate": [r["kept_rate"] for r in by_cat]},
                    f"kept rate by category ({operator.name})",
                    "kept / attempts",
                )
            )
            if by_cat
            else dg.MetadataValue.md("_no attempts_"),
            "mean_turns": dg.MetadataValue.float(
                round(sum(r.n_turns for r in records) / len(records), 2) if records else 0.0
            ),
            "sample_transcripts": dg.MetadataValue.md(
                "\n\n".join(render_transcript(r) for r in samples) or "_none_"
            ),
        }
    )


defs = dg.Definitions(assets=[verified_trajectories])
