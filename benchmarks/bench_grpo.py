"""Benchmark: GRPO's rollouts, a whole group batched in lockstep against one episode at a time, in the same run
(episodes per minute and the ratio); optionally a short real GRPO run (reward per step).

    .venv/bin/python benchmarks/bench_grpo.py [--scenarios 2] [--group 4] [--max-turns 4] [--adapter DIR]
                                              [--train-steps 0] [--lr 5e-5] [--base DIR]

"Batched group" is ``training.grpo.play_episodes`` over scenarios x group episodes: one sampled, left-padded
``generate`` per turn for every live episode, commands in parallel sandboxes, what GRPO's ``rollout_func`` does.
"One at a time" plays the same episodes one after another (a ``generate`` of one per turn, one sandbox at a time).
Sampling (temperature 0.8) means the two do not play identical episodes; the turn counts are reported beside the
rates. Scenarios: the bundled pack's train split, easiest first. ``--train-steps N`` then runs ``train_grpo`` for N
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bashgym_assets import images  # noqa: E402
from bashgym_assets.scenarios.candidates import load_pack  # noqa: E402
from bashgym_assets.scenarios.gate import TRAIN, split_for  # noqa: E402
from bashgym_assets.training import base_model as bm  # noqa: E402
from bashgym_assets.training import grpo  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import machine  # noqa: E402


def _policy(base: str, adapter: str | None, args: argparse.Namespace, micro_batch: int) -> grpo.Policy:
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
    )


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

        torch.manual_seed(0)
        one_policy = _policy(base, args.adapter, args, micro_batch=1)
        t0 = time.perf_counter()
        singles = []
        for k, b in enumerate(episodes):
            singles += grpo.play_episodes([b], one_policy, image, settings, samples=[k])
        one_s = time.perf_counter() - t0
        torch.manual_seed(0)
        group_policy = _policy(base, args.adapter, args, micro_batch=16)
        t0 = time.perf_counter()
        batch = grpo.play_episodes(episodes, group_policy, image, settings, progress=print)
        batch_s = time.perf_counter() - t0
        for name, played, secs in (
            ("one at a time (batch 1, one sandbox)", singles, one_s),
            (f"batched group ({len(episodes)} episodes in lockstep)", batch, batch_s),
        ):
            outs = [p.outcome for p in played]
            rewards = [grpo.episode_reward(o) for o in outs]
            scored = [r for r in rewards if r is not None]
            rows.append(
                (
                    name,
                    len(outs),
                    sum(o.n_turns for o in outs),
                    secs,
                    60 * len(outs) / secs,
                    sum(o.verified for o in outs),
                    sum(scored) / max(1, len(scored)),
                )
            )
        ratio = rows[1][4] / rows[0][4]
        lines += [
            f"Scenarios (train split, easiest): {', '.join(b.id for b in subset)}; group of {args.group}",
            "",
            "| run | episodes | turns | wall s | episodes/min | verified | mean reward |",
            "|---|---|---|---|---|---|---|",
            *(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.2f} | {r[5]} | {r[6]:+.3f} |" for r in rows),
            "",
            f"- batched group vs one at a time: **{ratio:.2f}x** episodes/min",
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
