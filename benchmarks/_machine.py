"""The machine line every benchmark report starts with (shared so the reports read alike)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (``platform.processor()`` is empty on most Linux builds)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _cpu_flags() -> set[str]:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def has_bf16_matmul() -> bool:
    """AVX-512 with its BF16 extension: where bfloat16 training is 1.75x float32 on this CPU (without it, slower)."""
    flags = _cpu_flags()
    return "avx512f" in flags and "avx512_bf16" in flags


def vector_units() -> str:
    """What decides CPU matmul speed here: AVX-512 and its BF16 extension (bf16 training is 1.75x fp32 with them
    and slower than fp32 without), or only AVX2. Two "2-core AMD EPYC" machines differ by 2x on that alone."""
    flags = _cpu_flags()
    if "avx512f" in flags:
        return "AVX-512 with BF16" if has_bf16_matmul() else "AVX-512, no BF16"
    if "avx2" in flags:
        return "AVX2, no AVX-512"
    return "no AVX2" if flags else "vector units unknown"


def machine(docker: bool = False) -> str:
    """OS, CPU model, cores, vector units, memory and Python (and the Docker engine's version when asked): what a
    reader needs to compare two reports. The one machine line every benchmark report starts with."""
    mem = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kb = int(meminfo.read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    line = (
        f"{platform.system()} {platform.release()}, {cpu_model()}, {os.cpu_count()} cores ({vector_units()}){mem}, "
        f"Python {platform.python_version()}"
    )
    if docker:
        engine = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        line += f", Docker {engine or '?'}"
    return line


def append_report(path: Path, title: str, script: str, report: str) -> None:
    """Append one run's report to ``benchmarks/results/<name>.md``, starting the file with its title if new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(f"# {title}\n\nProduced by `benchmarks/{script}` (see its docstring).\n")
    with path.open("a") as fh:
        fh.write(report if report.endswith("\n") else report + "\n")
