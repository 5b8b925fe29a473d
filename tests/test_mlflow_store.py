"""The data folder's MLflow store as its UI should show it (issue 32): no artifact outside the data folder, each
experiment tagged with the kind of page that holds its content, two writers creating one experiment at once.

Real MLflow SQLite stores; a bare ``MlflowClient`` plays the older bashgym (or a user) that created a store first.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bashgym_assets import mlflow_store
from bashgym_assets.config import Settings
from bashgym_assets.rollout import tracing
from bashgym_assets.training import registry


def _default_location(settings: Settings) -> str:
    with sqlite3.connect(settings.mlflow_dir / "mlflow.db") as db:
        return db.execute("SELECT artifact_location FROM experiments WHERE experiment_id = 0").fetchone()[0]


@pytest.mark.slow
def test_a_new_store_keeps_the_default_experiment_in_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where MLflow would have put ./mlruns
    settings = Settings(home=tmp_path / "home")
    c = registry.client(settings)
    assert c.get_experiment("0").artifact_location == f"{settings.mlflow_artifact_uri}/0"
    run_id = registry.start_training_run(kind="sft", run_name="r", tags={}, settings=settings)
    assert c.get_run(run_id).info.artifact_uri.startswith(settings.mlflow_artifact_uri)
    assert not (tmp_path / "mlruns").exists()


@pytest.mark.slow
def test_an_older_stores_empty_default_is_moved_in_but_one_with_runs_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow import MlflowClient

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    empty, used = Settings(home=tmp_path / "empty"), Settings(home=tmp_path / "used")
    for settings in (empty, used):
        settings.mlflow_dir.mkdir(parents=True)
        MlflowClient(tracking_uri=settings.mlflow_tracking_uri).search_experiments()  # Default at ./mlruns/0
        assert not _default_location(settings).startswith(settings.mlflow_artifact_uri)
    MlflowClient(tracking_uri=used.mlflow_tracking_uri).create_run("0")
    before = _default_location(used)

    registry.client(empty)
    registry.client(used)
    assert _default_location(empty) == f"{empty.mlflow_artifact_uri}/0"
    assert _default_location(used) == before  # its run's artifacts live there


@pytest.mark.slow
def test_experiments_carry_the_kind_of_page_that_shows_their_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(home=tmp_path / "home")
    c = registry.client(settings)
    legacy = c.create_experiment("bashgym-evaluation")  # made by an older bashgym: no kind
    registry.start_training_run(kind="sft", run_name="r", tags={}, settings=settings)
    assert registry.experiment_id(c, "bashgym-evaluation", settings) == legacy

    sink = tracing.TraceSink(settings.mlflow_tracking_uri, settings.mlflow_artifact_root)
    sink.experiment_id(tracing.ROLLOUT_EXPERIMENT)
    kinds = {e.name: e.tags.get(mlflow_store.EXPERIMENT_KIND_TAG) for e in c.search_experiments()}
    assert kinds["bashgym-training"] == "custom_model_development"
    assert kinds["bashgym-evaluation"] == "custom_model_development"
    assert kinds[tracing.ROLLOUT_EXPERIMENT] == "genai_development"
    rollouts = c.get_experiment_by_name(tracing.ROLLOUT_EXPERIMENT).artifact_location
    assert rollouts == f"{settings.mlflow_artifact_uri}/{tracing.ROLLOUT_EXPERIMENT}"
