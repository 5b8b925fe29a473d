"""A data folder can be moved (issue 31): after ``bashgym move`` / ``bashgym relocate`` MLflow and Dagster read and
write under the new folder only, and the old one can be deleted.

Real stores, built by the project's own code in a separate process: an MLflow SQLite store with an experiment, a
training run with a dataset input, live metrics and a registered adapter version (a pyfunc model with its artifacts),
a Dagster SQLite instance with a materialization whose metadata names lake and adapter paths, an adapter folder
with PEFT's ``adapter_config.json``, a lake table holding a path. Before the fix, a copied folder went on writing
into the old one: a new run's artifacts, the adapter's base model and Dagster's recorded paths all named it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bashgym_assets.config import PROJECT_ROOT
from bashgym_assets.relocate import find_references

BUILD = """
import json
import dagster as dg
from bashgym_assets.config import get_settings
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.instance import ensure_dagster_home
from bashgym_assets.lake import Lake
from bashgym_assets.training import registry

settings = get_settings()
ensure_dagster_home(settings)
lake = Lake(settings)
adapter = lake.artifact_dir("adapters", "sft-x")
(adapter / "adapter_config.json").write_text(json.dumps(
    {"base_model_name_or_path": str(settings.models_dir / "smollm2"), "r": 8, "peft_type": "LORA"}))
(adapter / "adapter_model.safetensors").write_bytes(bytes(64))
lake.write("sft_runs", [{"run": "sft-x", "adapter_dir": str(adapter)}])

@dg.asset
def sft_adapter(context: dg.AssetExecutionContext, bashgym: BashgymHome) -> dg.MaterializeResult:
    s = bashgym.settings()
    rid = registry.start_training_run(kind="sft", run_name="sft-x", tags={"dagster_run_id": context.run_id},
                                      settings=s)
    registry.log_dataset_inputs(rid, name="sft_dataset", version="v1", splits={"train": [{"text": "ls"}]},
                                source=str(bashgym.lake().table_path("sft_runs")), settings=s)
    registry.LiveMetrics(rid, s)({"step": 1, "loss": 2.0})
    reg = registry.log_training_run(kind="sft", run_name="sft-x", params={"adapter": str(adapter)},
                                    history=[{"step": 1, "loss": 2.0}], summary={"loss": 2.0},
                                    adapter_dir=str(adapter), tags={}, settings=s, run_id=rid)
    return dg.MaterializeResult(metadata={"adapter_dir": dg.MetadataValue.path(str(adapter)),
                                          "table": dg.MetadataValue.path(str(bashgym.lake().table_path("sft_runs"))),
                                          "model_uri": reg.model_uri})

assert dg.materialize([sft_adapter], resources={"bashgym": BashgymHome()},
                      instance=dg.DagsterInstance.get()).success
"""

CHECK = """
import json, sys
from pathlib import Path
import dagster as dg
from bashgym_assets.config import get_settings
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.instance import ensure_dagster_home
from bashgym_assets.training import registry

settings = get_settings()
ensure_dagster_home(settings)
c = registry.client(settings)
out = {}
exp = c.get_experiment_by_name("bashgym-training")
out["experiment_artifacts"] = exp.artifact_location
(old_run,) = c.search_runs([exp.experiment_id])
out["old_run_artifacts"] = old_run.info.artifact_uri
out["old_run_files"] = sorted(f.path for f in c.list_artifacts(old_run.info.run_id))
# read: the registered adapter's files, through the registry
dst = Path(sys.argv[1])
registry.download_adapter("models:/bashgym-operator/1", dst, settings)
out["downloaded_base"] = json.loads(next(dst.rglob("adapter_config.json")).read_text())["base_model_name_or_path"]
# write: a new run with an artifact, in the moved experiment
rid = registry.start_training_run(kind="sft", run_name="after-move", tags={}, settings=settings)
c.log_text(rid, "written after the move", "note.txt")
c.set_terminated(rid)
out["new_run_artifacts"] = c.get_run(rid).info.artifact_uri
adapter = settings.artifacts_dir / "adapters" / "sft-x"
out["adapter_base"] = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]

with dg.DagsterInstance.get() as instance:
    meta = instance.get_latest_materialization_event(dg.AssetKey("sft_adapter")).asset_materialization.metadata
    out["dagster_paths"] = [meta["adapter_dir"].value, meta["table"].value]

    @dg.asset
    def after_move(bashgym: BashgymHome) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(bashgym.lake().write(
            "after_move", [{"x": 1}])))})

    assert dg.materialize([after_move], resources={"bashgym": BashgymHome()}, instance=instance).success
    out["runs"] = len(instance.get_runs())
print("RESULT " + json.dumps(out))
"""


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "BASHGYM_HOME": str(home), "PYTHONPATH": str(PROJECT_ROOT), "BASHGYM_TRACES": "0"}
    env.pop("DAGSTER_HOME", None)
    return env


def _python(home: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, *args], env=_env(home), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _bashgym(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bashgym_assets.cli", *args],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def built_once(tmp_path_factory: pytest.TempPathFactory, empty_mlflow_store: Path) -> tuple[Path, Path]:
    """The data folder ``BUILD`` fills (a process that trains, registers and materializes: seconds), built once for
    the module: (the folder, a copy of it as built). Every path in it names the folder's own path."""
    root = tmp_path_factory.mktemp("relocate")
    home = root / "old" / "home"
    (home / "mlflow").mkdir(parents=True)
    shutil.copy(empty_mlflow_store, home / "mlflow" / "mlflow.db")
    _python(home, "-c", BUILD)
    as_built = root / "as-built"
    shutil.copytree(home, as_built, symlinks=True)
    return home, as_built


@pytest.fixture
def built(built_once: tuple[Path, Path]) -> Path:
    """The built data folder, as built and at the path it was built at (a test moves or deletes it)."""
    home, as_built = built_once
    shutil.rmtree(home.parent, ignore_errors=True)
    shutil.copytree(as_built, home, symlinks=True)
    return home


def _holds_old_path(home: Path, old: Path) -> None:
    """The raw bytes of every file and every SQLite value under ``home``: none names ``old``."""
    needle = str(old).encode()
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert needle not in path.read_bytes(), path
    for db in home.rglob("*.db"):
        con = sqlite3.connect(db)
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            for row in con.execute(f'SELECT * FROM "{table}"'):
                assert not any(isinstance(v, str) and str(old) in v for v in row), (db, table, row)
        con.close()


def _check_fresh_process(home: Path, old: Path, tmp_path: Path) -> dict:
    done = _python(home, "-c", CHECK, str(tmp_path / "download"))
    out = json.loads(done.stdout.split("RESULT ", 1)[1])
    uri = home.as_uri()
    assert out["experiment_artifacts"].startswith(uri + "/mlflow/artifacts/")
    assert out["old_run_artifacts"].startswith(uri + "/mlflow/artifacts/")
    assert out["new_run_artifacts"].startswith(uri + "/mlflow/artifacts/")
    assert "note.txt" not in out["old_run_files"]
    assert out["downloaded_base"] == out["adapter_base"] == str(home / "models" / "smollm2")
    assert out["dagster_paths"] == [
        str(home / "artifacts" / "adapters" / "sft-x"),
        str(home / "lake" / "sft_runs" / "__all__.parquet"),
    ]
    assert out["runs"] == 2
    assert not old.exists(), "something wrote into the old folder"
    assert find_references(home, old) == ([], [])
    return out


@pytest.mark.slow
def test_move_copy_then_the_old_folder_can_be_deleted(built: Path, tmp_path: Path) -> None:
    new = tmp_path / "new" / "home"
    moved = _bashgym(built, "move", str(new), "--copy")
    assert moved.returncode == 0, moved.stderr
    assert "rewrote mlflow/mlflow.db: sqlite experiments.artifact_location" in moved.stdout
    assert "rewrote artifacts/adapters/sft-x/adapter_config.json: text" in moved.stdout
    assert "parquet column adapter_dir" in moved.stdout and "index.db: sqlite" in moved.stdout
    assert f"export BASHGYM_HOME={new}" in moved.stdout
    assert find_references(built, built)[0], "--copy leaves the old folder as it was"
    shutil.rmtree(built.parent)
    _holds_old_path(new, built)
    _check_fresh_process(new, built, tmp_path)


@pytest.mark.slow
def test_a_hand_copied_folder_is_detected_relocated_and_then_moved(built: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copied"
    shutil.copytree(built, copy, symlinks=True)
    where = _bashgym(copy, "where")
    assert where.returncode == 0
    assert f"warning: the data folder {copy} was at {built}" in where.stderr
    assert "bashgym relocate" in where.stderr
    relocated = _bashgym(copy, "relocate")
    assert relocated.returncode == 0, relocated.stderr
    assert f"now point at {copy}; nothing readable under it names {built}" in relocated.stdout
    assert "warning" not in _bashgym(copy, "where").stderr
    assert find_references(built, built)[0], "the original is left as it was"

    final = tmp_path / "final" / "home"
    moved = _bashgym(copy, "move", str(final))  # a plain move: a rename on one file system
    assert moved.returncode == 0, moved.stderr
    assert f"moved {copy} -> {final}" in moved.stdout and not copy.exists()
    shutil.rmtree(built.parent)
    _holds_old_path(final, copy)
    _check_fresh_process(final, copy, tmp_path)
    assert "warning" not in _bashgym(final, "where").stderr


def test_move_refuses_while_another_process_has_the_folder_open(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "mlflow").mkdir(parents=True)
    db = home / "mlflow" / "mlflow.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('select * from t').fetchall(); print('open', flush=True); time.sleep(300)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        refused = _bashgym(home, "move", str(tmp_path / "new"))
        assert refused.returncode == 1
        assert f"pid {reader.pid}" in refused.stderr and "mlflow.db" in refused.stderr, refused.stderr
        assert home.is_dir() and not (tmp_path / "new").exists()
    finally:
        reader.kill()
        reader.wait()
    assert _bashgym(home, "move", str(tmp_path / "new")).returncode == 0
    assert (tmp_path / "new" / "mlflow" / "mlflow.db").is_file() and not home.exists()
