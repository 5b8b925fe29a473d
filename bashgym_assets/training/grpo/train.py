"""Training: the ``rollout_func`` handed to TRL's ``GRPOTrainer(rollout_func=...)``, the train scenarios,
``train_grpo`` and what reports a run (progress lines, the reward curve plot, transcripts). The only part of the
package that imports TRL (lazily, inside ``train_grpo``); it wires the others together.

One prompt = one train scenario id; the trainer repeats it ``num_generations`` times (the group). The rollout
function plays the whole generation batch (every group of the optimizer step) with ``play_episodes`` and returns
the token ids, ``logprobs`` = None (no vLLM), the ``env_mask`` and the reward keys, which reach the reward
function as keyword arguments.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.training.grpo.episodes import Policy, play_episodes
from bashgym_assets.training.grpo.reward import (
    REWARD_KEYS,
    EpisodeOutcome,
    RewardSpec,
    episode_reward,
    make_reward_func,
)
from bashgym_assets.training.grpo.sampler import (
    GroupRecord,
    InformativeSampler,
    ScenarioBoard,
    StepRecord,
    group_records,
)
from bashgym_assets.training.grpo.settings import GRPOSettings, Progress
from bashgym_assets.training.trainer import (
    LogFn,
    TrainConfig,
    TrainResult,
    history_from_log,
    load_base,
    load_tokenizer,
    pick_device,
    progress_callbacks,
    publish_adapter,
    resume_point,
    run_training,
    trainable_parameters,
    trainer_args,
    without_printer,
)


def _reward(o: EpisodeOutcome) -> float:
    """The reward of a scored episode (the caller kept only those: None is an infrastructure failure)."""
    if o.reward is None:
        raise ValueError(f"episode {o.scenario_id} has no reward: it is not scored")
    return float(o.reward)


# ---- the rollout function -----------------------------------------------------------------------------------------
class ShellRollout:
    """``rollout_func`` for ``GRPOTrainer``: prompts are scenario ids; returns ids, env mask and reward keys, and
    keeps every step's statistics (``steps``, ``groups``) and a few transcripts for the report."""

    def __init__(
        self,
        bundles: Mapping[str, ScenarioBundle],
        image: str | None,
        settings: GRPOSettings,
        reward: RewardSpec | None = None,
        board: ScenarioBoard | None = None,
        progress: Progress | None = None,
        policy_factory: Callable[[Any], Any] | None = None,
    ) -> None:
        self.bundles = dict(bundles)
        self.image = image
        self.settings = settings
        self.reward = reward or RewardSpec()
        self.board = board or ScenarioBoard(sorted(self.bundles))
        self.say = progress or (lambda _m: None)
        self.policy_factory = policy_factory
        self.steps: dict[int, StepRecord] = {}
        self.groups: list[GroupRecord] = []
        self.transcripts: list[EpisodeOutcome] = []
        self.episodes_played = 0
        self.rollout_s = 0.0

    def _policy(self, trainer: Any) -> Policy:
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.policy_factory is not None:
            return self.policy_factory(model)
        s = self.settings
        return Policy(
            model,
            trainer.processing_class,
            max_new_tokens=s.max_new_tokens,
            temperature=s.temperature,
            top_p=s.top_p,
            micro_batch=s.micro_batch,
            # each step's draws reproducible from the run's seed (the continuous decoder's rows draw apart)
            seed=int(getattr(trainer.args, "seed", 0)) * 100_003 + int(trainer.state.global_step),
        )

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any] | None]:
        step = int(trainer.state.global_step) + 1
        bundles = [self.bundles[str(p)] for p in prompts]
        counts: dict[str, int] = {}
        samples = []
        for b in bundles:
            samples.append(counts.get(b.id, 0))
            counts[b.id] = samples[-1] + 1
        t0 = time.monotonic()
        played = play_episodes(
            bundles,
            self._policy(trainer),
            self.image,
            self.settings,
            samples=samples,
            progress=lambda m: self.say(f"step {step} {m}"),
        )
        took = time.monotonic() - t0
        outcomes = [p.outcome for p in played]
        for o in outcomes:
            o.reward = episode_reward(o, self.reward)
        self.record(step, outcomes, took)
        out: dict[str, list[Any] | None] = {
            "prompt_ids": [p.prompt_ids for p in played],
            "completion_ids": [p.completion_ids for p in played],
            "logprobs": None,
            "env_mask": [p.env_mask for p in played],
        }
        for key in REWARD_KEYS:
            out[key] = [getattr(o, key) for o in outcomes]
        return out

    def record(self, step: int, outcomes: list[EpisodeOutcome], took: float) -> StepRecord:
        groups = group_records(step, outcomes)
        self.groups += groups
        self.board.record(outcomes)
        scored = [o for o in outcomes if o.reward is not None]
        n = max(1, len(scored))
        self.episodes_played += len(outcomes)
        self.rollout_s += took
        rec = StepRecord(
            step=step,
            episodes=len(outcomes),
            reward_mean=round(sum(_reward(o) for o in scored) / n, 4),
            success_rate=round(sum(o.verified and not o.hack for o in scored) / n, 4),
            mean_turns=round(sum(o.n_turns for o in scored) / n, 3),
            informative_frac=round(sum(g.kind == "mixed" for g in groups) / max(1, len(groups)), 4),
            difficulty_ceiling=self.board.ceiling or 0,
            zero_spread_frac=round(sum(g.reward_spread == 0 for g in groups) / max(1, len(groups)), 4),
            terminated_rate=round(sum(o.terminated for o in scored) / n, 4),
            hacks=sum(bool(o.hack) for o in outcomes),
            infra_errors=sum(bool(o.infra_error) for o in outcomes),
            rollout_s=round(took, 2),
            episodes_per_min=round(60 * len(outcomes) / took, 2) if took > 0 else 0.0,
        )
        self.steps[step] = rec
        # keep the best and the worst episode of each step (the report shows the last few)
        ranked = sorted(scored, key=_reward)
        self.transcripts += [ranked[-1], ranked[0]] if len(ranked) > 1 else ranked
        self.transcripts = self.transcripts[-6:]
        self.say(
            f"step {step}: {len(outcomes)} episodes in {took:.0f} s, mean reward {rec.reward_mean:+.3f}, "
            f"success {rec.success_rate:.0%}, {rec.mean_turns:.1f} turns, informative groups "
            f"{sum(g.kind == 'mixed' for g in groups)}/{len(groups)}"
            + (f", {rec.hacks} hack(s)" if rec.hacks else "")
            + (f", {rec.infra_errors} infra" if rec.infra_errors else "")
        )
        return rec


# ---- the scenarios it trains on -------------------------------------------------------------------------------
def train_bundles(
    gated_rows: Sequence[Mapping[str, Any]],
    limit: int | None = None,
    categories: Sequence[str] = (),
    max_difficulty: int | None = None,
) -> list[ScenarioBundle]:
    """The admitted TRAIN scenarios of ``gated_scenarios`` (held-out ones never reach training), by id; optionally
    a category subset and a difficulty ceiling (a curriculum starts easy)."""
    import json

    from bashgym_assets.scenarios.gate import TRAIN

    out = []
    for row in gated_rows:
        if row.get("admitted") is False or row.get("split") != TRAIN:
            continue
        bundle = ScenarioBundle.model_validate(json.loads(row["bundle_json"]))
        if (categories and bundle.category not in categories) or (
            max_difficulty is not None and bundle.difficulty > max_difficulty
        ):
            continue
        out.append(bundle)
    out.sort(key=lambda b: b.id)
    return out[:limit] if limit else out


# ---- training -----------------------------------------------------------------------------------------------------
class GRPORun(BaseModel):
    """A finished GRPO run: the training result (history = per-step rows), the groups and a few transcripts."""

    result: TrainResult
    steps: list[StepRecord]
    groups: list[GroupRecord]
    transcripts: list[EpisodeOutcome]


def progress_line(row: Mapping[str, float]) -> str:
    """``step 3/10: mean reward +0.412 success 38% turns 3.2 informative 50% loss 0.0123 ETA 4m10s``."""
    n = f"{int(row['step'])}/{int(row['total_steps'])}" if "total_steps" in row else f"{int(row['step'])}"
    eta = row.get("eta_s")
    tail = f" ETA {int(eta // 60)}m{int(eta % 60):02d}s" if eta is not None else ""
    parts = [f"step {n}:"]
    if "reward_mean" in row:
        parts.append(
            f"mean reward {row['reward_mean']:+.3f} success {row.get('success_rate', 0.0):.0%} "
            f"turns {row.get('mean_turns', 0.0):.1f} informative {row.get('informative_frac', 0.0):.0%}"
        )
    if "loss" in row:
        parts.append(f"loss {row['loss']:.4f}")
    return " ".join(parts) + tail


def grpo_train_config(config: TrainConfig, settings: GRPOSettings) -> TrainConfig:
    """One group per micro-batch, ``scenarios_per_step`` micro-batches per optimizer step (TRL generates the whole
    step's episodes in one call, so they share every batched generation)."""
    return config.model_copy(
        update={"batch_size": settings.num_generations, "grad_accum": settings.scenarios_per_step}
    )


def train_grpo(
    config: TrainConfig,
    settings: GRPOSettings,
    bundles: Sequence[ScenarioBundle],
    sft_adapter: str,
    image: str | None,
    reward: RewardSpec | None = None,
    on_log: LogFn | None = None,
    progress: Progress | None = None,
) -> GRPORun:
    """GRPO from the SFT adapter (``PeftModel``, trainable) on the train scenarios ``bundles``, in real sandboxes.
    ``config.max_steps`` optimizer steps (required: an epoch over scenarios means nothing here)."""
    import os

    from datasets import Dataset
    from peft import PeftModel
    from trl import GRPOConfig, GRPOTrainer

    if not bundles:
        raise ValueError("no train scenario to play")
    if not config.max_steps:
        raise ValueError("GRPO needs max_steps (optimizer steps)")
    max_steps = config.max_steps
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    config = grpo_train_config(config, settings)
    resume, resumed_from = resume_point(config)
    tokenizer = load_tokenizer(config.base_model)
    model = PeftModel.from_pretrained(load_base(config), sft_adapter, is_trainable=True)
    by_id = {b.id: b for b in bundles}
    board = ScenarioBoard(
        sorted(by_id),
        {b.id: b.difficulty for b in bundles},
        promote_at=settings.ladder_promote_at if settings.difficulty_ladder else None,
        window=settings.ladder_window,
    )
    rollout = ShellRollout(by_id, image, settings, reward=reward, board=board, progress=progress)
    args = trainer_args(
        GRPOConfig,
        config,
        evaluate=False,
        num_generations=settings.num_generations,
        temperature=settings.temperature,
        top_p=settings.top_p,
        beta=settings.beta,
        max_completion_length=settings.max_context_tokens,
        shuffle_dataset=False,
        disable_dropout=True,
        log_completions=False,
    )
    sampler = InformativeSampler(
        board,
        settings.num_generations,
        settings.scenarios_per_step,
        repeat_count=args.steps_per_generation * args.num_iterations,
        num_batches=max_steps,
        prefer=settings.prefer_informative,
        seed=config.seed,
    )

    class Trainer(GRPOTrainer):
        def _get_train_sampler(self, dataset: Any = None) -> Any:
            return sampler

    def merged(row: dict[str, float]) -> None:
        rec = rollout.steps.get(int(row["step"]))
        full = {**row, **(rec.model_dump(exclude={"step"}) if rec else {})}
        if on_log is not None:
            on_log(full)

    _, callbacks = progress_callbacks(merged, None)
    trainer = without_printer(
        Trainer(
            model=model,
            reward_funcs=[make_reward_func(reward)],
            args=args,
            train_dataset=Dataset.from_list([{"prompt": sid} for sid in sorted(by_id)]),
            processing_class=tokenizer,
            rollout_func=rollout,
            callbacks=callbacks,
        )
    )
    out = run_training(trainer, resume, config)
    history, _ = history_from_log(trainer.state.log_history)
    history = [
        {
            **r,
            **(
                rollout.steps[int(r["step"])].model_dump(exclude={"step"})
                if int(r["step"]) in rollout.steps
                else {}
            ),
        }
        for r in history
    ]
    publish_adapter(trainer.model, Path(config.output_dir))
    wall = float(out.metrics.get("train_runtime", 0.0))
    steps = [rollout.steps[k] for k in sorted(rollout.steps)]
    tokens = sum(r.get("tokens", 0.0) for r in history)
    first, last = (steps[0], steps[-1]) if steps else (None, None)
    extra = {
        "episodes": float(rollout.episodes_played),
        "episodes_per_min": round(60 * rollout.episodes_played / rollout.rollout_s, 3)
        if rollout.rollout_s
        else 0.0,
        "rollout_share": round(rollout.rollout_s / wall, 3) if wall else 0.0,
        "first_reward_mean": first.reward_mean if first else math.nan,
        "last_reward_mean": last.reward_mean if last else math.nan,
        "first_success_rate": first.success_rate if first else math.nan,
        "last_success_rate": last.success_rate if last else math.nan,
        "informative_frac": round(
            sum(g.kind == "mixed" for g in rollout.groups) / max(1, len(rollout.groups)), 4
        ),
        "hacks": float(sum(s.hacks for s in steps)),
        "infra_errors": float(sum(s.infra_errors for s in steps)),
    }
    if pick_device(config) == "cpu":
        import resource

        extra["peak_memory_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = TrainResult(
        kind="grpo",
        adapter_dir=config.output_dir,
        steps=trainer.state.global_step,
        resumed_from_step=resumed_from,
        history=history,
        final_loss=history[-1].get("loss") if history else None,
        train_examples=rollout.episodes_played,
        train_tokens=int(tokens),
        trained_tokens=int(tokens),
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        wall_s=wall,
        trainable_parameters=trainable_parameters(trainer.model),
        extra=extra,
    )
    return GRPORun(result=result, steps=steps, groups=rollout.groups, transcripts=rollout.transcripts)


def reward_curve_png(steps: Sequence[StepRecord], path: Path, title: str = "GRPO reward") -> Path:
    """Mean reward and success rate per step (and the informative-group fraction) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [s.step for s in steps]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    ax.plot(xs, [s.reward_mean for s in steps], marker="o", color="tab:blue", label="mean reward")
    ax.plot(xs, [s.success_rate for s in steps], marker="s", color="tab:green", label="success rate")
    ax.plot(
        xs, [s.informative_frac for s in steps], linestyle="--", color="tab:gray", label="informative groups"
    )
    ax.set_xlabel("step")
    ax.set_ylim(-1.05, 1.05)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def transcript_markdown(o: EpisodeOutcome) -> str:
    """One episode as markdown: the numbers the reward saw, then the conversation (commands as code)."""
    head = (
        f"**{o.scenario_id}** (sample {o.sample}): reward {o.reward if o.reward is not None else 'n/a'}, "
        f"verified {o.verified}, terminated {o.terminated}, {o.n_turns} turns, {o.failed_commands} failed "
        f"commands, {o.prose_turns} prose turns, end {o.end_reason or '-'}"
        + (f", HACK: {o.hack}" if o.hack else "")
        + (f", infra: {o.infra_error}" if o.infra_error else "")
    )
    body = []
    for m in o.messages:
        text = m.content if len(m.content) < 800 else m.content[:800] + " ..."
        body.append(f"- *{m.role}*:\n\n```\n{text}\n```")
    return head + "\n\n" + "\n".join(body)
