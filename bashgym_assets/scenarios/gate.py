"""The reference gate: a bundle is admitted only if, in a fresh sandbox, setup succeeds, the check FAILS before any
action, and the reference solution (played by the reference operator, one command per turn, as the scenario's
user) makes it PASS. Rejections keep their reason. Admitted scenarios are split train/held-out by a stable hash.

The authoring model never certifies a task: only the check against the reference's effect on a real container.

Before any sandbox, the check and the setup commands go through ``bash -n``: a check that does not parse is
rejected as such with bash's own error (it would otherwise fail after the reference and blame the reference), a
setup command that does not parse fails the setup. A rejection's detail shows the reference turns that mattered
(the first failing one and the last real one), never the closing ``exit``.

A refusal whose only evidence is a timer (the check's, a reference command's, the episode's or a setup command's
time cap; a test script's own wall-clock budget: ``timeout``'s 124, "timed out", ``TimeoutExpired``...) says as
much about the machine as about the task: on a loaded machine a valid task runs past its caps. Each timed step is
measured (its wall time, the container's CPU time, the machine's load over it: ``sandbox.load``), and such a refusal
is tried once more, **alone** (every other gate of this process waits: the retry has the machine to itself), with
the timers stretched when the machine was loaded while the container worked. Admitted then, it is admitted (its
detail says so). Refused by a timer again, the verdict says which it was: ``timer_under_load`` when the machine
was still loaded while the container worked (starved: nothing is known about the task), the timer's own reason
(``check_timed_out``...) with "a real time-out" when the machine was quiet or the container used no CPU while the
timer ran (it waited on something no load explains). The machinery's failures (``sandbox_error``) are retried
alone too. The gate's default parallelism is the machine's cores (``default_parallelism``).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shlex
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from bashgym_assets.sandbox import load
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.family import family_of
from bashgym_assets.scenarios.factory.split import is_held_out_family
from bashgym_assets.scenarios.sandboxing import spec_for_bundle
from bashgym_assets.shell import SCRIPT, bash_syntax_error, is_exit_command

HELD_OUT_FRACTION = 0.2
TRAIN, HELD_OUT = "train", "held_out"
# ``bashgym eval --split train`` writes its episodes under eval ids with this prefix: figures of fit, which nothing
# that judges or serves a model may read as held-out results (the split is in the id: the partition of eval_episodes)
TRAIN_SPLIT_EVAL_PREFIX = "eval-cli-train-"

# Reasons a bundle is rejected (metadata counts by these).
SETUP_FAILED = "setup_failed"
CHECK_DOES_NOT_PARSE = "check_does_not_parse"
CHECK_PASSES_BEFORE = "check_passes_before_action"
REFERENCE_FAILS = "reference_does_not_pass"
REFERENCE_UNFINISHED = "reference_did_not_finish"
CHECK_TIMED_OUT = "check_timed_out"
SANDBOX_ERROR = "sandbox_error"  # one attempt's: the sandbox machinery failed (it is tried once more)
INFRA_ERROR = "infra_error"  # the machinery failed on both attempts: nothing is known about the bundle
# A timer refused it twice, the second time alone, each time while the machine was loaded and the container worked
# (starved of CPU): nothing is known about the bundle either.
TIMER_UNDER_LOAD = "timer_under_load"


# Ids with this prefix come from imported evaluation suites (Terminal-Bench, Harbor ...): always held out.
EXTERNAL_PREFIX = "ext-"
# A variant of a scenario (same task with other names and values) is ``<parent id>.var-<n>``: it shares its
# parent's split, so a near-copy of a held-out task can never land in training (nor one of a train task in eval).
VARIANT_RE = re.compile(r"\.var-\d+$")


def scenario_family(scenario_id: str) -> str:
    """The id a scenario's split is derived from: the parent id for a variant, else the id itself."""
    return VARIANT_RE.sub("", scenario_id)


def is_external(scenario_id: str) -> bool:
    return scenario_id.startswith(EXTERNAL_PREFIX)


def split_for(scenario_id: str, held_out_fraction: float = HELD_OUT_FRACTION) -> str:
    """Stable split: the first 8 bytes of sha256(family id) as a fraction of 2**64; below the fraction is held
    out. Imported evaluation suites are always held out; generated tasks (``gen.<family>.<hash>``) follow their
    family's recorded split.

    A pure function of the id, so any stage (rollouts, dataset building) can re-derive it and refuse held-out ids.
    """
    if is_external(scenario_id):
        return HELD_OUT
    generated_family = family_of(scenario_id)
    if generated_family is not None:  # factory tasks split by whole family (factory.split), never by instance
        return HELD_OUT if is_held_out_family(generated_family) else TRAIN
    family = scenario_family(scenario_id)
    value = int.from_bytes(hashlib.sha256(family.encode()).digest()[:8], "big") / 2**64
    return HELD_OUT if value < held_out_fraction else TRAIN


class GateResult(BaseModel):
    """The gate's verdict on one bundle, with evidence (check outputs) for the rejections table."""

    scenario_id: str
    category: str
    difficulty: int
    source: str
    admitted: bool
    reason: str  # "admitted" or a rejection reason
    detail: str = ""
    split: str = ""  # train | held_out for admitted bundles
    duration_s: float = 0.0
    reference_turns: int = 0
    attempts: int = 1  # sandboxes it took: a timer's or the machinery's refusal is tried once more, alone
    bundle_json: str


class GateLimits(BaseModel):
    """Time caps for certifying one bundle."""

    command_timeout_s: float = 30.0
    check_timeout_s: float = 30.0
    episode_timeout_s: float = 300.0
    setup_timeout_s: float = 120.0  # per setup command (the sandbox's own default)

    def scaled(self, factor: float) -> GateLimits:
        """Every cap ``factor`` times longer (a retry on a loaded machine)."""
        if factor == 1.0:
            return self
        return GateLimits(
            command_timeout_s=self.command_timeout_s * factor,
            check_timeout_s=self.check_timeout_s * factor,
            episode_timeout_s=self.episode_timeout_s * factor,
            setup_timeout_s=self.setup_timeout_s * factor,
        )


def default_parallelism() -> int:
    """Sandboxes the gate runs at once unless told: the CPU cores this process may use. More than the cores only
    starves each of them (the gate is CPU-bound: benchmarks/bench_factory_gate.py) and turns timers into verdicts
    on the machine's load."""
    return load.usable_cores()


# ---- timers and the machine's load --------------------------------------------------------------------------------
# A container that used less CPU than this share of a timed step's wall time was waiting, not starved.
IDLE_SHARE = 0.02
# The retry's caps: at most this many times the caller's, when the machine was loaded while the container worked.
MAX_RETRY_SCALE = 4.0
RETRY_SAMPLE_S = 0.5  # the machine is looked at this long before a retry
# Output of a check (or a setup command) that says a wall-clock budget of its own ran out: a test script's timeout,
# pytest-timeout, Python's TimeoutExpired, coreutils' timeout...
TIMER_WORDS = re.compile(
    r"timed?[ _-]?out|timeout|deadline exceeded|took too long|too slow|time limit|ran past|\belapsed\b",
    re.IGNORECASE,
)
TIMEOUT_EXIT = 124  # coreutils timeout(1): its command ran out of time


class TimedStep(BaseModel):
    """A step whose timer refused the bundle: what it was, its wall time, the CPU time its container used meanwhile
    (None when the host cannot tell) and the machine's load over it."""

    what: str
    wall_s: float
    cpu_s: float | None = None
    machine: load.LoadReading
    cap_s: float | None = None  # the step's time cap in this attempt
    cpus: float = 1.0  # the CPUs the sandbox may use (its quota)

    @property
    def idle(self) -> bool:
        """The container used (almost) no CPU while the timer ran: it slept or waited, or (on a loaded machine)
        it barely got a CPU."""
        return self.cpu_s is not None and self.cpu_s < IDLE_SHARE * max(self.wall_s, 1e-6)

    @property
    def starved(self) -> bool:
        """The machine was loaded while the container worked (or waited on a disk under I/O pressure)."""
        return self.machine.loaded and (not self.idle or self.machine.io_bound)

    @property
    def ambiguous(self) -> bool:
        """The machine was loaded and the container got almost no CPU: starved so hard it barely ran, or waiting
        on something else. A retry with twice the time tells them apart (``load_explains``)."""
        return self.machine.loaded and not self.starved

    def verdict(self) -> str:
        if self.starved:
            return "timer under load: the machine was loaded while the container worked"
        if self.ambiguous:
            return "timer under load, or a wait: the machine was loaded and its container got almost no CPU"
        if self.idle:
            return (
                "a real time-out: its container used almost no CPU while the timer ran (it waited on "
                "something no load explains)"
            )
        return "a real time-out: the machine was not loaded"

    def describe(self) -> str:
        cpu = (
            f"{self.cpu_s:.2f} s of CPU in {self.wall_s:.1f} s"
            if self.cpu_s is not None
            else f"{self.wall_s:.1f} s (CPU time unknown)"
        )
        return f"{self.what}: {cpu}; {self.machine.describe()}"

    def retry_scale(self) -> float:
        """How much longer the retry's caps are: as much as the container was starved (its CPU share of the
        step), with a margin, when the machine was loaded; else the caller's caps."""
        if self.ambiguous:
            return 2.0  # enough to see whether it gets more done with more time
        if not self.starved:
            return 1.0
        if self.cpu_s is None or self.wall_s <= 0:
            return 2.0
        share = max(self.cpu_s / self.wall_s, 1e-3)
        return round(min(MAX_RETRY_SCALE, max(2.0, 1.5 / share)), 2)

    def over_budget(self, scale: float) -> bool:
        """Whether the step used more CPU than its cap (``cap_s / scale``, the caller's) lets it use on a quiet
        machine: a task that finished only with stretched caps but needs more CPU than that is too slow, not
        starved (its budget measured in CPU time)."""
        if self.cpu_s is None or self.cap_s is None:
            return False
        return self.cpu_s > self.cap_s / scale * self.cpus


def load_explains(first: TimedStep, again: TimedStep) -> bool:
    """Whether the machine's load explains a timer that fired on both attempts (``again``: the retry, alone, its
    caps stretched): the container worked on a loaded machine, or, where it got almost no CPU, it got more done
    when given more time (a sleeping or waiting task uses no more CPU in twice the time)."""
    if again.starved:
        return True
    if not again.ambiguous or first.cpu_s is None or again.cpu_s is None:
        return False
    return again.wall_s >= 1.5 * first.wall_s and again.cpu_s >= 1.5 * first.cpu_s + 0.005


class _Meter:
    """Measures the steps of one attempt: ``start(what)`` before a timed step, ``stop()`` right after it."""

    def __init__(self, box: Any) -> None:
        self.box = box
        self.steps: dict[str, TimedStep] = {}
        self.what = ""
        self.cap_s: float | None = None
        self._t0 = 0.0
        self._counters = load.counters()
        self._cpu0: float | None = None

    def _cpu(self) -> float | None:
        try:
            return self.box.cpu_time_s()
        except Exception:  # noqa: BLE001 - a measurement never fails the gate
            return None

    def start(self, what: str, cap_s: float | None = None) -> None:
        self.what, self.cap_s = what, cap_s
        self._t0, self._counters, self._cpu0 = time.monotonic(), load.counters(), self._cpu()

    def stop(self) -> TimedStep:
        cpu1 = self._cpu()
        step = TimedStep(
            what=self.what,
            wall_s=round(time.monotonic() - self._t0, 3),
            cpu_s=None if cpu1 is None or self._cpu0 is None else round(max(0.0, cpu1 - self._cpu0), 3),
            machine=load.reading(self._counters),
            cap_s=self.cap_s,
            cpus=float(getattr(getattr(self.box, "spec", None), "cpus", 1.0) or 1.0),
        )
        self.steps[step.what] = step
        return step


class _Lane:
    """Gates in one process share the machine; a retry runs alone: it waits for the attempts running now, and
    no new one starts until it is done (a reader-writer lock that prefers the writer)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sharing = 0
        self._alone = False
        self._waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._alone or self._waiting:
                self._cond.wait()
            self._sharing += 1
        try:
            yield
        finally:
            with self._cond:
                self._sharing -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._alone or self._sharing:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()


_LANE = _Lane()


def _tail(text: str, limit: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _head(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."


# ---- static checks: does it parse? --------------------------------------------------------------------------------
_SHELL_SHEBANG = re.compile(r"^#!\s*(?:/usr/bin/env\s+)?(?:/\S*/)?(?:ba)?sh(?:\s|$)")


def parse_problem(bundle: ScenarioBundle) -> tuple[str, str] | None:
    """(reason, detail) when a setup command, a shell provider script or the check does not parse, else None.

    bash's parser is the judge (``shell.bash_syntax_error``) under the ``SCRIPT`` policy: these are scripts the
    sandbox runs with bash, where ``shopt -s extglob`` on one line makes ``!(...)`` parse on the next."""
    setup = bundle.setup
    for i, command in enumerate(setup, 1):
        error = bash_syntax_error(command, policy=SCRIPT)
        if error:
            return (
                SETUP_FAILED,
                f"setup command {i}/{len(setup)} does not parse: {_head(command)}\n{_tail(error)}",
            )
    provider = bundle.provider
    if provider and not provider.is_path and _SHELL_SHEBANG.match(provider.script):
        error = bash_syntax_error(provider.script, policy=SCRIPT)
        if error:
            return SETUP_FAILED, f"provider script {provider.name} does not parse: {_tail(error)}"
    error = bash_syntax_error(bundle.check, policy=SCRIPT)
    if error:
        return CHECK_DOES_NOT_PARSE, f"check does not parse: {_tail(error)}"
    return None


# ---- the reference, played as turns -------------------------------------------------------------------------------
# A turn that only ends the session (``shell.is_exit_command``: ``exit``, ``exit $?``, ``logout``) is never the turn
# that mattered.
class ReferenceTurn(BaseModel):
    """One reference command as played, for the rejection's evidence."""

    index: int  # 1-based among the reference's commands
    total: int
    command: str
    output: str
    exit_code: int | None
    timed_out: bool = False

    @property
    def failed(self) -> bool:
        return self.timed_out or self.exit_code != 0

    def show(self) -> str:
        status = "timed out" if self.timed_out else f"exit code: {self.exit_code}"
        output = _tail(self.output, 300)
        return f"turn {self.index}/{self.total}: $ {_head(self.command)}\n{output + chr(10) if output else ''}[{status}]"


class Replay(BaseModel):
    """The reference's turns and, when it did not run to completion, why (time cap, a command timed out)."""

    turns: list[ReferenceTurn]
    problem: str = ""

    def mattered(self) -> str:
        """The turns worth showing: the first failing real turn (where it went wrong) and the last real turn
        (what the check saw last); a closing ``exit`` only when there is nothing else."""
        real = [t for t in self.turns if not is_exit_command(t.command)]
        if not real:
            return self.turns[-1].show() if self.turns else "no reference turn ran"
        failing = next((t for t in real if t.failed), None)
        last = real[-1]
        parts = []
        if failing is not None and failing is not last:
            parts.append(f"first failing reference {failing.show()}")
        parts.append(f"last reference {last.show()}")
        return "\n".join(parts)


def replay_reference(box: Any, bundle: ScenarioBundle, limits: GateLimits) -> Replay:
    """The reference as turns: one command per ``session.run`` as the scenario's user, in its workdir.

    ``problem`` is empty when every command ran to completion (a non-zero exit is allowed: only the check decides).
    """
    # The reference comes from the bundle's own author, like the check: the tamper check that keeps a model from
    # rewriting the checker's tools has nothing to guard here, and for a root scenario it costs an exec and a
    # layer walk per task.
    session = box.session(verify_tools=False)
    deadline = time.monotonic() + limits.episode_timeout_s
    commands = [c for c in bundle.reference if c.strip()]
    replay = Replay(turns=[])
    for index, command in enumerate(commands, 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            replay.problem = "time_cap"
            return replay
        result = session.run(command, timeout_s=min(limits.command_timeout_s, remaining))
        replay.turns.append(
            ReferenceTurn(
                index=index,
                total=len(commands),
                command=command,
                output=f"{result.stdout}{result.stderr}",
                exit_code=result.exit_code,
                timed_out=bool(result.timed_out),
            )
        )
        if result.timed_out:
            replay.problem = f"command timed out: {command}"
            return replay
        if getattr(session, "exited", False):
            break
    return replay


def gate_bundle(
    bundle: ScenarioBundle,
    image: str | None,
    limits: GateLimits | None = None,
    held_out_fraction: float = HELD_OUT_FRACTION,
) -> GateResult:
    """Certify one bundle in a fresh sandbox. Never raises: a sandbox failure is a rejection with its reason."""

    limits = limits or GateLimits()
    start = time.monotonic()
    static = parse_problem(bundle)
    attempts = 0
    if static is not None:
        (reason, detail), turns = static, 0
    else:
        with _LANE.shared():
            outcome = _gate_once(bundle, image, limits)
        attempts = 1
        if outcome.infrastructure:
            # A sandbox that fails under the scenario (engine error, container gone, a harness step that never
            # reported, a harness exec that outran its own timer) says nothing about the scenario: try once more in
            # a fresh sandbox, alone (a stalled machine is one cause), and if the machinery fails again, say so
            # (``infra_error``) instead of blaming the bundle.
            with _LANE.alone():
                again = _gate_once(bundle, image, limits)
            attempts = 2
            if again.infrastructure:
                again = _Attempt(
                    INFRA_ERROR,
                    f"infra_error: the sandbox machinery failed twice ({again.reason}): {again.detail}",
                    again.turns,
                    True,
                )
            outcome = again
        if outcome.timer is not None:
            # The only evidence is a timer: once more, alone, with the load recorded (and the caps stretched when
            # the machine was loaded while the container worked).
            with _LANE.alone():
                scale = outcome.timer.retry_scale()
                if scale == 1.0 and load.sample(RETRY_SAMPLE_S).loaded:
                    scale = 2.0  # loaded still (by something else than this gate): give it room
                retry = _gate_once(bundle, image, limits.scaled(scale))
            attempts += 1
            outcome = _after_retry(outcome, retry, scale)
        reason, detail, turns = outcome.reason, outcome.detail, outcome.turns
    admitted = reason == "admitted"
    return GateResult(
        scenario_id=bundle.id,
        category=bundle.category,
        difficulty=bundle.difficulty,
        source=bundle.source,
        admitted=admitted,
        reason=reason,
        detail=detail,
        split=split_for(bundle.id, held_out_fraction) if admitted else "",
        duration_s=round(time.monotonic() - start, 3),
        reference_turns=turns,
        attempts=max(1, attempts),
        bundle_json=bundle.model_dump_json(exclude_none=True),
    )


@dataclass
class _Attempt:
    """One attempt's verdict; ``timer``: the timed step, when a timer is the refusal's only evidence."""

    reason: str
    detail: str
    turns: int
    infrastructure: bool
    timer: TimedStep | None = None
    steps: dict[str, TimedStep] = field(default_factory=dict)  # every measured step, by what it was


def _after_retry(first: _Attempt, retry: _Attempt, scale: float) -> _Attempt:
    """The verdict of a timer's refusal tried again alone (``retry``, its caps ``scale`` times the first's)."""
    assert first.timer is not None
    caps = f" (every time cap x{scale:g}: the machine was loaded)" if scale != 1.0 else ""
    first_was = (
        f"the first attempt was refused as {first.reason} by a timer, {first.timer.verdict()} "
        f"({first.timer.describe()})"
    )
    if retry.reason == "admitted":
        same = retry.steps.get(first.timer.what)
        # (over_budget is False without a cap: the cap_s test only tells mypy so)
        if scale != 1.0 and same is not None and same.cap_s is not None and same.over_budget(scale):
            return _Attempt(  # it finished only because its caps were stretched: too slow, not starved
                first.reason,
                (
                    f"{first.detail}\n(a real time-out: with every time cap x{scale:g} a second attempt finished, "
                    f"but {same.what} used {same.cpu_s:.1f} s of CPU, more than its {same.cap_s / scale:g} s cap "
                    f"gives it on a quiet machine; first: {first.timer.describe()}; second: {same.describe()})"
                ),
                first.turns,
                False,
            )
        return _Attempt(
            "admitted", f"admitted on a second attempt, alone{caps}: {first_was}", retry.turns, False
        )
    if retry.infrastructure:
        return _Attempt(
            first.reason,
            f"{first.detail}\n({first.timer.verdict()}: {first.timer.describe()}; a retry alone failed in the "
            f"sandbox machinery: {_head(retry.detail, 300)})",
            first.turns,
            False,
        )
    if retry.timer is None:  # refused again, on other evidence: that is the verdict
        return _Attempt(
            retry.reason,
            f"{retry.detail}\n(on a second attempt, alone{caps}; {first_was})",
            retry.turns,
            False,
        )
    if load_explains(first.timer, retry.timer):
        return _Attempt(
            TIMER_UNDER_LOAD,
            (
                f"timer under load: refused as {retry.reason} on both attempts, the second alone{caps}, both "
                "times while the machine was loaded and the container worked: nothing is known about the task "
                "(gate it again on a quieter machine, or fewer at once)\n"
                f"first: {first.timer.describe()}\nsecond: {retry.timer.describe()}\n{retry.detail}"
            ),
            retry.turns,
            False,
        )
    why = (
        "a real time-out: its container used almost no CPU, and no more when given more time (it waited on "
        "something no load explains)"
        if retry.timer.ambiguous
        else retry.timer.verdict()
    )
    return _Attempt(
        first.reason,
        (
            f"{first.detail}\n({why}: refused as {retry.reason} again on a second attempt, alone{caps}; "
            f"first: {first.timer.describe()}; second: {retry.timer.describe()})"
        ),
        first.turns,
        False,
    )


def _timer_in_output(result: Any, step: TimedStep, min_wall_s: float = 1.0) -> bool:
    """Whether a failing command's own timer ended it: ``timeout``'s exit status, or its output saying a time cap
    or budget ran out (after running at least ``min_wall_s``: a budget that fires takes time)."""
    if result.exit_code == TIMEOUT_EXIT:
        return True
    return step.wall_s >= min_wall_s and TIMER_WORDS.search(f"{result.stdout}\n{result.stderr}") is not None


def _gate_once(bundle: ScenarioBundle, image: str | None, limits: GateLimits) -> _Attempt:
    """One attempt in a fresh sandbox: the verdict, and whether the failure was the sandbox's, not the bundle's."""
    from bashgym_assets.sandbox import Sandbox

    reason, detail, turns, infrastructure = "admitted", "", 0, False
    timer: TimedStep | None = None
    meter: _Meter | None = None
    try:
        spec = spec_for_bundle(
            bundle,
            image,
            command_timeout_s=limits.command_timeout_s,
            episode_timeout_s=limits.episode_timeout_s + 60,
            purpose="gate",
        )
        if limits.setup_timeout_s != spec.setup_timeout_s:
            spec = spec.model_copy(update={"setup_timeout_s": limits.setup_timeout_s})
        with Sandbox(spec) as box:
            meter = _Meter(box)
            # One exec for the setup, the workdir test and the check on the untouched state (an exec costs the
            # engine ~40 ms of CPU, and CPU is what bounds the gate's rate: benchmarks/bench_factory_gate.py);
            # what that exec could not report is run on its own below, as before.
            then = [f"test -d {shlex.quote(bundle.workdir)}"] if bundle.workdir else []
            check_now = box.check_command(bundle.check, limits.check_timeout_s)
            inline = [*then, check_now] if check_now else then
            meter.start(
                "the setup" + (" and the check on the untouched setup" if check_now else ""),
                limits.setup_timeout_s * max(1, len(spec.setup))
                + (limits.check_timeout_s if check_now else 0.0),
            )
            setup = box.setup(then=inline)
            step = meter.stop()
            if not setup.ok:
                reason, detail = SETUP_FAILED, _tail(setup.error or "setup failed")
                infrastructure = setup.infrastructure_error
                failed = next((r for r in setup.results if r.timed_out or r.exit_code != 0), None)
                if failed is not None and (failed.timed_out or _timer_in_output(failed, step)):
                    timer = step
            elif (
                bundle.workdir
                and (
                    setup.then[0].exit_code
                    if setup.then
                    else box.run_as_root(f"test -d {shlex.quote(bundle.workdir)}", timeout_s=15.0).exit_code
                )
                != 0
            ):
                # the scenario's fault, said as such: the engine's "chdir to cwd failed" reads like a sandbox error
                reason, detail = (
                    SETUP_FAILED,
                    (
                        f"workdir {bundle.workdir} does not exist after the setup, so the "
                        "operator's shell cannot start there: create it in the setup"
                    ),
                )
            else:
                if check_now and len(setup.then) == len(then) + 1:
                    before = _inline_check(setup.then[-1], limits.check_timeout_s)
                else:
                    meter.start("the check on the untouched setup", limits.check_timeout_s)
                    before = box.run_check(bundle.check, timeout_s=limits.check_timeout_s)
                    step = meter.stop()
                if before.exit_code == 0 and not before.timed_out:
                    reason, detail = CHECK_PASSES_BEFORE, "the check exits 0 on the untouched setup"
                elif before.timed_out:  # a check must answer, pass or fail: replaying would only wait again
                    reason, detail = (
                        CHECK_TIMED_OUT,
                        (
                            f"the check did not finish within {limits.check_timeout_s:g} s "
                            "on the untouched setup (it must exit, 0 or not)"
                        ),
                    )
                    timer = step
                else:
                    meter.start("the reference", limits.episode_timeout_s)
                    replay = replay_reference(box, bundle, limits)
                    step = meter.stop()
                    turns = len(replay.turns)
                    if replay.problem:  # its time cap, or a command's: a timer either way
                        reason, detail = REFERENCE_UNFINISHED, f"{_head(replay.problem)}\n{replay.mattered()}"
                        timer = step
                    else:
                        meter.start("the check after the reference", limits.check_timeout_s)
                        after = box.run_check(bundle.check, timeout_s=limits.check_timeout_s)
                        step = meter.stop()
                        if after.timed_out:
                            reason = CHECK_TIMED_OUT
                            detail = (
                                f"the check did not finish within {limits.check_timeout_s:g} s after the "
                                f"reference\n{replay.mattered()}"
                            )
                            timer = step
                        elif after.exit_code != 0:
                            reason = REFERENCE_FAILS
                            detail = (
                                f"check exit {after.exit_code}: "
                                f"{_tail(after.stdout + after.stderr, 300)}\n{replay.mattered()}"
                            )
                            # the check's own budget ran out (a test script's timeout), or a reference command's
                            if _timer_in_output(after, step) or any(
                                t.exit_code == TIMEOUT_EXIT
                                for t in replay.turns
                                if not is_exit_command(t.command)
                            ):
                                timer = step
    except Exception as exc:
        reason, detail, infrastructure = SANDBOX_ERROR, f"{type(exc).__name__}: {exc}", True
        meter = None
    steps = meter.steps if meter is not None else {}
    return _Attempt(reason, detail, turns, infrastructure, None if infrastructure else timer, steps)


def _inline_check(result: Any, timeout_s: float) -> Any:
    """A check run inside the setup exec, read as ``run_check`` reads one: killed at its own time cap (137 after
    ``timeout_s``) is a time-out, not an exit code."""
    if result.exit_code == 137 and result.duration_s >= timeout_s * 0.98:
        return result.model_copy(update={"exit_code": None, "timed_out": True})
    return result


def gate_bundles(
    bundles: Iterable[ScenarioBundle],
    image: str | None,
    max_parallel: int | None = None,
    limits: GateLimits | None = None,
    progress: Callable[[GateResult], Any] | None = None,
) -> list[GateResult]:
    """Gate many bundles in parallel sandboxes (``SandboxPool``; ``max_parallel`` default: the cores,
    ``default_parallelism``); results keep the input order."""
    from bashgym_assets.sandbox import SandboxPool

    items = list(bundles)
    max_parallel = max_parallel or default_parallelism()

    def one(bundle: ScenarioBundle) -> GateResult:
        result = gate_bundle(bundle, image, limits)
        if progress:
            progress(result)
        return result

    if max_parallel <= 1:
        return [one(b) for b in items]
    return list(SandboxPool(max_parallel).map(one, items))


def reason_counts(results: Iterable[GateResult]) -> dict[str, int]:
    return dict(Counter(r.reason for r in results))
