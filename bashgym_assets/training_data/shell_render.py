"""Agent tool calls rendered as the shell commands they stand for, with the output that shell would print.

A trace teaches a terminal operator only if each assistant turn is something a shell can run: ``Read
{"file_path": ...}`` typed into bash is a syntax error, so every gold session that contains it would teach the
model to type things a shell cannot run. Each step is rendered as a ``ShellTurn`` (command, output, exit code)
or refused as a ``Skipped`` with a categorical reason that the dataset builder counts:

* Read -> ``cat -n FILE`` (``sed -n 'a,bp' FILE`` with offset/limit): the recorded listing re-formatted the way
  ``cat -n``/``sed`` print it; a missing file or a directory becomes cat's/sed's own error and exit code.
* Write -> a quoted heredoc (``cat > FILE <<'EOF'``; ``head -c -1`` when the content has no final newline, so the
  bytes written are exactly the tool's), ``mkdir -p`` first when the file is in another folder (Write makes it).
* Edit / MultiEdit -> a short ``python3`` heredoc that replaces the exact text and fails (exit 1, a message) when
  the old text is absent or, without ``replace_all``, not unique, as Edit does.
* Grep -> ``grep -r`` with ``-l`` / ``-c`` / ``-n``, ``-i``, ``-A/-B/-C``, ``--include`` (glob, type), ``-E``/``-P``
  as the pattern needs, ``| tail``/``| head -n`` (offset, head_limit); paths printed as the command prints them.
* Glob -> ``find ROOT [-maxdepth 1] -type f -name/-path ...`` (braces become ``-o``).
* LS -> ``ls -1p PATH`` (the names the tool listed; ``ls -la`` would need owners, sizes and dates that the tool
  never recorded, and inventing them would be a fake observation).
* Bash -> the command itself (Claude Code's ``Exit code N`` header left out: the exit code follows the output).

Refused: a step the agent's harness never ran (refused, permission not granted, rejected or interrupted by the
user) is dropped (nothing happened, so every later observation stays true), as is a step of a tool with no effect on the machine (TodoWrite, WebFetch, ...); a tool whose
effect the shell cannot reproduce (Task/Agent delegation, NotebookEdit, MCP tools, background shells, anything
unknown) CUTS the segment there, because every later observation may depend on that effect. Every command is
checked with ``bash -n``; one that does not parse is dropped (or cuts the segment when it succeeded, since its
effect is then unknown). Nothing is ever rendered as a fake command.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel

from bashgym_assets.shell import TRAINING_DATA, bash_syntax_error

DROP, CUT = "drop", "cut"
#: Exact bytes for Write: content without a final newline is written with ``head -c -1`` (False: always
#: ``cat >``, which adds the newline a text file normally ends with).
EXACT_FINAL_NEWLINE = True
READ_DEFAULT_LIMIT = 2000
GLOB_RESULT_LIMIT = 100
SHELL_TOOLS = {"bash", "shell", "terminal", "run_command", "execute_command"}
#: Tools with no effect on the machine: dropping the turn leaves every later observation true.
NO_EFFECT_TOOLS = {
    "todowrite",
    "todoread",
    "exitplanmode",
    "enterplanmode",
    "webfetch",
    "websearch",
    "notebookread",
    "taskcreate",
    "taskupdate",
    "tasklist",
    "taskget",
}

# Categorical reasons (the builder counts them): "<Tool>: <one of these>".
NO_SHELL_EQUIVALENT = "no shell equivalent (no effect on the machine)"
NO_SHELL_EQUIVALENT_EFFECT = "no shell equivalent (later turns depend on its effect)"
BACKGROUND_SHELL = "background shell (no one-command-per-turn form)"
NOT_RUN_REFUSED = "not executed (refused by the agent harness)"
NOT_RUN_PERMISSION = "not executed (permission not granted)"
NOT_RUN_REJECTED = "not executed (rejected by the user)"
NOT_RUN_INTERRUPTED = "not executed (interrupted by the user)"
NOT_RUN_BLOCKED = "not executed (blocked by the agent harness)"
NO_RESULT = "no result recorded"
UNMAPPED_ERROR = "error with no shell equivalent"
NOT_TEXT = "result is not a text listing"
BAD_INPUT = "input has no exact shell form"
DOES_NOT_PARSE = "does not parse (bash -n)"
DOES_NOT_PARSE_RAN = "does not parse (bash -n) but ran: effect unknown"


class ShellTurn(BaseModel):
    """One rendered step: what the operator types and what the shell prints back."""

    command: str
    output: str = ""
    exit_code: int | None = None


class Skipped(BaseModel):
    """A step that is not rendered: ``drop`` leaves the rest of the segment, ``cut`` ends the segment there."""

    index: int | None = None
    tool: str
    action: Literal["drop", "cut"]
    reason: str


# ---- small helpers ----------------------------------------------------------------------------------------------
_REMINDER = re.compile(r"\s*<system-reminder>.*?</system-reminder>\s*", re.S)
_TOOL_ERROR = re.compile(r"^\s*<tool_use_error>(.*?)</tool_use_error>\s*$", re.S)
_NOT_RUN = [
    (re.compile(r"^Claude requested permissions? to .*haven't granted it", re.S), NOT_RUN_PERMISSION),
    (re.compile(r"^Permission to use \S+.* has been denied", re.S), NOT_RUN_PERMISSION),
    (re.compile(r"^The user doesn't want to (?:proceed|take this action)"), NOT_RUN_REJECTED),
    (re.compile(r"^\[Request interrupted by user"), NOT_RUN_INTERRUPTED),
    (re.compile(r"was blocked\. For security", re.S), NOT_RUN_BLOCKED),
]
NOT_RUN_REASONS = {
    NOT_RUN_REFUSED,
    NOT_RUN_PERMISSION,
    NOT_RUN_REJECTED,
    NOT_RUN_INTERRUPTED,
    NOT_RUN_BLOCKED,
}
_EXIT_HEADER = re.compile(r"^(?:Error: )?Exit code (-?\d+)\n?")


def _skip(step: Mapping[str, Any], action: str, why: str) -> Skipped:
    tool = str(step.get("tool_name") or "unknown")
    return Skipped(index=step.get("index"), tool=tool, action=action, reason=f"{tool}: {why}")  # type: ignore[arg-type]


def _input(step: Mapping[str, Any]) -> dict[str, Any] | None:
    raw = step.get("input")
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _has_result(step: Mapping[str, Any]) -> bool:
    return step.get("success") is not None or step.get("exit_code") is not None or bool(step.get("output"))


def _failed(step: Mapping[str, Any]) -> bool:
    code = step.get("exit_code")
    return bool(step.get("is_error")) or step.get("success") is False or (code is not None and code != 0)


def _clean(text: str) -> str:
    """The tool's text without the harness's ``<system-reminder>`` notes (no shell prints them)."""
    return _REMINDER.sub("\n", text or "").strip("\n")


def _error_text(text: str) -> str:
    text = _clean(text)
    m = _TOOL_ERROR.match(text)
    return (m.group(1) if m else text).strip()


def is_not_run(skipped: Skipped) -> bool:
    """The step was refused, rejected or interrupted: the agent's harness never ran it."""
    return skipped.reason.split(": ", 1)[-1] in NOT_RUN_REASONS


def not_run_reason(step: Mapping[str, Any]) -> str | None:
    """Why the agent's harness never ran this step (so dropping it leaves the machine's state as recorded)."""
    text = _clean(step.get("output") or "")
    for pattern, why in _NOT_RUN:
        if pattern.search(text[:2000]):
            return why
    if text.lstrip().startswith("<tool_use_error>"):
        return NOT_RUN_REFUSED
    return None


def display_path(path: str, cwd: str | None) -> str:
    """A path as a person at ``cwd`` would type it: relative inside the working directory, else as given."""
    if cwd and not path.startswith("~"):
        full = posixpath.normpath(posixpath.join(cwd, path))
        base = posixpath.normpath(cwd)
        if full == base:
            return "."
        if base != "/" and full.startswith(base + "/"):
            return full[len(base) + 1 :]
        return full
    return path


def absolute_path(path: str, cwd: str | None) -> str:
    if path.startswith(("/", "~")) or not cwd:
        return posixpath.normpath(path) if path.startswith("/") else path
    return posixpath.normpath(posixpath.join(cwd, path))


def quote_path(path: str) -> str:
    """shlex-quoted, but a leading ``~/`` stays unquoted so the shell still expands it."""
    if path == "~":
        return path
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:]) if path[2:] else "~/"
    return shlex.quote(path)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value) if value is not None and str(value).strip() != "" else None
    except (TypeError, ValueError):
        return None


def heredoc_delimiter(text: str, base: str = "EOF") -> str:
    """``base``, or ``base_<k>`` when a line of the text is exactly the delimiter (it would end the heredoc)."""
    lines = set(text.split("\n"))
    delim, k = base, 0
    while delim in lines:
        k += 1
        delim = f"{base}_{k}"
    return delim


_SIMPLE = re.compile(r"[A-Za-z0-9_./:=,+%@-]+(?: [A-Za-z0-9_./:=,+%@-]+)*")
_RESERVED = {
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "case",
    "esac",
    "for",
    "select",
    "while",
    "until",
    "do",
    "done",
    "function",
    "in",
    "time",
    "coproc",
}


@lru_cache(maxsize=4096)
def _cached_syntax_error(command: str) -> str | None:
    return bash_syntax_error(command, policy=TRAINING_DATA)


def syntax_error(command: str) -> str | None:
    """``bash -n``'s verdict (``shell.bash_syntax_error``, the ``TRAINING_DATA`` policy: an operator's grammar, and
    no verdict is a refusal), cached; plain words need no bash to decide."""
    if _SIMPLE.fullmatch(command) and not _RESERVED & set(command.split()):
        return None
    if len(command) > 4096:  # not cached: a heredoc of a whole file would pin megabytes in the cache
        return bash_syntax_error(command, policy=TRAINING_DATA)
    return _cached_syntax_error(command)


# ---- the tools --------------------------------------------------------------------------------------------------
def render_step(step: Mapping[str, Any]) -> ShellTurn | Skipped:
    """The shell form of one step, or why it has none. Every returned command parses with ``bash -n``."""
    tool = str(step.get("tool_name") or "unknown")
    key = tool.lower()
    command = (step.get("command") or "").strip()
    inp = _input(step)
    shell = key in SHELL_TOOLS or bool(command and not step.get("input"))
    if shell:
        rendered: ShellTurn | Skipped = _bash(step, inp or {}, command)
    elif key in NO_EFFECT_TOOLS:
        return _skip(step, DROP, NO_SHELL_EQUIVALENT)
    elif key not in _RENDERERS:
        return _skip(step, CUT, NO_SHELL_EQUIVALENT_EFFECT)
    elif inp is None:
        return _skip(step, CUT, BAD_INPUT)
    elif not _has_result(step):
        return _skip(step, DROP if key in _READ_ONLY else CUT, NO_RESULT)
    elif key not in _MAPS_ERRORS and (why := not_run_reason(step)):
        return _skip(step, DROP, why)
    else:
        rendered = _RENDERERS[key](step, inp)
    if isinstance(rendered, Skipped):
        return rendered
    if syntax_error(rendered.command) is not None:
        if shell and not _failed(step):  # it ran and did something: the rest of the segment may depend on it
            return _skip(step, CUT, DOES_NOT_PARSE_RAN)
        return _skip(step, DROP, DOES_NOT_PARSE)
    return rendered


def _bash(step: Mapping[str, Any], inp: dict[str, Any], command: str) -> ShellTurn | Skipped:
    if not command:
        command = str(inp.get("command") or "").strip()
    if not command:
        return _skip(step, DROP, BAD_INPUT)
    if inp.get("run_in_background"):
        return _skip(step, CUT, BACKGROUND_SHELL)
    if why := not_run_reason(step):
        return _skip(step, DROP, why)
    code = step.get("exit_code")
    if code is None and step.get("success") is not None:
        code = 0 if step.get("success") else 1
    out = _clean(step.get("output") or "")
    header = _EXIT_HEADER.match(out)
    if header and code is not None and int(header.group(1)) == code:
        out = out[header.end() :]
    return ShellTurn(command=command, output=out, exit_code=code)


# Read ------------------------------------------------------------------------------------------------------------
_NUMBERED = re.compile(r"^ *(\d+)(?:\u2192|\t)(.*)$")
_EMPTY_READ = ("the file exists but the contents are empty", "shorter than the provided offset")


def _read(step: Mapping[str, Any], inp: dict[str, Any]) -> ShellTurn | Skipped:
    path = inp.get("file_path")
    if not isinstance(path, str) or not path:
        return _skip(step, DROP, BAD_INPUT)
    cwd = step.get("cwd")
    shown = display_path(path, cwd)
    offset, limit = _int(inp.get("offset")), _int(inp.get("limit"))
    ranged = offset is not None or limit is not None
    raw = step.get("output") or ""
    if step.get("is_error") or _TOOL_ERROR.match(_clean(raw)):
        return _read_error(step, shown, ranged, offset, limit)
    texts: list[str] = []
    numbers: list[int] = []
    body = "" if any(marker in raw for marker in _EMPTY_READ) else _clean(raw)
    for line in body.split("\n") if body else []:
        m = _NUMBERED.match(line)
        if m is None:  # an image, a PDF, a notebook: nothing cat prints
            return _skip(step, DROP, NOT_TEXT)
        numbers.append(int(m.group(1)))
        texts.append(m.group(2))
    if ranged:
        first = numbers[0] if numbers else max(offset or 1, 1)
        last = first + (limit or READ_DEFAULT_LIMIT) - 1
        command = f"sed -n '{first},{last}p' {quote_path(shown)}"
        return ShellTurn(command=command, output="\n".join(texts), exit_code=0)
    if len(texts) >= READ_DEFAULT_LIMIT:  # the tool stopped at its default limit: so does head
        command = f"cat -n {quote_path(shown)} | head -n {READ_DEFAULT_LIMIT}"
        texts = texts[:READ_DEFAULT_LIMIT]
    else:
        command = f"cat -n {quote_path(shown)}"
        if (
            texts and texts[-1] == ""
        ):  # content.split('\n') of a file ending in a newline: not a line of cat -n
            texts = texts[:-1]
    out = "\n".join(f"{i:6d}\t{t}" for i, t in enumerate(texts, start=1))
    return ShellTurn(command=command, output=out, exit_code=0)


def _read_error(
    step: Mapping[str, Any], shown: str, ranged: bool, offset: int | None, limit: int | None
) -> ShellTurn | Skipped:
    msg = _error_text(step.get("output") or "")
    if "does not exist" in msg or "ENOENT" in msg or "No such file" in msg:
        kind = "missing"
    elif "EISDIR" in msg or "is a directory" in msg.lower():
        kind = "directory"
    elif "EACCES" in msg or "permission denied" in msg.lower():
        kind = "denied"
    else:
        return _skip(step, DROP, not_run_reason(step) or UNMAPPED_ERROR)
    if ranged:
        first = max(offset or 1, 1)
        command = f"sed -n '{first},{first + (limit or READ_DEFAULT_LIMIT) - 1}p' {quote_path(shown)}"
        out, code = {
            "missing": (f"sed: can't read {shown}: No such file or directory", 2),
            "directory": (f"sed: read error on {shown}: Is a directory", 4),
            "denied": (f"sed: can't read {shown}: Permission denied", 2),
        }[kind]
    else:
        command = f"cat -n {quote_path(shown)}"
        name = shlex.quote(shown)  # coreutils quotes names the way the shell would
        out = {
            "missing": f"cat: {name}: No such file or directory",
            "directory": f"cat: {name}: Is a directory",
            "denied": f"cat: {name}: Permission denied",
        }[kind]
        code = 1
    return ShellTurn(command=command, output=out, exit_code=code)


# Write -----------------------------------------------------------------------------------------------------------
def write_command(path: str, content: str) -> str:
    """A heredoc that leaves exactly ``content`` in ``path`` (creating its folder, as Write does)."""
    delim = heredoc_delimiter(content)
    exact = EXACT_FINAL_NEWLINE and content and not content.endswith("\n")
    writer = "head -c -1" if exact else "cat"
    body = content if not content or content.endswith("\n") else content + "\n"
    folder = posixpath.dirname(path)
    mkdir = f"mkdir -p {quote_path(folder)} && " if folder and folder not in (".", "/", "~") else ""
    return f"{mkdir}{writer} > {quote_path(path)} <<'{delim}'\n{body}{delim}"


def _write(step: Mapping[str, Any], inp: dict[str, Any]) -> ShellTurn | Skipped:
    path, content = inp.get("file_path"), inp.get("content")
    if not isinstance(path, str) or not path or not isinstance(content, str):
        return _skip(step, CUT if not _failed(step) else DROP, BAD_INPUT)
    if _failed(step):
        return _skip(step, DROP, not_run_reason(step) or UNMAPPED_ERROR)
    if "\x00" in content:
        return _skip(step, CUT, BAD_INPUT)
    return ShellTurn(
        command=write_command(display_path(path, step.get("cwd")), content), output="", exit_code=0
    )


# Edit / MultiEdit ------------------------------------------------------------------------------------------------
_EDIT_SCRIPT = """python3 - <<'PYEOF'
import sys
path = {path}
edits = [
{edits}
]
try:
    text = open(path, encoding='utf-8', newline='').read()
except OSError as e:
    sys.exit(f'{{path}}: {{e.strerror}}')
for old, new, replace_all in edits:
    n = text.count(old)
    if n == 0:
        sys.exit(f'{{path}}: old text not found')
    if n > 1 and not replace_all:
        sys.exit(f'{{path}}: old text found {{n}} times, expected exactly once')
    text = text.replace(old, new)
with open(path, 'w', encoding='utf-8', newline='') as f:
    f.write(text)
PYEOF"""
_FOUND_N = re.compile(r"Found (\d+) matches of the string to replace")


def edit_command(path: str, edits: list[tuple[str, str, bool]]) -> str:
    """A python3 heredoc replacing each exact old text in turn; exit 1 with a message when one is absent (or not
    unique without replace_all), leaving the file untouched (all or nothing, as MultiEdit)."""
    rows = "\n".join(f"    ({old!r}, {new!r}, {every!r})," for old, new, every in edits)
    return _EDIT_SCRIPT.format(path=repr(path), edits=rows)


def _edits(tool: str, inp: dict[str, Any]) -> list[tuple[str, str, bool]] | None:
    raw = inp.get("edits") if tool == "multiedit" else [inp]
    if not isinstance(raw, list) or not raw:
        return None
    out = []
    for e in raw:
        if not isinstance(e, Mapping):
            return None
        old, new = e.get("old_string"), e.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str):
            return None
        out.append((old, new, bool(e.get("replace_all"))))
    return out


def _edit(step: Mapping[str, Any], inp: dict[str, Any]) -> ShellTurn | Skipped:
    key = str(step.get("tool_name")).lower()
    path, edits = inp.get("file_path"), _edits(key, inp)
    if not isinstance(path, str) or not path or edits is None:
        return _skip(step, DROP if _failed(step) else CUT, BAD_INPUT)
    shown = display_path(path, step.get("cwd"))
    if (
        edits[0][0] == "" and len(edits) == 1
    ):  # Edit with an empty old text creates the file with the new text
        if _failed(step):
            return _skip(step, DROP, not_run_reason(step) or UNMAPPED_ERROR)
        return ShellTurn(command=write_command(shown, edits[0][1]), output="", exit_code=0)
    if any(old == "" or "\x00" in old + new for old, new, _ in edits):
        return _skip(step, DROP if _failed(step) else CUT, BAD_INPUT)
    command = edit_command(shown, edits)
    if not _failed(step):
        return ShellTurn(command=command, output="", exit_code=0)
    msg = _error_text(step.get("output") or "")
    if msg.startswith("String to replace not found"):
        return ShellTurn(command=command, output=f"{shown}: old text not found", exit_code=1)
    if m := _FOUND_N.search(msg):
        return ShellTurn(
            command=command,
            output=f"{shown}: old text found {m.group(1)} times, expected exactly once",
            exit_code=1,
        )
    if msg.startswith("File does not exist"):
        return ShellTurn(command=command, output=f"{shown}: No such file or directory", exit_code=1)
    return _skip(step, DROP, not_run_reason(step) or UNMAPPED_ERROR)


# Grep ------------------------------------------------------------------------------------------------------------
_REGEX_META = set(".[]*^$\\+?(){}|")
_PCRE_ONLY = re.compile(r"\\[dDpPhHK]|\(\?|[*+?}]\?")
_GREP_SUMMARY = re.compile(
    r"^(?:Found \d+ (?:files?|lines?|matches?|total occurrences? across \d+ files?)\.?"
    r"|No (?:files|matches) found|\[Showing results with pagination.*\])$"
)
_NUMBERED_HIT = re.compile(r"^(?:[^\n]*?[:-])?\d+[:-]")
#: ripgrep's ``--type`` names (the common ones) as file-name globs for ``--include``.
RG_TYPES = {
    "py": ["*.py", "*.pyi"],
    "python": ["*.py", "*.pyi"],
    "js": ["*.js", "*.jsx", "*.mjs", "*.cjs", "*.vue"],
    "ts": ["*.ts", "*.tsx", "*.cts", "*.mts"],
    "typescript": ["*.ts", "*.tsx", "*.cts", "*.mts"],
    "rust": ["*.rs"],
    "rs": ["*.rs"],
    "go": ["*.go"],
    "java": ["*.java"],
    "c": ["*.c", "*.h"],
    "cpp": ["*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.hxx", "*.h"],
    "md": ["*.md", "*.markdown"],
    "markdown": ["*.md", "*.markdown"],
    "json": ["*.json"],
    "yaml": ["*.yaml", "*.yml"],
    "toml": ["*.toml"],
    "sh": ["*.sh", "*.bash", "*.zsh"],
    "html": ["*.html", "*.htm"],
    "css": ["*.css", "*.scss", "*.sass"],
    "ruby": ["*.rb"],
    "rb": ["*.rb"],
    "php": ["*.php"],
    "sql": ["*.sql"],
    "txt": ["*.txt"],
    "kotlin": ["*.kt", "*.kts"],
    "swift": ["*.swift"],
    "cs": ["*.cs"],
    "csharp": ["*.cs"],
}


def expand_braces(pattern: str, limit: int = 32) -> list[str] | None:
    """``*.{ts,tsx}`` -> ``['*.ts', '*.tsx']`` (glob braces, nested too); None past ``limit`` patterns."""
    out, todo = [], [pattern]
    while todo:
        p = todo.pop(0)
        m = re.search(r"\{([^{}]*)\}", p)
        if not m or "," not in m.group(1):
            out.append(p)
        else:
            todo.extend(p[: m.start()] + alt + p[m.end() :] for alt in m.group(1).split(","))
        if len(out) + len(todo) > limit:
            return None
    return out


def _map_paths(lines: list[str], root_abs: str, shown: str) -> list[str]:
    """Absolute paths the tool printed -> the paths a command run on ``shown`` prints (``./x`` for ``.``)."""
    if shown.startswith("~"):
        return lines
    prefix = root_abs.rstrip("/") + "/"
    new = "./" if shown == "." else shown.rstrip("/") + "/"
    return [new + line[len(prefix) :] if line.startswith(prefix) else line for line in lines]


def _grep(step: Mapping[str, Any], inp: dict[str, Any]) -> ShellTurn | Skipped:
    pattern = inp.get("pattern")
    if not isinstance(pattern, str) or not pattern or inp.get("multiline"):
        return _skip(step, DROP, BAD_INPUT)
    if _failed(step):
        return _skip(step, DROP, not_run_reason(step) or UNMAPPED_ERROR)
    cwd = step.get("cwd")
    root_abs = absolute_path(str(inp.get("path") or cwd or "."), cwd)
    shown = display_path(root_abs, cwd)
    mode = str(inp.get("output_mode") or "files_with_matches")
    lines = [
        ln
        for ln in _clean(step.get("output") or "").split("\n")
        if ln and not _GREP_SUMMARY.match(ln.strip())
    ]
    flags = "r"
    options: list[str] = []
    if mode == "content":
        numbered = inp.get("-n")
        if numbered is None:
            numbered = bool(lines) and all(_NUMBERED_HIT.match(ln) or ln == "--" for ln in lines)
        flags += "n" if numbered else ""
        for opt in ("-A", "-B", "-C"):
            if (n := _int(inp.get(opt))) is not None:
                options.append(f"{opt} {n}")
    elif mode == "count":
        flags += "c"
    else:
        flags += "l"
    if inp.get("-i"):
        flags += "i"
    if any(ch in _REGEX_META for ch in pattern):
        flags += "P" if _PCRE_ONLY.search(pattern) else "E"
    includes: list[str] = []
    glob = inp.get("glob")
    if isinstance(glob, str) and glob:
        expanded = expand_braces(glob)
        if expanded is None:
            return _skip(step, DROP, BAD_INPUT)
        for g in expanded:
            base = g.removeprefix("**/")
            if "/" in base:
                return _skip(step, DROP, BAD_INPUT)  # a path glob: grep's --include sees base names only
            includes.append(base)
    kind = inp.get("type")
    if isinstance(kind, str) and kind:
        includes.extend(RG_TYPES.get(kind, [f"*.{kind}"]))
    options += [f"--include={shlex.quote(g)}" for g in includes]
    target = f"-e {shlex.quote(pattern)}" if pattern.startswith("-") else shlex.quote(pattern)
    command = " ".join([f"grep -{flags}", *options, target, quote_path(shown)])
    piped = False
    if mode == "count":
        command += " | grep -v ':0$'"
    skip, head = _int(inp.get("offset")) or 0, _int(inp.get("head_limit"))
    if skip > 0:  # the tool's pagination: it already left the first entries out of its output
        command += f" | tail -n +{skip + 1}"
        piped = True
    if head:
        command += f" | head -n {head}"
        piped = True
        lines = lines[:head]
    out = _map_paths(lines, root_abs, shown)
    return ShellTurn(command=command, output="\n".join(out), exit_code=0 if out or piped else 1)


# Glob ------------------------------------------------------------------------------------------------------------
_GLOB_CHARS = re.compile(r"[*?\[]")
_GLOB_TRUNCATED = re.compile(r"^\(Results are truncated")


def _glob(step: Mapping[str, Any], inp: dict[str, Any]) -> ShellTurn | Skipped:
    pattern = inp.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        return _skip(step, DROP, BAD_INPUT)
    if _failed(step):
        return _skip(step, DROP, not_run_reason(step) or UNMAPPED_ERROR)
    cwd = step.get("cwd")
    base = absolute_path(str(inp.get("path") or cwd or "."), cwd)
    patterns = expand_braces(pattern)
    if patterns is None:
        return _skip(step, DROP, BAD_INPUT)
    # (search root, one level only, find's test: ("-name"|"-path", pattern), None for every file)
    plans: set[tuple[str, bool, tuple[str, str] | None]] = set()
    for p in patterns:
        parts = [x for x in p.split("/") if x not in ("", ".")]
        root = "/" if p.startswith("/") else base
        k = 0
        while k < len(parts) - 1 and not _GLOB_CHARS.search(parts[k]):
            k += 1
        root = posixpath.normpath(posixpath.join(root, *parts[:k])) if k else root
        rest = parts[k:]
        if not rest:
            return _skip(step, DROP, BAD_INPUT)
        if len(rest) == 1 and rest[0] != "**":
            plans.add((root, True, ("-name", rest[0])))
        elif rest[0] == "**" and len(rest) <= 2 and "**" not in rest[-1]:
            plans.add((root, False, ("-name", rest[1]) if len(rest) == 2 else None))
        else:
            plans.add((root, False, ("-path", "/".join("*" if x == "**" else x for x in rest))))
    roots = {(r, shallow) for r, shallow, _ in plans}
    if len(roots) != 1:
        return _skip(step, DROP, BAD_INPUT)
    ((root, shallow),) = roots
    shown = display_path(root, cwd) if not root.startswith("~") else root
    tests: list[str] = []
    for _, _, test in sorted(plans, key=lambda t: str(t[2])):
        if test is None:
            tests = []
            break
        opt, value = test
        value = f"{shown.rstrip('/')}/{value}" if opt == "-path" else value
        tests.append(f"{opt} {shlex.quote(value)}")
    expr = tests[0] if len(tests) == 1 else ("\\( " + " -o ".join(tests) + " \\)" if tests else "")
    command = " ".join(
        x for x in [f"find {quote_path(shown)}", "-maxdepth 1" if shallow else "", "-type f", expr] if x
    )
    lines = [ln for ln in _clean(step.get("output") or "").split("\n") if ln.strip()]
    truncated = any(_GLOB_TRUNCATED.match(ln) for ln in lines)
    lines = [ln for ln in lines if ln != "No files found" and not _GLOB_TRUNCATED.match(ln)]
    lines = [ln if ln.startswith(("/", "~")) else posixpath.join(base, ln) for ln in lines]
    if truncated:
        command += f" | head -n {GLOB_RESULT_LIMIT}"
    return ShellTurn(command=command, output="\n".join(_map_paths(lines, root, shown)), exit_code=0)


# LS --------------------------------------------------------------------------------------------------------------
_LS_ENTRY = re.compile(r"^( *)- (.+)$")


def _ls(step: Mapping[str, Any], inp: dict[str, Any]) -> ShellTurn | Skipped:
    path = inp.get("path")
    if not isinstance(path, str) or not path:
        return _skip(step, DROP, BAD_INPUT)
    cwd = step.get("cwd")
    shown = display_path(path, cwd)
    ignore = inp.get("ignore")
    if not isinstance(ignore, list):
        ignore = []
    opts = "".join(f" -I {shlex.quote(str(g))}" for g in ignore if isinstance(g, str) and "/" not in g)
    command = f"ls -1p{opts} {quote_path(shown)}"
    text = _clean(step.get("output") or "")
    if _failed(step):
        msg = _error_text(text)
        if "does not exist" in msg or "ENOENT" in msg or "No such file" in msg:
            return ShellTurn(
                command=command, output=f"ls: cannot access '{shown}': No such file or directory", exit_code=2
            )
        return _skip(step, DROP, not_run_reason(step) or UNMAPPED_ERROR)
    text = text.split("\nNOTE: ", 1)[0]
    if "There are more than" in text:  # the tool listed part of a huge tree: not what ls prints
        return _skip(step, DROP, NOT_TEXT)
    names = []
    for line in text.split("\n"):
        m = _LS_ENTRY.match(line)
        if m is None:
            if line.strip():
                return _skip(step, DROP, NOT_TEXT)
            continue
        if len(m.group(1)) == 2:  # depth 1: the folder's own entries (depth 0 is the folder itself)
            names.append(m.group(2))
    return ShellTurn(command=command, output="\n".join(names), exit_code=0)


_RENDERERS = {
    "read": _read,
    "write": _write,
    "edit": _edit,
    "multiedit": _edit,
    "grep": _grep,
    "glob": _glob,
    "ls": _ls,
}
_READ_ONLY = {"read", "grep", "glob", "ls"}
#: Renderers that turn some tool errors into the shell's own error (the rest are checked for 'never ran').
_MAPS_ERRORS = {"read", "edit", "multiedit", "ls"}
