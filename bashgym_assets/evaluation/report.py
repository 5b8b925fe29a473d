"""Showing an evaluation: the comparison table, rates per model and category as a plot, failing transcripts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bashgym_assets.evaluation import failures
from bashgym_assets.evaluation.metrics import RATES, EvalEpisode, ModelSummary
from bashgym_assets.plots import figure_png, md_table, pyplot
from bashgym_assets.rollout import tracing

COMPARISON_COLUMNS = (
    "model",
    "model_ref",
    "n",
    "operate",
    "terminate",
    "verified",
    "clean",
    "clean_low",
    "clean_high",
    "mean_turns",
    "episodes_per_min",
    "wall_s",
)


def comparison_rows(summaries: Sequence[ModelSummary]) -> list[dict[str, Any]]:
    """One row per model: rates as fractions with the clean interval (for MetadataValue.table and MLflow)."""
    rows = []
    for s in summaries:
        r = s.rates
        n = r["clean"].n
        rows.append(
            {
                "model": s.model,
                "model_ref": s.model_ref,
                "n": n,
                **{k: r[k].rate for k in RATES},
                "clean_low": r["clean"].low,
                "clean_high": r["clean"].high,
                "mean_turns": s.mean_turns,
                "episodes_per_min": round(60 * s.episodes / s.wall_s, 2) if s.wall_s else 0.0,
                "wall_s": s.wall_s,
            }
        )
    return rows


def comparison_markdown(summaries: Sequence[ModelSummary], title: str = "") -> str:
    """The table people read first: rates with 95% intervals, then pass@k and failure classes."""
    head = ["model", "n", "operate", "terminate", "verified", "clean", "turns", "failures"]
    rows = []
    for s in summaries:
        failures = ", ".join(f"{k} {v}" for k, v in sorted(s.failure_classes.items(), key=lambda kv: -kv[1]))
        extra = " ".join(f"{k} {v:.0%}" for k, v in s.pass_at_k.items() if k != "pass@1")
        rows.append(
            [
                s.model + (f" ({extra})" if extra else ""),
                s.rates["clean"].n,
                *(s.rates[k].fmt() for k in RATES),
                s.mean_turns,
                failures or "-",
            ]
        )
    text = md_table(head, rows)
    return (f"**{title}**\n\n" if title else "") + text


def per_set_rows(by_set: Mapping[str, Sequence[ModelSummary]]) -> list[dict[str, Any]]:
    """One row per (evaluation set, model): the three ways a model is measured, with the clean interval."""
    rows = []
    for name, summaries in by_set.items():
        for s in summaries:
            r = s.rates
            rows.append(
                {
                    "set": name,
                    "model": s.model,
                    "n": r["clean"].n,
                    **{k: r[k].rate for k in RATES},
                    "clean_low": r["clean"].low,
                    "clean_high": r["clean"].high,
                    "mean_turns": s.mean_turns,
                }
            )
    return rows


def per_category_rows(summaries: Sequence[ModelSummary]) -> list[dict[str, Any]]:
    rows = []
    for s in summaries:
        for cat, r in s.by_category.items():
            rows.append(
                {"model": s.model, "category": cat, "n": r["clean"].n, **{k: r[k].rate for k in RATES}}
            )
    return rows


def per_difficulty_rows(summaries: Sequence[ModelSummary]) -> list[dict[str, Any]]:
    rows = []
    for s in summaries:
        for diff, r in s.by_difficulty.items():
            rows.append(
                {
                    "model": s.model,
                    "difficulty": int(diff),
                    "n": r["clean"].n,
                    **{k: r[k].rate for k in RATES},
                }
            )
    return rows


def rates_plot_png(summaries: Sequence[ModelSummary]) -> bytes:
    """Left: the four rates per model (with the clean interval); right: clean rate per category per model."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8), dpi=100, gridspec_kw={"width_ratios": [1, 2]})
    width = 0.8 / max(1, len(summaries))
    for i, s in enumerate(summaries):
        xs = [j + i * width for j in range(len(RATES))]
        values = [s.rates[k].rate for k in RATES]
        ax1.bar(xs, values, width=width, label=s.model)
        clean = s.rates["clean"]
        ax1.errorbar(
            [xs[-1]],
            [clean.rate],
            yerr=[[clean.rate - clean.low], [clean.high - clean.rate]],
            fmt="none",
            ecolor="black",
            capsize=3,
        )
    ax1.set_xticks([j + width * (len(summaries) - 1) / 2 for j in range(len(RATES))], list(RATES))
    ax1.set_ylim(0, 1.05)
    ax1.set_title("rates (95% interval on clean)")
    ax1.legend(fontsize=8)
    cats = sorted({c for s in summaries for c in s.by_category})
    for i, s in enumerate(summaries):
        xs = [j + i * width for j in range(len(cats))]
        ax2.bar(
            xs,
            [s.by_category[c]["clean"].rate if c in s.by_category else 0 for c in cats],
            width=width,
            label=s.model,
        )
    ax2.set_xticks(
        [j + width * (len(summaries) - 1) / 2 for j in range(len(cats))],
        cats,
        rotation=45,
        ha="right",
        fontsize=8,
    )
    ax2.set_ylim(0, 1.05)
    ax2.set_title("clean rate per category")
    fig.tight_layout()
    return figure_png(fig)


def transcript_markdown(e: EvalEpisode, max_chars: int = 2500) -> str:
    """One episode as a terminal session, with its verdict."""
    verdict = "clean" if e.clean else f"failed: {e.failure_class}"
    if tags := failures.tags_of(e):
        verdict += f" / {tags[0]}" + (f" (also {', '.join(tags[1:])})" if tags[1:] else "")
    lines = [
        f"**{e.scenario_id}** ({e.category}, d{e.difficulty}) by `{e.model}`: {verdict} "
        f"(operated {e.operated}, terminated {e.terminated}, verified {e.verified}, {e.n_turns} turns)"
    ]
    if link := tracing.eval_trace_link(e.eval_id, e.model, e.scenario_id, e.sample_index):
        lines.append(f"[turn-by-turn trace in MLflow]({link})")
    lines += ["", "```"]
    for m in e.messages:
        prefix = {"system": "# ", "user": "", "assistant": "$ "}.get(m.role, "")
        lines.append("\n".join(prefix + line.replace("```", "'''") for line in m.content.splitlines()))
    body = "\n".join(lines)
    if len(body) > max_chars:
        body = body[:max_chars] + "\n..."
    return body + "\n```"


def failing_transcripts(episodes: Sequence[EvalEpisode], model: str, limit: int = 3) -> list[EvalEpisode]:
    """A few failures of one model, one per failure class first (the most informative sample)."""
    fails = [e for e in episodes if e.model == model and not e.clean and e.failure_class]
    picked: list[EvalEpisode] = []
    seen: set[str] = set()
    for e in fails:
        if e.failure_class not in seen:
            picked.append(e)
            seen.add(e.failure_class)
    picked += [e for e in fails if e not in picked]
    return picked[:limit]


# ---- why episodes failed (``evaluation.failures``) ----------------------------------------------------------------
def split_by_set(episodes: Sequence[EvalEpisode], set_of: dict[str, str]) -> dict[str, list[EvalEpisode]]:
    """Episodes per evaluation set (``set_of``: scenario id -> set name; a scenario in none goes to "other")."""
    out: dict[str, list[EvalEpisode]] = {}
    for e in episodes:
        out.setdefault(set_of.get(e.scenario_id, "other"), []).append(e)
    return out


def failure_detail_rows(by_set: Mapping[str, Sequence[EvalEpisode]]) -> list[dict[str, Any]]:
    """One row per (evaluation set, model): episodes, failed ones the model is to blame for, and how many of those
    fell in each detail class (every class a column, so tables from two evaluations line up)."""
    rows = []
    for name, episodes in by_set.items():
        models = list(dict.fromkeys(e.model for e in episodes))
        for model in models:
            eps = [e for e in episodes if e.model == model]
            counts = failures.detail_counts(eps)
            rows.append(
                {
                    "set": name,
                    "model": model,
                    "n": len(eps),
                    "failed": sum(counts.values()),
                    **{c: counts.get(c, 0) for c in failures.DETAIL_CLASSES},
                }
            )
    return rows


def failure_detail_markdown(by_set: Mapping[str, Sequence[EvalEpisode]], title: str = "") -> str:
    """The detail classes' counts per set and model; only the columns some row uses."""
    rows = failure_detail_rows(by_set)
    used = [c for c in failures.DETAIL_CLASSES if any(r[c] for r in rows)]
    head = ["set", "model", "n", "failed", *used]
    text = md_table(head, [[r[k] for k in head] for r in rows]) if rows else "(no episode)"
    return (f"**{title}**\n\n" if title else "") + text


def detail_transcripts(episodes: Sequence[EvalEpisode], per_class: int = 3) -> dict[str, list[EvalEpisode]]:
    """Up to ``per_class`` episodes of each detail class, different scenarios first (in the order given)."""
    picked: dict[str, list[EvalEpisode]] = {}
    for c in failures.DETAIL_CLASSES:
        of_class = [e for e in episodes if failures.detail_of(e) == c]
        first: list[int] = []  # positions: two samples of one scenario may be equal records
        seen: set[str] = set()
        for i, e in enumerate(of_class):
            if e.scenario_id not in seen:
                first.append(i)
                seen.add(e.scenario_id)
        order = first + [i for i in range(len(of_class)) if i not in first]
        chosen = [of_class[i] for i in order[:per_class]]
        if chosen:
            picked[c] = chosen
    return picked


def failure_details_report(
    by_set: Mapping[str, Sequence[EvalEpisode]], per_class: int = 3, transcripts_of: str | None = None
) -> str:
    """``failure_details.md``: the counts table, then ``per_class`` transcripts of each class (of the model
    ``transcripts_of`` only, when given)."""
    parts = [failure_detail_markdown(by_set, title="why episodes failed (detail class per set and model)")]
    episodes = [
        e for eps in by_set.values() for e in eps if transcripts_of is None or e.model == transcripts_of
    ]
    for c, eps in detail_transcripts(episodes, per_class).items():
        parts.append(f"### {c}\n\n" + "\n\n".join(transcript_markdown(e) for e in eps))
    return "\n\n".join(parts) + "\n"
