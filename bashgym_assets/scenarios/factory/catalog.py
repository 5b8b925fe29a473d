"""What the factory made, as numbers: commands and flags the references use, histograms, lake rows.

A *command+flag combination* is a command name with one option word as written (``find -mtime``, ``tar -xzf``,
``sort -k``; ``--opt=value`` counts as ``--opt``), or the bare command when it takes no option. Words are read
with the shell engine's bash parser, so quoted arguments that start with a dash are not options of anything, and
commands inside pipelines, lists, ``$(...)`` and ``-exec ... +`` are counted too.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.family import family_of
from bashgym_assets.scenarios.gate import split_for
from bashgym_assets.shell import is_assignment, parse, read_wrapper

_KEYWORDS = frozenset(
    {
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "for",
        "while",
        "until",
        "do",
        "done",
        "case",
        "esac",
        "in",
        "function",
        "{",
        "}",
        "!",
        "[[",
        "]]",
    }
)
_LOOP_HEADS = frozenset({"for", "select", "case"})  # their words are names and patterns, not a command
_SUBCOMMANDS = frozenset({"git", "docker", "systemctl", "apt-get", "pip"})


def commands_in(text: str, depth: int = 0) -> Iterable[list[str]]:
    """The words of every simple command in ``text``, those in substitutions included (3 levels deep)."""
    parsed = parse(text)
    for cmd in parsed.commands:
        words = [
            w.value
            for w in cmd.words
            if not (
                w.value
                and "=" in w.value.split("/")[0]
                and w.value.split("=")[0].isidentifier()
                and w is cmd.words[0]
            )
        ]
        if words:
            yield words
        if depth < 3:
            for w in cmd.words:
                for sub in w.subs:
                    yield from commands_in(sub.text, depth + 1)


def _flag(word: str) -> str | None:
    """The option a word is, as counted: ``--opt=v`` is ``--opt``, ``-k2`` is ``-k``; None for a non-option."""
    if not word.startswith("-") or len(word) < 2 or word == "--" or word[1:2].isdigit() and len(word) > 2:
        return None
    word = word.split("=", 1)[0]
    if re.fullmatch(r"-[A-Za-z]\d+", word):
        return word[:2]
    return word


def command_units(words: list[str], out: set[str]) -> None:
    """Count one simple command's combinations, following wrappers (the shell engine's prefix table: ``sudo -u
    bob``, ``timeout 5``, ``env X=1``, ``xargs -I {}``) and ``find -exec`` to the command they run."""
    while words:
        name = posixpath.basename(words[0])
        if name in _LOOP_HEADS:
            return
        if not name or name in _KEYWORDS or is_assignment(words[0]):
            words = words[1:]
            continue
        rest = words[1:]
        call = read_wrapper(name, rest)
        if call is not None:  # its options count; what it runs is read next (nothing for ``command -v``)
            flags = {flag for option in call.options if (flag := _flag(option))}
            words = rest[call.start :] if call.start is not None else []
        else:
            if name in _SUBCOMMANDS and rest and not rest[0].startswith("-"):
                name, rest = f"{name} {rest[0]}", rest[1:]
            flags, words = _options_and_exec(name, rest)
        out.update(f"{name} {f}" for f in flags)
        if not flags:
            out.add(name)


def _options_and_exec(name: str, rest: list[str]) -> tuple[set[str], list[str]]:
    """A command's options as counted, and the command its ``find -exec`` runs (empty when none)."""
    flags: set[str] = set()
    for j, word in enumerate(rest):
        if word == "--":
            break
        if name == "find" and word in ("-exec", "-execdir", "-ok") and j + 1 < len(rest):
            flags.add(word)
            return flags, [w for w in rest[j + 1 :] if w not in ("{}", "+", ";", "\\;")]
        flag = _flag(word)
        if flag:
            flags.add(flag)
    return flags, []


def command_flags(reference: Sequence[str]) -> set[str]:
    """The command+flag combinations of a reference solution (see the module doc)."""
    out: set[str] = set()
    for line in reference:
        for words in commands_in(line):
            command_units(words, out)
    return out


def coverage(bundles: Iterable[ScenarioBundle]) -> Counter[str]:
    """How many tasks use each command+flag combination."""
    counts: Counter[str] = Counter()
    for b in bundles:
        counts.update(command_flags(b.reference))
    return counts


def task_rows(bundles: Iterable[ScenarioBundle]) -> list[dict[str, Any]]:
    """Lake rows for ``generated_scenarios``: searchable fields plus the whole bundle."""
    return [
        {
            "scenario_id": b.id,
            "family": family_of(b.id) or "",
            "category": b.category,
            "difficulty": b.difficulty,
            "split": split_for(b.id),
            "user": b.user,
            "task": b.task,
            "commands": json.dumps(sorted(command_flags(b.reference))),
            "source": b.source,
            "bundle_json": b.model_dump_json(exclude_none=True),
        }
        for b in bundles
    ]
