"""Settings read from the environment, with embedded defaults that run offline on one machine.

Every path the platform writes lives under one data folder (``BASHGYM_HOME``, default ``.bashgym/`` in the
project), so a whole installation can be moved, backed up or wiped as one folder.
"""

from __future__ import annotations

import argparse
import os
import typing
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: Where ``make mlflow`` serves with neither MLFLOW_PORT nor BASHGYM_MLFLOW_UI_URL
DEFAULT_MLFLOW_UI_URL = "http://127.0.0.1:5000"


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


#: ``make mlflow`` writes the address it serves on into this file beside the store (``bashgym_assets.mlflow_ui``)
MLFLOW_UI_URL_RECORD = "ui_url"


def recorded_mlflow_ui_url(mlflow_dir: Path) -> str | None:
    """The address the last ``make mlflow`` served ``mlflow_dir``'s store on (no trailing slash), or None."""
    try:
        recorded = (mlflow_dir / MLFLOW_UI_URL_RECORD).read_text().strip()
    except OSError:
        return None
    return recorded.rstrip("/") if recorded.startswith(("http://", "https://")) else None


def _as_path(value: object) -> object:
    """A path given as text (the environment, a launchpad field) expanded and resolved, so that ``~/data`` or a
    relative folder stays the same folder whatever the working directory is later; a ``Path`` is kept as given."""
    return Path(value).expanduser().resolve() if isinstance(value, str) else value


def _as_paths(value: object) -> object:
    """``:``-separated folders (the shell's PATH convention, not JSON), each expanded and resolved."""
    if isinstance(value, str):
        return [_as_path(p.strip()) for p in value.split(os.pathsep) if p.strip()]
    return value


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


#: A list of folders read from one ``:``-separated variable: ``NoDecode`` keeps pydantic-settings from parsing the
#: text as JSON, the validators split it.
Folders = Annotated[list[Path], NoDecode]


class Settings(BaseSettings):
    """Where bashgym keeps its data and which models and executors it uses.

    Every field is read from one environment variable (all optional), its ``validation_alias``: ``BASHGYM_HOME``,
    ``BASHGYM_TRACE_DIRS``, ``BASHGYM_TEACHER_MODEL``, ``BASHGYM_TEACHER_API_BASE``, ``BASHGYM_BASE_MODEL``,
    ``BASHGYM_GPU_EXECUTOR``, ``BASHGYM_SANDBOX_IMAGE``, ``BASHGYM_EVAL_SUITE_DIRS``,
    ``BASHGYM_MLFLOW_TRACKING_URI``, ``BASHGYM_MLFLOW_UI_URL``, ``BASHGYM_DAGSTER_PG_URL``,
    ``BASHGYM_RUN_LAUNCHER``; each field's
    ``description`` says what it does (the Dagster resource shows the same text in the launchpad). A keyword
    argument (``Settings(home=...)``, by field name) wins over the environment; a variable that is empty or only
    whitespace counts as unset; a value outside a field's choices fails here, naming the variable. No ``.env``
    file is read: ``dagster dev`` already loads one into the environment of the processes it starts, and the
    same settings must not depend on the directory a command happens to run in.
    """

    model_config = SettingsConfigDict(
        frozen=True,
        case_sensitive=True,  # the variables as written, like os.environ.get
        validate_by_name=True,  # Settings(home=...) as well as the variable names
        validate_by_alias=True,
        extra="ignore",  # a keyword this version does not know is ignored, as with a plain BaseModel
    )

    home: Path = Field(
        default=PROJECT_ROOT / ".bashgym",
        validation_alias="BASHGYM_HOME",
        description="Data folder (parquet lake, DuckDB, Dagster instance, MLflow, adapters, images). "
        "Default: .bashgym/ in the project.",
    )
    trace_dirs_override: Folders | None = Field(
        default=None,
        validation_alias="BASHGYM_TRACE_DIRS",
        description="':'-separated folders of agent session logs. "
        "Default: ~/.claude/projects and the live-capture folder <home>/traces.",
    )
    teacher_model: str = Field(
        default="reference",
        validation_alias="BASHGYM_TEACHER_MODEL",
        description="litellm model string of the teacher (authoring, rollouts), e.g. anthropic/claude-..., "
        "ollama/qwen2.5:32b, openai/<name> with a teacher API base. Default: 'reference' (offline, the "
        "pack's own reference solutions).",
    )
    teacher_api_base: str | None = Field(
        default=None,
        validation_alias="BASHGYM_TEACHER_API_BASE",
        description="Base URL of an OpenAI-compatible server for the teacher.",
    )
    base_model: str | None = Field(
        default=None,
        validation_alias="BASHGYM_BASE_MODEL",
        description="Local folder or hub id of the base model. Default: the offline SmolLM2-135M-Instruct.",
    )
    gpu_executor: Literal["in_process", "docker"] = Field(
        default="in_process",
        validation_alias="BASHGYM_GPU_EXECUTOR",
        description="Where the GPU code location runs its steps: in_process, or docker (a trainer-image "
        "container per step).",
    )
    sandbox_image_override: str | None = Field(
        default=None,
        validation_alias="BASHGYM_SANDBOX_IMAGE",
        description="Docker image for sandboxes. Default: bashgym-sandbox:<hash of sandbox_images/>, built by "
        "the sandbox_image asset.",
    )
    eval_suite_dirs: Folders = Field(
        default=[],
        validation_alias="BASHGYM_EVAL_SUITE_DIRS",
        description="':'-separated folders of external shell-task suites (Terminal-Bench 1.x, Harbor 2.x) "
        "imported as evaluation-only scenarios (ext- ids, always held out).",
    )
    # URLs that may carry a password: kept out of repr (logs, tracebacks)
    mlflow_tracking_uri_override: str | None = Field(
        default=None,
        repr=False,
        validation_alias="BASHGYM_MLFLOW_TRACKING_URI",
        description="MLflow tracking and registry store, e.g. postgresql://user:pw@host:5432/mlflow (opened "
        "with psycopg2) or an http://host:5000 tracking server. Default: SQLite in the data folder.",
    )
    mlflow_ui_url_override: str | None = Field(
        default=None,
        repr=False,
        validation_alias="BASHGYM_MLFLOW_UI_URL",
        description="Where a person opens the MLflow UI: the base of the run links in the Dagster metadata, and "
        "the address `make mlflow` serves on. Default: the tracking server for an http(s) tracking URI, else "
        "where the last `make mlflow` served (MLFLOW_PORT=...), else http://127.0.0.1:5000.",
    )
    dagster_pg_url: str | None = Field(
        default=None,
        repr=False,
        validation_alias="BASHGYM_DAGSTER_PG_URL",
        description="postgresql+psycopg2://user:pw@host:5432/dagster for the Dagster instance (runs, event log, "
        "schedules). Default: SQLite files in DAGSTER_HOME (bashgym_assets.instance).",
    )
    run_launcher: Literal["default", "docker"] = Field(
        default="default",
        validation_alias="BASHGYM_RUN_LAUNCHER",
        description="default (runs in a local process) or docker (dagster-docker's DockerRunLauncher: every "
        "run in its own trainer-image container).",
    )

    def __init__(self, **values: Any) -> None:
        """Keyword arguments by field name; a blank one (None, or empty or whitespace text) is not given, so the
        environment still applies: the Dagster resource passes its unset fields so."""
        super().__init__(**{k: v for k, v in values.items() if not _blank(v)})

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments over the environment; no ``.env`` file, no secrets folder (see the class doc)."""
        return init_settings, env_settings

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, data: Any) -> Any:
        """Values stripped; an empty or whitespace-only one is left out, so its default applies (``FOO= cmd`` or a
        templated ``FOO=${UNSET}`` means "not set", not "a folder named ''")."""
        if not isinstance(data, dict):
            return data
        return {k: v.strip() if isinstance(v, str) else v for k, v in data.items() if not _blank(v)}

    @field_validator("home", mode="before")
    @classmethod
    def _expand_home(cls, value: object) -> object:
        return _as_path(value)

    @field_validator("trace_dirs_override", "eval_suite_dirs", mode="before")
    @classmethod
    def _split_folders(cls, value: object) -> object:
        return _as_paths(value)

    @field_validator("trace_dirs_override")
    @classmethod
    def _no_folders_is_unset(cls, value: list[Path] | None) -> list[Path] | None:
        return value or None  # ":" names no folder: the defaults apply

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

    @property
    def mlflow_ui_url(self) -> str:
        """The MLflow UI a person opens for this store, without a trailing slash: ``BASHGYM_MLFLOW_UI_URL`` when
        set; the tracking server itself for an http(s) tracking URI; else (SQLite, Postgres: no server of their
        own) where the last ``make mlflow`` served (its ``MLFLOW_PORT``, recorded in the data folder); else
        ``make mlflow``'s default, http://127.0.0.1:5000."""
        if self.mlflow_ui_url_override:
            return self.mlflow_ui_url_override.rstrip("/")
        if self.mlflow_tracks_on_server:
            return self.mlflow_tracking_uri.rstrip("/")
        return recorded_mlflow_ui_url(self.mlflow_dir) or DEFAULT_MLFLOW_UI_URL

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


def add_field_options(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """One option per field of ``model`` (``max_turns`` -> ``--max-turns``, a bool ``continuous`` ->
    ``--continuous/--no-continuous``, a ``Literal`` -> its choices), its type, default and help from the field,
    parsed into ``dest`` = the field name: a field added to a trainer's or evaluator's config object is on the
    command line with nothing else to write, and the command line cannot drift from it. ``aliases``: extra option
    strings of a field (the short names a command always had)."""
    for name, field in model.model_fields.items():
        flags = ["--" + name.replace("_", "-"), *(aliases or {}).get(name, [])]
        default = field.get_default(call_default_factory=True)
        described = (field.description or "").replace("%", "%%")
        shown = f"{described} (default: %(default)s)" if described else "default: %(default)s"
        if field.annotation is bool:
            parser.add_argument(
                *flags, dest=name, action=argparse.BooleanOptionalAction, default=default, help=shown
            )
            continue
        origin, args = typing.get_origin(field.annotation), typing.get_args(field.annotation)
        if origin is Literal:
            parser.add_argument(*flags, dest=name, choices=list(args), default=default, help=shown)
            continue
        # X, or X | None (the option's default may be None)
        kinds = (
            [a for a in args if a is not type(None)] if origin in (Union, UnionType) else [field.annotation]
        )
        kind: Any = kinds[0] if len(kinds) == 1 else None
        if kind not in (int, float, str, Path):
            raise TypeError(f"{model.__name__}.{name}: no command-line option for a {field.annotation} field")
        parser.add_argument(*flags, dest=name, type=kind, default=default, help=shown)


def get_settings() -> Settings:
    """Fresh settings from the current environment (cheap; tests change the environment freely)."""
    return Settings()
