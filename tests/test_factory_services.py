"""The ``services`` task-factory category (issue 39): systemd units and drop-ins, logrotate stanzas, supervisor
programs, /etc/default files, conf.d precedence, sshd/redis directives, upgrade leftovers and config backups.

Without Docker: the category is broad (root under /etc, /srv, /opt and operator in a home project, several
solutions a family), stays away from the held-out skills (no ports, signals, cron files, symlinks, hand rotation)
and is far from every held-out family at the skill level. With Docker: every family's draws are admitted by the real
gate, and plausible wrong answers (the ExecStart= a drop-in forgot to reset, the sshd directive appended where the
first value wins, the vendor unit edited, a backup taken after the edit ...) fail the check.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import pytest
from sandbox_fixtures import check_exits_after

from bashgym_assets.scenarios import skills
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.catalog import command_flags
from bashgym_assets.scenarios.factory.family import CATEGORIES, all_families
from bashgym_assets.scenarios.factory.generate import NEAR_DUPLICATE, draw_family, evaluation_tasks, generate
from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES, UNSEEN_BOUND
from bashgym_assets.scenarios.factory.variety import yield_variety
from bashgym_assets.scenarios.gate import TRAIN, gate_bundles, split_for

FAMILIES = {n: f for n, f in all_families().items() if f.category == "services"}
# words and commands of the held-out skills this category must not teach (factory/split.py)
_HELD_OUT_WORDS = re.compile(
    r"\b(port|listen\w*|signal\w*|reload\w*|SIGHUP|cron\w*|symlink\w*|editorconfig)\b", re.I
)
_HELD_OUT_COMMANDS = {"ln", "kill", "pkill", "killall", "crontab", "truncate", "logrotate", "systemctl"}


def _draws(name: str, n: int = 40, seed: int = 3) -> list[ScenarioBundle]:
    y = draw_family(FAMILIES[name], n, seed=seed)
    assert y.kept == n and not y.errors, y.errors
    return y.bundles


def test_the_category_is_registered_with_ten_to_twelve_families() -> None:
    assert "services" in CATEGORIES
    assert 10 <= len(FAMILIES) <= 12, sorted(FAMILIES)
    assert not set(FAMILIES) & HELD_OUT_FAMILIES  # every services family trains
    assert all(n.startswith("services-") for n in FAMILIES)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_works_as_root_and_as_operator_with_several_solutions(name: str) -> None:
    bundles = _draws(name)
    users = Counter(b.user for b in bundles)
    if name != "services-directive-config" or users["operator"]:  # sshd is root's; its redis half is not
        assert users["root"] >= 8 and users["operator"] >= 4, users
    roots = [b for b in bundles if b.user == "root"]
    assert any(re.search(r"(^|\s)/(etc|srv|opt)/", b.task) for b in roots)
    homes = [b for b in bundles if b.user == "operator"]
    assert all(re.search(r"/home/operator|~/|\bhome\b|\byour\b", b.task) for b in homes)
    y = draw_family(FAMILIES[name], 40, seed=3)
    v = yield_variety(y)
    assert not v.collapsed and v.cores >= 3, v
    assert v.phrasings >= 4
    assert len({b.difficulty for b in bundles}) >= 2


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_no_family_asks_for_or_uses_a_held_out_skill(name: str) -> None:
    for b in _draws(name):
        assert not _HELD_OUT_WORDS.search(b.task), b.task
        used = {unit.split()[0] for unit in command_flags(b.reference)}
        assert not used & _HELD_OUT_COMMANDS, (used, b.reference)
        assert "/etc/cron" not in " ".join(b.reference) and "sites-enabled" not in b.task


@pytest.mark.slow
def test_held_out_families_stay_far_from_the_services_families() -> None:
    groups = {n: tuple(_skill_docs(n, 30)) for n in [*FAMILIES, *sorted(HELD_OUT_FAMILIES)]}
    scores = skills.family_scores(groups)
    for held in sorted(HELD_OUT_FAMILIES):
        name, score = skills.nearest_family(scores, held, list(FAMILIES))
        assert score < UNSEEN_BOUND - 0.05, f"{held} ~ {name} {score:.3f}"  # measured: at most 0.15
    # and the factory's guard refuses at most a stray draw of the category (none is a held-out skill's twin)
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
    for i in range(400):
        b, _ = FAMILIES[name].make(f"w:{i}")
        if want(b):
            return b
    raise AssertionError(f"no draw of {name} fits")


def _without(reference: list[str], *needles: str) -> list[str]:
    return [line for line in reference if not any(n in line for n in needles)]


def _path_in(task: str, pattern: str) -> str:
    m = re.search(pattern, task)
    assert m, (pattern, task)
    return m.group(0).rstrip(".,;:")


def _wrong_answers() -> list[tuple[str, ScenarioBundle, list[str]]]:
    cases: list[tuple[str, ScenarioBundle, list[str]]] = []
    # a drop-in that replaces ExecStart= without the empty assignment first: systemd would refuse two commands
    b = _find("services-systemd-dropin", lambda b: "instead of the packaged" in b.task and b.user == "root")
    cases.append(
        (
            "ExecStart not reset",
            b,
            [r.replace("\nExecStart=\n", "\n").replace("'ExecStart=' ", "") for r in b.reference],
        )
    )
    # the change made in the packaged unit instead of a drop-in
    b = _find("services-systemd-dropin", lambda b: "LimitNOFILE" in b.task and b.user == "root")
    vendor = _path_in(b.task, r"/usr/lib/systemd/system/\S+\.service")
    n = re.search(r"LimitNOFILE\D*(\d+)|(\d+) open files", b.task)
    limit = next(g for g in (n.groups() if n else ()) if g) if n else "65536"
    cases.append(("vendor unit edited", b, [f"sed -i 's/^\\[Service\\]$/&\\nLimitNOFILE={limit}/' {vendor}"]))
    # sshd: the first value wins, so a line appended at the end changes nothing (and may land in a Match block)
    b = _find(
        "services-directive-config",
        lambda b: b.task.count(";") == 0 and "X11 forwarding" in b.task and "sshd" in b.check,
    )
    cases.append(("sshd appended", b, ["echo 'X11Forwarding no' >> /etc/ssh/sshd_config"]))
    # sshd: an included drop-in that keeps passwords on wins over the main file
    b = _find(
        "services-directive-config",
        lambda b: any("PasswordAuthentication yes" in c for c in b.files.values() if c.count("\n") == 1),
    )
    cases.append(("sshd include ignored", b, _without(b.reference, "sshd_config.d/")))
    # conf.d: a snippet that sorts first is overridden by the ones after it
    b = _find(
        "services-confd-precedence", lambda b: "read after all the others" in b.task and b.user == "root"
    )
    key, value = re.search(r"use (\w+) = (\S+)", b.task).groups()  # type: ignore[union-attr]
    confd = _path_in(b.reference[0], r"/\S+/conf\.d")
    cases.append(("conf.d sorts first", b, [f"echo '{key} = {value}' > {confd}/00-mine.conf"]))
    # a defaults file with the variable appended a second time
    b = _find(
        "services-defaults-file", lambda b: re.search(r"(set|change) \w+ to \S+ \(it is", b.task) is not None
    )
    name, value = re.search(r"(?:set|change) (\w+) to (\S+) \(it is", b.task).groups()  # type: ignore[union-attr]
    path = _path_in(b.reference[-1], r"(~|/)\S+")
    cases.append(("defaults duplicate", b, [f"echo '{name}={value}' >> {path}"]))
    # backups: copied without keeping owner/mode, or taken after the edit
    b = _find("services-config-backup-edit", lambda b: b.user == "root" and "cp -p " in " ".join(b.reference))
    cases.append(("backup loses owner", b, [r.replace("cp -p ", "cp ") for r in b.reference]))
    b = _find("services-config-backup-edit", lambda b: any(r.startswith("cp -") for r in b.reference))
    cp = next(r for r in b.reference if r.startswith("cp -"))
    sed = next(r for r in b.reference if r.startswith("sed -i"))
    cases.append(("backup after edit", b, [*_without(b.reference, "cp -", "sed -i"), sed, cp]))
    # a unit with two faults, one of them fixed
    b = _find("services-unit-repair", lambda b: sum(r.startswith("sed -i") for r in b.reference) == 2)
    first_fix = next(r for r in b.reference if r.startswith("sed -i"))
    cases.append(("half a repair", b, _without(b.reference, first_fix)))
    # supervisor: numprocs without a process_name per copy
    b = _find("services-supervisor-program", lambda b: "numprocs" in " ".join(b.reference))
    cases.append(
        (
            "numprocs alone",
            b,
            [
                r.replace("'process_name=%(program_name)s_%(process_num)02d' ", "").replace(
                    "process_name=%(program_name)s_%(process_num)02d\n", ""
                )
                for r in b.reference
            ],
        )
    )
    # logrotate: the right block with the wrong retention
    b = _find(
        "services-logrotate-config", lambda b: "Create" in b.task or "Write" in b.task or "set up" in b.task
    )
    cases.append(
        (
            "logrotate retention",
            b,
            [re.sub(r"rotate (\d+)", lambda m: f"rotate {int(m.group(1)) + 1}", r) for r in b.reference],
        )
    )
    # merge: the whole shipped file appended (every old key twice)
    b = _find("services-merge-new-defaults", lambda b: b.user == "root")
    live = _path_in(b.reference[-1], r"/\S+")
    dist = next(p for p in b.files if p != live)
    cases.append(("merge appends all", b, [f"grep -v '^#' {dist} >> {live}"]))
    # inventory: one row too many
    b = _find("services-unit-inventory", lambda b: b.user == "root")
    out = _path_in(b.reference[-1], r"/root/\S+")
    cases.append(("inventory extra row", b, [*b.reference, f"echo extra >> {out}"]))
    # a new unit whose ExecStart is not the command asked for
    b = _find("services-systemd-unit", lambda b: b.user == "root")
    cases.append(
        ("unit wrong command", b, [r.replace("ExecStart=", "ExecStart=/usr/bin/env ") for r in b.reference])
    )
    return cases


@pytest.mark.docker
@pytest.mark.slow
def test_references_pass_and_plausible_wrong_answers_fail(sandbox_image: str) -> None:

    cases = _wrong_answers()
    results = gate_bundles([b for _, b, _ in cases], sandbox_image, max_parallel=4)
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
