"""Disk: what takes the space (largest files, folder usage, files over a size) and getting it back (empty files,
runaway logs, duplicate copies).

Sizes are made by the setup with ``head -c N /dev/zero`` (real blocks, so ``du`` and ``ls -l`` agree on the order),
kept small (a few MiB per task) and spaced far apart, so no legitimate tool (``du`` in blocks, ``find -size`` in
rounded units, ``ls -l`` in bytes) sees a different order or threshold than the one the check expects. Nothing
depends on ``df``: a container's filesystem totals are not the task's to control.
"""

from __future__ import annotations

import posixpath
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
KIB = 1024
_BIG_EXTS = ("bin", "iso", "img", "tar", "dat", "mp4", "zip", "db", "log", "dump")
_SUBDIRS = (
    "cache",
    "media",
    "builds",
    "exports",
    "tmp",
    "data",
    "old",
    "uploads",
    "videos",
    "images",
    "vm",
    "snapshots",
    "artifacts",
    "dumps",
)


def _make_sized(sizes: dict[str, int], owner_root: str) -> str:
    """One setup command: every file of ``sizes`` made with that many bytes, the tree handed to the operator."""
    dirs = sorted({p.rsplit("/", 1)[0] for p in sizes})
    parts = [f"mkdir -p {' '.join(quote(d) for d in dirs)}"]
    parts += [f"head -c {n} /dev/zero > {quote(p)}" for p, n in sizes.items()]
    parts.append(f"chown -R operator:operator {quote(owner_root)}")
    return " && ".join(parts)


def _norm_paths(out: str, root: str) -> str:
    """Bash that prints the paths in ``out`` (last field of each line) relative to ``root``, whichever way the
    operator wrote them: absolute, ``./x`` from inside the folder, ``folder/x`` from the home."""
    rel_root = root[len(HOME) + 1 :]
    prefixes = "|".join(["\\./", _ere(root + "/"), _ere(f"~/{rel_root}/"), _ere(rel_root + "/")])
    return f"awk 'NF {{print $NF}}' {quote(out)} | sed -E {quote(f's#^({prefixes})##')}"


def _under(w: World, root: str, subs: list[str], name: str) -> str:
    """``root/name`` or ``root/<one of subs>/name``."""
    sub = w.pick(["", *subs])
    return f"{root}/{sub}/{name}" if sub else f"{root}/{name}"


def _ere(text: str) -> str:
    """``text`` as a sed extended regular expression (``#`` delimiter) matching itself."""
    return "".join("\\" + c if c in "\\.[]*^$|+?(){}#" else c for c in text)


def _fresh_text(w: World, taken: set[str], lines: int = 3) -> str:
    """Some text no other file of the task holds (duplicates must be exactly the planted ones)."""
    while True:
        text = _body(w.lines(lines))
        if text not in taken:
            taken.add(text)
            return text


# ---- disk-largest-files-report --------------------------------------------------------------------------------------
@family("disk-largest-files-report", "disk", "write the N largest files under a tree, largest first")
def largest_files_report(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    subs = [w.unique(lambda: w.pick(_SUBDIRS)) for _ in range(w.randint(1, 3))]
    if w.chance(0.4):
        subs.append(f"{subs[0]}/{w.unique(lambda: w.pick(_SUBDIRS))}")
    ext = w.pick(_BIG_EXTS) if w.chance(0.3) else None
    n = w.randint(3, 5)
    count = w.randint(n + 2, n + 6)
    units = w.sample(range(1, 64), count)  # distinct sizes, 16 KiB apart at least
    sizes: dict[str, int] = {}
    for i in range(count):
        sizes[_under(w, root, subs, w.filename(ext or w.pick(_BIG_EXTS)))] = units[i] * 16 * KIB + w.randint(
            0, 2000
        )
    biggest = max(sizes.values())
    decoys: dict[str, int] = {}
    if ext:  # bigger files of another type: not part of the answer
        other = w.pick([e for e in _BIG_EXTS if e != ext])
        for i in range(w.randint(1, 2)):
            decoys[_under(w, root, subs, w.filename(other))] = biggest + (i + 1) * 48 * KIB
    outside = f"{HOME}/{w.filename(w.pick(_BIG_EXTS))}"  # outside the tree: not part of the answer
    small = {_under(w, root, subs, w.filename("txt")): "notes\n" for _ in range(w.randint(0, 2))}
    top = sorted(sizes, key=lambda p: -sizes[p])[:n]
    with_size = w.chance(0.35)
    out = f"{HOME}/{w.filename('txt', stem=w.pick(('largest', 'biggest', 'top_files', 'space_report', 'big_files')))}"
    w.note(n, ext or "")
    what = _spin(
        w,
        "{the {n} largest|the {n} biggest} {.{ext} files|files of type .{ext}}"
        if ext
        else "{the {n} largest|the {n} biggest} files",
        n=n,
        ext=ext or "",
        capitalize=False,
    )
    fmt = (
        _spin(
            w, "one per line: the size in bytes, a space, then the full path, largest first", capitalize=False
        )
        if with_size
        else _spin(
            w,
            "{one full path per line, largest first|their full paths, one per line, biggest first}",
            capitalize=False,
        )
    )
    task = _phrase(
        w,
        "{Find|List} {what} {under|anywhere in} {root} (subfolders included) and write them to {out}, {fmt}.",
        "{The disk is filling up|We are running out of space}. Which are {what} in {root}, at any depth? {Write|Save} "
        "{them|the answer} to {out}, {fmt}.",
        "Ticket: space report for {root}. {Put|Write} {what} in the whole tree into {out}, {fmt}.",
        "Could you {find|report} {what} anywhere under {root}? {List|Write} them in {out}, {fmt}.",
        "Before I ask for a bigger volume I want to see what is eating {root}. {out} should list {what} in the "
        "whole tree, {fmt}.",
        "{out}: {what} below {root}, {fmt}.",
        what=what,
        root=w.path_ref(root),
        out=w.path_ref(out, "file"),
        fmt=fmt,
    )
    rels = [p[len(root) + 1 :] for p in top]
    lines = [
        "#!/bin/bash",
        f"[ -f {quote(out)} ] || exit 1",
        f'[ "$({_norm_paths(out, root)})" = {quote(chr(10).join(rels))} ] || exit 1',
    ]
    if with_size:
        lines.append(
            f"[ \"$(awk 'NF {{print $1}}' {quote(out)})\" = {quote(chr(10).join(str(sizes[p]) for p in top))} ] "
            "|| exit 1"
        )
    sh = _shell_paths(w)
    r, o = sh(root), sh(out)
    name = f" -name '*.{ext}'" if ext else ""
    if with_size:
        cmd = w.pick(
            (
                f"find {r} -type f{name} -printf '%s %p\\n' | sort -rn | head -n {n} > {o}",
                f"find {r} -type f{name} -exec du -b {{}} + | sort -rn | head -n {n} | tr '\\t' ' ' > {o}",
                f"find {r} -type f{name} -exec stat -c '%s %n' {{}} + | sort -rn | head -n {n} > {o}",
            )
        )
    else:
        cmd = w.pick(
            (
                f"find {r} -type f{name} -printf '%s %p\\n' | sort -rn | head -n {n} | cut -d' ' -f2- > {o}",
                f"find {r} -type f{name} -exec du -b {{}} + | sort -rn | head -n {n} | cut -f2 > {o}",
                f"find {r} -type f{name} -exec ls -l {{}} + | sort -k5,5nr | head -n {n} | awk '{{print $9}}' "
                f"> {o}",
            )
        )
    reference = ([f"du -sh {r}"] if w.chance(0.3) else []) + [cmd, f"cat {o}"]
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty=3 if ext else 2,
        setup=[_make_sized({**sizes, **decoys}, root), _make_sized({outside: biggest + 200 * KIB}, outside)],
        files=small,
    )


# ---- disk-folder-usage ---------------------------------------------------------------------------------------------
@family("disk-folder-usage", "disk", "rank the subfolders of a directory by their total disk usage (du)")
def folder_usage(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    folders = [
        w.unique(lambda: w.pick(_SUBDIRS + ("home", "projects", "backups", "logs", "music", "docs")))
        for _ in range(w.randint(3, 6))
    ]
    totals = [u * 64 * KIB for u in w.sample(range(1, 24), len(folders))]  # 64 KiB apart at least
    sizes: dict[str, int] = {}
    for folder, total in zip(folders, totals, strict=True):
        parts = w.randint(1, 3)
        nested = w.chance(0.4)
        for i in range(parts):
            share = total // parts if i < parts - 1 else total - (total // parts) * (parts - 1)
            inner = (
                f"{w.unique(lambda: w.pick(('a', 'b', 'old', 'new', 'raw', 'tmp', 'v1', 'v2')))}/"
                if nested and i == parts - 1
                else ""
            )
            sizes[f"{root}/{folder}/{inner}{w.filename(w.pick(_BIG_EXTS))}"] = share
    loose = None
    if w.chance(0.35):  # a loose file bigger than any folder: it is not a subfolder
        loose = f"{root}/{w.filename(w.pick(_BIG_EXTS))}"
        sizes[loose] = 25 * 64 * KIB
    ranked = [f for _, f in sorted(zip(totals, folders, strict=True), reverse=True)]
    mode = w.pick(("largest", "ranking", "ranking", "smallest"))
    expected = {"largest": ranked[:1], "ranking": ranked, "smallest": ranked[-1:]}[mode]
    out = f"{HOME}/{w.filename('txt', stem=w.pick(('usage', 'du_report', 'folder_sizes', 'biggest_folder')))}"
    what = {
        "largest": "{the name of the subfolder that uses the most space|the name of the biggest subfolder, "
        "nothing else}",
        "ranking": "{the names of all its subfolders, one per line, largest first|every subfolder name, one per "
        "line, ordered from the most to the least space used}",
        "smallest": "{the name of the subfolder that uses the least space|the name of the smallest subfolder, "
        "nothing else}",
    }[mode]
    what = _spin(w, what, capitalize=False)
    task = _phrase(
        w,
        "{Measure|Check} the disk usage of each subfolder of {root} (everything inside counts) and write to {out} "
        "{what}.",
        "Which folders in {root} take the space? In {out}, {write|put} {what}; a folder's size is everything in "
        "it, at any depth.",
        "Ticket: disk usage per subdirectory of {root}; {out} should {contain|hold} {what}.",
        "Could you {run a usage report on|compare the sizes of} the subfolders of {root} and save to {out} {what}?",
        "Quota warnings keep coming from {root} and I don't know which folder is to blame. Size up each "
        "subfolder (all of its contents) and put {what} in {out}.",
        "du per subfolder of {root} -> {out}: {what}.",
        root=w.path_ref(root),
        out=w.path_ref(out, "file"),
        what=what,
    )
    check = (
        "#!/bin/bash\n"
        f"[ -f {quote(out)} ] || exit 1\n"
        f"[ \"$(awk 'NF {{print $NF}}' {quote(out)} | sed 's|/*$||; s|.*/||')\" = "
        f"{quote(chr(10).join(expected))} ]\n"
    )
    sh = _shell_paths(w)
    r, o = sh(root), sh(out)
    order = "-n" if mode == "smallest" else "-rn"
    if mode == "ranking":
        cmd = w.pick(
            (
                f"du -s {r}/*/ | sort -rn | awk '{{print $2}}' > {o}",
                f"du -d 1 {r} | sort -rn | sed 1d | cut -f2 > {o}",
                f"du --max-depth=1 -k {r} | sort -rn | tail -n +2 | cut -f2 | xargs -n1 basename > {o}",
            )
        )
    else:
        cmd = w.pick(
            (
                f"du -s {r}/*/ | sort {order} | head -n 1 | cut -f2 | xargs basename > {o}",
                f"du -sk {r}/*/ | sort {order} | head -n 1 | awk '{{print $2}}' > {o}",
            )
        )
    reference = [f"du -sh {r}/*", cmd, f"cat {o}"] if w.chance(0.5) else [cmd, f"cat {o}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if loose or mode == "ranking" else 2,
        setup=[_make_sized(sizes, root)],
    )


# ---- disk-find-large-files -----------------------------------------------------------------------------------------
@family(
    "disk-find-large-files", "disk", "find the files over a size under a tree and list, delete or move them"
)
def find_large_files(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    subs = [w.unique(lambda: w.pick(_SUBDIRS)) for _ in range(w.randint(1, 3))]
    thr_k = w.pick((100, 200, 256, 500, 1024, 2048))
    ext = w.pick(_BIG_EXTS) if w.chance(0.3) else None
    other = w.pick([e for e in _BIG_EXTS if e != ext])
    big: dict[str, int] = {}
    small: dict[str, int] = {}
    for _ in range(w.randint(1, 4)):  # well above the limit, whatever unit rounding a tool applies
        big[_under(w, root, subs, w.filename(ext or w.pick(_BIG_EXTS)))] = (
            thr_k * KIB * w.randint(13, 20) // 10
        )
    for _ in range(w.randint(2, 5)):  # well below it
        small[_under(w, root, subs, w.filename(ext or w.pick(_BIG_EXTS)))] = (
            thr_k * KIB * w.randint(1, 7) // 10
        )
    if ext:  # a big file of another type stays
        small[_under(w, root, subs, w.filename(other))] = thr_k * KIB * 2
    mode = w.pick(("list", "list", "delete", "move"))
    dest = f"{HOME}/{w.pick(('big_files', 'offload', 'to_archive', 'large', 'review'))}_{w.word()}"
    out = f"{HOME}/{w.filename('txt', stem=w.pick(('large_files', 'over_limit', 'big', 'oversized')))}"
    limit = f"{thr_k // 1024} MB" if thr_k >= 1024 else f"{thr_k} KB"
    w.note(limit, thr_k, ext or "")
    kind = _spin(
        w,
        "{.{ext} files|files ending in .{ext}}" if ext else "{files|regular files}",
        ext=ext or "",
        capitalize=False,
    )
    action = {
        "list": _spin(
            w,
            "{write|save} their full paths to {out}, one per line",
            out=w.path_ref(out, "file"),
            capitalize=False,
        ),
        "delete": _spin(w, "{delete|remove} them", capitalize=False),
        "move": _spin(
            w,
            "move them {into|to} {dest} (flat, no subfolders{|; create it})",
            dest=w.path_ref(dest),
            capitalize=False,
        ),
    }[mode]
    task = _phrase(
        w,
        "{Find|Locate} the {kind} {larger|bigger} than {limit} {under|anywhere in} {root} and {action}.",
        "{root} {is using|takes} too much space. Every one of its {kind} over {limit} (at any depth): {action}.",
        "Ticket: {kind} above {limit} in {root} (subfolders included): {action}. {Smaller files stay.|Leave the "
        "smaller ones alone.}",
        "Could you {find|track down} {kind} bigger than {limit} in {root}, subfolders included, and {action}?",
        "The backup of {root} exceeds its size budget, and a few oversized {kind} are to blame: whatever is over "
        "{limit}, at any depth - {action}.",
        "{root}, recursive, {kind} > {limit}: {action}.",
        kind=kind,
        limit=limit,
        root=w.path_ref(root),
        action=action,
    )
    lines = ["#!/bin/bash"]
    if mode == "list":
        rels = sorted(p[len(root) + 1 :] for p in big)
        lines += [
            f"[ -f {quote(out)} ] || exit 1",
            f'[ "$({_norm_paths(out, root)} | sort)" = {quote(chr(10).join(rels))} ] || exit 1',
        ]
        lines += [f"[ -f {quote(p)} ] || exit 1" for p in big]
    elif mode == "delete":
        lines += [f"[ ! -e {quote(p)} ] || exit 1" for p in big]
    else:
        lines += [
            f"[ -f {quote(dest + '/' + p.rsplit('/', 1)[1])} ] && [ ! -e {quote(p)} ] || exit 1" for p in big
        ]
    lines += [f"[ -f {quote(p)} ] || exit 1" for p in small]
    sh = _shell_paths(w)
    r = sh(root)
    name = f" -name '*.{ext}'" if ext else ""
    unit = f"{thr_k // 1024}M" if thr_k >= 1024 and w.chance(0.6) else f"{thr_k}k"
    found = f"find {r} -type f{name} -size +{unit}"
    if mode == "list":
        reference = [
            w.pick((f"{found} > {sh(out)}", f"{found} -printf '%p\\n' > {sh(out)}")),
            f"cat {sh(out)}",
        ]
    elif mode == "delete":
        reference = [
            f"{found} -exec ls -lh {{}} +",
            w.pick((f"{found} -delete", f"{found} -exec rm {{}} +", f"{found} -print0 | xargs -0 rm -f")),
        ]
    else:
        reference = [
            f"mkdir -p {sh(dest)}",
            w.pick((f"{found} -exec mv -t {sh(dest)} {{}} +", f"{found} -exec mv {{}} {sh(dest)}/ \\;")),
            f"ls -l {sh(dest)}",
        ]
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty=2 if mode == "list" else 3,
        setup=[_make_sized({**big, **small}, root)],
    )


# ---- disk-empty-cleanup --------------------------------------------------------------------------------------------
@family("disk-empty-cleanup", "disk", "delete empty files and/or empty directories under a tree")
def empty_cleanup(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    subs = [w.unique(lambda: w.pick(_SUBDIRS)) for _ in range(w.randint(2, 4))]
    mode = w.pick(("files", "dirs", "both"))
    full = {_under(w, root, subs, w.filename()): _body(w.lines(2)) for _ in range(w.randint(2, 5))}
    full[f"{root}/{w.filename()}"] = "\n"  # one byte is not empty
    empty_files = [_under(w, root, subs, w.filename()) for _ in range(w.randint(2, 5))]
    if w.chance(0.4):
        empty_files.append(f"{root}/{w.pick(subs)}/.{w.pick(('keep', 'lock', 'placeholder', 'marker'))}")
    empty_dirs = [
        f"{root}/{w.unique(lambda: w.pick(('scratch', 'staging', 'unused', 'spare', 'incoming')))}"
        for _ in range(w.randint(1, 3))
    ]
    chain = f"{root}/{w.pick(subs)}/{w.word()}/{w.word()}"  # nested empty folders: all of them go
    empty_dirs.append(chain)
    only_empty_files = f"{root}/{w.unique(lambda: w.pick(('markers', 'locks', 'flags', 'stubs')))}"
    empty_files.append(f"{only_empty_files}/{w.filename()}")  # a folder that holds only an empty file
    outside = f"{HOME}/{w.filename()}"  # an empty file outside the tree stays
    files = {**full, **{p: "" for p in empty_files}, outside: ""}
    setup = [f"mkdir -p {' '.join(quote(d) for d in empty_dirs)} && chown -R operator:operator {quote(root)}"]
    what = {
        "files": "{delete|remove} every empty file (size zero) {where}; {leave the directories alone, even "
        "empty ones|do not remove any directory}",
        "dirs": "{delete|remove} every empty directory {where}, including folders that only held empty folders; "
        "{files stay, even empty ones|do not delete any file}",
        "both": "{delete|remove} every empty file {where}, then every directory {below it|inside it} that is (or "
        "has become) empty; the {top|top-level} folder itself stays",
    }[mode]
    task = _phrase(
        w,
        what.replace("{where}", "{under|anywhere in} {root}") + ".",
        "{Clean up|Tidy} {root}: " + what.replace("{where}", "in it") + ".",
        "Ticket: {root} is littered with empty {files|entries}. "
        + what.replace("{where}", "in it").replace("{delete|remove}", "{Delete|Remove}")
        + ".",
        "Could you " + what.replace("{where}", "under {root}") + "?",
        "A crashed sync job left hollow leftovers all over {root}. "
        + what.replace("{where}", "{under|anywhere in} {root}").replace("{delete|remove}", "{Delete|Remove}")
        + ".",
        "Empties in {root}: " + what.replace("{where}", "in that tree") + ".",
        root=w.path_ref(root),
    )
    gone, stay = [], [*full, outside]
    chain_parts = [chain.rsplit("/", 1)[0], chain]
    if mode in ("files", "both"):
        gone += empty_files
    else:
        stay += empty_files
    if mode in ("dirs", "both"):
        gone += empty_dirs + chain_parts
    if mode == "both":
        gone.append(only_empty_files)
    lines = ["#!/bin/bash", f"[ -d {quote(root)} ] || exit 1"]
    lines += [f"[ ! -e {quote(p)} ] || exit 1" for p in gone]
    lines += [f"[ -f {quote(p)} ] || exit 1" for p in stay]
    if mode == "files":
        lines += [f"[ -d {quote(d)} ] || exit 1" for d in empty_dirs]
    if mode == "dirs":
        lines.append(f"[ -d {quote(only_empty_files)} ] || exit 1")
    sh = _shell_paths(w)
    r = sh(root)
    cmd = {
        "files": w.pick(
            (
                f"find {r} -type f -empty -delete",
                f"find {r} -type f -size 0 -exec rm {{}} +",
                f"find {r} -type f -empty -print0 | xargs -0 rm",
                f'find {r} -type f -empty | while IFS= read -r f; do rm -- "$f"; done',
            )
        ),
        "dirs": w.pick(
            (
                f"find {r} -mindepth 1 -type d -empty -delete",
                f"find {r} -depth -mindepth 1 -type d -empty -exec rmdir {{}} \\;",
                # every folder, deepest first; rmdir removes the ones that are (or became) empty
                f"find {r} -mindepth 1 -depth -type d -print0 | xargs -0 rmdir --ignore-fail-on-non-empty",
            )
        ),
        "both": w.pick(
            (
                f"find {r} -mindepth 1 -empty -delete",
                f"find {r} -type f -empty -delete && find {r} -mindepth 1 -type d -empty -delete",
                f"find {r} -type f -size 0 -exec rm {{}} + && "
                f"find {r} -mindepth 1 -depth -type d -print0 | xargs -0 rmdir --ignore-fail-on-non-empty",
            )
        ),
    }[mode]
    reference = ([f"find {r} -empty"] if w.chance(0.5) else []) + [cmd, w.pick((f"find {r}", f"tree -a {r}"))]
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty=2 if mode != "both" else 3,
        setup=setup,
        files=files,
    )


# ---- disk-truncate-logs --------------------------------------------------------------------------------------------
@family("disk-truncate-logs", "disk", "empty or trim runaway log files in place (same file, same inode)")
def truncate_logs(w: World) -> Draft:
    svc = w.service()
    folder = (
        f"{HOME}/{w.pick(('logs', 'log', 'var_log', 'app_logs'))}_{svc}"
        if w.chance(0.5)
        else f"{HOME}/{svc}/logs"
    )
    mode = w.pick(("empty_one", "keep_tail", "empty_big"))
    token = w.token(8)
    files: dict[str, str] = {}
    setup: list[str] = []
    targets: list[str] = []
    keep_same: dict[str, str] = {}
    n_keep = w.randint(5, 40)
    thr_k = w.pick((100, 200, 500))
    w.note(n_keep, thr_k)
    if mode == "keep_tail":
        log = f"{folder}/{svc}.log"
        content = w.log_lines(w.randint(n_keep + 20, n_keep + 200), service=svc)
        files[log] = _body(content)
        targets = [log]
    else:
        names = [f"{svc}.log"] + [
            w.filename("log") for _ in range(w.randint(0 if mode == "empty_one" else 1, 3))
        ]
        big = names[:1] if mode == "empty_one" else names[: w.randint(1, len(names) - 1)]
        for name in names:
            path = f"{folder}/{name}"
            files[path] = _body(w.log_lines(w.randint(5, 20), service=svc))
            if name in big:
                targets.append(path)
                filler = w.log_lines(1, service=svc)[0]
                setup.append(f"yes {quote(filler)} | head -n {thr_k * 30} >> {quote(path)}")
            else:
                keep_same[path] = files[path]
    other = f"{folder}/{w.filename(w.pick(('conf', 'pid', 'txt')))}"
    files[other] = f"{w.randint(100, 9999)}\n"
    keep_same[other] = files[other]
    setup.append(
        f"chown -R operator:operator {quote(folder)} && for f in {' '.join(quote(t) for t in targets)}; do "
        f"stat -c '%i %n' \"$f\"; done > /root/.inodes_{token}"
    )
    one = mode != "empty_big"
    why = _spin(
        w,
        "{the service still has {pron} open|a running process keeps writing to {pron}}, so {empty|trim} "
        "{pron} in place: do not delete, move or replace the {noun}",
        pron="it" if one else "them",
        noun="file" if one else "files",
        capitalize=False,
    )
    log_ref = w.path_ref(targets[0], "file") if one else ""
    what = {
        "empty_one": _spin(w, "{empty|truncate} {log} to zero bytes", log=log_ref, capitalize=False),
        "keep_tail": _spin(
            w, "{trim|cut down} {log} to its last {n} lines", log=log_ref, n=n_keep, capitalize=False
        ),
        "empty_big": _spin(
            w,
            "{empty|truncate to zero bytes} every .log file in {folder} that is larger than "
            "{k} KB; {smaller logs|the other files} stay as they are",
            folder=w.path_ref(folder),
            k=thr_k,
            capitalize=False,
        ),
    }[mode]
    task = _phrase(
        w,
        "{what_c}. {why_c}.",
        "{The disk is almost full|Logs are eating the disk}: {what}. {why_c}.",
        "Ticket: {what}. Note: {why}.",
        "Could you {what}? {why_c}.",
        "The partition is at 98% and the pager keeps going off. Quick fix while we plan a real one: {what}. "
        "{why_c}.",
        "{what_c} ({why}).",
        what=what,
        what_c=what[:1].upper() + what[1:],
        why=why,
        why_c=why[:1].upper() + why[1:],
    )
    lines = [
        "#!/bin/bash",
        f"[ -s /root/.inodes_{token} ] || exit 1",
        f'while read -r ino path; do [ -f "$path" ] && [ "$(stat -c %i "$path")" = "$ino" ] && '
        f'[ "$(stat -c %U "$path")" = operator ] || exit 1; done < /root/.inodes_{token}',
    ]
    if mode == "keep_tail":
        lines.append(f'[ "$(cat {quote(targets[0])})" = {quote(chr(10).join(content[-n_keep:]))} ] || exit 1')
    else:
        lines += [f"[ ! -s {quote(t)} ] || exit 1" for t in targets]
    lines += [f'[ "$(cat {quote(p)})" = {quote(c.rstrip(chr(10)))} ] || exit 1' for p, c in keep_same.items()]
    sh = _shell_paths(w)
    if mode == "empty_one":
        t = sh(targets[0])
        reference = [
            f"ls -lh {sh(folder)}",
            w.pick((f"truncate -s 0 {t}", f": > {t}", f"> {t}", f"cp /dev/null {t}")),
            f"ls -l {t}",
        ]
    elif mode == "keep_tail":
        t = sh(targets[0])
        reference = [
            w.pick(
                (
                    f"tail -n {n_keep} {t} > /tmp/tail.$$ && cat /tmp/tail.$$ > {t} && rm /tmp/tail.$$",
                    f"tail -n {n_keep} {t} > /tmp/keep && cp /tmp/keep {t}",
                )
            ),
            f"wc -l {t}",
        ]
    else:
        f = sh(folder)
        reference = [
            f"ls -lh {f}",
            w.pick(
                (
                    f"find {f} -name '*.log' -size +{thr_k}k -exec truncate -s 0 {{}} +",
                    f"for x in $(find {f} -name '*.log' -size +{thr_k}k); do : > \"$x\"; done",
                )
            ),
            f"ls -lh {f}",
        ]
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty={"empty_one": 1, "keep_tail": 3, "empty_big": 3}[mode],
        setup=setup,
        files=files,
    )


# ---- disk-duplicate-files ------------------------------------------------------------------------------------------
@family(
    "disk-duplicate-files",
    "disk",
    "find files with identical content (checksums) and report or remove copies",
)
def duplicate_files(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    mode = w.pick(("list", "list", "dedupe"))
    files: dict[str, str] = {}
    sh = _shell_paths(w)
    r = sh(root)
    if mode == "list":
        subs = [w.unique(lambda: w.pick(_SUBDIRS)) for _ in range(w.randint(1, 3))]
        ext = w.pick(("jpg", "pdf", "txt", "csv", "png", "mp3"))
        dup_paths: list[str] = []
        taken: set[str] = set()
        for _ in range(w.randint(1, 3)):  # groups of identical files
            content = _fresh_text(w, taken, w.randint(2, 6))
            for _ in range(w.randint(2, 3)):
                p = _under(w, root, subs, w.filename(ext))
                files[p] = content
                dup_paths.append(p)
        for _ in range(w.randint(2, 5)):  # unique ones, some of the same size as a duplicate
            text = files[w.pick(dup_paths)]
            content = text[:-2] + ("x" if text[-2] != "x" else "y") + "\n"
            if content in taken or w.chance(0.5):
                content = _fresh_text(w, taken)
            taken.add(content)
            files[_under(w, root, subs, w.filename(ext))] = content
        out = f"{HOME}/{w.filename('txt', stem=w.pick(('duplicates', 'dupes', 'identical', 'same_content')))}"
        task = _phrase(
            w,
            "{Find|Identify} the files under {root} whose content is identical to another file's there, and "
            "write {all of them|every such file} to {out}, one full path per line (every copy, including the "
            "first).",
            "{Some|Several} files in {root} (subfolders included) are byte-for-byte copies of each other. List every "
            "file that has an identical twin in {out}, one path per line, in any order.",
            "Ticket: duplicate report for {root}. Write to {out} each file whose content also exists in another "
            "file of the tree (all copies, one path per line). Names do not matter, only content.",
            "Which files in {root} are duplicates by content? Write the paths of all of them (every copy) to {out}, "
            "one per line.",
            "{out} must list, one full path per line, every file in {root} (at any depth) that has at least one "
            "byte-identical twin there; list all the copies, not just the extra ones.",
            root=w.path_ref(root),
            out=w.path_ref(out, "file"),
        )
        rels = sorted(p[len(root) + 1 :] for p in dup_paths)
        lines = [
            "#!/bin/bash",
            f"[ -f {quote(out)} ] || exit 1",
            f'[ "$({_norm_paths(out, root)} | sort)" = {quote(chr(10).join(rels))} ] || exit 1',
        ]
        lines += [f"[ -f {quote(p)} ] || exit 1" for p in files]
        tool, width = w.pick((("md5sum", 32), ("sha256sum", 64), ("md5sum", 32)))
        reference = [
            w.pick(
                (
                    f"find {r} -type f -exec {tool} {{}} + | sort | uniq -w{width} -D | awk '{{print $2}}' "
                    f"> {sh(out)}",
                    f"find {r} -type f -print0 | xargs -0 {tool} | sort | uniq -w{width} --all-repeated | "
                    f"cut -c{width + 3}- > {sh(out)}",
                )
            ),
            f"cat {sh(out)}",
        ]
        return Draft(task=task, check="\n".join(lines) + "\n", reference=reference, difficulty=3, files=files)
    lib_name = w.pick(("library", "photos", "archive", "music", "documents"))
    inc_name = w.pick(("incoming", "import", "inbox", "new", "camera_upload"))
    lib, inc = f"{root}/{lib_name}", f"{root}/{inc_name}"
    ext = w.pick(("jpg", "pdf", "mp3", "txt", "png"))
    taken = set()
    known = {
        f"{lib}/{w.filename(ext)}": _fresh_text(w, taken, w.randint(2, 5)) for _ in range(w.randint(3, 6))
    }
    copies = {
        f"{inc}/{w.filename(ext)}": c for c in w.sample(list(known.values()), w.randint(1, len(known) - 1))
    }
    fresh = {f"{inc}/{w.filename(ext)}": _fresh_text(w, taken) for _ in range(w.randint(1, 3))}
    same_name = w.pick(list(known)).rsplit("/", 1)[1]
    fresh[f"{inc}/{same_name}"] = _fresh_text(w, taken)  # same name as a library file, other content: stays
    files = {**known, **copies, **fresh}
    task = _phrase(
        w,
        "{Some|Several} files in {inc} are copies of files already in {lib} (same content, maybe another name). "
        "{Delete|Remove} those copies from {inc}; keep the ones that are new, and do not touch {lib}.",
        "{Deduplicate|Clean up} {inc} against {lib}: any file in {inc} whose content already exists in {lib} "
        "{goes|must be deleted}. Compare content, not names.",
        "Ticket: {inc} has {re-imported|duplicate} files. Remove every file there that is identical (byte for byte) "
        "to one in {lib}; the rest stay, and {lib} is not to be changed.",
        "Could you delete from {inc} the files that already exist in {lib} with the same content? Names may differ, "
        "and a file with the same name but other content is not a copy.",
        "We imported into {inc} again and half of it was already in {lib}. Purge from {inc} whatever {lib} "
        "already holds (by content - names can differ); {lib} itself stays as it is.",
        inc=w.path_ref(inc),
        lib=w.path_ref(lib),
    )
    lines = ["#!/bin/bash"]
    lines += [f"[ ! -e {quote(p)} ] || exit 1" for p in copies]
    lines += [f"[ -f {quote(p)} ] || exit 1" for p in [*known, *fresh]]
    lib_s, inc_s = sh(lib), sh(inc)
    if w.chance(0.5):
        reference = [
            f'for f in {inc_s}/*; do for g in {lib_s}/*; do cmp -s "$f" "$g" && {{ rm "$f"; break; }}; '
            "done; done"
        ]
    else:
        reference = [
            f"md5sum {lib_s}/* | cut -d' ' -f1 > /tmp/known.md5",
            f'for f in {inc_s}/*; do grep -qx "$(md5sum < "$f" | cut -d\' \' -f1)" /tmp/known.md5 && '
            'rm "$f"; done',
        ]
    reference.append(f"ls {inc_s}")
    return Draft(task=task, check="\n".join(lines) + "\n", reference=reference, difficulty=4, files=files)


# ==== issue 39: usage by owner, a cache pruned to a budget, allocation (sparse files and ballast) ===================
# Where real tasks start (``workplace``); checks with ``py_check`` read meaning: the totals, the files left, the blocks
# a file really holds.
def _frag(w: World, template: str, **values: object) -> str:
    return w.spin(template, capitalize=False, **values)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _rel_to(path: str, wd: str) -> str:
    return posixpath.relpath(path, wd) if path.startswith(wd + "/") else path


_PATHS_LIB = r"""
def paths_in(report, wd, base):
    out = []
    for line in text(report).splitlines():
        p = line.strip().split()[-1] if line.strip() else ""
        if not p:
            continue
        if not p.startswith("/"):
            p = p[2:] if p.startswith("./") else p
            a, b = os.path.join(wd, p), os.path.join(base, p)
            p = a if os.path.lexists(a) or not os.path.lexists(b) else b
        out.append(os.path.normpath(p))
    return out
"""


@family(
    "disk-usage-by-owner",
    "disk",
    "total the space each owner's files take under a shared tree (find -printf/stat/du -c by user) into a report",
)
def usage_by_owner(w: World) -> Draft:
    user = w.pick(("root", "root", "operator"))
    app = w.project()
    wd, setup = workplace(w, user, app)
    tree = f"{wd}/{w.pick(('shared', 'uploads', 'scratch', 'projects', 'incoming'))}"
    owners = [w.username() for _ in range(w.randint(3, 4))]
    setup.append(" && ".join(f"useradd -M -s /usr/sbin/nologin {o}" for o in owners))
    subs = w.sample(_SUBDIRS, w.randint(2, 3))
    totals = {o: 0 for o in owners}
    sizes: dict[str, int] = {}
    owner_of: dict[str, str] = {}
    for i in range(w.randint(7, 12)):
        o = owners[i % len(owners)] if i < len(owners) else w.pick(owners)
        name = w.filename(w.pick(_BIG_EXTS))
        if w.chance(0.15):
            name = "." + name
        path = f"{tree}/{w.pick(subs)}/{name}" if w.chance(0.8) else f"{tree}/{name}"
        sizes[path] = w.randint(1, 300) * KIB + w.randint(0, 1023)
        owner_of[path] = o
        totals[o] += sizes[path]
    while len(set(totals.values())) < len(totals):  # no ties: an order must be one order
        path = w.pick(list(sizes))
        sizes[path] += 7
        totals[owner_of[path]] += 7
    chowns = [f"chown {o} {quote(p)}" for p, o in owner_of.items()]
    dirs = sorted({posixpath.dirname(p) for p in sizes})
    setup.append(
        " && ".join(
            [f"mkdir -p {' '.join(quote(d) for d in dirs)}"]
            + [f"head -c {n} /dev/zero > {quote(p)}" for p, n in sizes.items()]
            + chowns
            + [f"chmod -R a+rX {quote(tree)}"]
        )
    )
    w.note(*owners)
    mode = w.pick(("all", "all", "one", "top", "over"))
    report = f"{wd}/{w.pick(('usage', 'owners', 'by_owner', 'space'))}{w.pick(('.txt', '.report', ''))}"
    t, r = _rel_to(tree, wd), _rel_to(report, wd)
    ranked = sorted(totals, key=lambda o: -totals[o])
    spec: dict[str, object] = {"report": report, "mode": mode}
    bytes_note = _frag(
        w, "{in bytes (the sum of the file sizes)|as a byte count (apparent size: the file sizes added up)}"
    )
    if mode == "all":
        spec["rows"] = [[o, totals[o]] for o in ranked]
        task = w.phrase(
            "Write to {r} how much space each owner's files take under {t}: one line `<user> <bytes>` per owner, "
            "{b}, biggest first.",
            "{t} is filling up and nobody admits to it. Produce {r} with every file owner there and the total size "
            "of their files {b}, one `user bytes` line each, largest total first.",
            "Ticket: disk usage by owner for {t}. Output: {r}, lines `<owner> <total bytes>`, sorted by total, "
            "descending. Count every file in the tree, hidden ones too.",
            "Can you tell me who uses the space in {t}? Put `<user> <bytes>` lines in {r}, {b}, top user first.",
            "Goal: {r} ranks the owners of the files under {t} by the space their files take {b}, one `name total` "
            "per line, biggest first.",
            r=r,
            t=t,
            b=bytes_note,
        )
    elif mode == "one":
        who = w.pick(owners)
        spec["value"] = totals[who]
        task = w.phrase(
            "How much space do {who}'s files take under {t}? Write the total {b} to {r} (just the number).",
            "Ticket: {who} is asked to clean up {t}. Put the total size of the files {who} owns there in {r}, "
            "{b}, nothing else in the file.",
            "Write the sum of the sizes of all files owned by {who} under {t} to {r} (a single number of bytes).",
            "Before I talk to {who}: {r} should hold how many bytes {who}'s files use in {t}, subfolders and hidden "
            "files included.",
            who=who,
            r=r,
            t=t,
            b=bytes_note,
        )
    elif mode == "top":
        spec["value"] = ranked[0]
        task = w.phrase(
            "Which user owns the most data under {t}, counting the file sizes? Write just that user name to {r}.",
            "Find the biggest space consumer among the file owners of {t} (total file size, subfolders included) "
            "and put their login name in {r}.",
            "Ticket: {t} is full. Name the owner whose files take the most bytes there, in {r}.",
            r=r,
            t=t,
        )
    else:
        limit = (totals[ranked[1]] + totals[ranked[2]]) // 2 // KIB
        over = [o for o in ranked if totals[o] > limit * KIB]
        spec["names"] = sorted(over)
        w.note(limit)
        task = w.phrase(
            "List the users whose files under {t} add up to more than {k} KiB ({kb} bytes), one name per line, in "
            "{r}.",
            "Who is over {k} KiB in {t}? Sum the sizes of each owner's files there and write the names of those "
            "over the limit to {r}, one per line.",
            "Ticket: quota review of {t}: owners with more than {kb} bytes of files go in {r} (one login a line).",
            k=limit,
            kb=limit * KIB,
            r=r,
            t=t,
        )
    sums = "awk '{s[$1] += $2} END {for (u in s) print u, s[u]}'"
    how = w.randint(0, 4)
    if how == 0:
        pipe = f"find {t} -type f -printf '%u %s\\n' | {sums}"
    elif how == 1:
        pipe = f"find {t} -type f -exec stat -c '%U %s' {{}} + | {sums}"
    elif how == 2:
        pipe = (
            f"for u in $(find {t} -type f -printf '%u\\n' | sort -u); do echo \"$u $(find {t} -type f -user $u "
            "-printf '%s\\n' | paste -sd+ | bc)\"; done"
        )
    elif how == 3:
        pipe = (
            f'for u in $(stat -c %U $(find {t} -type f) | sort -u); do echo "$u $(find {t} -type f -user $u -print0 '
            '| du -cb --files0-from=- | tail -n 1 | cut -f1)"; done'
        )
    else:
        pipe = (
            f'python3 -c "import os, pwd, collections; s = collections.Counter(); '
            f"[s.update({{pwd.getpwuid(os.lstat(p).st_uid).pw_name: os.lstat(p).st_size}}) for d, _, fs in os.walk('{t}') "
            'for p in (os.path.join(d, f) for f in fs)]; [print(u, n) for u, n in s.items()]"'
        )
    ref = [w.pick((f"ls -la {t}", f"du -sh {t}", f"find {t} -type f -ls | head"))]
    if mode == "all":
        ref.append(f"{pipe} | sort -k2,2nr > {r}")
    elif mode == "top":
        ref.append(f"{pipe} | sort -k2 -nr | head -n 1 | cut -d' ' -f1 > {r}")
    elif mode == "over":
        ref.append(f"{pipe} | awk '$2 > {limit * KIB}' | cut -d' ' -f1 > {r}")
    else:
        ref.append(
            w.pick(
                (
                    f"find {t} -type f -user {who} -printf '%s\\n' | paste -sd+ | bc > {r}",
                    f"find {t} -type f -user {who} -printf '%s\\n' | awk '{{s += $1}} END {{print s}}' > {r}",
                    f"find {t} -type f -user {who} -print0 | du -cb --files0-from=- | tail -n 1 | cut -f1 > {r}",
                    f"{pipe} | awk '$1 == \"{who}\" {{print $2}}' > {r}",
                )
            )
        )
    ref.append(f"cat {r}")
    check = py_check(
        spec,
        r"""
if not os.path.isfile(S["report"]):
    no(f"no {S['report']}")
lines = [l.strip() for l in text(S["report"]).splitlines() if l.strip()]
if S["mode"] == "all":
    rows = [re.split(r"[\s,:;]+", l) for l in lines]
    got = [[r[0], int(r[1])] if len(r) == 2 and r[1].isdigit() else l for r, l in zip(rows, lines)]
    if got != S["rows"]:
        no(f"report: {lines}")
elif S["mode"] == "over":
    if sorted(lines) != S["names"]:
        no(f"report: {lines}")
elif lines != [str(S["value"])]:
    no(f"report: {lines}")
""",
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty={"all": 3, "one": 2, "top": 2, "over": 3}[mode],
        setup=setup,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )


@family(
    "disk-cache-budget-prune",
    "disk",
    "prune a cache folder oldest-first down to a size budget, or to its newest N entries, keeping its markers",
)
def cache_budget_prune(w: World) -> Draft:
    user = w.pick(("root", "operator"))
    app = w.project()
    if user == "root":
        cache = w.pick((f"/var/cache/{app}", f"/srv/{app}/cache", f"/opt/{app}/var/cache"))
        wd = w.pick(("/root", posixpath.dirname(cache)))
        setup: list[str] = []
    else:
        wd, setup = workplace(w, user, app)
        cache = w.pick(
            (f"{HOME}/.cache/{app}", f"{wd}/cache", f"{wd}/.cache/{w.pick(('pip', 'build', 'thumbs'))}")
        )
    ext = w.pick(("blob", "chunk", "cache", "bin", "pack"))
    nested = w.chance(0.5)
    n = w.randint(8, 13)
    start = w.date()
    entries: list[tuple[str, int, str]] = []  # path, size, mtime (oldest first)
    for _ in range(n):
        h = w.token(10)
        path = f"{cache}/{h[:2]}/{h}.{ext}" if nested else f"{cache}/{h}.{ext}"
        size = w.randint(20, 220) * KIB
        start += timedelta(hours=w.randint(3, 20), minutes=w.randint(0, 59))  # strictly newer each time
        stamp = start
        entries.append((path, size, f"{stamp:%Y-%m-%d %H:%M:%S}"))
    markers = {f"{cache}/CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n"}
    if w.chance(0.5):
        markers[f"{cache}/{w.pick(('index.json', '.lock', 'README'))}"] = "{}\n"
    mode = w.pick(("budget", "budget", "keep"))
    sizes_newest_first = [e[1] for e in reversed(entries)]
    if mode == "budget":
        keep_n = w.randint(3, n - 3)
        budget = sum(sizes_newest_first[:keep_n]) + w.randint(0, sizes_newest_first[keep_n] - 1)
        budget_kib = budget // KIB
        keep_n = max(j for j in range(n + 1) if sum(sizes_newest_first[:j]) <= budget_kib * KIB)
        w.note(budget_kib)
    else:
        keep_n = w.randint(2, n - 3)
        w.note(keep_n)
    kept = [e[0] for e in entries[n - keep_n :]]
    dirs = sorted({posixpath.dirname(e[0]) for e in entries} | {cache})
    owner = user if user == "operator" else w.pick(("root", app))
    if owner == app:
        setup.append(f"id -u {app} >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin {app}")
    setup.append(
        " && ".join(
            [f"mkdir -p {' '.join(quote(d) for d in dirs)}"]
            + [
                f"head -c {s} /dev/zero > {quote(p)} && touch -d {quote(t)} {quote(p)}"
                for p, s, t in w.shuffled(entries)
            ]
            + [f"chown -R {owner}: {quote(cache)}"]
        )
    )
    c = _rel_to(cache, wd) if cache.startswith(wd + "/") else cache
    if c.startswith(HOME + "/") and user == "operator":
        c = "~" + c[len(HOME) :]
    layout = _frag(w, "(entries sit in two-character subfolders)") if nested else ""
    keep_markers = _frag(
        w,
        "{CACHEDIR.TAG and the other non-.{e} files stay|only .{e} files are entries: CACHEDIR.TAG and friends stay}",
        e=ext,
    )
    if mode == "budget":
        task = w.phrase(
            "Shrink the cache {c} to at most {k} KiB of .{e} entries by deleting the oldest entries first (by "
            "modification time), no more than needed. {m}. {l}",
            "{c} has outgrown its budget of {k} KiB. Evict entries oldest-first (mtime) until the .{e} files add up "
            "to {k} KiB ({kb} bytes) or less; keep as many of the newest as fit. {m}. {l}",
            "Ticket: cache {c} over quota. Policy: the total size of the .{e} entries must be <= {kb} bytes; evict "
            "least recently modified first and stop as soon as it fits. {m}. {l}",
            "Can you prune {c}? Delete the oldest .{e} files, one after another, until all the remaining ones "
            "together take no more than {k} KiB. {m}. {l}",
            "Goal: {c} keeps its newest .{e} entries that fit in {k} KiB (sizes in bytes, {kb} in all) and nothing "
            "older. {m}. {l}",
            c=c,
            k=budget_kib,
            kb=budget_kib * KIB,
            e=ext,
            m=_capital(keep_markers),
            l=_capital(layout) if layout else "",
        )
    else:
        task = w.phrase(
            "Keep only the {k} most recently modified .{e} entries in {c} and delete the older ones. {m}. {l}",
            "{c} keeps growing. Trim it to its newest {k} .{e} files (by mtime); everything older goes. {m}. {l}",
            "Ticket: retention for {c} is {k} entries. Remove every .{e} file but the {k} newest. {m}. {l}",
            "Could you delete all but the latest {k} .{e} files in the cache {c}? {m}. {l}",
            c=c,
            k=keep_n,
            e=ext,
            m=_capital(keep_markers),
            l=_capital(layout) if layout else "",
        )
    listing = f"find {c} -name '*.{ext}' -printf '%T@ %s %p\\n'"
    ref = [w.pick((f"du -sb {c}", f"ls -la {c}", f"find {c} -type f | head"))]
    how = w.randint(0, 3)
    if mode == "budget":
        b = budget_kib * KIB
        if how == 0:
            ref.append(f"{listing} | sort -rn | awk -v b={b} '{{t += $2}} t > b {{print $3}}' | xargs -r rm")
        elif how == 1:
            ref.append(
                f"{listing} | sort -rn | awk '{{t += $2; if (t > {b}) print $3}}' | while read -r f; do rm \"$f\"; done"
            )
        elif how == 2:
            ref.append(
                f"while [ \"$(find {c} -name '*.{ext}' -printf '%s\\n' | paste -sd+ | bc)\" -gt {b} ]; do "
                f"{listing.replace(' %s', '')} | sort -n | head -n 1 | cut -d' ' -f2 | xargs rm; done"
            )
        else:
            ref.append(
                f"python3 - <<'EOF'\nimport glob, os\nfs = sorted(glob.glob(os.path.expanduser('{c}') + '/**/*.{ext}', "
                "recursive=True), key=os.path.getmtime)\ntotal = sum(map(os.path.getsize, fs))\nwhile total > "
                f"{b}:\n    f = fs.pop(0)\n    total -= os.path.getsize(f)\n    os.remove(f)\nEOF"
            )
    else:
        if how == 0:
            ref.append(
                f"{listing.replace(' %s', '')} | sort -rn | tail -n +{keep_n + 1} | cut -d' ' -f2 | xargs -r rm"
            )
        elif how == 1 and not nested:
            ref.append(f"ls -t {c}/*.{ext} | tail -n +{keep_n + 1} | xargs -r rm --")
        elif how == 2:
            ref.append(
                f"{listing.replace(' %s', '')} | sort -n | head -n -{keep_n} | cut -d' ' -f2 | while read -r f; do rm "
                '"$f"; done'
            )
        else:
            ref.append(
                f"{listing.replace(' %s', '')} | sort -rn | sed -n '{keep_n + 1},$p' | cut -d' ' -f2 | xargs -r rm -f"
            )
    ref.append(w.pick((f"du -sb {c}", f"find {c} -name '*.{ext}' | wc -l", f"ls -lR {c}")))
    spec = {
        "mode": mode,
        "cache": cache,
        "ext": ext,
        "kept": sorted(kept),
        "same": {p: md5_text(t) for p, t in markers.items()},
    }
    check = py_check(
        spec,
        r"""
left = sorted(
    os.path.join(d, f) for d, _, fs in os.walk(S["cache"]) for f in fs if f.endswith("." + S["ext"])
)
if left != S["kept"]:
    gone = sorted(set(S["kept"]) - set(left))
    no(f"{len(left)} entries left; newest entries deleted: {len(gone)}; want {len(S['kept'])}")
""",
    )
    files = dict(markers)
    setup.append(f"chown {owner}: " + " ".join(quote(p) for p in markers))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if mode == "budget" else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )


@family(
    "disk-sparse-allocation",
    "disk",
    "work with allocated vs apparent size: make a file sparse in place, reserve a really-allocated ballast file, "
    "or report the sparse files of a tree",
)
def sparse_allocation(w: World) -> Draft:
    user = w.pick(("root", "root", "operator"))
    app = w.project()
    wd, setup = workplace(w, user, app)
    mode = w.pick(("sparsify", "ballast", "report"))
    mib = 1 << 20
    spec: dict[str, object] = {"mode": mode}
    ref: list[str] = []
    files: dict[str, str] = {}
    if mode == "sparsify":
        sub = w.pick(("images", "vm", "disks", "data"))
        name = f"{w.pick((app, w.word()))}.{w.pick(('img', 'raw', 'qcow', 'db'))}"
        path = f"{wd}/{sub}/{name}"
        size = w.randint(12, 40)
        owner = user if user == "operator" else w.pick(("root", app))
        mode_bits = w.pick(("640", "600", "644"))
        blocks = sorted(w.sample(range(size * 256), w.randint(3, 9)))  # 4 KiB data blocks in a sea of zeros
        record = f"/root/.sparse-{w.token(6)}"
        if owner == app:
            setup.append(f"id -u {app} >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin {app}")
        setup.append(
            f"mkdir -p {quote(posixpath.dirname(path))} && head -c {size * mib} /dev/zero > {quote(path)} && "
            + " && ".join(
                f"head -c 4096 /dev/urandom | dd of={quote(path)} bs=4096 seek={b} conv=notrunc status=none"
                for b in blocks
            )
            + f" && chown {owner}: {quote(path)} && chmod {mode_bits} {quote(path)} && "
            f"md5sum {quote(path)} | cut -d' ' -f1 > {record} && chown {user}: {quote(posixpath.dirname(path))}"
        )
        spec.update(path=path, record=record, owner=owner, mode_bits=int(mode_bits, 8), limit=size * mib // 4)
        p = _rel_to(path, wd)
        w.note(name, size)
        keep = _frag(w, "{same path, same content, same owner and mode|owner, mode and content unchanged}")
        task = w.phrase(
            "{p} is a {n} MiB image that is almost all zeros, yet every block of it is allocated. Make it sparse "
            "in place ({keep}) so it uses a fraction of the disk.",
            "Reclaim the space the zero-filled regions of {p} waste: punch holes or rewrite it sparsely; {keep}. "
            "`du` should then report well under a quarter of its {n} MiB.",
            "Ticket: {p} takes {n} MiB on disk but holds little data. Turn it into a sparse file without changing "
            "a byte of its content ({keep}).",
            "Could you make {p} sparse? It must stay byte-for-byte the same file at the same path; {keep}.",
            "Goal: `du -k {p}` shows far less than `ls -l` does, and its content, owner and mode are what they are "
            "now.",
            p=p,
            n=size,
            keep=keep,
        )
        ref.append(w.pick((f"du -k {p}", f"ls -ls {p}", f"stat -c '%s %b %B' {p}")))
        how = w.randint(0, 3)
        if how == 0:
            ref.append(f"fallocate -d {p}")
        elif how == 1:
            ref += [f"cp --sparse=always -p {p} {p}.tmp", f"mv {p}.tmp {p}"]
        elif how == 2:
            ref += [
                f"cp --sparse=always {p} {p}.new",
                f"chown --reference={p} {p}.new",
                f"chmod {mode_bits} {p}.new",
                f"mv {p}.new {p}",
            ]
            if user == "operator":
                ref.pop(2)
        else:
            ref += [
                f"dd if={p} of={p}.sparse bs=4096 conv=sparse status=none",
                f"chmod --reference={p} {p}.sparse"
                if user == "operator"
                else f"chown --reference={p} {p}.sparse && chmod --reference={p} {p}.sparse",
                f"mv {p}.sparse {p}",
            ]
        ref.append(f"du -k {p}")
        difficulty = 3
    elif mode == "ballast":
        n = w.pick((8, 16, 24, 32, 48))
        name = w.pick(("ballast", "reserve.img", ".space-reserve", "emergency.bin", "spacer"))
        path = f"{wd}/{w.pick(('', 'reserve/', 'var/'))}{name}"
        spec.update(path=path, size=n * mib, uid=0 if user == "root" else 1000)
        p = _rel_to(path, wd)
        w.note(n, name)
        task = w.phrase(
            "Create a ballast file {p} of exactly {n} MiB whose blocks are really allocated (not a sparse file), "
            "readable and writable by its owner only. When the disk fills up, deleting it frees {n} MiB at once.",
            "We want {n} MiB of reserved space we can free in an emergency: write {p}, {n} MiB ({b} bytes), fully "
            "allocated on disk, mode 600.",
            "Ticket: add a {n} MiB space reserve at {p}. It must occupy real disk blocks (a sparse file frees "
            "nothing), and only its owner may read or write it.",
            "Could you put a {n} MiB placeholder file at {p}? Allocated, not sparse; permissions rw for the owner, "
            "nothing for anyone else.",
            "Goal: {p} exists, is {b} bytes long, `du` counts all of it, and its mode is 0600.",
            p=p,
            n=n,
            b=n * mib,
        )
        d = posixpath.dirname(p)
        if d and not d.startswith("/") and d != ".":
            ref.append(f"mkdir -p {d}")
        how = w.randint(0, 4)
        make = (
            f"fallocate -l {n}M {p}",
            f"dd if=/dev/zero of={p} bs=1M count={n} status=none",
            f"head -c {n}M /dev/zero > {p}",
            f"fallocate -l {n * mib} {p}",
            f"python3 -c \"open('{p}', 'wb').write(bytes({n * mib}))\"",
        )[how]
        if w.chance(0.3):
            ref += [f"umask 077 && {make}" if not make.startswith("python") else f"(umask 077; {make})"]
        else:
            ref += [make, w.pick((f"chmod 600 {p}", f"chmod u=rw,go= {p}"))]
        ref.append(f"ls -ls {p}")
        difficulty = 2
    else:
        tree = f"{wd}/{w.pick(('data', 'vm', 'storage', 'images'))}"
        names = [
            f"{tree}/{w.filename(w.pick(('img', 'raw', 'db', 'dat', 'bin')))}" for _ in range(w.randint(4, 7))
        ]
        sparse = w.sample(names, w.randint(1, len(names) - 2))
        cmds = []
        for path in names:
            n = w.randint(2, 12)
            if path in sparse:  # a hole with a little data at the end
                cmds.append(
                    f"dd if=/dev/urandom of={quote(path)} bs=4096 count=1 seek={n * 256 - 1} status=none"
                )
            else:
                cmds.append(f"head -c {n * mib} /dev/urandom > {quote(path)}")
        setup.append(
            f"mkdir -p {quote(tree)} && " + " && ".join(cmds) + f" && chown -R {user}: {quote(tree)}"
        )
        report = f"{wd}/{w.pick(('sparse', 'sparse_files', 'holes'))}.{w.pick(('txt', 'list'))}"
        spec.update(report=report, want=sorted(sparse), wd=wd, base=tree)
        t, r = _rel_to(tree, wd), _rel_to(report, wd)
        task = w.phrase(
            "Which files under {t} are sparse (they occupy fewer disk blocks than their size says)? Write their "
            "paths to {r}, one per line.",
            "A backup tool chokes on sparse files. Find every file in {t} whose allocated size is smaller than its "
            "apparent size and list them in {r}.",
            "Ticket: inventory of sparse files in {t}: output {r}, one path per line, nothing else.",
            "Could you check {t} for files with holes (du much smaller than ls -l) and put their paths in {r}?",
            "Goal: {r} lists exactly the sparse files of {t}.",
            t=t,
            r=r,
        )
        how = w.randint(0, 3)
        ref.append(w.pick((f"ls -ls {t}", f"du -h --apparent-size {t}/*", f"du -h {t}/*")))
        if how == 0:
            ref.append(f"find {t} -type f -printf '%S %p\\n' | awk '$1 < 1 {{print $2}}' > {r}")
        elif how == 1:
            ref.append(
                f'for f in {t}/*; do [ "$(du -k "$f" | cut -f1)" -lt "$(du -k --apparent-size "$f" | cut -f1)" ] '
                f'&& echo "$f"; done > {r}'
            )
        elif how == 2:
            ref.append(
                f"find {t} -type f -exec stat -c '%b %B %s %n' {{}} + | awk '$1 * $2 < $3 {{print $4}}' > {r}"
            )
        else:
            ref.append(
                f"python3 -c \"import os; [print(p) for p in (os.path.join('{t}', f) for f in sorted(os.listdir('{t}'))) "
                f'if os.stat(p).st_blocks * 512 < os.stat(p).st_size]" > {r}'
            )
        ref.append(f"cat {r}")
        difficulty = 3
    check = py_check(
        spec,
        _PATHS_LIB
        + r"""
if S["mode"] == "sparsify":
    p = S["path"]
    if md5(p) != text(S["record"]).strip():
        no("the content changed")
    st = os.stat(p)
    if st.st_uid != __import__("pwd").getpwnam(S["owner"]).pw_uid or stat.S_IMODE(st.st_mode) != S["mode_bits"]:
        no("owner or mode changed")
    if st.st_blocks * 512 > S["limit"]:
        no(f"still {st.st_blocks * 512} bytes allocated")
elif S["mode"] == "ballast":
    p = S["path"]
    if not os.path.isfile(p):
        no(f"no {p}")
    st = os.stat(p)
    if st.st_size != S["size"] or st.st_blocks * 512 < S["size"]:
        no(f"size {st.st_size}, allocated {st.st_blocks * 512}")
    if stat.S_IMODE(st.st_mode) != 0o600 or st.st_uid != S["uid"]:
        no("want mode 600, owned by the user")
else:
    if not os.path.isfile(S["report"]):
        no(f"no {S['report']}")
    got = paths_in(S["report"], S["wd"], S["base"])
    if sorted(got) != S["want"]:
        no(f"listed {got}")
""",
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=difficulty,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )
