"""Proving pending tasks: a solver plays each task without a reference, and only a proven success becomes one.

Public data (shell-tasks) mostly comes without a reference solution. The seed's generator validated such a task by
running solvers in a sandbox: setup works, the check fails before any action, a rollout makes it pass. The same here,
with any operator as the solver (a teacher through litellm, or the champion): in a fresh sandbox, setup, the check
BEFORE (it must fail), the solver's episode, the check AFTER on the final state (it must pass). Only then do the
commands the solver ran become the task's reference; the bundle then goes through the gate like any other, which
replays that reference in yet another fresh sandbox. A task that is not proved stays pending with the reason.

Why this lives in ``rollout`` and not next to the importer in ``scenarios``: it plays an operator's episode, and
the scenarios stage never imports the later rollout stage.

What becomes the reference: every command of the episode that ran in the shell, in order, except replies that were
prose or babble the shell could not run (exit 127, nothing found to execute): those taught nothing and would put
prose into the reference operator's trajectories. The gate, not this module, has the last word on the result.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from pydantic import BaseModel, Field

from bashgym_assets.rollout.episode import EpisodeLimits, play
from bashgym_assets.rollout.operators import Operator
from bashgym_assets.rollout.transcript import BABBLE, PROSE
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.public_data import PendingTask
from bashgym_assets.scenarios.sandboxing import spec_for_bundle

# Why a task stays pending (``SolveOutcome.reason``).
SETUP_FAILED = "setup_failed"
CHECK_PASSES_BEFORE = "check_passes_before_action"
CHECK_TIMED_OUT = "check_timed_out"
NOT_SOLVED = "check_failed_after_solver"
NO_COMMANDS = "solver_ran_no_command"
SANDBOX_ERROR = "sandbox_error"


class SolveOutcome(BaseModel):
    """One attempt of one solver at one pending task, with the evidence."""

    task_id: str
    solver: str
    attempt: int = 0
    solved: bool = False
    reason: str = ""  # "" when solved, else one of the constants above
    detail: str = ""
    commands: list[str] = Field(default_factory=list)
    n_turns: int = 0
    end_reason: str = ""
    duration_s: float = 0.0


class SolveReport(BaseModel):
    """Proved bundles (to gate), tasks still pending (reason updated) and every attempt."""

    proved: list[ScenarioBundle] = Field(default_factory=list)
    pending: list[PendingTask] = Field(default_factory=list)
    outcomes: list[SolveOutcome] = Field(default_factory=list)


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def solver_commands(episode: object) -> list[str]:
    """The commands of an episode that a reference should replay (see the module doc for what is left out)."""
    commands = []
    for turn in getattr(episode, "turns", []):
        if not turn.command:
            continue
        if turn.kind in (PROSE, BABBLE) and turn.exit_code == 127:
            continue
        commands.append(turn.command)
    return commands


def attempt(
    task: PendingTask,
    operator: Operator,
    image: str | None,
    limits: EpisodeLimits | None = None,
    attempt_index: int = 0,
) -> SolveOutcome:
    """One solver episode on one pending task in a fresh sandbox. Never raises."""
    from bashgym_assets.sandbox import Sandbox

    limits = limits or EpisodeLimits()
    draft = task.draft()
    outcome = SolveOutcome(task_id=task.id, solver=operator.name, attempt=attempt_index)
    start = time.monotonic()
    try:
        spec = spec_for_bundle(
            draft,
            image,
            command_timeout_s=limits.command_timeout_s,
            episode_timeout_s=limits.episode_timeout_s + 60,
            purpose="solve",
        )
        with Sandbox(spec) as box:
            setup = box.setup()
            if not setup.ok:  # the machinery's failure is not the task's: retried, never filed as broken
                outcome.reason = SANDBOX_ERROR if setup.infrastructure_error else SETUP_FAILED
                outcome.detail = _tail(setup.error or "setup failed")
                return outcome
            before = box.run_check(draft.check, timeout_s=limits.check_timeout_s)
            if before.timed_out:
                outcome.reason, outcome.detail = (
                    CHECK_TIMED_OUT,
                    "the check did not finish on the untouched setup",
                )
                return outcome
            if before.exit_code == 0:
                outcome.reason, outcome.detail = CHECK_PASSES_BEFORE, "the check exits 0 before any action"
                return outcome
            episode = play(box, draft, operator, limits)
            outcome.n_turns, outcome.end_reason = episode.n_turns, episode.end_reason
            outcome.commands = solver_commands(episode)
            after = box.run_check(draft.check, timeout_s=limits.check_timeout_s)
            if after.exit_code == 0 and not after.timed_out:
                if outcome.commands:
                    outcome.solved = True
                else:  # the check passed with nothing done: it cannot tell done from not done
                    outcome.reason, outcome.detail = (
                        NO_COMMANDS,
                        "the check passed but the solver ran no command",
                    )
            else:
                outcome.reason = NOT_SOLVED
                status = "timed out" if after.timed_out else f"exit {after.exit_code}"
                outcome.detail = (
                    f"check {status} after {episode.n_turns} turn(s) ({episode.end_reason}"
                    f"{': ' + episode.error if episode.error else ''}): "
                    f"{_tail(after.stdout + after.stderr, 300)}"
                )
    except Exception as exc:  # a broken sandbox must not lose the other tasks
        outcome.reason, outcome.detail = SANDBOX_ERROR, f"{type(exc).__name__}: {exc}"
    finally:
        outcome.duration_s = round(time.monotonic() - start, 3)
    return outcome


def solve_pending(
    pending: Iterable[PendingTask],
    operator: Operator,
    image: str | None,
    limits: EpisodeLimits | None = None,
    attempts: int = 1,
    max_parallel: int = 1,
) -> SolveReport:
    """Play ``operator`` on each pending task (up to ``attempts`` tries each, stopping at the first proof).

    A proved task comes back as a bundle whose reference is the solver's commands (to be gated as usual); the
    others stay pending with the last attempt's reason. ``max_parallel`` tasks run at once (``SandboxPool``).
    """
    tasks = list(pending)

    def one(task: PendingTask) -> tuple[PendingTask, list[SolveOutcome]]:
        tries: list[SolveOutcome] = []
        retried = False
        index = 0
        while index < max(1, attempts):
            outcome = attempt(task, operator, image, limits, attempt_index=len(tries))
            tries.append(outcome)
            if outcome.reason == SANDBOX_ERROR and not retried:
                retried = True  # the machinery failed, not the solver: once more, not counted as a try
                continue
            if outcome.solved or outcome.reason in (SETUP_FAILED, CHECK_PASSES_BEFORE, CHECK_TIMED_OUT):
                break  # solved, or the task itself is broken: another try would say the same
            index += 1
        return task, tries

    if max_parallel <= 1 or len(tasks) <= 1:
        results = [one(t) for t in tasks]
    else:
        from bashgym_assets.sandbox import SandboxPool

        results = list(SandboxPool(max_parallel).map(one, tasks))
    report = SolveReport()
    for task, tries in results:
        report.outcomes.extend(tries)
        last = tries[-1]
        if last.solved:
            try:
                report.proved.append(task.prove(last.commands, operator.name))
                continue
            except ValueError as exc:  # e.g. a command with a NUL byte: not a reference a shell can replay
                last.solved, last.reason, last.detail = False, NOT_SOLVED, f"not a valid reference: {exc}"
        report.pending.append(task.model_copy(update={"reason": f"{last.reason}: {last.detail}".strip(": ")}))
    return report
