"""Archives: creating, listing, extracting, compressing, converting and verifying tar, zip, cpio and compressed files.

Archives are built by the setup (as root, from a staging folder under /tmp that is then removed), so the operator
finds only the archive. Checks read archives back with the standard tools (``tar -tf``, ``unzip -Z1``, ``gzip -dc``,
``file -b``) and compare with the contents drawn here.
"""

from __future__ import annotations

import re
from datetime import timedelta

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, World, quote
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
