"""Per-step group statistics, the scenario board and the informative sampler: which scenarios a step plays.

Groups whose episodes all pass or all fail carry no success signal (only the shaping separates them): they are
counted per step, and the ``InformativeSampler`` prefers scenarios whose pass rate so far is closest to one half,
optionally under a difficulty ceiling that rises as the pass rate does. Apart from the trainer so the choice of
scenarios can be tested on outcomes alone (torch is imported only when a sampler is built).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence

from pydantic import BaseModel

from bashgym_assets.training.grpo.reward import EpisodeOutcome


# ---- group statistics and the sampler -----------------------------------------------------------------------------
class GroupRecord(BaseModel):
    """One scenario's group at one step: the success split that says whether it can teach anything."""

    step: int
    scenario_id: str
    category: str
    difficulty: int
    n: int
    passed: int
    hacks: int
    infra: int
    mean_reward: float | None
    reward_spread: float  # max - min reward: 0 means no advantage at all for this group
    kind: str  # mixed | all_pass | all_fail | unscorable


def group_records(step: int, outcomes: Sequence[EpisodeOutcome]) -> list[GroupRecord]:
    groups: dict[str, list[EpisodeOutcome]] = {}
    for o in outcomes:
        groups.setdefault(o.scenario_id, []).append(o)
    out = []
    for sid, members in groups.items():
        scored = [m for m in members if m.reward is not None]
        rewards = [float(m.reward) for m in members if m.reward is not None]
        passed = sum(m.verified and not m.hack for m in scored)
        kind = (
            "unscorable"
            if not scored
            else "all_pass"
            if passed == len(scored)
            else "all_fail"
            if passed == 0
            else "mixed"
        )
        out.append(
            GroupRecord(
                step=step,
                scenario_id=sid,
                category=members[0].category,
                difficulty=members[0].difficulty,
                n=len(members),
                passed=passed,
                hacks=sum(bool(m.hack) for m in members),
                infra=sum(bool(m.infra_error) for m in members),
                mean_reward=round(sum(rewards) / len(rewards), 4) if rewards else None,
                reward_spread=round(max(rewards) - min(rewards), 4) if rewards else 0.0,
                kind=kind,
            )
        )
    return out


class StepRecord(BaseModel):
    """One optimizer step's episodes in numbers (the per-step curves in MLflow)."""

    step: int
    episodes: int
    reward_mean: float
    success_rate: float
    mean_turns: float
    informative_frac: float  # groups with both passes and fails
    difficulty_ceiling: int = 0  # the curriculum's ceiling after this step (0: no ladder)
    zero_spread_frac: float  # groups whose rewards are all equal (TRL gives them no advantage)
    terminated_rate: float
    hacks: int
    infra_errors: int
    rollout_s: float
    episodes_per_min: float


class ScenarioBoard:
    """Pass counts per scenario across the run: what the sampler reads to prefer informative scenarios, and, with
    ``difficulties`` and a ladder, the difficulty ceiling of a curriculum that rises as the pass rate does."""

    def __init__(
        self,
        scenario_ids: Sequence[str],
        difficulties: Mapping[str, int] | None = None,
        promote_at: float | None = None,
        window: int = 16,
    ) -> None:
        self.ids = list(scenario_ids)
        self.passes = dict.fromkeys(self.ids, 0)
        self.tries = dict.fromkeys(self.ids, 0)
        self.difficulty = {i: int((difficulties or {}).get(i, 1)) for i in self.ids}
        levels = sorted(set(self.difficulty.values()))
        self.ceiling: int | None = levels[0] if promote_at is not None and levels else None
        self.top = levels[-1] if levels else 1
        self.promote_at = promote_at
        self.window = window
        self.recent: list[bool] = []
        self.ceilings: list[int] = [self.ceiling] if self.ceiling is not None else []
        self._lock = threading.Lock()

    def record(self, outcomes: Sequence[EpisodeOutcome]) -> None:
        with self._lock:
            for o in outcomes:
                if o.reward is None or o.scenario_id not in self.tries:
                    continue
                passed = bool(o.verified and not o.hack)
                self.tries[o.scenario_id] += 1
                self.passes[o.scenario_id] += int(passed)
                if self.ceiling is not None and self.difficulty[o.scenario_id] <= self.ceiling:
                    self.recent = (self.recent + [passed])[-self.window :]
            self._climb()

    def _climb(self) -> None:
        if self.ceiling is None or self.promote_at is None or self.ceiling >= self.top:
            return
        if len(self.recent) >= self.window and sum(self.recent) / len(self.recent) >= self.promote_at:
            self.ceiling = min(d for d in set(self.difficulty.values()) if d > self.ceiling)
            self.ceilings.append(self.ceiling)
            self.recent = []

    def eligible(self) -> list[int]:
        """Indices of the scenarios the curriculum allows now (all of them without a ladder)."""
        with self._lock:
            if self.ceiling is None:
                return list(range(len(self.ids)))
            return [i for i, s in enumerate(self.ids) if self.difficulty[s] <= self.ceiling]

    def weight(self, scenario_id: str, floor: float = 0.02) -> float:
        """p(1-p) of the smoothed pass rate (Beta(1,1) prior): 0.25 for an unseen scenario or a coin flip,
        falling as a scenario shows it is always solved or never; ``floor`` keeps every scenario reachable."""
        with self._lock:
            p = (self.passes[scenario_id] + 1) / (self.tries[scenario_id] + 2)
        return p * (1 - p) + floor


class InformativeSampler:
    """TRL's ``RepeatSampler`` layout (each chunk of ``batch_size`` scenarios, each index ``mini_repeat_count``
    times, the chunk ``repeat_count`` times), but each chunk is drawn when it is needed, without replacement,
    weighted by ``ScenarioBoard.weight`` when ``prefer`` (uniform otherwise). The data loader fetches one batch
    ahead, so a chunk sees the statistics of all but the step just before it."""

    def __init__(
        self,
        board: ScenarioBoard,
        mini_repeat_count: int,
        batch_size: int,
        repeat_count: int,
        num_batches: int,
        prefer: bool = True,
        seed: int = 0,
    ) -> None:
        import torch

        self.board = board
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = min(batch_size, len(board.ids))
        self.repeat_count = repeat_count
        self.num_batches = max(1, num_batches)
        self.prefer = prefer
        self.generator = torch.Generator().manual_seed(seed)
        self.drawn: list[list[str]] = []

    def _chunk(self) -> list[int]:
        import torch

        allowed = self.board.eligible()
        if self.prefer:
            weights = torch.tensor([self.board.weight(self.board.ids[i]) for i in allowed], dtype=torch.float)
        else:
            weights = torch.ones(len(allowed))
        picks = torch.multinomial(
            weights, min(self.batch_size, len(allowed)), replacement=False, generator=self.generator
        ).tolist()
        picks = [allowed[i] for i in picks]
        while (
            len(picks) < self.batch_size
        ):  # fewer scenarios under the ceiling than a step takes: repeat some
            picks.append(picks[len(picks) % max(1, len(allowed))])
        return picks

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.num_batches):
            chunk = self._chunk()
            self.drawn.append([self.board.ids[i] for i in chunk])
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return self.num_batches * self.batch_size * self.mini_repeat_count * self.repeat_count
