"""Environment: the operator's shell start-up files, variables, PATH, aliases, umask and dotfiles.

Checks start a *fresh* shell of the operator with an empty environment (``env -i``; login and interactive, like a
terminal login) and look at what it ends up with, so any start-up file that a real login reads is accepted
(``~/.profile``, ``~/.bashrc``, ``~/.bash_aliases``...), while a change made only in the current session is not.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, World, quote, workplace

TOOLS = (
    "deploy",
    "lint",
    "fmt",
    "backup",
    "mkrelease",
    "dbshell",
    "logtail",
    "notify",
    "bump",
    "ctl",
    "tree",
    "runjob",
    "healthcheck",
    "seed-db",
    "rotate",
    "publish",
    "snapshot",
)
PROFILE_FILES = ("~/.profile", "~/.bashrc")


# ---- helpers ---------------------------------------------------------------------------------------------------------
def _script(*lines: str) -> str:
    return "#!/bin/bash\n" + "\n".join(lines) + "\n"


def _fresh(cmd: str, flags: str = "-lic", user: str = "operator") -> str:
    """Check lines running ``cmd`` in a fresh shell of ``user`` (empty environment, login + interactive);
    its stdout lands in the file ``$R`` (stdout of start-up files cannot pollute it)."""
    home = HOME if user == "operator" else "/root"
    # umask 022 first: a fresh login starts from the system default, not from whatever the checker runs with
    return (
        f'umask 022; R=/tmp/.envcheck.$$; rm -f "$R"\n'
        f"timeout 15 runuser -u {user} -- env -i HOME={home} USER={user} LOGNAME={user} SHELL=/bin/bash "
        f'PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb R="$R" bash {flags} {quote(cmd)} </dev/null >/dev/null '
        '2>&1\n[ -f "$R" ] || exit 1'
    )


def _rc(w: World) -> str:
    """Which start-up file a task names (or none: any that a login shell reads will do)."""
    return w.pick(("~/.profile", "~/.bashrc", ""))


def _where(w: World, rc: str) -> str:
    if rc:
        return w.spin("{in|by editing} {rc}", capitalize=False, rc=rc)
    return w.spin("{in your shell start-up files|in the right start-up file}", capitalize=False)


def _verify(w: World, rc: str, cmd: str) -> str:
    """The reference's last turn: a fresh shell showing the result."""
    if rc == "~/.profile" and w.chance(0.5):
        return f"bash -lc {quote(cmd)}"
    return f"bash -lic {quote(cmd)} 2>/dev/null"


# ---- families --------------------------------------------------------------------------------------------------------
@family("environment-path-prepend", "environment", "put a folder of tools first on PATH for login shells")
def path_prepend(w: World) -> Draft:
    proj = w.project()
    tools_dir = w.pick(
        (
            f"{HOME}/{w.pick(('tools', '.tools', 'apps', 'opt'))}/bin",
            f"{HOME}/.{proj}/bin",
            f"{HOME}/{proj}-tools",
            f"/opt/{proj}/bin",
            f"{HOME}/.local/{proj}/bin",
        )
    )
    tools = w.sample(TOOLS, w.randint(1, 3))
    w.note(*tools)
    version = f"{w.randint(1, 9)}.{w.randint(0, 20)}"
    fix_exec = tools_dir.startswith(HOME) and w.chance(0.3)
    rc = _rc(w)
    files = {f"{tools_dir}/{t}": f'#!/bin/sh\necho "{t} {version} ({proj})"\n' for t in tools}
    shadowed = [t for t in tools if t not in ("fmt", "tree") and w.chance(0.7)] or tools[:1]
    for t in shadowed:  # an older copy elsewhere on PATH: the new folder has to come first
        if t not in ("fmt", "tree"):
            files[f"/usr/local/bin/{t}"] = f'#!/bin/sh\necho "{t} 0.1 (old)"\n'
    setup = [f"chmod 644 {' '.join(quote(f'{tools_dir}/{t}') for t in tools)}"] if fix_exec else []
    names = ", ".join(f"`{t}`" for t in tools)
    fix = (
        w.spin("The {scripts|tools} there are not executable yet; {fix that too|make them executable}.")
        if fix_exec
        else ""
    )
    task = w.phrase(
        "Make the tools in {dir} ({names}) take precedence on your PATH: put {dir} {at the front of|first on} "
        "PATH for your login shells {where}, keeping the rest of PATH. {fix}",
        "{Older|Outdated} versions of {names} {exist|are installed} elsewhere on PATH. {Every|Each} new login shell "
        "of yours should find the ones in {dir} first, so {prepend|add} {dir} to the {front|beginning} of PATH "
        "{where} (keep the existing entries). {fix}",
        "Ticket: `command -v {first}` must {resolve to|point to} {dir}/{first} in {any|every} fresh login shell. "
        "Put {dir} first on PATH {where}, without dropping the other entries. {fix}",
        "Could you set up your login shells so that {dir} comes first on PATH {where}? The existing PATH must "
        "{stay|remain} after it. {fix}",
        "I installed new {names} into {dir}, but my shell still runs the old ones from elsewhere. Fix my login "
        "environment {where}: {dir} goes in front, everything already on PATH stays behind it. {fix}",
        "PATH for login shells: {dir} first, then the rest as before. Configure it {where}. {fix}",
        "Goal: a fresh login shell runs {dir}/{first} when I type `{first}`, and still finds every other command "
        "it found before. Set PATH {where}. {fix}",
        dir=w.path_ref(tools_dir),
        names=names,
        first=tools[0],
        where=_where(w, rc),
        fix=fix,
    )
    probe = "; ".join(f"command -v {t}; {t}" for t in tools) + "; command -v git; command -v sort"
    expected = []
    for t in tools:
        expected += [f"{tools_dir}/{t}", f"{t} {version} ({proj})"]
    expected += ["/usr/bin/git", "/usr/bin/sort"]
    lines = [
        _fresh(f'{{ {probe}; }} > "$R"'),
        f'[ "$(cat "$R")" = {quote(chr(10).join(expected))} ] || exit 1',
    ]
    if rc:
        tail = tools_dir[len(HOME) + 1 :] if tools_dir.startswith(HOME) else tools_dir
        lines.append(f"grep -q {quote(tail)} {HOME}/{rc[2:]} || exit 1")
    check = _script(*lines)
    target = "$HOME" + tools_dir[len(HOME) :] if tools_dir.startswith(HOME) and w.chance(0.7) else tools_dir
    file = rc or w.pick(PROFILE_FILES)
    reference = []
    if fix_exec:
        reference.append(f"chmod +x {target.replace('$HOME', '~')}/*")
    reference.append(
        w.pick(
            (
                f"echo 'export PATH=\"{target}:$PATH\"' >> {file}",
                f"printf '%s\\n' 'PATH=\"{target}:$PATH\"' >> {file}",
                f"echo 'PATH=\"{target}:$PATH\"; export PATH' | tee -a {file}",
                f"cat >> {file} <<'EOF'\nexport PATH=\"{target}:$PATH\"\nEOF",
            )
        )
    )
    reference.append(_verify(w, file, f"command -v {tools[0]}; echo $PATH"))
    return Draft(
        task=task, check=check, reference=reference, difficulty=3 if fix_exec else 2, files=files, setup=setup
    )


def _env_value(w: World, name: str) -> str:
    kind = name.rsplit("_", 1)[-1]
    if kind in ("HOME", "DIR", "ROOT"):
        return w.pick((f"/opt/{w.project()}", f"{HOME}/{w.dirname()}", f"/srv/{w.project()}/data"))
    if kind == "URL":
        return f"http://{w.service()}.{w.pick(('internal', 'local', 'lan'))}:{w.port()}"
    if kind == "REGION":
        return w.pick(("eu-west-1", "eu-central-2", "us-east-1", "ap-south-1", "sa-east-1"))
    if kind == "LEVEL":
        return w.pick(("debug", "info", "warning", "error"))
    if kind == "NAME":
        return f"{w.pick(('Team', 'Project', 'Squad'))} {w.project().capitalize()}"
    if kind == "OPTS":
        return f"-Xmx{w.pick((256, 512, 1024, 2048))}m -Dmode={w.word()}"
    return w.pick(("staging", "production", "development", "qa", "canary"))


@family(
    "environment-export-variable", "environment", "export an environment variable for every new login shell"
)
def export_variable(w: World) -> Draft:
    proj = w.project().upper()
    pool = (
        "APP_ENV",
        "DEPLOY_REGION",
        "LOG_LEVEL",
        f"{proj}_HOME",
        f"{proj}_URL",
        "TEAM_NAME",
        "DATA_DIR",
        "BUILD_PROFILE",
        "JAVA_OPTS",
        f"{proj}_ENV",
        "STAGE",
        "SERVICE_URL",
    )
    names = w.sample(pool, w.randint(1, 2))
    values = {n: _env_value(w, n) for n in names}
    w.note(*names, *values.values())
    planted = w.chance(0.3)
    rc = _rc(w) if not planted else ""
    setup = []
    if planted:
        old = w.pick(("old", "legacy", "test", "tmp")) + "-" + w.word()
        w.note(old)
        setup.append(f"printf '\\nexport {names[0]}={old}\\n' >> {HOME}/.profile")
    assign = " and ".join(f"`{n}={quote(v) if ' ' in v else v}`" for n, v in values.items())
    pron = "them" if len(names) > 1 else "it"
    spaces = any(" " in v for v in values.values())
    extra = (
        w.spin(
            "{An older|A stale} value of {n} is already set somewhere in your start-up files; make sure "
            "yours wins.",
            n=names[0],
        )
        if planted
        else ""
    )
    task = w.phrase(
        "{Set|Define} {assign} in the environment of every new login shell of yours {where}, so that programs "
        "started from it see {pron}. {extra}",
        "{Programs|Tools} you start need {assign} {exported|in their environment}. Make {pron} permanent for your "
        "login shells {where}. {extra}",
        "Ticket: export {assign} {persistently|permanently} (new login shells {must|should} have {pron}, child "
        "processes included); set {pron} {where}. {extra}",
        "Could you make {sure|certain} that every login shell you open has {assign} exported? {Put|Set} {pron} "
        "{where}. {extra}",
        "My scripts keep failing because {assign} is missing when I log in again. Make it stick: {pron} has to "
        "be exported in every login shell, set {where}. {extra}",
        "Persist for login shells, exported: {assign}. Put it {where}. {extra}",
        "Goal: `printenv` in any fresh login shell shows {assign}, and programs it starts inherit {pron}. Set "
        "{pron} {where}. {extra}",
        assign=assign,
        where=_where(w, rc),
        extra=extra,
        pron=pron,
    )
    probe = "; ".join(f"printenv {n} || echo '<unset>'" for n in names)
    lines = [
        _fresh(f'{{ {probe}; }} > "$R"'),
        f'[ "$(cat "$R")" = {quote(chr(10).join(values.values()))} ] || exit 1',
    ]
    if rc:
        lines.append(f"grep -q {names[0]} {HOME}/{rc[2:]} || exit 1")
    check = _script(*lines)
    file = rc or "~/.profile"
    reference = []
    if planted:
        reference.append("grep -n " + names[0] + " ~/.profile ~/.bashrc")
        reference.append(f"sed -i '/^export {names[0]}=/d' ~/.profile")
    body = [f"export {n}={quote(v) if ' ' in v or w.chance(0.3) else v}" for n, v in values.items()]
    if len(body) > 1 and w.chance(0.5):
        reference.append(f"printf '%s\\n' {' '.join(quote(b) for b in body)} >> {file}")
    else:
        reference += [f"echo {quote(b)} >> {file}" for b in body]
    reference.append(_verify(w, file, "; ".join(f"printenv {n}" for n in names)))
    difficulty = 3 if planted else (2 if spaces or len(names) > 1 else 1)
    return Draft(task=task, check=check, reference=reference, difficulty=difficulty, setup=setup)


def _alias(w: World) -> tuple[str, str]:
    proj = w.project()
    options = [
        ("ll", "ls -alF"),
        ("la", "ls -A"),
        ("l", "ls -CF"),
        ("gs", "git status"),
        ("gd", "git diff"),
        ("gl", f"git log --oneline -n {w.pick((10, 15, 20, 30))}"),
        ("dfh", "df -h"),
        ("duh", "du -sh ."),
        ("now", "date +%F_%T"),
        ("serve", f"python3 -m http.server {w.port()}"),
        (proj, f"cd ~/projects/{proj}"),
        (f"go{proj[:3]}", f"cd /srv/{proj}"),
        ("logs", f"tail -n {w.pick((20, 50, 100))} /var/log/{w.service()}.log"),
        ("psg", "ps aux | grep"),
        ("cls", "clear"),
        ("h", f"history {w.pick((20, 30, 50))}"),
        ("jqp", "jq ."),
        ("ports", "cat /etc/services"),
        ("up", "cd .."),
        ("up2", "cd ../.."),
        ("mkd", "mkdir -p"),
        ("rmi", "rm -i"),
        ("cpv", "cp -v"),
        ("wcl", "wc -l"),
    ]
    name, expansion = w.pick(options)
    w.note(name)
    return name, expansion


@family("environment-bash-alias", "environment", "define aliases for interactive bash shells")
def bash_alias(w: World) -> Draft:
    aliases: dict[str, str] = {}
    for _ in range(w.randint(1, 2)):
        name, expansion = _alias(w)
        aliases.setdefault(name, expansion)
    where = w.pick(("~/.bashrc", "~/.bash_aliases", ""))
    planted = w.chance(0.3)
    first = next(iter(aliases))
    setup = []
    if planted:
        old_line = f"alias {first}={quote(w.pick(('echo todo', 'ls', 'true')))}"
        setup.append(f"printf '%s\\n' {quote(old_line)} >> {HOME}/.bashrc")
    spec = " and ".join(
        f"`{n}` {w.pick(('running', 'expanding to', 'for'))} `{e}`" for n, e in aliases.items()
    )
    place = {
        "~/.bashrc": w.spin("{in|by adding it to} ~/.bashrc", capitalize=False),
        "~/.bash_aliases": w.spin(
            "in ~/.bash_aliases (the default ~/.bashrc {already sources|reads} it)", capitalize=False
        ),
        "": w.spin(
            "{wherever bash reads it for interactive shells|in the right start-up file}", capitalize=False
        ),
    }[where]
    extra = (
        w.spin(
            "{An old|A wrong} definition of `{n}` already exists in ~/.bashrc; yours must be the one "
            "that is used.",
            n=first,
        )
        if planted
        else ""
    )
    if len(aliases) > 1:
        task = w.phrase(
            "Add the aliases {spec} to every new interactive bash shell of yours, {place}. {extra}",
            "Please set up {shortcuts|two aliases}: {spec}. They must {be available|work} in every new interactive "
            "shell; define them {place}. {extra}",
            "Ticket: {persistent|permanent} aliases for the operator: {spec}; define them {place}. {extra}",
            "Could you define {spec} as aliases for your interactive bash sessions, {place}? {extra}",
            spec=spec,
            place=place,
            extra=extra,
        )
    else:
        task = w.phrase(
            "Add {the|an} alias {spec} to every new interactive bash shell of yours, {place}. {extra}",
            "Please set up a {shortcut|short alias}: {spec}. It must {be available|work} in every new interactive "
            "shell; define it {place}. {extra}",
            "Ticket: {persistent|permanent} alias for the operator: {spec}; define it {place}. {extra}",
            "Could you define {spec} as an alias for your interactive bash sessions, {place}? {extra}",
            spec=spec,
            place=place,
            extra=extra,
        )
    probe = "; ".join(f"alias {n}" for n in aliases)
    want = "\n".join(f"alias {n}={quote(e)}" for n, e in aliases.items())
    lines = [_fresh(f'{{ {probe}; }} > "$R"', "-ic"), f'[ "$(cat "$R")" = {quote(want)} ] || exit 1']
    if where:
        lines.append(f"grep -q '^[[:space:]]*alias[[:space:]]\\+{first}=' {HOME}/{where[2:]} || exit 1")
    check = _script(*lines)
    file = where or "~/.bashrc"
    reference = []
    if planted:
        reference.append(f"grep -n 'alias {first}=' ~/.bashrc")
        reference.append(f"sed -i '/^alias {first}=/d' ~/.bashrc")
    for n, e in aliases.items():
        line = f"alias {n}={quote(e)}"
        reference.append(w.pick((f"echo {quote(line)} >> {file}", f"printf '%s\\n' {quote(line)} >> {file}")))
    reference.append(w.pick((f"bash -ic {quote(probe)} 2>/dev/null", f"tail -n 3 {file}")))
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if planted else (2 if len(aliases) > 1 else 1),
        setup=setup,
    )


def _env_pairs(w: World, n: int, proj: str) -> dict[str, str]:
    makers = {
        "DB_HOST": lambda: f"{w.pick(('db', 'pg', 'mysql'))}.{proj}.internal",
        "DB_PORT": lambda: str(w.pick((5432, 3306, 5433, 6432))),
        "DB_NAME": lambda: f"{proj}_{w.pick(('prod', 'dev', 'app', 'main'))}",
        "DB_USER": lambda: f"{proj}_{w.pick(('app', 'rw', 'svc'))}",
        "REDIS_URL": lambda: f"redis://cache.{proj}.internal:6379/{w.randint(0, 9)}",
        "LOG_LEVEL": lambda: w.pick(("debug", "info", "warning", "error")),
        "APP_PORT": lambda: str(w.port()),
        "API_BASE_URL": lambda: f"https://api.{proj}.example.com/v{w.randint(1, 3)}",
        "WORKERS": lambda: str(w.randint(2, 16)),
        "CACHE_TTL": lambda: str(w.pick((60, 300, 600, 3600))),
        "SMTP_HOST": lambda: f"smtp.{proj}.example.com",
        "FEATURE_FLAGS": lambda: ",".join(w.sample(("beta", "search", "export", "dark_mode", "audit"), 2)),
        "TZ": lambda: w.pick(("UTC", "Europe/Lisbon", "America/Denver", "Asia/Seoul", "Africa/Nairobi")),
        "DEBUG": lambda: w.pick(("true", "false")),
    }
    keys = w.sample(list(makers), n)
    pairs = {k: makers[k]() for k in keys}
    w.note(*pairs.values())
    return pairs


@family("environment-write-env-file", "environment", "write a KEY=value .env file from given settings")
def write_env_file(w: World) -> Draft:
    proj = w.project()
    pdir = f"{HOME}/{w.pick(('projects/', 'src/', 'apps/', ''))}{proj}"
    out = f"{pdir}/{w.pick(('.env', '.env', 'app.env', 'config.env', '.env.local'))}"
    pairs = _env_pairs(w, w.randint(3, 5), proj)
    source = w.pick(("list", "json", "json_nested", "yaml"))
    files = {f"{pdir}/README.md": f"# {proj}\n"}
    src = None
    setup: list[str] = []
    if source == "list":
        spec = "; ".join(f"{k}: {v}" for k, v in pairs.items())
        origin = w.spin("{with these settings|holding these values}: {spec}", capitalize=False, spec=spec)
        difficulty = 1
    elif source == "json":
        src = f"{pdir}/{w.pick(('settings', 'config', 'env'))}.json"
        files[src] = (
            json.dumps({k.lower(): (int(v) if v.isdigit() else v) for k, v in pairs.items()}, indent=2) + "\n"
        )
        origin = w.spin(
            "from {src}: one variable per key, the key {upper-cased|in upper case}",
            capitalize=False,
            src=w.path_ref(src, "file"),
        )
        difficulty = 2
    elif source == "json_nested":
        src = f"{pdir}/{w.pick(('settings', 'config', 'deploy'))}.json"
        section = w.pick(("env", "environment", "variables"))
        doc = {
            "name": proj,
            "version": f"{w.randint(0, 4)}.{w.randint(0, 30)}.{w.randint(0, 9)}",
            section: dict(pairs),
            "owners": w.sample(("ops", "data", "web", "qa"), 2),
        }
        files[src] = json.dumps(doc, indent=2) + "\n"
        w.note(section)
        origin = w.spin(
            'from the "{section}" object in {src} (every key there, {exactly as written|as is}; '
            "nothing else from that file)",
            capitalize=False,
            section=section,
            src=w.path_ref(src, "file"),
        )
        difficulty = 2
    else:
        src = f"{pdir}/{w.pick(('settings', 'config', 'app'))}.{w.pick(('yaml', 'yml'))}"
        body = [f"# {proj} settings"] + [f"{k.lower()}: {v}" for k, v in pairs.items()]
        files[src] = "\n".join(body) + "\n"
        origin = w.spin(
            "from the `key: value` lines of {src} (skip comments), the keys {upper-cased|in upper case}",
            capitalize=False,
            src=w.path_ref(src, "file"),
        )
        difficulty = 3
    fmt = w.spin("one KEY=value per line{|, no spaces around =}{|, no export}", capitalize=False)
    task = w.phrase(
        "Create {out} {origin}. Format: {fmt}.",
        "The {app|service} in {pdir} reads its configuration from {out}. Write that file {origin} ({fmt}).",
        "Ticket: {we need|missing} {out}, {origin}; {fmt}.",
        "Could you write {out} {origin}? Use {fmt}.",
        "Deploying {pdir} fails with 'missing configuration': the app expects {out}, which nobody created. "
        "Build it {origin}; {fmt}.",
        "{out}, {origin}. {fmt_c}.",
        "I'd like {out} to exist, filled {origin}. It gets sourced by the start script, so: {fmt}.",
        fmt_c=fmt[:1].upper() + fmt[1:],
        out=w.path_ref(out, "file"),
        origin=origin,
        fmt=fmt,
        pdir=w.path_ref(pdir),
    )
    keys = list(pairs)
    probe = "printf '%s\\n' " + " ".join(f'"${{{k}-<unset>}}"' for k in keys)
    sourced = quote('set -a; . "$1" >/dev/null 2>&1; ' + probe)
    lines = [
        f'f={quote(out)}; [ -f "$f" ] || exit 1',
        f'[ "$(grep -cE \'^[[:space:]]*(export[[:space:]]+)?[A-Za-z_][A-Za-z0-9_]*=\' "$f")" = {len(keys)} ] '
        "|| exit 1",
        f'got=$(env -i bash -c {sourced} _ "$f")',
        f'[ "$got" = {quote(chr(10).join(pairs.values()))} ] || exit 1',
    ]
    check = _script(*lines)
    o = "~" + out[len(HOME) :]
    how = w.pick(("usual", "usual", "python", "other"))
    if source == "list" and how != "usual":  # the lines written by a here-document (into cat or tee)
        env_lines = "\n".join(f"{k}={v}" for k, v in pairs.items())
        writer = f"cat > {o}" if how == "python" else f"tee {o} >/dev/null"
        reference = [f"{writer} <<'EOF'\n{env_lines}\nEOF"]
    elif source == "list":
        reference = [f"printf '%s\\n' {' '.join(quote(f'{k}={v}') for k, v in pairs.items())} > {o}"]
    elif how == "python" and source != "yaml":  # python's json module
        pick = f"[{section!r}]" if source == "json_nested" else ""
        key = "k" if source == "json_nested" else "k.upper()"
        code = f"import json, sys; [print(f'{{{key}}}={{v}}') for k, v in json.load(open(sys.argv[1])){pick}.items()]"
        reference = [f"python3 -c {quote(code)} {src} > {o}"]
    elif how == "other" and source == "json":  # jq writes key=value, sed upper-cases the key
        reference = [f"jq -r 'to_entries[] | \"\\(.key)=\\(.value)\"' {src} | sed 's/^[^=]*/\\U&/' > {o}"]
    elif source == "json":
        reference = [f"jq -r 'to_entries[] | \"\\(.key | ascii_upcase)=\\(.value)\"' {src} > {o}"]
    elif source == "json_nested":
        reference = [f"jq -r '.{section} | to_entries[] | \"\\(.key)=\\(.value)\"' {src} > {o}"]
    elif how == "python":  # the `key: value` lines split in python
        code = (
            "import sys; [print(k.strip().upper() + '=' + v.strip()) for k, v in "
            "(line.split(':', 1) for line in open(sys.argv[1]) if line[:1].isalpha())]"
        )
        reference = [f"python3 -c {quote(code)} {src} > {o}"]
    elif how == "other":  # a read loop, bash upper-casing the key
        reference = [f"grep -v '^#' {src} | while IFS=': ' read -r k v; do echo \"${{k^^}}=$v\"; done > {o}"]
    else:
        reference = [
            w.pick(
                (
                    f"awk -F': ' '/^[a-z]/ {{print toupper($1) \"=\" $2}}' {src} > {o}",
                    f"sed -n -E 's/^([a-z_]+): (.*)$/\\U\\1\\E=\\2/p' {src} > {o}",
                )
            )
        ]
    if src and w.chance(0.5):
        reference.insert(0, f"cat {src}")
    reference.append(f"cat {o}")
    return Draft(task=task, check=check, reference=reference, difficulty=difficulty, files=files, setup=setup)


@family("environment-find-env-setter", "environment", "find which env file sets a variable (and to what)")
def find_env_setter(w: World) -> Draft:
    proj = w.project()
    edir = w.pick(
        (f"{HOME}/{proj}/env", f"{HOME}/.config/{proj}", f"{HOME}/envs", f"{HOME}/{proj}/deploy/env")
    )
    ext = w.pick(("env", "sh", "conf"))
    var = f"{w.pick(('API', 'DB', 'CACHE', 'MAIL', 'QUEUE', 'STORAGE'))}_{w.pick(('TOKEN', 'HOST', 'URL', 'TIMEOUT', 'PORT', 'MODE'))}"
    variant = w.pick(("one", "one", "all", "value"))
    names = [
        w.filename(ext, stem=w.pick((w.service(), f"{w.service()}-{w.pick(('prod', 'dev', 'base'))}")))
        for _ in range(w.randint(4, 7))
    ]
    n_set = 1 if variant == "one" else w.randint(2, min(3, len(names) - 1))
    setters = w.sample(names, n_set)
    w.note(var, ext)
    files: dict[str, str] = {}
    values = {}
    for n in names:
        body = [f"# {n.rsplit('.', 1)[0]} settings"]
        for _ in range(w.randint(1, 3)):
            body.append(
                f"{w.pick(('LOG', 'APP', 'WORKER', 'HTTP'))}_{w.pick(('LEVEL', 'NAME', 'COUNT', 'PORT'))}="
                f"{w.randint(1, 999)}"
            )
        if n in setters:
            values[n] = f"{w.word()}-{w.randint(10, 99)}"
            body.insert(
                w.randint(1, len(body)),
                w.pick((f"{var}={values[n]}", f"export {var}={values[n]}", f'export {var}="{values[n]}"')),
            )
        else:  # decoys: commented out, a longer name, a use of the variable, not an assignment
            body.append(
                w.pick(
                    (
                        f"# {var}={w.word()}",
                        f"{var}_OLD={w.word()}",
                        f"MY_{var}={w.word()}",
                        f"BACKUP_{var.split('_')[1]}=${{{var}}}",
                        f'echo "using ${var}" >/dev/null',
                    )
                )
            )
        files[f"{edir}/{n}"] = "\n".join(body) + "\n"
    out = f"{HOME}/{w.pick(('answer', 'found', 'result', var.lower()))}.txt"
    if variant == "value":
        final = values[sorted(setters)[-1]]
        w.note(final)
    where = w.path_ref(edir)
    if variant == "one":
        task = w.phrase(
            "{Exactly one|Only one} of the .{ext} files in {dir} {sets|assigns} {var}. Write {that file's name|the name "
            "of that file} to {out}.",
            "Which file in {dir} {defines|sets} {var}? Put its name in {out}{| (just the file name)}.",
            "Ticket: {var} {gets a wrong value|is set} somewhere in {dir}. Find the file that assigns it and save "
            "its name to {out}.",
            "Find the .{ext} file in {dir} that {assigns a value to|sets} {var} (comments and other variables do "
            "not count) and write its name to {out}.",
            dir=where,
            var=var,
            out=w.path_ref(out, "file"),
            ext=ext,
        )
    elif variant == "all":
        task = w.phrase(
            "Several .{ext} files in {dir} {set|assign} {var}. Write the names of all of them to {out}, one per "
            "line.",
            "Which files in {dir} {define|assign} {var}? List their names in {out} (one per line; comments and "
            "other variables do not count).",
            "Ticket: {var} is assigned in more than one file under {dir}. Save the names of those files to {out}, "
            "one per line.",
            "Find every .{ext} file in {dir} that assigns a value to {var} and write their names to {out}, one per "
            "line.",
            dir=where,
            var=var,
            out=w.path_ref(out, "file"),
            ext=ext,
        )
    else:
        task = w.phrase(
            "The .{ext} files in {dir} are {loaded|sourced} one after another in alphabetical order, so the last "
            "assignment wins. What value does {var} end up with? Write just the value (no quotes) to {out}.",
            "{Several|Some} files in {dir} set {var}; they are sourced in alphabetical order of their names. Write "
            "the {final|effective} value of {var} to {out} (value only, without quotes).",
            "Ticket: we source every .{ext} file in {dir} in name order. Find the value {var} has afterwards and "
            "save it to {out}, value only.",
            "Could you work out the value of {var} after all .{ext} files in {dir} are sourced in alphabetical "
            "order? Put the bare value in {out}.",
            dir=where,
            var=var,
            out=w.path_ref(out, "file"),
            ext=ext,
        )
    if variant == "value":
        check = _script(
            f"[ -f {quote(out)} ] || exit 1",
            f'[ "$(tr -d \'[:space:]"\' < {quote(out)})" = {quote(final)} ] || exit 1',
        )
    else:
        want = "\n".join(sorted(setters))
        check = _script(
            f"[ -f {quote(out)} ] || exit 1",
            f"got=$(sed -e 's#.*/##' -e 's/[[:space:]]*$//' -e '/^$/d' {quote(out)} | sort)",
            f'[ "$got" = {quote(want)} ] || exit 1',
        )
    d = "~" + edir[len(HOME) :]
    pattern = f"'^(export )?{var}='"
    if variant == "value":
        reference = [
            f"grep -nE {pattern} {d}/*.{ext}",
            w.pick(
                (
                    f'(set -a; for f in {d}/*.{ext}; do . "$f"; done; echo "${var}") > {out}',
                    f"grep -hE {pattern} $(ls {d}/*.{ext} | sort) | tail -n 1 | cut -d= -f2- | tr -d "
                    f"'\"' > {out}",
                    # awk keeps the last assignment it reads, the quotes stripped
                    f'awk -F= \'/^(export )?{var}=/ {{v = $2}} END {{gsub(/"/, "", v); print v}}\' '
                    f"$(ls {d}/*.{ext} | sort) > {out}",
                )
            ),
        ]
    else:
        reference = [
            w.pick(
                (
                    f"grep -lE {pattern} {d}/*.{ext} | xargs -n1 basename > {out}",
                    f"cd {d} && grep -lE {pattern} *.{ext} > {out}",
                    # find tests each file with grep -q and prints the names that pass
                    f"find {d} -name '*.{ext}' -exec grep -qE {pattern} {{}} \\; -printf '%f\\n' > {out}",
                    # awk names the file at its first assignment and moves on
                    f"awk '/^(export )?{var}=/ {{n = split(FILENAME, p, \"/\"); print p[n]; nextfile}}' "
                    f"{d}/*.{ext} > {out}",
                    # one grep -q a file, in a loop
                    f'for f in {d}/*.{ext}; do grep -qE {pattern} "$f" && basename "$f"; done > {out}',
                )
            )
        ]
    reference.append(f"cat {out}")
    return Draft(
        task=task, check=check, reference=reference, difficulty=3 if variant == "value" else 2, files=files
    )


EDITOR_SECTIONS = {
    "*": (
        ("charset", "utf-8"),
        ("end_of_line", "lf"),
        ("insert_final_newline", "true"),
        ("trim_trailing_whitespace", "true"),
    ),
    "*.py": (("indent_style", "space"), ("indent_size", "4"), ("max_line_length", "120")),
    "*.{js,json,yml}": (("indent_style", "space"), ("indent_size", "2")),
    "*.go": (("indent_style", "tab"), ("indent_size", "8")),
    "Makefile": (("indent_style", "tab"),),
    "*.md": (("trim_trailing_whitespace", "false"), ("max_line_length", "off")),
    "*.sh": (("indent_style", "space"), ("indent_size", "2"), ("end_of_line", "lf")),
}


@family("environment-editorconfig", "environment", "write an .editorconfig dotfile with given sections")
def editorconfig(w: World) -> Draft:
    proj = w.project()
    at_home = w.chance(0.3)
    base = HOME if at_home else f"{HOME}/{w.pick(('projects/', 'src/', ''))}{proj}"
    out = f"{base}/.editorconfig"
    root = w.chance(0.6)
    sections = w.sample(list(EDITOR_SECTIONS), w.randint(2, 3))
    want: dict[str, dict[str, str]] = {}
    for s in sections:
        props = EDITOR_SECTIONS[s]
        chosen = w.sample(props, w.randint(1, len(props)))
        want[s] = dict(chosen)
    files = {} if at_home else {f"{base}/README.md": f"# {proj}\n"}
    spec = "; ".join(f"[{s}]: " + ", ".join(f"{k} = {v}" for k, v in kv.items()) for s, kv in want.items())
    root_text = (
        w.spin("root = true {at the top|first} (before any section), then", capitalize=False) + " "
        if root
        else ""
    )
    task = w.phrase(
        "{Create|Write} {out} {for your editors|for the project}: {root_text}these sections and properties: {spec}.",
        "{Our|The} editors should agree on formatting. Write {out} (an EditorConfig file) with {root_text}the "
        "sections {spec}.",
        "Ticket: add {out}. {Contents|Required settings}: {root_text}{spec}.",
        "Could you set up {out}? {It needs|Put in it} {root_text}{spec}.",
        "Every pull request in this repo fights over tabs, spaces and line endings. Settle it with an "
        "EditorConfig file, {out}, holding {root_text}{spec}.",
        "{out}: {root_text}{spec}.",
        out=w.path_ref(out, "file"),
        spec=spec,
        root_text=root_text,
        pdir=w.path_ref(base),
    )
    expect = {"preamble": {"root": "true"} if root else {}, "sections": want}
    check = _script(
        f"[ -f {quote(out)} ] || exit 1",
        "python3 - " + quote(out) + " <<'PYEOF'",
        "import json, sys",
        f"want = json.loads({json.dumps(json.dumps(expect))})",
        "pre, secs, cur = {}, {}, None",
        "for raw in open(sys.argv[1], encoding='utf-8', errors='replace'):",
        "    line = raw.strip()",
        "    if not line or line[0] in '#;':",
        "        continue",
        "    if line.startswith('[') and line.endswith(']'):",
        "        cur = secs.setdefault(line[1:-1].strip(), {})",
        "        continue",
        "    if '=' not in line:",
        "        sys.exit(1)",
        "    k, v = (p.strip().lower() for p in line.split('=', 1))",
        "    (pre if cur is None else cur)[k] = v",
        "ok = all(pre.get(k) == v for k, v in want['preamble'].items())",
        "ok = ok and all(s in secs and all(secs[s].get(k) == v for k, v in kv.items())",
        "                for s, kv in want['sections'].items())",
        "sys.exit(0 if ok else 1)",
        "PYEOF",
    )
    body = ["root = true"] if root else []
    for s, kv in want.items():
        body += ["", f"[{s}]"] + [f"{k} = {v}" for k, v in kv.items()]
    if body and body[0] == "":
        body = body[1:]
    o = "~" + out[len(HOME) :]
    lines_arg = " ".join(quote(b) for b in body)
    reference = [
        w.pick(
            (
                f"printf '%s\\n' {lines_arg} > {o}",
                f"printf '%s\\n' {lines_arg} | tee {o}",
                "{ " + "; ".join(f"echo {quote(b)}" for b in body) + f"; }} > {o}",
            )
        ),
        w.pick((f"cat {o}", f"cat -A {o}", f"grep -n . {o}")),
    ]
    return Draft(task=task, check=check, reference=reference, difficulty=2, files=files)


UMASKS = {
    0o022: ("rw-r--r--", "rwxr-xr-x"),
    0o027: ("rw-r-----", "rwxr-x---"),
    0o077: ("rw-------", "rwx------"),
    0o002: ("rw-rw-r--", "rwxrwxr-x"),
    0o007: ("rw-rw----", "rwxrwx---"),
}


@family("environment-umask-profile", "environment", "set the default umask of the operator's login shells")
def umask_profile(w: World) -> Draft:
    mask = w.pick([m for m in UMASKS if m != 0o022])  # 022 is already the default: nothing to do
    fmode, dmode = UMASKS[mask]
    by_mode = w.chance(0.5)
    planted = w.chance(0.3)
    rc = "" if planted else _rc(w)
    bad = w.pick([m for m in (0o000, 0o002, 0o022, 0o077) if m != mask])
    setup = [f"printf '\\numask {bad:03o}\\n' >> {HOME}/.profile"] if planted else []
    w.note(f"{mask:03o}", f"{0o666 & ~mask:o}", f"{0o777 & ~mask:o}")
    if by_mode:
        what = w.spin(
            "new files {are created|come out} as {f} ({fo}) and new directories as {d} ({do})",
            capitalize=False,
            f=fmode,
            d=dmode,
            fo=f"{0o666 & ~mask:o}",
            do=f"{0o777 & ~mask:o}",
        )
    else:
        what = w.spin("the umask is {m}", capitalize=False, m=f"{mask:03o}")
    extra = (
        w.spin(
            "{Something|A line} in your start-up files already sets a different umask; {make sure yours is "
            "the one in effect|yours must win}."
        )
        if planted
        else ""
    )
    task = w.phrase(
        "Make every new login shell of yours {start with a setting where|behave so that} {what}; set it {where}. "
        "{extra}",
        "{For privacy|For the shared project}, {configure|change} your login shells so that {what}. Make it "
        "permanent {where}. {extra}",
        "Ticket: default permissions for the operator: {what} (in every new login shell, set {where}). {extra}",
        "Could you set things up so that, in every login shell you open, {what}? {Configure|Put} it {where}. {extra}",
        "Files I create keep coming out with the wrong permissions. From my next login on, {what}; configure it "
        "{where}. {extra}",
        "login shells: {what}. Set it {where}. {extra}",
        what=what,
        where=_where(w, rc),
        extra=extra,
    )
    lines = [_fresh('umask > "$R"'), f'[ "$(tr -d \'[:space:]\' < "$R")" = {mask:04o} ] || exit 1']
    if rc:
        lines.append(f"grep -q '^[[:space:]]*umask' {HOME}/{rc[2:]} || exit 1")
    check = _script(*lines)
    file = rc or "~/.profile"
    reference = []
    if planted:
        reference += ["grep -n umask ~/.profile ~/.bashrc", f"sed -i '/^umask {bad:03o}$/d' ~/.profile"]
    reference.append(
        w.pick(
            (
                f"echo 'umask {mask:03o}' >> {file}",
                f"printf '%s\\n' 'umask {mask:03o}' >> {file}",
                f"echo 'umask {mask:03o}' | tee -a {file}",
                f"cat >> {file} <<'EOF'\numask {mask:03o}\nEOF",
            )
        )
    )
    reference.append(_verify(w, file, "umask; umask -S"))
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if planted else (2 if by_mode else 1),
        setup=setup,
    )


# ==== issue 39: which start-up file a login reads, and interactive-shell history settings =========================
# Both run as operator (home) or root (/root); checks start fresh shells (``_fresh``) of that user, login and not,
# and read what they end up with.
def _frag(w: World, template: str, **values: object) -> str:
    return w.spin(template, capitalize=False, **values)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


_INSTALLERS = (
    ("cargo", "CARGO_HOME", ".cargo"),
    ("pyenv", "PYENV_ROOT", ".pyenv"),
    ("sdkman", "SDKMAN_DIR", ".sdkman"),
    ("volta", "VOLTA_HOME", ".volta"),
    ("deno", "DENO_INSTALL", ".deno"),
    ("asdf", "ASDF_DIR", ".asdf"),
)
_PROFILE_VARS = (
    ("EDITOR", "vim"),
    ("PAGER", "less"),
    ("VISUAL", "nano"),
    ("LESS", "-R"),
    ("DEPLOY_ENV", "staging"),
)


@family(
    "environment-login-reads-bashrc",
    "environment",
    "make login shells read ~/.profile and ~/.bashrc again once an installer's ~/.bash_profile shadows them",
)
def login_reads_bashrc(w: World) -> Draft:
    user = w.pick(("operator", "operator", "root"))
    home = HOME if user == "operator" else "/root"
    tool, tool_var, tool_dir = w.pick(_INSTALLERS)
    var, value = w.pick(_PROFILE_VARS)
    alias, target = w.pick(
        (
            ("gs", "git status"),
            ("ll", "ls -alF"),
            ("k", "kubectl"),
            ("dc", "docker compose"),
            ("t", "tail -f"),
        )
    )
    shadow = w.pick((".bash_profile", ".bash_profile", ".bash_login"))
    sources_rc = w.chance(0.3)  # the installer file already reads ~/.bashrc (so .profile would read it twice)
    installer = [
        f"# added by the {tool} installer",
        f'export {tool_var}="$HOME/{tool_dir}"',
        f'export PATH="$HOME/{tool_dir}/bin:$PATH"',
    ]
    if sources_rc:
        installer.append(w.pick(("[ -f ~/.bashrc ] && . ~/.bashrc", ". ~/.bashrc", 'source "$HOME/.bashrc"')))
    rc_lines = [
        "# read count, for the prompt's debug mode",
        "BASHRC_READS=$((BASHRC_READS + 1))",
        f"alias {alias}='{target}'",
    ]
    setup = [
        f"printf '%s\\n' {' '.join(quote(x) for x in installer)} > {home}/{shadow}",
        f"printf '%s\\n' {' '.join(quote(x) for x in rc_lines)} >> {home}/.bashrc",
        f"printf '%s\\n' {quote(f'export {var}={value}')} >> {home}/.profile",
        f"chown {user}: {home}/{shadow} {home}/.bashrc {home}/.profile",
    ]
    w.note(tool, tool_var, var, value, alias, shadow)
    task = w.phrase(
        "Since the {tool} installer created ~/{shadow}, my login shells {no longer get|lost} `{alias}` (from "
        "~/.bashrc) {or|and} {var} (from ~/.profile). {Fix|Repair} the start-up files so a login shell has all "
        "three: {tool_var}, {var} and the alias, with ~/.bashrc read {once|a single time}.",
        "Login shells ({ssh, `su -`|ssh sessions, `bash -l`}) read ~/{shadow} and stop there. Make them also "
        "load ~/.profile and, through it, ~/.bashrc, exactly once, {without losing|keeping} what ~/{shadow} sets.",
        "Ticket: after {installing|the install of} {tool}, {var} is unset and the `{alias}` alias is missing in "
        "login shells. Repair the start-up chain (~/{shadow}, ~/.profile, ~/.bashrc); ~/.bashrc must not be "
        "{read|sourced} twice.",
        "Could you sort out my bash start-up files? A login shell should end up with {tool_var} from ~/{shadow}, "
        "{var}={value} from ~/.profile and {the alias|alias} {alias} from ~/.bashrc, {reading|sourcing} ~/.bashrc "
        "only once.",
        "Goal: `bash -l` {gives|sets} {var}={value}, {tool_var} and the `{alias}` alias, and {sources|reads} "
        "~/.bashrc a single time (BASHRC_READS=1).",
        "Why is {var} empty when I {ssh in|log in}? Because bash found ~/{shadow} and never read ~/.profile. Make "
        "login shells read both (and ~/.bashrc {once|exactly once}).",
        "~/{shadow} from the {tool} installer hides ~/.profile from login shells. Keep its settings, but have "
        "login shells get {var} and `{alias}` again; ~/.bashrc is {read|loaded} exactly once.",
        "Login shell start-up{:| chain:} ~/{shadow} + ~/.profile + ~/.bashrc (once). Today only the first is "
        "{read|used}. {Fix it|Make all three count}.",
        tool=tool,
        shadow=shadow,
        alias=alias,
        var=var,
        value=value,
        tool_var=tool_var,
    )
    f = f"~/{shadow}"
    ref = [w.pick((f"cat {f}", "ls -la ~", f"head ~/.profile {f}"))]
    if w.chance(0.35):
        ref.append(w.pick((f"cp {f} {f}.orig", f"cp -p {f} /tmp/{shadow}.bak")))
    how = w.randint(0, 4)
    if sources_rc:
        rc_line = installer[-1]
        ref.append(
            (
                f"sed -i 's|^{_sed_re(rc_line)}$|. ~/.profile|' {f}",
                f"sed -i '/bashrc/d' {f} && echo '. ~/.profile' >> {f}",
                f"grep -v bashrc {f} > /tmp/bp && cat /tmp/bp > {f} && echo '[ -f ~/.profile ] && . ~/.profile' >> {f}",
                f"sed -i '$d' {f} && printf '%s\\n' 'if [ -f \"$HOME/.profile\" ]; then . \"$HOME/.profile\"; fi' >> {f}",
                f"sed -i '/bashrc/d' {f} && cat {f} >> ~/.profile && rm {f}",
            )[how]
        )
    else:
        ref.append(
            (
                f"echo '[ -f ~/.profile ] && . ~/.profile' >> {f}",
                f"printf '%s\\n' '. \"$HOME/.profile\"' >> {f}",
                f"cat {f} >> ~/.profile && rm {f}",
                f"sed -i '1i . ~/.profile' {f}",
                f"cat >> {f} <<'EOF'\nif [ -f ~/.profile ]; then\n    . ~/.profile\nfi\nEOF",
            )[how]
        )
    ref.append(
        w.pick(
            (
                f"bash -lic 'alias {alias}; echo ${var} ${tool_var} $BASHRC_READS' 2>/dev/null",
                f"bash -l -i -c 'type {alias}; env | grep -E \"^({var}|{tool_var})=\"' 2>/dev/null",
                f"env -i HOME=$HOME bash -lic 'echo $BASHRC_READS ${var}' 2>/dev/null",
            )
        )
    )
    want_i = f"alias {alias}='{target}'\n{value}|{home}/{tool_dir}|1"
    want_l = f"{value}|{home}/{tool_dir}"
    check = _script(
        _fresh(f'{{ alias {alias}; echo "${var}|${tool_var}|$BASHRC_READS"; }} > "$R"', "-lic", user),
        f'[ "$(cat "$R")" = {quote(want_i)} ] || exit 1',
        _fresh(f'echo "${var}|${tool_var}" > "$R"', "-lc", user),
        f'[ "$(cat "$R")" = {quote(want_l)} ] || exit 1',
    )
    wd, place = workplace(w, user, w.project(), home_share=0.4)  # where the complaint was typed
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if sources_rc else 2,
        setup=setup + place,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == home else wd,
    )


def _sed_re(text: str) -> str:
    """``text`` as a basic sed regex between ``|`` delimiters."""
    return "".join("\\" + c if c in "\\.[]*^$|" else c for c in text)


_HIST: dict[str, tuple[str, Callable[[World], str]]] = {
    "size": ("HISTSIZE", lambda w: str(w.pick((5000, 10000, 20000, 50000)))),
    "filesize": ("HISTFILESIZE", lambda w: str(w.pick((10000, 100000, 200000)))),
    "control": (
        "HISTCONTROL",
        lambda w: w.pick(("ignoredups", "erasedups", "ignoreboth:erasedups", "ignorespace")),
    ),
    "time": ("HISTTIMEFORMAT", lambda w: w.pick(("%F %T ", "%Y-%m-%d %H:%M:%S ", "%d/%m %H:%M "))),
    "ignore": ("HISTIGNORE", lambda w: w.pick(("ls:pwd:exit", "history:clear", "ls:bg:fg:history"))),
}


@family(
    "environment-shell-history",
    "environment",
    "configure bash history for every interactive shell (sizes, HISTCONTROL, timestamps, append, flush per prompt)",
)
def shell_history(w: World) -> Draft:
    user = w.pick(("operator", "operator", "root"))
    keys = w.sample(tuple(_HIST), w.randint(1, 3))
    values = {_HIST[k][0]: _HIST[k][1](w) for k in keys}
    append = w.chance(0.4)
    flush = w.chance(0.3)
    if not values and not append:
        append = True
    asks = []
    for name, value in values.items():
        shown = f"'{value}'" if " " in value else value
        template = {
            "HISTSIZE": "{keep|remember} {v} commands in memory (HISTSIZE)",
            "HISTFILESIZE": "{let|allow} the history file hold {v} lines (HISTFILESIZE)",
            "HISTCONTROL": "HISTCONTROL={v}",
            "HISTTIMEFORMAT": "history shows timestamps with HISTTIMEFORMAT={v}",
            "HISTIGNORE": "{commands|the commands} {v} are never recorded (HISTIGNORE={v})",
        }[name]
        asks.append(_frag(w, template, v=shown if name == "HISTTIMEFORMAT" else value))
    if append:
        asks.append(
            _frag(w, "{the history file is appended to, not overwritten (shopt histappend)|histappend is on}")
        )
    if flush:
        asks.append(
            _frag(
                w,
                "each command is written to the history file as soon as the prompt returns (history -a in PROMPT_COMMAND)",
            )
        )
    w.note(*values.values())
    spec_text = w.clauses(asks)
    task = w.phrase(
        "Configure bash history for all my interactive shells, login or not: {spec}.",
        "I keep losing shell history. Set it up so that {spec}; it must hold in every new interactive bash, "
        "including terminals that are not login shells.",
        "Ticket: history settings for {u}: {spec}. Applies to every interactive bash session.",
        "Could you change my bash history settings? {spec_c}. New terminal tabs (non-login shells) must get them too.",
        "Goal: any new interactive shell of {u} has these history settings: {spec}.",
        "{spec_c}. That is for every interactive bash of {u}, not just this session.",
        "For the audit we need better shell history: {spec}. Put it where every interactive bash reads it.",
        "Why do my commands vanish from history? Because the defaults are tiny. Fix it for all interactive "
        "shells: {spec}.",
        spec=spec_text,
        spec_c=_capital(spec_text),
        u=user,
    )
    probe_parts = [f'printf "%s\\n" "{name}=${{{name}}}"' for name in values]
    want_lines = [f"{name}={value}" for name, value in values.items()]
    if append:
        probe_parts.append("shopt -q histappend && echo histappend")
        want_lines.append("histappend")
    if flush:
        probe_parts.append('case "$PROMPT_COMMAND" in *"history -a"*) echo flush;; esac')
        want_lines.append("flush")
    probe = "{ " + "; ".join(probe_parts) + '; } > "$R"'
    want = "\n".join(want_lines)
    check = _script(
        _fresh(probe, "-ic", user),
        f'[ "$(cat "$R")" = {quote(want)} ] || exit 1',
        _fresh(probe, "-lic", user),
        f'[ "$(cat "$R")" = {quote(want)} ] || exit 1',
    )
    assigns = [f"{n}={quote(v) if ' ' in v else v}" for n, v in values.items()]
    extra = (["shopt -s histappend"] if append else []) + (
        ['PROMPT_COMMAND="history -a${PROMPT_COMMAND:+; $PROMPT_COMMAND}"'] if flush else []
    )
    target = "~/.bashrc"
    if user == "operator" and w.chance(0.3):
        target = "~/.bash_aliases"  # Debian's ~/.bashrc reads it
    ref = [w.pick(("grep -n HIST ~/.bashrc", "cat ~/.bashrc | grep -i hist", "echo $HISTSIZE $HISTFILESIZE"))]
    if w.chance(0.3):
        ref.append(w.pick(("cp ~/.bashrc ~/.bashrc.bak", "cp -p ~/.bashrc /tmp/bashrc.orig")))
    how = w.randint(0, 4 if not flush else 3)  # PROMPT_COMMAND's quotes and $ stay out of python -c
    if how == 0 and target != "~/.bashrc":
        how = 1  # sed edits the lines ~/.bashrc has; a new file is written whole
    in_rc = {"HISTSIZE", "HISTFILESIZE", "HISTCONTROL"} if user == "operator" else set()
    if how == 0 and target == "~/.bashrc":
        for n, v in values.items():
            a = f"{n}={quote(v) if ' ' in v else v}"
            if n in in_rc:
                ref.append(f"sed -i 's/^{n}=.*/{a.replace('/', chr(92) + '/')}/' ~/.bashrc")
            else:
                ref.append(f"echo {quote(a)} >> ~/.bashrc")
        ref += [f"echo {quote(x)} >> ~/.bashrc" for x in extra]
    elif how == 1:
        ref.append(f"cat >> {target} <<'EOF'\n" + "\n".join(assigns + extra) + "\nEOF")
    elif how == 2:
        ref.append("printf '%s\\n' " + " ".join(quote(x) for x in assigns + extra) + f" >> {target}")
    elif how == 3:
        ref.append(f"tee -a {target} > /dev/null <<'EOF'\n" + "\n".join(assigns + extra) + "\nEOF")
    else:
        block = "\\n".join(x.replace("'", "\\'") for x in assigns + extra)
        ref.append(f"python3 -c \"import os; open(os.path.expanduser('{target}'), 'a').write('{block}\\n')\"")
    ref.append(
        w.pick(
            (
                "bash -ic 'echo $HISTSIZE $HISTFILESIZE $HISTCONTROL; shopt histappend' 2>/dev/null",
                "bash -i -c 'set | grep ^HIST' 2>/dev/null",
                f"grep -n -e HIST -e histappend {target}",
            )
        )
    )
    wd, place = workplace(w, user, w.project(), home_share=0.4)
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=min(3, 1 + len(asks) // 2 + (1 if flush else 0)),
        setup=place,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )
