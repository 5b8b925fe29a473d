"""Materialize every asset of both code locations, in dependency order, the way a user would from the UI.

Each step is a run of the code location's own asset job (``__ASSET_JOB``, the job the UI's "Materialize" launches)
on the persistent instance in ``DAGSTER_HOME``, recorded with the origin of the code location workspace.yaml
loads it as (``bashgym_cpu``, ``bashgym_gpu``): so the runs, materializations, checks and lineage show up in the
Dagster UI afterwards, each run on the home timeline and re-executable from its page, and each location runs its
assets on its own Definitions-level executor (the GPU location on the GPU executor). Assets are grouped into as
few runs as possible: consecutive assets of the same location and the same partitioning go in one run, a
repo-partitioned group runs once per repository partition, and a statically partitioned asset (the task factory's
families) runs once over its whole partition range (a single-run backfill).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from bashgym_assets import stopping

CPU_MODULE = "bashgym_assets.definitions"
GPU_MODULE = "bashgym_assets.gpu_definitions"


@dataclass
class AssetNode:
    key: str
    module: str
    partitioned: bool
    deps: set[str] = field(default_factory=set)
    skippable: bool = False  # may succeed without materializing (output_required=False)
    ranged: bool = False  # statically partitioned: one run over every partition key


@dataclass
class PlanStep:
    module: str
    assets: list[str]
    partitioned: bool
    ranged: bool = False

    def describe(self) -> str:
        where = "GPU" if self.module == GPU_MODULE else "CPU"
        per = " (per repo)" if self.partitioned else " (every partition, one run)" if self.ranged else ""
        return f"[{where}] {', '.join(self.assets)}{per}"


def asset_nodes(modules: Iterable[str] = (CPU_MODULE, GPU_MODULE)) -> dict[str, AssetNode]:
    """Every asset of the given code locations with its location, partitioning and upstream keys."""
    import importlib

    nodes: dict[str, AssetNode] = {}
    for module in modules:
        defs: dg.Definitions = importlib.import_module(module).defs
        materializable = defs.resolve_asset_graph().materializable_asset_keys
        for spec in defs.resolve_all_asset_specs():
            if spec.key not in materializable:
                continue  # an external asset: another location (or the outside world) materializes it
            key = spec.key.to_user_string()
            nodes[key] = AssetNode(
                key=key,
                module=module,
                partitioned=isinstance(spec.partitions_def, dg.DynamicPartitionsDefinition),
                ranged=isinstance(spec.partitions_def, dg.StaticPartitionsDefinition),
                deps={d.asset_key.to_user_string() for d in spec.deps},
                skippable=bool(getattr(spec, "skippable", False)),
            )
    return nodes


def plan(nodes: dict[str, AssetNode]) -> list[PlanStep]:
    """A topological order of the assets, grouped into runs (see the module docstring)."""
    remaining = dict(nodes)
    done: set[str] = set()
    steps: list[PlanStep] = []
    while remaining:
        ready = sorted(
            (n for n in remaining.values() if all(d in done or d not in nodes for d in n.deps)),
            key=lambda n: (n.module != CPU_MODULE, n.partitioned is False, not n.ranged, n.key),
        )
        if not ready:
            raise RuntimeError(f"dependency cycle among {sorted(remaining)}")
        # Take the first ready group (same module and partitioning), plus everything that becomes ready
        # inside that group, so chains like raw -> redacted -> tiered run in one run per partition.
        head = ready[0]
        group: list[str] = []
        progress = True
        while progress:
            progress = False
            for n in sorted(remaining.values(), key=lambda n: n.key):
                if (
                    n.key in group
                    or n.module != head.module
                    or n.partitioned != head.partitioned
                    or n.ranged != head.ranged
                ):
                    continue
                # A skippable asset that yields nothing makes Dagster skip its dependents in the same run, so
                # those go to a later run, which then reads whatever the skippable asset last materialized.
                if all(
                    d in done or d not in nodes or (d in group and not nodes[d].skippable) for d in n.deps
                ):
                    group.append(n.key)
                    progress = True
        order = _topological(group, nodes)
        steps.append(
            PlanStep(module=head.module, assets=order, partitioned=head.partitioned, ranged=head.ranged)
        )
        for key in order:
            done.add(key)
            remaining.pop(key)
    return steps


def only(steps: list[PlanStep], keep: Iterable[str]) -> list[PlanStep]:
    """The plan restricted to the named assets, in plan order (``bashgym factory``, ``bashgym train --only``);
    an unknown name is an error."""
    keep = set(keep)
    unknown = sorted(keep - {a for step in steps for a in step.assets})
    if unknown:
        raise ValueError(f"unknown asset(s): {', '.join(unknown)}")
    return without(steps, {a for step in steps for a in step.assets} - keep)


def without(steps: list[PlanStep], skip: Iterable[str]) -> list[PlanStep]:
    """The plan less the named assets (steps left empty are dropped); an unknown name is an error, not a no-op."""
    skip = set(skip)
    known = {a for step in steps for a in step.assets}
    unknown = sorted(skip - known)
    if unknown:
        raise ValueError(
            f"unknown asset(s) to skip: {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    out = []
    for step in steps:
        kept = [a for a in step.assets if a not in skip]
        if kept:
            out.append(
                PlanStep(module=step.module, assets=kept, partitioned=step.partitioned, ranged=step.ranged)
            )
    return out


def _topological(keys: list[str], nodes: dict[str, AssetNode]) -> list[str]:
    out: list[str] = []
    pending = list(keys)
    while pending:
        for key in list(pending):
            if all(d not in pending or d == key for d in nodes[key].deps):
                out.append(key)
                pending.remove(key)
    return out


# Run config per asset for each profile. ``demo``: what ``make demo`` runs in about 8 minutes on a 2-core CPU and
# still shows the tuning move the numbers: 64 pack scenarios (both splits, every category: ``pack_sample``), a
# short, hot SFT (10 optimizer steps over 384-token rows at lr 1e-3: at lr 2e-4, 16 steps left the adapter as
# wordy as the base, operate 0%; at 1e-3, 12 steps typed commands on 6 of 8 held-out scenarios and exited on 5),
# 3 train scenarios x 2 sampled student attempts, one GRPO step (2 groups of 2, 3 turns), one gentle DPO step (lr 5e-5: at SFT's rate DPO
# drove its loss to ~0 and the replies to the token cap), the evaluation on 6 held-out scenarios (4 turns, 40 new
# tokens a reply), and the export without its GGUF read-back (transformers' GGUF loader is slow on a CPU:
# BENCHMARKS.md; ``bashgym export`` and the asset's default config verify the round trip).
# ``full``: what reproduces the recorded before/after table (BENCHMARKS.md): the pack plus 4 gated variants of each
# train scenario, two epochs of SFT at lr 1e-3 over 768-token rows (one epoch at lr 5e-4 left validation loss at
# 1.18 and terminate at 76%; two at 1e-3: 0.49 and 94%), the evaluation on the whole held-out split.
PROFILES: dict[str, dict[str, dict]] = {
    "demo": {
        "generated_scenarios": {"per_family": 2},
        "scenario_candidates": {"pack_sample": 64, "generated_max": 32},
        "sft_adapter": {"max_steps": 10, "learning_rate": 1e-3, "max_length": 384},
        "student_rollouts": {"max_scenarios": 3, "max_turns": 3, "max_new_tokens": 48},
        "dpo_adapter": {"max_steps": 1, "learning_rate": 5e-5, "max_length": 384},
        "grpo_adapter": {
            "max_steps": 1,
            "num_generations": 2,
            "scenarios_per_step": 2,
            "max_turns": 3,
            "max_new_tokens": 48,
            "max_scenarios": 4,
        },
        "benchmark_results": {
            "max_scenarios": 6,
            "max_turns": 4,
            "max_new_tokens": 40,
            "heldout_per_family": 0,
        },
        "exported_model": {"verify": False},
    },
    # ``quick`` (`bashgym demo --quick`): a smoke run of every stage, same code paths, tiny budgets: 16 pack
    # scenarios (both splits, every category), 2 optimizer steps of SFT over 256-token rows, 2 student scenarios,
    # 1 GRPO step, 1 DPO step, the evaluation on 3 held-out scenarios with 2 turns of 16 tokens (decode steps are
    # what a CPU pays most for: benchmarks/bench_kv_decode.py; replies are capped hard), and the export without its
    # GGUF read-back (slow on a CPU; tests/test_export.py covers the round trip). Proves the plumbing, not a model.
    "quick": {
        "generated_scenarios": {"per_family": 1},
        "scenario_candidates": {"pack_sample": 16, "generated_max": 8},
        "sft_adapter": {"max_steps": 2, "max_length": 256},
        "student_rollouts": {"max_scenarios": 2, "max_turns": 2, "max_new_tokens": 16},
        "dpo_adapter": {"max_steps": 1, "max_length": 256, "learning_rate": 5e-5},
        "grpo_adapter": {
            "max_steps": 1,
            "num_generations": 2,
            "scenarios_per_step": 1,
            "max_turns": 2,
            "max_new_tokens": 16,
            "max_scenarios": 2,
        },
        "benchmark_results": {
            "max_scenarios": 3,
            "max_turns": 2,
            "max_new_tokens": 16,
            "heldout_per_family": 0,
        },
        "exported_model": {"verify": False},
    },
    # ``factory`` (`bashgym factory`): the task factory at scale, drawn, merged with the pack and gated (the plan is
    # cut to those three assets; ``--per-family`` overrides the draw size).
    "factory": {
        "generated_scenarios": {"per_family": 55},
        "gated_scenarios": {},  # sandboxes at once: the cores (the gate's default; more starves each of them)
    },
    # ``factory-cpu`` (`bashgym train --profile factory-cpu`, issue 29): SFT on the task factory's train families
    # on 2 CPU cores in under two hours. 16 draws per family (~1,500 tasks, 82 trained families, a tenth of them
    # kept for validation) plus the pack; short renders; two epochs, easy tasks first; evaluated three ways. The
    # student stages continue from that SFT adapter (`--only student_rollouts,dpo_dataset,dpo_adapter,
    # benchmark_results`, then `--only grpo_adapter,benchmark_results`), each evaluated the same three ways.
    "factory-cpu": {
        "generated_scenarios": {"per_family": 16},
        "gated_scenarios": {},  # sandboxes at once: the cores (the gate's default; more starves each of them)
        "verified_trajectories": {"max_parallel": 6},
        "sft_dataset": {"observation_chars": 400},
        "sft_adapter": {
            "epochs": 2.0,
            "learning_rate": 1e-3,
            "max_length": 1024,
            "warmup_steps": 5,
            "curriculum": True,
            "save_every": 50,
        },
        "student_rollouts": {
            "student": "sft",
            "max_scenarios": 64,
            "samples": 2,
            "temperature": 0.7,
            "max_turns": 6,
            "max_new_tokens": 96,
        },
        "dpo_adapter": {"epochs": 1.0, "learning_rate": 2e-5, "max_length": 1024},
        "grpo_adapter": {
            "max_steps": 8,
            "num_generations": 4,
            "scenarios_per_step": 2,
            "max_turns": 5,
            "max_new_tokens": 64,
            "learning_rate": 2e-5,
            "difficulty_ladder": True,
            "ladder_window": 8,
        },
        "benchmark_results": {"heldout_per_family": 3, "fit_sample": 35, "transfer_per_family": 1},
    },
    "full": {
        "scenario_candidates": {"variants_per_scenario": 4},
        "sft_adapter": {"epochs": 2.0, "learning_rate": 1e-3, "max_length": 768},
    },
}


# ``factory-cpu-bf16``: the same plan with SFT in bfloat16 (CPUs with AVX-512 BF16 or AMX train it faster: the
# lean-loss section of BENCHMARKS.md); what it does to the adapter's quality is measured there too.
PROFILES["factory-cpu-bf16"] = {
    **PROFILES["factory-cpu"],
    "sft_adapter": {**PROFILES["factory-cpu"]["sft_adapter"], "dtype": "bfloat16"},
}


# The learning study's recipes (issue 38, BENCHMARKS.md "Learning study") as pipeline profiles: the six train
# families of its arms, drawn, gated and played as every factory task is, SFT rows from those families alone (no pack
# train tasks, no session traces: what the arms trained on), trained at a constant lr 1e-3 over 1,024-token rows,
# easy tasks first, in bfloat16 where the machine computes it fast; then evaluated greedily on the four sets (fit
# and transfer of the six families as the study measured them, unseen and bundled) with the promotion decision.
# The student stages (DPO, GRPO) are not part of the recipe: ``PROFILE_SKIPS`` leaves them (and the export) out.
# ``study-fit``: fit6, 14 tasks a family, 16 epochs (fit 88% on the study's fit set, 128 optimizer steps).
# ``study-transfer``: wide6, 42 tasks a family, 12 epochs (transfer 50%, fit 83%, 252 steps): more tasks per family
# is what moved transfer (at equal epochs and at equal compute, BENCHMARKS.md).
STUDY_FAMILIES = [
    "files-delete-by-pattern",
    "text-dedupe-lines",
    "logs-top-ips",
    "archives-extract-member",
    "data-jq-filter",
    "permissions-private-secrets",
]


def study_profile(
    tasks_per_family: int, epochs: int, families: Sequence[str] = tuple(STUDY_FAMILIES)
) -> dict[str, dict]:
    """A learning-study arm as a pipeline profile (the comment above)."""
    return {
        "generated_scenarios": {"per_family": tasks_per_family},
        "scenario_candidates": {
            "train_families": list(families),
            "pack_train": False,
            "variants_per_scenario": 0,
        },
        "gated_scenarios": {},
        "sft_dataset": {"observation_chars": 400, "include_traces": False},
        "sft_adapter": {
            "epochs": float(epochs),
            "learning_rate": 1e-3,
            "lr_schedule": "constant",
            "warmup_steps": 2,
            "max_length": 1024,
            "curriculum": True,
            "dtype": "auto",
        },
        "benchmark_results": {
            "sets": ["fit", "transfer", "unseen", "bundled"],
            "fit_sample": 4 * len(families),
            "transfer_per_family": 4,
            "heldout_per_family": 3,
            "max_turns": 10,
            "max_new_tokens": 128,
        },
    }


PROFILES["study-fit"] = study_profile(tasks_per_family=14, epochs=16)
PROFILES["study-transfer"] = study_profile(tasks_per_family=42, epochs=12)
# the student stages are not the recipe; the export (minutes of GGUF work on a CPU) is `bashgym export` afterwards
STUDY_STAGES_LEFT_OUT = ["student_rollouts", "dpo_dataset", "dpo_adapter", "grpo_adapter", "exported_model"]
# assets a profile's plan leaves out (``bashgym train --profile P`` adds them to --skip)
PROFILE_SKIPS: dict[str, list[str]] = {
    "study-fit": STUDY_STAGES_LEFT_OUT,
    "study-transfer": STUDY_STAGES_LEFT_OUT,
}


def step_config(step: PlanStep, profile: str) -> dict | None:
    """``--config-json`` for one run: the profile's config of the assets in it (None when it has none)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: choose from {', '.join(PROFILES)}")
    ops = {
        key.replace("/", "__"): {"config": PROFILES[profile][key]}
        for key in step.assets
        if key in PROFILES[profile]
    }
    return {"ops": ops} if ops else None


def run_plan(
    steps: list[PlanStep],
    partitions: list[str],
    env: dict[str, str],
    echo: Callable[[str], None] = print,
    profile: str = "demo",
    process_per_step: bool = False,
) -> list[tuple[PlanStep, str | None, float]]:
    """Run the plan's steps in order, each as one run (or one run per repository partition) of its code
    location's asset job on the persistent instance, so every run shows in the Dagster UI and can be re-executed
    there. Raises on the first failure with the failing run's log tail.

    Every step runs in ONE child process (``plan_main``): the imports (torch, transformers, TRL, PEFT, MLflow:
    seconds each) and the process start are paid once for the whole demo instead of once per step. A step
    runs on its location's executor: the CPU location's in process (chosen in the run config, so a re-execution
    from the UI does the same), the GPU location's wherever ``BASHGYM_GPU_EXECUTOR`` puts its steps (in this
    process by default, a container each with ``docker``). ``process_per_step`` gives every step a child of its
    own (memory freed between steps; the baseline of ``benchmarks/bench_demo.py``).
    """
    import json

    timings: list[tuple[PlanStep, str | None, float]] = []
    batch: list[PlanStep] = []

    def flush() -> None:
        if not batch:
            return
        payload = {
            "steps": [
                {
                    "module": s.module,
                    "assets": s.assets,
                    "partitioned": s.partitioned,
                    "ranged": s.ranged,
                    "label": _label(s, partitions),
                    "config": step_config(s, profile) or {},
                }
                for s in batch
            ],
            "partitions": partitions,
        }
        # the child dies with this process (issue 31): asked before its imports, so a parent killed meanwhile counts
        cmd = [
            sys.executable,
            "-c",
            "from bashgym_assets.process_lifetime import die_with_parent; "
            f"die_with_parent(expected_parent={os.getpid()}); "
            "from bashgym_assets.demo import plan_main; plan_main()",
            json.dumps(payload),
        ]
        done: list[float] = []
        errors: list[str] = []
        returncode, tail = _run_streaming(cmd, env, echo, done, errors)
        for step, elapsed in zip(batch, done, strict=False):
            timings.append((step, ",".join(partitions) if step.partitioned else None, elapsed))
        if returncode != 0:
            failed = batch[len(done)] if len(done) < len(batch) else batch[-1]
            # the first line says why (the failed step's own error, ``_ERROR_LINE``), the child's log tail follows
            why = f" {errors[0]}" if errors else ""
            raise RuntimeError(
                f"materializing {_label(failed, partitions)} failed (exit {returncode}):{why}\n"
                + "\n".join(tail)
            )
        batch.clear()

    for step in steps:
        if step.partitioned and not partitions:
            flush()
            echo(f"skip {step.describe()}: no repository partitions found")
            continue
        batch.append(step)
        if process_per_step:
            flush()
    flush()
    return timings


def workspace_locations(workspace: Path | None = None) -> dict[str, Any]:
    """Module name -> the code location origin the UI loads that module as (``workspace.yaml``: ``bashgym_cpu``,
    ``bashgym_gpu``). Read from the file, no code server started."""
    from bashgym_assets.config import PROJECT_ROOT
    from bashgym_assets.defs.dagster_internals import location_origins_from_yaml_paths

    path = workspace or PROJECT_ROOT / "workspace.yaml"
    if not path.is_file():
        return {}
    origins = location_origins_from_yaml_paths([str(path)])
    return {
        o.loadable_target_origin.module_name: o
        for o in origins
        if getattr(o, "loadable_target_origin", None) is not None and o.loadable_target_origin.module_name
    }


class AssetJobRunner:
    """Runs assets of one code location as runs of the location's asset job (``__ASSET_JOB``), in this process.

    Why not ``execute_in_process``: its runs belong to a job built on the fly that no code location defines and
    carry no origin, so the UI left them off its timeline ("No runs or scheduled ticks"), could not find their
    job and would not re-execute them. These runs are what the UI's own "Materialize" creates: the location's
    asset job, ``job_code_origin`` (how a run worker reloads the code) and ``remote_job_origin`` (the code location
    and repository the UI matches a run against: the location name of workspace.yaml), run on the location's
    executor with the filesystem IO manager (artifacts persisted: re-execution from failure works)."""

    def __init__(
        self, module: str, instance: dg.DagsterInstance, locations: dict[str, Any] | None = None
    ) -> None:
        import importlib

        from bashgym_assets.defs.dagster_internals import (
            ReconstructableRepository,
            RemoteRepositoryOrigin,
            location_origin_from_module_name,
        )

        self.module = module
        self.instance = instance
        with stopping.sigterm_kept():  # loading definitions runs Dagster's interrupt guard too
            defs: dg.Definitions = importlib.import_module(module).defs
            self.repo_def = defs.get_repository_def()
        # the attribute the UI's code server finds the Definitions under
        attribute = next(
            name for name, value in vars(importlib.import_module(module)).items() if value is defs
        )
        self.recon_repo = ReconstructableRepository.for_module(module, attribute, os.getcwd())
        locations = workspace_locations() if locations is None else locations
        # a module no workspace names (a test's): the location `dagster dev -m MODULE` would load it as
        location = locations.get(module) or location_origin_from_module_name(
            module, None, os.getcwd(), module
        )
        self.repository_origin = RemoteRepositoryOrigin(location, self.repo_def.name)

    def partitions_def(self, assets: list[str]) -> dg.PartitionsDefinition | None:
        return self.repo_def.asset_graph.get(dg.AssetKey.from_user_string(assets[0])).partitions_def

    # Dagster leaves SIGTERM ignored after its run in a process whose SIGINT is ignored (``bashgym demo &``)
    @stopping.sigterm_kept()
    def run(
        self,
        assets: list[str],
        run_config: dict[str, Any] | None = None,
        tags: dict[str, str] | None = None,
        partition_key: str | None = None,
        partition_range: tuple[str, str] | None = None,
    ) -> dg.DagsterRun:
        """One run of ``assets`` (and their checks), for one partition key, a whole key range (the assets'
        single-run backfill) or unpartitioned; returns the finished run (its status says how it went)."""
        from bashgym_assets.defs.dagster_internals import (
            ASSET_PARTITION_RANGE_END_TAG,
            ASSET_PARTITION_RANGE_START_TAG,
            RemoteJobOrigin,
            execute_run,
            partition_loading_context,
        )

        keys = [dg.AssetKey.from_user_string(a) for a in assets]
        job_def = self.repo_def.get_implicit_job_def_for_assets(keys)
        if job_def is None:
            raise ValueError(f"{', '.join(assets)}: no asset job of {self.module} holds them all")
        run_config = dict(run_config or {})
        if (
            job_def.executor_def.name == dg.multi_or_in_process_executor.name
            and "execution" not in run_config
        ):
            # the location's default executor, its in-process choice: a process per step would pay the imports again
            run_config["execution"] = {"config": {"in_process": {}}}
        tags = dict(tags or {})
        if partition_key is not None:
            with partition_loading_context(dynamic_partitions_store=self.instance) as context:
                job_def.validate_partition_key(partition_key, selected_asset_keys=set(keys), context=context)
            tags.update(job_def.get_tags_for_partition_key(partition_key, selected_asset_keys=keys))
        elif partition_range is not None:
            tags.update(
                {
                    ASSET_PARTITION_RANGE_START_TAG: partition_range[0],
                    ASSET_PARTITION_RANGE_END_TAG: partition_range[1],
                }
            )
        recon_job = self.recon_repo.get_reconstructable_job(job_def.name)
        # the whole job, subset by the selection here: the run's snapshot then names the job's own snapshot as its
        # parent, the one the UI compares with the loaded job's before it offers "Re-execute" without a warning
        run = self.instance.create_run_for_job(
            job_def=recon_job.get_definition(),
            run_config=run_config,
            tags=tags,
            asset_selection=frozenset(keys),
            remote_job_origin=RemoteJobOrigin(self.repository_origin, job_def.name),
            job_code_origin=recon_job.get_python_origin(),
        )
        return execute_run(recon_job, run, self.instance).dagster_run


def _label(step: PlanStep, partitions: list[str]) -> str:
    if step.partitioned:
        return f"{step.describe()} [{len(partitions)} partitions: {', '.join(partitions)}]"
    return step.describe()


# The Dagster log lines worth showing in the terminal while a run goes: training steps (n/N, loss, ETA),
# evaluation turns and results, gate progress; the rest stays in the run log (Dagster UI).
_PROGRESS_RE = re.compile(r" - (?:INFO|WARNING) - .*? - [0-9a-f-]{36} - (?:\d+ - )?([a-z_]+) - (.*)$")
_COUNTER_RE = re.compile(r"^\[\d+/\d+\] ")
_SHOWN = (
    "sft step",
    "dpo step",
    "grpo step",
    "] turn",
    " live episodes",
    " episodes in ",
    "gated ",
    "rolled out ",
    "skipped",
    "PROMOTED",
    "not promoted",
    "attempts",
    "live metrics in MLflow",
    "external suite",
)  # scenario_candidates / gated_scenarios: a suite refused whole (a warning)


_STEP_START = "--> "
_POOL_LINE = "    [pool] "  # what a GPU step waits for, always shown
_ERROR_LINE = "    [error] "  # why a run failed, in one line: the first line of what the user reads
_STEP_DONE_RE = re.compile(r"^    ok in ([0-9.]+) s$")


def _run_streaming(
    cmd: list[str],
    env: dict[str, str],
    echo: Callable[[str], None],
    done: list[float] | None = None,
    errors: list[str] | None = None,
) -> tuple[int, list[str]]:
    """Run a child (``plan_main``) and echo its step markers and progress lines as they come; keep the tail for
    errors. ``done`` collects the duration of each step ``plan_main`` finished, ``errors`` the one-line reasons
    of its failed runs (``failure_lines``)."""
    from collections import deque

    tail: deque[str] = deque(maxlen=40)
    errors = [] if errors is None else errors
    # a SIGTERM / Ctrl-C of the command (``stopping.on_signals``) is forwarded to the child, which stops its step
    # the way it stops any interrupt; this loop then sees it end
    with (
        stopping.delegating() as adopt,
        subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
        ) as proc,
    ):
        adopt(proc)
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith(_STEP_START):
                tail.clear()  # a failure's tail is the failing step's own log
                echo(line)
                continue
            if line.startswith(_ERROR_LINE):
                errors.append(line.removeprefix(_ERROR_LINE))
                continue
            finished = _STEP_DONE_RE.match(line)
            if finished:
                if done is not None:
                    done.append(float(finished.group(1)))
                echo(line)
                continue
            tail.append(line)
            if line.startswith(_POOL_LINE):
                echo(line)
                continue
            if _COUNTER_RE.match(line):
                echo(f"    {line}")
                continue
            match = _PROGRESS_RE.search(line)
            if match and any(key in match.group(2) for key in _SHOWN):
                echo(f"    {match.group(1)}: {match.group(2)[:200]}")
    return proc.returncode, list(tail)


def register_partitions(keys: list[str], partitions_name: str = "repos") -> None:
    """Add repository keys to the instance's dynamic partitions (what the sensor does on a tick)."""
    instance = dg.DagsterInstance.get()
    existing = set(instance.get_dynamic_partitions(partitions_name))
    new = [k for k in keys if k not in existing]
    if new:
        instance.add_dynamic_partitions(partitions_name, new)


def demo_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def failure_lines(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """One line per failed step of a run: the step and the error that failed it, under Dagster's wrapper (a
    step's failure is a ``DagsterExecutionStepExecutionError`` whose cause is the asset's own error)."""
    lines = []
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = record.dagster_event
        error = event.step_failure_data.error if event and event.step_failure_data else None
        # (an error may come without its class name: it is then the asset's own, not a wrapper)
        while error is not None and error.cause is not None and (error.cls_name or "").startswith("Dagster"):
            error = error.cause
        if error is not None and event is not None:
            lines_of_error = error.message.strip().splitlines()
            first = lines_of_error[0] if lines_of_error else error.cls_name or "an error without a message"
            lines.append(f"{event.step_key}: {first}"[:1000])
    return lines


def plan_main() -> None:
    """``python -c ... plan_main() PAYLOAD``: run the steps of ``PAYLOAD`` (JSON: steps with module, assets,
    partitioned, label, config; the repository partitions) one after the other in this process, each as a run of
    its code location's asset job on the persistent instance (``AssetJobRunner``); stops at the first step that
    fails (exit 1).

    A partitioned step is one run per partition key (n/N shown), and a failing partition does not stop the
    others of its step."""
    import json

    from bashgym_assets.defs.run_health import process_tags, wait_for_pool

    payload = json.loads(sys.argv[1])
    instance = dg.DagsterInstance.get()
    locations = workspace_locations()
    runners: dict[str, AssetJobRunner] = {}
    for step in payload["steps"]:
        print(f"{_STEP_START}{step['label']}", flush=True)
        if step["module"] == GPU_MODULE:  # say what we wait for, and never wait on a run that is dead
            wait_for_pool(instance, echo=lambda line: print(f"{_POOL_LINE}{line}", flush=True))
        started = time.monotonic()
        if step["module"] not in runners:
            runners[step["module"]] = AssetJobRunner(step["module"], instance, locations)
        runner = runners[step["module"]]
        assets = step["assets"]
        keys = payload["partitions"] if step["partitioned"] else [None]
        span = None
        if step.get(
            "ranged"
        ):  # one run over every key: the asset's single-run backfill policy takes the range
            ranged = runner.partitions_def(assets)
            if ranged is None:
                raise RuntimeError(f"{assets[0]} is run as a range of partitions, but it has none")
            every = ranged.get_partition_keys()
            span = (every[0], every[-1])
        failed = []
        for n, key in enumerate(keys, 1):
            if key is not None:
                print(f"[{n}/{len(keys)}] {', '.join(assets)} for partition {key}", flush=True)
            # process_tags: the dead-run reaper can tell if this process dies
            run = runner.run(assets, step["config"], process_tags(), partition_key=key, partition_range=span)
            if run.status != dg.DagsterRunStatus.SUCCESS:
                failed.append(key or step["label"])
                for line in failure_lines(instance, run.run_id):
                    print(f"{_ERROR_LINE}{line}", flush=True)
        if failed:
            print(f"failed {'partitions' if step['partitioned'] else 'run'}: {', '.join(failed)}", flush=True)
            _leave(1)
        print(f"    ok in {time.monotonic() - started:.1f} s", flush=True)
    _leave(0)


def _leave(code: int) -> None:
    """Leave without the interpreter's teardown: with torch, transformers and the Dagster instance loaded, module
    cleanup and native destructors take seconds after the last step has finished, and a failed (or interrupted)
    step's worker threads would be waited for. The exit hooks that matter (sandbox removal, MLflow trace flush)
    are ``atexit`` functions: run them first."""
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
