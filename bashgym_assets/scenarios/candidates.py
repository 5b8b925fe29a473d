"""Where candidate scenarios come from: the bundled pack, imported task files and (optionally) a teacher model.

The import folder takes scenario bundles and shell-tasks records alike, in JSON, JSON Lines or YAML files of any
name (``bundle.import_scenario_files``): the layout is read from each record's keys.

Every source yields bundles plus quarantined failures with their reason; one bad file never hides the good ones.
Ids are unique across sources: a later bundle reusing an id is quarantined, not silently dropped or overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel

from bashgym_assets.config import PROJECT_ROOT
from bashgym_assets.scenarios.bundle import BundleError, ScenarioBundle, import_scenario_files, load_folder

PACK_DIR = PROJECT_ROOT / "bashgym_assets" / "data" / "scenario_pack"
PACK_SOURCE = "bashgym-pack"


class CandidateSet(BaseModel):
    bundles: list[ScenarioBundle]
    quarantine: list[BundleError]
    counts_by_origin: dict[str, int]


def load_pack(folder: Path = PACK_DIR) -> tuple[list[ScenarioBundle], list[BundleError]]:
    """The bundled scenario pack (one JSON per scenario), source defaulting to the pack's name."""
    bundles, errors = load_folder(folder)
    return [b if b.source else b.model_copy(update={"source": PACK_SOURCE}) for b in bundles], errors


def origin(bundle: ScenarioBundle) -> str:
    """Coarse origin for metadata: pack, import, teacher or factory."""
    if bundle.source.startswith("factory:"):
        return "factory"
    if bundle.source.startswith("teacher:"):
        return "teacher"
    if bundle.source.startswith("import:"):
        return "import"
    return "pack"


def merge_candidates(*groups: Iterable[ScenarioBundle]) -> tuple[list[ScenarioBundle], list[BundleError]]:
    """Concatenate sources in priority order; a repeated id is quarantined with the id's first source named."""
    seen: dict[str, str] = {}
    out: list[ScenarioBundle] = []
    dupes: list[BundleError] = []
    for group in groups:
        for bundle in group:
            if bundle.id in seen:
                dupes.append(
                    BundleError(
                        source=bundle.source or bundle.id,
                        reason=f"duplicate id {bundle.id!r} (first from {seen[bundle.id]})",
                    )
                )
                continue
            seen[bundle.id] = bundle.source
            out.append(bundle)
    return out, dupes


def collect_candidates(
    pack_dir: Path | None = PACK_DIR,
    import_dir: Path | None = None,
    authored: Iterable[ScenarioBundle] = (),
    authoring_errors: Iterable[BundleError] = (),
) -> CandidateSet:
    """Pack + imports + already-authored bundles, merged, with every failure kept."""
    quarantine: list[BundleError] = list(authoring_errors)
    pack: list[ScenarioBundle] = []
    if pack_dir is not None and Path(pack_dir).is_dir():
        pack, errors = load_pack(Path(pack_dir))
        quarantine += errors
    imported: list[ScenarioBundle] = []
    if import_dir is not None and Path(import_dir).exists():
        imported, errors = import_scenario_files(
            [import_dir]
        )  # bundles and shell tasks, told apart by content
        quarantine += errors
    bundles, dupes = merge_candidates(pack, imported, authored)
    quarantine += dupes
    counts: dict[str, int] = {}
    for b in bundles:
        counts[origin(b)] = counts.get(origin(b), 0) + 1
    return CandidateSet(bundles=bundles, quarantine=quarantine, counts_by_origin=counts)


def candidate_rows(bundles: Iterable[ScenarioBundle]) -> list[dict[str, object]]:
    """Lake rows for ``scenario_candidates``: the searchable fields plus the whole bundle as JSON."""
    return [
        {
            "scenario_id": b.id,
            "category": b.category,
            "difficulty": b.difficulty,
            "user": b.user,
            "announced": b.announced,
            "origin": origin(b),
            "source": b.source,
            "task": b.task,
            "bundle_json": b.model_dump_json(exclude_none=True),
        }
        for b in bundles
    ]


def quarantine_rows(errors: Iterable[BundleError]) -> list[dict[str, str]]:
    return [{"source": e.source, "reason": e.reason} for e in errors]


def sample_pack(
    bundles: list[ScenarioBundle], n: int, split_of: Callable[[str], str], held_out_share: float = 0.4
) -> list[ScenarioBundle]:
    """A small, deterministic slice of the pack for smoke runs (``bashgym demo --quick``): both splits present
    (about ``held_out_share`` held out, at least one of each when ``n`` >= 2), categories taken in turn so every
    skill shows up, the easiest and then alphabetically first bundles of a category first.

    Why not a random sample: a smoke run must gate, train and evaluate the same scenarios every time, and a random
    slice of 16 could hold no held-out scenario at all (then nothing would be evaluated).
    """
    if n >= len(bundles):
        return list(bundles)
    n_held = min(max(1 if n >= 2 else 0, round(n * held_out_share)), n)
    picked: list[ScenarioBundle] = []
    for split, quota in (("held_out", n_held), ("train", n - n_held)):
        by_category: dict[str, list[ScenarioBundle]] = {}
        for b in sorted(bundles, key=lambda b: (b.difficulty, b.id)):
            if split_of(b.id) == split:
                by_category.setdefault(b.category, []).append(b)
        queues = [by_category[c] for c in sorted(by_category)]
        taken = 0
        while taken < quota and any(queues):
            for queue in queues:
                if queue and taken < quota:
                    picked.append(queue.pop(0))
                    taken += 1
    return picked
