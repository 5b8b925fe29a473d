"""Scenario variants: consistent renaming across every field, word boundaries, system names untouched, determinism,
train-only ids; over the whole bundled pack. The docker test certifies variants of diverse pack scenarios with the
real reference gate."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from bashgym_assets.scenarios import gate
from bashgym_assets.scenarios.bundle import ScenarioBundle, load_folder, parse_bundle
from bashgym_assets.scenarios.candidates import PACK_DIR
from bashgym_assets.scenarios.variants import (
    FLAG_RE,
    IMAGE_PATHS,
    PATH_RE,
    PROTECTED,
    WORD_RE,
    _word_pattern,
    apply_mapping,
    draw_mapping,
    find_candidates,
    make_pack_variants,
    make_variants,
    substitute,
)


@pytest.fixture(scope="module")
def pack() -> list[ScenarioBundle]:
    bundles, errors = load_folder(PACK_DIR)
    assert not errors
    return bundles


@pytest.fixture(scope="module")
def train(pack: list[ScenarioBundle]) -> list[ScenarioBundle]:
    return [b for b in pack if gate.split_for(b.id) == gate.TRAIN]


def _bundle(**fields) -> ScenarioBundle:
    base = {
        "task": "t",
        "category": "files",
        "difficulty": 1,
        "check": "exit 1",
        "reference": ["true"],
        "id": "a-test-bundle",
        "source": "test",
    }
    bundle = parse_bundle({**base, **fields})
    assert gate.split_for(bundle.id) == gate.TRAIN
    return bundle


def _fields(b: ScenarioBundle) -> dict[str, str]:
    """Every string of a bundle by a stable name, so parent and variant line up field by field."""
    out = {
        "task": b.task,
        "check": b.check,
        "announcement": b.announcement or "",
        "provider": b.provider.script if b.provider else "",
        "workdir": b.workdir or "",
    }
    out.update({f"setup{i}": c for i, c in enumerate(b.setup)})
    out.update({f"reference{i}": c for i, c in enumerate(b.reference)})
    for i, (k, v) in enumerate(sorted(b.files.items())):
        out[f"filekey{i}"], out[f"file{i}"] = k, v
    return out


def _count(token: str, text: str) -> int:
    return len(re.findall(_word_pattern(token), text))


# ---- the substitution ----------------------------------------------------------------------------------------------
def test_word_boundaries_leave_longer_words_alone() -> None:
    text = "cp ~/app/a.txt /tmp/app-1 && echo happy apples app_x APP app.log && grep -c app catalog"
    out = substitute(text, {"app": "harbor"})
    assert out == (
        "cp ~/harbor/a.txt /tmp/harbor-1 && echo happy apples app_x APP harbor.log && grep -c harbor catalog"
    )
    assert substitute("the catalog and the log", {"log": "ledger"}) == "the catalog and the ledger"


def test_replacement_is_simultaneous() -> None:
    assert substitute("alpha beta", {"alpha": "beta", "beta": "gamma"}) == "beta gamma"


def test_escape_sequences_end_a_word() -> None:
    assert (
        substitute(r"exp=$'project/a\nproject/b'", {"project": "pelican"}) == r"exp=$'pelican/a\npelican/b'"
    )


def test_a_synthetic_bundle_is_renamed_consistently() -> None:
    bundle = _bundle(
        task="Move every file of the inbox ~/atlas/inbox to ~/atlas/done and write their count to "
        "~/atlas_count.txt.",
        setup=[
            "mkdir -p /home/operator/atlas/inbox /home/operator/atlas/done",
            "cd /home/operator/atlas/inbox && touch r1.txt r2.txt catalog.md && echo atlas > /root/.atlas",
            "chown -R operator:operator /home/operator",
        ],
        check='#!/bin/bash\n[ -z "$(ls /home/operator/atlas/inbox)" ] && '
        '[ "$(cat /home/operator/atlas_count.txt)" = 3 ]\n',
        reference=["mv ~/atlas/inbox/* ~/atlas/done/", "ls ~/atlas/done | wc -l > ~/atlas_count.txt"],
    )
    [variant] = make_variants(bundle, 1, seed=3)
    assert "atlas" not in variant.model_dump_json()
    top, box = re.search(r"the inbox ~/(\w+)/(\w+) to", variant.task).groups()  # "inbox" the word stays
    assert (
        top[0] == "a" and box[0] == "i" and box != "inbox"
    )  # same initials: sorted listings keep their order
    assert variant.setup[0] == f"mkdir -p /home/operator/{top}/{box} /home/operator/{top}/done"
    assert f"{top}_count.txt" in variant.check and f"{top}_count.txt" in variant.reference[1]
    assert "catalog.md" in variant.setup[1] and f"/root/.{top}" in variant.setup[1]


def test_system_names_commands_and_flags_are_never_renamed() -> None:
    bundle = _bundle(
        task="Copy /etc/atlas/app.conf and /var/log/atlas/sort.log into ~/sort/ (keep the names).",
        setup=[
            "mkdir -p /etc/atlas /var/log/atlas /home/operator/sort",
            "echo x > /etc/atlas/app.conf",
            "echo y > /var/log/atlas/sort.log",
            "chown -R operator:operator /home/operator",
        ],
        check="#!/bin/bash\ncmp /etc/atlas/app.conf /home/operator/sort/app.conf\n",
        reference=["cp --preserve=mode /etc/atlas/app.conf /var/log/atlas/sort.log ~/sort/"],
    )
    [variant] = make_variants(bundle, 1, seed=0)
    assert "/etc/" in variant.task and "/var/log/" in variant.task and "~/sort/" in variant.task
    assert "sort.log" in variant.task  # `sort` is a command: never a name to change
    assert "--preserve=mode" in variant.reference[0]
    assert "atlas" not in variant.task and "app.conf" not in variant.task


def test_users_created_in_setup_get_people_names() -> None:
    bundle = _bundle(
        category="users",
        user="root",
        task="Lock the password of the account alice and set her shell to /usr/sbin/nologin.",
        setup=["useradd -m -s /bin/bash alice"],
        check="#!/bin/bash\npasswd -S alice | grep -q ' L ' && [ \"$(getent passwd alice | cut -d: -f7)\" = "
        "/usr/sbin/nologin ] && [ -d /home/alice ]\n",
        reference=["usermod -L -s /usr/sbin/nologin alice"],
    )
    [variant] = make_variants(bundle, 1, seed=1)
    name = re.search(r"account (\w+)", variant.task).group(1)
    assert name != "alice" and name[0] == "a"
    assert f"useradd -m -s /bin/bash {name}" == variant.setup[0]
    assert f"/home/{name}" in variant.check and "/usr/sbin/nologin" in variant.check


def test_numbers_shared_by_task_and_check_change_together() -> None:
    bundle = _bundle(
        category="logs",
        task="Save the last 40 lines of ~/logs/events.log to ~/recent.txt.",
        setup=[
            "mkdir -p /home/operator/logs && seq 1 500 > /home/operator/logs/events.log",
            "chown -R operator:operator /home/operator",
        ],
        check='#!/bin/bash\n[ "$(wc -l < /home/operator/recent.txt)" -eq 40 ] && '
        '[ "$(head -1 /home/operator/recent.txt)" = 461 ]\n',
        reference=["tail -n 40 ~/logs/events.log > ~/recent.txt"],
    )
    variants = make_variants(bundle, 4, seed=0)
    assert variants
    for v in variants:
        n = re.search(r"last (\d+) lines", v.task).group(1)
        assert len(n) == 2 and 24 <= int(n) <= 64  # the same order of magnitude
        assert f"-eq {n} ]" in v.check and f"tail -n {n} " in v.reference[0]
        assert "seq 1 500" in v.setup[0]  # not in the task: left alone


def test_a_bundle_sharing_nothing_safe_gets_no_variants() -> None:
    bundle = _bundle(
        task="Write the names of the groups you belong to into ~/groups.txt, one per line.",
        check="#!/bin/bash\ndiff <(id -nG operator | tr ' ' '\\n') /home/operator/groups.txt\n",
        reference=["id -nG | tr ' ' '\\n' > ~/groups.txt"],
    )
    assert find_candidates(bundle) == []
    assert make_variants(bundle, 3) == []


def test_held_out_bundles_and_variants_get_no_variants(pack: list[ScenarioBundle]) -> None:
    held_out = [b for b in pack if gate.split_for(b.id) == gate.HELD_OUT]
    assert held_out
    assert all(make_variants(b, 3) == [] for b in held_out)
    some = next(v for b in pack for v in make_variants(b, 1))
    assert make_variants(some, 2) == []
    external = _bundle(
        id="a-test-bundle",
        task="Move ~/atlas/a.txt to ~/atlas/b.txt",
        check="#!/bin/bash\n[ -f /home/operator/atlas/b.txt ]\n",
        reference=["mv ~/atlas/a.txt ~/atlas/b.txt"],
    ).model_copy(update={"id": "ext-tb-one"})
    assert make_variants(external, 2) == []


# ---- over the whole pack ---------------------------------------------------------------------------------------------
def test_pack_variants_validate_differ_and_inherit_the_split(
    pack: list[ScenarioBundle], train: list[ScenarioBundle]
) -> None:
    variants = make_pack_variants(pack, 3, seed=0)
    by_parent: dict[str, list[ScenarioBundle]] = {}
    for v in variants:
        parent = gate.scenario_family(v.id)
        by_parent.setdefault(parent, []).append(v)
        assert re.fullmatch(re.escape(parent) + r"\.var-[123]", v.id)
        assert gate.split_for(v.id) == gate.TRAIN
        assert v.source == "bashgym-pack+variant"
        assert parse_bundle(v.model_dump(mode="json", exclude_none=True)).id == v.id
    parents = {b.id: b for b in pack}
    assert set(by_parent) <= {b.id for b in train}
    for pid, vs in by_parent.items():
        hashes = {parents[pid].content_hash()} | {v.content_hash() for v in vs}
        assert len(hashes) == len(vs) + 1  # each differs from its parent and its siblings
        for v in vs:
            assert v.category == parents[pid].category and v.difficulty == parents[pid].difficulty
            assert v.user == parents[pid].user and v.task != parents[pid].task
    # Most train scenarios share something renameable with their task text.
    assert len(by_parent) >= 0.75 * len(train)


def test_pack_renaming_is_consistent_across_every_field(train: list[ScenarioBundle]) -> None:
    """Each renamed token occurs in the variant exactly where it occurred in the parent, field by field."""
    checked = 0
    for b in train:
        candidates = find_candidates(b)
        if not candidates:
            continue
        mapping = draw_mapping(b, candidates, random.Random(f"test:{b.id}"))
        names_only = {c.token for c in candidates if c.names_only}
        v = apply_mapping(b, mapping, f"{b.id}.var-1", names_only=names_only)
        before, after = _fields(b), _fields(v)
        assert before.keys() == after.keys()
        for old, new in mapping.items():
            assert not any(_count(new, text) for text in before.values()), (b.id, new)  # a fresh value
            for name, text in before.items():
                shown = name in ("task", "announcement", "provider")
                if shown and old in names_only:
                    continue
                forms = [(old, new)] + ([(old.capitalize(), new.capitalize())] if old.islower() else [])
                for o, n in forms:
                    assert _count(o, text) == _count(n, after[name]), (b.id, name, old, new)
                if not shown:
                    assert _count(old, after[name]) == 0, (b.id, name, old)
        checked += 1
    assert checked >= 100


def _system_prefixes(text: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for path in PATH_RE.findall(text):
        parts = path.rstrip(".,:;").split("/")
        for i in range(2, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if prefix in IMAGE_PATHS:
                out[prefix] += 1
    return out


def test_pack_variants_keep_system_paths_commands_flags_and_home(pack: list[ScenarioBundle]) -> None:
    parents = {b.id: b for b in pack}
    for v in make_pack_variants(pack, 2, seed=5):
        p = parents[gate.scenario_family(v.id)]
        for a, b in zip(_fields(p).values(), _fields(v).values(), strict=True):
            assert _system_prefixes(a) == _system_prefixes(b), v.id
            assert Counter(FLAG_RE.findall(a)) == Counter(FLAG_RE.findall(b)), v.id
            assert a.count("/home/operator") == b.count("/home/operator") and a.count("~") == b.count("~")
            words_a = Counter(t for t in WORD_RE.findall(a) if t.lower() in PROTECTED)
            words_b = Counter(t for t in WORD_RE.findall(b) if t.lower() in PROTECTED)
            assert words_a == words_b, (v.id, words_a - words_b, words_b - words_a)
        assert (p.provider is None) == (v.provider is None)
        if p.provider:
            assert v.provider.name == p.provider.name


def test_variants_are_deterministic_for_a_seed(train: list[ScenarioBundle]) -> None:
    one = [v.model_dump() for v in make_pack_variants(train, 2, seed=11)]
    two = [v.model_dump() for v in make_pack_variants(train, 2, seed=11)]
    other = [v.model_dump() for v in make_pack_variants(train, 2, seed=12)]
    assert one == two
    assert one != other


# ---- certified by the real gate -------------------------------------------------------------------------------------
def test_gate_admits_most_variants_of_diverse_pack_scenarios(
    train: list[ScenarioBundle], sandbox_image: str
) -> None:
    picked: dict[str, ScenarioBundle] = {}
    for b in train:
        if b.category not in picked:
            variants = make_variants(b, 1, seed=0)
            if variants:
                picked[b.category] = variants[0]
    sample = [picked[c] for c in sorted(picked)][:8]
    assert len({v.category for v in sample}) == 8
    results = gate.gate_bundles(sample, sandbox_image, max_parallel=2)
    admitted = [r for r in results if r.admitted]
    assert len(admitted) >= 6, [(r.scenario_id, r.reason, r.detail[:300]) for r in results if not r.admitted]
    assert all(r.split == gate.TRAIN for r in admitted)


# ---- the asset --------------------------------------------------------------------------------------------------------
def test_scenario_candidates_adds_pack_variants(
    bashgym_home, monkeypatch: pytest.MonkeyPatch, train: list[ScenarioBundle]
) -> None:
    import dagster as dg

    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.defs.scenarios import scenario_candidates
    from bashgym_assets.lake import Lake

    monkeypatch.setenv("BASHGYM_TEACHER_MODEL", "reference")
    monkeypatch.delenv("BASHGYM_SCENARIO_VARIANTS", raising=False)
    resources = {"bashgym": BashgymHome(home=str(bashgym_home))}

    def run(config: dict) -> tuple[dict, list[dict]]:
        result = dg.materialize(
            [scenario_candidates],
            resources=resources,
            run_config={"ops": {"scenario_candidates": {"config": config}}},
        )
        assert result.success
        meta = result.asset_materializations_for_node("scenario_candidates")[0].metadata
        return meta, Lake(root=bashgym_home / "lake").read_rows("scenario_candidates")

    meta, rows = run({})
    assert meta["variants"].value == 0 and not any(gate.VARIANT_RE.search(r["scenario_id"]) for r in rows)
    pack_rows = len(rows)

    meta, rows = run({"variants_per_scenario": 2})
    expected = make_pack_variants(train, 2, seed=0)
    assert meta["variants"].value == len(expected) > 100
    ids = [r["scenario_id"] for r in rows]
    assert len(ids) == pack_rows + len(expected) and len(set(ids)) == len(ids)
    assert {v.id for v in expected} <= set(ids)
    assert all(gate.split_for(i) == gate.TRAIN for i in ids if gate.VARIANT_RE.search(i))
    assert "files" in [r.data["category"] for r in meta["variants_by_category"].records]
