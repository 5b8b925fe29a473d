"""Scripting: loops over files and lists, small executable scripts with arguments and exit codes, shell functions,
and repairing a broken script.

Checks run what the operator wrote, as the operator, on inputs drawn here (names with spaces included where the
task says they must work), and compare outputs and exit codes with values computed here. How the script is
written (``if``/``case``, ``[[``/``[``, ``printf``/``echo``) is the operator's business; only its behaviour counts.
"""

from __future__ import annotations

import hashlib
import posixpath

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import FIRST_NAMES, FRUITS, HOME, PROJECTS, WORDS, World, quote

# runs a command as the operator with a clean environment, in a fresh scratch folder the operator owns
_RUN_AS = (
    'T=$(mktemp -d /tmp/chk.XXXXXX); chown operator:operator "$T"; cd "$T"\n'
    "run() { runuser -u operator -- env -i HOME=/home/operator USER=operator PATH=/usr/local/bin:/usr/bin:/bin "
    'LANG=C.UTF-8 "$@"; }\n'
    "trim() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^$/d'; }\n"
)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _write_script(path: str, body: list[str], w: World) -> str:
    """One reference turn writing ``body`` to ``path`` (printf of quoted lines, the way one types it)."""
    if w.chance(0.5):
        return f"printf '%s\\n' {' '.join(quote(x) for x in body)} > {quote(path)}"
    return f"echo {quote(chr(10).join(body))} > {quote(path)}"


def _scratch(w: World) -> str:
    return f"{HOME}/{w.pick(('bin', 'scripts', 'tools', 'bin'))}"


# ---- loop rename --------------------------------------------------------------------------------------------------
def _token(w: World) -> str:
    return f"{w.pick(WORDS)} {w.token(6)}\n"


@family(
    "scripting-loop-rename",
    "scripting",
    "rename many files with a loop (prefix, suffix, extension, case ...)",
)
def loop_rename(w: World) -> Draft:
    folder = f"{HOME}/{w.pick(('photos', 'scans', 'docs', 'exports', 'inbox', 'reports', w.dirname()))}"
    mode = w.pick(("ext", "ext", "prefix", "suffix", "spaces", "lower", "number"))
    ext = w.pick(("txt", "jpg", "png", "csv", "log", "md", "pdf", "json"))
    other = w.pick([e for e in ("txt", "jpg", "png", "csv", "dat", "pdf", "xml") if e != ext])
    n = w.randint(3, 8)

    def stem() -> str:
        return w.pick(
            (
                w.pick(WORDS),
                f"{w.pick(WORDS)}_{w.randint(1, 99)}",
                f"{w.pick(FRUITS)}-{w.randint(1, 9)}",
                f"{w.pick(PROJECTS)}_{w.pick(('notes', 'draft', 'scan', 'report'))}",
            )
        )

    spaced = mode != "lower" and w.chance(0.3)
    targets: list[str] = []
    decoys: list[str] = []
    if mode == "lower":
        lowered: set[str] = set()
        for _ in range(n):
            for _try in range(50):  # lower-case names must not collide with each other
                cand = (
                    w.pick(
                        (
                            stem().upper(),
                            stem().capitalize(),
                            f"IMG_{w.randint(1, 9999):04d}",
                            f"{stem()}_{w.pick(('Final', 'V2', 'Q3'))}",
                        )
                    )
                    + "."
                    + w.pick((ext, ext.upper()))
                )
                if cand.lower() not in lowered:
                    break
            targets.append(w.unique(cand))
            lowered.add(cand.lower())
        for _ in range(w.randint(1, 3)):  # already lower case: nothing to do for these
            decoys.append(w.unique(lambda: f"{stem()}.{ext}"))
            if decoys[-1] in lowered:
                decoys.pop()
    elif mode == "spaces":
        for _ in range(n):
            targets.append(
                w.unique(
                    lambda: (
                        f"{w.pick(WORDS)} {w.pick(WORDS)}{w.pick(('', ' ' + str(w.randint(1, 9))))}"
                        f".{w.pick((ext, other))}"
                    )
                )
            )
        decoys = [w.unique(lambda: f"{stem()}.{w.pick((ext, other))}") for _ in range(w.randint(1, 3))]
    else:
        for i in range(n):
            if spaced and i == 0:
                targets.append(w.unique(lambda: f"{w.pick(WORDS)} {w.pick(WORDS)}.{ext}"))
            else:
                targets.append(w.unique(lambda: f"{stem()}.{ext}"))
        decoys = [w.unique(lambda: f"{stem()}.{other}") for _ in range(w.randint(1, 3))]
        if w.chance(0.4):
            decoys.append(w.unique(lambda: f"{stem()}.{ext}.bak"))
    prefix = w.pick(
        (f"{w.pick(PROJECTS)}_", "old_", "archived-", f"{w.randint(2021, 2025)}-", "client_", "v1_")
    )
    suffix = w.pick(("_v2", "_final", "-backup", f"_{w.randint(2021, 2025)}", "_draft", "-copy"))
    new_ext = w.pick(
        [e for e in ("md", "txt", "bak", "old", "csv", "jpeg", "text", "log") if e not in (ext, other)]
    )
    seq = w.pick(("photo", "page", "scan", "item", "file", "img", "doc"))
    width = w.pick((2, 3, 3))
    if mode == "number":
        seq = w.unique(lambda: f"{seq}{w.pick(('', '_', '-'))}")
    order = sorted(targets)
    newname: dict[str, str] = {}
    for i, t in enumerate(order, 1):
        base = t[: -len(ext) - 1] if t.endswith("." + ext) else t
        newname[t] = {
            "ext": f"{base}.{new_ext}",
            "prefix": f"{prefix}{t}",
            "suffix": f"{base}{suffix}.{ext}",
            "spaces": t.replace(" ", "_"),
            "lower": t.lower(),
            "number": f"{seq}{i:0{width}d}.{ext}",
        }[mode]
    content = {name: _token(w) for name in targets + decoys}
    files = {f"{folder}/{name}": c for name, c in content.items()}
    sub = None
    if w.chance(0.3):  # a subfolder whose files must stay as they are
        sub = f"{folder}/{w.pick(('keep', 'originals', 'done', 'archive'))}"
        sub_file = f"{sub}/{targets[0]}"
        files[sub_file] = "untouched\n"
    w.note(ext, other, prefix, suffix, new_ext, seq, width)
    where = w.path_ref(folder)
    sub_en = (
        " " + w.spin("(only the files directly in it, not in its subfolder)", capitalize=False) if sub else ""
    )
    what = {
        "ext": "{change|switch} the extension of every .{ext} file in {where}{sub_en} to .{new_ext}",
        "prefix": "add the prefix {prefix} to the name of every .{ext} file in {where}{sub_en}",
        "suffix": "{add|append} {suffix} to the name of every .{ext} file in {where}{sub_en}, just before the "
        "extension (so NAME.{ext} becomes NAME{suffix}.{ext})",
        "spaces": "replace every space in the file names in {where}{sub_en} with an underscore",
        "lower": "rename every file in {where}{sub_en} whose name has upper-case letters to the same name in "
        "lower case",
        "number": "rename the .{ext} files in {where}{sub_en} to {seq}"
        + "0" * (width - 1)
        + "1.{ext}, {seq}"
        + "0" * (width - 1)
        + "2.{ext} and so on ({width}-digit numbers), numbering them in "
        "alphabetical order of their current names",
    }[mode]
    keep = w.spin(
        "{other files stay as they are|leave the other files alone|do not touch the other files}",
        capitalize=False,
    )
    task = w.phrase(
        "{Please |}" + what + "; " + keep + ".",
        "There is a folder of files to {tidy up|rename}: "
        + what
        + ". {Contents must not change|Keep the contents "
        "as they are}; " + keep + ".",
        "Ticket: bulk rename needed. In short: " + what + ". " + keep.capitalize() + ".",
        "Can you write a loop to " + what + "? " + keep.capitalize() + ".",
        "Doing this by hand would take all afternoon, so script it: " + what + ". " + keep.capitalize() + ".",
        "Rename job - " + what + ". " + keep.capitalize() + ".",
        "The import tool rejects the current file names. Fix them: " + what + "; " + keep + ".",
        ext=ext,
        new_ext=new_ext,
        where=where,
        sub_en=sub_en,
        prefix=prefix,
        suffix=suffix,
        seq=seq,
        width=width,
    )
    q = quote
    lines = ["#!/bin/bash", f"cd {q(folder)} || exit 1"]
    for old, new in newname.items():
        lines.append(f"[ \"$(md5sum < {q(new)} | cut -d' ' -f1)\" = {_md5(content[old])} ] || exit 1")
        if new != old:
            lines.append(f"[ ! -e {q(old)} ] || exit 1")
    for d in decoys:
        lines.append(f"[ \"$(md5sum < {q(d)} | cut -d' ' -f1)\" = {_md5(content[d])} ] || exit 1")
    lines.append(f'[ "$(find . -maxdepth 1 -type f | wc -l)" = {len(targets) + len(decoys)} ] || exit 1')
    if sub:
        lines.append(f'[ "$(ls -A {q(sub)})" = {q(targets[0])} ] || exit 1')
    check = "\n".join(lines) + "\n"
    loop = {
        "ext": w.pick(
            (
                f'for f in *.{ext}; do mv -- "$f" "${{f%.{ext}}}.{new_ext}"; done',
                f'for f in *.{ext}; do mv -- "$f" "$(basename "$f" .{ext}).{new_ext}"; done',
            )
        ),
        "prefix": f'for f in *.{ext}; do mv -- "$f" {q(prefix)}"$f"; done',
        "suffix": f'for f in *.{ext}; do mv -- "$f" "${{f%.{ext}}}{suffix}.{ext}"; done',
        "spaces": w.pick(
            (
                'for f in *\\ *; do mv -- "$f" "${f// /_}"; done',
                'for f in *" "*; do mv -- "$f" "$(echo "$f" | tr \' \' _)"; done',
            )
        ),
        "lower": w.pick(
            (
                'for f in *[A-Z]*; do mv -- "$f" "${f,,}"; done',
                'for f in *[[:upper:]]*; do mv -- "$f" "$(echo "$f" | tr \'[:upper:]\' \'[:lower:]\')"; done',
            )
        ),
        "number": f'i=1; for f in *.{ext}; do mv -- "$f" "$(printf \'{seq}%0{width}d.{ext}\' "$i")"; i=$((i + 1)); '
        "done",
    }[mode]
    new_sh = {  # the new name of "$f" in bash
        "ext": f'"${{f%.{ext}}}.{new_ext}"',
        "prefix": f'{q(prefix)}"$f"',
        "suffix": f'"${{f%.{ext}}}{suffix}.{ext}"',
        "spaces": '"${f// /_}"',
        "lower": '"${f,,}"',
    }
    pattern = {"spaces": "* *", "lower": "*[A-Z]*"}.get(mode, f"*.{ext}")
    style = w.pick(("for", "for", "find-while", "ls-while", "python"))
    if style == "find-while" and mode != "number":  # NUL-separated names from find, read one by one
        loop = (
            f"find . -maxdepth 1 -type f -name {q(pattern)} -print0 | while IFS= read -r -d '' f; do "
            f'f="${{f#./}}"; mv -- "$f" {new_sh[mode]}; done'
        )
    elif style == "ls-while" and mode != "number":  # the folder listed, filtered by grep, read line by line
        regex = {"spaces": " ", "lower": "[A-Z]"}.get(mode, f"\\.{ext}$")
        loop = f'ls | grep {q(regex)} | while IFS= read -r f; do mv -- "$f" {new_sh[mode]}; done'
    elif style == "python":  # a python for loop over the sorted listing
        test = {"spaces": "' ' in f", "lower": "f != f.lower()"}.get(mode, f"f.endswith('.{ext}')")
        rename = {
            "ext": f"f[: -{len(ext) + 1}] + '.{new_ext}'",
            "prefix": f"{prefix!r} + f",
            "suffix": f"f[: -{len(ext) + 1}] + '{suffix}.{ext}'",
            "spaces": "f.replace(' ', '_')",
            "lower": "f.lower()",
            "number": f"f'{seq}{{i:0{width}d}}.{ext}'",
        }[mode]
        count = "        i += 1\n" if mode == "number" else ""
        loop = "python3 -c " + q(
            "import os\ni = 0\nfor f in sorted(os.listdir('.')):\n"
            f"    if os.path.isfile(f) and {test}:\n{count}        os.rename(f, {rename})\n"
        )
    if mode in ("ext", "prefix", "suffix") and not sub and w.chance(0.3):
        inner = {
            "ext": f'mv "$1" "${{1%.{ext}}}.{new_ext}"',
            "prefix": f'mv "$1" "$(dirname "$1")/{prefix}$(basename "$1")"',
            "suffix": f'mv "$1" "${{1%.{ext}}}{suffix}.{ext}"',
        }[mode]
        ref = [
            f"find {q(folder)} -maxdepth 1 -type f -name '*.{ext}' -exec sh -c {q(inner)} _ {{}} \\;",
            f"ls {q(folder)}",
        ]
    else:
        ref = [f"cd {q(folder)}", "ls", loop, "ls"]
    return Draft(
        task=task, check=check, reference=ref, difficulty=4 if mode in ("lower", "number") else 3, files=files
    )


# ---- a script with an argument ------------------------------------------------------------------------------------
def _arg_behaviour(
    w: World,
) -> tuple[str, str, list[str], list[tuple[list[str], str | None]], dict[str, str], list[str]]:
    """(name, English, script body, [(args, expected stdout; None: the first argument, as many lines as the
    second says)], scratch files {name: content}, example args)."""
    kind = w.pick(
        (
            "upper",
            "reverse",
            "lines",
            "parity",
            "sum",
            "ext",
            "square",
            "repeat",
            "stem",
            "words",
            "length",
            "initials",
        )
    )
    words = lambda: w.pick(WORDS)  # noqa: E731
    if kind == "upper":
        tests = [[words()], [f"{words()} {words().capitalize()} {w.randint(1, 99)}"]]
        return (
            w.pick(("shout", "upcase", "to_upper")),
            "prints its first argument converted to upper case",
            ["#!/bin/bash", 'echo "${1^^}"'],
            [(a, a[0].upper()) for a in tests],
            {},
            tests[0],
        )
    if kind == "reverse":
        tests = [[words()], [f"{words()} {words()}"]]
        return (
            w.pick(("reverse", "backwards", "mirror")),
            "prints its first argument with the characters in reverse order",
            ["#!/bin/bash", 'echo "$1" | rev'],
            [(a, a[0][::-1]) for a in tests],
            {},
            tests[0],
        )
    if kind in ("lines", "words"):
        texts = {
            f"{words()}.txt": "".join(
                f"{' '.join(words() for _ in range(w.randint(1, 4)))}\n" for _ in range(w.randint(2, 9))
            ),
            f"{words()} {words()}.log": "".join(f"{words()} {words()}\n" for _ in range(w.randint(1, 6))),
        }
        count = (lambda t: str(t.count("\n"))) if kind == "lines" else (lambda t: str(len(t.split())))
        flag = "-l" if kind == "lines" else "-w"
        return (
            w.pick(("countlines", "nlines", "linecount"))
            if kind == "lines"
            else w.pick(("countwords", "nwords", "wordcount")),
            f"prints the number of {'lines' if kind == 'lines' else 'words'} in the file named by its first "
            "argument ({just the number|the number only}; file names may contain spaces)",
            ["#!/bin/bash", f'wc {flag} < "$1"'],
            [([k], count(v)) for k, v in texts.items()],
            texts,
            ["/etc/hostname"],
        )
    if kind == "parity":
        nums = w.sample(range(0, 500), 3)
        return (
            w.pick(("parity", "evenodd", "oddeven")),
            "prints even if its first argument (an integer) is even and odd otherwise",
            ["#!/bin/bash", "if (( $1 % 2 == 0 )); then echo even; else echo odd; fi"],
            [([str(x)], "even" if x % 2 == 0 else "odd") for x in nums],
            {},
            [str(nums[0])],
        )
    if kind == "sum":
        pairs = [(w.randint(0, 999), w.randint(0, 999)) for _ in range(2)] + [
            (w.randint(-50, -1), w.randint(1, 40))
        ]
        return (
            w.pick(("add", "addnums", "plus")),
            "prints the sum of its two integer arguments",
            ["#!/bin/bash", "echo $(( $1 + $2 ))"],
            [([str(a), str(b)], str(a + b)) for a, b in pairs],
            {},
            [str(pairs[0][0]), str(pairs[0][1])],
        )
    if kind == "square":
        nums = w.sample(range(0, 300), 2)
        return (
            w.pick(("square", "sq", "squared")),
            "prints the square of its integer argument",
            ["#!/bin/bash", "echo $(( $1 * $1 ))"],
            [([str(x)], str(x * x)) for x in nums],
            {},
            [str(nums[0])],
        )
    if kind == "ext":
        names = [
            f"{words()}.{w.pick(('txt', 'csv', 'py'))}",
            f"{words()}.tar.gz",
            f"/{words()}/{words()}.{w.pick(('conf', 'log'))}",
        ]
        return (
            w.pick(("extof", "getext", "suffix")),
            "prints the extension of the file name given as its first "
            "argument: the text after the last dot, without the dot",
            ["#!/bin/bash", 'echo "${1##*.}"'],
            [([x], x.rsplit(".", 1)[1]) for x in names],
            {},
            [names[0]],
        )
    if kind == "stem":
        names = [f"{words()}.{w.pick(('txt', 'csv', 'md'))}", f"/{words()}/{words()}_{w.randint(1, 9)}.log"]
        return (
            w.pick(("stem", "basestem", "noext")),
            "prints the file name given as its first argument without "
            "its folder and without its last extension (so /a/b/report.txt gives report)",
            ["#!/bin/bash", 'b=$(basename "$1")', 'echo "${b%.*}"'],
            [([x], posixpath.basename(x).rsplit(".", 1)[0]) for x in names],
            {},
            [names[0]],
        )
    if kind == "repeat":
        word, times = words(), w.randint(2, 5)
        return (
            w.pick(("repeat", "times", "echon")),
            "prints its first argument N times, one per line, where N is its second argument",
            ["#!/bin/bash", 'for ((i = 0; i < $2; i++)); do echo "$1"; done'],
            [([word, str(times)], "\n".join([word] * times)), ([f"{words()} {words()}", "1"], None)],
            {},
            [word, str(times)],
        )
    if kind == "length":
        tests = [[words()], [f"{words()} {words()}"]]
        return (
            w.pick(("strlen", "length", "nchars")),
            "prints the number of characters in its first argument",
            ["#!/bin/bash", 'echo "${#1}"'],
            [(a, str(len(a[0]))) for a in tests],
            {},
            tests[0],
        )
    names = [
        f"{w.pick(FIRST_NAMES).capitalize()} {w.pick(FIRST_NAMES).capitalize()}",
        f"{w.pick(FIRST_NAMES)} {w.pick(WORDS)} {w.pick(FIRST_NAMES)}",
    ]
    return (
        w.pick(("initials", "abbrev", "monogram")),
        "prints the upper-case initials of the words of its first "
        "argument, with nothing between them (so 'ada king lovelace' gives AKL)",
        ["#!/bin/bash", 'for w in $1; do printf "%s" "${w:0:1}"; done | tr "[:lower:]" "[:upper:]"', "echo"],
        [([x], "".join(p[0] for p in x.split()).upper()) for x in names],
        {},
        [names[0]],
    )


@family(
    "scripting-arg-script", "scripting", "write an executable script that takes arguments and prints a result"
)
def arg_script(w: World) -> Draft:
    name, does, body, behaviour, scratch, example = _arg_behaviour(w)
    tests = [(a, e if e is not None else "\n".join([a[0]] * int(a[1]))) for a, e in behaviour]
    folder = _scratch(w)
    path = f"{folder}/{name}{w.pick(('', '.sh', '.sh'))}"
    w.note(name)
    task = w.phrase(
        "Write an executable script {path} that " + does + ".",
        "We need a {small |}command-line {tool|helper}: {path}, which "
        + does
        + ". Make sure it is executable.",
        "Ticket: {create|add} the script {path}. {Spec|Behaviour}: it "
        + does
        + ". It must be runnable directly "
        "(executable, with a shebang line).",
        "Can you {create|write} {path}? It should be an executable {bash|shell} script that " + does + ".",
        "I keep doing this by hand and want a reusable command instead. Put an executable script at {path} that "
        + does
        + ".",
        "{path}: new executable script; it " + does + ".",
        path=w.path_ref(path, "file"),
    )
    q = quote
    lines = ["#!/bin/bash", _RUN_AS, f"[ -x {q(path)} ] || exit 1"]
    for fname, text in scratch.items():
        lines.append(f"printf %s {q(text)} > {q(fname)}")
    if scratch:
        lines.append('chown operator:operator "$T"/*')
    for args, want in tests:
        lines.append(
            f'[ "$(run {q(path)} {" ".join(q(a) for a in args)} 2>/dev/null | trim)" = {q(want)} ] || exit 1'
        )
    check = "\n".join(lines) + "\n"
    ref = [
        f"mkdir -p {q(folder)}",
        _write_script(path, body, w),
        w.pick((f"chmod +x {q(path)}", f"chmod 755 {q(path)}", f"chmod u+x {q(path)}")),
        f"{q(path)} {' '.join(q(a) for a in example)}",
    ]
    return Draft(task=task, check=check, reference=ref, difficulty=2)


# ---- usage message and exit codes ---------------------------------------------------------------------------------
@family(
    "scripting-usage-exit-codes", "scripting", "a script that checks its arguments: usage message, exit codes"
)
def usage_exit_codes(w: World) -> Draft:
    usage_rc = w.pick((1, 2, 64))
    missing_rc = w.pick([c for c in (3, 4, 66, 1, 2) if c != usage_rc])
    action = w.pick(("lines", "first", "bytes", "words", "last"))
    name = w.pick(("inspect", "fileinfo", "peek", "summarize", "stat1", "check_file"))
    folder = _scratch(w)
    path = f"{folder}/{name}{w.pick(('', '.sh'))}"
    w.note(usage_rc, missing_rc, name)
    does = {
        "lines": "prints the number of lines in FILE (just the number)",
        "first": "prints the first line of FILE",
        "bytes": "prints the size of FILE in bytes (just the number)",
        "words": "prints the number of words in FILE (just the number)",
        "last": "prints the last line of FILE",
    }[action]
    rules = [
        w.spin(
            f'with anything other than exactly one argument it prints a usage message starting with "Usage:" '
            f"to {{standard error|stderr}} and exits with status {usage_rc}",
            capitalize=False,
        ),
        w.spin(
            f"if FILE does not exist it prints an error message to {{standard error|stderr}} and exits with "
            f"status {missing_rc}",
            capitalize=False,
        ),
        w.spin("otherwise it " + does + " and exits with status 0", capitalize=False),
    ]
    spec = "; ".join(rules)
    task = w.phrase(
        "Write an executable script {path} that takes one argument, FILE: {spec}.",
        "Ticket: we need {path}, an executable {bash |}script with proper argument checking. It takes a single FILE "
        "argument; {spec}.",
        "Please {create|write} {path} (executable). Behaviour: {spec}. File names with spaces must work.",
        "Can you write a small {tool|script} at {path}? Usage is `{name} FILE`; {spec}.",
        "Other scripts will call {path} and rely on its exit status, so the argument handling has to be strict. "
        "It is run as `{name} FILE` and must be executable: {spec}.",
        "`{name} FILE` at {path} (executable): {spec}.",
        path=w.path_ref(path, "file"),
        spec=spec,
        name=name,
    )
    text = "".join(
        f"{' '.join(w.pick(WORDS) for _ in range(w.randint(1, 5)))}\n" for _ in range(w.randint(2, 8))
    )
    want = {
        "lines": str(text.count("\n")),
        "first": text.splitlines()[0],
        "bytes": str(len(text.encode())),
        "words": str(len(text.split())),
        "last": text.splitlines()[-1],
    }[action]
    fname = f"{w.pick(WORDS)} {w.pick(WORDS)}.txt"
    q = quote
    check = (
        "\n".join(
            [
                "#!/bin/bash",
                _RUN_AS,
                f"[ -x {q(path)} ] || exit 1",
                f"printf %s {q(text)} > {q(fname)}; chown operator:operator {q(fname)}",
                'probe() { run "$@" > out.txt 2> err.txt; rc=$?; out=$(trim < out.txt); err=$(cat err.txt); }',
                f"probe {q(path)}; [ $rc = {usage_rc} ] && [ -z \"$out\" ] && grep -qi '^usage:' err.txt || exit 1",
                f"probe {q(path)} a b; [ $rc = {usage_rc} ] && [ -z \"$out\" ] && grep -qi 'usage:' err.txt || exit 1",
                f'probe {q(path)} ./no-such-file-here; [ $rc = {missing_rc} ] && [ -z "$out" ] && [ -n "$err" ] || exit 1',
                f'probe {q(path)} {q(fname)}; [ $rc = 0 ] && [ "$out" = {q(want)} ] || exit 1',
            ]
        )
        + "\n"
    )
    act = {
        "lines": 'wc -l < "$1"',
        "first": 'head -n 1 -- "$1"',
        "bytes": 'stat -c %s -- "$1"',
        "words": 'wc -w < "$1"',
        "last": 'tail -n 1 -- "$1"',
    }[action]
    if w.chance(0.5):
        body = [
            "#!/bin/bash",
            'if [ "$#" -ne 1 ]; then',
            '    echo "Usage: $(basename "$0") FILE" >&2',
            f"    exit {usage_rc}",
            "fi",
            'if [ ! -e "$1" ]; then',
            '    echo "error: $1: no such file" >&2',
            f"    exit {missing_rc}",
            "fi",
            act,
        ]
    else:
        body = [
            "#!/bin/bash",
            f'[ $# -eq 1 ] || {{ echo "Usage: {name} FILE" >&2; exit {usage_rc}; }}',
            f'[ -e "$1" ] || {{ echo "{name}: $1 not found" >&2; exit {missing_rc}; }}',
            act,
        ]
    ref = [
        f"mkdir -p {q(folder)}",
        _write_script(path, body, w),
        f"chmod +x {q(path)}",
        f'{q(path)}; echo "exit=$?"',
        f'{q(path)} /etc/hostname; echo "exit=$?"',
    ]
    return Draft(task=task, check=check, reference=ref, difficulty=4)


# ---- numbered files -----------------------------------------------------------------------------------------------
@family("scripting-numbered-files", "scripting", "create a numbered series of files with a loop")
def numbered_files(w: World) -> Draft:
    folder = f"{HOME}/{w.pick(('chapters', 'batches', 'parts', 'slots', 'tests', w.dirname()))}"
    prefix = w.pick(("chapter", "part", "batch", "day", "test", "slot", "week", w.pick(WORDS)))
    sep = w.pick(("_", "-", ""))
    ext = w.pick(("txt", "md", "cfg", "dat", "log"))
    start = w.pick((1, 1, 1, 0, w.randint(2, 20)))
    count = w.randint(3, 14)
    end = start + count - 1
    width = w.pick((0, 0, 2, 3)) if end < 100 else 0
    if width == 2 and end >= 100:
        width = 3
    content_kind = w.pick(("empty", "number", "title", "part_of"))
    w.note(prefix, ext, start, end, count, width)
    names = {
        i: f"{prefix}{sep}{i:0{width}d}.{ext}" if width else f"{prefix}{sep}{i}.{ext}"
        for i in range(start, end + 1)
    }
    body = {
        "empty": lambda i: "",
        "number": lambda i: f"{i}",
        "title": lambda i: f"{prefix.capitalize()} {i}",
        "part_of": lambda i: f"part {i} of {end}",
    }[content_kind]
    example = names[start]
    numbers = f"numbered {start} to {end}" + (
        f", zero-padded to {width} digits" if width else ", without padding"
    )
    contents = {
        "empty": "each file empty",
        "number": "each file containing just its number (no leading zeros) on one line",
        "title": f'each file containing one line "{prefix.capitalize()} N" where N is its number (no '
        "leading zeros)",
        "part_of": f'each file containing one line "part N of {end}" where N is its number (no leading '
        "zeros)",
    }[content_kind]
    decoy = None
    if w.chance(0.4):
        decoy = f"{folder}/{w.pick(('README', 'index', 'notes'))}.{w.pick(('txt', 'md'))}"
    spec = w.clauses(
        [
            w.spin(numbers, capitalize=False),
            contents,
            w.spin("{named like|following the pattern} {example}", capitalize=False, example=example),
        ],
        "; ",
    )
    task = w.phrase(
        "Create {count} files in {folder}: {spec}.",
        "{Set up|Generate} a numbered series of {count} files in {folder} ({spec}){| with a loop}.",
        "Ticket: {folder} needs {count} placeholder files, {spec}.",
        "Could you use a loop to create {count} files in {folder}? {spec_cap}.",
        "The test fixture expects {count} numbered files waiting in {folder}. Generate them: {spec}.",
        "{folder}: {count} files, {spec}.",
        count=count,
        folder=w.path_ref(folder),
        spec=spec,
        spec_cap=spec[:1].upper() + spec[1:],
    )
    if decoy:
        task += " " + w.spin("{Keep|Don't remove} the existing {name} there.", name=posixpath.basename(decoy))
    q = quote
    lines = ["#!/bin/bash", f"cd {q(folder)} || exit 1"]
    for i, n in names.items():
        if content_kind == "empty":
            lines.append(f"[ -f {q(n)} ] && [ -z \"$(tr -d '[:space:]' < {q(n)})\" ] || exit 1")
        else:
            lines.append(
                f"[ -f {q(n)} ] && [ \"$(sed 's/[[:space:]]*$//' {q(n)})\" = {q(body(i))} ] || exit 1"
            )
    lines.append(f'[ "$(find . -maxdepth 1 -type f -name {q(prefix + "*")} | wc -l)" = {count} ] || exit 1')
    if decoy:
        lines.append(f"[ -f {q(decoy)} ] || exit 1")
    check = "\n".join(lines) + "\n"
    num = "$n" if width else "$i"
    fname = f"{prefix}{sep}{num}.{ext}"
    echo = {
        "empty": None,
        "number": 'echo "$i"',
        "title": f'echo "{prefix.capitalize()} $i"',
        "part_of": f'echo "part $i of {end}"',
    }[content_kind]
    if content_kind == "empty" and w.chance(0.5):
        rng = f"{{{start:0{width}d}..{end:0{width}d}}}" if width else f"{{{start}..{end}}}"
        cmd = f"touch {q(folder)}/{prefix}{sep}{rng}.{ext}"
    else:
        pad = f"printf -v n '%0{width}d' \"$i\"; " if width else ""
        it = w.pick((f"$(seq {start} {end})", f"{{{start}..{end}}}"))
        make = f'{echo} > "{fname}"' if echo else f'touch "{fname}"'
        cmd = f"for i in {it}; do {pad}{make}; done"
        cmd = f"cd {q(folder)} && {cmd}"
    ref = [f"mkdir -p {q(folder)}", cmd, f"ls {q(folder)}"]
    files = {decoy: "keep me\n"} if decoy else {}
    return Draft(
        task=task,
        check=check,
        reference=ref,
        difficulty=3 if width or content_kind != "empty" else 2,
        files=files,
    )


# ---- while read ---------------------------------------------------------------------------------------------------
@family("scripting-while-read", "scripting", "loop over the lines of a list file with while read")
def while_read(w: World) -> Draft:
    mode = w.pick(("dirs", "pairs", "report", "copy"))
    folder = f"{HOME}/{w.pick(('work', 'setup', 'jobs', w.dirname()))}"
    comments = w.chance(0.5)
    spaces = w.chance(0.35) and mode in ("dirs", "copy")
    q = quote
    if mode in ("dirs", "copy"):
        entries = [
            w.unique(
                lambda: w.pick((w.pick(FIRST_NAMES), w.pick(PROJECTS), f"{w.pick(WORDS)}-{w.randint(1, 9)}"))
            )
            for _ in range(w.randint(3, 7))
        ]
        if spaces:
            entries[w.randint(0, len(entries) - 1)] = f"{w.pick(WORDS)} {w.pick(WORDS)}"
        if mode == "copy":
            ext = w.pick(("txt", "conf", "csv", "md"))
            entries = [f"{e}.{ext}" for e in entries]
            w.note(ext)
    elif mode == "pairs":
        entries = [
            f"{w.pick(FIRST_NAMES)},{w.pick(('devops', 'backend', 'qa', 'data', 'web', 'ml'))}"
            for _ in range(w.randint(3, 7))
        ]
        entries = list(dict.fromkeys(entries))
    else:
        entries = [
            w.unique(lambda: f"{w.pick(WORDS)}_{w.randint(1, 99)}.txt") for _ in range(w.randint(3, 6))
        ]
    listing = list(entries)
    if comments:
        listing.insert(0, f"# {w.pick(('list', 'entries', 'one per line', 'generated'))} {w.token(4)}")
        listing.insert(w.randint(1, len(listing)), "")
        if w.chance(0.5):
            listing.insert(w.randint(1, len(listing)), f"#{w.pick(FIRST_NAMES)}")
    lst = f"{folder}/{w.pick(('list.txt', 'names.txt', 'todo.lst', 'input.txt', 'manifest.txt'))}"
    files = {lst: "".join(f"{x}\n" for x in listing)}
    skip_en = w.spin("skip blank lines and lines starting with #", capitalize=False) if comments else ""
    base = f"{folder}/{w.pick(('out', 'homes', 'projects', 'teams', 'backup', 'copies'))}"
    w.note(posixpath.basename(lst))
    lines = ["#!/bin/bash"]
    if mode == "dirs":
        what = w.spin(
            "create a directory {under|inside} {base} for each name listed (one per line) in {lst}",
            capitalize=False,
            base=w.path_ref(base),
            lst=w.path_ref(lst, "file"),
        )
        for e in entries:
            lines.append(f"[ -d {q(base + '/' + e)} ] || exit 1")
        lines.append(f'[ "$(find {q(base)} -mindepth 1 -maxdepth 1 | wc -l)" = {len(entries)} ] || exit 1')
        var = "line"
    elif mode == "pairs":
        what = w.spin(
            "for each USER,TEAM line in {lst}, create the directory {base}/TEAM/USER",
            capitalize=False,
            base=w.path_ref(base),
            lst=w.path_ref(lst, "file"),
        )
        teams = sorted({e.split(",")[1] for e in entries})
        for e in entries:
            user, team = e.split(",")
            lines.append(f"[ -d {q(f'{base}/{team}/{user}')} ] || exit 1")
        lines.append(f'[ "$(find {q(base)} -mindepth 1 -maxdepth 1 | wc -l)" = {len(teams)} ] || exit 1')
        lines.append(f'[ "$(find {q(base)} -mindepth 2 -maxdepth 2 | wc -l)" = {len(entries)} ] || exit 1')
        var = "user"
    elif mode == "report":
        src = f"{folder}/{w.pick(('data', 'files', 'docs'))}"
        texts = {e: "".join(f"{w.pick(WORDS)}\n" for _ in range(w.randint(1, 12))) for e in entries}
        extra = w.unique(lambda: f"{w.pick(WORDS)}_{w.randint(1, 99)}.txt")
        files.update({f"{src}/{e}": t for e, t in texts.items()})
        files[f"{src}/{extra}"] = "not listed\n"
        out = f"{folder}/{w.pick(('report.txt', 'counts.txt', 'line_counts.txt'))}"
        what = w.spin(
            'for each file name listed in {lst} (the files are in {src}), write a line "NAME COUNT" to '
            "{out}, where COUNT is the file's number of lines, in the order of the list",
            capitalize=False,
            lst=w.path_ref(lst, "file"),
            src=w.path_ref(src),
            out=w.path_ref(out, "file"),
        )
        want = "\n".join(f"{e} {t.count(chr(10))}" for e, t in texts.items())
        lines.append(f"[ -f {q(out)} ] || exit 1")
        lines.append(
            f"[ \"$(sed -e 's/[[:space:]][[:space:]]*/ /g' -e 's/ *$//' -e '/^$/d' {q(out)})\" = "
            f"{q(want)} ] || exit 1"
        )
        var = "name"
    else:
        src = f"{folder}/{w.pick(('configs', 'files', 'docs', 'src'))}"
        texts = {e: _token(w) for e in entries}
        extras = [
            w.unique(lambda: f"{w.pick(WORDS)}_{w.randint(1, 99)}.{ext}") for _ in range(w.randint(1, 3))
        ]
        files.update({f"{src}/{e}": t for e, t in texts.items()})
        files.update({f"{src}/{e}": "not listed\n" for e in extras})
        what = w.spin(
            "copy each file listed in {lst} from {src} into {base}; files that are not listed stay where "
            "they are and are not copied",
            capitalize=False,
            lst=w.path_ref(lst, "file"),
            src=w.path_ref(src),
            base=w.path_ref(base),
        )
        for e, t in texts.items():
            lines.append(f"[ \"$(md5sum < {q(base + '/' + e)} | cut -d' ' -f1)\" = {_md5(t)} ] || exit 1")
            lines.append(f"[ -f {q(src + '/' + e)} ] || exit 1")
        lines.append(f'[ "$(find {q(base)} -type f | wc -l)" = {len(entries)} ] || exit 1')
        var = "name"
    if spaces:
        what += w.spin(" (some names contain spaces)", capitalize=False)
    parts = w.clauses([what, skip_en], "; ")
    task = w.phrase(
        "Using a while-read loop, {parts}.",
        "{Read|Go through} {lst_ref} line by line: {parts}.",
        "Ticket: automate this with a loop: {parts}.",
        "Can you {loop over|process} the list in {lst_ref}? {parts_cap}.",
        "The list in {lst_ref} is too long to handle one entry at a time by hand. Loop over it: {parts}.",
        "For each line of {lst_ref}: {parts}.",
        parts=parts,
        parts_cap=parts[:1].upper() + parts[1:],
        lst_ref=w.path_ref(lst, "file"),
    )
    check = "\n".join(lines) + "\n"
    skip = ' [ -z "$' + var + '" ] && continue; [[ $' + var + " == \\#* ]] && continue;" if comments else ""
    if mode == "dirs":
        loop = f'while IFS= read -r line; do{skip} mkdir -p -- "{base}/$line"; done < {q(lst)}'
        pre = [f"mkdir -p {q(base)}"]
    elif mode == "pairs":
        skip = ' [ -z "$user" ] && continue; [[ $user == \\#* ]] && continue;' if comments else ""
        loop = f'while IFS=, read -r user team; do{skip} mkdir -p "{base}/$team/$user"; done < {q(lst)}'
        pre = []
    elif mode == "report":
        loop = (
            f'while IFS= read -r name; do{skip} echo "$name $(wc -l < "{src}/$name")"; done < {q(lst)} '
            f"> {q(out)}"
        )
        pre = []
    else:
        loop = f'while IFS= read -r name; do{skip} cp -- "{src}/$name" "{base}/"; done < {q(lst)}'
        pre = [f"mkdir -p {q(base)}"]
    if comments and w.chance(0.4):  # filter first, then a plain loop
        plain = loop.replace(skip, "")
        plain = plain.replace(f" < {q(lst)}", "")
        loop = f"grep -v -e '^#' -e '^$' {q(lst)} | {plain}"
    ref = [f"cat {q(lst)}", *pre, loop, f"ls -R {q(base)}" if mode != "report" else f"cat {q(out)}"]
    return Draft(task=task, check=check, reference=ref, difficulty=3, files=files)


# ---- a function in ~/.bashrc --------------------------------------------------------------------------------------
@family("scripting-bashrc-function", "scripting", "define a shell function in ~/.bashrc")
def bashrc_function(w: World) -> Draft:
    kind = w.pick(("bak", "upper", "countf", "up", "hr", "extract_to"))
    q = quote
    test_dir = f"/tmp/fn_{w.token(5)}"
    if kind == "bak":
        suffix = w.pick((".bak", ".orig", ".old", ".save"))
        name = w.pick(("bak", "backup", "keep", "snap"))
        does = f"`{name} FILE` copies FILE to FILE{suffix} in the same folder (the original stays)"
        fn = f'{name}() {{ cp -- "$1" "$1{suffix}"; }}'
        probe = (
            f"cd {test_dir} && printf 'one\\ntwo\\n' > 'my file.txt' && {name} 'my file.txt' && "
            f"cat 'my file.txt{suffix}' && ls"
        )
        want = f"one|two|my file.txt|my file.txt{suffix}|"
        demo = f"echo hi > /tmp/demo.txt && {name} /tmp/demo.txt && ls /tmp/demo.txt*"
        w.note(suffix)
    elif kind == "upper":
        name = w.pick(("upper", "shout", "caps"))
        does = f"`{name} WORDS...` prints all its arguments on one line, separated by single spaces, in upper case"
        fn = w.pick(
            (
                f"{name}() {{ echo \"$*\" | tr '[:lower:]' '[:upper:]'; }}",
                f'{name}() {{ local s="$*"; echo "${{s^^}}"; }}',
            )
        )
        probe = f"{name} hello 'big world' 42"
        want = "HELLO BIG WORLD 42|"
        demo = f"{name} it works"
    elif kind == "countf":
        name = w.pick(("countf", "nfiles", "fcount"))
        does = (
            f"`{name} DIR` prints how many regular files are directly inside DIR (not counting "
            "subdirectories or their contents)"
        )
        fn = f'{name}() {{ find "$1" -maxdepth 1 -type f | wc -l; }}'
        probe = (
            f"mkdir -p {test_dir}/d/sub && touch {test_dir}/d/a {test_dir}/d/b {test_dir}/d/sub/c "
            f"&& {name} {test_dir}/d"
        )
        want = "2|"
        demo = f"{name} ~"
    elif kind == "up":
        name = w.pick(("up", "upn", "climb"))
        does = (
            f"`{name} N` changes the current shell's directory N levels up (so `{name} 2` is like `cd ../..`)"
        )
        fn = f'{name}() {{ local d=""; for ((i = 0; i < ${{1:-1}}; i++)); do d="../$d"; done; cd "$d"; }}'
        probe = f"mkdir -p {test_dir}/a/b/c/d && cd {test_dir}/a/b/c/d && {name} 3 && pwd"
        want = f"{test_dir}/a|"
        demo = f"cd /usr/share/doc && {name} 2 && pwd"
    elif kind == "hr":
        name = w.pick(("hr", "rule", "dashes"))
        char = w.pick(("-", "=", "*", "#"))
        does = f"`{name} N` prints a single line of N {char} characters"
        fn = f'{name}() {{ local s=""; for ((i = 0; i < $1; i++)); do s+="{char}"; done; echo "$s"; }}'
        n1, n2 = w.randint(3, 12), w.randint(13, 40)
        probe = f"{name} {n1}; {name} {n2}"
        want = f"{char * n1}|{char * n2}|"
        demo = f"{name} 10"
        w.note(char)
    else:
        name = w.pick(("mkcp", "cpto", "dropin"))
        does = (
            f"`{name} FILE DIR` creates DIR (with any missing parents, no error if it exists) and copies FILE "
            "into it"
        )
        fn = f'{name}() {{ mkdir -p -- "$2" && cp -- "$1" "$2/"; }}'
        probe = (
            f"cd {test_dir} && echo x > f.txt && {name} f.txt 'new dir/deep' && {name} f.txt 'new dir/deep' "
            "&& ls 'new dir/deep'"
        )
        want = "f.txt|"
        demo = f"{name} /etc/hostname /tmp/demo_dir && ls /tmp/demo_dir"
    w.note(name)
    rc = "~/.bashrc"
    task = w.phrase(
        "{Add|Put|Write} a {shell|bash} function {name} {to|in} your {rc}: {does}. It must be available in "
        "{every|each} new interactive shell.",
        "{You keep|The team keeps} typing the same commands. Define a {shell |}function {name} in {rc} {so that|such "
        "that} {does}.",
        "Ticket: {add|define} the bash function {name} (in {rc}, so {new shells get it|every new shell has it}). "
        "{Spec|Behaviour|Usage}: {does}.",
        "Can you {put|add|define} a function {called|named} {name} in {rc}? {does_cap}.",
        "{Define|Create} {name} as a {shell|bash} function, {saved|kept} in {rc} so it {survives new shells|is there "
        "in new terminals}: {does}.",
        "New helper for {your|the} shell: a function {name} in {rc}. {Wanted behaviour|What it does}: {does}.",
        name=name,
        rc=rc,
        does=does,
        does_cap=does[:1].upper() + does[1:],
    )
    check = (
        "\n".join(
            [
                "#!/bin/bash",
                f"rm -rf {test_dir}; mkdir -p {test_dir}; chown operator:operator {test_dir}",
                f"out=$(cd {test_dir} && runuser -u operator -- env -i HOME=/home/operator USER=operator LOGNAME=operator "
                f"PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb bash -ic {q(f'type -t {name}; {probe}')} 2>/dev/null "
                "| tr '\\n' '|')",
                f'[ "$out" = {q("function|" + want)} ]',
            ]
        )
        + "\n"
    )
    head, body = f"{name}() {{ ", fn[len(name) + 5 : -3]  # fn is `name() { body; }`
    assert fn.startswith(head) and fn.endswith("; }")
    if w.chance(0.3):
        fn = f"function {name} {{ {body}; }}"
    add = w.pick(
        (
            [f"echo {q(fn)} >> ~/.bashrc"],
            [f"printf '%s\\n' {q(fn)} >> ~/.bashrc"],
            [f"cat >> ~/.bashrc <<'EOF'\n{name}() {{\n    {body}\n}}\nEOF"],
            [f"printf '%s\\n' {q(fn)} | tee -a ~/.bashrc"],
            [
                f"F={q(fn)} awk '1; END {{ print ENVIRON[\"F\"] }}' ~/.bashrc > /tmp/bashrc.new",
                "cat /tmp/bashrc.new > ~/.bashrc",
            ],
            [
                'python3 -c \'import os, sys; open(os.path.expanduser("~/.bashrc"), "a").write(sys.argv[1] + '
                f'"\\n")\' {q(fn)}'
            ],
        )
    )
    # the operator's shell stays as it is (sourcing ~/.bashrc there would change its prompt): a new one proves it
    ref = ["tail -n 3 ~/.bashrc", *add, f"bash -ic {q(f'type {name}; {demo}')} 2>/dev/null"]
    return Draft(task=task, check=check, reference=ref, difficulty=3)


# ---- fix a broken script ------------------------------------------------------------------------------------------
def _base_script(w: World) -> tuple[str, str, list[str], list[tuple[list[str], str]], dict[str, str]]:
    """(name, English, lines, [(args, expected stdout)], scratch files): a working script to break."""
    kind = w.pick(("count", "total", "size", "greet"))
    if kind == "count":
        texts = {
            f"{w.pick(WORDS)} {w.pick(WORDS)}.txt": "".join(
                f"{w.pick(WORDS)}\n" for _ in range(w.randint(2, 9))
            ),
            f"{w.pick(WORDS)}.log": "".join(f"{w.pick(WORDS)}\n" for _ in range(w.randint(1, 5))),
        }
        lines = [
            "#!/bin/bash",
            "# print how many lines FILE has",
            'file="$1"',
            'if [ ! -f "$file" ]; then',
            '    echo "no such file: $file" >&2',
            "    exit 1",
            "fi",
            'count=$(wc -l < "$file")',
            'echo "$file: $count lines"',
        ]
        return (
            w.pick(("linecount.sh", "count_lines.sh", "lc.sh")),
            "`SCRIPT FILE` prints `FILE: N lines`, where N is the number of lines in FILE (names with spaces "
            "must work)",
            lines,
            [([k], f"{k}: {v.count(chr(10))} lines") for k, v in texts.items()],
            texts,
        )
    if kind == "total":
        texts = {}
        for _ in range(2):
            nums = [w.randint(1, 500) for _ in range(w.randint(2, 7))]
            texts[f"{w.pick(WORDS)}_{w.randint(1, 99)}.txt"] = "".join(f"{x}\n" for x in nums)
        lines = [
            "#!/bin/bash",
            "# add up the numbers in FILE, one per line",
            "total=0",
            "while read -r n; do",
            "    total=$((total + n))",
            'done < "$1"',
            'echo "total: $total"',
        ]
        sums = {k: sum(int(x) for x in v.split()) for k, v in texts.items()}
        return (
            w.pick(("sum.sh", "total.sh", "addup.sh")),
            "`SCRIPT FILE` adds up the numbers in FILE (one per line) and prints `total: SUM`",
            lines,
            [([k], f"total: {sums[k]}") for k in texts],
            texts,
        )
    if kind == "size":
        t = w.pick((10, 50, 100, 250, 1000))
        nums = [w.randint(0, t - 1), t, w.randint(t + 1, t * 3)]
        lines = [
            "#!/bin/bash",
            f"# say whether N is big (over {t}) or small",
            'n="$1"',
            f'if [ "$n" -gt {t} ]; then',
            "    echo big",
            "else",
            "    echo small",
            "fi",
        ]
        w.note(t)
        return (
            w.pick(("classify.sh", "bigsmall.sh", "size_check.sh")),
            f"`SCRIPT N` prints `big` when the integer N is greater than {t} and `small` otherwise",
            lines,
            [([str(x)], "big" if x > t else "small") for x in nums],
            {},
        )
    people = [f"{w.pick(FIRST_NAMES).capitalize()} {w.pick(FIRST_NAMES).capitalize()}", w.pick(FIRST_NAMES)]
    lines = [
        "#!/bin/bash",
        "# greet everyone named on the command line",
        'for name in "$@"; do',
        '    echo "Hello, $name!"',
        "done",
    ]
    return (
        w.pick(("greet.sh", "hello.sh", "welcome.sh")),
        "`SCRIPT NAME...` prints `Hello, NAME!` on its own line for each argument (an argument may contain "
        "spaces)",
        lines,
        [(people, "\n".join(f"Hello, {p}!" for p in people))],
        {},
    )


def _bugs(lines: list[str], path: str) -> list[tuple[str, list[str], list[str], str]]:
    """The bugs that fit this script: (id, broken lines, fix commands, difficulty hint)."""
    q = quote(path)
    out = [
        ("crlf", lines, [f"sed -i 's/\\r$//' {q}"], "crlf"),
        ("shebang", ["#!/bin/bsh", *lines[1:]], [f"sed -i '1s|.*|#!/bin/bash|' {q}"], "easy"),
    ]
    for i, line in enumerate(lines):
        n = i + 1
        for var in ("count", "file", "n"):  # (total=0 is no bug: an unset total is 0 in $(( )))
            if line.startswith(f"{var}="):
                out.append(
                    (
                        "assign",
                        lines[:i] + [line.replace(f"{var}=", f"{var} = ", 1)] + lines[i + 1 :],
                        [f"sed -i '{n}s/{var} = /{var}=/' {q}"],
                        "hard",
                    )
                )
        if line.startswith("if ") and line.endswith("; then"):
            broken = line[: -len("; then")]
            out.append(
                ("then", lines[:i] + [broken] + lines[i + 1 :], [f"sed -i '{n}s/$/; then/' {q}"], "hard")
            )
            if " -gt " in line:  # (a broken `[` in a negated test would only skip the error branch)
                k = line.rindex(" ]")
                out.append(
                    (
                        "bracket",
                        lines[:i] + [line[:k] + line[k + 1 :]] + lines[i + 1 :],
                        [f"sed -i '{n}s/\\]; then/ ]; then/' {q}"],
                        "hard",
                    )
                )
        if line.endswith('lines"') and "$count" in line:
            out.append(
                (
                    "typo",
                    lines[:i] + [line.replace("$count", "$cuont")] + lines[i + 1 :],
                    [f"sed -i '{n}s/\\$cuont/$count/' {q}"],
                    "hard",
                )
            )
        if line == 'echo "total: $total"':
            out.append(
                (
                    "typo",
                    lines[:i] + ['echo "total: $totl"'] + lines[i + 1 :],
                    [f"sed -i '{n}s/\\$totl/$total/' {q}"],
                    "hard",
                )
            )
        if line == 'done < "$1"':
            out.append(
                (
                    "redirect",
                    lines[:i] + ["done < $2"] + lines[i + 1 :],
                    [f"sed -i '{n}s/.*/done < \"$1\"/' {q}"],
                    "hard",
                )
            )
        if line == 'for name in "$@"; do':
            out.append(
                (
                    "quote",
                    lines[:i] + ["for name in $@; do"] + lines[i + 1 :],
                    [f"sed -i '{n}s/in \\$@/in \"$@\"/' {q}"],
                    "hard",
                )
            )
        if line == 'count=$(wc -l < "$file")':
            out.append(
                (
                    "quote",
                    lines[:i] + ["count=$(wc -l < $file)"] + lines[i + 1 :],
                    [f"sed -i '{n}s/< \\$file/< \"$file\"/' {q}"],
                    "hard",
                )
            )
    return out


@family("scripting-fix-broken-script", "scripting", "find and fix the planted bug in a broken shell script")
def fix_broken_script(w: World) -> Draft:
    name, does, lines, tests, scratch = _base_script(w)
    folder = _scratch(w)
    path = f"{folder}/{name}"
    bug, broken, fix, level = w.pick(_bugs(lines, path))
    noexec = w.chance(0.3)
    text = "".join(f"{x}\n" for x in broken)
    if bug == "crlf":
        text = text.replace("\n", "\r\n")
    w.note(name)
    setup = [f"chmod 644 {quote(path)}"] if noexec else []
    symptom = w.pick(
        (
            "it fails",
            "it does not work",
            "it errors out or prints the wrong thing",
            "running it gives errors",
            "users report it is broken",
        )
    )
    task = w.phrase(
        "The script {path} is broken: {symptom}. It is {meant|supposed} to work like this: {does}. Fix it {in "
        "place|where it is} so that it does.",
        "{path} {stopped working|is broken|has a bug} ({symptom}). {Find and fix the problem|Debug and repair it|"
        "Track down the bug and fix it}; the intended behaviour is: {does}.",
        "Ticket: {path} is broken. {Expected|Intended} behaviour: {does}. Please fix the script (keep it at the same "
        "path and {runnable directly|executable}).",
        "Can you {debug|repair|fix} {path}? {symptom_cap}. What it should do: {does}.",
        "Bug report: {symptom} when running {path}. {Spec|The script's job}: {does}. {Make it work again|Repair "
        "it}{|, keeping it at the same path}.",
        "{path} worked last week; now {symptom}. What it is for: {does}. Repair the script itself so it does "
        "that again (same path, still executable).",
        "{path}: {symptom}. Should: {does}. Fix it.",
        path=w.path_ref(path, "file"),
        symptom=symptom,
        symptom_cap=symptom[:1].upper() + symptom[1:],
        does=does.replace("SCRIPT", posixpath.basename(path)),
    )
    q = quote
    check = ["#!/bin/bash", _RUN_AS, f"[ -x {q(path)} ] || exit 1"]
    for fname, content in scratch.items():
        check.append(f"printf %s {q(content)} > {q(fname)}")
    if scratch:
        check.append('chown operator:operator "$T"/*')
    for args, want in tests:
        check.append(
            f'[ "$(run {q(path)} {" ".join(q(a) for a in args)} 2>/dev/null | trim)" = {q(want)} ] || exit 1'
        )
    look = w.pick((f"cat -A {q(path)}", f"bash -n {q(path)}", f"cat -n {q(path)}", f"ls -l {q(path)}"))
    if bug == "crlf" and w.chance(0.5):
        fix = [
            w.pick(
                (
                    f"sed -i 's/\\r$//' {q(path)}",
                    f"tr -d '\\r' < {q(path)} > /tmp/fixed && cat /tmp/fixed > {q(path)}",
                )
            )
        ]
    ref = [look, *fix]
    if noexec:
        ref.append(f"chmod +x {q(path)}")
    demo_args = tests[0][0]
    if scratch:
        ref.append(f"cd /tmp && printf %s {q(scratch[demo_args[0]])} > {q(demo_args[0])}")
    ref.append(f"{q(path)} {' '.join(q(a) for a in demo_args)}")
    return Draft(
        task=task,
        check="\n".join(check) + "\n",
        reference=ref,
        difficulty=3 if level == "easy" and not noexec else 4,
        files={path: text},
        setup=setup,
    )
