"""Logs: counting, slicing, ranking, rotating and compressing application and web access logs.

The worlds are access logs (common log format) and application logs (``2024-03-01T10:00:00 LEVEL svc: msg``)
drawn line by line, so every expected answer is computed here from the very lines written. Decoys are what a
hurried operator trips on: a rotated file beside the live one, an error log next to the access log, lower-case
"error" inside INFO messages, a request count that ranks differently once the asked filter is applied.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from datetime import datetime, timedelta

from bashgym_assets.sandbox.layout import SERVICE_USER, SESSION_ACCOUNTS
from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import (
    HOME,
    HTTP_PATHS,
    SERVICES,
    World,
    py_check,
    quote,
    session_variables,
    workplace,
)

_STATUSES = (200, 200, 200, 201, 204, 301, 302, 304, 400, 401, 403, 404, 404, 500, 502, 503)


def _access(ip: str, t: datetime, method: str, path: str, status: int, size: int) -> str:
    return f'{ip} - - [{t:%d/%b/%Y:%H:%M:%S} +0000] "{method} {path} HTTP/1.1" {status} {size}'


def _requests(w: World, specs: list[tuple[str, str, str, int]]) -> list[str]:
    """Access lines for ``(ip, method, path, status)`` specs, shuffled, with increasing times."""
    t = w.date()
    out = []
    for ip, method, path, status in w.shuffled(specs):
        t += timedelta(seconds=w.randint(1, 90))
        out.append(_access(ip, t, method, path, status, w.randint(120, 9000)))
    return out


def _random_request(w: World, ip: str | None = None) -> tuple[str, str, str, int]:
    return (ip or w.ip(), w.pick(("GET", "GET", "GET", "POST")), w.pick(HTTP_PATHS), w.pick(_STATUSES))


def _log_dir(w: World) -> str:
    return w.pick(
        (
            f"{HOME}/logs",
            f"{HOME}/{w.project()}/logs",
            f"{HOME}/{w.service()}/log",
            f"{HOME}/var/log",
            f"{HOME}/{w.dirname()}",
        )
    )


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _body(lines: list[str]) -> str:
    return "".join(f"{x}\n" for x in lines)


_NORM = "sed -e 's/[[:space:]]*$//' -e '/^$/d'"


def _lines_check(path: str, lines: list[str]) -> str:
    """Lines of ``path`` equal ``lines`` in order (trailing whitespace and blank lines ignored)."""
    return (
        f"[ -f {quote(path)} ] || exit 1\n"
        f'[ "$({_NORM} {quote(path)})" = {quote(chr(10).join(lines))} ] || exit 1\n'
    )


def _python_check(body: str, data: object) -> str:
    """A python3 check with ``WANT`` = ``data`` (JSON); the script's exit status is the check's."""
    return (
        f"python3 - <<'PYCHECK' || exit 1\nimport json, sys\nWANT = json.loads(r'''{json.dumps(data)}''')\n"
        f"{body}\nPYCHECK\n"
    )


# ``pairs``: read ``path`` as lines of two fields (split by ``sep``, or whitespace when None), optionally after a
# header line; compare with WANT["pairs"] as a mapping (order checked when WANT["ordered"]).
_PAIRS = """
path, sep, header, swap = WANT["path"], WANT["sep"], WANT["header"], WANT["swap"]
try:
    lines = [x.strip() for x in open(path) if x.strip()]
except OSError:
    sys.exit(1)
if header is not None:
    if not lines or lines[0].replace(" ", "").lower() != header:
        sys.exit(1)
    lines = lines[1:]
got = []
for x in lines:
    parts = [p.strip() for p in (x.split(sep) if sep else x.split())]
    if len(parts) != 2:
        sys.exit(1)
    k, v = (parts[1], parts[0]) if swap else (parts[0], parts[1])
    try:
        got.append((k, int(v)))
    except ValueError:
        sys.exit(1)
want = [tuple(p) for p in WANT["pairs"]]
keys = [k for k, _ in got]
if len(set(keys)) != len(keys):
    sys.exit(1)
optional = set(WANT.get("optional", []))
got = [(k, v) for k, v in got if not (k in optional and v == 0)]
if WANT["ordered"]:
    sys.exit(0 if got == want else 1)
sys.exit(0 if sorted(got) == sorted(want) else 1)
"""


@family(
    "logs-count-status-codes",
    "logs",
    "count the HTTP status codes of an access log, one 'code count' line each",
)
def count_status_codes(w: World) -> Draft:
    folder = w.pick((_log_dir(w), f"/var/log/{w.pick(('nginx', 'apache2', 'httpd', 'web'))}"))
    ips = [w.ip() for _ in range(w.randint(3, 7))]
    log = f"{folder}/{w.pick(('access.log', 'access_log', f'{w.service()}-access.log'))}"
    lines = _requests(w, [_random_request(w, w.pick(ips)) for _ in range(w.randint(25, 60))])
    files = {log: _body(lines)}
    both = w.chance(0.3)
    rotated: list[str] = []
    if both:
        rotated = _requests(w, [_random_request(w, w.pick(ips)) for _ in range(w.randint(10, 30))])
        files[f"{log}.1"] = _body(rotated)
    elif w.chance(0.5):  # a rotated file that must not be counted
        files[f"{log}.1"] = _body(_requests(w, [_random_request(w) for _ in range(w.randint(8, 20))]))
    if w.chance(0.5):
        files[f"{folder}/error.log"] = _body(
            [
                f"[{w.date():%a %b %d %H:%M:%S %Y}] [error] upstream returned {w.pick((500, 502, 503, 504))}"
                for _ in range(w.randint(2, 6))
            ]
        )
    scope = w.pick(("all", "all", "errors", "path", "method"))
    reqs = [(x.split()[5][1:], x.split()[6], int(x.split()[8])) for x in lines + rotated]
    path = w.pick([p for _, p, _ in reqs])
    if scope == "errors":
        keep = [s for _, _, s in reqs if s >= 400]
        scope_en, cond = (
            w.spin("{only|just} the error responses, status 400 {and above|or higher}", capitalize=False),
            "$9 >= 400",
        )
    elif scope == "path":
        keep = [s for _, p, s in reqs if p == path]
        scope_en, cond = (
            w.spin("{only|just} the requests for {path}", capitalize=False, path=path),
            f'$7 == "{path}"',
        )
        w.note(path)
    elif scope == "method":
        keep = [s for m, _, s in reqs if m == "POST"]
        scope_en, cond = w.spin("{only|just} the POST requests", capitalize=False), '$6 == "\\"POST"'
    else:
        keep = [s for _, _, s in reqs]
        scope_en, cond = w.spin("{all requests|every request}", capitalize=False), ""
    if not keep:
        scope, keep, cond = "all", [s for _, _, s in reqs], ""
        scope_en = w.spin("{all requests|every request}", capitalize=False)
    counts: dict[int, int] = {}
    for s in keep:
        counts[s] = counts.get(s, 0) + 1
    order = w.pick(("any", "code", "count"))
    if order == "count" and len(set(counts.values())) != len(counts):
        order = "code"
    pairs = (
        sorted(counts.items())
        if order == "code"
        else sorted(counts.items(), key=lambda kv: -kv[1])
        if order == "count"
        else list(counts.items())
    )
    out = (
        f"{w.pick((HOME, f'{HOME}/reports', posixpath.dirname(log) if log.startswith(HOME) else HOME))}/"
        f"{w.filename('txt', stem=w.pick(('status_counts', 'codes', 'http_status', 'status_summary')))}"
    )
    order_en = {
        "any": "{in any order|order does not matter}",
        "code": "sorted by status code{| (lowest first)}",
        "count": "most frequent {code |}first",
    }[order]
    fmt = "one line per status code: the code, a space, then {how many times it occurs|its count}"
    spec = w.clauses([w.spin(fmt, capitalize=False), w.spin(order_en, capitalize=False)], "; ")
    files_en = (
        w.spin(
            "{log} and the rotated {log}.1 {together|combined}", capitalize=False, log=w.path_ref(log, "file")
        )
        if both
        else w.path_ref(log, "file")
    )
    task = w.phrase(
        "{Count|Tally} the HTTP status codes in {files}, {counting|considering} {scope}, and write the result to "
        "{out} ({spec}).",
        "{files} is a web server access log{s|}. {Summarise|Break down} {scope} by status code into {out}: {spec}.",
        "Ticket: we need a status code breakdown of {files} ({scope}). Save it {as|to} {out}; {spec}.",
        "How many times does each HTTP status code {appear|occur} in {files}? {Count|Consider} {scope} and put the "
        "answer in {out}, {spec}.",
        "The dashboard is down and I need the status code mix from {files} the old-fashioned way. Look at "
        "{scope}; the numbers go in {out} ({spec}).",
        "{out} should hold a per-status-code count of {scope} in {files}; {spec}.",
        "status codes -> counts, from {files} ({scope}), into {out}. {spec_cap}.",
        spec_cap=spec[:1].upper() + spec[1:],
        files=files_en,
        scope=scope_en,
        out=w.path_ref(out, "file"),
        spec=spec,
    )
    check = "#!/bin/bash\n" + _python_check(
        _PAIRS,
        {
            "path": out,
            "sep": None,
            "header": None,
            "swap": False,
            "pairs": [[str(k), v] for k, v in pairs],
            "ordered": order != "any",
        },
    )
    src = f"{quote(log)} {quote(log + '.1')}" if both else quote(log)
    pat = f"{cond} " if cond else ""
    if not cond and w.chance(0.4):
        cmd = (
            f"cat {src} | cut -d' ' -f9 | sort | uniq -c" if both else f"cut -d' ' -f9 {src} | sort | uniq -c"
        )
        cmd += " | sort -nr" if order == "count" else ""
        cmd += " | awk '{print $2, $1}'"
        cmd += " | sort -n" if order == "code" else ""
    elif w.chance(0.5):
        cmd = f"awk '{pat}{{print $9}}' {src} | sort | uniq -c"
        cmd += " | sort -rn" if order == "count" else ""
        cmd += " | awk '{print $2, $1}'"
        cmd += " | sort -n" if order == "code" else ""
    else:
        cmd = f"awk '{pat}{{n[$9]++}} END {{for (c in n) print c, n[c]}}' {src}"
        cmd += " | sort -k2,2nr" if order == "count" else " | sort -n" if order == "code" else ""
    reference = [f"head -n 3 {quote(log)}"] if w.chance(0.5) else []
    reference += [f"mkdir -p {quote(posixpath.dirname(out))}", f"{cmd} > {quote(out)}", f"cat {quote(out)}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if both or scope != "all" else 2,
        files=files,
    )


@family("logs-errors-between", "logs", "extract the lines of one level between two timestamps")
def errors_between(w: World) -> Draft:
    folder = _log_dir(w)
    svcs = [w.service() for _ in range(w.randint(1, 3))]
    start = w.date()
    level = w.pick(("ERROR", "ERROR", "WARN"))
    lines: list[str] = []
    for svc in svcs:
        lines += w.log_lines(w.randint(40, 70) // len(svcs), svc, start)
    lines.sort(key=lambda x: x.split(" ", 1)[0])
    stamps = [x.split(" ", 1)[0] for x in lines]
    for _ in range(len(lines)):  # enough lines of the level for a window with some outside it
        if sum(1 for x in lines if x.split()[1] == level) >= 4:
            break
        k = w.randint(0, len(lines) - 1)
        stamp, _lvl, rest = lines[k].split(" ", 2)
        lines[k] = f"{stamp} {level} {rest}"
    hits = [i for i, x in enumerate(lines) if x.split()[1] == level]
    i = w.randint(1, len(hits) - 3)
    j = w.randint(i, len(hits) - 2)

    def bound(idx: int, before: bool) -> str:
        t = datetime.fromisoformat(stamps[idx])
        lo = datetime.fromisoformat(stamps[idx - 1]) if before else t
        hi = t if before else datetime.fromisoformat(stamps[idx + 1])
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid.isoformat() in stamps:
            mid += timedelta(seconds=-1 if before else 1)
        return mid.isoformat()

    a, b = bound(hits[i], True), bound(hits[j], False)
    if not a < b:
        raise ValueError("empty window")
    want = [x for x in lines if a <= x.split(" ", 1)[0] <= b and x.split()[1] == level]
    if not want:
        raise ValueError("nothing in the window")
    log = f"{folder}/{w.filename('log', stem=w.pick(('app', 'server', svcs[0], 'combined', 'events')))}"
    files = {log: _body(lines)}
    if w.chance(0.4):
        files[f"{log}.1"] = _body(w.log_lines(w.randint(10, 20), svcs[0], start - timedelta(days=1)))
    count = w.chance(0.3)
    out = (
        f"{w.pick((HOME, folder, f'{HOME}/incident'))}/"
        f"{w.filename('txt', stem=w.pick(('window', 'incident', f'{level.lower()}s', 'excerpt', 'slice')))}"
    )
    w.note(a, b)
    human = w.chance(0.4)
    a_en, b_en = (a.replace("T", " "), b.replace("T", " ")) if human else (a, b)
    window = w.spin(
        w.pick((f"between {a_en} and {b_en}", f"from {a_en} to {b_en}")) + " (both {ends|bounds} inclusive)",
        capitalize=False,
    )
    noun = w.pick(("line", "entry"))
    what = w.spin(f"{{the|every}} {level} {noun}", capitalize=False)
    whats = w.spin(f"{{the|all}} {level} {noun.replace('entry', 'entrie')}s", capitalize=False)
    result = (
        w.spin(
            "write {only|just} the number of such lines {to|into} {out}",
            capitalize=False,
            out=w.path_ref(out, "file"),
        )
        if count
        else w.spin(
            "{copy|write} those lines, unchanged and in their original order, {to|into} {out}",
            capitalize=False,
            out=w.path_ref(out, "file"),
        )
    )
    task = w.phrase(
        "{Find|Pick out} " + what + " in {log} {window}, and {result}.",
        "An incident happened {window}. {Go through|Check} {log} for " + whats + " in that window; {result}.",
        "Ticket: {extract|collect} " + whats + " logged {window} from {log}. Please {result}.",
        "Which "
        + level
        + " {lines|entries} in {log} {fall|were logged} between {a} and {b} ({both ends|bounds} "
        "included)? {result_cap}.",
        "Support says users saw failures {window}. Before anyone digs in, I need "
        + whats
        + " from {log} for exactly that window, so {result}.",
        "Only "
        + whats
        + " {window} in {log} matter here - nothing outside the window, no other levels. {result_cap}.",
        "{log}, " + level + " only, {window}: {result}.",
        log=w.path_ref(log, "file"),
        window=window,
        result=result,
        result_cap=result[:1].upper() + result[1:],
        a=a_en,
        b=b_en,
    )
    if count:
        check = (
            f"#!/bin/bash\n[ -f {quote(out)} ] || exit 1\n"
            f"[ \"$(tr -d '[:space:]' < {quote(out)})\" = '{len(want)}' ]\n"
        )
    else:
        check = "#!/bin/bash\n" + _lines_check(out, want)
    sel = w.pick(
        (
            f'awk \'$1 >= "{a}" && $1 <= "{b}" && $2 == "{level}"\' {quote(log)}',
            f"grep ' {level} ' {quote(log)} | awk '$1 >= \"{a}\" && $1 <= \"{b}\"'",
            f"awk -v a={a} -v b={b} -v l={level} '$1 >= a && $1 <= b && $2 == l' {quote(log)}",
            "python3 -c 'import sys; a, b, l, p = sys.argv[1:]; sys.stdout.writelines(x for x in open(p) "
            f"if a <= x.split()[0] <= b and x.split()[1] == l)' {a} {b} {level} {quote(log)}",
        )
    )
    if count:
        cmd = w.pick(
            (
                f"{sel} | wc -l > {quote(out)}",
                f"{sel} | grep -c . > {quote(out)}",
                f'awk \'$1 >= "{a}" && $1 <= "{b}" && $2 == "{level}" {{ n++ }} END {{ print n + 0 }}\' '
                f"{quote(log)} > {quote(out)}",
            )
        )
    else:
        cmd = f"{sel} > {quote(out)}"
    reference = [f"head -n 3 {quote(log)}"] if w.chance(0.5) else []
    reference += [f"mkdir -p {quote(posixpath.dirname(out))}", cmd, f"cat {quote(out)}"]
    return Draft(task=task, check=check, reference=reference, difficulty=3, files=files)


@family("logs-top-ips", "logs", "rank the client IPs of an access log by request count and keep the top N")
def top_ips(w: World) -> Draft:
    k = w.randint(4, 8)
    ips = [w.unique(w.ip) for _ in range(k)]
    counts = w.sample(range(2, 16), k)
    filt = w.pick((None, None, "status", "method", "path"))
    status = w.pick((404, 500, 401, 403))
    path = w.pick(HTTP_PATHS)
    specs: list[tuple[str, str, str, int]] = []
    for ip, c in zip(ips, counts, strict=True):
        for _ in range(c):
            m, p, s = w.pick(("GET", "GET", "POST")), w.pick(HTTP_PATHS), w.pick((200, 200, 201, 304, 302))
            if filt == "status":
                s = status
            elif filt == "method":
                m = "POST"
            elif filt == "path":
                p = path
            specs.append((ip, m, p, s))
        if filt:  # traffic the filter must leave out, so the unfiltered ranking is different
            for _ in range(w.randint(0, 12)):
                m, p, s = "GET", w.pick([x for x in HTTP_PATHS if x != path]), w.pick((200, 301, 304))
                specs.append((ip, m, p, s))
    lines = _requests(w, specs)
    n = w.randint(1, min(5, k - 1))
    ranked = sorted(zip(ips, counts, strict=True), key=lambda ic: -ic[1])[:n]
    fmt = w.pick(("ip", "ip", "count_ip", "ip_count"))
    folder = w.pick((_log_dir(w), f"/var/log/{w.pick(('nginx', 'apache2', 'web'))}"))
    log = f"{folder}/{w.pick(('access.log', 'access_log', 'requests.log'))}"
    out = (
        f"{w.pick((HOME, f'{HOME}/reports', f'{HOME}/security'))}/"
        f"{w.filename('txt', stem=w.pick(('top_ips', 'top_clients', 'heavy_hitters', 'busiest_ips')))}"
    )
    w.note(n, path, status)
    filt_en = {
        None: "",
        "status": w.spin(
            f"{{counting|considering}} {{only|just}} the requests answered with status {status}",
            capitalize=False,
        ),
        "method": w.spin("{counting|considering} {only|just} POST requests", capitalize=False),
        "path": w.spin(f"{{counting|considering}} {{only|just}} requests for {path}", capitalize=False),
    }[filt]
    fmt_en = {
        "ip": "one IP per line, {busiest|the one with most requests} first",
        "count_ip": "one line each: the request count, a space, then the IP, {busiest|highest count} first",
        "ip_count": "one line each: the IP, a space, then its request count, {busiest|highest count} first",
    }[fmt]
    spec = w.clauses([w.spin(fmt_en, capitalize=False), filt_en], "; ")
    what = "the {top|busiest} {n} client IPs" if n > 1 else "the {single |}busiest client IP"
    which = "Which {n} client IPs" if n > 1 else "Which client IP"
    task = w.phrase(
        "{Find|Determine} "
        + what
        + " by number of requests in {log} and write {them|the result} to {out} ({spec}).",
        "{log} is {our|the} web access log. " + which + " made the most requests? {Save|Write} the answer "
        "to {out}; {spec}.",
        "Ticket: {possible abuse|a traffic spike}: list " + what + " (by request count) from {log} in {out}. "
        "{spec_cap}.",
        "Please rank the clients in {log} by how many requests they sent and keep "
        + what
        + " in {out}: {spec}.",
        "Someone is hammering us. Using {log}, work out "
        + what
        + " by request count; {out} gets the answer ({spec}).",
        "{out} must end up with " + what + " from {log}, ranked by requests. {spec_cap}.",
        "top talkers in {log} -> {out}. {spec_cap}.",
        log=w.path_ref(log, "file"),
        out=w.path_ref(out, "file"),
        n=n,
        spec=spec,
        spec_cap=spec[:1].upper() + spec[1:],
    )
    swap = fmt == "count_ip"
    if fmt == "ip":
        check = "#!/bin/bash\n" + _lines_check(out, [ip for ip, _ in ranked])
    else:
        check = "#!/bin/bash\n" + _python_check(
            _PAIRS,
            {
                "path": out,
                "sep": None,
                "header": None,
                "swap": swap,
                "pairs": [[ip, c] for ip, c in ranked],
                "ordered": True,
            },
        )
    cond = {None: "", "status": f"$9 == {status} ", "method": '$6 == "\\"POST" ', "path": f'$7 == "{path}" '}[
        filt
    ]
    pipe = (
        f"cut -d' ' -f1 {quote(log)} | sort | uniq -c | sort -nr | head -{n}"
        if not cond and w.chance(0.5)
        else f"awk '{cond}{{print $1}}' {quote(log)} | sort | uniq -c | sort -rn | head -n {n}"
    )
    how = w.pick(("uniq", "uniq", "awk", "grep", "python"))
    if how == "awk":  # counted in an awk array instead of sort | uniq -c
        pipe = f"awk '{cond}{{n[$1]++}} END {{for (ip in n) print n[ip], ip}}' {quote(log)} | sort -rn | head -n {n}"
    elif how == "grep" and filt:  # the lines picked by grep, the IP cut out
        pick = {"status": f"'\" {status} '", "method": "'\"POST '", "path": f"' {path} HTTP/'"}[filt]
        pipe = f"grep {pick} {quote(log)} | cut -d' ' -f1 | sort | uniq -c | sort -rn | head -n {n}"
    if fmt == "ip":
        pipe += w.pick((" | awk '{print $2}'", " | awk '{print $NF}'"))
    elif fmt == "ip_count":
        pipe += " | awk '{print $2, $1}'"
    else:
        pipe += " | awk '{print $1, $2}'"
    if how == "python":  # collections.Counter and most_common
        keep = {
            None: "",
            "status": f" if l.split()[8] == {str(status)!r}",
            "method": " if l.split()[5] == '\"POST'",
            "path": f" if l.split()[6] == {path!r}",
        }[filt]
        show = {"ip": "print(ip)", "ip_count": "print(ip, k)", "count_ip": "print(k, ip)"}[fmt]
        code = (
            f"import collections, sys; c = collections.Counter(l.split()[0] for l in open(sys.argv[1]){keep}); "
            f"[{show} for ip, k in c.most_common({n})]"
        )
        pipe = f"python3 -c {quote(code)} {quote(log)}"
    reference = [f"head -n 2 {quote(log)}"] if w.chance(0.5) else []
    reference += [f"mkdir -p {quote(posixpath.dirname(out))}", f"{pipe} > {quote(out)}", f"cat {quote(out)}"]
    return Draft(
        task=task, check=check, reference=reference, difficulty=3 if filt else 2, files={log: _body(lines)}
    )


@family(
    "logs-rotate", "logs", "rotate a log by hand: move/copy it aside (maybe compressed) and start a new one"
)
def rotate(w: World) -> Draft:
    folder = _log_dir(w)
    svc = w.service()
    name = w.pick((f"{svc}.log", "app.log", f"{svc}-server.log", "current.log"))
    log = f"{folder}/{name}"
    current = w.log_lines(w.randint(6, 25), svc)
    mode = w.pick(("640", "644", "600", "664"))
    style = w.pick(("move", "move", "copytruncate", "compress"))
    dated = w.chance(0.3) and style != "copytruncate"
    shift = not dated and w.chance(0.45)
    files = {log: _body(current)}
    older = w.log_lines(w.randint(5, 15), svc, w.date("2023-01-01", 200))
    if shift:
        files[f"{log}.1"] = _body(older)
    other = f"{folder}/{w.filename('log', stem=w.pick(('worker', 'cron', 'access', 'audit')))}"
    files[other] = _body(w.log_lines(w.randint(3, 8)))
    day = w.date()
    suffix = f"-{day:%Y%m%d}" if dated else ".1"
    rotated = log + suffix + (".gz" if style == "compress" else "")
    w.note(mode, name, f"{day:%Y%m%d}")
    setup = [f"chmod {mode} {quote(log)}"]
    tag = f"/root/.inode_{w.token(6)}"
    if style == "copytruncate":
        setup.append(f"stat -c %i {quote(log)} > {tag}")
    rot_en = w.path_ref(rotated, "file") if w.chance(0.3) else posixpath.basename(rotated)
    steps = []
    if shift:
        steps.append(
            w.spin("the existing {n1} becomes {n2}", capitalize=False, n1=f"{name}.1", n2=f"{name}.2")
        )
    if style == "move":
        steps.append(w.spin("{name} is {renamed|moved} to {rot}", capitalize=False, name=name, rot=rot_en))
        steps.append(
            w.spin(
                "a new empty {name} {is created|takes its place} with the same permissions ({mode})",
                capitalize=False,
                name=name,
                mode=mode,
            )
        )
    elif style == "compress":
        steps.append(
            w.spin(
                "the current contents end up gzip-compressed in {rot} (no uncompressed copy left "
                "{behind|over})",
                capitalize=False,
                rot=rot_en,
            )
        )
        steps.append(
            w.spin(
                "{name} {itself |}is left empty, with {the same|its original} permissions ({mode})",
                capitalize=False,
                name=name,
                mode=mode,
            )
        )
    else:
        steps.append(w.spin("the current contents are copied to {rot}", capitalize=False, rot=rot_en))
        steps.append(
            w.spin(
                "{name} is then truncated to zero bytes in place: {a running process keeps it open|the "
                "writer holds it open}, so it must stay the same file (do not delete or replace it)",
                capitalize=False,
                name=name,
            )
        )
    spec = "; ".join(steps)
    task = w.phrase(
        "Rotate {log} by hand: {spec}.",
        "{log} {has grown too big|needs rotating} and logrotate is not available. {Rotate it manually|Do the "
        "rotation yourself}: {spec}.",
        "Ticket: manual log rotation for {log}. {Expected result|Wanted}: {spec}. {Leave|Do not touch} the other "
        "logs in {the folder|that directory}.",
        "Could you rotate {log} for me? {Make sure|I want}: {spec}.",
        "The service writing {log} cannot be restarted today, but the file is huge. Rotate it without "
        "logrotate, like this: {spec}.",
        "{log} rotation, by hand. Steps: {spec}.",
        log=w.path_ref(log, "file"),
        spec=spec,
    )
    q = quote
    lines = [
        "#!/bin/bash",
        f"cd {q(folder)} || exit 1",
        f"[ -f {q(name)} ] && [ ! -s {q(name)} ] || exit 1",
        f'[ "$(stat -c %U {q(name)})" = operator ] || exit 1',
        f"[ \"$(md5sum < {q(other)} | cut -d' ' -f1)\" = {_md5(files[other])} ] || exit 1",
    ]
    if style == "compress":
        lines += [
            f"gzip -t {q(rotated)} 2>/dev/null || exit 1",
            f"[ \"$(gzip -dc {q(rotated)} | md5sum | cut -d' ' -f1)\" = {_md5(_body(current))} ] || exit 1",
            f"[ ! -e {q(rotated[:-3])} ] || exit 1",
        ]
    else:
        lines.append(f"[ \"$(md5sum < {q(rotated)} | cut -d' ' -f1)\" = {_md5(_body(current))} ] || exit 1")
    if style == "copytruncate":
        lines.append(f'[ "$(stat -c %i {q(name)})" = "$(cat {tag})" ] || exit 1')
    else:
        lines.append(f'[ "$(stat -c %a {q(name)})" = {mode} ] || exit 1')
    if shift:
        lines.append(f"[ \"$(md5sum < {q(name + '.2')} | cut -d' ' -f1)\" = {_md5(_body(older))} ] || exit 1")
    check = "\n".join(lines) + "\n"
    ref = [f"cd {q(folder)}", "ls -l"]
    if shift:
        ref.append(f"mv {q(name + '.1')} {q(name + '.2')}")
    base_rot = posixpath.basename(rotated)
    if style == "move":
        ref.append(f"mv {q(name)} {q(base_rot)}")
        ref.append(
            w.pick((f"touch {q(name)} && chmod {mode} {q(name)}", f"install -m {mode} /dev/null {q(name)}"))
        )
    elif style == "compress":
        plain = base_rot[:-3]
        ref.append(
            w.pick(
                (
                    f"mv {q(name)} {q(plain)} && gzip {q(plain)}",
                    f"gzip -c {q(name)} > {q(base_rot)} && rm {q(name)}",
                )
            )
        )
        ref.append(
            w.pick((f"touch {q(name)} && chmod {mode} {q(name)}", f"install -m {mode} /dev/null {q(name)}"))
        )
    else:
        ref.append(f"cp -p {q(name)} {q(base_rot)}")
        ref.append(w.pick((f"truncate -s 0 {q(name)}", f": > {q(name)}")))
    ref.append("ls -l")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if style != "move" or shift else 2,
        files=files,
        setup=setup,
    )


_ERROR_DECOYS = (
    "error budget report sent",
    "retried after transient error",
    "cleared error counters",
    "no errors in last batch",
)


@family("logs-errors-per-service", "logs", "count the ERROR lines of each service in a set of logs")
def errors_per_service(w: World) -> Draft:
    svcs = [w.service() for _ in range(w.randint(3, 5))]
    combined = w.chance(0.4)
    folder = _log_dir(w)
    start = w.date()
    logs: dict[str, list[str]] = {}
    for svc in svcs:
        lines = w.log_lines(w.randint(6, 22), svc, start)
        if w.chance(0.25):  # a quiet service: no errors at all
            lines = [x.replace(" ERROR ", " INFO ") for x in lines]
        for _ in range(w.randint(0, 2)):
            t = lines[w.randint(0, len(lines) - 1)].split(" ", 1)[0]
            lines.append(f"{t} INFO {svc}: {w.pick(_ERROR_DECOYS)}")
        logs[svc] = sorted(lines)
    if not any(x.split()[1] == "ERROR" for ls in logs.values() for x in ls):  # at least one service errs
        svc = svcs[0]
        t = logs[svc][-1].split(" ", 1)[0]
        logs[svc].append(
            f"{t} ERROR {svc}: {w.pick(('connection reset by peer', 'timeout waiting for lock'))}"
        )
    counts = {s: sum(1 for x in ls if x.split()[1] == "ERROR") for s, ls in logs.items()}
    fmt = w.pick(("colon", "csv", "space"))
    out = (
        f"{w.pick((HOME, f'{HOME}/reports'))}/"
        f"{w.filename('csv' if fmt == 'csv' else 'txt', stem=w.pick(('errors_by_service', 'error_counts', 'errors')))}"
    )
    if combined:
        log = f"{folder}/{w.filename('log', stem=w.pick(('all', 'combined', 'platform', 'app')))}"
        merged = sorted(x for ls in logs.values() for x in ls)
        files = {log: _body(merged)}
        where = w.spin(
            "the combined log {log} (the service name is the third field, before the colon)",
            capitalize=False,
            log=w.path_ref(log, "file"),
        )
        zero_en = w.spin("services without errors may be left out", capitalize=False)
    else:
        files = {f"{folder}/{s}.log": _body(ls) for s, ls in logs.items()}
        in_var = w.chance(0.3)  # the shell starts with the folder in $LOG_DIR, and the task names only that
        if in_var:
            files.update(session_variables(w, {"LOG_DIR": folder}, w.pick(("logging", "platform", "site"))))
        where = w.spin(
            "{folder}, which has one {file|log} per service (SERVICE.log)",
            capitalize=False,
            folder="$LOG_DIR" if in_var else w.path_ref(folder),
        )
        zero_en = w.spin("list every service, with 0 when it has no errors", capitalize=False)
    fmt_en = {
        "colon": "one line per service in the form SERVICE: COUNT",
        "csv": "CSV with the header line service,errors and then one SERVICE,COUNT line per service",
        "space": "one line per service: the service name, a space, then the count",
    }[fmt]
    level_en = w.spin(
        "{only lines whose level is ERROR count|count only lines logged at level ERROR}"
        "{| (not messages that merely mention an error)}",
        capitalize=False,
    )
    spec = w.clauses([fmt_en, zero_en, level_en], "; ")
    task = w.phrase(
        "{Count|Tally} the ERROR lines per service in {where} and write the {totals|counts} to {out}: {spec}.",
        "How many errors did each service log? The logs are in {where}. {Write|Put} the answer in {out}; {spec}.",
        "Ticket: error summary per service {needed|wanted} from {where}. Output: {out}, {spec}.",
        "Please {produce|build} a per-service error count from {where} {in|into} {out} ({spec}).",
        "Which service is the noisiest? I want every service's ERROR total from {where} written to {out}, "
        "so we can compare: {spec}.",
        "{out} = ERROR count per service over {where}. {spec_cap}.",
        "For the weekly reliability review, each team wants to know how many errors its service logged. The "
        "logs are in {where}; put the counts in {out} ({spec}).",
        spec_cap=spec[:1].upper() + spec[1:],
        where=where,
        out=w.path_ref(out, "file"),
        spec=spec,
    )
    sep = {"colon": ":", "csv": ",", "space": None}[fmt]
    pairs = [[s, c] for s, c in counts.items() if c or not combined]
    check = "#!/bin/bash\n" + _python_check(
        _PAIRS,
        {
            "path": out,
            "sep": sep,
            "header": "service,errors" if fmt == "csv" else None,
            "swap": False,
            "pairs": pairs,
            "ordered": False,
            "optional": [s for s, c in counts.items() if not c] if combined else [],
        },
    )
    qo = quote(out)
    head = "echo service,errors; " if fmt == "csv" else ""
    joiner = {"colon": '": "', "csv": '","', "space": '" "'}[fmt]
    how = w.pick(("shell", "shell", "shell", "python", "other"))
    py_head = "print('service,errors'); " if fmt == "csv" else ""
    py_line = {"colon": "print(f'{s}: {k}')", "csv": "print(f'{s},{k}')", "space": "print(s, k)"}[fmt]
    if combined:
        prog = f'$2 == "ERROR" {{ sub(":", "", $3); n[$3]++ }} END {{ for (s in n) print s {joiner} n[s] }}'
        body = f"awk {quote(prog)} {quote(log)}"
        if how == "other":  # the ERROR lines picked by grep, the service cut out and counted by uniq
            reorder = f"awk '{{print $2 {joiner} $1}}'"
            body = f"grep '^[^ ]* ERROR ' {quote(log)} | cut -d' ' -f3 | sed 's/:$//' | sort | uniq -c | {reorder}"
        cmd = f"{{ {head}{body}; }} > {qo}" if head else f"{body} > {qo}"
        if how == "python":  # collections.Counter over the third field of the ERROR lines
            code = (
                "import collections, sys; c = collections.Counter(l.split()[2].rstrip(':') for l in "
                f"open(sys.argv[1]) if l.split()[1] == 'ERROR'); {py_head}[{py_line} for s, k in c.items()]"
            )
            cmd = f"python3 -c {quote(code)} {quote(log)} > {qo}"
        ref = [f"head -n 3 {quote(log)}", f"mkdir -p {quote(posixpath.dirname(out))}", cmd, f"cat {qo}"]
    else:
        loop_sep = {"colon": ": ", "csv": ",", "space": " "}[fmt]
        if how == "python":  # every SERVICE.log read in python
            code = (
                f"import glob; {py_head}[{py_line} for s, k in ((f[:-4], sum(l.split()[1] == 'ERROR' for l in "
                "open(f))) for f in sorted(glob.glob('*.log')))]"
            )
            cmd = f"python3 -c {quote(code)} > {qo}"
        elif how == "other":  # one awk over every file, counting per FILENAME (0 for a quiet one)
            prog = (
                'FNR == 1 { s = FILENAME; sub(/\\.log$/, "", s); n[s] += 0 } $2 == "ERROR" { n[s]++ } '
                f"END {{ for (s in n) print s {joiner} n[s] }}"
            )
            body = f"awk {quote(prog)} *.log"
            cmd = f"{{ {head}{body}; }} > {qo}" if head else f"{body} > {qo}"
        elif fmt == "colon" and w.chance(0.5):
            cmd = f"grep -c '^[^ ]* ERROR ' *.log | sed 's/\\.log:/: /' > {qo}"
        else:
            body = (
                f'for f in *.log; do echo "${{f%.log}}{loop_sep}$(awk \'$2 == "ERROR"\' "$f" | wc -l)"; done'
                if w.chance(0.5)
                else f'for f in *.log; do echo "${{f%.log}}{loop_sep}$(grep -c \' ERROR \' "$f")"; done'
            )
            cmd = f"{{ {head}{body}; }} > {qo}" if head else f"{body} > {qo}"
        go = 'cd "$LOG_DIR"' if in_var else f"cd {quote(folder)}"
        ref = [go, "ls", f"mkdir -p {quote(posixpath.dirname(out))}", cmd, f"cat {qo}"]
    return Draft(task=task, check=check, reference=ref, difficulty=3, files=files)


@family("logs-first-occurrence", "logs", "find when a message first (or last) appears in a log")
def first_occurrence(w: World) -> Draft:
    folder = _log_dir(w)
    svc = w.service()
    lines = w.log_lines(w.randint(25, 60), svc)
    msgs = [x.split(": ", 1)[1] for x in lines]
    repeated = sorted({m for m in msgs if msgs.count(m) >= 2})
    if not repeated:
        raise ValueError("no repeated message")
    msg = w.pick(repeated)
    idx = [i for i, m in enumerate(msgs) if m == msg]
    which = w.pick(("first", "first", "last"))
    what = w.pick(("timestamp", "timestamp", "line", "number"))
    pos = idx[0] if which == "first" else idx[-1]
    want = {"timestamp": lines[pos].split(" ", 1)[0], "line": lines[pos], "number": str(pos + 1)}[what]
    log = f"{folder}/{w.filename('log', stem=w.pick((svc, 'app', 'service', 'daemon')))}"
    files = {log: _body(lines)}
    if w.chance(0.5):  # an older rotated log that also has the message
        files[f"{log}.1"] = _body(
            w.log_lines(15, svc, w.date("2023-01-01", 100))
            + [f"{w.date('2023-06-01', 10):%Y-%m-%dT%H:%M:%S} INFO {svc}: {msg}"]
        )
    out = (
        f"{w.pick((HOME, folder, f'{HOME}/notes'))}/"
        f"{w.filename('txt', stem=w.pick((f'{which}_seen', 'answer', 'when', 'occurrence', f'{which}_{svc}')))}"
    )
    w.note(msg, svc)
    what_en = {
        "timestamp": "{its|the} timestamp (the first field of the line{|, exactly as written})",
        "line": "the whole line, unchanged",
        "number": "{its|the} line number{| (counting from 1)}",
    }[what]
    which_en = "first" if which == "first" else w.pick(("last", "most recent", "latest"))
    time_en = "first" if which == "first" else "last"
    task = w.phrase(
        "{Find|Look up} the " + which_en + ' {line|entry} in {log} {containing|with} the message "{msg}" and '
        "write " + what_en + " to {out}.",
        'When was "{msg}" logged for the ' + time_en + " time in {log}? {Save|Write} " + what_en + " {to|in} "
        "{out}.",
        "Ticket: we need the " + which_en + ' occurrence of "{msg}" in {log}. Put ' + what_en + " in {out}.",
        "Please {check|search} {log} for the "
        + which_en
        + ' "{msg}" message and {record|write} '
        + what_en
        + " in {out}.",
        'I am building a timeline. For "{msg}" in {log}, I need the '
        + which_en
        + " occurrence: write "
        + what_en
        + " to {out}.",
        "{out} should contain " + what_en + " of the " + which_en + ' "{msg}" line in {log}.',
        "grep-job: " + which_en + ' "{msg}" in {log}; ' + what_en + " -> {out}.",
        log=w.path_ref(log, "file"),
        msg=msg,
        out=w.path_ref(out, "file"),
    )
    check = "#!/bin/bash\n" + _lines_check(out, [want])
    qm, ql, qo = quote(msg), quote(log), quote(out)
    if what == "timestamp":
        cmd = (
            w.pick((f"grep -m1 {qm} {ql} | cut -d' ' -f1", f"awk '/{msg}/ {{print $1; exit}}' {ql}"))
            if which == "first"
            else w.pick(
                (
                    f"grep {qm} {ql} | tail -n 1 | cut -d' ' -f1",
                    f"grep {qm} {ql} | tail -1 | awk '{{print $1}}'",
                )
            )
        )
    elif what == "line":
        cmd = (
            w.pick((f"grep -m1 {qm} {ql}", f"sed -n '/{msg}/{{p;q}}' {ql}"))
            if which == "first"
            else w.pick((f"grep {qm} {ql} | tail -n 1", f"tac {ql} | grep -m 1 {qm}"))
        )
    else:
        cmd = (
            f"grep -n {qm} {ql} | {'head' if which == 'first' else 'tail'} -n 1 | cut -d: -f1"
            if w.chance(0.6)
            else f"awk '/{msg}/ {{n = NR{'; exit' if which == 'first' else ''}}} END {{print n}}' {ql}"
        )
    ref = [f"grep -c {qm} {ql}"] if w.chance(0.4) else []
    ref += [f"mkdir -p {quote(posixpath.dirname(out))}", f"{cmd} > {qo}", f"cat {qo}"]
    return Draft(task=task, check=check, reference=ref, difficulty=2, files=files)


@family("logs-compress-old", "logs", "gzip the log files older than N days, leaving recent ones alone")
def compress_old(w: World) -> Draft:
    folder = _log_dir(w)
    days = w.pick((2, 3, 5, 7, 10, 14, 30))
    old = [
        w.unique(
            lambda: (
                w.pick(
                    (
                        f"{w.pick(SERVICES)}-{w.date():%Y%m%d}",
                        f"{w.pick(SERVICES)}.{w.randint(1, 9)}",
                        f"{w.pick(SERVICES)}_{w.randint(1, 99)}",
                    )
                )
                + ".log"
            )
        )
        for _ in range(w.randint(2, 5))
    ]
    new = [
        w.unique(
            lambda: (
                w.pick(
                    (
                        w.pick(SERVICES),
                        f"{w.pick(SERVICES)}-current",
                        f"{w.pick(SERVICES)}_{w.randint(1, 99)}",
                    )
                )
                + ".log"
            )
        )
        for _ in range(w.randint(1, 4))
    ]
    decoy = w.unique(
        lambda: f"{w.pick(('notes', 'settings', 'index', 'README'))}.{w.pick(('txt', 'conf', 'json'))}"
    )
    keep = w.chance(0.3)
    sub = w.pick((None, None, "archive", "old", "2023"))
    content = {n: _body(w.log_lines(w.randint(2, 6))) for n in old + new + [decoy]}
    files = {f"{folder}/{n}": c for n, c in content.items()}
    setup = [f"touch -d '{days + w.randint(2, 40)} days ago' {quote(f'{folder}/{n}')}" for n in old + [decoy]]
    setup.append(
        f"touch -d '{w.randint(0, days - 1)} days ago' " + " ".join(quote(f"{folder}/{n}") for n in new)
    )
    sub_log = None
    if sub:
        sub_log = f"{folder}/{sub}/{w.unique(lambda: f'{w.pick(SERVICES)}-{w.randint(1, 99)}.log')}"
        files[sub_log] = _body(w.log_lines(3))
        setup.append(f"touch -d '{days + 50} days ago' {quote(sub_log)}")
    w.note(days, sub or "")
    scope = (
        w.spin(
            "directly in {d} (leave " + w.pick(("its subfolder", f"the {sub} subfolder")) + " alone)",
            capitalize=False,
            d=w.path_ref(folder),
        )
        if sub
        else w.spin("in {d}", capitalize=False, d=w.path_ref(folder))
    )
    keep_en = (
        w.spin("keep the original {.log files|uncompressed files} next to the .gz copies", capitalize=False)
        if keep
        else w.spin("the .gz {files|copies} replace the originals", capitalize=False)
    )
    task = w.phrase(
        "{Compress|Gzip} every .log file {scope} that was last modified more than {days} days ago; {keep}.",
        "Disk is filling up. {Gzip|Compress} the .log files {scope} older than {days} days ({keep}); newer logs and "
        "other files stay as they are.",
        "Ticket: old logs {scope} must be compressed with gzip: anything ending in .log not modified for more than "
        "{days} days. {keep_cap}.",
        "Could you gzip the logs {scope} that haven't changed in over {days} days? {keep_cap}; {leave|don't touch} "
        "the recent ones.",
        "We keep {days} days of plain-text logs. Everything ending in .log {scope} that is older than that "
        "gets gzipped; {keep}.",
        "After this, no .log file {scope} older than {days} days should be left uncompressed, and nothing newer "
        "should be touched. {keep_cap}.",
        "gzip .log {scope}, mtime > {days} days. {keep_cap}.",
        scope=scope,
        days=days,
        keep=keep_en,
        keep_cap=keep_en[:1].upper() + keep_en[1:],
    )
    q = quote
    lines = ["#!/bin/bash", f"cd {q(folder)} || exit 1"]
    for n in old:
        lines.append(f"gzip -t {q(n + '.gz')} 2>/dev/null || exit 1")
        lines.append(
            f"[ \"$(gzip -dc {q(n + '.gz')} | md5sum | cut -d' ' -f1)\" = {_md5(content[n])} ] || exit 1"
        )
        lines.append(f"[ -f {q(n)} ] || exit 1" if keep else f"[ ! -e {q(n)} ] || exit 1")
    for n in new + [decoy]:
        lines.append(
            f"[ \"$(md5sum < {q(n)} | cut -d' ' -f1)\" = {_md5(content[n])} ] && [ ! -e {q(n + '.gz')} ]"
            " || exit 1"
        )
    if sub_log:
        lines.append(f"[ -f {q(sub_log)} ] && [ ! -e {q(sub_log + '.gz')} ] || exit 1")
    check = "\n".join(lines) + "\n"
    gz = "gzip -k" if keep else "gzip"
    find = f"find {q(folder)} -maxdepth 1 -type f -name '*.log' -mtime +{days}"
    cmd = w.pick(
        (
            f"{find} -exec {gz} {{}} +",
            f"{find} -exec {gz} {{}} \\;",
            f"{find} -print0 | xargs -0 {gz}",
            f'for f in $({find}); do {gz} "$f"; done',
            f'{find} | while read -r f; do {gz} "$f"; done',
            "python3 -c 'import gzip, os, shutil, sys, time; d, n, k = sys.argv[1], int(sys.argv[2]), sys.argv[3]\n"
            "for f in os.listdir(d):\n"
            "    p = os.path.join(d, f)\n"
            '    if f.endswith(".log") and os.path.isfile(p) and time.time() - os.path.getmtime(p) > n * 86400:\n'
            '        with open(p, "rb") as src, gzip.open(p + ".gz", "wb") as dst:\n'
            "            shutil.copyfileobj(src, dst)\n"
            "        k or os.remove(p)' "
            f"{q(folder)} {days} {'keep' if keep else q('')}",
        )
    )
    ref = [f"ls -lt {q(folder)}", *([find] if w.chance(0.5) else []), cmd, f"ls -l {q(folder)}"]
    return Draft(task=task, check=check, reference=ref, difficulty=2, files=files, setup=setup)


# ==== issue 39: rotated logs merged in time order, one request traced across services, latency reports ============
# Where real tasks start (``workplace``, ``/var/log/<app>``); checks with ``py_check`` compare the lines (or, for JSON
# logs, the records) a correct answer must hold, in order, and that the logs themselves are as they were.
def _frag(w: World, template: str, **values: object) -> str:
    return w.spin(template, capitalize=False, **values)


def _rel_to(path: str, wd: str) -> str:
    return posixpath.relpath(path, wd) if path.startswith(wd + "/") else path


def _log_place(w: World, user: str, app: str) -> tuple[str, str, list[str]]:
    """The working folder, the log folder and the setup that makes them: /var/log/<app> for root (and for the
    service account, whose service writes it: the folder is its own), else a folder of the project."""
    if user == "root" and w.chance(0.6):
        logdir = w.pick((f"/var/log/{app}", f"/srv/{app}/logs", f"/opt/{app}/log"))
        wd = w.pick(("/root", logdir, posixpath.dirname(logdir)))
        return wd, logdir, [f"mkdir -p {quote(logdir)}"]
    if user == SERVICE_USER and w.chance(0.6):
        logdir = w.pick((f"/var/log/{app}", f"/srv/{app}/logs", f"/var/lib/{app}/log"))
        wd = w.pick((SESSION_ACCOUNTS[user].home, logdir))  # /var/log itself is root's: not a place to write
        return wd, logdir, [f"mkdir -p {quote(logdir)} && chown {user}: {quote(logdir)}"]
    wd, setup = workplace(w, user, app)
    logdir = w.pick((f"{wd}/logs", f"{wd}/log", f"{wd}/var/log"))
    return wd, logdir, setup


_LINES_CHECK = r"""
def lines_of(path):
    if not os.path.isfile(path):
        no(f"no {path}")
    return [l.rstrip() for l in text(path).splitlines() if l.strip()]
import gzip
for path, digest in S.get("gz", {}).items():
    try:
        if hashlib.md5(gzip.open(path).read()).hexdigest() != digest:
            no(f"{path} changed")
    except OSError:
        no(f"{path} is missing or no longer gzip")
"""


@family(
    "logs-merge-rotated",
    "logs",
    "merge a log and its rotated (partly gzipped) generations into one file in time order, optionally one level",
)
def merge_rotated(w: World) -> Draft:
    user = w.pick(("root", "operator", SERVICE_USER))  # a service's account merging its own rotated logs
    app = w.project()
    wd, logdir, setup = _log_place(w, user, app)
    svc = w.pick((app, w.service()))
    base = f"{svc}.log"
    gens = w.randint(2, 4)
    delay = w.chance(0.6)  # logrotate's delaycompress: .1 stays plain
    t = w.date()
    chunks: list[list[str]] = []
    for _ in range(gens + 1):  # oldest first
        lines = w.log_lines(w.randint(5, 10), service=svc, start=t)
        chunks.append(lines)
        t = datetime.fromisoformat(lines[-1].split(" ", 1)[0]) + timedelta(minutes=w.randint(5, 300))
    names = [f"{base}.{gens - i}" + (".gz" if gens - i > 1 or not delay else "") for i in range(gens)] + [
        base
    ]
    stage = f"/tmp/.logs-{w.token(6)}"
    files: dict[str, str] = {}
    gz: dict[str, str] = {}
    for name, lines in zip(names, chunks, strict=True):
        if name.endswith(".gz"):
            files[f"{stage}/{name[:-3]}"] = _body(lines)
            gz[f"{logdir}/{name}"] = _md5(_body(lines))
        else:
            files[f"{logdir}/{name}"] = _body(lines)
    other = w.pick([s for s in SERVICES if s != svc])
    files[f"{logdir}/{other}.log"] = _body(w.log_lines(w.randint(3, 6), service=other))
    files[f"{logdir}/{other}.log.1"] = _body(w.log_lines(w.randint(3, 6), service=other))
    setup.append(
        f"mkdir -p {quote(logdir)} && "
        + " && ".join(
            f"gzip -n -c {quote(f'{stage}/{n[:-3]}')} > {quote(f'{logdir}/{n}')}"
            for n in names
            if n.endswith(".gz")
        )
        + f" && rm -rf {stage} && chown -R {user}: {quote(logdir)}"
    )
    level = w.pick(("", "", "ERROR", "WARN"))
    every = [line for chunk in chunks for line in chunk]
    want = [line for line in every if not level or f" {level} " in line]
    if level and not want:
        level = ""
        want = every
    out = w.pick(
        (f"{wd}/{svc}-merged.log", f"{wd}/{svc}.full.log", f"/tmp/{svc}-all.log", f"{wd}/{svc}-history.log")
    )
    if level:
        out = out.replace(".log", f"-{level.lower()}.log")
    d, o = _rel_to(logdir, wd), _rel_to(out, wd)
    if logdir == wd:
        d = "."
    sel = _frag(w, " (only the {l} lines)", l=level) if level else ""
    w.note(base, svc, o)
    task = w.phrase(
        "Merge {b} and all its rotated copies in {d} (some are gzipped) into {o}{sel}, oldest line first. The "
        "logs themselves stay as they are.",
        "I need the whole history of {b}{sel} in one file: combine the current log and every rotation in {d} "
        "into {o}, in chronological order, without changing the originals.",
        "Ticket: write {o} with every line{sel} of {b}, {b}.1, ... ({d}, the old ones are compressed), sorted "
        "by time. {other} logs sit beside them and do not belong in it.",
        "Could you stitch {d}/{b} and its rotated generations back together into {o}{sel}? Oldest first; leave "
        "the rotated files in place.",
        "Goal: {o} holds, in time order, every line{sel} {svc} ever logged that is still in {d}, across the "
        "rotations (gzip or not). Nothing in {d} changes.",
        "{svc} rotated its log several times. Rebuild one chronological file {o}{sel} from {d}.",
        "The incident spans three days, so the lines of {b} are spread over its rotations in {d}. Put them{sel} "
        "back into one file, {o}, in the order they were written; the rotated files stay untouched.",
        "Why does grep miss half of {svc}'s history? Because most of it is in the rotated, partly gzipped "
        "copies of {b} in {d}. Write the complete log{sel} to {o}, chronologically.",
        b=base,
        d=d,
        o=o,
        sel=sel,
        svc=svc,
        other=other,
    )
    g = f"{d}/{base}" if d != "." else base
    ref = [w.pick((f"ls -l {d}", f"ls -lt {d}", f"zcat -f {g}* | head"))]
    filt = ""
    if level:
        filt = w.pick((f" | grep ' {level} '", f" | awk '$2 == \"{level}\"'", f" | grep -w {level}"))
    how = w.randint(0, 4)
    if how == 0:
        ref.append(f"zcat -f {g}*{filt} | sort > {o}")
    elif how == 1:
        parts = (
            [f"zcat {d}/{n}" if n.endswith(".gz") else f"cat {d}/{n}" for n in names]
            if d != "."
            else [f"zcat {n}" if n.endswith(".gz") else f"cat {n}" for n in names]
        )
        ref.append(f"({'; '.join(parts)}){filt} > {o}")
    elif how == 2:
        ref.append(f'for f in $(ls -r {g}*); do zcat -f "$f"; done{filt} > {o}')
    elif how == 3:
        ref.append(
            f"zgrep -h ' {level} ' {g}* | sort > {o}" if level else f"zcat -f $(ls -v {g}* | tac) > {o}"
        )
    else:
        cond = f" if ' {level} ' in l" if level else ""
        ref.append(
            f"python3 - > {o} <<'EOF'\nimport glob, gzip\nlines = []\nfor f in glob.glob('{g}*'):\n"
            "    with (gzip.open(f, 'rt') if f.endswith('.gz') else open(f)) as fh:\n"
            f"        lines += [l for l in fh{cond}]\nprint(''.join(sorted(lines)), end='')\nEOF"
        )
    ref.append(w.pick((f"wc -l {o}", f"head -n 3 {o}", f"tail -n 3 {o}")))
    spec = {
        "out": out,
        "want": want,
        "gz": gz,
        "same": {p: _md5(c) for p, c in files.items() if p.startswith(logdir)},
    }
    check = py_check(
        spec,
        _LINES_CHECK
        + r"""
got = lines_of(S["out"])
if got != S["want"]:
    missing = len(set(S["want"]) - set(got))
    no(f"{len(got)} lines, want {len(S['want'])} ({missing} missing); order matters")
""",
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if level or gens > 2 else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd == SESSION_ACCOUNTS[user].home else wd,
    )


_TRACE_MSGS = {
    "gateway": ("request received", "routed upstream", "response sent"),
    "auth": ("token checked", "session loaded", "scope granted"),
    "orders": ("order validated", "stock reserved", "order stored"),
    "payments": ("charge started", "card authorised", "receipt issued"),
    "search": ("query parsed", "index hit", "results ranked"),
    "mailer": ("template rendered", "message queued", "smtp accepted"),
}


@family(
    "logs-trace-request",
    "logs",
    "follow one request id through several services' logs (plain or JSON lines) into one time-ordered trace",
)
def trace_request(w: World) -> Draft:
    user = w.pick(("root", "operator", "operator"))
    app = w.project()
    wd, logdir, setup = _log_place(w, user, app)
    fmt = w.pick(("kv", "kv", "json"))
    key = w.pick(("req", "request_id", "trace")) if fmt == "kv" else w.pick(("request_id", "trace_id", "rid"))
    svcs = w.sample(tuple(_TRACE_MSGS), w.randint(3, 5))
    target = w.token(w.pick((8, 10, 12)))
    near = [target[:-1] + w.pick("0123456789"), target + w.pick("abc123"), w.token(len(target))]
    near = [n for n in near if n != target]
    ids = [w.token(len(target)) for _ in range(w.randint(4, 7))] + near
    t = w.date()
    events: list[tuple[datetime, str, str, str, str]] = []  # time, service, level, id, message
    rid_pool = [target] * w.randint(4, 7) + ids * 2
    failing_msg = w.pick(("payment declined", "upstream timeout", "validation failed", "quota exceeded"))
    failing_svc = w.pick(svcs)
    for rid in w.shuffled(rid_pool):
        t += timedelta(seconds=w.randint(1, 40), milliseconds=w.randint(1, 999))
        svc = w.pick(svcs)
        events.append((t, svc, "INFO", rid, w.pick(_TRACE_MSGS[svc])))
    # the request fails once, in one service: the clue when the id is not given
    t_fail = max(e[0] for e in events if e[3] == target) - timedelta(milliseconds=500)
    events.append((t_fail, failing_svc, "ERROR", target, failing_msg))
    events.sort()

    def render(e: tuple[datetime, str, str, str, str]) -> str:
        ts = f"{e[0]:%Y-%m-%dT%H:%M:%S}.{e[0].microsecond // 1000:03d}Z"
        if fmt == "json":
            return json.dumps({"ts": ts, "level": e[2], "service": e[1], key: e[3], "msg": e[4]})
        return f"{ts} {e[2]} {e[1]} {key}={e[3]} {e[4]}"

    files = {f"{logdir}/{s}.log": _body([render(e) for e in events if e[1] == s]) for s in svcs}
    setup.append(f"mkdir -p {quote(logdir)} && chown -R {user}: {quote(logdir)}")
    want = [render(e) for e in events if e[3] == target]
    mode = w.pick(("id", "id", "find"))
    out = w.pick(
        (
            f"{wd}/trace-{target}.log",
            f"{wd}/trace.{'jsonl' if fmt == 'json' else 'log'}",
            f"/tmp/{target}.trace",
        )
    )
    if mode == "find":
        out = out.replace(target, "failed")
    d, o = _rel_to(logdir, wd), _rel_to(out, wd)
    if logdir == wd:
        d = "."
    fmt_text = "JSON lines" if fmt == "json" else "plain text"
    w.note(target, key, failing_msg, o)
    if mode == "id":
        task = w.phrase(
            "Collect every log line of request {rid} ({key}={rid}) from all the service logs in {d} into {o}, in "
            "time order. Other requests, including ids that merely start or end like it, stay out.",
            "Support needs the full trace of request {rid}: write every line of {d}/*.log that carries {key} "
            "{rid} to {o}, oldest first, exactly as logged.",
            "Ticket: trace {key}={rid} across services. Output: {o}, the matching lines from each log in {d}, "
            "chronological.",
            "Could you pull request {rid} out of the logs in {d} ({fmt}) and put its lines, sorted by time, in {o}?",
            "Goal: {o} is the story of request {rid} across {svcs}: its log lines from {d}, unchanged, in time order.",
            rid=target,
            key=key,
            d=d,
            o=o,
            fmt=fmt_text,
            svcs=", ".join(svcs),
        )
    else:
        task = w.phrase(
            'One request failed with "{msg}" in {svc}. Find its id in the logs in {d}, then write every line of '
            "that request from all services there to {o}, in time order.",
            'A customer hit "{msg}". Work out which request that was ({svc}\'s log in {d} says), and trace it: '
            "all its lines from every log in {d}, oldest first, into {o}.",
            'Ticket: trace the request that logged the error "{msg}" ({svc}). Output {o}: every log line in {d} '
            "with that request's {key}, chronological, exactly as logged.",
            'Could you find the request behind "{msg}" in {d}/{svc}.log and collect its full trace across the '
            "services into {o} (time order)?",
            msg=failing_msg,
            svc=failing_svc,
            d=d,
            o=o,
            key=key,
        )
    g = f"{d}/*.log" if d != "." else "*.log"
    ref: list[str] = []
    rid = target
    if mode == "find":
        ref.append(
            w.pick(
                (
                    f"grep '{failing_msg}' {d}/{failing_svc}.log"
                    if d != "."
                    else f"grep '{failing_msg}' {failing_svc}.log",
                    f"grep -h ERROR {g}",
                )
            )
        )
        if w.chance(0.4):
            if fmt == "json":
                ref.append(f"rid=$(jq -r 'select(.msg == \"{failing_msg}\") | .{key}' {g})")
            else:
                ref.append(f"rid=$(grep -h '{failing_msg}' {g} | grep -o '{key}=[a-z0-9]*' | cut -d= -f2)")
            rid = "$rid"
    else:
        ref.append(w.pick((f"ls -l {d}", f"grep -c {target} {g}", f"head -n 2 {g}")))
    q = '"' if rid.startswith("$") else "'"
    how = w.randint(0, 3)
    if fmt == "kv":
        ref.append(
            (
                f"grep -h {q}{key}={rid} {q} {g} | sort > {o}",
                f"grep -hw {q}{key}={rid}{q} {g} | sort > {o}",
                f"awk -v id={q}{key}={rid}{q} '$4 == id' {g} | sort -k1,1 > {o}",
                f"cat {g} | grep -E {q} {key}={rid}( |$){q} | sort > {o}",
            )[how]
        )
    else:
        sel = f'.{key} == "{rid}"' if not rid.startswith("$") else f".{key} == $id"
        arg = ' --arg id "$rid"' if rid.startswith("$") else ""
        ref.append(
            (
                f'grep -h \'"{key}": "{rid}"\' {g} | sort > {o}'
                if not rid.startswith("$")
                else f'grep -h "\\"{key}\\": \\"$rid\\"" {g} | sort > {o}',
                f"jq -c{arg} 'select({sel})' {g} | sort > {o}",
                f"cat {g} | jq -s -c{arg} 'map(select({sel})) | sort_by(.ts) | .[]' > {o}",
                f"jq -c{arg} 'select({sel})' {g} | jq -s -c 'sort_by(.ts)[]' > {o}",
            )[how]
        )
    ref.append(f"cat {o}")
    spec = {"out": out, "want": want, "json": fmt == "json", "same": {p: _md5(c) for p, c in files.items()}}
    check = py_check(
        spec,
        _LINES_CHECK
        + r"""
got = lines_of(S["out"])
if S["json"]:
    try:
        got = [json.loads(l) for l in got]
    except ValueError:
        no("not JSON lines")
    want = [json.loads(l) for l in S["want"]]
else:
    want = S["want"]
if got != want:
    no(f"{len(got)} lines, want {len(want)} (the request's lines in time order, nothing else)")
""",
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if mode == "find" else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )


@family(
    "logs-latency-report",
    "logs",
    "report response times from an access log: the N slowest requests, or the mean time per endpoint",
)
def latency_report(w: World) -> Draft:
    user = w.pick(("root", "operator", "operator"))
    app = w.project()
    wd, logdir, setup = _log_place(w, user, app)
    unit = w.pick(("s", "s", "ms"))
    paths = w.sample(HTTP_PATHS, w.randint(4, 6))
    t = w.date()
    rows: list[tuple[str, str, int]] = []  # line, path, time in ms
    used: set[int] = set()
    lines = []
    for _ in range(w.randint(25, 40)):
        path = w.pick(paths)
        ms = w.randint(3, 2500)
        while ms in used:
            ms += 1
        used.add(ms)
        t += timedelta(seconds=w.randint(1, 30))
        tail = f"{ms / 1000:.3f}" if unit == "s" else f"{ms}"
        line = (
            _access(w.ip(), t, w.pick(("GET", "GET", "POST")), path, w.pick(_STATUSES), w.randint(120, 9000))
            + f" {tail}"
        )
        lines.append(line)
        rows.append((line, path, ms))
    name = w.pick(("access.log", f"{app}-access.log", "nginx-access.log"))
    files = {f"{logdir}/{name}": _body(lines), f"{logdir}/error.log": _body(w.log_lines(4, service=app))}
    setup.append(f"mkdir -p {quote(logdir)} && chown -R {user}: {quote(logdir)}")
    mode = w.pick(("slowest", "slowest", "mean"))
    out = f"{wd}/{w.pick(('slowest', 'latency', 'timings', 'perf'))}.{w.pick(('txt', 'report'))}"
    d, o = _rel_to(logdir, wd), _rel_to(out, wd)
    log = f"{d}/{name}" if d != wd else name
    if logdir == wd:
        log = name
    field = _frag(
        w,
        "the last field of each line is the response time in {u}",
        u="seconds (with milliseconds)" if unit == "s" else "milliseconds",
    )
    spec: dict[str, object] = {"out": out, "mode": mode, "same": {p: _md5(c) for p, c in files.items()}}
    if mode == "slowest":
        n = w.randint(3, 6)
        top = sorted(rows, key=lambda r: -r[2])[:n]
        spec["rows"] = [[p, f"{ms / 1000:.3f}" if unit == "s" else str(ms)] for _, p, ms in top]
        w.note(n)
        task = w.phrase(
            "List the {n} slowest requests of {log} in {o}, slowest first: one line each with its response time "
            "and its path ({field}).",
            "Which {n} requests in {log} took longest? Write `<time> <path>` lines to {o}, slowest first; {field}.",
            "Ticket: latency outliers. From {log} ({field}), put the top {n} by response time into {o}, one "
            "request a line (time and path), descending.",
            "Could you find the {n} slowest hits in {log} and save them to {o}, slowest on top? Each line needs the "
            "time as logged and the requested path. Note: {field}.",
            "Goal: {o} shows the {n} requests of {log} with the highest response time, slowest first, with their "
            "times and paths. ({field_c}.)",
            n=n,
            log=log,
            o=o,
            field=field,
            field_c=field[:1].upper() + field[1:],
        )
    else:
        sums: dict[str, list[int]] = {}
        for _, p, ms in rows:
            sums.setdefault(p, []).append(ms)
        means = {p: sum(v) / len(v) for p, v in sums.items()}
        spec["means"] = sorted([[p, m] for p, m in means.items()], key=lambda r: -float(r[1]))  # type: ignore[arg-type]
        task = w.phrase(
            "Write the mean response time of each path in {log} to {o}: one `<path> <ms>` line per path, in "
            "milliseconds rounded to whole numbers, slowest path first ({field}).",
            "Which endpoints are slow on average? From {log} ({field}), compute the average time per request path "
            "in ms (rounded) and write `path avg` lines to {o}, highest first.",
            "Ticket: per-endpoint latency for {log}. Output {o}: every path with its mean response time in whole "
            "milliseconds, sorted from slowest to fastest. Note: {field}.",
            "Could you average the response times per URL path in {log} and put them in {o} (`<path> <milliseconds>`, "
            "slowest first)? {field_c}.",
            log=log,
            o=o,
            field=field,
            field_c=field[:1].upper() + field[1:],
        )
    scale = "* 1000" if unit == "s" else ""
    ref = [w.pick((f"head -n 3 {log}", f"tail -n 2 {log}", f"wc -l {log}"))]
    how = w.randint(0, 4)
    if mode == "slowest":
        n = len(spec["rows"])  # type: ignore[arg-type]
        ref.append(
            (
                f"awk '{{print $NF, $7}}' {log} | sort -rn | head -n {n} > {o}",
                f"sort -k11,11 -rn {log} | head -n {n} | awk '{{print $11, $7}}' > {o}",
                f"awk '{{print $NF \" \" $7}}' {log} | sort -k1,1 -g -r | head -{n} > {o}",
                f"python3 -c \"rows = [l.split() for l in open('{log}')]; rows.sort(key=lambda r: -float(r[-1])); "
                f"print(''.join(f'{{r[-1]}} {{r[6]}}\\\\n' for r in rows[:{n}]), end='')\" > {o}",
                f"sort -t' ' -k11 -gr {log} | head -n {n} | cut -d' ' -f7,11 > {o}",
            )[how]
        )
    else:
        ref.append(
            (
                f"awk '{{s[$7] += $NF{scale}; n[$7]++}} END {{for (p in s) printf \"%s %d\\n\", p, s[p] / n[p] + 0.5}}' "
                f"{log} | sort -k2,2 -rn > {o}",
                f"awk '{{t[$7] += $NF; c[$7]++}} END {{for (p in t) print p, int(t[p] / c[p]{scale} + 0.5)}}' {log} "
                f"| sort -k2 -nr > {o}",
                f"for p in $(awk '{{print $7}}' {log} | sort -u); do awk -v p=\"$p\" '$7 == p {{s += $NF; n++}} END "
                f'{{printf "%s %.0f\\n", p, s / n{scale}}}\' {log}; done | sort -k2 -nr > {o}',
                f"python3 - > {o} <<'EOF'\nimport collections\nt = collections.defaultdict(list)\nfor l in open('{log}'):\n"
                f"    f = l.split()\n    t[f[6]].append(float(f[-1]){scale})\nfor p, v in sorted(t.items(), key=lambda kv: "
                "-sum(kv[1]) / len(kv[1])):\n    print(p, round(sum(v) / len(v)))\nEOF",
                f'sort -k7,7 {log} | awk \'$7 != p {{if (n) printf "%s %.0f\\n", p, s / n; p = $7; s = 0; n = 0}} '
                f"{{s += $NF{scale}; n++}} END {{printf \"%s %.0f\\n\", p, s / n}}' | sort -t' ' -k2,2 -nr > {o}",
            )[how]
        )
    ref.append(f"cat {o}")
    check = py_check(
        spec,
        r"""
if not os.path.isfile(S["out"]):
    no(f"no {S['out']}")
lines = [l.split() for l in text(S["out"]).splitlines() if l.strip()]
if S["mode"] == "slowest":
    if len(lines) != len(S["rows"]):
        no(f"{len(lines)} lines, want {len(S['rows'])}")
    for got, (path, t) in zip(lines, S["rows"]):
        if path not in got or not any(w.rstrip("ms") in (t, t.lstrip("0")) for w in got):
            no(f"line {' '.join(got)!r}: want {t} {path}")
else:
    if [l[0] for l in lines if l] != [p for p, _ in S["means"]]:
        no(f"paths: {[l[0] for l in lines]}, want them slowest first")
    for got, (path, mean) in zip(lines, S["means"]):
        try:
            value = float(got[1].rstrip("ms"))
        except (IndexError, ValueError):
            no(f"line {' '.join(got)!r}: no number")
        if abs(value - mean) > 1:
            no(f"{path}: {value}, want {mean:.0f}")
""",
    )
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if mode == "mean" else 2,
        setup=setup,
        files=files,
        user=user,  # type: ignore[arg-type]
        workdir=None if wd in (HOME, "/root") else wd,
    )
