"""Rollouts in real sandboxes with the reference operator, litellm against a local HTTP server (good, prose,
never exits, timeout, wrong answer) and a tiny local model; held-out scenarios are refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from openai_server import Answer, OpenAIServer
from sandbox_fixtures import COUNT_LINES
from test_rollout_operators import build_tiny_model

from bashgym_assets.rollout.episode import TRAJECTORY_SCHEMA, EpisodeLimits, run_episode
from bashgym_assets.rollout.operators import LiteLLMOperator, LocalModelOperator, ReferenceOperator
from bashgym_assets.rollout.rollouts import (
    HeldOutScenarioError,
    kept_rate_by_category,
    reject_reason_counts,
    render_transcript,
    run_rollouts,
)
from bashgym_assets.rollout.transcript import SCAFFOLD
from bashgym_assets.scenarios.bundle import parse_bundle
from bashgym_assets.scenarios.gate import HELD_OUT, TRAIN, split_for

pytestmark = pytest.mark.docker

BASE = COUNT_LINES


def with_split(prefix: str, split: str) -> str:
    return next(f"{prefix}-{i}" for i in range(1000) if split_for(f"{prefix}-{i}") == split)


TRAIN_BUNDLE = parse_bundle({**BASE, "id": with_split("roll-count", TRAIN)})
HELD_BUNDLE = parse_bundle({**BASE, "id": with_split("roll-count", HELD_OUT)})


def policy(commands: list[str]) -> Callable[[dict], str | Answer]:
    """A scripted model that types ``commands[i]`` at its i-th turn of any conversation (parallel-safe)."""

    def respond(body: dict) -> str | Answer:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return commands[turn] if turn < len(commands) else "exit"

    return respond


def test_reference_rollout_is_kept_and_recorded(sandbox_image: str) -> None:
    record = run_episode(TRAIN_BUNDLE, ReferenceOperator(), sandbox_image, split=TRAIN)
    assert record.kept and record.verified and record.terminated and record.commands_only
    assert record.reject_reason == "" and record.n_turns == 3 and record.operator == "reference"
    roles = [m.role for m in record.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert record.messages[1].content == BASE["task"]
    assert [m.content for m in record.messages if m.role == "assistant"] == [*BASE["reference"], "exit"]
    assert record.messages[3].content == "[exit code: 0]"
    assert "/home/operator" in record.messages[0].content
    # the row fits the lake schema
    import pyarrow as pa

    pa.Table.from_pylist([record.model_dump()], schema=TRAJECTORY_SCHEMA)


def test_litellm_teacher_end_to_end_scaffold_stripped(sandbox_image: str) -> None:
    with OpenAIServer(
        policy(["cat ~/data/words.txt", "wc -l < ~/data/words.txt > ~/count.txt", "exit"])
    ) as srv:
        record = run_episode(
            TRAIN_BUNDLE, LiteLLMOperator(srv.litellm_model, api_base=srv.url), sandbox_image
        )
        seen_system = srv.requests[0]["messages"][0]["content"]
    assert record.kept, record
    assert SCAFFOLD in seen_system
    assert all(SCAFFOLD not in m.content for m in record.messages)
    assert record.messages[3].content == "a\nb\nc\n[exit code: 0]"
    assert record.operator == "litellm:openai/scripted"


@pytest.mark.parametrize(
    ("commands", "reason", "verified", "terminated", "commands_only"),
    [
        # prose instead of a command, then the right work: verified and terminated, but not clean
        (
            ["I will count the lines of the file now.", "wc -l < ~/data/words.txt > ~/count.txt", "exit"],
            "prose",
            True,
            True,
            False,
        ),
        # an empty reply is not a command either
        (["", "wc -l < ~/data/words.txt > ~/count.txt", "exit"], "prose", True, True, False),
        # a plausible wrong answer: the file name is included
        (["wc -l ~/data/words.txt > ~/count.txt", "exit"], "check_failed", False, True, True),
        # exits through the shell itself
        (["wc -l < ~/data/words.txt > ~/count.txt && exit"], "", True, True, True),
    ],
)
def test_litellm_outcomes(
    sandbox_image: str,
    commands: list[str],
    reason: str,
    verified: bool,
    terminated: bool,
    commands_only: bool,
) -> None:
    with OpenAIServer(policy(commands)) as srv:
        record = run_episode(
            TRAIN_BUNDLE, LiteLLMOperator(srv.litellm_model, api_base=srv.url), sandbox_image
        )
    assert (record.reject_reason, record.verified, record.terminated, record.commands_only) == (
        reason,
        verified,
        terminated,
        commands_only,
    )
    assert record.kept is (reason == "")
    if reason == "prose" and commands[0]:
        assert "command not found" in record.messages[3].content  # bash's own answer to the sentence
    elif reason == "prose":
        assert record.messages[2].content == "" and record.messages[3].content == ""  # nothing ran


def test_model_that_never_exits_hits_the_turn_cap(sandbox_image: str) -> None:
    with OpenAIServer(lambda body: "ls") as srv:
        record = run_episode(
            TRAIN_BUNDLE,
            LiteLLMOperator(srv.litellm_model, api_base=srv.url),
            sandbox_image,
            limits=EpisodeLimits(max_turns=4),
        )
    assert not record.terminated and record.reject_reason == "turn_cap" and record.n_turns == 4
    assert record.messages[-1].role == "user"


def test_model_timeout_ends_the_episode(sandbox_image: str) -> None:
    def respond(body: dict) -> str | Answer:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return "ls" if turn == 0 else Answer("exit", delay_s=4)

    with OpenAIServer(respond) as srv:
        op = LiteLLMOperator(srv.litellm_model, api_base=srv.url, timeout_s=1.0)
        record = run_episode(TRAIN_BUNDLE, op, sandbox_image)
    assert record.reject_reason == "operator_error" and not record.terminated and record.n_turns == 1


def test_episode_time_cap(sandbox_image: str) -> None:
    with OpenAIServer(lambda body: "sleep 5") as srv:
        record = run_episode(
            TRAIN_BUNDLE,
            LiteLLMOperator(srv.litellm_model, api_base=srv.url),
            sandbox_image,
            limits=EpisodeLimits(episode_timeout_s=3, command_timeout_s=2),
        )
    assert not record.terminated and record.reject_reason == "time_cap"
    assert "timed out" in record.messages[3].content


def test_rollouts_in_parallel_samples_and_metadata(sandbox_image: str) -> None:
    other = parse_bundle({**BASE, "id": with_split("roll-other", TRAIN), "category": "files"})
    with OpenAIServer(policy(["wc -l < ~/data/words.txt > ~/count.txt", "exit"])) as srv:
        progress: list[tuple[int, int, int]] = []
        records = run_rollouts(
            [TRAIN_BUNDLE, other],
            LiteLLMOperator(srv.litellm_model, api_base=srv.url),
            sandbox_image,
            samples=2,
            max_parallel=2,
            on_progress=lambda *a: progress.append(a),
        )
    assert progress == [(1, 4, 1), (2, 4, 2), (3, 4, 3), (4, 4, 4)]  # n/N as attempts finish, kept so far
    assert [(r.scenario_id, r.sample_index) for r in records] == [
        (TRAIN_BUNDLE.id, 0),
        (TRAIN_BUNDLE.id, 1),
        (other.id, 0),
        (other.id, 1),
    ]
    assert len({r.trajectory_id for r in records}) == 4 and all(r.kept for r in records)
    assert [row["category"] for row in kept_rate_by_category(records)] == ["files", "text"]
    assert reject_reason_counts(records) == {}
    assert "wc -l" in render_transcript(records[0])


def test_held_out_scenarios_are_refused(sandbox_image: str) -> None:
    with pytest.raises(HeldOutScenarioError, match=HELD_BUNDLE.id):
        run_rollouts([TRAIN_BUNDLE, HELD_BUNDLE], ReferenceOperator(), sandbox_image)


def test_local_model_operator_in_a_sandbox(sandbox_image: str, tmp_path: Path) -> None:
    build_tiny_model(tmp_path / "model")
    op = LocalModelOperator(tmp_path / "model", max_new_tokens=10)
    record = run_episode(TRAIN_BUNDLE, op, sandbox_image, limits=EpisodeLimits(max_turns=2))
    assert 1 <= record.n_turns <= 2 and not record.kept
    assert record.operator == "local:model"
    json.dumps(record.model_dump())
