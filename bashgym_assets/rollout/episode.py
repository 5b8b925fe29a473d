"""One episode: an operator in a fresh sandbox, one command per turn, until ``exit``, a turn cap or a time cap.

The check runs as root on the final container state after the operator is done; what the operator claims is never
consulted. The recorded conversation is the unscaffolded one (``transcript.strip_scaffold``).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, Field

from bashgym_assets.guardrails.flags import SAFETY_FLAG_ARROW_TYPE, SafetyFlag, SafetySummary, flag_messages
from bashgym_assets.rollout import tracing
from bashgym_assets.rollout.operators import Operator, OperatorError
from bashgym_assets.rollout.transcript import (
    UNUSABLE,
    Message,
    TypedLine,
    initial_messages,
    parse_reply,
    render_observation,
    render_rejected_line,
    strip_scaffold,
)
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.sandboxing import spec_for_bundle


class EpisodeLimits(BaseModel):
    """Caps on one episode: turns (assistant replies), wall time, and time per command. The one definition of
    the caps: each kind of run takes its defaults from one of the profiles below (``limit_field``)."""

    max_turns: int = Field(default=30, description="replies an episode may run before it ends unfinished")
    episode_timeout_s: float = Field(
        default=300.0,
        description="wall seconds an episode may take, the model's generation and its commands together "
        "(past it the episode ends as a timeout)",
    )
    command_timeout_s: float = Field(default=30.0, description="seconds one command may run in the sandbox")
    check_timeout_s: float = Field(default=30.0, description="seconds the scenario's check may run")
    # The model has lost the thread, and on a CPU each such reply costs a full token budget.
    max_unusable_in_a_row: int | None = Field(
        default=None,
        description="replies in a row that are not commands (prose, babble, fenced or empty) before the episode "
        "ends as lost (none: no such cap)",
    )


#: The caps of each kind of run, side by side: every entry point (its plain settings, its Dagster run config and
#: its command-line options) takes its defaults from one of these, so a cap is changed here and nowhere else.
#: Teacher and reference rollouts (``verified_trajectories``): long episodes, the demonstrations to learn from.
ROLLOUT_LIMITS = EpisodeLimits()
#: The evaluation (``benchmark_results``, ``bashgym eval``): a model that has not finished in 10 replies has failed.
EVAL_LIMITS = EpisodeLimits(
    max_turns=10, episode_timeout_s=240.0, command_timeout_s=20.0, max_unusable_in_a_row=3
)
#: The student's own rollouts (``student_rollouts``): short episodes, a CPU budget.
STUDENT_LIMITS = EpisodeLimits(
    max_turns=4, episode_timeout_s=120.0, command_timeout_s=20.0, max_unusable_in_a_row=2
)
#: GRPO's episodes (``grpo_adapter``): every turn of every episode of a group is generated before a step.
GRPO_LIMITS = EpisodeLimits(
    max_turns=6, episode_timeout_s=120.0, command_timeout_s=10.0, max_unusable_in_a_row=3
)


def limit_field(profile: EpisodeLimits, name: str) -> Any:
    """A config field for the cap ``name`` with ``profile``'s value as its default and ``EpisodeLimits``' text
    as its description: how an entry point's settings declare a cap without writing its value again."""
    return Field(default=getattr(profile, name), description=EpisodeLimits.model_fields[name].description)


class Episode(BaseModel):
    """What happened in one episode (the record form of the conversation, with no scaffold)."""

    messages: list[Message] = Field(default_factory=list)
    terminated: bool = False
    commands_only: bool = True
    n_turns: int = 0
    end_reason: str = (
        ""  # exit | turn_cap | time_cap | unusable_cap | operator_error | shell_ended | sandbox_error
    )
    error: str = ""
    duration_s: float = 0.0
    # Per-turn timing, command, exit code and output excerpt for the episode's MLflow trace (``tracing``); not
    # part of the record (excluded from dumps).
    turns: list[tracing.TurnRecord] = Field(default_factory=list, exclude=True)
    start_ns: int = Field(default=0, exclude=True)


TimeCap = Literal["wall", "share", "sandbox"]  # what an episode's time cap counts (``EpisodeDriver``)


class EpisodeDriver:
    """One episode advanced one reply at a time: the turn logic shared by ``play`` (one episode, one operator
    call per turn) and the evaluator (many episodes in lockstep, one batched generation per turn).

    ``seen`` is what the operator is shown (with the scaffold when it is scaffolded); ``episode`` is the record.
    ``time_cap``: what the episode's time cap counts. ``wall``: the wall clock, the operator's thinking included
    (a live session); ``share``: the sandbox's time plus the model time charged to this episode's own replies (the
    evaluation: a batched decoder charges each row its share of every step, so an episode is not charged for
    waiting on the other rows of a batch, and a decoder crawling on one row is charged every second); ``sandbox``:
    the sandbox's time only (GRPO's group rollouts, where an episode waits for the whole group's generation,
    which says nothing about this episode). A model generating for ten minutes alone on a loaded machine ends at
    the cap under ``wall`` and ``share`` alike (issue 37); under ``share``, 32 rows decoded together on 2 cores
    no longer end at it after one or two turns because of each other (29 of 48 episodes of one study evaluation
    did under ``wall``).
    """

    def __init__(
        self,
        session: Any,
        bundle: ScenarioBundle,
        scaffolded: bool,
        limits: EpisodeLimits,
        time_cap: TimeCap = "wall",
    ) -> None:
        self.session = session
        self.limits = limits
        self.start = time.monotonic()
        self.time_cap = time_cap
        self.sandbox_s = 0.0
        self.model_s = 0.0  # the model time charged to this episode's replies (``share``)
        self.seen = initial_messages(bundle, scaffold=scaffolded)
        self.episode = Episode(messages=initial_messages(bundle, scaffold=False))
        self.lines: list[TypedLine] = []
        self.done = False
        self.episode.start_ns = time.time_ns()
        self._model_call: tuple[float, int] = (0.0, 0)

    def note_model_call(self, seconds: float, new_tokens: int = 0, charged_s: float | None = None) -> None:
        """The model call that produced the next reply: its latency and tokens (for the turn's trace span), and
        the model time charged to this episode for it (``charged_s``; None: the whole latency)."""
        self._model_call = (seconds, new_tokens)
        self.model_s += seconds if charged_s is None else charged_s

    def charge(self, seconds: float) -> None:
        """Model time spent on a reply that was given up on (its episode ran out of time while it was generated):
        charged all the same, so the episode ends at its cap instead of asking again."""
        self.model_s += seconds

    def _say(self, role: str, content: str) -> None:
        self.seen.append(Message(role=role, content=content))
        self.episode.messages.append(Message(role=role, content=content))

    def _end(self, reason: str, terminated: bool = False) -> None:
        self.done = True
        self.episode.end_reason = reason
        self.episode.terminated = terminated

    def wants_reply(self) -> bool:
        """Whether the operator gets another turn; closes the episode at the turn or time cap."""
        if self.done:
            return False
        if self.episode.n_turns >= self.limits.max_turns:
            self._end("turn_cap")
        elif self.remaining_s() <= 0:
            self._end("time_cap")
        return not self.done

    def remaining_s(self, in_flight_s: float = 0.0) -> float:
        """Seconds left under the time cap; ``in_flight_s``: model time charged to a reply still being generated."""
        if self.time_cap == "wall":
            used = time.monotonic() - self.start
        elif self.time_cap == "share":
            used = self.sandbox_s + self.model_s + in_flight_s
        else:
            used = self.sandbox_s
        return self.limits.episode_timeout_s - used

    def operator_failed(self, error: str) -> None:
        self.episode.error = error
        self._end("operator_error")

    def apply(self, reply: str, truncated: bool = False) -> TypedLine:
        """Record one reply and, when it is something a shell runs, run it and record the observation."""
        model_s, new_tokens = self._model_call
        self._model_call = (0.0, 0)
        turn = tracing.TurnRecord(
            index=len(self.episode.turns),
            start_ns=time.time_ns() - int(model_s * 1e9),
            model_s=model_s,
            new_tokens=new_tokens,
            reply=reply.strip(),
        )
        self.episode.turns.append(turn)
        try:
            line = self._apply(reply, truncated, turn)
        finally:
            turn.end_ns = time.time_ns()
        turn.kind = line.kind
        return line

    def _apply(self, reply: str, truncated: bool, turn: tracing.TurnRecord) -> TypedLine:
        episode = self.episode
        episode.n_turns += 1
        line = parse_reply(reply, truncated=truncated)
        self.lines.append(line)
        self._say("assistant", reply.strip())
        if not line.is_command:
            episode.commands_only = False
        cap = self.limits.max_unusable_in_a_row
        if cap and len(self.lines) >= cap and all(x.kind in UNUSABLE for x in self.lines[-cap:]):
            self._end("unusable_cap")
            return line
        if line.is_exit:
            self._end("exit", terminated=True)
            return line
        if not line.command:  # an empty line: the shell runs nothing and prints nothing
            self._say("user", "")
            return line
        if line.syntax_error:
            self._say("user", render_rejected_line(line.syntax_error))
            return line
        remaining = max(1.0, self.remaining_s())
        session = self.session
        started = time.monotonic()
        result = session.run(line.command, timeout_s=min(self.limits.command_timeout_s, remaining))
        self.sandbox_s += time.monotonic() - started
        observation = render_observation(result)
        self._say("user", observation)
        turn.command, turn.exit_code, turn.timed_out = line.command, result.exit_code, result.timed_out
        turn.command_s, turn.output = time.monotonic() - started, tracing.excerpt(observation)
        if getattr(result, "terminated", False) or getattr(session, "terminated", False):
            # The operator's own line ended the shell (``... && exit``, ``exec``): it did terminate.
            self._end("exit", terminated=True)
        elif getattr(
            session, "exited", False
        ):  # the shell was ended for it (episode time limit, unresponsive)
            self._end("time_cap" if result.timed_out else "shell_ended")
        return line

    def finish(self) -> Episode:
        """The record form (no scaffold) with the episode's wall time."""
        self.done = True
        self.episode.messages = strip_scaffold(self.episode.messages)
        self.episode.duration_s = round(time.monotonic() - self.start, 3)
        return self.episode


def play(box: Any, bundle: ScenarioBundle, operator: Operator, limits: EpisodeLimits) -> Episode:
    """Drive ``operator`` through a session of an already set-up sandbox (no check is run here)."""
    op = operator.for_scenario(bundle)
    driver = EpisodeDriver(box.session(), bundle, op.scaffolded, limits)
    while driver.wants_reply():
        asked = time.monotonic()
        try:
            reply = op.next_command(driver.seen)
        except OperatorError as exc:
            driver.operator_failed(str(exc))
            break
        driver.note_model_call(time.monotonic() - asked)
        driver.apply(reply)
    return driver.finish()


# ---- one row per attempt ----------------------------------------------------------------------------------------
class TrajectoryRecord(BaseModel):
    """One attempt at one train scenario, kept or not: the DPO builder pairs pass/fail on the same scenario."""

    trajectory_id: str
    scenario_id: str
    category: str
    difficulty: int
    split: str
    operator: str
    sample_index: int
    kept: bool
    verified: bool
    terminated: bool
    commands_only: bool
    reject_reason: str
    n_turns: int
    duration_s: float
    messages: list[Message]
    source: str
    # Guardrails (None in rows written before they existed): assistant turns with a blocked / only-warned
    # command, observations with prompt-injection markers, and the flags by message position. A blocked command
    # rejects the attempt (``unsafe_command``), so it is never an SFT example and only a DPO rejected one.
    unsafe_blocked: int | None = None
    unsafe_warned: int | None = None
    injection_flags: int | None = None
    safety_findings: list[SafetyFlag] | None = None


def safety_fields(messages: list[Message], home: str | None = None, cwd: str | None = None) -> dict[str, Any]:
    """The guardrail columns of a trajectory row."""
    s: SafetySummary = flag_messages(messages, home=home, cwd=cwd)
    return {
        "unsafe_blocked": s.blocked,
        "unsafe_warned": s.warned,
        "injection_flags": s.injections,
        "safety_findings": s.flags,
    }


MESSAGE_TYPE = pa.struct([("role", pa.string()), ("content", pa.string())])
TRAJECTORY_SCHEMA = pa.schema(
    [
        ("trajectory_id", pa.string()),
        ("scenario_id", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.int32()),
        ("split", pa.string()),
        ("operator", pa.string()),
        ("sample_index", pa.int32()),
        ("kept", pa.bool_()),
        ("verified", pa.bool_()),
        ("terminated", pa.bool_()),
        ("commands_only", pa.bool_()),
        ("reject_reason", pa.string()),
        ("n_turns", pa.int32()),
        ("duration_s", pa.float64()),
        ("messages", pa.list_(MESSAGE_TYPE)),
        ("source", pa.string()),
        ("unsafe_blocked", pa.int32()),
        ("unsafe_warned", pa.int32()),
        ("injection_flags", pa.int32()),
        ("safety_findings", pa.list_(SAFETY_FLAG_ARROW_TYPE)),
    ]
)


def trajectory_id(scenario_id: str, operator: str, sample_index: int) -> str:
    return hashlib.sha256(f"{scenario_id}\0{operator}\0{sample_index}".encode()).hexdigest()[:20]


def reject_reason(episode: Episode, verified: bool, setup_error: str = "", unsafe: bool = False) -> str:
    """The first reason an attempt is not kept ('' when kept): infrastructure, then termination, check, prose,
    then a command the guardrails block (``unsafe_command``)."""
    if setup_error:
        return "setup_failed"
    if episode.end_reason in ("operator_error", "sandbox_error"):
        return episode.end_reason
    if not episode.terminated:
        return episode.end_reason or "not_terminated"
    if not verified:
        return "check_failed"
    if not episode.commands_only:
        return "prose"
    if unsafe:
        return "unsafe_command"
    return ""


def run_episode(
    bundle: ScenarioBundle,
    operator: Operator,
    image: str | None,
    split: str = "train",
    sample_index: int = 0,
    limits: EpisodeLimits | None = None,
) -> TrajectoryRecord:
    """A fresh sandbox, setup, the operator's episode, then the check: one ``TrajectoryRecord``. Never raises."""
    from bashgym_assets.sandbox import Sandbox

    limits = limits or EpisodeLimits()
    start = time.monotonic()
    # The sandbox machinery failing (engine error, a harness step that never reported) says nothing about the
    # scenario or the operator: one more try in a fresh sandbox, then it is recorded as ``sandbox_error`` with an
    # ``infra_error:`` detail, never as the scenario's setup or the operator's check.
    for attempt in range(2):
        episode = Episode(messages=initial_messages(bundle))
        verified, setup_error, infrastructure = False, "", False
        try:
            spec = spec_for_bundle(
                bundle,
                image,
                command_timeout_s=limits.command_timeout_s,
                episode_timeout_s=limits.episode_timeout_s + 60,
                purpose="rollout",
            )
            with Sandbox(spec) as box:
                setup = box.setup()
                if setup.infrastructure_error:
                    infrastructure = True
                    episode.end_reason, episode.error = "sandbox_error", f"infra_error: {setup.error}"
                elif not setup.ok:
                    setup_error = setup.error or "setup failed"
                else:
                    episode = play(box, bundle, operator, limits)
                    check = box.run_check(bundle.check, timeout_s=limits.check_timeout_s)
                    verified = check.exit_code == 0 and not check.timed_out
        except (
            Exception
        ) as exc:  # a broken sandbox must not lose the other attempts: record it as a rejection
            infrastructure = True
            episode.end_reason, episode.error = "sandbox_error", f"infra_error: {type(exc).__name__}: {exc}"
        if not infrastructure or attempt == 1:
            break
    safety = safety_fields(episode.messages, home=bundle.home, cwd=bundle.start_dir)
    reason = reject_reason(episode, verified, setup_error, unsafe=bool(safety["unsafe_blocked"]))
    op_name = operator.name
    if (sink := tracing.sink()) is not None:
        sink.add(
            tracing.episode_trace(
                f"rollout {bundle.id}",
                tracing.ROLLOUT_EXPERIMENT,
                episode.turns,
                episode.start_ns or time.time_ns(),
                inputs={"scenario_id": bundle.id, "task": bundle.task},
                outputs={
                    "verified": verified,
                    "kept": reason == "",
                    "reject_reason": reason,
                    "end_reason": episode.end_reason,
                },
                attributes={
                    "kind": "rollout",
                    "scenario_id": bundle.id,
                    "category": bundle.category,
                    "model": op_name,
                    "sample_index": sample_index,
                    "verified": verified,
                    "kept": reason == "",
                    "failure_class": reason,
                    "trajectory_id": trajectory_id(bundle.id, op_name, sample_index),
                },
                error=episode.error or setup_error,
            )
        )
    return TrajectoryRecord(
        trajectory_id=trajectory_id(bundle.id, op_name, sample_index),
        scenario_id=bundle.id,
        category=bundle.category,
        difficulty=bundle.difficulty,
        split=split,
        operator=op_name,
        sample_index=sample_index,
        kept=reason == "",
        verified=verified,
        terminated=episode.terminated,
        commands_only=episode.commands_only,
        reject_reason=reason,
        n_turns=episode.n_turns,
        duration_s=round(time.monotonic() - start, 3),
        messages=episode.messages,
        source=bundle.source,
        **safety,
    )
