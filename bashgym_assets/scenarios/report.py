"""Small renderers for asset metadata (markdown tables, an embedded PNG bar chart); no Dagster here."""

from __future__ import annotations

from collections.abc import Sequence

from bashgym_assets.plots import figure_markdown


def bar_chart_md(labels: Sequence[str], series: dict[str, Sequence[float]], title: str, xlabel: str) -> str:
    """Horizontal grouped bars as a markdown image with the PNG inlined (shows in the Dagster UI as is)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, len(series))
    height = 0.8 / n
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * max(4, len(labels)) + 1), dpi=90)
    for i, (name, values) in enumerate(series.items()):
        ax.barh([y + i * height for y in range(len(labels))], list(values), height=height, label=name)
    ax.set_yticks([y + height * (n - 1) / 2 for y in range(len(labels))], list(labels))
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    if n > 1:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return figure_markdown(fig, title)
