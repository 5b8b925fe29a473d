"""A disposable, contained container per episode: files, root setup, a checker the operator never sees.

Containment is on by default and not negotiable per scenario: no network, every capability dropped except the six
a root scenario needs (an unprivileged session user, the operator or the service account, runs with
no-new-privileges and holds none of them), memory/CPU/pids/file-size limits, tmpfs for the session user's writable
folders (so disk fill hits a size cap in memory, not the host's disk),
``--init`` as PID 1, no Docker socket and no host mounts. The container always goes away: the context manager
removes it on exit or exception (KeyboardInterrupt included), an ``atexit`` hook (and, over Python's default, a
SIGTERM handler) removes what is still live when the process ends, the first sandbox a process opens reaps what
dead owners left (``reap_leftovers``, by the owner label: host, pid, start time, boot id, pid namespace), and the
container's own main process (the backstop) ends it (``--rm``) once its owner stopped renewing its lease
(``SandboxSpec.lease_s``, 10 minutes: a SIGKILLed owner) or its hard lifetime (the spec's episode, setup and check limits plus a margin)
is spent, whichever comes first.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import json
import logging
import os
import posixpath
import secrets
import shutil
import signal
import socket
import stat
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

from docker.errors import APIError, NotFound
from docker.types import LogConfig, Mount, Ulimit
from pydantic import BaseModel

from bashgym_assets import stopping
from bashgym_assets.sandbox._exec import (
    CappedBuffer,
    ExecStream,
    MarkerSplitter,
    collect,
    command_result,
    docker_client,
)
from bashgym_assets.sandbox.layout import (  # noqa: F401 - re-exported: callers name them from here
    ATTACHED,
    ATTACHED_WAIT,
    BASH,
    CHECK_PATH,
    HOME_OWNERS,
    OPERATOR_GID,
    OPERATOR_UID,
    OPERATOR_USER,
    PATH,
    PROTECTED_PATHS,
    READY_FILE,
    READY_WAIT,
    RUN_DIR,
    SEED_DIR,
    SEED_MOUNT,
    SEED_TAR,
    SESSION_ACCOUNTS,
    SESSION_DIR,
    SETUP_REPORTS,
    SandboxError,
    SessionAccount,
    account_gitconfig,
    account_setup_shell,
    home_owners,
)
from bashgym_assets.sandbox.models import SCENARIO_CAPABILITIES, CommandResult, SandboxSpec, SetupResult
from bashgym_assets.sandbox.seccomp import profile_json

log = logging.getLogger(__name__)

LABEL_SANDBOX = "bashgym.sandbox"
LABEL_OWNER = "bashgym.sandbox.owner"
LABEL_CREATED = "bashgym.sandbox.created"
LABEL_EXPIRES = "bashgym.sandbox.expires"  # epoch seconds after which the container is certainly stale
# Kill every process whose pid is not in the keep list, repeatedly, until none is left (beats fork loops).
KILL_NEW_FUNC = r"""
kill_new() {
  local keep=" $* " round victims d p
  for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    victims=""
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      [ "$p" = "$$" ] && continue
      case "$keep" in *" $p "*) continue;; esac
      victims="$victims $p"
    done
    [ -z "$victims" ] && return 0
    kill -STOP $victims 2>/dev/null
    kill -KILL $victims 2>/dev/null
    sleep 0.01
  done
  return 1
}
"""
KILL_NEW_SCRIPT = KILL_NEW_FUNC + 'kill_new "$@"\n'
# The end of the operator's turn, in one step it cannot race: ``kill -STOP -1`` from root is ONE kernel-side
# signal to every process in the container but init and the caller (the kernel holds the task list while it
# sends, and a fork that races a pending stop is restarted), so no fork loop can outrun it, unlike any scan of
# /proc. Then the setup's processes (argv: the trusted ``pid:start`` list the shell made before the operator's
# first command) that were running are resumed, matched by pid AND start time (a reused pid is not theirs); a
# setup daemon the operator had stopped stays stopped. A frozen process can neither read, replace nor race the
# checker, yet the checker still sees it in /proc. No forks at all: it must work when a fork bomb has used up
# every pid. More than FROZEN_LIMIT frozen processes is a fork bomb or a runaway, not a task's daemons: those are
# killed before the check so that their pids and memory do not starve the checker. KEEP: the pids kept.
FROZEN_LIMIT = 32
FREEZE_FUNC = (
    r"""
freeze_all() {
local trusted=("$@") resume="" item p start line frozen="" n=0 d; KEEP=""
for item in "${trusted[@]}"; do
  p=${item%%:*}; start=${item#*:}
  read -r line < "/proc/$p/stat" 2>/dev/null || continue
  set -- ${line##*) }
  [ "${20}" = "$start" ] || continue
  KEEP="$KEEP $p"
  case "$1" in T|t|Z|X|x) ;; *) resume="$resume $p";; esac
done
kill -STOP -1 2>/dev/null
[ -n "$resume" ] && kill -CONT $resume 2>/dev/null
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case " 1 $$ $KEEP " in *" $p "*) continue;; esac
  frozen="$frozen $p"; n=$((n + 1))
done
"""
    + f"[ $n -gt {FROZEN_LIMIT} ] && kill -KILL $frozen 2>/dev/null\n"
    + r"""return 0
}
"""
)
FREEZE_SCRIPT = FREEZE_FUNC + 'freeze_all "$@"; printf \'keep:%s\\n\' "$KEEP"\n'
# All setup commands in one exec: each in its own `bash -c` under `timeout`, a marker with its index, status and
# start/end times after it on both streams, stopping at the first failure. argv: nonce, timeout, commands...
# Every report also goes to a root-only file (fd 9, closed for the commands themselves): the engine can drop the
# last bytes of an exec's output when the exec ends (moby/moby#27289; seen here on ~1% of setups with a few
# commands, exit code 0 and the last report missing), and the harness then reads the reports from the file.
SETUP_SCRIPT = (
    r"""
n=$1; t=$2; shift 2; i=0
{ mkdir -p -m 700 """
    + SETUP_REPORTS
    + r""" && exec 9>>"""
    + SETUP_REPORTS
    + r"""/"$n"; } 2>/dev/null || exec 9>/dev/null
for cmd in "$@"; do
  i=$((i+1)); s=$EPOCHREALTIME
  /usr/bin/timeout -s KILL "$t" /bin/bash --norc --noprofile -c "$cmd" </dev/null 9>&-
  rc=$?; e=$EPOCHREALTIME
  printf -v m '\036BG:%s:%d:%d:%s:%s\036' "$n" "$i" "$rc" "$s" "$e"; printf '%s' "$m"; printf '%s' "$m" >&9
  printf '\036BG:%s:%d\036' "$n" "$i" >&2
  [ "$rc" = 0 ] || exit 0
done
"""
)


# The container's main process (PID 2, under --init): the backstop that ends the container when nobody will.
# argv: hard lifetime (s), lease (s, 0 = none), tick (s). It exits (and --rm removes the container) once the hard
# lifetime is spent, or once the lease file has not changed for ``lease`` seconds: the owner renews it from a
# thread while it lives, so a SIGKILLed owner's sandboxes go within a lease, not after the episode's worst case
# (an evaluation's model time is not counted in seconds at all). No forks while it waits (``read -t`` on a FIFO
# it holds open, ``$EPOCHSECONDS``): an operator listing processes sees one quiet process, as before.
LEASE_FILE = "/.bashgym-lease"  # root-only, on the image layer (``put_archive`` cannot reach a tmpfs)
BACKSTOP_FILE = "/run/.bashgym-backstop"  # in the seed; deleted once running (bash keeps it open)
BACKSTOP_SCRIPT = (
    r"""
end=$((EPOCHSECONDS + $1)); lease=$2; tick=$3; seen=; renewed=$EPOCHSECONDS; fifo=/run/.bashgym-tick.$$
{ mkfifo -m 600 "$fifo" && exec 3<> "$fifo"; } 2>/dev/null || exec sleep "$1"
rm -f "$fifo" "$0"
while (( EPOCHSECONDS < end )); do
  read -r -t "$tick" -u 3 _
  if (( lease > 0 )); then
    { read -r v < """
    + LEASE_FILE
    + r"""; } 2>/dev/null && [[ "$v" != "$seen" ]] && { seen=$v; renewed=$EPOCHSECONDS; }
    (( EPOCHSECONDS - renewed >= lease )) && exit 0
  fi
done
"""
)
#: Added to the spec's own limits (episode, every setup command, a check) for the hard lifetime.
LIFETIME_MARGIN_S = 300.0


#: A check longer than this goes in over stdin (``run_check``) rather than inside one command argument (Linux
#: caps one argument at 128 KiB).
MAX_INLINE_CHECK = 96 * 1024
#: How long a harness exec with its own in-container timer may outrun that timer before it counts as the
#: machinery's failure (a loaded engine can take seconds just to start an exec).
HARNESS_GRACE_S = 20.0
#: How often the disk watchdog measures the container's writable layer while a session lives.
DISK_POLL_S = 0.5


def _upper_changes(upper: str) -> list[dict[str, Any]] | None:
    """``docker diff`` of an overlay2 upper folder: every entry under it is changed (0) or added (1; we cannot tell
    a modified file from an added one without the image, and callers only need the paths), a whiteout (a 0:0
    character device) is deleted (2). None if the folder vanished (the container is being removed)."""
    out: list[dict[str, Any]] = []
    try:
        for root, dirs, files in os.walk(upper, onerror=_raise):
            rel = root[len(upper) :] or "/"
            for name in dirs + files:
                path = os.path.join(root, name)
                st = os.lstat(path)
                deleted = stat.S_ISCHR(st.st_mode) and st.st_rdev == 0
                out.append({"Path": posixpath.join(rel, name), "Kind": 2 if deleted else 0})
    except OSError:
        return None
    return out


def _checker_command(source: str, timeout_s: float) -> str:
    """The checker's run: ``source`` writes the script to a fresh root-only folder, it runs from absolute paths
    with a clean environment and empty stdin, and the folder goes; leaves the status in ``$rc``."""
    return (
        "umask 077; rc=125; d=$(mktemp -d /run/bashgym/check.XXXXXXXX) && "
        f'{source} > "$d/check" && {{ '
        f"/usr/bin/timeout -s KILL {timeout_s:.3f} /usr/bin/env -i PATH={CHECK_PATH} HOME=/root USER=root "
        f'LOGNAME=root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 {BASH} --norc --noprofile "$d/check" '
        '</dev/null; rc=$?; }; [ -z "$d" ] || rm -rf "$d"; '
    )


def _cgroup_cpu_files(cid: str) -> list[str]:
    """Where the host keeps a container's CPU time: cgroup v1 (``cpuacct.usage``, ns) or v2 (``cpu.stat``'s
    ``usage_usec``), under the cgroupfs or the systemd driver."""
    root = "/sys/fs/cgroup"
    groups = (f"docker/{cid}", f"system.slice/docker-{cid}.scope")
    v1 = [f"{root}/{c}/{g}/cpuacct.usage" for c in ("cpuacct", "cpu,cpuacct") for g in groups]
    return [*v1, *(f"{root}/{g}/cpu.stat" for g in groups)]


def _read_cgroup_cpu(path: str) -> float | None:
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    try:
        if path.endswith("cpuacct.usage"):
            return int(text.strip()) / 1e9
        for line in text.splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
    except ValueError:
        pass
    return None


def _report_line(nonce: str) -> str:
    """The harness's last word on stderr: ``$rc`` behind a per-exec nonce. An exec that ends without it did not
    end by the harness's own hand (killed, the engine lost it): the machinery failed, not the check."""
    return f"printf '\\036BG:%s:0:%s\\036' {nonce} \"$rc\" >&2; "


def _layer_usage(upper: str) -> tuple[int, int] | None:
    """(bytes of the regular files, hard links once, as the engine's ``SizeRw`` counts them; paths changed, as
    ``docker diff`` lists them) of an overlay2 upper folder; None if the folder vanished (the container is gone)."""
    total = entries = 0
    seen: set[int] = set()
    try:
        for root, dirs, files in os.walk(upper, onerror=_raise):
            entries += len(dirs) + len(files)
            for name in files:
                st = os.lstat(os.path.join(root, name))
                if stat.S_ISREG(st.st_mode) and st.st_ino not in seen:
                    seen.add(st.st_ino)
                    total += st.st_size
    except OSError:
        return None
    return total, entries


def _raise(exc: OSError) -> None:
    raise exc


def _process_start_ticks(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "0"


def _boot_id() -> str:
    """This kernel's boot id: pid and start time name a process only within one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip().replace("-", "")[:16] or "unknown"
    except OSError:
        return "unknown"


def _pid_namespace() -> str:
    """This process's pid namespace: a pid means something only inside its namespace (a pipeline in a container
    that shares this engine and this kernel has its own)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "unknown"


def owner_label() -> str:
    """``host:pid:start:boot:pidns`` of this process: the reaper removes a container only when it can tell its
    owner is gone (same kernel and pid namespace and no such process, or this host rebooted since)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start_ticks(pid)}:{_boot_id()}:{_pid_namespace()}"


OwnerState = Literal["alive", "dead", "unknown"]


def owner_state(label: str) -> tuple[OwnerState, str]:
    """Whether the process named by an owner label is alive, dead or out of sight here, and why.

    "unknown" (another machine sharing the engine, another pid namespace on this one) is never reaped by owner:
    that owner's own reaper, the container's lease and its hard lifetime take care of it."""
    parts = label.split(":")
    host = socket.gethostname()
    if len(parts) == 5 and parts[1].isdigit():
        owner_host, pid, start, boot, pidns = parts[0], int(parts[1]), parts[2], parts[3], parts[4]
        if boot != _boot_id():
            if owner_host == host:
                return "dead", "this machine restarted since its owner ran"
            return "unknown", f"owned by a process on another machine ({owner_host})"
        if pidns != _pid_namespace():
            return "unknown", "owned by a process in another pid namespace (a container) on this machine"
        if os.path.exists(f"/proc/{pid}") and _process_start_ticks(pid) == start:
            return "alive", f"its owner (pid {pid}) is running"
        return "dead", f"its owner (pid {pid} on {owner_host}) has exited"
    # an older label (host:pid:start) or none: kept only when its owner is provably alive here
    if len(parts) == 3 and parts[0] == host and parts[1].isdigit():
        pid = int(parts[1])
        if os.path.exists(f"/proc/{pid}") and _process_start_ticks(pid) == parts[2]:
            return "alive", f"its owner (pid {pid}) is running"
    return "dead", f"no live owner ({label or 'no owner label'})"


class Leftover(BaseModel):
    """A sandbox container the reaper would remove, and why (``python -m bashgym_assets.sandbox reap --dry-run``)."""

    container_id: str
    name: str
    state: str  # the engine's word: running, exited, created ...
    owner: str
    purpose: str = ""  # gate, rollout, eval, solve, try ... (the ``bashgym.purpose`` label)
    scenario: str = ""
    age_s: float = 0.0
    why: str


_LIVE: dict[int, Sandbox] = {}
_LIVE_LOCK = threading.RLock()  # re-entrant: the SIGTERM handler may interrupt a holder on the main thread


@atexit.register
def _close_live_sandboxes() -> None:
    with _LIVE_LOCK:
        boxes = list(_LIVE.values())
    for box in boxes:
        box.close()


def _forget_parents_sandboxes() -> None:
    """In a forked child: the parent's sandboxes are the parent's (its exit would otherwise remove them, and its
    renewer would keep them alive after the parent died); the lock may have been held by a thread not copied."""
    global _LIVE_LOCK
    _LIVE_LOCK = threading.RLock()
    _LIVE.clear()


os.register_at_fork(after_in_child=_forget_parents_sandboxes)


_REAPED = threading.Event()


def reap_once() -> None:
    """Remove what dead owners left behind (containers whose owning process is gone), once per process.

    Why at the first sandbox of every process (the gate, rollouts, the evaluation, student rollouts, GRPO, the
    solver: they all open ``Sandbox``): a driver killed with SIGKILL runs no clean-up, and the next process that
    needs sandboxes is the natural moment to collect its containers, whichever path it takes.
    """
    if _REAPED.is_set():
        return
    _REAPED.set()
    with contextlib.suppress(Exception):  # no engine: the sandboxes themselves will say so, loudly
        reap_leftovers()
    reap_seed_folders()


def reap_seed_folders(root: str | None = None) -> list[str]:
    """Remove the bound-seed folders (``_seed_file``) of owners that are gone (a SIGKILLed process runs no exit
    handler); the folders removed."""
    removed = []
    root = root or tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            parts = name.split("-")
            if not (name.startswith(SEED_FOLDER_PREFIX) and len(parts) > 2 and parts[2].isdigit()):
                continue
            pid = int(parts[2])
            if pid == os.getpid() or os.path.exists(f"/proc/{pid}"):
                continue  # alive (or a reused pid: its folder waits for a later reaper)
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            removed.append(name)
    return removed


_SIGTERM_LOCK = threading.Lock()


def _on_sigterm(signum: int, frame: Any) -> None:
    """Remove this process's sandboxes, then die of SIGTERM as the default handler would have."""
    _close_live_sandboxes()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def install_exit_cleanup() -> bool:
    """Make SIGTERM (``kill``, ``docker stop``, ``timeout``) remove this process's live sandboxes before it dies:
    Python's default SIGTERM ends the process without ``atexit``. Only over the default handler (a framework that
    handles SIGTERM itself, like Dagster, already exits in order) and only from the main thread (Python's rule).
    Called by every ``Sandbox.start`` and ``SandboxPool``; a driver that opens sandboxes from worker threads only
    calls it once itself. Whether the handler is in place."""
    if threading.current_thread() is not threading.main_thread():
        return signal.getsignal(signal.SIGTERM) is _on_sigterm
    with _SIGTERM_LOCK:
        current = signal.getsignal(signal.SIGTERM)
        if current is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
            return True
        return current is _on_sigterm


@contextlib.contextmanager
def closing_sandboxes(boxes: Callable[[], Iterable[Sandbox | None]]) -> Iterator[None]:
    """For a driver that keeps sandboxes open across turns and opens them in worker threads (the evaluation,
    GRPO): SIGTERM removes them (the handler is installed here, on the driver's thread, which Python requires to
    be the main one), and on leaving the block, normally or by an exception (a model error, Ctrl-C), every
    sandbox ``boxes()`` then lists is removed, instead of living on until the interpreter exits."""
    install_exit_cleanup()
    try:
        yield
    finally:
        for box in list(boxes()):
            if box is not None:
                box.close()


_RENEWER: dict[str, Any] = {"pid": None}
_RENEW_WAKE = threading.Event()


def _ensure_renewer() -> None:
    """One daemon thread per process renews every live sandbox's lease (started again in a forked child)."""
    with _LIVE_LOCK:
        if _RENEWER["pid"] == os.getpid():
            return
        _RENEWER["pid"] = os.getpid()
    threading.Thread(target=_renew_leases, name="sandbox-lease", daemon=True).start()


def _renew_leases() -> None:
    """The renewer's loop. It must never die: its death would end every live sandbox one lease later."""
    while True:
        waits = [60.0]
        # a function of its own, so no closed sandbox (and its Docker client's sockets) stays referenced while
        # we wait
        with contextlib.suppress(Exception):
            _renew_due(waits)
        _RENEW_WAKE.wait(min(waits))
        _RENEW_WAKE.clear()


def _renew_due(waits: list[float]) -> None:
    """Renew the leases that are due; add to ``waits`` the time until each sandbox's next renewal."""
    with _LIVE_LOCK:
        boxes = list(_LIVE.values())
    now = time.monotonic()
    for box in boxes:
        every = box.renew_every_s
        if every is None:
            continue
        if now - box._renewed >= every:
            box.renew_lease()
        waits.append(max(0.2, every - (time.monotonic() - box._renewed)))


# ---- the seed as a bind mount ----------------------------------------------------------------------------------
# ``put_archive`` into a created container costs the engine ~100 ms of CPU per container (it mounts the container's
# root to write into it), a quarter of a whole container's life; a read-only bind of a host file costs ~8 ms
# (benchmarks/bench_factory_gate.py measures both). So on the engine's own machine the seed goes in as a bind.
_SEED_BIND: dict[str, Any] = {"ok": None, "dir": None, "pid": None}
_SEED_BIND_LOCK = threading.Lock()


def seed_bind_ok() -> bool:
    """Whether a sandbox's seed may go in as a read-only bind of a host file (else ``put_archive``, as before).

    Only when the file is certainly root's in the container and the engine reads our files: this process is root,
    the engine is on a local socket, and it remaps no user namespace (there the file would be nobody's and the
    start script could not read it). A non-root owner would be an account in the container (the operator's uid),
    able to read the seed's root-only files. Decided once per process; an engine that refuses the bind turns it
    off (``_seed_bind_refused``)."""
    with _SEED_BIND_LOCK:
        if _SEED_BIND["ok"] is None:
            ok = False
            with contextlib.suppress(Exception):
                client = docker_client()
                security = " ".join(client.info().get("SecurityOptions") or [])
                ok = (
                    os.geteuid() == 0
                    and client.api.base_url == "http+docker://localhost"
                    and "userns" not in security
                    and "rootless" not in security
                )
            _SEED_BIND["ok"] = ok
        return bool(_SEED_BIND["ok"])


def _seed_bind_refused(reason: str) -> None:
    """Turn the bind off for this process, and say so once: every later sandbox pays ``put_archive``'s cost."""
    with _SEED_BIND_LOCK:
        was_on = _SEED_BIND["ok"]
        _SEED_BIND["ok"] = False
    if was_on:
        log.warning(
            "the engine refused the seed's read-only bind (%s); this process's sandboxes get their seed with "
            "put_archive instead (about 100 ms more of the engine's CPU each)",
            reason.strip().splitlines()[0][:300] if reason.strip() else "no reason given",
        )


SEED_FOLDER_PREFIX = "bashgym-seeds-"


def _seed_file(seed: bytes) -> str:
    """The seed in a root-only host file for one container's bind, in this process's folder: ``close()`` removes
    the file (not before: the engine mounts it again for every archive call, the lease's renewal among them), the
    folder goes at exit, or with ``reap_seed_folders`` once its process is gone."""
    with _SEED_BIND_LOCK:
        if _SEED_BIND["pid"] != os.getpid() or not os.path.isdir(_SEED_BIND["dir"] or ""):
            folder = tempfile.mkdtemp(prefix=f"{SEED_FOLDER_PREFIX}{os.getpid()}-")
            _SEED_BIND.update(dir=folder, pid=os.getpid())
            atexit.register(shutil.rmtree, folder, True)
        folder = _SEED_BIND["dir"]
    fd, path = tempfile.mkstemp(dir=folder, suffix=".tar")  # mode 0600
    with os.fdopen(fd, "wb") as out:
        out.write(seed)
    return path


_HOME_SKELETONS: dict[tuple[str, str], list[tuple[tarfile.TarInfo, bytes]]] = {}
_HOME_LOCK = threading.Lock()


def _home_skeleton(image: str, home: str) -> list[tuple[tarfile.TarInfo, bytes]]:
    """The image's ``home`` folder (tar members, the folder itself first), read once per image and home: the tmpfs
    mounted there hides it."""
    with _HOME_LOCK:
        if (image, home) in _HOME_SKELETONS:
            return _HOME_SKELETONS[(image, home)]
        api = docker_client().api
        try:
            created = api.create_container(
                image,
                command=["true"],
                network_disabled=True,
                labels={LABEL_SANDBOX: "skeleton", LABEL_OWNER: owner_label()},
            )
        except NotFound as exc:
            raise SandboxError(
                f"sandbox image {image!r} not found: build it with `python -m bashgym_assets.images`"
            ) from exc
        try:
            stream, _ = api.get_archive(created["Id"], home)
            data = b"".join(stream)
        finally:
            api.remove_container(created["Id"], force=True)
        members = []
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for info in tar.getmembers():
                if not (info.isfile() or info.isdir() or info.issym()):
                    continue
                fh = tar.extractfile(info) if info.isfile() else None  # None for folders and links
                content = fh.read() if fh is not None else b""
                info.name = posixpath.join(posixpath.dirname(home).lstrip("/"), info.name.lstrip("./"))
                members.append((info, content))
        _HOME_SKELETONS[(image, home)] = members
        return members


def _made_home_skeleton(account: SessionAccount) -> list[tuple[tarfile.TarInfo, bytes]]:
    """The home of an account the container makes (``in_image`` False) as the seed carries it: the folder, private
    to the account, and its ``.gitconfig`` (what the image gives operator's home)."""
    now = int(time.time())
    folder = tarfile.TarInfo(account.home.lstrip("/"))
    folder.type, folder.mode = tarfile.DIRTYPE, 0o750
    body = account_gitconfig(account).encode()
    gitconfig = tarfile.TarInfo(posixpath.join(account.home.lstrip("/"), ".gitconfig"))
    gitconfig.size, gitconfig.mode = len(body), 0o644
    for info in (folder, gitconfig):
        info.uid, info.gid, info.uname, info.gname, info.mtime = account.uid, account.gid, "", "", now
    return [(folder, b""), (gitconfig, body)]


def _seed_tar(
    files: dict[str, str],
    owners: Sequence[SessionAccount] = HOME_OWNERS,
    skeleton: Sequence[tuple[tarfile.TarInfo, bytes]] = (),
    session_uid: int = OPERATOR_UID,
    backstop: bool = False,
    lease: str | None = None,
) -> bytes:
    """The home skeletons and the spec's files as one tar for extraction at ``/`` by root: a file under the home of
    one of ``owners`` is that account's, any other root's.

    No directory entries for folders outside a home (that would reset an existing folder's owner and mode);
    tar creates missing parents as root 0755.
    """
    buf = io.BytesIO()
    now = int(time.time())
    made: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, body in skeleton:
            tar.addfile(info, io.BytesIO(body) if info.isfile() else None)
        for path, content in files.items():
            account = next((a for a in owners if path.startswith(a.home.rstrip("/") + "/")), None)
            mine = account is not None
            home, uid, gid = (account.home, account.uid, account.gid) if account else ("", 0, 0)
            if mine:  # folders between home and the file belong to the user too
                parts = path[len(home) :].strip("/").split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    folder = home.rstrip("/") + "/" + "/".join(parts[:i])
                    if folder not in made:
                        made.add(folder)
                        info = tarfile.TarInfo(folder.lstrip("/"))
                        info.type, info.mode, info.uid, info.gid, info.mtime = (
                            tarfile.DIRTYPE,
                            0o755,
                            uid,
                            gid,
                            now,
                        )
                        tar.addfile(info)
            data = content.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mtime = len(data), now
            info.mode = 0o755 if content.startswith("#!") else 0o644
            info.uid, info.gid = (uid, gid) if mine else (0, 0)
            tar.addfile(info, io.BytesIO(data))
        # the harness's own folders on the /run tmpfs, and the ready marker last
        for path, mode, owner in (
            (RUN_DIR, 0o755, 0),
            (SESSION_DIR, 0o700, session_uid),
            ("/run/lock", 0o1777, 0),
        ):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, mode, owner, 0, now
            tar.addfile(info)
        if backstop:  # before the ready marker: the start script runs it right after the extraction
            data = BACKSTOP_SCRIPT.encode()
            info = tarfile.TarInfo(BACKSTOP_FILE.lstrip("/"))
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), 0o700, 0, 0, now
            tar.addfile(info, io.BytesIO(data))
        if lease is not None:  # the first lease, in place before the backstop reads it
            _add_lease(tar, lease)
        info = tarfile.TarInfo(READY_FILE.lstrip("/"))
        info.mtime = now
        tar.addfile(info, io.BytesIO(b""))
    return buf.getvalue()


def _add_lease(tar: tarfile.TarFile, value: str) -> None:
    data = (value + "\n").encode()
    info = tarfile.TarInfo(LEASE_FILE.lstrip("/"))
    info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _lease_tar(value: str) -> bytes:
    """A tar that replaces ``LEASE_FILE`` (``put_archive``: no process starts in the container)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add_lease(tar, value)
    return buf.getvalue()


class Sandbox:
    """One fresh container for one episode (context manager; the container is always removed)."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.image = spec.image
        self.container_id: str | None = None
        self._session: Any = None
        self._closed = False
        self._lock = threading.RLock()
        #: Set by the disk watchdog when the writable layer outgrew ``spec.disk_budget_mb`` (session ended).
        self.disk_budget_exceeded = False
        self._watch_stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        #: Set by the watchdog when the container changed more than ``spec.inode_budget`` paths.
        self.inode_budget_exceeded = False
        self._baseline: dict[str, str] | None = None
        self._upper: str | None = None  # the overlay2 upper folder on the host ("" when not readable)
        self._in_setup = False
        self._renewed = 0.0  # monotonic time of the last lease renewal
        self._lease_serial = 0
        self._cpu_file: str | None = None  # the container's cgroup CPU counter on the host ("" when none)
        self._cpu_api = True  # whether the engine's stats may still be asked for it
        # the host file bound as the seed (seed_bind_ok), removed by close()
        self._seed_path: str | None = None

    @property
    def lifetime_s(self) -> int:
        """The hard lifetime: every limit the spec sets (each setup command, the session, a check) plus a margin.
        The backstop ends the container then even if its owner still renews the lease."""
        spec = self.spec
        return int(spec.episode_timeout_s + spec.setup_timeout_s * (len(spec.setup) + 1) + LIFETIME_MARGIN_S)

    @property
    def renew_every_s(self) -> float | None:
        """How often the owner renews the lease (None: no lease, e.g. a read-only root the engine cannot write)."""
        if self.spec.lease_s <= 0 or self.spec.read_only_root or self._closed or self.container_id is None:
            return None
        return min(60.0, max(0.5, self.spec.lease_s / 10))

    def renew_lease(self) -> bool:
        """Tell the backstop that the owner is alive (a new value in ``LEASE_FILE``); never raises."""
        if self.renew_every_s is None:
            return False
        self._lease_serial += 1
        self._renewed = time.monotonic()
        try:
            self.api.put_archive(self.container_id, "/", _lease_tar(f"{os.getpid()}.{self._lease_serial}"))
            return True
        except Exception:  # noqa: BLE001 - gone or being removed: nothing to keep alive
            return False

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def api(self) -> Any:
        return docker_client().api

    def start(self) -> None:
        """Create and start the container and write the files (setup is separate: ``setup()``)."""
        if self.container_id is not None:
            return
        spec = self.spec
        # the command is stopping (SIGTERM, Ctrl-C): no new container to clean up after
        if stopping.requested():
            raise SandboxError("not starting a sandbox: this command is stopping")
        reap_once()  # whatever path opens sandboxes, dead owners' leftovers go first
        install_exit_cleanup()
        if self.image is None:
            from bashgym_assets.images import sandbox_image_tag

            self.image = sandbox_image_tag()
        account = SESSION_ACCOUNTS[spec.user]
        # The homes on a size-capped tmpfs: the operator's in every container (as ever), and a service account's
        # when the session is that account's, so whatever the session user writes in its home hits a cap in
        # memory. Their image content (dotfiles) is copied back in by the seed: the tmpfs hides it.
        tmpfs_homes = [SESSION_ACCOUNTS[OPERATOR_USER].home]
        if account.uid != 0 and account.home not in tmpfs_homes:
            tmpfs_homes.append(account.home)
        # An account the image does not have (the service account) is made by the start script before the seed
        # (which then carries its home) and only in its own sessions: see layout.account_setup_shell.
        make_account = "" if account.in_image else account_setup_shell(account) + " || exit 97; "
        if make_account and spec.read_only_root:
            raise SandboxError(
                f"a read-only root cannot make {account.describe}: run it with a writable root"
            )
        skeleton = [
            m
            for home in tmpfs_homes
            for m in (
                _home_skeleton(self.image, home)
                if home != account.home or account.in_image
                else _made_home_skeleton(account)
            )
        ]
        tmpfs_mb = spec.tmpfs_mb or max(16, spec.memory_mb // 4)
        # The backstop: the container ends (and --rm removes it) once the owner stopped renewing its lease or the
        # whole budget is certainly spent, whichever comes first.
        lifetime = self.lifetime_s
        lease = int(max(1.0, spec.lease_s)) if spec.lease_s > 0 and not spec.read_only_root else 0
        tick = max(1, min(10, lease // 4)) if lease else 10
        session_uid = account.uid
        # One tar (the seed) carries the home skeleton, the spec's files, /run/bashgym and, last, the ready marker:
        # the start script is a single extraction, so the container is usable a few ms after start.
        start_script = make_account + (
            f"if [ -e {SEED_TAR} ]; then tar -x -p -C / -f {SEED_TAR}; rm -rf {SEED_DIR}; "
            f"elif [ -f {SEED_MOUNT} ]; then tar -x -p -C / -f {SEED_MOUNT}; fi; "
            f"[ ! -f {BACKSTOP_FILE} ] || exec {BASH} --norc --noprofile {BACKSTOP_FILE} "
            f"{lifetime} {lease} {tick}; exec sleep {lifetime}"
        )
        now = int(time.time())
        labels = {
            **spec.labels,
            LABEL_SANDBOX: "1",
            LABEL_OWNER: owner_label(),
            LABEL_CREATED: str(now),
            LABEL_EXPIRES: str(now + lifetime + 60),
        }
        # exec: Docker mounts --tmpfs noexec by default; operators must be able to run the scripts they write.
        # nr_inodes: a tmpfs would otherwise hold millions of empty files (each costs kernel memory, not size).
        tmp_opts = f"rw,exec,nosuid,nodev,size={tmpfs_mb}m,nr_inodes={spec.inode_budget}"
        # The seed: a bound host file on the engine's machine (seed_bind_ok), else put in before start.
        bind = not spec.read_only_root and seed_bind_ok()
        seed = _seed_tar(
            spec.files,
            home_owners(spec.user),
            skeleton,
            session_uid,
            backstop=not spec.read_only_root,
            lease=None if spec.read_only_root else f"{os.getpid()}.0",
        )
        seed_path = _seed_file(seed) if bind else None
        # close() removes it, and not before: the engine mounts it again for every archive call (the lease's
        # renewal, a tamper check's stat), and fails them all once it is gone
        self._seed_path = seed_path
        try:
            self._create(spec, start_script, labels, tmp_opts, tmpfs_homes, seed_path)
        except APIError as exc:
            if seed_path is None or "mount" not in str(exc).lower():
                raise
            # an engine that cannot see our file (another machine or mount namespace behind a local socket)
            _seed_bind_refused(str(exc))
            with contextlib.suppress(OSError):
                os.unlink(seed_path)
            self._seed_path = seed_path = None
            self._create(spec, start_script, labels, tmp_opts, tmpfs_homes, None)
        if seed_path is None and not spec.read_only_root:  # the seed goes in before start, unpacked by it
            folder = io.BytesIO()
            with tarfile.open(fileobj=folder, mode="w") as tar:
                info = tarfile.TarInfo(SEED_DIR.lstrip("/"))
                info.type, info.mode = tarfile.DIRTYPE, 0o700
                tar.addfile(info)
                info = tarfile.TarInfo(SEED_TAR.lstrip("/"))
                info.size, info.mode = len(seed), 0o600
                tar.addfile(info, io.BytesIO(seed))
            self.api.put_archive(self.container_id, "/", folder.getvalue())
        self.api.start(self.container_id)
        self._renewed = time.monotonic()
        if self.renew_every_s is not None:
            _ensure_renewer()
            _RENEW_WAKE.set()  # the renewer recomputes its wait (this box may want it sooner)
        # Disk and inodes are bounded from start to removal (setup and the check can be teacher-authored too).
        self._start_disk_watchdog()
        if spec.read_only_root:
            self._write_seed(seed)

    def _create(
        self,
        spec: SandboxSpec,
        start_script: str,
        labels: dict[str, str],
        tmp_opts: str,
        tmpfs_homes: list[str],
        seed_path: str | None,
    ) -> None:
        """Create the container (not started) and register it as live."""
        host_config = self.api.create_host_config(
            network_mode="none",
            cap_drop=["ALL"],
            cap_add=list(SCENARIO_CAPABILITIES),
            # seccomp: Docker's documented denials plus no ptrace between sandbox processes (sandbox/seccomp.py)
            security_opt=["no-new-privileges", f"seccomp={profile_json(spec.allow_ptrace)}"],
            # PID 1's output (root can write to it) must not grow a log on the host's disk without a bound
            log_config=LogConfig(type="none"),
            mem_limit=f"{spec.memory_mb}m",
            memswap_limit=f"{spec.memory_mb}m",
            nano_cpus=int(spec.cpus * 1e9),
            pids_limit=spec.pids_limit,
            init=True,
            read_only=spec.read_only_root,
            tmpfs={
                "/tmp": f"{tmp_opts},mode=1777",
                "/var/tmp": f"{tmp_opts},mode=1777",
                "/run": "rw,nosuid,nodev,size=16m,nr_inodes=4096,mode=755",
                **{home: f"{tmp_opts},mode=755" for home in tmpfs_homes},
            },
            shm_size="16m",
            ulimits=[
                Ulimit(name="fsize", soft=spec.max_file_mb << 20, hard=spec.max_file_mb << 20),
                Ulimit(name="nofile", soft=1024, hard=1024),
            ],
            auto_remove=True,
            mounts=(
                [Mount(target=SEED_MOUNT, source=seed_path, type="bind", read_only=True)]
                if seed_path
                else None
            ),
        )
        try:
            created = self.api.create_container(
                self.image,
                command=["/bin/sh", "-c", start_script],
                hostname="sandbox",
                user="0",
                working_dir="/",
                labels=labels,
                host_config=host_config,
                environment={"PATH": PATH, "LANG": "C.UTF-8"},
                network_disabled=True,
            )
        except NotFound as exc:
            raise SandboxError(
                f"sandbox image {self.image!r} not found: build it with `python -m bashgym_assets.images`"
            ) from exc
        self.container_id = created["Id"]
        # renewed "now": the lease renewer (woken by any other sandbox's start) must not count this one as a
        # lease never renewed and write one into a container not started yet (~100 ms of the engine's CPU each)
        self._renewed = time.monotonic()
        with _LIVE_LOCK:
            _LIVE[id(self)] = self

    def close(self) -> None:
        """Remove the container (idempotent, never raises)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._watch_stop.set()
        with _LIVE_LOCK:
            _LIVE.pop(id(self), None)
        if self._session is not None:
            self._session.mark_dead()
        try:
            if self.container_id is None:
                return
            try:
                self.api.remove_container(self.container_id, force=True)
            except (NotFound, APIError):
                pass  # already gone (--rm) or being removed
            except Exception:  # noqa: BLE001 - a close must never mask the caller's own exception
                pass
        finally:
            if self._seed_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self._seed_path)
                self._seed_path = None

    def cpu_time_s(self) -> float | None:
        """CPU seconds the container's processes have used since it started: its cgroup's counter, read on the host
        (no engine call), else the engine's stats; None when neither tells. A step's timer is weighed against it
        (``scenarios.gate``): a container that worked while the machine was loaded was starved, one that used no
        CPU waited on something no load explains."""
        cid = self.container_id
        if cid is None or self._closed:
            return None
        if self._cpu_file is None:
            self._cpu_file = next((p for p in _cgroup_cpu_files(cid) if os.path.exists(p)), "")
        if self._cpu_file:
            value = _read_cgroup_cpu(self._cpu_file)
            if value is not None:
                return value
        if not self._cpu_api:
            return None
        try:
            stats = self.api.stats(cid, stream=False, one_shot=True)
            return int(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9
        except Exception:  # noqa: BLE001 - an engine without one-shot stats: say nothing, never ask again
            self._cpu_api = False
            return None

    def require_running(self) -> str:
        """The container id; ``SandboxError`` before the start or after the close (the shell session asks too)."""
        if self.container_id is None or self._closed:
            raise SandboxError("the sandbox is not started (use it as a context manager) or already closed")
        return self.container_id

    # ---- root execs --------------------------------------------------------------------------------------
    def _root_env(self) -> dict[str, str]:
        return {
            "PATH": PATH,
            "HOME": "/root",
            "USER": "root",
            "LOGNAME": "root",
            "LANG": "C.UTF-8",
            **self.spec.env,
        }

    def exec_root(
        self,
        command: str,
        script: str,
        args: list[str],
        timeout_s: float,
        stdin_data: bytes | None = None,
        limit: int | None = None,
        user: str = "0",
        nonce: str | None = None,
    ) -> CommandResult:
        """Run ``script`` (bash, as root unless ``user`` says otherwise, with ``args``) and collect it within
        ``timeout_s`` (+ a grace).

        An exec the engine refuses to start while the container runs (its pids limit is full, e.g. after a fork
        bomb) is retried for a while: the processes come and go, and the first root script that gets in kills them.

        ``nonce``: the script ends with ``_report_line(nonce)``, and its status is the one reported there. Then
        an exec that ends without that line, or that outlives its own in-container timer by ``HARNESS_GRACE_S``,
        is the machinery's failure (``SandboxError``), never a result.
        """
        cid = self.require_running()
        refused = ""
        grace = HARNESS_GRACE_S if nonce else 5.0
        for _attempt in range(40):
            start = time.monotonic()
            try:
                stream = ExecStream(
                    self.api,
                    cid,
                    [
                        BASH,
                        "--norc",
                        "--noprofile",
                        "-c",
                        f"{ATTACHED_WAIT}\n{READY_WAIT}\n{script}",
                        "bashgym",
                        *args,
                    ],
                    user=user,
                    env=self._root_env(),
                    workdir="/",
                    stdin=True,  # ATTACHED_WAIT: nothing runs before the stream is attached
                )
            except (NotFound, APIError) as exc:
                raise SandboxError(
                    f"cannot run {command!r}: the container is gone or stopped ({exc})"
                ) from exc
            cap = limit or self.spec.output_limit_bytes
            try:
                out, err, ended = collect(
                    stream,
                    start + timeout_s + grace,
                    cap,
                    stdin_data=ATTACHED + (stdin_data or b""),
                    err=MarkerSplitter(nonce, cap) if nonce else None,
                )
                code = stream.exit_code() if ended else None
            finally:
                stream.close()
            duration = time.monotonic() - start
            said = bytes(out.head).decode(errors="replace")
            if not (code == 126 and "OCI runtime exec failed" in said):
                if nonce:
                    return self._reported(command, out, err, ended, code, duration, timeout_s, grace)
                timed_out = not ended or (code in (124, 137) and duration >= timeout_s * 0.98)
                return command_result(command, out, err, None if timed_out else code, duration, timed_out)
            try:
                running = self.api.inspect_container(cid)["State"]["Running"]
            except (NotFound, APIError):
                running = False
            if not running:
                raise SandboxError(
                    f"cannot run {command!r}: the container is no longer running (was its main "
                    "process killed from inside?)"
                )
            refused = said.strip()[:300]
            time.sleep(0.05)
        raise SandboxError(
            f"cannot run {command!r}: the engine could not start it in the container "
            f"(pids limit full?): {refused}"
        )

    @staticmethod
    def _reported(
        command: str,
        out: CappedBuffer,
        err: MarkerSplitter,
        ended: bool,
        code: int | None,
        duration: float,
        timeout_s: float,
        grace: float,
    ) -> CommandResult:
        """The result of a harness exec with a report line (``exec_root(nonce=...)``), or the machinery's failure."""
        if not ended:
            raise SandboxError(
                f"infrastructure: {command!r} did not end within {timeout_s + grace:.0f} s although "
                f"its own timer ends it after {timeout_s:g} s (the engine or the machine is stalled)"
            )
        if not err.pieces:
            said = bytes(err.finish().head).decode(errors="replace").strip()[-300:]
            raise SandboxError(
                f"infrastructure: {command!r} ended without its report line (exit code {code}: the "
                f"harness was killed or the engine lost its output){': ' + said if said else ''}"
            )
        buf, fields = err.pieces[0]
        rest = err.finish()
        if rest.total:
            buf.feed(bytes(rest.head) + bytes(rest.tail[-rest.tail_limit :] if rest.tail_limit else b""))
        rc = int(fields[0]) if fields and fields[0].isdigit() else None
        timed_out = rc in (124, 137) and duration >= timeout_s * 0.98
        return command_result(command, out, buf, None if timed_out else rc, duration, timed_out)

    def run_as_root(self, command: str, timeout_s: float | None = None) -> CommandResult:
        """One command as root in a fresh ``bash -c`` (harness use: setup, inspection); stdin is empty."""
        t = timeout_s or self.spec.command_timeout_s
        script = f'exec /usr/bin/timeout -s KILL {t:.3f} {BASH} --norc --noprofile -c "$1" </dev/null'
        return self.exec_root(command, script, [command], t)

    def _write_seed(self, data: bytes) -> None:
        res = self.exec_root("write files", "tar -x -p -C / -f -", [], 60.0, stdin_data=data)
        if res.exit_code != 0:
            raise SandboxError(
                f"writing the spec's files failed ({res.exit_code}): {res.stderr.strip()[-500:]}"
            )

    def check_command(self, script: str, timeout_s: float = 30.0) -> str | None:
        """The checker as one root command for ``setup(then=...)``: the same isolation as ``run_check`` before any
        operator (a root-only folder, absolute paths, a clean environment, empty stdin), the script carried in the
        command itself. None when the script is too long for one argument (use ``run_check``)."""
        if len(script.encode()) > MAX_INLINE_CHECK:
            return None
        body = "'" + script.replace("'", "'\\''") + "'"
        return _checker_command(f"printf %s {body}", timeout_s) + "exit $rc"

    def setup(self, then: Sequence[str] = ()) -> SetupResult:
        """Run ``spec.setup`` as root, in order, stopping at the first failure (all in one exec: fast).

        ``then``: harness commands (a workdir test, ``check_command``) run in the same exec once every setup
        command succeeded, stopping after the first that exits non-zero; their results are ``SetupResult.then``.
        The gate uses it to run the check on the untouched setup without an exec of its own."""
        commands = [*self.spec.setup, *then]
        n_setup = len(self.spec.setup)
        if not commands:
            return SetupResult(ok=True, results=[], error=None)
        cid = self.require_running()
        t = self.spec.setup_timeout_s
        nonce = secrets.token_hex(16)
        limit = self.spec.output_limit_bytes
        out, err = MarkerSplitter(nonce, limit), MarkerSplitter(nonce, limit)
        start = time.monotonic()
        try:
            stream = ExecStream(
                self.api,
                cid,
                [
                    BASH,
                    "--norc",
                    "--noprofile",
                    "-c",
                    f"{ATTACHED_WAIT}\n{READY_WAIT}\n{SETUP_SCRIPT}",
                    "bashgym",
                    nonce,
                    f"{t:.3f}",
                    *commands,
                ],
                user="0",
                env=self._root_env(),
                workdir="/",
                stdin=True,  # ATTACHED_WAIT; the setup's commands read /dev/null, never this stdin
            )
        except (NotFound, APIError) as exc:
            raise SandboxError(
                f"cannot run the setup: the container is gone or the engine failed ({exc})"
            ) from exc
        with contextlib.suppress(OSError):  # a dead stream ends at once and reads as one, below
            stream.send(ATTACHED)
        stream.close_stdin()
        deadline = start + t * len(commands) + HARNESS_GRACE_S
        ended_early = False
        self._in_setup = True
        try:
            while time.monotonic() < deadline:
                frames = stream.read(min(1.0, deadline - time.monotonic()))
                if frames is None:
                    ended_early = True
                    break
                for kind, payload in frames:
                    (err if kind == 2 else out).feed(payload)
        finally:
            self._in_setup = False
            stream.close()
        if self.disk_budget_exceeded or self.inode_budget_exceeded:  # the scenario's fault, not the engine's
            return SetupResult(ok=False, results=[], error=f"setup: {self.budget_message()}")
        if not (out.in_order() and err.in_order()):
            # Read on, each report would be taken for another command's (a setup command "failing" with the check's
            # output): the machinery's failure, which callers retry in a fresh sandbox.
            return SetupResult(
                ok=False,
                results=[],
                infrastructure_error=True,
                error=(
                    "the engine lost part of the setup exec's output (its reports came as "
                    f"{out.indices} and {err.indices}): the setup's results cannot be told apart"
                ),
            )
        results: list[CommandResult] = []
        for i, (buf, fields) in enumerate(out.pieces):
            err_buf = err.pieces[i][0] if i < len(err.pieces) else CappedBuffer(limit)
            rc, began, ended = int(fields[0]), float(fields[1]), float(fields[2])
            duration = ended - began
            timed_out = rc == 137 and duration >= t * 0.98
            results.append(
                command_result(commands[i], buf, err_buf, None if timed_out else rc, duration, timed_out)
            )
        if ended_early and len(results) < len(commands) and (not results or results[-1].exit_code == 0):
            results += self._dropped_reports(nonce, commands, results, out, err, limit, t)
        then_results = results[n_setup:]
        results = results[:n_setup]
        if (
            len(then_results) < len(then)
            and len(results) == n_setup
            and all(r.exit_code == 0 for r in results)
        ):
            if not then_results or then_results[-1].exit_code == 0:  # a harness command never reported
                then_results = []  # the caller runs them on their own
            return SetupResult(ok=True, results=results, error=None, then=then_results)
        commands = commands[:n_setup]
        if len(results) < len(commands) and (not results or results[-1].exit_code == 0):
            # A command that never reported: its own in-container timer ends it after t seconds and the harness
            # reports it then (a time-out is ``exited 137`` after t, the command's fault), so a missing report is
            # the machinery's: the exec died (the container, the engine, or the harness killed) or it outran every
            # timer (a stalled engine or machine). Callers retry in a fresh sandbox.
            i = len(results)
            elapsed = time.monotonic() - start
            if ended_early:
                code = stream.exit_code(wait_s=0.5)
                said = " | ".join(repr(bytes(b.head)[-200:]) for b in (out.finish(), err.finish()) if b.total)
                why = (
                    f"the setup exec ended after {elapsed:.1f} s (exit code {code}; the container died, the "
                    f"engine failed or the harness was killed){'; it said ' + said if said else ''}"
                )
            else:
                why = (
                    f"the setup exec outran every command's own {t:g} s timer ({elapsed:.1f} s in all; the "
                    "engine or the machine is stalled)"
                )
            return SetupResult(
                ok=False,
                results=results,
                infrastructure_error=True,
                error=f"setup command {i + 1}/{len(commands)} never reported: {why}: {commands[i]}",
            )
        for i, res in enumerate(results):
            if res.timed_out or res.exit_code != 0:
                why = "timed out" if res.timed_out else f"exited {res.exit_code}"
                detail = (res.stderr or res.stdout).strip()[-1000:]
                return SetupResult(
                    ok=False,
                    results=results,
                    error=f"setup command {i + 1}/{len(commands)} {why}: {commands[i]}\n{detail}",
                )
        return SetupResult(ok=True, results=results, error=None, then=then_results)

    def _dropped_reports(
        self,
        nonce: str,
        commands: Sequence[str],
        results: Sequence[CommandResult],
        out: MarkerSplitter,
        err: MarkerSplitter,
        limit: int,
        t: float,
    ) -> list[CommandResult]:
        """The results of the setup commands whose reports the engine dropped with the end of the exec's output,
        from the root-only report file (``SETUP_SCRIPT``); their output is what arrived after the last report
        (all of it the first such command's). [] when the file does not have them either."""
        reports = MarkerSplitter(nonce, limit)
        for _attempt in range(2):  # the read is an exec too: its own output can be dropped the same way
            try:
                said = self.run_as_root(f"cat {SETUP_REPORTS}/{nonce}", timeout_s=10).stdout
            except SandboxError:
                return []
            reports = MarkerSplitter(nonce, limit)
            reports.feed(said.encode())
            if len(reports.pieces) > len(results):
                break
        rest_out, rest_err = out.finish(), err.finish()
        found = []
        for i, (_, fields) in enumerate(reports.pieces[len(results) : len(commands)], start=len(results)):
            rc, began, ended = int(fields[0]), float(fields[1]), float(fields[2])
            timed_out = rc == 137 and ended - began >= t * 0.98
            stdout = rest_out if i == len(results) else CappedBuffer(limit)
            stderr = (
                err.pieces[i][0]
                if i < len(err.pieces)
                else rest_err
                if i == len(err.pieces)
                else CappedBuffer(limit)
            )
            found.append(
                command_result(
                    commands[i], stdout, stderr, None if timed_out else rc, ended - began, timed_out
                )
            )
        return found

    # ---- the operator ------------------------------------------------------------------------------------
    def session(self, verify_tools: bool = True) -> Any:
        """The persistent shell as ``spec.user`` in ``spec.workdir`` (one per sandbox; a second call returns it).

        ``verify_tools=False`` skips the tamper check of the checker's tools for a root session: only for a shell
        that plays the scenario's own reference (the gate), whose author wrote the check too, never a model."""
        from bashgym_assets.sandbox.session import SandboxSession

        self.require_running()
        if self._session is None or self._session.exited:
            if self.spec.user == "root" and self._baseline is None and verify_tools:
                # What setup changed in the checker's tools (normally nothing): only root can change them, and
                # the engine's layer diff costs ~0.4 s, so only root sessions pay for it.
                self._baseline = self._protected_changes()
            self._session = SandboxSession(self)
        return self._session

    # ---- the disk watchdog -------------------------------------------------------------------------------
    def _start_disk_watchdog(self) -> None:
        """Watch the writable layer from start to removal: the storage driver here has no per-container quota,
        so without this a root command (setup, the operator or the check) could fill the host's disk one
        capped-size file at a time, or with millions of empty files."""
        if self._watchdog is not None and self._watchdog.is_alive():
            return
        self._watchdog = threading.Thread(
            target=self._watch_disk, name=f"disk-watchdog-{id(self)}", daemon=True
        )
        self._watchdog.start()

    def writable_layer_bytes(self) -> int | None:
        """How much the container wrote to its writable image layer (None once the container is gone)."""
        if self.container_id is None:
            return None
        upper = self._upper_dir()
        if upper is not None:  # the engine would walk the same folder, plus an API round trip and its CPU
            usage = _layer_usage(upper)
            return usage[0] if usage is not None else None
        try:
            found = self.api.containers(all=True, size=True, filters={"id": self.container_id})
        except (APIError, OSError):
            return None
        return int(found[0].get("SizeRw") or 0) if found else None

    def changed_paths(self) -> list[dict[str, Any]] | None:
        """The container's layer diff (``docker diff``: Path, Kind), None once the container is gone.

        Read from the overlay2 upper folder on the host when this process can (root on the engine's machine):
        that folder holds exactly what changed, so a walk of it is what ``docker diff`` does natively, without the
        engine's naive fallback that walks the whole image (~0.4 s of the engine's CPU when idle, seconds under
        load, twice per root episode). Otherwise the engine computes it."""
        if self.container_id is None or self._closed:
            return None
        upper = self._upper_dir()
        if upper is not None:
            found = _upper_changes(upper)
            if found is not None:
                return found
        try:
            return self.api.diff(self.container_id) or []
        except (APIError, NotFound, OSError):
            return None

    def _upper_dir(self) -> str | None:
        """The container's writable overlay2 layer on the host, if this process can read it (cached)."""
        if self._upper is None:
            self._upper = ""
            try:
                data = self.api.inspect_container(self.container_id)
                if data.get("GraphDriver", {}).get("Name") == "overlay2":
                    upper = data["GraphDriver"]["Data"].get("UpperDir") or ""
                    if upper and os.access(upper, os.R_OK | os.X_OK):
                        self._upper = upper
            except (APIError, NotFound, OSError, KeyError, TypeError):
                pass
        return self._upper or None

    def _watch_disk(self) -> None:
        budget = self.spec.disk_budget_mb << 20
        polls = 0
        wait = DISK_POLL_S
        while not self._watch_stop.wait(wait):
            if self._closed or self.container_id is None:
                return
            polls += 1
            over_inodes = False
            size: int | None
            upper = self._upper_dir()
            if upper is not None:
                # One walk of the overlay2 upper folder gives both the bytes and the paths the layer changed, every
                # poll, with no engine call (its container list with sizes cost more CPU than the gate's commands).
                began = time.monotonic()
                usage = _layer_usage(upper)
                wait = max(DISK_POLL_S, 3 * (time.monotonic() - began))  # a huge layer is walked less often
                if usage is None:  # the container is gone: nothing left to guard
                    return
                size, entries = usage
                over_inodes = entries > self.spec.inode_budget
            else:
                size = self.writable_layer_bytes()
                if size is None:  # the container is gone: nothing left to guard
                    return
                # Paths in the layer: outside the inode-capped tmpfs folders they are made by root (setup, a root
                # session, the check) or by a service account in the folders its service keeps on the layer
                # (/srv/<app>, /var/lib/<app>, /var/log/<app>: where its work is). The engine's diff costs ~0.4 s of
                # its CPU, so every 10 s, and only then.
                layer_writer = self._in_setup or self.spec.user != OPERATOR_USER
                if layer_writer and polls % 20 == 0:
                    changed = self.changed_paths()
                    over_inodes = changed is not None and len(changed) > self.spec.inode_budget
            if size > budget or over_inodes:
                self.disk_budget_exceeded = size > budget
                self.inode_budget_exceeded = over_inodes
                with contextlib.suppress(Exception):  # whatever runs in there (setup, operator, check) ends
                    self.kill_new_processes(self._session.preexisting_pids if self._session else {1})
                    if self._session is not None:
                        self._session.mark_dead()
                return

    def kill_session_processes(self) -> None:
        """End the operator's shell and everything it started (background jobs, daemons, orphans).

        Whatever existed before the session began (init, setup's daemons) is kept.
        """
        sess = self._session
        if sess is None or self.container_id is None or self._closed:
            return
        self.kill_new_processes(sess.preexisting_pids)
        sess.mark_dead()

    def kill_new_processes(self, keep: set[int]) -> None:
        """Kill every process but ``keep`` (the pids that existed before the session): used by the session when
        its shell exits and by the sandbox when a budget is spent."""
        self.exec_root("kill session processes", KILL_NEW_SCRIPT, [str(p) for p in sorted(keep)], 10.0)

    # ---- the checker -------------------------------------------------------------------------------------
    def run_check(self, script: str, timeout_s: float = 30.0) -> CommandResult:
        """Run the checker as root on the final state; it exists in the container only while it runs.

        1. The operator's turn ends for good in one kernel-side step (``FREEZE_SCRIPT``): every process is
           stopped, the setup's own that were running are resumed. Nothing of the operator can read, replace or
           race the checker, while the checker still sees it in /proc (a daemon the operator restarted is there
           to be checked).
        2. The checker's tools are verified from the host: any change since setup to the image's programs,
           libraries or loader configuration (``PROTECTED_PATHS``) is tampering, and the check fails without
           running (a root operator could otherwise plant a ``grep`` that always matches).
        3. The script goes in over the exec's stdin into a fresh root-only folder, runs from absolute paths with
           a clean environment (``CHECK_PATH``) and empty stdin, and is deleted; then the frozen are killed.
        """
        sess = self._session
        start = time.monotonic()
        trusted = [f"{pid}:{ticks}" for pid, ticks in sorted(sess.preexisting.items())] if sess else []
        check = _checker_command("cat", timeout_s)
        nonce = secrets.token_hex(16)
        report = _report_line(nonce) + "exit $rc"
        try:
            if sess is None:  # no operator ever ran: nothing to freeze or to suspect
                result = self.exec_root(
                    "check", check + report, [], timeout_s, stdin_data=script.encode(), nonce=nonce
                )
            elif self._baseline is None:
                # An unprivileged operator cannot touch the checker's tools: freeze and check in one exec.
                result = self.exec_root(
                    "check",
                    KILL_NEW_FUNC + FREEZE_FUNC + 'freeze_all "$@"; ' + check + "kill_new $KEEP; " + report,
                    trusted,
                    timeout_s,
                    stdin_data=script.encode(),
                    nonce=nonce,
                )
                sess.mark_dead()
            else:
                # A root operator: freeze, then verify the tools from the host, then check.
                keep = self._freeze(trusted)
                sess.mark_dead()
                tampered = self.tampered_paths()
                if tampered:
                    more = f" and {len(tampered) - 8} more" if len(tampered) > 8 else ""
                    return self._check_refused(
                        script,
                        start,
                        "the checker's tools were changed after setup ("
                        + ", ".join(tampered[:8])
                        + more
                        + "): tampering fails the episode; the check did not run",
                    )
                result = self.exec_root(
                    "check",
                    KILL_NEW_FUNC + check + 'kill_new "$@"; ' + report,
                    keep,
                    timeout_s,
                    stdin_data=script.encode(),
                    nonce=nonce,
                )
        except SandboxError as exc:
            if not (self.disk_budget_exceeded or self.inode_budget_exceeded):
                raise
            return self._check_refused(script, start, f"{self.budget_message()} ({exc})")
        if self.disk_budget_exceeded or self.inode_budget_exceeded:
            result.stderr += ("\n" if result.stderr else "") + self.budget_message()
            result.exit_code = None if result.exit_code == 0 else result.exit_code
        return result

    def _freeze(self, trusted: list[str]) -> list[str]:
        """``FREEZE_SCRIPT`` (the end of a root operator's turn); the pids it kept. Its ``keep:`` line is its
        protocol: an answer without it is the machinery's failure (the exec killed, the engine lost its output, a
        loaded machine), so the step is tried once more (stopping what is stopped again is harmless), and then it
        is a ``SandboxError``, never a verdict on the episode."""
        said = ""
        for _attempt in range(2):
            frozen = self.exec_root("freeze", FREEZE_SCRIPT, trusted, 20.0)
            line = next((ln for ln in frozen.stdout.splitlines() if ln.startswith("keep:")), None)
            if frozen.exit_code == 0 and line is not None:
                return line[len("keep:") :].split()
            said = (
                f"exit code {frozen.exit_code}{', timed out' if frozen.timed_out else ''}: "
                f"{(frozen.stderr or frozen.stdout).strip()[-300:] or 'no output'}"
            )
        raise SandboxError(f"infrastructure: the freeze step answered twice without its keep: line ({said})")

    def _check_refused(self, script: str, start: float, why: str) -> CommandResult:
        """A check that did not (or must not) count: no exit code, so it is never a pass."""
        if self._session is not None:
            self._session.mark_dead()
        return CommandResult(
            command=script,
            stdout="",
            stderr=f"bashgym: {why}",
            exit_code=None,
            duration_s=round(time.monotonic() - start, 6),
            timed_out=False,
        )

    def budget_message(self) -> str:
        """Why everything was ended when a disk or inode budget was spent: appended to the result of the command
        (by the session) or of the check that ran into it."""
        spec = self.spec
        if self.inode_budget_exceeded:
            return (
                f"bashgym: the sandbox changed more than {spec.inode_budget} paths in its image layer "
                "(inode budget); everything running in it was ended"
            )
        return (
            f"bashgym: the sandbox's disk budget ({spec.disk_budget_mb} MB written outside the size-capped "
            "home and /tmp) is spent; everything running in it was ended"
        )

    def _protected_changes(self) -> dict[str, str]:
        """Changed paths among ``PROTECTED_PATHS`` -> a fingerprint of the file as the engine sees it."""
        changed = self.changed_paths() or []
        found: dict[str, str] = {}
        for item in changed:
            path = item.get("Path", "")
            if any(path == p or path.startswith(p + "/") for p in PROTECTED_PATHS):
                found[path] = self._fingerprint(path)
        return found

    def _fingerprint(self, path: str) -> str:
        """What the engine says the path is (``docker cp``'s stat: size, mode, mtime, link target), and for a
        file of up to 32 MB the SHA-256 of its bytes (a root operator can put the mtime back, not the content)."""
        try:
            stream, stat = self.api.get_archive(self.container_id, path)
        except (NotFound, APIError, OSError):
            return "gone"
        digest = hashlib.sha256(json.dumps(stat, sort_keys=True).encode())
        mode = int(stat.get("mode", 0))
        if stat.get("size", 0) <= 32 << 20 and not mode & (1 << 31):  # Go's os.ModeDir bit: no folder walks
            for chunk in stream:
                digest.update(chunk)
        else:
            close = getattr(stream, "close", None)
            if close:
                close()
        return digest.hexdigest()

    def tampered_paths(self) -> list[str]:
        """Protected paths changed since setup (or changed again, if setup had changed them); [] if none."""
        if self._baseline is None:
            return []
        now = self._protected_changes()
        return sorted(p for p, fp in now.items() if self._baseline.get(p) != fp)

    # ---- for tests and reports ---------------------------------------------------------------------------
    def inspect(self) -> dict[str, Any]:
        return self.api.inspect_container(self.require_running())

    def __repr__(self) -> str:
        short = self.container_id[:12] if self.container_id else "not started"
        return f"Sandbox({short}, user={self.spec.user})"


def find_leftovers(label_filter: str | None = None) -> list[Leftover]:
    """Sandbox containers the reaper removes: owner provably gone (``owner_state``), or past their hard lifetime
    whoever owns them (a container the backstop could not end: paused, or its main process stopped).

    ``label_filter`` narrows it to containers that also carry that label (``key`` or ``key=value``). Containers of
    a live owner, or of one out of sight here (another machine, another pid namespace) within their lifetime, stay.
    """
    client = docker_client()
    filters = [LABEL_SANDBOX]
    if label_filter:
        filters.append(label_filter)
    now = time.time()
    found: list[Leftover] = []
    for c in client.api.containers(all=True, filters={"label": filters}):
        labels = c.get("Labels") or {}
        owner = labels.get(LABEL_OWNER, "")
        state, why = owner_state(owner)
        expires = labels.get(LABEL_EXPIRES, "")
        if state != "dead" and expires.isdigit() and now > int(expires):
            state, why = "dead", f"past its hard lifetime ({why})"
        if state != "dead":
            continue
        created = labels.get(LABEL_CREATED, "")
        found.append(
            Leftover(
                container_id=c["Id"],
                name=(c.get("Names") or ["?"])[0].lstrip("/"),
                state=c.get("State", ""),
                owner=owner,
                purpose=labels.get("bashgym.purpose", labels.get(LABEL_SANDBOX, "")),
                scenario=labels.get("bashgym.scenario", ""),
                age_s=round(now - int(created), 1) if created.isdigit() else 0.0,
                why=why,
            )
        )
    return found


def reap_leftovers(label_filter: str | None = None, dry_run: bool = False) -> int:
    """Remove the containers ``find_leftovers`` finds (a crashed or killed run's); return how many were (or, with
    ``dry_run``, would be) removed."""
    leftovers = find_leftovers(label_filter)
    if dry_run:
        return len(leftovers)
    api = docker_client().api
    removed = 0
    for item in leftovers:
        try:
            api.remove_container(item.container_id, force=True)
            removed += 1
        except (NotFound, APIError):
            pass  # gone meanwhile (--rm, or another reaper)
    return removed


def remove_sandboxes_of_stopped_command(ctx: stopping.StopContext) -> list[str]:
    """A stopped command's sandboxes (``stopping.on_signals``), before it exits: this process's own, then every
    container whose owner label names one of the command's processes (its step process, whether or not that one
    got to close them). Nobody else's are touched."""
    with _LIVE_LOCK:
        mine = list(_LIVE.values())
    for box in mine:
        box.close()
    removed = len(mine)
    try:
        api = docker_client().api
        containers = api.containers(all=True, filters={"label": [LABEL_SANDBOX]})
    except Exception:  # noqa: BLE001 - no engine: nothing of ours can be running on it
        return [f"removed {removed} sandbox{'es' if removed != 1 else ''}"] if removed else []
    host, boot, pidns = socket.gethostname(), _boot_id(), _pid_namespace()
    for c in containers:
        parts = ((c.get("Labels") or {}).get(LABEL_OWNER) or "").split(":")
        if len(parts) != 5 or (parts[0], parts[3], parts[4]) != (host, boot, pidns):
            continue
        if not ctx.owns(parts[1], parts[2]):
            continue
        try:
            api.remove_container(c["Id"], force=True)
            removed += 1
        except (NotFound, APIError):
            pass  # gone meanwhile (its owner's exit hook, --rm)
    return [f"removed {removed} sandbox{'es' if removed != 1 else ''}"] if removed else []


stopping.register_cleanup("sandboxes", remove_sandboxes_of_stopped_command, order=10)
