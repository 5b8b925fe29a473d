"""Kills leave no debris (issue 31): step children die with their parent, dead writers' MLflow runs end as KILLED,
and the ``.tmp-*`` leftovers of killed atomic writes are swept at the next start.

Every fault is injected for real: real processes killed with SIGKILL, a real Dagster run on a SQLite instance, a
real MLflow SQLite store, the lake's own atomic writers.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from bashgym_assets.config import PROJECT_ROOT, Settings
from bashgym_assets.housekeeping import pipeline_session, sweep_debris

CHILD = """
import sys, time
from pathlib import Path
from typing import Any
out = Path(sys.argv[1])
kind = sys.argv[2]
if kind != "plain":
    from bashgym_assets.process_lifetime import die_with_parent
    die_with_parent(grace_s=2)
if kind == "dagster":   # like plan_main: runs one after the other; Dagster maps SIGTERM to its own handlers
    import dagster as dg

    @dg.asset
    def slow_step() -> None:
        (out / "dagster.started").write_text("")
        try:
            time.sleep(60)
            (out / "dagster.finished").write_text("")
        finally:
            (out / "dagster.cleaned").write_text("")

    for n in range(3):
        result = dg.materialize([slow_step], raise_on_error=False)
        (out / f"dagster.after-{n}").write_text(str(result.success))
    sys.exit(0)
(out / f"{kind}.started").write_text("")
try:
    time.sleep(60)
    (out / f"{kind}.finished").write_text("")      # the late write of a step whose parent is gone
except KeyboardInterrupt:
    (out / f"{kind}.interrupted").write_text("")
    if kind == "stubborn":
        while True:                                     # swallows the interrupt: only the grace alarm ends it
            try:
                time.sleep(60)
            except KeyboardInterrupt:
                pass
"""

PARENT = """
import subprocess, sys, time
procs = [subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[1], kind])
         for kind in ("graceful", "stubborn", "dagster", "plain")]
print(" ".join(str(p.pid) for p in procs), flush=True)
time.sleep(300)
"""


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **extra}


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper may not have collected it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _until(check, timeout: float, what: str) -> None:  # noqa: ANN001 - a predicate
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.slow
def test_step_children_die_with_their_killed_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path), CHILD], env=_env(), stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    graceful, stubborn, dagster, plain = map(int, parent.stdout.readline().split())
    kinds = ("graceful", "stubborn", "dagster", "plain")
    try:
        _until(
            lambda: all((tmp_path / f"{k}.started").exists() for k in kinds), 180, "children did not start"
        )
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _until(
            lambda: not any(map(_running, (graceful, stubborn, dagster))), 30, "a child outlived its parent"
        )
        assert (tmp_path / "graceful.interrupted").exists()  # its except/finally ran: cleanup had its chance
        assert (tmp_path / "stubborn.interrupted").exists()  # swallowed it, and was ended after the grace
        assert (tmp_path / "dagster.cleaned").exists()  # the Dagster step was interrupted, not killed
        assert not (tmp_path / "dagster.after-1").exists()  # and the next run did not get to finish
        assert not any((tmp_path / f"{k}.finished").exists() for k in kinds)
        assert _running(plain)  # the fault as it was: an orphan that goes on
    finally:
        for pid in (graceful, stubborn, dagster, plain):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


LAUNCHER = """
import time
from bashgym_assets.process_lifetime import launcher_identity
print(launcher_identity(), flush=True)
time.sleep(300)
"""

STEP = """
import sys, time
from pathlib import Path
import dagster as dg
from bashgym_assets.process_lifetime import die_with_launcher
out = Path(sys.argv[1])
assert die_with_launcher(sys.argv[2], grace_s=2, poll_s=0.2)

@dg.asset
def training_step() -> None:   # what a step container runs: the launcher is not its parent
    (out / "step.started").write_text("")
    try:
        time.sleep(120)
        (out / "step.finished").write_text("")
    finally:
        (out / "step.cleaned").write_text("")

dg.materialize([training_step], raise_on_error=False)
"""


@pytest.mark.slow
def test_a_step_launched_elsewhere_ends_when_its_launcher_is_killed(tmp_path: Path) -> None:
    """A step in a Docker container is the Docker daemon's child: the run that launched it can die without the
    kernel telling the step. It watches the launcher's identity instead and ends, cleanly, within seconds."""
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], env=_env(), stdout=subprocess.PIPE, text=True
    )
    assert launcher.stdout is not None
    identity = launcher.stdout.readline().strip()
    step = subprocess.Popen([sys.executable, "-c", STEP, str(tmp_path), identity], env=_env())
    try:
        _until(
            lambda: (tmp_path / "step.started").exists() or step.poll() is not None, 180, "no step started"
        )
        assert step.poll() is None, "the step ended before its launcher did"
        time.sleep(1.0)
        assert step.poll() is None  # a live launcher is left to run
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        _until(lambda: step.poll() is not None, 30, "the step outlived its launcher")
        assert (tmp_path / "step.cleaned").exists() and not (tmp_path / "step.finished").exists()
    finally:
        for proc in (launcher, step):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_launcher_this_process_cannot_see_is_never_taken_for_dead() -> None:
    import json

    from bashgym_assets.process_lifetime import die_with_launcher, launcher_identity

    mine = json.loads(launcher_identity())
    assert mine["pid"] == os.getpid() and mine["start"] and mine["pidns"].startswith("pid:")
    # a run worker in its own container (another pid namespace), another boot, or no identity: nothing is watched
    for other in ({**mine, "pidns": "pid:[1]"}, {**mine, "boot": "another-boot"}, {**mine, "start": ""}):
        assert die_with_launcher(json.dumps(other)) is False
    assert die_with_launcher("not json") is False and die_with_launcher("{}") is False


WRITER = """
import sys, time
from bashgym_assets.lake import Lake, atomic_path
lake = Lake()
with atomic_path(lake.table_path("sessions", "repo-a"), suffix=".parquet") as tmp, \\
        lake.atomic_artifact_dir("adapters", "sft-x") as folder:
    tmp.write_bytes(b"half a parquet file")
    (folder / "adapter_model.safetensors").write_bytes(b"half an adapter")
    if sys.argv[1] == "hold":
        handle = open(tmp, "ab")                         # a live writer with its file open
    open(sys.argv[2], "w").write("written")
    time.sleep(300)
"""


def _write_then(home: Path, mode: str, marker: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, mode, str(marker)], env=_env(BASHGYM_HOME=str(home))
    )
    _until(lambda: marker.exists() or proc.poll() is not None, 120, "the writer did not start")
    assert proc.poll() is None
    return proc


def test_debris_of_killed_writes_is_swept_and_live_writers_are_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    settings = Settings(home=home)
    settings.ensure_dirs()
    lake_dir, adapters = settings.lake_dir / "sessions", settings.artifacts_dir / "adapters"
    killed = _write_then(home, "kill", tmp_path / "killed")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    debris = sorted(p.name for p in [*lake_dir.iterdir(), *adapters.iterdir()])
    assert len(debris) == 2 and all(n.startswith(".tmp-") for n in debris)  # the fault: nothing removes them
    # killed between atomic_artifact_dir's two renames: the previous version parked as .old-<name>.<pid>
    parked = adapters / f".old-dpo-y.{killed.pid}"
    parked.mkdir()
    (parked / "adapter_config.json").write_text("{}")
    replaced = adapters / f".old-sft-z.{killed.pid}"
    replaced.mkdir()
    (adapters / "sft-z").mkdir()

    live = _write_then(home, "hold", tmp_path / "live")
    try:
        assert sweep_debris(settings) == []  # all fresh: a write may still be going on
        done = sweep_debris(settings, min_age_s=0)
        left = sorted(p.name for p in [*lake_dir.iterdir(), *adapters.iterdir()])
        assert "dpo-y" in left and (adapters / "dpo-y" / "adapter_config.json").exists()  # put back
        assert not any(n.startswith(".old-") for n in left)
        assert "sft-z" in left
        live_tmp = [n for n in left if n.startswith(".tmp-")]
        # the live writer's open parquet file is kept; its folder (nothing open in it) is old enough at age 0
        assert [n for n in live_tmp if n.startswith(".tmp-repo-a.parquet.")] != []
        assert not any(n in left for n in debris)  # the killed writer's leftovers are gone
        assert any(
            line.startswith("kept lake/sessions/.tmp-repo-a.parquet.") and f"pid {live.pid}" in line
            for line in done
        ), done
        assert any(line.startswith("restored artifacts/adapters/dpo-y") for line in done), done
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait()


TRAIN = """
import sys, time
import dagster as dg
from bashgym_assets.config import get_settings
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.defs.run_health import process_tags
from bashgym_assets.instance import ensure_dagster_home
from bashgym_assets.training import registry

settings = get_settings()
ensure_dagster_home(settings)
mode = sys.argv[1]

if mode == "alive":   # a training in another process that is still going: never touched
    registry.start_training_run(kind="sft", run_name="alive", tags=process_tags(), settings=settings)
else:
    # a run that records its process directly (what registry.start_training_run does with process tags)
    registry.start_training_run(kind="sft", run_name="own-tags", tags=process_tags(), settings=settings)

@dg.asset
def sft_adapter(context: dg.AssetExecutionContext, bashgym: BashgymHome) -> None:
    # what defs/training.py does: the MLflow run carries the Dagster run id, then the training runs for long
    registry.start_training_run(kind="sft", run_name="in-dagster", tags={"dagster_run_id": context.run_id},
                                settings=bashgym.settings())
    open(sys.argv[2], "w").write("training")
    time.sleep(300)

if mode == "alive":
    open(sys.argv[2], "w").write("training")
    time.sleep(300)
dg.materialize([sft_adapter], resources={"bashgym": BashgymHome()}, instance=dg.DagsterInstance.get())
"""


def _mlflow_status(settings: Settings) -> dict[str, str]:
    from bashgym_assets.training import registry

    c = registry.client(settings)
    exp = c.get_experiment_by_name("bashgym-training")
    return {r.info.run_name: r.info.status for r in c.search_runs([exp.experiment_id])}


@pytest.mark.slow
def test_runs_of_a_killed_training_are_ended_when_the_next_pipeline_starts(
    tmp_path: Path, empty_mlflow_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    settings = Settings(home=home)
    settings.ensure_dirs()
    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    monkeypatch.setenv("BASHGYM_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(settings.dagster_home))  # restored after: the session exports it
    env = _env(BASHGYM_HOME=str(home), BASHGYM_TRACES="0")
    alive = subprocess.Popen([sys.executable, "-c", TRAIN, "alive", str(tmp_path / "alive")], env=env)
    killed = subprocess.Popen([sys.executable, "-c", TRAIN, "kill", str(tmp_path / "killed")], env=env)
    try:

        def started() -> bool:
            for proc in (alive, killed):  # a training that died on start fails here, not after the timeout
                assert proc.poll() is None, f"a training exited with {proc.returncode} before it started"
            return (tmp_path / "killed").exists() and (tmp_path / "alive").exists()

        _until(started, 300, "no training started")
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert _mlflow_status(settings) == {
            "alive": "RUNNING",
            "own-tags": "RUNNING",
            "in-dagster": "RUNNING",
        }

        said: list[str] = []
        with pipeline_session(settings, echo=said.append):
            pass
        assert _mlflow_status(settings) == {"alive": "RUNNING", "own-tags": "KILLED", "in-dagster": "KILLED"}
        with dg.DagsterInstance.get() as instance:
            (run,) = instance.get_runs()
            assert run.status == dg.DagsterRunStatus.FAILURE  # reaped first, then its MLflow run
            # a run with no process tags of its own (logged by an older bashgym) is judged by its Dagster run
            from bashgym_assets.defs.run_health import DAGSTER_RUN_TAG, mlflow_run_alive

            assert mlflow_run_alive({DAGSTER_RUN_TAG: run.run_id}, instance) is False
        assert sum("ended as KILLED" in line for line in said) == 2, said
        # registry.start_training_run tags every run with its process: both name the killed one
        assert sum(f"process {killed.pid}" in line and "ended as KILLED" in line for line in said) == 2, said
    finally:
        alive.send_signal(signal.SIGKILL)
        alive.wait()


def test_two_writers_creating_the_experiment_at_once_both_get_it(
    tmp_path: Path, empty_mlflow_store: Path
) -> None:
    """A training job and a pipeline starting together both look the experiment up, miss it, and create it: the
    loser of that race reuses the winner's experiment instead of failing (it once failed a killed-training test)."""
    from bashgym_assets.training import registry

    settings = Settings(home=tmp_path / "home")
    settings.ensure_dirs()
    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    winner = registry.client(settings)

    class LateLookup(type(winner)):  # the other writer creates it between our lookup and our create
        def get_experiment_by_name(self, name: str) -> Any:
            if not getattr(self, "raced", False):
                self.raced = True
                winner.create_experiment(name)
                return None
            return super().get_experiment_by_name(name)

    loser = LateLookup(tracking_uri=settings.mlflow_tracking_uri)
    got = registry.experiment_id(loser, "bashgym-training", settings)
    assert got == winner.get_experiment_by_name("bashgym-training").experiment_id
    assert len(winner.search_experiments(filter_string="name = 'bashgym-training'")) == 1


def _ensure_home_at_the_barrier(home: str, barrier: Any, errors: Any) -> None:
    from bashgym_assets.instance import ensure_dagster_home

    settings = Settings(home=Path(home))
    barrier.wait()
    try:
        ensure_dagster_home(settings)
    except Exception as exc:  # reported to the test, which names it
        errors.put(f"{type(exc).__name__}: {exc}")


def test_processes_starting_together_on_a_fresh_folder_all_get_the_dagster_instance(tmp_path: Path) -> None:
    """A pipeline and a training job started at once on a fresh data folder both set up ``dagster.yaml``: the
    second must not fail with FileExistsError because the first linked it in between (it once failed CI)."""
    import multiprocessing

    from bashgym_assets.config import PROJECT_ROOT

    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    for attempt in range(6):  # several fresh folders: the window is small, and every one must go through
        home = tmp_path / f"home-{attempt}"
        Settings(home=home).ensure_dirs()
        barrier = ctx.Barrier(12)
        procs = [
            ctx.Process(target=_ensure_home_at_the_barrier, args=(str(home), barrier, errors))
            for _ in range(12)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 12
        link = Settings(home=home).dagster_home / "dagster.yaml"
        assert link.is_symlink() and link.resolve() == PROJECT_ROOT / "dagster.yaml"
        assert not [p.name for p in link.parent.iterdir() if p.name.startswith(".tmp-")]  # no debris
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
