"""SFT and DPO on TRL, on the tiny local model: the training chat templates, TRL's labels against the offsets
reference mask, packed batches that keep examples apart, a multi-epoch packed run (the hand loop's IndexError),
and per-step metrics reaching MLflow while the run trains."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training import registry
from bashgym_assets.training.masking import IGNORE_INDEX, MaskError, normalise_messages, tokenize_conversation
from bashgym_assets.training.trainer import (
    TEMPLATES_DIR,
    TrainConfig,
    build_sft_trainer,
    check_training_template,
    prepared_examples,
    shipped_training_template,
    train_sft,
    training_tokenizer,
)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture(scope="session")
def tiny_smollm2_template(tiny_model: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny model with SmolLM2's stock chat template (default system turn): the SmolLM2 path without its weights."""
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tiny-smollm2") / "model"
    shutil.copytree(tiny_model, folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = (TEMPLATES_DIR / "smollm2.jinja").read_text(encoding="utf-8")
    tok.save_pretrained(folder)
    return str(folder)


def _conversations() -> list[list[dict[str, str]]]:
    """Multi-turn conversations with the awkward cases: several turns, multi-line and empty outputs, no system
    turn, leading/trailing newlines in a command, sub-word merges at a turn boundary, non-ASCII."""
    convs = [
        syn.trajectory_messages(
            f"task {i}: tidy the logs",
            [f"ls -la dir{i}", "grep -c error app.log"][: 1 + i % 2],
            ["total 12\nfile.txt\nnotes.txt", ""][: 1 + i % 2],
        )
        for i in range(4)
    ]
    convs.append(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "\nexit\n"},
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "exitexit"},
        ]
    )
    convs.append(
        [
            {"role": "system", "content": "Shell."},
            {"role": "user", "content": "café? ünïcödé"},
            {"role": "assistant", "content": "echo 'naïve' | wc -c"},
            {"role": "user", "content": "6"},
            {"role": "assistant", "content": "exit"},
        ]
    )
    return convs


def _cfg(model: str, out: Path, **kw) -> TrainConfig:
    base = {
        "base_model": model,
        "output_dir": str(out),
        "batch_size": 2,
        "grad_accum": 1,
        "learning_rate": 3e-3,
        "lora_dropout": 0.0,
        "save_every": 50,
        "max_length": 512,
    }
    base.update(kw)
    return TrainConfig(**base)


def test_training_templates_render_byte_identically_and_train_the_end_token(tiny_model):
    from trl.chat_template_utils import has_generation_markers, is_chat_template_stop_token_trained

    tok = training_tokenizer(tiny_model)
    pairs = [
        (p, p.with_name(f"{p.stem}_training.jinja"))
        for p in sorted(TEMPLATES_DIR.glob("*.jinja"))
        if not p.stem.endswith("_training")
    ]
    assert {p.name for p, _ in pairs} == {"chatml.jinja", "smollm2.jinja"}
    for stock, training in pairs:
        stock_text, training_text = stock.read_text(encoding="utf-8"), training.read_text(encoding="utf-8")
        assert shipped_training_template(stock_text) == training and has_generation_markers(training_text)
        for conv in _conversations():
            for prompt in (False, True):
                assert tok.apply_chat_template(
                    conv, chat_template=training_text, tokenize=False, add_generation_prompt=prompt
                ) == tok.apply_chat_template(
                    conv, chat_template=stock_text, tokenize=False, add_generation_prompt=prompt
                )
        assert is_chat_template_stop_token_trained(tok, chat_template=training_text)
    assert shipped_training_template("{{ messages }}") is None


@pytest.mark.parametrize("template", ["chatml", "smollm2"])
def test_trl_labels_equal_the_reference_mask(template, tiny_model, tiny_smollm2_template, tmp_path):
    model = tiny_model if template == "chatml" else tiny_smollm2_template
    convs = _conversations()
    trainer = build_sft_trainer(_cfg(model, tmp_path / "run", packing=False), convs)
    assert (
        trainer.args.assistant_only_loss and trainer.chat_template is None
    )  # our marked template, not TRL's
    tok = trainer.processing_class
    assert tok.chat_template == (TEMPLATES_DIR / f"{template}_training.jinja").read_text(encoding="utf-8")
    trl_examples = prepared_examples(trainer.train_dataset)  # TRL's own tokenisation and labels
    assert len(trl_examples) == len(convs)
    for conv, ex in zip(convs, trl_examples, strict=True):
        ref = tokenize_conversation(tok, conv)
        assert ex.input_ids == ref.input_ids
        assert ex.labels == ref.labels, tok.decode(
            [t for t, lab in zip(ex.input_ids, ex.labels, strict=True) if lab != IGNORE_INDEX]
        )
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    assert all(
        lab == eot
        for ex in trl_examples
        for t, lab in zip(ex.input_ids, ex.labels, strict=True)
        if t == eot and lab != IGNORE_INDEX
    )
    assert check_training_template(tok, convs) == 0


def test_a_template_that_misses_the_end_token_is_caught(tiny_model):
    tok = training_tokenizer(tiny_model)
    tok.chat_template = tok.chat_template.replace(
        "{{- message['content'] + '<|im_end|>' }}\n        {%- endgeneration %}",
        "{{- message['content'] }}\n        {%- endgeneration %}{{- '<|im_end|>' }}",
    )
    convs = _conversations()
    assert check_training_template(tok, convs) == len(convs)


def test_packed_batches_keep_examples_apart(tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    convs = _conversations()
    trainer = build_sft_trainer(_cfg(tiny_model, tmp_path / "run", batch_size=3, max_length=256), convs)
    batch = next(iter(trainer.get_train_dataloader()))
    assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 1  # padding-free: one flat row
    pos = batch["position_ids"][0]
    starts = (pos == 0).nonzero().flatten().tolist() + [pos.numel()]
    assert len(starts) > 3  # several examples in the row, positions restarting at each
    assert all(
        (batch["labels"][0, s] == IGNORE_INDEX).item() for s in starts[:-1]
    )  # no loss across a boundary
    model = AutoModelForCausalLM.from_pretrained(tiny_model, attn_implementation="sdpa").eval()
    with torch.no_grad():
        packed = model(
            input_ids=batch["input_ids"], position_ids=batch["position_ids"], use_cache=False
        ).logits[0]
        for s, e in zip(starts, starts[1:], strict=False):
            alone = model(input_ids=batch["input_ids"][:, s:e], use_cache=False).logits[0]
            torch.testing.assert_close(packed[s:e], alone, atol=1e-4, rtol=1e-4)


def test_multi_epoch_packed_run_completes_from_the_cli(tiny_model, tmp_path, capsys):
    """The hand-written loop died with an IndexError beyond one epoch (later epochs packed differently)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bashgym_assets.training.__main__ import main
    from bashgym_assets.training_data import build as ds

    d = syn.demo_inputs()
    rows = ds.build_sft(d["segments"], d["trajectories"]).rows
    pq.write_table(pa.Table.from_pylist(rows, schema=ds.SFT_SCHEMA), tmp_path / "sft.parquet")
    out = tmp_path / "run-epochs"
    assert (
        main(
            [
                "sft",
                "--data",
                str(tmp_path / "sft.parquet"),
                "--base",
                tiny_model,
                "--out",
                str(out),
                "--epochs",
                "3",
                "--batch-size",
                "4",
                "--max-length",
                "256",
                "--lr",
                "3e-3",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    steps = [
        line.split()[1].rstrip(":")
        for line in printed.splitlines()
        if line.startswith("step ") and "loss" in line
    ]
    n, total = (int(x) for x in steps[-1].split("/"))
    assert (
        n == total and total % 3 == 0 and len(steps) >= total
    )  # every step of all three epochs, n/N printed
    assert sorted(p.name for p in out.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    assert '"steps": ' + str(total) in printed


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_metrics_reach_mlflow_per_step_while_training(tiny_model, tmp_path, settings):
    c = registry.client(settings)
    run_id = registry.start_training_run(
        kind="sft", run_name="live", tags={"dagster_run_id": "r1"}, settings=settings
    )
    live = registry.LiveMetrics(run_id, settings)
    seen_in_mlflow: list[list[int]] = []

    def on_log(row: dict[str, float]) -> None:
        live(row)
        if "loss" in row:  # what the MLflow UI shows at this moment
            seen_in_mlflow.append(sorted(m.step for m in c.get_metric_history(run_id, "loss")))

    convs = _conversations()
    res = train_sft(
        _cfg(tiny_model, tmp_path / "live", max_steps=5, save_every=2), convs, convs[:2], on_log=on_log
    )
    assert seen_in_mlflow == [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5]]
    assert c.get_run(run_id).info.status == "RUNNING"
    validation = sorted((m.step, m.value) for m in c.get_metric_history(run_id, "validation_loss"))
    assert [step for step, _ in validation] == [2, 4, 5]  # every save_every steps and at the end
    assert res.validation_loss == pytest.approx(validation[-1][1])
    reg = registry.log_training_run(
        kind="sft",
        run_name="live",
        params={"lr": 3e-3},
        history=res.history,
        summary={"loss": res.final_loss},
        adapter_dir=res.adapter_dir,
        tags={},
        settings=settings,
        run_id=run_id,
    )
    assert reg.run_id == run_id and c.get_run(run_id).info.status == "FINISHED"
    steps = [m.step for m in c.get_metric_history(run_id, "loss")]
    assert sorted(steps) == [1, 2, 3, 4, 5]  # distinct steps, nothing logged twice
    assert {"learning_rate", "grad_norm", "tokens", "final_loss"} <= set(c.get_run(run_id).data.metrics)
    assert not {"total_steps", "eta_s"} & set(
        c.get_run(run_id).data.metrics
    )  # progress fields are not curves
    # the adapter is the run's logged pyfunc model (artifacts/adapter inside it), not a loose run artifact
    assert {a.path for a in c.list_logged_model_artifacts(reg.logged_model_id, "artifacts/adapter")} == {
        "artifacts/adapter/adapter_config.json",
        "artifacts/adapter/adapter_model.safetensors",
    }
    assert [o.model_id for o in c.get_run(run_id).outputs.model_outputs] == [reg.logged_model_id]
    # a resumed run's live metrics start after its checkpoint: completing the run adds the steps before it
    resumed = registry.start_training_run(kind="sft", run_name="resumed", tags={}, settings=settings)
    for row in res.history[2:]:
        registry.LiveMetrics(resumed, settings)(row)
    registry.log_training_run(
        kind="sft",
        run_name="resumed",
        params={},
        history=res.history,
        summary={},
        adapter_dir=res.adapter_dir,
        tags={},
        settings=settings,
        run_id=resumed,
    )
    assert sorted(m.step for m in c.get_metric_history(resumed, "loss")) == [1, 2, 3, 4, 5]


def _recovery_conversation() -> list[dict]:
    """A recovery row: the model's own mistake shown as context (``train: False``), then the fix after its output."""
    return [
        {"role": "user", "content": "Extract only juniper/a.json from ~/r.tar into ~/out."},
        {"role": "assistant", "content": "tar -xf ~/r.tar -C ~/out", "train": False},
        {"role": "user", "content": "[exit code: 0]"},
        {
            "role": "assistant",
            "content": "rm -rf ~/out && mkdir ~/out && tar -xf ~/r.tar -C ~/out juniper/a.json",
        },
        {"role": "user", "content": "[exit code: 0]"},
        {"role": "assistant", "content": "exit"},
    ]


@pytest.mark.parametrize("template", ["chatml", "smollm2"])
def test_an_untrained_turn_is_shown_but_not_trained(template, tiny_model, tiny_smollm2_template, tmp_path):
    model = tiny_model if template == "chatml" else tiny_smollm2_template
    recovery = _recovery_conversation()
    convs = [*_conversations(), recovery]  # mixed: most rows have no flag at all
    trainer = build_sft_trainer(_cfg(model, tmp_path / "run", packing=False), convs)
    tok = trainer.processing_class
    stock = (TEMPLATES_DIR / f"{template}.jinja").read_text(encoding="utf-8")
    plain = [{"role": m["role"], "content": m["content"]} for m in recovery]
    assert tok.apply_chat_template(recovery, tokenize=False) == tok.apply_chat_template(
        plain, chat_template=stock, tokenize=False
    )  # the model sees its mistake exactly as at inference
    examples = prepared_examples(trainer.train_dataset)
    for conv, ex in zip(convs, examples, strict=True):
        assert ex.labels == tokenize_conversation(tok, conv).labels  # TRL's labels = the reference's
    trained = tok.decode(
        [t for t, lab in zip(examples[-1].input_ids, examples[-1].labels, strict=True) if lab != -100]
    )
    assert "tar -xf ~/r.tar -C ~/out<|im_end|>" not in trained  # the mistake is not learned
    assert "juniper/a.json<|im_end|>" in trained and trained.endswith(
        "exit<|im_end|>"
    )  # the fix and the end are
    # a row whose every assistant turn is untrained has nothing to train: refused, not trained on its prompt
    with pytest.raises(MaskError, match="no trained assistant turn"):
        normalise_messages([{**m, "train": False} if m["role"] == "assistant" else m for m in recovery])


def test_a_template_that_trains_a_marked_mistake_stops_the_training(tiny_model, tmp_path):
    """A chat template of the model's own (or TRL's) that ignores the mark would teach the mistake: refused."""
    from transformers import AutoTokenizer

    folder = tmp_path / "model"
    shutil.copytree(tiny_model, folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = (
        (TEMPLATES_DIR / "chatml_training.jinja")
        .read_text(encoding="utf-8")
        .replace("message.get('train') is false", "false")
    )
    tok.save_pretrained(folder)
    with pytest.raises(MaskError, match="train: false"):
        train_sft(
            _cfg(str(folder), tmp_path / "run", max_steps=1), [*_conversations(), _recovery_conversation()]
        )


def test_sft_goes_on_from_a_given_adapter(tiny_model, tmp_path):
    """``start_adapter``: SFT trains a fitted checkpoint further (recovery rows on top) instead of a fresh LoRA.
    With a rate too small to move anything, the adapter it writes is the one it started from."""
    from safetensors.torch import load_file

    convs = _conversations()
    first = train_sft(_cfg(tiny_model, tmp_path / "first", max_steps=3), convs)
    then = train_sft(
        _cfg(
            tiny_model, tmp_path / "then", max_steps=1, learning_rate=1e-12, start_adapter=first.adapter_dir
        ),
        convs,
    )
    fresh = train_sft(_cfg(tiny_model, tmp_path / "fresh", max_steps=1, learning_rate=1e-12), convs)
    weights = {
        name: load_file(str(Path(r.adapter_dir) / "adapter_model.safetensors"))
        for name, r in (("first", first), ("then", then), ("fresh", fresh))
    }
    assert weights["then"].keys() == weights["first"].keys()
    lora_b = [k for k in weights["first"] if "lora_B" in k]
    assert lora_b and all(weights["first"][k].abs().sum() > 0 for k in lora_b)  # trained: B moved from zero
    for k, w in weights["first"].items():
        torch.testing.assert_close(weights["then"][k], w, atol=1e-6, rtol=0)  # went on from it
    assert all(weights["fresh"][k].abs().max() < 1e-6 for k in lora_b)  # a fresh LoRA starts with B = 0
