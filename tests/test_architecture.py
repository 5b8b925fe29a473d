"""The house's shape, checked on every change (issue 30): layers run one way (the import-linter contract in
pyproject.toml, what ``make lint`` runs), no two modules import each other, and no private name is imported
across modules. Read from the source with grimp, import-linter's own graph builder, not by importing the package."""

from __future__ import annotations

import ast
import subprocess
import sys
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


def test_no_two_modules_import_each_other() -> None:
    import grimp

    graph = grimp.build_graph("bashgym_assets", exclude_type_checking_imports=True, cache_dir=None)
    cycles = sorted(
        {
            tuple(sorted((a, b)))
            for a in graph.modules
            for b in graph.find_modules_directly_imported_by(a)
            if a in graph.find_modules_directly_imported_by(b)
        }
    )
    assert cycles == [], cycles


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


def test_every_imported_package_is_declared_and_pinned() -> None:
    """A package the code imports but pyproject.toml does not name arrives only as someone else's dependency, at
    whatever version that one allows: each is declared, pinned with ``==``."""
    import importlib.metadata as md
    import re
    import tomllib

    local = {
        "bashgym_assets",
        "hook",
    }  # hook: the live-capture hook script beside hook_entry (ingest/hook.py)
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
