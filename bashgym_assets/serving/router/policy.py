"""The routing policy: which model should answer a conversation, decided before anything is generated.

Its own module because the choice is pure, cheap and reproducible (strategy parsing, task complexity, the seeded
per-conversation draw, the student's measured clean rate): a notebook, a dashboard or a test can ask what the
router would do without loading a model, an HTTP client or the decision log. No torch, transformers or litellm.

Strategies (``Strategy``):

``teacher_only`` / ``student_only``
    always the one model (baselines; ``student_only`` never falls back).
``confidence``
    the student answers first, with per-token log-probabilities; its confidence is the mean (``measure=mean``,
    default) or the minimum (``measure=min``) log-probability of its reply's tokens, in nats. Below ``threshold``
    (default -1.0, i.e. a geometric-mean token probability of e^-1 = 0.37) the student's reply is discarded and
    the teacher answers. A reply without log-probabilities or without tokens counts as not confident.
``complexity``
    ``task_complexity`` scores the task (the first user message: the same for every turn of an episode) from 0 to
    1; below ``complexity_threshold`` (default 0.5) the student answers, else the teacher.
``progressive``
    the student takes a share of the conversations equal to its measured clean rate on the behavioural
    evaluation, at least ``floor`` (default 0.1: it keeps being tried, so it keeps being measured) and at most
    ``cap`` (default 0.9). The rate is ``clean_rate`` when given, else read from the lake (``measured_clean_rate``:
    the latest evaluation's promotion decision, else the champion's ``eval_episodes``), and can be updated live
    (``Router.update_student_performance``).
``random``
    A/B: the student takes ``student_share`` (default 0.5) of the conversations, drawn with ``seed``.

``progressive`` and ``random`` draw once per conversation (``uniform_draw`` of the seed and the conversation's
opening messages), not per turn: an episode is driven by one model, so its outcome can be credited to that model,
and the same seed routes the same conversations the same way whatever the order or concurrency.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, Field, field_validator

STUDENT, TEACHER = "student", "teacher"


class Strategy(StrEnum):
    TEACHER_ONLY = "teacher_only"
    STUDENT_ONLY = "student_only"
    CONFIDENCE = "confidence"
    COMPLEXITY = "complexity"
    PROGRESSIVE = "progressive"
    RANDOM = "random"


ALIASES = {
    "teacher": "teacher_only",
    "student": "student_only",
    "confidence_based": "confidence",
    "task_complexity": "complexity",
    "ab": "random",
    "random_sample": "random",
}


def parse_strategy(name: str) -> Strategy:
    key = name.strip().lower().replace("-", "_")
    try:
        return Strategy(ALIASES.get(key, key))
    except ValueError:
        raise ValueError(
            f"unknown routing strategy {name!r}: one of {', '.join(s.value for s in Strategy)}"
        ) from None


class RouterConfig(BaseModel):
    strategy: Strategy = Strategy.CONFIDENCE
    threshold: float = -1.0  # confidence: mean/min token log-probability (nats)
    measure: str = Field(default="mean", pattern="^(mean|min)$")
    complexity_threshold: float = 0.5
    student_share: float = Field(default=0.5, ge=0.0, le=1.0)  # random A/B
    floor: float = Field(default=0.1, ge=0.0, le=1.0)  # progressive
    cap: float = Field(default=0.9, ge=0.0, le=1.0)  # progressive
    clean_rate: float | None = Field(default=None, ge=0.0, le=1.0)  # progressive: given instead of measured
    seed: int = 0

    @field_validator("strategy", mode="before")
    @classmethod
    def _alias(cls, v: Any) -> Any:
        return parse_strategy(v) if isinstance(v, str) else v


# ---- a strategy and its options from a spec string ------------------------------------------------------------------
def parse_route_spec(spec: str) -> RouterConfig:
    """``confidence?threshold=-0.8&measure=min``, ``progressive?cap=0.8``, ``random?student_share=0.2&seed=3``."""
    name, _, query = spec.partition("?")
    fields: dict[str, Any] = {k: v for k, v in parse_qsl(query, strict_parsing=bool(query))}
    unknown = set(fields) - (set(RouterConfig.model_fields) - {"strategy"})
    if unknown:
        raise ValueError(f"unknown routing option(s) {sorted(unknown)}: {sorted(RouterConfig.model_fields)}")
    return RouterConfig(strategy=parse_strategy(name), **fields)


# ---- task complexity ---------------------------------------------------------------------------------------------
_STEP_MARKERS = re.compile(
    r"\b(then|after that|afterwards|also|finally|next)\b|;|\n\s*(?:\d+[.)]|[-*])\s", re.I
)
_HARD_TERMS = re.compile(
    r"\b(awk|sed|regex|regular expression|cron|crontab|systemd|docker|iptables|rebase|merge conflict|script|loop|"
    r"recursive(?:ly)?|parse|json|yaml|csv|permissions?|archive|compress|checksum|signal|process(?:es)?|"
    r"symlink|environment variable|port|daemon|pipeline|concurrent|race)\b",
    re.I,
)
_CONDITIONS = re.compile(r"\b(if|unless|every|each|only|except|without|unless|whose|which|that are)\b", re.I)


def task_complexity(task: str) -> tuple[float, str]:
    """A 0..1 score for how hard a shell task reads, and the reason, from four observable signals:

    - length: 0.25 x min(1, words / 60) (longer tasks say more that must be done);
    - steps: 0.1 per step marker ("then", "also", "finally", ";", a list item), at most 0.3;
    - hard tools and concepts (awk, sed, regex, cron, systemd, docker, json, permissions, processes, scripts,
      loops, recursion ...): 0.1 per distinct term, at most 0.3;
    - conditions and quantifiers ("if", "unless", "every", "each", "only", "except" ...): 0.05 each, at most 0.15.

    Deliberately simple and inspectable: the score and its parts are logged with each decision, and the
    threshold is a setting, so a user can see and tune what goes where."""
    words = len(task.split())
    length = 0.25 * min(1.0, words / 60)
    steps = min(0.3, 0.1 * len(_STEP_MARKERS.findall(task)))
    terms = sorted({m.lower() for m in _HARD_TERMS.findall(task)})
    hard = min(0.3, 0.1 * len(terms))
    conds = min(0.15, 0.05 * len(_CONDITIONS.findall(task)))
    score = round(min(1.0, length + steps + hard + conds), 4)
    reason = (
        f"complexity {score:.2f} = length {length:.2f} ({words} words) + steps {steps:.2f} + terms "
        f"{hard:.2f} ({', '.join(terms[:5]) or 'none'}) + conditions {conds:.2f}"
    )
    return score, reason


def task_text(messages: Sequence[dict[str, str]]) -> str:
    """The task: the first user message (in an episode, the scenario's task; it never changes across turns)."""
    return next((m["content"] for m in messages if m["role"] == "user"), "")


def conversation_id(messages: Sequence[dict[str, str]]) -> str:
    """A stable id of a conversation: a hash of its messages up to and including the first user message."""
    head = []
    for m in messages:
        head.append(f"{m['role']}\x00{m['content']}")
        if m["role"] == "user":
            break
    return hashlib.sha256("\x01".join(head).encode()).hexdigest()[:16]


def uniform_draw(seed: int, key: str) -> float:
    """A reproducible draw in [0, 1) for (seed, key)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# ---- the student's measured success --------------------------------------------------------------------------------
def measured_clean_rate(lake: Any) -> tuple[float | None, str]:
    """The serving student's clean rate on the latest behavioural evaluation, and where it came from.

    From ``promotion_decisions`` (the latest automatic decision): the candidate's clean rate when it was promoted
    or when there is no champion (then the candidate is what one serves), else the champion's (the incumbent).
    Else the mean clean rate of the ``champion`` rows of ``eval_episodes`` (held-out evaluations only: a
    ``--split train`` run measures fit). ``(None, why)`` when neither exists."""
    try:
        rows = [
            r
            for r in lake.read("promotion_decisions").to_pylist()
            if r.get("eval_id") and r.get("action") in ("promote", "keep")
        ]
    except FileNotFoundError:
        rows = []
    if rows:
        latest = max(rows, key=lambda r: r.get("decided_at") or "")
        if latest["promote"] or latest.get("incumbent") == "base":
            return float(
                latest["candidate_clean"]
            ), f"promotion_decisions {latest['eval_id']}: candidate clean rate"
        return float(
            latest["incumbent_clean"]
        ), f"promotion_decisions {latest['eval_id']}: champion clean rate"
    try:
        from bashgym_assets.scenarios.gate import TRAIN_SPLIT_EVAL_PREFIX

        held_out = [p for p in lake.partitions("eval_episodes") if not p.startswith(TRAIN_SPLIT_EVAL_PREFIX)]
        eps = lake.read_all(
            "eval_episodes", held_out, columns=["model", "clean", "failure_class"]
        ).to_pylist()
    except FileNotFoundError:
        eps = []
    scored = [
        e
        for e in eps
        if e["model"] == "champion" and e["failure_class"] not in ("setup_failed", "sandbox_error")
    ]
    if scored:
        return sum(bool(e["clean"]) for e in scored) / len(
            scored
        ), f"eval_episodes: champion ({len(scored)} episodes)"
    return None, "no evaluation of the student in the lake"


# ---- the choice ------------------------------------------------------------------------------------------------------
def progressive_student_share(config: RouterConfig, clean_rate: float | None) -> float:
    """Progressive routing's student share: the measured clean rate, clamped to [floor, cap]."""
    return min(config.cap, max(config.floor, clean_rate or 0.0))


def plan_route(
    config: RouterConfig,
    messages: list[dict[str, str]],
    clean_rate: float | None = None,
    clean_rate_source: str = "",
) -> tuple[str, str, dict[str, Any]]:
    """(first model to ask, reason, extra decision fields) before anything is generated; ``clean_rate`` and its
    source feed ``progressive``."""
    c = config
    s = c.strategy
    if s == Strategy.TEACHER_ONLY:
        return TEACHER, "strategy teacher_only", {}
    if s == Strategy.STUDENT_ONLY:
        return STUDENT, "strategy student_only", {}
    if s == Strategy.CONFIDENCE:
        return STUDENT, "", {"threshold": c.threshold}
    if s == Strategy.COMPLEXITY:
        score, why = task_complexity(task_text(messages))
        chosen = STUDENT if score < c.complexity_threshold else TEACHER
        rel = "<" if chosen == STUDENT else ">="
        return (
            chosen,
            f"{why} {rel} {c.complexity_threshold}",
            {"complexity": score, "threshold": c.complexity_threshold},
        )
    if s == Strategy.PROGRESSIVE:
        share = progressive_student_share(c, clean_rate)
        draw = uniform_draw(c.seed, conversation_id(messages))
        chosen = STUDENT if draw < share else TEACHER
        return (
            chosen,
            (
                f"draw {draw:.3f} {'<' if chosen == STUDENT else '>='} student share {share:.2f} "
                f"(clean rate {clean_rate if clean_rate is not None else 'unknown'} from "
                f"{clean_rate_source or 'nowhere'}; floor {c.floor}, cap {c.cap})"
            ),
            {"student_share": share},
        )
    draw = uniform_draw(c.seed, conversation_id(messages))
    chosen = STUDENT if draw < c.student_share else TEACHER
    return (
        chosen,
        (
            f"A/B draw {draw:.3f} {'<' if chosen == STUDENT else '>='} student share "
            f"{c.student_share} (seed {c.seed})"
        ),
        {"student_share": c.student_share},
    )


def reply_confidence(logprobs: list[float] | None, measure: str = "mean") -> float | None:
    """The ``confidence`` strategy's measure of a reply: the mean or min token log-probability (nats); None
    without tokens (not confident), -1e9 for a non-finite value."""
    if not logprobs:
        return None
    value = min(logprobs) if measure == "min" else sum(logprobs) / len(logprobs)
    return value if math.isfinite(value) else -1e9
