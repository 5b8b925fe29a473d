"""Agent tool calls rendered as shell commands: each tool's rendering, run in a real bash on a temp folder (the
command leaves the file the tool left / prints what the tool recorded), the tools with no shell form, the
builder's guard, and the real Claude Code fixtures (every rendered assistant turn passes ``bash -n``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from bashgym_assets.ingest.claude_code import ClaudeCodeAdapter
from bashgym_assets.quality.segment import segment_session
from bashgym_assets.rollout.transcript import parse_reply
from bashgym_assets.shell import OPERATOR, TRAINING_DATA, bash_syntax_error
from bashgym_assets.testing import datasets as syn
from bashgym_assets.training_data import build as ds
from bashgym_assets.training_data import shell_render as sr
from bashgym_assets.training_data.render import render_segment, step_observation
from bashgym_assets.training_data.shell_render import ShellTurn, Skipped, render_step

REMINDER = (
    "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it looks malicious."
    "\n</system-reminder>\n"
)
ENV = {**os.environ, "LC_ALL": "C"}


def step(
    tool: str,
    inp: dict | None,
    output: str = "",
    *,
    cwd: Path | str,
    is_error: bool = False,
    exit_code: int | None = None,
    index: int = 0,
    command: str | None = None,
) -> dict:
    """A step as the Claude Code adapter records it (exit code 1 for is_error, else 0)."""
    code = exit_code if exit_code is not None else (1 if is_error else 0)
    return {
        "index": index,
        "tool_name": tool,
        "tool_use_id": f"t{index}",
        "input": json.dumps(inp or {}),
        "command": command,
        "output": output,
        "exit_code": code,
        "success": code == 0 and not is_error,
        "is_error": is_error,
        "cwd": str(cwd),
        "sidechain": False,
        "prompt_index": 0,
    }


def claude_read(content: str, offset: int | None = None, limit: int | None = None) -> str:
    """What Claude Code's Read returns: ``content.split('\\n')`` numbered ``     N→text``, then a reminder."""
    if content == "":
        return "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
    lines = content.split("\n")
    start = max(offset or 1, 1)
    chosen = lines[start - 1 : start - 1 + (limit or 2000)]
    if not chosen:
        return (
            f"<system-reminder>Warning: the file exists but is shorter than the provided offset ({start}). "
            f"The file has {len(lines)} lines.</system-reminder>"
        )
    return "\n".join(f"{n:6d}\u2192{t}" for n, t in enumerate(chosen, start=start)) + REMINDER


def sh(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=ENV, timeout=30
    )


def turn_of(s: dict) -> ShellTurn:
    r = render_step(s)
    assert isinstance(r, ShellTurn), r
    assert bash_syntax_error(r.command, policy=TRAINING_DATA) is None, r.command
    return r


def assert_prints(turn: ShellTurn, cwd: Path) -> subprocess.CompletedProcess:
    """Running the command prints what the turn says (stdout, or stderr for a failure) with its exit code."""
    proc = sh(turn.command, cwd)
    printed = proc.stdout if proc.returncode == 0 else proc.stderr
    assert (printed.rstrip("\n"), proc.returncode) == (turn.output.rstrip("\n"), turn.exit_code), turn.command
    return proc


# ---- Read ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "content",
    [
        "a\nb\n",
        "a\nb",
        "x\n\n",
        "",
        "h\u00e9llo \u2192 w\u00f6rld \u65e5\u672c\n\ttab\n",
        "one line",
        "quotes ' \" ` $HOME $(x)\n",
        "\n\nstarts blank\n",
    ],
)
def test_read_renders_cat_n_with_the_recorded_listing(tmp_path: Path, content: str) -> None:
    (tmp_path / "f.txt").write_text(content, encoding="utf-8")
    turn = turn_of(step("Read", {"file_path": str(tmp_path / "f.txt")}, claude_read(content), cwd=tmp_path))
    assert turn.command == "cat -n f.txt" and turn.exit_code == 0
    assert "system-reminder" not in turn.output and "\u2192" not in turn.output.replace("\u2192 w", "")
    assert_prints(turn, tmp_path)


@pytest.mark.parametrize(("offset", "limit"), [(3, 4), (None, 5), (8, None), (9, 10), (1, 1), (40, 5)])
def test_read_with_offset_and_limit_renders_sed(
    tmp_path: Path, offset: int | None, limit: int | None
) -> None:
    content = "".join(f"line {i}\n" for i in range(1, 11))
    (tmp_path / "data.txt").write_text(content)
    inp = {"file_path": str(tmp_path / "data.txt"), "offset": offset, "limit": limit}
    turn = turn_of(
        step(
            "Read",
            {k: v for k, v in inp.items() if v is not None},
            claude_read(content, offset, limit),
            cwd=tmp_path,
        )
    )
    first = max(offset or 1, 1)
    assert turn.command == f"sed -n '{first},{first + (limit or 2000) - 1}p' data.txt"
    assert_prints(turn, tmp_path)


def test_read_of_a_long_file_stops_where_the_tool_did(tmp_path: Path) -> None:
    content = "".join(f"{i}\n" for i in range(2500))
    (tmp_path / "big.txt").write_text(content)
    turn = turn_of(step("Read", {"file_path": str(tmp_path / "big.txt")}, claude_read(content), cwd=tmp_path))
    assert turn.command == "cat -n big.txt | head -n 2000"
    assert_prints(turn, tmp_path)


@pytest.mark.parametrize(
    ("name", "message", "ranged"),
    [
        ("missing.txt", "<tool_use_error>File does not exist.</tool_use_error>", False),
        (
            "my file.txt",
            "<tool_use_error>File does not exist. Did you mean my-file.txt?</tool_use_error>",
            False,
        ),
        ("sub", "EISDIR: illegal operation on a directory, read", False),
        ("missing.txt", "<tool_use_error>File does not exist.</tool_use_error>", True),
        ("sub", "EISDIR: illegal operation on a directory, read", True),
    ],
)
def test_read_errors_become_the_shells_errors(tmp_path: Path, name: str, message: str, ranged: bool) -> None:
    (tmp_path / "sub").mkdir()
    inp = {"file_path": str(tmp_path / name), **({"offset": 2, "limit": 3} if ranged else {})}
    turn = turn_of(step("Read", inp, message, cwd=tmp_path, is_error=True))
    assert turn.exit_code != 0 and turn.output.startswith("sed: " if ranged else "cat: ")
    assert_prints(turn, tmp_path)


def test_read_of_an_image_or_an_unknown_error_is_dropped(tmp_path: Path) -> None:
    image = render_step(
        step("Read", {"file_path": "/w/a.png"}, "[image image/png, 812 bytes base64]", cwd="/w")
    )
    assert isinstance(image, Skipped) and image.action == "drop" and image.reason == f"Read: {sr.NOT_TEXT}"
    big = render_step(
        step(
            "Read",
            {"file_path": "/w/a.log"},
            "File content (40000 tokens) exceeds maximum allowed",
            cwd="/w",
            is_error=True,
        )
    )
    assert isinstance(big, Skipped) and big.action == "drop"


# ---- Write --------------------------------------------------------------------------------------------------------
WRITE_CONTENTS = [
    "plain\n",
    "no final newline",
    "",
    "has\nEOF\nline\n",
    "EOF\nEOF_1\nboth delimiters",
    "EOF",
    "quotes ' \" `x` $HOME $(rm -rf /) \\n \\ end\n",
    "unicode \u2192 \u00fc \u65e5\u672c \U0001f600\n",
    "trailing\n\n\n",
    "\tindented\n  spaces  \n",
    "crlf\r\nline\r\n",
    "<<'EOF'\nnested heredoc\nEOF\n",
    "PYEOF\n'''\n\"\"\"\n",
]


@pytest.mark.parametrize("content", WRITE_CONTENTS)
@pytest.mark.parametrize("name", ["out.txt", "new dir/it's here.txt", "a/b/c.py"])
def test_write_heredoc_leaves_exactly_the_content(tmp_path: Path, content: str, name: str) -> None:
    s = step(
        "Write",
        {"file_path": str(tmp_path / name), "content": content},
        f"File created successfully at: {tmp_path / name}",
        cwd=tmp_path,
    )
    turn = turn_of(s)
    assert (turn.output, turn.exit_code) == ("", 0)
    assert re.search(r"(?:cat|head -c -1) > .+ <<'EOF(?:_\d+)?'\n", turn.command)
    delim = turn.command.split("<<'", 1)[1].split("'", 1)[0]
    assert delim not in content.split("\n")
    assert ("mkdir -p" in turn.command) == ("/" in name)
    proc = sh(turn.command, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / name).read_bytes() == content.encode()


def test_write_outside_the_working_directory_uses_the_absolute_path(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    turn = turn_of(
        step("Write", {"file_path": str(tmp_path / "other" / "x.txt"), "content": "x\n"}, "ok", cwd=work)
    )
    assert turn.command.startswith(
        f"mkdir -p {tmp_path / 'other'} && cat > {tmp_path / 'other' / 'x.txt'} <<'EOF'"
    )
    assert sh(turn.command, work).returncode == 0 and (tmp_path / "other" / "x.txt").read_text() == "x\n"


def test_write_refused_by_the_harness_is_dropped() -> None:
    for output, why in [
        (
            "<tool_use_error>File has not been read yet. Read it first before writing to it."
            "</tool_use_error>",
            sr.NOT_RUN_REFUSED,
        ),
        (
            "Claude requested permissions to write to /w/x, but you haven't granted it yet.",
            sr.NOT_RUN_PERMISSION,
        ),
        (
            "The user doesn't want to proceed with this tool use. The tool use was rejected.",
            sr.NOT_RUN_REJECTED,
        ),
    ]:
        r = render_step(step("Write", {"file_path": "/w/x", "content": "y"}, output, cwd="/w", is_error=True))
        assert isinstance(r, Skipped) and (r.action, r.reason) == ("drop", f"Write: {why}")


# ---- Edit / MultiEdit ---------------------------------------------------------------------------------------------
ORIGINAL = "def f():\n    return 'a'  # \u00fc\n\nx = \"a\\n\"\nPYEOF\nend\n"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("return 'a'", 'return "b"'),
        ('x = "a\\n"\nPYEOF\n', "x = '''\nEOF\n'''\n"),
        ("\u00fc", "\U0001f600 $HOME"),
        ("def f():\n", ""),
        ("end\n", "end\n" * 3),
    ],
)
def test_edit_replaces_the_exact_text(tmp_path: Path, old: str, new: str) -> None:
    (tmp_path / "m.py").write_text(ORIGINAL, encoding="utf-8")
    turn = turn_of(
        step(
            "Edit",
            {"file_path": str(tmp_path / "m.py"), "old_string": old, "new_string": new},
            "The file has been updated. Here's the result of running `cat -n` ...",
            cwd=tmp_path,
        )
    )
    assert turn.command.startswith("python3 - <<'PYEOF'\n") and (turn.output, turn.exit_code) == ("", 0)
    assert_prints(turn, tmp_path)
    assert (tmp_path / "m.py").read_text(encoding="utf-8") == ORIGINAL.replace(old, new, 1)


def test_edit_fails_like_the_tool_when_the_old_text_is_absent_or_not_unique(tmp_path: Path) -> None:
    target = tmp_path / "src" / "m.py"
    target.parent.mkdir()
    target.write_text("a = 1\na = 1\nb = 2\n")
    absent = turn_of(
        step(
            "Edit",
            {"file_path": str(target), "old_string": "zzz", "new_string": "y"},
            "<tool_use_error>String to replace not found in file.\nString: zzz</tool_use_error>",
            cwd=tmp_path,
            is_error=True,
        )
    )
    assert (absent.output, absent.exit_code) == ("src/m.py: old text not found", 1)
    twice = turn_of(
        step(
            "Edit",
            {"file_path": str(target), "old_string": "a = 1", "new_string": "a = 3"},
            "<tool_use_error>Found 2 matches of the string to replace, but replace_all is false. To "
            "replace all occurrences, set replace_all to true.\nString: a = 1</tool_use_error>",
            cwd=tmp_path,
            is_error=True,
        )
    )
    assert (twice.output, twice.exit_code) == ("src/m.py: old text found 2 times, expected exactly once", 1)
    missing = turn_of(
        step(
            "Edit",
            {"file_path": str(tmp_path / "nope.py"), "old_string": "a", "new_string": "b"},
            "<tool_use_error>File does not exist.</tool_use_error>",
            cwd=tmp_path,
            is_error=True,
        )
    )
    assert missing.output == "nope.py: No such file or directory"
    for turn in (absent, twice, missing):
        assert_prints(turn, tmp_path)
    assert target.read_text() == "a = 1\na = 1\nb = 2\n"  # failures leave the file as it was

    every = turn_of(
        step(
            "Edit",
            {"file_path": str(target), "old_string": "a = 1", "new_string": "a = 3", "replace_all": True},
            "ok",
            cwd=tmp_path,
        )
    )
    assert_prints(every, tmp_path)
    assert target.read_text() == "a = 3\na = 3\nb = 2\n"


def test_multiedit_applies_in_order_all_or_nothing(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_text("foo baz\nqux\n")
    edits = [
        {"old_string": "foo", "new_string": "bar"},
        {"old_string": "bar baz", "new_string": "done"},
        {"old_string": "q", "new_string": "Q", "replace_all": True},
    ]
    turn = turn_of(step("MultiEdit", {"file_path": str(f), "edits": edits}, "Applied 3 edits", cwd=tmp_path))
    assert_prints(turn, tmp_path)
    assert f.read_text() == "done\nQux\n"
    f.write_text("foo baz\n")
    failing = turn_of(
        step(
            "MultiEdit",
            {"file_path": str(f), "edits": [edits[0], {"old_string": "nope", "new_string": "x"}]},
            "<tool_use_error>String to replace not found in file.\nString: nope</tool_use_error>",
            cwd=tmp_path,
            is_error=True,
        )
    )
    assert_prints(failing, tmp_path)
    assert f.read_text() == "foo baz\n"


def test_edit_with_empty_old_text_creates_the_file_and_refusals_are_dropped(tmp_path: Path) -> None:
    turn = turn_of(
        step(
            "Edit",
            {"file_path": str(tmp_path / "n.txt"), "old_string": "", "new_string": "hi"},
            "ok",
            cwd=tmp_path,
        )
    )
    assert sh(turn.command, tmp_path).returncode == 0 and (tmp_path / "n.txt").read_text() == "hi"
    for output in [
        "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>",
        "<tool_use_error>No changes to make: old_string and new_string are exactly the same."
        "</tool_use_error>",
    ]:
        r = render_step(
            step(
                "Edit",
                {"file_path": "/w/a", "old_string": "a", "new_string": "a"},
                output,
                cwd="/w",
                is_error=True,
            )
        )
        assert isinstance(r, Skipped) and r.reason == f"Edit: {sr.NOT_RUN_REFUSED}"


# ---- Grep / Glob / LS ---------------------------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel, text in {
        "src/a.py": "def foo():\n    return 1\n# foo again\n",
        "src/b.ts": "const Foo = 2;\n",
        "src/deep/z.ts": "let x = 42;\n",
        "src/y.tsx": "<Foo />\n",
        "docs/readme.md": "foo bar\n",
        "a.md": "-dash line\nno\n",
        ".hidden/h.md": "x\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def _abs(root: Path, *rels: str) -> list[str]:
    return [str(root / r) for r in rels]


@pytest.mark.parametrize(
    ("inp", "recorded", "command"),
    [
        ({"pattern": "foo"}, "Found 2 files\n{r}/src/a.py\n{r}/docs/readme.md", "grep -rl foo ."),
        (
            {"pattern": "foo", "-i": True},
            "Found 4 files\n{r}/src/a.py\n{r}/src/b.ts\n{r}/src/y.tsx\n{r}/docs/readme.md",
            "grep -rli foo .",
        ),
        (
            {
                "pattern": "foo",
                "path": "{r}/src",
                "glob": "*.py",
                "output_mode": "content",
                "-n": True,
                "-C": 1,
            },
            "{r}/src/a.py-1-def foo():\n{r}/src/a.py-2-    return 1\n{r}/src/a.py:3:# foo again".replace(
                "a.py-1-def foo", "a.py:1:def foo"
            ),
            "grep -rn -C 1 --include='*.py' foo src",
        ),
        (
            {"pattern": "foo", "output_mode": "count"},
            "{r}/src/a.py:2\n{r}/docs/readme.md:1\n\nFound 3 total occurrences across 2 files.",
            "grep -rc foo . | grep -v ':0$'",
        ),
        (
            {"pattern": "Foo|x", "type": "ts"},
            "Found 3 files\n{r}/src/b.ts\n{r}/src/y.tsx\n{r}/src/deep/z.ts",
            "grep -rlE --include='*.ts' --include='*.tsx' --include='*.cts' --include='*.mts' 'Foo|x' .",
        ),
        (
            {"pattern": "\\d{2}", "output_mode": "content", "-n": False},
            "{r}/src/deep/z.ts:let x = 42;",
            "grep -rP '\\d{2}' .",
        ),
        (
            {"pattern": "-dash", "path": "{r}/a.md", "output_mode": "content", "-n": True},
            "1:-dash line",
            "grep -rn -e -dash a.md",
        ),
        ({"pattern": "nothing here"}, "No files found", "grep -rl 'nothing here' ."),
        (
            {"pattern": "foo", "glob": "**/*.{py,md}", "head_limit": 1},
            "Found 2 files\n{r}/src/a.py",
            "grep -rl --include='*.py' --include='*.md' foo . | head -n 1",
        ),
    ],
)
def test_grep_renders_an_equivalent_grep(tree: Path, inp: dict, recorded: str, command: str) -> None:
    inp = {k: v.replace("{r}", str(tree)) if isinstance(v, str) else v for k, v in inp.items()}
    turn = turn_of(step("Grep", inp, recorded.replace("{r}", str(tree)), cwd=tree))
    assert turn.command == command
    assert "Found" not in turn.output and str(tree) not in turn.output
    proc = sh(turn.command, tree)
    assert proc.returncode == turn.exit_code
    if "head" in command:
        assert len(proc.stdout.splitlines()) == 1 and proc.stdout.strip() in {
            "./src/a.py",
            "./docs/readme.md",
        }
    else:  # same lines (grep's directory order is not the tool's modification-time order)
        assert sorted(proc.stdout.splitlines()) == sorted(turn.output.splitlines())


def test_grep_pagination_and_the_cached_syntax_check() -> None:
    turn = turn_of(step("Grep", {"pattern": "x", "offset": 10, "head_limit": 5}, "No files found", cwd="/w"))
    assert turn.command == "grep -rl x . | tail -n +11 | head -n 5" and (turn.output, turn.exit_code) == (
        "",
        0,
    )
    for command in ["ls -la", "done", "fi", "for x in a", "echo 'a", "cat <<'EOF'\nx\nEOF", "exit"]:
        assert (sr.syntax_error(command) is None) == (
            bash_syntax_error(command, policy=TRAINING_DATA) is None
        ), command


def test_multiline_grep_is_dropped() -> None:
    r = render_step(step("Grep", {"pattern": "a\\nb", "multiline": True}, "Found 0 files", cwd="/w"))
    assert isinstance(r, Skipped) and r.reason == f"Grep: {sr.BAD_INPUT}"


@pytest.mark.parametrize(
    ("pattern", "path", "command"),
    [
        ("**/*.md", None, "find . -type f -name '*.md'"),
        ("*.md", None, "find . -maxdepth 1 -type f -name '*.md'"),
        ("src/**/*.ts", None, "find src -type f -name '*.ts'"),
        ("src/*.{ts,tsx}", None, "find src -maxdepth 1 -type f \\( -name '*.ts' -o -name '*.tsx' \\)"),
        ("**/deep/*.ts", None, "find . -type f -path './*/deep/*.ts'"),
        ("*.ts", "src", "find src -maxdepth 1 -type f -name '*.ts'"),
        ("a.md", None, "find . -maxdepth 1 -type f -name a.md"),
        ("**/*.none", None, "find . -type f -name '*.none'"),
    ],
)
def test_glob_renders_find(tree: Path, pattern: str, path: str | None, command: str) -> None:
    base = tree / path if path else tree
    matched = sorted(
        {str(p) for pat in (sr.expand_braces(pattern) or []) for p in base.glob(pat) if p.is_file()}
    )
    inp = {"pattern": pattern, **({"path": str(base)} if path else {})}
    turn = turn_of(step("Glob", inp, "\n".join(matched) or "No files found", cwd=tree))
    assert turn.command == command and turn.exit_code == 0
    proc = sh(turn.command, tree)
    assert proc.returncode == 0
    assert sorted(proc.stdout.splitlines()) == sorted(turn.output.splitlines())


def test_glob_truncated_and_home_paths() -> None:
    turn = turn_of(
        step("Glob", {"pattern": "**/*.md", "path": "~/.claude/commands"}, "No files found", cwd="/w")
    )
    assert turn.command == "find ~/.claude/commands -type f -name '*.md'"
    many = (
        "\n".join(f"/w/f{i}.py" for i in range(100))
        + "\n(Results are truncated. Consider using a more specific path or pattern.)"
    )
    turn = turn_of(step("Glob", {"pattern": "*.py"}, many, cwd="/w"))
    assert turn.command.endswith("| head -n 100") and turn.output.splitlines()[0] == "./f0.py"
    assert len(turn.output.splitlines()) == 100


def test_ls_renders_the_listed_names(tree: Path) -> None:
    recorded = (
        f"- {tree}/\n  - a.md\n  - docs/\n    - readme.md\n  - src/\n    - a.py\n    - deep/\n      - z.ts\n"
        "\nNOTE: do any of the files above seem malicious? If so, you MUST refuse to continue work."
    )
    turn = turn_of(step("LS", {"path": str(tree)}, recorded, cwd=tree))
    assert (turn.command, turn.output) == ("ls -1p .", "a.md\ndocs/\nsrc/")
    assert_prints(turn, tree)
    sub = turn_of(
        step(
            "LS",
            {"path": str(tree / "src"), "ignore": ["*.ts"]},
            f"- {tree}/src/\n  - a.py\n  - deep/\n    - z.ts\n  - y.tsx\n",
            cwd=tree,
        )
    )
    assert sub.command == "ls -1p -I '*.ts' src"
    assert_prints(sub, tree)


# ---- Bash and the tools with no shell form ---------------------------------------------------------------------
def test_bash_is_the_command_itself() -> None:
    t = turn_of(
        step(
            "Bash",
            {"command": "make test"},
            "Exit code 2\nboom",
            cwd="/w",
            exit_code=2,
            is_error=True,
            command="make test",
        )
    )
    assert (t.command, step_observation(t)) == ("make test", "boom\n[exit code: 2]")
    ok = turn_of(step("Bash", {"command": "ls"}, "a\nb\n", cwd="/w", command="ls"))
    assert step_observation(ok) == "a\nb\n[exit code: 0]"


def test_bash_that_cannot_run_here() -> None:
    bg = render_step(
        step(
            "Bash",
            {"command": "npm run dev", "run_in_background": True},
            "Command running in background with ID: bash_1",
            cwd="/w",
            command="npm run dev",
        )
    )
    assert isinstance(bg, Skipped) and (bg.action, bg.reason) == ("cut", f"Bash: {sr.BACKGROUND_SHELL}")
    broken_failed = render_step(
        step(
            "Bash",
            {"command": "for x in; do"},
            "syntax error",
            cwd="/w",
            exit_code=2,
            is_error=True,
            command="for x in; do",
        )
    )
    assert isinstance(broken_failed, Skipped) and (broken_failed.action, broken_failed.reason) == (
        "drop",
        f"Bash: {sr.DOES_NOT_PARSE}",
    )
    zsh_ok = render_step(
        step("Bash", {"command": "echo ${(j:,:)arr"}, "a,b", cwd="/w", command="echo ${(j:,:)arr")
    )
    assert isinstance(zsh_ok, Skipped) and (zsh_ok.action, zsh_ok.reason) == (
        "cut",
        f"Bash: {sr.DOES_NOT_PARSE_RAN}",
    )
    rejected = render_step(
        step(
            "Bash",
            {"command": "rm -rf build"},
            "The user doesn't want to proceed with this tool use. The tool use was rejected.",
            cwd="/w",
            is_error=True,
            command="rm -rf build",
        )
    )
    assert isinstance(rejected, Skipped) and rejected.action == "drop"


@pytest.mark.parametrize(
    ("tool", "action"),
    [
        ("TodoWrite", "drop"),
        ("WebFetch", "drop"),
        ("WebSearch", "drop"),
        ("ExitPlanMode", "drop"),
        ("Task", "cut"),
        ("Agent", "cut"),
        ("NotebookEdit", "cut"),
        ("mcp__github__create_issue", "cut"),
        ("BashOutput", "cut"),
        ("KillBash", "cut"),
        ("SomeFutureTool", "cut"),
    ],
)
def test_tools_with_no_shell_form_are_dropped_or_cut_with_a_reason(tool: str, action: str) -> None:
    r = render_step(step(tool, {"anything": 1}, "ok", cwd="/w"))
    assert isinstance(r, Skipped) and r.action == action and r.tool == tool
    assert (
        r.reason == f"{tool}: {sr.NO_SHELL_EQUIVALENT if action == 'drop' else sr.NO_SHELL_EQUIVALENT_EFFECT}"
    )


def test_segment_drops_turns_and_ends_at_a_cut() -> None:
    steps = [
        step("TodoWrite", {"todos": []}, "ok", cwd="/w", index=0),
        step("Read", {"file_path": "/w/a.txt"}, claude_read("hi\n"), cwd="/w", index=1),
        step("Bash", {"command": "ls"}, "a.txt", cwd="/w", index=2, command="ls"),
        step("Task", {"prompt": "do the rest"}, "done", cwd="/w", index=3),
        step("Bash", {"command": "make"}, "", cwd="/w", index=4, command="make"),
    ]
    r = render_segment("do it", steps)
    assert [m["content"] for m in r.messages[2:]] == ["cat -n a.txt", "     1\thi\n[exit code: 0]", "ls"]
    assert r.commands == 2 and r.cut is not None and r.cut.tool == "Task"
    assert [s.action for s in r.skipped] == ["drop", "cut"]
    whole = render_segment("do it", steps[:3])
    assert whole.messages[-1] == {"role": "assistant", "content": "exit"} and whole.cut is None


def test_segment_whose_last_step_never_ran_gets_no_exit() -> None:
    read = step("Read", {"file_path": "/w/a.txt"}, claude_read("hi\n"), cwd="/w", index=0)
    denied = step(
        "Write",
        {"file_path": "/w/CLAUDE.md", "content": "x"},
        "Claude requested permissions to write to /w/CLAUDE.md, but you haven't granted it yet.",
        cwd="/w",
        index=1,
        is_error=True,
    )
    ls = step("Bash", {"command": "ls"}, "a.txt", cwd="/w", index=2, command="ls")
    r = render_segment("write CLAUDE.md", [read, denied])
    assert r.messages[-1] == {"role": "assistant", "content": "cat -n a.txt"}
    assert (
        r.unfinished is not None
        and r.unfinished.reason == f"Write: {sr.NOT_RUN_PERMISSION}"
        and r.cut is None
    )
    later = render_segment("write CLAUDE.md", [read, denied, ls])  # the agent went on: the end is a real end
    assert later.unfinished is None and later.messages[-1]["content"] == "exit"


# ---- the builder --------------------------------------------------------------------------------------------------
def test_build_sft_counts_refusals_and_quarantines_what_has_no_command() -> None:
    only_tools = syn.segment(
        "sess-x",
        0,
        "plan the work",
        [
            step("TodoWrite", {}, "ok", cwd="/w", index=0),
            step("Task", {"prompt": "p"}, "done", cwd="/w", index=1),
        ],
        "gold",
        repo="r",
    )
    mixed = syn.segment(
        "sess-y",
        0,
        "show the file",
        [
            step("TodoWrite", {}, "ok", cwd="/w", index=0),
            step("Read", {"file_path": "/w/a"}, claude_read("x"), cwd="/w", index=1),
            step(
                "Bash",
                {"command": "for x in; do"},
                "bash: syntax error",
                cwd="/w",
                index=2,
                exit_code=2,
                command="for x in; do",
            ),
        ],
        "gold",
        repo="r",
    )
    res = ds.build_sft([only_tools, mixed], [])
    assert [r["source"] for r in res.rows] == ["trace:sess-y#0"]
    assert [m["content"] for m in res.rows[0]["messages"] if m["role"] == "assistant"] == ["cat -n a", "exit"]
    (q,) = res.quarantine
    assert q.reason == f"no step renders as a shell command (Task: {sr.NO_SHELL_EQUIVALENT_EFFECT})"
    assert res.counts["trace_turns_dropped"] == 3 and res.counts["trace_segments_cut"] == 1
    assert res.counts[f"dropped: TodoWrite: {sr.NO_SHELL_EQUIVALENT}"] == 2
    assert res.counts[f"dropped: Bash: {sr.DOES_NOT_PARSE}"] == 1
    assert res.counts[f"cut: Task: {sr.NO_SHELL_EQUIVALENT_EFFECT}"] == 1


def test_build_sft_guard_quarantines_any_row_bash_cannot_parse() -> None:
    good = syn.trajectory("s1", "list files", ["ls -la"], kept=True)
    bad = syn.trajectory("s2", "list things", ["ls", "if then fi"], kept=True)
    res = ds.build_sft([], [good, bad])
    assert [r["scenario_id"] for r in res.rows] == ["s1"]
    (q,) = res.quarantine
    assert q.source == "trajectory:s2/s2-0" and q.reason.startswith(
        "assistant turn 4 does not parse (bash -n): "
    )
    assert ds.unparseable_turn(res.rows[0]["messages"]) is None


# ---- the real Claude Code fixtures --------------------------------------------------------------------------------
def _fixture_sessions(folder: Path) -> list:
    adapter = ClaudeCodeAdapter()
    return [
        s
        for p in sorted(folder.glob("*.jsonl"))
        for s in adapter.parse(p, repo_of=lambda cwd: ("fixture", cwd, None)).sessions
    ]


def _pseudo_segments(session) -> list[tuple[str, list[dict]]]:
    """Every segment of the main agent plus each subagent's steps as a segment of its own (so all steps render)."""
    out = [(seg.prompt, [s.model_dump() for s in seg.steps]) for seg in segment_session(session)]
    agents: dict[str, list[dict]] = {}
    for s in session.steps:
        if s.sidechain:
            agents.setdefault(s.agent_id or "side", []).append(dict(s.model_dump(), sidechain=False))
    return out + [(f"subagent {a}", steps) for a, steps in agents.items()]


def test_real_fixtures_every_rendered_turn_parses(claude_fixtures: Path) -> None:
    reasons: Counter = Counter()
    rendered_tools: Counter = Counter()
    for session in _fixture_sessions(claude_fixtures):
        for s in session.steps:
            r = render_step(s.model_dump())
            if isinstance(r, Skipped):
                reasons[(r.action, r.reason)] += 1
            else:
                rendered_tools[s.tool_name] += 1
        for prompt, steps in _pseudo_segments(session):
            seg = render_segment(prompt, steps)
            for m in seg.messages:
                if m["role"] == "assistant":
                    assert bash_syntax_error(m["content"], policy=TRAINING_DATA) is None, m["content"][:300]
                    # and the evaluator reads it as a command too (heredoc bodies are data, not babble)
                    assert parse_reply(m["content"]).kind in ("command", "exit"), m["content"][:300]
                    assert not re.match(r"^[A-Z]\w+ \{", m["content"]), m["content"][:100]
    # every Read/Write/Edit/MultiEdit/Glob that ran rendered; what did not is refused for a reason, never faked
    assert rendered_tools["Read"] == 31 and rendered_tools["Glob"] == 11 and rendered_tools["Bash"] == 65
    assert rendered_tools["Write"] == 28 and rendered_tools["Edit"] + rendered_tools["MultiEdit"] == 4
    assert reasons == Counter(
        {
            ("drop", f"TodoWrite: {sr.NO_SHELL_EQUIVALENT}"): 27,
            ("cut", f"Task: {sr.NO_SHELL_EQUIVALENT_EFFECT}"): 8,
            ("cut", f"BashOutput: {sr.NO_SHELL_EQUIVALENT_EFFECT}"): 5,
            ("cut", f"KillBash: {sr.NO_SHELL_EQUIVALENT_EFFECT}"): 3,
            ("cut", f"Bash: {sr.BACKGROUND_SHELL}"): 3,
            ("drop", f"Edit: {sr.NOT_RUN_REFUSED}"): 7,
            ("drop", f"MultiEdit: {sr.NOT_RUN_REFUSED}"): 2,
            ("drop", f"Write: {sr.NOT_RUN_REFUSED}"): 5,
            ("drop", f"Write: {sr.NOT_RUN_PERMISSION}"): 1,
        }
    )


def test_real_fixtures_replayed_in_bash_reproduce_the_recorded_files(
    claude_fixtures: Path, tmp_path: Path
) -> None:
    """Replay each session's Read/Write/Edit steps (all agents, in time order) under a temp root: a Read of a file
    whose content the replay knows (seeded by an earlier full Read, or written/edited since, and named by no Bash
    command in between) prints exactly the recorded listing; each Write/Edit leaves the content the tool did."""
    root = "/path/to/Demo"
    counts: Counter = Counter()
    for n, session in enumerate(_fixture_sessions(claude_fixtures)):
        base = tmp_path / f"s{n}"
        known: dict[str, str] = {}  # path -> how the replay knows its content: read | write | edit
        for raw in (st.model_dump() for st in session.steps):
            s = {k: v.replace(root, str(base)) if isinstance(v, str) else v for k, v in raw.items()}
            cwd = Path(s["cwd"])
            cwd.mkdir(parents=True, exist_ok=True)
            tool, inp = s["tool_name"], json.loads(s["input"] or "{}")
            r = render_step(s)
            if tool == "Bash":  # a command naming a file may change it: forget that file
                known = {p: how for p, how in known.items() if Path(p).name not in (s["command"] or "")}
                continue
            if isinstance(r, Skipped) or tool not in ("Read", "Write", "Edit", "MultiEdit"):
                continue
            path = inp["file_path"]
            if tool == "Read" and path not in known and r.exit_code == 0 and r.command.startswith("cat -n"):
                listing = sr._clean(s["output"]).split("\n")
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text("\n".join(ln.split("\u2192", 1)[1] for ln in listing), encoding="utf-8")
                known[path] = "read"
            if tool == "Read" and path in known:
                assert_prints(r, cwd)
                counts[f"read after {known[path]}"] += 1
            elif tool == "Write":
                assert sh(r.command, cwd).returncode == 0
                assert Path(path).read_text(encoding="utf-8") == inp["content"]
                known[path] = "write"
                counts["write"] += 1
            elif tool in ("Edit", "MultiEdit") and path in known:
                before = Path(path).read_text(encoding="utf-8")
                assert_prints(r, cwd)
                if r.exit_code == 0:
                    after = before
                    for e in inp.get("edits") or [inp]:
                        after = after.replace(
                            e["old_string"], e["new_string"], -1 if e.get("replace_all") else 1
                        )
                    assert Path(path).read_text(encoding="utf-8") == after
                    known[path] = "edit"
                counts["edit"] += 1
    print(f"replayed: {dict(counts)}")
    assert counts["write"] == 28 and counts["edit"] >= 4 and counts["read after write"] >= 10


def test_a_reply_with_a_nul_byte_or_over_128_kib_is_judged_not_lost() -> None:
    """``bash -n -c <reply>`` raised on a NUL byte (a byte-level tokenizer can emit one) and on an argument over
    128 KiB, and the evaluator filed the episode as a sandbox error, out of every rate. The reply now goes to
    ``bash -n`` on stdin; a NUL is babble, rejected like a syntax error and never sent to the shell."""
    nul = parse_reply("ls\x00")
    assert (nul.kind, nul.is_command) == ("babble", False) and "NUL byte" in nul.syntax_error
    long_line = parse_reply("echo " + "a" * 200_000)
    assert (long_line.kind, long_line.syntax_error) == ("command", None)
    assert (
        bash_syntax_error("echo 'hi", policy=OPERATOR)
        == "bash: line 1: unexpected EOF while looking for matching `''"
    )
