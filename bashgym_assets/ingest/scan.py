"""Watching trace folders: which files are new or changed since the last look, and in which repos.

The cursor keeps, per file: size, mtime, how many bytes end in a complete line, a fingerprint (hash of the
first and last 64 KB of that complete part and its length), the adapter and the repo key. A file whose stat
is unchanged is not opened at all, so a tick over 10,000 unchanged files costs 10,000 ``stat`` calls. A file
that only grew by a half-written line has the same complete part, hence the same fingerprint: no run until the
line is finished. Deleted or unreadable files drop out of the cursor without failing the scan (their sessions
stay in ``raw_sessions``: Claude Code deletes old transcripts itself, and valid input is never lost).
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from bashgym_assets.ingest.base import SETTLE_SECONDS, SessionAdapter
from bashgym_assets.ingest.registry import claiming_adapter
from bashgym_assets.ingest.repos import NO_REPO_KEY, detect_repo

WINDOW = 64 * 1024


class FileEntry(BaseModel):
    size: int
    mtime_ns: int
    complete: int
    fingerprint: str
    adapter: str
    repo: str


class ScanCursor(BaseModel):
    """Per-file scan state, stored compressed (zlib + base64 JSON, ~65 bytes per file) by ``CursorStore``."""

    version: int = 1
    files: dict[str, FileEntry] = {}

    def encode(self) -> str:
        return base64.b64encode(zlib.compress(self.model_dump_json().encode(), 6)).decode()

    @classmethod
    def decode(cls, text: str | None) -> ScanCursor:
        if not text:
            return cls()
        try:
            return cls.model_validate_json(zlib.decompress(base64.b64decode(text)))
        except Exception:  # a cursor from an older version: start over (a re-read duplicates nothing)
            return cls()


@dataclass
class ScanResult:
    cursor: ScanCursor
    changed: dict[str, list[str]] = field(default_factory=dict)  # repo -> changed files
    new_files: int = 0
    removed: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # only a half-written line so far
    files_seen: int = 0
    seconds: float = 0.0

    @property
    def repos(self) -> list[str]:
        return sorted(self.changed)


def iter_trace_files(dirs: Iterable[Path]) -> Iterator[tuple[Path, os.stat_result, SessionAdapter]]:
    """Every file an adapter claims under the folders (recursive, hidden entries skipped, no symlink loops)."""
    for root in dirs:
        stack = [str(root)]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                        continue
                    path = Path(entry.path)
                    adapter = claiming_adapter(path)
                    if adapter is None:
                        continue
                    yield path, entry.stat(), adapter
                except OSError:
                    continue


def complete_part(path: Path, size: int, whole_document: bool) -> tuple[int, str]:
    """(bytes up to the last newline, fingerprint of that part). Whole documents count as complete."""
    with open(path, "rb") as fh:
        complete = size
        if not whole_document and size:
            pos = size
            complete = 0
            while pos > 0:
                start = max(0, pos - WINDOW)
                fh.seek(start)
                chunk = fh.read(pos - start)
                idx = chunk.rfind(b"\n")
                if idx >= 0:
                    complete = start + idx + 1
                    break
                pos = start
        digest = hashlib.sha1(str(complete).encode())
        fh.seek(0)
        digest.update(fh.read(min(WINDOW, complete)))
        if complete > WINDOW:
            fh.seek(max(WINDOW, complete - WINDOW))
            digest.update(fh.read(complete - max(WINDOW, complete - WINDOW)))
    return complete, digest.hexdigest()


def repo_key_of(path: Path, adapter: SessionAdapter) -> str:
    """Repo key of a session file, from the cwd it records (cached while the file's size and mtime stay put)."""
    try:
        st = path.stat()
    except OSError:
        return NO_REPO_KEY
    return _repo_key_cached(str(path), st.st_size, st.st_mtime_ns, adapter)


def indexed_repo_key(
    path: Path, st: os.stat_result, adapter: SessionAdapter, index: dict[str, FileEntry] | None = None
) -> str:
    """``repo_key_of`` from a stat the caller already has: the scan cursor's repo when the file's size and mtime
    are the ones it recorded (the key depends only on the file's first ``cwd``), else a peek at the file."""
    entry = index.get(str(path)) if index else None
    if (
        entry is not None
        and entry.complete
        and entry.adapter == adapter.name
        and entry.size == st.st_size
        and entry.mtime_ns == st.st_mtime_ns
    ):
        return entry.repo
    return _repo_key_cached(str(path), st.st_size, st.st_mtime_ns, adapter)


@lru_cache(maxsize=65536)
def _repo_key_cached(path: str, size: int, mtime_ns: int, adapter: SessionAdapter) -> str:
    return detect_repo(adapter.peek_cwd(Path(path))).key


def scan(
    dirs: Iterable[Path],
    cursor: ScanCursor | None = None,
    now: float | None = None,
    settle_seconds: float = SETTLE_SECONDS,
) -> ScanResult:
    """Compare the folders with ``cursor``; return the new cursor and the repos whose files changed."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    old = cursor.files if cursor else {}
    result = ScanResult(cursor=ScanCursor())
    files = result.cursor.files
    for path, st, adapter in iter_trace_files(dirs):
        result.files_seen += 1
        key = str(path)
        prev = old.get(key)
        if prev is not None and prev.size == st.st_size and prev.mtime_ns == st.st_mtime_ns:
            files[key] = prev
            continue
        whole = adapter.name == "bashgym_trace"
        settled = now - st.st_mtime >= settle_seconds
        try:
            complete, fingerprint = complete_part(path, st.st_size, whole)
        except OSError:
            result.unreadable.append(key)
            continue
        if (
            (whole and not settled)
            or (complete == 0 and not settled and st.st_size > 0)
            or (st.st_size == 0 and not settled)
        ):
            result.waiting.append(key)  # still being written: look again next tick
            if prev is not None:
                files[key] = prev
            continue
        if prev is not None and prev.fingerprint == fingerprint:
            files[key] = prev.model_copy(update={"size": st.st_size, "mtime_ns": st.st_mtime_ns})
            if complete < st.st_size:
                result.waiting.append(key)
            continue
        repo = repo_key_of(path, adapter) if complete else NO_REPO_KEY
        if prev is not None and prev.repo != repo:
            result.changed.setdefault(prev.repo, []).append(key)
        files[key] = FileEntry(
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
            complete=complete,
            fingerprint=fingerprint,
            adapter=adapter.name,
            repo=repo,
        )
        result.changed.setdefault(repo, []).append(key)
        result.new_files += prev is None
    result.removed = sorted(set(old) - set(files) - set(result.unreadable))
    result.seconds = time.perf_counter() - started
    return result


class CursorStore:
    """Keeps scan cursors as files so the sensor's own cursor is a short token, not the whole state.

    A cursor over 10,000 files is ~650 KB compressed; Dagster stores the sensor cursor with every tick, so the
    state lives here (``<token>.cursor``, written atomically, the last few kept) and the tick stores its token.
    A tick that fails after saving leaves the sensor on the old token: the next tick diffs against the old
    state again, so no change is ever skipped. An unknown token (a wiped data folder) means a fresh scan;
    re-ingesting is idempotent.
    """

    KEEP = 4

    def __init__(self, folder: Path):
        self.folder = folder

    def load(self, token: str | None) -> ScanCursor:
        if not token:
            return ScanCursor()
        path = self.folder / f"{token}.cursor"
        try:
            return ScanCursor.decode(path.read_text())
        except OSError:
            return ScanCursor()

    def latest(self) -> ScanCursor:
        """The newest saved cursor (the last tick's), or an empty one: ``ingest_repo`` uses it as a file -> repo
        index so a partition run does not re-read the head of every file under the trace folders."""
        try:
            saved = sorted(self.folder.glob("*.cursor"), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            return ScanCursor()
        for path in saved:
            try:
                return ScanCursor.decode(path.read_text())
            except OSError:  # pruned by a tick in between: try the next newest
                continue
        return ScanCursor()

    def save(self, cursor: ScanCursor) -> str:
        from bashgym_assets.lake import atomic_write_text

        text = cursor.encode()
        token = hashlib.sha1(text.encode()).hexdigest()[:20]
        path = self.folder / f"{token}.cursor"
        if not path.exists():
            atomic_write_text(path, text)
        os.utime(path)
        for old in sorted(self.folder.glob("*.cursor"), key=lambda p: p.stat().st_mtime)[: -self.KEEP]:
            old.unlink(missing_ok=True)
        return token


def run_key(repo: str, cursor: ScanCursor, files: list[str]) -> str:
    """Deterministic key of one requested run: the repo and the fingerprints of its changed files."""
    digest = hashlib.sha1(repo.encode())
    for f in sorted(files):
        entry = cursor.files.get(f)
        digest.update(f.encode() + b"\0" + (entry.fingerprint.encode() if entry else b"-"))
    return f"{repo}:{digest.hexdigest()[:16]}"
