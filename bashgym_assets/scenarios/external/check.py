"""The bundle's check: the task's own verifier run as root on the final state, by its layout's pass rule, with
its pytest runs sent to the image's own pytest (Debian's ``python3-pytest``); and the static look at the test
files that refuses what the image cannot run (a package, a pytest plugin or its fixtures, newer syntax)."""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
import sys
from dataclasses import dataclass, field
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
# The checks run the image's pytest (Debian bookworm's python3-pytest, 7.2.1): these are the modules that package
# and its dependencies put in the image, so a test may import them.
PYTEST_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "packaging",
        "exceptiongroup",
        "attr",
        "attrs",
        "importlib_metadata",
        "more_itertools",
        "pkg_resources",
        "tomli",
        "typing_extensions",
        "zipp",
    }
)
# pytest 7.2.1's own fixtures (``python3 -m pytest --fixtures``), less ``cache``: the check runs without the cache
# provider, so that it writes no ``.pytest_cache``. Any other fixture a test asks for and no test file defines comes
# from a plugin the image lacks (``mocker``, ``benchmark``...).
PYTEST_FIXTURES = frozenset(
    {
        "request",
        "capsys",
        "capsysbinary",
        "capfd",
        "capfdbinary",
        "caplog",
        "doctest_namespace",
        "monkeypatch",
        "pytestconfig",
        "record_property",
        "record_xml_attribute",
        "record_testsuite_property",
        "recwarn",
        "tmp_path",
        "tmp_path_factory",
        "tmpdir",
        "tmpdir_factory",
    }
)
# Options of pytest plugins the suites' verifiers install with pytest (pytest-json-ctrf, pytest-timeout,
# pytest-cov, pytest-json-report), which the image lacks: accepted and ignored, as their reports and limits are
# not what decides a check, so that a verifier passing one still runs its tests (name -> takes a value).
IGNORED_PLUGIN_OPTIONS = {
    "--ctrf": True,
    "--timeout": True,
    "--cov": None,  # an optional value
    "--cov-report": True,
    "--no-cov": False,
    "--json-report": False,
    "--json-report-file": True,
}
PLUGIN_MODULE = "bashgym_pytest_options"


def image_has_pytest() -> bool:
    return image_has("python3-pytest")


def options_plugin() -> str:
    """The pytest plugin (a module beside the wrapper) that accepts ``IGNORED_PLUGIN_OPTIONS``."""
    lines = [
        f'"""bashgym: accepts and ignores options of pytest plugins the sandbox image lacks ({PLUGIN_MODULE})."""',
        "",
        "",
        "def pytest_addoption(parser):",
        '    group = parser.getgroup("bashgym", "options of plugins the sandbox lacks (ignored)")',
    ]
    for name, value in IGNORED_PLUGIN_OPTIONS.items():
        dest = "bashgym_ignored_" + name.lstrip("-").replace("-", "_")
        if value is None:
            kind = 'action="append", nargs="?", const=True'
        else:
            kind = 'action="append"' if value else 'action="store_true"'
        lines.append(f'    group.addoption("{name}", {kind}, dest="{dest}")')
    return "\n".join(lines) + "\n"


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
            for statement in node.body:
                visit(statement, inner)
            for branch in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(branch, guarded)
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
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if _decorator_name(dec) in ("pytest.fixture", "fixture"):
                    alias = (
                        next(
                            (
                                kw.value.value
                                for kw in dec.keywords
                                if kw.arg == "name"
                                and isinstance(kw.value, ast.Constant)
                                and isinstance(kw.value.value, str)
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


def _module_parametrized(tree: ast.Module) -> set[str]:
    """Arguments a module-level ``pytestmark`` parametrizes (every test of the module gets them)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            names |= _parametrized(marks)
    return names


def _named_plugins(tree: ast.Module) -> set[str]:
    """Top-level modules a ``pytest_plugins = ...`` names (each must be importable in the image)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets
        ):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            found.update(
                v.value.split(".")[0]
                for v in values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)
            )
    return found


def pytest_problems(sources: dict[str, str], provided_modules: set[str], instruction: str = "") -> list[str]:
    """Why these pytest files cannot run on the image's pytest (no pytest in the image, imports or plugins the
    image lacks, fixtures only a missing plugin provides, async tests, syntax newer than the image's Python
    3.11); empty when they can."""
    if not image_has_pytest():
        return ["the tests run pytest and the sandbox image has no python3-pytest"]
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
        for mod in _imports(tree) | _named_plugins(tree):
            if mod in stdlib or mod in local or mod in PYTEST_MODULES or mod in provided_modules:
                continue
            if mod not in _WELL_KNOWN_THIRD_PARTY and re.search(
                rf"(?<![\w.-]){re.escape(mod)}(\.py\b|/|\b)", instruction
            ):
                continue  # a module the task asks the agent to write
            missing.add(mod)
    if missing:
        problems.append(f"tests import packages not in the sandbox image: {', '.join(sorted(missing))}")
    # Arguments pytest_generate_tests may parametrize cannot be told statically: trust them there.
    generated = any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "pytest_generate_tests"
        for tree in trees.values()
        for node in tree.body
    )
    fixtures: set[str] = set(PYTEST_FIXTURES)
    for tree in trees.values():
        fixtures |= _fixture_names(tree)
    unsupported: set[str] = set()
    for name, tree in trees.items():
        base = posixpath.basename(name)
        if not (base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"):
            continue
        module_params = _module_parametrized(tree)
        for fn, extra in _test_functions(tree):
            for arg in _required_args(fn):
                if not (
                    generated
                    or arg in fixtures
                    or arg in extra
                    or arg in module_params
                    or arg in _parametrized(fn.decorator_list)
                ):
                    unsupported.add(f"the fixture {arg!r} ({base}::{fn.name})")
            if isinstance(fn, ast.AsyncFunctionDef):
                unsupported.add(f"async tests ({base}::{fn.name})")
    if unsupported:
        problems.append(
            "tests need a pytest plugin the sandbox image lacks: " + ", ".join(sorted(unsupported))
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
    """The executable the rewritten verifier calls instead of pytest: the image's pytest, with no cache and its
    temporary folders inside the check's own (the check leaves no trace), accepting ``IGNORED_PLUGIN_OPTIONS``
    (a module beside it); appends each run's exit status to ``report``. A verifier's own ``--basetemp`` wins."""
    return (
        "#!/bin/bash\n# bashgym: runs the task's pytest tests offline (see bashgym_assets/scenarios/external/check.py)\n"
        'd=$(dirname "$0")\n'
        'PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}" python3 -B -m pytest -p no:cacheprovider '
        f'-p {PLUGIN_MODULE} --basetemp "$d/../pytest-tmp" "$@"\n'
        f'rc=$?\necho "$rc" >> {report}\nexit $rc\n'
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
        plugin = options_plugin()
        delim = heredoc_delim(plugin)
        out.append(f"cat > \"$__bg/bin/{PLUGIN_MODULE}.py\" <<'{delim}'\n{plugin}{delim}")
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
