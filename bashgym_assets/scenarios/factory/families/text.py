"""Text: replacing, cutting, counting, converting and slicing the lines of plain-text files.

Every check compares a file with the exact text the task asks for (computed here, in Python, from the drawn
content), trailing newlines aside: a half-done edit or an output in the wrong place fails.
"""

from __future__ import annotations

import hashlib
import json

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import (
    CITIES,
    FIRST_NAMES,
    FRUITS,
    HOME,
    PROJECTS,
    SERVICES,
    TEAMS,
    WORDS,
    World,
    quote,
    session_variables,
)
from bashgym_assets.scenarios.factory.world import shell_paths as _shell_paths
from bashgym_assets.scenarios.factory.world import text_body as _body


def _spin(w: World, template: str, capitalize: bool = True, **values: object) -> str:
    return w.spin(template, capitalize=capitalize, **values)


def _phrase(w: World, *templates: str, **values: object) -> str:
    return w.phrase(*templates, **values)


# ---- helpers --------------------------------------------------------------------------------------------------------


def _holds(path: str, text: str) -> str:
    """A check line: ``path`` holds exactly ``text`` (command substitution drops trailing newlines both sides)."""
    return f'[ -f {quote(path)} ] && [ "$(cat {quote(path)})" = {quote(text.rstrip(chr(10)))} ] || exit 1'


def _holds_words(path: str, lines: list[str]) -> str:
    """A check line: ``path`` holds ``lines`` once runs of blanks are squeezed and blank lines dropped."""
    return (
        f"[ -f {quote(path)} ] && [ \"$(awk 'NF {{$1=$1; print}}' {quote(path)})\" = "
        f"{quote(chr(10).join(lines))} ] || exit 1"
    )


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _out_name(w: World, stems: tuple[str, ...], ext: str = "txt") -> str:
    return f"{HOME}/{w.filename(ext, stem=w.pick(stems))}"


def _sed_pattern(text: str, delim: str) -> str:
    """``text`` as a basic regular expression matching itself literally."""
    return "".join("\\" + c if c in "\\.[]*^$" or c == delim else c for c in text)


def _sed_replacement(text: str, delim: str) -> str:
    return "".join("\\" + c if c in "\\&" or c == delim else c for c in text)


# ---- text-replace-in-files -------------------------------------------------------------------------------------------
def _replacement_pair(w: World) -> tuple[str, str, str]:
    """(old, new, what it is): a string worth replacing across a set of config files."""
    kind = w.pick(("host", "version", "url", "domain", "path", "port"))
    proj = w.project()
    if kind == "host":
        a, b = w.sample(range(1, 20), 2)
        w.note(a, b)
        return f"db{a}.{proj}.internal", f"db{b}.{proj}.internal", "database host"
    if kind == "version":
        major, minor = w.randint(1, 4), w.randint(0, 9)
        w.note(major, minor)
        return f"{major}.{minor}.{w.randint(0, 9)}", f"{major}.{minor + 1}.0", "version number"
    if kind == "url":
        host = f"{w.service()}.{proj}.example.com"
        return f"http://{host}", f"https://{host}", "URL"
    if kind == "domain":
        other = w.project()
        return f"{proj}.example.org", f"{other}.example.net", "domain"
    if kind == "path":
        return f"/opt/{proj}/current", f"/srv/{proj}", "install path"
    svc = w.service()
    a, b = w.sample((5432, 6379, 8080, 8443, 9000, 9200, 3306, 27017), 2)
    w.note(a, b)
    return f"{svc}:{a}", f"{svc}:{b}", "endpoint"


def _config_lines(w: World, old: str, with_old: bool) -> list[str]:
    """Some config-ish lines, a few of which mention ``old`` (once or twice on a line) when ``with_old``."""
    lines = w.lines(w.randint(2, 5), "kv")
    if with_old:
        key = w.pick(("host", "upstream", "target", "endpoint", "source", "base", "primary"))
        mentions = [
            f"{key} = {old}",
            f"# points at {old}",
            f'{w.pick(WORDS)}_{key}: "{old}"',
            f"fallback={old},{old}",
            f"{w.pick(WORDS)} {old} {w.pick(WORDS)}",
        ]
        for line in w.sample(mentions, w.randint(1, 3)):
            lines.insert(w.randint(0, len(lines)), line)
    return lines


@family("text-replace-in-files", "text", "replace a string in every file of one type under a folder")
def replace_in_files(w: World) -> Draft:
    root = f"{HOME}/{w.dirname()}"
    old, new, what = _replacement_pair(w)
    ext = w.pick(("conf", "yaml", "ini", "env", "properties", "cfg", "md", "html"))
    other = w.pick([e for e in ("txt", "bak", "json", "sample", "orig", "log") if e != ext])
    w.note(ext, other)
    recursive = w.chance(0.6)
    subdirs = [w.dirname() for _ in range(w.randint(1, 2))]
    targets: dict[str, str] = {}
    for i in range(w.randint(2, 5)):
        sub = w.pick(subdirs) if recursive and (i == 1 or w.chance(0.3)) else ""
        path = f"{root}/{sub + '/' if sub else ''}{w.filename(ext)}"
        targets[path] = _body(_config_lines(w, old, with_old=i < 2 or w.chance(0.6)))
    decoys: dict[str, str] = {}
    for _ in range(w.randint(1, 2)):  # another type of file that mentions the string: must stay as it is
        sub = w.pick(["", *subdirs]) if recursive else ""
        decoys[f"{root}/{sub + '/' if sub else ''}{w.filename(other)}"] = _body(_config_lines(w, old, True))
    if not recursive:  # a file of the right type one level down: out of scope
        decoys[f"{root}/{w.pick(subdirs)}/{w.filename(ext)}"] = _body(_config_lines(w, old, True))
    scope = (
        _spin(
            w,
            "{, subfolders included|, including subfolders|, anywhere in the tree|, at any depth}",
            capitalize=False,
        )
        if recursive
        else _spin(
            w,
            "{, only the files directly in it, not in its subfolders|; leave subfolders alone|, "
            "top level only: do not touch subdirectories}",
            capitalize=False,
        )
    )
    var = w.pick(("CONFIG_DIR", "SITE_ROOT", "DEPLOY_DIR")) if w.chance(0.2) else ""
    if var:  # the shell starts with the folder in a variable, and the task names only the variable
        root_ref = f"${var}"
        extra_files = session_variables(w, {var: root}, w.pick(("deploy", "site", "ops")))
    else:
        root_ref, extra_files = w.path_ref(root), {}
    task = _phrase(
        w,
        "{Replace|Substitute} every occurrence of '{old}' with '{new}' in {all the .{ext} files|every .{ext} file} "
        "{in|under} {root}{scope}.",
        "The {what} changed from '{old}' to '{new}'. {Update|Fix} {all the .{ext} files|every .{ext} file} in {root}{scope}; "
        "{other files must not change|leave files of other types alone}.",
        "Ticket: in {root}, the *.{ext} files still {say|contain} '{old}'. {Change|Replace} it to '{new}' "
        "{everywhere in them|in every one of them}{scope}.",
        "Can you {swap|replace} '{old}' for '{new}' in the .{ext} files {of|in} {root}{scope}? {Only the .{ext} files "
        "should change.|Files of other types stay as they are.}",
        "{root}: '{old}' -> '{new}' in *.{ext}{scope}; other files unchanged.",
        "We renamed the {what} from '{old}' to '{new}', but the .{ext} files under {root} still use the old one{scope}. "
        "Update them all, and leave every other file as it is.",
        old=old,
        new=new,
        what=what,
        ext=ext,
        root=root_ref,
        scope=scope,
    )
    check = (
        "\n".join(
            [
                "#!/bin/bash",
                *[_holds(p, c.replace(old, new)) for p, c in targets.items()],
                *[_holds(p, c) for p, c in decoys.items()],
            ]
        )
        + "\n"
    )
    delim = "|" if "/" in old + new else w.pick(("/", "/", "|", "#"))
    script = quote(f"s{delim}{_sed_pattern(old, delim)}{delim}{_sed_replacement(new, delim)}{delim}g")
    r = f'"${var}"' if var else _shell_paths(w)(root)
    # perl reads the strings from the environment (\\Q...\\E: taken literally, no escaping to get wrong)
    perl = f"OLD={quote(old)} NEW={quote(new)} perl -pi -e 's/\\Q$ENV{{OLD}}\\E/$ENV{{NEW}}/g'"
    py_replace = "p.write_text(p.read_text().replace(sys.argv[2], sys.argv[3]))"
    if recursive:
        form = w.pick(("exec", "grep", "xargs", "loop", "perl", "python"))
        cmd = {
            "exec": f"find {r} -type f -name '*.{ext}' -exec sed -i {script} {{}} +",
            "grep": f"grep -rlF --include='*.{ext}' {quote(old)} {r} | xargs sed -i {script}",
            "xargs": f"find {r} -type f -name '*.{ext}' -print0 | xargs -0 sed -i {script}",
            "loop": f"find {r} -type f -name '*.{ext}' | while read -r f; do sed -i {script} \"$f\"; done",
            "perl": f"find {r} -type f -name '*.{ext}' -exec env {perl} {{}} +",
            "python": "python3 -c "
            + quote(
                f"import pathlib, sys; [{py_replace} for p in pathlib.Path(sys.argv[1]).rglob('*.{ext}')]"
            )
            + f" {r} {quote(old)} {quote(new)}",
        }[form]
        show = f"grep -rn --include='*.{ext}' {quote(new)} {r}"
    else:
        form = w.pick(("glob", "maxdepth", "loop", "perl", "python"))
        cmd = {
            "glob": f"sed -i {script} {r}/*.{ext}",
            "maxdepth": f"find {r} -maxdepth 1 -type f -name '*.{ext}' -exec sed -i {script} {{}} +",
            "loop": f'for f in {r}/*.{ext}; do sed -i {script} "$f"; done',
            "perl": f"{perl} {r}/*.{ext}",
            "python": "python3 -c "
            + quote(f"import pathlib, sys; [{py_replace} for p in pathlib.Path(sys.argv[1]).glob('*.{ext}')]")
            + f" {r} {quote(old)} {quote(new)}",
        }[form]
        show = f"grep -n {quote(new)} {r}/*.{ext}"
    reference = ([f'echo "${var}"'] if var else []) + (
        [f"grep -rlF {quote(old)} {r}"] if w.chance(0.4) else []
    )
    reference += [cmd, show]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if recursive else 3,
        files={**targets, **decoys, **extra_files},
    )


# ---- text-extract-column --------------------------------------------------------------------------------------------
_DELIMS = {
    ",": ("comma-separated", "csv"),
    "\t": ("tab-separated", "tsv"),
    ":": ("colon-separated", "txt"),
    ";": ("semicolon-separated", "csv"),
    "|": ("pipe-separated", "dat"),
}


def _column_value(w: World, col: str) -> str:
    return {
        "name": lambda: w.pick(FIRST_NAMES),
        "team": lambda: w.pick(TEAMS),
        "city": lambda: w.pick(CITIES),
        "id": lambda: str(w.randint(1000, 9999)),
        "score": lambda: str(w.randint(0, 100)),
        "service": lambda: w.pick(SERVICES),
        "port": lambda: str(w.port()),
        "status": lambda: w.pick(("active", "disabled", "pending", "locked")),
        "date": lambda: f"{w.date():%Y-%m-%d}",
        "project": lambda: w.pick(PROJECTS),
        "fruit": lambda: w.pick(FRUITS),
        "email": lambda: f"{w.pick(FIRST_NAMES)}@{w.pick(PROJECTS)}.org",
    }[col]()


@family("text-extract-column", "text", "extract one column of a delimited file into another file")
def extract_column(w: World) -> Draft:
    cols = w.sample(
        (
            "name",
            "team",
            "city",
            "id",
            "score",
            "service",
            "port",
            "status",
            "date",
            "project",
            "fruit",
            "email",
        ),
        w.randint(3, 5),
    )
    delim = w.pick(tuple(_DELIMS))
    kind, ext = _DELIMS[delim]
    header = w.chance(0.75)
    rows = [[_column_value(w, c) for c in cols] for _ in range(w.randint(5, 12))]
    k = w.randint(1, len(cols))
    col = cols[k - 1]
    mode = w.pick(("values", "values", "unique", "with_header")) if header else w.pick(("values", "unique"))
    src = f"{HOME}/{w.filename(ext)}"
    out = _out_name(w, (f"{col}_values", f"{col}_list", f"{col}_column", "column", "extract"))
    w.note(k, _ordinal(k), col)
    lines = ([delim.join(cols)] if header else []) + [delim.join(r) for r in rows]
    values = [r[k - 1] for r in rows]
    expected = {"values": values, "unique": sorted(set(values)), "with_header": [col, *values]}[mode]
    which = (
        _spin(w, "the {col} column", col=col, capitalize=False)
        if header and w.chance(0.6)
        else _spin(w, "{the {nth} column|column {k}|field {k}}", nth=_ordinal(k), k=k, capitalize=False)
    )
    no_head = "{, without the header| (leave out the header line)|, header line excluded}" if header else ""
    want = _spin(
        w,
        {
            "values": "{the values one per line, in their original order|one value per line, in file order}"
            + no_head,
            "unique": "{each distinct value once|the distinct values}, sorted{| alphabetically}, one per line"
            + no_head,
            "with_header": "{the header line followed by the values|the column including its header line}"
            ", one per line, in file order",
        }[mode],
        capitalize=False,
    )
    headed = (
        "{ with a header line| (the first line is a header)}"
        if header
        else "{ (no header line)| without a header}"
    )
    task = _phrase(
        w,
        "{Extract|Pull out|Take} "
        + which
        + " of the "
        + kind
        + " file {src} and {write|save} it to {out}: {want}.",
        "{src} is " + kind + headed + ". I need " + which + " in {out}: {want}.",
        "Ticket: {write|put} " + which + " from {src} (" + kind + ") into {out}. Format: {want}.",
        "Could you {cut|extract} " + which + " out of {src}? It is " + kind + headed + "; {out} should "
        "{contain|hold} {want}.",
        "{src} -> {out}: " + which + ", {want}.",
        "hey, I only care about " + which + " of {src} (" + kind + "). can you put it in {out}? {want}",
        src=w.path_ref(src, "file"),
        out=w.path_ref(out, "file"),
        want=want,
    )
    check = "\n".join(["#!/bin/bash", _holds(out, _body(expected)), _holds(src, _body(lines))]) + "\n"
    sh = _shell_paths(w)
    s, o = sh(src), sh(out)
    if delim == "\t":
        dflag, fsep = w.pick(("", "-d $'\\t' ")), "'\\t'"
    else:
        dflag, fsep = f"-d {quote(delim)} ", quote(delim)
    skip = header and mode != "with_header"
    form = w.pick(("cut", "awk"))
    if form == "cut":
        body = (
            f"tail -n +2 {s} | cut {dflag}-f{k}"
            if skip and w.chance(0.5)
            else f"cut {dflag}-f{k} {s}" + (" | tail -n +2" if skip else "")
        )
    else:
        body = f"awk -F{fsep} '{'NR>1 ' if skip else ''}{{print ${k}}}' {s}"
    if mode == "unique":
        body += w.pick((" | sort -u", " | sort | uniq"))
    reference = ([f"head -n 3 {s}"] if w.chance(0.5) else []) + [f"{body} > {o}", f"cat {o}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if mode == "unique" else 2,
        files={src: _body(lines)},
    )


# ---- text-count-values ----------------------------------------------------------------------------------------------
@family("text-count-values", "text", "count how often each value occurs (sort | uniq -c) and rank them")
def count_values(w: World) -> Draft:
    pool = w.pick((FRUITS, CITIES, TEAMS, SERVICES, PROJECTS, FIRST_NAMES))
    values = w.sample(pool, w.randint(3, 7))
    counts = w.sample(range(1, 16), len(values))  # distinct counts: the ranking has no ties
    ranked = sorted(zip(values, counts, strict=True), key=lambda vc: -vc[1])
    items = w.shuffled([v for v, c in ranked for _ in range(c)])
    csv = w.chance(0.35)
    src = f"{HOME}/{w.filename('csv' if csv else w.pick(('txt', 'log', 'lst')))}"
    if csv:
        field = w.randint(2, 3)
        head = ["id", w.pick(("item", "value", "category", "key")), w.pick(("when", "owner", "note"))]
        if field == 3:
            head[1], head[2] = head[2], head[1]
        lines = [",".join(head)]
        for i, v in enumerate(items):
            other = w.pick(WORDS)
            lines.append(f"{1000 + i},{v},{other}" if field == 2 else f"{1000 + i},{other},{v}")
        w.note(field, _ordinal(field), head[field - 1])
    else:
        lines = items
    mode = w.pick(("count_value", "count_value", "value_count", "top_n", "top1"))
    n = w.randint(2, max(2, len(values) - 1))
    out = _out_name(w, ("counts", "frequency", "ranking", "tally", "top"))
    w.note(n)
    expected = {
        "count_value": [f"{c} {v}" for v, c in ranked],
        "value_count": [f"{v} {c}" for v, c in ranked],
        "top_n": [v for v, _ in ranked[:n]],
        "top1": [ranked[0][0]],
    }[mode]
    want = {
        "count_value": "{one line per distinct value: the count, a space, then the value|each distinct value "
        "with its count in front (count first, then the value)}, most frequent first",
        "value_count": "{one line per distinct value: the value, a space, then its count|each value followed "
        "by its count on one line}, most frequent first",
        "top_n": "{only|just} the {n} most {frequent|common} values, one per line, most frequent first",
        "top1": "{only|just} the single most {frequent|common} value",
    }[mode]
    what = (
        _spin(
            w,
            "the values in {the {field_name} column|column {field}} of {src} (CSV, the first line is a "
            "header)",
            field_name=head[field - 1],
            field=field,
            src=w.path_ref(src, "file"),
            capitalize=False,
        )
        if csv
        else _spin(
            w, "the lines of {src} (one value per line)", src=w.path_ref(src, "file"), capitalize=False
        )
    )
    task = _phrase(
        w,
        "{Count|Tally} how often each value occurs in {what}. {Write|Save} to {out} {want}.",
        "Please make a frequency count of {what}: {out} should {contain|list} {want}.",
        "Ticket: {rank|summarise} {what} by {frequency|how often they occur}. Output in {out}: {want}.",
        "How often does each value occur in {what}? {Answer|Reply} in {out} with {want}.",
        "{what} -> {out}: {want}.",
        "Which values turn up most often in {what}? I want a frequency table in {out}: {want}.",
        what=what,
        want=_spin(w, want, capitalize=False, n=n),
        out=w.path_ref(out, "file"),
    )
    check = "#!/bin/bash\n" + _holds_words(out, expected) + "\n"
    sh = _shell_paths(w)
    s, o = sh(src), sh(out)
    source = (
        w.pick((f"cut -d, -f{field} {s} | tail -n +2", f"tail -n +2 {s} | cut -d, -f{field}")) if csv else ""
    )
    if mode in ("count_value", "value_count") and w.chance(0.35):
        feed = f"{source} | " if csv else ""
        awk = f"awk '{{n[$0]++}} END {{for (v in n) print n[v], v}}'{'' if csv else ' ' + s}"
        cmd = f"{feed}{awk} | sort -rn"
    else:
        cmd = (
            f"{source} | sort | uniq -c | sort -rn"
            if csv
            else f"sort {s} | uniq -c | sort {w.pick(('-rn', '-nr'))}"
        )
    cmd += {
        "count_value": "",
        "value_count": " | awk '{print $2, $1}'",
        "top_n": f" | head -n {n} | awk '{{print $2}}'",
        "top1": " | head -n 1 | awk '{print $2}'",
    }[mode]
    reference = [f"{cmd} > {o}", f"cat {o}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if mode == "count_value" and not csv else 3,
        files={src: _body(lines)},
    )


# ---- text-tr-convert -------------------------------------------------------------------------------------------------
@family("text-tr-convert", "text", "convert characters of a file: case, line endings, delimiters, squeezing")
def tr_convert(w: World) -> Draft:
    mode = w.pick(("upper", "lower", "crlf", "tab2comma", "squeeze", "colon2nl", "quotes"))
    ext = {"tab2comma": "tsv", "quotes": "csv", "crlf": w.pick(("txt", "csv", "sh", "conf"))}.get(mode, "txt")
    src = f"{HOME}/{w.filename(ext)}"
    n = w.randint(3, 8)
    if mode == "upper":
        lines = w.lines(n)
        expected = [x.upper() for x in lines]
    elif mode == "lower":
        lines = [
            " ".join(x.upper() if w.chance(0.5) else x.title() for x in line.split()) for line in w.lines(n)
        ]
        expected = [x.lower() for x in lines]
    elif mode == "crlf":
        lines = w.lines(n, w.pick(("words", "kv")))
        expected = lines
    elif mode == "tab2comma":
        lines = ["\t".join(w.pick(WORDS) for _ in range(3)) for _ in range(n)]
        expected = [x.replace("\t", ",") for x in lines]
    elif mode == "squeeze":
        lines = []
        for _ in range(n):
            words = [w.pick(WORDS) for _ in range(w.randint(2, 5))]
            gaps = [" " * w.randint(1, 4) for _ in words[1:]]
            gaps[0] = "  " if gaps[0] == " " else gaps[0]  # every line has a run to squeeze
            lines.append(words[0] + "".join(g + x for g, x in zip(gaps, words[1:], strict=True)))
        expected = [" ".join(x.split()) for x in lines]
    elif mode == "colon2nl":
        parts = w.sample(
            (
                "/usr/local/bin",
                "/usr/bin",
                "/bin",
                "/usr/local/sbin",
                "/usr/sbin",
                "/sbin",
                f"{HOME}/bin",
                f"/opt/{w.pick(PROJECTS)}/bin",
                f"{HOME}/.local/bin",
                "/snap/bin",
            ),
            w.randint(4, 7),
        )
        lines = [":".join(parts)]
        expected = parts
    else:  # quotes
        lines = [
            ",".join(f'"{w.pick(WORDS)}"' if w.chance(0.7) else str(w.randint(1, 999)) for _ in range(3))
            for _ in range(n)
        ]
        expected = [x.replace('"', "") for x in lines]
    original = "".join(f"{x}\r\n" for x in lines) if mode == "crlf" else _body(lines)
    in_place = mode in ("crlf", "quotes", "squeeze") and w.chance(0.5)
    out = (
        src
        if in_place
        else _out_name(
            w,
            ("converted", "clean", "fixed", "output", "result"),
            {"tab2comma": "csv", "quotes": "csv"}.get(mode, ext),
        )
    )
    what = {
        "upper": "{convert every letter|turn all letters} to upper case",
        "lower": "{convert every letter|turn all letters} to lower case",
        "crlf": "{convert the Windows (CRLF) line endings to Unix (LF)|strip the carriage returns (\\r) "
        "from the line endings}",
        "tab2comma": "{replace every tab with a comma|turn it into comma-separated values (each tab becomes a "
        "comma)}",
        "squeeze": "{squeeze every run of spaces into a single space|collapse repeated spaces to one}",
        "colon2nl": "{split the colon-separated list into one entry per line|put each colon-separated entry "
        "on its own line}",
        "quotes": '{remove every double quote (")|strip all the double-quote characters}',
    }[mode]
    where = (
        _spin(w, "{in place|by editing the file itself}", capitalize=False)
        if in_place
        else _spin(
            w,
            "{and write the result to|saving the result as|and save it as} {out}; {the original stays unchanged|"
            "leave {src_short} as it is}",
            out=w.path_ref(out, "file"),
            src_short="the original",
            capitalize=False,
        )
    )
    task = _phrase(
        w,
        "{Take|Process} {src} and {what}, {where}.",
        "For {src}: {what}, {where}.",
        "Ticket: {src} needs fixing. {what_cap}, {where}.",
        "Can you {what} in {src}? Do it {where}.",
        src=w.path_ref(src, "file"),
        what=_spin(w, what, capitalize=False),
        what_cap=_spin(w, what),
        where=where,
    )
    check_lines = ["#!/bin/bash", _holds(out, _body(expected))]
    if mode == "crlf":
        check_lines.append(f"! grep -q $'\\r' {quote(out)} || exit 1")
    if not in_place:
        # by checksum: a check script cannot carry a carriage return (bundles normalise line endings)
        digest = hashlib.md5(original.encode()).hexdigest()
        check_lines.append(f'[ "$(md5sum < {quote(src)} | cut -c1-32)" = {digest} ] || exit 1')
    sh = _shell_paths(w)
    s, o = sh(src), sh(out)
    tr = {
        "upper": w.pick(("tr 'a-z' 'A-Z'", "tr '[:lower:]' '[:upper:]'")),
        "lower": w.pick(("tr 'A-Z' 'a-z'", "tr '[:upper:]' '[:lower:]'")),
        "crlf": "tr -d '\\r'",
        "tab2comma": "tr '\\t' ','",
        "squeeze": "tr -s ' '",
        "colon2nl": "tr ':' '\\n'",
        "quotes": "tr -d '\"'",
    }[mode]
    if in_place:
        sed = {"crlf": "sed -i 's/\\r$//'", "quotes": "sed -i 's/\"//g'", "squeeze": "sed -i 's/  */ /g'"}[
            mode
        ]
        cmd = w.pick((f"{sed} {s}", f"{tr} < {s} > {s}.tmp && mv {s}.tmp {s}"))
    else:
        cmd = w.pick((f"{tr} < {s} > {o}", f"cat {s} | {tr} > {o}"))
    reference = [cmd, w.pick((f"cat {o}", f"cat -A {o} | head", f"head {o}"))]
    return Draft(
        task=task,
        check="\n".join(check_lines) + "\n",
        reference=reference,
        difficulty=2 if not in_place else 3,
        files={src: original},
    )


# ---- text-line-range -------------------------------------------------------------------------------------------------
@family("text-line-range", "text", "write a range of lines of a file (head, tail, sed -n) to another file")
def line_range(w: World) -> Draft:
    total = w.randint(20, 80)
    kind = w.pick(("log", "words", "kv", "numbers"))
    lines = w.log_lines(total) if kind == "log" else w.lines(total, kind)
    src = f"{HOME}/{w.filename('log' if kind == 'log' else w.pick(('txt', 'dat', 'lst')))}"
    out = _out_name(w, ("excerpt", "slice", "lines", "part", "window", "section"))
    mode = w.pick(("range", "range", "head", "tail", "from"))
    a = w.randint(2, total // 2)
    b = w.randint(a + 2, total - 2)
    n = w.randint(3, 15)
    w.note(a, b, n, _ordinal(a), _ordinal(b))
    expected = {"range": lines[a - 1 : b], "head": lines[:n], "tail": lines[-n:], "from": lines[a - 1 :]}[
        mode
    ]
    what = _spin(
        w,
        {
            "range": "{lines {a} to {b}|lines {a} through {b}|the lines numbered {a} to {b}} "
            "{(inclusive)|(both included)|}",
            "head": "the first {n} lines",
            "tail": "the last {n} lines",
            "from": "{the lines from line {a} to the end|all lines from the {nth} one onward}",
        }[mode],
        a=a,
        b=b,
        n=n,
        nth=_ordinal(a),
        capitalize=False,
    )
    task = _phrase(
        w,
        "{Write|Copy|Save} {what} of {src} {to|into} {out}.",
        "From {src}, {take|keep} only {what} and {write|put} them in {out}{|, unchanged and in order}.",
        "Ticket: {extract|cut out} {what} from {src} and {save|store} them as {out}.",
        "Could you {get|extract} {what} of {src} into {out}?",
        "{src} -> {out}: {what} only.",
        "I only need part of {src} for a bug report: {what}. Please put exactly those lines in {out}, unchanged and "
        "in order.",
        what=what,
        src=w.path_ref(src, "file"),
        out=w.path_ref(out, "file"),
    )
    sh = _shell_paths(w)
    s, o = sh(src), sh(out)
    cmd = {
        "range": w.pick(
            (
                f"sed -n '{a},{b}p' {s}",
                f"awk 'NR>={a} && NR<={b}' {s}",
                f"head -n {b} {s} | tail -n +{a}",
                f"tail -n +{a} {s} | head -n {b - a + 1}",
                f"perl -ne 'print if $. >= {a} && $. <= {b}' {s}",  # $. is perl's line number
                f"cat -n {s} | awk '$1 >= {a} && $1 <= {b}' | cut -f2-",  # numbered, filtered, unnumbered
            )
        ),
        "head": w.pick((f"head -n {n} {s}", f"sed -n '1,{n}p' {s}", f"awk 'NR<={n}' {s}", f"sed '{n}q' {s}")),
        "tail": w.pick((f"tail -n {n} {s}", f"tail -{n} {s}", f"tac {s} | head -n {n} | tac")),
        "from": w.pick(
            (f"tail -n +{a} {s}", f"sed -n '{a},$p' {s}", f"sed '1,{a - 1}d' {s}", f"awk 'NR >= {a}' {s}")
        ),
    }[mode]
    reference = ([f"wc -l {s}"] if w.chance(0.4) else []) + [
        f"{cmd} > {o}",
        w.pick((f"cat {o}", f"wc -l {o}")),
    ]
    check = "#!/bin/bash\n" + _holds(out, _body(expected)) + "\n"
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=1 if mode in ("head", "tail") else 2,
        files={src: _body(lines)},
    )


# ---- text-dedupe-lines -----------------------------------------------------------------------------------------------
def _dedupe_items(w: World) -> list[str]:
    kind = w.pick(("email", "host", "word", "path"))
    make = {
        "email": lambda: f"{w.pick(FIRST_NAMES)}@{w.pick(PROJECTS)}.org",
        "host": lambda: f"{w.pick(SERVICES)}-{w.randint(1, 9)}.{w.pick(PROJECTS)}.lan",
        "word": lambda: w.pick(WORDS),
        "path": lambda: f"/srv/{w.pick(PROJECTS)}/{w.pick(WORDS)}",
    }[kind]
    distinct: list[str] = []
    while len(distinct) < w.randint(5, 10):
        value = make()
        if value not in distinct:
            distinct.append(value)
    return distinct


@family(
    "text-dedupe-lines", "text", "remove duplicate lines (keeping order, sorted, or only repeats/singles)"
)
def dedupe_lines(w: World) -> Draft:
    distinct = _dedupe_items(w)
    repeats = w.sample(distinct, w.randint(2, max(2, len(distinct) - 2)))
    lines = list(distinct)
    for value in repeats:
        for _ in range(w.randint(1, 3)):
            lines.insert(w.randint(0, len(lines)), value)
    src = f"{HOME}/{w.filename(w.pick(('txt', 'lst', 'list', 'dat')))}"
    mode = w.pick(("keep_order", "keep_order", "sorted", "only_dups", "only_once"))
    in_place = mode in ("keep_order", "sorted") and w.chance(0.4)
    out = src if in_place else _out_name(w, ("unique", "deduped", "clean", "repeated", "singles", "result"))
    seen: list[str] = []
    for x in lines:
        if x not in seen:
            seen.append(x)
    expected = {
        "keep_order": seen,
        "sorted": sorted(set(lines)),
        "only_dups": sorted({x for x in lines if lines.count(x) > 1}),
        "only_once": sorted({x for x in lines if lines.count(x) == 1}),
    }[mode]
    what = {
        "keep_order": "{remove the duplicate lines, keeping the first occurrence of each and the original order|"
        "drop repeated lines so each line appears once, in the order they first appear}",
        "sorted": "{remove duplicate lines and sort the rest|keep each distinct line once, sorted}",
        "only_dups": "{list the lines that occur more than once, each listed once, sorted|find which lines are "
        "duplicated (each such line once, sorted)}",
        "only_once": "{list the lines that occur exactly once, sorted|find the lines that are not repeated "
        "anywhere (sorted)}",
    }[mode]
    where = (
        _spin(w, "{in place|by editing the file itself}", capitalize=False)
        if in_place
        else _spin(
            w,
            "{and write the result to|saving the result as|with the output in} {out}",
            out=w.path_ref(out, "file"),
            capitalize=False,
        )
    )
    task = _phrase(
        w,
        "In {src}, {what}, {where}.",
        "{src} has {duplicates|repeated lines}. {what_cap}, {where}.",
        "Ticket: {deduplicate|clean up} {src}: {what}, {where}.",
        "Can you {what} for {src}, {where}?",
        "{src}: {what}, {where}.",
        "The list {src} was built by appending several exports, so some lines repeat. Please {what}, {where}.",
        src=w.path_ref(src, "file"),
        what=_spin(w, what, capitalize=False),
        what_cap=_spin(w, what),
        where=where,
    )
    sh = _shell_paths(w)
    s, o = sh(src), sh(out)
    if in_place:
        cmd = (
            w.pick(
                (
                    f"awk '!seen[$0]++' {s} > {s}.tmp && mv {s}.tmp {s}",
                    f"awk '!seen[$0]++' {s} > /tmp/dedup && cat /tmp/dedup > {s}",
                )
            )
            if mode == "keep_order"
            else w.pick((f"sort -u -o {s} {s}", f"sort -u {s} > {s}.new && mv {s}.new {s}"))
        )
    else:
        cmd = {
            "keep_order": w.pick(
                (
                    f"awk '!seen[$0]++' {s} > {o}",
                    f"awk '!seen[$0]++' {s} > {o}",
                    # numbered, sorted by text keeping the first of each run (-s: stable), renumbered order
                    f"cat -n {s} | sort -t \"$(printf '\\t')\" -k2 -s -u | sort -n | cut -f2- > {o}",
                    # a dict keeps insertion order
                    'python3 -c \'import sys; print("".join(dict.fromkeys(open(sys.argv[1]))), end="")\' '
                    f"{s} > {o}",
                )
            ),
            "sorted": w.pick((f"sort -u {s} > {o}", f"sort {s} | uniq > {o}")),
            "only_dups": w.pick((f"sort {s} | uniq -d > {o}", f"sort {s} | uniq -D | uniq > {o}")),
            "only_once": w.pick(
                (f"sort {s} | uniq -u > {o}", f"sort {s} | uniq -c | sed -n 's/^ *1 //p' > {o}")
            ),
        }[mode]
    reference = [cmd, f"cat {o}"]
    check = "#!/bin/bash\n" + _holds(out, _body(expected)) + "\n"
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if in_place else 2,
        files={src: _body(lines)},
    )


# ---- reports with awk, fixed-width files, numbering and wrapping ------------------------------------------------------
def _text_where(w: World, folder: str) -> tuple[str | None, list[str]]:
    """Where the operator's shell starts: home, the file's folder, or another project folder."""
    wd = w.pick((None, folder, folder, f"{HOME}/{w.pick(('work', 'tmp', 'notes'))}"))
    if wd is None or wd == HOME:
        return None, []
    return wd, [f"mkdir -p {quote(wd)} && chown operator:operator {quote(wd)}"]


def _rel(path: str, wd: str | None) -> str:
    if wd and path.startswith(wd + "/"):
        return quote(path[len(wd) + 1 :])
    return quote(path)


def _ref_path(w: World, path: str, wd: str | None, kind: str = "file") -> str:
    if wd and path.startswith(wd + "/") and w.chance(0.5):
        return "./" + path[len(wd) + 1 :]
    return w.path_ref(path, kind)


def _text_folder(w: World) -> str:
    return w.pick((f"{HOME}/{w.pick(('reports', 'data', 'notes', 'ops', 'inbox'))}", f"{HOME}/{w.project()}"))


@family("text-awk-report", "text", "pick fields of matching records with awk and format them into a report")
def awk_report(w: World) -> Draft:
    names = [
        f"{w.pick(SERVICES)}-{w.pick(('backup', 'sync', 'build', 'export', 'scan', 'prune'))}"
        for _ in range(12)
    ]
    names = list(dict.fromkeys(names))[: w.randint(6, 10)]
    statuses = ("ok", "failed", "skipped")
    recs = [[n, w.pick(FIRST_NAMES), str(w.randint(1, 240)), w.pick(statuses)] for n in names]
    target = w.pick(("failed", "ok"))
    if not any(r[3] == target for r in recs):
        recs[0][3] = target
    if all(r[3] == target for r in recs):
        recs[-1][3] = "skipped"
    sep = w.pick((" ", "\t", ":"))
    head = w.chance(0.5)
    lines = (["# job owner minutes status"] if head else []) + [sep.join(r) for r in recs]
    folder = _text_folder(w)
    src = f"{folder}/{w.filename(w.pick(('txt', 'log', 'dat')), stem=w.pick(('jobs', 'runs', 'nightly', 'batch')))}"
    out = (
        f"{w.pick((folder, HOME))}/{w.filename('txt', stem=w.pick(('report', f'{target}_jobs', 'summary')))}"
    )
    fmt = w.pick(("owner_job", "job_min", "tab", "csv"))
    total = w.chance(0.35)
    pick = [r for r in recs if r[3] == target]
    render = {
        "owner_job": lambda r: f"{r[1]}: {r[0]}",
        "job_min": lambda r: f"{r[0]} ({r[2]} min)",
        "tab": lambda r: f"{r[0]}\t{r[1]}",
        "csv": lambda r: f"{r[0]},{r[2]}",
    }[fmt]
    want = [render(r) for r in pick]
    if total:
        want.append(f"TOTAL {sum(int(r[2]) for r in pick)}")
    w.note(target, fmt, src, out)
    shape = {
        "owner_job": "owner, a colon and a space, then the job name (like 'dana: api-backup')",
        "job_min": "the job name followed by its minutes in parentheses (like 'api-backup (12 min)')",
        "tab": "the job name, a tab, then the owner",
        "csv": "the job name, a comma, then the minutes",
    }[fmt]
    tot = (
        _spin(w, ", then a last line 'TOTAL <n>' with the sum of their minutes", capitalize=False)
        if total
        else ""
    )
    fields = {" ": "separated by spaces", "\t": "tab-separated", ":": "colon-separated"}[sep]
    wd, setup = _text_where(w, folder)
    task = _phrase(
        w,
        "{src} lists jobs ({fields}: job, owner, minutes, status). Write to {out} one line per {t} job, in file "
        "order: {shape}{tot}.",
        "Ticket: we need a report of the {t} jobs from {src} in {out}. Each line: {shape}; keep the file's "
        "order{tot}.",
        "can you pull the {t} jobs out of {src} into {out}? one line each - {shape}{tot}",
        "{src} ({fields}) -> {out}: {t} jobs only, {shape}, file order{tot}.",
        "Which jobs in {src} have the status {t}? The columns are job, owner, minutes, status ({fields}). Answer "
        "in {out}, one line a job in the order they appear: {shape}{tot}.",
        "For the morning stand-up I want a short list made from the job table {src}: every job whose status is "
        "{t}, one line each in the original order, formatted as {shape}{tot}. Save it as {out}; other jobs and "
        "any comment line are left out.",
        src=_ref_path(w, src, wd),
        out=_ref_path(w, out, wd),
        t=target,
        shape=shape,
        tot=tot,
        fields=fields,
    )
    check = "#!/bin/bash\n" + _holds(out, _body(want)) + "\n"
    s, o = _rel(src, wd), _rel(out, wd)
    fs = {" ": "", "\t": "-F'\\t' ", ":": "-F: "}[sep]
    cond = f'$4 == "{target}"'
    awk_out = {
        "owner_job": ('print $2 ": " $1', 'printf "%s: %s\\n", $2, $1'),
        "job_min": ('print $1 " (" $3 " min)"', 'printf "%s (%d min)\\n", $1, $3'),
        "tab": ('print $1 "\\t" $2', 'printf "%s\\t%s\\n", $1, $2'),
        "csv": ('print $1 "," $3', 'OFS = ","; print $1, $3'),
    }[fmt]
    how = w.pick(("awk", "awk", "awkv", "grep", "python", "loop"))
    end = ' END { print "TOTAL " t }' if total else ""
    acc = " t += $3;" if total else ""
    if how in ("awk", "awkv"):
        action = w.pick(awk_out)
        c = cond if how == "awk" else "$4 == want"
        v = f"-v want={target} " if how == "awkv" else ""
        cmd = f"awk {fs}{v}'!/^#/ && {c} {{{acc} {action} }}{end}' {s} > {o}"
    elif how == "grep":
        gs = {" ": " ", "\t": "$'\\t'", ":": ":"}[sep]
        pat = f"'{gs}{target}$'" if sep != "\t" else f"$'\\t{target}$'"
        cmd = f"grep -v '^#' {s} | grep {pat} | awk {fs}'{{{acc} {awk_out[0]} }}{end}' > {o}"
    elif how == "python":
        py_sep = {" ": "None", "\t": "'\\t'", ":": "':'"}[sep]
        py_fmt = {
            "owner_job": "f'{o}: {j}'",
            "job_min": "f'{j} ({m} min)'",
            "tab": "f'{j}\\t{o}'",
            "csv": "f'{j},{m}'",
        }[fmt]
        cmd = (
            f"python3 - <<'EOF'\nout, t = [], 0\nfor line in open({s}):\n"
            f"    if line.startswith('#') or not line.strip():\n        continue\n"
            f"    j, o, m, st = line.split({py_sep})\n    if st.strip() == '{target}':\n"
            f"        out.append({py_fmt}); t += int(m)\n"
            + ("out.append(f'TOTAL {t}')\n" if total else "")
            + f"open({o}, 'w').write(''.join(x + '\\n' for x in out))\nEOF"
        )
    else:
        ifs = {" ": "' '", "\t": "$'\\t'", ":": ":"}[sep]
        echo = {
            "owner_job": 'echo "$o: $j"',
            "job_min": 'echo "$j ($m min)"',
            "tab": 'printf \'%s\\t%s\\n\' "$j" "$o"',
            "csv": 'echo "$j,$m"',
        }[fmt]
        tl = "; t=$((t + m))" if total else ""
        cmd = (
            f't=0; while IFS={ifs} read -r j o m st; do [ "${{j#\\#}}" = "$j" ] || continue; '
            f'[ "$st" = {target} ] && {{ {echo}{tl}; }}; done < {s} > {o}'
        )
        if total:
            cmd += f'; echo "TOTAL $t" >> {o}'
    ref = [w.pick((f"head -n 5 {s}", f"cat {s}")), cmd, f"cat {o}"]
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if total else 2,
        files={src: _body(lines)},
        setup=setup,
        workdir=wd,
    )


@family(
    "text-fixed-width",
    "text",
    "convert a fixed-width column file to delimited fields, or delimited to aligned",
)
def fixed_width(w: World) -> Draft:
    cols = [("name", 12), (w.pick(("team", "city")), 10), (w.pick(("amount", "count", "hours")), 7)]
    n = w.randint(5, 9)
    rows = []
    for _ in range(n):
        rows.append(
            [
                w.pick(FIRST_NAMES) + w.pick(("", "", "_" + w.pick(("jr", "ops", "x")))),
                w.pick(TEAMS) if cols[1][0] == "team" else w.pick(CITIES),
                str(w.randint(1, 99999)),
            ]
        )
    to_delim = w.chance(0.65)
    delim = w.pick((",", ";", "|", "\t"))
    dname = {",": "commas", ";": "semicolons", "|": "pipes ('|')", "\t": "tabs"}[delim]

    def fixed(r: list[str]) -> str:
        return f"{r[0]:<12}{r[1]:<10}{r[2]:>7}"

    fixed_lines = [fixed(r) for r in rows]
    delim_lines = [delim.join(r) for r in rows]
    header = w.chance(0.4)
    hnames = [c for c, _ in cols]
    if header:
        delim_lines = [delim.join(hnames), *delim_lines]
    folder = _text_folder(w)
    stem = w.pick(("payroll", "ledger", "roster", "export", "mainframe"))
    if to_delim:
        src = f"{folder}/{w.filename(w.pick(('txt', 'dat', 'fw')), stem=stem)}"
        out = f"{folder}/{w.filename('csv' if delim == ',' else 'txt', stem=stem + '_fields')}"
        src_body, want = fixed_lines, delim_lines
    else:
        src = f"{folder}/{w.filename('csv' if delim == ',' else 'txt', stem=stem)}"
        out = f"{folder}/{w.filename(w.pick(('txt', 'dat')), stem=stem + '_fixed')}"
        src_body, want = delim_lines, fixed_lines
    w.note(src, out, delim)
    layout = _spin(
        w,
        "name in columns 1-12 (left-aligned), {c2} in 13-22 (left-aligned), {c3} in 23-29 (right-aligned), "
        "padded with spaces",
        capitalize=False,
        c2=cols[1][0],
        c3=cols[2][0],
    )
    hd = (
        _spin(w, ", {starting with|with first} the header line {h}", capitalize=False, h=delim.join(hnames))
        if header and to_delim
        else ""
    )
    if header and not to_delim:
        hd = _spin(w, " (its first line is a header, which the output leaves out)", capitalize=False)
    if to_delim:
        goal = _spin(
            w,
            "the same records with the fields separated by {d} and no padding{hd}",
            capitalize=False,
            d=dname,
            hd=hd,
        )
    else:
        goal = _spin(w, "the records in a fixed-width layout: {layout}", capitalize=False, layout=layout)
    src_desc = (
        _spin(w, "a fixed-width file ({layout})", capitalize=False, layout=layout)
        if to_delim
        else _spin(w, "delimited by {d}{hd}", capitalize=False, d=dname, hd=hd)
    )
    wd, setup = _text_where(w, folder)
    task = _phrase(
        w,
        "{src} is {desc}. Write {out} with {goal}.",
        "Ticket: reformat {src} ({desc}) into {out}: {goal}.",
        "hey, could you turn {src} into {out}? the input is {desc}; I need {goal}",
        "Reformat {src} -> {out}. Input: {desc}. Output: {goal}.",
        "How do I get {src} ({desc}) into the other format? Please produce {out} holding {goal}.",
        "The legacy tool reading {out} needs {goal}. Its data comes from {src}, which is {desc}. Create {out} "
        "from it; keep the records in their order and leave {src} as it is.",
        src=_ref_path(w, src, wd),
        out=_ref_path(w, out, wd),
        desc=src_desc,
        goal=goal,
    )
    if to_delim:
        check = "#!/bin/bash\n" + _holds(out, _body(want)) + "\n"
    else:  # trailing spaces do not matter in a fixed-width file
        check = (
            f"#!/bin/bash\n[ -f {quote(out)} ] || exit 1\n"
            f"[ \"$(sed 's/[[:space:]]*$//' {quote(out)})\" = {quote(chr(10).join(x.rstrip() for x in want))} ] "
            "|| exit 1\n"
        )
    s, o = _rel(src, wd), _rel(out, wd)
    qd = quote(delim) if delim != "\t" else "'\\t'"
    how = w.pick(("awk", "awk", "sed", "python", "loop", "cut"))
    if to_delim:
        hline = f"echo {quote(delim.join(hnames))}; " if header else ""
        if how == "awk":
            body = (
                f"awk -v OFS={qd} '{{ a = substr($0, 1, 12); b = substr($0, 13, 10); c = substr($0, 23, 7); "
                'gsub(/ /, "", a); gsub(/ /, "", b); gsub(/ /, "", c); print a, b, c }\' ' + s
            )
        elif how == "sed":
            d = delim
            body = f"sed -E 's/^(.{{12}})(.{{10}})(.{{7}})$/\\1{d}\\2{d}\\3/; s/ +//g' {s}"
            if delim == "\t":
                body = f"sed -E 's/^(.{{12}})(.{{10}})(.{{7}})$/\\1\\t\\2\\t\\3/; s/ +//g' {s}"
        elif how == "python":
            body = (
                f"python3 - > {o} <<'EOF'\n"
                + (f"print({delim.join(hnames)!r})\n" if header else "")
                + f"for l in open({s}):\n    l = l.rstrip('\\n')\n"
                f"    print({delim!r}.join([l[:12].strip(), l[12:22].strip(), l[22:29].strip()]))\nEOF"
            )
        elif how == "loop":
            body = (
                f"while IFS= read -r l; do a=${{l:0:12}}; b=${{l:12:10}}; c=${{l:22:7}}; "
                f"printf '%s{delim if delim != chr(9) else chr(92) + 't'}%s{delim if delim != chr(9) else chr(92) + 't'}%s\\n' "
                f"${{a// /}} ${{b// /}} ${{c// /}}; done < {s}"
            )
        else:
            body = (
                f"paste -d {qd} <(cut -c1-12 {s} | tr -d ' ') <(cut -c13-22 {s} | tr -d ' ') "
                f"<(cut -c23-29 {s} | tr -d ' ')"
            )
        if how == "python":
            cmd = body
        elif header:
            cmd = f"{{ {hline}{body}; }} > {o}"
        else:
            cmd = f"{body} > {o}"
    else:
        skip = "NR > 1 " if header else ""
        if how in ("awk", "cut"):
            cmd = f"awk -F{qd} '{skip}{{ printf \"%-12s%-10s%7s\\n\", $1, $2, $3 }}' {s} > {o}"
        elif how == "sed":
            cmd = (
                f"{'tail -n +2 ' + s + ' | ' if header else ''}while IFS={qd if delim != chr(9) else chr(36) + qd} "
                f'read -r a b c; do printf \'%-12s%-10s%7s\\n\' "$a" "$b" "$c"; done '
                f"{'' if header else '< ' + s + ' '}> {o}"
            )
        elif how == "python":
            cmd = (
                f"python3 - <<'EOF'\nlines = open({s}).read().splitlines(){'[1:]' if header else ''}\n"
                f"with open({o}, 'w') as f:\n    for l in lines:\n        a, b, c = l.split({delim!r})\n"
                f"        f.write(f'{{a:<12}}{{b:<10}}{{c:>7}}\\n')\nEOF"
            )
        else:
            cmd = (
                f"{'sed 1d ' + s + ' | ' if header else ''}awk -F{qd} -v OFS='' "
                f'\'{{ $1 = sprintf("%-12s", $1); $2 = sprintf("%-10s", $2); $3 = sprintf("%7s", $3); print }}\''
                f"{'' if header else ' ' + s} > {o}"
            )
    ref = [w.pick((f"head -n 3 {s}", f"cat -A {s} | head -n 3")), cmd, f"cat {o}"]
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3,
        files={src: _body(src_body)},
        setup=setup,
        workdir=wd,
    )


@family(
    "text-number-lines",
    "text",
    "number the lines of a file (all, or only the non-blank ones) in a given format",
)
def number_lines(w: World) -> Draft:
    lines = []
    for _ in range(w.randint(6, 14)):
        lines.append("" if w.chance(0.2) else " ".join(w.pick(WORDS) for _ in range(w.randint(1, 6))))
    if all(x for x in lines):
        lines.insert(w.randint(1, len(lines) - 1), "")
    lines = [x for i, x in enumerate(lines) if x or (i and lines[i - 1])]  # no two blank lines in a row
    if not lines[0]:
        lines[0] = w.pick(WORDS)
    sep = w.pick((": ", "\t", ". ", ") ", " "))
    pad = w.pick((0, 0, 3, 4))
    blanks = w.pick(("all", "skip", "drop"))
    want, n = [], 0
    for x in lines:
        if not x and blanks != "all":
            if blanks == "skip":
                want.append("")
            continue
        n += 1
        want.append(f"{n:0{pad}d}{sep}{x}" if pad else f"{n}{sep}{x}")
    folder = _text_folder(w)
    src = f"{folder}/{w.filename(w.pick(('txt', 'md')), stem=w.pick(('notes', 'draft', 'script', 'poem', 'todo')))}"
    in_place = w.chance(0.25)
    out = (
        src
        if in_place
        else f"{w.pick((folder, HOME))}/{w.filename('txt', stem=w.pick(('numbered', 'listing')))}"
    )
    w.note(src, out, pad)
    sep_en = {
        ": ": "a colon and a space",
        "\t": "a tab",
        ". ": "a dot and a space",
        ") ": "')' and a space",
        " ": "one space",
    }[sep]
    num_en = (
        _spin(w, "zero-padded to {p} digits (like {e})", capitalize=False, p=pad, e=f"{1:0{pad}d}")
        if pad
        else ""
    )
    shape = _spin(
        w,
        "the line number{pn}, then {s}, then the line",
        capitalize=False,
        s=sep_en,
        pn=(" " + num_en) if pad else "",
    )
    blank_en = {
        "all": _spin(w, "blank lines are numbered too", capitalize=False),
        "skip": _spin(w, "blank lines stay blank and do not get a number", capitalize=False),
        "drop": _spin(w, "blank lines are left out and not counted", capitalize=False),
    }[blanks]
    dest = _spin(w, "{in place|in the file itself}", capitalize=False) if in_place else ""
    wd, setup = _text_where(w, folder)
    o_ref = _ref_path(w, out, wd)
    into = dest or _spin(w, "into {o}", capitalize=False, o=o_ref)
    task = _phrase(
        w,
        "Number the lines of {src} {into}: each line starts with {shape}; {blank}.",
        "Ticket: reviewers want line numbers in {src}. Write it {into} with {shape} on every line ({blank}).",
        "could you add line numbers to {src} {into}? format: {shape}. {blank_c}.",
        "{src} -> numbered {into}; {shape}; {blank}.",
        "How can I refer to lines of {src} in a discussion? Give it numbers {into}: {shape}, and {blank}.",
        "I print {src} for a code review and need each line prefixed with its number. Produce the numbered "
        "version {into}: {shape}. Note that {blank}; the text of the lines stays unchanged.",
        src=_ref_path(w, src, wd),
        into=into,
        shape=shape,
        blank=blank_en,
        blank_c=_spin(w, blank_en),
    )
    check = "#!/bin/bash\n" + _holds(out, _body(want)) + "\n"
    s = _rel(src, wd)
    o = _rel(out, wd)
    target = "/tmp/numbered.txt" if in_place else o
    sq = {": ": ": ", "\t": "\\t", ". ": ". ", ") ": ") ", " ": " "}[sep]
    fmt = f"%0{pad}d" if pad else "%d"
    cond = {"all": "", "skip": "NF == 0 { print; next } ", "drop": "NF == 0 { next } "}[blanks]
    how = w.pick(("awk", "awk", "nl", "python", "loop", "sed"))
    if how == "nl" and not pad and blanks != "drop":
        body = f"nl -b{'a' if blanks == 'all' else 't'} -w1 -s {quote(sep) if sep != chr(9) else chr(36) + quote(sep).replace(chr(9), chr(92) + 't')} {s}"
        if blanks == "skip":
            body += " | sed 's/^[[:space:]]*$//'"
        cmd = f"{body} > {target}"
    elif how == "sed" and blanks == "all" and not pad:
        cmd = f"sed = {s} | sed 'N; s/\\n/{sq}/' > {target}"
    elif how == "python":
        keep = {"all": "True", "skip": "line.strip()", "drop": "line.strip()"}[blanks]
        other = "out.append('')" if blanks == "skip" else "pass"
        cmd = (
            f"python3 - <<'EOF'\nout, n = [], 0\nfor line in open({s}).read().splitlines():\n"
            f"    if {keep}:\n        n += 1\n        out.append(f'{{n:{'0' + str(pad) if pad else ''}}}{sep.replace(chr(9), chr(92) + 't')}{{line}}')\n"
            f"    else:\n        {other}\n"
            f"open({('/tmp/numbered.txt' if in_place else out)!r}, 'w').write(''.join(x + '\\n' for x in out))\nEOF"
        )
    elif how == "loop":
        skipl = {
            "all": "",
            "skip": '[ -z "$l" ] && { echo; continue; }; ',
            "drop": '[ -z "$l" ] && continue; ',
        }[blanks]
        cmd = f'n=0; while IFS= read -r l; do {skipl}n=$((n + 1)); printf \'{fmt}{sq}%s\\n\' "$n" "$l"; done < {s} > {target}'
    else:
        cmd = f"awk '{cond}{{ printf \"{fmt}{sq}%s\\n\", ++n, $0 }}' {s} > {target}"
    ref = [w.pick((f"cat -A {s}", f"wc -l {s}", f"cat {s}")), cmd]
    if in_place:
        ref.append(
            w.pick((f"mv /tmp/numbered.txt {s}", f"cat /tmp/numbered.txt > {s}", f"cp /tmp/numbered.txt {s}"))
        )
    ref.append(f"cat {o}")
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2,
        files={src: _body(lines)},
        setup=setup,
        workdir=wd,
    )


def _greedy_wrap(words: list[str], width: int) -> list[str]:
    out, cur = [], ""
    for word in words:
        if cur and len(cur) + 1 + len(word) > width:
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    return [*out, cur] if cur else out


@family("text-wrap-lines", "text", "wrap long lines of a text file at a width without splitting words")
def wrap_lines(w: World) -> Draft:
    width = w.pick((40, 50, 60, 64, 72))
    paras = [[w.pick(WORDS) for _ in range(w.randint(14, 40))] for _ in range(w.randint(1, 3))]
    src_lines: list[str] = []
    for i, p in enumerate(paras):
        if i:
            src_lines.append("")
        src_lines.append(" ".join(p))
    folder = _text_folder(w)
    src = f"{folder}/{w.filename(w.pick(('txt', 'md')), stem=w.pick(('README', 'notes', 'announcement', 'motd', 'letter')))}"
    in_place = w.chance(0.3)
    out = (
        src
        if in_place
        else f"{w.pick((folder, HOME))}/{w.filename('txt', stem=w.pick(('wrapped', 'formatted')))}"
    )
    w.note(src, out, width)
    wd, setup = _text_where(w, folder)
    into = (
        _spin(w, "{in place|in the file itself}", capitalize=False)
        if in_place
        else _spin(w, "into {o}", capitalize=False, o=_ref_path(w, out, wd))
    )
    task = _phrase(
        w,
        "Wrap the text of {src} at {n} characters {into}: no line longer than {n}, no word split, paragraphs "
        "still separated by a blank line.",
        "Ticket: {src} has very long lines. Rewrap it {into} so that every line is at most {n} characters, "
        "breaking only between words and keeping the blank lines between paragraphs.",
        "can you wrap {src} to {n} columns {into}? don't break words, keep the paragraphs",
        "{src}: wrap at {n} chars, words intact, paragraphs kept; {into}.",
        "Why does {src} scroll sideways in the terminal? Its paragraphs are single long lines. Fix that {into}: "
        "lines of at most {n} characters, words whole, the same words in the same order.",
        "The mail template {src} must fit a {n}-column window. Reflow it {into}: break lines between words so no "
        "line exceeds {n} characters, keep every word in order, and keep one blank line between paragraphs.",
        src=_ref_path(w, src, wd),
        n=width,
        into=into,
    )
    greedy = [len(_greedy_wrap(p, width)) for p in paras]
    body = (
        "paras, cur = [], []\n"
        f"for line in open({out!r}).read().splitlines():\n"
        "    line = line.rstrip()\n"
        "    if not line:\n"
        "        if cur: paras.append(cur); cur = []\n"
        "        continue\n"
        "    cur.append(line)\n"
        "if cur: paras.append(cur)\n"
        "ok = len(paras) == len(WANT['words'])\n"
        "for p, words, g in zip(paras, WANT['words'], WANT['greedy']):\n"
        "    ok = ok and [x for l in p for x in l.split()] == words and all(len(l) <= WANT['n'] for l in p)\n"
        "    ok = ok and len(p) <= g + 1 + g // 4\n"
        "sys.exit(0 if ok else 1)"
    )
    payload = {"words": paras, "greedy": greedy, "n": width}
    check = f"python3 - <<'PYCHECK' || exit 1\nimport json, sys\nWANT = json.loads(r'''{json.dumps(payload)}''')\n{body}\nPYCHECK\n"
    s, o = _rel(src, wd), _rel(out, wd)
    target = "/tmp/wrapped.txt" if in_place else o
    how = w.pick(("fold", "fold", "fmt", "fmtu", "python", "awk"))
    if how == "fold":
        cmd = w.pick(
            (f"fold -s -w {width} {s} > {target}", f"fold -sw {width} {s} | sed 's/ *$//' > {target}")
        )
    elif how == "fmt":
        cmd = f"fmt -w {width} {s} > {target}"
    elif how == "fmtu":
        cmd = f"fmt -u -w {width} {s} > {target}"
    elif how == "python":
        cmd = (
            f"python3 - <<'EOF'\nimport textwrap\nparas = open({s}).read().split('\\n\\n')\n"
            f"out = '\\n\\n'.join(textwrap.fill(p, {width}) for p in paras)\n"
            f"open({('/tmp/wrapped.txt' if in_place else out)!r}, 'w').write(out.rstrip('\\n') + '\\n')\nEOF"
        )
    else:
        cmd = (
            f"awk -v W={width} 'NF == 0 {{ print; next }} {{ line = $1; for (i = 2; i <= NF; i++) "
            f'{{ if (length(line) + 1 + length($i) > W) {{ print line; line = $i }} else line = line " " $i }} '
            f"print line }}' {s} > {target}"
        )
    ref = [w.pick((f"wc -L {s}", f"head -c 300 {s}", f"awk '{{ print length }}' {s}")), cmd]
    if in_place:
        ref.append(w.pick((f"mv /tmp/wrapped.txt {s}", f"cat /tmp/wrapped.txt > {s}")))
    ref.append(w.pick((f"cat {o}", f"wc -L {o}")))
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=2,
        files={src: _body(src_lines)},
        setup=setup,
        workdir=wd,
    )
