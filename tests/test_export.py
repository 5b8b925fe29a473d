"""Export (``bashgym_assets.export``): a tiny model with a random LoRA adapter merged, saved in HF format, written
as GGUF (f16 and q8_0) with the gguf package and read back by transformers (weights, chat template, greedy
replies), the Ollama Modelfile, the Hub push against a local stand-in of the Hub's HTTP API (the real Hub cannot
be reached from here), and the ``exported_model`` asset on a real MLflow registry (candidate fallback, no-adapter
skip)."""

from __future__ import annotations

import base64
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bashgym_assets.config import Settings
from bashgym_assets.export import (
    GGUFExportError,
    ResolvedModel,
    export_model,
    modelfile,
    push_to_hub,
    write_gguf,
)
from bashgym_assets.export.gguf_file import pre_tokenizer_name
from bashgym_assets.export.ollama import default_system
from bashgym_assets.training.tiny import CHATML_TEMPLATE, build_tiny_model

SMOL_TEMPLATE = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                 "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                 "<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}")


@pytest.fixture(scope="module")
def tiny_and_adapter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny Llama chat model and a random (non-zero) LoRA adapter on every linear layer, saved."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("export-tiny")
    base = build_tiny_model(root / "base", init_range=0.02)
    torch.manual_seed(1)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                                LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    peft_model.save_pretrained(root / "adapter")
    return base, root / "adapter"


def _resolved(base: Path, version: str = "7") -> ResolvedModel:
    return ResolvedModel(model_uri=f"models:/bashgym-operator/{version}", model_name="bashgym-operator",
                         version=version, alias="champion", base_model=str(base))


def test_export_round_trip_f16_and_q8_0(tiny_and_adapter: tuple[Path, Path], tmp_path: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base, adapter = tiny_and_adapter
    out = tmp_path / "export"
    report = export_model(out, formats=("f16", "q8_0"), adapter_dir=adapter, resolved=_resolved(base))

    # the merged HF folder loads as a plain model and computes what base + adapter compute
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    with_adapter = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(adapter)).eval()
    plain = AutoModelForCausalLM.from_pretrained(base).eval()
    ids = torch.tensor([[1, 5, 9, 42, 7, 2]])
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, with_adapter(ids).logits, atol=1e-4)
        assert not torch.allclose(merged(ids).logits, plain(ids).logits, atol=1e-3)  # the adapter did something
    assert {"model.safetensors", "tokenizer.json", "chat_template.jinja", "config.json"} <= set(report.hf_files)

    # GGUF read back by transformers: every weight as the format rounds it, the template, the replies
    assert [g.format for g in report.gguf] == ["f16", "q8_0"]
    assert all(c.weights_exact and c.chat_template_identical for c in report.gguf_checks)
    f16 = [r for r in report.verification if r.gguf.endswith("-f16.gguf")]
    assert len(f16) == 3 and all(r.identical and r.prompt_tokens_identical for r in f16)
    assert all(0.0 <= r.token_agreement <= 1.0 for r in report.verification)
    assert report.verified
    q8 = next(g for g in report.gguf if g.format == "q8_0")
    assert q8.size_bytes < next(g for g in report.gguf if g.format == "f16").size_bytes

    mf = (out / "Modelfile").read_text()
    assert mf.startswith("FROM ./bashgym-operator-v7-f16.gguf\n")
    assert 'SYSTEM """You are logged in to' in mf and "operator@" in mf   # the banner it was trained with
    card = (out / "README.md").read_text()
    assert "models:/bashgym-operator/7" in card and "| bashgym-operator-v7-f16.gguf |" in card
    saved = json.loads((out / "export_report.json").read_text())
    assert saved["verified"] is True and len(saved["verification"]) == 6


def test_gguf_metadata_is_what_llama_cpp_reads(tiny_and_adapter: tuple[Path, Path], tmp_path: Path) -> None:
    from gguf import GGUFReader, TokenType

    base, _ = tiny_and_adapter
    info = write_gguf(base, tmp_path / "m.gguf", "f16", name="tiny")
    r = GGUFReader(str(tmp_path / "m.gguf"))

    def field(key: str):
        return r.fields[key].contents()

    assert field("general.architecture") == "llama" and field("tokenizer.ggml.model") == "gpt2"
    assert field("llama.block_count") == 2 and field("llama.attention.head_count_kv") == 2
    names = {t.name for t in r.tensors}
    assert {"token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight", "output_norm.weight"} <= names
    assert "output.weight" not in names                       # tied embeddings: readers reuse token_embd
    tokens, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type")
    assert types[tokens.index("<|im_end|>")] == TokenType.CONTROL and types[tokens.index("ls")] == TokenType.NORMAL
    assert field("tokenizer.ggml.eos_token_id") == tokens.index("<|im_end|>")
    assert len(field("tokenizer.ggml.merges")) > 100 and field("tokenizer.chat_template") == CHATML_TEMPLATE
    assert info.tensors == len(names) and info.pre_tokenizer == "gpt2"
    with pytest.raises(GGUFExportError):
        write_gguf(base, tmp_path / "x.gguf", "q4_0")
    assert pre_tokenizer_name({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, {"type": "ByteLevel"}]}}) == "smollm"


def test_modelfile_chatml_template_stops_and_system() -> None:
    text = modelfile("m-f16.gguf", CHATML_TEMPLATE)
    assert text.startswith("FROM ./m-f16.gguf\n")
    assert ('TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}'
            '<|im_start|>assistant\n"""') in text
    for stop in ("<|im_end|>", "<|im_start|>", "<|endoftext|>"):
        assert f'PARAMETER stop "{stop}"' in text
    assert "PARAMETER temperature 0" in text and "SYSTEM" not in text   # the tiny template has no default system
    smol = modelfile("m.gguf", SMOL_TEMPLATE)
    assert 'SYSTEM """You are a helpful AI assistant named SmolLM, trained by Hugging Face"""' in smol
    assert default_system(SMOL_TEMPLATE) == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    literal = SMOL_TEMPLATE.replace("\\n", "\n")  # as chat_template.jinja stores it: real newlines
    assert default_system(literal) == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    with pytest.raises(ValueError, match="not ChatML"):
        modelfile("m.gguf", "{{ bos_token }}[INST] {{ messages[0]['content'] }} [/INST]")


class _StandInHub(BaseHTTPRequestHandler):
    """The few Hub endpoints ``HfApi.create_repo`` + ``upload_folder`` call, recording what they receive."""

    received: list[tuple[str, str, dict[str, str], bytes]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append(("POST", self.path, dict(self.headers), body))
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        if self.path == "/api/repos/create":
            payload = {"url": f"{base}/{json.loads(body)['organization']}/{json.loads(body)['name']}"}
        elif self.path == "/api/validate-yaml":
            payload = {"errors": [], "warnings": []}
        elif "/preupload/" in self.path:
            files = json.loads(body)["files"]
            payload = {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                 for f in files]}
        elif "/commit/" in self.path:
            repo = self.path.split("/api/models/")[1].split("/commit/")[0]
            payload = {"commitUrl": f"{base}/{repo}/commit/abc123", "commitOid": "abc123", "pullRequestUrl": None}
        else:
            self.send_response(404)
            self.end_headers()
            return
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_push_to_a_stand_in_hub(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "README.md").write_text("---\nlibrary_name: transformers\n---\n# card\n")
    (folder / "Modelfile").write_text("FROM ./m.gguf\n")
    (folder / "m.gguf").write_bytes(b"GGUF" + bytes(range(256)))
    (folder / ".tmp-scratch").write_text("not pushed")
    _StandInHub.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandInHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = push_to_hub(folder, "me/bashgym-operator", "hf_test_token_0123456789",
                          endpoint=f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
    assert url.endswith("/me/bashgym-operator/commit/abc123")
    paths = [p for _, p, _, _ in _StandInHub.received]
    assert paths[0] == "/api/repos/create" and any("/api/models/me/bashgym-operator/commit/main" in p for p in paths)
    assert all(h.get("authorization") == "Bearer hf_test_token_0123456789" or
               h.get("Authorization") == "Bearer hf_test_token_0123456789" for _, _, h, _ in _StandInHub.received)
    commit = next(b for _, p, _, b in _StandInHub.received if "/commit/" in p)
    lines = [json.loads(line) for line in commit.decode().splitlines()]
    files = {x["value"]["path"]: base64.b64decode(x["value"]["content"]) for x in lines if x["key"] == "file"}
    assert set(files) == {"README.md", "Modelfile", "m.gguf"}      # hidden scratch files stay behind
    assert files["m.gguf"] == (folder / "m.gguf").read_bytes()


def test_exported_model_asset_candidate_fallback_and_skip(tiny_and_adapter: tuple[Path, Path], settings: Settings,
                                                          empty_mlflow_store: Path) -> None:
    import dagster as dg

    from bashgym_assets.defs.export import exported_model
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.training import registry

    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    with dg.instance_for_test() as instance:
        skipped = dg.materialize([exported_model], resources=resources, instance=instance)
        meta = skipped.asset_materializations_for_node("exported_model")[0].metadata
        assert "no adapter is registered yet" in meta["skipped"].value

        base, adapter = tiny_and_adapter
        registry.log_training_run(kind="sft", run_name="tiny", params={}, history=[], summary={},
                                  adapter_dir=str(adapter), tags={}, settings=settings, base_model=str(base))
        result = dg.materialize([exported_model], resources=resources, instance=instance,
                                run_config={"ops": {"exported_model": {"config": {"max_new_tokens": 8}}}})
    assert result.success
    meta = result.asset_materializations_for_node("exported_model")[0].metadata
    assert meta["alias"].value == "candidate" and "no version of bashgym-operator is champion" in meta["note"].value
    assert meta["verified"].value is True and "ollama create" in meta["modelfile"].value
    out = Path(meta["path"].value)
    assert out == settings.artifacts_dir / "exports" / "bashgym-operator-v1"
    assert {r.data["file"] for r in meta["files"].value.records} >= {"bashgym-operator-v1-f16.gguf", "Modelfile",
                                                                   "model.safetensors", "README.md"}
    assert json.loads((out / "export_report.json").read_text())["out_dir"] == str(out)
    check = result.get_asset_check_evaluations()[-1]
    assert check.check_name == "gguf_round_trip" and check.passed


def test_cli_export_says_when_there_is_nothing_to_export(settings: Settings, empty_mlflow_store: Path,
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bashgym_assets.cli import main

    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    assert main(["export", "--out", str(tmp_path / "out")]) == 1
    assert "no registered adapter to export" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
