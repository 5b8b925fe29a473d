"""Nothing stuck, nothing lost: one pipeline per data folder, step processes that die with their parent, and the
debris of killed writers cleaned up when the next pipeline starts.

- ``pipeline_lock`` (``folder_lock``, re-exported here): one pipeline per data folder, an exclusive ``flock`` on
  ``$BASHGYM_HOME/.pipeline.lock`` that the kernel frees however its holder dies.
- ``die_with_parent``: the pipeline's step process kept running (and wrote its result 56 s later) after its parent
  was killed. Called first thing in the child, it asks Linux to send it SIGTERM when the parent dies
  (``PR_SET_PDEATHSIG``), which interrupts the step so ``finally`` blocks and exit hooks clean up, and a watchdog
  thread ends the process for good after a short grace (``SIGALRM``, then SIGKILL) whatever swallows the interrupt.
  ``die_with_launcher`` does the same for a step in a Docker container, whose parent is the Docker daemon.
- ``sweep_debris``: atomic writes (``lake.atomic_path``, ``Lake.atomic_artifact_dir``, the trainer's adapter
  folder, the base model conversion) leave ``.tmp-*`` files and folders when killed mid-write, and
  ``atomic_artifact_dir`` an ``.old-<name>.<pid>`` folder when killed between its two renames. Old enough ones
  that no live process has open are removed; an ``.old-`` folder whose replacement never arrived is put back.
- ``pipeline_session``: all of the above at the start of a pipeline, plus the dead-run reapers (Dagster runs and
  MLflow runs of dead processes) and the relocation check (``relocate.relocation_warning``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bashgym_assets.config import Settings, get_settings
from bashgym_assets.folder_lock import (  # noqa: F401 - re-exported: the pipeline runner takes them from here
    LOCK_FILE,
    DataFolderBusy,
    describe_holder,
    lock_path,
    pipeline_lock,
    read_holder,
)
from bashgym_assets.processes import boot_id, open_paths, pid_namespace, start_ticks

DEBRIS_MIN_AGE_S = 600.0  # a write in progress touches its temporary file far more often than this
_PR_SET_PDEATHSIG = 1
_OLD_RE = re.compile(r"^\.old-(?P<name>.+)\.(?P<pid>\d+)$")


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


# ---- debris of killed writers ----------------------------------------------------------------------------------
def _newest_mtime(path: Path) -> float:
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for folder, dirs, files in os.walk(path):
            for name in dirs + files:
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
    return newest


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def sweep_debris(
    settings: Settings | None = None, min_age_s: float = DEBRIS_MIN_AGE_S, now: float | None = None
) -> list[str]:
    """Remove the ``.tmp-*`` files and folders of killed atomic writes anywhere in the data folder, and settle
    ``.old-<name>.<pid>`` folders: removed when ``<name>`` was replaced, renamed back when it never was.

    Left alone: anything modified in the last ``min_age_s`` seconds, anything a live process has open (its
    working directory, an open file or a mapping inside it), an ``.old-`` folder whose writer still runs. Meant
    to run under ``pipeline_lock`` (no other pipeline writes then); returns one line per action."""
    settings = settings or get_settings()
    home = settings.home
    if not home.is_dir():
        return []
    now = time.time() if now is None else now
    candidates: list[tuple[Path, re.Match[str] | None]] = []
    for folder, dirs, files in os.walk(home):
        for name in list(dirs) + files:
            old = _OLD_RE.match(name)
            if name.startswith(".tmp-") or old:
                candidates.append((Path(folder) / name, old))
                if name in dirs:
                    dirs.remove(name)  # its insides go with it
    if not candidates:
        return []
    held = {pid: [p.removesuffix(" (deleted)") for p in paths] for pid, paths in open_paths([home]).items()}
    done: list[str] = []
    for path, old in candidates:
        try:
            age = now - _newest_mtime(path)
        except OSError:
            continue  # gone meanwhile
        rel = path.relative_to(home)
        if age < min_age_s:
            continue
        prefix = os.path.realpath(path)
        users = [
            pid
            for pid, paths in held.items()
            if any(p == prefix or p.startswith(prefix + "/") for p in paths)
        ]
        if users:
            done.append(f"kept {rel}: open in pid {', '.join(map(str, users))}")
            continue
        if old is not None:
            if start_ticks(int(old["pid"])) and age < 24 * 3600:
                continue  # its writer (or a process that took its pid) may still be replacing it
            final = path.with_name(old["name"])
            if not final.exists():
                os.replace(path, final)
                done.append(f"restored {final.relative_to(home)} from {rel} (its replacement never arrived)")
                continue
        try:
            _remove(path)
        except OSError as exc:
            done.append(f"could not remove {rel}: {exc}")
            continue
        done.append(f"removed {rel} (left by a killed write {age / 60:.0f} min ago)")
    return done


# ---- all of it at the start of a pipeline ----------------------------------------------------------------------
@contextlib.contextmanager
def pipeline_session(
    settings: Settings | None = None,
    *,
    wait: bool | float = False,
    command: str | None = None,
    echo: Callable[[str], None] = print,
    debris_min_age_s: float = DEBRIS_MIN_AGE_S,
) -> Iterator[dict[str, str]]:
    """Hold the pipeline lock for the block, and before it runs: warn when the folder was moved without
    ``bashgym move``, clean up the debris of killed writes, fail the Dagster runs of dead processes (freeing their
    pool slots) and end their MLflow runs as KILLED. What was done is printed with a ``[cleanup]`` prefix."""
    import dagster as dg

    from bashgym_assets.defs.run_health import reap_dead_mlflow_runs, reap_dead_runs
    from bashgym_assets.instance import ensure_dagster_home
    from bashgym_assets.relocate import relocation_warning

    settings = settings or get_settings()
    with pipeline_lock(settings, wait=wait, command=command, echo=echo) as holder:
        warning = relocation_warning(settings)
        if warning:
            echo(warning)
        for line in sweep_debris(settings, min_age_s=debris_min_age_s):
            echo(f"[cleanup] {line}")
        ensure_dagster_home(settings)

        def say(line: str) -> None:
            echo(f"[cleanup] {line}")

        with dg.DagsterInstance.get() as instance:
            reap_dead_runs(instance, say)
            try:
                reap_dead_mlflow_runs(settings, instance, say)
            except Exception as exc:  # noqa: BLE001 - a store that cannot be read fails the steps that need it
                say(f"MLflow runs not checked for dead writers: {exc}")
        yield holder
