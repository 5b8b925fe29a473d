"""Transcript rendering and the three operators (no sandbox): reference, litellm over HTTP, a tiny local model."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai_server import Answer, OpenAIServer, last_user_text, scripted

from bashgym_assets.rollout.operators import (
    LiteLLMOperator,
    LocalModelOperator,
    OperatorError,
    ReferenceOperator,
    make_operator,
)
from bashgym_assets.rollout.transcript import (
    SCAFFOLD,
    Message,
    initial_messages,
    parse_reply,
    render_observation,
    strip_scaffold,
)
from bashgym_assets.scenarios.bundle import parse_bundle

BUNDLE = parse_bundle(
    {
        "id": "t-touch",
        "task": "Create ~/done.txt",
        "category": "files",
        "difficulty": 1,
        "check": "test -f /home/operator/done.txt",
        "reference": ["cd ~", "touch done.txt"],
    }
)
ANNOUNCED = parse_bundle(
    {
        "id": "t-ann",
        "task": "hidden task",
        "category": "files",
        "difficulty": 2,
        "check": "true",
        "reference": ["true"],
        "announcement": "New directives: run `orders --help`.",
        "provider": {"name": "orders", "script": "#!/bin/bash\necho do it"},
        "user": "root",
    }
)


@pytest.mark.parametrize(
    ("reply", "command", "is_command", "is_exit"),
    [
        ("ls -la", "ls -la", True, False),
        ("  exit  ", "exit", True, True),
        ("exit 0", "exit 0", True, True),
        ("cat <<EOF > notes.txt\nDear team, the report is attached.\nEOF", None, True, False),
        ("```bash\nls -la\n```", "ls -la", False, False),
        ("Here is a list of all files in the directory.", None, False, False),
        ("Sure! I'll list the files for you", None, False, False),
    ],
)
def test_parse_reply(reply: str, command: str | None, is_command: bool, is_exit: bool) -> None:
    line = parse_reply(reply)
    assert line.is_command is is_command and line.is_exit is is_exit
    if command is not None:
        assert line.command == command


def test_unbalanced_prose_gets_bash_syntax_error() -> None:
    assert not parse_reply("Here's what I'd do").is_command
    line = parse_reply("Here's the plan")
    assert not line.is_command and line.syntax_error and "unexpected EOF" in line.syntax_error


def test_orientation_task_announcement_and_scaffold_stripping() -> None:
    seen = initial_messages(BUNDLE, scaffold=True)
    record = initial_messages(BUNDLE, scaffold=False)
    assert SCAFFOLD in seen[0].content and SCAFFOLD not in record[0].content
    assert strip_scaffold(seen) == record
    assert "operator" in record[0].content and "/home/operator" in record[0].content
    assert record[1] == Message(role="user", content="Create ~/done.txt")
    ann = initial_messages(ANNOUNCED)
    assert ann[1].content == ANNOUNCED.announcement and "hidden task" not in ann[1].content
    assert "root@sandbox:/root#" in ann[0].content


def test_render_observation() -> None:
    class R:
        stdout, stderr, exit_code, timed_out = "a\nb\n", "warn\n", 3, True
        stdout_truncated_bytes, stderr_truncated_bytes = 100, 0

    assert render_observation(R()) == (
        "a\nb\n[... 100 more bytes of output truncated]\nwarn\n"
        "[command timed out and was killed]\n[exit code: 3]"
    )


def test_reference_operator_replays_then_exits() -> None:
    op = make_operator("reference").for_scenario(BUNDLE)
    msgs = initial_messages(BUNDLE)
    replies = []
    for _ in range(4):
        reply = op.next_command(msgs)
        replies.append(reply)
        msgs += [Message(role="assistant", content=reply), Message(role="user", content="[exit code: 0]")]
    assert replies == ["cd ~", "touch done.txt", "exit", "exit"]
    assert ReferenceOperator().next_command(msgs) == "exit"


@pytest.mark.slow
def test_litellm_operator_over_http_prose_and_timeout() -> None:
    def respond(body: dict) -> str | Answer:
        text = last_user_text(body)
        if "slow" in text:
            return Answer("ls", delay_s=3)
        return "I would list the files with ls." if "prose" in text else "ls -la"

    with OpenAIServer(respond) as server:
        op = LiteLLMOperator(server.litellm_model, api_base=server.url, timeout_s=1.0)
        assert op.scaffolded and op.name == "litellm:openai/scripted"
        seen = initial_messages(BUNDLE, scaffold=True)
        assert op.next_command(seen) == "ls -la"
        assert server.requests[0]["messages"][0]["content"].endswith(SCAFFOLD)
        assert op.next_command([*seen, Message(role="user", content="prose please")]).startswith("I would")
        with pytest.raises(OperatorError, match="Timeout"):
            op.next_command([*seen, Message(role="user", content="slow")])
    with OpenAIServer(scripted([Answer("boom", status=500)])) as server, pytest.raises(OperatorError):
        LiteLLMOperator(server.litellm_model, api_base=server.url).next_command(seen)


# ---- a tiny, randomly initialised local model ------------------------------------------------------------------
def build_tiny_model(folder: Path, adapter: Path | None = None) -> None:
    """A 2-layer LlamaForCausalLM and a BPE tokenizer with ChatML tokens, trained here on a few shell lines."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    corpus = [
        "ls -la",
        "cd ~ && touch done.txt",
        "exit",
        "cat file.txt | sort | uniq -c",
        "You are logged in",
        "Working directory: /home/operator",
        "[exit code: 0]",
        "find . -name '*.log' -delete",
    ] * 20
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["<unk>", "<|im_start|>", "<|im_end|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        bos_token="<|im_start|>",
    )
    hf_tok.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(hf_tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.pad_token_id,
        bos_token_id=hf_tok.bos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    if adapter is not None:
        from peft import LoraConfig, get_peft_model

        peft_model = get_peft_model(
            model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        )
        peft_model.save_pretrained(adapter)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tiny-llama")
    build_tiny_model(root / "model", root / "adapter")
    return root / "model", root / "adapter"


def test_local_model_operator_greedy_chatml(tiny_model: tuple[Path, Path]) -> None:
    model_dir, _ = tiny_model
    op = LocalModelOperator(model_dir, max_new_tokens=12)
    assert not op.scaffolded and op.name == "local:model"
    msgs = initial_messages(BUNDLE)
    first = op.next_command(msgs)
    assert isinstance(first, str)
    assert op.next_command(msgs) == first  # greedy: deterministic
    assert "<|im_start|>" in op._tokenizer.chat_template  # ChatML applied to a tokenizer without a template
    prompt = op._tokenizer.apply_chat_template(
        [m.model_dump() for m in msgs], add_generation_prompt=True, tokenize=False
    )
    assert prompt.endswith("<|im_start|>assistant\n") and "<|im_start|>system\nYou are logged in" in prompt


def test_local_model_operator_with_adapter_and_context_trim(tiny_model: tuple[Path, Path]) -> None:
    from peft import PeftModel

    model_dir, adapter_dir = tiny_model
    op = LocalModelOperator(model_dir, adapter_dir=adapter_dir, max_new_tokens=8, max_context_tokens=200)
    assert op.name == "local:model+adapter"
    long = (
        initial_messages(BUNDLE)
        + [
            Message(role="assistant", content="ls -la"),
            Message(role="user", content="x " * 150 + "\n[exit code: 0]"),
        ]
        * 4
    )
    assert isinstance(op.next_command(long), str)
    # The adapter is merged into the base for generation: the same function as the PEFT wrapper, not the base's.
    import torch
    from transformers import AutoModelForCausalLM

    assert not isinstance(op._model, PeftModel)
    probe = torch.tensor([[1, 5, 9, 13, 17, 21]])
    with torch.no_grad():
        merged = op._model(input_ids=probe).logits
        wrapped = (
            PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), adapter_dir)
            .eval()(input_ids=probe)
            .logits
        )
        base = AutoModelForCausalLM.from_pretrained(model_dir).eval()(input_ids=probe).logits
    assert torch.allclose(merged, wrapped, atol=1e-4)
    assert not torch.allclose(merged, base, atol=1e-3)
    ids = op._encode(op._tokenizer, [m.model_dump() for m in long])
    assert len(ids) <= 200 - 8


def test_an_unregistered_operator_kind_is_refused_by_name() -> None:
    """``<kind>:<rest>`` names an operator kind: one no layer registered is an error that lists the registered ones,
    never a litellm call to a model of that name; litellm's own ``provider/model:tag`` strings are not kinds."""
    from bashgym_assets.rollout.operators import LiteLLMOperator, UnknownOperator, make_operator

    with pytest.raises(UnknownOperator, match="no operator kind 'nonsense'"):
        make_operator("nonsense:whatever")
    assert isinstance(make_operator("ollama/llama3:8b"), LiteLLMOperator)


def test_a_local_operator_without_a_model_folder_needs_both_model_and_tokenizer() -> None:
    """What is not given is loaded from model_dir: without one, a model alone (or an empty folder name) is refused
    when the operator is made, not with a loader's error at its first reply."""
    with pytest.raises(ValueError, match="model_dir or a loaded model"):
        LocalModelOperator(model=object())
    with pytest.raises(ValueError, match="model_dir or a loaded model"):
        LocalModelOperator("")
    assert LocalModelOperator(model=object(), tokenizer=object()).model_dir is None
