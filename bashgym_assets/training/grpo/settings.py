"""What a GRPO run plays and how it trains, as settings: their own module because the Dagster run config
(``defs/grpo.py``), the episodes and the trainer all read them, and none of those should have to import another (or
TRL) to get them."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from bashgym_assets.rollout.episode import GRPO_LIMITS, EpisodeLimits, limit_field
from bashgym_assets.training.trainer import LearningRate, MaxSteps, SharedHyperparams

Progress = Callable[[str], None]  # where a long step says what it is doing (a log line, ``print``)


class GRPOHyperparams(SharedHyperparams):
    """How a GRPO run trains: the fields every trainer honours (``SharedHyperparams``: steps, learning rate,
    precision, checkpoints), with GRPO's defaults where they differ. The batch is not among them: one group per
    micro-batch, ``scenarios_per_step`` of them per step (``train.grpo_train_config``)."""

    max_steps: MaxSteps = 10  # required: an epoch over scenarios means nothing here
    learning_rate: LearningRate = 5e-5  # a policy-gradient step on an SFT adapter: smaller than SFT's


class GRPOSettings(BaseModel):
    """What a GRPO run plays: group size, groups per optimizer step, episode caps, sampling, the sampler."""

    num_generations: int = 4  # episodes per scenario (the group whose rewards are compared)
    scenarios_per_step: int = 2  # groups per optimizer step (all played together, in lockstep)
    max_turns: int = limit_field(GRPO_LIMITS, "max_turns")
    max_new_tokens: int = 64  # per reply
    max_context_tokens: int = 2048  # prompt + episode; an episode that would outgrow it ends (unterminated)
    temperature: float = 0.8
    top_p: float = 1.0
    command_timeout_s: float = limit_field(GRPO_LIMITS, "command_timeout_s")
    turn_timeout_s: float = 30.0  # a command still running after this is cut off with its episode
    episode_timeout_s: float = limit_field(GRPO_LIMITS, "episode_timeout_s")  # sandbox time per episode
    check_timeout_s: float = limit_field(GRPO_LIMITS, "check_timeout_s")
    max_unusable_in_a_row: int | None = limit_field(GRPO_LIMITS, "max_unusable_in_a_row")
    setup_workers: int = 4
    micro_batch: int = 16  # sequences per generate call
    beta: float = 0.0  # KL to the SFT model (0: no reference forward pass, TRL's default)
    prefer_informative: bool = True
    # A curriculum by difficulty: draw only scenarios up to a ceiling that starts at the easiest difficulty and
    # rises by one when the last ``ladder_window`` scored episodes under it pass at ``ladder_promote_at`` or more.
    difficulty_ladder: bool = False
    ladder_promote_at: float = 0.5
    ladder_window: int = 16

    def limits(self) -> EpisodeLimits:
        """The caps of every episode the run plays."""
        return EpisodeLimits(
            max_turns=self.max_turns,
            episode_timeout_s=self.episode_timeout_s,
            command_timeout_s=self.command_timeout_s,
            check_timeout_s=self.check_timeout_s,
            max_unusable_in_a_row=self.max_unusable_in_a_row,
        )
