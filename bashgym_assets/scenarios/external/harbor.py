"""The Harbor 2.x (Terminal-Bench 2) layout: ``task.toml``, ``instruction.md``, ``environment/``, ``tests/test.sh``
and ``solution/solve.sh``, read into a ``Task``."""

from __future__ import annotations

import posixpath
import re
import tomllib
from pathlib import Path
from typing import Any

from bashgym_assets.scenarios.external.check import TestPlan
from bashgym_assets.scenarios.external.common import (
    HARBOR,
    MAX_INSTRUCTION_BYTES,
    TEST_DIR,
    Budget,
    Unimportable,
    category_slug,
    difficulty_level,
    one_line,
    read_text,
)
from bashgym_assets.scenarios.external.environment import build_environment
from bashgym_assets.scenarios.external.rewrite import IMAGE, TESTS
from bashgym_assets.scenarios.external.tasks import Task, collect_files, finish_tests, rewrite_shell_files


def harbor_task(folder: Path, budget: Budget) -> Task:
    meta: dict[str, Any] = {}
    toml_path = folder / "task.toml"
    if toml_path.exists():
        try:
            meta = tomllib.loads(read_text(toml_path, "task.toml", 256 << 10))
        except tomllib.TOMLDecodeError as exc:
            raise Unimportable(f"task.toml is not valid TOML: {one_line(exc)}") from exc
    metadata = _table(meta, "metadata")
    environment = _table(meta, "environment")
    verifier = _table(meta, "verifier")
    solution_meta = _table(meta, "solution")
    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file():
        raise Unimportable("no instruction.md")
    instruction = read_text(instruction_path, "instruction.md", MAX_INSTRUCTION_BYTES).strip()
    if not instruction:
        raise Unimportable("instruction.md is empty")
    if environment.get("mcp_servers"):
        raise Unimportable("needs MCP servers ([[environment.mcp_servers]]): not available in the sandbox")
    gpus = environment.get("gpus", 0)
    if isinstance(gpus, (int, float)) and gpus > 0:
        raise Unimportable(f"needs {gpus} GPU(s)")
    if not (folder / "tests" / "test.sh").is_file():
        raise Unimportable("no tests: tests/test.sh is missing")
    if not (folder / "solution" / "solve.sh").is_file():
        raise Unimportable("no reference solution: solution/solve.sh is missing (the gate cannot certify it)")
    env_dir = folder / "environment"
    image = str(environment.get("docker_image") or "")
    envx = build_environment(
        env_dir,
        env_dir / "Dockerfile",
        env_dir / "docker-compose.yaml",
        image,
        budget,
        frozenset(),
        _str_table(environment.get("env")),
        environment.get("workdir"),
        where="environment/",
        image_hint="a docker_image in task.toml",
    )
    tests = collect_files(folder / "tests", "tests", budget)
    tests, runs = rewrite_shell_files(tests, TESTS, "tests", frozenset(posixpath.basename(n) for n in tests))
    plan = TestPlan(
        files=tests,
        entry=f"bash {TEST_DIR}/test.sh",
        pytest=runs > 0,
        layout=HARBOR,
        env=_str_table(verifier.get("env")),
    )
    plan = finish_tests(plan, envx, instruction, "tests")
    solution = collect_files(folder / "solution", "solution", budget)
    solution, _ = rewrite_shell_files(solution, IMAGE, "the solution")
    return Task(
        instruction,
        difficulty_level(metadata.get("difficulty")),
        category_slug(metadata.get("category")),
        envx,
        plan,
        solution,
        "solve.sh",
        None,
        _str_table(solution_meta.get("env")),
    )


def _table(meta: dict[str, Any], key: str) -> dict[str, Any]:
    """task.toml's ``[key]`` table; empty when it is missing or not a table."""
    value = meta.get(key)
    return value if isinstance(value, dict) else {}


def _str_table(value: Any) -> dict[str, str]:
    """A TOML table of environment variables (``[verifier.env]``...) as shell-safe names and strings."""
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(k))}
