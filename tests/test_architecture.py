"""The house's shape, checked on every change (issues 30 and 41): layers run one way and siblings do not know each
other (the import-linter contract in pyproject.toml, what ``make lint`` runs), no import cycle of any length
between packages or between modules, no private name imported and no private attribute reached across modules, and
Dagster's internals used by one adapter only. Read from the source (grimp, import-linter's own graph builder, and
the AST), not by importing the package."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from bashgym_assets.config import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "bashgym_assets"


def test_the_layers_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


@functools.cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the package's modules it imports directly (imports under ``TYPE_CHECKING`` left out)."""
    import grimp

    graph = grimp.build_graph("bashgym_assets", exclude_type_checking_imports=True, cache_dir=None)
    return {m: frozenset(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def collapsed(graph: Mapping[str, Iterable[str]], depth: int) -> dict[str, set[str]]:
    """The graph with every module merged into its ancestor ``depth`` names below the root (1: the top-level
    packages and modules, ``bashgym_assets.rollout``); edges inside one merged unit are dropped."""

    def unit(module: str) -> str:
        return ".".join(module.split(".")[: depth + 1])

    merged: dict[str, set[str]] = {unit(m): set() for m in graph}
    for importer, imported in graph.items():
        merged[unit(importer)] |= {unit(m) for m in imported} - {unit(importer)}
    return merged


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (every cycle, whatever its length, lies in
    one): Tarjan's algorithm, iterative so that a deep import chain never meets the recursion limit. Written out
    because networkx is not a dependency of the project (torch brings it, unpinned)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            nxt = next((s for s in successors if s not in index or s in on_stack), None)
            if nxt is not None and nxt not in index:  # go down
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph.get(nxt, ())))))
            elif nxt is not None:  # an edge back into the current path
                low[node] = min(low[node], index[nxt])
            else:  # all successors done: close the component rooted here, hand the low link up
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def test_cycles_finds_every_length_and_only_cycles() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a: three long, no pair in it
        "d": {"e"},
        "e": {"d"},  # a pair
        "f": {"a", "f"},  # into a cycle, and a self-import: neither is a cycle between modules
        "g": set(),
    }
    assert cycles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)} | {
        "m5000": {"m0"}
    }  # deeper than the recursion limit
    assert cycles(chain) == [sorted(chain)]
    assert collapsed({"p.a.x": {"p.b.y", "p.a.z"}, "p.a.z": set(), "p.b.y": {"p.a.z"}}, 1) == {
        "p.a": {"p.b"},
        "p.b": {"p.a"},
    }


def test_no_import_cycle_between_packages() -> None:
    """Top-level packages and modules of bashgym_assets: a cycle of any length among them means two of them are
    one thing, or a shared piece sits too high (evaluation <-> serving, defs.executors -> housekeeping -> instance
    -> defs.executors were, until the constants and the step container config moved down)."""
    assert cycles(collapsed(import_graph(), 1)) == []


def test_no_import_cycle_between_modules() -> None:
    """Module by module, inside packages too (``scenarios.skills`` -> ``factory.generate`` -> ``factory.similarity``
    -> ``scenarios.skills`` was one, until ``normalise_instruction`` moved to ``factory.phrasing``)."""
    assert cycles(import_graph()) == []


def test_no_private_name_is_imported_across_modules() -> None:
    crossings = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bashgym_assets"):
                private = [
                    a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                ]
                if private:
                    crossings.append(f"{path.relative_to(PROJECT_ROOT)}: from {node.module} import {private}")
    assert crossings == [], crossings


@functools.cache
def module_trees() -> dict[Path, ast.Module]:
    """Every module of the package, parsed once for all the tests here."""
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


# namedtuple's public API, spelt with an underscore so that it never clashes with a field name
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_field_defaults", "_make"})
# Underscored names of the standard library and of other packages that the code reaches on purpose, as (the
# expression before the dot, the name): why. Every entry must still be used (a stale one fails the test too).
FOREIGN_PRIVATE_ALLOWED = {
    ("os", "_exit"): "documented: leave at once, without the interpreter's teardown (stopping, demo)",
    ("sys", "_getframe"): "documented: the source line of the family that called (scenarios.factory.world)",
    ("atexit", "_run_exitfuncs"): "CPython's: the exit hooks run before os._exit skips them (demo._leave)",
    ("hashlib", "_Hash"): "typeshed's name of a hash object, in an annotation only (ingest.base)",
    ("tracking_utils", "_tracking_uri"): "MLflow keeps the fluent API's URI only there: saved and put back "
    "around a pyfunc call (training.registry)",
    ("registry_utils", "_registry_uri"): "the same, for the registry URI (training.registry)",
    ("ds", "_to_mlflow_entity"): "an MLflow dataset as the entity log_inputs takes: no public converter "
    "(training.registry)",
    ("raw", "_sock"): "docker-py's attach socket: the socket under its SocketIO wrapper (sandbox._exec)",
}


def defined_names(tree: ast.Module) -> set[str]:
    """Names a module defines itself: functions, classes and methods, module- and class-level assignments, and the
    attributes set on ``self`` / ``cls``. A private name is private to its module: the module may use it on any
    object (``other._x`` in ``__eq__``, a scope object of its own class)."""
    names: set[str] = set()
    scopes: list[list[ast.stmt]] = [tree.body] + [
        n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
    ]
    for body in scopes:
        for stmt in body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else []
            if isinstance(stmt, ast.AnnAssign | ast.AugAssign):
                targets = [stmt.target]
            names |= {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return names


def private_reaches(
    tree: ast.Module, where: str, allowed_used: set[tuple[str, str]] | None = None
) -> list[str]:
    """``x._name`` (and ``getattr(x, "_name")``) where ``x`` is not ``self``, ``cls`` or ``super()`` and ``_name``
    is not one of the module's own names: reaching into another module's private state."""
    own = defined_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base, name = node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            base, name = node.args[0], node.args[1].value
        else:
            continue
        if not is_private(name) or name in NAMEDTUPLE_API or name in own:
            continue
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            continue
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
            continue
        key = (ast.unparse(base), name)
        if key in FOREIGN_PRIVATE_ALLOWED:
            if allowed_used is not None:
                allowed_used.add(key)
            continue
        found.append((node.lineno, f"{where}:{node.lineno}: {key[0]}.{name}"))
    return [line for _, line in sorted(found)]


def test_private_reaches_are_found() -> None:
    source = """
import os
class Box:
    def __init__(self, other):
        self._mine = 1
        self._session = other
    def run(self, other: "Box"):
        self._session._mark_dead()      # another module's private method
        getattr(self._session, "_lock")  # the same, spelt as a string
        super()._setup()
        os._exit(0)
        return other._mine, self._mine, Box._helper, parts._replace()
    @staticmethod
    def _helper(): ...
"""
    assert private_reaches(ast.parse(source), "m.py") == [
        "m.py:8: self._session._mark_dead",
        "m.py:9: self._session._lock",
    ]


def test_no_private_attribute_is_reached_across_modules() -> None:
    used: set[tuple[str, str]] = set()
    reaches = [
        line
        for path, tree in module_trees().items()
        for line in private_reaches(tree, str(path.relative_to(PROJECT_ROOT)), used)
    ]
    assert reaches == [], "make the name public (or add a public method) instead:\n" + "\n".join(reaches)
    assert set(FOREIGN_PRIVATE_ALLOWED) - used == set(), "allowed but no longer used: drop them"


# ---- Dagster's internals, in one adapter -------------------------------------------------------------------------
DAGSTER_ADAPTER = PACKAGE / "defs" / "dagster_internals.py"


def dagster_private_uses(tree: ast.Module, where: str) -> list[str]:
    """Imports of ``dagster._*`` (``import``, ``from``) and strings naming such a module (``import_module``, code run
    in a child process)."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = node.value.split()
        if any(n.startswith("dagster._") for n in names):
            found.append(f"{where}:{node.lineno}")
    return found


def test_only_the_adapter_uses_dagster_internals() -> None:
    users = {
        path.relative_to(PACKAGE).as_posix()
        for path, tree in module_trees().items()
        if dagster_private_uses(tree, str(path))
    }
    assert users == {"defs/dagster_internals.py"}
    probe = ast.parse('from dagster import _check\nimport dagster._core.errors\nrun("import dagster._utils")')
    assert dagster_private_uses(probe, "m.py") == ["m.py:1", "m.py:2", "m.py:3"]


def test_the_adapter_names_the_installed_dagster() -> None:
    """Internals change between releases without notice: a Dagster upgrade fails here until the adapter has been
    read against the new release and its ``CHECKED_AGAINST`` moved."""
    import importlib.metadata as md

    tree = ast.parse(DAGSTER_ADAPTER.read_text())
    checked = next(
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["CHECKED_AGAINST"]
        and isinstance(node.value, ast.Constant)
    )
    assert checked == md.version("dagster")
    assert f"dagster {checked}" in (ast.get_docstring(tree) or "")


def test_only_the_dagster_layer_and_the_apps_above_it_import_dagster() -> None:
    """The domain modules are plain Python: Dagster (and its integration packages) is imported by ``defs`` and
    the modules on the contract's lines above it, nothing below."""
    import re
    import tomllib

    layers = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ][0]["layers"]
    above = layers[: layers.index("defs") + 1]
    allowed = {name.strip(" ()") for line in above for name in re.split(r"[|:]", line)}
    importers = set()
    for path, tree in module_trees().items():
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(n.split(".")[0] == "dagster" or n.startswith("dagster_") for n in names):
                importers.add(path.relative_to(PACKAGE).parts[0].removesuffix(".py"))
    assert importers and importers <= allowed, importers - allowed


def test_every_imported_package_is_declared_and_pinned() -> None:
    """A package the code imports but pyproject.toml does not name arrives only as someone else's dependency, at
    whatever version that one allows: each is declared, pinned with ``==``."""
    import importlib.metadata as md
    import re
    import tomllib

    local = {
        "bashgym_assets",
        "hook",  # the live-capture hook script beside hook_entry (ingest/hook.py)
        "bashgym_turns",  # inference/turns.py as logged beside an MLflow pyfunc model (training/pyfunc.py)
    }
    imported: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = sorted(imported - set(sys.stdlib_module_names) - local)
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [
        r for rs in project["optional-dependencies"].values() for r in rs
    ]
    pinned = {re.split(r"[=<>\[ ;]", r)[0].lower().replace("_", "-"): "==" in r for r in requirements}
    dists = md.packages_distributions()
    missing = [
        m for m in third_party if not any(pinned.get(d.lower().replace("_", "-")) for d in dists.get(m, [m]))
    ]
    assert missing == [], f"imported but not declared and pinned in pyproject.toml: {missing}"
