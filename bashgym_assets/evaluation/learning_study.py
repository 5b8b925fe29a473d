"""The learning study (issue 38): what it takes for a model to finish the tasks it trained on, and new ones.

One *arm* is a recipe (``Arm``: which train families, how many tasks each, epochs, learning rate and schedule, LoRA
rank and targets, tokens per optimizer step, observation length, trajectories per task). ``run_arm`` takes it
through the project's own stages, nothing forked:

1. draw the arm's tasks from its train families (``factory.generate``, guarded against every evaluation task as
   ``generated_scenarios`` is), certify them (``gate.gate_bundles``, real sandboxes) and play their reference
   solutions (``rollout.run_rollouts``, as ``verified_trajectories`` does);
2. build the SFT rows exactly as ``sft_dataset`` does (``training_data.build.build_sft``: the evaluation's
   prompt, short renders, the contamination check against the pack's held-out tasks and the held-out families);
3. train with the project's trainer (``training.trainer.train_sft``) in segments that end at the epochs to
   evaluate: each segment resumes the last one's checkpoint, and with a constant learning rate the segments are one
   run (``TrainHyperparams.lr_schedule``);
4. after each segment, evaluate that checkpoint greedily through the evaluation (``evaluation.compare``, sandboxed
   episodes) on ``fit``, a seeded sample of the very tasks it trained on, and ``transfer``, fresh draws of the same
   families under the reserved transfer seed (``evaluation.transfer_bundles``, gated like every evaluated task).

Each checkpoint is one ``CheckpointResult``: epoch, optimizer steps, tokens seen, training wall time so far, fit and
transfer with Wilson intervals, failure classes and detail classes. ``study_markdown`` is the table.
Held-out families are refused as train families; no held-out task reaches a training row (checked twice).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from bashgym_assets.evaluation import FIT, TRANSFER, ModelSpec, Sampling, admitted, compare, transfer_bundles
from bashgym_assets.evaluation.failures import detail_counts
from bashgym_assets.evaluation.metrics import EvalEpisode, Rate, summarize
from bashgym_assets.evaluation.promotion import PairedTest, sign_test
from bashgym_assets.evaluation.report import failing_transcripts, transcript_markdown
from bashgym_assets.evaluation.runner import EvalSettings, LakeEpisodeWriter
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.training.trainer import LearningRate, TrainHyperparams

Progress = Callable[[str], None]
STUDY_SETS = (FIT, TRANSFER)


class StudyTraining(TrainHyperparams):
    """How an arm trains: the trainer's own hyperparameters (``TrainHyperparams``, nothing copied), with the
    defaults the study found to fit on this CPU, plus the two ``TrainConfig`` fields an arm varies. ``epochs`` is
    the last checkpoint's."""

    # The study's defaults: a constant rate lets segments resume as one run; 1,024-token rows hold a whole episode;
    # easy tasks first, as factory-cpu.
    learning_rate: LearningRate = 1e-3
    lr_schedule: Literal["linear", "constant"] = Field(
        default="constant",
        description="after the warm-up: constant (segments resume as one run), or linear decay",
    )
    warmup_steps: int = Field(default=2, description="linear warmup steps")
    max_length: int = Field(default=1024, description="tokens per packed row")
    curriculum: bool = Field(
        default=True, description="easy tasks first in every epoch (sft_dataset's difficulty)"
    )
    epochs: float = Field(default=8.0, description="passes over the train rows: the last checkpoint")
    save_every: int = Field(default=10**9, description="unused: the study saves at each evaluated epoch")
    # TrainConfig's, as the command line gives them (all-linear, or module names comma-separated)
    target_modules: str = Field(
        default="all-linear", description="all-linear or module names, comma-separated"
    )
    seed: int = Field(default=0, description="training, and the sample of trained tasks evaluated as fit")

    def targets(self) -> str | list[str]:
        """``target_modules`` as ``TrainConfig`` takes it."""
        names = [t.strip() for t in self.target_modules.split(",") if t.strip()]
        return "all-linear" if names in ([], ["all-linear"]) else names


# The arm's fields its prepared data depends on (with ``train.seed``, the sample of trained tasks evaluated as fit)
DATA_FIELDS = (
    "tasks_per_family",
    "draw_seed",
    "trajectories_per_task",
    "observation_chars",
    "fit_per_family",
    "transfer_per_family",
)


class Arm(BaseModel):
    """One recipe of the study: the data it trains on, how it trains (``train``), where it is evaluated."""

    name: str = Field(description="the arm's name: its result files are <name>.json and <name>.md")
    families: list[str] = Field(min_length=1, description="train families of the task factory")
    tasks_per_family: int = Field(default=14, ge=1, description="distinct tasks drawn of each family")
    draw_seed: int = Field(default=0, description="the factory's draw seed of the train tasks")
    trajectories_per_task: int = Field(
        default=1, ge=1, description="reference rollouts per task (identical ones are one row)"
    )
    observation_chars: int | None = Field(
        default=400, description="command outputs cut to this many characters (sft_dataset's option)"
    )
    eval_epochs: list[int] = Field(
        default_factory=list,
        description="epochs after which the checkpoint is evaluated (the last epoch always is)",
    )
    fit_per_family: int = Field(default=4, ge=0, description="trained tasks of each family evaluated (fit)")
    transfer_per_family: int = Field(default=4, ge=0, description="fresh tasks of each family (transfer)")
    max_turns: int = Field(default=10, description="evaluation: replies an episode may run")
    max_new_tokens: int = Field(default=128, description="evaluation: tokens a reply")
    train: StudyTraining = Field(default_factory=StudyTraining)

    @model_validator(mode="after")
    def _one_schedule_across_segments(self) -> Arm:
        """Checkpoints at whole epochs up to ``train.epochs``, which is one. A decaying schedule would be planned
        anew by every segment (to that segment's end): only a constant rate makes the segments one run, so a
        decay is refused when more than one checkpoint is evaluated."""
        last = self.train.epochs
        if last < 1 or last != int(last):
            raise ValueError(f"train.epochs must be a whole number of epochs, 1 or more (got {last:g})")
        self.eval_epochs = sorted({*self.eval_epochs, int(last)})
        if self.eval_epochs[0] < 1 or self.eval_epochs[-1] > last:
            raise ValueError(f"eval_epochs must be whole epochs from 1 to train.epochs ({int(last)})")
        if self.train.lr_schedule != "constant" and len(self.eval_epochs) > 1:
            raise ValueError(
                f"lr_schedule {self.train.lr_schedule!r} with {len(self.eval_epochs)} checkpoints: each training "
                "segment would plan its own decay; use constant, or evaluate one epoch"
            )
        return self

    @property
    def tokens_per_step(self) -> int:
        return self.train.max_length * self.train.grad_accum * self.train.batch_size

    def data_key(self) -> dict[str, Any]:
        """What the prepared data depends on (a cached preparation is reused only when this is equal)."""
        key = self.model_dump(include={"families", *DATA_FIELDS})
        return {**key, "seed": self.train.seed}

    def recipe(self) -> str:
        """The recipe in one line, for the tables."""
        t = self.train
        lora = f"LoRA r{t.lora_r}/a{t.lora_alpha} {t.target_modules}"
        return (
            f"{len(self.families)} families x {self.tasks_per_family} tasks, {self.trajectories_per_task} "
            f"trajectory/task, outputs <= {self.observation_chars or 'all'} chars; {lora}; lr {t.learning_rate:g} "
            f"{t.lr_schedule} ({t.warmup_steps} warm-up); {t.grad_accum * t.batch_size} x {t.max_length} "
            f"tokens/step; {t.dtype}{', curriculum' if t.curriculum else ''}"
        )


class PreparedData(BaseModel):
    """The arm's data: SFT rows (sft_dataset's columns), the fit and transfer tasks, what each stage kept."""

    key: dict[str, Any]
    rows: list[dict[str, Any]]
    fit: list[ScenarioBundle]
    transfer: list[ScenarioBundle]
    counts: dict[str, int]
    wall_s: float = Field(default=0.0, description="what drawing, gating and the reference rollouts took")


class SetResult(BaseModel):
    """One checkpoint on one set: the rates with Wilson intervals and why episodes failed."""

    n: int
    clean: Rate
    verified: Rate
    operate: Rate
    terminate: Rate
    failure_classes: dict[str, int]
    failure_details: dict[str, int]
    by_family: dict[str, str] = Field(default_factory=dict)  # family -> "k/n" clean


class CheckpointResult(BaseModel):
    """One evaluated checkpoint: how much training it had and what it finishes."""

    epoch: int
    steps: int
    tokens_seen: int
    train_wall_s: float = Field(description="wall time of training so far (model loads included)")
    train_runtime_s: float = Field(description="the trainer's own time of training so far")
    loss: float | None
    eval_id: str
    eval_wall_s: float
    sets: dict[str, SetResult]
    transcripts: list[str] = Field(default_factory=list)  # a few failed episodes, as markdown


class CleanResult(BaseModel):
    """One checkpoint and the base model, in one evaluation, on the sets nothing of the study trains on
    (``unseen``, ``bundled``): the figures that judge a model, and the promotion rule's verdict on the checkpoint
    against the base (``promotion.decide`` on the same episodes)."""

    epoch: int
    eval_id: str
    eval_wall_s: float
    sets: dict[str, dict[str, SetResult]] = Field(description="model label (base, the arm) -> set -> result")
    promote: bool
    promotion: str = Field(description="the rule's reasons, or why it promotes")
    transcripts: list[str] = Field(default_factory=list, description="episodes the checkpoint finished")


class AttemptSettings(BaseModel):
    """How a checkpoint samples its own attempts at the tasks it trained on (DPO's and recovery's raw material)."""

    from_epoch: int = Field(ge=1, description="the SFT checkpoint that attempts (and is compared with)")
    samples: int = Field(default=2, ge=1, description="sampled attempts of each trained task")
    temperature: float = Field(default=0.8, gt=0, description="the attempts' sampling temperature")
    seed: int = Field(default=0, description="the attempts' sampling seed")

    def cache_name(self, source: str = "") -> str:
        """The attempts' file in the arm's folder; ``source`` names a model other than the epoch's checkpoint."""
        return f"attempts-{source or f'e{self.from_epoch}'}-n{self.samples}-t{self.temperature:g}-s{self.seed}.json"


class DpoSettings(AttemptSettings):
    """DPO on top of one of the arm's SFT checkpoints: how the checkpoint samples its own attempts at the tasks it
    trained on, and how DPO trains from it (the SFT model as DPO's reference)."""

    learning_rate: float = Field(default=2e-5, description="DPO's learning rate (linear decay)")
    beta: float = Field(default=0.1, description="DPO's KL strength")
    epochs: float = Field(default=1.0, description="passes over the pairs")
    grad_accum: int = Field(default=4, ge=1, description="pairs per optimizer step")
    on_run: str = Field(
        default="",
        description="DPO from this run of the arm instead of the epoch's checkpoint (a folder of its work folder "
        "made from that epoch, e.g. recovery-e8-r2): that model's own attempts, pairs and reference",
    )

    def label(self) -> str:
        """The run's folder and model name (``dpo-e8``, ``dpo-recovery-e8-r2``)."""
        return f"dpo-{self.on_run or f'e{self.from_epoch}'}"


class EvaluatedRun(BaseModel):
    """What every stage on top ends with: its model's evaluation on fit and transfer and failed transcripts."""

    eval_id: str
    eval_wall_s: float
    sets: dict[str, SetResult]
    transcripts: list[str] = Field(default_factory=list)


class DpoResult(EvaluatedRun):
    """One DPO run on top of an SFT checkpoint: its attempts, its pairs, its training and fit and transfer after
    it, beside the checkpoint's own (``CheckpointResult`` of ``from_epoch``)."""

    settings: DpoSettings
    attempts: int
    attempts_clean: int
    tasks_failed: int = Field(description="trained tasks with at least one failed attempt (behaviour)")
    attempts_wall_s: float
    pairs: int
    pair_counts: dict[str, int] = Field(description="build_dpo's counts (groups with both sides, ...)")
    rejected_reasons: dict[str, int] = Field(description="why the rejected side failed")
    steps: int
    trained_tokens: int
    train_wall_s: float
    loss_first: float | None
    loss_last: float | None
    reward_accuracy: float | None


class RecoverySettings(AttemptSettings):
    """Recovery rows on top of one of the arm's SFT checkpoints (``training_data.recovery``): its failed attempts
    become replayed recovery rows, and SFT goes on from the checkpoint on the arm's rows plus those, beside a
    control that goes on as long on the arm's rows alone."""

    epochs: float = Field(default=2.0, gt=0, description="passes over the rows after the checkpoint")
    per_task: int = Field(default=1, ge=1, description="distinct mistakes replayed per trained task")
    control: bool = Field(
        default=True, description="also go on from the checkpoint without the recovery rows"
    )
    round: int = Field(
        default=1,
        ge=1,
        description="round N > 1 goes on from round N-1's runs: the recovery run's own attempts give new rows, "
        "trained with the earlier rounds' rows; the control goes on without any",
    )

    def label(self, kind: str, round_: int | None = None) -> str:
        """The folder and name of a round's run (``recovery-e8``, ``control-e8-r2``)."""
        n = self.round if round_ is None else round_
        return f"{kind}-e{self.from_epoch}" + (f"-r{n}" if n > 1 else "")

    def rows_file(self, round_: int | None = None) -> str:
        """Where a round's recovery rows are kept, as trained, to read beside the result and in later rounds."""
        return f"{self.label('recovery-rows', round_)}.json"


class ContinuedRun(EvaluatedRun):
    """SFT that went on from a checkpoint: its rows, training and fit and transfer after it."""

    label: str
    rows: int
    steps: int
    tokens_seen: int
    train_wall_s: float
    loss: float | None


class RecoveryResult(BaseModel):
    """Recovery rows on top of an SFT checkpoint: the attempts, the plans, the replays kept, and SFT with and
    (as control) without them, beside the checkpoint's own ``CheckpointResult``."""

    settings: RecoverySettings
    attempts: int
    attempts_clean: int
    attempts_wall_s: float
    plan_counts: dict[str, int] = Field(
        description="recovery_plans' counts: why a failed attempt gave no plan"
    )
    replayed: int
    recovered: int = Field(
        description="replays whose check passed (a later round: and not an earlier round's mistake): its new rows"
    )
    replay_wall_s: float
    replay_failures: dict[str, int] = Field(description="why the other replays were dropped")
    mistakes_by_failure: dict[str, int] = Field(description="the kept rows' attempts' failure classes")
    runs: list[ContinuedRun]
    example: str = Field(default="", description="one recovery row as the model sees it")


class GrpoSettings(BaseModel):
    """GRPO on top of one of the arm's SFT checkpoints: groups of sampled episodes at the tasks it trained on, in
    real sandboxes, each episode rewarded by the task's check (``training.grpo``: the evaluation's engine)."""

    from_epoch: int = Field(ge=1, description="the SFT checkpoint GRPO starts from (and is compared with)")
    steps: int = Field(default=20, ge=1, description="optimizer steps")
    generations: int = Field(default=4, ge=2, description="episodes of one task compared as a group")
    tasks_per_step: int = Field(default=2, ge=1, description="groups per optimizer step")
    learning_rate: float = Field(default=1e-4, gt=0, description="GRPO's learning rate")
    beta: float = Field(default=0.0, ge=0, description="KL strength to the checkpoint (0: no reference pass)")
    temperature: float = Field(default=0.8, gt=0, description="the episodes' sampling temperature")
    informative: bool = Field(
        default=True, description="prefer tasks whose last group both passed and failed (the sampler's board)"
    )
    seed: int = Field(default=0, description="the sampler's and sampling's seed")
    on_run: str = Field(
        default="",
        description="GRPO from this run of the arm instead of the epoch's checkpoint (a folder of its work folder "
        "made from that epoch, e.g. dpo-e8 or recovery-e8-r2)",
    )
    attempts: int = Field(
        default=0,
        ge=0,
        description="0: play every trained task; N (>= 2): first sample N attempts of each trained task from the "
        "starting model (kept and shared as DPO's are) and play only the tasks it both finished and failed",
    )

    @field_validator("attempts")
    @classmethod
    def _two_or_none(cls, n: int) -> int:
        if n == 1:
            raise ValueError("attempts: one attempt a task cannot both finish and fail; give 0 or >= 2")
        return n

    def label(self) -> str:
        """The run's folder and model name (``grpo-e8``, ``grpo-dpo-e8``; ``grpo-e8-sometimes`` on the tasks the
        start sometimes finishes)."""
        return f"grpo-{self.on_run or f'e{self.from_epoch}'}" + ("-sometimes" if self.attempts else "")

    def attempt_settings(self) -> AttemptSettings:
        """The start's sampling that picks the tasks (``attempts``): the episodes' temperature and seed, so DPO on
        the same start at the same settings reads the same file."""
        return AttemptSettings(
            from_epoch=self.from_epoch, samples=self.attempts, temperature=self.temperature, seed=self.seed
        )


class GrpoResult(EvaluatedRun):
    """One GRPO run on top of an SFT checkpoint: its episodes and rewards step by step, and fit and transfer after
    it, beside the checkpoint's own (``CheckpointResult`` of ``from_epoch``)."""

    settings: GrpoSettings
    steps: int
    episodes: int
    train_wall_s: float
    rollout_share: float = Field(description="share of the training wall spent playing episodes")
    informative_frac: float = Field(
        description="groups with both a pass and a fail (the only ones that teach)"
    )
    per_step: list[dict[str, float]] = Field(
        description="step, success rate, mean reward, informative groups"
    )
    hacks: int
    infra_errors: int
    loss_last: float | None
    tasks_played: int = Field(default=0, description="distinct tasks the groups played")
    pool: dict[str, int] = Field(
        default_factory=dict,
        description="with ``attempts``: the trained tasks by what the start's attempts did (always, never, "
        "sometimes: the ones played; cut: failed only by the sandbox or the clock)",
    )
    attempts_wall_s: float = 0.0


class StudyResult(BaseModel):
    """An arm and its checkpoints (written as <arm>.json)."""

    arm: Arm
    base_model: str
    machine: str = ""
    command: str = ""
    started: str
    data: dict[str, int]
    prepare_wall_s: float = Field(description="the data's preparation (when it was made, if reused)")
    train_rows: int
    train_tokens_per_epoch: int = 0
    steps_per_epoch: int = 0
    checkpoints: list[CheckpointResult] = Field(default_factory=list)
    finished: bool = False
    clean: list[CleanResult] = Field(default_factory=list)
    dpo: list[DpoResult] = Field(default_factory=list)
    recovery: list[RecoveryResult] = Field(default_factory=list)
    grpo: list[GrpoResult] = Field(default_factory=list)


# ---- data ---------------------------------------------------------------------------------------------------------
def check_families(families: Sequence[str]) -> None:
    """Refuse a family that is unknown, held out (evaluation only) or kept for validation by ``sft_dataset``
    (whose rows never train): the arm would train on nothing of it, or on what must never train."""
    from bashgym_assets.scenarios.factory.family import all_families
    from bashgym_assets.scenarios.factory.split import is_held_out_family
    from bashgym_assets.training_data.build import split_for

    known = all_families()
    for name in families:
        if name not in known:
            raise ValueError(f"unknown family {name!r}")
        if is_held_out_family(name):
            raise ValueError(f"{name} is a held-out family: evaluation only, it never trains")
        if split_for(f"family:{name}") != "train":
            raise ValueError(f"{name} is one of sft_dataset's validation families: its rows never train")


def heldout_guard(per_family: int, seed: int) -> list[Any]:
    """Every task whose text or skill must not train (``build.HeldOut``): the pack's held-out split, its train
    twins included, and the held-out families' tasks drawn as the arm's are."""
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.factory.family import all_families
    from bashgym_assets.scenarios.factory.generate import generate
    from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES
    from bashgym_assets.scenarios.gate import HELD_OUT, split_for
    from bashgym_assets.training_data.build import heldout_from_rows

    pack, _ = load_pack()
    held = [b for b in pack if split_for(b.id) == HELD_OUT]
    families = sorted(
        HELD_OUT_FAMILIES & set(all_families())
    )  # a name no longer defined is ignored (split.py)
    held += generate(per_family, seed=seed, families=families).bundles
    return heldout_from_rows(
        {"id": b.id, "task": b.task, "reference": list(b.reference), "split": HELD_OUT} for b in held
    )


def prepare(arm: Arm, image: str | None, progress: Progress = print, max_parallel: int = 4) -> PreparedData:
    """Draw, gate and play the arm's train tasks, build its SFT rows, pick its fit and transfer tasks."""
    from bashgym_assets.rollout.episode import ROLLOUT_LIMITS
    from bashgym_assets.rollout.operators import ReferenceOperator
    from bashgym_assets.rollout.rollouts import run_rollouts
    from bashgym_assets.scenarios.factory.family import family_of
    from bashgym_assets.scenarios.factory.generate import evaluation_tasks, generate
    from bashgym_assets.scenarios.gate import gate_bundles
    from bashgym_assets.training_data.build import build_sft, contamination_violations

    check_families(arm.families)
    t0 = time.monotonic()
    counts: dict[str, int] = {}
    drawn = generate(
        arm.tasks_per_family, seed=arm.draw_seed, families=arm.families, eval_tasks=evaluation_tasks()
    ).bundles
    counts["drawn"] = len(drawn)
    progress(f"[{arm.name}] drew {len(drawn)} tasks of {len(arm.families)} families; gating them")
    gated = [b for b, r in zip(drawn, gate_bundles(drawn, image), strict=True) if r.admitted]
    counts["admitted"] = len(gated)
    progress(f"[{arm.name}] {len(gated)}/{len(drawn)} admitted; playing the reference solutions")

    def said(done: int, total: int, kept: int) -> None:
        if done % 10 == 0 or done == total:
            progress(f"[{arm.name}] reference rollouts {done}/{total}: {kept} kept")

    records = run_rollouts(
        gated,
        ReferenceOperator(),
        image,
        samples=arm.trajectories_per_task,
        max_parallel=max_parallel,
        limits=ROLLOUT_LIMITS,
        on_progress=said,
    )
    counts["trajectories"] = len(records)
    counts["trajectories_kept"] = sum(r.kept for r in records)
    heldout = heldout_guard(arm.tasks_per_family, arm.draw_seed)
    built = build_sft([], [r.model_dump() for r in records], heldout, observation_chars=arm.observation_chars)
    rows = [r for r in built.rows if r["split"] == "train"]
    counts["sft_rows"] = len(rows)
    counts["quarantined"] = len(built.quarantine)
    if bad := contamination_violations(rows, heldout):
        raise RuntimeError(f"{len(bad)} train rows hold a held-out task, e.g. {bad[0]}")
    strays = {r["family"] for r in rows} - set(arm.families)
    if strays:
        raise RuntimeError(f"train rows of families outside the arm: {sorted(strays)}")
    trained_ids = {r["scenario_id"] for r in rows}
    trained = [b for b in gated if b.id in trained_ids]
    fit = _per_family_sample(trained, arm.fit_per_family, arm.train.seed)
    fresh = transfer_bundles([{"scenario_id": b.id, "task": b.task} for b in drawn], arm.transfer_per_family)
    transfer = admitted(fresh, image, progress=progress)
    counts.update({"fit_tasks": len(fit), "transfer_drawn": len(fresh), "transfer_tasks": len(transfer)})
    if any(family_of(b.id) not in arm.families for b in transfer) or {b.id for b in transfer} & trained_ids:
        raise RuntimeError("a transfer task is outside the arm's families or was trained on")
    progress(f"[{arm.name}] data: {json.dumps(counts)}")
    return PreparedData(
        key=arm.data_key(),
        rows=rows,
        fit=fit,
        transfer=transfer,
        counts=counts,
        wall_s=round(time.monotonic() - t0, 1),
    )


def _per_family_sample(bundles: Sequence[ScenarioBundle], per_family: int, seed: int) -> list[ScenarioBundle]:
    """``per_family`` of each family's tasks, seeded, so every family weighs the same in the fit figure."""
    from bashgym_assets.scenarios.factory.family import family_of

    by_family: dict[str, list[ScenarioBundle]] = {}
    for b in sorted(bundles, key=lambda b: b.id):
        by_family.setdefault(family_of(b.id) or "", []).append(b)
    out: list[ScenarioBundle] = []
    for name in sorted(by_family):
        tasks = by_family[name]
        out += random.Random(f"{seed}:{name}").sample(tasks, min(per_family, len(tasks)))
    return sorted(out, key=lambda b: b.id)


def prepared(arm: Arm, image: str | None, cache: Path, progress: Progress = print) -> PreparedData:
    """``prepare``, or the data a previous run of the same arm data left in ``cache`` (a rerun of an arm that
    changed only how it trains re-uses its gated tasks and rows)."""
    if (data := cached_data(arm, cache)) is not None:
        progress(f"[{arm.name}] data from {cache}: {json.dumps(data.counts)}")
        return data
    data = prepare(arm, image, progress)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(data.model_dump_json())
    return data


def cached_data(arm: Arm, cache: Path) -> PreparedData | None:
    """The data a run of the same arm data left in ``cache``, or None."""
    if not cache.exists():
        return None
    data = PreparedData.model_validate_json(cache.read_text())
    return data if data.key == arm.data_key() else None


def checkpoint_adapter(work: Path, arm: Arm, epoch: int) -> Path:
    """The arm's adapter of ``epoch`` (``run_arm`` keeps one per evaluated epoch), or a clear error."""
    checkpoint = work / f"epoch-{epoch}"
    if not (checkpoint / "adapter_config.json").exists():
        raise FileNotFoundError(f"[{arm.name}] no adapter of epoch {epoch} in {checkpoint}")
    return checkpoint


def arm_data(arm: Arm, work: Path) -> PreparedData:
    """The arm's prepared data, which every stage on top of a finished arm needs; missing, it says so in one line."""
    if (data := cached_data(arm, work / "prepared.json")) is None:
        raise FileNotFoundError(f"[{arm.name}] the arm's prepared data is not in {work}: run the arm first")
    return data


def start_adapter(work: Path, arm: Arm, epoch: int, run: str = "") -> Path:
    """What a stage on top starts from: the checkpoint of ``epoch``, or the arm's run ``run`` (a folder of ``work``:
    a recovery round's, a DPO run's)."""
    if not run:
        return checkpoint_adapter(work, arm, epoch)
    if not (work / run / "adapter_config.json").is_file():
        raise FileNotFoundError(f"[{arm.name}] no adapter {run} in {work}: run what makes it first")
    return work / run


# ---- training and evaluation ----------------------------------------------------------------------------------------
def train_config(
    arm: Arm, base_model: str, work: Path, epochs: float, first: bool, max_steps: int | None = None
) -> Any:
    """The trainer's config of one segment: the arm's recipe up to ``epochs``, resuming the last segment's
    checkpoint (the first segment starts over). Checkpoints are written at each segment's end only."""
    from bashgym_assets.training.trainer import TrainConfig

    return TrainConfig(
        **arm.train.model_dump(exclude={"target_modules", "epochs", "max_steps", "save_every"}),
        target_modules=arm.train.targets(),
        epochs=float(epochs),
        max_steps=max_steps,
        base_model=base_model,
        output_dir=str(work / "adapter"),
        checkpoint_dir=str(work / "checkpoints"),
        run_name=arm.name,
        save_every=10**9,
        resume=not first,
    )


def set_result(episodes: Sequence[EvalEpisode]) -> SetResult:
    """The rates, failure classes and detail classes of one set's episodes."""
    from bashgym_assets.scenarios.factory.family import family_of

    s = summarize("study", list(episodes))
    by_family: dict[str, list[EvalEpisode]] = {}
    for e in episodes:
        by_family.setdefault(family_of(e.scenario_id) or e.scenario_id, []).append(e)
    return SetResult(
        n=s.rates["clean"].n,
        clean=s.rates["clean"],
        verified=s.rates["verified"],
        operate=s.rates["operate"],
        terminate=s.rates["terminate"],
        failure_classes=dict(sorted(s.failure_classes.items(), key=lambda kv: -kv[1])),
        failure_details=detail_counts(episodes),
        by_family={f: f"{sum(e.clean for e in eps)}/{len(eps)}" for f, eps in sorted(by_family.items())},
    )


def evaluate_checkpoint(
    adapter: Path,
    base_model: str,
    data: PreparedData,
    arm: Arm,
    image: str | None,
    eval_id: str,
    lake: Any = None,
    progress: Progress = print,
) -> tuple[dict[str, SetResult], list[EvalEpisode], float]:
    """One checkpoint greedily on fit and transfer, in one evaluation (one model load); its episodes go to
    ``eval_episodes[eval_id]`` when a lake is given."""
    spec = ModelSpec(label=arm.name, base=base_model, adapter=str(adapter), ref=str(adapter))
    sets = {FIT: data.fit, TRANSFER: data.transfer}
    (episodes,), (by_set,), wall = _evaluate([spec], sets, arm, image, eval_id, lake, progress)
    return by_set, episodes, wall


def _evaluate(
    specs: Sequence[ModelSpec],
    sets: dict[str, list[ScenarioBundle]],
    arm: Arm,
    image: str | None,
    eval_id: str,
    lake: Any,
    progress: Progress,
) -> tuple[list[list[EvalEpisode]], list[dict[str, SetResult]], float]:
    """The models over the sets' tasks in one greedy evaluation with the arm's caps (episodes into
    ``eval_episodes[eval_id]`` when a lake is given): each model's episodes, its result on each non-empty set, and
    the wall time."""
    set_of = {b.id: name for name, bs in sets.items() for b in bs}
    sink = LakeEpisodeWriter(lake, eval_id) if lake is not None else None
    t0 = time.monotonic()
    results = compare(
        list(specs),
        [b for bs in sets.values() for b in bs],
        image,
        EvalSettings(max_turns=arm.max_turns),
        Sampling(max_new_tokens=arm.max_new_tokens),
        eval_id=eval_id,
        progress=progress,
        sink=sink,
    )
    if sink is not None:
        sink.flush()
    wall = time.monotonic() - t0
    per_model = [
        {
            name: set_result([e for e in r.episodes if set_of.get(e.scenario_id) == name])
            for name in sets
            if sets[name]
        }
        for r in results
    ]
    return [r.episodes for r in results], per_model, wall


def clean_sets(
    image: str | None, per_family: int = 3, seed: int = 0, progress: Progress = print
) -> dict[str, list[ScenarioBundle]]:
    """The sets that judge a model, gated: ``unseen``, the first ``per_family`` draws of every held-out family
    (skills no train family teaches), and ``bundled``, the pack's clean held-out tasks (their skill is not taught by
    a train family either)."""
    from bashgym_assets.evaluation import BUNDLED, UNSEEN, evaluation_set
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.factory.family import all_families
    from bashgym_assets.scenarios.factory.generate import generate
    from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES
    from bashgym_assets.scenarios.gate import HELD_OUT, gate_bundles, split_for

    pack, _ = load_pack()
    bundled = [b for b in pack if split_for(b.id) == HELD_OUT and evaluation_set(b.id) == BUNDLED]
    families = sorted(HELD_OUT_FAMILIES & set(all_families()))
    unseen = generate(per_family, seed=seed, families=families).bundles
    drawn = bundled + unseen
    progress(f"clean sets: gating {len(unseen)} unseen and {len(bundled)} bundled tasks")
    kept = {b.id for b, r in zip(drawn, gate_bundles(drawn, image), strict=True) if r.admitted}
    if len(kept) < len(drawn):
        progress(f"clean sets: {len(drawn) - len(kept)} of {len(drawn)} refused by the gate")
    return {
        UNSEEN: [b for b in unseen if b.id in kept],
        BUNDLED: [b for b in bundled if b.id in kept],
    }


def evaluate_clean(
    study: StudyResult,
    epoch: int,
    base_model: str,
    image: str | None,
    work: Path,
    lake: Any = None,
    progress: Progress = print,
    per_family: int = 3,
) -> CleanResult:
    """The arm's checkpoint of ``epoch`` and the base, greedily, on ``clean_sets`` in one evaluation; the promotion
    rule applied to the two (the pipeline's rule: clean better with a paired sign test, operate and terminate
    kept)."""
    from datetime import UTC, datetime

    from bashgym_assets.evaluation import promotion

    arm = study.arm
    checkpoint = checkpoint_adapter(work, arm, epoch)
    sets = clean_sets(image, per_family=per_family, progress=progress)
    eval_id = f"eval-study-clean-{arm.name}-e{epoch}-{datetime.now(UTC).strftime('%H%M%S')}"
    specs = [
        ModelSpec(label="base", base=base_model, ref=base_model),
        ModelSpec(label=arm.name, base=base_model, adapter=str(checkpoint), ref=str(checkpoint)),
    ]
    (base, tuned), per_model, wall = _evaluate(specs, sets, arm, image, eval_id, lake, progress)
    decision = promotion.decide(tuned, base)
    by_model = {spec.label: result for spec, result in zip(specs, per_model, strict=True)}
    finished = [e for e in tuned if e.clean][:3]
    return CleanResult(
        epoch=epoch,
        eval_id=eval_id,
        eval_wall_s=round(wall, 1),
        sets=by_model,
        promote=decision.promote,
        promotion=decision.reason,
        transcripts=[transcript_markdown(e, 1800) for e in finished],
    )


def run_arm(
    arm: Arm,
    base_model: str,
    image: str | None,
    work: Path,
    lake: Any = None,
    progress: Progress = print,
    on_checkpoint: Callable[[StudyResult], None] | None = None,
    machine: str = "",
    command: str = "",
    previous: StudyResult | None = None,
) -> StudyResult:
    """The whole arm: data, then per evaluated epoch a training segment and an evaluation of its checkpoint.
    ``on_checkpoint`` gets the result so far after each checkpoint (the CLI writes the files then, so a stopped
    run keeps what it measured). ``previous``: the same arm's result so far (``extended``), whose checkpoints are
    kept and whose last trainer checkpoint the first new segment resumes."""
    from datetime import UTC, datetime

    from bashgym_assets.training.curriculum import stage_of
    from bashgym_assets.training.trainer import progress_line, train_sft

    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    data = prepared(arm, image, work / "prepared.json", progress)
    if not data.rows:
        raise RuntimeError(f"[{arm.name}] no SFT row: nothing to train on ({data.counts})")
    study = StudyResult(
        arm=arm,
        base_model=base_model,
        started=started,
        data=data.counts,
        prepare_wall_s=data.wall_s,
        train_rows=len(data.rows),
        machine=machine,
        command=command,
    )
    train = [r["messages"] for r in data.rows]
    stages = [stage_of(r) for r in data.rows]
    wall = runtime = 0.0
    done = 0
    if previous is not None and previous.checkpoints:
        last = previous.checkpoints[-1]
        _check_resumable(previous, arm, work)
        study.started, study.prepare_wall_s = previous.started, previous.prepare_wall_s
        study.machine = (
            previous.machine if previous.machine == machine else f"{previous.machine}; then {machine}"
        )
        study.command = f"{previous.command}; then {command}" if previous.command else command
        study.checkpoints = list(previous.checkpoints)
        study.clean = list(previous.clean)
        wall, runtime, done = last.train_wall_s, last.train_runtime_s, last.epoch
        progress(
            f"[{arm.name}] extending from epoch {done} ({last.steps} steps) to epoch {int(arm.train.epochs)}"
        )
    for i, epoch in enumerate(arm.eval_epochs):
        if epoch <= done:
            continue
        cfg = train_config(arm, base_model, work, epoch, first=i == 0 and not done)
        progress(f"[{arm.name}] training to epoch {epoch} ({arm.recipe()})")

        def log(row: dict[str, float], epoch: int = epoch) -> None:
            progress(f"[{arm.name}] epoch<={epoch} {progress_line(row)}")

        t1 = time.monotonic()
        res = train_sft(cfg, train, on_log=log, stages=stages)
        wall += time.monotonic() - t1
        runtime += res.wall_s
        study.train_tokens_per_epoch = res.train_tokens
        study.steps_per_epoch = math.ceil(res.steps / epoch)
        checkpoint = work / f"epoch-{epoch}"
        if checkpoint.exists():
            shutil.rmtree(checkpoint)
        shutil.copytree(res.adapter_dir, checkpoint)
        eval_id = f"{_EVAL_PREFIX}{arm.name}-e{epoch}-{datetime.now(UTC).strftime('%H%M%S')}"
        progress(f"[{arm.name}] epoch {epoch}: {res.steps} steps; evaluating {eval_id}")
        sets, episodes, eval_wall = evaluate_checkpoint(
            checkpoint, base_model, data, arm, image, eval_id, lake, progress
        )
        study.checkpoints.append(
            CheckpointResult(
                epoch=epoch,
                steps=res.steps,
                tokens_seen=int(sum(h.get("tokens", 0) for h in res.history)),
                train_wall_s=round(wall, 1),
                train_runtime_s=round(runtime, 1),
                loss=_mean_loss(res.history, study.steps_per_epoch),
                eval_id=eval_id,
                eval_wall_s=round(eval_wall, 1),
                sets=sets,
                transcripts=[
                    transcript_markdown(e, 1800) for e in failing_transcripts(episodes, arm.name, 3)
                ],
            )
        )
        progress(f"[{arm.name}] {checkpoint_line(study.checkpoints[-1])}")
        if on_checkpoint is not None:
            on_checkpoint(study)
    study.finished = True
    return study


# ---- DPO on top ---------------------------------------------------------------------------------------------------
def trained_bundles(arm: Arm, data: PreparedData) -> list[ScenarioBundle]:
    """The tasks the arm's rows train on, drawn again as ``prepare`` drew them (the factory is deterministic in its
    seed; the rows keep only ids, and a task whose draw changed since is refused rather than guessed)."""
    from bashgym_assets.scenarios.factory.generate import evaluation_tasks, generate

    ids = {r["scenario_id"] for r in data.rows}
    drawn = generate(
        arm.tasks_per_family, seed=arm.draw_seed, families=arm.families, eval_tasks=evaluation_tasks()
    ).bundles
    found = [b for b in drawn if b.id in ids]
    if len(found) != len(ids):
        missing = sorted(ids - {b.id for b in found})
        raise RuntimeError(
            f"[{arm.name}] {len(missing)} trained tasks are no longer drawn by the factory (e.g. {missing[0]}): "
            "the family changed since the arm's data was prepared; run the arm anew"
        )
    return found


def behaviour_failures(attempts: Sequence[Any]) -> list[dict[str, Any]]:
    """The failed attempts that failed by what the model typed (DPO's rejected sides, recovery's mistakes): not the
    sandbox's failures (``student.pairable``), and not an episode its wall-time cap ended, which under load cuts
    attempts that were going right: a cut is not a wrong choice."""
    from bashgym_assets.evaluation.metrics import FAILURE_TIMEOUT
    from bashgym_assets.evaluation.student import pairable

    own, _ = pairable([a.model_dump() if hasattr(a, "model_dump") else dict(a) for a in attempts])
    return [dict(a) for a in own if not a.get("kept") and a.get("reject_reason") != FAILURE_TIMEOUT]


def sometimes_finished(attempts: Sequence[Any]) -> tuple[list[str], dict[str, int]]:
    """The tasks a model's sampled attempts both finished and failed (by what it typed: ``behaviour_failures``),
    and every attempted task counted by what its attempts did: ``always``, ``never``, ``sometimes``, ``cut`` (no
    clean attempt and no failure of the model's own: only the sandbox or the clock failed it). Only a task of the
    ``sometimes`` kind gives a GRPO group both a pass and a fail; the others give groups with no advantage."""
    kept: Counter[str] = Counter()
    tried: set[str] = set()
    for a in attempts:  # records or their dicts, read as they are (no dump of their messages)
        sid, ok = (a["scenario_id"], a.get("kept")) if isinstance(a, Mapping) else (a.scenario_id, a.kept)
        tried.add(sid)
        kept[sid] += int(bool(ok))
    failed = Counter(a["scenario_id"] for a in behaviour_failures(attempts))
    kinds = {
        t: "sometimes" if kept[t] and failed[t] else "always" if kept[t] else "never" if failed[t] else "cut"
        for t in sorted(tried)
    }
    counts = Counter(kinds.values())
    return [t for t, k in kinds.items() if k == "sometimes"], {
        k: counts[k] for k in ("always", "never", "sometimes", "cut")
    }


def dpo_pairs(
    arm: Arm, data: PreparedData, attempts: Sequence[Any], heldout: Sequence[Any] = ()
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Preference pairs as ``dpo_dataset`` makes them (``build_dpo``: a task's passing and failing attempts, cut at
    the first assistant turn where they differ): the passing side is the task's reference row the arm trained on,
    the failing side the checkpoint's own failed attempt. Observations are cut as the rows' were
    (``observation_chars``), so a shared turn reads the same on both sides and the pair splits where the model
    chose differently, not where an output was cut."""
    from bashgym_assets.training_data.build import build_dpo, contamination_violations, shorten_observations

    references = [
        {"scenario_id": r["scenario_id"], "split": "train", "kept": True, "messages": r["messages"]}
        for r in data.rows
    ]
    failed = [
        {**a, "messages": shorten_observations(list(a["messages"]), arm.observation_chars)}
        for a in behaviour_failures(attempts)
    ]
    built = build_dpo([], [*references, *failed], heldout)
    pairs = [r for r in built.rows if r["split"] == "train"]
    if bad := contamination_violations(pairs, heldout):
        raise RuntimeError(f"{len(bad)} DPO pairs hold a held-out task, e.g. {bad[0]}")
    return pairs, built.counts


def own_attempts(
    study: StudyResult,
    settings: AttemptSettings,
    base_model: str,
    image: str | None,
    work: Path,
    progress: Progress = print,
    source: str = "",
) -> tuple[Path, PreparedData, list[ScenarioBundle], list[Any], float]:
    """The checkpoint of ``settings.from_epoch`` (or the arm's run ``source``, a folder of ``work``: a recovery
    round's), the arm's data, its trained tasks, and that model's sampled attempts at them (``run_student``, real
    sandboxes) with their wall time. The attempts are kept in the arm's folder, one file per model and sampling,
    so DPO and recovery on one checkpoint share one sampling."""
    from bashgym_assets.evaluation.student import StudentSettings, run_student
    from bashgym_assets.rollout.episode import TrajectoryRecord

    arm = study.arm
    checkpoint = start_adapter(work, arm, settings.from_epoch, source)
    data = arm_data(arm, work)
    tasks = trained_bundles(arm, data)
    cache = work / settings.cache_name(source)
    who = source or f"epoch {settings.from_epoch}"
    if cache.exists():
        saved = json.loads(cache.read_text(encoding="utf-8"))
        records = [TrajectoryRecord.model_validate(r) for r in saved["records"]]
        progress(f"[{arm.name}] {len(records)} attempts of {who} from {cache.name}")
        return checkpoint, data, tasks, records, float(saved["wall_s"])
    label = f"{arm.name}-{source or f'e{settings.from_epoch}'}"
    spec = ModelSpec(label=label, base=base_model, adapter=str(checkpoint), ref=str(checkpoint))
    # the limits of the arm's own evaluation: the student's defaults (4 turns in 120 s) would cut 10-turn attempts
    # by the clock (55 of 69 failures in the first run at an arm's size were such cuts)
    limits = EvalSettings(max_turns=arm.max_turns)
    student = StudentSettings(
        samples=settings.samples,
        temperature=settings.temperature,
        seed=settings.seed,
        max_turns=arm.max_turns,
        max_new_tokens=arm.max_new_tokens,
        episode_timeout_s=limits.episode_timeout_s,
        command_timeout_s=limits.command_timeout_s,
        check_timeout_s=limits.check_timeout_s,
        max_unusable_in_a_row=limits.max_unusable_in_a_row,
        max_live=limits.max_live,
    )
    progress(f"[{arm.name}] {settings.samples} attempts of {who} at {len(tasks)} tasks")
    run = run_student(spec, tasks, image, student, progress=progress)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(
        json.dumps({"wall_s": run.wall_s, "records": [r.model_dump(mode="json") for r in run.records]}),
        encoding="utf-8",
    )
    tmp.replace(cache)
    return checkpoint, data, tasks, list(run.records), run.wall_s


def dpo_on_top(
    study: StudyResult,
    settings: DpoSettings,
    base_model: str,
    image: str | None,
    work: Path,
    lake: Any = None,
    progress: Progress = print,
) -> DpoResult:
    """DPO from the arm's SFT checkpoint of ``settings.from_epoch`` (issue 38: "then DPO on top once SFT finishes
    some tasks of a family"): the checkpoint's sampled attempts at the tasks it trained on (``run_student``, real
    sandboxes), its failures paired with the reference it trained on (``dpo_pairs``), ``train_dpo`` from the
    checkpoint, then fit and transfer greedily, as every checkpoint is evaluated."""
    from datetime import UTC, datetime

    from bashgym_assets.training.trainer import TrainConfig, progress_line, train_dpo

    arm = study.arm
    checkpoint, data, _, records, attempts_wall = own_attempts(
        study, settings, base_model, image, work, progress, source=settings.on_run
    )
    heldout = heldout_guard(arm.tasks_per_family, arm.draw_seed)
    pairs, counts = dpo_pairs(arm, data, records, heldout)
    failed_tasks = {
        a["scenario_id"] for a in behaviour_failures(records)
    }  # the model's, not the sandbox's or clock's
    progress(
        f"[{arm.name}] DPO: {sum(r.kept for r in records)}/{len(records)} attempts clean, "
        f"{len(failed_tasks)} tasks with a failure, {len(pairs)} pairs"
    )
    if not pairs:
        raise RuntimeError(
            f"[{arm.name}] no DPO pair: {settings.on_run or f'epoch {settings.from_epoch}'} failed no trained "
            "task in a way that pairs "
            f"with its reference ({counts})"
        )
    label = settings.label()
    out = work / label
    config = TrainConfig(
        **arm.train.model_dump(
            exclude={"target_modules", "epochs", "max_steps", "save_every", "learning_rate", "beta"}
            | {"grad_accum", "lr_schedule", "warmup_steps", "curriculum"}
        ),
        target_modules=arm.train.targets(),
        epochs=settings.epochs,
        learning_rate=settings.learning_rate,
        beta=settings.beta,
        grad_accum=settings.grad_accum,
        base_model=base_model,
        output_dir=str(out),
        checkpoint_dir=str(work / f"{label}-checkpoints"),
        run_name=f"{arm.name}-dpo",
        save_every=10**9,
        resume=False,
    )
    for folder in (out, config.ckpt_dir()):
        if folder.exists():
            shutil.rmtree(folder)
    t0 = time.monotonic()
    res = train_dpo(
        config, pairs, str(checkpoint), on_log=lambda row: progress(f"[{arm.name}] DPO {progress_line(row)}")
    )
    train_wall = time.monotonic() - t0
    eval_id = f"{_EVAL_PREFIX}{arm.name}-{label}-{datetime.now(UTC).strftime('%H%M%S')}"
    progress(f"[{arm.name}] DPO: {res.steps} steps; evaluating {eval_id}")
    sets, episodes, eval_wall = evaluate_checkpoint(
        out, base_model, data, arm, image, eval_id, lake, progress
    )
    losses = [h["loss"] for h in res.history if "loss" in h]
    return DpoResult(
        settings=settings,
        attempts=len(records),
        attempts_clean=sum(r.kept for r in records),
        tasks_failed=len(failed_tasks),
        attempts_wall_s=round(attempts_wall, 1),
        pairs=len(pairs),
        pair_counts=counts,
        rejected_reasons=dict(Counter(str(p.get("rejected_reason")) for p in pairs).most_common()),
        steps=res.steps,
        trained_tokens=res.trained_tokens,
        train_wall_s=round(train_wall, 1),
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        reward_accuracy=res.extra.get("reward_accuracy"),
        eval_id=eval_id,
        eval_wall_s=round(eval_wall, 1),
        sets=sets,
        transcripts=[transcript_markdown(e, 1800) for e in failing_transcripts(episodes, arm.name, 3)],
    )


def _start_of(study: StudyResult, epoch: int, run: str = "") -> tuple[str, str, dict[str, SetResult]]:
    """What a stage on top started from, as its heading and its table name it, and that model's fit and transfer:
    the epoch's checkpoint, or a run of the arm (a folder of its work folder: a recovery round's, a DPO run's)."""
    if run:
        made = [m for m in arm_models(study) if m.folder == run]
        return f"`{run}` (from epoch {epoch})", f"`{run}`", made[-1].sets if made else {}
    sft = next((c for c in study.checkpoints if c.epoch == epoch), None)
    return f"epoch {epoch}", f"SFT epoch {epoch}", sft.sets if sft else {}


def _beside(
    start: str, start_sets: dict[str, SetResult], stage: str, sets: dict[str, SetResult]
) -> list[str]:
    """A stage's fit and transfer beside those of the model it started from."""
    lines = [
        "| model | fit clean | transfer clean | fit failures (detail) | transfer failures (detail) |",
        "|---|---|---|---|---|",
    ]
    for label, per_set in ((start, start_sets), (stage, sets)):
        fit, transfer = per_set.get(FIT), per_set.get(TRANSFER)
        lines.append(
            f"| {label} | {_rate(fit)} | {_rate(transfer)} | {_failures(fit) if fit else '-'} | "
            f"{_failures(transfer) if transfer else '-'} |"
        )
    return lines


def dpo_markdown(study: StudyResult, d: DpoResult) -> list[str]:
    """DPO's row beside the SFT checkpoint it started from."""
    s = d.settings
    start, start_row, start_sets = _start_of(study, s.from_epoch, s.on_run)
    lines = [
        f"DPO on top of {start} ({s.samples} attempts a trained task at temperature "
        f"{s.temperature:g}; lr {s.learning_rate:g}, beta {s.beta:g}, {s.epochs:g} epoch, {s.grad_accum} pairs a "
        f"step): {d.attempts_clean}/{d.attempts} attempts clean, {d.tasks_failed} tasks with a failure, "
        f"**{d.pairs} pairs** (rejected: {', '.join(f'{k} {v}' for k, v in d.rejected_reasons.items())}); "
        f"attempts {_minutes(d.attempts_wall_s)}, DPO {d.steps} steps in {_minutes(d.train_wall_s)} (loss "
        f"{_figure(d.loss_first)} -> {_figure(d.loss_last)}, reward accuracy {_figure(d.reward_accuracy)}), evaluation "
        f"{_minutes(d.eval_wall_s)} (`{d.eval_id}`):",
        "",
        *_beside(start_row, start_sets, "+ DPO", d.sets),
    ]
    return lines


# ---- recovery rows on top ----------------------------------------------------------------------------------------
def replay_plans(
    plans: Sequence[Any], tasks: Sequence[ScenarioBundle], image: str | None, max_parallel: int = 4
) -> list[Any]:
    """Each plan played in a fresh sandbox (``ReferenceOperator`` typing the plan's commands, then ``exit``) and
    checked: ``TrajectoryRecord`` rows, kept only where the task's check passed. A task's plans go in rounds (one
    a round), since a trajectory is named by its task and sample."""
    from bashgym_assets.rollout.episode import ROLLOUT_LIMITS
    from bashgym_assets.rollout.operators import ReferenceOperator
    from bashgym_assets.rollout.rollouts import run_rollouts

    by_id = {b.id: b for b in tasks}
    rounds: list[list[Any]] = []
    for plan in plans:
        k = next((i for i, r in enumerate(rounds) if all(p.scenario_id != plan.scenario_id for p in r)), None)
        if k is None:
            rounds.append([plan])
        else:
            rounds[k].append(plan)
    records: list[Any] = []
    for one_round in rounds:
        bundles = [by_id[p.scenario_id].model_copy(update={"reference": p.commands}) for p in one_round]
        records += run_rollouts(
            bundles, ReferenceOperator(), image, max_parallel=max_parallel, limits=ROLLOUT_LIMITS
        )
    return records


def recovery_rows(
    arm: Arm,
    data: PreparedData,
    tasks: Sequence[ScenarioBundle],
    attempts: Sequence[Any],
    image: str | None,
    per_task: int = 1,
    progress: Progress = print,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Recovery rows from the checkpoint's failed attempts (``training_data.recovery``): planned, replayed in real
    sandboxes, kept where the check passed, built as the arm's rows are (``build_sft``, the held-out guard, the
    arm's observation cut), the mistake marked untrained. Also what happened on the way, for the result."""
    from bashgym_assets.training_data.build import build_sft, contamination_violations
    from bashgym_assets.training_data.recovery import mark_mistakes, recovery_plans

    t0 = time.monotonic()
    references = {r["scenario_id"]: r["messages"] for r in data.rows}
    plans, plan_counts = recovery_plans(references, behaviour_failures(attempts), per_task=per_task)
    progress(
        f"[{arm.name}] recovery: {len(plans)} plans from the failed attempts ({plan_counts}); replaying them"
    )
    records = replay_plans(plans, tasks, image) if plans else []
    kept = [r for r in records if r.kept]
    heldout = heldout_guard(arm.tasks_per_family, arm.draw_seed)
    built = build_sft([], [r.model_dump() for r in kept], heldout, observation_chars=arm.observation_chars)
    rows, unmatched = mark_mistakes([r for r in built.rows if r["split"] == "train"], plans)
    if bad := contamination_violations(rows, heldout):
        raise RuntimeError(f"{len(bad)} recovery rows hold a held-out task, e.g. {bad[0]}")
    failure_of = {(p.scenario_id, p.mistake): p.failure for p in plans}
    info = {
        "plan_counts": plan_counts,
        "replayed": len(records),
        "recovered": len(rows),
        "replay_wall_s": round(time.monotonic() - t0, 1),
        "replay_failures": dict(
            Counter(r.reject_reason or "unknown" for r in records if not r.kept).most_common()
        )
        | ({"not_a_plan_after_build": unmatched} if unmatched else {})
        | ({"refused_by_build": len(built.quarantine)} if built.quarantine else {}),
        "mistakes_by_failure": dict(
            Counter(failure_of.get((r["scenario_id"], r["mistake"]), "?") for r in rows).most_common()
        ),
    }
    progress(f"[{arm.name}] recovery: {len(rows)}/{len(records)} replays passed their check")
    return rows, info


def continue_sft(
    study: StudyResult,
    label: str,
    rows: Sequence[dict[str, Any]],
    checkpoint: Path,
    epochs: float,
    base_model: str,
    image: str | None,
    work: Path,
    data: PreparedData,
    lake: Any = None,
    progress: Progress = print,
) -> ContinuedRun:
    """SFT going on from ``checkpoint`` (its LoRA trained further, the arm's recipe) over ``rows`` for ``epochs``,
    then fit and transfer as every checkpoint is evaluated."""
    from datetime import UTC, datetime

    from bashgym_assets.training.curriculum import stage_of
    from bashgym_assets.training.trainer import progress_line, train_sft

    arm = study.arm
    out = work / label
    config = train_config(
        arm, base_model, work, epochs, first=True
    ).model_copy(  # the arm's recipe, a run of its own
        update={
            "output_dir": str(out),
            "checkpoint_dir": str(work / f"{label}-checkpoints"),
            "run_name": f"{arm.name}-{label}",
            "start_adapter": str(checkpoint),
        }
    )
    for folder in (out, config.ckpt_dir()):
        if folder.exists():
            shutil.rmtree(folder)
    progress(f"[{arm.name}] {label}: {len(rows)} rows, {epochs:g} epochs from {checkpoint.name}")
    t0 = time.monotonic()
    res = train_sft(
        config,
        [r["messages"] for r in rows],
        on_log=lambda row: progress(f"[{arm.name}] {label} {progress_line(row)}"),
        stages=[stage_of(r) for r in rows],
    )
    train_wall = time.monotonic() - t0
    eval_id = f"{_EVAL_PREFIX}{arm.name}-{label}-{datetime.now(UTC).strftime('%H%M%S')}"
    progress(f"[{arm.name}] {label}: {res.steps} steps; evaluating {eval_id}")
    sets, episodes, eval_wall = evaluate_checkpoint(
        out, base_model, data, arm, image, eval_id, lake, progress
    )
    return ContinuedRun(
        label=label,
        rows=len(rows),
        steps=res.steps,
        tokens_seen=int(sum(h.get("tokens", 0) for h in res.history)),
        train_wall_s=round(train_wall, 1),
        loss=_mean_loss(res.history, max(1, math.ceil(res.steps / max(epochs, 1)))),
        eval_id=eval_id,
        eval_wall_s=round(eval_wall, 1),
        sets=sets,
        transcripts=[transcript_markdown(e, 1800) for e in failing_transcripts(episodes, arm.name, 3)],
    )


def recovery_on_top(
    study: StudyResult,
    settings: RecoverySettings,
    base_model: str,
    image: str | None,
    work: Path,
    lake: Any = None,
    progress: Progress = print,
) -> RecoveryResult:
    """Issue 38's recovery arm: the checkpoint's failed attempts made into replayed recovery rows, SFT going on
    from the checkpoint on the arm's rows plus those, and (``settings.control``) as long on the arm's rows alone,
    so what the recovery rows move is told apart from what more epochs move. Round N > 1 repeats it on round N-1's
    recovery run (its own new mistakes, the earlier rounds' rows kept, a mistake already recovered not twice),
    its control going on from round N-1's control: the two stay the same epochs apart from the checkpoint."""

    arm = study.arm
    n = settings.round
    # round 1 starts both runs from the epoch's checkpoint; round N from round N-1's recovery and control runs
    previous = settings.label("recovery", n - 1) if n > 1 else ""
    checkpoint, data, tasks, records, attempts_wall = own_attempts(
        study, settings, base_model, image, work, progress, source=previous
    )
    control_start = work / settings.label("control", n - 1) if n > 1 else checkpoint
    if settings.control and not (control_start / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"[{arm.name}] no adapter {control_start.name} in {work}: run round {n - 1} first"
        )
    earlier: list[dict[str, Any]] = []
    for k in range(1, n):
        kept_then = work / settings.rows_file(k)
        if not kept_then.is_file():
            raise FileNotFoundError(f"[{arm.name}] round {k}'s rows ({kept_then.name}) are not in {work}")
        earlier += json.loads(kept_then.read_text(encoding="utf-8"))
    rows, info = recovery_rows(arm, data, tasks, records, image, settings.per_task, progress)
    seen = {(r["scenario_id"], r.get("mistake")) for r in earlier}
    if repeated := [r for r in rows if (r["scenario_id"], r.get("mistake")) in seen]:
        info["replay_failures"] = info["replay_failures"] | {"an_earlier_round_s_row": len(repeated)}
        rows = [r for r in rows if (r["scenario_id"], r.get("mistake")) not in seen]
        info["recovered"] = len(rows)
    if not rows and not earlier:
        raise RuntimeError(
            f"[{arm.name}] no recovery row: no replay of epoch {settings.from_epoch}'s mistakes passed its check "
            f"({info['plan_counts']}, replays {info['replay_failures']})"
        )
    # a later round that found no new mistake still goes on with the earlier rounds' rows (its result says 0 new)
    kept = work / settings.rows_file()  # the rows as trained, to read beside the result
    kept.write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    runs = [
        continue_sft(
            study,
            settings.label("recovery"),
            [*data.rows, *earlier, *rows],
            checkpoint,
            settings.epochs,
            base_model,
            image,
            work,
            data,
            lake,
            progress,
        )
    ]
    if settings.control:
        runs.append(
            continue_sft(
                study,
                settings.label("control"),
                data.rows,
                control_start,
                settings.epochs,
                base_model,
                image,
                work,
                data,
                lake,
                progress,
            )
        )
    example = (rows or earlier)[0]
    return RecoveryResult(
        settings=settings,
        attempts=len(records),
        attempts_clean=sum(r.kept for r in records),
        attempts_wall_s=round(attempts_wall, 1),
        plan_counts=info["plan_counts"],
        replayed=info["replayed"],
        recovered=info["recovered"],
        replay_wall_s=info["replay_wall_s"],
        replay_failures=info["replay_failures"],
        mistakes_by_failure=info["mistakes_by_failure"],
        runs=runs,
        example=_row_transcript(example),
    )


def _row_transcript(row: dict[str, Any], max_chars: int = 1800) -> str:
    """A recovery row as the model reads it, its untrained mistake marked."""
    from bashgym_assets.rollout.transcript import is_untrained

    lines = [f"**{row['scenario_id']}** (recovery of a `{row.get('recovery_of')}` attempt)", "", "```"]
    for m in row["messages"]:
        if m["role"] == "assistant":
            lines.append(
                f"$ {m['content']}" + ("    # the mistake: shown, not trained" if is_untrained(m) else "")
            )
        elif m["role"] == "user":
            lines.append(m["content"][:400])
    lines.append("```")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 4] + "\n```"


def recovery_markdown(study: StudyResult, r: RecoveryResult) -> list[str]:
    """The recovery run and its control beside the SFT checkpoint they went on from."""
    s = r.settings
    sft = next((c for c in study.checkpoints if c.epoch == s.from_epoch), None)
    lines = [
        (f"Round {s.round}: " if s.round > 1 else "")
        + f"Recovery rows on top of epoch {s.from_epoch} ({s.samples} attempts a trained task at temperature "
        f"{s.temperature:g}, at most {s.per_task} mistake a task): {r.attempts_clean}/{r.attempts} attempts clean; "
        f"plans {r.plan_counts.get('planned', 0)} ({', '.join(f'{k} {v}' for k, v in r.plan_counts.items())}); "
        f"**{r.recovered}/{r.replayed} replays passed their check** (dropped: "
        f"{', '.join(f'{k} {v}' for k, v in r.replay_failures.items()) or 'none'}; mistakes kept by failure: "
        f"{', '.join(f'{k} {v}' for k, v in r.mistakes_by_failure.items())}); attempts "
        f"{_minutes(r.attempts_wall_s)}, replays {_minutes(r.replay_wall_s)}. Both runs go on {s.epochs:g} epochs "
        "from the checkpoint with the arm's recipe:",
        "",
        "| model | rows | steps | tokens seen | training wall | loss | fit clean | transfer clean | "
        "fit failures (detail) | transfer failures (detail) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    if sft is not None:
        fit, transfer = sft.sets.get(FIT), sft.sets.get(TRANSFER)
        lines.append(
            f"| SFT epoch {s.from_epoch} | {study.train_rows} | {sft.steps} | {sft.tokens_seen:,} | "
            f"{_minutes(sft.train_wall_s)} | {sft.loss} | {_rate(fit)} | {_rate(transfer)} | "
            f"{_failures(fit) if fit else '-'} | {_failures(transfer) if transfer else '-'} |"
        )
    earlier = [
        run
        for e in sorted(study.recovery, key=lambda e: e.settings.round)
        if e.settings.round < s.round and e.settings.from_epoch == s.from_epoch
        for run in e.runs
    ]
    for run in [*earlier, *r.runs]:
        fit, transfer = run.sets.get(FIT), run.sets.get(TRANSFER)
        name = "+ recovery rows" if run.label.startswith("recovery") else "+ same epochs, no recovery rows"
        lines.append(
            f"| {name} (`{run.label}`) | {run.rows} | +{run.steps} | +{run.tokens_seen:,} | "
            f"{_minutes(run.train_wall_s)} | {run.loss} | {_rate(fit)} | {_rate(transfer)} | "
            f"{_failures(fit) if fit else '-'} | {_failures(transfer) if transfer else '-'} |"
        )
    if r.example:
        lines += ["", "One recovery row:", "", r.example]
    return lines


# ---- GRPO on top ------------------------------------------------------------------------------------------------
def grpo_on_top(
    study: StudyResult,
    settings: GrpoSettings,
    base_model: str,
    image: str | None,
    work: Path,
    lake: Any = None,
    progress: Progress = print,
) -> GrpoResult:
    """GRPO from the arm's SFT checkpoint of ``settings.from_epoch`` (issue 38: "then DPO and GRPO on top once SFT
    finishes some tasks of a family"): ``training.grpo.train_grpo`` on the arm's trained tasks, each episode played
    as the arm is evaluated (its turn and token caps, the evaluation's time limits) and rewarded by the task's check,
    then fit and transfer greedily, as every checkpoint is evaluated. A task the checkpoint always or never
    finishes gives a group with no advantage; the informative sampler prefers the others."""
    from datetime import UTC, datetime

    from bashgym_assets.training.grpo import GRPOSettings, train_grpo
    from bashgym_assets.training.grpo.train import progress_line
    from bashgym_assets.training.trainer import TrainConfig

    arm = study.arm
    start = settings.on_run or f"epoch {settings.from_epoch}"
    pool: dict[str, int] = {}
    attempts_wall = 0.0
    if settings.attempts:  # the start's own attempts say which tasks can give a group a pass and a fail
        checkpoint, data, tasks, records, attempts_wall = own_attempts(
            study, settings.attempt_settings(), base_model, image, work, progress, source=settings.on_run
        )
        sometimes, pool = sometimes_finished(records)
        progress(
            f"[{arm.name}] GRPO: {start}'s {len(records)} attempts: "
            + ", ".join(f"{k} {v}" for k, v in pool.items())
            + f" of {len(tasks)} trained tasks; playing the {len(sometimes)} sometimes finished"
        )
        if not sometimes:
            raise RuntimeError(
                f"[{arm.name}] GRPO: {start} finished no trained task only sometimes in {settings.attempts} "
                f"attempts a task ({pool}): no group would have both a pass and a fail; give more "
                "--grpo-attempts, or 0 to play every task"
            )
        playing = set(sometimes)
        tasks = [t for t in tasks if t.id in playing]
    else:
        checkpoint = start_adapter(work, arm, settings.from_epoch, settings.on_run)
        data = arm_data(arm, work)
        tasks = trained_bundles(arm, data)
    limits = EvalSettings(max_turns=arm.max_turns)  # the episode the model is then evaluated on
    play = GRPOSettings(
        num_generations=settings.generations,
        scenarios_per_step=settings.tasks_per_step,
        max_turns=arm.max_turns,
        max_new_tokens=arm.max_new_tokens,
        max_context_tokens=max(2048, arm.train.max_length),
        temperature=settings.temperature,
        command_timeout_s=limits.command_timeout_s,
        episode_timeout_s=limits.episode_timeout_s,
        check_timeout_s=limits.check_timeout_s,
        max_unusable_in_a_row=limits.max_unusable_in_a_row,
        beta=settings.beta,
        prefer_informative=settings.informative,
    )
    label = settings.label()
    out = work / label
    config = TrainConfig(
        **arm.train.model_dump(
            include={"dtype", "qlora", "attn_implementation", "lora_r", "lora_alpha", "max_length"}
        ),
        target_modules=arm.train.targets(),
        max_steps=settings.steps,
        learning_rate=settings.learning_rate,
        warmup_steps=0,
        seed=settings.seed,
        base_model=base_model,
        output_dir=str(out),
        checkpoint_dir=str(work / f"{label}-checkpoints"),
        run_name=f"{arm.name}-{label}",
        save_every=10**9,
        resume=False,
    )
    for folder in (out, config.ckpt_dir()):
        if folder.exists():
            shutil.rmtree(folder)
    progress(
        f"[{arm.name}] GRPO from {start}: {settings.steps} steps of {settings.tasks_per_step} "
        f"x {settings.generations} episodes over {len(tasks)} trained tasks"
    )
    t0 = time.monotonic()
    run = train_grpo(
        config,
        play,
        tasks,
        str(checkpoint),
        image,
        on_log=lambda row: progress(f"[{arm.name}] GRPO {progress_line(row)}"),
        progress=progress,
    )
    train_wall = time.monotonic() - t0
    eval_id = f"{_EVAL_PREFIX}{arm.name}-{label}-{datetime.now(UTC).strftime('%H%M%S')}"
    progress(f"[{arm.name}] GRPO: {run.result.steps} steps; evaluating {eval_id}")
    sets, episodes, eval_wall = evaluate_checkpoint(
        out, base_model, data, arm, image, eval_id, lake, progress
    )
    extra = run.result.extra
    return GrpoResult(
        settings=settings,
        steps=run.result.steps,
        episodes=int(extra.get("episodes", 0)),
        train_wall_s=round(train_wall, 1),
        rollout_share=float(extra.get("rollout_share", 0.0)),
        informative_frac=float(extra.get("informative_frac", 0.0)),
        per_step=[
            {
                "step": s.step,
                "success_rate": round(s.success_rate, 4),
                "reward_mean": round(s.reward_mean, 4),
                "informative_frac": round(s.informative_frac, 4),
            }
            for s in run.steps
        ],
        hacks=int(extra.get("hacks", 0)),
        infra_errors=int(extra.get("infra_errors", 0)),
        loss_last=run.result.final_loss,
        tasks_played=len({g.scenario_id for g in run.groups}),
        pool=pool,
        attempts_wall_s=round(attempts_wall, 1),
        eval_id=eval_id,
        eval_wall_s=round(eval_wall, 1),
        sets=sets,
        transcripts=[transcript_markdown(e, 1800) for e in failing_transcripts(episodes, arm.name, 3)],
    )


def grpo_markdown(study: StudyResult, g: GrpoResult) -> list[str]:
    """GRPO's row beside the SFT checkpoint it started from, and its training success step by step."""
    s = g.settings
    start, start_row, start_sets = _start_of(study, s.from_epoch, s.on_run)
    curve = ", ".join(f"{p['success_rate']:.0%}" for p in g.per_step)
    pool = (
        f"; only the {g.pool.get('sometimes', 0)} trained tasks its {s.attempts} attempts a task both finished and "
        f"failed ({', '.join(f'{k} {v}' for k, v in g.pool.items())}; attempts {_minutes(g.attempts_wall_s)})"
        if s.attempts
        else ""
    )
    lines = [
        f"GRPO on top of {start} ({s.steps} steps of {s.tasks_per_step} tasks x {s.generations} "
        f"episodes at temperature {s.temperature:g}; lr {s.learning_rate:g}, beta {s.beta:g}"
        f"{', informative tasks preferred' if s.informative else ''}{pool}): **{g.episodes} episodes**"
        f"{f' ({g.tasks_played} tasks)' if g.tasks_played else ''} in "
        f"{_minutes(g.train_wall_s)} ({g.rollout_share:.0%} of it playing), {g.informative_frac:.0%} of the groups "
        f"informative, {g.hacks} hacks, {g.infra_errors} sandbox errors, last loss {_figure(g.loss_last)}; "
        f"evaluation {_minutes(g.eval_wall_s)} (`{g.eval_id}`). Training success by step: {curve or '-'}.",
        "",
        *_beside(start_row, start_sets, "+ GRPO", g.sets),
    ]
    return lines


class EvaluatedModel(BaseModel):
    """One model of the arm evaluated on fit and transfer: its label, the work folder that holds it, its
    evaluation and its sets."""

    label: str
    folder: str
    eval_id: str
    sets: dict[str, SetResult]


def arm_models(study: StudyResult) -> list[EvaluatedModel]:
    """Every model of the arm evaluated on fit and transfer, in the order they were made: ``e8`` (a checkpoint,
    folder ``epoch-8``), ``dpo-e8`` (``dpo-e8-lr0.0001-x3`` where DPO from that start ran more than once; the folder
    holds the latest), a continued run's own label (``recovery-e8``, ``control-e8-r2``), ``grpo-e8`` (the same
    suffix rule)."""
    found = [
        EvaluatedModel(label=f"e{c.epoch}", folder=f"epoch-{c.epoch}", eval_id=c.eval_id, sets=c.sets)
        for c in study.checkpoints
    ]
    dpo_labels = Counter(d.settings.label() for d in study.dpo)
    for d in study.dpo:
        folder = label = d.settings.label()
        if dpo_labels[label] > 1:
            label += f"-lr{d.settings.learning_rate:g}-x{d.settings.epochs:g}"
        found.append(EvaluatedModel(label=label, folder=folder, eval_id=d.eval_id, sets=d.sets))
    for r in study.recovery:
        found += [
            EvaluatedModel(label=run.label, folder=run.label, eval_id=run.eval_id, sets=run.sets)
            for run in r.runs
        ]
    grpo_labels = Counter(g.settings.label() for g in study.grpo)
    for g in study.grpo:
        folder = label = g.settings.label()
        if grpo_labels[label] > 1:
            label += f"-lr{g.settings.learning_rate:g}-x{g.settings.steps}"
        found.append(EvaluatedModel(label=label, folder=folder, eval_id=g.eval_id, sets=g.sets))
    return found


def evaluated_models(study: StudyResult) -> dict[str, str]:
    """``arm_models`` by label, to its evaluation's id (what ``--paired`` takes)."""
    return {m.label: m.eval_id for m in arm_models(study)}


def paired(study: StudyResult, data: PreparedData, lake: Any, a: str, b: str) -> dict[str, PairedTest]:
    """Models ``a`` (the candidate) and ``b`` of ``evaluated_models`` compared task by task on fit and transfer,
    from their episodes in the lake (``promotion.sign_test``: a rate difference on 24 tasks says little; the
    discordant tasks say how much of it is noise)."""
    models = evaluated_models(study)
    for label in (a, b):
        if label not in models:
            raise KeyError(f"[{study.arm.name}] no model {label!r}; evaluated: {', '.join(models)}")
    episodes = {
        label: [EvalEpisode.model_validate(r) for r in lake.read("eval_episodes", models[label]).to_pylist()]
        for label in (a, b)
    }
    out = {}
    for name, bundles in ((FIT, data.fit), (TRANSFER, data.transfer)):
        ids = {x.id for x in bundles}
        out[name] = sign_test(*[[e for e in episodes[m] if e.scenario_id in ids] for m in (a, b)])
    return out


def extended(previous: StudyResult, epochs: int, eval_epochs: Sequence[int] = ()) -> Arm:
    """The arm of ``previous`` trained on to ``epochs`` (its checkpoints, and ``eval_epochs`` on the way): the same
    data and recipe, so the segments after its last checkpoint resume it as one run (a constant rate)."""
    arm = previous.arm
    return Arm.model_validate(
        {
            **arm.model_dump(),
            "eval_epochs": sorted({*arm.eval_epochs, *eval_epochs}),
            "train": {**arm.train.model_dump(), "epochs": float(epochs)},
        }
    )


def _check_resumable(previous: StudyResult, arm: Arm, work: Path) -> None:
    """Only the same arm, trained further, with its last trainer checkpoint in ``work``, is extended."""
    from bashgym_assets.training.trainer import checkpoint_step

    last = previous.checkpoints[-1]
    same = previous.arm.model_dump(exclude={"eval_epochs", "train"}) == arm.model_dump(
        exclude={"eval_epochs", "train"}
    ) and previous.arm.train.model_dump(exclude={"epochs"}) == arm.train.model_dump(exclude={"epochs"})
    if not same or arm.train.epochs <= last.epoch:
        raise ValueError(
            f"[{arm.name}] extends only the same arm to more epochs than its last checkpoint ({last.epoch})"
        )
    steps = {checkpoint_step(p) for p in (work / "checkpoints").glob("checkpoint-*")}
    if last.steps not in steps:
        raise ValueError(
            f"[{arm.name}] the trainer checkpoint of epoch {last.epoch} (step {last.steps}) is not in "
            f"{work / 'checkpoints'}: the arm cannot resume, run it anew"
        )


class StepProbe(BaseModel):
    """A few optimizer steps of an arm's recipe on its rows: what a step costs, to size the arm before it runs."""

    steps: int
    train_rows: int
    tokens_per_epoch: int
    steps_per_epoch: int
    s_per_step: float
    tokens_per_s: float
    wall_s: float

    def projection(self, epochs: int) -> str:
        total = self.steps_per_epoch * epochs
        return (
            f"{self.s_per_step:.1f} s a step ({self.tokens_per_s:.0f} tokens/s), ~{self.steps_per_epoch} steps an "
            f"epoch: {epochs} epochs = {total} steps, ~{total * self.s_per_step / 60:.0f} min of training"
        )


def probe_steps(
    arm: Arm, base_model: str, image: str | None, work: Path, steps: int = 3, progress: Progress = print
) -> StepProbe:
    """Train ``steps`` optimizer steps of the arm into ``work/probe`` (thrown away) and time them; the data is
    prepared (or reused) as ``run_arm`` does. Steps an epoch are estimated from the tokens (packing is dense)."""
    from bashgym_assets.training.curriculum import stage_of
    from bashgym_assets.training.trainer import progress_line, train_sft

    data = prepared(arm, image, work / "prepared.json", progress)
    probe = work / "probe"
    cfg = train_config(arm, base_model, probe, max(arm.eval_epochs), first=True, max_steps=steps)
    t0 = time.monotonic()
    res = train_sft(
        cfg,
        [r["messages"] for r in data.rows],
        on_log=lambda row: progress(f"[{arm.name}] probe {progress_line(row)}"),
        stages=[stage_of(r) for r in data.rows],
    )
    wall = time.monotonic() - t0
    shutil.rmtree(probe, ignore_errors=True)
    tokens = int(sum(h.get("tokens", 0) for h in res.history))
    return StepProbe(
        steps=res.steps,
        train_rows=len(data.rows),
        tokens_per_epoch=res.train_tokens,
        steps_per_epoch=math.ceil(
            math.ceil(res.train_tokens / arm.train.max_length) / (arm.train.grad_accum * arm.train.batch_size)
        ),
        s_per_step=round(res.wall_s / max(1, res.steps), 2),
        tokens_per_s=round(tokens / res.wall_s, 1) if res.wall_s else 0.0,
        wall_s=round(wall, 1),
    )


# the split is in the id: fit figures must never pass for held-out ones (gate.TRAIN_SPLIT_EVAL_PREFIX)
_EVAL_PREFIX = "eval-cli-train-study-"


def _mean_loss(history: Sequence[dict[str, float]], last: int) -> float | None:
    """The mean training loss over the last epoch's steps (one step's loss is one packed row's: noisy)."""
    losses = [h["loss"] for h in history if "loss" in h][-max(1, last) :]
    return round(sum(losses) / len(losses), 4) if losses else None


# ---- reports ------------------------------------------------------------------------------------------------------
def _failures(s: SetResult) -> str:
    classes = ", ".join(f"{k} {v}" for k, v in s.failure_classes.items()) or "-"
    details = ", ".join(f"{k} {v}" for k, v in s.failure_details.items())
    return classes + (f" ({details})" if details else "")


def checkpoint_line(c: CheckpointResult) -> str:
    """One checkpoint in a line, for the log."""
    sets = "; ".join(f"{name} clean {s.clean.fmt()} (n {s.n})" for name, s in c.sets.items())
    return (
        f"epoch {c.epoch}: {c.steps} steps, {c.tokens_seen:,} tokens, training {c.train_wall_s:.0f} s, "
        f"loss {c.loss}; {sets}; evaluation {c.eval_wall_s:.0f} s"
    )


def study_markdown(study: StudyResult) -> str:
    """The arm's report: the recipe, the data, one row per checkpoint, the failing transcripts of the last."""
    arm = study.arm
    stopped = "" if study.finished else ", stopped before its last checkpoint"
    lines = [f"## Arm `{arm.name}` ({study.started}{stopped})", ""]
    lines += [f"Machine: {study.machine}  "] if study.machine else []
    lines += [f"Command: `{study.command}`  "] if study.command else []
    lines += [
        f"Base model: `{study.base_model}`  ",
        f"Recipe: {arm.recipe()}  ",
        f"Families: {', '.join(arm.families)}  ",
        f"Data: {', '.join(f'{k} {v}' for k, v in study.data.items())}; {study.train_rows} train rows, "
        f"{study.train_tokens_per_epoch:,} tokens an epoch, {study.steps_per_epoch} optimizer steps an epoch; "
        + (
            f"preparation {_minutes(study.prepare_wall_s)}"
            if study.prepare_wall_s
            else "prepared data reused (its time not recorded)"
        ),
        "",
        "| epoch | steps | tokens seen | training wall | loss (last epoch) | fit clean | transfer clean | "
        "fit failures (detail) | transfer failures (detail) | evaluation wall |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in study.checkpoints:
        fit, transfer = c.sets.get(FIT), c.sets.get(TRANSFER)
        lines.append(
            f"| {c.epoch} | {c.steps} | {c.tokens_seen:,} | {_minutes(c.train_wall_s)} | {c.loss} | "
            f"{_rate(fit)} | {_rate(transfer)} | {_failures(fit) if fit else '-'} | "
            f"{_failures(transfer) if transfer else '-'} | {_minutes(c.eval_wall_s)} |"
        )
    if study.checkpoints:
        last = study.checkpoints[-1]
        lines += ["", f"Clean by family at epoch {last.epoch}:", ""]
        lines += ["| family | fit | transfer |", "|---|---|---|"]
        families = sorted({f for s in last.sets.values() for f in s.by_family})
        for f in families:
            lines.append(
                "| "
                + " | ".join(
                    [f, *(last.sets[n].by_family.get(f, "-") if n in last.sets else "-" for n in STUDY_SETS)]
                )
                + " |"
            )
    for judged in study.clean:
        lines += ["", *clean_markdown(study.arm.name, judged)]
    for preferred in study.dpo:
        lines += ["", *dpo_markdown(study, preferred)]
    for recovered in study.recovery:
        lines += ["", *recovery_markdown(study, recovered)]
    for reinforced in study.grpo:
        lines += ["", *grpo_markdown(study, reinforced)]
    if study.checkpoints:
        last = study.checkpoints[-1]
        if last.transcripts:
            lines += ["", f"Failed episodes at epoch {last.epoch}:", ""]
            for t in last.transcripts:
                lines += [t, ""]
    return "\n".join(lines).rstrip() + "\n"


def clean_markdown(arm: str, c: CleanResult) -> list[str]:
    """The clean sets' table of one checkpoint against the base, the promotion verdict, finished transcripts."""
    names = sorted({n for per_set in c.sets.values() for n in per_set})
    lines = [
        f"Clean sets (nothing of the study trains on them), epoch {c.epoch} against the base, one evaluation "
        f"(`{c.eval_id}`, {_minutes(c.eval_wall_s)}):",
        "",
        "| model | "
        + " | ".join(f"{n} clean | {n} operate | {n} terminate" for n in names)
        + " | failures |",
        "|---|" + "---|" * (3 * len(names) + 1),
    ]
    for label, per_set in c.sets.items():
        cells = []
        for n in names:
            s = per_set.get(n)
            cells += [_rate(s), s.operate.fmt() if s else "-", s.terminate.fmt() if s else "-"]
        failures = "; ".join(f"{n}: {_failures(per_set[n])}" for n in names if n in per_set)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {failures} |")
    verdict = "promote" if c.promote else "keep the base"
    lines += ["", f"Promotion rule, `{arm}` epoch {c.epoch} against the base: **{verdict}** ({c.promotion})."]
    if c.transcripts:
        lines += ["", f"Held-out episodes `{arm}` finished:", ""]
        for t in c.transcripts:
            lines += [t, ""]
    return lines


def _figure(x: float | None) -> str:
    """A loss or an accuracy as read in a table: four significant digits."""
    return "-" if x is None else f"{x:.4g}"


def _rate(s: SetResult | None) -> str:
    return f"{s.clean.fmt()} ({s.clean.k}/{s.n})" if s is not None else "-"


def _minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s"
