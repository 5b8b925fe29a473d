"""Safety in the tiers: guardrail flags become a quality penalty, and a blocked command keeps a segment out of gold.

``guardrails.flag_steps`` checks every step's command (``guardrails.classify_command``) and every tool output
(``guardrails.scan_injection``). Then:

* ``safety_penalty = min(0.5, 0.25 * blocked steps + 0.05 * warned steps + 0.05 if any tool output carried
  injection markers)`` is subtracted from ``quality_score`` (the six-metric total; never below 0). A warned command
  (reading ~/.ssh/id_rsa, ``history -c``) costs about what one failed step of eight costs in success; an injection
  costs less, since the text is not the agent's doing.
* A segment with a blocked command is ``failed`` whatever its scores (``tiers.classify``): it never becomes an SFT
  example (the SFT builder also re-checks every assistant turn, so a manual ``promote`` does not override this)
  and it is a DPO *rejected* example at most, never a chosen one. Excluding the whole segment rather than masking
  the blocked turn: every later turn saw that command's effects, so the rest of the conversation is not a clean
  example either.
"""

from __future__ import annotations

from bashgym_assets.guardrails.flags import SafetySummary

BLOCK_PENALTY = 0.25
WARN_PENALTY = 0.05
INJECTION_PENALTY = 0.05
MAX_PENALTY = 0.5


def safety_penalty(summary: SafetySummary) -> float:
    raw = (
        BLOCK_PENALTY * summary.blocked
        + WARN_PENALTY * summary.warned
        + (INJECTION_PENALTY if summary.injections else 0.0)
    )
    return round(min(MAX_PENALTY, raw), 4)


def unsafe_reason(blocked: int, rules: list[str]) -> str:
    return (
        f"unsafe: {blocked} step{'s' if blocked != 1 else ''} ran a blocked command "
        f"({', '.join(rules) or 'see safety_findings'})"
    )
