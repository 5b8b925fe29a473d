"""Secret detectors presidio lacks: cloud and SaaS keys, JWTs, private keys, credentials, entropy, user names.

Each detector is a compiled regular expression (most start with a literal prefix, so Python's regex engine skips
ahead cheaply) plus an optional validator that rejects look-alikes in code. Detectors report the span to replace
(often a capture group, e.g. only the value of ``API_KEY=value``) and the entity type used for the placeholder.

What they deliberately do NOT flag (so code survives redaction): git hashes, sha digests and UUIDs outside a
secret context (hex-only strings), version strings, long CamelCase identifiers (no digits), ``${VAR}`` references,
``os.environ[...]`` lookups and function calls on the right of ``password =``, placeholders we wrote earlier, and
placeholder values (``YOUR_API_KEY``, ``sk-XXXX``, AWS's documented example keys: the redactor drops those with
``decoys.is_placeholder_secret``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel

#: A placeholder we wrote: ``<EMAIL_1>``. Detections overlapping one are ignored (idempotent re-scans).
PLACEHOLDER_RE = re.compile(r"<[A-Z][A-Z0-9_]*_\d+>")


class Finding(BaseModel):
    """One detected span: what it is, where, and which detector found it."""

    entity: str
    start: int
    end: int
    text: str
    detector: str
    score: float = 1.0
    priority: int = 0
    #: what the placeholder number is keyed on when not ``text`` (a URL without its userinfo)
    key: str | None = None
    #: entity types of findings this one swallowed and still counts (a credential inside a replaced URL)
    contains: tuple[str, ...] = ()


@dataclass(frozen=True)
class SecretPattern:
    """A regex detector. ``group`` selects the span to replace; ``validator(value, text, start)`` may veto."""

    name: str
    entity: str
    pattern: re.Pattern[str]
    group: int = 0
    validator: Callable[[str, str, int], bool] | None = None
    priority: int = 0
    tags: frozenset[str] = field(default_factory=frozenset)
    #: literal strings one of which every match contains: a C-speed ``in`` test skips the regex on most texts
    triggers: tuple[str, ...] = ()
    #: the triggers are lowercase and tested against the lowercased text
    ci_triggers: bool = False

    def triggered(self, text: str, lower: str) -> bool:
        if not self.triggers:
            return True
        hay = lower if self.ci_triggers else text
        return any(t in hay for t in self.triggers)

    def find(self, text: str) -> Iterator[Finding]:
        for m in self.pattern.finditer(text):
            start, end = m.span(self.group)
            if start < 0 or end <= start:
                continue
            value = text[start:end]
            if self.validator is not None and not self.validator(value, text, start):
                continue
            yield Finding(
                entity=self.entity,
                start=start,
                end=end,
                text=value,
                detector=self.name,
                priority=self.priority,
            )


def shannon_entropy(value: str) -> float:
    """Bits per character: random base62 tokens score ~5, English-ish identifiers ~3.5-4."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_HEX_ONLY = re.compile(r"^[0-9a-fA-F-]+$")
_DIGEST_PREFIX = re.compile(r"(?i)^(?:sha\d+|md5|h\d)[-:]")
_PARTS = re.compile(r"[_\-./+=]+")
_PLACEHOLDER_VALUES = re.compile(
    r"^(?:<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{.*\}\}|%\(?\w*\)?s|\*+|x{3,}|X{3,}|\.\.\.|"
    r"your[-_ ]?\w*|(?:my|some|the|an?)[-_ ]\w+|my(?:password|passwd|pass|secret|token|key|apikey|api_key)\w*|"
    r"[\w-]{0,12}(?:\.\.\.|\u2026)[\w-]{0,12}|changeme_?later|none|null|nil|true|false|undefined|"
    r"str|string|int|bytes|bool|optional|any|secretstr|redacted|hidden|example|placeholder|env|environ)$",
    re.IGNORECASE,
)
_CODE_EXPR = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*$|[()\[\]{}]")


# The name a value is assigned to, read back from the value's start: ``DB_PASSWORD`` in ``DB_PASSWORD="x"``.
_NAME_BEFORE = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)\\?[\"']?\s*(?::=|=>|[:=]|\s)\s*\\?[\"']?$")
# Names that hold something about a secret, not the secret: where it lives, its kind, a count or a limit
# (``PASSWORD_FILE=/run/secrets/db``, ``token_uri``, ``token_type``, ``tokenizer``, ``MAX_TOKENS=4096``).
_NOT_A_SECRET_NAME = re.compile(
    r"(?i)(?:file|path|dir|folder|uri|url|endpoint|type|kind|izer|name|count|limit|len|length|size|ttl|timeout|"
    r"expiry|expires|expires_?in|expires_?at|lifetime|header|field|param|policy|mode|format|strategy|rotation)$"
)


def name_before(text: str, start: int) -> str:
    """The identifier a value at ``start`` is assigned to ('' when none): ``name=``, ``name: ``, ``"name": "``."""
    m = _NAME_BEFORE.search(text[max(0, start - 80) : start])
    return m.group(1).rsplit(".", 1)[-1] if m else ""


def _names_no_secret(value: str, text: str, start: int) -> bool:
    """The name says the value is not the secret itself: a file, a URI, a count, the working directory."""
    name = name_before(text, start)
    if not name:
        return False
    upper = name.upper().replace("-", "_")
    if _NOT_A_SECRET_NAME.search(upper.rstrip("S_")) or _NOT_A_SECRET_NAME.search(upper):
        return True
    if upper.endswith("PWD") and value.lstrip("'\"").startswith(("/", "~")):
        return True  # PWD, OLDPWD: the shell's working directory (``env`` output), not a password
    return "TOKENS" in upper and value.strip("'\"").isdigit()  # MAX_TOKENS=4096: a count of tokens


def _bare(value: str, text: str, start: int) -> str | None:
    """The value without quotes, or None when it is too short, a placeholder, or its name says it is no secret."""
    v = value.strip().strip("\\").strip("'\"")
    if (
        len(v) < 4
        or _PLACEHOLDER_VALUES.match(v)
        or PLACEHOLDER_RE.search(v)
        or _names_no_secret(v, text, start)
    ):
        return None
    return v


def _is_literal_secret_value(value: str, text: str, start: int) -> bool:
    """The right-hand side of ``secret = ...`` is a literal worth hiding, not code or a placeholder."""
    v = _bare(value, text, start)
    if v is None:
        return False
    if v.startswith(("$", "%", "{", "<", "os.", "self.", "env.", "process.env", "settings.", "config.")):
        return False
    return not _CODE_EXPR.search(v)


def _is_quoted_secret_value(value: str, text: str, start: int) -> bool:
    """A quoted literal is data, brackets and all (Django's ``'django-insecure-e)jvb%1y...'``): only a dotted
    reference (``"settings.API_KEY"``), a template or a placeholder is not a secret."""
    v = _bare(value, text, start)
    if v is None or v.startswith(("$", "%(", "{", "<", "os.environ", "process.env")):
        return False
    return not re.fullmatch(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*", v)


def _is_unquoted_code_value(value: str, text: str, start: int) -> bool:
    """``password: hunter2`` (YAML, HTTP headers) but not ``password: str`` or ``token = get_token()``."""
    if not _is_literal_secret_value(value, text, start):
        return False
    # an unquoted value needs a digit or symbol: plain words are identifiers in code (``token = tok``)
    return bool(re.search(r"[0-9!@#%^&*+/=~.-]", value)) or len(value) >= 12


def _is_code_line(text: str, start: int) -> bool:
    """The value sits in a code line (``password = compute(pw2)``, ``if token == x1:``), not a config line."""
    lo = max(0, start - 300)  # a bounded window: a 1 MB line with many matches must stay linear
    line_start = text.rfind("\n", lo, start) + 1 or lo
    end = text.find("\n", start, start + 300)
    line = text[line_start : end if end >= 0 else start + 300]
    return bool(re.search(r"==|!=|\bif\b|\breturn\b|\bdef\b|\bassert\b|\(.*\)\s*$", line))


def _is_identifier_value(value: str) -> bool:
    """``password = password_input``, ``token = response_token2``: a variable on the right, not a secret (a secret
    in a config line has a digit, a symbol or mixed case, and no snake_case words)."""
    return bool(re.fullmatch(r"[a-z_][a-z0-9_]*", value)) and ("_" in value or value.isalpha())


def _high_entropy_ok(value: str, text: str, start: int) -> bool:
    """A long token that is random enough and not a hash, UUID, base64 image or identifier."""
    if _HEX_ONLY.match(value):  # git hashes, sha256 digests, UUIDs: not secrets out of a secret context
        return False
    if PLACEHOLDER_RE.search(value) or _DIGEST_PREFIX.match(value):
        return False
    before = text[max(0, start - 12) : start].lower()
    if before.endswith(
        ("sha1-", "sha256-", "sha384-", "sha512-", "base64,", "sha256:", "sha512:", "md5-", "h1:")
    ):
        return False
    if "/" in value and value.count("/") >= 2 and re.search(r"/[a-z]{3,}[./]", value):
        return False  # a path
    if text[max(0, start - 24) : start].rstrip().endswith(_PUBLIC_KEY_TYPES):
        return False  # an ssh public key's body: public by definition
    if _looks_like_identifier(value):
        return False
    digits = sum(c.isdigit() for c in value)
    uppers = sum(c.isupper() for c in value)
    lowers = sum(c.islower() for c in value)
    if digits < 2 or uppers < 2 or lowers < 2:
        return False
    # identifiers like parse_HTTP_response_v2_2024: every part is a word, a number or tiny
    if all(p.isalpha() or p.isdigit() or len(p) <= 3 for p in _PARTS.split(value)):
        return False
    return shannon_entropy(value) >= 4.0


_PUBLIC_KEY_TYPES = (
    "ssh-rsa",
    "ssh-ed25519",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
)
_HUMPS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _looks_like_identifier(value: str) -> bool:
    """CamelCase made of words (``AbstractSingletonProxyFactoryBean2TransactionInterceptorV3``): nearly every
    letter sits in a hump of 4+ letters, where a random token's humps are 1-3 characters long."""
    humps = _HUMPS.findall(value)
    letters = sum(len(h) for h in humps if not h.isdigit())
    long_humps = sum(len(h) for h in humps if not h.isdigit() and len(h) >= 4)
    return letters >= 16 and long_humps >= 0.85 * letters and sum(c.isdigit() for c in value) <= 4


def _base64_holds_a_secret(value: str, text: str, start: int) -> bool:
    """A long base64 value (a Kubernetes secret's ``data``) that decodes to a private key or a credentials file."""
    import base64
    import binascii

    try:
        decoded = base64.b64decode(value[: len(value) - len(value) % 4], validate=False)[:8192]
    except (binascii.Error, ValueError):
        return False
    return any(
        marker in decoded
        for marker in (
            b"PRIVATE KEY",
            b'"private_key"',
            b'"client_secret"',
            b'"password"',
            b"aws_secret_access_key",
        )
    )


def _jwt_ok(value: str, text: str, start: int) -> bool:
    return value.count(".") == 2


_KEYWORD_TRIGGERS = ("secret", "token", "pass", "pwd", "key", "credential", "dsn")

# The secret-looking part of a name; what precedes it (``DB_``, ``stripe.``) does not matter, only the value is
# replaced, and starting at the keyword keeps the scan linear (a leading ``\w*`` would backtrack on every word).
_SECRET_NAME = (
    r"(?:SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|PWD|API_?KEY|ACCESS_?KEY|AUTH_?KEY|"
    r"PRIVATE_?KEY|CLIENT_?SECRET|CREDENTIALS?|SESSION_?KEY|SIGNING_?KEY|ENCRYPTION_?KEY|DSN)[A-Za-z0-9_]*"
)

# The same names as HTTP headers and CLI-style keys: X-Api-Key, api-key, access-token.
_DASHED_SECRET_NAME = _SECRET_NAME.replace("_?", "[_-]?").replace("A-Za-z0-9_]", "A-Za-z0-9_-]")
_LOWER_SECRET_NAME = (
    r"(?:password|passwd|pass|pwd|secret|token|api[_-]?key|access[_-]?token|auth[_-]?token|"
    r"client[_-]?secret|private[_-]?key)"
)

SECRET_PATTERNS: list[SecretPattern] = [
    SecretPattern(
        "private_key_block",
        "PRIVATE_KEY",
        re.compile(
            r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END \1PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
        priority=100,
        triggers=("PRIVATE KEY",),
    ),
    SecretPattern(
        "anthropic_key",
        "ANTHROPIC_KEY",
        re.compile(r"\bsk-ant-[A-Za-z0-9]{2,10}-[A-Za-z0-9_\-]{32,}"),
        priority=90,
        triggers=("sk-ant-",),
    ),
    SecretPattern(
        "openai_key",
        "OPENAI_KEY",
        re.compile(
            r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}(?:T3BlbkFJ[A-Za-z0-9_\-]{20,})?"
        ),
        validator=lambda v, t, s: not v.startswith("sk-ant-") and sum(c.isdigit() for c in v) >= 2,
        priority=80,
        triggers=("sk-",),
    ),
    SecretPattern(
        "aws_access_key_id",
        "AWS_ACCESS_KEY",
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[0-9A-Z]{16}\b"),
        priority=90,
        triggers=("AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA"),
    ),
    SecretPattern(
        "aws_secret_access_key",
        "AWS_SECRET_KEY",
        re.compile(
            r"(?i)aws_?secret_?(?:access_?)?key(?:_id)?\\?[\"']?\s*[:=]\s*\\?[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        group=1,
        priority=90,
        triggers=("secret",),
        ci_triggers=True,
    ),
    SecretPattern(
        "gcp_api_key",
        "GCP_API_KEY",
        re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"),
        priority=90,
        triggers=("AIza",),
    ),
    SecretPattern(
        "gcp_oauth_token",
        "GCP_TOKEN",
        re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"),
        priority=90,
        triggers=("ya29.",),
    ),
    SecretPattern(
        "gcp_oauth_client_secret",
        "GCP_CLIENT_SECRET",
        re.compile(r"\bGOCSPX-[A-Za-z0-9_\-]{24,}"),
        priority=90,
        triggers=("GOCSPX-",),
    ),
    SecretPattern(
        "azure_storage_key",
        "AZURE_KEY",
        re.compile(r"(?i)(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{40,}={0,2})"),
        group=1,
        priority=90,
        triggers=("key=",),
        ci_triggers=True,
    ),
    SecretPattern(
        "azure_sas_signature",
        "AZURE_KEY",
        re.compile(r"[?&]sig=([A-Za-z0-9%+/]{30,}={0,2})"),
        group=1,
        priority=90,
        triggers=("sig=",),
    ),
    SecretPattern(
        "azure_client_secret",
        "AZURE_KEY",
        re.compile(r"\b[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}"),
        priority=90,
        triggers=("Q~",),
    ),
    SecretPattern(
        "github_token",
        "GITHUB_TOKEN",
        re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b"),
        priority=90,
        triggers=("gh",),
    ),
    SecretPattern(
        "github_fine_grained_pat",
        "GITHUB_TOKEN",
        re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
        priority=90,
        triggers=("github_pat_",),
    ),
    SecretPattern(
        "gitlab_token",
        "GITLAB_TOKEN",
        re.compile(r"\bgl(?:pat|dt|ptt|rt|soat|cbt|imt|ft|agent)-[A-Za-z0-9_\-]{20,}"),
        priority=90,
        triggers=("gl",),
    ),
    SecretPattern(
        "slack_token",
        "SLACK_TOKEN",
        re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
        priority=90,
        triggers=("xox",),
    ),
    SecretPattern(
        "slack_webhook",
        "SLACK_WEBHOOK",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"),
        priority=95,
        triggers=("hooks.slack.com",),
    ),
    SecretPattern(
        "stripe_key",
        "STRIPE_KEY",
        re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
        priority=90,
        triggers=("_live_", "_test_"),
    ),
    SecretPattern(
        "stripe_webhook_secret",
        "STRIPE_KEY",
        re.compile(r"\bwhsec_[A-Za-z0-9]{24,}"),
        priority=90,
        triggers=("whsec_",),
    ),
    SecretPattern(
        "huggingface_token",
        "HF_TOKEN",
        re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
        priority=90,
        triggers=("hf_",),
    ),
    SecretPattern(
        "npm_token", "NPM_TOKEN", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), priority=90, triggers=("npm_",)
    ),
    SecretPattern(
        "pypi_token",
        "PYPI_TOKEN",
        re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"),
        priority=90,
        triggers=("pypi-",),
    ),
    SecretPattern(
        "sendgrid_key",
        "SENDGRID_KEY",
        re.compile(r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b"),
        priority=90,
        triggers=("SG.",),
    ),
    SecretPattern(
        "twilio_key",
        "TWILIO_KEY",
        re.compile(r"\b(?:SK|AC)[0-9a-f]{32}\b"),
        priority=85,
        triggers=("SK", "AC"),
    ),
    SecretPattern(
        "digitalocean_token",
        "DIGITALOCEAN_TOKEN",
        re.compile(r"\bdo[por]_v1_[a-f0-9]{64}\b"),
        priority=90,
        triggers=("_v1_",),
    ),
    SecretPattern(
        "shopify_token",
        "SHOPIFY_TOKEN",
        re.compile(r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"),
        priority=90,
        triggers=("shp",),
    ),
    SecretPattern(
        "telegram_bot_token",
        "TELEGRAM_TOKEN",
        re.compile(r"\b\d{8,10}:AA[0-9A-Za-z_\-]{33}\b"),
        priority=90,
        triggers=(":AA",),
    ),
    SecretPattern(
        "jwt",
        "JWT",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        validator=_jwt_ok,
        priority=85,
        triggers=("eyJ",),
    ),
    SecretPattern(
        "bearer_token",
        "TOKEN",
        re.compile(r"(?i)\b(?:authorization\\?[\"']?\s*[:=]\s*\\?[\"']?)?bearer\s+([A-Za-z0-9_\-.=+/]{20,})"),
        group=1,
        validator=lambda v, t, s: not PLACEHOLDER_RE.search(v) and not _HEX_ONLY.match(v) or len(v) >= 32,
        priority=70,
        triggers=("bearer",),
        ci_triggers=True,
    ),
    # scheme://user:password@host -> only the password
    SecretPattern(
        "password_in_url",
        "PASSWORD",
        re.compile(
            r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s/:@\"'<>]{1,128}:([^\s/@\"'<>]{1,256})@[^\s/@\"'<>]"
        ),
        group=1,
        validator=lambda v, t, s: not PLACEHOLDER_RE.fullmatch(v) and not v.startswith("$"),
        priority=75,
        triggers=("://",),
    ),
    # ADO / JDBC / libpq keyword connection strings: Password=...; pwd=...
    SecretPattern(
        "password_in_connection_string",
        "PASSWORD",
        re.compile(r"(?i)(?:^|[\s;\"'?&])(?:password|pwd|pass)=([^;&\s\"'<>]{3,})"),
        group=1,
        validator=_is_literal_secret_value,
        priority=74,
        triggers=("pass", "pwd"),
        ci_triggers=True,
    ),
    # .env / shell: UPPER_SECRET_NAME=value (no spaces around '='), quoted or not
    SecretPattern(
        "env_assignment",
        "SECRET",
        re.compile(_SECRET_NAME.replace("A-Za-z0-9_", "A-Z0-9_") + r"=(?:\\?[\"'])?([^\s\"'`;&|\\]{4,})"),
        group=1,
        validator=lambda v, t, s: _is_literal_secret_value(v, t, s),
        priority=60,
        triggers=("SECRET", "TOKEN", "PASS", "PWD", "KEY", "CREDENTIAL", "DSN"),
    ),
    # code / JSON / YAML with a quoted literal: api_key = "value", "password": "value", token: 'value'
    SecretPattern(
        "quoted_assignment",
        "SECRET",
        re.compile(r"(?i)" + _SECRET_NAME + r"\\?[\"']?\s*(?::=|=>|[:=])\s*\\?[\"']([^\"'\s\\]{4,})\\?[\"']"),
        group=1,
        validator=_is_quoted_secret_value,
        priority=59,
        triggers=_KEYWORD_TRIGGERS,
        ci_triggers=True,
    ),
    # YAML / headers with an unquoted value: password: hunter2!, X-Api-Key: abc123...
    SecretPattern(
        "unquoted_assignment",
        "SECRET",
        re.compile(
            r"(?i)" + _DASHED_SECRET_NAME + r"\s*:\s+([^\s\"'`,;()\[\]{}<>\\]{4,})(?=$|[\s,;\\'\"])",
            re.MULTILINE,
        ),
        group=1,
        validator=_is_unquoted_code_value,
        priority=58,
        triggers=_KEYWORD_TRIGGERS,
        ci_triggers=True,
    ),
    # a quoted value with spaces: DB_PASSWORD="correct horse battery staple" (the unquoted rule stops at a space)
    SecretPattern(
        "env_assignment_quoted",
        "SECRET",
        re.compile(
            _SECRET_NAME.replace("A-Za-z0-9_", "A-Z0-9_") + r"=\\?([\"'])([^\"'\n]{4,256} [^\"'\n]*)\\?\1"
        ),
        group=2,
        validator=_is_literal_secret_value,
        priority=61,
        triggers=("SECRET", "TOKEN", "PASS", "PWD", "KEY"),
    ),
    # lower-case and dotted keys with an unquoted value: db_password=..., spring.datasource.password=...,
    # --from-literal=password=..., api_key=... in a query or form body; INI ``password = value``
    SecretPattern(
        "lower_assignment",
        "SECRET",
        re.compile(
            r"(?i)(?<![A-Za-z0-9])(?:[a-z0-9]+[._-])*"
            + _LOWER_SECRET_NAME
            + r"(?:[ \t]*=[ \t]*(?=[^\s=])|=)([^\s\"'`;&|<>]{4,256})",
            re.MULTILINE,
        ),
        group=1,
        validator=lambda v, t, s: (
            _is_unquoted_code_value(v, t, s) and not _is_code_line(t, s) and not _is_identifier_value(v)
        ),
        priority=57,
        triggers=("pass", "pwd", "secret", "token", "key"),
        ci_triggers=True,
    ),
    # command-line flags: --password=..., --password ..., --token ..., --api-key ...
    SecretPattern(
        "secret_flag",
        "SECRET",
        re.compile(
            r"(?i)(?<![\w-])--(?:[a-z]+-)*(?:password|passwd|pass|token|api-key|apikey|secret|client-secret|auth-token)"
            r"(?:=|[ \t]+)(['\"]?)([^\s'\"]{4,256})\1"
        ),
        group=2,
        validator=_is_literal_secret_value,
        priority=72,
        triggers=("--",),
    ),
    # tools that take a password as a short option: mysql -pSECRET, docker login -p SECRET, sshpass -p SECRET
    SecretPattern(
        "password_short_option",
        "PASSWORD",
        re.compile(
            r"\b(?:mysql|mysqldump|mysqladmin|mariadb|docker\s+login|podman\s+login|sshpass|helm\s+registry\s+login)"
            r"\b[^\n|;&]*?\s-p(?:[ \t]+)?(['\"]?)([^\s'\"-][^\s'\"]{2,255})\1(?=\s|$)"
        ),
        group=2,
        validator=_is_literal_secret_value,
        priority=72,
        triggers=("-p",),
    ),
    # curl -u user:password / --user user:password (also Twilio's ACxxx:authtoken)
    SecretPattern(
        "curl_user_password",
        "PASSWORD",
        re.compile(r"(?:\s-u|--user)(?:=|[ \t]+)(['\"]?)[^\s:'\"]{1,128}:([^\s'\"]{3,256})\1"),
        group=2,
        validator=lambda v, t, s: not PLACEHOLDER_RE.fullmatch(v) and not v.startswith("$"),
        priority=76,
        triggers=("-u", "--user"),
    ),
    # Authorization: Token <key> (Django REST framework), Basic <base64>, ApiKey <key>
    SecretPattern(
        "authorization_scheme",
        "TOKEN",
        re.compile(
            r"(?i)\bauthorization\\?[\"']?\s*[:=]\s*\\?[\"']?(?:token|basic|digest|apikey|api-key|key|sso-key)\s+"
            r"([A-Za-z0-9_\-.=+/:]{8,})"
        ),
        group=1,
        validator=lambda v, t, s: not PLACEHOLDER_RE.search(v) and not _PLACEHOLDER_VALUES.match(v),
        priority=71,
        triggers=("authorization",),
        ci_triggers=True,
    ),
    # <password>...</password> (Maven settings.xml, .NET configs)
    SecretPattern(
        "xml_secret_element",
        "SECRET",
        re.compile(
            r"(?i)<(password|passwd|secret|token|api[_-]?key|client[_-]?secret|private[_-]?key|passphrase)>"
            r"\s*([^<\s][^<]{2,255}?)\s*</\1>"
        ),
        group=2,
        validator=_is_literal_secret_value,
        priority=66,
        triggers=("</",),
    ),
    # a password piped into a registry login: echo 'SECRET' | docker login --password-stdin
    SecretPattern(
        "password_stdin",
        "PASSWORD",
        re.compile(
            r"\b(?:echo|printf)\s+(['\"]?)([^\s'\"|]{4,256})\1\s*\|\s*(?:docker|podman|helm|oras|skopeo)\s+"
            r"(?:registry\s+)?login\b[^\n]*--password-stdin"
        ),
        group=2,
        validator=_is_literal_secret_value,
        priority=72,
        triggers=("--password-stdin",),
    ),
    # .netrc: machine host login user password SECRET
    SecretPattern(
        "netrc_password",
        "PASSWORD",
        re.compile(r"(?i)\bmachine\s+\S+(?:\s+login\s+\S+)?\s+password\s+(\S{3,256})"),
        group=1,
        priority=72,
        validator=lambda v, t, s: not PLACEHOLDER_RE.fullmatch(v),
        triggers=("machine",),
    ),
    # base64 past the entropy rule's length: a Kubernetes secret's data holding a key or a credentials file
    SecretPattern(
        "base64_secret_blob",
        "PRIVATE_KEY",
        re.compile(
            r"(?<![A-Za-z0-9+/])(?:LS0tLS1CRUdJT|ewog|eyJ|W2RlZmF1bHRd)[A-Za-z0-9+/]{60,}={0,2}(?![A-Za-z0-9+/=])"
        ),
        validator=_base64_holds_a_secret,
        priority=95,
        triggers=("LS0tLS1CRUdJT", "ewog", "eyJ", "W2RlZmF1bHRd"),
    ),
    SecretPattern(
        "high_entropy_token",
        "TOKEN",
        re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{24,512}={0,2}(?![A-Za-z0-9+/_\-])"),
        validator=_high_entropy_ok,
        priority=10,
    ),
]

#: Names that a home directory may carry that are not a person (sandbox users, CI runners).
GENERIC_USERS = frozenset(
    {
        "root",
        "operator",
        "user",
        "ubuntu",
        "debian",
        "admin",
        "runner",
        "vagrant",
        "ec2-user",
        "node",
        "app",
        "docker",
        "jenkins",
        "circleci",
        "travis",
        "git",
        "www-data",
        "nobody",
        "shared",
        "public",
        "default",
        "home",
        "guest",
        "test",
        "tests",
        "build",
        "dev",
        "developer",
        "work",
        "users",
        "library",
        "lib",
        "bin",
    }
)

HOME_DIR_RE = re.compile(
    r"(?:/home/|/Users/|[A-Za-z]:\\\\?Users\\\\?|/var/home/)([A-Za-z0-9._][A-Za-z0-9._\-]{0,63})"
)


def usernames_in(*texts: str | None) -> set[str]:
    """User names found in home-directory paths (``/home/alice``, ``/Users/bob``, ``C:\\Users\\carol``)."""
    names: set[str] = set()
    for text in texts:
        if not text:
            continue
        for m in HOME_DIR_RE.finditer(text):
            name = m.group(1).rstrip(".")
            if name and name.lower() not in GENERIC_USERS and len(name) >= 2:
                names.add(name)
    return names


def username_patterns(names: set[str]) -> list[SecretPattern]:
    """Detectors for the session's user names: in home paths and as whole words anywhere (``alice@host:~$``)."""
    out = [
        SecretPattern(
            "home_directory_user",
            "USER",
            HOME_DIR_RE,
            group=1,
            validator=lambda v, t, s: v.rstrip(".").lower() not in GENERIC_USERS,
            priority=50,
            triggers=("/home/", "/users/", "users\\"),
            ci_triggers=True,
        )
    ]
    words = sorted((n for n in names if len(n) >= 3), key=len, reverse=True)
    if words:
        alt = "|".join(re.escape(n) for n in words)
        out.append(
            SecretPattern(
                "known_username",
                "USER",
                re.compile(rf"(?<![A-Za-z0-9_])(?:{alt})(?![A-Za-z0-9_])"),
                priority=49,
                triggers=tuple(words),
            )
        )
    return out
