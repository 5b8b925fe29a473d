"""Services: the configuration files of services and daemons as an operator meets them on a server.

systemd units and their drop-ins, logrotate stanzas, supervisor programs, the ``/etc/default/<svc>`` file a unit
sources, a service's ``conf.d`` include folder, sshd/redis-style directive files, ``.dpkg-dist`` files an upgrade
left behind, and the habit of backing a config up before touching it. Nothing runs: a unit is just a file here
(the sandbox has no systemd, logrotate or supervisord), so every check *parses* the result the way the program would
(``_LIB``, embedded in each check) and compares meaning, not spelling: systemd's list keys and the empty assignment
that resets them, drop-ins merged in name order, ``Environment=`` quoting, ``5`` vs ``5s``; logrotate's directives
per stanza; supervisor's ini with ``environment=`` pairs; a defaults file *sourced* by bash; an include folder read
in byte order with the later file winning; sshd's first-value-wins and its ``Match`` blocks. Any correct edit
passes (sed, awk, a heredoc, an editor); the wrong file, a half change, a duplicate key that loses, the vendor file
edited or a broken neighbour fails.

About half the draws work as root under ``/etc``, ``/srv`` and ``/opt``; the rest as ``operator`` in a project
folder in the home (user units, a project-local supervisord, a checked-in ``deploy/`` tree). Kept away from the
held-out skills (``factory/split.py``): no listen ports or ports at all, no signals or reloads, no cron files, no
log rotation by hand (logrotate *configuration* only), no ``.editorconfig``, and no symlinks (enabling a site or
a unit is ``ln -s``, the held-out ``files-symlink`` skill).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, PROJECTS, SERVICES, World, quote, shell_paths

CATEGORY = "services"
_NO_SVC = frozenset({"profile"})  # /etc/profile is a file, so /etc/profile/... cannot be a service folder
_BASE_ACCOUNTS = frozenset({"sync", "daemon", "backup", "mail", "news", "proxy", "list", "games", "man"})


# ---- the checker library, embedded in every check ---------------------------------------------------------------
# argv[1] is the JSON spec. Parsers read files as the program would; ``fail`` prints why (the gate shows it).
_LIB = r"""
import glob, hashlib, json, os, re, shlex, stat, subprocess, sys
spec = json.loads(sys.argv[1])


def fail(why):
    print(why)
    sys.exit(1)


def text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        fail(f"cannot read {path}")


def md5(path):
    try:
        with open(path, "rb") as fh:
            return hashlib.md5(fh.read()).hexdigest()
    except OSError:
        return None


def same_files(pairs):
    for path, digest in pairs.items():
        if md5(path) != digest:
            fail(f"{path} must stay as it was")


def safe_mode(path, uid):
    try:
        st = os.stat(path)
    except OSError:
        fail(f"{path} is missing")
    if st.st_uid != uid:
        fail(f"{path} has the wrong owner")
    if st.st_mode & 0o022:
        fail(f"{path} is writable by group or others")


# -- systemd units
LIST_KEYS = {"ExecStart", "ExecStartPre", "ExecStartPost", "ExecStop", "ExecReload", "Environment",
             "EnvironmentFile", "After", "Before", "Wants", "Requires", "WantedBy", "RequiredBy", "Documentation",
             "PartOf", "Also", "ReadWritePaths"}
WORD_LISTS = {"After", "Before", "Wants", "Requires", "WantedBy", "RequiredBy", "PartOf", "Also", "Documentation",
              "ReadWritePaths"}
TIME_KEYS = {"RestartSec", "TimeoutStartSec", "TimeoutStopSec", "TimeoutSec", "StartLimitIntervalSec"}
UNITS = {"": 1, "s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60, "minutes": 60,
         "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600, "ms": 0.001, "msec": 0.001}


def unit_entries(body):
    out, section, buf = [], None, ""
    for raw in body.splitlines():
        line = raw.strip()
        if buf:
            if line.startswith(("#", ";")):
                continue
            line, buf = buf + " " + line, ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            buf = line[:-1].rstrip()
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, eq, value = line.partition("=")
        out.append((section, key.strip(), value.strip() if eq else None))
    return out


def merged(*bodies):
    eff = {}
    for body in bodies:
        for sec, key, value in unit_entries(body):
            if value is None:
                continue
            d = eff.setdefault(sec, {})
            if key in LIST_KEYS:
                if value == "":
                    d[key] = []
                else:
                    d.setdefault(key, []).append(value)
            elif value == "":
                d.pop(key, None)
            else:
                d[key] = value
    return eff


def seconds(value):
    total = 0.0
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value.lower()):
        if unit not in UNITS:
            return value
        total += float(num) * UNITS[unit]
    return total if re.fullmatch(r"(\s*\d+(?:\.\d+)?\s*[a-z]*)+\s*", value.lower()) else value


def env_of(values):
    env, bad = {}, []
    for value in values:
        try:
            words = shlex.split(value)
        except ValueError:
            bad.append(value)
            continue
        for word in words:
            key, eq, val = word.partition("=")
            if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                env[key] = val
            else:
                bad.append(word)
    return env, bad


def canon(eff):
    out = {}
    for sec, d in eff.items():
        c = {}
        for key, value in d.items():
            if key == "Environment":
                c[key], bad = env_of(value)
                if bad:
                    c["!invalid-environment"] = bad
            elif key.startswith("Exec"):
                try:
                    c[key] = [shlex.split(v) for v in value]
                except ValueError:
                    c[key] = value
            elif key in WORD_LISTS:
                c[key] = sorted(set(" ".join(value).split()))
            elif key in TIME_KEYS:
                c[key] = seconds(value)
            elif key in LIST_KEYS:
                c[key] = list(value)
            else:
                c[key] = value
        if c or sec:
            out[sec] = c
    return {k: v for k, v in out.items() if v}


def unit_view(*paths):
    return canon(merged(*(text(p) for p in paths)))


def dropins(folder):
    return sorted(glob.glob(os.path.join(folder, "*.conf")), key=os.path.basename)


def want_unit(view, wants):
    for want in wants:
        sec, key, kind, value = want["sec"], want["key"], want["kind"], want["value"]
        got = view.get(sec, {}).get(key)
        if kind == "exec":
            if got != [value]:
                fail(f"{key} is {got!r}, want exactly one: {value!r}")
        elif kind == "env":
            if not isinstance(got, dict) or any(got.get(k) != v for k, v in value.items()):
                fail(f"environment is {got!r}, want {value!r} in it")
        elif kind == "words":
            if not isinstance(got, list) or not set(value) <= set(got):
                fail(f"{sec}.{key} is {got!r}, want {value!r} in it")
        elif kind == "item":
            if not isinstance(got, list) or value not in got:
                fail(f"{sec}.{key} is {got!r}, want {value!r} in it")
        elif kind == "time":
            if got != seconds(value):
                fail(f"{sec}.{key} is {got!r}, want {value!r}")
        elif got != value:
            fail(f"{sec}.{key} is {got!r}, want {value!r}")


# -- key = value files
def kv_lines(body, sep):
    out = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if sep == " ":
            key, _, value = line.partition(" ")
        else:
            key, _, value = line.partition(sep)
        out.append((key.strip(), value.strip()))
    return out
"""


def _py(spec: object, code: str) -> str:
    """A check: the library, then ``code``; the spec travels as argv[1]."""
    return (
        "#!/bin/bash\n"
        f"python3 - {quote(json.dumps(spec, sort_keys=True))} <<'PY'\n{_LIB.strip()}\n\n{code.strip()}\nPY\n"
    )


def _md5(body: str) -> str:
    import hashlib

    return hashlib.md5(body.encode()).hexdigest()


# ---- shared draws ---------------------------------------------------------------------------------------------------
def _f(w: World, template: str, **values: object) -> str:
    """A spun fragment for inside a sentence (not capitalised)."""
    return w.spin(template, capitalize=False, **values)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _svc(w: World) -> str:
    return w.unique(lambda: w.pick([s for s in SERVICES if s not in _NO_SVC]))


def _account(svc: str) -> str:
    return f"{svc}d" if svc in _BASE_ACCOUNTS else svc


def _add_account(name: str, home: str) -> str:
    return f"id -u {name} >/dev/null 2>&1 || useradd -r -M -d {home} -s /usr/sbin/nologin {name}"


def _body(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _write(w: World, path: str, lines: Sequence[str], append: bool = False) -> str:
    """A reference command writing (or appending) ``lines`` to ``path`` (already rendered for the shell)."""
    op = ">>" if append else ">"
    body = "\n".join(lines)
    style = w.pick(("cat", "cat", "tee", "printf", "python"))
    if style == "python":  # python's file I/O, the text passed as an argument
        code = f"import sys; open(sys.argv[1], {'a' if append else 'w'!r}).write(sys.argv[2])"
        return f"python3 -c {quote(code)} {path} {quote(body + chr(10))}"
    if style == "cat":
        return f"cat {op} {path} <<'EOF'\n{body}\nEOF"
    if style == "tee":
        return f"tee {'-a ' if append else ''}{path} > /dev/null <<'EOF'\n{body}\nEOF"
    return f"printf '%s\\n' {' '.join(quote(line) for line in lines)} {op} {path}"


def _sed_re(text: str) -> str:
    """``text`` escaped for a basic sed regex inside ``|`` delimiters."""
    out = []
    for ch in text:
        out.append("\\" + ch if ch in r"\.*[]^$|/&" else ch)
    return "".join(out)


def _sed_sub(text: str) -> str:
    """``text`` escaped for a sed replacement inside ``|`` delimiters."""
    return text.replace("\\", "\\\\").replace("&", "\\&").replace("|", "\\|")


def _view(w: World, path: str) -> str:
    """A look at a file, as a reference's first or last turn."""
    return w.pick((f"cat {path}", f"grep -v '^#' {path}", f"cat -n {path}"))


def _exec_line(w: World, svc: str, base: str) -> str:
    """A plausible ExecStart= command line (no ports: those are another skill)."""
    conf = f"/etc/{svc}/{svc}.conf" if base.startswith(("/opt", "/srv")) else f"{base}/config.yml"
    shape = w.randint(0, 5)
    if shape == 0:
        return f"{base}/bin/{svc} --config {conf}"
    if shape == 1:
        return f"{base}/bin/{svc}-server --workers {w.randint(2, 8)}"
    if shape == 2:
        return f"{base}/venv/bin/python -m {svc}.main --log-level {w.pick(('info', 'warning'))}"
    if shape == 3:
        return f"/usr/bin/node {base}/server.js"
    if shape == 4:
        return f"/usr/bin/java -Xmx{w.pick((256, 512, 1024))}m -jar {base}/{svc}.jar"
    return f"{base}/bin/{svc}d --foreground"


def _program_files(exec_line: str, base: str) -> dict[str, str]:
    """The files an ExecStart= line names under the service's folder (so the unit points at something real)."""
    out = {}
    for i, word in enumerate(exec_line.split()):
        if word.startswith(base + "/"):
            out[word] = "#!/bin/sh\nexit 0\n" if i == 0 else f"placeholder for {posixpath.basename(word)}\n"
    return out


_ENV_POOL: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("LOG_LEVEL", ("info", "debug", "warning")),
    ("APP_ENV", ("production", "staging")),
    ("NODE_ENV", ("production",)),
    ("PYTHONUNBUFFERED", ("1",)),
    ("TZ", ("UTC", "Europe/Oslo")),
    ("WORKERS", ("2", "4", "8")),
    ("CACHE_DIR", ("/var/cache/{svc}",)),
    ("JAVA_OPTS", ("-Xmx512m -Xms256m", "-Xmx1g -XX:+UseG1GC")),
    ("FEATURE_FLAGS", ("beta,metrics", "fast-path")),
)


def _env(w: World, svc: str, k: int, avoid: Sequence[str] = ()) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, values in w.sample([e for e in _ENV_POOL if e[0] not in avoid], k):
        out[key] = w.pick(values).format(svc=svc)
    w.note(*out.values())
    return out


def _env_text(env: dict[str, str]) -> str:
    """Variables as an instruction lists them: values with spaces or commas quoted."""
    return " and ".join(f'{k}="{v}"' if (" " in v or "," in v) else f"{k}={v}" for k, v in env.items())


def _env_lines(env: dict[str, str], w: World) -> list[str]:
    """Environment= lines: one per variable or all on one line; values with spaces quoted."""

    def one(k: str, v: str) -> str:
        return f'"{k}={v}"' if " " in v else f"{k}={v}"

    if len(env) > 1 and w.chance(0.4):
        return ["Environment=" + " ".join(one(k, v) for k, v in env.items())]
    return [f"Environment={one(k, v)}" for k, v in env.items()]


def _unit_wants(wants: list[dict[str, object]], sec: str, key: str, kind: str, value: object) -> None:
    wants.append({"sec": sec, "key": key, "kind": kind, "value": value})


def _others_units(w: World, folder: str, k: int) -> dict[str, str]:
    """Unrelated units beside the one a task is about (they must stay as they are)."""
    files = {}
    for _ in range(k):
        other = _svc(w)
        base = w.pick((f"/opt/{other}", f"/srv/{other}"))
        files[f"{folder}/{other}.service"] = _body(
            [
                "[Unit]",
                f"Description={other.capitalize()} service",
                "",
                "[Service]",
                f"ExecStart={_exec_line(w, other, base)}",
                f"User={_account(other)}",
                "Restart=on-failure",
                "",
                "[Install]",
                "WantedBy=multi-user.target",
            ]
        )
    return files


# ---- services-systemd-unit --------------------------------------------------------------------------------------------
@family(
    "services-systemd-unit",
    CATEGORY,
    "write a systemd service unit (ExecStart, User, WorkingDirectory, Restart, Environment, Install) from a spec",
)
def systemd_unit(w: World) -> Draft:
    scope = w.pick(("system", "system", "system", "user"))
    svc = _svc(w)
    sh = shell_paths(w)
    setup: list[str] = []
    files: dict[str, str] = {}
    wants: list[dict[str, object]] = []
    clauses: list[str] = []
    if scope == "system":
        acct = _account(svc)
        base = w.pick((f"/opt/{svc}", f"/srv/{svc}"))
        path = f"/etc/systemd/system/{svc}.service"
        setup.append(_add_account(acct, base))
        setup.append("mkdir -p /etc/systemd/system")
        files.update(_others_units(w, "/etc/systemd/system", w.randint(0, 2)))
        target = "multi-user.target"
    else:
        proj = w.project()
        acct = "operator"
        base = f"{HOME}/{w.pick(('apps/', 'projects/', ''))}{proj}"
        path = f"{HOME}/.config/systemd/user/{svc}.service"
        files[f"{base}/README.md"] = f"# {proj}\n"
        target = "default.target"
    exec_line = _exec_line(w, svc, base)
    files.update(_program_files(exec_line, base))
    w.note(svc, acct, base)
    clauses.append(_f(w, "{it runs|its command is|the command to run is} `{cmd}`", cmd=exec_line))
    _unit_wants(wants, "Service", "ExecStart", "exec", exec_line.split())
    body_service = [f"ExecStart={exec_line}"]
    if scope == "system" and w.chance(0.85):
        group = w.chance(0.35)
        clauses.append(
            _f(w, "it runs as the {a} {account|user}", a=acct)
            + (" " + _f(w, "and group {a}", a=acct) if group else "")
        )
        _unit_wants(wants, "Service", "User", "str", acct)
        body_service.insert(0, f"User={acct}")
        if group:
            _unit_wants(wants, "Service", "Group", "str", acct)
            body_service.insert(1, f"Group={acct}")
    if w.chance(0.7):
        clauses.append(_f(w, "{its working directory is|it starts in|it works in} {d}", d=base))
        _unit_wants(wants, "Service", "WorkingDirectory", "str", base)
        body_service.append(f"WorkingDirectory={base}")
    restart = w.pick(("always", "on-failure", "on-failure", ""))
    if restart:
        delay = w.pick((0, 0, 3, 5, 10, 30))
        how = {
            "always": _f(
                w,
                "{systemd restarts it whenever it stops, even after a clean exit|it is always restarted, "
                "clean exit or not|Restart=always}",
            ),
            "on-failure": _f(
                w,
                "{it is restarted only when it fails (non-zero exit or crash)|systemd restarts it "
                "when it fails, not after a clean exit|Restart=on-failure}",
            ),
        }[restart]
        if delay:
            how += ", " + _f(
                w,
                "{waiting {d} seconds before each restart|with a {d}-second pause between restarts|RestartSec={d}}",
                d=delay,
            )
            _unit_wants(wants, "Service", "RestartSec", "time", f"{delay}s")
        clauses.append(how)
        _unit_wants(wants, "Service", "Restart", "str", restart)
        body_service.append(f"Restart={restart}")
        if delay:
            body_service.append(f"RestartSec={w.pick((str(delay), f'{delay}s'))}")
    env = _env(w, svc, w.pick((0, 1, 1, 2)))
    if env:
        spec_env = _env_text(env)
        clauses.append(_f(w, "{its environment has|it runs with} {e}", e=spec_env))
        _unit_wants(wants, "Service", "Environment", "env", env)
        body_service += _env_lines(env, w)
    if scope == "system" and w.chance(0.3):
        optional = w.chance(0.5)
        ef = f"/etc/default/{svc}"
        opt = _f(w, "{if that file exists|, which may be missing (the unit must still start without it)}")
        opt = opt if opt.startswith(",") else " " + opt
        clauses.append(_f(w, "it {also reads|loads} variables from {ef}", ef=ef) + (opt if optional else ""))
        _unit_wants(wants, "Service", "EnvironmentFile", "item", ("-" if optional else "") + ef)
        body_service.append(f"EnvironmentFile={'-' if optional else ''}{ef}")
        if not optional:
            files[ef] = f"# defaults for {svc}\n"
    after = scope == "system" and w.chance(0.5)
    if after:
        clauses.append(_f(w, "it starts after the network is up (network.target)"))
        _unit_wants(wants, "Unit", "After", "words", ["network.target"])
    install = w.chance(0.8)
    if install:
        clauses.append(
            _f(
                w,
                "{it can be enabled to start at boot|enabling it hooks it into {t}|it is wanted by {t}}",
                t=target,
            )
            if scope == "system"
            else _f(
                w, "{it can be enabled to start with your session|enabling it hooks it into {t}}", t=target
            )
        )
        _unit_wants(wants, "Install", "WantedBy", "words", [target])
    described = w.chance(0.5)
    desc = f"{svc.capitalize()} {w.pick(('API server', 'background worker', 'queue consumer', 'daemon', 'service'))}"
    if described:
        clauses.append(_f(w, 'its description is "{d}"', d=desc))
        _unit_wants(wants, "Unit", "Description", "str", desc)
        w.note(desc)
    spec_text = w.clauses(clauses)
    where = w.path_ref(path, "file") if scope == "user" else path
    lead = (
        _f(w, "a {systemd |}user unit{| for your own user manager}")
        if scope == "user"
        else _f(w, "a {systemd |}service unit")
    )
    task = w.phrase(
        "Write {lead} for {svc} at {where}: {spec}.",
        "{svc} needs {lead}. Create {where} so that {spec}.",
        "Ticket: no unit exists yet for {svc}. Add {where} ({lead}); requirements: {spec}.",
        "Could you create {where}, {lead} for {svc}? {spec_c}.",
        "{Set up|Define} {svc} as {lead} in {where}. {spec_c}.",
        lead=lead,
        svc=svc,
        where=where,
        spec=spec_text,
        spec_c=_cap(spec_text),
    )
    lines = ["[Unit]", f"Description={desc}"]
    if after:
        lines.append("After=network.target")
    lines += ["", "[Service]", *body_service]
    if install:
        lines += ["", "[Install]", f"WantedBy={target}"]
    uid = 0 if scope == "system" else 1000
    check = _py(
        {"path": path, "wants": wants, "uid": uid},
        """
p = spec["path"]
safe_mode(p, spec["uid"])
view = unit_view(p)
if "!invalid-environment" in view.get("Service", {}):
    fail("invalid Environment= assignment")
want_unit(view, spec["wants"])
""",
    )
    p = sh(path)
    reference = []
    if scope == "user":
        reference.append(f"mkdir -p {sh(posixpath.dirname(path))}")
    elif w.chance(0.5):
        reference.append("ls /etc/systemd/system")
    reference += [_write(w, p, lines), _view(w, p)]
    n = len(clauses)
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=1 if n <= 2 else 2 if n <= 5 else 3,
        files=files,
        setup=setup,
        user="root" if scope == "system" else "operator",
    )


# ---- services-systemd-dropin ------------------------------------------------------------------------------------------
def _vendor_unit(w: World, svc: str, scope: str, acct: str) -> tuple[list[str], dict[str, str], str]:
    """A packaged unit (lines), the environment it sets and its ExecStart= command line."""
    binary = f"/usr/sbin/{svc}d" if scope == "system" else f"/usr/bin/{svc}-agent"
    cmd = f"{binary} --config /etc/{svc}/{svc}.conf" if scope == "system" else f"{binary} --foreground"
    env = {"LOG_LEVEL": "info"} if w.chance(0.6) else {}
    lines = [
        "[Unit]",
        f"Description={svc.capitalize()} {w.pick(('daemon', 'service', 'agent'))}",
        f"Documentation=man:{svc}(8)",
    ]
    if scope == "system":
        lines.append("After=network.target")
    lines += ["", "[Service]", "Type=simple"]
    if scope == "system":
        lines.append(f"User={acct}")
    lines.append(f"ExecStart={cmd}")
    lines += [f"Environment={k}={v}" for k, v in env.items()]
    lines += ["Restart=on-failure", "TimeoutStopSec=30"]
    if w.chance(0.5):
        lines.append("LimitNOFILE=1024")
    lines += ["", "[Install]", f"WantedBy={'multi-user.target' if scope == 'system' else 'default.target'}"]
    return lines, env, cmd


@family(
    "services-systemd-dropin",
    CATEGORY,
    "change a packaged systemd unit with a drop-in override (ExecStart= reset, Environment=, Restart=, limits)",
)
def systemd_dropin(w: World) -> Draft:
    scope = w.pick(("system", "system", "user"))
    svc = _svc(w)
    sh = shell_paths(w)
    acct = _account(svc)
    setup: list[str] = []
    if scope == "system":
        vendor = f"/usr/lib/systemd/system/{svc}.service"
        ddir = f"/etc/systemd/system/{svc}.service.d"
        shadow = f"/etc/systemd/system/{svc}.service"
        setup += [_add_account(acct, f"/var/lib/{svc}"), "mkdir -p /etc/systemd/system"]
    else:
        vendor = f"/usr/lib/systemd/user/{svc}.service"
        ddir = f"{HOME}/.config/systemd/user/{svc}.service.d"
        shadow = f"{HOME}/.config/systemd/user/{svc}.service"
    lines, env, cmd = _vendor_unit(w, svc, scope, acct)
    files = {vendor: _body(lines), cmd.split()[0]: "#!/bin/sh\nexit 0\n"}
    kinds = ["restart", "env", "exec", "limit", "timeout", "memory"] + (["user"] if scope == "system" else [])
    if env:
        kinds.append("envchange")
    changes = w.sample(kinds, w.pick((1, 1, 2)))
    w.note(svc, acct)
    asks: list[str] = []
    drop: list[str] = []
    for kind in changes:
        if kind == "restart":
            delay = w.pick((0, 2, 5, 10))
            asks.append(
                _f(
                    w,
                    "{restart it always, even after a clean exit|make systemd restart it whenever it stops, not only "
                    "on failure}",
                )
                + (", " + _f(w, "{d} seconds apart", d=delay) if delay else "")
            )
            drop.append("Restart=always")
            if delay:
                drop.append(f"RestartSec={delay}")
        elif kind == "env":
            extra = _env(w, svc, w.pick((1, 1, 2)), avoid=list(env))
            env_spec = _env_text(extra)
            keep = " " + _f(w, "(the variables the unit already sets stay)") if env else ""
            asks.append(_f(w, "{add|set} {s} in its environment", s=env_spec) + keep)
            drop += _env_lines(extra, w)
        elif kind == "envchange":
            level = w.pick(("debug", "warning", "error"))
            w.note(level)
            asks.append(_f(w, "{run it with|switch it to} LOG_LEVEL={l} instead of info", l=level))
            drop.append(f"Environment=LOG_LEVEL={level}")
        elif kind == "exec":
            alt = w.pick(
                ("--verbose", f"--config /etc/{svc}/{w.pick(('local', 'site', 'tuned'))}.conf", "--no-color")
            )
            new = (
                cmd + " " + alt
                if not alt.startswith("--config")
                else cmd.replace(f"--config /etc/{svc}/{svc}.conf", alt)
                if "--config" in cmd
                else cmd + " " + alt
            )
            w.note(alt)
            asks.append(
                _f(
                    w,
                    "{start it with|make its command line} `{new}` instead of the packaged `{old}`",
                    new=new,
                    old=cmd,
                )
            )
            drop += ["ExecStart=", f"ExecStart={new}"]
        elif kind == "limit":
            n = w.pick((4096, 8192, 65536, 100000))
            w.note(n)
            asks.append(
                _f(w, "{raise its open-file limit to {n}|allow it {n} open files (LimitNOFILE)}", n=n)
            )
            drop.append(f"LimitNOFILE={n}")
        elif kind == "timeout":
            n = w.pick((60, 90, 120, 300))
            w.note(n)
            asks.append(
                _f(
                    w,
                    "{give it {n} seconds to stop before it is killed|set its stop timeout to {n} seconds}",
                    n=n,
                )
            )
            drop.append(f"TimeoutStopSec={w.pick((str(n), f'{n}s'))}")
        elif kind == "memory":
            m = w.pick(("256M", "512M", "1G", "2G"))
            w.note(m)
            asks.append(_f(w, "{cap its memory at {m} (MemoryMax)|limit it to {m} of memory}", m=m))
            drop.append(f"MemoryMax={m}")
        else:
            other = w.unique(lambda: f"{svc}-{w.pick(('runner', 'app', 'svc', 'worker'))}")
            setup.append(_add_account(other, f"/var/lib/{svc}"))
            asks.append(
                _f(w, "{run it as the {o} account|make it run as {o}} instead of {a}", o=other, a=acct)
            )
            drop.append(f"User={other}")
    existing: dict[str, str] = {}
    if w.chance(0.3):
        existing[f"{ddir}/50-hardening.conf"] = _body(["[Service]", "PrivateTmp=yes", "NoNewPrivileges=yes"])
        files.update(existing)
    named = w.pick(("override.conf", "override.conf", f"10-{changes[0]}.conf", "local.conf", ""))
    name_text = (
        _f(w, "{name it|call it|put it in} {n}", n=named)
        if named
        else _f(w, "any file name ending in .conf will do")
    )
    ask = w.clauses(asks)
    task = w.phrase(
        "The {svc} service comes from a package: {vendor} must not be edited (upgrades overwrite it). With a drop-in "
        "in {ddir}, {ask}. {name_c}.",
        "Change how {svc} runs without touching {vendor}: {ask}. Use a drop-in {override |}file ({name}).{user}",
        "Ticket: for {svc}, {ask}. Do it the systemd way, with a drop-in under {ddir} ({name}); the packaged "
        "unit stays as shipped.",
        "Could you override {svc}'s unit with a drop-in? {ask_c}. {Leave {vendor} alone|Don't edit {vendor}}; "
        "{name}.{user}",
        svc=svc,
        vendor=vendor,
        ddir=w.path_ref(ddir) if scope == "user" else ddir,
        ask=ask,
        ask_c=_cap(ask),
        name=name_text,
        name_c=_cap(name_text),
        user=" "
        + _f(
            w,
            "{It is a user unit, run by your own systemd user manager.|The unit belongs to your user "
            "manager (systemctl --user), not to the system.}",
        )
        if scope == "user"
        else "",
    )
    dropin = ["[Service]", *drop]
    spec = {
        "vendor": vendor,
        "ddir": ddir,
        "shadow": shadow,
        "keep": {p: _md5(b) for p, b in {vendor: files[vendor], **existing}.items()},
        "expect_bodies": [files[vendor], *existing.values(), _body(dropin)],
        "named": f"{ddir}/{named}" if named else "",
        "uid": 0 if scope == "system" else 1000,
    }
    check = _py(
        spec,
        """
same_files(spec["keep"])
if os.path.exists(spec["shadow"]):
    fail("a full copy of the unit shadows the packaged one")
if spec["named"] and not os.path.isfile(spec["named"]):
    fail("the drop-in is not where it was asked for")
confs = dropins(spec["ddir"])
if not confs:
    fail("no drop-in")
for p in confs:
    if p not in spec["keep"]:
        safe_mode(p, spec["uid"])
got = canon(merged(text(spec["vendor"]), *(text(p) for p in confs)))
want = canon(merged(*spec["expect_bodies"]))
if got != want:
    fail(f"effective unit differs: {got!r} != {want!r}")
""",
    )
    d = sh(ddir)
    path = f"{d}/{named or w.pick(('override.conf', 'local.conf', '20-site.conf'))}"
    reference = [_view(w, vendor)]
    if existing:
        reference.append(f"ls {d}")
    body = "\n".join(dropin)
    how = w.pick(("mkdir", "mkdir", "install", "staged"))
    if how == "install":  # install -D makes the folder and the file, with its mode, in one step
        reference += [f"install -D -m 644 /dev/stdin {path} <<'EOF'\n{body}\nEOF"]
    elif how == "staged":  # drafted in /tmp first, then installed in place
        draft = f"/tmp/{svc}-dropin.conf"
        reference += [f"cat > {draft} <<'EOF'\n{body}\nEOF", f"install -D -m 0644 {draft} {path}"]
    else:
        reference += [f"mkdir -p {d}", _write(w, path, dropin)]
    reference.append(f"cat {path}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if "exec" in changes or len(changes) > 1 else 2,
        files=files,
        setup=setup,
        user="root" if scope == "system" else "operator",
    )


# ---- services-unit-repair -------------------------------------------------------------------------------------------
_TYPOS = {
    "Environment": "Enviroment",
    "WorkingDirectory": "WorkingDir",
    "RestartSec": "RestartSecs",
    "Restart": "Restarts",
    "Description": "Desciption",
}


@family(
    "services-unit-repair",
    CATEGORY,
    "fix a systemd unit that systemd rejects or ignores in part (typo'd key, relative ExecStart, wrong section, bad "
    "value, unquoted environment, missing account)",
)
def unit_repair(w: World) -> Draft:
    scope = w.pick(("system", "system", "system", "user"))
    svc = _svc(w)
    sh = shell_paths(w)
    setup: list[str] = []
    acct = _account(svc)
    if scope == "system":
        base = w.pick((f"/opt/{svc}", f"/srv/{svc}"))
        path = f"/etc/systemd/system/{svc}.service"
        setup += [_add_account(acct, base), "mkdir -p /etc/systemd/system"]
        target = "multi-user.target"
    else:
        base = f"{HOME}/{w.pick(('apps', 'projects', 'services'))}/{w.project()}"
        path = f"{HOME}/.config/systemd/user/{svc}.service"
        target = "default.target"
    kinds = ["typo", "relative", "section", "restartval", "envquote", "workdir"] + (
        ["user"] if scope == "system" else []
    )
    faults = sorted(
        w.sample(kinds, w.pick((1, 1, 2))), key=lambda k: k == "typo"
    )  # a typo last: it renames a key
    binary = f"{base}/bin/{svc}"
    args = w.pick(("--foreground", f"--config {base}/{svc}.conf", "--log-format json", ""))
    env = (
        {"JAVA_OPTS": w.pick(("-Xmx512m -Xms256m", "-Xmx1g -Xss512k"))}
        if "envquote" in faults
        else _env(w, svc, w.pick((1, 1, 2)), avoid=("JAVA_OPTS",))
    )
    good_env = [f'Environment="{k}={v}"' if " " in v else f"Environment={k}={v}" for k, v in env.items()]
    delay = w.pick((2, 5, 10))
    good = [
        "[Unit]",
        f"Description={svc.capitalize()} {w.pick(('service', 'worker', 'daemon'))}",
        "After=network.target",
        "",
        "[Service]",
        "Type=simple",
        *([f"User={acct}"] if scope == "system" else []),
        f"WorkingDirectory={base}",
        f"ExecStart={binary} {args}".rstrip(),
        *good_env,
        "Restart=on-failure",
        f"RestartSec={delay}",
        "",
        "[Install]",
        f"WantedBy={target}",
    ]
    bad = list(good)
    fixes: list[str] = []
    perl_ops: list[str] = []  # the same fixes as perl statements, for one perl pass over the file
    messages: list[str] = []
    p = sh(path)
    unit = posixpath.basename(path)

    def at(prefix: str) -> int:
        return next(i for i, line in enumerate(bad) if line.startswith(prefix))

    for kind in faults:
        if kind == "typo":
            touched = {"envquote": "Environment", "workdir": "WorkingDirectory", "restartval": "Restart"}
            taken = {touched[f] for f in faults if f in touched}
            key = w.pick(
                [k for k in _TYPOS if k not in taken and any(line.startswith(k + "=") for line in bad)]
            )
            i = at(key + "=")
            bad[i] = _TYPOS[key] + bad[i][len(key) :]
            section = "Unit" if key == "Description" else "Service"
            messages.append(
                f"{path}:{i + 1}: Unknown key name '{_TYPOS[key]}' in section '{section}', ignoring."
            )
            fixes.append(f"sed -i 's/^{_TYPOS[key]}=/{key}=/' {p}")
            perl_ops.append(f"s/^{_TYPOS[key]}=/{key}=/")
        elif kind == "relative":
            i = at("ExecStart=")
            bad[i] = bad[i].replace(f"ExecStart={base}/bin/", "ExecStart=bin/")
            messages += [
                f"{path}:{i + 1}: Neither a valid executable name nor an absolute path: bin/{svc}",
                f"{unit}: Unit configuration has fatal error, unit will not be started.",
            ]
            fixes.append(f"sed -i 's|^ExecStart=bin/|ExecStart={_sed_sub(base)}/bin/|' {p}")
            perl_ops.append(f"s|^ExecStart=bin/|ExecStart={base}/bin/|")
        elif kind == "section":
            j = bad.index("[Install]")
            wanted = bad[j + 1]
            del bad[j - 1 : j + 2]
            i = at("RestartSec=") + 1
            bad.insert(i, wanted)
            messages += [
                f"{path}:{i + 1}: Unknown key name 'WantedBy' in section 'Service', ignoring.",
                f"Unit {unit} has no installation config (WantedBy=, RequiredBy=, Also=, Alias= settings in the "
                "[Install] section, and DefaultInstance= for template units).",
            ]
            fixes.append(f"sed -i '/^WantedBy=/d' {p} && printf '\\n[Install]\\nWantedBy={target}\\n' >> {p}")
            perl_ops += ['$_ = "" if /^WantedBy=/', f'$_ .= "\\n[Install]\\nWantedBy={target}\\n" if eof']
        elif kind == "restartval":
            i = at("Restart=")
            value = w.pick(("yes", "true", "on-fail", "always-on"))
            bad[i] = f"Restart={value}"
            messages.append(f"{path}:{i + 1}: Failed to parse service restart specifier, ignoring: {value}")
            fixes.append(f"sed -i 's/^Restart={value}$/Restart=on-failure/' {p}")
            perl_ops.append(f"s/^Restart={value}$/Restart=on-failure/")
        elif kind == "envquote":
            i = at("Environment=")
            k, v = next(iter(env.items()))
            bad[i] = f"Environment={k}={v}"
            messages.append(f"{path}:{i + 1}: Invalid environment assignment, ignoring: {v.split()[1]}")
            fixes.append(f"sed -i 's/^Environment={k}=\\(.*\\)$/Environment=\"{k}=\\1\"/' {p}")
            perl_ops.append(f's/^Environment={k}=(.*)$/Environment="{k}=$1"/')
        elif kind == "workdir":
            i = at("WorkingDirectory=")
            wrong = w.pick((f"{base}/current", f"{base}/app", base.replace(svc, svc + "-app")))
            bad[i] = f"WorkingDirectory={wrong}"
            messages += [
                f"{unit}: Changing to the requested working directory failed: No such file or directory",
                f"{unit}: Failed at step CHDIR spawning {binary}: No such file or directory",
                f"{unit}: Main process exited, code=exited, status=200/CHDIR",
            ]
            fixes.append(f"sed -i 's|^WorkingDirectory=.*|WorkingDirectory={_sed_sub(base)}|' {p}")
            perl_ops.append(f"s|^WorkingDirectory=.*|WorkingDirectory={base}|")
        else:
            i = at("User=")
            wrong = w.pick((f"{acct}-user", f"svc-{svc}", f"{svc}app"))
            bad[i] = f"User={wrong}"
            messages += [
                f"{unit}: Failed to determine user credentials: No such process",
                f"{unit}: Failed at step USER spawning {binary}: No such process",
                f"{unit}: Main process exited, code=exited, status=217/USER",
            ]
            fixes.append(f"sed -i 's/^User=.*/User={acct}/' {p}")
            perl_ops.append(f"s/^User=.*/User={acct}/")
    w.note(svc, acct, base)
    files = {path: _body(bad), binary: "#!/bin/sh\nexit 0\n"}
    if args.startswith("--config"):
        files[f"{base}/{svc}.conf"] = "# settings\n"
    intent = [
        _f(w, "it runs `{c}` from {d}", c=f"{binary} {args}".rstrip(), d=base),
        _f(w, "it restarts when it fails, {s} seconds apart", s=delay),
        _f(w, "it can be enabled at boot" if scope == "system" else "it can be enabled for your session"),
        _f(w, "its environment has {e}", e=_env_text(env)),
    ]
    if scope == "system":
        intent.append(_f(w, "it runs as {a}", a=acct))
    show = w.pick(("task", "file", "file", "none"))
    log_path = f"/root/{svc}-journal.txt" if scope == "system" else f"{HOME}/{svc}-journal.txt"
    where = w.path_ref(path, "file") if scope == "user" else path
    if show == "file":
        files[log_path] = _body(messages)
        seen = _f(w, "the journal lines are saved in {l}", l=w.path_ref(log_path, "file"))
    elif show == "task":
        seen = _f(w, 'systemd {says|logged}: "{m}"', m=" / ".join(messages))
    else:
        seen = _f(w, "{nobody saved the error|no log was kept}, so read the unit {itself|carefully}")
    want = w.clauses(intent)
    task = w.phrase(
        "{svc} does not come up as it should. {seen_c}. Fix {where} so that {want}. Change nothing else.",
        "The unit {where} is broken: {seen}. Repair it; {want}.",
        "Ticket: {unit} misbehaves ({seen}). Correct the unit file {where}. Intended: {want}.",
        "Could you find what is wrong with {where} and fix it? {seen_c}. What it should do: {want}.",
        svc=svc,
        seen=seen,
        seen_c=_cap(seen),
        where=where,
        want=want,
        unit=unit,
    )
    check = _py(
        {"path": path, "good": _body(good), "uid": 0 if scope == "system" else 1000},
        """
safe_mode(spec["path"], spec["uid"])
got = canon(merged(text(spec["path"])))
want = canon(merged(spec["good"]))
if got != want:
    fail(f"unit is {got!r}, want {want!r}")
""",
    )
    reference = []
    if show == "file":
        reference.append(f"cat {sh(log_path)}")
    how = w.pick(("sed", "sed", "perl", "rewrite"))
    if how == "perl":  # every fix in one perl pass
        fixes = [f"perl -pi -e {quote('; '.join(perl_ops))} {p}"]
    elif how == "rewrite":  # the unit written out whole, as it should read (owner and mode kept: same file)
        fixes = [f"cat > {p} <<'EOF'\n" + "\n".join(good) + "\nEOF"]
    reference += [w.pick((f"cat -n {p}", f"cat {p}")), *fixes, f"cat {p}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=min(4, 2 + len(faults) + (show == "none")),
        files=files,
        setup=setup,
        user="root" if scope == "system" else "operator",
    )


def _subst(w: World, pattern: str, replacement: str, path: str) -> str:
    """A reference command replacing a whole-line regex match in place: sed, sed -E or perl (all in the image)."""
    how = w.pick(("sed", "sed", "sedE", "perl"))
    if how == "perl":
        return f"perl -pi -e 's|{pattern}|{replacement}|' {path}"
    return f"sed -i{' -E' if how == 'sedE' else ''} 's|{pattern}|{_sed_sub(replacement)}|' {path}"


# ---- services-defaults-file -------------------------------------------------------------------------------------------
_OPT_FLAGS = (
    ("--threads", ("2", "4", "8")),
    ("--max-clients", ("200", "500", "1000")),
    ("--cache-size", ("128", "256", "512")),
    ("--log-format", ("json", "logfmt")),
    ("--verbose", ("",)),
    ("--no-color", ("",)),
)


@family(
    "services-defaults-file",
    CATEGORY,
    "edit a service's /etc/default file (a shell fragment its unit sources): set, uncomment, extend options",
)
def defaults_file(w: World) -> Draft:
    svc = _svc(w)
    sh = shell_paths(w)
    acct = _account(svc)
    up = svc.upper()
    operator = w.chance(0.35)
    if operator:
        proj = w.project()
        path = f"{HOME}/{w.pick(('projects/', 'src/', ''))}{proj}/deploy/etc/default/{svc}"
    else:
        path = f"/etc/default/{svc}"
    base_opts = [f"--config /etc/{svc}/{svc}.conf"]
    flags = w.sample(_OPT_FLAGS, 4)
    present, absent = flags[:2], flags[2:]
    for flag, values in present:
        value = w.pick(values)
        base_opts.append(f"{flag} {value}".strip())
    variables: list[tuple[str, str, str]] = [  # name, value, comment above it
        ("ENABLED", "yes", 'Set to "no" to keep the daemon from starting'),
        ("DAEMON_OPTS", " ".join(base_opts), "Extra options passed to the daemon"),
        ("RUN_AS", acct, "Account the daemon runs as"),
        (f"{up}_DATA_DIR", f"/var/lib/{svc}", "Where state is kept"),
        ("LOG_DIR", f"/var/log/{svc}", ""),
        (f"{up}_THREADS", str(w.randint(2, 8)), "Worker threads"),
    ]
    variables = [v for v in variables if v[0] in ("DAEMON_OPTS", "RUN_AS") or w.chance(0.7)]
    commented = (f"{up}_HEAP", w.pick(("512m", "256m")))
    lines = [
        f"# Defaults for {svc}, sourced by /etc/init.d/{svc} and by {svc}.service (EnvironmentFile=).",
        "# This is a POSIX shell fragment.",
        "",
    ]
    for name, value, note in variables:
        if note:
            lines.append(f"# {note}")
        lines.append(f'{name}="{value}"' if " " in value or name == "DAEMON_OPTS" else f"{name}={value}")
        if name == "RUN_AS":
            lines += ["", "# Heap size (default: chosen by the daemon)", f"#{commented[0]}={commented[1]}"]
        lines.append("")
    kinds = ["set", "uncomment", "addopt", "rmopt", "newvar"]
    if any(v[0] == "ENABLED" for v in variables):
        kinds.append("disable")
    kind = w.pick(kinds)
    expect = {name: value for name, value, _ in variables}
    words: dict[str, list[str]] = {"DAEMON_OPTS": " ".join(base_opts).split()}
    p = sh(path)
    w.note(svc, acct)
    if kind == "set":
        name, old, _ = w.pick([v for v in variables if v[0] not in ("DAEMON_OPTS", "ENABLED")])
        if name == "RUN_AS":
            new = w.pick((f"{svc}-svc", "www-data", f"{svc}app"))
        elif name.endswith("_THREADS"):
            new = str(int(old) * 2)
        else:
            new = old.replace("/var/", w.pick(("/srv/", "/data/", "/mnt/storage/")))
        w.note(new)
        expect[name] = new
        ask = _f(w, "{set|change} {n} to {v} (it is {o} now)", n=name, v=new, o=old)
        fix = [_subst(w, f"^{name}=.*", f"{name}={new}", p)]
    elif kind == "disable":
        expect["ENABLED"] = "no"
        ask = _f(
            w, "{keep|stop} {s} from starting{| at boot} by switching ENABLED off (no) in that file", s=svc
        )
        fix = [_subst(w, "^ENABLED=yes$", "ENABLED=no", p)]
    elif kind == "uncomment":
        value = w.pick(("1g", "2g", "768m", "1536m"))
        w.note(value)
        expect[commented[0]] = value
        ask = _f(
            w,
            "{turn on|enable} the {heap|memory} setting {h} that is commented out there, with the value {v}",
            h=commented[0],
            v=value,
        )
        fix = [_subst(w, f"^#{commented[0]}=.*", f"{commented[0]}={value}", p)]
    elif kind == "addopt":
        flag, values = w.pick(absent)
        value = w.pick(values)
        add = f"{flag} {value}".strip()
        w.note(add)
        words["DAEMON_OPTS"] = words["DAEMON_OPTS"] + add.split()
        expect.pop("DAEMON_OPTS")
        ask = _f(
            w, "{add|append} `{a}` to the daemon's options (DAEMON_OPTS), keeping the options it has", a=add
        )
        fix = [f'sed -i \'s/^DAEMON_OPTS="\\(.*\\)"$/DAEMON_OPTS="\\1 {add}"/\' {p}']
    elif kind == "rmopt":
        flag, _ = w.pick(present)
        drop = next(o for o in base_opts if o.split()[0] == flag)
        w.note(drop)
        words["DAEMON_OPTS"] = " ".join(o for o in base_opts if o != drop).split()
        expect.pop("DAEMON_OPTS")
        ask = _f(w, "{remove|drop} `{d}` from DAEMON_OPTS (the other options stay, in order)", d=drop)
        fix = [f"sed -i 's| {_sed_re(drop)}||' {p}"]
    else:
        name, value = w.pick(
            (
                (f"{up}_TMPDIR", f"/var/tmp/{svc}"),
                ("TZ", "UTC"),
                (f"{up}_MAX_UPLOAD_MB", str(w.pick((16, 64, 100)))),
                (f"{up}_PROFILE", w.pick(("production", "low-memory"))),
            )
        )
        w.note(name, value)
        expect[name] = value
        ask = _f(w, "{add|define} a new variable {n} with the value {v}", n=name, v=value)
        fix = [
            w.pick(
                (
                    f"echo '{name}={value}' >> {p}",
                    f"printf '%s\\n' '{name}={value}' >> {p}",
                    f"echo '{name}={value}' | tee -a {p}",
                    f"sed -i '$a {name}={value}' {p}",
                )
            )
        ]
    where = w.path_ref(path, "file") if operator else path
    task = w.phrase(
        "In {where}, the defaults file of {svc}, {ask}. Every other setting stays as it is.",
        "{svc}'s unit sources {where}. {ask_c}; leave the rest of the file alone.",
        "Ticket: {ask} in {where} ({svc}'s defaults). Nothing else in that file changes.",
        "Could you edit {where} for {svc}? {ask_c}, and keep every other variable as it is.",
        "{svc} reads its start-up settings from {where}: {ask}. The other lines stay.",
        where=where,
        svc=svc,
        ask=ask,
        ask_c=_cap(ask),
    )
    names = sorted({*expect, *words, *(v[0] for v in variables), commented[0]})
    spec = {
        "path": path,
        "expect": expect,
        "words": words,
        "names": names,
        "unset": [n for n in names if n not in expect and n not in words],
        "uid": 1000 if operator else 0,
    }
    check = _py(
        spec,
        r"""
p = spec["path"]
safe_mode(p, spec["uid"])
probe = 'set -a; . "$1" >/dev/null 2>&1; for v in ' + " ".join(spec["names"]) + \
    '; do if [ -n "${!v+x}" ]; then printf "%s=%s\\0" "$v" "${!v}"; fi; done'
out = subprocess.run(["env", "-i", "bash", "-c", probe, "_", p], capture_output=True, text=True, timeout=20).stdout
got = dict(item.split("=", 1) for item in out.split("\0") if "=" in item)
for name, value in spec["expect"].items():
    if got.get(name) != value:
        fail(f"{name} is {got.get(name)!r}, want {value!r}")
for name, value in spec["words"].items():
    if got.get(name, "").split() != value:
        fail(f"{name} is {got.get(name)!r}, want the words {value!r}")
for name in spec["unset"]:
    if name in got:
        fail(f"{name} must stay unset")
body = text(p)
for name in [*spec["expect"], *spec["words"]]:
    n = len(re.findall(rf"^[ \t]*(export[ \t]+)?{name}=", body, re.M))
    if n != 1:
        fail(f"{name} is assigned {n} times")
""",
    )
    reference = [w.pick((f"cat {p}", f"grep -v '^#' {p}", f"grep -n = {p}")), *fix, f"cat {p}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if kind in ("set", "disable", "newvar") else 3,
        files={path: _body(lines)},
        user="operator" if operator else "root",
    )


# ---- services-logrotate-config --------------------------------------------------------------------------------------
_LOGROTATE_LIB = r"""
def lr_parse(body):
    stanzas, glob_dirs, cur, script, pending = [], [], None, False, []
    for raw in body.splitlines():
        line = raw.strip()
        if script:
            if line == "endscript":
                script = False
            continue
        if not line or line.startswith("#"):
            continue
        if line.endswith("{"):
            paths = pending + line[:-1].split()
            pending = []
            cur = (tuple(sorted(paths)), [])
            stanzas.append(cur)
            continue
        if line == "}":
            cur = None
            continue
        words = line.split()
        if words[0] in ("postrotate", "prerotate", "firstaction", "lastaction", "preremove"):
            script = True
            continue
        if cur is None and words[0].startswith("/"):
            pending += words
            continue
        (cur[1] if cur is not None else glob_dirs).append(words)
    return stanzas, glob_dirs


FREQ = {"hourly", "daily", "weekly", "monthly", "yearly"}


def lr_norm(directives):
    out = {}
    for words in directives:
        key, args = words[0], words[1:]
        if key in FREQ:
            out.setdefault("@freq", []).append(key)
        elif key == "create" and args:
            mode = str(int(args[0], 8)) if re.fullmatch(r"[0-7]{3,4}", args[0]) else args[0]
            out["create"] = " ".join([mode, *args[1:]])
        elif key in ("size", "maxsize", "minsize") and args:
            m = re.fullmatch(r"(\d+)([kKmMgG]?)", args[0])
            out[key] = (int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[m.group(2).lower()]
                        if m else args[0])
        elif key == "rotate" and args:
            out["rotate"] = int(args[0]) if args[0].isdigit() else args[0]
        else:
            out[key] = " ".join(args)
    return out
"""


@family(
    "services-logrotate-config",
    CATEGORY,
    "write or change a logrotate stanza for a service's logs (frequency, retention, compression, create/su)",
)
def logrotate_config(w: World) -> Draft:
    svc = _svc(w)
    sh = shell_paths(w)
    acct = _account(svc)
    operator = w.chance(0.3)
    setup: list[str] = []
    files: dict[str, str] = {}
    if operator:
        proj = w.project()
        root = f"{HOME}/{w.pick(('projects/', 'apps/', ''))}{proj}"
        path = f"{root}/ops/logrotate.conf"
        logdir = f"{root}/logs"
        owner = "operator"
        files[f"{logdir}/{svc}.log"] = "started\n"
    else:
        path = f"/etc/logrotate.d/{svc}"
        logdir = f"/var/log/{svc}"
        owner = acct
        setup += [
            _add_account(acct, f"/var/lib/{svc}"),
            f"mkdir -p {logdir} /etc/logrotate.d && chown {acct}:adm {logdir} && chmod 750 {logdir}",
        ]
        other = _svc(w)
        files[f"/etc/logrotate.d/{other}"] = _body(
            [f"/var/log/{other}/*.log {{", "    weekly", "    rotate 4", "    compress", "    missingok", "}"]
        )
    paths = [f"{logdir}/*.log"]
    if w.chance(0.3):
        paths.append(f"{logdir}/{w.pick(('audit', 'access', 'slow'))}.json")
    variant = w.pick(("create", "create", "edit"))
    edits: list[str] = []
    want: dict[str, object] = {}
    asks: list[str] = []
    freq = w.pick(("daily", "weekly", "monthly"))
    keep = w.pick((4, 5, 7, 10, 14, 30, 52))
    w.note(svc, acct, keep)
    body: list[str] = []
    original: list[str] = []
    if variant == "create":
        want["@freq"] = [freq]
        want["rotate"] = keep
        asks.append(_f(w, "{rotate them {f}|a {f} rotation}", f=freq))
        asks.append(_f(w, "{keep {k} old copies|{k} rotated files are kept, older ones deleted}", k=keep))
        body += [freq, f"rotate {keep}"]
        if w.chance(0.7):
            delay = w.chance(0.4)
            asks.append(
                _f(w, "old copies are compressed")
                + (" " + _f(w, "(but not the newest one, one cycle later)") if delay else "")
            )
            want["compress"] = ""
            body.append("compress")
            if delay:
                want["delaycompress"] = ""
                body.append("delaycompress")
        if w.chance(0.6):
            asks.append(_f(w, "a missing log is not an error"))
            want["missingok"] = ""
            body.append("missingok")
        if w.chance(0.5):
            asks.append(_f(w, "empty logs are not rotated"))
            want["notifempty"] = ""
            body.append("notifempty")
        mode = w.pick(("copytruncate", "create", "create", ""))
        if mode == "copytruncate":
            asks.append(
                _f(
                    w,
                    "the {app|service} keeps its log open and cannot reopen it, so copy and truncate in place",
                )
            )
            want["copytruncate"] = ""
            want["!create"] = ""
            body.append("copytruncate")
        elif mode == "create":
            perm = w.pick(("0640", "0644", "0600"))
            group = "adm" if not operator else "operator"
            asks.append(
                _f(w, "a fresh log is created with mode {m}, owned by {o}:{g}", m=perm, o=owner, g=group)
            )
            want["create"] = f"{int(perm, 8)} {owner} {group}"
            want["!copytruncate"] = ""
            body.append(f"create {perm} {owner} {group}")
        if not operator and w.chance(0.6):
            asks.append(_f(w, "since {d} belongs to {a}, rotation runs as {a}:adm (su)", d=logdir, a=acct))
            want["su"] = f"{acct} adm"
            body.append(f"su {acct} adm")
        if w.chance(0.3):
            size = w.pick(("50M", "100M", "500M", "1G"))
            w.note(size)
            asks.append(_f(w, "a log is also rotated early once it passes {s} (maxsize)", s=size))
            want["maxsize"] = size
            body.append(f"maxsize {size}")
        if w.chance(0.3):
            asks.append(_f(w, "rotated files get a date suffix instead of a number"))
            want["dateext"] = ""
            body.append("dateext")
        stanza_lines: list[str] = []
    else:
        old_freq = w.pick([f for f in ("daily", "weekly", "monthly") if f != freq])
        old_keep = w.pick([k for k in (3, 4, 6, 8, 12) if k != keep])
        start = [old_freq, f"rotate {old_keep}", "missingok", "notifempty"]
        if w.chance(0.5):
            start.append("delaycompress")
        if not operator:
            start += [f"create 0640 {acct} adm"]
        original = list(start)
        changes = w.sample(["freq", "keep", "compress", "path"], w.pick((1, 2, 2)))
        body = list(start)
        p = sh(path)
        for c in changes:
            if c == "freq":
                asks.append(_f(w, "{rotate|switch it to} {f} instead of {o}", f=freq, o=old_freq))
                body[0] = freq
                edits.append(f"sed -i 's/^\\( *\\){old_freq}$/\\1{freq}/' {p}")
            elif c == "keep":
                asks.append(_f(w, "keep {k} old copies instead of {o}", k=keep, o=old_keep))
                body[1] = f"rotate {keep}"
                edits.append(f"sed -i 's/rotate {old_keep}$/rotate {keep}/' {p}")
            elif c == "compress":
                asks.append(_f(w, "{compress the old copies|turn compression on}"))
                body.append("compress")
                edits.append(f"sed -i '/^ *}}/i\\    compress' {p}")
            else:
                extra = f"{logdir}/{w.pick(('worker', 'jobs', 'error'))}.txt"
                w.note(extra)
                asks.append(_f(w, "{also cover {x} with the same rules|add {x} to the same block}", x=extra))
                edits.append(f"sed -i '1s| {{$| {_sed_sub(extra)} {{|' {p}")
        want = {"@all": True}
        new_paths = [*paths, extra] if "path" in changes else list(paths)
        stanza_lines = [" ".join(paths) + " {", *(f"    {d}" for d in original), "}"]
    target_paths = new_paths if variant == "edit" else paths
    if variant == "edit":
        files[path] = _body(stanza_lines)
    bad_mode = variant == "edit" and not operator and w.chance(0.4)
    if bad_mode:
        setup.append(f"chmod 664 {path}")
    spec = {
        "path": path,
        "paths": sorted(target_paths),
        "want": want,
        "body": body,
        "uid": 1000 if operator else 0,
        "keep": {p: _md5(b) for p, b in files.items() if p != path and p.startswith("/etc/")},
    }
    check = _py(
        spec,
        _LOGROTATE_LIB
        + """
p = spec["path"]
safe_mode(p, spec["uid"])
same_files(spec["keep"])
stanzas, _ = lr_parse(text(p))
hits = [s for s in stanzas if set(s[0]) & set(spec["paths"])]
if len(hits) != 1 or list(hits[0][0]) != spec["paths"]:
    fail(f"want one block for exactly {spec['paths']}, got {[s[0] for s in stanzas]}")
got = lr_norm(hits[0][1])
want = spec["want"]
if want.get("@all"):
    if got != lr_norm([line.split() for line in spec["body"]]):
        fail(f"block is {got!r}")
else:
    for key, value in want.items():
        if key.startswith("!"):
            if key[1:] in got:
                fail(f"{key[1:]} must not be set")
        elif key in ("size", "maxsize", "minsize"):
            if got.get(key) != lr_norm([[key, value]])[key]:
                fail(f"{key} is {got.get(key)!r}")
        elif got.get(key) != value:
            fail(f"{key} is {got.get(key)!r}, want {value!r}")
""",
    )
    where = w.path_ref(path, "file") if operator else path
    files_text = " and ".join(target_paths if variant == "create" else paths)
    ask = w.clauses(asks)
    if variant == "create":
        task = w.phrase(
            "Write a logrotate {config|configuration} {at|in} {where} for {files}: {ask}.",
            "The logs of {svc} ({files}) are never rotated. {Add|Create} {where} so that logrotate handles them: "
            "{ask}.",
            "Ticket: logrotate rules for {svc}. {Create|Write} {where} covering {files}; {ask}.",
            "Could you set up log rotation for {files} in {where}? {ask_c}.",
            where=where,
            files=files_text,
            svc=svc,
            ask=ask,
            ask_c=_cap(ask),
        )
    else:
        mode_note = (
            " " + _f(w, "logrotate {also |}complains that the file is writable by its group, and skips it.")
            if bad_mode
            else ""
        )
        task = w.phrase(
            "Change the logrotate rules for {svc} in {where}: {ask}. The other settings of that block stay.{note}",
            "{where} rotates {files}. {ask_c}; keep its other directives.{note}",
            "Ticket: {svc} log retention. In {where}, {ask}; nothing else in the block changes.{note}",
            "Could you adjust {where}? {ask_c}. Everything else stays as it is.{note}",
            where=where,
            files=files_text,
            svc=svc,
            ask=ask,
            ask_c=_cap(ask),
            note=mode_note,
        )
    p = sh(path)
    reference: list[str] = []
    if variant == "create":
        if operator:
            reference.append(f"mkdir -p {sh(posixpath.dirname(path))}")
        else:
            reference.append(w.pick(("ls /etc/logrotate.d", f"ls -ld {logdir}")))
        lines = [" ".join(paths) + " {", *(f"    {d}" for d in body), "}"]
        reference += [_write(w, p, lines), f"cat {p}"]
    else:
        reference.append(w.pick((f"cat {p}", f"ls -l {p} && cat {p}")))
        if bad_mode:
            reference.append(f"chmod 644 {p}")
        if w.chance(0.25):
            lines = [" ".join(new_paths) + " {", *(f"    {d}" for d in body), "}"]
            edits = [_write(w, p, lines)]
        reference += [*edits, f"cat {p}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if bad_mode or len(asks) > 4 else 2,
        files=files,
        setup=setup,
        user="operator" if operator else "root",
    )


# ---- services-supervisor-program ------------------------------------------------------------------------------------
_SUPERVISOR_LIB = r"""
import configparser


def sup_read(path):
    cp = configparser.RawConfigParser(inline_comment_prefixes=(";",), strict=False)
    try:
        cp.read_string(text(path), source=path)
    except configparser.Error as exc:
        fail(f"{path} does not parse: {exc}")
    return cp


def sup_env(value):
    out, key, buf, quote_ch, mode = {}, "", "", "", "key"
    for ch in value + ",":
        if quote_ch:
            if ch == quote_ch:
                quote_ch = ""
            else:
                buf += ch
        elif ch in "\"'":
            quote_ch = ch
        elif ch == "=" and mode == "key":
            key, buf, mode = buf.strip(), "", "value"
        elif ch == ",":
            if mode == "value":
                out[key] = buf.strip() if not buf.startswith(" ") else buf.strip()
            elif buf.strip():
                fail(f"bad environment entry {buf!r}")
            key, buf, mode = "", "", "key"
        else:
            buf += ch
    return out


BOOLS = {"true": "true", "yes": "true", "on": "true", "1": "true", "false": "false", "no": "false", "off": "false",
         "0": "false"}


def sup_norm(section):
    out = {}
    for key, value in section.items():
        value = value.strip()
        if key == "environment":
            out[key] = sup_env(value)
        elif key == "command":
            out[key] = shlex.split(value)
        elif value.lower() in BOOLS and key not in ("numprocs", "priority", "startsecs", "stopwaitsecs",
                                                     "startretries"):
            out[key] = BOOLS[value.lower()]
        else:
            out[key] = value
    return out
"""


@family(
    "services-supervisor-program",
    CATEGORY,
    "write or change a supervisor [program:x] section (command, directory, user, autorestart, environment, numprocs)",
)
def supervisor_program(w: World) -> Draft:
    svc = _svc(w)
    sh = shell_paths(w)
    acct = _account(svc)
    operator = w.chance(0.35)
    setup: list[str] = []
    files: dict[str, str] = {}
    name = w.pick((svc, f"{svc}-worker", f"{svc}_queue", f"{svc}-web"))
    if operator:
        proj = w.project()
        root = f"{HOME}/{w.pick(('projects/', 'apps/', ''))}{proj}"
        sup = f"{root}/supervisor"
        conf_dir = f"{sup}/conf.d"
        base = root
        files[f"{sup}/supervisord.conf"] = _body(
            [
                "[unix_http_server]",
                f"file={root}/run/supervisor.sock",
                "",
                "[supervisord]",
                f"logfile={root}/logs/supervisord.log",
                f"pidfile={root}/run/supervisord.pid",
                "",
                "[include]",
                "files = conf.d/*.conf",
            ]
        )
        logdir = f"{root}/logs"
    else:
        sup = "/etc/supervisor"
        conf_dir = "/etc/supervisor/conf.d"
        base = w.pick((f"/srv/{svc}", f"/opt/{svc}"))
        setup.append(_add_account(acct, base))
        files["/etc/supervisor/supervisord.conf"] = _body(
            [
                "[unix_http_server]",
                "file=/var/run/supervisor.sock",
                "chmod=0700",
                "",
                "[supervisord]",
                "logfile=/var/log/supervisor/supervisord.log",
                "pidfile=/var/run/supervisord.pid",
                "childlogdir=/var/log/supervisor",
                "",
                "[include]",
                "files = /etc/supervisor/conf.d/*.conf",
            ]
        )
        logdir = f"/var/log/{svc}"
    path = f"{conf_dir}/{name}.conf"
    command = w.pick(
        (
            f"{base}/venv/bin/celery -A {svc} worker --concurrency {w.randint(2, 8)}",
            f"{base}/bin/{svc} --config {base}/{svc}.yml",
            f"/usr/bin/python3 {base}/manage.py run_{w.pick(('worker', 'consumer', 'scheduler'))}",
            f"/usr/bin/node {base}/dist/{w.pick(('worker', 'server', 'queue'))}.js",
        )
    )
    w.note(svc, name, acct, base)
    other = _svc(w)
    files[f"{conf_dir}/{other}.conf"] = _body(
        [f"[program:{other}]", f"command=/usr/bin/{other} --foreground", "autostart=true", "autorestart=true"]
    )
    variant = w.pick(("create", "create", "edit"))
    asks: list[str] = []
    section: dict[str, object] = {}
    lines: list[str] = [f"[program:{name}]"]
    edits: list[str] = []
    p = sh(path)
    if variant == "create":
        asks.append(_f(w, "{it runs|the command is} `{c}`", c=command))
        section["command"] = command.split()
        lines.append(f"command={command}")
        if w.chance(0.7):
            asks.append(_f(w, "it {runs in|starts from} {d}", d=base))
            section["directory"] = base
            lines.append(f"directory={base}")
        if not operator and w.chance(0.8):
            asks.append(_f(w, "it runs as {a}", a=acct))
            section["user"] = acct
            lines.append(f"user={acct}")
        if w.chance(0.7):
            asks.append(_f(w, "it starts {with supervisord|when supervisord starts}"))
            section["autostart"] = "true"
            lines.append("autostart=true")
        restart = w.pick(("true", "unexpected", ""))
        if restart:
            asks.append(
                _f(w, "{it is restarted whenever it exits|supervisor always restarts it}")
                if restart == "true"
                else _f(w, "it is restarted only when it exits with an unexpected exit code")
            )
            section["autorestart"] = restart
            lines.append(f"autorestart={restart}")
        if w.chance(0.4):
            n = w.pick((5, 10, 15))
            asks.append(_f(w, "it counts as started after {n} seconds up", n=n))
            section["startsecs"] = str(n)
            lines.append(f"startsecs={n}")
        env = _env(w, svc, w.pick((0, 1, 2)))
        if env:
            asks.append(_f(w, "{its environment has|it gets} {e}", e=_env_text(env)))
            section["environment"] = env
            lines.append("environment=" + ",".join(f'{k}="{v}"' for k, v in env.items()))
        log = f"{logdir}/{name}.log"
        if w.chance(0.6):
            asks.append(_f(w, "stdout and stderr {both go|go together} to {l}", l=log))
            section["redirect_stderr"] = "true"
            section["stdout_logfile"] = log
            lines += ["redirect_stderr=true", f"stdout_logfile={log}"]
            if not operator:
                setup.append(f"mkdir -p {logdir}")
        if w.chance(0.25):
            n = w.randint(2, 4)
            asks.append(_f(w, "{n} copies of it run{|, each with its own process name}", n=n))
            section["numprocs"] = str(n)
            section["@procname"] = True
            lines += ["process_name=%(program_name)s_%(process_num)02d", f"numprocs={n}"]
        expect: dict[str, object] = {"subset": section}
        edits = [_write(w, p, lines)]
    else:
        start_env = _env(w, svc, 1)
        start = {
            "command": command,
            "directory": base,
            **({"user": acct} if not operator else {}),
            "autostart": "true",
            "autorestart": w.pick(("false", "unexpected")),
            "environment": ",".join(f'{k}="{v}"' for k, v in start_env.items()),
            "stdout_logfile": f"{logdir}/{name}.log",
        }
        files[path] = _body([f"[program:{name}]", *(f"{k}={v}" for k, v in start.items())])
        if not operator:
            setup.append(f"mkdir -p {logdir}")
        final: dict[str, object] = {k: v for k, v in start.items() if k != "environment"}
        final_env = dict(start_env)
        changes = w.sample(["restart", "env", "numprocs", "stopwait", "command"], w.pick((1, 2)))
        for c in changes:
            if c == "restart":
                asks.append(
                    _f(
                        w,
                        "{it must always be restarted when it exits|make supervisor restart it every time "
                        "it exits} (it is {o} now)",
                        o=f"autorestart={start['autorestart']}",
                    )
                )
                final["autorestart"] = "true"
                edits.append(f"sed -i 's/^autorestart=.*/autorestart=true/' {p}")
            elif c == "env":
                extra = _env(w, svc, 1, avoid=list(start_env))
                k, v = next(iter(extra.items()))
                asks.append(
                    _f(
                        w,
                        "{add|also set} {e} in its environment, keeping {o}",
                        e=_env_text(extra),
                        o=" and ".join(start_env),
                    )
                )
                final_env.update(extra)
                edits.append(f"sed -i 's|^environment=.*|&,{k}=\"{_sed_sub(v)}\"|' {p}")
            elif c == "numprocs":
                n = w.randint(2, 4)
                hint = w.chance(0.5)
                asks.append(
                    _f(w, "run {n} copies of it", n=n)
                    + (" " + _f(w, "(each copy needs its own process name)") if hint else "")
                )
                final["numprocs"] = str(n)
                final["@procname"] = True
                edits.append(
                    f"printf '%s\\n' 'process_name=%(program_name)s_%(process_num)02d' 'numprocs={n}' >> {p}"
                )
            elif c == "stopwait":
                n = w.pick((20, 30, 60))
                asks.append(
                    _f(
                        w,
                        "{give it {n} seconds to stop before it is killed|let it take up to {n} seconds to "
                        "stop}",
                        n=n,
                    )
                )
                final["stopwaitsecs"] = str(n)
                edits.append(f"echo 'stopwaitsecs={n}' >> {p}")
            else:
                flag = w.pick(("--loglevel warning", "--max-tasks-per-child 100", "--quiet"))
                w.note(flag)
                asks.append(_f(w, "{append|add} `{f}` to its command", f=flag))
                final["command"] = f"{command} {flag}"
                edits.append(f"sed -i 's|^command=.*|& {flag}|' {p}")
        exact = {k: (v if k != "command" else str(v).split()) for k, v in final.items()}
        expect = {"exact": {**exact, "environment": final_env}}
    ask = w.clauses(asks)
    where = w.path_ref(path, "file") if operator else path
    which = (
        _f(w, "{the project's own supervisord|a supervisord run from the project}")
        if operator
        else "supervisord"
    )
    if variant == "create":
        task = w.phrase(
            "Add a supervisor program {n} in {where}: {ask}.",
            "{which} should manage {n}. Write its program section to {where}; {ask}.",
            "Ticket: {n} must run under {which}. {Create|Write} {where} with a [program:{n}] section: {ask}.",
            "Could you {create|write} {where} so that {which} runs {n}? {ask_c}.",
            n=name,
            where=where,
            which=which,
            ask=ask,
            ask_c=_cap(ask),
        )
    else:
        task = w.phrase(
            "In {where}, change the supervisor program {n}: {ask}. Its other settings stay.",
            "{which} runs {n} from {where}. {ask_c}; keep the rest of the section.",
            "Ticket: adjust [program:{n}] in {where}. {ask_c}. Nothing else changes.",
            "Could you update {n}'s program section in {where}? {ask_c}.",
            n=name,
            where=where,
            which=which,
            ask=ask,
            ask_c=_cap(ask),
        )
    keep = {q: _md5(b) for q, b in files.items() if q != path}
    spec = {
        "path": path,
        "section": f"program:{name}",
        "expect": expect,
        "keep": keep,
        "uid": 1000 if operator else 0,
    }
    check = _py(
        spec,
        _SUPERVISOR_LIB
        + """
same_files(spec["keep"])
safe_mode(spec["path"], spec["uid"])
cp = sup_read(spec["path"])
if spec["section"] not in cp:
    fail("no such program section")
got = sup_norm(dict(cp[spec["section"]]))
if "exact" in spec["expect"]:
    want = dict(spec["expect"]["exact"])
    procname = want.pop("@procname", False)
    if procname:
        if "%(process_num)" not in got.pop("process_name", ""):
            fail("process_name must contain %(process_num)")
    if got != sup_norm({k: v for k, v in want.items() if k not in ("command", "environment")}) | {
            k: want[k] for k in ("command", "environment") if k in want}:
        fail(f"section is {got!r}, want {want!r}")
else:
    for key, value in spec["expect"]["subset"].items():
        if key == "@procname":
            if "%(process_num)" not in got.get("process_name", ""):
                fail("process_name must contain %(process_num)")
        elif key == "environment":
            if any(got.get(key, {}).get(k) != v for k, v in value.items()):
                fail(f"environment is {got.get(key)!r}")
        elif key == "command":
            if got.get(key) != value:
                fail(f"command is {got.get(key)!r}")
        elif got.get(key) != sup_norm({key: value})[key]:
            fail(f"{key} is {got.get(key)!r}, want {value!r}")
""",
    )
    reference = [w.pick((f"ls {sh(conf_dir)}", f"cat {sh(sup)}/supervisord.conf"))]
    if variant == "edit":
        reference.append(f"cat {p}")
    reference += [*edits, f"cat {p}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if len(asks) <= 3 else 3,
        files=files,
        setup=setup,
        user="operator" if operator else "root",
    )


# ---- services-confd-precedence --------------------------------------------------------------------------------------
_KEYS = (
    ("max_connections", ("100", "250", "500", "1000")),
    ("cache_size_mb", ("64", "128", "256", "512")),
    ("log_level", ("info", "warning", "debug", "error")),
    ("worker_threads", ("2", "4", "8", "16")),
    ("queue_depth", ("50", "100", "200")),
    ("request_timeout", ("15s", "30s", "60s")),
    ("retention_days", ("7", "14", "30", "90")),
    ("batch_size", ("100", "500", "1000")),
    ("compression", ("on", "off")),
    ("flush_interval", ("1s", "5s", "10s")),
)

_CONFD_LIB = r"""
def confd_load(main):
    eff = {}
    for raw in text(main).splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.split()[0] == "include":
            for f in sorted(glob.glob(line.split(None, 1)[1].strip())):
                for key, value in kv_lines(text(f), "="):
                    eff[key] = value
            continue
        key, _, value = line.partition("=")
        eff[key.strip()] = value.strip()
    return eff
"""


@family(
    "services-confd-precedence",
    CATEGORY,
    "work with a service's conf.d include folder: which file wins, add an override read last, disable or reorder a "
    "snippet",
)
def confd_precedence(w: World) -> Draft:
    svc = _svc(w)
    sh = shell_paths(w)
    operator = w.chance(0.35)
    if operator:
        root = f"{HOME}/{w.pick(('projects/', 'apps/', ''))}{w.project()}/config"
    else:
        root = w.pick((f"/etc/{svc}", f"/opt/{svc}/etc"))
    main = f"{root}/{svc}.conf"
    confd = f"{root}/conf.d"
    keys = w.sample(_KEYS, 6)
    values = {k: w.pick(v) for k, v in keys}
    main_keys = [k for k, _ in keys[:3]]
    main_lines = [f"# {svc} configuration", *(f"{k} = {values[k]}" for k in main_keys)]
    if w.chance(0.5):
        main_lines.append(
            "# Files in conf.d are read in alphabetical order; a later file overrides an earlier one."
        )
    main_lines.append(f"include {confd}/*.conf")
    # the snippets: (name, {key: value}); the target key is set in several of them
    target, choices = w.pick(keys[:4])
    snippet_names = w.sample(
        [
            "10-defaults",
            "20-site",
            "50-tuning",
            "60-" + w.pick(PROJECTS),
            "80-vendor",
            "9-local",
            "local",
            "99-overrides",
            "30-" + svc,
        ],
        w.randint(3, 4),
    )
    snippets: dict[str, dict[str, str]] = {}
    for name in snippet_names:
        snippet: dict[str, str] = {}
        for k, vals in w.sample(keys, w.randint(1, 3)):
            snippet[k] = w.pick(vals)
        snippets[name] = snippet
    setters = w.sample(snippet_names, min(len(snippet_names), w.randint(2, 3)))
    for name in setters:
        snippets[name][target] = w.pick(choices)
    files = {main: _body(main_lines)}
    for name, kv in snippets.items():
        files[f"{confd}/{name}.conf"] = _body([f"# {name}", *(f"{k} = {v}" for k, v in kv.items())])
    decoy = f"{confd}/{w.pick(('40-experimental.conf.disabled', 'old.conf.bak', '95-test.conf.dpkg-old'))}"
    files[decoy] = _body([f"{target} = {w.pick(choices)}"])
    files[f"{confd}/README"] = f"{target} = see the .conf files\n"

    def effective(snips: dict[str, dict[str, str]]) -> dict[str, str]:
        eff = {k: values[k] for k in main_keys}
        for name in sorted(f"{n}.conf" for n in snips):
            eff.update(snips[name[: -len(".conf")]])
        return eff

    order = sorted(f"{n}.conf" for n in snippets)
    variant = w.pick(("report", "override", "disable", "reorder"))
    w.note(svc, target, *snippet_names)
    keep = {p: _md5(b) for p, b in files.items()}
    spec: dict[str, object] = {"main": main, "confd": confd}
    where = w.path_ref(root) if operator else root
    reference = [f"ls {sh(confd)}", f"grep -n {target} {sh(confd)}/*.conf"]
    if variant == "report":
        out = f"{HOME}/{svc}-{target}.txt" if operator else f"/root/{svc}-{target}.txt"
        value = effective(snippets)[target]
        spec.update({"out": out, "value": value, "keep": keep})
        ask = _f(
            w,
            "{find out|work out} which value of {t} {svc} {actually uses|ends up with} and write just that "
            "value to {o}",
            t=target,
            svc=svc,
            o=w.path_ref(out, "file") if operator else out,
        )
        code = """
same_files(spec["keep"])
try:
    got = open(spec["out"]).read().strip()
except OSError:
    fail("no answer file")
if got != spec["value"]:
    fail(f"answer {got!r}, want {spec['value']!r}")
"""
        last = [n for n in order if target in snippets[n[:-5]]][-1]
        reference += [
            f"ls {sh(confd)}/*.conf | sort",
            f"sed -n 's/^{target} = //p' {sh(confd)}/{last} > {sh(out)}",
            f"cat {sh(out)}",
        ]
        difficulty = 2
    elif variant == "override":
        new_value = w.pick([v for v in choices if v != effective(snippets)[target]] or choices)
        want = effective(snippets)
        want[target] = new_value
        spec.update({"want": want, "keep": keep})
        ask = _f(
            w,
            "make {svc} use {t} = {v} {without editing any existing file|leaving the existing files as they "
            "are}: add a snippet of your own that is read after all the others",
            svc=svc,
            t=target,
            v=new_value,
        )
        code = """
same_files(spec["keep"])
got = confd_load(spec["main"])
if got != spec["want"]:
    fail(f"effective settings {got!r}, want {spec['want']!r}")
"""
        name = w.pick(("99-local.conf", "zz-override.conf", "999-local.conf"))
        if name <= order[-1]:
            name = "zz-" + name
        reference.append(_write(w, f"{sh(confd)}/{name}", [f"{target} = {new_value}"]))
        difficulty = 2
    elif variant == "disable":
        victim = w.pick(snippet_names)
        rest = {n: kv for n, kv in snippets.items() if n != victim}
        spec.update(
            {
                "want": effective(rest),
                "keep": {p: d for p, d in keep.items() if p != f"{confd}/{victim}.conf"},
                "gone": f"{confd}/{victim}.conf",
                "digest": keep[f"{confd}/{victim}.conf"],
            }
        )
        ask = _f(
            w,
            "{stop|keep} {v}.conf from being {loaded|read} {without deleting it|but keep it in conf.d}: rename "
            "it so that the include no longer matches it",
            v=victim,
        )
        code = """
same_files(spec["keep"])
if os.path.exists(spec["gone"]):
    fail("the snippet is still there under its name")
kept = [p for p in glob.glob(os.path.join(spec["confd"], "*")) if md5(p) == spec["digest"]]
if not kept or any(p.endswith(".conf") for p in kept):
    fail("the snippet must stay in conf.d under a name that does not end in .conf")
got = confd_load(spec["main"])
if got != spec["want"]:
    fail(f"effective settings {got!r}, want {spec['want']!r}")
"""
        reference.append(
            f"mv {sh(confd)}/{victim}.conf {sh(confd)}/{victim}.conf.{w.pick(('disabled', 'off', 'bak'))}"
        )
        difficulty = 2
    else:
        loser = w.pick(order[:-1])[:-5]
        moved = dict(snippets)
        newname = "zz-" + loser.split("-", 1)[-1]
        moved = {**{n: kv for n, kv in snippets.items() if n != loser}, newname: snippets[loser]}
        spec.update(
            {
                "want": effective(moved),
                "keep": {p: d for p, d in keep.items() if p != f"{confd}/{loser}.conf"},
                "gone": f"{confd}/{loser}.conf",
                "digest": keep[f"{confd}/{loser}.conf"],
            }
        )
        ask = _f(
            w,
            "the settings in {l}.conf {lose|are overridden}: rename it (content unchanged) so that it is read "
            "after every other snippet",
            l=loser,
        )
        code = """
same_files(spec["keep"])
if os.path.exists(spec["gone"]):
    fail("the snippet is still there under its old name")
confs = sorted(glob.glob(os.path.join(spec["confd"], "*.conf")))
if not confs or md5(confs[-1]) != spec["digest"]:
    fail("the snippet is not read last")
got = confd_load(spec["main"])
if got != spec["want"]:
    fail(f"effective settings {got!r}, want {spec['want']!r}")
"""
        renamed = f"{w.pick(('zz-', '999-'))}{loser}.conf"
        if renamed <= order[-1]:
            renamed = f"zz-{loser}.conf"
        reference.append(f"mv {sh(confd)}/{loser}.conf {sh(confd)}/{renamed}")
        difficulty = 3
    task = w.phrase(
        "{svc} reads {main} and then every *.conf in {confd}. {ask_c}.",
        "In {where}, {ask}.",
        "Ticket: {svc} config precedence. {ask_c}; the main file is {main} and the snippets are in {confd}.",
        "Could you sort out {svc}'s conf.d ({confd})? {ask_c}.",
        "{svc}'s settings are split between {main} and the snippets in {confd}: {ask}.",
        svc=svc,
        main=w.path_ref(main, "file") if operator else main,
        confd=w.path_ref(confd) if operator else confd,
        where=where,
        ask=ask,
        ask_c=_cap(ask),
    )
    reference.append(f"ls {sh(confd)}")
    return Draft(
        task=task,
        check=_py(spec, _CONFD_LIB + code),
        reference=reference,
        difficulty=difficulty,
        files=files,
        user="operator" if operator else "root",
    )


# ---- services-config-backup-edit ------------------------------------------------------------------------------------
@family(
    "services-config-backup-edit",
    CATEGORY,
    "back a service config up (same content, owner, mode, timestamp) before changing settings in it",
)
def config_backup_edit(w: World) -> Draft:
    svc = _svc(w)
    sh = shell_paths(w)
    acct = _account(svc)
    operator = w.chance(0.3)
    setup: list[str] = []
    fmt = w.pick(("eq", "eq", "colon"))
    ext = {"eq": w.pick(("conf", "ini", "cfg")), "colon": w.pick(("yml", "yaml"))}[fmt]
    if operator:
        proj = w.project()
        path = f"{HOME}/{w.pick(('projects/', 'apps/', ''))}{proj}/config/{svc}.{ext}"
    else:
        path = w.pick(
            (f"/etc/{svc}/{svc}.{ext}", f"/opt/{svc}/etc/{svc}.{ext}", f"/srv/{svc}/config/{svc}.{ext}")
        )
    keys = w.sample(_KEYS, 6)
    sep = " = " if fmt == "eq" else ": "
    lines = [
        f"# {svc} settings",
        f"# managed by hand on this host; {w.pick(('see the runbook', 'ask ops before editing'))}",
    ]
    values: dict[str, str] = {}
    for k, vals in keys:
        values[k] = w.pick(vals)
        lines.append(f"{k}{sep}{values[k]}")
        if w.chance(0.2):
            lines.append("")
    body = _body(lines)
    stamp = w.date("2024-01-01", 400)
    mode = w.pick(("640", "600", "644"))
    if operator:
        setup.append(f"chmod {mode} {path} && touch -d '{stamp:%Y-%m-%d %H:%M:%S}' {path}")
        owner = "operator:operator"
    else:
        setup += [
            _add_account(acct, f"/var/lib/{svc}"),
            f"chown root:{acct} {path} && chmod {mode} {path} && touch -d '{stamp:%Y-%m-%d %H:%M:%S}' {path}",
        ]
        owner = f"root:{acct}"
    changes = w.sample(keys, w.pick((1, 1, 2)))
    new: dict[str, str] = {}
    for k, vals in changes:
        new[k] = w.pick([v for v in vals if v != values[k]])
    day = f"{w.date('2025-01-01', 300):%Y%m%d}"
    backup = w.pick(
        (
            f"{path}.bak",
            f"{path}.orig",
            f"{path}.{day}",
            f"/var/backups/{svc}.{ext}.{day}" if not operator else f"{HOME}/backups/{svc}.{ext}.{day}",
            f"/root/config-backups/{svc}.{ext}" if not operator else f"{HOME}/config-backups/{svc}.{ext}",
        )
    )
    keep_time = w.chance(0.6)
    w.note(svc, acct, day, *new.values())
    want_lines = []
    for line in lines:
        k = line.split(sep.strip())[0].strip()
        want_lines.append(f"{k}{sep}{new[k]}" if k in new and not line.startswith("#") else line)
    spec = {
        "path": path,
        "backup": backup,
        "digest": _md5(body),
        "mode": int(mode, 8),
        "keep_time": keep_time,
        "stamp": f"{stamp:%Y-%m-%d %H:%M:%S}",
        "owner": owner,
        "want": want_lines,
        "changed": list(new),
        "sep": sep.strip(),
    }
    check = _py(
        spec,
        """
import grp, pwd, time
b, p = spec["backup"], spec["path"]
if md5(b) != spec["digest"]:
    fail("the backup does not hold the original content")
for f in (b, p):
    st = os.stat(f)
    if stat.S_IMODE(st.st_mode) != spec["mode"]:
        fail(f"{f}: mode changed")
    if f"{pwd.getpwuid(st.st_uid).pw_name}:{grp.getgrgid(st.st_gid).gr_name}" != spec["owner"]:
        fail(f"{f}: owner changed")
if spec["keep_time"]:
    want = time.mktime(time.strptime(spec["stamp"], "%Y-%m-%d %H:%M:%S"))
    if abs(os.stat(b).st_mtime - want) > 1:
        fail("the backup lost the original timestamp")
got = [line.rstrip() for line in text(p).splitlines()]
while got and not got[-1]:
    got.pop()
want = list(spec["want"])
while want and not want[-1]:
    want.pop()
if len(got) != len(want):
    fail("lines were added or removed")
sep = spec["sep"]
for g, x in zip(got, want):
    if g == x:
        continue
    gk, _, gv = g.partition(sep)
    xk, _, xv = x.partition(sep)
    if gk.strip() != xk.strip() or gk.strip() not in spec["changed"] or gv.strip() != xv.strip():
        fail(f"line {g!r} should be {x!r}")
""",
    )
    where = w.path_ref(path, "file") if operator else path
    bref = w.path_ref(backup, "file") if operator else backup
    preserve = (
        _f(w, "{same owner, mode and modification time|keeping its owner, permissions and timestamp}")
        if keep_time
        else _f(w, "{same owner and mode|keeping its owner and permissions}")
    )
    change = w.clauses([_f(w, "{k} {becomes|goes to|is set to} {v}", k=k, v=v) for k, v in new.items()])
    task = w.phrase(
        "Before you touch {where}, back it up to {bref} ({preserve}). Then {change}.",
        "The {svc} service needs new settings: {change}. The config is {where}; {first|before editing} save a copy as {bref}, "
        "{preserve}.",
        "Ticket: new settings for {svc} in {where}: {change}. House rule: a backup at {bref} first, {preserve}.",
        "Could you back up {where} to {bref} ({preserve}) and then, in the original, {change}? Leave every other line "
        "alone.",
        where=where,
        bref=bref,
        preserve=preserve,
        change=change,
        svc=svc,
    )
    p, bk = sh(path), sh(backup)
    reference = [f"ls -l {p}"]
    style = w.pick(("cp", "cp", "sedbak", "perlbak")) if backup in (f"{path}.bak", f"{path}.orig") else "cp"
    sed = " ".join(f"-e 's/^{k}{_sed_re(sep.rstrip())}.*/{k}{sep}{_sed_sub(v)}/'" for k, v in new.items())
    if style == "sedbak":
        reference.append(f"sed -i{backup[len(path) :]} {sed} {p}")
    elif style == "perlbak":  # perl renames the original to the backup (its times kept) and writes a new file
        perl = "; ".join(f"s/^{k}{_sed_re(sep.rstrip())}.*/{k}{sep}{_sed_sub(v)}/" for k, v in new.items())
        reference.append(f"perl -i{backup[len(path) :]} -pe {quote(perl)} {p}")
    else:
        if posixpath.dirname(backup) != posixpath.dirname(path):
            reference.append(f"mkdir -p {sh(posixpath.dirname(backup))}")
        reference.append(f"{w.pick(('cp -p', 'cp -a', 'cp --preserve=all', 'rsync -a'))} {p} {bk}")
        reference.append(f"sed -i {sed} {p}")
    reference.append(f"diff {bk} {p}; ls -l {bk} {p}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if len(new) == 1 else 3,
        files={path: body},
        setup=setup,
        user="operator" if operator else "root",
    )


# ---- services-merge-new-defaults ------------------------------------------------------------------------------------
@family(
    "services-merge-new-defaults",
    CATEGORY,
    "merge the new settings of a package's .dpkg-dist/.rpmnew (or a project's example config) into the live config",
)
def merge_new_defaults(w: World) -> Draft:
    svc = _svc(w)
    sh = shell_paths(w)
    operator = w.chance(0.3)
    sep = w.pick((" = ", " "))
    if operator:
        proj = w.project()
        live = f"{HOME}/{w.pick(('projects/', 'apps/', ''))}{proj}/{svc}.conf"
        dist = live + w.pick((".example", ".sample", ".dist"))
        origin = _f(w, "{the last pull|the new release} {brought|came with}")
        remove = False
    else:
        live = w.pick((f"/etc/{svc}/{svc}.conf", f"/etc/{svc}.conf"))
        dist = live + w.pick((".dpkg-dist", ".dpkg-dist", ".ucf-dist", ".rpmnew"))
        origin = _f(w, "{the package upgrade|the upgrade to the new version|last night's upgrade} left")
        remove = w.chance(0.7)
    keys = w.sample(_KEYS, 8)
    old_keys, new_keys = keys[:5], keys[5 : 5 + w.randint(1, 3)]
    local = {k: w.pick(v) for k, v in old_keys}
    defaults = {k: w.pick(v) for k, v in old_keys}
    added = {k: w.pick(v) for k, v in new_keys}
    obsolete = w.chance(0.35)
    legacy = w.pick(("legacy_mode", "use_old_parser", "compat_v1")) if obsolete else ""
    live_lines = [f"# {svc} configuration (local changes)"]
    for k, _ in old_keys:
        live_lines.append(f"{k}{sep}{local[k]}")
    if legacy:
        live_lines.insert(w.randint(1, len(live_lines)), f"{legacy}{sep}{w.pick(('on', 'true', 'yes'))}")
    dist_lines = [f"# {svc} configuration, as shipped"]
    order = w.shuffled([*(k for k, _ in old_keys), *added])
    for k in order:
        dist_lines.append(f"# {k.replace('_', ' ')}")
        dist_lines.append(f"{k}{sep}{defaults[k] if k in defaults else added[k]}")
    want = {k: v for k, v in local.items()}
    want.update(added)
    if legacy:
        want_absent = [legacy]
        drop_text = _f(w, "{also |}{remove|delete} {l}, which the new version no longer knows", l=legacy)
    else:
        want_absent = []
        drop_text = ""
    w.note(svc, *added, legacy)
    asks = [
        _f(w, "{add|copy over} every setting that exists only in the new file, with its value from there"),
        _f(w, "settings {both files have|already in the live file} keep {the live|their local} values"),
    ]
    if drop_text:
        asks.append(drop_text)
    if remove:
        asks.append(
            _f(w, "{then remove|delete} {d} {when you are done|afterwards}", d=posixpath.basename(dist))
        )
    else:
        asks.append(_f(w, "{d} itself stays as it is", d=posixpath.basename(dist)))
    ask = "; ".join(asks)
    l_ref = w.path_ref(live, "file") if operator else live
    d_ref = w.path_ref(dist, "file") if operator else dist
    task = w.phrase(
        "{origin_c} {dist} next to {live}. Merge it in: {ask}.",
        "{live} is {svc}'s live config and {dist} the {new default|freshly shipped} one. {ask_c}.",
        "Ticket: {svc} after the upgrade. {origin_c} {dist}; bring {live} up to date: {ask}.",
        "Could you merge the new settings from {dist} into {live}? {ask_c}.",
        origin_c=_cap(origin),
        dist=d_ref,
        live=l_ref,
        svc=svc,
        ask=ask,
        ask_c=_cap(ask),
    )
    files = {live: _body(live_lines), dist: _body(dist_lines)}
    spec = {
        "live": live,
        "dist": dist,
        "dist_md5": _md5(files[dist]),
        "remove": remove,
        "want": want,
        "absent": want_absent,
        "sep": sep.strip() or " ",
        "uid": 1000 if operator else 0,
    }
    check = _py(
        spec,
        """
if spec["remove"]:
    if os.path.exists(spec["dist"]):
        fail("the shipped file is still there")
elif md5(spec["dist"]) != spec["dist_md5"]:
    fail("the shipped file changed")
safe_mode(spec["live"], spec["uid"])
pairs = kv_lines(text(spec["live"]), spec["sep"])
keys = [k for k, _ in pairs]
dups = {k for k in keys if keys.count(k) > 1}
if dups:
    fail(f"set twice: {sorted(dups)}")
got = dict(pairs)
for k in spec["absent"]:
    if k in got:
        fail(f"{k} must go")
if {k: v for k, v in got.items()} != spec["want"]:
    fail(f"live settings {got!r}, want {spec['want']!r}")
""",
    )
    lv, dv = sh(live), sh(dist)
    reference = [w.pick((f"diff {lv} {dv}", f"diff -u {lv} {dv}", f"grep -v '^#' {dv}"))]
    alt = "|".join(added)
    if sep == " = ":
        reference.append(
            w.pick(
                (
                    f"grep -E '^({alt}) = ' {dv} >> {lv}",
                    f"awk -F' = ' 'NR==FNR {{seen[$1]; next}} /^[a-z]/ && !($1 in seen)' {lv} {dv} >> {lv}",
                )
            )
        )
    else:
        reference.append(
            w.pick(
                (
                    f"grep -E '^({alt}) ' {dv} >> {lv}",
                    f"awk 'NR==FNR {{seen[$1]; next}} /^[a-z]/ && !($1 in seen)' {lv} {dv} >> {lv}",
                )
            )
        )
    if legacy:
        reference.append(f"sed -i '/^{legacy} /d' {lv}")
    if remove:
        reference.append(f"rm {dv}")
    reference.append(f"cat {lv}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if legacy or len(added) > 1 else 2,
        files=files,
        user="operator" if operator else "root",
    )


# ---- services-unit-inventory ----------------------------------------------------------------------------------------
@family(
    "services-unit-inventory",
    CATEGORY,
    "report from a folder of systemd units: which run as whom, which restart always, where they work",
)
def unit_inventory(w: World) -> Draft:
    sh = shell_paths(w)
    operator = w.chance(0.35)
    if operator:
        folder = f"{HOME}/{w.pick(('projects/', 'infra/', ''))}{w.project()}/deploy/systemd"
        out = f"{HOME}/{w.pick(('reports/', ''))}units-{w.pick(('users', 'audit', 'report'))}.txt"
    else:
        folder = "/etc/systemd/system"
        out = f"/root/{w.pick(('units', 'service-audit', 'inventory'))}.txt"
    n = w.randint(5, 8)
    accounts = [_account(s) for s in w.sample([s for s in SERVICES if s not in _NO_SVC], 3)] + ["www-data"]
    units: dict[str, dict[str, str]] = {}
    for _ in range(n):
        svc = _svc(w)
        u: dict[str, str] = {}
        if w.chance(0.75):
            u["User"] = w.pick(accounts)
        u["Restart"] = w.pick(("always", "on-failure", "no", ""))
        u["WorkingDirectory"] = w.pick((f"/srv/{svc}", f"/opt/{svc}", f"/var/lib/{svc}", ""))
        units[f"{svc}.service"] = u
    query = w.pick(("user", "root", "always", "table", "srv"))
    full = w.chance(0.6)
    first, second = w.sample(list(units), 2)  # the answer is never empty, never everything
    if query == "user":
        units[first]["User"] = w.pick(accounts)
    elif query == "root":
        units[first].pop("User", None)
        units[second].setdefault("User", w.pick(accounts))
    elif query == "always":
        units[first]["Restart"], units[second]["Restart"] = "always", w.pick(("on-failure", "no", ""))
    elif query == "srv":
        units[first]["WorkingDirectory"] = f"/srv/{first[: -len('.service')]}"
        units[second]["WorkingDirectory"] = w.pick(("", f"/opt/{second[: -len('.service')]}"))
    files: dict[str, str] = {}
    for name, u in units.items():
        svc = name[: -len(".service")]
        lines = ["[Unit]", f"Description={svc.capitalize()}", "", "[Service]"]
        if u.get("User") and w.chance(0.3):
            lines.append(f"#User={w.pick(accounts)}")
        if not u.get("User") and w.chance(0.3):
            lines.append(f"#User={w.pick(accounts)}")
        if u.get("User"):
            lines.append(f"User={u['User']}")
        lines.append(f"ExecStart=/usr/local/bin/{svc}")
        if u["Restart"]:
            lines.append(f"Restart={u['Restart']}")
        if u["WorkingDirectory"]:
            lines.append(f"WorkingDirectory={u['WorkingDirectory']}")
        lines += ["", "[Install]", "WantedBy=multi-user.target"]
        files[f"{folder}/{name}"] = _body(lines)
    stale = w.pick(list(units))
    files[f"{folder}/{stale}.bak"] = _body(
        ["[Service]", f"User={w.pick(accounts)}", "Restart=always", "WorkingDirectory=/srv/old"]
    )

    def show(name: str) -> str:
        return name if full else name[: -len(".service")]

    names = sorted(units)
    d = sh(folder)
    naming = (
        _f(w, "full unit names like {e}", e=names[0])
        if full
        else _f(w, "names without .service, like {e}", e=show(names[0]))
    )
    strip = "" if full else " | sed 's/\\.service$//'"
    if query == "user":
        acct = w.pick([a for a in accounts if any(u.get("User") == a for u in units.values())] or accounts)
        rows = [show(n) for n in names if units[n].get("User") == acct]
        what = _f(w, "the units that run as {a}", a=acct)
        ref = f"grep -l '^User={acct}$' {d}/*.service | xargs -n1 basename{strip} | sort > {sh(out)}"
    elif query == "root":
        rows = [show(n) for n in names if not units[n].get("User")]
        what = _f(w, "the units that run as root because they set no User=")
        ref = f"grep -L '^User=' {d}/*.service | xargs -n1 basename{strip} | sort > {sh(out)}"
    elif query == "always":
        rows = [show(n) for n in names if units[n]["Restart"] == "always"]
        what = _f(w, "the units that systemd always restarts (Restart=always)")
        ref = f"grep -l '^Restart=always$' {d}/*.service | xargs -n1 basename{strip} | sort > {sh(out)}"
    elif query == "srv":
        rows = [show(n) for n in names if units[n]["WorkingDirectory"].startswith("/srv/")]
        what = _f(w, "the units whose working directory is under /srv")
        ref = (
            f"grep -l '^WorkingDirectory=/srv/' {d}/*.service | xargs -n1 basename{strip} | sort > {sh(out)}"
        )
    else:
        rows = [f"{show(n)} {units[n].get('User') or 'root'}" for n in names]
        what = _f(
            w,
            "every unit with the account it runs as (root when it sets no User=), one `unit account` pair "
            "per line",
        )
        ref = (
            f"for f in {d}/*.service; do u=$(sed -n 's/^User=//p' \"$f\"); "
            f'echo "$(basename "$f"{" .service" if not full else ""}) ${{u:-root}}"; done | sort > {sh(out)}'
        )
    if not rows and query != "table":
        rows = []
    w.note(*names, out)
    where = w.path_ref(folder) if operator else folder
    o = w.path_ref(out, "file") if operator else out
    task = w.phrase(
        "{Look through|Go through} the unit files (*.service) in {where} and write {what} to {o}, one per line, "
        "sorted; use {naming}.",
        "For the audit, list {what} into {o} ({naming}, sorted, one per line). The units are the *.service files in "
        "{where}.",
        "Ticket: {we need|I need} {what}, from the *.service files in {where}. Write them to {o}, sorted, {naming}.",
        "Could you write {what} to {o}? Only the *.service files in {where} count; sorted, one per line, {naming}.",
        where=where,
        what=what,
        o=o,
        naming=naming,
    )
    keep = {p: _md5(b) for p, b in files.items()}
    check = _py(
        {"out": out, "rows": rows, "keep": keep},
        """
same_files(spec["keep"])
try:
    got = [" ".join(line.split()) for line in open(spec["out"]).read().splitlines()]
except OSError:
    fail("no report")
while got and not got[-1]:
    got.pop()
if got != spec["rows"]:
    fail(f"report {got!r}, want {spec['rows']!r}")
""",
    )
    reference = [
        w.pick((f"ls {d}", f"grep -H -e '^User=' -e '^Restart=' {d}/*.service")),
        ref,
        f"cat {sh(out)}",
    ]
    if operator and posixpath.dirname(out) != HOME:
        reference.insert(1, f"mkdir -p {sh(posixpath.dirname(out))}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if query in ("table", "root") else 2,
        files=files,
        user="operator" if operator else "root",
    )


# ---- services-directive-config --------------------------------------------------------------------------------------
_SSHD_TOP = [
    "# This is the sshd server system-wide configuration file.  See",
    "# sshd_config(5) for more information.",
    "",
    "Include /etc/ssh/sshd_config.d/*.conf",
    "",
    "#LoginGraceTime 2m",
    "#PermitRootLogin prohibit-password",
    "#StrictModes yes",
    "#MaxAuthTries 6",
    "#MaxSessions 10",
    "",
    "#PubkeyAuthentication yes",
    "",
    "# To disable tunneled clear text passwords, change to no here!",
    "#PasswordAuthentication yes",
    "#PermitEmptyPasswords no",
    "",
    "KbdInteractiveAuthentication no",
    "UsePAM yes",
    "",
    "#AllowAgentForwarding yes",
    "#AllowTcpForwarding yes",
    "X11Forwarding yes",
    "PrintMotd no",
    "#ClientAliveInterval 0",
    "#ClientAliveCountMax 3",
    "",
    "AcceptEnv LANG LC_*",
    "Subsystem\tsftp\t/usr/lib/openssh/sftp-server",
]
_SSHD_TARGETS = (
    ("PermitRootLogin", ("no", "prohibit-password"), "root logins {are refused|must be impossible}"),
    ("PasswordAuthentication", ("no",), "password logins are {off|disabled} (keys only)"),
    ("X11Forwarding", ("no",), "X11 forwarding is {off|disabled}"),
    ("MaxAuthTries", ("3", "4"), "a client gets at most {v} authentication attempts"),
    ("ClientAliveInterval", ("120", "300"), "idle clients are probed every {v} seconds"),
    ("ClientAliveCountMax", ("2",), "a client is dropped after {v} unanswered probes"),
    ("LoginGraceTime", ("30", "60"), "a login must complete within {v} seconds"),
    ("AllowTcpForwarding", ("no",), "TCP forwarding is {off|disabled}"),
    ("AllowGroups", ("ssh-users", "sshlogin"), "only members of the group {v} may log in"),
)
_REDIS_TARGETS = (
    ("maxmemory", ("256mb", "512mb", "1gb"), "it may use at most {v} of memory"),
    ("maxmemory-policy", ("allkeys-lru", "volatile-lru"), "when full it evicts keys with the {v} policy"),
    ("appendonly", ("yes",), "the append-only file is {on|enabled}"),
    ("appendfsync", ("always", "no"), "the append-only file is synced with the {v} policy"),
    ("timeout", ("300", "600"), "idle clients are closed after {v} seconds"),
    ("loglevel", ("warning", "verbose"), "its log level is {v}"),
    ("databases", ("4", "32"), "it has {v} databases"),
    ("tcp-keepalive", ("60", "120"), "TCP keepalive runs every {v} seconds"),
)

_DIRECTIVE_LIB = r"""
def directives(path, first_wins, seen=None):
    out = []
    for raw in text(path).splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split(None, 1)
        key, value = words[0].lower(), (words[1].strip() if len(words) > 1 else "")
        if key == "match":
            break
        if key == "include" and first_wins:
            for pattern in value.split():
                for f in sorted(glob.glob(pattern)):
                    out += directives(f, first_wins)
            continue
        out.append((key, value))
    return out


def effective(pairs, first_wins, multi=()):
    eff = {}
    for key, value in pairs:
        if key in multi:
            eff[key] = [] if value in ('""', "''") else eff.get(key, []) + [" ".join(value.split())]
        elif first_wins:
            eff.setdefault(key, value)
        else:
            eff[key] = value
    return eff


def match_tail(body):
    lines = body.splitlines()
    for i, raw in enumerate(lines):
        if raw.strip().lower().startswith("match "):
            return [line.rstrip() for line in lines[i:]]
    return []
"""


@family(
    "services-directive-config",
    CATEGORY,
    "set directives in an sshd_config (first value wins, Include, Match) or a redis-style config (last value wins)",
)
def directive_config(w: World) -> Draft:
    kind = w.pick(("sshd", "sshd", "redis"))
    sh = shell_paths(w)
    files: dict[str, str] = {}
    setup: list[str] = []
    hint = ""
    if kind == "sshd":
        operator = False
        path = "/etc/ssh/sshd_config"
        lines = list(_SSHD_TOP)
        targets = w.sample(_SSHD_TARGETS, w.pick((1, 2, 2, 3)))
        match = w.chance(0.6)
        if match:
            group = w.pick(("sftp-only", "partners", "backup-push"))
            lines += [
                "",
                f"Match Group {group}",
                "\tChrootDirectory /srv/sftp/%u",
                "\tForceCommand internal-sftp",
                "\tPasswordAuthentication yes",
                "\tX11Forwarding no",
                "\tAllowTcpForwarding no",
            ]
        else:
            lines += [
                "",
                "# Example of overriding settings on a per-user basis",
                "#Match User anoncvs",
                "#\tX11Forwarding no",
            ]
        dropin = f"/etc/ssh/sshd_config.d/{w.pick(('50-cloud-init.conf', '60-provider.conf'))}"
        trap = any(t[0] == "PasswordAuthentication" for t in targets) and w.chance(0.6)
        if trap:
            files[dropin] = "PasswordAuthentication yes\n"
            if w.chance(0.5):
                hint = " " + _f(w, "(Note the Include near the top of the file.)")
        elif w.chance(0.3):
            files[dropin] = "KbdInteractiveAuthentication no\n"
        setup.append("mkdir -p /etc/ssh/sshd_config.d")
        first_wins = True
        multi: list[str] = []
        label = "sshd"
    else:
        svc = w.pick(("cache", "sessions", "queue", "ratelimit"))
        operator = w.chance(0.4)
        path = (
            f"{HOME}/{w.pick(('projects/', 'dev/', ''))}{w.project()}/redis/redis.conf"
            if operator
            else f"/etc/redis/{svc}.conf"
        )
        lines = [
            f"# Redis configuration for the {svc} instance",
            "",
            "daemonize no",
            "supervised systemd",
            "loglevel notice",
            f"logfile /var/log/redis/{svc}.log",
            "databases 16",
            "",
            "save 3600 1",
            "save 300 100",
            "save 60 10000",
            "",
            "# maxmemory <bytes>",
            "# maxmemory-policy noeviction",
            "",
            "appendonly no",
            "# appendfsync always",
            "appendfsync everysec",
            "",
            "timeout 0",
            "tcp-keepalive 300",
        ]
        targets = w.sample(_REDIS_TARGETS, w.pick((1, 2, 2, 3)))
        if w.chance(0.3):
            targets = [*targets, ("save", ("",), "RDB snapshots are {off|disabled} (no save points)")]
        first_wins = False
        multi = ["save"]
        label = f"the {svc} redis instance"
        match = False
        trap = False
    want: dict[str, object] = {}
    asks: list[str] = []
    fixes: list[str] = []
    perl_ops: list[str] = []  # the same edits as perl statements (one pass over the file)
    awk_ops: list[str] = []  # ... and as awk rules (the file rewritten through a temporary copy)
    p = sh(path)
    for key, values, text in targets:
        value = w.pick(values)
        w.note(value)
        asks.append(_f(w, text, v=value))
        lower = key.lower()
        if key == "save":
            want[lower] = []
            fixes.append(f"sed -i 's/^save /# save /' {p}")
            perl_ops.append("s/^save /# save /")
            awk_ops.append('/^save / {$0 = "# " $0}')
            continue
        want[lower] = value
        head = lines[: next((i for i, x in enumerate(lines) if x.startswith("Match ")), len(lines))]
        active = next((line for line in head if line.split(" ", 1)[0] == key), "")
        commented = next((line for line in head if line.startswith(("#" + key + " ", "# " + key + " "))), "")
        if active:
            fixes.append(f"sed -i 's/^{key} .*/{key} {value}/' {p}")
            perl_ops.append(f"s/^{key} .*/{key} {value}/")
            awk_ops.append(f'index($0, "{key} ") == 1 {{$0 = "{key} {value}"}}')
        elif commented:
            lead = commented.split(key)[0]
            fixes.append(f"sed -i 's/^{_sed_re(lead)}{key} .*/{key} {value}/' {p}")
            perl_ops.append(f"s/^{_sed_re(lead)}{key} .*/{key} {value}/")
            awk_ops.append(f'index($0, "{lead}{key} ") == 1 {{$0 = "{key} {value}"}}')
        elif match:
            fixes.append(f"sed -i '/^Match /i {key} {value}' {p}")
            perl_ops.append(f'$_ = "{key} {value}\\n$_" if /^Match /')
            awk_ops.append(f'/^Match / {{print "{key} {value}"}}')
        else:
            fixes.append(f"echo '{key} {value}' >> {p}")
            perl_ops.append(f'$_ .= "{key} {value}\\n" if eof')
            awk_ops.append(f'END {{print "{key} {value}"}}')
    how = w.pick(("sed", "sed", "perl", "awk"))
    if how == "perl":  # every edit in one perl pass
        fixes = [f"perl -pi -e {quote('; '.join(perl_ops))} {p}"]
    elif how == "awk":  # one awk pass into a copy, written back over the file (its owner and mode stay)
        prog = " ".join(awk_ops) + " {print}"
        fixes = [f"awk {quote(prog)} {p} > /tmp/directives.new && cat /tmp/directives.new > {p}"]
    if trap:
        fixes.insert(0, f"sed -i 's/^PasswordAuthentication yes/PasswordAuthentication no/' {dropin}")
    files[path] = _body(lines)
    ask = w.clauses(asks)
    where = w.path_ref(path, "file") if operator else path
    task = w.phrase(
        "{verb} {label} in {where}: {ask}. Other settings stay as they are.{hint}",
        "{Edit|Change} {where} so that {ask}. Leave {everything else|the rest} alone.{hint}",
        "Ticket: {label} config. In {where}, {ask}; nothing else changes.{hint}",
        "Could you update {where}? {ask_c}. Keep all other settings.{hint}",
        label=label,
        where=where,
        ask=ask,
        ask_c=_cap(ask),
        hint=hint,
        verb=w.pick(("Harden", "Lock down", "Tighten"))
        if kind == "sshd"
        else w.pick(("Configure", "Tune", "Adjust")),
    )
    spec = {
        "path": path,
        "first_wins": first_wins,
        "multi": multi,
        "want": want,
        "orig": {p_: b for p_, b in files.items()},
        "tail": [
            line.rstrip()
            for line in lines[next((i for i, x in enumerate(lines) if x.startswith("Match ")), len(lines)) :]
        ],
        "uid": 1000 if operator else 0,
    }
    check = _py(
        spec,
        _DIRECTIVE_LIB
        + """
import tempfile
p = spec["path"]
safe_mode(p, spec["uid"])
fw, multi = spec["first_wins"], spec["multi"]
got = effective(directives(p, fw), fw, multi)
# what the original files meant, read the same way, with the requested values on top
tmp = tempfile.mkdtemp()
os.mkdir(os.path.join(tmp, "d"))
for q, content in spec["orig"].items():
    if q != p:
        with open(os.path.join(tmp, "d", os.path.basename(q)), "w") as fh:
            fh.write(content)
with open(os.path.join(tmp, "main"), "w") as fh:
    fh.write(spec["orig"][p].replace("Include /etc/ssh/sshd_config.d/*.conf", f"Include {tmp}/d/*.conf"))
want = effective(directives(os.path.join(tmp, "main"), fw), fw, multi)
want.update(spec["want"])


def norm(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, list):
            if v:
                out[k] = v
        else:
            out[k] = v.lower() if v.lower() in ("yes", "no") else v
    return out


if norm(got) != norm(want):
    diff = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
    fail(f"effective settings differ: {diff!r}")
if spec["tail"] and match_tail(text(p)) != spec["tail"]:
    fail("the Match block changed")
""",
    )
    reference = [w.pick((f"grep -n -v '^#' {p} | grep .", f"cat {p}"))]
    if kind == "sshd" and path in files and any(q.startswith("/etc/ssh/sshd_config.d/") for q in files):
        reference.append("cat /etc/ssh/sshd_config.d/*.conf")
    reference += [*fixes, f"grep -v '^#' {p} | grep ."]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=min(4, 1 + len(targets) + trap),
        files=files,
        setup=setup,
        user="operator" if operator else "root",
    )
