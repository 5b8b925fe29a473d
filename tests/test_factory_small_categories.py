"""Issue 39's families for the smaller categories (archives, disk, processes, logs, networking, users, environment).

Without Docker: every family is registered, draws reproducibly, varies (whole phrasings, state-changing cores,
distinct instructions), starts where real tasks do (root and ``operator``, folders other than home) and stays away
from the held-out skills. With Docker: every family's draws are admitted by the real gate, and two plausible wrong
answers per family (the volumes joined in glob order, the pidfile of a process owned by someone else removed,
the job's output compressed before it finished, the request id matched as a substring, ...) fail its check.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Callable

import pytest
from sandbox_fixtures import check_exits_after

from bashgym_assets.scenarios import skills
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.catalog import command_flags
from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.generate import draw_family, normalise_instruction
from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES, UNSEEN_BOUND
from bashgym_assets.scenarios.factory.variety import yield_variety

NEW = {
    "archives-split-volumes": "archives",
    "archives-update-member": "archives",
    "archives-checksum-manifest": "archives",
    "disk-usage-by-owner": "disk",
    "disk-cache-budget-prune": "disk",
    "disk-sparse-allocation": "disk",
    "processes-stale-pidfile": "processes",
    "processes-background-worker": "processes",
    "processes-wait-then-act": "processes",
    "logs-merge-rotated": "logs",
    "logs-trace-request": "logs",
    "logs-latency-report": "logs",
    "networking-nsswitch-order": "networking-offline",
    "networking-interfaces-static": "networking-offline",
    "users-rename-account": "users",
    "users-new-account-defaults": "users",
    "environment-login-reads-bashrc": "environment",
    "environment-shell-history": "environment",
}
ROOT_ONLY = {"users-rename-account", "users-new-account-defaults"}  # account databases are root's
FAMILIES = {n: f for n, f in all_families().items() if n in NEW}
# commands of held-out skills these families must not use (rotation by hand, truncation, signals, links, cron)
_HELD_OUT_COMMANDS = {"ln", "crontab", "truncate", "logrotate", "pkill", "killall"}


def test_the_families_are_registered_in_their_categories_and_train() -> None:
    assert {n: f.category for n, f in FAMILIES.items()} == NEW
    assert not set(FAMILIES) & HELD_OUT_FAMILIES


@pytest.mark.parametrize("name", sorted(NEW))
def test_each_family_draws_reproducibly_with_real_variety(name: str) -> None:
    fam = FAMILIES[name]
    assert fam.make("s:4") == fam.make("s:4")
    y = draw_family(fam, 55, seed=0)
    assert y.kept == 55 and not y.errors, y.errors
    v = yield_variety(y)
    assert v.phrasings >= 8, v
    assert v.cores >= 12, v
    assert len({b.difficulty for b in y.bundles}) >= 2
    # more than 150 distinct instructions (names and numbers masked) within 900 draws
    seen = set()
    for i in range(900):
        b, world = fam.make_world(f"n:{i}")
        seen.add(normalise_instruction(b.task, world.values))
        if len(seen) > 150:
            break
    assert len(seen) > 150, len(seen)


@pytest.mark.parametrize("name", sorted(NEW))
def test_each_family_starts_where_real_tasks_do(name: str) -> None:
    bundles = draw_family(FAMILIES[name], 40, seed=5).bundles
    users = Counter(b.user for b in bundles)
    assert users["root"] >= 5 and (users["operator"] >= 5 or name in ROOT_ONLY), users
    folders = Counter((b.workdir or "~").split("/")[1] if b.workdir else "~" for b in bundles)
    assert len(folders) >= 4 and folders["~"] < 30, folders  # /srv, /opt, /app, /data, /var ... not only home
    for b in bundles:
        if b.user == "operator":
            assert not (b.workdir or "").startswith("/root"), b.workdir


@pytest.mark.parametrize("name", sorted(NEW))
def test_no_family_uses_a_held_out_skill(name: str) -> None:
    for b in draw_family(FAMILIES[name], 40, seed=6).bundles:
        used = {unit.split()[0] for unit in command_flags(b.reference)}
        assert not used & _HELD_OUT_COMMANDS, (used, b.reference)
        kills = {u for u in command_flags(b.reference) if u.startswith("kill")}
        assert kills <= {"kill -0"}, b.reference  # a liveness probe, never a signal


@pytest.mark.slow
def test_held_out_families_stay_far_from_these_families() -> None:
    groups = {n: tuple(_skill_docs(n, 30)) for n in [*NEW, *sorted(HELD_OUT_FAMILIES)]}
    scores = skills.family_scores(groups)
    for held in sorted(HELD_OUT_FAMILIES):
        name, score = skills.nearest_family(scores, held, list(NEW))
        assert score < UNSEEN_BOUND - 0.05, f"{held} ~ {name} {score:.3f}"  # measured: at most 0.12


def _skill_docs(name: str, n: int) -> list[skills.SkillDoc]:
    fam = all_families()[name]
    out = []
    for i in range(n):
        b, values = fam.make(f"0:{i}")
        out.append(skills.skill_doc(b.id, b.task, b.reference, group=name, values=values))
    return out


# ---- in real sandboxes -------------------------------------------------------------------------------------------
def spec_of(b: ScenarioBundle) -> dict:
    """The JSON spec a ``py_check`` check carries (its paths are what a wrong answer needs)."""
    first = next(line for line in b.check.splitlines() if line.startswith("python3 - "))
    return json.loads(shlex.split(first)[2])


def _find(name: str, want: Callable[[ScenarioBundle], bool]) -> ScenarioBundle:
    """The first draw of a family (seeds ``w:0``, ``w:1``, ...) that ``want`` accepts."""
    for i in range(600):
        b, _ = FAMILIES[name].make(f"w:{i}")
        if want(b):
            return b
    raise AssertionError(f"no draw of {name} fits")


def _refs(b: ScenarioBundle, needle: str) -> bool:
    return any(needle in r for r in b.reference)


def _swap(b: ScenarioBundle, old: str, new: str) -> list[str]:
    """The reference with one text replaced (``old`` must occur)."""
    assert _refs(b, old), (old, b.reference)
    return [r.replace(old, new) for r in b.reference]


def _without(b: ScenarioBundle, needle: str) -> list[str]:
    return [r for r in b.reference if needle not in r]


def wrong_answers() -> list[tuple[str, str, ScenarioBundle, list[str]]]:
    """(family, label, bundle, commands): two plausible wrong answers a family."""
    cases: list[tuple[str, str, ScenarioBundle, list[str]]] = []

    def add(name: str, label: str, b: ScenarioBundle, commands: list[str]) -> None:
        cases.append((name, label, b, commands))

    # archives-split-volumes: pieces of a million bytes, not MiB; volumes of a near-miss name joined in
    n = "archives-split-volumes"
    b = _find(
        n, lambda b: "outdir" in spec_of(b) and spec_of(b).get("size") == 1048576 and _refs(b, "split -b 1M")
    )
    add(n, "decimal megabytes", b, _swap(b, "split -b 1M", "split -b 1000000"))
    b = _find(n, lambda b: "parts_prefix" in spec_of(b) and _refs(b, "cat ") and "extract" not in spec_of(b))
    prefix = spec_of(b)["parts_prefix"]
    folder, archive = prefix.rsplit("/", 1)[0], spec_of(b)["archive"]
    add(
        n,
        "glob takes the old volumes too",
        b,
        [f"mkdir -p $(dirname {archive})", f"cat {folder}/*.* > {archive}"],
    )
    # archives-update-member: repacked without compression; the new file added at the top, not at its path
    n = "archives-update-member"
    b = _find(n, lambda b: spec_of(b)["fmt"] == "tar.gz" and spec_of(b)["absent"])
    s = spec_of(b)
    add(
        n,
        "compression dropped",
        b,
        [
            "mkdir -p /tmp/x",
            f"tar -xzf {s['archive']} -C /tmp/x",
            f"rm /tmp/x/{s['absent'][0]}",
            f"tar -cf {s['archive']} -C /tmp/x {s['absent'][0].split('/')[0]}",
        ],
    )
    b = _find(n, lambda b: spec_of(b)["fmt"] == "tar" and any(r.startswith("cp ") for r in b.reference))
    s = spec_of(b)
    new_file = next(r.split()[1] for r in b.reference if r.startswith("cp "))
    add(n, "member at the wrong path", b, [f"tar -rf {s['archive']} {new_file}"])
    # archives-checksum-manifest: the manifest lists itself; the report keeps the OK lines
    n = "archives-checksum-manifest"
    b = _find(n, lambda b: spec_of(b)["mode"] == "write")
    s = spec_of(b)
    tool = f"{s['algo']}sum"
    add(
        n,
        "manifest lists itself",
        b,
        [f"cd {s['root']} && find . -type f -exec {tool} {{}} + > {s['manifest']}"],
    )
    b = _find(n, lambda b: spec_of(b)["mode"] == "report")
    s = spec_of(b)
    add(
        n,
        "report of every file",
        b,
        [f"cd {s['root']} && {s['algo']}sum -c {s['manifest']} > {s['report']} 2>&1"],
    )
    # disk-usage-by-owner: KiB counted, not bytes; the smallest first
    n = "disk-usage-by-owner"
    b = _find(n, lambda b: spec_of(b)["mode"] == "all" and _refs(b, "-printf '%u %s\\n'"))
    add(n, "kibibytes", b, _swap(b, "-printf '%u %s\\n'", "-printf '%u %k\\n'"))
    b = _find(n, lambda b: spec_of(b)["mode"] == "all" and _refs(b, "sort -k2,2nr"))
    add(n, "ascending", b, _swap(b, "sort -k2,2nr", "sort -k2,2n"))
    # disk-cache-budget-prune: the cache marker deleted with the old entries; entries chosen by name, not age
    n = "disk-cache-budget-prune"
    b = _find(n, lambda b: True)
    add(n, "marker deleted", b, [*b.reference, f"rm {spec_of(b)['cache']}/CACHEDIR.TAG"])
    b = _find(n, lambda b: spec_of(b)["mode"] == "keep")
    s = spec_of(b)
    add(
        n,
        "by name",
        b,
        [f"find {s['cache']} -name '*.{s['ext']}' | sort | tail -n +{len(s['kept']) + 1} | xargs rm"],
    )
    # disk-sparse-allocation: a ballast made sparse with truncate; a sparse copy that lost its owner
    n = "disk-sparse-allocation"
    b = _find(n, lambda b: spec_of(b)["mode"] == "ballast")
    s = spec_of(b)
    add(n, "sparse ballast", b, [f"truncate -s {s['size']} {s['path']}", f"chmod 600 {s['path']}"])
    b = _find(
        n, lambda b: spec_of(b)["mode"] == "sparsify" and b.user == "root" and spec_of(b)["owner"] != "root"
    )
    p = spec_of(b)["path"]
    add(
        n,
        "owner lost",
        b,
        [
            f"cp --sparse=always {p} {p}.tmp",
            f"mv {p}.tmp {p}",
            f"chmod {oct(spec_of(b)['mode_bits'])[2:]} {p}",
        ],
    )
    # processes-stale-pidfile: kill -0 as operator calls another user's live daemon dead; the reused PID trusted
    n = "processes-stale-pidfile"
    b = _find(
        n,
        lambda b: (
            b.user == "operator"
            and spec_of(b)["mode"] == "remove"
            and any(re.search(r"^st \S+ \S+svc ", c, re.M) for c in b.files.values())
        ),
    )
    pidfiles = spec_of(b)["live"][0].rsplit("/", 1)[0]
    add(
        n,
        "kill -0 as operator",
        b,
        [f'for f in {pidfiles}/*.pid; do kill -0 "$(cat "$f")" 2>/dev/null || rm "$f"; done'],
    )
    b = _find(n, lambda b: "not the program" in b.task and spec_of(b)["mode"] == "remove")
    pidfiles = spec_of(b)["live"][0].rsplit("/", 1)[0]
    add(
        n,
        "reused PID trusted",
        b,
        [f'for f in {pidfiles}/*.pid; do [ -d "/proc/$(cat "$f")" ] || rm "$f"; done'],
    )
    # processes-background-worker: stderr not logged; the PID of the wrong process recorded
    n = "processes-background-worker"
    b = _find(
        n, lambda b: spec_of(b)["env"] is None and spec_of(b)["cwd"] is None and spec_of(b)["nice"] is None
    )
    s = spec_of(b)
    script = next(p for p in b.files if p.endswith(s["script"]))
    args = " ".join(s["args"])
    add(
        n,
        "stderr lost",
        b,
        [
            f"mkdir -p $(dirname {s['log']}) $(dirname {s['pidfile']})",
            f"{script} {args} > {s['log']} 2>/dev/null & echo $! > {s['pidfile']}",
        ],
    )
    add(
        n,
        "shell PID recorded",
        b,
        [
            f"mkdir -p $(dirname {s['log']}) $(dirname {s['pidfile']})",
            f"({script} {args} >> {s['log']} 2>&1 &)",
            f"echo $$ > {s['pidfile']}",
        ],
    )
    # processes-wait-then-act: acted at once; the job killed to get on with it
    n = "processes-wait-then-act"
    b = _find(n, lambda b: spec_of(b)["action"] == "gzip")
    wait = b.reference[1]
    add(n, "did not wait", b, [r for r in b.reference if r != wait])
    b = _find(n, lambda b: spec_of(b)["action"] == "move" and b.user == "root")
    procs = re.findall(
        r"^st (\S+) ", next(c for p, c in b.files.items() if p.startswith("/root/.launch")), re.M
    )
    add(
        n,
        "job killed",
        b,
        [f"pkill -x {procs[0]}; sleep 0.2", *[r for r in b.reference if r != b.reference[1]]],
    )
    # logs-merge-rotated: the gzipped files concatenated raw; the neighbour service's logs merged in
    n = "logs-merge-rotated"
    b = _find(n, lambda b: bool(spec_of(b)["gz"]))
    s = spec_of(b)
    logdir = next(iter(s["gz"])).rsplit("/", 1)[0]
    base = next(iter(s["gz"])).rsplit("/", 1)[1].split(".log")[0] + ".log"
    add(n, "gzip bytes copied", b, [f"cat {logdir}/{base}* > {s['out']}"])
    add(n, "other service merged", b, [f"zcat -f {logdir}/* | sort > {s['out']}"])
    # logs-trace-request: the id matched as a substring; the trace left in file order
    n = "logs-trace-request"
    b = _find(n, lambda b: not spec_of(b)["json"] and "trace-" in spec_of(b)["out"])
    s = spec_of(b)
    logdir = next(iter(s["same"])).rsplit("/", 1)[0]
    rid = re.search(r"trace-(\w+)\.log", s["out"]).group(1)  # type: ignore[union-attr]
    add(n, "substring match", b, [f"grep -h {rid} {logdir}/*.log | sort > {s['out']}"])
    add(n, "file order", b, [f"grep -hw '[a-z_]*={rid}' {logdir}/*.log > {s['out']}"])
    # logs-latency-report: times sorted as text; sums instead of means
    n = "logs-latency-report"
    b = _find(n, lambda b: spec_of(b)["mode"] == "slowest" and "." not in spec_of(b)["rows"][0][1])
    s = spec_of(b)
    log = next(p for p in s["same"] if not p.endswith("error.log"))
    add(
        n,
        "text sort",
        b,
        [f"awk '{{print $NF, $7}}' {log} | sort -r | head -n {len(s['rows'])} > {s['out']}"],
    )
    b = _find(n, lambda b: spec_of(b)["mode"] == "mean")
    s = spec_of(b)
    log = next(p for p in s["same"] if not p.endswith("error.log"))
    add(
        n,
        "sum not mean",
        b,
        [f"awk '{{s[$7] += $NF}} END {{for (p in s) print p, s[p]}}' {log} | sort -k2 -nr > {s['out']}"],
    )
    # networking-nsswitch-order: a second hosts line appended (glibc reads one); the sources in another order
    n = "networking-nsswitch-order"
    b = _find(n, lambda b: spec_of(b)["want"]["hosts"] not in (["files", "dns"], ["dns", "files"]))
    path = spec_of(b)["path"]
    add(n, "hosts twice", b, [f"echo 'hosts: {' '.join(spec_of(b)['want']['hosts'])}' >> {path}"])
    add(
        n,
        "order",
        b,
        [f"sed -i 's/^hosts:.*/hosts: {' '.join(reversed(spec_of(b)['want']['hosts']))}/' {path}"],
    )
    # networking-interfaces-static: the method switched without an address; a second interface not brought up
    n = "networking-interfaces-static"
    b = _find(n, lambda b: any(v.get("gateway") and "dns" not in v for v in spec_of(b)["want"].values()))
    path = spec_of(b)["path"]
    add(n, "static without address", b, [f"sed -i 's/inet dhcp/inet static/' {path}"])
    b = _find(n, lambda b: len(spec_of(b)["auto"]) == 3)
    add(n, "not auto", b, [r.replace(f"auto {spec_of(b)['auto'][-1]}", "") for r in b.reference])
    # users-rename-account: the login renamed but its home left behind; a new account made and the old deleted
    n = "users-rename-account"
    b = _find(
        n,
        lambda b: spec_of(b)["home"].endswith(spec_of(b)["new"]) and spec_of(b)["group"] == spec_of(b)["new"],
    )
    s = spec_of(b)
    add(n, "home not moved", b, [f"usermod -l {s['new']} {s['old']}", f"groupmod -n {s['new']} {s['old']}"])
    add(
        n,
        "recreated",
        b,
        [f"userdel -r {s['old']}", f"useradd -m -s /bin/bash -G {','.join(s['teams'])} {s['new']}"],
    )
    # users-new-account-defaults: an existing account changed instead of the defaults; existing homes chmod-ed
    n = "users-new-account-defaults"
    b = _find(n, lambda b: "shell" in spec_of(b))
    add(
        n,
        "one account, not the default",
        b,
        [
            f"chsh -s /bin/bash {spec_of(b)['existing']}",
            *[r for r in b.reference if not re.search(r"SHELL|useradd (-D|--defaults)", r)],
        ],
    )
    b = _find(n, lambda b: "home_mode" in spec_of(b) and len(spec_of(b)) == 5)
    add(n, "existing homes", b, [f"chmod {oct(spec_of(b)['home_mode'])[2:]} /home/*"])
    # environment-login-reads-bashrc: ~/.bashrc sourced but ~/.profile still skipped; ~/.bashrc then read twice
    n = "environment-login-reads-bashrc"
    b = _find(n, lambda b: "bashrc" not in b.setup[0])
    shadow = re.search(r"> (\S+)$", b.setup[0]).group(1)  # type: ignore[union-attr]
    add(n, "profile still skipped", b, [f"echo '. ~/.bashrc' >> {shadow}"])
    b = _find(n, lambda b: "bashrc" in b.setup[0])
    shadow = re.search(r"> (\S+)$", b.setup[0]).group(1)  # type: ignore[union-attr]
    add(n, "bashrc twice", b, [f"echo '. ~/.profile' >> {shadow}"])
    # environment-shell-history: only login shells configured; only this session changed
    n = "environment-shell-history"
    b = _find(n, lambda b: "HISTSIZE" in b.task and "histappend" not in b.task and "PROMPT" not in b.task)
    size = re.search(r"(\d+) commands", b.task).group(1)  # type: ignore[union-attr]
    add(n, "login shells only", b, [f"echo 'HISTSIZE={size}' >> ~/.profile"])
    add(n, "this session only", b, [f"export HISTSIZE={size}", "history -w"])
    return cases


def test_every_family_has_two_wrong_answers() -> None:
    assert Counter(name for name, *_ in wrong_answers()) == dict.fromkeys(NEW, 2)


@pytest.mark.docker
@pytest.mark.slow
def test_gate_admits_every_family_and_wrong_answers_fail(sandbox_image: str) -> None:
    from bashgym_assets.scenarios.gate import gate_bundles

    cases = wrong_answers()
    # the cases' tasks (two of every new family); one fresh draw of each is gated in tests/test_factory.py
    bundles = list({b.id: b for *_, b, _ in cases}.values())
    results = gate_bundles(bundles, sandbox_image, max_parallel=4)
    bad = [(r.scenario_id, r.reason, r.detail[:400]) for r in results if not r.admitted]
    assert not bad, bad

    codes = check_exits_after([(bundle, commands) for *_, bundle, commands in cases], sandbox_image)
    passed = [
        (name, label) for (name, label, *_), code in zip(cases, codes, strict=True) if code in (0, None)
    ]
    assert not passed, passed
