"""Programs: small program files an operator writes or repairs (Python, awk, sed and bash), which the check RUNS.

Every family here ends in a program file: a Python CLI that summarises a path or writes JSON, an awk or sed
program run with ``-f``, a bash script with ``getopts``, a ``--dry-run`` flag, stdin-or-file input, fail-fast exit
codes, an ``EXIT`` trap, settings from the environment, a function completed to its docstring, a find loop made
safe for spaces, a slow ``while read`` loop turned into awk, a command installed on ``PATH``. The check never reads
the program's text: it runs the program as the task's user, in a fresh scratch folder, on inputs drawn here and
never shown to the operator (``_LIB``), and compares what it prints, writes and exits with against values computed
here. A hard-coded answer, the wrong file, a half change or a broken neighbour fails; any correct program passes,
however it is written.

The environments are the ones real tasks come in: ``root`` in ``/opt/<tool>``, ``/srv/<app>``, ``/app`` or
``/usr/local/src/<tool>``, ``operator`` in a project folder (``~/projects/<x>``, ``~/src/<x>``, or ``/srv/<app>``
handed over to them), with near-miss names beside the program (``report.py.bak``, ``report_old.py``,
``reports.py``) that must stay as they are, and draws where the file to change has to be found first.

Kept away from the held-out skills (``factory/split.py``): no numbered file series, no character conversion with
``tr``, no ports or signals, no symlinks (a command is installed as a copy), no cron files.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import (
    CITIES,
    FIRST_NAMES,
    FRUITS,
    HOME,
    LEVELS,
    PROJECTS,
    SERVICES,
    TEAMS,
    WORDS,
    World,
    quote,
    sed_pattern,
    sed_replacement,
)

CATEGORY = "programs"

# ---- the checker: runs the program on fresh inputs as the task's user --------------------------------------------
# argv[1] is the JSON spec: files that must stay as they were, programs that must be executable, and ``cases``
# (argv, stdin, fixture files, environment) with what each must print, exit with and leave behind.
_LIB = r"""
import hashlib, json, os, pwd, shutil, stat, subprocess, sys, tempfile
spec = json.loads(sys.argv[1])
USER = spec.get("user", "operator")
PW = pwd.getpwnam(USER)


def fail(why):
    print(why)
    sys.exit(1)


def md5(path):
    try:
        with open(path, "rb") as fh:
            return hashlib.md5(fh.read()).hexdigest()
    except OSError:
        return None


def norm(text, how="exact"):
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    if how == "ws":
        lines = [" ".join(line.split()) for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    if how == "sorted":
        lines = sorted(" ".join(line.split()) for line in lines if line.strip())
    return "\n".join(lines)


def scratch():
    root = tempfile.mkdtemp(prefix="chk.", dir="/tmp")
    os.chown(root, PW.pw_uid, PW.pw_gid)
    return root


def put(root, files, modes):
    for rel, body in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(body)
        os.chmod(path, int(modes.get(rel, 0o644)))
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            os.lchown(os.path.join(top, name), PW.pw_uid, PW.pw_gid)


def run(argv, stdin="", cwd=None, env=None, timeout=20):
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" if USER == "root" else "/usr/local/bin:/usr/bin:/bin"
    base = {"HOME": PW.pw_dir, "USER": USER, "LOGNAME": USER, "LANG": "C.UTF-8", "PATH": path}
    base.update(env or {})
    cmd = ["timeout", "-k", "2", str(timeout), *argv]
    if USER != "root":
        cmd = ["/usr/sbin/runuser", "-u", USER, "--", "env", "-i", *(f"{k}={v}" for k, v in base.items()), *cmd]
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, errors="replace", cwd=cwd,
                              timeout=timeout + 5, env=base)
    except subprocess.TimeoutExpired:
        fail(f"`{' '.join(argv)}` did not finish within {timeout}s")
    except OSError as exc:
        fail(f"cannot run `{' '.join(argv)}`: {exc}")


def same_json(got, want):
    return json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def case(c):
    root = scratch()
    put(root, c.get("files", {}), c.get("modes", {}))
    sub = lambda v: v.replace("{T}", root)  # noqa: E731
    argv = [sub(a) for a in c["argv"]]
    label = c.get("label") or " ".join(c["argv"])
    env = {k: sub(v) for k, v in c.get("env", {}).items()}
    if c.get("stdin") is not None:  # through a pipe the user made (a pipe of root's is not theirs to reopen)
        put(root, {".stdin": c["stdin"]}, {})
        argv = ["sh", "-c", 'cat "$0" | "$@"', os.path.join(root, ".stdin"), *argv]
    for rel, (text, times) in c.get("repeat", {}).items():  # a big input, made here rather than carried
        put(root, {rel: text * times}, {})
    p = run(argv, "", sub(c.get("cwd", "{T}")), env, c.get("timeout", 20))
    if p.returncode in (124, 137):
        fail(f"{label}: did not finish within {c.get('timeout', 20)}s")
    rc = c.get("rc", 0)
    if rc == "nonzero":
        if p.returncode == 0:
            fail(f"{label}: exit status 0, want a failure status")
    elif rc is not None and p.returncode != rc:
        fail(f"{label}: exit status {p.returncode}, want {rc}; stderr: {p.stderr[-300:]!r}")
    how = c.get("how", "exact")
    if "out" in c:
        if how == "json":
            try:
                got = json.loads(p.stdout)
            except ValueError:
                fail(f"{label}: stdout is not JSON: {p.stdout[:300]!r}")
            if not same_json(got, c["out"]):
                fail(f"{label}: printed {got!r}, want {c['out']!r}")
        elif how == "md5":
            if hashlib.md5(norm(p.stdout).encode()).hexdigest() != c["out"]:
                fail(f"{label}: printed something else than expected ({p.stdout[:200]!r}...)")
        elif norm(p.stdout, how) != norm(sub(c["out"]), how):
            fail(f"{label}: printed {p.stdout[:400]!r}, want {c['out'][:400]!r}")
    if c.get("has") and c["has"].lower() not in p.stdout.lower():
        fail(f"{label}: stdout does not mention {c['has']!r}: {p.stdout[:200]!r}")
    if c.get("absent") and c["absent"] in p.stdout:
        fail(f"{label}: printed {p.stdout[:200]!r}: the run went on after the failure")
    if c.get("err") and not p.stderr.strip():
        fail(f"{label}: no message on stderr")
    if c.get("quiet") and p.stdout.strip():
        fail(f"{label}: printed {p.stdout[:200]!r}, want nothing on stdout")
    for rel, want in c.get("after", {}).items():
        path = os.path.join(root, rel)
        if want is None:
            if os.path.lexists(path):
                fail(f"{label}: {rel} should not exist afterwards")
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                got = fh.read()
        except OSError:
            fail(f"{label}: {rel} is missing afterwards")
        if norm(got, c.get("how_after", "exact")) != norm(sub(want), c.get("how_after", "exact")):
            fail(f"{label}: {rel} holds {got[:300]!r}, want {want[:300]!r}")
    for rel, want in c.get("after_json", {}).items():
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as fh:
                got = json.load(fh)
        except (OSError, ValueError) as exc:
            fail(f"{label}: {rel} is not a JSON file: {exc}")
        if not same_json(got, want):
            fail(f"{label}: {rel} holds {got!r}, want {want!r}")
    for rel, allowed in c.get("only", {}).items():
        left = sorted(set(os.listdir(os.path.join(root, rel))) - set(allowed))
        if left:
            fail(f"{label}: left {left} behind in {rel}")
    for rel in c.get("empty", []):
        left = os.listdir(os.path.join(root, rel))
        if left:
            fail(f"{label}: left {sorted(left)} behind in {rel}")
    shutil.rmtree(root, ignore_errors=True)
    return p


for path, digest in spec.get("same", {}).items():
    if md5(path) != digest:
        fail(f"{path} must stay as it was")
for path in spec.get("exec", []):
    if os.path.islink(path) or not os.path.isfile(path):
        fail(f"{path} is not a regular file")
    if run(["test", "-x", path]).returncode != 0:
        fail(f"{path} is not executable by {USER}")
for path in spec.get("safe", []):
    if os.stat(path).st_mode & 0o022:
        fail(f"{path} is writable by group or others")
for c in spec["cases"]:
    case(c)
"""


def _check(spec: dict[str, Any], extra: str = "") -> str:
    """A check: the library (then ``extra`` code) with ``spec`` as argv[1]."""
    code = _LIB.strip() + ("\n" + extra.strip() if extra else "")
    return f"#!/bin/bash\npython3 - {quote(json.dumps(spec, sort_keys=True))} <<'PY'\n{code}\nPY\n"


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _body(lines: Iterable[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _f(w: World, template: str, **values: object) -> str:
    """A spun fragment for inside a sentence (not capitalised)."""
    return w.spin(template, capitalize=False, **values)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _case(
    argv: Sequence[str],
    files: dict[str, str] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """One run of the program in the check: ``argv`` (``{T}`` is the scratch folder), fixture files, expectations
    (``out``, ``how``, ``rc``, ``stdin``, ``env``, ``after``, ``after_json``, ``err``, ``quiet``, ``empty``)."""
    return {"argv": list(argv), "files": dict(files or {}), **kw}


# ---- the environment: who, where, and what sits beside the program -----------------------------------------------
@dataclass
class _Place:
    """Who runs the task and where: the working folder holds the project the program belongs to."""

    user: Literal["operator", "root"]
    wd: str
    name: str
    setup: list[str] = field(default_factory=list)

    @property
    def home(self) -> str:
        return "/root" if self.user == "root" else HOME

    def at(self, rel: str) -> str:
        return posixpath.join(self.wd, rel)

    def draft(self, **kw: Any) -> Draft:
        setup = [*self.owner_setup(), *kw.pop("setup", [])]
        return Draft(user=self.user, workdir=None if self.wd == self.home else self.wd, setup=setup, **kw)

    def owner_setup(self) -> list[str]:
        """The project folder exists, and belongs to the operator when they are the one working in it."""
        lines = [f"mkdir -p {self.wd}"]
        if self.user == "operator":
            lines.append(f"chown -R operator:operator {self.wd}")
        return lines + self.setup


def _place(w: World, root: float = 0.45) -> _Place:
    user: Literal["operator", "root"] = "root" if w.chance(root) else "operator"
    name = w.unique(lambda: w.pick(PROJECTS + SERVICES))
    if user == "root":
        wd = w.pick(
            (
                f"/opt/{name}",
                f"/opt/{name}",
                f"/srv/{name}",
                "/app",
                f"/usr/local/src/{name}",
                f"/root/{name}",
            )
        )
    else:
        wd = w.pick(
            (
                f"{HOME}/projects/{name}",
                f"{HOME}/projects/{name}",
                f"{HOME}/src/{name}",
                f"{HOME}/{name}",
                f"{HOME}/work/{name}",
                f"/srv/{name}",
                "/app",
            )
        )
    w.note(wd)
    return _Place(user=user, wd=wd, name=name)


def _subdir(w: World) -> str:
    return w.pick(("bin/", "scripts/", "tools/", "", "bin/"))


def _ref(w: World, rel: str) -> str:
    """A path inside the working folder as a person writes it: ``bin/x`` or ``./bin/x``."""
    return f"./{rel}" if w.chance(0.3) else rel


def _here(w: World) -> str:
    return _f(w, "{in this project|here|in the current folder|in this directory|in the project you are in}")


def _near_misses(w: World, rel: str, stem: str, ext: str, k: int) -> dict[str, str]:
    """Look-alike files beside ``rel`` (relative paths -> content): old copies and similar names."""
    folder = posixpath.dirname(rel)
    shapes = [
        f"{stem}.{ext}.bak" if ext else f"{stem}.bak",
        f"{stem}_old.{ext}" if ext else f"{stem}_old",
        f"{stem}s.{ext}" if ext else f"{stem}s",
        f"{stem}.{ext}.orig" if ext else f"{stem}.orig",
        f"old_{stem}.{ext}" if ext else f"old_{stem}",
    ]
    out = {}
    for name in w.sample(shapes, k):
        out[posixpath.join(folder, name)] = f"# {name}: an older copy, kept for reference ({w.token(6)})\n"
    return out


# ---- how a reference writes or changes a file --------------------------------------------------------------------
def _delim(lines: Sequence[str]) -> str:
    for d in ("EOF", "END", "SCRIPT", "PROG", "CODE"):
        if d not in lines:
            return d
    raise ValueError("no free here-document delimiter")


def _write(w: World, path: str, lines: Sequence[str], exe: bool = False, existing: bool = False) -> list[str]:
    """Commands writing ``lines`` to ``path`` (a shell-safe path): a here-doc, tee, printf, python3, a temporary file
    put in place, or ``install -m`` (a new executable). Over an ``existing`` file every style keeps its mode."""
    d = _delim(lines)
    body = "\n".join(lines)
    styles = ["cat", "cat", "tee", "printf", "python", "tmp"] + (
        ["install", "install"] if exe and not existing else []
    )
    style = w.pick(styles)
    if style == "cat":
        return [f"cat > {path} <<'{d}'\n{body}\n{d}"]
    if style == "tee":
        return [f"tee {path} > /dev/null <<'{d}'\n{body}\n{d}"]
    if style == "printf":
        return [f"printf '%s\\n' {' '.join(quote(line) for line in lines)} > {path}"]
    if style == "python":
        return [
            "python3 -c 'import sys; open(sys.argv[1], \"w\").write(sys.stdin.read())' "
            f"{path} <<'{d}'\n{body}\n{d}"
        ]
    if style == "install":
        return [f"install -m {w.pick(('755', '0755', '755', '750'))} /dev/stdin {path} <<'{d}'\n{body}\n{d}"]
    tmp = f"/tmp/{posixpath.basename(path)}.{w.pick(('new', 'tmp', 'draft'))}"
    put = w.pick(("cp", f"cat {tmp} >")) if existing else w.pick(("mv", "cp"))
    return [
        f"cat > {tmp} <<'{d}'\n{body}\n{d}",
        f"{put} {tmp} {path}" if put != f"cat {tmp} >" else f"cat {tmp} > {path}",
    ]


def _make_exec(w: World, path: str) -> str:
    return w.pick(
        (
            f"chmod +x {path}",
            f"chmod 755 {path}",
            f"chmod u+x {path}",
            f"chmod a+x {path}",
            f"chmod 0755 {path}",
        )
    )


def _write_program(w: World, path: str, lines: Sequence[str], exe: bool) -> list[str]:
    """Write a new program; an executable one gets its mode too (unless ``install -m`` set it)."""
    cmds = _write(w, path, lines, exe)
    if exe and not cmds[0].startswith("install "):
        cmds.append(_make_exec(w, path))
    return cmds


def _edit(w: World, path: str, old: str, new: str) -> list[str]:
    """Commands turning the file ``path`` (text ``old``) into ``new``, keeping its mode: sed on the changed lines
    (by number, by content, or lines appended), perl, a python3 replace, a patch, or the whole file rewritten.
    Which ones fit depends on the change."""
    a, b = old.splitlines(), new.splitlines()
    ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if op[0] != "equal"]
    pairs = [
        (i, j)
        for tag, i1, i2, j1, j2 in ops
        if tag == "replace" and i2 - i1 == j2 - j1
        for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
    ]
    text = "\n".join(a)
    styles = ["patch", "python", "rewrite"]
    if all(tag == "replace" and i2 - i1 == j2 - j1 for tag, i1, i2, j1, j2 in ops) and not any(
        "\\" in b[j] for _, j in pairs
    ):
        styles += ["sed-line", "sed-sub"]
        if all(not set("#'$@\\") & set(a[i] + b[j]) and text.count(a[i]) == 1 for i, j in pairs):
            styles.append("perl")
    inserted = [(i1, j) for tag, i1, _, j1, j2 in ops if tag == "insert" for j in range(j1, j2)]
    if (
        all(tag == "insert" for tag, *_ in ops)
        and len(inserted) <= 4
        and all(b[j][:1] not in (" ", "\t") and "\\" not in b[j] for _, j in inserted)
    ):
        styles += ["sed-insert", "sed-insert"]
    style = w.pick(styles)
    if style == "rewrite":
        return _write(w, path, b, existing=True)
    if style == "patch":
        name = posixpath.basename(path)
        diff = "".join(
            difflib.unified_diff([x + "\n" for x in a], [x + "\n" for x in b], f"a/{name}", f"b/{name}")
        )
        d = _delim(diff.splitlines())
        opts = w.pick(("", "-s ", "--no-backup-if-mismatch "))
        return [f"patch {opts}{path} <<'{d}'\n{diff.rstrip(chr(10))}\n{d}"]
    if style == "python":
        lo, hi = max(ops[0][1] - 1, 0), min(ops[-1][2] + 1, len(a))
        blo, bhi = max(ops[0][3] - 1, 0), min(ops[-1][4] + 1, len(b))
        if lo == hi or text.count("\n".join(a[lo:hi])) != 1:
            lo, hi, blo, bhi = 0, len(a), 0, len(b)
        before, after = "\n".join(a[lo:hi]), "\n".join(b[blo:bhi])
        return [
            "python3 -c 'import sys, pathlib; p = pathlib.Path(sys.argv[1]); "
            "p.write_text(p.read_text().replace(sys.argv[2], sys.argv[3], 1))' "
            f"{path} {quote(before)} {quote(after)}"
        ]
    if style == "sed-insert":
        exprs = [f"{i1}a\\{b[j]}" if i1 else f"1i\\{b[j]}" for i1, j in inserted]
    elif style == "perl":
        exprs = [f"s#\\Q{a[i]}\\E#{b[j]}#;" for i, j in pairs]
        return [f"perl -pi {' '.join('-e ' + quote(e) for e in exprs)} {path}"]
    elif style == "sed-sub" and all(a[i].strip() and text.count(a[i].strip()) == 1 for i, _ in pairs):
        exprs = [f"s|{sed_pattern(a[i].strip())}|{sed_replacement(b[j].strip())}|" for i, j in pairs]
    else:
        exprs = [f"{i + 1}s|.*|{sed_replacement(b[j])}|" for i, j in pairs]
    if len(exprs) == 1:
        return [f"sed -i {quote(exprs[0])} {path}"]
    if w.chance(0.4) and style != "sed-insert":
        return [f"sed -i {quote(e)} {path}" for e in exprs]
    return [f"sed -i {' '.join('-e ' + quote(e) for e in exprs)} {path}"]


def _backup(w: World, rel: str) -> list[str]:
    """Sometimes a copy of a file before it is changed, outside the project (a copy beside it could be taken for
    one of the near-miss files)."""
    if not w.chance(0.3):
        return []
    keep = f"/tmp/{posixpath.basename(rel)}.{w.pick(('before', 'orig', 'saved'))}"
    return [w.pick((f"cp {rel} {keep}", f"cp -p {rel} {keep}"))]


def _look(w: World, path: str) -> str:
    return w.pick((f"cat {path}", f"cat -n {path}", f"head -n 40 {path}", f"less -FX {path}", f"cat {path}"))


def _prog_name(w: World, stems: Sequence[str]) -> str:
    return w.unique(lambda: w.pick(stems))


def _invoke(exe: bool, interpreter: Sequence[str], path: str) -> list[str]:
    """How the check (and the task) runs a program: by its path when it must be executable, else through its
    interpreter."""
    return [path] if exe else [*interpreter, path]


# ---- programs-python-summary ---------------------------------------------------------------------------------------
_KEYS = ("team", "region", "city", "status", "owner", "project")
_NUMS = ("amount", "units", "hours", "bytes", "count", "cost")


def _csv_table(
    w: World, key: str, num: str, keys: Sequence[str], n: int, extra: str
) -> tuple[str, dict[str, int]]:
    """A CSV (columns in a drawn order) and the total of ``num`` per ``key``."""
    cols = w.shuffled(["id", key, num, extra])
    rows, totals = [], Counter[str]()
    for i in range(n):
        k, v = w.pick(keys), w.randint(1, 500)
        totals[k] += v
        row = {"id": str(100 + i), key: k, num: str(v), extra: w.pick(WORDS)}
        rows.append(",".join(row[c] for c in cols))
    return _body([",".join(cols), *rows]), dict(totals)


@dataclass
class _Summary:
    """One summary a script prints: what it says, its code, and inputs with their expected output."""

    does: str
    what: str
    code: list[str]
    ext: str
    make: Callable[[], tuple[str, str]]  # -> (input content or tree marker, expected output)
    tree: Callable[[], tuple[dict[str, str], str]] | None = None


def _summary(w: World) -> _Summary:
    kind = w.pick(("totals", "totals", "levels", "exts", "textstats", "json"))
    sep = w.pick((" ", ": ", ","))
    {" ": "a space", ": ": "a colon and a space", ",": "a comma"}[sep]
    if kind == "totals":
        key, num = w.pick(_KEYS), w.pick(_NUMS)
        extra = w.pick(("note", "tag", "comment", "label"))
        keys = [w.pick(FIRST_NAMES) if key == "owner" else w.pick(WORDS) for _ in range(6)]
        order = w.pick(("key", "total"))
        w.note(key, num)

        def make() -> tuple[str, str]:
            pool = w.sample(sorted(set(keys)), min(len(set(keys)), w.randint(2, 4)))
            text, totals = _csv_table(w, key, num, pool, w.randint(4, 12), extra)
            ks = sorted(totals) if order == "key" else sorted(totals, key=lambda k: (-totals[k], k))
            return text, _body(f"{k}{sep}{totals[k]}" for k in ks)

        sort_en = (
            _f(w, "sorted by {key}", key=key)
            if order == "key"
            else _f(w, "largest total first (ties by {key})", key=key)
        )
        line = f"`{key.upper()}{sep}TOTAL`"
        sorter = "sorted(totals)" if order == "key" else "sorted(totals, key=lambda k: (-totals[k], k))"
        return _Summary(
            does=_f(
                w,
                "reads the CSV file it is given (header row first; the columns are found by name, in any order) "
                "and prints the total of the {num} column for each {key}, one {line} line each, {sort}",
                num=num,
                key=key,
                line=line,
                sort=sort_en,
            ),
            what=_f(
                w,
                "the total {num} per {key} of a CSV file, as {line} lines {sort}",
                num=num,
                key=key,
                line=line,
                sort=sort_en,
            ),
            code=[
                "import csv",
                "import sys",
                "from collections import defaultdict",
                "",
                "totals = defaultdict(int)",
                'with open(sys.argv[1], newline="") as fh:',
                "    for row in csv.DictReader(fh):",
                f'        totals[row["{key}"]] += int(row["{num}"])',
                f"for key in {sorter}:",
                f'    print(f"{{key}}{sep}{{totals[key]}}")',
            ],
            ext="csv",
            make=make,
        )
    if kind == "levels":

        def make() -> tuple[str, str]:
            lines = w.log_lines(w.randint(6, 16), levels=w.sample(LEVELS, w.randint(2, 4)))
            counts = Counter(line.split()[1] for line in lines)
            ks = sorted(counts, key=lambda k: (-counts[k], k))
            return _body(lines), _body(f"{k}{sep}{counts[k]}" for k in ks)

        line = "`LEVEL" + sep + "COUNT`"
        return _Summary(
            does=_f(
                w,
                "reads the log file it is given (lines like `2024-03-01T10:00:00 ERROR api: message`: the level is "
                "the second field) and prints how many lines each level has, one {line} line per level that "
                "occurs, the most frequent first and ties in alphabetical order",
                line=line,
            ),
            what=_f(
                w, "a count of log lines per level, one {line} line each, most frequent first", line=line
            ),
            code=[
                "import sys",
                "from collections import Counter",
                "",
                "counts = Counter()",
                "with open(sys.argv[1]) as fh:",
                "    for line in fh:",
                "        fields = line.split()",
                "        if len(fields) > 1:",
                "            counts[fields[1]] += 1",
                "for level, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):",
                f'    print(f"{{level}}{sep}{{n}}")',
            ],
            ext="log",
            make=make,
        )
    if kind == "exts":
        none = w.pick(("none", "-", "(none)"))
        w.note(none)

        def tree() -> tuple[dict[str, str], str]:
            files: dict[str, str] = {}
            for _ in range(w.randint(5, 12)):
                folder = w.pick(("", "", "sub/", f"{w.pick(WORDS)}/", "a/b/"))
                ext = w.pick(("txt", "log", "csv", "TXT", "json", "py", ""))
                stem = w.pick(WORDS) + str(w.randint(1, 99))
                files[f"{folder}{stem}.{ext}" if ext else f"{folder}{stem}"] = f"{w.token(5)}\n"
            counts = Counter(
                (posixpath.basename(p).rsplit(".", 1)[1].lower() if "." in posixpath.basename(p) else none)
                for p in files
            )
            return files, _body(f"{k}{sep}{counts[k]}" for k in sorted(counts))

        line = "`EXT" + sep + "COUNT`"
        return _Summary(
            does=_f(
                w,
                "walks the directory it is given, subdirectories included, and prints how many files there are of "
                "each extension: one {line} line per extension, sorted, the extension in lower case without its "
                "dot, and `{none}` for files with no extension",
                line=line,
                none=none,
            ),
            what=_f(
                w, "the number of files per extension under a directory, one {line} line each", line=line
            ),
            code=[
                "import os",
                "import sys",
                "from collections import Counter",
                "",
                "counts = Counter()",
                "for _top, _dirs, names in os.walk(sys.argv[1]):",
                "    for name in names:",
                f'        counts[name.rsplit(".", 1)[1].lower() if "." in name else "{none}"] += 1',
                "for ext in sorted(counts):",
                f'    print(f"{{ext}}{sep}{{counts[ext]}}")',
            ],
            ext="",
            make=lambda: ("", ""),
            tree=tree,
        )
    if kind == "textstats":
        labels = w.pick((("lines", "words", "longest"), ("Lines", "Words", "Longest word")))

        def make() -> tuple[str, str]:
            lines = [
                " ".join(w.pick(WORDS + FRUITS) for _ in range(w.randint(1, 7)))
                for _ in range(w.randint(2, 9))
            ]
            words = " ".join(lines).split()
            longest = max(words, key=len)
            return _body(lines), _body(
                [
                    f"{labels[0]}{sep}{len(lines)}",
                    f"{labels[1]}{sep}{len(words)}",
                    f"{labels[2]}{sep}{longest}",
                ]
            )

        return _Summary(
            does=_f(
                w,
                "prints three lines about the text file it is given: `{a}{sep}N` (its number of lines), `{b}{sep}N` "
                "(its number of words) and `{c}{sep}WORD` (its longest word; the first one when several are "
                "equally long)",
                a=labels[0],
                b=labels[1],
                c=labels[2],
                sep=sep,
            ),
            what=_f(w, "the line count, word count and longest word of a text file"),
            code=[
                "import sys",
                "",
                "with open(sys.argv[1]) as fh:",
                "    lines = fh.read().splitlines()",
                "words = [word for line in lines for word in line.split()]",
                "longest = max(words, key=len) if words else ''",
                f'print(f"{labels[0]}{sep}{{len(lines)}}")',
                f'print(f"{labels[1]}{sep}{{len(words)}}")',
                f'print(f"{labels[2]}{sep}{{longest}}")',
            ],
            ext="txt",
            make=make,
        )
    field_name = w.pick(("status", "state", "plan", "tier"))
    w.note(field_name)

    def make_last() -> tuple[str, str]:
        values = w.sample(("active", "trial", "closed", "paused", "pending", "free", "pro"), 3)
        recs = [
            {"id": i, "name": w.pick(FIRST_NAMES), field_name: w.pick(values)} for i in range(w.randint(3, 9))
        ]
        counts = Counter(str(r[field_name]) for r in recs)
        return json.dumps(recs, indent=w.pick((None, 2))) + "\n", _body(
            [f"total{sep}{len(recs)}", *(f"{k}{sep}{counts[k]}" for k in sorted(counts))]
        )

    return _Summary(
        does=_f(
            w,
            "reads the JSON file it is given (an array of objects, each with a `{f}` field) and prints "
            "`total{sep}N` (the number of objects) followed by one `VALUE{sep}COUNT` line per distinct {f}, sorted",
            f=field_name,
            sep=sep,
        ),
        what=_f(w, "the number of records in a JSON array and how many have each {f}", f=field_name),
        code=[
            "import json",
            "import sys",
            "from collections import Counter",
            "",
            "with open(sys.argv[1]) as fh:",
            "    records = json.load(fh)",
            f'counts = Counter(str(r["{field_name}"]) for r in records)',
            f'print(f"total{sep}{{len(records)}}")',
            "for value in sorted(counts):",
            f'    print(f"{{value}}{sep}{{counts[value]}}")',
        ],
        ext="json",
        make=make_last,
    )


@family(
    "programs-python-summary",
    CATEGORY,
    "write a Python script that takes a path argument and prints a summary of it (totals, counts, stats)",
)
def python_summary(w: World) -> Draft:
    place = _place(w)
    s = _summary(w)
    sub = _subdir(w)
    stem = _prog_name(w, ("summarize", "summary", "stats", "report", "tally", "digest", "count_by"))
    rel = f"{sub}{stem}.py"
    exe = w.chance(0.4)
    usage_rule = w.chance(0.35)
    files: dict[str, str] = {}
    decoys = _near_misses(w, rel, stem, "py", w.randint(0, 2)) if sub else {}
    files.update({place.at(k): v for k, v in decoys.items()})
    if s.tree:
        sample_rel = w.pick(("data", "inbox", "exports", "samples"))
        sample_files, _ = s.tree()
        files.update({place.at(f"{sample_rel}/{k}"): v for k, v in sample_files.items()})
    else:
        sample_rel = f"data/{w.pick(WORDS)}.{s.ext}"
        files[place.at(sample_rel)] = s.make()[0]
    files[place.at("README.md")] = f"# {place.name}\n\nTools for {place.name}.\n"
    w.note(stem)
    usage = f"{'./' if exe and not sub else ''}{rel} PATH" if exe else f"python3 {rel} PATH"
    rules = []
    if exe:
        rules.append(_f(w, "it must be executable and run directly (`{u}`)", u=usage))
    if usage_rule:
        rules.append(
            _f(w, "run without an argument it prints a usage message on stderr and exits with status 2")
        )
    extra = (" " + _cap(w.clauses(rules)) + ".") if rules else ""
    prog = _ref(w, rel)
    task = w.phrase(
        "Write a Python script {prog} {here}: `{usage}` {does}.{extra}",
        "We need a small Python CLI at {prog}. Usage: `{usage}`. It {does}.{extra}",
        "Ticket: add {prog} (Python 3). Given a path, it {does}. There is a sample to try it on: {sample}.{extra}",
        "Can you write {prog} {here}? It takes a path as its argument and {does}.{extra}",
        "I keep working out {what} by hand. Put a Python script at {prog} that does it for the path it is given "
        "(try {sample}): it {does}.{extra}",
        "{prog}: new Python 3 script. `{usage}` {does}.{extra}",
        "Goal: `{usage}` prints {what}. Precisely, the script {does}.{extra} Write it in Python at {prog}.",
        "Is there a quick way to get {what} for any path like {sample}? Write it as a Python script, {prog}, "
        "that {does}.{extra}",
        "Our reports need {what}. Implement {prog} in Python: it {does}.{extra}",
        prog=prog,
        here=_here(w),
        usage=usage,
        does=s.does,
        what=s.what,
        sample=sample_rel,
        extra=extra,
    )
    code = ["#!/usr/bin/env python3", f'"""{_cap(s.what)}."""', ""]
    body = list(s.code)
    if usage_rule:
        usage_lines = [
            "if len(sys.argv) != 2:",
            f'    print("usage: {stem}.py PATH", file=sys.stderr)',
            "    sys.exit(2)",
        ]
        if "import sys" not in body:
            body.insert(0, "import sys")
        cut = max(i for i, line in enumerate(body) if line.startswith(("import ", "from "))) + 1
        body[cut:cut] = ["", *usage_lines]
    code += body
    path = place.at(rel)
    argv = _invoke(exe, ("python3",), path)
    cases = []
    for i in range(2):
        name = w.pick(("input", "my data", "sample 2", "in")) + (f".{s.ext}" if s.ext else "")
        if s.tree:
            tree, want = s.tree()
            cases.append(
                _case(
                    [*argv, f"{{T}}/{name}"], {f"{name}/{k}": v for k, v in tree.items()}, out=want, how="ws"
                )
            )
        else:
            text, want = s.make()
            cases.append(_case([*argv, f"{{T}}/{name}"], {name: text}, out=want, how="ws"))
        if i == 0:
            cases[-1]["cwd"] = "/"
    if usage_rule:
        cases.append(_case(argv, rc=2, err=True, quiet=True, label="without an argument"))
    spec = {
        "user": place.user,
        "same": {place.at(k): _md5(v) for k, v in decoys.items()},
        "exec": [path] if exe else [],
        "cases": cases,
    }
    target = rel
    reference = [
        w.pick((f"ls {sub or '.'}", f"head -n 5 {sample_rel}" if not s.tree else f"ls -R {sample_rel}"))
    ]
    if sub and not decoys:
        reference.append(f"mkdir -p {sub.rstrip('/')}")
    reference += _write_program(w, target, code, exe)
    reference.append(f"python3 {rel} {sample_rel}")
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=2 + (exe or usage_rule) + (s.tree is not None and usage_rule),
        files=files,
    )


# ---- programs-awk-report ---------------------------------------------------------------------------------------------
@dataclass
class _AwkJob:
    """An awk program's job: the spec, the program, and a maker of (input, expected output)."""

    does: str
    code: list[str]
    make: Callable[[], tuple[str, str]]
    how: str
    ext: str


def _awk_job(w: World) -> _AwkJob:
    kind = w.pick(("groups", "aligned", "filter", "records", "average"))
    if kind == "groups":
        key = w.pick(("team", "region", "owner", "queue"))
        val = w.pick(("amount", "hours", "units", "cost"))
        cols = w.shuffled(["date", key, val])
        k, v = cols.index(key) + 1, cols.index(val) + 1
        total_word = w.pick(("TOTAL", "total", "ALL", "sum"))
        pool = [w.pick(TEAMS) for _ in range(5)]

        def make() -> tuple[str, str]:
            rows, order, totals = [], [], Counter[str]()
            for _ in range(w.randint(4, 11)):
                row = {
                    "date": f"2024-{w.randint(1, 12):02d}-{w.randint(1, 28):02d}",
                    key: w.pick(pool),
                    val: str(w.randint(1, 300)),
                }
                rows.append(",".join(row[c] for c in cols))
                if row[key] not in totals:
                    order.append(row[key])
                totals[row[key]] += int(row[val])
            out = [f"{g} {totals[g]}" for g in order] + [f"{total_word} {sum(totals.values())}"]
            return _body([",".join(cols), *rows]), _body(out)

        return _AwkJob(
            does=_f(
                w,
                "reads a CSV file whose first line is the header `{h}` and prints, for each {key}, one `{kup} SUM` "
                "line with the sum of its {val} (the {key}s in the order they first appear), then a last line "
                "`{t} SUM` with the sum over all rows",
                h=",".join(cols),
                key=key,
                kup=key.upper(),
                val=val,
                t=total_word,
            ),
            code=[
                'BEGIN { FS = "," }',
                "NR == 1 { next }",
                "{",
                f"    if (!(${k} in total)) order[++n] = ${k}",
                f"    total[${k}] += ${v}",
                f"    sum += ${v}",
                "}",
                "END {",
                "    for (i = 1; i <= n; i++) print order[i], total[order[i]]",
                f'    print "{total_word}", sum',
                "}",
            ],
            make=make,
            how="ws",
            ext="csv",
        )
    if kind == "aligned":
        width, vw, dec = w.pick((10, 12, 16)), w.pick((6, 8, 10)), w.pick((1, 2))
        metric = w.pick(("cpu", "mem", "load", "latency"))
        header = w.chance(0.5)
        w.note(width, vw, dec, metric)

        def make() -> tuple[str, str]:
            lines, out = [], []
            if header:
                out.append(f"{'HOST':<{width}} {metric.upper():>{vw}}")
            for _ in range(w.randint(3, 8)):
                if w.chance(0.2):
                    lines.append(w.pick(("", f"# {w.pick(WORDS)} {w.pick(WORDS)}")))
                host = f"{w.pick(WORDS)}-{w.randint(1, 40)}"
                value = w.randint(0, 99999) / 100
                lines.append(f"{host} {w.randint(1, 64)} {value} {w.pick(('ok', 'warn'))}")
                out.append(f"{host:<{width}} {value:>{vw}.{dec}f}")
            return _body(lines), _body(out)

        head = (
            _f(w, ", after a header line `HOST {M}` laid out the same way", M=metric.upper())
            if header
            else ""
        )
        code = ["/^#/ || NF == 0 { next }", f'{{ printf "%-{width}s %{vw}.{dec}f\\n", $1, $3 }}']
        if header:
            code.insert(0, f'BEGIN {{ printf "%-{width}s %{vw}s\\n", "HOST", "{metric.upper()}" }}')
        return _AwkJob(
            does=_f(
                w,
                "reads lines of whitespace-separated fields `HOST CORES {M} STATE` (skipping blank lines and lines "
                "starting with #) and prints one line per host: the host left-aligned in a {wd}-character column, "
                "a space, then the {m} value right-aligned in {vw} characters with {dec} decimal{s}{head}",
                M=metric.upper(),
                m=metric,
                wd=width,
                vw=vw,
                dec=dec,
                s="" if dec == 1 else "s",
                head=head,
            ),
            code=code,
            make=make,
            how="exact",
            ext="txt",
        )
    if kind == "filter":
        limit = w.pick((1000, 2048, 5000, 10000))
        w.note(limit)

        def make() -> tuple[str, str]:
            lines, hits = [], []
            # besides random sizes: the limit itself (not more), and one that is less but sorts after it as text
            sizes = [w.randint(10, limit * 3) for _ in range(w.randint(3, 10))]
            sizes += [limit, int("9" * (len(str(limit)) - 1))]
            n = len(sizes)
            for size in w.shuffled(sizes):
                path = w.pick(("/a", "/api/x", "/login", "/img/y.png"))
                line = f"{w.ip()} {w.pick((200, 200, 404, 500))} {size} {path}"
                lines.append(line)
                if int(line.split()[2]) > limit:
                    hits.append(line)
            return _body(lines), _body([*hits, f"{len(hits)} of {n}"])

        return _AwkJob(
            does=_f(
                w,
                "reads access lines `IP STATUS BYTES PATH` and prints, unchanged, every line whose BYTES is "
                "{more than|greater than} {n} (a number, compared as a number), then a last line `MATCHED of TOTAL` "
                "with how many lines matched and how many were read",
                n=limit,
            ),
            code=[f"$3 + 0 > {limit} {{ print; hits++ }}", 'END { print hits + 0 " of " NR }'],
            make=make,
            how="exact",
            ext="log",
        )
    if kind == "records":
        fmt = w.pick(("paren", "pipe", "angle"))
        extra = w.pick(("email", "room", "phone"))
        shape = {
            "paren": "NAME (TEAM)",
            "pipe": "NAME|TEAM|" + extra.upper(),
            "angle": f"NAME <{extra.upper()}>",
        }[fmt]

        def make() -> tuple[str, str]:
            blocks, out = [], []
            for _ in range(w.randint(2, 6)):
                rec = {
                    "name": w.pick(FIRST_NAMES),
                    "team": w.pick(TEAMS),
                    extra: {
                        "email": f"{w.pick(FIRST_NAMES)}@example.com",
                        "room": f"R{w.randint(100, 999)}",
                        "phone": f"555-{w.randint(1000, 9999)}",
                    }[extra],
                }
                keys = w.shuffled(list(rec))
                blocks.append("\n".join(f"{k}: {rec[k]}" for k in keys))
                out.append(
                    {
                        "paren": f"{rec['name']} ({rec['team']})",
                        "pipe": f"{rec['name']}|{rec['team']}|{rec[extra]}",
                        "angle": f"{rec['name']} <{rec[extra]}>",
                    }[fmt]
                )
            return "\n\n".join(blocks) + "\n", _body(out)

        printer = {
            "paren": 'print v["name"] " (" v["team"] ")"',
            "pipe": f'print v["name"] "|" v["team"] "|" v["{extra}"]',
            "angle": f'print v["name"] " <" v["{extra}"] ">"',
        }[fmt]
        return _AwkJob(
            does=_f(
                w,
                "reads records separated by blank lines, each a few `key: value` lines (name, team and {x}, in any "
                "order) and prints one `{shape}` line per record, in file order",
                x=extra,
                shape=shape,
            ),
            code=[
                'BEGIN { RS = ""; FS = "\\n" }',
                "{",
                '    split("", v)',
                "    for (i = 1; i <= NF; i++) {",
                '        p = index($i, ": ")',
                "        v[substr($i, 1, p - 1)] = substr($i, p + 2)",
                "    }",
                f"    {printer}",
                "}",
            ],
            make=make,
            how="exact",
            ext="txt",
        )
    sensor = w.pick(("sensor", "probe", "station", "device"))
    sep_name, sep = w.pick((("semicolons", ";"), ("commas", ","), ("tabs", "\t")))

    def make_last() -> tuple[str, str]:
        pool = [f"{w.pick(CITIES).lower()}{w.randint(1, 9)}" for _ in range(4)]
        rows, order, sums, counts = [], [], Counter[str](), Counter[str]()
        for _ in range(w.randint(4, 12)):
            s, r = w.pick(pool), w.randint(-200, 450) / 10
            rows.append(sep.join([f"{w.randint(0, 23):02d}:{w.randint(0, 59):02d}", s, str(r)]))
            if s not in counts:
                order.append(s)
            sums[s] += r  # type: ignore[assignment]
            counts[s] += 1
        return _body(rows), _body(f"{s} {sums[s] / counts[s]:.1f}" for s in order)

    fs = "\\t" if sep == "\t" else sep
    return _AwkJob(
        does=_f(
            w,
            "reads lines `TIME{s}{S}{s}READING` (fields separated by {sn}, no header) and prints each {x}'s average "
            "reading with one decimal, one `{S} AVERAGE` line per {x} in the order they first appear",
            s="<TAB>" if sep == "\t" else sep,
            sn=sep_name,
            S=sensor.upper(),
            x=sensor,
        ),
        code=[
            f'BEGIN {{ FS = "{fs}" }}',
            "{",
            "    if (!($2 in n)) order[++k] = $2",
            "    sum[$2] += $3",
            "    n[$2]++",
            "}",
            'END { for (i = 1; i <= k; i++) printf "%s %.1f\\n", order[i], sum[order[i]] / n[order[i]] }',
        ],
        make=make_last,
        how="ws",
        ext="tsv" if sep == "\t" else "csv",
    )


@family(
    "programs-awk-report",
    CATEGORY,
    "write an awk program file (run with awk -f) that turns a data file into a report: groups, totals, alignment",
)
def awk_report(w: World) -> Draft:
    place = _place(w)
    job = _awk_job(w)
    sub = w.pick(("", "awk/", "reports/", "bin/", "lib/"))
    stem = _prog_name(w, ("report", "summary", "format", "totals", "digest", "tabulate"))
    rel = f"{sub}{stem}.awk"
    exe = w.chance(0.3)
    decoys = _near_misses(w, rel, stem, "awk", w.randint(0, 2))
    sample = f"{w.pick(('data', 'input', 'samples'))}/{w.pick(WORDS)}.{job.ext}"
    files = {place.at(k): v for k, v in decoys.items()}
    files[place.at(sample)] = job.make()[0]
    w.note(stem)
    usage = f"{rel} FILE" if exe else f"awk -f {rel} FILE"
    if exe:
        usage = usage if sub else f"./{usage}"
    how_run = (
        _f(w, "it is run directly, as `{u}`, so it needs an awk shebang line and the execute bit", u=usage)
        if exe
        else _f(w, "it is run as `{u}` (no other options)", u=usage)
    )
    prog = _ref(w, rel)
    task = w.phrase(
        "Write an awk program file {prog} that {does}; {run}.",
        "Ticket: we want a reusable awk program for this report, saved as {prog}. Spec: it {does}. Note: {run}.",
        "Can you put an awk script at {prog}? It {does}. {run_c}. A sample input is in {sample}.",
        "{prog}: awk program. {Behaviour|Spec}: {does}. {run_c}.",
        "I format {sample} by hand every week. Save an awk program as {prog} that {does} ({run}).",
        "The report step needs an awk program, {prog}, which {does}. {run_c}; try it on {sample}.",
        "Goal: `{usage}` {does}. Write {prog} so that it does.",
        "How would you do this with awk? Save the answer as a program file, {prog}, that {does}; {run}.",
        prog=prog,
        does=job.does,
        run=how_run,
        run_c=_cap(how_run),
        sample=sample,
        usage=usage,
    )
    path = place.at(rel)
    shebang = w.pick(("#!/usr/bin/awk -f", "#!/usr/bin/env -S awk -f", "#!/usr/bin/gawk -f"))
    code = (
        ([shebang] if exe else [])
        + ([f"# {stem}.awk: the {place.name} report"] if w.chance(0.5) else [])
        + job.code
    )
    argv = _invoke(exe, ("awk", "-f"), path)
    cases = []
    for i in range(3):
        text, want = job.make()
        name = w.pick(("in", "week 2", "data", "sample")) + f".{job.ext}"
        cases.append(
            _case([*argv, f"{{T}}/{name}"], {name: text}, out=want, how=job.how, cwd="/" if i else "{T}")
        )
    spec = {
        "user": place.user,
        "same": {place.at(k): _md5(v) for k, v in decoys.items()},
        "exec": [path] if exe else [],
        "cases": cases,
    }
    reference = [
        w.pick(
            (
                f"head {sample}",
                f"cat {sample}",
                f"ls {sub or '.'}" if decoys or not sub else f"cat -A {sample}",
            )
        )
    ]
    if sub and not decoys:
        reference.append(f"mkdir -p {sub.rstrip('/')}")
    reference += _write_program(w, rel, code, exe)
    reference.append(f"awk -f {rel} {sample}")
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3 if exe or job.how == "exact" else 2,
        files=files,
    )


# ---- programs-getopts-script -----------------------------------------------------------------------------------------
_OPTS: dict[str, tuple[str, ...]] = {
    "skip": ("s", "x", "q"),
    "reverse": ("r", "R", "v"),
    "limit": ("n", "l", "m"),
    "prefix": ("p", "P", "a"),
    "output": ("o", "w", "f"),
    "count": ("c", "k", "t"),
}


def _getopts_expect(lines: list[str], opts: dict[str, str | bool]) -> list[str]:
    """What the script prints for ``lines`` under ``opts`` (skip, reverse, limit, prefix; count replaces lines)."""
    out = list(lines)
    if opts.get("skip"):
        out = [x for x in out if x and not x.startswith("#")]
    if opts.get("reverse"):
        out.reverse()
    if opts.get("limit"):
        out = out[: int(str(opts["limit"]))]
    if opts.get("prefix"):
        out = [f"{opts['prefix']}{x}" for x in out]
    if opts.get("count"):
        return [str(len(out))]
    return out


@family(
    "programs-getopts-script",
    CATEGORY,
    "write a bash script that parses short options with getopts (flags, options with values, -h, bad options)",
)
def getopts_script(w: World) -> Draft:
    place = _place(w)
    chosen = w.sample(list(_OPTS), w.pick((2, 3, 3, 4)))
    if "count" in chosen and "output" in chosen:
        chosen.remove("output")
    letters: dict[str, str] = {}
    for opt in chosen:
        letters[opt] = w.pick([c for c in _OPTS[opt] if c not in letters.values()])
    bad_rc = w.pick((1, 2, 64))
    prefix = w.pick(("> ", "- ", "[log] ", "| ", "* ", f"{place.name}: "))
    default_limit = w.pick((0, 0, 5, 10))
    stem = _prog_name(w, ("showlines", "filterlines", "peek", "excerpt", "listlines", "readout"))
    sub = _subdir(w)
    rel = f"{sub}{stem}{w.pick(('', '.sh', '.sh'))}"
    w.note(stem, bad_rc, *letters.values())
    en = {
        "skip": _f(w, "`-{l}` skips blank lines and lines starting with #", l=letters.get("skip", "")),
        "reverse": _f(
            w, "`-{l}` prints the lines in reverse order (last first)", l=letters.get("reverse", "")
        ),
        "limit": _f(
            w,
            "`-{l} N` prints at most N lines"
            + (f" (default: {default_limit})" if default_limit else " (default: all)"),
            l=letters.get("limit", ""),
        ),
        "prefix": _f(w, "`-{l} TEXT` puts TEXT in front of every printed line", l=letters.get("prefix", "")),
        "output": _f(
            w, "`-{l} OUT` writes the lines to the file OUT instead of stdout", l=letters.get("output", "")
        ),
        "count": _f(
            w, "`-{l}` prints only how many lines would have been printed", l=letters.get("count", "")
        ),
    }
    order = [o for o in ("skip", "reverse", "limit", "prefix") if o in chosen]
    order_en = (
        _f(w, "when combined they apply in this order: {o}", o=", ".join(f"-{letters[o]}" for o in order))
        if len(order) > 1
        else ""
    )
    synopsis = " ".join(
        f"[-{letters[o]}{' ' + {'limit': 'N', 'prefix': 'TEXT', 'output': 'OUT'}[o] if o in ('limit', 'prefix', 'output') else ''}]"
        for o in chosen
    )
    usage = f"{stem} [-h] {synopsis} FILE"
    rules = [
        _f(w, "`-h` prints a usage line to stdout and exits 0"),
        _f(
            w,
            "an unknown option, or a missing FILE, prints the usage to stderr and exits with status {rc}",
            rc=bad_rc,
        ),
    ]
    spec_en = w.clauses([*(en[o] for o in chosen), *rules]) + (f"; {order_en}" if order_en else "")
    prog = _ref(w, rel)
    task = w.phrase(
        "Write an executable bash script {prog} {here}, `{usage}`, that prints the lines of FILE. Options (parse them "
        "with getopts): {spec}.",
        "Ticket: {prog} must become a proper command-line tool: `{usage}`. It prints FILE's lines; {spec}. Use getopts.",
        "Can you write {prog}? It's a bash script (executable) that prints the lines of the file it is given, with "
        "these options: {spec}.",
        "{prog} ({usage}): prints FILE's lines. {spec_c}. Parse options with getopts.",
        "I want a small line viewer I can script against: {prog}, run as `{usage}`. Besides printing FILE, {spec}.",
        "Goal: `{usage}` works as described: it prints FILE; {spec}. Write the script at {prog} (bash, executable).",
        "Short options, the getopts way: {prog} prints the lines of FILE, and {spec}.",
        "How do you parse options in bash properly? Show me by writing {prog}: it prints FILE's lines; {spec}.",
        prog=prog,
        here=_here(w),
        usage=usage,
        spec=spec_en,
        spec_c=_cap(spec_en),
    )
    spec_letters = "".join(letters[o] + (":" if o in ("limit", "prefix", "output") else "") for o in chosen)
    var = {
        "skip": "skip",
        "reverse": "rev",
        "limit": "limit",
        "prefix": "prefix",
        "output": "out",
        "count": "count",
    }
    init = {
        "skip": "skip=0",
        "reverse": "rev=0",
        "limit": f"limit={default_limit or ''}",
        "prefix": "prefix=",
        "output": "out=",
        "count": "count=0",
    }
    arms = []
    for o in chosen:
        value = "$OPTARG" if o in ("limit", "prefix", "output") else "1"
        arms.append(f"        {letters[o]}) {var[o]}={value} ;;")
    stages = ['cat -- "$1"']
    if "skip" in chosen:
        stages = ['if [ "$skip" = 1 ]; then grep -v -e \'^#\' -e \'^$\' -- "$1"; else cat -- "$1"; fi']
    pipe = [f"{{ {stages[0]}; }}"]
    if "reverse" in chosen:
        pipe.append('if [ "$rev" = 1 ]; then tac; else cat; fi')
    if "limit" in chosen:
        pipe.append('if [ -n "$limit" ]; then head -n "$limit"; else cat; fi')
    if "prefix" in chosen:
        pipe.append("awk -v p=\"$prefix\" '{ print p $0 }'")
    if "count" in chosen:
        pipe.append('if [ "$count" = 1 ]; then wc -l; else cat; fi')
    code = [
        "#!/bin/bash",
        f'usage() {{ echo "Usage: {usage}"; }}',
        *(init[o] for o in chosen),
        f'while getopts ":h{spec_letters}" opt; do',
        '    case "$opt" in',
        *arms,
        "        h) usage; exit 0 ;;",
        f"        *) usage >&2; exit {bad_rc} ;;",
        "    esac",
        "done",
        "shift $((OPTIND - 1))",
        f'[ "$#" -eq 1 ] || {{ usage >&2; exit {bad_rc}; }}',
    ]
    if "output" in chosen:
        code.append('[ -n "$out" ] && exec > "$out"')
    code.append(" | ".join(pipe[:1] + [f"{{ {p}; }}" for p in pipe[1:]]))
    path = place.at(rel)
    sample = [
        f"# {w.pick(WORDS)} list",
        *(f"{w.pick(WORDS)} {w.randint(1, 99)}" for _ in range(3)),
        "",
        f"{w.pick(FRUITS)} {w.pick(WORDS)}",
    ]
    sample_rel = f"{w.pick(('notes', 'data', 'lists'))}/{w.pick(WORDS)}.txt"
    decoys = (
        _near_misses(w, rel, stem, rel.rsplit(".", 1)[1] if "." in rel else "", w.randint(0, 1))
        if sub
        else {}
    )
    files = {place.at(sample_rel): _body(sample), **{place.at(k): v for k, v in decoys.items()}}

    def fresh() -> list[str]:
        lines = [f"{w.pick(WORDS)} {w.pick(FRUITS)} {w.randint(1, 999)}" for _ in range(w.randint(6, 11))]
        for _ in range(2):
            lines.insert(w.randint(0, len(lines)), w.pick(("", f"# {w.pick(WORDS)}", "#")))
        return lines

    def opts_argv(opts: dict[str, str | bool]) -> list[str]:
        out: list[str] = []
        for o, v in opts.items():
            out += [f"-{letters[o]}"] + ([str(v)] if not isinstance(v, bool) else [])
        return out

    cases = []
    combos: list[dict[str, str | bool]] = [{}]
    for o in chosen:
        combos.append({o: _opt_value(w, o, prefix)})
    if len(chosen) > 1:
        combos.append({o: _opt_value(w, o, prefix) for o in w.shuffled(chosen)})
    for opts in combos:
        lines = fresh()
        eff = dict(opts)
        if "limit" in chosen and "limit" not in eff and default_limit:
            eff["limit"] = str(default_limit)
        want = _body(_getopts_expect(lines, eff))
        argv = [
            path,
            *opts_argv({k: ("{T}/out.txt" if k == "output" else v) for k, v in opts.items()}),
            "{T}/in.txt",
        ]
        if "output" in opts:
            cases.append(_case(argv, {"in.txt": _body(lines)}, after={"out.txt": want}, quiet=True))
        else:
            cases.append(
                _case(argv, {"in.txt": _body(lines)}, out=want, how="ws" if "count" in opts else "exact")
            )
    cases.append(_case([path, "-h"], has="usage", label="-h"))
    cases.append(
        _case([path, "-z", "{T}/in.txt"], {"in.txt": "x\n"}, rc=bad_rc, err=True, quiet=True, label="-z")
    )
    cases.append(_case([path], rc=bad_rc, err=True, quiet=True, label="no FILE"))
    spec = {
        "user": place.user,
        "exec": [path],
        "same": {place.at(k): _md5(v) for k, v in decoys.items()},
        "cases": cases,
    }
    reference = [f"cat {sample_rel}"]
    if sub and not decoys:
        reference.append(f"mkdir -p {sub.rstrip('/')}")
    reference += _write_program(w, rel, code, True)
    demo = opts_argv({o: _opt_value(w, o, prefix) for o in chosen if o != "output"})
    reference.append(f"bash {rel} {' '.join(quote(x) for x in demo)} {sample_rel}")
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3 if len(chosen) <= 2 else 4,
        files=files,
    )


def _opt_value(w: World, opt: str, prefix: str) -> str | bool:
    if opt == "limit":
        return str(w.randint(1, 5))
    if opt == "prefix":
        return prefix
    if opt == "output":
        return "out.txt"
    return True


# ---- programs-python-traceback-fix -----------------------------------------------------------------------------------
_BUGS = ("type", "key", "zerodiv", "name", "call")


def _totals_script(
    key: str, num: str, sep: str, average: bool, bugs: Sequence[str], names: dict[str, str]
) -> list[str]:
    """The totals script, with ``bugs`` planted (none: the working version)."""
    value = f'row["{num}"]' if "type" in bugs else f'int(row["{num}"])'
    if "key" in bugs:
        value = value.replace(f'"{num}"', f'"{num.capitalize()}"')
    key_expr = f'row["{key}"].strip' if "call" in bugs else f'row["{key}"].strip()'
    result = names["result"]
    lines = [
        "#!/usr/bin/env python3",
        f'"""Total {num} per {key} from a CSV export."""',
        "import csv",
        "import sys",
        "",
        "",
        f"def {names['load']}(path):",
        '    with open(path, newline="") as fh:',
        "        return list(csv.DictReader(fh))",
        "",
        "",
        "def totals(rows):",
        "    out = {}",
        "    for row in rows:",
        f"        key = {key_expr}",
        f"        out[key] = out.get(key, 0) + {value}",
        "    return out",
        "",
        "",
        "def main():",
        f"    rows = {names['load']}(sys.argv[1])",
        f"    {result} = totals(rows)",
        f"    for key in sorted({result[:-1] if 'name' in bugs else result}):",
        f'        print(f"{{key}}{sep}{{{result}[key]}}")',
    ]
    if average:
        guard = "" if "zerodiv" in bugs else " if rows else 0"
        lines.append(f'    print(f"average{sep}{{sum({result}.values()) / len(rows){guard}:.2f}}")')
    lines += ["", "", 'if __name__ == "__main__":', "    main()"]
    return lines


def _traceback(lines: list[str], path: str, bug: str, key: str, num: str) -> str:
    """The traceback the first planted bug raises (the frames the script's layout gives)."""

    def at(needle: str) -> int:
        return next(i for i, line in enumerate(lines) if needle in line) + 1

    frames = [("<module>", at("    main()"), "main()")]
    if bug in ("type", "key"):
        frames += [("main", at("= totals(rows)"), lines[at("= totals(rows)") - 1].strip())]
        line = at("out.get(key, 0)")
        frames += [("totals", line, lines[line - 1].strip())]
        error = (
            "TypeError: unsupported operand type(s) for +: 'int' and 'str'"
            if bug == "type"
            else f"KeyError: '{num.capitalize()}'"
        )
    elif bug in ("name", "call"):
        line = at("for key in sorted(")
        frames += [("main", line, lines[line - 1].strip())]
        error = (
            f"NameError: name '{lines[line - 1].split('sorted(')[1].rstrip('):')}' is not defined"
            if bug == "name"
            else "TypeError: '<' not supported between instances of 'builtin_function_or_method' and "
            "'builtin_function_or_method'"
        )
    else:
        line = at('print(f"average')
        frames += [("main", line, lines[line - 1].strip())]
        error = "ZeroDivisionError: division by zero"
    out = ["Traceback (most recent call last):"]
    for fn, n, text in frames:
        out += [f'  File "{path}", line {n}, in {fn}', f"    {text}"]
    return "\n".join([*out, error])


@family(
    "programs-python-traceback-fix",
    CATEGORY,
    "fix a Python script from the traceback it prints (TypeError, KeyError, NameError, ZeroDivisionError ...)",
)
def python_traceback_fix(w: World) -> Draft:
    place = _place(w)
    key, num = w.pick(_KEYS), w.pick(_NUMS)
    sep = w.pick((" ", ": ", "\t"))
    average = w.chance(0.6)
    bugs = w.sample([b for b in _BUGS if average or b != "zerodiv"], w.pick((1, 1, 1, 2)))
    names = {
        "load": w.pick(("load", "read_rows", "rows_of")),
        "result": w.pick(("result", "totals_by_key", "summary")),
    }
    sub = _subdir(w)
    stem = _prog_name(w, ("report", "totals", "rollup", "summarize", "aggregate"))
    rel = f"{sub}{stem}.py"
    path = place.at(rel)
    broken = _totals_script(key, num, sep, average, bugs, names)
    fixed = _totals_script(key, num, sep, average, (), names)
    w.note(key, num, stem)
    pool = [w.pick(WORDS) for _ in range(5)]
    extra = w.pick(("note", "ref", "comment"))

    def table(n: int) -> tuple[str, str]:
        text, totals = _csv_table(w, key, num, w.sample(sorted(set(pool)), min(3, len(set(pool)))), n, extra)
        out = [f"{k}{sep}{totals[k]}" for k in sorted(totals)]
        if average:
            out.append(f"average{sep}{(sum(totals.values()) / n if n else 0):.2f}")
        return text, _body(out)

    sample_rel = f"{w.pick(('data', 'exports', 'input'))}/{w.pick(WORDS)}.csv"
    sample_text, _ = table(w.randint(4, 8))
    if bugs[0] == "zerodiv":
        sample_text = sample_text.splitlines()[0] + "\n"
    tb = _traceback(broken, path, bugs[0], key, num)
    decoys = _near_misses(w, rel, stem, "py", w.randint(0, 2)) if sub else {}
    files = {
        path: _body(broken),
        place.at(sample_rel): sample_text,
        **{place.at(k): v for k, v in decoys.items()},
    }
    files[path.replace(f"{stem}.py", "README.md")] = f"{stem}.py prints the total {num} per {key}.\n"
    more = (
        _f(w, " {There may be more than one problem.|It may not be the only bug.|Check the rest of it too.}")
        if len(bugs) > 1
        else ""
    )
    contract = _f(
        w,
        "`python3 {rel} FILE` prints one `{kup}{sep}TOTAL` line per {key} (sorted) with the sum of the {num} column",
        rel=rel,
        kup=key.upper(),
        key=key,
        num=num,
        sep=sep.replace("\t", "<TAB>"),
    ) + (
        _f(
            w,
            ", then `average{sep}X` (the sum over all rows divided by the number of rows, 2 decimals; 0.00 "
            "when there are no rows)",
            sep=sep.replace("\t", "<TAB>"),
        )
        if average
        else ""
    )
    run = f"python3 {rel} {sample_rel}"
    task = w.phrase(
        "`{run}` crashes:\n\n{tb}\n\nFix {rel} so that it works. What it should do: {contract}.{more}",
        "Ticket: {rel} fails on {sample}.\n\n{tb}\n\nExpected: {contract}. Please fix the script in place.{more}",
        "Can you fix {rel}? Running it on {sample} gives this:\n\n{tb}\n\n(It should print the totals: {contract}.){more}",
        "The nightly report died with:\n\n{tb}\n\nThe script is {rel} {here}; it is meant to work like this: {contract}. "
        "Repair it.{more}",
        "{rel} is broken.\n{tb}\nSpec: {contract}. Fix it.{more}",
        "Debug this for me: `{run}` prints\n\n{tb}\n\nI need it to work on any export like that one: {contract}.{more}",
        "Goal: {contract}, for any CSV export. Right now `{run}` ends in a traceback:\n\n{tb}\n\nFix the script.{more}",
        "Why does {rel} crash on {sample}?\n\n{tb}\n\nFind the cause and fix it, so that {contract}.{more}",
        run=run,
        tb="\x01",
        rel=rel,
        sample=sample_rel,
        contract=contract,
        more=more,
        here=_here(w),
    )
    task = task.replace("\x01", tb)
    cases = []
    for n in (w.randint(4, 9), w.randint(3, 7)) + ((0,) if average else ()):
        text, want = table(n)
        cases.append(_case(["python3", path, "{T}/export.csv"], {"export.csv": text}, out=want, how="ws"))
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    reference = [
        w.pick((f"cat -n {rel}", f"cat {rel}", f"sed -n '1,40p' {rel}")),
        *_backup(w, rel),
        *_edit(w, rel, _body(broken), _body(fixed)),
        run,
    ]
    return place.draft(
        task=task, check=_check(spec), reference=reference, difficulty=3 if len(bugs) == 1 else 4, files=files
    )


# ---- programs-dry-run-flag -------------------------------------------------------------------------------------------
def _tree_files(w: World, ext: str, other: str) -> dict[str, str]:
    """A folder's files: some with ``ext`` (one with a space in its name), some with ``other``."""
    names = {f"{w.pick(WORDS)}{w.randint(1, 99)}.{ext}" for _ in range(w.randint(2, 4))}
    names.add(f"{w.pick(WORDS)} {w.pick(WORDS)}.{ext}")
    names |= {f"{w.pick(WORDS)}{w.randint(1, 99)}.{other}" for _ in range(w.randint(1, 3))}
    return {n: f"{w.token(8)}\n" for n in sorted(names)}


@family(
    "programs-dry-run-flag",
    CATEGORY,
    "add a --dry-run flag to a bash script that changes files: print what it would do, change nothing",
)
def dry_run_flag(w: World) -> Draft:
    place = _place(w)
    action = w.pick(("remove", "move", "rename"))
    ext = w.pick(("tmp", "part", "old", "bak", "log", "cache"))
    other = w.pick([e for e in ("txt", "csv", "conf", "json", "md") if e != ext])
    flag = w.pick(("--dry-run", "--dry-run", "-n", "--pretend"))
    arch = w.pick(("archive", "old", "attic", "done"))
    new_ext = w.pick(("done", "seen", "processed"))
    stem = _prog_name(w, ("cleanup", "tidy", "sweep", "prune", "housekeep", "rotate-out"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.sh"
    w.note(ext, other, flag, stem, arch, new_ext)
    verb, past = {
        "remove": ("remove", "removed"),
        "move": ("move", "moved"),
        "rename": ("rename", "renamed"),
    }[action]
    what = {
        "remove": _f(w, "deletes every *.{e} file directly in DIR", e=ext),
        "move": _f(w, "moves every *.{e} file directly in DIR into DIR/{a}/ (creating it)", e=ext, a=arch),
        "rename": _f(w, "renames every *.{e} file directly in DIR to NAME.{e}.{n}", e=ext, n=new_ext),
    }[action]
    act = {
        "remove": ['    rm -f -- "$f"', f'    echo "{past} $f"'],
        "move": [f'    mv -- "$f" "$dir/{arch}/"', f'    echo "{past} $f"'],
        "rename": [f'    mv -- "$f" "$f.{new_ext}"', f'    echo "{past} $f"'],
    }[action]
    head = ["#!/bin/bash", f"# {stem}: {what.replace('DIR', 'the folder given')}", ""]
    old = [*head, 'dir="$1"']
    if action == "move":
        old.append(f'mkdir -p "$dir/{arch}"')
    old += [f'for f in "$dir"/*.{ext}; do', '    [ -e "$f" ] || continue', *act, "done"]
    new = [*head, "dry=0", f'if [ "$1" = "{flag}" ]; then', "    dry=1", "    shift", "fi", 'dir="$1"']
    if action == "move":
        new.append(f'[ "$dry" = 1 ] || mkdir -p "$dir/{arch}"')
    new += [
        f'for f in "$dir"/*.{ext}; do',
        '    [ -e "$f" ] || continue',
        '    if [ "$dry" = 1 ]; then',
        f'        echo "would {verb} $f"',
        "        continue",
        "    fi",
        *act,
        "done",
    ]
    path = place.at(rel)
    decoys = _near_misses(w, rel, stem, "sh", w.randint(0, 2)) if sub else {}
    demo_dir = w.pick(("tmp", "work", "spool", "incoming"))
    files = {path: _body(old), **{place.at(k): v for k, v in decoys.items()}}
    files.update({place.at(f"{demo_dir}/{n}"): c for n, c in _tree_files(w, ext, other).items()})
    run = f"{rel} DIR"
    usage = f"{rel} {flag} DIR"
    printed = _f(
        w,
        "one line `would {v} FILE` per file it would {v}, FILE written exactly as the real run prints it",
        v=verb,
    )
    task = w.phrase(
        "Add a dry-run mode to {prog}: with `{flag}` as its first argument (`{usage}`) it must change nothing and print "
        "{printed}. Without the flag it works as before ({what}).",
        "Ticket: {prog} {what}, and nobody dares run it. Give it a `{flag}` option (first argument) that only prints "
        "{printed} and leaves every file alone; the normal run stays as it is.",
        "Can you make `{usage}` safe to try? It should print {printed}, and touch nothing. `{run}` keeps doing what it "
        "does now ({what}).",
        "{prog}: add {flag}. With it: no changes, just {printed}. Without it: unchanged behaviour.",
        "Before we point {prog} at production folders I want to see what it would do. Teach it `{flag}` (first "
        "argument): {printed}, and nothing changes on disk. Normal runs must behave exactly as before.",
        "Goal: `{usage}` lists what `{run}` would do ({printed}) without doing it. Change the script {here} to "
        "support that.",
        "How would I preview {prog}? Add a `{flag}` switch to it: in that mode it prints {printed} instead of "
        "acting. The script {what} otherwise, and must keep doing so.",
        "Feature request for {prog} ({what}): a dry-run flag, `{flag}`, given before DIR. It prints {printed} and "
        "makes no change at all.",
        prog=_ref(w, rel),
        flag=flag,
        usage=usage,
        run=run,
        printed=printed,
        what=what,
        here=_here(w),
    )
    cases = []
    for dry in (True, False, True):
        folder = w.pick(("in", "my files", "spool", "data dir"))
        tree = _tree_files(w, ext, other)
        hits = [n for n in tree if n.endswith(f".{ext}")]
        argv = ["bash", path, *([flag] if dry else []), f"{{T}}/{folder}"]
        files_in = {f"{folder}/{n}": c for n, c in tree.items()}
        if dry:
            after: dict[str, str | None] = {f"{folder}/{n}": c for n, c in tree.items()}
            if action == "move":
                after[f"{folder}/{arch}"] = None
            out = _body(f"would {verb} {{T}}/{folder}/{n}" for n in hits)
        else:
            after = {f"{folder}/{n}": c for n, c in tree.items() if n not in hits}
            for n in hits:
                after[f"{folder}/{n}"] = None
                if action == "move":
                    after[f"{folder}/{arch}/{n}"] = tree[n]
                elif action == "rename":
                    after[f"{folder}/{n}.{new_ext}"] = tree[n]
            out = _body(f"{past} {{T}}/{folder}/{n}" for n in hits)
        cases.append(_case(argv, files_in, out=out, how="sorted", after=after))
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    reference = [
        _look(w, rel),
        *_backup(w, rel),
        *_edit(w, rel, _body(old), _body(new)),
        f"bash {rel} {flag} {demo_dir}",
    ]
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=2 if action == "remove" else 3,
        files=files,
    )


# ---- programs-stdin-or-file ------------------------------------------------------------------------------------------
def _stdin_job(w: World) -> tuple[str, str, list[str], list[str], Callable[[str], str], Callable[[], str]]:
    """(language, what it prints, old program, new program, expected output of a text, input maker)."""
    lang = w.pick(("bash", "bash", "python"))
    kind = w.pick(("count", "sum", "words", "longest"))
    if kind == "count":
        what = "how many lines are not comments (lines starting with #)"
        expect: Callable[[str], str] = lambda t: str(sum(1 for x in t.splitlines() if not x.startswith("#")))  # noqa: E731
        maker: Callable[[], str] = lambda: _body(  # noqa: E731
            w.shuffled(
                [f"{w.pick(WORDS)} {w.randint(1, 9)}" for _ in range(w.randint(2, 8))]
                + ["# note"] * w.randint(0, 3)
            )
        )
        bash_cmd, py_expr = ("grep -cv '^#' {src}", 'sum(1 for line in fh if not line.startswith("#"))')
    elif kind == "sum":
        what = "the sum of the numbers in it (one per line)"
        expect = lambda t: str(sum(int(x) for x in t.split()))  # noqa: E731
        maker = lambda: _body(str(w.randint(-50, 900)) for _ in range(w.randint(2, 9)))  # noqa: E731
        bash_cmd, py_expr = (
            "awk '{{ s += $1 }} END {{ print s + 0 }}' {src}",
            "sum(int(line) for line in fh if line.strip())",
        )
    elif kind == "words":
        what = "its distinct words, sorted, one per line"
        expect = lambda t: "\n".join(sorted(set(t.split())))  # noqa: E731
        maker = lambda: _body(  # noqa: E731
            " ".join(w.pick(WORDS) for _ in range(w.randint(1, 5))) for _ in range(w.randint(2, 6))
        )
        bash_cmd, py_expr = (
            "grep -o '[^[:space:]]*' {src} | sort -u",
            '"\\n".join(sorted(set(fh.read().split())))',
        )
    else:
        what = "its longest line (the first one if several are equally long)"
        expect = lambda t: max(t.splitlines(), key=len)  # noqa: E731
        maker = lambda: _body(  # noqa: E731
            " ".join(w.pick(WORDS) for _ in range(w.randint(1, 6))) for _ in range(w.randint(2, 7))
        )
        bash_cmd, py_expr = (
            "awk 'length($0) > length(best) {{ best = $0 }} END {{ print best }}' {src}",
            "max(fh.read().splitlines(), key=len)",
        )
    if lang == "bash":
        refuse = 'echo "usage: $(basename "$0") FILE" >&2; exit 1'
        old = [
            "#!/bin/bash",
            f"# print {what}",
            'src="$1"',
            f'if [ ! -f "$src" ]; then {refuse}; fi',
            bash_cmd.format(src='"$src"'),
        ]
        new = [
            "#!/bin/bash",
            f"# print {what}",
            'src="${1:--}"',
            f'if [ "$src" = - ]; then src=/dev/stdin; elif [ ! -f "$src" ]; then {refuse}; fi',
            bash_cmd.format(src='"$src"'),
        ]
        return lang, what, old, new, expect, maker
    old = [
        "#!/usr/bin/env python3",
        f'"""Print {what}."""',
        "import sys",
        "",
        "with open(sys.argv[1]) as fh:",
        f"    print({py_expr})",
    ]
    new = [
        "#!/usr/bin/env python3",
        f'"""Print {what}."""',
        "import sys",
        "",
        'if len(sys.argv) > 1 and sys.argv[1] != "-":',
        "    fh = open(sys.argv[1])",
        "else:",
        "    fh = sys.stdin",
        "with fh:",
        f"    print({py_expr})",
    ]
    return lang, what, old, new, expect, maker


@family(
    "programs-stdin-or-file",
    CATEGORY,
    "make a script that only reads a file argument also read stdin (no argument, or -), like a Unix filter",
)
def stdin_or_file(w: World) -> Draft:
    place = _place(w)
    lang, what, old, new, expect, maker = _stdin_job(w)
    ext = "sh" if lang == "bash" else "py"
    stem = _prog_name(w, ("count", "total", "vocab", "longest", "tally", "measure"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.{ext}"
    path = place.at(rel)
    dash = w.chance(0.6)
    w.note(stem)
    decoys = _near_misses(w, rel, stem, ext, w.randint(0, 2)) if sub else {}
    sample = f"{w.pick(('data', 'samples', 'input'))}/{w.pick(WORDS)}.txt"
    files = {path: _body(old), place.at(sample): maker(), **{place.at(k): v for k, v in decoys.items()}}
    interp = "bash" if lang == "bash" else "python3"
    dash_en = _f(w, " (and also when the argument is `-`)") if dash else ""
    task = w.phrase(
        "{prog} prints {what} of the file named by its argument. Make it read standard input when it is given no "
        "argument{dash}, so it works at the end of a pipe; with a file argument it must work as before.",
        "Ticket: `cat {sample} | {interp} {prog}` does not work: {prog} only reads a file argument. Make it fall "
        "back to stdin when no file is given{dash}. It prints {what}.",
        "Can you make {prog} usable as a filter? Without an argument{dash} it should read stdin; given a FILE it "
        "reads the file, as now. (It prints {what}.)",
        "{prog}: read stdin if no FILE{dash}. Output unchanged: {what}.",
        "I want to pipe things into {prog} ({what}), e.g. `grep x {sample} | {interp} {prog}`. Right now it needs "
        "a file name. Fix that{dash}, without breaking `{interp} {prog} FILE`.",
        "Goal: `{interp} {prog} < FILE` and `{interp} {prog} FILE` print the same thing ({what}){dash2}. Change the "
        "script {here} accordingly.",
        "Why does {prog} hang or fail when I pipe into it? Make it read standard input when it has no file "
        "argument{dash}; it prints {what}.",
        "Make {prog} behave like a proper Unix filter: input from the FILE argument if there is one, from stdin "
        "otherwise{dash}. It prints {what}.",
        prog=_ref(w, rel),
        what=what,
        dash=dash_en,
        dash2=_f(w, ", and so does `{i} {p} -` with the file on stdin", i=interp, p=rel) if dash else "",
        sample=sample,
        interp=interp,
        here=_here(w),
    )
    cases = []
    for how in ("file", "stdin", "dash" if dash else "stdin", "file"):
        text = maker()
        want = expect(text) + "\n"
        if how == "file":
            cases.append(_case([interp, path, "{T}/some input.txt"], {"some input.txt": text}, out=want))
        else:
            cases.append(
                _case([interp, path, *(["-"] if how == "dash" else [])], stdin=text, out=want, label=how)
            )
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    reference = [
        _look(w, rel),
        *_backup(w, rel),
        *_edit(w, rel, _body(old), _body(new)),
        f"{interp} {rel} < {sample}",
    ]
    return place.draft(
        task=task, check=_check(spec), reference=reference, difficulty=2 if lang == "bash" else 3, files=files
    )


# ---- programs-fail-fast ----------------------------------------------------------------------------------------------
@family(
    "programs-fail-fast",
    CATEGORY,
    "make a bash script stop at the first failing step with a non-zero exit status (errexit, pipefail, || exit)",
)
def fail_fast(w: World) -> Draft:
    place = _place(w)
    word = w.pick(("ERROR", "WARN", "FAIL", "CRITICAL"))
    summary = w.pick(("summary.txt", "report.md", "index.html", "totals.csv"))
    out_name = w.pick(("errors.txt", "problems.txt", "digest.txt"))
    done = w.pick(("", "processed", "done"))
    pipe = w.chance(0.6)
    stem = _prog_name(w, ("publish", "collect", "ship-logs", "handoff", "export-day"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.sh"
    w.note(word, summary, out_name, stem, *([done] if done else []))
    last = f'mkdir -p "$src/{done}" && mv "$src"/*.log "$src/{done}/"' if done else 'rm -f "$src"/*.log'
    steps = [
        f'grep -h {word} "$src"/*.log | sort > "$dest/{out_name}"',
        f'cp "$src/{summary}" "$dest/{summary}"',
        last,
        'echo "published $src to $dest"',
    ]
    head = [
        "#!/bin/bash",
        f"# {stem} SRC DEST: collect the {word} lines of SRC's logs and its {summary} into DEST, then "
        + ("file the logs away" if done else "clear the logs"),
    ]
    old = [*head, 'src="$1"', 'dest="$2"', *steps]
    style = w.pick(("set", "set", "exits"))
    if style == "set":
        opts = w.pick(
            ("set -euo pipefail", "set -eo pipefail", "set -o errexit -o pipefail", "set -e -o pipefail")
        )
        new = [*head, opts, 'src="$1"', 'dest="$2"', *steps]
    else:
        new = [
            *head,
            "set -o pipefail",
            'src="$1"',
            'dest="$2"',
            *(f"{s} || exit 1" for s in steps[:3]),
            steps[3],
        ]
    path = place.at(rel)
    decoys = _near_misses(w, rel, stem, "sh", w.randint(0, 2)) if sub else {}
    files = {path: _body(old), **{place.at(k): v for k, v in decoys.items()}}
    gone = (
        _f(w, "{the logs are cleared|the logs are deleted}")
        if not done
        else _f(w, "the logs are moved to {d}/", d=done)
    )
    pipe_en = (
        _f(w, "; a failure anywhere in a pipeline counts (today a missing log is hidden behind `| sort`)")
        if pipe
        else ""
    )
    task = w.phrase(
        "{prog} keeps going when a step fails: if the {s} copy fails, {gone} anyway and it still exits 0. Make it "
        "stop at the first failing step with a non-zero exit status{pipe}.",
        "Ticket: {prog} lost a day of logs. The {s} copy failed, yet {gone} and the run reported success. Fix the "
        "script so any failing step aborts it with a non-zero status{pipe}.",
        "Can you make {prog} fail fast? Any step that fails must end the script right there, with a failure exit "
        "status, before {gone}{pipe}.",
        "{prog}: abort on the first error (non-zero exit){pipe}. Nothing after a failed step may run.",
        "Our scheduler trusts {prog}'s exit status, but the script exits 0 even when a step fails, and then {gone}. "
        "Make a failing step stop it with a non-zero status{pipe}.",
        "Goal: when any step of {prog} fails, the script exits non-zero at once and {gone_not}{pipe}. When "
        "everything works it behaves as now.",
        "Why does {prog} report success when {s} is missing? Make it stop at the first failure with a non-zero "
        "exit status{pipe}; successful runs must not change.",
        "Harden {prog} {here}: errors must not be ignored. The first failing command ends the run with a "
        "non-zero status{pipe}.",
        prog=_ref(w, rel),
        s=summary,
        gone=gone,
        gone_not=_f(w, "the logs stay where they are") if not done else _f(w, "the logs stay in place"),
        pipe=pipe_en,
        here=_here(w),
    )

    def logs() -> dict[str, str]:
        out = {}
        for i in range(w.randint(1, 3)):
            lines = [
                f"2024-05-0{i + 1}T10:{m:02d}:00 {w.pick((word, 'INFO', 'DEBUG'))} {w.pick(SERVICES)}: x{w.token(3)}"
                for m in range(w.randint(2, 6))
            ]
            lines.append(f"2024-05-0{i + 1}T11:00:00 {word} {w.pick(SERVICES)}: {w.token(5)}")
            out[f"src/{w.pick(SERVICES)}-{i}.log"] = _body(lines)
        return out

    argv = ["bash", path, "{T}/src", "{T}/dest"]
    cases = []
    ok = logs()
    ok[f"src/{summary}"] = f"{w.token(10)}\n"
    lines = sorted(line for body in ok.values() for line in body.splitlines() if word in line)
    after: dict[str, str | None] = {f"dest/{out_name}": _body(lines), f"dest/{summary}": ok[f"src/{summary}"]}
    for k, v in ok.items():
        if k.endswith(".log"):
            after[k] = None
            if done:
                after[k.replace("src/", f"src/{done}/")] = v
    cases.append(
        _case(
            argv,
            {**ok, "dest/.keep": ""},
            out="published {T}/src to {T}/dest\n",
            after=after,
            label="a good run",
        )
    )
    broken = logs()  # no summary: the copy fails, and the logs must stay
    cases.append(
        _case(
            argv,
            {**broken, "dest/.keep": ""},
            rc="nonzero",
            after=dict(broken.items()),
            label="summary missing",
        )
    )
    cases[-1]["absent"] = "published"
    if pipe:  # no logs at all: grep fails inside the pipeline, so nothing after it may run
        cases.append(
            _case(
                argv,
                {f"src/{summary}": "x\n", "dest/.keep": ""},
                rc="nonzero",
                after={f"dest/{summary}": None},
                label="no logs",
            )
        )
        cases[-1]["absent"] = "published"
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    reference = [_look(w, rel), *_backup(w, rel), *_edit(w, rel, _body(old), _body(new)), f"bash -n {rel}"]
    return place.draft(
        task=task, check=_check(spec), reference=reference, difficulty=4 if pipe else 3, files=files
    )


# ---- programs-install-command ----------------------------------------------------------------------------------------
_SHEBANGS = {
    "py": ("#!/usr/bin/env python3", "#!/usr/bin/python3"),
    "awk": ("#!/usr/bin/awk -f", "#!/usr/bin/gawk -f"),
    "sh": ("#!/bin/bash", "#!/usr/bin/env bash"),
}
_BROKEN_SHEBANGS = {"py": "#!/usr/bin/python", "awk": "#!/usr/bin/awk", "sh": "#!/bin/bsh"}


def _tool(w: World, ext: str) -> tuple[list[str], str, Callable[[], tuple[str, str]]]:
    """A small tool without its first line: (body, what it does, maker of (input, output))."""
    if ext == "py":
        body = [
            '"""Print how many lines of FILE are not blank."""',
            "import sys",
            "",
            "with open(sys.argv[1]) as fh:",
            "    print(sum(1 for line in fh if line.strip()))",
        ]

        def make_py() -> tuple[str, str]:
            lines = [
                w.pick(("", " ", w.pick(WORDS), f"{w.pick(WORDS)} {w.pick(WORDS)}"))
                for _ in range(w.randint(3, 9))
            ]
            return _body(lines), f"{sum(1 for x in lines if x.strip())}\n"

        return body, "prints how many lines of FILE are not blank", make_py
    if ext == "awk":
        body = ["# print the sum of the second column", "{ s += $2 }", "END { print s + 0 }"]

        def make_awk() -> tuple[str, str]:
            rows = [(w.pick(WORDS), w.randint(0, 500)) for _ in range(w.randint(2, 7))]
            return _body(f"{a} {b}" for a, b in rows), f"{sum(b for _, b in rows)}\n"

        return body, "prints the sum of the second column of FILE", make_awk
    body = [
        "# print the lines of FILE that mention the word given, with their line numbers",
        'grep -n -w -- "$2" "$1"',
    ]

    def make_sh() -> tuple[str, str]:
        lines = [f"{w.pick(WORDS)} {w.pick(FRUITS)}" for _ in range(w.randint(3, 8))]
        lines += [f"apple {w.pick(WORDS)}", f"pineapple {w.pick(WORDS)}"]
        lines = w.shuffled(lines)
        return _body(lines), _body(f"{i}:{x}" for i, x in enumerate(lines, 1) if "apple" in x.split())

    return (
        body,
        "prints the lines of FILE that contain the word WORD, each after its line number and a colon",
        make_sh,
    )


@family(
    "programs-install-command",
    CATEGORY,
    "install a project's program as a command on PATH: the right shebang, a copy (not a link), the execute bit",
)
def install_command(w: World) -> Draft:
    place = _place(w, root=0.5)
    ext = w.pick(("py", "awk", "sh"))
    body, does, make = _tool(w, ext)
    broken = w.chance(0.35)
    stem = _prog_name(w, ("nonblank", "colsum", "findword", "lc", "tally", "grab"))
    cmd = w.unique(lambda: w.pick((stem, f"{place.name}-{stem}", stem.replace("_", "-"))))
    src_rel = f"{w.pick(('tools', 'src', 'scripts', 'contrib'))}/{stem}.{ext}"
    src_lines = ([_BROKEN_SHEBANGS[ext]] if broken else []) + body
    bindir = "/usr/local/bin" if place.user == "root" else w.pick((f"{HOME}/.local/bin", f"{HOME}/bin"))
    dest = f"{bindir}/{cmd}"
    w.note(cmd, stem)
    args = "FILE WORD" if ext == "sh" else "FILE"
    files = {place.at(src_rel): _body(src_lines)}
    files.update({place.at(k): v for k, v in _near_misses(w, src_rel, stem, ext, w.randint(0, 2)).items()})
    setup = [f"chmod 644 {place.at(src_rel)}"]
    where = bindir if place.user == "root" else bindir.replace(HOME, "~")
    state = (
        _f(w, "its first line names an interpreter that does not exist")
        if broken
        else _f(w, "it has no shebang line")
    )
    lang = {"py": "Python", "awk": "awk", "sh": "bash"}[ext]
    copy_en = _f(w, "{a copy, not a link|a real copy (not a link)|copied, not linked}")
    task = w.phrase(
        "Install {src} as the command `{cmd}` in {where} ({copy}), so that `{cmd} {args}` works from any folder. "
        "It is a {lang} program that {does}; {state}.",
        "Ticket: people run {src} by its full path with the right interpreter. Make it a command instead: `{cmd}` in "
        "{where}, {copy}, executable, runnable by name. ({state_c}; it {does}.)",
        "Can you put {src} on the PATH as `{cmd}`? Copy it into {where} (no link) and make sure `{cmd} {args}` runs "
        "it: it is {lang}, and {state}. It {does}.",
        "`{cmd} {args}` should work everywhere. Source: {src} ({lang}, {state}). Target: {where}/{cmd}, {copy}.",
        "I'd like to type `{cmd} {args}` instead of calling the interpreter on {src}. Install it as {where}/{cmd} "
        "({copy}). Careful: {state}. It {does}.",
        "Goal: a `{cmd}` command in {where} that {does} (`{cmd} {args}`), installed from {src} {here}. It must run "
        "on its own, by name: {state}, so fix that in the installed copy. {copy_c}.",
        "How do I turn {src} into a real command? Do it: `{cmd}`, {copy} in {where}, executable. It is a {lang} "
        "program and {state}.",
        "Package {src} as the `{cmd}` command ({where}/{cmd}, {copy}). It {does}; {state}.",
        src=_ref(w, src_rel),
        cmd=cmd,
        where=where,
        args=args,
        lang=lang,
        does=does,
        state=state,
        state_c=_cap(state),
        copy=copy_en,
        copy_c=_cap(copy_en),
        here=_here(w),
    )
    path_env = f"{bindir}:/usr/local/bin:/usr/bin:/bin"
    cases = []
    for _ in range(2):
        text, want = make()
        argv = [cmd, "{T}/input file.txt", *(["apple"] if ext == "sh" else [])]
        cases.append(_case(argv, {"input file.txt": text}, out=want, env={"PATH": path_env}))
    spec = {
        "user": place.user,
        "exec": [dest],
        "safe": [dest] if place.user == "root" else [],
        "cases": cases,
    }
    d = dest if place.user == "root" else dest.replace(HOME, "~")
    bang = w.pick(_SHEBANGS[ext])
    reference = [w.pick((f"head -n 3 {src_rel}", f"cat {src_rel}", f"ls -l {posixpath.dirname(src_rel)}"))]
    if place.user == "operator":
        reference.append(f"mkdir -p {posixpath.dirname(d)}")
    how = w.pick(("install-sed", "group", "cp-sed", "sed-to", "printf-cat", "tail"))
    first = "1s|.*|" + sed_replacement(bang) + "|" if broken else f"1i {bang}"
    if how == "install-sed":
        reference += [
            f"install -m {w.pick(('755', '0755', 'a+rx'))} {src_rel} {d}",
            f"sed -i {quote(first)} {d}",
        ]
    elif how == "group":
        rest = f"tail -n +2 {src_rel}" if broken else f"cat {src_rel}"
        reference += [f"{{ echo {quote(bang)}; {rest}; }} > {d}", _make_exec(w, d)]
    elif how == "cp-sed":
        reference += [f"cp {src_rel} {d}", f"sed -i {quote(first)} {d}", _make_exec(w, d)]
    elif how == "sed-to":
        reference += [f"sed {quote(first)} {src_rel} > {d}", _make_exec(w, d)]
    elif how == "printf-cat":
        rest = f"<(tail -n +2 {src_rel})" if broken else src_rel
        reference += [f"printf '%s\\n' {quote(bang)} | cat - {rest} > {d}", _make_exec(w, d)]
    else:
        d_lines = [bang, *body]
        reference += _write_program(w, d, d_lines, True)
    reference.append(f"ls -l {d}")
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3 if broken else 2,
        files=files,
        setup=setup,
    )


# ---- programs-python-function ----------------------------------------------------------------------------------------
_FUNCTIONS: dict[str, tuple[str, list[str], list[str]]] = {
    # name -> (signature line, docstring lines, body lines)
    "parse_duration": (
        "def parse_duration(text):",
        [
            'Seconds in a duration written like "1h30m", "45s" or "2h5m10s" (units h, m, s, each at most once, in',
            "that order). Raise ValueError for an empty string or anything else.",
            "",
            '>>> parse_duration("1h30m")',
            "5400",
        ],
        [
            'm = re.fullmatch(r"(?:(\\d+)h)?(?:(\\d+)m)?(?:(\\d+)s)?", text)',
            "if not text or not m:",
            '    raise ValueError(f"bad duration: {text!r}")',
            "h, mi, s = (int(g) if g else 0 for g in m.groups())",
            "return h * 3600 + mi * 60 + s",
        ],
    ),
    "human_size": (
        "def human_size(n):",
        [
            'A byte count for people: below 1024 "N B"; else one decimal in the largest unit that keeps the number',
            "at least 1: KiB, MiB, GiB (1024-based). Raise ValueError for a negative count.",
            "",
            ">>> human_size(1536)",
            "'1.5 KiB'",
        ],
        [
            "if n < 0:",
            '    raise ValueError("negative size")',
            "if n < 1024:",
            '    return f"{n} B"',
            'for unit in ("KiB", "MiB", "GiB"):',
            "    n /= 1024",
            '    if n < 1024 or unit == "GiB":',
            '        return f"{n:.1f} {unit}"',
        ],
    ),
    "slugify": (
        "def slugify(title):",
        [
            "The title in lower case with every run of characters other than a-z and 0-9 turned into one hyphen,",
            "and no hyphen at either end.",
            "",
            '>>> slugify("Hello, World 2!")',
            "'hello-world-2'",
        ],
        ['return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")'],
    ),
    "compare_versions": (
        "def compare_versions(a, b):",
        [
            "-1, 0 or 1 as dotted version a is older than, equal to or newer than b, comparing the parts as",
            'numbers; missing parts count as 0 ("1.2" equals "1.2.0").',
            "",
            '>>> compare_versions("1.10", "1.9")',
            "1",
        ],
        [
            'pa, pb = [int(x) for x in a.split(".")], [int(x) for x in b.split(".")]',
            "width = max(len(pa), len(pb))",
            "pa += [0] * (width - len(pa))",
            "pb += [0] * (width - len(pb))",
            "return (pa > pb) - (pa < pb)",
        ],
    ),
    "merge_ranges": (
        "def merge_ranges(ranges):",
        [
            "The [start, end] ranges (inclusive) merged where they overlap or touch (end + 1 == next start),",
            "sorted by start, as a list of [start, end] lists.",
            "",
            ">>> merge_ranges([[5, 7], [1, 3], [2, 4]])",
            "[[1, 4], [5, 7]]",
        ],
        [
            "out = []",
            "for start, end in sorted(ranges):",
            "    if out and start <= out[-1][1] + 1:",
            "        out[-1][1] = max(out[-1][1], end)",
            "    else:",
            "        out.append([start, end])",
            "return out",
        ],
    ),
    "chunk": (
        "def chunk(items, size):",
        [
            "The items in lists of `size` (the last one may be shorter), in order. Raise ValueError when size is",
            "less than 1.",
            "",
            ">>> chunk([1, 2, 3, 4, 5], 2)",
            "[[1, 2], [3, 4], [5]]",
        ],
        [
            "if size < 1:",
            '    raise ValueError("size must be at least 1")',
            "return [list(items[i:i + size]) for i in range(0, len(items), size)]",
        ],
    ),
    "parse_pairs": (
        "def parse_pairs(text):",
        [
            'A dict from "key=value" parts separated by semicolons, spaces around keys and values stripped and',
            'empty parts skipped. Raise ValueError for a part without "=".',
            "",
            '>>> parse_pairs("a=1; b = two;")',
            "{'a': '1', 'b': 'two'}",
        ],
        [
            "out = {}",
            'for part in text.split(";"):',
            "    if not part.strip():",
            "        continue",
            '    if "=" not in part:',
            '        raise ValueError(f"no = in {part!r}")',
            '    key, value = part.split("=", 1)',
            "    out[key.strip()] = value.strip()",
            "return out",
        ],
    ),
}


def _calls(w: World, name: str) -> list[list[Any]]:
    """Fresh arguments for one function (including the edge cases its docstring names)."""
    if name == "parse_duration":
        calls: list[list[Any]] = [
            [f"{w.randint(1, 9)}h{w.randint(1, 59)}m"],
            [f"{w.randint(1, 59)}s"],
            [f"{w.randint(2, 30)}m{w.randint(1, 59)}s"],
        ]
        return calls + [
            [f"{w.randint(1, 5)}h"],
            [""],
            [f"{w.randint(1, 9)}x"],
            [f"{w.randint(1, 9)}h{w.randint(1, 9)}h"],
        ]
    if name == "human_size":
        return [
            [w.randint(0, 1023)],
            [w.randint(1024, 900000)],
            [w.randint(2, 900) * 1024 * 1024 + w.randint(0, 99999)],
            [1024],
            [w.randint(2, 9) * 1024**3],
            [-w.randint(1, 9)],
        ]
    if name == "slugify":
        return [
            [f"{w.pick(WORDS).capitalize()}, {w.pick(WORDS)} {w.randint(1, 99)}!"],
            [f"  --{w.pick(WORDS)}__{w.pick(WORDS).upper()}--  "],
            [f"{w.pick(CITIES)} & {w.pick(CITIES)}: {w.pick(WORDS)}"],
            ["already-slug"],
        ]
    if name == "compare_versions":
        a = f"{w.randint(0, 3)}.{w.randint(0, 12)}"
        return [
            [a, a + ".0"],
            [f"1.{w.randint(10, 19)}", f"1.{w.randint(2, 9)}"],
            [f"{w.randint(0, 1)}.9.9", f"2.{w.randint(0, 3)}"],
            [f"3.{w.randint(0, 5)}.1", f"3.{w.randint(0, 5)}"],
        ]
    if name == "merge_ranges":
        rs = [[s, s + w.randint(0, 6)] for s in (w.randint(0, 40) for _ in range(w.randint(3, 6)))]
        return [[rs], [[[10, 12], [13, 15], [1, 2]]], [[]]]
    if name == "chunk":
        items = list(range(w.randint(0, 11)))
        return [
            [items, w.randint(1, 4)],
            [items, len(items) + 2],
            [[w.pick(WORDS) for _ in range(5)], 2],
            [items, 0],
        ]
    k1, k2 = w.pick(WORDS), w.pick(FRUITS)
    return [
        [f"{k1}={w.randint(1, 9)}; {k2} = {w.pick(WORDS)};"],
        [f" ;{k1}=a=b"],
        [f"{k2} {w.randint(1, 9)}"],
        [""],
    ]


def _function_source(name: str, target: bool) -> list[str]:
    """A function's source lines (its body replaced by NotImplementedError when it is the ``target``)."""
    sig, doc, body = _FUNCTIONS[name]
    lines = [sig, '    """' + doc[0], *(f"    {x}" if x else "" for x in doc[1:]), '    """']
    lines += ["    raise NotImplementedError"] if target else [f"    {x}" for x in body]
    return lines


def _evaluate(names: Sequence[str], calls: list[tuple[str, list[Any]]]) -> list[Any]:
    """What each call returns (or raises) with the working implementations: the check's expected values."""
    scope: dict[str, Any] = {}
    exec("import re\n" + "\n\n".join("\n".join(_function_source(n, False)) for n in names), scope)  # noqa: S102
    out: list[Any] = []
    for fn, args in calls:
        try:
            out.append(json.loads(json.dumps(scope[fn](*args))))
        except Exception as exc:  # noqa: BLE001  (the contract's exceptions are part of the answer)
            out.append({"raises": type(exc).__name__})
    return out


_DRIVER = (
    "import importlib, json, sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "mod = importlib.import_module(sys.argv[2])\n"
    "out = []\n"
    "for fn, args in json.loads(sys.argv[3]):\n"
    "    try:\n"
    "        out.append(getattr(mod, fn)(*args))\n"
    "    except Exception as exc:\n"
    "        out.append({'raises': type(exc).__name__})\n"
    "print(json.dumps(out))\n"
)


@family(
    "programs-python-function",
    CATEGORY,
    "implement a Python module's stub function to the contract in its docstring, keeping its neighbours working",
)
def python_function(w: World) -> Draft:
    place = _place(w)
    names = w.sample(sorted(_FUNCTIONS), w.pick((2, 3, 3)))
    target = names[0]
    pkg = w.pick(("", f"{place.name}/", "lib/", "src/"))
    mod = w.pick(("util", "helpers", "textutil", "common", "tools"))
    rel = f"{pkg}{mod}.py"
    w.note(target, mod)
    ordered = w.shuffled(names)
    head = [f'"""Small helpers for {place.name}."""', "import re", "", ""]

    def module(done: bool) -> list[str]:
        out = list(head)
        for i, n in enumerate(ordered):
            out += _function_source(n, n == target and not done)
            if i < len(ordered) - 1:
                out += ["", ""]
        return out

    old, new = module(False), module(True)
    path = place.at(rel)
    files = {path: _body(old)}
    if pkg and pkg != "lib/":
        files[place.at(f"{pkg}__init__.py")] = ""
    files.update({place.at(k): v for k, v in _near_misses(w, rel, mod, "py", w.randint(0, 2)).items()})
    calls = [(target, a) for a in _calls(w, target)]
    for n in names[1:]:
        calls += [(n, a) for a in _calls(w, n)[:2]]
    want = _evaluate(names, calls)
    folder = posixpath.dirname(path)
    cases = [
        _case(
            ["python3", "-c", _DRIVER, folder, mod, json.dumps(calls)],
            out=want,
            how="json",
            label=f"calls into {rel}",
        )
    ]
    spec = {"user": place.user, "cases": cases}
    fn = f"{target}()"
    task = w.phrase(
        "{fn} in {rel} is still a stub (it raises NotImplementedError). Implement it to the contract in its "
        "docstring; the other functions there must keep working.",
        "Ticket: finish {fn} in {rel}. The docstring is the spec, including the errors it must raise.",
        "Can you implement {fn} {here}? It lives in {rel}; read its docstring for exactly what it must return.",
        "{rel}: implement {fn} per its docstring. Don't touch the rest of the module's behaviour.",
        "The tests for {fn} fail because {rel} only has a stub for it. Write the function so it does what the "
        "docstring says, edge cases included.",
        "Goal: `from {mod} import {target}` gives a working {fn} that honours its docstring (see {rel}).",
        "Who left {fn} unimplemented? Fill it in, in {rel}, following its docstring to the letter.",
        "Implement the missing body of {fn} ({rel}). Its docstring says what it returns and when it raises.",
        fn=fn,
        rel=_ref(w, rel),
        mod=mod,
        target=target,
        here=_here(w),
    )
    body = [f"    {x}" for x in _FUNCTIONS[target][2]]
    reference = [w.pick((f"cat {rel}", f"grep -n -A 12 'def {target}' {rel}", f"sed -n '1,60p' {rel}"))]
    reference += _backup(w, rel)
    how = w.pick(("sed-r", "awk-getline", "append", "edit", "edit", "edit"))
    d = _delim(body)
    snippet = f"/tmp/{target}.py"
    if how == "sed-r":
        reference += [
            f"cat > {snippet} <<'{d}'\n" + "\n".join(body) + f"\n{d}",
            f"sed -i -e '/raise NotImplementedError/{{r {snippet}' -e 'd}}' {rel}",
        ]
    elif how == "awk-getline":
        reference += [
            f"cat > {snippet} <<'{d}'\n" + "\n".join(body) + f"\n{d}",
            f"awk -v f={snippet} '/raise NotImplementedError/ {{ while ((getline line < f) > 0) print line; next }} 1' "
            f"{rel} > /tmp/{mod}.new",
            f"cat /tmp/{mod}.new > {rel}",
        ]
    elif how == "append":  # a later definition rebinds the name: the stub is shadowed, not removed
        src = ["", "", *_function_source(target, False)]
        reference.append(f"cat >> {rel} <<'{d}'\n" + "\n".join(src) + f"\n{d}")
    else:
        reference += _edit(w, rel, _body(old), _body(new))
    call = _calls(w, target)[0]
    reference.append(
        f"python3 -c {quote(f'import sys; sys.path.insert(0, {folder!r}); from {mod} import {target}; print({target}(*{call!r}))')}"
    )
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3 if len(_FUNCTIONS[target][2]) > 3 else 2,
        files=files,
    )


# ---- programs-find-safe-spaces ---------------------------------------------------------------------------------------
def _spaced_tree(w: World, ext: str, dash: bool) -> dict[str, str]:
    """A tree with *.ext files (names and folders with spaces, maybe one starting with a dash) and others."""
    files = {}
    for _ in range(w.randint(2, 4)):
        folder = w.pick(("", "sub/", f"{w.pick(WORDS)} {w.pick(WORDS)}/", "a b/c/"))
        files[f"{folder}{w.pick(WORDS)}{w.randint(1, 99)}.{ext}"] = _body(w.lines(w.randint(1, 6)))
    files[f"{w.pick(WORDS)} {w.pick(WORDS)}.{ext}"] = _body(w.lines(w.randint(1, 6)))
    if dash:
        files[f"-{w.pick(WORDS)}.{ext}"] = _body(w.lines(w.randint(1, 4)))
    files[f"{w.pick(WORDS)} {w.randint(1, 9)}.txt.bak" if ext != "bak" else "other.txt"] = "not this one\n"
    return files


@family(
    "programs-find-safe-spaces",
    CATEGORY,
    "make a find-driven bash script safe for file names with spaces (and leading dashes): -print0, -exec, read -d ''",
)
def find_safe_spaces(w: World) -> Draft:
    place = _place(w)
    ext = w.pick(("log", "csv", "md", "conf", "json"))
    action = w.pick(("copy", "lines", "move", "sizes"))
    dash = w.chance(0.35)
    stem = _prog_name(w, ("gather", "collect", "linecount", "stash", "sizes", "harvest"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.sh"
    w.note(ext, stem)
    what = {
        "copy": _f(
            w, "copies every *.{e} file under SRC (at any depth) into DEST, flat (no subfolders)", e=ext
        ),
        "move": _f(w, "moves every *.{e} file under SRC (at any depth) into DEST, flat", e=ext),
        "lines": _f(
            w, "prints `COUNT PATH` for every *.{e} file under DIR, COUNT being its number of lines", e=ext
        ),
        "sizes": _f(w, "prints `BYTES PATH` for every *.{e} file under DIR, BYTES being its size", e=ext),
    }[action]
    two = action in ("copy", "move")
    usage = f"{rel} SRC DEST" if two else f"{rel} DIR"
    old_body = {
        "copy": ['    cp $f "$2"/'],
        "move": ['    mv $f "$2"/'],
        "lines": ["    echo $(wc -l < $f) $f"],
        "sizes": ["    echo $(stat -c %s $f) $f"],
    }[action]
    old = [
        "#!/bin/bash",
        f"# {stem}: {what}",
        f"for f in $(find \"$1\" -type f -name '*.{ext}'); do",
        *old_body,
        "done",
    ]
    act = {
        "copy": 'cp -- "$f" "$2"/',
        "move": 'mv -- "$f" "$2"/',
        "lines": 'echo "$(wc -l < "$f") $f"',
        "sizes": 'echo "$(stat -c %s -- "$f") $f"',
    }[action]
    style = w.pick(("read0", "read0", "exec", "globstar"))
    if style == "read0":
        loop = [
            f"find \"$1\" -type f -name '*.{ext}' -print0 | while IFS= read -r -d '' f; do",
            f"    {act}",
            "done",
        ]
    elif style == "exec":
        loop = [
            f"find \"$1\" -type f -name '*.{ext}' -exec sh -c '",
            "    for f do",
            f"        {act.replace(chr(36) + '2', chr(36) + 'dest')}",
            "    done' sh {} +",
        ]
        if two:
            loop.insert(0, 'export dest="$2"')
    else:
        loop = [
            "shopt -s globstar nullglob",
            f'for f in "$1"/**/*.{ext}; do',
            f'    [ -f "$f" ] && {act}',
            "done",
        ]
    new = ["#!/bin/bash", f"# {stem}: {what}", *loop]
    path = place.at(rel)
    decoys = _near_misses(w, rel, stem, "sh", w.randint(0, 2)) if sub else {}
    files = {path: _body(old), **{place.at(k): v for k, v in decoys.items()}}
    demo = w.pick(("data", "inbox", "exports"))
    files.update({place.at(f"{demo}/{k}"): v for k, v in _spaced_tree(w, ext, False).items()})
    dash_en = _f(w, ", or that start with a dash") if dash else ""
    task = w.phrase(
        "{prog} breaks on file names with spaces{dash}. Make it safe for any such name; it {what} (`{usage}`).",
        "Ticket: `{usage}` mangles paths that contain spaces{dash}: {prog} {what}. Fix the script so every "
        "matching file is handled, whatever its name.",
        "Can you fix {prog}? It {what}, but a name like `my notes.{e}` becomes two words{dash_q}. It must work "
        "for any file name.",
        "{prog}: not safe for spaces{dash}. Spec: `{usage}` {what}. Fix.",
        "Somebody put `Q3 report.{e}` in the tree and {prog} fell over. Make it handle names with spaces{dash} "
        "correctly; it {what}.",
        "Goal: `{usage}` {what} for every file, names with spaces{dash} included. Today it word-splits the "
        "output of find; change the script {here}.",
        "Why does {prog} complain about files that do not exist? (Hint: spaces{dash}.) Fix it; it {what}.",
        "Make {prog} robust: no word splitting, no globbing of file names{dash}. It {what}.",
        prog=_ref(w, rel),
        usage=usage,
        what=what,
        e=ext,
        dash=dash_en,
        dash_q=_f(w, ", and `-x.{e}` looks like an option", e=ext) if dash else "",
        here=_here(w),
    )
    cases = []
    for _ in range(2):
        tree = _spaced_tree(w, ext, dash or w.chance(0.3))
        hits = [k for k in tree if k.endswith(f".{ext}")]
        files_in = {f"src dir/{k}": v for k, v in tree.items()}
        if two:
            after: dict[str, str | None] = {f"dest/{posixpath.basename(k)}": tree[k] for k in hits}
            if action == "move":
                after.update({f"src dir/{k}": None for k in hits})
            cases.append(
                _case(["bash", path, "{T}/src dir", "{T}/dest"], {**files_in, "dest/.keep": ""}, after=after)
            )
        else:
            count = (lambda t: str(t.count("\n"))) if action == "lines" else (lambda t: str(len(t.encode())))
            out = _body(f"{count(tree[k])} {{T}}/src dir/{k}" for k in hits)
            cases.append(_case(["bash", path, "{T}/src dir"], files_in, out=out, how="sorted"))
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    run = f"bash {rel} {demo}" + (" /tmp/out" if two else "")
    reference = [_look(w, rel), *_backup(w, rel), *_edit(w, rel, _body(old), _body(new))]
    if two:
        reference.append("mkdir -p /tmp/out")
    reference.append(run)
    return place.draft(
        task=task, check=_check(spec), reference=reference, difficulty=4 if dash else 3, files=files
    )


# ---- programs-python-json-cli ----------------------------------------------------------------------------------------
def _json_job(w: World) -> tuple[str, str, list[str], Callable[[], tuple[str, Any]]]:
    """(input kind, what the JSON holds, the conversion code (reads `fh`, sets `data`), maker of (input, JSON))."""
    kind = w.pick(("csv", "log", "passwd", "ini"))
    if kind == "csv":
        key = w.pick(_KEYS)
        w.note(key)

        def make_csv() -> tuple[str, Any]:
            rows = [
                (w.pick(FIRST_NAMES), w.pick(("north", "south", "east", "west", "central")))
                for _ in range(w.randint(2, 9))
            ]
            counts = Counter(r[1] for r in rows)
            return _body(["name," + key, *(f"{a},{b}" for a, b in rows)]), {
                "rows": len(rows),
                f"by_{key}": dict(counts),
            }

        return (
            "a CSV file (header row `name,{key}`)".replace("{key}", key),
            f'an object with "rows" (how many data rows) and "by_{key}" (an object counting the rows per {key})',
            [
                "rows = list(csv.DictReader(fh))",
                "counts = {}",
                "for row in rows:",
                f'    counts[row["{key}"]] = counts.get(row["{key}"], 0) + 1',
                f'data = {{"rows": len(rows), "by_{key}": counts}}',
            ],
            make_csv,
        )
    if kind == "log":
        level = w.pick(("ERROR", "WARN"))
        w.note(level)

        def make_log() -> tuple[str, Any]:
            lines = w.log_lines(w.randint(4, 12))
            lines.append(w.log_lines(1, levels=(level,))[0])
            hits = [
                {"time": x.split()[0], "service": x.split()[2].rstrip(":"), "message": x.split(": ", 1)[1]}
                for x in lines
                if x.split()[1] == level
            ]
            return _body(lines), {"count": len(hits), "entries": hits}

        return (
            "a log file (lines like `2024-03-01T10:00:00 ERROR api: message`)",
            f'an object with "count" (the number of {level} lines) and "entries": one object per {level} line, in file '
            'order, with its "time", "service" (without the colon) and "message"',
            [
                "entries = []",
                "for line in fh:",
                "    head, _, message = line.rstrip('\\n').partition(': ')",
                "    fields = head.split()",
                f'    if len(fields) == 3 and fields[1] == "{level}":',
                '        entries.append({"time": fields[0], "service": fields[2], "message": message})',
                'data = {"count": len(entries), "entries": entries}',
            ],
            make_log,
        )
    if kind == "passwd":
        floor = w.pick((1000, 500))
        w.note(floor)

        def make_passwd() -> tuple[str, Any]:
            lines, users = (
                ["root:x:0:0:root:/root:/bin/bash", "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin"],
                {},
            )
            for name in w.sample(FIRST_NAMES, w.randint(2, 5)):
                uid = w.pick((w.randint(100, floor - 1), w.randint(floor, floor + 900), floor))
                shell = w.pick(("/bin/bash", "/bin/sh", "/usr/sbin/nologin"))
                lines.append(f"{name}:x:{uid}:{uid}:{name.capitalize()}:/home/{name}:{shell}")
                if uid >= floor:
                    users[name] = {"uid": uid, "home": f"/home/{name}", "shell": shell}
            return _body(lines), users

        return (
            "a copy of a passwd file",
            f'an object mapping each account with uid {floor} or more to {{"uid": UID as a number, "home": ..., '
            '"shell": ...}',
            [
                "data = {}",
                "for line in fh:",
                '    name, _pw, uid, _gid, _gecos, home, shell = line.rstrip("\\n").split(":")',
                f"    if int(uid) >= {floor}:",
                '        data[name] = {"uid": int(uid), "home": home, "shell": shell}',
            ],
            make_passwd,
        )

    def make_ini() -> tuple[str, Any]:
        lines: list[str] = []
        data: dict[str, dict[str, Any]] = {}
        for sec in w.sample(("server", "database", "cache", "paths", "auth"), w.randint(1, 3)):
            lines.append(f"[{sec}]")
            data[sec] = {}
            for key in w.sample(("timeout", "workers", "name", "root", "retries", "mode"), w.randint(1, 3)):
                value: Any = w.pick((str(w.randint(1, 300)), w.pick(WORDS)))
                lines.append(f"{key} = {value}")
                data[sec][key] = int(value) if value.isdigit() else value
            lines.append(w.pick(("", "; comment", "")))
        return _body(lines), data

    return (
        "an INI-style file (`[section]` headers, `key = value` lines, `;` comments)",
        "an object with one object per section, mapping its keys to their values (values made only of digits as "
        "numbers, the rest as strings)",
        [
            "data, section = {}, None",
            "for raw in fh:",
            "    line = raw.strip()",
            '    if not line or line.startswith(";"):',
            "        continue",
            '    if line.startswith("[") and line.endswith("]"):',
            "        section = data.setdefault(line[1:-1], {})",
            "        continue",
            '    key, _, value = line.partition("=")',
            "    value = value.strip()",
            "    section[key.strip()] = int(value) if value.isdigit() else value",
        ],
        make_ini,
    )


@family(
    "programs-python-json-cli",
    CATEGORY,
    "write a Python CLI (argparse) that converts a text file to JSON, on stdout or into the file --output names",
)
def python_json_cli(w: World) -> Draft:
    place = _place(w)
    source, holds, convert, make = _json_job(w)
    opt = w.pick(("--output", "-o", "--out"))
    stem = _prog_name(w, ("to_json", "export_json", "jsonify", "convert", "dump_json"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.py"
    w.note(stem, opt)
    spec_en = _f(
        w,
        "`python3 {rel} INPUT [{opt} FILE]` reads {source} and writes JSON: {holds}; to FILE when {opt} is given, "
        "else to stdout",
        rel=rel,
        opt=opt,
        source=source,
        holds=holds,
    )
    sample = f"{w.pick(('data', 'input', 'exports'))}/{w.pick(WORDS)}.{w.pick(('txt', 'dat'))}"
    decoys = _near_misses(w, rel, stem, "py", w.randint(0, 2)) if sub else {}
    files = {place.at(sample): make()[0], **{place.at(k): v for k, v in decoys.items()}}
    task = w.phrase(
        "Write {prog} {here}: {spec}.",
        "Ticket: we need JSON out of these files. Add a Python CLI at {prog}; {spec}. Use argparse.",
        "Can you write a small Python tool, {prog}? {spec_c}. Try it on {sample}.",
        "{prog} (Python 3, argparse): {spec}.",
        "The dashboard only reads JSON, and {sample} is not. Write {prog}, where {spec}.",
        "Goal: {spec}. The script goes in {prog}.",
        "How would you turn files like {sample} into JSON? As a script: {prog}, where {spec}.",
        "New converter needed at {prog}: {spec}. Keys exactly as stated; order does not matter.",
        prog=_ref(w, rel),
        spec=spec_en,
        spec_c=_cap(spec_en),
        sample=sample,
        here=_here(w),
    )
    code = [
        "#!/usr/bin/env python3",
        f'"""Convert {source.split(" (")[0]} to JSON."""',
        "import argparse",
        "import csv",
        "import json",
        "import sys",
        "",
        "parser = argparse.ArgumentParser()",
        'parser.add_argument("input")',
        f'parser.add_argument({"" if opt.startswith("--") else chr(34) + opt + chr(34) + ", "}"--{"output" if opt == "-o" else opt[2:]}", dest="output")',
        "args = parser.parse_args()",
        "with open(args.input, newline='') as fh:",
        *(f"    {x}" for x in convert),
        "if args.output:",
        '    with open(args.output, "w") as out:',
        "        json.dump(data, out, indent=2)",
        "else:",
        "    json.dump(data, sys.stdout, indent=2)",
        "    print()",
    ]
    path = place.at(rel)
    cases = []
    text, want = make()
    cases.append(_case(["python3", path, "{T}/in put.txt"], {"in put.txt": text}, out=want, how="json"))
    text, want = make()
    cases.append(
        _case(
            ["python3", path, "{T}/data.txt", opt, "{T}/result.json"],
            {"data.txt": text},
            after_json={"result.json": want},
            cwd="/",
        )
    )
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    reference = [w.pick((f"head {sample}", f"cat {sample}"))]
    if sub and not decoys:
        reference.append(f"mkdir -p {sub.rstrip('/')}")
    reference += _write_program(w, rel, code, w.chance(0.3))
    reference.append(f"python3 {rel} {sample} {opt} /tmp/{stem}.json")
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3 if "passwd" in source or "INI" in source else 2,
        files=files,
    )


# ---- programs-sed-script ---------------------------------------------------------------------------------------------
@family(
    "programs-sed-script",
    CATEGORY,
    "write a sed program file (run with sed -f) that applies several edits to config-like files",
)
def sed_script(w: World) -> Draft:
    place = _place(w)
    keys = w.sample(
        ("timeout", "workers", "mode", "level", "root", "retries", "user", "cache_dir", "threads"), 5
    )
    set_key, off_key, old_key, new_key, extra_key = keys
    value = w.pick((str(w.randint(2, 600)), w.pick(WORDS), f"/srv/{w.pick(WORDS)}"))
    header = f"# managed by {place.name}, do not edit"
    section = w.pick(("main", "server", "defaults"))
    extra_val = str(w.randint(1, 99))
    pool = ["set", "comment_out", "rename", "header", "trailing", "blank", "after_section"]
    rules = w.sample(pool, w.pick((2, 3, 3, 4)))
    if "comment_out" not in rules and w.chance(0.4):
        rules.append("drop_comments")
    w.note(set_key, off_key, old_key, new_key, value, section, extra_key, extra_val)
    en = {
        "set": _f(
            w, "set {k} to {v} (the line `{k}=...`; keys that merely start with {k} stay)", k=set_key, v=value
        ),
        "comment_out": _f(w, "comment out the `{k}=` line by putting # in front of it", k=off_key),
        "rename": _f(w, "rename the key {o} to {n}, keeping its value", o=old_key, n=new_key),
        "header": _f(w, "put the line `{h}` first", h=header),
        "trailing": _f(w, "strip trailing spaces and tabs from every line"),
        "blank": _f(w, "delete empty lines (and lines holding only whitespace)"),
        "after_section": _f(
            w, "add `{k}={v}` right after the `[{s}]` line", k=extra_key, v=extra_val, s=section
        ),
        "drop_comments": _f(w, "delete comment lines (first non-blank character #)"),
    }
    sed = {
        "set": f"s|^{set_key}=.*|{set_key}={sed_replacement(value)}|",
        "comment_out": f"s|^{off_key}=|#&|",
        "rename": f"s|^{old_key}=|{new_key}=|",
        "header": f"1i\\{header}",
        "trailing": "s/[[:space:]]*$//",
        "blank": "/^[[:space:]]*$/d",
        "after_section": f"/^\\[{section}\\]$/a\\{extra_key}={extra_val}",
        "drop_comments": "/^[[:space:]]*#/d",
    }

    def apply(lines: list[str]) -> list[str]:
        out = [header] if "header" in rules else []
        for line in lines:
            if "blank" in rules and not line.strip():
                continue
            if "drop_comments" in rules and line.lstrip().startswith("#"):
                continue
            if "set" in rules and line.startswith(f"{set_key}="):
                line = f"{set_key}={value}"
            if "comment_out" in rules and line.startswith(f"{off_key}="):
                line = "#" + line
            if "rename" in rules and line.startswith(f"{old_key}="):
                line = new_key + line[len(old_key) :]
            if "trailing" in rules:
                line = line.rstrip(" \t")
            out.append(line)
            if "after_section" in rules and line == f"[{section}]":
                out.append(f"{extra_key}={extra_val}")
        return out

    def config() -> list[str]:
        lines = [f"# {w.pick(WORDS)} settings", f"[{section}]"]
        for k in w.shuffled([set_key, off_key, old_key, f"{set_key}_max", f"{old_key}s", w.pick(WORDS)]):
            lines.append(
                f"{k}={w.pick((str(w.randint(1, 999)), w.pick(WORDS)))}{w.pick(('', '', '  ', chr(9)))}"
            )
            if w.chance(0.25):
                lines.append(w.pick(("", "   ", "  # note")))
        lines += [
            "",
            f"[{w.pick(('extra', 'other', 'misc'))}]",
            f"{w.pick(WORDS)}={w.randint(1, 9)}",
        ]
        return lines

    stem = _prog_name(w, ("fixconf", "migrate", "normalize", "tidyconf", "upgrade-conf"))
    sub = w.pick(("", "sed/", "bin/", "scripts/", "tools/"))
    rel = f"{sub}{stem}.sed"
    exe = w.chance(0.25)
    ordered = w.shuffled([r for r in rules if r != "header"])
    prog_lines = ([w.pick(("#!/bin/sed -f", "#!/usr/bin/sed -f"))] if exe else []) + [
        sed[r] for r in (["header"] if "header" in rules else []) + ordered
    ]
    sample = f"{w.pick(('conf', 'etc', 'config'))}/{w.pick(SERVICES)}.conf"
    decoys = _near_misses(w, rel, stem, "sed", w.randint(0, 2))
    files = {place.at(sample): _body(config()), **{place.at(k): v for k, v in decoys.items()}}
    usage = f"{rel} FILE" if exe else f"sed -f {rel} FILE"
    if exe and not sub:
        usage = "./" + usage
    run_en = (
        _f(w, "it runs directly (`{u}`), so it needs a sed shebang and the execute bit", u=usage)
        if exe
        else _f(w, "it is run as `{u}`", u=usage)
    )
    todo = w.clauses([en[r] for r in rules])
    task = w.phrase(
        "Write a sed program file {prog} that, for any config like {sample}, does this: {todo}. It prints the "
        "result ({run}).",
        "Ticket: the config migration is a set of sed edits. Put them in {prog}: {todo}. {run_c}; the output goes "
        "to stdout.",
        "Can you write {prog}, a sed script? Edits: {todo}. {run_c}.",
        "{prog}: sed -f program. {todo_c}. {run_c}.",
        "We apply the same edits to every {sample}-style file by hand. Capture them in {prog}: {todo}. {run_c}.",
        "Goal: `{usage}` prints FILE with these changes: {todo}. Write {prog}.",
        "How do I keep a list of sed edits in a file? Show me: {prog} should {todo}; {run}.",
        "Save these config edits as a sed script, {prog}: {todo}. ({run_c}.)",
        prog=_ref(w, rel),
        sample=sample,
        todo=todo,
        todo_c=_cap(todo),
        run=run_en,
        run_c=_cap(run_en),
        usage=usage,
    )
    path = place.at(rel)
    argv = _invoke(exe, ("sed", "-f"), path)
    cases = []
    for _ in range(3):
        lines = config()
        cases.append(_case([*argv, "{T}/app.conf"], {"app.conf": _body(lines)}, out=_body(apply(lines))))
    spec = {
        "user": place.user,
        "same": {place.at(k): _md5(v) for k, v in decoys.items()},
        "exec": [path] if exe else [],
        "cases": cases,
    }
    reference = [w.pick((f"cat {sample}", f"cat -A {sample}", f"grep -n . {sample}"))]
    if sub and not decoys:
        reference.append(f"mkdir -p {sub.rstrip('/')}")
    reference += _write_program(w, rel, prog_lines, exe)
    reference.append(f"sed -f {rel} {sample}")
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=min(4, 1 + len(rules) // 2 + exe),
        files=files,
    )


def _norm_md5(text: str) -> str:
    """The checker's md5 of an exact output (``norm`` then md5), for outputs too big to carry."""
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return hashlib.md5("\n".join(lines).encode()).hexdigest()


# ---- programs-config-generator ---------------------------------------------------------------------------------------
def _generated(kind: str, a: Sequence[str]) -> list[str]:
    """The config a generator script prints for arguments ``a``."""
    if kind == "profile":
        return [f"# {a[0]} tools", f'export APP_HOME="{a[1]}"', 'export PATH="$APP_HOME/bin:$PATH"']
    if kind == "dotenv":
        return [
            f"APP_NAME={a[0]}",
            f"APP_ROOT={a[1]}",
            "LOG_DIR=${APP_ROOT}/logs",
            "CACHE_DIR=${APP_ROOT}/cache",
        ]
    if kind == "supervisor":
        return [
            f"[program:{a[0]}]",
            f"command={a[1]}/bin/{a[0]}",
            f"directory={a[1]}",
            "autorestart=true",
            "stdout_logfile=/var/log/%(program_name)s.log",
        ]
    if kind == "ssh":
        return [
            f"Host {a[0]}",
            f"    HostName {a[1]}",
            f"    User {a[2]}",
            f"    IdentityFile ~/.ssh/id_{a[0]}",
        ]
    return [
        f"PROG = {a[0]}",
        "PREFIX ?= /usr/local",
        "",
        "install:",
        "\tinstall -m 755 $(PROG) $(PREFIX)/bin/$(PROG)",
    ]


@family(
    "programs-config-generator",
    CATEGORY,
    "write a bash script that generates a config file from its arguments with a here-document (quoting $ right)",
)
def config_generator(w: World) -> Draft:
    place = _place(w)
    kind = w.pick(("profile", "dotenv", "supervisor", "ssh", "make"))
    to_file = w.chance(0.35)
    names = {
        "profile": "gen-profile",
        "dotenv": "gen-env",
        "supervisor": "gen-program",
        "ssh": "gen-ssh-host",
        "make": "gen-makefile",
    }
    stem = w.unique(
        lambda: w.pick((names[kind], names[kind].replace("gen-", "make-"), names[kind].replace("-", "_")))
    )
    sub = _subdir(w)
    rel = f"{sub}{stem}.sh"
    params = {
        "profile": ["NAME", "DIR"],
        "dotenv": ["NAME", "ROOT"],
        "supervisor": ["NAME", "DIR"],
        "ssh": ["ALIAS", "HOST", "USER"],
        "make": ["PROG"],
    }[kind]
    what = {
        "profile": "a shell profile snippet for a tool",
        "dotenv": "a .env file for an app",
        "supervisor": "a supervisor program section",
        "ssh": "an ssh client Host block",
        "make": "a Makefile with an install rule",
    }[kind]
    w.note(stem)
    example = {
        "profile": [place.name, f"/opt/{place.name}"],
        "dotenv": [place.name, f"/srv/{place.name}"],
        "supervisor": [place.name, f"/opt/{place.name}"],
        "ssh": [place.name, w.ip(), w.pick(FIRST_NAMES)],
        "make": [place.name],
    }[kind]
    shown = "\n".join(_generated(kind, example))
    usage = f"{rel} {' '.join(params)}" + (" OUT" if to_file else "")
    dest_en = _f(w, "writes it to the file OUT (replacing it)") if to_file else _f(w, "prints it on stdout")
    literal = {
        "profile": "`$APP_HOME` and `$PATH` stay literally in the output",
        "dotenv": "`${APP_ROOT}` stays literally in the output",
        "supervisor": "`%(program_name)s` stays as it is",
        "ssh": "`~` stays a literal tilde",
        "make": "the recipe line starts with a tab and `$(PROG)` / `$(PREFIX)` stay literally in the output",
    }[kind]
    task = w.phrase(
        "Write a bash script {prog}: `{usage}` generates {what} and {dest}. For `{ex}` the result is exactly:\n\n{shown}\n\n({lit}.)",
        "Ticket: stop hand-writing these configs. {prog} (`{usage}`) must produce {what} and {dest}; with the "
        "arguments `{ex}` it gives:\n\n{shown}\n\nNote that {lit}.",
        "Can you write {prog}? It takes {params} and {dest} {what}, like this one for `{ex}`:\n\n{shown}\n\n"
        "Careful: {lit}.",
        "{prog} {params}: {what}, {dest2}. Example (`{ex}`):\n\n{shown}\n\n{lit_c}.",
        "We need {what} for every new service. Generate it with a script, {prog}, run as `{usage}`; it {dest}. "
        "Template (for `{ex}`):\n\n{shown}\n\n{lit_c}.",
        "Goal: `{usage}` {dest} {what} built from the arguments. For `{ex}`:\n\n{shown}\n\n({lit}.) Use a here-document.",
        "How do I template {what} in bash without breaking the dollar signs? Write {prog} (`{usage}`); it {dest}. "
        "Expected for `{ex}`:\n\n{shown}\n\n{lit_c}.",
        "Generator needed {here}: {prog}, `{usage}`, {dest2}. Output for `{ex}`:\n\n{shown}\n\n{lit_c}.",
        prog=_ref(w, rel),
        usage=usage,
        what=what,
        dest=dest_en,
        dest2=_f(w, "written to OUT") if to_file else _f(w, "printed on stdout"),
        params=" ".join(params),
        ex=f"{rel} {' '.join(example)}" + (" out.conf" if to_file else ""),
        shown="\x01",
        lit=literal,
        lit_c=_cap(literal),
        here=_here(w),
    )
    task = task.replace("\x01", shown)
    heredoc = {
        "profile": ["# $1 tools", 'export APP_HOME="$2"', 'export PATH="\\$APP_HOME/bin:\\$PATH"'],
        "dotenv": [
            "APP_NAME=$1",
            "APP_ROOT=$2",
            "LOG_DIR=\\${APP_ROOT}/logs",
            "CACHE_DIR=\\${APP_ROOT}/cache",
        ],
        "supervisor": [
            "[program:$1]",
            "command=$2/bin/$1",
            "directory=$2",
            "autorestart=true",
            "stdout_logfile=/var/log/%(program_name)s.log",
        ],
        "ssh": ["Host $1", "    HostName $2", "    User $3", "    IdentityFile ~/.ssh/id_$1"],
        "make": [
            "PROG = $1",
            "PREFIX ?= /usr/local",
            "",
            "install:",
            "\tinstall -m 755 \\$(PROG) \\$(PREFIX)/bin/\\$(PROG)",
        ],
    }[kind]
    target = f' > "${len(params) + 1}"' if to_file else ""
    code = ["#!/bin/bash", f"# {stem}: print {what} for {' '.join(params)}"]
    code += [
        f'[ "$#" -eq {len(params) + int(to_file)} ] || {{ echo "usage: {stem}.sh {" ".join(params)}{" OUT" if to_file else ""}" >&2; exit 2; }}'
    ]
    if w.chance(0.5) or kind == "make":
        code += [f"cat <<EOF{target}", *heredoc, "EOF"]
    else:
        plain = [line.replace("\\$", "$") for line in heredoc]
        code.append("printf '%s\\n' \\")
        code += [f"    {_dq(line)} \\" for line in plain[:-1]]
        code.append(f"    {_dq(plain[-1])}{target}")
    path = place.at(rel)
    decoys = _near_misses(w, rel, stem, "sh", w.randint(0, 2)) if sub else {}
    files = {place.at(k): v for k, v in decoys.items()}
    cases = []
    for _ in range(2):
        args = {
            "profile": lambda: [
                f"{w.pick(PROJECTS)}-{w.pick(('cli', 'tools', 'sdk'))}",
                f"/opt/{w.pick(WORDS)} {w.randint(1, 9)}",
            ],
            "dotenv": lambda: [w.pick(SERVICES), f"/srv/{w.pick(WORDS)}_{w.randint(1, 99)}"],
            "supervisor": lambda: [
                f"{w.pick(SERVICES)}-{w.pick(('worker', 'api'))}",
                f"/opt/{w.pick(PROJECTS)}",
            ],
            "ssh": lambda: [
                f"{w.pick(PROJECTS)}-{w.pick(('db', 'web', 'bastion'))}",
                w.ip(),
                w.pick(FIRST_NAMES),
            ],
            "make": lambda: [f"{w.pick(WORDS)}{w.randint(1, 9)}"],
        }[kind]()
        want = _body(_generated(kind, args))
        if to_file:
            cases.append(_case(["bash", path, *args, "{T}/out.conf"], after={"out.conf": want}, quiet=True))
        else:
            cases.append(_case(["bash", path, *args], out=want))
    cases.append(_case(["bash", path], rc=2, err=True, quiet=True, label="no arguments"))
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    reference = [f"ls {sub or '.'}" if decoys or not sub else "pwd"]
    if sub and not decoys:
        reference.append(f"mkdir -p {sub.rstrip('/')}")
    reference += _write_program(w, rel, code, w.chance(0.4))
    reference.append(
        f"bash {rel} {' '.join(quote(x) for x in example)}"
        + (" /tmp/out.conf && cat /tmp/out.conf" if to_file else "")
    )
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3 if kind in ("make", "profile", "dotenv") else 2,
        files=files,
    )


def _dq(line: str) -> str:
    """A line for a double-quoted printf argument: arguments ($1 ...) expand, every other $ is literal."""
    out = line.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$")
    return '"' + re.sub(r"\\\$(\d)", r"$\1", out) + '"'


# ---- programs-loop-to-awk --------------------------------------------------------------------------------------------
@family(
    "programs-loop-to-awk",
    CATEGORY,
    "rewrite a slow bash while-read loop (a subshell per line) as one awk program with the same output",
)
def loop_to_awk(w: World) -> Draft:
    place = _place(w)
    kind = w.pick(("totals", "reformat", "count"))
    sep_name, sep = w.pick((("commas", ","), ("semicolons", ";"), ("colons", ":")))
    stem = _prog_name(w, ("rollup", "per-key", "crunch", "reshape", "summarise"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.sh"
    w.note(stem)
    keys = [w.pick(SERVICES) for _ in range(5)]
    limit = w.pick((100, 300, 500))
    if kind == "totals":
        what = "prints `KEY TOTAL` for each KEY (first field), TOTAL being the sum of the second field, sorted by KEY"
        old = [
            "#!/bin/bash",
            f"# {stem}: per-key totals of a file of KEY{sep}VALUE lines",
            "declare -A total",
            "while IFS= read -r line; do",
            f"    key=$(echo \"$line\" | cut -d'{sep}' -f1)",
            f"    value=$(echo \"$line\" | cut -d'{sep}' -f2)",
            "    total[$key]=$(( ${total[$key]:-0} + value ))",
            'done < "$1"',
            "for key in $(printf '%s\\n' \"${!total[@]}\" | sort); do",
            '    echo "$key ${total[$key]}"',
            "done",
        ]
        new = [
            "#!/bin/bash",
            f"# {stem}: per-key totals of a file of KEY{sep}VALUE lines",
            f"awk -F'{sep}' '{{ t[$1] += $2 }} END {{ for (k in t) print k, t[k] }}' \"$1\" | sort",
        ]

        def expect(lines: list[str], times: int = 1) -> str:
            t = Counter[str]()
            for x in lines:
                k, v = x.split(sep)[:2]
                t[k] += int(v)
            return _body(f"{k} {t[k] * times}" for k in sorted(t))

        def row() -> str:
            return f"{w.pick(keys)}{sep}{w.randint(0, 900)}"
    elif kind == "reformat":
        what = "prints each line's second field, a colon and its first field (`SECOND:FIRST`), in file order"
        old = [
            "#!/bin/bash",
            f"# {stem}: swap the first two fields of KEY{sep}VALUE lines",
            "while IFS= read -r line; do",
            f"    a=$(echo \"$line\" | cut -d'{sep}' -f1)",
            f"    b=$(echo \"$line\" | cut -d'{sep}' -f2)",
            '    echo "$b:$a"',
            'done < "$1"',
        ]
        new = [
            "#!/bin/bash",
            f"# {stem}: swap the first two fields of KEY{sep}VALUE lines",
            f"awk -F'{sep}' '{{ print $2 \":\" $1 }}' \"$1\"",
        ]

        def expect(lines: list[str], times: int = 1) -> str:
            return _body(f"{x.split(sep)[1]}:{x.split(sep)[0]}" for x in lines) * times

        def row() -> str:
            return f"{w.pick(keys)}{sep}{w.pick(WORDS)}{w.randint(1, 99)}"
    else:
        w.note(limit)
        what = f"prints `KEY COUNT` for each KEY (first field) with how many of its lines have a second field over {limit}, sorted by KEY (keys with none are left out)"
        old = [
            "#!/bin/bash",
            f"# {stem}: per-key count of values over {limit}",
            "declare -A n",
            "while IFS= read -r line; do",
            f"    key=$(echo \"$line\" | cut -d'{sep}' -f1)",
            f"    value=$(echo \"$line\" | cut -d'{sep}' -f2)",
            f'    if [ "$value" -gt {limit} ]; then n[$key]=$(( ${{n[$key]:-0}} + 1 )); fi',
            'done < "$1"',
            "for key in $(printf '%s\\n' \"${!n[@]}\" | sort); do",
            '    echo "$key ${n[$key]}"',
            "done",
        ]
        new = [
            "#!/bin/bash",
            f"# {stem}: per-key count of values over {limit}",
            f"awk -F'{sep}' '$2 > {limit} {{ n[$1]++ }} END {{ for (k in n) print k, n[k] }}' \"$1\" | sort",
        ]

        def expect(lines: list[str], times: int = 1) -> str:
            t = Counter(x.split(sep)[0] for x in lines if int(x.split(sep)[1]) > limit)
            return _body(f"{k} {t[k] * times}" for k in sorted(t))

        def row() -> str:
            return f"{w.pick(keys)}{sep}{w.randint(0, limit * 2)}"

    if w.chance(
        0.4
    ):  # the awk program in its own right: a file run with -f would do as well, but keep one path
        new = ["#!/usr/bin/awk -f", f"# {stem}", f'BEGIN {{ FS = "{sep}" }}'] + {
            "totals": ["{ t[$1] += $2 }", 'END { for (k in t) print k, t[k] | "sort" }'],
            "reformat": ['{ print $2 ":" $1 }'],
            "count": [
                f"$2 > {limit} {{ n[$1]++ }}",
                'END { for (k in n) print k, n[k] | "sort" }',
            ],
        }[kind]
    path = place.at(rel)
    decoys = _near_misses(w, rel, stem, "sh", w.randint(0, 2)) if sub else {}
    sample_rel = f"{w.pick(('data', 'input'))}/{w.pick(WORDS)}.txt"
    files = {
        path: _body(old),
        place.at(sample_rel): _body(row() for _ in range(40)),
        **{place.at(k): v for k, v in decoys.items()},
    }
    setup = [f"chmod 755 {path}"]
    task = w.phrase(
        "{prog} takes minutes on big files: it runs cut in a subshell for every line. Rewrite it as one awk program "
        "(same path, still run as `{prog} FILE`, same output). It {what}; input lines are fields separated by {sn}.",
        "Ticket: {prog} is too slow for the {n}-line exports. Replace the bash loop with awk; the output must not change. "
        "(It {what}; fields are separated by {sn}.)",
        "Can you make {prog} fast? Use awk instead of the while-read loop. Keep its name, argument and output: it {what}.",
        "{prog}: bash loop -> awk. Same output ({what}; {sn} between fields). Must handle {n} lines in a few seconds.",
        "The nightly job times out in {prog}. Turn its loop into a single awk program; behaviour stays: it {what} "
        "(fields separated by {sn}).",
        "Goal: `{prog} FILE` prints the same as today for any input but finishes a {n}-line file in seconds. It "
        "{what}. Rewrite it with awk.",
        "Why is {prog} so slow, and can you fix it? Rewrite it with awk, keeping exactly what it prints: it {what}.",
        "Redo the loop in {prog} {here} in awk for speed. Spec: it {what}; input fields are separated by {sn}.",
        prog=_ref(w, rel),
        what=what,
        sn=sep_name,
        n=w.pick(("100,000", "200,000", "half-million")),
        here=_here(w),
    )
    cases = []
    small = [row() for _ in range(w.randint(6, 14))]
    cases.append(_case([path, "{T}/small data.txt"], {"small data.txt": _body(small)}, out=expect(small)))
    chunk = [row() for _ in range(50)]
    big = _body(chunk)
    times = 600
    cases.append(
        {
            # ``expect(lines, times)``: the output for ``lines`` repeated ``times`` times, without building the
            # 30,000 lines in Python (that cost ~30 ms a draw, most of this family's drawing time)
            **_case([path, "{T}/big.txt"], out=_norm_md5(expect(chunk, times)), how="md5", timeout=8),
            "repeat": {"big.txt": [big, times]},
            "label": f"{50 * times} lines",
        }
    )
    spec = {
        "user": place.user,
        "exec": [path],
        "same": {place.at(k): _md5(v) for k, v in decoys.items()},
        "cases": cases,
    }
    reference = [_look(w, rel), f"head -n 5 {sample_rel}", *_backup(w, rel)]
    reference += _edit(w, rel, _body(old), _body(new))
    reference.append(
        f"time {rel} {sample_rel}"
        if w.chance(0.3)
        else f"bash {rel} {sample_rel}"
        if new[0] == "#!/bin/bash"
        else f"awk -f {rel} {sample_rel}"
    )
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=4 if kind == "count" else 3,
        files=files,
        setup=setup,
    )


# ---- programs-argparse-option ----------------------------------------------------------------------------------------
@family(
    "programs-argparse-option",
    CATEGORY,
    "add an option to an existing Python argparse CLI (a limit, a filter, a separator, a flag) keeping its default",
)
def argparse_option(w: World) -> Draft:
    place = _place(w)
    kind = w.pick(("limit", "min", "reverse", "sep", "grep"))
    stem = _prog_name(w, ("inventory", "list_items", "show_sizes", "catalog", "ls_assets"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.py"
    w.note(stem)
    opt = {
        "limit": w.pick(("--limit", "--max", "--top")),
        "min": w.pick(("--min-size", "--at-least", "--min")),
        "reverse": w.pick(("--reverse", "--desc", "--largest-first")),
        "sep": w.pick(("--sep", "--delimiter", "--separator")),
        "grep": w.pick(("--match", "--contains", "--filter")),
    }[kind]
    dest = opt[2:].replace("-", "_")
    w.note(opt)
    what = {
        "limit": _f(w, "`{o} N` prints only the first N records (default: all of them)", o=opt),
        "min": _f(w, "`{o} N` leaves out records whose size is below N (default: keep all)", o=opt),
        "reverse": _f(w, "`{o}` prints the records in reverse name order", o=opt),
        "sep": _f(
            w,
            "`{o} TEXT` puts TEXT between name and size instead of the single space (default: a space)",
            o=opt,
        ),
        "grep": _f(w, "`{o} TEXT` prints only the records whose name contains TEXT (case-sensitive)", o=opt),
    }[kind]
    arg_line = {
        "limit": f'parser.add_argument("{opt}", type=int, default=None, help="print at most N records")',
        "min": f'parser.add_argument("{opt}", type=int, default=0, help="leave out smaller records")',
        "reverse": f'parser.add_argument("{opt}", action="store_true", help="reverse name order")',
        "sep": f'parser.add_argument("{opt}", default=" ", help="text between name and size")',
        "grep": f'parser.add_argument("{opt}", default="", help="only names containing this")',
    }[kind]
    old = [
        "#!/usr/bin/env python3",
        '"""List the records of a CSV inventory (name,size), sorted by name."""',
        "import argparse",
        "import csv",
        "",
        "parser = argparse.ArgumentParser(description=__doc__)",
        'parser.add_argument("inventory")',
        "args = parser.parse_args()",
        "",
        "with open(args.inventory, newline='') as fh:",
        '    rows = sorted(csv.DictReader(fh), key=lambda r: r["name"])',
        "for row in rows:",
        '    print(row["name"], row["size"])',
    ]
    new = old[:7] + [arg_line] + old[7:]
    tail = {
        "limit": [f"for row in rows[: args.{dest}]:", '    print(row["name"], row["size"])'],
        "min": [
            "for row in rows:",
            f'    if int(row["size"]) >= args.{dest}:',
            '        print(row["name"], row["size"])',
        ],
        "reverse": [
            f"for row in reversed(rows) if args.{dest} else rows:",
            '    print(row["name"], row["size"])',
        ],
        "sep": ["for row in rows:", f'    print(row["name"] + args.{dest} + row["size"])'],
        "grep": [
            "for row in rows:",
            f'    if args.{dest} in row["name"]:',
            '        print(row["name"], row["size"])',
        ],
    }[kind]
    new = new[: len(new) - 2] + tail
    path = place.at(rel)
    decoys = _near_misses(w, rel, stem, "py", w.randint(0, 2)) if sub else {}
    sample_rel = f"{w.pick(('data', 'inventory'))}/{w.pick(WORDS)}.csv"

    def table() -> list[tuple[str, int]]:
        return [(f"{w.pick(WORDS)}-{w.randint(1, 99)}", w.randint(1, 5000)) for _ in range(w.randint(4, 9))]

    def csv_text(rows: list[tuple[str, int]]) -> str:
        return _body(["name,size", *(f"{a},{b}" for a, b in rows)])

    files = {
        path: _body(old),
        place.at(sample_rel): csv_text(table()),
        **{place.at(k): v for k, v in decoys.items()},
    }
    task = w.phrase(
        "Add an option to {prog} {here}: {what}. Without it the output stays exactly as now.",
        "Ticket: {prog} needs `{o}`. Behaviour: {what}. Existing calls must not change.",
        "Can you teach {prog} a new option? {what_c}. It uses argparse; `--help` should list it.",
        "{prog}: add {o}. {what_c}. Default behaviour unchanged.",
        "I keep piping {prog}'s output through other tools to do this. Build it in instead: {what}.",
        "Goal: `python3 {prog} {o} ...` works: {what}. `python3 {prog} FILE` alone prints what it prints today.",
        "How hard is it to add `{o}` to {prog}? Please do it: {what}. Keep the old output as the default.",
        "Feature for {prog} (argparse CLI listing a name,size CSV): {what}.",
        prog=_ref(w, rel),
        what=what,
        what_c=_cap(what),
        o=opt,
        here=_here(w),
    )

    def expect(rows: list[tuple[str, int]], value: Any) -> str:
        rows = sorted(rows)
        if kind == "limit":
            rows = rows[:value]
        elif kind == "min":
            rows = [r for r in rows if r[1] >= value]
        elif kind == "reverse" and value:
            rows = rows[::-1]
        elif kind == "grep":
            rows = [r for r in rows if value in r[0]]
        sep = value if kind == "sep" else " "
        return _body(f"{a}{sep}{b}" for a, b in rows)

    cases = []
    rows = table()
    cases.append(
        _case(
            ["python3", path, "{T}/inv.csv"],
            {"inv.csv": csv_text(rows)},
            out=expect(rows, {"limit": 10**6, "min": 0, "reverse": False, "sep": " ", "grep": ""}[kind]),
        )
    )
    for _ in range(2):
        rows = table()
        value: Any = {
            "limit": w.randint(1, 3),
            "min": w.randint(500, 3000),
            "reverse": True,
            "sep": w.pick((",", " | ", "\t", ": ")),
            "grep": rows[0][0].split("-")[0][:3],
        }[kind]
        argv = ["python3", path, *([opt] if kind == "reverse" else [opt, str(value)]), "{T}/inv.csv"]
        cases.append(_case(argv, {"inv.csv": csv_text(rows)}, out=expect(rows, value)))
    cases.append(_case(["python3", path, "--help"], has=opt, label="--help"))
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    reference = [_look(w, rel), *_backup(w, rel), *_edit(w, rel, _body(old), _body(new))]
    demo = {"limit": "3", "min": "1000", "reverse": "", "sep": quote(","), "grep": quote("a")}[kind]
    reference.append(f"python3 {rel} {opt} {demo} {sample_rel}".replace("  ", " "))
    return place.draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=2 if kind in ("reverse", "sep") else 3,
        files=files,
    )


# ---- programs-trap-cleanup -------------------------------------------------------------------------------------------
@family(
    "programs-trap-cleanup",
    CATEGORY,
    "make a bash script remove its temporary files however it ends (an EXIT trap), keeping its exit status",
)
def trap_cleanup(w: World) -> Draft:
    place = _place(w)
    kind = w.pick(("dir", "file"))
    ext = w.pick(("txt", "lst", "log"))
    word = w.pick(("ERROR", "WARN", "timeout", "denied"))
    stem = _prog_name(w, ("merge-lists", "combine", "errors-digest", "gather-sorted", "distill"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.sh"
    w.note(ext, word, stem)
    if kind == "dir":
        what = _f(w, "merges the sorted contents of every *.{e} file in DIR into OUT", e=ext)
        body = [
            "work=$(mktemp -d)",
            f'for f in "$1"/*.{ext}; do',
            '    sort "$f" > "$work/$(basename "$f")"',
            "done",
            'sort -m "$work"/* > "$2"',
        ]
        clean = 'rm -rf "$work"'
        trap = w.pick(("trap 'rm -rf \"$work\"' EXIT", "trap \"rm -rf '$work'\" EXIT"))
    else:
        what = _f(
            w,
            "writes the distinct lines mentioning {x} from DIR's *.{e} files, sorted, to OUT",
            x=word,
            e=ext,
        )
        body = ["tmp=$(mktemp)", f'grep -h -- {word} "$1"/*.{ext} > "$tmp"', 'sort -u "$tmp" > "$2"']
        clean = 'rm -f "$tmp"'
        trap = w.pick(("trap 'rm -f \"$tmp\"' EXIT", "trap \"rm -f '$tmp'\" EXIT"))
    head = [
        "#!/bin/bash",
        f"# {stem} DIR OUT: {what.replace('DIR', 'the folder').replace('OUT', 'the output file')}",
        "set -e",
    ]
    old = [*head, *body, clean, 'echo "wrote $2"']
    keep_rm = w.chance(0.5)
    new = [*head, body[0], trap, *body[1:], *([clean] if keep_rm else []), 'echo "wrote $2"']
    path = place.at(rel)
    decoys = _near_misses(w, rel, stem, "sh", w.randint(0, 2)) if sub else {}
    files = {path: _body(old), **{place.at(k): v for k, v in decoys.items()}}
    temp = (
        _f(w, "{temporary|scratch} {folder|directory}")
        if kind == "dir"
        else _f(w, "{temporary|scratch} file")
    )
    task = w.phrase(
        "{prog} {what} (`{prog} DIR OUT`), but when it fails it leaves its {temp} behind in /tmp. Make it remove "
        "the {temp} whenever it exits, success or failure, without changing its output or exit status.",
        "Ticket: /tmp fills up with leftovers from {prog}. Every failed run leaves a {temp}. Fix the script so it "
        "always cleans up after itself; a failure must still exit non-zero.",
        "Can you make {prog} clean up its {temp} however it ends? (It {what}; it uses set -e, so it can stop "
        "half-way.)",
        "{prog}: remove the {temp} on every exit, not only on success. Keep the exit status and what it writes.",
        "When {prog} hits an error it exits early and its {temp} stays in /tmp forever. Make the cleanup "
        "unconditional (it {what}).",
        "Goal: no run of {prog}, good or bad, leaves anything in $TMPDIR (or /tmp). It {what}; keep that and keep "
        "its exit status.",
        "Why do we have hundreds of tmp.* entries in /tmp? {prog} {here} leaks its {temp} when it fails. Fix it so "
        "the {temp} goes away on any exit.",
        "Harden {prog} ({what}): its {temp} must be removed when it exits for any reason; a failing run still "
        "fails.",
        prog=_ref(w, rel),
        what=what,
        temp=temp,
        here=_here(w),
    )

    def inputs() -> tuple[dict[str, str], list[str]]:
        files_in, lines = {}, []
        for _ in range(w.randint(2, 3)):
            chunk = [
                f"{w.pick(WORDS)} {w.pick((word, 'ok', 'info'))} {w.randint(1, 99)}"
                for _ in range(w.randint(2, 6))
            ]
            chunk.append(f"{w.pick(WORDS)} {word} {w.randint(1, 99)}")
            files_in[f"in/{w.pick(WORDS)}{w.randint(1, 99)}.{ext}"] = _body(chunk)
            lines += chunk
        return files_in, lines

    env = {"TMPDIR": "{T}/tmp"}
    argv = ["bash", path, "{T}/in", "{T}/out.txt"]
    cases = []
    files_in, lines = inputs()
    want = sorted(lines) if kind == "dir" else sorted({x for x in lines if word in x})
    # a file of someone else's in the temporary folder: it must stay, and nothing else may be left there
    theirs = {"tmp/keep.me": "not the script's\n"}
    cases.append(
        _case(
            argv,
            {**files_in, **theirs},
            env=env,
            out="wrote {T}/out.txt\n",
            after={"out.txt": _body(want), **theirs},
            label="a good run",
        )
    )
    cases.append(
        _case(
            argv, {"in/readme.md": "nothing here\n", **theirs}, env=env, rc="nonzero", label="no input files"
        )
    )
    cases.append(
        _case(
            ["bash", path, "{T}/missing", "{T}/out.txt"],
            dict(theirs),
            env=env,
            rc="nonzero",
            label="no such folder",
        )
    )
    for c in cases:
        c["only"] = {"tmp": ["keep.me"]}
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    demo_in = w.pick(("lists", "input", "logs"))
    files.update({place.at(f"{demo_in}/{k.split('/')[1]}"): v for k, v in inputs()[0].items()})
    reference = [_look(w, rel), *_backup(w, rel), *_edit(w, rel, _body(old), _body(new))]
    reference.append(f"bash {rel} {demo_in} /tmp/{stem}.out; ls /tmp")
    return place.draft(
        task=task, check=_check(spec), reference=reference, difficulty=3 if kind == "file" else 4, files=files
    )


# ---- programs-env-settings -------------------------------------------------------------------------------------------
@family(
    "programs-env-settings",
    CATEGORY,
    "make a script read its settings from environment variables with defaults (unset or empty means the default)",
)
def env_settings(w: World) -> Draft:
    place = _place(w)
    lang = w.pick(("bash", "bash", "python"))
    app = place.name
    prefix = w.pick(("NOTIFY", "ALERT", app.upper().replace("-", "_")))
    settings = {
        "level": (f"{prefix}_LEVEL", w.pick(("info", "notice", "warning"))),
        "app": (f"{prefix}_APP", app),
        "log": (f"{prefix}_LOG", w.pick(("notify.log", "events.log", "messages.log"))),
    }
    required = w.chance(0.35)
    req_var, req_rc = f"{prefix}_CHANNEL", w.pick((2, 3, 78))
    stem = _prog_name(w, ("notify", "alert", "note", "emit", "say"))
    sub = _subdir(w)
    rel = f"{sub}{stem}.{'sh' if lang == 'bash' else 'py'}"
    w.note(stem, prefix, *(v for _, v in settings.values()))
    lv, ap, lg = (settings[k][1] for k in ("level", "app", "log"))
    fmt = "[{level}] {app}: {msg}" + (" #{channel}" if required else "")
    if lang == "bash":
        old = [
            "#!/bin/bash",
            f"# {stem} MESSAGE: print the message and append it to the log",
            f"level={lv}",
            f"app={ap}",
            f"log={lg}",
            'line="[$level] $app: $1"',
            'echo "$line"',
            'echo "$line" >> "$log"',
        ]
        new = [
            "#!/bin/bash",
            f"# {stem} MESSAGE: print the message and append it to the log",
            f'level="${{{settings["level"][0]}:-{lv}}}"',
            f'app="${{{settings["app"][0]}:-{ap}}}"',
            f'log="${{{settings["log"][0]}:-{lg}}}"',
        ]
        if required:
            new += [
                f'[ -n "${req_var}" ] || {{ echo "{req_var} is not set" >&2; exit {req_rc}; }}',
                f'line="[$level] $app: $1 #${req_var}"',
            ]
        else:
            new.append('line="[$level] $app: $1"')
        new += ['echo "$line"', 'echo "$line" >> "$log"']
        interp = "bash"
    else:
        old = [
            "#!/usr/bin/env python3",
            f'"""{stem} MESSAGE: print the message and append it to the log."""',
            "import sys",
            "",
            f'LEVEL = "{lv}"',
            f'APP = "{ap}"',
            f'LOG = "{lg}"',
            "",
            'line = f"[{LEVEL}] {APP}: {sys.argv[1]}"',
            "print(line)",
            'with open(LOG, "a") as fh:',
            '    fh.write(line + "\\n")',
        ]
        new = [
            "#!/usr/bin/env python3",
            f'"""{stem} MESSAGE: print the message and append it to the log."""',
            "import os",
            "import sys",
            "",
            f'LEVEL = os.environ.get("{settings["level"][0]}") or "{lv}"',
            f'APP = os.environ.get("{settings["app"][0]}") or "{ap}"',
            f'LOG = os.environ.get("{settings["log"][0]}") or "{lg}"',
            "",
        ]
        if required:
            new += [
                f'CHANNEL = os.environ.get("{req_var}")',
                "if not CHANNEL:",
                f'    print("{req_var} is not set", file=sys.stderr)',
                f"    sys.exit({req_rc})",
                'line = f"[{LEVEL}] {APP}: {sys.argv[1]} #{CHANNEL}"',
            ]
        else:
            new.append('line = f"[{LEVEL}] {APP}: {sys.argv[1]}"')
        new += ["print(line)", 'with open(LOG, "a") as fh:', '    fh.write(line + "\\n")']
        interp = "python3"
    path = place.at(rel)
    decoys = _near_misses(w, rel, stem, rel.rsplit(".", 1)[1], w.randint(0, 2)) if sub else {}
    files = {path: _body(old), **{place.at(k): v for k, v in decoys.items()}}
    vars_en = ", ".join(f"{var} (default {value})" for var, value in settings.values())
    req_en = (
        " "
        + _f(
            w,
            "{It also needs|It must also read} {v}: its value goes at the end of the line as ` #VALUE`, and when "
            "{v} is unset or empty the script prints an error on stderr and exits with status {rc}, writing nothing.",
            v=req_var,
            rc=req_rc,
        )
        if required
        else ""
    )
    task = w.phrase(
        "{prog} has its settings hard-coded. Make it take them from the environment: {vars}. A variable that is "
        "unset or empty means the default (today's value).{req}",
        "Ticket: we run {prog} in several places and need to configure it without editing it. Read {vars} from the "
        "environment; unset or empty falls back to the default.{req}",
        "Can you make {prog} configurable through environment variables? {vars_c}. Empty counts as unset.{req}",
        "{prog}: settings from env. {vars_c}; unset/empty -> default.{req}",
        "Twelve-factor time: {prog} should read its config from the environment instead of constants: {vars}. "
        "With nothing set it must behave exactly as now.{req}",
        "Goal: `{var0}=x {interp} {prog} MESSAGE` uses x, and so on for {vars}; without them (or with them empty) "
        "nothing changes.{req}",
        "How do I override {prog}'s log file without editing the script? Make all its settings environment "
        "variables: {vars}. Unset or empty means default.{req}",
        "Turn the constants at the top of {prog} {here} into environment settings: {vars}; empty or unset keeps the "
        "default.{req}",
        prog=_ref(w, rel),
        vars=vars_en,
        vars_c=_cap(vars_en),
        var0=settings["level"][0],
        interp=interp,
        req=req_en,
        here=_here(w),
    )
    cases = []
    base_env = {req_var: f"ops-{w.randint(1, 99)}"} if required else {}

    def line(level: str, app_: str, msg: str, env: dict[str, str]) -> str:
        return fmt.format(level=level, app=app_, msg=msg, channel=env.get(req_var, ""))

    msg = f"{w.pick(WORDS)} {w.pick(('done', 'failed', 'started'))}"
    want = line(lv, ap, msg, base_env)
    cases.append(
        _case(
            [interp, path, msg],
            env=dict(base_env),
            out=want + "\n",
            after={lg: want + "\n"},
            label="defaults",
        )
    )
    env = {
        **base_env,
        settings["level"][0]: w.pick(("error", "debug")),
        settings["app"][0]: w.pick(SERVICES),
        settings["log"][0]: "{T}/logs/custom.log",
    }
    msg = f"{w.pick(WORDS)} {w.randint(1, 99)}"
    want = line(env[settings["level"][0]], env[settings["app"][0]], msg, env)
    cases.append(
        _case(
            [interp, path, msg],
            {"logs/.keep": ""},
            env=env,
            out=want + "\n",
            after={"logs/custom.log": want + "\n", lg: None},
            label="all set",
        )
    )
    env = {**base_env, settings["level"][0]: "", settings["app"][0]: w.pick(SERVICES)}
    want = line(lv, env[settings["app"][0]], msg, env)
    cases.append(
        _case([interp, path, msg], env=env, out=want + "\n", after={lg: want + "\n"}, label="one empty")
    )
    if required:
        cases.append(
            _case(
                [interp, path, msg],
                rc=req_rc,
                err=True,
                quiet=True,
                after={lg: None},
                label=f"{req_var} unset",
            )
        )
    spec = {"user": place.user, "same": {place.at(k): _md5(v) for k, v in decoys.items()}, "cases": cases}
    reference = [_look(w, rel), *_backup(w, rel), *_edit(w, rel, _body(old), _body(new))]
    demo_env = f"{settings['log'][0]}=/tmp/{stem}.log " + (f"{req_var}=ops " if required else "")
    reference.append(f"{demo_env}{interp} {rel} hello && cat /tmp/{stem}.log")
    return place.draft(
        task=task, check=_check(spec), reference=reference, difficulty=3 if required else 2, files=files
    )


# ---- programs-awk-program-fix ----------------------------------------------------------------------------------------
_AWK_BUGS = {
    "fs": "the counts and sums come out as zero or nonsense",
    "header": "the header line is counted as a row",
    "strcmp": "ITEMS counts the wrong rows (quantities are compared as text)",
    "avg": "AVERAGE is too low",
    "int": "TOTAL loses its cents",
}


def _awk_fix_program(limit: int, bugs: Sequence[str]) -> list[str]:
    """The CSV report program, with ``bugs`` planted."""
    lines = [] if "fs" in bugs else ['BEGIN { FS = "," }']
    if "header" not in bugs:
        lines.append("NR == 1 { next }")
    lines.append("{ rows++; total += $3 * $4; price += $4 }")
    lines.append(f'$3 > "{limit}" {{ big++ }}' if "strcmp" in bugs else f"$3 > {limit} {{ big++ }}")
    lines += [
        "END {",
        '    printf "ITEMS %d\\n", big',
        '    printf "TOTAL %d\\n", total' if "int" in bugs else '    printf "TOTAL %.2f\\n", total',
        '    printf "AVERAGE %.2f\\n", (NR ? price / NR : 0)'
        if "avg" in bugs
        else '    printf "AVERAGE %.2f\\n", (rows ? price / rows : 0)',
        "}",
    ]
    return lines


@family(
    "programs-awk-program-fix",
    CATEGORY,
    "fix the bugs in an awk program file (field separator, header row, text vs number comparison, printf format)",
)
def awk_program_fix(w: World) -> Draft:
    place = _place(w)
    limit = w.pick((10, 20, 50, 100))
    bugs = w.sample(sorted(_AWK_BUGS), w.pick((1, 1, 2)))
    if "fs" in bugs and "header" in bugs:
        bugs.remove("header")
    stem = _prog_name(w, ("orders", "sales", "stock", "invoice", "basket"))
    sub = w.pick(("", "awk/", "reports/", "lib/"))
    rel = f"{sub}{stem}.awk"
    w.note(limit, stem)
    old, new = _awk_fix_program(limit, bugs), _awk_fix_program(limit, ())
    path = place.at(rel)
    sample = f"{w.pick(('data', 'exports'))}/{w.pick(WORDS)}.csv"

    def table() -> tuple[str, str]:
        rows = []
        qtys = [w.randint(1, limit * 3) for _ in range(w.randint(3, 8))] + [
            limit,
            int("9" * len(str(limit))) % (limit * 3) or 9,
        ]
        for q in w.shuffled(qtys):
            rows.append(
                (
                    f"2024-{w.randint(1, 12):02d}-{w.randint(1, 28):02d}",
                    w.pick(FRUITS),
                    q,
                    w.randint(50, 9999) / 100,
                )
            )
        text = _body(["date,item,qty,price", *(f"{d},{i},{q},{p:.2f}" for d, i, q, p in rows)])
        total = sum(q * p for _, _, q, p in rows)
        avg = sum(p for *_, p in rows) / len(rows)
        big = sum(1 for _, _, q, _ in rows if q > limit)
        return text, _body([f"ITEMS {big}", f"TOTAL {total:.2f}", f"AVERAGE {avg:.2f}"])

    files = {path: _body(old), place.at(sample): table()[0]}
    files.update({place.at(k): v for k, v in _near_misses(w, rel, stem, "awk", w.randint(0, 2)).items()})
    symptoms = "; ".join(_AWK_BUGS[b] for b in bugs)
    spec_en = _f(
        w,
        "`awk -f {rel} FILE` reads a CSV with the header `date,item,qty,price` and prints `ITEMS N` (rows with qty "
        "over {n}), `TOTAL X` (the sum of qty times price, 2 decimals) and `AVERAGE Y` (the mean price of the rows, "
        "2 decimals)",
        rel=rel,
        n=limit,
    )
    more = _f(w, " {There may be more than one bug.|Check the whole program.}") if len(bugs) > 1 else ""
    task = w.phrase(
        "The awk program {prog} gives wrong numbers: {symptoms}. Fix it. What it should do: {spec}.{more}",
        "Ticket: {prog} report is wrong ({symptoms}). Expected behaviour: {spec}. Repair the program file.{more}",
        "Can you debug {prog}? On {sample} {symptoms}. It is meant to work like this: {spec}.{more}",
        "{prog}: broken ({symptoms}). Spec: {spec}. Fix it.{more}",
        "Finance noticed that {symptoms} in the report made by {prog}. Fix the awk program so that {spec}.{more}",
        "Goal: {spec}, for any such CSV. Today {symptoms}. Change {prog} {here}.{more}",
        "Why is the report from {prog} off? Users say {symptoms}. Fix it; the intended behaviour: {spec}.{more}",
        "Bug in {prog}: {symptoms}. Make it right: {spec}.{more}",
        prog=_ref(w, rel),
        symptoms=symptoms,
        spec=spec_en,
        sample=sample,
        more=more,
        here=_here(w),
    )
    cases = []
    for _ in range(3):
        text, want = table()
        cases.append(_case(["awk", "-f", path, "{T}/orders.csv"], {"orders.csv": text}, out=want, how="ws"))
    spec = {"user": place.user, "cases": cases}
    reference = [
        _look(w, rel),
        f"head -n 4 {sample}",
        *_backup(w, rel),
        *_edit(w, rel, _body(old), _body(new)),
        f"awk -f {rel} {sample}",
    ]
    return place.draft(
        task=task, check=_check(spec), reference=reference, difficulty=3 if len(bugs) == 1 else 4, files=files
    )
