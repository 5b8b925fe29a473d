"""The trainer on a tiny locally built model: the reference mask's boundaries, overfit, resume, DPO, QLoRA,
MLflow registration and the CLI. TRL specifics (its labels, packing, epochs, live metrics) are in
test_trl_training.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training import registry
from bashgym_assets.training.masking import (
    IGNORE_INDEX,
    assistant_spans,
    tokenize_conversation,
)
from bashgym_assets.training.trainer import (
    TrainConfig,
    generate,
    inspect,
    load_adapter,
    load_tokenizer,
    train_dpo,
    train_sft,
)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


def _conv(i: int) -> list[dict[str, str]]:
    return syn.trajectory_messages(
        f"task {i}: list the files",
        [f"ls -la dir{i}", "wc -l notes.txt"],
        ["total 12\nfile.txt", "42 notes.txt"],
    )


def _runs(labels: list[int], ids: list[int]) -> list[list[int]]:
    runs, cur = [], []
    for tok, lab in zip(ids, labels, strict=True):
        if lab != IGNORE_INDEX:
            assert lab == tok
            cur.append(tok)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    return runs


def test_mask_trains_exactly_the_commands_and_their_end_of_turn_token(tiny_model):
    tok = load_tokenizer(tiny_model)
    conv = _conv(3)
    ex = tokenize_conversation(tok, conv)
    runs = [tok.decode(r) for r in _runs(ex.labels, ex.input_ids)]
    expected = [m["content"] + "<|im_end|>" for m in conv if m["role"] == "assistant"]
    assert runs == expected  # each command + its stop token, nothing else, in order
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    trained_eot = sum(1 for t, lab in zip(ex.input_ids, ex.labels, strict=True) if t == eot and lab == eot)
    assert trained_eot == 3  # the stop token after every assistant turn is trained ...
    assert ex.input_ids.count(eot) == 7  # ... and the other turns' end tokens are not
    untrained = tok.decode([t for t, lab in zip(ex.input_ids, ex.labels, strict=True) if lab == IGNORE_INDEX])
    assert "task 3: list the files" in untrained and "total 12" in untrained and "logged in" in untrained
    assert "ls -la" not in untrained


def test_mask_with_sub_word_merges_at_the_boundary(tiny_model):
    tok = load_tokenizer(tiny_model)
    conv = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "\nexit\n"},
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "exitexit"},
    ]
    text, spans = assistant_spans(tok, conv)
    ex = tokenize_conversation(tok, conv)
    runs = [tok.decode(r) for r in _runs(ex.labels, ex.input_ids)]
    assert runs == [text[s:e] for s, e in spans] == ["\nexit\n<|im_end|>", "exitexit<|im_end|>"]


def test_inspect_reports_mask_statistics_without_training(tiny_model):
    report = inspect(tiny_model, [_conv(i) for i in range(3)])
    assert report.examples == 3 and 0 < report.trained_fraction < 0.5
    assert report.examples_without_trained_tokens == 0
    assert "[[ls -la dir" in report.sample and "[[exit<|im_end|>]]" in report.sample
    assert "| examples |" in report.markdown()


def _cfg(tiny_model: str, out: Path, **kw) -> TrainConfig:
    base = {
        "base_model": tiny_model,
        "output_dir": str(out),
        "batch_size": 4,
        "grad_accum": 1,
        "learning_rate": 3e-3,
        "lora_dropout": 0.0,
        "save_every": 2,
        "max_length": 256,
    }
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.slow
def test_overfit_a_handful_of_examples_loss_goes_near_zero(tiny_model, tmp_path):
    convs = [_conv(i) for i in range(4)]
    result = train_sft(_cfg(tiny_model, tmp_path / "run-overfit", max_steps=60), convs, convs[:1])
    losses = [h["loss"] for h in result.history]
    assert losses[0] > 1.0 and losses[-1] < 0.05, losses[::10]
    assert result.validation_loss is not None and result.validation_loss < 0.1
    assert sorted(p.name for p in (tmp_path / "run-overfit").iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    model, tok = load_adapter(tiny_model, str(tmp_path / "run-overfit"))
    assert generate(model, tok, convs[2][:2], max_new_tokens=12).strip().startswith("ls -la dir")


@pytest.mark.slow
def test_resume_after_a_crash_ends_where_an_uninterrupted_run_ends(tiny_model, tmp_path):
    from safetensors.torch import load_file

    convs = [_conv(i) for i in range(6)]
    straight = train_sft(_cfg(tiny_model, tmp_path / "straight", max_steps=6, batch_size=2), convs)
    crashed_cfg = _cfg(tiny_model, tmp_path / "crashed", max_steps=6, batch_size=2)
    with pytest.raises(KeyboardInterrupt):
        train_sft(crashed_cfg, convs, stop_after=3)  # checkpoint at step 2 (save_every=2), killed after 3
    assert not (tmp_path / "crashed").exists()  # an unfinished run never looks finished
    assert (tmp_path / "crashed.ckpt" / "checkpoint-2").is_dir()  # the Trainer's own checkpoint
    live = []
    resumed = train_sft(crashed_cfg, convs, on_log=lambda r: live.append(int(r["step"])))
    assert resumed.resumed_from_step == 2 and resumed.steps == 6
    assert live == [3, 4, 5, 6]  # continues at the saved step, does not redo steps 1-2
    assert [h["step"] for h in resumed.history] == [1, 2, 3, 4, 5, 6]
    a = load_file(str(tmp_path / "straight" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "crashed" / "adapter_model.safetensors"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5)
    assert straight.history[-1]["loss"] == pytest.approx(resumed.history[-1]["loss"], rel=1e-4)


@pytest.mark.slow
def test_padded_baseline_trains_too(tiny_model, tmp_path):
    convs = [_conv(i) for i in range(4)]
    res = train_sft(_cfg(tiny_model, tmp_path / "padded", max_steps=3, packing=False, max_length=128), convs)
    assert res.steps == 3 and res.history[-1]["tokens"] == res.train_tokens


@pytest.mark.slow
def test_dpo_on_top_of_sft_prefers_the_chosen_continuation(tiny_model, tmp_path, monkeypatch):
    from trl import DPOTrainer

    convs = [_conv(i) for i in range(4)]
    train_sft(_cfg(tiny_model, tmp_path / "sft", max_steps=20), convs)
    pairs = [
        {"prompt": c[:2], "chosen": c[2:], "rejected": [{"role": "assistant", "content": "Here is how."}]}
        for c in convs
    ]
    seen = []
    precompute = DPOTrainer._precompute_ref_logps

    def spy(
        self, dataset, name, batch_size
    ):  # the reference: a frozen "ref" copy of the SFT adapter, run once
        seen.append((name, self.ref_model is None, sorted(self.model.peft_config), self.model.active_adapter))
        return precompute(self, dataset, name, batch_size)

    monkeypatch.setattr(DPOTrainer, "_precompute_ref_logps", spy)
    res = train_dpo(
        _cfg(tiny_model, tmp_path / "dpo", max_steps=8, learning_rate=1e-3), pairs, str(tmp_path / "sft")
    )
    assert seen == [
        ("train", True, ["default", "ref"], "default")
    ]  # no second model copy; ref adapter precomputed
    assert res.history[0]["loss"] == pytest.approx(0.6931, abs=1e-3)  # reference == SFT policy at step 0
    assert res.history[-1]["loss"] < 0.5 and res.history[-1]["reward_accuracy"] == 1.0
    assert sorted(p.name for p in (tmp_path / "dpo").iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]


def test_qlora_4bit_trains(tiny_model, tmp_path):
    pytest.importorskip("bitsandbytes")
    convs = [_conv(i) for i in range(2)]
    res = train_sft(_cfg(tiny_model, tmp_path / "qlora", max_steps=2, qlora=True), convs)
    assert res.steps == 2 and all(h["loss"] == h["loss"] for h in res.history)  # finite, not NaN
    # LoRA B starts at zero: after two 4-bit steps the saved adapter must have moved away from it
    from safetensors.torch import load_file

    weights = load_file(str(tmp_path / "qlora" / "adapter_model.safetensors"))
    lora_b = [t for name, t in weights.items() if "lora_B" in name]
    assert lora_b and all(t.float().abs().sum() > 0 for t in lora_b)


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_mlflow_run_and_registered_version_load_back(tiny_model, tmp_path, settings):
    convs = [_conv(i) for i in range(4)]
    res = train_sft(_cfg(tiny_model, tmp_path / "reg", max_steps=40), convs)
    png = registry.loss_curve_png(res.history, tmp_path / "loss.png")
    reg = registry.log_training_run(
        kind="sft",
        run_name="reg",
        params={"lr": 3e-3},
        history=res.history,
        summary={"loss": res.final_loss},
        adapter_dir=res.adapter_dir,
        tags={"dagster_run_id": "r1", "dataset_version": "v1"},
        extra_artifacts=[png],
        settings=settings,
    )
    c = registry.client(settings)
    run = c.get_run(reg.run_id)
    assert run.data.tags["dagster_run_id"] == "r1" and run.data.params["lr"] == "0.003"
    assert len(c.get_metric_history(reg.run_id, "loss")) == 40
    assert {"loss", "learning_rate", "grad_norm"} <= set(run.data.metrics)
    assert reg.model_version == "1" and str(settings.mlflow_dir) in reg.artifact_uri
    reg2 = registry.log_training_run(
        kind="sft",
        run_name="reg2",
        params={},
        history=res.history,
        summary={},
        adapter_dir=res.adapter_dir,
        tags={},
        settings=settings,
    )
    assert reg2.model_version == "2"
    back = registry.download_adapter(reg.model_uri, tmp_path / "dl", settings)
    model, tok = load_adapter(tiny_model, str(back))
    assert generate(model, tok, convs[1][:2], max_new_tokens=12).strip().startswith("ls -la dir")
    assert registry.loss_curve_markdown(png).startswith("![loss curve](data:image/png;base64,")


def test_cli_inspect_prints_the_mask_report(tiny_model, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bashgym_assets.training.__main__ import main
    from bashgym_assets.training_data import build as ds

    d = syn.demo_inputs()
    rows = ds.build_sft(d["segments"], d["trajectories"]).rows
    pq.write_table(pa.Table.from_pylist(rows, schema=ds.SFT_SCHEMA), tmp_path / "sft.parquet")
    assert main(["sft", "--data", str(tmp_path / "sft.parquet"), "--base", tiny_model, "--inspect"]) == 0
    out = capsys.readouterr().out
    n_train = sum(r["split"] == "train" for r in rows)
    assert f"| {n_train} |" in out and "[[exit<|im_end|>]]" in out


def test_one_config_for_the_trainer_the_asset_and_the_cli(tmp_path):
    """``TrainHyperparams`` is defined once: the asset's run config and the CLI's options are made from it, with
    its defaults, and reach ``TrainConfig`` unchanged (issue 30: the fields were copied into three places)."""
    import argparse

    from bashgym_assets.defs.training import TrainRunConfig, _train_config
    from bashgym_assets.training.__main__ import add_hyperparam_arguments
    from bashgym_assets.training.trainer import TrainHyperparams

    parser = argparse.ArgumentParser()
    add_hyperparam_arguments(parser)
    assert vars(parser.parse_args([])) == TrainHyperparams().model_dump()
    cli = vars(
        parser.parse_args(
            [
                "--lr",
                "0.01",
                "--no-packing",
                "--dtype",
                "bfloat16",
                "--curriculum",
                "--max-steps",
                "7",
                "--attn",
                "eager",
            ]
        )
    )
    assert (
        cli
        == TrainHyperparams(
            learning_rate=0.01,
            packing=False,
            dtype="bfloat16",
            curriculum=True,
            max_steps=7,
            attn_implementation="eager",
        ).model_dump()
    )
    run = TrainRunConfig(epochs=2.0, curriculum=True, warmup_steps=5, run_name="r")
    assert {
        k: v for k, v in run.model_dump().items() if k in TrainHyperparams.model_fields
    } == TrainHyperparams(epochs=2.0, curriculum=True, warmup_steps=5).model_dump()
    cfg = _train_config(run, "base", tmp_path / "out", tmp_path / "ckpt", "r")
    assert TrainHyperparams.model_validate(
        cfg.model_dump(include=set(TrainHyperparams.model_fields))
    ) == TrainHyperparams.model_validate(run.model_dump(include=set(TrainHyperparams.model_fields)))
