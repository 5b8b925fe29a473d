"""The Claude Code adapter on the real fixture files and on generated 1.0.x / 2.x layouts.

Expected values are counted here with the standard ``json`` module straight from the lines (an independent
count), never taken from the parser's own output.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bashgym_assets.ingest.claude_code import ClaudeCodeAdapter, exit_code_of
from bashgym_assets.testing.traces import T0, ClaudeSessionWriter, write_sample_traces

ADAPTER = ClaudeCodeAdapter()


def _independent_counts(path: Path) -> dict:
    """Count tool calls, results and usage from the raw lines without the parser."""
    tool_uses: dict[str, dict] = {}
    results: dict[str, dict] = {}
    usage: dict[str, dict] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        msg = line.get("message") or {}
        content = msg.get("content")
        if line.get("type") == "assistant":
            if "usage" in msg:
                usage[msg.get("id")] = msg["usage"]
            for block in content or []:
                if block.get("type") == "tool_use":
                    tool_uses[block["id"]] = {"name": block["name"], "side": bool(line.get("isSidechain"))}
        elif line.get("type") == "user" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    results[block["tool_use_id"]] = block
    return {"tool_uses": tool_uses, "results": results, "usage": usage}


FIXTURES = [
    "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
]


@pytest.mark.parametrize("name", FIXTURES)
def test_real_fixture_steps_pairing_and_exit_codes(claude_fixtures: Path, name: str) -> None:
    path = claude_fixtures / name
    expected = _independent_counts(path)
    outcome = ADAPTER.parse(path)
    assert outcome.quarantine == []
    (session,) = outcome.sessions
    assert session.session_id == path.stem
    assert len(session.steps) == len(expected["tool_uses"])
    assert [s.index for s in session.steps] == list(range(len(session.steps)))
    for step in session.steps:
        want = expected["tool_uses"][step.tool_use_id]
        assert step.tool_name == want["name"]
        assert step.sidechain == want["side"]
        result = expected["results"].get(step.tool_use_id)
        assert result is not None, "every tool call in these files has its result"
        assert step.is_error == bool(result.get("is_error"))
        assert step.success == (not result.get("is_error"))
        assert step.exit_code == (1 if result.get("is_error") else 0)  # 1.0.x results carry no exit code text
        assert step.finished_at is not None and step.started_at <= step.finished_at
    assert session.input_tokens == sum(u.get("input_tokens", 0) for u in expected["usage"].values())
    assert session.output_tokens == sum(u.get("output_tokens", 0) for u in expected["usage"].values())
    assert session.cwd == "/path/to/Demo" and session.repo == "Demo"
    assert session.model and session.model.startswith("claude-")


def test_big_fixture_known_figures(claude_fixtures: Path) -> None:
    """The fixture README: 61 Bash calls; 23 tool results are errors (9 of them Bash)."""
    (session,) = ADAPTER.parse(claude_fixtures / FIXTURES[0]).sessions
    bash = [s for s in session.steps if s.tool_name == "Bash"]
    assert len(bash) == 61
    assert sum(s.success is False for s in session.steps) == 23
    assert sum(s.success is False for s in bash) == 9
    assert session.extra["skipped_types"] == {"summary": 1}
    assert session.extra["summaries"] == ["Empty Repo Setup: CLAUDE.md Foundation Created"]


def test_slash_commands_and_meta_are_not_the_task(claude_fixtures: Path) -> None:
    (session,) = ADAPTER.parse(claude_fixtures / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl").sessions
    assert session.prompts[0].kind == "slash_command" and "/init" in session.prompts[0].text
    assert session.prompts[1].kind == "meta"
    assert not any("<command-name>" in p.text for p in session.prompts if p.kind == "user")
    (big,) = ADAPTER.parse(claude_fixtures / FIXTURES[0]).sessions
    kinds = [p.kind for p in big.prompts]
    assert kinds.count("subagent_task") == 5  # five Task calls, each with its sidechain prompt
    assert big.prompts[-1].kind == "user" and big.prompts[-1].text.startswith("Thanks!")


def test_generated_sessions_match_the_generator_tally(tmp_path: Path) -> None:
    """2.x subagent folders, 1.0.x inline sidechains, Exit code N, compaction summary, interrupts."""
    tallies = write_sample_traces(tmp_path)
    for rel, tally in tallies.items():
        (session,) = ADAPTER.parse(tmp_path / rel).sessions
        assert len(session.steps) == tally.steps, rel
        assert sum(s.success is False for s in session.steps) == tally.failed, rel
        assert sum(s.sidechain for s in session.steps) == tally.sidechain_steps, rel
        assert sum(p.kind == "user" for p in session.prompts) == tally.user_prompts, rel
        assert [s.exit_code for s in session.steps if s.tool_name == "Bash"] == tally.exit_codes, rel


def _subagent_session(tmp_path: Path) -> tuple[Path, ClaudeSessionWriter]:
    w = ClaudeSessionWriter(tmp_path, "/home/u/proj", T0, "sub")
    w.prompt("fix it")
    w.bash("make", "ok")
    w.start_subagent("look around")
    w.tool("Grep", {"pattern": "x"}, "a.py:1: x")
    w.bash("false", "", exit_code=1)
    w.end_subagent("done")
    w.bash("make test", "boom", exit_code=2)
    return w.close(), w


def test_subagent_files_2x_layout_and_1x_beside(tmp_path: Path) -> None:
    path, w = _subagent_session(tmp_path)
    sub_dir = path.parent / path.stem / "subagents"
    (agent_file,) = list(sub_dir.glob("agent-*.jsonl"))
    assert ADAPTER.related_files(path) == [agent_file]
    assert not ADAPTER.matches(agent_file)  # part of its parent session, not a session of its own
    (session,) = ADAPTER.parse(path).sessions
    assert [(s.tool_name, s.sidechain, s.exit_code) for s in session.steps] == [
        ("Bash", False, 0),
        ("Task", False, 0),
        ("Grep", True, 0),
        ("Bash", True, 1),
        ("Bash", False, 2),
    ]
    assert {s.agent_id for s in session.steps if s.sidechain} == {agent_file.stem.removeprefix("agent-")}
    assert session.extra["subagent_files"] == 1

    # 1.0.x: the same agent file beside the session file
    beside = path.parent / agent_file.name
    shutil.move(agent_file, beside)
    shutil.rmtree(path.parent / path.stem)
    assert ADAPTER.related_files(path) == [beside]
    (again,) = ADAPTER.parse(path).sessions
    assert len(again.steps) == 5 and sum(s.sidechain for s in again.steps) == 2

    # an agent file whose parent is gone is a session of its own
    path.unlink()
    assert ADAPTER.matches(beside)
    (orphan,) = ADAPTER.parse(beside).sessions
    assert len(orphan.steps) == 2 and all(s.sidechain for s in orphan.steps) and orphan.repo == "proj"


def _line(kind: str, **fields) -> str:
    base = {
        "type": kind,
        "sessionId": "s1",
        "cwd": "/srv/app",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "isSidechain": False,
    }
    return json.dumps({**base, **fields})


def test_split_messages_unknown_types_images_and_exit_code_sources(tmp_path: Path) -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100}
    lines = [
        _line("queue-operation", operation="enqueue"),
        _line(
            "user",
            uuid="u1",
            message={
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is in this screenshot?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
                    },
                ],
            },
        ),
        _line(
            "assistant",
            uuid="a1",
            message={
                "id": "m1",
                "model": "claude-x",
                "content": [{"type": "thinking", "thinking": "hmm"}],
                "usage": usage,
            },
        ),
        _line(
            "assistant",
            uuid="a2",
            message={
                "id": "m1",
                "model": "claude-x",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls nope"}},
                    {"type": "tool_use", "id": "t2", "name": "BashOutput", "input": {"bash_id": "b1"}},
                    {"type": "tool_use", "id": "t3", "name": "Bash", "input": {"command": "rm -rf /"}},
                    {"type": "tool_use", "id": "t4", "name": "Bash", "input": {"command": "echo hi"}},
                    {"type": "tool_use", "id": "t5", "name": "Bash", "input": {"command": "sleep 100"}},
                ],
                "usage": usage,
            },
        ),
        _line(
            "user",
            uuid="u2",
            message={
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": "Exit code 2\nls: cannot access 'nope'",
                    }
                ],
            },
        ),
        _line(
            "user",
            uuid="u3",
            toolUseResult={"exitCode": 3, "status": "failed"},
            message={
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t2", "content": "<status>failed</status>"}
                ],
            },
        ),
        _line(
            "user",
            uuid="u4",
            message={
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t3",
                        "is_error": True,
                        "content": "Permission denied",
                    }
                ],
            },
        ),
        _line(
            "user",
            uuid="u5",
            message={
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t4", "content": [{"type": "text", "text": "hi"}]}
                ],
            },
        ),
        _line(
            "user",
            uuid="u6",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "nobody", "content": "orphan"}],
            },
        ),
        _line("brand-new-line-type-from-2027", payload={"x": 1}),
        _line("assistant", uuid="a2", message={"id": "m1", "content": []}),  # a repeated line
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(lines) + "\n")
    outcome = ADAPTER.parse(path)
    assert outcome.quarantine == []
    (s,) = outcome.sessions
    assert [(st.command, st.exit_code, st.success) for st in s.steps] == [
        ("ls nope", 2, False),
        (None, 3, False),
        ("rm -rf /", 1, False),
        ("echo hi", 0, True),
        ("sleep 100", None, None),
    ]
    assert s.steps[3].output == "hi"
    assert s.input_tokens == 10 and s.output_tokens == 5 and s.cache_read_tokens == 100  # once per message id
    assert s.prompts[0].kind == "user" and "[image image/png" in s.prompts[0].text
    assert s.extra["skipped_types"] == {"queue-operation": 1, "brand-new-line-type-from-2027": 1}
    assert (
        s.extra["orphan_results"] == 1 and s.extra["duplicate_lines"] == 1 and s.extra["thinking_blocks"] == 1
    )
    assert s.repo == "app" and s.model == "claude-x"


@pytest.mark.parametrize(
    ("text", "is_error", "tur", "want"),
    [
        ("Exit code 137\nKilled", True, None, 137),
        ("Error: Exit code 1\nfail", True, "Error: Exit code 1", 1),
        ("fine", False, {"exitCode": 0}, 0),
        ("no code", True, "Error: no code", 1),
        ("", False, None, 0),
    ],
)
def test_exit_code_rules(text: str, is_error: bool, tur: object, want: int) -> None:
    assert exit_code_of(text, is_error, tur) == want


def test_subagent_steps_answer_the_prompt_of_their_task_call(tmp_path: Path) -> None:
    w = ClaudeSessionWriter(tmp_path, "/home/u/proj", T0, "two-prompts")
    w.prompt("first task")
    w.start_subagent("explore for the first task")
    w.bash("ls", "a")
    w.end_subagent("found a")
    w.prompt("second task")
    w.bash("make", "ok")
    (s,) = ADAPTER.parse(w.close()).sessions
    assert [p.kind for p in s.prompts] == ["user", "subagent_task", "user"]
    assert [p.index for p in s.prompts] == [0, 1, 2]
    assert [(st.tool_name, st.sidechain, st.prompt_index) for st in s.steps] == [
        ("Task", False, 0),
        ("Bash", True, 0),
        ("Bash", False, 2),
    ]
