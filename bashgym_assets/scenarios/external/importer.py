"""Finding the task folders of a suite, telling their layout, and turning each into a bundle or a quarantine
entry: the one entry point the rest of bashgym calls (through the package)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from bashgym_assets.scenarios.bundle import ScenarioBundle, format_validation_error
from bashgym_assets.scenarios.external.check import build_check
from bashgym_assets.scenarios.external.common import (
    HARBOR,
    LAYOUTS,
    MAX_SUITE_DEPTH,
    SOLUTION_DIR,
    TB1,
    USER_SOLUTION_DIR,
    Budget,
    ExternalQuarantine,
    Unimportable,
    external_id,
    one_line,
)
from bashgym_assets.scenarios.external.harbor import harbor_task
from bashgym_assets.scenarios.external.tasks import build_reference
from bashgym_assets.scenarios.external.tb1 import tb1_task

_TASK_MARKERS = frozenset(
    {"task.toml", "instruction.md", "task.yaml", "task.yml", "run-tests.sh", "solution.sh", "solution.yaml"}
)


# ---- task folders ----------------------------------------------------------------------------------------------
def detect_layout(folder: Path | str) -> str | None:
    """``harbor2`` (task.toml / instruction.md), ``tb1`` (task.yaml) or None when it is not a task folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return None
    if "task.toml" in names or ("instruction.md" in names and not names & {"task.yaml", "task.yml"}):
        return HARBOR
    if names & {"task.yaml", "task.yml"}:
        return TB1
    return None


def _looks_like_task(folder: Path) -> bool:
    """A folder that wanted to be a task (a task-ish file, or tests beside a solution or an environment)."""
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    return bool(names & _TASK_MARKERS) or ("tests" in names and bool(names & {"solution", "environment"}))


def import_task(folder: Path | str, suite: str, layout: str | None = None) -> ScenarioBundle:
    """One task folder as a bundle; raises ``Unimportable`` with the reason."""
    folder = Path(folder)
    layout = layout or detect_layout(folder)
    if layout not in LAYOUTS:
        raise Unimportable(
            "not a task folder: no task.toml/instruction.md (Harbor 2.x) nor task.yaml (Terminal-Bench 1.x)"
        )
    budget = Budget()
    task = harbor_task(folder, budget) if layout == HARBOR else tb1_task(folder, budget)
    source = f"external:{suite}:{layout}:{folder.name}"
    start = task.env.start_dir
    check = build_check(task.tests, start, source)  # run as root, in the agent's start folder
    reference = build_reference(
        task.solution_files,
        task.solution_entry,
        task.solution_commands,
        task.solution_env,
        SOLUTION_DIR if task.env.user == "root" else USER_SOLUTION_DIR,
    )
    try:
        return ScenarioBundle(
            id=external_id(suite, folder.name),
            task=task.instruction,
            category=task.category,
            difficulty=task.difficulty,
            setup=task.env.setup,
            files=task.env.files,
            user=task.env.user,
            workdir=start,
            check=check,
            reference=reference,
            source=source,
        )
    except ValidationError as exc:
        raise Unimportable(format_validation_error(exc)) from exc


def _task_folders(root: Path, depth: int = 0) -> tuple[list[tuple[Path, str]], list[Path]]:
    """(task folders with their layout, folders that look like tasks but are neither layout) under ``root``."""
    tasks: list[tuple[Path, str]] = []
    odd: list[Path] = []
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    except OSError:
        return tasks, odd
    for child in children:
        layout = detect_layout(child)
        if layout:
            tasks.append((child, layout))
        elif depth + 1 < MAX_SUITE_DEPTH:
            inner, inner_odd = _task_folders(child, depth + 1)
            if inner or inner_odd:
                tasks += inner
                odd += inner_odd
            elif _looks_like_task(child):
                odd.append(child)
        elif _looks_like_task(child):
            odd.append(child)
    return tasks, odd


def _refused(suite: str, path: Path, layout: str, reason: str) -> ExternalQuarantine:
    return ExternalQuarantine(suite=suite, task=path.name, layout=layout, reason=reason, path=str(path))


def import_suite(
    folder: Path | str, suite: str | None = None
) -> tuple[list[ScenarioBundle], list[ExternalQuarantine]]:
    """Every task of a suite folder (a folder of task folders, or one task folder) -> (bundles, quarantine).

    Never raises: a folder that cannot be imported becomes a quarantine entry with its reason and the other tasks
    of the suite are still imported.
    """
    folder = Path(folder)
    bundles: list[ScenarioBundle] = []
    quarantine: list[ExternalQuarantine] = []
    if not folder.is_dir():
        return [], [
            ExternalQuarantine(
                suite=suite or folder.name, task="", reason=f"not a folder: {folder}", path=str(folder)
            )
        ]
    layout = detect_layout(folder)
    tasks: list[tuple[Path, str]]
    odd: list[Path]
    if layout:
        suite = suite or folder.parent.name or folder.name
        tasks, odd = [(folder, layout)], []
    else:
        suite = suite or folder.name
        tasks, odd = _task_folders(folder)
    for path in odd:
        quarantine.append(
            ExternalQuarantine(
                suite=suite,
                task=path.name,
                path=str(path),
                reason=(
                    "not a recognised task layout: no task.toml/instruction.md (Harbor 2.x) nor task.yaml "
                    "(Terminal-Bench 1.x)"
                ),
            )
        )
    seen: dict[str, str] = {}
    for path, task_layout in tasks:
        try:
            bundle = import_task(path, suite, task_layout)
        except Unimportable as exc:
            quarantine.append(_refused(suite, path, task_layout, str(exc)))
            continue
        except Exception as exc:  # never let one odd folder stop the suite
            reason = f"import failed: {type(exc).__name__}: {one_line(exc)}"
            quarantine.append(_refused(suite, path, task_layout, reason))
            continue
        if bundle.id in seen:
            reason = f"duplicate id {bundle.id!r} (first from {seen[bundle.id]})"
            quarantine.append(_refused(suite, path, task_layout, reason))
            continue
        seen[bundle.id] = str(path)
        bundles.append(bundle)
    return bundles, quarantine


def import_suites(folders: Iterable[Path | str]) -> tuple[list[ScenarioBundle], list[ExternalQuarantine]]:
    """Several suite folders (``BASHGYM_EVAL_SUITE_DIRS``); the suite name is each folder's name."""
    bundles: list[ScenarioBundle] = []
    quarantine: list[ExternalQuarantine] = []
    for folder in folders:
        b, q = import_suite(folder)
        bundles += b
        quarantine += q
    return bundles, quarantine


def suite_of(bundle_source: str) -> str:
    """The suite name in an ``external:<suite>:<layout>:<task>`` source."""
    parts = bundle_source.split(":")
    return parts[1] if len(parts) >= 4 and parts[0] == "external" else ""
