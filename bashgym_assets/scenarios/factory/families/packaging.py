"""Packaging: the project metadata an operator edits by hand: pyproject.toml, package.json, requirements files,
setup.cfg, a Makefile, a CHANGELOG, version strings kept in step, and which manifest declares what.

Projects live in a folder in the operator's home, in ``/srv/<app>`` or ``/opt/<app>`` (the last two as root); the
shell starts in the project or in the user's home. Checks *parse* the result (``tomllib``, ``json``,
``configparser``) and compare it with the expected document, so any correct edit passes (sed, awk, perl, ex, jq,
python3, a rewrite by hand) while an edit of the wrong key, the wrong file, half the change or a file left invalid
fails. Near-miss files (a vendored copy, an example project, a lock file) must stay as they were.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tomllib
from dataclasses import dataclass

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, World, quote

PY_DEPS = (
    "requests",
    "httpx",
    "click",
    "rich",
    "pydantic",
    "sqlalchemy",
    "flask",
    "fastapi",
    "uvicorn",
    "jinja2",
    "boto3",
    "redis",
    "celery",
    "structlog",
    "tenacity",
    "attrs",
    "orjson",
    "alembic",
    "typer",
    "psutil",
    "tomli",
    "packaging",
)
PY_DEV = (
    "pytest",
    "pytest-cov",
    "ruff",
    "mypy",
    "black",
    "coverage",
    "pre-commit",
    "isort",
    "tox",
    "hypothesis",
    "flake8",
    "types-requests",
)
NPM_DEPS = (
    "express",
    "lodash",
    "axios",
    "react",
    "react-dom",
    "dayjs",
    "zod",
    "pino",
    "dotenv",
    "commander",
    "chalk",
    "uuid",
    "cors",
    "helmet",
    "ws",
    "yargs",
)
NPM_DEV = ("jest", "eslint", "prettier", "typescript", "vitest", "nodemon", "ts-node", "@types/node", "vite")
DESCRIPTIONS = (
    "Internal tooling for the {app} service",
    "Command-line helpers for {app}",
    "The {app} web backend",
    "Batch jobs for {app}",
    "Sync worker of the {app} platform",
)


# ---- where a project lives -------------------------------------------------------------------------------------------
@dataclass
class _Place:
    """A project folder, the user who works on it and where their shell starts."""

    root: str
    user: str
    workdir: str | None
    setup: list[str]
    tilde: bool

    def sh(self, path: str) -> str:
        """``path`` as the reference writes it: relative to the workdir when inside it, ``~/...`` or absolute."""
        if self.workdir and path.startswith(self.workdir + "/"):
            return path[len(self.workdir) + 1 :]
        if self.tilde and path.startswith(HOME + "/"):
            return "~" + path[len(HOME) :]
        return path

    def say(self, w: World, path: str, kind: str = "file") -> str:
        """``path`` as the instruction gives it."""
        if self.workdir and path.startswith(self.workdir + "/") and w.chance(0.5):
            rel = path[len(self.workdir) + 1 :]
            return w.spin(
                "{rel} {in the current directory|here in the project|in the folder you are in}",
                capitalize=False,
                rel=rel,
            )
        if path.startswith(HOME + "/"):
            return w.path_ref(path, kind)
        return path


def _place(w: World, app: str) -> _Place:
    where = w.pick(("home", "home", "srv", "opt"))
    if where == "home":
        root = f"{HOME}/{w.pick(('projects/', 'src/', 'code/', 'work/', ''))}{app}"
        setup = [f"mkdir -p {root}", f"chown -R operator:operator {root}"]
        user = "operator"
    else:
        root = f"/{where}/{app}"
        setup = [f"mkdir -p {root}"]
        user = "root"
    workdir = root if w.chance(0.55) else None
    return _Place(root=root, user=user, workdir=workdir, setup=setup, tilde=w.chance(0.5))


def _draft(place: _Place, **kw: object) -> Draft:
    return Draft(user=place.user, workdir=place.workdir, setup=list(place.setup), **kw)  # type: ignore[arg-type]


def _ver(w: World, major: tuple[int, int] = (0, 4)) -> str:
    return f"{w.randint(*major)}.{w.randint(0, 19)}.{w.randint(0, 12)}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ---- checks ----------------------------------------------------------------------------------------------------------
_CHECK_HEAD = """
import configparser, hashlib, json, sys
try:
    import tomllib
except ImportError:
    tomllib = None
for path, digest in WANT.get("same", {}).items():
    try:
        if hashlib.sha256(open(path, "rb").read()).hexdigest() != digest:
            sys.exit(1)
    except OSError:
        sys.exit(1)
def norm_deps(doc):
    p = doc.get("project") if isinstance(doc, dict) else None
    if isinstance(p, dict):
        if isinstance(p.get("dependencies"), list):
            p["dependencies"] = sorted(str(x).replace(" ", "").lower() for x in p["dependencies"])
        groups = p.get("optional-dependencies")
        if isinstance(groups, dict):
            for k, v in groups.items():
                if isinstance(v, list):
                    groups[k] = sorted(str(x).replace(" ", "").lower() for x in v)
    return doc
def load(path, kind):
    try:
        if kind == "toml":
            return tomllib.load(open(path, "rb"))
        if kind == "json":
            return json.load(open(path))
        return open(path).read()
    except Exception:
        sys.exit(1)
"""


def _check(body: str, want: dict) -> str:
    """A python3 check: ``WANT`` = ``want`` (JSON), files in ``want['same']`` unchanged, then ``body``."""
    return (
        f"python3 - <<'PYCHECK' || exit 1\nWANT = __import__('json').loads(r'''{json.dumps(want)}''')\n"
        f"{_CHECK_HEAD}\n{body}\nPYCHECK\n"
    )


_TOML_EQ = """
for path, doc in WANT["toml"].items():
    if norm_deps(load(path, "toml")) != norm_deps(doc):
        sys.exit(1)
"""
_JSON_EQ = """
for path, doc in WANT["json"].items():
    if load(path, "json") != doc:
        sys.exit(1)
"""


# ---- the edits, each written several ways ----------------------------------------------------------------------------
def _bre(s: str) -> str:
    """``s`` as a literal in a sed basic regular expression delimited by ``|``."""
    return "".join("\\" + c if c in "\\.*[]^$|/" else c for c in s)


def _repl(s: str) -> str:
    """``s`` as a literal sed replacement (``|`` delimiter)."""
    return "".join("\\" + c if c in "\\&|" else c for c in s)


def _vim(s: str) -> str:
    return "".join("\\" + c if c in "\\.*[]^$/~" else c for c in s)


def _perl(s: str) -> str:
    """``s`` inside a perl double-quoted string."""
    return "".join("\\" + c if c in '\\"$@' else c for c in s)


BS, NL = "\\", "\\n"  # a backslash, and sed's newline escape


def _pq(s: str) -> str:
    """``s`` and a newline as a perl double-quoted string."""
    return '"' + _perl(s) + NL + '"'


def _py(s: str) -> str:
    return json.dumps(s)


def _ways(w: World, options: dict[str, str]) -> str:
    return options[w.pick(sorted(options))]


def replace_line(w: World, f: str, old: str, new: str) -> str:
    """One command replacing the whole line ``old`` of ``f`` with ``new``."""
    s = f"s|^{_bre(old)}$|{_repl(new)}|"
    options = {
        "sed": f"sed -i {quote(s)} {f}",
        "sed-bak": f"sed -i.bak {quote(s)} {f}",
        "sed-e": f"sed -i -e {quote(s)} {f}",
        "perl": f"perl -pi -e {quote('$_ = ' + _pq(new) + ' if $_ eq ' + _pq(old))} {f}",
        "awk": f"awk -v old={quote(old)} -v new={quote(new)} '$0 == old {{ $0 = new }} {{ print }}' {f} > {f}.tmp "
        f"&& mv {f}.tmp {f}",
        "python": "python3 -c "
        + quote(
            f"import pathlib; p = pathlib.Path({_py(f)}).expanduser(); "
            f"p.write_text(p.read_text().replace({_py(old + chr(10))}, {_py(new + chr(10))}, 1))"
        ),
        "tmp": f'tmp=$(mktemp) && sed {quote(s)} {f} > "$tmp" && cat "$tmp" > {f} && rm -f "$tmp"',
        "backup": f"cp -p {f} {f}.orig && sed -i {quote(s)} {f}",
    }
    if "|" not in old + new:
        options["ex"] = f"ex -s -c {quote(f'%s/^{_vim(old)}$/{_vim(new)}/')} -c wq {f}"
    return _ways(w, options)


def insert_after(w: World, f: str, anchor: str, new: str) -> str:
    """One command inserting the line ``new`` right after the line ``anchor`` of ``f``."""
    sed_a = "/^" + _bre(anchor) + "$/a" + BS + new
    options = {
        "sed-a": f"sed -i {quote(sed_a)} {f}",
        "sed-s": f"sed -i {quote('s|^' + _bre(anchor) + '$|&' + NL + _repl(new) + '|')} {f}",
        "awk": f"awk -v a={quote(anchor)} -v n={quote(new)} '{{ print }} $0 == a {{ print n }}' {f} > {f}.tmp "
        f"&& mv {f}.tmp {f}",
        "perl": f"perl -pi -e {quote('$_ .= ' + _pq(new) + ' if $_ eq ' + _pq(anchor))} {f}",
        "python": "python3 -c "
        + quote(
            f"import os; f = os.path.expanduser({_py(f)}); t = open(f).read(); "
            f"open(f, 'w').write(t.replace({_py(anchor + chr(10))}, {_py(anchor + chr(10) + new + chr(10))}, 1))"
        ),
        "backup": f"cp {f} {f}.bak && sed -i {quote(sed_a)} {f}",
    }
    if "|" not in anchor + new and "'" not in anchor + new:
        options["ex"] = f"printf '%s\\n' {quote(f'/^{_vim(anchor)}$/a')} {quote(new)} . wq | ex -s {f}"
    return _ways(w, options)


def delete_line(w: World, f: str, line: str) -> str:
    """One command deleting the line ``line`` (exactly) from ``f``."""
    options = {
        "sed": f"sed -i {quote(f'/^{_bre(line)}$/d')} {f}",
        "sed-bak": f"sed -i.bak {quote(BS + '|^' + _bre(line) + '$|d')} {f}",
        "grep": f"grep -vxF {quote(line)} {f} > {f}.new && mv {f}.new {f}",
        "awk": f"awk -v l={quote(line)} '$0 != l' {f} > {f}.tmp && mv {f}.tmp {f}",
        "perl": f"perl -ni -e {quote('print unless $_ eq ' + _pq(line))} {f}",
        "python": "python3 -c "
        + quote(
            f"import os; f = os.path.expanduser({_py(f)}); "
            f"keep = [x for x in open(f) if x != {_py(line + chr(10))}]; open(f, 'w').writelines(keep)"
        ),
    }
    if "|" not in line:
        options["ex"] = f"ex -s -c {quote(f'g/^{_vim(line)}$/d')} -c wq {f}"
    return _ways(w, options)


def append_lines(w: World, f: str, lines: list[str]) -> str:
    """One command appending ``lines`` to ``f`` (which ends with a newline)."""
    args = " ".join(quote(x) for x in lines)
    body = "\n".join(lines)
    options = {
        "printf": f"printf '%s\\n' {args} >> {f}",
        "heredoc": f"cat >> {f} <<'EOF'\n{body}\nEOF",
        "echo": "{ " + "; ".join(f"echo {quote(x)}" for x in lines) + f"; }} >> {f}",
        "tee": f"printf '%s\\n' {args} | tee -a {f}",
        "python": "python3 -c "
        + quote(f"import os; open(os.path.expanduser({_py(f)}), 'a').write({_py(body + chr(10))})"),
    }
    if len(lines) == 1:
        options["sed"] = f"sed -i {quote('$a' + BS + lines[0])} {f}"
    return _ways(w, options)


def _show(w: World, f: str, grep: str | None = None) -> str:
    options = [f"cat {f}", f"head -n 40 {f}", f"tail -n 20 {f}"]
    if grep:
        options += [f"grep -n {quote(grep)} {f}", f"grep -n -A3 {quote(grep)} {f}"]
    return w.pick(options)


# ---- pyproject.toml ----------------------------------------------------------------------------------------------------
@dataclass
class _Pyproject:
    name: str
    version: str
    lines: list[str]
    deps: list[str]
    dev: list[str]
    scripts: dict[str, str]
    requires: str | None
    dev_group: str

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def doc(self) -> dict:
        return tomllib.loads(self.text)


def _pyproject(
    w: World,
    name: str,
    *,
    version: str | None = None,
    requires: bool | None = None,
    scripts: bool | None = None,
    dev: bool | None = None,
) -> _Pyproject:
    version = version or _ver(w)
    pyv = w.randint(8, 11)
    req = f">=3.{pyv}" if (w.chance(0.75) if requires is None else requires) else None
    backend = w.pick(
        (
            ('["setuptools>=68", "wheel"]', "setuptools.build_meta"),
            ('["hatchling"]', "hatchling.build"),
            ('["flit_core>=3.4"]', "flit_core.buildapi"),
        )
    )
    deps = [
        f"{d}{w.pick(('', '>=1.0', f'>={w.randint(1, 3)}.{w.randint(0, 9)}', '~=2.1'))}"
        for d in w.sample(PY_DEPS, w.randint(2, 5))
    ]
    devs = [f"{d}{w.pick(('', f'>={w.randint(1, 7)}.0'))}" for d in w.sample(PY_DEV, w.randint(2, 4))]
    has_dev = w.chance(0.7) if dev is None else dev
    group = w.pick(("dev", "test", "lint"))
    person = w.person()
    lines = [
        "[build-system]",
        f"requires = {backend[0]}",
        f'build-backend = "{backend[1]}"',
        "",
        "[project]",
        f'name = "{name}"',
        f'version = "{version}"',
        f'description = "{w.pick(DESCRIPTIONS).format(app=name)}"',
        'readme = "README.md"',
    ]
    if req:
        lines.append(f'requires-python = "{req}"')
    lines += [
        f'license = {{text = "{w.pick(("MIT", "Apache-2.0", "BSD-3-Clause"))}"}}',
        f'authors = [{{name = "{person.title()}", email = "{person}@example.com"}}]',
        "dependencies = [",
        *[f'    "{d}",' for d in deps],
        "]",
    ]
    if has_dev:
        lines += ["", "[project.optional-dependencies]", f"{group} = [", *[f'    "{d}",' for d in devs], "]"]
    scr: dict[str, str] = {}
    if scripts if scripts is not None else w.chance(0.5):
        scr = {name: f"{name.replace('-', '_')}.cli:main"}
        lines += ["", "[project.scripts]", *[f'{k} = "{v}"' for k, v in scr.items()]]
    tv = w.randint(8, 12)
    lines += [
        "",
        "[tool.ruff]",
        f'target-version = "py3{tv}"',
        f"line-length = {w.pick((88, 100, 110, 120))}",
    ]
    if w.chance(0.5):
        lines += ["", "[tool.mypy]", f'python_version = "3.{tv}"', "strict = true"]
    if w.chance(0.5):
        lines += [
            "",
            "[tool.pytest.ini_options]",
            f'minversion = "{w.randint(6, 8)}.0"',
            'testpaths = ["tests"]',
        ]
    return _Pyproject(name, version, lines, deps, devs if has_dev else [], scr, req, group)


def _decoy_pyproject(w: World, place: _Place, py: _Pyproject) -> dict[str, str]:
    """Near-miss copies: a vendored library's or an example's pyproject.toml (they must stay untouched)."""
    if not w.chance(0.5):
        return {}
    sub = w.pick((f"vendor/{w.pick(PY_DEPS)}", "examples/demo", "legacy", f"plugins/{w.word()}"))
    other = _pyproject(w, f"{py.name}-{sub.rsplit('/', 1)[-1]}", version=py.version)
    return {f"{place.root}/{sub}/pyproject.toml": other.text}


def _project_files(w: World, place: _Place, name: str) -> dict[str, str]:
    pkg = name.replace("-", "_")
    files = {
        f"{place.root}/README.md": f"# {name}\n\n{w.pick(DESCRIPTIONS).format(app=name)}.\n",
        f"{place.root}/src/{pkg}/__init__.py": "",
    }
    if w.chance(0.5):
        files[f"{place.root}/tests/test_{pkg}.py"] = "def test_import():\n    import " + pkg + "\n"
    return files


def _bump(version: str, part: str) -> str:
    major, minor, patch = (int(x) for x in version.split("."))
    if part == "major":
        return f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


@family(
    "packaging-pyproject-field",
    "packaging",
    "change one [project] field of a pyproject.toml (bump the version, set requires-python) and nothing else",
)
def pyproject_field(w: World) -> Draft:
    app = w.project()
    place = _place(w, app)
    variant = w.pick(("set", "bump", "bump", "final", "requires", "requires-add"))
    base = _ver(w)
    old_version = f"{base}{w.pick(('rc1', 'rc2', 'b1', 'a3'))}" if variant == "final" else base
    py = _pyproject(w, app, version=old_version, requires=variant != "requires-add")
    path = f"{place.root}/pyproject.toml"
    files = {path: py.text, **_project_files(w, place, app)}
    decoys = _decoy_pyproject(w, place, py)
    files.update(decoys)
    doc = py.doc()
    want = copy.deepcopy(doc)
    f = place.sh(path)
    where = place.say(w, path)
    look: str | None = None
    if variant in ("set", "bump", "final"):
        if variant == "set":
            new = _bump(base, w.pick(("patch", "minor", "major")))
            if w.chance(0.3):
                new = f"{new}{w.pick(('rc1', 'b2', '.post1'))}" if not new.endswith(".0") else f"{new}rc1"
            goal = w.spin("{set|change} the project's version to {new}", capitalize=False, new=new)
            w.note(new)
        elif variant == "bump":
            part = w.pick(("patch", "minor", "major"))
            new = _bump(base, part)
            goal = w.spin(
                {
                    "patch": "bump the project's version by one patch release ({a bugfix release|x.y.z -> x.y.z+1})",
                    "minor": "bump the project's minor version (x.y.z -> x.(y+1).0)",
                    "major": "bump the project's major version ({a breaking release|x.y.z -> (x+1).0.0})",
                }[part],
                capitalize=False,
            )
            look = f"grep -n '^version' {f}"
        else:
            new = base
            goal = w.spin(
                "turn the {pre-release|release candidate} version into the final release (drop the "
                "{pre-release suffix|rc/beta/alpha suffix}, same numbers)",
                capitalize=False,
            )
            look = f"grep -n '^version' {f}"
        want["project"]["version"] = new
        old_line, new_line = f'version = "{old_version}"', f'version = "{new}"'
        edit = replace_line(w, f, old_line, new_line)
        difficulty = 1 if variant == "set" else 2
        effect = w.spin(
            "{pip|the build} reports version {new}"
            if variant == "set"
            else "the built wheel carries the new version",
            capitalize=False,
            new=new,
        )
    else:
        floor = f">=3.{w.randint(9, 12)}"
        while py.requires == floor:
            floor = f">=3.{w.randint(9, 12)}"
        w.note(floor)
        want["project"]["requires-python"] = floor
        goal = w.spin(
            "{make|have} the project require Python {floor} (requires-python)", capitalize=False, floor=floor
        )
        effect = w.spin("installers refuse Pythons older than {floor}", capitalize=False, floor=floor[2:])
        if variant == "requires":
            edit = replace_line(w, f, f'requires-python = "{py.requires}"', f'requires-python = "{floor}"')
            difficulty = 2
        else:
            edit = insert_after(w, f, 'readme = "README.md"', f'requires-python = "{floor}"')
            look = f"grep -n '^\\[' {f}"
            difficulty = 3
    if decoys:
        difficulty = min(4, difficulty + 1)
    other = w.spin("{Nothing else in the file changes|Leave every other setting as it is|Touch nothing else}")
    task = w.phrase(
        "In {where}, {goal}. {other}.",
        "Ticket {app}-{n}: {goal} in {where} before we cut the next build. {other}.",
        "hey, can you {goal}? it's {where}. {other}, please",
        "Release prep for {app}: {goal} ({where}).",
        "We are about to publish {app}. When it is done, {effect}: {goal} in {where}. {other}.",
        "The packaging metadata of {app} lives in {where}. Our release checklist says to {goal} by editing that "
        "file; it must still parse as TOML afterwards. {other}.",
        where=where,
        goal=goal,
        other=other,
        app=app,
        n=w.randint(100, 999),
        effect=effect,
    )
    check = _check(_TOML_EQ, {"toml": {path: want}, "same": {p: _sha(t) for p, t in decoys.items()}})
    reference = ([look] if look and w.chance(0.8) else []) + [
        edit,
        _show(w, f, "version" if "version" in goal else "requires"),
    ]
    return _draft(place, task=task, check=check, reference=reference, difficulty=difficulty, files=files)


@family(
    "packaging-pyproject-dependency",
    "packaging",
    "add, pin or drop a dependency in pyproject.toml (runtime or an optional group), keeping it valid TOML",
)
def pyproject_dependency(w: World) -> Draft:
    app = w.project()
    place = _place(w, app)
    py = _pyproject(w, app, dev=True)
    path = f"{place.root}/pyproject.toml"
    files = {path: py.text, **_project_files(w, place, app)}
    decoys = _decoy_pyproject(w, place, py)
    files.update(decoys)
    want = copy.deepcopy(py.doc())
    proj = want["project"]
    f = place.sh(path)
    variant = w.pick(("add", "add-dev", "pin", "pin", "drop", "drop-dev"))
    look = None
    if variant in ("add", "add-dev"):
        pool = [
            d
            for d in (PY_DEPS if variant == "add" else PY_DEV)
            if not any(x.startswith(d) for x in py.deps + py.dev)
        ]
        name = w.pick(pool)
        spec = f"{name}{w.pick(('>=', '==', '~='))}{w.randint(1, 9)}.{w.randint(0, 20)}"
        w.note(name, spec)
        if variant == "add":
            proj["dependencies"].append(spec)
            anchor, target = "dependencies = [", "the runtime dependencies"
        else:
            proj["optional-dependencies"][py.dev_group].append(spec)
            anchor = f"{py.dev_group} = ["
            target = w.spin(
                'the "{g}" optional dependencies ({extra|the [{g}] extra})', capitalize=False, g=py.dev_group
            )
        goal = w.spin("add {spec} to {target}", capitalize=False, spec=spec, target=target)
        edit = insert_after(w, f, anchor, f'    "{spec}",')
        difficulty = 2
    elif variant == "pin":
        old = w.pick(py.deps)
        name = old.split(">")[0].split("~")[0].split("=")[0]
        pinned = f"{name}=={w.randint(1, 9)}.{w.randint(0, 30)}.{w.randint(0, 9)}"
        w.note(name, pinned)
        proj["dependencies"][proj["dependencies"].index(old)] = pinned
        goal = w.spin(
            "pin {name} to exactly {v} (replacing its current {constraint|specifier})",
            capitalize=False,
            name=name,
            v=pinned.split("==")[1],
        )
        edit = replace_line(w, f, f'    "{old}",', f'    "{pinned}",')
        look = f"grep -n {quote(name)} {f}"
        difficulty = 2
    else:
        group = proj["dependencies"] if variant == "drop" else proj["optional-dependencies"][py.dev_group]
        old = w.pick(group)
        group.remove(old)
        name = old.split(">")[0].split("~")[0].split("=")[0]
        w.note(name)
        goal = w.spin(
            "{remove|drop} {name} from the {kind} dependencies{|, we no longer use it}",
            capitalize=False,
            name=name,
            kind="runtime" if variant == "drop" else f'"{py.dev_group}" optional',
        )
        edit = delete_line(w, f, f'    "{old}",')
        look = f"grep -n {quote(name)} {f}"
        difficulty = 2
    if decoys:
        difficulty += 1
    where = place.say(w, path)
    task = w.phrase(
        "In {where}, {goal}. Keep everything else as it is.",
        "Ticket {app}-{n}: dependency change for {app}: {goal}. The metadata is in {where}.",
        "can you {goal} in {where}? thx",
        "{where}: {goal}.",
        "After this change, installing {app} from {where} should reflect it: {goal}. The file must stay valid "
        "TOML and the other entries stay put.",
        "We keep the dependencies of {app} in the [project] table of {where}, not in a requirements file. "
        "Please {goal} there and leave the rest of the file alone.",
        where=where,
        goal=goal,
        app=app,
        n=w.randint(100, 999),
    )
    check = _check(_TOML_EQ, {"toml": {path: want}, "same": {p: _sha(t) for p, t in decoys.items()}})
    reference = ([look] if look and w.chance(0.7) else []) + [edit, _show(w, f, "dependencies")]
    return _draft(place, task=task, check=check, reference=reference, difficulty=difficulty, files=files)


@family(
    "packaging-console-script",
    "packaging",
    "add, rename or repoint a console-script entry point in pyproject.toml's [project.scripts]",
)
def console_script(w: World) -> Draft:
    app = w.project()
    place = _place(w, app)
    variant = w.pick(("add", "add", "add-table", "repoint", "rename"))
    py = _pyproject(w, app, scripts=variant != "add-table")
    path = f"{place.root}/pyproject.toml"
    files = {path: py.text, **_project_files(w, place, app)}
    decoys = _decoy_pyproject(w, place, py)
    files.update(decoys)
    want = copy.deepcopy(py.doc())
    pkg = app.replace("-", "_")
    f = place.sh(path)
    look = None
    cmd = f"{app}-{w.pick(('admin', 'migrate', 'worker', 'sync', 'report', 'ctl', 'serve'))}"
    target = f"{pkg}.{w.pick(('cli', 'commands', 'tools', 'main'))}:{w.pick(('main', 'run', 'cli', 'entry'))}"
    w.note(cmd, target)
    if variant in ("add", "add-table"):
        want["project"].setdefault("scripts", {})[cmd] = target
        goal = w.spin(
            "{add|register} a console script `{cmd}` that runs {target}",
            capitalize=False,
            cmd=cmd,
            target=target,
        )
        line = f'{cmd} = "{target}"'
        if variant == "add":
            edit = insert_after(w, f, "[project.scripts]", line)
            difficulty = 2
        else:
            # the new table goes at the end (any place after [project] that starts a table of its own is valid)
            edit = append_lines(w, f, ["", "[project.scripts]", line])
            look = f"grep -n '^\\[' {f}"
            difficulty = 3
    elif variant == "repoint":
        ((old_cmd, old_target),) = py.scripts.items()
        if target == old_target:
            target = f"{pkg}.app:main"
        want["project"]["scripts"][old_cmd] = target
        goal = w.spin(
            "{point|repoint} the `{c}` console script at {target} instead of {old}",
            capitalize=False,
            c=old_cmd,
            target=target,
            old=old_target,
        )
        edit = replace_line(w, f, f'{old_cmd} = "{old_target}"', f'{old_cmd} = "{target}"')
        difficulty = 2
    else:
        ((old_cmd, old_target),) = py.scripts.items()
        del want["project"]["scripts"][old_cmd]
        want["project"]["scripts"][cmd] = old_target
        goal = w.spin(
            "rename the `{c}` console script to `{cmd}` (same entry point{|, {old}})",
            capitalize=False,
            c=old_cmd,
            cmd=cmd,
            old=old_target,
        )
        edit = replace_line(w, f, f'{old_cmd} = "{old_target}"', f'{cmd} = "{old_target}"')
        look = f"grep -n -A2 scripts {f}"
        difficulty = 2
    if decoys:
        difficulty += 1
    where = place.say(w, path)
    task = w.phrase(
        "In {where}, {goal}. Leave the rest of the file unchanged.",
        "Ticket {app}-{n}: {goal}. The package is configured in {where}.",
        "could you {goal}? it's declared in {where}",
        "Entry points of {app} ({where}): {goal}.",
        "Once {app} is reinstalled, the command `{shown}` should be on PATH{| and run the right function}: {goal} "
        "in {where}, keeping the file valid TOML.",
        "Our users start {app} through the scripts listed under [project.scripts] in {where}. For the next "
        "release, {goal}; nothing else in the file should change.",
        where=where,
        goal=goal,
        app=app,
        n=w.randint(100, 999),
        shown=cmd if variant != "repoint" else next(iter(py.scripts)),
    )
    check = _check(_TOML_EQ, {"toml": {path: want}, "same": {p: _sha(t) for p, t in decoys.items()}})
    reference = ([look] if look and w.chance(0.7) else []) + [edit, _show(w, f, "scripts")]
    return _draft(place, task=task, check=check, reference=reference, difficulty=difficulty, files=files)


# ---- package.json ------------------------------------------------------------------------------------------------------
def _npm_ver(w: World) -> str:
    return f"{w.randint(0, 18)}.{w.randint(0, 30)}.{w.randint(0, 12)}"


def _package_json(w: World, name: str, scripts: bool = True) -> dict:
    doc: dict = {"name": name, "version": _npm_ver(w), "private": w.chance(0.6)}
    doc["description"] = w.pick(DESCRIPTIONS).format(app=name)
    doc["main"] = w.pick(("src/index.js", "index.js", "dist/server.js"))
    if scripts:
        doc["scripts"] = dict(
            w.sample(
                (
                    ("start", f"node {doc['main']}"),
                    ("test", w.pick(("jest", "vitest run", "node --test"))),
                    ("lint", "eslint ."),
                    ("build", w.pick(("tsc -p .", "vite build", "webpack --mode production"))),
                    ("dev", "nodemon src/index.js"),
                    ("format", "prettier --write ."),
                ),
                w.randint(2, 4),
            )
        )
    doc["dependencies"] = {d: f"^{_npm_ver(w)}" for d in w.sample(NPM_DEPS, w.randint(2, 5))}
    doc["devDependencies"] = {d: f"^{_npm_ver(w)}" for d in w.sample(NPM_DEV, w.randint(1, 3))}
    if w.chance(0.5):
        doc["engines"] = {"node": f">={w.pick((16, 18, 20))}"}
    if w.chance(0.3):
        doc["license"] = w.pick(("MIT", "ISC", "UNLICENSED"))
    return doc


def _js(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def _member_line(obj: dict, key: str, value: object = None, new_key: str | None = None) -> str:
    """The line ``json.dumps(indent=2)`` writes for ``key`` of a second-level object (its comma included)."""
    comma = "," if key != list(obj)[-1] else ""
    v = obj[key] if value is None else value
    return f"    {json.dumps(new_key or key)}: {json.dumps(v)}{comma}"


def json_edit(w: World, f: str, jq_prog: str, py_stmt: str, arg: tuple[str, str] | None = None) -> str:
    """One command applying ``jq_prog`` (or the python statement ``py_stmt`` on ``d``) to the JSON file ``f``."""
    q = quote(jq_prog)
    options = {
        "jq-mv": f"jq {q} {f} > {f}.tmp && mv {f}.tmp {f}",
        "jq-indent": f"jq --indent 2 {q} {f} > {f}.new && mv {f}.new {f}",
        "jq-mktemp": f'tmp=$(mktemp) && jq {q} {f} > "$tmp" && cat "$tmp" > {f} && rm -f "$tmp"',
        "jq-bak": f"cp {f} {f}.bak && jq {q} {f}.bak > {f}",
        "python": "python3 -c "
        + quote(
            f"import json, os; f = os.path.expanduser({_py(f)}); d = json.load(open(f)); {py_stmt}; "
            "open(f, 'w').write(json.dumps(d, indent=2) + '\\n')"
        ),
    }
    if arg:
        name, value = arg
        prog = quote(jq_prog.replace(json.dumps(value), f"${name}"))
        options["jq-arg"] = f"jq --arg {name} {quote(value)} {prog} {f} > {f}.tmp && mv {f}.tmp {f}"
    return _ways(w, options)


def _npm_place(w: World, app: str, doc: dict) -> tuple[_Place, str, dict[str, str], dict[str, str]]:
    """The project, its package.json path, the files and the near-miss files (which must stay as they are)."""
    place = _place(w, app)
    path = f"{place.root}/package.json"
    files = {
        path: _js(doc),
        f"{place.root}/{doc['main']}": "module.exports = {};\n",
        f"{place.root}/README.md": f"# {app}\n",
    }
    decoys: dict[str, str] = {}
    if w.chance(0.6):
        dep = w.pick(sorted(doc["dependencies"]))
        decoys[f"{place.root}/node_modules/{dep}/package.json"] = _js(
            {
                "name": dep,
                "version": doc["dependencies"][dep][1:],
                "scripts": {"test": "mocha"},
                "main": "index.js",
            }
        )
    if w.chance(0.5):
        decoys[f"{place.root}/package-lock.json"] = _js(
            {"name": app, "version": doc["version"], "lockfileVersion": 3, "requires": True, "packages": {}}
        )
    files.update(decoys)
    return place, path, files, decoys


def _npm_task(w: World, where: str, goal: str, app: str) -> str:
    return w.phrase(
        "In {where}, {goal}. Keep the file valid JSON and everything else as it was.",
        "Ticket {app}-{n}: {goal} ({where}).",
        "hey, could you {goal}? the file is {where}",
        "package.json of {app}: {goal}. Path: {where}.",
        "When this is done, `npm` should see the change in {where}: {goal}. No other key may change.",
        "The {app} frontend team asked for a small change in their manifest, {where}. Please {goal}; do not run "
        "npm (there is no network here), edit the JSON {directly|by hand or with jq}.",
        where=where,
        goal=goal,
        app=app,
        n=w.randint(100, 999),
    )


@family("packaging-npm-script", "packaging", "add, change, rename or remove an npm script in package.json")
def npm_script(w: World) -> Draft:
    app = w.project()
    variant = w.pick(("add", "add", "add-none", "change", "rename", "remove"))
    doc = _package_json(w, app, scripts=variant != "add-none")
    place, path, files, decoys = _npm_place(w, app, doc)
    want = copy.deepcopy(doc)
    f = place.sh(path)
    look = None
    scripts = doc.get("scripts", {})
    if variant in ("add", "add-none"):
        name = w.pick(
            [
                s
                for s in ("build", "typecheck", "migrate", "seed", "e2e", "clean", "release")
                if s not in scripts
            ]
        )
        cmd = {
            "build": "tsc -p tsconfig.build.json",
            "typecheck": "tsc --noEmit",
            "migrate": "node scripts/migrate.js",
            "seed": f"node scripts/seed.js --env {w.pick(('dev', 'staging'))}",
            "e2e": "playwright test",
            "clean": "rm -rf dist coverage",
            "release": "npm run build && npm publish",
        }[name]
        want.setdefault("scripts", {})[name] = cmd
        goal = w.spin('add an npm script "{name}" that runs `{cmd}`', capitalize=False, name=name, cmd=cmd)
        line = f"    {json.dumps(name)}: {json.dumps(cmd)},"
        edit = (
            insert_after(w, f, '  "scripts": {', line)
            if variant == "add" and w.chance(0.5)
            else json_edit(
                w,
                f,
                f".scripts[{json.dumps(name)}] = {json.dumps(cmd)}",
                f"d.setdefault('scripts', {{}})[{name!r}] = {cmd!r}",
                ("cmd", cmd),
            )
        )
        difficulty = 2 if variant == "add" else 3
    elif variant == "change":
        name = w.pick(sorted(scripts))
        cmd = f"{scripts[name]} {w.pick(('--verbose', '--silent', '--ci', '--max-warnings 0', '--color'))}"
        want["scripts"][name] = cmd
        goal = w.spin('change the "{name}" script to run `{cmd}`', capitalize=False, name=name, cmd=cmd)
        edit = (
            replace_line(w, f, _member_line(scripts, name), _member_line(scripts, name, cmd))
            if w.chance(0.5)
            else json_edit(
                w,
                f,
                f".scripts[{json.dumps(name)}] = {json.dumps(cmd)}",
                f"d['scripts'][{name!r}] = {cmd!r}",
                ("cmd", cmd),
            )
        )
        look = f"jq .scripts {f}"
        difficulty = 2
    elif variant == "rename":
        name = w.pick(sorted(scripts))
        new = {
            "start": "serve",
            "test": "test:unit",
            "lint": "lint:js",
            "build": "compile",
            "dev": "watch",
            "format": "fmt",
        }[name]
        want["scripts"] = {(new if k == name else k): v for k, v in scripts.items()}
        goal = w.spin(
            'rename the "{name}" npm script to "{new}" (same command)', capitalize=False, name=name, new=new
        )
        n = json.dumps(name)
        edit = (
            replace_line(w, f, _member_line(scripts, name), _member_line(scripts, name, new_key=new))
            if w.chance(0.5)
            else json_edit(
                w,
                f,
                f".scripts[{json.dumps(new)}] = .scripts[{n}] | del(.scripts[{n}])",
                f"d['scripts'][{new!r}] = d['scripts'].pop({name!r})",
            )
        )
        look = f"jq .scripts {f}"
        difficulty = 2
    else:
        name = w.pick(sorted(scripts))
        del want["scripts"][name]
        goal = w.spin('{remove|delete} the "{name}" script{| from package.json}', capitalize=False, name=name)
        edit = (
            delete_line(w, f, _member_line(scripts, name))
            if name != list(scripts)[-1] and w.chance(0.5)
            else json_edit(w, f, f"del(.scripts[{json.dumps(name)}])", f"del d['scripts'][{name!r}]")
        )
        difficulty = 2
    w.note(name)
    if decoys and difficulty < 4:
        difficulty += 1 if len(decoys) > 1 else 0
    task = _npm_task(w, place.say(w, path), goal, app)
    check = _check(_JSON_EQ, {"json": {path: want}, "same": {p: _sha(t) for p, t in decoys.items()}})
    reference = ([look] if look and w.chance(0.7) else []) + [
        edit,
        w.pick((f"jq .scripts {f}", f"cat {f}", f"python3 -m json.tool {f}")),
    ]
    return _draft(place, task=task, check=check, reference=reference, difficulty=difficulty, files=files)


@family(
    "packaging-npm-dependency",
    "packaging",
    "add, pin, move or remove a dependency in package.json (dependencies / devDependencies)",
)
def npm_dependency(w: World) -> Draft:
    app = w.project()
    doc = _package_json(w, app)
    place, path, files, decoys = _npm_place(w, app, doc)
    want = copy.deepcopy(doc)
    f = place.sh(path)
    deps, dev = doc["dependencies"], doc["devDependencies"]
    variant = w.pick(("add", "add-dev", "pin", "pin", "move", "remove"))
    look = None
    if variant in ("add", "add-dev"):
        key = "dependencies" if variant == "add" else "devDependencies"
        name = w.pick(
            [d for d in (NPM_DEPS if variant == "add" else NPM_DEV) if d not in deps and d not in dev]
        )
        spec = f"{w.pick(('^', '~', ''))}{_npm_ver(w)}"
        want[key][name] = spec
        goal = w.spin("add {name} {spec} to {the |}{key}", capitalize=False, name=name, spec=spec, key=key)
        edit = json_edit(
            w,
            f,
            f".{key}[{json.dumps(name)}] = {json.dumps(spec)}",
            f"d[{key!r}][{name!r}] = {spec!r}",
            ("v", spec),
        )
        difficulty = 2
    elif variant == "pin":
        name = w.pick(sorted(deps))
        exact = deps[name][1:]
        want["dependencies"][name] = exact
        goal = w.spin(
            "pin {name} to exactly the version it allows now ({the caret range {v} becomes|{v} becomes} {exact})",
            capitalize=False,
            name=name,
            v=deps[name],
            exact=exact,
        )
        edit = w.pick(
            (
                json_edit(
                    w,
                    f,
                    f'.dependencies[{json.dumps(name)}] |= ltrimstr("^")',
                    f"d['dependencies'][{name!r}] = {exact!r}",
                ),
                replace_line(
                    w,
                    f,
                    f'    "{name}": "{deps[name]}"' + ("," if name != list(deps)[-1] else ""),
                    f'    "{name}": "{exact}"' + ("," if name != list(deps)[-1] else ""),
                ),
            )
        )
        look = f"jq .dependencies {f}"
        difficulty = 2
    elif variant == "move":
        name = w.pick(sorted(deps))
        want["devDependencies"][name] = want["dependencies"].pop(name)
        goal = w.spin(
            "move {name} from dependencies to devDependencies ({same version range|keep its version})",
            capitalize=False,
            name=name,
        )
        n = json.dumps(name)
        edit = json_edit(
            w,
            f,
            f".devDependencies[{n}] = .dependencies[{n}] | del(.dependencies[{n}])",
            f"d['devDependencies'][{name!r}] = d['dependencies'].pop({name!r})",
        )
        difficulty = 3
    else:
        key = w.pick(("dependencies", "devDependencies"))
        name = w.pick(sorted(doc[key]))
        del want[key][name]
        goal = w.spin(
            "{remove|drop} {name} from {key}{|, it is unused}", capitalize=False, name=name, key=key
        )
        edit = json_edit(w, f, f"del(.{key}[{json.dumps(name)}])", f"del d[{key!r}][{name!r}]")
        difficulty = 2
    w.note(name)
    task = _npm_task(w, place.say(w, path), goal, app)
    check = _check(_JSON_EQ, {"json": {path: want}, "same": {p: _sha(t) for p, t in decoys.items()}})
    reference = ([look] if look and w.chance(0.7) else []) + [
        edit,
        w.pick((f"jq '.dependencies, .devDependencies' {f}", f"cat {f}", f"python3 -m json.tool {f}")),
    ]
    return _draft(
        place,
        task=task,
        check=check,
        reference=reference,
        difficulty=min(4, difficulty + (1 if len(decoys) > 1 else 0)),
        files=files,
    )


# ---- requirements files ------------------------------------------------------------------------------------------------
_REQS_EQ = """
def reqs(path):
    out = []
    for raw in load(path, "text").splitlines():
        line = raw.split(" #")[0].strip()
        if line and not line.startswith("#"):
            out.append(line.replace(" ", "").lower())
    return out
for path, lines in WANT["reqs"].items():
    got = reqs(path)
    if sorted(got) != sorted(x.replace(" ", "").lower() for x in lines):
        sys.exit(1)
"""


def _req_lines(w: World, names: list[str]) -> list[str]:
    return [
        f"{n}{w.pick(('', '', '>=1.0', f'=={w.randint(1, 4)}.{w.randint(0, 20)}.{w.randint(0, 9)}', f'>={w.randint(1, 3)}.{w.randint(0, 9)}'))}"
        for n in names
    ]


@family(
    "packaging-requirements-pin",
    "packaging",
    "pin, unpin-to-pin from a freeze list, remove, or settle a duplicated entry in requirements.txt",
)
def requirements_pin(w: World) -> Draft:
    app = w.project()
    place = _place(w, app)
    names = w.sample(PY_DEPS, w.randint(5, 8))
    lines = _req_lines(w, names)
    variant = w.pick(("pin", "freeze", "freeze", "remove", "duplicate"))
    path = f"{place.root}/{w.pick(('requirements.txt', 'requirements.txt', 'requirements/base.txt'))}"
    f = place.sh(path)
    header = [f"# runtime requirements of {app}", "# regenerate the lock after editing (see README)"][
        : w.randint(0, 2)
    ]
    want = list(lines)
    files: dict[str, str] = {f"{place.root}/README.md": f"# {app}\n"}
    look = None
    if variant == "pin":
        i = w.randint(0, len(names) - 1)
        v = f"{w.randint(1, 5)}.{w.randint(0, 30)}.{w.randint(0, 9)}"
        want[i] = f"{names[i]}=={v}"
        goal = w.spin("pin {name} to version {v} exactly", capitalize=False, name=names[i], v=v)
        edit = replace_line(w, f, lines[i], want[i])
        look = f"grep -n {quote(names[i])} {f}"
        w.note(names[i], v)
        difficulty = 1
    elif variant == "remove":
        i = w.randint(0, len(names) - 1)
        del want[i]
        # a near-miss that a loose pattern would also remove
        near = w.pick(
            (f"types-{names[i]}", f"{names[i]}-toolbelt", f"{names[i]}-extras", f"pytest-{names[i]}")
        )
        lines.insert(w.randint(0, len(lines)), near)
        want = [x for x in lines if x.split("=")[0].split(">")[0] != names[i]]
        goal = w.spin(
            "{remove|drop} {name} from the requirements (only that package{|, {near} stays})",
            capitalize=False,
            name=names[i],
            near=near,
        )
        edit = delete_line(w, f, next(x for x in lines if x.split("=")[0].split(">")[0] == names[i]))
        look = f"grep -n {quote(names[i])} {f}"
        w.note(names[i], near)
        difficulty = 2
    elif variant == "duplicate":
        i = w.randint(0, len(names) - 1)
        keep = f"{names[i]}=={w.randint(1, 5)}.{w.randint(0, 30)}.{w.randint(0, 9)}"
        drop = lines[i] if lines[i] != keep else names[i]
        lines[i] = drop
        lines.insert(w.randint(0, len(lines)), keep)
        want = [x for x in lines if x != drop]
        goal = w.spin(
            "{name} is listed twice; keep only the pinned entry ({keep}) and {remove|delete} the other",
            capitalize=False,
            name=names[i],
            keep=keep,
        )
        edit = delete_line(w, f, drop)
        look = f"grep -n {quote(names[i])} {f}"
        w.note(names[i], keep)
        difficulty = 2
    else:
        bare = [n for n in names if n in lines]
        if len(bare) < 2:
            for n in w.sample([n for n in names if n not in bare], 2 - len(bare)):
                lines[names.index(n)] = n
            bare = [n for n in names if n in lines]
        freeze_path = f"{place.root}/{w.pick(('pip-freeze.txt', 'installed.txt', 'freeze.txt'))}"
        versions = {n: f"{w.randint(1, 6)}.{w.randint(0, 30)}.{w.randint(0, 12)}" for n in names}
        extra = w.sample([d for d in PY_DEPS if d not in names], 3)
        versions.update({n: f"{w.randint(0, 4)}.{w.randint(0, 9)}.{w.randint(0, 9)}" for n in extra})
        files[freeze_path] = "".join(f"{n}=={v}\n" for n, v in sorted(versions.items()))
        want = [f"{x}=={versions[x]}" if x in bare else x for x in lines]
        goal = w.spin(
            "pin every requirement that has no version {constraint|specifier} yet to the version recorded in "
            "{freeze} (leave the ones that already have a {constraint|specifier} alone)",
            capitalize=False,
            freeze=place.say(w, freeze_path),
        )
        fz = place.sh(freeze_path)
        edit = w.pick(
            (
                "sed -i " + " ".join(f"-e {quote(f's|^{n}$|{n}=={versions[n]}|')}" for n in bare) + f" {f}",
                f"awk -F'==' 'NR == FNR {{ v[$1] = $2; next }} ($0 in v) {{ $0 = $0 \"==\" v[$0] }} {{ print }}' "
                f"{fz} {f} > {f}.new && mv {f}.new {f}",
                f"while IFS='=' read -r name _ ver; do sed -i \"s|^$name\\$|$name==$ver|\" {f}; done < {fz}",
                "python3 -c "
                + quote(
                    f"import os; e = os.path.expanduser; v = dict(l.strip().split('==') for l in open(e({_py(fz)}))); "
                    f"t = [l.strip() for l in open(e({_py(f)}))]; "
                    f"open(e({_py(f)}), 'w').write(''.join((l + '==' + v[l] if l in v else l) + chr(10) for l in t))"
                ),
                "for n in "
                + " ".join(bare)
                + f'; do v=$(grep -i "^$n==" {fz} | cut -d= -f3); sed -i "s/^$n\\$/$n==$v/" {f}; done',
            )
        )
        look = f"grep -vE '[=<>~]' {f}"
        difficulty = 3
    files[path] = "\n".join(header + lines) + "\n"
    decoys: dict[str, str] = {}
    if w.chance(0.5):
        decoys[
            f"{place.root}/{w.pick(('docs/requirements.txt', 'requirements-dev.txt', 'constraints.txt'))}"
        ] = "\n".join(_req_lines(w, w.sample(PY_DEV, 3)) + [w.pick(lines)]) + "\n"
    files.update(decoys)
    where = place.say(w, path)
    task = w.phrase(
        "In {where}, {goal}.",
        "Ticket {app}-{n}: {goal}. File: {where}.",
        "could you {goal} in {where}? nothing else should change",
        "requirements ({where}): {goal}.",
        "So that `pip install -r` gives us reproducible installs of {app}, {goal} in {where}.",
        "{app} installs its Python packages from {where}. Before the next deploy, please {goal}. The other lines "
        "stay as they are{|; do not pip install anything}.",
        where=where,
        goal=goal,
        app=app,
        n=w.randint(100, 999),
    )
    check = _check(_REQS_EQ, {"reqs": {path: want}, "same": {p: _sha(t) for p, t in decoys.items()}})
    reference = ([look] if look and w.chance(0.7) else []) + [edit, f"cat {f}"]
    return _draft(place, task=task, check=check, reference=reference, difficulty=difficulty, files=files)


# ---- Makefile ------------------------------------------------------------------------------------------------------------
_MAKE_EQ = """
def parse(text):
    targets, phony, cur = {}, set(), None
    for raw in text.splitlines():
        if raw.startswith("\\t"):
            if cur is None:
                sys.exit(1)
            targets[cur][1].append(raw[1:].strip())
            continue
        line = raw.split("#")[0].rstrip()
        if not line.strip():
            continue
        if line.startswith((" ", "\\t")):
            sys.exit(1)  # a recipe indented with spaces: make would stop with "missing separator"
        assign = line.find("=")
        if ":" in line and (assign < 0 or line.find(":") < assign - 1):
            name, _, pre = line.partition(":")
            if name.strip() == ".PHONY":
                phony.update(pre.split())
                cur = None
                continue
            cur = name.strip()
            targets[cur] = [sorted(pre.split()), []]
        else:
            cur = None
    return targets, phony
targets, phony = parse(load(WANT["path"], "text"))
if targets != WANT["targets"] or not set(WANT["phony"]) <= phony:
    sys.exit(1)
"""

MAKE_TARGETS = {
    "install": ["pip install -e ."],
    "lint": ["ruff check src tests"],
    "test": ["pytest -q"],
    "fmt": ["ruff format src tests"],
    "build": ["python3 -m build"],
    "clean": ["rm -rf build dist *.egg-info"],
    "typecheck": ["mypy src"],
    "docs": ["mkdocs build --strict"],
    "coverage": ["pytest --cov=src --cov-report=term-missing"],
    "release": ["python3 -m build", "twine upload dist/*"],
    "run": ["python3 -m {pkg}"],
    "deps": ["pip install -r requirements.txt"],
}


@family(
    "packaging-makefile-target", "packaging", "add a Makefile target with a tab-indented recipe (and .PHONY)"
)
def makefile_target(w: World) -> Draft:
    app = w.project()
    place = _place(w, app)
    pkg = app.replace("-", "_")
    names = w.sample(sorted(MAKE_TARGETS), w.randint(5, 7))
    have, (new, *_) = names[:-1], names[-1:]
    recipes = {n: [r.format(pkg=pkg) for r in MAKE_TARGETS[n]] for n in names}
    phony_line = ".PHONY: " + " ".join(have)
    body = [phony_line, ""] if w.chance(0.8) else []
    if w.chance(0.4):
        body = [f"PKG := {pkg}", *body]
    for n in have:
        body += [f"{n}:", *[f"\t{r}" for r in recipes[n]], ""]
    path = f"{place.root}/Makefile"
    files = {path: "\n".join(body).rstrip("\n") + "\n", f"{place.root}/README.md": f"# {app}\n"}
    pre = w.pick(have) if w.chance(0.4) else None
    targets = {n: [[], recipes[n]] for n in have}
    targets[new] = [[pre] if pre else [], recipes[new]]
    phony = w.chance(0.5) and phony_line in body
    f = place.sh(path)
    rule = f"{new}:{' ' + pre if pre else ''}"
    lines = [rule, *[f"\t{r}" for r in recipes[new]]]
    fmt = "\\n" + "\\n".join([f"{rule}"] + ["\\t%s"] * len(recipes[new])) + "\\n"
    args = " ".join(quote(r) for r in recipes[new])
    edit = w.pick(
        (
            f"printf {quote(fmt)} {args} >> {f}",
            f"printf '\\n%s\\n' {quote(rule)} >> {f} && printf '\\t%s\\n' {args} >> {f}",
            "echo -e " + quote("\n".join(["", rule] + [f"\\t{r}" for r in recipes[new]])) + f" >> {f}",
            f"cat >> {f} <<'EOF'\n\n" + "\n".join(lines) + "\nEOF",
            "python3 -c "
            + quote(
                f"import os; open(os.path.expanduser({_py(f)}), 'a').write({_py(chr(10) + chr(10).join(lines) + chr(10))})"
            ),
            f"printf {quote(fmt)} {args} | tee -a {f}",
        )
    )
    reference = [w.pick((f"cat -A {f}", f"grep -n ':' {f}", f"cat {f}"))] if w.chance(0.6) else []
    reference.append(edit)
    if phony:
        reference.append(replace_line(w, f, phony_line, f"{phony_line} {new}"))
    reference.append(w.pick((f"cat -A {f}", f"tail -n 5 {f}", f"grep -n -A2 '^{new}:' {f}")))
    w.note(new, *(recipes[new]), pre or "")
    recipe_en = (
        " && ".join(f"`{r}`" for r in recipes[new]) if len(recipes[new]) > 1 else f"`{recipes[new][0]}`"
    )
    goal = w.spin(
        "add a `{new}` target{pre_en} that runs {recipe}{phony_en}",
        capitalize=False,
        new=new,
        recipe=recipe_en,
        pre_en=w.spin(" that depends on `{pre}`", capitalize=False, pre=pre) if pre else "",
        phony_en=w.spin(" and list it in .PHONY{| with the others}", capitalize=False) if phony else "",
    )
    where = place.say(w, path)
    task = w.phrase(
        "In {where}, {goal}.",
        "Ticket {app}-{n}: {goal}. The Makefile is {where}.",
        "can you {goal} in {where}? (make itself is not installed here, just edit the file)",
        "Makefile ({where}): {goal}. Existing targets stay.",
        "I want `make {new}` to work in {app}: {goal} in {where}. Remember that make wants recipe lines "
        "indented with a tab.",
        "Our CI calls make targets of {app}'s Makefile ({where}). It needs one more: {goal}. Keep the other "
        "targets exactly as they are.",
        where=where,
        goal=goal,
        app=app,
        n=w.randint(100, 999),
        new=new,
    )
    check = _check(_MAKE_EQ, {"path": path, "targets": targets, "phony": (have + [new]) if phony else []})
    return _draft(
        place, task=task, check=check, reference=reference, difficulty=3 if phony or pre else 2, files=files
    )


# ---- CHANGELOG -----------------------------------------------------------------------------------------------------------
_CHANGELOG_EQ = """
secs, cur = [], None
for raw in load(WANT["path"], "text").splitlines():
    line = raw.strip()
    if not line:
        continue
    if line.startswith("## "):
        cur = [" ".join(line.split()), []]
        secs.append(cur)
    elif cur is not None:
        cur[1].append(line)
if secs != WANT["sections"]:
    sys.exit(1)
"""

CHANGES = (
    "retry uploads on a 503",
    "a --dry-run flag for the sync command",
    "crash when the config file is empty",
    "timezone handling in the daily report",
    "support for Python 3.12",
    "a health endpoint",
    "slow startup with many plugins",
    "the deprecated --legacy option",
    "structured JSON logging",
    "memory leak in the worker pool",
)


@family(
    "packaging-changelog-release",
    "packaging",
    "cut a release in a keep-a-changelog CHANGELOG.md (Unreleased becomes a dated version) or add an entry",
)
def changelog_release(w: World) -> Draft:
    app = w.project()
    place = _place(w, app)
    last = _ver(w, (0, 3))
    older = [last]
    for _ in range(w.randint(1, 2)):
        a, b, c = (int(x) for x in older[-1].split("."))
        older.append(f"{a}.{max(0, b - 1)}.{c + 1}" if b else f"{a}.{b}.{max(0, c - 1)}")
    day = w.date("2024-01-01", 500)
    kinds = ("Added", "Changed", "Fixed", "Removed")
    items = list(w.sample(CHANGES, 8))
    sections: list[list] = []
    unreleased: list[str] = []
    for k in w.sample(kinds, 2):
        unreleased += [f"### {k}", f"- {items.pop()}"]
    body = [
        "# Changelog",
        "",
        "All notable changes to this project are documented in this file.",
        "",
        "## [Unreleased]",
        "",
    ]
    body += unreleased + [""]
    sections.append(["## [Unreleased]", unreleased])
    for i, v in enumerate(older):
        d = (day.date() if i == 0 else day.date().replace(day=1)).isoformat()
        lines = [f"### {w.pick(kinds)}", f"- {items.pop()}"]
        body += [f"## [{v}] - {d}", "", *lines, ""]
        sections.append([f"## [{v}] - {d}", lines])
    new = _bump(last, w.pick(("patch", "minor")))
    rel_day = (day.date() + __import__("datetime").timedelta(days=w.randint(3, 60))).isoformat()
    path = f"{place.root}/{w.pick(('CHANGELOG.md', 'CHANGELOG.md', 'docs/CHANGELOG.md'))}"
    f = place.sh(path)
    variant = w.pick(("release", "release", "rename", "entry"))
    want = copy.deepcopy(sections)
    head = f"## [{new}] - {rel_day}"
    if variant == "release":
        want[0] = [head, unreleased]
        want.insert(0, ["## [Unreleased]", []])
        goal = w.spin(
            "cut release {new} dated {d}: the current Unreleased entries become the {new} section, and a new empty "
            "`## [Unreleased]` heading goes above it",
            capitalize=False,
            new=new,
            d=rel_day,
        )
        reference = [
            replace_line(w, f, "## [Unreleased]", head),
            insert_after(
                w, f, "All notable changes to this project are documented in this file.", "## [Unreleased]"
            ),
        ]
        difficulty = 3
    elif variant == "rename":
        want[0] = [head, unreleased]
        goal = w.spin(
            "turn the `## [Unreleased]` heading into the heading of release {new} dated {d} (`{head}`), "
            "entries unchanged",
            capitalize=False,
            new=new,
            d=rel_day,
            head=head,
        )
        reference = [replace_line(w, f, "## [Unreleased]", head)]
        difficulty = 2
    else:
        kind = unreleased[0][4:]
        entry = f"- {items.pop()}"
        want[0][1] = [unreleased[0], unreleased[1], entry, *unreleased[2:]]
        goal = w.spin(
            'add the entry "{e}" under {kind} in the Unreleased section',
            capitalize=False,
            e=entry[2:],
            kind=kind,
        )
        reference = [insert_after(w, f, unreleased[1], entry)]
        w.note(entry)
        difficulty = 2
    w.note(new, rel_day)
    reference = ([f"grep -n '^##' {f}"] if w.chance(0.6) else []) + reference + [_show(w, f, "^## ")]
    files = {path: "\n".join(body).rstrip("\n") + "\n", f"{place.root}/README.md": f"# {app}\n"}
    where = place.say(w, path)
    task = w.phrase(
        "In {where}, {goal}.",
        "Ticket {app}-{n}: {goal}. Changelog: {where}.",
        "release notes for {app}: can you {goal}? file is {where}",
        "Changelog ({where}): {goal}. Other sections untouched.",
        "After this, {where} should read like a keep-a-changelog file at release time: {goal}.",
        "We follow keep-a-changelog for {app}; the file is {where}. As part of the release work, please {goal}. "
        "Do not reword or reorder existing entries.",
        where=where,
        goal=goal,
        app=app,
        n=w.randint(100, 999),
    )
    check = _check(_CHANGELOG_EQ, {"path": path, "sections": want})
    return _draft(place, task=task, check=check, reference=reference, difficulty=difficulty, files=files)
