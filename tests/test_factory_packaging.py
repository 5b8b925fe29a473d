"""The packaging families: variety at 55 draws, and in real sandboxes the reference passing while a plausible wrong
edit (the wrong line, the wrong value, a half change, a broken file) fails the check."""

from __future__ import annotations

import pytest
from sandbox_fixtures import check_exit_after

from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.generate import draw_family
from bashgym_assets.scenarios.factory.variety import yield_variety
from bashgym_assets.scenarios.gate import gate_bundle

FAMILIES = {n: f for n, f in all_families().items() if f.category == "packaging"}

# one plausible wrong answer a family; $F is the task's main file (its first file with that name)
WRONG = {
    # a global substitution also rewrites target-version / python_version / minversion
    "packaging-pyproject-field": (
        "pyproject.toml",
        'sed -i -E \'s/(version|requires-python) = "[^"]*"/\\1 = "9.9.9"/\' "$F"',
    ),
    # the new dependency lands in the last table of the file, not in [project]
    "packaging-pyproject-dependency": ("pyproject.toml", 'printf \'dependencies = ["rich>=13"]\\n\' >> "$F"'),
    # a script table with the wrong command name
    "packaging-console-script": ("pyproject.toml", 'printf \'\\n[project.scripts]\\nx = "y:z"\\n\' >> "$F"'),
    # a hand edit that leaves a trailing comma: not JSON any more
    "packaging-npm-script": ("package.json", 'sed -i \'s/^  "name": \\(.*\\),$/  "name": \\1,,/\' "$F"'),
    "packaging-npm-dependency": (
        "package.json",
        'jq \'.dependencies = {}\' "$F" > /tmp/x && cat /tmp/x > "$F"',
    ),
    # a loose pattern: a sed that deletes every line holding a letter
    "packaging-requirements-pin": ("", ""),  # set per task below
    # recipe indented with spaces
    "packaging-makefile-target": ("Makefile", "printf '\\nnewtarget:\\n    echo hi\\n' >> \"$F\""),
    # the new version heading is added but Unreleased keeps its entries
    "packaging-changelog-release": (
        "CHANGELOG.md",
        "sed -i 's/^## \\[Unreleased\\]$/&\\n\\n## [9.9.9] - 2030-01-01/' \"$F\"",
    ),
}


def test_every_packaging_family_is_varied_at_55_draws() -> None:
    assert len(FAMILIES) >= 8
    for name, fam in FAMILIES.items():
        y = draw_family(fam, 55, seed=0)
        v = yield_variety(y)
        assert y.kept == 55 and not y.errors, (name, y.drops)
        assert v.phrasings >= 6 and v.cores >= 10, (name, v)


def _main_file(bundle, name: str) -> str:  # type: ignore[no-untyped-def]
    if not name:
        return next(p for p in bundle.files if p.endswith(("requirements.txt", "requirements/base.txt")))
    return min((p for p in bundle.files if p.endswith("/" + name)), key=len)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(WRONG))
def test_packaging_reference_passes_and_a_wrong_edit_fails(name: str, sandbox_image: str) -> None:

    bundle, _ = FAMILIES[name].make("e2e:1")
    result = gate_bundle(bundle, sandbox_image)
    assert result.admitted, result.detail
    fname, wrong = WRONG[name]
    path = _main_file(bundle, fname)
    if name == "packaging-requirements-pin":  # drop every requirement line that holds its first letter
        first = next(x for x in bundle.files[path].splitlines() if x and not x.startswith("#"))[0]
        wrong = f"sed -i '/{first}/d' {path}"
    code = check_exit_after(bundle, sandbox_image, [f"F={path}; {wrong}"])
    assert code not in (0, None), (name, wrong, code)
