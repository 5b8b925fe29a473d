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
from bashgym_assets.evaluation.runner import EpisodeSink, EvalResult, EvalSettings, evaluate
from bashgym_assets.rollout.operators import LiteLLMOperator, LocalModelOperator, Operator, ReferenceOperator
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.gate import HELD_OUT

__all__ = [
    "BUNDLED",
    "BUNDLED_TWINS",
    "DEFAULT_SETS",
    "EVALUATION_SETS",
    "FIT",
    "SUITE_PREFIX",
    "TRANSFER",
    "UNSEEN",
    "admitted",
    "judges",
    "set_names",
    "suite_set",
    "transfer_bundles",
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


# ---- evaluation sets: the four ways every model is measured (issue 37) -------------------------------------
FIT = "fit"  # tasks trained on (a sample of the trained families' gated tasks): does it do what it was shown?
TRANSFER = (
    "transfer"  # fresh draws of trained families under the reserved transfer seed: the skills, new values
)
UNSEEN = "unseen"  # the held-out families: skills no train family teaches (factory.split, measured)
BUNDLED = (
    "bundled"  # the pack's held-out tasks less those with a train twin (factory.split.BUNDLED_TRAIN_TWINS)
)
BUNDLED_TWINS = (
    "bundled-twins"  # the pack's held-out tasks that have a train twin: reported once, never judges
)
SUITE_PREFIX = "suite:"  # each imported external suite is a set of its own: suite:<name>
EVALUATION_SETS = (FIT, TRANSFER, UNSEEN, BUNDLED)
DEFAULT_SETS = (
    UNSEEN,
    BUNDLED,
)  # what `bashgym eval` and benchmark_results run without --set (+ every suite)


def suite_set(name: str) -> str:
    return f"{SUITE_PREFIX}{name}"


def judges(set_name: str) -> bool:
    """Whether a set's figures may judge a model (promotion): the clean held-out sets and external suites; fit and
    transfer measure trained skills, the bundled twins a leak."""
    return set_name in (UNSEEN, BUNDLED) or set_name.startswith(SUITE_PREFIX)


def is_transfer_source(source: str) -> bool:
    from bashgym_assets.scenarios.factory.split import TRANSFER_SEED

    return f"@{TRANSFER_SEED}:" in (source or "")


def evaluation_set(scenario_id: str, split: str | None = None, source: str = "") -> str:
    """Which set a scenario measures: a generated task by its family (held out: ``unseen``; trained: ``transfer``
    when drawn under the transfer seed, else ``fit``), an external task by its suite, a pack task by its split
    (held out: ``bundled``, or ``bundled-twins`` when a train family teaches its skill; train: ``fit``)."""
    from bashgym_assets.scenarios.external import suite_of
    from bashgym_assets.scenarios.factory.family import family_of
    from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES, is_bundled_train_twin
    from bashgym_assets.scenarios.gate import is_external

    family = family_of(scenario_id)
    if family is not None:
        if family in HELD_OUT_FAMILIES:
            return UNSEEN
        return TRANSFER if is_transfer_source(source) else FIT
    if is_external(scenario_id):
        return suite_set(suite_of(source) or "external")
    if split not in (None, HELD_OUT):
        return FIT
    return BUNDLED_TWINS if is_bundled_train_twin(scenario_id) else BUNDLED


def set_names(wanted: Sequence[str], known_suites: Sequence[str] = ()) -> list[str]:
    """The sets a ``--set`` list names (``suite:NAME`` or a bare suite name for a suite); none given: the
    default sets and every known suite. Unknown names raise with what there is."""
    if not wanted:
        return [*DEFAULT_SETS, *(suite_set(s) for s in known_suites)]
    out = []
    for name in wanted:
        if name in (*EVALUATION_SETS, BUNDLED_TWINS):
            out.append(name)
        elif name.startswith(SUITE_PREFIX) or name in known_suites:
            out.append(name if name.startswith(SUITE_PREFIX) else suite_set(name))
        else:
            raise ValueError(
                f"unknown evaluation set {name!r}: {', '.join(EVALUATION_SETS)}, {BUNDLED_TWINS} or a suite "
                f"({', '.join(suite_set(s) for s in known_suites) or 'none imported'})"
            )
    return list(dict.fromkeys(out))


def transfer_bundles(
    gated_rows: Iterable[Mapping[str, Any]], per_family: int, categories: Sequence[str] = ()
) -> list[ScenarioBundle]:
    """``per_family`` fresh tasks of every trained family that has tasks in ``gated_rows``, drawn under the
    reserved transfer seed; a draw that equals any gated task of its family (id or instruction) is skipped, so no
    transfer task is in any training set. Not gated yet: ``admitted`` does that (it needs a sandbox image)."""
    from bashgym_assets.scenarios.factory.family import all_families, family_of
    from bashgym_assets.scenarios.factory.generate import draw_family
    from bashgym_assets.scenarios.factory.split import TRANSFER_SEED, is_held_out_family

    if per_family <= 0:
        return []
    seen_ids: set[str] = set()
    seen_tasks: set[str] = set()
    families: set[str] = set()
    for r in gated_rows:
        family = family_of(str(r.get("scenario_id") or ""))
        if family and not is_held_out_family(family):
            families.add(family)
            seen_ids.add(str(r["scenario_id"]))
            seen_tasks.add(" ".join(str(r.get("task") or "").lower().split()))
    registry = all_families()
    out: list[ScenarioBundle] = []
    for name in sorted(families):
        if name not in registry or (categories and registry[name].category not in categories):
            continue
        drawn = draw_family(registry[name], per_family * 3, TRANSFER_SEED).bundles
        fresh = [
            b for b in drawn if b.id not in seen_ids and " ".join(b.task.lower().split()) not in seen_tasks
        ]
        out += fresh[:per_family]
    return out


def admitted(
    bundles: Sequence[ScenarioBundle], image: str | None, progress: Callable[[str], None] | None = None
) -> list[ScenarioBundle]:
    """The bundles the reference gate admits (transfer draws are evaluated only once certified, like every
    task in gated_scenarios)."""
    from bashgym_assets.scenarios.gate import gate_bundles

    if not bundles:
        return []
    results = gate_bundles(bundles, image)
    kept = [b for b, r in zip(bundles, results, strict=True) if r.admitted]
    if progress and len(kept) < len(bundles):
        progress(f"transfer: {len(bundles) - len(kept)} of {len(bundles)} fresh draws refused by the gate")
    return kept


def evaluation_bundles(
    gated_rows: Iterable[Mapping[str, Any]],
    *,
    sets: Sequence[str] | None = None,
    limit: int | None = None,
    categories: Sequence[str] = (),
    per_heldout_family: int | None = 3,
    fit_sample: int = 0,
    transfer_per_family: int = 0,
    seed: int = 0,
) -> dict[str, list[ScenarioBundle]]:
    """The bundles of each wanted set (``sets``; None: the default sets, every suite in the rows, and fit /
    transfer when their sizes ask for them): ``bundled`` (the clean pack held-out tasks; ``limit``: the first ones
    by id), ``per_heldout_family`` tasks of each held-out family (seeded; None: all of them, 0: none) for
    ``unseen``, ``fit_sample`` tasks of the TRAINED families (the sft_dataset's train split of families, seeded),
    ``transfer_per_family`` fresh draws of each trained family (ungated: see ``admitted``), and each suite."""
    from bashgym_assets.scenarios.external import suite_of
    from bashgym_assets.scenarios.factory.family import family_of
    from bashgym_assets.scenarios.gate import is_external
    from bashgym_assets.training_data.build import scenario_group, split_for

    rows = [r for r in gated_rows if r.get("admitted") is not False]
    held = [
        ScenarioBundle.model_validate(json.loads(r["bundle_json"]))
        for r in rows
        if r.get("split") == HELD_OUT
    ]
    suites = sorted({suite_of(b.source) or "external" for b in held if is_external(b.id)})
    if sets is None:
        wanted = set_names([], suites)
        wanted += [FIT] if fit_sample else []
        wanted += [TRANSFER] if transfer_per_family else []
    else:
        wanted = list(sets)
    out: dict[str, list[ScenarioBundle]] = {name: [] for name in wanted}
    pack_held = [b for b in held if not family_of(b.id) and not is_external(b.id)]
    if BUNDLED in out:
        out[BUNDLED] = pick_bundles(
            (b for b in pack_held if evaluation_set(b.id) == BUNDLED), limit=limit, categories=categories
        )
    if BUNDLED_TWINS in out:
        out[BUNDLED_TWINS] = pick_bundles(
            (b for b in pack_held if evaluation_set(b.id) == BUNDLED_TWINS),
            limit=limit,
            categories=categories,
        )
    for name in out:
        if name.startswith(SUITE_PREFIX):
            suite = name.removeprefix(SUITE_PREFIX)
            out[name] = pick_bundles(
                (b for b in held if is_external(b.id) and (suite_of(b.source) or "external") == suite),
                limit=limit,
                categories=categories,
            )
    if UNSEEN in out and per_heldout_family != 0:
        by_family: dict[str, list[ScenarioBundle]] = {}
        for b in held:
            if (family := family_of(b.id)) is not None:
                by_family.setdefault(family, []).append(b)
        for family in sorted(by_family):
            out[UNSEEN] += pick_bundles(
                by_family[family], categories=categories, sample=per_heldout_family, seed=seed
            )
    if FIT in out:
        trained = (
            ScenarioBundle.model_validate(json.loads(r["bundle_json"]))
            for r in rows
            if r.get("split") != HELD_OUT
            and family_of(str(r["scenario_id"]))
            and split_for(scenario_group(str(r["scenario_id"]))) == "train"
        )
        out[FIT] = pick_bundles(trained, categories=categories, sample=fit_sample or 30, seed=seed)
    if TRANSFER in out:
        out[TRANSFER] = transfer_bundles(rows, transfer_per_family or 2, categories)
    return out


def compare(
    specs: Sequence[ModelSpec],
    bundles: Sequence[ScenarioBundle],
    image: str | None,
    settings: EvalSettings | None = None,
    sampling: Sampling | None = None,
    eval_id: str | None = None,
    progress: Callable[[str], None] | None = None,
    sink: EpisodeSink | None = None,
) -> list[EvalResult]:
    """Each model over the same scenarios in the same run (one after another, so one model is in memory); each
    episode handed to ``sink`` as soon as it is scored (``runner.LakeEpisodeWriter``: into the lake)."""
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
                sink=sink,
            )
        )
        del op  # free the weights before the next model loads
    return results
