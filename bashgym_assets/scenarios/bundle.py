"""The scenario bundle of DESIGN.md, validated by one pydantic model, and the files bundles are read from.

Everything downstream (gate, rollouts, evaluation) reads bundles through this model, so a malformed file is caught
once, here, with a message that names the field, instead of failing deep inside a sandbox. The model is the one
rule for every source: a pack file, an imported file and a teacher's reply are all validated by
``ScenarioBundle`` (through ``parse_bundle``), so a bundle one path accepts no other path refuses.

Rules beyond the field types:

- **Announced (provider) mode**: with a non-blank ``announcement`` the ``task`` may be empty or absent; it is then
  the announcement (what the operator is shown). Without an announcement ``task`` must not be blank.
- **provider.script** is either the program's text, starting with a shebang line (``#!/bin/bash``), installed as
  ``/usr/local/bin/<name>``; or the path of a program that the scenario's setup (or ``files``) writes: one token,
  no whitespace, starting with ``/`` or ``./`` (relative to the operator's start directory). The two cannot be
  confused: program text starts with ``#!``, a path with ``/`` or ``.``. A path must be named by a setup command
  or a ``files`` key (its file name at least); at run time ``<name>`` executes it and the setup fails, with that
  reason, when the program is missing after the setup.

Files: a pack holds one JSON bundle per file (``<id>.json``). The import folder (``BASHGYM_SCENARIO_IMPORT_DIR``)
takes any file, whatever its name: JSON, JSON Lines or YAML (detected from the content), each holding one record or
a list of them (or ``{"scenarios"|"bundles"|"tasks": [...]}``), every record either in this bundle layout or in the
shell-tasks layout (``task``, ``setup_commands``, ``success_condition``, ``difficulty_level``), told apart by its
keys. A file or record that is neither is quarantined with the reason; the others still land.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bashgym_assets.sandbox.layout import OFFERED_USERS, SESSION_ACCOUNTS, SessionUser

MAX_YAML_CHARS = 2 << 20
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,95}$")
PROVIDER_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
# A provider given as the path of a program the setup writes: one token, absolute or ./relative, not a folder.
PROGRAM_PATH_RE = re.compile(r"^(?:/|\./)[^\s\x00]*[^\s\x00/]$")


def is_program_path(script: str) -> bool:
    """Whether ``provider.script`` names a program by path (else it is the program's text)."""
    return bool(PROGRAM_PATH_RE.match(script))


class Provider(BaseModel):
    """sekft mode: a program installed as ``/usr/local/bin/<name>`` whose ``--help`` reveals the directives.

    ``script`` is the program's text (``#!...``) or the path of a program the setup writes (see the module doc).
    """

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
    def _program_text_or_path(cls, value: str) -> str:
        if value.startswith("#!"):
            return value
        if is_program_path(value.strip()):
            return value.strip()
        raise ValueError(
            "provider script must be the program's text, starting with a shebang line (#!/bin/bash, "
            "#!/usr/bin/env python3), or the path of a program the setup writes: one token starting "
            f"with / or ./, without spaces or newlines (got {value[:60]!r})"
        )

    @property
    def is_path(self) -> bool:
        return is_program_path(self.script)


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", text) is not None


class ScenarioBundle(BaseModel):
    """One shell task: how to set it up, what to ask, how to check it and one known solution."""

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    task: str
    category: str
    difficulty: int = Field(ge=1, le=4)
    setup: list[str] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)
    user: SessionUser = "operator"
    workdir: str | None = None
    check: str
    reference: list[str]
    announcement: str | None = None
    provider: Provider | None = None
    source: str = ""

    @model_validator(mode="before")
    @classmethod
    def _unix_line_endings(cls, data: Any) -> Any:
        """Scripts written on Windows: bash reads ``\\r`` as part of a word (``done.txt\\r: No such file``), so a
        CRLF check fails the reference for no fault of the task. ``files`` contents are data and stay as given."""
        if not isinstance(data, dict):
            return data
        fixed = dict(data)
        if isinstance(fixed.get("check"), str):
            fixed["check"] = fixed["check"].replace("\r\n", "\n")
        for key in ("setup", "reference"):
            if isinstance(fixed.get(key), list):
                fixed[key] = [c.replace("\r\n", "\n") if isinstance(c, str) else c for c in fixed[key]]
        return fixed

    @field_validator("user", mode="before")
    @classmethod
    def _a_session_user(cls, value: Any) -> Any:
        """A user the sandbox cannot run is refused by name, saying which it offers (the Literal's own message
        lists the names, not what they are)."""
        if isinstance(value, str) and value not in SESSION_ACCOUNTS:
            raise ValueError(f"user {value!r} is not a sandbox user: the sandbox offers only {OFFERED_USERS}")
        return value

    @field_validator("setup", "reference")
    @classmethod
    def _no_nul_in_commands(cls, value: list[str]) -> list[str]:
        if any("\0" in cmd for cmd in value):
            raise ValueError("a command holds a NUL byte, which no shell command line can carry")
        return value

    @model_validator(mode="before")
    @classmethod
    def _announced_task_defaults_to_announcement(cls, data: Any) -> Any:
        """Announced mode: the operator reads the announcement, so an empty task is the announcement (one rule
        for files and teacher replies alike)."""
        if isinstance(data, dict):
            announcement, task = data.get("announcement"), data.get("task")
            if (
                isinstance(announcement, str)
                and announcement.strip()
                and (task is None or (isinstance(task, str) and not task.strip()))
            ):
                data = {**data, "task": announcement}
        return data

    @field_validator("task")
    @classmethod
    def _task_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                "must not be empty (it may be left out only with an announcement, provider mode)"
            )
        return value

    @field_validator("check")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("category")
    @classmethod
    def _category_slug(cls, value: str) -> str:
        slug = slugify(value, keep="_-")
        if not slug or not slug[0].isalpha():
            raise ValueError(
                f"category {value!r} must name a category (letters first; it becomes a lower-case "
                "slug: 'Files & Permissions' is files-permissions)"
            )
        return slug

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
            if "\0" in path or ".." in path.split("/"):  # what the sandbox refuses is refused here, at load
                raise ValueError(f"files key {path!r} must not hold '..' or a NUL byte")
        return value

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"workdir {value!r} must be an absolute path")
        return value

    @model_validator(mode="after")
    def _provider_program_is_written(self) -> ScenarioBundle:
        """A provider given by path must be something this scenario writes, not a typo or the image's own file:
        its path is a ``files`` key, or its file name appears in a setup command or a ``files`` key (the sandbox
        then checks for real that it exists after the setup)."""
        program = self.provider_program
        if program is None:
            return self
        assert self.provider is not None  # provider_program is None without a provider
        name = posixpath.basename(program)
        written = "\n".join([*self.setup, *self.files])
        if program not in self.files and not _mentions(written, name):
            raise ValueError(
                f"provider.script {self.provider.script!r} is a program path, but no setup command "
                f"or files entry writes it (nothing mentions {name!r})"
            )
        return self

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
        return SESSION_ACCOUNTS[self.user].home

    @property
    def start_dir(self) -> str:
        """Where the operator's shell starts: the workdir, else the user's home."""
        return self.workdir or self.home

    @property
    def announced(self) -> bool:
        """sekft mode: the operator sees the announcement, not the task."""
        return bool(self.announcement)

    @property
    def provider_program(self) -> str | None:
        """The absolute path of a provider given by path (``./x`` is relative to the start directory); None for a
        provider given as program text, or no provider."""
        if self.provider is None or not self.provider.is_path:
            return None
        return posixpath.normpath(posixpath.join(self.start_dir, self.provider.script))


def slugify(value: str, keep: str = "._-") -> str:
    """Lower-case ASCII slug: accents folded (``été`` is ``ete``), runs of anything else one ``-``."""
    folded = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode().lower()
    return re.sub(rf"[^a-z0-9{re.escape(keep)}]+", "-", folded).strip("-._")


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
    """Load one bundle file (JSON, or YAML with the same fields); the id defaults to the file stem when the file
    gives none."""
    path = Path(path)
    records = parse_documents(read_text_file(path), str(path))
    if len(records) != 1:
        raise ValueError(f"a bundle file holds one bundle, found {len(records)} documents")
    data = records[0][1]
    if isinstance(data, Exception):
        raise ValueError(str(data))
    if isinstance(data, dict) and not data.get("id"):
        data["id"] = path.stem
    return parse_bundle(data)


def save_bundle(bundle: ScenarioBundle, folder: Path | str) -> Path:
    """Write ``<folder>/<id>.json`` atomically (temp file + rename)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{bundle.id}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(
        json.dumps(bundle.model_dump(mode="json", exclude_none=True), indent=2) + "\n", encoding="utf-8"
    )
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


# ---- reading files by content -------------------------------------------------------------------------------------
# A file whose only key holds the list: {"scenarios": [...]} and the like.
WRAPPER_KEYS = frozenset({"scenarios", "bundles", "tasks"})


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def read_text_file(path: Path) -> str:
    """A file's text; binary or non-UTF-8 content is a ValueError (quarantined), never a crash."""
    data = path.read_bytes()
    # (ingest.jsonsafe.bom_encoding says the same, but importing it loads the ingest package: pyarrow, the lake)
    for bom, codec in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):  # a Windows editor's "Unicode": text, with NUL bytes in every character
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                raise ValueError(f"not {codec.upper()} text despite its byte-order mark: {exc}") from exc
    if b"\x00" in data:
        raise ValueError("not a text file (binary content)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: {exc}") from exc


def parse_documents(text: str, locator: str) -> list[tuple[str, Any]]:
    """The documents of a file's text, told apart by content, never by name: JSON, else JSON Lines (two or more
    lines, the first a JSON object), else YAML (one or several ``---`` documents). Each comes with a locator for
    messages; a part that does not parse comes back as a ValueError in its place, so one bad line spares the rest."""
    if not text.strip():
        return [(locator, ValueError("empty file: no scenario in it"))]
    try:
        return [(locator, json.loads(text))]
    except json.JSONDecodeError as exc:
        json_error = exc
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) > 1 and lines[0][1].lstrip().startswith("{"):
        try:
            first_is_json = isinstance(json.loads(lines[0][1]), dict)
        except json.JSONDecodeError:
            first_is_json = False
        if first_is_json:
            out: list[tuple[str, Any]] = []
            for n, line in lines:
                try:
                    out.append((f"{locator}:{n}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    out.append((f"{locator}:{n}", ValueError(f"not valid JSON: {exc}")))
            return out
    if len(text) > MAX_YAML_CHARS:  # the pure-Python YAML reader takes minutes and GBs on a big log file
        return [
            (
                locator,
                ValueError(
                    f"not valid JSON ({json_error}); as YAML it is read only up to "
                    f"{MAX_YAML_CHARS >> 20} MB and this file holds {len(text) / 2**20:.1f} MB"
                ),
            )
        ]
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        if text.lstrip()[:1] in ("{", "["):
            return [(locator, ValueError(f"not valid JSON: {json_error}"))]
        return [(locator, ValueError(f"neither JSON nor YAML: {_one_line(exc)}"))]
    if not docs:
        return [(locator, ValueError("empty file: no scenario in it"))]
    if len(docs) == 1:
        return [(locator, docs[0])]
    return [(f"{locator}#{i}", doc) for i, doc in enumerate(docs, 1)]


def _records(locator: str, value: Any) -> Iterator[tuple[str, Any]]:
    """One document as scenario records: a mapping, a list of them, or a mapping whose only key lists them."""
    if isinstance(value, dict) and len(value) == 1:
        key, inner = next(iter(value.items()))
        if key in WRAPPER_KEYS and isinstance(inner, list):
            value = inner
    if isinstance(value, list):
        if not value:
            yield locator, ValueError("an empty list: no scenario in it")
        for index, record in enumerate(value):
            yield f"{locator}[{index}]", record
    else:
        yield locator, value


# ---- the two record layouts ---------------------------------------------------------------------------------------
BUNDLE_LAYOUT = "bundle"
SHELL_TASKS_LAYOUT = "shell-tasks"
# Keys only one layout has (task, category, id, user, reference and difficulty are in both, more or less).
BUNDLE_ONLY_KEYS = frozenset({"check", "setup", "files", "workdir", "announcement", "provider"})
SHELL_TASK_ONLY_KEYS = frozenset(
    {"success_condition", "setup_commands", "difficulty_level", "solution", "reference_solution"}
)


def record_layout(record: dict[str, Any]) -> str:
    """``bundle`` or ``shell-tasks`` from the record's keys; a record with both layouts' keys, or neither's, is a
    ValueError saying which keys decided."""
    keys = set(record)
    bundle_keys, shell_keys = sorted(keys & BUNDLE_ONLY_KEYS), sorted(keys & SHELL_TASK_ONLY_KEYS)
    if bundle_keys and shell_keys:
        raise ValueError(
            f"mixes the bundle layout ({', '.join(bundle_keys)}) with the shell-tasks layout "
            f"({', '.join(shell_keys)}): use one"
        )
    if bundle_keys:
        return BUNDLE_LAYOUT
    if shell_keys:
        return SHELL_TASKS_LAYOUT
    raise ValueError(
        "neither a scenario bundle (no check) nor a shell task (no success_condition); its keys: "
        f"{', '.join(sorted(map(str, keys))) or 'none'}"
    )


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"plain text ({value.strip()[:40]!r})"
    return type(value).__name__


def record_to_bundle(record: Any, source: str, default_id: str | None = None) -> ScenarioBundle:
    """One record of either layout as a validated bundle; raises ValueError with the reason.

    ``source`` (``import:<file>``) leads the bundle's source; a source the record gives is kept after it.
    """
    if not isinstance(record, dict):
        raise ValueError(f"a scenario is a mapping (JSON object / YAML mapping), got {_describe(record)}")
    if record_layout(record) == SHELL_TASKS_LAYOUT:
        return shell_task_to_bundle(record, source=source)
    # Written elsewhere: an optional field given as null is left out, fields of other tools (author, tags,
    # license) are set aside and named in the source, and an id in another style (Extract-Logs-01, an accent,
    # a space) becomes this repository's slug. What is wrong (a missing check, a bad type) is still refused.
    data = {k: v for k, v in record.items() if not (v is None and k in _OPTIONAL_FIELDS)}
    unknown = sorted(str(k) for k in data if k not in ScenarioBundle.model_fields)
    for key in unknown:
        data.pop(key)
    given = data.get("source")
    data["source"] = f"{source} ({given})" if isinstance(given, str) and given and given != source else source
    if unknown:
        data["source"] += f" [fields set aside: {', '.join(unknown)}]"
    if (
        isinstance(data.get("id"), str)
        and data["id"]
        and not ID_RE.match(data["id"])
        and not re.search(r"[/\\]|\.\.", data["id"])
    ):  # a path in an id is refused, not folded away
        slug = slugify(data["id"])[:96].rstrip("-._")
        if slug and ID_RE.match(slug):
            data["id"] = slug
    if default_id and not data.get("id"):
        data["id"] = default_id
    return parse_bundle(data)


_OPTIONAL_FIELDS = frozenset(
    {"id", "setup", "files", "user", "workdir", "announcement", "provider", "source"}
)


def _default_id(rel: str) -> str | None:
    """The id a lone bundle without one takes from its file name (as ``load_bundle`` does), made id-safe."""
    stem = rel.rsplit(".", 1)[0] if "." in posixpath.basename(rel) else rel
    slug = slugify(stem)[:96].rstrip("-._")
    return slug if slug and ID_RE.match(slug) else None


# ---- the shell-tasks format (the blog's dataset) ----------------------------------------------------------------
SHELL_TASK_CATEGORY = "imported"


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
        given: Any = record.get("difficulty_level", record.get("difficulty", 2))  # JSON: any type
        difficulty = int(given)
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


# ---- the import folder --------------------------------------------------------------------------------------------
def _import_files(paths: Iterable[Path | str]) -> list[tuple[Path, str]]:
    """(file, name relative to what was given), sorted per folder; hidden files and folders are skipped."""
    files: list[tuple[Path, str]] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = [
                x
                for x in p.rglob("*")
                if x.is_file() and not any(part.startswith(".") for part in x.relative_to(p).parts)
            ]
            files.extend((x, x.relative_to(p).as_posix()) for x in sorted(found))
        else:
            files.append((p, p.name))
    return files


def import_scenario_files(paths: Iterable[Path | str]) -> tuple[list[ScenarioBundle], list[BundleError]]:
    """Import every file under ``paths`` (folders are searched, any file name) into bundles + quarantine.

    The format of a file (JSON, JSON Lines, YAML) and the layout of each record (this module's bundle or a shell
    task) are read from the content; each record is judged alone, so one bad record or file spares the others.
    A lone bundle without an id takes its file's name, as ``load_bundle`` does; a record's source becomes
    ``import:<file>``.
    """
    bundles: list[ScenarioBundle] = []
    errors: list[BundleError] = []
    for path, rel in _import_files(paths):
        try:
            documents = parse_documents(read_text_file(path), str(path))
        except (OSError, ValueError) as exc:
            errors.append(BundleError(source=str(path), reason=f"unreadable: {exc}"))
            continue
        lone = len(documents) == 1 and isinstance(documents[0][1], dict)
        for doc_locator, document in documents:
            for locator, record in _records(doc_locator, document):
                if isinstance(record, Exception):
                    errors.append(BundleError(source=locator, reason=str(record)))
                    continue
                try:
                    bundles.append(
                        record_to_bundle(
                            record,
                            source=f"import:{rel}",
                            default_id=_default_id(rel) if lone and locator == doc_locator else None,
                        )
                    )
                except ValueError as exc:
                    errors.append(BundleError(source=locator, reason=str(exc)))
    return bundles, errors


def import_shell_tasks(paths: Iterable[Path | str]) -> tuple[list[ScenarioBundle], list[BundleError]]:
    """The import folder's reader under its older name: it takes bundles as well as shell tasks now."""
    return import_scenario_files(paths)
