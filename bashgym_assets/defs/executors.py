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
(``housekeeping.die_with_launcher``, armed when the step loads this code location).
"""

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.executor.in_process import InProcessExecutor
from dagster._utils.interrupts import pop_captured_interrupt

from bashgym_assets.config import PROJECT_ROOT, Settings, get_settings
from bashgym_assets.defs.run_health import pool_holders, pool_limit, reap_dead_runs, record_run_worker
from bashgym_assets.housekeeping import die_with_launcher, launcher_identity

STEP_CONTAINER_LABEL = "org.bashgym.kind"
STEP_CONTAINER_KIND = "trainer-step"
STEP_LAUNCHER_ENV = "BASHGYM_STEP_LAUNCHER"
PASSTHROUGH_ENV = [
    "BASHGYM_HOME",
    "BASHGYM_BASE_MODEL",
    "BASHGYM_GPU_EXECUTOR",
    "BASHGYM_TRAINER_IMAGE",
    "BASHGYM_DOCKER_GPUS",
    "BASHGYM_TEACHER_MODEL",
    "BASHGYM_TEACHER_API_BASE",
    "HF_TOKEN",
    "HF_HUB_OFFLINE",
    "CUDA_VISIBLE_DEVICES",
    "BASHGYM_DAGSTER_PG_URL",
    "BASHGYM_MLFLOW_TRACKING_URI",
]
# With an instance or MLflow store outside the data folder (Postgres, a tracking server), a step container must
# reach it where the host does (a server on the host's loopback included): the host's network.
EXTERNAL_STORE_ENV = ("BASHGYM_DAGSTER_PG_URL", "BASHGYM_MLFLOW_TRACKING_URI")


# ---- the run worker answers for its run ------------------------------------------------------------------------
class PoolWait(InstanceConcurrencyContext):
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
            if reap_dead_runs(self._instance, self._say):
                self._pending_timeouts[step_key] = 0.0  # a slot may be free now: ask again at once
            holders = pool_holders(self._instance, concurrency_key)
            if holders and holders != self._said.get(concurrency_key):
                self._said[concurrency_key] = holders
                self._say(
                    f"{step_key} waits for pool {concurrency_key} "
                    f"(limit {pool_limit(self._instance, concurrency_key)}): held by " + "; ".join(holders)
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
        module = sys.modules[type(self.inner).__module__]
        if getattr(module, "InstanceConcurrencyContext", None) is not InstanceConcurrencyContext:
            # an executor that does not take Dagster's context by that name: its own waits, as they are
            yield from self.inner.execute(plan_context, execution_plan)
            return
        in_process = isinstance(self.inner, InProcessExecutor)
        module.InstanceConcurrencyContext = lambda i, r: PoolWait(i, r, say, in_process)  # type: ignore[attr-defined]
        try:
            yield from self.inner.execute(plan_context, execution_plan)
        finally:
            module.InstanceConcurrencyContext = InstanceConcurrencyContext  # type: ignore[attr-defined]


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


def _nvidia_runtime() -> bool:
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "nvidia" in done.stdout


def device_requests(setting: str | None = None) -> list[dict[str, Any]]:
    """``device_requests`` for the step containers from ``BASHGYM_DOCKER_GPUS`` (auto | all | none | N)."""
    setting = (setting or os.environ.get("BASHGYM_DOCKER_GPUS", "auto")).strip().lower()
    if setting == "none" or (setting == "auto" and not _nvidia_runtime()):
        return []
    count = -1 if setting in ("auto", "all") else int(setting)
    return [{"count": count, "capabilities": [["gpu"]]}]


def _volumes(settings: Settings, dagster_home: str) -> dict[str, dict[str, str]]:
    ro = [PROJECT_ROOT, Path(sys.prefix), Path(sys.base_prefix)]
    rw = [settings.home, Path(dagster_home)]
    base = settings.base_model
    if base and Path(base).expanduser().exists():
        ro.append(Path(base).expanduser().resolve())
    volumes: dict[str, dict[str, str]] = {}
    for path, mode in [(p, "ro") for p in ro] + [(p, "rw") for p in rw]:
        key = str(Path(path).resolve())
        volumes[key] = {"bind": key, "mode": mode}  # a later rw entry for the same path wins
    return volumes


def docker_executor_config(settings: Settings | None = None, image: str | None = None) -> dict[str, Any]:
    """The ``docker_executor`` config for this machine (image, env, mounts at identical paths, GPUs)."""
    from bashgym_assets.training.trainer_image import trainer_image_tag

    settings = settings or get_settings()
    dagster_home = os.environ.get("DAGSTER_HOME") or str(settings.dagster_home)
    venv_bin = str(Path(sys.prefix) / "bin")
    env = [
        f"DAGSTER_HOME={dagster_home}",
        f"BASHGYM_HOME={settings.home}",
        f"PATH={venv_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        f"PYTHONPATH={PROJECT_ROOT}",
        f"HOME={settings.home / 'cache' / 'container-home'}",
    ]
    env += [f"{k}={os.environ[k]}" for k in PASSTHROUGH_ENV if k in os.environ and k != "BASHGYM_HOME"]
    # this process launches the steps (the run worker resolves the executor): they end when it does
    env.append(f"{STEP_LAUNCHER_ENV}={launcher_identity()}")
    kwargs: dict[str, Any] = {
        "volumes": _volumes(settings, dagster_home),
        "working_dir": str(PROJECT_ROOT),
        "labels": {STEP_CONTAINER_LABEL: STEP_CONTAINER_KIND},
        "shm_size": "1g",
        # the launcher's pid must mean the same in the step: the trainer is the user's own code with their data
        # folder mounted read-write (not a sandbox), so seeing the host's processes gives it nothing new
        "pid_mode": "host",
    }
    if any(os.environ.get(k) for k in EXTERNAL_STORE_ENV):
        kwargs["network_mode"] = "host"
    gpus = device_requests()
    if gpus:
        kwargs["device_requests"] = gpus
    return {
        "image": image or trainer_image_tag(),
        "env_vars": env,
        "container_kwargs": kwargs,
        "max_concurrent": 1,
    }


def gpu_executor() -> dg.ExecutorDefinition:
    """``BASHGYM_GPU_EXECUTOR=in_process`` (default) or ``docker``, wrapped by ``run_worker_executor``."""
    kind = get_settings().gpu_executor
    if kind == "in_process":
        return run_worker_executor(dg.in_process_executor)
    if kind == "docker":
        from dagster_docker import docker_executor

        launcher = os.environ.get(STEP_LAUNCHER_ENV)
        if launcher and os.environ.get("DAGSTER_RUN_STEP_KEY"):  # this process is a step in its container
            die_with_launcher(launcher)

        return run_worker_executor(
            docker_executor.configured(docker_executor_config(), name="gpu_docker_executor")
        )
    raise ValueError(f"BASHGYM_GPU_EXECUTOR={kind!r}: use 'in_process' or 'docker'")


if __name__ == "__main__":
    print(json.dumps(docker_executor_config(), indent=2))
