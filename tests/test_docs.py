"""The README's first screen and the timings in README/BENCHMARKS: short, and every timing names its machine.

A timing without its machine misleads: the same `make demo` took 3 min 32 s on a 2-core EPYC with AVX-512 BF16 and
8 min 5 s on one without. These checks read the documents as text; they do not judge the numbers.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_SCREEN_MAX = 2500

# A measured time or rate: "3 min 32 s", "16 s", "5.6 tasks/s", "391 tokens/s".
_TIMING = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|min|tokens/s|tasks/s)\b")
# What names a machine: its cores, its CPU or GPU model, or "the same machine" as a run named before it.
_MACHINE = re.compile(r"\b(?:\d-core|\d+ cores|EPYC|Xeon|H100|H200|GPU machine|same machine)\b", re.I)
# Sections whose times are configured limits (timeouts, intervals), not measurements.
CONFIGURED_LIMITS_ONLY = {
    "### Security: the threat model",
    "## Serving and routing: putting the champion to work",
}


def first_screen(text: str) -> str:
    """What a reader sees before the first ``##`` heading."""
    match = re.search(r"^## ", text, re.M)
    return text[: match.start()] if match else text


def sections_with_unnamed_timings(text: str) -> list[str]:
    """Headings of sections (## and ###) that quote a timing but name no machine, a ### section inheriting the
    machine its ## parent names before its first ### child."""
    unnamed = []
    parent_names_machine = False
    for part in re.split(r"\n(?=#{2,3} )", text):
        title = part.split("\n", 1)[0]
        if title.startswith("## "):
            parent_names_machine = bool(_MACHINE.search(part.split("\n### ")[0]))
        if title in CONFIGURED_LIMITS_ONLY or not _TIMING.search(part) or _MACHINE.search(part):
            continue
        if title.startswith("### ") and parent_names_machine:
            continue
        unnamed.append(title)
    return unnamed


def test_the_readme_first_screen_is_short_and_names_its_machine() -> None:
    screen = first_screen((ROOT / "README.md").read_text())
    assert len(screen) < FIRST_SCREEN_MAX, len(screen)
    commands = re.search(r"```bash\n(.*?)```", screen, re.S)
    assert commands, "the first screen opens with the two commands"
    assert re.findall(r"^make (\w+)", commands.group(1), re.M) == ["demo", "test"]
    assert re.search(r"\d-core", screen), "the machine's cores"
    assert re.search(r"AMD EPYC|Intel|Xeon", screen), "the CPU model"
    assert re.search(r"AVX-512|AVX2", screen), "its vector units"
    assert "|" in screen, "one table of what works"


def test_every_timing_in_readme_and_benchmarks_names_its_machine() -> None:
    for name in ("README.md", "BENCHMARKS.md"):
        assert sections_with_unnamed_timings((ROOT / name).read_text()) == [], name


def test_the_timing_check_catches_an_unnamed_timing() -> None:
    doc = "# t\n\n## Runs\n\nThe demo took 3 min 32 s.\n\n## Named\n\nOn a 2-core AMD EPYC it took 8 min.\n"
    assert sections_with_unnamed_timings(doc) == ["## Runs"]
    child = "## Parent\n\nMachine: 2-core AMD EPYC.\n\n### Child\n\nIt took 12 s.\n"
    assert sections_with_unnamed_timings(child) == []


def test_benchmark_reports_name_the_vector_units() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _machine
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    line = _machine.machine()
    assert f"{_machine.cpu_model()}" in line
    assert re.search(
        r"\(AVX-512 with BF16|AVX-512, no BF16|AVX2, no AVX-512|no AVX2|vector units unknown\)", line
    )
    flags = set(Path("/proc/cpuinfo").read_text().split()) if Path("/proc/cpuinfo").exists() else set()
    if "avx512f" in flags:
        assert "AVX-512" in line
    elif "avx2" in flags:
        assert "AVX2, no AVX-512" in line
