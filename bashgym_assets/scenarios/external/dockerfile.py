"""Reading a task's Dockerfile (``dockerfile-parse``) and translating it into sandbox setup: ``RUN`` lines
rewritten, ``COPY``/``ADD`` files carried in the bundle (``.dockerignore`` applied with docker's own
``PatternMatcher``), ``ENV``/``ARG``/``WORKDIR``/``USER`` followed, and a base image the sandbox image cannot stand
in for refused."""

from __future__ import annotations

import base64
import io
import json
import os
import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from docker.utils.build import PatternMatcher
from dockerfile_parse import DockerfileParser
from dockerfile_parse.constants import COMMENT_INSTRUCTION
from dockerfile_parse.util import extract_key_values

from bashgym_assets.scenarios.bundle import SessionUser
from bashgym_assets.scenarios.external.common import (
    DEFAULT_WORKDIR,
    MAX_FILES,
    MAX_UNPACKED_BYTES,
    OFFERED_USERS,
    SANDBOX_USERS,
    STAGE_DIR,
    TB1_SECRETS,
    Budget,
    Unimportable,
    as_text,
    heredoc_delim,
    is_executable,
    read_bytes,
    read_text,
    walk_files,
)
from bashgym_assets.scenarios.external.rewrite import ACCOUNT_TOOLS, IMAGE, account_command, rewrite_script
from bashgym_assets.scenarios.external.shell import program_index, shell_commands

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


# ---- Dockerfile ---------------------------------------------------------------------------------------------
@dataclass
class Instruction:
    keyword: str
    args: str
    flags: dict[str, str]
    heredocs: list[tuple[str, str]]  # (delimiter, body)
    raw: str  # the instruction's lines as written


# A BuildKit heredoc marker (``<<EOF``, ``<<-'EOF'``) in a RUN/COPY/ADD line.
_HEREDOC_MARK = re.compile(r"<<(-?)[\"']?([A-Za-z0-9_]+)[\"']?")


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuations joined, comments dropped, BuildKit heredocs collected.

    ``dockerfile-parse`` reads the instructions: the escape directive, line continuations (joined as docker joins
    them: the escape and the newline go, nothing is added), comment lines inside a continuation. Two things it
    does not know stay here: BuildKit heredocs (it reads a heredoc's body as more instructions, so the body lines
    after a RUN/COPY/ADD that opens one are taken here and whatever the library made of them is skipped) and an
    instruction's ``--flag=value`` options (it leaves them in the value)."""
    lines = text.splitlines()
    parser = DockerfileParser(fileobj=io.BytesIO(("\n".join(lines) + "\n").encode()))
    out: list[Instruction] = []
    body_lines: set[int] = set()  # 0-based lines that are a heredoc's body (or its closing delimiter)
    for entry in parser.structure:
        keyword, first, last = entry["instruction"], entry["startline"], entry["endline"]
        if keyword == COMMENT_INSTRUCTION or first in body_lines:
            continue
        if not re.fullmatch(r"[A-Z]+", keyword):
            raise Unimportable(
                f"Dockerfile line {last + 1} is not an instruction: {lines[first].strip()[:80]}"
            )
        rest = entry["value"].strip()
        flags: dict[str, str] = {}
        while True:
            fm = re.match(r"^--([a-z-]+)(?:=(\S*))?\s*", rest)
            if not fm:
                break
            flags[fm.group(1)] = fm.group(2) or ""
            rest = rest[fm.end() :]
        heredocs: list[tuple[str, str]] = []
        if keyword in ("RUN", "COPY", "ADD"):
            i = last + 1
            for hm in _HEREDOC_MARK.finditer(rest):
                delim, strip_tabs = hm.group(2), hm.group(1) == "-"
                body: list[str] = []
                while i < len(lines):
                    line = lines[i]
                    body_lines.add(i)
                    i += 1
                    if (line.lstrip("\t") if strip_tabs else line) == delim:
                        break
                    body.append(line.lstrip("\t") if strip_tabs else line)
                else:
                    raise Unimportable(f"Dockerfile heredoc <<{delim} is never closed")
                heredocs.append((delim, "\n".join(body) + "\n"))
        out.append(Instruction(keyword, rest.strip(), flags, heredocs, entry["content"]))
    return out


_VAR_RE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def substitute(text: str, env: dict[str, str]) -> str:
    """``$name``, ``${name}``, ``${name:-default}`` and ``${name:+alt}`` replaced from ``env`` (unknown: empty).

    By hand: ``dockerfile-parse``'s substitution knows only ``$name``/``${name}`` and never substitutes into ARG
    values, which Dockerfiles of the suites use (``ARG V=${BASE}-1``, ``${PYTHON:-python3}``)."""

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
    """An instruction's arguments: the JSON (exec) form, else shell words.

    ``shlex`` rather than ``dockerfile-parse``'s ``WordSplitter``: the latter keeps a backslash before any character
    in double quotes (docker's lexer drops it before ``\\``) and says nothing of an unclosed quote, which docker
    refuses and so does the import."""
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


def env_pairs(args: str) -> list[tuple[str, str]]:
    """The ``(name, value)`` pairs of an ENV instruction, as written (not substituted): ``dockerfile-parse`` tells
    the ``name=value ...`` form from the legacy ``name value`` one and takes the quotes off."""
    if not args.strip():
        return []
    _split_args(args)  # an unclosed quote refuses the task, as docker refuses the build
    try:
        return [(str(k), str(v)) for k, v in extract_key_values(False, {}, {}, args)]
    except ValueError as exc:  # `ENV A=1 B`: a word without its `=`
        raise Unimportable(f"ENV does not parse: {args[:80]} ({exc})") from exc


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
    # the sandbox user the agent runs as (the final USER, mapped: SANDBOX_USERS)
    user: SessionUser = "root"
    owner: str = ""  # the final USER as chown takes it (`operator:`), for folders made for the agent
    ordered: int = 0  # setup steps so far whose order matters (a RUN, a folder WORKDIR makes as a user,
    # a binary file, a link): a COPY after one is staged and put in place at its turn
    carried: int = 0  # entries COPY/ADD carried (files and links)
    accounts: Accounts = field(default_factory=lambda: Accounts())  # users/groups its RUN lines create

    @property
    def start_dir(self) -> str:
        """Where the agent starts: the WORKDIR (or Harbor's workdir); without one an unprivileged user starts in
        its home, root in ``/app`` (the harnesses' default: their test scripts refuse to run in ``/``)."""
        if self.workdir_set or self.user == "root":
            return self.workdir
        return SANDBOX_USERS[self.user].home


@dataclass
class Accounts:
    """Users and groups the Dockerfile's RUN lines create, by name, with the uid/gid they give (or "")."""

    users: dict[str, str] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)

    def read(self, script: str) -> None:
        for cmd in shell_commands(script):
            texts = [w.text for w in cmd.words]
            p = program_index(texts)
            prog = posixpath.basename(texts[p]) if p < len(texts) else ""
            if prog not in ACCOUNT_TOOLS:
                continue
            pos, opts = account_command(prog, texts[p + 1 :])
            if len(pos) != 1:
                continue
            if prog in ("useradd", "adduser"):
                self.users[pos[0]] = opts.get("uid", "")
            else:
                self.groups[pos[0]] = opts.get("gid", "")


def owner_spec(user_spec: str) -> str:
    """A USER value as ``chown`` takes it: ``name`` alone is ``name:`` (its login group, as docker does)."""
    return user_spec if ":" in user_spec or user_spec.isdigit() else f"{user_spec}:"


def sandbox_user(
    user_spec: str, accounts: Accounts | None = None, said: str = "the Dockerfile's USER"
) -> SessionUser:
    """The sandbox user (``SANDBOX_USERS``: root, operator, the service account app) for a final Dockerfile
    ``USER`` (``name``, ``uid``, ``name:group``...); Unimportable, naming the users the sandbox offers, when it
    offers none that is it."""
    accounts = accounts or Accounts()
    name, _, group = (part.strip() for part in user_spec.partition(":"))
    user = name
    if name.isdigit():
        # a uid is the user the Dockerfile created with it, or a sandbox account with that uid that the Dockerfile
        # created without giving one (uid 1000: operator; 999: app, what `useradd --system app` gets)
        named = [n for n, uid in accounts.users.items() if uid == name] or [
            n for n, a in SANDBOX_USERS.items() if str(a.uid) == name and accounts.users.get(n) == ""
        ]
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
    groups = {known.group, str(known.gid)} | {
        gid for g, gid in accounts.groups.items() if g == known.group and gid
    }
    if known.uid and accounts.users.get(user) == str(known.uid):
        groups.add(str(known.uid))
    if group and group not in groups:
        raise Unimportable(
            f"the agent runs as {name} in the group {group!r} ({said} {user_spec}): the sandbox's "
            f"{user} has the group {known.group} (gid {known.gid}), and the sandbox offers only "
            f"{OFFERED_USERS}"
        )
    # both branches above refused every name that is not a key of SANDBOX_USERS
    return cast(SessionUser, user)


def mkdir_owned(path: str, owner: str) -> str:
    """Shell that creates the missing folders of ``path`` owned by ``owner`` (what BuildKit's WORKDIR does under a
    USER); folders that exist keep their owner."""
    steps, current = [], ""
    for part in (p for p in path.split("/") if p):
        current += "/" + part
        q = shlex.quote(current)
        steps.append(f"{{ [ -d {q} ] || {{ mkdir {q} && chown {shlex.quote(owner)} {q}; }}; }}")
    return " && ".join(steps) or "true"


def dockerignore_matcher(context: Path) -> PatternMatcher | None:
    """The build context's ``.dockerignore`` as docker's own matcher (``docker.utils.build.PatternMatcher``, what
    docker-py sends a build context with: ``*`` stays within a folder, ``**`` crosses folders, ``!`` makes an
    exception, the last matching line wins, ``.dockerignore`` itself is never left out); None without one. The
    lines are read as docker-py reads them: stripped, blank lines and ``#`` comments dropped; an unreadable file
    excludes nothing."""
    path = context / ".dockerignore"
    if not path.is_file():
        return None
    try:
        text = read_text(path, ".dockerignore", 64 << 10)
    except Unimportable:
        return None
    patterns = [line.strip() for line in text.splitlines()]
    patterns = [p for p in patterns if p and not p.startswith("#")]
    return PatternMatcher(patterns) if patterns else None


def _ignored(rel: str, matcher: PatternMatcher | None, exclude_top: frozenset[str]) -> bool:
    """Whether ``rel`` (relative to the build context) is out of it: one of the harness's top-level files, or
    left out by the ``.dockerignore``."""
    if rel.split("/", 1)[0] in exclude_top:
        return True
    return matcher is not None and bool(matcher.matches(rel))


def translate_dockerfile(
    text: str, context: Path, budget: Budget, exclude_top: frozenset[str] = frozenset()
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
    matcher = dockerignore_matcher(context)
    real_context = context.resolve()
    stage_n = 0

    for ins in instructions:
        kw = ins.keyword
        if kw == "FROM":
            words = _split_args(substitute(ins.args, variables))
            problem, envx.python_base = base_image_problem(words[0] if words else "")
            if problem:
                raise Unimportable(problem)
        elif kw == "ARG":
            for word in _split_args(ins.args):
                name, _, default = word.partition("=")
                if name not in variables or default:
                    variables[name] = substitute(default, variables)
                    exported[name] = variables[name]
        elif kw == "ENV":
            for name, value in env_pairs(ins.args):
                if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
                    raise Unimportable(f"ENV name {name!r} is not a shell variable")
                value = substitute(value, variables)
                variables[name] = exported[name] = envx.env[name] = value
        elif kw == "WORKDIR":
            path = substitute(_split_args(ins.args)[0] if ins.args else "/", variables)
            envx.workdir = posixpath.normpath(posixpath.join(envx.workdir if envx.workdir_set else "/", path))
            envx.workdir_set = True
            known_dirs.add(envx.workdir)
            if not _is_root(user) and envx.workdir != "/":
                # BuildKit makes the missing folders as the current USER: the agent can write to its own workdir
                envx.setup.append(mkdir_owned(envx.workdir, owner_spec(user)))
                envx.ordered += 1
        elif kw == "USER":
            user = substitute(ins.args.strip(), variables)
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

            def copied_text(path: str, cwd: str = cwd) -> str | None:
                """A file an earlier COPY put in the image, by the path as the RUN line writes it."""
                return envx.copied.get(posixpath.normpath(posixpath.join(cwd, substitute(path, variables))))

            rw = rewrite_script(command, IMAGE, resolve=copied_text, accounts=True)
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
                matcher,
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
    envx.owner = owner_spec(user) if envx.user != "root" else ""
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
            delim = heredoc_delim(body)
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
    matcher: PatternMatcher | None,
    exclude_top: frozenset[str],
    envx: Environment,
    variables: dict[str, str],
    known_dirs: set[str],
    budget: Budget,
    stage_n: int,
) -> int:
    """One COPY/ADD into ``envx`` (files, plus setup for staging, binaries, links, modes, owners); returns the
    stage counter."""
    if ins.heredocs:
        words = _split_args(re.sub(r"<<-?[\"']?[A-Za-z0-9_]+[\"']?", "", ins.args))
        if len(words) != 1 or len(ins.heredocs) != 1:
            raise Unimportable(f"{kw} with heredocs to {len(words)} destinations is not supported")
        dest = _dest_path(substitute(words[0], variables), envx)
        entries = [_Entry(dest, ins.heredocs[0][1].encode())]
        dirs: list[str] = []
    else:
        words = [substitute(w, variables) for w in _split_args(ins.args)]
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
                    for f in walk_files(m, f"{kw} {src}", links=True):
                        rel = f.relative_to(context).as_posix()
                        if _ignored(rel, matcher, exclude_top):
                            continue
                        target = posixpath.join(target_root, f.relative_to(m).as_posix())
                        if (
                            f.is_symlink()
                        ):  # a link inside a copied folder stays a link, whatever it points at
                            entries.append(_Entry(target, link=os.readlink(f)))
                        else:
                            entries.append(
                                _Entry(
                                    target, read_bytes(f, f"{kw} source {rel}"), executable=is_executable(f)
                                )
                            )
                else:
                    if _ignored(rel_top, matcher, exclude_top & TB1_SECRETS):
                        if is_glob:  # a pattern matches what the context holds: docker skips it too
                            continue
                        raise Unimportable(
                            f"{kw} source {src!r} is excluded from the build context "
                            "(.dockerignore, or the harness's tests/solution)"
                        )
                    data = read_bytes(m, f"{kw} source {rel_top}")
                    if kw == "ADD" and (archive := tar_archive(data)) is not None:
                        if archive[0] > MAX_UNPACKED_BYTES:
                            raise Unimportable(f"ADD {src} unpacks more than {MAX_UNPACKED_BYTES} bytes")
                        entries.append(_Entry(dest, data, archive=archive[1]))  # docker unpacks it into dest
                        continue
                    target = posixpath.join(dest, m.name) if dest_is_dir else dest
                    # without a trailing slash the destination is a file, unless it already is a folder
                    alt = None if dest_is_dir else posixpath.join(dest, m.name)
                    entries.append(_Entry(target, data, executable=is_executable(m), alt=alt))
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
            file_mode = mode or ("0755" if entry.executable else "0644")

            def decode_to(dst: str, file_mode: str = file_mode, staged: str = staged) -> str:
                return f"base64 -d {staged} > {dst} && chmod {file_mode} {dst}"

            put(entry, decode_to)
            continue
        budget.take(len(entry.data), what)
        envx.copied[entry.target] = content
        seed_mode_exec = content.startswith("#!")
        file_mode = mode or ("0755" if entry.executable else "0644")
        if stage:
            stage_n += 1
            staged = f"{STAGE_DIR}/{stage_n}"
            envx.files[staged] = content
            parent_of(entry.target)

            def move_to(dst: str, file_mode: str = file_mode, staged: str = staged) -> str:
                return f"mv -f {staged} {dst} && chmod {file_mode} {dst}"

            put(entry, move_to)
        else:
            envx.files[entry.target] = content
            if mode or entry.executable != seed_mode_exec:
                commands.append(f"chmod {file_mode} {shlex.quote(entry.target)}")
    if "chown" in ins.flags:
        owner = substitute(ins.flags["chown"], variables)
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
