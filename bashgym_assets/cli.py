"""The ``bashgym`` command: run the demo pipeline, query the lake, bring in external suites, manage hooks and tier
overrides."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from typing import Any

from bashgym_assets.config import get_settings, redact_uri


def _print_table(rows: list[tuple], headers: list[str]) -> None:
    widths = [
        max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def lake_summary() -> list[tuple[str, int, int]]:
    """(asset, partitions, rows) for every table in the lake."""
    from bashgym_assets.lake import get_lake

    lake = get_lake()
    out = []
    for asset in lake.assets():
        parts = lake.partitions(asset)
        rows = sum(lake.read(asset, p).num_rows for p in parts)
        out.append((asset, len(parts), rows))
    return out


def cmd_demo(args: argparse.Namespace) -> int:
    from bashgym_assets import demo
    from bashgym_assets.housekeeping import pipeline_session
    from bashgym_assets.instance import ensure_dagster_home

    settings = get_settings()
    settings.ensure_dirs()
    ensure_dagster_home(settings)
    with pipeline_session(settings, wait=bool(getattr(args, "wait", False))):  # one pipeline per data folder
        if settings.trace_dirs_override is None:
            from bashgym_assets.ingest import SAMPLE_TRACES_DIR

            os.environ["BASHGYM_TRACE_DIRS"] = str(SAMPLE_TRACES_DIR)  # for the runs this command starts
            print(
                f"trace folders: bundled sample data ({SAMPLE_TRACES_DIR}); set BASHGYM_TRACE_DIRS for your own"
            )
        else:
            print(f"trace folders: {os.pathsep.join(map(str, settings.trace_dirs))}")
        started = time.monotonic()
        repos = discover_repo_partitions()
        demo.register_partitions(repos)
        print(f"repository partitions: {', '.join(repos) or '(none)'}")
        steps = demo.plan(demo.asset_nodes())
        skip = [a for a in (getattr(args, "skip", "") or "").split(",") if a]
        skip += [a for a in demo.PROFILE_SKIPS.get(getattr(args, "profile", "demo"), []) if a not in skip]
        if skip:
            steps = demo.without(steps, skip)
        only = [a for a in (getattr(args, "only", "") or "").split(",") if a]
        if only:
            steps = demo.only(steps, only)
        print("plan:")
        for i, step in enumerate(steps, 1):
            print(f"  {i}. {step.describe()}")
        profile = getattr(args, "profile", "demo")
        print(f"profile: {profile} {demo.PROFILES[profile] or '(defaults)'}")
        demo.run_plan(
            steps,
            repos,
            demo.demo_env(),
            profile=profile,
            process_per_step=bool(getattr(args, "process_per_step", False)),
        )
    print(f"\ndone in {time.monotonic() - started:.0f} s. Results:")
    _print_table(lake_summary(), ["asset", "partitions", "rows"])
    for line in pipeline_summary():
        print(line)
    for line in adapter_summary():
        print(line)
    print(evaluation_summary())
    print(champion_summary())
    print_where(settings)
    return 0


FACTORY_ASSETS = ("generated_scenarios", "scenario_candidates", "gated_scenarios")


def cmd_factory(args: argparse.Namespace) -> int:
    """Draw the task factory's families, merge them with the pack and gate everything, as Dagster runs."""
    from bashgym_assets import demo
    from bashgym_assets.housekeeping import pipeline_session
    from bashgym_assets.instance import ensure_dagster_home

    settings = get_settings()
    settings.ensure_dirs()
    ensure_dagster_home(settings)
    with pipeline_session(settings, wait=bool(getattr(args, "wait", False))):  # one pipeline per data folder
        started = time.monotonic()
        profile = demo.PROFILES["factory"]
        profile["generated_scenarios"] = {"per_family": args.per_family, "seed": args.seed}
        # unset: the gate's default, the CPU cores (gate.default_parallelism)
        profile["gated_scenarios"] = {"max_parallel": args.parallel} if args.parallel else {}
        steps = demo.only(demo.plan(demo.asset_nodes((demo.CPU_MODULE,))), FACTORY_ASSETS)
        for i, step in enumerate(steps, 1):
            print(f"  {i}. {step.describe()}")
        demo.run_plan(steps, [], demo.demo_env(), profile="factory")
    print(f"\ndone in {time.monotonic() - started:.0f} s")
    for line in factory_summary():
        print(line)
    return 0


def factory_summary() -> list[str]:
    """What the factory gave and what the gate admitted, by origin and split."""
    from bashgym_assets.lake import get_lake

    lake = get_lake()
    if "gated_scenarios" not in lake.assets():
        return ["gated_scenarios: not materialized"]
    con = lake.connect()
    # the pipeline's own partition: suites gated by `bashgym suite gate` have theirs (suite-<name>)
    rows = con.execute(
        "SELECT CASE WHEN scenario_id LIKE 'gen.%' THEN 'factory' ELSE 'other' END, split, count(*) "
        "FROM gated_scenarios WHERE _partition = '__all__' GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    rejected = (
        con.execute(
            "SELECT reason, count(*) FROM gate_rejections WHERE _partition = '__all__' "
            "GROUP BY 1 ORDER BY 2 DESC"
        ).fetchall()
        if "gate_rejections" in lake.assets()
        else []
    )
    lines = ["admitted by the gate: " + ", ".join(f"{o} {s} {n}" for o, s, n in rows)]
    lines.append("rejected: " + (", ".join(f"{r} {n}" for r, n in rejected) or "none"))
    return lines


def pipeline_summary() -> list[str]:
    """What the data became: trace tiers (every repository) and kept trajectories, one line each."""
    from collections import Counter

    from bashgym_assets.lake import get_lake

    lake = get_lake()
    lines = []
    if "tiered_traces" in lake.assets():
        tiers = Counter(lake.read_all("tiered_traces", columns=["tier"]).column("tier").to_pylist())
        lines.append(
            "trace segments by tier: "
            + ", ".join(f"{t} {tiers.get(t, 0)}" for t in ("gold", "silver", "bronze", "failed"))
        )
    if "verified_trajectories" in lake.assets():
        kept = lake.read("verified_trajectories", columns=["kept"]).column("kept").to_pylist()
        lines.append(f"trajectories: {sum(bool(k) for k in kept)} kept of {len(kept)} attempts")
    return lines


def champion_summary() -> str:
    """Which registered version serves as the operator now (the ``champion`` alias), or why there is none."""
    from bashgym_assets.evaluation.promotion import CHAMPION, alias_version
    from bashgym_assets.training.registry import REGISTERED_MODEL

    try:
        version = alias_version(REGISTERED_MODEL, CHAMPION)
    except Exception as exc:  # noqa: BLE001 - a summary line must never fail the demo
        return f"champion: unknown ({exc.__class__.__name__})"
    if version is None:
        return (
            "champion: none yet: the promotion rule kept the base (see the promotion_decision check); "
            "`bashgym promote --model N` sets it by hand"
        )
    return (
        f"champion: models:/{REGISTERED_MODEL}@{CHAMPION} = version {version.version} "
        f'(run {version.run_id}); load it with mlflow.pyfunc.load_model("models:/{REGISTERED_MODEL}@{CHAMPION}")'
    )


def evaluation_summary() -> str:
    """The latest ``benchmark_results``: the comparison table (held-out split) and the promotion decision."""
    import dagster as dg

    event = dg.DagsterInstance.get().get_latest_materialization_event(dg.AssetKey("benchmark_results"))
    if event is None or event.asset_materialization is None:
        return "benchmark_results: not materialized (see its run log for why)"
    meta = event.asset_materialization.metadata
    table = meta.get("comparison_md")
    link = meta.get("mlflow_evaluation_run")
    return (
        "\nbenchmark_results (base vs adapter on the held-out split):\n\n"
        + (str(table.value) if table else "?")  # a markdown value: its text
        + (f"\n\nMLflow evaluation run: {link.value}" if link else "")
    )


def adapter_summary() -> list[str]:
    """Where each trained adapter is, from its latest materialization's metadata (folder, MLflow model)."""
    import dagster as dg

    instance = dg.DagsterInstance.get()
    lines = []
    for name in ("sft_adapter", "grpo_adapter", "dpo_adapter"):
        event = instance.get_latest_materialization_event(dg.AssetKey(name))
        if event is None or event.asset_materialization is None:
            lines.append(f"{name}: not materialized (see its run log for why)")
            continue
        meta = event.asset_materialization.metadata
        folder = meta.get("adapter_dir")
        uri = meta.get("model_uri")
        lines.append(f"{name}: {folder.value if folder else '?'}  (MLflow: {uri.value if uri else '?'})")
    event = instance.get_latest_materialization_event(dg.AssetKey("exported_model"))
    if event is not None and event.asset_materialization is not None:
        meta = event.asset_materialization.metadata
        path, uri = meta.get("path"), meta.get("model_uri")
        verified = meta.get("verified")
        trip = (
            "GGUF round trip verified"
            if verified and verified.value
            else "GGUF round trip not verified (the gguf_round_trip check: skipped with verify: false, else "
            "what did not match)"
        )
        lines.append(
            f"exported_model: {path.value} ({uri.value}): merged model, GGUF and Ollama Modelfile; {trip}"
            if path and uri
            else "exported_model: nothing exported (see its metadata for why)"
        )
    return lines


def discover_repo_partitions() -> list[str]:
    """The repository partition keys of every session in the configured trace folders."""
    from bashgym_assets.ingest import discover_repos

    return discover_repos(get_settings().trace_dirs)


def print_where(settings=None) -> None:
    settings = settings or get_settings()
    print(f"""
data folder      {settings.home}
parquet lake     {settings.lake_dir}/<asset>/<partition>.parquet
artifacts        {settings.artifacts_dir}
Dagster instance {settings.dagster_home}     -> make ui      (http://127.0.0.1:3000)
MLflow           {redact_uri(settings.mlflow_tracking_uri)}  -> make mlflow  ({settings.mlflow_ui_url})
SQL over the lake: .venv/bin/bashgym sql "select tier, count(*) from tiered_traces group by 1"
notebooks        make notebooks  (notebooks/traces.ipynb, notebooks/training.ipynb, run on this lake)
""")


def cmd_where(args: argparse.Namespace) -> int:
    from bashgym_assets.relocate import relocation_warning

    print_where()
    warning = relocation_warning()
    if warning:
        print(warning, file=sys.stderr)
    return 0


def cmd_move(args: argparse.Namespace) -> int:
    """Move (or copy) the data folder and rewrite every absolute path into it (``bashgym_assets.relocate``)."""
    from pathlib import Path

    from bashgym_assets.relocate import move_home

    move_home(get_settings().home, Path(args.new_path), copy=args.copy, force=args.force, wait=args.wait)
    return 0


def cmd_relocate(args: argparse.Namespace) -> int:
    """Rewrite the paths of a data folder that was copied or moved by hand to where it is now."""
    from bashgym_assets.relocate import relocate_in_place

    relocate_in_place(get_settings(), old=args.old, force=args.force, wait=args.wait)
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from bashgym_assets.lake import get_lake

    lake = get_lake()
    con = lake.connect()
    for (
        asset,
        file,
        reason,
    ) in lake.quarantined:  # served without them; `select * from lake_quarantine` lists them
        print(
            f"warning: {asset}: {file} left out, it does not read as parquet ({reason[:160]})",
            file=sys.stderr,
        )
    result = con.execute(args.query)
    headers = [d[0] for d in result.description] if result.description else []
    rows = result.fetchall() if args.max_rows is None else result.fetchmany(max(0, args.max_rows))
    more = 0
    if args.max_rows is not None and headers:
        while chunk := result.fetchmany(10_000):  # counted, not kept: the rest may be the whole lake
            more += len(chunk)
    _print_table([tuple(_short(c) for c in r) for r in rows], headers)
    if more:  # on stderr: stdout stays the table, for whoever reads it with a script
        print(
            f"{len(rows)} of {len(rows) + more} rows shown: --max-rows N for more, --all for every row",
            file=sys.stderr,
        )
    return 0


def _short(value: object, width: int = 60) -> str:
    text = str(value).replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 3] + "..."


SUITE_DOC = """An external shell-task suite, one command from its folder to the evaluation's table.

A suite folder holds Terminal-Bench 1.x task folders (task.yaml, Dockerfile, run-tests.sh, solution.sh) or
Harbor 2.x ones (task.toml, instruction.md, environment/, tests/, solution/), or one such task folder.

    bashgym suite import PATH          # each task imported (a bundle, ext-<suite>-<task>) or quarantined, and why
    bashgym suite gate PATH            # + the reference gate in fresh sandboxes: which tasks it refused, and why
    bashgym suite eval PATH [options]  # + `bashgym eval` on the admitted tasks (same options, same table)
    bashgym eval --suite NAME          # later: the admitted tasks of a gated suite, without gating it again

The gate's verdicts go to gated_scenarios, gate_rejections and scenario_candidates_quarantine in the partition
suite-<name> (the pipeline's own rows are left alone), the episodes to eval_episodes, so `bashgym sql` and the
notebooks see them. Imported tasks are evaluation only: they are always held out and never reach training.
A suite refused whole (every task quarantined, or refused by the gate) ends with the reasons and exit status 1.
"""


def add_suite_parsers(sub: Any) -> None:
    from bashgym_assets.evaluation.cli import add_model_options, add_run_options, add_selection_options

    suite = sub.add_parser(
        "suite",
        help="an external shell-task suite (Terminal-Bench 1.x / Harbor 2.x folder): "
        "import it, gate it in sandboxes, evaluate models on it",
        description=SUITE_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    steps = suite.add_subparsers(dest="suite_command", required=True)
    imp = steps.add_parser(
        "import",
        help="import the suite: each task folder imported or quarantined (with why); nothing is written",
    )
    _suite_arguments(imp, gate=False)
    imp.set_defaults(fn=cmd_suite_import)
    gate = steps.add_parser(
        "gate",
        help="import and gate the suite in real sandboxes: which tasks the gate refused "
        "and why (gated_scenarios / gate_rejections, partition suite-<name>)",
    )
    _suite_arguments(gate, gate=True)
    gate.set_defaults(fn=cmd_suite_gate)
    ev = steps.add_parser(
        "eval",
        help="import, gate, then evaluate models on the admitted tasks as `bashgym eval` "
        "does (the same options and results table)",
    )
    _suite_arguments(ev, gate=True)
    add_model_options(ev)
    add_selection_options(ev)
    add_run_options(ev)
    ev.set_defaults(fn=cmd_suite_eval)


class _DeprecatedAlias(argparse.Action):
    """An old option name kept for scripts that use it: stores into the new option and says to use that."""

    def __init__(self, *args: Any, new_name: str, **kwargs: Any) -> None:
        self.new_name = new_name
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        print(
            f"warning: {option_string} is deprecated and will be removed: use {self.new_name} (the same "
            "setting; the evaluation's own limits are --command-timeout-s / --check-timeout-s)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def _suite_arguments(p: argparse.ArgumentParser, gate: bool) -> None:
    p.add_argument("path", help="the suite folder (a folder of task folders, or one task folder)")
    p.add_argument(
        "--name", help="the suite's name, in its ids ext-<name>-<task> (default: the folder's name)"
    )
    if not gate:
        return
    p.add_argument(
        "--parallel",
        type=int,
        default=None,
        help="sandboxes at once in the gate (default: the CPU cores this process may use)",
    )
    # The gate's own limits, named apart from the evaluation's --command-timeout-s / --check-timeout-s (which
    # `suite eval` also takes): one name each. The old names stay as hidden aliases that say so.
    p.add_argument(
        "--gate-command-timeout-s",
        type=float,
        default=30.0,
        help="seconds per reference command in the gate (default 30, as the gated_scenarios asset)",
    )
    p.add_argument(
        "--gate-check-timeout-s",
        type=float,
        default=30.0,
        help="seconds per run of a task's check in the gate (default 30)",
    )
    for old_name, new_name in (
        ("--command-timeout", "--gate-command-timeout-s"),
        ("--check-timeout", "--gate-check-timeout-s"),
    ):
        p.add_argument(
            old_name,
            type=float,
            dest=new_name.lstrip("-").replace("-", "_"),
            action=_DeprecatedAlias,
            new_name=new_name,
            help=argparse.SUPPRESS,
        )
    p.add_argument(
        "--wait",
        action="store_true",
        help="if another pipeline holds the data folder, queue behind it (default: refuse, naming it)",
    )


def cmd_suite_import(args: argparse.Namespace) -> int:
    from bashgym_assets.scenarios import suite

    imported = suite.import_folder(args.path, args.name)
    for line in suite.import_lines(imported):
        print(line)
    why = imported.refusal()
    if why is not None:
        raise RuntimeError(why)
    path = shlex.quote(args.path)
    print(
        f"next: `bashgym suite gate {path}` certifies them in sandboxes, `bashgym suite eval {path}` "
        "also evaluates a model on the admitted ones"
    )
    return 0


def _gate_suite(args: argparse.Namespace) -> Any:
    """Import and gate the suite of ``args.path``, write the verdicts to the lake (under the pipeline lock: the
    gate's sandboxes and the tables are the data folder's), print them; a suite refused whole raises."""
    import threading

    from bashgym_assets import images
    from bashgym_assets.housekeeping import pipeline_lock
    from bashgym_assets.lake import Lake
    from bashgym_assets.scenarios import suite
    from bashgym_assets.scenarios.gate import GateLimits, default_parallelism

    settings = get_settings()
    settings.ensure_dirs()
    imported = suite.import_folder(args.path, args.name)
    for line in suite.import_lines(imported):
        print(line)
    why = imported.refusal()
    if why is not None:
        raise RuntimeError(why)
    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    if not images.image_exists(image):
        raise RuntimeError(f"the sandbox image {image} is missing: `bashgym images` builds it")
    n = len(imported.bundles)
    counted = {"done": 0}
    lock = threading.Lock()

    def progress(result: Any) -> None:  # called from the gate's worker threads
        with lock:
            counted["done"] += 1
            verdict = "admitted" if result.admitted else f"refused: {result.reason}"
            print(
                f"  [{counted['done']}/{n}] {result.scenario_id}: {verdict} ({result.duration_s:.0f} s)",
                flush=True,
            )

    with pipeline_lock(settings, wait=bool(args.wait)):  # one writer of the data folder at a time
        parallel = args.parallel or default_parallelism()
        print(f"gating {n} task(s) in fresh sandboxes ({image}, {parallel} at once)", flush=True)
        verdict = suite.gate(
            imported,
            image,
            max_parallel=parallel,
            progress=progress,
            limits=GateLimits(
                command_timeout_s=args.gate_command_timeout_s, check_timeout_s=args.gate_check_timeout_s
            ),
        )
        partition = suite.write_gate(Lake(settings), verdict)
    for line in [*suite.gate_lines(verdict), *suite.lake_lines(partition)]:
        print(line)
    why = verdict.refusal()
    if why is not None:
        raise RuntimeError(why)
    return verdict


def cmd_suite_gate(args: argparse.Namespace) -> int:
    verdict = _gate_suite(args)
    print(
        f"next: `bashgym suite eval {shlex.quote(args.path)}`, or `bashgym eval --suite "
        f"{shlex.quote(verdict.imported.suite)}` (what is gated now, without gating it again)"
    )
    return 0


def cmd_suite_eval(args: argparse.Namespace) -> int:
    import uuid

    from bashgym_assets.evaluation import pick_bundles
    from bashgym_assets.evaluation.cli import evaluate_bundles
    from bashgym_assets.scenarios import suite

    verdict = _gate_suite(args)
    bundles = pick_bundles(
        verdict.bundles(), limit=args.limit, categories=args.category, sample=args.sample, seed=args.seed
    )
    if not bundles:
        raise RuntimeError(
            f"none of the {len(verdict.admitted)} admitted task(s) of suite {verdict.imported.suite!r} "
            f"is in the selection (categories {', '.join(args.category) or 'any'})"
        )
    print()
    eval_id = f"eval-cli-{suite.partition_for(verdict.imported.suite)}-{uuid.uuid4().hex[:8]}"
    return evaluate_bundles(args, bundles, {}, eval_id=eval_id)


def cmd_images(args: argparse.Namespace) -> int:
    from bashgym_assets import images

    return images.main(["--force"] if args.force else [])


def cmd_hooks(args: argparse.Namespace) -> int:
    from bashgym_assets.ingest import hooks_cli

    return hooks_cli.main([args.action, *(["--settings", args.settings] if args.settings else [])])


def cmd_override(args: argparse.Namespace) -> int:
    """A trace segment's tier (``promote SEGMENT_ID``) or a model version's champion status (``--model N``)."""
    if args.model is not None:
        from bashgym_assets.evaluation.cli import cmd_model_override

        return cmd_model_override(args)
    if not args.segment_id:
        raise ValueError(f"{args.command} needs a segment id, or --model VERSION for a registered adapter")
    from bashgym_assets.quality import overrides

    fn = overrides.promote_trace if args.command == "promote" else overrides.demote_trace
    fn(args.segment_id, args.reason)
    print(
        f"{args.command}d {args.segment_id}: {args.reason} (tiered_traces is updated now, and the decision "
        "is re-applied on every re-materialization)"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bashgym", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo_p = sub.add_parser(
        "demo", help="materialize every asset on the configured (default: bundled sample) data"
    )
    demo_p.add_argument(
        "--profile",
        default="demo",
        choices=["demo", "quick", "full"],
        help="run config per asset: demo (the default), quick (a smoke run of every stage) or "
        "full (the recorded before/after table)",
    )
    demo_p.add_argument(
        "--quick",
        dest="profile",
        action="store_const",
        const="quick",
        help="same as --profile quick: every stage on tiny budgets (16 scenarios, 2 SFT steps, "
        "3 evaluation scenarios)",
    )
    demo_p.add_argument(
        "--skip",
        default="",
        help="comma-separated assets to leave out of the plan (e.g. "
        "student_rollouts,dpo_dataset,dpo_adapter)",
    )
    demo_p.add_argument(
        "--process-per-step",
        action="store_true",
        help="run each step in a process of its own (memory freed between steps; every step pays "
        "the imports again)",
    )
    demo_p.add_argument(
        "--wait",
        action="store_true",
        help="if another pipeline holds the data folder, queue behind it (default: refuse, naming it)",
    )
    demo_p.set_defaults(fn=cmd_demo)
    train_p = sub.add_parser(
        "train",
        help="the whole pipeline with a training profile (default: full), ending "
        "in the evaluation and the promotion decision",
    )
    train_p.add_argument(
        "--profile",
        default="full",
        choices=["demo", "quick", "full", "factory-cpu", "factory-cpu-bf16", "study-fit", "study-transfer"],
        help="full: the recorded before/after table; factory-cpu(-bf16): SFT on the task factory, then the "
        "student stages; study-fit / study-transfer: the learning study's recipes (six families to fit, or to "
        "transfer; BENCHMARKS.md), evaluated on fit, transfer, unseen and bundled",
    )
    train_p.add_argument("--skip", default="", help="comma-separated assets to leave out of the plan")
    train_p.add_argument(
        "--only",
        default="",
        help="comma-separated assets: run just these (in plan order), "
        "on what the data folder already holds (e.g. the DPO stage after an SFT run)",
    )
    train_p.add_argument(
        "--process-per-step",
        action="store_true",
        help="run each step in a process of its own (memory freed between steps)",
    )
    train_p.add_argument(
        "--wait",
        action="store_true",
        help="if another pipeline holds the data folder, queue behind it (default: refuse, naming it)",
    )
    train_p.set_defaults(fn=cmd_demo)
    factory_p = sub.add_parser(
        "factory",
        help="draw the task factory's families (generated_scenarios), merge them "
        "with the pack and certify every task with the gate",
    )
    factory_p.add_argument(
        "--per-family",
        type=int,
        default=55,
        help="distinct tasks per family (55 x 96 families: ~5,300 tasks, ~15 min to gate)",
    )
    factory_p.add_argument("--seed", type=int, default=0)
    factory_p.add_argument(
        "--parallel",
        type=int,
        default=None,
        help="sandboxes at once in the gate (default: the CPU cores this process may use)",
    )
    factory_p.add_argument(
        "--wait",
        action="store_true",
        help="if another pipeline holds the data folder, queue behind it (default: refuse, naming it)",
    )
    factory_p.set_defaults(fn=cmd_factory)
    sub.add_parser("where", help="print where the data lives and how to open the UIs").set_defaults(
        fn=cmd_where
    )
    move = sub.add_parser(
        "move",
        help="move the data folder (BASHGYM_HOME) to NEW_PATH, rewriting every absolute "
        "path into it (MLflow, Dagster, adapter configs, lake tables)",
    )
    move.add_argument("new_path")
    move.add_argument("--copy", action="store_true", help="copy instead: the old folder is left as it was")
    move.add_argument(
        "--force", action="store_true", help="even when other processes have files open in the data folder"
    )
    move.add_argument(
        "--wait",
        action="store_true",
        help="if a pipeline holds the data folder, queue behind it (default: refuse, naming it)",
    )
    move.set_defaults(fn=cmd_move)
    relocate = sub.add_parser(
        "relocate",
        help="the data folder was copied or moved by hand: rewrite the paths "
        "that still point at its old place to where it is now",
    )
    relocate.add_argument("--from", dest="old", help="where it was (default: what its stores say)")
    relocate.add_argument(
        "--force", action="store_true", help="even when other processes have files open in the data folder"
    )
    relocate.add_argument(
        "--wait",
        action="store_true",
        help="if a pipeline holds the data folder, queue behind it (default: refuse, naming it)",
    )
    relocate.set_defaults(fn=cmd_relocate)
    sql = sub.add_parser("sql", help="run SQL over the lake (every asset is a DuckDB view)")
    sql.add_argument("query")
    sql.add_argument(
        "--max-rows",
        "--limit",
        dest="max_rows",
        type=int,
        default=50,
        help="rows to print (default 50; stderr says how many there were when it cut)",
    )
    sql.add_argument("--all", dest="max_rows", action="store_const", const=None, help="print every row")
    sql.set_defaults(fn=cmd_sql)
    add_suite_parsers(sub)
    img = sub.add_parser("images", help="build the sandbox image (reused when the recipe is unchanged)")
    img.add_argument("--force", action="store_true")
    img.set_defaults(fn=cmd_images)
    hooks = sub.add_parser("hooks", help="install/uninstall the Claude Code live-capture hook")
    hooks.add_argument("action", choices=["install", "uninstall", "status"])
    hooks.add_argument(
        "--settings", help="path of Claude Code's settings.json (default ~/.claude/settings.json)"
    )
    hooks.set_defaults(fn=cmd_hooks)
    for name in ("promote", "demote"):
        p = sub.add_parser(
            name,
            help=f"{name} a tiered trace segment by id (survives re-materialization), or "
            f"with --model a registered adapter version (the MLflow champion alias)",
        )
        p.add_argument("segment_id", nargs="?")
        p.add_argument("--model", help="a version of the registered model bashgym-operator")
        p.add_argument("--reason", required=True)
        p.set_defaults(fn=cmd_override)
    from bashgym_assets.evaluation.cli import add_parsers as add_eval_parsers

    add_eval_parsers(sub)
    from bashgym_assets.serving.cli import add_parsers as add_serve_parsers

    add_serve_parsers(sub)
    from bashgym_assets.export.cli import add_parsers as add_export_parsers

    add_export_parsers(sub)
    return parser


# Commands that run long and own sandboxes, Dagster runs or MLflow runs: SIGTERM / SIGINT stops them in order
# (``pipeline_stop.stoppable``: children stopped, sandboxes removed, runs ended, one line said; exit 128 + signal).
STOPPABLE_COMMANDS = frozenset({"demo", "train", "factory", "suite", "eval"})


def main(argv: list[str] | None = None) -> int:
    from bashgym_assets.stopping import Stopped

    args = build_parser().parse_args(argv)
    try:
        if args.command in STOPPABLE_COMMANDS:
            from bashgym_assets.pipeline_stop import stoppable

            with stoppable(f"bashgym {args.command}"):
                return args.fn(args)
        return args.fn(args)
    except Stopped as stopped:  # its one line is said
        return stopped.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (RuntimeError, LookupError, ValueError, OSError) as exc:
        from bashgym_assets.faults import explain_os_error

        hint = explain_os_error(str(exc))  # a full disk says so, whatever layer reported it
        if hint:  # one line, not the failing step's traceback (that stays in its run's log)
            what = (str(exc).splitlines() or [""])[0].split(": ", 1)[0].rstrip(":")
            print(f"{hint} [{what}]" if what else hint, file=sys.stderr)
        else:
            print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
