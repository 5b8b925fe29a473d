"""The ``programs`` task-factory category (issue 39): program files in Python, awk, sed and bash that the check runs.

Without Docker: the category is registered, every family draws reproducibly, as root and as operator in folders
other than home, from at least 8 whole phrasings and 12 state-changing solutions, with more than 150 distinct
normalised instructions in 900 draws, and stays away from the held-out skills (at the skill level too, slow).
With Docker: every family's draws are admitted by the real gate, and two plausible wrong answers a family (a
hard-coded input, the data fixed instead of the script, an option parsed but never shifted ...) fail its check.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections import Counter
from collections.abc import Callable

import pytest
from sandbox_fixtures import check_exits_after

from bashgym_assets.scenarios import skills
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.catalog import command_flags
from bashgym_assets.scenarios.factory.family import CATEGORIES, all_families
from bashgym_assets.scenarios.factory.generate import (
    NEAR_DUPLICATE,
    draw_family,
    evaluation_tasks,
    generate,
    normalise_instruction,
)
from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES, UNSEEN_BOUND
from bashgym_assets.scenarios.factory.variety import yield_variety
from bashgym_assets.scenarios.gate import TRAIN, gate_bundles, split_for

FAMILIES = {n: f for n, f in all_families().items() if f.category == "programs"}
# words and commands of the held-out skills this category must not teach (factory/split.py)
_HELD_OUT_WORDS = re.compile(
    r"\b(port|listen\w*|signal\w*|SIG(?:HUP|TERM|INT|KILL|USR[12])|cron\w*|symlink\w*|symbolic|editorconfig|numbered|upper-?case|"
    r"lower-?case|line endings?)\b",
    re.I,
)
_HELD_OUT_COMMANDS = {"ln", "kill", "pkill", "killall", "crontab", "truncate", "tr", "logrotate", "seq"}


def _draws(name: str, n: int = 55, seed: int = 0) -> list[ScenarioBundle]:
    y = draw_family(FAMILIES[name], n, seed=seed)
    assert y.kept == n and not y.errors, y.errors
    return y.bundles


def test_the_category_is_registered_and_every_family_trains() -> None:
    assert "programs" in CATEGORIES
    assert len(FAMILIES) >= 18, sorted(FAMILIES)
    assert not set(FAMILIES) & HELD_OUT_FAMILIES
    assert all(n.startswith("programs-") for n in FAMILIES)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_draws_reproducibly(name: str) -> None:
    fam = FAMILIES[name]
    assert fam.make("r:1")[0] == fam.make("r:1")[0]
    assert fam.make("r:1")[0] != fam.make("r:2")[0]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_varies_in_wording_solutions_users_and_folders(name: str) -> None:
    y = draw_family(FAMILIES[name], 55, seed=0)
    v = yield_variety(y)
    assert v.phrasings >= 8 and v.cores >= 12, v
    users = Counter(b.user for b in y.bundles)
    assert users["root"] >= 10 and users["operator"] >= 10, users
    folders = {(b.workdir or "~").split("/")[1] for b in y.bundles}
    assert len(folders) >= 3 and any(f in folders for f in ("opt", "srv", "app")), folders
    assert len({b.difficulty for b in y.bundles}) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_writes_more_than_150_instructions_in_900_draws(name: str) -> None:
    fam = FAMILIES[name]
    wordings = set()
    for i in range(900):
        b, values = fam.make(f"n:{i}")
        wordings.add(normalise_instruction(b.task, values))
    assert len(wordings) > 150, len(wordings)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_no_family_asks_for_or_uses_a_held_out_skill(name: str) -> None:
    for b in _draws(name, 40, seed=3):
        assert not _HELD_OUT_WORDS.search(b.task), b.task
        used = {unit.split()[0] for unit in command_flags(b.reference)}
        assert not used & _HELD_OUT_COMMANDS, (used, b.reference)


@pytest.mark.slow
def test_held_out_families_stay_far_from_the_programs_families() -> None:
    groups = {n: tuple(_skill_docs(n, 30)) for n in [*FAMILIES, *sorted(HELD_OUT_FAMILIES)]}
    scores = skills.family_scores(groups)
    for held in sorted(HELD_OUT_FAMILIES):
        name, score = skills.nearest_family(scores, held, list(FAMILIES))
        assert score < UNSEEN_BOUND - 0.05, f"{held} ~ {name} {score:.3f}"
    run = generate(12, seed=0, families=sorted(FAMILIES), eval_tasks=evaluation_tasks())
    refused = sum(y.drops.get(NEAR_DUPLICATE, 0) for y in run.yields)
    assert refused <= len(FAMILIES), {y.family: dict(y.drops) for y in run.yields}
    assert all(y.kept == 12 for y in run.yields)
    assert {split_for(b.id) for b in run.bundles} == {TRAIN}


def _skill_docs(name: str, n: int) -> list[skills.SkillDoc]:
    fam = all_families()[name]
    out = []
    for i in range(n):
        b, values = fam.make(f"0:{i}")
        out.append(skills.skill_doc(b.id, b.task, b.reference, group=name, values=values))
    return out


# ---- in real sandboxes -------------------------------------------------------------------------------------------
# One task of every family goes through the real gate in tests/test_factory.py
# (test_every_family_admitted_by_the_real_gate); the wrong-answer test below gates the tasks it uses.


def _find(name: str, want: Callable[[ScenarioBundle], bool]) -> ScenarioBundle:
    """The first draw of a family (seeds ``w:0``, ``w:1``, ...) that ``want`` accepts."""
    for i in range(600):
        b, _ = FAMILIES[name].make(f"w:{i}")
        if want(b):
            return b
    raise AssertionError(f"no draw of {name} fits")


def _swap(reference: list[str], old: str, new: str) -> list[str]:
    """The reference with ``old`` replaced by ``new`` in every line (which must change at least one)."""
    out = [line.replace(old, new) for line in reference]
    assert out != reference, (old, reference)
    return out


def _sample(b: ScenarioBundle) -> str:
    """The sample input the reference tries the program on (its last argument)."""
    return b.reference[-1].split()[-1]


def _wrong_answers() -> list[tuple[str, ScenarioBundle, list[str]]]:
    cases: list[tuple[str, ScenarioBundle, list[str]]] = []
    # a summary script that always reads the sample file instead of its argument
    b = _find(
        "programs-python-summary",
        lambda b: "sys.argv[1]" in " ".join(b.reference) and "cat >" in b.reference[-2],
    )
    cases.append(("summary reads the sample", b, _swap(b.reference, "sys.argv[1]", repr(_sample(b)))))
    # an executable script written without the execute bit
    b = _find(
        "programs-python-summary",
        lambda b: "executable" in b.task and any(r.startswith("chmod") for r in b.reference),
    )
    cases.append(("summary not executable", b, [r for r in b.reference if not r.startswith("chmod")]))
    # awk: a CSV report without FS set splits on blanks
    b = _find(
        "programs-awk-report",
        lambda b: 'BEGIN { FS = "," }' in " ".join(b.reference) and "NR == 1" in " ".join(b.reference),
    )
    cases.append(("awk without FS", b, _swap(b.reference, 'BEGIN { FS = "," }', "")))
    # awk: a number compared as a string
    b = _find("programs-awk-report", lambda b: "$3 + 0 >" in " ".join(b.reference))
    cases.append(
        ("awk string compare", b, [re.sub(r"\$3 \+ 0 > (\d+)", r'$3 > "\1"', r) for r in b.reference])
    )
    # getopts: unknown options accepted silently
    b = _find("programs-getopts-script", lambda b: "*) usage >&2; exit" in " ".join(b.reference))
    cases.append(
        (
            "getopts accepts anything",
            b,
            [re.sub(r"\*\) usage >&2; exit \d+ ;;", "*) ;;", r) for r in b.reference],
        )
    )
    # getopts: options parsed but never shifted away
    b = _find("programs-getopts-script", lambda b: "shift $((OPTIND - 1))" in " ".join(b.reference))
    cases.append(("getopts no shift", b, _swap(b.reference, "shift $((OPTIND - 1))", "true")))
    # traceback: the sample's header changed to what the script wants, the script left as it was
    b = _find(
        "programs-python-traceback-fix",
        lambda b: "KeyError" in b.task.split("Traceback")[1][:2000] and b.task.count("KeyError") == 1,
    )
    key = re.search(r"KeyError: '(\w+)'", b.task).group(1)  # type: ignore[union-attr]
    cases.append(("data fixed, not the script", b, [f"sed -i '1s/{key.lower()}/{key}/' {_sample(b)}"]))
    # traceback: the TypeError "fixed" by adding strings
    b = _find(
        "programs-python-traceback-fix",
        lambda b: "unsupported operand" in b.task and "KeyError" not in b.task,
    )
    rel = b.reference[-1].split()[1]
    cases.append(
        ("strings concatenated", b, [f"sed -i 's/out.get(key, 0) + row/out.get(key, \"\") + row/' {rel}"])
    )
    cases += _wrong_answers_2()
    return cases


def _rel(b: ScenarioBundle) -> str:
    """The program a fixing task's reference looks at first (its first line's last word)."""
    return b.reference[0].split()[-1]


def _wrong_answers_2() -> list[tuple[str, ScenarioBundle, list[str]]]:
    cases: list[tuple[str, ScenarioBundle, list[str]]] = []
    # dry run: the flag is taken off the arguments and otherwise ignored, so the script acts for real
    b = _find("programs-dry-run-flag", lambda b: "--dry-run" in b.task)
    cases.append(("dry-run ignored", b, [f"sed -i '2a [ \"$1\" = --dry-run ] && shift' {_rel(b)}"]))
    # dry run: the lines name the file without its folder
    b = _find("programs-dry-run-flag", lambda b: 'echo "would' in " ".join(b.reference))
    fix = f"""sed -i 's|echo "would \\([a-z]*\\) $f"|echo "would \\1 $(basename "$f")"|' {_rel(b)}"""
    cases.append(("dry-run basename", b, [*b.reference, fix]))
    # stdin: the file argument ignored, stdin read always
    b = _find("programs-stdin-or-file", lambda b: b.reference[0].endswith(".sh"))
    cases.append(("stdin always", b, [f"sed -i 's|^src=.*|src=/dev/stdin|' {_rel(b)}"]))
    # stdin: no argument works, `-` does not
    b = _find(
        "programs-stdin-or-file",
        lambda b: (
            b.reference[0].endswith(".py")
            and "`-`" in b.task
            and 'sys.argv[1] != "-"' in " ".join(b.reference)
        ),
    )
    cases.append(("dash not handled", b, _swap(b.reference, ' and sys.argv[1] != "-"', "")))
    # fail fast: errexit without pipefail misses a failure inside the pipeline
    b = _find(
        "programs-fail-fast", lambda b: "pipeline" in b.task and "set -euo pipefail" in " ".join(b.reference)
    )
    cases.append(("no pipefail", b, _swap(b.reference, "set -euo pipefail", "set -eu")))
    # fail fast: set -e appended at the end, where it changes nothing
    b = _find("programs-fail-fast", lambda b: True)
    cases.append(("set -e at the end", b, [f"echo 'set -e' >> {_rel(b)}"]))
    # install: a link to the project file instead of a copy
    b = _find("programs-install-command", lambda b: b.user == "root" and "no shebang" in b.task)
    src = next(w for w in b.reference[0].split() if "/" in w)
    dest = b.reference[-1].split()[-1]
    bang = (
        "#!/usr/bin/env python3"
        if src.endswith(".py")
        else "#!/usr/bin/awk -f"
        if src.endswith(".awk")
        else "#!/bin/bash"
    )
    cases.append(("linked", b, [f"sed -i '1i {bang}' {src}", f"chmod +x {src}", f"ln -s $PWD/{src} {dest}"]))
    # install: copied and made executable, the missing interpreter line left missing
    b = _find(
        "programs-install-command",
        lambda b: b.reference[0].split()[-1].endswith(".py") and "no shebang" in b.task,
    )
    src = b.reference[0].split()[-1]
    dest = b.reference[-1].split()[-1]
    cases.append(
        (
            "no shebang",
            b,
            [
                *([f"mkdir -p {posixpath.dirname(dest)}"] if "~" in dest else []),
                f"install -m 755 {src} {dest}",
            ],
        )
    )
    # function: the empty duration accepted (the regex matches the empty string)
    b = _find("programs-python-function", lambda b: "parse_duration() " in b.task)
    wrong = [
        "",
        "",
        "def parse_duration(text):",
        '    m = re.fullmatch(r"(?:(\\d+)h)?(?:(\\d+)m)?(?:(\\d+)s)?", text)',
        "    if not m:",
        "        raise ValueError(text)",
        "    h, mi, s = (int(g) if g else 0 for g in m.groups())",
        "    return h * 3600 + mi * 60 + s",
    ]
    cases.append(("empty duration", b, [f"cat >> {_module(b)} <<'EOF'\n" + "\n".join(wrong) + "\nEOF"]))
    # function: human sizes with two decimals
    b = _find("programs-python-function", lambda b: "human_size() " in b.task)
    wrong = [
        "",
        "",
        "def human_size(n):",
        "    if n < 0:",
        "        raise ValueError(n)",
        "    for unit in ('B', 'KiB', 'MiB', 'GiB'):",
        "        if n < 1024 or unit == 'GiB':",
        "            return f'{n:.2f} {unit}' if unit != 'B' else f'{n} B'",
        "        n /= 1024",
    ]
    cases.append(("two decimals", b, [f"cat >> {_module(b)} <<'EOF'\n" + "\n".join(wrong) + "\nEOF"]))
    cases += _wrong_answers_3()
    cases += _wrong_answers_4()
    return cases


def _wrong_answers_4() -> list[tuple[str, ScenarioBundle, list[str]]]:
    cases: list[tuple[str, ScenarioBundle, list[str]]] = []
    # trap: registered at the very end, which a failing run never reaches
    b = _find("programs-trap-cleanup", lambda b: any("mktemp -d" in v for v in b.files.values()))
    cases.append(("trap at the end", b, [f'echo \'trap "rm -rf \\"$work\\"" EXIT\' >> {_rel(b)}']))
    # trap: set -e dropped so the cleanup line runs, and the failure turns into success
    b = _find("programs-trap-cleanup", lambda b: True)
    cases.append(("set -e dropped", b, [f"sed -i '/^set -e$/d' {_rel(b)}"]))
    # env: an empty variable taken as a value (${VAR-default} / environ.get(VAR, default))
    b = _find("programs-env-settings", lambda b: ":-" in " ".join(b.reference[1:-1]))
    cases.append(("empty is a value", b, [r.replace(":-", "-") for r in b.reference]))
    # env: the required variable never checked
    b = _find(
        "programs-env-settings",
        lambda b: re.search(r'\[ -n "\$\w+" \] \|\|', " ".join(b.reference)) is not None,
    )
    pattern = r'\[ -n "\$\w+" \] \|\| \{ echo "\w+ is not set" >&2; exit \d+; \}'
    cases.append(("required unchecked", b, [re.sub(pattern, "true", r) for r in b.reference]))
    # awk fix: the sample rewritten to suit the program, the program left alone
    b = _find("programs-awk-program-fix", lambda b: "nonsense" in b.task)
    cases.append(("sample fixed", b, [f"sed -i 's/,/ /g' {_sample(b)}"]))
    # awk fix: cents printed with one decimal
    b = _find("programs-awk-program-fix", lambda b: "TOTAL %.2f" in " ".join(b.reference[1:-1]))
    cases.append(("one decimal", b, [r.replace("TOTAL %.2f", "TOTAL %.1f") for r in b.reference]))
    return cases


def _wrong_answers_3() -> list[tuple[str, ScenarioBundle, list[str]]]:
    cases: list[tuple[str, ScenarioBundle, list[str]]] = []
    # find: the variable quoted, the loop over $(find) kept (the names are split before they reach it)
    b = _find("programs-find-safe-spaces", lambda b: True)
    cases.append(("quoted but split", b, [f"sed -i 's/ \\$f/ \"$f\"/g' {_rel(b)}"]))
    # find: the whole find output quoted into one word
    b = _find("programs-find-safe-spaces", lambda b: "stat -c" not in " ".join(b.reference[:1]))
    cases.append(
        (
            "one big word",
            b,
            [f"sed -i 's/for f in \\$(find \\(.*\\)); do/for f in \"$(find \\1)\"; do/' {_rel(b)}"],
        )
    )
    # json: --output parsed and ignored
    b = _find("programs-python-json-cli", lambda b: "if args.output:" in " ".join(b.reference))
    cases.append(("output ignored", b, _swap(b.reference, "if args.output:", "if False:")))
    # json: numbers left as strings
    b = _find("programs-python-json-cli", lambda b: '{"uid": int(uid)' in " ".join(b.reference))
    cases.append(("uid a string", b, _swap(b.reference, '{"uid": int(uid)', '{"uid": uid')))
    # sed: the key matched as a prefix, so the look-alike key changes too
    b = _find(
        "programs-sed-script", lambda b: re.search(r"s\|\^\w+=\.\*\|", " ".join(b.reference)) is not None
    )
    cases.append(("prefix key", b, [re.sub(r"s\|\^(\w+)=\.\*\|", r"s|^\1.*|", r) for r in b.reference]))
    # sed: the line added after every line, not only after the section header
    b = _find("programs-sed-script", lambda b: "/a\\" in " ".join(b.reference))
    cases.append(("append everywhere", b, [re.sub(r"/\^\\\[\w+\\\]\$/a", "a", r) for r in b.reference]))
    # generator: a here-document that expands what must stay literal
    b = _find(
        "programs-config-generator",
        lambda b: "\\$" in " ".join(b.reference) and "cat <<EOF" in " ".join(b.reference),
    )
    cases.append(("dollars expanded", b, _swap(b.reference, "\\$", "$")))
    # generator: the example's values written in, the arguments ignored
    b = _find("programs-config-generator", lambda b: "$1" in " ".join(b.reference))
    example = re.search(r"for `\S+ (\S+)", b.task)
    cases.append(("arguments ignored", b, _swap(b.reference, "$1", example.group(1) if example else "x")))
    # awk rewrite: the per-key lines left in awk's hash order
    b = _find(
        "programs-loop-to-awk", lambda b: "| sort" in " ".join(b.reference) and "-F'" in " ".join(b.reference)
    )
    cases.append(("unsorted", b, _swap(b.reference, " | sort", "")))
    # awk rewrite: the field separator forgotten
    b = _find("programs-loop-to-awk", lambda b: "awk -F'" in " ".join(b.reference))
    cases.append(("no -F", b, [re.sub(r"awk -F'.' ", "awk ", r) for r in b.reference]))
    # argparse: the option declared, never used
    b = _find("programs-argparse-option", lambda b: 'parser.add_argument("--' in " ".join(b.reference[1:-1]))
    line = re.search(r'parser\.add_argument\("--[^\n]*?\)(?=\n|\'|$)', " ".join(b.reference[1:-1]))
    assert line, b.reference
    cases.append(("declared only", b, [f"sed -i {shlex.quote('/parse_args/i ' + line.group(0))} {_rel(b)}"]))
    # argparse: a limit with a default that changes the old output
    b = _find("programs-argparse-option", lambda b: "type=int, default=None" in " ".join(b.reference))
    cases.append(("default changed", b, _swap(b.reference, "type=int, default=None", "type=int, default=3")))
    return cases


def _module(b: ScenarioBundle) -> str:
    m = re.search(r"\b[\w/]+\.py\b", b.task)
    assert m, b.task
    return m.group(0)


@pytest.mark.docker
@pytest.mark.slow
def test_references_pass_and_plausible_wrong_answers_fail(sandbox_image: str) -> None:

    cases = _wrong_answers()
    covered = Counter(b.id.split(".")[1] for _, b, _ in cases)
    assert all(covered[name] >= 2 for name in FAMILIES), covered
    results = gate_bundles([b for _, b, _ in cases], sandbox_image, max_parallel=2)
    assert all(r.admitted for r in results), [
        (r.scenario_id, r.detail[:300]) for r in results if not r.admitted
    ]

    codes = check_exits_after([(bundle, commands) for _, bundle, commands in cases], sandbox_image)
    outcomes = [
        (label, bundle.id, commands, code)
        for (label, bundle, commands), code in zip(cases, codes, strict=True)
    ]
    passed = [(label, bid, commands) for label, bid, commands, code in outcomes if code == 0]
    assert not passed, passed
