"""A small, forgiving bash parser: words, redirections, pipelines, lists, groups.

The one structural reading of a shell line in bashgym (``bashgym_assets.shell``): the guardrails' command rules, the
GRPO reward's hacking check, the factory catalog, the skill comparison, the failure classifier and the importers
all read lines through it.

Not a full bash grammar; enough to know, for every simple command in a line, its words after quote removal
(``'rm' "-rf" /`` is ``rm -rf /``), its redirections (with here-document bodies), where it sits in its pipeline
(so ``curl ... | sh`` is seen as "a download feeds a shell" even through subshells and ``tee``), and which command
and process substitutions (``$(...)``, backticks, ``<(...)``) it runs, whose text the rules analyse in turn.
What is quoted stays data: ``echo 'rm -rf /'`` has the words ``echo`` and ``rm -rf /``.
Every word and redirection keeps its span in the text, so a caller can also rewrite exactly one command's text
(the external-suite importer replaces installer commands and pytest runs that way).

It never raises on odd input: an unterminated quote or substitution takes the rest of the text, an unbalanced
``)`` is ignored, and ``Parsed.errors`` says what was odd (the caller then backs the parse up with a token scan).
``masked`` is the text with quoted strings, substitutions, comments and here-document bodies blanked out
(same length), for the few rules that look at the code's shape (fork bombs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

OPERATORS = (
    ";;&",
    "<<<",
    "<<-",
    "&>>",
    "||",
    "|&",
    "&&",
    ";;",
    ";&",
    "<<",
    ">>",
    "<>",
    "<&",
    ">&",
    ">|",
    "&>",
    "|",
    "&",
    ";",
    "(",
    ")",
    "<",
    ">",
    "\n",
)
_OPS_BY_CHAR: dict[str, tuple[str, ...]] = {c: tuple(o for o in OPERATORS if o[0] == c) for c in "|&;()<>\n"}
REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "&>", "&>>", "<&", ">&", "<<", "<<-", "<<<"})
PIPES = frozenset({"|", "|&"})
SEPARATORS = frozenset({";", "&", "&&", "||", "\n", ";;", ";&", ";;&"})
CASE_ENDS = frozenset({";;", ";&", ";;&"})
_LEAD_WORDS = frozenset({"!", "do", "then", "else", "elif", "if", "while", "until", "{"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_ARRAY_HEAD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=$")
_ANSI_C = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


@dataclass
class Sub:
    """A command or process substitution inside a word: the text it runs and where that text starts."""

    text: str
    start: int
    kind: str  # cmd | backtick | proc


@dataclass
class Word:
    value: str
    start: int
    end: int
    quoted: bool = False
    dynamic: bool = False  # holds a $-expansion or substitution: its value is not literally known
    subs: list[Sub] = field(default_factory=list)
    procsub: str | None = None  # "<" or ">" for a process substitution word

    @property
    def literal(self) -> bool:
        return not self.dynamic


@dataclass
class Redirect:
    op: str
    start: int
    end: int
    fd: int | None = None
    target: Word | None = None
    heredoc: str | None = None
    heredoc_start: int = 0
    fd_start: int = -1  # where the fd digits (``2`` of ``2>&1``) start; -1 without an fd


@dataclass
class Command:
    """One simple command: its words, its redirections and its place in the pipelines around it."""

    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    path: tuple[tuple[int, int], ...] = ()
    start: int = -1
    end: int = -1

    def touch(self, start: int, end: int) -> None:
        self.start = start if self.start < 0 else min(self.start, start)
        self.end = max(self.end, end)


@dataclass
class Parsed:
    commands: list[Command]
    functions: list[tuple[str, int]]
    masked: str
    errors: list[str]

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass
class _Token:
    kind: str  # word | op
    value: str
    start: int
    end: int
    word: Word | None = None
    fd: int | None = None
    redirect: Redirect | None = None  # the here-document redirection the lexer fills in
    fd_start: int = -1


class _WordBuilder:
    def __init__(self, start: int) -> None:
        self.parts: list[str] = []
        self.start = start
        self.quoted = False
        self.dynamic = False
        self.subs: list[Sub] = []

    def add(self, text: str) -> None:
        self.parts.append(text)

    def finish(self, end: int) -> Word:
        return Word("".join(self.parts), self.start, end, self.quoted, self.dynamic, self.subs)


def upstream(a: Command, b: Command) -> bool:
    """Whether ``a``'s output flows into ``b`` through a pipe (at any level of grouping)."""
    for (pa, sa), (pb, sb) in zip(a.path, b.path, strict=False):
        if pa != pb:
            return False
        if sa != sb:
            return sa < sb
    return False


class _Lexer:
    def __init__(self, text: str, arrays: bool = False) -> None:
        self.text = text
        self.arrays = arrays
        self.n = len(text)
        self.masked = list(text)
        self.errors: list[str] = []
        self.tokens: list[_Token] = []
        self.pending_heredocs: list[tuple[str, bool, Redirect]] = []
        self.expect_delim: Redirect | None = None
        self.cur: _WordBuilder | None = None

    # -- helpers ---------------------------------------------------------------------------------------------
    def mask(self, start: int, end: int) -> None:
        for k in range(max(0, start), min(end, self.n)):
            if self.masked[k] != "\n":
                self.masked[k] = " "

    def word(self, i: int) -> _WordBuilder:
        if self.cur is None:
            self.cur = _WordBuilder(i)
        return self.cur

    def flush(self, end: int) -> None:
        if self.cur is None:
            return
        w = self.cur.finish(end)
        self.cur = None
        tok = _Token("word", w.value, w.start, w.end, word=w)
        self.tokens.append(tok)
        if self.expect_delim is not None:
            red = self.expect_delim
            self.expect_delim = None
            self.pending_heredocs.append((w.value, red.op == "<<-", red))

    def matching_paren(self, j: int) -> int:
        """Index of the ``)`` closing a ``(`` just before ``j`` (quotes, escapes and nesting respected), or -1."""
        text, n, depth = self.text, self.n, 1
        while j < n:
            c = text[j]
            if c == "\\":
                j += 2
                continue
            if c == "'":
                k = text.find("'", j + 1)
                if k < 0:
                    return -1
                j = k + 1
                continue
            if c == '"':
                k = self.closing_dquote(j + 1)
                if k < 0:
                    return -1
                j = k + 1
                continue
            if c == "`":
                k = self.closing_backtick(j + 1)
                if k < 0:
                    return -1
                j = k + 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        return -1

    def closing_dquote(self, j: int) -> int:
        text, n = self.text, self.n
        while j < n:
            c = text[j]
            if c == "\\":
                j += 2
                continue
            if c == '"':
                return j
            if c == "$" and j + 1 < n and text[j + 1] == "(":
                k = self.matching_paren(j + 2)
                if k < 0:
                    return -1
                j = k + 1
                continue
            if c == "`":
                k = self.closing_backtick(j + 1)
                if k < 0:
                    return -1
                j = k + 1
                continue
            j += 1
        return -1

    def closing_backtick(self, j: int) -> int:
        text, n = self.text, self.n
        while j < n:
            if text[j] == "\\":
                j += 2
                continue
            if text[j] == "`":
                return j
            j += 1
        return -1

    def closing_brace(self, j: int) -> int:
        text, n, depth = self.text, self.n, 1
        while j < n:
            c = text[j]
            if c == "\\":
                j += 2
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        return -1

    def dollar(self, i: int, w: _WordBuilder) -> int:
        """``$(...)``, ``$((...))``, ``${...}`` or ``$NAME`` at ``i``: appended to ``w``; returns the next index."""
        text, n = self.text, self.n
        nxt = text[i + 1] if i + 1 < n else ""
        if nxt == "(":
            if i + 2 < n and text[i + 2] == "(":  # arithmetic: no commands run
                k = text.find("))", i + 3)
                end = n if k < 0 else k + 2
                w.add(text[i:end])
                w.dynamic = True
                return end
            k = self.matching_paren(i + 2)
            if k < 0:
                self.errors.append(f"unterminated $( at {i}")
                k = self.n
            w.subs.append(Sub(text[i + 2 : k], i + 2, "cmd"))
            w.add(text[i : k + 1])
            w.dynamic = True
            return k + 1
        if nxt == "{":
            k = self.closing_brace(i + 2)
            if k < 0:
                self.errors.append(f"unterminated ${{ at {i}")
                k = self.n
            w.add(text[i : k + 1])
            w.dynamic = True
            return k + 1
        w.add("$")
        if nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
            w.dynamic = True
        return i + 1

    def backtick(self, i: int, w: _WordBuilder) -> int:
        k = self.closing_backtick(i + 1)
        if k < 0:
            self.errors.append(f"unterminated ` at {i}")
            k = self.n
        w.subs.append(Sub(self.text[i + 1 : k], i + 1, "backtick"))
        w.add(self.text[i : k + 1])
        w.dynamic = True
        return k + 1

    def heredocs(self, i: int) -> int:
        """Read the bodies of the here-documents opened on the line that ended just before ``i``."""
        text, n = self.text, self.n
        for delim, strip_tabs, red in self.pending_heredocs:
            body_start = i
            lines = []
            while i < n:
                j = text.find("\n", i)
                line_end = n if j < 0 else j
                line = text[i:line_end]
                i = n if j < 0 else j + 1
                if (line.lstrip("\t") if strip_tabs else line).rstrip("\r") == delim:
                    break
                lines.append(line)
            red.heredoc = "\n".join(lines)
            red.heredoc_start = body_start
            self.mask(body_start, i)
        self.pending_heredocs = []
        return i

    # -- main loop -------------------------------------------------------------------------------------------
    def run(self) -> None:
        text, n = self.text, self.n
        i = 0
        while i < n:
            c = text[i]
            if c in " \t\r":
                self.flush(i)
                i += 1
                continue
            if c == "\n":
                self.flush(i)
                self.tokens.append(_Token("op", "\n", i, i + 1))
                i += 1
                if self.pending_heredocs:
                    i = self.heredocs(i)
                continue
            if c == "\\":
                if i + 1 < n and text[i + 1] == "\n":
                    i += 2
                    continue
                w = self.word(i)
                w.add(text[i + 1 : i + 2])
                w.quoted = True
                i += 2
                continue
            if c == "#" and self.cur is None:
                j = text.find("\n", i)
                j = n if j < 0 else j
                self.mask(i, j)
                i = j
                continue
            if c == "'":
                w = self.word(i)
                k = text.find("'", i + 1)
                if k < 0:
                    self.errors.append(f"unterminated ' at {i}")
                    k = n
                w.add(text[i + 1 : k])
                w.quoted = True
                self.mask(i, k + 1)
                i = k + 1
                continue
            if c == "$" and i + 1 < n and text[i + 1] == "'":
                w = self.word(i)
                i = self.ansi_c(i + 2, w)
                continue
            if c == '"':
                w = self.word(i)
                w.quoted = True
                start = i
                i = self.dquote(i + 1, w)
                self.mask(start, i)
                continue
            if c == "$":
                w = self.word(i)
                start = i
                i = self.dollar(i, w)
                if text.startswith("$(", start):
                    self.mask(start, i)
                continue
            if c == "`":
                w = self.word(i)
                start = i
                i = self.backtick(i, w)
                self.mask(start, i)
                continue
            if c in "<>" and i + 1 < n and text[i + 1] == "(" and self.cur is None:
                k = self.matching_paren(i + 2)
                if k < 0:
                    self.errors.append(f"unterminated {c}( at {i}")
                    k = n
                pw = Word(
                    text[i : k + 1],
                    i,
                    min(k + 1, n),
                    dynamic=True,
                    subs=[Sub(text[i + 2 : k], i + 2, "proc")],
                    procsub=c,
                )
                self.tokens.append(_Token("word", pw.value, pw.start, pw.end, word=pw))
                self.mask(i, k + 1)
                i = k + 1
                continue
            if (
                c == "("
                and self.arrays
                and self.cur is not None
                and not self.cur.quoted
                and _ARRAY_HEAD.match("".join(self.cur.parts))
            ):  # name=(a b c): the array's words are data, not a subshell
                k = self.matching_paren(i + 1)
                if k < 0:
                    self.errors.append(f"unterminated array at {i}")
                    k = n
                self.cur.add(text[i : k + 1])
                self.cur.dynamic = True
                i = k + 1
                continue
            if c in "|&;()<>":
                fd, fd_start = None, -1
                if (
                    c in "<>"
                    and self.cur is not None
                    and not self.cur.quoted
                    and "".join(self.cur.parts).isdigit()
                ):
                    fd, fd_start = int("".join(self.cur.parts)), self.cur.start
                    self.cur = None
                else:
                    self.flush(i)
                op = next(o for o in _OPS_BY_CHAR[c] if text.startswith(o, i))
                self.tokens.append(_Token("op", op, i, i + len(op), fd=fd, fd_start=fd_start))
                i += len(op)
                if op in ("<<", "<<-"):
                    self.expect_delim = Redirect(op, i - len(op), i, fd=fd, fd_start=fd_start)
                    self.tokens[-1].redirect = self.expect_delim
                continue
            w = self.word(i)
            w.add(c)
            i += 1
        self.flush(n)
        if self.pending_heredocs:
            for _, _, red in self.pending_heredocs:
                red.heredoc = ""
            self.pending_heredocs = []

    def dquote(self, j: int, w: _WordBuilder) -> int:
        text, n = self.text, self.n
        while j < n:
            c = text[j]
            if c == "\\" and j + 1 < n:
                nxt = text[j + 1]
                if nxt in '$`"\\':
                    w.add(nxt)
                elif nxt != "\n":
                    w.add(c + nxt)
                j += 2
                continue
            if c == '"':
                return j + 1
            if c == "$":
                j = self.dollar(j, w)
                continue
            if c == "`":
                j = self.backtick(j, w)
                continue
            w.add(c)
            j += 1
        self.errors.append('unterminated "')
        return n

    def ansi_c(self, j: int, w: _WordBuilder) -> int:
        text, n = self.text, self.n
        start = j - 2
        w.quoted = True
        while j < n:
            c = text[j]
            if c == "\\" and j + 1 < n:
                nxt = text[j + 1]
                if nxt == "x":
                    m = re.match(r"[0-9A-Fa-f]{1,2}", text[j + 2 : j + 4])
                    if m:
                        w.add(chr(int(m.group(), 16)))
                        j += 2 + len(m.group())
                        continue
                w.add(_ANSI_C.get(nxt, "\\" + nxt))
                j += 2
                continue
            if c == "'":
                self.mask(start, j + 1)
                return j + 1
            w.add(c)
            j += 1
        self.errors.append("unterminated $'")
        self.mask(start, n)
        return n


MAX_PATH = 64


def parse(text: str, arrays: bool = False) -> Parsed:
    """Simple commands of ``text`` with their pipeline positions; never raises on odd input.

    ``arrays``: read ``name=(a b)`` as one word (bash's array assignment). Off for the guardrails, which read the
    parenthesised words as a subshell's command and so err toward inspecting them."""
    lexer = _Lexer(text, arrays)
    lexer.run()
    tokens = lexer.tokens
    errors = list(lexer.errors)
    commands: list[Command] = []
    functions: list[tuple[str, int]] = []
    counter = [0]

    def new_pipeline() -> list[int]:
        counter[0] += 1
        return [counter[0], 0]

    path: list[list[int]] = [new_pipeline()]
    cur = Command()
    pending: Redirect | None = None
    case_depth = 0
    expect_pattern = False

    def case_header(c: Command) -> bool:
        for w in c.words:
            if w.quoted or w.value not in _LEAD_WORDS:
                return not w.quoted and w.value == "case"
        return False

    def finish() -> None:
        nonlocal cur, case_depth, expect_pattern
        if cur.words or cur.redirects:
            if case_header(cur):
                case_depth += 1
                expect_pattern = True
            else:
                # pipes are compared along the first MAX_PATH levels of grouping: a line of 4,000 unclosed
                # ``{`` (a babbling model) would otherwise copy a 4,000-deep path per command (quadratic)
                cur.path = tuple((p, s) for p, s in path[:MAX_PATH])
                commands.append(cur)
        cur = Command()

    k = 0
    while k < len(tokens):
        tok = tokens[k]
        k += 1
        if tok.kind == "word":
            w = tok.word
            assert w is not None
            if pending is not None:
                pending.target = w
                pending.end = w.end
                cur.touch(pending.start, w.end)
                pending = None
                continue
            at_start = not cur.words
            if at_start and not w.quoted:
                if w.value == "{":
                    finish()
                    path.append(new_pipeline())
                    continue
                if w.value == "}":
                    finish()
                    if len(path) > 1:
                        path.pop()
                    continue
                if w.value == "esac" and case_depth:
                    case_depth -= 1
                    expect_pattern = False
                    cur = Command()
                    continue
                if w.value == "function" and k < len(tokens) and tokens[k].kind == "word":
                    functions.append((tokens[k].value, tokens[k].start))
                    k += 1
                    if k + 1 < len(tokens) and tokens[k].value == "(" and tokens[k + 1].value == ")":
                        k += 2
                    continue
            cur.words.append(w)
            cur.touch(w.start, w.end)
            continue
        op = tok.value
        if pending is not None:  # a redirection with no target
            errors.append(f"redirection {pending.op!r} without a target at {pending.start}")
            pending = None
        if op in REDIRECTS:
            red = tok.redirect or Redirect(op, tok.start, tok.end, fd=tok.fd, fd_start=tok.fd_start)
            cur.redirects.append(red)
            cur.touch(tok.start, tok.end)
            pending = red
            continue
        if op in PIPES:
            if case_header(cur):  # case x in a|b) on one line
                continue
            if case_depth and expect_pattern:  # a|b) in a case pattern
                cur = Command()
                continue
            finish()
            path[-1][1] += 1
            continue
        if op in SEPARATORS:
            finish()
            path[-1] = new_pipeline()
            if op in CASE_ENDS and case_depth:
                expect_pattern = True
            continue
        if op == "(":
            nxt = tokens[k] if k < len(tokens) else None
            if len(cur.words) == 1 and not cur.redirects and nxt is not None and nxt.value == ")":
                functions.append((cur.words[0].value, cur.words[0].start))
                cur = Command()
                k += 1
                continue
            if case_depth and expect_pattern and not cur.words:
                continue
            finish()
            path.append(new_pipeline())
            continue
        if op == ")":
            if case_header(cur):
                case_depth += 1
                expect_pattern = False
                cur = Command()
                continue
            if case_depth and expect_pattern:
                expect_pattern = False
                cur = Command()
                continue
            finish()
            if len(path) > 1:
                path.pop()
            else:
                errors.append(f"unbalanced ) at {tok.start}")
            continue
    if pending is not None:
        errors.append(f"redirection {pending.op!r} without a target at {pending.start}")
    finish()
    return Parsed(commands, functions, "".join(lexer.masked), errors)


def is_assignment(word: Word | str) -> bool:
    """``NAME=value`` (or ``a[i]=``, ``+=``): a word that sets a variable for the command after it."""
    value = word if isinstance(word, str) else word.value
    return bool(_ASSIGNMENT.match(value)) and not value.startswith(("'", '"'))
