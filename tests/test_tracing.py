"""Episodes as MLflow traces (``rollout.tracing``): one trace per evaluated episode / rollout attempt / routed
request, one span per turn with the command, exit code and output, outcome attributes and tags, the batched sink,
the off switch, the evaluation run linked to its traces, and the report's link - all read back through MLflow's
own search API, the evaluations in real sandboxes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashgym_assets.config import Settings
from bashgym_assets.evaluation import EvalSettings, evaluate
from bashgym_assets.evaluation import tracking as eval_tracking
from bashgym_assets.evaluation.report import transcript_markdown
from bashgym_assets.rollout import tracing
from bashgym_assets.rollout.episode import EpisodeLimits, run_episode
from bashgym_assets.rollout.operators import Operator, ReferenceOperator
from bashgym_assets.rollout.transcript import Message
from bashgym_assets.scenarios.bundle import ScenarioBundle


def _bundle(i: int) -> ScenarioBundle:
    return ScenarioBundle(
        id=f"touch-{i}",
        task=f"Create the file ~/done-{i}.txt.",
        category="files",
        difficulty=1,
        setup=["true"],
        check=f"test -f /home/operator/done-{i}.txt",
        reference=[f"touch ~/done-{i}.txt"],
        source="test",
    )


class Wrong(Operator):
    """Types a failing command, then the wrong file, then exits: a failed, verified=False episode."""

    name = "wrong"
    scaffolded = False

    def next_command(self, messages: list[Message]) -> str:
        done = sum(m.role == "assistant" for m in messages)
        return ["cat /nonexistent", "touch ~/other.txt", "exit"][min(done, 2)]


def _client(settings: Settings):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=settings.mlflow_tracking_uri)


def _traces(settings: Settings, experiment: str, filter_string: str | None = None) -> list:
    c = _client(settings)
    exp = c.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment}"
    return list(c.search_traces(locations=[exp.experiment_id], filter_string=filter_string, max_results=100))


@pytest.fixture
def traced_home(settings: Settings, empty_mlflow_store: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    import shutil

    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    monkeypatch.setenv("BASHGYM_TRACES", "1")
    tracing._SINKS.clear()
    yield settings
    tracing._SINKS.clear()


def test_switch_default_is_on_only_where_a_store_exists(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BASHGYM_TRACES", raising=False)
    assert not tracing.enabled(settings)  # a fresh folder: no SQLite store yet, nothing created for it
    db = Path(settings.mlflow_tracking_uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True, exist_ok=True)
    db.touch()
    assert tracing.enabled(settings)
    monkeypatch.setenv("BASHGYM_TRACES", "0")
    assert not tracing.enabled(settings) and tracing.sink(settings) is None


def test_routing_helper_records_one_span_per_turn_and_errors(traced_home: Settings) -> None:
    with tracing.traced("route chat", inputs={"messages": 2}, attributes={"strategy": "confidence"}) as t:
        with tracing.turn_span(t, model="student") as turn:
            turn.reply, turn.new_tokens, turn.model_s = "ls -la", 4, 0.05
        t.attributes["chosen"] = "student"
    with (
        pytest.raises(RuntimeError),
        tracing.traced("route chat", attributes={"strategy": "teacher"}) as t2,
        tracing.turn_span(t2, model="teacher"),
    ):
        raise RuntimeError("teacher down")
    assert tracing.sink(traced_home).flush() == 2
    found = {tr.info.tags["strategy"]: tr for tr in _traces(traced_home, tracing.ROUTING_EXPERIMENT)}
    ok, failed = found["confidence"], found["teacher"]
    assert ok.info.tags["chosen"] == "student" and ok.info.state.value == "OK"
    turns = [s for s in ok.data.spans if s.parent_id]
    assert (
        len(turns) == 1
        and turns[0].attributes["model"] == "student"
        and turns[0].outputs == {"reply": "ls -la"}
    )
    assert turns[0].attributes["new_tokens"] == 4
    assert failed.info.state.value == "ERROR"
    assert "teacher down" in [s for s in failed.data.spans if s.parent_id][0].status.description


@pytest.mark.docker
def test_evaluation_episodes_are_traces_one_span_per_turn(traced_home: Settings, sandbox_image: str) -> None:
    bundles = [_bundle(0), _bundle(1)]
    good = evaluate(
        ReferenceOperator(),
        bundles,
        sandbox_image,
        EvalSettings(max_turns=4),
        label="reference",
        eval_id="ev-trace",
    )
    bad = evaluate(
        Wrong(), bundles[:1], sandbox_image, EvalSettings(max_turns=4), label="wrong", eval_id="ev-trace"
    )
    traces = _traces(traced_home, tracing.EVAL_EXPERIMENT, "tags.eval_id = 'ev-trace'")
    assert len(traces) == 3  # one per episode
    by_key = {(t.info.tags["model"], t.info.tags["scenario_id"]): t for t in traces}
    for e in good.episodes + bad.episodes:
        t = by_key[(e.model, e.scenario_id)]
        assert t.info.trace_id == tracing.eval_trace_id("ev-trace", e.model, e.scenario_id, e.sample_index)
        turns = sorted((s for s in t.data.spans if s.parent_id), key=lambda s: s.attributes["turn"])
        assert len(turns) == e.n_turns  # one span per turn
        root = next(s for s in t.data.spans if not s.parent_id)
        assert root.attributes["verified"] == e.verified and root.attributes["clean"] == e.clean
        assert root.attributes["failure_class"] == (e.failure_class or "none")
        assert t.info.tags["clean"] == str(e.clean)
    ref = by_key[("reference", "touch-0")]
    first = sorted((s for s in ref.data.spans if s.parent_id), key=lambda s: s.attributes["turn"])[0]
    assert first.attributes["command"] == "touch ~/done-0.txt" and first.attributes["exit_code"] == 0
    assert first.outputs["reply"] == "touch ~/done-0.txt" and first.end_time_ns >= first.start_time_ns

    failed = _traces(traced_home, tracing.EVAL_EXPERIMENT, "tags.clean = 'False'")
    assert [t.info.tags["model"] for t in failed] == ["wrong"]  # the failed episode is found by its outcome
    spans = sorted((s for s in failed[0].data.spans if s.parent_id), key=lambda s: s.attributes["turn"])
    assert [s.attributes["command"] for s in spans] == ["cat /nonexistent", "touch ~/other.txt", ""]
    assert spans[0].attributes["exit_code"] == 1 and "No such file" in spans[0].outputs["output"]
    assert spans[2].attributes["reply_kind"] == "exit"

    # the failing transcript links to its trace; the evaluation run gets the traces attached
    md = transcript_markdown(bad.episodes[0])
    assert f"selectedEvaluationId={failed[0].info.trace_id}" in md
    c = _client(traced_home)
    exp = c.get_experiment_by_name(tracing.EVAL_EXPERIMENT).experiment_id
    run = c.create_run(exp, run_name="ev-trace")
    assert eval_tracking.link_episode_traces(c, exp, "ev-trace", run.info.run_id) == 3
    linked = c.search_traces(locations=[exp], run_id=run.info.run_id)
    assert len(linked) == 3


@pytest.mark.docker
def test_rollout_attempts_are_traced_and_the_switch_turns_them_off(
    traced_home: Settings, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = run_episode(_bundle(2), ReferenceOperator(), sandbox_image, limits=EpisodeLimits(max_turns=4))
    tracing.flush_all()
    traces = _traces(traced_home, tracing.ROLLOUT_EXPERIMENT)
    assert len(traces) == 1
    t = traces[0]
    assert t.info.tags["trajectory_id"] == record.trajectory_id and t.info.tags["kept"] == "True"
    assert len([s for s in t.data.spans if s.parent_id]) == record.n_turns == 2

    monkeypatch.setenv("BASHGYM_TRACES", "0")
    evaluate(ReferenceOperator(), [_bundle(3)], sandbox_image, EvalSettings(max_turns=3), eval_id="ev-off")
    tracing.flush_all()
    assert [x.info.trace_id for x in _traces(traced_home, tracing.ROLLOUT_EXPERIMENT)] == [t.info.trace_id]
    assert _client(traced_home).get_experiment_by_name(tracing.EVAL_EXPERIMENT) is None


@pytest.mark.docker
def test_the_students_attempts_are_rollout_traces_not_evaluation_traces(
    traced_home: Settings, sandbox_image: str
) -> None:
    """The student's attempts at train tasks (for DPO pairs) are rollouts: traced beside the other rollouts, so
    the evaluation's experiment holds exactly one trace per evaluated episode."""
    from bashgym_assets.evaluation.student import StudentSettings, attempts

    run = attempts(
        ReferenceOperator(),
        "ref",
        [_bundle(4), _bundle(5)],
        sandbox_image,
        StudentSettings(samples=1, max_turns=3),
        held_out_fraction=0.0,
    )
    evaluate(ReferenceOperator(), [_bundle(6)], sandbox_image, EvalSettings(max_turns=3), eval_id="ev-one")
    tracing.flush_all()
    student = _traces(traced_home, tracing.ROLLOUT_EXPERIMENT, "tags.kind = 'student'")
    assert sorted(t.info.tags["scenario_id"] for t in student) == ["touch-4", "touch-5"]
    assert all(t.info.tags["model"] == run.operator for t in student)
    assert [t.info.tags["scenario_id"] for t in _traces(traced_home, tracing.EVAL_EXPERIMENT)] == ["touch-6"]
