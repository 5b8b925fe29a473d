"""Guardrails on what enters and leaves: a command-safety classifier and prompt-injection markers.

Plain Python (no Dagster). ``classify_command`` says whether a shell line is something a model must never learn
or emit (``block``) or should be discouraged from (``warn``); ``scan_injection`` finds injection markers in tool
outputs. ``flags`` applies both to trace steps and trajectory turns; ``quality.safety`` turns the flags into a
penalty and the tier rule; ``rollout.operators.GuardedOperator`` refuses blocked commands at generation time.
"""

from bashgym_assets.guardrails.commands import RULES, Rule, classify_command
from bashgym_assets.guardrails.flags import SafetyFlag, SafetySummary, flag_messages, flag_steps, unsafe_turn
from bashgym_assets.guardrails.injection import RULE_IDS as INJECTION_RULES
from bashgym_assets.guardrails.injection import scan_injection
from bashgym_assets.guardrails.models import BLOCK, WARN, Finding, Verdict

__all__ = [
    "BLOCK",
    "INJECTION_RULES",
    "RULES",
    "WARN",
    "Finding",
    "Rule",
    "SafetyFlag",
    "SafetySummary",
    "Verdict",
    "classify_command",
    "flag_messages",
    "flag_steps",
    "scan_injection",
    "unsafe_turn",
]
