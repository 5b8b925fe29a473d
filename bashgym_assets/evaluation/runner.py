"""The behavioural evaluation: a model dropped, with no scaffold, into held-out scenarios in real sandboxes.

A local model is batched continuously (``rollout.continuous``; greedy, or sampled with a generator per reply as the
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
"""

from __future__ import annotations

import contextlib
import heapq
import json
import time
import uuid
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.evaluation.metrics import (
    SANDBOX_ERROR,
    SETUP_FAILED,
    EvalEpisode,
    ModelSummary,
    classify,
    reply_kinds,
    summarize,
)
from bashgym_assets.rollout import tracing
from bashgym_assets.rollout.episode import Episode, EpisodeLimits
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
    max_turns: int = Field(default=10, description="replies an episode may run before it ends unfinished")
    episode_timeout_s: float = Field(default=240.0, description="seconds an episode may take in all")
    command_timeout_s: float = Field(default=20.0, description="seconds one command may run in the sandbox")
    check_timeout_s: float = Field(default=30.0, description="seconds the scenario's check may run")
    max_live: int = Field(default=40, description="sandboxes alive at once")
    setup_workers: int = Field(default=4, description="threads starting sandboxes (and running setups)")
    # The failure class is already decided by then, and each such reply costs a whole token budget of generation.
    max_unusable_in_a_row: int = Field(
        default=3,
        description="replies in a row that are not commands (prose, babble) before the episode ends as lost",
    )
    continuous: bool = Field(
        default=True,
        description="continuous batching of a local model: each reply leaves and each next prompt joins the "
        "running batch (else lockstep turns, all live episodes decoded as one batch)",
    )
    max_rows: int = Field(default=32, description="continuous batching: rows a decode step")

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
    return EvalEpisode(
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
    """Seconds left in an evaluation, from the pace of turns, not from episodes finished per elapsed second.

    That old estimate, (episodes left) x elapsed / (episodes done), read 10,078 s at the first finished episode of
    a run that ended at 567 s: ``elapsed`` held the model load, the sandboxes' start and the slow first generation,
    and episodes run side by side, so the first one to end says nothing about how long the others take. Here:

    - the pace is the mean time between two turns of one episode, so nothing before an episode's first turn counts
      (no estimate until some episode has run two turns);
    - an episode takes the mean turns of the episodes that ended, and a live one at least one turn more, less the
      time it has already waited for it; until an episode has ended, the turn cap: then the estimate is an upper
      bound, and the line says ``at most``;
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
        self._lengths = [0, 0]  # sum and count of the turns of the episodes that ended

    def turn(self, key: Hashable, ended: bool = False) -> None:
        """One turn of one episode just ran (its reply applied); ``ended``: it was the episode's last."""
        now = self.clock()
        if key in self.last_turn:
            self._pace[0] += now - self.last_turn[key]
            self._pace[1] += 1
        self.last_turn[key] = now
        self.turns[key] = self.turns.get(key, 0) + 1
        if ended:
            self._end(key)

    def _end(self, key: Hashable) -> None:
        if key in self.ended:
            return
        self.ended.add(key)
        n = self.turns.pop(key, 0)
        self.last_turn.pop(key, None)
        if n:  # an episode whose set-up failed ran no turn: it says nothing about an episode's length
            self._lengths[0] += n
            self._lengths[1] += 1

    def finish(self, key: Hashable) -> None:
        """The episode is scored (check run, container removed)."""
        self._end(key)
        self.ended.discard(key)
        self.finished += 1

    @property
    def upper_bound(self) -> bool:
        """No episode has ended yet: each is assumed to run to the turn cap."""
        return not self._lengths[1]

    def seconds_left(self) -> float | None:
        """None until the pace is known (some episode ran two turns)."""
        if not self._pace[1]:
            return None
        now = self.clock()
        pace = self._pace[0] / self._pace[1]
        length = (
            self.max_turns if self.upper_bound else min(self._lengths[0] / self._lengths[1], self.max_turns)
        )
        ends = [
            max(0.0, max(1.0, length - n) * pace - (now - self.last_turn[key]))
            for key, n in self.turns.items()
        ]
        ends += [0.0] * max(0, self.max_live - len(ends) - len(self.ended))  # free slots
        queued = max(0, self.total - self.finished - len(self.turns) - len(self.ended))
        if queued and ends:
            heapq.heapify(ends)
            for _ in range(queued):
                heapq.heappush(ends, heapq.heappop(ends) + length * pace)
        return max(ends, default=0.0)

    def line(self, finished: int, start: float) -> str:
        """``3/19 episodes done, 120 s elapsed, ETA 45 s`` (no ETA until it is known)."""
        left = self.seconds_left()
        eta = "" if left is None else f", ETA {'at most ' if self.upper_bound else ''}{left:.0f} s"
        return f"{finished}/{self.total} episodes done, {self.clock() - start:.0f} s elapsed{eta}"


PROGRESS_EVERY_S = 15.0


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
    instead of after all of them."""
    ready: list[LiveEpisode] = []
    opening: dict[Future, LiveEpisode] = {}  # container start and scenario set-up
    running: dict[Future, LiveEpisode] = {}  # a reply being applied in the episode's sandbox
    closing: dict[Future, LiveEpisode] = {}  # the check and the container's removal of an ended episode
    by_key: dict[int, LiveEpisode] = {}
    last_say = time.monotonic()
    warned = False
    with ThreadPoolExecutor(max_workers=settings.setup_workers, thread_name_prefix="eval-setup") as setup:
        while True:
            alive = len(opening) + len(ready) + len(by_key) + len(running) + len(closing)
            for j in take(settings.max_live - alive):
                opening[setup.submit(open_job, j)] = j
            for j in ready:
                if j.driver is not None and j.driver.wants_reply():
                    by_key[id(j)] = j
                    stream.submit(
                        id(j),
                        j.driver.seen,
                        sample_key=f"{j.bundle.id}\0{j.sample_index}\0{j.driver.episode.n_turns}",
                    )
                else:  # ended, or its set-up failed: scored (as infrastructure when it never started)
                    closing[pool.submit(close, j)] = j
            ready = []
            if stream.busy:
                for key, reply, seconds in stream.step():
                    j = by_key.pop(key)
                    j.driver.note_model_call(seconds, reply.new_tokens)
                    running[pool.submit(apply_reply, j, reply)] = j
                if stream.fallback and not warned:
                    warned = True
                    say(
                        f"[{label}] continuous batching given up ({stream.fallback}); the episodes go on with "
                        "batched generate calls"
                    )
            elif opening or running or closing:
                wait([*opening, *running, *closing], return_when=FIRST_COMPLETED)
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
) -> EvalResult:
    """Every (scenario, sample) episode of one operator, batched continuously or in lockstep (see the module
    docstring); one ``EvalEpisode`` each, traced as ``trace_kind`` (``_episode_trace``)."""
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
    sink = tracing.sink()  # one MLflow trace per episode, written in batches (BASHGYM_TRACES=0: none)
    stream = None
    if settings.continuous and all(j.operator is operator for j in queue):
        make = getattr(operator, "reply_stream", None)
        stream = make(max_rows=settings.max_rows) if make is not None else None
    from bashgym_assets.sandbox import closing_sandboxes

    with (
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval") as pool,
        closing_sandboxes(lambda: [j.box for j in jobs]),
    ):

        def record(jobs: list[LiveEpisode], closed: list[EvalEpisode]) -> None:
            done.extend(closed)
            for j in jobs:
                eta.finish(id(j))
            for j, e in zip(jobs, closed, strict=True):  # a routed operator logs each episode's outcome
                hook = getattr(j.operator, "record_outcome", None)
                if hook is not None:
                    with contextlib.suppress(Exception):  # the decision log is a side record: never fatal
                        hook("clean" if e.clean else (e.failure_class or "failed"), scenario_id=e.scenario_id)
            if sink is not None:
                for j, e in zip(jobs, closed, strict=True):
                    sink.add(_episode_trace(j, e, trace_kind))

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
            with ThreadPoolExecutor(
                max_workers=settings.setup_workers, thread_name_prefix="eval-setup"
            ) as ex:
                opened = list(ex.map(lambda j: open_episode(j, image, settings.limits()), opening))
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
                lambda j: open_episode(j, image, settings.limits()),
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
                # One batched call per distinct operator object (a local model is one object for all scenarios;
                # the reference operator is bound per scenario).
                groups: dict[int, list[LiveEpisode]] = {}
                for j in asking:
                    groups.setdefault(id(j.operator), []).append(j)
                replies: dict[int, Any] = {}
                for members in groups.values():
                    try:
                        got = members[0].operator.replies([j.driver.seen for j in members])
                    except Exception as exc:  # noqa: BLE001 - an operator bug fails its episodes, not the run
                        got = [Reply(error=f"{type(exc).__name__}: {exc}") for _ in members]
                    for j, reply in zip(members, got, strict=True):
                        replies[id(j)] = reply
                gen_s = time.monotonic() - t0
                for j in asking:
                    j.driver.note_model_call(gen_s, replies[id(j)].new_tokens)

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
        say(
            f"[{label}] traces: {sink.written} written to MLflow so far ({sink.write_s:.2f} s writing)"
            + (f", errors: {sink.errors[-1]}" if sink.errors else "")
        )
    say(
        f"[{label}] {total} episodes in {wall:.0f} s: "
        + ", ".join(f"{k} {r.fmt()}" for k, r in summary.rates.items())
    )
    return EvalResult(summary=summary, episodes=done)
