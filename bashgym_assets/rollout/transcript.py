"""The ONE place where what an operator sees is rendered: orientation, task, observations, the scaffold.

Rollouts, the evaluation and the trainer all import these functions, so a model is trained on exactly the format
it is later dropped into. The scaffold (the instruction that elicits one-command-per-turn behaviour from a teacher)
is added only to what a scaffolded operator sees and is never part of a recorded trajectory (sekft
"imperative-free"): the record keeps orientation, the task or announcement, commands, outputs and the final exit.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Protocol

from pydantic import BaseModel

from bashgym_assets.shell import NUL_IN_TEXT, OPERATOR, bash_syntax_error, is_exit_command

HOSTNAME = "sandbox"
EXIT_COMMAND = "exit"

SCAFFOLD = (
    "You are operating a Linux shell. Each of your replies is typed into the terminal as it is: reply with exactly "
    "one shell command per turn and nothing else (no explanations, no markdown, no code fences). After each "
    "command you will see its output and exit code. Inspect the system, do the task, verify your work, and when "
    "the task is done reply with `exit`."
)


class Message(BaseModel):
    """One chat turn as stored in the lake (``struct{role, content}``)."""

    role: str
    content: str


# A training row's assistant turn may carry ``train: False``: shown to the model as context, never trained (a
# recovery row's mistake, ``training_data.recovery``); the trainer's masks and templates read it
# (``training.masking``). Defined here, with the turn's format, for both of those sibling packages.
UNTRAINED = "train"


def is_untrained(message: Any) -> bool:
    """An assistant turn shown but not trained: the model must see its mistake to learn the fix after it, and
    must not learn to make it."""
    value = message.get(UNTRAINED) if isinstance(message, dict) else getattr(message, UNTRAINED, None)
    return value is False


class _BundleLike(Protocol):
    task: str
    announcement: str | None

    @property  # read-only: a bundle's user is one of a few names (a Literal), which a str attribute would widen
    def user(self) -> str: ...

    @property
    def start_dir(self) -> str: ...


class _ResultLike(Protocol):
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    stdout_truncated_bytes: int
    stderr_truncated_bytes: int


def orientation(bundle: _BundleLike) -> str:
    """The login banner: who and where the operator is (what a person sees when a terminal opens)."""
    prompt_char = "#" if bundle.user == "root" else "$"
    return (
        f"You are logged in to {HOSTNAME} as {bundle.user}. Working directory: {bundle.start_dir}.\n"
        f"{bundle.user}@{HOSTNAME}:{bundle.start_dir}{prompt_char}"
    )


def task_message(bundle: _BundleLike) -> str:
    """What the operator is told: the task, or in sekft mode the announcement shown at login instead of it."""
    return bundle.announcement if bundle.announcement else bundle.task


def initial_messages(bundle: _BundleLike, scaffold: bool = False) -> list[Message]:
    """System orientation + user task; with ``scaffold`` the instruction is appended to the system turn."""
    system = orientation(bundle)
    if scaffold:
        system = f"{system}\n\n{SCAFFOLD}"
    return [Message(role="system", content=system), Message(role="user", content=task_message(bundle))]


def strip_scaffold(messages: list[Message]) -> list[Message]:
    """The record form: the same conversation with the scaffold removed wherever it was put."""
    out = []
    for m in messages:
        content = m.content.replace(f"\n\n{SCAFFOLD}", "").replace(SCAFFOLD, "")
        out.append(Message(role=m.role, content=content))
    return out


def render_observation(result: _ResultLike) -> str:
    """Output and exit code of one command, as the operator's next user turn."""
    parts: list[str] = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stdout_truncated_bytes:
        parts.append(f"[... {result.stdout_truncated_bytes} more bytes of output truncated]")
    if result.stderr:
        parts.append(result.stderr.rstrip("\n"))
    if result.stderr_truncated_bytes:
        parts.append(f"[... {result.stderr_truncated_bytes} more bytes of error output truncated]")
    if result.timed_out:
        parts.append("[command timed out and was killed]")
    if result.exit_code is not None:
        parts.append(f"[exit code: {result.exit_code}]")
    return "\n".join(parts)


def render_rejected_line(error: str) -> str:
    """Observation for a reply the shell could not even parse: bash's own syntax error and exit code 2."""
    return f"{error.strip()}\n[exit code: 2]"


# ---- what the operator typed ------------------------------------------------------------------------------------
_FENCE_RE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)
_PROSE_LINE_RE = re.compile(r"^[A-Z][a-z']*(?:,)?(?:\s+[A-Za-z'(),]+){3,}.*[.:!?]$")
_PROSE_START_RE = re.compile(r"^[A-Z][a-z]*(?:'[a-z]+)?[,!:]?\s+\S+\s+\S+")


# Reply kinds (``TypedLine.kind``): only "command" and "exit" are what a terminal operator types.
COMMAND, EXIT, PROSE, BABBLE, FENCED, EMPTY, SYNTAX_ERROR = (
    "command",
    "exit",
    "prose",
    "babble",
    "fenced",
    "empty",
    "syntax_error",
)
UNUSABLE = (PROSE, BABBLE, FENCED, EMPTY)  # replies that are not even an attempt at a command


class TypedLine(BaseModel):
    """How one operator reply was understood: the line sent to the shell and whether it was a clean command."""

    raw: str
    command: str
    is_command: bool
    is_exit: bool
    syntax_error: str | None = None
    kind: str = COMMAND


def looks_like_prose(text: str) -> bool:
    """A sentence rather than a command: capitalised words ending in punctuation, or markdown around it."""
    lines = [line.strip() for line in shell_lines(text.strip().splitlines()) if line.strip()]
    if any("```" in line for line in lines):
        return True
    # First and last line only: a heredoc body may hold sentences, its first and last lines are shell.
    ends = {lines[0], lines[-1]} if lines else set()
    if lines and _PROSE_START_RE.match(
        lines[0]
    ):  # "Here's what I'd do", "Sure, I will ...": commands are lower-case
        return True
    return any(_PROSE_LINE_RE.match(line) for line in ends if not line.startswith("#"))


_LIST_ITEM_RE = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*\u2022])\s+\S")
_MARKDOWN_RE = re.compile(r"^\s*(?:#{2,6}\s+\w|>\s+\w)|\*\*\w")
_CHAT_TOKEN_RE = re.compile(r"<\|(?:im_start|im_end|endoftext|assistant|user|system)\|>")
_ROLE_LINE_RE = re.compile(r"^(?:assistant|user|system)\s*$")
_HEREDOC_RE = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
MAX_COMMAND_LINES = 40


def shell_lines(lines: list[str]) -> list[str]:
    """The lines bash reads as commands: heredoc bodies (file contents, scripts) are data, not the operator's
    words, so the babble signs (lists, markdown, repeated lines) are not looked for there."""
    out: list[str] = []
    pending: list[tuple[str, bool]] = []  # delimiters still open, in order, and whether tabs are stripped
    for line in lines:
        if pending:
            delim, strip_tabs = pending[0]
            if (line.lstrip("\t") if strip_tabs else line).rstrip() == delim:
                pending.pop(0)
            continue
        out.append(line)
        pending += [(m.group(3), m.group(1) == "-") for m in _HEREDOC_RE.finditer(line)]
    return out


def looks_like_babble(text: str, truncated: bool = False) -> bool:
    """Text a terminal cannot use and no person would type: what a small model emits when it has lost the thread.

    Signs (any one): the reply ran into the token cap without ending (unless it is one complete command), chat
    control tokens or role names leaking into the text, a numbered or bulleted list (it may even parse as shell:
    ``1. ls`` is a valid command line that runs a program called ``1.``), markdown headers or bold, the same line
    three or more times, an overlong reply that is not a heredoc, or mostly non-printable or non-ASCII characters.
    """
    stripped = text.strip()
    if not stripped:
        return False
    if _CHAT_TOKEN_RE.search(stripped):
        return True
    all_lines = stripped.splitlines()
    lines = [line for line in shell_lines(all_lines) if line.strip()]
    if any(_ROLE_LINE_RE.match(line.strip()) for line in lines):
        return True
    if sum(bool(_LIST_ITEM_RE.match(line)) for line in lines) >= 2:
        return True
    if any(_MARKDOWN_RE.match(line) for line in lines):
        return True
    counts: dict[str, int] = {}
    for line in lines:
        key = line.strip()
        counts[key] = counts.get(key, 0) + 1
        if counts[key] >= 3 and len(key) > 1 and key not in ("EOF", "fi", "done", "}", "esac"):
            return True
    if len(lines) > MAX_COMMAND_LINES:
        return True
    shell_text = "\n".join(lines)
    odd = sum(1 for ch in shell_text if not (ch.isprintable() or ch in "\n\t") or ord(ch) > 0x2FFF)
    if odd > max(8, len(shell_text) // 5):
        return True
    if truncated:
        # Cut off by the token cap: babble unless what is there is already a whole, parseable single line.
        return len(all_lines) > 1 or bash_syntax_error(stripped, policy=OPERATOR) is not None
    return False


def parse_reply(reply: str, truncated: bool = False) -> TypedLine:
    """Understand one reply: a single fenced block is unwrapped (but not clean); prose and babble are recorded as
    such. ``truncated``: generation stopped at its token cap rather than at the end-of-turn token."""
    raw = reply
    text = reply.strip()
    fenced = _FENCE_RE.match(text)
    command = fenced.group(1).strip() if fenced else text
    is_exit = is_exit_command(command)
    if not command:
        return TypedLine(
            raw=raw, command="", is_command=False, is_exit=False, syntax_error="empty reply", kind=EMPTY
        )
    syntax = None if is_exit else bash_syntax_error(command, policy=OPERATOR)
    if looks_like_babble(text, truncated=truncated) or syntax == NUL_IN_TEXT:
        kind = BABBLE
    elif fenced:
        kind = FENCED
    elif looks_like_prose(text):
        kind = PROSE
    elif syntax is not None:
        kind = SYNTAX_ERROR
    else:
        kind = EXIT if is_exit else COMMAND
    return TypedLine(
        raw=raw,
        command=command,
        is_command=kind in (COMMAND, EXIT),
        is_exit=is_exit,
        syntax_error=syntax,
        kind=kind,
    )


def as_dicts(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


def quote(arg: str) -> str:
    return shlex.quote(arg)
