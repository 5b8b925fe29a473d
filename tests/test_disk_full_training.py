"""A disk that fills up during SFT (issue 40, item 2): the user reads one line naming the disk and the folder, and
the half-written ``checkpoint-N`` folder it leaves does not stop the next run once there is room again.

The fault is real: the checkpoint folder is a small tmpfs mounted for the test (root, as the project's machines
run), so the Trainer's own ``torch.save`` of the optimizer state hits ENOSPC mid-file, which torch reports as
``unexpected pos N vs M`` with no word of the disk. Then the tmpfs is grown (``remount,size=``) and the training
run again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bashgym_assets.config import PROJECT_ROOT, Settings
from bashgym_assets.faults import explain_os_error
from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training.trainer import TrainConfig, train_sft


def checkpoint_step(folder: Path) -> int | None:
    """The step a checkpoint folder holds; None when its ``trainer_state.json`` (written last) is missing."""
    try:
        return int(json.loads((folder / "trainer_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError):
        return None


def _mount(folder: Path, size: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:  # a full disk cannot be faked without root (test_faults.py says the same)
        pytest.fail(f"cannot mount a tmpfs for the full-disk test (needs root): {done.stderr.strip()}")


def _resize(folder: Path, size_bytes: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_bytes}", str(folder)], check=True)


def _umount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


def _conv(i: int) -> list[dict[str, str]]:
    return syn.trajectory_messages(f"task {i}: list the files", [f"ls -la dir{i}"], ["total 12\nfile.txt"])


def _cfg(model: str, out: Path, ckpt: Path) -> TrainConfig:
    return TrainConfig(
        base_model=model,
        output_dir=str(out),
        checkpoint_dir=str(ckpt),
        batch_size=2,
        grad_accum=1,
        save_every=2,
        max_steps=6,
        max_length=128,
        lora_dropout=0.0,
    )


@pytest.mark.slow
def test_a_checkpoint_that_fills_the_disk_is_said_and_the_next_run_resumes_before_it(
    tiny_model: str, tmp_path: Path
) -> None:
    ckpt = tmp_path / "small"
    _mount(ckpt, "20m")
    try:
        cfg = _cfg(tiny_model, tmp_path / "run", ckpt)
        convs = [_conv(i) for i in range(4)]
        with pytest.raises(KeyboardInterrupt):
            train_sft(cfg, convs, stop_after=3)  # checkpoint-2 written whole, then the run dies
        assert checkpoint_step(ckpt / "checkpoint-2") == 2
        # leave room for less than the next checkpoint: its optimizer state (torch.save) meets a full disk
        _resize(ckpt, shutil.disk_usage(ckpt).used + (160 << 10))
        with pytest.raises(OSError) as info:
            train_sft(cfg, convs)
        assert info.value.errno == 28  # ENOSPC, whatever torch said ("unexpected pos ...")
        line = explain_os_error(str(info.value))
        assert line is not None and "\n" not in line
        assert f"the disk holding {ckpt} is full" in line and f"df -h {ckpt}" in line
        half = ckpt / "checkpoint-4"
        assert half.is_dir() and checkpoint_step(half) is None  # what the fault leaves: no trainer_state.json

        _resize(ckpt, 20 << 20)  # room again: the rerun skips the half-written folder, resumes from step 2
        resumed = train_sft(cfg, convs)
        assert resumed.resumed_from_step == 2 and resumed.steps == 6
        assert checkpoint_step(ckpt / "checkpoint-6") == 6
        assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
            "adapter_config.json",
            "adapter_model.safetensors",
        ]
    finally:
        _umount(ckpt)


@pytest.mark.slow
def test_a_run_whose_only_checkpoint_is_half_written_starts_over_cleanly(
    tiny_model: str, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    half = ckpt / "checkpoint-4"
    half.mkdir(parents=True)
    (half / "adapter_model.safetensors").write_bytes(b"\0" * 1000)  # what a killed save leaves: no state
    (half / "optimizer.pt").write_bytes(b"PK\x03\x04")
    started = train_sft(_cfg(tiny_model, tmp_path / "run", ckpt), [_conv(i) for i in range(4)])
    assert started.resumed_from_step == 0 and started.steps == 6
    assert checkpoint_step(ckpt / "checkpoint-6") == 6
    assert checkpoint_step(half) == 4  # written again, whole, by this run (the half-written one was removed)


@pytest.mark.slow
def test_bashgym_train_on_a_full_disk_ends_with_one_line_and_runs_again_once_there_is_room(
    tmp_path: Path, empty_mlflow_store: Path
) -> None:
    """The whole path a user takes: ``bashgym train`` (the GPU location's ``sft_adapter`` in its step process),
    its checkpoint folder on a disk that fills up."""
    from bashgym_assets.lake import Lake
    from bashgym_assets.training_data import build as ds

    home = tmp_path / "home"
    settings = Settings(home=home)
    settings.ensure_dirs()
    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    model = build_tiny_model(settings.models_dir / "tiny")
    d = syn.demo_inputs()
    Lake(settings).write(
        "sft_dataset", ds.build_sft(d["segments"], d["trajectories"]).rows, schema=ds.SFT_SCHEMA
    )
    checkpoints = settings.artifacts_dir / "checkpoints"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BASHGYM_", "DAGSTER_"))}
    env.update(
        {
            "BASHGYM_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster"),
            "BASHGYM_BASE_MODEL": str(model),
            "BASHGYM_TRACES": "0",
        }
    )
    cmd = [
        str(Path(sys.executable).with_name("bashgym")),
        "train",
        "--profile",
        "quick",
        "--only",
        "sft_adapter",
    ]
    _mount(checkpoints, "200k")  # the adapter fits, its optimizer state does not
    try:
        full = subprocess.run(cmd, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
        assert full.returncode == 1, full.stdout[-2000:] + full.stderr[-3000:]
        lines = full.stderr.strip().splitlines()
        assert len(lines) == 1, full.stderr  # one line, not the step's 40-line traceback
        (run_folder,) = [p for p in checkpoints.iterdir() if p.is_dir()]
        assert lines[0].startswith(f"bashgym: the disk holding {run_folder} is full"), lines[0]
        assert f"df -h {run_folder}" in lines[0] and "sft_adapter" in lines[0]

        # room again: the same command finishes, past the half-written checkpoint
        _resize(checkpoints, 50 << 20)
        again = subprocess.run(cmd, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
        assert "trainer_state.json" not in again.stdout + again.stderr
        adapters = [p.name for p in (settings.artifacts_dir / "adapters").iterdir()]
        assert run_folder.name in adapters
    finally:
        _umount(checkpoints)
