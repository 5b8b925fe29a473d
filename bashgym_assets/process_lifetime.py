"""Step processes that end with the process that started them, however that one dies.

- ``die_with_parent``: the pipeline's step process kept running (and wrote its result 56 s later) after its parent
  was killed. Called first thing in the child, it asks Linux to send it SIGTERM when the parent dies
  (``PR_SET_PDEATHSIG``), which interrupts the step so ``finally`` blocks and exit hooks clean up, and a watchdog
  thread ends the process for good after a short grace (``SIGALRM``, then SIGKILL) whatever swallows the interrupt.
- ``die_with_launcher`` does the same for a step in a Docker container, whose parent is the Docker daemon: the
  launcher is named by ``launcher_identity`` (pid, start ticks, boot and pid namespace).

Core, plain Python (no Dagster): the Dagster executors arm it in their step containers and the demo's runner in its
step processes, and neither may import the pipeline runner (``housekeeping``) that sits above the Dagster layer.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import signal
import sys
import threading
import time
from typing import Any

from bashgym_assets.processes import boot_id, pid_namespace, start_ticks

_PR_SET_PDEATHSIG = 1


# ---- step processes die with their parent ----------------------------------------------------------------------
def _interrupt_on_sigterm(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
    raise KeyboardInterrupt("SIGTERM (parent process gone?): stopping")


def _end_this_process(grace_s: float, interrupt: bool) -> None:
    """The watchdogs' ending: ``SIGALRM`` armed for ``grace_s`` (its default action terminates in the kernel,
    whatever holds the interpreter), SIGTERM now when asked (the graceful interrupt), SIGKILL a second after the
    alarm in case a handler took it."""
    signal.alarm(max(1, math.ceil(grace_s)))
    if interrupt:
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(math.ceil(grace_s) + 1.0)
    os.kill(os.getpid(), signal.SIGKILL)


def die_with_parent(grace_s: float = 5.0, expected_parent: int | None = None) -> bool:
    """Make this process end when its parent does (call it first thing in a child, from the main thread).

    Two stages. Graceful: SIGTERM (Linux: ``prctl(PR_SET_PDEATHSIG)``, sent by the kernel as the parent dies),
    which raises ``KeyboardInterrupt`` here, or inside a Dagster run Dagster's own interrupt (it maps SIGTERM to its
    handlers while a run executes, failing the step), so ``finally`` blocks (the MLflow run marked FAILED, temporary
    folders removed) and exit hooks (sandbox removal) run. Certain: a watchdog thread sees the parent gone, arms
    ``SIGALRM`` (default action: terminate, in the kernel, whatever holds the interpreter) for ``grace_s`` later,
    and sends SIGKILL itself a second after that, because code that swallows the interrupt or a handler that only
    records it (Dagster's between steps, which would let the next step of the plan start) must not keep it alive.
    ``expected_parent``: the parent's pid when known, to catch a parent that died before this call. Returns True
    when the kernel sends the SIGTERM (Linux), False when the watchdog sends it.

    The "parent" is the thread that started the child: start pipeline children from the main thread.
    """
    parent = os.getppid()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    by_kernel = False
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            by_kernel = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0

    # gone already: adopted by init (or a subreaper) before this call, or between the two getppid() calls
    gone = (
        parent == 1 or (expected_parent is not None and parent != expected_parent) or os.getppid() != parent
    )

    def watch() -> None:
        while not gone and os.getppid() == parent:
            time.sleep(0.5)
        _end_this_process(grace_s, interrupt=not by_kernel and not gone)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()
    if gone:
        os.kill(os.getpid(), signal.SIGTERM)
    return by_kernel


def launcher_identity() -> str:
    """This process named for a step it launches elsewhere (a container): pid, start ticks, boot and pid namespace,
    as JSON for an environment variable."""
    pid = os.getpid()
    return json.dumps({"pid": pid, "start": start_ticks(pid), "boot": boot_id(), "pidns": pid_namespace()})


def die_with_launcher(identity: str, grace_s: float = 5.0, poll_s: float = 1.0) -> bool:
    """End this process when the process ``identity`` (``launcher_identity``'s JSON) ends, though it is not our
    parent: a step in a Docker container is a child of the Docker daemon, so a ``kill -9`` of the run that launched
    it would otherwise leave it training for hours. Needs the launcher's pids in sight (the step container shares
    the host's pid namespace); returns False, watching nothing, when they are not (another namespace, host boot or
    an unreadable identity: a launcher we cannot see is never taken for dead).

    How it ends: SIGTERM to itself (Dagster fails the step and its ``finally`` blocks run), then ``SIGALRM``'s
    default action after ``grace_s`` and SIGKILL a second later, as ``die_with_parent`` does."""
    try:
        who = json.loads(identity)
        pid, started = int(who["pid"]), str(who["start"])
    except (ValueError, KeyError, TypeError):
        return False
    if not started or who.get("boot") != boot_id() or who.get("pidns") != pid_namespace():
        return False

    def watch() -> None:
        while start_ticks(pid) == started:
            time.sleep(poll_s)
        _end_this_process(grace_s, interrupt=True)

    threading.Thread(target=watch, name="die-with-launcher", daemon=True).start()
    return True
