"""Human-readable summaries of tiered traces: a tier histogram, score distributions, best and worst examples.

Plots are PNG (matplotlib, Agg backend: no display needed) returned as bytes, so the Dagster layer can both save
them as artifacts and embed them in markdown metadata.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from bashgym_assets.plots import figure_png, png_markdown
from bashgym_assets.quality.metrics import WEIGHTS
from bashgym_assets.quality.tiers import TIERS, TieredTrace

SCORE_COLUMNS = [*WEIGHTS.keys(), "quality_score"]
_COLORS = {"gold": "#d4a017", "silver": "#a8a9ad", "bronze": "#cd7f32", "failed": "#b22222"}


def tier_counts(traces: Sequence[TieredTrace]) -> dict[str, int]:
    c = Counter(t.tier for t in traces)
    return {tier: c.get(tier, 0) for tier in TIERS}


def safety_counts(traces: Sequence[TieredTrace]) -> dict[str, int]:
    """Segments with a blocked command, with only warned commands, with injection markers in tool outputs, and
    how often each guardrail rule fired."""
    rules = Counter(f.rule for t in traces for f in t.safety_findings or [])
    return {
        "segments_with_blocked_command": sum(bool(t.unsafe_blocked) for t in traces),
        "segments_with_warned_command": sum(bool(t.unsafe_warned) for t in traces),
        "segments_with_injection_markers": sum(bool(t.injection_flags) for t in traces),
        **{f"rule:{r}": n for r, n in sorted(rules.items())},
    }


def tier_histogram_png(traces: Sequence[TieredTrace]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = tier_counts(traces)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=90)
    ax1.bar(list(counts), list(counts.values()), color=[_COLORS[t] for t in counts])
    ax1.set_title("segments per tier")
    for i, v in enumerate(counts.values()):
        ax1.text(i, v, str(v), ha="center", va="bottom", fontsize=9)
    ax2.hist([t.quality_score for t in traces] or [0.0], bins=20, range=(0, 1), color="#4062bb")
    for x in (0.40, 0.55, 0.75):
        ax2.axvline(x, color="#888", linestyle="--", linewidth=0.8)
    ax2.set_title("quality score")
    fig.tight_layout()
    return figure_png(fig)


def score_distribution_markdown(traces: Sequence[TieredTrace]) -> str:
    lines = [
        "| score | weight | min | p25 | median | p75 | max | mean |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for col in SCORE_COLUMNS:
        vals = sorted(getattr(t, col) for t in traces)
        if not vals:
            continue
        q = statistics.quantiles(vals, n=4) if len(vals) > 1 else [vals[0]] * 3
        w = f"{WEIGHTS[col]:.0%}" if col in WEIGHTS else "total"
        lines.append(
            f"| {col} | {w} | {vals[0]:.2f} | {q[0]:.2f} | {q[1]:.2f} | {q[2]:.2f} | {vals[-1]:.2f} | "
            f"{statistics.fmean(vals):.2f} |"
        )
    return "\n".join(lines)


def _cell(text: str, n: int = 80) -> str:
    text = " ".join((text or "").split())
    text = text.replace("|", "\\|")
    return text if len(text) <= n else text[: n - 1] + "…"


def examples_markdown(traces: Sequence[TieredTrace], k: int = 5) -> str:
    ranked = sorted(traces, key=lambda t: (t.quality_score, t.success_rate), reverse=True)
    header = [
        "| segment | tier | quality | success | verified | steps | prompt |",
        "|---|---|---|---|---|---|---|",
    ]

    def rows(items: Sequence[TieredTrace]) -> list[str]:
        return [
            f"| `{t.segment_id}` | {t.tier} | {t.quality_score:.2f} | {t.success_rate:.2f} | "
            f"{t.verification_passed} | {t.num_steps} | {_cell(t.prompt)} |"
            for t in items
        ]

    worst = list(reversed(ranked[-k:])) if len(ranked) > k else list(reversed(ranked))
    return "\n".join(["**Best**", "", *header, *rows(ranked[:k]), "", "**Worst**", "", *header, *rows(worst)])


def tier_report_markdown(traces: Sequence[TieredTrace], png: bytes | None = None) -> str:
    counts = tier_counts(traces)
    parts = ["| tier | segments |", "|---|---|", *(f"| {t} | {n} |" for t, n in counts.items())]
    overrides = sum(t.override is not None for t in traces)
    parts += ["", f"{len(traces)} segments, {overrides} with a manual override.", ""]
    safety = safety_counts(traces)
    parts += [
        f"Guardrails: {safety['segments_with_blocked_command']} segments ran a blocked command (tier failed), "
        f"{safety['segments_with_warned_command']} a warned one, {safety['segments_with_injection_markers']} "
        "saw prompt-injection markers in a tool output"
        + (
            "; rules: " + ", ".join(f"{k[5:]} {v}" for k, v in safety.items() if k.startswith("rule:"))
            if any(k.startswith("rule:") for k in safety)
            else ""
        )
        + ".",
        "",
    ]
    if png is not None:
        parts += [png_markdown(png, "tier histogram"), ""]
    parts += [
        "**Score distributions**",
        "",
        score_distribution_markdown(traces),
        "",
        examples_markdown(traces),
    ]
    return "\n".join(parts)
