"""The task factory: families as code, dedupe, the held-out family split, the near-duplicate guard, and tasks
certified by the real gate in real sandboxes (a reference passes, a wrong answer fails)."""

from __future__ import annotations

import json
import posixpath
import shlex
from pathlib import Path

import dagster as dg
import pytest
from sandbox_fixtures import check_exits_after

from bashgym_assets.rollout.rollouts import HeldOutScenarioError, check_train_only
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory import family as family_mod
from bashgym_assets.scenarios.factory.catalog import command_flags, coverage, task_rows
from bashgym_assets.scenarios.factory.family import CATEGORIES, Draft, Family, all_families, family_of
from bashgym_assets.scenarios.factory.generate import (
    DRAW_ERROR,
    DUPLICATE,
    NEAR_DUPLICATE,
    draw_family,
    generate,
    normalise_instruction,
)
from bashgym_assets.scenarios.factory.similarity import EvalGuard
from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES
from bashgym_assets.scenarios.factory.world import World
from bashgym_assets.scenarios.gate import HELD_OUT, TRAIN, gate_bundle, gate_bundles, split_for
from bashgym_assets.training_data.build import contamination_violations, heldout_from_rows

FAMILIES = all_families()


# ---- breadth ---------------------------------------------------------------------------------------------------
def test_breadth_families_categories_and_command_flags() -> None:
    assert len(FAMILIES) >= 60, f"only {len(FAMILIES)} families"
    assert {f.category for f in FAMILIES.values()} == set(CATEGORIES)
    run = generate(4, seed=0)
    cov = coverage(run.bundles)
    assert len(cov) >= 150, f"only {len(cov)} command+flag combinations"
    assert {b.difficulty for b in run.bundles} == {1, 2, 3, 4}


def test_every_held_out_family_exists_and_each_category_keeps_train_families() -> None:
    assert set(FAMILIES) >= HELD_OUT_FAMILIES
    for category in CATEGORIES:
        fams = [f for f in FAMILIES.values() if f.category == category]
        assert any(f.name not in HELD_OUT_FAMILIES for f in fams), category


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_draws_are_reproducible_valid_and_varied(name: str) -> None:
    fam = FAMILIES[name]
    a, _ = fam.make("s:1")
    b, _ = fam.make("s:1")
    assert a == b  # the same seed draws the same task
    assert family_of(a.id) == name and a.category == fam.category and 1 <= a.difficulty <= 4
    assert a.check.strip() and a.reference and a.task.strip()
    y = draw_family(fam, 40, seed=3)
    assert y.kept == 40 and not y.drops.get(DRAW_ERROR), (y.drops, y.errors)
    # several phrasings: the 40 tasks do not all open with the same three words
    openings = {" ".join(normalise_instruction(b.task).split()[:3]) for b in y.bundles}
    assert len(openings) >= 4, openings


# ---- dedupe ----------------------------------------------------------------------------------------------------
def test_normaliser_equates_renamed_copies_and_keeps_rephrasings_apart() -> None:
    one = normalise_instruction(
        "Move the log files in ~/atlas older than 7 days to /home/operator/old_a", ["atlas", "old_a"]
    )
    two = normalise_instruction(
        "Move the log files in ~/borealis older than 30 days to /home/operator/attic", ["borealis", "attic"]
    )
    other = normalise_instruction(
        "Relocate the log files in ~/atlas older than 7 days to /home/operator/old_a", ["atlas", "old_a"]
    )
    assert one == two and one != other
    assert normalise_instruction("Count 'ERROR' lines in app.log") == normalise_instruction(
        "Count 'WARN' lines in web.txt"
    )


def _fixed_family(name: str, texts: list[str], fail_every: int = 0) -> Family:
    def draw(w: World) -> Draft:
        n = w.randint(1, 10_000)
        if fail_every and n % fail_every == 0:
            raise RuntimeError("planted family bug")
        w.note(n)
        return Draft(
            task=w.pick(texts).format(n=n),
            check=f"test -f /tmp/x{n}",
            reference=[f"touch /tmp/x{n}"],
            difficulty=1,
        )

    return Family(name=name, category="files", skill="test", draw=draw)


def test_renamed_only_draws_are_dropped_as_duplicates_and_a_family_exhausts() -> None:
    fam = _fixed_family("test-one-phrasing", ["Create the file /tmp/x{n}"])
    y = draw_family(fam, 5, seed=0, max_draws_factor=4)
    assert y.kept == 1 and y.drops[DUPLICATE] == y.draws - 1 and y.exhausted
    fam2 = _fixed_family(
        "test-two-phrasings", ["Create the file /tmp/x{n}", "Please make an empty file /tmp/x{n}"]
    )
    assert draw_family(fam2, 5, seed=0).kept == 2


def test_a_failing_draw_is_counted_and_never_stops_the_family() -> None:
    fam = _fixed_family(
        "test-buggy", [f"Variant {k}: create /tmp/x{{n}}" for k in "abcdefghij"], fail_every=3
    )
    y = draw_family(fam, 6, seed=1)
    assert y.kept == 6 and y.drops[DRAW_ERROR] >= 1
    assert any("planted family bug" in e for e in y.errors)


# ---- the near-duplicate guard ------------------------------------------------------------------------------------
def _bundle(bid: str, task: str, reference: list[str]) -> ScenarioBundle:
    return ScenarioBundle(
        id=bid, task=task, category="files", difficulty=1, check="true", reference=reference
    )


def test_guard_refuses_near_copies_of_eval_tasks_and_keeps_the_rest() -> None:
    ev = _bundle(
        "heldout-x",
        "Compress every .log file in /var/log/app older than 3 days with gzip, keeping "
        "the newest ones untouched",
        ["find /var/log/app -name '*.log' -mtime +3 -exec gzip {} +"],
    )
    guard = EvalGuard([ev])
    near = _bundle(
        "gen.t.1",
        "Compress every .log file in /var/log/app older than 5 days with gzip, keeping "
        "the newest ones untouched",
        ["find /var/log/app -name '*.log' -mtime +5 -exec gzip {} +"],
    )
    far = _bundle("gen.t.2", "Add a user called kira to the group devops", ["usermod -aG devops kira"])
    refused, goal, skel, nearest = guard(near)
    assert refused and goal >= 0.5 and nearest == "heldout-x"
    refused, goal, skel, _ = guard(far)
    assert not refused and goal < 0.2 and skel < 0.2
    # both ways: the same solution under a loosely related wording is refused too
    same_solution = _bundle(
        "gen.t.3",
        "Old .log files in /var/log/app should be gzip compressed (older than 3 days only)",
        ["find /var/log/app -name '*.log' -mtime +3 -exec gzip {} +"],
    )
    assert guard(same_solution)[0]


def test_generate_refuses_train_tasks_copied_from_an_eval_task() -> None:
    name = next(n for n in FAMILIES if n not in HELD_OUT_FAMILIES)
    copy, _ = FAMILIES[name].make("0:0")  # the family's first draw, planted as an evaluation task
    ev = copy.model_copy(update={"id": "planted-eval"})
    run = generate(5, seed=0, families=[name], eval_tasks=[ev])
    y = run.yields[0]
    assert y.drops[NEAR_DUPLICATE] >= 1
    assert copy.id not in {b.id for b in y.bundles}
    assert any(s[0] == copy.id and s[3] == "planted-eval" for s in run.similarities)


# ---- held-out families never reach training ------------------------------------------------------------------------
def test_held_out_families_split_everywhere_an_id_is_split() -> None:
    held = "logs-rotate"
    train = next(n for n in FAMILIES if n not in HELD_OUT_FAMILIES)
    hb, _ = FAMILIES[held].make(0)
    tb, _ = FAMILIES[train].make(0)
    assert split_for(hb.id) == HELD_OUT and split_for(tb.id) == TRAIN
    assert split_for(hb.id, held_out_fraction=0.0) == HELD_OUT  # not a hash: the family decides
    with pytest.raises(HeldOutScenarioError):
        check_train_only([tb, hb])
    check_train_only([tb])
    # the contamination check catches a training row that carries a held-out family's task
    rows = [{**r, "bundle_json": r["bundle_json"]} for r in task_rows([hb, tb])]
    heldout = heldout_from_rows(rows)
    assert [h.id for h in heldout] == [hb.id]
    leak = {
        "scenario_id": "gen.other.1",
        "messages": [{"role": "user", "content": hb.task}, {"role": "assistant", "content": "ls"}],
    }
    clean = {
        "scenario_id": tb.id,
        "messages": [{"role": "user", "content": tb.task}, {"role": "assistant", "content": "ls"}],
    }
    bad = contamination_violations([leak, clean], heldout)
    assert len(bad) == 1


# ---- catalog ---------------------------------------------------------------------------------------------------
def test_command_flags_read_pipelines_wrappers_and_find_exec() -> None:
    got = command_flags(
        [
            "find ~/a -type f -mtime +3 -exec mv -t ~/b {} +",
            "sort -k2 -n f | head -n 3 > o",
            "sudo -u bob chmod -R g+w x",
            'for f in *.txt; do mv -- "$f" x; done',
            "git log --author=x --oneline",
            "echo $(grep -c foo f)",
        ]
    )
    assert {
        "find -type",
        "find -mtime",
        "find -exec",
        "mv -t",
        "sort -k",
        "sort -n",
        "head -n",
        "sudo -u",
        "chmod -R",
        "git log --author",
        "git log --oneline",
        "grep -c",
        "echo",
        "mv",
    } <= got
    assert not {"f", "bob -R", "x"} & got


# ---- in real sandboxes -------------------------------------------------------------------------------------------
@pytest.mark.docker
def test_a_family_end_to_end_in_a_real_sandbox_reference_passes_wrong_answer_fails(
    sandbox_image: str,
) -> None:

    fam = FAMILIES["files-move-older-than"]
    bundle, _ = fam.make("e2e:1")
    result = gate_bundle(bundle, sandbox_image)
    assert result.admitted, result.detail
    assert result.split == TRAIN  # a train family since the split of 2026-11-28 (factory/split.py)
    # the reference is drawn (find -exec, xargs, a loop, python3...): read the folders from the files and the check
    src = posixpath.dirname(next(iter(bundle.files)))
    dst = posixpath.dirname(
        shlex.split(bundle.check.splitlines()[1])[2]
    )  # [ -f DST/old ] && [ ! -e SRC/old ]
    wrong_answers = [
        [f"mkdir -p {dst}", f"mv {src}/* {dst}/"],  # moves the new files too
        [f"mkdir -p {dst}", f"cp -p {src}/* {dst}/"],  # copies instead of moving
    ]
    codes = check_exits_after([(bundle, w) for w in wrong_answers], sandbox_image)
    for wrong, code in zip(wrong_answers, codes, strict=True):
        assert code not in (0, None), (wrong, code)


@pytest.mark.docker
@pytest.mark.slow
def test_every_family_admitted_by_the_real_gate(sandbox_image: str) -> None:
    """One task of every family, certified in real sandboxes: setup, check fails before, reference passes."""
    bundles = [FAMILIES[n].make("gate:7")[0] for n in sorted(FAMILIES)]
    results = gate_bundles(bundles, sandbox_image, max_parallel=6)
    bad = [(r.scenario_id, r.reason, r.detail[:400]) for r in results if not r.admitted]
    assert not bad, bad


# ---- Dagster ---------------------------------------------------------------------------------------------------
def test_generated_scenarios_asset_partitions_metadata_and_candidates(bashgym_home: Path) -> None:
    from bashgym_assets.defs.factory import generated_scenarios
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.defs.scenarios import scenario_candidates
    from bashgym_assets.lake import Lake

    held = "logs-rotate"
    trains = [n for n in sorted(FAMILIES) if n not in HELD_OUT_FAMILIES][:2]
    keys = sorted([held, *trains])
    resources = {"bashgym": BashgymHome(home=str(bashgym_home))}
    instance = dg.DagsterInstance.ephemeral()
    for key in keys:  # one run per partition, as the UI launches them one by one
        result = dg.materialize(
            [generated_scenarios],
            resources=resources,
            partition_key=key,
            instance=instance,
            run_config={"ops": {"generated_scenarios": {"config": {"per_family": 3}}}},
        )
        assert result.success
    meta = result.asset_materializations_for_node("generated_scenarios")[0].metadata
    assert meta["tasks"].value == 3 and meta["families"].value == 1
    assert {
        "coverage",
        "per_family",
        "by_difficulty",
        "samples",
        "goal_similarity_to_eval",
        "dropped_by_reason",
    } <= set(meta)
    lake = Lake(root=bashgym_home / "lake")
    assert lake.partitions("generated_scenarios") == keys
    rows = lake.read_all("generated_scenarios").to_pylist()
    assert {r["split"] for r in rows if r["family"] == held} == {HELD_OUT}
    assert {r["split"] for r in rows if r["family"] in trains} == {TRAIN}
    assert all(json.loads(r["commands"]) for r in rows)
    sims = lake.read_all("generated_similarity").to_pylist()
    assert {r["scenario_id"].split(".")[1] for r in sims} == set(trains)  # only train families are guarded

    result = dg.materialize(
        [scenario_candidates],
        resources=resources,
        run_config={
            "ops": {
                "scenario_candidates": {
                    "config": {"include_pack": False, "include_external": False, "generated_per_family": 2}
                }
            }
        },
    )
    assert result.success
    cmeta = result.asset_materializations_for_node("scenario_candidates")[0].metadata
    assert cmeta["generated"].value == 6 and cmeta["by_origin"].value == {"factory": 6}


def test_registry_refuses_bad_family_names() -> None:
    with pytest.raises(ValueError):
        family_mod.family("Bad.Name", "files", "x")(lambda w: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError):
        family_mod.family("files-x", "not-a-category", "x")


@pytest.mark.slow
def test_one_run_draws_a_partition_range_as_the_demo_and_the_factory_command_do(bashgym_home: Path) -> None:
    from bashgym_assets.defs.factory import family_partitions, generated_scenarios
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.lake import Lake

    keys = family_partitions.get_partition_keys()
    result = dg.materialize(
        [generated_scenarios],
        resources={"bashgym": BashgymHome(home=str(bashgym_home))},
        tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
        run_config={"ops": {"generated_scenarios": {"config": {"per_family": 2}}}},
    )
    assert result.success
    meta = result.asset_materializations_for_node("generated_scenarios")
    assert len(meta) == len(keys)  # one materialization per family partition, one run
    assert Lake(root=bashgym_home / "lake").partitions("generated_scenarios") == keys
