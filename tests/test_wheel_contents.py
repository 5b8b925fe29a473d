"""The test helpers (``bashgym_assets/testing``) are not part of the shipped package: the wheel's package list
leaves them out, and no module it ships imports them (an import would break every installed copy)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, find_packages

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bashgym_assets"
HELPERS = "bashgym_assets.testing"


def wheel_packages() -> list[str]:
    """The packages setuptools puts in the wheel, found as the build finds them (pyproject's
    ``[tool.setuptools.packages.find]``; namespace packages unless it says ``namespaces = false``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    finder = find_namespace_packages if config.get("namespaces", True) else find_packages
    return finder(
        where=str(ROOT / config.get("where", ["."])[0]),
        include=config.get("include", ["*"]),
        exclude=config.get("exclude", []),
    )


def imports_of(path: Path) -> set[str]:
    """Every module a file of the checkout imports by name."""
    rel = path.relative_to(ROOT).with_suffix("")
    package = rel.parts if path.name == "__init__.py" else rel.parts[:-1]
    return imports_in(path.read_text(), ".".join(p for p in package if p != "__init__"))


def imports_in(source: str, package: str) -> set[str]:
    """Every module ``source`` imports by name (``import a.b``; ``from a.b import c`` as ``a.b`` and ``a.b.c``),
    relative imports resolved against ``package``, the package the code is in."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def is_helpers(name: str) -> bool:
    return name == HELPERS or name.startswith(HELPERS + ".")


def test_the_wheel_leaves_the_test_helpers_out() -> None:
    packages = wheel_packages()
    assert "bashgym_assets" in packages and "bashgym_assets.training" in packages  # the finder works
    assert "bashgym_assets.data.scenario_pack" in packages  # and keeps the package data's folders
    assert [p for p in packages if is_helpers(p)] == []
    # a subpackage left out of the list is still in its parent's folder: with include-package-data (on by
    # default) its files would ride along as bashgym_assets' data, unless excluded as data too (measured: 5 files)
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "testing/*" in setuptools.get("exclude-package-data", {}).get("bashgym_assets", [])


def test_no_shipped_module_imports_the_test_helpers() -> None:
    shipped = [p for p in PACKAGE.rglob("*.py") if not is_helpers(".".join(p.relative_to(ROOT).parts[:2]))]
    assert len(shipped) > 100
    offenders = {
        str(p.relative_to(ROOT)): sorted(n for n in imports_of(p) if is_helpers(n))
        for p in shipped
        if any(is_helpers(n) for n in imports_of(p))
    }
    assert offenders == {}


def test_the_import_scan_sees_every_spelling() -> None:
    """The scan above is only as good as its parser: each way of importing the helpers is seen, from a module of
    the package ``bashgym_assets.training`` (``..`` is ``bashgym_assets``)."""
    spellings = {
        "import bashgym_assets.testing.traces": True,
        "from bashgym_assets.testing import traces": True,
        "from bashgym_assets import testing": True,
        "from .. import testing": True,
        "from ..testing.tiny_model import build_tiny_model": True,
        "def f():\n    from bashgym_assets.testing import datasets\n": True,
        "from bashgym_assets import training": False,
        "from . import trainer": False,
        "import bashgym_assets.training.trainer": False,
    }
    for source, expected in spellings.items():
        names = imports_in(source, "bashgym_assets.training")
        assert any(is_helpers(n) for n in names) is expected, source
