"""Export (``bashgym_assets.export``): LoRA adapters merged and saved in HF format, written as GGUF (f16 and
q8_0) with the gguf package and VERIFIED IN LLAMA.CPP ITSELF (node-llama-cpp's prebuilt CPU binary, installed by
scripts/setup.sh into tools/llama): its tokenizer, detokenizer and greedy replies against the merged model's. One
export of the offline SmolLM2-135M-Instruct with a small random adapter (``smol_export``, shared by the module)
carries the llama.cpp checks on the real vocabulary; a tiny model covers the pre-tokenizer rules, the Ollama
Modelfile, the Hub push against a local stand-in of the Hub's HTTP API (the real Hub cannot be reached from here),
and the ``exported_model`` asset on a real MLflow registry (candidate fallback, no-adapter skip)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bashgym_assets.config import Settings
from bashgym_assets.export import (
    ExportReport,
    GGUFExportError,
    LlamaCppError,
    ResolvedModel,
    export_model,
    modelfile,
    push_to_hub,
    run_llama_cpp,
    verify_gguf,
    write_gguf,
)
from bashgym_assets.export.exporter import OPERATOR_BANNER, Q8_MIN_FORCED_AGREEMENT
from bashgym_assets.export.gguf_file import KNOWN_PRE_TOKENIZERS, chkhsh, pre_tokenizer_name
from bashgym_assets.export.llama_cpp import installed_version
from bashgym_assets.export.ollama import CHATML_GO_TEMPLATE, default_system
from bashgym_assets.lake import current_umask
from bashgym_assets.testing.tiny_model import (
    CHATML_TEMPLATE,
    build_tiny_model,
    random_lora_adapter,
    register_adapter,
    with_smollm_pre_tokenizer,
)

SMOL_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}"
)
SMOL_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
# What llama.cpp must tokenize and detokenize exactly as transformers does (the user's `sed` came back as
# `sed -i's/foo/bar/g'` under the `gpt-2` pre-tokenizer, which cleans the space before a quote).
SED = "sed -i 's/foo/bar/g'"
PROBES = (
    SED,
    "   three leading spaces",
    "\tcat -A notes.txt\n\n  indented",
    "wc -l 12345 3.14 007 2>&1",
    "héllo wörld, naïve café ✓ 日本語 🚀",
    "I've been 'told' he's there",
    "<|im_start|>user\nls -la<|im_end|>\n<|im_start|>assistant\n",
)


@pytest.fixture(scope="module")
def tiny_and_adapter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny Llama chat model (SmolLM's pre-tokenizer layout) and a random LoRA adapter on every linear layer."""
    root = tmp_path_factory.mktemp("export-tiny")
    base = with_smollm_pre_tokenizer(build_tiny_model(root / "base", init_range=0.02))
    return base, random_lora_adapter(base, root / "adapter")


@pytest.fixture(scope="module")
def smollm2() -> Path:
    """The offline SmolLM2-135M-Instruct, converted once into the project's default data folder (as
    tests/test_training_model.py uses it)."""
    from bashgym_assets.training import base_model as bm

    try:
        return Path(bm.prepare_smollm2(Settings()).path)
    except bm.BaseModelError as exc:
        pytest.fail(f"the offline SmolLM2 model is not available: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def smol_export(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, ExportReport]:
    """SmolLM2 + a small random adapter (its replies stay fluent), exported once to f16 and q8_0 and verified in
    llama.cpp: (adapter, output folder, report)."""
    try:
        installed_version()
    except LlamaCppError as exc:
        pytest.fail(str(exc), pytrace=False)
    root = tmp_path_factory.mktemp("export-smol")
    adapter = random_lora_adapter(smollm2, root / "adapter", scale=0.05)
    out = root / "export"
    report = export_model(
        out, formats=("f16", "q8_0"), adapter_dir=adapter, resolved=_resolved(smollm2), max_new_tokens=16
    )
    return adapter, out, report


def _resolved(base: Path, version: str = "7") -> ResolvedModel:
    return ResolvedModel(
        model_uri=f"models:/bashgym-operator/{version}",
        model_name="bashgym-operator",
        version=version,
        alias="champion",
        base_model=str(base),
    )


def _fields(path: Path) -> dict:
    """Every metadata value of a GGUF file (one read: parsing a 49k-token vocabulary takes a while)."""
    from gguf import GGUFReader

    return {k: f.contents() for k, f in GGUFReader(str(path)).fields.items()}


def _relabelled(src: Path, dst: Path, pre: str) -> Path:
    """A copy of a GGUF with another ``tokenizer.ggml.pre`` (gguf's own gguf_new_metadata)."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(
        str(dst), arch=reader.fields["general.architecture"].contents(), endianess=reader.endianess
    )
    copy_with_new_metadata(
        reader, writer, {"tokenizer.ggml.pre": MetadataDetails(gguf.GGUFValueType.STRING, pre)}, []
    )
    return dst


@pytest.mark.model
@pytest.mark.slow
def test_export_merges_and_llama_cpp_reproduces_the_merged_model(
    smollm2: Path, smol_export: tuple[Path, Path, ExportReport]
) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapter, out, report = smol_export
    # the merged HF folder loads as a plain model and computes what base + adapter compute
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    with_adapter = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(smollm2), str(adapter)
    ).eval()
    plain = AutoModelForCausalLM.from_pretrained(smollm2).eval()
    ids = torch.tensor([[1, 5, 9, 42, 7, 2]])
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, with_adapter(ids).logits, atol=1e-3)
        assert not torch.allclose(
            merged(ids).logits, plain(ids).logits, atol=1e-2
        )  # the adapter did something
    assert {"model.safetensors", "tokenizer.json", "chat_template.jinja", "config.json"} <= set(
        report.hf_files
    )

    # every GGUF, loaded by llama.cpp (prebuilt, CPU): tokenizer, detokenizer, weights, template, replies
    assert report.verified and not report.verify_error, report.verify_error
    assert [g.format for g in report.gguf] == ["f16", "q8_0"] and [c.format for c in report.gguf_checks] == [
        "f16",
        "q8_0",
    ]
    for check in report.gguf_checks:
        assert check.pre_tokenizer == "smollm" and "prebuilt, cpu" in check.llama_cpp
        assert check.tokenizer_identical and check.detokenize_identical, check.tokenizer_mismatches
        assert check.weights_exact and check.chat_template_identical and check.passed
    f16 = [r for r in report.verification if r.gguf.endswith("-f16.gguf")]
    q8 = [r for r in report.verification if r.gguf.endswith("-q8_0.gguf")]
    assert len(f16) == len(q8) == 3 and all(r.prompt_tokens_identical for r in f16 + q8)
    assert all(
        r.identical and r.forced_agreement == 1.0 for r in f16
    )  # f16: exactly the merged model's replies
    assert all(r.merged_reply for r in f16)
    q8_check = report.gguf_checks[1]
    assert q8_check.forced_agreement >= Q8_MIN_FORCED_AGREEMENT  # q8_0: within the documented tolerance
    assert report.gguf[1].size_bytes < report.gguf[0].size_bytes

    saved = json.loads((out / "export_report.json").read_text())
    assert saved["verified"] is True and len(saved["verification"]) == 6
    assert [g["path"] for g in saved["gguf"]] == [
        str(out / "bashgym-operator-v7-f16.gguf"),
        str(out / "bashgym-operator-v7-q8_0.gguf"),
    ]
    card = (out / "README.md").read_text()
    assert "models:/bashgym-operator/7" in card and "| bashgym-operator-v7-f16.gguf |" in card
    assert "GGUF verified in llama.cpp" in card and "prebuilt, cpu" in card


@pytest.mark.model
@pytest.mark.slow
def test_llama_cpp_tokenizes_and_detokenizes_as_the_merged_tokenizer(
    smol_export: tuple[Path, Path, ExportReport],
) -> None:
    """The user's report: `gpt2` made llama.cpp refuse the file; the converter's name (`smollm`, found by hashing
    the tokenizer's encoding of its test text) loads, tokenizes and detokenizes as transformers does."""
    from transformers import AutoTokenizer

    _, out, report = smol_export
    tok = AutoTokenizer.from_pretrained(out)
    tj = json.loads((out / "tokenizer.json").read_text())
    # transformers' GGUF conversion left a plain byte-level pre_tokenizer: only the hash tells it is SmolLM's
    assert tj["pre_tokenizer"]["type"] == "ByteLevel" and KNOWN_PRE_TOKENIZERS[chkhsh(tok)] == "smollm"
    assert pre_tokenizer_name(tok, tj) == "smollm"
    for info in report.gguf:
        path, meta = Path(info.path), _fields(Path(info.path))
        assert meta["tokenizer.ggml.pre"] == "smollm" and info.pre_tokenizer == "smollm"
        assert meta["tokenizer.ggml.add_bos_token"] is False and meta["tokenizer.ggml.add_eos_token"] is False
        assert meta["general.quantization_version"] == 2 and meta["general.type"] == "model"
        assert meta["tokenizer.chat_template"] == tok.chat_template
        run = run_llama_cpp(path, texts=PROBES)
        assert run.llama_cpp["build"] == "prebuilt" and run.llama_cpp["gpu"] is False
        for text, got in zip(PROBES, run.texts, strict=True):
            want = tok(text, add_special_tokens=False)["input_ids"]
            assert got.tokens == want, text
            assert got.detokenized == tok.decode(want) == text, text
        assert run.texts[0].detokenized == SED


def test_pre_tokenizer_is_chosen_as_the_converter_does_or_refused(tmp_path: Path) -> None:
    """A tokenizer in no hash table is accepted only in a layout one llama.cpp pre-tokenizer reproduces exactly
    (spaces before quotes cleaned or kept included); anything else is refused, never written under a guess."""
    from transformers import AutoTokenizer

    plain = build_tiny_model(tmp_path / "plain")  # byte-level, clean_up_tokenization_spaces False
    tok = AutoTokenizer.from_pretrained(plain)
    tj = json.loads((plain / "tokenizer.json").read_text())
    assert chkhsh(tok) not in KNOWN_PRE_TOKENIZERS
    with pytest.raises(GGUFExportError, match="unknown pre-tokenizer"):
        pre_tokenizer_name(tok, tj)
    with pytest.raises(GGUFExportError, match="unknown pre-tokenizer"):
        write_gguf(plain, tmp_path / "plain.gguf", "f16")
    assert not (tmp_path / "plain.gguf").exists()
    tok.clean_up_tokenization_spaces = True  # GPT-2's own behaviour: llama.cpp's `gpt-2`
    assert pre_tokenizer_name(tok, tj) == "gpt-2"
    tok.clean_up_tokenization_spaces = False
    digits = {
        "type": "Sequence",
        "pretokenizers": [{"type": "Digits", "individual_digits": True}, tj["pre_tokenizer"]],
    }
    assert pre_tokenizer_name(tok, {**tj, "pre_tokenizer": digits}) == "smollm"
    llama3_split = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
        ],
    }
    with pytest.raises(GGUFExportError, match="unknown pre-tokenizer"):
        pre_tokenizer_name(tok, {**tj, "pre_tokenizer": llama3_split})
    with pytest.raises(GGUFExportError, match="unknown pre-tokenizer"):
        pre_tokenizer_name(tok, {**tj, "normalizer": {"type": "NFC"}, "pre_tokenizer": digits})


@pytest.mark.slow
def test_llama_cpp_refuses_gpt2_and_the_verification_catches_gpt_2(
    tiny_and_adapter: tuple[Path, Path], tmp_path: Path
) -> None:
    """What the exporter used to write (`gpt2`) is refused by llama.cpp, as the user saw; `gpt-2` loads but
    detokenizes `sed -i 's/...'` without its space, and the verification says so. The right name passes."""
    base, _ = tiny_and_adapter
    good = write_gguf(base, tmp_path / "tiny-f16.gguf", "f16", name="tiny")
    assert good.pre_tokenizer == "smollm"
    with pytest.raises(LlamaCppError, match="unknown pre-tokenizer type: 'gpt2'"):
        run_llama_cpp(_relabelled(tmp_path / "tiny-f16.gguf", tmp_path / "gpt2.gguf", "gpt2"), texts=[SED])
    _, check = verify_gguf(base, tmp_path / "tiny-f16.gguf", "f16", max_new_tokens=4)
    assert check.passed and check.detokenize_identical and check.tokenizer_identical
    wrong = _relabelled(tmp_path / "tiny-f16.gguf", tmp_path / "gpt-2.gguf", "gpt-2")
    assert run_llama_cpp(wrong, texts=[SED]).texts[0].detokenized == "sed -i's/foo/bar/g'"
    _, check = verify_gguf(base, wrong, "f16", max_new_tokens=4)
    assert not check.detokenize_identical and not check.passed
    assert any(t.startswith(SED) for t in check.tokenizer_mismatches)


def test_llama_cpp_missing_is_said_plainly(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"dependencies": {"node-llama-cpp": "3.21.1"}}))
    with pytest.raises(LlamaCppError, match="scripts/setup.sh"):
        run_llama_cpp(tmp_path / "m.gguf", texts=["ls"], tools_dir=tmp_path)


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
    assert {
        "token_embd.weight",
        "blk.0.attn_q.weight",
        "blk.1.ffn_down.weight",
        "output_norm.weight",
    } <= names
    assert "output.weight" not in names  # tied embeddings: readers reuse token_embd
    tokens, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type")
    assert (
        types[tokens.index("<|im_end|>")] == TokenType.CONTROL
        and types[tokens.index("ls")] == TokenType.NORMAL
    )
    assert field("tokenizer.ggml.eos_token_id") == tokens.index("<|im_end|>")
    assert field("tokenizer.ggml.eot_token_id") == tokens.index("<|im_end|>")  # inference.turns' turn end
    assert len(field("tokenizer.ggml.merges")) > 100 and field("tokenizer.chat_template") == CHATML_TEMPLATE
    assert info.tensors == len(names) and info.pre_tokenizer == field("tokenizer.ggml.pre") == "smollm"
    # as the HF tokenizer does it (no BOS/EOS added to a text), and as llama.cpp's converter writes every file
    assert field("tokenizer.ggml.add_bos_token") is False and field("tokenizer.ggml.add_eos_token") is False
    assert field("general.quantization_version") == 2 and field("general.type") == "model"
    write_gguf(base, tmp_path / "q.gguf", "q8_0", name="tiny")
    q8 = _fields(tmp_path / "q.gguf")
    assert q8["general.quantization_version"] == 2 and q8["general.file_type"] == 7  # MOSTLY_Q8_0
    with pytest.raises(GGUFExportError):
        write_gguf(base, tmp_path / "x.gguf", "q4_0")


def _ollama_prompt(system: str | None, messages: list[dict[str, str]]) -> str:
    """What Ollama renders with this Modelfile: SYSTEM first when the request has no system message, then
    ``CHATML_GO_TEMPLATE`` over the messages (the Go template is a plain loop, written out here)."""
    assert CHATML_GO_TEMPLATE.startswith(
        "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>"
    )
    msgs = (
        [{"role": "system", "content": system}] if system and messages[0]["role"] != "system" else []
    ) + messages
    return (
        "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)
        + "<|im_start|>assistant\n"
    )


@pytest.mark.model
@pytest.mark.slow
def test_one_system_message_rule_for_every_runtime(smol_export: tuple[Path, Path, ExportReport]) -> None:
    """A chat without a system message gets the chat template's own default everywhere: transformers and
    `bashgym serve` (the template), the GGUF (the same template, for llama.cpp) and Ollama (the Modelfile's
    SYSTEM is that default). The card tells a client to send the login banner it was trained with."""
    import re

    from transformers import AutoTokenizer

    _, out, report = smol_export
    tok = AutoTokenizer.from_pretrained(out)
    mf = (out / "Modelfile").read_text()
    system = re.search(r'^SYSTEM """(.*?)"""$', mf, re.S | re.M)
    assert system and system.group(1) == SMOL_DEFAULT_SYSTEM and OPERATOR_BANNER not in mf
    assert mf == report.modelfile and mf.startswith("FROM ./bashgym-operator-v7-f16.gguf\n")
    chat = [{"role": "user", "content": "list the files here"}]
    hf = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert _ollama_prompt(system.group(1), chat) == hf
    with_banner = [{"role": "system", "content": OPERATOR_BANNER}, *chat]
    assert _ollama_prompt(system.group(1), with_banner) == tok.apply_chat_template(
        with_banner, tokenize=False, add_generation_prompt=True
    )
    assert all(c.chat_template_identical for c in report.gguf_checks)  # the GGUF carries that same template
    card = (out / "README.md").read_text()
    assert "## System message" in card and OPERATOR_BANNER in card and SMOL_DEFAULT_SYSTEM in card


@pytest.mark.model
@pytest.mark.slow
def test_export_files_follow_the_umask(smol_export: tuple[Path, Path, ExportReport]) -> None:
    _, out, _ = smol_export
    want = 0o666 & ~current_umask()
    modes = {p.name: os.stat(p).st_mode & 0o777 for p in out.iterdir() if p.is_file()}
    assert modes["model.safetensors"] == want and set(modes.values()) == {want}, modes


def test_modelfile_chatml_template_stops_and_system() -> None:
    text = modelfile("m-f16.gguf", CHATML_TEMPLATE, stops=["<|im_end|>", "</s>"])  # turn end, then eos
    assert text.startswith("FROM ./m-f16.gguf\n")
    assert (
        'TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}'
        '<|im_start|>assistant\n"""'
    ) in text
    stops = [line.removeprefix("PARAMETER stop ") for line in text.splitlines() if "PARAMETER stop" in line]
    assert stops == ['"<|im_end|>"', '"</s>"', '"<|im_start|>"', '"<|endoftext|>"']  # ChatML's markers too
    assert (
        "PARAMETER temperature 0" in text and "SYSTEM" not in text
    )  # the tiny template has no default system
    smol = modelfile("m.gguf", SMOL_TEMPLATE, stops=["<|im_end|>"])
    assert f'SYSTEM """{SMOL_DEFAULT_SYSTEM}"""' in smol
    assert default_system(SMOL_TEMPLATE) == SMOL_DEFAULT_SYSTEM
    literal = SMOL_TEMPLATE.replace("\\n", "\n")  # as chat_template.jinja stores it: real newlines
    assert default_system(literal) == SMOL_DEFAULT_SYSTEM
    with pytest.raises(ValueError, match="not ChatML"):
        modelfile("m.gguf", "{{ bos_token }}[INST] {{ messages[0]['content'] }} [/INST]", stops=["</s>"])


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
            payload = {
                "files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]
            }
        elif "/commit/" in self.path:
            repo = self.path.split("/api/models/")[1].split("/commit/")[0]
            payload = {
                "commitUrl": f"{base}/{repo}/commit/abc123",
                "commitOid": "abc123",
                "pullRequestUrl": None,
            }
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
        url = push_to_hub(
            folder,
            "me/bashgym-operator",
            "hf_test_token_0123456789",
            endpoint=f"http://127.0.0.1:{server.server_address[1]}",
        )
    finally:
        server.shutdown()
    assert url.endswith("/me/bashgym-operator/commit/abc123")
    paths = [p for _, p, _, _ in _StandInHub.received]
    assert paths[0] == "/api/repos/create" and any(
        "/api/models/me/bashgym-operator/commit/main" in p for p in paths
    )
    assert all(
        h.get("authorization") == "Bearer hf_test_token_0123456789"
        or h.get("Authorization") == "Bearer hf_test_token_0123456789"
        for _, _, h, _ in _StandInHub.received
    )
    commit = next(b for _, p, _, b in _StandInHub.received if "/commit/" in p)
    lines = [json.loads(line) for line in commit.decode().splitlines()]
    files = {x["value"]["path"]: base64.b64decode(x["value"]["content"]) for x in lines if x["key"] == "file"}
    assert set(files) == {"README.md", "Modelfile", "m.gguf"}  # hidden scratch files stay behind
    assert files["m.gguf"] == (folder / "m.gguf").read_bytes()


@pytest.mark.slow
def test_exported_model_asset_candidate_fallback_and_skip(
    tiny_and_adapter: tuple[Path, Path], settings: Settings, empty_mlflow_store: Path
) -> None:
    import dagster as dg

    from bashgym_assets.defs.export import exported_model
    from bashgym_assets.defs.resources import BashgymHome

    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    with dg.instance_for_test() as instance:
        skipped = dg.materialize([exported_model], resources=resources, instance=instance)
        meta = skipped.asset_materializations_for_node("exported_model")[0].metadata
        assert "no adapter is registered yet" in meta["skipped"].value

        base, adapter = tiny_and_adapter
        register_adapter(settings, base, adapter)
        result = dg.materialize(
            [exported_model],
            resources=resources,
            instance=instance,
            run_config={"ops": {"exported_model": {"config": {"max_new_tokens": 8}}}},
        )
    assert result.success
    meta = result.asset_materializations_for_node("exported_model")[0].metadata
    assert (
        meta["alias"].value == "candidate"
        and "no version of bashgym-operator is champion" in meta["note"].value
    )
    assert meta["verified"].value is True and "ollama create" in meta["modelfile"].value
    out = Path(meta["path"].value)
    assert out == settings.artifacts_dir / "exports" / "bashgym-operator-v1"
    assert {r.data["file"] for r in meta["files"].value.records} >= {
        "bashgym-operator-v1-f16.gguf",
        "Modelfile",
        "model.safetensors",
        "README.md",
    }
    saved = json.loads((out / "export_report.json").read_text())
    assert saved["out_dir"] == str(out) and ".tmp-" not in json.dumps(
        saved
    )  # the final folder, never the scratch one
    assert (
        saved["gguf"][0]["path"] == str(out / "bashgym-operator-v1-f16.gguf")
        and Path(saved["gguf"][0]["path"]).is_file()
    )
    assert (
        saved["verified"] is True and saved["gguf_checks"][0]["pre_tokenizer"] == "smollm"
    )  # llama.cpp verified it
    check = result.get_asset_check_evaluations()[-1]
    assert check.check_name == "gguf_round_trip" and check.passed


def test_cli_export_says_when_there_is_nothing_to_export(
    settings: Settings, empty_mlflow_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bashgym_assets.cli import main

    shutil.copy(empty_mlflow_store, settings.mlflow_dir / "mlflow.db")
    assert main(["export", "--out", str(tmp_path / "out")]) == 1
    assert "no registered adapter to export" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
