"""The trainer image for the docker GPU executor: ``sandbox_images/trainer/Dockerfile`` FROM the sandbox base, and
the containers of it that run a step (``docker_executor_config``) or a whole run (``instance``'s run launcher).

Tagged by a hash of the recipe and the base image tag, so a changed recipe or base gives a new tag and an
unchanged one is reused. ``BASHGYM_TRAINER_IMAGE`` overrides the tag (a prebuilt image on a GPU host).

The container config is plain data (no Dagster): the GPU executor (``defs.executors``) hands it to dagster-docker,
and ``instance`` derives the run launcher's from it; both import it from here, so neither imports the other.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bashgym_assets import images
from bashgym_assets.config import PROJECT_ROOT, Settings, get_settings
from bashgym_assets.process_lifetime import launcher_identity

RECIPE_DIR = images.PROJECT_ROOT / "sandbox_images" / "trainer"
REPOSITORY = "bashgym-trainer"
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


def trainer_image_tag(base_tag: str | None = None, recipe_dir: Path = RECIPE_DIR) -> str:
    override = get_settings().trainer_image_override
    if override:
        return override
    base_tag = base_tag or images.sandbox_image_tag()
    digest = hashlib.sha256(base_tag.encode())
    for path in sorted(p for p in recipe_dir.rglob("*") if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def build_trainer_image(force: bool = False) -> str:
    """Build (or reuse) the trainer image; builds the sandbox base first when it is missing."""
    tag = trainer_image_tag()
    if get_settings().trainer_image_override:
        return tag
    if images.image_exists(tag) and not force:
        return tag
    base = images.build_sandbox_image()
    done = subprocess.run(
        [
            "docker",
            "build",
            "-q",
            "--build-arg",
            f"BASE_IMAGE={base}",
            "--label",
            "org.bashgym.kind=trainer",
            "-t",
            tag,
            str(RECIPE_DIR),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise images.ImageBuildError(f"trainer image build failed: {done.stderr.strip()[-2000:]}")
    return tag


# ---- a container of it that runs a step ------------------------------------------------------------------------
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
    setting = (setting or get_settings().docker_gpus).strip().lower()
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


if __name__ == "__main__":
    print(build_trainer_image())
