"""Users: accounts, groups, shells, locking, password ageing and uids (the account databases in /etc).

Most tasks run as root (they edit /etc/passwd, /etc/group and /etc/shadow through the shadow tools). Checks read
the databases with ``getent``/``id`` and the files with ``stat``, never the commands typed, so ``usermod``,
``gpasswd``, ``chage`` or ``passwd`` are all accepted where they reach the same state.
"""

from __future__ import annotations

import posixpath
from datetime import date

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, World, py_check, quote, workplace

SHELLS = ("/bin/bash", "/bin/sh", "/bin/dash")
ROLES = ("Ops", "Dev", "QA", "Intern", "Contractor", "Analyst", "Support", "Admin")


# ---- helpers ---------------------------------------------------------------------------------------------------------
def _script(*lines: str) -> str:
    return "#!/bin/bash\n" + "\n".join(lines) + "\n"


def _shell_is(user: str, shell: str) -> str:
    """The login shell of ``user`` is ``shell`` (its /usr twin counts: Debian's /usr is merged)."""
    return (
        f'case "$(getent passwd {user} | cut -d: -f7)" in {shell}|/usr{shell}) ;; *) exit 1;; esac'
        if not shell.startswith("/usr/")
        else f'case "$(getent passwd {user} | cut -d: -f7)" in {shell}|{shell[4:]}) ;; *) exit 1;; esac'
    )


def _in_group(user: str, group: str) -> str:
    return f"id -nG {user} 2>/dev/null | tr ' ' '\\n' | grep -qx {group} || exit 1"


def _not_in_group(user: str, group: str) -> str:
    return f"! id -nG {user} 2>/dev/null | tr ' ' '\\n' | grep -qx {group} || exit 1"


def _members_are(group: str, members: list[str]) -> str:
    """The member list of ``group`` in /etc/group is exactly ``members`` (any order)."""
    want = ",".join(sorted(members))
    return (
        f"[ \"$(getent group {group} | cut -d: -f4 | tr ',' '\\n' | sed '/^$/d' | sort | paste -sd,)\" = "
        f"{quote(want)} ] || exit 1"
    )


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _add_users(names: list[str], extra: str = "") -> str:
    """One setup command creating plain accounts without homes (fast)."""
    return " && ".join(f"useradd -M -s /usr/sbin/nologin{extra} {n}" for n in names)


def _days(d: date) -> int:
    return (d - date(1970, 1, 1)).days


# ---- families --------------------------------------------------------------------------------------------------------
@family("users-create-in-group", "users", "create a user with a home directory and a shell in a given group")
def create_in_group(w: World) -> Draft:
    user = w.username()
    shell = w.pick(("/bin/bash", "/bin/bash", "/bin/sh", "/bin/dash"))
    primary = w.chance(0.25)
    groups = [w.team() for _ in range(1 if primary else w.randint(1, 2))]
    missing = [g for g in groups if w.chance(0.4)]
    uid = w.randint(1100, 4999) if w.chance(0.35) else None
    comment = (
        f"{user.split('_')[0].rstrip('0123456789').capitalize()} {w.pick(ROLES)}" if w.chance(0.3) else None
    )
    home = (
        f"{w.pick(('/srv/home', '/home/staff', '/home/' + w.pick(('users', 'people', 'accounts'))))}/{user}"
        if w.chance(0.25)
        else f"/home/{user}"
    )
    if uid:
        w.note(uid)
    if comment:
        w.note(comment)
    setup = []
    existing_member = None
    present = [g for g in groups if g not in missing]
    if present:
        existing_member = w.username()
        setup.append(
            " && ".join(f"groupadd {g}" for g in present)
            + f" && useradd -M -s /usr/sbin/nologin -G {','.join(present)} {existing_member}"
        )
    if home != f"/home/{user}":
        setup.append(f"mkdir -p {home.rsplit('/', 1)[0]}")

    gtext = _and(groups)
    if primary:
        grp = w.spin("with {group} as its primary group", capitalize=False, group=groups[0])
    elif len(groups) == 1:
        grp = w.spin(
            "{in|as a member of} the {group} group (as a supplementary group)", capitalize=False, group=gtext
        )
    else:
        grp = w.spin(
            "{in|as a member of} the {group} groups (as supplementary groups)", capitalize=False, group=gtext
        )
    parts = [
        w.spin(
            "home directory {home} (created{| by you}, owned by {user})",
            capitalize=False,
            home=home,
            user=user,
        ),
        w.spin("login shell {shell}", capitalize=False, shell=shell),
    ]
    if uid:
        parts.append(w.spin("{uid|user id} {uid}", capitalize=False, uid=uid))
    if comment:
        parts.append(w.spin("{full name|comment (GECOS)} '{comment}'", capitalize=False, comment=comment))
    details = w.clauses(parts, ", ")
    if len(missing) == 1:
        note = w.spin(
            "{The|Note: the} group {g} {does not exist yet|has not been created yet}; create it.",
            g=missing[0],
        )
    elif missing:
        note = w.spin(
            "{The|Note: the} groups {g} {do not exist yet|have not been created yet}; create them.",
            g=_and(missing),
        )
    else:
        note = ""
    task = w.phrase(
        "Create a user account {user} {grp}: {details}. {note}",
        "{We have|There is} a new {colleague|team member}, {user}. {Set up|Create} their account {grp}, with "
        "{details}. {note}",
        "Ticket: new account {user} needed. Requirements: {details}; {membership|groups}: {grp_short}. {note}",
        "Could you add a user {user} {grp}? It needs {details}. {note}",
        "{user} starts on Monday and will need to log in {grp}. Prepare the account ahead of time: {details}. "
        "{note}",
        "useradd request - login {user}; {details}; groups: {grp_short}. {note}",
        user=user,
        grp=grp,
        details=details,
        note=note,
        grp_short=gtext if not primary else f"primary {groups[0]}",
    )

    lines = [
        f"e=$(getent passwd {user}) || exit 1",
        f'[ "$(echo "$e" | cut -d: -f6)" = {home} ] || exit 1',
        _shell_is(user, shell),
        f'[ -d {home} ] && [ "$(stat -c %U {home})" = {user} ] || exit 1',
    ]
    if primary:
        lines.append(f'[ "$(id -gn {user})" = {groups[0]} ] || exit 1')
    else:
        lines += [_in_group(user, g) for g in groups]
    if uid:
        lines.append(f'[ "$(id -u {user})" = {uid} ] || exit 1')
    if comment:
        lines.append(f'[ "$(echo "$e" | cut -d: -f5 | cut -d, -f1)" = {quote(comment)} ] || exit 1')
    if existing_member:
        lines += [_in_group(existing_member, g) for g in present]
    check = _script(*lines)

    reference = [f"groupadd {g}" for g in missing]
    flags = []
    long = w.chance(0.3)
    flags.append("--create-home" if long else "-m")
    if home != f"/home/{user}":
        flags.append(f"--home-dir {home}" if long else f"-d {home}")
    flags.append(f"--shell {shell}" if long else f"-s {shell}")
    if uid:
        flags.append(f"--uid {uid}" if long else f"-u {uid}")
    if comment:
        flags.append(f"--comment {quote(comment)}" if long else f"-c {quote(comment)}")
    separate = not primary and w.chance(0.3)
    if primary:
        flags.append(f"--gid {groups[0]}" if long else f"-g {groups[0]}")
    elif not separate:
        flags.append(f"--groups {','.join(groups)}" if long else f"-G {','.join(groups)}")
    reference.append(f"useradd {' '.join(flags)} {user}")
    if separate:
        reference.append(
            w.pick(
                (
                    f"usermod -aG {','.join(groups)} {user}",
                    " && ".join(f"gpasswd -a {user} {g}" for g in groups),
                )
            )
        )
    reference.append(w.pick((f"id {user}", f"getent passwd {user}; id {user}", f"id {user}; ls -ld {home}")))
    difficulty = min(3, 1 + int(bool(missing)) + int(separate or primary or len(flags) > 3))
    return Draft(task=task, check=check, reference=reference, difficulty=difficulty, setup=setup, user="root")


@family("users-group-add-members", "users", "create a group (or use one) and add existing users to it")
def group_add_members(w: World) -> Draft:
    group = w.team()
    old = w.team()
    users = [w.username() for _ in range(w.randint(4, 6))]
    members = w.sample(users, w.randint(2, min(4, len(users) - 1)))
    exists = w.chance(0.35)
    gid = w.randint(2000, 6999) if not exists and w.chance(0.4) else None
    if gid:
        w.note(gid)
    in_old = [u for u in users if w.chance(0.5)] or [members[0]]
    setup = [
        f"groupadd {old}",
        " && ".join(
            f"useradd -M -s /usr/sbin/nologin{' -G ' + old if u in in_old else ''} {u}" for u in users
        ),
    ]
    prev = None
    if exists:
        prev = w.username()
        setup.append(f"groupadd {group} && useradd -M -s /usr/sbin/nologin -G {group} {prev}")
    names = _and(members)
    keep = w.spin(
        "{they must keep their other group memberships|their existing group memberships must stay|do "
        "not remove them from their other groups}",
        capitalize=False,
    )
    if exists:
        task = w.phrase(
            "Add {names} to the existing group {group} as supplementary members; {prev} {must stay|stays} in it and "
            "{keep}.",
            "The users {names} {are joining|join} the {group} team. Add them to group {group} ({prev} is already a member and "
            "stays); {keep}.",
            "Ticket: group {group} needs {names} as {additional|extra} members. {Keep|Do not remove} {prev}; {keep}.",
            "Can you put {names} into the {group} group? {keep_cap}, and {prev} stays a member.",
            names=names,
            group=group,
            prev=prev,
            keep=keep,
            keep_cap=keep[:1].upper() + keep[1:],
        )
    else:
        gid_text = " " + w.spin("with {gid|group id} {gid}", capitalize=False, gid=gid) if gid else ""
        task = w.phrase(
            "Create a group {group}{gid_text} and add {names} to it as supplementary members; {keep}.",
            "{We need|Set up} a new group {group}{gid_text} for {names}. Create it and add them{| as members}; "
            "{keep}.",
            "Ticket: new group {group}{gid_text}; members: {names}. {keep_cap}.",
            "Could you create the {group} group{gid_text} and make {names} members of it? {keep_cap}.",
            names=names,
            group=group,
            gid_text=gid_text,
            keep=keep,
            keep_cap=keep[:1].upper() + keep[1:],
        )
    want = members + ([prev] if prev else [])
    lines = [f"getent group {group} >/dev/null || exit 1", _members_are(group, want)]
    if gid:
        lines.append(f'[ "$(getent group {group} | cut -d: -f3)" = {gid} ] || exit 1')
    lines += [_in_group(u, old) for u in in_old]
    lines += [f'[ "$(id -gn {u})" = {u} ] || exit 1' for u in members]  # the primary group did not move
    check = _script(*lines)
    reference = [] if exists else [f"groupadd {'-g ' + str(gid) + ' ' if gid else ''}{group}"]
    style = (
        w.pick(("loop", "gpasswd_a", "each", "gpasswd_m"))
        if not exists
        else w.pick(("loop", "gpasswd_a", "each"))
    )
    if style == "loop":
        reference.append(f'for u in {" ".join(members)}; do usermod -aG {group} "$u"; done')
    elif style == "gpasswd_a":
        reference.append(" && ".join(f"gpasswd -a {u} {group}" for u in members))
    elif style == "each":
        reference += [f"usermod -a -G {group} {u}" for u in members]
    else:
        reference.append(f"gpasswd -M {','.join(members)} {group}")
    reference.append(w.pick((f"getent group {group}", f"grep '^{group}:' /etc/group", f"id {members[0]}")))
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if exists or len(in_old) > 1 else 2,
        setup=setup,
        user="root",
    )


@family("users-lock-account", "users", "disable an account (lock, nologin, expire) without deleting it")
def lock_account(w: World) -> Draft:
    user = w.username()
    decoy = w.username()
    actions = [a for a in ("lock", "nologin", "expire") if w.chance(0.55)] or [
        w.pick(("lock", "nologin", "expire"))
    ]
    note_file = w.filename(w.pick(("txt", "md", "csv")))
    setup = [
        f"useradd -m -s /bin/bash {user} && useradd -m -s /bin/bash {decoy}",
        f"echo {quote(f'{user}:{w.token(12)}')} | chpasswd && echo {quote(f'{decoy}:{w.token(12)}')} | chpasswd",
        f"echo {quote(w.pick(w.lines(2)))} > /home/{user}/{note_file} && chown {user}: /home/{user}/{note_file}",
    ]
    parts = {
        "lock": w.spin("{lock its password|lock the password} (so password logins fail)", capitalize=False),
        "nologin": w.spin("{set|change} its login shell to /usr/sbin/nologin", capitalize=False),
        "expire": w.spin(
            "{expire the account|make the account expire} {now|immediately} (its expiry date must "
            "not be in the future)",
            capitalize=False,
        ),
    }
    todo = w.clauses([parts[a] for a in actions], "; ")
    keep = w.spin(
        "{do not delete the account or its home directory|keep the account and its home directory|"
        "the account and its files must stay}",
        capitalize=False,
    )
    task = w.phrase(
        "The user {user} {has left|is leaving|is on extended leave}. For that account: {todo}. {keep_cap}; change nothing "
        "else.",
        "Disable the account {user}: {todo}. {keep_cap}.",
        "Ticket: security asks to {block|disable} {user}. Steps: {todo}. {keep_cap}, and do not touch other "
        "accounts.",
        "Can you {block|deactivate} {user}? Please {todo}, but {keep}.",
        "We think the credentials of {user} leaked. Until that is sorted out, nobody may use the account: "
        "{todo}. {keep_cap}.",
        "{user}: {todo}. {keep_cap}.",
        user=user,
        todo=todo,
        keep=keep,
        keep_cap=keep[:1].upper() + keep[1:],
    )
    today = "$(( $(date +%s) / 86400 ))"
    lines = [f"getent passwd {user} >/dev/null || exit 1", f"[ -f /home/{user}/{note_file} ] || exit 1"]
    hash_field = f"getent shadow {user} | cut -d: -f2"
    if "lock" in actions:
        lines.append(f"case \"$({hash_field})\" in '!'*'$'*) ;; *) exit 1;; esac")
    else:
        lines.append(f"case \"$({hash_field})\" in '$'*) ;; *) exit 1;; esac")
    if "nologin" in actions:
        lines.append(_shell_is(user, "/usr/sbin/nologin"))
    else:
        lines.append(_shell_is(user, "/bin/bash"))
    if "expire" in actions:
        lines.append(
            f'e=$(getent shadow {user} | cut -d: -f8); [ -n "$e" ] && [ "$e" -le {today} ] || exit 1'
        )
    lines += [
        f"case \"$(getent shadow {decoy} | cut -d: -f2)\" in '$'*) ;; *) exit 1;; esac",
        _shell_is(decoy, "/bin/bash"),
        f'[ -z "$(getent shadow {decoy} | cut -d: -f8)" ] || exit 1',
    ]
    check = _script(*lines)
    reference = []
    if len(actions) > 1 and w.chance(0.35):
        flags = {"lock": "-L", "nologin": "-s /usr/sbin/nologin", "expire": "-e 1"}
        reference.append(f"usermod {' '.join(flags[a] for a in actions)} {user}")
    else:
        for a in actions:
            reference.append(
                {
                    "lock": w.pick((f"passwd -l {user}", f"usermod -L {user}")),
                    "nologin": f"usermod -s /usr/sbin/nologin {user}",
                    "expire": w.pick(
                        (f"chage -E 0 {user}", f"usermod -e 1 {user}", f"chage -E 1970-01-02 {user}")
                    ),
                }[a]
            )
    reference.append(w.pick((f"passwd -S {user}", f"chage -l {user}", f"getent passwd {user}")))
    return Draft(
        task=task, check=check, reference=reference, difficulty=min(3, len(actions)), setup=setup, user="root"
    )


@family("users-change-shell", "users", "change the login shell of one or more accounts")
def change_shell(w: World) -> Draft:
    variant = w.pick(("one", "one", "several", "by_shell"))
    users = [w.username() for _ in range(w.randint(3, 5))]
    if variant == "by_shell":
        old = w.pick(("/bin/sh", "/bin/dash", "/bin/rbash"))
        new = "/bin/bash"
        matching = w.sample(users, w.randint(1, len(users) - 1))
        start = {
            u: (
                old
                if u in matching
                else w.pick(
                    [s for s in ("/bin/bash", "/usr/sbin/nologin", "/bin/sh", "/bin/dash") if s != old]
                )
            )
            for u in users
        }
        svc = f"{w.service()}d"  # a system account with the old shell stays as it is
        setup = [
            " && ".join(f"useradd -M -s {start[u]} {u}" for u in users) + f" && useradd -r -M -s {old} {svc}"
        ]
        want = {u: (new if u in matching else start[u]) for u in users}
        want[svc] = old
        task = w.phrase(
            "Every regular account (uid 1000 and above) whose login shell is {old} should use {new} instead. "
            "{Change|Switch} them; leave system accounts and other shells alone.",
            "Ticket: {move|switch} all human users (uid >= 1000) with the shell {old} to {new}. System accounts (uid "
            "below 1000) keep theirs.",
            "{Find|Look up} the accounts with uid 1000 or higher that use {old} as login shell and change it to {new} "
            "for each of them; no other account may change.",
            "Could you switch every user account (uid 1000+) that currently logs in with {old} to {new}? Accounts "
            "with other shells and system accounts stay {as they are|unchanged}.",
            old=old,
            new=new,
        )
        reference = [
            w.pick(
                (
                    f"awk -F: '$3 >= 1000 && $7 == \"{old}\" {{print $1}}' /etc/passwd",
                    f"getent passwd | awk -F: '$3 >= 1000 && $7 == \"{old}\"'",
                )
            )
        ]
        reference.append(
            w.pick(
                (
                    f"awk -F: '$3 >= 1000 && $7 == \"{old}\" {{print $1}}' /etc/passwd | xargs -r -n1 usermod -s {new}",
                    f'for u in $(awk -F: \'$3 >= 1000 && $7 == "{old}" {{print $1}}\' /etc/passwd); do chsh -s {new} "$u"; '
                    "done",
                )
            )
        )
        difficulty = 3
    else:
        targets = [w.pick(users)] if variant == "one" else w.sample(users, w.randint(2, len(users) - 1))
        new = w.pick(("/bin/bash", "/bin/sh", "/bin/dash", "/usr/sbin/nologin"))
        start = {u: w.pick([s for s in SHELLS if s != new]) for u in users}
        setup = [" && ".join(f"useradd -M -s {start[u]} {u}" for u in users)]
        want = {u: (new if u in targets else start[u]) for u in users}
        names = _and(targets)
        plural = len(targets) > 1
        task = w.phrase(
            "{Change|Set|Switch} the login shell of {names} to {new}{| and leave the other accounts alone}{|, please}.",
            "For {names}, the {login |default |}shell {must|should} be {new}. {Make the change|Change it|Please update "
            "the account}.",
            "Ticket: {login shell|shell} for {names} must be {new}{| (other accounts unchanged)}.",
            "Could you {switch|move} {names} to the {new} shell{| as login shell}?",
            names=names,
            new=new,
        )
        cmd = w.pick(("usermod -s", "chsh -s")) if new != "/usr/sbin/nologin" else "usermod -s"
        if plural and w.chance(0.5):
            reference = [f'for u in {" ".join(targets)}; do {cmd} {new} "$u"; done']
        else:
            reference = [f"{cmd} {new} {u}" for u in targets]
        difficulty = 2 if plural else 1
    reference.append(
        w.pick(
            (
                f"getent passwd {' '.join(users)}",
                "tail -n 8 /etc/passwd",
                f"grep -E '^({'|'.join(users)}):' /etc/passwd",
            )
        )
    )
    check = _script(
        *[f"getent passwd {u} >/dev/null || exit 1" for u in want],
        *[_shell_is(u, s) for u, s in want.items()],
        _shell_is("operator", "/bin/bash"),
    )
    return Draft(task=task, check=check, reference=reference, difficulty=difficulty, setup=setup, user="root")


@family("users-account-expiry", "users", "set an account's expiry date and password ageing with chage")
def account_expiry(w: World) -> Draft:
    user = w.username()
    decoy = w.username()
    settings = [s for s in ("expire", "max", "min", "warn", "inactive", "must_change") if w.chance(0.35)]
    if not settings:
        settings = [w.pick(("expire", "max"))]
    if "must_change" in settings and len(settings) == 1:
        settings.append("expire")
    expire = w.date("2025-06-01", 900).date()
    values = {
        "max": w.pick((30, 45, 60, 90, 120, 180, 365)),
        "min": w.pick((1, 2, 3, 7)),
        "warn": w.pick((5, 7, 10, 14)),
        "inactive": w.pick((3, 7, 14, 30)),
    }
    w.note(expire.isoformat(), *[values[k] for k in settings if k in values])
    setup = [f"useradd -m -s /bin/bash {user} && useradd -m -s /bin/bash {decoy}"]
    phr = {
        "expire": w.spin("the account {expires|must expire} on {d}", capitalize=False, d=expire.isoformat()),
        "max": w.spin(
            "the password {must be changed|has to be changed} at least every {n} days",
            capitalize=False,
            n=values["max"],
        ),
        "min": w.spin(
            "{at least|a minimum of} {n} {unit} must pass between password changes",
            capitalize=False,
            n=values["min"],
            unit="day" if values["min"] == 1 else "days",
        ),
        "warn": w.spin(
            "the user {gets|is given} a warning {n} days before the password expires",
            capitalize=False,
            n=values["warn"],
        ),
        "inactive": w.spin(
            "the account {is disabled|gets locked} {n} days after the password has expired",
            capitalize=False,
            n=values["inactive"],
        ),
        "must_change": w.spin(
            "the user {must|has to} change the password at the next login", capitalize=False
        ),
    }
    todo = w.clauses([phr[s] for s in settings], "; ")
    task = w.phrase(
        "{Configure|Set up} the account {user} so that {todo}.",
        "{Policy|Compliance} update for the account {user}: {todo}. Other accounts {stay as they are|are not "
        "affected}.",
        "Ticket: {user} is a {contractor|temporary account}. Configure it so that {todo}.",
        "Could you {configure|adjust} {user}'s account so that {todo}?",
        "HR sent the dates for {user}'s contract, and the account has to follow them: {todo}. Nothing else "
        "about the account changes.",
        "{user}, password/expiry settings: {todo}.",
        user=user,
        todo=todo,
    )
    field = {"min": 4, "max": 5, "warn": 6, "inactive": 7}
    lines = [f"s=$(getent shadow {user}) || exit 1"]
    if "expire" in settings:
        lines.append(f'[ "$(echo "$s" | cut -d: -f8)" = {_days(expire)} ] || exit 1')
    for k, f in field.items():
        if k in settings:
            lines.append(f'[ "$(echo "$s" | cut -d: -f{f})" = {values[k]} ] || exit 1')
    if "must_change" in settings:
        lines.append('[ "$(echo "$s" | cut -d: -f3)" = 0 ] || exit 1')
    lines.append(f'[ -z "$(getent shadow {decoy} | cut -d: -f8)" ] || exit 1')
    check = _script(*lines)
    opts = {
        "expire": f"-E {expire.isoformat()}",
        "max": f"-M {values.get('max')}",
        "min": f"-m {values.get('min')}",
        "warn": f"-W {values.get('warn')}",
        "inactive": f"-I {values.get('inactive')}",
        "must_change": "-d 0",
    }
    style = w.pick(("one", "each", "mixed"))
    if style == "one":
        reference = [f"chage {' '.join(opts[s] for s in settings)} {user}"]
    elif style == "each":
        reference = [f"chage {opts[s]} {user}" for s in settings]
    else:
        alt = {
            "expire": f"usermod -e {expire.isoformat()} {user}",
            "max": f"passwd -x {values.get('max')} {user}",
            "min": f"passwd -n {values.get('min')} {user}",
            "warn": f"passwd -w {values.get('warn')} {user}",
            "inactive": f"passwd -i {values.get('inactive')} {user}",
            "must_change": f"passwd -e {user}",
        }
        reference = [alt[s] for s in settings]
    reference.append(f"chage -l {user}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=1 if len(settings) == 1 else 2,
        setup=setup,
        user="root",
    )


@family("users-list-group-members", "users", "write the members of a group to a file")
def list_group_members(w: World) -> Draft:
    group = w.team()
    other = w.team()
    supp = [w.username() for _ in range(w.randint(1, 4))]
    prim = [w.username() for _ in range(w.randint(1, 3))]
    decoys = [w.username() for _ in range(w.randint(1, 3))]
    mode = w.pick(("supplementary", "all"))
    ordered = w.chance(0.5)
    out = f"{HOME}/{w.pick(('members', group + '_members', 'team', 'who_is_in_' + group))}.{w.pick(('txt', 'lst'))}"
    setup = [
        f"groupadd {group} && groupadd {other}",
        " && ".join(
            [
                *(f"useradd -M -s /bin/bash -G {group} {u}" for u in supp),
                *(f"useradd -M -s /bin/bash -g {group} {u}" for u in prim),
                *(f"useradd -M -s /bin/bash -G {other} {u}" for u in decoys),
            ]
        ),
    ]
    want = sorted(supp) if mode == "supplementary" else sorted(set(supp + prim))
    fmt = (
        w.spin("one name per line, sorted {alphabetically|A to Z}", capitalize=False)
        if ordered
        else w.spin("one {user|login} name per line{|, in any order}", capitalize=False)
    )
    if mode == "supplementary":
        who = w.spin(
            "the {members|users} listed for the group {group} in /etc/group", capitalize=False, group=group
        )
    else:
        who = w.spin(
            "{every account|all users} in group {group} ({both those with it as their primary group and "
            "its supplementary members|primary or supplementary membership})",
            capitalize=False,
            group=group,
        )
    task = w.phrase(
        "Write {who} to {out}, {fmt}.",
        "{We need|Please make} a list of {who}. Save it to {out} ({fmt}).",
        "Ticket: {audit|review} of group {group}. {Put|Write} {who} in {out}, {fmt}.",
        "Who is in {group}? Write {who} to {out} ({fmt}).",
        "Before we rename the {group} group I need to know whom it affects. Put {who} in {out}, {fmt}.",
        "{out}: {who}. {fmt_c}.",
        fmt_c=fmt[:1].upper() + fmt[1:],
        who=who,
        out=w.path_ref(out, "file"),
        fmt=fmt,
        group=group,
    )
    cleaned = f"sed -e 's/[[:space:]]*$//' -e '/^$/d' {quote(out)}"
    expected = "\\n".join(want)
    if ordered:
        lines = [
            f"[ -f {quote(out)} ] || exit 1",
            f'[ "$({cleaned})" = "$(printf \'{expected}\')" ] || exit 1',
        ]
    else:
        lines = [
            f"[ -f {quote(out)} ] || exit 1",
            f'[ "$({cleaned} | sort)" = "$(printf \'{expected}\' | sort)" ] || exit 1',
        ]
    check = _script(*lines)
    o = "~" + out[len(HOME) :] if w.chance(0.5) else out
    sort = " | sort" if ordered or w.chance(0.5) else ""
    if mode == "supplementary":
        reference = [
            w.pick(
                (
                    f"getent group {group} | cut -d: -f4 | tr ',' '\\n'{sort} > {o}",
                    f"awk -F: '$1 == \"{group}\" {{print $4}}' /etc/group | tr ',' '\\n'{sort} > {o}",
                )
            )
        ]
    else:
        reference = [
            f"gid=$(getent group {group} | cut -d: -f3); echo $gid",
            f"{{ getent group {group} | cut -d: -f4 | tr ',' '\\n'; "
            f"getent passwd | awk -F: -v g=\"$gid\" '$4 == g {{print $1}}'; }} | sed '/^$/d' | sort -u > {o}",
        ]
    reference.append(f"cat {o}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if mode == "supplementary" else 3,
        setup=setup,
    )


@family("users-delete-with-home", "users", "remove an account and its home (optionally archiving it first)")
def delete_with_home(w: World) -> Draft:
    user = w.username()
    decoy = w.username()
    variant = w.pick(("purge", "purge", "archive", "keep_home"))
    names = [w.filename(w.pick(("txt", "md", "csv", "sh"))) for _ in range(w.randint(1, 3))]
    manager = w.username() if variant == "keep_home" else None
    setup = [
        f"useradd -m -s /bin/bash {user} && useradd -m -s /bin/bash {decoy}"
        + (f" && useradd -m -s /bin/bash {manager}" if manager else ""),
        " && ".join(f"echo {quote(w.pick(w.lines(3)))} > /home/{user}/{n}" for n in names)
        + f" && chown -R {user}: /home/{user}",
    ]
    archive = None
    if variant == "archive":
        adir = w.pick(("/srv/archive", "/root/offboarding", "/var/backups/homes", "/srv/backup/users"))
        archive = f"{adir}/{user}{w.pick(('-home', '_home', ''))}.{w.pick(('tar.gz', 'tgz', 'tar.gz'))}"
        if w.chance(0.5):
            setup.append(f"mkdir -p {adir}")
    lines = [
        f"! getent passwd {user} >/dev/null || exit 1",
        f"getent passwd {decoy} >/dev/null && [ -d /home/{decoy} ] || exit 1",
    ]
    if variant == "purge":
        task = w.phrase(
            "Delete the user {user} together with {its|their} home directory.",
            "{The user|Account} {user} {has left|left the company}. Remove the account and {its|their} home directory; {decoy} "
            "{stays|must not be touched}.",
            "Ticket: remove {user} (account and /home/{user}).",
            "Could you delete {user}'s account and home directory{| completely}?",
            user=user,
            decoy=decoy,
        )
        lines.append(f"[ ! -e /home/{user} ] || exit 1")
        reference = [
            w.pick(
                (
                    f"userdel -r {user}",
                    f"userdel --remove {user}",
                    f"userdel {user} && rm -rf /home/{user}",  # the account first, then its home by hand
                )
            ),
            w.pick(("ls /home", f"getent passwd {user} || echo gone")),
        ]
        difficulty = 1
    elif variant == "archive":
        task = w.phrase(
            "Offboard {user}: first {save|archive} {their|the} home directory as a gzip-compressed tarball "
            "{archive}{| (create the folder if needed)}, then delete the account and its home directory.",
            "{The user|Account} {user} {has left|is gone}. Keep a copy of /home/{user} in {archive} (tar.gz), then remove the user "
            "and the home directory.",
            "Ticket: archive /home/{user} to {archive} (gzip tarball) and then delete user {user} with {its|the} "
            "home.",
            "Could you back up {user}'s home to {archive} as a .tar.gz and then remove the account and the home "
            "directory?",
            user=user,
            archive=archive,
        )
        names_re = "|".join(names)
        lines += [
            f"[ ! -e /home/{user} ] || exit 1",
            f"[ -f {archive} ] || exit 1",
            f"[ \"$(tar -tzf {archive} | grep -cE '(^|/)({names_re})$')\" -ge {len(names)} ] || exit 1",
        ]
        reference = [
            f"mkdir -p {adir}",
            w.pick(
                (
                    f"tar -czf {archive} -C /home {user}",
                    f"tar czf {archive} /home/{user}",
                    f"tar -cf - -C /home {user} | gzip > {archive}",  # tar streams, gzip compresses
                )
            ),
            f"tar -tzf {archive}",
            w.pick((f"userdel -r {user}", f"userdel {user} && rm -rf /home/{user}")),
            f"ls -l {adir}",
        ]
        difficulty = 3
    else:
        task = w.phrase(
            "Delete the account {user} but keep {their|its} home directory, and make {manager} the owner of "
            "{everything in it|all of it} (user and group {manager}).",
            "The user {user} {has left|is gone}; {manager} takes over {their|the} files. Remove the user account, keep "
            "/home/{user}, and give the directory and its contents to {manager}:{manager}.",
            "Ticket: remove user {user} (do NOT delete /home/{user}); chown that home recursively to {manager} "
            "(group {manager} too).",
            "Could you delete {user}'s account, keeping the home directory, and hand everything in it to {manager} "
            "(owner and group)?",
            user=user,
            manager=manager,
        )
        lines += [
            f"[ -d /home/{user} ] || exit 1",
            *[f"[ -f /home/{user}/{n} ] || exit 1" for n in names],
            f'[ -z "$(find /home/{user} \\( ! -user {manager} -o ! -group {manager} \\) -print -quit)" ] '
            "|| exit 1",
        ]
        reference = [
            w.pick((f"chown -R {manager}:{manager} /home/{user}", f"chown -R {manager}: /home/{user}")),
            f"userdel {user}",
            f"ls -la /home/{user}",
        ]
        if w.chance(0.5):
            reference = [reference[1], reference[0], reference[2]]
        difficulty = 2
    check = _script(*lines)
    return Draft(task=task, check=check, reference=reference, difficulty=difficulty, setup=setup, user="root")


@family("users-set-uid", "users", "give an account a new uid and fix the ownership of its files")
def set_uid(w: World) -> Draft:
    user = w.username()
    other = w.username()
    old, new = w.randint(1500, 2999), w.randint(3000, 5999)
    w.note(new)
    outside = w.chance(0.5)
    with_gid = w.chance(0.35)
    data = f"/srv/{w.project()}"
    home_files = [w.filename(w.pick(("txt", "md", "csv"))) for _ in range(w.randint(1, 3))]
    data_mine = [w.filename(w.pick(("csv", "json", "log"))) for _ in range(w.randint(1, 3))]
    data_other = [w.filename(w.pick(("csv", "json", "log"))) for _ in range(w.randint(1, 2))]
    setup = [
        f"useradd -m -u {old} -s /bin/bash {user} && useradd -M -s /usr/sbin/nologin {other}",
        " && ".join(f"echo {quote(w.pick(w.lines(2)))} > /home/{user}/{n}" for n in home_files)
        + f" && chown -R {user}: /home/{user}",
    ]
    if outside:
        setup.append(
            f"mkdir -p {data} && "
            + " && ".join(f"echo {w.word()} > {data}/{n}" for n in data_mine + data_other)
            + f" && chown {user} "
            + " ".join(f"{data}/{n}" for n in data_mine)
            + f" && chown {other} "
            + " ".join(f"{data}/{n}" for n in data_other)
        )
    extra = []
    if outside:
        extra.append(
            w.spin(
                "the files under {data} that belong to {user} must still belong to {user} afterwards",
                capitalize=False,
                data=data,
                user=user,
            )
        )
    if with_gid:
        extra.append(
            w.spin(
                "give {user}'s own group ({user}) the same number as its gid, and make the files in "
                "{their|the} home directory belong to that group",
                capitalize=False,
                user=user,
            )
        )
    more = w.clauses(extra, "; ")
    more = f" Also: {more}." if more else ""
    task = w.phrase(
        "Change the uid of {user} to {new}{| (it clashes with another system)}.{more}",
        "The account {user} {must|has to} have uid {new} to match {the NFS server|the other machines}. Change it{| and make "
        "sure their home directory still belongs to them}.{more}",
        "Ticket: renumber user {user} to uid {new}.{more}",
        "Could you give {user} the user id {new}?{more}",
        "Files that {user} creates on the shared storage show up with the wrong owner, because the uid here does "
        "not match the rest of the fleet, where it is {new}. Align it.{more}",
        "{user}: uid -> {new}.{more}",
        user=user,
        new=new,
        more=more,
    )
    lines = [
        f'[ "$(id -u {user})" = {new} ] || exit 1',
        f'[ -z "$(find /home/{user} ! -uid {new} -print -quit)" ] || exit 1',
        *[f"[ -f /home/{user}/{n} ] || exit 1" for n in home_files],
    ]
    if outside:
        lines += [f'[ "$(stat -c %u {data}/{n})" = {new} ] || exit 1' for n in data_mine]
        lines += [f'[ "$(stat -c %U {data}/{n})" = {other} ] || exit 1' for n in data_other]
    if with_gid:
        lines += [
            f'[ "$(getent group {user} | cut -d: -f3)" = {new} ] || exit 1',
            f'[ "$(id -g {user})" = {new} ] || exit 1',
            f'[ -z "$(find /home/{user} ! -gid {new} -print -quit)" ] || exit 1',
        ]
    check = _script(*lines)
    reference = [f"id {user}", f"usermod -u {new} {user}"]
    if with_gid:
        reference += [f"groupmod -g {new} {user}", f"chgrp -R {user} /home/{user}"]
    if outside:
        reference.append(
            w.pick(
                (
                    f"find {data} -uid {old} -exec chown {user} {{}} +",
                    f"find {data} -user {old} -print0 | xargs -0 chown {new}",
                    f"chown -R --from={old} {user} {data}",
                )
            )
        )
        reference.append(f"ls -ln {data}")
    reference.append(f"id {user}; ls -ln /home/{user}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 + int(outside) + int(with_gid) if not (outside and with_gid) else 4,
        setup=setup,
        user="root",
    )


# ==== issue 39: renaming an account, defaults for the accounts to come ==============================================
# Checks with ``py_check`` read /etc/passwd, /etc/shadow and /etc/group the way the system does and look at the
# home directory; a new account made *by the check* shows what the defaults really give.
def _frag(w: World, template: str, **values: object) -> str:
    return w.spin(template, capitalize=False, **values)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


_ACCOUNTS_LIB = r"""
def table(path):
    return {l.split(":")[0]: l.split(":") for l in text(path).splitlines() if l and not l.startswith("#")}
passwd, shadow, group, gshadow = (table(f"/etc/{n}") for n in ("passwd", "shadow", "group", "gshadow"))
"""


@family(
    "users-rename-account",
    "users",
    "rename a login (and its group and home) keeping its uid, files and group memberships",
)
def rename_account(w: World) -> Draft:
    old = w.username()
    new = w.unique(
        lambda: w.pick(
            (
                f"{old.rstrip('0123456789_ops')}.{w.pick(('k', 'm', 'r', 's'))}",
                f"{w.pick(('a', 'j', 'm'))}{old[:5]}",
                w.person() + w.pick(("", "2", "_ext")),
            )
        )
    )
    decoy = w.unique(lambda: old + w.pick(("x", "2", "_old")))
    full = f"{old.capitalize()} {w.pick(('Berg', 'Costa', 'Ito', 'Novak', 'Okafor', 'Silva'))}"
    teams = [w.team() for _ in range(w.randint(1, 2))]
    move_home = w.chance(0.75)
    group_too = w.chance(0.75)
    comment = w.chance(0.3)
    new_full = f"{new.split('.')[0].capitalize()} {full.split()[1]}"
    docs = [w.filename(w.pick(("txt", "md", "sh", "csv"))) for _ in range(w.randint(1, 3))]
    setup = [
        " && ".join(f"groupadd {t}" for t in teams),
        f"useradd -m -s /bin/bash -c {quote(full)} -G {','.join(teams)} {old} && useradd -m -s /bin/bash -G {teams[0]} {decoy}",
        " && ".join(f"echo {quote(w.pick(w.lines(2)))} > /home/{old}/{d}" for d in docs)
        + f" && chown -R {old}: /home/{old}",
    ]
    wd, place = (
        (w.pick(("/root", "/home", "/etc")), []) if w.chance(0.5) else workplace(w, "root", w.project())
    )
    setup += place
    w.note(old, new, decoy, *teams)
    home_text = (
        _frag(w, "{its|the} home {moves|is moved} to /home/{new} (with everything in it)", new=new)
        if move_home
        else _frag(w, "{its|the} home stays at /home/{old}", old=old)
    )
    group_text = (
        _frag(w, "{its|the} primary group {old} is renamed to {new} as well", old=old, new=new)
        if group_too
        else _frag(w, "{its|the} primary group keeps the name {old}", old=old)
    )
    parts = [home_text, group_text]
    if comment:
        parts.append(_frag(w, 'its full name (GECOS) becomes "{n}"', n=new_full))
    spec_text = w.clauses(parts)
    keep = _frag(
        w,
        "{the uid, the files and its memberships in {t} stay|uid, files and supplementary groups ({t}) unchanged}",
        t=", ".join(teams),
    )
    task = w.phrase(
        "Rename the account {old} to {new}: {spec}; {keep}.",
        "{old} changed their name, so their login becomes {new}. {spec_c}; {keep}.",
        "Ticket: login rename {old} -> {new}. {spec_c}. {keep_c}. {decoy} is someone else: leave it alone.",
        "Could you rename the user {old} to {new}? {spec_c}, and {keep}.",
        "Goal: `id {new}` shows the uid {old} has today, in the same groups; {spec}. No account named {old} is left.",
        "HR renamed {old} to {new}. Make the system follow: {spec}; {keep}.",
        "{old} -> {new}. {spec_c}. {keep_c}.",
        "Why does {new} not exist yet? Because the rename of {old} was never done. Do it: {spec}; {keep}.",
        old=old,
        new=new,
        decoy=decoy,
        spec=spec_text,
        spec_c=_capital(spec_text),
        keep=keep,
        keep_c=_capital(keep),
    )
    ref = [w.pick((f"id {old}", f"getent passwd {old}", f"grep {old} /etc/group"))]
    how = w.randint(0, 3)
    home = f"/home/{new}" if move_home else f"/home/{old}"
    if how == 0:
        ref.append(
            f"usermod -l {new}"
            + (f" -d {home} -m" if move_home else "")
            + (f" -c {quote(new_full)}" if comment else "")
            + f" {old}"
        )
    elif how == 1:
        ref.append(
            f"usermod --login {new}" + (f" --home {home} --move-home" if move_home else "") + f" {old}"
        )
        if comment:
            ref.append(f"chfn -f {quote(new_full)} {new}")
    elif how == 2:
        ref.append(f"usermod -l {new} {old}")
        if move_home:
            ref.append(f"usermod -d {home} -m {new}")
        if comment:
            ref.append(f"usermod -c {quote(new_full)} {new}")
    else:  # by hand, the way the shadow tools do it
        ref.append(
            f"sed -i -E 's/^{old}:/{new}:/"
            + (f"; s|:/home/{old}:|:{home}:|" if move_home else "")
            + "' /etc/passwd"
        )
        ref.append(f"sed -i 's/^{old}:/{new}:/' /etc/shadow")
        ref.append(f"sed -i -E 's/([:,]){old}(,|$)/\\1{new}\\2/' /etc/group /etc/gshadow")
        if move_home:
            ref.append(f"mv /home/{old} {home}")
        if comment:
            ref.append(f"chfn -f {quote(new_full)} {new}")
    if group_too:
        ref.append(
            w.pick((f"groupmod -n {new} {old}", f"groupmod --new-name {new} {old}"))
            if how != 3
            else f"sed -i 's/^{old}:/{new}:/' /etc/group /etc/gshadow"
        )
    ref.append(w.pick((f"id {new}", f"getent passwd {new}", f"ls -ld {home}")))
    spec = {
        "old": old,
        "new": new,
        "decoy": decoy,
        "teams": teams,
        "home": home,
        "group": new if group_too else old,
        "comment": new_full if comment else full,
        "docs": docs,
    }
    check = py_check(
        spec,
        _ACCOUNTS_LIB
        + r"""
import pwd
old, new = S["old"], S["new"]
if old in passwd or old in shadow:
    no(f"{old} still exists")
if new not in passwd or new not in shadow:
    no(f"no account {new} (passwd and shadow)")
ent = passwd[new]
uid = int(ent[2])
want_uid = int(text(f"/root/.uid-{old}").strip())
if uid != want_uid:
    no(f"{new} has uid {uid}, want {want_uid}")
if ent[5] != S["home"] or ent[6] != "/bin/bash":
    no(f"home or shell: {ent[5]} {ent[6]}")
if ent[4].split(",")[0] != S["comment"]:
    no(f"full name {ent[4]!r}")
gname = S["group"]
other = S["old"] if gname == S["new"] else S["new"]
if gname not in group or int(group[gname][2]) != int(ent[3]) or other in group:
    no(f"primary group should be {gname} (gid {ent[3]})")
for t in S["teams"]:
    members = group[t][3].split(",")
    if new not in members or old in members:
        no(f"{t} members: {members}")
st = os.stat(S["home"]) if os.path.isdir(S["home"]) else no(f"no home {S['home']}")
if st.st_uid != uid:
    no("the home is not owned by the account")
for d in S["docs"]:
    p = os.path.join(S["home"], d)
    if not os.path.isfile(p) or os.stat(p).st_uid != uid:
        no(f"{p} lost")
if S["home"] != f"/home/{old}" and os.path.exists(f"/home/{old}"):
    no(f"/home/{old} is still there")
if S["decoy"] not in passwd or not os.path.isdir(f"/home/{S['decoy']}"):
    no(f"{S['decoy']} was changed")
""",
    )
    setup.append(f"id -u {old} > /root/.uid-{old}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if how == 3 or (move_home and group_too) else 2,
        setup=setup,
        user="root",
        workdir=None if wd == "/root" else wd,
    )


_ALIASES = (
    ("ll", "ls -alF"),
    ("gs", "git status"),
    ("la", "ls -A"),
    ("..", "cd .."),
    ("dfh", "df -h"),
    ("k", "kubectl"),
)


@family(
    "users-new-account-defaults",
    "users",
    "set what new accounts get: /etc/skel files, useradd's default shell, the home directory mode",
)
def new_account_defaults(w: World) -> Draft:
    app = w.project()
    wd, setup = workplace(w, "root", app, home_share=0.3)
    if wd == "/root" and w.chance(0.5):
        wd = w.pick(("/etc", "/etc/skel"))
    kinds = w.sample(("skelfile", "skelcopy", "skeldir", "shell", "homemode"), w.pick((1, 2, 2, 3)))
    asks: list[str] = []
    spec: dict[str, object] = {
        "probe": f"probe{w.token(4)}",
        "files": {},
        "dirs": [],
        "existing": w.username(),
    }
    setup.append(f"useradd -m -s /bin/bash {spec['existing']}")
    ref: list[str] = [
        w.pick(("ls -la /etc/skel", "cat /etc/default/useradd", "grep -n HOME_MODE /etc/login.defs"))
    ]
    files: dict[str, str] = {}
    for kind in kinds:
        if kind == "skelfile":
            pairs = w.sample(_ALIASES, w.randint(1, 3))
            name = w.pick((".bash_aliases", ".aliases"))
            body = "".join(f"alias {a}='{c}'\n" for a, c in pairs)
            spec["files"][f"/etc/skel/{name}"] = body  # type: ignore[index]
            listing = "; ".join(f"alias {a}='{c}'" for a, c in pairs)
            asks.append(
                _frag(w, "every new home gets a {n} with exactly these lines: {l}", n=name, l=listing)
            )
            ref.append(
                w.pick(
                    (
                        f"cat > /etc/skel/{name} <<'EOF'\n{body}EOF",
                        "printf '%s\\n' "
                        + " ".join(quote(line) for line in body.splitlines())
                        + f" > /etc/skel/{name}",
                        f"tee /etc/skel/{name} > /dev/null <<'EOF'\n{body}EOF",
                    )
                )
            )
        elif kind == "skelcopy":
            src_dir = (
                f"{wd if wd.startswith(('/srv', '/opt', '/data', '/app', '/var')) else '/srv/onboarding'}"
            )
            src = f"{src_dir}/{w.pick(('welcome.txt', 'README-first.md', 'policies.txt'))}"
            body = "".join(f"{x}\n" for x in w.lines(3))
            files[src] = body
            dest = posixpath.basename(src)
            spec["files"][f"/etc/skel/{dest}"] = body  # type: ignore[index]
            asks.append(_frag(w, "new users find a copy of {s} in their home", s=src))
            ref.append(
                w.pick(
                    (
                        f"cp {src} /etc/skel/",
                        f"install -m 644 {src} /etc/skel/{dest}",
                        f"cat {src} > /etc/skel/{dest}",
                    )
                )
            )
        elif kind == "skeldir":
            d = w.pick(("bin", "projects", ".ssh", "Documents"))
            spec["dirs"].append(d)  # type: ignore[attr-defined]
            asks.append(_frag(w, "every new home has an empty {d}/ folder", d=d))
            ref.append(
                w.pick((f"mkdir -p /etc/skel/{d}", f"install -d /etc/skel/{d}", f"mkdir /etc/skel/{d}"))
            )
        elif kind == "shell":
            spec["shell"] = "/bin/bash"
            asks.append(
                _frag(
                    w,
                    "useradd gives new accounts /bin/bash as login shell when none is asked for (not /bin/sh)",
                )
            )
            ref.append(
                w.pick(
                    (
                        "useradd -D -s /bin/bash",
                        "sed -i 's|^SHELL=.*|SHELL=/bin/bash|' /etc/default/useradd",
                        "useradd --defaults --shell /bin/bash",
                    )
                )
            )
        else:
            mode = w.pick(("0750", "0700", "0751"))
            spec["home_mode"] = int(mode, 8)
            asks.append(_frag(w, "new home directories are created with mode {m}", m=mode))
            ref.append(
                w.pick(
                    (
                        f"sed -i 's/^#\\?HOME_MODE.*/HOME_MODE\\t{mode}/' /etc/login.defs",
                        f"echo 'HOME_MODE {mode}' >> /etc/login.defs",
                        f"sed -i -E 's/^#?HOME_MODE[[:space:]]+[0-7]+/HOME_MODE {mode}/' /etc/login.defs",
                    )
                )
            )
    if files:
        setup.append(" && ".join(f"chmod 644 {quote(p)}" for p in files))
    ref.append(w.pick(("ls -la /etc/skel", "useradd -D", "grep -n HOME_MODE /etc/login.defs")))
    spec_text = w.clauses(asks)
    task = w.phrase(
        "Set the defaults for accounts created from now on: {spec}. Existing accounts such as {ex} stay as they "
        "are.",
        "New hires get their accounts with a plain `useradd -m <name>`. Make sure that {spec}. Do not touch "
        "current users' homes.",
        "Ticket: onboarding defaults. {spec_c}. Only future accounts change ({ex} keeps what it has).",
        "Could you change the system's new-user defaults so that {spec}?",
        "Goal: the next `useradd -m` account comes out right: {spec}.",
        "When I run `useradd -m bob`, bob should get this: {spec}. Configure the defaults (/etc/skel, useradd, "
        "login.defs), not one account.",
        "{spec_c}. That is for accounts created later; nothing to do for existing ones.",
        "Why does every new account need manual fixing? Because the defaults are wrong. Fix them: {spec}.",
        spec=spec_text,
        spec_c=_capital(spec_text),
        ex=spec["existing"],
    )
    check = py_check(
        spec,
        r"""
import pwd
probe = S["probe"]
made = subprocess.run(["useradd", "-m", probe], capture_output=True, text=True)
if made.returncode:
    no(f"useradd -m failed: {made.stderr.strip()}")
try:
    ent = pwd.getpwnam(probe)
    home = ent.pw_dir
    problems = []
    for path, body in S["files"].items():
        p = os.path.join(home, os.path.basename(path))
        if not os.path.isfile(p) or text(p) != body:
            problems.append(f"a new home lacks {os.path.basename(path)} as asked")
    for d in S["dirs"]:
        if not os.path.isdir(os.path.join(home, d)):
            problems.append(f"a new home lacks {d}/")
    if "shell" in S and ent.pw_shell != S["shell"]:
        problems.append(f"new accounts get {ent.pw_shell}")
    if "home_mode" in S and stat.S_IMODE(os.stat(home).st_mode) != S["home_mode"]:
        problems.append(f"new homes get mode {oct(stat.S_IMODE(os.stat(home).st_mode))}")
finally:
    subprocess.run(["userdel", "-r", probe], capture_output=True)
if problems:
    no(problems[0])
ex = pwd.getpwnam(S["existing"])
if ex.pw_shell != "/bin/bash":
    no("an existing account was changed")
""",
    )
    w.note(*[str(k) for k in kinds])
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=len(kinds) + (1 if "homemode" in kinds else 0) if len(kinds) < 3 else 3,
        setup=setup,
        files=files,
        user="root",
        workdir=None if wd == "/root" else wd,
    )
