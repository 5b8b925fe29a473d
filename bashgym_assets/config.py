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
    ``BASHGYM_RUN_LAUNCHER``, and those one part each reads: ``BASHGYM_TEACHER_API_KEY``,
    ``BASHGYM_SCENARIO_IMPORT_DIR``, ``BASHGYM_SCENARIO_VARIANTS``, ``BASHGYM_SHELL_TASKS``, ``BASHGYM_NL2BASH``,
    ``BASHGYM_FACTORY_PER_FAMILY``, ``BASHGYM_TRACES``, ``BASHGYM_KV_CACHE``, ``BASHGYM_KV_CACHE_MB``,
    ``BASHGYM_ROUTER_STUDENT``, ``BASHGYM_ROUTER_STUDENT_API_BASE``, ``BASHGYM_TRAINER_IMAGE``,
    ``BASHGYM_DOCKER_GPUS``, ``BASHGYM_STEP_LAUNCHER``, ``BASHGYM_HF_REPO``, ``BASHGYM_NODE``,
    ``BASHGYM_DEBIAN_MIRROR``, ``BASHGYM_CHROMIUM``, ``BASHGYM_STOP_GRACE_S``. No other module reads a
    ``BASHGYM_*`` variable (``tests/test_settings_single_source.py``; the one exception is the capture hook, which
    runs without site-packages and reads ``BASHGYM_HOME`` as ``home`` does). Each field's
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
    # ---- read by one part each (named in its description) ------------------------------------------------------
    teacher_api_key: str | None = Field(
        default=None,
        repr=False,
        validation_alias="BASHGYM_TEACHER_API_KEY",
        description="API key sent to the teacher's OpenAI-compatible server (llm, the router's teacher). Default: "
        "sk-local when an API base is set; hosted providers read their own variables through litellm.",
    )
    scenario_import_dir_override: Path | None = Field(
        default=None,
        validation_alias="BASHGYM_SCENARIO_IMPORT_DIR",
        description="Folder of scenario files (bundles or shell-tasks records) scenario_candidates imports "
        "beside the bundled pack. Default: <home>/scenario_imports.",
    )
    scenario_variants: int = Field(
        default=0,
        ge=0,
        validation_alias="BASHGYM_SCENARIO_VARIANTS",
        description="Generated variants (other names and values, gated like every bundle) of each train-split "
        "pack scenario, when scenario_candidates' config does not say.",
    )
    shell_tasks: str | None = Field(
        default=None,
        validation_alias="BASHGYM_SHELL_TASKS",
        description="File, folder or hub id of shell-tasks records scenario_candidates imports, when its config "
        "does not name one.",
    )
    nl2bash: str | None = Field(
        default=None,
        validation_alias="BASHGYM_NL2BASH",
        description="File or hub id of NL2Bash-style {nl, cmd} pairs scenario_candidates imports, when its "
        "config does not name one.",
    )
    factory_per_family: int = Field(
        default=55,
        ge=0,
        validation_alias="BASHGYM_FACTORY_PER_FAMILY",
        description="Distinct tasks the scenario factory draws per family, when factory_scenarios' config does "
        "not say.",
    )
    traces: bool | None = Field(
        default=None,
        validation_alias="BASHGYM_TRACES",
        description="MLflow traces of evaluated and rolled-out episodes: 0/false/off/no: off; 1/true/on/yes: on, "
        "creating the store if need be. Default: on once the MLflow store exists.",
    )
    kv_cache: bool = Field(
        default=True,
        validation_alias="BASHGYM_KV_CACHE",
        description="Greedy local generation reuses each conversation's keys and values across turns "
        "(inference.kv_decode); 0/false/off/no turns it off.",
    )
    kv_cache_mb: float = Field(
        default=2048.0,
        ge=0,
        validation_alias="BASHGYM_KV_CACHE_MB",
        description="Memory cap of that key/value cache, in MiB.",
    )
    router_student: str = Field(
        default="champion",
        validation_alias="BASHGYM_ROUTER_STUDENT",
        description="The student of routed: operators: champion (the local champion), an adapter folder, or "
        "openai/<name> at a running bashgym serve.",
    )
    router_student_api_base: str | None = Field(
        default=None,
        validation_alias="BASHGYM_ROUTER_STUDENT_API_BASE",
        description="Base URL of the router student's OpenAI-compatible server (a running bashgym serve).",
    )
    trainer_image_override: str | None = Field(
        default=None,
        validation_alias="BASHGYM_TRAINER_IMAGE",
        description="With the docker executor or run launcher: a prebuilt trainer image (a GPU host's). "
        "Default: bashgym-trainer:<hash>, built here from sandbox_images/trainer.",
    )
    docker_gpus: str = Field(
        default="auto",
        pattern=r"^(auto|all|none|[0-9]+)$",
        validation_alias="BASHGYM_DOCKER_GPUS",
        description="GPUs the docker executor's step containers request: auto (all, when the engine has the "
        "NVIDIA runtime), all, none or a count.",
    )
    step_launcher: str | None = Field(
        default=None,
        validation_alias="BASHGYM_STEP_LAUNCHER",
        description="Set by the docker executor in each step container, not by a person: the identity of the "
        "process that launched the step, so the step ends itself when that process is gone.",
    )
    hf_repo: str | None = Field(
        default=None,
        validation_alias="BASHGYM_HF_REPO",
        description="Hugging Face Hub repository exported_model and bashgym export --push upload to (with "
        "HF_TOKEN), when neither names one.",
    )
    node_binary: str | None = Field(
        default=None,
        validation_alias="BASHGYM_NODE",
        description="The node binary that runs llama.cpp's chat-template checks of an export. Default: node on "
        "the PATH, else /usr/bin/node.",
    )
    debian_mirror: str | None = Field(
        default=None,
        validation_alias="BASHGYM_DEBIAN_MIRROR",
        description="Where debootstrap fetches the sandbox image's packages. Default: the mirror apt uses here.",
    )
    chromium: str | None = Field(
        default=None,
        validation_alias="BASHGYM_CHROMIUM",
        description="The browser of the UI checks (bashgym ui-check). Default: chromium on the PATH.",
    )
    # A Dagster step answers its interrupt in about a second; a gate item may not
    stop_grace_s: float = Field(
        default=10.0,
        ge=0,
        validation_alias="BASHGYM_STOP_GRACE_S",
        description="Seconds a stopped command's children get to end before they are killed.",
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

    @field_validator("scenario_import_dir_override", mode="before")
    @classmethod
    def _expand_folder(cls, value: object) -> object:
        return _as_path(value)

    @field_validator("docker_gpus", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

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

    @property
    def scenario_import_dir(self) -> Path:
        """Where scenario_candidates imports scenario files from: ``BASHGYM_SCENARIO_IMPORT_DIR``, else
        ``<home>/scenario_imports``."""
        return self.scenario_import_dir_override or self.home / "scenario_imports"

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
    prefix: str = "",
) -> None:
    """One option per field of ``model`` (``max_turns`` -> ``--max-turns``, a bool ``continuous`` ->
    ``--continuous/--no-continuous``, a ``Literal`` -> its choices), its type, default and help from the field,
    parsed into ``dest`` = the field name: a field added to a trainer's or evaluator's config object is on the
    command line with nothing else to write, and the command line cannot drift from it. ``aliases``: extra option
    strings of a field (the short names a command always had). ``prefix``: for a second model on the same command
    line (``dpo`` -> ``--dpo-beta`` into ``dpo_beta``); a required field's default is then None."""
    for name, field in model.model_fields.items():
        dest = f"{prefix}_{name}" if prefix else name
        name_flag = dest.replace("_", "-")
        flags = ["--" + name_flag, *(aliases or {}).get(name, [])]
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        described = (field.description or "").replace("%", "%%")
        shown = f"{described} (default: %(default)s)" if described else "default: %(default)s"
        if field.annotation is bool:
            parser.add_argument(
                *flags, dest=dest, action=argparse.BooleanOptionalAction, default=default, help=shown
            )
            continue
        origin, args = typing.get_origin(field.annotation), typing.get_args(field.annotation)
        if origin is Literal:
            parser.add_argument(*flags, dest=dest, choices=list(args), default=default, help=shown)
            continue
        # X, or X | None (the option's default may be None)
        kinds = (
            [a for a in args if a is not type(None)] if origin in (Union, UnionType) else [field.annotation]
        )
        kind: Any = kinds[0] if len(kinds) == 1 else None
        if kind not in (int, float, str, Path):
            raise TypeError(f"{model.__name__}.{name}: no command-line option for a {field.annotation} field")
        parser.add_argument(*flags, dest=dest, type=kind, default=default, help=shown)


def get_settings() -> Settings:
    """Fresh settings from the current environment (cheap; tests change the environment freely)."""
    return Settings()
