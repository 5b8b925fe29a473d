"""A task family is one shell skill as code: ``draw(world) -> Draft`` makes one task of it from a seeded world.

A ``Draft`` holds what the gate needs (setup, files, a check on the final state, a reference solution) and what the
operator reads (the instruction). ``to_bundle`` turns it into the same ``ScenarioBundle`` every other source
produces, so generated tasks go through the gate, rollouts, datasets and evaluation unchanged.

Ids are ``gen.<family>.<content hash>``: the family is readable from the id, which is how the held-out *family*
split (``factory.split``) is applied everywhere a split is derived from an id.

Rules a family keeps (``tests/test_factory.py`` enforces what can be enforced):
- the check inspects the final state (files, modes, owners, databases, crontabs, ...), never the commands typed;
- the check fails on the untouched setup and passes after the reference (the gate proves both);
- the instruction is drawn from several phrasings and never names the check's internals;
- every name and number the world drew is recorded (``World.note``) so renamed copies are recognised as such.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bashgym_assets.scenarios.bundle import ScenarioBundle, SessionUser
from bashgym_assets.scenarios.factory.world import World

GENERATED_PREFIX = "gen."
SOURCE_PREFIX = "factory:"
CATEGORIES = (
    "archives",
    "compose",
    "data",
    "disk",
    "environment",
    "files",
    "forensics",
    "git",
    "logs",
    "networking-offline",
    "packaging",
    "permissions",
    "processes",
    "programs",
    "scheduling",
    "scripting",
    "services",
    "structured",
    "text",
    "users",
)


@dataclass
class Draft:
    """One drawn task, before it is a bundle."""

    task: str
    check: str
    reference: list[str]
    difficulty: int
    setup: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    user: SessionUser = "operator"
    workdir: str | None = None


@dataclass(frozen=True)
class Family:
    """One skill: its name (a slug), category, a one-line description and the draw function."""

    name: str
    category: str
    skill: str
    draw: Callable[[World], Draft]

    def make(self, seed: int | str) -> tuple[ScenarioBundle, list[str]]:
        """The bundle for ``seed`` and the values the world drew (for the normaliser)."""
        bundle, world = self.make_world(seed)
        return bundle, list(world.values)

    def make_world(self, seed: int | str) -> tuple[ScenarioBundle, World]:
        """The bundle for ``seed`` and the world it was drawn from (its values and the phrasing it picked)."""
        world = World(f"{self.name}:{seed}")
        draft = self.draw(world)
        return to_bundle(self, draft, seed), world


FAMILIES: dict[str, Family] = {}


def family(
    name: str, category: str, skill: str
) -> Callable[[Callable[[World], Draft]], Callable[[World], Draft]]:
    """Register a draw function as a family (import-time; names are unique)."""
    if category not in CATEGORIES:
        raise ValueError(f"family {name}: unknown category {category!r}")

    def register(draw: Callable[[World], Draft]) -> Callable[[World], Draft]:
        if name in FAMILIES:
            raise ValueError(f"family {name!r} is defined twice")
        if "." in name or name != name.lower():
            raise ValueError(f"family name {name!r} must be a lower-case slug without dots")
        FAMILIES[name] = Family(name=name, category=category, skill=skill, draw=draw)
        return draw

    return register


def to_bundle(fam: Family, draft: Draft, seed: int | str) -> ScenarioBundle:
    # the bundle's fields (validated by ScenarioBundle), hashed into its id
    body: dict[str, Any] = {
        "task": draft.task,
        "category": fam.category,
        "difficulty": draft.difficulty,
        "setup": draft.setup,
        "files": draft.files,
        "user": draft.user,
        "workdir": draft.workdir,
        "check": draft.check,
        "reference": draft.reference,
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    return ScenarioBundle(
        id=f"{GENERATED_PREFIX}{fam.name}.{digest}", source=f"{SOURCE_PREFIX}{fam.name}@{seed}", **body
    )


def family_of(scenario_id: str) -> str | None:
    """The family a generated scenario id belongs to (``gen.<family>.<hash>``), else None."""
    if not scenario_id.startswith(GENERATED_PREFIX):
        return None
    parts = scenario_id.split(".")
    return parts[1] if len(parts) >= 3 and parts[1] else None


def all_families() -> dict[str, Family]:
    """Every family, its modules imported (one module per category under ``factory.families``)."""
    from bashgym_assets.scenarios.factory import families  # noqa: F401  (registers on import)

    return dict(sorted(FAMILIES.items()))
