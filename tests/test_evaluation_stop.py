"""The evaluation never loses finished work (issue 37, item 5): episodes reach the lake as they finish, so a
``bashgym eval`` stopped with SIGTERM (in order: the partial table, exit 143, no sandbox left) or killed with
``kill -9`` leaves them there; an episode's time cap counts its generation (its share of a batch's, or the wall
clock); the ETA is an estimate of the time left, not the turn cap's upper bound."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bashgym_assets.evaluation import EvalSettings, evaluate
from bashgym_assets.evaluation import metrics as m
from bashgym_assets.evaluation.runner import EtaEstimator, LakeEpisodeWriter
from bashgym_assets.rollout.operators import Operator, Reply
from bashgym_assets.rollout.transcript import Message
from bashgym_assets.scenarios.bundle import ScenarioBundle


def _bundle(i: int, reference: list[str] | None = None) -> ScenarioBundle:
    return ScenarioBundle(
        id=f"touch-{i}",
        task=f"Create the file ~/done-{i}.txt.",
        category="files",
        difficulty=1,
        setup=["true"],
        check=f"test -f /home/operator/done-{i}.txt",
        reference=reference or [f"touch ~/done-{i}.txt"],
        source="test",
    )


# ---- the ETA -------------------------------------------------------------------------------------------------
def _replay(
    events: list[tuple[float, str, int]], probes: list[float], total: int, max_turns: int, max_live: int
):
    now = [0.0]
    eta = EtaEstimator(total, max_turns, max_live, clock=lambda: now[0])
    out: dict[float, tuple[float | None, str]] = {}
    order = {"start": 0, "turn": 0, "last": 0, "done": 1, "probe": 2}
    for t, kind, key in sorted(
        [*events, *((p, "probe", -1) for p in probes)], key=lambda x: (x[0], order[x[1]])
    ):
        now[0] = t
        if kind == "start":
            eta.start(key)
        elif kind in ("turn", "last"):
            eta.turn(key, ended=kind == "last")
        elif kind == "done":
            eta.finish(key)
        else:
            out[t] = (eta.seconds_left(), eta.line(eta.finished, 0.0))
    return out


def _schedule(lengths: list[int], max_live: int, pace: float) -> list[tuple[float, str, int]]:
    """Episodes of the given lengths (turns) through ``max_live`` slots, a turn every ``pace`` seconds, scored a
    second after their last turn; a queued one starts when a slot frees."""
    import heapq

    slots = [0.0] * max_live
    events: list[tuple[float, str, int]] = []
    for i, n in enumerate(lengths):
        begin = heapq.heappop(slots)
        turns = [begin + pace * (k + 1) for k in range(n)]
        events += [(t, "turn", i) for t in turns[:-1]] + [(turns[-1], "last", i), (turns[-1] + 1, "done", i)]
        heapq.heappush(slots, turns[-1] + 1)
    return events


@pytest.mark.parametrize(
    "lengths, max_turns",
    [
        # two short episodes among long ones, in every batch of ten: the short ones end first, and the old ETA
        # took every episode still to come for as short (45 s left of 158, at 25 s)
        ([2, 2, 6, 6, 6, 6, 6, 6, 6, 6] * 3, 8),
        # lengths of 3 to 7 turns under a cap of 10: before any ended, the old ETA was the cap's upper bound
        # ("at most 275 s" of 148)
        ([3, 5, 4, 6, 5, 4, 3, 7, 4, 5] * 3, 10),
    ],
)
def test_eta_is_an_estimate_of_the_time_left_not_an_upper_bound(lengths: list[int], max_turns: int) -> None:
    """Thirty episodes through ten sandboxes, a turn every 10 s: from the moment the pace is known (two turns of
    one episode) to the end, the ETA is within a factor of two of the time actually left, and never "at most"."""
    events = _schedule(lengths, max_live=10, pace=10.0)
    end = max(t for t, kind, _ in events if kind == "done")
    got = _replay(
        events, [float(p) for p in range(25, int(end), 10)], total=30, max_turns=max_turns, max_live=10
    )
    for t, (left, line) in sorted(got.items()):
        truth = end - t
        assert "at most" not in line, line
        assert left is not None and truth / 2 <= left <= truth * 2, (t, left, truth)


def test_eta_counts_the_time_an_episode_spends_outside_its_turns() -> None:
    """One sandbox at a time; each episode's container takes 3 s to start and its check 1 s, and its three turns
    take 0.1 s each (the reference operator): the old ETA, turns only, read 0 s with most of the run to go."""
    events: list[tuple[float, str, int]] = []
    t = 0.0
    for i in range(8):
        events.append((t, "start", i))
        turns = [t + 3.0 + 0.1 * k for k in range(3)]
        events += [(x, "turn", i) for x in turns[:-1]] + [
            (turns[-1], "last", i),
            (turns[-1] + 1.0, "done", i),
        ]
        t = turns[-1] + 1.0
    end = t
    got = _replay(events, [t0 + 0.5 for t0 in (8.6, 12.8, 17.0)], total=8, max_turns=4, max_live=1)
    for t0, (left, _) in got.items():
        assert left is not None and (end - t0) / 1.5 <= left <= (end - t0) * 1.5, (t0, left, end - t0)


def test_eta_of_a_live_episode_that_outlasts_the_ended_ones() -> None:
    """An episode that has run more turns than any that ended is not expected to end at the next turn: its length
    is known only to lie between its next turn and the cap."""
    eta = EtaEstimator(total=2, max_turns=11, max_live=2, clock=lambda: 0.0)
    for _ in range(2):
        eta.turn("short")
    eta.turn("short", ended=True)
    eta.finish("short")
    for _ in range(5):
        eta.turn("long")
    assert eta.expected_length(2) == 3
    assert eta.expected_length(5) == (6 + 11) / 2


# ---- the lake writer -------------------------------------------------------------------------------------------
def _episode(i: int, eval_id: str = "eval-x") -> m.EvalEpisode:
    return m.EvalEpisode(
        eval_id=eval_id,
        model="m",
        model_ref="m",
        scenario_id=f"s-{i}",
        category="files",
        difficulty=1,
        source="test",
        sample_index=0,
        operated=True,
        terminated=True,
        verified=True,
        clean=True,
        n_turns=1,
        n_commands=1,
        reply_kinds="command",
        end_reason="exit",
        failure_class="",
        error="",
        wall_s=1.0,
        sampling="{}",
        messages=[Message(role="user", content="x")],
    )


def test_the_writer_puts_each_finished_episode_in_the_lake_once(settings) -> None:
    from bashgym_assets.lake import Lake

    lake = Lake(settings)
    now = [0.0]
    writer = LakeEpisodeWriter(lake, "eval-x", every_s=5.0, clock=lambda: now[0])
    writer.add([_episode(0)])  # the first at once
    assert [r["scenario_id"] for r in lake.read_rows("eval_episodes", "eval-x")] == ["s-0"]
    now[0] = 1.0
    writer.add([_episode(1), _episode(2)])  # within every_s of the last write: held
    assert len(lake.read_rows("eval_episodes", "eval-x")) == 1
    now[0] = 6.0
    writer.add([_episode(3)])
    rows = lake.read_rows("eval_episodes", "eval-x")
    assert [r["scenario_id"] for r in rows] == ["s-0", "s-1", "s-2", "s-3"]
    writer.add([_episode(4)])
    writer.flush()
    writer.flush()
    rows = lake.read_all("eval_episodes").to_pylist()
    assert [r["scenario_id"] for r in rows] == [f"s-{i}" for i in range(5)]
    assert {r["_partition"] for r in rows} == {"eval-x"} and writer.written == 5


# ---- the wall-time cap -----------------------------------------------------------------------------------------
class SlowToGenerate(Operator):
    """A model on a loaded machine: its second reply takes ``think_s`` to generate."""

    scaffolded = False

    def __init__(self, think_s: float) -> None:
        self.name, self.think_s = "slow", think_s

    def next_command(self, messages: list[Message]) -> str:
        if sum(1 for x in messages if x.role == "assistant") == 0:
            return "ls"
        time.sleep(self.think_s)
        return "touch ~/done-0.txt"


@pytest.mark.docker
def test_an_episode_is_bounded_by_wall_time_generation_included(sandbox_image: str) -> None:
    """Its commands take no time; its second reply takes 20 s to generate, past the 3 s cap: the episode ends at
    the cap as a timeout, without that reply (before, the cap counted sandbox time only, the reply ran and the
    episode passed)."""
    settings = EvalSettings(max_turns=4, episode_timeout_s=3.0, command_timeout_s=5.0)
    res = evaluate(SlowToGenerate(20.0), [_bundle(0)], sandbox_image, settings)
    e = res.episodes[0]
    assert e.end_reason == "time_cap" and e.failure_class == m.FAILURE_TIMEOUT, e
    assert e.n_turns == 1 and not e.verified


class _Never:
    """A continuous reply stream whose replies never end (a decoder crawling under load); it records cancels."""

    fallback = None
    stats = None

    def __init__(self, release_after_s: float) -> None:
        self.asked: dict[Any, float] = {}
        self.cancelled: list[Any] = []
        self.release_after_s = release_after_s

    @property
    def busy(self) -> bool:
        return bool(self.asked)

    def submit(self, key: Any, conversation: list[Message], sample_key: str = "") -> None:
        self.asked[key] = time.monotonic()

    def cancel(self, key: Any) -> None:
        self.cancelled.append(key)
        self.asked.pop(key, None)

    def step(self) -> list[tuple[Any, Reply, float]]:
        time.sleep(0.05)
        now = time.monotonic()
        done = [k for k, t in self.asked.items() if now - t >= self.release_after_s]
        for k in done:
            del self.asked[k]
        return [(k, Reply(text="touch ~/done-0.txt"), self.release_after_s) for k in done]


class Streaming(Operator):
    scaffolded = False

    def __init__(self, stream: Any) -> None:
        self.name, self.stream = "streaming", stream

    def next_command(self, messages: list[Message]) -> str:
        return "true"

    def reply_stream(self, max_rows: int = 32) -> Any:
        return self.stream


@pytest.mark.docker
def test_continuous_batching_gives_up_a_reply_past_the_wall_time_cap(sandbox_image: str) -> None:
    stream = _Never(release_after_s=20.0)
    settings = EvalSettings(max_turns=4, episode_timeout_s=2.0, command_timeout_s=5.0)
    res = evaluate(Streaming(stream), [_bundle(0)], sandbox_image, settings)
    e = res.episodes[0]
    assert e.end_reason == "time_cap" and e.failure_class == m.FAILURE_TIMEOUT, e
    assert e.n_turns == 0 and len(stream.cancelled) == 1  # it left the batch


class _Shared:
    """A continuous reply stream that decodes ``rows`` rows together: each reply takes ``wait_s`` of wall time, of
    which its row is charged its share (``charged``, ``Reply.charged_s``); it touches the task's file, then exits."""

    fallback = None
    stats = None

    def __init__(self, wait_s: float, rows: int) -> None:
        self.wait_s, self.rows = wait_s, rows
        self.asked: dict[Any, tuple[float, int]] = {}

    @property
    def busy(self) -> bool:
        return bool(self.asked)

    def submit(self, key: Any, conversation: list[Message], sample_key: str = "") -> None:
        self.asked[key] = (time.monotonic(), sum(x.role == "assistant" for x in conversation))

    def charged(self, key: Any) -> float | None:
        return (time.monotonic() - self.asked[key][0]) / self.rows if key in self.asked else None

    def cancel(self, key: Any) -> None:
        self.asked.pop(key, None)

    def step(self) -> list[tuple[Any, Reply, float]]:
        time.sleep(0.05)
        now, out = time.monotonic(), []
        for key in [k for k, (t, _) in self.asked.items() if now - t >= self.wait_s]:
            turn = self.asked.pop(key)[1]
            reply = Reply(text="exit" if turn else "touch ~/done-0.txt", charged_s=self.wait_s / self.rows)
            out.append((key, reply, self.wait_s))
        return out


@pytest.mark.docker
@pytest.mark.parametrize(
    ("time_cap", "rows", "finished"), [("share", 8, True), ("wall", 8, False), ("share", 1, False)]
)
def test_an_episode_is_charged_its_share_of_a_batch_not_the_wait_for_it(
    sandbox_image: str, time_cap: str, rows: int, finished: bool
) -> None:
    """Two replies of 1.5 s each under a 2 s cap. Decoded beside 7 other rows, each reply is charged 0.19 s: the
    episode touches its file and exits (under ``wall`` it ended at the cap waiting for its second reply, as 29 of
    48 episodes of a study evaluation did after 1-2 turns). Decoded alone, the row is charged every second, and
    the cap ends it as it did under ``wall`` (issue 37: a crawling model is still bounded)."""
    settings = EvalSettings(max_turns=4, episode_timeout_s=2.0, command_timeout_s=5.0, time_cap=time_cap)
    e = evaluate(Streaming(_Shared(1.5, rows)), [_bundle(0)], sandbox_image, settings).episodes[0]
    if finished:
        assert e.end_reason == "exit" and e.verified and e.clean and e.n_turns == 2, e
    else:
        assert e.end_reason == "time_cap" and e.failure_class == m.FAILURE_TIMEOUT and e.n_turns == 1, e


# ---- bashgym eval stopped or killed -------------------------------------------------------------------------------
N_SCENARIOS = 24  # more than a loaded machine finishes before the signal: the stop acts on a live run


def _start_eval(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """``bashgym eval --reference`` over N_SCENARIOS scenarios whose reference sleeps 2 s, one sandbox at a time: it runs
    for half a minute or more, finishing an episode every few seconds."""
    folder = tmp_path / "bundles"
    folder.mkdir()
    for i in range(N_SCENARIOS):
        b = _bundle(i, reference=["sleep 2", f"touch ~/done-{i}.txt"])
        (folder / f"touch-{i}.json").write_text(b.model_dump_json())
    log = tmp_path / "eval.log"
    cmd = [
        sys.executable,
        "-m",
        "bashgym_assets.cli",
        "eval",
        "--reference",
        "--no-base",
        "--no-champion",
        "--base",
        "unused",
        "--scenarios",
        str(folder),
        "--max-live",
        "1",
        "--max-turns",
        "4",
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ})
    return proc, log


def _wait_for_episodes(lake: Any, proc: subprocess.Popen, log: Path, at_least: int) -> list[dict]:
    """Poll the lake until the running evaluation has written ``at_least`` episodes (it must still be running).
    The writer writes the first finished episode at once and then backs off (at least 20x its last write's time
    apart, ``LakeEpisodeWriter``): under load a second write can come when the run is nearly over, so the stop tests
    act on the first one."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        parts = [p for p in lake.partitions("eval_episodes") if p.startswith("eval-cli-")]
        if parts:
            try:
                rows = lake.read_rows("eval_episodes", parts[0])
            except FileNotFoundError:
                rows = []
            if len(rows) >= at_least:
                assert proc.poll() is None, (
                    "the evaluation had ended: its episodes were written only at the end"
                )
                return rows
        if proc.poll() is not None:
            pytest.fail(f"bashgym eval ended ({proc.returncode}) before writing episodes:\n{log.read_text()}")
        time.sleep(0.2)
    pytest.fail(f"no episodes in the lake after 300 s:\n{log.read_text()}")


def _containers_of(pid: int) -> list[str]:
    from bashgym_assets.sandbox.sandbox import LABEL_OWNER, LABEL_SANDBOX, docker_client

    api = docker_client().api
    out = []
    for c in api.containers(all=True, filters={"label": [LABEL_SANDBOX]}):
        parts = ((c.get("Labels") or {}).get(LABEL_OWNER) or "").split(":")
        if len(parts) >= 2 and parts[1] == str(pid):
            out.append(c["Id"])
    return out


def _remove(ids: list[str]) -> None:
    from bashgym_assets.sandbox.sandbox import docker_client

    api = docker_client().api
    for cid in ids:
        with contextlib.suppress(Exception):  # gone meanwhile
            api.remove_container(cid, force=True)


@pytest.mark.docker
def test_sigterm_stops_bashgym_eval_with_its_finished_episodes_in_the_lake(
    settings, sandbox_image, tmp_path
) -> None:
    from bashgym_assets.lake import Lake

    lake = Lake(settings)
    proc, log = _start_eval(tmp_path)
    try:
        seen = _wait_for_episodes(lake, proc, log, at_least=1)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    printed = log.read_text()
    assert rc == 128 + signal.SIGTERM, printed
    assert "stopped by SIGTERM" in printed and "finished episodes only" in printed, printed
    assert "| reference" in printed, printed  # the partial table, over the finished episodes
    (partition,) = [p for p in lake.partitions("eval_episodes") if p.startswith("eval-cli-")]
    rows = lake.read_rows("eval_episodes", partition)
    ids = [(r["model"], r["scenario_id"], r["sample_index"]) for r in rows]
    assert len(ids) == len(set(ids)) and len(rows) < N_SCENARIOS  # each once; the rest were dropped
    assert {r["scenario_id"] for r in seen} <= {r["scenario_id"] for r in rows}
    assert all(r["clean"] and r["eval_id"] == partition for r in rows)
    left = _containers_of(proc.pid)
    _remove(left)
    assert not left, "the stopped evaluation left sandboxes behind"


@pytest.mark.docker
def test_kill_9_of_bashgym_eval_leaves_its_finished_episodes_in_the_lake(
    settings, sandbox_image, tmp_path
) -> None:
    from bashgym_assets.lake import Lake

    lake = Lake(settings)
    proc, log = _start_eval(tmp_path)
    try:
        seen = _wait_for_episodes(lake, proc, log, at_least=1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _remove(_containers_of(proc.pid))  # a killed process removes nothing; the next one's reaper would
    (partition,) = [p for p in lake.partitions("eval_episodes") if p.startswith("eval-cli-")]
    rows = lake.read_rows("eval_episodes", partition)  # whole: the partition is replaced atomically
    assert {r["scenario_id"] for r in seen} <= {r["scenario_id"] for r in rows}
    ids = [(r["model"], r["scenario_id"], r["sample_index"]) for r in rows]
    assert len(ids) == len(set(ids)) and all(r["clean"] for r in rows)
