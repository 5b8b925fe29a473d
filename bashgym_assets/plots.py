"""Asset metadata rendering: markdown tables, and matplotlib figures as PNG embedded in markdown (the Dagster UI
shows both inline)."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display on servers and in tests)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig: Any) -> bytes:
    """The figure as PNG bytes; the figure is closed (pyplot keeps every open figure otherwise)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    pyplot().close(fig)
    return buf.getvalue()


def png_markdown(png: bytes | Path, alt: str) -> str:
    """A PNG (bytes or a file) as a markdown image with a data URI."""
    data = Path(png).read_bytes() if isinstance(png, Path) else png
    return f"![{alt}](data:image/png;base64,{base64.b64encode(data).decode()})"


def figure_markdown(fig: Any, alt: str) -> str:
    return png_markdown(figure_png(fig), alt)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table; cells are escaped (``|``) and kept on one line."""

    def cell(v: object) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
