"""Which repository a session worked in, as a safe dynamic-partition key.

A session's repo comes from the folder it started in (``cwd``): where that folder still exists and is inside
a git work tree, the git toplevel (its folder name is the key, its ``origin`` remote is recorded); otherwise
the folder's own name. The key is the folder name in both cases, so sessions of one checkout land in the same
partition whether or not the folder still exists on this machine (two different repos with the same folder
name share a partition; ``repo_path``/``repo_remote`` on each session tell them apart). Keys only use ``[A-Za-z0-9_.=-]`` (never ``/`` nor ``..``, which Dagster and the lake
refuse). Sessions with no usable folder (no cwd, ``/``, a home directory) go to the catch-all partition
``NO_REPO_KEY``.
"""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

#: The documented catch-all partition for sessions that did not work inside any repository.
NO_REPO_KEY = "__no_repo__"
MAX_KEY_CHARS = 80

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")
_HOME_LIKE = re.compile(r"^(/home/[^/]+|/Users/[^/]+|/root|/var/root|[A-Za-z]:[\\/]Users[\\/][^\\/]+)/?$")


class RepoInfo(BaseModel):
    key: str
    path: str | None = None
    remote: str | None = None


def sanitize_key(name: str | None) -> str:
    """A partition key from any name: unsafe runs become ``-``, no ``..``, no leading ``.``/``-``."""
    if not name:
        return NO_REPO_KEY
    key = _UNSAFE.sub("-", name.strip())
    while ".." in key:
        key = key.replace("..", ".")
    key = key.strip(".-")[:MAX_KEY_CHARS].rstrip(".-")
    return key or NO_REPO_KEY


def key_from_remote(remote: str) -> str | None:
    """``git@github.com:acme/widgets.git`` / ``https://host/acme/widgets`` -> ``acme__widgets``."""
    tail = re.sub(r"\.git/?$", "", remote.strip().rstrip("/"))
    parts = [p for p in re.split(r"[/:]", tail) if p]
    if len(parts) >= 2:
        return sanitize_key(f"{parts[-2]}__{parts[-1]}")
    if parts:
        return sanitize_key(parts[-1])
    return None


def _git(cwd: str, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out else None


def _is_dir(path: str) -> bool:
    """``Path.is_dir`` that answers False for names the OS refuses (too long, undecodable) instead of raising."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


@lru_cache(maxsize=4096)
def detect_repo(cwd: str | None) -> RepoInfo:
    """Repository of a working directory (cached per process: a scan sees the same few folders often)."""
    if not isinstance(cwd, str) or not cwd.strip() or "\x00" in cwd:
        return RepoInfo(key=NO_REPO_KEY)
    cwd = cwd.strip()
    if _is_dir(cwd):
        top = _git(cwd, "rev-parse", "--show-toplevel")
        if top:
            remote = _git(top, "remote", "get-url", "origin")
            if remote is None:
                first = _git(top, "remote")
                remote = _git(top, "remote", "get-url", first.splitlines()[0]) if first else None
            return RepoInfo(key=sanitize_key(PurePosixPath(top).name), path=top, remote=remote)
    norm = cwd.replace("\\", "/").rstrip("/") or "/"
    if norm == "/" or _HOME_LIKE.match(norm) or norm in {"~", "."}:
        return RepoInfo(key=NO_REPO_KEY, path=cwd)
    return RepoInfo(key=sanitize_key(PurePosixPath(norm).name), path=cwd)


def resolve_repo(cwd: str | None) -> tuple[str, str | None, str | None]:
    """``RepoResolver`` for adapters: (key, path, remote)."""
    info = detect_repo(cwd if isinstance(cwd, str) else None)
    return info.key, info.path, info.remote
