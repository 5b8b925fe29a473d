"""SIGTERM / SIGINT of a long command stops it in order (issue 40, item 3): it says that it stopped, in one line, its
sandboxes are gone before it exits, and its Dagster run and MLflow run are ended at once, not when the next
pipeline's reaper finds them.

Each test starts the real command (``bashgym demo --quick``, ``bashgym factory``, ``bashgym train``) as a user would,
on a fresh data folder, waits until its work is under way (its own sandboxes running, its training stepping),
sends the signal and then looks: at the exit status and the last line on stderr, at the Docker engine for any
container owned by one of the command's processes, at the Dagster instance and at the MLflow store (SQLite, read
directly). The three commands run at once, each followed, stopped and looked at right after it exited by a thread
of its own (``stopped``, started with the module: their start-ups, 25-45 s each, overlap); each test then checks
what its thread saw. ``stopping``'s mechanics (nesting, forwarding, the watchdog) are tested in-process at the end.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bashgym_assets.config import PROJECT_ROOT, Settings
from bashgym_assets.processes import start_ticks

BASHGYM = Path(sys.executable).with_name("bashgym")
LABEL_SANDBOX = "bashgym.sandbox"
LABEL_OWNER = "bashgym.sandbox.owner"


def _descendants(root: int) -> set[tuple[int, str]]:
    """(pid, start ticks) of every live process below ``root``, read from /proc."""
    parent_of = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parent_of[int(name)] = int(
                    Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parent_of.items() if ppid in frontier and pid not in found}
        found |= frontier
    return {(pid, start) for pid in found if (start := start_ticks(pid))}


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BASHGYM_", "DAGSTER_"))}
    env.update(
        {
            "BASHGYM_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster"),
            "BASHGYM_TRACES": "0",
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
    )
    return env


class Watched:
    """A command started as a user starts it, with its process tree and its sandboxes followed while it runs."""

    def __init__(self, args: list[str], home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.out = home.parent / "stdout.txt"
        self.err = home.parent / "stderr.txt"
        self.proc = subprocess.Popen(
            [str(BASHGYM), *args],
            env=env,
            cwd=PROJECT_ROOT,
            stdout=self.out.open("w"),
            stderr=self.err.open("w"),
        )
        self.pids: set[tuple[int, str]] = set()  # (pid, start ticks) of every process of the command seen
        self.containers: set[str] = set()  # ids of the sandboxes those processes owned

    def look(self) -> None:
        me = (self.proc.pid, start_ticks(self.proc.pid))
        if me[1]:
            self.pids.add(me)
        self.pids |= _descendants(self.proc.pid)
        self.containers |= {c["Id"] for c in self.owned_containers()}

    def owned_containers(self) -> list[dict]:
        import docker

        api = docker.from_env().api
        found = []
        for c in api.containers(all=True, filters={"label": [LABEL_SANDBOX]}):
            parts = (c.get("Labels") or {}).get(LABEL_OWNER, "").split(":")
            if len(parts) == 5 and parts[1].isdigit() and (int(parts[1]), parts[2]) in self.pids:
                found.append(c)
        return found

    def wait_until(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.look()
            if ready():
                return
            assert self.proc.poll() is None, (
                f"{what}: the command ended first (exit {self.proc.returncode}):\n"
                + self.out.read_text()[-3000:]
                + self.err.read_text()[-3000:]
            )
            assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
            time.sleep(0.2)

    def stop(self, signum: int, timeout: float = 90.0) -> tuple[int, list[str]]:
        """Send ``signum``; the exit status and stderr's lines once it has exited (killed after ``timeout``)."""
        self.look()
        self.proc.send_signal(signum)
        sent = time.monotonic()
        try:
            code = self.proc.wait(timeout=timeout)
            print(f"exited {time.monotonic() - sent:.1f} s after {signal.Signals(signum).name}")
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"still running {timeout:.0f} s after {signum!r}")
        return code, self.err.read_text().splitlines()

    def kill_leftovers(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid, start in self.pids:
            if start_ticks(pid) == start:
                os.kill(pid, signal.SIGKILL)


_DAGSTER_HOME_SET = threading.Lock()  # the commands' threads set DAGSTER_HOME in turn


def _dagster_runs(home: Path) -> dict[str, str]:
    """run id -> status of every run of the data folder's instance (its dagster.yaml reads DAGSTER_HOME)."""
    import dagster as dg

    with _DAGSTER_HOME_SET:
        before = os.environ.get("DAGSTER_HOME")
        os.environ["DAGSTER_HOME"] = str(home / "dagster")
        try:
            with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
                return {r.run_id: r.status.value for r in instance.get_runs()}
        finally:
            if before is None:
                os.environ.pop("DAGSTER_HOME", None)
            else:
                os.environ["DAGSTER_HOME"] = before


def _mlflow_runs(home: Path) -> dict[str, str]:
    """run name -> status, read from the SQLite store."""
    db = home / "mlflow" / "mlflow.db"
    if not db.is_file():
        return {}
    con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return dict(con.execute("SELECT name, status FROM runs").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        con.close()


LIVE = {"NOT_STARTED", "QUEUED", "STARTING", "STARTED", "CANCELING"}


@dataclass
class Stopped:
    """A command stopped once under way, and what was seen of it: its runs when the signal went, and right after it
    exited its status, stderr, sandboxes and runs."""

    run: Watched
    dagster_before: dict[str, str]
    mlflow_before: dict[str, str]
    code: int
    err: list[str]
    owned_after: list[dict]  # sandboxes of its processes still on the engine
    still: list[str]  # of every sandbox they ever owned, those the engine still has
    dagster_after: dict[str, str] = field(default_factory=dict)
    mlflow_after: dict[str, str] = field(default_factory=dict)


def _stop_when_under_way(run: Watched, what: str, ready: Callable[[Watched], bool], signum: int) -> Stopped:
    """What a test did in turn before, now in a thread per command: wait until ``ready``, send ``signum``, and look
    right after the command exited (before anything else could end a sandbox it left)."""
    import docker

    try:
        run.wait_until(what, lambda: ready(run), 600)
        dagster_before, mlflow_before = _dagster_runs(run.home), _mlflow_runs(run.home)
        code, err = run.stop(signum)
        run.look()
        api = docker.from_env().api
        return Stopped(
            run,
            dagster_before,
            mlflow_before,
            code,
            err,
            owned_after=run.owned_containers(),
            still=[c for c in run.containers if api.containers(all=True, filters={"id": c})],
            dagster_after=_dagster_runs(run.home),
            mlflow_after=_mlflow_runs(run.home),
        )
    finally:
        run.kill_leftovers()


def _assert_stopped_in_order(stopped: Stopped, command: str, signum: int) -> None:
    name, code, err = signal.Signals(signum).name, stopped.code, stopped.err
    assert code == 128 + signum, (code, err[-20:])
    assert err and err[-1].startswith(f"{command}: stopped by {name}"), err[-20:]
    assert not any(line.startswith("Traceback") for line in err), err[-40:]
    assert stopped.owned_after == [], "a sandbox of the stopped command outlived it"
    assert stopped.still == [], stopped.still
    runs = stopped.dagster_after
    assert not [r for r, status in runs.items() if status in LIVE], runs
    # the stopped run ends CANCELED (a termination the user asked for), not FAILURE; the runs before it succeeded
    assert "CANCELED" in runs.values() and set(runs.values()) <= {"SUCCESS", "CANCELED"}, runs
    assert "RUNNING" not in stopped.mlflow_after.values(), stopped.mlflow_after


def _training_home(home: Path, conversations: int) -> Path:
    """A data folder holding an SFT dataset of ``conversations`` rows and a tiny base model (the training test
    starts at ``sft_adapter``: the earlier stages are the demo test's)."""
    from bashgym_assets.lake import Lake
    from bashgym_assets.testing import datasets as syn
    from bashgym_assets.testing.tiny_model import build_tiny_model
    from bashgym_assets.training_data import build as ds

    settings = Settings(home=home)
    settings.ensure_dirs()
    model = build_tiny_model(settings.models_dir / "tiny")
    trajectories = [
        syn.trajectory(
            f"task-{i}",
            f"task {i}: count the lines of notes-{i}.txt and list the folder",
            [f"wc -l notes-{i}.txt", f"ls -la dir{i}"],
            kept=True,
            outputs=[f"{i} notes-{i}.txt", "total 8\nfile.txt"],
        )
        for i in range(conversations)
    ]
    built = ds.build_sft([], trajectories)
    Lake(settings).write("sft_dataset", built.rows, schema=ds.SFT_SCHEMA)
    return model


DEMO, FACTORY, TRAINING = "demo", "factory", "training"


def _has_a_sandbox(run: Watched) -> bool:
    return bool(run.owned_containers())


def _steps(run: Watched) -> bool:
    return "sft step" in run.out.read_text()


@pytest.fixture(scope="module")
def stopped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Stopped]]]:
    """The command of each test of this module that the session runs, on a fresh data folder each, all started at
    once and each stopped by a thread of its own once under way (``_stop_when_under_way``): the demo and the
    factory once their first sandbox runs (the demo: killed early, at the gate's first sandbox), the training at
    its first SFT step (the earlier stages are the demo's)."""
    tests = {
        DEMO: "test_sigterm_of_the_demo_stops_it_its_sandboxes_and_its_run",
        FACTORY: "test_sigint_of_the_factory_stops_it_its_sandboxes_and_its_run",
        TRAINING: "test_sigterm_mid_training_ends_its_dagster_and_mlflow_runs_at_once",
    }
    selected = {
        item.name for item in request.session.items if item.nodeid.startswith(f"{request.node.nodeid}::")
    }
    wanted = {key for key, test in tests.items() if test in selected}
    runs: dict[str, Watched] = {}
    futures: dict[str, Future[Stopped]] = {}
    pool = ThreadPoolExecutor(max_workers=3)
    try:
        if {DEMO, FACTORY} & wanted:
            request.getfixturevalue("sandbox_image")  # built before a command needs it
        if DEMO in wanted:
            home = tmp_path_factory.mktemp("demo") / "home"
            runs[DEMO] = Watched(["demo", "--quick"], home, _env(home))
            futures[DEMO] = pool.submit(
                _stop_when_under_way, runs[DEMO], "the demo's first sandbox", _has_a_sandbox, signal.SIGTERM
            )
        if FACTORY in wanted:
            home = tmp_path_factory.mktemp("factory") / "home"
            runs[FACTORY] = Watched(["factory", "--per-family", "1", "--parallel", "2"], home, _env(home))
            futures[FACTORY] = pool.submit(  # SIGINT as Ctrl-C, sent to the command alone
                _stop_when_under_way,
                runs[FACTORY],
                "the factory's first sandbox",
                _has_a_sandbox,
                signal.SIGINT,
            )
        if TRAINING in wanted:
            home = tmp_path_factory.mktemp("training") / "home"
            model = _training_home(
                home, conversations=1000
            )  # 150 steps of the full profile: stopped at step 1 or 2
            runs[TRAINING] = Watched(
                ["train", "--profile", "full", "--only", "sft_adapter"],
                home,
                _env(home, BASHGYM_BASE_MODEL=str(model)),
            )
            futures[TRAINING] = pool.submit(
                _stop_when_under_way, runs[TRAINING], "the first SFT step", _steps, signal.SIGTERM
            )
        yield futures
    finally:
        for run in runs.values():  # a thread still waiting sees its command end, and ends
            if run.proc.poll() is None:
                run.proc.kill()
        pool.shutdown(wait=True)


@pytest.mark.slow
def test_sigterm_of_the_demo_stops_it_its_sandboxes_and_its_run(
    sandbox_image: str, stopped: dict[str, Future[Stopped]]
) -> None:
    demo = stopped[
        DEMO
    ].result()  # killed early: once the gate's sandboxes (the first of the plan's) are running
    assert LIVE & set(demo.dagster_before.values())  # its run was going
    _assert_stopped_in_order(demo, "bashgym demo", signal.SIGTERM)


@pytest.mark.slow
def test_sigint_of_the_factory_stops_it_its_sandboxes_and_its_run(
    sandbox_image: str, stopped: dict[str, Future[Stopped]]
) -> None:
    factory = stopped[FACTORY].result()  # once its first sandbox ran, SIGINT as Ctrl-C to the command alone
    assert LIVE & set(factory.dagster_before.values())
    _assert_stopped_in_order(factory, "bashgym factory", signal.SIGINT)


@pytest.mark.slow
def test_sigterm_mid_training_ends_its_dagster_and_mlflow_runs_at_once(
    stopped: dict[str, Future[Stopped]],
) -> None:
    training = stopped[TRAINING].result()  # SIGTERM at its first SFT step
    home = training.run.home
    # the training's MLflow run was live when it was stopped
    assert "RUNNING" in training.mlflow_before.values()
    assert LIVE & set(training.dagster_before.values())
    _assert_stopped_in_order(training, "bashgym train", signal.SIGTERM)
    assert set(training.mlflow_after.values()) == {"KILLED"}, training.mlflow_after  # stopped, not failed
    assert not (home / "artifacts" / "adapters").exists() or not any(
        p.name.startswith("sft-") for p in (home / "artifacts" / "adapters").iterdir()
    )  # a stopped training never publishes an adapter


# ---- the mechanism in-process ------------------------------------------------------------------------------------
CHILD_THAT_STOPS = """
import signal, sys, time
def stop(signum, frame):
    print("child: stopping", flush=True)
    time.sleep(0.3)
    sys.exit(1)
signal.signal(signal.SIGTERM, stop)
print("child: working", flush=True)
time.sleep(60)
"""

COMMAND = """
import json, os, signal, subprocess, sys, time
from bashgym_assets import stopping

seen = []
stopping.register_cleanup("record", lambda ctx: seen.append(sorted(p.pid for p in ctx.owners)) or ["recorded"])
try:
    with stopping.on_signals("bashgym test", grace_s=float(sys.argv[2]), deadline_s=float(sys.argv[4])):
        if sys.argv[1] == "child":
            with stopping.delegating() as adopt:
                child = subprocess.Popen([sys.executable, "-c", sys.argv[3]], stdout=subprocess.PIPE, text=True)
                adopt(child)
                print(json.dumps({"child": child.pid}), flush=True)
                for line in child.stdout:
                    print(line.rstrip(), flush=True)
            raise RuntimeError(f"the child ended with {child.wait()}")
        if sys.argv[1] == "stubborn":
            while True:
                try:
                    print(json.dumps({"child": None}), flush=True)
                    time.sleep(60)
                except KeyboardInterrupt:
                    print("swallowed", flush=True)
        print(json.dumps({"child": None}), flush=True)
        time.sleep(60)
except stopping.Stopped as stopped:
    print(json.dumps({"exit": stopped.exit_code, "owners": seen}), flush=True)
    sys.exit(stopped.exit_code)
"""


def _ignoring(*signums: int) -> Callable[[], None]:
    """A ``preexec_fn`` that starts the program with ``signums`` ignored, as a shell starts a background job
    (SIGINT) or as a parent that lost its SIGTERM passes it on (an ignored signal is inherited through exec)."""

    def ignore() -> None:
        for signum in signums:
            signal.signal(signum, signal.SIG_IGN)

    return ignore


def _command(
    mode: str, grace: float = 5.0, deadline: float = 60.0, ignored: tuple[int, ...] = ()
) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", COMMAND, mode, str(grace), CHILD_THAT_STOPS, str(deadline)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        preexec_fn=_ignoring(*ignored) if ignored else None,
    )
    assert proc.stdout is not None
    json.loads(proc.stdout.readline())
    return proc


def test_a_stop_is_forwarded_to_the_child_doing_the_work_and_said_once() -> None:
    proc = _command("child")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "child: working"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "child: stopping" in out  # the child got the signal and stopped its own way
    result = json.loads(out.strip().splitlines()[-1])
    assert len(result["owners"]) == 1 and len(result["owners"][0]) >= 2  # this process and its child
    assert err.strip().splitlines() == ["bashgym test: stopped by SIGTERM: recorded"]


def test_work_in_process_is_interrupted_and_a_swallowed_interrupt_is_ended_by_the_watchdog() -> None:
    proc = _command("inline")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().endswith("bashgym test: stopped by SIGINT: recorded")

    stubborn = _command("stubborn", grace=0.5, deadline=1.0)
    assert stubborn.stdout is not None
    stubborn.send_signal(signal.SIGTERM)
    assert stubborn.stdout.readline().strip() == "swallowed"
    # the interrupt is swallowed: the watchdog cleans up and ends the process after the grace and the deadline
    _, err = stubborn.communicate(timeout=120)
    assert stubborn.returncode == 128 + signal.SIGTERM
    assert "bashgym test: stopped by SIGTERM: recorded" in err


def test_scopes_nest_and_are_inert_outside_the_main_thread() -> None:
    from bashgym_assets import stopping

    said: list[str] = []
    previous = signal.getsignal(signal.SIGTERM)
    with (
        pytest.raises(stopping.Stopped) as info,
        stopping.on_signals("outer", echo=said.append),
        stopping.on_signals("inner", echo=said.append),
    ):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert info.value.exit_code == 143 and len(said) == 1 and said[0].startswith("inner: stopped by SIGTERM")
    assert signal.getsignal(signal.SIGTERM) is previous  # handlers restored
    assert stopping.requested()  # the process is on its way out: no new sandbox starts
    stopping.forget_stop()  # (this one goes on: the other tests)
    assert not stopping.requested()

    ran: list[bool] = []

    def elsewhere() -> None:
        with stopping.on_signals("thread") as scope:
            ran.append(scope.requested.is_set())

    t = threading.Thread(target=elsewhere)
    t.start()
    t.join()
    assert ran == [False] and signal.getsignal(signal.SIGTERM) is previous


def test_an_inherited_ignored_sigterm_still_stops_a_command_and_its_ignored_sigint_stays_ignored() -> None:
    """A command started by a parent that ignored SIGTERM and SIGINT (a background job of a script whose SIGTERM a
    Dagster run had mapped to the ignored SIGINT): SIGINT stays ignored, as the shell meant, and SIGTERM still
    stops it in order."""
    proc = _command("inline", ignored=(signal.SIGINT, signal.SIGTERM))
    proc.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=2)  # ignored: still running
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().endswith("bashgym test: stopped by SIGTERM: recorded")


DAGSTER_CHAIN = """
import dagster as dg
@dg.asset
def first(context):
    context.log.info("first ran")
defs = dg.Definitions(assets=[first])
"""

AFTER_A_RUN = """
import json, signal, sys, time
import dagster as dg
from dagster._utils.interrupts import capture_interrupts
from bashgym_assets import demo

def term() -> str:
    handler = signal.getsignal(signal.SIGTERM)
    return "ignored" if handler is signal.SIG_IGN else "default" if handler is signal.SIG_DFL else "handled"

seen = {"start": term()}
with capture_interrupts():  # Dagster's own guard, as its runs use it
    pass
seen["after Dagster's own guard"] = term()
signal.signal(signal.SIGTERM, signal.SIG_DFL)
runner = demo.AssetJobRunner("tiny_one", dg.DagsterInstance.get(), locations={})
run = runner.run(["first"])
seen["after a runner's run"] = term()
seen["status"] = run.status.value
print(json.dumps(seen), flush=True)
time.sleep(120)
"""


def test_a_background_step_process_still_stops_on_sigterm_after_its_dagster_runs(tmp_path: Path) -> None:
    """The demo's step process started as a script's background job (``bashgym demo &``: SIGINT ignored) runs
    Dagster in process. Dagster's guard maps SIGTERM to SIGINT's disposition when it restores it, so without
    ``stopping.sigterm_kept`` the process ignored SIGTERM between runs and its parent's forwarded stop waited
    for the grace and a SIGKILL. After an ``AssetJobRunner`` run SIGTERM is what it was, and ends the process."""
    (tmp_path / "tiny_one.py").write_text(DAGSTER_CHAIN)
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PROJECT_ROOT)]),
        "DAGSTER_HOME": str(tmp_path),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", AFTER_A_RUN],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring(signal.SIGINT),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)[1][-3000:]
        seen = json.loads(line)
        # the mechanism is still Dagster's (else this test would prove nothing): its guard leaves SIGTERM ignored
        assert seen["start"] == "default" and seen["after Dagster's own guard"] == "ignored", seen
        assert seen["status"] == "SUCCESS" and seen["after a runner's run"] == "default", seen
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
