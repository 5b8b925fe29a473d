"""What every agent-log adapter shares: the adapter protocol, quarantine records, and a streaming line reader.

Adapters turn one session file (plus its side files, e.g. Claude Code subagent logs) into canonical
``Session`` records. Nothing here is specific to one agent, so a new format is one new module implementing
``SessionAdapter`` and one entry in ``bashgym_assets.ingest.registry.ADAPTERS``.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, Field

from bashgym_assets.sessions import Session

#: Lines longer than this are quarantined without being held in memory (real lines are well under 1 MB;
#: a pasted log or an image can reach a few MB).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: A file whose last line has no newline yet and was modified this recently is still being written to.
SETTLE_SECONDS = 2.0
SNIPPET_CHARS = 200
M = TypeVar("M", bound=BaseModel)


class QuarantineRecord(BaseModel):
    """One bad file or line: kept out of ``raw_sessions`` but recorded so nothing disappears silently."""

    file: str
    line: int | None = Field(None, description="1-based line number; None when the whole file is bad")
    reason: str
    snippet: str = ""
    adapter: str = ""


def snippet_of(data: bytes | str, limit: int = SNIPPET_CHARS) -> str:
    """A short printable preview of bad input (invalid UTF-8 shown with replacement characters)."""
    text = data[: limit * 4].decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = text[:limit]
    return "".join(ch if ch.isprintable() or ch in "\t" else "\ufffd" for ch in text)


@dataclass
class ParseOutcome:
    """What parsing one session source gave: sessions (usually one), quarantined lines, bytes read."""

    sessions: list[Session] = field(default_factory=list)
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    bytes_read: int = 0
    files: list[str] = field(default_factory=list)


@runtime_checkable
class SessionAdapter(Protocol):
    """One agent-log format. ``matches`` must be cheap (name and at most a small peek): scans call it often."""

    name: str
    #: when two adapters produce the same session id in a partition, the higher priority wins
    priority: int

    def claims(self, path: Path) -> bool:
        """Name-only test: is this file (or a side file) of this format? Scans watch every claimed file."""
        ...

    def matches(self, path: Path) -> bool:
        """Is this file a session of its own (side files such as subagent logs are claimed, not matched)?"""
        ...

    def related_files(self, path: Path) -> list[Path]:
        """Side files parsed together with ``path`` (subagent logs ...), so a scan notices when they change."""
        ...

    def peek_cwd(self, path: Path) -> str | None:
        """The working directory the session started in, read from as little of the file as possible."""
        ...

    def parse(self, path: Path, repo_of: RepoResolver | None = None) -> ParseOutcome: ...


class RepoResolver(Protocol):
    def __call__(self, cwd: str | None) -> tuple[str, str | None, str | None]:
        """(partition key, repo path, remote) for a working directory."""
        ...


def trusted(cls: type[M], **values: Any) -> M:
    """Build a pydantic model from values the adapter already typed, skipping validation.

    ``model_construct`` does the same but costs ~60 us per object; adapters build one per tool call and
    prompt, so this is on the ingest hot path. Missing fields get their defaults.
    """
    fields = cls.model_fields
    if len(values) != len(fields):
        for name, info in fields.items():
            if name not in values:
                values[name] = info.get_default(call_default_factory=True)
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    object.__setattr__(obj, "__pydantic_fields_set__", set(values))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def file_settled(path: Path, now: float | None = None, settle: float = SETTLE_SECONDS) -> bool:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return True
    return ((now or time.time()) - mtime) >= settle


@dataclass
class LineReader:
    """Stream the complete lines of a file with their 1-based numbers, holding at most a chunk and one line.

    A last line with no newline is only returned when the file has settled (not modified for
    ``SETTLE_SECONDS``): a writer may still be appending to it. Lines over ``MAX_LINE_BYTES`` are skipped in
    chunks and reported via ``quarantine``. ``sha`` hashes every byte that was consumed, for dedupe.
    """

    path: Path
    max_line_bytes: int = MAX_LINE_BYTES
    settle_seconds: float = SETTLE_SECONDS
    adapter: str = ""
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    bytes_read: int = 0
    pending_tail: bool = False
    unterminated_line: int | None = None  # number of a last line that had no newline (a truncated write?)
    _sha: hashlib._Hash = field(default_factory=hashlib.sha1)  # type: ignore[name-defined]

    @property
    def content_hash(self) -> str:
        return self._sha.hexdigest()

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """Read in 1 MB chunks and split: far fewer Python-level calls than ``readline`` per line."""
        settled = file_settled(self.path, settle=self.settle_seconds)
        limit = self.max_line_bytes
        lineno = 0
        rest = b""
        skipping: tuple[int, int, bytes] | None = None  # (line number, bytes so far, head) of an oversized line
        with open(self.path, "rb", buffering=0) as fh:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                if skipping is not None:
                    cut = chunk.find(b"\n")
                    if cut < 0:
                        self._sha.update(chunk)
                        skipping = (skipping[0], skipping[1] + len(chunk), skipping[2])
                        continue
                    self._sha.update(chunk[: cut + 1])
                    self._too_long(skipping[0], skipping[1] + cut + 1, skipping[2])
                    skipping = None
                    chunk = chunk[cut + 1:]
                data = rest + chunk if rest else chunk
                end = data.rfind(b"\n")
                if end < 0:
                    rest = data
                else:
                    complete, rest = data[: end + 1], data[end + 1:]
                    self._sha.update(complete)
                    self.bytes_read += len(complete)
                    for line in complete.split(b"\n")[:-1]:
                        lineno += 1
                        if len(line) > limit:
                            self.bytes_read -= len(line) + 1
                            self._too_long(lineno, len(line) + 1, line[:SNIPPET_CHARS])
                        elif line.strip():
                            yield lineno, line
                if len(rest) > limit:
                    lineno += 1
                    self._sha.update(rest)
                    skipping = (lineno, len(rest), rest[:SNIPPET_CHARS])
                    rest = b""
        if skipping is not None:  # an oversized last line with no newline
            self._too_long(skipping[0], skipping[1], skipping[2])
        if rest:
            if not settled:
                self.pending_tail = True  # half-written last line: leave it for the next read
                return
            self._sha.update(rest)
            self.bytes_read += len(rest)
            lineno += 1
            self.unterminated_line = lineno
            if rest.strip():
                yield lineno, rest

    def _too_long(self, lineno: int, size: int, head: bytes) -> None:
        self.bytes_read += size
        self.quarantine.append(QuarantineRecord(
            file=str(self.path), line=lineno, adapter=self.adapter, snippet=snippet_of(head),
            reason=f"line too long: {size} bytes (limit {self.max_line_bytes}); skipped"))


def parse_ts(value: object) -> datetime | None:
    """ISO-8601 timestamps as written by agents (``...Z``), or epoch seconds/milliseconds; None if unusable."""
    if isinstance(value, str) and value:
        try:
            ts = datetime.fromisoformat(value)
        except ValueError:
            return None
        return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None
