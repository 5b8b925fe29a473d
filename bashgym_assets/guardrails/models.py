"""What a guardrail check returns: findings (rule, severity, where, why) gathered in a verdict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Severity = Literal["block", "warn"]
BLOCK: Severity = "block"
WARN: Severity = "warn"
#: how a reply that ``rollout.operators.GuardedOperator`` refused starts (a shell comment: it runs nothing)
REFUSAL_PREFIX = "# refused:"


class Finding(BaseModel):
    """One rule that fired: which, how bad, the span of the checked text it points at, and why."""

    rule: str = Field(description="stable rule id, e.g. rm_root, remote_code_exec, injection_ignore_previous")
    severity: Severity
    start: int = Field(description="offset of the matched span in the checked text")
    end: int
    match: str = Field(description="the matched text (cut to 200 characters; invisible characters escaped)")
    explanation: str

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end


class Verdict(BaseModel):
    """All findings on one text. ``parsed``: the shell parser understood the whole command (False: it was cut
    short, unbalanced or otherwise odd, and a token scan backed the parse up)."""

    findings: list[Finding] = Field(default_factory=list)
    parsed: bool = True
    note: str | None = None

    @property
    def blocked(self) -> bool:
        return any(f.severity == BLOCK for f in self.findings)

    @property
    def warned(self) -> bool:
        return any(f.severity == WARN for f in self.findings)

    @property
    def severity(self) -> str:
        """``block``, ``warn`` or ``ok``."""
        return BLOCK if self.blocked else WARN if self.warned else "ok"

    @property
    def rules(self) -> list[str]:
        return sorted({f.rule for f in self.findings})

    def of(self, severity: Severity) -> list[Finding]:
        return [f for f in self.findings if f.severity == severity]


def clip(text: str, n: int = 200) -> str:
    """The match as it is stored: at most ``n`` characters, invisible and control characters escaped."""
    out = []
    for ch in text[:n]:
        o = ord(ch)
        if ch in "\n\t" or (o >= 0x20 and o != 0x7F and not _invisible(o)):
            out.append(ch)
        else:
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
    return "".join(out) + ("…" if len(text) > n else "")


def _invisible(o: int) -> bool:
    return (
        0x200B <= o <= 0x200F
        or 0x202A <= o <= 0x202E
        or 0x2060 <= o <= 0x2069
        or o == 0xFEFF
        or o == 0x180E
        or 0xE0000 <= o <= 0xE007F
    )
