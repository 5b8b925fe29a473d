"""A GPU run killed with kill -9 never blocks the GPU steps after it (issue: the pool slot stayed claimed forever).

The fault is injected for real: a run of an asset in pool ``gpu`` (the project's dagster.yaml: one slot), with the
project's resource, on a persistent SQLite instance, in a child process that is killed with SIGKILL mid-step.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

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

defs = dg.Definitions(assets=[slow_gpu, next_gpu], resources={"bashgym": BashgymHome()})
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


def test_a_pid_reused_by_another_process_is_not_the_run() -> None:
    tags = run_health.process_tags()
    assert run_health.process_alive(tags) is True
    assert (
        run_health.process_alive({**tags, run_health.PID_START_TAG: "1"}) is False
    )  # same pid, other process
    assert run_health.process_alive({**tags, run_health.HOST_TAG: "elsewhere"}) is None
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
