"""The Docker sandbox: disposable, contained containers with a persistent operator shell and exact exit codes.

No Dagster here: the gate, rollouts and evaluation call this module directly. Typical use::

    spec = SandboxSpec(files={"/home/operator/notes.txt": "..."}, setup=["useradd alice"], user="operator",
                       command_timeout_s=30, episode_timeout_s=300, labels={"bashgym.scenario": sid})
    with Sandbox(spec) as box:                # container created and started, files written (not setup)
        if not box.setup().ok: ...            # spec.setup as root, in order, stops at the first failure
        shell = box.session()                 # one persistent bash as spec.user in spec.workdir
        r = shell.run("cd /tmp && ls")        # CommandResult: stdout, stderr, exit_code, timed_out, ...
        if shell.exited: ...                  # the operator typed `exit` (r.terminated) or the shell died
        verdict = box.run_check(check_script) # root, after killing the operator's processes; exit 0 = passed
    # the container is gone here, whatever happened inside the block

Semantics worth knowing:

* ``run`` never raises for what a command does; it raises ``SessionEnded`` when called after the shell ended and
  ``ValueError`` for a command with a NUL byte. ``exit_code`` is None only when there is none (timed out, or the
  shell was killed by a signal).
* A timeout interrupts like Ctrl-C, then SIGKILLs what the command started; state and earlier background jobs
  survive. The episode cap (``episode_timeout_s`` from the first ``session()``) ends the session.
* Output is capped per stream (``output_limit_bytes``): head and tail are kept with a ``[... N bytes of output
  cut ...]`` line between them, and ``*_truncated_bytes`` says how much was cut.
* ``spec.user`` is one of ``layout.SESSION_ACCOUNTS``: root, the unprivileged ``operator`` (home /home/operator)
  or the service account ``app`` (uid 999, home /srv/app), which the image does not have: a container makes it
  only when its session is app (so a task may make its own ``app`` or use uid 999 and /srv/app). Files under the
  operator's home, or the service account's in its own session, belong to that account (folders included);
  elsewhere to root. Files starting with ``#!`` are executable.
  The operator's home, and the session user's when it is the service account, are size-capped tmpfs folders.
* ``run_check`` ends the operator's turn: the session is marked exited afterwards.
* ``SandboxPool(n).map(fn, items)`` keeps input order, runs every item, and raises ``PoolError`` (with the
  per-item exceptions and the other results) if any raised; ``map_outcomes`` never raises for an item.
* ``reap_leftovers()`` removes containers whose owning process is gone (crashed or killed runs); the first
  ``Sandbox.start`` of every process calls it, so every path that opens sandboxes collects what dead owners left.
  ``find_leftovers()`` lists them with the reason (``python -m bashgym_assets.sandbox reap --dry-run``). A driver
  that opens sandboxes from worker threads wraps its loop in ``closing_sandboxes(lambda: boxes)``.
* A sandbox outlives a SIGKILLed owner by at most its lease (``SandboxSpec.lease_s``, 10 minutes), renewed by a
  thread of the owner; never its hard lifetime (``Sandbox.lifetime_s``: the spec's limits plus a margin).
* ``SandboxError`` is the machinery's failure (engine error, a harness step that never reported, a harness exec
  that outran its own timer), never the scenario's: callers retry in a fresh sandbox or report it as such.
"""

from bashgym_assets.sandbox.models import SCENARIO_CAPABILITIES, CommandResult, SandboxSpec, SetupResult
from bashgym_assets.sandbox.pool import Outcome, PoolError, SandboxPool
from bashgym_assets.sandbox.sandbox import (
    LABEL_OWNER,
    LABEL_SANDBOX,
    Leftover,
    Sandbox,
    SandboxError,
    closing_sandboxes,
    find_leftovers,
    install_exit_cleanup,
    reap_leftovers,
)
from bashgym_assets.sandbox.session import SandboxSession, SessionEnded

__all__ = [
    "LABEL_OWNER",
    "LABEL_SANDBOX",
    "SCENARIO_CAPABILITIES",
    "CommandResult",
    "Leftover",
    "Outcome",
    "PoolError",
    "Sandbox",
    "SandboxError",
    "SandboxPool",
    "SandboxSession",
    "SandboxSpec",
    "SessionEnded",
    "SetupResult",
    "closing_sandboxes",
    "find_leftovers",
    "install_exit_cleanup",
    "reap_leftovers",
]
