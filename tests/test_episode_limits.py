"""One source for the episode caps (issue 41: four classes had four ``max_turns`` defaults, and the Dagster configs
copied them again). The caps live in ``rollout.episode``: ``EpisodeLimits`` and one profile per kind of run; every
entry point (plain settings, Dagster run config, command-line options) takes its defaults from its profile."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from bashgym_assets.config import PROJECT_ROOT
from bashgym_assets.rollout import episode
from bashgym_assets.rollout.episode import EpisodeLimits

#: entry point -> the profile its defaults come from
PROFILE_OF = {
    "RolloutConfig (verified_trajectories)": "ROLLOUT_LIMITS",
    "EvalSettings": "EVAL_LIMITS",
    "EvalRunConfig (benchmark_results)": "EVAL_LIMITS",
    "bashgym eval options": "EVAL_LIMITS",
    "StudentSettings": "STUDENT_LIMITS",
    "StudentRolloutConfig (student_rollouts)": "STUDENT_LIMITS",
    "GRPOSettings": "GRPO_LIMITS",
    "GRPORunConfig (grpo_adapter)": "GRPO_LIMITS",
}


def entry_limits() -> dict[str, EpisodeLimits]:
    """The caps each entry point's defaults give an episode."""
    from bashgym_assets.defs.evaluation import EvalRunConfig
    from bashgym_assets.defs.grpo import GRPORunConfig, _settings
    from bashgym_assets.defs.student import StudentRolloutConfig
    from bashgym_assets.defs.trajectories import RolloutConfig
    from bashgym_assets.evaluation.cli import add_run_options, eval_settings
    from bashgym_assets.evaluation.runner import EvalSettings
    from bashgym_assets.evaluation.student import StudentSettings
    from bashgym_assets.training.grpo.settings import GRPOSettings

    parser = argparse.ArgumentParser()
    add_run_options(parser)
    run = EvalRunConfig()
    return {
        "RolloutConfig (verified_trajectories)": RolloutConfig().limits(),
        "EvalSettings": EvalSettings().limits(),
        "EvalRunConfig (benchmark_results)": EvalSettings.model_validate(
            run.model_dump(include=set(EvalSettings.model_fields))
        ).limits(),
        "bashgym eval options": eval_settings(parser.parse_args([])).limits(),
        "StudentSettings": StudentSettings().eval_settings().limits(),
        "StudentRolloutConfig (student_rollouts)": StudentRolloutConfig()
        .student_settings()
        .eval_settings()
        .limits(),
        "GRPOSettings": GRPOSettings().limits(),
        "GRPORunConfig (grpo_adapter)": _settings(GRPORunConfig()).limits(),
    }


def test_every_entry_point_takes_its_caps_from_its_profile() -> None:
    got = entry_limits()
    assert got.keys() == PROFILE_OF.keys()
    for entry, limits in got.items():
        assert limits == getattr(episode, PROFILE_OF[entry]), entry


def test_the_descriptions_of_the_caps_are_the_ones_of_episode_limits() -> None:
    """The launchpad and ``--help`` say what ``EpisodeLimits`` says of each cap."""
    from bashgym_assets.defs.student import StudentRolloutConfig
    from bashgym_assets.defs.trajectories import RolloutConfig
    from bashgym_assets.evaluation.runner import EvalSettings
    from bashgym_assets.training.grpo.settings import GRPOSettings

    for model in (EvalSettings, StudentRolloutConfig, GRPOSettings, RolloutConfig):
        for name, field in model.model_fields.items():
            if name in EpisodeLimits.model_fields:
                assert field.description == EpisodeLimits.model_fields[name].description, (model, name)


#: run in a fresh interpreter: each profile replaced by one with caps of its own before any entry point is
#: imported, then the entry points' caps printed
CHANGED_SOURCE = """
import json, sys
from bashgym_assets.rollout import episode
for i, name in enumerate(["ROLLOUT_LIMITS", "EVAL_LIMITS", "STUDENT_LIMITS", "GRPO_LIMITS"]):
    changed = {"max_turns": 90 + i, "episode_timeout_s": 80.5 + i, "command_timeout_s": 70.5 + i,
               "check_timeout_s": 60.5 + i, "max_unusable_in_a_row": 50 + i}
    setattr(episode, name, episode.EpisodeLimits(**changed))
sys.path.insert(0, sys.argv[1])
import test_episode_limits as t
print(json.dumps({entry: limits.model_dump() for entry, limits in t.entry_limits().items()}))
"""


def test_changing_a_profile_changes_every_entry_point_that_uses_it(tmp_path: Path) -> None:
    env = {**os.environ, "BASHGYM_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", CHANGED_SOURCE, str(Path(__file__).parent)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    order = ["ROLLOUT_LIMITS", "EVAL_LIMITS", "STUDENT_LIMITS", "GRPO_LIMITS"]
    for entry, profile in PROFILE_OF.items():
        i = order.index(profile)
        assert got[entry]["max_turns"] == 90 + i, entry
        assert got[entry]["episode_timeout_s"] == 80.5 + i, entry
        assert got[entry]["max_unusable_in_a_row"] == 50 + i, entry
    # the caps an entry point does not set itself still come from its profile
    assert got["RolloutConfig (verified_trajectories)"]["command_timeout_s"] == 70.5
    assert got["StudentSettings"]["check_timeout_s"] == 60.5 + 2
