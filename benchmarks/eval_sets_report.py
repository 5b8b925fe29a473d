"""An evaluation's episodes per evaluation set (issue 37): fit, transfer, unseen, bundled (clean), bundled-twins (the
bundled tasks a train family teaches: reported once, never judges) and each external suite, each model with Wilson
95% intervals, per difficulty, and its failure classes; plus one transcript of a clean judging episode.
The set of an episode is re-derived from its id and source (``evaluation.evaluation_set``), so episodes recorded
before the sets had these names are shown under them too.

    .venv/bin/python benchmarks/eval_sets_report.py EVAL_ID [EVAL_ID ...] [--label EVAL_ID=name] [--out FILE]

Reads ``eval_episodes`` from the data folder's lake (``benchmark_results`` and ``bashgym eval`` both write it); a
model of a later evaluation is shown under ``--label`` names so several evaluations fit one table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bashgym_assets.evaluation import BUNDLED_TWINS, EVALUATION_SETS, evaluation_set, judges  # noqa: E402
from bashgym_assets.evaluation.metrics import RATES, EvalEpisode, summarize  # noqa: E402
from bashgym_assets.evaluation.report import transcript_markdown  # noqa: E402
from bashgym_assets.lake import Lake  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_ids", nargs="+")
    ap.add_argument("--label", action="append", default=[], help="EVAL_ID:MODEL=name (rename a model's rows)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    renames = dict(x.split("=", 1) for x in args.label)
    lake = Lake()
    by_model: dict[str, list[EvalEpisode]] = {}
    for eval_id in args.eval_ids:
        for row in lake.read("eval_episodes", eval_id).to_pylist():
            e = EvalEpisode.model_validate({k: v for k, v in row.items() if k != "_partition"})
            name = renames.get(f"{eval_id}:{e.model}", e.model)
            by_model.setdefault(name, []).append(e)
    lines = [f"Evaluations: {', '.join(args.eval_ids)}", ""]
    head = "| set | model | n | " + " | ".join(RATES) + " | mean turns | failure classes |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    seen = {evaluation_set(e.scenario_id, source=e.source) for eps in by_model.values() for e in eps}
    for name in [*EVALUATION_SETS, BUNDLED_TWINS, *sorted(seen - {*EVALUATION_SETS, BUNDLED_TWINS})]:
        for model, episodes in by_model.items():
            eps = [e for e in episodes if evaluation_set(e.scenario_id, source=e.source) == name]
            if not eps:
                continue
            s = summarize(model, eps)
            fails = ", ".join(f"{k} {v}" for k, v in sorted(s.failure_classes.items(), key=lambda kv: -kv[1]))
            lines.append(
                f"| {name} | {model} | {s.rates['clean'].n} | "
                + " | ".join(s.rates[k].fmt() for k in RATES)
                + f" | {s.mean_turns} | {fails or '-'} |"
            )
    lines += [
        "",
        "Verified by difficulty (all sets):",
        "",
        "| model | " + " | ".join(f"difficulty {d}" for d in range(1, 5)) + " |",
        "|---|---|---|---|---|",
    ]
    for model, episodes in by_model.items():
        s = summarize(model, episodes)
        cells = [
            s.by_difficulty[str(d)]["verified"].fmt() if str(d) in s.by_difficulty else "-"
            for d in range(1, 5)
        ]
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    clean = [
        e
        for eps in by_model.values()
        for e in eps
        if e.clean and judges(evaluation_set(e.scenario_id, source=e.source))
    ]
    lines += ["", f"Clean episodes of the judging sets (unseen, bundled, suites): {len(clean)}"]
    if clean:
        lines += ["", transcript_markdown(clean[0])]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
