"""Structured data: the JSON, YAML, TOML, INI, CSV and SQLite chores an operator meets in a data or config folder.

Set a nested JSON value in place, prune an array, flatten a config into environment lines, sort good JSON lines
from bad ones, turn JSON lines into CSV; reshape, filter, extend, combine and aggregate CSV files; edit a YAML,
INI or TOML config where the same key sits in several sections; load a CSV into a typed SQLite table, join two
tables into a report, change a table's schema, export a query as nested JSON.

Tasks happen where such data lives: ``/srv/<app>/data``, ``/var/lib/<svc>`` (files owned by the service's own
account, which an edit must not take away from it), ``/opt/<app>/etc``, ``/app`` or a project folder in the home,
as ``root`` or ``operator``, with near-miss files beside the target (``.bak``, ``.example``, last month's export)
and, in some draws, the file to change named only by what it holds. Every check parses the result the way a
program would (``json``, ``csv``, ``configparser``, ``tomllib``, ``sqlite3`` and a small YAML reader for the block
subset these configs use) and compares meaning: any correct tool passes (jq, python3, awk, sed, sqlite3), the
wrong file, a half change, a lost owner or a broken neighbour fails. Kept away from the held-out skills
(``factory/split.py``): no SQL that updates, deletes or inserts rows of an existing table (``data-sqlite-update``),
no ``tr`` conversions, no listen ports.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import (
    CITIES,
    FIRST_NAMES,
    FRUITS,
    HOME,
    PROJECTS,
    SERVICES,
    TEAMS,
    WORDS,
    World,
    quote,
    text_body,
)

CATEGORY = "structured"
_WORDS_OK = tuple(
    x for x in WORDS if x != "signal"
)  # "signal" is a held-out skill's word (processes-signal-daemon)
_BASE_ACCOUNTS = frozenset({"sync", "daemon", "backup", "mail", "news", "proxy", "list", "games", "man"})

# ---- the checker library, embedded in every check ---------------------------------------------------------------
# argv[1] is the JSON spec. ``fail`` prints why (the gate shows it). Parsers read files as a program would.
_LIB = r'''
import configparser, csv, hashlib, io, json, os, pwd, re, sqlite3, stat, sys
spec = json.loads(sys.argv[1])


def fail(why):
    print(why)
    sys.exit(1)


def text(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        fail(f"cannot read {path}")


def md5(path):
    try:
        with open(path, "rb") as fh:
            return hashlib.md5(fh.read()).hexdigest()
    except OSError:
        return None


def common():
    for path, digest in spec.get("same", {}).items():
        if md5(path) != digest:
            fail(f"{path} must stay as it was")
    for path, (owner, mode) in spec.get("owned", {}).items():
        try:
            st = os.stat(path)
        except OSError:
            fail(f"{path} is missing")
        if pwd.getpwuid(st.st_uid).pw_name != owner:
            fail(f"{path} no longer belongs to {owner}")
        if stat.S_IMODE(st.st_mode) != mode:
            fail(f"{path} has mode {oct(stat.S_IMODE(st.st_mode))}, want {oct(mode)}")


def number(value):
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def same_cell(a, b, tol=0.0):
    a, b = str(a).strip(), str(b).strip()
    if a == b:
        return True
    x, y = number(a), number(b)
    return x is not None and y is not None and abs(x - y) <= max(tol, 1e-6 * max(1.0, abs(y)))


def same_rows(got, want, tol=0.0):
    return len(got) == len(want) and all(
        len(g) == len(w) and all(same_cell(x, y, tol) for x, y in zip(g, w)) for g, w in zip(got, want)
    )


def csv_rows(path, delimiter=","):
    rows = list(csv.reader(io.StringIO(text(path)), delimiter=delimiter))
    return [[c.strip() for c in r] for r in rows if r and any(c.strip() for c in r)]


def want_csv(path, rows, ordered=True, tol=0.0):
    got = csv_rows(path)
    if not got:
        fail(f"{path} is empty")
    if [c.lower() for c in got[0]] != [c.lower() for c in rows[0]]:
        fail(f"{path}: header is {got[0]}, want {rows[0]}")
    body, want = got[1:], rows[1:]
    if not ordered:
        body, want = sorted(body), sorted(want)
    if not same_rows(body, want, tol):
        fail(f"{path}: rows are {body}, want {want}")


def load_json(path):
    try:
        return json.loads(text(path))
    except ValueError:
        fail(f"{path} is not valid JSON")


def json_lines(path):
    out = []
    for line in text(path).splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                fail(f"{path}: a line is not JSON: {line[:80]}")
    return out


def _yaml_scalar(v):
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    if v.startswith("[") and v.endswith("]"):
        inner = v[1:-1].strip()
        return [_yaml_scalar(x) for x in inner.split(",")] if inner else []
    if v in ("true", "True", "yes"):
        return True
    if v in ("false", "False", "no"):
        return False
    if v in ("null", "~", ""):
        return None
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    if re.fullmatch(r"-?\d+\.\d+", v):
        return float(v)
    return v


def _yaml_strip(raw):
    quote = None
    for i, ch in enumerate(raw):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or raw[i - 1] in " \t"):
            return raw[:i].rstrip()
    return raw.rstrip()


def yaml_load(body):
    """The block subset of YAML these configs use: nested mappings, lists of scalars or of mappings, flow lists."""
    lines = []
    for raw in body.splitlines():
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            fail("a tab in the indentation")
        s = _yaml_strip(raw)
        if s.strip() and s.strip() != "---":
            lines.append((len(s) - len(s.lstrip()), s.strip()))
    pos = [0]

    def block(indent):
        if lines[pos[0]][1].startswith("- ") or lines[pos[0]][1] == "-":
            return seq(indent)
        return mapping(indent)

    def pair(t, indent, out):
        key, sep, rest = t.partition(":")
        key = key.strip().strip("\"'")
        if not sep or (rest and not rest.startswith(" ")):
            fail(f"not a mapping line: {t!r}")
        if key in out:
            fail(f"duplicate key {key!r}")
        pos[0] += 1
        if rest.strip():
            out[key] = _yaml_scalar(rest)
        elif pos[0] < len(lines) and (
            lines[pos[0]][0] > indent or (lines[pos[0]][0] == indent and lines[pos[0]][1].startswith("- "))
        ):
            out[key] = block(lines[pos[0]][0])
        else:
            out[key] = None

    def mapping(indent):
        out = {}
        while pos[0] < len(lines) and lines[pos[0]][0] == indent and not lines[pos[0]][1].startswith("- "):
            pair(lines[pos[0]][1], indent, out)
        if pos[0] < len(lines) and lines[pos[0]][0] > indent:
            fail(f"bad indentation at {lines[pos[0]][1]!r}")
        return out

    def seq(indent):
        out = []
        while pos[0] < len(lines) and lines[pos[0]][0] == indent and lines[pos[0]][1].startswith("-"):
            item = lines[pos[0]][1][1:].strip()
            if re.match(r"^[\w\"'.-]+:( |$)", item):
                inner = indent + 2
                lines[pos[0]] = (inner, item)
                out.append(mapping(inner))
            else:
                pos[0] += 1
                out.append(_yaml_scalar(item))
        return out

    if not lines:
        return {}
    doc = block(lines[0][0])
    if pos[0] != len(lines):
        fail(f"bad indentation at {lines[pos[0]][1]!r}")
    return doc


def ini_load(path):
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str
    try:
        parser.read_string(text(path))
    except configparser.Error as exc:
        fail(f"{path} is not a valid INI file: {str(exc).splitlines()[0]}")
    return {s: dict(parser.items(s, raw=True)) for s in parser.sections()}


def toml_load(path):
    import tomllib
    try:
        return tomllib.loads(text(path))
    except tomllib.TOMLDecodeError as exc:
        fail(f"{path} is not valid TOML: {exc}")


def db_rows(db, sql):
    if not os.path.isfile(db):
        fail(f"no database {db}")
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        return [list(r) for r in con.execute(sql)]
    except sqlite3.Error as exc:
        fail(f"{db}: {exc}")
'''


def _check(spec: object, code: str) -> str:
    """A check: the library, then ``code``; the spec travels as argv[1]."""
    return (
        "#!/bin/bash\n"
        f"python3 - {quote(json.dumps(spec, sort_keys=True))} <<'PY'\n{_LIB.strip()}\n\ncommon()\n"
        f"{code.strip()}\nPY\n"
    )


def _md5(body: str) -> str:
    import hashlib

    return hashlib.md5(body.encode()).hexdigest()


def _f(w: World, template: str, **values: object) -> str:
    """A spun fragment for inside a sentence (not capitalised)."""
    return w.spin(template, capitalize=False, **values)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


# ---- where a task happens -------------------------------------------------------------------------------------------
@dataclass
class Site:
    """The user, the folder the data lives in, where the shell starts, and who owns the data files."""

    user: Literal["operator", "root"]
    folder: str
    wd: str | None  # None: the user's home
    owner: str
    mode: int
    app: str
    setup: list[str] = field(default_factory=list)

    @property
    def home(self) -> str:
        return "/root" if self.user == "root" else HOME

    @property
    def start(self) -> str:
        return self.wd or self.home

    def sh(self, path: str) -> str:
        """How a reference writes ``path``: relative when inside the start folder, else absolute."""
        if path.startswith(self.start + "/"):
            path = posixpath.relpath(path, self.start)
        return path if all(c.isalnum() or c in "./_+-" for c in path) else quote(path)

    def say(self, w: World, path: str, kind: str = "file") -> str:
        """How the instruction names ``path``: relative to the start folder when inside it, else a full path."""
        if path.startswith(self.start + "/"):
            rel = posixpath.relpath(path, self.start)
            return w.pick((rel, f"./{rel}", rel))
        if path.startswith(HOME + "/") and self.user == "operator":
            return w.path_ref(path, kind)
        return path

    def prepare(self, paths: Sequence[str] = ()) -> list[str]:
        """Setup lines: the service account, the folders, the owner and mode of the data files ``paths``."""
        out = []
        if self.owner not in ("root", "operator"):
            out.append(
                f"id -u {self.owner} >/dev/null 2>&1 || useradd -r -M -d {self.folder} -s /usr/sbin/nologin "
                f"{self.owner}"
            )
        inside = self.wd is None or self.wd == self.folder or self.folder.startswith(self.wd + "/")
        folders = [self.folder] + ([] if inside or self.wd is None else [self.wd])
        out.append("mkdir -p " + " ".join(quote(f) for f in folders))
        if self.owner != "root":
            out.append(f"chown -R {self.owner}:{self.owner} " + " ".join(quote(f) for f in folders))
        if paths and self.mode != 0o644:
            out.append(f"chmod {self.mode:o} " + " ".join(quote(p) for p in paths))
        return out + self.setup

    def owned(self, *paths: str) -> dict[str, list[object]]:
        """The ``owned`` check spec for files changed in place: owner and mode as they were."""
        return {p: [self.owner, self.mode] for p in paths}


def _account(name: str) -> str:
    return f"{name}d" if name in _BASE_ACCOUNTS else name


def _site(w: World, kind: str) -> Site:
    """Draw the environment: ``data`` files, ``config`` files or a ``db``; root about half the time."""
    app = w.unique(lambda: w.pick(PROJECTS + SERVICES))
    proj = f"{HOME}/{w.pick(('projects', 'src', 'work', 'code'))}/{app}"
    roots = {
        "data": [
            f"/srv/{app}/data",
            f"/var/lib/{app}",
            f"/srv/{app}/exports",
            f"/opt/{app}/data",
            "/app/data",
        ],
        "config": [
            f"/etc/{app}",
            f"/opt/{app}/etc",
            f"/srv/{app}/config",
            "/app/config",
            f"/opt/{app}/config",
        ],
        "db": [f"/var/lib/{app}", f"/srv/{app}/db", "/app/db", f"/opt/{app}/var"],
    }[kind]
    homes = {
        "data": [f"{proj}/data", f"{HOME}/reports/{app}", f"{proj}/exports"],
        "config": [f"{proj}/config", f"{HOME}/.config/{app}", f"{proj}/deploy"],
        "db": [f"{proj}/db", f"{proj}/var", f"{HOME}/data/{app}"],
    }[kind]
    user: Literal["operator", "root"] = "root" if w.chance(0.5) else "operator"
    if user == "root":
        folder = w.pick(roots)
        owner = (
            w.pick(("root", _account(app), _account(app))) if folder.startswith(("/var", "/srv")) else "root"
        )
        mode = w.pick((0o640, 0o644, 0o600)) if owner != "root" else w.pick((0o644, 0o644, 0o600))
        wd = w.pick((folder, folder, posixpath.dirname(folder), None))
    else:
        shared = w.chance(0.35)
        folder = w.pick([r for r in roots if not r.startswith("/etc")]) if shared else w.pick(homes)
        owner, mode = "operator", w.pick((0o644, 0o644, 0o664, 0o600))
        wd = w.pick((folder, folder, posixpath.dirname(folder), None if not shared else folder))
    if wd in ("/", "/var", "/var/lib", "/srv", "/opt", "/etc", f"{HOME}/.config", f"{HOME}/reports"):
        wd = folder
    elif wd == f"{HOME}/data":
        wd = None
    w.note(folder, app)
    return Site(user=user, folder=folder, wd=wd, owner=owner, mode=mode, app=app)


def _here(w: World, site: Site) -> str:
    """How the instruction says 'the data folder' (``here`` when the shell starts in it)."""
    if site.wd == site.folder:
        return w.pick(("here", "in this folder", "in the current directory"))
    return "in " + site.say(w, site.folder, "folder")


def _look(w: World, site: Site, path: str, tool: str = "cat") -> str:
    p = site.sh(path)
    options = {
        "cat": (f"cat {p}", f"head -n 30 {p}", f"cat -n {p}"),
        "json": (f"jq . {p}", f"cat {p}", f"python3 -m json.tool {p}"),
        "csv": (f"head -n 5 {p}", f"cat {p}", f"column -s, -t < {p}"),
    }[tool]
    return w.pick(options)


def _rewrite(w: World, site: Site, path: str, produce: Callable[[str], str], tag: str = "new") -> list[str]:
    """Commands that replace ``path`` with what ``produce(input_path)`` prints, keeping its owner and mode.
    Drawn among: a temp file moved over it (then owner and mode restored), ``mktemp`` copied back with ``cat``,
    a file in /tmp copied over it, or a backup that the new content is computed from."""
    p = site.sh(path)
    how = w.pick(("mv", "mktemp", "cp", "bak"))
    if how == "mv":
        out = [f"{produce(p)} > {p}.{tag} && mv {p}.{tag} {p}"]
        fix = []
        if site.owner != site.user:
            fix.append(f"chown {site.owner}:{site.owner} {p}")
        if site.mode != 0o644:
            fix.append(f"chmod {site.mode:o} {p}")
        if fix:
            out += [" && ".join(fix)] if w.chance(0.5) else fix
        return out
    if how == "mktemp":
        return [f'tmp=$(mktemp) && {produce(p)} > "$tmp" && cat "$tmp" > {p} && rm -f "$tmp"']
    if how == "cp":
        scratch = f"/tmp/{posixpath.basename(path)}.{tag}"
        return [f"{produce(p)} > {scratch}", f"cp {scratch} {p}"]
    return [f"cp -p {p} {p}.bak", f"{produce(p + '.bak')} > {p}"]


def _on_or_after(i: int, day: str, row: list[str]) -> bool:
    return row[i] >= day


def _before(i: int, day: str, row: list[str]) -> bool:
    return row[i] < day


def _awk_run(prog: str, src: str) -> str:
    return f"awk {quote(prog)} {src}"


def _py_heredoc(w: World, body: str) -> list[str]:
    """A python3 program as a reference runs it: a heredoc, or a script file written then run."""
    if w.chance(0.6):
        return [f"python3 - <<'EOF'\n{body.strip()}\nEOF"]
    script = w.pick(("/tmp/fix.py", "/tmp/edit.py", "/tmp/convert.py"))
    return [f"cat > {script} <<'EOF'\n{body.strip()}\nEOF", f"python3 {script}"]


# ---- config trees: one drawn document, rendered as JSON, YAML, TOML or INI --------------------------------------------
Scalar = str | int | bool | float
_SECTIONS: dict[str, tuple[tuple[str, Callable[[World], Scalar]], ...]] = {
    "server": (
        ("host", lambda w: w.pick(("0.0.0.0", "127.0.0.1", "localhost"))),
        ("workers", lambda w: w.randint(2, 16)),
        ("timeout_s", lambda w: w.pick((10, 15, 30, 60))),
        ("keepalive", lambda w: w.chance(0.5)),
        ("max_body_kb", lambda w: w.pick((256, 512, 1024, 4096))),
    ),
    "database": (
        ("host", lambda w: w.pick(("db.internal", "10.0.4.12", "pg-primary", "localhost"))),
        ("name", lambda w: w.pick(_WORDS_OK)),
        ("user", lambda w: w.pick(FIRST_NAMES)),
        ("pool_size", lambda w: w.randint(2, 40)),
        ("timeout_s", lambda w: w.pick((3, 5, 10, 20))),
    ),
    "cache": (
        ("enabled", lambda w: w.chance(0.6)),
        ("ttl_s", lambda w: w.pick((60, 300, 600, 3600))),
        ("backend", lambda w: w.pick(("memory", "redis", "memcached"))),
        ("max_items", lambda w: w.pick((1000, 5000, 20000))),
    ),
    "logging": (
        ("level", lambda w: w.pick(("info", "warning", "debug"))),
        ("format", lambda w: w.pick(("json", "text", "logfmt"))),
        ("file", lambda w: f"/var/log/{w.pick(SERVICES)}.log"),
        ("enabled", lambda w: w.chance(0.8)),
    ),
    "queue": (
        ("broker", lambda w: w.pick(("amqp://mq.internal", "redis://cache.internal/2", "sqs"))),
        ("prefetch", lambda w: w.randint(1, 64)),
        ("retries", lambda w: w.randint(0, 9)),
        ("timeout_s", lambda w: w.pick((30, 45, 90, 120))),
    ),
    "auth": (
        ("enabled", lambda w: w.chance(0.7)),
        ("issuer", lambda w: f"https://sso.{w.pick(_WORDS_OK)}.example"),
        ("token_ttl_s", lambda w: w.pick((900, 1800, 3600))),
        ("realm", lambda w: w.pick(TEAMS)),
    ),
    "metrics": (
        ("enabled", lambda w: w.chance(0.5)),
        ("interval_s", lambda w: w.pick((10, 15, 30, 60))),
        ("prefix", lambda w: w.pick(_WORDS_OK)),
        ("host", lambda w: w.pick(("statsd.internal", "127.0.0.1"))),
    ),
    "storage": (
        ("path", lambda w: f"/var/lib/{w.pick(SERVICES)}/blobs"),
        ("quota_mb", lambda w: w.pick((512, 2048, 10240))),
        ("backend", lambda w: w.pick(("local", "s3", "nfs"))),
        ("timeout_s", lambda w: w.pick((5, 15, 30))),
    ),
}
# replacement values a task asks for, per key (a different value of the same type is drawn when none fits)
_NEW_VALUES: dict[str, tuple[Scalar, ...]] = {
    "level": ("debug", "warning", "error", "info"),
    "format": ("json", "text"),
    "backend": ("redis", "memory", "s3", "local"),
    "host": ("db-replica.internal", "10.0.9.3", "0.0.0.0", "127.0.0.1"),
}
Tree = dict[str, dict[str, Scalar]]


def _tree(w: World, k: int) -> Tree:
    """``k`` sections of a config, at least two of them sharing a key name (the trap of a global edit)."""
    for _ in range(50):
        names = w.sample(sorted(_SECTIONS), k)
        keys = [key for n in names for key, _ in _SECTIONS[n]]
        if len(keys) != len(set(keys)):
            break
    tree: Tree = {}
    for n in names:
        pool = _SECTIONS[n]
        chosen = [x for x in pool if x[0] in {"timeout_s", "enabled", "host", "backend"}] + w.sample(
            [x for x in pool if x[0] not in {"timeout_s", "enabled", "host", "backend"}],
            min(2, len(pool) - 1),
        )
        chosen = [x for x in pool if x in chosen]
        tree[n] = {key: make(w) for key, make in chosen}
    return tree


def _new_value(w: World, old: Scalar, key: str) -> Scalar:
    if isinstance(old, bool):
        return not old
    if isinstance(old, int):
        for _ in range(20):
            new = w.pick((old * 2, old + w.randint(1, 20), max(1, old // 2), old * 3, w.randint(1, 500)))
            if new != old:
                return new
        return old + 1
    pool = [v for v in _NEW_VALUES.get(key, ()) if v != old]
    return w.pick(pool) if pool else f"{old}-{w.pick(_WORDS_OK)}"


def _shared_key(tree: Tree) -> list[tuple[str, str]]:
    """(section, key) pairs whose key name appears in another section too."""
    seen: dict[str, int] = {}
    for sec in tree.values():
        for key in sec:
            seen[key] = seen.get(key, 0) + 1
    return [(s, k) for s, sec in tree.items() for k in sec if seen[k] > 1]


def _lit(value: Scalar, style: str) -> str:
    """A value as written in ``style`` (json, yaml, toml, ini)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if style in ("json", "toml"):
        return json.dumps(value)
    if style == "yaml" and (":" in value or value.startswith(("{", "[", "*", "&", "!", "@"))):
        return json.dumps(value)
    return value


def _say(value: Scalar) -> str:
    """A value as an instruction gives it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# =====================================================================================================================
# 1. structured-json-set-path
_JSON_FILES = ("config.json", "settings.json", "app.json", "service.json", "runtime.json")


@family(
    "structured-json-set-path",
    CATEGORY,
    "set values at nested paths of a JSON document in place (scalars, an array element chosen by a field, a list "
    "append), keeping every other key, its owner and mode",
)
def json_set_path(w: World) -> Draft:
    site = _site(w, w.pick(("config", "data")))
    cfg = _tree(w, w.randint(3, 4))
    app = site.app
    upstreams = [
        {"name": s, "url": f"http://{s}.internal", "weight": w.randint(1, 9), "enabled": True}
        for s in w.sample(SERVICES, w.randint(2, 4))
    ]
    doc: dict[str, Any] = {"service": app, **cfg}
    if w.chance(0.6):
        doc["upstreams"] = upstreams
    if w.chance(0.5):
        doc["allowed_origins"] = [f"https://{x}.example.com" for x in w.sample(_WORDS_OK, 2)]
    want: dict[str, Any] = json.loads(json.dumps(doc))
    kinds = ["scalar", "scalar", "shared", "add"]
    if "upstreams" in doc:
        kinds += ["element", "element"]
    if "allowed_origins" in doc:
        kinds.append("append")
    chosen = w.sample(kinds, w.pick((1, 1, 2, 2, 3)))
    asks: list[str] = []
    jq_parts: list[str] = []
    py_parts: list[str] = []
    sections = [k for k, v in doc.items() if isinstance(v, dict)]
    touched: set[tuple[str, str]] = set()
    for kind in chosen:
        if kind in ("scalar", "shared", "add"):
            every = [(s, k) for s in sections for k in want[s]]
            pool = [x for x in (_shared_key(cfg) if kind == "shared" else every) if x not in touched] or every
            sec, key = w.pick(pool)
            if kind == "add":
                key = w.pick(("retry_backoff_s", "max_idle", "region", "compress", "label"))
                while key in want[sec]:
                    key = key + "_2"
                extra: dict[str, Scalar] = {
                    "retry_backoff_s": w.randint(1, 30),
                    "max_idle": w.randint(2, 20),
                    "region": w.pick(("eu-west-1", "us-east-2", "ap-south-1")),
                    "compress": True,
                    "label": w.pick(TEAMS),
                }
                new: Scalar = extra.get(key.removesuffix("_2"), w.randint(1, 9))
            else:
                new = _new_value(w, want[sec][key], key)
            touched.add((sec, key))
            want[sec][key] = new
            w.note(sec, key, _say(new))
            typ = (
                "a number"
                if isinstance(new, int) and not isinstance(new, bool)
                else "a boolean"
                if isinstance(new, bool)
                else "a string"
            )
            asks.append(
                _f(
                    w,
                    "{set|change} {p} to {v}" if kind != "add" else "add {p} = {v} (a new key)",
                    p=f".{sec}.{key}" if w.chance(0.5) else f"{sec}.{key}",
                    v=json.dumps(new),
                )
                + (
                    " " + _f(w, "({t}, not a quoted string)", t=typ)
                    if typ != "a string" and w.chance(0.4)
                    else ""
                )
            )
            jq_parts.append(f".{sec}.{key} = {json.dumps(new)}")
            py_parts.append(f"doc[{sec!r}][{key!r}] = {new!r}")
        elif kind == "element":
            item = w.pick(upstreams)
            element_changes: tuple[tuple[str, Scalar], ...] = (
                ("weight", w.randint(10, 50)),
                ("enabled", False),
                ("url", f"https://{item['name']}.{w.pick(_WORDS_OK)}.internal"),
            )
            field_name, new_v = w.pick(element_changes)
            for u in want["upstreams"]:
                if u["name"] == item["name"]:
                    u[field_name] = new_v
            w.note(item["name"], field_name, _say(new_v))
            asks.append(
                _f(
                    w,
                    "{in the upstreams list, set {f} of the entry named {n} to {v}|the upstream {n} gets {f} {v}}",
                    f=field_name,
                    n=item["name"],
                    v=json.dumps(new_v),
                )
            )
            jq_parts.append(
                f'(.upstreams[] | select(.name == "{item["name"]}") | .{field_name}) = {json.dumps(new_v)}'
            )
            py_parts.append(
                f"for u in doc['upstreams']:\n    if u['name'] == {item['name']!r}:\n        u[{field_name!r}] = {new_v!r}"
            )
        else:
            origin = f"https://{w.pick(_WORDS_OK)}-{w.randint(2, 9)}.example.com"
            want["allowed_origins"].append(origin)
            w.note(origin)
            asks.append(_f(w, "{append|add} {o} to the end of allowed_origins", o=json.dumps(origin)))
            jq_parts.append(f'.allowed_origins += ["{origin}"]')
            py_parts.append(f"doc['allowed_origins'].append({origin!r})")
    name = w.pick(_JSON_FILES)
    path = f"{site.folder}/{name}"
    body = json.dumps(doc, indent=w.pick((2, 4))) + "\n"
    files = {path: body}
    near = {
        f"{path}.bak": json.dumps(doc, indent=2) + "\n",
        f"{site.folder}/{name.replace('.json', '.example.json')}": json.dumps(
            {**doc, "service": "example"}, indent=2
        )
        + "\n",
    }
    for p in w.sample(sorted(near), w.randint(1, 2)):
        files[p] = near[p]
    hidden = w.chance(0.25)
    other = f"{site.folder}/{w.pick(('features.json', 'clients.json', 'limits.json'))}"
    if hidden:
        files[other] = (
            json.dumps({"generated": True, "items": [w.pick(_WORDS_OK) for _ in range(3)]}, indent=2) + "\n"
        )
    ask = w.clauses(asks)
    where = site.say(w, path)
    if hidden:
        where = _f(w, "the JSON config {h} that configures the {s} service", h=_here(w, site), s=app)
    task = w.phrase(
        "In {where}, {ask}. Keep every other key and value as it is.",
        "Goal: after your edit, {where} says {ask_e}; every other value reads as before.",
        "Ticket: {app} needs a config change. Edit {where} in place: {ask}. Nothing else in the file may change.",
        "can you patch {where}? {ask_c} - the rest of the JSON stays as is",
        "Edit {where}: {ask}.",
        "Please update the JSON config {where}: {ask}. The service reads it as JSON, so it must stay valid.",
        "What needs to change in {where}: {ask}. Edit the file itself; don't touch the backup or example copies.",
        "The {app} service should start with new settings: {ask}. They live in {where}; change them there and "
        "leave the other settings alone.",
        "I'd like {where} adjusted: {ask}. Values keep their JSON types.",
        where=where,
        ask=ask,
        ask_c=_cap(ask),
        ask_e=ask.replace("set ", "").replace("change ", "").replace(" to ", " = "),
        app=app,
    )
    spec = {
        "path": path,
        "want": want,
        "same": {p: _md5(b) for p, b in files.items() if p != path},
        "owned": site.owned(path),
    }
    check = _check(
        spec, 'if load_json(spec["path"]) != spec["want"]:\n    fail("the document is not as asked")'
    )
    p = site.sh(path)
    expr = " | ".join(jq_parts)
    how = w.pick(("jq", "jq", "jqflags", "python", "python"))
    ref: list[str] = []
    if hidden:
        ref.append(
            w.pick(
                (
                    f'grep -l \'"service": "{app}"\' {site.sh(site.folder)}/*.json',
                    f"ls -l {site.sh(site.folder)}",
                )
            )
        )
    ref.append(_look(w, site, path, "json"))
    if how.startswith("jq"):
        flags = w.pick(("--indent 4 ", "-S ", "--tab ")) if how == "jqflags" else ""
        ref += _rewrite(w, site, path, lambda src: f"jq {flags}{quote(expr)} {src}")
    else:
        code = "\n".join(py_parts)
        ref += _py_heredoc(
            w,
            f"import json\nwith open({p!r}) as fh:\n    doc = json.load(fh)\n{code}\n"
            f"with open({p!r}, 'w') as fh:\n    json.dump(doc, fh, indent={w.pick((2, 4))})\n    fh.write('\\n')\n",
        )
    ref.append(f"jq -c . {p}" if w.chance(0.5) else f"jq '{w.pick(['.' + s for s in sections])}' {p}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=min(4, 1 + len(chosen) + hidden),
        files=files,
        setup=site.prepare([path]),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 2. structured-json-prune-array
_RECORD_KINDS = (
    ("jobs", "jobs", ("nightly", "export", "reindex", "purge", "sync", "digest", "backup", "thumbs")),
    ("users", "accounts", tuple(FIRST_NAMES)),
    ("feeds", "feeds", tuple(_WORDS_OK)),
    ("hosts", "inventory", tuple(f"{x}-0{i}" for x in ("web", "db", "cache", "batch") for i in range(1, 8))),
    ("tokens", "api_tokens", tuple(f"tok_{x}" for x in _WORDS_OK)),
)


def _re_escape(text: str) -> str:
    """``text`` as a literal inside a Perl or extended regex."""
    return "".join("\\" + c if c in r".^$*+?()[]{}|\/" else c for c in text)


def _iso(w: World) -> str:
    return f"{w.date():%Y-%m-%d}"


@family(
    "structured-json-prune-array",
    CATEGORY,
    "delete the entries of a JSON array (inside a larger document) that match a condition, keeping the rest of "
    "the document and the order of the kept entries",
)
def json_prune_array(w: World) -> Draft:
    site = _site(w, "data")
    noun, key, names = w.pick(_RECORD_KINDS)
    n = w.randint(6, 11)
    records: list[dict[str, Any]] = []
    n = min(n, len(names))
    for name in w.sample(names, n):
        records.append(
            {
                "name": name,
                "owner": w.pick(TEAMS[:5]),
                "active": w.chance(0.65),
                "last_seen": _iso(w),
                "size_mb": w.randint(1, 900),
                "tags": w.sample(("prod", "legacy", "deprecated", "eu", "internal", "beta"), w.randint(0, 2)),
            }
        )
    nested = w.chance(0.5)
    doc: dict[str, Any] = {"version": w.randint(1, 5), "generated": _iso(w)}
    if nested:
        doc["spec"] = {"owner": w.pick(TEAMS), key: records}
        jpath, pypath, where_say = f".spec.{key}", f"doc['spec']['{key}']", f".spec.{key}"
    else:
        doc[key] = records
        jpath, pypath, where_say = f".{key}", f"doc['{key}']", f".{key}"

    # a condition that drops some but not all entries
    def pick_condition() -> tuple[str, str, str, Callable[[dict[str, Any]], bool]]:
        kind = w.pick(("inactive", "before", "small", "big", "owner", "tag", "names"))
        if kind == "inactive":
            return "inactive", ".active == false", "not r['active']", lambda r: not r["active"]
        if kind == "before":
            day = sorted(r["last_seen"] for r in records)[w.randint(1, n - 2)]
            w.note(day)
            return (
                _f(w, "{last seen before {d}|whose last_seen is earlier than {d}}", d=day),
                f'.last_seen < "{day}"',
                f"r['last_seen'] < {day!r}",
                lambda r: r["last_seen"] < day,
            )
        if kind in ("small", "big"):
            cut = sorted(r["size_mb"] for r in records)[w.randint(1, n - 2)]
            w.note(cut)
            if kind == "small":
                return (
                    _f(w, "{with size_mb under {c}|smaller than {c} MB (size_mb)}", c=cut),
                    f".size_mb < {cut}",
                    f"r['size_mb'] < {cut}",
                    lambda r: r["size_mb"] < cut,
                )
            return (
                _f(w, "{with size_mb above {c}|over {c} MB (size_mb greater than {c})}", c=cut),
                f".size_mb > {cut}",
                f"r['size_mb'] > {cut}",
                lambda r: r["size_mb"] > cut,
            )
        if kind == "owner":
            who = w.pick([r["owner"] for r in records])
            w.note(who)
            return (
                _f(w, "{owned by {o}|whose owner is {o}}", o=who),
                f'.owner == "{who}"',
                f"r['owner'] == {who!r}",
                lambda r: r["owner"] == who,
            )
        if kind == "tag":
            tag = w.pick(("deprecated", "legacy"))
            for r in w.sample(records, 2):
                if tag not in r["tags"]:
                    r["tags"].append(tag)
            return (
                _f(w, '{tagged "{t}"|carrying the {t} tag}', t=tag),
                f'.tags | index(["{tag}"])',
                f"{tag!r} in r['tags']",
                lambda r: tag in r["tags"],
            )
        gone = w.sample([r["name"] for r in records], w.randint(1, 3))
        w.note(*gone)
        return (
            _f(w, "named {g}", g=", ".join(gone)),
            " or ".join(f'.name == "{g}"' for g in gone),
            f"r['name'] in {gone!r}",
            lambda r: r["name"] in gone,
        )

    for _ in range(20):
        cond_say, jq_cond, py_cond, pred = pick_condition()
        if 0 < sum(map(pred, records)) < n:
            break
    kept = [r for r in records if not pred(r)]
    want = json.loads(json.dumps(doc))
    if nested:
        want["spec"][key] = kept
    else:
        want[key] = kept
    fname = w.pick((f"{noun}.json", f"{noun}-registry.json", f"{key}.json", "state.json"))
    path = f"{site.folder}/{fname}"
    files = {path: json.dumps(doc, indent=2) + "\n"}
    files[f"{site.folder}/{noun}-{w.randint(2019, 2022)}.json"] = json.dumps(doc, indent=2) + "\n"
    in_place = w.chance(0.6)
    out = (
        path
        if in_place
        else f"{site.folder}/{fname.replace('.json', '')}-{w.pick(('pruned', 'clean', 'current'))}.json"
    )
    dest = (
        _f(w, "{in place|in the file itself}")
        if in_place
        else _f(
            w,
            "{writing the result to|saving the pruned document as} {o} (the original stays as it is)",
            o=site.say(w, out),
        )
    )
    src = site.say(w, path)
    task = w.phrase(
        "Remove every entry of {arr} in {src} {cond}, {dest}. Everything else in the document stays.",
        "Goal: no entry {cond} is left in {arr} of {src} ({dest}); the kept ones keep their order.",
        "Ticket: {src} still lists {noun} {cond}. Delete those entries from {arr}, {dest}; keep the other entries "
        "in their order.",
        "clean up {src} - drop the {noun} {cond} from {arr}, {dest}",
        "{Prune|Trim} {arr} of {src}: every entry {cond} goes, the rest stays in order. {dest_c}.",
        "Could you delete the {noun} {cond} from {src}? They're in the {arr} array. {dest_c}.",
        "The {arr} array in {src} should only keep entries that are not {cond}. {dest_c}; the other keys of the "
        "document do not change.",
        "Only the {noun} that are not {cond} belong in {src} ({arr}). Make it so, {dest}.",
        "Housekeeping on {src}: entries {cond} in {arr} are obsolete. Take them out ({dest}) without touching "
        "anything else.",
        arr=where_say,
        src=src,
        cond=cond_say,
        dest=dest,
        dest_c=_cap(dest),
        noun=noun,
    )
    spec = {
        "path": out,
        "want": want,
        "same": {p: _md5(b) for p, b in files.items() if p != path or not in_place},
        "owned": site.owned(path) if in_place else {},
    }
    check = _check(
        spec, 'if load_json(spec["path"]) != spec["want"]:\n    fail("the document is not as asked")'
    )
    p, o = site.sh(path), site.sh(out)
    how = w.pick(("del", "map", "python", "python", "rebuild"))
    expr = {
        "del": f"del({jpath}[] | select({jq_cond}))",
        "map": f"{jpath} |= map(select(({jq_cond}) | not))",
        "rebuild": f"{jpath} = [{jpath}[] | select(({jq_cond}) | not)]",
    }.get(how, "")
    ref = [_look(w, site, path, "json")]
    if w.chance(0.3) and how != "python":
        ref.append(f"jq -c '{jpath}[] | select({jq_cond}) | .name' {p}")
    if how == "python":
        ref += _py_heredoc(
            w,
            f"import json\nwith open({p!r}) as fh:\n    doc = json.load(fh)\n"
            f"{pypath} = [r for r in {pypath} if not ({py_cond})]\n"
            f"with open({o!r}, 'w') as fh:\n    json.dump(doc, fh, indent=2)\n",
        )
    elif in_place:
        ref += _rewrite(w, site, path, lambda s: f"jq {quote(expr)} {s}", "pruned")
    else:
        ref.append(f"jq {w.pick(('', '--indent 4 ', '-S '))}{quote(expr)} {p} > {o}")
    ref.append(f"jq '{jpath} | length' {o}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2 if not nested else 3,
        files=files,
        setup=site.prepare([path]),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 3. structured-jsonl-to-csv
@family(
    "structured-jsonl-to-csv",
    CATEGORY,
    "convert JSON lines to a CSV with a header and chosen columns, nested fields flattened, missing fields empty "
    "and commas quoted",
)
def jsonl_to_csv(w: World) -> Draft:
    site = _site(w, "data")
    kind = w.pick(("orders", "events", "tickets", "payments"))
    n = w.randint(4, 8)
    commas = w.chance(0.45)
    records: list[dict[str, Any]] = []
    for i in range(n):
        rec: dict[str, Any] = {
            "id": w.randint(1000, 9999) * 10 + i,
            "user": {"name": w.pick(FIRST_NAMES), "team": w.pick(TEAMS)},
            "amount": w.randint(100, 99999) / 100,
            "status": w.pick(("open", "paid", "shipped", "refunded", "failed")),
            "city": w.pick(CITIES),
        }
        if w.chance(0.6):
            rec["note"] = (
                f"{w.pick(_WORDS_OK)}, {w.pick(_WORDS_OK)}" if commas and w.chance(0.6) else w.pick(_WORDS_OK)
            )
        records.append(rec)
    if all("note" in r for r in records):
        del records[w.randint(0, n - 1)]["note"]
    if commas and not any("," in str(r.get("note", "")) for r in records):
        records[0]["note"] = f"{w.pick(_WORDS_OK)}, {w.pick(_WORDS_OK)}"
    fields = [
        ("id", "id"),
        ("user.name", "user"),
        ("user.team", "team"),
        ("amount", "amount"),
        ("status", "status"),
        ("city", "city"),
        ("note", "note"),
    ]
    chosen = [fields[0], *w.sample(fields[1:6], w.randint(2, 4))]
    if commas or w.chance(0.5):
        chosen.append(fields[6])
    if w.chance(0.3):
        chosen = w.shuffled(chosen)
    rename = w.chance(0.5)
    header = [h if rename else p for p, h in chosen]

    def get(rec: dict[str, Any], p: str) -> str:
        cur: Any = rec
        for part in p.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        return "" if cur is None else str(cur)

    rows = [header] + [[get(r, p) for p, _ in chosen] for r in records]
    src = f"{site.folder}/{w.pick((kind, f'{kind}-{w.randint(1, 28):02d}', f'{kind}_export'))}.jsonl"
    out = f"{site.folder}/{w.pick((kind, f'{kind}-report', f'{kind}_flat'))}.csv"
    files = {src: text_body([json.dumps(r) for r in records])}
    files[f"{src}.1"] = text_body([json.dumps(r) for r in records[: n // 2]])
    cols = ", ".join((f"{p} as {h}" if rename and p != h else p) for p, h in chosen)
    task = w.phrase(
        "Convert {src} (one JSON object per line) to CSV at {out}: columns {cols}, in that order, with a header "
        "row.{extra}",
        "Ticket: finance wants {kind} as a spreadsheet. Turn the JSON lines in {src} into {out} with the columns "
        "{cols} and a header line.{extra}",
        "need {src} as csv -> {out}. header + columns {cols}.{extra}",
        "Could you flatten {src} into a CSV file {out}? One row per record, columns {cols} (header first).{extra}",
        "{out} should be a CSV version of {src}: a header, then one line per JSON record with {cols}.{extra}",
        "Write {out} from {src}. Format: CSV with a header; columns {cols}.{extra}",
        "Export the {kind} in {src} to CSV ({out}). I only need {cols}, header included.{extra}",
        "How many of these {kind} are there? Let's see them in a spreadsheet: make {out} out of {src}, columns "
        "{cols}, with a header row.{extra}",
        src=site.say(w, src),
        out=site.say(w, out),
        cols=cols,
        kind=kind,
        extra=" "
        + w.clauses(
            [
                _f(w, "{A record without a field gets an empty cell|Missing fields stay empty}."),
                _f(
                    w,
                    "{Values containing a comma must be quoted|Quote fields that contain commas} so the CSV stays "
                    "valid.",
                )
                if commas
                else "",
            ],
            " ",
        ),
    )
    spec = {"out": out, "rows": rows, "same": {src: _md5(files[src])}}
    check = _check(spec, 'want_csv(spec["out"], spec["rows"])')
    s, o = site.sh(src), site.sh(out)
    jq_fields = ", ".join("(." + p + ' // "")' for p, _ in chosen)
    head_csv = ",".join(header)
    how = w.pick(("jqcsv", "jqcsv", "jqslurp", "python", "pythondict", "jqjoin" if not commas else "jqcsv"))
    ref = [w.pick((f"head -n 3 {s}", f"jq -c . {s} | head", f"wc -l {s}"))]
    if how == "jqcsv":
        style = w.pick(("echo", "group", "printf"))
        body = f"jq -r '[{jq_fields}] | @csv' {s}"
        if style == "echo":
            ref += [f"echo {quote(head_csv)} > {o}", f"{body} >> {o}"]
        elif style == "printf":
            ref += [f"printf '%s\\n' {quote(head_csv)} > {o}", f"{body} >> {o}"]
        else:
            ref.append(f"{{ echo {quote(head_csv)}; {body}; }} > {o}")
    elif how == "jqjoin":
        ref.append(f"(echo {quote(head_csv)}; jq -r '[{jq_fields}] | map(tostring) | join(\",\")' {s}) > {o}")
    elif how == "jqslurp":
        hdr = json.dumps(header)
        ref.append(f"jq -s -r '({hdr} | @csv), (.[] | [{jq_fields}] | @csv)' {s} > {o}")
    else:
        getter = (
            "def get(r, path):\n    for part in path.split('.'):\n        r = r.get(part) if isinstance(r, dict) "
            "else None\n    return '' if r is None else r\n"
        )
        paths = [p for p, _ in chosen]
        if how == "python":
            ref += _py_heredoc(
                w,
                f"import csv, json\n{getter}with open({s!r}) as src, open({o!r}, 'w', newline='') as dst:\n"
                f"    out = csv.writer(dst)\n    out.writerow({header!r})\n    for line in src:\n"
                f"        if line.strip():\n            rec = json.loads(line)\n"
                f"            out.writerow([get(rec, p) for p in {paths!r}])\n",
            )
        else:
            ref += _py_heredoc(
                w,
                f"import csv, json\n{getter}rows = [json.loads(l) for l in open({s!r}) if l.strip()]\n"
                f"with open({o!r}, 'w', newline='') as dst:\n"
                f"    out = csv.DictWriter(dst, fieldnames={header!r})\n    out.writeheader()\n"
                f"    for rec in rows:\n"
                f"        out.writerow({{h: get(rec, p) for h, p in zip({header!r}, {paths!r})}})\n",
            )
    ref.append(w.pick((f"cat {o}", f"head {o}", f"column -s, -t < {o}")))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if commas or rename else 2,
        files=files,
        setup=site.prepare(),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 4. structured-json-flatten-env
@family(
    "structured-json-flatten-env",
    CATEGORY,
    "flatten a nested JSON config into KEY=value lines (an env file with a prefix, or dotted properties)",
)
def json_flatten_env(w: World) -> Draft:
    site = _site(w, "config")
    cfg = _tree(w, w.randint(2, 4))
    doc: dict[str, Any] = {"name": site.app, **cfg}
    style = w.pick(("env", "env", "props"))
    prefix = w.pick((site.app.upper() + "_", "APP_", "")) if style == "env" else ""
    if style == "env":
        want = {f"{prefix}{s.upper()}_{k.upper()}": _say(v) for s, sec in cfg.items() for k, v in sec.items()}
        want[f"{prefix}NAME"] = site.app
    else:
        want = {f"{s}.{k}": _say(v) for s, sec in cfg.items() for k, v in sec.items()}
        want["name"] = site.app
    src = f"{site.folder}/{w.pick(_JSON_FILES)}"
    out = (
        f"{site.folder}/{w.pick(('.env', 'app.env', f'{site.app}.env', 'env.list'))}"
        if style == "env"
        else (
            f"{site.folder}/{w.pick(('application.properties', 'config.properties', f'{site.app}.properties'))}"
        )
    )
    files = {src: json.dumps(doc, indent=2) + "\n"}
    if w.chance(0.5):
        files[f"{site.folder}/{w.pick(('defaults.json', 'schema.json'))}"] = (
            json.dumps({"name": "x"}, indent=2) + "\n"
        )
    ex_sec = w.pick(sorted(cfg))
    ex_key = w.pick(sorted(cfg[ex_sec]))
    rule = (
        _f(
            w,
            "one line per setting, named {p}SECTION_KEY in upper case (so {s}.{k} becomes {e}), the top-level name "
            "as {p}NAME",
            p=prefix,
            s=ex_sec,
            k=ex_key,
            e=f"{prefix}{ex_sec.upper()}_{ex_key.upper()}",
        )
        if style == "env"
        else _f(
            w,
            "one line per setting, named section.key (so the value at .{e} is written {e}=...); the "
            "top-level name as name",
            e=f"{ex_sec}.{ex_key}",
        )
    )
    values = _f(w, "values unquoted, booleans as true/false")
    task = w.phrase(
        "Flatten {src} into {out}: {rule}; {values}.",
        "Goal: {out} carries the same settings as {src} ({rule}; {values}).",
        "Ticket: the container runtime wants {app}'s settings as KEY=value lines. Generate {out} from {src}: "
        "{rule}; {values}.",
        "can you turn the JSON config {src} into {out}? {rule_c}, {values}",
        "Write {out} with every setting of {src} as NAME=value - {rule}; {values}.",
        "Our launcher reads {out}, not JSON. Produce it from {src} ({rule}; {values}). Leave the JSON as is.",
        "{out} is missing. Build it out of {src}: {rule}; {values}.",
        "Could you export the settings in {src} to {out}? Format: {rule}; {values}.",
        "What we need in {out}: the contents of {src} flattened, {rule}; {values}.",
        src=site.say(w, src),
        out=site.say(w, out),
        rule=rule,
        rule_c=_cap(rule),
        values=values,
        app=site.app,
    )
    spec = {"out": out, "want": want, "same": {p: _md5(b) for p, b in files.items()}}
    check = _check(
        spec,
        """
got = {}
for line in text(spec["out"]).splitlines():
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    key, eq, value = line.partition("=")
    if not eq:
        fail(f"not a KEY=value line: {line!r}")
    key, value = key.strip(), value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\\"'":
        value = value[1:-1]
    if key in got:
        fail(f"{key} appears twice")
    got[key] = value
if got != spec["want"]:
    missing = sorted(set(spec["want"]) - set(got))
    extra = sorted(set(got) - set(spec["want"]))
    wrong = sorted(k for k in set(got) & set(spec["want"]) if got[k] != spec["want"][k])
    fail(f"missing {missing}, unexpected {extra}, wrong values {wrong}")
""",
    )
    s, o = site.sh(src), site.sh(out)
    how = w.pick(("paths", "entries", "python", "leaf"))
    ref = [_look(w, site, src, "json")]
    if style == "env":
        key_jq = f'"{prefix}" + ($p | map(ascii_upcase) | join("_"))'
        ent_jq = f'"{prefix}\\($s | ascii_upcase)_\\(.key | ascii_upcase)=\\(.value)"'
        top_jq = f'"{prefix}NAME=\\(.name)"'
        py_key = f"key = {prefix!r} + '_'.join(p).upper()"
    else:
        key_jq = '($p | join("."))'
        ent_jq = '"\\($s).\\(.key)=\\(.value)"'
        top_jq = '"name=\\(.name)"'
        py_key = "key = '.'.join(p)"
    raw = w.pick(("-r", "-r", "--raw-output"))
    sink = w.pick((f"> {o}", f"> {o}", f"| sort > {o}", f"| tee {o}"))
    if how == "paths":
        # not paths(scalars): its select() drops every key whose value is false
        ref.append(
            f'jq {raw} \'paths(type != "object" and type != "array") as $p '
            f'| "\\({key_jq})=\\(getpath($p))"\' {s} {sink}'
        )
    elif how == "leaf":
        ref.append(
            f"jq {raw} 'tostream | select(length == 2) | .[0] as $p | [{key_jq}, (.[1] | tostring)] | join(\"=\")' "
            f"{s} {sink}"
        )
    elif how == "entries":
        ref.append(
            f'jq {raw} \'{top_jq}, (to_entries[] | select(.value | type == "object") | .key as $s | .value '
            f"| to_entries[] | {ent_jq})' {s} {sink}"
        )
    else:
        ref += _py_heredoc(
            w,
            f"import json\ndoc = json.load(open({s!r}))\nlines = []\n"
            "def walk(node, p):\n    if isinstance(node, dict):\n        for k, v in node.items():\n"
            "            walk(v, p + [k])\n    else:\n"
            "        v = str(node).lower() if isinstance(node, bool) else node\n"
            f"        {py_key}\n"
            "        lines.append(f'{key}={v}')\n"
            f"walk(doc, [])\nwith open({o!r}, 'w') as fh:\n    fh.write('\\n'.join(lines) + '\\n')\n",
        )
    if site.user == "root" and site.owner != "root" and w.chance(0.5):
        ref.append(f"chown {site.owner}:{site.owner} {o}")
    ref.append(w.pick((f"cat {o}", f"sort {o}", f"wc -l {o}")))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2 if style == "props" else 3,
        files=files,
        setup=site.prepare(),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 5. structured-jsonl-validate
@family(
    "structured-jsonl-validate",
    CATEGORY,
    "split a JSON-lines file into the valid records and the rejected lines (unparseable, a required field "
    "missing or of the wrong type)",
)
def jsonl_validate(w: World) -> Draft:
    site = _site(w, "data")
    kind = w.pick(("events", "signups", "readings", "transactions"))
    required = {"id": "number", "ts": "string", "value": "number"}
    extra_field = w.pick(("source", "user", "device"))
    if w.chance(0.5):
        required[extra_field] = "string"
    lines: list[str] = []
    good: list[dict[str, Any]] = []
    bad: list[str] = []
    n = w.randint(7, 12)
    faults = w.sample(("truncated", "missing", "type", "null", "notobj", "missing"), w.randint(2, 4))
    slots = set(w.sample(range(n), len(faults)))
    fi = iter(faults)
    for i in range(n):
        rec: dict[str, Any] = {
            "id": 100 + i * w.randint(1, 3),
            "ts": f"{w.date():%Y-%m-%dT%H:%M:%S}",
            "value": w.randint(0, 5000) / 10,
            extra_field: w.pick(_WORDS_OK),
        }
        if i in slots:
            fault = next(fi)
            if fault == "truncated":
                line = json.dumps(rec)[: w.randint(10, 25)]
            elif fault == "missing":
                del rec[w.pick(sorted(required))]
                line = json.dumps(rec)
            elif fault == "type":
                rec["value"] = str(rec["value"])
                line = json.dumps(rec)
            elif fault == "null":
                rec[w.pick(sorted(required))] = None
                line = json.dumps(rec)
            else:
                line = json.dumps([rec["id"], rec["value"]])
            bad.append(line)
        else:
            line = json.dumps(rec, separators=(",", ":")) if w.chance(0.3) else json.dumps(rec)
            good.append(rec)
        lines.append(line)
    src = f"{site.folder}/{kind}.jsonl"
    clean = f"{site.folder}/{w.pick((f'{kind}.clean.jsonl', f'{kind}-valid.jsonl', 'accepted.jsonl'))}"
    sub = w.pick(("", "", "quarantine/", "rejects/"))
    rejects = f"{site.folder}/{sub}{w.pick((f'{kind}.rejects', f'{kind}-rejected.jsonl', 'rejected.txt'))}"
    files = {src: text_body(lines)}
    req_say = ", ".join(f"{k} ({v})" for k, v in required.items())
    task = w.phrase(
        "Split {src}: every line that parses as a JSON object with {req} goes to {clean}, every other line, "
        "unchanged, to {rej}. Keep the original order in both.",
        "Ticket: the {kind} import chokes on bad lines in {src}. Write the good records (a JSON object with {req}, "
        "not null) to {clean} and the rejected lines verbatim to {rej}, both in file order.",
        "pls separate the valid lines of {src} from the broken ones: valid = a JSON object with {req}. valid -> "
        "{clean}, the rest as-is -> {rej}",
        "Which lines of {src} can the loader take? It needs a JSON object per line with {req}. Put those lines in "
        "{clean} and the others, exactly as they are, in {rej} (order kept).",
        "Before we load {src}, quarantine its bad lines: {rej} gets each line that is not a JSON object with {req} "
        "(verbatim), {clean} gets the rest.",
        "Validate {src} against this rule: a JSON object with {req}. Records that pass: {clean}. Lines that fail, "
        "untouched: {rej}. Keep the order.",
        "Could you check {src} line by line? Lines that are JSON objects with {req} belong in {clean}; everything "
        "else goes to {rej} as it was.",
        "{kind_c} in {src} are half broken. Good ones ({req}) to {clean}, bad ones verbatim to {rej}.",
        src=site.say(w, src),
        clean=site.say(w, clean),
        rej=site.say(w, rejects),
        req=req_say,
        kind=kind,
        kind_c=_cap(kind),
    )
    spec = {"clean": clean, "good": good, "rejects": rejects, "bad": bad, "same": {src: _md5(files[src])}}
    check = _check(
        spec,
        """
if json_lines(spec["clean"]) != spec["good"]:
    fail("the valid records are not all there, in order, and alone")
got = [line.strip() for line in text(spec["rejects"]).splitlines() if line.strip()]
if got != [b.strip() for b in spec["bad"]]:
    fail(f"the rejected lines are {got}")
""",
    )
    s, c, r = site.sh(src), site.sh(clean), site.sh(rejects)
    types = {"number": "number", "string": "string"}
    jq_ok = " and ".join(f'(.{k} | type == "{types[v]}")' for k, v in required.items())
    py_ok = " and ".join(
        f"isinstance(o.get({k!r}), {'(int, float)' if v == 'number' else 'str'}) "
        f"and not isinstance(o.get({k!r}), bool)"
        if v == "number"
        else f"isinstance(o.get({k!r}), str)"
        for k, v in required.items()
    )
    how = w.pick(("python", "python", "jq", "jqlong", "loop", "loopand"))
    ref = [w.pick((f"cat -n {s}", f"wc -l {s}", f"head {s}"))]
    if sub:
        ref.append(f"mkdir -p {site.sh(posixpath.dirname(rejects))}")
    if how == "python":
        ref += _py_heredoc(
            w,
            f"import json\nwith open({s!r}) as src, open({c!r}, 'w') as ok, open({r!r}, 'w') as bad:\n"
            "    for line in src:\n        if not line.strip():\n            continue\n        try:\n"
            "            o = json.loads(line)\n        except ValueError:\n            o = None\n"
            f"        if isinstance(o, dict) and {py_ok}:\n            ok.write(line)\n        else:\n"
            "            bad.write(line)\n",
        )
    elif how in ("jq", "jqlong"):
        test = f'(fromjson? // null) as $o | ($o | type == "object") and ($o | {jq_ok})'
        r_flag, c_flag, raw = (
            ("-R", "-c", "-r") if how == "jq" else ("--raw-input", "--compact-output", "--raw-output")
        )
        ref += [
            f"jq {r_flag} {c_flag} 'fromjson? | select(type == \"object\") | select({jq_ok})' {s} > {c}",
            f"jq {r_flag} {raw} 'select(({test}) | not)' {s} > {r}",
        ]
    elif how == "loopand":
        ref.append(
            f"while IFS= read -r line; do\n"
            f"  printf '%s' \"$line\" | jq -e 'type == \"object\" and {jq_ok}' >/dev/null 2>&1 "
            f'&& echo "$line" >&3 || echo "$line" >&4\ndone < {s} 3> {c} 4> {r}'
        )
    else:
        ref.append(
            f": > {c}; : > {r}\nwhile IFS= read -r line; do\n"
            f"  if printf '%s' \"$line\" | jq -e 'type == \"object\" and {jq_ok}' >/dev/null 2>&1; then\n"
            f"    printf '%s\\n' \"$line\" >> {c}\n  else\n    printf '%s\\n' \"$line\" >> {r}\n  fi\ndone < {s}"
        )
    ref.append(f"wc -l {c} {r}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if sub or len(faults) > 2 else 2,
        files=files,
        setup=site.prepare(),
        user=site.user,
        workdir=site.wd,
    )


# ---- CSV tables -------------------------------------------------------------------------------------------------------
# (stem, columns): a column is (name, kind); kinds: key (unique id), person, city, team, fruit, word, date,
# "int:lo:hi", "dec:lo:hi", "pick:a/b/c". Numbers are drawn with different widths so text sorting is wrong.
_CSV_SCHEMAS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "orders",
        (
            ("order_id", "key"),
            ("customer", "person"),
            ("city", "city"),
            ("qty", "int:1:40"),
            ("unit_price", "dec:2:300"),
            ("status", "pick:open/paid/shipped/refunded"),
            ("day", "date"),
        ),
    ),
    (
        "staff",
        (
            ("emp_id", "key"),
            ("name", "person"),
            ("team", "team"),
            ("salary", "int:28000:160000"),
            ("hours", "int:8:60"),
            ("start", "date"),
        ),
    ),
    (
        "inventory",
        (
            ("sku", "key"),
            ("item", "fruit"),
            ("warehouse", "city"),
            ("stock", "int:0:1500"),
            ("cost", "dec:1:90"),
            ("price", "dec:2:200"),
        ),
    ),
    (
        "servers",
        (
            ("host", "key"),
            ("site", "city"),
            ("owner", "team"),
            ("cpu_pct", "int:1:100"),
            ("mem_gb", "int:1:512"),
            ("checked", "date"),
        ),
    ),
    (
        "usage",
        (
            ("account", "key"),
            ("plan", "pick:free/pro/team/enterprise"),
            ("region", "city"),
            ("requests", "int:0:250000"),
            ("errors", "int:0:900"),
            ("day", "date"),
        ),
    ),
)


def _cell(w: World, kind: str, stem: str, i: int) -> str:
    if kind == "key":
        return {
            "orders": f"O-{w.randint(10, 99)}{i:03d}",
            "staff": f"E{w.randint(1, 9)}{i:03d}",
            "inventory": f"SKU-{w.randint(1, 9)}{i:03d}",
            "servers": f"{w.pick(_WORDS_OK)}-{i:02d}",
            "usage": f"acct-{w.randint(100, 999)}{i}",
        }[stem]
    if kind in ("person", "city", "team", "fruit", "word"):
        return w.pick(
            {"person": FIRST_NAMES, "city": CITIES, "team": TEAMS, "fruit": FRUITS, "word": _WORDS_OK}[kind]
        )
    if kind == "date":
        return f"{w.date('2024-01-01', 500):%Y-%m-%d}"
    if kind.startswith("pick:"):
        return w.pick(kind[5:].split("/"))
    lo, hi = (int(x) for x in kind.split(":")[1:])
    if kind.startswith("int:"):
        return str(w.randint(lo, hi) if w.chance(0.6) else w.randint(lo, max(lo, hi // 10)))
    return f"{w.randint(lo * 100, hi * 100) / 100:.2f}"


@dataclass
class Table:
    stem: str
    cols: list[tuple[str, str]]
    rows: list[list[str]]

    @property
    def header(self) -> list[str]:
        return [c for c, _ in self.cols]

    def col(self, name: str) -> int:
        return self.header.index(name)

    def numeric(self) -> list[str]:
        return [c for c, k in self.cols if k.startswith(("int:", "dec:"))]

    def labels(self) -> list[str]:
        return [
            c
            for c, k in self.cols
            if k in ("person", "city", "team", "fruit", "word") or k.startswith("pick:")
        ]


def _csv_table(w: World, n: int, stem: str | None = None, label_pool: int = 0) -> Table:
    """A drawn table of ``n`` rows (``label_pool``: label columns draw from that many values, so they repeat)."""
    schema = next(s for s in _CSV_SCHEMAS if s[0] == stem) if stem else w.pick(_CSV_SCHEMAS)
    name, cols = schema
    pools = {
        c: w.sample({"person": FIRST_NAMES, "city": CITIES, "team": TEAMS, "fruit": FRUITS}[k], label_pool)
        for c, k in cols
        if label_pool and k in ("person", "city", "team", "fruit")
    }
    rows = [[w.pick(pools[c]) if c in pools else _cell(w, k, name, i) for c, k in cols] for i in range(n)]
    return Table(name, list(cols), rows)


def _csv_text(rows: Sequence[Sequence[str]], sep: str = ",") -> str:
    buf = io.StringIO()
    csv.writer(buf, delimiter=sep, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _awk(w: World, sep: str = ",") -> str:
    """How a reference opens an awk over a comma-separated file."""
    return w.pick(
        (
            f"awk -F{sep} -v OFS={sep}",
            f"awk -F{sep} -v OFS={sep}",
            f"awk -v FS={sep} -v OFS={sep}",
            f"gawk -F{sep} -v OFS={sep}",
        )
    )


# =====================================================================================================================
# 6. structured-csv-reshape
@family(
    "structured-csv-reshape",
    CATEGORY,
    "reorder, rename and drop the columns of a CSV file (header included), quoted fields kept intact",
)
def csv_reshape(w: World) -> Draft:
    site = _site(w, "data")
    table = _csv_table(w, w.randint(5, 9))
    quoted = w.chance(0.35)
    if quoted:  # a free-text column whose values hold commas: field-splitting on ',' breaks them
        table.cols.append(("comment", "text"))
        for r in table.rows:
            r.append(
                w.pick(
                    (
                        f"{w.pick(_WORDS_OK)}, {w.pick(_WORDS_OK)}",
                        w.pick(_WORDS_OK),
                        f"late, {w.pick(CITIES)}",
                    )
                )
            )
    header = table.header
    keep = w.sample(header, w.randint(2, min(5, len(header) - 1)))
    if quoted and "comment" not in keep:
        keep.append("comment")
    if w.chance(0.4):  # keep the file's order but drop some columns
        keep = [h for h in header if h in keep]
    renames: dict[str, str] = {}
    for h in w.sample(keep, w.pick((0, 1, 1, 2))):
        renames[h] = w.pick(
            (f"{h}_new", h.replace("_", ""), f"{h.split('_')[0]}_value", f"{w.pick(TEAMS)}_{h}")
        )
        if renames[h] in header or renames[h] == h:
            renames[h] = f"{h}2"
    w.note(*keep, *renames.values())
    new_header = [renames.get(h, h) for h in keep]
    idx = [table.col(h) for h in keep]
    want = [new_header] + [[r[i] for i in idx] for r in table.rows]
    src = f"{site.folder}/{table.stem}{w.pick(('', '_export', '-full'))}.csv"
    in_place = w.chance(0.35)
    out = (
        src
        if in_place
        else f"{site.folder}/{table.stem}{w.pick(('_slim', '-report', '_for_import', '-share'))}.csv"
    )
    files = {src: _csv_text([header, *table.rows])}
    if w.chance(0.5):
        files[f"{src}.orig"] = files[src]
    cols = ", ".join(f"{h} (renamed {renames[h]})" if h in renames else h for h in keep)
    dest = (
        _f(w, "{in place|overwriting the file}") if in_place else _f(w, "{into|as} {o}", o=site.say(w, out))
    )
    task = w.phrase(
        "Reshape {src} {dest}: only the columns {cols}, in this order, header row included.",
        "Goal: a CSV whose columns are exactly {cols}, in that order, built from {src} and written {dest}.",
        "Ticket: the import tool wants {src} with just {cols} - in that order. Write it {dest}; the header names "
        "change with it.",
        "can you cut {src} down to {cols}? {dest_c}, header first, column order as listed",
        "{Produce|Make} a CSV with the columns {cols} (that order) out of {src}, {dest}. Every row stays, in order.",
        "Could you reorder and trim the columns of {src}? Wanted: {cols}. {dest_c}.",
        "The report needs {cols} from {src} and nothing else; put them {dest}, header line and all rows.",
        "Which columns does the partner get? {cols}. Prepare that CSV from {src}, {dest}.",
        "Columns of {src}, reduced to {cols} in this order: write the result {dest}.",
        src=site.say(w, src),
        dest=dest,
        dest_c=_cap(dest),
        cols=cols,
    )
    spec = {
        "out": out,
        "rows": want,
        "same": {p: _md5(b) for p, b in files.items() if p != src or not in_place},
        "owned": site.owned(src) if in_place else {},
    }
    check = _check(spec, 'want_csv(spec["out"], spec["rows"])')
    s, o = site.sh(src), site.sh(out)
    fields = ",".join(f"${i + 1}" for i in idx)
    hdr = ",".join(new_header)
    hdr_awk = ", ".join(f'"{h}"' for h in new_header)
    how = w.pick(("python", "dict") if quoted else ("awk", "awk", "awkhdr", "cut", "python", "dict"))
    if how == "cut" and idx != sorted(idx):
        how = "awk"

    def produce(path: str) -> str:
        if how == "awk":
            return f"{_awk(w)} 'NR == 1 {{ print {hdr_awk}; next }} {{ print {fields} }}' {path}"
        if how == "awkhdr":
            return f"{_awk(w)} '{{ print {fields} }}' {path} | sed '1s/.*/{hdr}/'"
        cut = f"cut -d, -f{','.join(str(i + 1) for i in idx)} {path}"
        return f"{cut} | sed '1s/.*/{hdr}/'" if renames else cut

    ref = [_look(w, site, src, "csv")]
    if how in ("python", "dict"):
        if how == "python":
            body = (
                f"import csv\nwith open({s!r}, newline='') as fh:\n    rows = list(csv.reader(fh))\n"
                f"idx = {idx!r}\nout = [{new_header!r}] + [[r[i] for i in idx] for r in rows[1:]]\n"
                f"with open({o!r}, 'w', newline='') as fh:\n    csv.writer(fh).writerows(out)\n"
            )
        else:
            body = (
                f"import csv\nwith open({s!r}, newline='') as fh:\n    rows = list(csv.DictReader(fh))\n"
                f"keep = {keep!r}\nnames = {renames!r}\n"
                f"with open({o!r}, 'w', newline='') as fh:\n"
                "    out = csv.writer(fh)\n    out.writerow([names.get(k, k) for k in keep])\n"
                "    for r in rows:\n        out.writerow([r[k] for k in keep])\n"
            )
        ref += _py_heredoc(w, body)
    elif in_place:
        ref += _rewrite(w, site, src, produce, "tmp")
    else:
        ref.append(f"{produce(s)} > {o}")
    ref.append(_look(w, site, out, "csv"))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if quoted or renames else 2,
        files=files,
        setup=site.prepare([src]),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 7. structured-csv-filter-rows
_OPS = {">": "greater than", ">=": "at least", "<": "less than", "<=": "at most"}


@family(
    "structured-csv-filter-rows",
    CATEGORY,
    "keep the CSV rows that satisfy a numeric, date or combined condition, header first, into a new file",
)
def csv_filter_rows(w: World) -> Draft:
    site = _site(w, "data")
    table = _csv_table(w, w.randint(8, 13), label_pool=3)
    num = w.pick(table.numeric())
    ni = table.col(num)
    values = sorted({float(r[ni]) for r in table.rows})
    kind = w.pick(("num", "num", "date", "both"))
    op = w.pick(sorted(_OPS))
    cut_f = values[w.randint(1, max(1, len(values) - 2))]
    cut = str(int(cut_f)) if cut_f.is_integer() else f"{cut_f:.2f}"
    dates = [c for c, k in table.cols if k == "date"]
    date_col = dates[0] if dates else None
    label = w.pick(table.labels())
    li = table.col(label)
    lab = w.pick([r[li] for r in table.rows])

    def num_ok(r: list[str]) -> bool:
        v = float(r[ni])
        return {">": v > cut_f, ">=": v >= cut_f, "<": v < cut_f, "<=": v <= cut_f}[op]

    conds: list[tuple[str, str, str, Callable[[list[str]], bool]]] = []  # (english, awk, python, predicate)
    if kind in ("num", "both") or date_col is None:
        conds.append(
            (f"{num} is {_OPS[op]} {cut}", f"${ni + 1} {op} {cut}", f"float(r[{ni}]) {op} {cut}", num_ok)
        )
    if kind == "date" and date_col is not None:
        di = table.col(date_col)
        day = sorted(r[di] for r in table.rows)[len(table.rows) // 2]
        after = w.chance(0.5)
        conds.append(
            (
                f"{date_col} is {'on or after' if after else 'before'} {day}",
                f'${di + 1} {">=" if after else "<"} "{day}"',
                f"r[{di}] {'>=' if after else '<'} {day!r}",
                partial(_on_or_after, di, day) if after else partial(_before, di, day),
            )
        )
        w.note(day)
    if kind == "both":
        conds.append(
            (f"{label} is {lab}", f'${li + 1} == "{lab}"', f"r[{li}] == {lab!r}", lambda r: r[li] == lab)
        )
        w.note(lab)
    kept = [r for r in table.rows if all(c[3](r) for c in conds)]
    if not kept or len(kept) == len(table.rows):  # keep the task meaningful: flip the comparison
        op = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}[op]
        conds[0] = (
            f"{num} is {_OPS[op]} {cut}",
            f"${ni + 1} {op} {cut}",
            f"float(r[{ni}]) {op} {cut}",
            num_ok,
        )
        kept = [r for r in table.rows if all(c[3](r) for c in conds)]
    w.note(num, cut)
    src = f"{site.folder}/{table.stem}{w.pick(('', '-2024', '_all'))}.csv"
    out = f"{site.folder}/{table.stem}{w.pick(('_selected', '-filtered', '_flagged', '-subset'))}.csv"
    files = {src: _csv_text([table.header, *table.rows])}
    files[f"{site.folder}/{table.stem}-old.csv"] = _csv_text([table.header, *table.rows[:3]])
    cond = " and ".join(c[0] for c in conds)
    task = w.phrase(
        "Write the rows of {src} where {cond} to {out}, with the same header and columns, in their original order.",
        "Goal: {out} lists only the {stem} records of {src} where {cond}, under the original header.",
        "Ticket: we need the {stem} rows where {cond}. Put them in {out} (header line first); {src} stays as is.",
        "filter {src}: {cond} -> {out}, keep the header",
        "Could you pull every line of {src} where {cond} into {out}? Header included, order unchanged.",
        "{out} should contain just the {stem} records of {src} where {cond} (plus the header row).",
        "Which {stem} rows of {src} match this: {cond}? Don't count them, save them: {out}, CSV with the header.",
        "From {src}, select the records where {cond}; write them as CSV with the header to {out}.",
        "Make {out}: the header of {src}, then each of its rows where {cond}, in file order.",
        src=site.say(w, src),
        out=site.say(w, out),
        cond=cond,
        stem=table.stem,
    )
    spec = {"out": out, "rows": [table.header, *kept], "same": {p: _md5(b) for p, b in files.items()}}
    check = _check(spec, 'want_csv(spec["out"], spec["rows"])')
    s, o = site.sh(src), site.sh(out)
    awk_cond = " && ".join(c[1] for c in conds)
    py_cond = " and ".join(c[2] for c in conds)
    how = w.pick(("awk", "awk", "headtail", "python", "sqlite", "awkfnr", "group", "dict"))
    ref = [_look(w, site, src, "csv")]
    if how == "awk":
        ref.append(f"{_awk(w)} 'NR == 1 || ({awk_cond})' {s} > {o}")
    elif how == "group":
        ref.append(f"{{ head -n 1 {s}; tail -n +2 {s} | {_awk(w)} '{awk_cond}'; }} > {o}")
    elif how == "dict":
        ref += _py_heredoc(
            w,
            f"import csv\nwith open({s!r}, newline='') as fh:\n    reader = csv.reader(fh)\n    head = next(reader)\n"
            f"    keep = [r for r in reader if {py_cond}]\nwith open({o!r}, 'w', newline='') as fh:\n"
            "    csv.writer(fh).writerows([head, *keep])\n",
        )
    elif how == "awkfnr":
        ref.append(f"{_awk(w)} 'FNR == 1 {{ print; next }} {awk_cond}' {s} > {o}")
    elif how == "headtail":
        ref += [f"head -n 1 {s} > {o}", f"tail -n +2 {s} | {_awk(w)} '{awk_cond}' >> {o}"]
    elif how == "python":
        ref += _py_heredoc(
            w,
            f"import csv\nwith open({s!r}, newline='') as fh:\n    rows = list(csv.reader(fh))\n"
            f"with open({o!r}, 'w', newline='') as fh:\n    out = csv.writer(fh)\n    out.writerow(rows[0])\n"
            f"    for r in rows[1:]:\n        if {py_cond}:\n            out.writerow(r)\n",
        )
    else:
        sql_parts = []
        for c in conds:
            if c is conds[0] and c[1].startswith(f"${ni + 1} "):
                sql_parts.append(f"CAST({num} AS REAL) {op} {cut}")
            else:
                col = date_col if c[0].startswith(str(date_col)) else label
                rhs = c[1].split(" ", 2)[2].replace('"', "'")
                sql_parts.append(f"{col} {c[1].split(' ')[1]} {rhs}")
        sql = f"SELECT * FROM t WHERE {' AND '.join(sql_parts)} ORDER BY rowid;"
        ref.append(f"sqlite3 -csv -header :memory: '.import --csv {s} t' {quote(sql)} > {o}")
    ref.append(w.pick((f"cat {o}", f"wc -l {o}")))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2 if len(conds) == 1 else 3,
        files=files,
        setup=site.prepare(),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 8. structured-csv-add-column
@family(
    "structured-csv-add-column",
    CATEGORY,
    "add a column to a CSV file computed from other columns (product, difference, a threshold label) or a "
    "constant, with its header",
)
def csv_add_column(w: World) -> Draft:
    site = _site(w, "data")
    stem = w.pick(("orders", "inventory", "staff", "usage"))
    table = _csv_table(w, w.randint(5, 9), stem=stem)
    kinds = ["label", "const"] + {
        "orders": ["product"],
        "inventory": ["diff", "product"],
        "staff": [],
        "usage": ["diff"],
    }[stem]
    kind = w.pick(kinds)
    nums = table.numeric()
    if kind == "product":
        a, b = ("qty", "unit_price") if stem == "orders" else ("stock", "cost")
        name = (
            w.pick(("total", "line_total", "value")) if stem == "orders" else w.pick(("stock_value", "value"))
        )
        ai, bi = table.col(a), table.col(b)
        vals = [f"{float(r[ai]) * float(r[bi]):.2f}" for r in table.rows]
        say = _f(w, "{n} = {a} × {b}, {with two decimals|rounded to 2 decimal places}", n=name, a=a, b=b)
        awk_expr, py_expr, fmt = (
            f"${ai + 1} * ${bi + 1}",
            f"'%.2f' % (float(r[{ai}]) * float(r[{bi}]))",
            "%.2f",
        )
    elif kind == "diff":
        a, b = ("price", "cost") if stem == "inventory" else ("requests", "errors")
        name = "margin" if stem == "inventory" else "ok_requests"
        ai, bi = table.col(a), table.col(b)
        dec = stem == "inventory"
        vals = [
            f"{float(r[ai]) - float(r[bi]):.2f}" if dec else str(int(r[ai]) - int(r[bi])) for r in table.rows
        ]
        say = _f(w, "{n} = {a} minus {b}", n=name, a=a, b=b) + (_f(w, ", two decimals") if dec else "")
        awk_expr = f"${ai + 1} - ${bi + 1}"
        py_expr = (
            f"'%.2f' % (float(r[{ai}]) - float(r[{bi}]))" if dec else f"str(int(r[{ai}]) - int(r[{bi}]))"
        )
        fmt = "%.2f" if dec else "%d"
    elif kind == "label":
        a = w.pick(nums)
        ai = table.col(a)
        cut = sorted(float(r[ai]) for r in table.rows)[len(table.rows) // 2]
        cut_s = str(int(cut)) if cut.is_integer() else f"{cut:.2f}"
        hi, lo = w.pick((("high", "low"), ("yes", "no"), ("over", "under")))
        name = w.pick((f"{a}_band", "flag", f"{a}_level"))
        vals = [hi if float(r[ai]) >= cut else lo for r in table.rows]
        say = _f(w, "{n}: {h} when {a} is {c} or more, otherwise {l}", n=name, h=hi, l=lo, a=a, c=cut_s)
        awk_expr, py_expr, fmt = (
            f'(${ai + 1} >= {cut_s} ? "{hi}" : "{lo}")',
            f"{hi!r} if float(r[{ai}]) >= {cut_s} else {lo!r}",
            "%s",
        )
        w.note(cut_s, hi, lo)
    else:
        name = w.pick(("region", "source", "batch", "env"))
        const = {
            "region": w.pick(("eu-west", "us-east", "apac")),
            "source": w.pick(("erp", "crm", "manual")),
            "batch": f"b{w.randint(100, 999)}",
            "env": w.pick(("prod", "staging")),
        }[name]
        vals = [const] * len(table.rows)
        say = _f(w, "{n}, set to {c} on every row", n=name, c=const)
        awk_expr, py_expr, fmt = f'"{const}"', repr(const), "%s"
        w.note(const)
    w.note(name)
    want = [[*table.header, name]] + [[*r, v] for r, v in zip(table.rows, vals, strict=True)]
    src = f"{site.folder}/{stem}{w.pick(('', '-current', '_2024'))}.csv"
    in_place = w.chance(0.5)
    out = src if in_place else f"{site.folder}/{stem}{w.pick(('_enriched', '-with-' + name, '_v2'))}.csv"
    files = {src: _csv_text([table.header, *table.rows])}
    if w.chance(0.5):
        files[f"{site.folder}/{stem}-sample.csv"] = _csv_text([table.header, *table.rows[:2]])
    dest = (
        _f(w, "{in place|in the file itself}")
        if in_place
        else _f(w, "{writing|saving} the result {to|as} {o}", o=site.say(w, out))
    )
    task = w.phrase(
        "Add a column to {src}, {dest}: {say}. It goes last, with its name in the header.",
        "Goal: every record of {src} ends with one more field, {say} ({dest}).",
        "Ticket: {stem} data needs one more column. In {src}, append {say} (header included), {dest}.",
        "add a last column to {src} - {say}; {dest}",
        "Could you extend {src} with a new final column? {say_c}. {dest_c}.",
        "{src} is missing a column: {say}. Add it as the last column of every row and of the header, {dest}.",
        "What should the new column of {src} hold? {say_c}. Add it at the end, {dest}; the other columns stay.",
        "Enrich {src} ({dest}) with {say}. Existing columns and row order do not change.",
        "For the dashboard, {src} gets one extra column at the end: {say}. {dest_c}.",
        src=site.say(w, src),
        dest=dest,
        dest_c=_cap(dest),
        say=say,
        say_c=_cap(say),
        stem=stem,
    )
    spec = {
        "out": out,
        "rows": want,
        "same": {p: _md5(b) for p, b in files.items() if p != src or not in_place},
        "owned": site.owned(src) if in_place else {},
    }
    check = _check(spec, 'want_csv(spec["out"], spec["rows"])')
    s, o = site.sh(src), site.sh(out)
    how = w.pick(("awk", "awk", "awknf", "python", "python", "sed" if kind == "const" else "awk"))

    def produce(path: str) -> str:
        if how == "sed":
            return f"sed -e '1s/$/,{name}/' -e '2,$s/$/,{vals[0]}/' {path}"
        if how == "awknf":
            value = awk_expr if fmt == "%s" else f'sprintf("{fmt}", {awk_expr})'
            return f"{_awk(w)} '{{ $(NF + 1) = (NR == 1 ? \"{name}\" : {value}) }} 1' {path}"
        return f'{_awk(w)} \'NR == 1 {{ print $0, "{name}"; next }} {{ printf "%s,{fmt}\\n", $0, {awk_expr} }}\' {path}'

    ref = [_look(w, site, src, "csv")]
    if how == "python":
        ref += _py_heredoc(
            w,
            f"import csv\nwith open({s!r}, newline='') as fh:\n    rows = list(csv.reader(fh))\n"
            f"rows[0].append({name!r})\nfor r in rows[1:]:\n    r.append({py_expr})\n"
            f"with open({o!r}, 'w', newline='') as fh:\n    csv.writer(fh).writerows(rows)\n",
        )
    elif in_place:
        ref += _rewrite(w, site, src, produce, "new")
    else:
        ref.append(f"{produce(s)} > {o}")
    ref.append(_look(w, site, out, "csv"))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2 if kind in ("const", "diff") else 3,
        files=files,
        setup=site.prepare([src]),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 9. structured-csv-concat
_MONTHS = ("01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12")


@family(
    "structured-csv-concat",
    CATEGORY,
    "combine several CSV exports into one file with a single header (optionally a column naming each row's "
    "source), leaving out look-alike files",
)
def csv_concat(w: World) -> Draft:
    site = _site(w, "data")
    stem = w.pick(("orders", "usage", "servers", "inventory"))
    year = w.randint(2022, 2025)
    first = w.randint(0, 7)
    k = w.randint(2, 4)
    months = _MONTHS[first : first + k]
    base = _csv_table(w, 1, stem=stem)
    parts: list[tuple[str, str, list[list[str]]]] = []
    for m in months:
        t = _csv_table(w, w.randint(2, 5), stem=stem)
        parts.append((f"{year}-{m}", f"{site.folder}/{stem}-{year}-{m}.csv", t.rows))
    header = base.header
    files = {p: _csv_text([header, *rows]) for _, p, rows in parts}
    decoys = {
        f"{site.folder}/{stem}-{year}-{_MONTHS[first + k]}.csv.partial": _csv_text([header, *base.rows]),
        f"{site.folder}/{stem}-summary.csv": _csv_text(
            [["month", "rows"], *[[m, str(len(r))] for m, _, r in parts]]
        ),
        f"{site.folder}/{stem}-{year - 1}-12.csv": _csv_text([header, *base.rows]),
    }
    for p in w.sample(sorted(decoys), 2):
        files[p] = decoys[p]
    tag = w.chance(0.4)
    col = w.pick(("month", "period", "source_month")) if tag else ""
    out = f"{site.folder}/{w.pick((f'{stem}-{year}-q', f'{stem}-combined', f'all-{stem}', f'{stem}-{year}'))}.csv"
    want = [[*header, col] if tag else header]
    for m, _, rows in parts:
        want += [[*r, m] if tag else r for r in rows]
    rng = (
        f"{year}-{months[0]} to {year}-{months[-1]}"
        if k > 2
        else f"{year}-{months[0]} and {year}-{months[1]}"
    )
    extra = (
        " "
        + _f(
            w,
            "Add a last column {c} holding the month each row came from (as in the file name, e.g. {m}).",
            c=col,
            m=parts[0][0],
        )
        if tag
        else ""
    )
    task = w.phrase(
        "Combine the monthly {stem} exports for {rng} {here} into {out}: one header line, then the rows of each "
        "month in date order.{extra}",
        "Ticket: finance wants one CSV for {rng}. Merge {stem}-{year}-MM.csv for those months into {out} with a "
        "single header.{extra}",
        "cat the {stem} csvs for {rng} together into {out} - header only once, months in order{extra_l}",
        "Could you concatenate the {stem} files of {rng} {here} into {out}? The header should appear only at the "
        "top; keep the rows in month order.{extra}",
        "{out} should hold every {stem} row from {rng} (the monthly files {here}), under one header, oldest month "
        "first.{extra}",
        "Stack the monthly exports {here} for {rng} into {out}. Only the real monthly files count; the header "
        "appears once.{extra}",
        "How do I get all {stem} rows for {rng} into one file? Please just do it: {out}, one header, months in "
        "order.{extra}",
        "Build {out} from the {stem} exports of {rng}: the shared header once, then each month's rows in date "
        "order.{extra}",
        stem=stem,
        rng=rng,
        year=year,
        here=_here(w, site),
        out=site.say(w, out),
        extra=extra,
        extra_l=extra.rstrip(".").replace(" Add", "; add", 1) if extra else "",
    )
    w.note(year, *months)
    spec = {"out": out, "rows": want, "same": {p: _md5(b) for p, b in files.items()}}
    check = _check(spec, 'want_csv(spec["out"], spec["rows"])')
    srcs = " ".join(site.sh(p) for _, p, _ in parts)
    folder = site.sh(site.folder) if site.start != site.folder else "."
    glob = f"{folder}/{stem}-{year}-{{{','.join(months)}}}.csv" if w.chance(0.5) else srcs
    o = site.sh(out)
    ref = [w.pick((f"ls {folder}", f"ls -l {folder}", f"head -n 2 {site.sh(parts[0][1])}"))]
    how = w.pick(
        ("headtail", "awk", "loop", "python", "group", "sed") if not tag else ("awk", "python", "loop")
    )
    if how == "group":
        ref.append(f"{{ head -n 1 {site.sh(parts[0][1])}; tail -q -n +2 {glob}; }} > {o}")
    elif how == "sed":
        ref += [
            f"cp {site.sh(parts[0][1])} {o}",
            f"sed -s 1d {' '.join(site.sh(p) for _, p, _ in parts[1:])} >> {o}",
        ]
    elif how == "headtail":
        ref += [f"head -n 1 {site.sh(parts[0][1])} > {o}", f"tail -q -n +2 {glob} >> {o}"]
    elif how == "awk":
        if tag:
            ref.append(
                f'awk -F, -v OFS=, \'FNR == 1 {{ if (NR == 1) print $0, "{col}"; next }} '
                f'{{ m = FILENAME; sub(/.*{stem}-/, "", m); sub(/\\.csv$/, "", m); print $0, m }}\' {glob} > {o}'
            )
        else:
            ref.append(f"awk 'FNR == 1 && NR != 1 {{ next }} 1' {glob} > {o}")
    elif how == "loop":
        if tag:
            ref.append(
                f"head -n 1 {site.sh(parts[0][1])} | sed 's/$/,{col}/' > {o}\n"
                f"for m in {' '.join(m for m, _, _ in parts)}; do\n"
                f'  tail -n +2 {folder}/{stem}-$m.csv | sed "s/\\$/,$m/" >> {o}\ndone'
            )
        else:
            ref.append(
                f'head -n 1 {site.sh(parts[0][1])} > {o}\nfor f in {srcs}; do\n  tail -n +2 "$f" >> {o}\ndone'
            )
    else:
        names = [site.sh(p) for _, p, _ in parts]
        ref += _py_heredoc(
            w,
            f"import csv\nout_rows = []\nfor i, path in enumerate({names!r}):\n"
            "    with open(path, newline='') as fh:\n        rows = list(csv.reader(fh))\n"
            + (
                f"    month = path.rsplit('{stem}-', 1)[1][:-4]\n"
                f"    if i == 0:\n        out_rows.append(rows[0] + [{col!r}])\n"
                "    out_rows += [r + [month] for r in rows[1:]]\n"
                if tag
                else "    if i == 0:\n        out_rows.append(rows[0])\n    out_rows += rows[1:]\n"
            )
            + f"with open({o!r}, 'w', newline='') as fh:\n    csv.writer(fh).writerows(out_rows)\n",
        )
    ref.append(w.pick((f"wc -l {o}", f"grep -c . {o}", f"cat {o}")))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if tag else 2,
        files=files,
        setup=site.prepare(),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 10. structured-group-aggregate
@family(
    "structured-group-aggregate",
    CATEGORY,
    "total, average, maximum or minimum of a numeric field per group (CSV or JSON lines) into a CSV, in a "
    "given order",
)
def group_aggregate(w: World) -> Draft:
    site = _site(w, "data")
    jsonl = w.chance(0.35)
    table = _csv_table(w, w.randint(9, 15), label_pool=w.randint(3, 4))
    group = w.pick(table.labels())
    value = w.pick(table.numeric())
    gi, vi = table.col(group), table.col(value)
    agg = w.pick(("sum", "sum", "avg", "max", "min"))
    groups: dict[str, list[float]] = {}
    for r in table.rows:
        groups.setdefault(r[gi], []).append(float(r[vi]))
    dec = any("." in r[vi] for r in table.rows)

    def fmt(x: float) -> str:
        return f"{x:.2f}" if dec or agg == "avg" else str(int(x))

    result = {
        g: {"sum": sum(v), "avg": sum(v) / len(v), "max": max(v), "min": min(v)}[agg]
        for g, v in groups.items()
    }
    by_value = w.chance(0.5) and len(set(round(x, 2) for x in result.values())) == len(result)
    order = sorted(result, key=lambda g: (-result[g], g)) if by_value else sorted(result)
    out_col = {"sum": f"total_{value}", "avg": f"avg_{value}", "max": f"max_{value}", "min": f"min_{value}"}[
        agg
    ]
    want = [[group, out_col]] + [[g, fmt(result[g])] for g in order]
    ext = "jsonl" if jsonl else "csv"
    src = f"{site.folder}/{table.stem}{w.pick(('', '-2024', '_raw'))}.{ext}"
    out = (
        f"{site.folder}/{w.pick((f'{value}-by-{group}', f'{table.stem}_per_{group}', f'{group}_{agg}'))}.csv"
    )
    if jsonl:
        recs = [
            {
                h: (float(c) if "." in c else int(c)) if h in table.numeric() else c
                for h, c in zip(table.header, r, strict=True)
            }
            for r in table.rows
        ]
        files = {src: text_body([json.dumps(x) for x in recs])}
    else:
        files = {src: _csv_text([table.header, *table.rows])}
    files[f"{site.folder}/{table.stem}-test.{ext}"] = files[src].splitlines()[0] + "\n"
    what = {"sum": "total", "avg": "average", "max": "largest", "min": "smallest"}[agg]
    rounding = _f(w, ", {rounded to|with} two decimals") if agg == "avg" or dec else ""
    sort_say = (
        _f(w, "{largest value first|highest {c} first}", c=out_col)
        if by_value
        else _f(w, "{sorted|ordered} by {g} {alphabetically|A to Z}", g=group)
    )
    task = w.phrase(
        "From {src}, compute the {what} {value} per {group}{rnd} and write it to {out} as CSV with the header "
        "{h}, {sort}.",
        "Ticket: we need the {what} {value} for each {group}. Source: {src}. Output: {out} (CSV, header {h}), "
        "{sort}{rnd}.",
        "{what} of {value} by {group} from {src} -> {out}, header {h}, {sort}{rnd}",
        "What is the {what} {value} of each {group} in {src}? Save the answer to {out}: a CSV with header {h}, one "
        "row per {group}, {sort}{rnd}.",
        "Could you group {src} by {group} and write the {what} {value} of each group to {out}? Header {h}; "
        "{sort}{rnd}.",
        "Summarise {src}: one line per {group} with its {what} {value}{rnd}, {sort}. Write it as {out} with the "
        "header {h}.",
        "For the weekly report, {out} should list every {group} with the {what} of its {value}{rnd} "
        "(header {h}, {sort}), computed from {src}.",
        "Aggregate {src} per {group} ({what} of {value}{rnd}) into {out}. Header: {h}. Order: {sort}.",
        src=site.say(w, src),
        out=site.say(w, out),
        what=what,
        value=value,
        group=group,
        rnd=rounding,
        h=f"{group},{out_col}",
        sort=sort_say,
    )
    w.note(group, value, out_col)
    # a half-way average (x.125) may be rounded either way by a correct tool: one cent of slack
    spec = {"out": out, "rows": want, "same": {p: _md5(b) for p, b in files.items()}, "tol": 0.0051}
    check = _check(spec, 'want_csv(spec["out"], spec["rows"], tol=spec["tol"])')
    s, o = site.sh(src), site.sh(out)
    pyfmt = "'%.2f' % x" if dec or agg == "avg" else "'%d' % x"
    sort_cmd = "sort -t, -k2,2nr -k1,1" if by_value else "sort"
    ref = [w.pick((f"head -n 3 {s}", f"wc -l {s}"))]
    how = w.pick(
        ("awk", "awk", "python", "sqlite", "jq") if jsonl else ("awk", "awk", "python", "sqlite", "python")
    )
    if jsonl and how == "awk":
        how = "jqawk"
    awk_acc = {
        "sum": "s[$1] += $2",
        "avg": "s[$1] += $2; n[$1]++",
        "max": "if (!($1 in s) || $2 > s[$1]) s[$1] = $2",
        "min": "if (!($1 in s) || $2 < s[$1]) s[$1] = $2",
    }[agg]
    awk_val = "s[k] / n[k]" if agg == "avg" else "s[k]"
    awk_fmt = "%.2f" if dec or agg == "avg" else "%d"
    if how in ("awk", "jqawk"):
        feed = (
            f"jq -r '\"\\(.{group}),\\(.{value})\"' {s} | "
            if how == "jqawk"
            else f"tail -n +2 {s} | cut -d, -f{gi + 1},{vi + 1} | "
            if gi < vi
            else f"awk -F, -v OFS=, 'NR > 1 {{ print ${gi + 1}, ${vi + 1} }}' {s} | "
        )
        ref += [
            f"echo {group},{out_col} > {o}",
            f"{feed}awk -F, '{{ {awk_acc} }} END {{ for (k in s) printf \"%s,{awk_fmt}\\n\", k, {awk_val} }}' "
            f"| {sort_cmd} >> {o}",
        ]
    elif how == "jq":
        red = {"sum": "add", "avg": "(add / length)", "max": "max", "min": "min"}[agg]
        rnd = " | . * 100 | round / 100" if agg == "avg" else ""
        sort = "sort_by(-.[1])" if by_value else "sort_by(.[0])"
        ref += [
            f"echo {group},{out_col} > {o}",
            f"jq -s -r 'group_by(.{group}) | map([.[0].{group}, (map(.{value}) | {red}{rnd})]) | {sort}[] | @csv' "
            f"{s} >> {o}",
        ]
    elif how == "sqlite":
        fn = {"sum": "SUM", "avg": "AVG", "max": "MAX", "min": "MIN"}[agg]
        expr = f"{fn}(CAST({value} AS REAL))"
        expr = f"printf('%.2f', {expr})" if dec or agg == "avg" else f"CAST({expr} AS INTEGER)"
        order_sql = f"{fn}(CAST({value} AS REAL)) DESC, {group}" if by_value else group
        load = (
            f"'.import --csv {s} t'"
            if not jsonl
            else f"\"CREATE TABLE t AS SELECT json_extract(value, '$.{group}') AS {group}, "
            f"json_extract(value, '$.{value}') AS {value} FROM json_each(readfile('{s}'))\""
        )
        if jsonl:  # json_each needs one array: read the lines as an array first
            ref.append(f"jq -s . {s} > /tmp/rows.json")
            load = load.replace(f"readfile('{s}')", "readfile('/tmp/rows.json')")
        ref.append(
            f"sqlite3 -csv -header :memory: {load} "
            f"{quote(f'SELECT {group}, {expr} AS {out_col} FROM t GROUP BY {group} ORDER BY {order_sql};')} > {o}"
        )
    else:
        reader = (
            "rows = [json.loads(l) for l in open(SRC) if l.strip()]\n"
            if jsonl
            else "rows = list(csv.DictReader(open(SRC, newline='')))\n"
        )
        py_red = {"sum": "sum(v)", "avg": "sum(v) / len(v)", "max": "max(v)", "min": "min(v)"}[agg]
        key = "key=lambda g: (-res[g], g)" if by_value else ""
        ref += _py_heredoc(
            w,
            f"import csv, json\nfrom collections import defaultdict\nSRC = {s!r}\n{reader}"
            f"groups = defaultdict(list)\nfor r in rows:\n    groups[r[{group!r}]].append(float(r[{value!r}]))\n"
            f"res = {{g: {py_red} for g, v in groups.items()}}\n"
            f"with open({o!r}, 'w', newline='') as fh:\n    out = csv.writer(fh)\n"
            f"    out.writerow([{group!r}, {out_col!r}])\n    for g in sorted(res{', ' + key if key else ''}):\n"
            f"        x = res[g]\n        out.writerow([g, {pyfmt}])\n",
        )
    ref.append(f"cat {o}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if jsonl or agg == "avg" or by_value else 2,
        files=files,
        setup=site.prepare(),
        user=site.user,
        workdir=site.wd,
    )


# ---- text configs: YAML, INI and TOML renderings of a drawn tree ----------------------------------------------------
def _yaml_text(
    w: World, name: str, tree: Tree, indent: int, lists: dict[str, list[Any]] | None = None
) -> str:
    """A block-style YAML config: top-level name, then one mapping per section (comments and blank lines between)."""
    pad = " " * indent
    out = [f"# {name} configuration", f"name: {name}"]
    for sec, keys in tree.items():
        out.append("")
        if w.chance(0.3):
            out.append(f"# {sec} settings")
        out.append(f"{sec}:")
        for key, value in keys.items():
            out.append(f"{pad}{key}: {_lit(value, 'yaml')}")
    for key, items in (lists or {}).items():
        out += ["", f"{key}:"]
        for item in items:
            if isinstance(item, dict):
                first = True
                for k, v in item.items():
                    out.append(f"{pad}{'- ' if first else '  '}{k}: {_lit(v, 'yaml')}")
                    first = False
            else:
                out.append(f"{pad}- {_lit(item, 'yaml')}")
    return text_body(out)


def _ini_text(w: World, tree: Tree, sep: str) -> str:
    out = [f"; {w.pick(('managed by ops', 'local settings', 'edit with care'))}"]
    for sec, keys in tree.items():
        out += ["", f"[{sec}]"]
        for key, value in keys.items():
            out.append(f"{key}{sep}{_lit(value, 'ini')}")
    return text_body(out)


def _toml_text(name: str, tree: Tree, mirrors: Sequence[dict[str, Scalar]]) -> str:
    out = [f'name = "{name}"']
    for sec, keys in tree.items():
        out += ["", f"[{sec}]"]
        out += [f"{key} = {_lit(value, 'toml')}" for key, value in keys.items()]
    for up in mirrors:
        out += ["", "[[mirrors]]"]
        out += [f"{key} = {_lit(value, 'toml')}" for key, value in up.items()]
    return text_body(out)


@dataclass
class KeyEdit:
    """One change to a sectioned config: ``set`` an existing key, ``add`` a new one, ``drop`` one."""

    op: str
    sec: str
    key: str
    value: Scalar | None = None


def _key_edits(w: World, tree: Tree, k: int, ops: Sequence[str]) -> list[KeyEdit]:
    """``k`` edits; the first ``set`` prefers a key whose name another section shares (the global-edit trap)."""
    edits: list[KeyEdit] = []
    used: set[tuple[str, str]] = set()
    for i in range(k):
        op = w.pick(ops) if i else "set"
        if op == "set":
            pool = [x for x in _shared_key(tree) if x not in used] if i == 0 else []
            pool = pool or [(s, key) for s in tree for key in tree[s] if (s, key) not in used]
            sec, key = w.pick(pool)
            edits.append(KeyEdit("set", sec, key, _new_value(w, tree[sec][key], key)))
        elif op == "add":
            sec = w.pick(sorted(tree))
            key = w.pick(
                [
                    x
                    for x in ("retry_backoff_s", "max_idle", "region", "compress", "label")
                    if x not in tree[sec]
                ]
            )
            options: dict[str, Scalar] = {
                "retry_backoff_s": w.randint(1, 30),
                "max_idle": w.randint(2, 20),
                "region": w.pick(("eu-west-1", "us-east-2", "ap-south-1")),
                "compress": w.chance(0.5),
                "label": w.pick(TEAMS),
            }
            value = options[key]
            edits.append(KeyEdit("add", sec, key, value))
        else:
            pool = [(s, key) for s in tree for key in tree[s] if (s, key) not in used and len(tree[s]) > 2]
            if not pool:
                continue
            sec, key = w.pick(pool)
            edits.append(KeyEdit("drop", sec, key))
        used.add((edits[-1].sec, edits[-1].key))
        w.note(edits[-1].sec, edits[-1].key, _say(edits[-1].value) if edits[-1].value is not None else "")
    return edits


def _apply(tree: Tree, edits: Sequence[KeyEdit]) -> Tree:
    out = {s: dict(keys) for s, keys in tree.items()}
    for e in edits:
        if e.op == "drop":
            del out[e.sec][e.key]
        else:
            assert e.value is not None
            out[e.sec][e.key] = e.value
    return out


def _say_edits(w: World, edits: Sequence[KeyEdit], style: str) -> str:
    """The edits in English, each naming its section (``database.timeout_s`` or 'timeout_s in [database]')."""
    parts = []
    for e in edits:
        where = (
            w.pick((f"{e.sec}.{e.key}", f"{e.key} under {e.sec}", f"{e.key} in the {e.sec} section"))
            if style != "ini"
            else w.pick((f"{e.key} in [{e.sec}]", f"{e.key} under [{e.sec}]", f"[{e.sec}] {e.key}"))
        )
        if e.op == "set":
            parts.append(
                _f(
                    w,
                    "{set|change} {at} to {v}",
                    at=where,
                    v=_lit(e.value, style) if e.value is not None else "",
                )
            )
        elif e.op == "add":
            parts.append(
                _f(
                    w,
                    "add {at} = {v} (a new key)",
                    at=where,
                    v=_lit(e.value, style) if e.value is not None else "",
                )
            )
        else:
            parts.append(_f(w, "{remove|delete} {at}", at=where))
    return w.clauses(parts)


def _sed_section_cmds(w: World, edits: Sequence[KeyEdit], style: str, p: str, indent: int = 2) -> list[str]:
    """sed -i commands that edit inside one section's range (a YAML mapping or an INI/TOML table)."""
    out = []
    for e in edits:
        head = f"^{e.sec}:" if style == "yaml" else f"^\\[{e.sec}\\]"
        end = "^[^ #]" if style == "yaml" else "^\\["
        lead = " " * indent if style == "yaml" else ""
        assign = ": " if style == "yaml" else " = "
        keyre = f"^\\( *{e.key}:\\).*" if style == "yaml" else f"^{e.key} *=.*"
        if e.op == "set":
            val = _lit(e.value, style) if e.value is not None else ""
            val = val.replace("/", "\\/").replace("&", "\\&")
            rep = f"\\1 {val}" if style == "yaml" else f"{e.key}{assign}{val}"
            out.append(f"sed -i '/{head}/,/{end}/ s/{keyre}/{rep}/' {p}")
        elif e.op == "add":
            val = _lit(e.value, style) if e.value is not None else ""
            out.append(f"sed -i '/{head}/a\\{lead}{e.key}{assign}{val}' {p}")
        else:
            keyre = f"^ *{e.key}:" if style == "yaml" else f"^{e.key} *="
            out.append(f"sed -i '/{head}/,/{end}/ {{/{keyre}/d}}' {p}")
    return out


def _awk_section(edits: Sequence[KeyEdit], style: str, indent: int = 2) -> str:
    """One awk program applying every edit while it tracks the current section."""
    if style == "yaml":
        track = '/^[^ #]/ { sec = $1; sub(/:$/, "", sec) }'
        keyof = 'k = $1; sub(/:$/, "", k)'
    else:
        track = '/^\\[/ { sec = $0; gsub(/[][ ]/, "", sec) }'
        keyof = 'k = $0; sub(/ *=.*/, "", k)'
    rules = []
    for e in edits:
        val = _lit(e.value, style) if e.value is not None else ""
        val_awk = val.replace("\\", "\\\\").replace('"', '\\"')
        if e.op == "set":
            line = f'"{" " * indent}{e.key}: {val_awk}"' if style == "yaml" else f'"{e.key} = {val_awk}"'
            rules.append(f'sec == "{e.sec}" && k == "{e.key}" {{ print {line}; next }}')
        elif e.op == "drop":
            rules.append(f'sec == "{e.sec}" && k == "{e.key}" {{ next }}')
    adds = [e for e in edits if e.op == "add"]
    after = []
    for e in adds:
        val = _lit(e.value, style) if e.value is not None else ""
        val_awk = val.replace("\\", "\\\\").replace('"', '\\"')
        line = f'"{" " * indent}{e.key}: {val_awk}"' if style == "yaml" else f'"{e.key} = {val_awk}"'
        head = f"^{e.sec}:" if style == "yaml" else f"^\\\\[{e.sec}\\\\]"
        after.append(f"$0 ~ /{head}/ {{ print; print {line}; next }}".replace("\\\\", "\\"))
    return " ".join([track, keyof.join(("{ ", " }")), *rules, *after, "1"])


def _py_section_edit(edits: Sequence[KeyEdit], style: str, indent: int, path: str) -> str:
    """A python3 program editing the text line by line while it tracks the section."""
    ops = [(e.op, e.sec, e.key, _lit(e.value, style) if e.value is not None else "") for e in edits]
    if style == "yaml":
        sec_re, key_re, fmt = r"^(\w+):\s*$", r"^\s+(\w+):", f"{' ' * indent}{{k}}: {{v}}\n"
    else:
        sec_re, key_re, fmt = r"^\[(\w+)\]\s*$", r"^(\w+)\s*=", "{k} = {v}\n"
    return (
        f"import re\nops = {ops!r}\nout, sec = [], None\nfor line in open({path!r}):\n"
        f"    m = re.match(r'{sec_re}', line)\n    if m:\n        sec = m.group(1)\n        out.append(line)\n"
        f"        out += [{fmt!r}.format(k=k, v=v) for op, s, k, v in ops if op == 'add' and s == sec]\n"
        "        continue\n"
        f"    k = re.match(r'{key_re}', line)\n"
        "    hit = [o for o in ops if o[0] != 'add' and k and o[1] == sec and o[2] == k.group(1)]\n"
        "    if hit:\n        if hit[0][0] == 'set':\n"
        f"            out.append({fmt!r}.format(k=hit[0][2], v=hit[0][3]))\n"
        "        continue\n    out.append(line)\n"
        f"open({path!r}, 'w').write(''.join(out))\n"
    )


def _config_set(w: World, fmt: str) -> Draft:
    """Shared draw of the YAML, INI and TOML key-edit families (their checks parse the format each)."""
    site = _site(w, "config")
    tree = _tree(w, w.randint(3, 5))
    ops = ("set", "set", "add", "drop") if fmt != "toml" else ("set", "set", "add")
    edits = _key_edits(w, tree, w.pick((1, 1, 2, 2, 3)), ops)
    indent = w.pick((2, 2, 4)) if fmt == "yaml" else 0
    want_tree = _apply(tree, edits)
    ext = {"yaml": w.pick(("yaml", "yml")), "ini": w.pick(("ini", "conf", "cfg")), "toml": "toml"}[fmt]
    name = f"{w.pick((site.app, 'app', 'settings', 'config'))}.{ext}"
    path = f"{site.folder}/{name}"
    if fmt == "yaml":
        body = _yaml_text(w, site.app, tree, indent)
        want: object = {"name": site.app, **want_tree}
    elif fmt == "ini":
        body = _ini_text(w, tree, w.pick((" = ", "=", " = ")))
        want = {s: {k: _lit(v, "ini") for k, v in keys.items()} for s, keys in want_tree.items()}
    else:
        body = _toml_text(site.app, tree, [])
        want = {"name": site.app, **want_tree}
    files = {path: body}
    hidden = w.chance(0.3)
    other_app = w.pick([p for p in PROJECTS if p != site.app])
    if hidden:  # a sibling config of another service: the one to edit is found by what it holds
        sib = f"{site.folder}/{other_app}.{ext}"
        other_tree = _tree(w, 3)
        files[sib] = (
            _yaml_text(w, other_app, other_tree, indent)
            if fmt == "yaml"
            else _ini_text(w, {"service": {"name": other_app}, **other_tree}, " = ")
            if fmt == "ini"
            else _toml_text(other_app, other_tree, [])
        )
        if (
            fmt == "ini"
        ):  # an INI file has no top-level name: both carry a [service] section saying whose it is
            files[path] = _ini_text(w, {"service": {"name": site.app}, **tree}, " = ")
            want = {"service": {"name": site.app}, **want}  # type: ignore[dict-item]
    for near in w.sample((f"{path}.bak", f"{path}.example", f"{path}.dist"), w.randint(1, 2)):
        files[near] = body
    ask = _say_edits(w, edits, fmt)
    label = {"yaml": "YAML", "ini": w.pick(("INI", "configparser-style", "settings")), "toml": "TOML"}[fmt]
    where = site.say(w, path)
    if hidden:
        where = _f(w, "the {l} config {h} that belongs to {a}", l=label, h=_here(w, site), a=site.app)
    task = w.phrase(
        "In {where}, {ask}. Every other setting keeps its value.",
        "Goal: the service reading {where} sees this change and nothing else: {ask}.",
        "Ticket: {app} needs new settings. Edit {where}: {ask}. Keep the file parseable.",
        "can you tweak {where}? {ask_c}, nothing else",
        "Edit {where} ({l}): {ask}.",
        "Please change {where} so the service picks up the following: {ask}. Leave everything else alone.",
        "The {l} config {where} is out of date: {ask}. Edit it in place; the .bak and example copies stay as they "
        "are.",
        "How would you {ask_l} in {where}? Just do it, in place, without touching any other key.",
        "I need {where} updated before the deploy: {ask}. The same key name elsewhere in the file must not change.",
        where=where,
        ask=ask,
        ask_c=_cap(ask),
        ask_l=ask.replace("; ", ", and "),
        app=site.app,
        l=label,
    )
    loader = {
        "yaml": "yaml_load(text(spec['path']))",
        "ini": "ini_load(spec['path'])",
        "toml": "toml_load(spec['path'])",
    }[fmt]
    spec = {
        "path": path,
        "want": want,
        "same": {p: _md5(b) for p, b in files.items() if p != path},
        "owned": site.owned(path),
    }
    check = _check(
        spec,
        f"got = {loader}\nif got != spec['want']:\n    fail(f'the settings are {{got}}, want {{spec[\"want\"]}}')",
    )
    p = site.sh(path)
    ref: list[str] = []
    if hidden:
        ref.append(
            w.pick(
                (
                    f"grep -l {site.app} {site.sh(site.folder)}/*.{ext}",
                    f"grep -rn 'name' {site.sh(site.folder)}",
                )
            )
        )
    ref.append(_look(w, site, path))
    how = w.pick(
        (
            "sed",
            "sed",
            "awk",
            "python",
            "perl" if len(edits) == 1 and edits[0].op == "set" else "sed",
            *(("configparser", "configparser") if fmt == "ini" else ()),
        )
    )
    if how == "configparser":  # the parser rewrites the file: comments go, the settings stay
        changes = "".join(
            f"cp.remove_option({e.sec!r}, {e.key!r})\n"
            if e.op == "drop"
            else f"cp.set({e.sec!r}, {e.key!r}, {_lit(e.value, fmt) if e.value is not None else ''!r})\n"
            for e in edits
        )
        ref += _py_heredoc(
            w,
            f"import configparser\ncp = configparser.ConfigParser(interpolation=None)\ncp.optionxform = str\n"
            f"cp.read({p!r})\n{changes}with open({p!r}, 'w') as fh:\n    cp.write(fh)\n",
        )
    elif how == "sed":
        ref += _sed_section_cmds(w, edits, fmt, p, indent)
    elif how == "awk":
        prog = _awk_section(edits, fmt, indent)
        ref += _rewrite(w, site, path, lambda s: f"awk {quote(prog)} {s}", "edit")
    elif how == "perl":
        e = edits[0]
        val = _lit(e.value, fmt) if e.value is not None else ""
        if fmt == "yaml":
            prog = f'$s = $1 if /^(\\w+):/; s#^(\\s+{e.key}:).*#$1 {val}# if $s eq "{e.sec}"'
        else:
            prog = f'$s = $1 if /^\\[(\\w+)\\]/; s#^{e.key}\\s*=.*#{e.key} = {val}# if $s eq "{e.sec}"'
        ref.append(f"perl -pi -e {quote(prog)} {p}")
    else:
        ref += _py_heredoc(w, _py_section_edit(edits, fmt, indent, p))
    if fmt == "toml" and w.chance(0.5):
        ref.append(f'python3 -c \'import tomllib; print(tomllib.load(open("{p}", "rb")))\'')
    else:
        ref.append(
            w.pick(
                (f"cat {p}", f"diff {site.sh(path + '.bak')} {p}" if f"{path}.bak" in files else f"cat {p}")
            )
        )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=min(4, 1 + len(edits) + hidden),
        files=files,
        setup=site.prepare([path]),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 11. structured-yaml-set-value
@family(
    "structured-yaml-set-value",
    CATEGORY,
    "set, add or remove keys of one section of a YAML config by hand (no YAML library), where the same key name "
    "sits in other sections",
)
def yaml_set_value(w: World) -> Draft:
    return _config_set(w, "yaml")


# =====================================================================================================================
# 13. structured-ini-edit
@family(
    "structured-ini-edit",
    CATEGORY,
    "set, add or remove a key in one [section] of an INI file whose other sections use the same key names",
)
def ini_edit(w: World) -> Draft:
    return _config_set(w, "ini")


# =====================================================================================================================
# 12. structured-yaml-list-edit
@family(
    "structured-yaml-list-edit",
    CATEGORY,
    "add or remove items of a YAML block list (plain items or mappings chosen by name) or change a field of one "
    "list entry, other lists and sections untouched",
)
def yaml_list_edit(w: World) -> Draft:
    site = _site(w, "config")
    tree = _tree(w, 2)
    indent = w.pick((2, 2, 4))
    pad = " " * indent
    hosts = [
        f"{x}.{w.pick(('example.com', 'internal', 'corp.lan'))}" for x in w.sample(_WORDS_OK, w.randint(3, 5))
    ]
    blocked = [w.pick(hosts), f"{w.pick(_WORDS_OK)}.badhost.net"]
    workers: list[dict[str, Any]] = [
        {"name": s, "replicas": w.randint(1, 6), "queue": w.pick(("default", "high", "low", "batch"))}
        for s in w.sample(SERVICES, w.randint(2, 4))
    ]
    lists_first = w.chance(0.5)
    lists: dict[str, list[Any]] = {"allowed_hosts": hosts, "blocked_hosts": blocked, "workers": workers}
    order = (
        ["allowed_hosts", "blocked_hosts", "workers"]
        if lists_first
        else ["workers", "allowed_hosts", "blocked_hosts"]
    )
    body = _yaml_text(w, site.app, tree, indent, {k: lists[k] for k in order})
    want_lists = json.loads(json.dumps(lists))
    op = w.pick(("add_host", "drop_host", "drop_worker", "add_worker", "set_worker", "set_worker"))
    p_path = f"{site.folder}/{w.pick(('app', site.app, 'deploy', 'values'))}.{w.pick(('yaml', 'yml'))}"
    p = site.sh(p_path)
    ref: list[str] = [_look(w, site, p_path)]
    if op == "add_host":
        new = f"{w.pick(_WORDS_OK)}-{w.randint(2, 9)}.{w.pick(('example.com', 'internal'))}"
        want_lists["allowed_hosts"].append(new)
        ask = _f(w, "{append|add} {n} to the end of allowed_hosts", n=new)
        last = hosts[-1]
        how = w.pick(("sed", "awk", "python", "perl"))
        if how == "perl":
            ref.append(f'perl -pi -e \'$_ .= "{pad}- {new}\\n" if $_ eq "{pad}- {last}\\n" && !$done++\' {p}')
        elif how == "sed":
            ref.append(f"sed -i '/^allowed_hosts:/,/^[^ ]/ s/^\\({pad}- {last}\\)$/\\1\\n{pad}- {new}/' {p}")
        elif how == "awk":
            prog = f'{{ print }} $0 == "{pad}- {last}" && !done {{ print "{pad}- {new}"; done = 1 }}'
            ref += _rewrite(w, site, p_path, lambda s: f"awk {quote(prog)} {s}", "edit")
        else:
            ref += _py_heredoc(
                w,
                f"lines = open({p!r}).read().split('\\n')\ni = lines.index({pad + '- ' + last!r})\n"
                f"lines.insert(i + 1, {pad + '- ' + new!r})\nopen({p!r}, 'w').write('\\n'.join(lines))\n",
            )
        w.note(new)
    elif op == "drop_host":
        gone = blocked[0]
        want_lists["allowed_hosts"].remove(gone)
        ask = _f(w, "{remove|drop} {g} from allowed_hosts (it stays in blocked_hosts)", g=gone)
        how = w.pick(("sed", "awk", "python", "perl"))
        if how == "perl":
            ref.append(
                f"perl -ni -e '$s = $1 if /^(\\w+):/; print unless $s eq \"allowed_hosts\" && /^\\s*- {_re_escape(gone)}$/' {p}"
            )
        elif how == "sed":
            ref.append(f"sed -i '/^allowed_hosts:/,/^[^ ]/ {{/^{pad}- {gone}$/d}}' {p}")
        elif how == "awk":
            prog = f'/^[^ #]/ {{ sec = $1 }} sec == "allowed_hosts:" && $0 == "{pad}- {gone}" {{ next }} 1'
            ref += _rewrite(w, site, p_path, lambda s: f"awk {quote(prog)} {s}", "edit")
        else:
            ref += _py_heredoc(
                w,
                f"out, sec = [], None\nfor line in open({p!r}):\n    if line[:1].isalpha():\n"
                f"        sec = line.split(':')[0]\n    if sec == 'allowed_hosts' and line.rstrip() == {pad + '- ' + gone!r}:\n"
                f"        continue\n    out.append(line)\nopen({p!r}, 'w').write(''.join(out))\n",
            )
        w.note(gone)
    elif op == "drop_worker":
        gone_w = w.pick(workers)["name"]
        want_lists["workers"] = [x for x in want_lists["workers"] if x["name"] != gone_w]
        ask = _f(w, "{remove|delete} the {n} entry from workers (all of its fields)", n=gone_w)
        how = w.pick(("sed", "awk", "python", "perl"))
        if how == "perl":
            ref.append(f"perl -ni -e '$n = 3 if /^\\s*- name: {gone_w}$/; print unless $n-- > 0' {p}")
        elif how == "sed":
            ref.append(f"sed -i '/^{pad}- name: {gone_w}$/,+2d' {p}")
        elif how == "awk":
            prog = f'$0 == "{pad}- name: {gone_w}" {{ skip = 3 }} skip > 0 {{ skip--; next }} 1'
            ref += _rewrite(w, site, p_path, lambda s: f"awk {quote(prog)} {s}", "edit")
        else:
            ref += _py_heredoc(
                w,
                f"lines = open({p!r}).readlines()\ni = lines.index({pad + '- name: ' + gone_w + chr(10)!r})\n"
                f"del lines[i:i + 3]\nopen({p!r}, 'w').writelines(lines)\n",
            )
        w.note(gone_w)
    elif op == "add_worker":
        new_w = {
            "name": w.pick([s for s in SERVICES if s not in {x["name"] for x in workers}]),
            "replicas": w.randint(1, 6),
            "queue": w.pick(("default", "high", "batch")),
        }
        want_lists["workers"].append(new_w)
        ask = _f(
            w,
            "add a worker {n} with replicas {r} and queue {q} at the end of workers",
            n=new_w["name"],
            r=new_w["replicas"],
            q=new_w["queue"],
        )
        block = [
            f"{pad}- name: {new_w['name']}",
            f"{pad}  replicas: {new_w['replicas']}",
            f"{pad}  queue: {new_w['queue']}",
        ]
        last_worker = workers[-1]
        anchor = f"{pad}  queue: {last_worker['queue']}"
        if order[-1] == "workers" and w.chance(0.7):
            ref.append(
                w.pick(
                    (
                        f"cat >> {p} <<'EOF'\n" + "\n".join(block) + "\nEOF",
                        f"printf '%s\\n' {' '.join(quote(b) for b in block)} >> {p}",
                    )
                )
            )
        else:
            ref += _py_heredoc(
                w,
                f"lines = open({p!r}).read().split('\\n')\nstart = lines.index({pad + '- name: ' + last_worker['name']!r})\n"
                f"i = lines.index({anchor!r}, start)\nlines[i + 1:i + 1] = {block!r}\n"
                f"open({p!r}, 'w').write('\\n'.join(lines))\n",
            )
        w.note(new_w["name"], new_w["replicas"])
    else:
        target = w.pick(workers)
        field_name = w.pick(("replicas", "queue"))
        new_v: Scalar = (
            w.pick([x for x in range(1, 12) if x != target["replicas"]])
            if field_name == "replicas"
            else w.pick([q for q in ("default", "high", "low", "batch", "critical") if q != target["queue"]])
        )
        for x in want_lists["workers"]:
            if x["name"] == target["name"]:
                x[field_name] = new_v
        ask = _f(w, "{set|change} {f} of the {n} worker to {v}", f=field_name, n=target["name"], v=new_v)
        how = w.pick(("sed", "awk", "python"))
        if how == "sed":
            ref.append(
                f"sed -i '/^{pad}- name: {target['name']}$/,/^{pad}- name:\\|^[^ ]/ "
                f"s/^\\({pad}  {field_name}:\\).*/\\1 {new_v}/' {p}"
            )
        elif how == "awk":
            prog = (
                f'/^ *- name:/ {{ cur = $3 }} /^[^ ]/ {{ cur = "" }} '
                f'cur == "{target["name"]}" && $1 == "{field_name}:" {{ sub(/:.*/, ": {new_v}") }} 1'
            )
            ref += _rewrite(w, site, p_path, lambda s: f"awk {quote(prog)} {s}", "edit")
        else:
            ref += _py_heredoc(
                w,
                f"lines = open({p!r}).readlines()\nstart = lines.index({pad + '- name: ' + target['name'] + chr(10)!r})\n"
                f"for i in range(start + 1, start + 3):\n    if lines[i].strip().startswith({field_name + ':'!r}):\n"
                f"        lines[i] = {pad + '  ' + field_name + ': ' + str(new_v) + chr(10)!r}\n"
                f"open({p!r}, 'w').writelines(lines)\n",
            )
        w.note(target["name"], field_name, new_v)
    files = {p_path: body}
    for near in w.sample(
        (f"{p_path}.orig", f"{site.folder}/values.example.yaml", f"{p_path}.bak"), w.randint(1, 2)
    ):
        files[near] = body
    where = site.say(w, p_path)
    task = w.phrase(
        "In {where}, {ask}. The other lists and settings stay exactly as they are.",
        "Goal: once {where} is edited, {ask_l_goal} and every other entry reads as before.",
        "Ticket: {app} deploy config. Edit {where} and {ask}; keep it valid YAML.",
        "quick yaml edit in {where}: {ask}",
        "Could you {ask} in {where}? Nothing else in the file should change.",
        "{where_c} needs one change before the rollout: {ask}.",
        "Please edit the YAML file {where} by hand ({ask}). The copies beside it stay as they are.",
        "What does {where} need? This: {ask}. Do it in place.",
        "For the {app} rollout, {ask} in {where} and leave every other entry alone.",
        where=where,
        where_c=_cap(where),
        ask=ask,
        ask_l_goal=ask,
        app=site.app,
    )
    want = {"name": site.app, **tree, **want_lists}
    spec = {
        "path": p_path,
        "want": want,
        "same": {q: _md5(b) for q, b in files.items() if q != p_path},
        "owned": site.owned(p_path),
    }
    check = _check(
        spec,
        "got = yaml_load(text(spec['path']))\nif got != spec['want']:\n    fail(f'the document is {got}')",
    )
    ref.append(f"cat {p}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if op in ("drop_worker", "set_worker", "add_worker") else 2,
        files=files,
        setup=site.prepare([p_path]),
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 14. structured-toml-table-edit
@family(
    "structured-toml-table-edit",
    CATEGORY,
    "edit a TOML config: a value in one [table], a field of the [[array-of-tables]] entry with a given name, or a "
    "new entry appended, keeping it valid TOML",
)
def toml_table_edit(w: World) -> Draft:
    site = _site(w, "config")
    tree = _tree(w, w.randint(2, 3))
    mirs: list[dict[str, Scalar]] = [
        {"name": s, "url": f"http://{s}.internal", "weight": w.randint(1, 9), "enabled": True}
        for s in w.sample(SERVICES, w.randint(2, 4))
    ]
    body = _toml_text(site.app, tree, mirs)
    want_tree = {s: dict(k) for s, k in tree.items()}
    want_mirs = [dict(u) for u in mirs]
    name = f"{w.pick((site.app, 'config', 'settings', 'mirrors'))}.toml"
    path = f"{site.folder}/{name}"
    p = site.sh(path)
    ops = w.sample(("entry", "entry", "append", "table"), w.pick((1, 1, 2)))
    asks: list[str] = []
    ref: list[str] = [w.pick((f"cat {p}", f"grep -n '^\\[' {p}", f"cat -n {p}"))]
    py_ops: list[str] = []
    seen_entry: set[str] = set()
    for op in ops:
        if op == "entry":
            target = w.pick([u for u in mirs if str(u["name"]) not in seen_entry])
            seen_entry.add(str(target["name"]))
            fld = w.pick(("weight", "enabled", "url"))
            new: Scalar = (
                w.pick([x for x in range(1, 20) if x != target["weight"]])
                if fld == "weight"
                else False
                if fld == "enabled"
                else f"https://{target['name']}.{w.pick(_WORDS_OK)}.internal"
            )
            for u in want_mirs:
                if u["name"] == target["name"]:
                    u[fld] = new
            lit = _lit(new, "toml")
            asks.append(
                _f(w, "{set|change} {f} of the mirror named {n} to {v}", f=fld, n=target["name"], v=lit)
            )
            how = w.pick(("sed", "awk", "python"))
            esc = lit.replace("/", "\\/")
            if how == "sed":
                ref.append(f"sed -i '/^name = \"{target['name']}\"$/,/^$/ s/^{fld} = .*/{fld} = {esc}/' {p}")
            elif how == "awk":
                prog = (
                    f'/^\\[/ {{ cur = "" }} /^name = / {{ cur = $3 }} '
                    f'cur == "\\"{target["name"]}\\"" && $1 == "{fld}" {{ $0 = "{fld} = {lit.replace(chr(34), chr(92) + chr(34))}" }} 1'
                )
                ref += _rewrite(w, site, path, partial(_awk_run, prog), "edit")
            else:
                py_ops.append(
                    f"cur = None\nfor i, line in enumerate(lines):\n    if line.startswith('['):\n        cur = None\n"
                    f"    if line.startswith('name = '):\n        cur = line.split('=', 1)[1].strip().strip('\"')\n"
                    f"    if cur == {target['name']!r} and line.split('=')[0].strip() == {fld!r}:\n"
                    f"        lines[i] = {fld + ' = ' + lit!r}\n"
                )
            w.note(target["name"], fld, _say(new))
        elif op == "append":
            new_up: dict[str, Scalar] = {
                "name": w.pick([s for s in SERVICES if s not in {str(u["name"]) for u in mirs}]),
                "url": "",
                "weight": w.randint(1, 9),
                "enabled": True,
            }
            new_up["url"] = f"http://{new_up['name']}.internal"
            want_mirs.append(new_up)
            asks.append(
                _f(
                    w,
                    "add an mirror {n} (url {u}, weight {wt}, enabled) after the others",
                    n=new_up["name"],
                    u=new_up["url"],
                    wt=new_up["weight"],
                )
            )
            lines = ["[[mirrors]]"] + [f"{k} = {_lit(v, 'toml')}" for k, v in new_up.items()]
            ref.append(
                w.pick(
                    (
                        f"cat >> {p} <<'EOF'\n\n" + "\n".join(lines) + "\nEOF",
                        f"printf '\\n%s\\n' {' '.join(quote(x) for x in lines)} >> {p}",
                    )
                )
            )
            w.note(new_up["name"], new_up["weight"])
        else:
            sec, key = w.pick(_shared_key(tree) or [(s, k) for s in tree for k in tree[s]])
            new_t = _new_value(w, tree[sec][key], key)
            want_tree[sec][key] = new_t
            lit = _lit(new_t, "toml")
            asks.append(_f(w, "{set|change} {k} in the [{s}] table to {v}", k=key, s=sec, v=lit))
            ref.append(
                f"sed -i '/^\\[{sec}\\]/,/^\\[/ s/^{key} = .*/{key} = {lit.replace('/', chr(92) + '/')}/' {p}"
            )
            w.note(sec, key, _say(new_t))
    if py_ops:
        ref += _py_heredoc(
            w,
            f"lines = open({p!r}).read().split('\\n')\n"
            + "".join(py_ops)
            + f"open({p!r}, 'w').write('\\n'.join(lines))\n",
        )
    files = {path: body}
    for near in w.sample(
        (f"{path}.bak", f"{site.folder}/{name.replace('.toml', '.example.toml')}"), w.randint(1, 2)
    ):
        files[near] = body
    ask = w.clauses(asks)
    where = site.say(w, path)
    task = w.phrase(
        "In {where}, {ask}. Keep it valid TOML; nothing else changes.",
        "Goal: tomllib reads {where} with this difference only: {ask}.",
        "Ticket: mirror change for {app}. Edit {where}: {ask}.",
        "toml edit pls - {where}: {ask}",
        "Could you update {where}? {ask_c}. The other mirrors and tables keep their values.",
        "{where_c} is {app}'s mirror list. {ask_c}.",
        "Which settings change? {ask_c}. They live in {where}; edit it in place.",
        "Please {ask} in {where}, leaving the rest of the file alone.",
        "Before tonight's deploy, {ask} ({where}). It must still parse as TOML.",
        where=where,
        where_c=_cap(where),
        ask=ask,
        ask_c=_cap(ask),
        app=site.app,
    )
    want = {"name": site.app, **want_tree, "mirrors": want_mirs}
    spec = {
        "path": path,
        "want": want,
        "same": {q: _md5(b) for q, b in files.items() if q != path},
        "owned": site.owned(path),
    }
    check = _check(
        spec, "got = toml_load(spec['path'])\nif got != spec['want']:\n    fail(f'the document is {got}')"
    )
    ref.append(w.pick((f"cat {p}", f'python3 -c \'import tomllib; print(tomllib.load(open("{p}", "rb")))\'')))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=min(4, 1 + len(ops) + ("entry" in ops)),
        files=files,
        setup=site.prepare([path]),
        user=site.user,
        workdir=site.wd,
    )


# ---- SQLite ---------------------------------------------------------------------------------------------------------
def _sql_type(kind: str) -> str:
    return "INTEGER" if kind.startswith("int:") else "REAL" if kind.startswith("dec:") else "TEXT"


def _sql_lit(value: str, kind: str) -> str:
    return value if kind.startswith(("int:", "dec:")) else "'" + value.replace("'", "''") + "'"


def _table_sql(name: str, table: Table) -> str:
    cols = ", ".join(f"{c} {_sql_type(k)}" + (" PRIMARY KEY" if k == "key" else "") for c, k in table.cols)
    rows = "".join(
        f"INSERT INTO {name} VALUES ({', '.join(_sql_lit(v, k) for v, (_, k) in zip(r, table.cols, strict=True))});\n"
        for r in table.rows
    )
    return f"CREATE TABLE {name} ({cols});\n{rows}"


def _db_build(w: World, site: Site, db: str, sql: str) -> tuple[dict[str, str], list[str]]:
    """The seed file and the setup lines that build ``db`` as root and hand it to the site's owner and mode."""
    seed = f"/root/seed_{w.token(6)}.sql"
    lines = [f"sqlite3 {quote(db)} < {seed} && rm {seed}"]
    if site.owner != "root":
        lines.append(f"chown {site.owner}:{site.owner} {quote(db)}")
    if site.mode != 0o644:
        lines.append(f"chmod {site.mode:o} {quote(db)}")
    return {seed: sql}, lines


def _other_table(w: World, avoid: str) -> tuple[str, Table]:
    """A second table of the database that a task must leave as it is."""
    stem = w.pick([s for s, _ in _CSV_SCHEMAS if s != avoid])
    return stem, _csv_table(w, w.randint(3, 5), stem=stem)


_DB_ROWS = "def table_rows(db, t):\n    return [[str(v) for v in r] for r in db_rows(db, f'SELECT * FROM {t} ORDER BY rowid')]\n"


def _sqlite_run(w: World, db: str, statements: Sequence[str]) -> list[str]:
    """Reference lines running SQL statements on ``db``: an argument, a pipe, a heredoc, or a script file read in."""
    sql = "\n".join(statements)
    how = w.pick(
        ("arg", "echo", "printf", "heredoc", "file", "read", "python", "each", "bail", "pyc", "verbose")
    )
    if how == "printf":
        return [f"printf '%s\\n' {' '.join(quote(x) for x in statements)} | sqlite3 {db}"]
    if how == "verbose":
        return [f"sqlite3 -echo {db} {quote(' '.join(statements))}"]
    if how == "each" and len(statements) > 1:
        return [f"sqlite3 {db} {quote(x)}" for x in statements]
    if how == "bail":
        return [f"sqlite3 -bail {db} {quote(' '.join(statements))}"]
    if how == "pyc":
        script = f"import sqlite3; c = sqlite3.connect({db!r}); c.executescript({' '.join(statements)!r}); c.commit()"
        return [f"python3 -c {quote(script)}"]
    if how in ("arg", "each"):
        return [f"sqlite3 {db} {quote(' '.join(statements))}"]
    if how == "echo":
        return [f"echo {quote(' '.join(statements))} | sqlite3 {db}"]
    if how == "heredoc":
        return [f"sqlite3 {db} <<'SQL'\n{sql}\nSQL"]
    if how == "file":
        bail = w.pick(("-bail ", ""))
        return [f"cat > /tmp/change.sql <<'SQL'\n{sql}\nSQL", f"sqlite3 {bail}{db} < /tmp/change.sql"]
    if how == "read":
        return [f"cat > /tmp/change.sql <<'SQL'\n{sql}\nSQL", f"sqlite3 {db} '.read /tmp/change.sql'"]
    return _py_heredoc(
        w,
        f"import sqlite3\ncon = sqlite3.connect({db!r})\ncon.executescript({sql!r})\ncon.commit()\ncon.close()\n",
    )


# =====================================================================================================================
# 15. structured-sqlite-import-csv
@family(
    "structured-sqlite-import-csv",
    CATEGORY,
    "load a CSV file into a new SQLite table with typed columns (numbers stored as numbers, the header not a row)",
)
def sqlite_import_csv(w: World) -> Draft:
    site = _site(w, "db")
    table = _csv_table(w, w.randint(5, 10))
    tname = w.pick((table.stem, f"{table.stem}_import", f"raw_{table.stem}"))
    db = f"{site.folder}/{w.pick((site.app, 'app', 'warehouse', 'local'))}.db"
    csv_path = (
        f"{site.folder}/{w.pick(('incoming', 'import', 'drop'))}/{table.stem}-{w.randint(1, 28):02d}.csv"
    )
    ostem, other = _other_table(w, table.stem)
    exists = w.chance(0.6)
    files = {csv_path: _csv_text([table.header, *table.rows])}
    setup = site.prepare()
    if exists:
        seed, lines = _db_build(w, site, db, _table_sql(ostem, other))
        files.update(seed)
        setup += lines
    nums = table.numeric()
    types = ", ".join(f"{c} {_sql_type(k)}" for c, k in table.cols)
    w.note(tname, ostem, *nums)
    rule = _f(
        w,
        "{the columns are named as in the CSV header|columns keep the header's names}, {n} typed INTEGER or REAL "
        "so they sort and sum as numbers, {and the header line itself is not imported|and the header is not "
        "loaded as a record}",
        n=", ".join(nums),
    )
    dbs = site.say(w, db)
    task = w.phrase(
        "Load {csv} into a new table {t} in {db}: {rule}.",
        "Goal: SELECT queries on {t} in {db} return the records of {csv} ({rule}).",
        "Ticket: the {stem} drop {csv} has to go into {db} as table {t}. Requirements: {rule}.",
        "import {csv} into {db} as {t} - {rule}",
        "Could you create the table {t} in {db} from {csv}? {rule_c}.",
        "We query the {stem} export with SQL from now on. Import {csv} into {db} as {t}; {rule}.",
        "{db_c} needs a table {t} holding every record of {csv} ({rule}).{keep}",
        "How do we get {csv} into {db}? As table {t}, please: {rule}.{keep}",
        "Create {t} in {db} from the CSV {csv}. Schema: {types}; {rule}.{keep}",
        csv=site.say(w, csv_path),
        t=tname,
        db=dbs,
        db_c=_cap(dbs),
        rule=rule,
        rule_c=_cap(rule),
        stem=table.stem,
        types=types,
        keep=" " + _f(w, "{o}, already in there, stays as it is.", o=ostem) if exists else "",
    )
    spec = {
        "db": db,
        "t": tname,
        "header": table.header,
        "nums": nums,
        "rows": table.rows,
        "other": ostem if exists else "",
        "orows": other.rows,
        "same": {csv_path: _md5(files[csv_path])},
    }
    check = _check(
        spec,
        _DB_ROWS
        + """
db, t = spec["db"], spec["t"]
cols = [r[1] for r in db_rows(db, f"PRAGMA table_info({t})")]
if cols != spec["header"]:
    fail(f"table {t} has columns {cols}, want {spec['header']}")
for c in spec["nums"]:
    kinds = {r[0] for r in db_rows(db, f"SELECT typeof({c}) FROM {t}")}
    if not kinds <= {"integer", "real"}:
        fail(f"{c} holds {sorted(kinds)} values, not numbers")
if not same_rows(table_rows(db, t), spec["rows"]):
    fail(f"the rows of {t} are not the CSV's data rows")
if spec["other"] and not same_rows(table_rows(db, spec["other"]), spec["orows"]):
    fail(f"table {spec['other']} changed")
""",
    )
    d, c = site.sh(db), site.sh(csv_path)
    create = f"CREATE TABLE {tname} ({types});"
    how = w.pick(("heredoc", "two", "args", "skipfile", "python", "stage", "csvflag", "cmd"))
    if how == "csvflag":
        ref_extra = [f"sqlite3 {d} {quote(create)}", f"sqlite3 -csv {d} '.import --skip 1 {c} {tname}'"]
    elif how == "cmd":
        ref_extra = [f"sqlite3 -cmd {quote(create)} -cmd '.mode csv' {d} '.import --skip 1 {c} {tname}'"]
    else:
        ref_extra = []
    ref = [w.pick((f"head -n 3 {c}", f"wc -l {c}"))]
    if exists:
        ref.append(f"sqlite3 {d} .tables")
    ref += ref_extra
    if how == "heredoc":
        ref.append(f"sqlite3 {d} <<'SQL'\n{create}\n.import --csv --skip 1 {c} {tname}\nSQL")
    elif how == "two":
        ref += [f"sqlite3 {d} {quote(create)}", f"sqlite3 {d} '.import --csv --skip 1 {c} {tname}'"]
    elif how == "args":
        ref.append(f"sqlite3 {d} {quote(create)} '.mode csv' '.import --skip 1 {c} {tname}'")
    elif how == "skipfile":
        ref += [
            f"tail -n +2 {c} > /tmp/rows.csv",
            f"sqlite3 {d} {quote(create)} '.import --csv /tmp/rows.csv {tname}'",
        ]
    elif how == "stage":
        casts = ", ".join(
            f"CAST({h} AS {_sql_type(k)}) AS {h}" if k.startswith(("int:", "dec:")) else h
            for h, k in table.cols
        )
        ref.append(
            f"sqlite3 {d} <<'SQL'\n.import --csv {c} staging\nCREATE TABLE {tname} AS SELECT {casts} FROM staging;\n"
            "DROP TABLE staging;\nSQL"
        )
    else:
        conv = ", ".join(
            f"int(r[{i}])"
            if k.startswith("int:")
            else f"float(r[{i}])"
            if k.startswith("dec:")
            else f"r[{i}]"
            for i, (_, k) in enumerate(table.cols)
        )
        marks = ", ".join("?" for _ in table.cols)
        ref += _py_heredoc(
            w,
            f"import csv, sqlite3\nrows = list(csv.reader(open({c!r}, newline='')))[1:]\n"
            f"con = sqlite3.connect({d!r})\ncon.execute({create!r})\n"
            f"con.executemany('INSERT INTO {tname} VALUES ({marks})', [({conv},) for r in rows])\n"
            "con.commit()\n",
        )
    ref.append(
        w.pick(
            (
                f"sqlite3 {d} '.schema {tname}'",
                f"sqlite3 {d} 'SELECT typeof({nums[0]}), count(*) FROM {tname}'",
            )
        )
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if exists else 2,
        files=files,
        setup=setup,
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 16. structured-sqlite-join-report
@family(
    "structured-sqlite-join-report",
    CATEGORY,
    "join two SQLite tables and write a per-group report (count and total) as CSV with a header, in a given order",
)
def sqlite_join_report(w: World) -> Draft:
    site = _site(w, "db")
    n_c = w.randint(4, 7)
    names = w.sample(FIRST_NAMES, n_c)
    cities = w.sample(CITIES, 3)
    customers = [[str(i + 1), nm, w.pick(cities)] for i, nm in enumerate(names)]
    orders: list[list[str]] = []
    for j in range(w.randint(8, 16)):
        buyer = w.randint(1, n_c - 1)  # the last customer has no orders
        orders.append(
            [
                str(100 + j),
                str(buyer),
                f"{w.randint(500, 90000) / 100:.2f}",
                w.pick(("paid", "paid", "shipped", "refunded", "open")),
                f"{w.date('2024-01-01', 300):%Y-%m-%d}",
            ]
        )
    by = w.pick(("name", "name", "city"))
    status = w.pick(("", "", "paid", "shipped"))
    left = by == "name" and w.chance(0.4)
    if status and not any(o[3] == status for o in orders):  # the report is never just a header
        orders[0][3] = status
    rows = [r for r in orders if not status or r[3] == status]
    groups: dict[str, list[float]] = {}
    for c in customers:
        if left:
            groups.setdefault(c[1], [])
    for r in rows:
        cust = customers[int(r[1]) - 1]
        groups.setdefault(cust[1] if by == "name" else cust[2], []).append(float(r[2]))
    order_by = w.pick(("total", "key"))
    keys = (
        sorted(groups, key=lambda k: (-round(sum(groups[k]), 2), k))
        if order_by == "total"
        else sorted(groups)
    )
    label = "customer" if by == "name" else "city"
    want = [[label, "orders", "total"]] + [[k, str(len(groups[k])), f"{sum(groups[k]):.2f}"] for k in keys]
    db = f"{site.folder}/{w.pick(('shop', 'sales', site.app, 'orders'))}.db"
    sql_seed = (
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);\n"
        + "".join(f"INSERT INTO customers VALUES ({c[0]}, '{c[1]}', '{c[2]}');\n" for c in customers)
        + "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL, status TEXT, day TEXT);\n"
        + "".join(
            f"INSERT INTO orders VALUES ({o[0]}, {o[1]}, {o[2]}, '{o[3]}', '{o[4]}');\n" for o in orders
        )
    )
    seed, lines = _db_build(w, site, db, sql_seed)
    out = f"{site.folder}/{w.pick(('report', 'reports/' + label + '-totals', 'sales-by-' + label))}.csv"
    files = dict(seed)
    setup = site.prepare() + lines
    w.note(label, status)
    what = _f(
        w,
        "{for each|per} {l}: the number of {s}orders and their total amount (two decimals)",
        l=label,
        s=f"{status} " if status else "",
    )
    extras = []
    if left:
        extras.append(
            _f(
                w,
                "customers without {s}orders are listed too, with 0 and 0.00",
                s=f"{status} " if status else "",
            )
        )
    sort = _f(w, "biggest total first") if order_by == "total" else _f(w, "sorted by {l}", l=label)
    spec_say = w.clauses([what, sort, *extras])
    task = w.phrase(
        "From {db} (tables customers and orders), write {out}: {spec}. CSV with the header {h}.",
        "Goal: a spreadsheet-ready {out} ({h}) computed from {db}: {spec}.",
        "Ticket: sales wants a {l} report from {db}. Join orders to customers and write {out} (header {h}): {spec}.",
        "report from {db} -> {out}, header {h}: {spec}",
        "Could you build {out} out of the customers and orders tables in {db}? {spec_c}; header line {h}.",
        "How much did each {l} order? Answer in {out} (CSV, header {h}) from {db}: {spec}.",
        "{out} should summarise {db}'s orders by {l}: {spec}. The header is {h}.",
        "Write a CSV report {out} with header {h} from the SQLite database {db}: {spec}.",
        "For the monthly review, produce {out} from {db} - {spec}; columns {h}.",
        db=site.say(w, db),
        out=site.say(w, out),
        l=label,
        h=",".join(want[0]),
        spec=spec_say,
        spec_c=_cap(spec_say),
    )
    spec = {"out": out, "rows": want, "tol": 0.0051}
    check = _check(spec, 'want_csv(spec["out"], spec["rows"], tol=spec["tol"])')
    key_sql = "c.name" if by == "name" else "c.city"
    join = "LEFT JOIN" if left else "JOIN"
    cond = f" AND o.status = '{status}'" if status and left else ""
    where = f" WHERE o.status = '{status}'" if status and not left else ""
    order_sql = "total DESC, " + label if order_by == "total" else label
    sql = (
        f"SELECT {key_sql} AS {label}, COUNT(o.id) AS orders, printf('%.2f', COALESCE(SUM(o.amount), 0)) AS total "
        f"FROM customers c {join} orders o ON o.customer_id = c.id{cond}{where} GROUP BY {key_sql} "
        f"ORDER BY {'SUM(o.amount) DESC, ' + label if order_by == 'total' else order_sql};"
    )
    d, o = site.sh(db), site.sh(out)
    ref = [
        w.pick(
            (
                f"sqlite3 {d} .schema",
                f"sqlite3 {d} '.tables'",
                f"sqlite3 {d} 'PRAGMA table_info(orders)'",
            )
        )
    ]
    if posixpath.dirname(out) != site.folder:
        ref.append(f"mkdir -p {site.sh(posixpath.dirname(out))}")
    how = w.pick(("csv", "csv", "dot", "python", "sep", "once", "cmd", "tee"))
    if how == "cmd":
        ref.append(f"sqlite3 -cmd '.headers on' -cmd '.mode csv' {d} {quote(sql)} > {o}")
    elif how == "tee":
        ref.append(f"sqlite3 -csv -header {d} {quote(sql)} | tee {o}")
    elif how == "csv":
        ref.append(f"sqlite3 {w.pick(('-csv -header', '-header -csv'))} {d} {quote(sql)} > {o}")
    elif how == "sep":
        ref.append(f"sqlite3 -header -separator , {d} {quote(sql)} > {o}")
    elif how == "dot":
        ref.append(f"sqlite3 {d} <<'SQL'\n.headers on\n.mode csv\n.output {o}\n{sql}\nSQL")
    elif how == "once":
        ref.append(f"sqlite3 -header -csv {d} '.once {o}' {quote(sql)}")
    else:
        ref += _py_heredoc(
            w,
            f"import csv, sqlite3\ncon = sqlite3.connect({d!r})\ncur = con.execute({sql!r})\n"
            f"with open({o!r}, 'w', newline='') as fh:\n    out = csv.writer(fh)\n"
            "    out.writerow([c[0] for c in cur.description])\n    out.writerows(cur)\n",
        )
    if site.owner not in ("root", site.user) and w.chance(0.3):
        ref.append(f"chown {site.owner}:{site.owner} {o}")
    ref.append(f"cat {o}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if left or status else 2,
        files=files,
        setup=setup,
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 17. structured-sqlite-alter-table
@family(
    "structured-sqlite-alter-table",
    CATEGORY,
    "change a SQLite table's schema in place (add a column with a default, rename or drop a column, rename the "
    "table), keeping its data",
)
def sqlite_alter_table(w: World) -> Draft:
    site = _site(w, "db")
    table = _csv_table(w, w.randint(4, 8))
    tname = w.pick((table.stem, f"{table.stem}_v1", f"app_{table.stem}"))
    ostem, other = _other_table(w, table.stem)
    w.note(tname, ostem)
    db = f"{site.folder}/{w.pick((site.app, 'app', 'main', 'state'))}.db"
    seed, lines = _db_build(w, site, db, _table_sql(tname, table) + _table_sql(ostem, other))
    cols = list(table.header)
    values = [list(r) for r in table.rows]
    kinds = w.sample(("add", "add", "rename_col", "drop", "rename_table"), w.pick((1, 1, 2)))
    stmts: list[str] = []
    asks: list[str] = []
    final = tname
    added: tuple[str, str, str] | None = None  # name, SQL type, default literal
    for kind in sorted(kinds, key=lambda k: k == "rename_table"):
        if kind == "add":
            name, typ, default = w.pick(
                (
                    ("status", "TEXT", w.pick(("'active'", "'new'", "'pending'"))),
                    ("priority", "INTEGER", str(w.randint(0, 5))),
                    ("archived", "INTEGER", "0"),
                    ("region", "TEXT", w.pick(("'eu'", "'us'", "'apac'"))),
                    ("weight", "REAL", w.pick(("1.0", "0.5"))),
                )
            )
            if name in cols:
                name = f"{name}_flag"
            added = (name, typ, default)
            cols.append(name)
            for r in values:
                r.append(default.strip("'"))
            stmts.append(f"ALTER TABLE {final} ADD COLUMN {name} {typ} NOT NULL DEFAULT {default};")
            asks.append(
                _f(
                    w,
                    "{add|give it} a column {n} ({t}, NOT NULL) whose default is {d}, so existing records "
                    "get {d} too",
                    n=name,
                    t=typ,
                    d=default,
                )
            )
            w.note(name, default.strip("'"))
        elif kind == "rename_col":
            old = w.pick([c for c in cols[1:] if not added or c != added[0]])
            new = w.pick((f"{old}_old", f"legacy_{old}", old.replace("_", "") + "_v2"))
            cols[cols.index(old)] = new
            stmts.append(f"ALTER TABLE {final} RENAME COLUMN {old} TO {new};")
            asks.append(_f(w, "rename the column {o} to {n}", o=old, n=new))
            w.note(old, new)
        elif kind == "drop":
            gone = w.pick([c for c in cols[1:] if not added or c != added[0]])
            i = cols.index(gone)
            del cols[i]
            for r in values:
                del r[i]
            stmts.append(f"ALTER TABLE {final} DROP COLUMN {gone};")
            asks.append(_f(w, "{drop|remove} the column {g} (nothing reads it any more)", g=gone))
            w.note(gone)
        else:
            new_t = w.pick((f"{table.stem}_archive", f"old_{table.stem}", f"{table.stem}_2023"))
            stmts.append(f"ALTER TABLE {final} RENAME TO {new_t};")
            asks.append(
                _f(w, "rename the table itself to {n} (its columns and values move with it)", n=new_t)
            )
            final = new_t
            w.note(new_t)
    ask = w.clauses(asks)
    dbs = site.say(w, db)
    task = w.phrase(
        "Schema migration for {db}, {t}: {ask}. Every stored value survives.",
        "Goal: {t} in {db} ends up migrated - {ask} - with no stored value lost.",
        "Ticket: migration for {app}. In {db}, {t}: {ask}. {o} is not part of it.",
        "alter {t} in {db}: {ask}",
        "Could you migrate the schema of {t} in {db}? {ask_c}. Keep every record.",
        "The new release expects another layout of {t} in {db}: {ask}. Nothing is lost from the other columns.",
        "How do I alter {t} in {db} so that I can {ask_l}? Please apply it directly.",
        "Migration step for {db}: {ask} ({t}); the schema of {o} stays.",
        "Before deploying, migrate {t} in {db}: {ask}. The existing values must survive.",
        db=dbs,
        db_c=_cap(dbs),
        t=tname,
        o=ostem,
        ask=ask,
        ask_c=_cap(ask),
        ask_l=ask.replace("; ", " and "),
        app=site.app,
    )
    spec = {
        "db": db,
        "t": final,
        "old": tname if final != tname else "",
        "cols": cols,
        "rows": values,
        "added": list(added) if added else [],
        "other": ostem,
        "orows": other.rows,
        "owned": site.owned(db),
    }
    check = _check(
        spec,
        _DB_ROWS
        + """
db, t = spec["db"], spec["t"]
info = db_rows(db, f"PRAGMA table_info({t})")
if [r[1] for r in info] != spec["cols"]:
    fail(f"table {t} has columns {[r[1] for r in info]}, want {spec['cols']}")
if spec["old"] and db_rows(db, f"SELECT name FROM sqlite_master WHERE name = '{spec['old']}'"):
    fail(f"table {spec['old']} still exists")
if not same_rows(table_rows(db, t), spec["rows"]):
    fail(f"the data of {t} changed")
if spec["added"]:
    name, typ, default = spec["added"]
    col = next(r for r in info if r[1] == name)
    if str(col[4]).strip("'\\"") != default.strip("'") and not same_cell(str(col[4]), default):
        fail(f"{name} defaults to {col[4]}, want {default}")
    if not col[3]:
        fail(f"{name} may be NULL")
if not same_rows(table_rows(db, spec["other"]), spec["orows"]):
    fail(f"table {spec['other']} changed")
""",
    )
    d = site.sh(db)
    ref = [
        w.pick(
            (
                f"sqlite3 {d} '.schema {tname}'",
                f"sqlite3 {d} .schema",
                f"sqlite3 {d} 'PRAGMA table_info({tname})'",
            )
        )
    ]
    if w.chance(0.5):
        ref.append(
            w.pick(
                (
                    f"cp -p {d} {d}.bak",
                    f"sqlite3 {d} '.backup /tmp/{posixpath.basename(db)}.bak'",
                    f"sqlite3 {d} .dump > /tmp/{posixpath.basename(db)}.sql",
                    f"cp {d} /tmp/{posixpath.basename(db)}.before",
                )
            )
        )
    ref += _sqlite_run(w, d, stmts)
    ref.append(w.pick((f"sqlite3 {d} '.schema {final}'", f"sqlite3 {d} 'PRAGMA table_info({final})'")))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2 + (len(kinds) > 1),
        files=dict(seed),
        setup=site.prepare() + lines,
        user=site.user,
        workdir=site.wd,
    )


# =====================================================================================================================
# 18. structured-sqlite-to-json
@family(
    "structured-sqlite-to-json",
    CATEGORY,
    "export a SQLite query as JSON shaped as asked: an array of objects, an object keyed by one column, or lists "
    "grouped under a column's values",
)
def sqlite_to_json(w: World) -> Draft:
    site = _site(w, "db")
    stem = w.pick(("staff", "servers", "inventory"))
    table = _csv_table(w, w.randint(6, 10), stem=stem, label_pool=3)
    tname = table.stem
    db = f"{site.folder}/{w.pick((site.app, 'app', 'cmdb', 'hr'))}.db"
    seed, lines = _db_build(w, site, db, _table_sql(tname, table))
    key = table.header[0]
    label = w.pick(table.labels())
    num = w.pick(table.numeric())
    ki, li, ni = table.col(key), table.col(label), table.col(num)
    shape = w.pick(("array", "array", "keyed", "grouped"))

    def as_num(v: str) -> float | int:
        return float(v) if "." in v else int(v)

    if shape == "array":
        cut = sorted(as_num(r[ni]) for r in table.rows)[len(table.rows) // 3]
        picked = sorted(
            (r for r in table.rows if as_num(r[ni]) >= cut), key=lambda r: (-as_num(r[ni]), r[ki])
        )
        want: Any = [{key: r[ki], label: r[li], num: as_num(r[ni])} for r in picked]
        say = _f(
            w,
            "an array of objects with the keys {k}, {l} and {n} (a number), one for each record whose {n} "
            "is at least {c}, largest {n} first",
            k=key,
            l=label,
            n=num,
            c=cut,
        )
        sql = f"SELECT {key}, {label}, {num} FROM {tname} WHERE {num} >= {cut} ORDER BY {num} DESC, {key}"
        w.note(cut)
    elif shape == "keyed":
        want = {r[ki]: as_num(r[ni]) for r in table.rows}
        say = _f(w, "one object mapping each {k} to its {n} (as a number)", k=key, n=num)
        sql = f"SELECT {key}, {num} FROM {tname}"
    else:
        grouped: dict[str, list[str]] = {}
        for r in sorted(table.rows, key=lambda r: r[ki]):
            grouped.setdefault(r[li], []).append(r[ki])
        want = grouped
        say = _f(
            w, "one object with a key per {l} whose value is the list of its {k}s, sorted", l=label, k=key
        )
        sql = f"SELECT {label}, {key} FROM {tname} ORDER BY {key}"
    out = f"{site.folder}/{w.pick((f'{tname}', f'{tname}-{shape}', 'export', f'{label}-{num}'))}.json"
    w.note(key, label, num)
    dbs = site.say(w, db)
    task = w.phrase(
        "Export {t} of {db} to {out} as JSON: {say}.",
        "Goal: json.load on {out} gives {say}, read from {t} in {db}.",
        "Ticket: the dashboard reads JSON. Write {out} from {db} ({t}): {say}.",
        "dump {t} from {db} to json ({out}) - {say}",
        "Could you turn {db}'s {t} into {out}? It should be {say}.",
        "{out} must hold {say}, taken from {t} in {db}.",
        "What our frontend needs in {out}: {say}. The source is {t} in {db}.",
        "Produce {out} from {db} ({t}): {say}. Valid JSON only.",
        "From {db}, export {t} as {say}; save it to {out}.",
        t=tname,
        db=dbs,
        out=site.say(w, out),
        say=say,
    )
    spec = {"out": out, "want": want}
    check = _check(
        spec, "got = load_json(spec['out'])\nif got != spec['want']:\n    fail(f'the JSON is {got}')"
    )
    d, o = site.sh(db), site.sh(out)
    ref = [
        w.pick(
            (f"sqlite3 {d} '.schema {tname}'", f"sqlite3 -header -column {d} 'SELECT * FROM {tname} LIMIT 5'")
        )
    ]
    how = w.pick(("json", "json", "sqlfn", "python", "mode"))
    if how == "mode":  # the CLI's json mode set by a dot command instead of a flag
        how = "json"
        run_json = w.pick((f"sqlite3 -cmd '.mode json' {d}", f"sqlite3 {d} '.mode json'"))
    else:
        run_json = f"sqlite3 -json {d}"
    pretty = w.pick(("", f"jq . > {o}", f"jq -S . > {o}", f"jq --indent 4 . > {o}"))
    if shape == "array":
        if how == "json":
            ref.append(f"{run_json} {quote(sql)} " + (f"| {pretty}" if pretty else f"> {o}"))
        elif how == "sqlfn":
            inner = f"json_object('{key}', {key}, '{label}', {label}, '{num}', {num})"
            ref.append(
                f"sqlite3 {d} {quote(f'SELECT json_group_array({inner}) FROM ({sql});')} "
                + (f"| {pretty}" if pretty else f"> {o}")
            )
        else:
            ref += _py_heredoc(
                w,
                f"import json, sqlite3\ncon = sqlite3.connect({d!r})\ncon.row_factory = sqlite3.Row\n"
                f"rows = [dict(r) for r in con.execute({sql!r})]\njson.dump(rows, open({o!r}, 'w'), indent=2)\n",
            )
    elif shape == "keyed":
        if how == "json":
            ref.append(
                f"{run_json} {quote(sql)} | jq {w.pick(('', '-S ', '-c '))}'map({{(.{key}): .{num}}}) | add' > {o}"
            )
        elif how == "sqlfn":
            ref.append(
                f"sqlite3 {d} {quote(f'SELECT json_group_object({key}, {num}) FROM {tname};')} "
                + (f"| {pretty}" if pretty else f"> {o}")
            )
        else:
            ref += _py_heredoc(
                w,
                f"import json, sqlite3\ncon = sqlite3.connect({d!r})\n"
                f"json.dump(dict(con.execute({sql!r})), open({o!r}, 'w'), indent=2)\n",
            )
    else:
        if how == "json":
            ref.append(
                f"{run_json} {quote(sql)} | jq {w.pick(('', '-S ', '-c '))}'group_by(.{label}) | map({{(.[0].{label}): map(.{key})}}) | add' > {o}"
            )
        elif how == "sqlfn":
            q = (
                f"SELECT json_group_object({label}, json(ids)) FROM (SELECT {label}, json_group_array({key}) AS ids "
                f"FROM ({sql}) GROUP BY {label});"
            )
            ref.append(f"sqlite3 {d} {quote(q)} " + (f"| {pretty}" if pretty else f"> {o}"))
        else:
            ref += _py_heredoc(
                w,
                f"import json, sqlite3\ncon = sqlite3.connect({d!r})\nout = {{}}\n"
                f"for group, item in con.execute({sql!r}):\n    out.setdefault(group, []).append(item)\n"
                f"json.dump(out, open({o!r}, 'w'), indent=2)\n",
            )
    ref.append(f"jq . {o}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2 if shape == "keyed" else 3,
        files=dict(seed),
        setup=site.prepare() + lines,
        user=site.user,
        workdir=site.wd,
    )
