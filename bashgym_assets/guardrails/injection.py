"""Prompt-injection markers in what tools return (file contents, web pages, command output).

A tool output is data, but a model reads it as text: a web page or a README can carry instructions aimed at the
agent ("ignore previous instructions", a fake system turn, text hidden in invisible Unicode). :func:`scan_injection`
reports the markers with their spans. Every finding is a ``warn``: the text is not the agent's doing, and a
segment where the agent met an injection and did the task anyway is a good example; what the agent did in response
is judged by the command rules. Markers are phrases, not intent: a security tutorial that quotes an injection is
flagged too (a small penalty, see ``quality.safety``).
"""

from __future__ import annotations

import re

from bashgym_assets.guardrails.models import WARN, Finding, Verdict, clip

MAX_CHARS = 1_000_000

_I = re.IGNORECASE
#: who an injected order addresses ("model" or "agent" alone are too common in ordinary docs to count)
_AI = (
    r"(?:AI(?:\s+(?:assistant|agent|model))?|assistant|LLM|language\s+model|Claude|ChatGPT|GPT-?\d*|Copilot|"
    r"chatbot)"
)
_QUAL = r"(?:(?:all|any|the|your|my|these|those|of|everything|every|prior|previous|above)\s+){0,3}"
PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "injection_ignore_previous",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|skip)\s+"
            + _QUAL
            + r"(?:previous|prior|above|earlier|preceding|foregoing|original|initial|system|developer|existing)\s+"
            r"(?:instructions?|prompts?|directions?|directives?|rules|guidelines|guardrails|messages?|context|"
            r"commands?|orders|constraints)",
            _I,
        ),
        "asks the reader to drop the instructions it was given",
    ),
    (
        "injection_ignore_previous",
        re.compile(
            r"\b(?:forget|ignore|disregard)\s+(?:everything|all)\s+(?:you\s+(?:were|have\s+been)\s+told|"
            r"(?:said\s+)?(?:above|before|so\s+far))",
            _I,
        ),
        "asks the reader to drop what it was told",
    ),
    (
        "injection_ignore_previous",
        re.compile(
            r"\b(?:ignore|disregard|forget)\s+(?:all\s+(?:of\s+)?)?(?:the\s+|everything\s+)?(?:above|previous|prior|"
            r"preceding)\s*(?:[,.;:!]|$|\s+(?:and|then|instead|now)\b)",
            _I,
        ),
        "asks the reader to drop what came before ('disregard the above and ...')",
    ),
    (
        "injection_role_switch",
        re.compile(
            r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:an?\s+|the\s+|in\s+)?(?:unrestricted|unfiltered|uncensored|"
            r"jailbroken|evil|rogue|DAN\b|developer\s+mode|god\s+mode|admin(?:istrator)?\s+mode|"
            r"(?:an?\s+)?(?:different|new)\s+(?:AI|assistant|model|agent)|bound\s+by|restricted|an?\s+AI\b|"
            r"acting\s+as|going\s+to\s+act)",
            _I,
        ),
        "tries to give the reader a new identity or lift its limits",
    ),
    (
        "injection_role_switch",
        re.compile(
            r"\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|shall|should)\b|\bnew\s+(?:system\s+)?instructions?\s*:|"
            r"\b(?:updated|revised|real|actual)\s+instructions?\s*:|\bpretend\s+(?:to\s+be|you\s+are)\b|"
            r"\bact\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|DAN)\b",
            _I,
        ),
        "announces new instructions for the reader",
    ),
    (
        "injection_fake_system",
        re.compile(
            r"<\|im_start\|>|<\|im_end\|>|<\|system\|>|<\|(?:start|end)_header_id\|>|<\|eot_id\|>|\[/?INST\]|"
            r"<</?SYS>>|<\|endoftext\|>|</?system[-_]prompt>|\bsystem\s+prompt\s*:|\n\n(?:Human|Assistant):\s|"
            r"</?(?:tool_result|tool_results|tool_output|tool_response|tool_use|function_results?|function_calls?|"
            r"antml:[a-z_]+)>",
            _I,
        ),
        "chat-template control tokens, a fake system/turn marker or a fake end of the tool's result",
    ),
    (
        "injection_fake_system",
        re.compile(
            r"(?:\A|\n)(?:Human|Assistant):[ \t]+\S|(?:\A|\n)[ \t]*(?:SYSTEM|System)[ \t]*:[ \t]*(?:you\s+(?:must|should|"
            r"will|are\s+now)|ignore|disregard|run|execute|do\s+not)\b"
        ),
        "a line posing as a turn of the conversation (Assistant:, SYSTEM: you must ...)",
    ),
    (
        "injection_directive",
        re.compile(
            r"\b(?-i:IMPORTANT|NOTE|ATTENTION|URGENT|WARNING|CRITICAL|SYSTEM|Important|Note|Attention)\s*[:!-]+\s*"
            r"(?:the\s+|all\s+|any\s+)?"
            + _AI
            + r"s?\b\s+(?:must|should|shall|needs?\s+to|is\s+(?:required|instructed)|"
            r"has\s+to|will)\b",
            _I,
        ),
        "an order addressed to the AI reading the text",
    ),
    (
        "injection_directive",
        re.compile(
            r"\b(?:instructions?|message|note|notice)\s+(?:for|to)\s+(?:the\s+|any\s+|all\s+)?"
            + _AI
            + r"s?\b|"
            r"\b" + _AI + r"s?\s+(?:reading|processing|parsing|summari[sz]ing|analy[sz]ing)\s+this\b",
            _I,
        ),
        "text addressed to the AI reading it",
    ),
    (
        "injection_directive",
        re.compile(r"<!--\s*(?:" + _AI + r"|agent|assistant|LLM)s?\b\s*[:,-]", _I),
        "an HTML comment (invisible when rendered) addressed to the AI",
    ),
    (
        "injection_conceal",
        re.compile(
            r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|reveal\s+(?:this\s+)?to|show|alert|"
            r"notify|warn)\s+(?:this\s+to\s+)?(?:the\s+)?user\b|\bwithout\s+(?:telling|informing|asking|notifying)\s+"
            r"(?:the\s+)?user\b",
            _I,
        ),
        "asks the reader to hide something from the user",
    ),
    (
        "injection_exfil_request",
        re.compile(
            r"\b(?:send|post|upload|exfiltrate|forward|leak|email|paste)\s+(?:the\s+|your\s+|all\s+|any\s+)?"
            r"(?:api[\s_-]?keys?|credentials|secrets?|tokens?|passwords?|ssh\s+keys?|private\s+keys?|"
            r"environment\s+variables|env\s+vars?|\.env(?:\s+file)?|cookies)\s+to\b",
            _I,
        ),
        "asks for secrets to be sent somewhere",
    ),
)
_VERBS = ("ignore", "disregard", "forget", "override", "bypass", "skip")
_AI_WORDS = (
    "ai ",
    "ais ",
    "ai:",
    "assistant",
    "llm",
    "language model",
    "claude",
    "chatgpt",
    "gpt",
    "copilot",
    "chatbot",
)
#: Cheap prefilters, one per pattern in PATTERNS: every group needs one of its words in the (ASCII-lowered) text,
#: or the regex is not run. Most tool outputs contain none, so scanning costs a few substring searches.
NEEDLES: tuple[tuple[tuple[str, ...], ...], ...] = (
    (
        _VERBS,
        (
            "previous",
            "prior",
            "above",
            "earlier",
            "preceding",
            "foregoing",
            "original",
            "initial",
            "system",
            "developer",
            "existing",
        ),
    ),
    (("forget", "ignore", "disregard"), ("everything", "all")),
    (("forget", "ignore", "disregard"), ("above", "previous", "prior", "preceding")),
    (("you are now", "you are no longer"),),
    (("from now on", "instruction", "pretend", "act as"),),
    (
        (
            "<|",
            "[inst]",
            "[/inst]",
            "<<sys>>",
            "<</sys>>",
            "system prompt",
            "system-prompt",
            "system_prompt",
            "\n\nhuman:",
            "\n\nassistant:",
            "tool_",
            "function_result",
            "function_call",
            "antml:",
        ),
    ),
    (("human:", "assistant:", "system"),),
    (_AI_WORDS, ("important", "note", "attention", "urgent", "warning", "critical", "system")),
    (_AI_WORDS,),
    (("<!--",),),
    (("user",), ("tell", "inform", "mention", "reveal", "show", "alert", "notify", "warn", "without")),
    (
        ("send", "post", "upload", "exfiltrate", "forward", "leak", "email", "paste"),
        (
            "key",
            "credential",
            "secret",
            "token",
            "passw",
            ".env",
            "environment variable",
            "env var",
            "cookie",
        ),
    ),
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

# Invisible carriers: Unicode tag characters spell hidden ASCII; long zero-width runs encode bits; bidi controls
# reorder what a person sees against what a model reads.
TAGS = re.compile("[\U000e0000-\U000e007f]+")
ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e]{3,}")
ZW_ANY = re.compile("[\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u00ad]")
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]+")

RULE_IDS = (
    "injection_ignore_previous",
    "injection_role_switch",
    "injection_fake_system",
    "injection_directive",
    "injection_conceal",
    "injection_exfil_request",
    "injection_unicode_tags",
    "injection_zero_width",
    "injection_bidi_control",
)


def _phrases(text: str, findings: list[Finding]) -> None:
    """The phrase rules, on ``text`` with any zero-width characters taken out (``i\u200dg\u200dn\u200do\u200dr\u200de
    previous instructions`` reads as the phrase to a model), spans mapped back onto ``text``."""
    index: list[int] | None = None
    if not text.isascii() and ZW_ANY.search(text):
        index = [i for i, ch in enumerate(text) if not ZW_ANY.match(ch)]
        plain = "".join(text[i] for i in index)
    else:
        plain = text
    low = plain.translate(_ASCII_LOWER)
    present: dict[str, bool] = {}

    def has(needle: str) -> bool:
        if needle not in present:
            present[needle] = needle in low
        return present[needle]

    for (rule, pattern, why), groups in zip(PATTERNS, NEEDLES, strict=True):
        if not all(any(has(n) for n in group) for group in groups):
            continue
        for m in pattern.finditer(plain):
            start, end = m.span()
            if index is not None:
                start, end = index[start], (index[end - 1] + 1 if end > start else index[start])
            findings.append(
                Finding(
                    rule=rule,
                    severity=WARN,
                    start=start,
                    end=end,
                    match=clip(text[start:end]),
                    explanation=why,
                )
            )


def scan_injection(text: str | None) -> Verdict:
    """Injection markers in one tool output (all ``warn``), in order of position. Never raises."""
    text = text or ""
    note = None
    if len(text) > MAX_CHARS:
        text, note = text[:MAX_CHARS], f"only the first {MAX_CHARS} characters were scanned"
    findings: list[Finding] = []
    try:
        _phrases(text, findings)
        if text.isascii():
            return _verdict(findings, note)
        for m in TAGS.finditer(text):
            hidden = "".join(chr(ord(ch) - 0xE0000) for ch in m.group() if 0x20 <= ord(ch) - 0xE0000 < 0x7F)
            findings.append(
                Finding(
                    rule="injection_unicode_tags",
                    severity=WARN,
                    start=m.start(),
                    end=m.end(),
                    match=clip(m.group(), 60),
                    explanation=f"{len(m.group())} invisible Unicode tag characters spelling "
                    f"{hidden[:160]!r}",
                )
            )
        for m in ZERO_WIDTH.finditer(text):
            findings.append(
                Finding(
                    rule="injection_zero_width",
                    severity=WARN,
                    start=m.start(),
                    end=m.end(),
                    match=clip(m.group(), 60),
                    explanation=f"a run of {len(m.group())} zero-width characters (hidden data)",
                )
            )
        for m in BIDI.finditer(text):
            findings.append(
                Finding(
                    rule="injection_bidi_control",
                    severity=WARN,
                    start=m.start(),
                    end=m.end(),
                    match=clip(text[max(0, m.start() - 20) : m.end() + 20]),
                    explanation="bidirectional override characters: the text displays in another "
                    "order than it reads",
                )
            )
    except Exception as exc:  # noqa: BLE001 - never take a pipeline down
        note = f"scan failed: {type(exc).__name__}"
    return _verdict(findings, note)


def _verdict(findings: list[Finding], note: str | None) -> Verdict:
    findings.sort(key=lambda f: (f.start, f.rule))
    dedup: list[Finding] = []
    for f in findings:
        if dedup and dedup[-1].rule == f.rule and f.start < dedup[-1].end:
            continue
        dedup.append(f)
    return Verdict(findings=dedup, note=note)
