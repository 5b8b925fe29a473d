"""The bundle's check: the task's own verifier run as root on the final state, by its layout's pass rule, with
its pytest runs sent to the image's pytest or the bundled ``offline_pytest`` stand-in; and the static look at the
test files that refuses what that stand-in (or the image) cannot run."""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bashgym_assets.scenarios.external.common import (
    ENV_PROFILE,
    HARBOR,
    TEST_DIR,
    heredoc_delim,
    image_has,
    write_file_command,
)

_STDLIB_MISSING = frozenset(
    {"tkinter", "turtle", "turtledemo", "idlelib", "lib2to3", "distutils", "ensurepip"}
)
_WELL_KNOWN_THIRD_PARTY = frozenset(
    {
        "numpy",
        "pandas",
        "scipy",
        "sklearn",
        "torch",
        "requests",
        "yaml",
        "bs4",
        "PIL",
        "cv2",
        "flask",
        "fastapi",
        "matplotlib",
        "httpx",
        "pydantic",
        "psutil",
    }
)
# ---- pytest support --------------------------------------------------------------------------------------------
# The pytest stand-in a check carries when the image has no pytest (a sibling module of this package).
OFFLINE_PYTEST = Path(__file__).parent.parent / "offline_pytest.py"


def image_has_pytest() -> bool:
    return image_has("python3-pytest")


def _catches_import_error(node: ast.Try) -> bool:
    for h in node.handlers:
        names = []
        if h.type is None:
            return True
        for t in h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]:
            if isinstance(t, ast.Name):
                names.append(t.id)
        if {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"} & set(names):
            return True
    return False


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.Try):
            inner = guarded or _catches_import_error(node)
            for child in node.body:
                visit(child, inner)
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, guarded)
            return
        if not guarded:
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "importorskip"
            ):
                return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return found


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    return ".".join(reversed(parts))


def _fixture_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if _decorator_name(dec) in ("pytest.fixture", "fixture"):
                    alias = (
                        next(
                            (
                                kw.value.value
                                for kw in dec.keywords
                                if kw.arg == "name" and isinstance(kw.value, ast.Constant)
                            ),
                            None,
                        )
                        if isinstance(dec, ast.Call)
                        else None
                    )
                    names.add(alias or node.name)
    return names


def _parametrized(decorators: list[ast.expr]) -> set[str]:
    names: set[str] = set()
    for dec in decorators:
        if isinstance(dec, ast.Call) and _decorator_name(dec).endswith("mark.parametrize") and dec.args:
            first = dec.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.update(n.strip() for n in first.value.split(","))
            elif isinstance(first, (ast.List, ast.Tuple)):
                names.update(
                    e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
    return names


def _required_args(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = fn.args.posonlyargs + fn.args.args
    required = [a.arg for a in args[: len(args) - len(fn.args.defaults)]]
    required += [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is None]
    return [a for a in required if a not in ("self", "cls")]


def pytest_problems(sources: dict[str, str], provided_modules: set[str], instruction: str = "") -> list[str]:
    """Why these pytest files cannot run in the sandbox (imports the image lacks, pytest features the
    offline stand-in lacks, syntax newer than the image's Python 3.11); empty when they can."""
    problems: list[str] = []
    trees: dict[str, ast.Module] = {}
    for name, text in sorted(sources.items()):
        try:
            trees[name] = ast.parse(text, filename=name)
        except SyntaxError as exc:
            problems.append(f"{name} does not parse under Python 3.11 (line {exc.lineno}: {exc.msg})")
    local = {posixpath.splitext(posixpath.basename(n))[0] for n in sources} | {
        n.split("/")[0] for n in sources if "/" in n
    }
    stdlib = set(sys.stdlib_module_names) - _STDLIB_MISSING
    missing: set[str] = set()
    for tree in trees.values():
        for mod in _imports(tree):
            if mod in stdlib or mod in local or mod == "pytest" or mod in provided_modules:
                continue
            if mod not in _WELL_KNOWN_THIRD_PARTY and re.search(
                rf"(?<![\w.-]){re.escape(mod)}(\.py\b|/|\b)", instruction
            ):
                continue  # a module the task asks the agent to write
            missing.add(mod)
    if missing:
        problems.append(f"tests import packages not in the sandbox image: {', '.join(sorted(missing))}")
    if image_has_pytest():
        return problems
    from bashgym_assets.scenarios import offline_pytest

    unsupported: set[str] = set()
    fixtures: set[str] = set(offline_pytest.BUILTIN_FIXTURES)
    for tree in trees.values():
        fixtures |= _fixture_names(tree)
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "pytest"
                and node.attr not in offline_pytest.SUPPORTED_ATTRS
            ):
                unsupported.add(f"pytest.{node.attr}")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] in ("pytest", "_pytest")
            ):
                unsupported.update(
                    f"pytest.{a.name}"
                    for a in node.names
                    if node.module != "pytest" or a.name not in offline_pytest.SUPPORTED_ATTRS
                )
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets
            ):
                unsupported.add("pytest_plugins")
        base = posixpath.basename(name)
        if base == "conftest.py":
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                    "pytest_"
                ):
                    unsupported.add(f"the conftest hook {node.name}")
        if not (base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"):
            continue
        for fn, extra in _test_functions(tree):
            for arg in _required_args(fn):
                if arg not in fixtures and arg not in extra and arg not in _parametrized(fn.decorator_list):
                    unsupported.add(f"the fixture {arg!r} ({base}::{fn.name})")
            if isinstance(fn, ast.AsyncFunctionDef):
                unsupported.add(f"async tests ({base}::{fn.name})")
    if unsupported:
        problems.append(
            "tests use pytest features the offline runner lacks: " + ", ".join(sorted(unsupported))
        )
    return problems


def _test_functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, set[str]]]:
    out: list[tuple[Any, set[str]]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("test") or any(
                _decorator_name(d) in ("pytest.fixture", "fixture") for d in node.decorator_list
            ):
                out.append((node, set()))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            extra = _parametrized(node.decorator_list)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    item.name.startswith("test")
                    or any(_decorator_name(d) in ("pytest.fixture", "fixture") for d in item.decorator_list)
                ):
                    out.append((item, extra))
    return out


def pytest_wrapper(report: str) -> str:
    """The executable the rewritten verifier calls instead of pytest; appends each run's status to a report."""
    run = (
        'python3 -B -m pytest -p no:cacheprovider "$@"'
        if image_has_pytest()
        else 'PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}" python3 -B -c '
        "'import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))' \"$@\""
    )
    return (
        "#!/bin/bash\n# bashgym: runs the task's pytest tests offline (see bashgym_assets/scenarios/external/check.py)\n"
        f'd=$(dirname "$0")\n{run}\nrc=$?\necho "$rc" >> {report}\nexit $rc\n'
    )


# ---- the check -------------------------------------------------------------------------------------------------
@dataclass
class TestPlan:
    files: dict[str, tuple[bytes, bool]]  # path under /tests -> (content, executable)
    entry: str  # the shell run by the check (cwd = workdir)
    pytest: bool
    layout: str
    env: dict[str, str] = field(default_factory=dict)


def build_check(plan: TestPlan, workdir: str, source: str) -> str:
    """The bundle's check: materialise /tests, run the verifier, decide by the layout's pass rule, clean up."""
    out = [
        "#!/bin/bash",
        f"# bashgym check for {source}: runs the task's own tests as root on the final state.",
        "# Harbor: pass iff /logs/verifier/reward.txt (or reward.json) says 1, else iff the test script exits 0.",
        "# Terminal-Bench 1.x: pass iff every pytest run passed, else iff run-tests.sh exits 0.",
        "# Everything it writes (/tests, /logs/verifier, a temp folder) is removed again on exit.",
        "__bg=$(mktemp -d /tmp/.bashgym-check.XXXXXXXX) || exit 125",
        "__bg_tests_moved=0; __bg_made_logs=0; __bg_made_verifier=0",
        'if [ -e /tests ] || [ -L /tests ]; then mv /tests "$__bg/tests.orig" && __bg_tests_moved=1; fi',
        "[ -d /logs ] || __bg_made_logs=1",
        "[ -d /logs/verifier ] || __bg_made_verifier=1",
        "__bg_cleanup() {",
        "  cd /",
        "  rm -rf /tests",
        '  [ "$__bg_tests_moved" = 1 ] && mv "$__bg/tests.orig" /tests',
        '  [ "$__bg_made_verifier" = 1 ] && rm -rf /logs/verifier',
        '  [ "$__bg_made_logs" = 1 ] && rm -rf /logs',
        '  rm -rf "$__bg"',
        "}",
        "trap __bg_cleanup EXIT",
        'mkdir -p /tests /logs/verifier "$__bg/bin" || exit 125',
        "rm -f /logs/verifier/reward.txt /logs/verifier/reward.json",
    ]
    for rel, (data, executable) in sorted(plan.files.items()):
        path = posixpath.join(TEST_DIR, rel)
        parent = posixpath.dirname(path)
        if parent != TEST_DIR:
            out.append(f"mkdir -p {shlex.quote(parent)}")
        out.append(write_file_command(path, data, executable))
    if plan.pytest:
        wrapper = pytest_wrapper('"$d/../pytest-report"')
        delim = heredoc_delim(wrapper)
        out.append(
            f"cat > \"$__bg/bin/bashgym-pytest\" <<'{delim}'\n{wrapper}{delim}\n"
            'chmod 0755 "$__bg/bin/bashgym-pytest"'
        )
        if not image_has_pytest():
            shim = OFFLINE_PYTEST.read_text(encoding="utf-8")
            delim = heredoc_delim(shim)
            out.append(f"cat > \"$__bg/bin/pytest.py\" <<'{delim}'\n{shim}{delim}")
        out.append('export BASHGYM_PYTEST="$__bg/bin/bashgym-pytest"')
    out.append(f"export TEST_DIR={TEST_DIR} T_BENCH_TEST_DIR={TEST_DIR}")
    for k, v in plan.env.items():
        out.append(f"export {k}={shlex.quote(v)}")
    out.append(f"[ -r {ENV_PROFILE} ] && . {ENV_PROFILE}")
    out.append(f"cd {shlex.quote(workdir)} 2>/dev/null || cd /")
    out.append(plan.entry)
    out.append("__bg_rc=$?")
    if plan.layout == HARBOR:
        out += [
            "if [ -f /logs/verifier/reward.txt ]; then",
            "  __bg_reward=$(tr -d ' \\t\\r\\n' < /logs/verifier/reward.txt)",
            '  echo "bashgym: reward.txt = $__bg_reward (test script exit $__bg_rc)"',
            "  awk -v r=\"$__bg_reward\" 'BEGIN { exit !(r ~ /^[0-9.eE+-]+$/ && r + 0 == 1) }'; exit $?",
            "elif [ -f /logs/verifier/reward.json ]; then",
            "  python3 -c 'import json, sys\n"
            "d = json.load(open(sys.argv[1]))\n"
            'v = d.get("reward", d) if isinstance(d, dict) else d\n'
            "vals = [v] if isinstance(v, (int, float)) else [x for x in (v.values() if isinstance(v, dict) else [])"
            " if isinstance(x, (int, float))]\n"
            'print("bashgym: reward.json =", d)\n'
            "sys.exit(0 if vals and all(float(x) == 1.0 for x in vals) else 1)' /logs/verifier/reward.json"
            "; exit $?",
            "fi",
        ]
    elif plan.pytest:
        out += [
            'if [ -s "$__bg/pytest-report" ]; then',
            "  echo \"bashgym: pytest runs exited $(tr '\\n' ' ' < \"$__bg/pytest-report\")(script exit $__bg_rc)\"",
            "  ! grep -qv '^0$' \"$__bg/pytest-report\"; exit $?",
            "fi",
        ]
    out.append('[ "$__bg_rc" = 0 ]')
    return "\n".join(line for line in out if line) + "\n"
