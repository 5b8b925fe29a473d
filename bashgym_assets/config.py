"""Settings read from the environment, with embedded defaults that run offline on one machine.

Every path the platform writes lives under one data folder (``BASHGYM_HOME``, default ``.bashgym/`` in the
project), so a whole installation can be moved, backed up or wiped as one folder.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, Field

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value).expanduser().resolve() if value else default


def with_psycopg2(uri: str) -> str:
    """``postgresql://`` or ``postgres://`` -> ``postgresql+psycopg2://``: SQLAlchemy 2.1 opens a bare Postgres URL
    with psycopg 3, which is not installed; psycopg2 is (the driver dagster-postgres is written for)."""
    for bare in ("postgresql://", "postgres://"):
        if uri.startswith(bare):
            return "postgresql+psycopg2://" + uri[len(bare) :]
    return uri


def redact_uri(uri: str) -> str:
    """The URI with its password (if any) as ``***``: for logs, messages and asset metadata."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(uri)
    if not parts.password:
        return uri
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _env_paths(name: str, default: list[Path]) -> list[Path]:
    value = os.environ.get(name)
    if not value:
        return default
    return [Path(p).expanduser().resolve() for p in value.split(os.pathsep) if p.strip()]


class Settings(BaseModel):
    """Where bashgym keeps its data and which models and executors it uses.

    Environment variables (all optional):

    ``BASHGYM_HOME``            data folder (parquet lake, DuckDB, Dagster instance, MLflow, adapters, images)
    ``BASHGYM_TRACE_DIRS``      ``:``-separated folders of agent session logs (default ``~/.claude/projects``
                                plus the live-capture folder ``$BASHGYM_HOME/traces``)
    ``BASHGYM_TEACHER_MODEL``   litellm model string for authoring and rollouts (e.g. ``anthropic/claude-...``,
                                ``ollama/qwen2.5:32b``, ``openai/<name>`` with ``BASHGYM_TEACHER_API_BASE``)
    ``BASHGYM_TEACHER_API_BASE`` base URL of an OpenAI-compatible server for the teacher
    ``BASHGYM_BASE_MODEL``      local folder or hub id of the base model (default: offline SmolLM2-135M-Instruct)
    ``BASHGYM_GPU_EXECUTOR``    ``in_process`` (default) or ``docker`` for the GPU code location
    ``BASHGYM_SANDBOX_IMAGE``   override the sandbox image tag (default: derived from ``sandbox_images/``)
    ``BASHGYM_EVAL_SUITE_DIRS`` ``:``-separated folders of external shell-task suites (Terminal-Bench 1.x,
                                Harbor 2.x) imported as evaluation-only scenarios (``ext-`` ids, always held out)
    ``BASHGYM_MLFLOW_TRACKING_URI`` MLflow tracking and registry store (default: SQLite in the data folder);
                                e.g. ``postgresql://user:pw@host:5432/mlflow`` (opened with psycopg2) or an
                                ``http://host:5000`` tracking server
    ``BASHGYM_DAGSTER_PG_URL``  ``postgresql+psycopg2://user:pw@host:5432/dagster`` for the Dagster instance (runs,
                                event log, schedules); unset: SQLite files in DAGSTER_HOME (``bashgym_assets.instance``)
    ``BASHGYM_RUN_LAUNCHER``    ``default`` (runs in a local process) or ``docker`` (dagster-docker's
                                ``DockerRunLauncher``: every run in its own trainer-image container)
    """

    home: Path = Field(default_factory=lambda: _env_path("BASHGYM_HOME", PROJECT_ROOT / ".bashgym"))
    trace_dirs_override: list[Path] | None = Field(
        default_factory=lambda: _env_paths("BASHGYM_TRACE_DIRS", []) or None
    )
    teacher_model: str = Field(default_factory=lambda: os.environ.get("BASHGYM_TEACHER_MODEL", "reference"))
    teacher_api_base: str | None = Field(default_factory=lambda: os.environ.get("BASHGYM_TEACHER_API_BASE"))
    base_model: str | None = Field(default_factory=lambda: os.environ.get("BASHGYM_BASE_MODEL"))
    gpu_executor: str = Field(default_factory=lambda: os.environ.get("BASHGYM_GPU_EXECUTOR", "in_process"))
    sandbox_image_override: str | None = Field(
        default_factory=lambda: os.environ.get("BASHGYM_SANDBOX_IMAGE")
    )
    eval_suite_dirs: list[Path] = Field(default_factory=lambda: _env_paths("BASHGYM_EVAL_SUITE_DIRS", []))
    # URLs that may carry a password: kept out of repr (logs, tracebacks)
    mlflow_tracking_uri_override: str | None = Field(
        default_factory=lambda: os.environ.get("BASHGYM_MLFLOW_TRACKING_URI", "").strip() or None, repr=False
    )
    dagster_pg_url: str | None = Field(
        default_factory=lambda: os.environ.get("BASHGYM_DAGSTER_PG_URL", "").strip() or None, repr=False
    )
    run_launcher: str = Field(
        default_factory=lambda: os.environ.get("BASHGYM_RUN_LAUNCHER", "").strip() or "default"
    )

    model_config = {"frozen": True}

    # ---- folders under the data home -------------------------------------------------------------------
    @cached_property
    def lake_dir(self) -> Path:
        """Parquet tables: ``lake/<asset>/<partition>.parquet``."""
        return self.home / "lake"

    @cached_property
    def artifacts_dir(self) -> Path:
        """Large artifacts (adapters, model folders, reports): ``artifacts/<kind>/<name>/``."""
        return self.home / "artifacts"

    @cached_property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    @cached_property
    def mlflow_dir(self) -> Path:
        return self.home / "mlflow"

    @property
    def mlflow_tracking_uri(self) -> str:
        """``BASHGYM_MLFLOW_TRACKING_URI`` (Postgres, a tracking server), else an absolute SQLite URI in the data
        folder: with nothing configured MLflow would write into the current directory."""
        if self.mlflow_tracking_uri_override:
            return with_psycopg2(self.mlflow_tracking_uri_override)
        return f"sqlite:///{self.mlflow_dir / 'mlflow.db'}"

    @property
    def mlflow_tracks_on_server(self) -> bool:
        """True for an ``http(s)://`` tracking URI: the server, not this process, owns the artifact store."""
        return self.mlflow_tracking_uri.startswith(("http://", "https://"))

    @property
    def mlflow_artifact_uri(self) -> str:
        return (self.mlflow_dir / "artifacts").as_uri()

    @property
    def mlflow_artifact_root(self) -> str | None:
        """Artifact root for new experiments: the data folder's (SQLite or Postgres store, same shared disk), or
        None for a tracking server, whose own ``--default-artifact-root`` / artifact proxy then applies."""
        return None if self.mlflow_tracks_on_server else self.mlflow_artifact_uri

    @cached_property
    def capture_dir(self) -> Path:
        """Where the live-capture hook appends what Claude Code sends it."""
        return self.home / "traces"

    @cached_property
    def models_dir(self) -> Path:
        return self.home / "models"

    @cached_property
    def duckdb_path(self) -> Path:
        return self.home / "lake.duckdb"

    @property
    def trace_dirs(self) -> list[Path]:
        if self.trace_dirs_override:
            return list(self.trace_dirs_override)
        return [Path.home() / ".claude" / "projects", self.capture_dir]

    @property
    def sandbox_images_dir(self) -> Path:
        return PROJECT_ROOT / "sandbox_images"

    def ensure_dirs(self) -> None:
        for folder in (
            self.lake_dir,
            self.artifacts_dir,
            self.dagster_home,
            self.mlflow_dir,
            self.capture_dir,
            self.models_dir,
        ):
            folder.mkdir(parents=True, exist_ok=True)


def get_settings() -> Settings:
    """Fresh settings from the current environment (cheap; tests change the environment freely)."""
    return Settings()
