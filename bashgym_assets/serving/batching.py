"""The serving scheduler: continuous batching over the engine's decoder, with cancellation.

One thread owns a ``ContinuousDecoder`` (``inference.continuous``, the evaluator's) and loops: take what arrived
(new requests, cancellations), run one decode step under the engine's lock, hand each request its new text
(``on_delta``: what a stream sends) and resolve the requests whose reply ended. A new request joins the running
batch at the next step, and a reply leaves it as soon as it ends, so one long ``max_tokens`` holds nobody back;
a request whose client went away is ``cancel``-led and leaves at the next step (its slot and its share of every
step go to the others). Thread-based, so the async HTTP handlers (``asyncio.wrap_future``) and the router's
worker threads (``.result()``) can both submit.

``max_wait_s``: when the scheduler is idle, the first request waits at most this long for company, so requests
sent together are prefilled and start decoding together. Models the decoder does not support fall back to one
``ChatEngine.generate`` per batch of queued requests (up to ``max_batch``), whose text arrives in one delta.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from bashgym_assets.serving.engine import ChatEngine, Decoding, Delta, Generation, GenerationRequest

DeltaSink = Any  # Callable[[Delta], None], called on the scheduler thread: keep it quick


@dataclass
class BatcherStats:
    """Counters since the scheduler was made (``/health`` shows them)."""

    submitted: int = 0
    finished: int = 0
    cancelled: int = 0  # requests cancelled (their client went away) before their reply ended
    failed: int = 0
    decode_steps: int = 0


@dataclass
class _Ticket:
    request: GenerationRequest
    future: Future
    request_id: str
    on_delta: DeltaSink = None
    key: int = 0
    decoding: Decoding | None = None
    submitted: float = field(default_factory=time.monotonic)


class Batcher:
    def __init__(
        self, engine: ChatEngine, max_batch: int = 16, max_wait_s: float = 0.02, speculate: bool = True
    ) -> None:
        self.engine = engine
        self.max_batch = max(1, max_batch)
        self.max_wait_s = max(0.0, max_wait_s)
        self.speculate = speculate  # the decoder's prompt-lookup drafting while few rows decode (greedy rows)
        self.batch_sizes: Counter[int] = Counter()  # decode steps by the number of rows they decoded
        self.stats = BatcherStats()
        # (event, request id, completion tokens) in the order they happened: admitted, finished, cancelled, failed
        self.events: deque[tuple[str, str, int]] = deque(maxlen=2000)
        self.decoder: Any = None
        self._inbox: queue.Queue[tuple[str, _Ticket] | None] = queue.Queue()
        self._tickets: dict[Future, _Ticket] = {}
        self._lock = threading.Lock()
        self._keys = itertools.count()
        self._thread: threading.Thread | None = None

    # ---- the client side (any thread) ----------------------------------------------------------------------------
    def start(self) -> Batcher:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="bashgym-batcher", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._inbox.put(None)
            self._thread.join(timeout=60)
            self._thread = None

    def submit(
        self, request: GenerationRequest, on_delta: DeltaSink = None, request_id: str | None = None
    ) -> Future[Generation]:
        """Queue a request; the future resolves with its ``Generation``. ``on_delta(Delta)`` (optional) gets its
        text as it is generated, on the scheduler thread."""
        fut: Future[Generation] = Future()
        key = next(self._keys)
        ticket = _Ticket(
            request=request, future=fut, request_id=request_id or f"req-{key}", on_delta=on_delta, key=key
        )
        with self._lock:
            self._tickets[fut] = ticket
            self.stats.submitted += 1
        self._inbox.put(("submit", ticket))
        return fut

    def cancel(self, future: Future) -> bool:
        """Stop generating for this request (its client went away): it leaves the batch at the next step and its
        future resolves with ``finish_reason`` ``cancelled``. False when it had already ended."""
        with self._lock:
            ticket = self._tickets.get(future)
        if ticket is None or future.done():
            return False
        self._inbox.put(("cancel", ticket))
        return True

    def generate(self, request: GenerationRequest) -> Generation:
        """Blocking: one request through the scheduler (it shares the decode steps with whatever else runs)."""
        return self.submit(request).result()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._tickets)

    # ---- the scheduler thread ------------------------------------------------------------------------------------
    def _take(self, block: bool) -> tuple[list[tuple[str, _Ticket]], bool]:
        """What arrived: blocking for the first item when idle (then up to ``max_wait_s`` for company)."""
        items: list[tuple[str, _Ticket]] = []
        stopping = False

        def add(item: tuple[str, _Ticket] | None) -> None:
            nonlocal stopping
            if item is None:
                stopping = True
            else:
                items.append(item)

        if block:
            add(self._inbox.get())
            deadline = time.monotonic() + self.max_wait_s
            while not stopping and len(items) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                try:
                    add(self._inbox.get(timeout=left))
                except queue.Empty:
                    break
        while not stopping:
            try:
                add(self._inbox.get_nowait())
            except queue.Empty:
                break
        return items, stopping

    def _resolve(self, ticket: _Ticket, gen: Generation, event: str) -> None:
        with self._lock:
            self._tickets.pop(ticket.future, None)
            if event == "finished":
                self.stats.finished += 1
            elif event == "cancelled":
                self.stats.cancelled += 1
            else:
                self.stats.failed += 1
        self.events.append((event, ticket.request_id, gen.completion_tokens))
        if not ticket.future.done():
            ticket.future.set_result(gen)
        if ticket.on_delta is not None and event != "cancelled" and (gen.error or ticket.decoding is None):
            self._tell(
                ticket,
                Delta(
                    text="" if gen.error else gen.text,
                    logprobs=gen.logprobs or [],
                    finish_reason=gen.finish_reason,
                    generation=gen,
                ),
            )

    @staticmethod
    def _tell(ticket: _Ticket, delta: Delta) -> None:
        with contextlib.suppress(Exception):  # a broken sink must not stop the scheduler
            ticket.on_delta(delta)

    def _run(self) -> None:
        try:
            with self.engine.lock:
                reason = self.engine.continuous_reason()
        except Exception as exc:  # noqa: BLE001 - the batched path reports its own failures
            reason = f"{type(exc).__name__}: {exc}"
        if reason is not None:
            self._run_batches()
            return
        active: dict[int, _Ticket] = {}
        stopping = False
        while not stopping:
            items, stopping = self._take(block=not active)
            for kind, ticket in items:
                if kind == "submit":
                    self._admit(ticket, active)
                elif ticket.key in active:
                    del active[ticket.key]
                    self._cancel(ticket)
            if stopping or not active:
                continue
            self._step(active)
        for ticket in list(active.values()):
            self._cancel(ticket, event="failed", why="the server stopped")
        self._drain_on_stop()

    def _admit(self, ticket: _Ticket, active: dict[int, _Ticket]) -> None:
        if not ticket.future.set_running_or_notify_cancel():  # cancelled before it started
            with self._lock:
                self._tickets.pop(ticket.future, None)
                self.stats.cancelled += 1
            self.events.append(("cancelled", ticket.request_id, 0))
            return
        prompt = self.engine.prompt_of(ticket.request)
        if isinstance(prompt, Generation):
            self._resolve(ticket, prompt, "failed")
            return
        if self.decoder is None:
            with self.engine.lock:
                self.decoder = self.engine.decoder(self.max_batch, speculate=self.speculate)
        ticket.decoding = Decoding(self.engine, ticket.request, prompt, stream=ticket.on_delta is not None)
        ticket.decoding.submit(self.decoder, ticket.key)
        active[ticket.key] = ticket
        self.events.append(("admitted", ticket.request_id, 0))

    def _cancel(self, ticket: _Ticket, event: str = "cancelled", why: str = "the client went away") -> None:
        d = ticket.decoding
        if self.decoder is not None:
            self.decoder.cancel(ticket.key)
        gen = Generation(
            text=d.text if d else "",
            finish_reason="cancelled" if event == "cancelled" else "error",
            prompt_tokens=len(d.prompt) if d else 0,
            completion_tokens=len(d.body) if d else 0,
            error=f"{event}: {why}",
            error_code=event,
        )
        self._resolve(ticket, gen, event)

    def _step(self, active: dict[int, _Ticket]) -> None:
        decoder = self.decoder
        before = decoder.stats.row_steps
        try:
            with self.engine.lock:
                ended = {key for key, _, _ in decoder.step()}
        except Exception as exc:  # noqa: BLE001 - every request in flight gets the failure, none hangs
            self.decoder = None
            for ticket in list(active.values()):
                ticket.decoding = None
                self._resolve(
                    ticket,
                    Generation(
                        error=f"generation failed: {type(exc).__name__}: {exc}",
                        error_code="generation_failed",
                        finish_reason="error",
                    ),
                    "failed",
                )
            active.clear()
            return
        rows = decoder.stats.row_steps - before
        if rows:
            self.batch_sizes[rows] += 1
            self.stats.decode_steps += 1
        for key, ticket in list(active.items()):
            d = ticket.decoding
            assert d is not None  # _admit set it; only a failed step clears it, and that empties ``active``
            delta = d.advance(ended=key in ended)
            if delta is not None and ticket.on_delta is not None:
                self._tell(ticket, delta)
            if d.done:
                if d.cut:  # a stop string: the decoder would go on
                    decoder.cancel(key)
                del active[key]
                self._resolve(ticket, d.result(), "finished")

    def _drain_on_stop(self) -> None:
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if item is not None and item[0] == "submit" and not item[1].future.done():
                self._resolve(
                    item[1],
                    Generation(
                        error="the server stopped", error_code="server_stopped", finish_reason="error"
                    ),
                    "failed",
                )

    def _run_batches(self) -> None:
        """The fallback for models the decoder does not support: queued requests, one ``generate`` per batch."""
        stopping = False
        while not stopping:
            items, stopping = self._take(block=True)
            batch = []
            for kind, ticket in items:
                if kind != "submit":
                    continue  # a batch runs to its end: nothing to cancel in it
                if ticket.future.set_running_or_notify_cancel():
                    batch.append(ticket)
            for start in range(0, len(batch), self.max_batch):
                chunk = batch[start : start + self.max_batch]
                self.batch_sizes[len(chunk)] += 1
                try:
                    results = self.engine.generate([t.request for t in chunk])
                except Exception as exc:  # noqa: BLE001 - every waiting request gets the failure, none hangs
                    results = [
                        Generation(
                            error=f"{type(exc).__name__}: {exc}",
                            error_code="generation_failed",
                            finish_reason="error",
                        )
                        for _ in chunk
                    ]
                for ticket, result in zip(chunk, results, strict=True):
                    self._resolve(ticket, result, "failed" if result.error else "finished")
        self._drain_on_stop()
