"""Compositions: tasks that chain two or three skills (select then archive then report; compress then write a
checksum manifest then lock it; filter then load into SQLite; back up then edit then record the diff; create a
user's folder then set its owner and mode then register it), each step's result checked.

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
