"""Redaction against shapes from real tool output that a probe of 170 cases found leaking or over-redacted.

Leaks: passwords on command lines (``--password=``, ``mysql -p``, ``docker login -p``, ``curl -u``), config forms
(INI, dotted keys, XML, .netrc, lower-case .env), dashed header names (``X-Api-Key``), ``Authorization: Token``,
quoted values with spaces or brackets, values at the start of a line inside JSON tool inputs, base64 blobs of keys,
and two rule bugs: a value starting with "a" or "my" counted as a placeholder, and a trigger hidden inside a longer
one (``key=`` hid ``key``, so ``api_key="..."`` was never looked at). Over-redaction: ``PWD=/path``,
``MAX_TOKENS=4096``, ``PASSWORD_FILE=/run/...``, ``tokenizer``/``token_type`` values, CamelCase identifiers,
ssh public keys, browser versions read as IP addresses.
"""

from __future__ import annotations

import base64
import json

import pytest

from bashgym_assets.privacy.redactor import PlaceholderMap, Redactor
from bashgym_assets.sessions import Prompt, Session, Step

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq7Zr9mKx2Lp4Wv8Ny3HcJd6Gs1QaE5uVoR7kq2Lm9XwPz4Tf\n"
    "-----END RSA PRIVATE KEY-----\n"
)


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


def red(redactor: Redactor, text: str) -> str:
    return redactor.redact_text(text, PlaceholderMap())[0]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("./manage.py createsuperuser --username admin --password=S3cr3t!xaNW99EJ", "S3cr3t!xaNW99EJ"),
        ("deploy --db-password 'Hq7!vLm2pQx9' --region eu", "Hq7!vLm2pQx9"),
        ("gh-runner register --token 3c4a57a5a9aadd380de4aac9b1a01680", "3c4a57a5a9aadd380de4aac9b1a01680"),
        ("mysql -uroot -pMyTZxIcqHlieM5 shop < dump.sql", "MyTZxIcqHlieM5"),
        ("docker login -u bot -p Dock3r3ZYo8abHGdFN registry.acme.io", "Dock3r3ZYo8abHGdFN"),
        ("echo 'Dock3r3ZYo8abHGdFN' | docker login --password-stdin -u acmebot", "Dock3r3ZYo8abHGdFN"),
        ('sshpass -p "SshGSP4aBm6fvCd9" ssh deploy@build', "SshGSP4aBm6fvCd9"),
        ("curl -u admin:Adm1n!RZRBvNVeGP https://jenkins.acme.io/api", "Adm1n!RZRBvNVeGP"),
        (
            "curl -u ACc9774a83aad72f2a143422cf8ccb8dbf:b74d6d2d6e5e100e8d4875a4a99fbb80 https://api.twilio.com/x",
            "b74d6d2d6e5e100e8d4875a4a99fbb80",
        ),
        ("kubectl create secret generic db --from-literal=password=L1tC32RKgSHIuz", "L1tC32RKgSHIuz"),
        ("[db]\nhost = db.internal\npassword = Winter2024!gqgEqC\n", "Winter2024!gqgEqC"),
        ("spring.datasource.password=Spr1ngB00tPw", "Spr1ngB00tPw"),
        ("<server><id>nexus</id><password>Xm1Pass99zz</password></server>", "Xm1Pass99zz"),
        ("db_password=lowEr9xyzQ\n", "lowEr9xyzQ"),
        ("machine github.com login bob password 41lQhORgjB17DfePyIm4", "41lQhORgjB17DfePyIm4"),
        (
            "curl -H 'X-API-Key: 3ce17a428c81732668fc510497f4a53f' https://api.acme.io",
            "3ce17a428c81732668fc510497f4a53f",
        ),
        ("api-key: 3c4a57a5a9aadd380de4aac9b1a01680", "3c4a57a5a9aadd380de4aac9b1a01680"),
        (
            "curl -H 'Authorization: Token 3c4a57a5a9aadd380de4aac9b1a016804a4a8725' http://localhost:8000/api/",
            "3c4a57a5a9aadd380de4aac9b1a016804a4a8725",
        ),
        ("Authorization: Basic Ym9iOktpZnhhUjlu", "Ym9iOktpZnhhUjlu"),
        (
            'curl -d "api_key=3c4a57a5a9aadd380de4aac9b1a01680&q=x" https://a.io',
            "3c4a57a5a9aadd380de4aac9b1a01680",
        ),
        ('DB_PASSWORD="c0rrect h0rse NsqjDDmA"', "NsqjDDmA"),
        (
            "SECRET_KEY = 'django-insecure-e)jvb%1yt$u^h_-+u4^m^&g)xi6n9^_mvxfku5*8k$r#-v97jd'",
            "e)jvb%1yt$u^h",
        ),
        # rule bugs: a value starting with "a" was a placeholder; "key=" hid "key" from the quoted rule
        ("API_KEY=aB3xK9mQ2zL8pW", "aB3xK9mQ2zL8pW"),
        ('client = Client(api_key="aB3xK9mQ2zL8pW1")', "aB3xK9mQ2zL8pW1"),
        (
            "tls.key: " + base64.b64encode(PEM.encode() * 8).decode(),
            base64.b64encode(PEM.encode() * 8).decode()[:40],
        ),
    ],
)
def test_secrets_in_published_shapes_are_redacted(redactor: Redactor, text: str, secret: str) -> None:
    out = red(redactor, text)
    assert secret not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "PWD=/home/runner/work/api\nOLDPWD=/root\nSHLVL=1",
        "MAX_TOKENS=4096",
        "PASSWORD_FILE=/run/secrets/db_password",
        '{"tokenizer": "meta-llama/Llama-2-7b-hf", "max_tokens": "1024", "token_type": "bearer"}',
        "tokenizer: bert-base-uncased",
        "class AbstractSingletonProxyFactoryBean2TransactionInterceptorV3: pass",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx7Zr9mKx2Lp4Wv8Ny3HcJd6Gs1QaE5uVoR7kq2Lm9X bob@laptop",
        "User-Agent: Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0.0.0 Safari/537.36",
        'client = OpenAI(api_key="sk-...")',
        "password = compute(pw2)\nif token == tok2:\n    return token",
        "API_KEY=your_api_key\nPASSWORD=my_password\nTOKEN=the-token",
        "password = password_input\nself.token = response_token2",
        "ls -p /tmp && grep -p foo bar && mysql -p",
    ],
)
def test_published_decoys_survive(redactor: Redactor, text: str) -> None:
    assert red(redactor, text) == text


def test_values_against_a_json_escape_in_a_tool_input_are_found(redactor: Redactor) -> None:
    """A Write call's content: every value at the start of a line sits against ``\\n`` in the JSON text."""
    content = "header\n4539057841620398\nAKIAQWERTYUIOPASDFGH\nghp_R7kq2Lm9XwPz4TfBv8Ny3HcJd6Gs1QaE5uVo\nok\n"
    text = json.dumps({"file_path": "/app/.env", "content": content})
    out, findings = redactor._redact_json_text(text, PlaceholderMap(), [])
    for value in ("4539057841620398", "AKIAQWERTYUIOPASDFGH", "ghp_R7kq2Lm9XwPz4TfBv8Ny3HcJd6Gs1QaE5uVo"):
        assert value not in out
    assert json.loads(out)["file_path"] == "/app/.env" and json.loads(out)["content"].endswith("\nok\n")
    plain = json.dumps({"command": "ls -la"})  # nothing found, no escape: the text is kept byte for byte
    assert redactor._redact_json_text(plain, PlaceholderMap(), [])[0] == plain


def test_a_secret_found_once_is_replaced_everywhere_with_one_placeholder(redactor: Redactor) -> None:
    """``export API_TOKEN=`` names it; after ``Bearer`` it is too short for that rule and in a later output it is
    bare. A word-like password (``postgres``) is not spread to every ``sudo -u postgres``."""
    token = "aB3xK9mQ2zL8pWq7Zr"
    session = Session(
        session_id="s1",
        source_format="claude_code",
        source_path="/x",
        repo="r",
        prompts=[Prompt(index=0, text="deploy it")],
        steps=[
            Step(
                index=0,
                tool_name="Bash",
                command=f"export API_TOKEN={token}; curl -H 'Authorization: Bearer "
                f"{token}' https://api.acme.io",
                output="",
            ),
            Step(index=1, tool_name="Bash", command="cat deploy.log", output=f"auth ok ({token})"),
            Step(
                index=2,
                tool_name="Bash",
                command="psql postgres://postgres:postgres@db.internal/app",
                output="sudo -u postgres psql",
            ),
        ],
    )
    redacted, report = redactor.redact_session(session)
    texts = [s.command or "" for s in redacted.steps] + [s.output for s in redacted.steps]
    assert not any(token in t for t in texts)
    assert (
        redacted.steps[0].command.count("<SECRET_1>") == 2
        and redacted.steps[1].output == "auth ok (<SECRET_1>)"
    )
    assert redacted.steps[2].output == "sudo -u postgres psql"
    assert report.by_entity["SECRET"] >= 1
