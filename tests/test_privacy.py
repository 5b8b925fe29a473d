"""Redaction: planted secrets and PII all replaced, code left alone, placeholders consistent, offline presidio."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from bashgym_assets.privacy.redactor import PlaceholderMap, Redactor, tokens_touched
from bashgym_assets.sessions import Prompt, Session, Step
from bashgym_assets.testing.secrets import all_text, code_session, planted_session, survives


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


def test_every_planted_item_is_replaced(redactor: Redactor) -> None:
    session, items = planted_session(seed=7)
    assert len({(i.kind, i.value) for i in items}) >= 40
    kinds = Counter(i.kind for i in items)
    assert len(kinds) >= 40, kinds
    original = all_text([session])
    assert all(survives(i.value, original) for i in items)  # the corpus really carries them
    red, report = redactor.redact_session(session)
    blob = all_text([red])
    survivors = [(i.kind, i.value[:20]) for i in items if survives(i.value, blob)]
    assert survivors == []
    assert report.fields_changed > 0 and sum(report.by_entity.values()) >= len(items)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_planted_items_replaced_for_other_random_values(redactor: Redactor, seed: int) -> None:
    session, items = planted_session(seed=seed, user=f"user{seed}x")
    blob = all_text([redactor.redact_session(session)[0]])
    assert [i.kind for i in items if survives(i.value, blob)] == []


def test_redacted_output_rescans_clean(redactor: Redactor) -> None:
    session, _ = planted_session(seed=5)
    red, _ = redactor.redact_session(session)
    assert redactor.scan_session(red) == []
    # and redaction is idempotent: a second pass changes nothing
    again, report = redactor.redact_session(red)
    assert again == red and report.by_entity == {}


def test_code_heavy_corpus_changes_under_one_percent_of_tokens(redactor: Redactor) -> None:
    touched = total = 0
    for seed in (11, 12, 13):
        s = code_session(seed)
        extra = redactor.session_patterns(s)
        for step in s.steps:
            for text in (step.input, step.output, step.command or ""):
                a, b = tokens_touched(text, redactor.find(text, extra))
                touched += a
                total += b
    assert total > 2000
    assert touched / total < 0.01, (touched, total)


@pytest.mark.parametrize(
    "text",
    [
        "numpy==1.26.4 and v1.2.3.4 and chromium 120.0.6099.224 and python3.11.7.1",
        "zip 94107, port 51514, pid 31337, size 65535",
        "commit 3f9a2b7c1d4e5f60718293a4b5c6d7e8f9012345 and short 3f9a2b7",
        "job 123e4567-e89b-12d3-a456-426614174000 queued",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "open setup.py and main.rs; see https://docs.python.org/3/library/re.html",
        "server on http://127.0.0.1:8000 and 0.0.0.0:8080 and [::1]:9000",
        "std::vector<int> v; auto x = ns::detail::make(0x7fff);",
        "def parse(token: str, password: str | None = None): api_key = get_api_key()",
        "password = os.environ['DB_PASSWORD']; secret_key = settings.SECRET_KEY",
        "AbstractSingletonProxyFactoryBeanDefinitionRegistryPostProcessor",
        "git@github.com:acme/api.git",
        "2024-03-05T13:42:17Z and 2024-03-05 13:42",
    ],
)
def test_code_lookalikes_are_kept(redactor: Redactor, text: str) -> None:
    assert redactor.find(text) == [], redactor.find(text)


def test_bare_digit_runs_are_phones_only_after_a_phone_word(redactor: Redactor) -> None:
    assert [f.entity for f in redactor.find("phone: 4158230132 (after 6pm)")] == ["PHONE_NUMBER"]
    assert redactor.find("inserted 4158230132 rows") == []


def test_hash_in_a_secret_context_is_redacted(redactor: Redactor) -> None:
    text = "export API_SECRET=3f9a2b7c1d4e5f60718293a4b5c6d7e8f9012345"
    found = redactor.find(text)
    assert [f.text for f in found] == ["3f9a2b7c1d4e5f60718293a4b5c6d7e8f9012345"]


def test_placeholders_are_typed_and_consistent_within_a_session(redactor: Redactor) -> None:
    a, b = "ana.lima@protonmail.com", "bo.chen@fastmail.com"
    session = Session(
        session_id="s1",
        source_format="claude_code",
        source_path="/tmp/s1.jsonl",
        repo="r",
        prompts=[Prompt(index=0, text=f"email {a} and cc {b}")],
        steps=[
            Step(
                index=0,
                tool_name="Bash",
                input=json.dumps({"command": f"mail {a}"}),
                command=f"mail {a}",
                output=f"sent to {a}; bounce from {b}",
                success=True,
            )
        ],
    )
    red, _ = redactor.redact_session(session)
    assert red.prompts[0].text == "email <EMAIL_1> and cc <EMAIL_2>"
    assert red.steps[0].command == "mail <EMAIL_1>"
    assert red.steps[0].output == "sent to <EMAIL_1>; bounce from <EMAIL_2>"
    assert json.loads(red.steps[0].input) == {"command": "mail <EMAIL_1>"}
    # another session numbers its own values from 1 again
    other = session.model_copy(update={"session_id": "s2", "prompts": [Prompt(index=0, text=f"hi {b}")]})
    assert redactor.redact_session(other)[0].prompts[0].text == "hi <EMAIL_1>"


def test_user_names_from_home_directories(redactor: Redactor) -> None:
    session = Session(
        session_id="s",
        source_format="claude_code",
        source_path="/home/mkowalski/.claude/projects/x/s.jsonl",
        repo="x",
        cwd="/home/mkowalski/src/x",
        steps=[
            Step(
                index=0,
                tool_name="Bash",
                command="whoami",
                input='{"command": "whoami"}',
                output="mkowalski\n",
                cwd="/home/mkowalski/src/x",
                success=True,
            ),
            Step(
                index=1,
                tool_name="Bash",
                command="ls /home/operator /root",
                input="{}",
                output="",
                success=True,
            ),
        ],
    )
    red, _ = redactor.redact_session(session)
    assert "mkowalski" not in all_text([red])
    assert red.cwd == "/home/<USER_1>/src/x" and red.steps[0].output == "<USER_1>\n"
    assert red.steps[1].command == "ls /home/operator /root"  # generic system users stay


def test_adapter_extras_are_redacted_and_scanned(redactor: Redactor) -> None:
    session = Session(
        session_id="s",
        source_format="claude_code",
        source_path="/x/s.jsonl",
        repo="x",
        extra={"line_types": {"user": 3}, "summaries": ["Fixed login for ana.lima@protonmail.com"]},
    )
    assert [f.field for f in redactor.scan_session(session)] == ["extra.summaries[0]"]
    red, _ = redactor.redact_session(session)
    assert red.extra == {"line_types": {"user": 3}, "summaries": ["Fixed login for <EMAIL_1>"]}
    assert redactor.scan_session(red) == []


def test_json_inputs_stay_valid_json(redactor: Redactor) -> None:
    session, _ = planted_session(seed=9)
    red, _ = redactor.redact_session(session)
    for before, after in zip(session.steps, red.steps, strict=True):
        assert json.loads(after.input).keys() == json.loads(before.input).keys()


def test_placeholder_map_numbers_per_type() -> None:
    m = PlaceholderMap()
    assert m.placeholder("EMAIL_ADDRESS", "a@b.io") == "<EMAIL_1>"
    assert m.placeholder("IP_ADDRESS", "10.1.1.1") == "<IP_1>"
    assert m.placeholder("EMAIL_ADDRESS", "c@d.io") == "<EMAIL_2>"
    assert m.placeholder("EMAIL_ADDRESS", "a@b.io") == "<EMAIL_1>"


def test_disabled_detector_lets_its_kind_through() -> None:
    """The switch the blocking-check test relies on really switches a detector off."""
    text = "write to ana.lima@protonmail.com"
    assert [f.entity for f in Redactor().find(text)] == ["EMAIL_ADDRESS"]
    assert Redactor(disabled=["email"]).find(text) == []


def test_baseline_and_fast_paths_agree_on_planted_items() -> None:
    session, items = planted_session(seed=21)
    fast = all_text([Redactor().redact_session(session)[0]])
    base = all_text([Redactor(mode="baseline").redact_session(session)[0]])
    assert [i.kind for i in items if survives(i.value, fast)] == []
    assert [i.kind for i in items if survives(i.value, base)] == []


@pytest.mark.slow
def test_presidio_runs_offline_without_network_attempts(tmp_path) -> None:
    """A fresh interpreter with sockets disabled: e-mail detection (tldextract inside) works, nothing tries out."""
    code = (
        "import socket\n"
        "def _no(*a, **k): raise AssertionError('network access attempted')\n"
        "socket.socket.connect = _no\nsocket.getaddrinfo = _no\nsocket.create_connection = _no\n"
        "from bashgym_assets.privacy.redactor import Redactor\n"
        "found = Redactor().find('mail ana.lima@protonmail.com or see https://intranet.acme-corp.com/x')\n"
        "print(sorted(f.entity for f in found))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "TLDEXTRACT_CACHE": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "['EMAIL_ADDRESS', 'URL']"
    assert "Public Suffix" not in proc.stderr and "network access attempted" not in proc.stderr


def test_bad_rows_are_quarantined_with_a_reason() -> None:
    from bashgym_assets.privacy.pipeline import redact_rows

    good = Session(
        session_id="ok",
        source_format="claude_code",
        source_path="/x",
        repo="r",
        prompts=[Prompt(index=0, text="mail ana.lima@protonmail.com")],
    ).to_row()
    bad = dict(good, session_id="broken", steps=[{"index": "not a number", "tool_name": None}])
    result = redact_rows([bad, good])
    assert [s.session_id for s in result.sessions] == ["ok"]
    assert result.sessions[0].prompts[0].text == "mail <EMAIL_1>"
    assert [(q.session_id, q.stage) for q in result.quarantine] == [("broken", "parse")]
    assert "ValidationError" in result.quarantine[0].reason
    assert result.quarantine_table().num_rows == 1
