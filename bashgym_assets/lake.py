"""The storage layer every asset uses: parquet per asset and partition, DuckDB views, artifact folders.

Layout under the data folder::

    lake/<asset>/<partition>.parquet     one file per partition ("__all__" for unpartitioned assets)
    artifacts/<kind>/<name>/             large things: adapters, model folders, reports, plots

Writes are atomic: a table is written to a hidden temporary name in the same folder, fsynced, then renamed over
the final name. A crash leaves at most a ``.tmp-*`` file, which readers never look at (and the next pipeline's
start removes: ``housekeeping.sweep_debris``), never a half-written parquet file that a reader takes for whole.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bashgym_assets.config import Settings, get_settings

UNPARTITIONED = "__all__"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]*$")


def _check_name(kind: str, name: str) -> str:
    if not _SAFE_NAME.match(name) or ".." in name:
        raise ValueError(
            f"unsafe {kind} name {name!r}: use letters, digits, '_', '-', '.', '=' (no '/' or '..')"
        )
    return name


def current_umask() -> int:
    """The process umask, read without changing it (``os.umask`` sets it for every thread while it reads it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: Path) -> None:
    """Give ``path`` (a file, or a folder and everything in it) the modes a plain ``mkdir`` / ``open`` would have
    given under the process umask: ``mkdtemp`` makes 0700 and ``mkstemp`` (and safetensors' writer) 0600, which
    another user's notebook, UI or server then cannot read. Executable bits stay as the file has them (masked);
    links are left alone."""
    mask = current_umask()
    folder_mode, file_mode = 0o777 & ~mask, 0o666 & ~mask

    def file(p: str) -> None:
        st = os.lstat(p)
        if not os.path.islink(p):
            os.chmod(p, file_mode | (st.st_mode & 0o111 & ~mask))

    if path.is_symlink():
        return
    if not path.is_dir():
        file(str(path))
        return
    os.chmod(path, folder_mode)
    for root, dirs, files in os.walk(path):
        for d in dirs:
            full = os.path.join(root, d)
            if not os.path.islink(full):
                os.chmod(full, folder_mode)
        for f in files:
            file(os.path.join(root, f))


@contextlib.contextmanager
def atomic_path(final: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``final``; on success fsync it and rename it over ``final``.

    On any exception the temporary file is removed and ``final`` is left as it was.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".tmp-{final.name}.", suffix=suffix, dir=final.parent)
    os.fchmod(
        fd, 0o666 & ~current_umask()
    )  # mkstemp makes 0600: a UI or notebook of another user must read it
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        dir_fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(final: Path, data: bytes) -> Path:
    with atomic_path(final) as tmp:
        tmp.write_bytes(data)
    return final


def atomic_write_text(final: Path, text: str) -> Path:
    return atomic_write_bytes(final, text.encode("utf-8"))


def to_arrow(rows: pa.Table | Sequence[Mapping[str, Any]], schema: pa.Schema | None = None) -> pa.Table:
    """Rows (dicts, e.g. ``model.model_dump()``) or a table, as an arrow table with the given schema if any."""
    if isinstance(rows, pa.Table):
        return rows.cast(schema) if schema is not None else rows
    rows = list(rows)
    if schema is not None:
        return pa.Table.from_pylist(rows, schema=schema)
    if not rows:
        return pa.table({})
    return pa.Table.from_pylist(rows)


class Lake:
    """Parquet tables per asset and partition under one folder, with DuckDB views over them."""

    def __init__(self, settings: Settings | None = None, root: Path | None = None):
        self.settings = settings or get_settings()
        self.root = Path(root) if root is not None else self.settings.lake_dir
        self.artifacts_root = self.settings.artifacts_dir if root is None else self.root.parent / "artifacts"
        self.quarantined: list[tuple[str, str, str]] = []  # (asset, file, reason) left out of the views

    # ---- tables ----------------------------------------------------------------------------------------
    def table_path(self, asset: str, partition: str | None = None) -> Path:
        return (
            self.root
            / _check_name("asset", asset)
            / f"{_check_name('partition', partition or UNPARTITIONED)}.parquet"
        )

    def write(
        self,
        asset: str,
        rows: pa.Table | Sequence[Mapping[str, Any]],
        partition: str | None = None,
        schema: pa.Schema | None = None,
    ) -> Path:
        """Replace one partition of an asset with ``rows``, atomically. Returns the parquet path."""
        table = to_arrow(rows, schema)
        final = self.table_path(asset, partition)
        with atomic_path(final, suffix=".parquet") as tmp:
            pq.write_table(table, tmp, compression="zstd")
        return final

    @contextlib.contextmanager
    def locked(self, asset: str) -> Iterator[None]:
        """Hold the asset's writer lock (``flock`` on ``lake/.locks/<asset>.lock``) for a read-modify-write.

        Atomic writes keep a reader from seeing half a file, not two writers from each replacing the other's rows:
        every append that rewrites a table takes this lock, across threads and processes alike."""
        import fcntl

        folder = self.root / ".locks"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{_check_name('asset', asset)}.lock", "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def append(
        self,
        asset: str,
        rows: Sequence[Mapping[str, Any]],
        partition: str | None = None,
        schema: pa.Schema | None = None,
    ) -> Path:
        """Add rows to one partition, under the asset's writer lock, so concurrent appends never lose a row."""
        with self.locked(asset):
            new = to_arrow(rows, schema)
            if self.exists(asset, partition):
                new = pa.concat_tables([self.read(asset, partition), new], promote_options="permissive")
            return self.write(asset, new, partition, schema)

    def exists(self, asset: str, partition: str | None = None) -> bool:
        return self.table_path(asset, partition).exists()

    def partitions(self, asset: str) -> list[str]:
        folder = self.root / _check_name("asset", asset)
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.parquet") if not p.name.startswith("."))

    def assets(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir() and not p.name.startswith(".") and self.partitions(p.name)
        )

    def read(self, asset: str, partition: str | None = None, columns: list[str] | None = None) -> pa.Table:
        """One partition of an asset as an arrow table (``FileNotFoundError`` if it was never written)."""
        path = self.table_path(asset, partition)
        try:
            # One open handle for the whole read: a writer renaming a new version over the path meanwhile leaves
            # this handle on the old file, whole. Opening by path (pyarrow reopens it for footer and pages) read
            # halves of two versions during concurrent rewrites ("Page was smaller than expected"). Arrow's own
            # handle, not Python's: pyarrow 25's threaded read through a Python file object left the process to
            # abort at exit about every other time ("terminate called without an active exception", exit 134).
            with pa.OSFile(str(path), "rb") as handle:
                return pq.read_table(handle, columns=columns)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{asset}[{partition or UNPARTITIONED}] has not been materialized: {path}"
            ) from None

    def read_all(
        self, asset: str, partitions: Iterable[str] | None = None, columns: list[str] | None = None
    ) -> pa.Table:
        """Every (or the named) partition of an asset concatenated, with a ``_partition`` column added."""
        wanted = list(partitions) if partitions is not None else self.partitions(asset)
        tables = []
        for part in wanted:
            if not self.exists(asset, part):
                continue
            t = self.read(asset, part, columns)
            tables.append(t.append_column("_partition", pa.array([part] * t.num_rows, pa.string())))
        if not tables:
            return pa.table({})
        return pa.concat_tables(tables, promote_options="permissive")

    def read_rows(self, asset: str, partition: str | None = None) -> list[dict[str, Any]]:
        return self.read(asset, partition).to_pylist()

    def delete(self, asset: str, partition: str | None = None) -> None:
        self.table_path(asset, partition).unlink(missing_ok=True)

    # ---- artifacts -------------------------------------------------------------------------------------
    def artifact_dir(self, kind: str, name: str, create: bool = True) -> Path:
        path = self.artifacts_root / _check_name("artifact kind", kind) / _check_name("artifact", name)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    @contextlib.contextmanager
    def atomic_artifact_dir(self, kind: str, name: str) -> Iterator[Path]:
        """Yield a temporary folder; on success it replaces ``artifacts/<kind>/<name>`` as a whole."""
        final = self.artifact_dir(kind, name, create=False)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}.", dir=final.parent))
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700
        try:
            yield tmp
            old = None
            if final.exists():
                old = final.with_name(f".old-{name}.{os.getpid()}")
                os.replace(final, old)
            os.replace(tmp, final)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    # ---- DuckDB ----------------------------------------------------------------------------------------
    def connect(
        self, database: str | Path = ":memory:", read_only: bool = False
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with every asset of the lake registered as a view named after the asset.

        Partitioned assets become one view over all their partition files with a ``_partition`` column.
        """
        con = duckdb.connect(str(database), read_only=read_only)
        self.register_views(con)
        return con

    def register_views(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        """One view per asset over its partition files. A file that does not read as parquet (truncated, zeroed,
        not parquet at all) is left out of its view with the reason, in ``self.quarantined`` and the view
        ``lake_quarantine``: one bad partition must not take every query down with it, and the others are served."""
        names = []
        self.quarantined = []
        for asset in self.assets():
            files = [str(self.table_path(asset, p)) for p in self.partitions(asset)]
            try:
                self._create_view(con, asset, files)
            except duckdb.Error:
                # only now look at each file (the healthy path pays nothing): keep those whose footer reads
                good = []
                for f in files:
                    try:
                        pq.read_metadata(f)
                        good.append(f)
                    except Exception as exc:  # noqa: BLE001 - any unreadable file is quarantined, not fatal
                        self.quarantined.append((asset, f, f"{type(exc).__name__}: {exc}"[:500]))
                if not good:
                    continue
                try:
                    self._create_view(con, asset, good)
                except duckdb.Error as exc:
                    self.quarantined.append((asset, "", f"view not created: {exc}"[:500]))
                    continue
            names.append(asset)
        if self.quarantined:
            rows = ", ".join(
                "(" + ", ".join("'" + v.replace("'", "''") + "'" for v in q) + ")" for q in self.quarantined
            )
            con.execute(
                f"CREATE OR REPLACE VIEW lake_quarantine AS SELECT * FROM (VALUES {rows}) "
                "AS t(asset, file, reason)"
            )
        return names

    @staticmethod
    def _create_view(con: duckdb.DuckDBPyConnection, asset: str, files: list[str]) -> None:
        file_list = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(
            f'CREATE OR REPLACE VIEW "{asset}" AS SELECT * EXCLUDE (filename), '
            f"regexp_extract(filename, '([^/]+)\\.parquet$', 1) AS _partition "
            f"FROM read_parquet([{file_list}], filename = true, union_by_name = true)"
        )


def get_lake(settings: Settings | None = None) -> Lake:
    return Lake(settings)


def duckdb_connection(settings: Settings | None = None) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB connection with every materialized asset registered as a view."""
    return get_lake(settings).connect()
