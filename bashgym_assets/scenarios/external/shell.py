"""The simple commands of a script with their spans, so the rewrite can find an installer or a pytest run (also
inside ``$( )``, after ``then``/``sudo``) and replace exactly its text. The parsing is the shell engine's parser
(``bashgym_assets.shell``); this module only shapes its commands the way the rewrite reads them:
redirections as words where they are written, substitutions' commands as commands of their own."""

from __future__ import annotations

from dataclasses import dataclass

from bashgym_assets.shell import Redirect, is_assignment, parse, read_wrapper
from bashgym_assets.shell import Word as ParsedWord


@dataclass
class Word:
    text: str  # the word with quotes removed (expansions left as written)
    raw: str  # the word as written
    start: int
    end: int


@dataclass
class SimpleCommand:
    words: list[Word]
    nested: bool = False  # inside $( ), backticks or <( )

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


def _redirect_words(text: str, base: int, red: Redirect) -> list[Word]:
    """A redirection as the words it is written as: ``2>&1`` and ``>/dev/null`` one word, ``> out`` two, a
    here-document's ``<< 'EOF'`` one word as written (its body is data, never commands)."""
    start = red.fd_start if red.fd_start >= 0 else red.start
    op_end = red.start + len(red.op)  # red.end is the target's end once the parser has read it
    op = text[start:op_end]
    target = red.target
    if target is None:
        return [Word(op, op, base + start, base + op_end)]
    raw = text[start : target.end]
    if red.op in ("<<", "<<-"):
        return [Word(raw, raw, base + start, base + target.end)]
    if target.start == op_end:
        return [Word(op + target.value, raw, base + start, base + target.end)]
    return [
        Word(op, op, base + start, base + op_end),
        Word(target.value, text[target.start : target.end], base + target.start, base + target.end),
    ]


def shell_commands(src: str, base: int = 0, nested: bool = False) -> list[SimpleCommand]:
    """The simple commands of a shell script, in order, each after the commands of its substitutions
    (``$( )``, backticks, ``<( )``, marked ``nested``); spans are offsets in ``src`` plus ``base``.

    Words are as the rewrite reads them: quotes removed, expansions as written, redirections where they stand
    (``2>&1``, ``> out``); ``name=(a b)`` is one word (an array, not a command); here-document bodies are
    skipped; reserved words (``then``, ``do``, ``!``) stay words, ``{``/``}`` and case patterns do not."""
    out: list[SimpleCommand] = []
    for cmd in parse(src, arrays=True).commands:
        parsed: list[tuple[int, ParsedWord | None, list[Word]]] = [
            (w.start, w, [Word(w.value, src[w.start : w.end], base + w.start, base + w.end)])
            for w in cmd.words
        ]
        parsed += [(r.start, r.target, _redirect_words(src, base, r)) for r in cmd.redirects]
        parsed.sort(key=lambda item: item[0])
        for _, word, _ in parsed:
            for sub in word.subs if word is not None else []:
                out.extend(shell_commands(sub.text, base + sub.start, True))
        words = [w for _, _, ws in parsed for w in ws]
        if words:
            out.append(SimpleCommand(words, nested))
    return out


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
    """Index of the program word: past reserved words, assignments and wrapper programs with their options and
    operands (the shell engine's one prefix table: ``sudo -u bob``, ``env -u X``, ``timeout 60``, ``nohup``...);
    the lookup itself for ``command -v uv`` (not a run of the program); ``len(words)`` when the segment is shell
    structure (``for x in ...``, ``case``) or empty."""
    i = command_start(words)
    if i < len(words) and words[i] in _STRUCTURE:
        return len(words)
    while i < len(words):
        if is_assignment(words[i]):
            i += 1
            continue
        call = read_wrapper(words[i], words[i + 1 :])
        if call is None or call.start is None:
            return i
        i += 1 + call.start
    return i
