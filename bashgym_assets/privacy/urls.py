"""URLs and git remotes: redacted whole or not at all, their credentials typed as secrets.

Why not presidio's ``UrlRecognizer``: its pattern ends a host at the longest *known top-level domain* it can
match, with no boundary after it, so ``https://svc.corp.internal/v1/me`` matched ``https://svc.corp.int`` (``.int``
is a TLD) and redaction left ``<URL_1>ernal/v1/me``. Its e-mail sibling then took ``token@host`` out of
``https://user:token@host/repo.git`` as an e-mail address. Here a URL is parsed like a client would (scheme,
userinfo, host, port, path, query, fragment) and ends where URLs end in text (whitespace, quotes, angle brackets,
backticks, backslashes of JSON escapes; trailing punctuation and unbalanced closing brackets are left out).

The rule, per URL (``https://...``, ``ssh://...``, ``postgres://...``, ``www.`` without a scheme, and scp-style git
remotes ``git@host:org/repo.git``):

* its credentials (the userinfo password, a token given as the userinfo, secret-named query or fragment parameters
  such as ``token=``, ``api_key=``, ``X-Amz-Signature=``) are secrets: typed by the detector that recognises them
  (``<GITHUB_TOKEN_1>``) or as ``<PASSWORD_n>`` / ``<SECRET_n>``, unless the value is a placeholder;
* a URL whose host is private (an internal name with a dot, a private or public IP address), or that carries any
  other finding outside its credentials (an e-mail in the query, a user name in the path), is replaced **whole** by
  one ``<URL_n>``, credentials included; the number is keyed on the URL without its userinfo, so a remote with and
  without a token is the same ``<URL_n>``, and the credential's type is still counted in the redaction report;
* otherwise (public infrastructure such as ``github.com``, reserved example names, loopback and documentation
  addresses, single-label service names such as ``http://db:5432``) the URL is kept and only its credentials are
  replaced: ``https://x-access-token:<GITHUB_TOKEN_1>@github.com/acme/api.git``.

Findings of other detectors on the URL's authority (an "e-mail" ``token@host``, the host's IP address) are
artefacts of the URL and are dropped: the host rule above decides.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from bashgym_assets.privacy.decoys import is_decoy_ip, is_placeholder_secret, is_reserved_host
from bashgym_assets.privacy.detectors import SECRET_PATTERNS, Finding
from bashgym_assets.privacy.presidio_offline import is_public_host

#: Entity types that are secrets (typed by our detectors): they type a credential; everything else is personal data.
SECRET_ENTITIES = frozenset({p.entity for p in SECRET_PATTERNS})
#: What other detectors report on a URL's authority that the URL's own host rule decides instead.
_AUTHORITY_ARTEFACTS = frozenset({"EMAIL_ADDRESS", "URL", "IP_ADDRESS", "PHONE_NUMBER"})

_SCHEME_BACK = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,30}\Z")
_WWW = re.compile(r"(?<![\w.+\-/@])[wW]{3}\d{0,3}\.")
# a URL runs to whitespace, a quote, an angle bracket, a backtick or a backslash; a placeholder we wrote is part of it
_BODY = re.compile(r"(?:<[A-Z][A-Z0-9_]*_\d+>|[^\s\"'<>`\\])*")
_TRAILING = ".,;:!?*"
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_\-]*[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?$")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_PORT = re.compile(r"^\d{0,5}$")
_SECRET_PARAM = re.compile(
    r"(?i)^(?:[\w.\-]*[_\-.])?(?:api_?key|apikey|access_?key|auth_?token|token|key|secret|password|passwd|pwd|pass|"
    r"sig|signature|credential|auth|jwt|session(?:_?id)?|sid|code)$"
)
_PARAM = re.compile(r"([^&;=?#]+)=([^&;#]*)")
_TOKEN_USER = re.compile(r"^[A-Za-z0-9_\-.~%]{20,}$")
# scp-style remote: user@host:path (the path is not a port); the user is found by looking back from the '@'
_SCP = re.compile(r"@([A-Za-z0-9][\w.\-]*):(?!\d+(?:[/\s]|$))([\w.~\-][\w.~/+\-]*)")
_USER_BACK = re.compile(r"[\w.+\-]{1,64}\Z")


@dataclass
class UrlMatch:
    """One URL in a text: its span, where its authority ends, its host, and the spans of its credentials."""

    start: int
    end: int
    authority_end: int
    host: str
    key: str  # the URL without its userinfo: what its placeholder number is keyed on
    #: (start, end, entity used when no detector types the value)
    credentials: list[tuple[int, int, str]] = field(default_factory=list)

    @property
    def sensitive(self) -> bool:
        return host_is_sensitive(self.host)


@functools.lru_cache(maxsize=4096)
def host_is_sensitive(host: str) -> bool:
    """Whether a URL on this host says something about the user's infrastructure.

    Public infrastructure, reserved example names, documentation/loopback addresses and single-label names
    (``db``, ``api`` in a compose file) do not; internal names with a dot and non-decoy IP addresses do."""
    h = host.strip("[]").lower().rstrip(".")
    if not h:
        return False
    if _IPV4.match(h) or ":" in h:
        return not is_decoy_ip(h)
    if is_public_host(h) or is_reserved_host(h):
        return False
    return "." in h


def _trim(text: str, start: int, end: int) -> int:
    """Leave trailing punctuation and unbalanced closing brackets out of a URL (prose, markdown links)."""
    while end > start:
        ch = text[end - 1]
        unbalanced = ch in _CLOSERS and text.count(ch, start, end) > text.count(_CLOSERS[ch], start, end)
        if not (ch in _TRAILING or unbalanced):
            break
        end -= 1
    return end


def _valid_host(host: str) -> bool:
    if host.startswith("["):
        return host.endswith("]") and ":" in host
    return bool(_HOSTNAME.match(host)) and not host.replace(".", "").isdigit() or bool(_IPV4.match(host))


def _parse(text: str, start: int, auth_start: int, end: int) -> UrlMatch | None:
    """Split ``text[start:end]`` (authority from ``auth_start``) into host and credentials; None if no real host."""
    auth_end = auth_start
    while auth_end < end and text[auth_end] not in "/?#":
        auth_end += 1
    authority = text[auth_start:auth_end]
    at = authority.rfind("@")
    creds: list[tuple[int, int, str]] = []
    host_start = auth_start
    if at >= 0:
        userinfo = authority[:at]
        host_start = auth_start + at + 1
        colon = userinfo.find(":")
        if colon >= 0 and colon + 1 < len(userinfo):
            creds.append((auth_start + colon + 1, auth_start + at, "PASSWORD"))
        elif colon < 0 and _TOKEN_USER.match(userinfo) and sum(c.isdigit() for c in userinfo) >= 2:
            creds.append((auth_start, auth_start + at, "TOKEN"))  # https://<token>@host/...
    hostport = text[host_start:auth_end]
    if hostport.startswith("["):
        close = hostport.find("]")
        host, port = (hostport[: close + 1], hostport[close + 2 :]) if close > 0 else (hostport, "")
    else:
        host, _, port = hostport.partition(":")
    if not host or not _valid_host(host) or not _PORT.match(port):
        return None
    # secret-named parameters in the query and the fragment (OAuth puts access_token in the fragment)
    frag = text.find("#", auth_end, end)
    query = text.find("?", auth_end, frag if frag >= 0 else end)
    parts = [(query + 1, frag if frag >= 0 else end)] if query >= 0 else []
    parts += [(frag + 1, end)] if frag >= 0 else []
    for lo, hi in parts:
        for m in _PARAM.finditer(text, lo, hi):
            value = m.group(2)
            if _SECRET_PARAM.match(m.group(1)) and len(value) >= 4 and not is_placeholder_secret(value):
                creds.append((m.start(2), m.end(2), "SECRET"))
    key = text[start:auth_start] + text[host_start:end]
    return UrlMatch(start, end, auth_end, host.lower(), key, creds)


def find_urls(text: str) -> Iterator[UrlMatch]:
    """Every URL and scp-style git remote in ``text``, in order, not overlapping."""
    last_end = 0
    starts: list[tuple[int, int]] = []  # (url start, authority start)
    if "://" in text:
        pos = text.find("://")
        while pos >= 0:
            m = _SCHEME_BACK.search(text, max(0, pos - 31), pos)
            before = text[m.start() - 1] if m is not None and m.start() else " "
            if m is not None and not (before.isalnum() or before in "+.-_"):
                starts.append((m.start(), pos + 3))
            pos = text.find("://", pos + 3)
    if "ww" in text or "WW" in text:
        starts += [(m.start(), m.start()) for m in _WWW.finditer(text)]
    spans: list[UrlMatch] = []
    for start, auth_start in sorted(starts):
        if start < last_end:
            continue
        body = _BODY.match(text, auth_start)
        assert body is not None  # (...)* matches, if only the empty string
        end = _trim(text, start, body.end())
        url = _parse(text, start, auth_start, end) if end > auth_start else None
        if url is not None:
            spans.append(url)
            last_end = end
    if "@" in text:
        for m in _SCP.finditer(text):
            user = _USER_BACK.search(text, max(0, m.start() - 64), m.start())
            if user is None:
                continue
            start, end = user.start(), _trim(text, m.start(), m.end())
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "/:@"):
                continue
            path = text[m.start(2) : end].rstrip("/")
            if not (path.endswith(".git") or user.group() == "git"):
                continue  # ``alice@devbox:~/src$`` is a shell prompt, not a remote
            if any(u.start < end and start < u.end for u in spans):
                continue
            spans.append(UrlMatch(start, end, m.end(1), m.group(1).lower(), text[start:end]))
    yield from sorted(spans, key=lambda u: u.start)


def apply_url_rule(text: str, found: list[Finding]) -> list[Finding]:
    """Rewrite the findings so that each URL is replaced whole or not at all, its credentials typed as secrets."""
    urls = list(find_urls(text))
    if not urls:
        return found
    out: list[Finding] = []
    consumed: set[int] = set()
    # one sweep over findings sorted by start (a lock file has thousands of URLs, a log thousands of findings)
    order = sorted(range(len(found)), key=lambda i: found[i].start)
    j = 0
    active: list[int] = []
    for url in urls:
        while j < len(order) and found[order[j]].start < url.end:
            active.append(order[j])
            j += 1
        active = [i for i in active if found[i].end > url.start]
        inside = [(i, found[i]) for i in active]
        creds: list[Finding] = []
        others: list[Finding] = []
        for i, f in inside:
            contained = url.start <= f.start and f.end <= url.end
            if contained:
                consumed.add(i)
            in_cred = any(f.start < ce and cs < f.end for cs, ce, _ in url.credentials)
            if f.entity in SECRET_ENTITIES and in_cred:
                continue  # types the credential below
            if f.entity in _AUTHORITY_ARTEFACTS and url.start <= f.start and f.end <= url.authority_end:
                continue  # "token@host" taken for an e-mail, the host's own address: the host rule decides
            others.append(f)  # personal data or a secret outside the credentials: the URL goes whole
        for cs, ce, default in url.credentials:
            typed = [f for _, f in inside if f.entity in SECRET_ENTITIES and f.start < ce and cs < f.end]
            best = max(typed, key=lambda f: f.priority, default=None)
            value = text[cs:ce]
            if best is None and is_placeholder_secret(value):
                continue
            creds.append(
                Finding(
                    entity=best.entity if best else default,
                    start=cs,
                    end=ce,
                    text=value,
                    detector=best.detector if best else "url_credential",
                    priority=best.priority if best else 75,
                )
            )
        if url.sensitive or others:
            whole = [
                f for f in others if f.start <= url.start and f.end >= url.end and f.entity in SECRET_ENTITIES
            ]
            if whole:  # a detector that types the whole URL (a Slack webhook) names it better than URL does
                out.append(max(whole, key=lambda f: f.priority))
            else:
                out.append(
                    Finding(
                        entity="URL",
                        start=url.start,
                        end=url.end,
                        text=text[url.start : url.end],
                        detector="url",
                        priority=40,
                        key=url.key,
                        contains=tuple(c.entity for c in creds),
                    )
                )
        else:
            out.extend(creds)
    out.extend(f for i, f in enumerate(found) if i not in consumed)
    return out


__all__ = ["SECRET_ENTITIES", "UrlMatch", "apply_url_rule", "find_urls", "host_is_sensitive"]
