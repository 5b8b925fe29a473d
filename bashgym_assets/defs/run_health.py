"""Dead runs never hold the ``gpu`` pool, and live runs are never taken for dead: every run records its run
worker (the process that runs the whole plan), and a run whose worker is gone is marked failed and its concurrency
slots freed.

Why our own: Dagster's run monitoring needs a run launcher that can check its workers' health, and neither the
default launcher nor in-process execution (the demo, ``bashgym factory``, notebooks) can; a ``kill -9`` during a
GPU step then left its pool slot claimed forever and every later GPU step waited on it. So each run is tagged
with its worker (pid, the process's start time, host, boot id and pid namespace: a reused pid, another machine or
a container's numbering is never mistaken for the run), and ``reap_dead_runs`` fails the runs whose worker is
provably gone: when any run starts and while one of its steps waits for a pool (``defs/executors.py``), before
each GPU step of a ``bashgym`` pipeline, and in the ``dead_run_reaper`` sensor. The worker, not a step: with the
multiprocess executor (the CPU location's ``ingest_repo_job``) each step is a process of its own that ends when
the step does, and a run tagged with its first step's process was failed while its later steps still ran. The
executors of both code locations (``defs/executors.py``, ``RunWorkerExecutor``) record the process that runs
their plan, whatever runs the steps (in process, a process per step, a container per step); an in-process run
of another executor is recorded by the ``bashgym`` resource (``tag_current_run``), its step being its worker.

A run whose worker this machine cannot judge (another host, pid namespace, no tag) is left alone and named when
something waits on it. MLflow runs left RUNNING by a dead writer are ended as KILLED the same way
(``reap_dead_mlflow_runs``: their own process tags, else their ``dagster_run_id``'s run), by the sensor and when
a pipeline starts (``housekeeping.pipeline_session``).
"""

import sqlite3
import time
from collections.abc import Callable
from typing import Any

import dagster as dg

from bashgym_assets.config import Settings, get_settings
from bashgym_assets.processes import (  # noqa: F401 - re-exported: the run tags are this module's API
    BOOT_TAG,
    HOST_TAG,
    PID_START_TAG,
    PID_TAG,
    PIDNS_TAG,
    process_alive,
    process_tags,
)

GPU_POOL = "gpu"
_LIVE_STATUSES = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
DAGSTER_RUN_TAG = "dagster_run_id"  # what bashgym's MLflow runs (training, evaluation) carry


_PROCESS_TAGS = (PID_TAG, PID_START_TAG, HOST_TAG, BOOT_TAG, PIDNS_TAG)


def run_process_tags(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dict[str, str]:
    """The run's tags, less a process identity it only inherited: a re-execution (the UI's "Re-execute") copies its
    parent's tags, and the parent's process (a finished ``bashgym demo``) would make the new run look dead from
    its first second, to be failed by the reaper while it waits for the pool or runs."""
    tags = dict(run.tags)
    if PID_TAG not in tags or not run.parent_run_id:
        return tags
    parent = instance.get_run_by_id(run.parent_run_id)
    if parent is not None and all(parent.tags.get(k) == tags.get(k) for k in _PROCESS_TAGS):
        return {k: v for k, v in tags.items() if k not in _PROCESS_TAGS}
    return tags


def tag_current_run(instance: dg.DagsterInstance | None, run_id: str | None) -> None:
    """Record this process on the run when nothing else did (its worker, ``record_run_worker``, is recorded
    before any step starts): for an in-process executor the first step's process is the run's worker. Over a
    process identity inherited from a parent run."""
    if instance is None or not run_id:
        return
    run = instance.get_run_by_id(run_id)
    if run is not None and PID_TAG not in run_process_tags(instance, run):
        instance.add_run_tags(run_id, process_tags())


def record_run_worker(instance: dg.DagsterInstance, run: dg.DagsterRun) -> None:
    """Record this process, the one that runs the run's plan, as the run's worker: over whatever the run carries
    (a parent's identity, an earlier worker of a resumed run). The reaper judges the run by it alone."""
    mine = process_tags()
    if any(run.tags.get(k) != v for k, v in mine.items()):
        instance.add_run_tags(run.run_id, mine)


def reap_dead_runs(instance: dg.DagsterInstance, log: Callable[[str], None] = print) -> list[str]:
    """Fail every unfinished run whose process is gone, and free the pool slots of runs that are over.

    Returns the run ids acted on. A slot held by a finished run (failed, cancelled, even succeeded: a cancel in the
    UI of a dead run leaves it so) is freed too."""
    acted: list[str] = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=_LIVE_STATUSES)):
        if process_alive(run_process_tags(instance, run)) is False:
            message = (
                f"run worker process {run.tags.get(PID_TAG)} on {run.tags.get(HOST_TAG)} is gone (killed?): "
                "marked failed by bashgym's dead-run reaper, its pool slots freed"
            )
            instance.report_run_failed(run, message)
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            log(f"{run.run_id}: {message}")
            acted.append(run.run_id)
    storage = instance.event_log_storage
    for key in storage.get_concurrency_keys():
        for slot in storage.get_concurrency_info(key).claimed_slots:
            holder = instance.get_run_by_id(slot.run_id)
            if slot.run_id not in acted and (holder is None or holder.is_finished):
                storage.free_concurrency_slots_for_run(slot.run_id)
                log(
                    f"{slot.run_id}: freed pool {key} slot of a run that is "
                    f"{'gone' if holder is None else holder.status.value.lower()}"
                )
                acted.append(slot.run_id)
    return acted


def _running_in_sqlite(settings: Settings) -> int | None:
    """How many runs the data folder's SQLite MLflow store has RUNNING, read with sqlite3 (importing MLflow costs
    seconds at every start-up and sensor tick); None for another store or when the file cannot be read."""
    if settings.mlflow_tracking_uri_override:
        return None
    db = settings.mlflow_dir / "mlflow.db"
    if not db.is_file():
        return 0
    try:
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            return int(con.execute("SELECT count(*) FROM runs WHERE status = 'RUNNING'").fetchone()[0])
        finally:
            con.close()
    except sqlite3.OperationalError as exc:
        return 0 if "no such table" in str(exc) else None


def mlflow_run_alive(tags: dict[str, str], instance: dg.DagsterInstance | None) -> bool | None:
    """Whether the process writing an MLflow run still runs: its own process tags when it has them, else the
    Dagster run it belongs to (``dagster_run_id``): a finished Dagster run, or one whose process is gone, has no
    live writer. None when nothing tells."""
    alive = process_alive(tags)
    if alive is not None or instance is None or not tags.get(DAGSTER_RUN_TAG):
        return alive
    run = instance.get_run_by_id(tags[DAGSTER_RUN_TAG])
    if run is None:
        return None
    return False if run.is_finished else process_alive(run_process_tags(instance, run))


def reap_dead_mlflow_runs(
    settings: Settings | None = None,
    instance: dg.DagsterInstance | None = None,
    log: Callable[[str], None] = print,
) -> list[str]:
    """End every MLflow run left RUNNING by a dead writer as KILLED (with the reason in tag ``bashgym/killed``).

    A ``kill -9`` mid-training left its run RUNNING forever: the MLflow UI showed it training, with no end time,
    beside the retry that replaced it. Call after ``reap_dead_runs`` (a reaped Dagster run is finished, so its
    MLflow runs follow). Returns the MLflow run ids ended."""
    settings = settings or get_settings()
    if _running_in_sqlite(settings) == 0:
        return []
    from mlflow.entities import ViewType

    from bashgym_assets.training.registry import client

    c = client(settings)
    experiments = [e.experiment_id for e in c.search_experiments(view_type=ViewType.ALL)]
    ended: list[str] = []
    token = None
    while experiments:
        page: Any = c.search_runs(
            experiments,
            filter_string="attributes.status = 'RUNNING'",
            run_view_type=ViewType.ALL,
            max_results=500,
            page_token=token,
        )
        for run in page:
            tags = run.data.tags
            if mlflow_run_alive(tags, instance) is not False:
                continue
            who = (
                f"process {tags[PID_TAG]} on {tags.get(HOST_TAG)}"
                if tags.get(PID_TAG)
                else f"Dagster run {tags.get(DAGSTER_RUN_TAG)}"
            )
            reason = f"its writer ({who}) is gone: ended as KILLED by bashgym's dead-run reaper"
            c.set_tag(run.info.run_id, "bashgym/killed", reason)
            c.set_terminated(run.info.run_id, "KILLED")
            log(f"MLflow run {run.info.run_id} ({run.info.run_name}): {reason}")
            ended.append(run.info.run_id)
        token = page.token
        if not token:
            break
    return ended


def pool_holders(instance: dg.DagsterInstance, pool: str = GPU_POOL) -> list[str]:
    """Who holds the pool now, one line each: run id, step, status, process."""
    out = []
    info = instance.event_log_storage.get_concurrency_info(pool)
    for slot in info.claimed_slots:
        run = instance.get_run_by_id(slot.run_id)
        status = run.status.value.lower() if run else "deleted"
        tags = run_process_tags(instance, run) if run else {}
        alive = process_alive(tags)
        proc = (
            f"pid {tags.get(PID_TAG)} on {tags.get(HOST_TAG)}"
            + ("" if alive else " (cannot tell if it runs)" if alive is None else " (gone)")
            if tags.get(PID_TAG)
            else "no process recorded"
        )
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
    return pool_limit(instance, pool) - len(
        instance.event_log_storage.get_concurrency_info(pool).claimed_slots
    )


def wait_for_pool(
    instance: dg.DagsterInstance,
    pool: str = GPU_POOL,
    echo: Callable[[str], None] = print,
    poll_s: float = 2.0,
    timeout_s: float | None = None,
) -> bool:
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
            echo(
                f"waiting for pool {pool} (limit {pool_limit(instance, pool)}): held by "
                + ("; ".join(holders) or "nobody: its limit is 0 (dagster instance concurrency set)")
            )
            said = holders
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(poll_s)


@dg.sensor(
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Marks runs whose worker process died (kill -9, OOM) as failed and frees their pool slots, "
    "so a dead GPU run never blocks the GPU steps after it; ends their MLflow runs as KILLED.",
)
def dead_run_reaper(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    acted = reap_dead_runs(context.instance, context.log.warning)
    try:
        acted += reap_dead_mlflow_runs(get_settings(), context.instance, context.log.warning)
    except Exception as exc:  # noqa: BLE001 - an unreachable MLflow store must not stop the Dagster reaping
        context.log.warning(f"MLflow runs not checked: {exc}")
    return dg.SkipReason(f"reaped {len(acted)} dead run(s): {', '.join(acted)}" if acted else "no dead runs")
