"""The behavioural evaluation: reply classification, episode scoring, rates, the lockstep evaluator in real
sandboxes (reference operator, scripted bad operators, a tiny real model), batched == unbatched generation, the
promotion rule both ways with the real MLflow registry, and ``benchmark_results`` through Dagster."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets.evaluation import (
    EvalSettings,
    ModelSpec,
    Sampling,
    compare,
    evaluate,
    heldout_bundles,
    split_bundles,
)
from bashgym_assets.evaluation import metrics as m
from bashgym_assets.evaluation import promotion as promo
from bashgym_assets.evaluation.report import comparison_markdown, rates_plot_png, transcript_markdown
from bashgym_assets.rollout.operators import LocalModelOperator, Operator, ReferenceOperator
from bashgym_assets.rollout.transcript import (
    BABBLE,
    COMMAND,
    EXIT,
    PROSE,
    Message,
    initial_messages,
    parse_reply,
)
from bashgym_assets.scenarios.bundle import ScenarioBundle, load_folder
from bashgym_assets.scenarios.gate import HELD_OUT, TRAIN, split_for
from bashgym_assets.testing.tiny_model import build_tiny_model

PACK = Path(__file__).resolve().parents[1] / "bashgym_assets" / "data" / "scenario_pack"


def _bundle(i: int = 0, category: str = "files") -> ScenarioBundle:
    return ScenarioBundle(
        id=f"touch-{i}",
        task=f"Create the file ~/done-{i}.txt.",
        category=category,
        difficulty=1 + i % 2,
        setup=["true"],
        check=f"test -f /home/operator/done-{i}.txt",
        reference=[f"touch ~/done-{i}.txt"],
        source="test",
    )


# ---- reply classification ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "reply, kind",
    [
        ("ls -la", COMMAND),
        ("exit", EXIT),
        ("Here is a list of all files in the directory.", PROSE),
        ("1. ls -la\n2. cat notes.txt", BABBLE),  # parses as shell, but it is a numbered list
        ("- find . -name x\n- rm x", BABBLE),
        ("ls<|im_end|>\n<|im_start|>user", BABBLE),
        ("## Step 1\nls", BABBLE),
        ("cd /tmp\ncd /tmp\ncd /tmp\ncd /tmp", BABBLE),
        ("cat > f.txt <<'EOF'\nHello there, this is a note.\nEOF", COMMAND),
    ],
)
def test_reply_kinds(reply: str, kind: str) -> None:
    assert parse_reply(reply).kind == kind


def test_a_reply_cut_at_the_token_cap_is_babble_unless_it_is_one_whole_command() -> None:
    assert parse_reply("grep -r foo .", truncated=True).kind == COMMAND
    assert parse_reply('for f in *; do echo "$f', truncated=True).kind == BABBLE
    assert parse_reply("ls\nls -la\npwd", truncated=True).kind == BABBLE


# ---- episode scoring -------------------------------------------------------------------------------------------
def _lines(*replies: str) -> list:
    return [parse_reply(r) for r in replies]


def test_classify_each_failure_class() -> None:
    ok = _lines("touch x", "exit")
    assert m.classify(ok, terminated=True, verified=True, end_reason="exit") == (True, "")
    assert m.classify(ok, terminated=True, verified=False, end_reason="exit") == (
        True,
        m.FAILURE_WRONG_RESULT,
    )
    assert m.classify(
        _lines("ls", "pwd", "date"), terminated=False, verified=False, end_reason="turn_cap"
    ) == (True, m.FAILURE_NEVER_EXITS)
    assert (
        m.classify(_lines("ls", "ls", "ls"), terminated=False, verified=False, end_reason="turn_cap")[1]
        == m.FAILURE_LOOP
    )
    assert (
        m.classify(
            _lines("ls", "cat a", "ls", "cat a", "ls", "cat a"),
            terminated=False,
            verified=False,
            end_reason="turn_cap",
        )[1]
        == m.FAILURE_LOOP
    )
    assert (
        m.classify(_lines("ls", "pwd"), terminated=False, verified=False, end_reason="time_cap")[1]
        == m.FAILURE_TIMEOUT
    )
    assert m.classify(
        _lines("Sure, I will list the files for you.", "exit"),
        terminated=True,
        verified=True,
        end_reason="exit",
    ) == (False, m.FAILURE_PROSE)
    assert m.classify(
        _lines("1. ls\n2. pwd", "exit"), terminated=True, verified=False, end_reason="exit"
    ) == (False, m.FAILURE_BABBLE)
    assert m.classify([], terminated=False, verified=False, end_reason="", setup_failed=True) == (
        False,
        m.SETUP_FAILED,
    )


def test_wilson_interval_and_pass_at_k() -> None:
    r = m.wilson(0, 10)
    assert r.rate == 0 and r.low == 0 and 0.25 < r.high < 0.35
    r = m.wilson(10, 10)
    assert r.rate == 1 and r.high == 1 and 0.65 < r.low < 0.75
    assert m.wilson(0, 0).n == 0
    assert m.pass_at_k(5, 0, 1) == 0 and m.pass_at_k(5, 5, 3) == 1
    assert m.pass_at_k(4, 1, 1) == pytest.approx(0.25) and m.pass_at_k(4, 1, 2) == pytest.approx(0.5)


def _ep(
    scenario: str,
    model: str,
    clean: bool,
    operated: bool = True,
    terminated: bool = True,
    category: str = "files",
) -> m.EvalEpisode:
    return m.EvalEpisode(
        eval_id="e",
        model=model,
        model_ref=model,
        scenario_id=scenario,
        category=category,
        difficulty=1,
        operated=operated,
        terminated=terminated,
        verified=clean,
        clean=clean,
        failure_class="" if clean else m.FAILURE_WRONG_RESULT,
    )


def test_summary_rates_per_category_and_infrastructure_excluded() -> None:
    eps = [
        _ep("a", "x", True),
        _ep("b", "x", False, category="git"),
        m.EvalEpisode(
            eval_id="e",
            model="x",
            model_ref="x",
            scenario_id="c",
            category="git",
            difficulty=2,
            failure_class=m.SETUP_FAILED,
        ),
    ]
    s = m.summarize("x", eps)
    assert s.infrastructure_failures == 1 and s.rates["clean"].n == 2 and s.rates["clean"].k == 1
    assert s.by_category["files"]["clean"].rate == 1 and s.by_category["git"]["clean"].rate == 0
    assert s.pass_at_k == {"pass@1": 0.5}
    md = comparison_markdown([s])
    assert "| x | 2 |" in md


# ---- promotion rule ----------------------------------------------------------------------------------------------
def test_promotion_rule_both_ways() -> None:
    base = [_ep(f"s{i}", "base", False) for i in range(12)]
    good = [_ep(f"s{i}", "candidate", i < 7) for i in range(12)]
    weak = [_ep(f"s{i}", "candidate", i < 2) for i in range(12)]
    d = promo.decide(good, base, candidate_version="3")
    assert d.promote and d.test.candidate_better == 7 and d.test.p_value < 0.05
    d = promo.decide(weak, base, candidate_version="4")
    assert not d.promote and "sign test" in d.reason  # better, but not significantly
    d = promo.decide(base, good, incumbent_kind="champion", candidate_version="5")
    assert not d.promote and "does not beat" in d.reason
    silent = [_ep(f"s{i}", "candidate", i < 9, operated=i < 9) for i in range(12)]
    all_ops = [_ep(f"s{i}", "champion", i < 1) for i in range(12)]
    d = promo.decide(silent, all_ops, incumbent_kind="champion", candidate_version="6")
    assert not d.promote and "operate dropped" in d.reason  # more clean, but stopped operating elsewhere
    d = promo.decide(good, base, candidate_version="3", demoted=["3"])
    assert not d.promote and "demoted by hand" in d.reason


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_promotion_moves_the_champion_alias_in_mlflow(settings, tmp_path) -> None:
    from bashgym_assets.training import registry

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    versions = []
    for i in range(2):
        reg = registry.log_training_run(
            kind="sft",
            run_name=f"r{i}",
            params={},
            history=[{"step": 1, "loss": 1.0}],
            summary={},
            adapter_dir=str(adapter),
            tags={},
            settings=settings,
        )
        versions.append(reg.model_version)
    name = registry.REGISTERED_MODEL
    assert promo.alias_version(name, settings=settings) is None
    base = [_ep(f"s{i}", "base", False) for i in range(8)]
    win = promo.decide(
        [_ep(f"s{i}", "candidate", True) for i in range(8)], base, candidate_version=versions[0]
    )
    assert promo.apply_decision(win, name, settings)
    assert str(promo.alias_version(name, settings=settings).version) == versions[0]
    lose = promo.decide(
        base,
        [_ep(f"s{i}", "champion", True) for i in range(8)],
        incumbent_kind="champion",
        candidate_version=versions[1],
    )
    assert not promo.apply_decision(lose, name, settings)
    assert str(promo.alias_version(name, settings=settings).version) == versions[0]  # the champion stays
    assert str(promo.alias_version(name, promo.CANDIDATE, settings).version) == versions[1]


# ---- the evaluator in real sandboxes ----------------------------------------------------------------------------
class Scripted(Operator):
    """Replies from a fixed script, then repeats its last line."""

    scaffolded = False

    def __init__(self, name: str, script: list[str]) -> None:
        self.name, self.script = name, script

    def next_command(self, messages: list[Message]) -> str:
        done = sum(1 for x in messages if x.role == "assistant")
        return self.script[min(done, len(self.script) - 1)]


@pytest.mark.docker
def test_evaluator_reference_babble_and_never_exits(sandbox_image: str) -> None:
    bundles = [_bundle(i) for i in range(3)]
    settings = EvalSettings(max_turns=5)
    ref = evaluate(ReferenceOperator(), bundles, sandbox_image, settings, label="reference")
    assert [e.clean for e in ref.episodes] == [True] * 3
    assert ref.summary.rates["clean"].rate == 1 and ref.episodes[0].reply_kinds == "command,exit"
    assert ref.episodes[0].messages[-1].content == "exit"

    babbler = Scripted("babbler", ["1. First, list the files\n2. Then create the file\n3. Done"])
    bab = evaluate(babbler, bundles, sandbox_image, settings, label="babbler")
    assert {e.failure_class for e in bab.episodes} == {m.FAILURE_BABBLE}
    assert bab.summary.rates["operate"].rate == 0 and bab.summary.rates["terminate"].rate == 0
    assert all(
        e.n_turns == 3 and e.end_reason == "unusable_cap" for e in bab.episodes
    )  # lost after 3 in a row

    # Does the work, but never types exit: verified yet not terminated, so not clean.
    stayer = Scripted(
        "stayer", ["touch ~/done-0.txt ~/done-1.txt ~/done-2.txt", "ls", "pwd", "whoami", "date"]
    )
    stay = evaluate(stayer, bundles, sandbox_image, settings, label="stayer")
    assert all(e.verified and not e.terminated and not e.clean for e in stay.episodes)
    assert {e.failure_class for e in stay.episodes} == {m.FAILURE_NEVER_EXITS}
    assert all(e.n_turns == 5 and e.end_reason == "turn_cap" for e in stay.episodes)

    prose = Scripted("prose", ["Sure, I will create the file for you now.", "exit"])
    pr = evaluate(prose, bundles, sandbox_image, settings, label="prose")
    assert {e.failure_class for e in pr.episodes} == {m.FAILURE_PROSE}
    assert "failed: prose" in transcript_markdown(pr.episodes[0])


@pytest.mark.docker
def test_setup_failure_is_infrastructure_and_other_episodes_go_on(sandbox_image: str) -> None:
    broken = _bundle(9).model_copy(update={"id": "broken", "setup": ["exit 3"]})
    res = evaluate(ReferenceOperator(), [broken, _bundle(1)], sandbox_image, EvalSettings(max_turns=4))
    assert [e.failure_class for e in res.episodes] == [m.SETUP_FAILED, ""]
    assert res.summary.infrastructure_failures == 1 and res.summary.rates["clean"].rate == 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_batched_generation_equals_one_at_a_time_under_greedy(tiny: Path) -> None:
    convs = [initial_messages(_bundle(i)) for i in range(5)]
    convs[1] = convs[1] + [
        Message(role="assistant", content="ls -la"),
        Message(role="user", content="a.txt b.txt\n[exit code: 0]"),
    ]
    convs[3] = convs[3] + [
        Message(role="assistant", content="cat notes.txt"),
        Message(role="user", content="x " * 40 + "\n[exit code: 1]"),
    ]
    batched = LocalModelOperator(tiny, max_new_tokens=16, micro_batch=8).replies(convs)
    single = LocalModelOperator(tiny, max_new_tokens=16, micro_batch=1)
    assert [r.text for r in batched] == [single.next_command(c) for c in convs]
    assert all(r.error is None and r.new_tokens > 0 for r in batched)


@pytest.mark.docker
def test_continuous_evaluation_equals_lockstep_under_greedy(tiny: Path, sandbox_image: str) -> None:
    """The same tiny model, greedy, through the continuous decoder and through lockstep turns: the same
    transcripts and scores, episode for episode; a scenario whose set-up fails is recorded and the rest go on."""
    broken = _bundle(9).model_copy(update={"id": "broken", "setup": ["exit 3"]})
    bundles = [_bundle(i, category=c) for i, c in enumerate(["files", "text", "files", "archives"])] + [
        broken
    ]
    logs: list[str] = []
    runs = {}
    for continuous in (True, False):
        op = LocalModelOperator(tiny, max_new_tokens=12)
        runs[continuous] = evaluate(
            op,
            bundles,
            sandbox_image,
            EvalSettings(max_turns=4, continuous=continuous, max_rows=3, max_live=4),
            label="tiny",
            progress=logs.append,
        )
    cont, lock = runs[True], runs[False]
    assert any("continuous batching" in line for line in logs)
    assert [e.scenario_id for e in cont.episodes] == [b.id for b in bundles]
    assert [[(x.role, x.content) for x in e.messages] for e in cont.episodes] == [
        [(x.role, x.content) for x in e.messages] for e in lock.episodes
    ]
    assert [(e.failure_class, e.n_turns, e.end_reason) for e in cont.episodes] == [
        (e.failure_class, e.n_turns, e.end_reason) for e in lock.episodes
    ]
    assert cont.episodes[-1].failure_class == m.SETUP_FAILED and all(
        e.n_turns > 0 for e in cont.episodes[:-1]
    )


def test_sampling_is_recorded_and_seeded(tiny: Path) -> None:
    convs = [initial_messages(_bundle(i)) for i in range(3)]
    a = LocalModelOperator(tiny, max_new_tokens=12, temperature=0.9, seed=7)
    b = LocalModelOperator(tiny, max_new_tokens=12, temperature=0.9, seed=7)
    assert [r.text for r in a.replies(convs)] == [r.text for r in b.replies(convs)]
    assert a.sampling()["do_sample"] and a.sampling()["seed"] == 7


@pytest.mark.docker
def test_compare_a_tiny_model_with_pass_at_k_and_a_plot(tiny: Path, sandbox_image: str) -> None:
    bundles = [_bundle(i, category=c) for i, c in enumerate(["files", "text"])]
    results = compare(
        [ModelSpec(label="tiny", base=str(tiny)), ModelSpec(label="reference", kind="reference")],
        bundles,
        sandbox_image,
        EvalSettings(max_turns=3, samples=2),
        Sampling(temperature=0.8, max_new_tokens=10),
    )
    tiny_res, ref_res = results
    assert len(tiny_res.episodes) == 4 and tiny_res.summary.pass_at_k.keys() == {"pass@1", "pass@2"}
    assert ref_res.summary.pass_at_k["pass@2"] == 1.0
    assert json.loads(tiny_res.episodes[0].sampling)["temperature"] == 0.8
    assert all(e.failure_class for e in tiny_res.episodes)  # an untrained 2-layer model solves nothing
    assert rates_plot_png([r.summary for r in results]).startswith(b"\x89PNG")


def test_heldout_bundles_come_from_gated_rows() -> None:
    bundles, _ = load_folder(PACK)
    rows = [{"admitted": True, "split": split_for(b.id), "bundle_json": b.model_dump_json()} for b in bundles]
    held = heldout_bundles(rows)
    assert held and all(split_for(b.id) == HELD_OUT for b in held)
    assert [b.id for b in held] == sorted(b.id for b in held)
    assert len(heldout_bundles(rows, limit=3)) == 3


def test_train_split_and_seeded_sample_for_the_fit_diagnostic() -> None:
    bundles, _ = load_folder(PACK)
    rows = [{"split": split_for(b.id), "bundle_json": b.model_dump_json()} for b in bundles]
    rows.append(
        {
            "admitted": False,
            "split": TRAIN,
            "bundle_json": bundles[0].model_copy(update={"id": "zz-refused"}).model_dump_json(),
        }
    )
    train = split_bundles(rows, TRAIN)
    assert (
        train and all(split_for(b.id) == TRAIN for b in train) and "zz-refused" not in {b.id for b in train}
    )
    assert not {b.id for b in train} & {b.id for b in heldout_bundles(rows)}
    drawn = split_bundles(rows, TRAIN, sample=12, seed=3)
    assert len(drawn) == 12 and [b.id for b in drawn] == sorted(b.id for b in drawn)
    assert [b.id for b in drawn] == [
        b.id for b in split_bundles(rows, TRAIN, sample=12, seed=3)
    ]  # repeatable
    assert [b.id for b in drawn] != [b.id for b in train[:12]]  # a draw, not the first ones by id
    assert len({b.category for b in drawn}) > len({b.category for b in train[:12]})
    assert [b.id for b in split_bundles(rows, TRAIN, sample=10_000)] == [b.id for b in train]
    git = split_bundles(rows, TRAIN, categories=["git"], sample=2, seed=1)
    assert len(git) == 2 and {b.category for b in git} == {"git"}


def test_eval_cli_picks_the_split_and_the_sample(settings, monkeypatch, tmp_path) -> None:
    import argparse

    from bashgym_assets.evaluation import cli
    from bashgym_assets.lake import Lake

    bundles, _ = load_folder(PACK)
    Lake(settings).write(
        "gated_scenarios", [{"split": split_for(b.id), "bundle_json": b.model_dump_json()} for b in bundles]
    )
    args = argparse.Namespace(
        scenarios=None, split="train", limit=None, category=[], sample=5, seed=0, per_family=3, fit=0
    )
    picked, _ = cli._bundles(args)
    assert len(picked) == 5 and all(split_for(b.id) == TRAIN for b in picked)
    held, set_of = cli._bundles(argparse.Namespace(**{**vars(args), "split": "held_out", "sample": None}))
    assert held and all(split_for(b.id) == HELD_OUT for b in held)
    assert set(set_of.values()) == {"bundled"} and set(set_of) == {b.id for b in held}
    folder, _ = cli._bundles(
        argparse.Namespace(
            **{**vars(args), "scenarios": str(PACK), "split": "held_out", "sample": 4, "seed": 7}
        )
    )
    assert len(folder) == 4
    with pytest.raises(RuntimeError, match="no splits"):
        cli._bundles(argparse.Namespace(**{**vars(args), "scenarios": str(PACK)}))
    parser = argparse.ArgumentParser()
    cli.add_parsers(parser.add_subparsers())
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "--sample", "0"])
    assert parser.parse_args(["eval", "--split", "train", "--sample", "3"]).sample == 3
    # an empty selection says where it looked, before any model or sandbox is started
    empty = parser.parse_args(["eval", "--split", "train", "--category", "no-such-category"])
    with pytest.raises(RuntimeError, match="train split .categories no-such-category"):
        empty.fn(empty)


def test_eval_cli_names_the_bad_files_of_a_scenarios_folder(settings, tmp_path, capsys) -> None:
    """A --scenarios folder with a file that is no bundle: the good bundles run, the bad file is named with why
    (it used to crash on a field BundleError does not have)."""
    import argparse
    import shutil

    from bashgym_assets.evaluation import cli

    folder = tmp_path / "scenarios"
    shutil.copytree(PACK, folder)
    (folder / "broken.json").write_text("{not json")
    args = argparse.Namespace(
        scenarios=str(folder),
        split="held_out",
        limit=None,
        category=[],
        sample=None,
        seed=0,
        per_family=3,
        fit=0,
    )
    picked, _ = cli._bundles(args)
    assert picked and len(picked) == len(load_folder(PACK)[0])
    assert f"skipped {folder / 'broken.json'}: " in capsys.readouterr().out


@pytest.mark.docker
def test_eval_cli_on_the_train_split_end_to_end(
    settings, tiny, sandbox_image, monkeypatch, tmp_path, capsys
) -> None:
    """``bashgym eval --reference --split train --sample 2``: real sandboxes, the episodes in the lake under an id
    that says train, the summaries in --json."""
    import argparse

    from bashgym_assets.evaluation import cli
    from bashgym_assets.lake import Lake

    bundles, _ = load_folder(PACK)
    lake = Lake(settings)
    lake.write(
        "gated_scenarios", [{"split": split_for(b.id), "bundle_json": b.model_dump_json()} for b in bundles]
    )
    parser = argparse.ArgumentParser()
    cli.add_parsers(parser.add_subparsers())
    out = tmp_path / "summaries.json"
    args = parser.parse_args(
        [
            "eval",
            "--reference",
            "--no-base",
            "--no-champion",
            "--base",
            str(tiny),
            "--split",
            "train",
            "--sample",
            "2",
            "--seed",
            "5",
            "--max-turns",
            "12",
            "--json",
            str(out),
        ]
    )
    assert args.fn(args) == 0
    printed = capsys.readouterr().out
    assert "measure fit" in printed and "eval-cli-train-" in printed
    partition = next(p for p in lake.partitions("eval_episodes") if p.startswith("eval-cli-train-"))
    rows = lake.read("eval_episodes", partition=partition).to_pylist()
    drawn = {
        b.id
        for b in split_bundles(
            [{"split": split_for(b.id), "bundle_json": b.model_dump_json()} for b in bundles],
            TRAIN,
            sample=2,
            seed=5,
        )
    }
    assert {r["scenario_id"] for r in rows} == drawn and all(r["model"] == "reference" for r in rows)
    assert all(r["clean"] for r in rows)  # the reference solutions pass their checks
    assert json.loads(out.read_text())[0]["rates"]["clean"]["k"] == 2


# ---- benchmark_results through Dagster ---------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_benchmark_results_asset_writes_episodes_mlflow_and_the_decision(
    settings, tiny, sandbox_image, monkeypatch, tmp_path
) -> None:
    from bashgym_assets.defs import evaluation as ev
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.lake import Lake
    from bashgym_assets.training import registry

    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(tiny))
    lake = Lake(settings)
    bundles = [_bundle(i) for i in range(40)]
    held = sorted((b for b in bundles if split_for(b.id) == HELD_OUT), key=lambda b: b.id)[:2]
    assert held
    lake.write(
        "gated_scenarios",
        [
            {
                "scenario_id": b.id,
                "admitted": True,
                "split": split_for(b.id),
                "bundle_json": b.model_dump_json(),
            }
            for b in bundles
        ],
    )
    # A LoRA adapter on the tiny model, registered like a trained one.
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    adapter = tmp_path / "adapter"
    get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny), LoraConfig(r=4, target_modules="all-linear")
    ).save_pretrained(adapter)
    reg = registry.log_training_run(
        kind="sft",
        run_name="tiny-sft",
        params={},
        history=[{"step": 1, "loss": 2.0}],
        summary={},
        adapter_dir=str(adapter),
        tags={},
        settings=settings,
    )
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    with dg.instance_for_test() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                "sft_adapter",
                metadata={
                    "adapter_dir": str(adapter),
                    "model_version": reg.model_version,
                    "model_uri": reg.model_uri,
                    "mlflow_run_id": reg.run_id,
                },
            )
        )
        result = dg.materialize(
            [ev.benchmark_results],
            instance=instance,
            resources=resources,
            run_config={
                "ops": {
                    "benchmark_results": {"config": {"max_turns": 2, "max_new_tokens": 8, "max_scenarios": 2}}
                }
            },
        )
        assert result.success
        mat = result.asset_materializations_for_node("benchmark_results")[0]
        checks = result.get_asset_check_evaluations()
    meta = mat.metadata
    rows = {r.data["model"]: r.data for r in meta["comparison"].value.records}
    assert set(rows) == {"candidate", "base"} and rows["candidate"]["n"] == len(held)
    assert meta["dagster/row_count"].value == 2 * len(held) and not meta["promoted"].value
    eval_id = meta["eval_id"].value
    episodes = lake.read("eval_episodes", eval_id).to_pylist()
    assert {e["model"] for e in episodes} == {"candidate", "base"} and all(e["messages"] for e in episodes)
    # Not better than the base: no champion, but the candidate alias is set and the decision is recorded. Keeping
    # the incumbent is the usual outcome, not a failure: the check passes and says what it kept, and why.
    assert len(checks) == 1 and checks[0].passed
    assert checks[0].metadata["outcome"].value.startswith("kept the incumbent: the base model stays")
    assert (
        "does not beat" in checks[0].description and "does not beat" in checks[0].metadata["decision"].value
    )
    assert promo.alias_version(registry.REGISTERED_MODEL, settings=settings) is None
    assert (
        str(promo.alias_version(registry.REGISTERED_MODEL, promo.CANDIDATE, settings).version)
        == reg.model_version
    )
    decisions = lake.read("promotion_decisions").to_pylist()
    assert decisions[-1]["action"] == "keep" and decisions[-1]["eval_id"] == eval_id
    c = registry.client(settings)
    assert "eval_candidate_clean" in c.get_run(reg.run_id).data.metrics
    exp = c.get_experiment_by_name("bashgym-evaluation")
    runs = c.search_runs([exp.experiment_id])
    assert runs and runs[0].data.tags["candidate_training_run"] == reg.run_id
    assert "candidate_clean" in runs[0].data.metrics and "base_clean" in runs[0].data.metrics
    # the run lasts as long as the evaluation did (its episodes), not the few ms of logging (issue 32)
    episodes_s = sum(e["wall_s"] for e in episodes if e["model"] == "candidate") / max(1, len(held))
    assert (runs[0].info.end_time - runs[0].info.start_time) / 1000 >= episodes_s
    assert "per_evaluation_set" in meta and meta["scenarios: bundled"].value == len(held)


class Slow(Scripted):
    """Thinks for a while before each reply (like a batch of generations on a busy CPU)."""

    def next_command(self, messages: list[Message]) -> str:
        import time

        time.sleep(0.6)
        return super().next_command(messages)


@pytest.mark.docker
def test_time_cap_is_wall_time_the_models_included(sandbox_image: str) -> None:
    """The cap counts the model's generation too (issue 37: a local model generated for over 10 minutes under a
    240 s cap that counted sandbox time only): 0.6 s of thinking a reply ends a 1 s episode by its second."""
    settings = EvalSettings(max_turns=3, episode_timeout_s=1.0, command_timeout_s=5.0)
    slow = evaluate(Slow("slow", ["ls", "pwd", "whoami"]), [_bundle(0)], sandbox_image, settings)
    assert slow.episodes[0].end_reason == "time_cap" and slow.episodes[0].n_turns < 3
    assert slow.episodes[0].failure_class == m.FAILURE_TIMEOUT
    sleeper = evaluate(Scripted("sleeper", ["sleep 2", "ls"]), [_bundle(0)], sandbox_image, settings)
    assert sleeper.episodes[0].failure_class == m.FAILURE_TIMEOUT


@pytest.mark.parametrize(
    "reply",
    [
        "cat > notes.md <<'EOF'\n# Title\n## Section\n- item one\n- item two\n**bold** text\n```\ncode\n```\nEOF",
        "cat > a.txt <<EOF\nx\nx\nx\nx\nuser\nEOF",
        "python3 - <<'PYEOF'\nimport sys\nprint('héllo wörld ✓✓✓✓✓✓✓✓✓✓✓✓✓')\nPYEOF",
        "cat <<-END > t.txt\n\t1. first\n\t2. second\n\tEND",
    ],
)
def test_heredoc_bodies_are_data_not_babble(reply: str) -> None:
    assert parse_reply(reply).kind == COMMAND, parse_reply(reply)


def test_babble_after_a_heredoc_is_still_babble() -> None:
    assert parse_reply("cat > f <<'EOF'\nok\nEOF\n1. then this\n2. and that").kind == BABBLE


# ---- a copied prompt banner is not operating ---------------------------------------------------------------------
def test_a_copied_prompt_banner_is_not_operating() -> None:
    echo = _lines("root@sandbox:/app#cat file", "exit")
    assert m.classify(echo, terminated=True, verified=False, end_reason="exit", exit_codes=[127, None]) == (
        False,
        m.FAILURE_PROMPT_ECHO,
    )
    assert m.classify(echo, terminated=True, verified=False, end_reason="exit")[1] == m.FAILURE_PROMPT_ECHO
    for reply in (
        "root@sandbox:/app# cat file",
        "operator@sandbox:/home/operator$ ls -la",
        "$ ls",
        "root@sandbox:/app#",
        "user@host:~$ cd /tmp\nls",
    ):
        line = parse_reply(reply)
        assert line.kind == COMMAND and m.copied_prompt(line.command, 127), (
            reply
        )  # bash runs it: a command...
        assert m.reply_kinds([line], [127]) == [m.PROMPT_ECHO]  # ...that is not operating
    for command in ("# ls", "$HOME/bin/tool", "scp f user@host:/tmp/", "echo root@sandbox:/app#", "ls -la"):
        assert not m.copied_prompt(command, None), command
    assert not m.copied_prompt("root@sandbox:/app#cat file", 0)  # a program of that name ran: a command
    # a real command after the banner does not make the episode clean: the habit is what the figure shows
    mixed = _lines("root@sandbox:/app# touch x", "touch x", "exit")
    assert m.reply_kinds(mixed, [127, 0, None]) == [m.PROMPT_ECHO, COMMAND, EXIT]
    assert m.classify(
        mixed, terminated=True, verified=True, end_reason="exit", exit_codes=[127, 0, None]
    ) == (False, m.FAILURE_PROMPT_ECHO)


@pytest.mark.docker
def test_a_copied_prompt_runs_as_typed_and_the_episode_did_not_operate(sandbox_image: str) -> None:
    """Not stripped: the banner reaches the shell as typed (127, nothing done), as it would in a real terminal;
    the episode is scored as not operating. The same command without the banner is clean."""
    from bashgym_assets.rollout.transcript import orientation

    bundle = _bundle(0)
    banner = orientation(bundle).splitlines()[-1]  # operator@sandbox:/home/operator$
    settings = EvalSettings(max_turns=4)
    echo = evaluate(
        Scripted("echo", [f"{banner} touch ~/done-0.txt", "exit"]), [bundle], sandbox_image, settings
    )
    e = echo.episodes[0]
    ran = e.messages[3].content
    assert ran.startswith(f"bash: {banner}: ") and ran.endswith("[exit code: 127]"), ran  # the banner ran
    assert (e.operated, e.verified, e.clean, e.failure_class) == (False, False, False, m.FAILURE_PROMPT_ECHO)
    assert e.reply_kinds == "prompt_echo,exit" and e.n_commands == 0
    assert echo.summary.rates["operate"].rate == 0
    plain = evaluate(Scripted("plain", ["touch ~/done-0.txt", "exit"]), [bundle], sandbox_image, settings)
    assert plain.episodes[0].clean and plain.episodes[0].operated


# ---- the ETA of the progress lines ----------------------------------------------------------------------------
def _replay(
    events: list[tuple[float, str, int]], probes: list[float], total: int, max_turns: int, max_live: int
) -> dict[float, tuple[float | None, bool, str]]:
    """Feed ``EtaEstimator`` a sequence of (time, turn|last|done, episode) with a fake clock; at each probe time:
    (seconds left, whether any episode has ended, progress line)."""
    from bashgym_assets.evaluation.runner import EtaEstimator

    now = [0.0]
    eta = EtaEstimator(total, max_turns, max_live, clock=lambda: now[0])
    out: dict[float, tuple[float | None, bool, str]] = {}
    order = {"turn": 0, "last": 0, "done": 1, "probe": 2}
    for t, kind, key in sorted(
        [*events, *((p, "probe", -1) for p in probes)], key=lambda x: (x[0], order[x[1]])
    ):
        now[0] = t
        if kind in ("turn", "last"):
            eta.turn(key, ended=kind == "last")
        elif kind == "done":
            eta.finish(key)
        else:
            out[t] = (eta.seconds_left(), not eta.lengths, eta.line(eta.finished, 0.0))
    return out


def test_eta_is_not_inflated_by_the_slow_start() -> None:
    """A sequence shaped like the reported run: 19 episodes side by side, 430 s of model load, sandbox start and
    first generation before the first turn, then a turn every 43 s; each episode ends at its 4th turn, the first
    is scored at 559.9 s, the last at 566.9 s. The old estimate, (episodes left) x elapsed / (episodes done), read
    (19 - 1) x 559.9 / 1 = 10,078 s there."""
    events: list[tuple[float, str, int]] = []
    for i in range(19):
        turns = [430 + 0.33 * i + 43 * k for k in range(4)]
        events += [(t, "turn", i) for t in turns[:-1]] + [
            (turns[-1], "last", i),
            (turns[-1] + 0.9 + 0.06 * i, "done", i),
        ]
    end = max(t for t, kind, _ in events if kind == "done")
    assert round(end) == 567 and round((19 - 1) * 559.9 / 1) == 10078
    probes = [*range(15, 566, 15), 559.9, 563.0]
    got = _replay(events, probes, total=19, max_turns=10, max_live=40)
    for t, (left, bound, line) in sorted(got.items()):
        truth = end - t
        if t < 473:  # no episode has run two turns: the pace is unknown, and no ETA is shown
            assert left is None and "ETA" not in line, (t, line)
        elif t < 559:  # no episode ended: halfway from the next turn to the cap, below the cap's bound
            assert bound and "at most" not in line and truth <= left < 10 * 43, (t, left, truth)
        else:  # from the first finished episode on: within seconds of the truth
            assert not bound and abs(left - truth) < 10, (t, left, truth)
    left, _, line = got[559.9]
    assert line.startswith("1/19 episodes done, 560 s elapsed, ETA ") and left < 10


def test_eta_of_episodes_one_after_another() -> None:
    """One sandbox at a time (max_live 1): queued episodes wait for the slot; 100 s of start before the first."""
    events: list[tuple[float, str, int]] = []
    start = 100.0
    for i in range(5):
        events += [
            (start + 10, "turn", i),
            (start + 20, "turn", i),
            (start + 30, "last", i),
            (start + 31, "done", i),
        ]
        start += 31
    got = _replay(events, [131.5, 200.0], total=5, max_turns=10, max_live=1)
    assert abs(got[131.5][0] - (255 - 131.5)) < 15  # old: 4 x 131.5 / 1 = 526 s
    assert abs(got[200.0][0] - (255 - 200)) < 15


def test_eval_cli_names_adapters_by_their_folder() -> None:
    from bashgym_assets.evaluation.cli import adapter_labels

    assert adapter_labels(["/a/adapters/dpo-7a25", "/a/adapters/grpo-77d7/"]) == ["dpo-7a25", "grpo-77d7"]
    assert adapter_labels(["/x/adapter", "/y/adapter"]) == ["adapter-1", "adapter-2"]


def test_the_evaluation_run_config_is_the_evaluators_settings_plus_the_run() -> None:
    """``EvalSettings`` is defined once: ``benchmark_results``' launchpad config inherits every field and default
    (issue 30), so episode caps and sandboxes are settable there too, and all of them reach the evaluator."""
    from bashgym_assets.defs.evaluation import EvalRunConfig

    assert EvalRunConfig().model_dump(include=set(EvalSettings.model_fields)) == EvalSettings().model_dump()
    run = EvalRunConfig(max_live=8, episode_timeout_s=60.0, max_turns=4, suites=["x"])
    assert EvalSettings.model_validate(
        run.model_dump(include=set(EvalSettings.model_fields))
    ) == EvalSettings(max_live=8, episode_timeout_s=60.0, max_turns=4)
