"""Export a registered adapter as a standalone model: merged Hugging Face folder, GGUF, Ollama Modelfile, card.

``export_model`` resolves a model URI (default ``models:/bashgym-operator@champion``; the ``candidate`` when no
version is champion yet, which the report says), merges the LoRA adapter into its base with peft's
``merge_and_unload`` and saves the result as a plain transformers folder (safetensors, tokenizer, chat template),
writes GGUF files with the ``gguf`` package (``gguf_file.write_gguf``), an Ollama ``Modelfile`` and a model card,
then VERIFIES the GGUF: transformers loads it back from a folder holding nothing else (its tokenizer and config
come from the file alone, as for any consumer), and its greedy replies to a few chats are compared with the
merged model's. The report (``ExportReport``, also ``export_report.json``) carries the verification.

Layout of the output folder (it is the Hugging Face repo as pushed, GGUF and Modelfile included)::

    config.json  model.safetensors  tokenizer.json  tokenizer_config.json  chat_template.jinja
    generation_config.json  README.md  <name>-f16.gguf  [<name>-q8_0.gguf]  Modelfile  export_report.json
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.config import Settings, get_settings
from bashgym_assets.export.gguf_file import GGUFFileInfo, write_gguf
from bashgym_assets.export.ollama import modelfile
from bashgym_assets.rollout.transcript import orientation

CHAMPION = "champion"
CANDIDATE = "candidate"
# What the operator sees when its terminal opens, in training and evaluation (``rollout.transcript``): the system
# turn of the verification chats and the Modelfile's SYSTEM default, so Ollama prompts it as it was trained.
OPERATOR_BANNER = orientation(SimpleNamespace(user="operator", start_dir="/home/operator"))
# Shell tasks like the held-out scenarios', in the format the model was trained on, answered greedily.
VERIFY_CHATS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("system", OPERATOR_BANNER), ("user", "List every file in the current directory, hidden ones included.")),
    (("system", OPERATOR_BANNER), ("user", "Count the lines of notes.txt that contain the word error.")),
    (("system", OPERATOR_BANNER), ("user", "Create a folder named reports and move every .csv file into it.")),
)


class NoAdapterError(LookupError):
    """No version of the registered model exists: nothing to export (the asset reports it as a skip)."""


class ResolvedModel(BaseModel):
    """Which registered version is exported, and why that one."""

    model_uri: str
    model_name: str
    version: str
    alias: str            # champion | candidate | "" (an explicit version)
    base_model: str
    fallback_note: str = ""


class VerifyRow(BaseModel):
    """One verification chat: the merged model's greedy reply and the GGUF's."""

    gguf: str
    prompt: str
    merged_reply: str
    gguf_reply: str
    identical: bool
    token_agreement: float   # positions where both generated the same token / the longer generation
    prompt_tokens_identical: bool


class GGUFCheck(BaseModel):
    """Whole-file checks of one GGUF read back by transformers."""

    gguf: str
    weights_exact: bool       # every tensor equals the merged weight after this format's own rounding
    max_abs_weight_diff: float  # against the merged fp32 weights (the rounding itself)
    chat_template_identical: bool


class ExportReport(BaseModel):
    """What an export wrote and how its round trip went (``export_report.json``, asset metadata)."""

    out_dir: str
    model: ResolvedModel
    hf_files: dict[str, int]
    gguf: list[GGUFFileInfo]
    modelfile: str
    verification: list[VerifyRow] = Field(default_factory=list)
    gguf_checks: list[GGUFCheck] = Field(default_factory=list)
    verified: bool = False
    pushed_to: str = ""
    timings_s: dict[str, float] = Field(default_factory=dict)

    def files_table(self) -> list[dict[str, Any]]:
        root = Path(self.out_dir)
        return [{"file": p.name, "size_mb": round(p.stat().st_size / 1e6, 3)}
                for p in sorted(root.iterdir()) if p.is_file()]


# ---- which model ---------------------------------------------------------------------------------------------
def resolve_model(model_uri: str | None = None, settings: Settings | None = None) -> ResolvedModel:
    """The version to export: ``model_uri`` if given, else the champion, else the candidate (noted)."""
    from mlflow.exceptions import MlflowException

    from bashgym_assets.training import registry
    from bashgym_assets.training.base_model import resolve_base_model

    settings = settings or get_settings()
    c = registry.client(settings)
    name = registry.REGISTERED_MODEL
    note, alias = "", ""
    try:
        if model_uri:
            name, mv = registry.model_version(c, model_uri)
            alias = model_uri.split("@", 1)[1] if "@" in model_uri else ""
        else:
            try:
                mv, alias = c.get_model_version_by_alias(name, CHAMPION), CHAMPION
            except MlflowException:
                mv, alias = c.get_model_version_by_alias(name, CANDIDATE), CANDIDATE
                note = (f"no version of {name} is champion yet: exporting the newest candidate (version "
                        f"{mv.version}), which the evaluation has not promoted")
    except MlflowException as exc:
        raise NoAdapterError(f"no registered adapter to export ({model_uri or name}): {exc.message[:200]}") from exc
    base = (mv.tags or {}).get("base_model") or ""
    if not base or (base.startswith("/") and not Path(base).exists()):
        base = resolve_base_model(settings)
    return ResolvedModel(model_uri=f"models:/{name}/{mv.version}", model_name=name, version=str(mv.version),
                         alias=alias, base_model=base, fallback_note=note)


# ---- merge -----------------------------------------------------------------------------------------------------
def merge_adapter(base_model: str, adapter_dir: Path, out_dir: Path) -> dict[str, int]:
    """Base + LoRA merged into plain weights (``merge_and_unload``), saved with the base's tokenizer and chat
    template (not a training template with generation markers). Returns file name -> bytes."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    tok = AutoTokenizer.from_pretrained(base_model)
    if tok.eos_token_id is not None:  # generation stops at the end of a turn, as it did in the evaluation
        merged.generation_config.eos_token_id = tok.eos_token_id
        merged.generation_config.pad_token_id = tok.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return {p.name: p.stat().st_size for p in sorted(out_dir.iterdir()) if p.is_file()}


# ---- verify ----------------------------------------------------------------------------------------------------
def _greedy(model: Any, tok: Any, chat: Sequence[tuple[str, str]], max_new_tokens: int) -> tuple[list[int], list[int]]:
    import torch

    text = tok.apply_chat_template([{"role": r, "content": c} for r, c in chat], tokenize=False,
                                   add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return ids[0].tolist(), out[0, ids.shape[1]:].tolist()


def _rounded(weight: Any, fmt: str) -> Any:
    """A merged weight as this GGUF format stores it (1-D tensors stay fp32, as ``write_gguf`` writes them)."""
    import numpy as np
    import torch

    if weight.ndim == 1:
        return weight
    if fmt == "q8_0" and weight.shape[-1] % 32 == 0:
        import gguf
        from gguf.quants import dequantize, quantize

        q = gguf.GGMLQuantizationType.Q8_0
        arr = dequantize(quantize(np.ascontiguousarray(weight.numpy()), q), q)
        return torch.from_numpy(np.asarray(arr, dtype=np.float32).reshape(weight.shape))
    return weight.half().float()


def verify_gguf(merged_dir: Path, gguf_path: Path, fmt: str, chats: Sequence[Sequence[tuple[str, str]]] = VERIFY_CHATS,
                max_new_tokens: int = 24) -> tuple[list[VerifyRow], GGUFCheck]:
    """Load the GGUF back with transformers (dequantized), from a folder holding only that file, and compare it
    with the merged model: weights (exactly equal after the format's rounding), chat template, and greedy
    replies to ``chats``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(merged_dir)
    with tempfile.TemporaryDirectory(prefix="gguf-verify-") as tmp:
        alone = Path(tmp) / gguf_path.name
        alone.symlink_to(gguf_path.resolve())
        loaded = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=alone.name, dtype=torch.float32).eval()
        gtok = AutoTokenizer.from_pretrained(tmp, gguf_file=alone.name)
    ref, got = merged.state_dict(), loaded.state_dict()
    exact, worst = True, 0.0
    for key, weight in ref.items():
        if key not in got:
            exact = False
            continue
        worst = max(worst, float((weight - got[key]).abs().max()))
        exact = exact and torch.equal(_rounded(weight, fmt), got[key])
    check = GGUFCheck(gguf=gguf_path.name, weights_exact=exact, max_abs_weight_diff=worst,
                      chat_template_identical=gtok.chat_template == tok.chat_template)
    rows = []
    for chat in chats:
        p1, merged_ids = _greedy(merged, tok, chat, max_new_tokens)
        p2, gguf_ids = _greedy(loaded, gtok, chat, max_new_tokens)
        longest = max(len(merged_ids), len(gguf_ids), 1)
        same = sum(a == b for a, b in zip(merged_ids, gguf_ids, strict=False))
        rows.append(VerifyRow(gguf=gguf_path.name, prompt=chat[-1][1], merged_reply=tok.decode(merged_ids,
                              skip_special_tokens=True), gguf_reply=gtok.decode(gguf_ids, skip_special_tokens=True),
                              identical=merged_ids == gguf_ids, token_agreement=round(same / longest, 4),
                              prompt_tokens_identical=p1 == p2))
    return rows, check


# ---- model card ------------------------------------------------------------------------------------------------
def model_card(resolved: ResolvedModel, gguf_files: Sequence[GGUFFileInfo], report_rows: Sequence[VerifyRow],
               repo_id: str = "") -> str:
    """README.md of the export (the Hub renders it as the model card)."""
    ggufs = "\n".join(f"- `{Path(g.path).name}` ({g.format}, {g.size_bytes / 1e6:.1f} MB)" for g in gguf_files)
    checks = "\n".join(f"| {r.gguf} | {r.prompt[:60]} | {'yes' if r.identical else 'no'} | {r.token_agreement} |"
                       for r in report_rows) or "| (not verified) | | | |"
    note = f"\n> {resolved.fallback_note}\n" if resolved.fallback_note else ""
    base = resolved.base_model
    hub_base = ("HuggingFaceTB/SmolLM2-135M-Instruct" if Path(base).name == "SmolLM2-135M-Instruct"
                else "" if base.startswith("/") else base)
    return f"""---
library_name: transformers
{f'base_model: {hub_base}' if hub_base else ''}
tags: [bashgym, shell, lora-merged, gguf]
---
# bashgym operator ({resolved.model_name} version {resolved.version})

A shell operator: given a task in a chat (ChatML), it replies with one bash command per turn and `exit` when
done. Fine-tuned by bashgym with LoRA on verified sandbox trajectories, then the adapter was
merged into its base (`{Path(resolved.base_model).name}`).
{note}
- Registered model: `{resolved.model_uri}`{f' (alias `{resolved.alias}`)' if resolved.alias else ''}
- Weights: `model.safetensors` (fp32, merged), tokenizer and chat template (`chat_template.jinja`)
{ggufs}
- `Modelfile` for Ollama (ChatML template, stop tokens)

## Use
```python
from transformers import AutoModelForCausalLM, AutoTokenizer
tok = AutoTokenizer.from_pretrained("{repo_id or '.'}")
model = AutoModelForCausalLM.from_pretrained("{repo_id or '.'}")
```
```bash
ollama create bashgym-operator -f Modelfile && ollama run bashgym-operator "list the files here"
```

## GGUF round trip (greedy, transformers reading the GGUF back)
| file | prompt | identical to merged | token agreement |
|---|---|---|---|
{checks}

Limits: a small model trained on a few hundred sandbox scenarios; run what it types in a sandbox, not on a host
you care about.
"""


# ---- push ------------------------------------------------------------------------------------------------------
def push_to_hub(out_dir: Path, repo_id: str, token: str, endpoint: str | None = None, private: bool = True) -> str:
    """``HfApi.upload_folder`` of the whole export (a model repo, created if missing). Returns the commit URL."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    info = api.upload_folder(folder_path=str(out_dir), repo_id=repo_id, repo_type="model",
                             commit_message="bashgym export", ignore_patterns=[".*"])
    return str(getattr(info, "commit_url", info))


# ---- all of it -------------------------------------------------------------------------------------------------
def export_model(out_dir: Path, model_uri: str | None = None, formats: Sequence[str] = ("f16",),
                 verify: bool = True, chats: Sequence[Sequence[tuple[str, str]]] = VERIFY_CHATS,
                 max_new_tokens: int = 24, hub_repo: str | None = None, hub_token: str | None = None,
                 hub_endpoint: str | None = None, settings: Settings | None = None,
                 adapter_dir: Path | None = None, resolved: ResolvedModel | None = None) -> ExportReport:
    """Export one registered adapter into ``out_dir`` (see the module docstring). ``adapter_dir`` + ``resolved``
    skip the registry (tests, an adapter already on disk). Pushes when ``hub_repo`` and a token are given."""
    from bashgym_assets.training import registry

    settings = settings or get_settings()
    out_dir = Path(out_dir)
    timings: dict[str, float] = {}
    t = time.monotonic()
    resolved = resolved or resolve_model(model_uri, settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="export-adapter-") as tmp:
        adapter = adapter_dir or registry.download_adapter(resolved.model_uri, Path(tmp), settings)
        hf_files = merge_adapter(resolved.base_model, Path(adapter), out_dir)
    timings["merge_s"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    name = f"bashgym-operator-v{resolved.version}"
    ggufs = [write_gguf(out_dir, out_dir / f"{name}-{fmt}.gguf", fmt, name=name) for fmt in formats]
    timings["gguf_s"] = round(time.monotonic() - t, 2)
    chat_template = (out_dir / "chat_template.jinja").read_text() if (out_dir / "chat_template.jinja").exists() \
        else json.loads((out_dir / "tokenizer_config.json").read_text()).get("chat_template")
    mf = modelfile(Path(ggufs[0].path).name, chat_template, system=OPERATOR_BANNER)
    (out_dir / "Modelfile").write_text(mf)
    report = ExportReport(out_dir=str(out_dir), model=resolved, hf_files=hf_files, gguf=ggufs, modelfile=mf)
    if verify:
        t = time.monotonic()
        for info in ggufs:
            rows, check = verify_gguf(out_dir, Path(info.path), info.format, chats, max_new_tokens)
            report.verification += rows
            report.gguf_checks.append(check)
        timings["verify_s"] = round(time.monotonic() - t, 2)
        # f16 must reproduce the merged model's replies; q8_0 is reported (agreement), not required to
        report.verified = all(c.weights_exact and c.chat_template_identical for c in report.gguf_checks) and all(
            r.identical and r.prompt_tokens_identical for r in report.verification if r.gguf.endswith("-f16.gguf"))
    (out_dir / "README.md").write_text(model_card(resolved, ggufs, report.verification, hub_repo or ""))
    if hub_repo and hub_token:
        t = time.monotonic()
        (out_dir / "export_report.json").write_text(report.model_dump_json(indent=2))
        report.pushed_to = push_to_hub(out_dir, hub_repo, hub_token, endpoint=hub_endpoint)
        timings["push_s"] = round(time.monotonic() - t, 2)
    report.timings_s = timings
    (out_dir / "export_report.json").write_text(report.model_dump_json(indent=2))
    return report

