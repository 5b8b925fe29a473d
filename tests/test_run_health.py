"""A GPU run killed with kill -9 never blocks the GPU steps after it (issue: the pool slot stayed claimed forever),
and a healthy run is never taken for dead.

The fault is injected for real: a run of an asset in pool ``gpu`` (the project's dagster.yaml: one slot), with the
project's resource, on a persistent SQLite instance, in a child process that is killed with SIGKILL mid-step. The
same through ``dagster asset materialize`` (the README's path without the daemon), on the GPU location's executor:
a killed holder's slot is freed before the step waits, a live holder is named, SIGTERM ends the wait. And a run of
the CPU location's executor (a process per step) outlives its first step's process without being reaped: the
reaper follows the run's worker (issue 40: `make ui` after `make demo` saw its sensor's ingest runs failed).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import dagster as dg
import pytest

from bashgym_assets.config import PROJECT_ROOT
from bashgym_assets.defs import run_health

TINY = """
import os, time
import dagster as dg
from bashgym_assets.defs.resources import BashgymHome

@dg.asset(pool="gpu")
def slow_gpu(bashgym: BashgymHome) -> None:
    open(os.environ["MARKER"], "w").write(str(os.getpid()))
    time.sleep(300)

@dg.asset(pool="gpu")
def next_gpu(bashgym: BashgymHome) -> None:
    pass

# the GPU code location's executor, as `dagster asset materialize` runs it (the jobs of RUN choose their own)
from bashgym_assets.defs.executors import gpu_executor

defs = dg.Definitions(assets=[slow_gpu, next_gpu], resources={"bashgym": BashgymHome()}, executor=gpu_executor())
"""

RUN = """
import sys, dagster as dg, tiny_gpu
job = dg.define_asset_job("j", selection=[sys.argv[1]], executor_def=dg.in_process_executor)
d = dg.Definitions.merge(tiny_gpu.defs, dg.Definitions(jobs=[job])).resolve_job_def("j")
ok = d.execute_in_process(instance=dg.DagsterInstance.get(), raise_on_error=False).success
sys.exit(0 if ok else 1)
"""


@pytest.fixture
def instance_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "dagster"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    (tmp_path / "tiny_gpu.py").write_text(TINY)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("BASHGYM_HOME", str(tmp_path / "bashgym"))
    monkeypatch.setenv("MARKER", str(tmp_path / "marker"))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{PROJECT_ROOT}")
    return tmp_path


def _materialize(folder: Path, asset: str, log: IO[bytes]) -> subprocess.Popen:
    """``dagster asset materialize --select ASSET`` over the tiny GPU location, as the README shows it."""
    cmd = [
        str(Path(sys.executable).parent / "dagster"),
        "asset",
        "materialize",
        "-m",
        "tiny_gpu",
        "-a",
        "defs",
    ]
    return subprocess.Popen([*cmd, "--select", asset], cwd=folder, stdout=log, stderr=subprocess.STDOUT)


def _start(folder: Path, asset: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", RUN, asset], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _wait_marker(folder: Path, proc: subprocess.Popen) -> None:
    for _ in range(600):
        if (folder / "marker").exists() or proc.poll() is not None:
            return
        time.sleep(0.1)


@pytest.mark.slow
def test_kill_9_mid_gpu_step_then_the_next_gpu_step_completes(instance_home: Path) -> None:
    proc = _start(instance_home, "slow_gpu")
    _wait_marker(instance_home, proc)
    assert proc.poll() is None, "the GPU step did not start"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    instance = dg.DagsterInstance.get()
    (dead,) = instance.get_runs()
    assert dead.status == dg.DagsterRunStatus.STARTED  # the fault, as users met it
    assert [s.run_id for s in instance.event_log_storage.get_concurrency_info("gpu").claimed_slots] == [
        dead.run_id
    ]
    assert run_health.process_alive(dead.tags) is False

    said: list[str] = []
    assert run_health.wait_for_pool(instance, echo=said.append, poll_s=0.1, timeout_s=30)
    assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
    assert not instance.event_log_storage.get_concurrency_info("gpu").claimed_slots
    assert any("is gone" in line for line in said)
    after = _start(instance_home, "next_gpu")
    assert after.wait(timeout=120) == 0  # the next GPU step completes


@pytest.mark.slow
def test_a_live_holder_is_named_and_never_reaped(instance_home: Path) -> None:
    proc = _start(instance_home, "slow_gpu")
    try:
        _wait_marker(instance_home, proc)
        instance = dg.DagsterInstance.get()
        said: list[str] = []
        assert not run_health.wait_for_pool(instance, echo=said.append, poll_s=0.1, timeout_s=0.5)
        (run,) = instance.get_runs()
        assert said and "waiting for pool gpu" in said[0] and run.run_id in said[0]
        assert f"pid {proc.pid}" in said[0] and "slow_gpu" in said[0]
        assert run_health.reap_dead_runs(instance, said.append) == []
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_the_sensor_reaps_and_a_slot_of_a_finished_run_is_freed(instance_home: Path) -> None:
    proc = _start(instance_home, "slow_gpu")
    _wait_marker(instance_home, proc)
    proc.kill()
    proc.wait()
    instance = dg.DagsterInstance.get()
    result = run_health.dead_run_reaper(dg.build_sensor_context(instance=instance))
    assert isinstance(result, dg.SkipReason) and "reaped 1" in result.skip_message
    # a run cancelled in the UI after its process died: finished, yet its slot was still claimed
    proc = _start(instance_home, "slow_gpu")
    (instance_home / "marker").unlink()
    _wait_marker(instance_home, proc)
    proc.kill()
    proc.wait()
    run = next(r for r in instance.get_runs() if r.status == dg.DagsterRunStatus.STARTED)
    instance.report_run_canceled(run)
    assert instance.event_log_storage.get_concurrency_info("gpu").claimed_slots
    assert run.run_id in run_health.reap_dead_runs(instance, lambda _: None)
    assert not instance.event_log_storage.get_concurrency_info("gpu").claimed_slots


@pytest.mark.slow
def test_the_cli_path_frees_a_killed_holders_slot_and_a_wait_ends_on_sigterm(instance_home: Path) -> None:
    """Without the daemon (no sensor reaps): a step of ``dagster asset materialize`` waited forever on the slot of
    a killed run, deaf to SIGTERM, naming nobody."""
    log = instance_home / "cli.log"
    with open(log, "wb") as out:
        holder = _materialize(instance_home, "slow_gpu", out)
        _wait_marker(instance_home, holder)
        assert holder.poll() is None, log.read_text()[-3000:]
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        instance = dg.DagsterInstance.get()
        (dead,) = instance.get_runs()
        assert dead.status == dg.DagsterRunStatus.STARTED  # the fault: a dead run holding the gpu slot
        assert [s.run_id for s in instance.event_log_storage.get_concurrency_info("gpu").claimed_slots] == [
            dead.run_id
        ]
        assert dead.tags[run_health.PID_TAG] == str(holder.pid)  # the CLI process is the run's worker

        after = _materialize(instance_home, "next_gpu", out)
        try:
            assert after.wait(timeout=120) == 0, log.read_text()[-3000:]
        finally:
            after.kill()
    said = log.read_text()
    assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
    assert f"{dead.run_id}: run worker process {holder.pid}" in said and "is gone" in said
    latest = instance.get_latest_materialization_event(dg.AssetKey("next_gpu"))
    assert latest is not None and latest.run_id != dead.run_id

    # a live holder: the waiting step names it, and SIGTERM ends the wait at once
    (instance_home / "marker").unlink()
    with open(instance_home / "cli2.log", "wb") as out:
        holder = _materialize(instance_home, "slow_gpu", out)
        waiter = None
        try:
            _wait_marker(instance_home, holder)
            assert holder.poll() is None
            waiter = _materialize(instance_home, "next_gpu", out)
            deadline = time.monotonic() + 120
            while "waits for pool gpu" not in (instance_home / "cli2.log").read_text():
                assert waiter.poll() is None and time.monotonic() < deadline, (
                    instance_home / "cli2.log"
                ).read_text()[-3000:]
                time.sleep(0.5)
            live = next(
                r
                for r in instance.get_runs()
                if r.status == dg.DagsterRunStatus.STARTED
                and r.tags.get(run_health.PID_TAG) == str(holder.pid)
            )
            waiting = next(
                r
                for r in instance.get_runs()
                if r.run_id not in (live.run_id, dead.run_id)
                and r.asset_selection == {dg.AssetKey("next_gpu")}
                and not r.is_finished
            )
            text = (instance_home / "cli2.log").read_text()
            assert f"held by run {live.run_id} step slow_gpu (started, pid {holder.pid}" in text
            started = time.monotonic()
            waiter.send_signal(signal.SIGTERM)
            waiter.wait(timeout=30)
            assert time.monotonic() - started < 15
            assert instance.get_run_by_id(waiting.run_id).status == dg.DagsterRunStatus.FAILURE
            assert instance.get_run_by_id(live.run_id).status == dg.DagsterRunStatus.STARTED  # untouched
            pending = instance.event_log_storage.get_concurrency_info("gpu").pending_steps
            assert not [p for p in pending if p.run_id == waiting.run_id]  # its claim withdrawn
        finally:
            for proc in (holder, waiter):
                if proc is not None:
                    proc.kill()
                    proc.wait()


MULTI = """
import os, pathlib, time
import dagster as dg
from bashgym_assets.defs.executors import cpu_executor
from bashgym_assets.defs.resources import BashgymHome

MARK = pathlib.Path(os.environ["MARKER"])

@dg.asset
def first_step(bashgym: BashgymHome) -> None:
    (MARK.parent / "first").write_text(str(os.getpid()))

@dg.asset(deps=[first_step])
def second_step(bashgym: BashgymHome) -> None:
    (MARK.parent / "second").write_text(str(os.getpid()))
    parent = os.getppid()
    while not (MARK.parent / "go").exists() and os.getppid() == parent:
        time.sleep(0.2)

# the CPU code location's executor (the test checks that it is: importing the whole location in the worker and in
# each step's process took seconds apiece): Dagster's multiprocess executor, a process per step
defs = dg.Definitions(
    assets=[first_step, second_step], resources={"bashgym": BashgymHome()}, executor=cpu_executor
)
"""

RUN_MULTI = """
import os, sys, dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableRepository
job = ReconstructableRepository.for_module("tiny_multi", "defs", os.getcwd()).get_reconstructable_job("__ASSET_JOB")
sys.exit(0 if dg.execute_job(job, instance=dg.DagsterInstance.get()).success else 1)
"""


def _wait_file(path: Path, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout:.0f}s"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_multiprocess_run_outlives_its_first_steps_process_and_dies_with_its_worker(
    instance_home: Path,
) -> None:
    """The CPU location runs each step in a process of its own. The run was tagged with its first step's process,
    gone when the step ended, and the reaper failed the run while its next step ran (issue 40)."""
    from bashgym_assets.definitions import defs as cpu_location
    from bashgym_assets.defs.executors import cpu_executor

    assert cpu_location.get_repository_def().get_implicit_global_asset_job_def().executor_def is cpu_executor
    (instance_home / "tiny_multi.py").write_text(MULTI)
    instance = dg.DagsterInstance.get()
    for attempt in ("healthy", "killed"):
        for name in ("first", "second", "go"):
            (instance_home / name).unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", RUN_MULTI], cwd=instance_home)
        try:
            _wait_file(instance_home / "second", proc)
            first = int((instance_home / "first").read_text())
            deadline = time.monotonic() + 30
            while run_health.process_alive(run_health.process_tags(first)) and time.monotonic() < deadline:
                time.sleep(0.2)  # the first step's process ends with its step
            assert run_health.process_alive(run_health.process_tags(first)) is False, (
                "the first step still runs"
            )
            assert int((instance_home / "second").read_text()) not in (first, proc.pid)  # a process per step
            (run,) = [r for r in instance.get_runs() if not r.is_finished]
            if attempt == "healthy":
                said: list[str] = []
                assert run_health.reap_dead_runs(instance, said.append) == [], said
                sensed = run_health.dead_run_reaper(dg.build_sensor_context(instance=instance))
                assert isinstance(sensed, dg.SkipReason) and sensed.skip_message == "no dead runs"
                assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
                assert run.tags[run_health.PID_TAG] == str(proc.pid)  # the run's worker, not a step
                (instance_home / "go").write_text("")
                assert proc.wait(timeout=120) == 0
                assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.SUCCESS
            else:  # the worker killed while its step runs: now the run is dead, and reaped
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                assert run_health.reap_dead_runs(instance, lambda _: None) == [run.run_id]
                assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
        finally:
            proc.kill()
            proc.wait()


def test_a_pid_reused_by_another_process_is_not_the_run() -> None:
    tags = run_health.process_tags()
    assert run_health.process_alive(tags) is True
    assert (
        run_health.process_alive({**tags, run_health.PID_START_TAG: "1"}) is False
    )  # same pid, other process
    assert run_health.process_alive({**tags, run_health.HOST_TAG: "elsewhere"}) is None
    # a run worker in a container with the host's network: same host name and kernel, its own pid numbers
    assert run_health.process_alive({**tags, run_health.PIDNS_TAG: "pid:[1]"}) is None
    assert run_health.process_alive({}) is None


def test_a_pool_no_run_has_used_yet_is_free(instance_home: Path) -> None:
    """A fresh instance has no row for the pool until the first claim: that is a free pool, not a limit of 0."""
    instance = dg.DagsterInstance.get()
    assert run_health.GPU_POOL not in instance.event_log_storage.get_concurrency_keys()
    said: list[str] = []
    assert run_health.wait_for_pool(instance, echo=said.append, poll_s=0.1, timeout_s=1)
    assert said == []


def test_the_runner_shows_what_a_gpu_step_waits_for() -> None:
    from bashgym_assets import demo

    shown: list[str] = []
    line = f"{demo._POOL_LINE}waiting for pool gpu (limit 1): held by run x step sft_adapter (started, pid 7)"
    code, _ = demo._run_streaming([sys.executable, "-c", f"print({line!r})"], dict(os.environ), shown.append)
    assert code == 0 and shown == [line]
