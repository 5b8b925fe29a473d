"""Recovery rows (issue 38, ``training_data.recovery``): plans cut at the attempt's first command that left the
reference, the reasons a failed attempt gives none, and the row marked so the mistake is shown and not trained;
then a plan replayed in a real sandbox, kept only where the task's check passes."""

from __future__ import annotations

import pytest

from bashgym_assets.rollout.transcript import is_untrained
from bashgym_assets.testing import datasets as syn
from bashgym_assets.training_data.recovery import RecoveryPlan, commands_of, mark_mistakes, recovery_plans

REFERENCE = syn.trajectory_messages("tidy ~/logs", ["ls -l ~/logs", "rm ~/logs/*.tmp"], ["a.tmp\nb.log", ""])


def _attempt(
    commands: list[str], kept: bool = False, reason: str = "wrong_result", sid: str = "gen.a.1"
) -> dict:
    """An attempt typing ``commands``; one whose last is ``exit`` ends the session with it."""
    exits = bool(commands) and commands[-1] == "exit"
    typed = commands[:-1] if exits else commands
    return {
        "scenario_id": sid,
        "kept": kept,
        "reject_reason": "" if kept else reason,
        "messages": syn.trajectory_messages("tidy ~/logs", typed, ["out"] * len(typed), end_with_exit=exits),
    }


def test_a_plan_is_cut_where_the_attempt_first_left_the_reference() -> None:
    attempts = [
        _attempt(["ls -l ~/logs", "rm -r ~/logs", "exit"]),  # wrong at the second command
        _attempt(["ls -l ~/logs", "rm ~/logs/*.tmp", "exit"], kept=True),  # passed: no plan
        _attempt(["ls -l ~/logs", "rm -r ~/logs "], reason="never_exits"),  # the same mistake again (trimmed)
        _attempt(["cd /logs", "exit"], sid="gen.a.2"),  # wrong at once
        _attempt(["exit"], sid="gen.a.3", reason="premature_exit"),
        _attempt(["ls -l ~/logs"], sid="gen.a.4", reason="never_exits"),  # right so far, then stopped
        _attempt(["ls -l ~/logs", "rm ~/logs/*.tmp", "rm -r ~"], sid="gen.a.5"),  # after the whole reference
        _attempt(["pwd"], sid="gen.other"),  # no reference row
    ]
    references = {sid: REFERENCE for sid in ("gen.a.1", "gen.a.2", "gen.a.3", "gen.a.4", "gen.a.5")}
    plans, counts = recovery_plans(references, attempts)
    assert [(p.scenario_id, p.prefix, p.mistake, p.fix) for p in plans] == [
        ("gen.a.1", ["ls -l ~/logs"], "rm -r ~/logs", ["rm ~/logs/*.tmp"]),
        ("gen.a.2", [], "cd /logs", ["ls -l ~/logs", "rm ~/logs/*.tmp"]),
    ]
    assert (
        plans[0].commands == ["ls -l ~/logs", "rm -r ~/logs", "rm ~/logs/*.tmp"]
        and plans[0].mistake_turn == 1
    )
    assert counts == {
        "attempts_failed": 7,
        "same_mistake_again": 1,
        "premature_exit": 1,
        "no_wrong_command": 1,
        "wrong_after_the_reference": 1,
        "no_reference_row": 1,
        "planned": 2,
    }
    # a second distinct mistake of one task only when asked
    more = [*attempts, _attempt(["ls -l ~/logs", "rm ~/logs/*"])]
    assert (
        len(recovery_plans(references, more)[0]) == 2
        and len(recovery_plans(references, more, per_task=2)[0]) == 3
    )


def test_a_replayed_row_has_its_mistake_marked_and_nothing_else() -> None:
    plan = RecoveryPlan(
        scenario_id="gen.a.1",
        prefix=["ls -l ~/logs"],
        mistake="rm -r ~/logs",
        fix=["rm ~/logs/*.tmp"],
        failure="wrong_result",
    )
    replayed = syn.trajectory_messages("tidy ~/logs", plan.commands, ["a.tmp", "rm: cannot remove", ""])
    other = syn.trajectory_messages("tidy ~/logs", ["ls"], [""])
    rows, unmatched = mark_mistakes(
        [{"scenario_id": "gen.a.1", "messages": replayed}, {"scenario_id": "gen.a.1", "messages": other}],
        [plan],
    )
    assert unmatched == 1 and len(rows) == 1
    (row,) = rows
    marks = [is_untrained(m) for m in row["messages"] if m["role"] == "assistant"]
    assert marks == [
        False,
        True,
        False,
        False,
    ]  # only the mistake; the prefix, the fix and the exit are trained
    assert commands_of(row["messages"]) == [*plan.commands, "exit"] and row["recovery_of"] == "wrong_result"
    assert not any(is_untrained(m) for m in replayed)  # the input rows are not changed


@pytest.mark.docker
def test_a_plan_is_kept_only_when_its_replay_passes_the_check(sandbox_image: str) -> None:
    """Two mistakes at one real factory task, replayed in fresh sandboxes: a harmless one the reference's steps
    still finish from (kept), and one that destroys what the task needs (its check fails: dropped)."""
    from bashgym_assets.evaluation.learning_study import replay_plans
    from bashgym_assets.scenarios.factory.generate import generate

    (task,) = generate(1, seed=7, families=["files-delete-by-pattern"]).bundles
    reference = list(task.reference)
    harmless = RecoveryPlan(
        scenario_id=task.id, prefix=[], mistake="ls -la", fix=reference, failure="wrong_result"
    )
    ruinous = RecoveryPlan(
        scenario_id=task.id,
        prefix=[],
        mistake="rm -rf -- ~/* ~/.[!.]*",
        fix=reference,
        failure="wrong_result",
    )
    records = replay_plans([harmless, ruinous], [task], sandbox_image)
    assert [r.scenario_id for r in records] == [
        task.id,
        task.id,
    ]  # one a round: a trajectory is named by its task
    by_mistake = {commands_of(r.messages)[0]: r for r in records}
    assert by_mistake["ls -la"].kept and by_mistake["ls -la"].verified
    assert not by_mistake[ruinous.mistake].kept and not by_mistake[ruinous.mistake].verified
