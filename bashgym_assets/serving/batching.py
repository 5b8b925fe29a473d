"""A small batching queue: requests that arrive together become one ``ChatEngine.generate`` call.

The first request of a batch waits at most ``max_wait_s`` for company (or until ``max_batch`` are queued); while a
batch generates, new arrivals queue and form the next one. On a CPU as on a GPU, one forward pass over N rows costs
far less than N passes (``benchmarks/bench_serving.py``), so concurrent clients share the work instead of queueing
behind each other. Thread-based, so both the async HTTP handlers (``asyncio.wrap_future``) and the router's worker
threads (``.result()``) can submit.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from concurrent.futures import Future

from bashgym_assets.serving.engine import ChatEngine, Generation, GenerationRequest


class Batcher:
    def __init__(self, engine: ChatEngine, max_batch: int = 16, max_wait_s: float = 0.02) -> None:
        self.engine = engine
        self.max_batch = max(1, max_batch)
        self.max_wait_s = max(0.0, max_wait_s)
        self.batch_sizes: Counter[int] = Counter()  # how many batches of each size ran (health endpoint)
        self._queue: queue.Queue[tuple[GenerationRequest, Future] | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self) -> Batcher:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="bashgym-batcher", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=60)
            self._thread = None

    def submit(self, request: GenerationRequest) -> Future[Generation]:
        fut: Future[Generation] = Future()
        self._queue.put((request, fut))
        return fut

    def generate(self, request: GenerationRequest) -> Generation:
        """Blocking: one request through the queue (shares a batch with whatever else is waiting)."""
        return self.submit(request).result()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.max_wait_s
            stopping = False
            while len(batch) < self.max_batch:
                left = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            live = [(r, f) for r, f in batch if f.set_running_or_notify_cancel()]
            if live:
                self.batch_sizes[len(live)] += 1
                try:
                    results = self.engine.generate([r for r, _ in live])
                except Exception as exc:  # noqa: BLE001 - every waiting request gets the failure, none hangs
                    results = [Generation(error=f"{type(exc).__name__}: {exc}", error_code="generation_failed",
                                          finish_reason="error") for _ in live]
                for (_, fut), result in zip(live, results, strict=True):
                    fut.set_result(result)
            if stopping:
                return
