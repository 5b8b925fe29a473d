"""The ONE table of command prefixes: wrapper programs that run another command, and how each reads its own words.

``sudo -u bob rm x``, ``timeout 5 kill -9 1``, ``nice -n 5 make``, ``env -u X VAR=1 cmd``: what runs is the last
command, and everything that judges a line (the guardrails' rules, the GRPO reward's hacking check, the factory
catalog's command+flag counts, the failure classifier's path and flag reading) must see the same one, or a wrapper
known to one reader and not another turns a blocked command into an unnoticed one (``timeout 5 kill -9 1`` was
reward hacking to the command rules but not to the GRPO reward while each kept its own table).

Each wrapper says which of its options take the next word as their value (``sudo -u bob``), how many operands it
reads before the command (``timeout``'s duration, ``chroot``'s new root), with which options it only looks a name up and runs nothing (``command -v ls``), and, for the one
program with two forms, with which option it wraps at all (``runuser -u bob cmd``; ``runuser bob -c '...'`` is
su-style: a shell runs the ``-c`` string, which the guardrails' ``su``/``runuser`` rule reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from bashgym_assets.shell.parser import Command, Word, is_assignment


@dataclass(frozen=True)
class Wrapper:
    """How one wrapper program reads the words between its name and the command it runs."""

    takes_value: frozenset[str] = (
        frozenset()
    )  # options whose value is the next word (``-u`` of ``sudo -u bob``)
    operands: int = 0  # words after its options and before the command (``timeout 5``: the duration)
    lookup_options: frozenset[str] = frozenset()  # with one of these it runs nothing (``command -v ls``)
    wraps_only_with: frozenset[str] = frozenset()  # when set, it wraps only if one of these options is given


def _wrapper(
    takes_value: Iterable[str] = (),
    operands: int = 0,
    lookup_options: Iterable[str] = (),
    wraps_only_with: Iterable[str] = (),
) -> Wrapper:
    return Wrapper(frozenset(takes_value), operands, frozenset(lookup_options), frozenset(wraps_only_with))


_SUDO_VALUES = (
    "-u",
    "-g",
    "-C",
    "-h",
    "-p",
    "-r",
    "-t",
    "-U",
    "-D",
    "-R",
    "-T",
    "--user",
    "--group",
    "--host",
    "--prompt",
    "--role",
    "--type",
    "--other-user",
    "--chdir",
    "--chroot",
    "--close-from",
)
_XARGS_VALUES = (
    "-a",
    "-d",
    "-E",
    "-I",
    "-L",
    "-n",
    "-P",
    "-s",
    "--arg-file",
    "--delimiter",
    "--eof",
    "--replace",
    "--max-lines",
    "--max-args",
    "--max-procs",
    "--max-chars",
    "--process-slot-var",
)
_RUNUSER_VALUES = (
    "-u",
    "-g",
    "-G",
    "-s",
    "-c",
    "-w",
    "--user",
    "--group",
    "--supp-group",
    "--shell",
    "--command",
    "--whitelist-environment",
)

#: wrapper program -> how it reads its words (the union of the tables guardrails, the GRPO reward, the factory
#: catalog and the failure classifier each kept before).
WRAPPERS: Mapping[str, Wrapper] = MappingProxyType(
    {
        "sudo": _wrapper(_SUDO_VALUES),
        "doas": _wrapper(("-u", "-C")),
        "runuser": _wrapper(_RUNUSER_VALUES, wraps_only_with=("-u", "--user")),
        "env": _wrapper(("-u", "--unset", "-C", "--chdir", "-S", "--split-string")),
        "nice": _wrapper(("-n", "--adjustment")),
        "ionice": _wrapper(("-c", "-n", "--class", "--classdata")),
        "timeout": _wrapper(("-s", "--signal", "-k", "--kill-after"), operands=1),
        "exec": _wrapper(("-a",)),
        "stdbuf": _wrapper(("-i", "-o", "-e", "--input", "--output", "--error")),
        "setsid": _wrapper(),
        "nohup": _wrapper(),
        "builtin": _wrapper(),
        "command": _wrapper(lookup_options=("-v", "-V")),
        "chronic": _wrapper(),
        "unbuffer": _wrapper(),
        "busybox": _wrapper(),
        "time": _wrapper(("-f", "-o", "--format", "--output")),
        "xargs": _wrapper(_XARGS_VALUES),
        "chroot": _wrapper(operands=1),
        "torsocks": _wrapper(),
        "proxychains": _wrapper(("-f",)),
        "proxychains4": _wrapper(("-f",)),
    }
)

#: Reserved words that may stand before a simple command's name (``if``, ``!``, ``time -p``, ``coproc``).
LEAD_RESERVED = frozenset(
    {"!", "do", "then", "else", "elif", "if", "while", "until", "time", "{", "}", "coproc"}
)


def base(name: str) -> str:
    """A program's name without its folder (``/usr/bin/sudo`` is ``sudo``)."""
    return name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class WrapperCall:
    """How one wrapper invocation reads: its options as written, and where the command it runs begins."""

    options: tuple[str, ...]  # option words, their values left out (``sudo -u bob`` -> ``("-u",)``)
    start: int | None  # index, in the words after the wrapper, of the command it runs; None: it runs none


def read_wrapper(name: str, args: Sequence[str]) -> WrapperCall | None:
    """``name`` read as a wrapper over ``args`` (the words after it); None when it is no wrapper here (not in the
    table, or ``runuser`` without ``-u``): then it is the command. ``start == len(args)`` when it wraps nothing
    (``env``, ``nohup`` alone: the wrapper itself runs)."""
    spec = WRAPPERS.get(base(name))
    if spec is None:
        return None
    options: list[str] = []
    i, n = 0, len(args)
    while i < n:
        v = args[i]
        if v == "--":
            i += 1
            break
        if not v.startswith("-") or v == "-":
            break
        options.append(v)
        if v in spec.takes_value:
            i += 1  # its value
        i += 1
    keys = {o.split("=", 1)[0] if o.startswith("--") else o[:2] for o in options}
    if spec.wraps_only_with and not keys & spec.wraps_only_with:
        return None
    if keys & spec.lookup_options:
        return WrapperCall(tuple(options), None)
    return WrapperCall(tuple(options), min(n, i + spec.operands))


# ---- an invocation: a simple command with its prefixes unwrapped -------------------------------------------------
@dataclass
class Inv:
    """The command that actually runs in a simple command, with the wrappers and assignments in front of it."""

    name: str
    args: list[Word]
    cmd: Command
    wrappers: list[str] = field(default_factory=list)
    assigns: list[Word] = field(default_factory=list)

    def positional(self, with_values: Iterable[str] = ()) -> list[Word]:
        """Arguments that are not options (``--`` ends options; options in ``with_values`` take the next word)."""
        takes = set(with_values)
        out: list[Word] = []
        it = iter(self.args)
        done = False
        for w in it:
            v = w.value
            if done or v == "-" or not v.startswith("-") or w.procsub:
                out.append(w)
            elif v == "--":
                done = True
            elif v in takes:
                next(it, None)
        return out

    def has_flag(self, short: str = "", long: Iterable[str] = ()) -> bool:
        longs = set(long)
        for w in self.args:
            v = w.value
            if v == "--":
                return False
            if v.startswith("--"):
                if v.split("=", 1)[0] in longs:
                    return True
            elif v.startswith("-") and len(v) > 1 and short and any(c in v[1:] for c in short):
                return True
        return False


MAX_WRAPPERS = 12  # a longer chain of wrappers is not unwrapped further (the rest is read as the command)


def unwrap(cmd: Command) -> Inv | None:
    """The command that actually runs: reserved words, assignments and wrapper programs skipped; None when the
    line only looks a name up (``command -v rm``). A wrapper with no command after it (``env``, ``nohup``) is
    itself what runs; a line of assignments only has an empty name."""
    words = cmd.words
    i, n = 0, len(words)
    while i < n and not words[i].quoted and words[i].value in LEAD_RESERVED:
        i += 1
        if words[i - 1].value == "time" and i < n and words[i].value == "-p":
            i += 1
    assigns: list[Word] = []
    wrappers: list[str] = []
    last_wrapper = -1
    for _ in range(MAX_WRAPPERS):
        while i < n and is_assignment(words[i]):
            assigns.append(words[i])
            i += 1
        if i >= n:
            break
        call = read_wrapper(words[i].value, [w.value for w in words[i + 1 :]])
        if call is None:
            break
        if call.start is None:
            return None  # only looks the name up
        wrappers.append(base(words[i].value))
        last_wrapper = i
        i += 1 + call.start
    if i >= n:
        if (
            wrappers and last_wrapper >= 0
        ):  # ``env``, ``time``, ``nohup`` with no command: the wrapper itself runs
            return Inv(
                name=wrappers[-1],
                args=words[last_wrapper + 1 :],
                cmd=cmd,
                wrappers=wrappers[:-1],
                assigns=assigns,
            )
        return Inv(name="", args=[], cmd=cmd, wrappers=wrappers, assigns=assigns)
    return Inv(name=base(words[i].value), args=words[i + 1 :], cmd=cmd, wrappers=wrappers, assigns=assigns)
