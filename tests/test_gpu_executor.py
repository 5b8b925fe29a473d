"""The docker GPU executor for real: a small training asset materialized through dagster-docker's
docker_executor, each step in its own trainer-image container, on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from bashgym_assets.config import Settings
from bashgym_assets.lake import Lake
from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training.trainer_image import (
    STEP_CONTAINER_KIND,
    STEP_CONTAINER_LABEL,
    docker_executor_config,
)
from bashgym_assets.training_data import build as ds

VENV_BIN = Path(sys.prefix) / "bin"


def test_in_process_is_the_default(monkeypatch):
    import dagster as dg

    from bashgym_assets.defs.executors import gpu_executor

    monkeypatch.delenv("BASHGYM_GPU_EXECUTOR", raising=False)
    # Dagster's in-process executor, wrapped so that the run's worker answers for the run
    executor = gpu_executor()
    assert executor.name == dg.in_process_executor.name and executor is not dg.in_process_executor
    assert executor.config_schema is dg.in_process_executor.config_schema
    monkeypatch.setenv("BASHGYM_GPU_EXECUTOR", "kubernetes")
    with pytest.raises(ValueError, match="in_process' or 'docker"):
        gpu_executor()


def test_docker_config_mounts_identical_paths_and_requests_gpus(settings, monkeypatch):
    monkeypatch.setenv("BASHGYM_DOCKER_GPUS", "all")
    cfg = docker_executor_config(settings, image="img:1")
    vols = cfg["container_kwargs"]["volumes"]
    assert vols[str(settings.home)] == {"bind": str(settings.home), "mode": "rw"}
    assert all(k == v["bind"] for k, v in vols.items())
    assert str(Path(sys.base_prefix).resolve()) in vols
    assert cfg["container_kwargs"]["device_requests"] == [{"count": -1, "capabilities": [["gpu"]]}]
    assert any(e.startswith("DAGSTER_HOME=") for e in cfg["env_vars"])
    monkeypatch.setenv("BASHGYM_DOCKER_GPUS", "none")
    assert "device_requests" not in docker_executor_config(settings, image="img:1")["container_kwargs"]


def _docker_gpu_home(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A data folder with a tiny base model and an SFT dataset, and the environment of a docker-executor run."""
    home = tmp_path / "home"
    dagster_home = home / "dagster"
    dagster_home.mkdir(parents=True)
    settings = Settings(home=home)
    settings.ensure_dirs()
    model = build_tiny_model(settings.models_dir / "tiny")
    d = syn.demo_inputs()
    built = ds.build_sft(d["segments"], d["trajectories"])
    Lake(settings).write("sft_dataset", built.rows, schema=ds.SFT_SCHEMA)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASHGYM_")}
    env.update(
        {
            "BASHGYM_HOME": str(home),
            "DAGSTER_HOME": str(dagster_home),
            "BASHGYM_GPU_EXECUTOR": "docker",
            "BASHGYM_BASE_MODEL": str(model),
            "BASHGYM_DOCKER_GPUS": "none",
        }
    )
    return home, dagster_home, env


def _materialize_cmd(select: str, run_config: dict) -> list[str]:
    return [
        str(VENV_BIN / "dagster"),
        "asset",
        "materialize",
        "-m",
        "bashgym_assets.gpu_definitions",
        "--select",
        select,
        "--config-json",
        json.dumps(run_config),
    ]


def _step_containers(client: docker.DockerClient, dagster_home: Path) -> list:
    return [
        c
        for c in client.containers.list(
            all=True, filters={"label": f"{STEP_CONTAINER_LABEL}={STEP_CONTAINER_KIND}"}
        )
        if f"DAGSTER_HOME={dagster_home}" in c.attrs["Config"]["Env"]
    ]


@pytest.mark.docker
@pytest.mark.slow
def test_sft_adapter_materializes_through_the_docker_executor(sandbox_image, tmp_path):
    from bashgym_assets.training.trainer_image import build_trainer_image

    image = build_trainer_image()
    home, dagster_home, env = _docker_gpu_home(tmp_path)
    run_config = {
        "ops": {
            "sft_adapter": {
                "config": {
                    "max_steps": 2,
                    "batch_size": 2,
                    "grad_accum": 1,
                    "max_length": 256,
                    "run_name": "docker-smoke",
                }
            }
        }
    }
    client = docker.from_env()
    try:
        done = subprocess.run(
            _materialize_cmd("base_model,sft_adapter", run_config),
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        containers = _step_containers(client, dagster_home)
        steps = sorted(
            e.split("=", 1)[1]
            for c in containers
            for e in c.attrs["Config"]["Env"]
            if e.startswith("DAGSTER_RUN_STEP_KEY=")
        )
        assert steps == ["base_model", "sft_adapter"]  # every step in its own container ...
        assert all(
            c.attrs["Config"]["Image"] == image and c.attrs["State"]["ExitCode"] == 0 for c in containers
        )
        assert "Launching step in Docker container" in done.stderr
        adapter = home / "artifacts" / "adapters" / "docker-smoke"
        assert sorted(p.name for p in adapter.iterdir()) == [
            "adapter_config.json",
            "adapter_model.safetensors",
        ]
        # ... and reported its materialization, with the MLflow registration, to the shared instance
        import dagster as dg

        with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
            mat = instance.get_latest_materialization_event(dg.AssetKey("sft_adapter")).asset_materialization
        assert mat.metadata["model_uri"].value == "models:/bashgym-operator/1"
        assert mat.metadata["steps"].value == 2
    finally:
        for c in _step_containers(client, dagster_home):
            c.remove(force=True)


@pytest.mark.docker
@pytest.mark.slow
def test_a_training_step_container_ends_when_the_run_that_launched_it_is_killed(sandbox_image, tmp_path):
    """The step container is the Docker daemon's child, not the run's: before it watched its launcher, a
    ``kill -9`` of the run left it training to the end (here: 100,000 steps)."""
    import time

    from bashgym_assets.training.trainer_image import build_trainer_image

    build_trainer_image()
    home, dagster_home, env = _docker_gpu_home(tmp_path)
    run_config = {
        "ops": {
            "sft_adapter": {
                "config": {
                    "max_steps": 100_000,
                    "batch_size": 2,
                    "grad_accum": 1,
                    "max_length": 256,
                    "run_name": "docker-killed",
                }
            }
        }
    }
    client = docker.from_env()
    run = subprocess.Popen(
        _materialize_cmd("sft_adapter", run_config),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 600
        while not [c for c in _step_containers(client, dagster_home) if c.status == "running"]:
            assert run.poll() is None, run.stderr.read()[-4000:] if run.stderr else ""
            assert time.monotonic() < deadline, "no step container started"
            time.sleep(1)
        (step,) = _step_containers(client, dagster_home)
        assert step.attrs["HostConfig"]["PidMode"] == "host"
        time.sleep(5)  # into the training loop
        step.reload()
        assert step.status == "running"
        run.kill()
        run.wait()
        deadline = time.monotonic() + 60
        while step.status == "running":
            assert time.monotonic() < deadline, "the step container outlived the run that launched it"
            time.sleep(1)
            step.reload()
        assert not (
            home / "artifacts" / "adapters" / "docker-killed"
        ).exists()  # it did not train on to the end
    finally:
        if run.poll() is None:
            run.kill()
        for c in _step_containers(client, dagster_home):
            c.remove(force=True)
