"""How varied the factory's tasks really are: counted at the level a reviewer reads, not the dedupe normaliser's.

``generate`` keeps a draw when its instruction differs from every kept one once names and numbers are masked, so
"5,280 distinct tasks" is true of wordings. What a model learns from is coarser: how many whole phrasings the
family writes its instructions from, and how many different solutions it asks for. Per family, and in total:

- **whole phrasings**: distinct values of ``World.phrasing_id`` over the kept tasks. A family writes each
  instruction with ``World.phrase(*templates)``; the phrasing is *which whole template was picked* (the ``{a|b}``
  synonyms inside it, the intro, the drawn names and the clause order do not make another one). A family that
  calls ``phrase`` more than once per task has the sequence of templates as its phrasing (``a+b``); one that never
  calls it counts as one phrasing (``-``: its wording is fixed up to synonyms). In total: the sum over families
  (templates belong to a family).
- **solution skeletons**: distinct ``skills.solution_skeleton`` of the references (every line's command, flags,
  pipes and redirects, arguments masked).
- **state-changing cores**: distinct ``skills.state_changing_core`` (the skeleton with look-only lines such as
  ``ls``/``cat`` dropped): the skill a task teaches. In total, skeletons and cores are counted over the whole run
  (a shape two families share counts once).
- **commands** and **command+flag combinations** (``catalog.coverage``).

Where tasks start (issue 39, item 4) is counted too: the session user, the folder the shell starts in (its home,
a folder under it, or a top folder elsewhere: ``/srv``, ``/opt``, ``/app`` ...), and whether the shell starts with
variables set (a file in ``/etc/profile.d`` exports them: the session sources that folder, as a login shell does).

A family is **collapsed** when its kept tasks reduce to ``COLLAPSED_MAX`` (two) or fewer state-changing cores:
however many wordings it has, it teaches one or two command lines. Fewer than ``MIN_TASKS_TO_JUDGE`` kept tasks
are too few to tell a collapsed family from a small draw, so such a family is never flagged.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.catalog import coverage
from bashgym_assets.scenarios.factory.generate import FamilyYield
from bashgym_assets.scenarios.skills import solution_skeleton, state_changing_core

COLLAPSED_MAX = 2  # a family with at most this many distinct state-changing cores is flagged
MIN_TASKS_TO_JUDGE = 10  # ... when it kept at least this many tasks
UNKNOWN_PHRASING = "?"  # a kept bundle drawn without a recorded phrasing (never from ``draw_family``)


@lru_cache(maxsize=65536)
def _shapes(reference: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return solution_skeleton(reference), state_changing_core(reference)


def shape_text(shape: Sequence[str]) -> str:
    """A skeleton or core as one line (lines joined with `` && ``), for tables and the run log."""
    return " && ".join(shape) or "(empty)"


@dataclass(frozen=True)
class FamilyVariety:
    """One family's variety over the tasks it kept."""

    family: str
    category: str
    held_out: bool
    tasks: int
    phrasings: int
    skeletons: int
    cores: int
    commands: int
    command_flags: int
    top_core: str  # the commonest state-changing core, as one line
    top_core_tasks: int  # how many tasks have it

    @property
    def collapsed(self) -> bool:
        return self.tasks >= MIN_TASKS_TO_JUDGE and self.cores <= COLLAPSED_MAX


@dataclass(frozen=True)
class VarietyTotals:
    """The run's variety: sums of per-family phrasings, distinct shapes over the run, medians over families."""

    tasks: int
    families: int
    phrasings: int
    skeletons: int
    cores: int
    commands: int
    command_flags: int
    collapsed: int
    median_phrasings: float
    median_cores: float

    @property
    def core_share(self) -> float:
        """Distinct state-changing cores per task (the hand-written pack keeps most of its items distinct)."""
        return self.cores / self.tasks if self.tasks else 0.0


def family_variety(
    family: str,
    bundles: Sequence[ScenarioBundle],
    phrasings: Mapping[str, str],
    category: str = "",
    held_out: bool = False,
) -> FamilyVariety:
    """The counts for one family's kept ``bundles``; ``phrasings`` maps a bundle id to its ``phrasing_id``."""
    shapes = [_shapes(tuple(b.reference)) for b in bundles]
    cov = coverage(bundles)
    cores = Counter(core for _, core in shapes)
    top, top_n = cores.most_common(1)[0] if cores else ((), 0)
    return FamilyVariety(
        family=family,
        category=category or (bundles[0].category if bundles else ""),
        held_out=held_out,
        tasks=len(bundles),
        phrasings=len({phrasings.get(b.id, UNKNOWN_PHRASING) for b in bundles}),
        skeletons=len({skel for skel, _ in shapes}),
        cores=len(cores),
        commands=len({c.split(" ")[0] for c in cov}),
        command_flags=len(cov),
        top_core=shape_text(top),
        top_core_tasks=top_n,
    )


def yield_variety(y: FamilyYield) -> FamilyVariety:
    return family_variety(y.family, y.bundles, y.phrasings, y.category, y.held_out)


def totals(per_family: Sequence[FamilyVariety], yields: Iterable[FamilyYield]) -> VarietyTotals:
    """The run's totals; ``yields`` are the same families' draws (for the shapes counted over the whole run)."""
    bundles = [b for y in yields for b in y.bundles]
    shapes = [_shapes(tuple(b.reference)) for b in bundles]
    cov = coverage(bundles)
    return VarietyTotals(
        tasks=len(bundles),
        families=len(per_family),
        phrasings=sum(f.phrasings for f in per_family),
        skeletons=len({skel for skel, _ in shapes}),
        cores=len({core for _, core in shapes}),
        commands=len({c.split(" ")[0] for c in cov}),
        command_flags=len(cov),
        collapsed=sum(f.collapsed for f in per_family),
        median_phrasings=float(statistics.median(f.phrasings for f in per_family)) if per_family else 0.0,
        median_cores=float(statistics.median(f.cores for f in per_family)) if per_family else 0.0,
    )


def run_variety(yields: Sequence[FamilyYield]) -> tuple[list[FamilyVariety], VarietyTotals]:
    """Every family's variety and the run's totals."""
    per_family = [yield_variety(y) for y in yields]
    return per_family, totals(per_family, yields)


def collapse_warning(f: FamilyVariety) -> str:
    """The run-log line for a collapsed family."""
    return (
        f"{f.family}: {f.tasks} tasks collapse to {f.cores} state-changing solution(s) "
        f"({f.top_core_tasks} of them `{f.top_core}`): its variety is wording, not skill"
    )


VARIETY_HEADERS = [
    "family",
    "split",
    "tasks",
    "whole phrasings",
    "solution skeletons",
    "state-changing cores",
    "commands",
    "command+flag",
    "collapsed",
    "commonest core",
]


def variety_rows(per_family: Sequence[FamilyVariety]) -> list[list[object]]:
    """One row a family, in ``VARIETY_HEADERS`` order."""
    return [
        [
            f.family,
            "held-out" if f.held_out else "train",
            f.tasks,
            f.phrasings,
            f.skeletons,
            f.cores,
            f.commands,
            f.command_flags,
            f.collapsed,
            f"{f.top_core} ({f.top_core_tasks})",
        ]
        for f in per_family
    ]


# ---- where tasks start ------------------------------------------------------------------------------------------------
PROFILE_DIR = "/etc/profile.d/"  # sourced by every operator session (sandbox/session.py), as by a login shell
_EXPORT = re.compile(r"^\s*export\s+[A-Za-z_][A-Za-z0-9_]*=", re.M)


def start_folder(bundle: ScenarioBundle) -> str:
    """Where a task's shell starts, as a kind: ``home``, ``under home`` (a project folder in it), or the top folder
    it is under elsewhere (``/srv``, ``/opt``, ``/app``, ``/data``, ``/var`` ...)."""
    start, home = bundle.start_dir, bundle.home
    if start == home:
        return "home"
    if start.startswith(home + "/"):
        return "under home"
    return "/" + start.strip("/").split("/")[0]


def sets_shell_variables(bundle: ScenarioBundle) -> bool:
    """Whether the operator's shell starts with variables set: a file in /etc/profile.d exports one."""
    return any(
        path.startswith(PROFILE_DIR) and path.endswith(".sh") and bool(_EXPORT.search(body))
        for path, body in bundle.files.items()
    )


@dataclass(frozen=True)
class StartDistribution:
    """Who a run's tasks start as and where: tasks per (folder kind, user), and how many families vary it."""

    tasks: int
    families: int
    by_folder_user: dict[tuple[str, str], int]  # (folder kind, user) -> tasks
    families_by_users: dict[str, int]  # "operator", "root", "operator+root" -> families
    families_elsewhere: int  # families with a task whose shell starts in another folder than the home
    families_outside_home: int  # ... in a folder outside the home tree
    families_with_variables: int  # families with a task whose shell starts with variables set
    tasks_with_variables: int

    def tasks_by_user(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_, user), n in self.by_folder_user.items():
            out[user] += n
        return dict(sorted(out.items()))

    def tasks_by_folder(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (folder, _), n in self.by_folder_user.items():
            out[folder] += n
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def tasks_elsewhere(self) -> int:
        return self.tasks - self.tasks_by_folder().get("home", 0)

    @property
    def tasks_outside_home(self) -> int:
        return self.tasks_elsewhere - self.tasks_by_folder().get("under home", 0)


def start_distribution(by_family: Mapping[str, Sequence[ScenarioBundle]]) -> StartDistribution:
    """The start distribution of ``by_family`` (family -> its kept bundles)."""
    cells: Counter[tuple[str, str]] = Counter()
    users_sets: Counter[str] = Counter()
    elsewhere = outside = with_vars = tasks_vars = 0
    for bundles in by_family.values():
        folders = [start_folder(b) for b in bundles]
        for b, folder in zip(bundles, folders, strict=True):
            cells[(folder, b.user)] += 1
        if bundles:
            users_sets["+".join(sorted({b.user for b in bundles}))] += 1
        elsewhere += any(f != "home" for f in folders)
        outside += any(f not in ("home", "under home") for f in folders)
        n_vars = sum(sets_shell_variables(b) for b in bundles)
        tasks_vars += n_vars
        with_vars += n_vars > 0
    return StartDistribution(
        tasks=sum(cells.values()),
        families=len(by_family),
        by_folder_user=dict(cells),
        families_by_users=dict(sorted(users_sets.items())),
        families_elsewhere=elsewhere,
        families_outside_home=outside,
        families_with_variables=with_vars,
        tasks_with_variables=tasks_vars,
    )


def start_rows(dist: StartDistribution) -> tuple[list[str], list[list[object]]]:
    """A table of the start folders (rows, commonest first) by user (columns), with totals."""
    users = sorted(dist.tasks_by_user())
    rows: list[list[object]] = [
        [folder, *(dist.by_folder_user.get((folder, u), 0) for u in users), n]
        for folder, n in dist.tasks_by_folder().items()
    ]
    return ["start folder", *users, "tasks"], rows


def start_summary(dist: StartDistribution) -> str:
    """One paragraph: the users, the folders and the shell state the tasks start with."""
    users = ", ".join(f"{u} {n}" for u, n in dist.tasks_by_user().items())
    fams = ", ".join(f"{u} {n}" for u, n in dist.families_by_users.items())
    return (
        f"{dist.tasks} tasks start as {users} (families by user: {fams}); {dist.tasks_elsewhere} start in another "
        f"folder than the home ({dist.tasks_outside_home} outside the home tree), in "
        f"{dist.families_elsewhere} of {dist.families} families ({dist.families_outside_home} outside the home "
        f"tree); {dist.tasks_with_variables} tasks in {dist.families_with_variables} families start with shell "
        "variables set (/etc/profile.d)."
    )
