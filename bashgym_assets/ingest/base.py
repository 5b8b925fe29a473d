"""What every agent-log adapter shares: the adapter protocol, quarantine records, and a streaming line reader.

Adapters turn one session file (plus its side files, e.g. Claude Code subagent logs) into canonical
``Session`` records. Nothing here is specific to one agent, so a new format is one new module implementing
``SessionAdapter`` and one entry in ``bashgym_assets.ingest.registry.ADAPTERS``.
"""

from __future__ import annotations

import codecs
import hashlib
import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar, runtime_checkable

import orjson
from pydantic import BaseModel, Field, field_validator

from bashgym_assets.ingest.jsonsafe import bom_encoding, clean_str, has_surrogates, json_bytes, jsonable
from bashgym_assets.sessions import Session

#: Lines longer than this are quarantined without being held in memory (real lines are well under 1 MB;
#: a pasted log or an image can reach a few MB).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: A file whose last line has no newline yet and was modified this recently is still being written to.
SETTLE_SECONDS = 2.0
SNIPPET_CHARS = 200
#: Reasons quote exception messages, which can quote the bad value: keep the quarantine table small.
MAX_REASON_CHARS = 2000
M = TypeVar("M", bound=BaseModel)


class QuarantineRecord(BaseModel):
    """One bad file or line: kept out of ``raw_sessions`` but recorded so nothing disappears silently."""

    file: str
    line: int | None = Field(default=None, description="1-based line number; None when the whole file is bad")
    reason: str
    snippet: str = ""
    adapter: str = ""

    @field_validator("file", "reason", "snippet", "adapter")
    @classmethod
    def _writable(cls, value: str) -> str:
        """Paths with undecodable bytes and exception messages quoting bad input must still reach parquet."""
        return clean_str(value[:MAX_REASON_CHARS])


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
    #: the file is being written right now and was not read: the partition keeps what it imported before
    unsettled: bool = False


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

    def __hash__(self) -> int:
        """Adapters are cache keys (``scan._repo_key_cached``): one must stay hashable."""
        ...


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

    A file that starts with a UTF-16 or UTF-32 byte order mark (Windows editors and PowerShell redirection
    write those) is transcoded to UTF-8 as it is read (``encoding`` says so; byte counts are then of the UTF-8
    text), so its lines split on the real newlines instead of being lost as binary.
    """

    path: Path
    max_line_bytes: int = MAX_LINE_BYTES
    settle_seconds: float = SETTLE_SECONDS
    adapter: str = ""
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    bytes_read: int = 0
    pending_tail: bool = False
    unterminated_line: int | None = None  # number of a last line that had no newline (a truncated write?)
    encoding: str = "utf-8"
    _sha: hashlib._Hash = field(default_factory=hashlib.sha1)

    @property
    def content_hash(self) -> str:
        return self._sha.hexdigest()

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """Read in 1 MB chunks and split: far fewer Python-level calls than ``readline`` per line."""
        settled = file_settled(self.path, settle=self.settle_seconds)
        limit = self.max_line_bytes
        lineno = 0
        rest = b""
        skipping: tuple[int, int, bytes] | None = (
            None  # (line number, bytes so far, head) of an oversized line
        )
        with open(self.path, "rb", buffering=0) as fh:
            for chunk in self._chunks(fh):
                if skipping is not None:
                    cut = chunk.find(b"\n")
                    if cut < 0:
                        self._sha.update(chunk)
                        skipping = (skipping[0], skipping[1] + len(chunk), skipping[2])
                        continue
                    self._sha.update(chunk[: cut + 1])
                    self._too_long(skipping[0], skipping[1] + cut + 1, skipping[2])
                    skipping = None
                    chunk = chunk[cut + 1 :]
                data = rest + chunk if rest else chunk
                end = data.rfind(b"\n")
                if end < 0:
                    rest = data
                else:
                    complete, rest = data[: end + 1], data[end + 1 :]
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

    def _chunks(self, fh: IO[bytes]) -> Iterator[bytes]:
        """1 MB chunks of the file as UTF-8: as they are, or transcoded from UTF-16/32 (by its BOM)."""
        chunk = fh.read(1 << 20)
        encoding = bom_encoding(chunk[:4])
        if encoding is None:
            while chunk:
                yield chunk
                chunk = fh.read(1 << 20)
            return
        self.encoding = encoding
        decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        while True:
            text = decoder.decode(chunk, final=not chunk)
            if text:
                yield text.encode("utf-8", errors="replace")
            if not chunk:
                return
            chunk = fh.read(1 << 20)

    def _too_long(self, lineno: int, size: int, head: bytes) -> None:
        self.bytes_read += size
        self.quarantine.append(
            QuarantineRecord(
                file=str(self.path),
                line=lineno,
                adapter=self.adapter,
                snippet=snippet_of(head),
                reason=f"line too long: {size} bytes (limit {self.max_line_bytes}); skipped",
            )
        )


#: Timestamps outside this range are treated as unusable (None): every reader of the lake can represent the
#: rest (numpy/pandas ``datetime64[ns]`` stops at 1677 and 2262; ``0001-01-01T00:00:00+05:00`` is year 0 in
#: UTC, which Python cannot even read back). Real agent logs are nowhere near either end.
MIN_TS = datetime(1678, 1, 1, tzinfo=UTC)
MAX_TS = datetime(2262, 1, 1, tzinfo=UTC)


def ts_in_range(ts: datetime) -> datetime | None:
    """``ts`` (naive taken as UTC) when its UTC instant is within [``MIN_TS``, ``MAX_TS``), else None."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    try:
        utc = ts.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    return ts if MIN_TS <= utc < MAX_TS else None


def parse_ts(value: object) -> datetime | None:
    """ISO-8601 timestamps as written by agents (``...Z``), or epoch seconds/milliseconds; None if unusable.

    Unusable includes out of range (see ``MIN_TS``): callers keep the record and count the missing time.
    """
    if isinstance(value, str) and value:
        try:
            ts = datetime.fromisoformat(value)
        except ValueError:
            return None
        return ts_in_range(ts)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:  # no agent ran before 1970: a negative epoch is a "not set" marker, not a time
            return None
        try:
            # epoch seconds, or milli-, micro- or nanoseconds (each unit ~1000x the last for the same instant)
            seconds = (
                value / 1e9
                if value > 1e17
                else value / 1e6
                if value > 1e14
                else value / 1000
                if value > 1e11
                else value
            )
            return ts_in_range(datetime.fromtimestamp(seconds, tz=UTC))
        except (OverflowError, OSError, ValueError):
            return None
    return None


# ---- the boundary to parquet --------------------------------------------------------------------------
#: ``pa.string`` fields (ids, paths, names) longer than this are not ids: None (or cut, where required).
#: 4096 is PATH_MAX on Linux; a real id, model name or branch is far shorter.
MAX_SHORT_CHARS = 4096
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1

# (field, kind, required): kinds map to the arrow type in ``bashgym_assets.sessions``
_STEP_FIELDS = (
    ("index", "int32", True),
    ("tool_name", "short", True),
    ("tool_use_id", "short", False),
    ("input", "long", True),
    ("command", "long", False),
    ("output", "long", True),
    ("exit_code", "exit", False),
    ("success", "bool", False),
    ("is_error", "bool", True),
    ("cwd", "short", False),
    ("started_at", "ts", False),
    ("finished_at", "ts", False),
    ("sidechain", "bool", True),
    ("agent_id", "short", False),
    ("parent_tool_use_id", "short", False),
    ("prompt_index", "int32", False),
)
_PROMPT_FIELDS = (
    ("index", "int32", True),
    ("text", "long", True),
    ("timestamp", "ts", False),
    ("kind", "short", True),
)
_SESSION_FIELDS = (
    ("session_id", "short", True),
    ("source_format", "short", True),
    ("source_path", "short", True),
    ("repo", "short", True),
    ("repo_path", "short", False),
    ("repo_remote", "short", False),
    ("cwd", "short", False),
    ("model", "short", False),
    ("agent_version", "short", False),
    ("git_branch", "short", False),
    ("started_at", "ts", False),
    ("ended_at", "ts", False),
    ("input_tokens", "count", False),
    ("output_tokens", "count", False),
    ("cache_read_tokens", "count", False),
    ("cache_creation_tokens", "count", False),
    ("content_hash", "short", True),
)


def _conform_value(value: Any, kind: str, required: bool, name: str, notes: Counter) -> Any:
    """One field made to fit its arrow type; every change is counted in ``notes`` as ``field:what``.

    Per kind: strings with lone surrogates get U+FFFD (pyarrow refuses them); short strings over
    ``MAX_SHORT_CHARS`` become None (cut when required); a number where a string belongs is written as text,
    anything else of the wrong type becomes None ("" when required). Exit codes are int32: 2**31..2**32-1 is
    how Windows/Git Bash report an NTSTATUS (0xC0000005 = 3221225477), wrapped to the signed value Windows
    itself shows (-1073741819); anything else outside int32 becomes None (``success`` was decided from the
    real value already). Token counts must be 0..int64, else None. Timestamps outside ``MIN_TS``/``MAX_TS``
    become None. Non-bool flags are read for their truth value.
    """
    if kind in ("short", "long"):
        if type(value) is str:
            if has_surrogates(value):
                notes[f"{name}:lone_surrogates"] += 1
                value = clean_str(value)
            if kind == "short" and len(value) > MAX_SHORT_CHARS:
                notes[f"{name}:too_long"] += 1
                return value[:MAX_SHORT_CHARS] if required else None
            return value
        if value is None:
            if required:
                notes[f"{name}:missing"] += 1
                return ""
            return None
        notes[f"{name}:wrong_type"] += 1
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and (isinstance(value, int) or math.isfinite(value))
            and len(str(value)) <= MAX_SHORT_CHARS
        ):
            return str(value)
        return "" if required else None
    if kind == "ts":
        if value is None:
            return None
        if isinstance(value, datetime):
            fitted = ts_in_range(value)
            if fitted is None:
                notes[f"{name}:out_of_range"] += 1
            return fitted
        notes[f"{name}:wrong_type"] += 1
        return None
    if kind == "bool":
        if value is None and not required or type(value) is bool:
            return value
        notes[f"{name}:wrong_type"] += 1
        return bool(value) if required or isinstance(value, int | float) else None
    # integers
    if value is None:
        return None
    if type(value) is not int:
        if isinstance(value, bool) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        ):
            value = int(value)
        else:
            notes[f"{name}:wrong_type"] += 1
            return None
    if kind == "count":
        if 0 <= value <= INT64_MAX:
            return value
    elif INT32_MIN <= value <= INT32_MAX:
        return value
    elif kind == "exit" and INT32_MAX < value < 2**32:
        notes[f"{name}:wrapped_to_int32"] += 1
        return value - 2**32
    notes[f"{name}:out_of_range"] += 1
    return None


def _conform_fields(values: dict[str, Any], spec: tuple, prefix: str, notes: Counter) -> None:
    for name, kind, required in spec:
        value = values.get(name)
        # fast paths: the common, already-fitting values (this runs for every step of every session)
        if value is None:
            if not required:
                continue
        elif type(value) is str:
            if value.isascii() and (kind == "long" or kind == "short" and len(value) <= MAX_SHORT_CHARS):
                continue
        elif type(value) is bool:
            if kind == "bool":
                continue
        elif type(value) is int:
            if (
                INT32_MIN <= value <= INT32_MAX
                and kind in ("int32", "exit")
                or kind == "count"
                and 0 <= value <= INT64_MAX
            ):
                continue
        elif type(value) is datetime and value.tzinfo is UTC and MIN_TS <= value < MAX_TS:
            continue
        fitted = _conform_value(value, kind, required, prefix + name, notes)
        if fitted is not value:
            values[name] = fitted


def conform_session(session: Session) -> Session:
    """Make every field of ``session`` fit ``SESSION_ARROW_SCHEMA`` so writing (and reading back) cannot fail.

    This is the one boundary between what adapters read and what lands in parquet: adapters call it on each
    session they return. Values are coerced, never the session dropped (see ``_conform_value`` for the rule per
    kind of field); what was changed is counted in ``extra["coerced"]`` (``"steps.exit_code:wrapped_to_int32"``
    ...) so nothing changes silently.
    """
    notes: Counter = Counter()
    _conform_fields(session.__dict__, _SESSION_FIELDS, "", notes)
    for i, step in enumerate(session.steps):
        _conform_fields(step.__dict__, _STEP_FIELDS, "steps.", notes)
        if step.__dict__.get("index") is None:
            step.__dict__["index"] = i
    for i, prompt in enumerate(session.prompts):
        _conform_fields(prompt.__dict__, _PROMPT_FIELDS, "prompts.", notes)
        if prompt.__dict__.get("index") is None:
            prompt.__dict__["index"] = i
    extra = session.extra if isinstance(session.extra, dict) else {"extra": session.extra}
    try:
        orjson.dumps(extra, default=str)
    except TypeError:
        extra = orjson.loads(json_bytes(jsonable(extra, notes)))
        notes["extra:rewritten"] += 1
    if notes:
        coerced = extra.get("coerced")
        merged = Counter(coerced) if isinstance(coerced, dict) else Counter()
        merged.update(notes)
        extra = {**extra, "coerced": dict(merged)}
    session.__dict__["extra"] = extra
    return session


def stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None
