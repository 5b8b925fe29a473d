"""Every ``BASHGYM_*`` variable is a ``Settings`` field, read nowhere else (issue 41): the package's source is parsed
and a read of such a variable outside ``config.py`` fails here, and every variable a field reads is named in the
README, where a person looks for it. Writing one for a child process (``os.environ[...] = ...``, an ``env`` list)
is not a read."""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bashgym_assets.config import PROJECT_ROOT, Settings

PACKAGE = PROJECT_ROOT / "bashgym_assets"
PREFIX = "BASHGYM_"
#: module (relative to the package) -> the variables it may read itself, and why
ALLOWED_READS = {
    # runs as `python -I -S` (no site-packages, so no pydantic) on every agent tool call; a test below checks that
    # it finds the same folder as Settings.home
    "ingest/hook.py": {"BASHGYM_HOME"},
}
#: variables a field reads that the README does not name yet (the lead adds them; then this test says to drop
#: them from here)
NOT_IN_README_YET: set[str] = set()


def _variable_names(tree: ast.Module) -> set[str]:
    """Names bound at module level to a ``BASHGYM_*`` text (``GRACE_ENV = "BASHGYM_STOP_GRACE_S"``)."""
    names = set()
    for node in tree.body:
        value = (
            node.value.value
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            else None
        )
        if isinstance(node, ast.Assign) and isinstance(value, str) and value.startswith(PREFIX):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


@functools.cache
def _constants() -> frozenset[str]:
    """Every module-level name of the package bound to a ``BASHGYM_*`` text: a read through an imported
    constant (``from ...trainer_image import STEP_LAUNCHER_ENV``) counts as a read of its variable."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        source = path.read_text()
        if PREFIX in source:  # parsing only what can hold one keeps this test fast
            found |= _variable_names(ast.parse(source))
    return frozenset(found)


def _names_a_variable(node: ast.expr | None, constants: frozenset[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith(PREFIX)
    if isinstance(node, ast.JoinedStr):  # f"BASHGYM_{name}"
        return _names_a_variable(node.values[0] if node.values else None, constants)
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):
        return node.attr in constants
    return False


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def env_reads(source: str, constants: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, code) of each read of a ``BASHGYM_*`` variable: ``os.environ.get``, ``os.getenv``,
    ``os.environ[...]`` read, ``... in os.environ``. Writes and deletes are not reads."""
    tree = ast.parse(source)
    constants = constants | _variable_names(tree)
    reads = []
    for node in ast.walk(tree):
        named: ast.expr | None = None
        if isinstance(node, ast.Call):
            func = node.func
            is_get = isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value)
            is_getenv = (isinstance(func, ast.Attribute) and func.attr == "getenv") or (
                isinstance(func, ast.Name) and func.id == "getenv"
            )
            if (is_get or is_getenv) and node.args:
                named = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            named = node.slice
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
            and any(_is_environ(c) for c in node.comparators)
        ):
            named = node.left
        if named is not None and _names_a_variable(named, constants):
            reads.append((named.lineno, ast.unparse(node)))
    return reads


def test_the_scanner_sees_every_kind_of_read_and_no_write() -> None:
    source = """
import os
from os import environ, getenv
HOME_ENV = "BASHGYM_HOME"
a = os.environ.get("BASHGYM_A")
b = os.getenv("BASHGYM_B", "x")
c = os.environ["BASHGYM_C"]
d = "BASHGYM_D" in os.environ
e = environ.get(HOME_ENV)
f = getenv(f"BASHGYM_{a}")
g = IMPORTED_ENV not in os.environ
os.environ["BASHGYM_W"] = "1"
del os.environ["BASHGYM_W"]
h = os.environ.get("HOME")
env = [f"{k}={os.environ[k]}" for k in ["BASHGYM_HOME"] if k in os.environ]
"""
    lines = [line for line, _ in env_reads(source, frozenset({"IMPORTED_ENV"}))]
    assert lines == [5, 6, 7, 8, 9, 10, 11]


def test_no_module_but_config_reads_a_bashgym_variable() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "config.py":
            continue
        source = path.read_text()
        if "environ" not in source and "getenv" not in source:
            continue
        for line, code in env_reads(source, _constants()):
            if not any(var in code for var in ALLOWED_READS.get(rel, ())):
                found.append(f"bashgym_assets/{rel}:{line}: {code}")
    assert not found, "read these through Settings (bashgym_assets/config.py):\n" + "\n".join(found)


def _fields_variables() -> dict[str, str]:
    return {str(f.validation_alias): name for name, f in Settings.model_fields.items()}


def test_every_variable_read_anywhere_is_a_settings_field() -> None:
    """The variables the allowed readers read, and the ones config's own docstring names, are fields."""
    allowed = set().union(*ALLOWED_READS.values())
    assert allowed <= _fields_variables().keys()
    assert all(f.description for f in Settings.model_fields.values())
    assert all(var in (Settings.__doc__ or "") for var in _fields_variables())


def test_every_settings_variable_is_named_in_the_readme() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text()
    named = {var for var in _fields_variables() if var in readme}
    assert _fields_variables().keys() - named == NOT_IN_README_YET
    assert not NOT_IN_README_YET & named  # the README names it now: drop it from NOT_IN_README_YET


@pytest.mark.parametrize("value", [None, "~/elsewhere", "relative/home"])
def test_the_hook_finds_the_data_folder_settings_finds(value: str | None, tmp_path: Path) -> None:
    """The one allowed reader outside config: its ``home_dir`` and ``Settings().home`` agree, in a fresh
    ``-I -S`` interpreter as the hook runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)}
    env["HOME"] = str(tmp_path)
    if value is not None:
        env["BASHGYM_HOME"] = value
    hook = PACKAGE / "ingest" / "hook.py"
    code = f"import runpy; print(runpy.run_path({str(hook)!r})['home_dir']())"
    got = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert got.returncode == 0, got.stderr
    expected = subprocess.run(
        [sys.executable, "-c", "from bashgym_assets.config import Settings; print(Settings().home)"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(PROJECT_ROOT)},
        capture_output=True,
        text=True,
    )
    assert expected.returncode == 0, expected.stderr
    assert got.stdout.strip() == expected.stdout.strip()
