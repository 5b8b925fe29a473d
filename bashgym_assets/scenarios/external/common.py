"""What every part of the external-suite importer shares: the layouts' names, the sandbox's users, the budgets,
the verdict (``Unimportable``) and the quarantine record, the id rules, what the sandbox image holds, and reading a
task's files within those budgets. Kept apart so the Dockerfile, rewrite and layout modules need no one but it."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bashgym_assets.sandbox.layout import OFFERED_USERS as OFFERED_USERS  # re-exported: the package names it
from bashgym_assets.sandbox.layout import OPERATOR_USER, SESSION_ACCOUNTS
from bashgym_assets.scenarios.bundle import BundleError
from bashgym_assets.scenarios.gate import EXTERNAL_PREFIX

HARBOR = "harbor2"
TB1 = "tb1"
LAYOUTS = (HARBOR, TB1)

DEFAULT_WORKDIR = "/app"
TEST_DIR = "/tests"
SOLUTION_DIR = "/solution"
ENV_PROFILE = "/etc/profile.d/zz-bashgym-external-env.sh"
STAGE_DIR = "/var/lib/bashgym-external-stage"
DEFAULT_CATEGORY = "external"

# The users a sandbox session can be (``ScenarioBundle.user``), with their uid, primary group and home: the sandbox's
# own definition (``sandbox.layout.SESSION_ACCOUNTS``: root, the unprivileged operator and the service account
# app), the same object, never a copy. A Dockerfile's final USER maps onto one of them or the task is refused.
OPERATOR = OPERATOR_USER
SANDBOX_USERS = SESSION_ACCOUNTS
# Where an unprivileged agent's reference solution is written (it cannot create /solution; the check never looks).
USER_SOLUTION_DIR = "/tmp/solution"

MAX_FILE_BYTES = 1 << 20  # one file carried in a bundle (binary files: before base64)
MAX_TASK_BYTES = 4 << 20  # everything a bundle carries (files as carried, tests, solution)
MAX_FILES = 400  # files carried per task
MAX_UNPACKED_BYTES = 64 << 20  # what the archives an ADD unpacks may hold, all together
MAX_INSTRUCTION_BYTES = 256 << 10
MAX_SUITE_DEPTH = 3  # how deep a suite folder is searched for task folders

DIFFICULTY = {
    "trivial": 1,
    "easy": 1,
    "beginner": 1,
    "medium": 2,
    "moderate": 2,
    "normal": 2,
    "intermediate": 2,
    "hard": 3,
    "difficult": 3,
    "advanced": 3,
    "extreme": 4,
    "expert": 4,
    "very-hard": 4,
    "very hard": 4,
    "very_hard": 4,
    "insane": 4,
}

# What debootstrap --variant=minbase installs besides packages.txt, and what those packages pull in.
_IMAGE_ESSENTIALS = frozenset(
    {
        "base-files",
        "base-passwd",
        "bash",
        "bsdutils",
        "coreutils",
        "dash",
        "debconf",
        "debianutils",
        "diffutils",
        "dpkg",
        "findutils",
        "grep",
        "gzip",
        "hostname",
        "init-system-helpers",
        "libc-bin",
        "libc6",
        "login",
        "mawk",
        "ncurses-base",
        "ncurses-bin",
        "perl-base",
        "sed",
        "sysvinit-utils",
        "tar",
        "util-linux",
        "apt",
        "gpgv",
        "debian-archive-keyring",
        "mount",
        "adduser",
        "python3-minimal",
        "python3.11",
        "python3.11-minimal",
        "libpython3.11-stdlib",
        "perl",
        "git-man",
        "readline-common",
        "libsqlite3-0",
    }
)
_SKIP_NAMES = frozenset(
    {"__pycache__", ".git", ".DS_Store", ".pytest_cache", ".ruff_cache", ".venv", "node_modules"}
)
# Files of a TB 1.x task folder (its build context) that are the harness's: ``COPY .`` of the folder leaves them
# out. The tests and the solution are never the container's (the agent would see the answer): naming one in a COPY
# quarantines the task. The bookkeeping files a Dockerfile may name on purpose (``COPY task.yaml .``) are copied,
# as docker would.
TB1_SECRETS = frozenset({"solution.sh", "solution.yaml", "run-tests.sh", "tests"})


class Unimportable(Exception):  # noqa: N818 - a verdict, not a crash
    """Why a task folder cannot become a bundle (becomes a quarantine entry)."""


class ExternalQuarantine(BaseModel):
    """A task folder that did not become a bundle, with why."""

    suite: str
    task: str
    layout: str = ""
    reason: str
    path: str = ""

    @property
    def source(self) -> str:
        return f"external:{self.suite}:{self.layout or 'unknown'}:{self.task}"

    def to_bundle_error(self) -> BundleError:
        return BundleError(source=self.source, reason=self.reason)


# ---- names ----------------------------------------------------------------------------------------------------
def name_slug(text: str, empty: str = "x") -> str:
    """A name as it reads in ids and partition names (``Term Bench!`` -> ``term-bench``)."""
    s = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    s = re.sub(r"-{2,}", "-", s).strip("-._")
    return s or empty


def external_id(suite: str, task: str) -> str:
    """``ext-<suite>-<task>``, sanitised to the bundle id pattern; long ids keep a hash of the full name."""
    raw = f"{EXTERNAL_PREFIX}{name_slug(suite)}-{name_slug(task)}"
    if len(raw) <= 96:
        return raw
    digest = hashlib.sha256(f"{suite}/{task}".encode()).hexdigest()[:8]
    return raw[:87].rstrip("-._") + "-" + digest


def category_slug(value: Any) -> str:
    if not isinstance(value, str):
        return DEFAULT_CATEGORY
    s = re.sub(r"[^a-z0-9_-]+", "-", value.strip().lower()).strip("-")
    s = re.sub(r"^[^a-z]+", "", s)
    return s[:64].rstrip("-_") or DEFAULT_CATEGORY


def difficulty_level(value: Any) -> int:
    if isinstance(value, bool):
        return 2
    if isinstance(value, (int, float)):
        return min(4, max(1, int(value)))
    if isinstance(value, str):
        key = value.strip().lower()
        if key.isdigit():
            return min(4, max(1, int(key)))
        return DIFFICULTY.get(key, 2)
    return 2


# ---- the sandbox image ------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def image_packages() -> frozenset[str]:
    """Debian packages of the sandbox image: the recipe's list plus what minbase and their dependencies bring."""
    from bashgym_assets.images import recipe_packages

    try:
        listed = set(recipe_packages())
    except OSError:
        listed = set()
    return frozenset(listed | _IMAGE_ESSENTIALS)


def image_has(package: str) -> bool:
    return package in image_packages()


# ---- files --------------------------------------------------------------------------------------------------
def read_bytes(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise Unimportable(f"{what} is {size} bytes (the limit is {limit})")
        return path.read_bytes()
    except OSError as exc:
        raise Unimportable(f"{what} is unreadable: {exc.strerror or exc}") from exc


def decode_text(data: bytes, what: str) -> str:
    if b"\0" in data:
        raise Unimportable(f"{what} is a binary file: a bundle carries text only")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unimportable(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return text.removeprefix("\ufeff")


def read_text(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> str:
    return decode_text(read_bytes(path, what, limit), what)


_TEXT_CONTROLS = {9: None, 10: None, 13: None}


def as_text(data: bytes) -> str | None:
    """``data`` as a ``files`` entry (text the seed writes back byte for byte and every bundle form, JSON or YAML,
    carries unchanged), or None when it must travel as base64: not UTF-8, a NUL, a byte-order mark, control
    or other unprintable characters (a utmp log, a tarball, an image)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.translate(_TEXT_CONTROLS).isprintable() else None


def walk_files(root: Path, what: str, links: bool = False) -> list[Path]:
    """Regular files under ``root`` (sorted, caches and VCS folders skipped).

    ``links``: symbolic links (to files or folders, wherever they point) come back as themselves, to be carried as
    links (what docker's COPY does with the links of a folder it copies); else a link is read through, and must
    stay inside ``root``."""
    out: list[Path] = []
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        kept = []
        for name in sorted(d for d in dirnames if d not in _SKIP_NAMES):
            if (Path(dirpath) / name).is_symlink():  # os.walk does not descend into it
                if links:
                    out.append(Path(dirpath) / name)
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if name in _SKIP_NAMES or name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            if path.is_symlink() and not links:
                target = path.resolve()
                if not target.is_relative_to(real_root) or not target.is_file():
                    raise Unimportable(f"{what}: {path.relative_to(root)} is a link out of the folder")
            out.append(path)
        if len(out) > MAX_FILES:
            raise Unimportable(f"{what} holds more than {MAX_FILES} files")
    return out


class Budget:
    """Bytes carried by one bundle, so a huge suite file is quarantined instead of bloating the lake."""

    def __init__(self) -> None:
        self.used = 0

    def take(self, n: int, what: str) -> None:
        self.used += n
        if self.used > MAX_TASK_BYTES:
            raise Unimportable(f"the task carries more than {MAX_TASK_BYTES} bytes (at {what})")


def heredoc_delim(text: str, base: str = "BASHGYM_EOF") -> str:
    lines = set(text.splitlines())
    n = 0
    while (delim := f"{base}_{n}" if n else base) in lines:
        n += 1
    return delim


def write_file_command(path: str, data: bytes, executable: bool = False) -> str:
    """Shell that recreates ``path`` with exactly ``data``: a quoted heredoc for text, base64 otherwise."""
    q = shlex.quote(path)
    try:
        text = data.decode("utf-8")
        is_text = "\0" not in text and "\r" not in text
    except UnicodeDecodeError:
        is_text = False
    if is_text:
        body = text if text.endswith("\n") or not text else text + "\n"
        delim = heredoc_delim(body)
        cmd = f"cat > {q} <<'{delim}'\n{body}{delim}"
        if text and not text.endswith("\n"):
            cmd += f"\ntruncate -s -1 {q}"
    else:
        body = base64.encodebytes(data).decode()
        delim = heredoc_delim(body)
        cmd = f"base64 -d > {q} <<'{delim}'\n{body}{delim}"
    if executable:
        cmd += f"\nchmod 0755 {q}"
    return cmd


def is_executable(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    except OSError:
        return False


def one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
