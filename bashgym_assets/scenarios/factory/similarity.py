"""The evaluation guard: a train task that copies an evaluation task, or teaches its skill, is refused and counted.

Two tests, either refuses:

- **skill twin** (``scenarios/skills.py``): the same goal reached with the same state-changing commands, whatever
  the wording and the names (``goal`` and ``skeleton`` TF-IDF cosines, thresholds calibrated there). This is what
  keeps a held-out number a measure of an unseen skill: a templated rewording with renamed paths is a twin.
- **near-copy**: word 3-grams of the instruction, estimated with MinHash (``datasketch``), ``>= INSTRUCTION_MAX``:
  a copied instruction is contamination even when its solution differs.

Every train task is compared with *every* evaluation task (the clean bundled held-out split, the held-out
families' tasks, imported external suites): the evaluation side is one sparse matrix (skills) and one signature
matrix (MinHash), so a comparison is one vectorised product, not a Python loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
from datasketch import MinHash

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.skills import SkillIndex, is_twin, skill_doc

NUM_PERM = 128
INSTRUCTION_MAX = 0.5
_TOKEN = re.compile(r"[a-z0-9_./~*-]+")
_SCHEME = "affine32"
_PERMUTATIONS = MinHash(num_perm=NUM_PERM, seed=1, scheme=_SCHEME).permutations  # shared: the costly part


def shingles(text: str, n: int) -> set[bytes]:
    words = _TOKEN.findall(text.lower())
    if len(words) < n:
        return {" ".join(words).encode()} if words else set()
    return {" ".join(words[i : i + n]).encode() for i in range(len(words) - n + 1)}


def signature(items: set[bytes]) -> np.ndarray | None:
    """The MinHash signature of a shingle set, None for an empty set (it is similar to nothing)."""
    if not items:
        return None
    m = MinHash(num_perm=NUM_PERM, seed=1, permutations=_PERMUTATIONS, scheme=_SCHEME)
    m.update_batch(list(items))
    return m.hashvalues


def instruction_text(bundle: ScenarioBundle) -> str:
    return bundle.announcement or bundle.task


class EvalGuard:
    """Compares bundles with a fixed set of evaluation tasks; ``__call__`` returns
    ``(refuse, goal similarity, skeleton similarity, nearest evaluation id)`` of the nearest task (a refusing one
    first)."""

    def __init__(self, eval_tasks: Sequence[ScenarioBundle], copies: Sequence[ScenarioBundle] = ()) -> None:
        """``eval_tasks`` are guarded both ways; ``copies`` (held-out tasks whose skill trains on purpose: the
        bundled train twins) only against a near-copied instruction: such a task still never trains itself."""
        self.ids = [b.id for b in [*eval_tasks, *copies]]
        # an empty set's row never equals a real signature: 2**64-1 - k is no MinHash value (they are < 2**32)
        self._instr = _matrix([_SIGNERS[0](b) for b in [*eval_tasks, *copies]], 0)
        skill_docs = [skill_doc(b.id, instruction_text(b), b.reference) for b in eval_tasks]
        self._n_skill = len(skill_docs)
        self._skills = SkillIndex(skill_docs)

    def __len__(self) -> int:
        return len(self.ids)

    def similarities(
        self, bundle: ScenarioBundle, values: Sequence[str] = ()
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The bundle's instruction 3-gram Jaccard (MinHash estimate), goal and skeleton cosines with every
        evaluation task, and whether each pair's solutions are specific enough to be compared as a whole."""
        if not self.ids:
            return np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool)
        sig = _SIGNERS[0](bundle)
        instr = (self._instr == sig).mean(axis=1) if sig is not None else np.zeros(len(self.ids))
        pad = len(self.ids) - self._n_skill  # the copy-only tasks: no skill comparison
        if not self._n_skill:
            zeros = np.zeros(pad)
            return instr, zeros, zeros, np.zeros(pad, dtype=bool)
        scores = self._skills.scores(
            [skill_doc(bundle.id, instruction_text(bundle), bundle.reference, values=values)]
        )
        specific = np.broadcast_to(scores.specific, scores.goal.shape)[0]
        return (
            instr,
            np.concatenate([scores.goal[0], np.zeros(pad)]),
            np.concatenate([scores.skeleton[0], np.zeros(pad)]),
            np.concatenate([specific, np.zeros(pad, dtype=bool)]),
        )

    def __call__(self, bundle: ScenarioBundle, values: Sequence[str] = ()) -> tuple[bool, float, float, str]:
        instr, goal, skel, specific = self.similarities(bundle, values)
        if not len(instr):
            return False, 0.0, 0.0, ""
        refused = (instr >= INSTRUCTION_MAX) | is_twin(goal, skel, specific)
        score = np.minimum(goal, skel) + 0.1 * instr + refused * 10
        k = int(np.argmax(score))
        return bool(refused.any()), float(goal[k]), float(skel[k]), self.ids[k]


_SIGNERS = (lambda b: signature(shingles(instruction_text(b), 3)),)


def _matrix(signatures: list[np.ndarray | None], k: int) -> np.ndarray:
    empty = np.full(NUM_PERM, np.iinfo(np.uint64).max - k, dtype=np.uint64)
    rows = [s if s is not None else empty for s in signatures]
    return np.vstack(rows) if rows else np.zeros((0, NUM_PERM), dtype=np.uint64)


def histogram(
    values: Sequence[float], edges: Sequence[float] = (0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001)
) -> list[tuple[str, int]]:
    """Counts per similarity band, for the report."""
    counts, _ = np.histogram(np.asarray(values, dtype=float), bins=np.asarray(edges))
    return [(f"{edges[i]:.1f}-{min(edges[i + 1], 1.0):.1f}", int(c)) for i, c in enumerate(counts)]


def guard_train_bundles(
    bundles: Sequence[ScenarioBundle],
    eval_tasks: Sequence[ScenarioBundle],
    split_of: Callable[[str], str],
    copies: Sequence[ScenarioBundle] = (),
) -> tuple[list[ScenarioBundle], list[tuple[ScenarioBundle, str]]]:
    """Imported train-split bundles kept, and those refused as near-copies of an evaluation task with the reason;
    held-out bundles pass untouched (they evaluate). ``split_of(id) -> "train" | "held_out"``."""
    guard = EvalGuard(eval_tasks, copies)
    kept: list[ScenarioBundle] = []
    refused: list[tuple[ScenarioBundle, str]] = []
    for b in bundles:
        if split_of(b.id) != "train" or not len(guard):
            kept.append(b)
            continue
        near, goal, skel, nearest = guard(b)
        if near:
            refused.append(
                (
                    b,
                    f"skill twin or near-copy of evaluation task {nearest} (goal {goal:.2f}, solution skeleton "
                    f"{skel:.2f}): never trains",
                )
            )
        else:
            kept.append(b)
    return kept, refused
