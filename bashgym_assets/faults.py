"""Operating-system faults in plain words: one line instead of the hundred that reach the user.

A full disk under the data folder surfaces as SQLite's ``disk I/O error`` (Dagster's event log, MLflow's store) or
``database or disk is full``, or as Python's ``[Errno 28] No space left on device``, repeated in every traceback of
every failed step, and the words "disk full" appear nowhere. ``explain_os_error`` recognises those texts and says
which folder is out of room, how much is left there, and what to do. No Dagster here: the CLI and the demo call it
on the text of a failure they are about to print.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

# Texts that say the disk (or a quota) is full, whoever wrote them: the kernel's ENOSPC/EDQUOT as Python and
# most tools print them, SQLite's SQLITE_FULL.
_FULL_RE = re.compile(
    r"No space left on device|\bENOSPC\b|\[Errno 28\]|database or disk is full|\bSQLITE_FULL\b"
    r"|Disk quota exceeded|\bEDQUOT\b|\[Errno 122\]",
    re.IGNORECASE,
)
# SQLite's word when a write failed underneath it (on a full disk this is what Dagster's storage most often says).
_IO_RE = re.compile(r"disk I/O error|\bSQLITE_IOERR\w*", re.IGNORECASE)
_PATH_RE = re.compile(r"(/[^\s'\"`:,;()\[\]{}<>]+)")
# Below this much room a disk counts as full whatever the error said (a write that failed freed its own space).
LOW_SPACE_BYTES = 64 << 20


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _existing(path: Path) -> Path | None:
    """``path`` or its nearest existing parent (a failed write may not have created the file itself)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return None


def _folder_for(text: str, folder: str | Path | None) -> Path:
    """The folder to name: the caller's, else a path in the text under the data folder (tracebacks are full of
    library paths, which say nothing about where the disk filled up), else the data folder itself."""
    if folder is not None:
        return Path(folder)
    from bashgym_assets.config import get_settings

    home = get_settings().home.resolve()
    lines = text.splitlines()
    # a path on a line that says the disk is full is where the write failed, inside the data folder or not (a
    # failing step's log names many folders before the one it filled)
    for line in lines:
        if _FULL_RE.search(line) or _IO_RE.search(line):
            for match in _PATH_RE.findall(line):
                path = Path(match.rstrip("."))
                if _existing(path) is not None and path != Path("/"):
                    return path if path.is_dir() else path.parent
    for match in _PATH_RE.findall(text):
        path = Path(match.rstrip("."))
        try:
            if path.resolve().is_relative_to(home):
                return path if path.is_dir() else path.parent
        except (OSError, ValueError):
            continue
    return home


# What a write that failed for want of room says when the writer does not pass the errno on: torch.save (its
# zip writer: "unexpected pos N vs M", "file write failed", "basic_ios::clear: iostream error"), EIO.
_WRITE_FAILED_RE = re.compile(
    r"unexpected pos \d+ vs \d+|file write failed|iostream error|PytorchStreamWriter|Input/output error"
    r"|\[Errno 5\]",
    re.IGNORECASE,
)


def disk_full_error(exc: BaseException, folder: str | Path) -> OSError | None:
    """The ``OSError(ENOSPC)`` that ``exc``, raised while writing under ``folder``, really was, or None.

    A full disk under a checkpoint save reached the user as ``RuntimeError: [enforce fail at
    inline_container.cc:672] . unexpected pos 118080 vs 117972`` (torch.save), the word "disk" nowhere. Counted as
    a full disk: ENOSPC / EDQUOT anywhere in the exception's chain or its words, or a failed write (``_WRITE_FAILED_RE``)
    while ``folder``'s disk has less than ``LOW_SPACE_BYTES`` left. The error names ``folder`` and the room left
    there, so ``explain_os_error`` (and the one line ``bashgym`` ends with) names the right disk."""
    import errno

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 16:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    text = "\n".join(f"{type(e).__name__}: {e}" for e in chain)
    full = any(isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) for e in chain)
    full = full or bool(_FULL_RE.search(text))
    probe = _existing(Path(folder))
    free = None
    if probe is not None:
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(probe).free
    if not full and not (free is not None and free < LOW_SPACE_BYTES and _WRITE_FAILED_RE.search(text)):
        return None
    room = f", {_human(free)} free there" if free is not None else ""
    return OSError(errno.ENOSPC, f"No space left on device (writing under {folder}{room})", str(folder))


def explain_os_error(text: str, folder: str | Path | None = None) -> str | None:
    """One line for a failure whose text says the disk is full (ENOSPC, EDQUOT, SQLite's ``database or disk is
    full``) or that SQLite could not write (``disk I/O error``): the folder, the room left on its disk, the ``df``
    to run and what to do. None when the text says neither (the caller prints what it had).

    ``folder``: where the failing command writes (default: a path of the data folder named in the text, else the
    data folder, ``BASHGYM_HOME``)."""
    full = bool(_FULL_RE.search(text))
    io_error = bool(_IO_RE.search(text))
    if not (full or io_error):
        return None
    where = _folder_for(text, folder)
    probe = _existing(where)
    room = ""
    free = None
    if probe is not None:
        try:
            usage = shutil.disk_usage(probe)
            free = usage.free
            room = f" ({_human(usage.free)} free of {_human(usage.total)})"
        except OSError:
            pass
    low = free is not None and free < LOW_SPACE_BYTES
    if full and not low and free is not None:
        # the text says a disk is full but this one has room: another disk (/tmp, Docker's folder) is the full one,
        # or the failed write's own files were removed since
        return (
            f"bashgym: a write failed because a disk is full (no space left on device), though {where} has "
            f"room now{room}: `df -h` shows which disk is full (/tmp, Docker's folder, the data folder); free "
            "space there and run the command again"
        )
    if full or low:
        return (
            f"bashgym: the disk holding {where} is full{room}: free space there (`df -h {where}` shows the "
            "disk, `du -sh` its biggest folders) or move the data folder (BASHGYM_HOME), then run the command "
            "again"
        )
    return (
        f"bashgym: SQLite could not write under {where} (disk I/O error){room}: if that disk was full "
        f"(`df -h {where}`), free space and run again; otherwise the disk itself failed (see `dmesg`)"
    )
