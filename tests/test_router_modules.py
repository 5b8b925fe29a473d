"""The router package's seams (issue 30): the policy and the decision log load without a model stack or an HTTP
client, and importing the package (any part of it) still registers the ``routed:`` operator kind. Each check runs
in a fresh interpreter, so what another test already imported cannot hide an eager import."""

from __future__ import annotations

import json
import subprocess
import sys

from bashgym_assets.config import PROJECT_ROOT

HEAVY = ("torch", "transformers", "litellm")

PROBE = """
import json, sys
import bashgym_assets.serving.router.policy as policy
import bashgym_assets.serving.router.decision_log as decision_log
loaded = sorted(m for m in {heavy!r} if m in sys.modules)
from bashgym_assets.rollout.operators import UnknownOperator, make_operator
try:
    make_operator("routed:no-such-strategy")
    refusal = "none"
except UnknownOperator as exc:
    refusal = "unregistered: " + str(exc)
except ValueError as exc:
    refusal = "registered: " + str(exc)
print(json.dumps({{"loaded": loaded, "refusal": refusal, "cid": policy.conversation_id(
    [{{"role": "user", "content": "ls"}}]), "table": decision_log.ROUTING_TABLE}}))
"""


def probe() -> dict:
    """Run ``PROBE`` in a fresh interpreter (``BASHGYM_HOME``: the test's throw-away data folder)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_policy_and_the_decision_log_import_without_torch_transformers_or_litellm(bashgym_home) -> None:
    """``policy`` and ``decision_log`` (and the package ``__init__`` they pull in) import none of the heavy
    libraries: the backends load them only when a model loads or a call is made."""
    got = probe()
    assert got["loaded"] == [], f"imported at module top: {got['loaded']}"
    assert got["table"] == "routing_decisions" and len(got["cid"]) == 16


def test_importing_any_part_of_the_router_registers_the_routed_operator(bashgym_home) -> None:
    """``routed:`` is known once the package is imported: a bad strategy is refused by the router's own parser
    (``unknown routing strategy``), not by the operators registry as an unregistered kind."""
    got = probe()
    assert got["refusal"].startswith("registered: unknown routing strategy 'no-such-strategy'"), got[
        "refusal"
    ]
