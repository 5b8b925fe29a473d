"""Redaction of whole sessions: typed, session-consistent placeholders that keep a trace readable.

Two ways to find spans, same detectors, same post-filters, so their results can be compared:

* ``fast`` (default): our secret detectors run on every text; each presidio recognizer runs only on small windows
  around hits of a cheap pre-filter regex (``presidio_offline.PRESIDIO_GROUPS``). Most of a trace (code, build
  output) never reaches presidio.
* ``baseline``: presidio's ``AnalyzerEngine`` on every text field with all recognizers (ours registered in it too).

After detection, :func:`accept_presidio` drops the look-alikes that would wreck code (version strings taken for IP
addresses, ``git@github.com`` remotes) and the decoys that must survive (documentation and loopback addresses,
reserved example domains, fictional phone numbers, test cards: ``decoys``), :func:`urls.apply_url_rule` makes each
URL redacted whole or not at all with its credentials typed as secrets, overlapping spans are merged (outer span
wins) and each span becomes ``<TYPE_n>``, the same ``n`` for the same value everywhere in the session.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bashgym_assets.privacy.decoys import (
    is_decoy_email,
    is_decoy_ip,
    is_fictional_phone,
    is_placeholder_secret,
    is_test_card,
)
from bashgym_assets.privacy.detectors import (
    GENERIC_USERS,
    HOME_DIR_RE,
    PLACEHOLDER_RE,
    SECRET_PATTERNS,
    Finding,
    SecretPattern,
    username_patterns,
    usernames_in,
)
from bashgym_assets.privacy.presidio_offline import (
    baseline_analyzer,
    ner_recognizer,
    phone_context,
    phone_plausible,
    presidio_groups,
    standalone,
)
from bashgym_assets.privacy.urls import SECRET_ENTITIES, apply_url_rule
from bashgym_assets.sessions import Session

#: Placeholder label per entity type (``<EMAIL_1>`` rather than ``<EMAIL_ADDRESS_1>``).
LABELS = {
    "EMAIL_ADDRESS": "EMAIL",
    "PHONE_NUMBER": "PHONE",
    "IP_ADDRESS": "IP",
    "IBAN_CODE": "IBAN",
    "CRYPTO": "CRYPTO_WALLET",
    "US_SSN": "SSN",
    "US_ITIN": "ITIN",
    "UK_NHS": "NHS",
    "UK_NINO": "NINO",
    "ES_NIF": "NIF",
    "IT_FISCAL_CODE": "FISCAL_CODE",
    "IN_PAN": "PAN",
    "MAC_ADDRESS": "MAC",
    "CREDIT_CARD": "CREDIT_CARD",
    "URL": "URL",
    "PERSON": "PERSON",
    "LOCATION": "LOCATION",
}

#: Minimum presidio score per entity (presidio's own scores; weak-only patterns stay below these).
MIN_SCORE = {
    "US_SSN": 0.5,
    "US_ITIN": 0.5,
    "PHONE_NUMBER": 0.4,
    "URL": 0.5,
    "UK_NINO": 0.5,
    "IN_PAN": 0.5,
    "PERSON": 0.85,
    "LOCATION": 0.85,
}
DEFAULT_MIN_SCORE = 0.3

_VERSION_BEFORE = re.compile(r"(?:[vV]|version[ :=]*|==|>=|<=|~=|!=|[A-Za-z]-|python|node|go)$")
_TOKEN_RE = re.compile(r"\S+")


def _label(entity: str) -> str:
    return LABELS.get(entity, entity)


def accept_presidio(entity: str, value: str, score: float, text: str, start: int, end: int) -> bool:
    """Keep a presidio result only if it is personal data and not a code look-alike."""
    if score < MIN_SCORE.get(entity, DEFAULT_MIN_SCORE):
        return False
    before = text[max(0, start - 12) : start]
    after = text[end : end + 2]
    if entity == "URL":
        return False  # URLs are ours (``urls``): presidio's pattern cuts hosts at a known TLD
    if entity == "IP_ADDRESS":
        if _VERSION_BEFORE.search(before) or re.match(r"^\.?\d", after) or re.match(r"^[A-Za-z]", after[:1]):
            return False
        if (
            before[-1:].isalnum()
            or before.endswith(".")
            or (before.endswith("/") and not before.endswith("//"))
        ):
            return False  # part of a longer token; after one slash a version (Chrome/120.0.0.0), not a host
        try:
            ip = ipaddress.ip_network(value.split("%")[0], strict=False).network_address
        except ValueError:
            return False
        if is_decoy_ip(value):
            return False  # documentation, loopback, unspecified, multicast, netmask: names no machine
        return not (ip.version == 6 and value.split("/")[0].count(":") < 3)
    if entity in ("CRYPTO", "IT_FISCAL_CODE"):
        return standalone(text, start, end)  # inside a longer token it is an identifier or a hash, not an id
    if entity == "EMAIL_ADDRESS":
        local, _, domain = value.partition("@")
        # git@github.com:owner/repo.git is an ssh remote, not a person
        return not (local == "git" or is_decoy_email(value))
    if entity == "CREDIT_CARD":
        return not is_test_card(value)
    if entity == "PHONE_NUMBER":
        if is_fictional_phone(value):
            return False  # 555-01xx, Ofcom drama numbers: reserved for fiction and examples
        digits = re.sub(r"\D", "", value)
        if not phone_plausible(text, start, end):
            return False  # a date, a version, digits glued to an identifier, path, hash or time
        if value.isdigit() and not phone_context(text, start):
            return False  # a bare digit run in code is an id, size or timestamp far more often than a phone
        return len(digits) >= 7
    if entity in ("UK_NHS",):
        return not value.isdigit()  # a bare 10-digit run is a timestamp; NHS numbers are written 3-3-4
    return True


def drop_placeholder_secrets(found: list[Finding]) -> list[Finding]:
    """Drop secret findings whose value is a placeholder or a documented example (``YOUR_API_KEY``, ``sk-XXXX``,
    AKIAIOSFODNN7EXAMPLE, jwt.io's token), and what weaker detectors found inside them (the parts of that token):
    judged on the value alone, so a real key next to the word "example" is still redacted."""
    decoys = [f for f in found if f.entity in SECRET_ENTITIES and is_placeholder_secret(f.text)]
    if not decoys:
        return found
    return [
        f
        for f in found
        if not any(d.start <= f.start and f.end <= d.end and f.priority <= d.priority for d in decoys)
    ]


class PresidioPatternAdapter:
    """Our regex detectors as one presidio ``EntityRecognizer`` (for the baseline ``AnalyzerEngine``)."""

    @staticmethod
    def build(patterns: Sequence[SecretPattern]) -> Any:
        from presidio_analyzer import EntityRecognizer, RecognizerResult

        class _Secrets(EntityRecognizer):
            def load(self) -> None:  # noqa: D401 - nothing to load
                pass

            def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list[Any]:
                out = []
                for pat in patterns:
                    for f in pat.find(text):
                        out.append(
                            RecognizerResult(
                                f.entity,
                                f.start,
                                f.end,
                                1.0,
                                recognition_metadata={
                                    "detector": f.detector,
                                    "priority": f.priority,
                                    "recognizer_name": "bashgym_secrets",
                                },
                            )
                        )
                return out

        entities = sorted({p.entity for p in patterns})
        return _Secrets(supported_entities=entities, supported_language="en", name="bashgym_secrets")


def presidio_priority(entity: str) -> int:
    """Checksum-validated ids outrank generic secret shapes; URLs rank below specific keys inside them."""
    return 40 if entity == "URL" else 80


def resolve_overlaps(findings: Iterable[Finding]) -> list[Finding]:
    """Non-overlapping spans: the earliest, longest span wins (on a tie the more specific detector, so a Stripe key
    is ``<STRIPE_KEY_1>`` rather than ``<SECRET_1>``); a partial overlap is merged into it."""
    ordered = sorted(findings, key=lambda f: (f.start, -(f.end - f.start), -f.priority, f.entity))
    out: list[Finding] = []
    for f in ordered:
        if out and f.start < out[-1].end:
            last = out[-1]
            if f.end > last.end:
                out[-1] = last.model_copy(update={"end": f.end})
            continue
        out.append(f)
    return out


def tokens_touched(text: str, findings: Sequence[Finding]) -> tuple[int, int]:
    """(tokens overlapping a finding, all whitespace-separated tokens): how much of a text redaction changes."""
    ordered = sorted(findings, key=lambda f: f.start)
    touched = total = j = 0
    for m in _TOKEN_RE.finditer(text):
        s, e = m.span()
        total += 1
        while j < len(ordered) and ordered[j].end <= s:
            j += 1
        if j < len(ordered) and ordered[j].start < e:
            touched += 1
    return touched, total


class PlaceholderMap(BaseModel):
    """``(label, value) -> <LABEL_n>`` for one session, so one address is ``<EMAIL_1>`` everywhere.

    A value two detectors name differently (a token after ``export API_TOKEN=`` and after ``Bearer``) keeps the
    placeholder it got first: one secret is one placeholder in the whole session."""

    mapping: dict[str, str] = Field(default_factory=dict)
    counters: dict[str, int] = Field(default_factory=dict)
    by_value: dict[str, str] = Field(default_factory=dict)

    def placeholder(self, entity: str, value: str) -> str:
        label = _label(entity)
        key = f"{label}\x00{value}"
        if key not in self.mapping:
            if value in self.by_value:
                self.mapping[key] = self.by_value[value]
                return self.mapping[key]
            n = self.counters.get(label, 0) + 1
            self.counters[label] = n
            self.mapping[key] = f"<{label}_{n}>"
            self.by_value[value] = self.mapping[key]
        return self.mapping[key]


class FieldFinding(BaseModel):
    """A detection in one field of one session (the value itself is never stored, only a masked preview)."""

    session_id: str
    field: str
    entity: str
    detector: str
    preview: str


class SessionRedaction(BaseModel):
    """What redaction did to one session: counts per entity type and per field, never the values. A credential
    inside a URL replaced whole counts under its own type as well as the URL's."""

    session_id: str
    by_entity: dict[str, int] = Field(default_factory=dict)
    fields_changed: int = 0
    fields_scanned: int = 0
    bytes_scanned: int = 0
    distinct_values: int = 0


def map_strings(value: Any, fn: Callable[[str], Any]) -> Any:
    """``fn`` applied to every string in nested lists and dicts (keys are kept as they are)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    return value


def _distinctive(value: str) -> bool:
    """A secret value worth replacing wherever it recurs: long, and not a word (``postgres`` as a password would
    otherwise take every ``sudo -u postgres`` with it)."""
    return len(value) >= 8 and (
        len(value) >= 16 or (bool(re.search(r"\d", value)) and bool(re.search(r"[A-Za-z]", value)))
    )


def mask(value: str) -> str:
    return value[:3] + "..." + f"({len(value)} chars)" if len(value) > 6 else "***"


class Redactor:
    """Finds and replaces secrets and personal data. ``disabled`` names detectors to switch off (tests, debug)."""

    def __init__(
        self,
        mode: Literal["fast", "baseline"] = "fast",
        disabled: Iterable[str] = (),
        use_installed_ner: bool = False,
    ):
        self.mode = mode
        self.disabled = frozenset(disabled)
        self.patterns = [p for p in SECRET_PATTERNS if p.name not in self.disabled]
        self.groups = [g for g in presidio_groups() if g.name not in self.disabled]
        self.ner = ner_recognizer() if use_installed_ner else None
        self._analyzer = None
        # One regex over all literal triggers (and one over the lowercased text for case-insensitive ones): a
        # field is scanned once to learn which detectors can match at all, instead of once per detector.
        self._always = [p for p in self.patterns if not p.triggers]
        self._by_trigger: dict[tuple[bool, str], list[SecretPattern]] = {}
        for p in self.patterns:
            for t in p.triggers:
                self._by_trigger.setdefault((p.ci_triggers, t), []).append(p)
        # The scan finds one trigger per position, the longest ("key=" hides "key"): a trigger also stands for
        # every trigger inside it, or ``api_key="..."`` would never reach the detectors keyed on "key".
        keys = list(self._by_trigger)
        self._by_trigger = {
            (ci, t): list(
                {
                    p.name: p for (c2, u) in keys if c2 == ci and u in t for p in self._by_trigger[(c2, u)]
                }.values()
            )
            for ci, t in keys
        }
        cs = sorted({t for ci, t in self._by_trigger if not ci}, key=len, reverse=True)
        ci = sorted({t for c, t in self._by_trigger if c}, key=len, reverse=True)
        self._cs_re = re.compile("|".join(map(re.escape, cs))) if cs else None
        self._ci_re = re.compile("|".join(map(re.escape, ci))) if ci else None
        # any presidio pre-filter hit at all (one scan) before the per-group scans
        self._any_group = (
            re.compile(
                "|".join(
                    f"(?{'i' if g.prefilter.flags & re.IGNORECASE else ''}:{g.prefilter.pattern})"
                    for g in self.groups
                )
            )
            if self.groups
            else None
        )
        if mode == "baseline":
            self._analyzer = baseline_analyzer([PresidioPatternAdapter.build(self.patterns)])
            self._entities = sorted(
                {e for g in self.groups for r in g.recognizers for e in r.supported_entities}
                | {p.entity for p in self.patterns}
            )

    # ---- detection ------------------------------------------------------------------------------------
    def find(self, text: str, extra: Sequence[SecretPattern] = ()) -> list[Finding]:
        """All findings in ``text`` after post-filters and overlap resolution, ordered by position."""
        if not text:
            return []
        found: list[Finding] = []
        if self._analyzer is not None:  # the baseline mode
            for r in self._analyzer.analyze(text=text, language="en", entities=self._entities):
                meta = r.recognition_metadata or {}
                if meta.get("recognizer_name") == "bashgym_secrets":
                    found.append(
                        Finding(
                            entity=r.entity_type,
                            start=r.start,
                            end=r.end,
                            text=text[r.start : r.end],
                            detector=meta.get("detector", "secret"),
                            priority=meta.get("priority", 0),
                        )
                    )
                    continue
                s, e = _trim(text, r.start, r.end)
                if accept_presidio(r.entity_type, text[s:e], r.score, text, s, e):
                    found.append(
                        Finding(
                            entity=r.entity_type,
                            start=s,
                            end=e,
                            text=text[s:e],
                            detector=meta.get("recognizer_name", "presidio"),
                            score=r.score,
                            priority=presidio_priority(r.entity_type),
                        )
                    )
        else:
            for pat in self._candidate_patterns(text):
                found.extend(pat.find(text))
            # short fields (most of them) rarely hit any pre-filter: one combined scan skips them cheaply; on
            # long ones nearly every group hits, so the extra scan would only cost
            if len(text) > 2000 or (self._any_group is not None and self._any_group.search(text)):
                found.extend(self._presidio_windows(text))
        lower = ""
        for pat in extra:
            if pat.name in self.disabled:
                continue
            if pat.ci_triggers and not lower:
                lower = text.lower()
            if pat.triggered(text, lower):
                found.extend(pat.find(text))
        if self.ner is not None:
            for r in self.ner.analyze(text, ["PERSON", "LOCATION"], self.ner_artifacts(text)):
                if accept_presidio(r.entity_type, text[r.start : r.end], r.score, text, r.start, r.end):
                    found.append(
                        Finding(
                            entity=r.entity_type,
                            start=r.start,
                            end=r.end,
                            text=text[r.start : r.end],
                            detector="spacy_ner",
                            score=r.score,
                        )
                    )
        found = drop_placeholder_secrets(found)
        if "url" not in self.disabled:
            found = apply_url_rule(text, found)
        if found and "<" in text:
            holders = [m.span() for m in PLACEHOLDER_RE.finditer(text)]
            if holders:
                found = [f for f in found if not any(s < f.end and f.start < e for s, e in holders)]
        return resolve_overlaps(found)

    def _candidate_patterns(self, text: str) -> list[SecretPattern]:
        """The detectors whose literal trigger occurs in ``text`` (plus those without one), in priority order."""
        hit: dict[str, SecretPattern] = {p.name: p for p in self._always}
        if self._cs_re is not None:
            for t in set(self._cs_re.findall(text)):
                hit.update((p.name, p) for p in self._by_trigger.get((False, t), ()))
        if self._ci_re is not None:
            for t in set(self._ci_re.findall(text.lower())):
                hit.update((p.name, p) for p in self._by_trigger.get((True, t), ()))
        return list(hit.values())

    def ner_artifacts(self, text: str) -> Any:
        from bashgym_assets.privacy.presidio_offline import nlp_engine

        return nlp_engine(True).process_text(text, "en")

    def _presidio_windows(self, text: str) -> list[Finding]:
        """Run each presidio recognizer only on windows around its pre-filter's hits."""
        out: list[Finding] = []
        n = len(text)
        for group in self.groups:
            windows: list[list[int]] = []
            for m in group.prefilter.finditer(text):
                if group.min_digits and sum(map(str.isdigit, m.group())) < group.min_digits:
                    continue
                if group.plausible is not None and not group.plausible(text, m.start(), m.end()):
                    continue
                if group.span is not None:
                    ws, we = group.span(text, m.start(), m.end())
                    ws, we = max(0, ws - 1), min(n, we + 1)  # one character of context for \b
                else:
                    ws, we = _expand(
                        text, m.start() - group.margin, m.end() + group.margin, n, cap=group.margin * 4
                    )
                if windows and ws <= windows[-1][1]:
                    windows[-1][1] = max(windows[-1][1], we)
                else:
                    windows.append([ws, we])
            for ws, we in windows:
                chunk = text[ws:we]
                for rec in group.recognizers:
                    for r in rec.analyze(chunk, rec.supported_entities, None):
                        s, e = _trim(text, r.start + ws, r.end + ws)
                        if accept_presidio(r.entity_type, text[s:e], r.score, text, s, e):
                            out.append(
                                Finding(
                                    entity=r.entity_type,
                                    start=s,
                                    end=e,
                                    text=text[s:e],
                                    detector=type(rec).__name__,
                                    score=r.score,
                                    priority=presidio_priority(r.entity_type),
                                )
                            )
        return out

    # ---- replacement ----------------------------------------------------------------------------------
    def redact_text(
        self, text: str, placeholders: PlaceholderMap, extra: Sequence[SecretPattern] = ()
    ) -> tuple[str, list[Finding]]:
        findings = self.find(text, extra)
        if not findings:
            return text, []
        parts: list[str] = []
        pos = 0
        for f in findings:
            parts.append(text[pos : f.start])
            parts.append(placeholders.placeholder(f.entity, f.key or text[f.start : f.end]))
            pos = f.end
        parts.append(text[pos:])
        return "".join(parts), findings

    def _redact_json_text(
        self, text: str, placeholders: PlaceholderMap, extra: Sequence[SecretPattern]
    ) -> tuple[str, list[Finding]]:
        """Tool inputs are JSON text: redact them as text, but never hand back broken JSON.

        Then the string values once more, decoded: in the text a value at the start of a line of a written file
        sits against its escape (``\\n4539...``, ``\\nAKIA...``), where no word boundary is seen.
        """
        new: str | None  # None once the text's redaction turns out to break the JSON
        new, findings = self.redact_text(text, placeholders, extra)
        if not findings and "\\" not in text:
            return new, findings
        try:
            json.loads(text)
        except ValueError:
            return new, findings
        try:
            parsed = json.loads(new)
        except ValueError:  # the text's redaction broke the JSON: redact the original's string values instead
            parsed, new, findings = json.loads(text), None, []
        if new is not None and "\\" not in new:
            return new, findings
        leaf_findings: list[Finding] = []

        def leaf(value: str) -> str:
            red, fs = self.redact_text(value, placeholders, extra)
            leaf_findings.extend(fs)
            return red

        walked = map_strings(parsed, leaf)
        if new is not None and not leaf_findings:
            return new, findings
        return json.dumps(walked, ensure_ascii=False), findings + leaf_findings

    def session_patterns(self, session: Session) -> list[SecretPattern]:
        """Detectors for this session's user names (from paths in the session and the local account)."""
        texts = [session.cwd, session.repo_path, session.source_path]
        texts += [s.cwd for s in session.steps]
        texts += [s.command for s in session.steps]
        names = usernames_in(*texts)
        local = Path.home().name
        if local and local.lower() not in GENERIC_USERS and len(local) >= 3:
            names.add(local)
        return username_patterns(names)

    def redact_session(self, session: Session) -> tuple[Session, SessionRedaction]:
        """Every text field of the session redacted with one placeholder map.

        A secret found once is a secret everywhere: the secret values the detectors found are then replaced where
        no detector saw them (a password from ``DB_PASSWORD=`` echoed bare in a later output, a short token after
        ``Bearer``), with the same placeholder: one literal scan of the redacted fields, not a second redaction.
        """
        placeholders = PlaceholderMap()
        redacted, report = self._redact_fields(session, placeholders, self.session_patterns(session))
        secret_labels = {_label(e) for e in SECRET_ENTITIES}
        known = sorted(
            {
                v
                for v, holder in placeholders.by_value.items()
                if holder[1:].rsplit("_", 1)[0] in secret_labels and _distinctive(v)
            },
            key=len,
            reverse=True,
        )
        if not known:
            return redacted, report
        pattern = re.compile("(?<![A-Za-z0-9_])(?:" + "|".join(map(re.escape, known)) + ")(?![A-Za-z0-9_])")
        counts = Counter(report.by_entity)

        def again(value: str) -> str:
            new, n = pattern.subn(lambda m: placeholders.by_value[m.group(0)], value)
            if n:
                counts.update({"SECRET": n})
            return new

        data = redacted.model_dump()
        for key in ("source_path", "repo_path", "repo_remote", "cwd", "git_branch", "extra"):
            data[key] = map_strings(data[key], again)
        for prompt in data["prompts"]:
            prompt["text"] = again(prompt["text"])
        for step in data["steps"]:
            for key in ("input", "command", "output", "cwd"):
                step[key] = map_strings(step[key], again)
        if counts == Counter(report.by_entity):
            return redacted, report
        report.by_entity = dict(counts)
        return Session.model_validate(data), report

    def _redact_fields(
        self, session: Session, placeholders: PlaceholderMap, extra: Sequence[SecretPattern]
    ) -> tuple[Session, SessionRedaction]:
        report = SessionRedaction(session_id=session.session_id)
        counts: Counter[str] = Counter()

        def red(value: str | None, json_text: bool = False) -> str | None:
            if not value:
                return value
            report.fields_scanned += 1
            report.bytes_scanned += len(value.encode("utf-8", "surrogatepass"))
            new, fs = (self._redact_json_text if json_text else self.redact_text)(value, placeholders, extra)
            if fs:
                report.fields_changed += 1
                counts.update(_label(e) for f in fs for e in (f.entity, *f.contains))
            return new

        data = session.model_dump()
        for key in ("source_path", "repo_path", "repo_remote", "cwd", "git_branch"):
            data[key] = red(data[key])
        for prompt in data["prompts"]:
            prompt["text"] = red(prompt["text"]) or ""
        for step in data["steps"]:
            step["input"] = red(step["input"], json_text=True) or ""
            step["command"] = red(step["command"])
            step["output"] = red(step["output"]) or ""
            step["cwd"] = red(step["cwd"])

        data["extra"] = map_strings(
            data["extra"], red
        )  # adapter extras (conversation summaries) are text too
        report.by_entity = dict(counts)
        report.distinct_values = len(placeholders.mapping)
        return Session.model_validate(data), report

    def scan_session(self, session: Session) -> list[FieldFinding]:
        """What the detectors still find in a (redacted) session: the blocking check's evidence."""
        extra = self.session_patterns(session)
        out: list[FieldFinding] = []

        def scan(field: str, value: str | None) -> None:
            for f in self.find(value or "", extra):
                out.append(
                    FieldFinding(
                        session_id=session.session_id,
                        field=field,
                        entity=f.entity,
                        detector=f.detector,
                        preview=mask(f.text),
                    )
                )

        for key in ("source_path", "repo_path", "repo_remote", "cwd", "git_branch"):
            scan(key, getattr(session, key))
        for p in session.prompts:
            scan(f"prompts[{p.index}].text", p.text)
        for s in session.steps:
            for key in ("input", "command", "output", "cwd"):
                scan(f"steps[{s.index}].{key}", getattr(s, key))

        def scan_any(field: str, value: Any) -> None:
            if isinstance(value, str):
                scan(field, value)
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    scan_any(f"{field}[{i}]", v)
            elif isinstance(value, dict):
                for k, v in value.items():
                    scan_any(f"{field}.{k}", v)

        scan_any("extra", session.extra)
        return out


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop the quotes presidio's "quoted URL" patterns include, so the placeholder keeps the quotes."""
    while start < end and text[start] in "\"'\\":
        start += 1
    while end > start and text[end - 1] in "\"'\\":
        end -= 1
    return start, end


_NON_SPACE_TAIL = re.compile(r"\S*\Z")
_NON_SPACE_HEAD = re.compile(r"\S*")


def _expand(text: str, start: int, end: int, n: int, cap: int = 256) -> tuple[int, int]:
    """Widen a window to whitespace on both sides (so no token is cut in half), at most ``cap`` further."""
    start = max(0, start)
    end = min(n, end)
    lo = max(0, start - cap)
    s, e = start, end
    if start > lo:
        tail = _NON_SPACE_TAIL.search(text, lo, start)
        assert tail is not None  # \S*\Z matches, if only the empty string
        s = tail.start()
    if end < n:
        head = _NON_SPACE_HEAD.match(text, end, min(n, end + cap))
        assert head is not None  # \S* matches, if only the empty string
        e = head.end()
    return s, e


__all__ = [
    "HOME_DIR_RE",
    "FieldFinding",
    "PlaceholderMap",
    "Redactor",
    "SessionRedaction",
    "accept_presidio",
    "resolve_overlaps",
    "tokens_touched",
]
