"""The executors of both code locations: what runs a run's steps, wrapped so that the run's worker answers for it.

``RunWorkerExecutor`` wraps the executor each location uses (the CPU location: Dagster's multiprocess-or-in-process
default; the GPU location: in-process by default, dagster-docker's ``docker_executor`` when
``BASHGYM_GPU_EXECUTOR=docker``). In the run worker, the process that runs the whole plan whoever runs the steps
(the process itself, a process per step, a container per step), before any step starts, it
- records that process on the run (``run_health.record_run_worker``): the dead-run reaper judges the run by it, so a
  run is failed when its worker dies and never because a step's own process ended;
- fails the runs whose worker is gone and frees their pool slots (``run_health.reap_dead_runs``), so a step never
  waits on the slot of a killed run, however the run was launched (the UI, the daemon, ``dagster asset
  materialize``, ``bashgym demo``);
- while a step waits for a pool (``gpu``), every few seconds frees the slots of runs that died meanwhile and names
  the holders in the run's log when they change, and in process answers SIGTERM / SIGINT at once (Dagster's
  in-process executor neither looks at signals nor sleeps while a step waits: ``dagster asset materialize
  --select sft_adapter`` behind a killed run waited forever, deaf to SIGTERM, naming nobody).

Docker variant: every step runs in its own container from the trainer image (``sandbox_images/trainer``). The
container sees the same absolute paths as the launching process: the project and its venv (and the Python
install the venv links to) read-only, the data folder and ``DAGSTER_HOME`` read-write, so the step loads the same
code, writes the same lake / MLflow / adapters and reports to the same SQLite instance. GPUs are requested with
``device_requests`` when the engine has the NVIDIA runtime (``BASHGYM_DOCKER_GPUS=auto``, the default), always
(``all`` or a count) or never (``none``).

A step container is a child of the Docker daemon, not of the run that launched it, so a ``kill -9`` of that run
would leave it training. Each container therefore gets the launching process's identity
(``BASHGYM_STEP_LAUNCHER``) and the host's pid namespace, and the step ends itself when that process is gone
(``process_lifetime.die_with_launcher``, armed when the step loads this code location). The container config itself
is plain data, in ``training.trainer_image`` (``docker_executor_config``), where ``instance`` takes it from too.
"""

import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import dagster as dg

from bashgym_assets.config import get_settings
from bashgym_assets.defs.dagster_internals import (
    DagsterExecutionInterruptedError,
    PoolClaims,
    is_in_process,
    pool_claims_made_by,
    pop_captured_interrupt,
)
from bashgym_assets.defs.run_health import pool_holders, pool_limit, reap_dead_runs, record_run_worker
from bashgym_assets.process_lifetime import die_with_launcher
from bashgym_assets.training.trainer_image import docker_executor_config


# ---- the run worker answers for its run ------------------------------------------------------------------------
class PoolWait(PoolClaims):
    """Dagster's per-run pool claims, plus what a waiting step needs: the dead runs' slots freed, the holders named,
    and (in process) signals answered and no spinning.

    Dagster's own context only asks the event log again, with a growing pause (up to 15 s), and its in-process loop
    calls ``claim`` over and over without sleeping, with SIGTERM and SIGINT captured (recorded, never raised) until a
    step runs. Here a blocked claim, every ``look_every_s``, fails the runs whose worker is gone (freeing their
    slots, and then claims again at once) and names the pool's holders when they change; in process it sleeps
    ``pause_s`` between claims and raises Dagster's interrupt when a signal was captured (the run fails, its
    pending claim is withdrawn on the way out). The multiprocess and step-delegating executors look at signals
    themselves between claims and are left to do so."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        dagster_run: dg.DagsterRun,
        say: Callable[[str], None],
        in_process: bool,
        look_every_s: float = 2.0,
        pause_s: float = 0.25,
    ) -> None:
        super().__init__(instance, dagster_run)
        self._say = say
        self._in_process = in_process
        self._look_every_s = look_every_s
        self._pause_s = pause_s
        self._next_look = 0.0
        self._said: dict[str, list[str]] = {}

    def claim(self, concurrency_key: str, step_key: str, step_priority: int = 0) -> bool:
        if super().claim(concurrency_key, step_key, step_priority):
            if self._said.pop(concurrency_key, None) is not None:
                self._say(f"{step_key}: got a slot of pool {concurrency_key}")
            return True
        if self._in_process and pop_captured_interrupt():
            raise DagsterExecutionInterruptedError(
                f"interrupted (SIGTERM/SIGINT) while {step_key} waited for pool {concurrency_key}"
            )
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + self._look_every_s
            if reap_dead_runs(self.instance, self._say):
                self.ask_again_now(step_key)  # a slot may be free now
            holders = pool_holders(self.instance, concurrency_key)
            if holders and holders != self._said.get(concurrency_key):
                self._said[concurrency_key] = holders
                self._say(
                    f"{step_key} waits for pool {concurrency_key} "
                    f"(limit {pool_limit(self.instance, concurrency_key)}): held by " + "; ".join(holders)
                )
        if self._in_process:
            time.sleep(self._pause_s)
        return False


class RunWorkerExecutor(dg.Executor):
    """An executor that runs its plan through ``inner`` after recording this process as the run's worker and
    failing dead runs; while a step waits for a pool, ``PoolWait`` stands in for Dagster's claims."""

    def __init__(self, inner: dg.Executor) -> None:
        self.inner = inner

    @property
    def retries(self) -> Any:
        return self.inner.retries

    @property
    def step_dependency_config(self) -> Any:
        return self.inner.step_dependency_config

    def __getattr__(self, name: str) -> Any:  # anything else Dagster asks of the executor
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[Any]:
        instance, run = plan_context.instance, plan_context.dagster_run
        record_run_worker(instance, run)
        say = plan_context.log.warning
        reap_dead_runs(instance, say)  # a killed run's slot is free before any step of this run asks for it
        in_process = is_in_process(self.inner)
        # an executor that does not take Dagster's context by that name keeps its own waits, as they are
        with pool_claims_made_by(self.inner, lambda i, r: PoolWait(i, r, say, in_process)):
            yield from self.inner.execute(plan_context, execution_plan)


def run_worker_executor(inner: dg.ExecutorDefinition) -> dg.ExecutorDefinition:
    """``inner`` (same name, config and requirements) with its executor wrapped in ``RunWorkerExecutor``."""
    create = inner.executor_creation_fn
    assert create is not None, inner.name
    return dg.ExecutorDefinition(
        name=inner.name,
        config_schema=cast(Any, inner.config_schema),  # already Dagster's schema object: taken as it is
        requirements=inner.get_requirements,
        executor_creation_fn=lambda init_context: RunWorkerExecutor(create(init_context)),
        description=inner.description,
    )


#: The CPU location's executor: Dagster's default (a process per step; ``in_process`` in the run config).
cpu_executor = run_worker_executor(dg.multi_or_in_process_executor)


def gpu_executor() -> dg.ExecutorDefinition:
    """``BASHGYM_GPU_EXECUTOR=in_process`` (default) or ``docker``, wrapped by ``run_worker_executor``."""
    kind = get_settings().gpu_executor
    if kind == "in_process":
        return run_worker_executor(dg.in_process_executor)
    if kind == "docker":
        from dagster_docker import docker_executor

        launcher = get_settings().step_launcher
        if launcher and os.environ.get("DAGSTER_RUN_STEP_KEY"):  # this process is a step in its container
            die_with_launcher(launcher)

        return run_worker_executor(
            docker_executor.configured(docker_executor_config(), name="gpu_docker_executor")
        )
    raise ValueError(f"BASHGYM_GPU_EXECUTOR={kind!r}: use 'in_process' or 'docker'")


if __name__ == "__main__":
    print(json.dumps(docker_executor_config(), indent=2))
