"""The project skeleton: both code locations load and validate, the image builds and runs contained."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets import demo, images

ROOT = Path(__file__).resolve().parents[1]

CPU_ASSETS = {
    "sandbox_image",
    "raw_sessions",
    "redacted_sessions",
    "tiered_traces",
    "scenario_candidates",
    "gated_scenarios",
    "verified_trajectories",
    "sft_dataset",
    "dpo_dataset",
}
GPU_ASSETS = {"base_model", "sft_adapter", "student_rollouts", "dpo_adapter", "benchmark_results"}


def _keys(module: str) -> set[str]:
    """The assets a code location materializes itself (not the external specs it declares for lineage)."""
    defs: dg.Definitions = importlib.import_module(module).defs
    return {key.to_user_string() for key in defs.resolve_asset_graph().materializable_asset_keys}


def test_cpu_location_has_the_cpu_stages() -> None:
    assert _keys("bashgym_assets.definitions") >= CPU_ASSETS


def test_gpu_location_has_every_weight_loading_asset() -> None:
    keys = _keys("bashgym_assets.gpu_definitions")
    assert keys >= GPU_ASSETS
    assert not keys & CPU_ASSETS, "CPU assets must not live in the GPU location"


def test_gpu_location_executor_is_the_gpu_executor() -> None:
    from bashgym_assets import gpu_definitions

    repo = gpu_definitions.defs.get_repository_def()
    job = repo.get_implicit_global_asset_job_def()
    assert job.executor_def.name == "in_process"


def test_cross_location_dependencies_resolve() -> None:
    nodes = demo.asset_nodes()
    gpu_deps = {d for n in nodes.values() if n.module == demo.GPU_MODULE for d in n.deps}
    cpu_keys = {k for k, n in nodes.items() if n.module == demo.CPU_MODULE}
    assert "sft_dataset" in gpu_deps and gpu_deps & cpu_keys
    steps = demo.plan(nodes)
    order = [a for s in steps for a in s.assets]
    assert sorted(order) == sorted(nodes)
    for key, node in nodes.items():
        for dep in node.deps & set(nodes):
            assert order.index(dep) < order.index(key), f"{dep} must run before {key}"
    for (
        step
    ) in steps:  # a skippable asset that yields nothing would make Dagster skip its dependents in its run
        for key in step.assets:
            assert not any(nodes[d].skippable for d in nodes[key].deps & set(step.assets)), (key, step.assets)
    assert nodes["dpo_adapter"].skippable and any(s.assets[0] == "benchmark_results" for s in steps)
    # The student loop: SFT adapter -> the student's attempts -> pairs (CPU) -> DPO from the SFT adapter -> eval.
    runs = [(s.module, s.assets) for s in steps]
    at = {a: i for i, (_, assets) in enumerate(runs) for a in assets}
    assert (
        at["sft_dataset"]
        < at["sft_adapter"]
        <= at["student_rollouts"]
        < at["dpo_dataset"]
        < at["dpo_adapter"]
    )
    assert at["dpo_adapter"] < at["benchmark_results"] <= at["exported_model"]
    assert at["sft_adapter"] <= at["grpo_adapter"] < at["benchmark_results"]  # GRPO continues the SFT adapter
    assert (
        runs[at["dpo_dataset"]][0] == demo.CPU_MODULE and runs[at["student_rollouts"]][0] == demo.GPU_MODULE
    )


@pytest.mark.slow
def test_workspace_validates(tmp_path: Path) -> None:
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path))
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dagster")), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bashgym_cpu" in done.stdout + done.stderr and "bashgym_gpu" in done.stdout + done.stderr


def test_image_tag_follows_the_recipe(tmp_path: Path) -> None:
    recipe = tmp_path / "base"
    recipe.mkdir()
    (recipe / "packages.txt").write_text("bash\n")
    (recipe / "configure-rootfs.sh").write_text("true\n")
    first = images.recipe_hash(recipe)
    assert images.recipe_hash(recipe) == first
    (recipe / "packages.txt").write_text("bash\njq\n")
    assert images.recipe_hash(recipe) != first
    assert images.recipe_packages(recipe) == ["bash", "jq"]


def test_image_is_reused_and_runs_contained(sandbox_image: str) -> None:
    assert sandbox_image == images.sandbox_image_tag()
    # Re-running the build finds the image by its recipe tag and does nothing.
    assert images.build_sandbox_image() == sandbox_image
    script = (
        "id -un; cat /proc/self/status | grep CapEff; "
        "(exec 3<>/dev/tcp/10.0.0.1/80) 2>/dev/null && echo NET-OPEN || echo no-network; "
        "for t in bash dash git jq sqlite3 python3 tar xz zip unzip gawk crontab rsync tree bc file; do "
        "command -v $t >/dev/null || echo MISSING $t; done"
    )
    done = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--init",
            "--network",
            "none",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            "operator",
            "--label",
            "bashgym.test=foundation",
            sandbox_image,
            "bash",
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "operator"
    assert lines[1].split()[-1] == "0000000000000000", "no capabilities"
    assert "no-network" in lines and "NET-OPEN" not in lines
    assert not [line for line in lines if line.startswith("MISSING")]


def test_profiles_give_each_run_the_config_of_its_own_assets() -> None:
    steps = demo.plan(demo.asset_nodes())
    nodes = demo.asset_nodes()
    for profile, per_asset in demo.PROFILES.items():
        assert set(per_asset) <= set(nodes), f"{profile} configures unknown assets"
        seen = {}
        for step in steps:
            cfg = demo.step_config(step, profile)
            for op, value in (cfg or {"ops": {}})["ops"].items():
                assert op in step.assets
                seen[op] = value["config"]
        assert seen == per_asset
    with pytest.raises(ValueError, match="unknown profile"):
        demo.step_config(steps[0], "nope")


@pytest.mark.slow
def test_run_plan_streams_progress_and_reports_failures(tmp_path: Path) -> None:
    """The demo shows training/evaluation progress while a run goes, and a failing run's tail when it fails."""
    (tmp_path / "tiny_defs.py").write_text(
        "import dagster as dg\n"
        "@dg.asset\n"
        "def good(context):\n"
        "    context.log.info('sft step 1/2: loss 1.0 ETA 1s')\n"
        "    context.log.info('nothing to show here')\n"
        "@dg.asset\n"
        "def bad():\n"
        "    raise RuntimeError('boom')\n"
        "defs = dg.Definitions(assets=[good, bad])\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path), DAGSTER_HOME=str(tmp_path))
    lines: list[str] = []
    # one plan, one child process: the good run's progress is shown as it goes, then the bad run fails the plan
    with pytest.raises(RuntimeError, match="materializing .*bad.* failed"):
        demo.run_plan(
            [
                demo.PlanStep(module="tiny_defs", assets=["good"], partitioned=False),
                demo.PlanStep(module="tiny_defs", assets=["bad"], partitioned=False),
            ],
            [],
            env,
            lines.append,
        )
    assert any("good: sft step 1/2: loss 1.0" in line for line in lines)
    assert not any("nothing to show" in line for line in lines)


@pytest.mark.slow
def test_run_plan_runs_consecutive_steps_in_one_process_and_stops_at_the_failing_one(tmp_path: Path) -> None:
    """The imports are paid once: every in-process step of the plan runs in the same child process, each as its
    own run on the instance; a failing step names itself, and the steps after it do not run."""
    (tmp_path / "tiny_chain.py").write_text(
        "import dagster as dg, os\n"
        "def pid(name):\n"
        "    with open(os.environ['PID_LOG'], 'a') as f: f.write(f'{name} {os.getpid()}\\n')\n"
        "@dg.asset\n"
        "def first(context):\n"
        "    pid('first')\n"
        "@dg.asset(deps=[first])\n"
        "def second(context):\n"
        "    pid('second')\n"
        "    if os.environ.get('FAIL_SECOND'):\n"
        "        raise RuntimeError('second broke')\n"
        "@dg.asset(deps=[second])\n"
        "def third(context):\n"
        "    pid('third')\n"
        "defs = dg.Definitions(assets=[first, second, third])\n"
    )
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    pid_log = tmp_path / "pids.txt"
    env = dict(os.environ, PYTHONPATH=str(tmp_path), DAGSTER_HOME=str(tmp_path), PID_LOG=str(pid_log))
    steps = [
        demo.PlanStep(module="tiny_chain", assets=[a], partitioned=False)
        for a in ("first", "second", "third")
    ]
    lines: list[str] = []
    timings = demo.run_plan(steps, [], env, lines.append)
    assert [t[0].assets for t in timings] == [["first"], ["second"], ["third"]]
    pids = [line.split() for line in pid_log.read_text().splitlines()]
    assert [name for name, _ in pids] == ["first", "second", "third"]
    assert len({pid for _, pid in pids}) == 1 and int(pids[0][1]) != os.getpid()
    assert [line for line in lines if line.startswith("-->")] == [
        "--> [CPU] first",
        "--> [CPU] second",
        "--> [CPU] third",
    ]
    from dagster._core.instance.ref import InstanceRef

    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path)))
    assert len(instance.get_runs()) == 3
    with pytest.raises(RuntimeError, match=r"materializing \[CPU\] second failed") as failure:
        demo.run_plan(steps, [], dict(env, FAIL_SECOND="1"), lines.append)
    assert "second broke" in str(failure.value)
    runs = instance.get_runs()
    assert len(runs) == 5  # first and second ran again, third did not
    assert sum(r.status == dg.DagsterRunStatus.FAILURE for r in runs) == 1

    pid_log.unlink()
    timings = demo.run_plan(steps[:2], [], env, lines.append, process_per_step=True)  # (a process apiece)
    assert len(timings) == 2
    assert len({line.split()[1] for line in pid_log.read_text().splitlines()}) == 2  # a process per step


def test_a_plan_without_some_assets_keeps_the_order_and_refuses_unknown_names() -> None:
    steps = demo.plan(demo.asset_nodes())
    skipped = {"student_rollouts", "dpo_dataset", "dpo_adapter"}
    kept = demo.without(steps, skipped)
    flat = [a for s in steps for a in s.assets if a not in skipped]
    assert [a for s in kept for a in s.assets] == flat
    assert all(s.assets for s in kept)
    assert not any("dpo_dataset" in s.assets for s in kept)
    with pytest.raises(ValueError, match="unknown asset"):
        demo.without(steps, ["no_such_asset"])
    only = demo.only(
        steps, ["benchmark_results", "dpo_adapter", "student_rollouts"]
    )  # `bashgym train --only`
    assert [a for s in only for a in s.assets] == [
        a for s in steps for a in s.assets if a in ("benchmark_results", "dpo_adapter", "student_rollouts")
    ]
    with pytest.raises(ValueError, match="unknown asset"):
        demo.only(steps, ["sft_adapter", "no_such_asset"])


def test_every_profile_config_is_valid_run_config_for_its_run() -> None:
    """A profile that names a field its asset does not have would fail `make demo` mid-way: validate up front."""
    steps = demo.plan(demo.asset_nodes())

    def job_for(step: demo.PlanStep) -> dg.JobDefinition:
        defs: dg.Definitions = importlib.import_module(step.module).defs
        return defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_selection={dg.AssetKey(a) for a in step.assets}
        )

    checked = 0
    for profile in demo.PROFILES:
        for step in steps:
            cfg = demo.step_config(step, profile)
            if cfg:
                dg.validate_run_config(job_for(step), cfg)
                checked += 1
    assert checked >= 4
    evaluation = next(s for s in steps if "benchmark_results" in s.assets)
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(
            job_for(evaluation), {"ops": {"benchmark_results": {"config": {"no_such_field": 1}}}}
        )


@pytest.mark.slow
def test_a_partitioned_step_runs_every_partition_in_one_process(tmp_path: Path) -> None:
    """One process, one run per partition (n/N shown), each run recorded on the instance; a failing partition
    fails the step after the others ran."""
    (tmp_path / "tiny_parts.py").write_text(
        "import dagster as dg\n"
        "import os\n"
        "parts = dg.StaticPartitionsDefinition(['a', 'b', 'c'])\n"
        "@dg.asset(partitions_def=parts)\n"
        "def per_repo(context):\n"
        "    if context.partition_key == os.environ.get('FAIL_PARTITION'):\n"
        "        raise RuntimeError('boom')\n"
        "    return os.getpid()\n"
        "defs = dg.Definitions(assets=[per_repo])\n"
    )
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), DAGSTER_HOME=str(tmp_path))
    lines: list[str] = []
    step = demo.PlanStep(module="tiny_parts", assets=["per_repo"], partitioned=True)
    timings = demo.run_plan([step], ["a", "b", "c"], env, lines.append)
    assert [line.strip() for line in lines if line.strip().startswith("[")] == [
        "[1/3] per_repo for partition a",
        "[2/3] per_repo for partition b",
        "[3/3] per_repo for partition c",
    ]
    assert len(timings) == 1 and timings[0][1] == "a,b,c"
    from dagster._core.instance.ref import InstanceRef

    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path)))
    runs = instance.get_runs()
    assert sorted(r.tags.get("dagster/partition") for r in runs) == ["a", "b", "c"]
    with pytest.raises(RuntimeError, match="3 partitions"):
        demo.run_plan([step], ["a", "b", "c"], dict(env, FAIL_PARTITION="b"), lines.append)
    assert len(instance.get_runs()) == 6  # the failing partition did not stop the others


def test_code_version_of_a_package_changes_with_any_of_its_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An asset names the package it runs (``training.grpo``); an edit to any module in it is a new version."""
    from bashgym_assets.defs.metadata import code_version

    pkg = tmp_path / "pkg_for_code_version"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg_for_code_version.logic import f\n")
    (pkg / "logic.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = code_version("pkg_for_code_version")
    assert code_version("pkg_for_code_version") == before
    (pkg / "logic.py").write_text("def f():\n    return 2\n")
    code_version.cache_clear()  # hashed once per process (a code location loads once)
    assert code_version("pkg_for_code_version") != before
    assert code_version("pkg_for_code_version.logic") != code_version("pkg_for_code_version")
