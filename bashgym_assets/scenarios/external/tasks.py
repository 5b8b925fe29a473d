"""What a task folder becomes once its layout's files are read, whatever the layout: the ``Task`` record, its
tests and solution collected and rewritten, the tests' pytest needs checked, and the reference built from the
solution."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from bashgym_assets.scenarios.external.check import TestPlan, pytest_problems
from bashgym_assets.scenarios.external.common import (
    SOLUTION_DIR,
    TEST_DIR,
    Budget,
    Unimportable,
    decode_text,
    image_has,
    is_executable,
    read_bytes,
    walk_files,
    write_file_command,
)
from bashgym_assets.scenarios.external.dockerfile import Environment, substitute
from bashgym_assets.scenarios.external.rewrite import rewrite_script

# ---- the reference ----------------------------------------------------------------------------------------------
_SOLUTION_PATH = re.compile(r"(?<![\w./~$-])/solution(?=/|[^\w.-]|$)")


def relocate_solution(
    files: dict[str, tuple[bytes, bool]], solution_dir: str
) -> dict[str, tuple[bytes, bool]]:
    """The solution's text files with the path ``/solution`` (where the harnesses put it) made ``solution_dir``."""
    out = {}
    for rel, (data, executable) in files.items():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and "\0" not in text:
            data = _SOLUTION_PATH.sub(solution_dir, text).encode()
        out[rel] = (data, executable)
    return out


def build_reference(
    files: dict[str, tuple[bytes, bool]],
    entry: str | None,
    commands: list[str] | None,
    env: dict[str, str],
    solution_dir: str = SOLUTION_DIR,
) -> list[str]:
    """Write the solution files under ``solution_dir`` in one command, then run the entry script in the next.

    The reference runs as the agent: an unprivileged one cannot make ``/solution``, so its solution goes to
    ``USER_SOLUTION_DIR`` and the solution's own mentions of ``/solution`` follow it."""
    if commands is not None:
        return commands
    if solution_dir != SOLUTION_DIR:
        files = relocate_solution(files, solution_dir)
    writes = [f"mkdir -p {shlex.quote(solution_dir)}"]
    for rel, (data, executable) in sorted(files.items()):
        path = posixpath.join(solution_dir, rel)
        parent = posixpath.dirname(path)
        if parent != solution_dir:
            writes.append(f"mkdir -p {shlex.quote(parent)}")
        writes.append(write_file_command(path, data, executable))
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    run = f"{exports + ' ' if exports else ''}bash {posixpath.join(solution_dir, entry or 'solve.sh')}"
    return ["\n".join(writes), run]


@dataclass
class Task:
    instruction: str
    difficulty: int
    category: str
    env: Environment
    tests: TestPlan
    solution_files: dict[str, tuple[bytes, bool]]
    solution_entry: str | None
    solution_commands: list[str] | None
    solution_env: dict[str, str]


def collect_files(folder: Path, what: str, budget: Budget) -> dict[str, tuple[bytes, bool]]:
    out = {}
    for f in walk_files(folder, what):
        rel = f.relative_to(folder).as_posix()
        data = read_bytes(f, f"{what}/{rel}")
        budget.take(len(data), f"{what}/{rel}")
        out[rel] = (data, is_executable(f))
    return out


def rewrite_shell_files(
    files: dict[str, tuple[bytes, bool]], ctx: str, what: str, test_names: frozenset[str] = frozenset()
) -> tuple[dict[str, tuple[bytes, bool]], int]:
    """Rewrite every shell script among ``files`` (installers dropped, pytest redirected)."""
    out, pytest_runs, problems = dict(files), 0, []
    for rel, (data, executable) in files.items():
        if not (
            rel.endswith(".sh")
            or data.startswith((b"#!/bin/bash", b"#!/bin/sh", b"#!/usr/bin/env bash", b"#!/usr/bin/env sh"))
        ):
            continue
        text = decode_text(data, f"{what}/{rel}")
        rw = rewrite_script(text, ctx, test_names, resolve=lambda p: _resolve_in(p, files, what))
        problems += rw.problems
        pytest_runs += rw.pytest_runs
        out[rel] = (rw.text.encode(), executable)
    if problems:
        raise Unimportable(
            f"{what} need{'s' if what.endswith('solution') else ''} the network: "
            + "; ".join(dict.fromkeys(problems))
        )
    return out, pytest_runs


def _resolve_in(path: str, files: dict[str, tuple[bytes, bool]], what: str) -> str | None:
    """A file of the tests (``/tests/x``, ``$TEST_DIR/x``) or solution (``/solution/x``) folder, as text."""
    path = substitute(path, {"TEST_DIR": TEST_DIR, "T_BENCH_TEST_DIR": TEST_DIR})
    for root in (TEST_DIR, SOLUTION_DIR):
        path = path.removeprefix(root + "/")
    entry = files.get(posixpath.normpath(path))
    if entry is None:
        return None
    try:
        return decode_text(entry[0], f"{what}/{path}")
    except Unimportable:
        return None


def _python_sources(files: dict[str, tuple[bytes, bool]], what: str) -> dict[str, str]:
    return {
        rel: decode_text(data, f"{what}/{rel}") for rel, (data, _) in files.items() if rel.endswith(".py")
    }


def _provided_modules(envx: Environment) -> set[str]:
    """Python modules the environment puts in the start folder (importable by tests run from there)."""
    mods = set()
    start = envx.start_dir.rstrip("/")
    for path in envx.files:
        if path.startswith(start + "/"):
            first = path[len(start) + 1 :].split("/")[0]
            mods.add(first.removesuffix(".py"))
    return mods


def finish_tests(plan: TestPlan, envx: Environment, instruction: str, what: str) -> TestPlan:
    if plan.pytest:
        if not image_has("python3"):
            raise Unimportable("the tests run pytest and the sandbox image has no python3")
        problems = pytest_problems(_python_sources(plan.files, what), _provided_modules(envx), instruction)
        if problems:
            raise Unimportable("; ".join(problems))
    return plan
