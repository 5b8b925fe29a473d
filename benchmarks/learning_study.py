"""The learning study (issue 38): one arm, a recipe trained on a few factory families, its checkpoints evaluated on
the tasks it trained on (fit) and on fresh tasks of the same families (transfer).

    .venv/bin/python benchmarks/learning_study.py --arm fit6 \\
        --families files-delete-by-pattern,text-dedupe-lines,logs-top-ips,archives-extract-member,data-jq-filter,users-change-shell \\
        --tasks-per-family 14 --epochs 2,5,8 --lr 1e-3 --schedule constant
    .venv/bin/python benchmarks/learning_study.py --arm fit6 --families ... --probe 3   # time 3 steps, then stop

The work is ``bashgym_assets.evaluation.learning_study`` (draw, gate, reference rollouts, ``sft_dataset``'s rows,
``train_sft`` in segments ending at each ``--epochs`` value, ``compare`` on fit and transfer); this script parses
the recipe and writes ``benchmarks/results/learning_study/<arm>.json`` and ``<arm>.md`` after every checkpoint, so
a stopped run keeps what it measured. Adapters, checkpoints and the prepared data live in the data folder
(``artifacts/learning_study/<arm>``; the data is reused by a rerun of the same arm data). The episodes go to
``eval_episodes`` under ``eval-cli-train-study-<arm>-e<epoch>-*`` (fit figures: never judged as held-out ones).
Needs the Docker engine and the sandbox image. ``--dtype auto``: bfloat16 on a CPU with AVX-512 BF16.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bashgym_assets.evaluation.learning_study import Arm, StudyResult, study_markdown  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import machine, vector_units  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "learning_study"


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    d = Arm.model_fields
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", required=True, help="the arm's name (its result files)")
    ap.add_argument("--families", type=_csv, required=True, help="train families, comma-separated")
    ap.add_argument("--tasks-per-family", type=int, default=d["tasks_per_family"].default)
    ap.add_argument("--draw-seed", type=int, default=d["draw_seed"].default)
    ap.add_argument("--trajectories", type=int, default=d["trajectories_per_task"].default)
    ap.add_argument(
        "--observation-chars", type=int, default=d["observation_chars"].default, help="0: outputs whole"
    )
    ap.add_argument(
        "--epochs",
        type=lambda t: [int(x) for x in _csv(t)],
        default=d["eval_epochs"].default,
        help="e.g. 2,5,8",
    )
    ap.add_argument("--lr", type=float, default=d["learning_rate"].default)
    ap.add_argument("--schedule", choices=["constant", "linear"], default=d["lr_schedule"].default)
    ap.add_argument("--warmup", type=int, default=d["warmup_steps"].default)
    ap.add_argument("--lora-r", type=int, default=d["lora_r"].default)
    ap.add_argument("--lora-alpha", type=int, default=d["lora_alpha"].default)
    ap.add_argument("--targets", default="all-linear", help="all-linear or module names, comma-separated")
    ap.add_argument("--max-length", type=int, default=d["max_length"].default, help="tokens a packed row")
    ap.add_argument("--grad-accum", type=int, default=d["grad_accum"].default, help="packed rows a step")
    ap.add_argument("--no-curriculum", action="store_true")
    ap.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto")
    ap.add_argument("--fit-per-family", type=int, default=d["fit_per_family"].default)
    ap.add_argument("--transfer-per-family", type=int, default=d["transfer_per_family"].default)
    ap.add_argument("--max-turns", type=int, default=d["max_turns"].default)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--base", help="base model folder (default: BASHGYM_BASE_MODEL or the offline SmolLM2)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where <arm>.json and <arm>.md go")
    ap.add_argument(
        "--work", type=Path, help="adapters and checkpoints (default: the data folder's artifacts)"
    )
    ap.add_argument("--probe", type=int, default=0, help="train only N steps, print the cost, write nothing")
    ap.add_argument("--no-lake", action="store_true", help="do not write the episodes to eval_episodes")
    return ap.parse_args(argv)


def arm_of(args: argparse.Namespace) -> Arm:
    dtype = args.dtype
    if dtype == "auto":
        dtype = "bfloat16" if vector_units() == "AVX-512 with BF16" else "float32"
    targets = args.targets if args.targets == "all-linear" else _csv(args.targets)
    return Arm(
        name=args.arm,
        families=args.families,
        tasks_per_family=args.tasks_per_family,
        draw_seed=args.draw_seed,
        trajectories_per_task=args.trajectories,
        observation_chars=args.observation_chars or None,
        eval_epochs=args.epochs,
        learning_rate=args.lr,
        lr_schedule=args.schedule,
        warmup_steps=args.warmup,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        target_modules=targets,
        max_length=args.max_length,
        grad_accum=args.grad_accum,
        curriculum=not args.no_curriculum,
        dtype=dtype,
        seed=args.seed,
        fit_per_family=args.fit_per_family,
        transfer_per_family=args.transfer_per_family,
        max_turns=args.max_turns,
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
    arm = arm_of(args)
    settings = get_settings()
    base = args.base or bm.resolve_base_model(settings, prepare=True)
    lake = Lake(settings)
    work = args.work or lake.artifact_dir("learning_study", arm.name)
    images.ensure_docker_engine()
    image = images.sandbox_image_tag()

    def say(line: str) -> None:
        print(line, flush=True)

    if args.probe:
        probe = ls.probe_steps(arm, base, image, work, args.probe, say)
        say(f"[{arm.name}] probe: {probe.model_dump_json()}")
        say(f"[{arm.name}] {probe.projection(max(arm.eval_epochs))}")
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
    )
    write(study, args.out)
    say(f"[{arm.name}] done: {args.out / (arm.name + '.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
