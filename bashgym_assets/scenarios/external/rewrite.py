"""Rewriting a task's shell (a Dockerfile's ``RUN``, the verifier, the solution) for the offline sandbox: installs
of what the image has are dropped, pytest runs go to the image's pytest through the check's wrapper, a user the
image already has is asserted instead of created, and whatever still needs the network is named so the task can be
quarantined."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bashgym_assets.sandbox.layout import account_setup_shell
from bashgym_assets.scenarios.external.common import SANDBOX_USERS, image_has, image_packages
from bashgym_assets.scenarios.external.shell import (
    RESERVED,
    SimpleCommand,
    command_start,
    program_index,
    shell_commands,
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
# Python packages the image provides to the check (its pytest) or that only matter to the installer.
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
    p = program_index(texts)
    if p >= len(texts):
        return Action(KEEP)
    prog = posixpath.basename(texts[p])
    args, raw_args = texts[p + 1 :], raws[p + 1 :]
    line = " ".join(texts[p:])[:160]

    if prog in RESERVED:
        return Action(KEEP)
    if ctx == IMAGE and (prog in ("which", "type") or (prog == "command" and args[:1] in (["-v"], ["-V"]))):
        names = [
            a for a in args if not a.startswith("-") and not re.match(r"^\d*[<>]", a) and a != "/dev/null"
        ]
        if names and all(n in _HARNESS_PACKAGES for n in names):
            return Action(DROP)  # asserting the harness's tmux/asciinema, which the sandbox does not need
    if rw.accounts and prog in ACCOUNT_TOOLS:
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
ACCOUNT_TOOLS = frozenset({"useradd", "adduser", "groupadd", "addgroup"})
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


# The sandbox's own accounts a Dockerfile may create again (every sandbox user but root): operator, which the image
# has, and the service account app, which a container makes when its session is app (and the rewritten command
# makes otherwise: layout.account_setup_shell).
_IMAGE_ACCOUNTS = {name: a for name, a in SANDBOX_USERS.items() if a.uid != 0}


def _created_home(prog: str, name: str, args: list[str], opts: dict[str, str]) -> str:
    """The home an account command makes for ``name``: its ``-d``/``--home``, else ``/home/<name>`` when it creates
    one (``useradd -m``; ``adduser`` without ``--system``/``--no-create-home``), else "" (none made)."""
    if opts.get("home"):
        return posixpath.normpath(opts["home"])
    makes = (
        any(a in ("-m", "--create-home") or re.fullmatch(r"-[A-Za-z]*m[A-Za-z]*", a) for a in args)
        if prog == "useradd"
        else not any(a in ("--system", "--no-create-home") for a in args)
    )
    return f"/home/{name}" if makes else ""


def _classify_account(prog: str, args: list[str]) -> Action:
    """A Dockerfile creating a user (or group) the sandbox has (operator, the service account app): creating it
    again would fail the setup (``useradd: user 'operator' already exists``), so the command asserts operator
    exists instead, and makes app as the sandbox does unless it exists (a session as app has it already), keeping
    the extra groups it names. A uid or home other than the sandbox account's refuses the task: the agent would not
    be who the task says."""
    pos, opts = account_command(prog, args)
    if prog in ("groupadd", "addgroup"):
        if len(pos) != 1 or pos[0] not in _IMAGE_ACCOUNTS:
            return Action(KEEP)
        own = _IMAGE_ACCOUNTS[pos[0]]
        return Action(DROP) if own.in_image else Action(REPLACE, f"{{ {account_setup_shell(own)}; }}")
    if len(pos) != 1 or pos[0] not in _IMAGE_ACCOUNTS:
        return Action(KEEP)  # another user (created for real), or `adduser operator <group>` (a membership)
    name = pos[0]
    uid, home = str(_IMAGE_ACCOUNTS[name].uid), _IMAGE_ACCOUNTS[name].home
    if opts.get("uid") and opts["uid"] != uid:
        return Action(
            REFUSE,
            f"the Dockerfile creates the user {name} with uid {opts['uid']}: the sandbox's {name} is uid {uid}",
        )
    made = _created_home(prog, name, args, opts)
    if made and made != home:
        return Action(
            REFUSE,
            f"the Dockerfile creates the user {name} with the home {made}: the sandbox's {name} lives in {home}",
        )
    groups = opts.get("groups", "") if prog == "useradd" else ""
    own = _IMAGE_ACCOUNTS[name]
    exists = f"id -u {name} >/dev/null" if own.in_image else f"{{ {account_setup_shell(own)}; }}"
    if groups:
        return Action(REPLACE, f"{{ {exists} && usermod -aG {shlex.quote(groups)} {name}; }}")
    return Action(REPLACE, exists)


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
        p = program_index(texts)
        span = (cmd.words[command_start(texts)].start, cmd.end) if p < len(texts) else (cmd.start, cmd.end)
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
