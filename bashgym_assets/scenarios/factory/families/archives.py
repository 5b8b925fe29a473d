"""Archives: creating, listing, extracting, compressing, converting and verifying tar, zip, cpio and compressed files.

Archives are built by the setup (as root, from a staging folder under /tmp that is then removed), so the operator
finds only the archive. Checks read archives back with the standard tools (``tar -tf``, ``unzip -Z1``, ``gzip -dc``,
``file -b``) and compare with the contents drawn here.
"""

from __future__ import annotations

import posixpath
import re
from datetime import timedelta

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, World, md5_text, py_check, quote, workplace
from bashgym_assets.scenarios.factory.world import shell_paths as _shell_paths
from bashgym_assets.scenarios.factory.world import text_body as _body


def _spin(w: World, template: str, capitalize: bool = True, **values: object) -> str:
    return w.spin(template, capitalize=capitalize, **values)


def _phrase(w: World, *templates: str, **values: object) -> str:
    return w.phrase(*templates, **values)


# ---- helpers --------------------------------------------------------------------------------------------------------
_SUBDIRS = (
    "conf",
    "src",
    "docs",
    "data",
    "scripts",
    "static",
    "lib",
    "assets",
    "templates",
    "reports",
    "bin",
)
_MEMBER_EXTS = ("ini", "conf", "py", "md", "csv", "json", "yaml", "sh", "txt", "html", "sql")
# format -> (tar compression flag, what `file -b` starts with, how a person names it)
_TAR_FORMATS = {
    "tar.gz": ("z", "gzip compressed", "a gzip-compressed tar archive"),
    "tgz": ("z", "gzip compressed", "a gzipped tarball"),
    "tar.bz2": ("j", "bzip2 compressed", "a bzip2-compressed tar archive"),
    "tar.xz": ("J", "XZ compressed", "an xz-compressed tar archive"),
    "tar": ("", "POSIX tar archive", "a plain (uncompressed) tar archive"),
}
# single-file compressors: extension -> (tool, `file -b` prefix, decompress-to-stdout command)
_COMPRESSORS = {
    "gz": ("gzip", "gzip compressed", "gzip -dc"),
    "bz2": ("bzip2", "bzip2 compressed", "bzip2 -dc"),
    "xz": ("xz", "XZ compressed", "xz -dc"),
}


def _tree(w: World, top: str, n: int | None = None) -> dict[str, str]:
    """A small project tree ``{top/sub/name.ext: content}``: unique base names, one to three subfolders."""
    subs = [w.unique(lambda: w.pick(_SUBDIRS)) for _ in range(w.randint(1, 3))]
    files: dict[str, str] = {}
    for i in range(n or w.randint(4, 8)):
        sub = subs[i % len(subs)] if i < len(subs) else w.pick(["", *subs])
        name = w.filename(w.pick(_MEMBER_EXTS))
        files[f"{top}/{sub + '/' if sub else ''}{name}"] = _body(
            w.lines(w.randint(2, 8), w.pick(("words", "kv")))
        )
    return files


def _stage(w: World) -> str:
    return f"/tmp/stage_{w.token(6)}"


def _pack(fmt: str, archive: str, stage: str, top: str, files_only: bool = False) -> str:
    """The setup command that builds ``archive`` (format ``fmt``) of ``stage/top`` and hands it to the operator.
    ``files_only``: members are the files alone, no directory entries (so a listing is exactly the files)."""
    a, s = quote(archive), quote(stage)
    if fmt in _TAR_FORMATS:
        flag = _TAR_FORMATS[fmt][0]
        make = (
            f"find {top} -type f | sort | tar -c{flag}f {a} -T -"
            if files_only
            else f"tar -c{flag}f {a} {top}"
        )
    elif fmt == "zip":
        make = f"zip -q{'D' if files_only else ''}r {a} {top}"
    else:  # cpio (newc)
        make = f"find {top}{' -type f' if files_only else ''} | sort | cpio -o -H newc > {a} 2>/dev/null"
    return (
        f"mkdir -p {quote(archive.rsplit('/', 1)[0])} && cd {s} && {make} && cd / && rm -rf {s} && "
        f"chown operator:operator {quote(archive.rsplit('/', 1)[0])} {a}"
    )


def _archive_home(w: World) -> str:
    """Where an archive lies: the home itself or a downloads-like folder in it."""
    return w.pick(
        (HOME, HOME, f"{HOME}/{w.pick(('downloads', 'backups', 'incoming', 'archives', 'transfer'))}")
    )


# ---- archives-extract-member ----------------------------------------------------------------------------------------
@family("archives-extract-member", "archives", "extract one member of an archive into a folder, nothing else")
def extract_member(w: World) -> Draft:
    top = w.pick((w.project(), f"{w.project()}-{w.randint(1, 9)}.{w.randint(0, 9)}", w.service()))
    tree = _tree(w, top)
    fmt = w.pick(("tar.gz", "tar.gz", "tgz", "tar.bz2", "tar.xz", "tar", "zip", "zip", "cpio"))
    archive = f"{_archive_home(w)}/{w.pick((top, f'{top}-release', f'{top}_backup', f'{top}-src'))}.{fmt}"
    stage = _stage(w)
    deep = [m for m in tree if m.count("/") >= 2]
    member = w.pick(deep) if deep and w.chance(0.85) else w.pick(list(tree))
    base = member.rsplit("/", 1)[1]
    dest = f"{HOME}/{w.pick(('restore', 'extracted', 'recovered', 'out', 'work', 'tmp_restore'))}_{w.word()}"
    flat = w.chance(0.45)
    by_name = w.chance(0.3)
    existing = w.chance(0.3)  # the destination exists already and holds a file that must survive
    keep = f"{dest}/{w.filename('txt')}" if existing else None
    w.note(fmt)
    target = f"{dest}/{base}" if flat else f"{dest}/{member}"
    what = (
        _spin(
            w,
            "the file {named|called} {base} (it is somewhere inside the archive)",
            base=base,
            capitalize=False,
        )
        if by_name
        else _spin(w, "the member {member}", member=member, capitalize=False)
    )
    how = (
        _spin(
            w,
            "{directly in|straight into} {dest}, without the folders it sits in inside the archive, so it "
            "ends up as {target}",
            dest=w.path_ref(dest),
            target=w.path_ref(target, "file"),
            capitalize=False,
        )
        if flat
        else _spin(
            w,
            "into {dest}, keeping its path from the archive{| (so {target})}",
            dest=w.path_ref(dest),
            target=w.path_ref(target, "file"),
            capitalize=False,
        )
    )
    task = _phrase(
        w,
        "{Extract|Restore|Pull out} only {what} from {archive}, {how}. {Do not extract anything else.|Nothing else "
        "from the archive should be extracted.}",
        "I need just one file back from the archive {archive}: {what}. {Put|Extract} it {how}; "
        "{leave the rest of the archive packed|the other members stay in the archive}.",
        "Ticket: restore {what} out of {archive}, {how}. {Only that file|Just that one file}, please: not the whole "
        "archive.",
        "Could you get {what} out of {archive} {how}? {Don't unpack the other files.|The other members must stay "
        "packed.}",
        "Somebody overwrote {what} and the only good copy is inside {archive}. Recover that one member {how} - "
        "unpacking the whole archive would clobber newer files.",
        "{archive}: extract {what} only, {how}.",
        what=what,
        how=how,
        archive=w.path_ref(archive, "file"),
    )
    others = sorted({m.rsplit("/", 1)[1] for m in tree if m != member})
    check = (
        "\n".join(
            [
                "#!/bin/bash",
                f'[ -f {quote(target)} ] && [ "$(cat {quote(target)})" = {quote(tree[member].rstrip(chr(10)))} ] || exit 1',
                f"[ -f {quote(archive)} ] || exit 1",
                *([f"[ -f {quote(keep)} ] || exit 1"] if keep else []),
                # no other member was unpacked anywhere in the home
                f'[ -z "$(find {HOME} -type f \\( {" -o ".join(f"-name {quote(o)}" for o in others)} \\) | head -n 1)" ] '
                "|| exit 1",
            ]
        )
        + "\n"
    )
    setup = [_pack(fmt, archive, stage, top)]
    if keep:
        setup.append(
            f"mkdir -p {quote(dest)} && echo keep > {quote(keep)} && chown -R operator:operator {quote(dest)}"
        )
    sh = _shell_paths(w)
    a, d = sh(archive), sh(dest)
    depth = member.count("/")
    if fmt in _TAR_FORMATS:
        z = _TAR_FORMATS[fmt][0]
        listing = f"tar -t{z}f {a}"
        if flat:
            extract = w.pick(
                (
                    f"tar -x{z}f {a} -C {d} --strip-components={depth} {member}",
                    f"tar -xO{z}f {a} {member} > {sh(target)}",
                )
            )
        else:
            extract = f"tar -x{z}f {a} -C {d} {member}"
    elif fmt == "zip":
        listing = w.pick((f"unzip -l {a}", f"unzip -Z1 {a}"))
        extract = (
            w.pick((f"unzip -j {a} {member} -d {d}", f"unzip -p {a} {member} > {sh(target)}"))
            if flat
            else f"unzip {a} {member} -d {d}"
        )
    else:
        listing = f"cpio -it < {a}"
        extract = (
            f"cpio -i --to-stdout {member} < {a} > {sh(target)}"
            if flat
            else f"(cd {d} && cpio -id {member} < {a})"
        )
    reference = ([listing] if by_name or w.chance(0.3) else []) + [
        f"mkdir -p {d}",
        extract,
        w.pick((f"find {d}", f"ls -R {d}")),
    ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if flat or by_name else 2,
        setup=setup,
        files={f"{stage}/{m}": c for m, c in tree.items()},
    )


# ---- archives-create-excluding ---------------------------------------------------------------------------------------
@family(
    "archives-create-excluding", "archives", "archive a folder (tar/zip) leaving out files matching a pattern"
)
def create_excluding(w: World) -> Draft:
    top = w.pick((w.project(), w.service(), w.dirname()))
    tree = _tree(w, top, w.randint(3, 7))
    by_dir = w.chance(0.45)
    junk: dict[str, str] = {}
    if by_dir:
        jdir = w.pick(("node_modules", ".cache", "build", "__pycache__", "tmp", "dist", "vendor"))
        for _ in range(w.randint(1, 3)):
            junk[f"{top}/{jdir}/{w.filename()}"] = "generated\n"
        pattern, desc = (
            jdir,
            _spin(w, "the {jdir} folder{| and everything in it}", jdir=jdir, capitalize=False),
        )
    else:
        jext = w.pick(("log", "tmp", "pyc", "bak", "o", "swp"))
        subs = sorted({m.rsplit("/", 1)[0] for m in tree})
        for _ in range(w.randint(2, 4)):
            junk[f"{w.pick(subs)}/{w.filename(jext)}"] = "scratch\n"
        pattern, desc = (
            f"*.{jext}",
            _spin(
                w,
                "{all *.{jext} files{| wherever they are}|every *.{jext} file{| in any folder}}",
                jext=jext,
                capitalize=False,
            ),
        )
    w.note(pattern)
    fmt = w.pick(("tar.gz", "tar.gz", "tgz", "tar.bz2", "tar.xz", "zip"))
    out_dir = w.pick((HOME, HOME, f"{HOME}/{w.pick(('backups', 'archives', 'releases'))}"))
    archive = f"{out_dir}/{top}-{w.pick(('backup', 'snapshot', 'src', 'bundle', 'export'))}.{fmt}"
    w.note(fmt)
    kind = "a zip archive" if fmt == "zip" else _TAR_FORMATS[fmt][2]
    src = f"{HOME}/{top}"
    task = _phrase(
        w,
        "{Create|Make|Build} {kind} {archive} of {src}, {leaving out|excluding} {desc}.",
        "{Pack|Archive} the folder {src} into {archive} ({kind}). Leave {desc} out of the archive.",
        "Ticket: we need a backup of {src} as {archive} ({kind}), {but without|minus} {desc}. Keep the folder "
        "itself as it is.",
        "Could you {bundle|archive} {src} as {kind} at {archive}? {Skip|Exclude} {desc}.",
        "I'm sending {src} to a colleague, and {desc} would only bloat the upload. Produce {archive} ({kind}) "
        "without {desc}; the folder itself stays as it is.",
        "{archive} <- {src} ({kind}), minus {desc}.",
        kind=kind,
        archive=w.path_ref(archive, "file"),
        src=w.path_ref(src),
        desc=desc,
        desc_cap=desc[:1].upper() + desc[1:],
    )
    files = {f"{HOME}/{m}": c for m, c in {**tree, **junk}.items()}
    listing = f"unzip -Z1 {quote(archive)}" if fmt == "zip" else f"tar -tf {quote(archive)}"
    magic = "Zip archive" if fmt == "zip" else _TAR_FORMATS[fmt][1]
    lines = [
        "#!/bin/bash",
        f"[ -f {quote(archive)} ] || exit 1",
        f"file -b {quote(archive)} | grep -q {quote('^' + magic)} || exit 1",
        f"L=$({listing} 2>/dev/null) || exit 1",
        "L=$(printf '%s\\n' \"$L\" | sed 's|^\\./||')",
    ]
    for m in tree:
        rel = m.split("/", 1)[1]
        lines.append(f"printf '%s\\n' \"$L\" | grep -qxF -e {quote(m)} -e {quote(rel)} || exit 1")
    if by_dir:
        lines.append(
            f"! printf '%s\\n' \"$L\" | grep -qE {quote('(^|/)' + re.escape(pattern) + '/[^/]')} || exit 1"
        )
    else:
        lines.append(f"! printf '%s\\n' \"$L\" | grep -qE {quote(re.escape(pattern[1:]) + '$')} || exit 1")
    lines += [f"[ -f {quote(p)} ] || exit 1" for p in files]
    sh = _shell_paths(w)
    a = sh(archive)
    reference = [f"mkdir -p {sh(out_dir)}"] if out_dir != HOME else []
    if fmt == "zip":
        xpat = f"{top}/{pattern}/*" if by_dir else pattern
        reference += [f"cd ~ && zip -r {a} {top} -x {quote(xpat)}", f"unzip -l {a}"]
    else:
        z = _TAR_FORMATS[fmt][0]
        form = w.pick(("C", "cd", "find"))
        if form == "C":
            reference.append(f"tar -c{z}f {a} --exclude={quote(pattern)} -C ~ {top}")
        elif form == "cd":
            reference.append(f"cd ~ && tar --exclude={quote(pattern)} -c{z}f {a} {top}")
        elif by_dir:
            reference.append(
                f"cd ~ && find {top} -path {quote(f'{top}/{pattern}')} -prune -o -type f -print "
                f"| tar -c{z}f {a} -T -"
            )
        else:
            reference.append(f"cd ~ && find {top} -type f ! -name {quote(pattern)} | tar -c{z}f {a} -T -")
        reference.append(f"tar -t{z}f {a}")
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty=2 if by_dir else 3,
        files=files,
    )


# ---- archives-list-contents ------------------------------------------------------------------------------------------
@family("archives-list-contents", "archives", "list what an archive holds (all members, some, or a count)")
def list_contents(w: World) -> Draft:
    top = w.pick((w.project(), w.service(), f"{w.project()}-{w.randint(1, 5)}.{w.randint(0, 9)}"))
    tree = _tree(w, top, w.randint(4, 9))
    fmt = w.pick(("tar.gz", "tgz", "tar.bz2", "tar.xz", "tar", "zip", "zip", "cpio"))
    archive = f"{_archive_home(w)}/{top}.{fmt}"
    stage = _stage(w)
    exts = sorted({m.rsplit(".", 1)[1] for m in tree})
    mode = w.pick(("all", "all", "sorted", "ext", "count"))
    ext = w.pick(exts)
    out = f"{HOME}/{w.filename('txt', stem=w.pick(('contents', 'manifest', 'listing', 'members', 'inventory')))}"
    w.note(fmt, ext)
    members = sorted(tree)
    expected = {
        "all": members,
        "sorted": members,
        "ext": [m for m in members if m.endswith(f".{ext}")],
        "count": [str(len(members))],
    }[mode]
    want = {
        "all": "{the path of every file in the archive|every member path as stored in the archive}, one per "
        "line",
        "sorted": "{every member path, sorted, one per line|the member paths one per line in sorted order}",
        "ext": "{only the .{ext} members|just the paths of the .{ext} files in it}, one per line, as stored in the "
        "archive",
        "count": "{just the number of files in the archive|only how many files it contains (a single number)}",
    }[mode]
    want = _spin(w, want, ext=ext, capitalize=False)
    task = _phrase(
        w,
        "{Write|Save} {a listing|the contents} of the archive {archive} {to|into} {out}: {want}.",
        "What is inside {archive}? {Put|Write} {want} in {out}{|, without extracting it}.",
        "Ticket: for the audit we need a {manifest|listing} of {archive}: {want}, {saved as|in} {out}.",
        "{Could you|Please} {list|inventory} {archive} into {out}: {want}?",
        "Nobody remembers what went into {archive}, and unpacking it here is not an option. Record {want} in {out}.",
        "{out}: {want} - for {archive}.",
        want=want,
        archive=w.path_ref(archive, "file"),
        out=w.path_ref(out, "file"),
    )
    if mode == "count":
        check = (
            f"#!/bin/bash\n[ -f {quote(out)} ] && [ \"$(tr -d '[:space:]' < {quote(out)})\" = "
            f"'{len(members)}' ]\n"
        )
    else:
        norm = f"sed 's|^\\./||; s/[[:space:]]*$//' {quote(out)} | grep -v '^$'"
        got = norm if mode == "sorted" else f"{norm} | sort"
        check = (
            f'#!/bin/bash\n[ -f {quote(out)} ] || exit 1\n[ "$({got})" = {quote(chr(10).join(expected))} ]\n'
        )
    sh = _shell_paths(w)
    a, o = sh(archive), sh(out)
    if fmt in _TAR_FORMATS:
        z = _TAR_FORMATS[fmt][0] if w.chance(0.6) else ""
        lister = f"tar -t{z}f {a}"
    elif fmt == "zip":
        lister = w.pick((f"unzip -Z1 {a}", f"zipinfo -1 {a}"))
    else:
        lister = f"cpio -it < {a}"
    tail = {
        "all": "",
        "sorted": " | sort",
        "ext": f" | grep {quote(chr(92) + '.' + ext + '$')}",
        "count": " | wc -l",
    }[mode]
    reference = [f"{lister}{tail} > {o}", f"cat {o}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=1 if mode == "all" else 2,
        setup=[_pack(fmt, archive, stage, top, files_only=True)],
        files={f"{stage}/{m}": c for m, c in tree.items()},
    )


# ---- archives-compress-files -----------------------------------------------------------------------------------------
@family(
    "archives-compress-files", "archives", "compress or decompress files with gzip/bzip2/xz, keeping or not"
)
def compress_files(w: World) -> Draft:
    zext = w.pick(tuple(_COMPRESSORS))
    tool, _, cat = _COMPRESSORS[zext]
    folder = f"{HOME}/{w.dirname()}"
    mode = w.pick(("one", "many", "many", "decompress"))
    ext = w.pick(("log", "csv", "sql", "json", "txt", "dump"))
    other = w.pick([e for e in ("md", "conf", "sh", "ini", "yaml") if e != ext])
    w.note(tool, zext, ext, other)
    targets = {
        f"{folder}/{w.filename(ext)}": _body(w.lines(w.randint(5, 20), w.pick(("words", "kv", "numbers"))))
        for _ in range(1 if mode != "many" else w.randint(2, 4))
    }
    decoys = {f"{folder}/{w.filename(other)}": _body(w.lines(3)) for _ in range(w.randint(1, 2))}
    keep = w.chance(0.6) if mode != "decompress" else True
    sh = _shell_paths(w)
    lines = ["#!/bin/bash"]
    setup: list[str] = []
    if mode == "decompress":
        ((path, content),) = targets.items()
        setup.append(f"{tool} {quote(path)} && chown operator:operator {quote(path)}.{zext}")
        task = _phrase(
            w,
            "{Decompress|Unpack} {zpath} {so that|so} {path} {exists again|is back}, {keeping|and keep} the "
            "compressed file {too|as well}.",
            "I need the plain file from {zpath}. {Decompress|Uncompress} it next to itself, but do not delete the "
            ".{zext} file.",
            "Ticket: {zpath} must be {uncompressed|decompressed} to {path}; the .{zext} {original|file} stays.",
            "Can you {unpack|decompress} {zpath} (it is {tool}-compressed) and keep the compressed copy?",
            zpath=w.path_ref(path + "." + zext, "file"),
            path=w.path_ref(path, "file"),
            zext=zext,
            tool=tool,
        )
        lines += [
            f'[ -f {quote(path)} ] && [ "$(cat {quote(path)})" = {quote(content.rstrip(chr(10)))} ] || exit 1',
            f"[ -f {quote(path)}.{zext} ] || exit 1",
        ]
        p = sh(path)
        reference = [
            w.pick(
                (
                    f"{tool} -dk {p}.{zext}",
                    f"{cat} {p}.{zext} > {p}",
                    f"{ {'gz': 'gunzip', 'bz2': 'bunzip2', 'xz': 'unxz'}[zext] } -k {p}.{zext}",
                )
            ),
            f"ls -l {sh(folder)}",
        ]
        return Draft(
            task=task,
            check="\n".join(lines) + "\n",
            reference=reference,
            difficulty=1,
            setup=setup,
            files={**targets, **decoys},
        )
    if mode == "one":
        ((path, _),) = targets.items()
        subject, pron, verb = w.path_ref(path, "file"), "it", "is"
        keep_txt = (
            _spin(w, "{keep the original {too|as well}|the original file must stay}")
            if keep
            else _spin(w, "{do not keep the uncompressed original|the compressed file replaces the original}")
        )
        result = _spin(
            w,
            "the result {should be|must be} {zpath}",
            zpath=w.path_ref(path + "." + zext, "file"),
            capitalize=False,
        )
    else:
        subject = _spin(
            w, "{all the|the} .{ext} files in {folder}", ext=ext, folder=w.path_ref(folder), capitalize=False
        )
        pron, verb = "them", "are"
        keep_txt = (
            _spin(w, "{keep the originals {too|as well}|the original files must stay}")
            if keep
            else _spin(
                w, "{do not keep the uncompressed originals|the compressed files replace the originals}"
            )
        )
        result = _spin(
            w,
            "each NAME.{ext} {becomes|ends up as} NAME.{ext}.{zext} in the same folder",
            ext=ext,
            zext=zext,
            capitalize=False,
        )
    task = _phrase(
        w,
        "{Compress|Shrink} {subject} with {tool}; {keep_l}. {result_c}.",
        "{subject_c} {verb} taking {too much|a lot of} space: compress {pron} with {tool} ({result}); {keep_l}.",
        "Ticket: {compress|pack} {subject} using {tool}. {keep_c}; {result}. {Leave other files alone.|Files of "
        "other types stay as they are.}",
        "Could you {tool}-compress {subject}? {keep_c}. {result_c}.",
        subject=subject,
        subject_c=subject[:1].upper() + subject[1:],
        tool=tool,
        pron=pron,
        verb=verb,
        keep_l=keep_txt[:1].lower() + keep_txt[1:],
        keep_c=keep_txt,
        result=result,
        result_c=result[:1].upper() + result[1:],
    )
    for path, content in targets.items():
        q = quote(path)
        lines.append(
            f'[ -f {q}.{zext} ] && [ "$({cat} {q}.{zext})" = {quote(content.rstrip(chr(10)))} ] || exit 1'
        )
        lines.append(f"[ {'-f' if keep else '! -e'} {q} ] || exit 1")
    for path in decoys:
        lines.append(f"[ -f {quote(path)} ] && [ ! -e {quote(path)}.{zext} ] || exit 1")
    k = " -k" if keep else ""
    f = sh(folder)
    if mode == "one":
        ((path, _),) = targets.items()
        p = sh(path)
        cmd = w.pick(
            (
                f"{tool}{k} {p}",
                f"{tool}{k} -9 {p}",
                f"{tool} -c {p} > {p}.{zext}" + ("" if keep else f" && rm {p}"),
            )
        )
    else:
        cmd = w.pick(
            (
                f"{tool}{k} {f}/*.{ext}",
                f"find {f} -maxdepth 1 -name '*.{ext}' -exec {tool}{k} {{}} +",
                f'for x in {f}/*.{ext}; do {tool}{k} "$x"; done',
            )
        )
    reference = [cmd, f"ls -l {f}"]
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty=1 if mode == "one" else 2,
        files={**targets, **decoys},
    )


# ---- archives-recompress ---------------------------------------------------------------------------------------------
@family(
    "archives-recompress", "archives", "convert a compressed file or tarball from one compression to another"
)
def recompress(w: World) -> Draft:
    src_z, dst_z = w.sample(tuple(_COMPRESSORS), 2)
    src_tool, _, src_cat = _COMPRESSORS[src_z]
    dst_tool, dst_magic, dst_cat = _COMPRESSORS[dst_z]
    is_tar = w.chance(0.45)
    where = _archive_home(w)
    keep = w.chance(0.35)
    w.note(src_z, dst_z, src_tool, dst_tool)
    lines = ["#!/bin/bash"]
    files: dict[str, str] = {}
    if is_tar:
        top = w.pick((w.project(), w.service()))
        tree = _tree(w, top, w.randint(2, 5))
        stage = _stage(w)
        stem = f"{where}/{top}-{w.pick(('backup', 'site', 'data', 'logs'))}.tar"
        flag = {"gz": "z", "bz2": "j", "xz": "J"}[src_z]
        setup = [
            f"mkdir -p {quote(where)} && cd {stage} && tar -c{flag}f {quote(stem + '.' + src_z)} {top} && cd / "
            f"&& rm -rf {stage} && chown operator:operator {quote(where)} {quote(stem + '.' + src_z)}"
        ]
        files = {f"{stage}/{m}": c for m, c in tree.items()}
        new = quote(f"{stem}.{dst_z}")
        for m, c in tree.items():
            lines.append(
                f'[ "$(tar -xOf {new} {quote(m)} 2>/dev/null)" = {quote(c.rstrip(chr(10)))} ] || exit 1'
            )
    else:
        stem = f"{where}/{w.filename(w.pick(('sql', 'log', 'csv', 'json', 'txt')))}"
        content = _body(w.lines(w.randint(8, 25), w.pick(("words", "kv", "numbers"))))
        files = {stem: content}
        setup = [f"{src_tool} {quote(stem)} && chown operator:operator {quote(stem + '.' + src_z)}"]
        lines.append(
            f'[ "$({dst_cat} {quote(stem + "." + dst_z)})" = {quote(content.rstrip(chr(10)))} ] || exit 1'
        )
    old, new_path = f"{stem}.{src_z}", f"{stem}.{dst_z}"
    lines.insert(
        1, f"[ -f {quote(new_path)} ] && file -b {quote(new_path)} | grep -q '^{dst_magic}' || exit 1"
    )
    lines.append(f"[ {'-f' if keep else '! -e'} {quote(old)} ] || exit 1")
    keep_txt = (
        _spin(w, "{keep|do not delete} the {original|old} .{src_z} file", src_z=src_z, capitalize=False)
        if keep
        else _spin(
            w,
            "{delete|remove} the .{src_z} file {afterwards|once converted|when done}",
            src_z=src_z,
            capitalize=False,
        )
    )
    task = _phrase(
        w,
        "{Convert|Recompress} {old} from {src_tool} to {dst_tool}: the result {is|must be} {new}; {keep_txt}.",
        "{We are standardising on|We now use} {dst_tool} for {archives|compressed files}. Turn {old} into {new} "
        "({dst_tool}-compressed{|, same content}) and {keep_txt}.",
        "Ticket: {old} is {src_tool}-compressed; {produce|create} {new} with the same content compressed with "
        "{dst_tool}. {keep_cap}.",
        "Can you {recompress|convert} {old} to {dst_tool} ({new}) and {keep_txt}?",
        "The tooling downstream only understands {dst_tool}, but {old} came in as {src_tool}. Repack the same "
        "data as {new}; {keep_txt}.",
        "{src_tool} -> {dst_tool}: {old} becomes {new}. {keep_cap}.",
        old=w.path_ref(old, "file"),
        new=w.path_ref(new_path, "file"),
        src_tool=src_tool,
        dst_tool=dst_tool,
        keep_txt=keep_txt,
        keep_cap=keep_txt[:1].upper() + keep_txt[1:],
    )
    sh = _shell_paths(w)
    o, n = sh(old), sh(new_path)
    if keep or w.chance(0.5):
        cmd = w.pick(
            (
                f"{src_cat} {o} | {dst_tool} > {n}",
                f"{src_cat} {o} | {dst_tool} -c > {n}",
                f"{ {'gz': 'zcat', 'bz2': 'bzcat', 'xz': 'xzcat'}[src_z] } {o} | {dst_tool} -9 > {n}",
            )
        )
        reference = [cmd + ("" if keep else f" && rm {o}")]
    else:
        reference = [f"{src_tool} -d {o}", f"{dst_tool} {sh(stem)}"]
    reference.append(w.pick((f"file {n}", f"ls -l {sh(where)}", f"{dst_tool} -t {n} && echo ok")))
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty=3 if is_tar else 2,
        setup=setup,
        files=files,
    )


# ---- archives-find-corrupt -------------------------------------------------------------------------------------------
_TESTERS = {"gz": "gzip -t", "tar.gz": "gzip -t", "bz2": "bzip2 -t", "xz": "xz -t", "zip": "unzip -tq"}


@family(
    "archives-find-corrupt",
    "archives",
    "test archives for integrity and report, move or delete the broken ones",
)
def find_corrupt(w: World) -> Draft:
    folder = f"{HOME}/{w.pick(('archives', 'backups', 'nightly', 'dumps', 'exports', 'snapshots'))}"
    mixed = w.chance(0.35)
    kinds = w.sample(tuple(_TESTERS), w.randint(2, 3)) if mixed else [w.pick(tuple(_TESTERS))]
    stage = _stage(w)
    prefix = w.pick((w.project(), w.service(), "backup", "dump"))
    start = w.date()
    names: list[str] = []
    files: dict[str, str] = {}
    setup = [f"mkdir -p {quote(folder)}"]
    n = w.randint(4, 7)
    for i in range(n):
        kind = kinds[i % len(kinds)]
        day = f"{start + timedelta(days=i):%Y-%m-%d}"
        name = f"{prefix}-{day}.{kind}" if not mixed else f"{prefix}-{day}-{i}.{kind}"
        names.append(name)
        plain = f"{stage}/{name.rsplit('.', 2 if kind == 'tar.gz' else 1)[0]}"
        files[f"{plain}/{w.filename()}" if kind in ("tar.gz", "zip") else plain] = _body(
            w.lines(w.randint(25, 40))
        )
        dst = quote(f"{folder}/{name}")
        base = plain.rsplit("/", 1)[1]
        setup.append(
            {
                "gz": f"gzip -c {quote(plain)} > {dst}",
                "bz2": f"bzip2 -c {quote(plain)} > {dst}",
                "xz": f"xz -c {quote(plain)} > {dst}",
                "tar.gz": f"tar -czf {dst} -C {stage} {base}",
                "zip": f"cd {stage} && zip -qr {dst} {base} && cd /",
            }[kind]
        )
    bad = w.sample(names, w.randint(1, min(3, n - 2)))
    for name in bad:  # cut each broken archive to half its size: a truncated transfer
        p = quote(f"{folder}/{name}")
        setup.append(f"truncate -s $(( $(stat -c %s {p}) / 2 )) {p}")
    decoy = f"{folder}/{w.pick(('README', 'NOTES', 'index'))}.txt" if w.chance(0.4) else None
    if decoy:
        files[decoy] = "nightly archives, kept 7 days\n"
    setup.append(f"rm -rf {stage} && chown -R operator:operator {quote(folder)}")
    mode = w.pick(("list", "move", "delete"))
    out = f"{HOME}/{w.filename('txt', stem=w.pick(('corrupt', 'broken', 'bad_archives', 'damaged')))}"
    quarantine = f"{HOME}/{w.pick(('quarantine', 'broken', 'corrupt', 'damaged'))}_{w.word()}"
    w.note(*kinds)
    action = {
        "list": _spin(
            w,
            "write the {file names|names} of the {broken|corrupt|damaged} ones to {out}, one per line",
            out=w.path_ref(out, "file"),
            capitalize=False,
        ),
        "move": _spin(
            w,
            "move the {broken|corrupt|damaged} ones into {q}{| (create it)}",
            q=w.path_ref(quarantine),
            capitalize=False,
        ),
        "delete": _spin(
            w, "delete the {broken|corrupt|damaged} ones{| and keep the good ones}", capitalize=False
        ),
    }[mode]
    what = ", ".join(f".{k}" for k in kinds[:-1]) + f" and .{kinds[-1]}" if mixed else f".{kinds[0]}"
    task = _phrase(
        w,
        "{Some|A few} of the {what} archives in {folder} are {corrupt|damaged|truncated}. {Test|Check} them all and "
        "{action}.",
        "{Our|The} {nightly|backup} {what} archives in {folder} did not all transfer {correctly|cleanly}. {Verify|Test} "
        "each one's integrity and {action}.",
        "Ticket: integrity check of the {what} files in {folder}: {action}.",
        "Which of the {what} archives in {folder} are broken? {Find out|Test them} and {action}.",
        "A restore drill failed halfway because one of the {what} archives in {folder} would not open. Find every "
        "archive there that fails its integrity test and {action}.",
        "{folder}: test each {what} archive, then {action}.",
        what=what,
        folder=w.path_ref(folder),
        action=action,
    )
    good = [x for x in names if x not in bad]
    lines = ["#!/bin/bash"]
    if mode == "list":
        lines += [
            f"[ -f {quote(out)} ] || exit 1",
            f"[ \"$(sed 's/[[:space:]]*$//; s|.*/||' {quote(out)} | grep -v '^$' | sort)\" = "
            f"{quote(chr(10).join(sorted(bad)))} ] || exit 1",
        ]
        lines += [f"[ -f {quote(f'{folder}/{x}')} ] || exit 1" for x in names]
    elif mode == "move":
        lines += [
            f"[ -f {quote(f'{quarantine}/{x}')} ] && [ ! -e {quote(f'{folder}/{x}')} ] || exit 1" for x in bad
        ]
        lines += [f"[ -f {quote(f'{folder}/{x}')} ] || exit 1" for x in good]
    else:
        lines += [f"[ ! -e {quote(f'{folder}/{x}')} ] || exit 1" for x in bad]
        lines += [f"[ -f {quote(f'{folder}/{x}')} ] || exit 1" for x in good]
    if decoy:
        lines.append(f"[ -f {quote(decoy)} ] || exit 1")
    sh = _shell_paths(w)
    on_bad = {"list": 'echo "$f"', "move": f'mv "$f" {sh(quarantine)}/', "delete": 'rm "$f"'}[mode]
    if mixed:
        cases = " ".join(f'*.{k}) {_TESTERS[k]} "$f" >/dev/null 2>&1;;' for k in kinds)
        loop = f'for f in *; do case "$f" in {cases} *) true;; esac || {on_bad}; done'
    else:
        k = kinds[0]
        loop = f'for f in *.{k}; do {_TESTERS[k]} "$f" >/dev/null 2>&1 || {on_bad}; done'
    reference = [f"cd {sh(folder)}"]
    if mode == "move":
        reference.append(f"mkdir -p {sh(quarantine)}")
    reference.append(loop + (f" > {sh(out)}" if mode == "list" else ""))
    reference.append(f"cat {sh(out)}" if mode == "list" else "ls")
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty=4 if mixed else 3,
        setup=setup,
        files=files,
    )


# ==== issue 39: volumes, members in place, checksum manifests ======================================================
# These families start where real tasks do (``workplace``: /srv, /opt, /app, a project folder; root or operator)
# and check meaning with ``py_check``: the bytes an archive holds, not the command that made it.
_PART_STYLES = {
    # style -> (split suffix options, first suffixes, how a person names them)
    "num2": ("-d", ("00", "01", "02"), "two-digit numbers from 00 (.part-00, .part-01, ...)"),
    "alpha": ("", ("aa", "ab", "ac"), "the letters split uses by default (.part-aa, .part-ab, ...)"),
    "num3": ("-d -a 3 --numeric-suffixes=1", ("001", "002", "003"), "three-digit numbers from 001"),
}
_SIZES = {"256K": 262144, "512K": 524288, "768K": 786432, "1M": 1048576}


def _frag(w: World, template: str, **values: object) -> str:
    return w.spin(template, capitalize=False, **values)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _suffixes(style: str, n: int) -> list[str]:
    """The first ``n`` suffixes GNU split writes in ``style``."""
    if style == "alpha":
        letters = "abcdefghijklmnopqrstuvwxyz"
        return [letters[i // 26] + letters[i % 26] for i in range(n)]
    if style == "num3":
        return [f"{i + 1:03d}" for i in range(n)]
    if style == "plain":
        return [str(i + 1) for i in range(n)]
    return [f"{i:02d}" for i in range(n)]


def _random_payload(w: World, stage: str, top: str) -> tuple[dict[str, str], str, int]:
    """A staged tree with one incompressible blob (so the archive is as big as drawn) and a few text files; the
    setup line that writes the blob, and its size."""
    size = w.randint(12, 30) * 131072
    blob = f"{stage}/{top}/{w.pick(('data', 'db', 'media', 'dump'))}.bin"
    files = {f"{stage}/{top}/{w.filename(w.pick(('conf', 'md', 'json')))}": _body(w.lines(3, "kv"))}
    return (
        files,
        f"mkdir -p {quote(posixpath.dirname(blob))} && head -c {size} /dev/urandom > {quote(blob)}",
        size,
    )


@family(
    "archives-split-volumes",
    "archives",
    "split a big archive into fixed-size or equal volumes with given names, or join volumes back in order",
)
def split_volumes(w: World) -> Draft:
    user = w.pick(("root", "root", "operator"))
    app = w.project()
    wd, setup = workplace(w, user, app)
    top = w.pick((app, f"{app}-{w.pick(('site', 'db', 'media'))}"))
    kind = w.pick(("backup", "snapshot", "export", "release"))
    name = f"{top}-{kind}-{w.date():%Y%m%d}.tar.gz"
    w.note(name)
    stage = _stage(w)
    files, blob_cmd, _ = _random_payload(w, stage, top)
    archive = f"{wd}/{name}"
    record = f"/root/.volumes-{w.token(6)}"
    build = (
        f"{blob_cmd} && tar -czf {quote(archive)} -C {stage} {top} && rm -rf {stage} && "
        f"md5sum {quote(archive)} | cut -d' ' -f1 > {record} && chown {user}:{user} {quote(archive)}"
    )
    setup.append(build)
    mode = w.pick(("size", "size", "count", "join", "join", "join-extract"))
    # a near-miss set of volumes from an older run sits beside the real ones
    old = f"{top}-{kind}-old.tar.gz"
    spec: dict[str, object] = {"record": record, "archive": archive}
    rel = posixpath.relpath
    if mode in ("size", "count"):
        style = w.pick(tuple(_PART_STYLES))
        opts, first, style_text = _PART_STYLES[style]
        outdir = w.pick((wd, f"{wd}/{w.pick(('parts', 'volumes', 'outgoing', 'transfer'))}"))
        prefix = f"{name}.part-"
        keep = w.chance(0.5)
        if mode == "size":
            size = w.pick(tuple(_SIZES))
            pieces = f"{size[:-1]} {'MiB' if size.endswith('M') else 'KiB'}"
            how = _frag(
                w,
                "{pieces|volumes|parts} of {s} ({b} bytes) each, the last one {smaller|holding the rest}",
                s=pieces,
                b=_SIZES[size],
            )
            spec.update(size=_SIZES[size])
            w.note(size, _SIZES[size])
        else:
            n = w.randint(3, 6)
            how = _frag(w, "{n} {pieces|volumes|parts} of {equal|(nearly) equal} size", n=n)
            spec.update(count=n)
            w.note(n)
        spec.update(outdir=outdir, prefix=prefix, style=style, keep=keep)
        where = "" if outdir == wd else " " + _frag(w, "in {d}", d=rel(outdir, wd) + "/")
        naming = _frag(w, "named {p}<suffix> with {s}", p=prefix, s=style_text)
        keep_text = (
            _frag(w, "{keep|leave} the original archive {where it is|in place}")
            if keep
            else _frag(w, "{remove|delete} the original archive {afterwards|once it is split}")
        )
        task = w.phrase(
            "Split {archive} into {how}{where}, {naming}; {keep}.",
            "The upload limit is too small for {archive}. Cut it into {how}{where} ({naming}) and {keep}.",
            "Ticket: {archive} must travel as volumes: {how}{where}, {naming}. {keep_c}.",
            "Can you split {archive} into {how}{where}? Name them {p}<suffix> ({s}) and {keep}.",
            "Goal: {archive} exists as {how}{where} that `cat` in name order turns back into the same file; "
            "{naming}. {keep_c}.",
            archive=name,
            how=how,
            where=where,
            naming=naming,
            keep=keep_text,
            keep_c=_capital(keep_text),
            p=prefix,
            s=style_text,
        )
        a = name
        out_prefix = prefix if outdir == wd else f"{rel(outdir, wd)}/{prefix}"
        ref = [w.pick(("ls -l", f"ls -lh {a}", f"du -b {a}"))]
        if outdir != wd:
            ref.append(f"mkdir -p {rel(outdir, wd)}")
        if mode == "size":
            size_arg = w.pick((str(spec["size"]), next(k for k, v in _SIZES.items() if v == spec["size"])))
            cmd = w.pick(
                (
                    f"split -b {size_arg} {opts} {a} {out_prefix}",
                    f"split --bytes={size_arg} {opts.replace('-d', '--numeric-suffixes') if style == 'num2' else opts} {a} {out_prefix}",
                    "python" if style != "num3" else f"split -b {size_arg} {opts} {a} {out_prefix}",
                )
            )
            if cmd == "python":
                sfx = "'%02d' % i" if style == "num2" else "chr(97 + i // 26) + chr(97 + i % 26)"
                cmd = (
                    f"python3 -c \"d = open('{a}', 'rb').read(); s = {spec['size']}; "
                    f"[open('{out_prefix}' + {sfx}, 'wb').write(d[o:o + s]) for i, o in enumerate(range(0, len(d), s))]\""
                )
        else:
            cmd = w.pick(
                (
                    f"split -n {spec['count']} {opts} {a} {out_prefix}",
                    f"split --number={spec['count']} {opts} {a} {out_prefix}",
                )
            )
        ref.append(cmd if cmd.startswith("python3") else re.sub(" +", " ", cmd))
        if not keep:
            ref.append(f"rm {a}")
        ref.append(
            w.pick((f"ls -l {rel(outdir, wd) if outdir != wd else '.'}", f"cat {out_prefix}* | md5sum"))
        )
        difficulty = 2
    else:
        style = w.pick(("alpha", "num2", "num3", "plain", "plain"))
        size = w.pick(tuple(_SIZES)[:2]) if style == "plain" else w.pick(tuple(_SIZES))
        partdir = w.pick((wd, f"{wd}/{w.pick(('incoming', 'parts', 'volumes'))}"))
        prefix = f"{name}.{w.pick(('part', 'vol'))}{'' if style == 'plain' else '-'}"
        sfx_opts = {"alpha": "", "num2": "-d", "num3": "-d -a 3 --numeric-suffixes=1", "plain": "-d -a 1"}[
            style
        ]
        p_in = f"{partdir}/{prefix}"
        cut = (
            f"split -b {size} {sfx_opts} {quote(archive)} {quote(p_in)}"
            if style != "plain"
            else f"split -b {size} -d -a 2 --numeric-suffixes=1 {quote(archive)} {quote(p_in)} && cd {quote(partdir)} "
            f'&& for f in {quote(prefix)}*; do n="$(echo "$f" | sed -E \'s/([^0-9])0*([0-9]+)$/\\1\\2/\')"; '
            '[ "$f" = "$n" ] || mv "$f" "$n"; done'
        )
        setup.append(
            f"mkdir -p {quote(partdir)} && sha256sum {quote(archive)} | sed 's|  .*/|  |' > "
            f"{quote(f'{partdir}/{name}.sha256')} && {cut} && rm {quote(archive)} && "
            f"chown -R {user}:{user} {quote(partdir)}"
        )
        # the older volumes: a name one glob away from the real ones
        old_files = {
            f"{partdir}/{old}.{prefix.rsplit('.', 1)[1]}{s}": w.token(40) + "\n" for s in _suffixes(style, 2)
        }
        files.update(old_files)
        setup.append(f"chown {user}:{user} " + " ".join(quote(p) for p in old_files))
        remove = w.chance(0.5)
        spec.update(
            parts_prefix=p_in, remove_parts=remove, same={p: md5_text(t) for p, t in old_files.items()}
        )
        target = w.pick((archive, f"{wd}/restored/{name}")) if mode == "join" else archive
        spec["archive"] = target
        extract = ""
        if mode == "join-extract":
            extract = f"{wd}/{w.pick(('restore', 'unpacked', 'current'))}"
            spec.update(extract=extract, top=top)
        where = "" if partdir == wd else " " + _frag(w, "in {d}", d=rel(partdir, wd) + "/")
        dest = rel(target, wd)
        rm_text = (
            _frag(w, "{delete|remove} the {volumes|parts} {once it is whole|afterwards}")
            if remove
            else _frag(w, "{keep|leave} the {volumes|parts} as they are")
        )
        ex_text = " " + _frag(w, "and unpack it into {x}/", x=rel(extract, wd)) if extract else ""
        trap = (
            " " + _frag(w, "(mind the order: the numbers are not zero-padded)")
            if style == "plain" and w.chance(0.4)
            else ""
        )
        task = w.phrase(
            "{archive} arrived in {volumes|pieces}{where} ({p}*){trap}. Join them back into {dest}{ex}, check it "
            "against {name}.sha256, and {rm}.",
            "Rebuild {dest} from its {volumes|parts} {p}*{where}{trap}{ex}; the checksum in {name}.sha256 must match. "
            "{rm_c}.",
            "Ticket: the transfer of {archive} came as split {volumes|parts}{where}. Reassemble {dest}{ex} and {rm}.",
            "Could you put {archive} back together{where}? The pieces are {p}*{trap}; the result goes to {dest}{ex}. "
            "{rm_c}.",
            "The {parts|volumes} named {p}*{where} are one archive cut in pieces. Goal: {dest} is that archive "
            "again, byte for byte{ex}; {rm}.",
            "{dest} is missing; only its {volumes|split parts}{where} ({p}*) are here{trap}. Join them{ex} and {rm}.",
            archive=name,
            name=name,
            where=where,
            p=prefix,
            dest=dest,
            ex=ex_text,
            rm=rm_text,
            rm_c=_capital(rm_text),
            trap=trap,
        )
        pd = "." if partdir == wd else rel(partdir, wd)
        pp = prefix if partdir == wd else f"{pd}/{prefix}"
        ref = [w.pick((f"ls {pd}", f"ls -l {pd}"))]
        if posixpath.dirname(target) != wd:
            ref.append(f"mkdir -p {rel(posixpath.dirname(target), wd)}")
        if style == "plain":
            join = w.pick(
                (
                    f"ls {pp}* | sort -V | xargs cat > {dest}",
                    f"cat $(ls {pp}* | sort -V) > {dest}",
                    f"for i in $(seq 1 $(ls {pp}* | wc -l)); do cat {pp}$i; done > {dest}",
                )
            )
        else:
            join = w.pick(
                (
                    f"cat {pp}* > {dest}",
                    f"cat {pp}?? > {dest}" if style != "num3" else f"cat {pp}??? > {dest}",
                    f"ls {pp}* | xargs cat > {dest}",
                    f"find {pd} -name '{prefix}*' | sort | xargs cat > {dest}",
                )
            )
        ref.append(join)
        shafile = f"{pd}/{name}.sha256" if pd != "." else f"{name}.sha256"
        ref.append(
            w.pick(
                (
                    f"(cd {rel(posixpath.dirname(target), wd) or '.'} && sha256sum -c {posixpath.relpath(f'{partdir}/{name}.sha256', posixpath.dirname(target))})",
                    f"sha256sum {dest} && cat {shafile}",
                )
            )
        )
        if extract:
            ex = rel(extract, wd)
            ref += [f"mkdir -p {ex}", w.pick((f"tar -xzf {dest} -C {ex}", f"tar -C {ex} -xzf {dest}"))]
        if remove:
            ref.append(f"rm {pp}*" if style != "num3" else f"rm -v {pp}*")
        difficulty = 3 if style == "plain" or extract else 2
    return Draft(
        task=task,
        check=py_check(spec, _VOLUMES_CHECK),
        reference=ref,
        difficulty=difficulty,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )


_VOLUMES_CHECK = r"""
import glob
want = text(S["record"]).strip()
if "outdir" in S:
    keep = S["keep"]
    if keep and md5(S["archive"]) != want:
        no("the original archive must stay as it was")
    if not keep and os.path.exists(S["archive"]):
        no("the original archive is still there")
    base = os.path.join(S["outdir"], S["prefix"])
    parts = sorted(p for p in glob.glob(glob.escape(base) + "*") if not p.endswith((".sha256", ".md5")))
    if not parts:
        no("no volumes found")
    suffixes = [p[len(base):] for p in parts]
    pat = {"num2": r"\d\d", "alpha": r"[a-z][a-z]", "num3": r"\d\d\d"}[S["style"]]
    if not all(re.fullmatch(pat, s) for s in suffixes):
        no(f"volume names: {suffixes}")
    first = {"num2": "00", "alpha": "aa", "num3": "001"}[S["style"]]
    if suffixes[0] != first:
        no(f"the first volume should end in {first}")
    data = b"".join(open(p, "rb").read() for p in parts)
    if hashlib.md5(data).hexdigest() != want:
        no("the volumes joined in name order are not the archive")
    sizes = [os.path.getsize(p) for p in parts]
    if "size" in S:
        if any(s != S["size"] for s in sizes[:-1]) or sizes[-1] > S["size"] or len(parts) != -(-len(data) // S["size"]):
            no(f"volume sizes {sizes}")
    elif len(parts) != S["count"] or max(sizes) - min(sizes) > S["count"]:
        no(f"want {S['count']} volumes of equal size, got {sizes}")
else:
    if md5(S["archive"]) != want:
        no(f"{S['archive']} is missing or not the original archive")
    left = glob.glob(glob.escape(S["parts_prefix"]) + "*")
    if S["remove_parts"] and left:
        no(f"volumes left: {left}")
    if not S["remove_parts"] and not left:
        no("the volumes were to be kept")
    if "extract" in S:
        top = os.path.join(S["extract"], S["top"])
        found = [f for f in glob.glob(top + "/*.bin")]
        if not found:
            no(f"nothing unpacked into {S['extract']}")
        out = subprocess.run(["tar", "-xzOf", S["archive"], "--wildcards", "*.bin"], capture_output=True).stdout
        if open(found[0], "rb").read() != out:
            no("the unpacked data differs from the archive")
"""


_UPDATE_CHECK = r"""
import tarfile, zipfile
path = S["archive"]
if not os.path.isfile(path):
    no(f"{path} is missing")
head = open(path, "rb").read(4)
members = {}
seen = set()
if S["fmt"] == "zip":
    if head[:2] != b"PK":
        no("it is no longer a zip archive")
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            name = info.filename.removeprefix("./")
            seen.add(name.rstrip("/"))
            if not info.is_dir():
                members[name] = z.read(info)
else:
    gz = head[:2] == b"\x1f\x8b"
    if gz != S["gzip"]:
        no("the compression changed")
    try:
        with tarfile.open(path) as t:
            for info in t.getmembers():  # a later entry of the same name wins, as when extracting
                name = info.name.removeprefix("./")
                seen.add(name.rstrip("/"))
                if info.isfile():
                    members[name] = t.extractfile(info).read()
                else:
                    members.pop(name, None)
    except tarfile.TarError as exc:
        no(f"unreadable archive: {exc}")
want = {k: v.encode() for k, v in S["want"].items()}
for name in S.get("absent", []):
    if name in seen:
        no(f"{name} is still in the archive")
for name, body in want.items():
    if members.get(name) != body:
        no(f"{name}: {'missing' if name not in members else 'wrong content'}")
extra = sorted(set(members) - set(want))
if extra:
    no(f"unexpected members: {extra[:5]}")
"""


@family(
    "archives-update-member",
    "archives",
    "change an archive in place: replace, add, edit or delete one member, keeping format and other members",
)
def update_member(w: World) -> Draft:
    user = w.pick(("root", "operator", "operator"))
    app = w.project()
    wd, setup = workplace(w, user, app)
    top = w.pick((app, f"{app}-{w.randint(1, 4)}.{w.randint(0, 12)}"))
    stage = _stage(w)
    tree = _tree(w, f"{stage}/{top}", w.randint(3, 6))
    conf_member = f"{top}/{w.pick(('conf', 'config', 'etc'))}/{w.pick(('settings', 'app', app))}.ini"
    keys = w.sample(("debug", "workers", "region", "timeout", "log_level", "cache", "endpoint"), 4)
    values = {k: w.pick(("true", "false", "4", "eu-west", "30", "info", "on", "off")) for k in keys}
    tree[f"{stage}/{conf_member}"] = _body([f"[{app}]"] + [f"{k} = {v}" for k, v in values.items()])
    mode = w.pick(("replace", "add", "edit", "delete", "delete"))
    secret = f"{top}/{w.pick(('.env', 'secrets.yml', 'id_rsa', 'credentials.json'))}"
    if mode == "delete":
        tree[f"{stage}/{secret}"] = "API_TOKEN=" + w.token(24) + "\n"
    fmt = w.pick(("tar.gz", "tar.gz", "tgz", "tar", "zip", "zip"))
    sub = w.pick(("", "", "dist/", "releases/"))
    name = (
        f"{sub}{top.replace('.', '_') if fmt == 'zip' else top}-bundle.{fmt}"
        if top == app
        else f"{sub}{top}.{fmt}"
    )
    archive = f"{wd}/{name}"
    flag = {"tar.gz": "z", "tgz": "z", "tar": ""}.get(fmt, "")
    pack = (
        f"cd {stage} && zip -qr {quote(archive)} {top}"
        if fmt == "zip"
        else f"tar -c{flag}f {quote(archive)} -C {stage} {top}"
    )
    older = f"{wd}/{sub}{top}-previous.{fmt}"
    setup.append(
        f"mkdir -p {quote(posixpath.dirname(archive))} && {pack} && cp {quote(archive)} {quote(older)} && cd / && "
        f"rm -rf {stage} && chown -R {user}:{user} {quote(posixpath.dirname(archive))}"
    )
    want = {m[len(stage) + 1 :]: c for m, c in tree.items()}
    files = dict(tree)
    member = ""
    new_file = ""
    absent: list[str] = []
    if mode in ("replace", "add"):
        member = (
            w.pick([m for m in want if m != conf_member])
            if mode == "replace"
            else f"{top}/{w.pick(('CHANGELOG.md', 'LICENSE', 'NOTICE.txt', 'VERSION'))}"
        )
        base = posixpath.basename(member)
        new_file = (
            w.pick((f"{base}.new", f"new/{base}", f"{base}", f"patched/{base}"))
            if mode == "replace"
            else base
        )
        content = _body(w.lines(w.randint(2, 5)))
        files[f"{wd}/{new_file}"] = content
        setup.append(f"chown -R {user}:{user} {quote(wd + '/' + new_file.split('/')[0])}")
        want[member] = content
    elif mode == "edit":
        member = conf_member
        key = w.pick(keys)
        new_value = w.pick(("true", "false", "8", "us-east", "60", "warning", "on", "off", "16"))
        while new_value == values[key]:
            new_value = w.pick(("true", "false", "8", "us-east", "60", "warning", "on", "off", "16"))
        w.note(key, new_value)
        edited = {**values, key: new_value}
        want[member] = _body([f"[{app}]"] + [f"{k} = {v}" for k, v in edited.items()])
    else:
        member = secret
        absent.append(secret)
        del want[secret]
    w.note(member, new_file, name)
    fmt_text = {"zip": "a zip", "tar": "a plain tar", "tar.gz": "a gzipped tar", "tgz": "a gzipped tar"}[fmt]
    what = {
        "replace": _frag(
            w, "{replace|swap} {m} inside it with the {new|fixed} version in {n}", m=member, n=new_file
        ),
        "add": _frag(w, "add {n} to it as {m}", n=new_file, m=member),
        "edit": _frag(
            w,
            "set {k} = {v} in {m} inside it (the other lines stay)",
            k=key if mode == "edit" else "",
            v=new_value if mode == "edit" else "",
            m=member,
        ),
        "delete": _frag(w, "{remove|delete} {m} from it: it was packed by mistake", m=member),
    }[mode]
    keep = _frag(
        w,
        "{it stays {f} at the same path with every other member unchanged|same path, still {f}, every other "
        "member as it was}",
        f=fmt_text,
    )
    task = w.phrase(
        "In {archive}, {what}; {keep}.",
        "{archive} ({f}) needs one change: {what}. {keep_c}. {prev} is an older build: leave it alone.",
        "Ticket: {archive}: {what}. Do not rebuild it from somewhere else; {keep}.",
        "Could you patch the archive {archive}? {what_c}; {keep}.",
        "Goal: unpacking {archive} gives the same tree as today except that {what_goal}. {keep_c}.",
        "{archive} is what we ship, and {what_why}. Fix the archive in place ({keep}); {prev} stays as is.",
        "Quick fix needed in {archive}, {f}: {what}. {keep_c}.",
        "Before {archive} is uploaded, {what}. {keep_c}; the other archive{s} here must not change.",
        archive=name,
        what=what,
        what_c=_capital(what),
        what_goal={
            "replace": _frag(w, "{m} has the content of {n}", m=member, n=new_file),
            "add": _frag(w, "it also holds {m} (a copy of {n})", m=member, n=new_file),
            "edit": _frag(
                w,
                "{m} says {k} = {v}",
                m=member,
                k=key if mode == "edit" else "",
                v=new_value if mode == "edit" else "",
            ),
            "delete": _frag(w, "{m} is gone", m=member),
        }[mode],
        what_why={
            "replace": _frag(w, "its {m} is outdated: {n} is the right one", m=member, n=new_file),
            "add": _frag(w, "it lacks {m}: put {n} in at that path", m=member, n=new_file),
            "edit": _frag(
                w,
                "{m} in it must say {k} = {v}",
                m=member,
                k=key if mode == "edit" else "",
                v=new_value if mode == "edit" else "",
            ),
            "delete": _frag(w, "{m} in it leaks a secret: take that member out", m=member),
        }[mode],
        keep=keep,
        keep_c=_capital(keep),
        f=fmt_text,
        prev=posixpath.relpath(older, wd),
        s="",
    )
    a = name
    scratch = w.pick(("/tmp/work", "/tmp/repack", f"/tmp/{w.word()}", "tmp"))
    ref: list[str] = [w.pick((f"tar -tvf {a}" if fmt != "zip" else f"unzip -l {a}", f"ls -l {sub or '.'}"))]
    approach = w.pick(("inplace", "inplace", "repack", "python"))
    if mode == "delete" and approach == "inplace" and fmt != "zip":
        if fmt == "tar":
            ref.append(f"tar --delete -f {a} {member}")
        else:
            plain = a[: -len(".gz")] if fmt == "tar.gz" else a[: -len(".tgz")] + ".tar"
            ref += (
                [f"gunzip {a}", f"tar --delete -f {plain} {member}", f"gzip {plain}"]
                if fmt == "tar.gz"
                else [
                    f"gzip -dc {a} > {plain}",
                    f"tar --delete -f {plain} {member}",
                    f"gzip -c {plain} > {a}",
                    f"rm {plain}",
                ]
            )
    elif mode == "delete" and fmt == "zip" and approach != "python":
        ref.append(f"zip -d {a} {member}")
    elif approach == "python":
        new_expr = {
            "delete": None,
            "edit": f"data.replace(b'{key} = {values[key]}\\n', b'{key} = {new_value}\\n')"
            if mode == "edit"
            else "",
        }.get(mode, f"open('{new_file}', 'rb').read()")
        lib = "zipfile" if fmt == "zip" else "tarfile"
        ref.append(
            f"python3 - <<'EOF'\nimport io, {lib}\n"
            + _py_rewrite(fmt, a, member, new_expr, mode == "add")
            + "EOF"
        )
    elif approach == "inplace" and fmt in ("tar", "zip"):
        ref.append(f"mkdir -p {scratch}/{posixpath.dirname(member)}")
        if mode == "edit":
            ref.append(
                f"tar -xf {a} -C {scratch} {member}"
                if fmt == "tar"
                else f"unzip -o {a} {member} -d {scratch}"
            )
            ref.append(f"sed -i 's/^{key} = .*/{key} = {new_value}/' {scratch}/{member}")
        else:
            ref.append(f"cp {new_file} {scratch}/{member}")
        full = a if a.startswith("/") else f"$OLDPWD/{a}"
        if fmt == "tar":
            op = w.pick(("-rf", "-uf")) if mode != "add" else "-rf"
            ref.append(f"tar {op} {a} -C {scratch} {member}")
        else:
            ref.append(f"cd {scratch} && zip {w.pick(('', '-u '))}{full} {member} && cd -")
    else:  # extract everything, change it, pack it again (any format)
        x = {"zip": f"unzip -q {a} -d {scratch}", "tar": f"tar -xf {a} -C {scratch}"}.get(
            fmt, f"tar -xzf {a} -C {scratch}"
        )
        ref += [f"mkdir -p {scratch}", x]
        if mode == "edit":
            ref.append(
                w.pick(
                    (
                        f"sed -i 's/^{key} = .*/{key} = {new_value}/' {scratch}/{member}",
                        f"sed -i -E 's/^({key}) = .*/\\1 = {new_value}/' {scratch}/{member}",
                    )
                )
            )
        elif mode == "delete":
            ref.append(f"rm {scratch}/{member}")
        else:
            ref.append(f"cp {new_file} {scratch}/{member}")
        full = a if a.startswith("/") else f"$OLDPWD/{a}"
        ref.append(
            {
                "zip": f"rm {a} && (cd {scratch} && zip -qr {full} {top})"
                if scratch.startswith("/")
                else f"rm {a} && cd {scratch} && zip -qr ../{a} {top} && cd ..",
                "tar": f"tar -cf {a} -C {scratch} {top}",
            }.get(fmt, f"tar -czf {a} -C {scratch} {top}")
        )
        ref.append(f"rm -rf {scratch}")
    ref.append(f"tar -tf {a}" if fmt != "zip" else f"unzip -l {a}")
    record = f"/root/.older-{w.token(6)}"
    setup.append(f"md5sum {quote(older)} | cut -d' ' -f1 > {record}")
    spec = {
        "archive": archive,
        "fmt": fmt,
        "gzip": fmt in ("tar.gz", "tgz"),
        "want": want,
        "absent": absent,
        "recorded": {older: record},
    }
    check = py_check(spec, _UPDATE_CHECK)
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if mode == "edit" or fmt in ("tar.gz", "tgz") else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )


def _py_rewrite(fmt: str, archive: str, member: str, new_expr: str | None, add: bool) -> str:
    """A Python heredoc body rewriting ``archive`` with ``member`` changed to ``new_expr`` (its old bytes are
    ``data``; None drops it), or added when ``add``."""
    change = "      continue\n" if new_expr is None else f"      data = {new_expr}\n"
    if fmt == "zip":
        return (
            f"src = zipfile.ZipFile('{archive}')\nitems = [(i, src.read(i)) for i in src.infolist()]\nsrc.close()\n"
            f"with zipfile.ZipFile('{archive}', 'w', zipfile.ZIP_DEFLATED) as z:\n"
            "  for info, data in items:\n"
            f"    if info.filename == '{member}':\n{change}"
            "    z.writestr(info, data)\n" + (f"  z.writestr('{member}', {new_expr})\n" if add else "")
        )
    mode_w = {"tar": "w", "tar.gz": "w:gz", "tgz": "w:gz"}[fmt]
    return (
        f"src = tarfile.open('{archive}')\n"
        "items = [(i, src.extractfile(i).read() if i.isfile() else None) for i in src.getmembers()]\nsrc.close()\n"
        f"with tarfile.open('{archive}', '{mode_w}') as t:\n"
        "  for info, data in items:\n"
        f"    if info.name == '{member}':\n{change}"
        "    if data is not None:\n      info.size = len(data)\n"
        "    t.addfile(info, io.BytesIO(data) if data is not None else None)\n"
        + (
            f"  info = tarfile.TarInfo('{member}')\n  data = {new_expr}\n  info.size = len(data)\n  info.mode = 0o644\n"
            "  t.addfile(info, io.BytesIO(data))\n"
            if add
            else ""
        )
    )


_MANIFEST_CHECK = r"""
def entries(path):
    out = {}
    for line in text(path).splitlines():
        if not line.strip():
            continue
        m = re.fullmatch(r"\\?([0-9a-f]{32,64}) [ *](.+)", line.strip()) or re.fullmatch(
            r"(?:SHA256|MD5) \((.+)\) = ([0-9a-f]{32,64})", line.strip()
        )
        if not m:
            no(f"not a checksum line: {line!r}")
        digest, name = (m.group(1), m.group(2)) if line.strip()[0] in "0123456789abcdef\\" else (m.group(2), m.group(1))
        out[os.path.normpath(name.removeprefix("./"))] = digest
    return out
def digest_of(path, algo):
    with open(path, "rb") as fh:
        return hashlib.new(algo, fh.read()).hexdigest()
root = S["root"]
if S["mode"] == "write":
    got = entries(S["manifest"])
    if sorted(got) != sorted(S["files"]):
        no(f"listed: {sorted(got)}")
    for name, digest in got.items():
        if len(digest) != S["hexlen"] or digest != digest_of(os.path.join(root, name), S["algo"]):
            no(f"wrong checksum for {name}")
elif S["mode"] == "report":
    if not os.path.isfile(S["report"]):
        no(f"no {S['report']}")
    got = [os.path.normpath(x.strip().removeprefix("./")) for x in text(S["report"]).splitlines() if x.strip()]
    got = [re.sub(r":\s*(FAILED.*)?$", "", x) for x in got]
    if sorted(got) != sorted(S["bad"]):
        no(f"reported {got}")
else:
    want = entries(S["manifest"])
    for name, digest in want.items():
        p = os.path.join(root, name)
        if not os.path.isfile(p) or digest_of(p, S["algo"]) != digest:
            no(f"{name} still does not match the manifest")
"""


@family(
    "archives-checksum-manifest",
    "archives",
    "write a sha256sum/md5sum manifest of a release tree, or check a tree against one and report or restore "
    "the files that differ",
)
def checksum_manifest(w: World) -> Draft:
    user = w.pick(("root", "operator", "operator"))
    app = w.project()
    wd, setup = workplace(w, user, app)
    ver = f"{w.randint(1, 5)}.{w.randint(0, 20)}.{w.randint(0, 9)}"
    rdir = w.pick(("release", f"{app}-{ver}", "dist", "current"))
    root = f"{wd}/{rdir}"
    algo = w.pick(("sha256", "sha256", "md5"))
    tool = f"{algo}sum"
    manifest_name = w.pick(
        (f"{algo.upper()}SUMS", f"{rdir}.{algo}" if rdir != "current" else "CHECKSUMS", "checksums.txt")
    )
    subs = w.sample(("bin", "lib", "conf", "docs", "share", "static"), w.randint(1, 3))
    files: dict[str, str] = {}
    for i in range(w.randint(4, 8)):
        sub = subs[i % len(subs)] if w.chance(0.8) else ""
        files[f"{root}/{sub + '/' if sub else ''}{w.filename(w.pick(_MEMBER_EXTS))}"] = _body(
            w.lines(w.randint(2, 6))
        )
    rels = sorted(posixpath.relpath(p, root) for p in files)
    notes = f"{wd}/{w.pick(('NOTES.txt', 'notes.md', 'TODO'))}"
    files[notes] = _body(w.lines(2))
    setup.append(f"chown -R {user}:{user} {quote(root)} {quote(notes)}")
    mode = w.pick(("write", "write", "report", "report", "restore"))
    spec: dict[str, object] = {
        "root": root,
        "mode": mode,
        "algo": algo,
        "hexlen": 64 if algo == "sha256" else 32,
    }
    manifest = f"{root}/{manifest_name}"
    spec["manifest"] = manifest
    r = posixpath.relpath(root, wd)
    m = manifest_name
    ref: list[str] = []
    if mode == "write":
        spec["files"] = rels
        spec["same"] = {p: md5_text(t) for p, t in files.items()}
        task = w.phrase(
            "Write {m} in {r}/: the {t} of every file under {r} (paths relative to {r}, as `{tool} -c` reads "
            "them from there), not listing {m} itself.",
            "We publish {r}/ with a checksum manifest. Create {r}/{m} with one `{tool}` line per file in the tree "
            "(subfolders included, relative paths); the manifest must not list itself.",
            "Ticket: {r} has no {m} yet. Generate it ({tool} format, relative paths) so that `cd {r} && {tool} -c "
            "{m}` passes for every file.",
            "Can you produce a {t} manifest {r}/{m} covering all files in {r}, recursively? Relative paths, "
            "{tool}'s format, and not the manifest itself.",
            "Goal: anyone can verify the files of {r} with `{tool} -c {m}` run inside it: every file is listed once "
            "with its {t}, nothing else.",
            "{r}/{m}: {tool} of each file below {r} (relative paths), excluding {m}.",
            r=r,
            m=m,
            t=f"{algo.upper()} checksum",
            tool=tool,
        )
        ref.append(w.pick((f"find {r} -type f", f"ls -R {r}")))
        how = w.randint(0, 4)
        if how == 0:
            ref.append(f"cd {r} && find . -type f ! -name {m} -exec {tool} {{}} + > {m}")
        elif how == 1:
            ref.append(f"cd {r} && find . -type f ! -name {m} -print0 | sort -z | xargs -0 {tool} > {m}")
        elif how == 2:
            ref.append(f"cd {r} && {tool} $(find . -type f | sort) > /tmp/{m} && mv /tmp/{m} {m}")
        elif how == 3:
            ref.append(
                f'cd {r} && for f in $(find * -type f); do {tool} "$f"; done > ../{m}.tmp && mv ../{m}.tmp {m}'
            )
        else:
            ref.append(
                f"cd {r} && python3 - > /tmp/{m} <<'EOF'\nimport hashlib, os\nfor d, _, names in sorted(os.walk('.')):\n"
                f"    for f in sorted(names):\n        if f != '{m}':\n            p = os.path.join(d, f)\n"
                f"            print(hashlib.{algo}(open(p, 'rb').read()).hexdigest() + '  ' + p)\nEOF"
            )
            ref.append(f"mv /tmp/{m} {m}")
        ref.append(f"{tool} -c {m}")
        difficulty = 2
    else:
        bad = w.sample(rels, w.randint(1, min(3, len(rels) - 1)))
        missing = w.pick(bad) if len(bad) > 1 and mode == "report" and w.chance(0.4) else None
        spec["bad"] = bad
        setup.append(
            f"cd {quote(root)} && {tool} {' '.join(quote(p) for p in rels)} > {quote(manifest_name)}"
        )
        for p in bad:
            if p == missing:
                setup.append(f"rm {quote(root + '/' + p)}")
            else:
                setup.append(
                    f"echo {quote(w.pick(('patched locally', 'debug = true', 'TODO remove')))} >> {quote(root + '/' + p)}"
                )
        out = f"{wd}/{w.pick(('mismatch', 'failed', 'changed', 'bad_files'))}.{w.pick(('txt', 'list'))}"
        spec["report"] = out
        o = posixpath.relpath(out, wd)
        if mode == "restore":
            archive = f"{wd}/{app}-{ver}.tar.gz"
            stage = _stage(w)
            for p in rels:
                files[f"{stage}/{rdir}/{p}"] = files[f"{root}/{p}"]
            files[f"{stage}/{rdir}/{posixpath.basename(notes)}"] = "old notes\n"
            setup.append(
                f"tar -czf {quote(archive)} -C {stage} {rdir} && rm -rf {stage} && chown {user}:{user} {quote(archive)}",
            )
            spec["same"] = {notes: md5_text(files[notes])}
        w.note(m, o, tool)
        if mode == "report":
            task = w.phrase(
                "Verify {r}/ against its manifest {r}/{m} and write the paths of the files that fail (as the "
                "manifest names them) to {o}, one per line.",
                "Someone edited files in {r} after release. Which ones no longer match {m}? List them in {o} (one "
                "path per line, as written in the manifest).",
                "Ticket: integrity audit of {r}: check every entry of {r}/{m} and record the mismatching or missing "
                "files in {o}.",
                "Could you run the {tool} manifest in {r} and put the names of the files that do not pass in {o}?",
                "Goal: {o} lists exactly the files of {r}/{m} whose content no longer matches (or that are gone), "
                "by their manifest path.",
                "{r}/{m} vs the files: failures go to {o}, one path a line.",
                r=r,
                m=m,
                o=o,
                tool=tool,
            )
            ref.append(f"cd {r}")
            how = w.randint(0, 3)
            if how == 0:
                ref.append(f"{tool} -c {m} 2>/dev/null | grep -v ': OK$' | cut -d: -f1 > ../{o}")
            elif how == 1:
                ref.append(f"{tool} --quiet -c {m} 2>/dev/null | sed 's/: FAILED.*//' > ../{o}")
            elif how == 2:
                ref.append(f"{tool} -c {m} 2>/dev/null | awk -F': ' '$2 != \"OK\" {{print $1}}' > ../{o}")
            else:
                ref.append(
                    f'while read -r sum f; do [ "$(cat "$f" 2>/dev/null | {tool} | cut -d\' \' -f1)" = "$sum" ] || '
                    f'echo "$f"; done < {m} > ../{o}'
                )
            ref.append(f"cat ../{o}")
            difficulty = 2 if missing is None else 3
        else:
            a = posixpath.relpath(archive, wd)
            note_rel = posixpath.relpath(notes, wd)
            task = w.phrase(
                "Some files in {r}/ no longer match {r}/{m}. Restore exactly those from the release archive {a}; "
                "{n} has local edits and must stay as it is.",
                "Files under {r} were changed by hand. Check them against {m} and put back the original versions "
                "of the ones that fail, from {a}. Do not unpack anything else ({n} is ours).",
                "Ticket: `{tool} -c {m}` fails in {r}. Repair the tree from {a} (only the failing files; {n} keeps "
                "its local content).",
                "Could you fix {r} so that its manifest {m} verifies again? The pristine files are in {a}; leave {n} "
                "alone.",
                "Goal: `cd {r} && {tool} -c {m}` passes, by taking the changed files back from {a}, and {n} is "
                "unchanged.",
                r=r,
                m=m,
                a=a,
                n=note_rel,
                tool=tool,
            )
            bad_members = " ".join(f"{rdir}/{p}" for p in bad)
            ref += [
                f"(cd {r} && {tool} -c {m} 2>/dev/null | grep -v ': OK$')",
                w.pick(
                    (
                        f"tar -xzf {a} {bad_members}",
                        f"tar -xzvf {a} {bad_members}",
                        f"for f in {' '.join(bad)}; do tar -xzOf {a} {rdir}/$f > {r}/$f; done",
                    )
                ),
                f"(cd {r} && {tool} -c {m})",
            ]
            difficulty = 3
    return Draft(
        task=task,
        check=py_check(spec, _MANIFEST_CHECK),
        reference=ref,
        difficulty=difficulty,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )
