"""``faults.explain_os_error``: a full disk said in one line, from the real errors of a really full filesystem (a
2 MiB tmpfs mounted for the test, filled by SQLite and by a plain write)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from bashgym_assets.faults import explain_os_error


@pytest.fixture
def full_disk(tmp_path: Path):
    """A 2 MiB tmpfs, unmounted afterwards (needs root: CAP_SYS_ADMIN)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if done.returncode != 0:
        # the project's machines run as root (README); a full disk cannot be faked without one, so say so loudly
        pytest.fail(f"cannot mount a 2 MiB tmpfs for the full-disk test (needs root): {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill_with_sqlite(folder: Path) -> str:
    """Insert into a SQLite database (as Dagster's and MLflow's stores do) until the disk refuses; the error."""
    con = sqlite3.connect(folder / "runs.db")
    con.execute("create table events (body blob)")
    try:
        for _ in range(10_000):
            con.execute("insert into events values (?)", (os.urandom(8192),))
            con.commit()
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        con.close()
    raise AssertionError("a 2 MiB disk took 80 MB")


def test_a_sqlite_database_on_a_full_disk_is_said_to_be_a_full_disk(full_disk: Path) -> None:
    said = fill_with_sqlite(full_disk)
    assert "full" in said  # SQLite's own words: "database or disk is full"
    line = explain_os_error(said, full_disk)
    assert line is not None and "\n" not in line
    assert f"the disk holding {full_disk} is full" in line and f"df -h {full_disk}" in line
    assert "free of 2.0 MiB" in line
    # what Dagster's storage prints for the same fault: recognised too, and the disk named full (it is)
    io = explain_os_error(
        "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) disk I/O error", full_disk
    )
    assert io is not None and "is full" in io


def test_a_plain_write_names_the_folder_of_the_data_home_it_failed_in(
    full_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BASHGYM_HOME", str(full_disk))
    target = full_disk / "lake" / "sessions" / "part.parquet"
    target.parent.mkdir(parents=True)
    with pytest.raises(OSError) as info, open(target, "wb") as fh:
        fh.write(b"x" * (4 << 20))
    text = f"Traceback (most recent call last):\n  File \"/usr/lib/python3/x.py\", line 1\n{info.value}: '{target}'"
    line = explain_os_error(text)
    assert line is not None and f"the disk holding {target.parent} is full" in line and "BASHGYM_HOME" in line


def test_a_full_disk_elsewhere_is_not_blamed_on_a_roomy_data_folder(tmp_path: Path) -> None:
    line = explain_os_error("OSError: [Errno 28] No space left on device", tmp_path)
    assert line is not None and "`df -h` shows which disk is full" in line and f"{tmp_path} has room" in line


def test_sqlite_refusing_past_its_own_limit_is_recognised(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "capped.db")
    con.execute("pragma max_page_count = 8")
    con.execute("create table t (x blob)")
    with pytest.raises(sqlite3.OperationalError) as info:
        for _ in range(100):
            con.execute("insert into t values (?)", (os.urandom(4096),))
    assert explain_os_error(str(info.value), tmp_path) is not None


def test_other_failures_are_left_alone() -> None:
    assert (
        explain_os_error("RuntimeError: materializing sft_adapter failed (exit 1): CUDA out of memory")
        is None
    )
    assert explain_os_error("") is None
