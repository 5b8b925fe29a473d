"""Every use of Dagster's private modules (``dagster._core``, ``dagster._utils``) and private attributes, in one
place. Checked against **dagster 1.13.27** (``CHECKED_AGAINST``).

Dagster's public API (``import dagster as dg``) does not cover three things this project needs, so they come from
its internals, which change between releases without notice:

- a run of the location's own asset job, created and executed in this process with the origins the UI matches
  runs against (``demo.AssetJobRunner``: ``execute_in_process`` runs belong to no code location, and the UI does
  not show or re-execute them);
- the per-run pool claims of a step (``InstanceConcurrencyContext``), replaced while a run executes so that a step
  waiting for the ``gpu`` pool frees dead runs' slots and answers SIGTERM (``defs.executors``);
- the interrupt Dagster raises in a step on SIGTERM / SIGINT, told apart from a failure (``defs.executors``,
  ``defs.training``).

Nothing else imports ``dagster._*`` (tests/test_architecture.py checks it, and that the installed Dagster is the
version named here): upgrading Dagster means re-reading this file against the new release, then moving
``CHECKED_AGAINST``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from dagster import DagsterInstance, DagsterRun
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.execution.api import execute_run
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.executor.in_process import InProcessExecutor
from dagster._core.remote_origin import RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from dagster._core.workspace.load import location_origin_from_module_name, location_origins_from_yaml_paths
from dagster._utils.interrupts import pop_captured_interrupt

CHECKED_AGAINST = "1.13.27"

__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "CHECKED_AGAINST",
    "DagsterExecutionInterruptedError",
    "PoolClaims",
    "ReconstructableRepository",
    "RemoteJobOrigin",
    "RemoteRepositoryOrigin",
    "execute_run",
    "is_in_process",
    "location_origin_from_module_name",
    "location_origins_from_yaml_paths",
    "partition_loading_context",
    "pop_captured_interrupt",
    "pool_claims_made_by",
]


class PoolClaims(InstanceConcurrencyContext):
    """Dagster's per-run pool claims, with the two private parts a subclass needs given public names."""

    @property
    def instance(self) -> DagsterInstance:
        return self._instance

    def ask_again_now(self, step_key: str) -> None:
        """A blocked step's next claim at once: Dagster waits a growing pause (up to 15 s) between claims."""
        self._pending_timeouts[step_key] = 0.0


def is_in_process(executor: Any) -> bool:
    """Whether ``executor`` runs the steps in this process (Dagster's in-process executor)."""
    return isinstance(executor, InProcessExecutor)


@contextlib.contextmanager
def pool_claims_made_by(
    executor: Any, make: Callable[[DagsterInstance, DagsterRun], InstanceConcurrencyContext]
) -> Iterator[bool]:
    """While the block runs, the module of ``executor``'s class builds its runs' pool claims with ``make`` instead
    of Dagster's ``InstanceConcurrencyContext`` (each executor module takes the class by that name, and builds
    one per run). Yields False, changing nothing, for an executor whose module does not take it so."""
    module = sys.modules[type(executor).__module__]
    if getattr(module, "InstanceConcurrencyContext", None) is not InstanceConcurrencyContext:
        yield False
        return
    module.InstanceConcurrencyContext = make  # type: ignore[attr-defined]
    try:
        yield True
    finally:
        module.InstanceConcurrencyContext = InstanceConcurrencyContext  # type: ignore[attr-defined]
