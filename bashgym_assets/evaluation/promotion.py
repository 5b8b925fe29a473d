"""The promotion rule and the MLflow ``champion`` alias.

The rule (``PromotionRule``): a candidate adapter replaces the incumbent (the current champion, or the base model
when there is none yet) only when, on the SAME held-out scenarios in the same evaluation run,

1. its clean rate is higher than the incumbent's,
2. a paired one-sided sign test over scenarios accepts that it is better (per scenario, the candidate's clean
   fraction over its samples against the incumbent's; ties drop out; exact binomial p <= ``alpha``), and
3. its operate and terminate rates are not lower than the incumbent's by more than ``max_rate_drop``.

A version a person demoted (``bashgym demote --model N``) is never re-promoted automatically, and a manual
``bashgym promote --model N`` sets the alias whatever the numbers say; both are recorded in the lake's
``promotion_decisions`` table next to the automatic decisions, so the history has one place.
"""

from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from bashgym_assets.config import Settings, get_settings
from bashgym_assets.evaluation.metrics import EvalEpisode, rates
from bashgym_assets.training.registry import CANDIDATE_ALIAS, CHAMPION_ALIAS

# the registry's aliases, by the names the evaluation uses
CHAMPION, CANDIDATE = CHAMPION_ALIAS, CANDIDATE_ALIAS


class PromotionRule(BaseModel):
    alpha: float = 0.05
    max_rate_drop: float = 0.05

    def describe(self) -> str:
        return (
            f"promote when the candidate's clean rate beats the incumbent's on the same held-out scenarios, a "
            f"paired one-sided sign test over scenarios gives p <= {self.alpha}, and operate/terminate drop by "
            f"at most {self.max_rate_drop:.0%}"
        )


class PairedTest(BaseModel):
    scenarios: int
    candidate_better: int
    incumbent_better: int
    ties: int
    p_value: float


class PromotionDecision(BaseModel):
    """What was decided and the numbers behind it (asset check metadata, lake row, MLflow tags)."""

    promote: bool
    reason: str
    incumbent: str  # "champion" or "base"
    candidate_version: str | None = None
    incumbent_version: str | None = None
    candidate_rates: dict[str, float]
    incumbent_rates: dict[str, float]
    test: PairedTest
    rule: str
    decided_at: str = ""
    manual: bool = False


def sign_test(candidate: Sequence[EvalEpisode], incumbent: Sequence[EvalEpisode]) -> PairedTest:
    """Exact one-sided sign test on per-scenario clean fractions (scenarios both evaluated)."""

    def fractions(eps: Sequence[EvalEpisode]) -> dict[str, float]:
        by: dict[str, list[bool]] = defaultdict(list)
        for e in eps:
            if e.failure_class not in ("setup_failed", "sandbox_error"):
                by[e.scenario_id].append(e.clean)
        return {k: sum(v) / len(v) for k, v in by.items()}

    a, b = fractions(candidate), fractions(incumbent)
    shared = sorted(set(a) & set(b))
    better = sum(a[s] > b[s] for s in shared)
    worse = sum(a[s] < b[s] for s in shared)
    n = better + worse
    p = sum(math.comb(n, i) for i in range(better, n + 1)) / 2**n if n else 1.0
    return PairedTest(
        scenarios=len(shared),
        candidate_better=better,
        incumbent_better=worse,
        ties=len(shared) - n,
        p_value=round(p, 6),
    )


def decide(
    candidate: Sequence[EvalEpisode],
    incumbent: Sequence[EvalEpisode],
    rule: PromotionRule | None = None,
    incumbent_kind: str = "base",
    candidate_version: str | None = None,
    incumbent_version: str | None = None,
    demoted: Sequence[str] = (),
) -> PromotionDecision:
    """Apply the rule to two models' episodes on the same scenarios."""
    rule = rule or PromotionRule()
    shared = {e.scenario_id for e in candidate} & {e.scenario_id for e in incumbent}
    cand = [e for e in candidate if e.scenario_id in shared]
    inc = [e for e in incumbent if e.scenario_id in shared]
    cr = {k: v.rate for k, v in rates(cand).items()}
    ir = {k: v.rate for k, v in rates(inc).items()}
    test = sign_test(cand, inc)
    reasons = []
    if candidate_version is not None and candidate_version in demoted:
        reasons.append(f"version {candidate_version} was demoted by hand")
    if not shared:
        reasons.append("no scenario was evaluated for both models")
    if cr["clean"] <= ir["clean"]:
        reasons.append(f"clean {cr['clean']:.0%} does not beat the {incumbent_kind}'s {ir['clean']:.0%}")
    elif test.p_value > rule.alpha:
        reasons.append(
            f"the paired sign test does not accept it (p = {test.p_value:.3f} > {rule.alpha}: "
            f"{test.candidate_better} scenarios better, {test.incumbent_better} worse)"
        )
    for rate in ("operate", "terminate"):
        if cr[rate] < ir[rate] - rule.max_rate_drop:
            reasons.append(f"{rate} dropped from {ir[rate]:.0%} to {cr[rate]:.0%}")
    promote = not reasons
    reason = (
        f"clean {cr['clean']:.0%} vs {ir['clean']:.0%} ({incumbent_kind}), sign test p = {test.p_value:.3f}"
        if promote
        else "; ".join(reasons)
    )
    return PromotionDecision(
        promote=promote,
        reason=reason,
        incumbent=incumbent_kind,
        candidate_version=candidate_version,
        incumbent_version=incumbent_version,
        candidate_rates=cr,
        incumbent_rates=ir,
        test=test,
        rule=rule.describe(),
        decided_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


# ---- the alias in the MLflow registry -----------------------------------------------------------------------------
def _client(settings: Settings | None) -> Any:
    from bashgym_assets.training import registry

    return registry.client(settings or get_settings())


def alias_version(model_name: str, alias: str = CHAMPION, settings: Settings | None = None) -> Any | None:
    """The model version an alias points at, or None (no registered model, or no such alias)."""
    from mlflow.exceptions import MlflowException

    try:
        return _client(settings).get_model_version_by_alias(model_name, alias)
    except MlflowException:
        return None


def set_alias(model_name: str, version: str, alias: str = CHAMPION, settings: Settings | None = None) -> None:
    _client(settings).set_registered_model_alias(model_name, alias, str(version))


def delete_alias(model_name: str, alias: str = CHAMPION, settings: Settings | None = None) -> None:
    from mlflow.exceptions import MlflowException

    with contextlib.suppress(MlflowException):
        _client(settings).delete_registered_model_alias(model_name, alias)


def apply_decision(decision: PromotionDecision, model_name: str, settings: Settings | None = None) -> bool:
    """Move ``champion`` to the candidate when the decision says so (and always mark it ``candidate``)."""
    if decision.candidate_version is None:
        return False
    set_alias(model_name, decision.candidate_version, CANDIDATE, settings)
    if decision.promote:
        set_alias(model_name, decision.candidate_version, CHAMPION, settings)
        c = _client(settings)
        c.set_model_version_tag(model_name, decision.candidate_version, "promoted_at", decision.decided_at)
        c.set_model_version_tag(
            model_name, decision.candidate_version, "promotion_reason", decision.reason[:500]
        )
    return decision.promote
