"""The learning study (issue 38): one arm, a recipe trained on a few factory families, its checkpoints evaluated on
the tasks it trained on (fit) and on fresh tasks of the same families (transfer).

    .venv/bin/python benchmarks/learning_study.py --arm fit6 \\
        --families files-delete-by-pattern,text-dedupe-lines,logs-top-ips,archives-extract-member,data-jq-filter,users-change-shell \\
        --tasks-per-family 14 --epochs 8 --eval-epochs 2,5
    .venv/bin/python benchmarks/learning_study.py --arm fit6 --families ... --probe 3   # time 3 steps, then stop
    .venv/bin/python benchmarks/learning_study.py --arm fit6 --extend-to 16   # train fit6 on from its last epoch
    .venv/bin/python benchmarks/learning_study.py --arm fit6 --clean-sets     # its last epoch and the base on
                                                                              # unseen and bundled
    .venv/bin/python benchmarks/learning_study.py --arm fit6 --dpo-from-epoch 8       # DPO on top of epoch 8
    .venv/bin/python benchmarks/learning_study.py --arm fit6 --recovery-from-epoch 8  # recovery rows on top, and
                                                                                      # the control without them
    .venv/bin/python benchmarks/learning_study.py --arm fit6 --grpo-from-epoch 8      # GRPO on top of epoch 8
        # (--grpo-on-run dpo-e8: of a run; --grpo-attempts 2: only the tasks its 2 attempts a task both
        # finished and failed)

The work is ``bashgym_assets.evaluation.learning_study`` (draw, gate, reference rollouts, ``sft_dataset``'s rows,
``train_sft`` in segments ending at each ``--epochs`` value, ``compare`` on fit and transfer); this script parses
the recipe and writes ``benchmarks/results/learning_study/<arm>.json`` and ``<arm>.md`` after every checkpoint, so
a stopped run keeps what it measured. Adapters, checkpoints and the prepared data live in the data folder
(``artifacts/learning_study/<arm>``; the data is reused by a rerun of the same arm data). The episodes go to
``eval_episodes`` under ``eval-cli-train-study-<arm>-e<epoch>-*`` (fit figures: never judged as held-out ones).
Needs the Docker engine and the sandbox image. How it trains is the trainer's own ``TrainHyperparams`` (``--learning-rate``, ``--lr-schedule``, ``--lora-r``,
``--grad-accum``, ``--max-length``, ``--epochs``...: one option per field, the study's defaults); ``--dtype``
defaults to bfloat16 on a CPU with AVX-512 BF16, float32 elsewhere.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bashgym_assets.config import add_field_options  # noqa: E402
from bashgym_assets.evaluation.learning_study import (  # noqa: E402
    DATA_FIELDS,
    Arm,
    DpoSettings,
    GrpoSettings,
    RecoverySettings,
    StudyResult,
    StudyTraining,
    study_markdown,
)

sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import has_bf16_matmul, machine  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "learning_study"
# the arm's own options (its data and its evaluation); how it trains is one option per StudyTraining field
ARM_OPTIONS = (*DATA_FIELDS, "max_turns", "max_new_tokens")


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    d = Arm.model_fields
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", required=True, help="the arm's name (its result files)")
    ap.add_argument(
        "--families", type=_csv, help="train families, comma-separated (required unless --extend-to)"
    )
    ap.add_argument(
        "--extend-to",
        type=int,
        help="train the arm of <out>/<arm>.json on to this epoch, resuming its last checkpoint (its recipe and "
        "data; the other recipe options are ignored), evaluating --eval-epochs on the way and this one",
    )
    for name in ARM_OPTIONS:
        field = d[name]
        ap.add_argument(
            "--" + name.replace("_", "-"),
            type=int,
            default=field.default,
            help=f"{field.description}{'; 0: outputs whole' if name == 'observation_chars' else ''} "
            "(default: %(default)s)",
        )
    ap.add_argument(
        "--eval-epochs",
        type=lambda t: [int(x) for x in _csv(t)],
        default=[],
        help="epochs whose checkpoint is evaluated besides the last (--epochs), e.g. 2,5",
    )
    train = ap.add_argument_group("how it trains (training.trainer.TrainHyperparams, the study's defaults)")
    add_field_options(train, StudyTraining, {"learning_rate": ["--lr"]})  # type: ignore[arg-type]
    ap.set_defaults(dtype="bfloat16" if has_bf16_matmul() else "float32")
    ap.add_argument("--base", help="base model folder (default: BASHGYM_BASE_MODEL or the offline SmolLM2)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where <arm>.json and <arm>.md go")
    ap.add_argument(
        "--work", type=Path, help="adapters and checkpoints (default: the data folder's artifacts)"
    )
    ap.add_argument("--probe", type=int, default=0, help="train only N steps, print the cost, write nothing")
    ap.add_argument(
        "--clean-sets",
        type=int,
        nargs="?",
        const=-1,
        metavar="EPOCH",
        help="train nothing: evaluate the arm's checkpoint of EPOCH (default: its last) and the base on the sets "
        "that judge a model (unseen, bundled), with the promotion rule's verdict; added to <arm>.json/.md",
    )
    ap.add_argument(
        "--clean-per-family", type=int, default=3, help="--clean-sets: tasks of each held-out family (unseen)"
    )
    ap.add_argument("--no-lake", action="store_true", help="do not write the episodes to eval_episodes")
    ap.add_argument(
        "--paired",
        action="append",
        metavar="A,B",
        help="train nothing: models A and B of the arm (e8, dpo-e8, recovery-e8, control-e8, grpo-e8...) task by task on fit "
        "and transfer, from their episodes: the tasks only one finished, and the sign test (repeatable)",
    )
    dpo = ap.add_argument_group(
        "DPO on top (--dpo-from-epoch EPOCH: train nothing else; the checkpoint's own attempts at its trained "
        "tasks paired with their references, DPO from it, fit and transfer again; added to <arm>.json/.md)"
    )
    add_field_options(dpo, DpoSettings, prefix="dpo")  # type: ignore[arg-type]
    recovery = ap.add_argument_group(
        "Recovery rows on top (--recovery-from-epoch EPOCH: train nothing else; the checkpoint's failed attempts at "
        "its trained tasks replayed as mistake-then-fix rows that pass their check, SFT on from the checkpoint with "
        "them and, as control, without; fit and transfer of both; added to <arm>.json/.md)"
    )
    add_field_options(recovery, RecoverySettings, prefix="recovery")  # type: ignore[arg-type]
    grpo = ap.add_argument_group(
        "GRPO on top (--grpo-from-epoch EPOCH: train nothing else; groups of sampled episodes at the checkpoint's "
        "trained tasks in real sandboxes, rewarded by their checks, GRPO from it, fit and transfer again; added to "
        "<arm>.json/.md)"
    )
    add_field_options(grpo, GrpoSettings, prefix="grpo")  # type: ignore[arg-type]
    return ap.parse_args(argv)


def _settings(args: argparse.Namespace, model: type[Any], prefix: str) -> Any:
    """A stage's settings from its ``--<prefix>-*`` options; a value the settings refuse ends the command with the
    option's name and the reason, not a traceback."""
    from pydantic import ValidationError

    try:
        return model(**{name: getattr(args, f"{prefix}_{name}") for name in model.model_fields})
    except ValidationError as exc:
        sys.exit(
            "; ".join(
                f"--{prefix}-{str(e['loc'][0]).replace('_', '-')}: {e['msg']}" if e["loc"] else e["msg"]
                for e in exc.errors()
            )
        )


def arm_of(args: argparse.Namespace) -> Arm:
    options = {name: getattr(args, name) for name in ARM_OPTIONS}
    options["observation_chars"] = options["observation_chars"] or None
    return Arm(
        name=args.arm,
        families=args.families,
        eval_epochs=args.eval_epochs,
        train=StudyTraining(**{name: getattr(args, name) for name in StudyTraining.model_fields}),
        **options,
    )


def write(study: StudyResult, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{study.arm.name}.json").write_text(study.model_dump_json(indent=2) + "\n")
    (out / f"{study.arm.name}.md").write_text(study_markdown(study))


def main(argv: list[str] | None = None) -> int:
    from bashgym_assets import images
    from bashgym_assets.config import get_settings
    from bashgym_assets.evaluation import learning_study as ls
    from bashgym_assets.lake import Lake
    from bashgym_assets.training import base_model as bm

    args = parse(argv)
    if args.paired:
        return paired(args)
    if args.clean_sets is not None:
        return clean(args)
    if args.dpo_from_epoch is not None:
        return dpo(args)
    if args.recovery_from_epoch is not None:
        return recovery(args)
    if args.grpo_from_epoch is not None:
        return grpo(args)
    previous = None
    if args.extend_to:
        previous = ls.StudyResult.model_validate_json((args.out / f"{args.arm}.json").read_text())
        arm = ls.extended(previous, args.extend_to, args.eval_epochs)
    elif not args.families:
        sys.exit("--families is required (or --extend-to, to train an arm further)")
    else:
        arm = arm_of(args)
    settings = get_settings()
    # an arm trained on goes on from the model it started with
    base = args.base or (previous.base_model if previous else bm.resolve_base_model(settings, prepare=True))
    lake = Lake(settings)
    work = args.work or lake.artifact_dir("learning_study", arm.name)
    images.ensure_docker_engine()
    image = images.sandbox_image_tag()

    def say(line: str) -> None:
        print(line, flush=True)

    if args.probe:
        probe = ls.probe_steps(arm, base, image, work, args.probe, say)
        say(f"[{arm.name}] probe: {probe.model_dump_json()}")
        say(f"[{arm.name}] {probe.projection(int(arm.train.epochs))}")
        return 0
    command = "python benchmarks/learning_study.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    study = ls.run_arm(
        arm,
        base,
        image,
        work,
        lake=None if args.no_lake else lake,
        progress=say,
        on_checkpoint=lambda s: write(s, args.out),
        machine=machine(docker=True),
        command=command,
        previous=previous,
    )
    write(study, args.out)
    say(f"[{arm.name}] done: {args.out / (arm.name + '.md')}")
    return 0


def paired(args: argparse.Namespace) -> int:
    """``--paired A,B``: a table of the discordant tasks of each pair, per set."""
    from bashgym_assets.evaluation import learning_study as ls

    study, lake, work = recorded_arm(args, engine=False)
    if (data := ls.cached_data(study.arm, work / "prepared.json")) is None:
        sys.exit(f"[{args.arm}] the arm's prepared data is not in {work}")
    print("| A | B | set | tasks | only A finished | only B finished | p (A better) |")
    print("|---|---|---|---|---|---|---|")
    for pair in args.paired:
        a, _, b = pair.partition(",")
        try:
            tests = ls.paired(study, data, lake, a.strip(), b.strip())
        except KeyError as exc:
            sys.exit(str(exc.args[0]))
        except FileNotFoundError as exc:  # a model evaluated with --no-lake: its episodes were never kept
            sys.exit(f"[{args.arm}] {a} or {b} has no episodes in the lake: {exc}")
        for name, t in tests.items():
            print(
                f"| {a} | {b} | {name} | {t.scenarios} | {t.candidate_better} | {t.incumbent_better} | "
                f"{t.p_value:.3f} |"
            )
    return 0


def recorded_arm(args: argparse.Namespace, engine: bool = True) -> tuple[StudyResult, Any, Path]:
    """The arm's recorded result, the lake and its work folder, with the engine started: what a stage on top of a
    finished arm (``--clean-sets``, ``--dpo-from-epoch``) needs."""
    from bashgym_assets import images
    from bashgym_assets.config import get_settings
    from bashgym_assets.lake import Lake

    path = args.out / f"{args.arm}.json"
    if not path.exists():
        sys.exit(f"[{args.arm}] has no result in {path}: run the arm first")
    study = StudyResult.model_validate_json(path.read_text())
    lake = Lake(get_settings())
    if engine:  # (what only reads the recorded episodes needs no engine)
        images.ensure_docker_engine()
    return study, lake, args.work or lake.artifact_dir("learning_study", args.arm)


def clean(args: argparse.Namespace) -> int:
    """``--clean-sets``: the arm's checkpoint and the base on unseen and bundled, added to its result files."""
    from bashgym_assets import images
    from bashgym_assets.evaluation import learning_study as ls

    study, lake, work = recorded_arm(args)
    if not study.checkpoints:
        sys.exit(f"[{args.arm}] has no checkpoint to evaluate")
    epoch = study.checkpoints[-1].epoch if args.clean_sets == -1 else args.clean_sets
    result = ls.evaluate_clean(
        study,
        epoch,
        args.base or study.base_model,
        images.sandbox_image_tag(),
        work,
        lake=None if args.no_lake else lake,
        progress=lambda line: print(line, flush=True),
        per_family=args.clean_per_family,
    )
    study.clean = [c for c in study.clean if c.epoch != epoch] + [result]
    write(study, args.out)
    for line in ls.clean_markdown(args.arm, result)[:6]:
        print(line)
    return 0


def dpo(args: argparse.Namespace) -> int:
    """``--dpo-from-epoch``: DPO on top of the arm's checkpoint of that epoch, added to its result files."""
    from bashgym_assets.evaluation import learning_study as ls

    return _on_top(args, DpoSettings, "dpo", ls.dpo_on_top, ls.dpo_markdown)


def recovery(args: argparse.Namespace) -> int:
    """``--recovery-from-epoch``: recovery rows on top of the arm's checkpoint of that epoch (and the control),
    added to its result files."""
    from bashgym_assets.evaluation import learning_study as ls

    return _on_top(args, RecoverySettings, "recovery", ls.recovery_on_top, ls.recovery_markdown)


def grpo(args: argparse.Namespace) -> int:
    """``--grpo-from-epoch``: GRPO on top of the arm's checkpoint of that epoch, added to its result files."""
    from bashgym_assets.evaluation import learning_study as ls

    return _on_top(args, GrpoSettings, "grpo", ls.grpo_on_top, ls.grpo_markdown)


def _on_top(args: argparse.Namespace, settings_cls: type[Any], kind: str, run: Any, markdown: Any) -> int:
    """A stage on top of a recorded arm's checkpoint: its settings from ``--<kind>-*``, its result replacing one of
    the same settings in ``StudyResult.<kind>``, the files written, its table printed. A missing checkpoint, data
    or row is said in one line and nothing is written."""
    from bashgym_assets import images

    study, lake, work = recorded_arm(args)
    settings = _settings(args, settings_cls, kind)
    try:
        result = run(
            study,
            settings,
            args.base or study.base_model,
            images.sandbox_image_tag(),
            work,
            lake=None if args.no_lake else lake,
            progress=lambda line: print(line, flush=True),
        )
    except (FileNotFoundError, RuntimeError) as exc:
        sys.exit(str(exc))
    kept = [r for r in getattr(study, kind) if r.settings != settings]
    setattr(study, kind, [*kept, result])
    write(study, args.out)
    for line in markdown(study, result):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
