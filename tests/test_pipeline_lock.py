"""Two pipelines on one data folder never race (issue 31): the second is refused, naming the first, or queues.

The fault is injected for real: separate processes on one temporary data folder, the holder killed with SIGKILL.
Before the lock, the second ``bashgym demo`` ran beside the first and replaced its adapter folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bashgym_assets.config import PROJECT_ROOT, Settings
from bashgym_assets.housekeeping import DataFolderBusy, pipeline_lock, read_holder

HOLD = """
import sys, time
from bashgym_assets.housekeeping import DataFolderBusy, pipeline_lock
wait = {"no": False, "yes": True}[sys.argv[2]]
try:
    with pipeline_lock(command=sys.argv[1], wait=wait, poll_s=0.1, say_every_s=0.5,
                       echo=lambda line: print(line, flush=True)):
        print("HOLDING", flush=True)
        open(sys.argv[3], "w").write("held")
        time.sleep(float(sys.argv[4]))
except DataFolderBusy as exc:
    print(f"REFUSED {exc}", file=sys.stderr, flush=True)
    sys.exit(3)
"""


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "BASHGYM_HOME": str(home), "PYTHONPATH": str(PROJECT_ROOT)}


def _hold(home: Path, name: str, marker: Path, wait: str = "no", seconds: float = 300) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, name, wait, str(marker), str(seconds)],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"exited early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_second_pipeline_is_refused_naming_the_first_and_kill_9_frees_the_lock(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _hold(home, "bashgym demo --quick", tmp_path / "first")
    try:
        _wait_for(tmp_path / "first", first)
        second = _hold(home, "bashgym train", tmp_path / "second")
        out, err = second.communicate(timeout=120)
        assert second.returncode == 3, (out, err)
        assert not (tmp_path / "second").exists()  # it never ran beside the first
        assert f"pid {first.pid}" in err and "`bashgym demo --quick`" in err and str(home) in err
        assert "--wait" in err

        # the real CLI refuses too: `bashgym move` needs the folder to itself
        moved = subprocess.run(
            [sys.executable, "-m", "bashgym_assets.cli", "move", str(tmp_path / "elsewhere")],
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert moved.returncode == 1 and f"pid {first.pid}" in moved.stderr, moved.stderr
        assert home.is_dir() and not (tmp_path / "elsewhere").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # kill -9 never leaves a stale lock: the next one takes it at once
    third = _hold(home, "bashgym demo", tmp_path / "third", seconds=0)
    out, err = third.communicate(timeout=120)
    assert third.returncode == 0 and "HOLDING" in out, (out, err)
    assert read_holder(Settings(home=home)) == {}  # released cleanly: names nobody


def test_wait_queues_behind_the_holder_and_runs_when_it_is_killed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _hold(home, "bashgym factory", tmp_path / "first")
    try:
        _wait_for(tmp_path / "first", first)
        queued = _hold(home, "bashgym demo", tmp_path / "second", wait="yes", seconds=0)
        lines: list[str] = []
        assert queued.stdout is not None
        while len(lines) < 2:  # said at once, and again while it waits
            lines.append(queued.stdout.readline())
        assert all(
            line.startswith("[lock] waiting for the data folder") and f"pid {first.pid}" in line
            for line in lines
        ), lines
        assert not (tmp_path / "second").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    out, err = queued.communicate(timeout=120)
    assert queued.returncode == 0 and "HOLDING" in out, (out, err)
    assert (tmp_path / "second").exists()


def test_the_lock_is_exclusive_within_one_process_too(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    with pipeline_lock(settings, command="outer") as holder:
        assert read_holder(settings)["command"] == "outer" and holder["bashgym/pid"] == str(os.getpid())
        with pytest.raises(DataFolderBusy, match="`outer`"), pipeline_lock(settings, command="inner"):
            pass
    with pipeline_lock(settings, command="again"):
        pass


def test_move_and_relocate_accept_the_wait_their_refusal_suggests(tmp_path: Path) -> None:
    """``bashgym move`` refused by a running pipeline says "queue behind it with --wait": it accepts ``--wait``
    (so does ``relocate``), queues, and moves the folder once the holder is gone."""
    home = tmp_path / "home"
    first = _hold(home, "bashgym factory", tmp_path / "first")
    queued = None
    try:
        _wait_for(tmp_path / "first", first)
        refused = subprocess.run(
            [sys.executable, "-m", "bashgym_assets.cli", "move", str(tmp_path / "new")],
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == 1 and "--wait" in refused.stderr, refused.stderr
        relocate = subprocess.run(
            [sys.executable, "-m", "bashgym_assets.cli", "relocate", "--from", "/nowhere"],
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert relocate.returncode == 1 and "--wait" in relocate.stderr, relocate.stderr
        assert "unrecognized arguments" not in relocate.stderr
        queued = subprocess.Popen(
            [sys.executable, "-m", "bashgym_assets.cli", "move", str(tmp_path / "new"), "--wait"],
            env=_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert queued.stdout is not None
        line = queued.stdout.readline()
        assert line.startswith("[lock] waiting for the data folder") and f"pid {first.pid}" in line, (
            line,
            queued.stderr.read() if queued.poll() is not None and queued.stderr else "",
        )
        assert home.is_dir() and not (tmp_path / "new").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    out, err = queued.communicate(timeout=300)
    assert queued.returncode == 0, (out, err)
    assert (tmp_path / "new").is_dir() and not home.exists()
