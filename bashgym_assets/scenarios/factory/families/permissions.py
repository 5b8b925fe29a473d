"""Permissions: modes, special bits, group access and ownership of files and directory trees.

Checks read the final modes and owners with ``stat`` and compare them bit by bit: the bits the task is about must
be right, the bits it did not mention must be as the setup left them (a ``chmod -R 777`` never passes).
"""

from __future__ import annotations

from bashgym_assets.scenarios.bundle import SessionUser
from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, World, quote

SHEBANGS = ("#!/bin/bash", "#!/bin/sh", "#!/usr/bin/env bash", "#!/usr/bin/env python3")


# ---- helpers ---------------------------------------------------------------------------------------------------------
def _script(*lines: str) -> str:
    """A check script: ``#!/bin/bash`` and the lines, exit 0 when every line passed."""
    return "#!/bin/bash\n" + "\n".join(lines) + "\n"


def _bits(path: str, *, mask: int = 0, equal: int = 0, need: int = 0, deny: int = 0) -> str:
    """A check line on the mode of ``path``: ``mode & mask == equal``, all of ``need`` set, none of ``deny``."""
    conds = []
    if mask:
        conds.append(f"(m & 8#{mask:o}) == 8#{equal:o}")
    if need:
        conds.append(f"(m & 8#{need:o}) == 8#{need:o}")
    if deny:
        conds.append(f"(m & 8#{deny:o}) == 0")
    return (
        f"s=$(stat -c %a {quote(path)}) || exit 1; m=$((8#$s)); (( {' && '.join(conds) or '1'} )) || exit 1"
    )


def _mode_is(path: str, mode: int) -> str:
    return f'[ "$(stat -c %a {quote(path)})" = {mode:o} ] || exit 1'


def _owner_is(path: str, owner: str) -> str:
    return f'[ "$(stat -c %U:%G {quote(path)})" = {quote(owner)} ] || exit 1'


def _tree(
    w: World,
    root: str,
    exts: tuple[str, ...],
    files: tuple[int, int] = (3, 7),
    subdirs: tuple[int, int] = (1, 3),
) -> tuple[list[str], list[str]]:
    """A small drawn tree under ``root``: its directories (root first, parents before children) and files."""
    dirs = [root]
    for _ in range(w.randint(*subdirs)):
        dirs.append(f"{w.pick(dirs)}/{w.dirname()}")
    paths = [f"{w.pick(dirs)}/{w.filename(w.pick(exts))}" for _ in range(w.randint(*files))]
    return dirs, paths


def _chmod_groups(modes: dict[str, int]) -> list[str]:
    """Setup commands giving each path its mode, one ``chmod`` per distinct mode."""
    by_mode: dict[int, list[str]] = {}
    for path, mode in modes.items():
        by_mode.setdefault(mode, []).append(path)
    return [f"chmod {mode:o} " + " ".join(quote(p) for p in paths) for mode, paths in sorted(by_mode.items())]


def _content(w: World, path: str) -> str:
    if path.endswith((".sh", ".py")):
        return f"{w.pick(SHEBANGS)}\necho {w.pick(('ok', 'done', 'started'))}\n"
    return "\n".join(w.lines(w.randint(1, 3))) + "\n"


def _home_short(w: World, path: str) -> str:
    """A home path as an operator would type it: sometimes ``~/x``, sometimes absolute."""
    if path.startswith(HOME + "/") and w.chance(0.5):
        return "~" + path[len(HOME) :]
    return path


# ---- families --------------------------------------------------------------------------------------------------------
@family(
    "permissions-group-write-tree", "permissions", "give a group read/write access to a whole directory tree"
)
def group_write_tree(w: World) -> Draft:
    base = w.pick(("/srv", "/opt", "/var/www", "/srv/shared", "/data"))
    root = f"{base}/{w.project()}"
    decoy_root = f"{base}/{w.project()}"
    group = w.team()
    # The sandbox's root lacks CAP_FSETID, so the kernel silently drops a setgid bit root sets on a directory of
    # a group root is not in: setgid variants are played by the operator, owner of the tree and member of the group.
    owner = w.pick(("root", "root", w.username(), "operator", "operator"))
    setgid = owner == "operator" and w.chance(0.7)
    close_others = w.chance(0.35)
    dirs, paths = _tree(
        w, root, ("txt", "csv", "md", "json", "conf", "sh", "log"), files=(3, 7), subdirs=(1, 3)
    )
    ddirs, dpaths = _tree(w, decoy_root, ("txt", "md", "conf"), files=(1, 3), subdirs=(0, 1))
    modes: dict[str, int] = {d: 0o755 for d in dirs + ddirs}
    for p in paths + dpaths:
        modes[p] = 0o755 if p.endswith(".sh") else w.pick((0o644, 0o644, 0o644, 0o640, 0o600))
    files = {p: _content(w, p) for p in paths + dpaths}
    setup = [f"groupadd {group}", "mkdir -p " + " ".join(quote(d) for d in dirs + ddirs)]
    if owner == "operator":
        setup.append(f"usermod -aG {group} operator && chown -R operator:operator {quote(root)}")
    elif owner != "root":
        setup.append(f"useradd -M -s /usr/sbin/nologin {owner} && chown -R {owner}:{owner} {quote(root)}")
    setup.append(" && ".join(_chmod_groups(modes)))

    extras = []
    if setgid:
        extras.append(
            w.spin(
                "{new files created inside|files created in it later} must {automatically |}"
                "{get|belong to} group {group} (set the setgid bit on {every|each} directory)",
                capitalize=False,
                group=group,
            )
        )
    if close_others:
        extras.append(
            w.spin(
                "{users outside the group|other users|everyone else} must {lose all access|have no "
                "access at all} to it",
                capitalize=False,
            )
        )
    else:
        extras.append(
            w.spin("{do not change|leave alone} what {other users|everyone else} can do", capitalize=False)
        )
    if owner == "operator":
        extras.append(
            w.spin(
                "{the tree is yours and you are in|you own it and you are a member of} {group}; "
                "keep yourself as the owner",
                capitalize=False,
                group=group,
            )
        )
    else:
        extras.append(w.spin("{keep the current owner|the owner must stay as it is}", capitalize=False))
    constraints = w.clauses(extras)
    task = w.phrase(
        "{Give|Grant} the {group} group read and write access to {the whole tree|everything} under {root}: "
        "{every|each} file and directory {in it |}must {belong to|have} group {group} and be group-writable; "
        "{constraints}.",
        "The {group} team {needs to|must be able to} {edit|change} {everything|all files} in {root}. Make the whole "
        "tree group-owned by {group} with group read/write (and group access to the directories); {constraints}.",
        "Ticket: {members of group|users in} {group} cannot write to {root}. Fix it recursively: group {group}, "
        "group-writable files and directories. Also, {constraints}.",
        "Could you make {root} and everything below it {shared with|writable by} the {group} group? "
        "{The group needs|Its members need} read and write on all files and full access to the directories; "
        "{constraints}.",
        "We are moving {root} from a one-person project to a team one: {group} takes it over together. Make "
        "everything in it belong to group {group}, with group read/write on files and directories; {constraints}.",
        "{root} -> group {group}, group-writable, recursively. {constraints}.",
        "Goal: any member of {group} can edit any file under {root} and create files in its directories, "
        "because the whole tree has group {group} with group write. Also, {constraints}.",
        group=group,
        root=w.path_ref(root),
        constraints=constraints,
    )

    other_mask = 0o007
    lines = []
    for d in dirs:
        exp_other = 0 if close_others else modes[d] & other_mask
        lines.append(_owner_is(d, f"{owner}:{group}"))
        lines.append(
            _bits(d, mask=0o707, equal=(modes[d] & 0o700) | exp_other, need=0o070 | (0o2000 if setgid else 0))
        )
    for p in paths:
        exp_other = 0 if close_others else modes[p] & other_mask
        lines.append(_owner_is(p, f"{owner}:{group}"))
        lines.append(_bits(p, mask=0o707, equal=(modes[p] & 0o700) | exp_other, need=0o060))
    for p in ddirs + dpaths:  # the neighbouring tree is not the team's
        lines.append(_owner_is(p, "root:root"))
        lines.append(_mode_is(p, modes[p]))
    check = _script(*lines)

    r = quote(root) if w.chance(0.3) else root
    reference = [w.pick((f"chgrp -R {group} {r}", f"chown -R :{group} {r}", f"chown -R {owner}:{group} {r}"))]
    others = ",o-rwx" if close_others else ""
    if w.chance(0.5):
        reference.append(f"chmod -R g+rwX{others} {r}")
    else:
        reference.append(f"find {r} -type d -exec chmod g+rwx{others} {{}} +")
        reference.append(f"find {r} -type f -exec chmod g+rw{others} {{}} +")
    if setgid:
        reference.append(
            w.pick(
                (f"find {r} -type d -exec chmod g+s {{}} +", f"find {r} -type d -print0 | xargs -0 chmod g+s")
            )
        )
    reference.append(w.pick((f"ls -lR {r}", f"find {r} -printf '%M %u:%g %p\\n'", f"ls -laR {r}")))
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if setgid or close_others else 2,
        setup=setup,
        files=files,
        user="operator" if owner == "operator" else "root",
    )


@family(
    "permissions-scripts-executable", "permissions", "make the scripts in a folder executable, nothing else"
)
def scripts_executable(w: World) -> Draft:
    root = f"{HOME}/{w.pick(('scripts', 'tools', 'bin-src', 'jobs', 'hooks', w.dirname()))}"
    by = w.pick(("ext", "ext", "shebang"))
    recursive = w.chance(0.45)
    who = w.pick(("all", "owner", "owner_group"))
    ext = w.pick(("sh", "py"))
    sub = f"{root}/{w.dirname()}"
    dirs = [root, sub]
    files: dict[str, str] = {}
    targets = []
    for _ in range(w.randint(2, 5)):
        d = sub if recursive and w.chance(0.5) else root
        stem = w.filename(ext).rsplit(".", 1)[0]
        targets.append(f"{d}/{stem}.{ext}" if by == "ext" else f"{d}/{stem}")
    if recursive and not any(t.startswith(sub + "/") for t in targets):
        targets[-1] = f"{sub}/{targets[-1].rsplit('/', 1)[1]}"
    for t in targets:
        files[t] = (
            f"{'#!/usr/bin/env python3' if ext == 'py' else w.pick(SHEBANGS[:3])}\n"
            f"# {w.pick(w.lines(2))}\necho {w.word()}\n"
        )
    decoys = []
    for _ in range(w.randint(2, 4)):  # plain text files never become executable
        d = w.pick(dirs) if recursive else root
        decoys.append(f"{d}/{w.filename(w.pick(('txt', 'md', 'conf', 'csv', 'log')))}")
        files[decoys[-1]] = "\n".join(w.lines(2)) + "\n"
    if not recursive:  # a script in a subfolder is out of scope when the task is about the folder itself
        stem = w.filename(ext).rsplit(".", 1)[0]
        decoys.append(f"{sub}/{stem}.{ext}" if by == "ext" else f"{sub}/{stem}")
        files[decoys[-1]] = f"{w.pick(SHEBANGS)}\necho out of scope\n"
    if by == "shebang":  # mentions a shebang, but not on its first line
        decoys.append(f"{w.pick(dirs) if recursive else root}/{w.word()}_notes")
        files[decoys[-1]] = f"remember: scripts start with a line like\n{w.pick(SHEBANGS)}\n"
    if by == "ext":  # a script under another name is not a .ext file
        decoys.append(f"{w.pick(dirs) if recursive else root}/{w.word()}.{ext}.bak")
        files[decoys[-1]] = f"{w.pick(SHEBANGS)}\necho old copy\n"
    w.note(ext)
    modes = {p: w.pick((0o644, 0o644, 0o640, 0o600)) for p in targets + decoys}
    setup = _chmod_groups(modes)

    add = {"all": 0o111, "owner": 0o100, "owner_group": 0o110}[who]
    for_whom = {
        "all": w.spin("for {everyone|all users|owner, group and others}", capitalize=False),
        "owner": w.spin("for {their owner|you, the owner} only", capitalize=False),
        "owner_group": w.spin("for the owner and the group (not for others)", capitalize=False),
    }[who]
    if by == "ext":
        what = w.spin("{every|each} .{ext} file", capitalize=False, ext=ext)
    else:
        what = w.spin(
            "{every|each} file whose first line is a shebang ({a line starting with #!|such as #!/bin/sh})",
            capitalize=False,
        )
    scope = (
        w.spin("{anywhere |}under {root} (subfolders included)", capitalize=False, root=w.path_ref(root))
        if recursive
        else w.spin("directly in {root} (not in its subfolders)", capitalize=False, root=w.path_ref(root))
    )
    keep = w.spin(
        "{leave every other permission bit as it is|do not change any other permission bits}; "
        "{no other file|nothing else} {may|should} become executable",
        capitalize=False,
    )
    task = w.phrase(
        "Make {what} {scope} executable {for_whom}; {keep}.",
        "The scripts {scope} {won't|do not} run ({permission denied|they are not executable}). Add execute "
        "permission {for_whom} to {what}; {keep}.",
        "Ticket: {what} {scope} {must|needs to} be executable {for_whom}. {Keep|Note}: {keep}.",
        "Can you {set|add} the execute bit {for_whom} on {what} {scope}? Please {keep}.",
        "The deploy runs {what} {scope} directly and fails with 'Permission denied'. Let them execute "
        "{for_whom}; {keep}.",
        "chmod job: {what} {scope}, +x {for_whom}. {keep_c}.",
        keep_c=keep[:1].upper() + keep[1:],
        what=what,
        scope=scope,
        for_whom=for_whom,
        keep=keep,
    )
    check = _script(*[_mode_is(t, modes[t] | add) for t in targets], *[_mode_is(d, modes[d]) for d in decoys])

    r = _home_short(w, root)
    sym = {"all": w.pick(("+x", "a+x")), "owner": "u+x", "owner_group": "ug+x"}[who]
    if by == "ext" and not recursive:
        reference = [
            w.pick(
                (
                    f"chmod {sym} {r}/*.{ext}",
                    f"chmod {sym} {r}/*.{ext}",
                    f"find {r} -maxdepth 1 -type f -name '*.{ext}' -exec chmod {sym} {{}} +",
                )
            )
        ]
    elif by == "ext":
        reference = [
            w.pick(
                (
                    f"find {r} -type f -name '*.{ext}' -exec chmod {sym} {{}} +",
                    f"find {r} -type f -name '*.{ext}' -print0 | xargs -0 chmod {sym}",
                    f"shopt -s globstar && chmod {sym} {r}/**/*.{ext}",  # bash's ** reaches every level
                )
            )
        ]
    elif recursive:
        reference = [
            w.pick(
                (
                    f'find {r} -type f -exec sh -c \'head -n 1 "$1" | grep -q "^#!"\' _ {{}} \\; '
                    f"-exec chmod {sym} {{}} +",
                    # the first two bytes of every file read in a loop
                    f'find {r} -type f | while IFS= read -r f; do [ "$(head -c 2 "$f")" = "#!" ] && '
                    f'chmod {sym} "$f"; done',
                )
            )
        ]
    else:
        reference = [
            w.pick(
                (
                    f'for f in {r}/*; do [ -f "$f" ] && head -n 1 "$f" | grep -q \'^#!\' && chmod {sym} "$f"; done',
                    # awk reads only the first line of each file and names the scripts
                    f"awk 'FNR == 1 && /^#!/ {{print FILENAME}} {{nextfile}}' {r}/* 2>/dev/null | "
                    f"xargs -r chmod {sym}",
                )
            )
        ]
    reference.append(w.pick((f"ls -l {r}", f"ls -lR {r}", f"find {r} -type f -perm -u+x")))
    difficulty = 1 if by == "ext" and not recursive else (3 if by == "shebang" else 2)
    return Draft(task=task, check=check, reference=reference, difficulty=difficulty, setup=setup, files=files)


@family("permissions-private-secrets", "permissions", "make secret files readable by their owner only")
def private_secrets(w: World) -> Draft:
    root = (
        f"{HOME}/{w.pick(('.secrets', 'secrets', 'keys', 'credentials', w.project() + '-config', 'vault'))}"
    )
    exts = w.sample(("key", "pem", "env", "token", "p12", "secret"), w.randint(1, 2))
    public = [e for e in ("pub", "crt", "md", "txt", "yaml") if e not in exts]
    recursive = w.chance(0.4)
    sub = f"{root}/{w.dirname()}"
    mode = w.pick((0o600, 0o600, 0o400))
    lock_dir = w.chance(0.4)
    w.note(*exts)
    targets = []
    for _ in range(w.randint(2, 5)):
        d = sub if recursive and w.chance(0.5) else root
        targets.append(f"{d}/{w.filename(w.pick(exts))}")
    decoys = [f"{w.pick((root, sub))}/{w.filename(w.pick(public))}" for _ in range(w.randint(2, 4))]
    if not recursive:
        decoys.append(f"{sub}/{w.filename(exts[0])}")
    files = {p: f"{w.token(24)}\n" for p in targets}
    files.update({p: "\n".join(w.lines(2)) + "\n" for p in decoys})
    modes = {p: w.pick((0o644, 0o644, 0o664, 0o666)) for p in targets}
    modes.update({p: w.pick((0o644, 0o664)) for p in decoys})
    setup = _chmod_groups(modes)

    kinds = " and ".join(f".{e}" for e in exts)
    access = (
        w.spin(
            "readable and writable by {their owner|you} {only|and nobody else} (mode 600)", capitalize=False
        )
        if mode == 0o600
        else w.spin(
            "read-only for {their owner|you} and {inaccessible to|closed to} everyone else (mode 400)",
            capitalize=False,
        )
    )
    scope = (
        w.spin("{anywhere |}under {root} (subfolders included)", capitalize=False, root=w.path_ref(root))
        if recursive
        else w.spin("{directly |}in {root} (not in subfolders)", capitalize=False, root=w.path_ref(root))
    )
    parts = [w.spin("{leave the other files alone|do not touch the other files}", capitalize=False)]
    if lock_dir:
        parts.append(
            w.spin(
                "{also |}set the mode of {root} itself to 700 ({accessible to you only|private to you})",
                capitalize=False,
                root=w.path_ref(root),
            )
        )
    rest = w.clauses(parts)
    task = w.phrase(
        "Make {every|each} {kinds} file {scope} {access}; {rest}.",
        "{The|Our} {kinds} files {scope} are readable by other users. {Fix that|Lock them down}: {access}; {rest}.",
        "Ticket: {secret material|key files} ({kinds}) {scope} {has|have} loose permissions. Each must be {access}; "
        "{rest}.",
        "Could you {tighten|restrict} the permissions of the {kinds} files {scope} so they are {access}? Also, "
        "{rest}.",
        "A scanner reported that other accounts on this box can read our {kinds} files {scope}. Nobody but the "
        "owner should: make each one {access}; {rest}.",
        "{kinds} files {scope}: {access}. {rest_c}.",
        "Goal: after this, no other user can read any {kinds} file {scope}, because each is {access}; {rest}.",
        rest_c=rest[:1].upper() + rest[1:],
        kinds=kinds,
        scope=scope,
        access=access,
        rest=rest,
    )
    check = _script(
        *[_mode_is(t, mode) for t in targets],
        *[_mode_is(d, modes[d]) for d in decoys],
        _mode_is(root, 0o700) if lock_dir else _bits(root, need=0o500),
    )

    r = _home_short(w, root)
    names = " ".join(f"{r}/*.{e}" for e in exts)
    if recursive:
        pred = " -o ".join(f"-name '*.{e}'" for e in exts)
        pred = f"\\( {pred} \\)" if len(exts) > 1 else pred
        reference = [
            w.pick(
                (
                    f"find {r} -type f {pred} -exec chmod {mode:o} {{}} +",
                    f"find {r} -type f {pred} -exec chmod {'u=rw,go=' if mode == 0o600 else 'u=r,go='} "
                    "{} \\;",
                )
            )
        ]
    else:
        reference = [
            w.pick((f"chmod {mode:o} {names}", f"chmod {'u=rw,go=' if mode == 0o600 else 'u=r,go='} {names}"))
        ]
    if lock_dir:
        reference.append(w.pick((f"chmod 700 {r}", f"chmod u=rwx,go= {r}")))
    reference.append(w.pick((f"ls -la {r}", f"ls -laR {r}", f"stat -c '%a %n' {r}/*")))
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if recursive or lock_dir else 1,
        setup=setup,
        files=files,
    )


@family(
    "permissions-enter-directory", "permissions", "repair directories that cannot be entered (missing x bit)"
)
def enter_directory(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    dirs, paths = _tree(w, root, ("txt", "md", "csv", "json", "sh", "conf"), files=(3, 7), subdirs=(2, 4))
    target = w.pick((0o755, 0o755, 0o750, 0o700))
    broken = w.sample(dirs[1:], w.randint(1, min(3, len(dirs) - 1)))
    modes: dict[str, int] = {}
    for d in dirs:
        modes[d] = w.pick((0o644, 0o600, 0o664)) if d in broken else target
    for p in paths:
        modes[p] = 0o755 if p.endswith(".sh") else w.pick((0o644, 0o644, 0o600, 0o640))
    files = {p: _content(w, p) for p in paths}
    # children first, so the setup itself never needs to enter a directory it already closed
    order = sorted(paths, key=lambda p: -p.count("/")) + sorted(dirs, key=lambda d: -d.count("/"))
    setup = [
        "mkdir -p " + " ".join(quote(d) for d in dirs) + f" && chown -R operator:operator {quote(root)}",
        " && ".join(f"chmod {modes[p]:o} {quote(p)}" for p in order),
    ]
    w.note(f"{target:o}")
    want = {0o755: "rwxr-xr-x", 0o750: "rwxr-x---", 0o700: "rwx------"}[target]
    sym = {0o755: "u=rwx,go=rx", 0o750: "u=rwx,g=rx,o=", 0o700: "u=rwx,go="}[target]
    keep = w.spin(
        "{the files' permissions must not change|leave the permissions of the files as they are}",
        capitalize=False,
    )
    task = w.phrase(
        "Some directories under {root} cannot be entered ({cd fails|'cd' says permission denied}). Set {every|each} "
        "directory in the tree, {root} included, to {mode} ({want}); {keep}.",
        "{Nobody can|You cannot} {cd into|open} some folders in {root}. Fix the tree so every directory has mode {mode} "
        "({want}); {keep}.",
        "Ticket: {permission denied|'Permission denied'} when entering subdirectories of {root}. All directories "
        "there should be {want} ({mode}), {and |}{keep}.",
        "Can you repair the directory permissions under {root}? {Every|Each} directory should end up {mode} "
        "({want}), and {keep}.",
        "`ls` works on some folders in {root} but `cd` into them {is refused|fails}: their search (x) bit is "
        "missing. Restore traversal by giving the directories of that tree mode {mode}; {keep}.",
        "I get 'Permission denied' {as soon as I|whenever I try to} walk into parts of {root}. Could you make the "
        "whole tree walkable again? Folders: {want}. {keep_c}.",
        "{root}: folders you can't enter. Make them {mode} - the folders only; {keep}.",
        keep_c=keep[:1].upper() + keep[1:],
        root=w.path_ref(root),
        mode=f"{target:o}",
        want=want,
        keep=keep,
    )
    check = _script(*[_mode_is(d, target) for d in dirs], *[_mode_is(p, modes[p]) for p in paths])
    r = _home_short(w, root)
    m = w.pick((f"{target:o}", sym))
    # a directory must be fixed before anything descends into it: pre-order, one directory at a time
    fix = w.pick(
        (
            f"find {r} -type d -exec chmod {m} {{}} \\;",
            f"find {r} -type d -execdir chmod {m} {{}} \\;",
            f"python3 -c 'import os, sys\nfor d, _, _ in os.walk(sys.argv[1]):\n    os.chmod(d, 0o{target:o})' {r}",
            f'fix() {{ chmod {m} "$1"; for d in "$1"/*/; do [ -d "$d" ] && fix "${{d%/}}"; done; }}; fix {r}',
            f'until [ -z "$(find {r} -type d ! -perm {target:o} 2>/dev/null)" ]; do '
            f"find {r} -type d ! -perm {target:o} -exec chmod {m} {{}} + 2>/dev/null; done",
        )
    )
    reference = [fix, w.pick((f"ls -lR {r}", f"find {r} -type d -printf '%m %p\\n'", f"find {r} -ls"))]
    if w.chance(0.4):
        reference.insert(0, f"ls -la {r}")
    return Draft(task=task, check=check, reference=reference, difficulty=3, setup=setup, files=files)


@family(
    "permissions-world-writable-report",
    "permissions",
    "find world-writable files, report them, maybe fix them",
)
def world_writable_report(w: World) -> Draft:
    in_home = w.chance(0.6)
    root = f"{HOME}/{w.dirname()}" if in_home else f"/srv/{w.project()}"
    fix = in_home and w.chance(0.5)
    dirs, paths = _tree(w, root, ("txt", "conf", "csv", "log", "json", "sh"), files=(4, 9), subdirs=(1, 3))
    n_bad = w.randint(1, min(4, len(paths) - 1))
    bad = w.sample(paths, n_bad)
    modes: dict[str, int] = {}
    for p in paths:
        if p in bad:
            modes[p] = w.pick((0o666, 0o646, 0o777, 0o662))
        else:  # group-writable is not world-writable: a decoy for -perm -g+w or -perm /022
            modes[p] = w.pick((0o644, 0o664, 0o640, 0o660, 0o755))
    files = {p: _content(w, p) for p in paths}
    setup = []
    if in_home:
        setup.append(
            "mkdir -p " + " ".join(quote(d) for d in dirs) + f" && chown -R operator:operator {quote(root)}"
        )
    else:
        setup.append("mkdir -p " + " ".join(quote(d) for d in dirs))
    setup += _chmod_groups(modes)
    out = f"{HOME}/{w.pick(('world_writable', 'ww_files', 'perm_audit', 'open_files', 'audit'))}.{w.pick(('txt', 'lst'))}"
    fmt = w.spin("their {full|absolute} paths (one per line)", capitalize=False)
    fix_part = (
        w.spin(
            " Then remove the write permission for others from {those files|them}, {leaving|keeping} "
            "their other bits {unchanged|as they are}."
        )
        if fix
        else ""
    )
    task = w.phrase(
        "{Find|List} the regular files under {root} that are {world-writable|writable by others} and write {fmt} "
        "to {out}. {fix_part}",
        "{Security|An audit} flagged {root}: some files there can be {modified|written} by any user. Put {fmt} in "
        "{out}. {fix_part}",
        "Ticket: report every world-writable file in {the tree at |}{root} to {out}, listing {fmt}. {fix_part}",
        "Which files under {root} are writable by everyone? Save {fmt} to {out}. {fix_part}",
        "Hardening pass on {root}: any user on the machine can overwrite some files there. I need the list, "
        "{fmt}, in {out}. {fix_part}",
        "{out} must name every regular file below {root} whose mode lets others write it: {fmt}. {fix_part}",
        root=w.path_ref(root),
        out=w.path_ref(out, "file"),
        fmt=fmt,
        fix_part=fix_part,
    )
    expected = "\\n".join(sorted(bad))
    check_lines = [
        f"[ -f {quote(out)} ] || exit 1",
        f"got=$(sed -e 's/[[:space:]]*$//' -e '/^$/d' -e 's#//*#/#g' {quote(out)} | sort -u)",
        f'[ "$got" = "$(printf \'{expected}\' | sort -u)" ] || exit 1',
    ]
    for p in paths:
        want = modes[p] & ~0o002 if fix and p in bad else modes[p]
        check_lines.append(_mode_is(p, want))
    check = _script(*check_lines)
    r = _home_short(w, root)
    perm = w.pick(("-o+w", "-0002", "-o=w"))
    reference = [f"find {r} -type f -perm {perm} {w.pick(('', '| sort'))} > {out}".replace("  ", " ")]
    if fix:
        reference.append(
            w.pick(
                (
                    f"find {r} -type f -perm {perm} -exec chmod o-w {{}} +",
                    f"xargs chmod o-w < {out}",
                    f'while read -r f; do chmod o-w "$f"; done < {out}',
                )
            )
        )
    reference.append(f"cat {out}")
    return Draft(
        task=task, check=check, reference=reference, difficulty=3 if fix else 2, setup=setup, files=files
    )


@family("permissions-sticky-shared-dir", "permissions", "set up a shared drop directory with the sticky bit")
def sticky_shared_dir(w: World) -> Draft:
    variant = w.pick(("world", "world", "group"))
    exists = w.chance(0.6)
    if variant == "world":  # outside home the operator cannot create it, so there it already exists
        path = w.pick(
            (
                f"{HOME}/{w.pick(('shared', 'dropbox', 'inbox', 'exchange'))}_{w.word()}",
                f"/srv/{w.pick(('dropbox', 'shared', 'upload', 'exchange'))}-{w.project()}",
            )
        )
        user: SessionUser = "operator"
        group = None
        exists = exists or not path.startswith(HOME)
    else:
        group = w.team()
        path = f"/srv/{w.pick(('teams', 'shared', 'groups', 'collab'))}/{group}"
        user = "root"
    mode = 0o1777 if group is None else 0o1770
    w.note(f"{mode:o}")
    files: dict[str, str] = {}
    setup: list[str] = []
    other = f"{path}/{w.filename('txt')}"
    if group:
        setup.append(f"groupadd {group}")
    if exists:
        files[other] = "\n".join(w.lines(2)) + "\n"
        owner = "operator:operator" if user == "operator" else "root:root"
        setup.append(
            f"chown {owner} {quote(path)} {quote(other)} && chmod 755 {quote(path)} && "
            f"chmod 644 {quote(other)}"
        )
    elif not path.startswith(HOME):
        setup.append(f"mkdir -p {quote(path.rsplit('/', 1)[0])}")
    create = "" if exists else w.spin("{Create|Make} {path} and set it up as", path=w.path_ref(path)) + " "
    if group is None:
        rule = w.spin(
            "{everyone|every user} can create files in it, but {users can delete or rename only their own "
            "files|nobody can delete or rename files that belong to someone else}",
            capitalize=False,
        )
        how = w.spin("world-writable with the sticky bit, mode 1777", capitalize=False)
    else:
        rule = w.spin(
            "members of {group} can create files in it, {only a file's owner can delete or rename it|"
            "nobody can delete another member's files}, and other users have no access at all",
            capitalize=False,
            group=group,
        )
        how = w.spin("group {group}, mode 1770{| with the sticky bit}", capitalize=False, group=group)
    if exists:
        task = w.phrase(
            "Turn {path} into a shared {drop folder|directory}: {rule} ({how}).",
            "{path} should work like /tmp for {its users|the people using it}: {rule}. Set it up {that way |}({how}).",
            "Ticket: people keep deleting each other's files in {path}. {Make sure|Ensure} {rule} ({how}).",
            "Can you fix the permissions of {path} so that {rule}? {Expected:|That is,} {how}.",
            path=w.path_ref(path),
            rule=rule,
            how=how,
        )
    else:
        task = w.phrase(
            "{create}a shared {drop folder|directory}: {rule} ({how}).",
            "We need a {shared|common} folder at {path} where {rule}. {Create it|Set it up}: {how}.",
            "Ticket: {create}a directory where {rule} ({how}).",
            create=create,
            path=w.path_ref(path),
            rule=rule,
            how=how,
        )
    lines = [f"[ -d {quote(path)} ] || exit 1", _mode_is(path, mode)]
    if group:
        lines.append(f'[ "$(stat -c %G {quote(path)})" = {group} ] || exit 1')
    if exists:
        lines.append(_mode_is(other, 0o644))
    check = _script(*lines)
    p = _home_short(w, path)
    reference = [] if exists else [f"mkdir -p {p}"]
    if group:
        reference.append(w.pick((f"chgrp {group} {p}", f"chown root:{group} {p}")))
        reference.append(w.pick((f"chmod {mode:o} {p}", f"chmod u=rwx,g=rwx,o=,+t {p}")))
    else:
        reference.append(w.pick((f"chmod 1777 {p}", f"chmod a+rwx,+t {p}", f"chmod 777 {p} && chmod +t {p}")))
    if not exists and w.chance(0.4):  # install -d makes the folder with its mode (and group) in one step
        reference = [f"install -d -m {mode:o}{f' -o root -g {group}' if group else ''} {p}"]
    reference.append(f"ls -ld {p}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if group or not exists else 1,
        setup=setup,
        files=files,
        user=user,
    )


@family(
    "permissions-chown-tree", "permissions", "hand a directory tree (or part of it) over to another owner"
)
def chown_tree(w: World) -> Draft:
    root = f"{w.pick(('/srv', '/var/www', '/opt', '/data'))}/{w.project()}"
    new = w.username()
    old = w.username()
    variant = w.pick(("all", "all", "from_user", "group_only"))
    group = w.team() if variant != "from_user" and w.chance(0.6) else None
    dirs, paths = _tree(w, root, ("html", "css", "js", "txt", "json", "conf"), files=(3, 7), subdirs=(1, 3))
    setup = [f"useradd -M -s /usr/sbin/nologin {new}", f"useradd -M -s /usr/sbin/nologin {old}"]
    if group:
        setup.append(f"groupadd {group}")
    setup.append("mkdir -p " + " ".join(quote(d) for d in dirs))
    owners = {p: "root:root" for p in dirs + paths}
    if variant == "from_user":
        mine = w.sample(paths + dirs[1:], w.randint(2, max(2, len(paths) - 1)))
        for p in mine:
            owners[p] = f"{old}:root"
        setup.append(f"chown {old} " + " ".join(quote(p) for p in mine))
    else:
        start = w.pick(("root:root", f"{old}:{old}"))
        owners = {p: start for p in owners}
        if start != "root:root":
            setup.append(f"chown -R {start} {quote(root)}")
    files = {p: _content(w, p) for p in paths}
    outside = f"{root.rsplit('/', 1)[0]}/{w.filename('txt')}"  # a neighbour that must keep its owner
    files[outside] = "not part of the tree\n"

    if variant == "all":
        target = f"{new}:{group or new}" if group or w.chance(0.5) else f"{new}:{new}"
        g = target.split(":")[1]
        want = {p: target for p in owners}
        what = w.spin("{user|the user} {new} and group {g}", capitalize=False, new=new, g=g)
        task = w.phrase(
            "{Change the owner of|Hand over} {root} and everything in it to {what}.",
            "The {site|app|service} files in {root} {now belong to|are now maintained by} {new}. Make {the whole "
            "tree|every file and directory there} owned by {what}.",
            "Ticket: recursively chown {root} to {what}.",
            "Could you give {root}, recursively, to {what}?",
            root=w.path_ref(root),
            what=what,
            new=new,
        )
        ref = [
            w.pick(
                (
                    f"chown -R {target} {root}",
                    f"chown -R {new}:{g} {root}",
                    f"find {root} -exec chown {target} {{}} +",  # find hands every path to chown
                )
            )
        ]
    elif variant == "group_only":
        g = group or new
        want = {p: f"{owners[p].split(':')[0]}:{g}" for p in owners}
        task = w.phrase(
            "Change the group of {root} and everything below it to {g}; the {owning user|file owners} must stay as "
            "{they are|is}.",
            "{Every|Each} file and directory in {root} should belong to group {g}. Do not change {the owners|who "
            "owns them}.",
            "Ticket: {root} must be group-owned by {g}, recursively (owner unchanged).",
            "Can you set the group of the whole {root} tree to {g} without touching the owners?",
            root=w.path_ref(root),
            g=g,
        )
        ref = [
            w.pick(
                (
                    f"chgrp -R {g} {root}",
                    f"chown -R :{g} {root}",
                    f"find {root} -exec chgrp {g} {{}} +",
                    f"find {root} -print0 | xargs -0 chgrp {g}",
                )
            )
        ]
    else:
        want = {p: (f"{new}:root" if o.startswith(old + ":") else o) for p, o in owners.items()}
        task = w.phrase(
            "The user {old} has left. Under {root}, give every file and directory owned by {old} to {new}; {anything else|"
            "what belongs to other users} keeps its owner, and groups {stay as they are|do not change}.",
            "{Transfer|Reassign} the ownership of everything under {root} that belongs to {old} to {new} (owner "
            "only, groups unchanged). Other owners stay.",
            "Ticket: {old}'s files in {root} must now be owned by {new}. Only those; keep groups as they are.",
            "Could you find what {old} owns under {root} and make {new} the owner {instead|of it}? Leave the rest "
            "alone, groups included.",
            root=w.path_ref(root),
            old=old,
            new=new,
        )
        ref = [
            w.pick(
                (
                    f"find {root} -user {old} -exec chown {new} {{}} +",
                    f"chown -R --from={old} {new} {root}",
                    f"find {root} -user {old} -print0 | xargs -0 chown {new}",
                    f'find {root} -user {old} | while IFS= read -r p; do chown {new} "$p"; done',
                )
            )
        ]
    lines = [_owner_is(p, o) for p, o in want.items()] + [_owner_is(outside, "root:root")]
    check = _script(*lines)
    ref.append(w.pick((f"ls -lR {root}", f"find {root} -printf '%u:%g %p\\n'")))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if variant == "from_user" else 2,
        setup=setup,
        files=files,
        user="root",
    )


@family(
    "permissions-normalise-modes", "permissions", "set one mode on every directory and another on every file"
)
def normalise_modes(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    dmode, fmode = w.pick(((0o755, 0o644), (0o750, 0o640), (0o700, 0o600), (0o775, 0o664), (0o770, 0o660)))
    keep_scripts = w.chance(0.4)
    exts = (
        ("txt", "md", "html", "css", "json", "sh")
        if keep_scripts
        else ("txt", "md", "html", "css", "json", "csv")
    )
    dirs, paths = _tree(w, root, exts, files=(4, 8), subdirs=(1, 3))
    if keep_scripts and not any(p.endswith(".sh") for p in paths):
        paths.append(f"{w.pick(dirs)}/{w.filename('sh')}")
    smode = dmode  # a script keeps the directory mode: executable where the directories are enterable
    modes: dict[str, int] = {}
    for d in dirs:
        modes[d] = w.pick((0o777, 0o700, 0o775, 0o711, 0o755))
    for p in paths:
        modes[p] = w.pick((0o777, 0o666, 0o600, 0o755, 0o664, 0o604))
    files = {p: _content(w, p) for p in paths}
    setup = [
        "mkdir -p " + " ".join(quote(d) for d in dirs) + f" && chown -R operator:operator {quote(root)}",
        *_chmod_groups(modes),
    ]
    w.note(f"{dmode:o}", f"{fmode:o}")
    scripts = (
        w.spin(
            " Exception: the .sh scripts must stay runnable, so give them {smode} instead.",
            smode=f"{smode:o}",
        )
        if keep_scripts
        else ""
    )
    task = w.phrase(
        "{Normalise|Reset} the permissions under {root}: every directory {should be|gets} {d} and every regular "
        "file {should be|gets} {f}, {root} itself included. {scripts}",
        "The modes in {root} are a mess. Set {all the directories|every directory} to {d} and {all the files|"
        "every file} to {f}, recursively. {scripts}",
        "Ticket: {root} has inconsistent permissions. Target: directories {d}, files {f}. {scripts}",
        "Could you make every directory in {root} mode {d} and every file mode {f}? {scripts}",
        "A bad unzip left {root} with random modes. Reset them to our standard: {d} for directories, {f} for "
        "regular files. {scripts}",
        "{root}: dirs {d}, files {f}, recursively. {scripts}",
        root=w.path_ref(root),
        d=f"{dmode:o}",
        f=f"{fmode:o}",
        scripts=scripts,
    )
    want = {d: dmode for d in dirs}
    want.update({p: (smode if keep_scripts and p.endswith(".sh") else fmode) for p in paths})
    check = _script(*[_mode_is(p, m) for p, m in want.items()])
    r = _home_short(w, root)
    reference = [
        f"find {r} -type d -exec chmod {dmode:o} {{}} +",
        f"find {r} -type f -exec chmod {fmode:o} {{}} +",
    ]
    way = w.randint(0, 4)
    if way == 1:
        reference = [
            f"find {r} -type d -print0 | xargs -0 chmod {dmode:o}",
            f"find {r} -type f -print0 | xargs -0 chmod {fmode:o}",
        ]
    elif way == 2:  # directories first: a file mode without x must never land on a directory
        reference = [
            f"find {r} -type d -exec chmod {dmode:o} {{}} \\;",
            f"find {r} -type f -exec chmod {fmode:o} {{}} \\;",
        ]
    elif way == 3:
        reference = [
            "python3 -c 'import os, sys\nd, f = int(sys.argv[2], 8), int(sys.argv[3], 8)\n"
            "for top, _, files in os.walk(sys.argv[1]):\n    os.chmod(top, d)\n"
            f"    for n in files:\n        os.chmod(os.path.join(top, n), f)' {r} {dmode:o} {fmode:o}"
        ]
    elif way == 4:
        reference = [
            f'find {r} -type d | while read -r d; do chmod {dmode:o} "$d"; done',
            f'find {r} -type f | while read -r f; do chmod {fmode:o} "$f"; done',
        ]
    if w.chance(0.2):  # one walk: each branch of the expression runs its own chmod
        reference = [
            f"find {r} \\( -type d -exec chmod {dmode:o} {{}} + \\) -o \\( -type f -exec chmod {fmode:o} {{}} + \\)"
        ]
    if keep_scripts:
        reference.append(f"find {r} -type f -name '*.sh' -exec chmod {smode:o} {{}} +")
    reference.append(w.pick((f"ls -lR {r}", f"find {r} -printf '%m %p\\n'")))
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if keep_scripts else 2,
        setup=setup,
        files=files,
    )
