"""The MLflow store of the data folder, opened the way its UI should show it (issue 32).

- **Every artifact inside the data folder.** MLflow creates its ``Default`` experiment the first time any client
  touches a new database, with the artifact location ``./mlruns/0`` of whatever directory that process ran in: a
  folder outside ``BASHGYM_HOME`` that ``bashgym move`` does not carry. ``prepare_store`` creates the database
  itself with the data folder's artifact root, and moves an existing ``Default`` that points elsewhere and holds
  no run.
- **Experiments open on the page that holds their content.** With no ``mlflow.experimentKind`` tag, MLflow 3's UI
  guesses, and opened the training and evaluation experiments (runs, models) on an empty GenAI dashboard with the
  runs under "Model training". Experiments are created (or tagged) with their kind: ``custom_model_development``
  for runs, ``genai_development`` for the episode traces of the rollouts.
- **Two writers at once.** A pipeline and a training job may both miss an experiment and create it: the second
  reuses the first's instead of failing on the unique name.

Plain MLflow client calls; nothing here knows about Dagster.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any

from bashgym_assets.config import Settings, get_settings

DEFAULT_UI_URL = "http://127.0.0.1:5000"  # ``make mlflow``
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
RUNS = "custom_model_development"  # training, evaluation: runs, metrics, registered models
TRACES = "genai_development"  # rollouts: episode traces only

_prepared: set[tuple[str, str | None]] = set()
_lock = threading.Lock()


def prepare_store(tracking_uri: str, artifact_root: str | None) -> None:
    """Create the database with ``artifact_root`` as the Default experiment's home, once per process and store;
    a tracking server (http) owns its own store and is left alone."""
    key = (tracking_uri, artifact_root)
    if key in _prepared or tracking_uri.startswith(("http://", "https://")) or not artifact_root:
        return
    with _lock:
        if key in _prepared:
            return
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        # creates the schema and the Default experiment at <artifact_root>/0 when the database is new
        SqlAlchemyStore(tracking_uri, artifact_root)
        if tracking_uri.startswith("sqlite:///"):
            _move_empty_default(tracking_uri.removeprefix("sqlite:///"), artifact_root)
        _prepared.add(key)


def _move_empty_default(db_path: str, artifact_root: str) -> None:
    """A store created by an older bashgym (or a bare ``MlflowClient``) has its Default experiment in the creating
    process's ``./mlruns``: point it into the data folder while it holds no run. Raw SQL because MLflow has no API
    that changes an experiment's artifact location."""
    target = f"{artifact_root.rstrip('/')}/0"
    with sqlite3.connect(db_path, timeout=30) as db:
        row = db.execute("SELECT artifact_location FROM experiments WHERE experiment_id = 0").fetchone()
        if row is None or row[0] == target or row[0].startswith(artifact_root):
            return
        if db.execute("SELECT 1 FROM runs WHERE experiment_id = 0 LIMIT 1").fetchone() is not None:
            return  # its runs' artifacts live where it points: moving the pointer would lose them
        db.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0", (target,))


def get_or_create_experiment(client: Any, name: str, artifact_root: str | None, kind: str = RUNS) -> str:
    """The id of experiment ``name``, created with its kind tag under ``artifact_root/name`` if missing (also when
    another writer creates it at the same moment); an existing experiment without a kind tag gets one."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            return client.create_experiment(
                name,
                artifact_location=f"{artifact_root}/{name}" if artifact_root else None,
                tags={EXPERIMENT_KIND_TAG: kind},
            )
        except MlflowException:
            # two writers starting at once (a pipeline and a training job): the other one created it meanwhile
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if EXPERIMENT_KIND_TAG not in (exp.tags or {}):
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, kind)
    return exp.experiment_id


def experiment_id(c: Any, name: str, settings: Settings) -> str:
    """Training and evaluation experiments: they hold runs and models."""
    return get_or_create_experiment(c, name, settings.mlflow_artifact_root, RUNS)


def client(settings: Settings | None = None) -> Any:
    """An explicit ``MlflowClient`` on the data folder's store (``Settings.mlflow_tracking_uri``), prepared."""
    from mlflow.tracking import MlflowClient

    settings = settings or get_settings()
    settings.mlflow_dir.mkdir(parents=True, exist_ok=True)
    prepare_store(settings.mlflow_tracking_uri, settings.mlflow_artifact_root)
    return MlflowClient(tracking_uri=settings.mlflow_tracking_uri, registry_uri=settings.mlflow_tracking_uri)


def ui_base_url(tracking_uri: str) -> str:
    """Where a person opens the MLflow UI for ``tracking_uri``: ``BASHGYM_MLFLOW_UI_URL`` when set; the tracking
    server itself for an http(s) tracking URI; otherwise (SQLite or file store: no server of its own) the address
    ``make mlflow`` serves it on, http://127.0.0.1:5000."""
    configured = os.environ.get("BASHGYM_MLFLOW_UI_URL", "").strip()
    if configured:
        return configured.rstrip("/")
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/")
    return DEFAULT_UI_URL


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """A run's page in the MLflow UI (``ui_base_url``)."""
    return f"{ui_base_url(tracking_uri)}/#/experiments/{experiment_id}/runs/{run_id}"
