"""A curriculum by difficulty: easy tasks first, harder ones as training goes on.

The SFT trainer packs each stage's conversations on their own (so a packed row never mixes stages) and reads the
packed rows in the order ``curriculum_order`` gives: every row of the first stage, shuffled, then the next stage,
and so on. Each epoch walks the stages again, with its own shuffle. Plain Python plus a ``torch`` sampler shim;
nothing here knows about TRL or Dagster.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

UNKNOWN_DIFFICULTY_STAGE = 1  # rows with no difficulty (the user's own traces) train with the easiest tasks


def stage_of(row: Mapping[str, Any], stages: int = 4) -> int:
    """The curriculum stage of one dataset row: its difficulty (1..``stages``), clamped; unknown -> stage 1."""
    difficulty = row.get("difficulty")
    if difficulty is None:
        return UNKNOWN_DIFFICULTY_STAGE
    return max(1, min(stages, int(difficulty)))


def curriculum_order(stages: Sequence[int], seed: int = 0, epoch: int = 0) -> list[int]:
    """Indices of ``stages`` stage by stage (ascending), shuffled within each stage by ``seed`` and ``epoch``."""
    rng = random.Random(f"{seed}:{epoch}")
    order: list[int] = []
    for stage in sorted(set(stages)):
        members = [i for i, s in enumerate(stages) if s == stage]
        rng.shuffle(members)
        order.extend(members)
    return order


def stage_counts(stages: Sequence[int]) -> dict[int, int]:
    """How many rows each stage holds (for the run's metadata)."""
    out: dict[int, int] = {}
    for s in stages:
        out[s] = out.get(s, 0) + 1
    return dict(sorted(out.items()))


def curriculum_sampler(stages: Sequence[int], seed: int = 0) -> Any:
    """A ``torch.utils.data.Sampler`` over packed rows in curriculum order; the Trainer calls ``set_epoch``."""
    from torch.utils.data import Sampler

    class CurriculumSampler(Sampler[int]):
        def __init__(self) -> None:
            self.stages = list(stages)
            self.seed = seed
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = int(epoch)

        def __iter__(self) -> Iterator[int]:
            return iter(curriculum_order(self.stages, self.seed, self.epoch))

        def __len__(self) -> int:
            return len(self.stages)

    return CurriculumSampler()
