"""Teacher authoring through litellm against a real local OpenAI-compatible HTTP server."""

from __future__ import annotations

import json

from openai_server import Answer, OpenAIServer, scripted

from bashgym_assets.scenarios.authoring import (
    CATEGORIES,
    AuthoringAxes,
    author_bundles,
    bundle_from_reply,
    dedupe,
    extract_json,
    sample_axes,
)
from bashgym_assets.scenarios.bundle import parse_bundle


def bundle_json(category: str, task: str, **extra: object) -> str:
    return json.dumps(
        {
            "task": task,
            "category": category,
            "difficulty": 2,
            "setup": ["mkdir -p /home/operator/in"],
            "check": "test -s /home/operator/out.txt",
            "reference": ["ls ~/in > ~/out.txt"],
            **extra,
        }
    )


def test_sample_axes_spread_over_the_taxonomy() -> None:
    axes = sample_axes(len(CATEGORIES) * 2, seed=1)
    assert {a.category for a in axes} == set(CATEGORIES)
    assert {a.mode for a in axes} == {"direct", "announced"}
    assert len({a.difficulty for a in axes}) >= 3
    assert sample_axes(10, seed=1) == axes[:10]  # deterministic per seed


def test_extract_json_from_prose_and_fences() -> None:
    assert json.loads(extract_json('Sure! ```json\n{"a": 1}\n``` hope it helps')) == {"a": 1}
    assert json.loads(extract_json('Here: {"a": {"b": 2}} done')) == {"a": {"b": 2}}


def test_bundle_from_reply_enforces_axes() -> None:
    axes = AuthoringAxes(category="git", difficulty=2, mode="announced")
    try:
        bundle_from_reply(bundle_json("git", "Commit it"), axes, "teacher:x")
    except ValueError as exc:
        assert "announced mode needs" in str(exc)
    else:
        raise AssertionError("an announced request answered without a provider must be rejected")
    try:
        bundle_from_reply(bundle_json("text", "Commit it"), AuthoringAxes(category="git", difficulty=2), "t")
    except ValueError as exc:
        assert "category must be 'git'" in str(exc)
    else:
        raise AssertionError("a bundle for the wrong category must be rejected")


def test_malformed_then_valid_on_retry_with_error_fed_back() -> None:
    answers = [
        'Here is your scenario: {"task": "Archive logs", "category": }',  # malformed JSON
        bundle_json("files", "List ~/in into ~/out.txt"),
        "I cannot help with that.",  # no JSON at all, three times
        "still no json",
        "nope",
    ]
    with OpenAIServer(scripted(answers)) as server:
        report = author_bundles(
            server.litellm_model,
            n=2,
            api_base=server.url,
            max_attempts=3,
            axes=[
                AuthoringAxes(category="files", difficulty=2),
                AuthoringAxes(category="text", difficulty=3),
            ],
        )
        requests = list(server.requests)
    assert report.attempts == 5
    assert len(report.bundles) == 1 and report.bundles[0].category == "files"
    assert report.bundles[0].source == "teacher:openai/scripted"
    # the retry carried the first answer and the validation error back to the model
    retry = requests[1]["messages"]
    assert retry[-2]["role"] == "assistant" and retry[-2]["content"].startswith("Here is your scenario")
    assert "not a valid scenario: not valid JSON" in retry[-1]["content"]
    assert len(report.failures) == 1
    failure = report.failures[0]
    assert failure.attempts == 3 and "no JSON object" in failure.reason and failure.axes.category == "text"


def test_model_errors_are_failures_not_crashes() -> None:
    with OpenAIServer(scripted([Answer("overloaded", status=503)])) as server:
        report = author_bundles(server.litellm_model, n=1, api_base=server.url, max_attempts=2)
    assert report.bundles == [] and report.failures[0].reason.startswith("model error")


def test_unreachable_teacher_is_given_up_on() -> None:
    with OpenAIServer(scripted([], then=Answer("down", status=503))) as server:
        report = author_bundles(server.litellm_model, n=5, api_base=server.url, give_up_after=2)
        assert len(server.requests) == 2
    assert report.attempts == 2 and len(report.failures) == 5
    assert [f.reason.split(":")[0] for f in report.failures] == ["model error"] * 2 + ["skipped"] * 3


def test_near_duplicates_are_dropped_existing_wins() -> None:
    existing = parse_bundle(json.loads(bundle_json("files", "List the files of ~/in into ~/out.txt")))
    answers = [
        bundle_json("files", "List the files of ~/in into ~/out.txt please"),
        bundle_json("text", "Sort the words of ~/in/words by frequency into ~/out.txt"),
    ]
    with OpenAIServer(scripted(answers)) as server:
        report = author_bundles(
            server.litellm_model,
            n=2,
            api_base=server.url,
            existing=[existing],
            axes=[
                AuthoringAxes(category="files", difficulty=2),
                AuthoringAxes(category="text", difficulty=2),
            ],
        )
    assert [b.category for b in report.bundles] == ["text"]
    assert len(report.duplicates) == 1
    kept, dropped = dedupe(report.bundles + report.bundles)
    assert len(kept) == 1 and len(dropped) == 1


def test_the_teachers_prompt_offers_every_session_user() -> None:
    """The users a bundle may run as are the sandbox's one list (layout.SESSION_ACCOUNTS): a teacher asked for a
    service's work can write a bundle that runs as the service account, and is told it exists only then."""
    from bashgym_assets.sandbox.layout import SESSION_ACCOUNTS
    from bashgym_assets.scenarios.authoring import SYSTEM_PROMPT

    (line,) = [x for x in SYSTEM_PROMPT.splitlines() if x.strip().startswith('"user":')]
    assert all(f'"{user}"' in line for user in SESSION_ACCOUNTS) and len(SESSION_ACCOUNTS) == 3
    assert "service account `app` (uid 999, home /srv/app" in " ".join(SYSTEM_PROMPT.split())
