"""The MLflow store of the data folder, opened the way its UI should show it (issue 32).

- **Every artifact inside the data folder.** MLflow creates its ``Default`` experiment the first time any client
  touches a new database, with the artifact location ``./mlruns/0`` of whatever directory that process ran in: a
  folder outside ``BASHGYM_HOME`` that ``bashgym move`` does not carry. ``prepare_store`` creates the database
  itself with the data folder's artifact root, and moves an existing ``Default`` that points elsewhere and holds
  no run.
- **Experiments say which page holds their content.** Experiments are created (or tagged) with their kind in
  ``mlflow.experimentKind``: ``custom_model_development`` for runs (training, evaluation), ``genai_development``
  for traces only (the rollouts' episodes, routed requests). ``prepare_store`` corrects the tag of the project's
  experiments in a store an older bashgym filled. MLflow 3.17's UI no longer reads that tag by itself (it opens
  every experiment on the page of a browser-wide "workflow type", GenAI unless chosen otherwise: issue 40); the
  UI that ``make mlflow`` serves reads it (``bashgym_assets.mlflow_ui``).
- **Two writers at once.** A pipeline and a training job may both miss an experiment and create it: the second
  reuses the first's instead of failing on the unique name.

Plain MLflow client calls; nothing here knows about Dagster.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from bashgym_assets import stopping
from bashgym_assets.config import DEFAULT_MLFLOW_UI_URL, Settings, get_settings, recorded_mlflow_ui_url

DEFAULT_UI_URL = DEFAULT_MLFLOW_UI_URL  # ``make mlflow`` with nothing configured
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
RUNS = "custom_model_development"  # training, evaluation: runs, metrics, registered models
TRACES = "genai_development"  # rollouts, routing: traces only
#: The project's experiments and their kinds (the names are the constants of training.registry,
#: evaluation.tracking and rollout.tracing; tests/test_mlflow_ui.py keeps them equal). Another name gets RUNS.
EXPERIMENT_KINDS = {
    "bashgym-training": RUNS,
    "bashgym-evaluation": RUNS,  # its runs, and the evaluation episodes' traces beside them
    "bashgym-rollouts": TRACES,
    "bashgym-routing": TRACES,
}

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
        from mlflow.tracking import MlflowClient

        fix_experiment_kinds(MlflowClient(tracking_uri=tracking_uri))
        _prepared.add(key)


def kind_of(name: str) -> str:
    """The kind an experiment of this name is created with (``EXPERIMENT_KINDS``, else RUNS)."""
    return EXPERIMENT_KINDS.get(name, RUNS)


def fix_experiment_kinds(client: Any) -> list[str]:
    """Tag the project's experiments (``EXPERIMENT_KINDS``) with their kind where the tag is missing or another (a
    store an older bashgym filled), and the Default experiment as RUNS where it has no kind; returns the names of
    the experiments changed. ``client``: an ``MlflowClient``."""
    from mlflow.exceptions import MlflowException

    changed = []
    for name, kind in EXPERIMENT_KINDS.items():
        exp = client.get_experiment_by_name(name)
        if exp is not None and (exp.tags or {}).get(EXPERIMENT_KIND_TAG) != kind:
            client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, kind)
            changed.append(name)
    try:
        default = client.get_experiment("0")
    except MlflowException:  # deleted for good: nothing to tag
        default = None
    if default is not None and EXPERIMENT_KIND_TAG not in (default.tags or {}):
        client.set_experiment_tag("0", EXPERIMENT_KIND_TAG, RUNS)
        changed.append(default.name)
    return changed


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


def get_or_create_experiment(
    client: Any, name: str, artifact_root: str | None, kind: str | None = None
) -> str:
    """The id of experiment ``name``, created with its kind tag (default ``kind_of(name)``) under
    ``artifact_root/name`` if missing (also when another writer creates it at the same moment); an existing
    experiment whose kind tag is missing or another gets this one."""
    from mlflow.exceptions import MlflowException

    kind = kind or kind_of(name)

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
    if (exp.tags or {}).get(EXPERIMENT_KIND_TAG) != kind:
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, kind)
    return exp.experiment_id


def experiment_id(c: Any, name: str, settings: Settings) -> str:
    """Training and evaluation experiments: they hold runs and models."""
    return get_or_create_experiment(c, name, settings.mlflow_artifact_root)


def client(settings: Settings | None = None) -> Any:
    """An explicit ``MlflowClient`` on the data folder's store (``Settings.mlflow_tracking_uri``), prepared."""
    from mlflow.tracking import MlflowClient

    settings = settings or get_settings()
    settings.mlflow_dir.mkdir(parents=True, exist_ok=True)
    prepare_store(settings.mlflow_tracking_uri, settings.mlflow_artifact_root)
    return MlflowClient(tracking_uri=settings.mlflow_tracking_uri, registry_uri=settings.mlflow_tracking_uri)


def ui_base_url(tracking_uri: str, settings: Settings | None = None) -> str:
    """Where a person opens the MLflow UI for ``tracking_uri``: ``BASHGYM_MLFLOW_UI_URL`` when set; the tracking
    server itself for an http(s) tracking URI; otherwise (SQLite or Postgres: no server of their own) where the last
    ``make mlflow`` served the store (recorded beside a SQLite database; ``Settings.mlflow_ui_url``), else
    ``make mlflow``'s default http://127.0.0.1:5000."""
    settings = settings or get_settings()
    if settings.mlflow_ui_url_override:
        return settings.mlflow_ui_url
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/")
    if tracking_uri.startswith(
        "sqlite:///"
    ):  # the record beside the database, whichever data folder it is in
        db = Path(tracking_uri.removeprefix("sqlite:///"))
        return recorded_mlflow_ui_url(db.parent) or DEFAULT_MLFLOW_UI_URL
    return settings.mlflow_ui_url


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """A run's page in the MLflow UI (``ui_base_url``)."""
    return f"{ui_base_url(tracking_uri)}/#/experiments/{experiment_id}/runs/{run_id}"


# ---- a stopped command's runs end with it ------------------------------------------------------------------------
KILLED_TAG = "bashgym/killed"  # why bashgym ended a run as KILLED (a stop, or the dead-run reaper)
_RUN_TAGS = (
    "bashgym/pid",
    "bashgym/pid_start",
    "bashgym/host",
    "bashgym/boot",
    "bashgym/pidns",
    "dagster_run_id",
)


def _runs_to_look_at(settings: Settings, since_ms: int) -> list[tuple[str, str, str, dict[str, str]]] | None:
    """(run id, name, status, tags) of the runs RUNNING or ended since ``since_ms``, read from the data folder's
    SQLite store with sqlite3 (importing MLflow costs seconds); None for another store or an unreadable file."""
    if settings.mlflow_tracking_uri_override:
        return None
    db = settings.mlflow_dir / "mlflow.db"
    if not db.is_file():
        return []
    picks = ", ".join(
        f"(SELECT value FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = '{key}')" for key in _RUN_TAGS
    )
    try:
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            rows = con.execute(
                f"SELECT r.run_uuid, r.name, r.status, {picks} FROM runs r "
                "WHERE r.status = 'RUNNING' OR r.end_time >= ?",
                (since_ms,),
            ).fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError as exc:
        return [] if "no such table" in str(exc) else None
    return [
        (
            row[0],
            row[1] or "",
            row[2],
            {k: v for k, v in zip(_RUN_TAGS, row[3:], strict=True) if v is not None},
        )
        for row in rows
    ]


def end_runs_of_stopped_command(ctx: stopping.StopContext, settings: Settings | None = None) -> list[str]:
    """A stopped command's MLflow runs (``stopping.on_signals``): the ones still RUNNING that its processes
    write (their process tags) or that belong to its Dagster runs (``dagster_run_id``) are ended as KILLED, with
    the reason in ``bashgym/killed``; the ones its processes ended themselves on the way out are named too."""
    settings = settings or get_settings()
    runs = _runs_to_look_at(settings, int(ctx.stopped_at * 1000) - 1000)

    def ours(tags: dict[str, str]) -> bool:
        return ctx.owns_tags(tags) or tags.get("dagster_run_id", "") in ctx.dagster_run_ids

    if runs is None:  # a tracking server or Postgres: ask it for the RUNNING ones
        from mlflow.entities import ViewType

        c = client(settings)
        experiments = [e.experiment_id for e in c.search_experiments(view_type=ViewType.ALL)]
        found = c.search_runs(
            experiments, filter_string="attributes.status = 'RUNNING'", run_view_type=ViewType.ALL
        )
        runs = [(r.info.run_id, r.info.run_name or "", r.info.status, dict(r.data.tags)) for r in found]
    said: list[str] = []
    mine = [(run_id, name, status) for run_id, name, status, tags in runs if ours(tags)]
    if any(status == "RUNNING" for *_, status in mine):
        c = client(settings)  # MLflow is imported only when there is a run to end (seconds)
    for run_id, name, status in mine:
        if status == "RUNNING":
            c.set_tag(run_id, KILLED_TAG, ctx.reason)
            c.set_terminated(run_id, "KILLED")
            said.append(f"MLflow run {run_id[:8]} ({name}) ended as KILLED")
        else:
            said.append(f"MLflow run {run_id[:8]} ({name}) ended {status}")
    return said


stopping.register_cleanup("MLflow runs", end_runs_of_stopped_command, order=30)
