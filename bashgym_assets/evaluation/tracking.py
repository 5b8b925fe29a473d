"""Where evaluation results are kept besides the lake's episodes: MLflow runs and the promotion history.

MLflow: one evaluation run (experiment ``bashgym-evaluation``) per evaluation, with every model's rates as
metrics (``<model>_clean`` ...), the comparison, plot and failing transcripts as artifacts, and tags linking the
candidate's and champion's training runs and model versions; the candidate's own training run gets its
``eval_*`` rates too, so its page shows how it did. The lake: ``promotion_decisions``, one row per decision
(automatic or by hand), the history ``bashgym promote/demote --model`` and the rule both read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from bashgym_assets.config import Settings
from bashgym_assets.evaluation.metrics import RATES, ModelSummary
from bashgym_assets.evaluation.promotion import PromotionDecision

EVAL_EXPERIMENT = "bashgym-evaluation"
DECISION_SCHEMA = pa.schema(
    [
        ("eval_id", pa.string()),
        ("action", pa.string()),
        ("candidate_version", pa.string()),
        ("incumbent", pa.string()),
        ("incumbent_version", pa.string()),
        ("promote", pa.bool_()),
        ("reason", pa.string()),
        ("p_value", pa.float64()),
        ("candidate_clean", pa.float64()),
        ("incumbent_clean", pa.float64()),
        ("decided_at", pa.string()),
        ("detail", pa.string()),
    ]
)


def record_decision(lake: Any, decision: PromotionDecision, eval_id: str, action: str) -> None:
    """Append one decision to ``promotion_decisions`` (action: promote | keep | manual_promote | manual_demote),
    under the table's writer lock: concurrent decisions all land."""
    lake.append(
        "promotion_decisions",
        [
            {
                "eval_id": eval_id,
                "action": action,
                "candidate_version": decision.candidate_version or "",
                "incumbent": decision.incumbent,
                "incumbent_version": decision.incumbent_version or "",
                "promote": decision.promote,
                "reason": decision.reason,
                "p_value": decision.test.p_value,
                "candidate_clean": decision.candidate_rates.get("clean", 0.0),
                "incumbent_clean": decision.incumbent_rates.get("clean", 0.0),
                "decided_at": decision.decided_at,
                "detail": decision.model_dump_json(),
            }
        ],
        schema=DECISION_SCHEMA,
    )


def _metrics(summaries: Sequence[ModelSummary], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for s in summaries:
        for rate in RATES:
            out[f"{prefix}{s.model}_{rate}"] = s.rates[rate].rate
        out[f"{prefix}{s.model}_clean_low"] = s.rates["clean"].low
        out[f"{prefix}{s.model}_clean_high"] = s.rates["clean"].high
        out[f"{prefix}{s.model}_mean_turns"] = s.mean_turns
        for k, v in s.pass_at_k.items():
            out[f"{prefix}{s.model}_{k.replace('@', '_at_')}"] = v
        for cls, n in s.failure_details.items():  # why episodes failed (``evaluation.failures``)
            out[f"{prefix}{s.model}_detail_{cls}"] = n
    return out


def detail_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """``<set>/<model>_detail_<class>`` counts (and ``<set>/<model>_failed``) from ``report.failure_detail_rows``:
    the names ``_metrics`` gives a set's summaries under the prefix ``<set>/``, so the two never disagree."""
    from bashgym_assets.evaluation.failures import DETAIL_CLASSES

    out: dict[str, float] = {}
    for r in rows:
        key = f"{str(r['set']).replace(':', '_')}/{r['model']}"
        out[f"{key}_failed"] = r["failed"]
        for cls in DETAIL_CLASSES:
            if r.get(cls):
                out[f"{key}_detail_{cls}"] = r[cls]
    return out


def log_to_mlflow(
    settings: Settings,
    *,
    eval_id: str,
    summaries: Sequence[ModelSummary],
    decision: PromotionDecision,
    promoted: bool,
    candidate_run_id: str | None,
    specs: Sequence[Any],
    report_dir: Path,
    dagster_run_id: str = "",
    started_ms: int | None = None,
    failure_details: Sequence[dict[str, Any]] = (),
    set_summaries: Mapping[str, Sequence[ModelSummary]] | None = None,
) -> dict[str, str]:
    """The evaluation run (linking both models) and the candidate's training run's ``eval_*`` metrics.
    ``started_ms``: when the evaluation began (epoch ms), so the run's duration is the evaluation's, not the
    logging's. ``failure_details``: ``report.failure_detail_rows`` of the evaluation sets, logged as metrics and
    as the table ``failure_details.json`` (``failure_details.md`` in ``report_dir`` goes up as it is)."""
    from mlflow.entities import Metric, Param, RunTag

    from bashgym_assets.processes import process_tags
    from bashgym_assets.training import registry

    c = registry.client(settings)
    exp = registry.experiment_id(c, EVAL_EXPERIMENT, settings)
    tags = {
        "kind": "evaluation",
        "eval_id": eval_id,
        "dagster_run_id": dagster_run_id,
        "promoted": str(promoted),
        "decision": decision.reason[:500],
        "candidate_training_run": candidate_run_id or "",
        **process_tags(),
    }
    for spec in specs:
        tags[f"{spec.label}_model"] = spec.describe()
        if spec.version:
            tags[f"{spec.label}_version"] = spec.version
    run = c.create_run(exp, run_name=eval_id, tags=tags, start_time=started_ms)
    rid = run.info.run_id
    now = int(time.time() * 1000)
    metrics = [Metric(k, float(v), now, 0) for k, v in _metrics(summaries).items()]
    for set_name, ss in (
        set_summaries or {}
    ).items():  # each evaluation set under its own name: fit/..., unseen/...
        prefix = set_name.replace(":", "_") + "/"
        metrics += [Metric(k, float(v), now, 0) for k, v in _metrics(ss, prefix).items()]
    logged = {m.key for m in metrics}  # a set's summaries may have given its detail counts already
    metrics += [
        Metric(k, float(v), now, 0) for k, v in detail_metrics(failure_details).items() if k not in logged
    ]
    metrics.append(Metric("sign_test_p", decision.test.p_value, now, 0))
    params = [
        Param("scenarios", str(summaries[0].scenarios if summaries else 0)),
        Param("sampling", json.dumps(summaries[0].sampling if summaries else {}, sort_keys=True)[:6000]),
        Param("rule", decision.rule[:6000]),
    ]
    c.log_batch(
        rid,
        metrics=metrics,
        params=params,
        tags=[RunTag("mlflow.note.content", (report_dir / "comparison.md").read_text()[:5000])],
    )
    for name in ("comparison.md", "rates.png", "failing_transcripts.md", "failure_details.md"):
        if (report_dir / name).exists():
            c.log_artifact(rid, str(report_dir / name))
    if failure_details:
        columns = list(failure_details[0])
        c.log_table(rid, {k: [r.get(k, 0) for r in failure_details] for k in columns}, "failure_details.json")
    traces = link_episode_traces(c, exp, eval_id, rid)
    c.set_terminated(rid, "FINISHED")
    if candidate_run_id:
        cand = [s for s in summaries if s.model == "candidate"]
        c.log_batch(
            candidate_run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in _metrics(cand, prefix="eval_").items()],
            tags=[RunTag("evaluation_run", rid), RunTag("promoted", str(promoted))],
        )
    base = settings.mlflow_tracking_uri
    return {
        "evaluation_run_id": rid,
        "evaluation_run_link": registry.run_url(base, exp, rid),
        "tracking_uri": base,
        "traces": str(traces),
    }


def link_episode_traces(c: Any, experiment_id: str, eval_id: str, run_id: str) -> int:
    """Attach the evaluation's episode traces (``rollout.tracing``, tagged with its eval id) to its run, so the
    run page's Traces tab lists them; returns how many. Never fails the logging of the run."""
    from bashgym_assets.rollout import tracing

    tracing.flush_all()
    try:
        ids: list[str] = []
        token = None
        while True:
            page = c.search_traces(
                locations=[experiment_id],
                filter_string=f"tags.eval_id = '{eval_id}'",
                max_results=100,
                include_spans=False,
                page_token=token,
            )
            ids += [t.info.trace_id for t in page]
            token = page.token
            if not token:
                break
        for i in range(0, len(ids), 100):  # the store links at most 100 per call
            c.link_traces_to_run(ids[i : i + 100], run_id)
        return len(ids)
    except Exception:  # noqa: BLE001 - traces are a convenience; the run and its metrics must still be logged
        return 0


# ---- decisions by hand: ``bashgym promote --model N`` / ``bashgym demote --model N`` -------------------------------
def _manual(version: str, reason: str, promote: bool) -> PromotionDecision:
    from datetime import UTC, datetime

    from bashgym_assets.evaluation.promotion import PairedTest

    return PromotionDecision(
        promote=promote,
        reason=f"by hand: {reason}",
        incumbent="",
        candidate_version=version,
        candidate_rates={},
        incumbent_rates={},
        test=PairedTest(scenarios=0, candidate_better=0, incumbent_better=0, ties=0, p_value=1.0),
        rule="manual",
        decided_at=datetime.now(UTC).isoformat(timespec="seconds"),
        manual=True,
    )


def manual_promote(lake: Any, settings: Settings, version: str, reason: str) -> str:
    """Make ``version`` the champion whatever the numbers say; recorded in ``promotion_decisions``."""
    from bashgym_assets.evaluation import promotion as promo
    from bashgym_assets.training import registry

    registry.client(settings).get_model_version(registry.REGISTERED_MODEL, version)  # raises if unknown
    promo.set_alias(registry.REGISTERED_MODEL, version, promo.CHAMPION, settings)
    record_decision(lake, _manual(version, reason, True), "", "manual_promote")
    return f"version {version} of {registry.REGISTERED_MODEL} is the champion now"


def manual_demote(lake: Any, settings: Settings, version: str, reason: str) -> str:
    """Never promote ``version`` automatically again; if it is the champion, the previous champion that was not
    demoted takes the alias back (or there is none)."""
    from bashgym_assets.evaluation import promotion as promo
    from bashgym_assets.training import registry

    name = registry.REGISTERED_MODEL
    registry.client(settings).get_model_version(name, version)  # raises if unknown
    record_decision(lake, _manual(version, reason, False), "", "manual_demote")
    current = promo.alias_version(name, promo.CHAMPION, settings)
    if current is None or str(current.version) != str(version):
        return (
            f"version {version} is demoted (it will not be promoted automatically); the champion is unchanged"
        )
    rows = sorted(lake.read("promotion_decisions").to_pylist(), key=lambda r: r["decided_at"])
    last_action: dict[str, str] = {}
    promoted_order: list[str] = []
    for r in rows:
        v = r["candidate_version"]
        last_action[v] = r["action"]
        if r["action"] in ("promote", "manual_promote"):
            promoted_order.append(v)
    previous = next(
        (v for v in reversed(promoted_order) if v != str(version) and last_action.get(v) != "manual_demote"),
        None,
    )
    if previous:
        promo.set_alias(name, previous, promo.CHAMPION, settings)
        return f"version {version} is demoted; version {previous} is the champion again"
    promo.delete_alias(name, promo.CHAMPION, settings)
    return f"version {version} is demoted; there is no champion now"
