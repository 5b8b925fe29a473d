"""Forensics: tasks that must be inspected before they are acted on, in the environments real tasks come in.

Every task here starts somewhere other than home (``/app``, ``/srv/<app>``, ``/opt/<app>``, ``/var/www/<site>``,
``/root/<x>``) as ``root`` or ``operator``, and in the service's own families (a config, a log, a backup of the
service) as its service account ``app`` too, in the tree it owns (``/srv/<app>``, ``/var/lib/<app>``...); each
speaks relative to that folder ("the config in this folder"). The
file to change is never named outright: it is the one config that sets a key, the file a log line says failed, the
largest or newest or someone's file, the script another script calls, the folder a profile variable points to.
Around it sit what a hurried operator trips on: near-miss names (``config.yml.bak``, ``app.log.1``), a stale copy
of the project in the home folder (the wrong folder a ``cd ~/...`` lands in), commented-out and overridden settings.

Checks verify the final state with one generic Python checker (``_check``): the right file changed as asked, every
decoy byte-for-byte the same, answers compared after trimming.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass, field
from datetime import timedelta

from bashgym_assets.sandbox.layout import SERVICE_USER, SESSION_ACCOUNTS
from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import PROJECTS, SERVICES, World, quote

CATEGORY = "forensics"


# ---- the environment: user, working directory, decoy folder -------------------------------------------------------
@dataclass
class Env:
    user: str
    wd: str
    app: str
    setup: list[str] = field(default_factory=list)

    @property
    def home(self) -> str:
        return SESSION_ACCOUNTS[self.user].home

    @property
    def stale(self) -> str:
        """Where a stale copy of the project sits: the folder a model that ignores its workdir would use."""
        guess = f"{self.home}/{self.app}"
        return guess if guess != self.wd else f"/opt/{self.app}-old"

    def at(self, rel: str) -> str:
        return posixpath.join(self.wd, rel)

    def owner_setup(self) -> list[str]:
        """Setup lines that give the working tree to its user (files outside home are written as root)."""
        lines = [f"mkdir -p {self.wd}"]
        if self.user != "root":
            lines.append(f"chown -R {self.user}:{SESSION_ACCOUNTS[self.user].group} {self.wd}")
        return lines + self.setup


# The share of a service's own families (its config, its log, its backups) drawn as its service account.
SERVICE_SHARE = 0.3


def _env(w: World, root: bool | None = None, service: float = 0.0) -> Env:
    """The user and the working folder. ``service``: the share of draws that run as the service account ``app`` in
    the tree its service owns (the families whose work is a service's own: its config, its log, its backups)."""
    if service and w.chance(service):
        user = SERVICE_USER
    else:
        user = (
            ("root" if w.chance(0.45) else "operator") if root is None else ("root" if root else "operator")
        )
    app = w.unique(lambda: w.pick(PROJECTS + SERVICES))
    site = w.pick((app, f"{app}.example.com", f"{app}-site", "html"))
    options = ["/app", "/app", f"/srv/{app}", f"/opt/{app}", f"/var/www/{site}", f"/srv/{app}/current"]
    if user == "root":
        options += [f"/root/{app}", f"/root/{w.pick(('work', 'deploy', 'src', 'project'))}"]
    if user == SERVICE_USER:  # where a daemon keeps its state, beside where it is deployed
        options += [f"/var/lib/{app}", f"/var/lib/{app}"]
    wd = w.pick(options)
    w.note(wd)
    return Env(user=user, wd=wd, app=app)


def _here(w: World) -> str:
    return w.spin("{here|in this folder|in the current directory|in this directory}", capitalize=False)


def _rel(w: World, rel: str) -> str:
    """A path relative to the working directory as a person writes it: ``conf/x`` or ``./conf/x``."""
    return f"./{rel}" if w.chance(0.3) else rel


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _body(lines: list[str]) -> str:
    return "".join(f"{x}\n" for x in lines)


_CHECK = r"""
import gzip, hashlib, json, os, re, stat, sys
S = json.loads(SPEC)
def md5(p):
    with open(p, 'rb') as f:
        return hashlib.md5(f.read()).hexdigest()
def no(msg):
    print(msg)
    sys.exit(1)
def text(p):
    try:
        with open(p, encoding='utf-8', errors='replace') as f:
            return f.read()
    except OSError:
        no(f'cannot read {p}')
for p, d in S.get('same', {}).items():
    if not os.path.isfile(p) or md5(p) != d:
        no(f'changed or missing: {p}')
for p, m in S.get('modes', {}).items():
    if not os.path.exists(p) or stat.S_IMODE(os.stat(p).st_mode) != m:
        no(f'mode changed: {p}')
for p in S.get('gone', []):
    if os.path.lexists(p):
        no(f'still there: {p}')
for p in S.get('dirs', []):
    if not os.path.isdir(p):
        no(f'not a directory: {p}')
for p in S.get('execs', []):
    if not os.path.isfile(p) or not os.stat(p).st_mode & 0o100:
        no(f'not executable by its owner: {p}')
for p, want, idx, pat in S.get('edited', []):
    got = text(p).splitlines()
    while got and not got[-1].strip():
        got.pop()
    if len(got) != len(want):
        no(f'{p}: {len(got)} lines, want {len(want)}')
    for i, (g, x) in enumerate(zip(got, want)):
        if i == idx:
            if not re.match(pat, g):
                no(f'{p}: line {i + 1} is {g!r}')
        elif g.rstrip() != x.rstrip():
            no(f'{p}: line {i + 1} changed')
for p, data in S.get('json', []):
    try:
        got = json.loads(text(p))
    except ValueError:
        no(f'{p} is not valid JSON')
    if got != data:
        no(f'{p}: the data changed')
for p, accepted in S.get('answer', []):
    if not os.path.isfile(p):
        no(f'no {p}')
    if text(p).strip() not in accepted:
        no(f'{p}: {text(p).strip()!r}')
for p, d in S.get('gz', []):
    try:
        with gzip.open(p, 'rb') as f:
            got = hashlib.md5(f.read()).hexdigest()
    except OSError:
        no(f'{p} is not gzip')
    if got != d:
        no(f'{p}: wrong content')
for p, want, ordered in S.get('listing', []):
    if not os.path.isfile(p):
        no(f'no {p}')
    got = [x.strip() for x in text(p).splitlines() if x.strip()]
    got = [x[2:] if x.startswith('./') else x for x in got]
    if len(set(got)) != len(got):
        no('duplicate lines')
    if (got if ordered else sorted(got)) != (want if ordered else sorted(want)):
        no(f'{p}: {got}')
for d, names in S.get('only', []):
    if not os.path.isdir(d) or sorted(os.listdir(d)) != sorted(names):
        no(f'{d} holds {sorted(os.listdir(d)) if os.path.isdir(d) else None}')
for p, head, rest in S.get('script', []):
    got = text(p).splitlines()
    if not got or not re.match(head, got[0]) or [x.rstrip() for x in got[1:]] != rest:
        no(f'{p}: wrong first line or body changed')
"""


def _check(spec: dict, extra: str = "") -> str:
    """The family's check: the generic state checker on ``spec``, then ``extra`` shell lines."""
    return (
        "#!/bin/bash\n"
        f"python3 - <<'PYCHECK' || exit 1\nimport json\nSPEC = r'''{json.dumps(spec)}'''\n{_CHECK}PYCHECK\n"
        + extra
    )


def _same(files: dict[str, str], *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    return {p: _md5(t) for p, t in files.items() if p not in skip}


# ==== 1. the one config file that sets a key ========================================================================
_KEYS = (
    ("worker_count", lambda w: str(w.randint(2, 32))),
    ("max_connections", lambda w: str(w.randint(20, 500))),
    ("cache_ttl", lambda w: str(w.randint(30, 7200))),
    ("request_timeout", lambda w: str(w.randint(5, 120))),
    ("batch_size", lambda w: str(w.randint(10, 2000))),
    ("retry_limit", lambda w: str(w.randint(1, 12))),
    ("pool_size", lambda w: str(w.randint(2, 64))),
    ("queue_depth", lambda w: str(w.randint(16, 4096))),
    ("log_level", lambda w: w.pick(("debug", "info", "warning", "error"))),
    ("flush_interval", lambda w: str(w.randint(1, 300))),
)
_FILLER_KEYS = (
    "name",
    "region",
    "data_dir",
    "user_agent",
    "compression",
    "metrics_prefix",
    "timezone",
    "owner_team",
    "tls_mode",
    "shard",
    "bucket",
    "endpoint",
)


def _kv(fmt: str, key: str, value: str) -> str:
    if fmt == "yaml":
        return f"{key}: {value}"
    if fmt == "env":
        return f"{key.upper()}={value}"
    return f"{key} = {value}"


@family(
    "forensics-config-key-owner",
    CATEGORY,
    "find which of several config files sets a key and change the value there only",
)
def config_key_owner(w: World) -> Draft:
    env = _env(w, service=SERVICE_SHARE)
    key, gen = w.pick(_KEYS)
    old = gen(w)
    new = gen(w)
    while new == old:
        new = gen(w)
    fmt = w.pick(("ini", "yaml", "env"))
    folder, ext = {
        "ini": (w.pick(("conf.d", "config", "etc")), w.pick(("conf", "ini"))),
        "yaml": (w.pick(("config", "conf", "settings")), w.pick(("yml", "yaml"))),
        "env": (w.pick(("env", "config", "deploy")), "env"),
    }[fmt]
    names = w.sample(
        ("app", "db", "cache", "queue", "workers", "http", "storage", "logging", "jobs", "auth"), 4
    )
    if fmt == "ini" and w.chance(0.5):
        names = [f"{10 * (i + 1)}-{n}" for i, n in enumerate(names)]
    live = [f"{folder}/{n}.{ext}" for n in names[: w.randint(3, 4)]]
    if w.chance(0.4):  # a top-level config beside the folder
        live.append(w.pick((f"config.{ext}", f"{env.app}.{ext}", f"settings.{ext}")))
    target = w.pick(live)
    files: dict[str, str] = {}
    target_lines: list[str] = []
    idx = 0
    others = [p for p in live if p != target]
    commented = w.pick(others)
    lookalike = w.pick(others)
    for rel in live:
        fill = w.sample(_FILLER_KEYS, w.randint(3, 5))
        lines = [f"# {env.app}: {posixpath.basename(rel).split('.')[0]} settings"]
        lines += [_kv(fmt, k, w.pick((w.word(), str(w.randint(1, 900))))) for k in fill]
        if rel == commented:
            lines.insert(w.randint(1, len(lines)), "# " + _kv(fmt, key, gen(w)))
        if rel == lookalike:
            twin = w.pick((f"{key}_max", f"default_{key}", f"{key}_floor"))
            lines.insert(w.randint(1, len(lines)), _kv(fmt, twin, gen(w)))
        if rel == target:
            idx = w.randint(1, len(lines))
            lines.insert(idx, _kv(fmt, key, old))
            target_lines = lines
        files[env.at(rel)] = _body(lines)
    # near-miss names: a backup of the target that sets the key too, and a stale copy in the wrong folder
    backup = w.pick((f"{target}.bak", f"{target}.old", f"{target}~", f"{target}.dist", f"{target}.save"))
    if w.chance(0.4):
        backup = f"{w.pick(('old', 'backup', 'archive'))}/{target}"
    stale_value = gen(w)
    files[env.at(backup)] = _body([*target_lines[:idx], _kv(fmt, key, stale_value), *target_lines[idx + 1 :]])
    if w.chance(0.5):
        files[posixpath.join(env.stale, target)] = _body(target_lines)
    w.note(key, old, new, target, backup)

    shown = _kv(fmt, key, "").rstrip(" =:")
    task = w.phrase(
        "Set {shown} to {new} in the {app} config {here}. Several files make up that config; change the one that "
        "actually sets {shown} and leave every other file, backups included, exactly as it is.",
        "hey, can you bump {shown} from {old} to {new}? it's in one of the config files {here}, no idea which. "
        "please don't touch the {bakname} copy or anything else",
        "{shown} -> {new}. Live config {here} only; backups and other files stay untouched.",
        "Ticket: {app} still runs with {shown} = {old}; it must be {new}. Find the config file under the current "
        "directory that defines it and update that line, nothing more.",
        "Which of the config files {here} sets {shown}? Change its value there to {new} (only that line; the old "
        "and backup copies keep their contents).",
        "After your change the {app} configuration in this directory should give {shown} the value {new}, while "
        "every other file, the stale {bakname} copy among them, stays byte-for-byte the same.",
        "We split {app}'s settings across several files a while ago and nobody remembers where {shown} ended up. "
        "It is {old} right now and should be {new}. Track down the file {here} that sets it and edit just that "
        "setting; leave the commented-out lines and the backups alone.",
        shown=shown,
        old=old,
        new=new,
        app=env.app,
        here=_here(w),
        bakname=backup,
    )
    pat = {
        "yaml": rf"^{key}:\s*['\"]?{new}['\"]?\s*$",
        "env": rf"^(export\s+)?{key.upper()}=['\"]?{new}['\"]?\s*$",
        "ini": rf"^{key}\s*=\s*['\"]?{new}['\"]?\s*$",
    }[fmt]
    spec = {
        "edited": [[env.at(target), target_lines, idx, pat]],
        "same": _same(files, skip=(env.at(target),)),
    }
    # the reference: look for the key, then one of many ways to change that one line
    prefix = _kv(fmt, key, "").rstrip() + ("" if fmt == "env" else " ")
    line = _kv(fmt, key, new)
    p = target
    ere_prefix = prefix.replace(" ", " ?")
    ways = [
        f"sed -i 's/^{prefix}.*/{line}/' {p}",
        f"sed -i -E 's/^({ere_prefix}).*/\\1{new}/' {p}",
        f"sed -i '/^{prefix}/c {line}' {p}",
        f"sed -i '{idx + 1}s/.*/{line}/' {p}",
        f"perl -pi -e 's/^{prefix}.*/{line}/' {p}",
        f"awk '/^{prefix}/{{$0=\"{line}\"}} {{print}}' {p} > {p}.tmp && mv {p}.tmp {p}",
        f"python3 -c \"import re; p='{p}'; s=open(p).read(); "
        f"open(p, 'w').write(re.sub(r'(?m)^{prefix}.*$', '{line}', s))\"",
        f"cd {posixpath.dirname(p) or '.'} && sed -i 's/^{prefix}.*/{line}/' {posixpath.basename(p)}",
        f"sed -i -e 's/^{prefix}{old}$/{line}/' {p}",
    ]
    live_dir = posixpath.dirname(target)
    if live_dir:  # only the target starts a line with the exact prefix: near-misses are commented or longer
        ways.append(f"grep -l '^{prefix}' {live_dir}/*.{ext} | xargs sed -i 's/^{prefix}.*/{line}/'")
    look = w.pick(
        (
            f"grep -rn {quote(key if fmt != 'env' else key.upper())} .",
            f"grep -rn --include='*.{ext}' {quote(key if fmt != 'env' else key.upper())} .",
            f"grep -rln {quote(prefix.strip())} .",
            f"find . -name '*.{ext}*' | xargs grep -n {quote(key if fmt != 'env' else key.upper())}",
        )
    )
    reference = [look]
    if w.chance(0.3):
        reference.append(f"cp {p} {p}.pre-edit")  # harmless: no check forbids a new file
    reference += [w.pick(ways), f"grep -n {quote(shown)} {p}"]
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 2. the file a log line says failed ============================================================================
def _log_stamp(w: World, n: int) -> list[str]:
    t = w.date()
    out = []
    for _ in range(n):
        t += timedelta(seconds=w.randint(2, 400))
        out.append(f"{t:%Y-%m-%dT%H:%M:%S}")
    return out


def _json_text(data: dict, trailing_comma: bool) -> str:
    body = json.dumps(data, indent=2)
    if trailing_comma:  # the last top-level member keeps a comma: what a hand edit leaves behind
        head, _, tail = body.rpartition("\n}")
        body = head + ",\n}" + tail
    return body + "\n"


@family(
    "forensics-log-failed-file",
    CATEGORY,
    "read which file the latest failure in a log names and repair that file (JSON syntax or exec bit)",
)
def log_failed_file(w: World) -> Draft:
    env = _env(w, service=SERVICE_SHARE)
    svc = w.pick(SERVICES)
    kind = w.pick(("json", "json", "exec"))
    log = w.pick((f"logs/{svc}.log", "app.log", f"var/log/{svc}.log", "log/app.log"))
    folder = {
        "json": w.pick(("conf.d", "pipelines", "jobs", "plugins", "feeds")),
        "exec": w.pick(("hooks", "bin", "scripts", "tasks")),
    }[kind]
    names = w.sample(
        (
            "nightly",
            "import",
            "export",
            "cleanup",
            "sync",
            "reindex",
            "billing",
            "digest",
            "backfill",
            "audit",
        ),
        4,
    )
    files: dict[str, str] = {}
    modes: dict[str, int] = {}
    setup: list[str] = []
    target, earlier = names[0], names[1]
    ext = "json" if kind == "json" else "sh"
    data_of: dict[str, dict] = {}
    for n in names:
        rel = f"{folder}/{n}.{ext}"
        if kind == "json":
            data = {
                "name": n,
                "enabled": w.chance(0.8),
                "schedule": w.pick(("hourly", "daily", "@every 15m", "weekly")),
                "source": f"{w.pick(('s3', 'sftp', 'db'))}://{w.word()}/{n}",
                "retries": w.randint(0, 5),
            }
            data_of[rel] = data
            files[env.at(rel)] = _json_text(data, trailing_comma=n == target)
        else:
            files[env.at(rel)] = _body(
                ["#!/bin/sh", f'echo "{n}: started"', f"sleep 0 # {w.word()}", "exit 0"]
            )
            modes[env.at(rel)] = 0o644 if n == target else 0o755
    # near-miss names: the same file under a .bak/.dist name, and for hooks a sample that must stay inert
    near = f"{folder}/{target}.{ext}{w.pick(('.bak', '.dist', '.orig', '.sample'))}"
    if kind == "json":
        files[env.at(near)] = _json_text({**data_of[f"{folder}/{target}.{ext}"], "retries": 9}, False)
    else:
        files[env.at(near)] = _body(["#!/bin/sh", f'echo "{target}: example"', "exit 0"])
        modes[env.at(near)] = 0o644
    # the log: routine lines, then the failure; the rotated log's failure names another file (fixed since)
    stamps = _log_stamp(w, 14)
    routine = ("heartbeat ok", "config reloaded", "queue drained", "worker started", "job finished")
    lines = [f"{s} INFO {svc}: {w.pick(routine)}" for s in stamps[:-3]]
    path_in_log = env.at(f"{folder}/{target}.{ext}") if w.chance(0.5) else f"{folder}/{target}.{ext}"
    if kind == "json":
        fail = (
            f"ERROR loader: failed to parse {path_in_log}: Expecting property name enclosed in double quotes"
        )
        old_fail = f"ERROR loader: failed to parse {folder}/{earlier}.json: Expecting ',' delimiter"
    else:
        fail = f"ERROR runner: {path_in_log}: Permission denied (exit 126)"
        old_fail = f"ERROR runner: {folder}/{earlier}.sh: Permission denied (exit 126)"
    lines += [f"{stamps[-3]} {fail}", f"{stamps[-2]} WARN {svc}: giving up", f"{stamps[-1]} INFO {svc}: idle"]
    old_stamps = _log_stamp(w, 6)
    old_lines = [f"{s} INFO {svc}: {w.pick(routine)}" for s in old_stamps[:-1]]
    old_lines.insert(w.randint(1, len(old_lines)), f"{old_stamps[-1]} {old_fail}")
    files[env.at(log)] = _body(lines)
    files[env.at(log + ".1")] = _body(old_lines)
    if w.chance(0.5):
        files[posixpath.join(env.stale, log)] = _body(lines)
    setup = [f"chmod {oct(m)[2:]} {quote(p)}" for p, m in modes.items()]
    env.setup = setup
    tgt = f"{folder}/{target}.{ext}"
    w.note(svc, target, earlier, log, near, folder)
    what = "{the job definition|the file}" if kind == "json" else "{the hook|the script}"
    task = w.phrase(
        "{svc} keeps failing. Its log {here} ({log}) says which "
        + what
        + " is broken; fix that file so the next "
        "run succeeds, and change nothing else.",
        "Ticket: the last {svc} run failed. Read {log} in the current directory, find the file the failure names "
        "and repair it. Rotated logs describe older, already fixed problems.",
        "can you look at {log}? something {svc} loads is broken. fix whatever the latest error points at, but "
        "leave the other files (and the {nearname} copy) alone",
        "Why did {svc} fail last time? The answer is in {log}. Repair the file it complains about{keep}.",
        "Make the next {svc} run go through: the error at the end of {log} names the culprit. Fix it in place; "
        "every other file in this folder stays as it is.",
        "Fix the file {svc}'s latest error complains about (see {log}, not {log}.1).",
        "{svc} is stuck since its last run. The log lives at {log} relative to this folder; the most recent "
        "ERROR line names a file {here} that needs repairing. Repair it without altering its content beyond the "
        "fix, and do not touch the backups or the rotated log.",
        svc=svc,
        log=_rel(w, log),
        here=_here(w),
        nearname=near,
        keep=w.pick((" without touching anything else", "; its data must stay the same", "")),
    )
    spec: dict = {"same": _same(files, skip=(env.at(tgt),)), "modes": {p: m for p, m in modes.items()}}
    if kind == "json":
        spec["json"] = [[env.at(tgt), data_of[tgt]]]
        spec["modes"].pop(env.at(tgt), None)
    else:
        spec["modes"].pop(env.at(tgt))
        spec["execs"] = [env.at(tgt)]
        spec["same"][env.at(tgt)] = _md5(files[env.at(tgt)])
    look = w.pick(
        (
            f"tail -n 5 {log}",
            f"grep ERROR {log} | tail -n 1",
            f"grep -n -i error {log}",
            f"tac {log} | grep -m1 ERROR",
        )
    )
    reference = [look]
    if kind == "json":
        last = files[env.at(tgt)].splitlines()
        comma_line = next(i for i in range(len(last) - 1, -1, -1) if last[i].endswith(","))
        fixed = _json_text(data_of[tgt], False).splitlines()
        reference.append(w.pick((f"python3 -m json.tool {tgt}", f"jq . {tgt}", f"cat -A {tgt} | tail -n 4")))
        reference.append(
            w.pick(
                (
                    f"sed -i '{comma_line + 1}s/,$//' {tgt}",
                    f"sed -i -z 's/,\\n}}/\\n}}/' {tgt}",
                    f"perl -0pi -e 's/,(\\s*)\\}}/$1}}/' {tgt}",
                    f"python3 -c \"import re; p='{tgt}'; s=open(p).read(); "
                    f"open(p, 'w').write(re.sub(r',(\\s*[}}\\]])', r'\\1', s))\"",
                    f"awk 'NR=={comma_line + 1} {{sub(/,$/, \"\")}} {{print}}' {tgt} > {tgt}.new && mv {tgt}.new {tgt}",
                    f"cat > {tgt} <<'EOF'\n" + "\n".join(fixed) + "\nEOF",
                    f"printf '%s\\n' {' '.join(quote(x) for x in fixed)} > {tgt}",
                    f"cd {folder} && sed -i '{comma_line + 1}s/,$//' {target}.json",
                )
            )
        )
        reference.append(w.pick((f"jq . {tgt}", f"python3 -m json.tool {tgt} > /dev/null && echo valid")))
    else:
        reference.append(w.pick((f"ls -l {folder}", f"stat -c '%A %n' {folder}/*")))
        reference.append(
            w.pick(
                (
                    f"chmod +x {tgt}",
                    f"chmod 755 {tgt}",
                    f"cd {folder} && chmod u+x {target}.sh",
                    f"find {folder} -name {target}.sh -exec chmod +x {{}} +",
                    f"chmod --reference={folder}/{earlier}.sh {tgt}",
                    f"chmod -v u+x {tgt}",
                )
            )
        )
        reference.append(w.pick((f"ls -l {tgt}", f"./{tgt}")))
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 3. the largest / newest / oldest / someone's file, then act on it ============================================
def _stamp(w: World, day: int) -> str:
    return f"2024-{1 + day // 28:02d}-{1 + day % 28:02d} {w.randint(0, 23):02d}:{w.randint(0, 59):02d}"


@family(
    "forensics-pick-by-attribute",
    CATEGORY,
    "find the largest, newest, oldest or a given user's file among look-alikes and move, delete, compress or copy it",
)
def pick_by_attribute(w: World) -> Draft:
    env = _env(w)
    folder = w.pick(("exports", "uploads", "dumps", "var/spool", "data/incoming", "reports", "tmp/out"))
    ext = w.pick(("csv", "json", "log", "sql", "dat", "xml"))
    crit = w.pick(("largest", "largest", "newest", "oldest", "owner"))
    action = w.pick(("quarantine", "delete", "gzip", "copy"))
    n = w.randint(4, 7)
    stems = [
        w.unique(lambda: f"{w.pick(('batch', 'run', 'part', 'export', 'chunk'))}-{w.randint(1, 99):02d}")
        for _ in range(n)
    ]
    sizes = w.sample(range(3, 60), n)
    days = w.sample(range(10, 300), n)
    users = [w.username() for _ in range(3)] if crit == "owner" else []
    owners = [users[0]] + [w.pick(users[1:]) for _ in range(n - 1)] if users else []
    files: dict[str, str] = {}
    setup: list[str] = [f"useradd -M -s /usr/sbin/nologin {u}" for u in users]
    rels = [f"{folder}/{s}.{ext}" for s in stems]
    for i, rel in enumerate(rels):
        files[env.at(rel)] = _body([f"{rel} row {j} {w.token(6)}" for j in range(sizes[i])])
    if crit == "largest":
        pick = max(range(n), key=lambda i: sizes[i])
    elif crit == "newest":
        pick = max(range(n), key=lambda i: days[i])
    elif crit == "oldest":
        pick = min(range(n), key=lambda i: days[i])
    else:
        pick = 0
    # decoys: a bigger and newer file of another kind, and a half-written one
    decoy = f"{folder}/{w.pick(stems)}.{ext}{w.pick(('.gz', '.tmp', '.partial', '.bak'))}"
    files[env.at(decoy)] = _body([f"decoy {j} {w.token(8)}" for j in range(max(sizes) + 5)])
    setup_times = [f"touch -d {quote(_stamp(w, days[i]))} {env.at(rel)}" for i, rel in enumerate(rels)]
    setup_times.append(f"touch -d {quote(_stamp(w, max(days) + 3))} {env.at(decoy)}")
    if crit == "owner":
        setup_times += [f"chown {owners[i]} {env.at(rel)}" for i, rel in enumerate(rels)]
    if w.chance(0.5):
        files[posixpath.join(env.stale, rels[pick])] = files[env.at(rels[pick])]
    env.setup = setup + setup_times
    target = rels[pick]
    base = posixpath.basename(target)
    w.note(*users, folder, ext, target)
    what = {
        "largest": f"the largest .{ext} file",
        "newest": f"the most recently modified .{ext} file",
        "oldest": f"the .{ext} file that was modified longest ago",
        "owner": f"the .{ext} file owned by {users[0]}" if users else "",
    }[crit]
    dest = w.pick(("quarantine", "review", "hold", "suspect"))
    act = {
        "quarantine": w.spin("move it into a {dest}/ folder {here} (create it)", dest=dest, here=_here(w)),
        "delete": w.spin("delete it"),
        "gzip": w.spin("compress it with gzip in place (leaving {name}.gz)", name=base),
        "copy": w.spin("copy it into a {dest}/ folder {here}; the original stays", dest=dest, here=_here(w)),
    }[action]
    act = act[:1].lower() + act[1:]
    task = w.phrase(
        "In {folder} {here}, find {what} and {act}. Leave every other file where it is.",
        "Ticket: {what} in {folder} looks wrong. {Act}; the rest of {folder}, the .{ext}.* leftovers included, "
        "stays untouched.",
        "there's a bunch of .{ext} files in {folder} (relative to this folder). can you take {what} and {act}?",
        "Which file is {what} under {folder}? Once you know, {act}.",
        "{folder}: {what} -> {act}.",
        "Only {what} in {folder} should be affected: {act}. Files of other kinds and the other .{ext} files must "
        "not change.",
        "We need to deal with one file in the {folder} directory of this project: {what}. Look at the candidates "
        "first (names can mislead), then {act}.",
        folder=_rel(w, folder),
        here=_here(w),
        what=what,
        act=act,
        Act=act[:1].upper() + act[1:],
        ext=ext,
    )
    others = {env.at(r): _md5(files[env.at(r)]) for r in rels if r != target}
    others[env.at(decoy)] = _md5(files[env.at(decoy)])
    spec: dict = {"same": others}
    tgt_abs, tgt_md5 = env.at(target), _md5(files[env.at(target)])
    if action == "quarantine":
        spec["gone"] = [tgt_abs]
        spec["same"][env.at(f"{dest}/{base}")] = tgt_md5
        spec["only"] = [[env.at(dest), [base]]]
    elif action == "delete":
        spec["gone"] = [tgt_abs]
    elif action == "gzip":
        spec["gone"] = [tgt_abs]
        spec["gz"] = [[tgt_abs + ".gz", tgt_md5]]
    else:
        spec["same"][tgt_abs] = tgt_md5
        spec["same"][env.at(f"{dest}/{base}")] = tgt_md5
        spec["only"] = [[env.at(dest), [base]]]
    glob = f"{folder}/*.{ext}"
    sort_flag = {"largest": "-S", "newest": "-t", "oldest": "-tr", "owner": "-l"}[crit]
    look = {
        "largest": (f"ls -lS {folder}", f"du -b {glob} | sort -n", f"wc -c {glob}"),
        "newest": (f"ls -lt {folder}", f"stat -c '%y %n' {glob} | sort"),
        "oldest": (f"ls -ltr {folder}", f"stat -c '%Y %n' {glob} | sort -n"),
        "owner": (f"ls -l {folder}", f"stat -c '%U %n' {glob}"),
    }[crit]
    reference = [w.pick(look)]
    by = (
        f"$(find {folder} -maxdepth 1 -name '*.{ext}' -user {users[0]})"
        if crit == "owner"
        else f"$(ls {sort_flag} {glob} | head -n 1)"
    )
    literal = target
    src = w.pick((literal, literal, f'"{by}"'))
    if action in ("quarantine", "copy"):
        verb = "mv" if action == "quarantine" else "cp"
        ways = [
            [f"mkdir -p {dest}", f"{verb} {src} {dest}/"],
            [f"mkdir {dest} && {verb} {src} {dest}/"],
            [f"mkdir -p {dest}", f"{verb} -v {src} {dest}/"],
            [f"install -d {dest}", f"{verb} {src} {dest}/"],
        ]
        if action == "quarantine":
            ways += [
                [f"mkdir -p {dest}", f"mv -t {dest} {src}"],
                [f"mkdir -p {dest} && cp -p {src} {dest}/ && rm {src}"],
            ]
        else:
            ways += [[f"mkdir -p {dest}", f"cp -p {src} {dest}/"], [f"install -D -m 644 {src} {dest}/{base}"]]
        if crit == "owner":
            verb_t = "mv -t" if action == "quarantine" else "cp -t"
            ways.append(
                [
                    f"mkdir -p {dest}",
                    f"find {folder} -maxdepth 1 -name '*.{ext}' -user {users[0]} -exec {verb_t} {dest} {{}} +",
                ]
            )
    elif action == "delete":
        ways = [[f"rm {src}"], [f"rm -f {src}"], [f"rm -v {src}"], [f"unlink {literal}"]]
        if crit == "owner":
            ways.append([f"find {folder} -maxdepth 1 -name '*.{ext}' -user {users[0]} -delete"])
    else:
        ways = [
            [f"gzip {src}"],
            [f"gzip -9 {src}"],
            [f"gzip -v {src}"],
            [f"gzip -c {literal} > {literal}.gz && rm {literal}"],
        ]
        if crit == "owner":
            ways.append([f"find {folder} -maxdepth 1 -name '*.{ext}' -user {users[0]} -exec gzip {{}} +"])
    reference += w.pick(ways)
    reference.append(f"ls -l {folder}" + (f" {dest}" if action in ("quarantine", "copy") else ""))
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 4. the script another script calls ============================================================================
_BAD_SHEBANGS = {
    "sh": ("#!/bin/bsh", "#!/usr/local/bin/bash", "#!/bin/bash5", "#!/usr/bin/env bsah", "#! /opt/bin/sh"),
    "py": ("#!/usr/bin/python", "#!/usr/bin/env python", "#!/usr/bin/pyhton3", "#!/usr/local/bin/python3.8"),
}
_GOOD_SHEBANGS = {
    "sh": ("#!/bin/bash", "#!/usr/bin/env bash", "#!/bin/sh"),
    "py": ("#!/usr/bin/env python3", "#!/usr/bin/python3"),
}


@family(
    "forensics-called-script-fix",
    CATEGORY,
    "follow a script to the helper it calls and fix that helper's shebang and/or execute permission",
)
def called_script_fix(w: World) -> Draft:
    env = _env(w)
    main = w.pick(("run.sh", "deploy.sh", "start.sh", "bin/start", "build.sh", "release.sh"))
    lang = w.pick(("sh", "sh", "py"))
    folder = w.pick(("scripts", "lib", "tools", "bin", "ops"))
    if folder == posixpath.dirname(main):
        folder = "scripts"
    names = w.sample(
        ("migrate", "warm_cache", "render", "notify", "prune", "verify", "seed", "package", "fetch"), 3
    )
    helper, other = names[0], names[1]
    suf = ".py" if lang == "py" else w.pick((".sh", ".sh", ""))
    hrel = f"{folder}/{helper}{suf}"
    orel = f"{folder}/{other}{suf}"
    problem = w.pick(("shebang", "mode", "both"))
    token = w.token(6)
    if lang == "py":
        body = ["import sys", "", f"print('{helper} {token} ok')", "sys.exit(0)"]
    else:
        body = [f'echo "{helper} {token} ok"', "exit 0"]
    bad = w.pick(_BAD_SHEBANGS[lang]) if problem != "mode" else _GOOD_SHEBANGS[lang][0]
    files: dict[str, str] = {}
    files[env.at(hrel)] = _body([bad, *body])
    other_body = [f"print('{other} ok')"] if lang == "py" else [f'echo "{other} ok"']
    files[env.at(orel)] = _body([_GOOD_SHEBANGS[lang][0], *other_body])
    depth = main.count("/")
    up = "/.." * depth
    call = w.pick(
        (
            f"./{hrel}",
            f'"$(dirname "$0"){up}/{hrel}"',
            f'HELPER="$(cd "$(dirname "$0"){up}" && pwd)/{hrel}"\n"$HELPER"',
        )
    )
    main_lines = ["#!/bin/bash", "set -e", 'echo "starting"', *call.split("\n"), 'echo "done"']
    if call.startswith("./") and depth:
        main_lines.insert(2, f'cd "$(dirname "$0"){up}"')
    files[env.at(main)] = _body(main_lines)
    near = w.pick((f"{hrel}.bak", f"{folder}/old/{helper}{suf}", f"{hrel}.orig", f"{hrel}.disabled"))
    files[env.at(near)] = _body([bad, *body])
    modes = {env.at(main): 0o755, env.at(orel): 0o755, env.at(near): 0o644}
    hmode = 0o644 if problem in ("mode", "both") else 0o755
    env.setup = [f"chmod {oct(m)[2:]} {quote(p)}" for p, m in modes.items()] + [
        f"chmod {oct(hmode)[2:]} {env.at(hrel)}"
    ]
    if w.chance(0.5):
        files[posixpath.join(env.stale, hrel)] = files[env.at(hrel)]
    w.note(main, hrel, near, token, helper, other)
    task = w.phrase(
        "./{main} fails {here}. Find the script it calls and fix what keeps that script from running; do not "
        "edit {main} itself.",
        "Ticket: running {main} from the project folder (the current directory) errors out. Follow it to the "
        "helper it invokes and repair the helper so {main} completes.",
        "{main} is broken, can you take a look? pretty sure it's not {main} but something it runs. fix that one "
        "and leave the backups in {folder}/ as they are",
        "Why does {main} not finish? Make it run to the end by fixing the helper it calls (its first line and "
        "its permissions are the usual suspects). Other scripts stay untouched.",
        "Goal: `./{main}` {here} runs to completion and prints done. Fix only the script it calls.",
        "{main} calls another script {here}, and that script cannot be executed as it is. Repair it: a working "
        "interpreter line, executable by its owner. Its body, {main} and the copies of it stay the same.",
        "fix the helper behind {main} (this dir). only that file.",
        main=main,
        here=_here(w),
        folder=folder,
    )
    good = r"^#!\s*(/usr)?/bin/(ba)?sh\s*$|^#!\s*/usr/bin/env\s+(ba)?sh\s*$"
    if lang == "py":
        good = r"^#!\s*/usr/bin/python3(\.\d+)?\s*$|^#!\s*/usr/bin/env\s+python3(\.\d+)?\s*$"
    spec = {
        "same": _same(files, skip=(env.at(hrel),)),
        "modes": modes,
        "execs": [env.at(hrel)],
        "script": [[env.at(hrel), good, body]],
    }
    run_as = "" if env.user == "root" else f"runuser -u {env.user} -- "
    extra = (
        f"cd {quote(env.wd)} || exit 1\n"
        f"out=$({run_as}timeout 10 ./{main} 2>&1) || exit 1\n"
        f"printf '%s\\n' \"$out\" | grep -qx {quote(f'{helper} {token} ok')} || exit 1\n"
        f"printf '%s\\n' \"$out\" | tail -n 1 | grep -qx done || exit 1\n"
    )
    good_line = w.pick(_GOOD_SHEBANGS[lang])
    reference = [w.pick((f"cat {main}", f"grep -n {quote(helper)} {main}", f"tail -n 3 {main}"))]
    reference.append(
        w.pick((f"head -n 1 {hrel}", f"ls -l {folder}", f"file {hrel}", f"stat -c '%A %n' {hrel}"))
    )
    fixes: list[list[str]] = []
    esc = good_line.replace("/", "\\/")
    if problem in ("shebang", "both"):
        fixes = [
            [f"sed -i '1s|.*|{good_line}|' {hrel}"],
            [f"sed -i '1c {good_line}' {hrel}"],
            [f"sed -i -e '1s/^#!.*/{esc}/' {hrel}"],
            [f"perl -pi -e 's|^#!.*|{good_line}| if $. == 1' {hrel}"],
            [
                f"{{ echo '{good_line}'; tail -n +2 {hrel}; }} > /tmp/{helper}.new && cat /tmp/{helper}.new > {hrel}"
            ],
            [
                f"python3 -c \"p='{hrel}'; s=open(p).read().split('\\n', 1); "
                f"open(p, 'w').write('{good_line}\\n' + s[1])\""
            ],
        ]
    if problem in ("mode", "both"):
        chmods = [
            f"chmod +x {hrel}",
            f"chmod u+x {hrel}",
            f"cd {folder} && chmod 755 {posixpath.basename(hrel)}",
            f"find {folder} -maxdepth 1 -name {posixpath.basename(hrel)} -exec chmod +x {{}} \\;",
            f"chmod --reference={main} {hrel}",
        ]
        fixes = [[*f, w.pick(chmods)] for f in fixes] if fixes else [[c] for c in chmods]
    reference += w.pick(fixes)
    reference.append(w.pick((f"head -n 1 {hrel}", f"ls -l {hrel}", f"stat -c '%A %n' {hrel}")))
    return Draft(
        task=task,
        check=_check(spec, extra),
        reference=reference,
        difficulty=3 if problem != "both" else 4,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 5. audit a tree for a string, report the matching paths relative to here =====================================
_NEEDLES = (
    # (needle, near misses that must not be reported: a regex '.' matches them, or they differ by one character)
    lambda w, app: ("db-old.internal", ["db-old-internal", "db-oldXinternal", "db_old.internal"]),
    lambda w, app: (f"{app}.svc.cluster.local", [f"{app}-svc-cluster-local", f"{app}.svc.cluster.lokal"]),
    lambda w, app: ("legacy_sign(", ["legacy_signer(", "legacy_sign2(", "legacy_sign ("]),
    lambda w, app: ("sk_live_", ["sk_test_", "sk-live-", "sk.live."]),
    lambda w, app: ("http://10.4.0.9", ["https://10.4.0.9", "http://10.4.0.19", "http://10x4x0x9"]),
    lambda w, app: ("TODO(security)", ["TODO(secure)", "TODO security", "todo(security)"]),
)


@family(
    "forensics-audit-report",
    CATEGORY,
    "find every file in a tree that contains a literal string and report exactly those paths, relative to here",
)
def audit_report(w: World) -> Draft:
    env = _env(w)
    needle, misses = w.pick(_NEEDLES)(w, env.app)
    dirs = w.sample(("src", "lib", "config", "docs", "scripts", "templates", "deploy", "tests"), 4)
    exclude = w.pick(("", "", "vendor", "node_modules", "bak"))
    files: dict[str, str] = {}
    hits: list[str] = []
    exts = ("py", "sh", "yml", "conf", "md", "txt", "js")
    rels = []
    for d in dirs:
        for _ in range(w.randint(2, 4)):
            sub = w.pick(("", "", f"{w.pick(('core', 'util', 'old', 'v2', 'net'))}/"))
            rels.append(w.unique(lambda d=d, sub=sub: f"{d}/{sub}{w.word()}.{w.pick(exts)}"))
    n_hits = w.randint(2, max(2, len(rels) // 3))
    hit_set = set(w.sample(rels, n_hits))
    miss_set = set(w.sample([r for r in rels if r not in hit_set], min(3, len(rels) - n_hits)))
    for rel in rels:
        lines = w.lines(w.randint(3, 8))
        if rel in hit_set:
            lines.insert(w.randint(0, len(lines)), f"{w.pick(('url', 'call', 'key', 'note'))}: {needle}")
            hits.append(rel)
        if rel in miss_set:
            lines.insert(w.randint(0, len(lines)), f"{w.pick(('see', 'ref', 'use'))} {w.pick(misses)}")
        files[env.at(rel)] = _body(lines)
    if exclude in ("vendor", "node_modules"):
        for _ in range(w.randint(1, 2)):
            files[env.at(f"{exclude}/{w.word()}/{w.word()}.js")] = _body([f"const u = '{needle}';"])
        skip_en = w.spin("{ignore|skip} the {x}/ folder (third-party code)", x=exclude)
    elif exclude == "bak":
        files[env.at(f"{w.pick(dirs)}/{w.word()}.conf.bak")] = _body([f"old: {needle}"])
        skip_en = w.spin("{ignore|skip} backup files (*.bak)")
    else:
        skip_en = ""
    hidden = w.chance(0.3)
    if hidden:  # a dotfile counts like any other file
        rel = w.pick((".env", ".gitlab-ci.yml", "config/.secrets"))
        if env.at(rel) not in files:
            files[env.at(rel)] = _body([f"X={needle}"])
            hits.append(rel)
    if w.chance(0.5):
        files[posixpath.join(env.stale, "src", "stale.py")] = _body([needle])
    report = w.pick(("report.txt", "audit.txt", "matches.txt", "findings.txt", "answer.txt"))
    ordered = w.chance(0.4)
    w.note(needle, *misses, exclude, report)
    fmt = w.spin(
        "one path per line, relative to the current directory{order}",
        order=" (sorted)" if ordered else "",
        capitalize=False,
    )
    task = w.phrase(
        "Audit this project (the current directory) for the string {needle}: write every file that contains it "
        "to {report}, {fmt}.{skip}",
        "Security ticket: we must know which files {here} still mention {needle}. List them in {report} {here}, "
        "{fmt}. Similar-looking strings do not count.{skip}",
        "which files under this folder contain {needle} (exactly that text)? put the list in {report}: {fmt}{skip}",
        "grep the tree {here} for {needle} -> {report} ({fmt}).{skip}",
        "Before we rotate it, find every place {needle} appears in this checkout and record the files in "
        "{report}. The list must hold exactly the matching files ({fmt}).{skip}",
        "{report} should end up listing precisely the files below the working directory that contain the literal "
        "text {needle}, {fmt}; near misses such as {miss} are not matches.{skip}",
        needle=f"`{needle}`" if w.chance(0.5) else quote(needle),
        report=report,
        fmt=fmt,
        here=_here(w),
        miss=f"`{misses[0]}`",
        skip=(" " + skip_en[:1].upper() + skip_en[1:] + ".") if skip_en else "",
    )
    spec = {"listing": [[env.at(report), sorted(hits), ordered]], "same": _same(files)}
    fixed = quote(needle)
    excl = {
        "vendor": "--exclude-dir=vendor",
        "node_modules": "--exclude-dir=node_modules",
        "bak": "--exclude='*.bak'",
    }.get(exclude, "")
    fexcl = {
        "vendor": "-not -path './vendor/*'",
        "node_modules": "-not -path './node_modules/*'",
        "bak": "-not -name '*.bak'",
    }.get(exclude, "")
    strip = w.pick(("sed 's|^\\./||'", "cut -c3-", "sed -e 's#^\\./##'"))
    srt = " | sort" if ordered or w.chance(0.3) else ""
    ways = [
        f"grep -rlF {excl} {fixed} . --exclude={report} | {strip}{srt} > {report}",
        f"grep -rl --fixed-strings {excl} -e {fixed} . | grep -v '^./{report}$' | {strip}{srt} > {report}",
        f"find . -type f {fexcl} ! -name {report} -exec grep -lF {fixed} {{}} + | {strip}{srt} > {report}",
        f"find . -type f {fexcl} ! -name {report} -print0 | xargs -0 grep -lF {fixed} | {strip}{srt} > {report}",
        f"grep -RlF {excl} {fixed} . | {strip} | grep -vx {report}{srt} > /tmp/hits && mv /tmp/hits {report}",
        f"grep -rlF {excl} {fixed} . | {strip} | sort -u > /tmp/{report} && cp /tmp/{report} {report}",
        f"grep -rlF {excl} {fixed} --exclude={report} . | sed 's|^\\./||'{srt} | tee {report}",
    ]
    if not exclude:
        ways.append(f"grep -rlF {fixed} -- * .[!.]* 2>/dev/null{srt} > {report}")
    reference = [
        w.pick(
            (
                f"grep -rnF {fixed} .",
                f"grep -rc {fixed} . | grep -v ':0$'",
                "ls -la",
                "find . -type f | head -n 30",
            )
        ),
        " ".join(w.pick(ways).split()),
        f"cat {report}",
    ]
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3 if exclude or hidden else 2,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 6. who owns it: a question whose subject must be found in the config first ====================================
@family(
    "forensics-answer-owner",
    CATEGORY,
    "find the path a config names, then answer which user, group or mode it has into a file here",
)
def answer_owner(w: World) -> Draft:
    env = _env(w)
    users = [w.username() for _ in range(3)]
    group = w.unique(lambda: f"{w.pick(('www', 'svc', 'app', 'data'))}{w.pick(('', '-rw', 'ops'))}")
    key = w.pick(("upload_dir", "spool_dir", "cache_dir", "data_dir", "archive_dir", "state_dir"))
    base = w.pick((f"/var/lib/{env.app}", f"/srv/{env.app}-data", f"/data/{env.app}", f"{env.wd}/var"))
    real = f"{base}/{key.split('_')[0]}{w.pick(('', 's', '-v2', '.d'))}"
    stale = f"{base}/{key.split('_')[0]}-old"
    fmt = w.pick(("ini", "yaml", "env", "json"))
    conf = {"ini": "app.ini", "yaml": "config.yml", "env": ".env", "json": "settings.json"}[fmt]
    if w.chance(0.4):
        conf = f"config/{conf}"
    fill = {k: w.pick((w.word(), str(w.randint(1, 99)))) for k in w.sample(_FILLER_KEYS, 3)}
    values = {**fill, key: real}
    stale_values = {**fill, key: stale}

    def render(vals: dict[str, str]) -> str:
        if fmt == "json":
            return json.dumps(vals, indent=2) + "\n"
        return _body([_kv(fmt, k, v) for k, v in vals.items()])

    files = {
        env.at(conf): render(values),
        env.at(conf + w.pick((".bak", ".old", ".example", "~"))): render(stale_values),
    }
    question = w.pick(("user", "user", "group", "mode"))
    who, grp_owner = users[0], group
    mode = w.pick((0o750, 0o2770, 0o755, 0o700, 0o775, 0o710))
    setup = [f"useradd -M -s /usr/sbin/nologin {u}" for u in users] + [f"groupadd {group}"]
    setup += [
        f"mkdir -p {real} {stale}",
        f"chown {who}:{group} {real}",
        f"chmod {oct(mode)[2:]} {real}",
        f"chown {users[1]}:{users[1]} {stale}",
        f"chmod 711 {stale}",
    ]
    env.setup = setup
    answer = w.pick(("answer.txt", "answer.txt", "answer.txt", "owner.txt", "result.txt"))
    want = {"user": [who], "group": [grp_owner], "mode": [oct(mode)[2:], "0" + oct(mode)[2:]]}[question]
    w.note(key, group, *users, real, stale, answer)
    q_en = {
        "user": "which user owns",
        "group": "which group owns",
        "mode": "what the permission bits (octal, like 750) are of",
    }[question]
    q_short = {"user": "owner (user)", "group": "owning group", "mode": "octal permission mode"}[question]
    task = w.phrase(
        "The {app} config {here} names a {what} directory. Find out {q} that directory and write just the answer "
        "to {answer} in the current directory.",
        "Question for the audit: {q} the folder that {app} uses as its {key}? Check its config (the live one, "
        "not the backup) and put the bare answer in {answer} {here}.",
        "what's the {short} of the directory configured as {key} for the app in this folder? answer in "
        "{answer}, nothing else in the file",
        "{answer} {here} should contain one line: the {short} of the {what} folder this project is configured "
        "to use.",
        "Ticket: permissions review for {app}. Look up {key} in its configuration {here}, inspect that path, and "
        "record {q} it in {answer} (just the value).",
        "Find the {key} of the {app} service {here}, then tell me {q} it -- write it to {answer}.",
        app=env.app,
        here=_here(w),
        what=key.split("_")[0],
        q=q_en,
        key=key,
        answer=answer,
        short=q_short,
    )
    spec = {"answer": [[env.at(answer), want]], "same": _same(files)}
    look = w.pick(
        (
            f"cat {conf}",
            f"grep {key} {conf}" if fmt != "env" else f"grep -i {key} {conf}",
            "ls -la",
            f"grep -rn {key} .",
        )
    )
    fmt_char = {"user": "%U", "group": "%G", "mode": "%a"}[question]
    field = {"user": 3, "group": 4}.get(question, 0)
    expr = (
        f"$(jq -r .{key} {conf})"
        if fmt == "json"
        else f"$(sed -n 's/^{_kv(fmt, key, '').strip()} *//p' {conf})"
    )
    src = w.pick((real, real, f'"{expr}"'))
    ways = [
        f"stat -c {fmt_char} {src} > {answer}",
        f"stat --format={fmt_char} {src} > {answer}",
        f"find {src} -maxdepth 0 -printf '{ {'user': '%u', 'group': '%g', 'mode': '%m'}[question] }\\n' > {answer}",
        f"echo {want[0]} > {answer}",
        f"printf '%s\\n' {want[0]} > {answer}",
        f"stat -c {fmt_char} {src} | tee {answer}",
        f"stat -L -c {fmt_char} {src} > {answer}",
        f"cat > {answer} <<'EOF'\n{want[0]}\nEOF",
        f"stat -c {fmt_char} {src} > /tmp/answer && mv /tmp/answer {answer}",
        f"tee {answer} <<< {want[0]}",
    ]
    if field:
        ways.append(f"ls -ld {src} | awk '{{print ${field}}}' > {answer}")
        mod = "pwd" if question == "user" else "grp"
        fn = (
            "getpwuid(os.stat(p).st_uid).pw_name"
            if question == "user"
            else "getgrgid(os.stat(p).st_gid).gr_name"
        )
        ways.append(f"python3 -c \"import os, {mod}; p='{real}'; print({mod}.{fn})\" > {answer}")
    else:
        ways.append(
            f"python3 -c \"import os; print(oct(os.stat('{real}').st_mode & 0o7777)[2:])\" > {answer}"
        )
    reference = [look, w.pick((f"ls -ld {real}", f"stat {real}")), w.pick(ways), f"cat {answer}"]
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=2,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 7. which value is configured: follow the unit to its environment file ========================================
@family(
    "forensics-answer-config-value",
    CATEGORY,
    "follow a service unit to the environment file it loads and answer one configured value into a file here",
)
def answer_config_value(w: World) -> Draft:
    env = _env(w)
    svcs = [w.service() for _ in range(3)]
    svc = svcs[0]
    udir = w.pick(("units", "systemd", "deploy/systemd", "etc/systemd"))
    edir = w.pick(("env", "environments", "deploy/env", "config/env"))
    files: dict[str, str] = {}
    info: dict[str, dict[str, str]] = {}
    for s in svcs:
        efile = f"{edir}/{w.pick(('prod', 'live', 'main', 'blue', 'green'))}-{s}-{w.randint(1, 9)}.env"
        vals = {
            "PORT": str(w.port() + w.randint(0, 9)),
            "DB_HOST": f"{w.pick(('pg', 'db', 'mysql'))}-{w.randint(1, 9)}.{w.pick(('internal', 'lan', 'corp'))}",
            "WORKERS": str(w.randint(2, 24)),
            "LOG_DIR": f"/var/log/{s}{w.pick(('', '-v2', '/app'))}",
            "CACHE_URL": f"redis://{w.ip()}:6379/{w.randint(0, 9)}",
        }
        runas = w.username()
        info[s] = {**vals, "User": runas, "file": efile}
        lines = [f"# {s} environment"] + [f"{k}={v}" for k, v in w.shuffled(list(vals.items()))]
        files[env.at(efile)] = _body(lines)
        unit = [
            "[Unit]",
            f"Description={s} service",
            "",
            "[Service]",
            f"User={runas}",
            f"WorkingDirectory={env.wd}",
            f"EnvironmentFile={w.pick(('', '-'))}{env.at(efile)}",
            f"ExecStart={env.wd}/bin/{s}",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ]
        files[env.at(f"{udir}/{s}.service")] = _body(unit)
    # the trap: an env file named after the service that nothing loads, with other values
    decoy = {
        k: (str(int(v) + 1) if v.isdigit() else v + "-old")
        for k, v in info[svc].items()
        if k not in ("User", "file")
    }
    files[env.at(f"{edir}/{svc}.env")] = _body([f"{k}={v}" for k, v in decoy.items()])
    what = w.pick(("PORT", "PORT", "DB_HOST", "WORKERS", "LOG_DIR", "User"))
    value = info[svc][what]
    answer = w.pick(("answer.txt", "answer.txt", "answer.txt", f"{what.lower()}.txt", "value.txt"))
    w.note(*svcs, udir, edir, value, answer, info[svc]["file"])
    q = {
        "PORT": "which port {svc} is configured to use",
        "DB_HOST": "which database host {svc} connects to",
        "WORKERS": "how many workers {svc} is configured to start",
        "LOG_DIR": "which log directory {svc} is configured with",
        "User": "which user the {svc} service runs as",
    }[what]
    q = w.spin(q, svc=svc, capitalize=False)
    task = w.phrase(
        "Find out {q} and write only that value to {answer} {here}. The unit files and their environment files "
        "are in this folder.",
        "Quick question: {q}? The answer is somewhere in the deployment files {here}; put it in {answer}.",
        "Ticket: confirm {q}, as configured by its unit (and whatever file the unit loads). Record the bare value "
        "in {answer} in the working directory.",
        "{answer}: {q}. Look at what the {svc} unit actually loads, not at files that merely share its name.",
        "i need to know {q}. can you dig it out of the configs here and drop it in {answer}?",
        "Someone changed {svc}'s settings and we are not sure what is live. Read its service unit under {udir}, "
        "follow it to the configuration it really uses, and save {q} to {answer}.",
        q=q,
        answer=answer,
        here=_here(w),
        svc=svc,
        udir=udir,
    )
    spec = {"answer": [[env.at(answer), [value]]], "same": _same(files)}
    unit_rel = f"{udir}/{svc}.service"
    ef = info[svc]["file"]
    reference = [w.pick((f"cat {unit_rel}", f"grep -n EnvironmentFile {unit_rel}", f"ls -R {udir} {edir}"))]
    if what == "User":
        ways = [
            f"sed -n 's/^User=//p' {unit_rel} > {answer}",
            f"grep '^User=' {unit_rel} | cut -d= -f2 > {answer}",
            f"awk -F= '$1==\"User\" {{print $2}}' {unit_rel} > {answer}",
            f"echo {value} > {answer}",
            f"printf '%s\\n' {value} > {answer}",
            f"grep -oP '(?<=^User=).*' {unit_rel} > {answer}",
            f"grep '^User=' {unit_rel} | sed 's/^User=//' > {answer}",
            f"cat > {answer} <<'EOF'\n{value}\nEOF",
        ]
    else:
        reference.append(w.pick((f"cat {ef}", f"grep {what} {ef}")))
        ways = [
            f"sed -n 's/^{what}=//p' {ef} > {answer}",
            f"grep '^{what}=' {ef} | cut -d= -f2- > {answer}",
            f"awk -F= '$1==\"{what}\" {{print $2}}' {ef} > {answer}",
            f"echo {value} > {answer}",
            f"printf '%s\\n' {value} > {answer}",
            f"grep -oP '(?<=^{what}=).*' {ef} > {answer}",
            f'(. {ef} && echo "${what}") > {answer}',
            f"bash -c 'source {ef}; echo \"${what}\"' > {answer}",
            f"sed -n 's/^{what}=//p' \"$(sed -n 's/^EnvironmentFile=-\\?//p' {unit_rel})\" > {answer}",
            f"grep '^{what}=' {ef} | cut -d= -f2 | tee {answer}",
            f"grep '^{what}=' {ef} | sed 's/^{what}=//' > {answer}",
            f"cat > {answer} <<'EOF'\n{value}\nEOF",
            f"sed -n 's/^{what}=//p' {ef} > /tmp/value && cp /tmp/value {answer}",
        ]
    reference += [w.pick(ways), f"cat {answer}"]
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 8. the folder a profile variable points to ====================================================================
@family(
    "forensics-profile-variable-target",
    CATEGORY,
    "resolve a variable exported in a shell profile (not loaded in this shell) and put files where it points",
)
def profile_variable_target(w: World) -> Draft:
    env = _env(w)
    var = f"{env.app.upper()}_{w.pick(('SPOOL', 'INBOX', 'DROP_DIR', 'OUTBOX', 'STAGING', 'DEST'))}"
    base = w.pick(
        (f"/srv/{env.app}-io", f"/var/spool/{env.app}", f"/data/{env.app}", f"{env.home}/{env.app}-io")
    )
    leaf = var.split("_", 1)[1].lower().replace("_", "-")
    real = f"{base}/{leaf}-{w.pick(('b', 'v2', 'new', '2'))}"
    stale = f"{base}/{leaf}"
    trap = w.pick(("commented", "overridden", "disabled"))
    profile = w.pick(
        (
            f"/etc/profile.d/{env.app}.sh",
            f"{env.home}/.profile",
            f"{env.home}/.bashrc",
            env.at("env.sh"),
            env.at(".envrc"),
        )
    )
    lines = [f"# {env.app} shell settings", f"export {env.app.upper()}_HOME={env.wd}"]
    files: dict[str, str] = {}
    if trap == "commented":
        lines += [f"# export {var}={stale}   (old layout)", f"export {var}={real}"]
    elif trap == "overridden":
        lines += [
            f"export {var}={stale}",
            f"export {env.app.upper()}_LOG_LEVEL=info",
            f"{var}={real}  # moved",
        ]
    else:
        lines += [f"export {var}={real}"]
        files[f"/etc/profile.d/{env.app}-legacy.sh.disabled"] = _body([f"export {var}={stale}"])
    if profile.endswith(".bashrc"):
        lines = ["# ~/.bashrc", "case $- in *i*) ;; *) return ;; esac", "HISTSIZE=1000", *lines]
    files[profile] = _body(lines)
    action = w.pick(("move", "move", "copy", "marker"))
    ext = w.pick(("csv", "json", "done", "xml"))
    src = w.pick(("", "", "out/", "outgoing/"))
    names = [
        w.unique(lambda: f"{w.pick(('order', 'batch', 'feed', 'invoice'))}-{w.randint(100, 999)}")
        for _ in range(w.randint(2, 4))
    ]
    moved = [f"{src}{n}.{ext}" for n in names]
    for rel in moved:
        files[env.at(rel)] = _body([f"{rel},{w.token(10)}"])
    keep = f"{src}{w.word()}.{ext}.tmp"
    files[env.at(keep)] = _body(["partial"])
    marker = w.pick(("READY", ".ready", "START", "go.flag"))
    setup = [f"mkdir -p {real} {stale}"]
    if env.user == "operator":
        setup.append(f"chown operator:operator {real} {stale}")
    env.setup = setup
    w.note(marker, ext, *names, var, profile, real, stale)
    what = {
        "move": w.spin(
            "move the .{ext} files {src}into that folder", ext=ext, src=f"in {src} " if src else "here "
        ),
        "copy": w.spin(
            "copy the .{ext} files {src}into that folder (keep the originals)",
            ext=ext,
            src=f"in {src} " if src else "here ",
        ),
        "marker": w.spin("create an empty file named {m} in that folder", m=marker),
    }[action]
    pref = w.pick(("$" + var, "${" + var + "}"))
    prof_en = profile if not profile.startswith(env.wd + "/") else posixpath.relpath(profile, env.wd)
    task = w.phrase(
        "{pref} is set in {prof}. {What}. (This shell has not loaded that file.)",
        "Ticket: the {app} pipeline picks up work from the directory in {pref}, defined in {prof}. {What}.",
        "hey, {what} -- the folder is whatever {pref} points to (see {prof})",
        "Where does {pref} point? It is exported in {prof}. Once you know, {what}.",
        "Deliver to {pref} (from {prof}): {what}. Nothing goes to any other folder.",
        "Our profile {prof} exports {pref} for the {app} jobs, and the layout changed over time, so read it "
        "carefully: the value a login shell would end up with is what counts. Then {what}.",
        pref=pref,
        prof=prof_en,
        What=what[:1].upper() + what[1:],
        what=what,
        app=env.app,
    )
    spec: dict = {
        "only": [[stale, []]],
        "same": {p: _md5(t) for p, t in files.items() if p not in {env.at(r) for r in moved}},
    }
    if action == "marker":
        spec["only"].append([real, [marker]])
        spec["same"].update({env.at(r): _md5(files[env.at(r)]) for r in moved})
    else:
        spec["only"].append([real, [posixpath.basename(r) for r in moved]])
        spec["same"].update({f"{real}/{posixpath.basename(r)}": _md5(files[env.at(r)]) for r in moved})
        if action == "move":
            spec["gone"] = [env.at(r) for r in moved]
        else:
            spec["same"].update({env.at(r): _md5(files[env.at(r)]) for r in moved})
    src_glob = f"{src}*.{ext}"
    prof_sh = (
        profile if not profile.startswith(env.home + "/") else "~/" + posixpath.relpath(profile, env.home)
    )
    if profile.startswith(env.wd + "/"):
        prof_sh = posixpath.relpath(profile, env.wd)
    dest = w.pick((f'"${var}"', real, f'"${var}"'))
    load = w.pick((f". {prof_sh} && ", f"source {prof_sh}; ", "")) if dest.startswith('"') else ""
    if dest.startswith('"') and not load:
        load = f". {prof_sh} && "
    if action == "marker":
        ways = [
            f"{load}touch {dest}/{marker}",
            f"{load}: > {dest}/{marker}",
            f"{load}install -m 644 /dev/null {dest}/{marker}",
            f"{load}cp /dev/null {dest}/{marker}",
            f"{load}touch -- {dest}/{marker}",
        ]
    elif action == "move":
        ways = [
            f"{load}mv {src_glob} {dest}/",
            f"{load}mv -t {dest} {src_glob}",
            f"{load}mv -v {src_glob} {dest}/",
            f"{load}find ./{src} -maxdepth 1 -name '*.{ext}' -exec mv -t {dest} {{}} +",
            f"{load}cp {src_glob} {dest}/ && rm {src_glob}",
            f"{load}rsync -a --remove-source-files {src_glob} {dest}/",
            f'{load}for f in {src_glob}; do mv "$f" {dest}/; done',
        ]
    else:
        ways = [
            f"{load}cp {src_glob} {dest}/",
            f"{load}cp -p {src_glob} {dest}/",
            f"{load}cp -t {dest} {src_glob}",
            f"{load}rsync -a {src_glob} {dest}/",
            f"{load}find ./{src} -maxdepth 1 -name '*.{ext}' -exec cp {{}} {dest}/ \\;",
            f'{load}for f in {src_glob}; do cp "$f" {dest}/; done',
        ]
    reference = [
        w.pick(
            (
                f"cat {prof_sh}",
                f"grep -n {var} {prof_sh}",
                f"bash -lc 'echo ${var}'"
                if profile.startswith(("/etc/profile.d", f"{env.home}/.profile"))
                else f"grep {var} {prof_sh}",
            )
        )
    ]
    reference += [w.pick(ways), f"ls -la {real}"]
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 9. restore a broken config from the newest of its backups ====================================================
@family(
    "forensics-restore-newest-backup",
    CATEGORY,
    "tell which of several look-alike backups is the most recent by time and restore the broken file from it",
)
def restore_newest_backup(w: World) -> Draft:
    env = _env(w, service=SERVICE_SHARE)
    live = w.pick(
        ("config.yml", "settings.ini", "app.conf", "nginx.conf", ".env", "config/app.yml", "etc/site.conf")
    )
    folder = posixpath.dirname(live)
    stem = posixpath.basename(live)
    pool = [
        f"{live}.bak",
        f"{live}.bak.1",
        f"{live}.old",
        f"{live}.orig",
        f"{live}~",
        f"{folder + '/' if folder else ''}backups/{stem}",
    ]
    backups = w.sample(pool, w.randint(3, 4))
    days = w.sample(range(5, 200), len(backups))
    files: dict[str, str] = {}
    keys = w.sample(_FILLER_KEYS, 4)
    for b in backups:
        files[env.at(b)] = _body(
            [f"# {env.app} {stem}"] + [f"{k} = {w.pick((w.token(5), str(w.randint(1, 999))))}" for k in keys]
        )
    broken = w.pick(("empty", "conflict", "truncated"))
    newest = backups[max(range(len(backups)), key=lambda i: days[i])]
    good = files[env.at(newest)].splitlines()
    files[env.at(live)] = {
        "empty": "",
        "conflict": _body(["<<<<<<< HEAD", *good[:2], "=======", *good[1:3], ">>>>>>> deploy"]),
        "truncated": _body(good[:2]) + good[2][: len(good[2]) // 2],
    }[broken]
    setup = [f"touch -d {quote(_stamp(w, d))} {env.at(b)}" for b, d in zip(backups, days, strict=True)]
    setup.append(f"touch -d {quote(_stamp(w, max(days) + 2))} {env.at(live)}")
    env.setup = setup
    if w.chance(0.5):
        files[posixpath.join(env.stale, live)] = files[env.at(newest)]
    w.note(*backups, live, newest)
    state = {
        "empty": "is empty",
        "conflict": "is full of merge-conflict markers",
        "truncated": "got cut off mid-line",
    }[broken]
    task = w.phrase(
        "{live} {here} {state}. Restore it from the most recent of its backups (by modification time, not by "
        "name) and keep every backup as it is.",
        "Ticket: {app} will not start because {live} {state}. Several backups of it lie around this folder; put "
        "the newest one's content back into {live}. Backups stay.",
        "ugh, {live} {state}. can you restore it from whichever backup was written last? don't delete or rename "
        "any backup",
        "Which backup of {live} is the newest? Copy its content over the broken {live} {here}.",
        "restore {live} <- latest backup (mtime). keep the backups.",
        "After you are done, {live} {here} should hold exactly what its most recently modified backup holds, and "
        "all the backups ({names}) should still be there, unchanged.",
        live=_rel(w, live),
        here=_here(w),
        state=state,
        app=env.app,
        names=", ".join(sorted(posixpath.basename(b) if "/" not in b else b for b in backups)),
    )
    spec = {"same": {**_same(files, skip=(env.at(live),)), env.at(live): _md5(files[env.at(newest)])}}
    patterns = set()
    for b in backups:
        patterns.add(f"{live}~" if b.endswith("~") else b if "backups/" in b else f"{live}.*")
    globs = " ".join(sorted(patterns))
    look = w.pick(
        (
            f"ls -lt {globs}",
            f"ls -l --time-style=full-iso {globs}",
            f"stat -c '%y %n' {globs} | sort",
            f"find . -name '{stem}*' -printf '%T+ %p\\n' | sort",
        )
    )
    src = w.pick((newest, newest, f'"$(ls -t {globs} | head -n 1)"'))
    ways = [
        f"cp {src} {live}",
        f"cp -p {src} {live}",
        f"cat {src} > {live}",
        f"install -m 644 {src} {live}",
        f"cp -f {src} {live}",
        f"rsync -a {src} {live}",
        f"dd if={src} of={live} status=none",
        f"cp {live} /tmp/{stem}.broken && cp {src} {live}",
        f"tee {live} < {src} > /dev/null",
        f"cp --no-preserve=all {src} {live}",
        f"cp -v {src} {live}",
        f"python3 -c \"import shutil; shutil.copyfile('{newest}', '{live}')\"",
        f"rm {live} && cp {src} {live}",
    ]
    reference = [look, w.pick(ways), f"diff {newest} {live} && echo restored"]
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=3,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )


# ==== 10. create the missing folders a config names =================================================================
@family(
    "forensics-config-missing-dirs",
    CATEGORY,
    "read which folders the live config names, find which of them are missing and create exactly those",
)
def config_missing_dirs(w: World) -> Draft:
    env = _env(w)
    fmt = w.pick(("ini", "yaml", "env"))
    conf = w.pick(
        (
            {"ini": "app.ini", "yaml": "config.yml", "env": "app.env"}[fmt],
            f"config/{env.app}.{ {'ini': 'conf', 'yaml': 'yaml', 'env': 'env'}[fmt] }",
        )
    )
    keys = w.sample(
        ("data_dir", "cache_dir", "log_dir", "tmp_dir", "upload_dir", "state_dir", "queue_dir", "export_dir"),
        4,
    )
    roots = ["var", "storage", "run", "data"]
    rels = {k: f"{w.pick(roots)}/{k.split('_')[0]}{w.pick(('', 's', '-files'))}" for k in keys}
    missing = w.sample(keys, w.randint(2, 3))
    absolute = w.chance(0.4)
    vals = {k: (env.at(v) if absolute else f"./{v}") for k, v in rels.items()}
    fill = {
        k: w.pick((w.word(), str(w.randint(1, 99))))
        for k in w.sample(("name", "region", "timezone", "shard"), 2)
    }
    lines = [f"# {env.app} runtime paths"] + [_kv(fmt, k, v) for k, v in {**fill, **vals}.items()]
    files = {env.at(conf): _body(lines)}
    # the example config names folders too: none of those may appear
    ex_rels = [f"{w.pick(('sample', 'example', 'demo'))}/{k.split('_')[0]}" for k in keys[:2]]
    ex_lines = ["# example only"] + [_kv(fmt, k, f"./{r}") for k, r in zip(keys[:2], ex_rels, strict=True)]
    files[env.at(conf + w.pick((".example", ".bak", ".dist")))] = _body(ex_lines)
    setup = []
    for k in keys:
        if k not in missing:
            setup.append(f"mkdir -p {env.at(rels[k])}")
            files[env.at(f"{rels[k]}/.keep")] = ""
    env.setup = setup
    w.note(conf, *rels.values(), *ex_rels)
    task = w.phrase(
        "{app} refuses to start {here}: some directories its config ({conf}) points to do not exist. Create the "
        "missing ones, and only those.",
        "Ticket: {app} startup fails with 'No such file or directory'. Check {conf} in the current directory and "
        "create whichever configured folders are missing (the example/backup configs do not count).",
        "can you make the dirs that {conf} expects but aren't there yet? nothing else please",
        "Which of the folders named in {conf} are missing? Create them.",
        "Goal: every directory path in {conf} exists. Do not create folders from any other file.",
        "The {app} deployment in this folder was copied without its empty directories. Read the live config "
        "{conf}, see which of the paths it lists are gone, and recreate exactly those directories; relative "
        "paths are relative to this folder.",
        app=env.app,
        here=_here(w),
        conf=_rel(w, conf),
    )
    spec = {
        "dirs": [env.at(rels[k]) for k in keys],
        "gone": [env.at(r) for r in ex_rels],
        "same": _same(files),
    }
    paths = [vals[k] for k in missing]
    conf_sh = conf
    strip = {"ini": "s/^[a-z_]*_dir = //p", "yaml": "s/^[a-z_]*_dir: //p", "env": "s/^[A-Z_]*_DIR=//p"}[fmt]
    ways = [
        [f"mkdir -p {' '.join(paths)}"],
        [f"mkdir --parents {' '.join(paths)}"],
        [f"mkdir -pv {' '.join(paths)}"],
        [f"install -d {' '.join(paths)}"],
        [f"sed -n '{strip}' {conf_sh} | xargs mkdir -p"],
        [f'for d in $(sed -n \'{strip}\' {conf_sh}); do [ -d "$d" ] || mkdir -p "$d"; done'],
        [f"grep -i '_dir' {conf_sh} | sed -n '{strip}' | xargs -r mkdir -p"],
        [f'python3 -c "import os; [os.makedirs(p, exist_ok=True) for p in {paths!r}]"'],
        [f"mkdir -p {p}" for p in paths],
        [f"mkdir -p {paths[0]}", f"mkdir -p -m 755 {' '.join(paths[1:])}"],
    ]
    reference = [
        w.pick((f"cat {conf_sh}", f"grep -i dir {conf_sh}")),
        w.pick((f"ls -la {' '.join(vals.values())}", f"ls -d {' '.join(vals.values())}")),
        *w.pick(ways),
        f"ls -ld {' '.join(vals.values())}",
    ]
    return Draft(
        task=task,
        check=_check(spec),
        reference=reference,
        difficulty=2,
        files=files,
        setup=env.owner_setup(),
        user=env.user,  # type: ignore[arg-type]
        workdir=env.wd,
    )
