"""benchmarks/generation_vs_transformers.py keeps running: its ``--quick`` mode on the tiny model, as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bashgym_assets.testing.tiny_model import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "generation_vs_transformers.py"
ROWS = (
    "ours: ContinuousDecoder (eval, serve)",
    "transformers: continuous batching",
    "transformers: generate, padded batch",
)


@pytest.mark.slow
def test_quick_run_compares_all_three_setups(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "tiny")
    out = tmp_path / "report.md"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--model", str(model), "--threads", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    header = next(line for line in run.stdout.splitlines() if line.startswith("| setup |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert "outputs identical to generate" in columns and "new tokens/s" in columns
    rows = {
        cells[0]: dict(zip(columns, cells, strict=True))
        for line in run.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| setup")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    assert set(rows) == set(ROWS), rows
    assert rows[ROWS[2]]["outputs identical to generate"] == "(reference)"
    for name in ROWS[:2]:
        assert re.fullmatch(r"\d+/4", rows[name]["outputs identical to generate"]), rows[name]
    for row in rows.values():
        assert int(row["new tokens"]) > 0 and float(row["new tokens/s"]) > 0
    report = out.read_text()
    assert report.startswith("# Generation:") and all(name in report for name in ROWS)
