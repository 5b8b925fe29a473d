"""The gate's verdicts do not depend on the machine's load (issue 40, item 5).

Under load the gate refused valid tasks: a factory task's check ran past its cap, an imported suite's test script
ran past its own wall-clock budget. The load is real here: a burner container (bounded: ``timeout`` and removal
at the end) keeps every core busy at a high CPU weight, so a sandbox beside it gets a small share of a CPU. How
much that slows a sandbox on this machine is measured first (a fixed amount of CPU work, idle and loaded), and the
caps are set between the two: a valid task's timer fires under the load and not without it. Each test fails (does
not skip) when the burners do not slow a sandbox enough to test anything.
"""

from __future__ import annotations

import contextlib
import os
import threading

import docker
import pytest
from sandbox_fixtures import COUNT_LINES

from bashgym_assets.sandbox import Sandbox, SandboxSpec, load
from bashgym_assets.scenarios import gate
from bashgym_assets.scenarios.bundle import ScenarioBundle, parse_bundle
from bashgym_assets.scenarios.gate import (
    CHECK_TIMED_OUT,
    TIMER_UNDER_LOAD,
    GateLimits,
    TimedStep,
    gate_bundle,
)

WORK_S = 1.0  # CPU seconds of the task's work in the check
SPIN = f"/usr/bin/python3 -c 'import time\nwhile time.process_time() < {WORK_S}: pass'"
DONE = "[ -f /home/operator/count.txt ] || exit 1"  # the check fails at once on the untouched setup
RIGHT = "[ \"$(tr -d ' \\n' < /home/operator/count.txt)\" = 3 ]"


def bundle(sid: str, check: str) -> ScenarioBundle:
    return parse_bundle({**COUNT_LINES, "id": sid, "check": check})


class Burners:
    """One container keeping every core busy, at a CPU weight that leaves a 1-CPU sandbox beside it a fraction of a
    CPU; killed by its own ``timeout`` after ``limit_s`` whatever happens, removed by ``stop``."""

    def __init__(self, image: str, limit_s: int = 300, weight: int = 4096) -> None:
        self.image, self.limit_s, self.weight = image, limit_s, weight  # weight: CPU shares per core
        self.container = None

    def start(self) -> Burners:
        cores = load.usable_cores()
        loops = f"for i in $(seq {cores}); do (while :; do :; done) & done; wait"
        self.container = docker.from_env().containers.run(
            self.image,
            ["timeout", "-s", "KILL", str(self.limit_s), "bash", "-c", loops],
            detach=True,
            auto_remove=True,
            network_mode="none",
            nano_cpus=cores * 10**9,
            cpu_shares=min(262144, self.weight * cores),
            labels={"bashgym.test": "burner"},
        )
        return self

    def stop(self) -> None:
        if self.container is not None:
            with contextlib.suppress(docker.errors.APIError):  # gone already (its timeout)
                self.container.remove(force=True)
            self.container = None

    def __enter__(self) -> Burners:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def work_wall_s(image: str, pick: int = 1) -> float:
    """Seconds ``WORK_S`` of CPU work takes in a sandbox right now (of three runs: ``pick`` 0 the fastest, 1 the
    median)."""
    with Sandbox(SandboxSpec(image=image, labels={"bashgym.purpose": "test-load"})) as box:
        walls = sorted(box.run_as_root(SPIN, timeout_s=120).duration_s for _ in range(3))
    return walls[pick]


@pytest.fixture
def idle_wall(sandbox_image: str) -> float:
    """The work's time without the burners, right before a test starts them: the fastest of three (other load on
    the machine comes and goes)."""
    return work_wall_s(sandbox_image, pick=0)


def loaded_wall(image: str, idle: float, at_least: float = 2.0) -> float:
    """The same work under the burners, the median of three runs as ``work_wall_s``; fails (not skips) when the load
    does not slow a sandbox enough (``at_least`` times) for the test to mean anything on this machine.

    Whether it did is all that is asked: each run is cut off once it has taken ``at_least`` times ``idle`` (a
    starved run took 5-17 s for 1 s of work), and the runs stop once two of the three agree. Returns the median,
    or the cut-off when it was at least that."""
    bound = at_least * idle
    slow: list[bool] = []
    walls: list[float] = []
    with Sandbox(SandboxSpec(image=image, labels={"bashgym.purpose": "test-load"})) as box:
        while slow.count(True) < 2 and slow.count(False) < 2:
            run = box.run_as_root(SPIN, timeout_s=bound)
            slow.append(run.timed_out or run.duration_s >= bound)
            walls.append(max(run.duration_s, bound) if run.timed_out else run.duration_s)
    wall = sorted(walls)[1] if len(walls) == 3 else (min(walls) if slow.count(True) == 2 else max(walls))
    if slow.count(True) < 2:
        pytest.fail(
            f"the burners slowed a sandbox only from {idle:.2f} s to {wall:.2f} s: no load to test under"
        )
    return wall


def first_attempt_under(burners: Burners, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The gate's first attempt runs under the burners, which stop when it ends (the load passes: another
    pipeline ended); returns the reasons of the attempts as they end."""
    reasons: list[str] = []
    once = gate._gate_once

    def attempt(*args: object, **kwargs: object) -> object:
        outcome = once(*args, **kwargs)
        reasons.append(outcome.reason)
        burners.stop()
        return outcome

    monkeypatch.setattr(gate, "_gate_once", attempt)
    return reasons


def test_a_check_starved_by_load_is_tried_again_alone_and_admitted(
    sandbox_image: str, idle_wall: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A valid task whose check does 1 s of CPU work, its cap between the idle and the loaded time: refused as
    ``check_timed_out`` under load before; now its timer is seen to be the load's, it is tried again alone, and
    admitted."""
    task = bundle("gate-load-starved", f"{DONE}\n{SPIN}\n{RIGHT}")
    with Burners(sandbox_image, weight=16384) as burners:
        loaded_wall(sandbox_image, idle_wall, at_least=3.0)
        cap = 1.5 * idle_wall  # loaded: well past it; the retry has it stretched, x2 at least
        reasons = first_attempt_under(burners, monkeypatch)
        result = gate_bundle(task, sandbox_image, GateLimits(check_timeout_s=cap))
    assert reasons == [CHECK_TIMED_OUT, "admitted"], (reasons, result.detail)
    assert result.admitted and result.reason == "admitted", result.detail
    assert result.attempts == 2, result.detail
    assert "admitted on a second attempt, alone" in result.detail
    assert "the first attempt was refused as check_timed_out by a timer, timer under load" in result.detail
    assert "the machine was loaded" in result.detail
    assert "load average" in result.detail and "of CPU in" in result.detail, result.detail


def test_a_test_scripts_own_budget_run_out_under_load_is_tried_again(
    sandbox_image: str, idle_wall: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An imported suite's test script with a wall-clock budget of its own (``timeout``, then "ran past the budget
    of the original test"): the gate's caps cannot stretch it, but a retry alone once the load has passed admits the
    task. Before: ``reference_does_not_pass``, whatever the load.

    The script's budget is generous (5x the work's quiet time: other load on a shared machine comes and goes), so
    the first attempt's sandbox gets a fiftieth of a CPU besides the burners: its budget runs out for certain."""
    budget = 5.0 * idle_wall
    check = (
        f"{DONE}\nif ! timeout {budget:.2f} {SPIN}; then\n"
        f"  echo 'test_solution: timed out: ran past the {budget:.1f} s budget of the original test'; exit 1\n"
        f"fi\n{RIGHT}"
    )
    specs = gate.spec_for_bundle
    throttled: list[float] = []

    def first_starved(*args: object, **kwargs: object) -> object:
        spec = specs(*args, **kwargs)
        if not throttled:
            throttled.append(0.02)
            spec = spec.model_copy(update={"cpus": 0.02})
        return spec

    monkeypatch.setattr(gate, "spec_for_bundle", first_starved)
    with Burners(sandbox_image, weight=16384) as burners:
        attempts = first_attempt_under(burners, monkeypatch)
        result = gate_bundle(
            bundle("gate-load-budget", check), sandbox_image, GateLimits(check_timeout_s=300)
        )
    assert attempts == [gate.REFERENCE_FAILS, "admitted"], (attempts, result.detail)
    assert result.admitted and result.attempts == 2, result.detail
    assert "refused as reference_does_not_pass by a timer" in result.detail, result.detail


def test_under_load_the_refusal_says_whether_the_timer_was_the_loads(sandbox_image: str) -> None:
    """Refused twice by a timer under persistent load, the reason says which it was: a check that works (spins)
    and never gets the CPU it needs is ``timer_under_load``, naming the load; one that sleeps is a real time-out
    (its container used no CPU: no load explains it), whatever the load."""
    spinner = bundle("gate-load-spinner", f"{DONE}\nwhile :; do :; done")
    sleeper = bundle("gate-load-sleeper", f"{DONE}\nsleep 600")
    with Burners(sandbox_image):
        spun = gate_bundle(spinner, sandbox_image, GateLimits(check_timeout_s=2.0))
        slept = gate_bundle(sleeper, sandbox_image, GateLimits(check_timeout_s=3.0))
    assert spun.reason == TIMER_UNDER_LOAD and not spun.admitted and spun.attempts == 2, spun.detail
    assert spun.detail.startswith("timer under load: refused as check_timed_out on both attempts"), (
        spun.detail
    )
    assert "load average" in spun.detail and "first: the check after the reference" in spun.detail
    assert "the second alone (every time cap x" in spun.detail  # the retry's caps were stretched
    assert slept.reason == CHECK_TIMED_OUT and slept.attempts == 2, slept.detail
    assert "did not finish within 3 s after the reference" in slept.detail
    assert "a real time-out: its container used almost no CPU" in slept.detail, slept.detail


# ---- without Docker -----------------------------------------------------------------------------------------------
def test_the_gates_default_parallelism_never_exceeds_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every default of the gate's parallelism is the cores (the factory's was 8 on 2-core machines)."""
    from bashgym_assets import demo
    from bashgym_assets.cli import build_parser
    from bashgym_assets.defs.scenarios import GateConfig

    cores = os.cpu_count() or 1
    assert 1 <= gate.default_parallelism() <= cores
    parser = build_parser()
    for argv in (["factory"], ["suite", "gate", "x"], ["suite", "eval", "x"]):
        assert (parser.parse_args(argv).parallel or gate.default_parallelism()) <= cores, argv
    assert (GateConfig().max_parallel or gate.default_parallelism()) <= cores
    for name in ("factory", "factory-cpu", "factory-cpu-bf16"):
        assert demo.PROFILES[name].get("gated_scenarios", {}).get("max_parallel", 1) <= cores, name

    # gate_bundles itself, on a machine of one core and of three
    seen: list[int] = []

    class Pool:
        def __init__(self, n: int) -> None:
            seen.append(n)

        def map(self, fn, items):  # noqa: ANN001, ANN201
            return [fn(i) for i in items]

    monkeypatch.setattr("bashgym_assets.sandbox.SandboxPool", Pool)
    monkeypatch.setattr(gate, "gate_bundle", lambda b, image, limits=None: b.id)
    items = [bundle(f"gate-par-{i}", "false") for i in range(4)]
    for n in (1, 3):
        monkeypatch.setattr(load.os, "sched_getaffinity", lambda _pid, n=n: set(range(n)), raising=False)
        seen.clear()
        assert gate.gate_bundles(items, "img") == [b.id for b in items]
        assert all(k <= n for k in seen), (n, seen)


def test_the_factory_module_gates_at_the_cores_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from bashgym_assets.scenarios.factory import __main__ as factory_main
    from bashgym_assets.scenarios.factory.family import all_families

    asked: list = []
    monkeypatch.setattr(
        "bashgym_assets.scenarios.gate.gate_bundles",
        lambda bundles, image, max_parallel=None, **kw: asked.append(max_parallel) or [],
    )
    monkeypatch.setattr("bashgym_assets.images.ensure_docker_engine", lambda: "test")
    monkeypatch.setattr("bashgym_assets.images.sandbox_image_tag", lambda: "img")
    factory_main.main(["--families", next(iter(all_families())), "--per-family", "1", "--gate"])
    assert asked and (asked[0] or gate.default_parallelism()) <= (os.cpu_count() or 1)


def _step(
    cpu_s: float | None,
    wall_s: float,
    stall: float | None,
    io: float = 0.0,
    what: str = "the check after the reference",
    cap_s: float | None = None,
) -> TimedStep:
    machine = load.LoadReading(
        window_s=wall_s, cores=2, load_average=(5.0, 3.0, 1.0), cpu_stall=stall, io_stall=io
    )
    return TimedStep(what=what, wall_s=wall_s, cpu_s=cpu_s, machine=machine, cap_s=cap_s)


def test_a_timers_verdict_weighs_the_containers_cpu_against_the_machines_load() -> None:
    worked_loaded = _step(0.5, 3.0, 0.8)
    assert worked_loaded.starved and "timer under load" in worked_loaded.verdict()
    assert 2.0 <= worked_loaded.retry_scale() <= gate.MAX_RETRY_SCALE
    slept_loaded = _step(0.01, 3.0, 0.8)  # on a loaded machine: starved hard, or waiting? A retry tells
    assert not slept_loaded.starved and slept_loaded.ambiguous and "almost no CPU" in slept_loaded.verdict()
    assert slept_loaded.retry_scale() == 2.0
    assert not gate.load_explains(
        slept_loaded, _step(0.01, 6.0, 0.8)
    )  # no more CPU in twice the time: a wait
    assert gate.load_explains(slept_loaded, _step(0.05, 6.0, 0.8))  # more done with more time: starved
    assert gate.load_explains(slept_loaded, _step(1.0, 6.0, 0.8))
    assert not gate.load_explains(worked_loaded, _step(2.9, 3.0, 0.05))  # the retry ran on a quiet machine
    slept_quiet = _step(0.01, 3.0, 0.05)
    assert not slept_quiet.ambiguous and slept_quiet.retry_scale() == 1.0
    assert "a real time-out: its container used almost no CPU" in slept_quiet.verdict()
    assert _step(0.01, 3.0, 0.1, io=0.7).starved  # waiting on a disk under I/O pressure is the load's
    quiet = _step(2.9, 3.0, 0.05)
    assert not quiet.starved and "the machine was not loaded" in quiet.verdict()
    unknown = _step(None, 3.0, 0.8)
    assert unknown.starved and unknown.retry_scale() == 2.0
    assert "CPU time unknown" in unknown.describe() and "load average 5.0 on 2 core(s)" in unknown.describe()


def test_load_readings_cover_their_window() -> None:
    reading = load.sample(0.2)
    assert 0.15 <= reading.window_s <= 5 and reading.cores == load.usable_cores()
    assert reading.cpu_busy is None or 0.0 <= reading.cpu_busy <= 1.0
    assert reading.cpu_stall is None or 0.0 <= reading.cpu_stall <= 1.0
    assert reading.describe().startswith(("load average", f"{reading.cores} core"))


def test_a_retry_runs_alone() -> None:
    """While a retry holds the lane no other attempt runs, and attempts running when it asks finish first."""
    lane = gate._Lane()
    events: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def attempt(name: str) -> None:
        with lane.shared():
            events.append(f"{name}+")
            inside.set()
            release.wait(5)
            events.append(f"{name}-")

    def retry() -> None:
        with lane.alone():
            events.append("retry")

    first = threading.Thread(target=attempt, args=("a",))
    first.start()
    inside.wait(5)
    alone = threading.Thread(target=retry)
    alone.start()
    while not lane._waiting:  # the retry waits for the running attempt
        threading.Event().wait(0.01)
    late = threading.Thread(target=attempt, args=("b",))
    late.start()  # a new attempt waits for the retry
    threading.Event().wait(0.1)
    release.set()
    for t in (first, alone, late):
        t.join(5)
    assert events == ["a+", "a-", "retry", "b+", "b-"], events


def test_a_task_that_finishes_only_with_stretched_caps_but_needs_more_cpu_than_its_cap_is_refused() -> None:
    """The budget in CPU time: a retry whose caps were stretched x4 that finished, but used more CPU than the
    caller's cap gives on a quiet machine, was too slow, not starved; within it, it is admitted."""
    first = gate._Attempt(
        CHECK_TIMED_OUT,
        "the check did not finish within 30 s after the reference",
        2,
        False,
        timer=_step(6.0, 30.0, 0.9, what="the check after the reference", cap_s=30.0),
    )

    def retry(cpu_s: float) -> gate._Attempt:
        step = _step(cpu_s, cpu_s * 1.5, 0.9, what="the check after the reference", cap_s=120.0)
        return gate._Attempt("admitted", "", 2, False, steps={step.what: step})

    slow = gate._after_retry(first, retry(45.0), 4.0)
    assert slow.reason == CHECK_TIMED_OUT and "a real time-out: with every time cap x4" in slow.detail
    assert "used 45.0 s of CPU, more than its 30 s cap" in slow.detail
    fine = gate._after_retry(first, retry(20.0), 4.0)
    assert fine.reason == "admitted" and fine.detail.startswith("admitted on a second attempt, alone")
