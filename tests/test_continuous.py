"""Continuous batching (inference.continuous): conversations that join and leave the running batch at different
times get the same greedy replies, token for token, as one conversation at a time through plain ``generate``; the
buffers are rebuilt when a joiner is longer than the batch, trimmed of padding, grown in slots; a decoder failure
falls back to the plain path without losing a conversation."""

from __future__ import annotations

from pathlib import Path

import pytest
from conversations import OBSERVATIONS as BASE_OBSERVATIONS
from conversations import TASKS as BASE_TASKS
from conversations import start

from bashgym_assets.inference.continuous import ContinuousDecoder
from bashgym_assets.inference.kv_decode import KVGenerator
from bashgym_assets.rollout.operators import LocalModelOperator, Reply
from bashgym_assets.rollout.transcript import Message
from bashgym_assets.testing.tiny_model import build_tiny_model

TASKS = [*BASE_TASKS, "rename every .jpeg in photos/ to .jpg " * 6, "x"]
OBSERVATIONS = [*BASE_OBSERVATIONS[:3], "done\n" * 30, *BASE_OBSERVATIONS[4:]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("cont") / "model")


def observe(conv: list[Message], reply: str, i: int) -> None:
    conv.append(Message(role="assistant", content=reply))
    conv.append(Message(role="user", content=OBSERVATIONS[(i + len(conv)) % len(OBSERVATIONS)] * (1 + i % 3)))


def drain(dec: ContinuousDecoder, prompts: list[list[int]]) -> list[list[int]]:
    """Submit every prompt at once and step the decoder until each reply is back, in prompt order."""
    for i, p in enumerate(prompts):
        dec.submit(i, p)
    got: dict[int, list[int]] = {}
    while dec.busy:
        for key, ids, _ in dec.step():
            got[key] = ids
    return [got[i] for i in range(len(prompts))]


def one_at_a_time(tiny: Path, max_new_tokens: int, turns: int) -> list[list[tuple[str, int, bool]]]:
    """Reference: each conversation alone, plain ``generate`` (no KV reuse), batch of one."""
    plain = LocalModelOperator(tiny, max_new_tokens=max_new_tokens, kv_cache=False, micro_batch=1)
    out = []
    for i, task in enumerate(TASKS):
        conv, got = start(task), []
        for _ in range(turns):
            r = plain.replies([conv])[0]
            got.append((r.text, r.new_tokens, r.truncated))
            observe(conv, r.text, i)
        out.append(got)
    return out


def streamed(
    op: LocalModelOperator, turns: int, max_rows: int, stagger: int = 3
) -> tuple[list[list[tuple[str, int, bool]]], object]:
    """Every conversation through one reply stream, joining ``stagger`` decode steps apart and resubmitted as soon
    as its reply ends (as the evaluation does), so rows join and leave a running batch."""
    stream = op.reply_stream(max_rows=max_rows)
    assert stream is not None and stream.decoder is not None
    convs = [start(t) for t in TASKS]
    got: list[list[tuple[str, int, bool]]] = [[] for _ in TASKS]
    waiting = list(range(len(TASKS)))
    steps = 0
    while waiting or stream.busy:
        if waiting and steps % stagger == 0:
            i = waiting.pop(0)
            stream.submit(i, convs[i])
        for i, reply, seconds in stream.step():
            assert reply.error is None and seconds >= 0
            got[i].append((reply.text, reply.new_tokens, reply.truncated))
            if len(got[i]) < turns:
                observe(convs[i], reply.text, i)
                stream.submit(i, convs[i])
        steps += 1
    return got, stream.stats


@pytest.mark.parametrize("max_new_tokens, max_rows", [(6, 3), (24, 32)])
def test_continuous_replies_identical_to_one_at_a_time(
    tiny: Path, max_new_tokens: int, max_rows: int
) -> None:
    want = one_at_a_time(tiny, max_new_tokens, turns=3)
    op = LocalModelOperator(tiny, max_new_tokens=max_new_tokens, kv_cache=True)
    got, dec = streamed(op, turns=3, max_rows=max_rows)
    assert got == want
    stats = op._kv.stats
    assert (
        stats.reused_tokens > 0 and stats.prefilled_tokens < stats.prompt_tokens
    )  # turns 2-3 read only what is new
    assert dec.replies == 3 * len(TASKS) and dec.decode_steps > 0


def test_rows_join_a_running_batch_and_buffers_are_rebuilt(tiny: Path) -> None:
    op = LocalModelOperator(tiny, max_new_tokens=16, kv_cache=True)
    stream = op.reply_stream(max_rows=4)
    decoder: ContinuousDecoder = stream.decoder
    convs = [start(t) for t in TASKS]
    for i, c in enumerate(convs):
        stream.submit(i, c)
    seen_rows = set()
    replies = {}
    while stream.busy:
        seen_rows.add(len(decoder.rows))
        for i, reply, _ in stream.step():
            replies[i] = reply
    assert set(replies) == set(range(len(TASKS)))
    assert max(seen_rows) == 4  # never more rows than asked for, and the slots were used
    assert decoder.stats.joins == len(TASKS) - sum(1 for r in replies.values() if r.new_tokens == 0)
    assert decoder.stats.rebuilds >= 1 and decoder.stats.mean_rows > 1


def test_decoder_directly_matches_kv_generator_lockstep(tiny: Path) -> None:
    """The decoder against the lockstep ``KVGenerator.generate`` on the same prompts (one call, all at once)."""
    op = LocalModelOperator(tiny, max_new_tokens=12, kv_cache=True)
    model, tok = op._load()
    prompts = [op._encode(tok, [m.model_dump() for m in start(t)]) for t in TASKS]
    stop = op._stop_ids(tok)
    want = KVGenerator(model, stop, stop[0], 12).generate(prompts)
    assert drain(ContinuousDecoder(KVGenerator(model, stop, stop[0], 12), max_rows=2), prompts) == want


def test_a_failing_decoder_falls_back_to_plain_replies(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = [
        r.text
        for r in LocalModelOperator(tiny, max_new_tokens=8, kv_cache=False, micro_batch=1).replies(
            [start(TASKS[0])]
        )
    ] + [
        r.text
        for r in LocalModelOperator(tiny, max_new_tokens=8, kv_cache=False, micro_batch=1).replies(
            [start(TASKS[1])]
        )
    ]
    op = LocalModelOperator(tiny, max_new_tokens=8, kv_cache=True)
    stream = op.reply_stream()
    stream.submit("a", start(TASKS[0]))
    stream.submit("b", start(TASKS[1]))

    def broken(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr(stream.decoder, "step", broken)
    got: dict[str, Reply] = {}
    while stream.busy:
        for key, reply, _ in stream.step():
            got[key] = reply
    assert [got["a"].text, got["b"].text] == want
    assert op.kv_fallback and "boom" in op.kv_fallback and stream.fallback == op.kv_fallback
    assert op.reply_stream() is None  # given up for this operator: callers use ``replies``


def test_no_stream_when_sampling_or_switched_off(tiny: Path) -> None:
    assert (
        LocalModelOperator(tiny, temperature=0.7).reply_stream() is not None
    )  # sampled rows: their own draws
    assert LocalModelOperator(tiny, kv_cache=False).reply_stream() is None


def test_prompt_lookup_finds_the_latest_earlier_occurrence() -> None:
    from bashgym_assets.inference.continuous import _Row

    row = _Row(key=0, prompt=None, length=0, history=[5, 6, 7, 1, 2, 5, 6, 7, 3, 4, 9, 5, 6, 7])
    assert row.draft(3) == [3, 4, 9]  # after the latest earlier "5 6 7", not the first one
    assert row.draft(1) == [3]
    assert _Row(key=0, prompt=None, length=0, history=[1, 2, 3, 4]).draft(4) == []  # no repeat, no draft
    assert _Row(key=0, prompt=None, length=0, history=[8, 9, 1, 8, 9]).draft(4) == [
        1,
        8,
        9,
        1,
    ]  # 2-gram fallback
    # a repeated line (period 3) drafts its continuation as far as asked, not just to the end of what is there
    assert _Row(key=0, prompt=None, length=0, history=[0, 4, 5, 6, 4, 5, 6, 4, 5]).draft(7) == [
        6,
        4,
        5,
        6,
        4,
        5,
        6,
    ]


@pytest.mark.parametrize("drafts", ["oracle", "garbage"])
def test_drafts_are_verified_not_trusted(tiny: Path, monkeypatch: pytest.MonkeyPatch, drafts: str) -> None:
    """Whatever is drafted, the replies are greedy's: right drafts are kept (fewer forward passes than tokens),
    wrong ones are rejected and their columns masked out, over several rows of different lengths."""
    from bashgym_assets.inference import continuous

    op = LocalModelOperator(tiny, max_new_tokens=40, kv_cache=True)
    model, tok = op._load()
    stop = op._stop_ids(tok)
    prompts = [op._encode(tok, [m.model_dump() for m in start(t)]) for t in TASKS[:4]]
    want = KVGenerator(model, stop, stop[0], 40).generate(prompts)
    truth = {tuple(p): w for p, w in zip(prompts, want, strict=True)}

    def draft(row: continuous._Row, limit: int) -> list[int]:
        done = len(row.gen)
        if drafts == "garbage":
            return [(t + 1) % 50 for t in truth[tuple(row.prompt.tolist())][done : done + limit]]
        nxt = truth[tuple(row.prompt.tolist())][done : done + limit]
        return nxt[:-1] + [(nxt[-1] + 1) % 50] if len(nxt) > 2 else nxt  # mostly right, the last one wrong

    monkeypatch.setattr(continuous._Row, "draft", draft)
    dec = ContinuousDecoder(KVGenerator(model, stop, stop[0], 40), max_rows=4)
    assert drain(dec, prompts) == want
    assert dec.stats.drafted > 0
    if drafts == "oracle":
        assert dec.stats.accepted > 0 and dec.stats.decode_steps < max(len(w) for w in want)
    else:
        assert dec.stats.accepted == 0


def test_rows_x_draft_holes_survive_a_rebuild_and_a_next_turn(tiny: Path) -> None:
    """Rejected drafts leave masked holes; a later rebuild packs the row and its next turn reuses the stored
    cache: still the same replies as one at a time."""
    want = one_at_a_time(tiny, 30, turns=3)
    op = LocalModelOperator(tiny, max_new_tokens=30, kv_cache=True)
    got, dec = streamed(op, turns=3, max_rows=2, stagger=7)
    assert got == want
    assert dec.drafted > 0 and dec.rebuilds >= 2


def test_rows_with_their_own_budget_sampling_logprobs_and_cancel(tiny: Path) -> None:
    """What serving asks of the decoder: each row its own token budget (a prefix of the greedy reply), seeded
    sampling that draws the same tokens whatever else shares the batch, the log-probabilities of the chosen
    tokens, and ``cancel`` taking a row out mid-reply without disturbing the others."""
    op = LocalModelOperator(tiny, max_new_tokens=12, kv_cache=True)
    model, tok = op._load()
    prompts = [op._encode(tok, [m.model_dump() for m in start(t)]) for t in TASKS]
    stop = op._stop_ids(tok)
    want = KVGenerator(model, stop, stop[0], 12).generate(prompts)
    budgets = [3, 12, 7, 1, 12, 5, 9][: len(prompts)] + [12] * max(0, len(prompts) - 7)
    dec = ContinuousDecoder(KVGenerator(model, stop, stop[0], 12), max_rows=3)
    for i, (p, b) in enumerate(zip(prompts, budgets, strict=True)):
        dec.submit(i, p, max_new_tokens=b)
    got: dict[int, list[int]] = {}
    while dec.busy:
        for key, ids, _ in dec.step():
            got[key] = ids
    assert [got[i] for i in range(len(prompts))] == [w[:b] for w, b in zip(want, budgets, strict=True)]

    def sampled(seed: int, company: int) -> tuple[list[int], list]:
        d = ContinuousDecoder(KVGenerator(model, stop, stop[0], 12), max_rows=4)
        for i in range(company):  # greedy rows in the same batch
            d.submit(("greedy", i), prompts[i + 1])
        row = d.submit("sampled", prompts[0], 10, temperature=1.0, seed=seed, top_logprobs=2)
        out = {}
        while d.busy:
            out.update({key: ids for key, ids, _ in d.step()})
        return out["sampled"], row.logprobs

    alone, lps = sampled(5, 0)
    assert sampled(5, 3)[0] == alone  # the same draws in a full batch
    assert sampled(6, 0)[0] != alone  # another seed, another sample
    assert len(lps) == len(alone) and all(len(top) == 2 and lp <= 0 for lp, top, _ in lps)
    d = ContinuousDecoder(KVGenerator(model, stop, stop[0], 12))
    g = d.submit("g", prompts[1], top_logprobs=1)
    while d.busy:
        d.step()
    assert (
        g.gen == want[1] and [top[0] for _, top, _ in g.logprobs] == g.gen
    )  # the argmax is the chosen token
    assert all(lp == pytest.approx(tops[0]) for lp, _, tops in g.logprobs)

    longest = max(range(len(prompts)), key=lambda i: len(want[i]))
    keep = next(i for i in range(len(prompts)) if i != longest)
    assert len(want[longest]) > 3
    d = ContinuousDecoder(KVGenerator(model, stop, stop[0], 12), max_rows=4, speculate=False)
    d.submit("keep", prompts[keep])
    d.submit("drop", prompts[longest])
    d.step()
    d.step()
    partial = d.cancel("drop")
    assert partial == want[longest][:3] and d.cancel("drop") is None
    assert d.stats.cancelled == 1 and [r.key for r in d.rows] == (["keep"] if len(want[keep]) > 3 else [])
    out = {}
    while d.busy:
        out.update({key: ids for key, ids, _ in d.step()})
    assert out.get("keep", want[keep]) == want[keep] and "drop" not in out


def test_each_row_is_charged_its_share_of_every_step(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an episode's time cap counts (the evaluation's ``time_cap="share"``): a row decoded beside another is
    charged half of each decode step, one decoded alone all of it, and each its own prefill; a row's charge grows
    while it is generated and is handed back with its reply (``last_charged``)."""
    from bashgym_assets.inference import continuous

    class Clock:  # every reading one second after the last: each prefill and each decode step takes 1 s
        now = 0.0

        def perf_counter(self) -> float:
            self.now += 1.0
            return self.now

    op = LocalModelOperator(tiny, max_new_tokens=12, kv_cache=True)
    model, tok = op._load()
    stop = op._stop_ids(tok)
    prompts = [op._encode(tok, [m.model_dump() for m in start(t)]) for t in TASKS]
    want = KVGenerator(model, stop, stop[0], 12).generate(prompts)
    longest = max(range(len(prompts)), key=lambda i: len(want[i]))
    assert len(want[longest]) >= 3
    monkeypatch.setattr(continuous, "time", Clock())

    def charges(rows: int) -> tuple[dict[int, float], list[float | None]]:
        d = ContinuousDecoder(KVGenerator(model, stop, stop[0], 12), max_rows=4, speculate=False)
        for i in range(rows):
            d.submit(i, prompts[longest])
        got: dict[int, float] = {}
        seen: list[float | None] = [d.charged(0)]
        while d.busy:
            ended = d.step()
            got.update({key: d.last_charged[key] for key, _, _ in ended})
            seen.append(d.charged(0))
        return got, seen

    alone, seen = charges(1)
    pair, _ = charges(2)
    steps = len(want[longest]) - 1  # the first token comes from the prefill
    assert alone == {0: 1.0 + steps}
    assert pair == {0: pytest.approx(1.0 + steps / 2), 1: pytest.approx(1.0 + steps / 2)}
    assert seen[0] == 0.0 and seen[-1] is None  # waiting for a slot costs nothing; an ended row is gone
    middle = [c for c in seen[1:-1] if c is not None]
    assert len(middle) == len(seen) - 2 and middle == sorted(middle)  # it grows while it is generated
