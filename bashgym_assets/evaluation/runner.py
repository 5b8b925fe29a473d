"""The behavioural evaluation: a model dropped, with no scaffold, into held-out scenarios in real sandboxes.

A local model is batched continuously (``inference.continuous``; greedy, or sampled with a generator per reply as the
student's attempts are): each episode's prompt joins the running batch as soon as its last command has run, and
each reply leaves it as soon as it ends, so no episode waits for the slowest reply of a turn; its command then runs
in its sandbox (a thread pool) while the others go on decoding. Any other operator (a litellm model, the
reference, a local model the decoder does not support) advances in lockstep: each turn, the
replies for every live episode come from ONE ``Operator.replies`` call (a local model generates them as one
left-padded batch), then each reply runs in its own sandbox in parallel. Either way finished episodes drop out
while queued ones take their place (at most ``max_live`` sandboxes at once). The turn logic is
``rollout.episode.EpisodeDriver``, the same one rollouts use, and the render is ``rollout.transcript``'s, so a
model is evaluated in exactly the format it was trained on. The check runs as root on the final state; what the
model claims is never consulted.

Nothing finished is lost: each scored episode goes to an ``EpisodeSink`` at once (``bashgym eval``'s is a
``LakeEpisodeWriter``: ``eval_episodes[eval_id]`` rewritten atomically every few seconds, so a killed evaluation, even
``kill -9``, leaves its finished episodes in the lake). An interrupt (Ctrl-C, or ``stopping.on_signals``' ``Stopped``
on SIGTERM) leaves at once: the sink is flushed, the pools are given up without waiting for the commands they run,
and the sandboxes are removed. An episode's time cap (``EvalSettings.time_cap``) counts its sandbox time and the
model time charged to its own replies: a continuously batched local model charges each row its share of every
decode step, so an episode is not charged for waiting on the 31 other rows of a batch, while one decoded alone on
a crawling machine is charged every second; a lockstep turn charges each episode the whole call (``wall``: the
wall clock, as a user waiting for the model would count it). A reply still being generated when the cap passes is
given up (continuous batching takes it out of the batch) and the episode ends as ``time_cap`` (failure class
``timeout``).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from bashgym_assets.evaluation.failures import with_detail
from bashgym_assets.evaluation.metrics import (
    EVAL_EPISODE_SCHEMA,
    SANDBOX_ERROR,
    SETUP_FAILED,
    EvalEpisode,
    ModelSummary,
    classify,
    reply_kinds,
    summarize,
)
from bashgym_assets.rollout import tracing
from bashgym_assets.rollout.episode import EVAL_LIMITS, Episode, EpisodeLimits, limit_field
from bashgym_assets.rollout.live import LiveEpisode, apply_reply, check_and_close, open_episode
from bashgym_assets.rollout.operators import Operator, Reply
from bashgym_assets.rollout.transcript import COMMAND, initial_messages
from bashgym_assets.scenarios.bundle import ScenarioBundle


class EvalSettings(BaseModel):
    """How an evaluation runs: caps per episode, samples per scenario, how many sandboxes live at once. The one
    definition the evaluator, ``benchmark_results``' run config (``defs.evaluation.EvalRunConfig``) and the
    options of ``bashgym eval`` (``evaluation.cli``) share: a field added here is in all three."""

    samples: int = Field(
        default=1, description="episodes per scenario and model (pass@k needs temperature > 0)"
    )
    max_turns: int = limit_field(EVAL_LIMITS, "max_turns")
    episode_timeout_s: float = limit_field(EVAL_LIMITS, "episode_timeout_s")
    command_timeout_s: float = limit_field(EVAL_LIMITS, "command_timeout_s")
    check_timeout_s: float = limit_field(EVAL_LIMITS, "check_timeout_s")
    max_live: int = Field(default=40, description="sandboxes alive at once")
    setup_workers: int = Field(default=4, description="threads starting sandboxes (and running setups)")
    # The failure class is already decided by then, and each such reply costs a whole token budget of generation.
    max_unusable_in_a_row: int = limit_field(EVAL_LIMITS, "max_unusable_in_a_row")
    continuous: bool = Field(
        default=True,
        description="continuous batching of a local model: each reply leaves and each next prompt joins the "
        "running batch (else lockstep turns, all live episodes decoded as one batch)",
    )
    max_rows: int = Field(default=32, description="continuous batching: rows a decode step")
    time_cap: Literal["share", "wall"] = Field(
        default="share",
        description="what an episode's time cap counts: share = its sandbox time and the model time charged to its "
        "own replies (a batch's decode steps divided among its rows); wall = the wall clock, waiting for the batch "
        "included (under load 29 of 48 episodes of a study evaluation ended at the cap after 1-2 turns)",
    )

    def limits(self) -> EpisodeLimits:
        return EpisodeLimits(
            max_turns=self.max_turns,
            episode_timeout_s=self.episode_timeout_s,
            command_timeout_s=self.command_timeout_s,
            check_timeout_s=self.check_timeout_s,
            max_unusable_in_a_row=self.max_unusable_in_a_row,
        )


class EvalResult(BaseModel):
    """One model's episodes and their summary."""

    summary: ModelSummary
    episodes: list[EvalEpisode]


Progress = Callable[[str], None]


def _close(
    job: LiveEpisode, eval_id: str, label: str, model_ref: str, sampling: str, check_timeout_s: float
) -> EvalEpisode:
    """Run the check on the final state (if the episode got that far), remove the container, score."""
    episode = job.driver.finish() if job.driver else Episode(messages=initial_messages(job.bundle))
    verified = check_and_close(job, check_timeout_s)
    if job.sandbox_error:
        episode.end_reason, episode.error = SANDBOX_ERROR, job.sandbox_error
    lines = job.driver.lines if job.driver else []
    # the shell's verdict on each reply (a copied prompt banner answers 127): the driver records one turn per line
    codes = [t.exit_code for t in episode.turns] if len(episode.turns) == len(lines) else None
    operated, failure = classify(
        lines,
        terminated=episode.terminated,
        verified=verified,
        end_reason=episode.end_reason,
        setup_failed=bool(job.setup_error),
        exit_codes=codes,
    )
    kinds = reply_kinds(lines, codes)
    clean = failure == "" and operated and episode.terminated and verified
    b = job.bundle
    episode_row = EvalEpisode(
        eval_id=eval_id,
        model=label,
        model_ref=model_ref,
        scenario_id=b.id,
        category=b.category,
        difficulty=b.difficulty,
        source=b.source,
        sample_index=job.sample_index,
        operated=operated,
        terminated=episode.terminated,
        verified=verified,
        clean=clean,
        n_turns=episode.n_turns,
        n_commands=sum(k == COMMAND for k in kinds),
        reply_kinds=",".join(kinds),
        end_reason=SETUP_FAILED if job.setup_error else episode.end_reason,
        failure_class=failure,
        error=job.setup_error or episode.error,
        wall_s=round(time.monotonic() - job.started, 3),
        sampling=sampling,
        messages=episode.messages,
    )
    return with_detail(episode_row, b)  # why it failed, read against its scenario (``evaluation.failures``)


def _episode_trace(job: LiveEpisode, e: EvalEpisode, kind: str = "evaluation") -> tracing.EpisodeTrace:
    """An evaluated episode as a trace: its turns, and the outcome as attributes/tags (id derived from the
    episode, so reports link to it). ``kind`` "evaluation" goes to the evaluation's experiment; any other (the
    student's attempts at train tasks) is a rollout and goes to the rollouts' experiment beside the others."""
    ep = job.driver.episode if job.driver is not None else None
    outcome = {
        "verified": e.verified,
        "clean": e.clean,
        "failure_class": e.failure_class or "none",
        "end_reason": e.end_reason,
    }
    evaluation = kind == "evaluation"
    return tracing.episode_trace(
        f"{'eval' if evaluation else kind} {e.scenario_id}",
        tracing.EVAL_EXPERIMENT if evaluation else tracing.ROLLOUT_EXPERIMENT,
        ep.turns if ep else [],
        ep.start_ns if ep is not None and ep.start_ns else time.time_ns(),
        trace_id=tracing.eval_trace_id(e.eval_id, e.model, e.scenario_id, e.sample_index),
        inputs={"scenario_id": e.scenario_id, "task": job.bundle.task},
        outputs=outcome,
        attributes={
            "kind": kind,
            "eval_id": e.eval_id,
            "scenario_id": e.scenario_id,
            "category": e.category,
            "difficulty": e.difficulty,
            "model": e.model,
            "model_ref": e.model_ref,
            "sample_index": e.sample_index,
            **outcome,
        },
        error=e.error,
    )


class EtaEstimator:
    """Seconds left in an evaluation: an estimate from the measured pace of turns and lengths of episodes.

    Not (episodes left) x elapsed / (episodes done): that read 10,078 s at the first finished episode of a run that
    ended at 567 s (``elapsed`` held the model load, the sandboxes' start and the slow first generation, and
    episodes run side by side). Not the turn cap either (every episode assumed to run to it): that is an upper
    bound, several times the truth when episodes exit after a few turns. Here:

    - the pace is the mean time between two turns of one episode, so nothing before an episode's first turn counts
      (no estimate until some episode has run two turns);
    - an episode that has run ``n`` turns is expected to run as long as the ended episodes that ran more than ``n``
      did, on average; when none did (none has ended yet, or it outlasted them all), halfway from its next turn to
      the turn cap, the mean of a length known only to lie between the two. So a live episode is never expected to
      end at a length it has already passed, and the long episodes still running weigh in the length expected of
      the queued ones: the mean over every started episode of its length, known or expected (the ended ones alone
      are the short ones, early on);
    - an episode also costs time outside its turns: its container's start and set-up before its first turn, its
      check and removal after its last (with one sandbox at a time, most of an evaluation of quick episodes). Both
      are measured (``start`` to the first turn, less one pace; the last turn to ``finish``) and added;
    - live episodes run side by side, and queued ones take the first free of ``max_live`` slots, so the estimate is
      when the last one would end.

    ``clock`` is injectable so a recorded sequence of events can be replayed (tests).
    """

    def __init__(
        self, total: int, max_turns: int, max_live: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.total, self.max_turns, self.max_live, self.clock = (
            total,
            max(1, max_turns),
            max(1, max_live),
            clock,
        )
        self.turns: dict[Hashable, int] = {}  # live episodes (at least one turn run): turns so far
        self.last_turn: dict[Hashable, float] = {}
        self.ended: set[Hashable] = set()  # no more turns (exit, a cap), not yet scored
        self.finished = 0
        self._pace = [0.0, 0]  # sum and count of the seconds between two turns of an episode
        self.lengths: list[int] = []  # the turns of the episodes that ended
        self.started: dict[Hashable, float] = {}  # episodes whose container is being started: since when
        self._before = [0.0, 0]  # sum and count: start to first turn
        self._after = [0.0, 0]  # sum and count: last turn to scored
        self._ended_at: dict[Hashable, float] = {}

    def start(self, key: Hashable) -> None:
        """The episode's container is being started (it has left the queue)."""
        self.started[key] = self.clock()

    def turn(self, key: Hashable, ended: bool = False) -> None:
        """One turn of one episode just ran (its reply applied); ``ended``: it was the episode's last."""
        now = self.clock()
        if key in self.last_turn:
            self._pace[0] += now - self.last_turn[key]
            self._pace[1] += 1
        elif key in self.started:
            self._before[0] += now - self.started.pop(key)
            self._before[1] += 1
        self.last_turn[key] = now
        self.turns[key] = self.turns.get(key, 0) + 1
        if ended:
            self._end(key)

    def _end(self, key: Hashable) -> None:
        if key in self.ended:
            return
        self.ended.add(key)
        n = self.turns.pop(key, 0)
        last = self.last_turn.pop(key, None)
        if last is not None:
            self._ended_at[key] = last
        if n:  # an episode whose set-up failed ran no turn: it says nothing about an episode's length
            self.lengths.append(n)

    def finish(self, key: Hashable) -> None:
        """The episode is scored (check run, container removed)."""
        self._end(key)
        self.ended.discard(key)
        self.started.pop(key, None)
        self.finished += 1
        if key in self._ended_at:
            self._after[0] += self.clock() - self._ended_at.pop(key)
            self._after[1] += 1

    def expected_length(self, n: int = 0) -> float:
        """The turns an episode that has run ``n`` of them is expected to run in all (see the class docstring)."""
        longer = [length for length in self.lengths if length > n]
        if longer:
            return min(sum(longer) / len(longer), self.max_turns)
        return min(n + 1, self.max_turns) / 2 + self.max_turns / 2

    def seconds_left(self) -> float | None:
        """None until the pace is known (some episode ran two turns)."""
        if not self._pace[1]:
            return None
        now = self.clock()
        pace = self._pace[0] / self._pace[1]
        after = self._after[0] / self._after[1] if self._after[1] else 0.0
        before = max(0.0, self._before[0] / self._before[1] - pace) if self._before[1] else 0.0
        expected = {key: self.expected_length(n) for key, n in self.turns.items()}
        ends = [
            max(0.0, max(1.0, expected[key] - n) * pace - (now - self.last_turn[key])) + after
            for key, n in self.turns.items()
        ]
        ends += [0.0] * max(0, self.max_live - len(ends) - len(self.ended))  # free slots
        queued = max(0, self.total - self.finished - len(self.turns) - len(self.ended))
        if queued and ends:
            known = [*self.lengths, *expected.values()]
            length = sum(known) / len(known) if known else self.expected_length(0)
            heapq.heapify(ends)
            for _ in range(queued):
                heapq.heappush(ends, heapq.heappop(ends) + before + length * pace + after)
        return max(ends, default=0.0)

    def line(self, finished: int, start: float) -> str:
        """``3/19 episodes done, 120 s elapsed, ETA 45 s`` (no ETA until it is known)."""
        left = self.seconds_left()
        eta = "" if left is None else f", ETA {left:.0f} s"
        return f"{finished}/{self.total} episodes done, {self.clock() - start:.0f} s elapsed{eta}"


PROGRESS_EVERY_S = 15.0
POLL_S = 0.25  # how often a wait looks at the episodes' time caps


class EpisodeSink(Protocol):
    """Where scored episodes go as they finish (``evaluate``'s ``sink``): ``add`` each batch, ``flush`` before the
    evaluation gives up (a stop) or ends."""

    def add(self, episodes: Sequence[EvalEpisode]) -> None: ...

    def flush(self) -> None: ...


class LakeEpisodeWriter:
    """Finished episodes into ``eval_episodes[eval_id]`` while the evaluation runs, so that a stopped or killed one
    (even ``kill -9``) leaves them in the lake.

    The partition is rewritten whole, atomically (``Lake.write``), with every episode finished so far: a reader
    sees the episodes of the last write, each one whole, never half a batch, and never one twice (an episode is
    added once; a rerun is another evaluation, another ``eval_id``). Writes are at most ``every_s`` apart and at
    least 20 times as far apart as the last one took, so the rewriting of a growing partition stays a few percent
    of the run: an episode is written within seconds of finishing. Every model of one evaluation shares the
    writer (one partition, as before). Thread-safe; ``flush`` writes what has not been written."""

    def __init__(
        self,
        lake: Any,
        eval_id: str,
        every_s: float = 2.0,
        asset: str = "eval_episodes",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lake, self.eval_id, self.every_s, self.asset, self.clock = lake, eval_id, every_s, asset, clock
        self.episodes: list[EvalEpisode] = []
        self.written = 0  # episodes in the lake
        self.writes = 0
        self._rows: list[dict[str, Any]] = []
        self._last = float("-inf")
        self._cost = 0.0
        self._lock = threading.RLock()

    def add(self, episodes: Sequence[EvalEpisode]) -> None:
        with self._lock:
            self.episodes.extend(episodes)
            self._rows.extend(e.model_dump() for e in episodes)
            if self.clock() - self._last >= max(self.every_s, 20 * self._cost):
                self.flush()

    def flush(self) -> None:
        with self._lock:
            if self.written == len(self._rows) and self.writes:
                return
            t0 = self.clock()
            self.lake.write(self.asset, self._rows, partition=self.eval_id, schema=EVAL_EPISODE_SCHEMA)
            self.written, self.writes = len(self._rows), self.writes + 1
            self._last = self.clock()
            self._cost = self._last - t0


@contextlib.contextmanager
def _pool(workers: int, prefix: str) -> Iterator[ThreadPoolExecutor]:
    """A thread pool that waits for its work on a normal exit only: an interrupt (Ctrl-C, a stop) leaves at once,
    its queued work cancelled and its running work (a command in a sandbox about to be removed) left to end on its
    own, instead of waiting up to a command's time limit for it."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=prefix)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


@contextlib.contextmanager
def _saved_first(sink: EpisodeSink | None, traces: Any, boxes: Callable[[], Sequence[Any]]) -> Iterator[None]:
    """On an interrupt (Ctrl-C, a stop) or a failure: the finished episodes written first, then every sandbox
    removed at once (in parallel: one by one, forty of them took seconds), then the traces written."""
    try:
        yield
    except BaseException:
        if sink is not None:
            with contextlib.suppress(Exception):
                sink.flush()
        alive = [b for b in boxes() if b is not None]
        if alive:
            with ThreadPoolExecutor(max_workers=min(16, len(alive)), thread_name_prefix="eval-remove") as ex:
                list(ex.map(lambda b: b.close(), alive))  # close() never raises
        if traces is not None:
            with contextlib.suppress(Exception):
                traces.flush()
        raise


def _in_background(fn: Callable[[], Any]) -> Future:
    """``fn()`` in a daemon thread: a generation the evaluation may give up on (an episode's time cap, a stop) must
    not hold the process at exit, as a pool's worker thread would."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
            future.set_exception(exc)

    threading.Thread(target=run, name="eval-generate", daemon=True).start()
    return future


def _out_of_time(job: LiveEpisode, in_flight_s: float = 0.0) -> bool:
    """Whether the episode has used its time (it then ends as ``time_cap`` when asked for its next turn);
    ``in_flight_s``: the model time charged so far to the reply being generated for it."""
    return job.driver is not None and not job.driver.done and job.driver.remaining_s(in_flight_s) <= 0


def _last_turn(job: LiveEpisode, settings: EvalSettings) -> bool:
    """Whether the reply just applied was the episode's last (exit, a cap, a broken sandbox)."""
    driver = job.driver
    return (
        driver is None
        or driver.done
        or bool(job.sandbox_error)
        or driver.episode.n_turns >= settings.max_turns
    )


def _run_continuous(
    stream: Any,
    pool: ThreadPoolExecutor,
    take: Callable[[int], list[LiveEpisode]],
    open_job: Callable[[LiveEpisode], LiveEpisode],
    settings: EvalSettings,
    close: Callable[[LiveEpisode], EvalEpisode],
    record: Callable[[list[LiveEpisode], list[EvalEpisode]], None],
    say: Progress,
    label: str,
    eta: EtaEstimator,
    done: list[EvalEpisode],
    start: float,
) -> None:
    """The continuous loop: every episode is in exactly one place: its container being set up, the decoder (its
    reply being generated), the pool (its reply being run in its sandbox, or its check once it ended) or ready
    (deciding what is next). Containers are set up in the background, so decoding starts with the first one ready
    instead of after all of them. An episode whose wall time runs out while its reply is generated leaves the
    decoder (``stream.cancel``; a stream without it: the late reply is dropped) and ends as ``time_cap``. A reply in
    flight is charged what the stream says it cost (``stream.charged``), else the wall time since it was asked."""
    ready: list[LiveEpisode] = []
    opening: dict[Future, LiveEpisode] = {}  # container start and scenario set-up
    running: dict[Future, LiveEpisode] = {}  # a reply being applied in the episode's sandbox
    closing: dict[Future, LiveEpisode] = {}  # the check and the container's removal of an ended episode
    by_key: dict[int, LiveEpisode] = {}
    cancel = getattr(stream, "cancel", None)
    charged = getattr(stream, "charged", None)
    asked_at: dict[int, float] = {}

    def in_flight(key: int) -> float:
        cost = charged(key) if charged is not None else None
        return cost if cost is not None else time.monotonic() - asked_at.get(key, time.monotonic())

    last_say = time.monotonic()
    warned = False
    with _pool(settings.setup_workers, "eval-setup") as setup:
        while True:
            alive = len(opening) + len(ready) + len(by_key) + len(running) + len(closing)
            for j in take(settings.max_live - alive):
                eta.start(id(j))
                opening[setup.submit(open_job, j)] = j
            for j in ready:
                if j.driver is not None and j.driver.wants_reply():
                    by_key[id(j)] = j
                    asked_at[id(j)] = time.monotonic()
                    stream.submit(
                        id(j),
                        j.driver.seen,
                        sample_key=f"{j.bundle.id}\0{j.sample_index}\0{j.driver.episode.n_turns}",
                    )
                else:  # ended, or its set-up failed: scored (as infrastructure when it never started)
                    closing[pool.submit(close, j)] = j
            ready = []
            spent = {k: in_flight(k) for k in by_key}  # one reading a key: the test and the charge agree
            for key, j in [(k, j) for k, j in by_key.items() if _out_of_time(j, spent[k])]:
                j.opened.charge(spent[key])
                del by_key[key]
                asked_at.pop(key, None)
                if cancel is not None:
                    cancel(key)
                ready.append(j)  # wants_reply() ends it as time_cap: it is scored next round
            if stream.busy and by_key:
                for key, reply, seconds in stream.step():
                    replied = by_key.pop(key, None)
                    asked_at.pop(key, None)
                    if replied is None:
                        continue  # given up on (its time cap passed) while it was generated
                    replied.opened.note_model_call(seconds, reply.new_tokens, reply.charged_s)
                    running[pool.submit(apply_reply, replied, reply)] = replied
                if stream.fallback and not warned:
                    warned = True
                    say(
                        f"[{label}] continuous batching given up ({stream.fallback}); the episodes go on with "
                        "batched generate calls"
                    )
            elif ready:
                pass  # episodes whose time ran out while they were generated: scored next round
            elif opening or running or closing:
                wait([*opening, *running, *closing], timeout=1.0, return_when=FIRST_COMPLETED)
            else:
                break  # nothing queued (take gave nothing), nothing alive
            for futures in (opening, running):
                for f in [f for f in futures if f.done()]:
                    f.result()  # _open and apply_reply record their own failures on the job
                    job = futures.pop(f)
                    if futures is running:
                        eta.turn(id(job), ended=_last_turn(job, settings))
                    ready.append(job)
            ended = [f for f in closing if f.done()]
            if ended:
                record([closing.pop(f) for f in ended], [f.result() for f in ended])
            if time.monotonic() - last_say >= PROGRESS_EVERY_S or (ended and len(done) == eta.total):
                last_say = time.monotonic()
                st = stream.stats
                rows = f", {st.mean_rows:.1f} rows a decode step on average" if st is not None else ""
                say(
                    f"[{label}] {len(opening)} starting, {len(by_key)} generating, {len(running)} in the sandbox"
                    f"{rows}, " + eta.line(len(done), start)
                )


def _generate(asking: list[LiveEpisode]) -> dict[int, Reply]:
    """The replies of every asking episode: one batched call per distinct operator object (a local model is one
    object for all scenarios; the reference operator is bound per scenario)."""
    groups: dict[int, list[LiveEpisode]] = {}
    for j in asking:
        groups.setdefault(id(j.operator), []).append(j)
    replies: dict[int, Reply] = {}
    for members in groups.values():
        try:
            got = members[0].operator.replies([j.opened.seen for j in members])
        except Exception as exc:  # noqa: BLE001 - an operator bug fails its episodes, not the run
            got = [Reply(error=f"{type(exc).__name__}: {exc}") for _ in members]
        for j, reply in zip(members, got, strict=True):
            replies[id(j)] = reply
    return replies


def evaluate(
    operator: Operator,
    bundles: Sequence[ScenarioBundle],
    image: str | None,
    settings: EvalSettings | None = None,
    label: str | None = None,
    model_ref: str | None = None,
    eval_id: str | None = None,
    progress: Progress | None = None,
    trace_kind: str = "evaluation",
    sink: EpisodeSink | None = None,
) -> EvalResult:
    """Every (scenario, sample) episode of one operator, batched continuously or in lockstep (see the module
    docstring); one ``EvalEpisode`` each, traced as ``trace_kind`` (``_episode_trace``) and handed to ``sink`` as
    soon as it is scored. An interrupt (``KeyboardInterrupt``, ``stopping.Stopped``) propagates at once, after
    ``sink.flush()``; the episodes still running are dropped and their sandboxes removed."""
    settings = settings or EvalSettings()
    label = label or operator.name
    model_ref = model_ref or operator.name
    eval_id = eval_id or uuid.uuid4().hex[:12]
    sampling = json.dumps(
        {
            **operator.sampling(),
            "max_turns": settings.max_turns,
            "samples": settings.samples,
            "max_unusable_in_a_row": settings.max_unusable_in_a_row,
        },
        sort_keys=True,
        default=str,
    )
    say = progress or (lambda _msg: None)
    queue = [
        LiveEpisode(bundle=b, sample_index=i, operator=operator.for_scenario(b))
        for i in range(settings.samples)
        for b in bundles
    ]
    jobs = list(
        queue
    )  # every job, whatever queue/live hold when an exception leaves: closing_sandboxes reaps them
    total = len(queue)
    done: list[EvalEpisode] = []
    live: list[LiveEpisode] = []
    start = time.monotonic()
    eta = EtaEstimator(total, settings.max_turns, settings.max_live)
    turn = 0
    workers = max(1, min(settings.max_live, 16))
    traces = tracing.sink()  # one MLflow trace per episode, written in batches (BASHGYM_TRACES=0: none)
    stream = None
    if settings.continuous and all(j.operator is operator for j in queue):
        make = getattr(operator, "reply_stream", None)
        stream = make(max_rows=settings.max_rows) if make is not None else None
    from bashgym_assets.sandbox import closing_sandboxes

    def open_job(j: LiveEpisode) -> LiveEpisode:
        return open_episode(j, image, settings.limits(), time_cap=settings.time_cap)

    with (
        _pool(workers, "eval") as pool,
        closing_sandboxes(lambda: [j.box for j in jobs]),
        _saved_first(sink, traces, lambda: [j.box for j in jobs]),
    ):

        def record(jobs: list[LiveEpisode], closed: list[EvalEpisode]) -> None:
            done.extend(closed)
            for j in jobs:
                eta.finish(id(j))
            if sink is not None:
                sink.add(closed)
            for j, e in zip(jobs, closed, strict=True):  # a routed operator logs each episode's outcome
                hook = getattr(j.operator, "record_outcome", None)
                if hook is not None:
                    with contextlib.suppress(Exception):  # the decision log is a side record: never fatal
                        hook("clean" if e.clean else (e.failure_class or "failed"), scenario_id=e.scenario_id)
            if traces is not None:
                for j, e in zip(jobs, closed, strict=True):
                    traces.add(_episode_trace(j, e, trace_kind))

        def close(j: LiveEpisode) -> EvalEpisode:
            return _close(j, eval_id, label, model_ref, sampling, settings.check_timeout_s)

        def finish(jobs: list[LiveEpisode]) -> None:
            record(jobs, list(pool.map(close, jobs)))

        def open_more(live: list[LiveEpisode]) -> list[LiveEpisode]:
            nonlocal queue
            room = settings.max_live - len(live)
            if room <= 0 or not queue:
                return live
            opening, queue = queue[:room], queue[room:]
            for j in opening:
                eta.start(id(j))
            with _pool(settings.setup_workers, "eval-setup") as ex:
                opened = list(ex.map(open_job, opening))
            finish([j for j in opened if j.driver is None])
            return live + [j for j in opened if j.driver is not None]

        if stream is not None:
            say(f"[{label}] continuous batching, up to {settings.max_rows} rows a decode step")

            def take(n: int) -> list[LiveEpisode]:
                nonlocal queue
                got, queue = queue[: max(0, n)], queue[max(0, n) :]
                return got

            _run_continuous(
                stream,
                pool,
                take,
                open_job,
                settings,
                close,
                record,
                say,
                label,
                eta,
                done,
                start,
            )
        else:
            while queue or live:
                live = open_more(live)
                asking = [j for j in live if j.driver is not None and j.driver.wants_reply()]
                ended = [j for j in live if j not in asking]
                if ended:
                    finish(ended)
                    live = asking
                if not asking:
                    continue
                turn += 1
                t0 = time.monotonic()
                # generated in the background, so that an episode whose wall time runs out meanwhile ends
                # then (its reply, when it comes, is dropped) rather than when the whole batch is done
                pending = _in_background(partial(_generate, asking))
                replies: dict[int, Reply] = {}
                while asking:
                    try:
                        replies = pending.result(timeout=POLL_S)
                        break
                    except FutureTimeout:
                        waited = time.monotonic() - t0
                        late = [j for j in asking if _out_of_time(j, waited)]
                        if late:
                            gone = {id(j) for j in late}
                            asking = [j for j in asking if id(j) not in gone]
                            live = [j for j in live if id(j) not in gone]
                            for j in late:
                                j.opened.charge(waited)
                                j.opened.wants_reply()  # ends it as time_cap
                            finish(late)
                # a reply that came after its episode's time cap is not run: it ends as time_cap next round
                gen_s = time.monotonic() - t0
                late = [j for j in asking if _out_of_time(j, gen_s)]
                for j in late:
                    j.opened.charge(gen_s)  # its reply is not run: it ends as time_cap next round
                asking = [j for j in asking if all(j is not x for x in late)]
                for j in asking:
                    j.opened.note_model_call(gen_s, replies[id(j)].new_tokens)

                list(pool.map(lambda j, replies=replies: apply_reply(j, replies[id(j)]), asking))
                for j in asking:
                    eta.turn(id(j), ended=_last_turn(j, settings))
                say(
                    f"[{label}] turn {turn}: {len(asking)} live, generation {gen_s:.1f} s, "
                    + eta.line(len(done), start)
                )
    wall = time.monotonic() - start
    order = {
        (b.id, i): n for n, (b, i) in enumerate((b, i) for i in range(settings.samples) for b in bundles)
    }
    done.sort(key=lambda e: order.get((e.scenario_id, e.sample_index), 0))
    summary = summarize(label, done, wall_s=wall, sampling=json.loads(sampling))
    if sink is not None:
        sink.flush()
    if traces is not None:
        traces.flush()
        say(
            f"[{label}] traces: {traces.written} written to MLflow so far ({traces.write_s:.2f} s writing)"
            + (f", errors: {traces.errors[-1]}" if traces.errors else "")
        )
    say(
        f"[{label}] {total} episodes in {wall:.0f} s: "
        + ", ".join(f"{k} {r.fmt()}" for k, r in summary.rates.items())
    )
    return EvalResult(summary=summary, episodes=done)
