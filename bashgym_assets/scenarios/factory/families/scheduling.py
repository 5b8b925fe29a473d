"""Scheduling: cron jobs in users' crontabs and in /etc/cron.d, written from schedules given in plain English.

Every task here runs as root: the sandbox runs with ``no-new-privileges``, so the setgid ``crontab`` cannot write
the spool for an unprivileged user, and an administrator manages other users' crontabs with ``crontab -u``. The
checks read the final crontab (``crontab -u <user> -l``) or the /etc/cron.d file and compare schedules by meaning,
not spelling: a small cron-field evaluator (embedded in the check) expands ``*/15``, ``1-5``, ``mon-fri``, ``7`` for
Sunday and the ``@daily``-style nicknames into the sets of minutes, hours, months and days they fire on, with
cron's day-of-month / day-of-week OR rule, so every equivalent spelling passes.
"""

from __future__ import annotations

import json

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import FIRST_NAMES, HOME, SERVICES, WORDS, World, quote

DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_DAY_ABBR = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# accounts and groups a Debian base system already has: a service account must not be called so
_BASE_ACCOUNTS = frozenset(
    {
        "root",
        "daemon",
        "bin",
        "sys",
        "sync",
        "games",
        "man",
        "lp",
        "mail",
        "news",
        "uucp",
        "proxy",
        "www-data",
        "backup",
        "list",
        "irc",
        "_apt",
        "nobody",
        "operator",
        "staff",
        "users",
        "adm",
        "audio",
        "video",
        "disk",
        "src",
        "shadow",
        "utmp",
        "crontab",
    }
)
_VERBS = (
    "backup",
    "cleanup",
    "report",
    "sync",
    "rotate",
    "export",
    "healthcheck",
    "digest",
    "prune",
    "reindex",
)

# The check's evaluator: argv[1] a crontab file, argv[2] a JSON spec (what must hold). Prints why it fails.
_CRON_CHECK = r"""
import json, re, sys
text = open(sys.argv[1]).read()
spec = json.loads(sys.argv[2])
system = spec.get("system", False)
NAMES = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
NAMES.update({n: i + 1 for i, n in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                              "nov", "dec"))})
SPECIAL = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
           "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *"}
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def val(x):
    x = x.lower()
    return NAMES[x] if x in NAMES else int(x)


def field(text, lo, hi):
    out = set()
    for part in text.split(","):
        rng, slash, step = part.partition("/")
        step = int(step) if slash else 1
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a, b = (val(x) for x in rng.split("-", 1))
        else:
            a = val(rng)
            b = hi if slash else a
        if not (lo <= a <= b <= hi) or step < 1:
            raise ValueError(text)
        out |= set(range(a, b + 1, step))
    return out


def when(fields):
    m, h, dom, mon, dow = (field(f, *b) for f, b in zip(fields, BOUNDS))
    dow = {d % 7 for d in dow}
    star = fields[2].startswith("*") or fields[4].startswith("*")
    days = frozenset((d, w) for d in range(1, 32) for w in range(7)
                     if ((d in dom and w in dow) if star else (d in dom or w in dow)))
    return frozenset(m), frozenset(h), frozenset(mon), days


def norm(s):
    return " ".join(s.split())


envs, jobs, comments, active = [], [], [], []
for raw in text.splitlines():
    s = raw.strip()
    if not s:
        continue
    if s.startswith("#"):
        comments.append(norm(s.lstrip("#")))
        continue
    active.append(norm(s))
    m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", s)
    if m:
        v = m.group(2).strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        envs.append((m.group(1), v, len(jobs)))
        continue
    parts = s.split()
    try:
        if parts[0].startswith("@"):
            fields, rest = SPECIAL[parts[0].lower()].split(), parts[1:]
        else:
            fields, rest = parts[:5], parts[5:]
        sched = when(fields)
    except (KeyError, ValueError, IndexError):
        sched, rest = None, parts[1:]
    user = None
    if system and rest:
        user, rest = rest[0], rest[1:]
    jobs.append((sched, user, " ".join(rest)))


def fail(why):
    print(why)
    sys.exit(1)


for want in spec.get("jobs", []):
    hits = [j for j in jobs if j[2] == norm(want["cmd"])]
    if len(hits) != 1:
        fail(f"{len(hits)} active jobs run {want['cmd']!r}")
    if hits[0][0] is None or hits[0][0] != when(want["sched"].split()):
        fail(f"wrong schedule for {want['cmd']!r}")
    if system and hits[0][1] != want["user"]:
        fail(f"wrong user for {want['cmd']!r}")
for line in spec.get("keep", []):
    if norm(line) not in active:
        fail(f"missing: {line!r}")
for cmd in spec.get("absent", []):
    if any(j[2] == norm(cmd) for j in jobs):
        fail(f"still active: {cmd!r}")
for cmd in spec.get("commented", []):
    if not any(norm(cmd) in c for c in comments):
        fail(f"no commented-out line for {cmd!r}")
for name, value in spec.get("env", {}).items():
    sets = [e for e in envs if e[0] == name]
    if len(sets) != 1 or sets[0][1] != value or sets[0][2] != 0:
        fail(f"{name} must be set once, to {value!r}, before the first job")
if "count" in spec and len(active) != spec["count"]:
    fail(f"{len(active)} active lines, expected {spec['count']}")
"""


def _f(w: World, template: str, **values: object) -> str:
    """A spun fragment for inside a sentence (not capitalised)."""
    return w.spin(template, capitalize=False, **values)


def _time(w: World) -> tuple[int, int, str]:
    h, m = w.randint(0, 23), w.pick((0, 0, 5, 10, 15, 20, 30, 45, w.randint(1, 59)))
    return h, m, f"{h:02d}:{m:02d}"


def _schedule(w: World) -> tuple[str, list[str]]:
    """A schedule in English and its cron spellings (the first is canonical; all are equivalent)."""
    kind = w.pick(
        (
            "daily",
            "daily",
            "minutes",
            "hourly",
            "hours",
            "weekdays",
            "weekend",
            "weekday",
            "monthly",
            "twice",
            "business",
            "yearly",
        )
    )
    h, m, t = _time(w)
    if kind == "daily":
        if h == 0 and m == 0 and w.chance(0.5):
            return _f(w, "every day at midnight"), ["0 0 * * *", "@daily", "@midnight"]
        return _f(w, "{every day|daily} at {t}", t=t), [f"{m} {h} * * *"]
    if kind == "minutes":
        n = w.pick((5, 10, 15, 20, 30))
        return _f(w, "every {n} minutes", n=n), [f"*/{n} * * * *", f"0-59/{n} * * * *"]
    if kind == "hourly":
        if m == 0:
            return _f(w, "{every hour on the hour|at the start of every hour}"), ["0 * * * *", "@hourly"]
        return _f(w, "every hour at {m} minutes past the hour", m=m), [f"{m} * * * *"]
    if kind == "hours":
        n = w.pick((2, 3, 4, 6, 8, 12))
        return _f(w, "every {n} hours, on the hour", n=n), [f"0 */{n} * * *", f"0 0-23/{n} * * *"]
    if kind == "weekdays":
        return (
            _f(w, "at {t} {on weekdays|every weekday|Monday to Friday}", t=t),
            [f"{m} {h} * * 1-5", f"{m} {h} * * mon-fri", f"{m} {h} * * 1,2,3,4,5"],
        )
    if kind == "weekend":
        return (
            _f(w, "at {t} on {weekends|Saturdays and Sundays}", t=t),
            [f"{m} {h} * * 6,0", f"{m} {h} * * sat,sun", f"{m} {h} * * 0,6"],
        )
    if kind == "weekday":
        d = w.randint(0, 6)
        w.note(DAYS[d])
        spell = [f"{m} {h} * * {d}", f"{m} {h} * * {_DAY_ABBR[d]}"] + ([f"{m} {h} * * 7"] if d == 0 else [])
        return _f(w, "every {day} at {t}", day=DAYS[d], t=t), spell
    if kind == "monthly":
        d = w.randint(1, 28)
        nth = f"{d}{'st' if d in (1, 21) else 'nd' if d in (2, 22) else 'rd' if d in (3, 23) else 'th'}"
        return _f(w, "on the {nth} of every month at {t}", nth=nth, t=t), [f"{m} {h} {d} * *"]
    if kind == "twice":
        a, b = sorted(w.sample(range(7), 2))
        w.note(DAYS[a], DAYS[b])
        return (
            _f(w, "at {t} on {a}s and {b}s", t=t, a=DAYS[a], b=DAYS[b]),
            [f"{m} {h} * * {a},{b}", f"{m} {h} * * {_DAY_ABBR[a]},{_DAY_ABBR[b]}"],
        )
    if kind == "business":
        n = w.pick((10, 15, 20, 30))
        h1, h2 = w.randint(6, 10), w.randint(16, 19)
        last = 60 - n
        return (
            _f(
                w,
                "every {n} minutes from {a}:00 to {b}:{last} on weekdays",
                n=n,
                a=f"{h1:02d}",
                b=f"{h2:02d}",
                last=last,
            ),
            [f"*/{n} {h1}-{h2} * * 1-5", f"0-59/{n} {h1}-{h2} * * mon-fri"],
        )
    return _f(w, "once a year, on 1 January at {t}", t=t), [f"{m} {h} 1 1 *", f"{m} {h} 1 jan *"]


def _home(user: str) -> str:
    return HOME if user == "operator" else f"/var/lib/{user}"


def _command(w: World, home: str = HOME) -> str:
    svc, word = w.pick(SERVICES), w.pick(WORDS)
    shape = w.randint(0, 5)
    if shape == 0:
        return f"/usr/local/bin/{svc}-{w.pick(_VERBS)}.sh"
    if shape == 1:
        return f"{home}/bin/{word}-{w.pick(_VERBS)}.sh --{w.pick(('quiet', 'full', 'dry-run', 'verbose'))}"
    if shape == 2:
        job = f"{svc}_{w.pick(_VERBS)}"
        return f"{home}/scripts/{job}.sh >> {home}/logs/{job}.log 2>&1"
    if shape == 3:
        return (
            f"/usr/bin/find {home}/{w.pick(('tmp', 'cache', 'uploads', 'scratch'))} -type f -mtime +"
            f"{w.randint(2, 30)} -delete"
        )
    if shape == 4:
        return f"/usr/bin/python3 {home}/jobs/{word}_{w.pick(_VERBS)}.py"
    return f"/usr/local/bin/{w.pick(_VERBS)}-{word} --target {svc}"


def _other_jobs(w: World, k: int, home: str = HOME, avoid: str = "") -> list[str]:
    out: list[str] = []
    while len(out) < k:
        _, spell = _schedule(w)
        cmd = _command(w, home)
        if cmd != avoid and all(cmd not in line for line in out):
            out.append(f"{spell[0]} {cmd}")
    return out


def _header(w: World) -> list[str]:
    out = []
    if w.chance(0.5):
        out.append(w.pick(("# m h dom mon dow command", "# jobs for this account", "# managed by hand")))
    if w.chance(0.4):
        out.append(f"MAILTO={w.pick(FIRST_NAMES)}@example.com")
    return out


def _cron_check(source: str, spec: dict[str, object], *extra: str) -> str:
    """A check: ``source`` is a bash command printing the crontab text; ``spec`` what must hold of it."""
    return (
        "#!/bin/bash\nt=$(mktemp) || exit 1\n"
        f'{source} > "$t" 2>/dev/null || : > "$t"\n'
        f"python3 - \"$t\" {quote(json.dumps(spec))} <<'PY' || exit 1\n{_CRON_CHECK.strip()}\nPY\n"
        + "".join(f"{line}\n" for line in extra)
    )


def _install(user: str, lines: list[str]) -> str:
    return f"printf %s {quote(''.join(line + chr(10) for line in lines))} | crontab -u {user} -"


def _target_user(w: World) -> tuple[str, list[str]]:
    """The account whose crontab the task is about: usually operator, sometimes a service account."""
    if w.chance(0.75):
        return "operator", []
    name = w.unique(lambda: f"{w.pick(SERVICES)}{w.pick(('', 'svc', '-bot', '_job'))}")
    if name in _BASE_ACCOUNTS:
        name += "svc"
    return name, [f"useradd -M -d /var/lib/{name} -s /usr/sbin/nologin {name}"]


def _edit_crontab(w: World, user: str, pipeline: str) -> list[str]:
    """Reference commands that run ``crontab -l`` through ``pipeline`` and install the result (two styles)."""
    if w.chance(0.5):
        return [f"crontab -u {user} -l | {pipeline} | crontab -u {user} -"]
    tmp = f"/tmp/{user}.cron"
    return [f"crontab -u {user} -l | {pipeline} > {tmp}", f"crontab -u {user} {tmp}"]


@family(
    "scheduling-cron-add",
    "scheduling",
    "add a job to a user's crontab from a schedule given in plain English",
)
def cron_add(w: World) -> Draft:
    user, setup = _target_user(w)
    when, spell = _schedule(w)
    cmd = _command(w, _home(user))
    existing = _header(w) + _other_jobs(w, w.randint(0, 3), _home(user), avoid=cmd)
    if any(not line.startswith("#") for line in existing):
        setup.append(_install(user, existing))
    files: dict[str, str] = {}
    script = cmd.split()[0]
    if script.endswith(".sh") and w.chance(0.5):
        files[script] = "#!/bin/sh\necho ok\n"
    w.note(user)
    keep = [line for line in existing if not line.startswith("#")]
    whose = (
        _f(w, "operator's {personal |}crontab")
        if user == "operator"
        else _f(w, "the crontab of the service account {u}", u=user)
    )
    keep_text = (
        w.pick(("", " Keep the existing entries.", " The jobs already there must stay.")) if keep else ""
    )
    task = w.phrase(
        "Schedule `{cmd}` to run {when} as {user}, using {whose}.{keep}",
        "{Add|Create} a cron job in {whose} that runs `{cmd}` {when}.{keep}",
        "Ticket: `{cmd}` must run {when} under the {user} account. {Set it up|Add it} in {whose}.{keep}",
        "Could you make cron run `{cmd}` {when} for {user}? It belongs in {whose}.{keep}",
        "Right now nobody remembers to run `{cmd}` by hand. From now on it should happen {when}, as {user}, "
        "through {whose}.{keep}",
        "cron, {user}: `{cmd}`, {when}.{keep}",
        "Is `{cmd}` scheduled anywhere? It is not - add it to {whose} so it runs {when}.{keep}",
        cmd=cmd,
        when=when,
        user=user,
        whose=whose,
        keep=keep_text,
    )
    spec = {"jobs": [{"cmd": cmd, "sched": spell[0]}], "keep": keep, "count": len(keep) + 1}
    check = _cron_check(f"crontab -u {user} -l", spec, f"! crontab -l 2>/dev/null | grep -qF -- {quote(cmd)}")
    line = f"{w.pick(spell)} {cmd}"
    tmp = f"/tmp/{user}.cron"
    cu = f"crontab -u {user}"
    ways = [
        [f"({cu} -l 2>/dev/null; echo {quote(line)}) | {cu} -"],
        [f"{cu} -l > {tmp} 2>/dev/null; echo {quote(line)} >> {tmp}", f"{cu} {tmp}"],
        [f"{{ {cu} -l 2>/dev/null; printf '%s\\n' {quote(line)}; }} | {cu} -"],
        [f"{cu} -l 2>/dev/null | J={quote(line)} awk '1; END {{ print ENVIRON[\"J\"] }}' | {cu} -"],
        [
            f"{cu} -l 2>/dev/null | python3 -c 'import sys; sys.stdout.write(sys.stdin.read() + sys.argv[1] + "
            f'"\\n")\' {quote(line)} > {tmp}',
            f"{cu} {tmp}",
        ],
        [f"{cu} -l > {tmp} 2>/dev/null || true", f"echo {quote(line)} | tee -a {tmp}", f"{cu} - < {tmp}"],
    ]
    if keep and "'" not in line:  # sed appends after the last line only when there is one
        ways.append([f"{cu} -l | sed '$a {line.replace(chr(92), chr(92) * 2)}' | {cu} -"])
    add = w.pick(ways)
    reference = [f"crontab -u {user} -l", *add, f"crontab -u {user} -l"]
    return Draft(
        task=task, check=check, reference=reference, difficulty=2, files=files, setup=setup, user="root"
    )


@family(
    "scheduling-cron-remove", "scheduling", "remove or comment out one job of a crontab, keeping the others"
)
def cron_remove(w: World) -> Draft:
    user, setup = _target_user(w)
    cmd = _command(w, _home(user))
    _, spell = _schedule(w)
    target = f"{spell[0]} {cmd}"
    # a decoy that shares the command's program: a loose grep would take it too
    decoy = (
        f"{_schedule(w)[1][0]} {cmd} {w.pick(('--full', '--weekly', '--dry-run', '--all'))}"
        if w.chance(0.6)
        else ""
    )
    others = _other_jobs(w, w.randint(1, 3), _home(user), avoid=cmd)
    jobs = w.shuffled([target, *others] + ([decoy] if decoy else []))
    lines = _header(w) + jobs
    setup.append(_install(user, lines))
    comment = w.chance(0.35)
    w.note(user)
    keep = [line for line in lines if not line.startswith("#") and line != target]
    whose = _f(w, "{user}'s crontab", user=user)
    how = (
        _f(w, "disable it by commenting it out (keep the line, prefixed with #)")
        if comment
        else _f(w, "{remove|delete} {that entry|that line|it}")
    )
    rest = w.pick(
        (
            "every other entry must stay exactly as it is",
            "all the other lines must stay exactly as before",
            "the other jobs must stay as they are",
            "leave the other entries untouched",
        )
    )
    deco = " " + _f(w, "(not the {one|job} with {x})", x=decoy.split()[-1]) if decoy else ""
    task = w.phrase(
        "The job running `{cmd}`{deco} in {whose} is {retired|obsolete|no longer needed}: {how}; {rest}.",
        "In {whose}, find the job that runs `{cmd}`{deco} and {how}. {rest_c}.",
        "Ticket: stop cron from running `{cmd}`{deco} for {user}. {how_c} in {whose}; {rest}.",
        "Could you take `{cmd}`{deco} out of {whose}? Please {how}; {rest}.",
        "`{cmd}`{deco} keeps running from {whose} although the thing it serves is gone. {how_c}; {rest}.",
        "{whose}: `{cmd}`{deco} - {how}. {rest_c}.",
        "After your change cron must no longer run `{cmd}`{deco} for {user}. {how_c} in {whose}; {rest}.",
        cmd=cmd,
        deco=deco,
        whose=whose,
        how=how,
        how_c=how[:1].upper() + how[1:],
        rest=rest,
        rest_c=rest[:1].upper() + rest[1:],
        user=user,
    )
    spec: dict[str, object] = {"keep": keep, "absent": [cmd], "count": len(keep)}
    if comment:
        spec["commented"] = [cmd]
    check = _cron_check(f"crontab -u {user} -l", spec)
    py = 'python3 -c \'import sys; o = sys.argv[1]; sys.stdout.write("".join('
    if comment:
        esc = target.replace("*", "\\*").replace("|", "\\|").replace(".", "\\.")
        pipe = w.pick(
            (
                f"sed 's|^{esc}$|# &|'",
                f'O={quote(target)} awk \'$0 == ENVIRON["O"] {{ $0 = "# " $0 }} 1\'',
                py + f'"# " + l if l.rstrip("\\n") == o else l for l in sys.stdin))\' {quote(target)}',
            )
        )
    else:
        pipe = w.pick(
            (
                f"grep -vxF {quote(target)}",
                f"grep -v -- {quote(cmd + '$')}",
                f"O={quote(target)} awk '$0 != ENVIRON[\"O\"]'",
                py + f'l for l in sys.stdin if l.rstrip("\\n") != o))\' {quote(target)}',
            )
        )
    reference = [f"crontab -u {user} -l", *_edit_crontab(w, user, pipe), f"crontab -u {user} -l"]
    return Draft(task=task, check=check, reference=reference, difficulty=2, setup=setup, user="root")


@family(
    "scheduling-cron-reschedule", "scheduling", "change when an existing cron job runs, keeping its command"
)
def cron_reschedule(w: World) -> Draft:
    user, setup = _target_user(w)
    cmd = _command(w, _home(user))
    old_text, old_spell = _schedule(w)
    for _ in range(20):
        new_text, new_spell = _schedule(w)
        if new_spell[0] != old_spell[0]:
            break
    target = f"{old_spell[0]} {cmd}"
    others = _other_jobs(w, w.randint(1, 3), _home(user), avoid=cmd)
    lines = _header(w) + w.shuffled([target, *others])
    setup.append(_install(user, lines))
    w.note(user)
    keep = [line for line in lines if not line.startswith("#") and line != target]
    whose = _f(w, "{user}'s crontab", user=user)
    task = w.phrase(
        "In {whose}, the job `{cmd}` currently runs {old}. Change it to run {new} instead; {leave|keep} the other "
        "entries {as they are|unchanged}.",
        "{Please |}reschedule `{cmd}` in {whose} so it runs {new} (it runs {old} now). {Do not touch the other "
        "jobs|Leave the other jobs alone}.",
        "Ticket: `{cmd}` ({whose}) should run {new}, not {old}. Fix the schedule and keep everything else.",
        "Could you change the cron job `{cmd}` for {user} so that it runs {new}? Only its schedule changes; the other "
        "jobs in {whose} stay.",
        "`{cmd}` runs {old} and collides with the backups. Move it to {new} in {whose}; no other job changes.",
        "{whose}: `{cmd}` {old} -> {new}. Nothing else.",
        "The team agreed that `{cmd}` (for {user}) should run {new} from now on rather than {old}. Update its "
        "schedule in {whose} and keep the rest of the file as it is.",
        whose=whose,
        cmd=cmd,
        old=old_text,
        new=new_text,
        user=user,
    )
    spec = {"jobs": [{"cmd": cmd, "sched": new_spell[0]}], "keep": keep, "count": len(keep) + 1}
    check = _cron_check(f"crontab -u {user} -l", spec)
    new_line = f"{w.pick(new_spell)} {cmd}"
    how = w.randint(0, 3)
    if how == 2:
        pipe = f'O={quote(target)} N={quote(new_line)} awk \'$0 == ENVIRON["O"] {{ $0 = ENVIRON["N"] }} 1\''
        edit = _edit_crontab(w, user, pipe)
    elif how == 3:
        pipe = (
            'python3 -c \'import sys; o, n = sys.argv[1:]; sys.stdout.write("".join(n + "\\n" if '
            f'l.rstrip("\\n") == o else l for l in sys.stdin))\' {quote(target)} {quote(new_line)}'
        )
        edit = _edit_crontab(w, user, pipe)
    elif how == 0:
        esc = target.replace("*", "\\*").replace("|", "\\|").replace(".", "\\.")
        pipe = f"sed 's|^{esc}$|{new_line.replace('|', chr(92) + '|').replace('&', chr(92) + '&')}|'"
        edit = _edit_crontab(w, user, pipe)
    else:
        edit = [
            f"{{ crontab -u {user} -l | grep -vxF {quote(target)}; echo {quote(new_line)}; }} | "
            f"crontab -u {user} -"
        ]
    reference = [f"crontab -u {user} -l", *edit, f"crontab -u {user} -l"]
    return Draft(task=task, check=check, reference=reference, difficulty=3, setup=setup, user="root")


@family("scheduling-cron-d-file", "scheduling", "write (or repair) a system cron file in /etc/cron.d")
def cron_d_file(w: World) -> Draft:
    run_as = w.pick(("root", "root", "www-data", "operator", "daemon"))
    cmd = _command(w, HOME if run_as == "operator" else f"/opt/{w.pick(('jobs', 'cron', 'ops'))}")
    when, spell = _schedule(w)
    name = w.unique(lambda: f"{w.pick(SERVICES)}-{w.pick(_VERBS)}")
    variant = w.pick(("create", "create", "fix"))
    files: dict[str, str] = {}
    setup: list[str] = []
    path = f"/etc/cron.d/{name}"
    problems: list[str] = []
    if variant == "fix":
        problems = w.sample(["user", "dot", "mode"], w.randint(1, 2))
        bad = f"/etc/cron.d/{name}.cron" if "dot" in problems else path
        body = "# installed by the deploy script\n"
        body += f"{spell[0]} {'' if 'user' in problems else run_as + ' '}{cmd}\n"
        files[bad] = body
        if "mode" in problems:
            setup.append(f"chmod 664 {bad}")
        path = bad
    w.note(name, run_as)
    shell = w.chance(0.3)
    if variant == "create":
        extra = _f(w, " {Also set|Set} SHELL=/bin/bash in that file.") if shell else ""
        task = w.phrase(
            "Create the system cron file {path} so that cron runs `{cmd}` as {u} {when}.{extra}",
            "{Add|Install} a cron job in /etc/cron.d (file name: {name}) that runs `{cmd}` {when} as the user "
            "{u}.{extra}",
            "Ticket: `{cmd}` must run {when} as {u}. Put it in a new file {path}, not in anyone's personal "
            "crontab.{extra}",
            "Could you schedule `{cmd}` system-wide in {path}? It runs {when}, as {u}.{extra}",
            path=path,
            name=name,
            cmd=cmd,
            u=run_as,
            when=when,
            extra=" " + extra.strip() if extra else "",
        )
    else:
        shell = False
        task = w.phrase(
            "The job in {path} never runs. Find out why and fix it so that cron runs `{cmd}` as {u} {when} from a "
            "file in /etc/cron.d. Leave no broken copy behind.",
            "Ticket: cron ignores {path}; `{cmd}` should run {when} as {u}. Repair it (the job must stay in "
            "/etc/cron.d) and do not leave a broken file behind.",
            "{Please |}fix the cron job in {path}: it is supposed to run `{cmd}` as {u} {when}, but cron never "
            "picks it up. Keep it in /etc/cron.d and remove any broken leftover.",
            "Why does {path} never fire? Make cron run `{cmd}` {when} as {u} from /etc/cron.d, and leave no "
            "broken copy.",
            path=path,
            cmd=cmd,
            u=run_as,
            when=when,
        )
    spec: dict[str, object] = {"system": True, "jobs": [{"cmd": cmd, "sched": spell[0], "user": run_as}]}
    if shell:
        spec["env"] = {"SHELL": "/bin/bash"}
    q = quote(cmd)
    if variant == "create":
        extra_lines = [
            f"f={path}",
            '[ "$(stat -c %U "$f")" = root ] && [ -z "$(find "$f" -perm /022)" ] || exit 1',
        ]
        check = _cron_check(f"cat {path}", spec, *extra_lines)
    else:
        find = (
            f"cd /etc/cron.d || exit 1\nf=$(grep -lF -- {q} * 2>/dev/null)\n"
            '[ "$(echo "$f" | wc -w)" -eq 1 ] || exit 1\n'
            "echo \"$f\" | grep -qE '^[A-Za-z0-9_-]+$' || exit 1\n"
            '[ "$(stat -c %U "$f")" = root ] && [ -z "$(find "$f" -perm /022)" ] || exit 1\n'
        )
        check = "#!/bin/bash\n" + find + _cron_check('cat "/etc/cron.d/$f"', spec)[len("#!/bin/bash\n") :]
    line = f"{w.pick(spell)} {run_as} {cmd}"
    if variant == "create":
        cron_lines = (["SHELL=/bin/bash"] if shell else []) + [line]
        if len(cron_lines) > 1 or w.chance(0.5):
            write = f"printf '%s\\n' {' '.join(quote(b) for b in cron_lines)} > {path}"
        else:
            write = f"echo {quote(line)} > {path}"
        reference = [write, f"chmod 644 {path}", f"ls -l {path} && cat {path}"]
    else:
        good = f"/etc/cron.d/{name}"
        steps = [f"ls -l /etc/cron.d && cat {path}"]
        if "user" in problems:
            esc = spell[0].replace("*", "\\*")
            steps.append(f"sed -i 's|^{esc} |&{run_as} |' {path}")
        if "dot" in problems:
            steps.append(f"mv {path} {good}")
        steps.append(f"chmod 644 {good}")
        reference = [*steps, f"ls -l /etc/cron.d && cat {good}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if variant == "create" else 4,
        files=files,
        setup=setup,
        user="root",
    )


@family(
    "scheduling-crontab-env",
    "scheduling",
    "set MAILTO/PATH/SHELL for every job of a crontab, before the jobs",
)
def crontab_env(w: World) -> Draft:
    user, setup = _target_user(w)
    var = w.pick(("MAILTO", "MAILTO", "PATH", "SHELL", "MAILTO_OFF"))
    if var == "MAILTO":
        value = f"{w.pick(('ops', 'alerts', 'cron', w.pick(FIRST_NAMES)))}@{w.pick(('example.com', 'corp.example'))}"
    elif var == "MAILTO_OFF":
        var, value = "MAILTO", ""
    elif var == "PATH":
        value = w.pick(
            (
                "/usr/local/bin:/usr/bin:/bin",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                f"{HOME}/bin:/usr/local/bin:/usr/bin:/bin",
            )
        )
    else:
        value = "/bin/bash"
    jobs = _other_jobs(w, w.randint(2, 4), _home(user))
    wrong = var == "MAILTO" and w.chance(0.4)  # a stale value to replace, not to add next to
    head = ["# crontab"] if w.chance(0.5) else []
    if wrong:
        head.append(f"MAILTO={w.pick(FIRST_NAMES)}@old.example.com")
    setup.append(_install(user, head + jobs))
    w.note(user, value)
    whose = _f(w, "{user}'s crontab", user=user)
    if var == "MAILTO" and not value:
        what = _f(
            w, "{switch off|turn off|disable} cron's e-mails for every job (set MAILTO to an empty value)"
        )
    else:
        what = _f(w, "set {var}={value} for {every job|all the jobs}", var=var, value=value)
    fix = (
        (
            " "
            + w.spin(
                "It currently sends mail to the wrong address: replace that setting rather than adding a "
                "second one."
            )
        )
        if wrong
        else ""
    )
    task = w.phrase(
        "In {whose}, {what}. The setting goes {at the top|before the first job}; the jobs stay as they are.{fix}",
        "{Please |}{update|edit} {whose}: {what}, {placed|put} before any job, without changing the jobs.{fix}",
        "Ticket: the cron jobs of {user} need {var} {set|configured}. {what_c} at the top of {whose} and keep "
        "every job unchanged.{fix}",
        "Could you {what} in {whose}? Put it above the jobs and leave the jobs themselves alone.{fix}",
        "The jobs in {whose} behave differently from an interactive shell because cron gives them a bare "
        "environment. Fix that: {what}, above the jobs; the jobs themselves stay.{fix}",
        "{whose}: {what} (top of the file, jobs untouched).{fix}",
        whose=whose,
        what=what,
        what_c=what[:1].upper() + what[1:],
        var=var,
        user=user,
        fix=fix,
    )
    spec = {"env": {var: value}, "keep": jobs, "count": len(jobs) + 1}
    check = _cron_check(f"crontab -u {user} -l", spec)
    setting = f"{var}={value}" if value else f'{var}=""'
    if wrong:
        body = _edit_crontab(w, user, f"sed 's|^MAILTO=.*|{setting}|'")
    elif w.chance(0.5):
        body = [f"(echo {quote(setting)}; crontab -u {user} -l) | crontab -u {user} -"]
    else:
        body = [
            f"crontab -u {user} -l > /tmp/ct",
            f"sed -i '1i {setting}' /tmp/ct",
            f"crontab -u {user} /tmp/ct",
        ]
    reference = [f"crontab -u {user} -l", *body, f"crontab -u {user} -l"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if not wrong else 3,
        setup=setup,
        user="root",
    )


@family(
    "scheduling-crontab-backup", "scheduling", "save a crontab to a file, or install one from a saved file"
)
def crontab_backup(w: World) -> Draft:
    user, setup = _target_user(w)
    direction = w.pick(("export", "import", "import"))
    jobs = _header(w) + _other_jobs(w, w.randint(2, 5), _home(user))
    saved = f"{w.pick(('/root', '/var/backups', '/srv/backup'))}/{user}.{w.pick(('crontab', 'cron.bak', 'cron.txt'))}"
    w.note(user, saved)
    files: dict[str, str] = {}
    if direction == "export":
        setup.append(_install(user, jobs))
        setup.append(f"mkdir -p {saved.rsplit('/', 1)[0]}")
        why = w.pick(
            (
                "",
                " before it gets edited",
                " so it can be restored later",
                " as a backup",
                " ahead of the server move",
            )
        )
        task = w.phrase(
            "Save a copy of {user}'s {crontab|cron table} to {saved}{why}.",
            "{Back up|Export|Dump} the {crontab|cron jobs} of {user} {into|to} the file {saved}{why}{| (the jobs as "
            "crontab -l shows them)}.",
            "Ticket: before the {migration|upgrade|reinstall}, {dump|export|save} {user}'s crontab to {saved}{why}.",
            "Could you {write|copy} {user}'s current crontab {into|to} {saved}{why}?",
            "Every cron {job|entry} {user} has should be {backed up|copied} {to|into} {saved}{why}.",
            user=user,
            saved=saved,
            why=why,
        )
        want = [line for line in jobs if not line.startswith("#")]
        spec = {"keep": want, "count": len(want)}
        check = _cron_check(f"cat {saved}", spec, f"[ -s {saved} ] || exit 1")
        save = w.pick((f"crontab -u {user} -l > {saved}", f"crontab -u {user} -l | tee {saved} >/dev/null"))
        reference = [f"crontab -u {user} -l", save, f"cat {saved}"]
        return Draft(task=task, check=check, reference=reference, difficulty=1, setup=setup, user="root")
    files[saved] = "".join(line + "\n" for line in jobs)
    current = _other_jobs(w, w.randint(0, 2), _home(user))
    if current:
        setup.append(_install(user, current))
    replace = (
        ", " + _f(w, "replacing {whatever it has now|its current entries}")
        if current
        else " " + _f(w, "(it is {empty|blank} now)")
    )
    task = w.phrase(
        "Restore {user}'s {crontab|cron table} from the {backup|saved copy} {saved}{replace}.",
        "{Install|Load|Activate} {saved} as the crontab of {user}{replace}.",
        "Ticket: {user}'s crontab was {overwritten|lost|wiped} {by mistake|during the upgrade}. A {backup|copy} is "
        "in {saved}; restore it{replace}.",
        "Could you put the {jobs|entries} from {saved} back into {user}'s crontab{replace}?",
        "{The file |}{saved} holds the {jobs|cron entries} {user} should have. Make it {user}'s {active |}crontab"
        "{replace}.",
        user=user,
        saved=saved,
        replace=replace,
    )
    want = [line for line in jobs if not line.startswith("#")]
    spec = {"keep": want, "count": len(want)}
    check = _cron_check(f"crontab -u {user} -l", spec)
    reference = [
        f"cat {saved}",
        w.pick(
            (
                f"crontab -u {user} {saved}",
                f"crontab -u {user} - < {saved}",
                f"cat {saved} | crontab -u {user} -",
            )
        ),
        f"crontab -u {user} -l",
    ]
    return Draft(
        task=task, check=check, reference=reference, difficulty=1, files=files, setup=setup, user="root"
    )
