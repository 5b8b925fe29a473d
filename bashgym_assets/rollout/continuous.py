"""Continuous batching for greedy multi-turn decoding: conversations join and leave the running batch between
decode steps (issue 11).

``KVGenerator.generate`` decodes a turn's replies in lockstep: the call lasts until its longest reply ends, and
the episodes whose replies ended early wait for it, then for their sandbox, then for the next call. On a CPU the
cost of a decode step grows slowly with the rows in it (SmolLM2-135M on 2 cores: ~72 ms for 1 row, ~190 ms for 8,
~250 ms for 32; ``benchmarks/bench_kv_decode.py``), so what matters is keeping many rows busy on every step.
``ContinuousDecoder`` does that: a reply that ends leaves the batch at once (its episode runs the command in its
sandbox while the others go on decoding), and the episode's next prompt joins the running batch as soon as it is
submitted, without waiting for the slowest reply of the turn. What bounds the wall time is then the total number of
tokens over the rows in flight, or the longest single episode's chain of tokens, whichever is larger.

How the batch is kept: per layer one key and one value buffer ``[slots, heads, columns, head_dim]``; live rows sit
in slots ``0..n-1`` and every row writes its next token at the same column ``P`` (left padding: row ``i`` holds its
``length[i]`` tokens in columns ``P - length[i] .. P-1``; an attention mask hides the rest, position ids are each
row's true positions). A joining conversation is prefilled on its own, reusing its stored cache of the previous
turn (``KVGenerator._prefill``: only the new observation is read), and copied into a free slot; a finished row is
stored for its next turn (``KVCacheStore``) and the last live row moves into its slot. The buffers are rebuilt
(rows re-aligned, padding columns trimmed) only when a joiner is longer than ``P``, the columns run out or the
slots do.

Drafting, in a second lane: a decode step of one row costs nearly what a step of eight does (it reads every weight
from memory either way), so a row whose next tokens are predictable should not advance one token a step. Rows can
draft tokens by prompt lookup (the continuation of the latest earlier occurrence of the row's last few tokens in its
own transcript: a command typed again, a path from an observation, a repeated line of babble) and verify the drafts
in the same forward pass, keeping the longest prefix that greedy decoding would have produced anyway (columns of
rejected drafts are masked out for good and dropped at the next rebuild). Drafting widens the pass for every row in
it, so it runs in a fast lane of its own (buffers and ``P`` of its own, at most ``SPEC_MAX_ROWS`` rows): in the tail,
once the rows in flight fit there, all of them; before that, only rows whose tokens the lookup has kept predicting
(a reply looping on one line to the token cap, which otherwise holds its episode, the run's longest chain, to one
token per step for the whole run). A row moves between lanes with its cache (one copy of what it has read); a step
with both lanes busy costs two passes. Greedy only, the same argmax of the same logits as ``generate``: replies
equal the lockstep and one at a time paths up to floating-point summation order (near-ties can flip;
``tests/test_continuous.py``).
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from bashgym_assets.rollout.kv_generation import KVGenerator

# Prompt-lookup drafting (see the module docstring), in the fast lane: at most SPEC_MAX_ROWS rows, matching the
# row's last 3 (else 2) tokens. A row drafts SPEC_TOKENS tokens at first; each time all its drafts are confirmed
# it drafts twice as many (up to SPEC_MAX_TOKENS: a repeated line is confirmed whole), each time most are rejected
# half as many (down to 2): a wrong draft costs compute, and only few rows share it.
SPEC_MAX_ROWS = 4
SPEC_TOKENS = 8
SPEC_MAX_TOKENS = 32
SPEC_NGRAMS = (3, 2)
# A row of the main lane moves to the fast lane, while other rows keep the main lane busy, once the lookup has
# predicted its last FAST_STREAK tokens in a row (a line typed again, a loop): drafting then pays for the second
# forward pass a step costs. It moves back after FAST_MISSES steps in a row whose drafts were mostly rejected.
FAST_STREAK = 8
FAST_MISSES = 2
# Padding columns left of the longest row when a longer joiner forces a rebuild (joiners up to this much longer
# then fit without another one), and spare columns beyond a whole reply right of it.
JOIN_HEADROOM = 32


@functools.cache
def _slot_layer() -> type:
    """A ``DynamicLayer`` that is a view of a lane's buffers: ``update`` writes the step's keys and values at
    column ``P`` of the live slots, in place. Built on first use so that importing this module does not import
    transformers."""
    from transformers.cache_utils import DynamicLayer

    class SlotLayer(DynamicLayer):
        def __init__(self, keys: Any, values: Any) -> None:
            super().__init__()
            self.lazy_initialization(keys[:1, :, :1], values[:1, :, :1])
            self.buf_k, self.buf_v = keys, values
            self.rows = self.col = 0

        def view(self, rows: int, col: int) -> None:
            """The cache the model reads: the live rows, every column before ``col``."""
            self.rows, self.col = rows, col
            self.keys, self.values = self.buf_k[:rows, :, :col], self.buf_v[:rows, :, :col]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            add = key_states.shape[-2]
            self.buf_k[:self.rows, :, self.col:self.col + add] = key_states
            self.buf_v[:self.rows, :, self.col:self.col + add] = value_states
            self.view(self.rows, self.col + add)
            return self.keys, self.values

    return SlotLayer


@dataclass
class _Row:
    key: Hashable
    prompt: Any                  # 1-D LongTensor: the prompt's token ids
    length: int                  # tokens this row has read (the valid columns of its lane's mask)
    gen: list[int] = field(default_factory=list)
    submitted: float = 0.0
    first: int = 0               # its first column in its lane's buffers (valid columns lie in first .. P-1)
    history: list[int] = field(default_factory=list)  # prompt + gen as Python ints, for drafting
    span: int = SPEC_TOKENS      # how many tokens it drafts next (adapted to how many were confirmed)
    streak: int = 0              # tokens in a row the lookup predicted (main lane)
    misses: int = 0              # steps in a row whose drafts were mostly rejected (fast lane)
    # n-gram -> the position after its latest occurrence, over every n-gram of ``history`` but the last one:
    # kept up to date as tokens arrive, so a lookup costs a dict access instead of a scan of the transcript.
    index: dict[tuple[int, ...], int] = field(default_factory=dict)
    indexed: int = 0             # n-grams ending at positions up to here are in ``index``

    def _catch_up(self) -> None:
        seq = self.history
        for end in range(self.indexed + 1, len(seq)):
            for n in SPEC_NGRAMS:
                if end >= n:
                    self.index[tuple(seq[end - n:end])] = end
        self.indexed = max(self.indexed, len(seq) - 1)

    def draft(self, limit: int) -> list[int]:
        """Up to ``limit`` tokens that followed the latest earlier occurrence of the last few tokens. The copy may
        run into the tokens it drafts itself (as in LZ77): a line repeated with period p then drafts ``limit``
        tokens of its continuation, not just the p tokens between the occurrence and the end."""
        seq = self.history
        self._catch_up()
        for n in SPEC_NGRAMS:
            if len(seq) <= n:
                continue
            end = self.index.get(tuple(seq[-n:]))
            if end is not None:
                out: list[int] = []
                for i in range(end, end + max(0, limit)):
                    out.append(seq[i] if i < len(seq) else out[i - len(seq)])
                return out
        return []


@dataclass
class ContinuousStats:
    """Counters since the decoder was made (prefill reuse is counted on the ``KVGenerator``'s stats)."""

    decode_steps: int = 0
    row_steps: int = 0           # sum over decode steps of the rows in the batch
    drafted: int = 0             # prompt-lookup tokens proposed, and those greedy decoding confirmed
    accepted: int = 0
    rebuilds: int = 0
    joins: int = 0
    replies: int = 0
    moves: int = 0               # rows moved between the main and the fast lane
    split_steps: int = 0         # decode steps that ran both lanes (two forward passes)
    decode_s: float = 0.0

    @property
    def mean_rows(self) -> float:
        return self.row_steps / self.decode_steps if self.decode_steps else 0.0


class _Lane:
    """One set of slot buffers (per layer ``[slots, heads, columns, head_dim]``) with its own write column ``P``,
    its live rows in slots ``0..n-1`` and their mask; one forward pass a decode step."""

    def __init__(self, gen: KVGenerator, stats: ContinuousStats) -> None:
        self.gen, self.stats = gen, stats
        self.mask: Any = None  # [slots, columns]: 1 where a row's column holds a token it has read
        self.rows: list[_Row] = []
        self.col = 0           # P: the column the next forward pass writes
        self.cache: Any = None

    def _shape(self) -> tuple[int, int]:
        """(slots, columns) of the buffers; (0, 0) before the first row joins."""
        if self.cache is None:
            return 0, 0
        buf = self.cache.layers[0].buf_k
        return buf.shape[0], buf.shape[2]

    def fit(self, rows: int, length: int, max_rows: int, step: int = 1,
            kv: list[tuple[Any, Any]] | None = None) -> None:
        """Make the buffers hold ``rows`` rows, a row of ``length`` tokens ending at column P, and ``step`` columns
        to write from P; rebuild them when they do not, or when columns no row uses (padding left of the longest
        row, rejected drafts) are a quarter of the width: every decode step reads every column of every row."""
        slots, columns = self._shape()
        longest = max([length, *(r.length for r in self.rows)])
        waste = self.col - longest
        if (rows <= slots and length <= self.col and self.col + step <= columns
                and not (waste >= 128 and 4 * waste >= self.col)):
            return
        grow = min(max_rows, max(rows, 2 * slots, 4)) if rows > slots else slots
        width = longest + (JOIN_HEADROOM if length > self.col else 0)
        self._rebuild(width, grow, kv)

    def valid(self, s: int) -> Any:
        """The columns row ``s`` has read, in order."""
        import torch

        return torch.nonzero(self.mask[s, :self.col]).squeeze(1)

    def _rebuild(self, width: int, slots: int, kv: list[tuple[Any, Any]] | None) -> None:
        """New buffers with ``slots`` rows, every live row's tokens packed to end at column ``width``, and room for
        ``max_new_tokens`` + ``JOIN_HEADROOM`` decode steps before the next rebuild."""
        import torch
        from transformers.cache_utils import DynamicCache

        columns = width + self.gen.max_new_tokens + JOIN_HEADROOM + SPEC_MAX_TOKENS
        like = [(layer.buf_k, layer.buf_v) for layer in self.cache.layers] if self.cache is not None else kv
        valid = [self.valid(s) for s in range(len(self.rows))] if self.cache is not None else []
        layer_cls = _slot_layer()
        layers = []
        for i, (k0, v0) in enumerate(like):
            keys = k0.new_zeros((slots, k0.shape[1], columns, k0.shape[3]))
            values = v0.new_zeros((slots, v0.shape[1], columns, v0.shape[3]))
            if self.cache is not None:
                src = self.cache.layers[i]
                for s, row in enumerate(self.rows):
                    keys[s, :, width - row.length:width] = src.buf_k[s].index_select(1, valid[s])
                    values[s, :, width - row.length:width] = src.buf_v[s].index_select(1, valid[s])
            layers.append(layer_cls(keys, values))
        mask = torch.zeros((slots, columns), dtype=torch.long, device=like[0][0].device)
        for s, row in enumerate(self.rows):
            mask[s, width - row.length:width] = 1
            row.first = width - row.length
        cache = DynamicCache()
        cache.layers = layers
        self.cache, self.col, self.mask = cache, width, mask
        self.stats.rebuilds += 1

    def insert(self, row: _Row, kv: list[tuple[Any, Any]], max_rows: int) -> None:
        """Copy a conversation's cache (``[1, heads, row.length, head_dim]`` per layer) into the next free slot,
        ending at column P."""
        self.fit(len(self.rows) + 1, row.length, max_rows, kv=kv)
        s = len(self.rows)
        for layer, (k, v) in zip(self.cache.layers, kv, strict=True):
            layer.buf_k[s, :, self.col - row.length:self.col] = k[0]
            layer.buf_v[s, :, self.col - row.length:self.col] = v[0]
        self.mask[s] = 0
        self.mask[s, self.col - row.length:self.col] = 1
        row.first = self.col - row.length
        self.rows.append(row)

    def kv_of(self, s: int) -> list[tuple[Any, Any]]:
        """What row ``s`` has read, as a cache of one conversation (per layer ``[1, heads, length, head_dim]``)."""
        valid = self.valid(s)
        return [(layer.buf_k[s].index_select(1, valid).unsqueeze(0),
                 layer.buf_v[s].index_select(1, valid).unsqueeze(0)) for layer in self.cache.layers]

    def remove(self, s: int) -> None:
        """Drop row ``s``: the last live row moves into its slot (its columns from its first on)."""
        last = len(self.rows) - 1
        if s != last:
            moved = self.rows[last]
            lo = moved.first
            for layer in self.cache.layers:
                layer.buf_k[s, :, lo:self.col] = layer.buf_k[last, :, lo:self.col]
                layer.buf_v[s, :, lo:self.col] = layer.buf_v[last, :, lo:self.col]
            self.mask[s] = 0
            self.mask[s, lo:self.col] = self.mask[last, lo:self.col]
            self.rows[s] = moved
        self.rows.pop()

    def forward(self, drafts: list[list[int]], max_rows: int) -> list[list[int]]:
        """One forward pass over the lane: each row's last token and its drafted tokens (all rows feed the same
        number of columns; padding columns are masked out afterwards). Returns greedy's next token at each column,
        ``[rows][columns]``; the caller keeps what is confirmed (``confirm``)."""
        import torch

        n = len(self.rows)
        q = 1 + max(len(d) for d in drafts)
        self.fit(n, 0, max_rows, step=q)  # q columns to write at P (and no great waste of columns)
        dev = self.mask.device  # the model's (the buffers were made like its keys and values)
        lengths = torch.tensor([r.length for r in self.rows], dtype=torch.long, device=dev)
        mask = torch.cat([self.mask[:n, :self.col], torch.ones((n, q), dtype=torch.long, device=dev)], dim=1)
        for layer in self.cache.layers:
            layer.view(n, self.col)
        tokens = torch.tensor([[r.gen[-1], *d, *[r.gen[-1]] * (q - 1 - len(d))]
                               for r, d in zip(self.rows, drafts, strict=True)], device=dev)
        positions = lengths.unsqueeze(1) + torch.arange(q, device=dev).unsqueeze(0)
        result = self.gen.model(input_ids=tokens, attention_mask=mask, position_ids=positions,
                                past_key_values=self.cache, use_cache=True)
        return torch.argmax(result.logits.float(), dim=-1).tolist()

    def confirm(self, s: int, added: int, q: int) -> None:
        """Row ``s`` keeps its first ``added`` of the pass's ``q`` columns (its last token and the confirmed
        drafts); the rest are masked out for good."""
        self.mask[s, self.col:self.col + q] = 0
        self.mask[s, self.col:self.col + added] = 1
        self.rows[s].length += added


class ContinuousDecoder:
    """Greedy decoding of many conversations at once, each joining and leaving the batch on its own (see the
    module docstring). ``submit`` a prompt, call ``step`` until it returns the reply: the new tokens, up to and
    including the end-of-turn token, at most the generator's ``max_new_tokens``.

    Two lanes, each with buffers of its own: the main lane decodes one token a row a step; the fast lane (at most
    ``SPEC_MAX_ROWS`` rows) drafts by prompt lookup and verifies the drafts in the same pass. Once the rows in
    flight fit in the fast lane they all decode there (the tail: one pass a step); before that only rows whose
    tokens the lookup keeps predicting (a repeated line) move there, so a looping reply does not hold its episode,
    the longest chain of the run, to one token a step. A step with both lanes busy costs two forward passes."""

    def __init__(self, gen: KVGenerator, max_rows: int = 32, speculate: bool = True):
        self.gen = gen
        self.max_rows = max(1, max_rows)
        self.speculate = speculate
        self.pending: deque[_Row] = deque()
        self.stats = ContinuousStats()
        self.main = _Lane(gen, self.stats)
        self.fast = _Lane(gen, self.stats)

    @property
    def rows(self) -> list[_Row]:
        """The rows in flight, both lanes."""
        return self.main.rows + self.fast.rows

    @property
    def busy(self) -> bool:
        return bool(self.main.rows or self.fast.rows or self.pending)

    def submit(self, key: Hashable, prompt: list[int]) -> None:
        import torch

        self.pending.append(_Row(key=key, prompt=torch.tensor(prompt, dtype=torch.long), length=len(prompt),
                                 submitted=time.perf_counter(), history=list(prompt)))

    def step(self) -> list[tuple[Hashable, list[int], float]]:
        """Admit waiting prompts (while slots are free), run one decode step over the batch, and hand back the
        replies that ended: ``(key, new token ids, seconds since it was submitted)``."""
        import torch

        out: list[tuple[Hashable, list[int], float]] = []
        with torch.no_grad():
            while self.pending and len(self.main.rows) + len(self.fast.rows) < self.max_rows:
                row = self.pending.popleft()
                t0 = time.perf_counter()
                kv, logits = self.gen._prefill(row.prompt)
                self.gen.stats.prefill_s += time.perf_counter() - t0
                self.gen.stats.prompts += 1
                self.gen.stats.prompt_tokens += len(row.prompt)
                row.gen.append(int(torch.argmax(logits.float())))
                row.history.append(row.gen[-1])
                if self._ended(row):
                    self.gen.store.put(row.prompt, [(k.clone(), v.clone()) for k, v in kv])
                    out.append(self._reply(row))
                    continue
                tail = (self.speculate and not self.main.rows
                        and len(self.fast.rows) + 1 + len(self.pending) <= SPEC_MAX_ROWS)
                (self.fast if tail else self.main).insert(row, kv, self.max_rows)
                self.stats.joins += 1
            if self.speculate:
                self._balance()
            if self.main.rows or self.fast.rows:
                self._decode(out)
        return out

    # ---- internals --------------------------------------------------------------------------------------------
    def _ended(self, row: _Row) -> bool:
        return row.gen[-1] in self.gen.stop_ids or len(row.gen) >= self.gen.max_new_tokens

    def _reply(self, row: _Row) -> tuple[Hashable, list[int], float]:
        self.stats.replies += 1
        return row.key, row.gen, time.perf_counter() - row.submitted

    def _move(self, src: _Lane, s: int, dst: _Lane) -> None:
        row = src.rows[s]
        kv = src.kv_of(s)
        src.remove(s)
        row.streak = row.misses = 0
        dst.insert(row, kv, self.max_rows)
        self.stats.moves += 1

    def _balance(self) -> None:
        """Which rows decode in the fast lane this step: every row once they all fit there (the tail); otherwise
        the main lane's rows the lookup keeps predicting, and the fast lane gives back rows whose drafts keep
        failing."""
        if len(self.main.rows) + len(self.fast.rows) <= SPEC_MAX_ROWS:
            while self.main.rows:
                self._move(self.main, len(self.main.rows) - 1, self.fast)
            return
        for s in range(len(self.fast.rows) - 1, -1, -1):
            if self.fast.rows[s].misses >= FAST_MISSES:
                self._move(self.fast, s, self.main)
        for s in range(len(self.main.rows) - 1, -1, -1):
            if len(self.fast.rows) >= SPEC_MAX_ROWS:
                break
            if self.main.rows[s].streak >= FAST_STREAK and len(self.main.rows) > 1:
                self._move(self.main, s, self.fast)

    def _decode(self, out: list[tuple[Hashable, list[int], float]]) -> None:
        """One decode step: a forward pass in each busy lane; replies that ended leave."""
        t0 = time.perf_counter()
        lanes = [lane for lane in (self.main, self.fast) if lane.rows]
        for lane in lanes:
            self._pass(lane, drafting=lane is self.fast, out=out)
        n = sum(len(lane.rows) for lane in lanes)
        self.stats.decode_steps += 1
        self.stats.split_steps += len(lanes) == 2
        self.stats.row_steps += n
        self.gen.stats.decode_steps += 1
        spent = time.perf_counter() - t0
        self.stats.decode_s += spent
        self.gen.stats.decode_s += spent

    def _pass(self, lane: _Lane, drafting: bool, out: list[tuple[Hashable, list[int], float]]) -> None:
        n = len(lane.rows)
        drafts: list[list[int]] = [[] for _ in lane.rows]
        predicted: list[int | None] = [None] * n
        if drafting:
            drafts = [r.draft(min(r.span, self.gen.max_new_tokens - len(r.gen) - 1)) for r in lane.rows]
        elif self.speculate:  # what the lookup would draft next, to spot rows worth moving to the fast lane
            predicted = [(d[0] if (d := r.draft(1)) else None) for r in lane.rows]
        best = lane.forward(drafts, self.max_rows)
        q = len(best[0])
        finished = []
        for s, (row, draft) in enumerate(zip(lane.rows, drafts, strict=True)):
            added = 0
            for j in range(q):  # column j's output is real while every draft before it was confirmed
                row.gen.append(int(best[s][j]))
                row.history.append(row.gen[-1])
                added += 1
                if self._ended(row):
                    finished.append(s)
                    break
                if j >= len(draft) or draft[j] != best[s][j]:
                    break
            if drafting:
                self.stats.drafted += len(draft)
                self.stats.accepted += added - 1
                if draft and added - 1 == len(draft):
                    row.span = min(SPEC_MAX_TOKENS, 2 * row.span)
                elif draft and 2 * (added - 1) < len(draft):
                    row.span = max(2, row.span // 2)
                row.misses = row.misses + 1 if (not draft or 2 * (added - 1) < len(draft)) else 0
            else:
                row.streak = row.streak + 1 if predicted[s] == row.gen[-1] else 0
            lane.confirm(s, added, q)
        lane.col += q
        for s in reversed(finished):  # highest slot first: moving the last row never moves a finished one
            self._store(lane, s)
            out.append(self._reply(lane.rows[s]))
            lane.remove(s)

    def _store(self, lane: _Lane, s: int) -> None:
        """Keep what row ``s`` has read (its prompt and every generated token but the last) for its next turn."""
        import torch

        row = lane.rows[s]
        self.gen.store.put(torch.cat([row.prompt, torch.tensor(row.gen[:-1], dtype=torch.long)]), lane.kv_of(s))
