"""The external importer reads task scripts with the shell engine's parser: a pytest run or an installer is found
wherever bash runs it (inside ``$( )``, after ``then``, behind ``sudo -E``, across a line continuation) and
replaced by exactly its text, while what bash treats as data (a here-document body, a quoted ``;``, a case
pattern, an array) is left alone. The rewritten scripts are run by a real bash."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from bashgym_assets.scenarios import external
from bashgym_assets.scenarios.external import rewrite_script, shell_commands
from bashgym_assets.shell import parse

VERIFIER = textwrap.dedent(
    """\
    set -u
    out=$(pytest -q tests/a.py)
    if [ -d tests ]; then pytest -q tests/b.py; fi
    sudo -E pytest -q -k 'c; d' tests/c.py
    pytest -q \\
      tests/e.py
    cat > later.sh <<EOF
    pytest -q tests/heredoc.py
    EOF
    pytest -q tests/f.py <<<"input"
    echo $'it\\'s; pytest -q tests/g.py'
    """
)


def _recorder(path: Path, label: str, log: Path) -> None:
    path.write_text(f'#!/bin/sh\necho "{label} $*" >> {log}\n')
    path.chmod(0o755)


def test_pytest_runs_are_replaced_where_bash_runs_them_and_nowhere_else(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.fail("bash is needed to run the rewritten verifier")
    rw = rewrite_script(VERIFIER, external.TESTS, {"test_outputs.py"})
    assert rw.problems == [] and rw.pytest_runs == 5
    assert "pytest -q tests/heredoc.py\nEOF" in rw.text  # a here-document body is data
    assert "echo $'it\\'s; pytest -q tests/g.py'" in rw.text  # so is an ANSI-C string

    log, bin_dir = tmp_path / "log", tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "tests").mkdir()
    _recorder(bin_dir / "pytest", "original", log)
    _recorder(tmp_path / "check-pytest", "check", log)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "BASHGYM_PYTEST": str(tmp_path / "check-pytest"),
    }
    done = subprocess.run(
        [bash, "-c", rw.text], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [
        "check -q tests/a.py",
        "check -q tests/b.py",
        "check -q -k c; d tests/c.py",
        "check -q tests/e.py",
        "check -q tests/f.py",
    ]
    assert done.stdout == "it's; pytest -q tests/g.py\n"
    assert (tmp_path / "later.sh").read_text() == "pytest -q tests/heredoc.py\n"


def test_case_patterns_arrays_and_heredoc_bodies_are_not_commands() -> None:
    script = textwrap.dedent(
        """\
        PKGS=(curl git)
        case "$1" in
          curl) echo "no download here" ;;
        esac
        cat > /etc/motd <<'EOF'
        apt-get install -y vim
        EOF
        """
    )
    rw = rewrite_script(script, external.IMAGE)
    assert (rw.problems, rw.text, rw.dropped) == ([], script, 0)
    assert rw.kept_programs == {"echo", "cat"}


def test_commands_carry_words_as_written_with_absolute_spans() -> None:
    src = "echo hel\\\nlo 2>&1 > out \"$(sudo -E pytest -k 'a; b')\"\n"
    cmds = shell_commands(src, base=100)
    inner, outer = cmds
    assert inner.nested and not outer.nested
    assert [w.text for w in inner.words] == ["sudo", "-E", "pytest", "-k", "a; b"]
    assert src[inner.start - 100 : inner.end - 100] == "sudo -E pytest -k 'a; b'"
    assert [(w.text, w.raw) for w in outer.words] == [
        ("echo", "echo"),
        ("hello", "hel\\\nlo"),  # a line continuation joins the word, as bash does
        ("2>&1", "2>&1"),
        (">", ">"),
        ("out", "out"),
        ("$(sudo -E pytest -k 'a; b')", "\"$(sudo -E pytest -k 'a; b')\""),
    ]
    assert all(src[w.start - 100 : w.end - 100] == w.raw for c in cmds for w in c.words)


def test_the_guardrails_parser_reads_arrays_only_when_asked_and_keeps_fd_spans() -> None:
    guarded = parse("a=(rm -rf /)")  # the guardrails look at the parenthesised words as a command
    assert [[w.value for w in c.words] for c in guarded.commands] == [["a="], ["rm", "-rf", "/"]]
    arrays = parse("a=(rm -rf /) 2>&1", arrays=True)
    (cmd,) = arrays.commands
    assert [w.value for w in cmd.words] == ["a=(rm -rf /)"]
    (red,) = cmd.redirects
    assert (red.fd, red.fd_start, red.start, red.target and red.target.value) == (2, 13, 14, "1")
