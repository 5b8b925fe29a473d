"""Data: slicing, converting and summarising structured data (CSV, JSON, SQLite) with the shell's data tools.

The worlds are small tables drawn from a few realistic schemas (sales, staff, products, servers ...), with the
traps that catch a sloppy pipeline: a header line that sorts with the numbers, numbers of different widths that
sort wrongly as text, a second file or table that must not be used, rows that only half match a filter.
Checks compare the final file or database with values computed here, tolerant of whitespace, quoting and number
formatting (``12.5`` and ``12.50`` are the same price).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import (
    CITIES,
    FIRST_NAMES,
    FRUITS,
    HOME,
    TEAMS,
    WORDS,
    World,
    quote,
)

# ---- tables ------------------------------------------------------------------------------------------------------
# (file stem, columns): a column is (name, kind); kinds: person, city, team, fruit, sku, host, oid (unique keys),
# "int:lo:hi", "dec:lo:hi" (numbers), "pick:a/b/c" (a small set of labels).
_SCHEMAS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("sales", (("rep", "person"), ("region", "city"), ("units", "int:1:900"), ("revenue", "dec:40:25000"))),
    ("staff", (("name", "person"), ("team", "team"), ("salary", "int:28000:160000"), ("age", "int:19:67"))),
    ("products", (("sku", "sku"), ("product", "fruit"), ("price", "dec:1:320"), ("stock", "int:0:1500"))),
    (
        "servers",
        (("host", "host"), ("datacenter", "city"), ("cpu_pct", "int:1:100"), ("mem_mb", "int:128:65536")),
    ),
    ("players", (("player", "person"), ("club", "city"), ("score", "int:3:9800"), ("games", "int:1:95"))),
    ("orders", (("order_id", "oid"), ("customer", "person"), ("city", "city"), ("total", "dec:3:2400"))),
    ("budgets", (("project", "word"), ("owner", "person"), ("team", "team"), ("spent", "int:50:99000"))),
)
_LABEL_KINDS = ("city", "team", "fruit")


def _numeric(kind: str) -> bool:
    return kind.startswith(("int:", "dec:"))


def _value(w: World, kind: str, used: set[str], unique: bool) -> str:
    """One cell of ``kind``; keys (and ``unique`` columns) never repeat within a table."""
    key_kinds = {
        "person": lambda: w.pick(FIRST_NAMES),
        "sku": lambda: f"SKU-{w.randint(1000, 9999)}",
        "host": lambda: f"{w.pick(WORDS)}-{w.randint(1, 99):02d}",
        "oid": lambda: f"A{w.randint(1000, 9999)}",
        "word": lambda: w.pick(WORDS),
    }
    labels = {"city": CITIES, "team": TEAMS, "fruit": FRUITS}
    for _ in range(200):
        if kind in key_kinds:
            value = key_kinds[kind]()
        elif kind in labels:
            value = w.pick(labels[kind])
        elif kind.startswith("pick:"):
            value = w.pick(kind[5:].split("/"))
        else:
            lo, hi = (int(x) for x in kind.split(":")[1:])
            value = (
                str(w.randint(lo, hi))
                if kind.startswith("int:")
                else f"{w.randint(lo * 100, hi * 100) / 100:.2f}"
            )
        if not (unique or kind in key_kinds) or value not in used:
            used.add(value)
            return value
    raise ValueError(f"could not draw a distinct {kind}")


def _table(
    w: World, cols: tuple[tuple[str, str], ...], n: int, unique: tuple[str, ...] = (), label_pool: int = 0
) -> list[list[str]]:
    """``n`` rows; ``unique`` names numeric columns without repeats (so a sort has no ties); with ``label_pool``
    the label columns draw from only that many values (so they repeat)."""
    pools: dict[str, list[str]] = {}
    if label_pool:
        for name, kind in cols:
            if kind in _LABEL_KINDS:
                src = {"city": CITIES, "team": TEAMS, "fruit": FRUITS}[kind]
                pools[name] = w.sample(src, min(label_pool, len(src)))
    used: dict[str, set[str]] = {name: set() for name, _ in cols}
    rows = []
    for _ in range(n):
        row = []
        for name, kind in cols:
            if name in pools:
                row.append(w.pick(pools[name]))
            else:
                row.append(_value(w, kind, used[name], name in unique))
        rows.append(row)
    return rows


def _csv(header: list[str], rows: list[list[str]], sep: str = ",") -> str:
    return "".join(sep.join(r) + "\n" for r in [header, *rows])


def _place(w: World, ext: str, stem: str) -> tuple[str, str]:
    """(folder, path) of a data file: in home or in a drawn folder under it."""
    folder = HOME if w.chance(0.35) else f"{HOME}/{w.pick(('data', 'exports', 'reports', 'inbox', 'work'))}"
    if folder != HOME and w.chance(0.5):
        folder = f"{HOME}/{w.dirname()}"
    name = w.filename(ext, stem=w.pick((stem, f"{stem}_{w.randint(2021, 2025)}", f"{stem}-{w.pick(WORDS)}")))
    return folder, f"{folder}/{name}"


def _out_path(w: World, folder: str, stems: tuple[str, ...], ext: str) -> str:
    base = w.pick((folder, HOME, f"{HOME}/{w.pick(('out', 'results', 'reports'))}"))
    return f"{base}/{w.filename(ext, stem=w.pick(stems))}"


# ---- check helpers -----------------------------------------------------------------------------------------------
_NORM = "sed -e 's/[[:space:]]*$//' -e '/^$/d'"


def _lines_check(path: str, lines: list[str], ordered: bool = True) -> str:
    """Lines of ``path`` (trailing whitespace and blank lines ignored) equal ``lines``; any order unless ordered."""
    want = "\n".join(lines)
    if ordered:
        return f'[ -f {quote(path)} ] || exit 1\n[ "$({_NORM} {quote(path)})" = {quote(want)} ] || exit 1\n'
    return (
        f"[ -f {quote(path)} ] || exit 1\n"
        f'[ "$({_NORM} {quote(path)} | LC_ALL=C sort)" = "$(printf \'%s\\n\' {quote(want)} | LC_ALL=C sort)" ]'
        " || exit 1\n"
    )


def _number_check(path: str, value: float, tolerance: float = 1e-6) -> str:
    """The file holds one number equal to ``value`` (within ``tolerance``)."""
    return (
        f"[ -f {quote(path)} ] || exit 1\n"
        f"got=$(tr -d '[:space:]' < {quote(path)})\n"
        f"python3 -c 'import sys; g, w, t = sys.argv[1:]; sys.exit(0 if abs(float(g) - float(w)) <= float(t) "
        f'else 1)\' "$got" {value!r} {tolerance!r} 2>/dev/null || exit 1\n'
    )


def _python_check(body: str, data: object) -> str:
    """A python3 check with ``WANT`` = ``data`` (JSON); the script's exit status is the check's."""
    payload = json.dumps(data)
    return f"python3 - <<'PYCHECK' || exit 1\nimport json, sys\nWANT = json.loads(r'''{payload}''')\n{body}\nPYCHECK\n"


def _sqlite_setup(w: World, db: str, sql: str) -> tuple[dict[str, str], list[str]]:
    """Files and setup that build ``db`` from ``sql`` as root, then hand it (and its folder) to the operator."""
    seed = f"/root/seed_{w.token(6)}.sql"
    folder = posixpath.dirname(db)
    mk = f"mkdir -p {quote(folder)} && chown operator:operator {quote(folder)} && " if folder != HOME else ""
    return {seed: sql}, [
        f"{mk}sqlite3 {quote(db)} < {seed} && rm {seed} && chown operator:operator {quote(db)}"
    ]


def _sql_value(v: str, kind: str) -> str:
    return v if kind.startswith("int:") or kind == "pk" else "'" + v.replace("'", "''") + "'"


# ---- families ----------------------------------------------------------------------------------------------------
@family("data-csv-top-n", "data", "write the top N rows of a CSV by a numeric column to a file")
def csv_top_n(w: World) -> Draft:
    stem, cols = w.pick(_SCHEMAS)
    if w.chance(0.3):  # columns in another order: the column number must be read from the header
        cols = tuple(w.shuffled(cols))
    header = [c for c, _ in cols]
    numeric = [c for c, k in cols if _numeric(k)]
    key = next(c for c, k in cols if not _numeric(k) and k not in _LABEL_KINDS)
    col = w.pick(numeric)
    rows = _table(w, cols, w.randint(8, 16), unique=(col,))
    sep = ";" if w.chance(0.25) else ","
    n = w.randint(3, min(6, len(rows) - 3))
    desc = w.chance(0.8)
    mode = w.pick(("rows", "rows", "header", "key"))
    folder, src = _place(w, "csv", stem)
    files = {src: _csv(header, rows, sep)}
    if w.chance(0.35):  # a second table of the same shape that must not be used
        other = f"{folder}/{w.filename('csv', stem=f'{stem}_old')}"
        files[other] = _csv(header, _table(w, cols, w.randint(5, 9), unique=(col,)), sep)
    out = _out_path(
        w,
        folder,
        ("top", "best", "leaders", f"top_{col}", "shortlist", "ranking"),
        "txt" if mode == "key" else "csv",
    )
    w.note(n, col, key)
    ci, ki = header.index(col) + 1, header.index(key) + 1
    ranked = sorted(rows, key=lambda r: float(r[ci - 1]), reverse=desc)[:n]
    want = {
        "rows": [sep.join(r) for r in ranked],
        "header": [sep.join(header)] + [sep.join(r) for r in ranked],
        "key": [r[ki - 1] for r in ranked],
    }[mode]
    most = "{highest|largest|biggest}" if desc else "{lowest|smallest}"
    order = "{highest|largest} first" if desc else "{lowest|smallest} first"
    fmt = {
        "rows": "{copy|write} each row exactly as it appears in the file, without the header line",
        "header": "keep the header line {on top|as the first line}, followed by the rows exactly as in the file",
        "key": "write only the {key} of each, one per line",
    }[mode]
    parts = [w.spin(fmt, capitalize=False, key=key), w.spin("put them in order, " + order, capitalize=False)]
    if sep == ";":
        parts.append(w.spin("note the fields are separated by semicolons", capitalize=False))
    details = w.clauses(parts) + "."
    task = w.phrase(
        "{Write|Save|Put} the {n} {rows|records|entries} of {src} with the "
        + most
        + " {col} {into|in|to} {out}. "
        "{details_cap}",
        "{src} is a CSV {file |}with a header line. We need the {n} {rows|records} with the "
        + most
        + " {col} "
        "{saved to|written to|in} {out}; {details}",
        "Ticket: {extract|pull} the {n} "
        + most
        + " {col} {rows|records} from {src} into {out}. {details_cap}",
        "Which {n} {rows|records|entries} of {src} have the " + most + " {col}? {Save|Write} them to {out}; "
        "{details}",
        "From {src}, {select|take} the {n} {rows|records} {ranked|ordered} by {col} (" + order + ") and "
        "{store|write} them in {out}. {details_cap}",
        "{src} -> {out}: top {n} by {col} (" + order + "). {details_cap}",
        "Quick one for the dashboard: from {src} I need the {n} {rows|records} with the "
        + most
        + " {col}, written to "
        "{out}. {details_cap}",
        n=n,
        col=col,
        src=w.path_ref(src, "file"),
        out=w.path_ref(out, "file"),
        details=details,
        details_cap=details[:1].upper() + details[1:],
    )
    sq = quote(sep)
    r_flag = "r" if desc else ""
    body = w.pick(
        (
            f"tail -n +2 {quote(src)} | sort -t{sq} -k{ci},{ci}n{r_flag} | head -n {n}",
            f"sed 1d {quote(src)} | sort -t{sq} -{r_flag}n -k{ci},{ci} | head -{n}",
            f"awk 'NR > 1' {quote(src)} | sort -t{sq} -k{ci},{ci}g{r_flag} | head -n {n}",
        )
    )
    if mode == "key":
        body += w.pick((f" | cut -d{sq} -f{ki}", f" | awk -F{sq} '{{print ${ki}}}'"))
    if mode == "header":
        cmd = w.pick(
            (
                f"{{ head -n 1 {quote(src)}; {body}; }} > {quote(out)}",
                f"(head -1 {quote(src)} && {body}) > {quote(out)}",
            )
        )
    else:
        cmd = f"{body} > {quote(out)}"
    reference = [f"head -n 3 {quote(src)}"] if w.chance(0.5) else []
    reference += [f"mkdir -p {quote(posixpath.dirname(out))}", cmd, f"cat {quote(out)}"]
    return Draft(
        task=task,
        check="#!/bin/bash\n" + _lines_check(out, want),
        reference=reference,
        difficulty=2 if mode != "header" else 3,
        files=files,
    )


_DB_TABLES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "customers",
        (
            ("id", "pk"),
            ("name", "person"),
            ("city", "city"),
            ("tier", "pick:gold/silver/bronze"),
            ("balance", "int:0:9000"),
        ),
    ),
    (
        "orders",
        (
            ("id", "pk"),
            ("customer", "person"),
            ("status", "pick:pending/shipped/cancelled/delivered"),
            ("total", "int:5:950"),
        ),
    ),
    (
        "products",
        (
            ("id", "pk"),
            ("name", "fruit"),
            ("category", "pick:produce/frozen/bakery/dairy"),
            ("price", "int:1:99"),
            ("stock", "int:0:500"),
        ),
    ),
    (
        "tickets",
        (
            ("id", "pk"),
            ("assignee", "person"),
            ("priority", "pick:low/medium/high/urgent"),
            ("state", "pick:open/closed/waiting"),
            ("age_days", "int:0:120"),
        ),
    ),
    (
        "hosts",
        (
            ("id", "pk"),
            ("hostname", "host"),
            ("datacenter", "city"),
            ("cpus", "int:1:128"),
            ("role", "pick:web/db/cache/batch"),
        ),
    ),
)


def _db_rows(w: World, cols: tuple[tuple[str, str], ...], n: int, label_pool: int = 4) -> list[list[str]]:
    """Rows with ids 1..n (pk), distinct numbers, and labels that repeat."""
    body = tuple(c for c in cols if c[1] != "pk")
    nums = tuple(c for c, k in body if _numeric(k))
    start = w.randint(1, 300)
    rows = _table(w, body, n, unique=nums, label_pool=label_pool)
    return [[str(start + i), *r] for i, r in enumerate(rows)]


def _db_sql(table: str, cols: tuple[tuple[str, str], ...], rows: list[list[str]]) -> str:
    decl = ", ".join(
        f"{c} INTEGER PRIMARY KEY" if k == "pk" else f"{c} {'INTEGER' if k.startswith('int:') else 'TEXT'}"
        for c, k in cols
    )
    values = ",".join(
        "(" + ", ".join(_sql_value(v, k) for v, (_, k) in zip(r, cols, strict=True)) + ")" for r in rows
    )
    return f"CREATE TABLE {table} ({decl});\nINSERT INTO {table} VALUES {values};\n"


def _db_condition(
    w: World, cols: tuple[tuple[str, str], ...], rows: list[list[str]], exclude: str = ""
) -> tuple[str, str, Callable[[list[str]], bool]]:
    """A WHERE condition that keeps some rows and drops others: (sql, English, predicate on a row); never on the
    column ``exclude``."""
    names = [c for c, _ in cols]
    for _ in range(50):
        c, k = w.pick(
            [
                x
                for x in cols
                if x[1] != "pk"
                and x[0] != exclude
                and (_numeric(x[1]) or x[1].startswith("pick:") or x[1] in _LABEL_KINDS)
            ]
        )
        i = names.index(c)
        if _numeric(k):
            vals = sorted(int(r[i]) for r in rows)
            t = vals[w.randint(1, len(vals) - 2)]
            op = w.pick((">", "<", ">="))
            sql, words = (
                f"{c} {op} {t}",
                {
                    ">": f"{c} is {{greater|more}} than {t}",
                    "<": f"{c} is {{less|lower}} than {t}",
                    ">=": f"{c} is at least {t}",
                }[op],
            )
            pred = {
                ">": lambda r, i=i, t=t: int(r[i]) > t,
                "<": lambda r, i=i, t=t: int(r[i]) < t,
                ">=": lambda r, i=i, t=t: int(r[i]) >= t,
            }[op]
            w.note(t)
        else:
            v = w.pick([r[i] for r in rows])
            sql, words = f"{c} = '{v}'", f"{c} is '{v}'"
            pred = lambda r, i=i, v=v: r[i] == v  # noqa: E731
            w.note(v)
        kept = [r for r in rows if pred(r)]
        if 0 < len(kept) < len(rows):
            w.note(c)
            return sql, w.spin(words, capitalize=False), pred
    raise ValueError("no selective condition")


@family("data-sqlite-export-csv", "data", "query a SQLite table and write the result as CSV with a header")
def sqlite_export_csv(w: World) -> Draft:
    table, cols = w.pick(_DB_TABLES)
    rows = _db_rows(w, cols, w.randint(8, 16))
    names = [c for c, _ in cols]
    where_sql, where_en, pred = _db_condition(w, cols, rows)
    if w.chance(0.45):
        picked = sorted(w.sample(range(len(names)), w.randint(2, 3)))
        if w.chance(0.3):
            picked = w.shuffled(picked)
    else:
        picked = list(range(len(names)))
    sel = [names[i] for i in picked]
    order = None
    if w.chance(0.5):
        oc = w.pick([c for c, k in cols if _numeric(k) or k == "pk"])
        order = (oc, w.chance(0.5))
        w.note(oc)
    w.note(table, *sel)
    db = f"{w.pick((HOME, f'{HOME}/db', f'{HOME}/{w.dirname()}'))}/{w.filename('db', stem=w.pick(('app', 'shop', 'inventory', 'crm', 'ops', table)))}"
    other_table, other_cols = w.pick([t for t in _DB_TABLES if t[0] != table])
    sql = _db_sql(table, cols, rows) + _db_sql(
        other_table, other_cols, _db_rows(w, other_cols, w.randint(3, 6))
    )
    files, setup = _sqlite_setup(w, db, sql)
    out = f"{w.pick((HOME, f'{HOME}/exports', posixpath.dirname(db)))}/{w.filename('csv', stem=w.pick((table, f'{table}_export', 'extract', 'result')))}"
    kept = [r for r in rows if pred(r)]
    if order:
        oi = names.index(order[0])
        kept.sort(key=lambda r: int(r[oi]), reverse=order[1])
    want_rows = [[r[i] for i in picked] for r in kept]
    cols_en = (
        "all {the |}columns"
        if len(sel) == len(names)
        else "{only |just |}the columns " + ", ".join(sel) + " (in that order)"
    )
    order_en = (
        w.spin(
            "{the |}rows sorted by {c} "
            + ("{descending|from highest to lowest}" if order[1] else "{ascending|from lowest to highest}"),
            capitalize=False,
            c=order[0],
        )
        if order
        else ""
    )
    constraints = w.clauses(
        [
            w.spin(cols_en, capitalize=False),
            order_en,
            w.spin("a header {row|line} {naming the columns|with the column names}", capitalize=False),
        ],
        ", ",
    )
    task = w.phrase(
        "{Export|Dump} the rows of the {table} table in {db} where {where} to {out} as CSV with {constraints}.",
        "The SQLite database {db} has a table {named|called} {table}. {Write|Save} every row whose {where} to the CSV file {out}, "
        "with {constraints}.",
        "Ticket: {finance|the team|support} needs a CSV {extract|export} of {table} where {where}. {Source|Database}: "
        "{db}. {Output|Target}: {out}, with {constraints}.",
        "Could you {query|pull} the {table} rows where {where} out of {db} and save them as CSV in {out}? "
        "{I need|Include} {constraints}.",
        "{db} -> {out}: {table} rows where {where}, CSV with {constraints}.",
        "The spreadsheet people want the {table} records of {db} that match one condition ({where}). Give them a CSV "
        "file {out} with {constraints}.",
        table=table,
        db=w.path_ref(db, "file"),
        out=w.path_ref(out, "file"),
        where=where_en,
        constraints=constraints,
    )
    body = (
        "import csv\n"
        f"try:\n    rows = [r for r in csv.reader(open({out!r}, newline='')) if any(c.strip() for c in r)]\n"
        "except (OSError, csv.Error):\n    sys.exit(1)\n"
        "def same(a, b):\n    a, b = a.strip(), b.strip()\n    if a == b:\n        return True\n"
        "    try:\n        return abs(float(a) - float(b)) < 1e-6\n    except ValueError:\n        return False\n"
        "def row_eq(a, b):\n    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))\n"
        "head, want_rows, ordered = WANT\n"
        "if not rows or [c.strip().lower() for c in rows[0]] != head:\n    sys.exit(1)\n"
        "got = rows[1:]\n"
        "if len(got) != len(want_rows):\n    sys.exit(1)\n"
        "if ordered:\n    sys.exit(0 if all(row_eq(a, b) for a, b in zip(got, want_rows)) else 1)\n"
        "left = list(want_rows)\n"
        "for r in got:\n    m = next((x for x in left if row_eq(r, x)), None)\n    if m is None:\n        sys.exit(1)\n"
        "    left.remove(m)\n"
    )
    check = "#!/bin/bash\n" + _python_check(body, [sel, want_rows, bool(order)])
    cols_sql = "*" if len(sel) == len(names) and w.chance(0.6) else ", ".join(sel)
    query = f"SELECT {cols_sql} FROM {table} WHERE {where_sql}"
    if order:
        query += f" ORDER BY {order[0]}{' DESC' if order[1] else ''}"
    query += ";"
    qdb, qout = quote(db), quote(out)
    header_json = json.dumps(sel)
    row_jq = "[" + ", ".join(f".{c}" for c in sel) + "]"
    export = w.pick(
        (
            f"sqlite3 -header -csv {qdb} {quote(query)} > {qout}",
            f"sqlite3 -csv -header {qdb} {quote(query)} > {qout}",
            f"sqlite3 {qdb} '.headers on' '.mode csv' '.output {out}' {quote(query)}",
            # python's sqlite3 and csv modules: the header from the cursor's description
            "python3 -c 'import csv, sqlite3, sys; cur = sqlite3.connect(sys.argv[1]).execute(sys.argv[2]); "
            "out = csv.writer(sys.stdout); out.writerow([d[0] for d in cur.description]); out.writerows(cur)' "
            f"{qdb} {quote(query)} > {qout}",
            # JSON out of sqlite3, CSV out of jq
            f"sqlite3 -json {qdb} {quote(query)} | jq -r {quote(f'({header_json} | @csv), (.[] | {row_jq} | @csv)')}"
            f" > {qout}",
            # tab-separated with a header, tabs turned into commas (no value holds a comma or a tab)
            f"sqlite3 -header -tabs {qdb} {quote(query)} | sed 's/\\t/,/g' > {qout}",
            # sqlite3's default list mode ('|' between fields), re-joined by awk
            f"sqlite3 -header -list {qdb} {quote(query)} | awk -F'|' -v OFS=, '{{$1 = $1; print}}' > {qout}",
        )
    )
    reference = [f"sqlite3 {qdb} '.schema {table}'"] if w.chance(0.5) else []
    reference += [f"mkdir -p {quote(posixpath.dirname(out))}", export, f"cat {qout}"]
    return Draft(task=task, check=check, reference=reference, difficulty=2, files=files, setup=setup)


_JSON_KINDS = (
    # (collection noun, key field, number field, bool field, label field, label values)
    ("services", "name", "port", "enabled", "team", TEAMS),
    (
        "packages",
        "name",
        "size_kb",
        "deprecated",
        "license",
        ("MIT", "GPL-3.0", "Apache-2.0", "BSD-3-Clause"),
    ),
    ("users", "login", "age", "admin", "city", CITIES),
    ("jobs", "id", "retries", "failed", "queue", ("default", "emails", "reports", "billing", "imports")),
    ("hosts", "hostname", "cpus", "maintenance", "region", ("eu-west", "us-east", "ap-south", "sa-east")),
)


def _json_key(w: World, noun: str) -> str:
    """A record key for ``noun`` (a service name, a login, a job id ...)."""
    if noun == "services":
        return (
            f"{w.pick(('api', 'auth', 'billing', 'cache', 'search', 'mailer', 'ledger', 'router', 'sync'))}-"
            f"{w.pick(('svc', 'api', 'worker', 'v2', 'edge'))}"
        )
    if noun == "packages":
        return f"{w.pick(WORDS)}{w.pick(('', '-js', '-py', 'lib', '-utils'))}"
    if noun == "users":
        return w.pick(FIRST_NAMES)
    if noun == "jobs":
        return f"job-{w.randint(100, 999)}"
    return f"{w.pick(WORDS)}-{w.randint(1, 40):02d}"


@family("data-jq-filter", "data", "filter a JSON document with jq and write the matching records or names")
def jq_filter(w: World) -> Draft:
    noun, key, num, flag, label, label_values = w.pick(_JSON_KINDS)
    n = w.randint(5, 11)
    labels = w.sample(label_values, min(3, len(label_values)))
    keys: set[str] = set()
    recs: list[dict[str, Any]] = []
    for _ in range(n * 20):
        if len(recs) == n:
            break
        k = _json_key(w, noun)
        if k in keys:
            continue
        keys.add(k)
        value = {
            "port": w.port,
            "retries": lambda: w.randint(0, 9),
            "cpus": lambda: w.randint(1, 128),
            "age": lambda: w.randint(18, 70),
        }.get(num, lambda: w.randint(3, 9000))()
        recs.append({key: k, num: value, flag: w.chance(0.5), label: w.pick(labels)})
    wrap = w.pick((None, None, "items", noun, "data", "records"))
    doc = recs if wrap is None else {"version": w.randint(1, 4), wrap: recs}
    arg: str | None = None
    for _ in range(30):
        kind = w.pick(("num", "bool", "label"))
        if kind == "num":
            vals = sorted({r[num] for r in recs})
            if len(vals) < 3:
                continue
            op = w.pick((">", ">=", "<"))
            t = vals[w.randint(1, len(vals) - 1)] if op == "<" else vals[w.randint(0, len(vals) - 2)]
            sel = f".{num} {op} {t}"
            en = w.spin(
                num
                + {
                    ">": " is {greater|more|higher} than {t}",
                    ">=": " is at least {t}",
                    "<": " is {below|less than|under} {t}",
                }[op],
                capitalize=False,
                t=t,
            )
            pred = {
                ">": lambda r, t=t: r[num] > t,
                ">=": lambda r, t=t: r[num] >= t,
                "<": lambda r, t=t: r[num] < t,
            }[op]
            w.note(t)
        elif kind == "bool":
            want_true = w.chance(0.5)
            sel = f".{flag}" if want_true and w.chance(0.5) else f".{flag} == {str(want_true).lower()}"
            en = f"{flag} {w.pick(('is', 'is set to'))} {str(want_true).lower()}"
            pred = lambda r, v=want_true: r[flag] is v  # noqa: E731
        else:
            v = w.pick(labels)
            sel = f'.{label} == "{v}"'
            arg = v if w.chance(0.4) else None  # the jq --arg way of passing the value
            en = f'{label} is "{v}"'
            pred = lambda r, v=v: r[label] == v  # noqa: E731
            w.note(v)
        match = [r for r in recs if pred(r)]
        if 0 < len(match) < len(recs):
            break
    else:
        raise ValueError("no selective filter")
    w.note(num, flag, label, key, noun)
    if wrap:
        w.note(wrap)
    mode = w.pick(("json", "names", "names", "count"))
    folder, src = _place(w, "json", noun)
    out = _out_path(
        w,
        folder,
        (f"selected_{noun}", "matches", "filtered", f"{noun}_subset", "picked"),
        "json" if mode == "json" else "txt",
    )
    where = (
        w.spin('the {top-level|outer} "{wrap}" array', capitalize=False, wrap=wrap)
        if wrap
        else w.spin("{a|one} top-level array", capitalize=False)
    )
    fmt = {
        "json": "a JSON array of the {matching|selected} objects{| (unchanged)}",
        "names": "only their {key} values, one per line, {without quotes|as plain text (no JSON quotes)}",
        "count": "just the number of {matching|such} {noun}",
    }[mode]
    task = w.phrase(
        "{src} holds {noun} as {where}. {Write|Save} to {out} " + fmt + ", for the {noun} whose {en}.",
        "Using jq, {select|find} the {noun} in {src} whose {en} and {write|save} "
        + fmt
        + " to {out}. (The records "
        "are in {where}.)",
        "Ticket: we need the {noun} from {src} where {en}. Output "
        + fmt
        + " {in|to} {out}. Note: the data is "
        "{where}.",
        "Can you {find|pick out} the {noun} in {src} whose {en} and put "
        + fmt
        + " in {out}? (The file keeps them "
        "in {where}.)",
        "{src} -> {out}: the {noun} whose {en}, " + fmt + " (records in {where}).",
        "Which {noun} in {src} qualify? I want the ones whose {en}; the records sit in {where}. Write "
        + fmt
        + " to {out}.",
        src=w.path_ref(src, "file"),
        out=w.path_ref(out, "file"),
        noun=noun,
        where=where,
        en=en,
        key=key,
    )
    if mode == "json":
        body = (
            f"try:\n    got = json.load(open({out!r}))\nexcept (OSError, ValueError):\n    sys.exit(1)\n"
            "if not isinstance(got, list):\n    sys.exit(1)\n"
            "def norm(xs):\n    return sorted(json.dumps(o, sort_keys=True) for o in xs)\n"
            "sys.exit(0 if norm(got) == norm(WANT) else 1)\n"
        )
        check = "#!/bin/bash\n" + _python_check(body, match)
    elif mode == "names":
        check = "#!/bin/bash\n" + _lines_check(out, [str(r[key]) for r in match], ordered=False)
    else:
        check = "#!/bin/bash\n" + _number_check(out, len(match))
    path = f".{wrap}[]" if wrap else ".[]"
    arr = f".{wrap}" if wrap else "."
    qs, qo = quote(src), quote(out)
    approach = w.pick(("jq", "jq", "jq", "python", "stream"))
    if approach == "python":  # the json module and a comprehension
        py_pred = {
            "num": f"r[{num!r}] {sel.split()[1] if kind == 'num' else ''} {sel.split()[-1]}",
            "bool": f"r[{flag!r}] is {sel.endswith('true') or sel == f'.{flag}'}",
            "label": f"r[{label!r}] == {sel.split('== ')[-1]}",
        }[kind]
        load = f"json.load(open(sys.argv[1])){f'[{wrap!r}]' if wrap else ''}"
        show = {
            "json": "json.dump(m, sys.stdout, indent=2)",
            "names": f"print(*(r[{key!r}] for r in m), sep=chr(10))",
            "count": "print(len(m))",
        }[mode]
        cmd = f"python3 -c {quote(f'import json, sys; m = [r for r in {load} if {py_pred}]; {show}')} {qs} > {qo}"
    elif approach == "stream":  # one compact record a line, then slurped, projected or counted
        stream = f"jq -c {quote(f'{path} | select({sel})')} {qs}"
        tail = {"json": "jq -s .", "names": f"jq -r .{key}", "count": "wc -l"}[mode]
        cmd = f"{stream} | {tail} > {qo}"
    elif mode == "json":
        prog = w.pick((f"[{path} | select({sel})]", f"{arr} | map(select({sel}))"))
        cmd = f"jq {quote(prog)} {qs} > {qo}"
    elif mode == "names" and kind == "label" and arg is not None:
        prog = f"{path} | select(.{label} == $v) | .{key}"
        cmd = f"jq -r --arg v {quote(arg)} {quote(prog)} {qs} > {qo}"
    elif mode == "names":
        prog = w.pick((f"{path} | select({sel}) | .{key}", f"{path} | select({sel}).{key}"))
        cmd = f"jq -r {quote(prog)} {qs} > {qo}"
    else:
        prog = w.pick((f"[{path} | select({sel})] | length", f"{arr} | map(select({sel})) | length"))
        cmd = f"jq {quote(prog)} {qs} > {qo}"
    peek = w.pick(
        (f"jq {quote('keys' if wrap else '.[0]')} {qs}", f"jq -c {quote(f'{path}')} {qs}", f"head -n 12 {qs}")
    )
    reference = [peek] if w.chance(0.6) else []
    reference += [f"mkdir -p {quote(posixpath.dirname(out))}", cmd, f"cat {qo}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2,
        files={src: json.dumps(doc, indent=w.pick((2, 4))) + "\n"},
    )


@family("data-csv-to-jsonl", "data", "convert a CSV file to JSON lines (or a JSON array) of objects")
def csv_to_jsonl(w: World) -> Draft:
    stem, cols = w.pick(_SCHEMAS)
    header = [c for c, _ in cols]
    rows = _table(w, cols, w.randint(4, 9))
    numbers = w.chance(0.55)
    lines = w.chance(0.7)
    num_cols = [c for c, k in cols if _numeric(k)]
    want = [
        {
            h: (float(v) if "." in v else int(v)) if numbers and h in num_cols else v
            for h, v in zip(header, r, strict=True)
        }
        for r in rows
    ]
    folder, src = _place(w, "csv", stem)
    out = f"{w.pick((folder, HOME))}/{w.filename('jsonl' if lines else 'json', stem=w.pick((stem, f'{stem}_records', 'converted', 'import')))}"
    w.note(*num_cols)
    shape = (
        "one JSON object per line (JSON Lines), {one line per row|a line for each row}, in the same order"
        if lines
        else "a single JSON array {holding|of} one object per row, in the same order"
    )
    keys = "{with|using} the header {names|fields} as keys"
    typing = (
        "the " + " and ".join(num_cols) + " {values|fields} as JSON numbers, everything else as strings"
        if numbers
        else "every value as a JSON string{| (no number conversion)}"
    )
    spec = w.clauses(
        [w.spin(shape, capitalize=False), w.spin(keys, capitalize=False), w.spin(typing, capitalize=False)],
        ", ",
    )
    task = w.phrase(
        "Convert {src} to {out}: {spec}.",
        "{src} is a CSV file with a header line. {Produce|Write} {out} from it, {spec}.",
        "Ticket: the importer {only reads|wants} JSON, not CSV. Turn {src} into {out} ({spec}).",
        "Can you {turn|convert} the CSV {src} into JSON at {out}? {Format|Requirements}: {spec}.",
        "{src} -> {out} as JSON ({spec}).",
        "Our new service only ingests JSON, and the data we have is the CSV {src}. Please convert it to {out}; {spec}.",
        src=w.path_ref(src, "file"),
        out=w.path_ref(out, "file"),
        spec=spec,
    )
    body = (
        f"try:\n    text = open({out!r}).read()\n"
        "    got = [json.loads(x) for x in text.splitlines() if x.strip()] if WANT['lines'] else json.loads(text)\n"
        "except (OSError, ValueError):\n    sys.exit(1)\n"
        "def eq(a, b):\n"
        "    if isinstance(b, str) or isinstance(a, (str, bool)) or isinstance(b, bool):\n"
        "        return type(a) is type(b) and a == b\n"
        "    return isinstance(a, (int, float)) and abs(a - b) < 1e-9\n"
        "rows = WANT['rows']\n"
        "ok = isinstance(got, list) and len(got) == len(rows) and all(isinstance(g, dict) and set(g) == set(r) "
        "and all(eq(g[k], r[k]) for k in r) for g, r in zip(got, rows))\n"
        "sys.exit(0 if ok else 1)\n"
    )
    check = "#!/bin/bash\n" + _python_check(body, {"lines": lines, "rows": want})
    fields = ", ".join(
        f"{h}: (.[{i}] | tonumber)" if numbers and h in num_cols else f"{h}: .[{i}]"
        for i, h in enumerate(header)
    )
    qs, qo = quote(src), quote(out)
    prog = 'split(",") | {' + fields + "}"
    jq_cmd = f"tail -n +2 {qs} | jq -R -c {quote(prog)}"
    approach = w.pick(("jq", "jq", "python", "sqlite", "awk", "jq-header"))
    typed = [h for h in header if numbers and h in num_cols]
    if approach == "sqlite":  # imported into an in-memory table, written by sqlite3's JSON mode
        cols_sql = ", ".join(
            f"CAST({h} AS {'INTEGER' if dict(cols)[h].startswith('int:') else 'REAL'}) AS {h}"
            if h in typed
            else h
            for h in header
        )
        export = f"sqlite3 :memory: -cmd {quote(f'.import --csv {src} t')} -json {quote(f'SELECT {cols_sql} FROM t;')}"
        cmd = f"{export} | jq -c '.[]' > {qo}" if lines else f"{export} > {qo}"
    elif approach == "awk":  # each object printed by awk (no value holds a quote or a comma)
        fmt = ", ".join(f'\\"{h}\\": ' + ("%s" if h in typed else '\\"%s\\"') for h in header)
        args = ", ".join(f"${i + 1}" for i in range(len(header)))
        prog = f'NR > 1 {{printf "{{{fmt}}}\\n", {args}}}'
        cmd = (
            f"awk -F, {quote(prog)} {qs} > {qo}" if lines else f"awk -F, {quote(prog)} {qs} | jq -s . > {qo}"
        )
    elif approach == "jq-header":  # jq reads the header line itself and zips it with every row
        conv = (
            " | with_entries(if (.key | IN(" + ", ".join(json.dumps(h) for h in typed) + ")) "
            "then .value |= tonumber else . end)"
            if typed
            else ""
        )
        objs = (
            '[inputs | split(",")] | .[0] as $h | .[1:][] | [$h, .] | transpose | map({(.[0]): .[1]}) | add'
            + conv
        )
        cmd = (
            f"jq -R -n -c {quote(objs)} {qs} > {qo}"
            if lines
            else f"jq -R -n {quote('[' + objs + ']')} {qs} > {qo}"
        )
    elif approach == "python" and numbers:  # csv.DictReader, the number columns converted
        conv = ", ".join(repr(h) for h in typed)
        body = (
            f"import csv, json, sys; nums = ({conv},); "
            "rows = [{k: (float(v) if '.' in v else int(v)) if k in nums else v for k, v in r.items()} "
            "for r in csv.DictReader(open(sys.argv[1]))]; "
            + ("[print(json.dumps(r)) for r in rows]" if lines else "json.dump(rows, sys.stdout)")
        )
        cmd = f"python3 -c {quote(body)} {qs} > {qo}"
    elif approach == "python" or (not numbers and w.chance(0.5)):
        cmd = (
            f"python3 -c 'import csv, json, sys; [print(json.dumps(r)) for r in csv.DictReader(open(sys.argv[1]))]'"
            f" {qs} > {qo}"
            if lines
            else f"python3 -c 'import csv, json, sys; json.dump(list(csv.DictReader(open(sys.argv[1]))), sys.stdout)'"
            f" {qs} > {qo}"
        )
    else:
        cmd = f"{jq_cmd} > {qo}" if lines else f"{jq_cmd} | jq -s . > {qo}"
    reference = [f"head -n 2 {qs}", cmd, f"{'head' if lines else 'cat'} {qo}"]
    return Draft(task=task, check=check, reference=reference, difficulty=3, files={src: _csv(header, rows)})


@family("data-column-stat", "data", "sum, average, max or min of a CSV column with awk, optionally filtered")
def column_stat(w: World) -> Draft:
    stem, cols = w.pick(_SCHEMAS)
    header = [c for c, _ in cols]
    rows = _table(w, cols, w.randint(6, 18), label_pool=w.randint(2, 4))
    col = w.pick([c for c, k in cols if _numeric(k)])
    ci = header.index(col)
    decimal = dict(cols)[col].startswith("dec:")
    stat = w.pick(("sum", "sum", "average", "max", "min"))
    labels = [c for c, k in cols if k in _LABEL_KINDS]
    filt = None
    if labels and w.chance(0.5):
        lc = w.pick(labels)
        li = header.index(lc)
        counts = {r[li]: sum(1 for x in rows if x[li] == r[li]) for r in rows}
        choices = [v for v, c in counts.items() if c >= 2 and c < len(rows)]
        if choices:
            filt = (lc, li, w.pick(choices))
            w.note(lc, filt[2])
    sel = [r for r in rows if filt is None or r[filt[1]] == filt[2]]
    vals = [float(r[ci]) for r in sel]
    value = {"sum": sum(vals), "average": sum(vals) / len(vals), "max": max(vals), "min": min(vals)}[stat]
    rounded = decimal or stat == "average"
    folder, src = _place(w, "csv", stem)
    out = _out_path(w, folder, (f"{stat}_{col}", f"{col}_{stat}", "answer", "result", "total"), "txt")
    w.note(col)
    what = {
        "sum": "{total|sum} of {the |}{col}",
        "average": "average {col}",
        "max": "{highest|largest|maximum} {col}",
        "min": "{lowest|smallest|minimum} {col}",
    }[stat]
    scope = (
        f"over the rows where {filt[0]} is {filt[2]}"
        if filt
        else w.pick(("over all rows", "over every row", "for the whole file"))
    )
    num_fmt = "rounded to two decimal places" if rounded else "as a plain {integer|whole number}"
    parts = [
        w.spin("write {only|just} the number {to|into} {out}", capitalize=False, out=w.path_ref(out, "file")),
        w.spin(num_fmt, capitalize=False),
    ]
    details = w.clauses(parts, ", ")
    task = w.phrase(
        "{Compute|Calculate|Work out} the " + what + " in {src} {scope}; {details}.",
        "{src} is a CSV with a header line. What is the " + what + " {scope}? {details_cap}.",
        "Ticket: {finance|the report|a dashboard} needs the " + what + " from {src}, {scope}. {details_cap}.",
        "Please {find|get} the " + what + " {scope}, from {src}. {details_cap}.",
        "{src}: " + what + " {scope}. {details_cap}.",
        "hey, quick number needed - what's the " + what + " {scope} in {src}? {details_cap}.",
        src=w.path_ref(src, "file"),
        col=col,
        scope=scope,
        details=details,
        details_cap=details[:1].upper() + details[1:],
    )
    check = "#!/bin/bash\n" + _number_check(
        out, round(value, 2) if rounded else value, 0.0051 if rounded else 1e-6
    )
    c = ci + 1
    cond = f'NR > 1 && ${filt[1] + 1} == "{filt[2]}"' if filt else "NR > 1"
    fmt = 'printf "%.2f\\n", ' if rounded else "print "
    if stat == "sum":
        prog = f"{cond} {{s += ${c}}} END {{{fmt}s}}"
    elif stat == "average":
        prog = f"{cond} {{s += ${c}; n++}} END {{{fmt}s / n}}"
    else:
        cmp = ">" if stat == "max" else "<"
        prog = f'{cond} {{if (m == "" || ${c} {cmp} m) m = ${c}}} END {{{fmt}m}}'
    qs, qo = quote(src), quote(out)
    cmd = f"awk -F, {quote(prog)} {qs} > {qo}"
    approach = w.pick(("awk", "awk", "python", "sqlite", "pipeline"))
    if stat in ("max", "min") and not filt and w.chance(0.4):
        cmd = (
            f"tail -n +2 {qs} | sort -t, -k{c},{c}n | {'tail' if stat == 'max' else 'head'} -n 1 | "
            f"cut -d, -f{c} > {qo}"
        )
    elif approach == "python":  # csv.DictReader, the statistic computed in python
        keep = f" if r[{filt[0]!r}] == {filt[2]!r}" if filt else ""
        number = "float" if decimal else "int"
        agg = {"sum": "sum(v)", "average": "sum(v) / len(v)", "max": "max(v)", "min": "min(v)"}[stat]
        show = f"print(f'{{{agg}:.2f}}')" if rounded else f"print({agg})"
        cmd = (
            f"python3 -c {quote(f'import csv, sys; v = [{number}(r[{col!r}]) for r in csv.DictReader(open(sys.argv[1])){keep}]; {show}')}"
            f" {qs} > {qo}"
        )
    elif approach == "sqlite":  # the CSV imported into an in-memory table (its header names the columns)
        cast = "REAL" if decimal else "INTEGER"
        agg = {"sum": "SUM", "average": "AVG", "max": "MAX", "min": "MIN"}[stat]
        expr = f"{agg}(CAST({col} AS {cast}))"
        expr = f"printf('%.2f', {expr})" if rounded else expr
        where = f" WHERE {filt[0]} = '{filt[2]}'" if filt else ""
        cmd = (
            f"sqlite3 :memory: -cmd '.mode csv' -cmd {quote(f'.import {src} t')} -cmd '.mode list' "
            f"{quote(f'SELECT {expr} FROM t{where};')} > {qo}"
        )
    elif approach == "pipeline" and stat == "sum":  # the column cut out and summed by bc
        rows_cmd = f"awk -F, {quote(cond)} {qs}" if filt else f"tail -n +2 {qs}"
        cmd = f"{rows_cmd} | cut -d, -f{c} | paste -sd+ | bc > {qo}"
    elif approach == "pipeline" and stat in ("max", "min"):  # the column's values sorted as numbers
        cmd = (
            f"awk -F, {quote(f'{cond} {{print ${c}}}')} {qs} | sort -n | "
            f"{'tail' if stat == 'max' else 'head'} -n 1 > {qo}"
        )
    reference = [f"head -n 3 {qs}"] if w.chance(0.5) else []
    reference += [f"mkdir -p {quote(posixpath.dirname(out))}", cmd, f"cat {qo}"]
    return Draft(task=task, check=check, reference=reference, difficulty=2, files={src: _csv(header, rows)})


@family("data-distinct-values", "data", "count or list the distinct values of a CSV/TSV column")
def distinct_values(w: World) -> Draft:
    stem, cols = w.pick([s for s in _SCHEMAS if any(k in _LABEL_KINDS for _, k in s[1])])
    header = [c for c, _ in cols]
    rows = _table(w, cols, w.randint(8, 22), label_pool=w.randint(3, 8))
    col = w.pick([c for c, k in cols if k in _LABEL_KINDS])
    ci = header.index(col)
    tsv = w.chance(0.3)
    sep = "\t" if tsv else ","
    values = [r[ci] for r in rows]
    distinct = sorted(set(values))
    dups = sorted(v for v in distinct if values.count(v) > 1)
    mode = w.pick(("count", "count", "list", "dups") if dups else ("count", "list"))
    folder, src = _place(w, "tsv" if tsv else "csv", stem)
    out = _out_path(
        w, folder, (f"{col}_values", f"distinct_{col}", f"unique_{col}", "answer", f"{col}s"), "txt"
    )
    w.note(col)
    kind = "tab-separated" if tsv else "comma-separated"
    note = w.spin("{the file|it} is " + kind + " with a header line", capitalize=False)
    fills = dict(col=col, src=w.path_ref(src, "file"), out=w.path_ref(out, "file"), note=note)
    if mode == "count":
        task = w.phrase(
            "{Count|Find out|Work out} how many {different|distinct|unique} {col} values {appear|occur} in {src} and "
            "write {only|just} the number to {out} ({note}).",
            "How many {distinct|different|unique} {col} values does {src} {contain|hold}? {Put|Write} the number in "
            "{out}. {Note|Keep in mind}: {note}.",
            "Ticket: we need the number of {distinct|unique} {col}s in {src}, {written|saved} to {out} as a single "
            "number ({note}; {the header is not a value|don't count the header}).",
            "Please find out how many {different|distinct} {col} values {src} has. {Save|Write} {just |}the count "
            "to {out}; {note}.",
            **fills,
        )
    else:
        what = (
            "{every|each} {distinct|unique|different} {col} value"
            if mode == "list"
            else "{the|all the} {col} values that {appear|occur} {more than once|in more than one row}"
        )
        task = w.phrase(
            "{List|Write out} "
            + what
            + " {in|from} {src} to {out}, one per line, sorted alphabetically, each "
            "{listed |}once ({note}).",
            "We need "
            + what
            + " of {src} in {out}: one per line, {sorted alphabetically|in alphabetical order}, "
            "{no repeats|without duplicates}. {Note|Keep in mind}: {note}.",
            "Ticket: {collect|extract} " + what + " from {src} into {out} (one per line, sorted, each once; "
            "{note}).",
            "Can you {write|put} "
            + what
            + " {in|from} {src} into {out}, one per line, {sorted alphabetically|"
            "in alphabetical order} and {without duplicates|each once}? ({note}.)",
            **fills,
        )
    want = {"count": None, "list": distinct, "dups": dups}[mode]
    check = "#!/bin/bash\n" + (_number_check(out, len(distinct)) if want is None else _lines_check(out, want))
    c = ci + 1
    qs, qo = quote(src), quote(out)
    cut = f"cut -f{c}" if tsv else f"cut -d, -f{c}"
    awk = f"awk -F'\\t' 'NR > 1 {{print ${c}}}' {qs}" if tsv else f"awk -F, 'NR > 1 {{print ${c}}}' {qs}"
    extract = w.pick((f"tail -n +2 {qs} | {cut}", f"{cut} {qs} | sed 1d", awk))
    tail = {
        "count": w.pick(("sort -u | wc -l", "sort | uniq | wc -l")),
        "list": w.pick(("sort -u", "sort | uniq")),
        "dups": "sort | uniq -d",
    }[mode]
    reference = [f"head -n 3 {qs}"] if w.chance(0.5) else []
    reference += [f"mkdir -p {quote(posixpath.dirname(out))}", f"{extract} | {tail} > {qo}", f"cat {qo}"]
    return Draft(
        task=task, check=check, reference=reference, difficulty=2, files={src: _csv(header, rows, sep)}
    )


@family("data-csv-join", "data", "join two CSV files on a shared key column")
def csv_join(w: World) -> Draft:
    key = w.pick(("id", "user_id", "emp_id", "account", "sku"))
    prefix = {"id": "U", "user_id": "U", "emp_id": "E", "account": "AC", "sku": "SKU"}[key]
    ids = sorted({f"{prefix}{w.randint(100, 999)}" for _ in range(14)})
    both = w.sample(ids, w.randint(3, min(7, len(ids) - 4)))
    rest = [i for i in ids if i not in both]
    left_only = w.sample(rest, w.randint(1, 2))
    right_only = w.sample([i for i in rest if i not in left_only], w.randint(1, 2))
    lname, lcols = w.pick(
        (("people", ("name", "team")), ("accounts", ("owner", "city")), ("members", ("name", "city")))
    )
    rname, rcol = w.pick(
        (
            ("scores", "score"),
            ("orders", "amount"),
            ("usage", "gigabytes"),
            ("payments", "paid"),
            ("visits", "visits"),
        )
    )
    names = w.sample(FIRST_NAMES, len(both) + len(left_only))
    lrows = {}
    for i, ident in enumerate(both + left_only):
        lrows[ident] = [names[i], w.pick(TEAMS) if lcols[1] == "team" else w.pick(CITIES)]
    rrows = {ident: str(w.randint(1, 990)) for ident in both + right_only}
    right_key_first = w.chance(0.6)
    lorder = w.shuffled(list(lrows))
    rorder = w.shuffled(list(rrows))
    left_csv = _csv([key, *lcols], [[i, *lrows[i]] for i in lorder])
    if right_key_first:
        right_csv = _csv([key, rcol], [[i, rrows[i]] for i in rorder])
    else:
        right_csv = _csv([rcol, key], [[rrows[i], i] for i in rorder])
    folder = f"{HOME}/{w.pick(('data', 'join', 'merge', w.dirname()))}"
    lpath, rpath = f"{folder}/{w.filename('csv', stem=lname)}", f"{folder}/{w.filename('csv', stem=rname)}"
    out = f"{w.pick((folder, HOME))}/{w.filename('csv', stem=w.pick(('joined', 'merged', f'{lname}_{rname}', 'combined')))}"
    take = [lcols[0]] if w.chance(0.5) else list(lcols)
    header = [key, *take, rcol]
    with_header = w.chance(0.5)
    ordered = w.chance(0.5)
    w.note(key, rcol, *lcols)
    rows = [",".join([i, *[lrows[i][lcols.index(c)] for c in take], rrows[i]]) for i in sorted(both)]
    want = ([",".join(header)] if with_header else []) + rows
    cols_en = ", ".join(header)
    parts = [
        w.spin("columns " + cols_en + "{| in that order}", capitalize=False),
        w.spin("{only|just} the {key}s present in both files", capitalize=False, key=key),
        w.spin("start with the header line " + ",".join(header), capitalize=False)
        if with_header
        else w.spin("no header line", capitalize=False),
        w.spin("sorted by {key}", capitalize=False, key=key) if ordered else "",
    ]
    spec = w.clauses(parts, "; ")
    task = w.phrase(
        "{Join|Merge|Combine} {left} and {right} on {key} into {out} ({spec}).",
        "{left} and {right} both have a {key} column. {Write|Create} {out} combining them: {spec}.",
        "Ticket: {build|produce} {out} as a merged CSV of {left} and {right}, matched on {key}. "
        "{Requirements|Format}: {spec}.",
        "Can you match the rows of {left} with {right} by {key} and {save|write} the result to {out}? "
        "{Use|I need}: {spec}.",
        "{left} + {right} on {key} -> {out} ({spec}).",
        "I have two CSV exports, {left} and {right}, that share a {key} column, and I want them side by side. Write the "
        "joined table to {out}; {spec}.",
        left=w.path_ref(lpath, "file"),
        right=w.path_ref(rpath, "file"),
        key=key,
        out=w.path_ref(out, "file"),
        spec=spec,
    )
    check = "#!/bin/bash\n"
    if with_header:
        check += (
            f"[ -f {quote(out)} ] || exit 1\n"
            f"[ \"$(head -n 1 {quote(out)} | tr -d '[:space:]')\" = {quote(','.join(header))} ] || exit 1\n"
        )
    check += _lines_check(out, want, ordered=ordered)
    ql, qr, qo = quote(lpath), quote(rpath), quote(out)
    lfields = [f"1.{lcols.index(c) + 2}" for c in take]
    rk = 1 if right_key_first else 2
    rv = 2 if right_key_first else 1
    approach = w.pick(("join", "join", "awk", "python", "sqlite"))
    if approach == "python":  # a dict of the right file, the left file's rows looked up in it
        code = (
            f"import csv, sys; right = {{r[{key!r}]: r[{rcol!r}] for r in csv.DictReader(open(sys.argv[2]))}}; "
            "out = csv.writer(sys.stdout, lineterminator=chr(10)); "
            + (f"out.writerow({header!r}); " if with_header else "")
            + f"rows = [[r[{key!r}], *(r[c] for c in {take!r}), right[r[{key!r}]]] "
            f"for r in csv.DictReader(open(sys.argv[1])) if r[{key!r}] in right]; "
            + ("out.writerows(sorted(rows))" if ordered else "out.writerows(rows)")
        )
        cmd = f"python3 -c {quote(code)} {ql} {qr} > {qo}"
    elif approach == "sqlite":  # both files imported into an in-memory database, joined in SQL
        cols_sql = ", ".join([f"l.{key} AS {key}", *(f"l.{c} AS {c}" for c in take), f"r.{rcol} AS {rcol}"])
        sql = (
            f"SELECT {cols_sql} FROM l JOIN r ON l.{key} = r.{key}"
            + (f" ORDER BY l.{key}" if ordered else "")
            + ";"
        )
        cmd = (
            f"sqlite3 :memory: -cmd {quote(f'.import --csv {lpath} l')} -cmd {quote(f'.import --csv {rpath} r')} "
            f"-csv {'-header ' if with_header else ''}{quote(sql)} > {qo}"
        )
    elif approach == "join":
        body = (
            f"join -t, -1 1 -2 {rk} -o {','.join(['1.1', *lfields, f'2.{rv}'])} "
            f"<(tail -n +2 {ql} | sort -t, -k1,1) <(tail -n +2 {qr} | sort -t, -k{rk},{rk})"
        )
    else:
        lvals = ' "," '.join(f"${lcols.index(c) + 2}" for c in take)
        prog = (
            f"NR == FNR {{ if (FNR > 1) v[${rk}] = ${rv}; next }} FNR > 1 && ($1 in v) "
            f'{{ print $1 "," {lvals} "," v[$1] }}'
        )
        body = f"awk -F, {quote(prog)} {qr} {ql}" + (" | sort" if ordered else "")
    if approach in ("join", "awk"):
        cmd = f"{{ echo {quote(','.join(header))}; {body}; }} > {qo}" if with_header else f"{body} > {qo}"
    reference = [f"head -n 3 {ql} {qr}", cmd, f"cat {qo}"]
    return Draft(
        task=task, check=check, reference=reference, difficulty=3, files={lpath: left_csv, rpath: right_csv}
    )


@family("data-sqlite-update", "data", "change rows of a SQLite table: update, delete or insert")
def sqlite_update(w: World) -> Draft:
    table, cols = w.pick(_DB_TABLES)
    names = [c for c, _ in cols]
    kinds = dict(cols)
    rows = _db_rows(w, cols, w.randint(6, 12))
    op = w.pick(("set_one", "set_one", "add_where", "delete", "insert"))
    db = f"{w.pick((HOME, f'{HOME}/db', f'{HOME}/{w.dirname()}'))}/{w.filename('db', stem=w.pick(('app', 'shop', 'inventory', 'crm', 'ops', table)))}"
    w.note(table)
    new = [list(r) for r in rows]
    if op == "set_one":
        target = w.pick(rows)
        c = w.pick([x for x in names if x != "id"])
        k = kinds[c]
        while True:
            v = _value(w, k, set(), False) if not k.startswith("pick:") else w.pick(k[5:].split("/"))
            if v != target[names.index(c)]:
                break
        for r in new:
            if r[0] == target[0]:
                r[names.index(c)] = v
        w.note(target[0], c, v)
        desc = w.spin(
            "{set|change} the {c} of the row with id {id} to {v}",
            capitalize=False,
            c=c,
            id=target[0],
            v=v if _numeric(k) else f"'{v}'",
        )
        sql = f"UPDATE {table} SET {c} = {_sql_value(v, k)} WHERE id = {target[0]};"
        show = f"SELECT * FROM {table} WHERE id = {target[0]};"
    elif op == "add_where":
        num = w.pick([x for x in names if x != "id" and _numeric(kinds[x])])
        where_sql, where_en, pred = _db_condition(w, cols, rows, exclude=num)
        d = w.pick((1, 5, 10, 25, 50, 100))
        ni = names.index(num)
        for r in new:
            if pred(r):
                r[ni] = str(int(r[ni]) + d)
        w.note(num, d)
        desc = w.spin(
            "{increase|raise} the {num} by {d} for every row where {where}",
            capitalize=False,
            num=num,
            d=d,
            where=where_en,
        )
        sql = f"UPDATE {table} SET {num} = {num} + {d} WHERE {where_sql};"
        show = f"SELECT * FROM {table} WHERE {where_sql};"
    elif op == "delete":
        where_sql, where_en, pred = _db_condition(w, cols, rows)
        new = [r for r in new if not pred(r)]
        desc = w.spin(
            "{delete|remove} every row where {where}, keeping all the others",
            capitalize=False,
            where=where_en,
        )
        sql = f"DELETE FROM {table} WHERE {where_sql};"
        show = f"SELECT count(*) FROM {table};"
    else:
        nid = str(max(int(r[0]) for r in rows) + w.randint(1, 20))
        value_cols = tuple((c, k) for c, k in cols if k != "pk")
        used: dict[str, set[str]] = {c: {r[names.index(c)] for r in rows} for c, _ in value_cols}
        vals = [nid] + [_value(w, k, used[c], _numeric(k)) for c, k in value_cols]
        new.append(vals)
        w.note(*vals)
        pairs = ", ".join(
            f"{c} = {v if _numeric(kinds[c]) or kinds[c] == 'pk' else repr(v)}"
            for c, v in zip(names, vals, strict=True)
        )
        desc = w.spin("{add|insert} a new row with " + pairs, capitalize=False)
        sql = (
            f"INSERT INTO {table} ({', '.join(names)}) VALUES "
            f"({', '.join(_sql_value(v, kinds[c] if c != 'id' else 'pk') for c, v in zip(names, vals, strict=True))});"
        )
        show = f"SELECT * FROM {table} WHERE id = {nid};"
    other_table, other_cols = w.pick([t for t in _DB_TABLES if t[0] != table])
    other_rows = _db_rows(w, other_cols, w.randint(3, 6))
    sql_seed = _db_sql(table, cols, rows) + _db_sql(other_table, other_cols, other_rows)
    files, setup = _sqlite_setup(w, db, sql_seed)
    task = w.phrase(
        "In the {table} table of the SQLite database {db}, {desc}.",
        "{db} is a SQLite database. {desc_cap} in its {table} table{|; leave everything else as it is}.",
        "Please {desc} in the {table} table of {db}{| and leave the rest of the database alone}.",
        "Ticket: {data fix|correction} needed in {db}: in table {table}, {desc}.",
        "Could you {update|fix up} the {table} table in {db}? {desc_cap}.",
        table=table,
        db=w.path_ref(db, "file"),
        desc=desc,
        desc_cap=desc[:1].upper() + desc[1:],
    )
    body = (
        f"import sqlite3\ntry:\n    con = sqlite3.connect('file:' + {db!r} + '?mode=ro', uri=True)\n"
        "    def dump(t):\n"
        "        return sorted([str(v) for v in r] for r in con.execute(f'SELECT * FROM {t}'))\n"
        "    ok = dump(WANT['t']) == sorted(WANT['rows']) and dump(WANT['ot']) == sorted(WANT['orows'])\n"
        "except sqlite3.Error:\n    sys.exit(1)\n"
        "sys.exit(0 if ok else 1)\n"
    )
    check = "#!/bin/bash\n" + _python_check(
        body, {"t": table, "rows": new, "ot": other_table, "orows": other_rows}
    )
    qdb = quote(db)
    run = w.pick((f"sqlite3 {qdb} {quote(sql)}", f"echo {quote(sql)} | sqlite3 {qdb}"))
    reference = [f"sqlite3 {qdb} '.schema {table}'"] if w.chance(0.5) else []
    view = w.pick(("sqlite3", "sqlite3 -header -column", "sqlite3 -box", "sqlite3 -line"))
    reference += [run, f"{view} {qdb} {quote(show)}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=1 if op == "set_one" else 2,
        files=files,
        setup=setup,
    )


# ---- JSON merge / rename, CSV dedupe, SQLite index and view ----------------------------------------------------------
def _f(w: World, template: str, **values: object) -> str:
    return w.spin(template, capitalize=False, **values)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _data_where(w: World, folder: str) -> tuple[str | None, str]:
    """Where the shell starts (home, the data's folder or a drawn project folder) as the operator."""
    wd = w.pick((None, folder, folder, f"{HOME}/{w.pick(('work', 'tmp', 'scratch'))}"))
    if wd == HOME:
        wd = None
    return (
        wd,
        "" if wd is None or wd == folder else f"mkdir -p {quote(wd)} && chown operator:operator {quote(wd)}",
    )


def _rel(path: str, wd: str | None) -> str:
    """How a reference writes ``path``: relative to the working directory when inside it."""
    if wd and path.startswith(wd + "/"):
        return quote(posixpath.relpath(path, wd))
    return quote(path)


def _ref_path(w: World, path: str, wd: str | None, kind: str = "file") -> str:
    if wd and path.startswith(wd + "/") and w.chance(0.5):
        return "./" + posixpath.relpath(path, wd)
    return w.path_ref(path, kind)


def _deep_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@family("data-json-merge", "data", "merge two JSON config files into one (the second file's values win)")
def json_merge(w: World) -> Draft:
    svc = w.pick(("api", "worker", "gateway", "indexer", "mailer", "scheduler", "ledger"))
    base: dict[str, Any] = {  # a JSON document: sections of mixed values
        "service": svc,
        "server": {
            "host": w.pick(("0.0.0.0", "127.0.0.1", "localhost")),
            "workers": w.randint(1, 8),
            "timeout_s": w.randint(5, 120),
        },
        "logging": {"level": w.pick(("info", "warning")), "file": f"/var/log/{svc}.log"},
        "cache": {"enabled": w.chance(0.5), "ttl_s": w.randint(30, 3600)},
    }
    over: dict[str, Any] = {}
    for section in w.sample(("server", "logging", "cache"), w.randint(2, 3)):
        key = w.pick(sorted(base[section]))
        old = base[section][key]
        if isinstance(old, bool):
            new: object = not old
        elif isinstance(old, int):
            new = old + w.randint(1, 50)
        else:
            new = {"level": w.pick(("debug", "error")), "file": f"/srv/{svc}/{w.word()}.log"}.get(
                key, "10.0.0.5"
            )
        over.setdefault(section, {})[key] = new
    extra_key = w.pick(("region", "owner", "environment"))
    over[extra_key] = w.pick(("eu-west", "us-east", "staging", "production", w.pick(TEAMS)))
    if w.chance(0.5):
        over.setdefault("server", {})["max_body_kb"] = w.randint(64, 4096)
    deep = w.chance(0.7)
    want = _deep_merge(base, over) if deep else {**base, **over}
    folder = f"{HOME}/{w.pick(('config', 'deploy', 'etc', svc))}"
    a_name = w.pick(("defaults.json", "base.json", "config.default.json"))
    b_name = w.pick(("local.json", "overrides.json", "production.json", "site.json"))
    a, b = f"{folder}/{a_name}", f"{folder}/{b_name}"
    decoy = f"{folder}/{b_name.replace('.json', '.example.json')}"
    out = w.pick((f"{folder}/config.json", f"{folder}/merged.json", f"{HOME}/{svc}-effective.json"))
    w.note(svc, a_name, b_name, out)
    decoy_body = _deep_merge(over, {"server": {"workers": 99}})
    files = {
        a: json.dumps(base, indent=2) + "\n",
        b: json.dumps(over, indent=w.pick((2, 4))) + "\n",
        decoy: json.dumps(decoy_body, indent=2) + "\n",
    }
    wd, mk = _data_where(w, folder)
    how = (
        _f(
            w,
            "nested sections are merged key by key{| (a key the second file does not set keeps its default)}",
        )
        if deep
        else _f(
            w,
            "a top-level key in the second file replaces the {whole|entire} value from the first{| (no deep merge)}",
        )
    )
    task = w.phrase(
        "Merge {a} and {b} into {out}: values from {b} win, and {how}.",
        "Ticket: the effective config for {svc} is {a} overlaid with {b}. Write it to {out} as JSON; {how}. Ignore "
        "the .example file.",
        "can you combine {a} with {b} into {out}? {b} overrides {a}; {how}.",
        "{out} = {a} merged with {b} ({b} wins; {how}).",
        "What does {svc} actually run with? Its settings are {a} with {b} on top. Save the merged JSON as {out} "
        "- {how}.",
        "We deploy {svc} with a single config file. Produce {out} from the defaults in {a} and the site settings "
        "in {b}, where {b} takes precedence; {how}. Leave both input files unchanged.",
        a=_ref_path(w, a, wd),
        b=_ref_path(w, b, wd),
        out=_ref_path(w, out, wd),
        svc=svc,
        how=how,
    )
    check = _python_check(
        f"base = json.loads(r'''{json.dumps(base)}''')\n"
        f"got = json.load(open({out!r}))\n"
        f"sys.exit(0 if got == WANT and json.load(open({a!r})) == base else 1)",
        want,
    )
    A, B, OUT = _rel(a, wd), _rel(b, wd), _rel(out, wd)
    op = "*" if deep else "+"
    how_ref = w.pick(("slurp", "input", "slurpfile", "reduce", "python", "python"))
    if how_ref == "slurp":
        cmd = f"jq -s '.[0] {op} .[1]' {A} {B} > {OUT}"
    elif how_ref == "input":
        cmd = f"jq -n 'input as $a | input as $b | $a {op} $b' {A} {B} > {OUT}"
    elif how_ref == "slurpfile":
        cmd = f"jq --slurpfile o {B} '. {op} $o[0]' {A} > {OUT}"
    elif how_ref == "reduce":
        cmd = f"jq -s 'reduce .[] as $x ({{}}; . {op} $x)' {A} {B} > {OUT}"
    else:
        merge = (
            "def merge(a, b):\n    for k, v in b.items():\n"
            "        a[k] = merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v\n    return a\n"
            if deep
            else "def merge(a, b):\n    a.update(b)\n    return a\n"
        )
        cmd = (
            f"python3 - <<'EOF'\nimport json\n{merge}"
            f"a = json.load(open({A}))\nb = json.load(open({B}))\n"
            f"json.dump(merge(a, b), open({OUT}, 'w'), indent={w.pick((2, 4))})\nEOF"
        )
    if how_ref != "python" and w.chance(0.3):
        cmd = cmd.replace("jq ", f"jq {w.pick(('-S', '--indent 4', '--tab'))} ", 1)
    if how_ref != "python" and w.chance(0.25):
        cmd = cmd.replace(f" > {OUT}", f" | tee {OUT}")
    ref = [w.pick((f"cat {A} {B}", f"jq . {B}", f"ls {quote(folder)}")), cmd, f"jq . {OUT}"]
    return Draft(
        task=task, check=check, reference=ref, difficulty=3, files=files, setup=[mk] if mk else [], workdir=wd
    )


@family("data-json-rename-key", "data", "rename one key in every object of a JSON array (jq or python3)")
def json_rename_key(w: World) -> Draft:
    noun, key, num, flag, label, labels = w.pick(_JSON_KINDS)
    old = w.pick((num, flag, label))
    new = w.pick(
        {
            num: (f"{num}_v2", f"{num.split('_')[0]}_value", "amount" if num != "size_kb" else "kilobytes"),
            flag: (f"is_{flag}", f"{flag}_flag"),
            label: (f"{label}_name", "group" if label != "group" else "grouping", "owner_" + label),
        }[old]
    )
    n = w.randint(4, 9)
    used: set[str] = set()
    records = []
    for _ in range(n):
        k = _json_key(w, noun)
        while k in used:
            k = _json_key(w, noun)
        used.add(k)
        records.append({key: k, num: w.randint(1, 5000), flag: w.chance(0.4), label: w.pick(labels)})
    missing = w.chance(0.4)
    if missing:  # one record lacks the key: it must not gain one
        del records[w.randint(0, n - 1)][old]
    wrapped = w.chance(0.4)
    generated = f"2024-{w.randint(1, 12):02d}-{w.randint(1, 28):02d}" if wrapped else ""
    doc: object = {"generated": generated, noun: records} if wrapped else records
    want_records = [{(new if k == old else k): v for k, v in r.items()} for r in records]
    want: object = {"generated": generated, noun: want_records} if wrapped else want_records
    folder = f"{HOME}/{w.pick(('data', 'exports', 'inventory', noun))}"
    src = f"{folder}/{w.filename('json', stem=w.pick((noun, f'{noun}_list', 'records', 'dump')))}"
    in_place = w.chance(0.5)
    out = (
        src
        if in_place
        else f"{folder}/{w.filename('json', stem=w.pick((f'{noun}_renamed', f'{noun}_v2', 'converted')))}"
    )
    w.note(noun, old, new)
    files = {src: json.dumps(doc, indent=2) + "\n"}
    wd, mk = _data_where(w, folder)
    dest = (
        _f(w, "{in place|in the file itself}")
        if in_place
        else _f(w, "writing the result to {o}", o=_ref_path(w, out, wd))
    )
    where = _f(w, " (the records are under .{n})", n=noun) if wrapped else ""
    keep = (
        _f(
            w,
            "{records without that key stay without it|a record that has no {o} must not get {nw}}",
            o=old,
            nw=new,
        )
        if missing
        else _f(w, "nothing else changes")
    )
    task = w.phrase(
        "Rename the key {o} to {nw} in every object of {src}{where}, {dest}; {keep}.",
        "Ticket: the consumer of {src} now expects {nw} instead of {o}. Rename that key in each record{where}, "
        "{dest}. {keep_c}.",
        "quick one - in {src}{where} every '{o}' field should be called '{nw}'. {dest_c}, and {keep}.",
        "{src}: {o} -> {nw} in all records{where}; {dest}; {keep}.",
        "Can you rename the {o} field of the {noun} in {src}{where} to {nw}? {dest_c}; values, other keys and the "
        "order of the records stay the same, and {keep}.",
        "Schema change for the {noun} export {src}{where}: the field {o} is renamed {nw}. Apply it to the data, "
        "{dest}, keeping every value and the record order; {keep}.",
        src=_ref_path(w, src, wd),
        where=where,
        o=old,
        nw=new,
        dest=dest,
        dest_c=_cap(dest),
        keep=keep,
        keep_c=_cap(keep),
        noun=noun,
    )
    check = _python_check(f"sys.exit(0 if json.load(open({out!r})) == WANT else 1)", want)
    if not in_place:
        check += _python_check(f"sys.exit(0 if json.load(open({src!r})) == WANT else 1)", doc)
    S, OUT = _rel(src, wd), _rel(out, wd)
    path = f".{noun}" if wrapped else "."
    how = w.pick(("entries", "has", "update", "python", "sed"))
    o, nw = old, new
    if how == "entries":
        expr = f'{path} |= map(with_entries(if .key == "{o}" then .key = "{nw}" else . end))'
    elif how == "has":
        expr = f'{path} |= map(if has("{o}") then .{nw} = .{o} | del(.{o}) else . end)'
    elif how == "update":
        expr = f'{path}[] |= (if has("{o}") then . + {{"{nw}": .{o}}} | del(.{o}) else . end)'
    else:
        expr = ""
    if how == "python":
        get = f"doc['{noun}']" if wrapped else "doc"
        cmd = (
            f"python3 - <<'EOF'\nimport json\ndoc = json.load(open({S}))\n"
            f"for r in {get}:\n    if '{o}' in r:\n        r['{nw}'] = r.pop('{o}')\n"
            f"json.dump(doc, open({OUT}, 'w'), indent=2)\nEOF"
        )
        cmds = [cmd]
    elif how == "sed":
        cmds = (
            [f'sed -i \'s/"{o}":/"{nw}":/\' {S}'] if in_place else [f'sed \'s/"{o}":/"{nw}":/\' {S} > {OUT}']
        )
    elif in_place:
        cmds = w.pick(
            (
                [f"jq '{expr}' {S} > /tmp/renamed.json", f"mv /tmp/renamed.json {S}"],
                [f'tmp=$(mktemp) && jq \'{expr}\' {S} > "$tmp" && cat "$tmp" > {S} && rm "$tmp"'],
                [f"jq '{expr}' {S} > {S}.new && mv {S}.new {S}"],
                [f"cp {S} /tmp/orig.json", f"jq --indent 2 '{expr}' /tmp/orig.json > {S}"],
            )
        )
    else:
        cmds = [f"jq {w.pick(('', '--indent 4 ', '-c ', '--tab '))}'{expr}' {S} > {OUT}"]
    ref = [
        w.pick((f"jq '{path} | .[0]' {S}", f"head -20 {S}", f"jq -c '{path}[]' {S}")),
        *cmds,
        f"jq -c '{path}[]' {OUT}",
    ]
    return Draft(
        task=task, check=check, reference=ref, difficulty=2, files=files, setup=[mk] if mk else [], workdir=wd
    )


@family(
    "data-csv-dedupe-latest", "data", "deduplicate CSV rows by a key column, keeping each key's latest row"
)
def csv_dedupe_latest(w: World) -> Draft:
    kind = w.pick(("hosts", "customers", "devices", "tickets"))
    key, other = {
        "hosts": ("host", ("status", ("up", "down", "degraded"))),
        "customers": ("email", ("plan", ("free", "pro", "team"))),
        "devices": ("serial", ("firmware", ("1.2.0", "1.3.1", "2.0.0", "2.0.4"))),
        "tickets": ("ticket", ("state", ("open", "pending", "closed"))),
    }[kind]
    ts_col = w.pick(("updated_at", "seen", "timestamp", "modified"))
    header = [key, ts_col, other[0], w.pick(("note", "by", "source"))]
    keys: list[str] = []
    while len(keys) < w.randint(4, 7):
        k = {
            "hosts": lambda: f"{w.pick(WORDS)}-{w.randint(1, 30):02d}",
            "customers": lambda: f"{w.pick(FIRST_NAMES)}@{w.pick(('example.com', 'mail.example'))}",
            "devices": lambda: f"SN{w.randint(10000, 99999)}",
            "tickets": lambda: f"T-{w.randint(100, 999)}",
        }[kind]()
        if k not in keys:
            keys.append(k)
    rows: list[list[str]] = []
    latest: dict[str, list[str]] = {}
    for k in keys:
        stamps = sorted(w.sample(range(0, 60 * 24 * 90), w.randint(1, 4)))
        for s in stamps:
            d = w.date("2024-01-01", 0)
            t = d.replace(hour=0, minute=0, second=0) + timedelta(minutes=s)
            row = [k, t.strftime("%Y-%m-%dT%H:%M"), w.pick(other[1]), w.pick(WORDS)]
            rows.append(row)
            latest[k] = row
    rows = w.shuffled(rows)
    want = [",".join(r) for r in latest.values()]
    folder = f"{HOME}/{w.pick(('data', 'exports', 'inbox', kind))}"
    src = f"{folder}/{w.filename('csv', stem=w.pick((kind, f'{kind}_history', f'{kind}_log', 'snapshots')))}"
    out = f"{w.pick((folder, HOME))}/{w.filename('csv', stem=w.pick((f'{kind}_latest', f'{kind}_current', 'deduped')))}"
    w.note(kind, key, ts_col, out)
    files = {src: _csv(header, rows)}
    wd, mk = _data_where(w, folder)
    task = w.phrase(
        "{src} has several rows per {key}. Write {out} with one row per {key}: the one with the latest {ts}. Keep "
        "the header; row order does not matter.",
        "Ticket: dedupe {src} by {key}, keeping for each {key} only its most recent row (by {ts}). Output with the "
        "same header to {out}.",
        "can you squash {src} down to the newest row per {key} ({ts} decides)? put it in {out}, header included, "
        "any order is fine",
        "{src} -> {out}: one row per {key}, the latest {ts} wins, header kept.",
        "Which state is current for each {key} in {src}? Only the row with the newest {ts} counts. Save exactly "
        "those rows (with the header line, in any order) as {out}.",
        "The history file {src} is append-only and not sorted, so a {key} appears several times. For a snapshot, "
        "produce {out} holding the header and, for every {key}, the single row whose {ts} is the latest, "
        "unchanged. The source file stays as it is.",
        src=_ref_path(w, src, wd),
        out=_ref_path(w, out, wd),
        key=key,
        ts=ts_col,
    )
    check = (
        f"[ \"$(head -n 1 {quote(out)} | tr -d '\\r')\" = {quote(','.join(header))} ] || exit 1\n"
        + _lines_check(out, [",".join(header), *want], ordered=False)
    )
    S, OUT = _rel(src, wd), _rel(out, wd)
    how = w.pick(("awk2", "sortu", "sortawk", "python", "sqlite", "tac"))
    if how == "awk2":
        cmd = f"awk -F, 'NR==FNR {{ if (FNR > 1 && $2 > m[$1]) m[$1] = $2; next }} FNR == 1 || $2 == m[$1]' {S} {S} > {OUT}"
    elif how == "sortu":
        cmd = f"{{ head -n 1 {S}; tail -n +2 {S} | sort -t, -k1,1 -k2,2r | sort -t, -s -u -k1,1; }} > {OUT}"
    elif how == "sortawk":
        cmd = f"{{ head -n 1 {S}; tail -n +2 {S} | sort -t, -k2,2r | awk -F, '!seen[$1]++'; }} > {OUT}"
    elif how == "tac":
        cmd = f"(head -n 1 {S} && tail -n +2 {S} | sort -t, -k2,2 | tac | awk -F, '!seen[$1]++') > {OUT}"
    elif how == "python":
        cmd = (
            f"python3 - <<'EOF'\nimport csv\nrows = list(csv.reader(open({S})))\nlatest = {{}}\n"
            f"for r in rows[1:]:\n    if r[0] not in latest or r[1] > latest[r[0]][1]:\n        latest[r[0]] = r\n"
            f"with open({OUT}, 'w', newline='') as f:\n    csv.writer(f, lineterminator='\\n').writerows([rows[0], *latest.values()])\nEOF"
        )
    else:
        cmd = (
            f"sqlite3 -csv -header :memory: '.import {S} t' "
            f"'SELECT * FROM t WHERE ({key}, {ts_col}) IN (SELECT {key}, max({ts_col}) FROM t GROUP BY {key})' > {OUT}"
        )
    ref = [w.pick((f"head {S}", f"wc -l {S}", f"cut -d, -f1 {S} | sort | uniq -c")), cmd, f"cat {OUT}"]
    return Draft(
        task=task, check=check, reference=ref, difficulty=3, files=files, setup=[mk] if mk else [], workdir=wd
    )


@family(
    "data-sqlite-index-view",
    "data",
    "add an index and/or a view to a SQLite database, leaving its rows as they are",
)
def sqlite_index_view(w: World) -> Draft:
    # not the products table: a view over prices reads like the held-out price update
    table, cols = w.pick([t for t in _DB_TABLES if t[0] != "products"])
    rows = _db_rows(w, cols, w.randint(6, 12))
    names = [c for c, _ in cols]
    what = w.pick(("index", "view", "both"))
    idx_cols = w.sample([c for c, k in cols if k != "pk"], w.randint(1, 2))
    unique = (
        len(idx_cols) == 1 and w.chance(0.2) and len({r[names.index(idx_cols[0])] for r in rows}) == len(rows)
    )
    idx_name = w.pick(
        (f"idx_{table}_{'_'.join(idx_cols)}", f"{table}_{idx_cols[0]}_idx", f"ix_{idx_cols[0]}")
    )
    where_sql, where_en, pred = _db_condition(w, cols, rows)
    sel = [n for n in names if w.chance(0.6)] or names[:2]
    view = w.pick(
        (f"{table}_{w.pick(('active', 'selected', 'report', 'subset'))}", f"v_{table}", f"{w.word()}_{table}")
    )
    w.note(table, idx_name, view, *idx_cols, *sel)
    db = f"{w.pick((HOME, f'{HOME}/db', f'{HOME}/{w.dirname()}'))}/{w.filename('db', stem=w.pick(('app', 'crm', 'ops', 'reporting', table)))}"
    files, setup = _sqlite_setup(w, db, _db_sql(table, cols, rows))
    folder = posixpath.dirname(db)
    wd, mk = _data_where(w, folder)
    if mk:
        setup.append(mk)
    want_view = sorted([[r[names.index(c)] for c in sel] for r in rows if pred(r)])
    parts = []
    if what in ("index", "both"):
        parts.append(
            _f(
                w,
                "an {u}index named {i} on {t}({c})",
                u="UNIQUE " if unique else "",
                i=idx_name,
                t=table,
                c=", ".join(idx_cols),
            )
        )
    if what in ("view", "both"):
        parts.append(
            _f(
                w,
                "a view named {v} that {shows|returns} the columns {s} of the {t} rows {where}",
                v=view,
                s=", ".join(sel),
                t=table,
                where=where_en,
            )
        )
    things = " and ".join(parts)
    task = w.phrase(
        "Create {things} in {db} (a SQLite file). Do not change any rows.",
        "Ticket: {db} needs {things}. The data itself must stay exactly as it is.",
        "could you add {things} to {db}? no data changes please",
        "{db}: add {things}; rows untouched.",
        "Reports on {db} are slow and hard to write. Can you create {things}? Leave the table's rows alone.",
        "Schema change for {db} (SQLite): it should end up with {things}. Existing tables and rows are not to be "
        "modified, only the new object{s} added.",
        db=_ref_path(w, db, wd),
        things=things,
        s="s" if what == "both" else "",
    )
    body = [
        "import sqlite3",
        f"con = sqlite3.connect({db!r})",
        f"rows = sorted(list(map(str, r)) for r in con.execute('SELECT * FROM {table}'))",
        "ok = rows == WANT['rows']",
    ]
    if what in ("index", "both"):
        body += [
            f"il = {{r[1]: r[2] for r in con.execute(\"PRAGMA index_list('{table}')\")}}",
            f"ok = ok and {idx_name!r} in il and bool(il[{idx_name!r}]) == {unique!r}",
            f"ok = ok and [r[2] for r in con.execute(\"PRAGMA index_info('{idx_name}')\")] == {idx_cols!r}",
        ]
    if what in ("view", "both"):
        body += [
            f"ok = ok and con.execute(\"SELECT type FROM sqlite_master WHERE name = '{view}'\").fetchone() == ('view',)",
            f"cur = con.execute('SELECT * FROM {view}')",
            f"ok = ok and [d[0] for d in cur.description] == {sel!r}",
            "ok = ok and sorted(list(map(str, r)) for r in cur) == WANT['view']",
        ]
    body.append("sys.exit(0 if ok else 1)")
    check = _python_check("\n".join(body), {"rows": sorted([list(r) for r in rows]), "view": want_view})
    stmts = []
    ine = w.pick(("", "IF NOT EXISTS "))
    if what in ("index", "both"):
        stmts.append(
            f"CREATE {'UNIQUE ' if unique else ''}INDEX {ine}{idx_name} ON {table}({', '.join(idx_cols)});"
        )
    if what in ("view", "both"):
        stmts.append(f"CREATE VIEW {ine}{view} AS SELECT {', '.join(sel)} FROM {table} WHERE {where_sql};")
    D = _rel(db, wd)
    how = w.pick(("arg", "heredoc", "pipe", "file", "python"))
    sql = " ".join(stmts)
    if how == "arg":
        flag = w.pick(("-bail", "-batch", "-echo"))
        one = w.chance(0.5)
        cmds = (
            [f"sqlite3 {flag} {D} {quote(s)}" for s in stmts] if one else [f"sqlite3 {flag} {D} {quote(sql)}"]
        )
    elif how == "heredoc":
        cmds = [f"sqlite3 {D} <<'SQL'\n" + "\n".join(stmts) + "\nSQL"]
    elif how == "pipe":
        cmds = [f"echo {quote(sql)} | sqlite3 {D}"]
    elif how == "file":
        cmds = [
            f"printf '%s\\n' {' '.join(quote(s) for s in stmts)} > /tmp/schema.sql",
            w.pick((f"sqlite3 {D} < /tmp/schema.sql", f"sqlite3 {D} '.read /tmp/schema.sql'")),
        ]
    else:
        cmds = [
            f"python3 -c {quote(f'import sqlite3; c = sqlite3.connect({db!r}); c.executescript({sql!r}); c.commit()')}"
        ]
    if w.chance(0.2):
        cmds.insert(0, f"cp {D} {D}.bak")
    look = [
        w.pick(
            (
                f"sqlite3 {D} .schema",
                f"sqlite3 {D} '.tables'",
                f"sqlite3 -header {D} 'SELECT * FROM {table} LIMIT 3'",
            )
        )
    ]
    end = (
        f"sqlite3 {D} '.indexes {table}'"
        if what == "index"
        else f"sqlite3 -header {D} 'SELECT * FROM {view}'"
    )
    return Draft(
        task=task,
        check=check,
        reference=[*look, *cmds, end],
        difficulty=2 if what != "both" else 3,
        files=files,
        setup=setup,
        workdir=wd,
    )
