"""Teacher/student routing: which model answers a turn, decided by a strategy, every decision logged to the lake.

Four parts, one a module each, importing one way (``routing`` uses the other three, which know nothing of each
other): ``policy`` (the strategies, task complexity, the student's measured clean rate, who goes first: pure and
light), ``decision_log`` (the ``routing_decisions`` rows, buffered atomic writes, outcomes, ``routing_summary``),
``backends`` (the student and teacher models: an in-process engine, litellm, any operator) and ``routing`` (the
``Router`` and the ``routed:<strategy>`` operator).

Importing this package registers ``routed:`` with the operators registry (``routing`` does, on import), so callers
above the episodes layer take ``make_operator`` from here. Every name is re-exported, so
``from bashgym_assets.serving.router import Router, DecisionLog, ...`` works as it did when this was one module.
"""

from __future__ import annotations

from bashgym_assets.rollout.operators import make_operator
from bashgym_assets.serving.router.backends import (
    Answer,
    Backend,
    ChatParams,
    EngineBackend,
    LiteLLMBackend,
    OperatorBackend,
    student_backend,
    teacher_backend,
    upstream_error_code,
)
from bashgym_assets.serving.router.decision_log import (
    ROUTING_SCHEMA,
    ROUTING_TABLE,
    DecisionLog,
    RoutingDecision,
    routing_summary,
)
from bashgym_assets.serving.router.policy import (
    ALIASES,
    STUDENT,
    TEACHER,
    RouterConfig,
    Strategy,
    conversation_id,
    measured_clean_rate,
    parse_route_spec,
    parse_strategy,
    plan_route,
    progressive_student_share,
    reply_confidence,
    task_complexity,
    task_text,
    uniform_draw,
)
from bashgym_assets.serving.router.routing import Routed, RoutedOperator, Router, routed_operator

__all__ = [
    "ALIASES",
    "ROUTING_SCHEMA",
    "ROUTING_TABLE",
    "STUDENT",
    "TEACHER",
    "Answer",
    "Backend",
    "ChatParams",
    "DecisionLog",
    "EngineBackend",
    "LiteLLMBackend",
    "OperatorBackend",
    "Routed",
    "RoutedOperator",
    "Router",
    "RouterConfig",
    "RoutingDecision",
    "Strategy",
    "conversation_id",
    "make_operator",
    "measured_clean_rate",
    "parse_route_spec",
    "parse_strategy",
    "plan_route",
    "progressive_student_share",
    "reply_confidence",
    "routed_operator",
    "routing_summary",
    "student_backend",
    "task_complexity",
    "task_text",
    "teacher_backend",
    "uniform_draw",
    "upstream_error_code",
]
