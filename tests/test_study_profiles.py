"""The learning study's recipes as pipeline profiles (issue 38): ``bashgym train --profile study-fit`` and
``study-transfer`` train what the study's arms trained, the way they trained it, and every profile is valid run
config of the assets it names (checked by Dagster itself, so a misspelt field fails here, not after an hour).

The small-size run takes the real profile (fewer tasks, two families) through the real assets in real sandboxes:
only the named train families (and the held-out ones, the ``unseen`` set) reach the gate, the pack gives only its
held-out tasks, and the SFT rows come from those families alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets import demo
from bashgym_assets.training import trainer

STUDY_RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "learning_study"


def _locations() -> list[dg.JobDefinition]:
    from bashgym_assets.definitions import defs as cpu
    from bashgym_assets.gpu_definitions import defs as gpu

    return [cpu.resolve_implicit_global_asset_job_def(), gpu.resolve_implicit_global_asset_job_def()]


def test_every_profile_is_valid_run_config_of_assets_that_exist(bashgym_home: Path) -> None:
    jobs = _locations()
    for name, profile in demo.PROFILES.items():
        for asset in profile:
            op = asset.replace("/", "__")
            owners = [job for job in jobs if op in job.graph.node_dict]
            assert owners, f"profile {name}: no asset {asset}"
            dg.validate_run_config(owners[0], {"ops": {op: {"config": profile[asset]}}})
    with pytest.raises(dg.DagsterInvalidConfigError, match="train_familes"):
        dg.validate_run_config(jobs[0], {"ops": {"scenario_candidates": {"config": {"train_familes": []}}}})


@pytest.mark.parametrize(("profile", "arm"), [("study-fit", "fit6"), ("study-transfer", "wide6")])
def test_a_study_profile_trains_what_its_arm_trained_as_it_trained(profile: str, arm: str) -> None:
    from bashgym_assets.evaluation.learning_study import StudyTraining

    recorded = json.loads((STUDY_RESULTS / f"{arm}.json").read_text())
    config = demo.PROFILES[profile]
    assert config["scenario_candidates"]["train_families"] == recorded["arm"]["families"]
    assert config["generated_scenarios"]["per_family"] == recorded["arm"]["tasks_per_family"]
    # the profile's epochs are one the arm was evaluated at
    assert config["sft_adapter"]["epochs"] in {c["epoch"] for c in recorded["checkpoints"]}
    assert config["sft_dataset"]["observation_chars"] == recorded["arm"]["observation_chars"]
    study = StudyTraining()
    for field in ("learning_rate", "lr_schedule", "warmup_steps", "max_length", "curriculum"):
        assert config["sft_adapter"][field] == getattr(study, field) == recorded["arm"]["train"][field], field
    assert config["benchmark_results"]["transfer_per_family"] == recorded["arm"]["transfer_per_family"]
    assert set(config["benchmark_results"]["sets"]) == {"fit", "transfer", "unseen", "bundled"}
    assert set(demo.PROFILE_SKIPS[profile]) == {
        "student_rollouts",
        "dpo_dataset",
        "dpo_adapter",
        "grpo_adapter",
        "exported_model",
    }
    steps = demo.without(demo.plan(demo.asset_nodes()), demo.PROFILE_SKIPS[profile])
    planned = {a for s in steps for a in s.assets}
    assert {"sft_adapter", "benchmark_results"} <= planned and "dpo_adapter" not in planned


def test_auto_dtype_is_bfloat16_only_where_the_cpu_computes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trainer, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    assert trainer.auto_dtype("cpu") == "bfloat16"
    monkeypatch.setattr(trainer, "cpu_flags", lambda: {"avx2", "amx_bf16"})
    assert trainer.auto_dtype("cpu") == "bfloat16"
    monkeypatch.setattr(trainer, "cpu_flags", lambda: {"avx2", "avx512f"})
    assert trainer.auto_dtype("cpu") == "float32"
    config = trainer.TrainConfig(base_model="m", output_dir="o", dtype="auto", device="cpu")
    assert config.dtype == "float32"  # what the run logs and saves is the precision it trains in


def test_cpu_flags_are_read_from_cpuinfo() -> None:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = trainer.cpu_flags()
    if "flags" in text:
        assert "fpu" in flags or len(flags) > 10
    else:
        assert flags == set()


def test_unknown_train_families_are_refused_by_name() -> None:
    from bashgym_assets.evaluation.learning_study import check_families
    from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES

    with pytest.raises(ValueError, match="unknown family 'files-delete-by-patern'"):
        check_families(["files-delete-by-patern"])
    with pytest.raises(ValueError, match="held-out"):
        check_families([sorted(HELD_OUT_FAMILIES)[0]])


@pytest.mark.docker
def test_a_study_profile_at_small_size_trains_on_its_families_alone(
    bashgym_home: Path, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bashgym_assets.defs.datasets import sft_dataset
    from bashgym_assets.defs.factory import generated_scenarios
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.defs.scenarios import gated_scenarios, scenario_candidates
    from bashgym_assets.defs.trajectories import verified_trajectories
    from bashgym_assets.lake import Lake
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.factory.family import family_of
    from bashgym_assets.scenarios.factory.split import HELD_OUT_FAMILIES
    from bashgym_assets.scenarios.gate import HELD_OUT, split_for

    monkeypatch.delenv("BASHGYM_EVAL_SUITE_DIRS", raising=False)
    trained = demo.STUDY_FAMILIES[:2]
    left_out = demo.STUDY_FAMILIES[2]
    held_out = sorted(HELD_OUT_FAMILIES)[0]
    profile = demo.study_profile(tasks_per_family=2, epochs=1, families=trained)
    resources = {"bashgym": BashgymHome(home=str(bashgym_home))}
    instance = dg.DagsterInstance.ephemeral()

    def run(asset: dg.AssetsDefinition, key: str | None = None) -> None:
        name = asset.key.path[-1]
        config = {"ops": {name: {"config": profile[name]}}} if name in profile else None
        result = dg.materialize(
            [asset], resources=resources, instance=instance, partition_key=key, run_config=config
        )
        assert result.success, name

    for family in [*trained, left_out, held_out]:
        run(generated_scenarios, family)
    for asset in (scenario_candidates, gated_scenarios, verified_trajectories, sft_dataset):
        run(asset)

    lake = Lake(root=bashgym_home / "lake")
    gated = lake.read_rows("gated_scenarios")  # the admitted tasks
    families = {family_of(r["scenario_id"]) for r in gated} - {None}
    assert families == {*trained, held_out}  # the family left out never reached the gate
    pack = [r for r in gated if family_of(r["scenario_id"]) is None]
    pack_held_out = {b.id for b in load_pack()[0] if split_for(b.id) == HELD_OUT}
    assert pack and {r["scenario_id"] for r in pack} <= pack_held_out  # the bundled set, no pack train task
    rows = lake.read_rows("sft_dataset")
    assert rows, "no SFT rows"
    assert {family_of(str(r["scenario_id"])) for r in rows} == set(trained)
    assert {r["source_kind"] for r in rows} == {"trajectory"}
