"""The GPU code location's executor: in-process by default, dagster-docker's ``docker_executor`` when
``BASHGYM_GPU_EXECUTOR=docker``.

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
from pathlib import Path
from typing import Any

import dagster as dg

from bashgym_assets.config import PROJECT_ROOT, Settings, get_settings
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
    """``BASHGYM_GPU_EXECUTOR=in_process`` (default) or ``docker``."""
    kind = get_settings().gpu_executor
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "docker":
        from dagster_docker import docker_executor

        launcher = os.environ.get(STEP_LAUNCHER_ENV)
        if launcher and os.environ.get("DAGSTER_RUN_STEP_KEY"):  # this process is a step in its container
            die_with_launcher(launcher)

        return docker_executor.configured(docker_executor_config(), name="gpu_docker_executor")
    raise ValueError(f"BASHGYM_GPU_EXECUTOR={kind!r}: use 'in_process' or 'docker'")


if __name__ == "__main__":
    print(json.dumps(docker_executor_config(), indent=2))
