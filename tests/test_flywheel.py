"""The flywheel, unattended: a new session file -> the sensor's partition and ingest run -> the automation
conditions request the datasets -> the nightly tick requests training (run here with a tiny model) -> the
automation conditions request the evaluation for the new adapter; and nothing is requested when nothing changed.

Driven on a real instance with Dagster's own evaluators: the sensor and the schedule through their contexts, the
automation conditions through ``evaluate_automation_conditions`` (what the automation-condition sensor runs on
each daemon tick), the runs through ``execute_in_process``.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets import definitions as cpu
from bashgym_assets import gpu_definitions as gpu
from bashgym_assets.defs import datasets as dd
from bashgym_assets.defs import training as tr
from bashgym_assets.defs.automation import DOWNSTREAM
from bashgym_assets.defs.ingest import trace_files_sensor
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.ingest import SAMPLE_TRACES_DIR
from bashgym_assets.testing.tiny_model import build_tiny_model

SFT, DPO, EVAL, STUDENT = (
    dg.AssetKey(k) for k in ("sft_dataset", "dpo_dataset", "benchmark_results", "student_rollouts")
)


def _one_graph(resources: dict) -> dg.Definitions:
    """Both code locations' assets in one graph, as the daemon sees the workspace."""
    assets = [a for d in (cpu.defs, gpu.defs) for a in (d.assets or [])]
    checks = [c for d in (cpu.defs, gpu.defs) for c in (d.asset_checks or [])]
    return dg.Definitions(
        assets=assets, asset_checks=checks, jobs=list(cpu.defs.jobs or []), resources=resources
    )


def _drop_sample_repo(watched: Path, folder: str) -> None:
    """One repository's bundled sample sessions (real Claude Code layout) copied into the watched folder."""
    target = watched / folder
    shutil.copytree(SAMPLE_TRACES_DIR / folder, target)
    old = time.time() - 60
    for path in target.rglob("*"):
        os.utime(path, (old, old))


def _requested(result) -> set[dg.AssetKey]:
    return {key for key in (SFT, DPO, EVAL, STUDENT) if result.get_num_requested(key)}


def test_conditions_and_schedules_are_on_by_default():
    assert tr.nightly_retraining.default_status == dg.DefaultScheduleStatus.RUNNING
    for defs in (cpu.defs, gpu.defs):
        sensors = [s for s in defs.sensors if isinstance(s, dg.AutomationConditionSensorDefinition)]
        assert len(sensors) == 1 and sensors[0].default_status == dg.DefaultSensorStatus.RUNNING
    graph = _one_graph({"bashgym": BashgymHome()})
    for key in (SFT, DPO, EVAL, STUDENT):
        assert graph.resolve_assets_def(key).automation_conditions_by_key[key] == DOWNSTREAM


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_a_new_trace_file_reaches_training_and_evaluation_without_a_click(settings, tmp_path, monkeypatch):
    watched = tmp_path / "projects"
    watched.mkdir()
    monkeypatch.setenv("BASHGYM_TRACE_DIRS", str(watched))
    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(build_tiny_model(tmp_path / "tiny")))
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    graph = _one_graph(resources)
    with dg.instance_for_test() as instance:
        # tick 0: nothing there yet
        ctx = dg.build_sensor_context(instance=instance, resources=resources)
        tick = trace_files_sensor(ctx)
        assert not tick.run_requests
        conditions = dg.evaluate_automation_conditions(defs=graph, instance=instance)
        cursor = conditions.cursor

        # a session file lands in the watched folder: the sensor adds the partition and asks for its ingest run
        _drop_sample_repo(watched, "-home-demo-projects-webshop")
        ctx = dg.build_sensor_context(instance=instance, resources=resources, cursor=tick.cursor)
        tick = trace_files_sensor(ctx)
        assert len(tick.run_requests) == 1
        repo = tick.run_requests[0].partition_key
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        ingest = graph.resolve_job_def("ingest_repo_job").execute_in_process(
            partition_key=repo, instance=instance, tags=tick.run_requests[0].tags
        )
        assert ingest.success

        # the datasets' conditions fire on the updated partition; nothing GPU-side yet
        conditions = dg.evaluate_automation_conditions(defs=graph, instance=instance, cursor=cursor)
        assert _requested(conditions) == {SFT, DPO}, conditions
        cursor = conditions.cursor
        assert dg.materialize(
            [dd.sft_dataset, dd.dpo_dataset], instance=instance, resources=resources
        ).success

        # the nightly tick asks for training because sft_dataset has a new version; run it (tiny model)
        schedule_ctx = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=datetime(2026, 11, 25, 2, tzinfo=UTC)
        )
        request = tr.nightly_retraining(schedule_ctx)
        assert isinstance(request, dg.RunRequest) and tr.sft_adapter.key in request.asset_selection
        cfg = {"max_steps": 1, "batch_size": 1, "grad_accum": 1, "max_length": 256}
        assert dg.materialize(
            [tr.base_model, tr.sft_adapter],
            instance=instance,
            resources=resources,
            run_config={"ops": {"sft_adapter": {"config": cfg}}},
        ).success

        # the new adapter: the evaluation (and the student's attempts) are requested by their conditions
        conditions = dg.evaluate_automation_conditions(defs=graph, instance=instance, cursor=cursor)
        assert {EVAL, STUDENT} <= _requested(conditions), conditions
        assert SFT not in _requested(conditions)
        cursor = conditions.cursor

        # nothing changed since: no request anywhere, and the schedule says why it skips
        ctx = dg.build_sensor_context(instance=instance, resources=resources, cursor=tick.cursor)
        assert not trace_files_sensor(ctx).run_requests
        skip = tr.nightly_retraining(schedule_ctx)
        assert isinstance(skip, dg.SkipReason) and "unchanged" in skip.skip_message
        quiet = dg.evaluate_automation_conditions(defs=graph, instance=instance, cursor=cursor)
        assert _requested(quiet) == set(), quiet
