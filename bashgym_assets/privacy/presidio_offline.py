"""Presidio, configured to run with no network and no downloaded model.

* ``tldextract`` (used by presidio's e-mail recognizer) would fetch the public suffix list on first use and print a
  traceback when offline; :func:`configure_tldextract_offline` swaps its module-level extractor for one that only
  uses the snapshot bundled in the wheel.
* The NLP engine is a ``SpacyNlpEngine`` on ``spacy.blank("en")``: pattern and checksum recognizers work; the NER
  ones (PERSON, LOCATION) need a real model, used only if the user installed one (:func:`installed_spacy_model`).

``PRESIDIO_GROUPS`` lists the presidio recognizers we use, each with a cheap *pre-filter* regex that is a superset
of what the recognizer can match: the fast redactor runs a recognizer only on windows around pre-filter hits, the
baseline runs the whole ``AnalyzerEngine`` on every field. URLs are not among them: presidio's URL pattern ends a
host at the longest known top-level domain it finds inside it (``svc.corp.internal`` -> ``svc.corp.int``), so
``urls`` parses URLs itself; ``PUBLIC_HOSTS`` and ``is_public_host`` serve it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
from dataclasses import dataclass
from typing import Any


@functools.cache
def configure_tldextract_offline() -> None:
    """Make every ``tldextract.extract`` call use the bundled public-suffix snapshot, never the network."""
    import tldextract
    import tldextract.tldextract as tld_module

    offline = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)
    tld_module.TLD_EXTRACTOR = offline


def installed_spacy_model() -> str | None:
    """The name of an installed spaCy English pipeline, if the user installed one (never downloaded here)."""
    for name in ("en_core_web_lg", "en_core_web_md", "en_core_web_sm", "en_core_web_trf"):
        if importlib.util.find_spec(name) is not None:
            return name
    return None


@functools.cache
def nlp_engine(use_installed_model: bool = False) -> Any:
    """A presidio ``SpacyNlpEngine``: blank English by default, an installed model when asked and present."""
    import spacy
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    configure_tldextract_offline()
    model = installed_spacy_model() if use_installed_model else None
    engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": model or "blank"}])
    # presidio leaves nlp unannotated (None in __init__, a dict once load() ran): mypy infers None
    engine.nlp = {"en": spacy.load(model) if model else spacy.blank("en")}  # type: ignore[assignment]
    return engine


@dataclass
class PresidioGroup:
    """Presidio recognizers sharing one pre-filter (a regex that fires wherever any of them could)."""

    name: str
    prefilter: re.Pattern[str]
    recognizers: list[Any]
    margin: int = 64  # context kept around a hit (an IBAN written in groups runs ~40 chars past its first 8)
    min_digits: int = 0  # a hit with fewer digits cannot be one of these entities
    #: ``plausible(text, start, end)``: the same rule the post-filter applies, so skipping a hit loses nothing
    plausible: Any = None
    #: ``span(text, start, end) -> (start, end)``: the exact stretch the recognizer could match around a hit,
    #: used instead of a margin window (presidio's e-mail regex is slow per character of input)
    span: Any = None


def _r(cls_path: str, **kwargs: Any) -> Any:
    module, _, name = cls_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    return cls(supported_language="en", **kwargs)


_PR = "presidio_analyzer.predefined_recognizers"


#: Hosts whose URLs are public infrastructure, not personal data: kept so traces still show what was fetched.
PUBLIC_HOSTS = frozenset(
    {
        "example.com",
        "example.org",
        "example.net",
        "localhost",
        "github.com",
        "raw.githubusercontent.com",
        "gitlab.com",
        "bitbucket.org",
        "pypi.org",
        "files.pythonhosted.org",
        "npmjs.com",
        "registry.npmjs.org",
        "docs.python.org",
        "python.org",
        "www.python.org",
        "deb.debian.org",
        "security.debian.org",
        "crates.io",
        "docs.rs",
        "pkg.go.dev",
        "proxy.golang.org",
        "huggingface.co",
        "stackoverflow.com",
        "developer.mozilla.org",
        "docs.docker.com",
        "hub.docker.com",
        "registry-1.docker.io",
        "www.w3.org",
        "w3.org",
        "json-schema.org",
        "en.wikipedia.org",
        "docs.github.com",
        "api.github.com",
        "readthedocs.io",
        "readthedocs.org",
    }
)


def is_public_host(host: str) -> bool:
    return host in PUBLIC_HOSTS or any(host.endswith("." + h) for h in PUBLIC_HOSTS)


def standalone(text: str, start: int, end: int) -> bool:
    """Not glued to letters or digits on either side."""
    return not ((start > 0 and text[start - 1].isalnum()) or (end < len(text) and text[end].isalnum()))


_EMAIL_LOCAL_BACK = re.compile(r"[\w.!#$%&'*+/=?^`{|}~\-]{0,256}\Z")
_EMAIL_DOMAIN = re.compile(r"@[\w.\-]*")


def email_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The local part before the '@' and the domain after it: all presidio's e-mail pattern can cover."""
    local = _EMAIL_LOCAL_BACK.search(text, max(0, start - 256), start)
    domain = _EMAIL_DOMAIN.match(text, start)
    assert local is not None and domain is not None  # {0,256}\Z matches anywhere; the hit starts at the '@'
    return local.start(), domain.end()


def crypto_plausible(text: str, start: int, end: int) -> bool:
    return standalone(text, start, end)


_DATE_SHAPE = re.compile(r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|^\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}$")


def phone_plausible(text: str, start: int, end: int) -> bool:
    """Could ``text[start:end]`` be (part of) a phone number we keep? Dates, versions, dotted quads and digits
    glued to an identifier, path, hash or time are not. Shared by the pre-filter and the post-filter."""
    value = text[start:end].strip()
    if not value or _DATE_SHAPE.match(value) or value.count(".") >= 3:
        return False
    before = text[start - 1 : start] if start else ""
    after = text[end : end + 2]
    if before and (before.isalnum() or before in "._/=#:-\\"):
        return False
    nxt = after[:1]
    return not nxt or not (nxt.isalpha() or nxt in "_/" or (nxt in ".:-" and after[1:2].isdigit()))


_PHONE_WORD = re.compile(r"(?i)(?:phone|tel|mobile|cell|call|sms|fax|whatsapp)\W{0,3}$")


def phone_context(text: str, start: int) -> bool:
    """A word like "phone" or "tel:" right before: the only case a bare digit run is kept as a phone number."""
    return _PHONE_WORD.search(text[max(0, start - 12) : start]) is not None


def phone_hit_plausible(text: str, start: int, end: int) -> bool:
    hit = text[start:end]
    return phone_plausible(text, start, end) and (not hit.isdigit() or phone_context(text, start))


@functools.cache
def presidio_groups() -> tuple[PresidioGroup, ...]:
    """The presidio recognizers we use, grouped by pre-filter. Built once (recognizer construction is slow)."""
    configure_tldextract_offline()
    I = re.IGNORECASE  # noqa: E741 - presidio compiles its patterns case-insensitively too
    return (
        PresidioGroup("email", re.compile(r"@[\w-]+\.\w"), [_r(f"{_PR}.EmailRecognizer")], span=email_span),
        # Phone numbers we keep (see redactor.accept_presidio) have 7+ digits written with separators, a leading
        # '+', or after a word like "phone"; bare digit runs in code are ids and sizes and are not sent on.
        PresidioGroup(
            "phone",
            re.compile(
                r"(?:\+\d{1,3}[\s.\-]?)?\(?\d{1,4}\)?(?:[\s.\-/]{1,2}\(?\d{1,5}\)?){1,5}|\+\d{7,15}"
                r"|\d{7,}"
            ),
            [_r(f"{_PR}.PhoneRecognizer")],
            margin=16,
            min_digits=7,
            plausible=phone_hit_plausible,
        ),
        PresidioGroup(
            "credit_card", re.compile(r"\d(?:[ -]?\d){12,18}"), [_r(f"{_PR}.CreditCardRecognizer")]
        ),
        PresidioGroup(
            "iban", re.compile(r"\b[A-Z]{2}\d{2}[ ]?[A-Z0-9]{4}", I), [_r(f"{_PR}.IbanRecognizer")]
        ),
        PresidioGroup(
            "ip",
            re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|(?::[0-9a-f]{0,4}){3,}", I),
            [_r(f"{_PR}.IpRecognizer")],
        ),
        PresidioGroup(
            "crypto",
            re.compile(r"(?:bc1|[13])[a-zA-HJ-NP-Z0-9]{25,59}"),
            [_r(f"{_PR}.CryptoRecognizer")],
            plausible=crypto_plausible,
        ),
        PresidioGroup(
            "mac",
            re.compile(r"[0-9a-f]{2}[:-][0-9a-f]{2}[:-][0-9a-f]{2}[:-]", I),
            [_r(f"{_PR}.MacAddressRecognizer")],
        ),
        PresidioGroup(
            "national_id",
            # every alternative starts with a digit (letters are checked by look-behind) so the scan is fast
            re.compile(
                r"\d{3}[- .]?\d{2,3}[- .]?\d{4}|\d{8}-?[A-Z]\b"
                r"|\d(?:(?<=[A-Z]{2}\d)|(?<=[A-Z]{2}\s\d))\d\s?\d{2}\s?\d{2}\s?[A-D]\b"  # UK NINO
                r"|\d(?<=[A-Z]{5}\d)\d{3}[A-Z]",
                I,
            ),  # IN PAN
            [
                _r(f"{_PR}.UsSsnRecognizer"),
                _r(f"{_PR}.UsItinRecognizer"),
                _r(f"{_PR}.NhsRecognizer"),
                _r(f"{_PR}.UkNinoRecognizer"),
                _r(f"{_PR}.EsNifRecognizer"),
                _r(f"{_PR}.InPanRecognizer"),
            ],
        ),
        # IT fiscal code, also with letters in digit places (omocodia), so no digit to anchor on; kept only when
        # standalone (post-filter), which the pre-filter's boundaries mirror
        PresidioGroup(
            "it_fiscal_code",
            re.compile(
                r"(?<![A-Z0-9])[A-Z]{6}[0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]"
                r"(?![A-Z0-9])",
                I,
            ),
            [_r(f"{_PR}.ItFiscalCodeRecognizer")],
            margin=8,
        ),
    )


def presidio_entities() -> list[str]:
    return sorted({e for g in presidio_groups() for r in g.recognizers for e in r.supported_entities})


def ner_recognizer() -> Any | None:
    """presidio's spaCy NER recognizer when an installed model is present (names, places), else None."""
    if installed_spacy_model() is None:
        return None
    from presidio_analyzer.predefined_recognizers import SpacyRecognizer

    return SpacyRecognizer(supported_language="en", supported_entities=["PERSON", "LOCATION"])


def baseline_analyzer(extra_recognizers: list[Any] | None = None) -> Any:
    """The straightforward approach: one ``AnalyzerEngine`` with every recognizer, run on whole texts."""
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry

    registry = RecognizerRegistry(supported_languages=["en"])
    for group in presidio_groups():
        for rec in group.recognizers:
            registry.add_recognizer(rec)
    for rec in extra_recognizers or []:
        registry.add_recognizer(rec)
    return AnalyzerEngine(nlp_engine=nlp_engine(), registry=registry, supported_languages=["en"])
