"""Why a failed episode failed: a detail class read from its transcript and its scenario, beyond ``wrong_result``.

``metrics.classify`` names WHAT went wrong first (the model wrote prose, looped, never exited, or exited with a
wrong result). For a small model that has the form, almost every failure is ``wrong_result``, which says nothing
about the next change to try. This module reads the transcript (every command the model typed, parsed with the
shell engine's parser, the observations the shell answered, the working directory as the model's ``cd``s moved
it) against the scenario (its instruction, the user and working directory the prompt stated, the reference
solution, the files and set-up it writes) and names WHY, one class per failed episode.

Detail classes, in order of precedence (the first that applies names the episode; every one that applies is kept
as a tag, so the second opinion is not lost):

1. ``prose``: a reply was sentences, markdown, babble or empty instead of a command (failure class prose/babble).
2. ``prompt_echo``: it typed the prompt banner (failure class prompt_echo).
3. ``repeated_command``: the same command ``LOOP_REPEATS`` times or more (failure class loop, or not in a row).
4. ``forgot_exit``: the check passed, but it never typed ``exit`` (the result rules below do not apply).
5. ``wrong_path``: it ignored the working directory or used a wrong path: a name of the scenario typed in the wrong
   place (``cd ~/dir1`` when ``dir1`` is ``/app/dir1``), or a path the shell said does not exist that is nowhere on
   the scenario's map.
6. ``wrong_output_file``: the instruction or the reference names an output file that it never wrote, though it
   wrote another file, named that file or ran the reference's producing command (``bash -l answer.txt`` for
   "write the output to answer.txt"; ``sort -u names.txt`` printed to the terminal, then ``exit``). Before
   ``premature_exit``: such a model was doing the work and missed where it goes.
7. ``premature_exit``: it typed ``exit`` before any command that could change the state (only looked around).
8. ``value_not_copied``: a value of the instruction (number, file name, path, quoted string) that the reference
   uses and no command of the model does.
9. ``wrong_flag``: the reference's command name with other flags (``wc -w`` for ``wc -l``), never the right ones.
10. ``other``: failed for none of these reasons (a wrong result the rules cannot explain).

Clean episodes and infrastructure or operator failures (``setup_failed``, ``sandbox_error``, ``operator_error``)
get no detail class (""). The stored form (``EvalEpisode.failure_detail``) is the fired classes joined by commas,
primary first (``wrong_path,premature_exit``); ``detail_of`` reads the primary back. Deterministic: no model, no
sandbox, no clock; the scenario is optional (without it the user, working directory and instruction come from the
transcript's first two messages, and the reference-based rules see no reference).
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, Field

from bashgym_assets import shell
from bashgym_assets.evaluation.metrics import (
    FAILURE_BABBLE,
    FAILURE_LOOP,
    FAILURE_PROMPT_ECHO,
    FAILURE_PROSE,
    INFRASTRUCTURE,
    LOOP_REPEATS,
    OPERATOR_ERROR,
    PROMPT_ECHO,
    EvalEpisode,
)
from bashgym_assets.rollout.transcript import BABBLE, COMMAND, EMPTY, FENCED, PROSE, Message
from bashgym_assets.sandbox.layout import SESSION_ACCOUNTS

DETAIL_PROSE = "prose"
DETAIL_PROMPT_ECHO = "prompt_echo"
DETAIL_REPEATED = "repeated_command"
DETAIL_FORGOT_EXIT = "forgot_exit"
DETAIL_WRONG_PATH = "wrong_path"
DETAIL_PREMATURE_EXIT = "premature_exit"
DETAIL_WRONG_OUTPUT = "wrong_output_file"
DETAIL_VALUE = "value_not_copied"
DETAIL_WRONG_FLAG = "wrong_flag"
DETAIL_OTHER = "other"
DETAIL_CLASSES = (  # the precedence: the first that applies is the episode's class
    DETAIL_PROSE,
    DETAIL_PROMPT_ECHO,
    DETAIL_REPEATED,
    DETAIL_FORGOT_EXIT,
    DETAIL_WRONG_PATH,
    DETAIL_WRONG_OUTPUT,
    DETAIL_PREMATURE_EXIT,
    DETAIL_VALUE,
    DETAIL_WRONG_FLAG,
    DETAIL_OTHER,
)
NOT_JUDGED = (*INFRASTRUCTURE, OPERATOR_ERROR)  # not the model's doing: no detail class
UNUSABLE_KINDS = (PROSE, BABBLE, FENCED, EMPTY)
# Replies whose text the shell ran as the model's work: commands, and commands inside a code fence (the driver runs
# the fenced text). Prose, babble and a copied prompt run too, but say nothing about paths, values or flags.
WORK_KINDS = (COMMAND, FENCED)

# Commands that only look: an episode whose every command is one of these changed nothing. Anything else (a script,
# an unknown program) may change the state, so ``premature_exit`` is said only when it is sure.
READ_ONLY = frozenset(
    """ls ll dir cat tac head tail less more wc grep egrep fgrep rg zcat zgrep zless bzcat xzcat find locate stat
    file du df ps pstree top free uptime w who whoami id groups getent which whereis type command hash pwd cd pushd
    popd echo printf date cal env printenv set declare true false test [ [[ sort uniq cut tr awk gawk mawk sed
    tree diff cmp comm join paste column nl od xxd hexdump strings md5sum sha1sum sha256sum sha512sum cksum
    basename dirname realpath readlink uname hostname lsof seq expr bc jq yq fold fmt rev numfmt history man help
    info apropos whatis lsblk mount findmnt ip ss netstat ping dig host nslookup tty clear sleep wait alias
    unalias jobs""".split()  # noqa: SIM905 - a word list reads better as text
)
GIT_READ_ONLY = frozenset(
    {"status", "log", "diff", "show", "branch", "remote", "config", "rev-parse", "ls-files"}
)
PATTERN_COMMANDS = frozenset(
    {"sed", "awk", "gawk", "mawk", "grep", "egrep", "fgrep", "rg", "perl", "tr", "expr"}
)
DATA_COMMANDS = frozenset({"echo", "printf", "true", "false", ":", "test", "[", "[["})
FIND_PATTERN_FLAGS = frozenset(
    {"-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-wholename", "-printf"}
)
FLAGLESS = frozenset({"cd", "exit", "logout", "pwd", "true", "false", ":"})
OUTPUT_FLAGS = frozenset({"--output", "--output-file"})
# ``-o FILE`` / ``-O FILE`` name the output only for these; elsewhere ``-o`` is find's "or", grep's "only matching",
# ps's format, mount's options (a reference ``find -name a -o -name b`` wrote no file called ``-name``)
SHORT_OUTPUT_FLAGS = {
    "-o": frozenset(
        [
            "sort",
            "curl",
            "gcc",
            "cc",
            "g++",
            "c++",
            "clang",
            "clang++",
            "ld",
            "go",
            "rustc",
            "pandoc",
            "openssl",
            "shfmt",
            "gpg",
            "pg_dump",
        ]
    ),
    "-O": frozenset({"wget"}),
}
DEV_TARGETS = ("/dev/",)
WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
MISSING_RE = re.compile(r"No such file or directory|cannot access|not a directory|cannot stat|can't cd", re.I)
_ORIENTATION_RE = re.compile(r"logged in to \S+ as (\S+)\. Working directory: (\S+?)\.?\s*$", re.M)
_FENCE_RE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)
_QUOTED_RE = re.compile(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"|`([^`\n]{1,80})`")
_PATH_RE = re.compile(r"(?<![\w/.~-])(~?/[\w.@%+-]+(?:/[\w.@%+-]*)*|~)(?![\w/])")
_FILE_RE = re.compile(r"(?<![\w/.-])([\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,5})(?![\w/-])")
_NUMBER_RE = re.compile(r"(?<![\w.$-])(\d+(?:\.\d+)?[KMGTkmgt]?)(?![\w]|\.\d)")  # 3, 0.5, 750, 5M
_OUTPUT_PHRASE_RE = re.compile(
    r"\b(?:write|writes|written|save|saved|store|stored|put|redirect|append|output|record|dump|export)\b"
    r"(?:[^.;\n]|\.(?=\w)){0,80}?\b(?:to|into|as)\s+(?:(?:a|the|new)\s+)?(?:file\s+)?(?:called\s+|named\s+)?[`'\"]?"
    r"(~?/?[\w./-]*\w\.[A-Za-z][A-Za-z0-9]{0,5})\b",
    re.I,
)
_EXTENSION_RE = re.compile(r"(?<![\w/.~*-])(\.[A-Za-z][A-Za-z0-9]{0,7})\s+files?\b")  # "the .pem files"
_SYMBOLIC_MODE_RE = re.compile(r"^[ugoa]*=[rwx]*(?:,[ugoa]*=[rwx]*)*$")
_PATHY_RE = re.compile(r"^(?:[\w.@%+-]+/)+[\w.@%+-]*$")
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m"})
_GLOB = re.compile(r"[*?\[]")


class ScenarioFacts(BaseModel):
    """What the classifier reads of a scenario: the instruction, who and where the prompt said the model is, and
    the reference solution and set-up (the map of the paths that matter)."""

    task: str = ""
    user: str = "operator"
    start_dir: str = "/home/operator"
    reference: list[str] = Field(default_factory=list)
    setup: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)

    @property
    def home(self) -> str:
        """The user's home: a session user's own (the service account's is /srv/app), else a login's."""
        account = SESSION_ACCOUNTS.get(self.user)
        return account.home if account else f"/home/{self.user}"


class _BundleLike(Protocol):
    task: str
    reference: list[str]
    setup: list[str]
    files: dict[str, str]
    announcement: str | None

    @property  # read-only: a bundle's user is one of a few names (a Literal), which a str attribute would widen
    def user(self) -> str: ...

    @property
    def start_dir(self) -> str: ...


def facts_of_bundle(bundle: _BundleLike) -> ScenarioFacts:
    """The facts of a ``ScenarioBundle`` (what the model was shown is the announcement in provider mode)."""
    return ScenarioFacts(
        task=bundle.announcement or bundle.task,
        user=bundle.user,
        start_dir=bundle.start_dir,
        reference=list(bundle.reference),
        setup=list(bundle.setup),
        files=sorted(bundle.files),
    )


def facts_of_messages(messages: Sequence[Message]) -> ScenarioFacts:
    """The facts a transcript alone states: the orientation's user and working directory, the task; no
    reference (old rows, or an episode whose scenario is gone)."""
    user, start = "operator", "/home/operator"
    if messages and (m := _ORIENTATION_RE.search(messages[0].content)):
        user, start = m.group(1), m.group(2)
    task = messages[1].content if len(messages) > 1 and messages[1].role == "user" else ""
    return ScenarioFacts(task=task, user=user, start_dir=start)


class Step(BaseModel):
    """One reply of the model: what it was understood as, the text run, what the shell answered, and the working
    directory it ran in."""

    kind: str
    command: str
    observation: str = ""
    cwd: str = "/"


class Diagnosis(BaseModel):
    """The detail class of one episode, every class that applied (primary first) and a short why for each."""

    detail: str = ""
    tags: list[str] = Field(default_factory=list)
    evidence: dict[str, str] = Field(default_factory=dict)

    @property
    def stored(self) -> str:
        """The form kept in ``EvalEpisode.failure_detail``."""
        return ",".join(self.tags)


# ---- paths ------------------------------------------------------------------------------------------------------
def resolve(word: str, cwd: str, home: str) -> str | None:
    """Where a literal path word points, or None when it cannot be known (``~user``, empty)."""
    if not word:
        return None
    if word == "~" or word.startswith("~/"):
        word = home + word[1:]
    elif word.startswith("~"):
        return None
    return posixpath.normpath(word if word.startswith("/") else posixpath.join(cwd, word))


def _related(a: str, b: str) -> bool:
    """One path is the other, or holds it."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


Word = shell.Word


def _words(cmd: shell.Command) -> list[Word]:
    """The command's words from its name on: assignments and wrappers with their options, option values and
    operands skipped (the shell engine's one prefix table: ``sudo -u bob rm x`` is ``rm x``, ``timeout 5 cp a b``
    is ``cp a b``); a wrapper that runs nothing is the command itself (``command -v ls``, ``env``)."""
    words = list(cmd.words)
    while words:
        while words and shell.is_assignment(words[0]):
            words.pop(0)
        if not words or not words[0].literal:
            return words
        call = shell.read_wrapper(words[0].value, [w.value for w in words[1:]])
        if call is None or call.start is None or call.start >= len(words) - 1:
            return words
        words = words[1 + call.start :]
    return words


def command_name(cmd: shell.Command) -> str:
    words = _words(cmd)
    return posixpath.basename(words[0].value) if words and words[0].literal else ""


def _path_words(cmd: shell.Command) -> list[Word]:
    """The arguments that name files: not flags, not patterns (``sed 's/a/b/'``, ``find -name x``), not data
    (``echo a/b``); with the redirection targets."""
    words = _words(cmd)
    name = command_name(cmd)
    out: list[Word] = [
        r.target for r in cmd.redirects if r.target is not None and r.op not in ("<<", "<<-", "<<<")
    ]
    if not words or name in DATA_COMMANDS:
        return out
    if "/" in words[0].value and words[0].literal:  # ./script.sh, /usr/bin/x
        out.append(words[0])
    skip_next = False
    first_arg = True
    for w in words[1:]:
        if skip_next:
            skip_next = False
            continue
        if not w.literal or _GLOB.search(w.value):
            continue
        if w.value.startswith("-") and len(w.value) > 1:
            skip_next = (
                name == "find"
                and w.value in FIND_PATTERN_FLAGS
                or (name in PATTERN_COMMANDS and w.value == "-e")
            )
            continue
        if name in PATTERN_COMMANDS and first_arg and not w.value.startswith(("/", "~", "./", "../")):
            first_arg = False  # the pattern or program
            continue
        first_arg = False
        out.append(w)
    return out


def _is_pathy(value: str, known_names: set[str]) -> bool:
    return (
        value.startswith(("/", "~", "./", "../"))
        or bool(_PATHY_RE.match(value))
        or posixpath.basename(value.rstrip("/")) in known_names
    )


@dataclass(frozen=True)
class _Line:
    """One parsed simple command with the directory it ran in and the reply it came from."""

    cmd: shell.Command
    cwd: str
    step: int


def _walk(commands: Iterable[tuple[int, str, str]], start: str, home: str) -> tuple[list[_Line], list[str]]:
    """Every simple command of ``(step, text, observation)`` with the directory it ran in: ``cd`` moves it (unless
    the shell said the ``cd`` failed). Returns the lines and the directory after each step."""
    cwd, prev = start, start
    lines: list[_Line] = []
    after: list[str] = []
    for step, text, observation in commands:
        cd_failed = bool(
            re.search(r"\bcd: .*(?:No such file|Not a directory|Permission denied)", observation)
        )
        for cmd in shell.parse(text).commands:
            lines.append(_Line(cmd=cmd, cwd=cwd, step=step))
            if command_name(cmd) in ("cd", "pushd") and not cd_failed:
                args = [w for w in _words(cmd)[1:] if not w.value.startswith("-") or w.value == "-"]
                if not args:
                    cwd, prev = home, cwd
                elif args[0].value == "-":
                    cwd, prev = prev, cwd
                elif args[0].literal and (target := resolve(args[0].value, cwd, home)):
                    cwd, prev = target, cwd
        after.append(cwd)
    return lines, after


# ---- the map of a scenario ---------------------------------------------------------------------------------------
def _task_values(task: str) -> dict[str, str]:
    """Values the instruction states, each with its kind: quoted strings, paths, file names, numbers."""
    values: dict[str, str] = {}
    for m in _QUOTED_RE.finditer(task):
        v = next(g for g in m.groups() if g is not None).strip()
        if v:
            values.setdefault(v, "quoted")
    for m in _PATH_RE.finditer(task):
        v = m.group(1).rstrip(".,;:")
        if v not in ("/", "~"):
            values.setdefault(v, "path")
    for m in _FILE_RE.finditer(task):
        v = m.group(1)
        if v.lower() not in _ABBREVIATIONS and not v.replace(".", "").isdigit():
            values.setdefault(v, "file")
    for m in _NUMBER_RE.finditer(task):
        values.setdefault(m.group(1), "number")
    for m in _EXTENSION_RE.finditer(task):
        values.setdefault(m.group(1), "extension")
    return values


def _mentioned(value: str, kind: str, text: str) -> bool:
    if kind == "number":
        return re.search(rf"(?<![\d.]){re.escape(value)}(?![\d]|\.\d)", text) is not None
    return value in text


class _Map(BaseModel):
    """The paths a scenario is about (absolute), their names, and the files its answer goes to."""

    paths: set[str] = Field(default_factory=set)
    outputs: dict[str, str] = Field(
        default_factory=dict
    )  # absolute path -> the reference's command that writes it

    @property
    def names(self) -> set[str]:
        return {posixpath.basename(p) for p in self.paths if p != "/"}

    roots: set[str] = Field(
        default_factory=set
    )  # the start directory and home: on the map only as themselves

    def on_map(self, path: str) -> bool:
        """The path is one of the scenario's, holds one, or lies in one (the start directory and home hold every
        path of the session: a missing ``~/mahale-config`` for ``~/maple-config`` is not on the map)."""
        return path in self.roots or any(_related(path, k) for k in self.paths - self.roots)


def _writes(line: _Line, home: str) -> list[str]:
    """Files a simple command writes (redirections, ``tee``, ``-o``, ``cp``/``mv`` destination, ``touch``,
    ``sed -i``), resolved."""
    cmd, name = line.cmd, command_name(line.cmd)
    targets = [
        r.target.value
        for r in cmd.redirects
        if r.op in WRITE_REDIRECTS and r.target is not None and r.target.literal and r.fd in (None, 1, 2)
    ]
    words = _words(cmd)[1:]
    values = [w.value for w in words if w.literal]
    for i, v in enumerate(values):
        if (v in OUTPUT_FLAGS or name in SHORT_OUTPUT_FLAGS.get(v, ())) and i + 1 < len(values):
            targets.append(values[i + 1])
        elif v.startswith("--output="):
            targets.append(v.split("=", 1)[1])
        elif name == "dd" and v.startswith("of="):
            targets.append(v[3:])
    args = [v for v in values if not v.startswith("-")]
    if name == "tee" or name == "touch":
        targets += args
    elif name in ("cp", "mv", "install", "ln", "rsync") and len(args) >= 2:
        targets.append(args[-1])
    elif name in ("sed", "perl") and any(v.startswith("-i") for v in values) and len(args) >= 2:
        targets += args[1:]
    out = []
    for t in targets:
        p = resolve(t, line.cwd, home)
        if p and not p.startswith(DEV_TARGETS):
            out.append(p)
    return out


def scenario_map(facts: ScenarioFacts) -> _Map:
    """The paths of the instruction, the reference, the set-up and ``files``, resolved from the start directory,
    and the reference's (or the instruction's) output files."""
    home, start = facts.home, facts.start_dir
    paths = {start, *facts.files}
    for v, kind in _task_values(facts.task).items():
        if kind in ("path", "file") and (p := resolve(v, start, home)):
            paths.add(p)
    outputs: dict[str, str] = {}
    for texts in (facts.setup, facts.reference):
        lines, _ = _walk(((i, t, "") for i, t in enumerate(texts)), start, home)
        for line in lines:
            for w in _path_words(line.cmd):
                if p := resolve(w.value, line.cwd, home):
                    paths.add(p)
            if texts is facts.reference:
                for p in _writes(line, home):
                    if command_name(line.cmd) not in ("cp", "mv", "ln", "install", "rsync", "touch"):
                        outputs.setdefault(p, command_name(line.cmd))
    for m in _OUTPUT_PHRASE_RE.finditer(facts.task):
        if (p := resolve(m.group(1), start, home)) and m.group(1).lower() not in _ABBREVIATIONS:
            outputs.setdefault(p, "")
            paths.add(p)
    return _Map(paths=paths, outputs=outputs, roots={start, home})


# ---- the transcript ---------------------------------------------------------------------------------------------
def steps_of(episode: EvalEpisode, facts: ScenarioFacts) -> list[Step]:
    """The model's replies, each with its kind (the recorded ``reply_kinds``), the text the shell ran, the
    observation that followed and the working directory it ran in."""
    replies: list[tuple[str, str]] = []
    msgs = episode.messages[2:] if len(episode.messages) >= 2 else []
    for i, m in enumerate(msgs):
        if m.role != "assistant":
            continue
        nxt = msgs[i + 1] if i + 1 < len(msgs) and msgs[i + 1].role == "user" else None
        text = m.content.strip()
        if fenced := _FENCE_RE.match(text):
            text = fenced.group(1).strip()
        replies.append((text, nxt.content if nxt else ""))
    kinds = episode.reply_kinds.split(",") if episode.reply_kinds else []
    if len(kinds) != len(replies):  # an old row: read each reply again
        from bashgym_assets.rollout.transcript import parse_reply

        kinds = [parse_reply(text).kind for text, _ in replies]
    runnable = [
        (i, t, o) for i, ((t, o), k) in enumerate(zip(replies, kinds, strict=True)) if k in WORK_KINDS
    ]
    cwd_after = dict(
        zip([i for i, _, _ in runnable], _walk(runnable, facts.start_dir, facts.home)[1], strict=True)
    )
    steps, cwd = [], facts.start_dir
    for i, ((text, obs), kind) in enumerate(zip(replies, kinds, strict=True)):
        steps.append(Step(kind=kind, command=text, observation=obs, cwd=cwd))
        cwd = cwd_after.get(i, cwd)
    return steps


def state_changing(cmd: shell.Command) -> bool:
    """Whether a simple command may change the state: a write redirection, or a program not known to only look
    (``find -delete``, ``sed -i``, ``sort -o`` and ``git commit`` do change it)."""
    if any(
        r.op in WRITE_REDIRECTS
        and not (r.target is not None and r.target.value.startswith(DEV_TARGETS))
        and not (r.op == "<>" and r.fd in (None, 0))
        for r in cmd.redirects
    ):
        return True
    words = _words(cmd)
    if not words:
        return False
    name = command_name(cmd)
    values = [w.value for w in words[1:]]
    if name == "find":
        return any(v in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fls") for v in values)
    if name in ("sed", "perl"):
        return any(v.startswith("-i") or v == "--in-place" for v in values)
    if name == "sort":
        return any(v == "-o" or v.startswith("--output") for v in values)
    if name == "git":
        sub = next((v for v in values if not v.startswith("-")), "")
        return sub not in GIT_READ_ONLY
    if name == "xargs":
        rest = [v for v in values if not v.startswith("-")]
        return not rest or posixpath.basename(rest[0]) not in READ_ONLY
    return name not in READ_ONLY


def _flags(cmd: shell.Command) -> frozenset[str]:
    """The flags of a command, with combined short flags split (``-la`` is ``-l -a``), values of long flags
    dropped and ``head -5`` read as ``head -n``."""
    name = command_name(cmd)
    out: set[str] = set()
    for w in _words(cmd)[1:]:
        v = w.value
        if v == "--":
            break
        if not v.startswith("-") or v == "-":
            continue
        if v.startswith("--"):
            out.add(v.split("=", 1)[0])
        elif name in ("head", "tail") and v[1:].isdigit():
            out.add("-n")
        elif name == "find" or len(v) == 2 or not v[1:].isalpha():
            out.add(v if name == "find" or not v[1:2].isalpha() else v[:2])
        else:
            out.update(f"-{c}" for c in v[1:])
    return frozenset(out)


# ---- the rules --------------------------------------------------------------------------------------------------
def _repeated(episode: EvalEpisode, steps: Sequence[Step]) -> str:
    counts = Counter(" ".join(s.command.split()) for s in steps if s.kind in WORK_KINDS)
    top = counts.most_common(1)
    if top and top[0][1] >= LOOP_REPEATS:
        return f"`{top[0][0]}` {top[0][1]} times"
    return "the same commands over and over" if episode.failure_class == FAILURE_LOOP else ""


def _wrong_path(lines: Sequence[_Line], steps: Sequence[Step], smap: _Map, facts: ScenarioFacts) -> str:
    names = smap.names
    written: set[str] = set()
    for line in lines:
        obs = steps[line.step].observation
        for w in _path_words(line.cmd):
            if not _is_pathy(w.value, names):
                continue
            p = resolve(w.value, line.cwd, facts.home)
            if p is None or smap.on_map(p) or p in written:
                continue
            name = posixpath.basename(p)
            right = sorted(k for k in smap.paths if posixpath.basename(k) == name and k != p)
            if right:
                return f"`{w.value}` is {p}; the scenario's {name} is {right[0]} (working directory {facts.start_dir})"
            said = [ln for ln in obs.splitlines() if MISSING_RE.search(ln) and (w.value in ln or p in ln)]
            if said:
                return f"`{w.value}` ({p}) does not exist: {said[0].strip()[:120]}"
        written.update(_writes(line, facts.home))
    return ""


def _premature_exit(episode: EvalEpisode, lines: Sequence[_Line]) -> str:
    if not episode.terminated or any(state_changing(line.cmd) for line in lines):
        return ""
    n = len({line.step for line in lines})
    return f"exited after {n} command(s) that only looked" if n else "exited without a command"


def _wrong_output(lines: Sequence[_Line], steps: Sequence[Step], smap: _Map, facts: ScenarioFacts) -> str:
    if not smap.outputs:
        return ""
    writes = [p for line in lines for p in _writes(line, facts.home)]
    typed = " ".join(s.command for s in steps if s.kind in WORK_KINDS)
    names = {command_name(line.cmd) for line in lines}
    for out, producer in sorted(smap.outputs.items()):
        if out in writes:  # an output is a file: a write under it (``out/x``) is a write elsewhere
            continue
        base = posixpath.basename(out)
        if writes:
            return f"never wrote {out}; wrote {', '.join(sorted(set(writes))[:3])}"
        if re.search(rf"(?<![\w.-]){re.escape(base)}(?![\w-])", typed):
            return f"named {base} but never wrote it"
        if producer and producer in names:
            return f"ran `{producer}` as the reference does but never wrote {out}"
    return ""


def _value_not_copied(lines: Sequence[_Line], steps: Sequence[Step], facts: ScenarioFacts) -> str:
    values = _task_values(facts.task)
    ref = "\n".join(facts.reference)
    if ref:
        values = {v: k for v, k in values.items() if _mentioned(v, k, ref)}
    typed = "\n".join(s.command for s in steps if s.kind in WORK_KINDS)
    modes = {m for line in lines for w in _words(line.cmd)[1:] if (m := octal_mode(w.value))}
    typed += "\n" + " ".join(sorted(modes))  # u=rw,go= is mode 600 typed another way
    resolved = {
        p for line in lines for w in _path_words(line.cmd) if (p := resolve(w.value, line.cwd, facts.home))
    }
    missing = []
    for v, kind in values.items():
        if _mentioned(v, kind, typed):
            continue
        if kind in ("path", "file") and resolve(v, facts.start_dir, facts.home) in resolved:
            continue
        missing.append(v)
    return f"never typed {', '.join(repr(v) for v in missing[:4])}" if missing else ""


def octal_mode(word: str) -> str | None:
    """The octal mode an absolute symbolic mode sets (``u=rw,go=`` is 600, ``a=r`` 444), else None (relative modes
    such as ``go-rwx`` depend on the file's mode before)."""
    if not _SYMBOLIC_MODE_RE.match(word):
        return None
    bits = {"u": 0, "g": 0, "o": 0}
    for clause in word.split(","):
        who, perms = clause.split("=", 1)
        value = sum({"r": 4, "w": 2, "x": 1}[c] for c in set(perms))
        for w in who.replace("a", "ugo") or "ugo":
            bits[w] = value
    return f"{bits['u']}{bits['g']}{bits['o']}"


def _wrong_flag(lines: Sequence[_Line], facts: ScenarioFacts) -> str:
    ref_lines, _ = _walk(((i, t, "") for i, t in enumerate(facts.reference)), facts.start_dir, facts.home)
    wanted: dict[str, list[frozenset[str]]] = {}
    for line in ref_lines:
        name = command_name(line.cmd)
        if name and name not in FLAGLESS and name not in DATA_COMMANDS:
            wanted.setdefault(name, []).append(_flags(line.cmd))
    working = {line.step for line in lines if state_changing(line.cmd)}  # the replies that did something
    for name, flag_sets in sorted(wanted.items()):
        used = [_flags(line.cmd) for line in lines if line.step in working and command_name(line.cmd) == name]
        if used and not any(u in flag_sets for u in used):
            closest = max(flag_sets, key=lambda f: len(f & used[-1]) - len(f ^ used[-1]))
            want = " ".join(sorted(closest)) or "no flags"
            got = " ".join(sorted(used[-1])) or "no flags"
            return f"`{name}` with {got}; the reference uses {want}"
    return ""


def diagnose(episode: EvalEpisode, scenario: ScenarioFacts | _BundleLike | None = None) -> Diagnosis:
    """The detail class of one episode (see the module docstring for the classes and their precedence)."""
    if episode.clean or not episode.failure_class or episode.failure_class in NOT_JUDGED:
        return Diagnosis()
    if scenario is None:
        facts = facts_of_messages(episode.messages)
    elif isinstance(scenario, ScenarioFacts):
        facts = scenario
    else:
        facts = facts_of_bundle(scenario)
    steps = steps_of(episode, facts)
    kinds = [s.kind for s in steps]
    runnable = [(i, s.command, s.observation) for i, s in enumerate(steps) if s.kind in WORK_KINDS]
    lines, _ = _walk(runnable, facts.start_dir, facts.home)
    evidence: dict[str, str] = {}
    if episode.failure_class in (FAILURE_PROSE, FAILURE_BABBLE) or any(k in UNUSABLE_KINDS for k in kinds):
        evidence[DETAIL_PROSE] = (
            ", ".join(sorted({k for k in kinds if k in UNUSABLE_KINDS})) or episode.failure_class
        )
    if episode.failure_class == FAILURE_PROMPT_ECHO or PROMPT_ECHO in kinds:
        evidence[DETAIL_PROMPT_ECHO] = "typed the prompt banner"
    if why := _repeated(episode, steps):
        evidence[DETAIL_REPEATED] = why
    if episode.verified:  # the result was right: what failed is the form, not the work
        if not episode.terminated:
            evidence[DETAIL_FORGOT_EXIT] = "the check passed but it never typed exit"
    else:
        smap = scenario_map(facts)
        for cls, why in (
            (DETAIL_WRONG_PATH, _wrong_path(lines, steps, smap, facts)),
            (DETAIL_PREMATURE_EXIT, _premature_exit(episode, lines)),
            (DETAIL_WRONG_OUTPUT, _wrong_output(lines, steps, smap, facts)),
            (DETAIL_VALUE, _value_not_copied(lines, steps, facts)),
            (DETAIL_WRONG_FLAG, _wrong_flag(lines, facts)),
        ):
            if why:
                evidence[cls] = why
    if not evidence:
        evidence[DETAIL_OTHER] = f"{episode.failure_class}, no pattern found"
    tags = [c for c in DETAIL_CLASSES if c in evidence]
    return Diagnosis(detail=tags[0], tags=tags, evidence={c: evidence[c] for c in tags})


# ---- episodes ---------------------------------------------------------------------------------------------------
def with_detail(episode: EvalEpisode, scenario: ScenarioFacts | _BundleLike | None = None) -> EvalEpisode:
    """The episode with ``failure_detail`` filled in (a copy)."""
    return episode.model_copy(update={"failure_detail": diagnose(episode, scenario).stored})


def annotate(
    episodes: Iterable[EvalEpisode], bundles: Iterable[_BundleLike] | None = None
) -> list[EvalEpisode]:
    """Every episode with its detail class, each read against its scenario (by ``scenario_id``; a scenario not
    given is read from the transcript alone)."""
    by_id = {getattr(b, "id", ""): b for b in bundles or ()}
    return [with_detail(e, by_id.get(e.scenario_id)) for e in episodes]


def detail_of(episode: EvalEpisode) -> str:
    """The primary detail class an episode was stored with ("" when clean, not judged or not yet classified)."""
    return episode.failure_detail.split(",", 1)[0] if episode.failure_detail else ""


def tags_of(episode: EvalEpisode) -> list[str]:
    return [t for t in episode.failure_detail.split(",") if t]


def detail_counts(episodes: Iterable[EvalEpisode]) -> dict[str, int]:
    """Episodes per primary detail class, in the order of precedence (classes with none left out)."""
    counts = Counter(d for e in episodes if (d := detail_of(e)))
    return {c: counts[c] for c in (*DETAIL_CLASSES, *sorted(set(counts) - set(DETAIL_CLASSES))) if counts[c]}
