"""The git, data and text families: variety at 55 draws, and for every new family, in a real sandbox, the reference
passing while a plausible wrong answer (the wrong side of a merge, a merge instead of a cherry-pick, a stash never
re-applied, one commit too few squashed, a shallow or reversed merge, a copy instead of a rename, the first row
instead of the latest, an unfiltered view, the raw records, cat -n, fold splitting words) fails the check."""

from __future__ import annotations

import json
import re

import pytest
from sandbox_fixtures import check_exit_after

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.generate import draw_family
from bashgym_assets.scenarios.factory.split import is_held_out_family
from bashgym_assets.scenarios.factory.variety import yield_variety
from bashgym_assets.scenarios.factory.world import quote
from bashgym_assets.scenarios.gate import gate_bundle

NEW = (
    "git-resolve-conflict",
    "git-cherry-pick",
    "git-stash-switch",
    "git-squash-commits",
    "data-json-merge",
    "data-json-rename-key",
    "data-csv-dedupe-latest",
    "data-sqlite-index-view",
    "text-awk-report",
    "text-fixed-width",
    "text-number-lines",
    "text-wrap-lines",
)
FAMILIES = all_families()
_BRANCHES = "git for-each-ref --format='%(refname:short)' refs/heads"


@pytest.mark.parametrize(
    "name",
    [n for n, f in FAMILIES.items() if f.category in ("git", "data", "text") and not is_held_out_family(n)],
)
def test_git_data_text_families_are_varied_at_55_draws(name: str) -> None:
    y = draw_family(FAMILIES[name], 55, seed=0)
    v = yield_variety(y)
    assert y.kept == 55 and not y.errors, (name, y.drops, y.errors)
    assert v.phrasings >= 6, (name, v)
    if name in NEW:
        assert v.cores >= 10, (name, v)


def _repo(b: ScenarioBundle) -> str:
    return next(line.split("'")[1] for line in b.check.splitlines() if line.startswith("cd '"))


def _quoted(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m, (pattern, text)
    return m.group(1)


def _wrong(name: str, b: ScenarioBundle) -> list[str]:
    """A plausible wrong answer for one drawn task of ``name``, as shell commands run as the task's user."""
    if name.startswith("git-"):
        cd = f"cd {quote(_repo(b))}"
        if name == "git-resolve-conflict":  # -X ours settles every conflict on our side
            return [cd, f"git merge -X ours --no-edit $({_BRANCHES} | grep /)"]
        if name == "git-cherry-pick":  # merges the whole source branch instead of one commit
            return [
                cd,
                f"t=$({_BRANCHES} | grep -E '^(release/|stable-|production|maint/)')",
                f's=$({_BRANCHES} | grep -vx -e "$t" | grep -v -x -e main -e master | head -n 1)',
                'git checkout -q "$t" && git merge -q --no-edit "${s:-main}"',
            ]
        if name == "git-stash-switch":  # stashed and switched, never re-applied
            return [cd, f"git stash -u && git switch $({_BRANCHES} | grep -vx -e main -e master)"]
        n = int(_quoted(r"(\d+) (?:tiny )?commits", b.task))
        msg = _quoted(r"'([^']+)'", b.task)
        branch = _quoted(r"git log -1 --format=%s '([^']+)'", b.check)
        return [
            cd,
            f"git switch -q {quote(branch)}",
            f"git reset --soft HEAD~{n - 1}",
            f"git commit -q -m {quote(msg)}",
        ]
    src = next(iter(b.files))
    if name == "data-json-merge":  # the defaults win instead of the overrides
        a = _quoted(r"json\.load\(open\('([^']+)'\)\) == base", b.check)
        over = next(p for p in b.files if p != a and not p.endswith(".example.json"))
        out = _quoted(r"got = json\.load\(open\('([^']+)'\)\)", b.check)
        return [f"jq -s '.[1] * .[0]' {quote(a)} {quote(over)} > {quote(out)}"]
    if name == "data-json-rename-key":  # copies the value under the new name but keeps the old key too
        out = _quoted(r"json\.load\(open\('([^']+)'\)\) == WANT", b.check)
        want = json.loads(_quoted(r"WANT = json\.loads\(r'''(.*)'''\)", b.check))
        doc = json.loads(b.files[src])
        recs, new = (
            (want, doc)
            if isinstance(want, list)
            else (
                next(v for v in want.values() if isinstance(v, list)),
                next(v for v in doc.values() if isinstance(v, list)),
            )
        )
        for old_r, new_r in zip(new, recs, strict=True):
            old_r.update(new_r)
        return [f"printf %s {quote(json.dumps(doc))} > {quote(out)}"]
    if name == "data-csv-dedupe-latest":  # keeps each key's first row, not its latest
        out = _quoted(r"\[ -f '([^']+)' \]", b.check)
        return [f"awk -F, '!seen[$1]++' {quote(src)} > {quote(out)}"]
    if name == "data-sqlite-index-view":  # an index on the wrong column, a view without the filter
        db = _quoted(r"sqlite3\.connect\('([^']+)'\)", b.check)
        table = _quoted(r"SELECT \* FROM (\w+)'", b.check)
        stmts = []
        if "index_info" in b.check:
            index = _quoted(r"index_info..(\w+)", b.check)
            stmts.append(f"CREATE INDEX {index} ON {table}(id);")
        if "type FROM sqlite_master" in b.check:
            view = _quoted(r"WHERE name = .(\w+)", b.check)
            stmts.append(f"CREATE VIEW {view} AS SELECT * FROM {table};")
        return [f"sqlite3 {quote(db)} {quote(' '.join(stmts))}"]
    out = (
        _quoted(r"\[ -f '([^']+)' \]", b.check)
        if "[ -f '" in b.check
        else _quoted(r"open\('([^']+)'\)", b.check)
    )
    if name == "text-awk-report":  # the raw records, not the report
        return [f"grep -v '^#' {quote(src)} > /tmp/w && cat /tmp/w > {quote(out)}"]
    if name == "text-fixed-width":  # squeezes the padding but keeps spaces as the separator
        return [f"sed 's/  */ /g' {quote(src)} > /tmp/w && cat /tmp/w > {quote(out)}"]
    if name == "text-number-lines":  # cat -n's padded numbers and tab
        return [f"cat -n {quote(src)} > /tmp/w && cat /tmp/w > {quote(out)}"]
    width = json.loads(_quoted(r"WANT = json\.loads\(r'''(.*)'''\)", b.check))["n"]
    return [f"fold -w {width} {quote(src)} > /tmp/w && cat /tmp/w > {quote(out)}"]  # splits words


@pytest.mark.docker
@pytest.mark.parametrize("name", NEW)
def test_reference_passes_and_a_wrong_answer_fails(name: str, sandbox_image: str) -> None:

    bundle, _ = FAMILIES[name].make("e2e:1")
    result = gate_bundle(bundle, sandbox_image)
    assert result.admitted, result.detail
    wrong = _wrong(name, bundle)
    code = check_exit_after(bundle, sandbox_image, wrong)
    assert code not in (0, None), (name, wrong, code)
