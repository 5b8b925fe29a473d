"""The near-duplicate guard: a generated train task too close to an evaluation task is refused, and counted.

Similarity is Jaccard over shingles, estimated with MinHash (``datasketch``): word 3-grams of the instruction (a
near-copy), the instruction's content words (a paraphrase: stop words left out) and word 2-grams of the reference
solution, lower-cased. Every train task is compared with *every* evaluation task
(the bundled held-out split, the held-out families' tasks, imported external suites): the signatures of the
evaluation side are one matrix, so a comparison is one vectorised row compare, not a Python loop.

A task is refused when its instruction is a near-copy (3-gram ``instruction >= INSTRUCTION_MAX``), or when it is the
same solution under a loosely related wording (``reference >= REFERENCE_MAX`` and content words
``>= INSTRUCTION_WITH_REF``).
Why not reference similarity alone: a train family and a held-out task may share a common idiom (``wc -l``,
``tar -xzf``) and that is the skill being taught, not a leak of the task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
from datasketch import MinHash

from bashgym_assets.scenarios.bundle import ScenarioBundle

NUM_PERM = 128
INSTRUCTION_MAX = 0.5
REFERENCE_MAX = 0.7
INSTRUCTION_WITH_REF = 0.3
_TOKEN = re.compile(r"[a-z0-9_./~*-]+")
_STOP = frozenset(
    {
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "in",
        "on",
        "to",
        "into",
        "from",
        "for",
        "with",
        "by",
        "at",
        "as",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "every",
        "each",
        "all",
        "any",
        "some",
        "your",
        "you",
        "my",
        "me",
        "i",
        "we",
        "our",
        "please",
        "can",
        "could",
        "would",
        "should",
        "will",
        "must",
        "only",
        "just",
        "then",
        "than",
        "so",
        "not",
        "no",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "there",
        "here",
        "which",
        "what",
        "who",
        "how",
    }
)
_SCHEME = "affine32"
_PERMUTATIONS = MinHash(num_perm=NUM_PERM, seed=1, scheme=_SCHEME).permutations  # shared: the costly part


def shingles(text: str, n: int) -> set[bytes]:
    words = _TOKEN.findall(text.lower())
    if len(words) < n:
        return {" ".join(words).encode()} if words else set()
    return {" ".join(words[i : i + n]).encode() for i in range(len(words) - n + 1)}


def content_words(text: str) -> set[bytes]:
    return {w.encode() for w in _TOKEN.findall(text.lower()) if w not in _STOP}


def signature(items: set[bytes]) -> np.ndarray | None:
    """The MinHash signature of a shingle set, None for an empty set (it is similar to nothing)."""
    if not items:
        return None
    m = MinHash(num_perm=NUM_PERM, seed=1, permutations=_PERMUTATIONS, scheme=_SCHEME)
    m.update_batch(list(items))
    return m.hashvalues


def instruction_text(bundle: ScenarioBundle) -> str:
    return bundle.announcement or bundle.task


def reference_text(bundle: ScenarioBundle) -> str:
    return "\n".join(bundle.reference)


class EvalGuard:
    """Compares bundles with a fixed set of evaluation tasks; ``__call__`` returns
    ``(refuse, instruction similarity, reference similarity, nearest evaluation id)``."""

    def __init__(self, eval_tasks: Sequence[ScenarioBundle]) -> None:
        self.ids = [b.id for b in eval_tasks]
        # an empty set's row never equals a real signature: 2**64-1 - k is no MinHash value (they are < 2**32)
        self._instr, self._words, self._ref = (
            _matrix([f(b) for b in eval_tasks], k) for k, f in enumerate(_SIGNERS)
        )

    def __len__(self) -> int:
        return len(self.ids)

    def similarities(self, bundle: ScenarioBundle) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Estimated Jaccard of the bundle's instruction (3-grams, content words) and reference with every
        evaluation task."""
        if not self.ids:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        out = []
        for matrix, signer in zip((self._instr, self._words, self._ref), _SIGNERS, strict=True):
            sig = signer(bundle)
            out.append((matrix == sig).mean(axis=1) if sig is not None else np.zeros(len(self.ids)))
        return out[0], out[1], out[2]

    def __call__(self, bundle: ScenarioBundle) -> tuple[bool, float, float, str]:
        instr, words, ref = self.similarities(bundle)
        if not len(instr):
            return False, 0.0, 0.0, ""
        refused = (instr >= INSTRUCTION_MAX) | ((ref >= REFERENCE_MAX) & (words >= INSTRUCTION_WITH_REF))
        # the nearest task: a refusing one if any, else the closest by instruction then reference
        score = instr + 0.5 * ref + refused * 10
        k = int(np.argmax(score))
        return bool(refused.any()), float(instr.max()), float(ref.max()), self.ids[k]


_SIGNERS = (
    lambda b: signature(shingles(instruction_text(b), 3)),
    lambda b: signature(content_words(instruction_text(b))),
    lambda b: signature(shingles(reference_text(b), 2)),
)


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
    bundles: Sequence[ScenarioBundle], eval_tasks: Sequence[ScenarioBundle], split_of: Callable[[str], str]
) -> tuple[list[ScenarioBundle], list[tuple[ScenarioBundle, str]]]:
    """Imported train-split bundles kept, and those refused as near-copies of an evaluation task with the reason;
    held-out bundles pass untouched (they evaluate). ``split_of(id) -> "train" | "held_out"``."""
    guard = EvalGuard(eval_tasks)
    kept: list[ScenarioBundle] = []
    refused: list[tuple[ScenarioBundle, str]] = []
    for b in bundles:
        if split_of(b.id) != "train" or not len(guard):
            kept.append(b)
            continue
        near, instr, ref, nearest = guard(b)
        if near:
            refused.append(
                (
                    b,
                    f"near-duplicate of evaluation task {nearest} (instruction {instr:.2f}, reference "
                    f"{ref:.2f}): never trains",
                )
            )
        else:
            kept.append(b)
    return kept, refused
