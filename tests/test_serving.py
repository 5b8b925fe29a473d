"""``bashgym serve`` over real HTTP on a free loopback port: a tiny local model with a random LoRA adapter, called
through litellm and the ``openai`` client; batching, log-probabilities, sampling parameters, errors, streaming,
and the champion loaded from a real MLflow registry."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from bashgym_assets.serving.app import LocalServer, create_app
from bashgym_assets.serving.batching import Batcher
from bashgym_assets.serving.engine import ChatEngine, GenerationRequest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

NAME = "bashgym-operator"
CHAT = [{"role": "system", "content": "You are a shell operator."},
        {"role": "user", "content": "List the files in your home folder."}]


def build_student(root: Path) -> tuple[Path, Path]:
    """The tiny local chat model (``training/tiny.py``) and a random (non-identity) LoRA adapter on it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from bashgym_assets.training.tiny import build_tiny_model

    model_dir = build_tiny_model(root / "model")
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    peft_model.save_pretrained(root / "adapter")
    return model_dir, root / "adapter"


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_student(tmp_path_factory.mktemp("student"))


@pytest.fixture(scope="module")
def engine(student: tuple[Path, Path]) -> ChatEngine:
    model_dir, adapter = student
    return ChatEngine(model_dir, adapter, name=NAME, max_context_tokens=512).load()


@pytest.fixture(scope="module")
def server(engine: ChatEngine):
    with LocalServer(create_app(engine, Batcher(engine, max_batch=8, max_wait_s=0.01))) as srv:
        yield srv


def direct(engine: ChatEngine, messages: list[dict[str, str]] = CHAT, **kw) -> object:
    """The engine's reply to one request alone (no server, no batch): the reference for the HTTP replies."""
    return engine.generate([GenerationRequest(messages=messages, **kw)])[0]


def test_litellm_and_openai_clients_get_the_students_reply(server: LocalServer, engine: ChatEngine) -> None:
    import litellm
    from openai import OpenAI

    want = direct(engine, max_tokens=12)
    assert want.error is None and want.completion_tokens > 0
    via_litellm = litellm.completion(model=f"openai/{NAME}", api_base=server.url, api_key="x", messages=CHAT,
                                     temperature=0, max_tokens=12)
    assert via_litellm.choices[0].message.content == want.text
    assert via_litellm.usage.completion_tokens == want.completion_tokens
    assert via_litellm.usage.prompt_tokens == want.prompt_tokens

    client = OpenAI(base_url=server.url, api_key="x")
    assert [m.id for m in client.models.list().data] == [NAME]
    got = client.chat.completions.create(model=NAME, messages=CHAT, temperature=0, max_tokens=12)
    assert got.choices[0].message.content == want.text
    assert got.choices[0].finish_reason == want.finish_reason
    assert got.usage.total_tokens == want.prompt_tokens + want.completion_tokens

    health = httpx.get(server.url.removesuffix("/v1") + "/health").json()
    assert health["status"] == "ok" and health["models"] == [NAME]


def test_litellm_operator_drives_the_served_student(server: LocalServer, engine: ChatEngine) -> None:
    from bashgym_assets.rollout.operators import LiteLLMOperator
    from bashgym_assets.rollout.transcript import Message

    op = LiteLLMOperator(f"openai/{NAME}", api_base=server.url, max_tokens=10)
    replies = op.replies([[Message(**m) for m in CHAT], [Message(role="user", content="show disk usage")]])
    assert [r.error for r in replies] == [None, None]
    assert replies[0].text == direct(engine, max_tokens=10).text
    assert replies[1].text == direct(engine, [{"role": "user", "content": "show disk usage"}], max_tokens=10).text


def test_concurrent_requests_are_batched_with_the_same_greedy_replies(engine: ChatEngine) -> None:
    prompts = [("count the lines of notes.txt", 6, None), ("remove old logs", 14, None),
               ("make a backup of data/", 9, None), ("who am i", 12, None)]
    alone = [direct(engine, [{"role": "user", "content": p}], max_tokens=n) for p, n, _ in prompts]
    # the batch fills (4 of 4) as soon as the four requests are queued: no waiting on the long max_wait
    batcher = Batcher(engine, max_batch=4, max_wait_s=60)
    with LocalServer(create_app(engine, batcher)) as srv:
        def ask(p: tuple[str, int, None]) -> dict:
            return httpx.post(srv.url + "/chat/completions", timeout=120, json={
                "model": NAME, "messages": [{"role": "user", "content": p[0]}], "max_tokens": p[1],
                "temperature": 0}).json()

        with ThreadPoolExecutor(4) as ex:
            together = list(ex.map(ask, prompts))
    assert batcher.batch_sizes[4] == 1 and sum(batcher.batch_sizes.values()) == 1
    assert [r["choices"][0]["message"]["content"] for r in together] == [a.text for a in alone]
    assert [r["usage"]["completion_tokens"] for r in together] == [a.completion_tokens for a in alone]
    assert [r["choices"][0]["finish_reason"] for r in together] == [a.finish_reason for a in alone]


def test_logprobs_per_token(server: LocalServer, engine: ChatEngine) -> None:
    from openai import OpenAI

    got = OpenAI(base_url=server.url, api_key="x").chat.completions.create(
        model=NAME, messages=CHAT, temperature=0, max_tokens=8, logprobs=True, top_logprobs=3)
    choice = got.choices[0]
    tokens = choice.logprobs.content
    assert len(tokens) == got.usage.completion_tokens > 0
    for t in tokens:
        assert t.logprob <= 0.0 and len(t.top_logprobs) == 3
        assert [x.logprob for x in t.top_logprobs] == sorted((x.logprob for x in t.top_logprobs), reverse=True)
        assert t.logprob == pytest.approx(t.top_logprobs[0].logprob)  # greedy: the chosen token is the argmax
    plain = httpx.post(server.url + "/chat/completions", json={"model": NAME, "messages": CHAT, "max_tokens": 8,
                                                               "temperature": 0}).json()
    assert plain["choices"][0]["logprobs"] is None
    assert plain["choices"][0]["message"]["content"] == choice.message.content


def test_sampling_parameters_are_honoured(server: LocalServer, engine: ChatEngine) -> None:
    def ask(**kw) -> dict:
        r = httpx.post(server.url + "/chat/completions", json={"model": NAME, "messages": CHAT, **kw}, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()

    long = direct(engine, max_tokens=24)
    short = ask(max_tokens=3, temperature=0)
    assert short["usage"]["completion_tokens"] <= 3
    if long.completion_tokens > 3:
        assert short["choices"][0]["finish_reason"] == "length"
    # a stop string cuts the reply before it, finish_reason stop
    text = long.text
    stop = next(text[i:i + 2] for i in range(1, len(text) - 1) if text[i:i + 2].strip())
    cut = ask(max_tokens=24, temperature=0, stop=[stop])
    assert cut["choices"][0]["message"]["content"] == text[:text.index(stop)]
    assert cut["choices"][0]["finish_reason"] == "stop"
    # sampling: the same seed gives the same reply; n choices come back indexed
    a = ask(max_tokens=12, temperature=1.5, seed=7)
    b = ask(max_tokens=12, temperature=1.5, seed=7)
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
    many = ask(max_tokens=4, temperature=0, n=3)
    assert [c["index"] for c in many["choices"]] == [0, 1, 2]
    assert len({c["message"]["content"] for c in many["choices"]}) == 1


def test_errors_in_openais_shape(server: LocalServer) -> None:
    import openai

    url = server.url + "/chat/completions"
    bad = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    unknown = httpx.post(url, json={"model": "gpt-nothing", "messages": CHAT})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    empty = httpx.post(url, json={"model": NAME, "messages": []})
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "messages"
    too_many = httpx.post(url, json={"model": NAME, "messages": CHAT, "n": 99})
    assert too_many.status_code == 400 and set(too_many.json()["error"]) == {"message", "type", "param", "code"}
    assert httpx.get(server.url + "/models/gpt-nothing").status_code == 404

    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=NAME, max_tokens=16,
                                       messages=[{"role": "user", "content": "ls -la /home/operator " * 200}])
    assert exc.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-nothing", messages=CHAT)


def test_streaming_carries_the_same_reply(server: LocalServer, engine: ChatEngine) -> None:
    from openai import OpenAI

    stream = OpenAI(base_url=server.url, api_key="x").chat.completions.create(
        model=NAME, messages=CHAT, temperature=0, max_tokens=10, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == direct(engine, max_tokens=10).text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert chunks[-1].usage.completion_tokens == direct(engine, max_tokens=10).completion_tokens


def test_serve_the_champion_from_the_mlflow_registry(student: tuple[Path, Path], engine: ChatEngine,
                                                     settings) -> None:
    """Register the adapter with the registry helpers, alias it champion, and serve what ``bashgym serve``
    loads by default: the reply is the merged adapter's."""
    from bashgym_assets.cli import build_parser
    from bashgym_assets.evaluation.promotion import CHAMPION, set_alias
    from bashgym_assets.serving.cli import build_engine
    from bashgym_assets.training.registry import REGISTERED_MODEL, log_training_run

    model_dir, adapter = student
    reg = log_training_run(kind="sft", run_name="tiny-sft", params={"steps": 1}, history=[], summary={},
                           adapter_dir=str(adapter), tags={}, base_model=str(model_dir), settings=settings)
    with pytest.raises(LookupError, match="no champion"):  # nothing promoted yet: a clear error, not a traceback
        build_engine(build_parser().parse_args(["serve"]), settings)
    set_alias(REGISTERED_MODEL, reg.model_version, CHAMPION, settings)
    args = build_parser().parse_args(["serve", "--max-context", "512"])
    assert args.model == f"models:/{REGISTERED_MODEL}@{CHAMPION}" and args.port == 8000
    served = build_engine(args, settings).load()
    assert f"version {reg.model_version}" in served.source and str(model_dir) in served.source
    with LocalServer(create_app(served)) as srv:
        got = httpx.post(srv.url + "/chat/completions", timeout=60, json={
            "model": NAME, "messages": CHAT, "max_tokens": 12, "temperature": 0}).json()
    assert got["choices"][0]["message"]["content"] == direct(engine, max_tokens=12).text
    base_only = ChatEngine(model_dir, name=NAME, max_context_tokens=512)
    assert json.dumps(direct(base_only, max_tokens=12).text) != json.dumps(got["choices"][0]["message"]["content"])
