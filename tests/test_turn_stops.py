"""Every generation path stops where an operator's turn ends (``inference.turns.turn_stops``), not at eos only
(issue 41): ``trainer.generate``, the MLflow pyfunc model, ``bashgym serve``, and the export's generation config,
GGUF metadata and Ollama Modelfile. The model (``turn_end_model``) closes its turns with ``<|im_end|>`` but its eos
is ``</s>``, and it runs on past the turn end: a path that stops at eos only replies "lslsls...", not "ls"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from turn_end_model import END_OF_TURN, EOS, REPLY, build_turn_end_model

from bashgym_assets.inference.turns import turn_stops

ASK = [{"role": "user", "content": "list the files"}]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_turn_end_model(tmp_path_factory.mktemp("turn-end") / "model")


@pytest.fixture(scope="module")
def adapter(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter that changes nothing (B = 0): the merged model is the base, bigram machine included."""
    from bashgym_assets.testing.tiny_model import random_lora_adapter

    return random_lora_adapter(base, tmp_path_factory.mktemp("turn-end-adapter") / "adapter", scale=0.0)


@pytest.fixture(scope="module")
def tok(base: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base)


def test_turn_stops_are_the_turn_end_then_eos(tok) -> None:
    end, eos = tok.convert_tokens_to_ids(END_OF_TURN), tok.convert_tokens_to_ids(EOS)
    stops = turn_stops(tok)
    assert tok.eos_token == EOS and stops.end_of_turn_id == end
    assert stops.ids == sorted({end, eos}) and stops.strings == [END_OF_TURN, EOS]
    assert stops.cut([7, 8, end, 9, eos]) == [7, 8] and stops.cut([7, 8]) == [7, 8]


def test_the_model_runs_past_its_turn_end_when_only_eos_stops_it(base: Path, tok) -> None:
    """The premise of every test below: with eos only, the reply goes on after the turn end."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base)
    ids = tok.apply_chat_template(ASK, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=6, do_sample=False, eos_token_id=tok.eos_token_id)
    new = out[0, ids["input_ids"].shape[1] :].tolist()
    assert tok.decode(new) == f"{REPLY}{END_OF_TURN}" * 3


def test_trainer_generate_stops_at_the_turn_end(base: Path, tok) -> None:
    from transformers import AutoModelForCausalLM

    from bashgym_assets.training.trainer import generate

    model = AutoModelForCausalLM.from_pretrained(base)
    assert generate(model, tok, ASK, max_new_tokens=12) == REPLY


def test_serving_stops_at_the_turn_end(base: Path) -> None:
    from bashgym_assets.serving.engine import ChatEngine, GenerationRequest

    engine = ChatEngine(base, name="turn-end", max_context_tokens=256).load()
    gen = engine.generate([GenerationRequest(messages=ASK, max_tokens=12)])[0]
    assert (gen.text, gen.finish_reason) == (REPLY, "stop") and gen.completion_tokens <= 2


@pytest.mark.slow
def test_the_mlflow_pyfunc_stops_at_the_turn_end(base: Path, adapter: Path, tmp_path: Path) -> None:
    """Logged and registered as a training run's model, loaded back by MLflow: its reply ends at the turn end,
    computed by the copy of ``inference/turns.py`` logged with the model (bashgym need not be installed)."""
    from bashgym_assets.config import Settings
    from bashgym_assets.testing.tiny_model import register_adapter
    from bashgym_assets.training import pyfunc, registry

    settings = Settings(home=tmp_path / "home")
    settings.ensure_dirs()
    registered = register_adapter(settings, base, adapter)
    sys.modules.pop(pyfunc.TURNS_MODULE, None)
    model = registry.load_model(registered.model_uri, settings)
    logged_turns = Path(sys.modules[pyfunc.TURNS_MODULE].__file__ or "")
    assert logged_turns.parent.name == "code" and "bashgym_assets" not in logged_turns.parts
    assert model.predict(ASK, params={"max_new_tokens": 12}) == REPLY
    assert model.predict(["list the files", ASK], params={"max_new_tokens": 12}) == [REPLY, REPLY]


@pytest.mark.slow
def test_the_export_stops_at_the_turn_end(base: Path, adapter: Path, tmp_path: Path) -> None:
    """generation_config.json lists both stop ids (transformers stops at the turn end with no argument), the GGUF
    names the turn end as its eot token (llama.cpp and Ollama end generation there) and the Modelfile stops at
    both strings."""
    import torch
    from gguf import GGUFReader
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bashgym_assets.export.exporter import ResolvedModel, export_model

    resolved = ResolvedModel(
        model_uri="models:/bashgym-operator/1",
        model_name="bashgym-operator",
        version="1",
        alias="",
        base_model=str(base),
    )
    out = tmp_path / "export"
    report = export_model(out, formats=("f16",), verify=False, adapter_dir=adapter, resolved=resolved)
    tok = AutoTokenizer.from_pretrained(out)
    stops = turn_stops(tok)
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == stops.ids
    model = AutoModelForCausalLM.from_pretrained(out)
    ids = tok.apply_chat_template(ASK, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        new = model.generate(**ids, max_new_tokens=12, do_sample=False)[0, ids["input_ids"].shape[1] :]
    assert tok.decode(new, skip_special_tokens=True) == REPLY

    fields = GGUFReader(report.gguf[0].path).fields
    assert fields["tokenizer.ggml.eot_token_id"].contents() == stops.end_of_turn_id
    assert fields["tokenizer.ggml.eos_token_id"].contents() == tok.convert_tokens_to_ids(EOS)
    modelfile = (out / "Modelfile").read_text()
    assert f'PARAMETER stop "{END_OF_TURN}"' in modelfile and f'PARAMETER stop "{EOS}"' in modelfile
