"""Compositions: tasks that chain two or three skills (select then archive then report; compress then write a
checksum manifest then lock it; filter then load into SQLite; back up then edit then record the diff; create a
user's folder then set its owner and mode then register it; bump a version then commit then tag; copy a tree
without a pattern then lock it and write its manifest; quarantine marked files keeping their paths then report and
lock; split a log by service then compress and index the parts; create a group then its shared folder then a
member's drop-in file), each step's result checked.

A composition is only as good as its check: every step leaves state of its own (an archive *and* a report, a
compressed file *and* a manifest line that verifies it, a backup *and* an edited config *and* a diff that turns the
one into the other), and the check reads all of it, so stopping after the first step, doing the steps in the wrong
order (editing before backing up, locking before writing the manifest) or choosing a plausible wrong value fails.
Difficulty grows with the chain: two steps are 3, three steps are 4.

The worlds are fresh (their own folders, users and names) and every task starts in a drawn working directory
(``Draft.workdir``: the home, a project folder in it, ``/srv/<x>``, ``/opt/<x>``, ``/app``, ``/data/<team>``) as
``operator`` or root, with noise files and near-miss names beside the real targets. The skills of the held-out
families (``factory/split.py``) are never used as ingredients (no log rotation, no signalling, no SQL updates, no
cron.d files).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tomllib
from datetime import timedelta

from bashgym_assets.scenarios.bundle import SessionUser
from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, PROJECTS, TEAMS, WORDS, World, quote

CATEGORY = "compose"
_TAR_FLAG = {"tar.gz": "z", "tgz": "z", "tar.bz2": "j", "tar.xz": "J", "tar": ""}
_TAR_MODE = {"tar.gz": "r:gz", "tgz": "r:gz", "tar.bz2": "r:bz2", "tar.xz": "r:xz", "tar": "r:", "zip": "zip"}
_TAR_FILTER = {"z": "gzip", "j": "bzip2", "J": "xz"}


def _f(w: World, template: str, **values: object) -> str:
    """A spun fragment for inside a sentence (not capitalised)."""
    return w.spin(template, capitalize=False, **values)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _body(lines: list[str]) -> str:
    return "".join(f"{x}\n" for x in lines)


def _home(user: str) -> str:
    return HOME if user == "operator" else "/root"


def _where(w: World, user: str) -> tuple[str, list[str]]:
    """The working directory a task starts in, and the setup that creates it and hands it to ``user``."""
    home = _home(user)
    wd = w.pick(
        (
            home,
            home,
            f"{home}/{w.project()}",
            f"/srv/{w.project()}",
            f"/opt/{w.project()}",
            "/app",
            f"/data/{w.team()}",
            f"/var/tmp/{w.dirname()}",
        )
    )
    w.note(wd)
    if wd == home:
        return wd, []
    return wd, [f"mkdir -p {quote(wd)} && chown -R {user}:{user} {quote(wd)}"]


def _ref(w: World, path: str, wd: str, user: str, kind: str = "folder") -> str:
    """``path`` as a person would give it: absolute, relative to the working directory (``./x``), or from home."""
    home = _home(user)
    styles = ["abs"]
    if path.startswith(wd + "/"):
        styles += ["rel", "rel"]
    if path.startswith(home + "/"):
        styles.append("home")
    style = w.pick(styles)
    if style == "rel":
        return "./" + posixpath.relpath(path, wd)
    if style == "home":
        return w.path_ref(path, kind, home=home)
    return path


def _sh(path: str, wd: str) -> str:
    """How a reference writes ``path`` from the working directory: relative when below it."""
    if path.startswith(wd + "/"):
        return quote(posixpath.relpath(path, wd))
    return quote(path)


def _python_check(body: str, data: object) -> str:
    """A python3 check with ``WANT`` = ``data`` (JSON); it prints why it failed and exits non-zero."""
    return (
        "#!/bin/bash\n"
        f"python3 - <<'PYCHECK' || exit 1\nimport json, os, sys\nWANT = json.loads(r'''{json.dumps(data)}''')\n"
        "def fail(why):\n    print('check failed:', why)\n    sys.exit(1)\n"
        f"{body}\nPYCHECK\n"
    )


def _dated(w: World) -> str:
    return f"{w.date('2024-01-01', 600):%Y%m%d}"


# ---- 1. find, then archive, then report (and optionally remove) ----------------------------------------------------
_ARCHIVE_CHECK = """
import hashlib, re, tarfile, zipfile
base, out, fmt = WANT["base"], WANT["out"], WANT["fmt"]
want = WANT["want"]  # relative path -> md5
prefixes = ["", base.lstrip("/") + "/", os.path.basename(base) + "/", WANT["from_wd"]]

def strip(name):
    return re.sub(r"^(\\./)+", "", name.strip()).lstrip("/")

def relative(names):
    for p in prefixes:
        if p and not all(n.startswith(p) for n in names):
            continue
        rel = [n[len(p):] for n in names]
        if sorted(rel) == sorted(want):
            return rel
    return None

if not os.path.isfile(out):
    fail("no archive " + out)
members = {}
try:
    if fmt == "zip":
        if not zipfile.is_zipfile(out):
            fail("not a zip archive")
        with zipfile.ZipFile(out) as z:
            for i in z.infolist():
                if not i.is_dir():
                    members[strip(i.filename)] = hashlib.md5(z.read(i)).hexdigest()
    else:
        with tarfile.open(out, WANT["mode"]) as t:
            for m in t.getmembers():
                if m.isfile():
                    members[strip(m.name)] = hashlib.md5(t.extractfile(m).read()).hexdigest()
except Exception as exc:
    fail(f"cannot read the archive as {fmt}: {exc}")
names = list(members)
rel = relative(names)
if rel is None:
    fail(f"archive holds {sorted(names)}, want {sorted(want)}")
for n, r in zip(names, rel):
    if members[n] != want[r]:
        fail("content differs for " + r)
for r, digest in WANT["keep"].items():
    p = os.path.join(base, r)
    if not os.path.isfile(p) or hashlib.md5(open(p, "rb").read()).hexdigest() != digest:
        fail("a file that is not part of the selection changed or went: " + r)
for r, digest in want.items():
    p = os.path.join(base, r)
    if WANT["remove"] and os.path.lexists(p):
        fail("still there after archiving: " + r)
    if not WANT["remove"] and not os.path.isfile(p):
        fail("an original went missing: " + r)
report = WANT["report"]
try:
    lines = [x.strip() for x in open(report) if x.strip()]
except OSError:
    fail("no report " + report)
if WANT["kind"] == "count":
    if len(lines) != 1 or not re.fullmatch(r"\\d+", lines[0].split()[0]) or int(lines[0].split()[0]) != len(want):
        fail(f"report says {lines}, want {len(want)}")
else:
    if relative([strip(x) for x in lines]) is None:
        fail(f"report lists {lines}")
"""


@family(
    "compose-find-archive-report",
    CATEGORY,
    "select files by name and/or age, pack them into an archive, then report (and maybe delete) what was packed",
)
def find_archive_report(w: World) -> Draft:
    user = "root" if w.chance(0.25) else "operator"
    wd, setup = _where(w, user)
    base = f"{wd}/{w.pick(('data', 'exports', 'work', 'site', 'shared', w.dirname()))}"
    ext = w.pick(("log", "csv", "json", "md", "conf", "txt", "dat", "xml"))
    others = [e for e in ("log", "csv", "json", "md", "conf", "txt", "ini", "yaml", "py") if e != ext]
    criterion = w.pick(("ext", "ext", "age", "both"))
    days = w.pick((7, 10, 14, 21, 30, 60))
    subdirs = ["", "", w.word(), w.word(), f"{w.word()}/{w.pick(('old', 'archive', '2023', 'q3', 'tmp'))}"]
    entries: list[tuple[str, bool, bool]] = []  # rel path, name matches, old
    for _ in range(w.randint(7, 12)):
        match_name = criterion == "age" or w.chance(0.55)
        name = w.filename(ext if match_name else w.pick(others))
        entries.append((posixpath.join(w.pick(subdirs), name), match_name, w.chance(0.5)))
    # near misses: a backup of a matching file (.ext.bak), a matching name that is recent
    entries.append((posixpath.join(w.pick(subdirs), f"{w.filename(ext)}.bak"), False, True))
    entries += [
        (posixpath.join(w.pick(subdirs), w.filename(ext)), True, True),
        (posixpath.join(w.pick(subdirs), w.filename(ext)), True, False),
        (posixpath.join(w.pick(subdirs), w.filename(w.pick(others))), criterion == "age", True),
    ]

    def selected(match: bool, old: bool) -> bool:
        return {"ext": match, "age": old, "both": match and old}[criterion]

    contents = {rel: _body(w.lines(w.randint(1, 4))) for rel, _, _ in entries}
    want = {rel: _md5(contents[rel]) for rel, m, o in entries if selected(m, o)}
    keep = {rel: _md5(contents[rel]) for rel, m, o in entries if not selected(m, o)}
    files = {f"{base}/{rel}": contents[rel] for rel, _, _ in entries}
    old = [f"{base}/{rel}" for rel, _, o in entries if o]
    new = [f"{base}/{rel}" for rel, _, o in entries if not o]
    setup.append(f"touch -d '{days + w.randint(3, 40)} days ago' " + " ".join(quote(p) for p in old))
    setup.append(f"touch -d '{w.randint(0, max(days - 3, 1))} days ago' " + " ".join(quote(p) for p in new))
    if not base.startswith(_home(user) + "/"):
        setup.append(f"chown -R {user}:{user} {quote(base)}")
    fmt = w.pick(("tar.gz", "tar.gz", "tgz", "tar.bz2", "tar.xz", "zip", "tar"))
    out_dir = w.pick((wd, f"{wd}/{w.pick(('backups', 'archive', 'out', 'attic'))}"))
    out = f"{out_dir}/{w.pick((ext + '-files', posixpath.basename(base), 'selection', 'bundle'))}-{_dated(w)}.{fmt}"
    kind = w.pick(("list", "list", "count"))
    report = f"{wd}/{w.pick(('report', 'archived', 'manifest', 'packed', 'summary'))}.txt"
    remove = w.chance(0.5)
    w.note(days, ext, fmt)

    sel = {
        "ext": _f(w, "{every .{e} file|all the .{e} files|all .{e} files}", e=ext),
        "age": _f(w, "{every file|all files} {last modified|not touched} more than {d} days ago", d=days),
        "both": _f(
            w,
            "{every .{e} file|all .{e} files} {older than {d} days|not modified in the last {d} days}",
            e=ext,
            d=days,
        ),
    }[criterion]
    fmt_en = {
        "zip": "a zip archive",
        "tar": "a plain (uncompressed) tar archive",
        "tar.gz": "a gzip-compressed tar archive",
        "tgz": "a gzip-compressed tar archive",
        "tar.bz2": "a bzip2-compressed tar archive",
        "tar.xz": "an xz-compressed tar archive",
    }[fmt]
    rep_en = {
        "list": _f(w, "the {paths|names} of the archived files, one per line, relative to {b}", b=base),
        "count": _f(w, "{just the number|only the count} of files {archived|that went into the archive}"),
    }[kind]
    b_ref, o_ref, r_ref = (
        _ref(w, base, wd, user),
        _ref(w, out, wd, user, "file"),
        _ref(w, report, wd, user, "file"),
    )
    rm = (
        _f(w, "{delete|remove} the originals {once they are archived|after packing them}")
        if remove
        else _f(w, "{keep|leave} the originals {where they are|in place}")
    )
    task = w.phrase(
        "Find {sel} under {b} (subfolders included) and pack them into {fmt_en} at {o}, paths inside relative to "
        "{b}. Then {rm}, and write {rep} to {r}.",
        "Ticket: disk cleanup in {b}. 1) Archive {sel} (search the whole tree) into {o} ({fmt_en}, member paths "
        "relative to {b}). 2) {rm_cap}. 3) Record {rep} in {r}.",
        "hey, could you bundle up {sel} from {b} and its subfolders into {o}? Make it {fmt_en}, with paths "
        "relative to {b}. {rm_cap} and put {rep} in {r} {so I can check|for the record}.",
        "archive {sel} in {b} -> {o} ({fmt_en}, paths relative to {b}); {rm}; report {rep} -> {r}",
        "I want {o} to be {fmt_en} holding {sel} found anywhere below {b} (paths relative to it), and {r} to hold "
        "{rep}. {rm_cap}.",
        "Can you get {sel} below {b} into {fmt_en}, {o}, with paths relative to {b}? After that, {rm}; and how "
        "many or which went in? Answer in {r} with {rep}.",
        "Before we hand over {b}, {sel} in it (at any depth) have to go into {fmt_en} at {o}; store them relative "
        "to {b}. Afterwards {rm} and leave {rep} in {r}, so the next person knows what is in the archive.",
        sel=sel,
        b=b_ref,
        o=o_ref,
        r=r_ref,
        fmt_en=fmt_en,
        rep=rep_en,
        rm=rm,
        rm_cap=rm[:1].upper() + rm[1:],
    )

    expr = {
        "ext": f"-name '*.{ext}'",
        "age": f"-mtime +{days}",
        "both": f"-name '*.{ext}' -mtime +{days}",
    }[criterion]
    B, OUT, R = _sh(base, wd), quote(out), _sh(report, wd)
    Oa = quote(out)
    fl = _TAR_FLAG.get(fmt, "")
    ref = [
        w.pick((f"find {B} -type f | sort", f"ls -lR {B}", f"find {B} -type f {expr} -ls", f"tree -D {B}"))
    ]
    if out_dir != wd:
        ref.append(f"mkdir -p {_sh(out_dir, wd)}")
    folded_remove = False
    if fmt == "zip":
        ref.append(
            w.pick(
                (
                    f"cd {B} && find . -type f {expr} | zip -q {Oa} -@",
                    f"cd {B} && zip -q {Oa} $(find . -type f {expr})",
                    f"cd {B} && find . -type f {expr} -exec zip -q {Oa} {{}} +",
                )
            )
        )
    else:
        choices = [
            f"cd {B} && find . -type f {expr} -print0 | tar -c{fl}f {Oa} --null -T -",
            f"cd {B} && tar -c{fl}f {Oa} $(find . -type f {expr})",
            f"find {B} -type f {expr} -printf '%P\\n' | tar -C {B} -c{fl}f {Oa} -T -",
        ]
        if criterion == "ext":
            choices.append(f"cd {B} && shopt -s globstar && tar -c{fl}f {Oa} **/*.{ext}")
        if fl:
            choices.append(
                f"cd {B} && find . -type f {expr} | tar -cf - -T - | {_TAR_FILTER[fl]} > {Oa}",
            )
        if remove:
            choices.append(
                f"cd {B} && find . -type f {expr} -print0 | tar -c{fl}f {Oa} --null -T - --remove-files"
            )
        pick = w.pick(choices)
        folded_remove = "--remove-files" in pick
        ref.append(pick)
    ref.append(f"cd {quote(wd)}")
    list_cmd = {
        "zip": f"unzip -Z1 {OUT}",
        "tar": f"tar -tf {OUT}",
    }.get(fmt, f"tar -t{fl}f {OUT}")
    if kind == "count":
        report_cmd = w.pick((f"{list_cmd} | wc -l > {R}", f"find {B} -type f {expr} | wc -l > {R}"))
    else:
        report_cmd = w.pick(
            (
                f"{list_cmd} > {R}",
                f"{list_cmd} | sort > {R}",
                f"(cd {B} && find . -type f {expr}) > {R}",
                f"find {B} -type f {expr} -printf '%P\\n' > {R}",
            )
        )
    if folded_remove and "find" in report_cmd:  # the originals are gone: only the archive can say
        report_cmd = f"{list_cmd} | wc -l > {R}" if kind == "count" else f"{list_cmd} > {R}"
    ref.append(report_cmd)
    if remove and not folded_remove:
        ref.append(
            w.pick(
                (
                    f"find {B} -type f {expr} -delete",
                    f"find {B} -type f {expr} -exec rm {{}} +",
                    f"{list_cmd} | sed 's|^\\./||' | (cd {B} && xargs rm -f)",
                )
            )
        )
    ref.append(w.pick((f"cat {R}", f"ls -l {OUT} && cat {R}", f"{list_cmd}; cat {R}")))
    check = _python_check(
        _ARCHIVE_CHECK,
        {
            "base": base,
            "out": out,
            "fmt": fmt,
            "mode": _TAR_MODE[fmt],
            "want": want,
            "keep": keep,
            "remove": remove,
            "report": report,
            "kind": kind,
            "from_wd": posixpath.relpath(base, wd) + "/",
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if remove else 3,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == _home(user) else wd,
    )


# ---- 2. compress old files, then write a checksum manifest, then make them read-only -------------------------------
_COMPRESS_CHECK = """
import bz2, gzip, hashlib, lzma, re
folder, suffix = WANT["folder"], WANT["suffix"]
opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[suffix]
for name, digest in WANT["old"].items():
    p = os.path.join(folder, name)
    if os.path.lexists(p):
        fail("the uncompressed original is still there: " + name)
    try:
        with opener(p + suffix, "rb") as fh:
            data = fh.read()
    except Exception as exc:
        fail(f"{name}{suffix} missing or not {suffix} data: {exc}")
    if hashlib.md5(data).hexdigest() != digest:
        fail("decompressed content differs: " + name)
for name, digest in WANT["keep"].items():
    p = os.path.join(folder, name)
    if not os.path.isfile(p) or hashlib.md5(open(p, "rb").read()).hexdigest() != digest:
        fail("a file that had to stay as it was changed: " + name)
    for s in (".gz", ".bz2", ".xz"):
        if os.path.lexists(p + s):
            fail("compressed a file that was not asked for: " + name)
algo, manifest = WANT["algo"], WANT["manifest"]
try:
    lines = [x.rstrip("\\n") for x in open(manifest) if x.strip()]
except OSError:
    fail("no manifest " + manifest)
size = hashlib.new(algo).digest_size * 2
seen = {}
for line in lines:
    m = re.fullmatch(r"([0-9a-fA-F]{%d}) [ *](.+)" % size, line.strip())
    if not m:
        fail("not a checksum line: " + line)
    name = re.sub(r"^(\\./)+", "", m.group(2))
    for p in (folder.rstrip("/") + "/", WANT["from_wd"]):
        if p and name.startswith(p):
            name = name[len(p):]
    seen[name] = m.group(1).lower()
want_names = sorted(n + suffix for n in WANT["old"])
if sorted(seen) != want_names or len(lines) != len(want_names):
    fail(f"manifest names {sorted(seen)}, want {want_names}")
for name, digest in seen.items():
    if hashlib.new(algo, open(os.path.join(folder, name), "rb").read()).hexdigest() != digest:
        fail("wrong checksum for " + name)
if WANT["lock"]:
    for p in [os.path.join(folder, n) for n in want_names] + [manifest]:
        if os.stat(p).st_mode & 0o222:
            fail("still writable: " + p)
"""


@family(
    "compose-compress-manifest",
    CATEGORY,
    "compress the old files of one type, write a checksum manifest of the results, optionally make them read-only",
)
def compress_manifest(w: World) -> Draft:
    user = "root" if w.chance(0.25) else "operator"
    wd, setup = _where(w, user)
    folder = w.pick((wd, f"{wd}/{w.pick(('exports', 'dumps', 'reports', 'out', 'spool', w.dirname()))}"))
    ext = w.pick(("csv", "log", "json", "sql", "txt", "tsv"))
    others = [e for e in ("csv", "log", "json", "sql", "txt", "md", "dat") if e != ext]
    days = w.pick((3, 5, 7, 14, 30))
    tool, suffix = w.pick((("gzip", ".gz"), ("gzip", ".gz"), ("bzip2", ".bz2"), ("xz", ".xz")))
    algo = w.pick(("sha256", "sha256", "md5", "sha1", "sha512"))
    stem = w.pick((w.service(), w.project(), "export", "daily"))
    start = w.date("2024-01-01", 500)
    entries: list[tuple[str, str, bool]] = []  # name, ext, old
    for i in range(w.randint(3, 6)):
        entries.append((f"{stem}-{start.replace(day=1 + i * 4):%Y-%m-%d}.{ext}", ext, True))
    for i in range(w.randint(2, 3)):
        entries.append((f"{stem}-{start.replace(day=2 + i * 4):%Y-%m-%d}.{ext}", ext, False))
    entries.append((w.filename(w.pick(others)), "other", True))  # old, but another type
    if w.chance(0.6):
        entries.append((f"{stem}.{ext}.part", "other", True))  # a near-miss name
    contents = {n: _body(w.lines(w.randint(3, 8), w.pick(("words", "kv", "numbers")))) for n, _, _ in entries}
    old = {n: _md5(contents[n]) for n, e, o in entries if e == ext and o}
    keep = {n: _md5(contents[n]) for n, e, o in entries if not (e == ext and o)}
    files = {f"{folder}/{n}": contents[n] for n, _, _ in entries}
    setup.append(
        f"touch -d '{days + w.randint(2, 30)} days ago' "
        + " ".join(quote(f"{folder}/{n}") for n, e, o in entries if o)
    )
    setup.append(
        f"touch -d '{w.randint(0, max(days - 2, 0))} days ago' "
        + " ".join(quote(f"{folder}/{n}") for n, e, o in entries if not o)
    )
    if not folder.startswith(_home(user) + "/") and folder != wd:
        setup.append(f"chown -R {user}:{user} {quote(folder)}")
    mname = w.pick(
        (f"{algo.upper()}SUMS", f"MANIFEST.{algo}", f"checksums.{algo}", "MANIFEST", f"{stem}.{algo}sum")
    )
    manifest = f"{w.pick((folder, folder, wd))}/{mname}"
    lock = w.chance(0.5)
    w.note(days, ext, tool, algo)
    f_ref, m_ref = _ref(w, folder, wd, user), _ref(w, manifest, wd, user, "file")
    if folder == wd:
        f_ref = w.pick((f_ref, _f(w, "{this|the current} {folder|directory}")))
    comp = _f(
        w,
        "{compress|squeeze} {them|each one} with {t} (so each becomes NAME{s}, no uncompressed copy left)",
        t=tool,
        s=suffix,
    )
    man = _f(
        w,
        "{a|an} {a_up} manifest of the {compressed|new {s}} files at {m}, in {a}sum's format so that `{a}sum -c` "
        "verifies it",
        a=algo,
        a_up=algo.upper(),
        s=suffix,
        m=m_ref,
    )
    lock_en = (
        _f(w, "{make|leave} the compressed files and the manifest read-only for everyone") if lock else ""
    )
    what = _f(w, "the .{e} files in {f} that are older than {d} days", e=ext, f=f_ref, d=days)
    task = w.phrase(
        "{Compress|Pack} {what} with {t}, leaving newer ones and other files alone; then write {man}.{lock}",
        "Ticket: {f} is filling up. Step 1: {comp} for {what}. Step 2: {man}.{lock_step}",
        "could you {t} {what} and then put {man}? {Anything else|Newer files and other types} stay as they "
        "are.{lock}",
        "{t} old .{e} (>{d}d) in {f}, then {a}sum manifest -> {m}{lock_terse}",
        "I need {what} stored compressed ({t}, replacing the originals) and {man}, so we can prove later that "
        "nothing changed.{lock}",
        "How would you archive {what} in place? Do it: {comp}, then record {man}.{lock} Leave the rest untouched.",
        "Our retention rule says .{e} files older than {d} days in {f} are kept only compressed with {t}, each "
        "listed with its {a_up} checksum in a manifest ({man}).{lock} Apply it now.",
        what=what,
        t=tool,
        comp=comp,
        man=man,
        f=f_ref,
        e=ext,
        d=days,
        a=algo,
        a_up=algo.upper(),
        m=m_ref,
        lock=(" " + lock_en[:1].upper() + lock_en[1:] + ".") if lock else "",
        lock_step=(" Step 3: " + lock_en + ".") if lock else "",
        lock_terse=", then chmod both read-only" if lock else "",
    )
    F, M = _sh(folder, wd) if folder != wd else ".", _sh(manifest, wd)
    sel = f"-maxdepth 1 -name '*.{ext}' -mtime +{days}"
    ref = [
        w.pick(
            (f"ls -l --time-style=long-iso {F}", f"find {F} -maxdepth 1 -mtime +{days} -ls", f"ls -lt {F}")
        )
    ]
    ref.append(
        w.pick(
            (
                f"find {F} {sel} -exec {tool} {{}} +",
                f"find {F} {sel} -print0 | xargs -0 {tool}",
                f"{tool} $(find {F} {sel})",
                f'for f in $(find {F} {sel}); do {tool} "$f"; done',
                f"find {F} {sel} -exec {tool} -9 {{}} \\;",
            )
        )
    )
    sums = f"{algo}sum"
    in_folder = posixpath.dirname(manifest) == folder
    names = " ".join(quote(n + suffix) for n in sorted(old))
    if in_folder:
        ref.append(
            w.pick(
                (
                    f"cd {F} && {sums} {names} > {quote(mname)}",
                    f"cd {F} && {sums} *.{ext}{suffix} > {quote(mname)}",
                    f"(cd {F} && find . -maxdepth 1 -name '*.{ext}{suffix}' -exec {sums} {{}} +) > {M}",
                )
            )
        )
    else:
        ref.append(
            w.pick(
                (
                    f"(cd {F} && {sums} *.{ext}{suffix}) > {M}",
                    f"find {F} -maxdepth 1 -name '*.{ext}{suffix}' -exec {sums} {{}} + > {M}",
                    f"{sums} {' '.join(_sh(f'{folder}/{n}{suffix}', wd) for n in sorted(old))} > {M}",
                )
            )
        )
    ref.append(f"cd {quote(wd)}")
    if lock:
        ref.append(
            w.pick(
                (
                    f"chmod a-w {F}/*.{ext}{suffix} {M}",
                    f"chmod 444 {F}/*.{ext}{suffix} {M}",
                    f"find {F} -maxdepth 1 -name '*{suffix}' -exec chmod 0444 {{}} + && chmod 0444 {M}",
                )
            )
        )
    ref.append(
        w.pick(
            (
                f"cd {posixpath.dirname(manifest) if not in_folder else F} && {sums} -c {quote(mname)}",
                f"cat {M}",
                f"ls -l {F} && cat {M}",
            )
        )
    )
    check = _python_check(
        _COMPRESS_CHECK,
        {
            "folder": folder,
            "suffix": suffix,
            "old": old,
            "keep": keep,
            "algo": algo,
            "manifest": manifest,
            "lock": lock,
            "from_wd": posixpath.relpath(folder, wd) + "/" if folder != wd else "",
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if lock else 3,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == _home(user) else wd,
    )


# ---- 3. (extract,) filter CSV rows, then convert them to JSON (then total a column) ---------------------------------
_JSON_CHECK = """
def norm(v):
    s = str(v).strip()
    try:
        return repr(round(float(s), 6))
    except ValueError:
        return s

out = WANT["out"]
try:
    text = open(out).read()
except OSError:
    fail("no output " + out)
try:
    if WANT["form"] == "array":
        data = json.loads(text)
        if not isinstance(data, list):
            fail("not a JSON array")
    else:
        data = [json.loads(x) for x in text.splitlines() if x.strip()]
except ValueError as exc:
    fail(f"not valid JSON: {exc}")
cols = WANT["columns"]
got = []
for obj in data:
    if not isinstance(obj, dict) or sorted(obj) != sorted(cols):
        fail(f"a record with the wrong keys: {obj}")
    got.append(tuple(norm(obj[c]) for c in cols))
want = sorted(tuple(norm(v) for v in r) for r in WANT["rows"])
if sorted(got) != want:
    fail(f"{len(got)} records, want {len(want)} (or different values)")
if WANT["numbers"]:
    for obj in data:
        for c in WANT["numbers"]:
            if isinstance(obj[c], str) or isinstance(obj[c], bool):
                fail(f"{c} is a string, not a number: {obj}")
if WANT["report"]:
    try:
        words = open(WANT["report"]).read().split()
    except OSError:
        fail("no report " + WANT["report"])
    try:
        ok = len(words) == 1 and abs(float(words[0]) - WANT["answer"]) < 0.006
    except ValueError:
        ok = False
    if not ok:
        fail(f"report says {words}, want {WANT['answer']}")
if WANT["extracted"] and not os.path.isfile(WANT["extracted"]):
    fail("the CSV was not extracted to " + WANT["extracted"])
"""

_SHAPES = (
    # table stem, columns (id, two text columns, a number, the status column), the status values
    (
        "orders",
        ("id", "customer", "city", "amount", "status"),
        ("shipped", "pending", "cancelled", "returned"),
    ),
    ("tickets", ("id", "owner", "team", "hours", "state"), ("open", "closed", "blocked", "triage")),
    ("sensors", ("id", "site", "kind", "reading", "health"), ("ok", "degraded", "failed", "offline")),
)


def _row(w: World, shape: str, i: int, statuses: tuple[str, ...]) -> list[str]:
    if shape == "orders":
        return [
            str(i),
            w.pick(WORDS).title(),
            w.pick(("Lisbon", "Oslo", "Lima", "Osaka", "Porto", "Quito")),
            f"{w.randint(5, 900)}.{w.randint(0, 99):02d}",
            w.pick(statuses),
        ]
    if shape == "tickets":
        return [
            str(i),
            w.pick(("alice", "bruno", "chen", "dana", "omar", "priya")),
            w.pick(TEAMS),
            str(w.randint(1, 40)),
            w.pick(statuses),
        ]
    return [
        str(i),
        w.pick(PROJECTS),
        w.pick(("temp", "humidity", "pressure", "flow")),
        f"{w.randint(0, 300)}.{w.randint(0, 9)}",
        w.pick(statuses),
    ]


@family(
    "compose-filter-csv-to-json",
    CATEGORY,
    "filter CSV rows by a status (optionally out of an archive first), write them as JSON, optionally total a column",
)
def filter_csv_to_json(w: World) -> Draft:
    user = "root" if w.chance(0.2) else "operator"
    wd, setup = _where(w, user)
    shape, columns, statuses = w.pick(_SHAPES)
    fcol, numeric = columns[4], columns[3]
    keep_value = w.pick(statuses)
    n = w.randint(10, 22)
    rows = [_row(w, shape, 100 + i, statuses) for i in range(n)]
    for i in w.sample(range(n), 3):  # the wanted value is always there, more than once
        rows[i][4] = keep_value
    near = f"{keep_value}-{w.pick(('partial', 'manual', 'retry'))}"
    rows[w.randint(0, n - 1)][4] = near  # a near-miss status that a substring match would take
    csv_text = _body([",".join(columns)] + [",".join(r) for r in rows])
    wanted = [r for r in rows if r[4] == keep_value]
    chain = w.pick(("convert", "extract", "report"))
    data_dir = f"{wd}/{w.pick(('incoming', 'data', 'import', 'drop'))}"
    csv_name = f"{shape}_{_dated(w)}.csv"
    archive = ""
    files: dict[str, str] = {}
    if chain == "extract":
        afmt = w.pick(("tar.gz", "zip", "tar.bz2"))
        archive = f"{data_dir}/{shape}-export.{afmt}"
        stage = f"/tmp/stage-{w.token(6)}"
        inner = w.pick(("", "export/", f"{shape}/"))
        files[f"{stage}/{inner}{csv_name}"] = csv_text
        files[f"{stage}/{inner}README.txt"] = _body(w.lines(2))
        pack = (
            f"zip -qr {quote(archive)} ." if afmt == "zip" else f"tar -c{_TAR_FLAG[afmt]}f {quote(archive)} ."
        )
        setup.append(f"mkdir -p {quote(data_dir)} && cd {stage} && {pack} && cd / && rm -rf {stage}")
        csv_path = f"{data_dir}/{inner}{csv_name}"  # where it lands when extracted in place
    else:
        csv_path = f"{data_dir}/{csv_name}"
        files[csv_path] = csv_text
        if w.chance(0.5):  # an older export beside it
            files[f"{data_dir}/{shape}_old.csv"] = _body(
                [",".join(columns)] + [",".join(r) for r in rows[:3]]
            )
    setup.append(f"chown -R {user}:{user} {quote(data_dir)}")
    form = w.pick(("array", "lines"))
    typed = w.chance(0.5)
    out = f"{wd}/{w.pick((f'{keep_value}_{shape}', f'{shape}-{keep_value}', keep_value, 'selection'))}.{'json' if form == 'array' else 'jsonl'}"
    report = f"{wd}/{w.pick(('total', 'sum', 'answer', numeric + '_total'))}.txt" if chain == "report" else ""
    answer = round(sum(float(r[3]) for r in wanted), 2)
    w.note(keep_value, numeric, form)

    d_ref = _ref(w, data_dir, wd, user)
    a_ref = _ref(w, archive, wd, user, "file") if archive else ""
    src = _f(w, "the CSV inside {a}", a=a_ref) if archive else _ref(w, csv_path, wd, user, "file")
    rows_en = _f(w, "the rows whose {c} is exactly {v}", c=fcol, v=keep_value)
    form_en = (
        _f(w, "a JSON array of objects") if form == "array" else _f(w, "JSON Lines (one object per line)")
    )
    out_en = _f(
        w,
        "{o} as {form}, keyed by the CSV header{typed}",
        o=_ref(w, out, wd, user, "file"),
        form=form_en,
        typed=_f(w, ", with {i} and {n} as JSON numbers", i=columns[0], n=numeric) if typed else "",
    )
    first = _f(w, "{unpack|extract} {a} into {d}", a=a_ref, d=d_ref) if archive else ""
    rep_en = (
        _f(
            w,
            "write the total {c} of those rows (one number) to {r}",
            c=numeric,
            r=_ref(w, report, wd, user, "file"),
        )
        if report
        else ""
    )
    steps = [
        x
        for x in (
            first,
            _f(w, "keep only {r} of {s}", r=rows_en, s=src),
            _f(w, "write them to {o}", o=out_en),
            rep_en,
        )
        if x
    ]
    task = w.phrase(
        "{first_then}take {rows} from {src} and write them to {out}.{rep_s}",
        "Ticket: {shape} hand-off. {steps}",
        "could you pull {rows} out of {src}? I need them in {out}.{rep_s}{first_note}",
        "{first_terse}filter {src} on {c}={v} -> {out}{rep_terse}",
        "I'd like {out} to hold exactly {rows} of {src}, nothing else from the file{first_note}.{rep_s}",
        "Which {shape} are {v}? Answer as data: {out}, made from {rows} of {src}.{first_note}{rep_s}",
        "The dashboard reads JSON, but the {shape} only exist as {src_plain}. {steps}",
        first_then=(first + ", then ") if first else "",
        rows=rows_en,
        src=src,
        src_plain=src if not archive else _f(w, "an archived CSV ({a})", a=a_ref),
        out=out_en,
        rep_s=(" Then " + rep_en + ".") if rep_en else "",
        rep_terse=f"; total {numeric} -> {report}" if report else "",
        first_note=(" (" + first + " first)") if first else "",
        first_terse=(f"unpack {archive}; ") if archive else "",
        steps=" ".join(f"{i}) {s[:1].upper() + s[1:]}." for i, s in enumerate(steps, 1)),
        shape=shape,
        c=fcol,
        v=keep_value,
    )

    D, C, OUT = _sh(data_dir, wd), _sh(csv_path, wd), _sh(out, wd)
    ref: list[str] = []
    if archive:
        ref.append(
            f"cd {D} && unzip -o {quote(posixpath.basename(archive))}"
            if archive.endswith(".zip")
            else w.pick(
                (
                    f"tar -xf {_sh(archive, wd)} -C {D}",
                    f"cd {D} && tar -xvf {quote(posixpath.basename(archive))}",
                )
            )
        )
        ref.append(f"cd {quote(wd)}")
    ref.append(w.pick((f"head -5 {C}", f"column -s, -t < {C} | head", f"cut -d, -f5 {C} | sort | uniq -c")))
    i0, t1, t2, n3, s4 = columns
    num = (lambda x: x) if typed else (lambda x: f'\\"{x}\\"')
    awk_obj = (
        f'printf "{{\\"{i0}\\": %s, \\"{t1}\\": \\"%s\\", \\"{t2}\\": \\"%s\\", \\"{n3}\\": %s, \\"{s4}\\": \\"%s\\"}}\\n", '
        "$1, $2, $3, $4, $5"
        if typed
        else f'printf "{{\\"{i0}\\": \\"%s\\", \\"{t1}\\": \\"%s\\", \\"{t2}\\": \\"%s\\", \\"{n3}\\": \\"%s\\", \\"{s4}\\": \\"%s\\"}}\\n", '
        "$1, $2, $3, $4, $5"
    )
    del num
    jq_obj = (
        f"{{{i0}: (.[0] | tonumber), {t1}: .[1], {t2}: .[2], {n3}: (.[3] | tonumber), {s4}: .[4]}}"
        if typed
        else f"{{{i0}: .[0], {t1}: .[1], {t2}: .[2], {n3}: .[3], {s4}: .[4]}}"
    )
    py_conv = f'dict(r, {i0}=int(r["{i0}"]), {n3}=float(r["{n3}"]))' if typed else "r"
    approach = w.pick(("awk", "jq", "python", "grep-jq", "jq-only"))
    if approach == "awk":
        conv = f"awk -F, 'NR > 1 && $5 == \"{keep_value}\" {{{awk_obj}}}' {C}"
    elif approach == "grep-jq":
        conv = f"grep ',{keep_value}$' {C} | jq -R -c 'split(\",\") | {jq_obj}'"
    elif approach == "jq":
        conv = f"tail -n +2 {C} | awk -F, '$5 == \"{keep_value}\"' | jq -R -c 'split(\",\") | {jq_obj}'"
    elif approach == "jq-only":
        conv = f'jq -R -c \'split(",") | select(.[4] == "{keep_value}") | {jq_obj}\' {C}'
    else:
        conv = ""
    if approach == "python":
        ref.append(
            "python3 -c 'import csv, json, sys; "
            f'rows = [{py_conv} for r in csv.DictReader(open(sys.argv[1])) if r["{s4}"] == "{keep_value}"]; '
            + (
                'json.dump(rows, open(sys.argv[2], "w"), indent=2)'
                if form == "array"
                else 'open(sys.argv[2], "w").writelines(json.dumps(r) + "\\n" for r in rows)'
            )
            + f"' {C} {OUT}"
        )
    elif form == "array":
        ref.append(f"{conv} | jq -s . > {OUT}")
    else:
        ref.append(f"{conv} > {OUT}")
    if report:
        R = _sh(report, wd)
        ref.append(
            w.pick(
                (
                    f"jq -s 'map(.{n3} | tonumber) | add' {OUT} > {R}"
                    if form == "lines"
                    else f"jq 'map(.{n3} | tonumber) | add' {OUT} > {R}",
                    f"awk -F, '$5 == \"{keep_value}\" {{s += $4}} END {{print s}}' {C} > {R}",
                    f"grep ',{keep_value}$' {C} | cut -d, -f4 | paste -sd+ | bc > {R}",
                )
            )
        )
    ref.append(
        w.pick(
            (
                f"jq . {OUT} | head -30",
                f"cat {OUT}",
                f"jq -s length {OUT}" if form == "lines" else f"jq length {OUT}",
            )
        )
        + (f" && cat {_sh(report, wd)}" if report else "")
    )
    check = _python_check(
        _JSON_CHECK,
        {
            "out": out,
            "form": form,
            "columns": list(columns),
            "rows": wanted,
            "numbers": [i0, n3] if typed else [],
            "report": report,
            "answer": answer,
            "extracted": csv_path if archive else "",
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if chain == "convert" else 4,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == _home(user) else wd,
    )


# ---- 4. (create a user,) create their folder with owner and mode, then register it ---------------------------------
_FOLDER_CHECK = """
import grp, pwd, stat
user, group, folder = WANT["user"], WANT["group"], WANT["folder"]
try:
    pw = pwd.getpwnam(user)
except KeyError:
    fail("no user " + user)
if WANT["member"]:
    g = grp.getgrnam(group)
    if pw.pw_gid != g.gr_gid and user not in g.gr_mem:
        fail(f"{user} is not in the group {group}")
try:
    st = os.stat(folder)
except OSError:
    fail("no folder " + folder)
if not stat.S_ISDIR(st.st_mode):
    fail(folder + " is not a directory")
if st.st_uid != pw.pw_uid:
    fail(f"{folder} is owned by uid {st.st_uid}")
if st.st_gid != grp.getgrnam(group).gr_gid:
    fail(f"{folder} has gid {st.st_gid}, want the group {group}")
mode = stat.S_IMODE(st.st_mode)
if mode != int(WANT["mode"], 8):
    fail(f"{folder} has mode {mode:o}, want {WANT['mode']}")
try:
    lines = [x.rstrip() for x in open(WANT["registry"]) if x.strip()]
except OSError:
    fail("no registry " + WANT["registry"])
if lines[: len(WANT["before"])] != WANT["before"]:
    fail("the registry's earlier lines changed")
new = [" ".join(x.split()) for x in lines[len(WANT["before"]):]]
if new != [WANT["line"]]:
    fail(f"registry gained {new}, want exactly [{WANT['line']!r}]")
"""


@family(
    "compose-user-folder-register",
    CATEGORY,
    "(create an account,) make its folder with a given owner, group and mode, then append it to a registry file",
)
def user_folder_register(w: World) -> Draft:
    wd, setup = _where(w, "root")
    user = w.username()
    group = w.team()
    create_user = w.chance(0.5)
    others = [w.username() for _ in range(w.randint(1, 3))]
    setup.append(f"groupadd {group}")
    for o in others:
        setup.append(f"useradd -M -N -g {group} {o}")
    member = create_user or w.chance(0.3)
    if not create_user:
        setup.append(
            f"useradd -m -N {'-g ' + group if member else ''} -s /bin/bash {user}".replace("  ", " ")
        )
    root = w.pick(
        (
            f"/srv/{w.pick(('share', 'projects', 'homes', 'drop'))}",
            f"/data/{group}",
            "/home/shared",
            f"/var/lib/{w.project()}",
        )
    )
    folder = f"{root}/{user}"
    mode = w.pick(("700", "750", "770", "775", "755", "711"))  # no setgid: the sandbox drops CAP_FSETID
    layout = w.pick(("colon", "csv", "space", "tab"))
    reg_dir = w.pick(("/etc/" + w.project(), root, wd if wd != "/root" else "/root"))
    reg_name = w.pick(("folders.list", "REGISTRY", "provisioned.txt", "owners.txt", "homes.index"))
    registry = f"{reg_dir}/{reg_name}"
    sep = {"colon": ":", "csv": ",", "space": " ", "tab": "\t"}[layout]
    fields_en = {
        "colon": "user:path:mode",
        "csv": "user,path,mode",
        "space": "user path mode (separated by spaces)",
        "tab": "user, path and mode separated by spaces or a tab",
    }[layout]
    before = []
    for o in others:
        before.append(sep.join((o, f"{root}/{o}", w.pick(("700", "750", "770")))))
        setup.append(f"mkdir -p {quote(root)}/{o} && chown {o}:{group} {quote(root)}/{o}")
    files = {registry: _body(before)}
    # the check collapses runs of whitespace: a tab layout may be written with spaces
    line = (
        " ".join(sep.join((user, folder, mode)).split())
        if layout in ("space", "tab")
        else sep.join((user, folder, mode))
    )
    before_cmp = [x.rstrip() for x in before]
    w.note(user, group, mode, folder)
    mode_en = w.pick(
        (
            mode,
            f"{mode} ({_MODE_WORDS.get(mode, 'as given')})",
        )
    )
    user_en = (
        _f(w, "create the account {u} (primary or extra group {g})", u=user, g=group) if create_user else ""
    )
    folder_en = _f(
        w,
        "{create|make} {f}, owned by {u} and the group {g}, mode {m}",
        f=folder,
        u=user,
        g=group,
        m=mode_en,
    )
    reg_en = _f(
        w,
        "{append|add} a line for it to {r} in the form {fmt}",
        r=_ref(w, registry, wd, "root", "file"),
        fmt=fields_en,
    )
    steps = [x for x in (user_en, folder_en, reg_en) if x]
    task = w.phrase(
        "{steps_then}.",
        "Ticket: onboarding {u}. {steps_numbered}",
        "hey, {u} {needs|starts today and needs} a folder: {steps_and}. Thanks!",
        "{terse}",
        "By the end, {u} should {exist and |}own {f} (group {g}, mode {m}) and {r} should list it as {fmt} after "
        "the existing lines.",
        "Could you set up {f} for {u}? {steps_numbered} Do not touch the other entries in {r}.",
        "Every member of {g} gets a private folder under {root}, and {r} records each one ({fmt}). Do that for "
        "{u}: {steps_and}.",
        steps_then=", then ".join(steps),
        steps_numbered=" ".join(f"{i}) {s[:1].upper() + s[1:]}." for i, s in enumerate(steps, 1)),
        steps_and="; ".join(steps),
        terse=(f"useradd {user} (group {group}); " if create_user else "")
        + f"mkdir {folder} {user}:{group} {mode}; register in {registry} as {fields_en}",
        u=user,
        f=folder,
        g=group,
        m=mode,
        r=_ref(w, registry, wd, "root", "file"),
        fmt=fields_en,
        root=root,
    )
    ref = [
        w.pick(
            (
                f"getent group {group}",
                f"id {user}" if not create_user else f"getent passwd {user} || echo new",
                f"cat {quote(registry)}",
                f"ls -l {quote(root)}",
            )
        )
    ]
    if create_user:
        ref.append(
            w.pick(
                (
                    f"useradd -m -g {group} -s /bin/bash {user}",
                    f"useradd -m -G {group} {user}",
                    f"adduser --disabled-password --gecos '' --ingroup {group} {user}",
                    f"useradd -M -N -g {group} {user}",
                )
            )
        )
    Fq = quote(folder)
    ref += w.pick(
        (
            [f"install -d -o {user} -g {group} -m {mode} {Fq}"],
            [f"mkdir -p {Fq}", f"chown {user}:{group} {Fq}", f"chmod {mode} {Fq}"],
            [
                f"mkdir -p {quote(root)} && mkdir -m {mode} {Fq}",
                f"chown {user}:{group} {Fq} && chmod {mode} {Fq}",
            ],
            [f"mkdir -p {Fq} && chgrp {group} {Fq} && chown {user} {Fq}", f"chmod {_symbolic(mode)} {Fq}"],
        )
    )
    raw = sep.join((user, folder, mode))
    Rq = quote(registry)
    ref.append(
        w.pick(
            (
                f"echo {quote(raw)} >> {Rq}",
                f"printf '%s\\n' {quote(raw)} >> {Rq}",
                f"echo {quote(raw)} | tee -a {Rq}",
                f"cat >> {Rq} <<'EOF'\n{raw}\nEOF",
            )
        )
    )
    ref.append(w.pick((f"stat -c '%U %G %a %n' {Fq} && tail -n 2 {Rq}", f"ls -ld {Fq}; tail -n 3 {Rq}")))
    check = _python_check(
        _FOLDER_CHECK,
        {
            "user": user,
            "group": group,
            "member": member,
            "folder": folder,
            "mode": mode,
            "registry": registry,
            "before": before_cmp,
            "line": line,
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if create_user else 3,
        setup=setup,
        files=files,
        user="root",
        workdir=None if wd == "/root" else wd,
    )


_MODE_WORDS = {
    "700": "only the owner may enter",
    "750": "the group may read, others nothing",
    "770": "owner and group may write, others nothing",
    "775": "owner and group may write, everyone may read",
    "755": "everyone may read",
    "711": "others may only pass through",
}


def _symbolic(mode: str) -> str:
    """``chmod`` symbolic form of an octal mode (``750`` -> ``u=rwx,g=rx,o=``)."""
    letters = {"7": "rwx", "5": "rx", "1": "x", "0": "", "6": "rw", "4": "r"}
    u, g, o = (letters[b] for b in mode[-3:])
    return f"u={u},g={g},o={o}"


# ---- 5. back up a JSON config, change one value, then record the change as a patch -------------------------------
_EDIT_CHECK = """
import subprocess, tempfile
cfg, backup = WANT["config"], WANT["backup"]
try:
    if open(backup).read() != WANT["original"]:
        fail("the backup does not hold the original config")
except OSError:
    fail("no backup " + backup)
try:
    now = json.load(open(cfg))
except (OSError, ValueError) as exc:
    fail(f"the config is missing or not JSON: {exc}")
if now != WANT["expected"]:
    fail("the config is not the original with exactly the one change")
if WANT["patch"]:
    if not os.path.isfile(WANT["patch"]):
        fail("no patch " + WANT["patch"])
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        r = subprocess.run(["patch", "-s", "-o", out, backup, WANT["patch"]], capture_output=True, text=True, cwd=tmp)
        if r.returncode != 0 or open(out).read() != open(cfg).read():
            fail("applying the patch to the backup does not give the new config: " + r.stdout + r.stderr)
"""

_CONFIG_KEYS = (
    # section, key, old values, new values (as JSON)
    ("server", "port", (8080, 8000, 3000), (8443, 9090, 8081)),
    ("server", "workers", (2, 4, 8), (6, 12, 16)),
    ("logging", "level", ("info", "warning"), ("debug", "error")),
    ("cache", "ttl_seconds", (60, 300, 600), (120, 900, 1800)),
    ("features", "beta_ui", (False,), (True,)),
    ("database", "pool_size", (5, 10), (20, 25, 40)),
    ("upload", "max_mb", (10, 25), (50, 100, 250)),
)


@family(
    "compose-backup-edit-patch",
    CATEGORY,
    "back up a JSON config, change one nested value (keeping the rest), optionally write the change as a patch",
)
def backup_edit_patch(w: World) -> Draft:
    user = "root" if w.chance(0.25) else "operator"
    wd, setup = _where(w, user)
    chosen = w.sample(_CONFIG_KEYS, 4)
    section, key, olds, news = chosen[0]
    old, new = w.pick(olds), w.pick(news)
    config: dict[str, object] = {
        "name": w.service(),
        "version": f"{w.randint(1, 4)}.{w.randint(0, 20)}.{w.randint(0, 9)}",
    }
    for sec, k, ov, _ in chosen[1:]:
        config.setdefault(sec, {})[k] = w.pick(ov)  # type: ignore[index]
        # a near miss: another section holds the same key with the same old value
    config.setdefault(section, {})[key] = old  # type: ignore[index]
    if w.chance(0.5):
        decoy = w.pick(tuple(s for s in ("admin", "metrics", "internal") if s not in config))
        config[decoy] = {key: old, "enabled": w.chance(0.5)}
    original = json.dumps(config, indent=2) + "\n"
    expected = json.loads(original)
    expected[section][key] = new
    cfg = f"{w.pick((wd, f'{wd}/config', f'{wd}/etc'))}/{w.pick(('app.json', 'settings.json', 'config.json', w.service() + '.json'))}"
    files = {cfg: original}
    if w.chance(0.5):  # a near-miss file beside it
        files[cfg.replace(".json", ".example.json")] = original
    if not cfg.startswith(_home(user) + "/"):
        setup.append(f"chown -R {user}:{user} {quote(posixpath.dirname(cfg))}")
    backup = w.pick(
        (
            cfg + ".bak",
            cfg + ".orig",
            cfg.replace(".json", f".{_dated(w)}.json"),
            f"{wd}/backups/{posixpath.basename(cfg)}",
        )
    )
    with_patch = w.chance(0.5)
    patch = (
        f"{wd}/{w.pick(('change', section + '-' + key, 'config', 'fix'))}.{w.pick(('diff', 'patch'))}"
        if with_patch
        else ""
    )
    w.note(section, key, json.dumps(old), json.dumps(new))
    c_ref, b_ref = _ref(w, cfg, wd, user, "file"), _ref(w, backup, wd, user, "file")
    p_ref = _ref(w, patch, wd, user, "file") if patch else ""
    setting = f"{section}.{key}"
    new_s = json.dumps(new)
    patch_en = (
        _f(
            w,
            "{save|write} the change as a unified diff {from the backup to the new file|of backup vs. new} in {p}",
            p=p_ref,
        )
        if with_patch
        else ""
    )
    task = w.phrase(
        "{Back up|Copy} {c} to {b} first, then set {k} to {v} in it (nothing else may change).{p_s}",
        "Ticket: {k} in {c} must become {v}. Keep the current file as {b} before editing.{p_s} Other settings stay.",
        "could you change {k} to {v} in {c}? Make a backup at {b} before you touch it{p_and}, please.",
        "{c}: backup -> {b}, then {k}={v}{p_terse}",
        "I want {c} to have {k} = {v}, with the old version kept byte-for-byte in {b}{p_and}. Everything else in "
        "the config stays as it is.",
        "What would it take to switch {k} to {v} in {c} safely? Do it: copy the original to {b}, edit the value "
        "(leave the {other|other keys} alone){p_and}.",
        "We are rolling out {k} = {v}. The change procedure is: keep an exact copy of {c} as {b}, edit only that "
        "one value (the file must stay valid JSON){p_and}.",
        c=c_ref,
        b=b_ref,
        k=setting,
        v=new_s,
        other=_f(w, "{decoy|other sections}", decoy="other sections"),
        p_s=(" Then " + patch_en + ".") if patch else "",
        p_and=("; then " + patch_en) if patch else "",
        p_terse=f", then diff -u -> {patch}" if patch else "",
    )
    C, B = _sh(cfg, wd), _sh(backup, wd)
    ref = [w.pick((f"cat {C}", f"jq . {C}", f"jq .{section} {C}", f"grep -n {key} {C}"))]
    if backup.startswith(f"{wd}/backups/"):
        ref.append("mkdir -p backups")
    ref.append(
        w.pick(
            (f"cp {C} {B}", f"cp -p {C} {B}", f"cp -a {C} {B}", f"cat {C} > {B}", f"install -m 644 {C} {B}")
        )
    )
    needle = f'"{key}": {json.dumps(old)}'
    sed_ok = original.count(needle) == 1
    edits = [
        f"jq '.{section}.{key} = {new_s}' {B} > {C}",
        f"tmp=$(jq '.{section}.{key} = {new_s}' {C}) && printf '%s\\n' \"$tmp\" > {C}",
        f"jq --argjson v {quote(new_s)} '.{section}.{key} = $v' {C} > /tmp/new.json && cat /tmp/new.json > {C}",
        "python3 -c 'import json, sys; p = sys.argv[1]; d = json.load(open(p)); "
        f'd["{section}"]["{key}"] = json.loads(sys.argv[2]); '
        f'open(p, "w").write(json.dumps(d, indent=2) + "\\n")\' {C} {quote(new_s)}',
    ]
    if sed_ok:
        edits.append(f'sed -i \'s/"{key}": {json.dumps(old)}/"{key}": {new_s}/\' {C}')
    ref.append(w.pick(edits))
    if patch:
        P = _sh(patch, wd)
        ref.append(
            w.pick(
                (
                    f"diff -u {B} {C} > {P}",
                    f"diff -u {B} {C} > {P} || true",
                    f"git diff --no-index {B} {C} > {P}",
                    f"diff -c {B} {C} > {P}",
                )
            )
        )
    ref.append(
        w.pick(
            (f"jq .{section}.{key} {C}", f"diff {B} {C}", f"cat {_sh(patch, wd)}" if patch else f"jq . {C}")
        )
    )
    check = _python_check(
        _EDIT_CHECK,
        {"config": cfg, "backup": backup, "original": original, "expected": expected, "patch": patch},
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if patch else 3,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == _home(user) else wd,
    )


# ---- 6. bump a version in a file, commit it (then tag the commit) --------------------------------------------------
_GIT_ENV = (
    "env = dict(os.environ, GIT_OPTIONAL_LOCKS='0', GIT_CONFIG_COUNT='1', GIT_CONFIG_KEY_0='safe.directory', "
    "GIT_CONFIG_VALUE_0='*')\n"
)
_RELEASE_CHECK = (
    """
import subprocess, tomllib
"""
    + _GIT_ENV
    + """
def git(*args):
    r = subprocess.run(["git", "-C", WANT["repo"], *args], capture_output=True, text=True, env=env)
    return r.stdout.strip() if r.returncode == 0 else None

base = open(WANT["base_file"]).read().strip()
head = git("rev-parse", "-q", "--verify", "refs/heads/" + WANT["branch"])
if head is None:
    fail("no branch " + WANT["branch"])
if head == base:
    fail("nothing was committed on " + WANT["branch"])
if git("rev-parse", "-q", "--verify", head + "^") != base:
    fail("the new commit does not sit directly on the old tip")
changed = git("diff", "--name-only", base, head)
if changed != WANT["file"]:
    fail(f"the commit changes {changed!r}, want only {WANT['file']}")
r = subprocess.run(["git", "-C", WANT["repo"], "show", head + ":" + WANT["file"]], capture_output=True, text=True,
                   env=env)
kind, text = WANT["kind"], r.stdout
try:
    if kind == "json":
        ok = json.loads(text) == WANT["expected"]
    elif kind == "toml":
        ok = tomllib.loads(text) == WANT["expected"]
    else:
        ok = text.strip() == WANT["expected"]
except ValueError as exc:
    fail(f"the committed {WANT['file']} does not parse: {exc}")
if not ok:
    fail("the committed " + WANT["file"] + " is not the old one with the new version")
if WANT["message"] and git("log", "-1", "--format=%s", head) != WANT["message"]:
    fail("commit message is " + repr(git("log", "-1", "--format=%s", head)))
if WANT["tag"]:
    if git("rev-parse", "-q", "--verify", "refs/tags/" + WANT["tag"] + "^{commit}") != head:
        fail("tag " + WANT["tag"] + " missing or not on the bump commit")
if git("rev-parse", "-q", "--verify", "refs/tags/" + WANT["old_tag"] + "^{commit}") not in git("rev-list", base).split():
    fail("the earlier tag " + WANT["old_tag"] + " moved or went")
"""
)

_DEP_NAMES = (
    "requests",
    "click",
    "rich",
    "httpx",
    "pydantic",
    "attrs",
    "lodash",
    "express",
    "chalk",
    "yargs",
)


def _version_file(w: World, kind: str, name: str, version: str, dep_version: str) -> tuple[str, object]:
    """The text of a version file and what the check compares (parsed JSON/TOML, or the bare version)."""
    dep = w.pick(_DEP_NAMES)
    if kind == "json":
        data = {
            "name": name,
            "version": version,
            "description": " ".join(w.lines(1)).capitalize(),
            "main": "index.js",
            "scripts": {"test": "node test.js"},
            "dependencies": {dep: "^" + dep_version},
        }
        return json.dumps(data, indent=2) + "\n", data
    if kind == "toml":
        text = (
            f'[project]\nname = "{name}"\nversion = "{version}"\nrequires-python = ">=3.10"\n'
            f'dependencies = ["{dep}>={dep_version}"]\n\n[tool.{name.replace("-", "_")}]\nlevel = "info"\n'
        )
        return text, text
    return version + "\n", version


def _sed_version(version: str) -> str:
    """A version for a basic sed regex (dots literal)."""
    return version.replace(".", "\\.")


@family(
    "compose-bump-commit-tag",
    CATEGORY,
    "bump the version in VERSION, package.json or pyproject.toml, commit exactly that, optionally tag the commit",
)
def bump_commit_tag(w: World) -> Draft:
    user: SessionUser = "operator"  # root has no git identity in the sandbox
    wd, setup = _where(w, user)
    name = w.pick((w.project(), w.service(), f"{w.project()}-{w.pick(('api', 'cli', 'lib', 'web'))}"))
    repo = wd if (wd != _home(user) and w.chance(0.5)) else f"{wd}/{name}"
    kind = w.pick(("plain", "json", "toml"))
    vfile = {
        "plain": w.pick(("VERSION", "VERSION", "version.txt")),
        "json": "package.json",
        "toml": "pyproject.toml",
    }[kind]
    major, minor, patch = w.randint(0, 3), w.randint(0, 12), w.randint(0, 9)
    old = f"{major}.{minor}.{patch}"
    bump = w.pick(("patch", "minor", "major"))
    new = {
        "patch": f"{major}.{minor}.{patch + 1}",
        "minor": f"{major}.{minor + 1}.0",
        "major": f"{major + 1}.0.0",
    }[bump]
    old_text, _ = _version_file(
        w, kind, name, old, old
    )  # the dependency pin shares the old version: a near miss
    new_text = old_text.replace(f'"version": "{old}"', f'"version": "{new}"').replace(
        f'\nversion = "{old}"', f'\nversion = "{new}"'
    )
    if kind == "plain":
        new_text = new + "\n"
    expected: object = new
    if kind == "json":
        expected = json.loads(new_text)
    elif kind == "toml":
        expected = tomllib.loads(new_text)
    branch = w.pick(("main", "main", "master", "trunk"))
    message = w.pick((f"Bump version to {new}", f"Release {new}", f"chore: release v{new}", f"Version {new}"))
    tag = w.pick((f"v{new}", f"v{new}", new, f"release-{new}")) if w.chance(0.55) else ""
    old_tag = f"v{old}" if tag.startswith("v") or not tag else (old if tag == new else f"release-{old}")
    w.note(old, new, message, tag, branch, vfile)
    extra = {
        "README.md": f"# {name}\n\nCurrent release: {old}\n",
        "CHANGELOG.md": f"# Changelog\n\n## {new}\n\n- {' '.join(w.lines(1))}\n\n## {old}\n\n- first cut\n",
        f"src/{w.word()}.py": _body(w.lines(3, "kv")),
    }
    base_file = f"/root/.base-{w.token(6)}"
    script = f"/root/.mkrepo-{w.token(6)}.sh"
    stamp = f"{w.date('2024-01-01', 500):%Y-%m-%d %H:%M:%S} +0000"
    ident = (
        f"GIT_AUTHOR_NAME=Operator GIT_AUTHOR_EMAIL=operator@sandbox.invalid GIT_AUTHOR_DATE={quote(stamp)} "
        f"GIT_COMMITTER_NAME=Operator GIT_COMMITTER_EMAIL=operator@sandbox.invalid GIT_COMMITTER_DATE={quote(stamp)}"
    )
    lines = [
        "set -e",
        "export HOME=/root GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory "
        "GIT_CONFIG_VALUE_0='*'",
        f"mkdir -p {quote(repo)} && cd {quote(repo)}",
        f"git init -q -b {branch}",
    ]
    files = {f"{repo}/{rel}": text for rel, text in extra.items()}
    files[f"{repo}/{vfile}"] = old_text
    lines.append(f"git add -A && {ident} git commit -q -m 'Initial import'")
    lines.append(f"{ident} git tag {quote(old_tag)}")
    lines.append(f"printf %s {quote(_body(w.lines(2)))} >> README.md")
    lines.append(f"git add -A && {ident} git commit -q -m {quote('Update README for ' + old)}")
    scratch = w.pick(("notes.local", "scratch.txt", "TODO.mine", ".env.local"))
    lines.append(f"printf %s {quote(_body(w.lines(2)))} > {scratch}")  # untracked: must not be committed
    lines.append(f"git rev-parse HEAD > {base_file}")
    lines.append(f"chown -R {user}:{user} {quote(repo)}")
    files[script] = "\n".join(lines) + "\n"
    setup.append(f"bash {script} && rm -f {script}")
    r_ref = _ref(w, repo, wd, user)
    if repo == wd:
        r_ref = w.pick((r_ref, _f(w, "the repository {you are in|in the current directory}")))
    bump_en = _f(
        w,
        "{bump|raise|change} the version in {f} from {o} to {n}",
        f=vfile,
        o=old,
        n=new,
    )
    commit_en = _f(
        w, "commit {only that file|just that change} on {b} with the message '{m}'", b=branch, m=message
    )
    tag_en = _f(w, "tag {that|the new} commit {t}", t=tag) if tag else ""
    steps = [x for x in (bump_en, commit_en, tag_en) if x]
    task = w.phrase(
        "In {r}, {steps_then}.",
        "Ticket: cut release {n} of {name}. {steps_numbered} Nothing else in the working tree goes into the commit.",
        "can you do the {n} release in {r}? {steps_and_cap}. Leave {scratch} out of it.",
        "{r}: {f} {o} -> {n}; git commit -m '{m}'{tag_terse}",
        "When you are done, the tip of {b} in {r} should be one new commit, '{m}', that changes only {f} (version {n} "
        "instead of {o}){tag_goal}.",
        "Could you release {name} {n}? The repo is {r}. {steps_numbered}",
        "We version {name} by hand: the number lives in {f}, and every release is one commit{tag_why}. The current "
        "version is {o}; make it {n}: {steps_and}. Other files, including untracked ones, stay out of the commit.",
        r=r_ref,
        steps_then=", then ".join(steps),
        steps_numbered=" ".join(f"{i}) {s[:1].upper() + s[1:]}." for i, s in enumerate(steps, 1)),
        steps_and="; ".join(steps),
        steps_and_cap="; ".join(steps)[:1].upper() + "; ".join(steps)[1:],
        n=new,
        o=old,
        f=vfile,
        m=message,
        b=branch,
        name=name,
        scratch=scratch,
        tag_terse=f"; git tag {tag}" if tag else "",
        tag_goal=_f(w, ", and the tag {t} should point at it", t=tag) if tag else "",
        tag_why=" " + _f(w, "with a tag ({t} this time)", t=tag) if tag else "",
    )
    ref = [f"cd {quote(repo)}"] if repo != wd else []
    ref.append(
        w.pick(("git status --short", "git log --oneline --decorate -3", f"cat {vfile}", "git tag -l"))
    )
    if kind == "plain":
        edits = [
            f"echo {new} > {vfile}",
            f"printf '%s\\n' {new} > {vfile}",
            f"sed -i 's/^{_sed_version(old)}$/{new}/' {vfile}",
        ]
    elif kind == "json":
        edits = [
            f"jq '.version = \"{new}\"' {vfile} > /tmp/{vfile}.new && cat /tmp/{vfile}.new > {vfile}",
            f'sed -i \'s/"version": "{_sed_version(old)}"/"version": "{new}"/\' {vfile}',
            'python3 -c \'import json, sys; p = sys.argv[1]; d = json.load(open(p)); d["version"] = sys.argv[2]; '
            f'open(p, "w").write(json.dumps(d, indent=2) + "\\n")\' {vfile} {new}',
        ]
    else:
        edits = [
            f'sed -i \'s/^version = "{_sed_version(old)}"/version = "{new}"/\' {vfile}',
            f"sed -i '/^\\[project\\]/,/^\\[/ s/^version = .*/version = \"{new}\"/' {vfile}",
            "python3 -c 'import re, sys; p = sys.argv[1]; t = open(p).read(); "
            f'open(p, "w").write(re.sub(r"(?m)^version = .*$", "version = \\"{new}\\"", t, count=1))\' {vfile}',
        ]
    ref.append(w.pick(edits))
    ref.append(
        w.pick(
            (
                f"git add {vfile} && git commit -m {quote(message)}",
                f"git commit -am {quote(message)}",
                f"git commit -m {quote(message)} -- {vfile}",
                f"git add -u && git commit -q -m {quote(message)}",
            )
        )
    )
    if tag:
        ref.append(
            w.pick(
                (
                    f"git tag {tag}",
                    f"git tag -a {tag} -m {quote('Release ' + new)}",
                    f"git tag {tag} HEAD",
                    f"git tag -a {tag} -m {quote(message)} HEAD",
                )
            )
        )
    ref.append(
        w.pick(
            ("git log --oneline --decorate -3", "git show --stat HEAD", "git status --short && git tag -l")
        )
    )
    check = _python_check(
        _RELEASE_CHECK,
        {
            "repo": repo,
            "base_file": base_file,
            "branch": branch,
            "file": vfile,
            "kind": kind,
            "expected": expected,
            "message": message,
            "tag": tag,
            "old_tag": old_tag,
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if tag else 3,
        setup=setup,
        files=files,
        user=user,
        workdir=None if wd == _home(user) else wd,
    )


# ---- 7. copy a tree without one kind of file, then make the copy read-only and/or write its manifest -------------
_MIRROR_CHECK = """
import hashlib, re, stat
src, dst = WANT["src"], WANT["dst"]
for rel, digest in WANT["source"].items():
    p = os.path.join(src, rel)
    if not os.path.isfile(p) or hashlib.md5(open(p, "rb").read()).hexdigest() != digest:
        fail("the source changed: " + rel)
if not os.path.isdir(dst):
    fail("no copy at " + dst)
got = {}
for top, dirs, names in os.walk(dst):
    for n in names:
        p = os.path.join(top, n)
        got[os.path.relpath(p, dst)] = hashlib.md5(open(p, "rb").read()).hexdigest()
want = WANT["copy"]
if sorted(got) != sorted(want):
    extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
    fail(f"the copy holds {len(got)} files; extra {extra[:5]}, missing {missing[:5]}")
for rel, digest in want.items():
    if got[rel] != digest:
        fail("content differs in the copy: " + rel)
if WANT["lock"]:
    for rel in want:
        if os.stat(os.path.join(dst, rel)).st_mode & 0o222:
            fail("still writable in the copy: " + rel)
if WANT["manifest"]:
    algo = WANT["algo"]
    size = hashlib.new(algo).digest_size * 2
    try:
        lines = [x.rstrip("\\n") for x in open(WANT["manifest"]) if x.strip()]
    except OSError:
        fail("no manifest " + WANT["manifest"])
    seen = {}
    for line in lines:
        m = re.fullmatch(r"([0-9a-fA-F]{%d}) [ *](.+)" % size, line.strip())
        if not m:
            fail("not a checksum line: " + line)
        name = m.group(2)
        for p in WANT["prefixes"]:
            if name.startswith(p):
                name = name[len(p):]
                break
        name = re.sub(r"^(\\./)+", "", name)
        seen[name] = m.group(1).lower()
    if sorted(seen) != sorted(want) or len(lines) != len(want):
        fail(f"the manifest names {sorted(seen)[:6]}..., want the {len(want)} copied files")
    for rel, digest in seen.items():
        if hashlib.new(algo, open(os.path.join(dst, rel), "rb").read()).hexdigest() != digest:
            fail("wrong checksum for " + rel)
"""

_EXCLUDES = (
    # the pattern, how a person names it, the extension of the files it drops, a near-miss name it must keep
    ("*.tmp", "temporary files (*.tmp)", "tmp", "tmp_notes.txt"),
    ("*.log", "log files (*.log)", "log", "logging.conf"),
    ("*.bak", "backup files (*.bak)", "bak", "bak.README"),
    ("*.pyc", "compiled Python files (*.pyc)", "pyc", "pyc_cache.md"),
    ("*.swp", "editor swap files (*.swp)", "swp", "swp.txt"),
)


@family(
    "compose-copy-readonly-manifest",
    CATEGORY,
    "copy a folder tree leaving out one pattern, then make the copy read-only and/or write a checksum manifest of it",
)
def copy_readonly_manifest(w: World) -> Draft:
    user = "root" if w.chance(0.25) else "operator"
    wd, setup = _where(w, user)
    src = f"{wd}/{w.pick(('site', 'release', 'project', 'config', 'docs', w.dirname()))}"
    pattern, pattern_en, drop_ext, near = w.pick(_EXCLUDES)
    keep_exts = [e for e in ("txt", "md", "conf", "json", "html", "py", "csv", "yaml") if e != drop_ext]
    subs = ["", "", w.word(), w.word(), f"{w.word()}/{w.pick(('v1', 'assets', 'lib', 'static'))}"]
    contents: dict[str, str] = {}
    for _ in range(w.randint(5, 9)):
        contents[posixpath.join(w.pick(subs), w.filename(w.pick(keep_exts)))] = _body(
            w.lines(w.randint(1, 4))
        )
    for _ in range(w.randint(2, 4)):
        contents[posixpath.join(w.pick(subs), w.filename(drop_ext))] = _body(w.lines(w.randint(1, 3)))
    contents[posixpath.join(w.pick(subs), near)] = _body(w.lines(2))
    copy = {rel: _md5(t) for rel, t in contents.items() if not rel.endswith("." + drop_ext)}
    files = {f"{src}/{rel}": t for rel, t in contents.items()}
    if not src.startswith(_home(user) + "/"):
        setup.append(f"chown -R {user}:{user} {quote(src)}")
    dst_parent = w.pick((wd, wd, f"{wd}/{w.pick(('mirror', 'snapshots', 'frozen', 'handoff'))}"))
    dst = f"{dst_parent}/{posixpath.basename(src)}-{w.pick(('copy', 'snapshot', _dated(w), 'frozen'))}"
    plan = w.pick(("lock", "manifest", "both", "both"))
    lock, with_manifest = plan in ("lock", "both"), plan in ("manifest", "both")
    algo = w.pick(("sha256", "sha256", "md5", "sha1"))
    manifest = (
        f"{wd}/{w.pick((posixpath.basename(dst) + '.' + algo, algo.upper() + 'SUMS', 'MANIFEST.' + algo))}"
        if with_manifest
        else ""
    )
    w.note(pattern, algo, plan)
    s_ref, d_ref = _ref(w, src, wd, user), _ref(w, dst, wd, user)
    m_ref = _ref(w, manifest, wd, user, "file") if manifest else ""
    copy_en = _f(
        w,
        "{copy|mirror} {s} to {d} {with everything except|leaving out|skipping} the {p}",
        s=s_ref,
        d=d_ref,
        p=pattern_en,
    )
    lock_en = _f(w, "make every file in the copy read-only{| for everyone}") if lock else ""
    man_en = (
        _f(
            w,
            "write {a|an} {a_up} manifest of the copy to {m} ({a}sum format, paths relative to the copy, so "
            "`cd {d} && {a}sum -c {m}` verifies it)",
            a=algo,
            a_up=algo.upper(),
            m=manifest,
            d=dst,
        )
        if manifest
        else ""
    )
    steps = [x for x in (copy_en, man_en, lock_en) if x]
    task = w.phrase(
        "{steps_then}. {s} itself stays as it is.",
        "Ticket: freeze a copy of {s}. {steps_numbered}",
        "could you {copy|clone} {s} over to {d}? Leave out the {p}. After that, {rest}.",
        "cp {s} -> {d} minus {pat}{lock_terse}{man_terse}",
        "I need {d} to be an exact copy of {s} minus the {p}{lock_goal}{man_goal}. Do not change the source.",
        "How would you hand over {s} as a frozen snapshot? Do it: {steps_and}.",
        "We ship {s} to the {auditors|other team} as a snapshot: no {p} in it{lock_goal}{man_goal}. Put it at {d}; "
        "{steps_and}.",
        s=s_ref,
        d=d_ref,
        p=pattern_en,
        pat=pattern,
        steps_then=", then ".join(steps),
        steps_numbered=" ".join(f"{i}) {x[:1].upper() + x[1:]}." for i, x in enumerate(steps, 1)),
        steps_and="; ".join(steps),
        rest=" and ".join(steps[1:]),
        lock_terse="; chmod a-w the copy" if lock else "",
        man_terse=f"; {algo}sum manifest -> {manifest}" if manifest else "",
        lock_goal=_f(w, ", with {no file in it writable|every file read-only}") if lock else "",
        man_goal=_f(w, ", and {m} listing the {a} checksum of every copied file", m=m_ref, a=algo)
        if manifest
        else "",
    )
    S, D = _sh(src, wd), _sh(dst, wd)
    ref = [w.pick((f"find {S} -type f | sort", f"tree {S}", f"ls -laR {S}", f"find {S} -name '{pattern}'"))]
    if dst_parent != wd:
        ref.append(f"mkdir -p {_sh(dst_parent, wd)}")
    Da = quote(dst)
    ref.append(
        w.pick(
            (
                f"rsync -a --exclude='{pattern}' {S}/ {D}/",
                f"rsync -av --exclude '{pattern}' {S}/ {D}",
                f"cp -a {S} {D} && find {D} -name '{pattern}' -delete",
                f"cp -r {S} {D} && find {D} -type f -name '{pattern}' -exec rm {{}} +",
                f"mkdir -p {D} && tar -C {S} --exclude='{pattern}' -cf - . | tar -C {D} -xf -",
                f"mkdir -p {D} && (cd {S} && find . -type f ! -name '{pattern}' | cpio -pdm {Da})",
            )
        )
    )
    sums = f"{algo}sum"
    M = _sh(manifest, wd) if manifest else ""
    Ma = quote(manifest)
    man_cmds = [
        f"(cd {D} && find . -type f -exec {sums} {{}} +) > {M}",
        f"cd {D} && find . -type f -print0 | sort -z | xargs -0 {sums} > {Ma}",
        f"find {D} -type f | sort | xargs {sums} > {M}",
        f"cd {D} && {sums} $(find . -type f) > {Ma}",
    ]
    lock_cmds = [
        f"chmod -R a-w {D}",
        f"find {D} -type f -exec chmod 444 {{}} +",
        f"find {D} -type f -exec chmod a-w {{}} +",
        f"chmod -R ugo-w {D}",
    ]
    body: list[str] = []
    if manifest:
        body.append(w.pick(man_cmds))
    if lock:
        body.append(w.pick(lock_cmds))
    if manifest and lock and w.chance(0.3):
        body.reverse()  # the order does not matter: the manifest lives outside the copy
    for line in body:
        ref.append(line)
        if line.startswith("cd "):
            ref.append(f"cd {quote(wd)}")
    ref.append(
        w.pick(
            (
                f"cd {D} && {sums} -c {Ma}" if manifest else f"ls -lR {D}",
                f"find {D} -type f -ls",
                f"ls -lR {D}",
            )
        )
    )
    prefixes = [dst + "/", posixpath.relpath(dst, wd) + "/", "./" + posixpath.relpath(dst, wd) + "/"]
    check = _python_check(
        _MIRROR_CHECK,
        {
            "src": src,
            "dst": dst,
            "source": {rel: _md5(t) for rel, t in contents.items()},
            "copy": copy,
            "lock": lock,
            "manifest": manifest,
            "algo": algo,
            "prefixes": prefixes,
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if plan == "both" else 3,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == _home(user) else wd,
    )


# ---- 8. find files that carry a marker, move them into quarantine keeping their paths, report (and lock it) -------
_QUARANTINE_CHECK = """
import hashlib, re, stat
base, q = WANT["base"], WANT["quarantine"]
for rel, digest in WANT["moved"].items():
    if os.path.lexists(os.path.join(base, rel)):
        fail("still in place: " + rel)
    p = os.path.join(q, rel)
    if not os.path.isfile(p):
        fail("not in quarantine at its relative path: " + rel)
    if hashlib.md5(open(p, "rb").read()).hexdigest() != digest:
        fail("content changed in quarantine: " + rel)
for rel, digest in WANT["stay"].items():
    p = os.path.join(base, rel)
    if not os.path.isfile(p) or hashlib.md5(open(p, "rb").read()).hexdigest() != digest:
        fail("a file without the marker moved or changed: " + rel)
inside = sorted(os.path.relpath(os.path.join(t, n), q) for t, _, ns in os.walk(q) for n in ns)
if inside != sorted(WANT["moved"]):
    fail(f"quarantine holds {inside}")
try:
    lines = [x.strip() for x in open(WANT["report"]) if x.strip()]
except OSError:
    fail("no report " + WANT["report"])
if WANT["kind"] == "count":
    if len(lines) != 1 or not re.fullmatch(r"\\d+", lines[0].split()[0]) or int(lines[0].split()[0]) != len(WANT["moved"]):
        fail(f"report says {lines}, want {len(WANT['moved'])}")
else:
    names = []
    for x in lines:
        for p in WANT["prefixes"]:
            if x.startswith(p):
                x = x[len(p):]
                break
        names.append(re.sub(r"^(\\./)+", "", x))
    if sorted(names) != sorted(WANT["moved"]):
        fail(f"report lists {lines}")
if WANT["lock"] and os.stat(q).st_mode & 0o077:
    fail(f"{q} has mode {stat.S_IMODE(os.stat(q).st_mode):o}: group or others may still get in")
"""

_MARKERS = ("DO-NOT-SHIP", "INTERNAL-ONLY", "LEGAL-HOLD", "PII-RAW", "SECRET-DRAFT", "EMBARGOED")


@family(
    "compose-quarantine-marker",
    CATEGORY,
    "move every file that contains a marker into a quarantine folder keeping relative paths, report, maybe lock it",
)
def quarantine_marker(w: World) -> Draft:
    user = "root" if w.chance(0.25) else "operator"
    wd, setup = _where(w, user)
    base = f"{wd}/{w.pick(('content', 'shared', 'outbox', 'publish', 'docs', w.dirname()))}"
    marker = w.pick(_MARKERS)
    near = w.pick(
        [
            n
            for n in (marker.lower(), marker.replace("-", "_"), marker.replace("-", " "), marker.title())
            if n != marker
        ]
    )
    subs = ["", w.word(), w.word(), f"{w.word()}/{w.pick(('drafts', '2024', 'old', 'inbox'))}"]
    contents: dict[str, str] = {}
    marked: list[str] = []
    for i in range(w.randint(8, 12)):
        rel = posixpath.join(w.pick(subs), w.filename(w.pick(("txt", "md", "csv", "html", "json", "conf"))))
        lines = w.lines(w.randint(2, 5))
        if i < 2 or w.chance(0.3):
            lines.insert(w.randint(0, len(lines)), f"{w.pick(('# ', '', 'status: ', '<!-- '))}{marker}")
            marked.append(rel)
        elif i < 4:
            lines.insert(w.randint(0, len(lines)), near)  # a near miss: another case or separator
        contents[rel] = _body(lines)
    moved = {rel: _md5(contents[rel]) for rel in marked}
    stay = {rel: _md5(t) for rel, t in contents.items() if rel not in moved}
    files = {f"{base}/{rel}": t for rel, t in contents.items()}
    if not base.startswith(_home(user) + "/"):
        setup.append(f"chown -R {user}:{user} {quote(base)}")
    q = f"{wd}/{w.pick(('quarantine', 'quarantine', '.quarantine', 'held', 'isolated'))}"
    kind = w.pick(("count", "list", "list"))
    report = f"{wd}/{w.pick(('quarantined', 'moved', 'report', 'held'))}.{w.pick(('txt', 'lst', 'log'))}"
    lock = w.chance(0.5)
    w.note(marker, kind)
    b_ref, q_ref, r_ref = _ref(w, base, wd, user), _ref(w, q, wd, user), _ref(w, report, wd, user, "file")
    rep_en = {
        "count": _f(
            w,
            "{the number|how many} of files {you moved|that went into quarantine}, {just the number|a bare number}",
        ),
        "list": _f(w, "the moved files' paths relative to {b}, one per line", b=b_ref),
    }[kind]
    lock_en = _f(w, "{shut|lock} {q} so only its owner can enter it (mode 700)", q=q_ref) if lock else ""
    steps = [
        _f(
            w,
            "move every file under {b} that contains the exact text {m} into {q}, keeping each one's path relative to "
            "{b} (so {b}/x/y.txt ends up as {q}/x/y.txt)",
            b=b_ref,
            m=marker,
            q=q_ref,
        ),
        _f(w, "write {rep} to {r}", rep=rep_en, r=r_ref),
        lock_en,
    ]
    steps = [x for x in steps if x]
    task = w.phrase(
        "{steps_then}.",
        "Ticket: files marked {m} leaked into {b}. {steps_numbered} Case matters: {near} is not the marker.",
        "hey, anything in {b} with {m} in it has to go into {q} (same subfolders as in {b}). Then {rest}, please.",
        "grep -r {m} {b} -> mv into {q} keeping paths; {kind_terse} -> {r}{lock_terse}",
        "By the end, no file under {b} should contain {m}: they should all sit in {q} at the same relative paths, "
        "and {r} should hold {rep}.{lock_s}",
        "Which files under {b} carry the {m} marker? Quarantine them: {steps_and}.",
        "Our publishing job copies {b} out every night, so nothing marked {m} (exactly that text; {near} is "
        "something else) may stay there. {steps_numbered}",
        b=b_ref,
        q=q_ref,
        r=r_ref,
        m=marker,
        near=near,
        rep=rep_en,
        steps_then=", then ".join(steps),
        steps_numbered=" ".join(f"{i}) {x[:1].upper() + x[1:]}." for i, x in enumerate(steps, 1)),
        steps_and="; ".join(steps),
        rest=" and ".join(steps[1:]),
        kind_terse="count" if kind == "count" else "list",
        lock_terse="; chmod 700 the quarantine" if lock else "",
        lock_s=" " + lock_en[:1].upper() + lock_en[1:] + "." if lock else "",
    )
    B, Q, R = _sh(base, wd), _sh(q, wd), _sh(report, wd)
    Qa, M = quote(q), quote(marker)
    ref = [
        w.pick(
            (
                f"grep -rl {M} {B}",
                f"grep -rn {M} {B}",
                f"grep -rlF {M} {B} | sort",
                f"find {B} -type f | sort",
            )
        )
    ]
    list_cmd = ""
    if kind == "list" and w.chance(0.4):  # record first, from the source
        list_cmd = w.pick((f"(cd {B} && grep -rl {M} .) > {R}", f"grep -rlF {M} {B} > {R}"))
        ref.append(list_cmd)
    elif kind == "count" and w.chance(0.4):
        list_cmd = f"grep -rl {M} {B} | wc -l > {R}"
        ref.append(list_cmd)
    move = w.pick(
        (
            [
                f'cd {B} && grep -rl {M} . | while read -r f; do mkdir -p {Qa}/"$(dirname "$f")" && '
                f'mv "$f" {Qa}/"$f"; done'
            ],
            [
                f"cd {B} && grep -rlZ {M} . | xargs -0 -I{{}} install -D -m 644 {{}} {Qa}/{{}}",
                f"grep -rlZ {M} . | xargs -0 rm",
            ],
            [f"mkdir -p {Q}", f"cd {B} && grep -rl {M} . | cpio -pdm {Qa} && grep -rl {M} . | xargs rm -f"],
            [
                f"mkdir -p {Q}",
                f"cd {B} && grep -rl {M} . | rsync -a --files-from=- --remove-source-files . {Qa}/",
            ],
            [
                f"mkdir -p {Q}",
                f"cd {B} && grep -rlF {M} . | tar -cf - -T - --remove-files | tar -C {Qa} -xf -",
            ],
            [
                "python3 -c 'import os, shutil, sys; b, q, m = sys.argv[1:]; "
                "[(os.makedirs(os.path.dirname(os.path.join(q, os.path.relpath(os.path.join(t, n), b))), exist_ok=True), "
                "shutil.move(os.path.join(t, n), os.path.join(q, os.path.relpath(os.path.join(t, n), b)))) "
                "for t, _, ns in list(os.walk(b)) for n in ns if m in open(os.path.join(t, n)).read()]' "
                f"{B} {Q} {M}"
            ],
        )
    )
    ref += move
    if any(x.startswith("cd ") for x in move):
        ref.append(f"cd {quote(wd)}")
    if not list_cmd:
        ref.append(
            {
                "count": w.pick(
                    (f"find {Q} -type f | wc -l > {R}", f"find {Q} -type f -printf . | wc -c > {R}")
                ),
                "list": w.pick(
                    (f"find {Q} -type f -printf '%P\\n' > {R}", f"(cd {Q} && find . -type f) > {R}")
                ),
            }[kind]
        )
    if lock:
        ref.append(
            w.pick((f"chmod 700 {Q}", f"chmod go= {Q}", f"chmod -R go-rwx {Q}", f"chmod u=rwx,go= {Q}"))
        )
    ref.append(w.pick((f"cat {R}", f"ls -laR {Q}; cat {R}", f"grep -rc {M} {B} | grep -v ':0$'; cat {R}")))
    check = _python_check(
        _QUARANTINE_CHECK,
        {
            "base": base,
            "quarantine": q,
            "marker": marker,
            "moved": moved,
            "stay": stay,
            "report": report,
            "kind": kind,
            "lock": lock,
            "prefixes": [
                base + "/",
                posixpath.relpath(base, wd) + "/",
                "./" + posixpath.relpath(base, wd) + "/",
            ],
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if lock else 3,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == _home(user) else wd,
    )


# ---- 9. split a mixed log by service, (compress each part,) then list the parts in an index ----------------------
_SPLIT_CHECK = """
import bz2, gzip, lzma, re
out, suffix = WANT["out"], WANT["suffix"]
opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, "": open}[suffix]
if open(WANT["log"]).read() != WANT["log_text"]:
    fail("the original log changed")
names = sorted(n for n in os.listdir(out) if os.path.join(out, n) != WANT["index"]) if os.path.isdir(out) else []
want = sorted(s + ".log" + suffix for s in WANT["parts"])
if names != want:
    fail(f"{out} holds {names}, want {want}")
for svc, lines in WANT["parts"].items():
    try:
        with opener(os.path.join(out, svc + ".log" + suffix), "rt") as fh:
            got = fh.read().splitlines()
    except Exception as exc:
        fail(f"{svc}.log{suffix} unreadable: {exc}")
    if got != lines:
        fail(f"{svc}.log{suffix} holds {len(got)} lines, want its {len(lines)} (in the original order)")
try:
    rows = [x.split() for x in open(WANT["index"]) if x.strip()]
except OSError:
    fail("no index " + WANT["index"])
seen = {}
for row in rows:
    name = row[0]
    for p in WANT["prefixes"]:
        if name.startswith(p):
            name = name[len(p):]
            break
    name = re.sub(r"^(\\./)+", "", name)
    if os.path.join(out, name) == WANT["index"] or name == os.path.basename(WANT["index"]):
        continue  # an index that lists itself is forgiven
    seen[name] = row[1:]
if sorted(seen) != want:
    fail(f"the index lists {sorted(seen)}, want {want}")
if WANT["counts"]:
    for svc, lines in WANT["parts"].items():
        cell = seen[svc + ".log" + suffix]
        if not cell or cell[0] != str(len(lines)):
            fail(f"the index gives {cell} lines for {svc}, want {len(lines)}")
"""

_SPLIT_MSGS = (
    "request served in {n} ms",
    "cache miss for key user:{n}",
    "retrying upstream (attempt {n})",
    "queue depth {n}",
    "job {n} finished",
    "slow query took {n} ms",
    "token refreshed for session {n}",
    "connection pool at {n}%",
)


@family(
    "compose-split-log-index",
    CATEGORY,
    "split a mixed log into one file per service (by the service field), optionally compress each, index them",
)
def split_log_index(w: World) -> Draft:
    user = "root" if w.chance(0.25) else "operator"
    wd, setup = _where(w, user)
    services = [w.service() for _ in range(w.randint(3, 5))]
    fmt = w.pick(("field2", "bracket"))
    t = w.date("2024-01-01", 500)
    lines: list[str] = []
    parts: dict[str, list[str]] = {s: [] for s in services}
    for i in range(w.randint(14, 24)):
        svc = services[i % len(services)] if i < len(services) else w.pick(services)
        t = t + timedelta(seconds=w.randint(1, 600))
        msg = w.pick(_SPLIT_MSGS).format(n=w.randint(2, 999))
        if w.chance(0.2):  # a near miss: the message names another service
            msg = (
                f"calling {w.pick([s for s in services if s != svc])} {w.pick(('failed', 'ok', 'timed out'))}"
            )
        level = w.pick(("INFO", "INFO", "WARN", "ERROR", "DEBUG"))
        line = (
            f"{t:%Y-%m-%dT%H:%M:%S} {svc} {level} {msg}"
            if fmt == "field2"
            else f"{t:%Y-%m-%d %H:%M:%S} [{svc}] {level} {msg}"
        )
        lines.append(line)
        parts[svc].append(line)
    log = f"{wd}/{w.pick(('logs', 'var', 'incoming'))}/{w.pick(('combined', 'all', 'app', 'platform'))}.log"
    log_text = _body(lines)
    files = {log: log_text}
    if not log.startswith(_home(user) + "/"):
        setup.append(f"chown -R {user}:{user} {quote(posixpath.dirname(log))}")
    out = f"{wd}/{w.pick(('by-service', 'split', 'per-service', 'services'))}"
    tool, suffix = w.pick(
        (("gzip", ".gz"), ("gzip", ".gz"), ("bzip2", ".bz2"), ("xz", ".xz"), ("", ""), ("", ""))
    )
    index = w.pick((f"{out}/index.txt", f"{out}/INDEX", f"{wd}/{posixpath.basename(out)}.index"))
    counts = w.chance(0.4)
    w.note(fmt, tool, counts)
    l_ref, o_ref, i_ref = (
        _ref(w, log, wd, user, "file"),
        _ref(w, out, wd, user),
        _ref(w, index, wd, user, "file"),
    )
    field_en = {
        "field2": _f(w, "the service is the second {field|column} of each line"),
        "bracket": _f(w, "the service is the name in [brackets] after the timestamp"),
    }[fmt]
    split_en = _f(
        w,
        "split {l} into one file per service in {o}, named SERVICE.log, each keeping its lines in the original order",
        l=l_ref,
        o=o_ref,
    )
    comp_en = _f(w, "compress each of them with {t} (no uncompressed copy left)", t=tool) if tool else ""
    idx_en = _f(
        w,
        "list the {final|resulting} file names in {i}, one per line{c}",
        i=i_ref,
        c=_f(w, ", each followed by a space and its number of lines") if counts else "",
    )
    steps = [x for x in (split_en, comp_en, idx_en) if x]
    task = w.phrase(
        "{steps_then}. ({field})",
        "Ticket: {l} mixes {k} services. {steps_numbered} Note: {field}; a message may mention another service.",
        "could you break {l} up by service into {o}? {field_cap}. {rest_cap}, and leave {l} as it is.",
        "split {l} by service -> {o}/SERVICE.log{comp_terse}; index -> {i}{count_terse}",
        "I want {o} to hold one SERVICE.log{sfx} per service found in {l} ({field}), and {i} to list them{c_goal}.",
        "How many services write to {l}? Give each its own file: {steps_and}. ({field})",
        "Each team should only see its own service's lines, but {l} has everyone's. {field_cap}. {steps_numbered}",
        l=l_ref,
        o=o_ref,
        i=i_ref,
        k=len(services),
        field=field_en,
        field_cap=field_en[:1].upper() + field_en[1:],
        steps_then=", then ".join(steps),
        steps_numbered=" ".join(f"{i}) {x[:1].upper() + x[1:]}." for i, x in enumerate(steps, 1)),
        steps_and="; ".join(steps),
        rest_cap=" and ".join(steps[1:])[:1].upper() + " and ".join(steps[1:])[1:],
        comp_terse=f", {tool} each" if tool else "",
        count_terse=" (name + line count)" if counts else "",
        sfx=suffix,
        c_goal=" " + _f(w, "with {their|the} line counts") if counts else "",
    )
    LG, OD, IX = _sh(log, wd), _sh(out, wd), _sh(index, wd)
    Oa = quote(out)
    key = "$2" if fmt == "field2" else "substr($3, 2, length($3) - 2)"
    ref = [
        w.pick(
            (
                f"head {LG}",
                f"awk '{{print $2}}' {LG} | sort | uniq -c"
                if fmt == "field2"
                else f"grep -o '\\[[a-z-]*\\]' {LG} | sort | uniq -c",
                f"wc -l {LG}",
            )
        ),
        f"mkdir -p {OD}",
    ]
    if fmt == "field2":
        grep_one = f'grep "^[^ ]* $s " {LG} > {OD}/$s.log'
        names = f"$(awk '{{print $2}}' {LG} | sort -u)"
    else:
        grep_one = f'grep "^[^[]*\\[$s\\] " {LG} > {OD}/$s.log'
        names = f"$(grep -o '^[^[]*\\[[^]]*\\]' {LG} | sed 's/.*\\[//; s/\\]//' | sort -u)"
    ref.append(
        w.pick(
            (
                f'awk \'{{print > ("{posixpath.relpath(out, wd)}/" {key} ".log")}}\' {LG}',
                f'awk -v d={Oa} \'{{f = d "/" {key} ".log"; print >> f}}\' {LG}',
                f"for s in {names}; do {grep_one}; done",
                "python3 -c 'import sys, re; d = sys.argv[2]; "
                '[open(d + "/" + re.split(r"[ \\[\\]]+", l)[2 if "[" in l else 1] + ".log", "a").write(l) '
                f"for l in open(sys.argv[1])]' {LG} {OD}",
            )
        )
    )
    if tool:
        ref.append(
            w.pick(
                (
                    f"{tool} {OD}/*.log",
                    f'for f in {OD}/*.log; do {tool} "$f"; done',
                    f"find {OD} -name '*.log' -exec {tool} {{}} +",
                )
            )
        )
    glob = f"*.log{suffix}"
    if counts:
        cat = {"": "cat", ".gz": "zcat", ".bz2": "bzcat", ".xz": "xzcat"}[suffix]
        idx = w.pick(
            (
                f'cd {OD} && for f in {glob}; do echo "$f $({cat} "$f" | wc -l)"; done > {quote(index)}',
                f'for f in {OD}/{glob}; do printf \'%s %s\\n\' "$(basename "$f")" "$({cat} "$f" | wc -l)"; done > {IX}',
            )
        )
    else:
        idx = w.pick(
            (
                f"cd {OD} && ls {glob} > {quote(index)}",
                f"ls {OD} | grep '\\.log{_sed_version(suffix)}$' > {IX}",
                f"find {OD} -name '{glob}' -printf '%f\\n' | sort > {IX}",
                f"(cd {OD} && printf '%s\\n' {glob}) > {IX}",
            )
        )
    ref.append(idx)
    if idx.startswith("cd "):
        ref.append(f"cd {quote(wd)}")
    ref.append(w.pick((f"cat {IX}", f"ls -l {OD} && cat {IX}")))
    check = _python_check(
        _SPLIT_CHECK,
        {
            "log": log,
            "log_text": log_text,
            "out": out,
            "suffix": suffix,
            "parts": parts,
            "index": index,
            "counts": counts,
            "prefixes": [out + "/", posixpath.relpath(out, wd) + "/"],
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if tool else 3,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == _home(user) else wd,
    )


# ---- 10. create a group with members, its shared folder (owner, mode), then a drop-in file for one member ---------
_SHARED_CHECK = """
import grp, pwd, stat
try:
    g = grp.getgrnam(WANT["group"])
except KeyError:
    fail("no group " + WANT["group"])
for u in WANT["members"]:
    if u not in g.gr_mem and pwd.getpwnam(u).pw_gid != g.gr_gid:
        fail(f"{u} is not in {WANT['group']}")
for u in WANT["outsiders"]:
    if u in g.gr_mem:
        fail(f"{u} must not be in {WANT['group']}")
def owned(path, user, mode, kind):
    try:
        st = os.stat(path)
    except OSError:
        fail("missing: " + path)
    if (kind == "dir") != stat.S_ISDIR(st.st_mode):
        fail(f"{path} is not a {kind}")
    if st.st_uid != pwd.getpwnam(user).pw_uid or st.st_gid != g.gr_gid:
        fail(f"{path} belongs to uid {st.st_uid} gid {st.st_gid}, want {user}:{WANT['group']}")
    if stat.S_IMODE(st.st_mode) != int(mode, 8):
        fail(f"{path} has mode {stat.S_IMODE(st.st_mode):o}, want {mode}")
owned(WANT["folder"], WANT["owner"], WANT["mode"], "dir")
if WANT["file"]:
    owned(WANT["file"], WANT["member"], WANT["file_mode"], "file")
    if [x.rstrip() for x in open(WANT["file"]) if x.strip()] != [WANT["text"]]:
        fail("the drop-in file does not hold exactly the line " + repr(WANT["text"]))
"""


@family(
    "compose-group-shared-folder",
    CATEGORY,
    "create a group with members and its shared folder (owner, group, mode), optionally a member's drop-in file",
)
def group_shared_folder(w: World) -> Draft:
    wd, setup = _where(w, "root")
    team = w.team()
    group = w.pick((team, f"{team}-share", f"{team}rw", f"proj-{w.project()}"))
    members = [w.username() for _ in range(w.randint(2, 3))]
    outsider = w.username()
    for u in [*members, outsider]:
        setup.append(f"useradd -M -s /bin/bash {u}")
    if w.chance(0.5):  # a near-miss group name that already exists
        setup.append(f"groupadd {group}-old && usermod -aG {group}-old {outsider}")
    folder = w.pick(
        (f"/srv/{w.pick(('shared', 'teams', 'collab'))}/{team}", f"/data/{team}", f"/home/shared/{group}")
    )
    lead = w.pick(members)
    owner = w.pick(("root", lead))
    mode = w.pick(("770", "770", "775", "750"))
    drop = w.chance(0.5)
    member = w.pick(members)
    fname = w.pick((f"{member}.txt", f"README-{member}", f"{member}.welcome", f"hello-{member}.md"))
    dfile = f"{folder}/{fname}" if drop else ""
    fmode = w.pick(("640", "660", "644")) if drop else ""
    text = f"{w.pick(('welcome', 'owner', 'contact', 'on-call'))}: {member}" if drop else ""
    w.note(group, mode, owner, fmode, text)
    users_en = ", ".join(members[:-1]) + " and " + members[-1]
    group_en = _f(w, "{create|add} the group {g} with {us} as members", g=group, us=users_en)
    folder_en = _f(
        w,
        "{make|create} {f} owned by {o} and the group {g}, mode {m}",
        f=folder,
        o=owner,
        g=group,
        m=w.pick((mode, f"{mode} ({_MODE_WORDS.get(mode, 'as given')})")),
    )
    drop_en = (
        _f(
            w,
            "put a file {fn} in it for {u}, owned by {u} and {g}, mode {fm}, holding the single line '{t}'",
            fn=fname,
            u=member,
            g=group,
            fm=fmode,
            t=text,
        )
        if drop
        else ""
    )
    steps = [x for x in (group_en, folder_en, drop_en) if x]
    task = w.phrase(
        "{steps_then}. {x} stays out of the group.",
        "Ticket: new shared space for {team}. {steps_numbered}",
        "hey, {team} needs a shared folder: {steps_and}. Thanks!",
        "groupadd {g} ({us}); mkdir {f} {o}:{g} {m}{drop_terse}",
        "By the end, {us} should be in {g} ({x} not), {f} should belong to {o}:{g} with mode {m}{drop_goal}.",
        "Could you set up group storage for {team}? {steps_numbered} Do not add {x}.",
        "People in {team} keep mailing files around; they need one place to share them. {steps_and_cap}. Only "
        "the people named go into the group.",
        steps_then=", then ".join(steps),
        steps_numbered=" ".join(f"{i}) {x[:1].upper() + x[1:]}." for i, x in enumerate(steps, 1)),
        steps_and="; ".join(steps),
        steps_and_cap="; ".join(steps)[:1].upper() + "; ".join(steps)[1:],
        team=team,
        g=group,
        us=users_en,
        x=outsider,
        f=folder,
        o=owner,
        m=mode,
        drop_terse=f"; {fname} for {member} ({member}:{group} {fmode}, '{text}')" if drop else "",
        drop_goal=_f(
            w, ", and {d} should belong to {u} ({fm}) and say '{t}'", d=dfile, u=member, fm=fmode, t=text
        )
        if drop
        else "",
    )
    ref = [
        w.pick(
            (f"getent group {group} || echo none", f"id {members[0]}", f"ls -ld {posixpath.dirname(folder)}")
        )
    ]
    csv = ",".join(members)
    ref.append(
        w.pick(
            (
                f"groupadd {group} && " + " && ".join(f"usermod -aG {group} {u}" for u in members),
                f'groupadd {group} && for u in {" ".join(members)}; do usermod -a -G {group} "$u"; done',
                f"groupadd {group} && gpasswd -M {csv} {group}",
                f"groupadd {group} && " + " && ".join(f"gpasswd -a {u} {group}" for u in members),
            )
        )
    )
    F = quote(folder)
    ref += w.pick(
        (
            [f"install -d -o {owner} -g {group} -m {mode} {F}"],
            [f"mkdir -p {F}", f"chown {owner}:{group} {F}", f"chmod {mode} {F}"],
            [
                f"mkdir -p {quote(posixpath.dirname(folder))} && mkdir -m {mode} {F}",
                f"chown {owner}:{group} {F}",
            ],
            [f"mkdir -p {F} && chgrp {group} {F} && chown {owner} {F}", f"chmod {_symbolic(mode)} {F}"],
        )
    )
    if drop:
        D = quote(dfile)
        ref += w.pick(
            (
                [f"echo {quote(text)} > {D}", f"chown {member}:{group} {D} && chmod {fmode} {D}"],
                [f"echo {quote(text)} | install -o {member} -g {group} -m {fmode} /dev/stdin {D}"],
                [
                    f"touch {D} && chown {member}:{group} {D} && chmod {fmode} {D}",
                    f"printf '%s\\n' {quote(text)} >> {D}",
                ],
                [
                    f"printf '%s\\n' {quote(text)} > {D}",
                    f"chown {member} {D}",
                    f"chgrp {group} {D}",
                    f"chmod {_symbolic(fmode)} {D}",
                ],
            )
        )
    ref.append(w.pick((f"ls -la {F}", f"getent group {group}; stat -c '%U:%G %a %n' {F} {F}/*")))
    check = _python_check(
        _SHARED_CHECK,
        {
            "group": group,
            "members": members,
            "outsiders": [outsider],
            "folder": folder,
            "owner": owner,
            "mode": mode,
            "file": dfile,
            "member": member,
            "file_mode": fmode,
            "text": text,
        },
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=4 if drop else 3,
        setup=setup,
        files={},
        user="root",
        workdir=None if wd == "/root" else wd,
    )
