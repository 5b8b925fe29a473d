"""``bashgym eval`` and ``bashgym promote/demote --model``: the evaluation from a terminal, outside Dagster.

    bashgym eval                                    # the champion (if any) and the base, held-out split
    bashgym eval --adapter .bashgym/artifacts/adapters/sft-... --no-base
    bashgym eval --model-uri models:/bashgym-operator/3 --limit 10
    bashgym eval --litellm openai/my-model --api-base http://127.0.0.1:8000/v1
    bashgym eval --samples 5 --temperature 0.7      # pass@k
    bashgym eval --scenarios path/to/bundles         # any folder of scenario bundles (not only held-out)
    bashgym eval --suite terminal-bench              # the admitted tasks of one external suite
    bashgym eval --adapter <dir> --no-base --split train --sample 35   # fit: tasks it trained on

Episodes go to the lake (``eval_episodes``, partition = the evaluation id) like the asset's, so the notebooks and
``bashgym sql`` read them the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bashgym_assets.config import add_field_options, get_settings

if TYPE_CHECKING:
    from bashgym_assets.evaluation import EvalSettings


def adapter_labels(folders: list[str]) -> list[str]:
    """Each ``--adapter`` named by its folder (``sft-...``, ``dpo-...``: what the tables and ``eval_episodes.model``
    then say, instead of adapter1, adapter2); two folders of one name are told apart by their position."""
    names = [Path(folder).resolve().name or "adapter" for folder in folders]
    return [name if names.count(name) == 1 else f"{name}-{i + 1}" for i, name in enumerate(names)]


def add_parsers(sub: Any) -> None:
    ev = sub.add_parser(
        "eval",
        help="evaluate models behaviourally on held-out scenarios in sandboxes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_options(ev)
    ev.add_argument(
        "--scenarios",
        help="a folder of scenario bundles (default: gated_scenarios' held-out split); "
        "a Terminal-Bench/Harbor suite folder goes through `bashgym suite eval`",
    )
    ev.add_argument(
        "--suite",
        action="append",
        default=[],
        help="only the tasks of this external suite (its name, or a prefix of its ids such as "
        "ext-terminal-bench-; repeatable): from gated_scenarios, including what `bashgym suite "
        "gate` admitted",
    )
    ev.add_argument(
        "--split",
        choices=["held_out", "train"],
        default="held_out",
        help="which split of gated_scenarios (default held_out; train tells fit from generalisation: "
        "does the model finish the tasks it was trained on?)",
    )
    add_selection_options(ev)
    ev.add_argument(
        "--per-family",
        type=int,
        default=3,
        help="held-out split: N tasks of each of the task factory's held-out families (-1: all; 0: "
        "none), beside every other held-out scenario",
    )
    ev.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="NAME",
        help="an evaluation set (repeatable): fit (tasks trained on), transfer (fresh draws of trained families "
        "under the reserved transfer seed), unseen (the held-out families), bundled (the pack's clean held-out "
        "tasks), bundled-twins (those with a train twin; never judges) or suite:NAME (an imported suite). "
        "Default: unseen, bundled and every imported suite",
    )
    ev.add_argument(
        "--fit",
        type=int,
        default=0,
        help="N tasks of the factory's trained families for the fit set (default 30 with --set fit; reported "
        "apart, never judges)",
    )
    ev.add_argument(
        "--transfer",
        type=int,
        default=0,
        help="N fresh tasks of each trained family for the transfer set (default 2 with --set transfer; gated "
        "before they run; reported apart, never judges)",
    )
    add_run_options(ev)
    ev.set_defaults(fn=cmd_eval)


def add_model_options(p: argparse.ArgumentParser) -> None:
    """Which models an evaluation compares (``bashgym eval`` and ``bashgym suite eval``)."""
    p.add_argument("--adapter", action="append", default=[], help="a LoRA adapter folder (repeatable)")
    p.add_argument(
        "--model-uri",
        action="append",
        default=[],
        help="a registered adapter: models:/name/version or models:/name@alias (repeatable)",
    )
    p.add_argument("--litellm", action="append", default=[], help="a litellm model string (repeatable)")
    p.add_argument("--api-base", help="base URL for the litellm models (OpenAI-compatible servers)")
    p.add_argument(
        "--base", help="base model folder or hub id (default: BASHGYM_BASE_MODEL or offline SmolLM2)"
    )
    p.add_argument("--no-base", action="store_true", help="do not evaluate the base model itself")
    p.add_argument("--no-champion", action="store_true", help="do not evaluate the current champion")
    p.add_argument("--reference", action="store_true", help="also run the reference solutions (the ceiling)")


def add_selection_options(p: argparse.ArgumentParser) -> None:
    """Which of the scenarios: the first N, a seeded sample, some categories."""
    p.add_argument("--limit", type=int, help="the first N scenarios (by id)")
    p.add_argument(
        "--sample", type=_positive, help="N scenarios drawn at random (seeded by --seed) instead of the first"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --sample, --per-family and --fit")
    p.add_argument("--category", action="append", default=[], help="only these categories (repeatable)")


def add_run_options(p: argparse.ArgumentParser) -> None:
    """How the episodes run: one option per ``EvalSettings`` field (samples, caps, sandboxes, batching; its type,
    default and help from the field, as the asset's run config has them), decoding, where the summaries go."""
    from bashgym_assets.evaluation import EvalSettings

    add_field_options(p, EvalSettings)
    p.add_argument(
        "--lockstep",
        dest="continuous",
        action="store_false",
        default=argparse.SUPPRESS,  # --continuous' default stands
        help="same as --no-continuous: decode each turn of all live episodes as one batch",
    )
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=16, help="sequences per generate call")
    p.add_argument("--json", help="also write the summaries to this JSON file")


def eval_settings(args: argparse.Namespace) -> EvalSettings:
    """The ``EvalSettings`` of parsed ``add_run_options`` options."""
    from bashgym_assets.evaluation import EvalSettings

    return EvalSettings(**{name: getattr(args, name) for name in EvalSettings.model_fields})


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _bundles(args: argparse.Namespace) -> tuple[list[Any], dict[str, str]]:
    """The scenarios to run and, for the held-out split, which evaluation set each one measures."""
    from bashgym_assets.evaluation import evaluation_bundles, pick_bundles, split_bundles
    from bashgym_assets.lake import Lake
    from bashgym_assets.scenarios import suite as suites
    from bashgym_assets.scenarios.bundle import load_folder
    from bashgym_assets.scenarios.gate import HELD_OUT

    pick = {"limit": args.limit, "categories": args.category, "sample": args.sample, "seed": args.seed}
    wanted = list(getattr(args, "suite", None) or [])
    if args.scenarios:
        if args.split != "held_out":
            raise RuntimeError("--split picks from gated_scenarios; a --scenarios folder has no splits")
        bundles, errors = load_folder(args.scenarios)
        tasks = suites.task_folders(args.scenarios)
        if tasks and not bundles:  # raw task folders are no bundles: they must be imported and gated first
            raise RuntimeError(suites.not_bundles_hint(args.scenarios, tasks))
        for e in errors:
            print(f"skipped {e.source}: {e.reason}")
        if tasks:
            print(
                f"note: {len(tasks)} Terminal-Bench/Harbor task folder(s) in {args.scenarios} are not bundles and "
                f"were left out: `bashgym suite eval PATH` imports, gates and evaluates them"
            )
        if wanted:
            bundles = suites.of_suites(bundles, wanted)
        return pick_bundles(bundles, **pick), {}
    lake = Lake()
    if wanted:
        if args.split != "held_out":
            raise RuntimeError(
                "external suites are evaluation only (always held out): --suite takes no --split"
            )
        rows = suites.gated_rows(lake)
        bundles = suites.of_suites(split_bundles(rows, HELD_OUT), wanted)
        if not bundles:
            known = suites.known_suites(rows)
            raise RuntimeError(
                f"no admitted task of suite {', '.join(wanted)} in gated_scenarios (suites there: "
                f"{', '.join(known) or 'none'}): `bashgym suite eval PATH` imports, gates and "
                "evaluates a suite folder, `bashgym suite gate PATH` gates it for later"
            )
        return pick_bundles(bundles, **pick), {}
    try:
        rows = lake.read("gated_scenarios").to_pylist()
    except FileNotFoundError as exc:
        raise RuntimeError(
            "gated_scenarios is not in the lake yet: run `make demo` (or materialize "
            "gated_scenarios), or pass --scenarios FOLDER"
        ) from exc
    if args.split == "train":
        print(
            "train split: these figures measure fit (tasks the model was trained on), not generalisation; "
            "only held-out figures judge a model"
        )
        return split_bundles(rows, args.split, **pick), {}
    from bashgym_assets.evaluation import TRANSFER, admitted, set_names

    wanted = getattr(args, "sets", None) or []
    suites_known = suites.known_suites(rows)
    try:
        names = set_names(wanted, suites_known) if wanted else None
    except ValueError as exc:
        raise RuntimeError(str(exc)) from exc
    sets = evaluation_bundles(
        rows,
        sets=names,
        limit=args.limit,
        categories=args.category,
        seed=args.seed,
        per_heldout_family=None if args.per_family < 0 else args.per_family,
        fit_sample=args.fit,
        transfer_per_family=getattr(args, "transfer", 0),
    )
    if sets.get(TRANSFER):
        from bashgym_assets import images

        print(f"transfer: gating {len(sets[TRANSFER])} fresh draws of the trained families", flush=True)
        images.ensure_docker_engine()
        sets[TRANSFER] = admitted(sets[TRANSFER], images.sandbox_image_tag(), progress=print)
    for name, bs in sets.items():
        print(f"set {name}: {len(bs)} scenarios", flush=True)
    set_of = {b.id: name for name, bs in sets.items() for b in bs}
    bundles = [b for bs in sets.values() for b in bs]
    if args.sample is not None:
        bundles = pick_bundles(bundles, sample=args.sample, seed=args.seed)
    return bundles, set_of


def model_specs(args: argparse.Namespace, settings: Any) -> list[Any]:
    from bashgym_assets.evaluation import ModelSpec
    from bashgym_assets.evaluation import promotion as promo
    from bashgym_assets.lake import Lake
    from bashgym_assets.training import base_model as bm
    from bashgym_assets.training.registry import REGISTERED_MODEL, download_adapter

    base = args.base or bm.resolve_base_model(settings, prepare=True)
    specs = []
    for folder, label in zip(args.adapter, adapter_labels(args.adapter), strict=True):
        specs.append(ModelSpec(label=label, base=base, adapter=folder, ref=folder))
    lake = Lake(settings)
    uris = list(args.model_uri)
    champion = None if args.no_champion else promo.alias_version(REGISTERED_MODEL, promo.CHAMPION, settings)
    if champion is not None:
        uris.append(f"models:/{REGISTERED_MODEL}/{champion.version}")
    for uri in dict.fromkeys(uris):
        name = uri.removeprefix("models:/").replace("/", "-v").replace("@", "-")
        folder = download_adapter(uri, lake.artifact_dir("downloads", name), settings)
        is_champ = champion is not None and uri.endswith(f"/{champion.version}")
        specs.append(
            ModelSpec(label="champion" if is_champ else name, base=base, adapter=str(folder), ref=uri)
        )
    for model in args.litellm:
        specs.append(ModelSpec(label=model, kind="litellm", litellm_model=model, api_base=args.api_base))
    if not args.no_base:
        specs.append(ModelSpec(label="base", base=base, ref=base))
    if args.reference:
        specs.append(ModelSpec(label="reference", kind="reference"))
    return specs


def cmd_eval(args: argparse.Namespace) -> int:
    from bashgym_assets.scenarios.gate import TRAIN_SPLIT_EVAL_PREFIX

    bundles, set_of = _bundles(args)
    if not bundles:
        where = args.scenarios or f"gated_scenarios' {args.split} split"
        raise RuntimeError(
            f"no scenario to evaluate on in {where}"
            + (f" (categories {', '.join(args.category)})" if args.category else "")
        )
    # the split is in the id (the partition of eval_episodes): train-split rows must not pass for held-out ones
    prefix = TRAIN_SPLIT_EVAL_PREFIX if args.split == "train" else "eval-cli-"
    return evaluate_bundles(args, bundles, set_of, eval_id=f"{prefix}{uuid.uuid4().hex[:8]}")


def evaluate_bundles(
    args: argparse.Namespace, bundles: list[Any], set_of: dict[str, str], eval_id: str
) -> int:
    """The evaluation of ``bashgym eval`` on given scenarios (``bashgym suite eval`` runs it on a gated suite):
    every model of ``args`` in sandboxes, the episodes into ``eval_episodes[eval_id]``, the results table."""
    from bashgym_assets import images, stopping
    from bashgym_assets.evaluation import Sampling, compare
    from bashgym_assets.evaluation.metrics import summarize
    from bashgym_assets.evaluation.report import comparison_markdown
    from bashgym_assets.evaluation.runner import LakeEpisodeWriter
    from bashgym_assets.lake import Lake

    settings = get_settings()
    specs = model_specs(args, settings)
    if not specs:
        raise RuntimeError("nothing to evaluate: give --adapter, --model-uri or --litellm, or keep the base")
    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    print(
        f"{eval_id}: {len(bundles)} scenarios x {args.samples} sample(s); models: "
        + ", ".join(f"{s.label} ({s.describe()})" for s in specs),
        flush=True,
    )
    run = eval_settings(args)
    # each episode into the lake within seconds of its end, so a stopped or killed evaluation loses none of them
    writer = LakeEpisodeWriter(Lake(settings), eval_id)
    try:
        with stopping.on_signals("bashgym eval") as scope:
            scope.on_stop(_say_stopping)
            try:
                results = compare(
                    specs,
                    bundles,
                    image,
                    run,
                    Sampling(
                        temperature=args.temperature,
                        max_new_tokens=args.max_new_tokens,
                        micro_batch=args.micro_batch,
                    ),
                    eval_id=eval_id,
                    progress=lambda line: print(line, flush=True),
                    sink=writer,
                )
            except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (stopping.Stopped)
                _print_partial(exc, writer, specs, len(bundles) * run.samples, eval_id)
                raise
    except stopping.Stopped as exc:
        return exc.exit_code
    summaries = [r.summary for r in results]
    print()
    print(comparison_markdown(summaries, title=f"{eval_id} ({len(bundles)} scenarios)"))
    for name in dict.fromkeys(set_of.values()):  # each evaluation set, in the order it was asked for
        ids = {i for i, s in set_of.items() if s == name}
        if ids and len(ids) < len(bundles):
            print()
            print(
                comparison_markdown(
                    [
                        summarize(r.summary.model, [e for e in r.episodes if e.scenario_id in ids])
                        for r in results
                    ],
                    title=f"{name} ({len(ids)} scenarios)",
                )
            )
    print(
        f'\nepisodes: bashgym sql "select model, scenario_id, failure_class from eval_episodes '
        f"where _partition = '{eval_id}'\""
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([s.model_dump() for s in summaries], fh, indent=2)
    return 0


def _say_stopping() -> None:
    """Said the moment the first signal arrives (from the signal handler: a raw write, never a reentrant print)."""
    with contextlib.suppress(OSError):
        os.write(
            2,
            b"stopping: the finished episodes are written, the running ones dropped, the sandboxes removed\n",
        )


def _print_partial(exc: BaseException, writer: Any, specs: list[Any], per_model: int, eval_id: str) -> None:
    """What a stopped evaluation finished: where its episodes are and the table over them, model by model."""
    from bashgym_assets.evaluation.metrics import summarize
    from bashgym_assets.evaluation.report import comparison_markdown
    from bashgym_assets.stopping import signal_name

    with contextlib.suppress(Exception):  # whatever failed, the episodes that finished are kept
        writer.flush()
    name = signal_name(getattr(exc, "signum", signal.SIGINT))
    episodes = writer.episodes
    print(
        f"\n{eval_id}: stopped by {name} after {len(episodes)} of {per_model * len(specs)} episodes; the "
        f"finished ones are in eval_episodes[{eval_id}] ({writer.written} written), the running ones were dropped",
        flush=True,
    )
    labels = [s.label for s in specs if any(e.model == s.label for e in episodes)]
    if labels:
        summaries = [summarize(label, [e for e in episodes if e.model == label]) for label in labels]
        print(
            comparison_markdown(summaries, title=f"{eval_id} (stopped: finished episodes only)"), flush=True
        )


def cmd_model_override(args: argparse.Namespace) -> int:
    from bashgym_assets.evaluation import tracking
    from bashgym_assets.lake import Lake

    settings = get_settings()
    fn = tracking.manual_promote if args.command == "promote" else tracking.manual_demote
    print(fn(Lake(settings), settings, str(args.model), args.reason))
    return 0
