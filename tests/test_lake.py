"""The storage layer: parquet per asset and partition, DuckDB views, atomic writes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bashgym_assets.config import Settings
from bashgym_assets.lake import Lake, atomic_write_text


def test_round_trip_and_duckdb_view(settings: Settings) -> None:
    lake = Lake(settings)
    lake.write("tiered_traces", [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.4}], partition="repo-one")
    lake.write("tiered_traces", [{"id": "c", "score": 0.7}], partition="repo-two")
    lake.write("gated_scenarios", [{"id": "s1", "split": "train"}])

    assert lake.read("tiered_traces", "repo-one").to_pylist() == [
        {"id": "a", "score": 0.9},
        {"id": "b", "score": 0.4},
    ]
    assert lake.partitions("tiered_traces") == ["repo-one", "repo-two"]
    assert lake.assets() == ["gated_scenarios", "tiered_traces"]
    assert sorted(lake.read_all("tiered_traces").column("id").to_pylist()) == ["a", "b", "c"]

    con = lake.connect()
    rows = con.execute(
        "select _partition, count(*), round(sum(score), 2) from tiered_traces group by 1 order by 1"
    ).fetchall()
    assert rows == [("repo-one", 2, 1.3), ("repo-two", 1, 0.7)]
    assert con.execute("select id from gated_scenarios").fetchall() == [("s1",)]


def test_rewrite_replaces_partition(settings: Settings) -> None:
    lake = Lake(settings)
    lake.write("raw_sessions", [{"x": 1}], partition="p")
    lake.write("raw_sessions", [{"x": 2}, {"x": 3}], partition="p")
    assert lake.read("raw_sessions", "p").column("x").to_pylist() == [2, 3]


def test_unsafe_names_rejected(settings: Settings) -> None:
    lake = Lake(settings)
    for bad in ("../escape", "a/b", "..."):
        with pytest.raises(ValueError):
            lake.table_path("raw_sessions", bad)


def test_missing_partition_is_a_clear_error(settings: Settings) -> None:
    with pytest.raises(FileNotFoundError, match="has not been materialized"):
        Lake(settings).read("raw_sessions", "nope")


def _slow_writer(path: str, started: multiprocessing.synchronize.Event) -> None:
    """Write a big table through the lake's atomic path, slowly, so the parent can kill it mid-write."""
    from bashgym_assets.lake import atomic_path

    final = Path(path)
    with atomic_path(final, suffix=".parquet") as tmp:
        writer = pq.ParquetWriter(tmp, pa.schema([("v", pa.int64())]))
        started.set()
        for i in range(10_000):
            writer.write_table(pa.table({"v": list(range(i * 1000, (i + 1) * 1000))}))
            time.sleep(0.01)
        writer.close()


def test_killed_write_leaves_no_readable_partial(settings: Settings) -> None:
    lake = Lake(settings)
    lake.write("raw_sessions", [{"v": 1}], partition="p")  # the previous, whole version
    final = lake.table_path("raw_sessions", "p")
    started = multiprocessing.get_context("fork").Event()
    proc = multiprocessing.get_context("fork").Process(target=_slow_writer, args=(str(final), started))
    proc.start()
    assert started.wait(30)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    # The reader still sees the previous whole version, and the partial file is not a partition.
    assert lake.read("raw_sessions", "p").column("v").to_pylist() == [1]
    assert lake.partitions("raw_sessions") == ["p"]
    leftovers = [p.name for p in final.parent.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers, "the killed writer's temporary file should be the only trace of it"
    con = lake.connect()
    assert con.execute("select count(*) from raw_sessions").fetchone() == (1,)


def test_exception_during_write_cleans_up(settings: Settings) -> None:
    lake = Lake(settings)
    target = settings.home / "notes.txt"
    atomic_write_text(target, "old")

    class Boom(Exception):
        pass

    from bashgym_assets.lake import atomic_path

    with pytest.raises(Boom), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise Boom
    assert target.read_text() == "old"
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".tmp-")] == []
    assert lake.root.parent == settings.home


def test_atomic_artifact_dir(settings: Settings) -> None:
    lake = Lake(settings)
    with lake.atomic_artifact_dir("adapters", "run-1") as tmp:
        (tmp / "adapter_config.json").write_text("{}")
    final = lake.artifact_dir("adapters", "run-1", create=False)
    assert (final / "adapter_config.json").read_text() == "{}"
    with pytest.raises(RuntimeError), lake.atomic_artifact_dir("adapters", "run-1") as tmp:
        (tmp / "partial").write_text("x")
        raise RuntimeError("crash")
    assert sorted(p.name for p in final.iterdir()) == ["adapter_config.json"]


def test_lake_files_follow_the_umask_not_0600(settings: Settings) -> None:
    """Another user's UI or notebook reads the lake: files get 0666 & ~umask like any other file (issue 31)."""
    old = os.umask(0o022)
    try:
        lake = Lake(settings)
        lake.write("raw_sessions", [{"x": 1}], partition="p")
        path = next((settings.lake_dir / "raw_sessions").glob("*.parquet"))
        assert path.stat().st_mode & 0o777 == 0o644
        with lake.atomic_artifact_dir("reports", "r1") as tmp:
            (tmp / "a.txt").write_text("x")
        assert (lake.artifact_dir("reports", "r1", create=False)).stat().st_mode & 0o777 == 0o755
        os.umask(0o077)
        lake.write("raw_sessions", [{"x": 2}], partition="q")
        assert next((settings.lake_dir / "raw_sessions").glob("q*.parquet")).stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


READ_AND_EXIT = """
import sys
from bashgym_assets.config import Settings
from bashgym_assets.lake import Lake
rows = Lake(Settings(home=sys.argv[1])).read("eval_episodes", "e1").to_pylist()
assert len(rows) == 10, len(rows)
"""


def test_a_process_that_read_the_lake_exits_cleanly(settings: Settings) -> None:
    """pyarrow 25's threaded read through a Python file object left about half of the processes that read a table
    to abort as they exited ("terminate called without an active exception", exit 134): a command that had done
    its work failed. Eight readers, each a fresh process, all exit 0 (with the old read, about 1 in 1,000 runs
    would pass by chance)."""
    import subprocess
    import sys

    from bashgym_assets.config import PROJECT_ROOT

    rows = [{"id": f"task-{i}", "transcript": ("$ ls -la\n" + "x" * 200 + "\n") * 40} for i in range(10)]
    Lake(settings).write("eval_episodes", rows, partition="e1")
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READ_AND_EXIT, str(settings.home)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    ended = [(r.wait(timeout=120), r.stderr.read() if r.stderr else "") for r in readers]
    assert [code for code, _ in ended] == [0] * 8, [err[-300:] for code, err in ended if code]
