"""Sandboxed episodes driven from outside: the public batched-episode engine the evaluation and GRPO share.

A ``LiveEpisode`` is one scenario attempt whose turns a caller drives (the evaluation's continuous or lockstep
loop, GRPO's group rollouts): ``open_episode`` starts its container, runs the setup and opens the operator's
shell; ``apply_reply`` runs one reply in it; ``check_and_close`` runs the check on the final state and removes the
container. None of them raises: every failure is recorded on the episode (``setup_error``, ``sandbox_error``),
so one broken container never costs the others of the batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bashgym_assets.rollout.episode import EpisodeDriver, EpisodeLimits, TimeCap
from bashgym_assets.rollout.operators import Operator, Reply
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.sandboxing import spec_for_bundle


@dataclass
class LiveEpisode:
    """One attempt at one scenario, its container and its turn driver, as a batch loop holds it."""

    bundle: ScenarioBundle
    sample_index: int
    operator: Operator
    box: Any = None
    driver: EpisodeDriver | None = None
    setup_error: str = ""
    sandbox_error: str = ""
    started: float = 0.0
    check: Any = None  # the check's CommandResult once it ran (GRPO reads its refusals: tampering)

    @property
    def opened(self) -> EpisodeDriver:
        """The turn driver, for the steps that only run on an episode ``open_episode`` started (a reply asked
        for or applied); an episode that was never opened is a caller's bug, said as one."""
        if self.driver is None:
            raise RuntimeError(f"episode {self.bundle.id} (sample {self.sample_index}) was never opened")
        return self.driver


SESSION_BACKSTOP_S = 3 * 3600.0


def open_episode(
    job: LiveEpisode, image: str | None, limits: EpisodeLimits, time_cap: TimeCap = "sandbox"
) -> LiveEpisode:
    """Container, setup, operator shell: any failure is recorded on the job (never raised). A failure of the
    machinery (an engine error, a setup step that never reported) is tried once more before it is recorded, and is
    recorded as ``infra_error: ...``, never as the scenario's fault. ``time_cap``: what the episode's time cap
    counts (``EpisodeDriver``: the evaluation's ``share`` or ``wall``, GRPO's ``sandbox``)."""
    from bashgym_assets.sandbox import Sandbox

    job.started = time.monotonic()
    for attempt in range(2):
        job.setup_error = job.sandbox_error = ""
        try:
            # The sandbox's own session cap is a backstop only: the episode's time cap (EpisodeDriver) and the
            # turn cap bound the episode, and the sandbox's lease ends it if we die.
            spec = spec_for_bundle(
                job.bundle,
                image,
                command_timeout_s=limits.command_timeout_s,
                episode_timeout_s=limits.episode_timeout_s + SESSION_BACKSTOP_S,
                purpose="eval",
            )
            job.box = Sandbox(spec)
            job.box.start()
            setup = job.box.setup()
            if not setup.ok:
                infra = bool(getattr(setup, "infrastructure_error", False))
                job.setup_error = ("infra_error: " if infra else "") + (setup.error or "setup failed")
                if infra and attempt == 0:
                    job.box.close()
                    continue
                return job
            job.driver = EpisodeDriver(
                job.box.session(),
                job.bundle,
                job.operator.scaffolded,
                limits,
                time_cap=time_cap,
            )
            return job
        except Exception as exc:  # noqa: BLE001 - a broken container fails this episode only
            job.sandbox_error = f"infra_error: {type(exc).__name__}: {exc}"
            if job.box is not None:
                job.box.close()
    return job


def check_and_close(job: LiveEpisode, check_timeout_s: float) -> bool:
    """Run the check on the final state (if the episode got that far; the result stays on ``job.check``), then
    remove the container. Whether it passed; a broken container is recorded on the job, never raised."""
    verified = False
    try:
        if job.driver is not None and not job.sandbox_error:
            job.check = job.box.run_check(job.bundle.check, timeout_s=check_timeout_s)
            verified = job.check.exit_code == 0 and not job.check.timed_out
    except Exception as exc:  # noqa: BLE001
        job.sandbox_error = f"{type(exc).__name__}: {exc}"
    finally:
        if job.box is not None:
            job.box.close()  # idempotent and never raises
    return verified


def apply_reply(job: LiveEpisode, reply: Reply) -> None:
    """One reply into its episode (runs the command in the job's sandbox); a container that breaks under it is
    recorded on the job and ends the episode, never raised."""
    try:
        if reply.error:
            job.opened.operator_failed(reply.error)
        else:
            job.opened.apply(reply.text, truncated=reply.truncated)
    except Exception as exc:  # noqa: BLE001 - the container broke under this episode
        job.sandbox_error = f"{type(exc).__name__}: {exc}"
        job.opened.done = True
