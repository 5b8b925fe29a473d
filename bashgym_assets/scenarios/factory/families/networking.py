"""Networking without a network: name resolution files, listening sockets, service ports, ssh client config, and
reading addresses out of configuration.

The sandbox has no network but does have loopback, so a listener started in the setup (a small python program
bound to 127.0.0.1) is a real socket that ``fuser`` and /proc/net/tcp can see. ss, lsof and curl are not
installed: the tasks are solvable with procps/psmisc, /proc and text tools, which is the point.
"""

from __future__ import annotations

import json
import posixpath

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import (
    HOME,
    PROJECTS,
    SERVICES,
    TEAMS,
    WORDS,
    World,
    py_check,
    quote,
    workplace,
)

_BASE_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\n"
_DOMAINS = ("internal", "corp.example", "lan", "svc.local", "prod.example.net")
_LISTENER = (
    "#!/usr/bin/python3\nimport os, socket, time\n"
    "s = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(os.environ.pop('PORT'))))\ns.listen()\n"
    "while True:\n    time.sleep(3600)\n"
)
_IDLE = "#!/bin/bash\nwhile :; do sleep 100000 & wait $!; done\n"
_START = (
    'st() { n=$1; shift; b=$(pgrep -c -x -P 1 "$n" || true); '
    'runuser -u operator -- "$@" </dev/null >/dev/null 2>&1; '
    'for i in $(seq 300); do [ "$(pgrep -c -x -P 1 "$n" || true)" -gt "$b" ] && break; sleep 0.02; done; '
    'pgrep -n -x -P 1 "$n"; }'
)
_PORTS = (
    2049,
    3000,
    3306,
    4000,
    5000,
    5432,
    5601,
    6379,
    7000,
    8000,
    8080,
    8081,
    8088,
    8443,
    8888,
    9000,
    9090,
    9100,
    9200,
    9300,
    11211,
    15672,
    27017,
)


def _f(w: World, template: str, **values: object) -> str:
    """A spun fragment for inside a sentence (not capitalised)."""
    return w.spin(template, capitalize=False, **values)


def _host(w: World, domain: str | None = None) -> str:
    return w.unique(
        lambda: (
            f"{w.pick(SERVICES + PROJECTS)}{w.pick(('', '', '01', '02', '-db', '-1'))}."
            f"{domain or w.pick(_DOMAINS)}"
        )
    )


def _ip(w: World, net: str | None = None, avoid: str = "") -> str:
    """A private address, inside ``net`` (three octets) when given, never inside ``avoid``."""

    def make() -> str:
        for _ in range(50):
            ip = (
                f"{net}.{w.randint(2, 250)}"
                if net
                else f"10.{w.randint(0, 40)}.{w.randint(0, 254)}.{w.randint(2, 250)}"
            )
            if not avoid or not ip.startswith(avoid + "."):
                return ip
        return f"192.168.{w.randint(0, 254)}.{w.randint(2, 250)}"

    return w.unique(make)


def _name(w: World) -> str:
    def make() -> str:
        for _ in range(40):
            n = w.pick(
                (
                    f"{w.pick(SERVICES)}-{w.pick(('api', 'srv', 'web', 'proxy', 'rpc'))}",
                    f"{w.pick(SERVICES)}d",
                    f"{w.pick(WORDS)}-srv",
                )
            )
            if len(n) <= 14:
                return n
        return f"svc{w.randint(10, 99)}"

    return w.unique(make)


@family("networking-hosts-entry", "networking-offline", "add, correct or remove a name in /etc/hosts")
def hosts_entry(w: World) -> Draft:
    variant = w.pick(("add", "add", "alias", "fix", "remove"))
    name, ip = _host(w), _ip(w)
    short = name.split(".")[0]
    decoys = [(_ip(w), _host(w)) for _ in range(w.randint(1, 4))]
    # a decoy may carry its short name too, unless that is the target's short name (which must stay unambiguous)
    lines = [
        f"{a}\t{h}" + (f" {h.split('.')[0]}" if w.chance(0.4) and h.split(".")[0] != short else "")
        for a, h in decoys
    ]
    old_ip = ""
    short_too = False
    if variant in ("fix", "remove"):
        old_ip = _ip(w)
        pos = w.randint(0, len(lines))
        short_too = variant == "remove" and w.chance(0.5)
        lines.insert(pos, f"{old_ip}\t{name}" + (f" {short}" if short_too else ""))
    if w.chance(0.4):
        lines.insert(0, w.pick(("# internal services", "# added by ops", "# static entries")))
    hosts = _BASE_HOSTS + "".join(line + "\n" for line in lines)
    w.note(ip, old_ip, short)
    hosts_ref = w.pick(("/etc/hosts", "the hosts file (/etc/hosts)", "the system's hosts file, /etc/hosts"))
    keep = w.pick(
        (
            "keep every other entry as it is",
            "leave all the other entries as they are",
            "keep the existing lines intact",
            "the other entries must not change",
        )
    )
    if variant == "add":
        task = w.phrase(
            "Make the name {name} resolve to {ip} on this machine by adding it to {hosts}; {keep}.",
            "{Add|Create} a {hosts entry|static entry} in {hosts} so that {name} points to {ip}; {keep}.",
            "Ticket: {name} ({ip}) is not in DNS yet. Add it to {hosts} so it resolves locally; {keep}.",
            "Could you map {name} to {ip} in {hosts}? {keep_c}.",
            name=name,
            ip=ip,
            hosts=hosts_ref,
            keep=keep,
            keep_c=keep[:1].upper() + keep[1:],
        )
    elif variant == "alias":
        task = w.phrase(
            "Make both {name} and its short name {short} resolve to {ip} through {hosts}; {keep}.",
            "{Add|Create} {an entry|one line} in {hosts} so that {name} (short name: {short}) points to {ip}; "
            "{keep}.",
            "Ticket: the new host {name} has the address {ip}. Both the full name and {short} must resolve via "
            "{hosts}; {keep}.",
            "Could you make {name} and {short} resolve to {ip} locally ({hosts})? {keep_c}.",
            name=name,
            short=short,
            ip=ip,
            hosts=hosts_ref,
            keep=keep,
            keep_c=keep[:1].upper() + keep[1:],
        )
    elif variant == "fix":
        task = w.phrase(
            "{name} moved to {ip}, but {hosts} still sends it to the old address. Fix the entry (do not just add a "
            "second one); {keep}.",
            "{Correct|Update} {hosts}: {name} must resolve to {ip}, not {old}. {keep_c}, and leave no stale line "
            "for {name}.",
            "Ticket: {name} resolves to the retired address {old}. Point it at {ip} in {hosts}; {keep}.",
            "Could you fix the {hosts entry|line} for {name} so that it resolves to {ip}? It points to {old} now. "
            "{keep_c}.",
            name=name,
            ip=ip,
            old=old_ip,
            hosts=hosts_ref,
            keep=keep,
            keep_c=keep[:1].upper() + keep[1:],
        )
    else:
        task = w.phrase(
            "{name} has been {decommissioned|retired}. Remove it from {hosts} so it no longer resolves; {keep}.",
            "{Delete|Remove} the {stale |}{hosts entry|line} for {name} ({old}) from {hosts}; {keep}.",
            "Ticket: {name} should not resolve any more. Take it out of {hosts}; {keep}.",
            "Could you drop {name} from {hosts}? {keep_c}.",
            name=name,
            old=old_ip,
            hosts=hosts_ref,
            keep=keep,
            keep_c=keep[:1].upper() + keep[1:],
        )
    count = (
        'count_of() { awk -v n="$1" \'{sub(/#.*/, "")} NF >= 2 {for (i = 2; i <= NF; i++) '
        "if (tolower($i) == tolower(n)) c++} END {print c + 0}' /etc/hosts; }"
    )
    lines_check = [
        "#!/bin/bash",
        count,
        "ip_of() { getent hosts \"$1\" | awk 'NR == 1 {print $1}'; }",
        "grep -qE '^127\\.0\\.0\\.1[[:space:]]+localhost' /etc/hosts || exit 1",
    ]
    lines_check += [f'[ "$(ip_of {h})" = {a} ] || exit 1' for a, h in decoys]
    if variant == "remove":
        lines_check.append(f'[ "$(count_of {name})" = 0 ] || exit 1')
        if short_too:
            lines_check.append(f'[ "$(count_of {short})" = 0 ] || exit 1')
    else:
        lines_check += [f'[ "$(ip_of {name})" = {ip} ] || exit 1', f'[ "$(count_of {name})" = 1 ] || exit 1']
        if variant == "alias":
            lines_check.append(f'[ "$(ip_of {short})" = {ip} ] || exit 1')
    check = "\n".join(lines_check) + "\n"
    if variant in ("add", "alias"):
        entry = f"{ip} {name}" + (f" {short}" if variant == "alias" else "")
        add = w.pick(
            (
                f"echo {quote(entry)} >> /etc/hosts",
                f"printf '%s\\n' {quote(entry)} | tee -a /etc/hosts",
                f"echo {quote(entry.replace(' ', chr(9)))} >> /etc/hosts",
                f"sed -i '$a {entry}' /etc/hosts",  # sed appends after the last line
                "python3 -c " + quote(f"open('/etc/hosts', 'a').write({entry!r} + chr(10))"),
            )
        )
        reference = ["cat /etc/hosts", add, f"getent hosts {name}"]
    elif variant == "fix":
        esc = name.replace(".", "\\.")
        reference = [
            "cat /etc/hosts",
            w.pick(
                (
                    f"sed -i 's/^{old_ip.replace('.', chr(92) + '.')}\\([[:space:]]\\+{esc}"
                    f"\\)/{ip}\\1/' /etc/hosts",
                    f"sed -i '/[[:space:]]{esc}\\([[:space:]]\\|$\\)/d' /etc/hosts && "
                    f"echo '{ip} {name}' >> /etc/hosts",
                    # awk rewrites the address field of that line; the copy is written back over the file
                    f"awk -v ip={ip} '$2 == \"{name}\" {{$1 = ip}} {{print}}' /etc/hosts > /tmp/hosts && "
                    "cat /tmp/hosts > /etc/hosts",
                    f"perl -pi -e 's/^\\Q{old_ip}\\E(?=\\s+\\Q{name}\\E(\\s|$))/{ip}/' /etc/hosts",
                )
            ),
            f"getent hosts {name}",
        ]
    else:
        esc = name.replace(".", "\\.")
        reference = [
            "cat /etc/hosts",
            w.pick(
                (
                    f"sed -i '/[[:space:]]{esc}\\([[:space:]]\\|$\\)/d' /etc/hosts",
                    f"grep -v '[[:space:]]{esc}\\([[:space:]]\\|$\\)' /etc/hosts > "
                    f"/tmp/hosts && cat /tmp/hosts > /etc/hosts",
                    f"perl -ni -e 'print unless /\\s\\Q{name}\\E(\\s|$)/' /etc/hosts",
                    f"awk '$2 != \"{name}\"' /etc/hosts > /tmp/hosts && cat /tmp/hosts > /etc/hosts",
                )
            ),
            "cat /etc/hosts",
        ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=1 if variant in ("add", "alias") else 2,
        files={"/etc/hosts": hosts},
        user="root",
    )


@family(
    "networking-port-owner", "networking-offline", "find which process listens on a TCP port (or the reverse)"
)
def port_owner(w: World) -> Draft:
    k = w.randint(2, 4)
    names = [_name(w) for _ in range(k)]
    ports = w.sample(_PORTS, k)
    variant = w.pick(("pid", "name", "kill", "port"))
    idx = w.randint(0, k - 1)
    run = f"/root/.net-{w.token(6)}"
    files = {f"/usr/local/bin/{n}": _LISTENER for n in names}
    lines = ["set -e", _START, f"mkdir -p {run}"]
    for i, (n, p) in enumerate(zip(names, ports, strict=True)):
        lines.append(f"st {n} env PORT={p} setsid -f /usr/local/bin/{n} > {run}/{i}")
    decoy = ""
    if variant != "port" and w.chance(
        0.6
    ):  # a program whose command line names the port without listening on it
        decoy = w.unique(
            lambda: f"{w.pick(('probe', 'check', 'watch'))}-{w.pick([s for s in SERVICES if len(s) <= 8])}"
        )
        files[f"/usr/local/bin/{decoy}"] = _IDLE
        lines.append(
            f"st {decoy} setsid -f /usr/local/bin/{decoy} --target 127.0.0.1:{ports[idx]} > {run}/decoy"
        )
    waits = " && ".join(f"grep -q ':{p:04X} 00000000:0000 0A' /proc/net/tcp" for p in ports)
    lines.append(f"for i in $(seq 300); do {{ {waits}; }} && break; sleep 0.02; done; {{ {waits}; }}")
    script = f"/root/.listen-{w.token(6)}.sh"
    files[script] = "\n".join(lines) + "\n"
    port, target = ports[idx], names[idx]
    w.note(port)
    out = f"{HOME}/{w.pick(('port_owner', 'listener', 'answer', 'who_listens'))}.{w.pick(('txt', 'out'))}"
    noss = w.pick(("", " (ss and lsof are not installed)", " (there is no ss or lsof here)"))
    if variant == "port":
        task = w.phrase(
            "Which TCP port is the {n} process listening on{noss}? Write {just |}the port number to {out}.",
            "{Find out|Work out} the port {n} listens on and {save|write} it to {out}{noss}.",
            "Ticket: nobody remembers which port {n} uses. Check the running process{noss} and put the port number "
            "in {out}.",
            "Could you tell me on which TCP port {n} accepts connections? {Write|Put} the number in {out}.",
            n=target,
            noss=noss,
            out=w.path_ref(out, "file"),
        )
    else:
        report = {
            "pid": _f(w, "{its PID|the process ID}"),
            "kill": _f(w, "{its PID|the process ID}"),
            "name": _f(w, "{its program name|the name of the program} (as ps shows it)"),
        }[variant]
        stop = (
            " " + w.spin("Then {stop|terminate} it so the port is free; the other services keep running.")
            if variant == "kill"
            else ""
        )
        task = w.phrase(
            "Which process is listening on TCP port {p}{noss}? Write {report} to {out}.{stop}",
            "{Find|Identify} the process {bound to|listening on} 127.0.0.1:{p} and {save|write} {report} in {out}"
            "{noss}.{stop}",
            "Ticket: something is holding port {p}. {Track it down|Find it}{noss} and record {report} in {out}.{stop}",
            "Could you find out what listens on port {p}? I need {report} in {out}.{stop}",
            p=port,
            noss=noss,
            report=report,
            out=w.path_ref(out, "file"),
            stop=stop,
        )
    got = f"$(tr -d '[:space:]' < {quote(out)})"
    check_lines = ["#!/bin/bash", f"[ -f {quote(out)} ] || exit 1"]
    if variant == "port":
        check_lines.append(f'[ "{got}" = {port} ] || exit 1')
    elif variant == "name":
        check_lines.append(f'[ "{got}" = {target} ] || exit 1')
    else:
        check_lines.append(f'[ "{got}" = "$(cat {run}/{idx})" ] || exit 1')
    if variant == "kill":
        check_lines += [
            f"for i in $(seq 12); do grep -q ':{port:04X} 00000000:0000 0A' /proc/net/tcp || break; "
            "sleep 0.05; done",
            f"! grep -q ':{port:04X} 00000000:0000 0A' /proc/net/tcp || exit 1",
        ]
        check_lines += [f'kill -0 "$(cat {run}/{i})" || exit 1' for i in range(k) if i != idx]
        if decoy:
            check_lines.append(f'kill -0 "$(cat {run}/decoy)" || exit 1')
    check = "\n".join(check_lines) + "\n"
    q = quote(out)
    if variant == "port":
        reference = [
            f"pid=$(pgrep -x {target}); ls -l /proc/$pid/fd",
            "ino=$(ls -l /proc/$pid/fd | grep -o 'socket:\\[[0-9]*\\]' | tr -dc '0-9')",
            'hex=$(awk -v i="$ino" \'$10 == i {split($2, a, ":"); print a[2]}\' /proc/net/tcp)',
            f"printf '%d\\n' 0x$hex > {q}",
            f"cat {q}",
        ]
        return Draft(
            task=task, check=check, reference=reference, difficulty=4, files=files, setup=[f"bash {script}"]
        )
    look = w.pick((f"fuser -v {port}/tcp", "cat /proc/net/tcp", f"fuser -n tcp {port}"))
    if variant == "name":
        find = w.pick(
            (
                f"ps -o comm= -p $(fuser {port}/tcp 2>/dev/null) > {q}",
                f"ps -o comm= -p \"$(fuser -n tcp {port} 2>/dev/null | awk '{{print $1}}')\" > {q}",
            )
        )
    else:
        find = w.pick(
            (
                f"fuser {port}/tcp 2>/dev/null | awk '{{print $1}}' > {q}",
                f"fuser -n tcp {port} 2>/dev/null | tr -d ' ' > {q}",
            )
        )
    reference = [look, find, f"cat {q}"]
    if variant == "kill":
        reference += [
            w.pick((f"kill $(cat {q})", f"fuser -k {port}/tcp")),
            f"sleep 0.5; fuser -v {port}/tcp || echo 'port {port} is free'",
        ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if variant == "kill" else 2,
        files=files,
        setup=[f"bash {script}"],
    )


@family(
    "networking-listen-port-config",
    "networking-offline",
    "change the port a service listens on in its config",
)
def listen_port_config(w: World) -> Draft:
    svc = w.pick([s for s in SERVICES if s != "profile"])  # /etc/profile is a file
    old, new = w.sample(_PORTS, 2)
    fmt = w.pick(("ini", "nginx", "yaml", "env"))
    up_host = _host(w)
    w.note(svc, old, new)
    if fmt == "ini":
        path = w.pick((f"{HOME}/{svc}/{svc}.ini", f"{HOME}/etc/{svc}.conf", f"/etc/{svc}/{svc}.ini"))
        lines = [
            "# " + svc + " configuration",
            "[server]",
            "host = 0.0.0.0",
            f"port = {old}",
            f"workers = {w.randint(2, 16)}",
            "",
            "[upstream]",
            f"host = {up_host}",
            f"port = {old}",
            "",
            "[metrics]",
            f"port = {w.pick((9100, 9102, 9187))}",
        ]
        if w.chance(0.5):
            lines.insert(3, f"# port = {old} is the default")
        target = lines.index(f"port = {old}")
        pattern = rf"^\s*port\s*=\s*{new}\s*$"
        section = "[server]"
        ref = w.pick(
            (
                f"sed -i '/^\\[server\\]/,/^\\[/ s/^port = {old}$/port = {new}/' {path}",
                f'awk \'/^\\[/ {{s = $0}} s == "[server]" && $0 == "port = {old}" {{$0 = "port = {new}"}} 1\' '
                f"{path} > {path}.new && mv {path}.new {path}",
            )
        )
        where = _f(w, "the port in the {s} section", s=section)
    elif fmt == "nginx":
        path = w.pick((f"{HOME}/nginx/sites/{svc}.conf", f"/etc/nginx/conf.d/{svc}.conf"))
        lines = [
            f"upstream {svc}_backend {{",
            f"    server {up_host}:{old};",
            "}",
            "",
            "server {",
            f"    listen {old};",
            f"    server_name {svc}.example.com;",
            "    location / {",
            f"        proxy_pass http://{svc}_backend;",
            "    }",
            "}",
        ]
        target = lines.index(f"    listen {old};")
        pattern = rf"^\s*listen\s+{new}\s*;\s*$"
        ref = f"sed -i 's/^\\(\\s*listen\\s\\+\\){old};/\\1{new};/' {path}"
        where = _f(w, "the port the server block listens on (the listen directive)")
    elif fmt == "yaml":
        path = w.pick((f"{HOME}/{svc}/config.yaml", f"{HOME}/deploy/{svc}.yml", f"/etc/{svc}/config.yaml"))
        lines = [
            f"service: {svc}",
            "server:",
            f"  listen: 0.0.0.0:{old}",
            f"  timeout: {w.randint(5, 60)}s",
            "upstream:",
            f"  url: http://{up_host}:{old}",
            f"  retries: {w.randint(1, 5)}",
        ]
        target = 2
        pattern = rf"^  listen:\s*['\"]?0\.0\.0\.0:{new}['\"]?\s*$"
        ref = f"sed -i 's/^  listen: 0\\.0\\.0\\.0:{old}$/  listen: 0.0.0.0:{new}/' {path}"
        where = _f(w, "{the listen address's port|the port in server.listen}")
    else:
        path = w.pick((f"{HOME}/{svc}/.env", f"{HOME}/{svc}/{svc}.env", f"/etc/default/{svc}"))
        lines = [
            f"# environment for {svc}",
            f"{svc.upper()}_LISTEN_PORT={old}",
            f"{svc.upper()}_UPSTREAM=http://{up_host}:{old}",
            f"{svc.upper()}_LOG_LEVEL=info",
        ]
        target = 1
        pattern = rf"^{svc.upper()}_LISTEN_PORT=['\"]?{new}['\"]?\s*$"
        ref = f"sed -i 's/^{svc.upper()}_LISTEN_PORT={old}$/{svc.upper()}_LISTEN_PORT={new}/' {path}"
        where = _f(w, "the {v} setting", v=f"{svc.upper()}_LISTEN_PORT")
    root = path.startswith("/etc/")
    text = "".join(line + "\n" for line in lines)
    upstream = _f(
        w, "{the upstream|the backend it proxies to} ({h}:{p}) {stays|must stay} on {p}", h=up_host, p=old
    )
    task = w.phrase(
        "{svc} must listen on port {new} instead of {old}. Change {where} in {path}; {upstream}.",
        "In {path}, change {where} from {old} to {new}. {up_c}, so do not replace every {old} blindly.",
        "Ticket: move the {svc} service from port {old} to {new} by editing {path}. Only {where} changes; "
        "{upstream}.",
        "Could you switch {svc} to port {new}? The config is {path}: {where} is {old} now. {up_c}.",
        "Port {old} is being handed to another team, so {svc} has to give it up. Its config lives in {path}: "
        "set {where} to {new} and change nothing else - {upstream}.",
        "{path}: {where} {old} -> {new}. {up_c}.",
        "After your edit, {svc} should come up on {new} when it reads {path}. {up_c}; only {where} moves.",
        svc=svc,
        new=new,
        old=old,
        where=where,
        path=w.path_ref(path, "file"),
        upstream=upstream,
        up_c=upstream[:1].upper() + upstream[1:],
    )
    spec = {"lines": lines, "target": target, "pattern": pattern}
    check = (
        "#!/bin/bash\n"
        f"python3 - {quote(path)} {quote(json.dumps(spec))} <<'PY'\n"
        "import json, re, sys\n"
        "spec = json.loads(sys.argv[2])\n"
        "try:\n    got = open(sys.argv[1]).read().splitlines()\nexcept OSError:\n    sys.exit(1)\n"
        "want = spec['lines']\n"
        "while got and not got[-1].strip():\n    got.pop()\n"
        "if len(got) != len(want):\n    sys.exit(1)\n"
        "for i, (g, x) in enumerate(zip(got, want)):\n"
        "    if i == spec['target']:\n"
        "        if not re.match(spec['pattern'], g):\n            sys.exit(1)\n"
        "    elif g.rstrip() != x.rstrip():\n        sys.exit(1)\n"
        "PY\n"
    )
    files = {path: text}
    n = target + 1  # the line to change, counted from 1: every way below edits that line only
    ref = w.pick(
        (
            ref,
            ref,
            f"sed -i '{n}s/{old}/{new}/' {path}",
            f"perl -pi -e 's/{old}/{new}/ if $. == {n}' {path}",
            f"awk 'NR == {n} {{ sub(/{old}/, \"{new}\") }} 1' {path} > {path}.tmp && cat {path}.tmp > {path} "
            f"&& rm {path}.tmp",
            "python3 -c 'import sys; p, n, a, b = sys.argv[1:]; t = open(p).read().splitlines(True); "
            f'i = int(n) - 1; t[i] = t[i].replace(a, b); open(p, "w").writelines(t)\' {path} {n} {old} {new}',
            f"vi -e -s -c '{n}s/{old}/{new}/' -c wq {path}",
        )
    )
    reference = [
        w.pick((f"grep -n {old} {path}", f"cat -n {path}")),
        ref,
        f"grep -n -e {old} -e {new} {path}",
    ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if fmt in ("yaml", "env") else 3,
        files=files,
        user="root" if root else "operator",
    )


_SSH_CHECK = r"""
import fnmatch, json, os, stat, sys
spec = json.loads(sys.argv[1])
path = "/home/operator/.ssh/config"
d = os.path.dirname(path)
try:
    sd, sf = os.stat(d), os.stat(path)
except OSError:
    sys.exit(1)
if sd.st_uid != 1000 or stat.S_IMODE(sd.st_mode) != 0o700 or sf.st_uid != 1000 or stat.S_IMODE(sf.st_mode) != 0o600:
    print("ownership or modes")
    sys.exit(1)
blocks, cur = [], None
for line in open(path):
    s = line.strip()
    if not s or s.startswith("#"):
        continue
    key, _, value = s.replace("=", " ", 1).partition(" ")
    key, value = key.lower(), value.strip().strip('"')
    if key == "host":
        cur = (value.split(), {})
        blocks.append(cur)
    elif key == "match":
        cur = None
    elif cur is not None:
        cur[1].setdefault(key, value)


def effective(alias):
    out = {}
    for patterns, opts in blocks:
        hit = any(fnmatch.fnmatch(alias, p) for p in patterns if not p.startswith("!"))
        if hit and not any(fnmatch.fnmatch(alias, p[1:]) for p in patterns if p.startswith("!")):
            for k, v in opts.items():
                out.setdefault(k, v)
    return out


def same(k, got, want):
    if k == "identityfile":
        return got.replace("/home/operator/", "~/") == want.replace("/home/operator/", "~/")
    return got.lower() == want.lower() if k in ("forwardagent", "compression") else got == want


for alias, want in spec.items():
    eff = effective(alias)
    for k, v in want.items():
        if not same(k, eff.get(k, ""), v):
            print(f"{alias}: {k} is {eff.get(k)!r}, want {v!r}")
            sys.exit(1)
"""


@family(
    "networking-ssh-config-host",
    "networking-offline",
    "add a Host block to the ssh client config, with modes",
)
def ssh_config_host(w: World) -> Draft:
    alias = w.unique(
        lambda: w.pick(
            (
                w.pick(SERVICES),
                w.pick(PROJECTS),
                f"{w.pick(TEAMS)}-box",
                f"{w.pick(SERVICES)}-{w.pick(('prod', 'stage', 'dev'))}",
            )
        )
    )
    host = w.pick((_ip(w), _host(w)))
    opts: dict[str, str] = {"hostname": host}
    user = w.pick(("deploy", "ubuntu", "admin", "git", "ops", w.pick(("alice", "omar", "priya"))))
    if w.chance(0.8):
        opts["user"] = user
    if w.chance(0.6):
        opts["port"] = str(w.pick((22, 2200, 2222, 22022, 8022)))
    if w.chance(0.5):
        opts["identityfile"] = f"~/.ssh/id_{w.pick(('ed25519', 'rsa', alias))}"
    existing: list[tuple[str, dict[str, str]]] = []
    for _ in range(w.randint(0, 3)):
        a = w.unique(lambda: f"{w.pick(SERVICES)}-{w.pick(('old', 'db', 'jump', 'ci'))}")
        existing.append((a, {"hostname": _ip(w), "user": w.pick(("root", "deploy", "ci"))}))
    bastion = ""
    if existing and w.chance(0.4):
        bastion = existing[0][0]
        opts["proxyjump"] = bastion
    star = w.chance(0.35)  # a catch-all at the end: a block appended after it loses to its values
    star_opts = {"user": "nobody", "port": "22", "serveraliveinterval": "60"} if star else {}
    w.note(alias, host, user, opts.get("port", ""), bastion)
    keys = {
        "hostname": "HostName",
        "user": "User",
        "port": "Port",
        "identityfile": "IdentityFile",
        "proxyjump": "ProxyJump",
        "serveraliveinterval": "ServerAliveInterval",
    }
    text = ""
    for a, o in existing:
        text += f"Host {a}\n" + "".join(f"    {keys[k]} {v}\n" for k, v in o.items()) + "\n"
    if star:
        text += "Host *\n" + "".join(f"    {keys[k]} {v}\n" for k, v in star_opts.items())
    files: dict[str, str] = {}
    setup: list[str] = []
    if text:
        files[f"{HOME}/.ssh/config"] = text
        setup.append(f"chmod 700 {HOME}/.ssh && chmod 600 {HOME}/.ssh/config")
    parts = [f"HostName {host}"] + [f"{keys[k]} {v}" for k, v in opts.items() if k != "hostname"]
    listing = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    modes = _f(
        w, "{~/.ssh must be mode 700 and the config file mode 600|keep ~/.ssh at 700 and the config at 600}"
    )
    star_note = (
        " " + w.spin("Mind the existing Host * block: ssh takes the first value it finds for each option.")
        if star and w.chance(0.5)
        else ""
    )
    keep = " " + w.spin("The existing hosts must keep working as they do.") if existing else ""
    task = w.phrase(
        "Add an ssh client entry so that `ssh {alias}` connects with {listing}. Put it in ~/.ssh/config; {modes}."
        "{keep}{star}",
        "{Set up|Configure} a Host {alias} block in your ssh config (~/.ssh/config) with {listing}; {modes}.{keep}"
        "{star}",
        "Ticket: I want to type `ssh {alias}` instead of the full command. In ~/.ssh/config it needs {listing}. "
        "{modes_c}.{keep}{star}",
        "Could you add {alias} to ~/.ssh/config ({listing})? {modes_c}.{keep}{star}",
        "I keep mistyping the options for this server. Give me a {shortcut|host alias} {alias} in ~/.ssh/config "
        "that sets {listing}; {modes}.{keep}{star}",
        "Goal: `ssh {alias}` just works, using {listing}, all from ~/.ssh/config. {modes_c}.{keep}{star}",
        "~/.ssh/config: new Host {alias} ({listing}). {modes_c}.{keep}{star}",
        alias=alias,
        listing=listing,
        modes=modes,
        modes_c=modes[:1].upper() + modes[1:],
        keep=keep,
        star=star_note,
    )
    spec: dict[str, dict[str, str]] = {alias: opts}
    for a, o in existing:
        spec[a] = o
    check = f"#!/bin/bash\npython3 - {quote(json.dumps(spec))} <<'PY'\n{_SSH_CHECK.strip()}\nPY\n"
    block = f"Host {alias}\n" + "".join(f"    {p}\n" for p in parts)
    cfg = f"{HOME}/.ssh/config"
    if star:
        write = w.pick(
            (
                f"{{ printf %s {quote(block + chr(10))}; cat ~/.ssh/config; }} > /tmp/sshcfg && "
                "cat /tmp/sshcfg > ~/.ssh/config",
                "sed -i '/^Host \\*$/i " + "\\n".join(block.rstrip("\n").split("\n")) + "\\n' ~/.ssh/config",
            )
        )
    else:
        text = ("" if not existing else chr(10)) + block
        write = w.pick(
            (
                f"printf %s {quote(text)} >> ~/.ssh/config",
                f"cat >> ~/.ssh/config <<'EOF'\n{text}EOF",
                f"printf %s {quote(text)} | tee -a ~/.ssh/config",
            )
        )
    reference = [
        w.pick(("mkdir -p ~/.ssh && chmod 700 ~/.ssh", "install -d -m 700 ~/.ssh")),
        w.pick(("cat ~/.ssh/config", "ls -la ~/.ssh")),
        write,
        f"chmod 600 {cfg}",
        f"cat {cfg}",
    ]
    if not existing and not star:
        reference.pop(1)
    return Draft(
        task=task, check=check, reference=reference, difficulty=3 if star else 2, files=files, setup=setup
    )


@family(
    "networking-config-ip-report", "networking-offline", "pull addresses out of a network config into a list"
)
def config_ip_report(w: World) -> Draft:
    kind = w.pick(("upstream", "haproxy", "resolv", "hosts_subnet"))
    out = f"{HOME}/{w.pick(('ips', 'addresses', 'backends', 'report', 'servers'))}.txt"
    svc = w.pick(SERVICES)
    w.note(svc)
    ordered = False
    if kind == "upstream":
        path = f"{HOME}/{w.pick(('nginx', 'conf', 'proxy'))}/{svc}.conf"
        live = [_ip(w) for _ in range(w.randint(3, 6))]
        backup = _ip(w)
        dead = _ip(w)
        lines = [f"upstream {svc} {{"] + [
            f"    server {ip}:{w.pick(_PORTS)}{w.pick(('', ' weight=2', ' max_fails=3'))};" for ip in live
        ]
        lines.insert(w.randint(1, len(lines)), f"    # server {dead}:8080;  retired")
        lines.insert(w.randint(1, len(lines)), f"    server {backup}:8080 backup;")
        lines += [
            "}",
            "",
            "server {",
            f"    listen {w.pick(('0.0.0.0:80', '127.0.0.1:8080'))};",
            f"    location / {{ proxy_pass http://{svc}; }}",
            "}",
        ]
        want = sorted(set(live + [backup]), key=lambda s: tuple(int(x) for x in s.split(".")))
        what = _f(
            w,
            "the IP address of every {active |}server in the {svc} upstream block (backup servers "
            "included, commented-out ones not)",
            svc=svc,
        )
        ref = (
            f"grep -E '^[[:space:]]*server[[:space:]]+[0-9]' {path} | awk '{{print $2}}' | cut -d: -f1 | "
            f"sort -u -t. -k1,1n -k2,2n -k3,3n -k4,4n > {out}"
        )
        alternatives = [
            # sed keeps the address of each live server line; sort -V orders dotted quads numerically
            f"sed -n 's/^[[:space:]]*server[[:space:]]\\+\\([0-9.]*\\):.*/\\1/p' {path} | sort -u -V > {out}",
            # python: a regular expression, then ipaddress for the order
            "python3 -c "
            + quote(
                "import ipaddress, re, sys; found = set(re.findall(r'^\\s*server\\s+([0-9.]+):', "
                "open(sys.argv[1]).read(), re.M)); print(*sorted(found, key=ipaddress.ip_address), sep=chr(10))"
            )
            + f" {path} > {out}",
        ]
    elif kind == "haproxy":
        path = w.pick((f"{HOME}/haproxy/haproxy.cfg", f"{HOME}/{svc}/haproxy.cfg"))
        live = [_ip(w) for _ in range(w.randint(3, 6))]
        other = [_ip(w) for _ in range(w.randint(1, 3))]
        lines = [
            "global",
            "    maxconn 2048",
            "",
            "frontend web",
            "    bind *:80",
            f"    default_backend {svc}",
            "",
            f"backend {svc}",
            "    balance roundrobin",
        ]
        lines += [f"    server {svc}{i + 1} {ip}:{w.pick(_PORTS)} check" for i, ip in enumerate(live)]
        lines += ["", "backend admin"] + [
            f"    server admin{i + 1} {ip}:9000 check" for i, ip in enumerate(other)
        ]
        want = sorted(set(live), key=lambda s: tuple(int(x) for x in s.split(".")))
        what = _f(w, "the IP addresses of the servers in the backend {svc} (not the admin backend)", svc=svc)
        ref = (
            f'awk \'/^backend/ {{b = $2}} b == "{svc}" && $1 == "server" {{split($3, a, ":"); print a[1]}}\' '
            f"{path} | sort -u -t. -k1,1n -k2,2n -k3,3n -k4,4n > {out}"
        )
        alternatives = [
            # the backend's block cut out by a sed range, the addresses by grep -o
            f"sed -n '/^backend {svc}$/,/^$/p' {path} | grep -oE 'server [^ ]+ [0-9.]+' | awk '{{print $3}}' | "
            f"sort -u -V > {out}"
        ]
    elif kind == "resolv":
        path = w.pick(
            (f"{HOME}/{w.pick(('snapshots', 'incident', 'notes'))}/resolv.conf", f"{HOME}/resolv.conf.saved")
        )
        servers = [_ip(w) for _ in range(w.randint(2, 4))]
        lines = [
            f"# generated by {w.pick(('NetworkManager', 'dhclient', 'netplan'))}",
            f"search {w.pick(_DOMAINS)} {w.pick(_DOMAINS)}",
        ]
        lines += [f"nameserver {s}" for s in servers]
        lines.insert(w.randint(2, len(lines)), f"#nameserver {_ip(w)}")
        lines.append(f"options timeout:{w.randint(1, 5)} attempts:{w.randint(1, 3)}")
        want = servers
        ordered = True
        what = _f(
            w,
            "the nameserver addresses {it uses|configured there}, in the order they appear (commented-out "
            "ones do not count)",
        )
        ref = f"awk '$1 == \"nameserver\" {{print $2}}' {path} > {out}"
        alternatives = [
            f"grep '^nameserver' {path} | cut -d' ' -f2 > {out}",
            f"sed -n 's/^nameserver //p' {path} > {out}",
        ]
    else:
        path = w.pick((f"{HOME}/hosts.{w.pick(('snapshot', 'old', 'export'))}", f"{HOME}/inventory/hosts"))
        net = f"10.{w.randint(0, 99)}.{w.randint(0, 254)}"
        inside = [(_ip(w, net), _host(w)) for _ in range(w.randint(2, 5))]
        outside = [(_ip(w, avoid=net), _host(w)) for _ in range(w.randint(2, 4))]
        entries = w.shuffled(inside + outside)
        lines = ["127.0.0.1 localhost"] + [f"{a}\t{h}" for a, h in entries]
        want = sorted(h for _, h in inside)
        w.note(net)
        what = _f(w, "the host names whose address is in the {net}.0/24 network", net=net)
        ref = f"awk '$1 ~ /^{net.replace('.', chr(92) + '.')}\\./ {{print $2}}' {path} | sort > {out}"
        alternatives = [
            # the lines of the network picked by grep, the name (after the tab) cut out
            f"grep '^{net.replace('.', chr(92) + '.')}\\.' {path} | cut -f2 | sort > {out}",
            # python's ipaddress decides what is inside the /24
            "python3 -c "
            + quote(
                f"import ipaddress, sys; net = ipaddress.ip_network('{net}.0/24'); "
                "print(*sorted(p[1] for p in (line.split() for line in open(sys.argv[1])) "
                "if ipaddress.ip_address(p[0]) in net), sep=chr(10))"
            )
            + f" {path} > {out}",
        ]
    fmt = (
        _f(w, "one per line, in {that|the file's} order")
        if ordered
        else _f(w, "one per line, {each once|without duplicates}, sorted")
        + (" " + _f(w, "{numerically|by address}") if kind in ("upstream", "haproxy") else "")
    )
    task = w.phrase(
        "{Extract|List} {what} from {path} into {out}, {fmt}.",
        "{Read|Take} {what} from {path} and {write|save} them to {out}, {fmt}.",
        "Ticket: for the firewall review, {put|write} {what} from {path} into {out}; {fmt}.",
        "Could you go through {path} and write {what} to {out}? {fmt_c}.",
        "The network team is renumbering and asked what {path} refers to. Send them {what}, written to {out} "
        "{fmt}.",
        "{out} must list {what} found in {path}, {fmt}.",
        "{what_c} from {path} -> {out}. {fmt_c}.",
        what_c=what[:1].upper() + what[1:],
        what=what,
        path=w.path_ref(path, "file"),
        out=w.path_ref(out, "file"),
        fmt=fmt,
        fmt_c=fmt[:1].upper() + fmt[1:],
    )
    expected = "".join(x + "\n" for x in want)
    check = (
        "#!/bin/bash\n"
        f"[ -f {quote(out)} ] || exit 1\n"
        f"[ \"$(sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' {quote(out)} | grep -v '^$')\" = "
        f'"$(printf %s {quote(expected)})" ]\n'
    )
    if w.chance(0.5):  # another way to the same list
        ref = w.pick(alternatives)
    reference = [f"cat {path}", ref, f"cat {out}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if kind == "resolv" else 3,
        files={path: "".join(line + "\n" for line in lines)},
    )


# ==== issue 39: name-service order and ifupdown interfaces (files only: nothing is brought up) =====================
# Root edits the live /etc; operator edits an image's root tree in a build folder (``workplace``). Checks parse the
# file as glibc or ifupdown would and compare meaning: sources in order, an address as ip/prefix whichever way it is
# written, the stanzas nobody asked to change.
def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _etc_root(w: World, user: str, app: str) -> tuple[str, str, list[str]]:
    """The working folder, the root of the tree whose etc/ is edited ('' for the live system) and the setup."""
    if user == "root":
        return w.pick(("/root", "/etc", "/etc/network")), "", []
    wd, setup = workplace(w, user, app, home_share=0.1)
    tree = f"{wd}/{w.pick(('rootfs', 'image', 'chroot', 'overlay'))}"
    return wd, tree, setup


_NSS_DEFAULT = {
    "passwd": ["files"],
    "group": ["files"],
    "shadow": ["files"],
    "gshadow": ["files"],
    "hosts": ["files", "dns"],
    "networks": ["files"],
    "protocols": ["db", "files"],
    "services": ["db", "files"],
    "ethers": ["db", "files"],
    "rpc": ["db", "files"],
    "netgroup": ["nis"],
}
_NSS_HEAD = [
    "# /etc/nsswitch.conf",
    "#",
    "# Example configuration of GNU Name Service Switch functionality.",
    "# If you have the `glibc-doc-reference' and `info' packages installed, try:",
    '# `info libc "Name Service Switch"\' for information about this file.',
    "",
]


def _nss_text(dbs: dict[str, list[str]]) -> str:
    lines = list(_NSS_HEAD)
    for db, sources in dbs.items():
        lines.append(f"{db + ':':<16}{' '.join(sources)}")
        if db in ("gshadow", "networks", "rpc"):
            lines.append("")
    return "".join(f"{x}\n" for x in lines)


_NSS_CHECK = r"""
def nss(path):
    out = {}
    for raw in text(path).splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        db, sep, rest = line.partition(":")
        if not sep:
            no(f"not a database line: {raw!r}")
        db = db.strip()
        if db in out:
            no(f"{db} is configured twice")
        out[db] = " ".join(rest.split()).replace("[ ", "[").replace(" ]", "]").split()
    return out
got = nss(S["path"])
if got != S["want"]:
    diff = sorted(k for k in set(got) | set(S["want"]) if got.get(k) != S["want"].get(k))
    no(f"databases that differ from what was asked: {diff}: {[got.get(k) for k in diff]}")
"""


@family(
    "networking-nsswitch-order",
    "networking-offline",
    "change the lookup sources and their order in nsswitch.conf (hosts, passwd/group, netgroup, a new database)",
)
def nsswitch_order(w: World) -> Draft:
    user = w.pick(("root", "root", "operator"))
    app = w.project()
    wd, tree, setup = _etc_root(w, user, app)
    path = f"{tree}/etc/nsswitch.conf"
    dbs = {k: list(v) for k, v in _NSS_DEFAULT.items()}
    if w.chance(0.4):
        dbs["hosts"] = w.pick(
            (["files", "mdns4_minimal", "[NOTFOUND=return]", "dns"], ["files", "dns", "myhostname"])
        )
    if w.chance(0.3):
        dbs["passwd"], dbs["group"] = ["files", "systemd"], ["files", "systemd"]
    before = {k: list(v) for k, v in dbs.items()}
    kinds = ["hosts", "hosts", "directory", "netgroup", "new", "dns-first"]
    changes = w.sample(kinds, w.pick((1, 1, 2)))
    if "hosts" in changes and "dns-first" in changes:
        changes.remove("dns-first")
    asks: list[str] = []
    for kind in changes:
        if kind == "hosts":
            want = w.pick(
                (
                    ["files", "myhostname", "dns"],
                    ["files", "dns"],
                    ["files", "resolve", "[!UNAVAIL=return]", "dns"],
                    ["files", "mymachines", "myhostname", "dns"],
                )
            )
            if want == dbs["hosts"]:
                want = ["files", "myhostname", "mdns4_minimal", "[NOTFOUND=return]", "dns"]
            dbs["hosts"] = want
            asks.append(_f(w, "host lookups use exactly `{s}`, in that order", s=" ".join(want)))
        elif kind == "dns-first":
            rest = [s for s in dbs["hosts"] if s not in ("dns", "files")]
            dbs["hosts"] = ["dns", "files", *rest]
            asks.append(
                _f(
                    w,
                    "host names are looked up in DNS before /etc/hosts (then {r})",
                    r=" ".join(rest) or "nothing else",
                )
            )
        elif kind == "directory":
            src = w.pick(("sss", "ldap", "winbind"))
            for db in w.pick((("passwd", "group"), ("passwd", "group", "shadow"))):
                dbs[db] = [*dbs[db], src]
            asks.append(
                _f(
                    w,
                    "users and groups also come from {s}, after the local files ({dbs})",
                    s=src,
                    dbs=", ".join(db for db in ("passwd", "group", "shadow") if src in dbs[db]),
                )
            )
        elif kind == "netgroup":
            dbs["netgroup"] = ["files"]
            asks.append(_f(w, "netgroup stops asking NIS and uses the local files only"))
        else:
            db, sources = w.pick(
                (("automount", ["files"]), ("sudoers", ["files", "sss"]), ("aliases", ["files"]))
            )
            dbs[db] = list(sources)
            asks.append(_f(w, "a new `{db}` database is served by `{s}`", db=db, s=" ".join(sources)))
    if dbs == before:
        dbs["netgroup"] = ["files"]
        asks.append(_f(w, "netgroup uses the local files only"))
    files = {path: _nss_text(before)}
    if tree:
        files[f"{tree}/etc/hostname"] = f"{app}-image\n"
        setup.append(f"chown -R operator: {quote(tree)}")
    p = posixpath.relpath(path, wd) if tree or wd in ("/etc", "/etc/network") else path
    if p.startswith(".."):
        p = path
    spec_text = w.clauses(asks)
    where = _f(w, "in the image tree {t}", t=posixpath.relpath(tree, wd)) if tree else ""
    task = w.phrase(
        "Edit {p}{where_c}: {spec}. Every other database keeps its sources.",
        "Name-service lookups need a change {where}: {spec}. Make it in {p} and leave the other lines' meaning "
        "alone.",
        "Ticket: nsswitch.conf ({p}): {spec}.",
        "Could you update {p} so that {spec}? The rest of the file must resolve as before.",
        "Goal: with {p} as the switch configuration, {spec}; all other databases behave as they do now.",
        "{spec_c}. That is configured in {p}{where_c}; change only what is needed.",
        "The new directory setup needs glibc to look in other places: {spec}. Adjust {p} accordingly.",
        "Why does lookup order matter? Because the first source that answers wins. Set it up in {p}: {spec}.",
        p=p,
        where=where,
        where_c=f" ({where})" if where else "",
        spec=spec_text,
        spec_c=_capital(spec_text),
    )
    ref = [w.pick((f"cat {p}", f"grep -v '^#' {p}", f"grep -n : {p}"))]
    edited = [db for db in dbs if dbs[db] != before.get(db)]
    style = w.randint(0, 4)
    for db in edited:
        line = f"{db}: {' '.join(dbs[db])}"
        pad = f"{db + ':':<16}{' '.join(dbs[db])}"
        if db not in before:
            ref.append(
                w.pick((f"echo '{pad}' >> {p}", f"printf '%s\\n' '{line}' >> {p}", f"sed -i '$a {pad}' {p}"))
            )
        elif style == 0:
            ref.append(f"sed -i 's/^{db}:.*/{pad}/' {p}")
        elif style == 1:
            ref.append(f"sed -i '/^{db}:/c\\{pad}' {p}")
        elif style == 2:
            ref.append(f"sed -i -E 's/^({db}:[[:space:]]+).*/\\1{' '.join(dbs[db])}/' {p}")
        elif style == 3:
            ref.append(f"perl -pi -e 's/^{db}:.*/{pad}/' {p}")
        else:
            ref.append(
                f'awk \'$1 == "{db}:" {{$0 = "{line}"}} 1\' {p} > /tmp/nss.new && cat /tmp/nss.new > {p}'
            )
    ref.append(w.pick((f"grep -E '^({'|'.join(edited)}):' {p}", f"cat {p}")))
    w.note(*[s for db in edited for s in dbs[db]])
    check = py_check({"path": path, "want": dbs}, _NSS_CHECK)
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2 if len(changes) == 1 else 3,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )


_IFACE_CHECK = r"""
import glob, ipaddress
KEYWORDS = ("auto", "allow-hotplug", "allow-auto", "iface", "mapping", "source", "source-directory")
def stanzas(path, seen=None):
    ifaces, autos = {}, set()
    cur = None
    for raw in text(path).splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        word, _, rest = line.partition(" ")
        rest = rest.strip()
        if word in ("auto", "allow-hotplug", "allow-auto"):
            autos.update(rest.split())
            cur = None
        elif word == "iface":
            parts = rest.split()
            if len(parts) < 3:
                no(f"bad iface line: {raw!r}")
            cur = (parts[0], parts[1])
            if cur in ifaces:
                no(f"{parts[0]} {parts[1]} is defined twice")
            ifaces[cur] = {"method": parts[2], "opts": {}}
        elif word in ("source", "source-directory"):
            pattern = rest if rest.startswith("/") else os.path.join(os.path.dirname(path), rest)
            found = sorted(glob.glob(pattern)) if word == "source" else sorted(glob.glob(pattern + "/*"))
            for sub in found:
                if os.path.isfile(sub) and (word == "source" or re.fullmatch(r"[A-Za-z0-9_-]+", os.path.basename(sub))):
                    more, a = stanzas(sub)
                    for k in more:
                        if k in ifaces:
                            no(f"{k[0]} is defined twice")
                    ifaces.update(more)
                    autos |= a
            cur = None
        elif cur is not None:
            ifaces[cur]["opts"].setdefault(word, []).append(rest)
        else:
            no(f"option outside a stanza: {raw!r}")
    return ifaces, autos
def canon(st):
    opts = {k: list(v) for k, v in st["opts"].items()}
    out = {"method": st["method"]}
    addr = opts.pop("address", [None])[0]
    mask = opts.pop("netmask", [None])[0]
    if addr:
        try:
            net = ipaddress.ip_interface(addr if "/" in addr or not mask else f"{addr}/{mask}")
        except ValueError:
            no(f"bad address {addr!r}")
        out["address"] = str(net)
    if "dns-nameservers" in opts:
        out["dns"] = sorted(" ".join(opts.pop("dns-nameservers")).split())
    for k, v in opts.items():
        out[k] = v[0] if len(v) == 1 else v
    return out
ifaces, autos = stanzas(S["path"])
got = {f"{k[0]} {k[1]}": canon(v) for k, v in ifaces.items()}
if got != S["want"]:
    diff = sorted(k for k in set(got) | set(S["want"]) if got.get(k) != S["want"].get(k))
    no(f"interfaces that differ from what was asked: {[(k, got.get(k)) for k in diff]}")
missing = set(S["auto"]) - autos
if missing:
    no(f"not brought up at boot: {sorted(missing)}")
"""


def _stanza(name: str, opts: dict[str, str], method: str) -> list[str]:
    return [f"iface {name} inet {method}", *[f"    {k} {v}" for k, v in opts.items()]]


def _mask(prefix: int) -> str:
    bits = (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF
    return ".".join(str((bits >> s) & 255) for s in (24, 16, 8, 0))


@family(
    "networking-interfaces-static",
    "networking-offline",
    "configure ifupdown stanzas in /etc/network/interfaces: dhcp to a static address, a second interface, "
    "nameservers or MTU",
)
def interfaces_static(w: World) -> Draft:
    user = w.pick(("root", "root", "operator"))
    app = w.project()
    wd, tree, setup = _etc_root(w, user, app)
    path = f"{tree}/etc/network/interfaces"
    nic = w.pick(("eth0", "ens3", "enp0s3", "ens18"))
    second = w.pick([n for n in ("eth1", "ens4", "enp0s8", "ens19") if n[:3] == nic[:3]] or ["eth1"])
    net = f"10.{w.randint(0, 255)}.{w.randint(0, 255)}"
    prefix = w.pick((24, 24, 16, 26))
    host = w.randint(10, 60)
    addr = f"{net}.{host}"
    gw = f"{net}.1"
    dns = [f"{net}.{w.randint(2, 9)}", w.pick(("1.1.1.1", "9.9.9.9", "8.8.8.8"))]
    hotplug = w.chance(0.4)
    lines = [
        "# This file describes the network interfaces available on your system",
        "# and how to activate them. For more information, see interfaces(5).",
        "",
        "source /etc/network/interfaces.d/*" if not tree else "source interfaces.d/*",
        "",
        "# The loopback network interface",
        "auto lo",
        "iface lo inet loopback",
        "",
        "# The primary network interface",
        f"{'allow-hotplug' if hotplug else 'auto'} {nic}",
        f"iface {nic} inet dhcp",
    ]
    want: dict[str, dict[str, object]] = {
        "lo inet": {"method": "loopback"},
        f"{nic} inet": {"method": "dhcp"},
    }
    autos = ["lo", nic]
    mode = w.pick(("static", "static", "second", "dns"))
    if mode == "dns":  # the primary is static already; its nameservers change and an MTU is added
        old_dns = [f"{net}.{w.randint(2, 9)}"]
        lines[-1:] = _stanza(
            nic, {"address": f"{addr}/{prefix}", "gateway": gw, "dns-nameservers": old_dns[0]}, "static"
        )
    files = {path: "".join(f"{x}\n" for x in lines)}
    if tree:
        files[f"{tree}/etc/network/interfaces.d/.keep"] = ""
    setup.append(f"mkdir -p {quote(posixpath.dirname(path))}/interfaces.d")
    if tree:
        setup.append(f"chown -R operator: {quote(tree)}")
    p = posixpath.relpath(path, wd) if tree or wd.startswith("/etc") else path
    dotted = w.chance(0.4)
    addr_text = f"{addr} netmask {_mask(prefix)}" if dotted else f"{addr}/{prefix}"
    w.note(nic, addr, gw, *dns)
    ref = [
        w.pick(
            (f"cat {p}", f"grep -v '^#' {p}", f"ls {posixpath.join(posixpath.dirname(p), 'interfaces.d')}")
        )
    ]
    if w.chance(0.3):
        ref.append(w.pick((f"cp {p} {p}.bak", f"cp -a {p} {p}.orig")))
    block: list[str]
    if mode == "static":
        opts = {"address": f"{addr}/{prefix}", "gateway": gw}
        if dotted:
            opts = {"address": addr, "netmask": _mask(prefix), "gateway": gw}
        with_dns = w.chance(0.6)
        if with_dns:
            opts["dns-nameservers"] = " ".join(dns)
        want[f"{nic} inet"] = {"method": "static", "address": f"{addr}/{prefix}", "gateway": gw}
        if with_dns:
            want[f"{nic} inet"]["dns"] = sorted(dns)
        ask = _f(
            w,
            "{nic} {stops using DHCP and gets|switches from DHCP to} the static address {a}, gateway {g}",
            nic=nic,
            a=addr_text,
            g=gw,
        ) + (" " + _f(w, "and nameservers {d}", d=" and ".join(dns)) if with_dns else "")
        block = _stanza(nic, opts, "static")
        how = w.randint(0, 3)
        if how == 0:
            ref.append(
                f"sed -i 's/^iface {nic} inet dhcp$/" + "\\n".join(block).replace("/", "\\/") + f"/' {p}"
            )
        elif how == 1:
            ref.append(f"sed -i '/^iface {nic} inet dhcp/c\\\n" + "\\\n".join(block) + f"' {p}")
        elif how == 2:
            ref.append(f"sed -i 's/^iface {nic} inet dhcp$/iface {nic} inet static/' {p}")
            ref.append(f"cat >> {p} <<'EOF'\n" + "\n".join(block[1:]) + "\nEOF")
        else:
            body = "\\n".join(block)
            ref.append(
                f"python3 - <<'EOF'\np = '{p}'\ns = open(p).read().replace('iface {nic} inet dhcp\\n', '{body}\\n')\n"
                "open(p, 'w').write(s)\nEOF"
            )
    elif mode == "second":
        opts = {"address": f"{addr}/{prefix}"} if not dotted else {"address": addr, "netmask": _mask(prefix)}
        mtu = w.chance(0.4)
        if mtu:
            opts["mtu"] = "9000"
        want[f"{second} inet"] = {
            "method": "static",
            "address": f"{addr}/{prefix}",
            **({"mtu": "9000"} if mtu else {}),
        }
        autos.append(second)
        ask = _f(
            w,
            "a second interface {s} comes up at boot with the static address {a} (no gateway on it){m}",
            s=second,
            a=addr_text,
            m=", MTU 9000" if mtu else "",
        )
        block = [f"auto {second}", *_stanza(second, opts, "static")]
        dropin = posixpath.join(posixpath.dirname(p), "interfaces.d", second)
        how = w.randint(0, 3)
        text_block = "\n".join(block)
        ref.append(
            (
                f"cat >> {p} <<'EOF'\n\n{text_block}\nEOF",
                f"cat > {dropin} <<'EOF'\n{text_block}\nEOF",
                f"printf '%s\\n' '' {' '.join(quote(x) for x in block)} >> {p}",
                f"tee {dropin} > /dev/null <<'EOF'\n{text_block}\nEOF",
            )[how]
        )
    else:
        mtu_value = w.pick(("1450", "1400", "9000"))
        want[f"{nic} inet"] = {
            "method": "static",
            "address": f"{addr}/{prefix}",
            "gateway": gw,
            "dns": sorted(dns),
            "mtu": mtu_value,
        }
        ask = _f(
            w,
            "{nic} keeps its static address but uses the nameservers {d} (instead of {o}) and an MTU of {m}",
            nic=nic,
            d=" and ".join(dns),
            o=old_dns[0],
            m=mtu_value,
        )
        how = w.randint(0, 2)
        if how == 0:
            ref += [
                f"sed -i 's/dns-nameservers .*/dns-nameservers {' '.join(dns)}/' {p}",
                f"sed -i '/dns-nameservers/a\\    mtu {mtu_value}' {p}",
            ]
        elif how == 1:
            ref.append(
                f"sed -i -e 's/^\\(\\s*dns-nameservers\\).*/\\1 {' '.join(dns)}\\n    mtu {mtu_value}/' {p}"
            )
        else:
            ref.append(
                f'awk \'/dns-nameservers/ {{print "    dns-nameservers {" ".join(dns)}"; print "    mtu {mtu_value}"; '
                f"next}} 1' {p} > /tmp/if.new && cat /tmp/if.new > {p}"
            )
    ref.append(
        w.pick(
            (
                f"cat {p}",
                f"grep -A4 {nic if mode != 'second' else second} {p} {posixpath.join(posixpath.dirname(p), 'interfaces.d')}/* 2>/dev/null",
            )
        )
    )
    where = (
        _f(w, "the image tree {t}", t=posixpath.relpath(tree, wd)) if tree else _f(w, "this {host|machine}")
    )
    task = w.phrase(
        "Configure {p} ({where}) so that {ask}. The loopback and the other stanzas stay as they are.",
        "Network change for {where}: {ask}. Edit {p} (ifupdown syntax); nothing is brought up now, only the "
        "configuration matters.",
        "Ticket: in {p}, {ask}.",
        "Could you update the interfaces file {p} so that {ask}? Keep everything else.",
        "Goal: after the next boot, {ask}, as configured in {p} ({where}).",
        "The datacenter assigned new settings: {ask}. Write them into {p} in the ifupdown format.",
        "Our DHCP server goes away next week, so {ask}. Make it so in {p} ({where}).",
        "{p}: {ask}; the rest of the file keeps its meaning.",
        p=p,
        where=where,
        ask=ask,
    )
    check = py_check({"path": path, "want": want, "auto": autos}, _IFACE_CHECK)
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if mode != "second" else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )
