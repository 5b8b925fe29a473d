"""Dead runs never hold the ``gpu`` pool: every run records the process that executes it, and a run whose process
is gone is marked failed and its concurrency slots freed.

Why our own: Dagster's run monitoring needs a run launcher that can check its workers' health, and neither the
default launcher nor in-process execution (the demo, ``bashgym factory``, notebooks) can; a ``kill -9`` during a
GPU step then left its pool slot claimed forever and every later GPU step waited on it. So each run is tagged
with its process (pid, the process's start time, host and boot id: a reused pid or another machine is never
mistaken for the run), and ``reap_dead_runs``, called before a GPU step and by the ``dead_run_reaper`` sensor,
fails the runs whose process is provably gone. A run whose process this machine cannot judge (another host, no
tag) is left alone and named when something waits on it.
"""

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg

PID_TAG = "bashgym/pid"
PID_START_TAG = "bashgym/pid_start"
HOST_TAG = "bashgym/host"
BOOT_TAG = "bashgym/boot"
GPU_POOL = "gpu"
_LIVE_STATUSES = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), '' when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def process_tags(pid: int | None = None) -> dict[str, str]:
    """The tags that name the process executing a run."""
    pid = pid or os.getpid()
    return {PID_TAG: str(pid), PID_START_TAG: _start_ticks(pid), HOST_TAG: socket.gethostname(),
            BOOT_TAG: _boot_id()}


def process_alive(tags: dict[str, str]) -> bool | None:
    """Whether the run's recorded process still runs; None when this machine cannot tell (no tag, other host or
    boot)."""
    pid = tags.get(PID_TAG)
    if not pid or not pid.isdigit():
        return None
    if tags.get(HOST_TAG) != socket.gethostname() or tags.get(BOOT_TAG, "") != _boot_id():
        return None
    started = _start_ticks(int(pid))
    if not started:
        return False
    return not tags.get(PID_START_TAG) or started == tags[PID_START_TAG]


def tag_current_run(instance: dg.DagsterInstance | None, run_id: str | None) -> None:
    """Record this process on the run (once: the first step's process is the run's, for in-process executors)."""
    if instance is None or not run_id:
        return
    run = instance.get_run_by_id(run_id)
    if run is not None and PID_TAG not in run.tags:
        instance.add_run_tags(run_id, process_tags())


def reap_dead_runs(instance: dg.DagsterInstance, log: Callable[[str], None] = print) -> list[str]:
    """Fail every unfinished run whose process is gone, and free the pool slots of runs that are over.

    Returns the run ids acted on. A slot held by a finished run (failed, cancelled, even succeeded: a cancel in the
    UI of a dead run leaves it so) is freed too."""
    acted: list[str] = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=_LIVE_STATUSES)):
        if process_alive(run.tags) is False:
            message = (f"run worker process {run.tags.get(PID_TAG)} on {run.tags.get(HOST_TAG)} is gone (killed?): "
                       "marked failed by bashgym's dead-run reaper, its pool slots freed")
            instance.report_run_failed(run, message)
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            log(f"{run.run_id}: {message}")
            acted.append(run.run_id)
    storage = instance.event_log_storage
    for key in storage.get_concurrency_keys():
        for slot in storage.get_concurrency_info(key).claimed_slots:
            run = instance.get_run_by_id(slot.run_id)
            if slot.run_id not in acted and (run is None or run.is_finished):
                storage.free_concurrency_slots_for_run(slot.run_id)
                log(f"{slot.run_id}: freed pool {key} slot of a run that is "
                    f"{'gone' if run is None else run.status.value.lower()}")
                acted.append(slot.run_id)
    return acted


def pool_holders(instance: dg.DagsterInstance, pool: str = GPU_POOL) -> list[str]:
    """Who holds the pool now, one line each: run id, step, status, process."""
    out = []
    info = instance.event_log_storage.get_concurrency_info(pool)
    for slot in info.claimed_slots:
        run = instance.get_run_by_id(slot.run_id)
        status = run.status.value.lower() if run else "deleted"
        tags = run.tags if run else {}
        alive = process_alive(tags)
        proc = (f"pid {tags.get(PID_TAG)} on {tags.get(HOST_TAG)}"
                + ("" if alive else " (cannot tell if it runs)" if alive is None else " (gone)")
                if tags.get(PID_TAG) else "no process recorded")
        out.append(f"run {slot.run_id} step {slot.step_key} ({status}, {proc})")
    return out


def pool_limit(instance: dg.DagsterInstance, pool: str = GPU_POOL) -> int:
    """The pool's slot count; a pool no run has used yet has no row, and gets the instance's default limit on its
    first claim (dagster.yaml ``concurrency.pools.default_limit``)."""
    storage = instance.event_log_storage
    if pool in storage.get_concurrency_keys():
        return storage.get_concurrency_info(pool).slot_count
    default = instance.get_concurrency_config().pool_config.default_pool_limit
    return default if default is not None else 1


def free_slots(instance: dg.DagsterInstance, pool: str = GPU_POOL) -> int:
    return pool_limit(instance, pool) - len(instance.event_log_storage.get_concurrency_info(pool).claimed_slots)


def wait_for_pool(instance: dg.DagsterInstance, pool: str = GPU_POOL, echo: Callable[[str], None] = print,
                  poll_s: float = 2.0, timeout_s: float | None = None) -> bool:
    """Block (sleeping, so SIGINT and SIGTERM end it) until ``pool`` has a free slot, reaping dead holders and
    saying who holds it whenever that changes. False on timeout."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    said: list[str] | None = None
    while True:
        reap_dead_runs(instance, echo)
        if free_slots(instance, pool) > 0:
            return True
        holders = pool_holders(instance, pool)
        if holders != said:
            echo(f"waiting for pool {pool} (limit {pool_limit(instance, pool)}): held by "
                 + ("; ".join(holders) or "nobody: its limit is 0 (dagster instance concurrency set)"))
            said = holders
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(poll_s)


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Marks runs whose worker process died (kill -9, OOM) as failed and frees their pool slots, "
                       "so a dead GPU run never blocks the GPU steps after it.")
def dead_run_reaper(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    acted = reap_dead_runs(context.instance, context.log.warning)
    return dg.SkipReason(f"reaped {len(acted)} dead run(s): {', '.join(acted)}" if acted else "no dead runs")
