"""Which process did this, and does it still run: identity tags for runs, and who has files open in a folder.

Plain Python (no Dagster, no MLflow), so that every store can record its writer the same way: a Dagster run
(``defs/run_health``), an MLflow run (``training/registry``), the data folder's lock (``housekeeping``). A pid alone
is not an identity (pids are reused, and another machine has its own), so a process is named by its pid, its start
time in clock ticks since boot, the host name, the boot id and its pid namespace: a reused pid, another host or a
container's own numbering is never mistaken for the writer, and a process on another host, boot or pid namespace is
reported as "cannot tell", never as dead.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from pathlib import Path

PID_TAG = "bashgym/pid"
PID_START_TAG = "bashgym/pid_start"
HOST_TAG = "bashgym/host"
BOOT_TAG = "bashgym/boot"
PIDNS_TAG = "bashgym/pidns"


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), '' when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def pid_namespace(pid: int | None = None) -> str:
    """A process's pid namespace (default: this one's, ``pid:[4026531836]``): a pid means the same process only
    within one."""
    try:
        return os.readlink(f"/proc/{pid or 'self'}/ns/pid")
    except OSError:
        return ""


def process_tags(pid: int | None = None) -> dict[str, str]:
    """The tags that name a process (default: this one)."""
    pid = pid or os.getpid()
    return {
        PID_TAG: str(pid),
        PID_START_TAG: start_ticks(pid),
        HOST_TAG: socket.gethostname(),
        BOOT_TAG: boot_id(),
        PIDNS_TAG: pid_namespace(pid),
    }


def process_alive(tags: dict[str, str]) -> bool | None:
    """Whether the recorded process still runs; None when this machine cannot tell (no tag, other host, boot or
    pid namespace: a run worker in a container with the host's network has the host's name and kernel, but its
    pid numbers another process here)."""
    pid = tags.get(PID_TAG)
    if not pid or not pid.isdigit():
        return None
    if tags.get(HOST_TAG) != socket.gethostname() or tags.get(BOOT_TAG, "") != boot_id():
        return None
    if tags.get(PIDNS_TAG) and tags[PIDNS_TAG] != pid_namespace():
        return None
    started = start_ticks(int(pid))
    if not started:
        return False
    return not tags.get(PID_START_TAG) or started == tags[PID_START_TAG]


def _inside(path: str, roots: Iterable[str]) -> str | None:
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root
    return None


def open_paths(roots: Iterable[Path], skip_pids: Iterable[int] = ()) -> dict[int, list[str]]:
    """Per live process (other than this one and ``skip_pids``), the paths under ``roots`` it has open: open
    files, working directory, mapped files. Processes of other users that this one cannot inspect are missed.

    Why: a file a live process holds open (a half-written temporary file, a SQLite store a UI serves) must not be
    removed or moved under it; the kernel, not a naming convention, knows who holds what."""
    wanted = [os.path.realpath(r) for r in roots]
    skip = {os.getpid(), *skip_pids}
    found: dict[int, list[str]] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if pid in skip:
            continue
        paths: set[str] = set()
        base = f"/proc/{pid}"
        try:
            with _quiet():
                cwd = os.readlink(f"{base}/cwd")
                if _inside(cwd, wanted):
                    paths.add(cwd)
            with _quiet():
                for fd in os.listdir(f"{base}/fd"):
                    with _quiet():
                        target = os.readlink(f"{base}/fd/{fd}")
                        if _inside(target.removesuffix(" (deleted)"), wanted):
                            paths.add(target)
            with _quiet(), open(f"{base}/maps") as maps:
                for line in maps:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and _inside(parts[5].strip(), wanted):
                        paths.add(parts[5].strip())
        except OSError:
            continue
        if paths:
            found[pid] = sorted(paths)
    return found


class _quiet:
    """Ignore the OSErrors of a process that exits or hides its /proc entries while it is looked at."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, OSError)


def describe_pid(pid: int) -> str:
    """``pid 123 (bashgym demo --quick)``: the pid with its command line, for messages."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = ""
    return f"pid {pid}" + (f" ({cmd[:160]})" if cmd else "")
