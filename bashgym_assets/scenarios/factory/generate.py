"""Drawing tasks at scale: per family, seeded draws until N *distinct* tasks, every drop counted with its reason.

Distinct means a different instruction once names and numbers are normalised away (``normalise_instruction``):
two draws that only rename files or change a count are one task, however different their worlds. A draw is
dropped, and counted, when:

- ``draw_error``: the family raised (a bug in the family, quarantined with the message; other families go on);
- ``invalid_bundle``: the draft does not make a valid ``ScenarioBundle``;
- ``duplicate_instruction``: its normalised instruction was already drawn in this family (families are
  different skills, so one family's result never depends on which others are drawn with it);
- ``near_duplicate_of_eval``: it is a skill twin or a near-copy of an evaluation task (``similarity.EvalGuard``);
  only train families are guarded, a held-out family's tasks *are* evaluation tasks.

A family that cannot produce N distinct tasks within ``max_draws_factor * N`` draws gives what it has: the report
says so (``exhausted``) instead of looping forever.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.family import Family, all_families
from bashgym_assets.scenarios.factory.phrasing import normalise_instruction
from bashgym_assets.scenarios.factory.split import is_held_out_family

DRAW_ERROR = "draw_error"
INVALID_BUNDLE = "invalid_bundle"
DUPLICATE = "duplicate_instruction"
NEAR_DUPLICATE = "near_duplicate_of_eval"


@dataclass
class FamilyYield:
    """What drawing one family gave: the bundles kept and why the other draws were dropped."""

    family: str
    category: str
    held_out: bool
    wanted: int
    draws: int = 0
    bundles: list[ScenarioBundle] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)  # first few draw errors, for the quarantine
    exhausted: bool = False
    phrasings: dict[str, str] = field(
        default_factory=dict
    )  # kept bundle id -> World.phrasing_id (variety.py)

    @property
    def kept(self) -> int:
        return len(self.bundles)


@dataclass
class FactoryRun:
    """Every family's yield, plus the similarity of kept train tasks to the evaluation tasks."""

    seed: int
    per_family: int
    yields: list[FamilyYield]
    similarities: list[tuple[str, float, float, str]] = field(
        default_factory=list
    )  # id, goal, skeleton, nearest

    @property
    def bundles(self) -> list[ScenarioBundle]:
        return [b for y in self.yields for b in y.bundles]

    def drops(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for y in self.yields:
            total.update(y.drops)
        return total

    @property
    def draws(self) -> int:
        return sum(y.draws for y in self.yields)


Guard = Callable[[ScenarioBundle, Sequence[str]], tuple[bool, float, float, str]]


def draw_family(
    fam: Family,
    n: int,
    seed: int | str = 0,
    max_draws_factor: int = 6,
    guard: Guard | None = None,
    similarities: list[tuple[str, float, float, str]] | None = None,
) -> FamilyYield:
    """Up to ``n`` distinct tasks of one family. ``seed``: a training configuration's number, or a reserved
    stream's name (``split.TRANSFER_SEED``). ``guard(bundle, drawn values) -> (refuse, goal_sim, skeleton_sim,
    nearest)``."""
    held_out = is_held_out_family(fam.name)
    out = FamilyYield(family=fam.name, category=fam.category, held_out=held_out, wanted=n)
    seen: set[str] = set()
    for i in range(max(n * max_draws_factor, n + 20)):
        if out.kept >= n:
            break
        out.draws += 1
        try:
            bundle, world = fam.make_world(f"{seed}:{i}")
            values = world.values
        except ValidationError as exc:
            out.drops[INVALID_BUNDLE] += 1
            if len(out.errors) < 3:
                out.errors.append(f"{INVALID_BUNDLE}: {str(exc)[:300]}")
            continue
        except Exception as exc:  # a family bug is that family's problem, never the run's
            out.drops[DRAW_ERROR] += 1
            if len(out.errors) < 3:
                out.errors.append(f"{DRAW_ERROR}: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        key = normalise_instruction(bundle.task, values)
        if key in seen:
            out.drops[DUPLICATE] += 1
            continue
        if guard is not None and not held_out:
            refuse, goal_sim, skel_sim, nearest = guard(bundle, values)
            if similarities is not None:
                similarities.append((bundle.id, goal_sim, skel_sim, nearest))
            if refuse:
                out.drops[NEAR_DUPLICATE] += 1
                continue
        seen.add(key)
        out.bundles.append(bundle)
        out.phrasings[bundle.id] = world.phrasing_id()
    out.exhausted = out.kept < n
    return out


def evaluation_tasks(suite_dirs: Sequence[Path | str] = ()) -> list[ScenarioBundle]:
    """Every task whose skill must never train: the bundled pack's clean held-out split (its train twins are out of
    the score: ``split.BUNDLED_TRAIN_TWINS``) and the imported external suites (the held-out families are added by
    ``generate``)."""
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.external import import_suites
    from bashgym_assets.scenarios.factory.split import is_bundled_train_twin
    from bashgym_assets.scenarios.gate import HELD_OUT, split_for

    pack, _ = load_pack()
    external, _ = import_suites(list(suite_dirs)) if suite_dirs else ([], [])
    return [b for b in pack if split_for(b.id) == HELD_OUT and not is_bundled_train_twin(b.id)] + list(
        external
    )


def bundled_twin_tasks() -> list[ScenarioBundle]:
    """The pack's held-out tasks whose skill a train family teaches (``split.BUNDLED_TRAIN_TWINS``): out of the
    clean score and of the skill guard, still guarded against being copied into training."""
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.factory.split import is_bundled_train_twin

    pack, _ = load_pack()
    return [b for b in pack if is_bundled_train_twin(b.id)]


def generate(
    per_family: int,
    seed: int = 0,
    families: Sequence[str] | None = None,
    eval_tasks: Sequence[ScenarioBundle] = (),
    max_draws_factor: int = 6,
    progress: Callable[[FamilyYield], None] | None = None,
) -> FactoryRun:
    """Draw every family (or the named ones). Train families are guarded against ``eval_tasks`` plus *all*
    held-out families' tasks at the same ``seed`` and ``per_family`` (drawn here whichever families are asked
    for, so one family's result does not depend on which others are drawn with it)."""
    from bashgym_assets.scenarios.factory.similarity import EvalGuard

    registry = all_families()
    names = list(families) if families else list(registry)
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise KeyError(f"unknown families: {', '.join(unknown)} (known: {len(registry)})")
    held = {
        n: draw_family(registry[n], per_family, seed, max_draws_factor)
        for n in registry
        if is_held_out_family(n)
    }
    train_names = [n for n in names if n not in held]
    guard = EvalGuard([*eval_tasks, *(b for y in held.values() for b in y.bundles)]) if train_names else None
    yields: list[FamilyYield] = []
    similarities: list[tuple[str, float, float, str]] = []
    for name in sorted(names):
        y = (
            held[name]
            if name in held
            else draw_family(registry[name], per_family, seed, max_draws_factor, guard, similarities)
        )
        yields.append(y)
        if progress:
            progress(y)
    return FactoryRun(seed=seed, per_family=per_family, yields=yields, similarities=similarities)
