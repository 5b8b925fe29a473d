"""Bounded parallelism for gates, rollouts and evaluations: at most N sandboxes alive at once.

Each item's function opens (and closes) its own ``Sandbox``; the pool only bounds how many run together. Threads
suffice: the work is waiting on containers, not Python CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from pydantic import BaseModel

from bashgym_assets.sandbox.sandbox import install_exit_cleanup, reap_once

T = TypeVar("T")
R = TypeVar("R")


class PoolError(RuntimeError):
    """Some items raised. ``errors`` maps item index -> exception; ``results`` holds the others (None there)."""

    def __init__(self, errors: dict[int, BaseException], results: list) -> None:
        first = next(iter(errors.items()))
        super().__init__(
            f"{len(errors)} of {len(results)} items failed; first (item {first[0]}): "
            f"{type(first[1]).__name__}: {first[1]}"
        )
        self.errors = errors
        self.results = results


class Outcome(BaseModel, Generic[R]):
    """One item's result or the error it raised (``map_outcomes``)."""

    index: int
    value: R | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class SandboxPool:
    """Run a function over items with at most ``max_parallel`` at a time; results keep the input order."""

    def __init__(self, max_parallel: int | None = None) -> None:
        self.max_parallel = max(1, max_parallel or (os.cpu_count() or 1))
        reap_once()  # (every Sandbox.start does too; here it happens before the first item waits)
        install_exit_cleanup()  # the pool's items open their sandboxes in worker threads

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Every item's result in input order. Every item runs even if some raise; then ``PoolError`` is raised
        (it carries the per-item exceptions and the other results). On KeyboardInterrupt (Ctrl-C, a stop: Dagster's
        interrupt too) the items not yet started are cancelled and the interrupt propagates at once: the running
        ones end in their threads, each closing its own sandbox, and a process that exits first removes what is
        still open (its exit hook). Before, a stopped gate waited for its running items, up to their timeouts.
        """
        items = list(items)
        results: list = [None] * len(items)
        errors: dict[int, BaseException] = {}
        ex = ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="sandbox-pool")
        futures = [ex.submit(fn, item) for item in items]
        try:
            for i, fut in enumerate(futures):
                try:
                    results[i] = fut.result()
                except Exception as exc:  # noqa: BLE001 - collected per item, raised together below
                    errors[i] = exc
        except BaseException:
            ex.shutdown(wait=False, cancel_futures=True)
            raise
        ex.shutdown(wait=True)
        if errors:
            raise PoolError(errors, results)
        return results

    def map_outcomes(self, fn: Callable[[T], R], items: Iterable[T]) -> list[Outcome]:
        """Like ``map`` but never raises for an item: each position holds its value or its error text."""

        def safe(pair: tuple[int, T]) -> Outcome:
            index, item = pair
            try:
                return Outcome(index=index, value=fn(item))
            except Exception as exc:  # noqa: BLE001
                return Outcome(index=index, error=f"{type(exc).__name__}: {exc}")

        return self.map(safe, list(enumerate(items)))
