"""The factory's variety counts (issue 37, item 4): whole phrasings, solution skeletons and state-changing cores per
family, collapsed families flagged, and all of it in ``generated_scenarios``' metadata."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg

from bashgym_assets.scenarios.factory.catalog import coverage
from bashgym_assets.scenarios.factory.family import Draft, Family, all_families
from bashgym_assets.scenarios.factory.generate import draw_family
from bashgym_assets.scenarios.factory.variety import (
    COLLAPSED_MAX,
    MIN_TASKS_TO_JUDGE,
    family_variety,
    run_variety,
    yield_variety,
)
from bashgym_assets.scenarios.factory.world import World

FAMILIES = all_families()
COLLAPSED = "files-count-by-extension"  # a real partition, played by ``_collapsed`` where the asset runs


def _collapsed(name: str = "test-collapsed") -> Family:
    """What files-count-by-extension was before issue 39: one solution (`find ... -type f | wc -l`) under three
    phrasings (the real families no longer collapse, so the shape is kept here)."""

    def draw(w: World) -> Draft:
        n = w.randint(1, 10_000)
        w.note(n)
        task = w.phrase(
            "Count the .py files under /tmp/d{n} and write the number to /tmp/n{n}.",
            "How many .py files does /tmp/d{n} contain? Put the count in /tmp/n{n}.",
            "Ticket: we need the number of *.py files in /tmp/d{n}. Save it to /tmp/n{n}.",
            n=n,
        )
        reference = [f"find /tmp/d{n} -type f -name '*.py' | wc -l > /tmp/n{n}", f"cat /tmp/n{n}"]
        return Draft(task=task, check=f"test -s /tmp/n{n}", reference=reference, difficulty=1)

    return Family(name=name, category="files", skill="test", draw=draw)


def _family(name: str, phrase_calls: int, templates: tuple[str, ...]) -> Family:
    """A family that writes its instruction with ``phrase_calls`` calls of ``World.phrase`` (0: fixed wording)."""

    def draw(w: World) -> Draft:
        n = w.randint(1, 10_000)
        w.note(n)
        parts = [w.phrase(*templates, n=n) for _ in range(phrase_calls)] or [f"Create /tmp/x{n}"]
        return Draft(
            task=" ".join(parts), check=f"test -f /tmp/x{n}", reference=[f"touch /tmp/x{n}"], difficulty=1
        )

    return Family(name=name, category="files", skill="test", draw=draw)


_TOUCH = "{Create|Make|Touch|Add} {an empty|a blank|a new} {file|file called} /tmp/x{n} {now|today|please|}."


def test_one_whole_phrasing_drawn_many_times_counts_one() -> None:
    # synonyms make 20 distinct instructions (the dedupe keeps them all), but they are one whole phrasing
    fam = _family("test-one-phrasing", 1, (_TOUCH,))
    y = draw_family(fam, 20, seed=0)
    assert y.kept == 20 and set(y.phrasings) == {b.id for b in y.bundles}
    v = yield_variety(y)
    assert (v.tasks, v.phrasings, v.skeletons, v.cores) == (20, 1, 1, 1)
    assert v.collapsed  # 20 tasks, one command line: flagged


def test_a_phrasing_is_the_sequence_of_templates_picked_and_no_call_counts_one() -> None:
    two = _family("test-two-calls", 2, ("First /tmp/x{n}.", "Second /tmp/x{n}."))
    ids = {w.phrasing_id() for w in (two.make_world(f"s:{i}")[1] for i in range(40))}
    assert len(ids) == 4 and all(i.count("+") == 1 and "#" in i for i in ids)  # 2 calls x 2 templates
    none = _family("test-no-call", 0, ())
    _, world = none.make_world("s:1")
    assert world.phrasing_id() == "-"
    y = draw_family(none, 5, seed=0)
    assert yield_variety(y).phrasings == 1


def test_real_families_collapsed_one_flagged_and_a_varied_one_not() -> None:
    y = draw_family(_collapsed(), 20, seed=0)
    v = yield_variety(y)
    assert v.tasks == 20 and v.phrasings == 3  # the family offers three whole templates
    assert v.skeletons == 1 and v.cores == 1 and v.top_core_tasks == 20
    assert v.commands >= 2 and v.command_flags >= v.commands
    assert v.collapsed

    varied = yield_variety(draw_family(FAMILIES["files-organise-by-extension"], 20, seed=0))
    assert varied.cores > COLLAPSED_MAX and not varied.collapsed

    # too few tasks to tell: never flagged, whatever the cores
    few = family_variety("test-collapsed", y.bundles[: MIN_TASKS_TO_JUDGE - 1], y.phrasings)
    assert few.cores == 1 and not few.collapsed


def test_run_totals_count_shapes_once_and_sum_phrasings() -> None:
    ys = [
        draw_family(_collapsed(), 12, seed=0),
        draw_family(_family("test-touch", 1, (_TOUCH,)), 12, seed=0),  # one core, as git-revert-commit had
    ]
    per, tot = run_variety(ys)
    assert tot.tasks == 24 and tot.families == 2
    assert tot.phrasings == sum(v.phrasings for v in per)
    assert tot.cores == 2  # each family has its own one core
    assert tot.collapsed == 2 and abs(tot.core_share - 2 / 24) < 1e-9


def test_generated_scenarios_metadata_carries_the_variety(bashgym_home: Path, monkeypatch) -> None:
    from bashgym_assets.defs.factory import generated_scenarios
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.scenarios.factory import family as registry

    monkeypatch.setitem(registry.FAMILIES, COLLAPSED, _collapsed(COLLAPSED))

    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        [generated_scenarios],
        resources={"bashgym": BashgymHome(home=str(bashgym_home))},
        partition_key=COLLAPSED,
        instance=instance,
        run_config={"ops": {"generated_scenarios": {"config": {"per_family": MIN_TASKS_TO_JUDGE + 2}}}},
    )
    assert result.success
    meta = result.asset_materializations_for_node("generated_scenarios")[0].metadata
    assert meta["tasks"].value == MIN_TASKS_TO_JUDGE + 2
    assert meta["families"].value == 1
    drawn = draw_family(_collapsed(COLLAPSED), MIN_TASKS_TO_JUDGE + 2, seed=0).bundles
    assert meta["command_flag_combinations"].value == len(coverage(drawn)) > 0
    assert meta["whole_phrasings"].value == 3
    assert meta["solution_skeletons"].value == 1 and meta["state_changing_cores"].value == 1
    assert meta["collapsed_families"].value == 1
    assert "3 whole phrasings" in meta["variety"].value
    rows = [r.data for r in meta["variety_per_family"].value.records]
    assert len(rows) == 1 and rows[0]["family"] == COLLAPSED and rows[0]["collapsed"] is True
    assert rows[0]["state-changing cores"] == 1 and rows[0]["whole phrasings"] == 3
    # where the tasks start (issue 39, item 4): this family's all start in operator's home, no variable set
    starts = [r.data for r in meta["start_folders_by_user"].value.records]
    assert starts == [
        {"start folder": "home", "operator": MIN_TASKS_TO_JUDGE + 2, "tasks": MIN_TASKS_TO_JUDGE + 2}
    ]
    assert meta["families_starting_elsewhere"].value == 0 and meta["tasks_with_shell_variables"].value == 0
    assert (
        f"{MIN_TASKS_TO_JUDGE + 2} tasks start as operator {MIN_TASKS_TO_JUDGE + 2}"
        in meta["environments"].value
    )
    logged = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
    assert any(COLLAPSED in m and "collapse to 1 state-changing" in m for m in logged), logged
