"""A long command stopped with SIGTERM or SIGINT ends in order and says so in one line (issue 40).

Before, ``bashgym demo`` died of SIGTERM at once (Python's default), without a word: its step process learned of
it from the kernel and had 5 s of grace, two of its sandboxes outlived it by half a minute, and its Dagster and
MLflow runs stayed "running" until the next pipeline's reaper. Inside ``on_signals(command)`` instead:

1. The first SIGTERM, SIGINT or SIGHUP is recorded (``StopScope.requested``, an event worker threads can watch;
   ``StopScope.on_stop`` callbacks run), the stores are told (``register_on_signal``: the command's Dagster runs
   marked CANCELING, so that Dagster ends them CANCELED), then
   - while the work is delegated to child processes (``delegating()``: the pipeline's step process), it is
     forwarded to them as SIGTERM, so they stop the way they stop any interrupt (Dagster interrupts the step,
     ``finally`` blocks and exit hooks run); the ones still alive ``grace_s`` later are killed;
   - otherwise it is raised in the main thread as ``Stopped``, a ``KeyboardInterrupt``: whatever cleans up on
     Ctrl-C cleans up on it.
2. When the block is left, the cleanups registered by the modules that own what a command leaves behind run for
   every process of the command (this one, the children it delegated to and their descendants): its sandboxes
   removed (``sandbox``), its Dagster runs marked CANCELED (``pipeline_stop``), its MLflow runs ended as KILLED
   (``mlflow_store``). Should the block not be left in time (a library that swallows the interrupt, a thread
   stuck in native code), a watchdog runs them and ends the process.
3. One line says that it stopped and what was ended; ``Stopped`` propagates (``bashgym`` exits 128 + the signal).

A second signal kills the children at once; a third ends this process the way the default handler would; a
SIGINT or SIGHUP ignored when the scope starts (a background job, ``nohup``) stays ignored, SIGTERM never does
(``sigterm_kept``). Once a scope was left stopped, ``requested()``
stays true: the process is on its way out, and no new sandbox starts (``Sandbox.start``).

No Dagster, MLflow or Docker here (the core layer): the higher layers register their cleanups
(``register_cleanup``), and only act on what the command's own processes own (their pid and start time, as
``processes.process_tags`` and the sandbox owner label record them), never on another pipeline's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from bashgym_assets.processes import (
    BOOT_TAG,
    HOST_TAG,
    PID_START_TAG,
    PID_TAG,
    PIDNS_TAG,
    boot_id,
    pid_namespace,
    start_ticks,
)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CLEANUP_DEADLINE_S = (
    60.0  # after the grace: how long the cleanups may take before the watchdog ends the process
)


class Stopped(KeyboardInterrupt):
    """The command was stopped by a signal. A ``KeyboardInterrupt``, so whatever cleans up on Ctrl-C cleans up on it
    (``Popen.__exit__``, the sandbox pool, Dagster). ``line`` is the one line said once the cleanups ran."""

    def __init__(self, signum: int, command: str = "", line: str = "") -> None:
        super().__init__(f"{command or 'this command'} stopped by {signal_name(signum)}")
        self.signum = signum
        self.command = command
        self.line = line

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass(frozen=True)
class Proc:
    """A process by identity: its pid and its start time (clock ticks since boot), so a reused pid is not it."""

    pid: int
    start: str

    @classmethod
    def of(cls, pid: int) -> Proc | None:
        start = start_ticks(pid)
        return cls(pid, start) if start else None

    def alive(self) -> bool:
        return start_ticks(self.pid) == self.start and not _zombie(self.pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def descendants(root: int | None = None) -> set[Proc]:
    """Every live process below ``root`` (default: this one), children of children included, read from /proc."""
    root = root or os.getpid()
    parent_of: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent_of[int(name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parent_of.items() if ppid in frontier and pid not in found}
        found |= frontier
    return {p for p in (Proc.of(pid) for pid in found) if p is not None}


@dataclass
class StopContext:
    """What a cleanup is told: who stopped, why, and which processes were the command's."""

    command: str
    signum: int
    owners: frozenset[Proc]  # this process, the children it delegated to and their descendants
    scope_started: float  # wall clock (time.time()) when the command entered ``on_signals``
    stopped_at: float  # wall clock of the first signal
    # the command's Dagster runs, filled by the Dagster cleanup (their MLflow runs follow them)
    dagster_run_ids: set[str] = field(default_factory=set)

    @property
    def reason(self) -> str:
        return f"stopped by {signal_name(self.signum)} ({self.command}, pid {os.getpid()})"

    def owns(self, pid: int | str | None, start: str | None) -> bool:
        """Whether pid + start ticks name one of the command's processes."""
        try:
            return bool(start) and Proc(int(pid), str(start)) in self.owners  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    def owns_tags(self, tags: Mapping[str, str]) -> bool:
        """Whether process tags (``processes.process_tags``: a Dagster run's, an MLflow run's) name one of the
        command's processes on this machine."""
        if not tags.get(PID_TAG) or tags.get(HOST_TAG) != socket.gethostname():
            return False
        if tags.get(BOOT_TAG, "") != boot_id():
            return False
        pidns = tags.get(PIDNS_TAG)
        if pidns and pidns != pid_namespace():
            return False
        return self.owns(tags.get(PID_TAG), tags.get(PID_START_TAG))


Cleanup = Callable[[StopContext], list[str]]
_CLEANUPS: dict[str, tuple[int, Cleanup]] = {}
_ON_SIGNAL: dict[str, Callable[[StopContext], object]] = {}
SIGNAL_HOOK_TIMEOUT_S = 3.0  # how long the stores are told before the children are, at most


def register_cleanup(name: str, fn: Cleanup, order: int = 50) -> None:
    """Run ``fn`` when a command stops (lowest ``order`` first; registering a name again replaces it). ``fn`` acts
    only on what ``StopContext.owns`` and returns short phrases for the stop line ("removed 2 sandboxes"); it may
    raise (the line then says that part was not cleaned up)."""
    _CLEANUPS[name] = (order, fn)


def register_on_signal(name: str, fn: Callable[[StopContext], object]) -> None:
    """Run ``fn`` as soon as a stop arrives, from a thread, before the children are told (for at most
    ``SIGNAL_HOOK_TIMEOUT_S``): what the stores should know first. ``pipeline_stop`` marks the command's Dagster
    runs CANCELING, so that Dagster, interrupted in the step process, ends them CANCELED (a termination the user
    asked for) and not FAILURE ("interrupted unexpectedly")."""
    _ON_SIGNAL[name] = fn


def registered_cleanups() -> list[tuple[str, Cleanup]]:
    return [(name, fn) for name, (_, fn) in sorted(_CLEANUPS.items(), key=lambda kv: (kv[1][0], kv[0]))]


def _say_stderr(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # a closed terminal (SIGHUP) must not fail the stop
        print(line, file=sys.stderr, flush=True)


class StopScope:
    """The state of one ``on_signals`` block (see the module docstring)."""

    def __init__(
        self,
        command: str,
        grace_s: float,
        echo: Callable[[str], None],
        cleanups: Iterable[tuple[str, Cleanup]] | None,
        deadline_s: float,
    ) -> None:
        self.command = command
        self.grace_s = grace_s
        self.echo = echo
        self.requested = threading.Event()
        self.signum: int | None = None
        self.line: str | None = None
        self._extra = list(cleanups or [])
        self._deadline_s = deadline_s
        self._started = time.time()
        self._stopped_at = 0.0
        self._stopped_mono = 0.0
        self._count = 0
        self._delegating = 0
        self._cleaning = False
        self._children: list[tuple[subprocess.Popen, Proc | None]] = []
        self._owners: set[Proc] = set()  # every process of the command seen so far (descendants of this one)
        self._delegated: set[Proc] = set()  # the adopted children and their descendants: ended on a stop
        self._on_stop: list[Callable[[], None]] = []
        self._finish_lock = threading.Lock()
        self._announcer: threading.Thread | None = None
        self._forwarded_mono = 0.0
        self._previous: dict[int, object] = {}
        self._installed = False

    # ---- what the work uses ----------------------------------------------------------------------------------
    def on_stop(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (cheap, never raising) as soon as the first signal arrives, in the main thread, before the
        interrupt: a streaming loop's own stop flag, for example."""
        self._on_stop.append(fn)

    def check(self) -> None:
        """Raise ``Stopped`` if a stop was requested (worker loops call it between items)."""
        if self.requested.is_set() and self.signum is not None:
            raise Stopped(self.signum, self.command)

    def adopt(self, proc: subprocess.Popen) -> None:
        """Count ``proc`` as delegated work: a stop is forwarded to it (at once if one was already requested)."""
        ident = Proc.of(proc.pid)
        self._children.append((proc, ident))
        if ident is not None:
            self._owners.add(ident)
            self._delegated.add(ident)
        if self.requested.is_set():
            _send(proc, signal.SIGTERM)

    # ---- signals ---------------------------------------------------------------------------------------------
    def _install(self, signals: Iterable[int]) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # Python delivers signals to the main thread only: a scope elsewhere just cleans up on exit
        for signum in signals:
            if signal.getsignal(signum) is signal.SIG_IGN and signum != signal.SIGTERM:
                continue  # ignored on purpose (``nohup``'s SIGHUP, a background job's SIGINT): left ignored
            # SIGTERM is always taken: nobody starts a command ignoring it on purpose; an ignored SIGTERM was
            # inherited from a parent that lost it (Dagster's restore in a process whose SIGINT is ignored,
            # ``sigterm_kept``), and a command that cannot be asked to stop is what this module exists against
            self._previous[signum] = signal.signal(signum, self._handle)
        self._installed = True

    def _restore(self) -> None:
        if not self._installed:
            return
        for signum, previous in self._previous.items():
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(signum, previous)  # type: ignore[arg-type]
        self._installed = False

    def _handle(self, signum: int, frame: object) -> None:
        self._count += 1
        if self._count == 1:
            self.signum = signum
            self._stopped_at = time.time()
            self._stopped_mono = time.monotonic()
            self.requested.set()
            self._note_processes()
            for fn in self._on_stop:
                with contextlib.suppress(Exception):
                    fn()
            self._announcer = threading.Thread(target=self._announce, name="stop-announce", daemon=True)
            self._announcer.start()
            threading.Thread(target=self._watchdog, name="stop-watchdog", daemon=True).start()
            if self._delegating or self._cleaning:
                return  # the children end, the code waiting on them returns, the block is left in order
            raise Stopped(signum, self.command)
        if self._count == 2:
            for proc in self._live_children():
                _send(proc, signal.SIGKILL)
            return
        signal.signal(signum, signal.SIG_DFL)  # a third: as if nothing had been installed
        os.kill(os.getpid(), signum)

    def _announce(self) -> None:
        """Tell the stores what is coming (``register_on_signal``), then the children (SIGTERM)."""
        ctx = self._context()

        def hooks() -> None:
            for fn in list(_ON_SIGNAL.values()):
                with contextlib.suppress(Exception):
                    fn(ctx)

        told = threading.Thread(target=hooks, name="stop-hooks", daemon=True)
        told.start()
        told.join(SIGNAL_HOOK_TIMEOUT_S)
        for proc in self._live_children():
            _send(proc, signal.SIGTERM)
        self._forwarded_mono = time.monotonic()

    def _context(self) -> StopContext:
        me = Proc.of(os.getpid())
        return StopContext(
            command=self.command,
            signum=self.signum or signal.SIGTERM,
            owners=frozenset(self._owners | descendants() | ({me} if me else set())),
            scope_started=self._started,
            stopped_at=self._stopped_at or time.time(),
        )

    def _note_processes(self) -> None:
        """Remember who is the command now: a child's descendants are orphaned (and unfindable) once it dies."""
        self._owners |= descendants()
        for proc, ident in self._children:
            if ident is not None and ident.alive():
                self._delegated |= descendants(proc.pid)
        self._owners |= self._delegated

    def _live_children(self) -> list[subprocess.Popen]:
        return [proc for proc, _ in self._children if proc.poll() is None]

    def _watchdog(self) -> None:
        """After the grace, kill the children still alive; if the block is still not left by the deadline (the
        interrupt swallowed, the main thread stuck in native code), clean up from here and end the process."""
        if self._announcer is not None:
            self._announcer.join()
        time.sleep(self.grace_s)
        for proc in self._live_children():
            _send(proc, signal.SIGKILL)
        time.sleep(self._deadline_s)
        if self.line is not None:
            return
        line = self.finish(timeout=self._deadline_s)
        if line is None:
            self.echo(
                f"{self.command}: stopped by {signal_name(self.signum or 0)}; its cleanup did not finish"
            )
        os._exit(128 + (self.signum or signal.SIGTERM))

    # ---- the end -------------------------------------------------------------------------------------------
    def finish(self, timeout: float | None = None) -> str | None:
        """End the children, run the cleanups for every process of the command, say the line (once, from
        whichever thread gets here first). None when another thread holds the cleanup past ``timeout``."""
        if not self._finish_lock.acquire(timeout=-1 if timeout is None else timeout):
            return None
        try:
            if self.line is not None:
                return self.line
            self._cleaning = True
            signum = self.signum or signal.SIGTERM
            if self._announcer is not None:
                self._announcer.join(SIGNAL_HOOK_TIMEOUT_S + 1)
            self._note_processes()
            deadline = (self._forwarded_mono or self._stopped_mono) + self.grace_s
            for proc, _ in self._children:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _send(proc, signal.SIGKILL)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=5)
            # what the children started and left behind (their descendants, now init's) goes too; never this
            # process's other children, nor a daemon a child started in a session of its own (a Docker engine)
            for left in self._delegated:
                if left.alive() and _same_session(left.pid):
                    with contextlib.suppress(OSError):
                        os.kill(left.pid, signal.SIGKILL)
            ctx = self._context()
            done: list[str] = []
            for name, fn in [*registered_cleanups(), *self._extra]:
                try:
                    done += fn(ctx)
                except Exception as exc:  # noqa: BLE001 - one store that cannot be reached must not hide the rest
                    done.append(f"{name} not cleaned up ({type(exc).__name__}: {str(exc)[:120]})")
            line = f"{self.command}: stopped by {signal_name(signum)}: " + (
                "; ".join(done) or "nothing was left running"
            )
            self.line = line
            self.echo(line)
            return line
        finally:
            self._finish_lock.release()


def _same_session(pid: int) -> bool:
    try:
        return os.getsid(pid) == os.getsid(0)
    except OSError:
        return False


def _send(proc: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(OSError):
        if proc.poll() is None:
            proc.send_signal(signum)


_ACTIVE: list[StopScope] = []
# Set when a scope is left stopped: the process is on its way out, and the worker threads of an interrupted pool
# (which the interpreter still waits for) must not start new sandboxes meanwhile.
_STOPPED = threading.Event()


def current() -> StopScope | None:
    """The innermost active scope of this process, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def requested() -> bool:
    """Whether this process is stopping, or was stopped (a scope got its signal): start no new work."""
    return _STOPPED.is_set() or any(scope.requested.is_set() for scope in _ACTIVE)


def forget_stop() -> None:
    """For a process that goes on after a stopped scope (a test, a notebook): ``requested()`` is False again."""
    _STOPPED.clear()


@contextlib.contextmanager
def delegating() -> Iterator[Callable[[subprocess.Popen], None]]:
    """Around the life of a child process that does the work (``demo.run_plan``'s step process): a stop in the
    block is forwarded to the children given to the yielded ``adopt`` instead of interrupting this thread, which
    then sees them end and leaves the block its own way (the scope turns whatever it raises into ``Stopped``).
    Entered while a stop is already requested, it raises ``Stopped``: no new work. A no-op outside a scope."""
    scope = current()
    if scope is None:
        yield lambda proc: None
        return
    scope.check()
    scope._delegating += 1
    try:
        yield scope.adopt
    finally:
        scope._delegating -= 1


@contextlib.contextmanager
def sigterm_kept() -> Iterator[None]:
    """Around in-process Dagster work (``demo.AssetJobRunner``): SIGTERM still stops this process afterwards.

    Each time Dagster restores its interrupt handlers it sets SIGTERM to SIGINT's disposition
    (``dagster._utils.interrupts``: "map SIGTERM to SIGINT, for k8s"). In a process started with SIGINT ignored,
    as a script's background job is (``bashgym demo &``), that is ``SIG_IGN``: after its first run the process
    ignored SIGTERM between runs, a stop forwarded to it waited for the grace and a SIGKILL, and every program it
    started inherited the ignored SIGTERM. Inside the block Dagster's own handler takes SIGTERM (it interrupts
    the run, as it does SIGINT); when the block is left, a SIGTERM that Dagster left ignored gets back what it
    had before. Outside the main thread (where no handler can change) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if before is not signal.SIG_IGN and signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(signal.SIGTERM, before)


def grace_from_env() -> float:
    """``BASHGYM_STOP_GRACE_S`` (``Settings.stop_grace_s``, 10 s by default)."""
    from bashgym_assets.config import get_settings

    return get_settings().stop_grace_s


@contextlib.contextmanager
def on_signals(
    command: str,
    *,
    grace_s: float | None = None,
    echo: Callable[[str], None] = _say_stderr,
    cleanups: Iterable[tuple[str, Cleanup]] | None = None,
    signals: Iterable[int] = STOP_SIGNALS,
    deadline_s: float = CLEANUP_DEADLINE_S,
) -> Iterator[StopScope]:
    """Run the block so that SIGTERM, SIGINT or SIGHUP stops it in order (see the module docstring): children
    stopped, the command's sandboxes, Dagster runs and MLflow runs ended by the registered cleanups (plus
    ``cleanups``), one line said with ``echo``, then ``Stopped`` raised. ``grace_s``: how long children get to
    stop before they are killed (default ``BASHGYM_STOP_GRACE_S``, else 10 s). Scopes nest: the innermost one
    handles the signal, an outer one lets its ``Stopped`` through. Outside the main thread no handler can be
    installed; the block then runs as it would without the scope."""
    scope = StopScope(
        command, grace_from_env() if grace_s is None else grace_s, echo, cleanups, deadline_s=deadline_s
    )
    scope._install(signals)
    _ACTIVE.append(scope)
    try:
        yield scope
    except Stopped as exc:
        if exc.line or scope.signum is None:
            raise  # an inner scope's, already said (or raised by hand without a signal here)
        line = scope.finish() or ""
        raise Stopped(scope.signum, command, line) from None
    except BaseException:
        if scope.signum is None:
            raise
        # the work's own failure on the way out (a step process that ended with an error): the stop caused it
        line = scope.finish() or ""
        raise Stopped(scope.signum, command, line) from None
    else:
        if scope.signum is not None:  # the stop arrived as the work ended: clean up and say so all the same
            line = scope.finish() or ""
            raise Stopped(scope.signum, command, line)
    finally:
        if scope.signum is not None:
            _STOPPED.set()
        _ACTIVE.remove(scope)
        scope._restore()
