"""The notebooks run top to bottom with nbclient on a lake that has only the trace half of the pipeline.

The lake: the bundled sample traces (one line broken on purpose, so there is something in quarantine) ingested,
then redacted_sessions, its blocking check and tiered_traces materialized with Dagster for every repository.
The traces notebook then works on real tables; the training notebook finds no dataset, MLflow store or
evaluation and must say so in every section instead of raising. CI also runs both on the full demo lake
(``make notebooks`` after ``make demo``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import nbformat
import pytest

from bashgym_assets import notebooks as nbrun
from bashgym_assets.config import Settings
from bashgym_assets.defs.privacy import no_secrets_left, redacted_sessions
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.defs.tiers import tiered_traces
from bashgym_assets.ingest import SAMPLE_TRACES_DIR
from bashgym_assets.ingest.pipeline import discover_repos, ingest_repo
from bashgym_assets.lake import Lake

pytestmark = pytest.mark.slow

BROKEN_LINE = '{"type": "user", "message": {"content": "cut off\n'


def _traces_only_lake(settings: Settings, tmp_path: Path) -> list[str]:
    traces = tmp_path / "traces"
    shutil.copytree(SAMPLE_TRACES_DIR, traces)
    victim = sorted(traces.glob("*webshop/*.jsonl"))[0]
    lines = victim.read_text().splitlines(keepends=True)
    victim.write_text("".join(lines[:2]) + BROKEN_LINE + "".join(lines[2:]))
    lake = Lake(settings)
    repos = discover_repos([traces])
    for repo in repos:
        ingest_repo(lake, [traces], repo)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("repos", repos)
        for repo in repos:
            result = dg.materialize(
                [redacted_sessions, no_secrets_left, tiered_traces],
                partition_key=repo,
                instance=instance,
                resources={"bashgym": BashgymHome(home=str(settings.home))},
            )
            assert result.success
    return repos


def _outputs(path: str) -> tuple[str, int]:
    """All text the notebook printed or displayed, and how many figures it drew."""
    nb = nbformat.read(path, as_version=4)
    text, figures = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.output_type != "error", out
            if out.output_type == "stream":
                text.append(out.text)
            elif "data" in out:
                figures += "image/png" in out.data
                text.append(out.data.get("text/markdown", "") + out.data.get("text/plain", ""))
    return "\n".join(text), figures


def test_notebooks_run_on_a_traces_only_lake(settings: Settings, tmp_path: Path) -> None:
    repos = _traces_only_lake(settings, tmp_path)
    names = {p.name for p in nbrun.notebooks()}
    assert {"traces.ipynb", "training.ipynb"} <= names

    out = tmp_path / "executed"
    assert (
        nbrun.main(
            [
                *map(str, nbrun.notebooks()),
                "--home",
                str(settings.home),
                "--out",
                str(out),
                "--timeout",
                "120",
            ]
        )
        == 0
    )
    traces, traces_figures = _outputs(str(out / "traces.ipynb"))
    assert all(repo in traces for repo in repos)
    assert "invalid JSON" in traces  # the broken line, in the quarantine section
    assert "distinct_values" in traces and "AWS_ACCESS_KEY" in traces  # the redaction report, by type
    assert traces_figures >= 3  # tiers, redaction, quarantine
    assert "skipped" not in traces

    training, _ = _outputs(str(out / "training.ipynb"))
    for missing in ("gated_scenarios", "sft_dataset", "dpo_dataset", "eval_episodes"):
        assert f"skipped: {missing} not materialized yet" in training
    assert "no MLflow store yet" in training
    assert not (settings.home / "mlflow" / "mlflow.db").exists()  # reading never creates the store


def test_a_failing_cell_fails_the_run(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("print('fine')"),
            nbformat.v4.new_code_cell("raise RuntimeError('this notebook rotted')"),
            nbformat.v4.new_code_cell("print('never reached')"),
        ]
    )
    path = tmp_path / "rotten.ipynb"
    nbformat.write(nb, path)
    assert (
        nbrun.main(
            [str(path), "--home", str(settings.home), "--out", str(tmp_path / "out"), "--timeout", "60"]
        )
        == 1
    )
    assert "FAILED rotten.ipynb" in capsys.readouterr().out.replace("  ", " ")
    executed = json.loads((tmp_path / "out" / "rotten.ipynb").read_text())  # saved with the error in it
    assert [o["output_type"] for c in executed["cells"] for o in c["outputs"]] == ["stream", "error"]
    assert executed["cells"][1]["outputs"][0]["evalue"] == "this notebook rotted"
