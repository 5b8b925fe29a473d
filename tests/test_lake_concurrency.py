"""Concurrent writers never lose a row: 80 promotion decisions recorded at once by 8 processes are 80 rows
(the read-modify-write without a lock kept 18-24 of 80), and tier overrides set at once all survive."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from bashgym_assets.config import Settings
from bashgym_assets.evaluation.promotion import PairedTest, PromotionDecision
from bashgym_assets.evaluation.tracking import record_decision
from bashgym_assets.lake import Lake


def _decision(n: int) -> PromotionDecision:
    return PromotionDecision(
        promote=False,
        reason=f"decision {n}",
        incumbent="base",
        candidate_rates={"clean": 0.1},
        incumbent_rates={"clean": 0.0},
        rule="test",
        decided_at=f"2026-11-26T00:00:{n:02d}",
        test=PairedTest(scenarios=1, candidate_better=0, incumbent_better=0, ties=1, p_value=1.0),
    )


def _record_ten(home: str, worker: int, start: mp.Event) -> None:
    lake = Lake(Settings(home=Path(home)))
    start.wait()
    for k in range(10):
        record_decision(lake, _decision(worker * 10 + k), eval_id=f"eval-{worker}-{k}", action="keep")


def test_80_concurrent_decisions_are_80_rows(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_record_ten, args=(str(tmp_path), w, start)) for w in range(8)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rows = Lake(Settings(home=tmp_path)).read_rows("promotion_decisions")
    assert len(rows) == 80
    assert sorted(r["eval_id"] for r in rows) == sorted(f"eval-{w}-{k}" for w in range(8) for k in range(10))


def test_append_adds_to_a_partition_and_creates_it(tmp_path: Path) -> None:
    lake = Lake(Settings(home=tmp_path))
    lake.append("things", [{"a": 1}])
    lake.append("things", [{"a": 2}, {"a": 3}])
    assert [r["a"] for r in lake.read_rows("things")] == [1, 2, 3]
    assert lake.assets() == ["things"]  # the lock folder is not an asset


def test_reads_during_rewrites_never_fail(tmp_path: Path) -> None:
    """A partition replaced over and over while it is read: every read gets one whole version."""
    import threading

    lake = Lake(Settings(home=tmp_path))
    versions = [
        [{"n": v, "text": f"row {i} of version {v} " * 20} for i in range(2000 + 37 * v)] for v in range(4)
    ]
    lake.write("busy", versions[0])
    stop = threading.Event()

    def rewrite() -> None:
        v = 0
        while not stop.is_set():
            v = (v + 1) % len(versions)
            lake.write("busy", versions[v])

    writer = threading.Thread(target=rewrite)
    writer.start()
    failures, sizes = [], set()
    try:
        for _ in range(400):
            try:
                table = lake.read("busy")
                sizes.add(table.num_rows)
                assert len(set(table.column("n").to_pylist())) == 1  # one version, never a mix
            except Exception as exc:  # noqa: BLE001 - counted: any failed read is the bug
                failures.append(repr(exc))
    finally:
        stop.set()
        writer.join()
    assert not failures, failures[:3]
    assert sizes <= {len(v) for v in versions}


def test_a_truncated_partition_is_quarantined_and_every_other_query_still_answers(tmp_path: Path) -> None:
    lake = Lake(Settings(home=tmp_path))
    lake.write("tiered_traces", [{"tier": "gold", "n": i} for i in range(50)], partition="repo-a")
    lake.write("tiered_traces", [{"tier": "silver", "n": i} for i in range(30)], partition="repo-b")
    lake.write("gated_scenarios", [{"scenario_id": "x"}])
    bad = lake.table_path("tiered_traces", "repo-b")
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])  # a crash mid-copy, a full disk
    con = lake.connect()
    assert con.execute("select count(*) from gated_scenarios").fetchone()[0] == 1
    assert con.execute("select count(*), min(_partition) from tiered_traces").fetchone() == (50, "repo-a")
    ((asset, file, reason),) = con.execute("select * from lake_quarantine").fetchall()
    assert asset == "tiered_traces" and file == str(bad) and reason
    assert [q[0] for q in lake.quarantined] == ["tiered_traces"]
