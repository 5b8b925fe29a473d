"""The demo's runs are the code locations' own runs, and the checks word what they decided.

``bashgym demo`` / ``train`` used to run each step as ``execute_in_process`` of a job built on the fly: runs of a
job no code location defines, with no origin, that the Dagster UI left off its timeline and would not re-execute
("bashgym_demo is not available in your definitions"). Here, for real (a persistent SQLite instance, the project's
code locations, a gRPC code server, Dagster's GraphQL API that the UI's "Re-execute" button calls): a demo run
belongs to the location workspace.yaml loads its module as, re-executes from that location, and the re-executed
run is judged by its own process, not its parent's. Then the two checks a first-time user misread: a skipped GGUF
round trip is not "Passed", and keeping the incumbent is not "Failed".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets import demo
from bashgym_assets.config import Settings
from bashgym_assets.defs import run_health

CHAIN = """
import dagster as dg
@dg.asset
def first(context):
    context.log.info("first ran")
@dg.asset(deps=[first])
def second(context):
    context.log.info("second ran")
defs = dg.Definitions(assets=[first, second])
"""


def test_demo_runs_are_runs_of_the_asset_job_of_their_workspace_location(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the UI matches a run against: the code location name of workspace.yaml (``bashgym_cpu``), the
    repository and a job that location holds; how a run worker reloads it: the job's code origin. (The code
    location itself is not imported here: its resources wire the environment variables set at import, and this
    test's BASHGYM_HOME is gone after it.)"""
    from dagster._core.code_pointer import ModuleCodePointer

    from bashgym_assets.ingest import SAMPLE_TRACES_DIR
    from bashgym_assets.instance import ensure_dagster_home

    monkeypatch.setenv("DAGSTER_HOME", str(settings.dagster_home))  # restored after the test
    assert ensure_dagster_home(settings) == settings.dagster_home
    monkeypatch.setenv("BASHGYM_TRACE_DIRS", str(SAMPLE_TRACES_DIR))
    demo.register_partitions(["webshop", "datapipe"])
    step = demo.PlanStep(
        module=demo.CPU_MODULE,
        assets=["raw_sessions", "redacted_sessions", "tiered_traces"],
        partitioned=True,
    )
    lines: list[str] = []
    demo.run_plan([step], ["webshop"], demo.demo_env(), lines.append, profile="quick")
    with dg.DagsterInstance.get() as instance:
        (run,) = instance.get_runs()
        checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(dg.AssetKey("redacted_sessions"), "no_secrets_left")]
        )
    assert run.status == dg.DagsterRunStatus.SUCCESS and run.tags["dagster/partition"] == "webshop"
    origin = run.remote_job_origin
    assert origin is not None, (
        "a run without an origin is left off the UI's timeline and cannot be re-executed"
    )
    assert origin.location_name == "bashgym_cpu"
    assert origin.repository_origin.repository_name == "__repository__"  # a Definitions' one repository
    assert run.job_name == origin.job_name == "__ASSET_JOB"  # the location's implicit asset job
    assert run.asset_selection == {dg.AssetKey(a) for a in step.assets}
    pointer = run.job_code_origin.repository_origin.code_pointer
    assert isinstance(pointer, ModuleCodePointer) and (pointer.module, pointer.fn_name) == (
        demo.CPU_MODULE,
        "defs",
    )
    assert run.job_code_origin.job_name == run.job_name
    assert run.run_config["execution"] == {
        "config": {"in_process": {}}
    }  # the location's executor, in process
    assert run.tags[run_health.PID_TAG] != str(os.getpid())  # the plan's child process ran it
    assert {m: o.location_name for m, o in demo.workspace_locations().items()} == {
        demo.CPU_MODULE: "bashgym_cpu",
        demo.GPU_MODULE: "bashgym_gpu",
    }
    assert next(iter(checks.values())).run_id == run.run_id  # with the asset's blocking check


def test_a_demo_run_re_executes_from_its_code_location(tmp_path: Path) -> None:
    """The UI's "Re-execute" (GraphQL ``launchPipelineReexecution`` with the parent run) against a workspace that
    loads the demo's module: the new run is launched from that location and succeeds; and the demo run's job
    snapshot was subset from the loaded job's (what the UI compares before it offers Re-execute unwarned)."""
    (tmp_path / "tiny_chain.py").write_text(CHAIN)
    (tmp_path / "workspace.yaml").write_text("load_from:\n  - python_module: tiny_chain\n")
    # the run launched at once (no daemon to dequeue it), in a run worker process of the code server
    (tmp_path / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\nrun_coordinator:\n  module: "
        "dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path), DAGSTER_HOME=str(tmp_path))
    demo.run_plan(
        [demo.PlanStep(module="tiny_chain", assets=["first", "second"], partitioned=False)],
        [],
        env,
        lambda _: None,
    )
    script = tmp_path / "reexecute.py"
    script.write_text('''
import json, sys, time
import dagster as dg
from dagster._core.workspace.load import load_workspace_process_context_from_yaml_paths
from dagster_graphql.test.utils import execute_dagster_graphql
MUTATION = """mutation($p: ReexecutionParams!) { launchPipelineReexecution(reexecutionParams: $p) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
instance = dg.DagsterInstance.get()
(parent,) = instance.get_runs()
with load_workspace_process_context_from_yaml_paths(instance, ["workspace.yaml"]) as workspace:
    loaded = workspace.create_request_context().get_code_location("tiny_chain").get_repository("__repository__")
    lineage = instance.get_job_snapshot(parent.job_snapshot_id).lineage_snapshot
    subset_of = lineage.parent_snapshot_id if lineage else None
    same_snapshot = loaded.get_full_job(parent.job_name).job_snapshot.snapshot_id == subset_of
    res = execute_dagster_graphql(workspace.create_request_context(), MUTATION,
                                  {"p": {"parentRunId": parent.run_id, "strategy": "ALL_STEPS"}})
    out = res.data["launchPipelineReexecution"]
    if out["__typename"] != "LaunchRunSuccess":
        sys.exit(json.dumps(out))
    run_id = out["run"]["runId"]
    deadline = time.monotonic() + 120
    while not instance.get_run_by_id(run_id).is_finished and time.monotonic() < deadline:
        time.sleep(0.5)
run = instance.get_run_by_id(run_id)
print("RESULT", json.dumps({"status": run.status.value, "parent": run.parent_run_id, "demo_run": parent.run_id,
                  "location": run.remote_job_origin.location_name, "job": run.job_name,
                  "same_snapshot": same_snapshot}))
''')
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    import json

    out = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert out["status"] == "SUCCESS" and out["parent"] == out["demo_run"]
    assert out["location"] == "tiny_chain" and out["job"] == "__ASSET_JOB"
    # the demo run was subset from the very job the location loads: the UI offers "Re-execute" without a warning
    assert out["same_snapshot"] is True


def test_a_re_executed_run_is_judged_by_its_own_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-execution copies its parent's tags, the demo process's identity included. That process has exited:
    judged by it, the new run looked dead from its start, and the dead-run reaper failed it while it waited for
    the pool or ran. Its own process, once it records itself, is what counts."""
    from bashgym_assets.config import PROJECT_ROOT

    home = tmp_path / "dagster"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    parent_tags = run_health.process_tags(gone.pid)  # taken while it runs, as the demo's child tags its runs
    gone.kill()
    gone.wait()
    assert run_health.process_alive(parent_tags) is False
    with dg.DagsterInstance.get() as instance:
        parent = instance.add_run(
            dg.DagsterRun(job_name="__ASSET_JOB", status=dg.DagsterRunStatus.SUCCESS, tags=parent_tags)
        )
        child = instance.add_run(
            dg.DagsterRun(
                job_name="__ASSET_JOB",
                status=dg.DagsterRunStatus.STARTED,
                tags=parent_tags,
                parent_run_id=parent.run_id,
                root_run_id=parent.run_id,
            )
        )
        assert run_health.reap_dead_runs(instance, lambda _: None) == []
        assert instance.get_run_by_id(child.run_id).status == dg.DagsterRunStatus.STARTED
        assert run_health.PID_TAG not in run_health.run_process_tags(instance, child)
        run_health.tag_current_run(instance, child.run_id)  # the run's worker records itself
        child = instance.get_run_by_id(child.run_id)
        assert child.tags[run_health.PID_TAG] == str(os.getpid())
        assert run_health.process_alive(run_health.run_process_tags(instance, child)) is True


# --- the checks' wording --------------------------------------------------------------------------------------


def _episodes(model: str, clean: list[bool]) -> list:
    from bashgym_assets.evaluation.metrics import EvalEpisode

    return [
        EvalEpisode(
            eval_id="eval-1",
            model=model,
            model_ref=model,
            scenario_id=f"s{i}",
            category="files",
            difficulty=1,
            operated=True,
            terminated=True,
            verified=ok,
            clean=ok,
            failure_class="" if ok else "wrong_state",
        )
        for i, ok in enumerate(clean)
    ]


def test_keeping_the_incumbent_passes_and_says_so() -> None:
    """Not promoted is the usual outcome: the check passes and its words say "kept the incumbent" and why."""
    from bashgym_assets.defs.evaluation import PROMOTION_CHECK, promotion_check
    from bashgym_assets.evaluation import promotion as promo

    kept = promo.decide(
        _episodes("candidate", [True, False, False, False]),
        _episodes("base", [True, True, False, False]),
        candidate_version="3",
    )
    assert not kept.promote
    check = promotion_check(kept, promoted=False)
    assert check.check_name == PROMOTION_CHECK and check.passed
    assert check.metadata["outcome"].value.startswith(
        "kept the incumbent: the base model stays; version 3 not promoted"
    )
    assert "does not beat the base's 50%" in check.description and check.description.startswith(
        "kept the incumbent"
    )
    assert check.metadata["promoted"].value is False

    won = promo.decide(
        _episodes("candidate", [True] * 8), _episodes("base", [False] * 8), candidate_version="4"
    )
    assert won.promote
    check = promotion_check(won, promoted=True)
    assert check.passed and check.metadata["outcome"].value == "PROMOTED: version 4 is the new champion"

    # nothing to decide on (no scenario evaluated for both): the one case worth a warning
    none = promo.decide(_episodes("candidate", [True]), [], candidate_version="5")
    check = promotion_check(none, promoted=False)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.description.startswith("no decision: no held-out scenario was evaluated for both models")


@pytest.fixture(scope="module")
def tiny_adapter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from bashgym_assets.testing.tiny_model import (
        build_tiny_model,
        random_lora_adapter,
        with_smollm_pre_tokenizer,
    )

    root = tmp_path_factory.mktemp("round-trip-tiny")
    # the exporter refuses a tokenizer llama.cpp has no exact pre-tokenizer for: give it SmolLM's layout
    base = with_smollm_pre_tokenizer(build_tiny_model(root / "base", init_range=0.02))
    return base, random_lora_adapter(base, root / "adapter")


def test_a_round_trip_that_was_not_run_is_skipped_not_passed(
    tiny_adapter: tuple[Path, Path], settings: Settings, empty_mlflow_store: Path
) -> None:
    """``verify: false`` (the demo profiles) compares nothing: the check has no result, so the UI shows it
    skipped (the run succeeded without evaluating it), and the asset's metadata says why. Nothing exported: the
    same."""
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

    from bashgym_assets.defs.export import exported_model
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.testing.tiny_model import register_adapter

    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    resources = {"bashgym": BashgymHome(home=str(settings.home))}

    key = dg.AssetCheckKey(dg.AssetKey("exported_model"), "gguf_round_trip")

    def latest(instance: dg.DagsterInstance):
        return instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]

    with dg.instance_for_test() as instance:
        nothing = dg.materialize([exported_model], resources=resources, instance=instance)
        assert nothing.success and not nothing.get_asset_check_evaluations()
        assert latest(instance).status == AssetCheckExecutionRecordStatus.PLANNED  # shown as skipped
        meta = nothing.asset_materializations_for_node("exported_model")[0].metadata
        assert meta["round_trip_check"].value == "skipped: nothing was exported"

        base, adapter = tiny_adapter
        register_adapter(settings, base, adapter)
        result = dg.materialize(
            [exported_model],
            resources=resources,
            instance=instance,
            run_config={"ops": {"exported_model": {"config": {"verify": False}}}},
        )
        assert result.success
        assert not [c for c in result.get_asset_check_evaluations() if c.passed], (
            "a round trip that compared nothing must not pass"
        )
        record = latest(instance)
        assert record.run_id == result.run_id and record.status == AssetCheckExecutionRecordStatus.PLANNED
        meta = result.asset_materializations_for_node("exported_model")[0].metadata
        assert meta["round_trip_check"].value == "skipped: verify: false, the GGUF files were not read back"
        assert meta["verified"].value is False


def test_a_step_failure_without_a_class_name_is_still_reported() -> None:
    """``failure_lines`` unwraps Dagster's step wrapper down to the asset's own error; an error that came without
    its class name (Dagster types it optional) is reported as it is, where it used to fail the report itself."""
    from types import SimpleNamespace

    from dagster_shared.error import SerializableErrorInfo

    def error(
        message: str, cls_name: str | None, cause: SerializableErrorInfo | None = None
    ) -> SerializableErrorInfo:
        return SerializableErrorInfo(message=message, stack=[], cls_name=cls_name, cause=cause)

    class Instance:
        def __init__(self, *errors: SerializableErrorInfo) -> None:
            self.errors = errors

        def all_logs(self, run_id: str, of_type: object) -> list[SimpleNamespace]:
            return [
                SimpleNamespace(
                    dagster_event=SimpleNamespace(
                        step_key=f"step{i}", step_failure_data=SimpleNamespace(error=e)
                    )
                )
                for i, e in enumerate(self.errors)
            ]

    boom = error("boom\nmore", "ValueError")
    wrapped = error("Error occurred while executing op", "DagsterExecutionStepExecutionError", boom)
    nameless = error("wrapped: boom", None, boom)
    silent = error("", None)
    assert demo.failure_lines(Instance(wrapped, nameless, silent), "run") == [  # a duck-typed instance
        "step0: boom",
        "step1: wrapped: boom",
        "step2: an error without a message",
    ]
