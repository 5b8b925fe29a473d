"""Files: moving, copying, finding and organising files by name, age, size and type."""

from __future__ import annotations

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import (
    FIRST_NAMES,
    HOME,
    PROJECTS,
    WORDS,
    World,
    quote,
    session_variables,
)
from bashgym_assets.scenarios.factory.world import shell_paths as _shell_paths


def _spin(w: World, template: str, capitalize: bool = True, **values: object) -> str:
    return w.spin(template, capitalize=capitalize, **values)


def _phrase(w: World, *templates: str, **values: object) -> str:
    return w.phrase(*templates, **values)


def _ere(text: str) -> str:
    """``text`` as a sed extended regular expression (``#`` delimiter) matching itself."""
    return "".join("\\" + c if c in "\\.[]*^$|+?(){}#" else c for c in text)


def _norm_paths(out: str, root: str) -> str:
    """Bash that prints the paths listed in ``out`` relative to ``root``, however the operator wrote them: absolute,
    ``./x`` from inside the folder, ``folder/x`` from the home."""
    rel_root = root[len(HOME) + 1 :]
    prefixes = "|".join(["\\./", _ere(root + "/"), _ere(f"~/{rel_root}/"), _ere(rel_root + "/")])
    return f"sed -E -e 's/[[:space:]]+$//' -e {quote(f's#^({prefixes})##')} {quote(out)} | grep -v '^$'"


def _same(path: str, text: str) -> str:
    """A check line: ``path`` is a file holding ``text``."""
    return f'[ -f {quote(path)} ] && [ "$(cat {quote(path)})" = {quote(text.rstrip(chr(10)))} ] || exit 1'


@family("files-move-older-than", "files", "move the files older than N days from one folder to another")
def move_older_than(w: World) -> Draft:
    src = f"{HOME}/{w.dirname()}"
    dst = f"{HOME}/{w.pick(('archive', 'old', 'attic', 'stale', 'backup'))}_{w.word()}"
    days = w.pick((3, 5, 7, 10, 14, 30, 60, 90))
    ext = w.pick(("log", "csv", "txt", "json", None))
    n_old, n_new = w.randint(2, 5), w.randint(2, 5)
    w.note(days)
    old = [w.filename(ext) for _ in range(n_old)]
    new = [w.filename(ext) for _ in range(n_new)]
    # decoys: an old file of another type stays when the task names a type
    decoy = w.filename("bak") if ext else None
    nested = w.chance(0.3)
    files = {f"{src}/{name}": f"{w.pick(w.lines(3))}\n" for name in old + new + ([decoy] if decoy else [])}
    setup = [f"touch -d '{days + w.randint(2, 40)} days ago' " + " ".join(quote(f"{src}/{n}") for n in old)]
    if decoy:
        setup.append(f"touch -d '{days + 30} days ago' {quote(f'{src}/{decoy}')}")
    setup.append(
        f"touch -d '{max(days - w.randint(1, days), 0)} days ago' "
        + " ".join(quote(f"{src}/{n}") for n in new)
    )
    if not nested:
        setup.append(f"mkdir -p {quote(dst)} && chown operator:operator {quote(dst)}")
    what = f"{ext} files" if ext else w.pick(("files", "regular files"))
    task = w.phrase(
        "{Move|Relocate} {all the|the} {what} in {src} {that is|last modified} more than {days} days {ago|old} into {dst}"
        "{| (create it if needed)}.",
        "{Please |}{clean up|tidy} {src}: {any|all} {what} older than {days} days {should go|need to move|must "
        "be moved} to {dst}; newer ones stay {put|where they are}.",
        "Ticket: {src} is cluttered. {Move|Shift} the {what} not modified in the last {days} days to {dst}.",
        "Can you {move|shift} the {what} from {src} that haven't changed in over {days} days to {dst}?",
        "{dst} should end up holding every {what_one} from {src} that is older than {days} days, and {src} only "
        "the {recent|newer} ones.",
        "{src} is getting crowded. Anything in there {older than|past} {days} days can {live in|go to} {dst} "
        "- leave the recent stuff {alone|where it is}, ok?",
        "Archive policy for {src}: {what} {untouched|unmodified} for more than {days} days belong in {dst}. "
        "Apply it{| now}{|, creating {dst} if it is missing}.",
        what=what,
        what_one=what.removesuffix("s"),
        src=w.path_ref(src),
        dst=w.path_ref(dst),
        days=days,
    )
    check = (
        "\n".join(
            [
                "#!/bin/bash",
                *[f"[ -f {quote(f'{dst}/{n}')} ] && [ ! -e {quote(f'{src}/{n}')} ] || exit 1" for n in old],
                *[f"[ -f {quote(f'{src}/{n}')} ] && [ ! -e {quote(f'{dst}/{n}')} ] || exit 1" for n in new],
                *([f"[ -f {quote(f'{src}/{decoy}')} ] || exit 1"] if decoy else []),
            ]
        )
        + "\n"
    )
    name_filter = f" -name '*.{ext}'" if ext else ""
    sh = _shell_paths(w)
    s, d = sh(src), sh(dst)
    sel = f"find {s} -maxdepth 1 -type f{name_filter} -mtime +{days}"
    move = w.pick(
        (
            f"{sel} -exec mv -t {d} {{}} +",
            f"{sel} -exec mv {{}} {d}/ \\;",
            f"{sel} -print0 | xargs -0 -r mv -t {d}",
            f'{sel} | while read -r f; do mv "$f" {d}/; done',
            f'for f in $({sel}); do mv "$f" {d}/; done',
            "python3 -c 'import os, shutil, sys, time; s, d, n, e = sys.argv[1:]; "
            "[shutil.move(os.path.join(s, f), d) for f in os.listdir(s) if os.path.isfile(os.path.join(s, f)) "
            "and f.endswith(e) and time.time() - os.path.getmtime(os.path.join(s, f)) > int(n) * 86400]"
            f"' {s} {d} {days} {quote('.' + ext) if ext else quote('')}",
        )
    )
    reference = [
        *([f"{sel}"] if w.chance(0.3) else []),
        w.pick((f"mkdir -p {d}", f"[ -d {d} ] || mkdir {d}", f"install -d {d}")),
        move,
        w.pick((f"ls {d}", f"ls -l {d} {s}")),
    ]
    return Draft(
        task=task, check=check, reference=reference, difficulty=2 if not ext else 3, files=files, setup=setup
    )


@family("files-count-by-extension", "files", "count the files of one type in a tree and write the number")
def count_by_extension(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    ext = w.pick(("py", "md", "json", "csv", "log", "yaml", "sh"))
    other = w.pick([e for e in ("txt", "conf", "ini", "xml", "dat") if e != ext])
    subdirs = [w.dirname() for _ in range(w.randint(1, 3))]
    targets, decoys = [], []
    for _ in range(w.randint(2, 9)):
        sub = w.pick(["", *subdirs])
        targets.append(f"{root}/{sub + '/' if sub else ''}{w.filename(ext)}")
    for _ in range(w.randint(1, 5)):
        sub = w.pick(["", *subdirs])
        decoys.append(f"{root}/{sub + '/' if sub else ''}{w.filename(other)}")
    # a directory named like the extension must not be counted (find -type f)
    decoys_dir = f"{root}/{w.unique(lambda: w.pick(WORDS) + '.' + ext)}"
    out = f"{HOME}/{w.pick(('count', 'total', 'n_files', 'answer'))}_{ext}.txt"
    w.note(ext, other)
    files = {p: "x\n" for p in targets + decoys}
    task = w.phrase(
        "{Count|Find out} how many .{ext} files {there are|exist} {anywhere |}under {root} (subfolders "
        "included) and write {just |only |}the number to {out}.",
        "How many .{ext} files does {root} contain, {counting|including} subdirectories? Put the {count|number} "
        "in {out}.",
        "Ticket: we need the number of *.{ext} files in the {tree|whole tree} at {root}. Save it to {out}{| as a "
        "single number}.",
        "{out} should {contain|hold} nothing but the {count|total} of .{ext} files found {anywhere|at any depth} in "
        "{root}.",
        "How many {ext} files have we got under {root}, subfolders and all? Drop the number in {out}{|, thanks}.",
        "For the {inventory|repo stats|weekly report} I'm tracking how many .{ext} files live in {root}. Folders "
        "that happen to end in .{ext} don't count, only {real|regular} files. Record the total in {out}.",
        ext=ext,
        root=w.path_ref(root),
        out=w.path_ref(out, "file"),
    )
    check = (
        f"#!/bin/bash\n[ -f {quote(out)} ] || exit 1\n"
        f"[ \"$(tr -d '[:space:]' < {quote(out)})\" = '{len(targets)}' ]\n"
    )
    sh = _shell_paths(w)
    r, o = sh(root), sh(out)
    count = w.pick(
        (
            f"find {r} -type f -name '*.{ext}' | wc -l > {o}",
            f"find {r} -type f -name '*.{ext}' -printf . | wc -c > {o}",
            f"find {r} -type f | grep -c '\\.{ext}$' > {o}",
            f'n=0; shopt -s globstar; for f in {r}/**/*.{ext}; do [ -f "$f" ] && n=$((n+1)); done; echo $n > {o}',
            'python3 -c \'import pathlib, sys; print(sum(p.is_file() for p in pathlib.Path(sys.argv[1]).rglob("*." '
            f"+ sys.argv[2])))' {r} {ext} > {o}",
            f"find {r} -type f -name '*.{ext}' -print0 | tr -cd '\\0' | wc -c > {o}",
        )
    )
    reference = [*([f"find {r} -name '*.{ext}'"] if w.chance(0.3) else []), count, f"cat {o}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2,
        files=files,
        setup=[f"mkdir -p {quote(decoys_dir)} && chown -R operator:operator {quote(root)}"],
    )


# ---- files-rename-pattern -------------------------------------------------------------------------------------------
_EXT_RENAMES = (
    ("jpeg", "jpg"),
    ("htm", "html"),
    ("yml", "yaml"),
    ("text", "txt"),
    ("markdown", "md"),
    ("JPG", "jpg"),
    ("tif", "tiff"),
    ("mpeg", "mpg"),
)


def _title(w: World) -> str:
    return w.pick(
        (
            f"{w.pick(WORDS).title()} {w.pick(WORDS)}",
            f"{w.pick(PROJECTS).title()} Report {w.randint(1, 12)}",
            f"Meeting Notes {w.randint(1, 31)}",
            f"{w.pick(FIRST_NAMES).title()} CV",
            f"{w.pick(WORDS)} {w.pick(WORDS)} {w.pick(WORDS)}",
            f"Invoice {w.randint(100, 999)}",
        )
    )


@family(
    "files-rename-pattern",
    "files",
    "rename many files by a pattern (extension, prefix, spaces, case, suffix)",
)
def rename_pattern(w: World) -> Draft:
    folder = f"{HOME}/{w.dirname()}"
    mode = w.pick(("ext", "prefix", "spaces", "lower", "suffix"))
    renames: dict[str, str] = {}  # old name -> new name, both directly in folder
    keep: list[str] = []  # names in the folder that must stay as they are
    sh = _shell_paths(w)
    f = sh(folder)
    if mode == "ext":
        old, new = w.pick(_EXT_RENAMES)
        for _ in range(w.randint(2, 5)):
            name = w.filename(old)
            renames[name] = name[: -len(old)] + new
        keep = [
            w.filename(w.pick(("txt", "csv", "png", new if new != "jpg" else "gif")))
            for _ in range(w.randint(1, 3))
        ]
        w.note(old, new)
        rule = (
            f"n.endswith('.{old}')",
            f"n[: -{len(old) + 1}] + '.{new}'",
            f"/\\.{old}$/",
            f'n = $0; sub(/\\.{old}$/, ".{new}", n)',
            f"($n = $_) =~ s/\\.{old}$/.{new}/",
            f"*.{old}",
            f'"${{f%.{old}}}.{new}"',
        )
        what = _spin(
            w,
            "{change the extension of every .{old} file to .{new}|rename every *.{old} file to *.{new} "
            "(same name, new extension)}",
            old=old,
            new=new,
            capitalize=False,
        )
        cmd = w.pick(
            (
                f'cd {f} && for x in *.{old}; do mv -- "$x" "${{x%.{old}}}.{new}"; done',
                f'for x in {f}/*.{old}; do mv "$x" "${{x%.{old}}}.{new}"; done',
                f"find {f} -maxdepth 1 -type f -name '*.{old}' -exec sh -c 'mv \"$1\" \"${{1%.{old}}}.{new}\"' "
                "_ {} \\;",
            )
        )
    elif mode == "prefix":
        ext = w.pick(("csv", "pdf", "log", "txt", "json"))
        prefix = w.pick(
            (f"{w.date():%Y-%m-%d}_", f"{w.date():%Y%m%d}-", "old_", "archived-", f"{w.pick(PROJECTS)}_")
        )
        for _ in range(w.randint(2, 5)):
            name = w.filename(ext)
            renames[name] = prefix + name
        keep = [
            w.filename(w.pick([e for e in ("md", "conf", "sh", "xml") if e != ext]))
            for _ in range(w.randint(1, 2))
        ]
        w.note(prefix, ext)
        rule = (
            f"n.endswith('.{ext}')",
            f"{prefix!r} + n",
            f"/\\.{ext}$/",
            f'n = "{prefix}" $0',
            f'$n = /\\.{ext}$/ ? "{prefix}$_" : $_',
            f"*.{ext}",
            f'{quote(prefix)}"$f"',
        )
        what = _spin(
            w,
            "{add the prefix '{prefix}' to the name of every .{ext} file|prefix every *.{ext} file name "
            "with '{prefix}'}",
            prefix=prefix,
            ext=ext,
            capitalize=False,
        )
        cmd = w.pick(
            (
                f'cd {f} && for x in *.{ext}; do mv -- "$x" "{prefix}$x"; done',
                f'cd {f} && for x in *.{ext}; do mv -- "$x" {quote(prefix)}"$x"; done',
            )
        )
    elif mode == "spaces":
        for _ in range(w.randint(2, 5)):
            name = w.unique(lambda: f"{_title(w)}.{w.pick(('txt', 'pdf', 'docx', 'md'))}")
            renames[name] = name.replace(" ", "_")
        keep = [w.filename() for _ in range(w.randint(1, 2))]
        rule = (
            "' ' in n",
            "n.replace(' ', '_')",
            "/ /",
            'n = $0; gsub(/ /, "_", n)',
            "($n = $_) =~ s/ /_/g",
            "* *",
            '"${f// /_}"',
        )
        what = _spin(
            w,
            "{replace the spaces in the file names with underscores|rename the files whose names contain "
            "spaces, turning each space into an underscore}",
            capitalize=False,
        )
        cmd = w.pick(
            (
                f'cd {f} && for x in *\\ *; do mv -- "$x" "${{x// /_}}"; done',
                f"cd {f} && for x in *' '*; do mv -- \"$x\" \"$(echo \"$x\" | tr ' ' '_')\"; done",
            )
        )
    elif mode == "lower":
        keep = [w.filename() for _ in range(w.randint(1, 2))]
        while len(renames) < 2 or (len(renames) < 5 and w.chance(0.5)):
            name = (
                w.pick((str.upper, str.title))(w.pick(WORDS) + w.pick(("", "_" + w.pick(WORDS))))
                + "."
                + w.pick(("TXT", "txt", "CSV", "Md", "PDF"))
            )
            if name.lower() not in keep and name.lower() not in renames.values():  # no two names collide
                renames[name] = name.lower()
        w.note(*renames)
        rule = ("n != n.lower()", "n.lower()", "/[A-Z]/", "n = tolower($0)", "$n = lc", "*[A-Z]*", '"${f,,}"')
        what = _spin(
            w,
            "{rename every file whose name has upper-case letters to the same name in lower case|make "
            "all file names lower case}",
            capitalize=False,
        )
        cmd = w.pick(
            (
                f'cd {f} && for x in *[A-Z]*; do mv -- "$x" "${{x,,}}"; done',
                f'cd {f} && for x in *[A-Z]*; do mv -- "$x" "$(echo "$x" | tr \'A-Z\' \'a-z\')"; done',
            )
        )
    else:
        suffix = w.pick(("_final", "-copy", "_old", "_v2", "-draft"))
        for _ in range(w.randint(2, 5)):
            name = w.filename()
            stem, ext = name.rsplit(".", 1)
            renames[f"{stem}{suffix}.{ext}"] = name
        keep = [w.filename() for _ in range(w.randint(1, 2))]
        w.note(suffix)
        rule = (
            f"'{suffix}.' in n",
            f"n.replace('{suffix}.', '.')",
            f'index($0, "{suffix}.")',
            f'n = $0; sub(/{suffix}\\./, ".", n)',
            f"($n = $_) =~ s/{suffix}\\././",
            f"*{suffix}.*",
            f'"${{f/{suffix}./.}}"',
        )
        what = _spin(
            w,
            "{remove '{suffix}' from the end of every file name that has it (before the extension)|drop "
            "the '{suffix}' suffix from the file names (name{suffix}.ext becomes name.ext)}",
            suffix=suffix,
            capitalize=False,
        )
        cmd = w.pick(
            (
                f'cd {f} && for x in *{suffix}.*; do mv -- "$x" "${{x/{suffix}./.}}"; done',
                f'cd {f} && for x in *{suffix}.*; do mv -- "$x" "$(echo "$x" | sed \'s/{suffix}\\././\')"; '
                "done",
            )
        )
    py_cond, py_new, awk_cond, awk_new, perl_new, glob, bash_new = rule
    approach = w.pick(("shell", "shell", "shell", "python", "awk", "perl", "while"))
    if approach == "while":  # NUL-separated names from find, renamed one by one
        cmd = (
            f"cd {f} && find . -maxdepth 1 -type f -name {quote(glob)} -print0 | "
            f'while IFS= read -r -d \'\' f; do f="${{f#./}}"; mv -- "$f" {bash_new}; done'
        )
    if approach == "python":  # os.rename over the folder's files
        code = (
            f"import os; [os.rename(n, {py_new}) for n in os.listdir('.') if os.path.isfile(n) and {py_cond}]"
        )
        cmd = f"cd {f} && python3 -c {quote(code)}"
    elif approach == "awk":  # awk writes the mv commands, sh runs them
        prog = f'{awk_cond} {{{awk_new}; printf "mv -- \\"%s\\" \\"%s\\"\\n", $0, n}}'
        cmd = f"cd {f} && find . -maxdepth 1 -type f -printf '%f\\n' | awk {quote(prog)} | sh"
    elif approach == "perl":  # perl's rename over the folder's files
        code = f"for (grep {{ -f }} glob('*')) {{ my $n; {perl_new}; rename $_, $n if $n ne $_ }}"
        cmd = f"cd {f} && perl -e {quote(code)}"
    sub = f"{folder}/{w.pick(('old', 'archive', 'nested', 'keep', 'misc'))}"
    sub_file = f"{sub}/{w.pick(list(renames))}"  # same pattern one level down: out of scope
    files = {f"{folder}/{n}": f"{n} {w.token(6)}\n" for n in [*renames, *keep]}
    files[sub_file] = "nested copy\n"
    task = _phrase(
        w,
        "In {folder}, {what}. {Only the files directly in it:|Only the top level:} {leave|do not touch} its "
        "subfolders.",
        "{Please |}{what} in {folder} (not in its subfolders). {Other files keep their names.|Files that do not "
        "match stay as they are.}",
        "Ticket: {naming cleanup|rename job} in {folder}: {what}. Subdirectories are out of scope.",
        "Could you {what} in {folder}? {Just the files at its top level, not in subfolders.|Leave subfolders alone.}",
        "The names in {folder} are inconsistent and a script downstream trips over them. Fix that at the top "
        "level of the folder: {what}. Anything in a subfolder is {someone else's|a separate} problem.",
        "{folder}, top level only, no subfolders: {what}.",
        "Is there a quick way to {what} in {folder}? Do it for me, but only for the files sitting directly "
        "in it.",
        folder=w.path_ref(folder),
        what=what,
    )
    lines = ["#!/bin/bash"]
    for old_name, new_name in renames.items():
        lines.append(_same(f"{folder}/{new_name}", files[f"{folder}/{old_name}"]))
        lines.append(f"[ ! -e {quote(f'{folder}/{old_name}')} ] || exit 1")
    lines += [_same(f"{folder}/{n}", files[f"{folder}/{n}"]) for n in keep]
    lines.append(_same(sub_file, "nested copy"))
    reference = ([f"ls {f}"] if w.chance(0.5) else []) + [cmd, f"ls {f}"]
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty=3 if mode in ("spaces", "lower", "suffix") else 2,
        files=files,
    )


# ---- files-copy-preserve --------------------------------------------------------------------------------------------
@family(
    "files-copy-preserve",
    "files",
    "copy files or a tree keeping modes and timestamps (cp -a, cp -p, rsync -a)",
)
def copy_preserve(w: World) -> Draft:
    src = f"{HOME}/{w.dirname()}"
    whole = w.chance(0.55)
    ext = w.pick(("sh", "conf", "py", "pem", "ini"))
    other = w.pick([e for e in ("txt", "md", "log", "csv") if e != ext])
    w.note(ext, other)
    sub = f"{src}/{w.pick(('lib', 'etc', 'keys', 'hooks', 'extra'))}"
    chosen = [f"{src}/{w.filename(ext)}" for _ in range(w.randint(2, 4))]
    rest = [f"{src}/{w.filename(other)}" for _ in range(w.randint(1, 3))] + [f"{sub}/{w.filename(ext)}"]
    files = {p: f"{p.rsplit('/', 1)[1]} {w.token(8)}\n" for p in chosen + rest}
    setup = []
    for p in files:
        mode = w.pick(("600", "640", "644", "700", "750", "755", "444"))
        stamp = f"{w.date('2022-01-01', 600):%Y-%m-%d %H:%M:%S}"
        setup.append(f"chmod {mode} {quote(p)} && touch -d '{stamp}' {quote(p)}")
    setup = [" && ".join(setup)]
    if whole:
        dest = f"{HOME}/{w.pick(('backup', 'copy', 'mirror', 'snapshot'))}_{src.rsplit('/', 1)[1]}"
        targets = {p: dest + p[len(src) :] for p in files}
        what = _spin(
            w,
            "{copy|duplicate} the whole folder {src}, subfolders included, to a new folder {dest} "
            "{(it does not exist yet)|that does not exist yet}",
            src=w.path_ref(src),
            dest=w.path_ref(dest),
            capitalize=False,
        )
    else:
        dest = f"{HOME}/{w.pick(('deploy', 'staging', 'release', 'shared'))}_{w.word()}"
        setup.append(f"mkdir -p {quote(dest)} && chown operator:operator {quote(dest)}")
        targets = {p: f"{dest}/{p.rsplit('/', 1)[1]}" for p in chosen}
        what = _spin(
            w,
            "copy the .{ext} files that sit directly in {src} (not those in subfolders) into {dest}, "
            "which already exists",
            ext=ext,
            src=w.path_ref(src),
            dest=w.path_ref(dest),
            capitalize=False,
        )
    keep = _spin(w, "{keep|preserve} each file's permissions and modification time", capitalize=False)
    task = _phrase(
        w,
        "{what_c}; {keep}.",
        "{what_c}. The copies must {keep|preserve} the {original|same} modes and timestamps.",
        "Ticket: {what}. {keep_c}: {tools compare them|a script compares them} with the originals.",
        "Could you {what}? {keep_c}, please.",
        "Last time someone copied these the timestamps were reset and the {sync|deploy} re-sent everything. "
        "This time: {what}, and {keep}.",
        "Goal: {what} - {identical|the same} content, modes and mtimes as the originals.",
        "{what_c}. {Plain copies won't do|A plain cp is not enough}: {keep}.",
        what=what,
        what_c=what[:1].upper() + what[1:],
        keep=keep,
        keep_c=keep[:1].upper() + keep[1:],
    )
    lines = ["#!/bin/bash"]
    for p, t in targets.items():
        qp, qt = quote(p), quote(t)
        lines.append(f"[ -f {qt} ] && cmp -s {qp} {qt} || exit 1")
        lines.append(f"[ \"$(stat -c '%a %Y' {qt})\" = \"$(stat -c '%a %Y' {qp})\" ] || exit 1")
    lines += [f"[ -f {quote(p)} ] || exit 1" for p in files]
    if not whole:
        lines += [f"[ ! -e {quote(dest + '/' + p.rsplit('/', 1)[1])} ] || exit 1" for p in rest]
    sh = _shell_paths(w)
    s, d = sh(src), sh(dest)
    if whole:
        cmd = w.pick(
            (
                f"cp -a {s} {d}",
                f"cp -rp {s} {d}",
                f"rsync -a {s}/ {d}/",
                f"cp -r --preserve=mode,timestamps {s} {d}",
                f"mkdir {d} && tar -C {s} -cf - . | tar -C {d} -xpf -",
                f"mkdir {d} && cd {s} && find . | cpio -pdm {d}",  # cpio's pass-through mode keeps mtimes (-m)
                "python3 -c 'import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])' " + f"{s} {d}",
            )
        )
        show = w.pick((f"ls -lR {d}", f"diff -r {s} {d} && echo same"))
    else:
        cmd = w.pick(
            (
                f"cp -p {s}/*.{ext} {d}/",
                f"rsync -a {s}/*.{ext} {d}/",
                f"find {s} -maxdepth 1 -type f -name '*.{ext}' -exec cp -p {{}} {d}/ \\;",
                f"cp --preserve=mode,timestamps {s}/*.{ext} {d}/",
                f'for f in {s}/*.{ext}; do cp -p "$f" {d}/; done',
                f"tar -C {s} -cf - $(cd {s} && ls *.{ext}) | tar -C {d} -xpf -",
                f"cd {s} && ls *.{ext} | cpio -pdm {d}",
                "python3 -c 'import glob, shutil, sys; [shutil.copy2(f, sys.argv[2]) for f in "
                f'glob.glob(sys.argv[1] + "/*.{ext}")]\' {s} {d}',
            )
        )
        show = f"ls -l --time-style=long-iso {d}"
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=[cmd, show],
        difficulty=2,
        files=files,
        setup=setup,
    )


# ---- files-organise-by-extension ------------------------------------------------------------------------------------
_CATEGORIES = {
    "images": ("jpg", "png", "gif"),
    "documents": ("pdf", "txt", "docx"),
    "data": ("csv", "json", "xml"),
    "audio": ("mp3", "wav", "flac"),
    "archives": ("zip", "tgz", "7z"),
}


@family("files-organise-by-extension", "files", "sort the files of a folder into subfolders by extension")
def organise_by_extension(w: World) -> Draft:
    folder = f"{HOME}/{w.pick(('downloads', 'desktop', 'inbox', 'unsorted', 'dump', 'scans'))}_{w.word()}"
    by_category = w.chance(0.4)
    if by_category:
        cats = w.sample(tuple(_CATEGORIES), w.randint(2, 3))
        exts = {e: c for c in cats for e in w.sample(_CATEGORIES[c], w.randint(1, 2))}
    else:
        exts = {
            e: e
            for e in w.sample(
                ("pdf", "jpg", "png", "txt", "csv", "mp3", "zip", "log", "json", "md"), w.randint(2, 4)
            )
        }
    names = [w.filename(e) for e in exts] + [w.filename(w.pick(list(exts))) for _ in range(w.randint(2, 6))]
    bare = [
        w.unique(lambda: w.pick(("README", "Makefile", "LICENSE", "TODO", "notes", "Dockerfile")))
        for _ in range(w.randint(0, 2))
    ]
    old = f"{folder}/{w.pick(('old', 'keep', 'misc'))}"
    old_file = f"{old}/{w.filename(w.pick(list(exts)))}"
    files = {f"{folder}/{n}": f"{n}\n" for n in names + bare}
    files[old_file] = "already sorted\n"
    w.note(*exts)
    folder_ref = w.path_ref(folder)
    if by_category:
        rules = "; ".join(
            f"{', '.join('.' + e for e in exts if exts[e] == c)} files go to {c}/" for c in cats
        )
        what = "{move|sort} each file {where} into a subfolder by type: " + rules
    else:
        what = (
            "{move|sort} each file {where} into a subfolder named after its extension (for example every ."
            + next(iter(exts))
            + " file goes to "
            + next(iter(exts))
            + "/ inside it)"
        )
    extra = _spin(
        w,
        "{files without an extension stay where they are|leave files that have no extension in place}; "
        "{the existing subfolder {sub} is not touched|do not touch what is already in {sub}}",
        sub=old.rsplit("/", 1)[1] + "/",
        capitalize=False,
    )
    of_folder, there = what.replace("{where}", "of {folder}"), what.replace("{where}", "{there|in it}")
    task = _phrase(
        w,
        of_folder[:1].upper() + of_folder[1:] + ". {extra_c}.",
        "{folder_c} is a mess. " + there.replace("{move|sort}", "{Move|Sort}") + "; {extra}.",
        "Ticket: organise {folder}: " + there + ". {extra_c}.",
        "Could you " + of_folder + "? {extra_c}.",
        "I can never find anything in {folder}. Here is the rule I want applied: " + there + ". {extra_c}.",
        "Goal: afterwards every file with an extension in {folder} sits in a subfolder for its type. In "
        "detail: " + there + ". {extra_c}.",
        extra=extra,
        extra_c=extra[:1].upper() + extra[1:],
        folder=folder_ref,
        folder_c=folder_ref[:1].upper() + folder_ref[1:],
    )
    lines = ["#!/bin/bash"]
    for n in names:
        sub = exts[n.rsplit(".", 1)[1]]
        lines.append(_same(f"{folder}/{sub}/{n}", f"{n}"))
        lines.append(f"[ ! -e {quote(f'{folder}/{n}')} ] || exit 1")
    lines += [_same(f"{folder}/{n}", n) for n in bare]
    lines.append(_same(old_file, "already sorted"))
    sh = _shell_paths(w)
    f = sh(folder)
    if by_category:
        cmds = [f"cd {f}", "mkdir -p " + " ".join(cats)]
        if w.chance(0.5):
            cmds += [f"mv {' '.join('*.' + e for e in exts if exts[e] == c)} {c}/" for c in cats]
        else:
            for c in cats:
                tests = " -o ".join(f"-name '*.{e}'" for e in exts if exts[e] == c)
                sel = f"\\( {tests} \\)" if " -o " in tests else tests
                cmds.append(f"find . -maxdepth 1 -type f {sel} -exec mv -t {c} {{}} +")
    else:
        loop = w.pick(
            (
                'for x in *.*; do [ -f "$x" ] || continue; mkdir -p "${x##*.}" && mv -- "$x" "${x##*.}/";'
                " done",
                'for x in *.*; do if [ -f "$x" ]; then e="${x##*.}"; mkdir -p "$e"; mv "$x" "$e/"; fi; done',
                'find . -maxdepth 1 -type f -name \'*.*\' -exec sh -c \'mkdir -p "${1##*.}" && mv "$1" '
                '"${1##*.}/"\' _ {} \\;',
                'python3 -c \'import os, shutil\nfor f in os.listdir("."):\n    if os.path.isfile(f) and "." in f:\n'
                '        e = f.rsplit(".", 1)[1]\n        os.makedirs(e, exist_ok=True)\n        shutil.move(f, e + "/")\'',
            )
        )
        cmds = [f"cd {f}", loop]
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=[*cmds, w.pick(("ls -R", "find . -type f"))],
        difficulty=3 if by_category else 4,
        files=files,
    )


# ---- files-delete-by-pattern ----------------------------------------------------------------------------------------
# junk pattern -> (how to make a matching name from a stem, a look-alike that does not match)
_JUNK = {
    "*.tmp": (lambda s: f"{s}.tmp", lambda s: f"{s}.tmp.txt"),
    "*~": (lambda s: f"{s}.txt~", lambda s: f"{s}~v2.txt"),
    "*.swp": (lambda s: f".{s}.txt.swp", lambda s: f"{s}_swp.txt"),
    "*.pyc": (lambda s: f"{s}.pyc", lambda s: f"{s}.py"),
    "*.orig": (lambda s: f"{s}.conf.orig", lambda s: f"{s}.orig.md"),
    ".DS_Store": (lambda s: ".DS_Store", lambda s: f"{s}.DS_Store.txt"),
    "*.bak": (lambda s: f"{s}.ini.bak", lambda s: f"{s}.bak.json"),
}


@family(
    "files-delete-by-pattern",
    "files",
    "find and delete files whose names match a pattern, anywhere in a tree",
)
def delete_by_pattern(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    subs = [
        w.unique(lambda: w.pick(("src", "docs", "conf", "lib", "tests", "assets", "notes"))) for _ in range(2)
    ]
    subs.append(f"{subs[0]}/{w.unique(lambda: w.pick(('deep', 'inner', 'more', 'v1', 'old')))}")
    patterns = w.sample(tuple(_JUNK), w.randint(1, 2))
    junk: list[str] = []
    decoys: list[str] = []
    for pat in patterns:
        make, alike = _JUNK[pat]
        dirs = (
            w.sample(["", *subs], w.randint(2, 4))
            if pat == ".DS_Store"
            else [w.pick(["", *subs]) for _ in range(w.randint(2, 4))]
        )
        for d in dirs:
            stem = w.unique(lambda: w.pick(WORDS))
            path = f"{root}/{d}/{make(stem)}" if d else f"{root}/{make(stem)}"
            if path not in junk:
                junk.append(path)
        decoys.append(
            f"{root}/{w.pick(['', *subs])}/{alike(w.unique(lambda: w.pick(WORDS)))}".replace("//", "/")
        )
    safe = (
        "txt",
        "md",
        "csv",
        "json",
        "yaml",
        "xml",
        "conf",
        "py",
        "sh",
        "ini",
    )  # no junk pattern matches these
    keep = [
        f"{root}/{w.pick(['', *subs])}/{w.filename(w.pick(safe))}".replace("//", "/")
        for _ in range(w.randint(2, 4))
    ]
    outside = (
        f"{HOME}/{_JUNK[patterns[0]][0](w.unique(lambda: w.pick(WORDS)))}"  # same pattern, outside the tree
    )
    files = {p: "x\n" for p in junk + decoys + keep + [outside]}
    w.note(*patterns)
    desc = " and ".join(f"'{p}'" for p in patterns)
    var = w.pick(("PROJECT_ROOT", "WORKSPACE", "SRC_DIR", "APP_HOME")) if w.chance(0.25) else ""
    if var:  # the shell starts with the tree's path in a variable, and the task names only the variable
        files.update(session_variables(w, {var: root}, w.pick(("workspace", "project", "devenv"))))
        root_ref = f"${var}"
    else:
        root_ref = w.path_ref(root)
    task = _phrase(
        w,
        "{Delete|Remove} every file {named|matching} {desc} {anywhere under|in} {root}{|, subfolders included}.",
        "{root_c} is full of {junk|leftover} files: {delete|remove} all files matching {desc}, at any depth. "
        "{Nothing else goes.|Keep everything else.}",
        "Ticket: clean {desc} files out of {root} (recursively). Other files stay.",
        "Could you {get rid of|delete} the {desc} files {in|under} {root} and all its subfolders?",
        "After you are done, no file matching {desc} should be left {anywhere|at any depth} in {root}; "
        "everything else there must survive.",
        "{Editors|Tools} left {desc} {junk|debris} all over {root} and it ends up in commits. Purge those files "
        "from the whole tree{|, but only those}.",
        "rm all {desc} under {root} (recursive){|, nothing else}.",
        desc=desc,
        root=root_ref,
        root_c=root_ref[:1].upper() + root_ref[1:],
    )
    lines = ["#!/bin/bash"]
    lines += [f"[ ! -e {quote(p)} ] || exit 1" for p in junk]
    lines += [f"[ -f {quote(p)} ] || exit 1" for p in decoys + keep + [outside]]
    sh = _shell_paths(w)
    r = f'"${var}"' if var else sh(root)
    names = " -o ".join(f"-name {quote(p)}" for p in patterns)
    sel = f"\\( {names} \\)" if len(patterns) > 1 else names
    reference = [f'echo "${var}"'] if var else []
    reference += [f"find {r} -type f {sel}"] if w.chance(0.5) else []
    reference += [
        w.pick(
            (
                f"find {r} -type f {sel} -delete",
                f"find {r} -type f {sel} -exec rm -f {{}} +",
                f"find {r} -type f {sel} -print0 | xargs -0 rm -f",
                f'find {r} -type f {sel} | while IFS= read -r f; do rm -f "$f"; done',
                # bash's ** (dotglob: hidden files and folders too; nullglob: a pattern may match nothing)
                "shopt -s globstar dotglob nullglob && rm -f " + " ".join(f"{r}/**/{p}" for p in patterns),
                "python3 -c "
                + quote(
                    "import pathlib, sys; [p.unlink() for pat in sys.argv[2:] "
                    "for p in pathlib.Path(sys.argv[1]).rglob(pat) if p.is_file()]"
                )
                + f" {r} "
                + " ".join(quote(p) for p in patterns),
            )
        ),
        w.pick((f"find {r} -type f", f"tree -a {r}")),
    ]
    return Draft(task=task, check="\n".join(lines) + "\n", reference=reference, difficulty=2, files=files)


# ---- files-symlink --------------------------------------------------------------------------------------------------
@family("files-symlink", "files", "create, repoint or clean up symbolic links")
def symlink(w: World) -> Draft:
    mode = w.pick(("create", "repoint", "broken", "bin"))
    sh = _shell_paths(w)
    files: dict[str, str] = {}
    setup: list[str] = []
    lines = ["#!/bin/bash"]
    if mode == "repoint" or (mode == "create" and w.chance(0.5)):
        app = w.pick((w.project(), w.service()))
        rel_dir = f"{HOME}/{app}/releases" if w.chance(0.5) else f"{HOME}/{app}"
        versions = [f"{w.randint(1, 3)}.{m}.{w.randint(0, 9)}" for m in w.sample(range(0, 10), 3)]
        for v in versions:
            files[f"{rel_dir}/v{v}/VERSION"] = f"{v}\n"
        link = f"{HOME}/{app}/{w.pick(('current', 'live', 'active'))}"
        old_v, new_v = versions[0], versions[1]
        target = f"{rel_dir}/v{new_v}"
        w.note(*versions)
        if mode == "repoint":
            setup.append(
                f"ln -s {quote(f'{rel_dir}/v{old_v}')} {quote(link)} && chown -h operator:operator "
                f"{quote(link)}"
            )
            what = _spin(
                w,
                "{repoint|switch} the symlink {link} (it points at v{old}) to {target}",
                link=w.path_ref(link, "link"),
                old=old_v,
                target=w.path_ref(target),
                capitalize=False,
            )
            lines.append(f"[ ! -e {quote(f'{rel_dir}/v{old_v}/v{new_v}')} ] || exit 1")  # no link made inside
            cmd = w.pick(
                (
                    f"ln -sfn {sh(target)} {sh(link)}",
                    f"ln -sfT {sh(target)} {sh(link)}",
                    f"rm {sh(link)} && ln -s {sh(target)} {sh(link)}",
                )
            )
        else:
            what = _spin(
                w,
                "{create|make} a symbolic link {link} that points to {target}",
                link=w.path_ref(link, "link"),
                target=w.path_ref(target),
                capitalize=False,
            )
            cmd = f"ln -s {sh(target)} {sh(link)}"
        lines.append(
            f'[ -L {quote(link)} ] && [ "$(readlink -f {quote(link)})" = {quote(target)} ] || exit 1'
        )
        lines += [f"[ -f {quote(p)} ] || exit 1" for p in files]
        reference = [cmd, f"ls -l {sh(link)}"]
    elif mode == "create":
        tool = f"{HOME}/{w.pick(('tools', 'scripts', 'projects'))}/{w.filename('sh')}"
        files[tool] = "#!/bin/bash\necho ok\n"
        link = f"{HOME}/{w.pick(('bin', '.local/bin'))}/{tool.rsplit('/', 1)[1].removesuffix('.sh')}"
        what = _spin(
            w,
            "{create|make} a symbolic link {link} pointing to the script {target}{| (create the folder "
            "if needed)}",
            link=w.path_ref(link, "link"),
            target=w.path_ref(tool, "file"),
            capitalize=False,
        )
        lines.append(f'[ -L {quote(link)} ] && [ "$(readlink -f {quote(link)})" = {quote(tool)} ] || exit 1')
        lines.append(f"[ -f {quote(tool)} ] || exit 1")
        reference = [
            f"mkdir -p {sh(link.rsplit('/', 1)[0])}",
            f"ln -s {sh(tool)} {sh(link)}",
            f"ls -l {sh(link)}",
        ]
    elif mode == "broken":
        folder = f"{HOME}/{w.pick(('links', 'shortcuts', 'bin', 'active'))}_{w.word()}"
        store = f"{HOME}/{w.dirname()}"
        good, bad = [], []
        n = w.randint(4, 7)
        broken = set(w.sample(range(n), w.randint(1, n - 2)))
        for i in range(n):
            target = f"{store}/{w.filename()}"
            link = f"{folder}/{w.unique(lambda: w.pick(WORDS))}"
            if i not in broken:
                files[target] = "data\n"
                good.append(link)
            else:
                bad.append(link)
            setup.append(f"ln -s {quote(target)} {quote(link)}")
        plain = f"{folder}/{w.filename('txt')}"
        files[plain] = "a regular file\n"
        setup = [
            f"mkdir -p {quote(folder)} && " + " && ".join(setup) + f" && chown -R -h operator:operator "
            f"{quote(folder)}"
        ]
        what = _spin(
            w,
            "{delete|remove} the broken symbolic links in {folder} (those whose target no longer "
            "exists); {working links and regular files stay|keep the links that still work, and the "
            "regular files}",
            folder=w.path_ref(folder),
            capitalize=False,
        )
        lines += [f"[ ! -L {quote(p)} ] || exit 1" for p in bad]
        lines += [f"[ -L {quote(p)} ] && [ -e {quote(p)} ] || exit 1" for p in good]
        lines.append(f"[ -f {quote(plain)} ] || exit 1")
        f = sh(folder)
        reference = [
            w.pick((f"find {f} -xtype l", f"find -L {f} -type l")),
            w.pick(
                (
                    f"find {f} -xtype l -delete",
                    f"find -L {f} -type l -exec rm {{}} +",
                    f'for l in {f}/*; do [ -L "$l" ] && [ ! -e "$l" ] && rm "$l"; done; true',
                )
            ),
            f"ls -l {f}",
        ]
    else:  # bin: one link per script
        tools = f"{HOME}/{w.pick(('tools', 'scripts', 'utils'))}"
        scripts = [f"{tools}/{w.filename('sh')}" for _ in range(w.randint(2, 4))]
        for p in scripts:
            files[p] = "#!/bin/bash\necho ok\n"
        readme = f"{tools}/README.md"
        files[readme] = "helper scripts\n"
        bindir = f"{HOME}/{w.pick(('bin', '.local/bin'))}"
        what = _spin(
            w,
            "{create|make} a symbolic link in {bin} for every .sh script in {tools}, with the same name "
            "as the script and {pointing at|pointing to} it{| (create {bin} if needed)}",
            tools=w.path_ref(tools),
            bin=w.path_ref(bindir),
            capitalize=False,
        )
        for p in scripts:
            link = f"{bindir}/{p.rsplit('/', 1)[1]}"
            lines.append(f'[ -L {quote(link)} ] && [ "$(readlink -f {quote(link)})" = {quote(p)} ] || exit 1')
        lines.append(f"[ ! -e {quote(bindir + '/README.md')} ] || exit 1")
        t, b = sh(tools), sh(bindir)
        reference = [
            f"mkdir -p {b}",
            w.pick((f'for s in {t}/*.sh; do ln -s "$s" {b}/; done', f"ln -s {t}/*.sh {b}/")),
            f"ls -l {b}",
        ]
    task = _phrase(
        w,
        "{what_c}.",
        "{Please |}{what}.",
        "Ticket: {what}.",
        "Could you {what}?",
        "{Small|Quick} {link|symlink} job: {what}.",
        "We manage these paths with symlinks, not copies. {what_c}, please, and check the link afterwards.",
        "Is it possible to {what}? Go ahead and do it.",
        what=what,
        what_c=what[:1].upper() + what[1:],
    )
    return Draft(
        task=task,
        check="\n".join(lines) + "\n",
        reference=reference,
        difficulty={"create": 1, "repoint": 2, "broken": 3, "bin": 3}[mode],
        files=files,
        setup=setup,
    )


# ---- files-recent-list ----------------------------------------------------------------------------------------------
@family(
    "files-recent-list",
    "files",
    "list the files modified recently (in the last N days, minutes, or newer than a file)",
)
def recent_list(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    subs = [
        w.unique(lambda: w.pick(("docs", "src", "data", "reports", "conf", "drafts")))
        for _ in range(w.randint(1, 3))
    ]
    mode = w.pick(("days", "days", "minutes", "newer"))
    n = w.pick((2, 3, 5, 7, 10, 14)) if mode != "minutes" else w.pick((30, 60, 90, 120))
    w.note(n)
    paths = [
        f"{root}/{w.pick(['', *subs])}/{w.filename()}".replace("//", "/") for _ in range(w.randint(5, 10))
    ]
    recent = w.sample(paths, w.randint(1, len(paths) - 2))
    ordered = w.chance(0.3)
    ages: dict[str, str] = {}  # the later in ``recent``, the newer
    ref = f"{root}/{w.pick(('.last_backup', 'last_sync', '.stamp', 'checkpoint'))}"
    for i, p in enumerate(recent):  # distinct ages, so "newest first" has one answer
        ages[p] = {
            "days": f"{(n - 1) * 24 * 60 - 30 - i * 97} minutes ago",
            "minutes": f"{n - 5 - i * max(1, (n - 10) // len(recent))} minutes ago",
            "newer": f"{2 * 24 * 60 - 60 - i * 131} minutes ago",
        }[mode]
    for p in paths:
        if p not in recent:
            ages[p] = {
                "days": f"{n + w.randint(1, 30)} days ago",
                "minutes": f"{2 * n + w.randint(0, 600)} minutes ago",
                "newer": f"{3 + w.randint(0, 40)} days ago",
            }[mode]
    files = {p: "x\n" for p in paths}
    setup = [" && ".join(f"touch -d '{age}' {quote(p)}" for p, age in ages.items())]
    if mode == "newer":
        files[ref] = "\n"
        setup[0] += f" && touch -d '2 days ago' {quote(ref)}"
    out = f"{HOME}/{w.filename('txt', stem=w.pick(('recent', 'changed', 'modified', 'touched')))}"
    when = {
        "days": _spin(w, "{modified|changed} in the last {n} days", n=n, capitalize=False),
        "minutes": _spin(w, "{modified|changed} in the last {n} minutes", n=n, capitalize=False),
        "newer": _spin(w, "modified more recently than {ref}", ref=w.path_ref(ref, "file"), capitalize=False),
    }[mode]
    fmt = _spin(
        w,
        "one full path per line, newest first" if ordered else "one full path per line{| (any order)}",
        capitalize=False,
    )
    task = _phrase(
        w,
        "{List|Find} the files {under|anywhere in} {root} {when} and write them to {out}, {fmt}.",
        "Which files in {root} (subfolders included) were {when}? {Write|Save} {them|the list} to {out}, {fmt}.",
        "Ticket: {for the incremental backup|before the sync}, we need the files in {root} {when}. {Put|Write} them "
        "in {out}, {fmt}.",
        "Could you find every file {under|in} {root}, at any depth, {when}, and list them in {out}: {fmt}?",
        "Something in {root} changed recently and I want to see what. {out} should list the files {when} "
        "({fmt}).",
        "{out}: the files in {root} {when}; {fmt}.",
        root=w.path_ref(root),
        when=when,
        out=w.path_ref(out, "file"),
        fmt=fmt,
    )
    expected = (
        [p[len(root) + 1 :] for p in reversed(recent)]
        if ordered
        else sorted(p[len(root) + 1 :] for p in recent)
    )
    got = _norm_paths(out, root) + ("" if ordered else " | sort")
    check = f'#!/bin/bash\n[ -f {quote(out)} ] || exit 1\n[ "$({got})" = {quote(chr(10).join(expected))} ]\n'
    sh = _shell_paths(w)
    r, o = sh(root), sh(out)
    test = {"days": f"-mtime -{n}", "minutes": f"-mmin -{n}", "newer": f"-newer {sh(ref)}"}[mode]
    if ordered:
        cmd = f"find {r} -type f {test} -printf '%T@ %p\\n' | sort -rn | cut -d' ' -f2- > {o}"
    else:
        cmd = w.pick((f"find {r} -type f {test} > {o}", f"find {r} -type f {test} -print > {o}"))
    reference = ([f"ls -lt {r}"] if w.chance(0.3) else []) + [cmd, f"cat {o}"]
    return Draft(
        task=task, check=check, reference=reference, difficulty=3 if ordered else 2, files=files, setup=setup
    )
