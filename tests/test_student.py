"""The student in the loop: sampled attempts of a (tiny, real) model at train scenarios in real sandboxes become
trajectory rows with reject reasons; held-out scenarios are refused; the DPO builder pairs a clean reference
trajectory with the student's failure of the same scenario at the first differing assistant turn; and
``student_rollouts`` -> ``dpo_dataset`` through Dagster."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from bashgym_assets.defs.scenarios import GATED_SCHEMA
from bashgym_assets.evaluation import ModelSpec
from bashgym_assets.evaluation import student as st
from bashgym_assets.rollout.episode import TRAJECTORY_SCHEMA, EpisodeLimits, run_episode
from bashgym_assets.rollout.operators import Operator, ReferenceOperator
from bashgym_assets.rollout.rollouts import HeldOutScenarioError
from bashgym_assets.rollout.transcript import Message, initial_messages
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.gate import HELD_OUT, TRAIN, split_for
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training_data.build import HeldOut, build_dpo


def _bundle(i: int, category: str = "files") -> ScenarioBundle:
    return ScenarioBundle(
        id=f"student-{i}",
        task=f"Create the file ~/out-{i}/done.txt.",
        category=category,
        difficulty=1,
        setup=["true"],
        check=f"test -f /home/operator/out-{i}/done.txt",
        reference=[f"mkdir -p ~/out-{i}", f"touch ~/out-{i}/done.txt"],
        source="test",
    )


def _split(split: str, n: int, start: int = 0) -> list[ScenarioBundle]:
    out, i = [], start
    while len(out) < n:
        if split_for(f"student-{i}") == split:
            out.append(_bundle(i, category=("files", "text", "git")[i % 3]))
        i += 1
    return out


class Scripted(Operator):
    """Replies from a fixed script, then repeats its last line."""

    scaffolded = False

    def __init__(self, name: str, script: list[str]) -> None:
        self.name, self.script = name, script

    def next_command(self, messages: list[Message]) -> str:
        done = sum(1 for x in messages if x.role == "assistant")
        return self.script[min(done, len(self.script) - 1)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


# ---- plain logic ------------------------------------------------------------------------------------------------
def test_scenario_subset_is_train_only_deterministic_and_spread() -> None:
    bundles = _split(TRAIN, 12) + _split(HELD_OUT, 3)
    picked = st.select_scenarios(bundles, max_scenarios=6)
    assert len(picked) == 6 and all(split_for(b.id) == TRAIN for b in picked)
    assert [b.id for b in picked] == [
        b.id for b in st.select_scenarios(list(reversed(bundles)), max_scenarios=6)
    ]
    assert {b.category for b in picked} == {"files", "text", "git"}
    assert len(st.select_scenarios(bundles)) == 12
    assert {b.category for b in st.select_scenarios(bundles, 10, categories=["git"])} == {"git"}


def test_held_out_scenarios_and_greedy_sampling_are_refused() -> None:
    spec = ModelSpec(label="never-loaded", base="/nonexistent/model")
    with pytest.raises(HeldOutScenarioError):
        st.run_student(spec, _split(TRAIN, 1) + _split(HELD_OUT, 1), None)
    ext = _bundle(0).model_copy(update={"id": "ext-suite-task"})
    with pytest.raises(HeldOutScenarioError):
        st.attempts(ReferenceOperator(), "reference", [ext], None)
    with pytest.raises(ValueError, match="temperature"):
        st.run_student(spec, _split(TRAIN, 1), None, st.StudentSettings(temperature=0.0))


def test_infrastructure_failures_never_pair() -> None:
    rows = [
        {"kept": False, "reject_reason": "sandbox_error"},
        {"kept": False, "reject_reason": "setup_failed"},
        {"kept": False, "reject_reason": "operator_error"},
        {"kept": False, "reject_reason": "babble"},
        {"kept": True, "reject_reason": ""},
    ]
    keep, dropped = st.pairable(rows)
    assert dropped == 3 and [r["reject_reason"] for r in keep] == ["babble", ""]


# ---- real sandboxes ---------------------------------------------------------------------------------------------
@pytest.mark.docker
def test_tiny_student_attempts_become_rows_with_reject_reasons(tiny: Path, sandbox_image: str) -> None:
    bundles = _split(TRAIN, 2)
    run = st.run_student(
        ModelSpec(label="tiny", base=str(tiny)),
        bundles,
        sandbox_image,
        st.StudentSettings(samples=2, max_turns=2, max_new_tokens=8, temperature=0.9),
    )
    assert run.operator == "student:tiny" and len(run.records) == 4
    assert {(r.scenario_id, r.sample_index) for r in run.records} == {
        (b.id, i) for b in bundles for i in (0, 1)
    }
    assert len({r.trajectory_id for r in run.records}) == 4
    for r in run.records:  # an untrained 2-layer model solves nothing; every attempt says why
        assert not r.kept and r.reject_reason and r.split == TRAIN and r.operator == "student:tiny"
        assert r.messages[:2] == initial_messages(next(b for b in bundles if b.id == r.scenario_id))
        assert r.n_turns >= 1 and r.messages[2].role == "assistant"
    table = pa.Table.from_pylist([r.model_dump() for r in run.records], schema=TRAJECTORY_SCHEMA)
    assert table.num_rows == 4
    rows = st.failure_rows(run.records)
    assert sum(r["attempts"] for r in rows) == 4
    assert st.scenarios_with_failure(run.records) == sorted(b.id for b in bundles)


@pytest.mark.docker
def test_sampled_attempts_are_batched_continuously_distinct_and_seeded(
    tiny: Path, sandbox_image: str
) -> None:
    """The student samples (temperature > 0) through the continuous decoder, not turn-by-turn ``generate`` calls:
    k attempts at one task draw from generators seeded by (seed, scenario, sample, turn), so they differ, and the
    same key draws the same reply."""
    from bashgym_assets.rollout.operators import LocalModelOperator

    bundles = _split(TRAIN, 2)
    op = LocalModelOperator(tiny, temperature=1.0, top_p=1.0, seed=7, max_new_tokens=12)
    run = st.attempts(op, "tiny", bundles, sandbox_image, st.StudentSettings(samples=2, max_turns=2))
    assert op.continuous_stats is not None and op.continuous_stats.replies >= 4  # the stream decoded them
    firsts = [
        [
            next(m.content for m in r.messages[2:] if m.role == "assistant")
            for r in run.records
            if r.scenario_id == b.id
        ]
        for b in bundles
    ]
    assert all(len(f) == 2 for f in firsts)
    assert any(f[0] != f[1] for f in firsts), (
        firsts
    )  # k attempts at one task are k draws, not one reply k times

    def reply(key: str) -> str:
        stream = LocalModelOperator(tiny, temperature=1.0, seed=7, max_new_tokens=12).reply_stream()
        stream.submit("k", initial_messages(bundles[0]), sample_key=key)
        got: list = []
        while not got:
            got = stream.step()
        return got[0][1].text

    same = reply("a")
    assert reply("a") == same  # the same key draws the same reply
    assert any(reply(key) != same for key in ("b", "c", "d"))  # another key draws its own


@pytest.mark.docker
def test_reference_success_pairs_with_student_failure_at_the_first_differing_turn(sandbox_image: str) -> None:
    bundle = _split(TRAIN, 1)[0]
    ref = run_episode(bundle, ReferenceOperator(), sandbox_image, limits=EpisodeLimits(max_turns=5))
    assert ref.kept
    # The student starts like the reference, then looks around instead of creating the file, and exits.
    n = bundle.id.split("-")[1]
    student = st.attempts(
        Scripted("lazy", [f"mkdir -p ~/out-{n}", f"ls ~/out-{n}", "exit"]),
        "lazy",
        [bundle],
        sandbox_image,
        st.StudentSettings(samples=1, max_turns=5),
    )
    bad = student.records[0]
    assert not bad.kept and bad.reject_reason == "wrong_result" and bad.operator == "student:lazy"
    result = build_dpo([], [ref.model_dump(), bad.model_dump()])
    assert result.counts["rows"] == 1
    pair = result.rows[0]
    ref_msgs = [m.model_dump() for m in ref.messages]
    bad_msgs = [m.model_dump() for m in bad.messages]
    assert pair["split_turn"] == 4 and pair["prompt"] == ref_msgs[:4] == bad_msgs[:4]  # the shared prefix
    assert pair["prompt"][2]["content"] == f"mkdir -p ~/out-{n}"
    assert pair["chosen"] == ref_msgs[4:] and pair["chosen"][0]["content"] == f"touch ~/out-{n}/done.txt"
    assert pair["rejected"] == bad_msgs[4:] and pair["rejected"][0]["content"] == f"ls ~/out-{n}"
    assert pair["rejected_reason"] == "wrong_result" and pair["scenario_id"] == bundle.id
    assert pair["rejected_source"].endswith(bad.trajectory_id)

    # The same attempts never pair when the scenario is held out or comes from an external suite.
    held = build_dpo(
        [], [ref.model_dump(), bad.model_dump()], heldout=[HeldOut(id=bundle.id, task=bundle.task)]
    )
    assert held.counts["rows"] == 0 and held.quarantine
    ext = [dict(r.model_dump(), scenario_id="ext-suite-x") for r in (ref, bad)]
    assert build_dpo([], ext).counts["rows"] == 0


# ---- through Dagster --------------------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_student_rollouts_asset_writes_the_lake_and_dpo_dataset_pairs_them(
    settings, tiny, sandbox_image, monkeypatch, tmp_path
) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from bashgym_assets.defs import datasets as dd
    from bashgym_assets.defs import student as ds
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.lake import Lake

    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(tiny))
    lake = Lake(settings)
    train, held = _split(TRAIN, 3), _split(HELD_OUT, 2)
    # the held-out tasks teach another skill: the same skill would make every train row a skill twin of them,
    # which the contamination check rightly quarantines (issue 37)
    held = [
        b.model_copy(
            update={
                "task": f"Count the users in /etc/passwd into ~/users-{k}.txt",
                "reference": [f"wc -l < /etc/passwd > ~/users-{k}.txt"],
            }
        )
        for k, b in enumerate(held)
    ]
    lake.write(
        "gated_scenarios",
        [
            {
                "scenario_id": b.id,
                "category": b.category,
                "difficulty": b.difficulty,
                "source": b.source,
                "split": split_for(b.id),
                "reference_turns": 2,
                "duration_s": 1.0,
                "bundle_json": b.model_dump_json(),
            }
            for b in train + held
        ],
        schema=GATED_SCHEMA,
    )
    # What the reference's rollouts look like: a clean attempt at every train scenario.
    lake.write(
        "verified_trajectories",
        [
            dict(
                trajectory_id=f"ref-{b.id}",
                scenario_id=b.id,
                category=b.category,
                difficulty=b.difficulty,
                split=TRAIN,
                operator="reference",
                sample_index=0,
                kept=True,
                verified=True,
                terminated=True,
                commands_only=True,
                reject_reason="",
                n_turns=3,
                duration_s=1.0,
                source=b.source,
                messages=[m.model_dump() for m in initial_messages(b)]
                + [
                    {"role": "assistant", "content": b.reference[0]},
                    {"role": "user", "content": "[exit code: 0]"},
                    {"role": "assistant", "content": b.reference[1]},
                    {"role": "user", "content": "[exit code: 0]"},
                    {"role": "assistant", "content": "exit"},
                ],
            )
            for b in train
        ],
        schema=TRAJECTORY_SCHEMA,
    )
    adapter = tmp_path / "sft-tiny"
    get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny), LoraConfig(r=4, target_modules="all-linear")
    ).save_pretrained(adapter)
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    config = {"max_scenarios": 2, "samples": 2, "max_turns": 2, "max_new_tokens": 8}
    with dg.instance_for_test() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization("sft_adapter", metadata={"adapter_dir": str(adapter)})
        )
        result = dg.materialize(
            [ds.student_rollouts],
            instance=instance,
            resources=resources,
            run_config={"ops": {"student_rollouts": {"config": config}}},
        )
        assert result.success
        meta = result.asset_materializations_for_node("student_rollouts")[0].metadata
        dpo = dg.materialize([dd.dpo_dataset], instance=instance, resources=resources)
        assert dpo.success
        dpo_meta = dpo.asset_materializations_for_node("dpo_dataset")[0].metadata
    assert meta["student"].value == "student:sft:sft-tiny"
    assert "newest sft_adapter" in meta["student_choice"].value and meta["student_ref"].value.endswith(
        "sft-tiny"
    )
    assert meta["attempts"].value == 4 and meta["scenarios_with_a_failure"].value == 2
    assert "failed:" in meta["failing_transcripts"].value
    rows = lake.read("student_rollouts").to_pylist()
    assert len(rows) == 4 and lake.read("student_rollouts").schema.equals(TRAJECTORY_SCHEMA)
    assert all(split_for(r["scenario_id"]) == TRAIN and r["reject_reason"] and not r["kept"] for r in rows)
    assert {r["scenario_id"] for r in rows} <= {b.id for b in train}

    pairs = lake.read("dpo_dataset").to_pylist()
    student_ids = {r["trajectory_id"] for r in rows}
    assert pairs and all(p["rejected_source"].rsplit("/", 1)[-1] in student_ids for p in pairs)
    assert all(p["chosen_source"].endswith("/ref-" + p["scenario_id"]) for p in pairs)
    for p in pairs:  # the tiny model's first reply already differs: the prompt is system + task
        assert p["split_turn"] == 2 and [m["role"] for m in p["prompt"]] == ["system", "user"]
        assert p["chosen"][0]["content"].startswith("mkdir -p")
    assert "pairs_with_student_rejected" in [r.data["stage"] for r in dpo_meta["counts"].records]


@pytest.mark.docker
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_a_dpo_candidate_is_evaluated_against_the_sft_adapter_it_came_from(
    settings, tiny, sandbox_image, monkeypatch, tmp_path
) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from bashgym_assets.defs import evaluation as ev
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.lake import Lake

    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(tiny))
    lake = Lake(settings)
    held = _split(HELD_OUT, 2)
    # The real table's schema: only admitted scenarios, no ``admitted`` column.
    lake.write(
        "gated_scenarios",
        [
            {
                "scenario_id": b.id,
                "category": b.category,
                "difficulty": b.difficulty,
                "source": b.source,
                "split": HELD_OUT,
                "reference_turns": 2,
                "duration_s": 1.0,
                "bundle_json": b.model_dump_json(),
            }
            for b in held
        ],
        schema=GATED_SCHEMA,
    )
    dirs = {}
    for name in ("sft", "dpo"):
        dirs[name] = tmp_path / f"{name}-tiny"
        get_peft_model(
            AutoModelForCausalLM.from_pretrained(tiny), LoraConfig(r=4, target_modules="all-linear")
        ).save_pretrained(dirs[name])
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    with dg.instance_for_test() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization("sft_adapter", metadata={"adapter_dir": str(dirs["sft"])})
        )
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                "dpo_adapter",
                metadata={
                    "adapter_dir": str(dirs["dpo"]),
                    "sft_adapter": str(dirs["sft"]),
                    "sft_model_uri": "None",
                },
            )
        )
        result = dg.materialize(
            [ev.benchmark_results],
            instance=instance,
            resources=resources,
            run_config={
                "ops": {
                    "benchmark_results": {"config": {"max_turns": 1, "max_new_tokens": 4, "promote": False}}
                }
            },
        )
        assert result.success
        meta = result.asset_materializations_for_node("benchmark_results")[0].metadata
    rows = {r.data["model"]: r.data for r in meta["comparison"].value.records}
    assert set(rows) == {"candidate", "sft", "base"} and rows["sft"]["n"] == len(held)
    episodes = lake.read("eval_episodes", meta["eval_id"].value).to_pylist()
    assert {e["model_ref"] for e in episodes if e["model"] == "sft"} == {str(dirs["sft"])}
