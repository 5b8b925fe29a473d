"""Benchmark: GRPO's rollouts in the same run: a whole group in lockstep decoded by the continuous decoder that
reuses each episode's earlier turns (``Policy``'s cached path, GRPO's default), the same with one left-padded
``generate`` per turn (its path before), and optionally one episode at a time (episodes per minute and the
ratios); optionally a short real GRPO run (reward per step).

    .venv/bin/python benchmarks/bench_grpo.py [--scenarios 2] [--group 4] [--max-turns 4] [--adapter DIR]
                                              [--arm ARM] [--no-single] [--train-steps 0] [--lr 5e-5] [--base DIR]

Every row is ``training.grpo.play_episodes`` over scenarios x group episodes, commands in parallel sandboxes, what
GRPO's ``rollout_func`` does; "one at a time" plays the same episodes one after another (one sandbox at a time).
Sampling (temperature 0.8) means the rows do not play identical episodes; the turn and reply-token counts are
reported beside the rates. Scenarios: the bundled pack's train split, easiest first, or with ``--arm`` the
learning-study arm's trained tasks (its ``prepared.json`` in the data folder), from the start. ``--train-steps N`` then runs ``train_grpo`` for N
optimizer steps from ``--adapter`` (an SFT adapter; a fresh LoRA when none is given) and prints the reward trend.
Needs the Docker engine and the sandbox image.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bashgym_assets import images  # noqa: E402
from bashgym_assets.scenarios.candidates import load_pack  # noqa: E402
from bashgym_assets.scenarios.gate import TRAIN, split_for  # noqa: E402
from bashgym_assets.training import base_model as bm  # noqa: E402
from bashgym_assets.training import grpo  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import machine  # noqa: E402


def _policy(
    base: str, adapter: str | None, args: argparse.Namespace, micro_batch: int, kv_cache: bool
) -> grpo.Policy:
    from transformers import AutoModelForCausalLM

    from bashgym_assets.training.trainer import load_tokenizer

    model = AutoModelForCausalLM.from_pretrained(base)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    model.eval()
    return grpo.Policy(
        model,
        load_tokenizer(base),
        max_new_tokens=args.max_new_tokens,
        temperature=0.8,
        micro_batch=micro_batch,
        kv_cache=kv_cache,
        seed=0,
    )


def _arm_tasks(arm_name: str) -> list[Any]:
    """The trained tasks of a learning-study arm, as its stages on top play them."""
    from bashgym_assets.config import get_settings
    from bashgym_assets.evaluation import learning_study as ls
    from bashgym_assets.lake import Lake

    study = ls.StudyResult.model_validate_json(
        (ROOT / "benchmarks" / "results" / "learning_study" / f"{arm_name}.json").read_text()
    )
    work = Lake(get_settings()).artifact_dir("learning_study", arm_name)
    data = ls.cached_data(study.arm, work / "prepared.json")
    if data is None:
        sys.exit(f"[{arm_name}] no prepared data in {work}")
    return ls.trained_bundles(study.arm, data)


def _fresh_adapter(base: str, folder: Path) -> str:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    get_peft_model(
        AutoModelForCausalLM.from_pretrained(base),
        LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
    ).save_pretrained(folder)
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--adapter", help="the SFT adapter to start from (default: the base with a fresh LoRA)")
    ap.add_argument("--arm", help="play this learning-study arm's trained tasks instead of the pack's")
    ap.add_argument("--no-single", action="store_true", help="leave out the one-at-a-time row")
    ap.add_argument("--base", help="base model folder (default: BASHGYM_BASE_MODEL / the offline SmolLM2)")
    ap.add_argument("--train-steps", type=int, default=0)
    ap.add_argument("--train-scenarios", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--skip-rollouts", action="store_true")
    ap.add_argument(
        "--threads",
        type=int,
        help="torch threads (1 is far faster on a CPU other jobs load: "
        "OpenMP workers spin-wait for a core; see BENCHMARKS.md)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "grpo.md")
    args = ap.parse_args(argv)

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    images.ensure_docker_engine()
    image = images.sandbox_image_tag()
    base = args.base or bm.resolve_base_model(prepare=True)
    if args.arm:
        train = _arm_tasks(args.arm)
    else:
        bundles, _ = load_pack()
        train = sorted((b for b in bundles if split_for(b.id) == TRAIN), key=lambda b: (b.difficulty, b.id))
    subset = train[: args.scenarios]
    settings = grpo.GRPOSettings(
        num_generations=args.group,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        temperature=0.8,
    )
    load = os.getloadavg()[0]
    lines = [
        "## GRPO rollouts and a short run (issue 16)",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_grpo.py {' '.join(argv or sys.argv[1:])}`  ",
        f"Machine: {machine(docker=True)}, load average at start {load:.1f}  ",
        f"Model: {base}"
        + (f" + adapter {args.adapter}" if args.adapter else " + a fresh LoRA (no SFT)")
        + f"; sampled at 0.8, {args.max_new_tokens} new tokens max, {args.max_turns}-turn cap"
        + (f"; torch threads {args.threads}" if args.threads else ""),
        "",
    ]
    if not args.skip_rollouts:
        episodes = [b for b in subset for _ in range(args.group)]
        rows = []
        import torch

        runs = []
        if not args.no_single:
            torch.manual_seed(0)
            one_policy = _policy(base, args.adapter, args, micro_batch=1, kv_cache=False)
            t0 = time.perf_counter()
            singles = []
            for k, b in enumerate(episodes):
                singles += grpo.play_episodes([b], one_policy, image, settings, samples=[k])
            runs.append(("one at a time (generate, batch 1, one sandbox)", singles, time.perf_counter() - t0))
        for name, cached in (
            (f"group in lockstep, generate ({len(episodes)} episodes)", False),
            (f"group in lockstep, cached continuous decoding ({len(episodes)} episodes)", True),
        ):
            torch.manual_seed(0)
            policy = _policy(base, args.adapter, args, micro_batch=16, kv_cache=cached)
            assert policy.cached == cached, policy.kv_fallback
            t0 = time.perf_counter()
            played = grpo.play_episodes(episodes, policy, image, settings, progress=print)
            runs.append((name, played, time.perf_counter() - t0))
        for name, played, secs in runs:
            outs = [p.outcome for p in played]
            rewards = [grpo.episode_reward(o) for o in outs]
            scored = [r for r in rewards if r is not None]
            rows.append(
                (
                    name,
                    len(outs),
                    sum(o.n_turns for o in outs),
                    sum(o.model_tokens for o in outs),
                    secs,
                    60 * len(outs) / secs,
                    sum(o.verified for o in outs),
                    sum(scored) / max(1, len(scored)),
                )
            )
        cached_row, generate_row = rows[-1], rows[-2]
        lines += [
            f"Scenarios ({'arm ' + args.arm + ' trained tasks' if args.arm else 'train split, easiest'}): "
            f"{', '.join(b.id for b in subset)}; group of {args.group}",
            "",
            "| run | episodes | turns | reply tokens | wall s | episodes/min | reply tokens/s | verified | mean reward |",
            "|---|---|---|---|---|---|---|---|---|",
            *(
                f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} | {r[5]:.2f} | {r[3] / r[4]:.1f} | {r[6]} | "
                f"{r[7]:+.3f} |"
                for r in rows
            ),
            "",
            f"- cached continuous decoding vs generate, group in lockstep: **{cached_row[5] / generate_row[5]:.2f}x** "
            f"episodes/min, **{(cached_row[3] / cached_row[4]) / (generate_row[3] / generate_row[4]):.2f}x** reply "
            "tokens/s (the rows sample different episodes: tokens/s is the fairer figure)",
            *(
                [
                    f"- group in lockstep (generate) vs one at a time: **{rows[1][5] / rows[0][5]:.2f}x** episodes/min"
                ]
                if not args.no_single
                else []
            ),
            "",
        ]
        print("\n".join(lines), flush=True)
    if args.train_steps:
        from bashgym_assets.training.trainer import TrainConfig

        tmp = Path(tempfile.mkdtemp(prefix="bench-grpo-"))
        adapter = args.adapter or _fresh_adapter(base, tmp / "fresh")
        cfg = TrainConfig(
            base_model=base,
            output_dir=str(tmp / "grpo"),
            max_steps=args.train_steps,
            learning_rate=args.lr,
            save_every=1000,
        )
        run_settings = settings.model_copy(update={"scenarios_per_step": 2})
        t0 = time.perf_counter()
        run = grpo.train_grpo(
            cfg,
            run_settings,
            train[: args.train_scenarios],
            adapter,
            image,
            progress=print,
            on_log=lambda row: print(grpo.progress_line(row), flush=True),
        )
        wall = time.perf_counter() - t0
        lines += [
            f"Short GRPO run: {args.train_steps} steps x 2 groups of {args.group}, lr {args.lr}, "
            f"{args.train_scenarios} train scenarios (easiest first), {wall / 60:.1f} min",
            "",
            "| step | mean reward | success | turns | informative groups | episodes/min | loss |",
            "|---|---|---|---|---|---|---|",
        ]
        losses = {int(r["step"]): r.get("loss") for r in run.result.history}
        for s in run.steps:
            loss = losses.get(s.step)
            lines.append(
                f"| {s.step} | {s.reward_mean:+.3f} | {s.success_rate:.0%} | {s.mean_turns:.1f} | "
                f"{s.informative_frac:.0%} | {s.episodes_per_min:.1f} | "
                f"{'' if loss is None else f'{loss:.4f}'} |"
            )
        lines += [
            "",
            "Groups: "
            + json.dumps(
                {
                    k: sum(g.kind == k for g in run.groups)
                    for k in ("mixed", "all_pass", "all_fail", "unscorable")
                }
            ),
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
