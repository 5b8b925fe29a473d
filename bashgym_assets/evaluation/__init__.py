"""Stage: the behavioural evaluation (sekft ``eval.py``), plain Python, no Dagster.

``compare`` drops several models (the base, base + adapter, a champion, any litellm model string) into the same
held-out scenarios, one model after another, each in lockstep batches (``runner.evaluate``); ``metrics`` scores
episodes and rates, ``promotion`` holds the rule and the MLflow ``champion`` alias, ``report`` the tables, plot
and transcripts shown in the Dagster UI, MLflow and the terminal.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from bashgym_assets.evaluation.metrics import EVAL_EPISODE_SCHEMA, EvalEpisode, ModelSummary
from bashgym_assets.evaluation.runner import EvalResult, EvalSettings, evaluate
from bashgym_assets.rollout.operators import LiteLLMOperator, LocalModelOperator, Operator, ReferenceOperator
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.gate import HELD_OUT

__all__ = [
    "BUNDLED_HELD_OUT",
    "EVALUATION_SETS",
    "HELD_OUT_FAMILIES",
    "TRAIN_FIT",
    "EVAL_EPISODE_SCHEMA",
    "EvalEpisode",
    "evaluation_bundles",
    "evaluation_set",
    "EvalResult",
    "EvalSettings",
    "ModelSpec",
    "ModelSummary",
    "compare",
    "evaluate",
    "heldout_bundles",
    "operator_for",
    "pick_bundles",
    "split_bundles",
]


class ModelSpec(BaseModel):
    """A model to evaluate: ``kind`` local (a base folder, optionally + a LoRA adapter folder), litellm (a model
    string through litellm) or reference (the scenario's own solution: the ceiling, useful as a sanity check)."""

    label: str
    kind: str = "local"
    base: str | None = None
    adapter: str | None = None
    litellm_model: str | None = None
    api_base: str | None = None
    ref: str = ""  # what to show as the model's identity (model URI, version, path)
    version: str | None = None  # registered model version, when it is one

    def describe(self) -> str:
        if self.ref:
            return self.ref
        if self.kind == "litellm":
            return f"litellm:{self.litellm_model}"
        if self.kind == "reference":
            return "reference"
        return f"{self.base}" + (f" + {self.adapter}" if self.adapter else "")


class Sampling(BaseModel):
    """Decoding for local models: greedy by default; temperature > 0 samples (needed for pass@k > 1)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    max_new_tokens: int = 128
    max_context_tokens: int = 2048
    micro_batch: int = 16


def operator_for(spec: ModelSpec, sampling: Sampling | None = None) -> Operator:
    sampling = sampling or Sampling()
    if spec.kind == "reference":
        return ReferenceOperator()
    if spec.kind == "litellm":
        if not spec.litellm_model:
            raise ValueError(f"model {spec.label}: kind litellm needs litellm_model")
        if spec.litellm_model.startswith(
            "routed:"
        ):  # teacher/student routing (serving.router); api_base: teacher's
            from bashgym_assets.serving.router import make_operator  # every operator kind, routed: included

            return make_operator(
                spec.litellm_model,
                api_base=spec.api_base,
                temperature=sampling.temperature,
                max_new_tokens=sampling.max_new_tokens,
            )
        # Unscaffolded like every evaluated model: the evaluation measures the behaviour without instruction.
        op = LiteLLMOperator(
            spec.litellm_model,
            api_base=spec.api_base,
            temperature=sampling.temperature,
            max_tokens=sampling.max_new_tokens,
        )
        op.scaffolded = False
        return op
    if not spec.base:
        raise ValueError(f"model {spec.label}: kind local needs base")
    return LocalModelOperator(
        spec.base,
        adapter_dir=spec.adapter,
        name=spec.label,
        max_new_tokens=sampling.max_new_tokens,
        max_context_tokens=sampling.max_context_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        seed=sampling.seed,
        micro_batch=sampling.micro_batch,
    )


def heldout_bundles(
    gated_rows: Iterable[Mapping[str, Any]], limit: int | None = None, categories: Sequence[str] = ()
) -> list[ScenarioBundle]:
    """The admitted held-out scenarios of the ``gated_scenarios`` table, in a stable order (by id)."""
    return split_bundles(gated_rows, HELD_OUT, limit=limit, categories=categories)


def split_bundles(
    gated_rows: Iterable[Mapping[str, Any]],
    split: str = HELD_OUT,
    limit: int | None = None,
    categories: Sequence[str] = (),
    sample: int | None = None,
    seed: int = 0,
) -> list[ScenarioBundle]:
    """The admitted scenarios of one split of ``gated_scenarios``, by id. That table holds only admitted scenarios
    and has no ``admitted`` column: a row is refused only when it says it was not.

    ``sample`` draws that many at random (seeded, so a run can be repeated) instead of the first ``limit`` by id,
    which would be one or two categories. Only held-out figures judge a model; the train split answers a diagnostic
    question: does the model finish the very tasks it was trained on (fit), or only not the new ones
    (generalisation)?"""
    return pick_bundles(
        (
            ScenarioBundle.model_validate(json.loads(row["bundle_json"]))
            for row in gated_rows
            if row.get("admitted") is not False and row.get("split") == split
        ),
        limit=limit,
        categories=categories,
        sample=sample,
        seed=seed,
    )


def pick_bundles(
    bundles: Iterable[ScenarioBundle],
    limit: int | None = None,
    categories: Sequence[str] = (),
    sample: int | None = None,
    seed: int = 0,
) -> list[ScenarioBundle]:
    """Filter by category, then the first ``limit`` by id or a seeded random ``sample``, returned by id."""
    out = sorted((b for b in bundles if not categories or b.category in categories), key=lambda b: b.id)
    if sample is not None and sample < len(out):
        out = sorted(random.Random(seed).sample(out, sample), key=lambda b: b.id)
    return out[:limit] if limit else out


# ---- evaluation sets: the three ways every model is measured (issue 29) -------------------------------------
BUNDLED_HELD_OUT = "held-out (bundled)"
HELD_OUT_FAMILIES = "held-out families"
TRAIN_FIT = "train families (fit)"
EVALUATION_SETS = (BUNDLED_HELD_OUT, HELD_OUT_FAMILIES, TRAIN_FIT)


def evaluation_set(scenario_id: str, split: str | None = None) -> str:
    """Which of the three sets a scenario measures: the held-out split's hand-written and imported tasks, the
    factory's held-out families (skills never trained), or tasks of other families / the train split (fit, never a
    promotion figure). A generated id says its family, so ``split`` is needed only for the other ids."""
    from bashgym_assets.scenarios.factory.family import family_of
    from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES as HELD_OUT_FAMILY_NAMES

    family = family_of(scenario_id)
    if family is not None:
        return HELD_OUT_FAMILIES if family in HELD_OUT_FAMILY_NAMES else TRAIN_FIT
    return TRAIN_FIT if split not in (None, HELD_OUT) else BUNDLED_HELD_OUT


def evaluation_bundles(
    gated_rows: Iterable[Mapping[str, Any]],
    *,
    limit: int | None = None,
    categories: Sequence[str] = (),
    per_heldout_family: int | None = 3,
    fit_sample: int = 0,
    seed: int = 0,
) -> dict[str, list[ScenarioBundle]]:
    """The bundles of each evaluation set: every held-out scenario not from the factory (``limit``: the first
    ones by id), ``per_heldout_family`` tasks of each held-out family (seeded; None: all of them, 0: none) and
    ``fit_sample`` tasks of the factory's TRAINED families (the sft_dataset's train split of families, seeded)."""
    from bashgym_assets.scenarios.factory.family import family_of
    from bashgym_assets.training_data.build import scenario_group, split_for

    rows = [r for r in gated_rows if r.get("admitted") is not False]
    held = [
        ScenarioBundle.model_validate(json.loads(r["bundle_json"]))
        for r in rows
        if r.get("split") == HELD_OUT
    ]
    bundled = pick_bundles((b for b in held if not family_of(b.id)), limit=limit, categories=categories)
    by_family: dict[str, list[ScenarioBundle]] = {}
    for b in held:
        if (family := family_of(b.id)) is not None:
            by_family.setdefault(family, []).append(b)
    families: list[ScenarioBundle] = []
    if per_heldout_family != 0:
        for family in sorted(by_family):
            families += pick_bundles(
                by_family[family], categories=categories, sample=per_heldout_family, seed=seed
            )
    fit: list[ScenarioBundle] = []
    if fit_sample:
        trained = (
            ScenarioBundle.model_validate(json.loads(r["bundle_json"]))
            for r in rows
            if r.get("split") != HELD_OUT
            and family_of(str(r["scenario_id"]))
            and split_for(scenario_group(str(r["scenario_id"]))) == "train"
        )
        fit = pick_bundles(trained, categories=categories, sample=fit_sample, seed=seed)
    return {BUNDLED_HELD_OUT: bundled, HELD_OUT_FAMILIES: families, TRAIN_FIT: fit}


def compare(
    specs: Sequence[ModelSpec],
    bundles: Sequence[ScenarioBundle],
    image: str | None,
    settings: EvalSettings | None = None,
    sampling: Sampling | None = None,
    eval_id: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[EvalResult]:
    """Each model over the same scenarios in the same run (one after another, so one model is in memory)."""
    eval_id = eval_id or uuid.uuid4().hex[:12]
    results = []
    for spec in specs:
        op = operator_for(spec, sampling)
        results.append(
            evaluate(
                op,
                bundles,
                image,
                settings,
                label=spec.label,
                model_ref=spec.describe(),
                eval_id=eval_id,
                progress=progress,
            )
        )
        del op  # free the weights before the next model loads
    return results
