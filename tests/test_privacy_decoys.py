"""Redaction precision: documentation values survive, URLs go whole or not at all, credentials are typed secrets.

Recall of planted secrets was 100%, but what must survive did not always: documentation addresses, example domains
and placeholder keys were redacted as if real, URLs were cut inside their host (``<URL_1>ernal/v1/me``) and a token
in a git remote became an e-mail address together with the host. Each class is tested here, and so is the other
side: real values beside decoys are still caught.
"""

from __future__ import annotations

import json
import random
import re
import string

import pytest

from bashgym_assets.privacy.redactor import PlaceholderMap, Redactor
from bashgym_assets.sessions import Prompt, Session, Step
from bashgym_assets.testing.secrets import all_text, decoy_session, survives

B62 = string.ascii_letters + string.digits
GHP = "ghp_R7kq2Lm9XwPz4TfBv8Ny3HcJd6Gs1QaE5uVo"  # random-looking, not a placeholder


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


def red(redactor: Redactor, text: str) -> str:
    return redactor.redact_text(text, PlaceholderMap())[0]


# ---- decoys survive ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "ping -c1 192.0.2.10; ping 198.51.100.7; Connection from 203.0.113.5 port 51514",
        "listen [2001:db8:85a3::8a2e:370:7334]:443; ip -6 addr add 3fff:12::1/64 dev eth0",
        "allow 203.0.113.0/24; route 2001:db8::/32",
        "server on 127.0.0.1:8000, 127.0.1.1 and [::1]:9000, bound to 0.0.0.0:8080",
        "127.0.0.1 localhost",  # at the very start of a field
        "curl -s http://169.254.169.254/latest/meta-data/iam/info",
        "netmask 255.255.255.0 broadcast 255.255.255.255 mdns 224.0.0.251",
        'ALLOWED_CIDRS = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "0.0.0.0/0"]',
    ],
)
def test_documentation_loopback_and_constant_addresses_survive(redactor: Redactor, text: str) -> None:
    assert redactor.find(text) == [], redactor.find(text)


@pytest.mark.parametrize(
    "text",
    [
        "git config user.email user@example.com",
        "From: Jane <jane.doe@mail.example.org>, cc admin@example.net",
        '"author": "ci@build.test", "bounce": "nobody@host.invalid", "dev": "me@app.localhost"',
        "curl -s 'https://api.example.com/v1/users/42?page=2' | jq .",
        "curl -fsS http://web.test:8080/health && open http://app.localhost:3000/",
        "[onboarding](https://intranet.example/wiki/Onboarding) and https://registry.invalid/v2/",
        "GET http://192.0.2.10:8080/status and http://[2001:db8::1]:8080/metrics -> 200",
        "git remote add origin git@github.com:acme/api.git; see https://github.com/acme/api/pull/42",
    ],
)
def test_reserved_example_names_and_their_urls_and_emails_survive(redactor: Redactor, text: str) -> None:
    assert redactor.find(text) == [], redactor.find(text)


@pytest.mark.parametrize(
    "text",
    [
        "export OPENAI_API_KEY=YOUR_API_KEY",
        "Authorization: Bearer YOUR_ACCESS_TOKEN_GOES_HERE",
        "STRIPE_WEBHOOK_SECRET=your-webhook-secret-here",
        'token: "my-secret-token"',
        "curl -H 'Authorization: Bearer <token>' https://api.example.com/me",
        "OPENAI_API_KEY=sk-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        "git clone https://ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx@github.com/acme/api.git",
        'api_key = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"',
        'client = OpenAI(api_key="sk-1234567890abcdef1234567890abcdef")',
        "git clone https://oauth2:YOUR_TOKEN@gitlab.com/acme/api.git",
        "DATABASE_URL=postgres://app:password@localhost:5432/app",
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AWS_ACCESS_KEY_ID=AKIAI44QH8DHBEXAMPLE AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwia"
        "WF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        'stripe.api_key = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"',
        "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
        "SLACK_BOT_TOKEN=xoxb-your-bot-token-here",
    ],
)
def test_placeholder_and_documented_example_secrets_survive(redactor: Redactor, text: str) -> None:
    assert redactor.find(text) == [], redactor.find(text)


@pytest.mark.parametrize(
    "text",
    [
        "call +1 415-555-0132 for support",
        "Contact phone: (212) 555-0187",
        "support line: +44 20 7946 0958",
        "mobile: 07700 900123",
        "use the test card 4242 4242 4242 4242",
        "card_number = '4111111111111111'",
        "charged card 5555555555554444 for the test order",
    ],
)
def test_fictional_phone_numbers_and_test_cards_survive(redactor: Redactor, text: str) -> None:
    assert redactor.find(text) == [], redactor.find(text)


# ---- real values beside decoys are still caught -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "# example (replace with yours):\nOPENAI_API_KEY=sk-proj-Zq8Rk2Vt7Nw3Lp5Hs9DfQwErTyUi",
            "Zq8Rk2Vt7Nw3Lp5Hs9Df",
        ),
        ("aws_access_key_id = AKIAZQ8RK2VT7NW3LP5H  # not the EXAMPLE one", "AKIAZQ8RK2VT7NW3LP5H"),
        ("example token: " + GHP, GHP),
        (
            "curl 'https://api.example.com/v1/me?access_token=tyvAYmqgq5UGn9MB0bobzjcU9kCTGRBI'",
            "tyvAYmqgq5UGn9MB",
        ),
        ("cc: user@example.com and kim.lee@acme-corp.io", "kim.lee@acme-corp.io"),
        ("ip route add 192.0.2.0/24 via 10.8.102.174", "10.8.102.174"),
        ("10.1.2.3 is up", "10.1.2.3"),  # an address at the very start of a field was dropped before
        ("inet 172.20.4.9 netmask 255.255.0.0", "172.20.4.9"),
        ("listen [fd12:3456:789a::1]:443;", "fd12:3456:789a::1"),
        ("call me on +1 415-823-4417", "415-823-4417"),
        ("card 4929 1234 5678 9012 expires", "4929 1234 5678 9012"),
        (
            'api_key = "<Zq8Rk2Vt7Nw3Lp5Hs9DfQwErTy12>"',
            "Zq8Rk2Vt7Nw3Lp5Hs9DfQwErTy12",
        ),  # brackets are no disguise
    ],
)
def test_real_values_beside_decoys_are_still_redacted(redactor: Redactor, text: str, secret: str) -> None:
    out = red(redactor, text)
    assert secret not in out, out


def test_placeholder_rules_never_spare_random_keys() -> None:
    """The decoy rules judge shapes a generator never produces: 3,000 random keys in vendor formats all count."""
    from bashgym_assets.privacy.decoys import is_placeholder_secret

    rng = random.Random(5)
    prefixes = ["", "sk-", "sk-proj-", "ghp_", "glpat-", "xoxb-", "hf_", "AKIA", "sk_live_", "whsec_", "npm_"]
    spared = []
    for i in range(3000):
        alphabet = [B62, B62 + "-_", string.ascii_uppercase + string.digits, "0123456789abcdef", B62 + "+/"][
            i % 5
        ]
        value = rng.choice(prefixes) + "".join(rng.choice(alphabet) for _ in range(rng.randint(16, 64)))
        left, right = rng.choice([("", ""), ("", ""), ("<", ">"), ("[", "]"), ("{{", "}}")])
        if is_placeholder_secret(left + value + right):
            spared.append(value)
    assert spared == []


# ---- URLs: whole or not at all -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("curl https://svc-auth.corp.internal/v1/me", "curl <URL_1>"),  # was "curl <URL_1>ernal/v1/me"
        ("curl https://api.internal/v1/me -H 'Accept: json'", "curl <URL_1> -H 'Accept: json'"),
        ("open http://build-01.ci.acme.lan:8080/job/42/console", "open <URL_1>"),  # was cut at ".la"
        ("scrape http://[fd00:1234::5]:9100/metrics now", "scrape <URL_1> now"),
        ("GET http://10.1.2.3:8080/admin/users?page=2&sort=name#top", "GET <URL_1>"),
        ('see "https://wiki.acme-internal.com/team/oncall" today', 'see "<URL_1>" today'),
        ("[runbook](https://wiki.acme-internal.com/ops/runbook_(v2)).", "[runbook](<URL_1>)."),
        ('{"url": "https://hooks.acme-corp.com/deploy?env=prod"}', '{"url": "<URL_1>"}'),
        ("`https://grafana.ops.acme-corp.com/d/abc/latency?orgId=1&from=now-6h`", "`<URL_1>`"),
        ("visit www.acme-internal.com/foo/bar, then", "visit <URL_1>, then"),
        ("jdbc:postgresql://db01.prod.acme.net:5432/app?user=app&password=Hx7pQ2zLk9", "jdbc:<URL_1>"),
        ("psql postgres://app_rw:Tr0ub4dor-xyz@db.prod.internal:5432/orders", "psql <URL_1>"),
        ("git remote add origin git@git.acme-corp.com:platform/api.git", "git remote add origin <URL_1>"),
        ("git clone ssh://git@git.acme-corp.com:2222/platform/api.git", "git clone <URL_1>"),
        ("alice@git.acme-corp.com:platform/api.git", "<URL_1>"),
        ("curl https://github.com/search?q=ana.lima@protonmail.com", "curl <URL_1>"),  # PII inside: whole
        ("https://a.acme-corp.com/" + "x/" * 300 + "end", "<URL_1>"),
    ],
)
def test_urls_on_private_hosts_are_replaced_whole(redactor: Redactor, text: str, expected: str) -> None:
    assert red(redactor, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"git remote add origin https://alice:{GHP}@github.com/acme/private.git",
            "git remote add origin https://alice:<GITHUB_TOKEN_1>@github.com/acme/private.git",
        ),
        (
            f"git clone https://x-access-token:{GHP}@github.com/acme/private.git",
            "git clone https://x-access-token:<GITHUB_TOKEN_1>@github.com/acme/private.git",
        ),
        (
            f"git clone https://{GHP}@github.com/acme/private.git",
            "git clone https://<GITHUB_TOKEN_1>@github.com/acme/private.git",
        ),
        (
            "git clone https://oauth2:Zq8Rk2Vt7Nw3Lp5Hs9Df@gitlab.com/acme/x.git",
            "git clone https://oauth2:<PASSWORD_1>@gitlab.com/acme/x.git",
        ),
        ("redis://:Zq8Rk2Vt7Nw3Lp5Hs9Df@localhost:6379/0", "redis://:<PASSWORD_1>@localhost:6379/0"),
        (
            "curl 'https://api.example.com/v1?api_key=Zq8Rk2Vt7Nw3Lp5Hs9Df&x=1'",
            "curl 'https://api.example.com/v1?api_key=<SECRET_1>&x=1'",
        ),
        (
            "https://accounts.example.com/cb#access_token=Zq8Rk2Vt7Nw3Lp5Hs9Df&state=x",
            "https://accounts.example.com/cb#access_token=<SECRET_1>&state=x",
        ),
    ],
)
def test_credentials_in_kept_urls_are_typed_secrets_not_emails(
    redactor: Redactor, text: str, expected: str
) -> None:
    out = red(redactor, text)
    assert out == expected
    assert "<EMAIL" not in out and "<URL" not in out


def test_a_remote_with_a_token_on_an_internal_host_is_one_url_counted_as_a_secret_too(
    redactor: Redactor,
) -> None:
    with_token = "git clone https://deploy:Tr0ub4dor-8kq2Lm@git.acme-corp.com/platform/api.git"
    session = Session(
        session_id="s",
        source_format="claude_code",
        source_path="/x/s.jsonl",
        repo="api",
        prompts=[Prompt(index=0, text=with_token)],
        steps=[
            Step(
                index=0,
                tool_name="Bash",
                command="git remote -v",
                input=json.dumps({"command": "git remote -v"}),
                output="origin\thttps://git.acme-corp.com/platform/api.git (fetch)",
                success=True,
            )
        ],
    )
    out, report = redactor.redact_session(session)
    assert out.prompts[0].text == "git clone <URL_1>"
    assert out.steps[0].output == "origin\t<URL_1> (fetch)"  # same remote, same placeholder, token or not
    assert report.by_entity == {"URL": 2, "PASSWORD": 1}
    assert redactor.scan_session(out) == []


def test_no_placeholder_is_glued_to_the_rest_of_a_token(redactor: Redactor) -> None:
    """The symptom of a cut: ``<URL_1>ernal``. Over a whole decoy session, no placeholder touches a word character."""
    session, _, _ = decoy_session(seed=4)
    blob = all_text([redactor.redact_session(session)[0]])
    assert re.findall(r"\w<[A-Z][A-Z0-9_]*_\d+>|<[A-Z][A-Z0-9_]*_\d+>\w", blob) == []


# ---- the decoy corpus, both paths --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["fast", "baseline"])
def test_decoy_session_keeps_every_decoy_and_loses_every_real_value(mode: str) -> None:
    session, decoys, planted = decoy_session(seed=2)
    before = all_text([session])
    assert all(survives(d.value, before) for d in decoys + planted)
    r = Redactor(mode=mode)
    out, _ = r.redact_session(session)
    blob = all_text([out])
    assert [(d.kind, d.value) for d in decoys if not survives(d.value, blob)] == []
    assert [(p.kind, p.value) for p in planted if survives(p.value, blob)] == []
    assert r.scan_session(out) == []
    assert r.redact_session(out)[0] == out  # idempotent
    for step in out.steps:
        json.loads(step.input)


def test_disabling_the_url_detector_lets_urls_through() -> None:
    """The switch the blocking-check test relies on works for URLs too (they are no longer a presidio group)."""
    text = "curl https://svc.corp.internal/v1/me"
    assert [f.entity for f in Redactor().find(text)] == ["URL"]
    assert Redactor(disabled=["url"]).find(text) == []
