"""How loaded the machine that runs the sandboxes is: what tells a timer that fired because the machine was busy
from one that fired because the task is slow or waits forever (the gate's verdicts, ``scenarios.gate``).

Machine-wide counters are read at the start and at the end of a step, so a reading covers exactly that step: the
kernel's pressure stall information (``/proc/pressure/cpu`` and ``io``: the share of the time some task waited for
a CPU, or for I/O), the CPUs' busy share (``/proc/stat``) and the load average (``os.getloadavg``, recorded: a
one-minute average lags a step of a few seconds). A container's own CPU time is ``Sandbox.cpu_time_s``. What a
host cannot tell (no PSI, not Linux) is None and the rule falls back to what it can.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

# A step ran on a loaded machine when some task waited for a CPU (or for I/O) at least this share of its time.
STALL_LOADED = 0.3
# Without PSI: the CPUs were this busy and the load average above the cores.
BUSY_LOADED = 0.9


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity: a container's or a taskset's cores), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _stall_us(kind: str) -> int | None:
    """Microseconds some task waited on ``kind`` (cpu, io) since boot: PSI's ``some ... total=``."""
    try:
        for line in Path(f"/proc/pressure/{kind}").read_text().splitlines():
            if line.startswith("some "):
                return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot (``/proc/stat``'s ``cpu`` line; idle and iowait idle)."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    total = sum(fields[:8])  # guest time is already in user/nice
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return total - idle, total


@dataclass(frozen=True)
class Counters:
    """The machine's cumulative counters at one moment (``counters()``); two of them make a ``LoadReading``."""

    at: float  # time.monotonic()
    ticks: tuple[int, int] | None
    cpu_stall_us: int | None
    io_stall_us: int | None


def counters() -> Counters:
    return Counters(time.monotonic(), _cpu_ticks(), _stall_us("cpu"), _stall_us("io"))


class LoadReading(BaseModel):
    """The machine over one window: how long, the cores, the load average at its end, and over the window itself
    the CPUs' busy share and the share of the time some task waited for a CPU / for I/O."""

    window_s: float
    cores: int
    load_average: tuple[float, float, float] | None = None
    cpu_busy: float | None = None
    cpu_stall: float | None = None
    io_stall: float | None = None

    @property
    def loaded(self) -> bool:
        """Whether work on this machine waited for a CPU (or the disk) for a good share of the window."""
        if self.cpu_stall is not None:
            return self.cpu_stall >= STALL_LOADED or (self.io_stall or 0.0) >= STALL_LOADED
        busy = self.cpu_busy or 0.0
        return busy >= BUSY_LOADED and self.load_average is not None and self.load_average[0] > self.cores

    @property
    def io_bound(self) -> bool:
        return (self.io_stall or 0.0) >= STALL_LOADED

    def describe(self) -> str:
        """One line for a verdict's evidence, e.g. ``load average 7.9 on 2 cores; over these 6.1 s tasks waited
        for a CPU 82% of the time, for I/O 3%, CPUs 100% busy``."""
        parts = []
        if self.load_average is not None:
            parts.append(f"load average {self.load_average[0]:.1f} on {self.cores} core(s)")
        else:
            parts.append(f"{self.cores} core(s)")
        over = []
        if self.cpu_stall is not None:
            over.append(f"tasks waited for a CPU {self.cpu_stall:.0%} of the time")
        if self.io_stall is not None:
            over.append(f"for I/O {self.io_stall:.0%}")
        if self.cpu_busy is not None:
            over.append(f"CPUs {self.cpu_busy:.0%} busy")
        if over:
            parts.append(f"over these {self.window_s:.1f} s " + ", ".join(over))
        return "; ".join(parts)


def _share(a: int | None, b: int | None, span: float) -> float | None:
    if a is None or b is None or span <= 0:
        return None
    return round(max(0.0, min(1.0, (b - a) / span)), 3)


def reading(since: Counters, until: Counters | None = None) -> LoadReading:
    """The machine between two ``counters()`` (``until`` default: now)."""
    until = until or counters()
    window = max(until.at - since.at, 1e-6)
    busy = None
    if since.ticks is not None and until.ticks is not None:
        total = until.ticks[1] - since.ticks[1]
        busy = (until.ticks[0] - since.ticks[0]) / total if total > 0 else None
    try:
        la = os.getloadavg()
        load_average = (round(la[0], 2), round(la[1], 2), round(la[2], 2))
    except OSError:
        load_average = None
    return LoadReading(
        window_s=round(window, 3),
        cores=usable_cores(),
        load_average=load_average,
        cpu_busy=None if busy is None else round(max(0.0, min(1.0, busy)), 3),
        cpu_stall=_share(since.cpu_stall_us, until.cpu_stall_us, window * 1e6),
        io_stall=_share(since.io_stall_us, until.io_stall_us, window * 1e6),
    )


def sample(window_s: float = 1.0) -> LoadReading:
    """The machine over the next ``window_s`` seconds (sleeps that long)."""
    start = counters()
    time.sleep(window_s)
    return reading(start)
