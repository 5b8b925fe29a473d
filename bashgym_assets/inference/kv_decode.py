"""Greedy batched decoding that reuses each conversation's KV cache across turns (issue 11).

An episode's transcript only grows: the prompt of turn t+1 is the prompt of turn t, the reply, the observation and
the generation prompt, and the ChatML template renders earlier turns the same way every time (checked in
``tests/test_kv_decode.py``). So re-encoding the whole transcript every turn, which is what a plain
``generate`` does, repeats work whose result is already known. ``KVGenerator`` keeps, per conversation, the keys
and values of everything the model has already read (prompt + the reply tokens it generated), keyed by those token
ids. For a batch of prompts it

1. finds, for each prompt, the stored entry with the longest common token prefix (a truncated transcript or a
   reply re-tokenized differently simply reuses less) and prefills only the remaining tokens, one conversation at a
   time (no padding in the prefill: the tokens a turn adds are few, and a CPU prefill is compute-bound anyway);
2. left-pads the conversations' caches to a common length into one ``DynamicCache`` (an attention mask marks the
   pads; position ids are each conversation's true positions, RoPE keys already carry theirs) and decodes every
   conversation together, one token per step, each stopping at its own end-of-turn token or ``max_new_tokens``;
   finished rows stay in the batch (masked out of nothing, their outputs ignored) until at most half the rows are
   live, then the batch is compacted. The batch's cache is preallocated with room for the reply
   (``_preallocated_cache``): transformers' ``DynamicLayer`` appends each step's key/value with ``torch.cat``,
   which copies the whole batch's cache every step (~0.9 GB of memory traffic a step at 8 rows x 1,200 tokens,
   more than the weights; decode steps took 2x as long at 1,200 tokens of context as at 200), while the
   preallocated layer writes the new position in place;
3. stores each conversation's cache (prompt + reply tokens) for its next turn, drops the entry it extended, and
   evicts the least recently used entries beyond a count and memory cap (conversations that ended age out).

Greedy only: the argmax of the same logits as ``generate`` (no logits processors; ``supported`` refuses a
generation config that sets any), so the replies are the same tokens as the non-cached path up to floating-point
summation order. Sampling, unsupported cache layouts (sliding windows, linear attention, encoder-decoders) and any
error fall back to the plain ``generate`` path in ``LocalModelOperator``. ``BASHGYM_KV_CACHE=0`` turns it off;
``BASHGYM_KV_CACHE_MB`` sets the memory cap (default 2048).
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from bashgym_assets.config import get_settings

DEFAULT_MAX_ENTRIES = 512

# Generation-config fields that would change greedy decoding if set (then the plain ``generate`` path is used).
_PROCESSOR_FIELDS = {
    "repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "bad_words_ids": (None,),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "sequence_bias": (None,),
    "encoder_repetition_penalty": (None, 1.0),
    "exponential_decay_length_penalty": (None,),
    "renormalize_logits": (None, False),
    "num_beams": (None, 1),
    "guidance_scale": (None, 1.0),
    "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
    "watermarking_config": (None,),
}


def kv_cache_enabled(flag: bool | None = None) -> bool:
    """The switch: an explicit constructor argument wins, else ``BASHGYM_KV_CACHE`` (on unless 0/false/no/off)."""
    if flag is not None:
        return flag
    return get_settings().kv_cache


def unsupported_reason(model: Any) -> str | None:
    """Why this model cannot use the cached path (None when it can): only decoder-only models whose every cache
    layer is a plain ``DynamicLayer`` (full attention) and whose generation config adds no logits processor."""
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except Exception as exc:  # noqa: BLE001
        return f"transformers cache classes unavailable: {exc}"
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return "not a decoder-only transformers model"
    try:
        layers = DynamicCache(config=config).layers
    except Exception as exc:  # noqa: BLE001
        return f"cache layout unknown: {type(exc).__name__}: {exc}"
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return "cache layers other than full-attention DynamicLayer (sliding window, linear attention, ...)"
    gen = getattr(model, "generation_config", None)
    for name, neutral in _PROCESSOR_FIELDS.items():
        value = getattr(gen, name, None) if gen is not None else None
        if value not in neutral and value != []:
            return f"generation config sets {name}={value!r}"
    return None


@dataclass
class _Entry:
    ids: Any  # 1-D LongTensor: the tokens whose keys/values are stored
    kv: list[tuple[Any, Any]]  # per layer (keys, values), each [1, heads, len(ids), head_dim]
    nbytes: int = 0


@dataclass
class KVStats:
    """Counters since the generator was made: how much prefill the cache saved."""

    calls: int = 0
    prompts: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    prefilled_tokens: int = 0
    decode_steps: int = 0
    evictions: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0


class KVCacheStore:
    """Per-conversation caches keyed by their token ids; least recently used first out past the caps."""

    def __init__(self, max_bytes: int, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next = 0
        self.nbytes = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def lookup(self, ids: Any) -> tuple[int | None, int]:
        """(key, length) of the entry sharing the longest token prefix with ``ids`` (None, 0 when none shares one)."""
        import torch

        best, best_len = None, 0
        for key, entry in self._entries.items():
            n = min(len(entry.ids), len(ids))
            if n <= best_len:
                continue
            diff = torch.nonzero(entry.ids[:n] != ids[:n])
            common = int(diff[0, 0]) if len(diff) else n
            if common > best_len:
                best, best_len = key, common
        if best is not None:
            self._entries.move_to_end(best)
        return best, best_len

    def get(self, key: int) -> _Entry:
        return self._entries[key]

    def put(self, ids: Any, kv: list[tuple[Any, Any]]) -> None:
        """Store a conversation's cache; entries whose ids are a prefix of ``ids`` are superseded and dropped."""
        for key in [
            k
            for k, e in self._entries.items()
            if len(e.ids) <= len(ids) and bool((e.ids == ids[: len(e.ids)]).all())
        ]:
            self._drop(key)
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if nbytes > self.max_bytes:
            return
        self._entries[self._next] = _Entry(ids=ids, kv=kv, nbytes=nbytes)
        self._next += 1
        self.nbytes += nbytes
        while self._entries and (self.nbytes > self.max_bytes or len(self._entries) > self.max_entries):
            self._drop(next(iter(self._entries)))
            self.evictions += 1

    def _drop(self, key: int) -> None:
        self.nbytes -= self._entries.pop(key).nbytes


@functools.cache
def _preallocated_layer() -> type:
    """transformers' ``DynamicLayer`` with its keys/values in a buffer with room to grow: ``update`` writes the
    step in place instead of ``torch.cat`` copying the whole cache (see the module docstring). A class built on
    first use so that importing this module does not import transformers."""
    import torch
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        def __init__(self, keys: Any, values: Any, room: int) -> None:
            super().__init__()
            self.lazy_initialization(keys, values)
            self._n = keys.shape[-2]
            self._k = torch.cat([keys, keys.new_zeros((*keys.shape[:2], room, keys.shape[-1]))], dim=-2)
            self._v = torch.cat(
                [values, values.new_zeros((*values.shape[:2], room, values.shape[-1]))], dim=-2
            )
            self._views()

        def _views(self) -> None:
            self.keys, self.values = self._k[:, :, : self._n], self._v[:, :, : self._n]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            add = key_states.shape[-2]
            if self._n + add > self._k.shape[-2]:  # past the room asked for (rare): double the buffers
                grow = max(add, self._k.shape[-2])
                self._k = torch.cat(
                    [self._k, self._k.new_zeros((*self._k.shape[:2], grow, self._k.shape[-1]))], -2
                )
                self._v = torch.cat(
                    [self._v, self._v.new_zeros((*self._v.shape[:2], grow, self._v.shape[-1]))], -2
                )
            self._k[:, :, self._n : self._n + add] = key_states
            self._v[:, :, self._n : self._n + add] = value_states
            self._n += add
            self._views()
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._views()

    return PreallocatedLayer


def _preallocated_cache(layers: list[tuple[Any, Any]], room: int) -> Any:
    """A ``DynamicCache`` over ``layers`` (``[batch, heads, length, head_dim]`` keys and values) whose layers keep
    ``room`` more positions preallocated; the cache object, masks and attention code stay transformers' own."""
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    layer = _preallocated_layer()
    cache.layers = [layer(k, v, room) for k, v in layers]
    return cache


class KVGenerator:
    """Greedy batched generation with per-conversation KV reuse across calls (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        stop_ids: list[int],
        pad_id: int,
        max_new_tokens: int,
        max_bytes: int | None = None,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        preallocate: bool = True,
    ):
        if max_bytes is None:
            max_bytes = int(get_settings().kv_cache_mb * 2**20)
        self.model = model
        self.stop_ids = set(stop_ids)
        self.pad_id = pad_id
        self.max_new_tokens = max_new_tokens
        self.preallocate = (
            preallocate  # False: transformers' DynamicCache as it is (the benchmark's baseline)
        )
        self.store = KVCacheStore(max_bytes, max_entries)
        self.stats = KVStats()

    def prefill(self, prompt: Any) -> tuple[list[tuple[Any, Any]], Any]:
        """The cache after reading ``prompt`` (reusing the longest stored prefix) and the last position's logits
        (public: the continuous batcher prefills each new row with it)."""
        import torch
        from transformers.cache_utils import DynamicCache

        key, reuse = self.store.lookup(prompt)
        reuse = min(reuse, len(prompt) - 1)  # at least one token is run, to get the next token's logits
        if key is not None and reuse > 0:
            entry = self.store.get(key)
            cache = DynamicCache(ddp_cache_data=[(k[:, :, :reuse], v[:, :, :reuse]) for k, v in entry.kv])
        else:
            reuse, cache = 0, DynamicCache()
        dev = (
            getattr(self.model, "device", None) or prompt.device
        )  # ids stay on the CPU (the store keys them)
        new = prompt[reuse:].unsqueeze(0).to(dev)
        out = self.model(
            input_ids=new,
            attention_mask=torch.ones((1, len(prompt)), dtype=torch.long, device=dev),
            position_ids=torch.arange(reuse, len(prompt), device=dev).unsqueeze(0),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.stats.reused_tokens += reuse
        self.stats.prefilled_tokens += len(prompt) - reuse
        layers = [(k, v) for k, v, *_ in out.past_key_values]
        if len(layers) == 0 or layers[0][0].shape[-2] != len(prompt):
            raise RuntimeError("unexpected cache layout after prefill")
        return layers, out.logits[0, -1]

    def generate(self, prompts: list[list[int]]) -> list[list[int]]:
        """The new tokens of each prompt: up to and including its first stop token, at most ``max_new_tokens``."""
        import torch

        self.stats.calls += 1
        self.stats.prompts += len(prompts)
        ids = [torch.tensor(p, dtype=torch.long) for p in prompts]
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        t0 = time.perf_counter()
        with torch.no_grad():
            caches, firsts = [], []
            for prompt in ids:
                kv, logits = self.prefill(prompt)
                caches.append(kv)
                firsts.append(int(torch.argmax(logits.float())))
            gen: list[list[int]] = [[t] for t in firsts]
            t1 = time.perf_counter()
            self.stats.prefill_s += t1 - t0
            done = [t in self.stop_ids or self.max_new_tokens <= 1 for t in firsts]
            lengths = [len(p) for p in ids]  # tokens each conversation has read (its cache length)
            width = max(lengths)
            n_layers = len(caches[0])
            batched = []
            for layer in range(n_layers):
                k0, v0 = caches[0][layer]
                keys = k0.new_zeros((len(ids), k0.shape[1], width, k0.shape[3]))
                values = v0.new_zeros((len(ids), v0.shape[1], width, v0.shape[3]))
                for row, kv in enumerate(caches):
                    keys[row, :, width - lengths[row] :] = kv[layer][0][0]
                    values[row, :, width - lengths[row] :] = kv[layer][1][0]
                batched.append((keys, values))
            del caches
            mask = torch.zeros((len(ids), width), dtype=torch.long)
            for row, n in enumerate(lengths):
                mask[row, width - n :] = 1
            rows = list(range(len(ids)))  # batch row -> conversation index
            pad_left = [width - n for n in lengths]  # per conversation, in the current batch
            if self.preallocate:
                cache = _preallocated_cache(batched, room=self.max_new_tokens)
            else:
                from transformers.cache_utils import DynamicCache

                cache = DynamicCache(ddp_cache_data=batched)
            del batched
            step = 0
            while not all(done[i] for i in rows):
                live = [i for i in rows if not done[i]]
                if len(live) * 2 <= len(rows):  # compact: store and drop the finished rows
                    keep = [r for r, i in enumerate(rows) if not done[i]]
                    for r, i in enumerate(rows):
                        if done[i]:
                            self._store(ids[i], gen[i], cache, r, pad_left[i])
                    cache.batch_select_indices(torch.tensor(keep, dtype=torch.long))
                    mask = mask[keep]
                    rows = [rows[r] for r in keep]
                tokens = torch.tensor(
                    [[gen[i][-1] if not done[i] else self.pad_id] for i in rows], dtype=torch.long
                )
                positions = torch.tensor([[lengths[i] + step] for i in rows], dtype=torch.long)
                mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=torch.long)], dim=1)
                out = self.model(
                    input_ids=tokens,
                    attention_mask=mask,
                    position_ids=positions,
                    past_key_values=cache,
                    use_cache=True,
                )
                cache = out.past_key_values
                nxt = torch.argmax(out.logits[:, -1].float(), dim=-1).tolist()
                step += 1
                self.stats.decode_steps += 1
                for r, i in enumerate(rows):
                    if done[i]:
                        continue
                    gen[i].append(int(nxt[r]))
                    done[i] = nxt[r] in self.stop_ids or len(gen[i]) >= self.max_new_tokens
            for r, i in enumerate(rows):
                self._store(ids[i], gen[i], cache, r, pad_left[i])
        self.stats.decode_s += time.perf_counter() - t1
        self.stats.evictions = self.store.evictions
        return gen

    def _store(self, prompt: Any, gen: list[int], cache: Any, row: int, pad_left: int) -> None:
        """Keep what conversation ``row`` has read (prompt + every generated token but the last) for its next turn."""
        import torch

        fed = len(prompt) + len(gen) - 1
        kv = [
            (
                k[row : row + 1, :, pad_left : pad_left + fed].clone(),
                v[row : row + 1, :, pad_left : pad_left + fed].clone(),
            )
            for k, v, *_ in cache
        ]
        if kv and kv[0][0].shape[-2] != fed:
            return  # the batch's cache is shorter than expected: store nothing rather than something wrong
        self.store.put(torch.cat([prompt, torch.tensor(gen[:-1], dtype=torch.long)]), kv)
