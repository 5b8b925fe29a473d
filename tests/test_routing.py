"""Teacher/student routing: the local OpenAI-compatible test server as the teacher, the tiny local model (with a
random LoRA adapter) as the student; every strategy, the ``routing_decisions`` log in the lake, the ``routed:``
operator (also inside a real sandbox episode) and routing through ``bashgym serve``."""

from __future__ import annotations

import os
import time

import httpx
import pyarrow as pa
import pytest
from openai_server import Answer, OpenAIServer, last_user_text, scripted
from test_serving import build_student

from bashgym_assets.lake import Lake
from bashgym_assets.rollout.operators import make_operator
from bashgym_assets.rollout.transcript import Message
from bashgym_assets.serving.app import LocalServer, create_app
from bashgym_assets.serving.batching import Batcher
from bashgym_assets.serving.engine import ChatEngine, GenerationRequest
from bashgym_assets.serving.router import (
    ROUTING_TABLE,
    ChatParams,
    DecisionLog,
    EngineBackend,
    Router,
    RouterConfig,
    Strategy,
    conversation_id,
    measured_clean_rate,
    parse_route_spec,
    routing_summary,
    task_complexity,
    teacher_backend,
)
from bashgym_assets.serving.router import uniform_draw as _uniform

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SIMPLE = "List the files in your home folder."
COMPLEX = (
    "Write a script that parses every JSON file under ~/data recursively, then, for each record whose "
    "status is failed, extracts the process id with awk and sed; also set permissions on the results "
    "only if the archive checksum matches, and finally install a cron job that runs it nightly."
)


def chat(task: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are a shell operator."}, {"role": "user", "content": task}]


def teacher_says(body: dict) -> str:
    return "echo teacher:" + last_user_text(body)[:20]


@pytest.fixture(scope="module")
def student_engine(tmp_path_factory: pytest.TempPathFactory) -> ChatEngine:
    model_dir, adapter = build_student(tmp_path_factory.mktemp("route-student"))
    return ChatEngine(model_dir, adapter, name="tiny-student", max_context_tokens=512).load()


@pytest.fixture(scope="module")
def teacher():
    with OpenAIServer(teacher_says, model="teacher") as server:
        yield server


@pytest.fixture
def lake(settings) -> Lake:
    return Lake(settings)


OPEN_LOGS: list[DecisionLog] = []


@pytest.fixture(autouse=True)
def _close_logs():
    """Flush and stop every decision log a test opened (their data folder goes away with the test)."""
    yield
    while OPEN_LOGS:
        OPEN_LOGS.pop().close()


def opened(log: DecisionLog) -> DecisionLog:
    OPEN_LOGS.append(log)
    return log


def router(student_engine: ChatEngine, teacher: OpenAIServer, lake: Lake, settings, **config) -> Router:
    log = DecisionLog(lake)
    OPEN_LOGS.append(log)
    return Router(
        RouterConfig(**config),
        EngineBackend(student_engine),
        teacher_backend(teacher.litellm_model, teacher.url, settings),
        log,
        lake=lake,
    )


def student_text(engine: ChatEngine, task: str, max_tokens: int = 8) -> tuple[str, list[float]]:
    g = engine.generate(
        [GenerationRequest(messages=chat(task), max_tokens=max_tokens, logprobs=True, trim=True)]
    )[0]
    return g.text, [t.logprob for t in g.logprobs or []]


def test_teacher_only_and_student_only(student_engine, teacher, lake, settings) -> None:
    params = ChatParams(max_tokens=8)
    r = router(student_engine, teacher, lake, settings, strategy="teacher_only")
    got = r.route_many([chat(SIMPLE), chat(COMPLEX)], params)
    assert [g.answer.text for g in got] == ["echo teacher:" + SIMPLE[:20], "echo teacher:" + COMPLEX[:20]]
    assert {g.decision.chosen for g in got} == {"teacher"} and got[0].decision.model == "openai/teacher"
    s = router(student_engine, teacher, lake, settings, strategy="student")
    got = s.route_many([chat(SIMPLE)], params)
    assert got[0].decision.chosen == "student" and got[0].decision.model == "tiny-student"
    assert got[0].answer.text == student_text(student_engine, SIMPLE)[0]


def test_confidence_routes_on_the_students_token_logprobs(student_engine, teacher, lake, settings) -> None:
    text, lps = student_text(student_engine, SIMPLE)
    mean, low = sum(lps) / len(lps), min(lps)
    params = ChatParams(max_tokens=8)
    sure = router(student_engine, teacher, lake, settings, strategy="confidence", threshold=mean - 0.01)
    got = sure.route_many([chat(SIMPLE)], params)[0]
    assert got.decision.chosen == "student" and got.answer.text == text
    assert got.decision.confidence == pytest.approx(mean, abs=1e-4)
    before = len(teacher.requests)
    unsure = router(student_engine, teacher, lake, settings, strategy="confidence", threshold=mean + 0.01)
    got = unsure.route_many([chat(SIMPLE)], params)[0]
    assert got.decision.chosen == "teacher" and got.answer.text.startswith("echo teacher:")
    assert len(teacher.requests) == before + 1 and "< threshold" in got.decision.reason
    by_min = router(
        student_engine,
        teacher,
        lake,
        settings,
        strategy="confidence",
        measure="min",
        threshold=(low + mean) / 2,
    )
    got = by_min.route_many([chat(SIMPLE)], params)[0]
    if low < mean:  # the weakest token decides under measure=min
        assert got.decision.chosen == "teacher" and got.decision.confidence == pytest.approx(low, abs=1e-4)


def test_task_complexity_heuristic_and_routing(student_engine, teacher, lake, settings) -> None:
    easy, why_easy = task_complexity(SIMPLE)
    hard, why_hard = task_complexity(COMPLEX)
    assert easy < 0.2 < 0.5 <= hard <= 1.0 and "awk" in why_hard and "words" in why_easy
    r = router(student_engine, teacher, lake, settings, strategy="task_complexity")
    got = r.route_many([chat(SIMPLE), chat(COMPLEX)], ChatParams(max_tokens=6))
    assert [g.decision.chosen for g in got] == ["student", "teacher"]
    assert got[1].decision.complexity == pytest.approx(hard)
    # every turn of a conversation scores the same task (the first user message), not the latest observation
    later = chat(SIMPLE) + [{"role": "assistant", "content": "ls"}, {"role": "user", "content": COMPLEX}]
    assert r._plan(later)[0] == "student"


def test_progressive_share_grows_with_the_measured_clean_rate(
    student_engine, teacher, lake, settings
) -> None:
    from bashgym_assets.evaluation.tracking import DECISION_SCHEMA

    convs = [chat(f"task number {i}: count the files") for i in range(200)]

    def students(rate: float) -> set[int]:
        r = router(
            student_engine,
            teacher,
            lake,
            settings,
            strategy="progressive",
            clean_rate=rate,
            floor=0.1,
            cap=0.8,
        )
        return {i for i, c in enumerate(convs) if r._plan(c)[0] == "student"}

    low, mid, high, top = students(0.0), students(0.4), students(0.7), students(1.0)
    assert low <= mid <= high <= top  # a conversation given to the student stays with it as the rate grows
    assert 0.03 < len(low) / 200 < 0.2 and 0.3 < len(mid) / 200 < 0.5 and 0.7 < len(top) / 200 < 0.9
    # measured: the latest automatic promotion decision in the lake
    assert measured_clean_rate(lake)[0] is None
    # else the champion's held-out episodes; a train-split run (fit, not generalisation) does not count
    from bashgym_assets.evaluation import EVAL_EPISODE_SCHEMA
    from bashgym_assets.scenarios.gate import TRAIN_SPLIT_EVAL_PREFIX

    blank = {f: None for f in EVAL_EPISODE_SCHEMA.names}

    def episodes(clean: list[bool]) -> list[dict]:
        return [
            {**blank, "model": "champion", "clean": c, "failure_class": "" if c else "wrong_result"}
            for c in clean
        ]

    lake.write(
        "eval_episodes",
        episodes([True, False, False, False]),
        partition="eval-held",
        schema=EVAL_EPISODE_SCHEMA,
    )
    lake.write(
        "eval_episodes",
        episodes([True] * 8),
        partition=f"{TRAIN_SPLIT_EVAL_PREFIX}x",
        schema=EVAL_EPISODE_SCHEMA,
    )
    assert measured_clean_rate(lake) == (0.25, "eval_episodes: champion (4 episodes)")
    row = {f: None for f in DECISION_SCHEMA.names}
    rows = [
        {
            **row,
            "eval_id": "eval-a",
            "action": "promote",
            "incumbent": "base",
            "promote": True,
            "candidate_clean": 0.25,
            "incumbent_clean": 0.0,
            "decided_at": "2026-11-20T00:00:00",
        },
        {
            **row,
            "eval_id": "eval-b",
            "action": "keep",
            "incumbent": "champion",
            "promote": False,
            "candidate_clean": 0.1,
            "incumbent_clean": 0.5,
            "decided_at": "2026-11-24T00:00:00",
        },
    ]
    lake.write("promotion_decisions", rows, schema=DECISION_SCHEMA)
    rate, source = measured_clean_rate(lake)
    assert rate == 0.5 and "eval-b" in source
    r = router(student_engine, teacher, lake, settings, strategy="progressive", cap=0.8)
    assert r.progressive_share() == 0.5
    r.update_student_performance(0.95)
    assert r.progressive_share() == 0.8


def test_random_ab_is_seeded_and_sticky(student_engine, teacher, lake, settings) -> None:
    convs = [chat(f"task {i}") for i in range(200)]

    def picks(seed: int, share: float = 0.5) -> list[str]:
        r = router(student_engine, teacher, lake, settings, strategy="random", seed=seed, student_share=share)
        return [r._plan(c)[0] for c in convs]

    assert picks(1) == picks(1) != picks(2)
    assert 0.4 < picks(1).count("student") / 200 < 0.6
    assert set(picks(1, 0.0)) == {"teacher"} and set(picks(1, 1.0)) == {"student"}
    # one draw per conversation: later turns of the same conversation go where the first went
    r = router(student_engine, teacher, lake, settings, strategy="random", seed=1)
    first = convs[3]
    assert (
        r._plan(first + [{"role": "assistant", "content": "ls"}, {"role": "user", "content": "out"}])[0]
        == r._plan(first)[0]
        == ("student" if _uniform(1, conversation_id(first)) < 0.5 else "teacher")
    )


def test_decisions_are_logged_to_the_lake(student_engine, teacher, lake, settings) -> None:
    assert routing_summary(lake) == []
    log = DecisionLog(lake, flush_every=2, flush_interval_s=3600)
    r = Router(
        RouterConfig(strategy=Strategy.COMPLEXITY),
        EngineBackend(student_engine),
        teacher_backend(teacher.litellm_model, teacher.url, settings),
        log,
    )
    got = r.route_many(
        [chat(SIMPLE), chat(COMPLEX), chat("pwd")],
        ChatParams(max_tokens=4),
        scenario_id="scn-1",
        request_ids=["r1", "r2", "r3"],
    )
    # 3 rows, flush_every 2: already on disk as one partition, nothing buffered after close
    assert len(lake.partitions(ROUTING_TABLE)) == 1
    assert r.record_outcome("clean", request_ids=["r2"]) == 1
    log.close()
    rows = {row["request_id"]: row for row in lake.read_all(ROUTING_TABLE).to_pylist()}
    assert set(rows) == {"r1", "r2", "r3"}
    assert rows["r2"]["outcome"] == "clean" and rows["r1"]["outcome"] == ""
    assert rows["r2"]["chosen"] == "teacher" and rows["r1"]["chosen"] == "student"
    assert rows["r1"]["strategy"] == "complexity" and rows["r1"]["scenario_id"] == "scn-1"
    assert rows["r1"]["latency_s"] >= rows["r1"]["student_latency_s"] > 0
    assert rows["r2"]["reason"] == got[1].decision.reason and rows["r1"]["complexity"] is not None
    con = lake.connect()
    assert dict(con.execute(f"select chosen, count(*) from {ROUTING_TABLE} group by 1").fetchall()) == {
        "student": 2,
        "teacher": 1,
    }
    assert pa.types.is_timestamp(lake.read_all(ROUTING_TABLE).schema.field("decided_at").type)
    (day,) = routing_summary(lake)
    assert day["strategy"] == "complexity" and day["requests"] == 3
    assert day["student_share"] == pytest.approx(2 / 3) and day["teacher_clean_rate"] == 1.0
    assert day["student_clean_rate"] is None  # no student outcome known yet


def test_unflushed_decisions_reach_the_lake_on_the_timer(student_engine, teacher, lake, settings) -> None:
    log = DecisionLog(lake, flush_every=1000, flush_interval_s=0.05)
    r = Router(
        RouterConfig(strategy=Strategy.TEACHER_ONLY),
        EngineBackend(student_engine),
        teacher_backend(teacher.litellm_model, teacher.url, settings),
        log,
    )
    r.route_many([chat("pwd")], ChatParams(max_tokens=4), request_ids=["timer-1"])
    deadline = time.monotonic() + 30
    while not lake.partitions(ROUTING_TABLE) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [row["request_id"] for row in lake.read_all(ROUTING_TABLE).to_pylist()] == ["timer-1"]
    log.close()


def test_routed_operator_from_make_operator(student_engine, teacher, settings, lake) -> None:
    assert parse_route_spec("confidence?threshold=-0.8&measure=min").threshold == -0.8
    with pytest.raises(ValueError):
        parse_route_spec("confidence?thresold=1")
    with pytest.raises(ValueError):
        parse_route_spec("sometimes")
    op = make_operator(
        "routed:teacher_only",
        api_base=teacher.url,
        student=f"local:{student_engine.model_dir}",
        adapter_dir=student_engine.adapter_dir,
        teacher=teacher.litellm_model,
        settings=settings,
        max_new_tokens=8,
    )
    assert op.name == "routed:teacher_only" and not op.scaffolded
    replies = op.replies([[Message(**m) for m in chat(SIMPLE)], [Message(**m) for m in chat("pwd")]])
    assert [x.text for x in replies] == ["echo teacher:" + SIMPLE[:20], "echo teacher:pwd"]
    op.router.log.close()
    assert len(lake.read_all(ROUTING_TABLE).to_pylist()) == 2


@pytest.mark.docker
def test_routed_operator_runs_a_sandbox_episode(student_engine, settings, lake, sandbox_image) -> None:
    """Confidence routing with an unreachable bar: the student answers every turn first and the teacher (over
    HTTP, typing the reference solution) replaces it; the episode passes its check; the outcome is recorded."""
    from test_rollout_sandbox import TRAIN_BUNDLE, policy

    from bashgym_assets.rollout.episode import run_episode
    from bashgym_assets.scenarios.gate import TRAIN

    with OpenAIServer(policy(list(TRAIN_BUNDLE.reference)), model="teacher") as tsrv:
        op = make_operator(
            "routed:confidence?threshold=0.5",
            api_base=tsrv.url,
            teacher=tsrv.litellm_model,
            student=f"local:{student_engine.model_dir}",
            adapter_dir=student_engine.adapter_dir,
            settings=settings,
            max_new_tokens=6,
        )
        assert op.for_scenario(TRAIN_BUNDLE) is op  # one object: the evaluator batches its episodes' turns
        record = run_episode(TRAIN_BUNDLE, op, sandbox_image, split=TRAIN)
        assert record.verified and record.terminated, record.messages
        assert (
            op.record_outcome("clean" if record.verified else "failed", scenario_id=TRAIN_BUNDLE.id)
            == record.n_turns
        )
        op.router.log.close()
        rows = lake.read_all(ROUTING_TABLE).to_pylist()
        assert len(rows) == record.n_turns and {r["chosen"] for r in rows} == {"teacher"}
        assert {r["scenario_id"] for r in rows} == {TRAIN_BUNDLE.id} and {r["outcome"] for r in rows} == {
            "clean"
        }
        assert sorted(r["turn"] for r in rows) == list(range(record.n_turns))
        assert all(r["confidence"] is not None and r["confidence"] < 0.5 for r in rows)

        # the evaluator (bashgym eval --litellm routed:...) records each episode's outcome itself
        from test_rollout_sandbox import HELD_BUNDLE

        from bashgym_assets.evaluation import EvalSettings, evaluate

        ev = make_operator(
            "routed:teacher_only",
            api_base=tsrv.url,
            teacher=tsrv.litellm_model,
            student=f"local:{student_engine.model_dir}",
            settings=settings,
            max_new_tokens=6,
        )
        result = evaluate(ev, [HELD_BUNDLE], sandbox_image, EvalSettings(max_turns=5))
        ev.router.log.close()
    assert [e.clean for e in result.episodes] == [True]
    held = [r for r in lake.read_all(ROUTING_TABLE).to_pylist() if r["scenario_id"] == HELD_BUNDLE.id]
    assert len(held) == result.episodes[0].n_turns and {r["outcome"] for r in held} == {"clean"}


def test_reference_teacher_is_bound_per_scenario(student_engine, settings, lake) -> None:
    from test_rollout_sandbox import TRAIN_BUNDLE

    from bashgym_assets.rollout.transcript import initial_messages

    op = make_operator(
        "routed:teacher_only",
        teacher="reference",
        student=f"local:{student_engine.model_dir}",
        settings=settings,
        max_new_tokens=4,
    )
    bound = op.for_scenario(TRAIN_BUNDLE)
    assert bound is not op and bound.scenario_id == TRAIN_BUNDLE.id
    assert bound.next_command(initial_messages(TRAIN_BUNDLE)) == TRAIN_BUNDLE.reference[0]
    assert bound.record_outcome("clean") == 1
    op.router.log.close()
    rows = lake.read_all(ROUTING_TABLE).to_pylist()
    assert [(r["model"], r["scenario_id"], r["outcome"]) for r in rows] == [
        ("reference", TRAIN_BUNDLE.id, "clean")
    ]


def test_routing_through_the_server(student_engine, teacher, lake, settings) -> None:
    from openai import OpenAI

    batcher = Batcher(student_engine, max_batch=4, max_wait_s=0.01)
    r = Router(
        RouterConfig(strategy=Strategy.COMPLEXITY),
        EngineBackend(student_engine, submit=batcher.submit, trim=False),
        teacher_backend(teacher.litellm_model, teacher.url, settings),
        DecisionLog(lake),
        lake=lake,
    )
    OPEN_LOGS.append(r.log)
    with LocalServer(create_app(student_engine, batcher, router=r)) as srv:
        client = OpenAI(base_url=srv.url, api_key="x")
        assert [m.id for m in client.models.list().data] == ["tiny-student", "bashgym-router"]
        hard = client.chat.completions.create(
            model="bashgym-router", messages=chat(COMPLEX), max_tokens=6, temperature=0
        )
        easy = client.chat.completions.create(
            model="bashgym-router", messages=chat(SIMPLE), max_tokens=6, temperature=0
        )
        assert hard.choices[0].message.content == "echo teacher:" + COMPLEX[:20]
        assert hard.model_extra["bashgym_route"]["chosen"] == "teacher"
        assert easy.model_extra["bashgym_route"]["chosen"] == "student"
        assert easy.choices[0].message.content == student_text(student_engine, SIMPLE, 6)[0]
        health = httpx.get(srv.url.removesuffix("/v1") + "/health").json()
        assert health["router"]["strategy"] == "complexity"
    rows = lake.read_all(ROUTING_TABLE).to_pylist()  # the server's shutdown flushed the log
    assert sorted(row["chosen"] for row in rows) == ["student", "teacher"] and {
        row["source"] for row in rows
    } == {"server"}


def test_teacher_failure_and_student_fallback(student_engine, lake, settings) -> None:
    with OpenAIServer(scripted([]), model="teacher") as dead:  # every request: HTTP 500
        r = Router(
            RouterConfig(strategy=Strategy.TEACHER_ONLY),
            EngineBackend(student_engine),
            teacher_backend(dead.litellm_model, dead.url, settings),
            opened(DecisionLog(lake)),
        )
        got = r.route_many([chat("pwd")], ChatParams(max_tokens=4))[0]
    assert got.answer.error and got.decision.error and got.decision.chosen == "teacher"
    # a student that cannot fit the prompt (no trimming) hands the turn to the teacher, except student_only
    with OpenAIServer(teacher_says, model="teacher") as t:
        strict = EngineBackend(student_engine, trim=False)
        long_chat = chat("ls -la /home/operator " * 200)
        for strategy, chosen in ((Strategy.COMPLEXITY, "teacher"), (Strategy.STUDENT_ONLY, "student")):
            r = Router(
                RouterConfig(strategy=strategy, complexity_threshold=2.0),
                strict,
                teacher_backend(t.litellm_model, t.url, settings),
                opened(DecisionLog(lake)),
            )
            got = r.route_many([long_chat], ChatParams(max_tokens=4))[0]
            assert got.decision.chosen == chosen
            assert bool(got.answer.error) == (strategy == Strategy.STUDENT_ONLY)
            if chosen == "teacher":
                assert "student failed" in got.decision.reason


def test_cli_parses_serve_with_routing() -> None:
    from bashgym_assets.cli import build_parser

    args = build_parser().parse_args(
        [
            "serve",
            "--route",
            "confidence?threshold=-0.8",
            "--teacher",
            "openai/t",
            "--teacher-api-base",
            "http://127.0.0.1:9/v1",
            "--port",
            "0",
        ]
    )
    assert parse_route_spec(args.route).strategy == Strategy.CONFIDENCE and args.teacher == "openai/t"


def test_the_evaluator_builds_routed_operators(student_engine, teacher, settings, lake, monkeypatch) -> None:
    """``bashgym eval --litellm routed:<strategy> --api-base <teacher>``: student and teacher from the environment."""
    from bashgym_assets.evaluation import ModelSpec, Sampling, operator_for

    monkeypatch.setenv("BASHGYM_ROUTER_STUDENT", f"local:{student_engine.model_dir}")
    monkeypatch.setenv("BASHGYM_TEACHER_MODEL", teacher.litellm_model)
    op = operator_for(
        ModelSpec(label="routed", kind="litellm", litellm_model="routed:complexity", api_base=teacher.url),
        Sampling(max_new_tokens=5),
    )
    assert op.name == "routed:complexity" and op.params.max_tokens == 5
    assert (
        op.router.student.name == f"local:{student_engine.model_dir}"
        and op.router.teacher.name == "openai/teacher"
    )
    got = op.replies([[Message(**m) for m in chat(COMPLEX)]])
    assert got[0].text == "echo teacher:" + COMPLEX[:20]
    op.router.log.close()
    assert [r["chosen"] for r in lake.read_all(ROUTING_TABLE).to_pylist()] == ["teacher"]


def test_requests_the_server_routes_are_traced_one_span_per_model(
    student_engine, teacher, lake, settings, empty_mlflow_store, monkeypatch
) -> None:
    """A request routed for the server (no episode around it) is an MLflow trace in ``bashgym-routing``: the
    student's span, then the teacher's when it took over, the decision as tags; an operator's turns are not
    (their episode is the trace)."""
    import shutil

    from mlflow import MlflowClient

    from bashgym_assets.rollout import tracing

    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    monkeypatch.setenv("BASHGYM_TRACES", "1")
    tracing._SINKS.clear()
    _, lps = student_text(student_engine, SIMPLE)
    unsure = router(
        student_engine, teacher, lake, settings, strategy="confidence", threshold=sum(lps) / len(lps) + 0.01
    )
    got = unsure.route_many([chat(SIMPLE)], ChatParams(max_tokens=8), source="server")[0]
    unsure.route_many([chat(COMPLEX)], ChatParams(max_tokens=8), source="operator")
    tracing.flush_all()
    c = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    exp = c.get_experiment_by_name(tracing.ROUTING_EXPERIMENT)
    traces = list(c.search_traces(locations=[exp.experiment_id], max_results=10))
    assert len(traces) == 1
    t = traces[0]
    assert t.info.tags["chosen"] == "teacher" and t.info.tags["request_id"] == got.decision.request_id
    spans = sorted((s for s in t.data.spans if s.parent_id), key=lambda s: s.start_time_ns)
    assert [s.attributes.get("role") for s in spans] == ["student", "teacher"]
    # the teacher's own token count and finish reason; the overruled student's reply kept in its span
    assert spans[1].attributes["new_tokens"] == 5 and spans[1].attributes["finish_reason"] == "stop"
    assert (
        spans[0].outputs["reply"] == got.decision.student_reply != "" and not spans[0].attributes["answered"]
    )
    assert t.info.tags["completion_tokens"] == "5" and t.info.tags["finish_reason"] == "stop"
    tracing._SINKS.clear()


@pytest.fixture(scope="module")
def served_teacher(student_engine: ChatEngine):
    """A real teacher that counts its tokens: ``bashgym serve`` over the same tiny model, named tiny-teacher."""
    engine = ChatEngine(
        student_engine.model_dir, student_engine.adapter_dir, name="tiny-teacher", max_context_tokens=512
    ).load()
    with LocalServer(create_app(engine)) as srv:
        srv.engine = engine
        yield srv


def test_the_router_passes_the_teachers_usage_and_finish_reason_through(
    student_engine, served_teacher, lake, settings
) -> None:
    """Through ``bashgym serve --route`` with the SDK: the teacher's token counts and ``length`` finish reach the
    response and the ``routing_decisions`` row, not 0 tokens and ``stop``; ``n`` and ``logprobs``, which the router
    cannot honour, are refused."""
    import openai

    want = served_teacher.engine.generate([GenerationRequest(messages=chat(SIMPLE), max_tokens=6)])[0]
    assert want.completion_tokens == 6 and want.finish_reason == "length"  # the tiny model's reply runs on
    batcher = Batcher(student_engine, max_batch=4, max_wait_s=0.0)
    r = Router(
        RouterConfig(strategy=Strategy.TEACHER_ONLY),
        EngineBackend(student_engine, submit=batcher.submit, trim=False),
        teacher_backend("openai/tiny-teacher", served_teacher.url, settings),
        DecisionLog(lake),
        lake=lake,
    )
    OPEN_LOGS.append(r.log)
    with LocalServer(create_app(student_engine, batcher, router=r)) as srv:
        client = openai.OpenAI(base_url=srv.url, api_key="x", max_retries=0)
        got = client.chat.completions.create(
            model="bashgym-router", messages=chat(SIMPLE), max_tokens=6, temperature=0
        )
        assert got.choices[0].message.content == want.text
        assert got.choices[0].finish_reason == "length"
        assert (got.usage.prompt_tokens, got.usage.completion_tokens) == (want.prompt_tokens, 6)
        assert got.usage.total_tokens == want.prompt_tokens + 6
        for kw, param in (({"n": 2}, "n"), ({"logprobs": True}, "logprobs")):
            with pytest.raises(openai.BadRequestError) as exc:
                client.chat.completions.create(
                    model="bashgym-router", messages=chat(SIMPLE), max_tokens=4, **kw
                )
            assert exc.value.body["param"] == param
    (row,) = lake.read_all(ROUTING_TABLE).to_pylist()
    assert row["chosen"] == "teacher" and row["finish_reason"] == "length"
    assert (row["prompt_tokens"], row["completion_tokens"]) == (want.prompt_tokens, 6)


def test_a_prompt_too_long_for_both_models_is_a_400_not_a_retried_502(student_engine, lake, settings) -> None:
    """The student cannot fit the prompt and the teacher refuses it as too long: the client gets OpenAI's 400
    ``context_length_exceeded`` (the SDK does not retry it: the teacher is asked once), and the decision says the
    teacher failed, not that it answered."""
    import openai

    def short_context(body: dict) -> str | Answer:
        if len(last_user_text(body)) > 500:
            return Answer(
                status=400,
                content="This model's maximum context length is 128 tokens. However, your "
                "messages resulted in 1400 tokens. Please reduce the length.",
            )
        return teacher_says(body)

    with OpenAIServer(short_context, model="teacher") as t:
        batcher = Batcher(student_engine, max_batch=4, max_wait_s=0.0)
        r = Router(
            RouterConfig(strategy=Strategy.COMPLEXITY, complexity_threshold=2.0),
            EngineBackend(student_engine, submit=batcher.submit, trim=False),
            teacher_backend(t.litellm_model, t.url, settings),
            DecisionLog(lake),
            lake=lake,
        )
        OPEN_LOGS.append(r.log)
        with LocalServer(create_app(student_engine, batcher, router=r)) as srv:
            client = openai.OpenAI(base_url=srv.url, api_key="x")  # the SDK's default: 2 retries of a 5xx
            with pytest.raises(openai.BadRequestError) as exc:
                client.chat.completions.create(
                    model="bashgym-router", max_tokens=6, messages=chat("ls -la /home/operator " * 200)
                )
            assert exc.value.status_code == 400 and exc.value.body["code"] == "context_length_exceeded"
            assert len(t.requests) == 1
            ok = client.chat.completions.create(model="bashgym-router", max_tokens=6, messages=chat(SIMPLE))
            assert ok.model_extra["bashgym_route"]["chosen"] == "student"
    rows = {row["error"] != "": row for row in lake.read_all(ROUTING_TABLE).to_pylist()}
    failed = rows[True]
    assert "student failed" in failed["reason"] and "teacher failed" in failed["reason"]
    assert "teacher answered" not in failed["reason"] and "maximum context length" in failed["error"]
    assert failed["finish_reason"] == "error" and rows[False]["error"] == ""


def test_the_overruled_student_reply_is_recorded(student_engine, teacher, lake, settings) -> None:
    text, lps = student_text(student_engine, SIMPLE)
    unsure = router(
        student_engine, teacher, lake, settings, strategy="confidence", threshold=sum(lps) / len(lps) + 0.01
    )
    got = unsure.route_many([chat(SIMPLE)], ChatParams(max_tokens=8), request_ids=["overruled"])[0]
    assert got.decision.chosen == "teacher" and got.answer.text.startswith("echo teacher:")
    assert got.decision.student_reply == text and got.decision.student_completion_tokens == len(lps)
    unsure.log.close()
    (row,) = lake.read_all(ROUTING_TABLE).to_pylist()
    assert row["student_reply"] == text and row["student_completion_tokens"] == len(lps)
    assert row["completion_tokens"] == 5 and row["prompt_tokens"] == 10  # the teacher's usage (openai_server)


def test_decisions_are_flushed_in_batches_by_age_not_one_file_per_request(
    student_engine, teacher, lake, settings
) -> None:
    """Light traffic (a request every 20 s) no longer writes one parquet file per request: the buffer is written
    when its oldest row has waited flush_interval_s (or flush_every rows wait), and whatever is left on close."""
    now = [0.0]
    log = opened(DecisionLog(lake, flush_every=100, flush_interval_s=60, clock=lambda: now[0]))
    r = Router(
        RouterConfig(strategy=Strategy.TEACHER_ONLY),
        EngineBackend(student_engine),
        teacher_backend(teacher.litellm_model, teacher.url, settings),
        log,
    )
    for i in range(3):  # at 0 s, 20 s, 40 s
        r.route_many([chat(f"pwd {i}")], ChatParams(max_tokens=4), request_ids=[f"quiet-{i}"])
        now[0] += 20
        if now[0] < 60:
            assert log.flush_if_due() is None
    log.flush_if_due()  # 60 s: the first row has waited long enough
    assert len(lake.partitions(ROUTING_TABLE)) == 1
    r.route_many([chat("pwd 3")], ChatParams(max_tokens=4), request_ids=["quiet-3"])
    now[0] += 10
    assert log.flush_if_due() is None
    log.close()  # a clean stop loses nothing
    assert len(lake.partitions(ROUTING_TABLE)) == 2
    assert sorted(row["request_id"] for row in lake.read_all(ROUTING_TABLE).to_pylist()) == [
        f"quiet-{i}" for i in range(4)
    ]
    r.route_many(
        [chat("late")], ChatParams(max_tokens=4), request_ids=["late"]
    )  # after close: written at once
    assert len(lake.read_all(ROUTING_TABLE).to_pylist()) == 5
