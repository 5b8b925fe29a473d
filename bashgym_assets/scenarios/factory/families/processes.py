"""Processes: finding, signalling, stopping and re-prioritising running programs by name, owner, arguments or files.

The setup leaves small daemons running for the operator: each is a bash script installed as
``/usr/local/bin/<name>`` (so its process name, ``comm``, is that name) that idles in ``sleep & wait``, started
with ``runuser -u <user> -- setsid -f`` and awaited until ``pgrep`` sees it. Its PID is recorded under /root, where
only the root check can read it. Names stay at most 11 characters, so a decoy name with a short suffix is still
below the kernel's 15-character ``comm`` limit and ``pgrep -x`` tells them apart.
"""

from __future__ import annotations

import hashlib
import json
import posixpath

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, SERVICES, WORDS, World, py_check, quote, workplace

# an idle daemon: the child sleep closes fd 3 so only the daemon itself holds what it opened there
_IDLE = "#!/bin/bash\nwhile :; do sleep 100000 3>&- & wait $!; done\n"
_STUBBORN = "#!/bin/bash\ntrap '' TERM INT HUP\nwhile :; do sleep 100000 3>&- & wait $!; done\n"
_HOLDER = '#!/bin/bash\nexec 3>>"$HOLD"\nunset HOLD\nwhile :; do sleep 100000 3>&- & wait $!; done\n'
_ROLES = ("worker", "agent", "sync", "poller", "watcher", "relay", "feeder", "pump", "runner", "daemon")
_SUFFIXES = ("d", "2", "-mon", "ctl", "-old")
_START = (
    'st() { n=$1; u=$2; shift 2; b=$(pgrep -c -x -P 1 "$n" || true); '
    'runuser -u "$u" -- "$@" </dev/null >/dev/null 2>&1; '
    'for i in $(seq 300); do [ "$(pgrep -c -x -P 1 "$n" || true)" -gt "$b" ] && break; sleep 0.02; done; '
    'pgrep -n -x -P 1 "$n"; }'
)
# fail: says which line failed and what ran, so a gate rejection explains itself
_CHECK_FUNCS = (
    'alive() { kill -0 "$1" 2>/dev/null && [ "$(ps -o stat= -p "$1" | cut -c1)" != Z ]; }\n'
    'gone() { local i p a; for i in $(seq 12); do a=0; for p in "$@"; do alive "$p" && a=1; done; '
    "[ $a = 0 ] && return 0; sleep 0.05; done; return 1; }\n"
    'fail() { ps -eo pid,ppid,stat,ni,user,comm | head -30; echo "check failed at line $1"; exit 1; }\n'
)


def _f(w: World, template: str, **values: object) -> str:
    """A spun fragment for inside a sentence (not capitalised)."""
    return w.spin(template, capitalize=False, **values)


def _name(w: World) -> str:
    """A daemon name of at most 11 characters, not drawn before."""

    def make() -> str:
        for _ in range(40):
            name = w.pick(
                (
                    f"{w.pick(SERVICES)}-{w.pick(_ROLES)}",
                    f"{w.pick(SERVICES)}d",
                    f"{w.pick(WORDS)}-{w.pick(_ROLES)}",
                    f"{w.pick(SERVICES)}{w.pick(('-w', 'srv', 'mgr'))}",
                )
            )
            if len(name) <= 11:
                return name
        return f"{w.pick(('qd', 'jd', 'kd'))}{w.randint(10, 99)}"

    return w.unique(make)


def _decoy_name(w: World, name: str) -> str:
    return w.unique(lambda: name + w.pick(_SUFFIXES))


class _Procs:
    """The programs to install and the launches to make, as one setup script; PIDs recorded under /root.

    A PID is read among init's children (``pgrep -P 1``): a daemon's freshly forked child carries the daemon's name
    until it execs ``sleep``, and on a loaded machine plain ``pgrep -n`` can catch that child instead."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.dir = f"/root/.procs-{w.token(6)}"
        self.files: dict[str, str] = {}
        self.lines = ["set -e", _START, f"mkdir -p {self.dir}"]
        self.count = 0

    def program(self, name: str, body: str = _IDLE) -> None:
        self.files[f"/usr/local/bin/{name}"] = body

    def start(
        self,
        name: str,
        user: str = "operator",
        args: str = "",
        env: str = "",
        nice: int = 0,
        gap: bool = False,
    ) -> str:
        """Launch one instance; returns the path of the file holding its PID (for the check). ``gap`` waits a few
        clock ticks after, so instances started in a row have distinct start times (pgrep -o/-n tell them apart)."""
        if f"/usr/local/bin/{name}" not in self.files:
            self.program(name)
        self.count += 1
        record = f"{self.dir}/{self.count}"
        prefix = (f"env {env} " if env else "") + (f"nice -n {nice} " if nice else "")
        tail = f" {args}" if args else ""
        self.lines.append(
            f"st {name} {user} {prefix}setsid -f /usr/local/bin/{name}{tail} > {record}"
            + ("; sleep 0.03" if gap else "")
        )
        return record

    def run(self, command: str) -> None:
        self.lines.append(command)

    def install(self) -> tuple[dict[str, str], list[str]]:
        script = f"/root/.launch-{self.w.token(6)}.sh"
        return {**self.files, script: "\n".join(self.lines) + "\n"}, [f"bash {script}"]


def _check(*lines: str) -> str:
    body = "\n".join(lines).replace("|| exit 1", "|| fail $LINENO")
    return "#!/bin/bash\n" + _CHECK_FUNCS + body + "\n"


def _alive_all(records: list[str]) -> list[str]:
    return [f'alive "$(cat {r})" || exit 1' for r in records]


@family(
    "processes-kill-by-name", "processes", "stop every process with a given name, leaving all others running"
)
def kill_by_name(w: World) -> Draft:
    root = w.chance(0.3)
    name = _name(w)
    stubborn = w.chance(0.25)
    procs = _Procs(w)
    procs.program(name, _STUBBORN if stubborn else _IDLE)
    users = ("operator", "www-data", "daemon") if root else ("operator",)
    n = w.randint(1, 4)
    decoys: list[tuple[str, str, str]] = []  # name, user, args
    for _ in range(w.randint(1, 3)):
        kind = w.pick(("suffix", "suffix", "args", "other"))
        if kind == "suffix":
            decoys.append((_decoy_name(w, name), w.pick(users), ""))
        elif kind == "args":
            decoys.append(
                (
                    w.unique(lambda: f"{w.pick(('log', 'tail', 'stat'))}-{w.pick(_ROLES)}"),
                    w.pick(users),
                    f"--follow /var/log/{name}.log",
                )
            )
        else:
            decoys.append((_name(w), w.pick(users), ""))
    launches = [("target", name, w.pick(users), "") for _ in range(n)] + [("decoy", *d) for d in decoys]
    targets: list[str] = []
    keep: list[str] = []
    for role, pname, user, args in w.shuffled(launches):
        rec = procs.start(pname, user, args)
        (targets if role == "target" else keep).append(rec)
    files, setup = procs.install()
    keep_names = sorted({d[0] for d in decoys})
    many = _f(w, "{every|each} {instance|copy} of it") if n > 1 else _f(w, "{it|the process}")
    listed = ", ".join(keep_names[:-1]) + " and " + keep_names[-1] if len(keep_names) > 1 else keep_names[0]
    others = w.spin(
        "{everything else|all other processes} ({including|even} {k}) must keep running", k=listed
    )
    where = (
        _f(w, "{on this machine|on the system}, whichever user runs it")
        if root
        else _f(w, "{running under your account|that you are running}")
    )
    where2 = (
        _f(w, "{on this machine|on the system}") if root else _f(w, "{under your account|in your session}")
    )
    hung = ""
    if stubborn:
        hung = " " + (
            w.spin("They are hung and ignore the {normal|polite} termination signal.")
            if n > 1
            else w.spin("It is hung and ignores the {normal|polite} termination signal.")
        )
    task = w.phrase(
        "Stop every process named exactly {name} {where}.{hung} {others}.",
        "{Please |}{kill|terminate} every {name} process {where}.{hung} {others}.",
        "Ticket: {name} is misbehaving {where2}. {Terminate|Stop|Kill} {many}.{hung} {others}.",
        "Could you {get rid of|shut down} every {name} process {where}?{hung} {others}.",
        "Every {name} process {where} has to be terminated; afterwards none may be left.{hung} {others}.",
        "{name} {where}: all of them, gone.{hung} {others}.",
        "Half the box's memory is going to {name} processes {where} that nobody needs. Make them go away.{hung} "
        "{others}.",
        name=name,
        where=where,
        where2=where2,
        hung=hung,
        others=others,
        many=many,
    )
    check = _check(
        "gone " + " ".join(f'"$(cat {r})"' for r in targets) + " || exit 1",
        f"! pgrep -x {name} >/dev/null || exit 1",
        *_alive_all(keep),
    )
    look = w.pick((f"pgrep -a {name}", f"ps -eo pid,user,comm,args | grep {name}", "ps -ef"))
    if stubborn:
        soft = w.pick((f"pkill -x {name}", f"killall {name}"))
        kill = [
            soft,
            f"sleep 0.5; pgrep -a -x {name}",
            w.pick((f"pkill -KILL -x {name}", f"killall -9 {name}", f"kill -9 $(pgrep -x {name})")),
        ]
    else:
        kill = [
            w.pick(
                (
                    f"pkill -x {name}",
                    f"killall {name}",
                    f"kill $(pgrep -x {name})",
                    f"pgrep -x {name} | xargs kill",
                )
            )
        ]
    reference = [look, *kill, f"sleep 0.5; pgrep -a -x {name} || echo 'none left'"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if stubborn else 2,
        files=files,
        setup=setup,
        user="root" if root else "operator",
    )


@family(
    "processes-record-pid",
    "processes",
    "find one process's PID (by name, age, owner or arguments) into a file",
)
def record_pid(w: World) -> Draft:
    name = _name(w)
    procs = _Procs(w)
    variant = w.pick(("single", "oldest", "newest", "args", "user"))
    others_users = ("www-data", "daemon")
    target = ""
    instances: list[tuple[str, str]] = []  # user, args
    pick_user, arg_val = "", ""
    if variant == "single":
        instances = [("operator", "")]
    elif variant in ("oldest", "newest"):
        instances = [("operator", "") for _ in range(w.randint(2, 4))]
    elif variant == "args":
        vals = [w.word() for _ in range(w.randint(2, 4))]
        arg_val = w.pick(vals)
        instances = [("operator", f"--queue {v}") for v in vals]
    else:
        pick_user = w.pick(others_users)
        instances = [(pick_user, "")] + [
            (u, "") for u in w.sample(["operator", *others_users], 2) if u != pick_user
        ]
        instances = w.shuffled(instances)
    records = []
    decoy = _decoy_name(w, name)
    if w.chance(0.7):
        procs.start(decoy, w.pick(("operator", "www-data")))
    for user, args in instances:
        records.append((procs.start(name, user, args, gap=variant in ("oldest", "newest")), user, args))
    if variant in ("single", "oldest"):
        target = records[0][0]
    elif variant == "newest":
        target = records[-1][0]
    elif variant == "args":
        target = next(r for r, _, a in records if a.endswith(f" {arg_val}"))
    else:
        target = next(r for r, u, _ in records if u == pick_user)
    files, setup = procs.install()
    w.note(pick_user)
    out = f"{HOME}/{w.pick((name + '.pid', 'pid.txt', name + '_pid.txt', 'target.pid'))}"
    which = {
        "single": _f(w, "the running {name} process", name=name),
        "oldest": _f(
            w, "the {oldest|first-started} of the {name} processes{| (the one started first)}", name=name
        ),
        "newest": _f(w, "the {newest|most recently started} {name} process", name=name),
        "args": _f(
            w,
            "the {name} process {that works on|handling} the queue {q} (its command line has --queue {q})",
            name=name,
            q=arg_val,
        ),
        "user": _f(w, "the {name} process {run by|owned by|running as} the user {u}", name=name, u=pick_user),
    }[variant]
    which_l = which[:1].lower() + which[1:]
    task = w.phrase(
        "Write the PID of {which} to {out}{| (just the number)}.",
        "{Find|Look up} the process ID of {which} and {save|put} it in {out}, {nothing else|only the number}.",
        "Ticket: {monitoring|the watchdog} needs the PID of {which}. {Store|Write} it in {out}.",
        "What is the PID of {which}? {Put|Write} the number in {out}.",
        "I want to attach a debugger to {which}, but I don't know its process ID. Could you write it to {out}?",
        "{out} <- PID of {which}.",
        "{out} should contain the process ID of {which} and nothing more.",
        which=which_l,
        out=w.path_ref(out, "file"),
    )
    check = _check(
        f"[ -f {quote(out)} ] || exit 1",
        f'[ "$(tr -d \'[:space:]\' < {quote(out)})" = "$(cat {target})" ] || exit 1',
    )
    find = {
        "single": w.pick((f"pgrep -x {name}", f"pidof {name}")),
        "oldest": f"pgrep -o -x {name}",
        "newest": f"pgrep -n -x {name}",
        "args": w.pick(
            (
                f"pgrep -f -- '{name} --queue {arg_val}$'",
                f"ps -eo pid,args | awk '/[{name[0]}]{name[1:]} --queue {arg_val}$/ {{print $1}}'",
            )
        ),
        "user": f"pgrep -x -u {pick_user} {name}",
    }[variant]
    look = w.pick((f"ps -eo pid,user,lstart,args | grep {name}", f"pgrep -a {name}", "ps -ef"))
    if variant == "single" and find.startswith("pidof"):  # pidof also prints scripts run by name
        find = f"pgrep -x {name}"
    reference = [look, f"{find} > {quote(out)}", f"cat {quote(out)}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=1 if variant == "single" else 2,
        files=files,
        setup=setup,
    )


@family("processes-renice", "processes", "lower the CPU priority (raise the niceness) of running processes")
def renice(w: World) -> Draft:
    name = _name(w)
    procs = _Procs(w)
    variant = w.pick(("one", "all", "args"))
    level = w.randint(5, 19)
    start_nice = w.pick((0, 0, 0, 2))
    w.note(level)
    targets: list[str] = []
    keep: list[tuple[str, int]] = []  # record, the niceness it must keep
    arg_val = ""
    if variant == "one":
        targets.append(procs.start(name, nice=start_nice))
    elif variant == "all":
        targets = [procs.start(name, nice=start_nice) for _ in range(w.randint(2, 4))]
    else:
        vals = [w.word() for _ in range(w.randint(2, 3))]
        arg_val = w.pick(vals)
        for v in vals:
            rec = procs.start(name, args=f"--job {v}", nice=start_nice)
            if v == arg_val:
                targets.append(rec)
            else:
                keep.append((rec, start_nice))
    for _ in range(w.randint(1, 2)):
        keep.append((procs.start(w.pick((_decoy_name(w, name), _name(w)))), 0))
    files, setup = procs.install()
    which = {
        "one": _f(w, "the running {name} process", name=name),
        "all": _f(w, "{every|each} running {name} process{| (there are several)}", name=name),
        "args": _f(
            w, "the {name} process {running the job|whose command line has --job} {j}", name=name, j=arg_val
        ),
    }[variant]
    keep_text = w.pick(
        (
            "other processes must keep their current priority",
            "everything else must keep its current priority",
            "leave the priority of every other process as it is",
        )
    )
    alive = (
        _f(w, "without restarting {it|anything}")
        if variant != "all"
        else _f(w, "without restarting {them|anything}")
    )
    task = w.phrase(
        "Set the niceness of {which} to {n} {alive}; {keep}.",
        "{which_c} is {hogging the CPU|slowing everything down}. {Lower its priority|Make it nicer} by setting its "
        "nice value to {n} {alive}; {keep}.",
        "Ticket: {please |}renice {which} to {n} {alive}. {keep_c}.",
        "Could you {drop|lower} the CPU priority of {which} to a nice value of {n}, {alive}? {keep_c}.",
        "Interactive work on this machine is sluggish because of {which}. Make the scheduler favour everything "
        "else: its niceness should be {n}, {alive}. {keep_c}.",
        "nice {n} for {which}, {alive}. {keep_c}.",
        which=which,
        which_c=which[:1].upper() + which[1:],
        n=level,
        alive=alive,
        keep=keep_text,
        keep_c=keep_text[:1].upper() + keep_text[1:],
    )
    check = _check(
        *[
            f'p=$(cat {r}); alive "$p" || exit 1\n[ "$(ps -o ni= -p "$p" | tr -d \' \')" = {level} ] '
            f"|| exit 1"
            for r in targets
        ],
        *[
            f'p=$(cat {r}); alive "$p" || exit 1\n[ "$(ps -o ni= -p "$p" | tr -d \' \')" = {ni} ] || exit 1'
            for r, ni in keep
        ],
    )
    pids = {
        "one": f"$(pgrep -x {name})",
        "all": f"$(pgrep -x {name})",
        "args": f"$(pgrep -f -- '{name} --job {arg_val}$')",
    }[variant]
    cmd = w.pick((f"renice -n {level} -p {pids}", f"renice {level} -p {pids}"))
    how = w.pick(("renice", "renice", "python", "loop", "ps"))
    if variant == "all" and w.chance(0.4):
        cmd = f"pgrep -x {name} | xargs renice -n {level} -p"
    elif how == "python":  # the setpriority system call, from python
        code = f"import os, sys; [os.setpriority(os.PRIO_PROCESS, int(p), {level}) for p in sys.argv[1:]]"
        cmd = f"python3 -c {quote(code)} {pids}"
    elif how == "loop":  # one renice per process id
        cmd = f'for p in {pids}; do renice -n {level} -p "$p"; done'
    elif how == "ps" and variant != "args":  # the ids listed by ps, handed to renice by xargs
        cmd = f"ps -C {name} -o pid= | xargs renice -n {level} -p"
    reference = [
        w.pick((f"ps -o pid,ni,args -C {name}", "ps -u operator -o pid,ni,comm,args")),
        cmd,
        f"ps -o pid,ni,args -C {name}",
    ]
    return Draft(task=task, check=check, reference=reference, difficulty=2, files=files, setup=setup)


@family(
    "processes-file-holder",
    "processes",
    "find the process holding a file open (fuser, /proc) and report or stop it",
)
def file_holder(w: World) -> Draft:
    base = w.pick((f"{HOME}/{w.dirname()}", f"/var/tmp/{w.pick(SERVICES)}", f"/srv/{w.pick(SERVICES)}/run"))
    k = w.randint(2, 4)
    exts = w.pick((("lck",), ("db", "lck"), ("log",), ("dat", "idx", "db")))
    names = [w.filename(w.pick(exts)) for _ in range(k + 1)]  # the last one is held by nobody
    same_name = w.chance(0.5)
    prog = _name(w) if same_name else ""
    procs = _Procs(w)
    if same_name:
        procs.program(prog, _HOLDER)
    variant = w.pick(("pid", "pid", "kill", "name") if not same_name else ("pid", "kill"))
    files: dict[str, str] = {}
    if base.startswith(HOME):
        files = {f"{base}/{n}": "" for n in names}
    else:
        procs.run(
            f"mkdir -p {base} && touch "
            + " ".join(f"{base}/{n}" for n in names)
            + f" && chown -R operator:operator {base}"
        )
    recs, progs = [], []
    for i in range(k):
        pname = prog if same_name else _name(w)
        if not same_name:
            procs.program(pname, _HOLDER)
        recs.append(procs.start(pname, env=f"HOLD={base}/{names[i]}"))
        progs.append(pname)
    idx = w.randint(0, k - 1)
    target_file, target_rec, target_prog = f"{base}/{names[idx]}", recs[idx], progs[idx]
    pfiles, setup = procs.install()
    files.update(pfiles)
    out = f"{HOME}/{w.pick(('holder', 'culprit', 'owner', 'who'))}.{w.pick(('txt', 'pid'))}"
    report = {
        "pid": _f(w, "{its PID|the process ID}"),
        "kill": _f(w, "{its PID|the process ID}"),
        "name": _f(w, "{its name|the program's name} (as ps shows it)"),
    }[variant]
    stop = ""
    if variant == "kill":
        stop = " " + w.spin(
            "Then {stop|terminate} that process, and only that one: the other {p}processes keep running.",
            p=f"{prog} " if same_name else "",
        )
    noloc = w.pick(("", " (lsof is not installed)", " (there is no lsof here)"))
    task = w.phrase(
        "{Some process|Something} {keeps|is keeping} {f} open{noloc}. Find {which|the process} and write {report} "
        "to {out}.{stop}",
        "Which process has {f} open? {Write|Put} {report} in {out}{noloc}.{stop}",
        "Ticket: {f} is {locked|busy} and the {migration|cleanup|backup} cannot start. {Identify|Find} the process "
        "holding it open and {save|record} {report} in {out}.{stop}",
        "Could you find out what is holding {f} open{noloc}? I need {report} in {out}.{stop}",
        "I tried to unmount and replace {f} but something still uses it. Track down the culprit{noloc}; {report} "
        "goes to {out}.{stop}",
        "{out}: {report} of whatever has {f} open{noloc}.{stop}",
        f=w.path_ref(target_file, "file"),
        noloc=noloc,
        report=report,
        out=w.path_ref(out, "file"),
        stop=stop,
    )
    got = f"$(tr -d '[:space:]' < {quote(out)})"
    lines = [f"[ -f {quote(out)} ] || exit 1"]
    if variant == "name":
        lines.append(f'[ "{got}" = {target_prog} ] || exit 1')
    else:
        lines.append(f'[ "{got}" = "$(cat {target_rec})" ] || exit 1')
    if variant == "kill":
        lines.append(f'gone "$(cat {target_rec})" || exit 1')
        lines += _alive_all([r for r in recs if r != target_rec])
    check = _check(*lines)
    q = quote(target_file)
    if variant == "name":
        find = w.pick(
            (
                f"ps -o comm= -p $(fuser {q} 2>/dev/null) > {quote(out)}",
                f"ps -o comm= -p \"$(fuser {q} 2>/dev/null | awk '{{print $1}}')\" > {quote(out)}",
            )
        )
    else:
        find = w.pick(
            (
                f"fuser {q} 2>/dev/null | awk '{{print $1}}' > {quote(out)}",
                f"fuser {q} 2>/dev/null | tr -d ' ' > {quote(out)}",
                f"find /proc/[0-9]*/fd -lname {q} 2>/dev/null | cut -d/ -f3 | sort -u > {quote(out)}",
            )
        )
    reference = [
        w.pick((f"fuser -v {q}", f"ls -l /proc/[0-9]*/fd 2>/dev/null | grep {q}")),
        find,
        f"cat {quote(out)}",
    ]
    if variant == "kill":
        reference += [
            f"kill $(cat {quote(out)})",
            w.pick((f"fuser -v {q} || echo released", "ps -u operator -o pid,comm")),
        ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if variant == "kill" else 2,
        files=files,
        setup=setup,
    )


_SIGNALS = {
    "HUP": ("reload|re-read", "its configuration", "reload"),
    "USR1": ("reopen", "its log files", "reopen-logs"),
    "USR2": ("dump", "its statistics", "dump-stats"),
}


@family(
    "processes-signal-daemon",
    "processes",
    "send a daemon the signal that makes it reload, without restarting it",
)
def signal_daemon(w: World) -> Draft:
    name = _name(w)
    sig = w.pick(("HUP", "HUP", "USR1", "USR2"))
    verbs, obj, action = _SIGNALS[sig]
    logdir = f"/var/log/{name}"
    body = (
        "#!/bin/bash\n"
        + "".join(
            f"trap 'printf \"%(%T)T pid=%s signal={s} action={a[2]}\\n\" -1 $$ >> {logdir}/{name}.log' {s}\n"
            for s, a in _SIGNALS.items()
        )
        + "trap 'exit 0' TERM\nwhile :; do sleep 100000 3>&- & wait $!; done\n"
    )
    procs = _Procs(w)
    procs.program(name, body)
    procs.run(f"mkdir -p {logdir} && touch {logdir}/{name}.log && chown -R operator:operator {logdir}")
    variant = w.pick(("one", "one", "config", "all"))
    targets: list[str] = []
    keep: list[str] = []
    conf = ""
    if variant == "one":
        targets.append(procs.start(name))
    elif variant == "all":
        targets = [
            procs.start(name, args=f"--config /etc/{name}/{w.word()}.conf") for _ in range(w.randint(2, 3))
        ]
    else:
        confs = [w.word() for _ in range(w.randint(2, 3))]
        conf = f"/etc/{name}/{w.pick(confs)}.conf"
        for c in confs:
            path = f"/etc/{name}/{c}.conf"
            (targets if path == conf else keep).append(procs.start(name, args=f"--config {path}"))
    other = _name(w)
    procs.program(other, body.replace(f"{logdir}/{name}.log", f"{logdir}/{other}.log"))
    keep_other = procs.start(other)
    files, setup = procs.install()
    verb = w.pick(verbs.split("|"))
    what = f"{verb} {obj}"
    whats = f"{verb}s {obj}"
    which = {
        "one": _f(w, "the running {n}", n=name),
        "all": _f(w, "every running {n} {instance|process}", n=name),
        "config": _f(w, "the {n} instance started with --config {c}", n=name, c=conf),
    }[variant]
    task = w.phrase(
        "The {n} daemon {v}s {o} when it receives SIG{sig}. Make {which} {v} {o} now, without restarting it (it "
        "must keep its PID).",
        "{Please |}send SIG{sig} to {which} so that it {whats}. Do not restart {it|anything}; {other} must not get "
        "the signal.",
        "Ticket: {which} has to {what}. It does that on SIG{sig}; {restarting is not allowed|do not restart it}.",
        "Could you get {which} to {what}? It {handles|listens for} SIG{sig} for that. Keep it running with the same "
        "PID.",
        "{which_cap}: SIG{sig}, so it will {what}. Same PID afterwards.",
        "Without a restart - the PID must stay the same - {which} has to {what}. Its SIG{sig} handler does exactly "
        "that.",
        which_cap=which[:1].upper() + which[1:],
        n=name,
        v=verb,
        o=obj,
        sig=sig,
        which=which,
        what=what,
        whats=whats,
        other=other,
    )
    log = quote(f"{logdir}/{name}.log")
    # one short wait for every target's handler (already run in practice: the reference ends after it)
    seen = " && ".join(f'grep -q "pid=$(cat {r}) signal={sig} " {log}' for r in targets)
    lines = [f"for i in $(seq 12); do {{ {seen}; }} && break; sleep 0.05; done"]
    for r in targets:
        lines += [
            f'p=$(cat {r}); alive "$p" || exit 1',
            f'grep -q "pid=$p signal={sig} " {log} || exit 1',
            f'! grep "pid=$p " {log} | grep -qv "signal={sig} " || exit 1',
        ]
    for r in keep:
        lines += [f'p=$(cat {r}); alive "$p" || exit 1', f'! grep -q "pid=$p " {log} || exit 1']
    lines += [
        f'alive "$(cat {keep_other})" || exit 1',
        f"! grep -q signal= {quote(f'{logdir}/{other}.log')} || exit 1",
    ]
    check = _check(*lines)
    send = {
        "one": w.pick(
            (
                f"kill -{sig} $(pgrep -x {name})",
                f"pkill -{sig} -x {name}",
                f"kill -s {sig} $(pgrep -x {name})",
            )
        ),
        "all": w.pick((f"pkill -{sig} -x {name}", f"killall -{sig} {name}")),
        "config": f"pkill -{sig} -f -- '--config {conf}$'",
    }[variant]
    reference = [
        w.pick((f"pgrep -a {name}", f"ps -eo pid,args | grep {name}")),
        send,
        f"sleep 0.5; tail -n 3 {log}",
    ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if variant != "config" else 3,
        files=files,
        setup=setup,
    )


@family(
    "processes-count-instances",
    "processes",
    "count the running processes of one program (optionally one user)",
)
def count_instances(w: World) -> Draft:
    name = _name(w)
    procs = _Procs(w)
    users = ["operator", "www-data", "daemon", "nobody"]
    by_user = w.chance(0.6)
    who = w.pick(users[1:]) if by_user and w.chance(0.7) else "operator"
    counts = {u: w.randint(0, 3) for u in w.sample(users, w.randint(2, 4))}
    if by_user:
        counts[who] = max(counts.get(who, 0), 1)
        if sum(counts.values()) == counts[who]:
            counts[w.pick([u for u in users if u != who])] = w.randint(1, 2)
    else:
        if sum(counts.values()) == 0:
            counts[w.pick(users)] = w.randint(1, 3)
    launches = [u for u, c in counts.items() for _ in range(c)]
    decoy = _decoy_name(w, name)
    launches_d = [decoy] * w.randint(1, 2)
    for item in w.shuffled([("t", u) for u in launches] + [("d", d) for d in launches_d]):
        if item[0] == "t":
            procs.start(name, item[1])
        else:
            procs.start(item[1], w.pick(users))
    files, setup = procs.install()
    answer = counts[who] if by_user else sum(counts.values())
    w.note(who)
    out = f"{HOME}/{w.pick(('count', 'n_procs', name + '_count', 'instances'))}.txt"
    scope = (
        _f(w, "{running as|owned by|belonging to} the user {u}", u=who)
        if by_user
        else _f(w, "{in total|on the whole machine}, whatever user runs them")
    )
    not_these = _f(
        w,
        f"{{similarly named programs such as {decoy} do not count|only that exact name counts, not {decoy}}}",
    )
    task = w.phrase(
        "How many {n} processes are there {scope}? Write {only|just} the number to {out}; {nd}.",
        "Count the {n} processes {scope} and {save|write} the {count|number} to {out} ({nd}).",
        "Ticket: {capacity planning|the on-call review} needs the number of {n} processes {scope}. Put it in {out}; "
        "{nd}.",
        "{Please |}find out how many {instances|copies} of {n} there are {scope}, and {record|write} the "
        "number in {out}. Note that {nd}.",
        "We suspect {n} is forking more than it should. Give me the current count of {n} processes {scope} in "
        "{out} ({nd}).",
        "{out}: number of {n} processes {scope}. {nd_c}.",
        nd_c=not_these[:1].upper() + not_these[1:],
        n=name,
        scope=scope,
        out=w.path_ref(out, "file"),
        nd=not_these,
    )
    check = _check(
        f"[ -f {quote(out)} ] || exit 1", f"[ \"$(tr -d '[:space:]' < {quote(out)})\" = {answer} ] || exit 1"
    )
    flag = f" -u {who}" if by_user else ""
    user_test = f'$1 == "{who}" && ' if by_user else ""
    cmd = w.pick(
        (
            f"pgrep -c -x{flag} {name} > {quote(out)}",
            f"ps -o comm= {'-u ' + who if by_user else '-e'} | grep -cx {name} > {quote(out)}",
            # the ids listed, then counted as lines
            f"pgrep -x{flag} {name} | wc -l > {quote(out)}",
            # every process's user and name, counted by awk
            f"ps -eo user=,comm= | awk {quote(f'{user_test}$2 == {json.dumps(name)} {{n++}} END {{print n + 0}}')} "
            f"> {quote(out)}",
            # straight from /proc: the processes whose name is exactly this one (the user from the folder's owner)
            f"stat -c %U $(grep -lx {name} /proc/[0-9]*/comm 2>/dev/null | xargs -r dirname) 2>/dev/null | "
            f"grep -cx {who} > {quote(out)}"
            if by_user
            else f"grep -lx {name} /proc/[0-9]*/comm 2>/dev/null | wc -l > {quote(out)}",
        )
    )
    reference = [
        w.pick(("ps -eo user,pid,comm", f"ps -eo user,comm | grep {name}")),
        cmd,
        f"cat {quote(out)}",
    ]
    return Draft(task=task, check=check, reference=reference, difficulty=2, files=files, setup=setup)


# ==== issue 39: stale pidfiles, a worker started in the background, waiting for a job before acting ===============
# Where real tasks start (``workplace``); checks with ``py_check`` read /proc and the files: the process that runs,
# the file a pidfile names, the output a finished job left.
def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _rel_to(path: str, wd: str) -> str:
    return posixpath.relpath(path, wd) if path.startswith(wd + "/") else path


_PROC_LIB = r"""
def alive(pid):
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, ValueError):
        return False
def pid_in(path):
    try:
        return int(text(path).split()[0])
    except (IndexError, ValueError):
        no(f"{path} holds no PID")
"""


@family(
    "processes-stale-pidfile",
    "processes",
    "tell live pidfiles from stale ones (process gone, or the PID now another program) and remove or report them",
)
def stale_pidfile(w: World) -> Draft:
    user = w.pick(("root", "root", "operator"))
    app = w.project()
    procs = _Procs(w)
    if user == "root":
        rundir = w.pick((f"/run/{app}", f"/var/run/{app}", f"/srv/{app}/run"))
        wd = w.pick(("/root", rundir, posixpath.dirname(rundir)))
        setup: list[str] = []
    else:
        wd, setup = workplace(w, user, app)
        rundir = w.pick((f"{wd}/run", f"{wd}/var/run", f"{HOME}/.local/run/{app}"))
    strict = w.chance(0.35)  # a PID reused by another program counts as stale too
    names = [_name(w) for _ in range(w.randint(4, 6))]
    n_stale = w.randint(1, len(names) - 2)
    stale = names[:n_stale]
    live = names[n_stale:]
    svc_user = f"{app}svc"
    setup.append(f"id -u {svc_user} >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin {svc_user}")
    procs.run(f"mkdir -p {quote(rundir)}")
    records: dict[str, str] = {}
    for name in live:
        owner = user if user == "root" else w.pick(("operator", "operator", svc_user))
        records[name] = procs.start(name, owner)
        procs.run(f"cat {records[name]} > {quote(f'{rundir}/{name}.pid')}")
    reused = ""
    for name in stale:
        if strict and not reused and live:
            reused = name  # its PID is now another live program's
            procs.run(f"cat {records[live[0]]} > {quote(f'{rundir}/{name}.pid')}")
            continue
        procs.run(f"sleep 0.01 & p=$!; wait $p; echo $p > {quote(f'{rundir}/{name}.pid')}")
    decoy = f"{rundir}/{w.pick(('README', 'lockfile', 'socket.info'))}"
    procs.run(f"echo 'managed by {app}' > {quote(decoy)}")
    procs.run(f"chown -R {user}: {quote(rundir)}")
    files, launch = procs.install()
    setup += launch
    mode = w.pick(("remove", "remove", "report"))
    report = (
        f"{wd if wd != rundir else posixpath.dirname(rundir)}/{w.pick(('stale', 'stale_pids', 'dead'))}.txt"
    )
    d, r = _rel_to(rundir, wd), _rel_to(report, wd)
    if rundir == wd:
        d = "."
    rule = (
        _f(
            w,
            "A pidfile is stale when no process has its PID, or when the process with that PID is not the program "
            "the file is named after (<program>.pid).",
        )
        if strict
        else _f(
            w,
            "{A pidfile is stale when no process with its PID is running.|Stale means: the PID in it is not running.}",
        )
    )
    if mode == "remove":
        task = w.phrase(
            "Clean up the stale pidfiles in {d}: delete every *.pid file whose process is gone and keep the live "
            "ones. {rule} Nothing may be killed.",
            "After a crash, {d} is full of pidfiles of processes that no longer exist. Remove those (only the "
            "stale ones); the running programs and their pidfiles stay as they are. {rule}",
            "Ticket: stale *.pid files in {d} block restarts. Delete them, leave the valid ones. {rule}",
            "Could you go through the pidfiles in {d} and remove the ones that point to no live process? {rule} "
            "Do not touch anything else there.",
            "Goal: every *.pid file left in {d} names a running process. {rule} Running processes must keep running.",
            d=d,
            rule=rule,
        )
    else:
        task = w.phrase(
            "Which pidfiles in {d} are stale? Write their file names (like {ex}) to {r}, one per line; change "
            "nothing in {d}. {rule}",
            "Audit {d}: list every *.pid file there whose process is not running in {r} (one file name per line). "
            "{rule}",
            "Ticket: report the stale pidfiles of {d} into {r}, one name a line, without deleting anything. {rule}",
            "Could you check the *.pid files in {d} and put the names of the dead ones in {r}? {rule}",
            "Goal: {r} names exactly the stale pidfiles of {d} (base names, one per line). {rule}",
            d=d,
            r=r,
            rule=rule,
            ex=f"{names[0]}.pid",
        )
    g = "*.pid" if d == "." else f"{d}/*.pid"
    act = 'rm -v "$f"' if mode == "remove" else 'basename "$f"'
    out = f" > {r}" if mode == "report" else ""
    how = w.randint(0, 4)
    if strict:
        test = w.pick(
            (
                '[ "$(cat /proc/$(cat "$f")/comm 2>/dev/null)" = "$(basename "$f" .pid)" ]',
                'ps -p "$(cat "$f")" -o comm= | grep -qx "$(basename "$f" .pid)"',
            )
        )
    else:
        test = (
            'ps -p "$(cat "$f")" >/dev/null',
            '[ -d "/proc/$(cat "$f")" ]',
            'pgrep -F "$f" >/dev/null',
            'ps -p "$(cat "$f")" -o pid= >/dev/null',
            'kill -0 "$(cat "$f")" 2>/dev/null' if user == "root" else '[ -e "/proc/$(cat "$f")/stat" ]',
        )[how]
    ref = [w.pick((f"ls -l {d}", f"head {g}", f"grep . {g}"))]
    if how == 4 and not strict and w.chance(0.5):
        ref.append(
            f"python3 - {g}{out} <<'EOF'\nimport os, sys\nfor f in sys.argv[1:]:\n    pid = open(f).read().split()[0]\n"
            f"    if not os.path.exists(f'/proc/{{pid}}'):\n        "
            + ("os.remove(f)" if mode == "remove" else "print(os.path.basename(f))")
            + "\nEOF"
        )
    else:
        ref.append(f"for f in {g}; do {test} || {act}; done{out}")
    ref.append(f"ls {d}" if mode == "remove" else f"cat {r}")
    spec = {
        "mode": mode,
        "stale": [f"{rundir}/{n}.pid" for n in stale],
        "live": [f"{rundir}/{n}.pid" for n in live],
        "records": list(records.values()),
        "report": report,
        "decoy": decoy,
    }
    check = py_check(
        spec,
        _PROC_LIB
        + r"""
for rec in S["records"]:
    if not alive(pid_in(rec)):
        no("a running program was stopped")
for f in S["live"]:
    if not os.path.isfile(f) or not alive(pid_in(f)):
        no(f"{f}: a live pidfile was removed or changed")
if not os.path.isfile(S["decoy"]):
    no(f"{S['decoy']} was removed")
if S["mode"] == "remove":
    left = [f for f in S["stale"] if os.path.exists(f)]
    if left:
        no(f"stale pidfiles left: {left}")
else:
    if any(not os.path.isfile(f) for f in S["stale"]):
        no("the report task deleted pidfiles")
    if not os.path.isfile(S["report"]):
        no(f"no {S['report']}")
    got = sorted(os.path.basename(x.strip()) for x in text(S["report"]).splitlines() if x.strip())
    if got != sorted(os.path.basename(f) for f in S["stale"]):
        no(f"reported {got}")
""",
    )
    w.note(*names)
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if strict or user == "operator" else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )


_WORKER = (
    "#!/bin/bash\n"
    'echo "$(basename "$0") started with: $* (in $PWD)"\n'
    'echo "$(basename "$0"): warming up" >&2\n'
    "while :; do sleep 100000 3>&- & wait $!; done\n"
)


@family(
    "processes-background-worker",
    "processes",
    "start a long-running worker in the background with its arguments, log file (stdout and stderr), pidfile and "
    "optionally environment, working directory or niceness",
)
def background_worker(w: World) -> Draft:
    user = w.pick(("operator", "operator", "root"))
    app = w.project()
    wd, setup = workplace(w, user, app, home_share=0.1)
    role = w.pick(("worker", "consumer", "indexer", "poller", "sync"))
    script = w.pick((f"{wd}/bin/{role}.sh", f"{wd}/{role}.sh", f"/opt/{app}/bin/{app}-{role}"))
    queue = w.pick(("emails", "thumbnails", "invoices", "events", "exports", "webhooks"))
    args = w.pick(
        (
            f"--queue {queue}",
            f"--queue {queue} --concurrency {w.randint(2, 8)}",
            f"-c {w.randint(2, 8)} {queue}",
        )
    )
    log = w.pick((f"{wd}/logs/{role}.log", f"{wd}/{role}.log", f"{wd}/var/log/{role}.log"))
    pidfile = w.pick((f"{wd}/run/{role}.pid", f"{wd}/{role}.pid", f"{wd}/var/run/{role}.pid"))
    files = {script: _WORKER}
    setup.append(f"chmod 755 {quote(script)} && chown {user}: {quote(script)}")
    for d in sorted({posixpath.dirname(log), posixpath.dirname(pidfile)} - {wd}):
        if w.chance(0.6):
            setup.append(f"mkdir -p {quote(d)} && chown {user}: {quote(d)}")
    extra = w.pick(("", "", "env", "cwd", "nice"))
    env = (w.pick(("QUEUE_URL", "BROKER_URL", "REDIS_URL")), f"redis://{w.ip()}:6379/{w.randint(0, 9)}")
    run_dir = w.pick((f"/srv/{app}/data", f"{wd}/data", f"/var/lib/{app}"))
    nice = w.pick((5, 10, 15))
    if extra == "cwd":
        setup.append(f"mkdir -p {quote(run_dir)} && chown {user}: {quote(run_dir)}")
    if user == "operator":  # folders the setup made inside the working folder belong to its user
        setup.append(f"chown -R operator: {quote(wd)}")
    w.note(
        role,
        queue,
        args,
        *(env if extra == "env" else ()),
        run_dir if extra == "cwd" else "",
        nice if extra == "nice" else "",
    )
    sp, lg, pf = _rel_to(script, wd), _rel_to(log, wd), _rel_to(pidfile, wd)
    how_extra = {
        "": "",
        "env": " " + _f(w, "It needs {k}={v} in its environment.", k=env[0], v=env[1]),
        "cwd": " " + _f(w, "It must run with {d} as its working directory.", d=run_dir),
        "nice": " " + _f(w, "Run it at niceness {n} so it yields to interactive work.", n=nice),
    }[extra]
    task = w.phrase(
        "Start {sp} {args} in the background: stdout and stderr both appended to {lg}, its PID written to {pf}. It "
        "must keep running after you are done.{x}",
        "The {role} for the {q} queue is not running. Launch `{sp} {args}` detached from your shell, logging "
        "everything it prints (both streams) to {lg}, and record the PID of the {role} process itself in {pf}.{x}",
        "Ticket: bring up the {q} {role}: command `{sp} {args}`, log {lg} (stdout+stderr), pidfile {pf}. One "
        "instance only.{x}",
        "Could you start {sp} with the arguments `{args}` as a background process? Its output and errors go to "
        "{lg}, and {pf} must hold its PID.{x}",
        "Goal: one `{sp} {args}` process is running, {pf} holds its PID, and its stdout and stderr are {lg}.{x}",
        "Background job: {sp} {args}; log {lg} (both streams); PID in {pf}.{x}",
        "Why is nothing consuming the {q} queue? Because {sp} is not running. Start it ({args}) in the "
        "background, with stdout and stderr going to {lg} and the PID saved in {pf}.{x}",
        "We need the {role} going before the batch arrives: run {sp} {args} so it survives this session, "
        "with its output (errors too) in {lg} and its PID in {pf}.{x}",
        sp=sp,
        args=args,
        lg=lg,
        pf=pf,
        role=role,
        q=queue,
        x=how_extra,
    )
    ref = [
        w.pick(
            (f"cat {sp}", f"ls -l {posixpath.dirname(sp) or '.'}", f"pgrep -af {posixpath.basename(script)}")
        )
    ]
    dirs = sorted({posixpath.dirname(lg), posixpath.dirname(pf)} - {"", "."})
    if dirs:
        ref.append(f"mkdir -p {' '.join(dirs)}")
    target = sp if sp.startswith("/") else f"./{sp}" if "/" not in sp else sp
    if extra == "cwd":
        target = script  # run from elsewhere: the absolute path
    prefix = {"": "", "env": f"{env[0]}={env[1]} ", "cwd": "", "nice": f"nice -n {nice} "}[extra]
    log_abs, pid_abs = (log, pidfile) if extra == "cwd" else (lg, pf)
    how = w.randint(0, 4)
    if how == 0 or (how == 3 and extra == "nice"):
        if extra == "cwd":
            ref.append(f"cd {run_dir}")
        ref.append(f"{prefix}nohup {target} {args} >> {log_abs} 2>&1 &")
        ref.append(f"echo $! > {pid_abs}")
    elif how == 1:
        if extra == "cwd":
            ref.append(
                f"(cd {run_dir} && exec {target} {args} >> {log_abs} 2>&1 < /dev/null) & echo $! > {pid_abs}"
            )
        else:
            ref.append(f"{prefix}{target} {args} >> {log_abs} 2>&1 < /dev/null & echo $! > {pid_abs}")
    elif how == 2:
        env_part = f"export {env[0]}={env[1]}; " if extra == "env" else ""
        cd = f"cd {run_dir}; " if extra == "cwd" else ""
        nic = f"renice -n {nice} $$ >/dev/null; " if extra == "nice" else ""
        ref.append(
            f"bash -c '{env_part}{cd}{nic}echo $$ > {pid_abs}; exec {target} {args}' >> {log_abs} 2>&1 &"
        )
    elif how == 3:
        opts = {"": "", "env": "", "cwd": f" --chdir {run_dir}", "nice": ""}[extra]
        envp = f"env {env[0]}={env[1]} " if extra == "env" else ""
        ref.append(
            f"{envp}start-stop-daemon --start --background --make-pidfile --pidfile {pidfile}{opts} --output "
            f"{log} --startas {script} -- {args}"
        )
    else:
        kw = {
            "": "",
            "env": f", env=dict(os.environ, {env[0]}='{env[1]}')",
            "cwd": f", cwd='{run_dir}'",
            "nice": "",
        }[extra]
        pre = f", preexec_fn=lambda: os.nice({nice})" if extra == "nice" else ""
        ref.append(
            f"python3 -c \"import os, subprocess; log = open('{log_abs}', 'ab'); p = subprocess.Popen("
            f"['{script}'] + '{args}'.split(), stdout=log, stderr=log, stdin=subprocess.DEVNULL, "
            f"start_new_session=True{kw}{pre}); open('{pid_abs}', 'w').write(str(p.pid))\""
        )
    ref.append(f"sleep 1; cat {log_abs} {pid_abs}")
    spec = {
        "pidfile": pidfile,
        "log": log,
        "script": posixpath.basename(script),
        "args": args.split(),
        "env": list(env) if extra == "env" else None,
        "cwd": run_dir if extra == "cwd" else None,
        "nice": nice if extra == "nice" else None,
        "uid": 0 if user == "root" else 1000,
    }
    check = py_check(
        spec,
        _PROC_LIB
        + r"""
import time
pid = pid_in(S["pidfile"])
if not alive(pid):
    no(f"no process {pid}")
def cmdline(p):
    try:
        return open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []
argv = cmdline(pid)
names = [os.path.basename(a) for a in argv]
if S["script"] not in names or argv[names.index(S["script"]) + 1:] != S["args"]:
    no(f"PID {pid} runs {argv}, not the worker with its arguments")
others = [
    p for p in os.listdir("/proc")
    if p.isdigit() and int(p) != pid and alive(p) and S["script"] in [os.path.basename(a) for a in cmdline(p)[:2]]
]
if others:
    no(f"more than one worker runs: {others}")
if os.stat(f"/proc/{pid}").st_uid != S["uid"]:
    no("the worker runs as another user")
def peek(*argv):  # /proc/<pid>/fd, cwd and environ: readable by the process's owner (root lacks CAP_SYS_PTRACE)
    who = ["runuser", "-u", "operator", "--"] if S["uid"] else []
    return subprocess.run(who + list(argv), capture_output=True).stdout
log = os.path.realpath(S["log"])
for fd in (1, 2):
    target = peek("readlink", f"/proc/{pid}/fd/{fd}").decode().strip()
    if target != log:
        no(f"fd {fd} goes to {target}, not {log}")
for _ in range(20):
    if "started with" in text(S["log"]) and "warming up" in text(S["log"]):
        break
    time.sleep(0.1)
else:
    no("the log lacks the worker's output")
if S["env"]:
    env = peek("cat", f"/proc/{pid}/environ").split(b"\0")
    if f"{S['env'][0]}={S['env'][1]}".encode() not in env:
        no("the variable is not in its environment")
if S["cwd"] and peek("readlink", f"/proc/{pid}/cwd").decode().strip() != os.path.realpath(S["cwd"]):
    no("wrong working directory")
if S["nice"] is not None:
    with open(f"/proc/{pid}/stat") as fh:
        ni = int(fh.read().rsplit(")", 1)[1].split()[16])
    if ni != S["nice"]:
        no(f"niceness {ni}")
""",
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if extra else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )


@family(
    "processes-wait-then-act",
    "processes",
    "wait for a running job to finish (by PID or name, whoever owns it), then compress, move or checksum its output",
)
def wait_then_act(w: World) -> Draft:
    user = w.pick(("operator", "operator", "root"))
    app = w.project()
    wd, setup = workplace(w, user, app, home_share=0.15)
    job = _name(w)
    owner = user if w.chance(0.6) else ("root" if user == "operator" else f"{app}job")
    if owner == f"{app}job":
        setup.append(f"id -u {owner} >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin {owner}")
    out = f"{wd}/{w.pick(('export', 'out', 'reports', 'dump'))}/{w.pick((app, job, 'nightly'))}-{w.date():%Y%m%d}.{w.pick(('csv', 'jsonl', 'sql'))}"
    rows = w.randint(10, 16)
    body = [f"{w.pick(('id', 'row', 'rec'))},{i},{w.word()}" for i in range(1, rows + 1)] + ["# END"]
    procs = _Procs(w)
    program = (
        "#!/bin/bash\n"
        + f"out={quote(out)}\n"
        + "".join(f'echo {quote(line)} >> "$out"; sleep 0.5\n' for line in body[:-1])
        + f'echo {quote(body[-1])} >> "$out"\n'
    )
    procs.program(job, program)
    procs.run(
        f"mkdir -p {quote(posixpath.dirname(out))} && touch {quote(out)} && chown -R {owner}: {quote(posixpath.dirname(out))}"
    )
    if user == "operator" and owner != "operator":
        procs.run(f"chmod 777 {quote(posixpath.dirname(out))} && chmod 666 {quote(out)}")
    record = procs.start(job, owner)
    pidfile = f"{wd}/{w.pick(('run/', ''))}{job}.pid" if w.chance(0.5) else ""
    if pidfile:
        procs.run(
            f"mkdir -p {quote(posixpath.dirname(pidfile))} && cat {record} > {quote(pidfile)} && chown {user}: {quote(pidfile)}"
        )
    files, launch = procs.install()
    setup += launch
    action = w.pick(("gzip", "gzip", "move", "checksum", "xz"))
    dest = f"{wd}/{w.pick(('done', 'outbox', 'archive', 'ready'))}"
    o, pf, ds = _rel_to(out, wd), _rel_to(pidfile, wd) if pidfile else "", _rel_to(dest, wd)
    find = _f(w, "(its PID is in {pf})", pf=pf) if pidfile else _f(w, "(the process named {j})", j=job)
    what = {
        "gzip": _f(w, "{gzip|compress} {o} (leaving only {o}.gz)", o=o),
        "xz": _f(w, "compress {o} with xz (leaving only {o}.xz)", o=o),
        "move": _f(w, "move {o} into {d}/", o=o, d=ds),
        "checksum": _f(w, "write its SHA-256 checksum to {o}.sha256 (in sha256sum's format)", o=o),
    }[action]
    w.note(job, action)
    task = w.phrase(
        "The export job {job} {find} is still writing {o}. Wait until it has finished, then {what}.",
        "Once the running {job} job {find} exits, {what}. Do not stop it: it must finish its work.",
        "Ticket: {o} is produced by the {job} process {find}, which is still running. When it is done (not "
        "before), {what}.",
        "Can you {what} as soon as {job} {find} has completed? It is still running now; let it finish.",
        "Goal: {what_goal}, from the complete output of {job} {find}, which has not finished yet.",
        "{job} {find} is writing {o} right now. Wait for it to end, then {what}.",
        "{o} is half-written: {job} {find} is still busy with it. When would it be safe to {what_plain}? "
        "When {job} has exited. Do it then.",
        "Heads up: {job} {find} will finish in a few seconds. After it has exited, {what}; killing it is not "
        "an option.",
        job=job,
        find=find,
        o=o,
        what=what,
        what_plain=what,
        what_goal={
            "gzip": _f(w, "{o}.gz holds the full file", o=o),
            "xz": _f(w, "{o}.xz holds the full file", o=o),
            "move": _f(w, "{d}/ holds the full {b}", d=ds, b=posixpath.basename(out)),
            "checksum": _f(w, "{o}.sha256 is the checksum of the full file", o=o),
        }[action],
    )
    pid = f"$(cat {pf})" if pidfile else f"$(pgrep -x {job})"
    kill_ok = owner == user or user == "root"
    waits = [
        f"tail --pid={pid} -f /dev/null",
        f"while pgrep -x {job} >/dev/null; do sleep 0.5; done",
        f"while [ -e /proc/{pid} ]; do sleep 0.5; done"
        if pidfile
        else f"while pgrep -x {job} > /dev/null; do sleep 1; done",
        f"timeout 120 sh -c 'while ps -p {pid} >/dev/null; do sleep 0.5; done'"
        if pidfile
        else f"until ! pgrep -x {job}; do sleep 1; done",
    ]
    if kill_ok:
        waits.append(f"while kill -0 {pid} 2>/dev/null; do sleep 1; done")
    if pidfile:
        waits.append(f"p={pid}; while [ -d /proc/$p ]; do sleep 0.5; done")
    ref = [w.pick((f"pgrep -a {job}", f"ps -ef | grep {job}", f"tail -n 3 {o}")), w.pick(waits)]
    ref.append(
        {
            "gzip": w.pick((f"gzip {o}", f"gzip -9 {o}", f"gzip -c {o} > {o}.gz && rm {o}")),
            "xz": w.pick((f"xz {o}", f"xz -T1 {o}", f"xz -c {o} > {o}.xz && rm {o}")),
            "move": w.pick(
                (
                    f"mkdir -p {ds} && mv {o} {ds}/",
                    f"install -D -m 644 {o} {ds}/{posixpath.basename(out)} && rm {o}",
                )
            ),
            "checksum": w.pick(
                (
                    f"sha256sum {o} > {o}.sha256",
                    f"(cd {posixpath.dirname(o) or '.'} && sha256sum {posixpath.basename(out)} > {posixpath.basename(out)}.sha256)",
                )
            ),
        }[action]
    )
    ref.append(
        w.pick((f"ls -l {posixpath.dirname(o) or '.'}", f"ls -l {ds}" if action == "move" else f"ls -l {o}*"))
    )
    content = "".join(f"{line}\n" for line in body)
    spec = {
        "out": out,
        "action": action,
        "dest": f"{dest}/{posixpath.basename(out)}",
        "sha": hashlib.sha256(content.encode()).hexdigest(),
        "content": content,
    }
    check = py_check(
        spec,
        r"""
import gzip, lzma
out, want = S["out"], S["content"].encode()
if S["action"] in ("gzip", "xz"):
    packed = out + (".gz" if S["action"] == "gzip" else ".xz")
    if os.path.exists(out):
        no(f"{out} is still there")
    try:
        data = (gzip if S["action"] == "gzip" else lzma).open(packed).read()
    except (OSError, EOFError, lzma.LZMAError):
        no(f"{packed} is missing or not compressed")
    if data != want:
        no(f"{packed} does not hold the whole output ({len(data)} of {len(want)} bytes)")
elif S["action"] == "move":
    if os.path.exists(out):
        no(f"{out} is still there")
    if md5(S["dest"]) != hashlib.md5(want).hexdigest():
        no(f"{S['dest']} is missing or incomplete")
else:
    if md5(out) != hashlib.md5(want).hexdigest():
        no(f"{out} changed or is incomplete")
    line = text(out + ".sha256").split()
    if not line or line[0] != S["sha"]:
        no("the checksum is not that of the complete output")
""",
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if not kill_ok or not pidfile else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )
