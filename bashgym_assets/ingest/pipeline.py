"""Materialising one repo partition of ``raw_sessions``: find its session files, parse, dedupe, write.

Memory does not grow with the corpus: files are parsed one at a time and sessions are written to parquet in
batches through a ``ParquetWriter`` on the lake's atomic temporary path. Sessions already in the partition
whose source file has since disappeared are carried over (Claude Code deletes old transcripts itself; what
was imported once is never lost). When two files yield the same ``session_id`` (a transcript and the hook's
capture of the same session), the adapter with the higher priority wins.

Failures are isolated per file: an adapter that raises on one file, or a session that cannot be written,
puts that file in the quarantine table with the exception's message and the rest of the partition lands
(what that file gave in an earlier run is carried over rather than lost). Rows of an earlier run that can no
longer be read back (written before values were range-checked) are quarantined instead of failing the run.

Each ingest records which files it read, at which size and modification time (``ingested_files``, beside the scan
cursors, bound to the partition file it wrote): the trace sensor starts no run for files an ingest already read
as they are now, whoever ran it (``bashgym demo``, the UI, an earlier sensor run), even when its own cursor is new.
"""

from __future__ import annotations

import json
import operator
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from bashgym_assets.ingest.base import QuarantineRecord, SessionAdapter, conform_session
from bashgym_assets.ingest.repos import resolve_repo
from bashgym_assets.ingest.scan import CursorStore, FileEntry, indexed_repo_key, iter_trace_files, repo_key_of
from bashgym_assets.lake import Lake, atomic_path, atomic_write_text
from bashgym_assets.sessions import SESSION_ARROW_SCHEMA, Session

RAW_SESSIONS = "raw_sessions"
QUARANTINE = "raw_sessions_quarantine"
QUARANTINE_SCHEMA = pa.schema(
    [
        ("file", pa.string()),
        ("line", pa.int64()),
        ("reason", pa.string()),
        ("snippet", pa.string()),
        ("adapter", pa.string()),
    ]
)
BATCH_SESSIONS = 64


@dataclass
class IngestReport:
    """What one partition's ingest did, for the asset's metadata."""

    repo: str
    sessions: int = 0
    steps: int = 0
    failed_steps: int = 0
    prompts: int = 0
    files_parsed: int = 0
    bytes_read: int = 0
    carried_over: int = 0
    duplicates_dropped: int = 0
    tools: Counter = field(default_factory=Counter)
    formats: Counter = field(default_factory=Counter)
    skipped_types: Counter = field(default_factory=Counter)
    first: datetime | None = None
    last: datetime | None = None
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    preview: list[Session] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, session: Session) -> None:
        self.sessions += 1
        self.steps += len(session.steps)
        self.prompts += sum(p.kind == "user" for p in session.prompts)
        self.failed_steps += sum(s.success is False for s in session.steps)
        self.tools.update(s.tool_name for s in session.steps)
        self.formats[session.source_format] += 1
        extra = session.extra if isinstance(session.extra, dict) else orjson.loads(session.extra or "{}")
        self.skipped_types.update(extra.get("skipped_types", {}))
        for ts in (session.started_at, session.ended_at):
            if ts is not None:
                self.first = ts if self.first is None or ts < self.first else self.first
                self.last = ts if self.last is None or ts > self.last else self.last
        if len(self.preview) < 3:
            self.preview.append(session)


def _struct_list(items_per_row: list[list[Any]], struct: pa.StructType) -> pa.Array:
    """A ``list<struct>`` column built field by field (nested ``from_pylist`` is the slow part otherwise)."""
    names = [f.name for f in struct]
    getter = operator.itemgetter(*names)
    offsets = [0]
    values: list[tuple] = []
    for items in items_per_row:
        values.extend(getter(item.__dict__) for item in items)
        offsets.append(len(values))
    columns: list[Sequence[Any]] = list(zip(*values, strict=True)) if values else [[] for _ in names]
    children = [pa.array(col, type=f.type) for col, f in zip(columns, struct, strict=True)]
    inner = pa.StructArray.from_arrays(children, fields=list(struct))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), inner)


def session_table(sessions: list[Session]) -> pa.Table:
    """``sessions_to_table`` built column by column (the hot path of ingest; the same table, faster: BENCHMARKS.md)."""
    arrays = []
    for f in SESSION_ARROW_SCHEMA:
        if f.name == "steps":
            arrays.append(_struct_list([s.steps for s in sessions], f.type.value_type))
        elif f.name == "prompts":
            arrays.append(_struct_list([s.prompts for s in sessions], f.type.value_type))
        elif f.name == "extra":
            arrays.append(pa.array([orjson.dumps(s.extra, default=str).decode() for s in sessions], f.type))
        else:
            arrays.append(pa.array([s.__dict__[f.name] for s in sessions], f.type))
    return pa.Table.from_arrays(arrays, schema=SESSION_ARROW_SCHEMA)


def session_sources(
    dirs: Iterable[Path],
    repo: str | None = None,
    index: dict[str, FileEntry] | None = None,
    stats: dict[str, tuple[int, int]] | None = None,
) -> Iterator[tuple[Path, SessionAdapter]]:
    """Session files under the folders (highest adapter priority first), optionally only one repo's.

    Finding one repo's files means knowing every file's repo; ``index`` (the sensor's last cursor) gives it for
    files unchanged since that tick, so a partition run stats the other repos' files instead of reading their
    heads (with 100,000 files, reading every head cost each run seconds, and each run is a fresh process).
    ``stats``: filled with the (size, mtime_ns) of every trace file of the repo, taken before it is read: the
    sources, and the files their adapter reads with them (a Claude Code session's ``subagents/agent-*.jsonl``)."""
    found = []
    for path, st, adapter in iter_trace_files(dirs):
        source = adapter.matches(path)
        if not source and stats is None:
            continue
        if repo is not None and indexed_repo_key(path, st, adapter, index) != repo:
            continue
        if stats is not None:
            stats[str(path)] = (st.st_size, st.st_mtime_ns)
        if source:
            found.append((path, adapter))
    found.sort(key=lambda pa_: (-pa_[1].priority, str(pa_[0])))
    yield from found


def parse_sources(
    sources: Iterable[tuple[Path, SessionAdapter]],
    report: IngestReport,
    repo: str | None = None,
    failed: set[str] | None = None,
    unsettled: set[str] | None = None,
) -> Iterator[Session]:
    """Parse each source once; quarantine and counts go to ``report``; duplicates by session id dropped.

    An exception from an adapter quarantines that file (its path goes to ``failed``) and the next file is
    parsed: one bad file never fails the partition. A file being rewritten while it was read goes to ``failed``
    and ``unsettled``.
    """
    seen: dict[str, tuple[str, str, str]] = {}  # session id -> (adapter, file, content hash) of the one kept
    for path, adapter in sources:
        report.files_parsed += 1
        try:
            outcome = adapter.parse(path, resolve_repo)
            sessions = [conform_session(s) for s in outcome.sessions]  # idempotent; guards any adapter
        except Exception as exc:
            report.quarantine.append(
                QuarantineRecord(
                    file=str(path),
                    adapter=adapter.name,
                    reason=f"file could not be imported: {type(exc).__name__}: {exc}",
                )
            )
            if failed is not None:
                failed.add(str(path))
            continue
        report.bytes_read += outcome.bytes_read
        report.quarantine.extend(outcome.quarantine)
        if outcome.unsettled and failed is not None:
            failed.add(str(path))  # being rewritten right now: its earlier rows stay until it has settled
        if outcome.unsettled and unsettled is not None:
            unsettled.add(str(path))
        for session in sessions:
            if repo is not None and session.repo != repo:
                session.repo = repo  # the partition the scan filed this file under stays authoritative
            if session.session_id in seen:
                report.duplicates_dropped += 1
                kept_adapter, kept_file, kept_hash = seen[session.session_id]
                if kept_adapter == adapter.name and kept_hash != session.content_hash:
                    # the same adapter's two different files under one id: only one can be kept, say which (a
                    # transcript and its hook capture, or two identical copies, are the expected duplicates)
                    report.quarantine.append(
                        QuarantineRecord(
                            file=str(path),
                            adapter=adapter.name,
                            reason=f"duplicate session id {session.session_id!r} with other content: {kept_file} was "
                            "kept (files are read in path order)",
                        )
                    )
                continue
            seen[session.session_id] = (adapter.name, str(path), session.content_hash)
            yield session


def writable_table(
    batch: list[Session], report: IngestReport, failed: set[str]
) -> tuple[pa.Table, list[Session]]:
    """The batch as a table; if that fails, session by session, quarantining (by file) those that cannot be."""
    try:
        return session_table(batch), batch
    except Exception:
        pass
    kept: list[Session] = []
    for session in batch:
        try:
            session_table([session])
        except Exception as exc:
            report.quarantine.append(
                QuarantineRecord(
                    file=session.source_path,
                    adapter=session.source_format,
                    reason=f"session {session.session_id} could not be written: {type(exc).__name__}: {exc}",
                )
            )
            failed.add(session.source_path)
            continue
        kept.append(session)
    return session_table(kept), kept


def _exists(path: str) -> bool:
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


def _carry_over(
    old_path: Path, written_ids: set[str], failed: set[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """Rows of the previous partition file not re-imported whose source vanished or failed this time.

    Only the two small columns are read to decide; whole rows are read only for row groups with a keeper.
    """
    if not old_path.exists():
        return
    failed = failed or set()
    parquet = pq.ParquetFile(old_path)
    for group in range(parquet.num_row_groups):
        keys = parquet.read_row_group(group, columns=["session_id", "source_path"])
        keep = [
            sid not in written_ids and (src in failed or not _exists(src))
            for sid, src in zip(
                keys.column("session_id").to_pylist(), keys.column("source_path").to_pylist(), strict=True
            )
        ]
        if any(keep):
            rows = parquet.read_row_group(group).filter(pa.array(keep))
            yield from rows.cast(SESSION_ARROW_SCHEMA).to_batches()


def _readable(rows: pa.RecordBatch, report: IngestReport) -> tuple[pa.RecordBatch, list[Session]]:
    """Carried-over rows that read back as sessions; the rest (e.g. a year-0 timestamp) are quarantined."""
    try:
        return rows, [Session.from_row(r) for r in rows.to_pylist()]
    except Exception:
        pass
    keep: list[bool] = []
    sessions: list[Session] = []
    for i in range(rows.num_rows):
        one = rows.slice(i, 1)
        try:
            sessions.append(Session.from_row(one.to_pylist()[0]))
            keep.append(True)
        except Exception as exc:
            keep.append(False)
            ids = one.select(["session_id", "source_path"]).to_pylist()[0]
            report.quarantine.append(
                QuarantineRecord(
                    file=str(ids["source_path"]),
                    adapter="raw_sessions",
                    reason=f"previously imported session {ids['session_id']} cannot be read back and was dropped: "
                    f"{type(exc).__name__}: {exc}",
                )
            )
    return rows.filter(pa.array(keep)), sessions


def cursor_store(lake: Lake, create: bool = True) -> CursorStore:
    """Where ``trace_files_sensor`` keeps its scan cursors in this lake."""
    return CursorStore(lake.artifact_dir("ingest", "scan_cursors", create=create))


def scan_index(lake: Lake) -> dict[str, FileEntry]:
    """The trace sensor's newest cursor (file -> size, mtime, repo) in this lake, {} if it never ran here."""
    store = cursor_store(lake, create=False)
    return store.latest().files if store.folder.is_dir() else {}


def _ingested_files_path(lake: Lake, repo: str, create: bool = True) -> Path:
    return (
        lake.artifact_dir("ingest", "ingested_files", create=create)
        / f"{lake.table_path(RAW_SESSIONS, repo).stem}.json"
    )


def _file_stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def record_ingested_files(lake: Lake, repo: str, files: dict[str, tuple[int, int]]) -> None:
    """Record the files an ingest of ``repo`` read ({path: (size, mtime_ns)} as they were before reading), bound
    to the partition file it wrote (its size and mtime): a partition rewritten or removed since voids the record."""
    table = _file_stamp(lake.table_path(RAW_SESSIONS, repo))
    if table is None:
        return
    record = {"table": list(table), "files": {path: list(stamp) for path, stamp in sorted(files.items())}}
    atomic_write_text(_ingested_files_path(lake, repo), json.dumps(record, separators=(",", ":")))


def ingested_files(lake: Lake, repo: str) -> dict[str, tuple[int, int]]:
    """The files the last ingest of ``repo`` read, {path: (size, mtime_ns)}; {} when none is on record or the
    partition file is no longer the one that ingest wrote."""
    try:
        record = json.loads(_ingested_files_path(lake, repo, create=False).read_text())
        table = _file_stamp(lake.table_path(RAW_SESSIONS, repo))
        if table is None or tuple(record["table"]) != table:
            return {}
        return {path: (int(stamp[0]), int(stamp[1])) for path, stamp in record["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return {}


def not_yet_ingested(
    lake: Lake, changed: dict[str, list[str]], cursor: dict[str, FileEntry]
) -> dict[str, list[str]]:
    """``changed`` (repo -> files, a scan's) less the files that the last ingest of their repo read as they are now
    (same size and mtime as in ``cursor``); repos left with nothing are dropped."""
    left: dict[str, list[str]] = {}
    for repo, files in changed.items():
        done = ingested_files(lake, repo)
        todo = [
            f
            for f in files
            if f not in cursor
            or done.get(f) != (cursor[f].size, cursor[f].mtime_ns)
            or cursor[f].repo != repo
        ]
        if todo:
            left[repo] = todo
    return left


def ingest_repo(lake: Lake, dirs: Iterable[Path], repo: str) -> IngestReport:
    """Rebuild ``raw_sessions[repo]`` (and its quarantine table) from the trace folders, and record which files
    it read (``ingested_files``)."""
    started = time.perf_counter()
    report = IngestReport(repo=repo)
    final = lake.table_path(RAW_SESSIONS, repo)
    written: set[str] = set()
    failed: set[str] = set()  # files that raised or could not be written: their earlier rows are kept
    read: dict[str, tuple[int, int]] = {}
    unsettled: set[str] = set()

    def flush(batch: list[Session]) -> None:
        table, kept = writable_table(batch, report, failed)
        for session in kept:
            report.add(session)
            written.add(session.session_id)
        if table.num_rows:
            writer.write_table(table)

    with atomic_path(final, suffix=".parquet") as tmp:
        writer = pq.ParquetWriter(tmp, SESSION_ARROW_SCHEMA, compression="zstd")
        try:
            batch: list[Session] = []
            index = scan_index(lake)
            sources = session_sources(dirs, repo, index, read)
            for session in parse_sources(sources, report, repo, failed, unsettled):
                batch.append(session)
                if len(batch) >= BATCH_SESSIONS:
                    flush(batch)
                    batch = []
            if batch:
                flush(batch)
            for rows in _carry_over(final, written, failed):
                rows, sessions = _readable(rows, report)
                report.carried_over += rows.num_rows
                for session in sessions:
                    report.add(session)
                if rows.num_rows:
                    writer.write_batch(rows)
        finally:
            writer.close()
    lake.write(
        QUARANTINE, [q.model_dump() for q in report.quarantine], partition=repo, schema=QUARANTINE_SCHEMA
    )
    # a file being rewritten while it was read is not on record (what it holds now was not taken); one that
    # raised is: read again unchanged, it would raise again
    record_ingested_files(lake, repo, {f: stamp for f, stamp in read.items() if f not in unsettled})
    report.seconds = time.perf_counter() - started
    return report


def discover_repos(dirs: Iterable[Path]) -> list[str]:
    """Every repo key with at least one session file (what the sensor registers as partitions)."""
    return sorted({repo_key_of(path, adapter) for path, adapter in session_sources(dirs)})
