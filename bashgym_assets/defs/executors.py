"""The GPU code location's executor: in-process by default, dagster-docker's docker_executor when configured."""

from __future__ import annotations

import dagster as dg

from bashgym_assets.config import get_settings


def gpu_executor() -> dg.ExecutorDefinition:
    """``BASHGYM_GPU_EXECUTOR=in_process`` (default) or ``docker``."""
    kind = get_settings().gpu_executor
    if kind == "in_process":
        return dg.in_process_executor
    raise ValueError(f"BASHGYM_GPU_EXECUTOR={kind!r} is not supported yet; use 'in_process'")
