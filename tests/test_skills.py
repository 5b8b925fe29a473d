"""The skill-level similarity (``scenarios/skills.py``): calibrated on the twins an outside review found (they must
be flagged) and on pairs of genuinely different skills (they must not be), and the recorded evaluation split
(``factory/split.py``) re-measured: no train family teaches a held-out family's skill, and every bundled held-out
task with a train twin is recorded as such."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from bashgym_assets.scenarios import skills
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.candidates import load_pack
from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.generate import normalise_instruction
from bashgym_assets.scenarios.factory.similarity import EvalGuard
from bashgym_assets.scenarios.factory.split import BUNDLED_TRAIN_TWINS, HELD_OUT_FAMILIES, UNSEEN_BOUND
from bashgym_assets.scenarios.gate import HELD_OUT, split_for


@cache
def _draws(family: str, n: int) -> tuple[skills.SkillDoc, ...]:
    """``n`` distinct draws of a family (seed 0) as skill documents, drawn values masked."""
    fam = all_families()[family]
    seen: set[str] = set()
    docs: list[skills.SkillDoc] = []
    for i in range(n * 4):
        if len(docs) >= n:
            break
        b, values = fam.make(f"0:{i}")
        key = normalise_instruction(b.task, values)
        if key not in seen:
            seen.add(key)
            docs.append(skills.skill_doc(b.id, b.task, b.reference, group=family, values=values))
    return tuple(docs)


@cache
def _pack() -> dict[str, ScenarioBundle]:
    pack, _ = load_pack()
    return {b.id: b for b in pack}


def _bundled_doc(task_id: str) -> skills.SkillDoc:
    b = _pack()[task_id]
    return skills.skill_doc(b.id, b.task, b.reference)


# The twins of the outside review: bundled held-out task -> the train family it copies (issue 37)
REVIEW_TWINS = {
    "a-perms-world-writable-audit": "permissions-world-writable-report",
    "b-logs-compress-old": "logs-compress-old",
    "a-archives-gunzip-keep": "archives-compress-files",
    "b-data-sqlite-update-price": "data-sqlite-update",
    "a-text-top-ips": "logs-top-ips",
    "b-git-revert-last": "git-revert-commit",
    "b-data-jq-active-users": "data-jq-filter",
    "a-sched-cron-d-rotate": "scheduling-cron-d-file",
    "b-net-nginx-listen-port": "networking-listen-port-config",
    "b-git-feature-branch": "git-branch-commit",
}
# Families of the retired split that had a train twin (issue 37), and the family they copy
REVIEW_FAMILY_TWINS = [
    ("scripting-loop-rename", "files-rename-pattern"),
    ("environment-path-prepend", "environment-export-variable"),
    ("scheduling-cron-add", "scheduling-cron-reschedule"),
]
# Genuinely different skills, in the same category or sharing commands: never twins
DIFFERENT_FAMILIES = [
    ("git-revert-commit", "git-tag-release"),
    ("logs-rotate", "logs-top-ips"),
    ("archives-find-corrupt", "archives-list-contents"),
    ("users-list-group-members", "users-lock-account"),
    ("data-jq-filter", "permissions-chown-tree"),
    ("processes-renice", "text-dedupe-lines"),
    ("files-symlink", "files-count-by-extension"),
    ("scheduling-cron-d-file", "scheduling-crontab-backup"),
]
DIFFERENT_TASKS = {  # a bundled task and a family that shares words or commands with it, not its skill
    "b-data-csv-count-country": "data-column-stat",
    "a-procs-kill-tree": "processes-renice",
    "b-git-current-branch": "git-revert-commit",
    "a-users-duplicate-uids": "users-change-shell",
}


@pytest.mark.parametrize(("task_id", "family"), sorted(REVIEW_TWINS.items()))
def test_the_reviews_bundled_twins_are_flagged(task_id: str, family: str) -> None:
    match = skills.best_matches([_bundled_doc(task_id)], list(_draws(family, 80)))[0]
    assert match.twin, f"{task_id} ~ {family}: goal {match.goal:.2f}, skeleton {match.skeleton:.2f}"


@pytest.mark.parametrize(("a", "b"), REVIEW_FAMILY_TWINS)
def test_the_reviews_family_twins_score_as_twins(a: str, b: str) -> None:
    scores = skills.family_scores({a: _draws(a, 20), b: _draws(b, 20)})
    assert skills.family_similarity(scores, a, b) >= skills.FAMILY_TWIN


@pytest.mark.parametrize(("a", "b"), DIFFERENT_FAMILIES)
def test_different_skills_are_not_twins(a: str, b: str) -> None:
    scores = skills.family_scores({a: _draws(a, 20), b: _draws(b, 20)})
    assert skills.family_similarity(scores, a, b) < skills.FAMILY_TWIN
    twins = sum(m.twin for m in skills.best_matches(list(_draws(a, 20)), list(_draws(b, 20))))
    assert twins <= 2  # a stray draw may meet the other skill; the families do not


@pytest.mark.parametrize(("task_id", "family"), sorted(DIFFERENT_TASKS.items()))
def test_a_shared_idiom_under_another_goal_is_no_twin(task_id: str, family: str) -> None:
    match = skills.best_matches([_bundled_doc(task_id)], list(_draws(family, 40)))[0]
    assert not match.twin, (
        f"{task_id} ~ {match.nearest}: goal {match.goal:.2f}, skeleton {match.skeleton:.2f}"
    )


def test_skeleton_masks_arguments_and_drops_look_only_lines() -> None:
    a = ["ls -l ~/logs", "find ~/logs -name '*.log' -mtime +7 -exec gzip {} +", "ls -l ~/logs"]
    b = ["find /var/log/app -mtime +30 -name 'x*.log' -exec gzip {} +", "cat /var/log/app/README"]
    assert (
        skills.state_changing_core(a)
        == skills.state_changing_core(b)
        == ("find -exec find -mtime find -name gzip",)
    )
    assert skills.solution_skeleton(a)[0] == "ls -l"  # the whole skeleton keeps the looking
    # a redirect, sed -i, a mutating git subcommand or SQL write make a look-only command change state
    assert not skills.line_shape("grep -c ERROR app.log > count.txt").look_only
    assert skills.line_shape("grep -c ERROR app.log").look_only
    assert not skills.line_shape("sed -i 's/a/b/' f").look_only
    assert skills.line_shape("git log --oneline | head -3").look_only
    assert not skills.line_shape("git revert --no-edit HEAD").look_only
    assert not skills.line_shape("sqlite3 db.sqlite 'UPDATE t SET x = 1'").look_only
    assert skills.line_shape("sqlite3 db.sqlite 'SELECT count(*) FROM t'").look_only
    assert skills.line_shape("sort x | uniq -c").units[-1] == "sort|uniq"
    # a look-only solution keeps its looking: that is the skill
    assert skills.state_changing_core(["wc -l < ~/a.txt"]) == ("wc -l",)


def test_goal_masks_names_numbers_paths_and_quoted_text() -> None:
    a = skills.goal_tokens("Compress the .log files in ~/app older than 7 days", ["app"])
    b = skills.goal_tokens("compressing log files under /srv/x older than 30 days")
    assert "compress" in a and "compress" in b and "older" in a
    assert not any(t.isdigit() for t in a + b)


# ---- the guard that keeps the factory's train tasks off every evaluation task's skill --------------------------
def test_the_guard_refuses_a_reworded_renamed_twin_the_old_guard_let_through() -> None:
    fam = all_families()["logs-compress-old"]
    ev, _ = fam.make("0:0")
    guard = EvalGuard([ev])
    refused = 0
    for i in range(1, 12):
        b, values = fam.make(f"0:{i}")
        refused += guard(b, values)[0]
    assert refused >= 7  # most of the same skill in other wordings with other names: refused (0.16 before)
    other, values = all_families()["users-lock-account"].make("0:1")
    assert not guard(other, values)[0]


def test_family_scores_are_a_mean_of_best_matches() -> None:
    a = [skills.skill_doc(f"a{i}", "compress old log files", ["gzip x"]) for i in range(2)]
    b = [skills.skill_doc("b0", "compress old log files", ["gzip y"])]
    c = [skills.skill_doc("c0", "lock the account", ["usermod -L bob"])]
    s = skills.family_scores({"a": a, "b": b, "c": c})
    assert s[("a", "b")] == pytest.approx(1.0, abs=1e-6) and s[("a", "c")] == pytest.approx(0.0, abs=1e-6)
    assert skills.nearest_family(s, "a", ["b", "c"])[0] == "b"


def test_unknown_words_count_against_a_match() -> None:
    index = skills.SkillIndex([skills.skill_doc("e", "compress old logs", ["gzip x"])])
    near = index.scores([skills.skill_doc("t", "compress old logs", ["gzip y"])]).goal[0, 0]
    far = index.scores(
        [skills.skill_doc("t", "compress old logs quarterly payroll invoice", ["gzip y"])]
    ).goal[0, 0]
    assert near > 0.99 and far < near - 0.2


# ---- the recorded split, re-measured -------------------------------------------------------------------------
TEACHES = 0.1  # a family teaches a task's skill when one draw in ten or more is its twin (fewer: the guard's strays)


@pytest.mark.slow
def test_the_recorded_split_is_clean_at_the_skill_level() -> None:
    """Every held-out family is further from every train family than the recorded bound, and every bundled
    held-out task whose skill a train family teaches is recorded (``BUNDLED_TRAIN_TWINS``). A stray draw that is a
    twin of a clean evaluation task is the factory guard's to refuse (tested above), not the split's."""
    groups = {name: _draws(name, 55) for name in all_families()}  # as recorded: 55 draws a family, seed 0
    scores = skills.family_scores(groups)
    train = [n for n in groups if n not in HELD_OUT_FAMILIES]
    train_nearest = [skills.nearest_family(scores, a, train)[1] for a in train]
    p25 = float(np.percentile(train_nearest, 25))
    for held in sorted(HELD_OUT_FAMILIES):
        name, score = skills.nearest_family(scores, held, train)
        assert score < UNSEEN_BOUND, (
            f"{held} ~ {name} {score:.3f} (recorded bound {UNSEEN_BOUND}; p25 now {p25:.3f})"
        )
        assert score < skills.FAMILY_TWIN
    bundled = [b for b in _pack().values() if split_for(b.id) == HELD_OUT]
    index = skills.SkillIndex([skills.skill_doc(b.id, b.task, b.reference) for b in bundled])
    teaches: dict[str, list[str]] = {}  # bundled task -> train families that teach its skill
    for name in train:
        twins = index.scores(list(groups[name])).twin  # draws x bundled tasks
        for j in np.flatnonzero(twins.mean(axis=0) >= TEACHES):
            teaches.setdefault(index.docs[j].id, []).append(name)
    unrecorded = sorted(set(teaches) - set(BUNDLED_TRAIN_TWINS))
    assert not unrecorded, (
        f"bundled tasks a train family teaches, not recorded: {[(t, teaches[t]) for t in unrecorded]}"
    )
    assert all(f not in HELD_OUT_FAMILIES for f in BUNDLED_TRAIN_TWINS.values())


# ---- the blocking contamination check, at the skill level -----------------------------------------------------
def _gated_row(b: ScenarioBundle, split: str) -> dict:
    return {"scenario_id": b.id, "split": split, "bundle_json": b.model_dump_json()}


def test_contamination_check_refuses_a_skill_twin_row_and_the_builder_quarantines_it() -> None:
    from bashgym_assets.testing import datasets as syn
    from bashgym_assets.training_data import build as ds

    fam = all_families()["logs-rotate"]  # a held-out family
    held, _ = fam.make("0:0")
    twin, _ = fam.make("0:5")  # the same skill, other names and words, posing as a train task
    other, _ = all_families()["users-lock-account"].make("0:1")
    heldout = ds.heldout_from_rows([_gated_row(held, HELD_OUT)])
    assert heldout[0].reference == held.reference and heldout[0].guards_skill
    rows = [syn.trajectory(f"train-{b.id}", b.task, list(b.reference), kept=True) for b in (twin, other)]
    built = ds.build_sft([], rows, heldout=heldout)
    assert [r["scenario_id"] for r in built.rows] == [f"train-{other.id}"]
    assert any("skill twin of held-out scenario" in q.reason for q in built.quarantine)
    # the check on a written table says the same, and a bundled task with a train twin does not guard its skill
    sft_rows = ds.build_sft([], rows).rows
    bad = ds.contamination_violations(sft_rows, heldout)
    assert len(bad) == 1 and "skill twin" in bad[0]["reason"]
    bundled_twin = next(iter(BUNDLED_TRAIN_TWINS))
    relaxed = [h.model_copy(update={"id": bundled_twin, "guards_skill": False}) for h in heldout]
    assert (
        ds.heldout_from_rows([{**_gated_row(held, HELD_OUT), "scenario_id": bundled_twin}])[0].guards_skill
        is False
    )
    assert ds.contamination_violations(sft_rows, relaxed) == []


def test_the_contamination_check_reads_the_suites_bashgym_suite_gated(tmp_path) -> None:
    from bashgym_assets.defs.datasets import _heldout
    from bashgym_assets.lake import Lake

    lake = Lake(root=tmp_path / "lake")
    pipeline, _ = all_families()["logs-rotate"].make("0:0")
    suite_task = pipeline.model_copy(update={"id": "ext-mysuite-rotate"})
    lake.write("gated_scenarios", [_gated_row(pipeline, HELD_OUT)])
    lake.write("gated_scenarios", [_gated_row(suite_task, HELD_OUT)], partition="suite-mysuite")
    assert {h.id for h in _heldout(lake)} == {pipeline.id, "ext-mysuite-rotate"}
