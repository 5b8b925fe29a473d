"""The machine line every benchmark report starts with (shared so the reports read alike)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def machine() -> str:
    """OS, CPU model, cores, memory and Python: what a reader needs to compare two reports."""
    model = "?"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        model = names[0] if names else model
    mem = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kb = int(meminfo.read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    return (
        f"{platform.system()} {platform.release()}, {model}, {os.cpu_count()} cores{mem}, Python "
        f"{platform.python_version()}"
    )


def append_report(path: Path, title: str, script: str, report: str) -> None:
    """Append one run's report to ``benchmarks/results/<name>.md``, starting the file with its title if new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(f"# {title}\n\nProduced by `benchmarks/{script}` (see its docstring).\n")
    with path.open("a") as fh:
        fh.write(report if report.endswith("\n") else report + "\n")
