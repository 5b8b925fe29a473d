"""The nightly retraining schedule, evaluated with Dagster's schedule context on a real instance: it launches
training only when a dataset changed since the last trained adapter, and says why it skips otherwise."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest

from bashgym_assets.defs import datasets as dd
from bashgym_assets.defs import training as tr
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.lake import Lake
from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model


def _evaluate(instance: dg.DagsterInstance):
    ctx = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=datetime(2026, 11, 23, 2, 0, tzinfo=UTC)
    )
    return tr.nightly_retraining(ctx)


def _write_upstream(lake: Lake, extra_trajectories: int = 0) -> None:
    d = syn.demo_inputs()
    trajs = d["trajectories"] + [
        syn.trajectory(f"new-{i}", f"new task number {i}", [f"echo {i}"], kept=True)
        for i in range(extra_trajectories)
    ]
    lake.write("verified_trajectories", trajs)
    lake.write("gated_scenarios", d["scenarios"])


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_nightly_schedule_trains_only_when_datasets_changed(settings, tmp_path, monkeypatch):
    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(build_tiny_model(tmp_path / "tiny")))
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    lake = Lake(settings)
    with dg.instance_for_test() as instance:
        first = _evaluate(instance)
        assert isinstance(first, dg.SkipReason) and "never been materialized" in first.skip_message

        _write_upstream(lake)
        assert dg.materialize(
            [dd.sft_dataset, dd.dpo_dataset], instance=instance, resources=resources
        ).success
        request = _evaluate(instance)
        assert isinstance(request, dg.RunRequest)
        assert set(request.asset_selection) == {tr.sft_adapter.key, tr.dpo_adapter.key}
        assert request.tags["bashgym/night"] == "20261123"
        assert set(request.run_config["ops"]) == {"sft_adapter", "dpo_adapter"}

        # train both adapters for real (tiny model, a couple of steps) with the config the schedule would use
        cfg = {"max_steps": 2, "batch_size": 2, "grad_accum": 1, "max_length": 256}
        result = dg.materialize(
            [tr.base_model, tr.sft_adapter, tr.dpo_adapter],
            instance=instance,
            resources=resources,
            run_config={"ops": {"sft_adapter": {"config": cfg}, "dpo_adapter": {"config": cfg}}},
        )
        assert result.success
        skip = _evaluate(instance)
        assert (
            isinstance(skip, dg.SkipReason)
            and "unchanged since the last trained adapter" in skip.skip_message
        )

        # rebuilding with identical input keeps the version: still nothing to do
        assert dg.materialize([dd.sft_dataset], instance=instance, resources=resources).success
        assert isinstance(_evaluate(instance), dg.SkipReason)

        # new trajectories change sft_dataset: retrain SFT, and DPO on top of the new SFT adapter
        _write_upstream(lake, extra_trajectories=3)
        assert dg.materialize([dd.sft_dataset], instance=instance, resources=resources).success
        again = _evaluate(instance)
        assert isinstance(again, dg.RunRequest)
        assert set(again.asset_selection) == {tr.sft_adapter.key, tr.dpo_adapter.key}
        assert again.run_key != request.run_key


def test_schedule_is_defined_in_the_gpu_location():
    from bashgym_assets.gpu_definitions import defs

    sched = defs.resolve_schedule_def("nightly_retraining")
    assert sched.cron_schedule == "0 2 * * *"
    assert sched.job_name == "nightly_training"


@pytest.mark.slow
def test_adapter_refuses_a_dataset_that_contains_heldout_scenarios(settings, tmp_path, monkeypatch):
    """Cross-location runs are not blocked by the dataset's check, so the adapter asset re-verifies."""
    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(build_tiny_model(tmp_path / "tiny")))
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    lake = Lake(settings)
    _write_upstream(lake)
    with dg.instance_for_test() as instance:
        assert dg.materialize([dd.sft_dataset], instance=instance, resources=resources).success
        scen = [
            dict(s, split="held_out") if s["id"] == "lock-key" else s for s in syn.demo_inputs()["scenarios"]
        ]
        lake.write("gated_scenarios", scen)
        result = dg.materialize(
            [tr.sft_adapter],
            instance=instance,
            resources=resources,
            raise_on_error=False,
            run_config={"ops": {"sft_adapter": {"config": {"max_steps": 1}}}},
        )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "contains held-out scenarios" in str(failure.event_specific_data.error)
    assert not (settings.home / "artifacts" / "adapters").exists() or not any(
        (settings.home / "artifacts" / "adapters").iterdir()
    )


@pytest.mark.slow
def test_dpo_adapter_is_skipped_not_failed_without_pairs(settings):
    """Only passing attempts (the reference operator never fails): no DPO pairs is a state, not an error."""
    lake = Lake(settings)
    lake.write("dpo_dataset", [{"split": "validation", "prompt": [], "chosen": [], "rejected": []}])
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [tr.dpo_adapter],
            instance=instance,
            resources={"bashgym": BashgymHome(home=str(settings.home))},
            selection=[tr.dpo_adapter.key],
        )
        assert result.success
        assert result.asset_materializations_for_node("dpo_adapter") == []
        assert instance.get_latest_materialization_event(tr.dpo_adapter.key) is None
