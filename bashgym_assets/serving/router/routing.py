"""The router and the ``routed:<strategy>`` operator: the one place where policy, backends and log meet.

Its own module because it is the only part that needs all three: a ``Router`` asks ``policy`` who goes first,
sends the student's share to the student backend in one batch and the rest (and the student's unconfident or
failed replies) to the teacher, and appends every decision to the ``DecisionLog``. Whenever the student fails (an
error, a context overflow), the teacher answers, except under ``student_only``. ``RoutedOperator`` puts a router
behind the rollout ``Operator`` interface, so an evaluation or an episode can be routed; importing this module
registers ``routed:`` with the operators registry (which never imports serving).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from bashgym_assets.rollout.operators import Operator, OperatorError, Reply, register_operator
from bashgym_assets.rollout.transcript import Message
from bashgym_assets.serving.router.backends import (
    Answer,
    Backend,
    ChatParams,
    student_backend,
    teacher_backend,
)
from bashgym_assets.serving.router.decision_log import DecisionLog, RoutingDecision
from bashgym_assets.serving.router.policy import (
    STUDENT,
    TEACHER,
    RouterConfig,
    Strategy,
    conversation_id,
    measured_clean_rate,
    parse_route_spec,
    plan_route,
    progressive_student_share,
    reply_confidence,
    task_text,
)


class Routed(BaseModel):
    answer: Answer
    decision: RoutingDecision


# ---- the router ----------------------------------------------------------------------------------------------------
class Router:
    """Routes batches of conversations between a student and a teacher backend (the strategies: ``policy``)."""

    def __init__(
        self,
        config: RouterConfig,
        student: Backend,
        teacher: Backend,
        log: DecisionLog | None = None,
        lake: Any = None,
    ) -> None:
        self.config = config
        self.student = student
        self.teacher = teacher
        self.log = log
        self.clean_rate = config.clean_rate
        self.clean_rate_source = "given" if config.clean_rate is not None else ""
        self.scenarios: dict[
            str, str
        ] = {}  # task message -> scenario id (RoutedOperator.for_scenario fills it)
        if config.strategy == Strategy.PROGRESSIVE and self.clean_rate is None and lake is not None:
            self.clean_rate, self.clean_rate_source = measured_clean_rate(lake)

    def update_student_performance(self, clean_rate: float, source: str = "updated") -> None:
        """Progressive routing's input: the student's latest measured clean rate."""
        self.clean_rate, self.clean_rate_source = max(0.0, min(1.0, clean_rate)), source

    def progressive_share(self) -> float:
        return progressive_student_share(self.config, self.clean_rate)

    def bind(self, bundle: Any) -> Router:
        bound = Router.__new__(Router)
        bound.__dict__.update(self.__dict__)
        bound.student, bound.teacher = self.student.bind(bundle), self.teacher.bind(bundle)
        return bound

    def _plan(self, messages: list[dict[str, str]]) -> tuple[str, str, dict[str, Any]]:
        """(first model to ask, reason, extra decision fields) before anything is generated."""
        return plan_route(self.config, messages, self.clean_rate, self.clean_rate_source)

    def confidence(self, logprobs: list[float] | None) -> float | None:
        return reply_confidence(logprobs, self.config.measure)

    def route_many(
        self,
        conversations: Sequence[list[dict[str, str]]],
        params: ChatParams | None = None,
        scenario_id: str = "",
        source: str = "operator",
        request_ids: Sequence[str] | None = None,
    ) -> list[Routed]:
        """Route and answer every conversation: the student's share goes to the student in ONE batch, the
        teacher's (including the student's low-confidence or failed replies) concurrently; each decision logged."""
        params = params or ChatParams()
        started, started_ns = time.monotonic(), time.time_ns()
        convs = [list(c) for c in conversations]
        ids = list(request_ids) if request_ids else [f"route-{uuid.uuid4().hex[:16]}" for _ in convs]
        plans = [self._plan(c) for c in convs]
        answers: list[Answer | None] = [None] * len(convs)
        chosen = [p[0] for p in plans]
        reasons = [p[1] for p in plans]
        extras = [dict(p[2]) for p in plans]
        student_lat: list[float | None] = [None] * len(convs)
        teacher_lat: list[float | None] = [None] * len(convs)
        student_ans: list[Answer | None] = [None] * len(convs)  # the student's reply, also when overruled
        to_student = [i for i, p in enumerate(plans) if p[0] == STUDENT]
        if to_student:
            want_lp = self.config.strategy == Strategy.CONFIDENCE
            got = self.student.complete([convs[i] for i in to_student], params, logprobs=want_lp)
            for i, ans in zip(to_student, got, strict=True):
                student_lat[i] = ans.latency_s
                student_ans[i] = ans
                if ans.error and self.config.strategy != Strategy.STUDENT_ONLY:
                    chosen[i], reasons[i] = TEACHER, f"student failed ({ans.error[:200]})"
                    continue
                if want_lp:
                    conf = self.confidence(ans.logprobs)
                    extras[i]["confidence"] = conf
                    th = self.config.threshold
                    if conf is None:
                        chosen[i], reasons[i] = TEACHER, "student reply without token log-probabilities"
                        continue
                    if conf < th:
                        chosen[i] = TEACHER
                        reasons[i] = f"student {self.config.measure} logprob {conf:.3f} < threshold {th}"
                        continue
                    reasons[i] = f"student {self.config.measure} logprob {conf:.3f} >= threshold {th}"
                answers[i] = ans
        to_teacher = [i for i in range(len(convs)) if chosen[i] == TEACHER]
        if to_teacher:
            got = self.teacher.complete([convs[i] for i in to_teacher], params)
            for i, ans in zip(to_teacher, got, strict=True):
                teacher_lat[i] = ans.latency_s
                answers[i] = ans
                if ans.error:  # said as it is: the teacher did not answer
                    reasons[i] = f"{reasons[i]}; teacher failed ({ans.error[:200]})"
                elif (student := student_ans[i]) is not None and student.error:
                    reasons[i] = f"{reasons[i]}; teacher answered"
        took = time.monotonic() - started
        now = datetime.now(UTC)
        out = []
        for i, answered in enumerate(answers):
            ans = answered or Answer(error="no answer", finish_reason="error")
            student = student_ans[i]
            decision = RoutingDecision(
                request_id=ids[i],
                decided_at=now,
                strategy=self.config.strategy.value,
                chosen=chosen[i],
                model=self.student.name if chosen[i] == STUDENT else self.teacher.name,
                student_model=self.student.name,
                teacher_model=self.teacher.name,
                reason=reasons[i],
                latency_s=took,
                student_latency_s=student_lat[i],
                teacher_latency_s=teacher_lat[i],
                completion_tokens=ans.completion_tokens,
                error=ans.error or "",
                conversation_id=conversation_id(convs[i]),
                scenario_id=scenario_id or self.scenarios.get(task_text(convs[i]), ""),
                turn=sum(m["role"] == "assistant" for m in convs[i]),
                source=source,
                prompt_tokens=ans.prompt_tokens,
                finish_reason=ans.finish_reason,
                student_reply=student.text if student is not None else "",
                student_completion_tokens=student.completion_tokens if student is not None else None,
                **extras[i],
            )
            out.append(Routed(answer=ans, decision=decision))
        if self.log is not None:
            self.log.append([r.decision for r in out])
        if source != "operator":  # an operator's turns are traced by the episode that drives it
            self._trace(out, convs, started_ns)
        return out

    @staticmethod
    def _trace(routed: list[Routed], convs: list[list[dict[str, str]]], start_ns: int) -> None:
        """Each routed request the server answered becomes an MLflow trace (experiment ``bashgym-routing``): one
        span per model it called (the student, then the teacher when it took over), the decision as attributes."""
        from bashgym_assets.rollout import tracing

        sink = tracing.sink()
        if sink is None:
            return
        for r, conv in zip(routed, convs, strict=True):
            d, ans = r.decision, r.answer
            turns: list[tracing.TurnRecord] = []
            at = start_ns
            for who, model, latency in (
                (STUDENT, d.student_model, d.student_latency_s),
                (TEACHER, d.teacher_model, d.teacher_latency_s),
            ):
                if latency is None:
                    continue
                answered = d.chosen == who
                end = at + int(latency * 1e9)
                if answered:
                    reply, tokens, error, finish = (
                        ans.text,
                        ans.completion_tokens,
                        ans.error or "",
                        ans.finish_reason,
                    )
                else:  # the student's overruled (or failed) reply, as it was
                    reply, tokens = d.student_reply, d.student_completion_tokens or 0
                    error, finish = ("" if tokens or reply else "no usable reply"), "overruled"
                turns.append(
                    tracing.TurnRecord(
                        index=len(turns),
                        start_ns=at,
                        end_ns=end,
                        model_s=latency,
                        reply=tracing.excerpt(reply),
                        new_tokens=tokens,
                        prompt_tokens=ans.prompt_tokens if answered else 0,
                        error=error,
                        attributes={
                            "model": model,
                            "role": who,
                            "answered": answered,
                            "finish_reason": finish,
                        },
                    )
                )
                at = end
            attributes = {
                "strategy": d.strategy,
                "chosen": d.chosen,
                "model": d.model,
                "reason": d.reason,
                "confidence": d.confidence,
                "request_id": d.request_id,
                "finish_reason": d.finish_reason,
                "prompt_tokens": d.prompt_tokens,
                "completion_tokens": d.completion_tokens,
            }
            sink.add(
                tracing.episode_trace(
                    "routed_request",
                    tracing.ROUTING_EXPERIMENT,
                    turns,
                    start_ns,
                    inputs={"messages": conv[-6:]},
                    outputs={"reply": ans.text},
                    attributes=attributes,
                    error=ans.error or "",
                )
            )

    def record_outcome(self, outcome: str, **match: Any) -> int:
        return self.log.record_outcome(outcome, **match) if self.log is not None else 0


# ---- the routed operator ---------------------------------------------------------------------------------------------
class RoutedOperator(Operator):
    """``routed:<strategy>``: each turn (each lockstep batch in the evaluator) goes through a ``Router``.

    Unscaffolded like the evaluated models (the student was trained without the instruction). Decisions carry the
    scenario id (``for_scenario``); ``record_outcome`` fills the outcome in once the episode's check has run."""

    def __init__(
        self,
        router: Router,
        params: ChatParams | None = None,
        scenario_id: str = "",
        scaffolded: bool = False,
    ) -> None:
        self.router = router
        self.params = params or ChatParams()
        self.scenario_id = scenario_id
        self.scaffolded = scaffolded
        self.name = f"routed:{router.config.strategy.value}"

    def for_scenario(self, bundle: Any) -> RoutedOperator:
        """Self, unless the teacher must be bound to the scenario (``reference``): the evaluator batches one
        operator object's turns together, so the student generates every episode's turn in one call. The
        scenario's task is registered so decisions carry its id either way."""
        from bashgym_assets.rollout.transcript import task_message

        self.router.scenarios[task_message(bundle)] = getattr(bundle, "id", "")
        if self.router.teacher.bind(bundle) is self.router.teacher:
            return self
        return RoutedOperator(
            self.router.bind(bundle), self.params, getattr(bundle, "id", ""), self.scaffolded
        )

    def sampling(self) -> dict[str, Any]:
        return {
            **self.params.model_dump(),
            "router": self.router.config.model_dump(mode="json"),
            "student": self.router.student.name,
            "teacher": self.router.teacher.name,
        }

    def replies(self, conversations: Sequence[list[Message]]) -> list[Reply]:
        routed = self.router.route_many(
            [[m.model_dump() for m in c] for c in conversations],
            self.params,
            scenario_id=self.scenario_id,
            source="operator",
        )
        return [
            Reply(
                text=r.answer.text,
                error=r.answer.error,
                truncated=r.answer.finish_reason == "length",
                new_tokens=r.answer.completion_tokens,
            )
            for r in routed
        ]

    def next_command(self, messages: list[Message]) -> str:
        reply = self.replies([messages])[0]
        if reply.error:
            raise OperatorError(reply.error)
        return reply.text

    def record_outcome(self, outcome: str, scenario_id: str = "") -> int:
        """An episode's outcome (e.g. ``clean``/``failed``) on every decision of its scenario (``scenario_id``,
        default the one this copy is bound to)."""
        sid = scenario_id or self.scenario_id
        return self.router.record_outcome(outcome, scenario_id=sid) if sid else 0


def routed_operator(
    route: str,
    api_base: str | None = None,
    adapter_dir: str | None = None,
    student: str | None = None,
    teacher: str | None = None,
    student_api_base: str | None = None,
    max_new_tokens: int | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    lake: Any = None,
    settings: Any = None,
    **_ignored: Any,
) -> RoutedOperator:
    """The ``routed:<strategy>[?options]`` operator of ``make_operator``: ``student`` (default
    ``BASHGYM_ROUTER_STUDENT`` or ``champion``) and ``teacher`` (default the configured teacher, at ``api_base``),
    decisions logged to the lake of ``settings``."""
    from bashgym_assets.config import get_settings
    from bashgym_assets.lake import Lake

    settings = settings or get_settings()
    config = parse_route_spec(route)
    lake = lake or Lake(settings)
    s = student_backend(
        student or get_settings().router_student,  # the environment now, whoever made ``settings``
        adapter_dir,
        student_api_base or get_settings().router_student_api_base,
        settings,
    )
    t = teacher_backend(teacher, api_base, settings)
    router = Router(config, s, t, DecisionLog(lake), lake=lake)
    params = ChatParams(max_tokens=max_new_tokens or max_tokens or 128, temperature=temperature)
    return RoutedOperator(router, params)


# ``routed:`` specs: registered with the operators module on import (it never imports serving); callers above
# the episodes layer take ``make_operator`` from here so that the registration has happened
register_operator("routed", routed_operator, help="teacher/student routing: routed:<strategy>[?options]")
