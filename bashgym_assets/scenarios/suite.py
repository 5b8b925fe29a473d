"""An external shell-task suite as one path: import a Terminal-Bench 1.x / Harbor 2.x folder, gate its tasks in real
sandboxes, and hand the admitted ones to the evaluation (``bashgym suite import|gate|eval PATH``).

Plain Python, no Dagster: the ``bashgym suite`` command is a thin layer over it, and the ``scenario_candidates`` /
``gated_scenarios`` assets use its refusal checks so a suite refused whole is said loudly there too.

Where things go (the tables the assets write, so ``bashgym sql`` and the notebooks read them the same way): what
the gate admitted into ``gated_scenarios``, what it refused (with the reason and the evidence) into
``gate_rejections``, the task folders the importer quarantined into ``scenario_candidates_quarantine``, each in the
partition ``suite-<name>``. The pipeline's own tables are the ``__all__`` partition and are never touched: every
stage that trains or judges reads that one only (``Lake.read``), while the SQL views hold every partition, with a
``_partition`` column. The evaluation's episodes go to ``eval_episodes`` like ``bashgym eval``'s.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from bashgym_assets.scenarios import external
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.gate import GateLimits, GateResult, gate_bundles, is_external

PARTITION_PREFIX = "suite-"
MAX_DEPTH = 3  # how deep a folder is searched for task folders (the importer's own depth)
DETAIL_CHARS = 1200  # of a refusal's evidence, in the terminal (the whole of it is in gate_rejections)

# The gate's tables, as the assets write them (``defs.scenarios`` imports them from here).
QUARANTINE_SCHEMA = pa.schema([("source", pa.string()), ("reason", pa.string())])
GATED_SCHEMA = pa.schema(
    [
        ("scenario_id", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.int32()),
        ("source", pa.string()),
        ("split", pa.string()),
        ("reference_turns", pa.int32()),
        ("duration_s", pa.float64()),
        ("bundle_json", pa.string()),
    ]
)
REJECTION_SCHEMA = pa.schema(
    [
        ("scenario_id", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.int32()),
        ("source", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("bundle_json", pa.string()),
    ]
)


def slug(name: str) -> str:
    """A suite name as it reads in ids and partition names: the importer's own rule (``external.name_slug``)."""
    return external.name_slug(name, empty="suite")


def partition_for(suite: str) -> str:
    return f"{PARTITION_PREFIX}{slug(suite)}"


# ---- finding suites ---------------------------------------------------------------------------------------------
def task_folders(path: Path | str, depth: int = MAX_DEPTH) -> list[Path]:
    """The Terminal-Bench 1.x / Harbor 2.x task folders at or under ``path`` (the folder itself when it is one)."""
    root = Path(path)
    if external.detect_layout(root):
        return [root]
    found: list[Path] = []

    def walk(folder: Path, level: int) -> None:
        try:
            children = sorted(
                p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))
            )
        except OSError:
            return
        for child in children:
            if external.detect_layout(child):
                found.append(child)
            elif level + 1 < depth:
                walk(child, level + 1)

    walk(root, 0)
    return found


def not_bundles_hint(path: Path | str, tasks: Sequence[Path]) -> str:
    """What to say when a folder of raw suite task folders is given where scenario bundles are expected."""
    return (
        f"{path} is an external shell-task suite ({len(tasks)} Terminal-Bench/Harbor task folder(s), e.g. "
        f"{tasks[0].name}), not a folder of scenario bundles: its tasks must be imported and certified by the "
        f"gate first. `bashgym suite eval {shlex.quote(str(path))}` does all of it (import, gate, then this "
        "evaluation, with the same options); `bashgym suite import` / `bashgym suite gate` show each step"
    )


# ---- import -----------------------------------------------------------------------------------------------------
class SuiteImport(BaseModel):
    """One suite folder through the importer: the bundles (evaluation only, ``ext-`` ids) and the task folders that
    could not be reproduced offline, each with its reason."""

    path: str
    suite: str
    bundles: list[ScenarioBundle]
    quarantine: list[external.ExternalQuarantine]

    @property
    def tasks(self) -> int:
        return len(self.bundles) + len(self.quarantine)

    def refusal(self) -> str | None:
        """Why nothing of this suite can be evaluated (every task folder quarantined, or none found); else None."""
        if self.bundles:
            return None
        if not self.quarantine:
            return (
                f"suite {self.suite!r} ({self.path}): no task folder found (a Terminal-Bench 1.x task has a "
                "task.yaml, a Harbor 2.x task a task.toml or instruction.md)"
            )
        reasons = Counter(_first_line(q.reason) for q in self.quarantine)
        top = "; ".join(f"{r} ({n})" if n > 1 else r for r, n in reasons.most_common(3))
        return (
            f"suite {self.suite!r} ({self.path}): every task folder was quarantined ({len(self.quarantine)} of "
            f"{self.tasks}), nothing of it can be gated or evaluated: {top}"
        )


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def import_folder(path: Path | str, name: str | None = None) -> SuiteImport:
    """One suite folder (or one task folder: a suite of one) through the importer; never raises on bad input."""
    bundles, quarantine = external.import_suite(path, name)
    suite = (
        name
        or next((external.suite_of(b.source) for b in bundles), None)
        or next((q.suite for q in quarantine), None)
        or Path(path).name
    )
    return SuiteImport(path=str(path), suite=suite, bundles=bundles, quarantine=quarantine)


def import_folders(paths: Iterable[Path | str]) -> list[SuiteImport]:
    """Several suite folders (``BASHGYM_EVAL_SUITE_DIRS``), each named after its folder."""
    return [import_folder(p) for p in paths]


# ---- the gate ---------------------------------------------------------------------------------------------------
class SuiteGate(BaseModel):
    """The gate's verdict on every imported task of one suite."""

    imported: SuiteImport
    results: list[GateResult]

    @property
    def admitted(self) -> list[GateResult]:
        return [r for r in self.results if r.admitted]

    @property
    def refused(self) -> list[GateResult]:
        return [r for r in self.results if not r.admitted]

    def bundles(self) -> list[ScenarioBundle]:
        """The admitted tasks as bundles (by id)."""
        ids = {r.scenario_id for r in self.admitted}
        return sorted((b for b in self.imported.bundles if b.id in ids), key=lambda b: b.id)

    def refusal(self) -> str | None:
        """Why nothing of this suite can be evaluated (import or gate refused everything); else None."""
        if (why := self.imported.refusal()) is not None:
            return why
        if self.admitted:
            return None
        reasons = Counter(r.reason for r in self.results)
        return (
            f"suite {self.imported.suite!r}: the gate refused every imported task ({len(self.results)}: "
            + ", ".join(f"{r} {n}" for r, n in reasons.most_common())
            + "), nothing of it can be evaluated; the reasons and evidence are above and in gate_rejections"
        )


def gate(
    imported: SuiteImport,
    image: str | None,
    *,
    max_parallel: int | None = None,  # default: the cores (gate.default_parallelism)
    limits: GateLimits | None = None,
    progress: Callable[[GateResult], Any] | None = None,
) -> SuiteGate:
    """Certify every imported task in a fresh sandbox (``gate.gate_bundles``): setup works, the check fails on
    the untouched state and passes after the reference solution."""
    results = gate_bundles(
        imported.bundles, image, max_parallel=max_parallel, limits=limits, progress=progress
    )
    return SuiteGate(imported=imported, results=results)


def refused_by_gate(results: Iterable[GateResult]) -> dict[str, list[GateResult]]:
    """External suites none of whose gated tasks was admitted: suite name -> its results (the assets' warning)."""
    by_suite: dict[str, list[GateResult]] = {}
    for r in results:
        if is_external(r.scenario_id):
            by_suite.setdefault(external.suite_of(r.source) or r.scenario_id, []).append(r)
    return {s: rs for s, rs in sorted(by_suite.items()) if not any(r.admitted for r in rs)}


def gate_refusal_line(suite: str, results: Sequence[GateResult]) -> str:
    reasons = Counter(r.reason for r in results)
    return (
        f"external suite {suite!r}: the gate refused all {len(results)} of its tasks ("
        + ", ".join(f"{r} {n}" for r, n in reasons.most_common())
        + "): nothing of it will be evaluated (see gate_rejections)"
    )


# ---- the lake ---------------------------------------------------------------------------------------------------
def write_gate(lake: Any, verdict: SuiteGate) -> str:
    """The suite's rows into the gate's tables (partition ``suite-<name>``, replaced whole); returns the partition."""
    partition = partition_for(verdict.imported.suite)
    lake.write(
        "gated_scenarios",
        [{k: r.model_dump()[k] for k in GATED_SCHEMA.names} for r in verdict.admitted],
        partition=partition,
        schema=GATED_SCHEMA,
    )
    lake.write(
        "gate_rejections",
        [{k: r.model_dump()[k] for k in REJECTION_SCHEMA.names} for r in verdict.refused],
        partition=partition,
        schema=REJECTION_SCHEMA,
    )
    lake.write(
        "scenario_candidates_quarantine",
        [q.to_bundle_error().model_dump() for q in verdict.imported.quarantine],
        partition=partition,
        schema=QUARANTINE_SCHEMA,
    )
    return partition


def gated_rows(lake: Any) -> list[dict[str, Any]]:
    """``gated_scenarios`` rows of the pipeline (``__all__``) and of every suite gated by ``bashgym suite``
    (``suite-*``); a task gated both ways counts once, as the suite command last gated it."""
    from bashgym_assets.lake import UNPARTITIONED

    rows: dict[str, dict[str, Any]] = {}
    parts = [
        p for p in lake.partitions("gated_scenarios") if p == UNPARTITIONED or p.startswith(PARTITION_PREFIX)
    ]
    for part in sorted(parts, key=lambda p: p != UNPARTITIONED):
        for i, row in enumerate(lake.read("gated_scenarios", part).to_pylist()):
            rows[_row_id(row) or f"{part}#{i}"] = row  # a row without an id is kept (never dropped unseen)
    return list(rows.values())


def _row_id(row: Mapping[str, Any]) -> str:
    """A gated row's scenario id: its column, else the id inside its bundle."""
    if row.get("scenario_id"):
        return str(row["scenario_id"])
    try:
        return str(json.loads(row.get("bundle_json") or "{}").get("id") or "")
    except (TypeError, ValueError):
        return ""


# ---- picking a suite's tasks ------------------------------------------------------------------------------------
def in_suite(bundle_id: str, source: str, name: str) -> bool:
    """An external task of suite ``name``: its suite's name (as given, or as it reads in ids) or a prefix of its
    id (``ext-term-bench-``)."""
    name = name.strip()
    if not name or not is_external(bundle_id):
        return False
    suite = external.suite_of(source)
    return bundle_id.startswith(name) or (bool(suite) and (suite == name or slug(suite) == slug(name)))


def of_suites(bundles: Iterable[ScenarioBundle], names: Sequence[str]) -> list[ScenarioBundle]:
    return [b for b in bundles if any(in_suite(b.id, b.source, n) for n in names)]


def known_suites(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The external suites in ``gated_scenarios`` rows (for an error that names what there is)."""
    return sorted(
        {
            external.suite_of(str(r.get("source") or ""))
            for r in rows
            if is_external(str(r.get("scenario_id") or ""))
        }
        - {""}
    )


# ---- what the terminal shows ------------------------------------------------------------------------------------
def _layout(source: str) -> str:
    parts = source.split(":")
    return parts[2] if len(parts) >= 4 else "?"


def import_lines(imp: SuiteImport) -> list[str]:
    """The import's verdict: each task imported or quarantined (with the reason)."""
    lines = [
        f"suite {imp.suite!r} ({imp.path}): {imp.tasks} task folder(s), {len(imp.bundles)} imported, "
        f"{len(imp.quarantine)} quarantined"
    ]
    if imp.bundles:
        lines.append("imported (evaluation only, always held out):")
        width = max(len(b.id) for b in imp.bundles)
        lines += [
            f"  {b.id.ljust(width)}  {_layout(b.source):8}  {b.category}, difficulty {b.difficulty}"
            for b in imp.bundles
        ]
    if imp.quarantine:
        lines.append("quarantined (not reproducible offline in the sandbox image):")
        width = max(len(q.task or "(suite)") for q in imp.quarantine)
        for q in imp.quarantine:
            reason = q.reason.strip().replace("\n", "\n" + " " * (width + 14))
            lines.append(f"  {(q.task or '(suite)').ljust(width)}  {q.layout or '?':8}  {reason}")
    return lines


def gate_lines(verdict: SuiteGate) -> list[str]:
    """The gate's verdict: admitted tasks, and each refused one with its reason and evidence."""
    lines = [
        f"gate: {len(verdict.admitted)} of {len(verdict.results)} imported task(s) admitted (held out), "
        f"{len(verdict.refused)} refused"
    ]
    for r in verdict.admitted:
        lines.append(
            f"  admitted  {r.scenario_id}  ({r.reference_turns} reference turn(s), {r.duration_s:.0f} s)"
        )
    for r in verdict.refused:
        lines.append(f"  refused   {r.scenario_id}: {r.reason}")
        detail = r.detail.strip()
        if len(detail) > DETAIL_CHARS:
            detail = (
                detail[:DETAIL_CHARS]
                + f"... ({len(r.detail)} characters: the whole of it is in gate_rejections)"
            )
        lines += [f"      {line}" for line in detail.splitlines()]
    return lines


def lake_lines(partition: str) -> list[str]:
    return [
        f"lake: gated_scenarios, gate_rejections and scenario_candidates_quarantine, partition {partition}:",
        f'  bashgym sql "select scenario_id, reason, detail from gate_rejections where _partition = '
        f"'{partition}'\"",
    ]
