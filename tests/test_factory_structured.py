"""The ``structured`` task-factory category (issue 39): JSON, YAML, TOML, INI, CSV and SQLite data chores.

Without Docker: 18 families, each drawn reproducibly, as root and as operator in folders other than home, from at
least 8 whole phrasings with at least 12 state-changing solutions, and far from every held-out skill (no ``tr``, no
ports, no SQL that updates rows). With Docker: every family's draws are admitted by the real gate, and for each
family two plausible wrong answers (the look-alike file edited, the owner lost, a global edit that hits the same key
in another section, the header dropped, numbers stored as text ...) fail its check.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from sandbox_fixtures import check_exits_after

from bashgym_assets.scenarios import skills
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.catalog import command_flags
from bashgym_assets.scenarios.factory.family import CATEGORIES, all_families
from bashgym_assets.scenarios.factory.generate import draw_family
from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES, UNSEEN_BOUND
from bashgym_assets.scenarios.factory.variety import yield_variety
from bashgym_assets.scenarios.gate import gate_bundles

FAMILIES = {n: f for n, f in all_families().items() if f.category == "structured"}
_HELD_OUT_WORDS = re.compile(
    r"\b(port|listen\w*|signal\w*|reload\w*|cron\w*|symlink\w*|editorconfig)\b", re.I
)
_HELD_OUT_COMMANDS = {"tr", "ln", "kill", "pkill", "killall", "crontab", "truncate", "logrotate"}
_ROW_SQL = re.compile(r"\b(UPDATE\s+\w+\s+SET|DELETE\s+FROM|INSERT\s+INTO)\b", re.I)


def _spec(bundle: ScenarioBundle) -> dict[str, Any]:
    """The JSON spec a check carries as its argument (``python3 - '<spec>' <<'PY'``)."""
    line = bundle.check.splitlines()[1]
    return json.loads(shlex.split(line)[2])


def test_the_category_is_registered_with_eighteen_families() -> None:
    assert "structured" in CATEGORIES
    assert len(FAMILIES) == 18, sorted(FAMILIES)
    assert not set(FAMILIES) & HELD_OUT_FAMILIES
    assert all(n.startswith("structured-") for n in FAMILIES)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_draws_reproducibly_and_varies(name: str) -> None:
    fam = FAMILIES[name]
    assert fam.make("s:1") == fam.make("s:1")
    assert fam.make("s:1")[0] != fam.make("s:2")[0]
    y = draw_family(fam, 55, seed=0)
    assert y.kept == 55 and not y.errors, y.errors
    v = yield_variety(y)
    assert v.phrasings >= 8, v
    assert v.cores >= 12, v
    users = Counter(b.user for b in y.bundles)
    assert users["root"] >= 10 and users["operator"] >= 10, users
    starts = {b.start_dir for b in y.bundles}
    assert any(s.startswith(("/srv", "/var/lib", "/opt", "/app", "/etc")) for s in starts), starts
    assert any(s.startswith("/home/operator/") for s in starts), starts
    assert len({b.difficulty for b in y.bundles}) >= 2
    # a service account owns the data in some root draws (an edit must not take the file away from it)
    many = draw_family(fam, 151, seed=0, max_draws_factor=6)  # at most 906 draws
    assert many.kept == 151, many.drops


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_no_family_asks_for_or_uses_a_held_out_skill(name: str) -> None:
    for b in draw_family(FAMILIES[name], 40, seed=5).bundles:
        assert not _HELD_OUT_WORDS.search(b.task), b.task
        used = {unit.split()[0] for unit in command_flags(b.reference)}
        assert not used & _HELD_OUT_COMMANDS, (used, b.reference)
        sql = [r for r in b.reference if "sqlite3" in r.split("\n", 1)[0]]
        assert not any(_ROW_SQL.search(r) for r in sql), sql


@pytest.mark.slow
def test_held_out_families_stay_far_from_the_structured_families() -> None:
    groups = {n: tuple(_skill_docs(n, 30)) for n in [*FAMILIES, *sorted(HELD_OUT_FAMILIES)]}
    scores = skills.family_scores(groups)
    for held in sorted(HELD_OUT_FAMILIES):
        name, score = skills.nearest_family(scores, held, list(FAMILIES))
        # measured: data-sqlite-update ~ structured-sqlite-alter-table 0.15, listen-port-config ~ toml 0.16
        assert score < UNSEEN_BOUND - 0.05, f"{held} ~ {name} {score:.3f}"


def _skill_docs(name: str, n: int) -> list[skills.SkillDoc]:
    fam = all_families()[name]
    out = []
    for i in range(n):
        b, values = fam.make(f"0:{i}")
        out.append(skills.skill_doc(b.id, b.task, b.reference, group=name, values=values))
    return out


# ---- in real sandboxes -------------------------------------------------------------------------------------------
# One task of every family goes through the real gate in tests/test_factory.py
# (test_every_family_admitted_by_the_real_gate); the wrong-answer test below gates the tasks it uses.


def _find(name: str, want: Callable[[ScenarioBundle], bool]) -> ScenarioBundle:
    """The first draw of a family (seeds ``w:0``, ``w:1``, ...) that ``want`` accepts."""
    for i in range(600):
        b, _ = FAMILIES[name].make(f"w:{i}")
        if want(b):
            return b
    raise AssertionError(f"no draw of {name} fits")


def _sh(bundle: ScenarioBundle, path: str) -> str:
    """``path`` as the bundle's reference writes it (relative to where the shell starts)."""
    start = bundle.start_dir + "/"
    return path[len(start) :] if path.startswith(start) else path


def _retarget(bundle: ScenarioBundle, path: str, other: str) -> list[str]:
    """The reference, acting on ``other`` wherever it acts on ``path`` (the look-alike edited instead)."""
    old, new = _sh(bundle, path), _sh(bundle, other)
    pattern = re.compile(rf"(?<![\w./-]){re.escape(old)}(?![\w-]|\.(?!new\b|tmp\b|edit\b|pruned\b|bak\b))")
    return [pattern.sub(new, line) for line in bundle.reference]


def _near(bundle: ScenarioBundle) -> str:
    """A look-alike of the target (``.bak``, ``.example``, ``.orig`` ...) the check wants unchanged."""
    target = _spec(bundle)["path"]
    return next(p for p in sorted(_spec(bundle)["same"]) if p.startswith(target.rsplit(".", 1)[0]))


def _has_near(bundle: ScenarioBundle) -> bool:
    spec = _spec(bundle)
    return "path" in spec and any(p.startswith(spec["path"].rsplit(".", 1)[0]) for p in spec["same"])


def _owner_lost(bundle: ScenarioBundle) -> bool:
    """A draw whose reference restores owner or mode after moving a new file over the old one."""
    return any(re.match(r"(chown|chmod) ", line) for line in bundle.reference)


def _no_fix(bundle: ScenarioBundle) -> list[str]:
    return [line for line in bundle.reference if not re.match(r"(chown|chmod) ", line)]


def _wrong_answers() -> list[tuple[str, ScenarioBundle, list[str]]]:
    cases: list[tuple[str, ScenarioBundle, list[str]]] = []
    edits = (
        "structured-json-set-path",
        "structured-yaml-set-value",
        "structured-ini-edit",
        "structured-yaml-list-edit",
        "structured-toml-table-edit",
    )
    for name in edits:  # the look-alike copy edited; the file recreated without its owner or mode
        b = _find(name, lambda b: _has_near(b) and "grep -l" not in " ".join(b.reference))
        cases.append((f"{name}: the copy edited", b, _retarget(b, _spec(b)["path"], _near(b))))
        b = _find(name, _owner_lost)
        cases.append((f"{name}: owner or mode lost", b, _no_fix(b)))
    # a global edit of a key that another section shares
    b = _find(
        "structured-ini-edit",
        lambda b: any(r.startswith("sed -i '/^\\[") and " s/" in r for r in b.reference),
    )
    sed = next(r for r in b.reference if r.startswith("sed -i '/^\\[") and " s/" in r)
    cases.append(("ini: global sed", b, [re.sub(r"sed -i '/\^\\\[\w+\\\]/,/\^\\\[/ ", "sed -i '", sed)]))
    # prune: the matching entries kept and the others dropped (the condition inverted)
    b = _find("structured-json-prune-array", lambda b: any("|= map(select((" in r for r in b.reference))
    cases.append(("prune inverted", b, [r.replace(") | not))", ")))") for r in b.reference]))
    b = _find("structured-json-prune-array", lambda b: _spec(b)["owned"] and _owner_lost(b))
    cases.append(("prune owner lost", b, _no_fix(b)))
    # JSON lines to CSV: no header; every field in file order
    b = _find(
        "structured-jsonl-to-csv", lambda b: any(r.startswith(("echo ", "printf ")) for r in b.reference)
    )
    cases.append(
        ("csv without header", b, [r for r in b.reference if not r.startswith(("echo ", "printf "))])
    )
    b = _find("structured-jsonl-to-csv", lambda b: True)
    src = next(iter(_spec(b)["same"]))
    cases.append(
        (
            "csv of every field",
            b,
            [f"jq -r '[.[] | tostring] | @csv' {_sh(b, src)} > {_sh(b, _spec(b)['out'])}"],
        )
    )
    # flatten: only the top level, nested objects printed whole; keys left in lower case
    b = _find("structured-json-flatten-env", lambda b: True)
    src = next(
        p for p in _spec(b)["same"] if p.endswith(".json") and "schema" not in p and "defaults" not in p
    )
    out = _sh(b, _spec(b)["out"])
    cases.append(
        (
            "flatten top level only",
            b,
            [f"jq -r 'to_entries[] | \"\\(.key)=\\(.value)\"' {_sh(b, src)} > {out}"],
        )
    )
    b = _find(
        "structured-json-flatten-env", lambda b: ".env" in _spec(b)["out"] or "env.list" in _spec(b)["out"]
    )
    cases.append(
        ("env keys lower case", b, [*b.reference, f"sed -i 's/^[^=]*/\\L&/' {_sh(b, _spec(b)['out'])}"])
    )
    # validate: only parse errors rejected (a wrong type or a missing field slips through); rejects re-serialised
    b = _find("structured-jsonl-validate", lambda b: True)
    s = _spec(b)
    src, clean, rej = _sh(b, next(iter(s["same"]))), _sh(b, s["clean"]), _sh(b, s["rejects"])
    mk = [f"mkdir -p $(dirname {rej})"]
    cases.append(
        (
            "validate parse only",
            b,
            [
                *mk,
                f"jq -R -c 'fromjson? | select(type == \"object\")' {src} > {clean}",
                f"jq -R -r 'select((fromjson? | type == \"object\") | not)' {src} > {rej}",
            ],
        )
    )
    cases.append(("validate rejects dropped", b, [*mk, *b.reference[1:], f": > {rej}"]))
    # CSV reshape: the right columns in the file's order; an awk split that breaks quoted commas
    b = _find(
        "structured-csv-reshape",
        lambda b: (
            any("NR == 1 { print" in r for r in b.reference)
            and bool(set(_spec(b)["rows"][0]) - set(next(iter(b.files.values())).splitlines()[0].split(",")))
        ),
    )
    cases.append(
        ("reshape header kept", b, [re.sub(r"NR == 1 \{ print [^;]*; next \} ", "", r) for r in b.reference])
    )
    b = _find(
        "structured-csv-reshape",
        lambda b: "comment" in _spec(b)["rows"][0] and _spec(b)["out"] not in _spec(b)["owned"],
    )
    idx = _spec(b)["rows"][0]
    src = _sh(b, next(p for p in _spec(b)["same"] if not p.endswith(".orig")))
    cases.append(("reshape splits quotes", b, [f"cut -d, -f1-{len(idx)} {src} > {_sh(b, _spec(b)['out'])}"]))
    # filter: the header lost; the comparison made on text
    b = _find("structured-csv-filter-rows", lambda b: any("'NR == 1 || (" in r for r in b.reference))
    cases.append(("filter no header", b, [r.replace("'NR == 1 || (", "'NR > 1 && (") for r in b.reference]))
    b = _find(
        "structured-csv-filter-rows",
        lambda b: any("'NR == 1 || ($" in r and '"' not in r for r in b.reference),
    )
    cases.append(
        (
            "filter as text",
            b,
            [re.sub(r"\$(\d+) ([<>]=?) ([\d.]+)", r'$\1 "" \2 "\3"', r) for r in b.reference],
        )
    )
    # add a column: the header left without the new name; values without rounding to two decimals
    b = _find("structured-csv-add-column", lambda b: any("NR == 1 { print $0," in r for r in b.reference))
    cases.append(
        (
            "column header missing",
            b,
            [
                re.sub(r'NR == 1 \{ print \$0, "\w+"; next \} ', "NR == 1 { print; next } ", r)
                for r in b.reference
            ],
        )
    )
    b = _find("structured-csv-add-column", lambda b: _spec(b)["out"] not in _spec(b)["owned"])
    src, out = _spec(b)["rows"], _sh(b, _spec(b)["out"])
    srcp = _sh(b, next(p for p in _spec(b)["same"] if "sample" not in p))
    cases.append(("column left empty", b, [f"sed '1s/$/,{src[0][-1]}/; 2,$s/$/,/' {srcp} > {out}"]))
    # concat: every CSV in the folder (the look-alikes too); the header repeated
    b = _find(
        "structured-csv-concat", lambda b: any(r.startswith(("head -n 1", "{ head")) for r in b.reference)
    )
    folder = _sh(b, _spec(b)["out"].rsplit("/", 1)[0]) or "."
    out = _sh(b, _spec(b)["out"])
    cases.append(
        (
            "concat every file",
            b,
            [
                f"cat {' '.join(_sh(b, p) for p in sorted(_spec(b)['same']))} > /tmp/all.csv",
                f"awk 'FNR == 1 && NR != 1 {{ next }} 1' /tmp/all.csv > {out}",
            ],
        )
    )
    months = [_sh(b, p) for p in sorted(_spec(b)["same"]) if re.search(r"-\d{4}-\d\d\.csv$", p)]
    cases.append(("concat header repeated", b, [f"cat {' '.join(months)} > {out}"]))
    del folder
    # aggregate: the count instead of the asked figure; unsorted output
    b = _find(
        "structured-group-aggregate",
        lambda b: "total_" in _spec(b)["rows"][0][1] and any(r.startswith("echo ") for r in b.reference),
    )
    cases.append(
        (
            "aggregate counts",
            b,
            [r.replace("s[$1] += $2", "s[$1] += 1").replace("sum(v)", "len(v)") for r in b.reference],
        )
    )
    b = _find(
        "structured-group-aggregate",
        lambda b: (
            any(r.endswith("| sort >> " + _sh(b, _spec(b)["out"])) for r in b.reference)
            and len(_spec(b)["rows"]) > 3
        ),
    )
    cases.append(("aggregate desc", b, [r.replace("| sort >>", "| sort -r >>") for r in b.reference]))
    # SQLite import: the table created by .import (every column TEXT); the header imported as a row
    b = _find("structured-sqlite-import-csv", lambda b: True)
    s = _spec(b)
    csvp = _sh(b, next(iter(s["same"])))
    cases.append(("import as text", b, [f"sqlite3 {_sh(b, s['db'])} '.import --csv {csvp} {s['t']}'"]))
    b = _find("structured-sqlite-import-csv", lambda b: any("--skip 1" in r for r in b.reference))
    cases.append(("import with header", b, [r.replace("--skip 1 ", "") for r in b.reference]))
    # SQLite join: an inner join where customers without orders were asked for; the total not rounded
    b = _find("structured-sqlite-join-report", lambda b: any("LEFT JOIN" in r for r in b.reference))
    cases.append(("join drops customers", b, [r.replace("LEFT JOIN", "JOIN") for r in b.reference]))
    b = _find("structured-sqlite-join-report", lambda b: any("ORDER BY SUM" in r for r in b.reference))
    cases.append(
        (
            "join wrong order",
            b,
            [r.replace("ORDER BY SUM(o.amount) DESC", "ORDER BY SUM(o.amount) ASC") for r in b.reference],
        )
    )
    # SQLite alter: a nullable column without a default filled; the old table kept beside a copy
    b = _find("structured-sqlite-alter-table", lambda b: any("NOT NULL DEFAULT" in r for r in b.reference))
    cases.append(("alter no default", b, [re.sub(r" NOT NULL DEFAULT \S+;", ";", r) for r in b.reference]))
    b = _find("structured-sqlite-alter-table", lambda b: any("RENAME TO" in r for r in b.reference))
    cases.append(
        (
            "alter copies the table",
            b,
            [
                re.sub(r"ALTER TABLE (\w+) RENAME TO (\w+);", r"CREATE TABLE \2 AS SELECT * FROM \1;", r)
                for r in b.reference
            ],
        )
    )
    # SQLite to JSON: the rows as arrays (no keys); the whole table without the condition or grouping
    b = _find("structured-sqlite-to-json", lambda b: any("sqlite3 -json" in r for r in b.reference))
    sql = re.search(r"sqlite3 -json \S+ '([^']*)'", " ".join(b.reference))
    assert sql
    db = re.search(r"sqlite3 -json (\S+)", " ".join(b.reference))
    assert db
    out = _sh(b, _spec(b)["out"])
    cases.append(
        (
            "json arrays",
            b,
            [
                f"sqlite3 {db.group(1)} '.mode list' {shlex.quote(sql.group(1))} | jq -R -s 'split(\"\\n\")' > {out}"
            ],
        )
    )
    table = re.search(r"FROM (\w+)", sql.group(1))
    assert table
    cases.append(
        ("json whole table", b, [f"sqlite3 -json {db.group(1)} 'SELECT * FROM {table.group(1)}' > {out}"])
    )
    return cases


@pytest.mark.docker
@pytest.mark.slow
def test_references_pass_and_plausible_wrong_answers_fail(sandbox_image: str) -> None:

    cases = _wrong_answers()
    names = {b.id.split(".")[1] for _, b, _ in cases}
    assert names == set(FAMILIES), set(FAMILIES) - names
    assert all(n >= 2 for n in Counter(b.id.split(".")[1] for _, b, _ in cases).values())
    unique = {b.id: b for _, b, _ in cases}
    results = gate_bundles(list(unique.values()), sandbox_image, max_parallel=4)
    assert all(r.admitted for r in results), [
        (r.scenario_id, r.detail[:300]) for r in results if not r.admitted
    ]

    codes = check_exits_after([(bundle, commands) for _, bundle, commands in cases], sandbox_image)
    passed = [label for (label, _, _), code in zip(cases, codes, strict=True) if code == 0]
    assert not passed, passed
