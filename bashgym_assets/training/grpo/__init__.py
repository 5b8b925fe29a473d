"""GRPO on live sandbox episodes: TRL's ``GRPOTrainer`` with a multi-turn ``rollout_func`` that plays whole
episodes in real sandboxes, and the verifiable reward that scores them.

Why a rollout function and not TRL's tool loop: the model here types ONE shell command per turn in the plain
chat format every other stage uses (``rollout.transcript``), which TRL's tool-calling templates do not speak. TRL
1.16 lets ``rollout_func(prompts, trainer)`` return the token ids itself (``prompt_ids``, ``completion_ids``,
``logprobs`` = None without vLLM) plus ``env_mask`` (1 = the model's tokens, 0 = what the terminal printed, which
then carries no loss); every other key it returns reaches the reward functions as a keyword argument.

The package, along its seams (inside it and in ``defs/``, import from the module itself; this file re-exports
every public name so ``from bashgym_assets.training import grpo`` keeps working):

- ``settings``: ``GRPOSettings``, what a run plays, and ``GRPOHyperparams``, how it trains;
- ``reward``: outcomes, the reward, reward-hacking detection (pure: no torch, TRL or sandbox);
- ``episodes``: token ids and a batch of episodes played in lockstep on rollout's batched-episode engine;
- ``sampler``: group statistics, the scenario board, the informative sampler;
- ``train``: the ``rollout_func``, the train scenarios, ``train_grpo``, progress lines, plots, transcripts.

Heavy imports (torch, transformers, trl, peft) stay inside the functions that need them.
"""

from bashgym_assets.inference.turns import end_of_turn_id
from bashgym_assets.training.grpo.episodes import (
    PlayedEpisode,
    Policy,
    observation_token_ids,
    play_episodes,
    prompt_token_ids,
    split_reply,
)
from bashgym_assets.training.grpo.reward import (
    REWARD_KEYS,
    EpisodeOutcome,
    RewardSpec,
    detect_hack,
    episode_reward,
    hack_in_command,
    make_reward_func,
)
from bashgym_assets.training.grpo.sampler import (
    GroupRecord,
    InformativeSampler,
    ScenarioBoard,
    StepRecord,
    group_records,
)
from bashgym_assets.training.grpo.settings import GRPOHyperparams, GRPOSettings, Progress
from bashgym_assets.training.grpo.train import (
    GRPORun,
    ShellRollout,
    grpo_train_config,
    progress_line,
    reward_curve_png,
    train_bundles,
    train_grpo,
    transcript_markdown,
)

__all__ = [
    "REWARD_KEYS",
    "EpisodeOutcome",
    "GRPOHyperparams",
    "GRPORun",
    "GRPOSettings",
    "GroupRecord",
    "InformativeSampler",
    "PlayedEpisode",
    "Policy",
    "Progress",
    "RewardSpec",
    "ScenarioBoard",
    "ShellRollout",
    "StepRecord",
    "detect_hack",
    "end_of_turn_id",
    "episode_reward",
    "group_records",
    "grpo_train_config",
    "hack_in_command",
    "make_reward_func",
    "observation_token_ids",
    "play_episodes",
    "progress_line",
    "prompt_token_ids",
    "reward_curve_png",
    "split_reply",
    "train_bundles",
    "train_grpo",
    "transcript_markdown",
]
