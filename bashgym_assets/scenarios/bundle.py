"""The scenario bundle of DESIGN.md: one JSON file per scenario, validated by one pydantic model.

Everything downstream (gate, rollouts, evaluation) reads bundles through this model, so a malformed file is caught
once, here, with a message that names the field, instead of failing deep inside a sandbox.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,95}$")
PROVIDER_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


class Provider(BaseModel):
    """sekft mode: a program installed as ``/usr/local/bin/<name>`` whose ``--help`` reveals the directives."""

    model_config = ConfigDict(extra="forbid")

    name: str
    script: str

    @field_validator("name")
    @classmethod
    def _name_is_a_command(cls, value: str) -> str:
        if not PROVIDER_NAME_RE.match(value):
            raise ValueError(f"provider name {value!r} must be a plain command name ([a-z][a-z0-9_-]*)")
        return value

    @field_validator("script")
    @classmethod
    def _script_has_shebang(cls, value: str) -> str:
        if not value.startswith("#!"):
            raise ValueError("provider script must start with a shebang line (#!/bin/bash, #!/usr/bin/env python3)")
        return value


class ScenarioBundle(BaseModel):
    """One shell task: how to set it up, what to ask, how to check it and one known solution."""

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    task: str
    category: str
    difficulty: int = Field(ge=1, le=4)
    setup: list[str] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)
    user: Literal["operator", "root"] = "operator"
    workdir: str | None = None
    check: str
    reference: list[str]
    announcement: str | None = None
    provider: Provider | None = None
    source: str = ""

    @field_validator("task", "check")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("category")
    @classmethod
    def _category_slug(cls, value: str) -> str:
        value = value.strip().lower()
        if not re.match(r"^[a-z][a-z0-9_-]*$", value):
            raise ValueError(f"category {value!r} must be a lower-case slug")
        return value

    @field_validator("reference")
    @classmethod
    def _reference_not_empty(cls, value: list[str]) -> list[str]:
        if not value or not any(cmd.strip() for cmd in value):
            raise ValueError("reference must hold at least one command")
        return value

    @field_validator("files")
    @classmethod
    def _absolute_paths(cls, value: dict[str, str]) -> dict[str, str]:
        for path in value:
            if not path.startswith("/"):
                raise ValueError(f"files key {path!r} must be an absolute path")
        return value

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"workdir {value!r} must be an absolute path")
        return value

    @model_validator(mode="after")
    def _fill_id(self) -> ScenarioBundle:
        if not self.id:
            self.id = "s-" + self.content_hash()[:16]
        elif not ID_RE.match(self.id):
            raise ValueError(f"id {self.id!r} must match {ID_RE.pattern}")
        return self

    def content_hash(self) -> str:
        """sha256 of what defines the task (not id/source), so the same task from two places hashes alike."""
        payload = self.model_dump(exclude={"id", "source"}, mode="json")
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    @property
    def home(self) -> str:
        return "/root" if self.user == "root" else "/home/operator"

    @property
    def start_dir(self) -> str:
        """Where the operator's shell starts: the workdir, else the user's home."""
        return self.workdir or self.home

    @property
    def announced(self) -> bool:
        """sekft mode: the operator sees the announcement, not the task."""
        return bool(self.announcement)


class BundleError(BaseModel):
    """A file or record that did not become a bundle, with why (quarantined, never silently dropped)."""

    source: str
    reason: str


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem, naming the field: readable in metadata and usable as feedback to a teacher."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<bundle>"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def parse_bundle(data: Any, source: str = "") -> ScenarioBundle:
    """Validate a dict (or JSON text) into a bundle; raises ValueError with a field-level message."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"a bundle is a JSON object, got {type(data).__name__}")
    if source and not data.get("source"):
        data = {**data, "source": source}
    try:
        return ScenarioBundle.model_validate(data)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc)) from exc


def load_bundle(path: Path | str) -> ScenarioBundle:
    """Load one bundle file; the id defaults to the file stem when the file gives none."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and not data.get("id"):
        data["id"] = path.stem
    return parse_bundle(data)


def save_bundle(bundle: ScenarioBundle, folder: Path | str) -> Path:
    """Write ``<folder>/<id>.json`` atomically (temp file + rename)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{bundle.id}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(bundle.model_dump(mode="json", exclude_none=True), indent=2) + "\n",
                   encoding="utf-8")
    tmp.replace(path)
    return path


def load_folder(folder: Path | str) -> tuple[list[ScenarioBundle], list[BundleError]]:
    """Every ``*.json`` bundle under a folder, sorted by path; bad files come back as errors, not exceptions."""
    bundles: list[ScenarioBundle] = []
    errors: list[BundleError] = []
    for path in sorted(Path(folder).rglob("*.json")):
        try:
            bundles.append(load_bundle(path))
        except (ValueError, OSError) as exc:
            errors.append(BundleError(source=str(path), reason=str(exc)))
    return bundles, errors


# ---- the shell-tasks format (the blog's dataset) ----------------------------------------------------------------
SHELL_TASK_CATEGORY = "imported"


def _iter_shell_task_records(path: Path) -> Iterator[tuple[str, Any]]:
    """Records of a .json (object or list) or .jsonl file, each with a locator for error messages."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                yield f"{path}:{lineno}", json.loads(line)
            except json.JSONDecodeError as exc:
                yield f"{path}:{lineno}", ValueError(f"not valid JSON: {exc}")
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        yield str(path), ValueError(f"not valid JSON: {exc}")
        return
    if isinstance(data, list):
        for index, record in enumerate(data):
            yield f"{path}[{index}]", record
    else:
        yield str(path), data


def shell_task_to_bundle(record: dict[str, Any], source: str) -> ScenarioBundle:
    """Map ``task``, ``setup_commands``, ``success_condition``, ``difficulty_level`` onto a bundle.

    The shell-tasks format carries no reference solution; a ``reference``/``solution`` field is used when present,
    otherwise the bundle cannot be certified by the gate and is rejected here with that reason.
    """
    if not isinstance(record, dict):
        raise ValueError(f"a shell task is a JSON object, got {type(record).__name__}")
    missing = [k for k in ("task", "success_condition") if k not in record]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    setup = record.get("setup_commands") or []
    if isinstance(setup, str):
        setup = [setup]
    reference = record.get("reference") or record.get("solution") or record.get("reference_solution") or []
    if isinstance(reference, str):
        reference = [line for line in reference.splitlines() if line.strip()]
    if not reference:
        raise ValueError("no reference solution (reference/solution field): the gate cannot certify it")
    try:
        difficulty = int(record.get("difficulty_level", record.get("difficulty", 2)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"difficulty_level {record.get('difficulty_level')!r} is not an integer") from exc
    difficulty = min(4, max(1, difficulty))
    data = {
        "task": record["task"],
        "category": record.get("category") or SHELL_TASK_CATEGORY,
        "difficulty": difficulty,
        "setup": list(setup),
        "check": record["success_condition"],
        "reference": list(reference),
        "user": record.get("user", "operator"),
        "source": source,
    }
    if record.get("id"):
        data["id"] = re.sub(r"[^a-z0-9._-]", "-", str(record["id"]).lower())[:96]
    return parse_bundle(data)


def import_shell_tasks(paths: Iterable[Path | str]) -> tuple[list[ScenarioBundle], list[BundleError]]:
    """Import shell-tasks files (.json object/list or .jsonl; folders are searched) into bundles + errors."""
    bundles: list[ScenarioBundle] = []
    errors: list[BundleError] = []
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files.extend(sorted(x for x in p.rglob("*") if x.suffix in (".json", ".jsonl")))
        else:
            files.append(p)
    for path in files:
        try:
            records = list(_iter_shell_task_records(path))
        except OSError as exc:
            errors.append(BundleError(source=str(path), reason=f"unreadable: {exc}"))
            continue
        for locator, record in records:
            if isinstance(record, Exception):
                errors.append(BundleError(source=locator, reason=str(record)))
                continue
            try:
                bundles.append(shell_task_to_bundle(record, source=f"import:{path.name}"))
            except ValueError as exc:
                errors.append(BundleError(source=locator, reason=str(exc)))
    return bundles, errors
