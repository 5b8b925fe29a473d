"""GPU location: ``grpo_adapter``, reinforcement learning with verifiable rewards on live sandbox episodes.

Thin: the rollout, the reward and the trainer are ``bashgym_assets.training.grpo``. This module picks the train
scenarios (held-out ones never reach training), starts from the newest SFT adapter, trains inside an MLflow run
that receives every step's reward curve live, registers the adapter like the SFT one (a version of
``bashgym-operator``, alias ``candidate``, so ``benchmark_results`` evaluates it next) and reports the reward
curve, the groups and a transcript.
"""

import hashlib
from pathlib import Path
from typing import Any

import dagster as dg

from bashgym_assets import images
from bashgym_assets.defs.metadata import code_version, gated_scenario_rows, table
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.defs.training import (
    adapter_run_name,
    adapter_run_tags,
    base_model,
    latest_materialization,
    meta_value,
    register_and_report,
    sft_adapter,
    train_live,
)
from bashgym_assets.plots import png_markdown
from bashgym_assets.training import base_model as bm
from bashgym_assets.training import registry
from bashgym_assets.training.grpo.reward import RewardSpec
from bashgym_assets.training.grpo.sampler import GroupRecord
from bashgym_assets.training.grpo.settings import GRPOHyperparams, GRPOSettings
from bashgym_assets.training.grpo.train import (
    GRPORun,
    grpo_train_config,
    progress_line,
    reward_curve_png,
    train_bundles,
    train_grpo,
    transcript_markdown,
)
from bashgym_assets.training.trainer import TrainConfig

GATED_SCENARIOS = dg.AssetKey("gated_scenarios")


class GRPORunConfig(dg.Config, GRPOSettings, GRPOHyperparams):
    """Launchpad settings of a GRPO run: what it plays (``GRPOSettings``, the trainer's own fields and defaults:
    group size, groups per step, episode caps, sampling, the difficulty ladder), how it trains (``GRPOHyperparams``,
    the trainers' shared fields: steps, learning rate, precision, checkpoints) and is named."""

    max_scenarios: int | None = None
    categories: list[str] = []
    max_difficulty: int | None = None
    seed: int = 0
    run_name: str | None = None
    register_as: str | None = None


def _settings(cfg: GRPORunConfig) -> GRPOSettings:
    return GRPOSettings.model_validate(cfg.model_dump(include=set(GRPOSettings.model_fields)))


def _hyperparams(cfg: GRPORunConfig) -> GRPOHyperparams:
    return GRPOHyperparams.model_validate(cfg.model_dump(include=set(GRPOHyperparams.model_fields)))


@dg.asset(
    group_name="training",
    pool="gpu",
    kinds={"pytorch", "mlflow", "docker"},
    code_version=code_version(
        "bashgym_assets.training.grpo",
        "bashgym_assets.training.trainer",
        "bashgym_assets.evaluation.runner",
        "bashgym_assets.rollout.episode",
    ),
    deps=[GATED_SCENARIOS, base_model, sft_adapter],
    description="GRPO from the newest SFT adapter on live sandbox episodes of the TRAIN scenarios: groups of "
    "sampled episodes per scenario, the scenario's check as the reward (shaped by failed commands, "
    "prose and turns; hacks earn nothing), per-step reward curves live in MLflow; registered as a "
    "candidate version of bashgym-operator.",
)
def grpo_adapter(
    context: dg.AssetExecutionContext, config: GRPORunConfig, bashgym: BashgymHome
) -> dg.MaterializeResult:
    lake = bashgym.lake()
    settings = bashgym.settings()
    gated = gated_scenario_rows(lake)
    bundles = train_bundles(
        gated, limit=config.max_scenarios, categories=config.categories, max_difficulty=config.max_difficulty
    )
    if not bundles:
        raise dg.Failure("no admitted train scenario to play (gated_scenarios has none)")
    sft_mat = latest_materialization(context.instance, sft_adapter.key)
    sft_dir = meta_value(sft_mat, "adapter_dir")
    if not sft_dir or not Path(sft_dir).exists():
        raise dg.Failure("no SFT adapter on disk: materialize sft_adapter first")
    ids = "\n".join(b.id + ":" + b.content_hash() for b in bundles)
    scenario_version = hashlib.sha256(ids.encode()).hexdigest()[:16]
    lineage = {
        "dataset": "gated_scenarios",
        "dataset_version": scenario_version,
        "dataset_scenarios": str(len(bundles)),
        "sft_adapter": str(sft_dir),
        "sft_model_uri": str(meta_value(sft_mat, "model_uri")),
    }
    base = bm.resolve_base_model(settings, prepare=True)
    run_name = adapter_run_name("grpo", config, scenario_version + Path(sft_dir).name)
    cfg = TrainConfig(
        base_model=base,
        output_dir=str(lake.artifact_dir("adapters", run_name, create=False)),
        checkpoint_dir=str(lake.artifact_dir("checkpoints", run_name, create=False)),
        run_name=run_name,
        seed=config.seed,
        **_hyperparams(config).model_dump(),
    )
    run_settings = _settings(config)
    cfg = grpo_train_config(cfg, run_settings)  # one group per micro-batch: logged as it trains
    images.ensure_docker_engine()
    image = bashgym.sandbox_image_tag()
    context.log.info(
        f"grpo {run_name}: {len(bundles)} train scenarios, {config.max_steps} steps x "
        f"{config.scenarios_per_step} groups of {config.num_generations}, from {sft_dir}"
    )
    held: dict[str, GRPORun] = {}

    def train(on_log: Any) -> Any:
        held["run"] = train_grpo(
            cfg, run_settings, bundles, str(sft_dir), image, on_log=on_log, progress=context.log.info
        )
        return held["run"].result

    rows = [
        {"scenario_id": b.id, "category": b.category, "difficulty": b.difficulty, "split": "train"}
        for b in bundles
    ]
    result, run_id = train_live(
        context,
        bashgym,
        "grpo",
        run_name,
        adapter_run_tags(context, base, lineage),
        train,
        rows,
        line=progress_line,
    )
    run = held["run"]
    report_dir = lake.artifact_dir("reports", run_name)
    png = reward_curve_png(run.steps, report_dir / "reward.png", title=f"grpo {run_name}")
    groups_md = _groups_markdown(run.groups)
    (report_dir / "groups.md").write_text(groups_md)
    transcript = "\n\n---\n\n".join(transcript_markdown(o) for o in run.transcripts[-2:]) or "(none)"
    (report_dir / "transcripts.md").write_text(transcript)
    client = registry.client(settings)
    for path in (png, report_dir / "groups.md", report_dir / "transcripts.md"):
        client.log_artifact(run_id, str(path))
    from mlflow.entities import Param

    client.log_batch(
        run_id, params=[Param(f"grpo_{k}", str(v)) for k, v in run_settings.model_dump().items()]
    )
    done = register_and_report(
        context, bashgym, "grpo", run_name, cfg, result, lineage, base, config.register_as, run_id
    )
    steps = run.steps
    metadata = {
        **(done.metadata or {}),  # (register_and_report always sets it; Dagster types it optional)
        "reward_curve": dg.MetadataValue.md(png_markdown(png, "GRPO mean reward and success rate per step")),
        "steps_table": table(
            [
                "step",
                "reward_mean",
                "success_rate",
                "mean_turns",
                "informative_frac",
                "episodes",
                "episodes_per_min",
                "hacks",
                "infra_errors",
            ],
            [
                [
                    s.step,
                    s.reward_mean,
                    s.success_rate,
                    s.mean_turns,
                    s.informative_frac,
                    s.episodes,
                    s.episodes_per_min,
                    s.hacks,
                    s.infra_errors,
                ]
                for s in steps
            ],
        ),
        "groups": table(
            ["step", "scenario_id", "n", "passed", "kind", "mean_reward", "reward_spread", "hacks"],
            [
                [g.step, g.scenario_id, g.n, g.passed, g.kind, g.mean_reward, g.reward_spread, g.hacks]
                for g in run.groups
            ],
        ),
        "groups_summary": dg.MetadataValue.md(groups_md),
        "transcript": dg.MetadataValue.md(transcript),
        "train_scenarios": dg.MetadataValue.int(len(bundles)),
        "episodes": dg.MetadataValue.int(int(result.extra.get("episodes", 0))),
        "episodes_per_min": dg.MetadataValue.float(float(result.extra.get("episodes_per_min", 0.0))),
        "first_reward_mean": dg.MetadataValue.float(float(steps[0].reward_mean if steps else 0.0)),
        "last_reward_mean": dg.MetadataValue.float(float(steps[-1].reward_mean if steps else 0.0)),
        "informative_frac": dg.MetadataValue.float(float(result.extra.get("informative_frac", 0.0))),
        "reward": dg.MetadataValue.md(_reward_markdown()),
    }
    return dg.MaterializeResult(metadata=metadata, data_version=done.data_version)


def _groups_markdown(groups: list[GroupRecord]) -> str:
    """How many groups could teach anything: all-pass / all-fail groups carry no success signal."""
    kinds: dict[str, int] = {}
    for g in groups:
        kinds[g.kind] = kinds.get(g.kind, 0) + 1
    no_signal = sorted({g.scenario_id for g in groups if g.kind in ("all_pass", "all_fail")})
    lines = ["| kind | groups |", "|---|---|"] + [f"| {k} | {v} |" for k, v in sorted(kinds.items())]
    lines.append("")
    lines.append(
        f"Scenarios with an all-pass or all-fail group (no success signal): "
        f"{', '.join(no_signal[:30]) or 'none'}{' ...' if len(no_signal) > 30 else ''}"
    )
    return "\n".join(lines)


def _reward_markdown() -> str:
    r = RewardSpec()
    return (
        f"verified: +{r.success}; costs: {r.failed_command}/failed command (cap {r.failed_command_cap}), "
        f"{r.prose_turn}/prose turn (cap {r.prose_cap}), {r.extra_turn}/turn beyond the reference's length "
        f"(cap {r.extra_turn_cap}), {r.unterminated} when it never typed exit; all costs capped at "
        f"{r.max_cost} (a pass always beats a fail); reward hacking: {r.hack}; infrastructure failure: "
        "unscorable (no advantage)."
    )


defs = dg.Definitions(assets=[grpo_adapter])
