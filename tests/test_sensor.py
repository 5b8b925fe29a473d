"""The trace-file sensor driven through several ticks over real files, and the runs it asks for."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets.defs import ingest as ingest_defs
from bashgym_assets.defs import privacy as privacy_defs
from bashgym_assets.defs import tiers as tiers_defs
from bashgym_assets.defs.partitions import repo_partitions
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.ingest.pipeline import RAW_SESSIONS
from bashgym_assets.ingest.scan import CursorStore, ScanCursor, scan
from bashgym_assets.lake import Lake
from bashgym_assets.sessions import sessions_from_table
from bashgym_assets.testing.traces import T0, ClaudeSessionWriter


def _settle(*paths: Path) -> None:
    old = time.time() - 60
    for p in paths:
        os.utime(p, (old, old))


def _session(root: Path, repo: str, name: str, steps: int = 2) -> Path:
    w = ClaudeSessionWriter(root, f"/home/dev/src/{repo}", T0, name)
    w.prompt(f"work on {repo}")
    for i in range(steps):
        w.bash(f"echo {i}", str(i), exit_code=0 if i % 2 == 0 else 1)
    path = w.close()
    _settle(path)
    return path


def _tool_lines(n: int) -> bytes:
    ts = "2026-10-05T09:00:00.000Z"
    use = {
        "type": "assistant",
        "cwd": "/home/dev/src/alpha",
        "timestamp": ts,
        "uuid": f"late-a{n}",
        "message": {
            "id": f"late{n}",
            "content": [
                {"type": "tool_use", "id": f"late-t{n}", "name": "Bash", "input": {"command": "make late"}}
            ],
        },
    }
    res = {
        "type": "user",
        "cwd": "/home/dev/src/alpha",
        "timestamp": ts,
        "uuid": f"late-r{n}",
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": f"late-t{n}",
                    "content": "Exit code 2\nfail",
                    "is_error": True,
                }
            ],
        },
    }
    return (json.dumps(use) + "\n" + json.dumps(res) + "\n").encode()


@pytest.fixture
def watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "projects"
    folder.mkdir()
    monkeypatch.setenv("BASHGYM_TRACE_DIRS", str(folder))
    return folder


def test_sensor_starts_running_and_targets_the_ingest_job() -> None:
    sensor = ingest_defs.trace_files_sensor
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.job_name == "ingest_repo_job"
    defs = _per_repo_defs({"bashgym": BashgymHome()})
    job = defs.resolve_job_def("ingest_repo_job")
    assert job.partitions_def == repo_partitions
    assert sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys) == [
        "raw_sessions",
        "redacted_sessions",
        "tiered_traces",
    ]


def _per_repo_defs(resources: dict) -> dg.Definitions:
    """The per-repo chain a sensor run materializes: ingest, redaction (+ its blocking check), tiers."""
    return dg.Definitions.merge(
        ingest_defs.defs, privacy_defs.defs, tiers_defs.defs, dg.Definitions(resources=resources)
    )


@pytest.mark.slow
def test_sensor_ticks_over_created_appended_and_deleted_files(watched: Path, bashgym_home: Path) -> None:
    resources = {"bashgym": BashgymHome(home=str(bashgym_home))}
    defs = _per_repo_defs(resources)
    with dg.instance_for_test() as instance:
        cursor = None

        def tick() -> dg.SensorResult:
            nonlocal cursor
            ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
            result = ingest_defs.trace_files_sensor(ctx)
            cursor = result.cursor
            for req in result.dynamic_partitions_requests:
                instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
            return result

        def run(repo: str) -> list:
            job = defs.resolve_job_def("ingest_repo_job")
            result = job.execute_in_process(partition_key=repo, instance=instance)
            assert result.success
            (mat,) = result.asset_materializations_for_node("raw_sessions")
            meta = mat.metadata
            assert meta["sessions"].value == len(list((watched / f"-home-dev-src-{repo}").glob("*.jsonl")))
            assert meta["quarantined"].value == 0 and "Bash" in [
                r.data["tool"] for r in meta["tools"].records
            ]
            assert meta["dagster/row_count"].value >= 1
            assert meta["tools_plot"].value.startswith("![tools](data:image/png;base64,")
            assert "work on" in meta["preview"].value
            lake = Lake(BashgymHome(home=str(bashgym_home)).settings())
            assert lake.exists("redacted_sessions", repo) and lake.exists("tiered_traces", repo)
            return sessions_from_table(lake.read(RAW_SESSIONS, repo))

        first = tick()
        assert first.run_requests == [] and first.dynamic_partitions_requests == []
        assert len(first.cursor) <= 40  # a token: the state itself lives in the data folder

        a1 = _session(watched, "alpha", "a1")
        _session(watched, "alpha", "a2", steps=3)
        b1 = _session(watched, "beta", "b1")
        second = tick()
        assert sorted(r.partition_key for r in second.run_requests) == ["alpha", "beta"]
        (add,) = second.dynamic_partitions_requests
        assert sorted(add.partition_keys) == ["alpha", "beta"]
        assert set(instance.get_dynamic_partitions("repos")) == {"alpha", "beta"}
        sessions = run("alpha")
        assert sorted(len(s.steps) for s in sessions) == [2, 3]

        assert tick().run_requests == []  # nothing changed

        with open(a1, "ab") as fh:  # a half-written line: nothing to ingest yet
            fh.write(_tool_lines(1)[:50])
        assert tick().run_requests == []
        size_before = a1.stat().st_size
        with open(a1, "ab") as fh:
            fh.write(_tool_lines(1)[50:])
        assert a1.stat().st_size > size_before
        appended = tick()
        assert [r.partition_key for r in appended.run_requests] == ["alpha"]
        assert appended.dynamic_partitions_requests == []
        sessions = run("alpha")
        assert len(sessions) == 2  # re-ingested, not duplicated
        grown = next(s for s in sessions if s.source_path == str(a1))
        assert len(grown.steps) == 3 and grown.steps[-1].exit_code == 2

        b1.unlink()  # a deleted file: no crash, no run, and its session stays imported
        shutil.rmtree(b1.parent)
        gone = tick()
        assert gone.run_requests == []
        (new_repo,) = [_session(watched, "gamma", "g1")]
        third = tick()
        assert [r.partition_key for r in third.run_requests] == ["gamma"]
        assert list(third.dynamic_partitions_requests[0].partition_keys) == ["gamma"]
        assert new_repo.exists()
        run_keys = [r.run_key for r in second.run_requests + appended.run_requests + third.run_requests]
        assert len(set(run_keys)) == len(run_keys)


def test_scan_of_ten_thousand_files_touches_only_what_changed(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    template = _session(tmp_path / "tmpl", "bulk", "template", steps=1).read_bytes()
    for i in range(10_000):
        sub = folder / f"-home-dev-src-bulk{i % 20}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{i:05d}.jsonl").write_bytes(template)
    first = scan([folder], now=time.time() + 60)
    assert first.files_seen == 10_000 and len(first.cursor.files) == 10_000
    assert first.repos == ["bulk"]  # the cwd inside the files decides, not the folder name
    cursor = ScanCursor.decode(first.cursor.encode())
    assert len(cursor.files) == 10_000
    victim = folder / "-home-dev-src-bulk3" / "00003.jsonl"
    with open(victim, "ab") as fh:
        fh.write(_tool_lines(7))
    second = scan([folder], cursor, now=time.time() + 60)
    assert second.changed == {"bulk": [str(victim)]} and second.new_files == 0


def test_cursor_store_keeps_state_out_of_the_sensor_cursor(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    path = _session(folder, "alpha", "a1")
    store = CursorStore(tmp_path / "cursors")
    result = scan([folder], store.load(None))
    token = store.save(result.cursor)
    assert store.load(token) == result.cursor
    assert store.save(result.cursor) == token  # same state, same token, no new file
    assert scan([folder], store.load(token)).changed == {}
    assert store.load("no-such-token") == ScanCursor()  # a wiped data folder: everything is new again
    assert scan([folder], store.load("no-such-token")).changed == {"alpha": [str(path)]}
    for i in range(6):
        with open(path, "ab") as fh:
            fh.write(_tool_lines(i))
        store.save(scan([folder], store.load(token)).cursor)
    assert len(list((tmp_path / "cursors").glob("*.cursor"))) == CursorStore.KEEP


@pytest.mark.slow
def test_a_new_sensor_starts_no_run_for_files_already_ingested(watched: Path, bashgym_home: Path) -> None:
    """Issue 40: `make ui` after `make demo`: the sensor, ticking for the first time, ran the ingest of every
    repository the demo had just ingested. Files an ingest already read as they are now start nothing; a new
    repository, a changed file, and a partition rewritten since, do."""
    resources = {"bashgym": BashgymHome(home=str(bashgym_home))}
    defs = _per_repo_defs(resources)
    a1 = _session(watched, "alpha", "a1")
    _session(watched, "alpha", "a2", steps=3)
    _session(watched, "beta", "b1")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(repo_partitions.name, ["alpha", "beta"])  # as `bashgym demo` does
        job = defs.resolve_job_def("ingest_repo_job")
        assert job.execute_in_process(partition_key="alpha", instance=instance).success  # an earlier run

        fresh = dg.build_sensor_context(instance=instance, cursor=None, resources=resources)
        first = ingest_defs.trace_files_sensor(fresh)  # no cursor: every file is new to this sensor
        assert [r.partition_key for r in first.run_requests] == ["beta"]  # never ingested
        assert first.dynamic_partitions_requests == []
        assert first.skip_reason is None

        assert job.execute_in_process(partition_key="beta", instance=instance).success
        again = ingest_defs.trace_files_sensor(
            dg.build_sensor_context(instance=instance, cursor=None, resources=resources)
        )
        assert again.run_requests == []
        assert "2 repos already ingested as they are" in again.skip_reason.skip_message

        with open(a1, "ab") as fh:
            fh.write(_tool_lines(3))
        changed = ingest_defs.trace_files_sensor(
            dg.build_sensor_context(instance=instance, cursor=None, resources=resources)
        )
        assert [r.partition_key for r in changed.run_requests] == ["alpha"]
        assert changed.run_requests[0].tags["bashgym/changed_files"] == "1"  # only the file that changed
