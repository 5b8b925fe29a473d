"""Files: moving, copying, finding and organising files by name, age, size and type."""

from __future__ import annotations

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, World, quote


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
    setup.append(f"touch -d '{max(days - w.randint(1, days), 0)} days ago' "
                 + " ".join(quote(f"{src}/{n}") for n in new))
    if not nested:
        setup.append(f"mkdir -p {quote(dst)} && chown operator:operator {quote(dst)}")
    what = f"{ext} files" if ext else w.pick(("files", "regular files"))
    task = w.phrase(
        "{Move|Relocate} {all the|the} {what} in {src} {that is|last modified} more than {days} days {ago|old} into {dst}"
        "{| (create it if needed)}.",
        "{Please |}{clean up|tidy} {src}: {any|all} {what} older than {days} days {should go|needs to move|must "
        "be moved} to {dst}; newer ones stay {put|where they are}.",
        "Ticket: {src} is cluttered. {Move|Shift} the {what} not modified in the last {days} days to {dst}.",
        "Can you {move|shift} the {what} from {src} that haven't changed in over {days} days to {dst}?",
        what=what, src=w.path_ref(src), dst=w.path_ref(dst), days=days)
    check = "\n".join([
        "#!/bin/bash",
        *[f"[ -f {quote(f'{dst}/{n}')} ] && [ ! -e {quote(f'{src}/{n}')} ] || exit 1" for n in old],
        *[f"[ -f {quote(f'{src}/{n}')} ] && [ ! -e {quote(f'{dst}/{n}')} ] || exit 1" for n in new],
        *([f"[ -f {quote(f'{src}/{decoy}')} ] || exit 1"] if decoy else []),
    ]) + "\n"
    name_filter = f" -name '*.{ext}'" if ext else ""
    reference = [f"mkdir -p {quote(dst)}",
                 f"find {quote(src)} -maxdepth 1 -type f{name_filter} -mtime +{days} -exec mv -t {quote(dst)} {{}} +",
                 f"ls {quote(dst)}"]
    return Draft(task=task, check=check, reference=reference, difficulty=2 if not ext else 3, files=files,
                 setup=setup)


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
    decoys_dir = f"{root}/{w.word()}.{ext}"
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
        ext=ext, root=w.path_ref(root), out=w.path_ref(out, "file"))
    check = (f"#!/bin/bash\n[ -f {quote(out)} ] || exit 1\n"
             f"[ \"$(tr -d '[:space:]' < {quote(out)})\" = '{len(targets)}' ]\n")
    reference = [f"find {quote(root)} -type f -name '*.{ext}' | wc -l > {quote(out)}", f"cat {quote(out)}"]
    return Draft(task=task, check=check, reference=reference, difficulty=2, files=files,
                 setup=[f"mkdir -p {quote(decoys_dir)} && chown -R operator:operator {quote(root)}"])
