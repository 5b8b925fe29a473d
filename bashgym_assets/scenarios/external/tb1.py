"""The Terminal-Bench 1.x layout: ``task.yaml``, the task folder as build context, ``tests/`` with
``run-tests.sh``, and ``solution.sh`` or ``solution.yaml`` (commands typed into tmux: only plain shell lines
replay), read into a ``Task``."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

import yaml

from bashgym_assets.scenarios.external.check import TestPlan
from bashgym_assets.scenarios.external.common import (
    MAX_INSTRUCTION_BYTES,
    TB1,
    TB1_SECRETS,
    TEST_DIR,
    Budget,
    Unimportable,
    category_slug,
    difficulty_level,
    is_executable,
    one_line,
    read_bytes,
    read_text,
)
from bashgym_assets.scenarios.external.environment import build_environment
from bashgym_assets.scenarios.external.rewrite import IMAGE, TESTS, rewrite_script
from bashgym_assets.scenarios.external.tasks import Task, collect_files, finish_tests, rewrite_shell_files

_TB1_META = TB1_SECRETS | {
    "task.yaml",
    "task.yml",
    "docker-compose.yaml",
    "docker-compose.yml",
    "Dockerfile",
    ".dockerignore",
}


def _tb1_instruction(data: dict[str, Any]) -> str:
    text = data.get("instruction")
    if not text and isinstance(data.get("descriptions"), list):
        entries = [d for d in data["descriptions"] if isinstance(d, dict)]
        base = next((d for d in entries if d.get("key") == "base"), entries[0] if entries else {})
        text = base.get("description")
    if not isinstance(text, str) or not text.strip():
        raise Unimportable("no instruction in task.yaml (instruction or descriptions[key=base].description)")
    if len(text.encode()) > MAX_INSTRUCTION_BYTES:
        raise Unimportable(f"the instruction is over {MAX_INSTRUCTION_BYTES} bytes")
    return text.strip()


def tb1_task(folder: Path, budget: Budget) -> Task:
    yaml_path = folder / "task.yaml" if (folder / "task.yaml").is_file() else folder / "task.yml"
    try:
        data = yaml.safe_load(read_text(yaml_path, yaml_path.name, 256 << 10))
    except yaml.YAMLError as exc:
        raise Unimportable(f"{yaml_path.name} is not valid YAML: {one_line(exc)}") from exc
    if not isinstance(data, dict):
        raise Unimportable(f"{yaml_path.name} is not a mapping")
    instruction = _tb1_instruction(data)
    parser = data.get("parser_name")
    if parser not in (None, "pytest"):
        raise Unimportable(f"results parser {parser!r} is not supported (only pytest)")
    tests_dir = folder / "tests"
    tests = collect_files(tests_dir, "tests", budget) if tests_dir.is_dir() else {}
    run_tests = folder / "run-tests.sh"
    if run_tests.is_file():
        data_rt = read_bytes(run_tests, "run-tests.sh")
        budget.take(len(data_rt), "run-tests.sh")
        tests["run-tests.sh"] = (data_rt, is_executable(run_tests))
        entry = f"bash {TEST_DIR}/run-tests.sh"
    elif "test_outputs.py" in tests:
        tests["run-tests.sh"] = (b'#!/bin/bash\npytest "$TEST_DIR/test_outputs.py" -rA\n', True)
        entry = f"bash {TEST_DIR}/run-tests.sh"
    elif any(posixpath.basename(n).startswith("test_") and n.endswith(".py") for n in tests):
        tests["run-tests.sh"] = (b'#!/bin/bash\npytest "$TEST_DIR" -rA\n', True)
        entry = f"bash {TEST_DIR}/run-tests.sh"
    else:
        raise Unimportable("no tests: neither run-tests.sh nor tests/test_*.py")
    solution_commands: list[str] | None = None
    solution: dict[str, tuple[bytes, bool]] = {}
    if (folder / "solution.sh").is_file():
        sol = read_bytes(folder / "solution.sh", "solution.sh")
        budget.take(len(sol), "solution.sh")
        solution = {"solution.sh": (sol, True)}
        solution, _ = rewrite_shell_files(solution, IMAGE, "the solution")
    elif (folder / "solution.yaml").is_file():
        solution_commands = _solution_yaml(folder / "solution.yaml")
    else:
        raise Unimportable(
            "no reference solution: solution.sh / solution.yaml is missing (the gate cannot certify it)"
        )
    envx = build_environment(
        folder, folder / "Dockerfile", folder / "docker-compose.yaml", "", budget, _TB1_META
    )
    tests, runs = rewrite_shell_files(tests, TESTS, "tests", frozenset(posixpath.basename(n) for n in tests))
    plan = finish_tests(
        TestPlan(files=tests, entry=entry, pytest=runs > 0, layout=TB1), envx, instruction, "tests"
    )
    return Task(
        instruction,
        difficulty_level(data.get("difficulty")),
        category_slug(data.get("category")),
        envx,
        plan,
        solution,
        "solution.sh",
        solution_commands,
        {},
    )


_TMUX_KEY = re.compile(
    r"^(?:(?:[CMS]-)+\S+|Escape|Enter|Tab|BSpace|BTab|Space|Up|Down|Left|Right|Home|End|"
    r"PageUp|PageDown|PgUp|PgDn|PPage|NPage|DC|IC|F\d{1,2})$"
)


def _solution_yaml(path: Path) -> list[str]:
    try:
        data = yaml.safe_load(read_text(path, "solution.yaml", 256 << 10))
    except yaml.YAMLError as exc:
        raise Unimportable(f"solution.yaml is not valid YAML: {one_line(exc)}") from exc
    if not isinstance(data, list):
        raise Unimportable("solution.yaml is not a list of commands")
    commands = []
    for entry in data:
        cmd = entry.get("command") if isinstance(entry, dict) else entry
        if not isinstance(cmd, str):
            raise Unimportable("solution.yaml: an entry has no command string")
        # TB 1.x sends these entries to a tmux pane: ``append_enter: false`` and key names (C-x, Escape) are
        # keystrokes into a running program (vim, a REPL), which a shell turn cannot replay.
        if isinstance(entry, dict) and entry.get("append_enter") is False:
            raise Unimportable(
                f"solution.yaml types keystrokes without Enter ({cmd.strip()[:40]!r}): an "
                "interactive session, not shell commands"
            )
        if _TMUX_KEY.match(cmd.strip()):
            raise Unimportable(
                f"solution.yaml sends the key {cmd.strip()!r} to a terminal: an interactive "
                "session, not shell commands"
            )
        cmd = cmd.rstrip("\n")
        if cmd.strip():
            rw = rewrite_script(cmd, IMAGE)
            if rw.problems:
                raise Unimportable("the solution needs the network: " + "; ".join(dict.fromkeys(rw.problems)))
            commands.append(rw.text)
    if not commands:
        raise Unimportable("solution.yaml holds no command")
    return commands
