"""``bashgym demo``, ``train``, ``factory`` (and the other long commands) stopped by SIGTERM or SIGINT: the
Dagster side of ``stopping.on_signals``.

``stoppable(command)`` is ``on_signals`` with every cleanup a pipeline needs registered: its sandboxes
(``sandbox``), its Dagster runs (here: marked CANCELED at once, pool slots freed, instead of waiting for the next
pipeline's dead-run reaper), the trainer-step containers its runs launched (the docker GPU executor) and its MLflow
runs (``mlflow_store``, after the Dagster runs: a run that carries ``dagster_run_id`` follows its Dagster run).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

# The cleanups of the lower layers register when their modules load: loaded here, so that a command that never
# opened a sandbox or an MLflow run itself (the demo's parent process) still ends its step process's.
from bashgym_assets import mlflow_store, stopping  # noqa: F401 - mlflow_store: loaded for its cleanup
from bashgym_assets.sandbox import sandbox as _sandbox
from bashgym_assets.training.trainer_image import STEP_CONTAINER_KIND, STEP_CONTAINER_LABEL, STEP_LAUNCHER_ENV


def _command_runs(ctx: stopping.StopContext) -> Iterator[tuple[Any, Any, Any]]:
    """(instance, run record, run) of every Dagster run the command's processes created since it started (their
    process tags: ``demo.plan_main`` and the executors record the run's worker)."""
    if "dagster" not in sys.modules or not os.environ.get("DAGSTER_HOME"):
        return  # a command that never loaded Dagster started no Dagster run
    import dagster as dg

    from bashgym_assets.processes import PID_TAG

    since = datetime.fromtimestamp(ctx.scope_started - 5, tz=UTC)
    instance = dg.DagsterInstance.get()
    for pid in sorted({p.pid for p in ctx.owners}):
        filters = dg.RunsFilter(tags={PID_TAG: str(pid)}, created_after=since)
        for record in instance.get_run_records(filters=filters):
            if ctx.owns_tags(record.dagster_run.tags):
                yield instance, record, record.dagster_run


def _live(run: Any) -> bool:
    return run.status.value in ("NOT_STARTED", "QUEUED", "STARTING", "STARTED", "CANCELING")


def mark_dagster_runs_canceling(ctx: stopping.StopContext) -> None:
    """As the stop arrives, before the step process hears of it: the command's running Dagster runs are marked
    CANCELING (a termination request), so that Dagster, interrupted in the step, ends them CANCELED instead of
    FAILURE ("interrupted unexpectedly. No user initiated termination request was found")."""
    for instance, _, run in _command_runs(ctx):
        if _live(run) and run.status.value != "CANCELING":
            instance.report_run_canceling(run, message=f"bashgym: {ctx.reason}")


def cancel_dagster_runs(ctx: stopping.StopContext) -> list[str]:
    """Mark the command's unfinished Dagster runs CANCELED with the reason, and free their pool slots; name the
    ones its processes ended themselves on the way out. Every run of the command since it started goes into
    ``ctx.dagster_run_ids`` (their MLflow runs follow them)."""
    said: list[str] = []
    for instance, record, run in _command_runs(ctx):
        ctx.dagster_run_ids.add(run.run_id)
        if _live(run):
            instance.report_run_canceled(run, message=f"bashgym: {ctx.reason}")
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            said.append(f"Dagster run {run.run_id[:8]} marked CANCELED")
        elif record.end_time and record.end_time >= ctx.stopped_at - 1:
            said.append(f"Dagster run {run.run_id[:8]} ended {run.status.value}")
    return said


def remove_step_containers(ctx: stopping.StopContext) -> list[str]:
    """The trainer-step containers (``BASHGYM_GPU_EXECUTOR=docker``) launched by the command's processes: each
    would end itself within seconds of its launcher (``die_with_launcher``); removed now, before the command
    exits."""
    try:
        api = _sandbox.docker_client().api
        containers = api.containers(filters={"label": [f"{STEP_CONTAINER_LABEL}={STEP_CONTAINER_KIND}"]})
    except Exception:  # noqa: BLE001 - no engine: no step container
        return []
    removed = 0
    for c in containers:
        with contextlib.suppress(Exception):
            env = api.inspect_container(c["Id"])["Config"].get("Env") or []
            launcher = next((e.split("=", 1)[1] for e in env if e.startswith(f"{STEP_LAUNCHER_ENV}=")), "")
            who = json.loads(launcher) if launcher else {}
            if ctx.owns(who.get("pid"), str(who.get("start", ""))):
                api.remove_container(c["Id"], force=True)
                removed += 1
    return [f"removed {removed} trainer-step container{'s' if removed != 1 else ''}"] if removed else []


stopping.register_cleanup("trainer-step containers", remove_step_containers, order=15)
stopping.register_cleanup("Dagster runs", cancel_dagster_runs, order=20)
stopping.register_on_signal("Dagster runs", mark_dagster_runs_canceling)


@contextlib.contextmanager
def stoppable(command: str, **kwargs: object) -> Iterator[stopping.StopScope]:
    """``stopping.on_signals(command)`` with the pipeline's cleanups registered (see the module docstring)."""
    with stopping.on_signals(command, **kwargs) as scope:  # type: ignore[arg-type]
        yield scope
