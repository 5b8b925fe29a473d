"""One pipeline per data folder: an exclusive ``flock`` on ``$BASHGYM_HOME/.pipeline.lock``.

Two ``bashgym demo`` on one data folder both "succeeded" while the second training replaced the first one's adapter
folder under two registered versions. The pipeline runner (``housekeeping.pipeline_session``) and the commands
that rewrite the folder (``relocate``: move, relocate) hold this lock; the kernel releases it when the process dies,
however it dies, so a ``kill -9`` never leaves a stale lock to clear by hand. The file names the holder (pid, host,
start, command) so the refused one can say who is in the way; ``wait=True`` queues behind it instead.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from bashgym_assets.config import Settings, get_settings
from bashgym_assets.processes import HOST_TAG, PID_TAG, process_alive, process_tags

LOCK_FILE = ".pipeline.lock"


class DataFolderBusy(RuntimeError):
    """Another pipeline holds the data folder (``cli.main`` prints it as ``error: ...``, exit 1)."""


def lock_path(settings: Settings | None = None) -> Path:
    return (settings or get_settings()).home / LOCK_FILE


def read_holder(settings: Settings | None = None) -> dict[str, str]:
    """What the lock file says about its holder ({} when empty or unreadable): the last holder, which may be gone."""
    try:
        data = json.loads(lock_path(settings).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def describe_holder(holder: dict[str, str]) -> str:
    """```bashgym demo --quick` (pid 123 on host, since 14:02:11 UTC, 35 s ago)``."""
    if not holder.get(PID_TAG):
        return "a process that has not written its name yet"
    since = ""
    if holder.get("started"):
        with contextlib.suppress(ValueError):
            started = datetime.fromisoformat(holder["started"])
            since = f", since {started:%Y-%m-%d %H:%M:%S} UTC, {time.time() - started.timestamp():.0f} s ago"
    gone = (
        " (that process is gone: a child it forked holds the lock)" if process_alive(holder) is False else ""
    )
    return (
        f"`{holder.get('command', '?')}` (pid {holder[PID_TAG]} on {holder.get(HOST_TAG, '?')}{since})" + gone
    )


def _command_line() -> str:
    """This process's command as a person typed it (``python -m bashgym_assets.cli x`` reads as ``bashgym x``)."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return " ".join(["bashgym" if name in ("bashgym", "cli.py", "__main__.py") else name, *sys.argv[1:]])


@contextlib.contextmanager
def pipeline_lock(
    settings: Settings | None = None,
    *,
    wait: bool | float = False,
    command: str | None = None,
    echo: Callable[[str], None] = print,
    poll_s: float = 0.5,
    say_every_s: float = 30.0,
) -> Iterator[dict[str, str]]:
    """Hold the data folder's pipeline lock for the block; yields what the lock file says about this holder.

    ``wait=False`` (default): raise ``DataFolderBusy`` naming the holder when another process has it. ``wait=True``
    queues (printing who holds it at once and every ``say_every_s``); a number waits at most that many seconds.
    The lock is an ``flock`` on an open file description made close-on-exec, so it is held by this process (and
    children it forks without exec), and freed by the kernel when they end, ``kill -9`` included.
    """
    import fcntl

    settings = settings or get_settings()
    path = lock_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = None if wait is True or wait is False else time.monotonic() + float(wait)
        said_at = -math.inf
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = describe_holder(read_holder(settings))
                if wait is False or (deadline is not None and time.monotonic() > deadline):
                    raise DataFolderBusy(
                        f"the data folder {settings.home} is in use by {holder}. Two pipelines on one folder "
                        "overwrite each other's adapters and runs: wait for it to end (or stop it), or queue "
                        "behind it with --wait"
                    ) from None
                if time.monotonic() - said_at >= say_every_s:
                    echo(f"[lock] waiting for the data folder {settings.home}: in use by {holder}")
                    said_at = time.monotonic()
                time.sleep(poll_s)
        info = {
            **process_tags(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": command or _command_line(),
            "home": str(settings.home),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info, indent=1) + "\n").encode(), 0)
        try:
            yield info
        finally:
            os.ftruncate(fd, 0)  # released: nobody to name any more
    finally:
        os.close(fd)  # closing the last descriptor releases the flock
