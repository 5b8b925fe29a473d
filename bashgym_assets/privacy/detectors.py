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
            yield Finding(entity=self.entity, start=start, end=end, text=value, detector=self.name,
                          priority=self.priority)


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
    r"(?:your|my|some|the|an?)[-_ ]?\w*|changeme_?later|none|null|nil|true|false|undefined|"
    r"str|string|int|bytes|bool|optional|any|secretstr|redacted|hidden|example|placeholder|env|environ)$",
    re.IGNORECASE,
)
_CODE_EXPR = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*$|[()\[\]{}]")


def _is_literal_secret_value(value: str, text: str, start: int) -> bool:
    """The right-hand side of ``secret = ...`` is a literal worth hiding, not code or a placeholder."""
    v = value.strip().strip("\\").strip("'\"")
    if len(v) < 4 or _PLACEHOLDER_VALUES.match(v) or PLACEHOLDER_RE.search(v):
        return False
    if v.startswith(("$", "%", "{", "<", "os.", "self.", "env.", "process.env", "settings.", "config.")):
        return False
    return not _CODE_EXPR.search(v)


def _is_unquoted_code_value(value: str, text: str, start: int) -> bool:
    """``password: hunter2`` (YAML, HTTP headers) but not ``password: str`` or ``token = get_token()``."""
    if not _is_literal_secret_value(value, text, start):
        return False
    # an unquoted value needs a digit or symbol: plain words are identifiers in code (``token = tok``)
    return bool(re.search(r"[0-9!@#%^&*+/=~.-]", value)) or len(value) >= 12


def _high_entropy_ok(value: str, text: str, start: int) -> bool:
    """A long token that is random enough and not a hash, UUID, base64 image or identifier."""
    if _HEX_ONLY.match(value):  # git hashes, sha256 digests, UUIDs: not secrets out of a secret context
        return False
    if PLACEHOLDER_RE.search(value) or _DIGEST_PREFIX.match(value):
        return False
    before = text[max(0, start - 12):start].lower()
    if before.endswith(("sha1-", "sha256-", "sha384-", "sha512-", "base64,", "sha256:", "sha512:", "md5-", "h1:")):
        return False
    if "/" in value and value.count("/") >= 2 and re.search(r"/[a-z]{3,}[./]", value):
        return False  # a path
    digits = sum(c.isdigit() for c in value)
    uppers = sum(c.isupper() for c in value)
    lowers = sum(c.islower() for c in value)
    if digits < 2 or uppers < 2 or lowers < 2:
        return False
    # identifiers like parse_HTTP_response_v2_2024: every part is a word, a number or tiny
    if all(p.isalpha() or p.isdigit() or len(p) <= 3 for p in _PARTS.split(value)):
        return False
    return shannon_entropy(value) >= 4.0


def _jwt_ok(value: str, text: str, start: int) -> bool:
    return value.count(".") == 2


_KEYWORD_TRIGGERS = ("secret", "token", "pass", "pwd", "key", "credential", "dsn")

# The secret-looking part of a name; what precedes it (``DB_``, ``stripe.``) does not matter, only the value is
# replaced, and starting at the keyword keeps the scan linear (a leading ``\w*`` would backtrack on every word).
_SECRET_NAME = (
    r"(?:SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|PWD|API_?KEY|ACCESS_?KEY|AUTH_?KEY|"
    r"PRIVATE_?KEY|CLIENT_?SECRET|CREDENTIALS?|SESSION_?KEY|SIGNING_?KEY|ENCRYPTION_?KEY|DSN)[A-Za-z0-9_]*"
)

SECRET_PATTERNS: list[SecretPattern] = [
    SecretPattern("private_key_block", "PRIVATE_KEY", re.compile(
        r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END \1PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.DOTALL), priority=100, triggers=("PRIVATE KEY",)),
    SecretPattern("anthropic_key", "ANTHROPIC_KEY", re.compile(r"\bsk-ant-[A-Za-z0-9]{2,10}-[A-Za-z0-9_\-]{32,}"),
                  priority=90, triggers=("sk-ant-",)),
    SecretPattern("openai_key", "OPENAI_KEY", re.compile(
        r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}(?:T3BlbkFJ[A-Za-z0-9_\-]{20,})?"),
        validator=lambda v, t, s: not v.startswith("sk-ant-") and sum(c.isdigit() for c in v) >= 2, priority=80, triggers=("sk-",)),
    SecretPattern("aws_access_key_id", "AWS_ACCESS_KEY", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[0-9A-Z]{16}\b"),
                  priority=90, triggers=("AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA")),
    SecretPattern("aws_secret_access_key", "AWS_SECRET_KEY", re.compile(
        r"(?i)aws_?secret_?(?:access_?)?key(?:_id)?\\?[\"']?\s*[:=]\s*\\?[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
        group=1, priority=90, triggers=("secret",), ci_triggers=True),
    SecretPattern("gcp_api_key", "GCP_API_KEY", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), priority=90, triggers=("AIza",)),
    SecretPattern("gcp_oauth_token", "GCP_TOKEN", re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"), priority=90, triggers=("ya29.",)),
    SecretPattern("gcp_oauth_client_secret", "GCP_CLIENT_SECRET", re.compile(r"\bGOCSPX-[A-Za-z0-9_\-]{24,}"),
                  priority=90, triggers=("GOCSPX-",)),
    SecretPattern("azure_storage_key", "AZURE_KEY", re.compile(
        r"(?i)(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{40,}={0,2})"), group=1, priority=90, triggers=("key=",), ci_triggers=True),
    SecretPattern("azure_sas_signature", "AZURE_KEY", re.compile(r"[?&]sig=([A-Za-z0-9%+/]{30,}={0,2})"), group=1,
                  priority=90, triggers=("sig=",)),
    SecretPattern("azure_client_secret", "AZURE_KEY", re.compile(r"\b[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}"),
                  priority=90, triggers=("Q~",)),
    SecretPattern("github_token", "GITHUB_TOKEN", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b"), priority=90, triggers=("gh",)),
    SecretPattern("github_fine_grained_pat", "GITHUB_TOKEN", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
                  priority=90, triggers=("github_pat_",)),
    SecretPattern("gitlab_token", "GITLAB_TOKEN", re.compile(
        r"\bgl(?:pat|dt|ptt|rt|soat|cbt|imt|ft|agent)-[A-Za-z0-9_\-]{20,}"), priority=90, triggers=("gl",)),
    SecretPattern("slack_token", "SLACK_TOKEN", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), priority=90, triggers=("xox",)),
    SecretPattern("slack_webhook", "SLACK_WEBHOOK", re.compile(
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"), priority=95, triggers=("hooks.slack.com",)),
    SecretPattern("stripe_key", "STRIPE_KEY", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
                  priority=90, triggers=("_live_", "_test_")),
    SecretPattern("stripe_webhook_secret", "STRIPE_KEY", re.compile(r"\bwhsec_[A-Za-z0-9]{24,}"), priority=90, triggers=("whsec_",)),
    SecretPattern("huggingface_token", "HF_TOKEN", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), priority=90, triggers=("hf_",)),
    SecretPattern("npm_token", "NPM_TOKEN", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), priority=90, triggers=("npm_",)),
    SecretPattern("pypi_token", "PYPI_TOKEN", re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"), priority=90, triggers=("pypi-",)),
    SecretPattern("sendgrid_key", "SENDGRID_KEY", re.compile(r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b"),
                  priority=90, triggers=("SG.",)),
    SecretPattern("twilio_key", "TWILIO_KEY", re.compile(r"\b(?:SK|AC)[0-9a-f]{32}\b"), priority=85, triggers=("SK", "AC")),
    SecretPattern("digitalocean_token", "DIGITALOCEAN_TOKEN", re.compile(r"\bdo[por]_v1_[a-f0-9]{64}\b"), priority=90, triggers=("_v1_",)),
    SecretPattern("shopify_token", "SHOPIFY_TOKEN", re.compile(r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"), priority=90, triggers=("shp",)),
    SecretPattern("telegram_bot_token", "TELEGRAM_TOKEN", re.compile(r"\b\d{8,10}:AA[0-9A-Za-z_\-]{33}\b"),
                  priority=90, triggers=(":AA",)),
    SecretPattern("jwt", "JWT", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
                  validator=_jwt_ok, priority=85, triggers=("eyJ",)),
    SecretPattern("bearer_token", "TOKEN", re.compile(
        r"(?i)\b(?:authorization\\?[\"']?\s*[:=]\s*\\?[\"']?)?bearer\s+([A-Za-z0-9_\-.=+/]{20,})"), group=1,
        validator=lambda v, t, s: not PLACEHOLDER_RE.search(v) and not _HEX_ONLY.match(v) or len(v) >= 32,
        priority=70, triggers=("bearer",), ci_triggers=True),
    # scheme://user:password@host -> only the password
    SecretPattern("password_in_url", "PASSWORD", re.compile(
        r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s/:@\"'<>]{1,128}:([^\s/@\"'<>]{1,256})@[^\s/@\"'<>]"), group=1,
        validator=lambda v, t, s: not PLACEHOLDER_RE.fullmatch(v) and not v.startswith("$"), priority=75, triggers=("://",)),
    # ADO / JDBC / libpq keyword connection strings: Password=...; pwd=...
    SecretPattern("password_in_connection_string", "PASSWORD", re.compile(
        r"(?i)(?:^|[\s;\"'?&])(?:password|pwd|pass)=([^;&\s\"'<>]{3,})"), group=1,
        validator=_is_literal_secret_value, priority=74, triggers=("pass", "pwd"), ci_triggers=True),
    # .env / shell: UPPER_SECRET_NAME=value (no spaces around '='), quoted or not
    SecretPattern("env_assignment", "SECRET", re.compile(
        _SECRET_NAME.replace("A-Za-z0-9_", "A-Z0-9_") +
        r"=(?:\\?[\"'])?([^\s\"'`;&|\\]{4,})"), group=1,
        validator=lambda v, t, s: _is_literal_secret_value(v, t, s), priority=60, triggers=("SECRET", "TOKEN", "PASS", "PWD", "KEY", "CREDENTIAL", "DSN")),
    # code / JSON / YAML with a quoted literal: api_key = "value", "password": "value", token: 'value'
    SecretPattern("quoted_assignment", "SECRET", re.compile(
        r"(?i)" + _SECRET_NAME + r"\\?[\"']?\s*(?::=|=>|[:=])\s*\\?[\"']([^\"'\s\\]{4,})\\?[\"']"),
        group=1, validator=_is_literal_secret_value, priority=59, triggers=_KEYWORD_TRIGGERS, ci_triggers=True),
    # YAML / headers with an unquoted value: password: hunter2!, X-Api-Key: abc123...
    SecretPattern("unquoted_assignment", "SECRET", re.compile(
        r"(?i)" + _SECRET_NAME.replace("_", "_-") + r"\s*:\s+([^\s\"'`,;()\[\]{}<>\\]{4,})(?=$|[\s,;\\])",
        re.MULTILINE), group=1, validator=_is_unquoted_code_value, priority=58, triggers=_KEYWORD_TRIGGERS, ci_triggers=True),
    SecretPattern("high_entropy_token", "TOKEN", re.compile(
        r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{24,512}={0,2}(?![A-Za-z0-9+/_\-])"),
        validator=_high_entropy_ok, priority=10),
]

#: Names that a home directory may carry that are not a person (sandbox users, CI runners).
GENERIC_USERS = frozenset({
    "root", "operator", "user", "ubuntu", "debian", "admin", "runner", "vagrant", "ec2-user", "node", "app",
    "docker", "jenkins", "circleci", "travis", "git", "www-data", "nobody", "shared", "public", "default", "home",
    "guest", "test", "tests", "build", "dev", "developer", "work", "users", "library", "lib", "bin",
})

HOME_DIR_RE = re.compile(r"(?:/home/|/Users/|[A-Za-z]:\\\\?Users\\\\?|/var/home/)([A-Za-z0-9._][A-Za-z0-9._\-]{0,63})")


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
    out = [SecretPattern("home_directory_user", "USER", HOME_DIR_RE, group=1,
                         validator=lambda v, t, s: v.rstrip(".").lower() not in GENERIC_USERS, priority=50,
                         triggers=("/home/", "/users/", "users\\"), ci_triggers=True)]
    words = sorted((n for n in names if len(n) >= 3), key=len, reverse=True)
    if words:
        alt = "|".join(re.escape(n) for n in words)
        out.append(SecretPattern("known_username", "USER", re.compile(rf"(?<![A-Za-z0-9_])(?:{alt})(?![A-Za-z0-9_])"),
                                 priority=49, triggers=tuple(words)))
    return out
