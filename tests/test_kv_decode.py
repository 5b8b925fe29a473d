"""KV-cache reuse across turns (inference.kv_decode): greedy replies identical, token for token, to the plain
left-padded ``generate`` path over multi-turn conversation batches of mixed lengths (tiny model, and a merged LoRA
on it), the prompt of turn t being a prefix of turn t+1's with the chat template, reuse actually happening,
eviction, the switch and the fallbacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from conversations import OBSERVATIONS, TASKS, start

from bashgym_assets.inference.kv_decode import KVCacheStore, kv_cache_enabled, unsupported_reason
from bashgym_assets.rollout.operators import LocalModelOperator
from bashgym_assets.rollout.transcript import Message
from bashgym_assets.testing.tiny_model import build_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("kv") / "model")


def run_turns(
    plain: LocalModelOperator, cached: LocalModelOperator, convs: list[list[Message]], turns: int
) -> list[list[str]]:
    """Both operators answer the same growing conversations; every reply must be the same text and token count."""
    texts = []
    for turn in range(turns):
        a, b = plain.replies(convs), cached.replies(convs)
        assert [(r.text, r.new_tokens, r.truncated, r.error) for r in a] == [
            (r.text, r.new_tokens, r.truncated, r.error) for r in b
        ], f"turn {turn}"
        texts.append([r.text for r in a])
        for i, (conv, reply) in enumerate(zip(convs, a, strict=True)):
            conv.append(Message(role="assistant", content=reply.text))
            conv.append(
                Message(role="user", content=OBSERVATIONS[(i + turn) % len(OBSERVATIONS)] * (1 + i % 3))
            )
    return texts


def test_prompt_of_turn_t_is_a_prefix_of_turn_t_plus_1(tiny: Path) -> None:
    op = LocalModelOperator(tiny)
    _, tok = op._load()
    conv = [m.model_dump() for m in start(TASKS[1])]
    first = op._encode(tok, conv)
    conv += [{"role": "assistant", "content": "ls -la"}, {"role": "user", "content": "total 0"}]
    second = op._encode(tok, conv)
    assert second[: len(first)] == first and len(second) > len(first)


@pytest.mark.parametrize("max_new_tokens", [6, 20])
def test_cached_replies_identical_to_plain_generate_over_three_turns(tiny: Path, max_new_tokens: int) -> None:
    plain = LocalModelOperator(tiny, max_new_tokens=max_new_tokens, kv_cache=False)
    cached = LocalModelOperator(tiny, max_new_tokens=max_new_tokens, kv_cache=True, micro_batch=3)
    run_turns(plain, cached, [start(t) for t in TASKS], turns=3)
    assert cached.kv_fallback is None and cached._kv is not None
    stats = cached._kv.stats
    assert stats.calls >= 3 and stats.reused_tokens > 0
    assert stats.prefilled_tokens < stats.prompt_tokens / 2  # turns 2 and 3 only read what is new
    # one conversation at a time (the rollouts' way) gives the same replies too
    single = LocalModelOperator(tiny, max_new_tokens=max_new_tokens, kv_cache=True, micro_batch=1)
    run_turns(
        LocalModelOperator(tiny, max_new_tokens=max_new_tokens, kv_cache=False, micro_batch=1),
        single,
        [start(t) for t in TASKS[:3]],
        turns=3,
    )


def test_cached_replies_identical_with_a_merged_lora_adapter(tiny: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny)
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.normal_(0, 0.3)
    peft_model.save_pretrained(tmp_path / "adapter")
    plain = LocalModelOperator(tiny, adapter_dir=tmp_path / "adapter", max_new_tokens=12, kv_cache=False)
    cached = LocalModelOperator(tiny, adapter_dir=tmp_path / "adapter", max_new_tokens=12, kv_cache=True)
    run_turns(plain, cached, [start(t) for t in TASKS[:4]], turns=3)
    assert cached._kv is not None and cached._kv.stats.reused_tokens > 0


def test_switch_env_and_sampling_fall_back(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BASHGYM_KV_CACHE", "0")
    assert not kv_cache_enabled() and kv_cache_enabled(True)
    op = LocalModelOperator(tiny, max_new_tokens=4)
    assert not op.kv_cache
    op.replies([start(TASKS[0])])
    assert op._kv is None
    monkeypatch.delenv("BASHGYM_KV_CACHE")
    sampled = LocalModelOperator(tiny, max_new_tokens=4, temperature=0.8)
    assert sampled.kv_cache
    sampled.replies([start(TASKS[0])])
    assert sampled._kv is None  # sampling takes the plain generate path


def test_unsupported_models_and_failures_fall_back(tiny: Path) -> None:
    op = LocalModelOperator(tiny, max_new_tokens=5, kv_cache=True)
    model, _ = op._load()
    assert unsupported_reason(model) is None
    model.generation_config.repetition_penalty = 1.3
    assert "repetition_penalty" in (unsupported_reason(model) or "")
    model.generation_config.repetition_penalty = 1.0

    class Broken:
        def generate(self, prompts):  # noqa: ANN001, ANN202
            raise RuntimeError("boom")

    op._kv = Broken()
    op._kv.model = model
    want = LocalModelOperator(tiny, max_new_tokens=5, kv_cache=False).replies([start(TASKS[2])])
    assert op.replies([start(TASKS[2])]) == want and "boom" in (op.kv_fallback or "")


def test_store_lookup_supersede_and_eviction() -> None:
    import torch

    def kv(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]  # 16 bytes a token (keys + values)

    store = KVCacheStore(max_bytes=16 * 10)
    store.put(torch.tensor([1, 2, 3]), kv(3))
    store.put(torch.tensor([1, 2, 3, 4, 5]), kv(5))  # extends the first: the first is dropped
    assert len(store) == 1 and store.nbytes == 16 * 5
    key, n = store.lookup(torch.tensor([1, 2, 3, 9]))
    assert key is not None and n == 3
    assert store.lookup(torch.tensor([7, 8]))[1] == 0
    store.put(torch.tensor([6, 6, 6, 6]), kv(4))
    assert len(store) == 2
    store.put(torch.tensor([5, 5]), kv(2))  # 11 tokens > cap: the least recently used goes
    assert store.nbytes <= 16 * 10 and store.evictions == 1
    assert store.lookup(torch.tensor([1, 2, 3]))[1] == 0
    store.put(torch.tensor(list(range(20))), kv(20))  # bigger than the whole cap: not stored
    assert store.nbytes <= 16 * 10


def test_preallocated_cache_layer_matches_transformers_dynamic_layer() -> None:
    """The in-place layer returns what ``torch.cat`` would, past its preallocated room too, and keeps the rows a
    compaction selects."""
    import torch
    from transformers.cache_utils import DynamicCache

    from bashgym_assets.inference.kv_decode import _preallocated_cache

    torch.manual_seed(0)
    layers = [(torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4)) for _ in range(2)]
    ours = _preallocated_cache([(k.clone(), v.clone()) for k, v in layers], room=2)
    reference = DynamicCache(ddp_cache_data=[(k.clone(), v.clone()) for k, v in layers])
    for step in range(4):  # room 2: the last two steps grow the buffers
        if step == 2:
            keep = torch.tensor([0, 2])
            ours.batch_select_indices(keep)
            reference.batch_select_indices(keep)
        rows = 3 if step < 2 else 2
        k_new, v_new = torch.randn(rows, 2, 1, 4), torch.randn(rows, 2, 1, 4)
        for layer in range(2):
            got = ours.update(k_new, v_new, layer)
            want = reference.update(k_new, v_new, layer)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert ours.get_seq_length() == reference.get_seq_length() == 9
    assert [tuple(k.shape) for k, _v, *_ in ours] == [(2, 2, 9, 4)] * 2
