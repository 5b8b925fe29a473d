"""Continuous batching for greedy multi-turn decoding: conversations join and leave the running batch between
decode steps (issue 11).

``KVGenerator.generate`` decodes a turn's replies in lockstep: the call lasts until its longest reply ends, and
the episodes whose replies ended early wait for it, then for their sandbox, then for the next call. On a CPU the
cost of a decode step grows slowly with the rows in it (far less than in proportion: ``benchmarks/bench_kv_decode.py``
and BENCHMARKS.md), so what matters is keeping many rows busy on every step.
``ContinuousDecoder`` does that: a reply that ends leaves the batch at once (its episode runs the command in its
sandbox while the others go on decoding), and the episode's next prompt joins the running batch as soon as it is
submitted, without waiting for the slowest reply of the turn. What bounds the wall time is then the total number of
tokens over the rows in flight, or the longest single episode's chain of tokens, whichever is larger.

How the batch is kept: per layer one key and one value buffer ``[slots, heads, columns, head_dim]``; live rows sit
in slots ``0..n-1`` and every row writes its next token at the same column ``P`` (left padding: row ``i`` holds its
``length[i]`` tokens in columns ``P - length[i] .. P-1``; an attention mask hides the rest, position ids are each
row's true positions). A joining conversation is prefilled on its own, reusing its stored cache of the previous
turn (``KVGenerator.prefill``: only the new observation is read), and copied into a free slot; a finished row is
stored for its next turn (``KVCacheStore``) and the last live row moves into its slot. The buffers are rebuilt
(rows re-aligned, padding columns trimmed) only when a joiner is longer than ``P``, the columns run out or the
slots do.

The tail: once most episodes have ended, a few long ones decode alone, and a decode step of one row costs nearly
what a step of eight does (it reads every weight from memory either way). There the decoder drafts tokens by
prompt lookup (the continuation of the latest earlier occurrence of the row's last few tokens in its own
transcript: a command typed again, a path from an observation, a repeated line of babble) and verifies the drafts
in the same forward pass, keeping the longest prefix that greedy decoding would have produced anyway (columns of
rejected drafts are masked out for good and dropped at the next rebuild). Greedy rows take the same argmax of the
same logits as ``generate``: replies equal the lockstep and one at a time paths up to floating-point summation order
(near-ties can flip; ``tests/test_continuous.py``).

Serving (``bashgym serve``, ``serving.batching``) uses the same decoder with a few per-row options that the
evaluation leaves at their defaults: a row's own token budget (``max_new_tokens``), sampling (``temperature`` /
``top_p`` from the row's own ``torch.Generator``, seeded by ``seed``: a seeded row draws the same tokens whatever
else is in the batch; sampled rows never draft), the log-probabilities of the tokens it chose (``top_logprobs``),
and ``cancel`` (a client went away, a stop string was met: the row leaves the batch at once, its slot is free for
the next step). ``submit`` returns the row, whose ``gen`` grows as the decoder steps (what a stream reads).

Kept rather than transformers' own continuous batching (``generate_batch``): it wins in the same run on the same
requests (``benchmarks/generation_vs_transformers.py``), and theirs lacks KV reuse across turns, per-row seeds and
top log-probabilities (``bashgym_assets/inference/__init__.py`` says why in full).
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from bashgym_assets.inference.kv_decode import KVGenerator

# Prompt-lookup drafting (see the module docstring): only while at most this many rows decode, matching the row's
# last 3 (else 2) tokens. A row drafts SPEC_TOKENS tokens at first; each time all its drafts are confirmed it
# drafts twice as many (up to SPEC_MAX_TOKENS: a repeated line is confirmed whole), each time most are rejected
# half as many (down to 2): a wrong draft costs compute, and only few rows are left to share it.
SPEC_MAX_ROWS = 4
SPEC_TOKENS = 8
SPEC_MAX_TOKENS = 32
SPEC_NGRAMS = (3, 2)
# Padding columns left of the longest row when a longer joiner forces a rebuild (joiners up to this much longer
# then fit without another one), and spare columns beyond a whole reply right of it.
JOIN_HEADROOM = 32


@functools.cache
def _slot_layer() -> type:
    """A ``DynamicLayer`` that is a view of the decoder's buffers: ``update`` writes the step's keys and values at
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
            self.buf_k[: self.rows, :, self.col : self.col + add] = key_states
            self.buf_v[: self.rows, :, self.col : self.col + add] = value_states
            self.view(self.rows, self.col + add)
            return self.keys, self.values

    return SlotLayer


@dataclass
class _Row:
    key: Hashable
    prompt: Any  # 1-D LongTensor: the prompt's token ids
    length: int  # tokens this row has read (the valid columns of its mask)
    gen: list[int] = field(default_factory=list)
    submitted: float = 0.0
    # the decoder's time this row is charged: its own prefill, and each decode step's time divided among the rows
    # of that step (what an episode's time cap counts: not the time it waited on the other rows of the batch)
    charged: float = 0.0
    first: int = 0  # its first column in the buffers (valid columns lie in first .. P-1)
    history: list[int] = field(default_factory=list)  # prompt + gen as Python ints, for drafting
    span: int = SPEC_TOKENS  # how many tokens it drafts next (adapted to how many were confirmed)
    limit: int = 0  # its token budget (0: the generator's max_new_tokens)
    temperature: float = 0.0  # > 0: sampled (with top_p, from rng) instead of greedy
    top_p: float = 1.0
    rng: Any = None  # the torch.Generator a sampled row draws from
    top_logprobs: int | None = None  # None: no log-probabilities; else how many alternatives per token
    # per generated token: (its log-probability, the top alternatives' ids, their log-probabilities)
    logprobs: list[tuple[float, list[int], list[float]]] = field(default_factory=list)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    def draft(self, limit: int) -> list[int]:
        """Up to ``limit`` tokens that followed the latest earlier occurrence of the last few tokens. The copy may
        run into the tokens it drafts itself (as in LZ77): a line repeated with period p then drafts ``limit``
        tokens of its continuation, not just the p tokens between the occurrence and the end."""
        seq = self.history
        for n in SPEC_NGRAMS:
            if len(seq) <= n:
                continue
            tail = seq[-n:]
            for start in range(len(seq) - n - 1, -1, -1):
                if seq[start : start + n] == tail:
                    out: list[int] = []
                    for i in range(start + n, start + n + max(0, limit)):
                        out.append(seq[i] if i < len(seq) else out[i - len(seq)])
                    return out
        return []


@dataclass
class ContinuousStats:
    """Counters since the decoder was made (prefill reuse is counted on the ``KVGenerator``'s stats)."""

    decode_steps: int = 0
    row_steps: int = 0  # sum over decode steps of the rows in the batch
    drafted: int = 0  # prompt-lookup tokens proposed, and those greedy decoding confirmed
    accepted: int = 0
    rebuilds: int = 0
    joins: int = 0
    replies: int = 0
    cancelled: int = 0  # rows taken out before their end (``cancel``)
    decode_s: float = 0.0

    @property
    def mean_rows(self) -> float:
        return self.row_steps / self.decode_steps if self.decode_steps else 0.0


class ContinuousDecoder:
    """Decoding of many conversations at once, each joining and leaving the batch on its own (see the module
    docstring). ``submit`` a prompt, call ``step`` until it returns the reply: the new tokens, up to and including
    the end-of-turn token, at most the row's budget (default the generator's ``max_new_tokens``)."""

    def __init__(self, gen: KVGenerator, max_rows: int = 32, speculate: bool = True):
        self.gen = gen
        self.max_rows = max(1, max_rows)
        self.speculate = speculate
        self.mask: Any = None  # [slots, columns]: 1 where a row's column holds a token it has read
        self.pending: deque[_Row] = deque()
        self.rows: list[_Row] = []
        self.col = 0  # P: the column the next decode step writes
        self.cache: Any = None
        self.stats = ContinuousStats()
        # the charged seconds (``_Row.charged``) of the replies the last ``step`` handed back, by key
        self.last_charged: dict[Hashable, float] = {}

    @property
    def busy(self) -> bool:
        return bool(self.rows or self.pending)

    def submit(
        self,
        key: Hashable,
        prompt: list[int],
        max_new_tokens: int | None = None,
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        top_logprobs: int | None = None,
    ) -> _Row:
        """Queue a prompt; it joins the batch at the next ``step`` with a free slot. Defaults: greedy, the
        generator's ``max_new_tokens``, no log-probabilities (the evaluation's rows)."""
        import torch

        row = _Row(
            key=key,
            prompt=torch.tensor(prompt, dtype=torch.long),
            length=len(prompt),
            submitted=time.perf_counter(),
            history=list(prompt),
            limit=max(1, max_new_tokens or self.gen.max_new_tokens),
            temperature=max(0.0, temperature),
            top_p=top_p,
            top_logprobs=top_logprobs,
        )
        if not row.greedy:
            row.rng = torch.Generator(device=getattr(self.gen.model, "device", None) or "cpu")
            if seed is None:
                row.rng.seed()
            else:
                row.rng.manual_seed(seed % 2**63)
        self.pending.append(row)
        return row

    def cancel(self, key: Hashable) -> list[int] | None:
        """Take a row out, waiting or decoding (its slot is free for the next step); the tokens it had generated,
        or None when no row has this key (it ended already)."""
        for i, row in enumerate(self.pending):
            if row.key == key:
                del self.pending[i]
                self.stats.cancelled += 1
                return row.gen
        for s, row in enumerate(self.rows):
            if row.key == key:
                self._remove(s)
                self.stats.cancelled += 1
                return row.gen
        return None

    def charged(self, key: Hashable) -> float | None:
        """The decoder's seconds charged so far to the reply being generated for ``key`` (0 while it waits for a
        slot), or None when no reply of that key is in flight."""
        for row in (*self.rows, *self.pending):
            if row.key == key:
                return row.charged
        return None

    def step(self) -> list[tuple[Hashable, list[int], float]]:
        """Admit waiting prompts (while slots are free), run one decode step over the batch, and hand back the
        replies that ended: ``(key, new token ids, seconds since it was submitted)``; what each was charged is in
        ``last_charged``."""
        import torch

        out: list[tuple[Hashable, list[int], float]] = []
        self.last_charged = {}
        with torch.no_grad():
            read: list[
                tuple[Any, list[tuple[Any, Any]], Any]
            ] = []  # this step's prefills: equal prompts share one
            while self.pending and len(self.rows) < self.max_rows:
                row = self.pending.popleft()
                t0 = time.perf_counter()
                same = next(
                    (r for r in read if len(r[0]) == len(row.prompt) and torch.equal(r[0], row.prompt)), None
                )
                if (
                    same is None
                ):  # (n samples of one prompt are prefilled once: _insert copies, nothing mutates)
                    kv, logits = self.gen.prefill(row.prompt)
                    read.append((row.prompt, kv, logits))
                else:
                    kv, logits = same[1], same[2]
                spent = time.perf_counter() - t0
                row.charged += spent
                self.gen.stats.prefill_s += spent
                self.gen.stats.prompts += 1
                self.gen.stats.prompt_tokens += len(row.prompt)
                row.gen.append(self._choose(row, logits))
                row.history.append(row.gen[-1])
                if self._ended(row):
                    self.gen.store.put(row.prompt, [(k.clone(), v.clone()) for k, v in kv])
                    out.append(self._reply(row))
                    continue
                self._insert(row, kv)
            if self.rows:
                self._decode(out)
        return out

    # ---- internals --------------------------------------------------------------------------------------------
    def _ended(self, row: _Row) -> bool:
        return row.gen[-1] in self.gen.stop_ids or len(row.gen) >= self._limit(row)

    def _limit(self, row: _Row) -> int:
        return row.limit or self.gen.max_new_tokens

    def _choose(self, row: _Row, logits: Any, greedy: int | None = None) -> int:
        """The row's next token from one position's logits: the argmax (``greedy`` when already computed) or a
        draw at the row's temperature and top-p from its own generator; its log-probabilities recorded if asked
        (the model's distribution, before temperature: what a confidence measure wants)."""
        import torch

        if row.greedy:
            token = greedy if greedy is not None else int(torch.argmax(logits.float()))
        else:
            scaled = logits.float() / row.temperature
            if row.top_p < 1.0:
                ordered, order = torch.sort(scaled, descending=True)
                probs = torch.softmax(ordered, dim=-1)
                drop = (
                    torch.cumsum(probs, dim=-1) - probs > row.top_p
                )  # the mass before it already covers top_p
                scaled = scaled.clone()
                scaled[order[drop]] = float("-inf")
            token = int(torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=row.rng))
        if row.top_logprobs is not None:
            dist = torch.log_softmax(logits.float(), dim=-1)
            top_ids: list[int] = []
            top_lps: list[float] = []
            if row.top_logprobs > 0:
                values, ids = torch.topk(dist, min(row.top_logprobs, dist.shape[-1]))
                top_ids, top_lps = ids.tolist(), values.tolist()
            row.logprobs.append((float(dist[token]), top_ids, top_lps))
        return token

    def _reply(self, row: _Row) -> tuple[Hashable, list[int], float]:
        self.last_charged[row.key] = row.charged
        self.stats.replies += 1
        return row.key, row.gen, time.perf_counter() - row.submitted

    def _shape(self) -> tuple[int, int]:
        """(slots, columns) of the buffers; (0, 0) before the first row joins."""
        if self.cache is None:
            return 0, 0
        buf = self.cache.layers[0].buf_k
        return buf.shape[0], buf.shape[2]

    def _fit(self, rows: int, length: int, step: int = 1, kv: list[tuple[Any, Any]] | None = None) -> None:
        """Make the buffers hold ``rows`` rows, a row of ``length`` tokens ending at column P, and ``step`` columns
        to write from P; rebuild them when they do not, or when columns no row uses (padding left of the longest
        row, rejected drafts) are a quarter of the width: every decode step reads every column of every row."""
        slots, columns = self._shape()
        longest = max([length, *(r.length for r in self.rows)])
        waste = self.col - longest
        if (
            rows <= slots
            and length <= self.col
            and self.col + step <= columns
            and not (waste >= 128 and 4 * waste >= self.col)
        ):
            return
        grow = min(self.max_rows, max(rows, 2 * slots, 4)) if rows > slots else slots
        width = longest + (JOIN_HEADROOM if length > self.col else 0)
        self._rebuild(width, grow, kv)

    def _valid(self, s: int) -> Any:
        """The columns row ``s`` has read, in order."""
        import torch

        return torch.nonzero(self.mask[s, : self.col]).squeeze(1)

    def _rebuild(self, width: int, slots: int, kv: list[tuple[Any, Any]] | None) -> None:
        """New buffers with ``slots`` rows, every live row's tokens packed to end at column ``width``, and room for
        ``max_new_tokens`` + ``JOIN_HEADROOM`` decode steps before the next rebuild."""
        import torch
        from transformers.cache_utils import DynamicCache

        columns = width + self.gen.max_new_tokens + JOIN_HEADROOM + SPEC_MAX_TOKENS
        like = [(layer.buf_k, layer.buf_v) for layer in self.cache.layers] if self.cache is not None else kv
        if like is None:  # the first rebuild shapes the buffers like the first row's prefilled cache
            raise ValueError("the first row to join needs its prefilled KV cache (kv)")
        valid = [self._valid(s) for s in range(len(self.rows))] if self.cache is not None else []
        layer_cls = _slot_layer()
        layers = []
        for i, (k0, v0) in enumerate(like):
            keys = k0.new_zeros((slots, k0.shape[1], columns, k0.shape[3]))
            values = v0.new_zeros((slots, v0.shape[1], columns, v0.shape[3]))
            if self.cache is not None:
                src = self.cache.layers[i]
                for s, row in enumerate(self.rows):
                    keys[s, :, width - row.length : width] = src.buf_k[s].index_select(1, valid[s])
                    values[s, :, width - row.length : width] = src.buf_v[s].index_select(1, valid[s])
            layers.append(layer_cls(keys, values))
        mask = torch.zeros((slots, columns), dtype=torch.long, device=like[0][0].device)
        for s, row in enumerate(self.rows):
            mask[s, width - row.length : width] = 1
            row.first = width - row.length
        cache = DynamicCache()
        cache.layers = layers
        self.cache, self.col, self.mask = cache, width, mask
        self.stats.rebuilds += 1

    def _insert(self, row: _Row, kv: list[tuple[Any, Any]]) -> None:
        """Copy a prefilled conversation into the next free slot, ending at column P."""
        self._fit(len(self.rows) + 1, row.length, kv=kv)
        s = len(self.rows)
        for layer, (k, v) in zip(self.cache.layers, kv, strict=True):
            layer.buf_k[s, :, self.col - row.length : self.col] = k[0]
            layer.buf_v[s, :, self.col - row.length : self.col] = v[0]
        self.mask[s] = 0
        self.mask[s, self.col - row.length : self.col] = 1
        row.first = self.col - row.length
        self.rows.append(row)
        self.stats.joins += 1

    def _decode(self, out: list[tuple[Hashable, list[int], float]]) -> None:
        """One forward pass: each row's last token, plus drafted tokens when few rows are left (all rows feed the
        same number of columns; a row's rejected or padding columns are masked out)."""
        import torch

        n = len(self.rows)
        drafts: list[list[int]] = [[] for _ in self.rows]
        if self.speculate and n <= SPEC_MAX_ROWS:
            drafts = [
                r.draft(min(r.span, self._limit(r) - len(r.gen) - 1)) if r.greedy else [] for r in self.rows
            ]
        q = 1 + max(len(d) for d in drafts)
        self._fit(n, 0, step=q)  # q columns to write at P (and no great waste of columns)
        t0 = time.perf_counter()
        dev = self.mask.device  # the model's (the buffers were made like its keys and values)
        lengths = torch.tensor([r.length for r in self.rows], dtype=torch.long, device=dev)
        mask = torch.cat([self.mask[:n, : self.col], torch.ones((n, q), dtype=torch.long, device=dev)], dim=1)
        for layer in self.cache.layers:
            layer.view(n, self.col)
        tokens = torch.tensor(
            [
                [r.gen[-1], *d, *[r.gen[-1]] * (q - 1 - len(d))]
                for r, d in zip(self.rows, drafts, strict=True)
            ],
            device=dev,
        )
        positions = lengths.unsqueeze(1) + torch.arange(q, device=dev).unsqueeze(0)
        result = self.gen.model(
            input_ids=tokens,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=self.cache,
            use_cache=True,
        )
        best = torch.argmax(
            result.logits.float(), dim=-1
        ).tolist()  # [n][q]: greedy's next token at each column
        finished = []
        for s, (row, draft) in enumerate(zip(self.rows, drafts, strict=True)):
            added = 0
            for j in range(q):  # column j's output is real while every draft before it was confirmed
                plain = row.greedy and row.top_logprobs is None
                row.gen.append(
                    int(best[s][j]) if plain else self._choose(row, result.logits[s, j], int(best[s][j]))
                )
                row.history.append(row.gen[-1])
                added += 1
                if self._ended(row):
                    finished.append(s)
                    break
                if j >= len(draft) or draft[j] != row.gen[-1]:
                    break
            self.stats.drafted += len(draft)
            self.stats.accepted += added - 1
            if draft and added - 1 == len(draft):
                row.span = min(SPEC_MAX_TOKENS, 2 * row.span)
            elif draft and 2 * (added - 1) < len(draft):
                row.span = max(2, row.span // 2)
            self.mask[s, self.col : self.col + q] = 0
            self.mask[s, self.col : self.col + added] = 1  # the row's last token and the confirmed drafts
            row.length += added
        self.col += q
        self.stats.decode_steps += 1
        self.stats.row_steps += n
        self.gen.stats.decode_steps += 1
        share = (time.perf_counter() - t0) / n
        for row in self.rows:
            row.charged += share
        for s in reversed(finished):  # highest slot first: moving the last row never moves a finished one
            self._store(s)
            out.append(self._reply(self.rows[s]))
            self._remove(s)
        spent = time.perf_counter() - t0
        self.stats.decode_s += spent
        self.gen.stats.decode_s += spent

    def _store(self, s: int) -> None:
        """Keep what row ``s`` has read (its prompt and every generated token but the last) for its next turn."""
        import torch

        row, valid = self.rows[s], self._valid(s)
        kv = [
            (
                layer.buf_k[s].index_select(1, valid).unsqueeze(0),
                layer.buf_v[s].index_select(1, valid).unsqueeze(0),
            )
            for layer in self.cache.layers
        ]
        self.gen.store.put(torch.cat([row.prompt, torch.tensor(row.gen[:-1], dtype=torch.long)]), kv)

    def _remove(self, s: int) -> None:
        """Drop row ``s``: the last live row moves into its slot (its columns from its first on)."""
        last = len(self.rows) - 1
        if s != last:
            moved = self.rows[last]
            lo = moved.first
            for layer in self.cache.layers:
                layer.buf_k[s, :, lo : self.col] = layer.buf_k[last, :, lo : self.col]
                layer.buf_v[s, :, lo : self.col] = layer.buf_v[last, :, lo : self.col]
            self.mask[s] = 0
            self.mask[s, lo : self.col] = self.mask[last, lo : self.col]
            self.rows[s] = moved
        self.rows.pop()
