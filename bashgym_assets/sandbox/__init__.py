"""The Docker sandbox: disposable, contained containers with a persistent operator shell and exact exit codes.

No Dagster here: the gate, rollouts and evaluation call this module directly.
"""

from bashgym_assets.sandbox.models import SCENARIO_CAPABILITIES, CommandResult, SandboxSpec, SetupResult
from bashgym_assets.sandbox.pool import Outcome, PoolError, SandboxPool
from bashgym_assets.sandbox.sandbox import (
    LABEL_OWNER,
    LABEL_SANDBOX,
    Sandbox,
    SandboxError,
    reap_leftovers,
)
from bashgym_assets.sandbox.session import SandboxSession, SessionEnded

__all__ = [
    "LABEL_OWNER",
    "LABEL_SANDBOX",
    "SCENARIO_CAPABILITIES",
    "CommandResult",
    "Outcome",
    "PoolError",
    "Sandbox",
    "SandboxError",
    "SandboxPool",
    "SandboxSession",
    "SandboxSpec",
    "SessionEnded",
    "SetupResult",
    "reap_leftovers",
]
