"""Move a data folder, or repair one that was copied by hand: every absolute path into the old folder rewritten.

Why: ``BASHGYM_HOME`` chooses the folder, but the stores inside it remember where they were created. MLflow keeps
absolute artifact locations (experiments, runs, logged models, model versions, dataset sources), Dagster keeps
absolute paths in its event log (materialization metadata: adapter folders, parquet files), PEFT's
``adapter_config.json`` names its base model folder, the logged models' ``MLmodel`` files name it again, and lake
tables may hold paths in their rows. A copied folder therefore kept reading from and writing into the old one, and
deleting the old one broke the copy.

``move_home`` (``bashgym move NEW_PATH [--copy]``) moves or copies the folder under its pipeline lock, rewrites
every reference to the old root in SQLite databases (text and zlib-compressed blob columns, then ``VACUUM`` so no
stale page keeps the old bytes), parquet tables (string values, nested ones included), text files (JSON, YAML,
``MLmodel``, logs) and symbolic links, then scans the new folder for any byte string of the old root that is left
and fails if one is left in a place it rewrites. ``relocate_in_place`` (``bashgym relocate``) does the rewrite for a
folder that was copied or moved by hand; ``relocation_warning`` detects one at start-up: the folder records where it
lives (``.bashgym-root``), and the MLflow and Dagster stores are probed for a root other than the current one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import sqlite3
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from bashgym_assets.config import Settings, get_settings

MARKER = ".bashgym-root"  # {"root": "/abs/path"}: where this data folder was last set up or moved to
SKIP_NAMES = {MARKER, ".pipeline.lock"}
TEXT_MAX_BYTES = 256 * 2**20  # larger files are only scanned, never rewritten
_CHUNK = 8 * 2**20


@dataclass
class Reference:
    """Where the old root was found (and, when rewriting, replaced): a file, the place inside it, how often."""

    path: str  # relative to the folder
    where: str  # "text", "link", "parquet column <c>", "sqlite <table>.<column>", "binary"
    count: int

    def line(self) -> str:
        return f"{self.path}: {self.where} ({self.count})"


@dataclass
class MoveReport:
    old: str
    new: str
    rewritten: list[Reference]
    binary_left: list[Reference]  # binary files that mention the old root (not read by bashgym; listed only)


class RelocationError(RuntimeError):
    """A move or rewrite that cannot be done safely (``cli.main`` prints it as ``error: ...``)."""


# ---- the substitution ------------------------------------------------------------------------------------------
class _Subst:
    """Replace the old root, as a plain path or percent-encoded in a ``file://`` URI, by the new one, only where it
    is a whole path prefix (``/data/home`` in ``/data/home/x`` and ``/data/home"``, never in ``/data/home2``)."""

    def __init__(self, old: str, new: str) -> None:
        pairs = {old: new, quote(old): quote(new)}
        self.pairs = [(re.compile(re.escape(o) + r"(?![\w.\-])"), n) for o, n in pairs.items()]
        self.bpairs = [
            (re.compile(re.escape(o.encode()) + rb"(?![\w.\-])"), n.encode()) for o, n in pairs.items()
        ]
        self.needles = [o.encode() for o in pairs]

    @staticmethod
    def _sub(pairs: list, value: Any) -> tuple[Any, int]:
        total = 0
        for pattern, new in pairs:
            value, n = pattern.subn(lambda _m, new=new: new, value)
            total += n
        return value, total

    def text(self, value: str) -> tuple[str, int]:
        return self._sub(self.pairs, value)

    def data(self, value: bytes) -> tuple[bytes, int]:
        return self._sub(self.bpairs, value)

    def deep(self, value: Any) -> tuple[Any, int]:
        """A parquet cell: strings, lists, dicts (structs, maps as lists of pairs) at any depth."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list | tuple):
            out, total = [], 0
            for v in value:
                nv, n = self.deep(v)
                out.append(nv)
                total += n
            return (type(value)(out) if isinstance(value, tuple) else out), total
        if isinstance(value, dict):
            out_d, total = {}, 0
            for k, v in value.items():
                nv, n = self.deep(v)
                out_d[k] = nv
                total += n
            return out_d, total
        return value, 0


def _count_in_file(path: Path, subst: _Subst) -> int:
    """Occurrences of the old root in a file of any size, read in chunks that overlap by a needle's length."""
    overlap = max(len(n) for n in subst.needles)
    total, tail = 0, b""
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            window = tail + chunk
            hits = sum(len(p.findall(window)) for p, _ in subst.bpairs)
            total += hits - sum(len(p.findall(tail)) for p, _ in subst.bpairs)
            tail = window[-overlap:]
    return total


# ---- per kind of file ------------------------------------------------------------------------------------------
def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"


def _sqlite(path: Path, subst: _Subst, apply: bool) -> list[tuple[str, int]]:
    """(table.column, values changed) in a SQLite database; text columns and blobs (raw or zlib-compressed, as
    Dagster stores its snapshots). With ``apply`` the rows are updated in one transaction, then VACUUMed."""
    found: dict[str, int] = {}

    def fix(value: Any, where: str) -> Any:
        new: str | bytes
        if isinstance(value, str):
            new, n = subst.text(value)
        elif isinstance(value, bytes):
            new, n = subst.data(value)
            if not n:
                try:
                    plain = zlib.decompress(value)
                except zlib.error:
                    return value
                fixed, n = subst.data(plain)
                new = zlib.compress(fixed) if n else value
        else:
            return value
        if n:
            found[where] = found.get(where, 0) + 1
        return new

    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        con.execute("BEGIN IMMEDIATE" if apply else "BEGIN")
        for table in tables:
            qt = '"' + table.replace('"', '""') + '"'
            for column in [r[1] for r in con.execute(f"PRAGMA table_info({qt})")]:
                qc = '"' + column.replace('"', '""') + '"'
                where = f"{table}.{column}"
                con.create_function("bg_fix", 1, lambda v, where=where: fix(v, where))
                # strings that contain a needle, and every blob (a compressed one hides its text)
                cond = " OR ".join([f"instr(CAST({qc} AS TEXT), ?) > 0"] * len(subst.needles))
                params = [n.decode() for n in subst.needles]
                if apply:
                    con.execute(
                        f"UPDATE {qt} SET {qc} = bg_fix({qc}) WHERE typeof({qc}) = 'text' AND ({cond})",
                        params,
                    )
                    blobs = (
                        con.execute(f"SELECT rowid, {qc} FROM {qt} WHERE typeof({qc}) = 'blob'").fetchall()
                        if _has_rowid(con, qt)
                        else []
                    )
                    for rowid, value in blobs:
                        new = fix(value, where)
                        if new is not value:
                            con.execute(f"UPDATE {qt} SET {qc} = ? WHERE rowid = ?", (new, rowid))
                else:
                    rows = con.execute(
                        f"SELECT {qc} FROM {qt} WHERE (typeof({qc}) = 'text' AND ({cond})) "
                        f"OR typeof({qc}) = 'blob'",
                        params,
                    )
                    for (value,) in rows:
                        fix(value, where)
        con.execute("COMMIT" if apply else "ROLLBACK")
        if apply and found:
            con.execute("VACUUM")  # the old bytes stay in free pages otherwise
    finally:
        con.close()
    return sorted(found.items())


def _has_rowid(con: sqlite3.Connection, qt: str) -> bool:
    try:
        con.execute(f"SELECT rowid FROM {qt} LIMIT 1")
        return True
    except sqlite3.OperationalError:
        return False


def _parquet(path: Path, subst: _Subst, apply: bool) -> list[tuple[str, int]]:
    """(column, values changed) in a parquet file; with ``apply`` it is rewritten atomically (zstd, as the lake)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bashgym_assets.lake import atomic_path

    def has_string(t: pa.DataType) -> bool:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return True
        if pa.types.is_dictionary(t):
            return has_string(t.value_type)
        return any(has_string(t.field(i).type) for i in range(t.num_fields))

    with pa.OSFile(str(path), "rb") as fh:  # Arrow's handle: see Lake.read (an abort at exit otherwise)
        table = pq.read_table(fh)
    found: list[tuple[str, int]] = []
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if has_string(field.type):
            values, changed = [], 0
            for value in column.to_pylist():
                new, n = subst.deep(value)
                values.append(new)
                changed += bool(n)
            if changed:
                found.append((field.name, changed))
                column = pa.chunked_array([pa.array(values, type=field.type)])
        columns.append(column)
    if apply and found:
        with atomic_path(path, suffix=".parquet") as tmp:
            pq.write_table(pa.Table.from_arrays(columns, schema=table.schema), tmp, compression="zstd")
    return found


def _text(path: Path, subst: _Subst, apply: bool) -> int | None:
    """Occurrences replaced in a text file (no NUL byte, at most TEXT_MAX_BYTES), None when it is not one."""
    if path.stat().st_size > TEXT_MAX_BYTES:
        return None
    data = path.read_bytes()
    if b"\x00" in data[:65536]:
        return None
    new, n = subst.data(data)
    if apply and n:
        from bashgym_assets.lake import atomic_write_bytes

        mode = path.stat().st_mode
        atomic_write_bytes(path, new)
        os.chmod(path, mode & 0o7777)
    return n


def _scan(folder: Path, old: str, new: str, apply: bool) -> tuple[list[Reference], list[Reference]]:
    """Every reference to ``old`` under ``folder`` (rewritten to ``new`` when ``apply``): (rewritable, binary)."""
    subst = _Subst(old, new)
    refs: list[Reference] = []
    binary: list[Reference] = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            path = Path(top) / name
            rel = str(path.relative_to(folder))
            if name in SKIP_NAMES and Path(top) == folder:
                continue
            if path.is_symlink():
                target = os.readlink(path)
                fixed, n = subst.text(target)
                if n and os.path.isabs(target):
                    refs.append(Reference(rel, f"link -> {target}", n))
                    if apply:
                        path.unlink()
                        path.symlink_to(fixed)
                continue
            if not path.is_file():
                continue
            if _is_sqlite(path):
                refs += [Reference(rel, f"sqlite {where}", n) for where, n in _sqlite(path, subst, apply)]
            elif path.suffix == ".parquet" and not name.startswith("."):
                try:
                    refs += [
                        Reference(rel, f"parquet column {c}", n) for c, n in _parquet(path, subst, apply)
                    ]
                except Exception:  # noqa: BLE001 - an unreadable parquet file (quarantined by the lake) is scanned
                    count = _count_in_file(path, subst)
                    if count:
                        binary.append(Reference(rel, "binary (unreadable parquet)", count))
            else:
                replaced = _text(path, subst, apply)
                if replaced is None:
                    count = _count_in_file(path, subst)
                    if count:
                        binary.append(Reference(rel, "binary", count))
                elif replaced:
                    refs.append(Reference(rel, "text", replaced))
    return refs, binary


def find_references(folder: Path, old: str | Path) -> tuple[list[Reference], list[Reference]]:
    """What under ``folder`` still names ``old``: (in places ``rewrite_references`` rewrites, in binary files)."""
    return _scan(Path(folder), str(old), str(old), apply=False)


def rewrite_references(
    folder: Path, old: str | Path, new: str | Path
) -> tuple[list[Reference], list[Reference]]:
    """Rewrite every reference to ``old`` under ``folder`` into ``new``: (what was rewritten, binary files that
    still mention it)."""
    return _scan(Path(folder), str(old), str(new), apply=True)


# ---- where a folder believes it lives --------------------------------------------------------------------------
def write_marker(home: Path) -> None:
    from bashgym_assets.lake import atomic_write_text

    atomic_write_text(home / MARKER, json.dumps({"root": str(home)}) + "\n")


def _marker_root(home: Path) -> str | None:
    try:
        return str(json.loads((home / MARKER).read_text())["root"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=10)


_MLFLOW_ROOT = re.compile(r"^(?:file://)?(/.*?)/mlflow/artifacts(?:/|$)")
_DAGSTER_ROOT = re.compile(r'"(/[^"]*?)/lake/[A-Za-z0-9_][^"/]*/[^"/]+\.parquet"')


def recorded_roots(settings: Settings | None = None) -> list[str]:
    """Data-folder roots other than the current one that this folder's marker, MLflow store (experiments' artifact
    locations) or Dagster store (materialized parquet paths) name; [] when they agree with the current one."""
    settings = settings or get_settings()
    home = str(settings.home)
    roots: set[str] = set()
    marker = _marker_root(settings.home)
    if marker:
        roots.add(marker)
    db = settings.mlflow_dir / "mlflow.db"
    if not settings.mlflow_tracking_uri_override and db.is_file():
        with contextlib.suppress(sqlite3.Error), contextlib.closing(_ro(db)) as con:
            for (location,) in con.execute("SELECT artifact_location FROM experiments"):
                match = _MLFLOW_ROOT.match(unquote(location or ""))
                if match:
                    roots.add(match.group(1))
    index = settings.dagster_home / "history" / "runs" / "index.db"
    if not settings.dagster_pg_url and index.is_file():
        with contextlib.suppress(sqlite3.Error), contextlib.closing(_ro(index)) as con:
            for (event,) in con.execute(
                "SELECT last_materialization FROM asset_keys WHERE last_materialization IS NOT NULL LIMIT 500"
            ):
                roots.update(m.group(1) for m in _DAGSTER_ROOT.finditer(event or ""))
    return sorted(r for r in roots if r != home and not r.startswith(home + "/"))


def relocation_warning(settings: Settings | None = None) -> str | None:
    """One line when the data folder's stores still point at another root (copied or moved by hand), else None
    (and the folder's marker is written, so a later copy is recognised at once)."""
    settings = settings or get_settings()
    if not settings.home.is_dir():
        return None
    roots = recorded_roots(settings)
    if not roots:
        if _marker_root(settings.home) != str(settings.home):
            with contextlib.suppress(OSError):
                write_marker(settings.home)
        return None
    return (
        f"warning: the data folder {settings.home} was at {', '.join(roots)} and its MLflow/Dagster stores and "
        "adapter configs still point there (runs would read and write the old folder): run `bashgym relocate` "
        "to rewrite them to this folder (`bashgym move NEW_PATH` moves a data folder and does this itself)"
    )


# ---- moving --------------------------------------------------------------------------------------------------
def _refuse_if_used(folder: Path, force: bool) -> None:
    from bashgym_assets.processes import describe_pid, open_paths

    users = open_paths([folder])
    if users and not force:
        names = "; ".join(
            f"{describe_pid(pid)} has {paths[0]}" + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
            for pid, paths in sorted(users.items())
        )
        raise RelocationError(
            f"{folder} is in use: {names}. Stop them first (a Dagster UI or daemon, an MLflow UI, "
            "a training), or pass --force"
        )


def _finish(
    folder: Path, old: str, echo: Callable[[str], None], rewritten: list[Reference], binary: list[Reference]
) -> MoveReport:
    left, _ = find_references(folder, old)
    if left:
        raise RelocationError(
            f"{len(left)} references to {old} are left under {folder} after the rewrite: "
            + "; ".join(r.line() for r in left[:10])
        )
    write_marker(folder)
    for ref in rewritten:
        echo(f"  rewrote {ref.line()}")
    for ref in binary:
        echo(f"  left as it is (binary, not read by bashgym): {ref.line()}")
    echo(
        f"{sum(r.count for r in rewritten)} references in {len({r.path for r in rewritten})} files now point at "
        f"{folder}; nothing readable under it names {old}"
    )
    return MoveReport(old=old, new=str(folder), rewritten=rewritten, binary_left=binary)


def move_home(
    src: Path,
    dst: Path,
    *,
    copy: bool = False,
    force: bool = False,
    wait: bool = False,
    echo: Callable[[str], None] = print,
) -> MoveReport:
    """Move (or copy) the data folder ``src`` to ``dst`` and rewrite every reference to ``src`` inside the result.

    Under ``src``'s pipeline lock (a running pipeline refuses it, and it refuses a running pipeline), and only when
    no other process has a file open under ``src`` (``force`` skips that check). ``dst`` must not exist, or be an
    empty folder. A move within one file system is a rename; across file systems a copy, rewritten and verified
    before ``src`` is removed. The copy's or the moved folder's paths are checked afterwards: a reference left in
    a rewritable place fails the move (``src`` is then still there, unless the move was a rename). ``wait``: queue
    behind a pipeline that holds the folder instead of refusing (``bashgym move --wait``)."""
    from bashgym_assets.folder_lock import pipeline_lock

    src = Path(src).expanduser().resolve()
    dst = Path(dst).expanduser().absolute()
    dst = dst.parent.resolve() / dst.name
    if not src.is_dir():
        raise RelocationError(f"no data folder at {src}")
    if dst == src or str(dst).startswith(str(src) + "/") or str(src).startswith(str(dst) + "/"):
        raise RelocationError(f"{dst} and {src} overlap: choose a folder outside the data folder")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise RelocationError(f"{dst} exists and is not an empty folder")
    old = str(src)
    with pipeline_lock(
        Settings(home=src), wait=wait, echo=echo, command=f"bashgym move {dst}{' --copy' if copy else ''}"
    ):
        # again: time may have passed in the queue
        if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
            raise RelocationError(f"{dst} exists and is not an empty folder")
        _refuse_if_used(src, force)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            dst.rmdir()
        renamed = False
        if not copy:
            try:
                os.rename(src, dst)
                renamed = True
                echo(f"moved {src} -> {dst}")
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
        if not renamed:
            echo(f"copying {src} -> {dst} ...")
            shutil.copytree(src, dst, symlinks=True)
        (dst / ".pipeline.lock").write_text("")  # the copy of our holder record names nobody
        rewritten, binary = rewrite_references(dst, old, dst)
        report = _finish(dst, old, echo, rewritten, binary)
        if not copy and not renamed:
            shutil.rmtree(src)
            echo(f"removed {src}")
    echo(f"use it with: export BASHGYM_HOME={dst}")
    return report


def relocate_in_place(
    settings: Settings | None = None,
    old: str | None = None,
    *,
    force: bool = False,
    wait: bool = False,
    echo: Callable[[str], None] = print,
) -> MoveReport | None:
    """Rewrite the references of a data folder that was copied or moved by hand (``old``: where it was; default:
    what its marker and stores say). None when nothing points elsewhere. ``wait``: queue behind a pipeline that
    holds the folder instead of refusing."""
    from bashgym_assets.folder_lock import pipeline_lock

    settings = settings or get_settings()
    home = settings.home
    if not home.is_dir():
        raise RelocationError(f"no data folder at {home}")
    if old is None:
        roots = recorded_roots(settings)
        if not roots:
            echo(f"{home}: its stores point at this folder already; nothing to rewrite")
            return None
        if len(roots) > 1:
            raise RelocationError(
                f"{home} names several old roots ({', '.join(roots)}): pick one with --from"
            )
        old = roots[0]
    old = str(Path(old).expanduser().absolute())
    with pipeline_lock(settings, wait=wait, echo=echo, command=f"bashgym relocate --from {old}"):
        _refuse_if_used(home, force)
        rewritten, binary = rewrite_references(home, old, home)
        return _finish(home, old, echo, rewritten, binary)
