"""Public task data a user may have: the blog's shell-tasks dataset, read through Hugging Face ``datasets``.

``load_shell_tasks(source)`` takes a hub name (``deathbyknowledge/shell-tasks``) or a local folder (or file) of
parquet, JSON Lines, JSON or CSV files in the shell-tasks schema (``task``, ``setup_commands``,
``success_condition``, ``difficulty_level``, optionally ``task_id``/``id`` and a ``reference``/``solution``). Both
paths are the same ``datasets.load_dataset`` call, the hub name passed through as it is; a local folder is read one
file at a time so that a broken file (truncated, not UTF-8, a column of another type) is quarantined alone instead
of failing the whole folder, and a JSON Lines file that ``datasets`` refuses is read again line by line so its good
lines are kept.

Every record lands in exactly one of three places:

- ``bundles``: records with a reference solution, as scenario bundles (the gate still certifies them);
- ``pending``: valid records without one (most of shell-tasks). They are NOT bundles and cannot be gated: a solver
  (the teacher, or the champion) must prove them first, as the seed's generator does (setup ok, check fails before,
  a rollout makes it pass); ``rollout.pending.solve_pending`` does that in a real sandbox and turns the solver's
  commands into the reference. Until then a pending task never reaches the gate, training or evaluation;
- ``quarantine``: what is broken, with the reason (missing field, wrong type, unreadable file ...).

Ids get the ``st.`` prefix (``st.<task_id>`` or ``st.<content hash>``): imported public tasks are training sources,
and the prefix lets the lead route them (similarity guard against evaluation tasks, split rules).

Why the user defaults to root: shell-tasks was generated and validated in SoS sandboxes whose shell is root; its
setups write under /var, /opt, /etc and its tasks act there, which the unprivileged ``operator`` cannot do.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.scenarios.bundle import (
    BundleError,
    ScenarioBundle,
    SessionUser,
    parse_bundle,
    parse_documents,
    read_text_file,
    slugify,
)

SHELL_TASKS_HUB = "deathbyknowledge/shell-tasks"
SHELL_TASKS_PREFIX = "st."
SHELL_TASKS_CATEGORY = "imported"
# A pending task's draft carries this as its "reference" only so that it validates as a bundle for playing: it
# changes nothing, so a draft that reached the gate by mistake would be rejected (check fails before and after).
UNPROVED_REFERENCE = "false"
PENDING_REASON = "no reference solution: waits for a solver (teacher or champion) to prove it"

# Which loader of ``datasets`` reads which file (by suffix). Other files in a folder are skipped, and said so.
LOADERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".ndjson": "json", ".csv": "csv"}
REFERENCE_KEYS = ("reference", "solution", "reference_solution")


class PendingTask(BaseModel):
    """A shell task with everything but a proof: it waits for a solver, never for the gate."""

    id: str
    task: str
    category: str = SHELL_TASKS_CATEGORY
    difficulty: int = Field(ge=1, le=4)
    setup: list[str] = Field(default_factory=list)
    check: str
    user: SessionUser = "root"
    source: str = ""
    reason: str = PENDING_REASON

    def draft(self) -> ScenarioBundle:
        """The task as a bundle to PLAY (a solver's episode needs one), with a do-nothing placeholder reference.

        Never hand a draft to the gate or a dataset: only ``prove`` makes a bundle that may be certified."""
        return parse_bundle(
            {
                "id": self.id,
                "task": self.task,
                "category": self.category,
                "difficulty": self.difficulty,
                "setup": self.setup,
                "check": self.check,
                "user": self.user,
                "reference": [UNPROVED_REFERENCE],
                "source": self.source,
            }
        )

    def prove(self, commands: list[str], solver: str) -> ScenarioBundle:
        """The bundle whose reference is what a solver typed (it still goes through the gate like any other)."""
        return parse_bundle(
            {
                "id": self.id,
                "task": self.task,
                "category": self.category,
                "difficulty": self.difficulty,
                "setup": self.setup,
                "check": self.check,
                "user": self.user,
                "reference": list(commands),
                "source": f"{self.source} [reference by {solver}]",
            }
        )


class PublicImport(BaseModel):
    """What an importer made of a source: bundles (with a reference), pending tasks, and the quarantine."""

    source: str
    bundles: list[ScenarioBundle] = Field(default_factory=list)
    pending: list[PendingTask] = Field(default_factory=list)
    quarantine: list[BundleError] = Field(default_factory=list)
    records: int = 0

    def counts(self) -> dict[str, int]:
        return {
            "records": self.records,
            "bundles": len(self.bundles),
            "pending": len(self.pending),
            "quarantined": len(self.quarantine),
        }


# ---- reading records through ``datasets`` ------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """A value as plain Python: numpy arrays/scalars from parquet become lists/ints, NaN (pandas' missing) None."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _rows(dataset: Any, locator: str) -> Iterator[tuple[str, Any]]:
    """(locator:row, record) of a ``Dataset``, or of every split of a ``DatasetDict`` (split named)."""
    import datasets

    if isinstance(dataset, (datasets.DatasetDict, datasets.IterableDatasetDict)):  # every split, named
        for split in dataset:
            yield from _rows(dataset[split], f"{locator}[{split}]")
        return
    for index, row in enumerate(dataset):
        yield f"{locator}:{index + 1}", _plain(dict(row))


def _jsonl_lines(path: Path, locator: str) -> Iterator[tuple[str, Any]]:
    """A JSON Lines file judged line by line (bytes first: one line that is not UTF-8 spares the others)."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        where = f"{locator}:{n}"
        try:
            yield where, json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            yield where, ValueError(f"not UTF-8 text: {exc}")
        except json.JSONDecodeError as exc:
            yield where, ValueError(f"not valid JSON (a truncated line?): {exc}")


def _fallback(path: Path, locator: str, why: str) -> Iterator[tuple[str, Any]]:
    """When ``datasets`` refuses a JSON file (one bad line fails its whole Arrow table), read it ourselves."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        yield from _jsonl_lines(path, locator)
        return
    if path.suffix.lower() == ".json":
        try:
            documents = parse_documents(read_text_file(path), locator)
        except ValueError as exc:
            yield locator, ValueError(f"unreadable: {exc}")
            return
        if len(documents) > 1:  # JSON Lines in a .json file
            yield from _jsonl_lines(path, locator)
            return
        where, document = documents[0]
        if isinstance(document, list):
            if not document:
                yield where, ValueError("an empty list: no record in it")
            for i, record in enumerate(document, 1):
                yield f"{where}:{i}", record
        else:
            yield where, document
        return
    if path.suffix.lower() == ".csv":
        yield from _csv_rows(path, locator, why)
        return
    yield locator, ValueError(f"unreadable by datasets: {why}")


def _csv_rows(path: Path, locator: str, why: str) -> Iterator[tuple[str, Any]]:
    """A CSV file ``datasets`` refused (a row with too many fields fails its whole table), row by row."""
    try:
        text = read_text_file(path)
    except ValueError as exc:
        yield locator, ValueError(f"unreadable: {exc}")
        return
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, None)
    if not header:
        yield locator, ValueError(f"unreadable by datasets ({why}) and no CSV header")
        return
    for n, row in enumerate(rows, 2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            yield (
                f"{locator}:{n}",
                ValueError(f"a CSV row of {len(row)} fields under a header of {len(header)}"),
            )
            continue
        yield f"{locator}:{n}", {k: (v if v != "" else None) for k, v in zip(header, row, strict=True)}


def _data_files(folder: Path) -> tuple[list[Path], list[BundleError]]:
    files, skipped = [], []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.suffix.lower() in LOADERS:
            files.append(path)
        elif path.name.lower() not in ("readme.md", "license", "license.txt", ".gitattributes"):
            skipped.append(
                BundleError(
                    source=str(path),
                    reason=f"not a data file datasets reads here ({', '.join(sorted(LOADERS))})",
                )
            )
    return files, skipped


def _quiet_datasets() -> Any:
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return datasets


def iter_local_records(path: Path | str) -> Iterator[tuple[str, Any]]:
    """Every record of a local file or folder, read with ``datasets.load_dataset`` one file at a time.

    Yields ``(locator, record)``; a record that could not be read is an exception in its place (the caller
    quarantines it). Files are cached in a temporary folder that goes away: a local import leaves no Arrow cache.
    """
    path = Path(path)
    if path.is_dir():
        files, skipped = _data_files(path)
        for error in skipped:
            yield error.source, ValueError(error.reason)
        if not files and not skipped:
            yield str(path), ValueError("an empty folder: no data file in it")
    elif path.is_file():
        files = [path]
    else:
        yield str(path), ValueError("no such file or folder")
        return
    datasets = _quiet_datasets()
    for file in files:
        locator = str(file)
        loader = LOADERS.get(file.suffix.lower())
        if loader is None:
            yield locator, ValueError(f"not a data file datasets reads here ({', '.join(sorted(LOADERS))})")
            continue
        if file.stat().st_size == 0:
            yield locator, ValueError("an empty file: no record in it")
            continue
        with tempfile.TemporaryDirectory(prefix="bashgym-datasets-") as cache:
            try:
                table = datasets.load_dataset(
                    loader, data_files=str(file), split="train", cache_dir=cache, keep_in_memory=True
                )
                rows = list(_rows(table, locator))
            except (
                Exception
            ) as exc:  # datasets wraps pyarrow's errors in many classes: all mean "not readable"
                yield from _fallback(file, locator, _one_line(exc))
                continue
        if not rows:
            yield locator, ValueError("no record in it")
        yield from rows


def iter_records(
    source: str | Path, split: str | None = None, **load_kwargs: Any
) -> Iterator[tuple[str, Any]]:
    """Records of a local path (``iter_local_records``) or of a hub dataset, the name passed through to
    ``datasets.load_dataset`` (``split`` None: every split). A hub that cannot be loaded is one error record."""
    if Path(source).exists():
        yield from iter_local_records(source)
        return
    datasets = _quiet_datasets()
    name = str(source)
    try:
        table = datasets.load_dataset(name, split=split, **load_kwargs)
        rows = list(_rows(table, name if split is None else f"{name}[{split}]"))
    except Exception as exc:  # no network, no such dataset, a private one: said, not raised
        yield name, ValueError(f"could not load {name!r} with datasets: {_one_line(exc)}")
        return
    yield from rows


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 400 else text[:400] + "..."


# ---- shell-tasks records ------------------------------------------------------------------------------------------
def _text_field(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if value is None:
        raise ValueError(f"missing field: {key}")
    if not isinstance(value, str):
        raise ValueError(f"{key} must be text, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{key} is empty")
    return value


def _commands(value: Any, key: str) -> list[str]:
    """A list of shell commands (a single string is one command); anything else is a typed error."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v.strip()]
    raise ValueError(
        f"{key} must be a list of shell commands (text), got {type(value).__name__}"
        + (f" holding {sorted({type(v).__name__ for v in value})}" if isinstance(value, list) else "")
    )


def _difficulty(value: Any) -> int:
    if value is None:
        return 2
    if isinstance(value, bool):
        raise ValueError(f"difficulty_level must be an integer 1..4, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise ValueError(f"difficulty_level must be an integer 1..4, got {value!r}")
    return min(4, max(1, value))


def shell_task_id(record: dict[str, Any], prefix: str = SHELL_TASKS_PREFIX) -> str:
    """``st.<task_id>`` (slugged) when the record names itself, else ``st.<hash of task, setup and check>``."""
    given = record.get("task_id", record.get("id"))
    if isinstance(given, (str, int)) and not isinstance(given, bool) and str(given).strip():
        slug = slugify(str(given))[: 95 - len(prefix)].rstrip("-._")
        if slug:
            return prefix + slug
    payload = json.dumps(
        [record.get("task"), record.get("setup_commands"), record.get("success_condition")],
        sort_keys=True,
        default=str,
    )
    return prefix + hashlib.sha256(payload.encode()).hexdigest()[:16]


def shell_task_record(
    record: Any, locator: str, user: str = "root", prefix: str = SHELL_TASKS_PREFIX
) -> ScenarioBundle | PendingTask:
    """One shell-tasks record: a bundle when it carries a reference, else a pending task; ValueError otherwise."""
    if not isinstance(record, dict):
        raise ValueError(f"a shell task is a mapping, got {type(record).__name__}")
    task = _text_field(record, "task")
    check = _text_field(record, "success_condition")
    setup = _commands(record.get("setup_commands"), "setup_commands")
    reference: list[str] = []
    for key in REFERENCE_KEYS:
        if record.get(key) is not None:
            value = record[key]
            reference = (
                [ln for ln in value.splitlines() if ln.strip()]
                if isinstance(value, str)
                else _commands(value, key)
            )
            break
    rec_user = record.get("user") or user
    category = (
        record.get("category")
        if isinstance(record.get("category"), str) and record["category"].strip()
        else SHELL_TASKS_CATEGORY
    )
    data = {
        "id": shell_task_id(record, prefix),
        "task": task,
        "category": category,
        "difficulty": _difficulty(record.get("difficulty_level", record.get("difficulty"))),
        "setup": setup,
        "check": check,
        "user": rec_user,
        "source": f"import:shell-tasks:{locator}",
    }
    if reference:
        return parse_bundle({**data, "reference": reference})
    draft = parse_bundle(
        {**data, "reference": [UNPROVED_REFERENCE]}
    )  # every field but the reference validated
    return PendingTask(
        id=draft.id,
        task=draft.task,
        category=draft.category,
        difficulty=draft.difficulty,
        setup=draft.setup,
        check=draft.check,
        user=draft.user,
        source=draft.source,
    )


def load_shell_tasks(
    source: str | Path = SHELL_TASKS_HUB,
    split: str | None = None,
    user: str = "root",
    prefix: str = SHELL_TASKS_PREFIX,
    limit: int | None = None,
    **load_kwargs: Any,
) -> PublicImport:
    """The shell-tasks dataset (hub name or local folder/file) as bundles + pending tasks + quarantine.

    A repeated id is quarantined (the first one wins); ``limit`` stops after that many records.
    """
    out = PublicImport(source=str(source))
    seen: dict[str, str] = {}
    for locator, record in iter_records(source, split=split, **load_kwargs):
        if limit is not None and out.records >= limit:
            break
        if isinstance(record, Exception):
            out.quarantine.append(BundleError(source=locator, reason=str(record)))
            continue
        out.records += 1
        try:
            item = shell_task_record(record, locator, user=user, prefix=prefix)
        except ValueError as exc:
            out.quarantine.append(BundleError(source=locator, reason=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - an odd record this module did not foresee spares the others
            out.quarantine.append(
                BundleError(source=locator, reason=f"could not be read: {type(exc).__name__}: {exc}")
            )
            continue
        if item.id in seen:
            out.quarantine.append(
                BundleError(source=locator, reason=f"duplicate id {item.id!r} (first at {seen[item.id]})")
            )
            continue
        seen[item.id] = locator
        if isinstance(item, ScenarioBundle):
            out.bundles.append(item)
        else:
            out.pending.append(item)
    return out
