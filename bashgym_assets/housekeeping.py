"""Nothing stuck, nothing lost: one pipeline per data folder, and the debris of killed writers cleaned up when the
next pipeline starts.

- ``pipeline_lock`` (``folder_lock``, re-exported here): one pipeline per data folder, an exclusive ``flock`` on
  ``$BASHGYM_HOME/.pipeline.lock`` that the kernel frees however its holder dies.
- step processes that die with their parent or launcher: ``process_lifetime`` (below the Dagster layer,
  whose executors arm it in step containers).
- ``sweep_debris``: atomic writes (``lake.atomic_path``, ``Lake.atomic_artifact_dir``, the trainer's adapter
  folder, the base model conversion) leave ``.tmp-*`` files and folders when killed mid-write, and
  ``atomic_artifact_dir`` an ``.old-<name>.<pid>`` folder when killed between its two renames. Old enough ones
  that no live process has open are removed; an ``.old-`` folder whose replacement never arrived is put back.
- ``pipeline_session``: the lock and the sweep at the start of a pipeline, plus the dead-run reapers (Dagster runs and
  MLflow runs of dead processes) and the relocation check (``relocate.relocation_warning``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bashgym_assets.config import Settings, get_settings
from bashgym_assets.folder_lock import (  # noqa: F401 - re-exported: the pipeline runner takes them from here
    LOCK_FILE,
    DataFolderBusy,
    describe_holder,
    lock_path,
    pipeline_lock,
    read_holder,
)
from bashgym_assets.processes import open_paths, start_ticks

DEBRIS_MIN_AGE_S = 600.0  # a write in progress touches its temporary file far more often than this
_OLD_RE = re.compile(r"^\.old-(?P<name>.+)\.(?P<pid>\d+)$")


# ---- debris of killed writers ----------------------------------------------------------------------------------
def _newest_mtime(path: Path) -> float:
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for folder, dirs, files in os.walk(path):
            for name in dirs + files:
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
    return newest


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def sweep_debris(
    settings: Settings | None = None, min_age_s: float = DEBRIS_MIN_AGE_S, now: float | None = None
) -> list[str]:
    """Remove the ``.tmp-*`` files and folders of killed atomic writes anywhere in the data folder, and settle
    ``.old-<name>.<pid>`` folders: removed when ``<name>`` was replaced, renamed back when it never was.

    Left alone: anything modified in the last ``min_age_s`` seconds, anything a live process has open (its
    working directory, an open file or a mapping inside it), an ``.old-`` folder whose writer still runs. Meant
    to run under ``pipeline_lock`` (no other pipeline writes then); returns one line per action."""
    settings = settings or get_settings()
    home = settings.home
    if not home.is_dir():
        return []
    now = time.time() if now is None else now
    candidates: list[tuple[Path, re.Match[str] | None]] = []
    for folder, dirs, files in os.walk(home):
        for name in list(dirs) + files:
            old = _OLD_RE.match(name)
            if name.startswith(".tmp-") or old:
                candidates.append((Path(folder) / name, old))
                if name in dirs:
                    dirs.remove(name)  # its insides go with it
    if not candidates:
        return []
    held = {pid: [p.removesuffix(" (deleted)") for p in paths] for pid, paths in open_paths([home]).items()}
    done: list[str] = []
    for path, old in candidates:
        try:
            age = now - _newest_mtime(path)
        except OSError:
            continue  # gone meanwhile
        rel = path.relative_to(home)
        if age < min_age_s:
            continue
        prefix = os.path.realpath(path)
        users = [
            pid
            for pid, paths in held.items()
            if any(p == prefix or p.startswith(prefix + "/") for p in paths)
        ]
        if users:
            done.append(f"kept {rel}: open in pid {', '.join(map(str, users))}")
            continue
        if old is not None:
            if start_ticks(int(old["pid"])) and age < 24 * 3600:
                continue  # its writer (or a process that took its pid) may still be replacing it
            final = path.with_name(old["name"])
            if not final.exists():
                os.replace(path, final)
                done.append(f"restored {final.relative_to(home)} from {rel} (its replacement never arrived)")
                continue
        try:
            _remove(path)
        except OSError as exc:
            done.append(f"could not remove {rel}: {exc}")
            continue
        done.append(f"removed {rel} (left by a killed write {age / 60:.0f} min ago)")
    return done


# ---- all of it at the start of a pipeline ----------------------------------------------------------------------
@contextlib.contextmanager
def pipeline_session(
    settings: Settings | None = None,
    *,
    wait: bool | float = False,
    command: str | None = None,
    echo: Callable[[str], None] = print,
    debris_min_age_s: float = DEBRIS_MIN_AGE_S,
) -> Iterator[dict[str, str]]:
    """Hold the pipeline lock for the block, and before it runs: warn when the folder was moved without
    ``bashgym move``, clean up the debris of killed writes, fail the Dagster runs of dead processes (freeing their
    pool slots) and end their MLflow runs as KILLED. What was done is printed with a ``[cleanup]`` prefix."""
    import dagster as dg

    from bashgym_assets.defs.run_health import reap_dead_mlflow_runs, reap_dead_runs
    from bashgym_assets.instance import ensure_dagster_home
    from bashgym_assets.relocate import relocation_warning

    settings = settings or get_settings()
    with pipeline_lock(settings, wait=wait, command=command, echo=echo) as holder:
        warning = relocation_warning(settings)
        if warning:
            echo(warning)
        for line in sweep_debris(settings, min_age_s=debris_min_age_s):
            echo(f"[cleanup] {line}")
        ensure_dagster_home(settings)

        def say(line: str) -> None:
            echo(f"[cleanup] {line}")

        with dg.DagsterInstance.get() as instance:
            reap_dead_runs(instance, say)
            try:
                reap_dead_mlflow_runs(settings, instance, say)
            except Exception as exc:  # noqa: BLE001 - a store that cannot be read fails the steps that need it
                say(f"MLflow runs not checked for dead writers: {exc}")
        yield holder
