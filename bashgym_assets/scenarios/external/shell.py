"""A small shell lexer: the simple commands of a script with their spans, so the rewrite can find an installer
or a pytest run (also inside ``$( )``, after ``then``/``sudo``) and replace exactly its text. No library does
this: ``shlex`` splits words but loses the spans, the nesting and the command boundaries."""

from __future__ import annotations

import re
from dataclasses import dataclass


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


RESERVED = frozenset(
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


_LEADING_RESERVED = frozenset(
    {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "fi", "done", "}", "esac"}
)
_STRUCTURE = frozenset({"for", "case", "select", "function", "in", "[[", "]]", "coproc"})


def command_start(words: list[str]) -> int:
    """Index of the first word of the command proper (past ``then``, ``do``, ``!``...)."""
    i = 0
    while i < len(words) and words[i] in _LEADING_RESERVED:
        i += 1
    return i


def program_index(words: list[str]) -> int:
    """Index of the program word: past reserved words, assignments, sudo/env/nohup/exec/command and their
    options; ``len(words)`` when the segment is shell structure (``for x in ...``, ``case``) or empty."""
    i = command_start(words)
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
