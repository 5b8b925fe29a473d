"""The learning study (issue 38): an arm end to end at a tiny size (real gate, reference rollouts, sft_dataset's rows,
the trainer in segments, the evaluation on fit and transfer in sandboxes), the recipe's guards, and the constant
learning rate that lets a resumed segment go on with the same schedule."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from bashgym_assets.evaluation import FIT, TRANSFER
from bashgym_assets.evaluation import learning_study as ls
from bashgym_assets.rollout.episode import TrajectoryRecord
from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES
from bashgym_assets.testing.tiny_model import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]
FAMILY = "files-delete-by-pattern"


def _cli():
    spec = importlib.util.spec_from_file_location(
        "learning_study_cli", ROOT / "benchmarks" / "learning_study.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


def test_an_arm_refuses_what_must_not_train_and_a_decay_across_segments() -> None:
    with pytest.raises(ValueError, match="held-out family"):
        ls.check_families([sorted(HELD_OUT_FAMILIES)[0]])
    with pytest.raises(ValueError, match="validation families"):
        ls.check_families(["archives-compress-files"])  # sft_dataset keeps this family for validation
    with pytest.raises(ValueError, match="unknown family"):
        ls.check_families(["no-such-family"])
    ls.check_families([FAMILY, "text-dedupe-lines"])
    linear = ls.StudyTraining(lr_schedule="linear", epochs=5)
    with pytest.raises(ValueError, match="plan its own decay"):
        ls.Arm(name="a", families=[FAMILY], eval_epochs=[2], train=linear)
    assert ls.Arm(name="a", families=[FAMILY], train=linear).eval_epochs == [5]
    assert ls.Arm(name="a", families=[FAMILY], eval_epochs=[2, 5, 2]).eval_epochs == [2, 5, 8]  # and the last
    with pytest.raises(ValueError, match="from 1 to train.epochs"):
        ls.Arm(name="a", families=[FAMILY], eval_epochs=[9])
    with pytest.raises(ValueError, match="whole number"):
        ls.Arm(name="a", families=[FAMILY], train=ls.StudyTraining(epochs=2.5))


def test_the_cli_makes_the_arm_of_its_options() -> None:
    """How an arm trains is the trainer's own TrainHyperparams, one option per field (nothing copied): a field the
    trainer gains is a study option too."""
    from bashgym_assets.training.trainer import TrainHyperparams

    cli = _cli()
    argv = ["--arm", "x", "--families", f"{FAMILY},text-dedupe-lines", "--epochs", "5", "--eval-epochs", "2"]
    argv += ["--target-modules", "q_proj,v_proj", "--observation-chars", "0", "--dtype", "float32"]
    argv += ["--grad-accum", "2", "--lora-r", "8", "--no-curriculum", "--tasks-per-family", "3"]
    arm = cli.arm_of(cli.parse(argv))
    assert arm.families == [FAMILY, "text-dedupe-lines"] and arm.eval_epochs == [2, 5]
    assert arm.train.targets() == ["q_proj", "v_proj"] and arm.observation_chars is None
    assert arm.tokens_per_step == 2 * 1024 and arm.train.lr_schedule == "constant"
    assert (arm.train.dtype, arm.train.lora_r, arm.train.curriculum, arm.tasks_per_family) == (
        "float32",
        8,
        False,
        3,
    )
    assert set(TrainHyperparams.model_fields) < set(ls.StudyTraining.model_fields)
    cfg = ls.train_config(arm, "base", Path("/tmp/w"), 2, first=False)
    for name in TrainHyperparams.model_fields:  # every trainer field reaches the trainer as the arm says
        expected = {"epochs": 2.0, "max_steps": None, "save_every": 10**9}.get(name, getattr(arm.train, name))
        assert getattr(cfg, name) == expected, name
    assert cfg.target_modules == ["q_proj", "v_proj"] and cfg.resume and cfg.seed == arm.train.seed
    default = cli.arm_of(cli.parse(["--arm", "y", "--families", FAMILY]))
    assert default.train.dtype in ("bfloat16", "float32") and default.train.targets() == "all-linear"


@pytest.mark.slow
def test_a_constant_rate_goes_on_unchanged_in_a_resumed_segment(tiny_model: str, tmp_path: Path) -> None:
    """The study trains to epoch 1, evaluates, then resumes to epoch 2: with ``lr_schedule`` constant every step
    after the warm-up has the peak rate, in both segments (the trainer only decayed linearly before)."""
    from bashgym_assets.testing import datasets as syn
    from bashgym_assets.training.trainer import train_sft

    arm = ls.Arm(
        name="lr",
        families=[FAMILY],
        train=ls.StudyTraining(
            learning_rate=1e-3, warmup_steps=1, max_length=128, grad_accum=1, curriculum=False
        ),
    )
    convs = [syn.trajectory_messages(f"task {i}", [f"ls dir{i}"], ["a"]) for i in range(4)]
    first = train_sft(ls.train_config(arm, tiny_model, tmp_path, 1, first=True), convs)
    second = train_sft(ls.train_config(arm, tiny_model, tmp_path, 2, first=False), convs)
    assert second.resumed_from_step == first.steps and second.steps == 2 * first.steps
    rates = [h["learning_rate"] for h in second.history]
    assert len(rates) == second.steps and rates[1:] == [pytest.approx(1e-3)] * (len(rates) - 1)


@pytest.mark.slow
def test_an_arm_end_to_end_writes_its_table(
    tiny_model: str, sandbox_image: str, settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One family, two tasks, one epoch, one checkpoint evaluated on one trained task and one fresh one, through
    the CLI as a user runs it: both result files, every field of the table, the episodes in the lake."""
    from bashgym_assets.lake import Lake

    cli = _cli()
    out, work = tmp_path / "results", tmp_path / "work"
    argv = ["--arm", "tiny", "--families", FAMILY, "--tasks-per-family", "2", "--epochs", "1"]
    argv += ["--fit-per-family", "1", "--transfer-per-family", "1", "--max-turns", "2", "--dtype", "float32"]
    argv += ["--grad-accum", "1", "--base", tiny_model, "--out", str(out), "--work", str(work)]
    assert cli.main(argv) == 0

    study = ls.StudyResult.model_validate_json((out / "tiny.json").read_text())
    assert (
        study.finished and study.train_rows >= 1 and study.data["admitted"] >= 1 and study.prepare_wall_s > 0
    )
    (point,) = study.checkpoints
    assert point.epoch == 1 and point.steps >= 1 and point.tokens_seen > 0 and point.train_wall_s > 0
    assert set(point.sets) == {FIT, TRANSFER} and point.sets[FIT].n == 1 and point.sets[TRANSFER].n == 1
    for s in point.sets.values():  # an untrained 2-layer model finishes nothing; why is recorded
        assert s.clean.k == 0 and sum(s.failure_classes.values()) == 1 and s.by_family == {FAMILY: "0/1"}
    prepared = ls.PreparedData.model_validate_json((work / "prepared.json").read_text())
    trained = {r["scenario_id"] for r in prepared.rows}
    assert {b.id for b in prepared.fit} <= trained and not {b.id for b in prepared.transfer} & trained
    assert all("@transfer:" in b.source for b in prepared.transfer)
    assert (work / "epoch-1" / "adapter_config.json").exists()

    md = (out / "tiny.md").read_text()
    head = "| epoch | steps | tokens seen | training wall | loss (last epoch) | fit clean | transfer clean |"
    assert head in md and f"\n| 1 | {point.steps} | {point.tokens_seen:,} |" in md and "0% [0-" in md
    assert (
        "; preparation 0 min " in md
        and "Machine: " in md
        and "Command: `python benchmarks/learning_study.py --arm tiny" in md
    )
    rows = Lake(settings).read("eval_episodes", point.eval_id).to_pylist()
    assert len(rows) == 2 and point.eval_id.startswith("eval-cli-train-")
    assert json.loads((out / "tiny.json").read_text())["arm"]["families"] == [FAMILY]

    # trained on from its last checkpoint: the same run (steps and tokens go on), its first checkpoint kept
    assert cli.main(["--arm", "tiny", "--extend-to", "2", "--out", str(out), "--work", str(work)]) == 0
    longer = ls.StudyResult.model_validate_json((out / "tiny.json").read_text())
    first, second = longer.checkpoints
    assert first == point and second.epoch == 2 and longer.arm.train.epochs == 2 and longer.finished
    assert second.steps == 2 * point.steps and second.tokens_seen == 2 * point.tokens_seen
    assert second.train_wall_s > point.train_wall_s and "; then python benchmarks" in longer.command
    # the clean sets: the checkpoint and the base on unseen and bundled, the promotion rule's verdict, kept by a
    # later extension
    argv = [
        "--arm",
        "tiny",
        "--clean-sets",
        "--clean-per-family",
        "1",
        "--out",
        str(out),
        "--work",
        str(work),
    ]
    assert cli.main(argv) == 0
    judged = ls.StudyResult.model_validate_json((out / "tiny.json").read_text())
    (clean,) = judged.clean
    assert clean.epoch == 2 and set(clean.sets) == {"base", "tiny"} and not clean.promote
    for per_set in clean.sets.values():
        assert set(per_set) == {"unseen", "bundled"} and per_set["bundled"].n >= 10
        assert per_set["unseen"].n == len(per_set["unseen"].by_family) >= 10  # one task of each family
    assert "does not beat" in clean.promotion and not clean.eval_id.startswith("eval-cli-train-")
    rows = Lake(settings).read("eval_episodes", clean.eval_id).to_pylist()
    assert len(rows) == 2 * sum(s.n for s in clean.sets["tiny"].values())
    md = (out / "tiny.md").read_text()
    assert "Clean sets (nothing of the study trains on them), epoch 2" in md and "**keep the base**" in md

    # DPO on top of epoch 1: its own attempts at the two trained tasks (an untrained model fails both), each paired
    # with the reference row it trained on at the first reply, DPO from it, fit and transfer again
    argv = ["--arm", "tiny", "--dpo-from-epoch", "1", "--dpo-samples", "1", "--dpo-grad-accum", "1"]
    assert cli.main([*argv, "--out", str(out), "--work", str(work)]) == 0
    preferred = ls.StudyResult.model_validate_json((out / "tiny.json").read_text())
    (d,) = preferred.dpo
    assert preferred.clean == judged.clean and preferred.checkpoints == longer.checkpoints
    assert d.settings.from_epoch == 1 and d.attempts == study.train_rows and d.attempts_clean == 0
    assert d.pairs == d.tasks_failed == study.train_rows and d.steps == d.pairs and d.trained_tokens > 0
    assert d.loss_first is not None and set(d.sets) == {FIT, TRANSFER} and (work / "dpo-e1").is_dir()
    rows = Lake(settings).read("eval_episodes", d.eval_id).to_pylist()
    assert len(rows) == 2 and d.eval_id.startswith("eval-cli-train-study-tiny-dpo-e1-")
    md = (out / "tiny.md").read_text()
    assert "DPO on top of epoch 1 (1 attempts a trained task" in md and "| + DPO | 0% [0-" in md
    assert f"**{d.pairs} pairs**" in md and "| SFT epoch 1 | 0% [0-" in md
    # recovery rows on top of epoch 1: the same sampling as DPO's (read back, not sampled again), the untrained
    # model's wrong first command replayed before the reference in a sandbox, kept where the check passed, SFT on
    # from epoch 1 with and without them
    attempts_file = work / "attempts-e1-n1-t0.8-s0.json"
    assert attempts_file.exists()
    argv = [
        "--arm",
        "tiny",
        "--recovery-from-epoch",
        "1",
        "--recovery-samples",
        "1",
        "--recovery-epochs",
        "1",
    ]
    assert cli.main([*argv, "--out", str(out), "--work", str(work)]) == 0
    recovered = ls.StudyResult.model_validate_json((out / "tiny.json").read_text())
    (r,) = recovered.recovery
    assert recovered.dpo == preferred.dpo and recovered.checkpoints == longer.checkpoints
    assert r.attempts == d.attempts and r.attempts_wall_s == d.attempts_wall_s  # DPO's attempts, read back
    assert r.plan_counts["planned"] == r.replayed >= 1 and 1 <= r.recovered <= r.replayed
    recovery_run, control = r.runs
    assert recovery_run.label == "recovery-e1" and control.label == "control-e1"
    assert recovery_run.rows == study.train_rows + r.recovered and control.rows == study.train_rows
    assert recovery_run.steps >= control.steps >= 1 and set(recovery_run.sets) == {FIT, TRANSFER}
    assert "# the mistake: shown, not trained" in r.example
    md = (out / "tiny.md").read_text()
    assert "Recovery rows on top of epoch 1" in md and f"**{r.recovered}/{r.replayed} replays passed" in md
    assert (
        "| + recovery rows (`recovery-e1`) |" in md
        and "| + same epochs, no recovery rows (`control-e1`) |" in md
    )

    # a second round: the recovery run's own attempts (sampled anew, kept apart), their new mistakes replayed, the
    # recovery run going on with both rounds' rows, the control going on from round 1's control
    assert cli.main([*argv, "--recovery-round", "2", "--out", str(out), "--work", str(work)]) == 0
    again = ls.StudyResult.model_validate_json((out / "tiny.json").read_text())
    first_round, r2 = again.recovery
    assert first_round == r and r2.settings.round == 2
    assert (work / "attempts-recovery-e1-n1-t0.8-s0.json").exists() and (
        work / "recovery-rows-e1-r2.json"
    ).exists()
    recovery_run2, control2 = r2.runs
    assert recovery_run2.label == "recovery-e1-r2" and control2.label == "control-e1-r2"
    assert (
        recovery_run2.rows == study.train_rows + r.recovered + r2.recovered
        and control2.rows == study.train_rows
    )
    round_two = json.loads((work / "recovery-rows-e1-r2.json").read_text())
    round_one = json.loads((work / "recovery-rows-e1.json").read_text())
    assert not {(x["scenario_id"], x["mistake"]) for x in round_two} & {
        (x["scenario_id"], x["mistake"]) for x in round_one
    }  # a mistake recovered once is not a row twice
    md = (out / "tiny.md").read_text()
    assert "Round 2: Recovery rows on top of epoch 1" in md and "`recovery-e1-r2`" in md
    # DPO on top of a run of the arm (round 1's recovery run): that model's attempts (sampled for round 2, read
    # back), its own pairs, DPO from it; beside the epoch's DPO, not in its place
    argv_on_run = [
        "--arm",
        "tiny",
        "--dpo-from-epoch",
        "1",
        "--dpo-on-run",
        "recovery-e1",
        "--dpo-samples",
        "1",
    ]
    argv_on_run += ["--dpo-grad-accum", "1", "--out", str(out), "--work", str(work)]
    assert cli.main(argv_on_run) == 0
    stacked = ls.StudyResult.model_validate_json((out / "tiny.json").read_text())
    first_dpo, on_run = stacked.dpo
    assert first_dpo == d and on_run.settings.on_run == "recovery-e1" and on_run.pairs >= 1
    assert (
        on_run.attempts_wall_s == r2.attempts_wall_s
        and (work / "dpo-recovery-e1" / "adapter_config.json").exists()
    )
    assert on_run.eval_id.startswith("eval-cli-train-study-tiny-dpo-recovery-e1-")
    md = (out / "tiny.md").read_text()
    assert (
        "DPO on top of `recovery-e1` (from epoch 1) (1 attempts a trained task" in md
        and "| `recovery-e1` |" in md
    )
    with pytest.raises(SystemExit, match="no adapter control-e9"):
        cli.main([*argv_on_run[:5], "control-e9", *argv_on_run[6:]])

    # GRPO on top of epoch 1: groups of sampled episodes at the trained tasks in real sandboxes, rewarded by their
    # checks, one optimizer step from the checkpoint, then fit and transfer; the earlier stages kept
    argv_grpo = ["--arm", "tiny", "--grpo-from-epoch", "1", "--grpo-steps", "1", "--grpo-generations", "2"]
    argv_grpo += ["--grpo-tasks-per-step", "1", "--out", str(out), "--work", str(work)]
    assert cli.main(argv_grpo) == 0
    reinforced = ls.StudyResult.model_validate_json((out / "tiny.json").read_text())
    (g,) = reinforced.grpo
    assert reinforced.recovery == again.recovery and reinforced.dpo == stacked.dpo
    assert g.settings.from_epoch == 1 and g.steps == 1 and g.episodes == 2 and len(g.per_step) == 1
    assert g.per_step[0]["success_rate"] == 0.0 and g.informative_frac == 0.0  # an untrained model fails both
    assert (
        g.infra_errors == 0
        and set(g.sets) == {FIT, TRANSFER}
        and (work / "grpo-e1" / "adapter_config.json").exists()
    )
    assert len(Lake(settings).read("eval_episodes", g.eval_id).to_pylist()) == 2
    md = (out / "tiny.md").read_text()
    assert "GRPO on top of epoch 1 (1 steps of 1 tasks x 2 episodes" in md and "| + GRPO | 0% [0-" in md
    assert "Training success by step: 0%." in md
    # and from a run of the arm (DPO's, made from epoch 1): its own folder, its table row that run's figures
    assert cli.main([*argv_grpo, "--grpo-on-run", "dpo-recovery-e1"]) == 0
    first_grpo, grpo_on_run = ls.StudyResult.model_validate_json((out / "tiny.json").read_text()).grpo
    assert (
        first_grpo == g and grpo_on_run.settings.label() == "grpo-dpo-recovery-e1" and grpo_on_run.steps == 1
    )
    assert (work / "grpo-dpo-recovery-e1" / "adapter_config.json").exists()
    md = (out / "tiny.md").read_text()
    assert "GRPO on top of `dpo-recovery-e1` (from epoch 1) (1 steps" in md
    assert f"| `dpo-recovery-e1` | {ls._rate(on_run.sets[FIT])} |" in md
    # only on the tasks the start sometimes finishes: its attempts (the untrained epoch 1 finishes none, so its
    # sampling is written here as if it had finished one task once), the others never played
    sampled = json.loads((work / "attempts-e1-n1-t0.8-s0.json").read_text())
    records = sampled["records"]
    own = ls.behaviour_failures([TrajectoryRecord.model_validate(r) for r in records])
    assert own, "the untrained model failed every task by its own doing or by the clock"
    flipped = {**next(r for r in records if r["trajectory_id"] == own[0]["trajectory_id"]), "sample_index": 1}
    records.append(flipped | {"kept": True, "verified": True, "terminated": True, "reject_reason": ""})
    (work / "attempts-e1-n2-t0.8-s0.json").write_text(json.dumps({**sampled, "records": records}))
    assert cli.main([*argv_grpo, "--grpo-attempts", "2"]) == 0
    *_, on_pool = ls.StudyResult.model_validate_json((out / "tiny.json").read_text()).grpo
    assert on_pool.settings.label() == "grpo-e1-sometimes" and on_pool.tasks_played == 1
    assert on_pool.pool["sometimes"] == 1 and sum(on_pool.pool.values()) == len(
        {r["scenario_id"] for r in records}
    )
    assert on_pool.attempts_wall_s == pytest.approx(sampled["wall_s"], abs=0.05) and on_pool.episodes == 2
    md = (out / "tiny.md").read_text()
    assert "only the 1 trained tasks its 2 attempts a task both finished and failed (always 0, never" in md
    assert "**2 episodes** (1 tasks)" in md
    # one attempt a task cannot both finish and fail: said at the option, not as a traceback
    with pytest.raises(SystemExit, match="--grpo-attempts: Value error, attempts: one attempt a task"):
        cli.main([*argv_grpo, "--grpo-attempts", "1"])

    # any two of the arm's models, task by task, from their episodes in the lake
    capsys.readouterr()
    argv_paired = ["--arm", "tiny", "--paired", "recovery-e1-r2,e1", "--paired", "dpo-e1,control-e1"]
    argv_paired += ["--paired", "grpo-e1,e1", "--paired", "dpo-recovery-e1,recovery-e1"]
    argv_paired += ["--paired", "grpo-dpo-recovery-e1,dpo-recovery-e1"]
    assert cli.main([*argv_paired, "--out", str(out), "--work", str(work)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| A | B | set | tasks | only A finished |") and len(table) == 2 + 10
    assert {tuple(line.split(" | ")[:4]) for line in table[2:]} == {
        ("| recovery-e1-r2", "e1", FIT, "1"),
        ("| recovery-e1-r2", "e1", TRANSFER, "1"),
        ("| dpo-e1", "control-e1", FIT, "1"),
        ("| dpo-e1", "control-e1", TRANSFER, "1"),
        ("| grpo-e1", "e1", FIT, "1"),
        ("| grpo-e1", "e1", TRANSFER, "1"),
        ("| dpo-recovery-e1", "recovery-e1", FIT, "1"),
        ("| dpo-recovery-e1", "recovery-e1", TRANSFER, "1"),
        ("| grpo-dpo-recovery-e1", "dpo-recovery-e1", FIT, "1"),
        ("| grpo-dpo-recovery-e1", "dpo-recovery-e1", TRANSFER, "1"),
    }
    with pytest.raises(SystemExit, match="no model 'e7'"):
        cli.main(["--arm", "tiny", "--paired", "e7,e1", "--out", str(out), "--work", str(work)])
    # round N needs round N-1's runs
    with pytest.raises(SystemExit, match="no adapter recovery-e1-r3"):
        cli.main([*argv, "--recovery-round", "4", "--out", str(out), "--work", str(work)])

    shutil.rmtree(work / "checkpoints")
    with pytest.raises(ValueError, match="cannot resume"):
        cli.main(["--arm", "tiny", "--extend-to", "3", "--out", str(out), "--work", str(work)])


def test_dpo_pairs_split_where_the_model_chose_not_where_an_output_was_cut() -> None:
    """The arm's rows hold outputs cut to ``observation_chars``; the checkpoint's attempts hold them whole. A failed
    attempt that typed the reference's first command, saw its long output, then went wrong pairs at its second
    reply, with the cut output in the shared prompt; a passing attempt, an infrastructure failure and a failure
    whose first reply already differs are handled as dpo_dataset handles them."""
    from bashgym_assets.testing import datasets as syn
    from bashgym_assets.training_data.build import shorten_observations

    arm = ls.Arm(name="u", families=[FAMILY], observation_chars=40)
    long_output = "\n".join(f"line {i} of a listing" for i in range(30))
    reference = syn.trajectory_messages("tidy ~/logs", ["ls -l ~/logs", "rm ~/logs/*.tmp"], [long_output, ""])
    rows = [
        {"scenario_id": "gen.a.1", "split": "train", "messages": shorten_observations(reference, 40)},
        {"scenario_id": "gen.a.2", "split": "train", "messages": shorten_observations(reference, 40)},
    ]
    data = ls.PreparedData(key={}, rows=rows, fit=[], transfer=[], counts={})
    wrong_second = syn.trajectory_messages("tidy ~/logs", ["ls -l ~/logs", "rm -r ~/logs"], [long_output, ""])
    wrong_first = syn.trajectory_messages("tidy ~/logs", ["cd /logs"], [""])
    attempts = [
        {"scenario_id": "gen.a.1", "kept": False, "reject_reason": "wrong_result", "messages": wrong_second},
        {"scenario_id": "gen.a.1", "kept": True, "reject_reason": "", "messages": reference},
        {"scenario_id": "gen.a.2", "kept": False, "reject_reason": "wrong_result", "messages": wrong_first},
        {  # the sandbox's failure, not the model's: never a rejected side
            "scenario_id": "gen.a.2",
            "kept": False,
            "reject_reason": "setup_failed",
            "messages": syn.trajectory_messages("tidy ~/logs", ["echo broken"], [""]),
        },
    ]
    pairs, counts = ls.dpo_pairs(arm, data, attempts)
    by_task = {p["scenario_id"]: p for p in pairs}
    assert len(pairs) == 2 and set(by_task) == {"gen.a.1", "gen.a.2"} and counts["groups_with_both"] == 2
    late = by_task["gen.a.1"]
    assert late["split_turn"] == 4 and late["chosen"][0]["content"] == "rm ~/logs/*.tmp"
    assert (
        late["rejected"][0]["content"] == "rm -r ~/logs"
        and "more lines of output cut" in late["prompt"][3]["content"]
    )
    early = by_task["gen.a.2"]
    assert early["split_turn"] == 2 and early["rejected"][0]["content"] == "cd /logs"
    # without the cut on the attempt's side, the shared turn reads differently and gen.a.1 pairs nowhere
    whole = arm.model_copy(update={"observation_chars": None})
    pairs_whole, _ = ls.dpo_pairs(whole, data, attempts)
    assert {p["scenario_id"] for p in pairs_whole} == {"gen.a.2"}


def test_an_attempt_cut_by_the_clock_is_neither_a_rejected_side_nor_a_mistake() -> None:
    """Under load the episode's wall-time cap cut attempts that were going right (55 of 69 failures in the first
    DPO run at an arm's size): such a cut, like the sandbox's own failures, says nothing about a choice."""
    attempts = [
        {"scenario_id": "gen.a.1", "kept": False, "reject_reason": "wrong_result", "messages": []},
        {"scenario_id": "gen.a.1", "kept": False, "reject_reason": "timeout", "messages": []},
        {"scenario_id": "gen.a.2", "kept": False, "reject_reason": "setup_failed", "messages": []},
        {"scenario_id": "gen.a.2", "kept": True, "reject_reason": "", "messages": []},
        {"scenario_id": "gen.a.3", "kept": False, "reject_reason": "loop", "messages": []},
    ]
    assert [(a["scenario_id"], a["reject_reason"]) for a in ls.behaviour_failures(attempts)] == [
        ("gen.a.1", "wrong_result"),
        ("gen.a.3", "loop"),
    ]


def test_grpo_plays_only_the_tasks_its_start_both_finished_and_failed() -> None:
    """A task the start always or never finishes gives every GRPO group the same reward and so no advantage (40%
    of the groups taught anything in the first run at an arm's size); its sampled attempts say which tasks can.
    A failure of the sandbox or the clock is not the model's and makes no task "sometimes"."""
    attempts = [
        {"scenario_id": "gen.a.1", "kept": True, "reject_reason": ""},
        {"scenario_id": "gen.a.1", "kept": True, "reject_reason": ""},
        {"scenario_id": "gen.a.2", "kept": True, "reject_reason": ""},
        {"scenario_id": "gen.a.2", "kept": False, "reject_reason": "wrong_result"},
        {"scenario_id": "gen.a.3", "kept": False, "reject_reason": "wrong_result"},
        {"scenario_id": "gen.a.3", "kept": False, "reject_reason": "loop"},
        {"scenario_id": "gen.a.4", "kept": False, "reject_reason": "timeout"},
        {"scenario_id": "gen.a.4", "kept": False, "reject_reason": "sandbox_error"},
        {"scenario_id": "gen.a.5", "kept": True, "reject_reason": ""},
        {"scenario_id": "gen.a.5", "kept": False, "reject_reason": "setup_failed"},
        {"scenario_id": "gen.a.6", "kept": False, "reject_reason": "never_exits"},
        {"scenario_id": "gen.a.6", "kept": True, "reject_reason": ""},
    ]
    sometimes, counts = ls.sometimes_finished(attempts)
    assert sometimes == ["gen.a.2", "gen.a.6"]
    assert counts == {"always": 2, "never": 1, "sometimes": 2, "cut": 1}
    assert ls.sometimes_finished([]) == ([], {"always": 0, "never": 0, "sometimes": 0, "cut": 0})

    settings = ls.GrpoSettings(from_epoch=8, attempts=2, on_run="dpo-e8", temperature=0.7, seed=3)
    assert settings.label() == "grpo-dpo-e8-sometimes" and ls.GrpoSettings(from_epoch=8).label() == "grpo-e8"
    # the same sampling as DPO on that start at those settings: one file, read by both
    assert settings.attempt_settings().cache_name("dpo-e8") == ls.DpoSettings(
        from_epoch=8, samples=2, temperature=0.7, seed=3
    ).cache_name("dpo-e8")
    with pytest.raises(ValueError, match="one attempt a task cannot both finish and fail"):
        ls.GrpoSettings(from_epoch=8, attempts=1)
