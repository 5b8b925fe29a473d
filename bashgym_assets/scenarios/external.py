"""Import published shell-task suites (Terminal-Bench 1.x, Terminal-Bench 2 / Harbor) as evaluation-only bundles.

Each task folder becomes one ``ScenarioBundle`` whose id starts with ``gate.EXTERNAL_PREFIX`` (``ext-``): the gate's
``split_for`` holds such ids out forever and the dataset builders refuse them, so an imported benchmark is used to
evaluate and never reaches training. A folder that cannot be reproduced offline in the sandbox image becomes a
quarantine entry with its reason; nothing here raises on bad input.

How a task maps onto a bundle (the rules are the same for both layouts):

- **task**: ``instruction.md`` (Harbor) or ``task.yaml``'s ``instruction`` / ``descriptions[key=base]`` (TB 1.x);
  **difficulty** easy/medium/hard/extreme -> 1..4 (default 2); **category** the metadata's, as a slug, else
  ``external``.
- **user**: who the container runs the agent as, as docker decides it: the single compose service's ``user``,
  else the Dockerfile's last ``USER``, else root. The sandbox offers two users (``SANDBOX_USERS``): root and its
  own unprivileged ``operator`` (uid 1000, home ``/home/operator``), so ``USER operator`` (also ``USER 1000``
  when the Dockerfile made operator that uid, ``operator:operator``) runs the agent as the operator, with its home
  and ``$`` prompt: the prompt (``rollout.transcript.orientation``) names the bundle's user and start folder. Any
  other user or group is quarantined, naming the users the sandbox offers. ``useradd``/``adduser operator`` in
  a ``RUN`` (the user the image already has) asserts it exists instead, keeping ``-G`` groups; one giving it
  another uid or home is quarantined. ``RUN`` lines after a ``USER`` run as that user (``runuser``).
- **workdir** (where the agent starts, the check too): Harbor's ``[environment] workdir`` or compose's
  ``working_dir``, else the last ``WORKDIR``, else ``/app`` for root and the home for another user. A ``WORKDIR``
  under a non-root ``USER`` makes its missing folders owned by that user, at its point of the setup (BuildKit).
- **starting state**: the task's Dockerfile, translated. ``FROM`` must be a plain debian/ubuntu/python base (or
  Terminal-Bench's own python/ubuntu bases, which only add the harness's tmux): the sandbox image (Debian bookworm,
  ``sandbox_images/base/packages.txt``) stands in for it. ``RUN`` becomes a setup command (with the ``ENV``/``ARG``
  values exported and ``cd`` into the ``WORKDIR`` of that point); inside it, installs of tools the image already
  has (``apt-get install -y git``), ``apt-get update``, the harness's tmux/asciinema and test tooling baked into
  the image (a venv with pytest and its dependencies, also from a ``-r`` lock file the task copies in: the check
  brings its own pytest) are replaced by ``true``; anything else that needs the network (apt/pip/uv/npm/...
  installs, curl, wget, remote git) makes the task un-importable. ``COPY``/``ADD`` of build-context files become
  ``files`` when they are printable UTF-8 text (written back byte for byte); any other file (a tarball, a utmp
  log, an image, a byte-order mark, Latin-1) travels as base64 text under ``STAGE_DIR`` in ``files`` and is
  decoded into place by a setup command, so it is byte-identical in the container and the bundle format stays
  text: JSON and YAML round-trip it, and every older bundle still loads. A link inside a copied folder stays a
  link with the same target, wherever it points (a setup ``ln -s``); a COPY source that is itself a link is read
  through, as docker does. ``ADD`` of a local tar archive (plain, gzip, bzip2, xz) unpacks it into the
  destination. Once a setup step whose order matters came first (a surviving ``RUN``, a ``WORKDIR`` made as a
  user, a binary or a link), later files are staged and moved into place at their point of the setup, so the
  Dockerfile's order holds. **Budget**: a file over ``MAX_FILE_BYTES`` is quarantined before it is read, and a
  task carrying over ``MAX_TASK_BYTES`` (base64 as carried, tests and solution included) or ``MAX_FILES`` entries
  is too. ``ENV`` also goes to ``/etc/profile.d`` for the operator's shell and the check.
  Multi-stage builds, ``COPY --from``, compose files with more than one service, MCP servers and GPUs are
  quarantined.
- **no Dockerfile**: a task whose build context holds files (TB 1.x: the task folder without the harness's
  task.yaml/tests/solution/run-tests.sh, docs and dotfiles; Harbor: ``environment/``) but no Dockerfile (nor an
  image: compose's, or Harbor's ``docker_image``) is quarantined, the same in both layouts: its setup script and
  data would never reach the container and the task could not pass. Without such files it runs on the bare
  sandbox image.
- **check**: the task's own verifier, run as root (whoever the agent is) after the operator finished, from the
  agent's start folder: the test files are written by the
  check itself into ``/tests`` (moved aside and restored if the task had one) and removed on exit, so nothing of
  the verifier is in the container while the operator acts. The verifier scripts are rewritten like ``RUN``
  lines: installing curl/uv/pytest is dropped, and every ``pytest`` run (``uvx -w pytest ... pytest``, ``uv run
  pytest``, ``python -m pytest``...) goes to the image's pytest, or, as the image has none, to the bundled
  ``offline_pytest`` stand-in; test code importing a package the image lacks (numpy, requests...) or pytest
  features the stand-in lacks is quarantined. **Pass rule**: Harbor (2.x) passes iff ``/logs/verifier/reward.txt``
  holds 1 (or ``reward.json``'s reward is 1); with no reward file, iff the test script exits 0. TB 1.x passes iff
  every pytest run passed (its harness parses pytest's results, not the script's exit status); with no pytest run,
  iff ``run-tests.sh`` exits 0. ``run_tests_in_same_shell`` is ignored: the check always runs in its own shell.
- **reference**: the solution folder (``solution/`` or ``solution.sh``) written to ``/solution`` in one command
  and run with ``bash`` in the next (``solution.yaml``: its commands, one per turn), rewritten like ``RUN`` lines.
  It runs as the agent (as the harnesses run it); an unprivileged agent cannot make ``/solution``, so its
  solution goes to ``USER_SOLUTION_DIR`` and the solution's own mentions of ``/solution`` follow it.
- Timeouts of the suites (``[agent] timeout_sec``, ``max_agent_timeout_sec``...) are not carried: the
  evaluation's own limits apply.
"""

from __future__ import annotations

import ast
import base64
import fnmatch
import hashlib
import json
import os
import posixpath
import re
import shlex
import stat
import sys
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import BaseModel, ValidationError

from bashgym_assets.scenarios.bundle import BundleError, ScenarioBundle, format_validation_error
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

# The users a sandbox session can be (``ScenarioBundle.user``): root, and the image's own unprivileged operator
# (sandbox_images/base/configure-rootfs.sh: ``useradd -m -u 1000 -g operator operator``; ``sandbox.OPERATOR_UID``,
# ``OPERATOR_GID``), with their primary group and home.
OPERATOR = "operator"


class SandboxUser(NamedTuple):
    uid: str
    group: str
    gid: str
    home: str


SANDBOX_USERS: dict[str, SandboxUser] = {
    "root": SandboxUser("0", "root", "0", "/root"),
    OPERATOR: SandboxUser("1000", "operator", "37", "/home/operator"),
}
OFFERED_USERS = "root and its own unprivileged user operator (uid 1000, home /home/operator)"
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
# Installed only for the harnesses themselves (Terminal-Bench drives the agent through tmux and records it).
_HARNESS_PACKAGES = frozenset({"tmux", "asciinema"})
# Installed by verifier scripts only to fetch uv/pytest: droppable there while nothing kept uses them.
_TEST_BOOTSTRAP_PACKAGES = (
    frozenset(
        {
            "curl",
            "wget",
            "ca-certificates",
            "gnupg",
            "python3-pip",
            "python3-venv",
            "python3-pytest",
            "python-is-python3",
        }
    )
    | _HARNESS_PACKAGES
)
# Python packages a check brings itself (the pytest run) or that only matter to the installer.
_DROPPABLE_PY = re.compile(
    r"^(pytest([-_].*)?|pip|setuptools|wheel|uv|iniconfig|pluggy|packaging|exceptiongroup|"
    r"tomli|colorama|pygments)$"
)
# Python packaging tools: only the installs that use them need them, and those are classified on their own.
_PY_TOOLING_PACKAGES = frozenset(
    {
        "python3-pip",
        "python3-venv",
        "python3-setuptools",
        "python3-wheel",
        "python3-pytest",
        "python-is-python3",
    }
)
_UV_INSTALLER = re.compile(r"https?://(astral\.sh/uv/|[^ ]*/uv/[^ ]*install\.sh|[^ ]*astral-sh/uv/)")
_APT_CACHE = re.compile(r"^(/var/lib/apt/lists|/var/cache/apt|~/.cache|/root/.cache|\$HOME/.cache)")
_NETWORK_TOOLS = frozenset(
    {
        "npm",
        "npx",
        "yarn",
        "pnpm",
        "gem",
        "bundle",
        "conda",
        "mamba",
        "micromamba",
        "poetry",
        "pipenv",
        "pipx",
        "bun",
        "deno",
        "rustup",
        "brew",
        "snap",
        "docker",
        "huggingface-cli",
        "hf",
        "gdown",
        "aws",
        "gsutil",
        "rclone",
        "cpan",
        "cpanm",
        "composer",
        "nvm",
        "sdk",
        "add-apt-repository",
        "apt-add-repository",
        "apt-key",
        "opam",
        "stack",
        "cabal",
        "julia",
        "Rscript",
    }
)
_PY_INTERPRETER = re.compile(r"^python(3(\.\d+)?)?$")
_STDLIB_MISSING = frozenset(
    {"tkinter", "turtle", "turtledemo", "idlelib", "lib2to3", "distutils", "ensurepip"}
)
_WELL_KNOWN_THIRD_PARTY = frozenset(
    {
        "numpy",
        "pandas",
        "scipy",
        "sklearn",
        "torch",
        "requests",
        "yaml",
        "bs4",
        "PIL",
        "cv2",
        "flask",
        "fastapi",
        "matplotlib",
        "httpx",
        "pydantic",
        "psutil",
    }
)
_SKIP_NAMES = frozenset(
    {"__pycache__", ".git", ".DS_Store", ".pytest_cache", ".ruff_cache", ".venv", "node_modules"}
)
_TASK_MARKERS = frozenset(
    {"task.toml", "instruction.md", "task.yaml", "task.yml", "run-tests.sh", "solution.sh", "solution.yaml"}
)
# Files of a TB 1.x task folder (its build context) that are the harness's: ``COPY .`` of the folder leaves them
# out. The tests and the solution are never the container's (the agent would see the answer): naming one in a COPY
# quarantines the task. The bookkeeping files a Dockerfile may name on purpose (``COPY task.yaml .``) are copied,
# as docker would.
_TB1_SECRETS = frozenset({"solution.sh", "solution.yaml", "run-tests.sh", "tests"})
_TB1_META = _TB1_SECRETS | {
    "task.yaml",
    "task.yml",
    "docker-compose.yaml",
    "docker-compose.yml",
    "Dockerfile",
    ".dockerignore",
}
_ENV_DOCS = frozenset({"README.md", "README", "readme.md", ".gitkeep", ".dockerignore"})
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_KNOWN_DIRS = frozenset(
    {
        "/",
        "/app",
        "/tmp",
        "/root",
        "/home",
        "/etc",
        "/opt",
        "/srv",
        "/usr",
        "/usr/bin",
        "/usr/local",
        "/usr/local/bin",
        "/usr/share",
        "/var",
        "/var/log",
        "/bin",
        "/sbin",
        "/mnt",
        "/workspace",
        "/data",
        "/usr/local/lib",
        "/usr/lib",
        "/var/www",
        "/etc/cron.d",
    }
)


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
def _read_bytes(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise Unimportable(f"{what} is {size} bytes (the limit is {limit})")
        return path.read_bytes()
    except OSError as exc:
        raise Unimportable(f"{what} is unreadable: {exc.strerror or exc}") from exc


def _decode(data: bytes, what: str) -> str:
    if b"\0" in data:
        raise Unimportable(f"{what} is a binary file: a bundle carries text only")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unimportable(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return text.removeprefix("\ufeff")


def _read_text(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> str:
    return _decode(_read_bytes(path, what, limit), what)


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


def _walk_files(root: Path, what: str, links: bool = False) -> list[Path]:
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


class _Budget:
    """Bytes carried by one bundle, so a huge suite file is quarantined instead of bloating the lake."""

    def __init__(self) -> None:
        self.used = 0

    def take(self, n: int, what: str) -> None:
        self.used += n
        if self.used > MAX_TASK_BYTES:
            raise Unimportable(f"the task carries more than {MAX_TASK_BYTES} bytes (at {what})")


def _heredoc_delim(text: str, base: str = "BASHGYM_EOF") -> str:
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
        delim = _heredoc_delim(body)
        cmd = f"cat > {q} <<'{delim}'\n{body}{delim}"
        if text and not text.endswith("\n"):
            cmd += f"\ntruncate -s -1 {q}"
    else:
        body = base64.encodebytes(data).decode()
        delim = _heredoc_delim(body)
        cmd = f"base64 -d > {q} <<'{delim}'\n{body}{delim}"
    if executable:
        cmd += f"\nchmod 0755 {q}"
    return cmd


def _is_executable(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    except OSError:
        return False


# ---- a shell lexer: simple commands with their spans ----------------------------------------------------------
@dataclass
class Word:
    text: str  # the word with quotes removed (expansions left as written)
    raw: str  # the word as written
    start: int
    end: int


@dataclass
class SimpleCommand:
    words: list[Word]
    nested: bool = False  # inside $( ) or backticks

    @property
    def start(self) -> int:
        return self.words[0].start

    @property
    def end(self) -> int:
        return self.words[-1].end


_RESERVED = frozenset(
    {
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "do",
        "done",
        "while",
        "until",
        "for",
        "in",
        "case",
        "esac",
        "!",
        "{",
        "}",
        "time",
        "function",
        "select",
        "[[",
        "]]",
        "coproc",
    }
)
_HEREDOC_RE = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([A-Za-z0-9_.+-]+))")


def _matching(src: str, i: int, open_c: str = "(", close_c: str = ")") -> int:
    """Index of the bracket closing the one at ``i`` (quotes skipped); len(src) - 1 when unbalanced."""
    depth, j, n = 0, i, len(src)
    while j < n:
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == "'":
            k = src.find("'", j + 1)
            j = n if k < 0 else k + 1
            continue
        if c == '"':
            j += 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            continue
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return n - 1


def shell_commands(src: str, base: int = 0, nested: bool = False) -> list[SimpleCommand]:
    """The simple commands of a shell script, in order, with nested ``$( )``/backtick commands included.

    Good enough to find and replace installer commands: quotes, escapes, comments, heredoc bodies (skipped),
    line continuations, ``&&``/``||``/``;``/``|``/``&`` and redirections like ``2>&1`` are understood.
    """
    cmds: list[SimpleCommand] = []
    words: list[Word] = []
    cur: list[str] = []
    start: int | None = None
    heredocs: list[tuple[str, bool]] = []
    i, n = 0, len(src)

    def end_word(at: int) -> None:
        nonlocal start, cur
        if start is not None:
            words.append(Word("".join(cur), src[start:at], base + start, base + at))
        start, cur = None, []

    def end_cmd(at: int) -> None:
        nonlocal words
        end_word(at)
        if words:
            cmds.append(SimpleCommand(words, nested))
        words = []

    def begin() -> None:
        nonlocal start
        if start is None:
            start = i

    while i < n:
        c = src[i]
        if c == "\\":
            if i + 1 < n and src[i + 1] == "\n":
                end_word(i)
                i += 2
                continue
            begin()
            cur.append(src[i + 1 : i + 2])
            i += 2
            continue
        if c in " \t\r":
            end_word(i)
            i += 1
            continue
        if c == "\n":
            end_cmd(i)
            i += 1
            for delim, strip_tabs in heredocs:
                while i < n:
                    eol = src.find("\n", i)
                    eol = n if eol < 0 else eol
                    line = src[i:eol]
                    i = eol + 1
                    if (line.lstrip("\t") if strip_tabs else line) == delim:
                        break
            heredocs = []
            continue
        if c == "#" and start is None:
            eol = src.find("\n", i)
            i = n if eol < 0 else eol
            continue
        if c == "'":
            begin()
            k = src.find("'", i + 1)
            k = n if k < 0 else k
            cur.append(src[i + 1 : k])
            i = k + 1
            continue
        if c == '"':
            begin()
            j = i + 1
            while j < n and src[j] != '"':
                if src[j] == "\\" and j + 1 < n:
                    cur.append(src[j + 1] if src[j + 1] in '"\\$`\n' else src[j : j + 2])
                    j += 2
                    continue
                if src.startswith("$(", j) and not src.startswith("$((", j):
                    k = _matching(src, j + 1)
                    cmds.extend(shell_commands(src[j + 2 : k], base + j + 2, True))
                    cur.append(src[j : k + 1])
                    j = k + 1
                    continue
                if src[j] == "`":
                    k = src.find("`", j + 1)
                    k = n - 1 if k < 0 else k
                    cmds.extend(shell_commands(src[j + 1 : k], base + j + 1, True))
                    cur.append(src[j : k + 1])
                    j = k + 1
                    continue
                cur.append(src[j])
                j += 1
            i = j + 1
            continue
        if c == "$" and src.startswith("$((", i):
            begin()
            k = _matching(src, i + 1)
            cur.append(src[i : k + 1])
            i = k + 1
            continue
        if c == "$" and src.startswith("$(", i):
            begin()
            k = _matching(src, i + 1)
            cmds.extend(shell_commands(src[i + 2 : k], base + i + 2, True))
            cur.append(src[i : k + 1])
            i = k + 1
            continue
        if c == "$" and src.startswith("${", i):
            begin()
            k = _matching(src, i + 1, "{", "}")
            cur.append(src[i : k + 1])
            i = k + 1
            continue
        if c == "`":
            begin()
            k = src.find("`", i + 1)
            k = n - 1 if k < 0 else k
            cmds.extend(shell_commands(src[i + 1 : k], base + i + 1, True))
            cur.append(src[i : k + 1])
            i = k + 1
            continue
        if c == "<" and src.startswith("<<", i) and not src.startswith("<<<", i):
            m = _HEREDOC_RE.match(src, i)
            if m:
                end_word(i)
                start = i
                cur = [m.group(0)]
                end_word(m.end())
                heredocs.append((m.group(2) or m.group(3) or m.group(4) or "", m.group(1) == "-"))
                i = m.end()
                continue
        if c in ";&|()":
            prev = "".join(cur)
            if c == "&" and (prev.endswith((">", "<")) or src.startswith("&>", i)):
                begin()
                cur.append(c)
                i += 1
                continue
            if c == "|" and prev.endswith(">"):
                begin()
                cur.append(c)
                i += 1
                continue
            if c == "(" and prev.endswith("="):  # array assignment a=(1 2)
                k = _matching(src, i)
                cur.append(src[i : k + 1])
                i = k + 1
                continue
            end_cmd(i)
            i += 2 if src.startswith(("&&", "||", ";;", "|&"), i) else 1
            continue
        begin()
        cur.append(c)
        i += 1
    end_cmd(n)
    return cmds


# ---- classifying commands: offline, droppable, needs the network ---------------------------------------------
KEEP, DROP, PROBLEM, REPLACE, REFUSE = "keep", "drop", "problem", "replace", "refuse"
IMAGE, TESTS = "image", "tests"


@dataclass
class Action:
    kind: str
    detail: str = ""  # PROBLEM: what needs the network; REPLACE: the new text; REFUSE: why not


@dataclass
class Rewrite:
    text: str
    problems: list[str] = field(default_factory=list)
    pytest_runs: int = 0
    kept: int = 0
    dropped: int = 0
    kept_programs: set[str] = field(default_factory=set)
    python_packages: set[str] = field(default_factory=set)
    resolve: Callable[[str], str | None] | None = None  # a requirements file's text, by the path as written
    accounts: bool = False  # a Dockerfile's RUN: creating a user the sandbox image already has is rewritten
    refusals: list[str] = field(default_factory=list)  # why the script cannot run in the sandbox, not network


_LEADING_RESERVED = frozenset(
    {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "fi", "done", "}", "esac"}
)
_STRUCTURE = frozenset({"for", "case", "select", "function", "in", "[[", "]]", "coproc"})


def _command_start(words: list[str]) -> int:
    """Index of the first word of the command proper (past ``then``, ``do``, ``!``...)."""
    i = 0
    while i < len(words) and words[i] in _LEADING_RESERVED:
        i += 1
    return i


def _program_index(words: list[str]) -> int:
    """Index of the program word: past reserved words, assignments, sudo/env/nohup/exec/command and their
    options; ``len(words)`` when the segment is shell structure (``for x in ...``, ``case``) or empty."""
    i = _command_start(words)
    if i < len(words) and words[i] in _STRUCTURE:
        return len(words)
    while i < len(words):
        w = words[i]
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):
            i += 1
        elif w == "command" and i + 1 < len(words) and words[i + 1] in ("-v", "-V"):
            return i  # a lookup (`command -v uv`), not a run of the program
        elif w in ("sudo", "env", "nohup", "exec", "command", "builtin", "stdbuf"):
            wrapper = w
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 2 if wrapper == "sudo" and words[i] in ("-u", "-g", "-C", "-D", "-h", "-p") else 1
        else:
            return i
    return i


def _positionals(args: list[str], value_opts: Iterable[str] = ()) -> list[str]:
    out, skip = [], False
    value_opts = set(value_opts)
    for a in args:
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            skip = a in value_opts
            continue
        if re.match(r"^(\d*(>>?|<)|&>>?)$", a):  # a redirection operator: its target follows
            skip = True
            continue
        if re.match(r"^(\d*[<>]|&>)", a):
            continue
        out.append(a)
    return out


def _py_name(spec: str) -> str:
    return (
        re.split(r"[<>=!~\[;@ ]", spec.strip().strip("'\""), maxsplit=1)[0].strip().lower().replace("_", "-")
    )


def _apt_name(spec: str) -> str:
    return re.split(r"[=:]", spec, maxsplit=1)[0].strip().lower()


def _requirements(path: str, label: str, rw: Rewrite) -> list[str] | Action:
    """Package specs of a requirements file the task itself carries (hash pins and options ignored)."""
    text = rw.resolve(path) if rw.resolve else None
    if text is None:
        return Action(PROBLEM, f"{label} -r {path} (a requirements file)")
    specs = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            if line.startswith(("-r", "--requirement", "-c", "--constraint", "-e", "--editable")):
                return Action(PROBLEM, f"{label} -r {path} (nested requirement files)")
            continue
        specs.append(line.split()[0])
    return specs


def _pip_install(args: list[str], label: str, ctx: str, rw: Rewrite) -> Action:
    pkgs: list[str] = []
    i = 0
    value_opts = {
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "--target",
        "-t",
        "--prefix",
        "--root",
        "--python",
        "-p",
        "--constraint",
        "-c",
        "--platform",
        "--python-version",
        "--group",
    }
    while i < len(args):
        a = args[i]
        if a in ("-r", "--requirement", "--requirements") or a.startswith(("-r=", "--requirement=")):
            path = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
            found = _requirements(path, label, rw)
            if isinstance(found, Action):
                return found
            pkgs.extend(found)
            i += 1 if "=" in a else 2
            continue
        if a in ("-e", "--editable"):
            return Action(PROBLEM, f"{label} -e")
        if a in value_opts:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        pkgs.append(a)
        i += 1
    names = [_py_name(p) for p in pkgs if p]
    rw.python_packages.update(names)
    missing = [n for n in names if not _DROPPABLE_PY.match(n)]
    if missing:
        return Action(PROBLEM, f"{label} {' '.join(missing)}")
    return Action(DROP)


def _pytest_replacement(raw_args: list[str]) -> Action:
    return Action(REPLACE, " ".join(['"${BASHGYM_PYTEST:-false}"', *raw_args]))


def classify(
    cmd: SimpleCommand, ctx: str, test_files: frozenset[str] = frozenset(), rw: Rewrite | None = None
) -> Action:
    """What to do with one simple command of a ``RUN`` line / verifier / solution script (``ctx``)."""
    rw = rw if rw is not None else Rewrite("")
    texts = [w.text for w in cmd.words]
    raws = [w.raw for w in cmd.words]
    p = _program_index(texts)
    if p >= len(texts):
        return Action(KEEP)
    prog = posixpath.basename(texts[p])
    args, raw_args = texts[p + 1 :], raws[p + 1 :]
    line = " ".join(texts[p:])[:160]

    if prog in _RESERVED:
        return Action(KEEP)
    if ctx == IMAGE and (prog in ("which", "type") or (prog == "command" and args[:1] in (["-v"], ["-V"]))):
        names = [
            a for a in args if not a.startswith("-") and not re.match(r"^\d*[<>]", a) and a != "/dev/null"
        ]
        if names and all(n in _HARNESS_PACKAGES for n in names):
            return Action(DROP)  # asserting the harness's tmux/asciinema, which the sandbox does not need
    if rw.accounts and prog in _ACCOUNT_TOOLS:
        return _classify_account(prog, args)
    if prog in ("apt-get", "apt", "aptitude"):
        pos = _positionals(args, {"-o", "-t", "-c", "--target-release"})
        sub = pos[0] if pos else ""
        if sub in ("update", "upgrade", "dist-upgrade", "full-upgrade", "clean", "autoclean", "autoremove"):
            return Action(DROP)
        if sub in ("install", "reinstall"):
            names = [_apt_name(x) for x in pos[1:]]
            if any(x.endswith(".deb") or "/" in x for x in names):
                return Action(PROBLEM, line)
            allowed = (
                image_packages()
                | _PY_TOOLING_PACKAGES
                | (_HARNESS_PACKAGES if ctx == IMAGE else _TEST_BOOTSTRAP_PACKAGES)
            )
            missing = [x for x in names if x not in allowed]
            return Action(PROBLEM, f"{prog} install {' '.join(missing)}") if missing else Action(DROP)
        return Action(KEEP)
    if (
        prog in ("pip", "pip3")
        or re.fullmatch(r"pip3\.\d+", prog)
        or (_PY_INTERPRETER.match(prog) and args[:2] == ["-m", "pip"])
    ):
        rest = args[2:] if _PY_INTERPRETER.match(prog) else args
        pos = _positionals(rest)
        if pos[:1] == ["install"]:
            return _pip_install(rest[rest.index("install") + 1 :], "pip install", ctx, rw)
        return Action(DROP)  # pip list/freeze/show/--version: diagnostics (the image has no pip)
    if _PY_INTERPRETER.match(prog) and args[:2] == ["-m", "pytest"]:
        if ctx == TESTS:
            rw.pytest_runs += 1
            return _pytest_replacement(raw_args[2:])
        return Action(KEEP)
    if _PY_INTERPRETER.match(prog) and args[:2] in (["-m", "venv"], ["-m", "virtualenv"]):
        return Action(DROP)  # the image has no python3-venv; what is installed into it decides
    if prog in ("pytest", "py.test"):
        if ctx == TESTS:
            rw.pytest_runs += 1
            return _pytest_replacement(raw_args)
        return Action(KEEP)
    if prog == "uv":
        return _classify_uv(args, raw_args, ctx, line, rw)
    if prog == "uvx":
        return _classify_uvx(args, raw_args, ctx, line, rw)
    if prog in ("curl", "wget"):
        url = next((a for a in args if re.match(r"^[a-z]+://", a)), "")
        if ctx == TESTS and url and _UV_INSTALLER.match(url):
            return Action(DROP)
        return Action(PROBLEM, f"{prog} {url}".strip() if url else line)
    if prog == "git":
        pos = _positionals(args, {"-C", "-c", "--depth", "-b", "--branch", "--origin", "-o"})
        if (
            pos
            and pos[0] in ("clone", "fetch", "pull", "push", "ls-remote", "submodule")
            and any(re.match(r"^([a-z+]+://|git@|[\w.-]+@[\w.-]+:)", a) for a in pos[1:])
        ):
            return Action(PROBLEM, line)
        if pos and pos[0] == "submodule" and "update" in pos:
            return Action(PROBLEM, line)
        return Action(KEEP)
    if prog in ("go",) and args[:1] and args[0] in ("get", "install", "mod"):
        return Action(PROBLEM, line)
    if prog == "cargo" and args[:1] and args[0] in ("install", "fetch", "build", "add", "run"):
        return Action(PROBLEM, line)
    if prog in _NETWORK_TOOLS:
        return Action(PROBLEM, line)
    if prog == "virtualenv":
        return Action(DROP)
    if prog in ("source", ".") and args:
        target = args[0]
        name = posixpath.basename(target)
        if ctx == TESTS and (
            target.endswith((".local/bin/env", ".cargo/env"))
            or target.endswith("/bin/activate")
            or (name == "setup-uv-pytest.sh" and name not in test_files)
        ):
            return Action(DROP)
        if target.endswith(".local/bin/env"):
            return Action(DROP)
        return Action(KEEP)
    if prog in ("bash", "sh") and ctx == TESTS and args:
        name = posixpath.basename(args[0])
        if name == "run-uv-pytest.sh" and name not in test_files:
            rw.pytest_runs += 1
            return _pytest_replacement(['"$TEST_DIR/test_outputs.py"', "-rA"])
        if name == "setup-uv-pytest.sh" and name not in test_files:
            return Action(DROP)
    if prog == "rm":
        targets = _positionals(args)
        if targets and all(_APT_CACHE.match(t) for t in targets):
            return Action(DROP)
    return Action(KEEP)


def _classify_uv(args: list[str], raw_args: list[str], ctx: str, line: str, rw: Rewrite) -> Action:
    global_value = {"--directory", "--project", "--cache-dir", "--config-file", "--python", "-p", "--color"}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in global_value else 1
    sub = args[i] if i < len(args) else ""
    rest, raw_rest = args[i + 1 :], raw_args[i + 1 :]
    if sub in ("", "--version", "version", "venv", "init", "cache", "self", "help", "tree", "lock"):
        return (
            Action(DROP)
            if ctx == TESTS or sub in ("", "--version", "version", "help")
            else Action(PROBLEM, f"{line} (uv is not in the image)")
        )
    if sub == "pip":
        pos = _positionals(rest)
        if pos[:1] == ["install"]:
            return _pip_install(rest[rest.index("install") + 1 :], "uv pip install", ctx, rw)
        return Action(DROP)
    if sub == "add":
        return _pip_install([a for a in rest if a not in ("--dev",)], "uv add", ctx, rw)
    if sub == "python":
        return Action(DROP) if ctx == TESTS else Action(PROBLEM, line)
    if sub == "run":
        value_opts = {
            "--with",
            "-w",
            "--python",
            "-p",
            "--with-requirements",
            "--project",
            "--directory",
            "--extra",
            "--group",
            "--env-file",
            "--package",
            "--index",
            "--index-url",
        }
        j = 0
        withs: list[str] = []
        while j < len(rest) and rest[j].startswith("-"):
            if rest[j] in ("--with-requirements",):
                return Action(PROBLEM, f"{line} (a requirements file)")
            if rest[j] in ("--with", "-w") and j + 1 < len(rest):
                withs.extend(x for x in rest[j + 1].split(","))
            j += 2 if rest[j] in value_opts else 1
        if j < len(rest) and rest[j] == "--":
            j += 1
        if withs:
            action = _pip_install(withs, "uv run --with", ctx, rw)
            if action.kind == PROBLEM:
                return action
        program, program_raw = rest[j:], raw_rest[j:]
        if not program:
            return Action(DROP)
        name = posixpath.basename(program[0])
        if name in ("pytest", "py.test") and ctx == TESTS:
            rw.pytest_runs += 1
            return _pytest_replacement(program_raw[1:])
        if _PY_INTERPRETER.match(name):
            if program[1:3] == ["-m", "pytest"] and ctx == TESTS:
                rw.pytest_runs += 1
                return _pytest_replacement(program_raw[3:])
            return Action(REPLACE, " ".join(["python3", *program_raw[1:]]))
        return Action(REPLACE, " ".join(program_raw))
    return Action(PROBLEM, line)  # uv sync / tool / build / publish: the network


def _classify_uvx(args: list[str], raw_args: list[str], ctx: str, line: str, rw: Rewrite) -> Action:
    value_opts = {"--with", "-w", "--python", "-p", "--from", "--with-editable", "--index", "--index-url"}
    j = 0
    withs: list[str] = []
    while j < len(args) and args[j].startswith("-"):
        if args[j] in ("--with-requirements",):
            return Action(PROBLEM, f"{line} (a requirements file)")
        if args[j] in ("--with", "-w") and j + 1 < len(args):
            withs.extend(args[j + 1].split(","))
        if args[j] == "--from" and j + 1 < len(args):
            withs.append(args[j + 1])
        j += 2 if args[j] in value_opts else 1
    program = args[j:]
    if not program:
        return Action(PROBLEM, line)
    name = _py_name(program[0])
    if name in ("pytest", "py.test") and ctx == TESTS:
        action = _pip_install(withs, "uvx --with", ctx, rw)
        if action.kind == PROBLEM:
            return action
        rw.pytest_runs += 1
        return _pytest_replacement(raw_args[j + 1 :])
    return Action(PROBLEM, line)


# ---- users and groups a Dockerfile creates ---------------------------------------------------------------------
_ACCOUNT_TOOLS = frozenset({"useradd", "adduser", "groupadd", "addgroup"})
# Options that take a value, per tool (long forms also as --opt=value).
_ACCOUNT_VALUE_OPTS = {
    "useradd": {
        "-b",
        "--base-dir",
        "-c",
        "--comment",
        "-d",
        "--home-dir",
        "--home",
        "-e",
        "--expiredate",
        "-f",
        "--inactive",
        "-g",
        "--gid",
        "-G",
        "--groups",
        "-k",
        "--skel",
        "-K",
        "--key",
        "-p",
        "--password",
        "-R",
        "--root",
        "-P",
        "--prefix",
        "-s",
        "--shell",
        "-u",
        "--uid",
        "-Z",
        "--selinux-user",
    },
    "adduser": {
        "--home",
        "--shell",
        "--uid",
        "--gid",
        "--ingroup",
        "--gecos",
        "--comment",
        "--firstuid",
        "--lastuid",
        "--firstgid",
        "--lastgid",
        "--conf",
        "--add-extra-groups",
        "-h",
        "-s",
        "-u",
        "-G",
        "-g",
        "-k",
    },
    "groupadd": {"-g", "--gid", "-K", "--key", "-p", "--password", "-R", "--root", "-P", "--prefix"},
    "addgroup": {"--gid", "--conf", "--firstgid", "--lastgid", "-g"},
}
_ACCOUNT_KEYS = {
    "-u": "uid",
    "--uid": "uid",
    "-d": "home",
    "--home-dir": "home",
    "--home": "home",
    "-h": "home",
    "-G": "groups",
    "--groups": "groups",
    "-g": "gid",
    "--gid": "gid",
    "--ingroup": "gid",
    "-s": "shell",
    "--shell": "shell",
}


def account_command(prog: str, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """(positional arguments, ``uid``/``home``/``groups``/``gid``/``shell`` options) of a useradd, adduser,
    groupadd or addgroup command line; ``groupadd -g N`` gives ``gid``."""
    value_opts = _ACCOUNT_VALUE_OPTS.get(prog, set())
    pos: list[str] = []
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and a != "-":
            name, eq, value = a.partition("=")
            if eq and name in value_opts:
                pass
            elif a in value_opts:
                value = args[i + 1] if i + 1 < len(args) else ""
                name = a
                i += 1
            else:
                i += 1
                continue
            key = _ACCOUNT_KEYS.get(name)
            if key:
                opts[key] = value
            i += 1
            continue
        if not re.match(r"^(\d*[<>]|&>)", a):  # a redirection (>/dev/null) is no argument
            pos.append(a)
        elif re.match(r"^(\d*(>>?|<)|&>>?)$", a):
            i += 1  # its target follows
        i += 1
    return pos, opts


def _classify_account(prog: str, args: list[str]) -> Action:
    """A Dockerfile creating the user (or group) the sandbox image already has: creating it again would fail the
    setup (``useradd: user 'operator' already exists``), so the command asserts it exists instead, keeping the
    extra groups it names. A uid or home other than the sandbox's operator's refuses the task: the agent would
    not be who the task says."""
    pos, opts = account_command(prog, args)
    if prog in ("groupadd", "addgroup"):
        return Action(DROP) if pos == [OPERATOR] else Action(KEEP)
    if pos != [OPERATOR]:
        return Action(KEEP)  # another user (created for real), or `adduser operator <group>` (a membership)
    uid, home = SANDBOX_USERS[OPERATOR].uid, SANDBOX_USERS[OPERATOR].home
    if opts.get("uid") and opts["uid"] != uid:
        return Action(
            REFUSE,
            f"the Dockerfile creates the user {OPERATOR} with uid {opts['uid']}: the sandbox's "
            f"{OPERATOR} is uid {uid}",
        )
    if opts.get("home") and posixpath.normpath(opts["home"]) != home:
        return Action(
            REFUSE,
            f"the Dockerfile creates the user {OPERATOR} with the home {opts['home']}: the "
            f"sandbox's {OPERATOR} lives in {home}",
        )
    groups = opts.get("groups", "") if prog == "useradd" else ""
    if groups:
        return Action(REPLACE, f"usermod -aG {shlex.quote(groups)} {OPERATOR}")
    return Action(REPLACE, f"id -u {OPERATOR} >/dev/null")


def rewrite_script(
    src: str,
    ctx: str,
    test_files: Iterable[str] = (),
    resolve: Callable[[str], str | None] | None = None,
    accounts: bool = False,
) -> Rewrite:
    """Replace droppable commands by ``true`` and pytest runs by the check's pytest; collect network needs.

    ``resolve`` gives the text of a requirements file named by a ``pip install -r`` (None: not known).
    ``accounts`` (a Dockerfile's RUN): ``useradd operator`` and the like are rewritten for the image that has
    that user already (``_classify_account``)."""
    rw = Rewrite(src, resolve=resolve, accounts=accounts)
    files = frozenset(test_files)
    replacements: list[tuple[int, int, str]] = []
    for cmd in shell_commands(src):
        action = classify(cmd, ctx, files, rw)
        texts = [w.text for w in cmd.words]
        p = _program_index(texts)
        span = (cmd.words[_command_start(texts)].start, cmd.end) if p < len(texts) else (cmd.start, cmd.end)
        if action.kind == PROBLEM:
            rw.problems.append(action.detail)
        elif action.kind == REFUSE:
            rw.refusals.append(action.detail)
        elif action.kind == DROP:
            rw.dropped += 1
            replacements.append((*span, "true"))
        elif action.kind == REPLACE:
            rw.kept += 1
            replacements.append((*span, action.detail))
        elif p < len(texts):
            rw.kept += 1
            rw.kept_programs.add(posixpath.basename(texts[p]))
    chosen: list[tuple[int, int, str]] = []
    for start, end, new in sorted(replacements, key=lambda r: (r[0], -r[1])):
        if chosen and start < chosen[-1][1]:  # inside a span already replaced
            continue
        chosen.append((start, end, new))
    text = src
    for start, end, new in reversed(chosen):
        text = text[:start] + new + text[end:]
    rw.text = text
    if ctx == TESTS:  # curl/wget were only droppable for fetching uv
        needed = sorted(p for p in rw.kept_programs if p in ("curl", "wget") and not image_has(p))
        rw.problems.extend(f"{p} (not in the sandbox image)" for p in needed)
    return rw


# ---- Dockerfile ---------------------------------------------------------------------------------------------
@dataclass
class Instruction:
    keyword: str
    args: str
    flags: dict[str, str]
    heredocs: list[tuple[str, str]]  # (delimiter, body)
    raw: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuations joined, comments dropped, BuildKit heredocs collected."""
    escape = "\\"
    lines = text.splitlines()
    for line in lines[:5]:
        m = re.match(r"^#\s*escape\s*=\s*(\S)\s*$", line)
        if m:
            escape = m.group(1)
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        parts = [line]
        while parts[-1].endswith(escape) and i < len(lines):
            parts[-1] = parts[-1][:-1]
            nxt = lines[i]
            i += 1
            if nxt.strip().startswith("#"):
                parts.append(escape)  # a comment inside a continuation: skipped, continuation kept
                continue
            parts.append(nxt)
        joined = " ".join(p.strip() for p in parts if p != escape)
        m = re.match(r"^([A-Za-z]+)\s*(.*)$", joined, re.S)
        if not m:
            raise Unimportable(f"Dockerfile line {i} is not an instruction: {line[:80]}")
        keyword, rest = m.group(1).upper(), m.group(2)
        flags: dict[str, str] = {}
        while True:
            fm = re.match(r"^--([a-z-]+)(?:=(\S*))?\s*", rest)
            if not fm:
                break
            flags[fm.group(1)] = fm.group(2) or ""
            rest = rest[fm.end() :]
        heredocs: list[tuple[str, str]] = []
        if keyword in ("RUN", "COPY", "ADD"):
            for hm in re.finditer(r"<<(-?)[\"']?([A-Za-z0-9_]+)[\"']?", rest):
                delim, strip_tabs = hm.group(2), hm.group(1) == "-"
                body: list[str] = []
                while i < len(lines):
                    bl = lines[i]
                    i += 1
                    if (bl.lstrip("\t") if strip_tabs else bl) == delim:
                        break
                    body.append(bl.lstrip("\t") if strip_tabs else bl)
                else:
                    raise Unimportable(f"Dockerfile heredoc <<{delim} is never closed")
                heredocs.append((delim, "\n".join(body) + "\n"))
        out.append(Instruction(keyword, rest.strip(), flags, heredocs, joined))
    return out


_VAR_RE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def _substitute(text: str, env: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        value = env.get(name, "")
        if m.group(2) == "-":
            return value or m.group(3)
        if m.group(2) == "+":
            return m.group(3) if value else ""
        return value

    return _VAR_RE.sub(one, text)


def _split_args(text: str) -> list[str]:
    text = text.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise Unimportable(f"Dockerfile arguments do not parse: {text[:80]} ({exc})") from exc


def base_image_problem(image: str) -> tuple[str | None, bool]:
    """(why the image cannot be stood in for by the sandbox image or None, whether it is a python image)."""
    ref = image.strip().split("@", 1)[0]
    if not ref or ref == "scratch":
        return f"needs image {image or '<none>'}: not a plain debian/ubuntu/python base", False
    parts = ref.split("/")
    registry = (
        parts[0] if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost") else ""
    )
    path = parts[1:] if registry else parts
    name, _, tag = path[-1].partition(":")
    # Docker Hub's official images, also through a mirror (public.ecr.aws/docker/library/debian, mirror.gcr.io)
    official = (
        len(path) == 1
        and (
            not registry
            or registry in ("docker.io", "index.docker.io", "registry-1.docker.io", "mirror.gcr.io")
        )
    ) or (len(path) > 1 and path[-2] == "library")
    tag = tag.lower()
    if official and name in ("debian", "ubuntu", "python") and "alpine" not in tag and "windows" not in tag:
        return None, name == "python"
    # Terminal-Bench's own bases: a python or ubuntu image plus tmux/asciinema for its harness.
    if "/".join(path[:-1]).endswith(("t-bench", "terminal-bench")) and re.match(
        r"^(python-3-\d+|ubuntu-\d+-\d+|debian(-\w+)?)$", name
    ):
        return None, name.startswith("python")
    return (
        f"needs image {image} (not a plain debian/ubuntu/python base): its contents are not in the sandbox image",
        False,
    )


@dataclass
class Environment:
    setup: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    workdir: str = DEFAULT_WORKDIR
    env: dict[str, str] = field(default_factory=dict)
    workdir_set: bool = False
    python_base: bool = False
    copied: dict[str, str] = field(default_factory=dict)  # every COPY target, for `pip install -r <target>`
    user: str = "root"  # the sandbox user the agent runs as (the final USER, mapped: SANDBOX_USERS)
    owner: str = ""  # the final USER as chown takes it (`operator:`), for folders made for the agent
    ordered: int = 0  # setup steps so far whose order matters (a RUN, a folder WORKDIR makes as a user,
    # a binary file, a link): a COPY after one is staged and put in place at its turn
    carried: int = 0  # entries COPY/ADD carried (files and links)
    accounts: _Accounts = field(default_factory=lambda: _Accounts())  # users/groups its RUN lines create

    @property
    def start_dir(self) -> str:
        """Where the agent starts: the WORKDIR (or Harbor's workdir); without one an unprivileged user starts in
        its home, root in ``/app`` (the harnesses' default: their test scripts refuse to run in ``/``)."""
        if self.workdir_set or self.user == "root":
            return self.workdir
        return SANDBOX_USERS[self.user].home


@dataclass
class _Accounts:
    """Users and groups the Dockerfile's RUN lines create, by name, with the uid/gid they give (or "")."""

    users: dict[str, str] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)

    def read(self, script: str) -> None:
        for cmd in shell_commands(script):
            texts = [w.text for w in cmd.words]
            p = _program_index(texts)
            prog = posixpath.basename(texts[p]) if p < len(texts) else ""
            if prog not in _ACCOUNT_TOOLS:
                continue
            pos, opts = account_command(prog, texts[p + 1 :])
            if len(pos) != 1:
                continue
            if prog in ("useradd", "adduser"):
                self.users[pos[0]] = opts.get("uid", "")
            else:
                self.groups[pos[0]] = opts.get("gid", "")


def _owner(user_spec: str) -> str:
    """A USER value as ``chown`` takes it: ``name`` alone is ``name:`` (its login group, as docker does)."""
    return user_spec if ":" in user_spec or user_spec.isdigit() else f"{user_spec}:"


def sandbox_user(
    user_spec: str, accounts: _Accounts | None = None, said: str = "the Dockerfile's USER"
) -> str:
    """The sandbox user (``root`` or ``operator``) for a final Dockerfile ``USER`` (``name``, ``uid``,
    ``name:group``...); Unimportable, naming the users the sandbox offers, when it offers none that is it."""
    accounts = accounts or _Accounts()
    name, _, group = (part.strip() for part in user_spec.partition(":"))
    user = name
    if name.isdigit():
        # a uid is the user the Dockerfile created with it (uid 1000: also the operator it created without one)
        named = [n for n, uid in accounts.users.items() if uid == name] or (
            [OPERATOR] if name == SANDBOX_USERS[OPERATOR].uid and accounts.users.get(OPERATOR) == "" else []
        )
        user = "root" if name == "0" else named[0] if len(named) == 1 else ""
        if user not in SANDBOX_USERS:
            who = f"the user {user!r}" if user else "a user the Dockerfile does not name"
            raise Unimportable(
                f"the agent runs as uid {name} ({who}; {said} {user_spec}): the sandbox offers "
                f"only {OFFERED_USERS}"
            )
    elif name not in SANDBOX_USERS:
        raise Unimportable(
            f"the agent runs as user {name!r} ({said} {user_spec}): the sandbox offers only {OFFERED_USERS}"
        )
    known = SANDBOX_USERS[user]
    # its group, also by a gid the Dockerfile gave that group (`groupadd -g 1000 operator`, `useradd -u 1000 -U`)
    groups = {known.group, known.gid} | {
        gid for g, gid in accounts.groups.items() if g == known.group and gid
    }
    if user == OPERATOR and accounts.users.get(OPERATOR) == known.uid:
        groups.add(known.uid)
    if group and group not in groups:
        raise Unimportable(
            f"the agent runs as {name} in the group {group!r} ({said} {user_spec}): the sandbox's "
            f"{user} has the group {known.group} (gid {known.gid}), and the sandbox offers only "
            f"{OFFERED_USERS}"
        )
    return user


def mkdir_owned(path: str, owner: str) -> str:
    """Shell that creates the missing folders of ``path`` owned by ``owner`` (what BuildKit's WORKDIR does under a
    USER); folders that exist keep their owner."""
    steps, current = [], ""
    for part in (p for p in path.split("/") if p):
        current += "/" + part
        q = shlex.quote(current)
        steps.append(f"{{ [ -d {q} ] || {{ mkdir {q} && chown {shlex.quote(owner)} {q}; }}; }}")
    return " && ".join(steps) or "true"


def _dockerignore(context: Path) -> list[tuple[bool, str]]:
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    try:
        text = _read_text(path, ".dockerignore", 64 << 10)
    except Unimportable:
        return []
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        rules.append((negate, line.lstrip("!").strip("/").removeprefix("./")))
    return rules


def _ignored(rel: str, rules: list[tuple[bool, str]], exclude_top: frozenset[str]) -> bool:
    if rel.split("/", 1)[0] in exclude_top:
        return True
    ignored = False
    for negate, pattern in rules:
        parts = rel.split("/")
        hit = any(fnmatch.fnmatch("/".join(parts[:k]), pattern) for k in range(1, len(parts) + 1))
        if hit:
            ignored = not negate
    return ignored


def translate_dockerfile(
    text: str, context: Path, budget: _Budget, exclude_top: frozenset[str] = frozenset()
) -> Environment:
    """The Dockerfile as sandbox setup (see the module docstring); raises Unimportable with the reason."""
    instructions = parse_dockerfile(text)
    froms = [ins for ins in instructions if ins.keyword == "FROM"]
    if not froms:
        raise Unimportable("the Dockerfile has no FROM")
    if len(froms) > 1:
        raise Unimportable(f"multi-stage Dockerfile ({len(froms)} FROM lines)")
    envx = Environment()
    # what ${...} in an instruction sees: ENV and ARG values only (no HOME: docker sets it per RUN, from the USER)
    variables: dict[str, str] = {"PATH": _DEFAULT_PATH}
    exported: dict[str, str] = {}  # ENV and ARG values the RUN lines see
    user = "root"
    accounts = envx.accounts
    known_dirs = set(_KNOWN_DIRS)
    rules = _dockerignore(context)
    real_context = context.resolve()
    stage_n = 0

    for ins in instructions:
        kw = ins.keyword
        if kw == "FROM":
            words = _split_args(_substitute(ins.args, variables))
            problem, envx.python_base = base_image_problem(words[0] if words else "")
            if problem:
                raise Unimportable(problem)
        elif kw == "ARG":
            for word in _split_args(ins.args):
                name, _, default = word.partition("=")
                if name not in variables or default:
                    variables[name] = _substitute(default, variables)
                    exported[name] = variables[name]
        elif kw == "ENV":
            words = _split_args(ins.args)
            pairs: list[tuple[str, str]] = []
            if words and "=" not in words[0]:
                pairs.append((words[0], " ".join(words[1:])))
            else:
                for word in words:
                    name, _, value = word.partition("=")
                    pairs.append((name, value))
            for name, value in pairs:
                if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
                    raise Unimportable(f"ENV name {name!r} is not a shell variable")
                value = _substitute(value, variables)
                variables[name] = exported[name] = envx.env[name] = value
        elif kw == "WORKDIR":
            path = _substitute(_split_args(ins.args)[0] if ins.args else "/", variables)
            envx.workdir = posixpath.normpath(posixpath.join(envx.workdir if envx.workdir_set else "/", path))
            envx.workdir_set = True
            known_dirs.add(envx.workdir)
            if not _is_root(user) and envx.workdir != "/":
                # BuildKit makes the missing folders as the current USER: the agent can write to its own workdir
                envx.setup.append(mkdir_owned(envx.workdir, _owner(user)))
                envx.ordered += 1
        elif kw == "USER":
            user = _substitute(ins.args.strip(), variables)
            if not user:
                raise Unimportable("USER names nobody")
        elif kw == "RUN":
            command = _run_command(ins)
            odd_flags = sorted(set(ins.flags) - {"network", "mount"})
            if odd_flags:
                raise Unimportable(f"RUN --{odd_flags[0]} is not supported")
            mount = ins.flags.get("mount", "")
            if mount and "type=cache" not in mount and "type=tmpfs" not in mount:
                raise Unimportable(f"RUN --mount={mount} is not supported")
            cwd = envx.workdir if envx.workdir_set else "/"
            accounts.read(command)
            rw = rewrite_script(
                command,
                IMAGE,
                resolve=lambda p, cwd=cwd: envx.copied.get(
                    posixpath.normpath(posixpath.join(cwd, _substitute(p, variables)))
                ),
                accounts=True,
            )
            if rw.refusals:
                raise Unimportable("; ".join(dict.fromkeys(rw.refusals)))
            if rw.problems:
                raise Unimportable("needs the network: RUN " + "; ".join(dict.fromkeys(rw.problems)))
            if rw.kept == 0:
                continue  # nothing but dropped installs and apt housekeeping
            prefix = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in exported.items())
            wd = shlex.quote(envx.workdir if envx.workdir_set else "/")
            script = f"{prefix}mkdir -p {wd} && cd {wd} || exit 1\n{rw.text}"
            if not _is_root(user):
                name, _, group = user.partition(":")
                if name.isdigit():  # runuser takes names: the one the Dockerfile gave that uid, if any
                    name = next((n for n, uid in accounts.users.items() if uid == name), name)
                as_group = f"-g {shlex.quote(group)} " if group else ""
                script = f"runuser -u {shlex.quote(name)} {as_group}-- bash -c {shlex.quote(script)}"
            envx.setup.append(script)
            envx.ordered += 1
        elif kw in ("COPY", "ADD"):
            if "from" in ins.flags:
                raise Unimportable(f"{kw} --from (a multi-stage build)")
            stage_n = _copy(
                ins,
                kw,
                context,
                real_context,
                rules,
                exclude_top,
                envx,
                variables,
                known_dirs,
                budget,
                stage_n,
            )
        elif kw in (
            "CMD",
            "ENTRYPOINT",
            "EXPOSE",
            "LABEL",
            "MAINTAINER",
            "STOPSIGNAL",
            "HEALTHCHECK",
            "VOLUME",
            "SHELL",
            "ONBUILD",
        ):
            continue  # the sandbox runs its own shell; services are not started
        else:
            raise Unimportable(f"unknown Dockerfile instruction {kw}")
    envx.user = sandbox_user(user, accounts)
    envx.owner = _owner(user) if envx.user != "root" else ""
    if envx.python_base:
        envx.setup.insert(0, "command -v python >/dev/null || ln -s /usr/bin/python3 /usr/local/bin/python")
    if stage_n:
        envx.setup.append(f"rm -rf {STAGE_DIR}")
    return envx


def _run_command(ins: Instruction) -> str:
    args = ins.args
    if args.startswith("["):
        words = _split_args(args)
        return shlex.join(words)
    m = re.match(r"^<<(-?)[\"']?([A-Za-z0-9_]+)[\"']?\s*$", args)
    if m and len(ins.heredocs) == 1:  # RUN <<EOF ... EOF: the body is the script
        body = ins.heredocs[0][1]
        if body.startswith("#!") and not re.match(r"^#!\s*/(usr/)?bin/(env\s+)?(ba)?sh\b", body):
            delim = _heredoc_delim(body)
            return (
                f"f=$(mktemp)\ncat > \"$f\" <<'{delim}'\n{body}{delim}\n"
                'chmod +x "$f"; "$f"; rc=$?; rm -f "$f"; exit $rc'
            )
        return body
    if ins.heredocs:  # heredocs inside the command: the command line, then each body and its delimiter
        return args + "\n" + "".join(f"{body}{delim}\n" for delim, body in ins.heredocs)
    return args


def tar_archive(data: bytes) -> tuple[int, list[str]] | None:
    """(the bytes it holds, its top-level names) for a tar archive (plain, gzip, bzip2 or xz: what docker's ADD
    unpacks), read only up to ``MAX_UNPACKED_BYTES`` past which it stops; None when ``data`` is no such archive
    (ADD copies it as it is)."""
    import io
    import tarfile

    total, tops = 0, set()
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|*") as tar:
            for member in tar:
                total += max(0, member.size)
                top = posixpath.normpath(member.name.lstrip("/")).split("/")[0]
                if top not in (".", ".."):
                    tops.add(top)
                if total > MAX_UNPACKED_BYTES:
                    break
    except (tarfile.TarError, EOFError, OSError, ValueError):
        return None
    return total, sorted(tops)


@dataclass
class _Entry:
    """One thing a COPY/ADD puts into the image: a file (``data``), a link (``link``: its target, as written) or
    an archive ADD unpacks into ``target``."""

    target: str
    data: bytes = b""
    link: str | None = None
    executable: bool = False
    alt: str | None = None  # a file whose destination may be a folder: ``alt`` when it is one
    archive: list[str] | None = None  # an archive ADD unpacks into ``target``: its top-level names


def _copy(
    ins: Instruction,
    kw: str,
    context: Path,
    real_context: Path,
    rules: list[tuple[bool, str]],
    exclude_top: frozenset[str],
    envx: Environment,
    variables: dict[str, str],
    known_dirs: set[str],
    budget: _Budget,
    stage_n: int,
) -> int:
    """One COPY/ADD into ``envx`` (files, plus setup for staging, binaries, links, modes, owners); returns the
    stage counter."""
    if ins.heredocs:
        words = _split_args(re.sub(r"<<-?[\"']?[A-Za-z0-9_]+[\"']?", "", ins.args))
        if len(words) != 1 or len(ins.heredocs) != 1:
            raise Unimportable(f"{kw} with heredocs to {len(words)} destinations is not supported")
        dest = _dest_path(_substitute(words[0], variables), envx)
        entries = [_Entry(dest, ins.heredocs[0][1].encode())]
        dirs: list[str] = []
    else:
        words = [_substitute(w, variables) for w in _split_args(ins.args)]
        if len(words) < 2:
            raise Unimportable(f"{kw} needs a source and a destination: {ins.args[:80]}")
        srcs, dest_raw = words[:-1], words[-1]
        dest = _dest_path(dest_raw, envx)
        dest_is_dir = dest_raw.endswith("/") or len(srcs) > 1 or dest in known_dirs or dest_raw in (".", "./")
        entries, dirs = [], []
        for src in srcs:
            if re.match(r"^[a-z]+://", src) or src.startswith("git@"):
                raise Unimportable(f"needs the network: {kw} {src}")
            if posixpath.normpath(src.lstrip("/")).split("/")[0] == "..":
                raise Unimportable(f"{kw} source {src!r} is outside the build context")
            is_glob = any(c in src for c in "*?[")
            matches = sorted(context.glob(src.lstrip("/"))) if is_glob else [context / src.lstrip("/")]
            matches = [m for m in matches if m.exists() or m.is_symlink()]
            if not matches:
                raise Unimportable(f"{kw} source {src!r} is not in the build context")
            for m in matches:
                try:
                    real = m.resolve()
                except OSError as exc:
                    raise Unimportable(f"{kw} source {src!r} is unreadable: {exc}") from exc
                if not real.is_relative_to(real_context):  # the source itself is followed, as docker does
                    raise Unimportable(f"{kw} source {src!r} is outside the build context")
                rel_top = m.relative_to(context).as_posix() if m != context else "."
                if m.is_dir():
                    target_root = dest
                    dirs.append(target_root)
                    for f in _walk_files(m, f"{kw} {src}", links=True):
                        rel = f.relative_to(context).as_posix()
                        if _ignored(rel, rules, exclude_top):
                            continue
                        target = posixpath.join(target_root, f.relative_to(m).as_posix())
                        if (
                            f.is_symlink()
                        ):  # a link inside a copied folder stays a link, whatever it points at
                            entries.append(_Entry(target, link=os.readlink(f)))
                        else:
                            entries.append(
                                _Entry(
                                    target, _read_bytes(f, f"{kw} source {rel}"), executable=_is_executable(f)
                                )
                            )
                else:
                    if _ignored(rel_top, rules, exclude_top & _TB1_SECRETS):
                        if is_glob:  # a pattern matches what the context holds: docker skips it too
                            continue
                        raise Unimportable(
                            f"{kw} source {src!r} is excluded from the build context "
                            "(.dockerignore, or the harness's tests/solution)"
                        )
                    data = _read_bytes(m, f"{kw} source {rel_top}")
                    if kw == "ADD" and (archive := tar_archive(data)) is not None:
                        if archive[0] > MAX_UNPACKED_BYTES:
                            raise Unimportable(f"ADD {src} unpacks more than {MAX_UNPACKED_BYTES} bytes")
                        entries.append(_Entry(dest, data, archive=archive[1]))  # docker unpacks it into dest
                        continue
                    target = posixpath.join(dest, m.name) if dest_is_dir else dest
                    # without a trailing slash the destination is a file, unless it already is a folder
                    alt = None if dest_is_dir else posixpath.join(dest, m.name)
                    entries.append(_Entry(target, data, executable=_is_executable(m), alt=alt))
    commands: list[str] = []
    made: set[str] = set()
    for d in dirs:
        commands.append(f"mkdir -p {shlex.quote(d)}")
        made.add(d)
        known_dirs.add(d)
    stage = envx.ordered > 0  # a setup step came first: put this in place at its turn
    mode = ins.flags.get("chmod")

    def parent_of(path: str) -> None:
        parent = posixpath.dirname(path)
        if parent not in made:
            commands.append(f"mkdir -p {shlex.quote(parent)}")
            made.add(parent)

    def put(entry: _Entry, how: Callable[[str], str]) -> None:
        """``how(dest)`` writes one destination; with ``alt`` the destination is decided in the container."""
        t = shlex.quote(entry.target)
        if entry.alt is None:
            commands.append(how(t))
        else:
            a = shlex.quote(entry.alt)
            commands.append(f"{{ if [ -d {t} ]; then {how(a)}; else {how(t)}; fi; }}")

    ordered = False
    for entry in entries:
        what = f"{kw} source for {entry.target}"
        envx.carried += 1
        if envx.carried > MAX_FILES:
            raise Unimportable(f"the environment copies more than {MAX_FILES} files")
        if entry.link is not None:
            budget.take(len(entry.link.encode()), what)
            parent_of(entry.target)
            commands.append(f"ln -sfn -- {shlex.quote(entry.link)} {shlex.quote(entry.target)}")
            ordered = True
            continue
        content = None if entry.archive is not None else as_text(entry.data)
        if content is None:  # binary (or an archive): base64 in the bundle, decoded in place at its turn
            encoded = base64.encodebytes(entry.data).decode()
            budget.take(len(encoded), what)
            stage_n += 1
            staged = f"{STAGE_DIR}/{stage_n}"
            envx.files[staged] = encoded
            ordered = True
            if entry.archive is not None:
                t = shlex.quote(entry.target)
                commands.append(
                    f"mkdir -p {t} && base64 -d {staged} > {staged}.tar && tar -x --no-same-owner "
                    f"-f {staged}.tar -C {t}"
                )
                continue
            parent_of(entry.target)
            m = mode or ("0755" if entry.executable else "0644")
            put(entry, lambda dst, m=m, s=staged: f"base64 -d {s} > {dst} && chmod {m} {dst}")
            continue
        budget.take(len(entry.data), what)
        envx.copied[entry.target] = content
        seed_mode_exec = content.startswith("#!")
        m = mode or ("0755" if entry.executable else "0644")
        if stage:
            stage_n += 1
            staged = f"{STAGE_DIR}/{stage_n}"
            envx.files[staged] = content
            parent_of(entry.target)
            put(entry, lambda dst, m=m, s=staged: f"mv -f {s} {dst} && chmod {m} {dst}")
        else:
            envx.files[entry.target] = content
            if mode or entry.executable != seed_mode_exec:
                commands.append(f"chmod {m} {shlex.quote(entry.target)}")
    if "chown" in ins.flags:
        owner = _substitute(ins.flags["chown"], variables)
        targets = dirs + [
            t
            for e in entries
            for t in (
                [posixpath.join(e.target, top) for top in e.archive] if e.archive is not None else [e.target]
            )
        ]
        commands.append(f"chown -R {shlex.quote(owner)} " + " ".join(shlex.quote(t) for t in targets))
    envx.setup.extend(chain(commands))
    if ordered:
        envx.ordered += 1
    return stage_n


def chain(commands: list[str], limit: int = 64 << 10) -> list[str]:
    """``commands`` joined with ``&&`` into as few setup commands as keep each under ``limit`` bytes: a setup
    command is one argument of an exec, and Linux refuses one over 128 KiB (a COPY of hundreds of links). The
    setup stops at the first failing command, so the split changes nothing else."""
    out: list[str] = []
    current: list[str] = []
    size = 0
    for command in commands:
        if current and size + len(command.encode()) > limit:
            out.append(" && ".join(current))
            current, size = [], 0
        current.append(command)
        size += len(command.encode()) + 4
    if current:
        out.append(" && ".join(current))
    return out


def _is_root(user_spec: str) -> bool:
    return user_spec.partition(":")[0].strip() in ("root", "0")


def _dest_path(dest: str, envx: Environment) -> str:
    base = envx.workdir if envx.workdir_set else "/"
    joined = posixpath.normpath(posixpath.join(base, dest))
    return joined


# ---- compose ------------------------------------------------------------------------------------------------
def compose_service(path: Path) -> dict[str, Any]:
    """The single service of a compose file; Unimportable for several services (or none)."""
    try:
        data = yaml.safe_load(_read_text(path, path.name, 256 << 10))
    except yaml.YAMLError as exc:
        raise Unimportable(f"{path.name} is not valid YAML: {_one_line(exc)}") from exc
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict) or not services:
        raise Unimportable(f"{path.name} has no services")
    if len(services) > 1:
        raise Unimportable(
            f"docker-compose with {len(services)} services ({', '.join(sorted(map(str, services)))}):"
            " the sandbox runs one container"
        )
    service = next(iter(services.values())) or {}
    if not isinstance(service, dict):
        raise Unimportable(f"{path.name}: the service is not a mapping")
    return service


def compose_dockerfile(path: Path) -> tuple[Path | None, Path | None, str | None]:
    """(build context, Dockerfile) of the single service, or its image; Unimportable for several services."""
    service = compose_service(path)
    build = service.get("build")
    if build is None:
        image = str(service.get("image") or "")
        return None, None, image or None
    if isinstance(build, str):
        return path.parent / build, path.parent / build / "Dockerfile", None
    if isinstance(build, dict):
        ctx = path.parent / str(build.get("context") or ".")
        return ctx, ctx / str(build.get("dockerfile") or "Dockerfile"), None
    raise Unimportable(f"{path.name}: build is neither a path nor a mapping")


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


# ---- pytest support --------------------------------------------------------------------------------------------
OFFLINE_PYTEST = Path(__file__).with_name("offline_pytest.py")


def image_has_pytest() -> bool:
    return image_has("python3-pytest")


def _catches_import_error(node: ast.Try) -> bool:
    for h in node.handlers:
        names = []
        if h.type is None:
            return True
        for t in h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]:
            if isinstance(t, ast.Name):
                names.append(t.id)
        if {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"} & set(names):
            return True
    return False


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.Try):
            inner = guarded or _catches_import_error(node)
            for child in node.body:
                visit(child, inner)
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, guarded)
            return
        if not guarded:
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "importorskip"
            ):
                return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return found


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    return ".".join(reversed(parts))


def _fixture_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if _decorator_name(dec) in ("pytest.fixture", "fixture"):
                    alias = (
                        next(
                            (
                                kw.value.value
                                for kw in dec.keywords
                                if kw.arg == "name" and isinstance(kw.value, ast.Constant)
                            ),
                            None,
                        )
                        if isinstance(dec, ast.Call)
                        else None
                    )
                    names.add(alias or node.name)
    return names


def _parametrized(decorators: list[ast.expr]) -> set[str]:
    names: set[str] = set()
    for dec in decorators:
        if isinstance(dec, ast.Call) and _decorator_name(dec).endswith("mark.parametrize") and dec.args:
            first = dec.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.update(n.strip() for n in first.value.split(","))
            elif isinstance(first, (ast.List, ast.Tuple)):
                names.update(
                    e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
    return names


def _required_args(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = fn.args.posonlyargs + fn.args.args
    required = [a.arg for a in args[: len(args) - len(fn.args.defaults)]]
    required += [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is None]
    return [a for a in required if a not in ("self", "cls")]


def pytest_problems(sources: dict[str, str], provided_modules: set[str], instruction: str = "") -> list[str]:
    """Why these pytest files cannot run in the sandbox (imports the image lacks, pytest features the
    offline stand-in lacks, syntax newer than the image's Python 3.11); empty when they can."""
    problems: list[str] = []
    trees: dict[str, ast.Module] = {}
    for name, text in sorted(sources.items()):
        try:
            trees[name] = ast.parse(text, filename=name)
        except SyntaxError as exc:
            problems.append(f"{name} does not parse under Python 3.11 (line {exc.lineno}: {exc.msg})")
    local = {posixpath.splitext(posixpath.basename(n))[0] for n in sources} | {
        n.split("/")[0] for n in sources if "/" in n
    }
    stdlib = set(sys.stdlib_module_names) - _STDLIB_MISSING
    missing: set[str] = set()
    for tree in trees.values():
        for mod in _imports(tree):
            if mod in stdlib or mod in local or mod == "pytest" or mod in provided_modules:
                continue
            if mod not in _WELL_KNOWN_THIRD_PARTY and re.search(
                rf"(?<![\w.-]){re.escape(mod)}(\.py\b|/|\b)", instruction
            ):
                continue  # a module the task asks the agent to write
            missing.add(mod)
    if missing:
        problems.append(f"tests import packages not in the sandbox image: {', '.join(sorted(missing))}")
    if image_has_pytest():
        return problems
    from bashgym_assets.scenarios import offline_pytest

    unsupported: set[str] = set()
    fixtures: set[str] = set(offline_pytest.BUILTIN_FIXTURES)
    for tree in trees.values():
        fixtures |= _fixture_names(tree)
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "pytest"
                and node.attr not in offline_pytest.SUPPORTED_ATTRS
            ):
                unsupported.add(f"pytest.{node.attr}")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] in ("pytest", "_pytest")
            ):
                unsupported.update(
                    f"pytest.{a.name}"
                    for a in node.names
                    if node.module != "pytest" or a.name not in offline_pytest.SUPPORTED_ATTRS
                )
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets
            ):
                unsupported.add("pytest_plugins")
        base = posixpath.basename(name)
        if base == "conftest.py":
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                    "pytest_"
                ):
                    unsupported.add(f"the conftest hook {node.name}")
        if not (base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"):
            continue
        for fn, extra in _test_functions(tree):
            for arg in _required_args(fn):
                if arg not in fixtures and arg not in extra and arg not in _parametrized(fn.decorator_list):
                    unsupported.add(f"the fixture {arg!r} ({base}::{fn.name})")
            if isinstance(fn, ast.AsyncFunctionDef):
                unsupported.add(f"async tests ({base}::{fn.name})")
    if unsupported:
        problems.append(
            "tests use pytest features the offline runner lacks: " + ", ".join(sorted(unsupported))
        )
    return problems


def _test_functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, set[str]]]:
    out: list[tuple[Any, set[str]]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("test") or any(
                _decorator_name(d) in ("pytest.fixture", "fixture") for d in node.decorator_list
            ):
                out.append((node, set()))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            extra = _parametrized(node.decorator_list)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    item.name.startswith("test")
                    or any(_decorator_name(d) in ("pytest.fixture", "fixture") for d in item.decorator_list)
                ):
                    out.append((item, extra))
    return out


def pytest_wrapper(report: str) -> str:
    """The executable the rewritten verifier calls instead of pytest; appends each run's status to a report."""
    run = (
        'python3 -B -m pytest -p no:cacheprovider "$@"'
        if image_has_pytest()
        else 'PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}" python3 -B -c '
        "'import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))' \"$@\""
    )
    return (
        "#!/bin/bash\n# bashgym: runs the task's pytest tests offline (see bashgym_assets/scenarios/external.py)\n"
        f'd=$(dirname "$0")\n{run}\nrc=$?\necho "$rc" >> {report}\nexit $rc\n'
    )


# ---- the check -------------------------------------------------------------------------------------------------
@dataclass
class TestPlan:
    files: dict[str, tuple[bytes, bool]]  # path under /tests -> (content, executable)
    entry: str  # the shell run by the check (cwd = workdir)
    pytest: bool
    layout: str
    env: dict[str, str] = field(default_factory=dict)


def build_check(plan: TestPlan, workdir: str, source: str) -> str:
    """The bundle's check: materialise /tests, run the verifier, decide by the layout's pass rule, clean up."""
    out = [
        "#!/bin/bash",
        f"# bashgym check for {source}: runs the task's own tests as root on the final state.",
        "# Harbor: pass iff /logs/verifier/reward.txt (or reward.json) says 1, else iff the test script exits 0.",
        "# Terminal-Bench 1.x: pass iff every pytest run passed, else iff run-tests.sh exits 0.",
        "# Everything it writes (/tests, /logs/verifier, a temp folder) is removed again on exit.",
        "__bg=$(mktemp -d /tmp/.bashgym-check.XXXXXXXX) || exit 125",
        "__bg_tests_moved=0; __bg_made_logs=0; __bg_made_verifier=0",
        'if [ -e /tests ] || [ -L /tests ]; then mv /tests "$__bg/tests.orig" && __bg_tests_moved=1; fi',
        "[ -d /logs ] || __bg_made_logs=1",
        "[ -d /logs/verifier ] || __bg_made_verifier=1",
        "__bg_cleanup() {",
        "  cd /",
        "  rm -rf /tests",
        '  [ "$__bg_tests_moved" = 1 ] && mv "$__bg/tests.orig" /tests',
        '  [ "$__bg_made_verifier" = 1 ] && rm -rf /logs/verifier',
        '  [ "$__bg_made_logs" = 1 ] && rm -rf /logs',
        '  rm -rf "$__bg"',
        "}",
        "trap __bg_cleanup EXIT",
        'mkdir -p /tests /logs/verifier "$__bg/bin" || exit 125',
        "rm -f /logs/verifier/reward.txt /logs/verifier/reward.json",
    ]
    for rel, (data, executable) in sorted(plan.files.items()):
        path = posixpath.join(TEST_DIR, rel)
        parent = posixpath.dirname(path)
        if parent != TEST_DIR:
            out.append(f"mkdir -p {shlex.quote(parent)}")
        out.append(write_file_command(path, data, executable))
    if plan.pytest:
        wrapper = pytest_wrapper('"$d/../pytest-report"')
        delim = _heredoc_delim(wrapper)
        out.append(
            f"cat > \"$__bg/bin/bashgym-pytest\" <<'{delim}'\n{wrapper}{delim}\n"
            'chmod 0755 "$__bg/bin/bashgym-pytest"'
        )
        if not image_has_pytest():
            shim = OFFLINE_PYTEST.read_text(encoding="utf-8")
            delim = _heredoc_delim(shim)
            out.append(f"cat > \"$__bg/bin/pytest.py\" <<'{delim}'\n{shim}{delim}")
        out.append('export BASHGYM_PYTEST="$__bg/bin/bashgym-pytest"')
    out.append(f"export TEST_DIR={TEST_DIR} T_BENCH_TEST_DIR={TEST_DIR}")
    for k, v in plan.env.items():
        out.append(f"export {k}={shlex.quote(v)}")
    out.append(f"[ -r {ENV_PROFILE} ] && . {ENV_PROFILE}")
    out.append(f"cd {shlex.quote(workdir)} 2>/dev/null || cd /")
    out.append(plan.entry)
    out.append("__bg_rc=$?")
    if plan.layout == HARBOR:
        out += [
            "if [ -f /logs/verifier/reward.txt ]; then",
            "  __bg_reward=$(tr -d ' \\t\\r\\n' < /logs/verifier/reward.txt)",
            '  echo "bashgym: reward.txt = $__bg_reward (test script exit $__bg_rc)"',
            "  awk -v r=\"$__bg_reward\" 'BEGIN { exit !(r ~ /^[0-9.eE+-]+$/ && r + 0 == 1) }'; exit $?",
            "elif [ -f /logs/verifier/reward.json ]; then",
            "  python3 -c 'import json, sys\n"
            "d = json.load(open(sys.argv[1]))\n"
            'v = d.get("reward", d) if isinstance(d, dict) else d\n'
            "vals = [v] if isinstance(v, (int, float)) else [x for x in (v.values() if isinstance(v, dict) else [])"
            " if isinstance(x, (int, float))]\n"
            'print("bashgym: reward.json =", d)\n'
            "sys.exit(0 if vals and all(float(x) == 1.0 for x in vals) else 1)' /logs/verifier/reward.json"
            "; exit $?",
            "fi",
        ]
    elif plan.pytest:
        out += [
            'if [ -s "$__bg/pytest-report" ]; then',
            "  echo \"bashgym: pytest runs exited $(tr '\\n' ' ' < \"$__bg/pytest-report\")(script exit $__bg_rc)\"",
            "  ! grep -qv '^0$' \"$__bg/pytest-report\"; exit $?",
            "fi",
        ]
    out.append('[ "$__bg_rc" = 0 ]')
    return "\n".join(line for line in out if line) + "\n"


# ---- the reference ----------------------------------------------------------------------------------------------
_SOLUTION_PATH = re.compile(r"(?<![\w./~$-])/solution(?=/|[^\w.-]|$)")


def relocate_solution(
    files: dict[str, tuple[bytes, bool]], solution_dir: str
) -> dict[str, tuple[bytes, bool]]:
    """The solution's text files with the path ``/solution`` (where the harnesses put it) made ``solution_dir``."""
    out = {}
    for rel, (data, executable) in files.items():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and "\0" not in text:
            data = _SOLUTION_PATH.sub(solution_dir, text).encode()
        out[rel] = (data, executable)
    return out


def build_reference(
    files: dict[str, tuple[bytes, bool]],
    entry: str | None,
    commands: list[str] | None,
    env: dict[str, str],
    solution_dir: str = SOLUTION_DIR,
) -> list[str]:
    """Write the solution files under ``solution_dir`` in one command, then run the entry script in the next.

    The reference runs as the agent: an unprivileged one cannot make ``/solution``, so its solution goes to
    ``USER_SOLUTION_DIR`` and the solution's own mentions of ``/solution`` follow it."""
    if commands is not None:
        return commands
    if solution_dir != SOLUTION_DIR:
        files = relocate_solution(files, solution_dir)
    writes = [f"mkdir -p {shlex.quote(solution_dir)}"]
    for rel, (data, executable) in sorted(files.items()):
        path = posixpath.join(solution_dir, rel)
        parent = posixpath.dirname(path)
        if parent != solution_dir:
            writes.append(f"mkdir -p {shlex.quote(parent)}")
        writes.append(write_file_command(path, data, executable))
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    run = f"{exports + ' ' if exports else ''}bash {posixpath.join(solution_dir, entry or 'solve.sh')}"
    return ["\n".join(writes), run]


# ---- task folders ----------------------------------------------------------------------------------------------
def detect_layout(folder: Path | str) -> str | None:
    """``harbor2`` (task.toml / instruction.md), ``tb1`` (task.yaml) or None when it is not a task folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return None
    if "task.toml" in names or ("instruction.md" in names and not names & {"task.yaml", "task.yml"}):
        return HARBOR
    if names & {"task.yaml", "task.yml"}:
        return TB1
    return None


def _looks_like_task(folder: Path) -> bool:
    """A folder that wanted to be a task (a task-ish file, or tests beside a solution or an environment)."""
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    return bool(names & _TASK_MARKERS) or ("tests" in names and bool(names & {"solution", "environment"}))


@dataclass
class _Task:
    instruction: str
    difficulty: int
    category: str
    env: Environment
    tests: TestPlan
    solution_files: dict[str, tuple[bytes, bool]]
    solution_entry: str | None
    solution_commands: list[str] | None
    solution_env: dict[str, str]


def _collect(folder: Path, what: str, budget: _Budget) -> dict[str, tuple[bytes, bool]]:
    out = {}
    for f in _walk_files(folder, what):
        rel = f.relative_to(folder).as_posix()
        data = _read_bytes(f, f"{what}/{rel}")
        budget.take(len(data), f"{what}/{rel}")
        out[rel] = (data, _is_executable(f))
    return out


def _rewrite_shell_files(
    files: dict[str, tuple[bytes, bool]], ctx: str, what: str, test_names: frozenset[str] = frozenset()
) -> tuple[dict[str, tuple[bytes, bool]], int]:
    """Rewrite every shell script among ``files`` (installers dropped, pytest redirected)."""
    out, pytest_runs, problems = dict(files), 0, []
    for rel, (data, executable) in files.items():
        if not (
            rel.endswith(".sh")
            or data.startswith((b"#!/bin/bash", b"#!/bin/sh", b"#!/usr/bin/env bash", b"#!/usr/bin/env sh"))
        ):
            continue
        text = _decode(data, f"{what}/{rel}")
        rw = rewrite_script(text, ctx, test_names, resolve=lambda p: _resolve_in(p, files, what))
        problems += rw.problems
        pytest_runs += rw.pytest_runs
        out[rel] = (rw.text.encode(), executable)
    if problems:
        raise Unimportable(
            f"{what} need{'s' if what.endswith('solution') else ''} the network: "
            + "; ".join(dict.fromkeys(problems))
        )
    return out, pytest_runs


def _resolve_in(path: str, files: dict[str, tuple[bytes, bool]], what: str) -> str | None:
    """A file of the tests (``/tests/x``, ``$TEST_DIR/x``) or solution (``/solution/x``) folder, as text."""
    path = _substitute(path, {"TEST_DIR": TEST_DIR, "T_BENCH_TEST_DIR": TEST_DIR})
    for root in (TEST_DIR, SOLUTION_DIR):
        path = path.removeprefix(root + "/")
    entry = files.get(posixpath.normpath(path))
    if entry is None:
        return None
    try:
        return _decode(entry[0], f"{what}/{path}")
    except Unimportable:
        return None


def _python_sources(files: dict[str, tuple[bytes, bool]], what: str) -> dict[str, str]:
    return {rel: _decode(data, f"{what}/{rel}") for rel, (data, _) in files.items() if rel.endswith(".py")}


def _provided_modules(envx: Environment) -> set[str]:
    """Python modules the environment puts in the start folder (importable by tests run from there)."""
    mods = set()
    start = envx.start_dir.rstrip("/")
    for path in envx.files:
        if path.startswith(start + "/"):
            first = path[len(start) + 1 :].split("/")[0]
            mods.add(first.removesuffix(".py"))
    return mods


def _finish_tests(plan: TestPlan, envx: Environment, instruction: str, what: str) -> TestPlan:
    if plan.pytest:
        if not image_has("python3"):
            raise Unimportable("the tests run pytest and the sandbox image has no python3")
        problems = pytest_problems(_python_sources(plan.files, what), _provided_modules(envx), instruction)
        if problems:
            raise Unimportable("; ".join(problems))
    return plan


def _harbor_task(folder: Path, budget: _Budget) -> _Task:
    meta: dict[str, Any] = {}
    toml_path = folder / "task.toml"
    if toml_path.exists():
        try:
            meta = tomllib.loads(_read_text(toml_path, "task.toml", 256 << 10))
        except tomllib.TOMLDecodeError as exc:
            raise Unimportable(f"task.toml is not valid TOML: {_one_line(exc)}") from exc
    metadata = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else {}
    environment = meta.get("environment") if isinstance(meta.get("environment"), dict) else {}
    verifier = meta.get("verifier") if isinstance(meta.get("verifier"), dict) else {}
    solution_meta = meta.get("solution") if isinstance(meta.get("solution"), dict) else {}
    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file():
        raise Unimportable("no instruction.md")
    instruction = _read_text(instruction_path, "instruction.md", MAX_INSTRUCTION_BYTES).strip()
    if not instruction:
        raise Unimportable("instruction.md is empty")
    if environment.get("mcp_servers"):
        raise Unimportable("needs MCP servers ([[environment.mcp_servers]]): not available in the sandbox")
    gpus = environment.get("gpus", 0)
    if isinstance(gpus, (int, float)) and gpus > 0:
        raise Unimportable(f"needs {gpus} GPU(s)")
    if not (folder / "tests" / "test.sh").is_file():
        raise Unimportable("no tests: tests/test.sh is missing")
    if not (folder / "solution" / "solve.sh").is_file():
        raise Unimportable("no reference solution: solution/solve.sh is missing (the gate cannot certify it)")
    env_dir = folder / "environment"
    image = str(environment.get("docker_image") or "")
    envx = _environment(
        env_dir,
        env_dir / "Dockerfile",
        env_dir / "docker-compose.yaml",
        image,
        budget,
        frozenset(),
        _str_table(environment.get("env")),
        environment.get("workdir"),
        where="environment/",
        image_hint="a docker_image in task.toml",
    )
    tests = _collect(folder / "tests", "tests", budget)
    tests, runs = _rewrite_shell_files(tests, TESTS, "tests", frozenset(posixpath.basename(n) for n in tests))
    plan = TestPlan(
        files=tests,
        entry=f"bash {TEST_DIR}/test.sh",
        pytest=runs > 0,
        layout=HARBOR,
        env=_str_table(verifier.get("env")),
    )
    plan = _finish_tests(plan, envx, instruction, "tests")
    solution = _collect(folder / "solution", "solution", budget)
    solution, _ = _rewrite_shell_files(solution, IMAGE, "the solution")
    return _Task(
        instruction,
        difficulty_level(metadata.get("difficulty")),
        category_slug(metadata.get("category")),
        envx,
        plan,
        solution,
        "solve.sh",
        None,
        _str_table(solution_meta.get("env")),
    )


def _str_table(value: Any) -> dict[str, str]:
    """A TOML table of environment variables (``[verifier.env]``...) as shell-safe names and strings."""
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(k))}


def _context_files(context: Path, exclude_top: frozenset[str]) -> list[str]:
    """Files of a build context that would have gone into an image (not the harness's, docs or dotfiles)."""
    if not context.is_dir():
        return []
    out = []
    for f in _walk_files(context, "the build context", links=True):
        rel = f.relative_to(context).as_posix()
        if (
            rel.split("/")[0] in exclude_top
            or f.name in _ENV_DOCS
            or any(part.startswith(".") for part in rel.split("/"))
        ):
            continue
        out.append(rel)
    return sorted(out)


def _environment(
    context: Path,
    dockerfile: Path,
    compose: Path,
    image: str,
    budget: _Budget,
    exclude_top: frozenset[str],
    extra_env: dict[str, str] | None = None,
    workdir: Any = None,
    where: str = "the task folder",
    image_hint: str = "an image in docker-compose.yaml",
) -> Environment:
    compose_path = next((p for p in (compose, compose.with_suffix(".yml")) if p.is_file()), None)
    service: dict[str, Any] = {}
    if compose_path is not None:
        service = compose_service(compose_path)
        built_context, built, compose_image = compose_dockerfile(compose_path)
        if built is not None and built_context is not None:
            if not built_context.resolve().is_relative_to(context.resolve()):
                raise Unimportable(f"{compose_path.name} builds from outside the task folder")
            if not built.is_file():  # docker compose would fail to build: not an empty environment
                raise Unimportable(
                    f"{compose_path.name} builds from {built.relative_to(context).as_posix()}, "
                    "which the task folder lacks"
                )
            dockerfile, context = built, built_context
        elif compose_image and "${" not in compose_image:
            image = compose_image
    if dockerfile.is_file():
        text = _read_text(dockerfile, dockerfile.name, 256 << 10)
        envx = translate_dockerfile(text, context, budget, exclude_top)
    else:
        if not image and (extras := _context_files(context, exclude_top)):
            # Both harnesses build the container from these with a Dockerfile: without one they never reach it,
            # and the task would fail for want of them (the gate would blame its reference), not for the model.
            listing = ", ".join(extras[:3]) + (f" and {len(extras) - 3} more" if len(extras) > 3 else "")
            raise Unimportable(
                f"{where} holds files ({listing}) but no Dockerfile (nor {image_hint}) says how "
                "they build the starting state"
            )
        envx = Environment()
        if image:
            problem, envx.python_base = base_image_problem(image)
            if problem:
                raise Unimportable(problem)
            if envx.python_base:
                envx.setup.append(
                    "command -v python >/dev/null || ln -s /usr/bin/python3 /usr/local/bin/python"
                )
    # docker compose runs the service as its `user`, in its `working_dir`, whatever the image says
    compose_user = service.get("user")
    if (
        compose_path is not None
        and isinstance(compose_user, (str, int))
        and str(compose_user).strip()
        and "${" not in str(compose_user)
    ):
        envx.user = sandbox_user(str(compose_user).strip(), envx.accounts, f"{compose_path.name}'s user")
        envx.owner = _owner(str(compose_user).strip()) if envx.user != "root" else ""
    if not (isinstance(workdir, str) and workdir.startswith("/")):
        workdir = service.get("working_dir")
    envx.env.update(extra_env or {})
    if isinstance(workdir, str) and workdir.startswith("/"):  # Harbor's [environment] workdir, compose's
        envx.workdir = posixpath.normpath(workdir)
        envx.workdir_set = True
    if envx.env:
        lines = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in envx.env.items())
        envx.files[ENV_PROFILE] = "# ENV of the imported task's Dockerfile\n" + lines
    envx.setup.append(f"mkdir -p {shlex.quote(envx.start_dir)}")
    return envx


def _tb1_instruction(data: dict[str, Any]) -> str:
    text = data.get("instruction")
    if not text and isinstance(data.get("descriptions"), list):
        entries = [d for d in data["descriptions"] if isinstance(d, dict)]
        base = next((d for d in entries if d.get("key") == "base"), entries[0] if entries else {})
        text = base.get("description")
    if not isinstance(text, str) or not text.strip():
        raise Unimportable("no instruction in task.yaml (instruction or descriptions[key=base].description)")
    if len(text.encode()) > MAX_INSTRUCTION_BYTES:
        raise Unimportable(f"the instruction is over {MAX_INSTRUCTION_BYTES} bytes")
    return text.strip()


def _tb1_task(folder: Path, budget: _Budget) -> _Task:
    yaml_path = folder / "task.yaml" if (folder / "task.yaml").is_file() else folder / "task.yml"
    try:
        data = yaml.safe_load(_read_text(yaml_path, yaml_path.name, 256 << 10))
    except yaml.YAMLError as exc:
        raise Unimportable(f"{yaml_path.name} is not valid YAML: {_one_line(exc)}") from exc
    if not isinstance(data, dict):
        raise Unimportable(f"{yaml_path.name} is not a mapping")
    instruction = _tb1_instruction(data)
    parser = data.get("parser_name")
    if parser not in (None, "pytest"):
        raise Unimportable(f"results parser {parser!r} is not supported (only pytest)")
    tests_dir = folder / "tests"
    tests = _collect(tests_dir, "tests", budget) if tests_dir.is_dir() else {}
    run_tests = folder / "run-tests.sh"
    if run_tests.is_file():
        data_rt = _read_bytes(run_tests, "run-tests.sh")
        budget.take(len(data_rt), "run-tests.sh")
        tests["run-tests.sh"] = (data_rt, _is_executable(run_tests))
        entry = f"bash {TEST_DIR}/run-tests.sh"
    elif "test_outputs.py" in tests:
        tests["run-tests.sh"] = (b'#!/bin/bash\npytest "$TEST_DIR/test_outputs.py" -rA\n', True)
        entry = f"bash {TEST_DIR}/run-tests.sh"
    elif any(posixpath.basename(n).startswith("test_") and n.endswith(".py") for n in tests):
        tests["run-tests.sh"] = (b'#!/bin/bash\npytest "$TEST_DIR" -rA\n', True)
        entry = f"bash {TEST_DIR}/run-tests.sh"
    else:
        raise Unimportable("no tests: neither run-tests.sh nor tests/test_*.py")
    solution_commands: list[str] | None = None
    solution: dict[str, tuple[bytes, bool]] = {}
    if (folder / "solution.sh").is_file():
        sol = _read_bytes(folder / "solution.sh", "solution.sh")
        budget.take(len(sol), "solution.sh")
        solution = {"solution.sh": (sol, True)}
        solution, _ = _rewrite_shell_files(solution, IMAGE, "the solution")
    elif (folder / "solution.yaml").is_file():
        solution_commands = _solution_yaml(folder / "solution.yaml")
    else:
        raise Unimportable(
            "no reference solution: solution.sh / solution.yaml is missing (the gate cannot certify it)"
        )
    envx = _environment(folder, folder / "Dockerfile", folder / "docker-compose.yaml", "", budget, _TB1_META)
    tests, runs = _rewrite_shell_files(tests, TESTS, "tests", frozenset(posixpath.basename(n) for n in tests))
    plan = _finish_tests(
        TestPlan(files=tests, entry=entry, pytest=runs > 0, layout=TB1), envx, instruction, "tests"
    )
    return _Task(
        instruction,
        difficulty_level(data.get("difficulty")),
        category_slug(data.get("category")),
        envx,
        plan,
        solution,
        "solution.sh",
        solution_commands,
        {},
    )


_TMUX_KEY = re.compile(
    r"^(?:(?:[CMS]-)+\S+|Escape|Enter|Tab|BSpace|BTab|Space|Up|Down|Left|Right|Home|End|"
    r"PageUp|PageDown|PgUp|PgDn|PPage|NPage|DC|IC|F\d{1,2})$"
)


def _solution_yaml(path: Path) -> list[str]:
    try:
        data = yaml.safe_load(_read_text(path, "solution.yaml", 256 << 10))
    except yaml.YAMLError as exc:
        raise Unimportable(f"solution.yaml is not valid YAML: {_one_line(exc)}") from exc
    if not isinstance(data, list):
        raise Unimportable("solution.yaml is not a list of commands")
    commands = []
    for entry in data:
        cmd = entry.get("command") if isinstance(entry, dict) else entry
        if not isinstance(cmd, str):
            raise Unimportable("solution.yaml: an entry has no command string")
        # TB 1.x sends these entries to a tmux pane: ``append_enter: false`` and key names (C-x, Escape) are
        # keystrokes into a running program (vim, a REPL), which a shell turn cannot replay.
        if isinstance(entry, dict) and entry.get("append_enter") is False:
            raise Unimportable(
                f"solution.yaml types keystrokes without Enter ({cmd.strip()[:40]!r}): an "
                "interactive session, not shell commands"
            )
        if _TMUX_KEY.match(cmd.strip()):
            raise Unimportable(
                f"solution.yaml sends the key {cmd.strip()!r} to a terminal: an interactive "
                "session, not shell commands"
            )
        cmd = cmd.rstrip("\n")
        if cmd.strip():
            rw = rewrite_script(cmd, IMAGE)
            if rw.problems:
                raise Unimportable("the solution needs the network: " + "; ".join(dict.fromkeys(rw.problems)))
            commands.append(rw.text)
    if not commands:
        raise Unimportable("solution.yaml holds no command")
    return commands


def import_task(folder: Path | str, suite: str, layout: str | None = None) -> ScenarioBundle:
    """One task folder as a bundle; raises ``Unimportable`` with the reason."""
    folder = Path(folder)
    layout = layout or detect_layout(folder)
    if layout not in LAYOUTS:
        raise Unimportable(
            "not a task folder: no task.toml/instruction.md (Harbor 2.x) nor task.yaml (Terminal-Bench 1.x)"
        )
    budget = _Budget()
    task = _harbor_task(folder, budget) if layout == HARBOR else _tb1_task(folder, budget)
    source = f"external:{suite}:{layout}:{folder.name}"
    start = task.env.start_dir
    check = build_check(task.tests, start, source)  # run as root, in the agent's start folder
    reference = build_reference(
        task.solution_files,
        task.solution_entry,
        task.solution_commands,
        task.solution_env,
        SOLUTION_DIR if task.env.user == "root" else USER_SOLUTION_DIR,
    )
    try:
        return ScenarioBundle(
            id=external_id(suite, folder.name),
            task=task.instruction,
            category=task.category,
            difficulty=task.difficulty,
            setup=task.env.setup,
            files=task.env.files,
            user=task.env.user,
            workdir=start,
            check=check,
            reference=reference,
            source=source,
        )
    except ValidationError as exc:
        raise Unimportable(format_validation_error(exc)) from exc


def _task_folders(root: Path, depth: int = 0) -> tuple[list[tuple[Path, str]], list[Path]]:
    """(task folders with their layout, folders that look like tasks but are neither layout) under ``root``."""
    tasks: list[tuple[Path, str]] = []
    odd: list[Path] = []
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    except OSError:
        return tasks, odd
    for child in children:
        layout = detect_layout(child)
        if layout:
            tasks.append((child, layout))
        elif depth + 1 < MAX_SUITE_DEPTH:
            inner, inner_odd = _task_folders(child, depth + 1)
            if inner or inner_odd:
                tasks += inner
                odd += inner_odd
            elif _looks_like_task(child):
                odd.append(child)
        elif _looks_like_task(child):
            odd.append(child)
    return tasks, odd


def import_suite(
    folder: Path | str, suite: str | None = None
) -> tuple[list[ScenarioBundle], list[ExternalQuarantine]]:
    """Every task of a suite folder (a folder of task folders, or one task folder) -> (bundles, quarantine).

    Never raises: a folder that cannot be imported becomes a quarantine entry with its reason and the other tasks
    of the suite are still imported.
    """
    folder = Path(folder)
    bundles: list[ScenarioBundle] = []
    quarantine: list[ExternalQuarantine] = []
    if not folder.is_dir():
        return [], [
            ExternalQuarantine(
                suite=suite or folder.name, task="", reason=f"not a folder: {folder}", path=str(folder)
            )
        ]
    layout = detect_layout(folder)
    if layout:
        suite = suite or folder.parent.name or folder.name
        tasks, odd = [(folder, layout)], []
    else:
        suite = suite or folder.name
        tasks, odd = _task_folders(folder)
    for path in odd:
        quarantine.append(
            ExternalQuarantine(
                suite=suite,
                task=path.name,
                path=str(path),
                reason=(
                    "not a recognised task layout: no task.toml/instruction.md (Harbor 2.x) nor task.yaml "
                    "(Terminal-Bench 1.x)"
                ),
            )
        )
    seen: dict[str, str] = {}
    for path, task_layout in tasks:
        try:
            bundle = import_task(path, suite, task_layout)
        except Unimportable as exc:
            quarantine.append(
                ExternalQuarantine(
                    suite=suite, task=path.name, layout=task_layout, reason=str(exc), path=str(path)
                )
            )
            continue
        except Exception as exc:  # never let one odd folder stop the suite
            quarantine.append(
                ExternalQuarantine(
                    suite=suite,
                    task=path.name,
                    layout=task_layout,
                    path=str(path),
                    reason=f"import failed: {type(exc).__name__}: {_one_line(exc)}",
                )
            )
            continue
        if bundle.id in seen:
            quarantine.append(
                ExternalQuarantine(
                    suite=suite,
                    task=path.name,
                    layout=task_layout,
                    path=str(path),
                    reason=f"duplicate id {bundle.id!r} (first from {seen[bundle.id]})",
                )
            )
            continue
        seen[bundle.id] = str(path)
        bundles.append(bundle)
    return bundles, quarantine


def import_suites(folders: Iterable[Path | str]) -> tuple[list[ScenarioBundle], list[ExternalQuarantine]]:
    """Several suite folders (``BASHGYM_EVAL_SUITE_DIRS``); the suite name is each folder's name."""
    bundles: list[ScenarioBundle] = []
    quarantine: list[ExternalQuarantine] = []
    for folder in folders:
        b, q = import_suite(folder)
        bundles += b
        quarantine += q
    return bundles, quarantine


def suite_of(bundle_source: str) -> str:
    """The suite name in an ``external:<suite>:<layout>:<task>`` source."""
    parts = bundle_source.split(":")
    return parts[1] if len(parts) >= 4 and parts[0] == "external" else ""
