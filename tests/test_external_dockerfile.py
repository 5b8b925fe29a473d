"""An external task's Dockerfile and .dockerignore read as docker reads them (``dockerfile-parse`` for the
instructions, docker's ``PatternMatcher`` for the ignore file): continuations, heredocs, ENV forms, ``*`` vs
``**`` and ``!`` exceptions, each checked on a real task folder through the importer."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bashgym_assets.scenarios import external


def harbor_task(root: Path, dockerfile: str, extra: dict[str, str] | None = None) -> Path:
    """A minimal Harbor 2.x task whose environment is ``dockerfile`` (plus ``extra`` context files)."""
    files = {
        "instruction.md": "Do the thing.\n",
        "task.toml": 'version = "1.0"\n',
        "environment/Dockerfile": textwrap.dedent(dockerfile).lstrip("\n"),
        "tests/test.sh": "#!/bin/bash\ntest -f /app/done\n",
        "solution/solve.sh": "#!/bin/bash\ntouch /app/done\n",
        **(extra or {}),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_continuations_and_heredocs_are_read_as_docker_reads_them(tmp_path: Path) -> None:
    """Docker drops the escape and the newline and adds nothing (``hel\\`` + ``lo`` is ``hello``), allows blanks
    after the escape and comment lines inside a continuation; a heredoc's body is the script, never more
    instructions (its lines would read as ``PRINTF`` and a comment to a Dockerfile parser)."""
    dockerfile = (
        "FROM debian:bookworm\n"
        "WORKDIR /app\n"
        "RUN echo hel\\\n"
        "lo > /app/joined.txt\n"
        "RUN printf 'a' \\\n"
        "    && printf 'b' \\   \n"
        "    # a comment inside the continuation\n"
        "    && printf 'c' > /app/abc.txt\n"
        "RUN <<EOF\n"
        "printf 'x' \\\n"
        "  > /app/heredoc.txt\n"
        "# a shell comment, not a Dockerfile one\n"
        "EOF\n"
        "ENV AFTER=heredoc\n"
    )
    bundle = external.import_task(harbor_task(tmp_path / "t", dockerfile), "s")
    runs = [s for s in bundle.setup if "cd /app" in s]
    assert len(runs) == 3, bundle.setup
    assert "echo hello > /app/joined.txt" in runs[0]
    assert "printf 'a'" in runs[1] and "printf 'b'" in runs[1] and "printf 'c' > /app/abc.txt" in runs[1]
    assert "a comment inside" not in runs[1]
    assert runs[2].endswith("printf 'x' \\\n  > /app/heredoc.txt\n# a shell comment, not a Dockerfile one\n")
    assert bundle.files[external.ENV_PROFILE].endswith("export AFTER=heredoc\n")


def test_env_forms_are_read_as_docker_reads_them(tmp_path: Path) -> None:
    """``ENV name value`` keeps the value as written (spaces and all); ``name=value`` pairs lose their quotes;
    a word without its ``=`` after a pair is a syntax error docker refuses to build, so the task is refused."""
    dockerfile = """
        FROM debian:bookworm
        ENV GREETING hello   world
        ENV A="one two" B=three
    """
    bundle = external.import_task(harbor_task(tmp_path / "t", dockerfile), "s")
    profile = bundle.files[external.ENV_PROFILE]
    assert "export GREETING='hello   world'\n" in profile
    assert "export A='one two'\n" in profile and "export B=three\n" in profile
    broken = harbor_task(tmp_path / "u", "FROM debian:bookworm\nENV A=1 B\n")
    with pytest.raises(external.Unimportable, match="ENV does not parse"):
        external.import_task(broken, "s")


def test_dockerignore_is_matched_as_docker_matches_it(tmp_path: Path) -> None:
    """``*`` stays within one folder, ``**/`` also matches at the top, ``!`` makes an exception (also inside an
    excluded folder), the last matching line wins; a source named by COPY that the file excludes is refused."""
    ignore = "# build junk\n*.log\n**/*.tmp\n!keep.tmp\ncache/\n!cache/keep.txt\n"
    context = {
        "environment/.dockerignore": ignore,
        "environment/data.txt": "data\n",
        "environment/debug.log": "top-level log\n",
        "environment/logs/app.log": "a log one folder down\n",
        "environment/a.tmp": "top-level tmp\n",
        "environment/deep/er/b.tmp": "nested tmp\n",
        "environment/keep.tmp": "kept by !keep.tmp\n",
        "environment/cache/x.txt": "cached\n",
        "environment/cache/keep.txt": "kept by !cache/keep.txt\n",
    }
    root = harbor_task(tmp_path / "t", "FROM debian:bookworm\nCOPY . /app/\n", context)
    bundle = external.import_task(root, "s")
    copied = {path for path in bundle.files if path.startswith("/app/")}
    assert copied == {
        "/app/Dockerfile",
        "/app/.dockerignore",
        "/app/data.txt",
        "/app/logs/app.log",
        "/app/keep.tmp",
        "/app/cache/keep.txt",
    }
    named = harbor_task(tmp_path / "u", "FROM debian:bookworm\nCOPY debug.log /app/\n", context)
    with pytest.raises(external.Unimportable, match="'debug.log' is excluded from the build context"):
        external.import_task(named, "s")
