"""Export a registered adapter as a standalone model: merged Hugging Face folder, GGUF, Ollama Modelfile, card.

``export_model`` resolves a model URI (default ``models:/bashgym-operator@champion``; the ``candidate`` when no
version is champion yet, which the report says), merges the LoRA adapter into its base with peft's
``merge_and_unload`` and saves the result as a plain transformers folder (safetensors, tokenizer, chat template),
writes GGUF files with the ``gguf`` package (``gguf_file.write_gguf``), an Ollama ``Modelfile`` and a model card,
then VERIFIES each GGUF with llama.cpp itself (``llama_cpp.run_llama_cpp``: node-llama-cpp's prebuilt CPU
binary), since a file transformers reads back can still be one llama.cpp refuses or tokenizes differently:

* its tokenizer: the token ids of ``PROBE_TEXTS`` (quotes after a space, leading spaces, digits, unicode,
  converter's test text) and of each verification chat's prompt equal the merged model's tokenizer's, and
  detokenizing gives the same text back;
* its greedy replies to ``VERIFY_CHATS`` against the merged model's (transformers, fp32): f16 must be identical.
  q8_0 rounds every weight to 8 bits: where the merged model's two best tokens are nearly tied (0.0836 against
  0.0830 in one measured case) it may pick the other one, and a free-running reply then goes its own way. So
  q8_0 is judged by teacher forcing: llama.cpp's greedy choice at each position of the merged model's reply,
  given the reply so far, must agree at ``Q8_MIN_FORCED_AGREEMENT`` of the positions or more (a broken file
  agrees at next to none); its free-running replies are reported, not required;
* the file itself, read with ``gguf.GGUFReader``: every weight equals the merged weight after the format's own
  rounding, and the chat template is the merged model's.

The report (``ExportReport``, also ``export_report.json``) carries all of it; ``verified`` is true only when every
file passes. Every written file follows the process umask.

Layout of the output folder (it is the Hugging Face repo as pushed, GGUF and Modelfile included)::

    config.json  model.safetensors  tokenizer.json  tokenizer_config.json  chat_template.jinja
    generation_config.json  README.md  <name>-f16.gguf  [<name>-q8_0.gguf]  Modelfile  export_report.json
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bashgym_assets.config import Settings, get_settings
from bashgym_assets.export.gguf_file import CHKTXT, GGUFFileInfo, write_gguf
from bashgym_assets.export.llama_cpp import LlamaCppError, run_llama_cpp
from bashgym_assets.export.ollama import default_system, modelfile
from bashgym_assets.inference.turns import NoEndOfTurn, turn_stops
from bashgym_assets.lake import current_umask
from bashgym_assets.rollout.transcript import orientation

CHAMPION = "champion"
CANDIDATE = "candidate"
# What the operator sees when its terminal opens, in training and evaluation (``rollout.transcript``): the system
# turn of every training example and of the verification chats. A client sends it as its system message.
OPERATOR_BANNER = orientation(SimpleNamespace(user="operator", start_dir="/home/operator"))
# Shell tasks like the held-out scenarios', in the format the model was trained on, answered greedily.
VERIFY_CHATS: tuple[tuple[tuple[str, str], ...], ...] = (
    (
        ("system", OPERATOR_BANNER),
        ("user", "List every file in the current directory, hidden ones included."),
    ),
    (("system", OPERATOR_BANNER), ("user", "Count the lines of notes.txt that contain the word error.")),
    (
        ("system", OPERATOR_BANNER),
        ("user", "Create a folder named reports and move every .csv file into it."),
    ),
)
# Texts llama.cpp must tokenize and detokenize as the merged model's tokenizer does: a quote after a space (a
# pre-tokenizer that "cleans spaces" gives back `sed -i's/...`), runs of leading spaces and tabs, digits, unicode,
# and convert_hf_to_gguf.py's own test text.
PROBE_TEXTS: tuple[str, ...] = (
    "sed -i 's/foo/bar/g' notes.txt",
    "   ls -la   # three leading spaces",
    "\tindented\n\n  two blank lines, then 'quoted' words",
    "wc -l 12345 3.14 007 2>&1 | tail -n 100",
    "héllo wörld, naïve café ✓ 日本語 🚀 ünïcödé",
    "I've been told he's there, 'RE you sure? echo \"done\"",
    CHKTXT,
)
# q8_0's tolerance (f16 has none): the share of reply positions where llama.cpp, fed the merged model's reply so
# far, picks the merged model's next token. Measured: 46 of 48 (0.96) on SmolLM2-135M with a random adapter.
Q8_MIN_FORCED_AGREEMENT = 0.8


class NoAdapterError(LookupError):
    """No version of the registered model exists: nothing to export (the asset reports it as a skip)."""


class ResolvedModel(BaseModel):
    """Which registered version is exported, and why that one."""

    model_uri: str
    model_name: str
    version: str
    alias: str  # champion | candidate | "" (an explicit version)
    base_model: str
    fallback_note: str = ""


class VerifyRow(BaseModel):
    """One verification chat: the merged model's greedy reply and llama.cpp's on the GGUF."""

    gguf: str
    prompt: str
    merged_reply: str
    gguf_reply: str
    identical: bool
    token_agreement: float  # positions where both generated the same token / the longer generation
    prompt_tokens_identical: (
        bool  # llama.cpp tokenized the rendered chat as the merged model's tokenizer does
    )
    agreeing_prefix: int = 0  # leading reply tokens both generated alike
    forced_agreement: float = (
        0.0  # teacher forcing: positions of the merged reply where llama.cpp picks its token
    )


class GGUFCheck(BaseModel):
    """Whole-file checks of one GGUF: its tensors read back with ``GGUFReader``, its tokenizer and replies in
    llama.cpp, and whether the file passes its format's criterion (``passed``)."""

    gguf: str
    format: str = ""
    weights_exact: bool  # every tensor equals the merged weight after this format's own rounding
    max_abs_weight_diff: float  # against the merged fp32 weights (the rounding itself)
    chat_template_identical: bool
    pre_tokenizer: str = ""  # tokenizer.ggml.pre as written
    tokenizer_identical: bool = False  # llama.cpp's token ids == the merged tokenizer's, probes and prompts
    detokenize_identical: bool = False  # llama.cpp's text for those ids == the merged tokenizer's
    tokenizer_mismatches: list[str] = Field(default_factory=list)  # the probe texts that differ (first few)
    replies_identical: int = 0
    replies: int = 0
    forced_agreement: float = 0.0  # over every position of every reply (see VerifyRow)
    llama_cpp: str = ""  # which llama.cpp answered (release, build, cpu)
    passed: bool = False


class ExportReport(BaseModel):
    """What an export wrote and how its verification went (``export_report.json``, asset metadata).

    Assigning ``out_dir`` (the asset does, once the folder is renamed into place) moves every GGUF path with it:
    the report never names a temporary folder that no longer exists."""

    model_config = ConfigDict(validate_assignment=True)

    out_dir: str
    model: ResolvedModel
    hf_files: dict[str, int]
    gguf: list[GGUFFileInfo]
    modelfile: str
    verification: list[VerifyRow] = Field(default_factory=list)
    gguf_checks: list[GGUFCheck] = Field(default_factory=list)
    verified: bool = False
    verify_error: str = ""
    pushed_to: str = ""
    timings_s: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ggufs_in_out_dir(self) -> ExportReport:
        for info in self.gguf:
            info.path = str(Path(self.out_dir) / Path(info.path).name)
        return self

    def files_table(self) -> list[dict[str, Any]]:
        root = Path(self.out_dir)
        return [
            {"file": p.name, "size_mb": round(p.stat().st_size / 1e6, 3)}
            for p in sorted(root.iterdir())
            if p.is_file()
        ]


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
                note = (
                    f"no version of {name} is champion yet: exporting the newest candidate (version "
                    f"{mv.version}), which the evaluation has not promoted"
                )
    except MlflowException as exc:
        raise NoAdapterError(
            f"no registered adapter to export ({model_uri or name}): {exc.message[:200]}"
        ) from exc
    base = (mv.tags or {}).get("base_model") or ""
    if not base or (base.startswith("/") and not Path(base).exists()):
        base = resolve_base_model(settings)
    return ResolvedModel(
        model_uri=f"models:/{name}/{mv.version}",
        model_name=name,
        version=str(mv.version),
        alias=alias,
        base_model=base,
        fallback_note=note,
    )


# ---- merge -----------------------------------------------------------------------------------------------------
def follow_umask(folder: Path) -> None:
    """Every file in ``folder`` readable as the umask allows: safetensors' writer creates model.safetensors 0600
    (a temporary file renamed), which another user's notebook, UI or ``ollama create`` then cannot read."""
    mode = 0o666 & ~current_umask()
    for p in folder.iterdir():
        if p.is_file() and not p.is_symlink():
            os.chmod(p, mode)


def merge_adapter(base_model: str, adapter_dir: Path, out_dir: Path) -> dict[str, int]:
    """Base + LoRA merged into plain weights (``merge_and_unload``), saved with the base's tokenizer and chat
    template (not a training template with generation markers), and a generation config that stops where a turn
    ends (``inference.turns``: every eos id transformers honours). Returns file name -> bytes."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    tok = AutoTokenizer.from_pretrained(base_model)
    try:  # generation stops at the end of a turn, as it did in the evaluation
        merged.generation_config.eos_token_id = turn_stops(tok).ids
        merged.generation_config.pad_token_id = tok.pad_token_id
    except NoEndOfTurn:  # neither a turn-closing nor an eos token: the base's own config is all there is
        pass
    out_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    follow_umask(out_dir)
    return {p.name: p.stat().st_size for p in sorted(out_dir.iterdir()) if p.is_file()}


# ---- verify ----------------------------------------------------------------------------------------------------
@dataclass
class MergedReference:
    """The merged model's side of the verification, computed once for every GGUF format."""

    prompts: list[str]  # each chat rendered by the merged model's chat template
    prompt_ids: list[list[int]]
    replies: list[list[int]]  # greedy, fp32, ending at a stop token or the budget
    probes: list[str]
    probe_ids: list[list[int]]
    probe_texts: list[str]  # decode(probe_ids), as the tokenizer gives them back
    stop_ids: list[int]
    tokenizer: Any


def _stop_ids(model: Any, tok: Any) -> list[int]:
    eos = model.generation_config.eos_token_id
    ids = eos if isinstance(eos, list) else [eos] if eos is not None else [tok.eos_token_id]
    return sorted({int(i) for i in ids if i is not None})


def merged_reference(
    merged_dir: Path,
    chats: Sequence[Sequence[tuple[str, str]]] = VERIFY_CHATS,
    max_new_tokens: int = 24,
    probes: Sequence[str] = PROBE_TEXTS,
) -> MergedReference:
    """The merged model's prompts, greedy replies and probe tokenizations (transformers, fp32, CPU)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
    # Any, as every tokenizer in the package: transformers types apply_chat_template/__call__ by the union of
    # all their modes (text, ids, BatchEncoding), and this calls each in one mode
    tok: Any = AutoTokenizer.from_pretrained(merged_dir)
    stop = _stop_ids(model, tok)
    prompts: list[str] = []
    prompt_ids: list[list[int]] = []
    replies: list[list[int]] = []
    for chat in chats:
        text = tok.apply_chat_template(
            [{"role": r, "content": c} for r, c in chat], tokenize=False, add_generation_prompt=True
        )
        ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=stop,
                pad_token_id=tok.pad_token_id,
            )
        prompts.append(text)
        prompt_ids.append(ids[0].tolist())
        replies.append(out[0, ids.shape[1] :].tolist())
    probe_ids = [tok(t, add_special_tokens=False)["input_ids"] for t in probes]
    return MergedReference(
        prompts=prompts,
        prompt_ids=prompt_ids,
        replies=replies,
        probes=list(probes),
        probe_ids=probe_ids,
        probe_texts=[tok.decode(i) for i in probe_ids],
        stop_ids=stop,
        tokenizer=tok,
    )


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


def _unpermute(weights: Any, n_head: int) -> Any:
    """GGML's interleaved RoPE rows back to Hugging Face's rotate-half rows (the inverse of ``gguf_file._permute``)."""
    return (
        weights.reshape(n_head, weights.shape[0] // n_head // 2, 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def check_gguf_file(merged_dir: Path, gguf_path: Path, fmt: str) -> GGUFCheck:
    """The file's tensors (``GGUFReader``, dequantized, RoPE rows un-permuted) against the merged weights after
    the format's rounding, and its chat template against the merged tokenizer's."""
    import gguf
    import numpy as np
    import torch
    from gguf.quants import dequantize
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(merged_dir)
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(merged_dir)
    reader = gguf.GGUFReader(str(gguf_path))
    tensors = {t.name: t for t in reader.tensors}
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    n_head = config.num_attention_heads
    n_head_kv = getattr(config, "num_key_value_heads", None) or n_head
    tied = bool(getattr(config, "tie_word_embeddings", False))
    exact, worst = True, 0.0
    for key, weight in merged.state_dict().items():
        if (key == "lm_head.weight" and tied) or key.endswith("rotary_emb.inv_freq"):
            continue
        t = tensors.get(names.get_name(key, try_suffixes=(".weight", ".bias")) or "")
        if t is None:
            exact = False
            continue
        raw = t.data
        arr = (
            dequantize(raw, t.tensor_type)
            if t.tensor_type == gguf.GGMLQuantizationType.Q8_0
            else np.asarray(raw, dtype=np.float32)
        )
        arr = np.asarray(arr, dtype=np.float32).reshape(tuple(weight.shape))
        if key.endswith("q_proj.weight"):
            arr = _unpermute(arr, n_head)
        elif key.endswith("k_proj.weight"):
            arr = _unpermute(arr, n_head_kv)
        got = torch.from_numpy(np.array(arr, dtype=np.float32, copy=True))
        worst = max(worst, float((weight - got).abs().max()))
        exact = exact and torch.equal(_rounded(weight, fmt), got)

    def field(name: str) -> Any:
        f = reader.fields.get(name)
        return f.contents() if f is not None else None

    return GGUFCheck(
        gguf=gguf_path.name,
        format=fmt,
        weights_exact=exact,
        max_abs_weight_diff=worst,
        chat_template_identical=field("tokenizer.chat_template") == tok.chat_template,
        pre_tokenizer=str(field("tokenizer.ggml.pre") or ""),
    )


def _agreeing_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def format_passes(fmt: str, check: GGUFCheck, rows: Sequence[VerifyRow]) -> bool:
    """Whether one GGUF passes: file and tokenizer checks always; then f16's free-running replies identical, or
    q8_0's teacher-forced agreement at least ``Q8_MIN_FORCED_AGREEMENT``."""
    base = (
        check.weights_exact
        and check.chat_template_identical
        and check.tokenizer_identical
        and check.detokenize_identical
        and bool(rows)
        and all(r.prompt_tokens_identical for r in rows)
    )
    if not base:
        return False
    if fmt == "q8_0":
        return check.forced_agreement >= Q8_MIN_FORCED_AGREEMENT
    return all(r.identical for r in rows)


def verify_gguf(
    merged_dir: Path,
    gguf_path: Path,
    fmt: str,
    chats: Sequence[Sequence[tuple[str, str]]] = VERIFY_CHATS,
    max_new_tokens: int = 24,
    reference: MergedReference | None = None,
    threads: int | None = None,
) -> tuple[list[VerifyRow], GGUFCheck]:
    """Verify one GGUF with llama.cpp (tokenizer, detokenizer, greedy replies to ``chats``) and ``GGUFReader``
    (weights, chat template) against the merged model in ``merged_dir``. ``LlamaCppError`` when llama.cpp
    cannot be run or cannot load the file (a refused pre-tokenizer, say)."""
    ref = reference or merged_reference(merged_dir, chats, max_new_tokens)
    check = check_gguf_file(merged_dir, gguf_path, fmt)
    run = run_llama_cpp(
        gguf_path,
        texts=ref.probes,
        prompts=ref.prompts,
        max_new_tokens=max_new_tokens,
        stop_tokens=ref.stop_ids,
        forced=ref.replies,
        threads=threads,
    )
    tok = ref.tokenizer
    mismatches = [
        text for text, ids, got in zip(ref.probes, ref.probe_ids, run.texts, strict=True) if got.tokens != ids
    ]
    detok_bad = [
        text
        for text, want, got in zip(ref.probes, ref.probe_texts, run.texts, strict=True)
        if got.detokenized != want
    ]
    rows = []
    forced_same = forced_total = 0
    for chat, prompt_ids, merged_ids, got in zip(
        chats, ref.prompt_ids, ref.replies, run.prompts, strict=True
    ):
        longest = max(len(merged_ids), len(got.tokens), 1)
        same = sum(a == b for a, b in zip(merged_ids, got.tokens, strict=False))
        forced = sum(a == b for a, b in zip(merged_ids, got.forced_next, strict=False))
        forced_same, forced_total = forced_same + forced, forced_total + len(merged_ids)
        rows.append(
            VerifyRow(
                gguf=gguf_path.name,
                prompt=chat[-1][1],
                merged_reply=tok.decode(merged_ids, skip_special_tokens=True),
                gguf_reply=tok.decode(got.tokens, skip_special_tokens=True),
                identical=merged_ids == got.tokens,
                token_agreement=round(same / longest, 4),
                prompt_tokens_identical=prompt_ids == got.prompt_tokens,
                agreeing_prefix=_agreeing_prefix(merged_ids, got.tokens),
                forced_agreement=round(forced / len(merged_ids), 4) if merged_ids else 1.0,
            )
        )
    info = run.llama_cpp
    check = check.model_copy(
        update={
            "tokenizer_identical": not mismatches and all(r.prompt_tokens_identical for r in rows),
            "detokenize_identical": not detok_bad,
            "tokenizer_mismatches": [
                t[:80] for t in (mismatches + [t for t in detok_bad if t not in mismatches])
            ][:5],
            "replies_identical": sum(r.identical for r in rows),
            "replies": len(rows),
            "forced_agreement": round(forced_same / forced_total, 4) if forced_total else 1.0,
            "llama_cpp": f"llama.cpp {info.get('release')} ({info.get('build')}, "
            f"{'cpu' if info.get('gpu') is False else info.get('gpu')})",
        }
    )
    check.passed = format_passes(fmt, check, rows)
    return rows, check


# ---- model card ------------------------------------------------------------------------------------------------
def system_prompt_note(chat_template: str | None) -> str:
    """What every runtime does with a chat that has no system message, and what a client should send instead.

    One rule everywhere: the model's own chat template decides. transformers and ``bashgym serve`` render that
    template, the GGUF carries it unchanged (llama.cpp's Jinja rendering runs it), and the Modelfile's SYSTEM is
    exactly the default it inserts (none if it inserts none). Training always had a system turn, the login
    banner, so a client that wants the trained behaviour sends the banner itself."""
    default = default_system(chat_template)
    inserted = (
        f"the chat template inserts its own default system prompt ({default!r}); the Ollama Modelfile's "
        "SYSTEM is that same text"
        if default
        else "the chat template inserts no system prompt, and the Modelfile has no SYSTEM line"
    )
    return (
        f"Without a system message {inserted}, so transformers, `bashgym serve`, llama.cpp and Ollama prompt "
        "the model alike. The model was trained with the sandbox login banner as its system message; send it "
        f"for the replies it was trained to give:\n\n```\n{OPERATOR_BANNER}\n```"
    )


def model_card(
    resolved: ResolvedModel,
    gguf_files: Sequence[GGUFFileInfo],
    report_rows: Sequence[VerifyRow],
    repo_id: str = "",
    checks: Sequence[GGUFCheck] = (),
    chat_template: str | None = None,
) -> str:
    """README.md of the export (the Hub renders it as the model card)."""
    ggufs = "\n".join(
        f"- `{Path(g.path).name}` ({g.format}, {g.size_bytes / 1e6:.1f} MB, pre-tokenizer "
        f"`{g.pre_tokenizer}`)"
        for g in gguf_files
    )
    rows = (
        "\n".join(
            f"| {r.gguf} | {r.prompt[:60]} | {'yes' if r.identical else 'no'} | {r.token_agreement} |"
            for r in report_rows
        )
        or "| (not verified) | | | |"
    )
    files = (
        "\n".join(
            f"| {c.gguf} | {c.llama_cpp} | {'yes' if c.tokenizer_identical else 'no'} | "
            f"{'yes' if c.weights_exact else 'no'} | {c.replies_identical}/{c.replies} | "
            f"{c.forced_agreement:.2f} | {'yes' if c.passed else 'no'} |"
            for c in checks
        )
        or "| (not verified) | | | | | | |"
    )
    note = f"\n> {resolved.fallback_note}\n" if resolved.fallback_note else ""
    base = resolved.base_model
    hub_base = (
        "HuggingFaceTB/SmolLM2-135M-Instruct"
        if Path(base).name == "SmolLM2-135M-Instruct"
        else ""
        if base.startswith("/")
        else base
    )
    return f"""---
library_name: transformers
{f"base_model: {hub_base}" if hub_base else ""}
tags: [bashgym, shell, lora-merged, gguf]
---
# bashgym operator ({resolved.model_name} version {resolved.version})

A shell operator: given a task in a chat (ChatML), it replies with one bash command per turn and `exit` when
done. Fine-tuned by bashgym with LoRA on verified sandbox trajectories, then the adapter was
merged into its base (`{Path(resolved.base_model).name}`).
{note}
- Registered model: `{resolved.model_uri}`{f" (alias `{resolved.alias}`)" if resolved.alias else ""}
- Weights: `model.safetensors` (fp32, merged), tokenizer and chat template (`chat_template.jinja`)
{ggufs}
- `Modelfile` for Ollama (ChatML template, stop tokens: where a turn ends)

## System message
{system_prompt_note(chat_template)}

## Use
```python
from transformers import AutoModelForCausalLM, AutoTokenizer
tok = AutoTokenizer.from_pretrained("{repo_id or "."}")
model = AutoModelForCausalLM.from_pretrained("{repo_id or "."}")
```
```bash
ollama create bashgym-operator -f Modelfile && ollama run bashgym-operator "list the files here"
```

## GGUF verified in llama.cpp
Each GGUF loaded in llama.cpp (CPU): its tokenizer against the merged model's on probe texts and the chat
prompts, its greedy replies against the merged model's, and its weights read back against the merged ones after
the format's rounding. f16 must reply identically. q8_0 may pick the other of two nearly tied tokens, so it is
judged by llama.cpp's choice at each position of the merged model's reply: at least
{Q8_MIN_FORCED_AGREEMENT:.0%} must agree.

| file | runtime | tokenizer identical | weights exact | identical replies | teacher-forced agreement | passed |
|---|---|---|---|---|---|---|
{files}

| file | prompt | identical to merged | token agreement |
|---|---|---|---|
{rows}

Limits: a small model trained on a few hundred sandbox scenarios; run what it types in a sandbox, not on a host
you care about.
"""


# ---- push ------------------------------------------------------------------------------------------------------
def push_to_hub(
    out_dir: Path, repo_id: str, token: str, endpoint: str | None = None, private: bool = True
) -> str:
    """``HfApi.upload_folder`` of the whole export (a model repo, created if missing). Returns the commit URL."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    info = api.upload_folder(
        folder_path=str(out_dir),
        repo_id=repo_id,
        repo_type="model",
        commit_message="bashgym export",
        ignore_patterns=[".*"],
    )
    return str(getattr(info, "commit_url", info))


# ---- all of it -------------------------------------------------------------------------------------------------
def export_model(
    out_dir: Path,
    model_uri: str | None = None,
    formats: Sequence[str] = ("f16",),
    verify: bool = True,
    chats: Sequence[Sequence[tuple[str, str]]] = VERIFY_CHATS,
    max_new_tokens: int = 24,
    hub_repo: str | None = None,
    hub_token: str | None = None,
    hub_endpoint: str | None = None,
    settings: Settings | None = None,
    adapter_dir: Path | None = None,
    resolved: ResolvedModel | None = None,
) -> ExportReport:
    """Export one registered adapter into ``out_dir`` (see the module docstring). ``adapter_dir`` + ``resolved``
    skip the registry (tests, an adapter already on disk). Pushes when ``hub_repo`` and a token are given.
    When llama.cpp cannot run the check, the files are still written and ``verify_error`` says why."""
    from transformers import AutoTokenizer

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
    chat_template = (
        (out_dir / "chat_template.jinja").read_text()
        if (out_dir / "chat_template.jinja").exists()
        else json.loads((out_dir / "tokenizer_config.json").read_text()).get("chat_template")
    )
    stops = turn_stops(AutoTokenizer.from_pretrained(out_dir)).strings
    # SYSTEM: the template's own default, if any; stop: where a turn ends
    mf = modelfile(Path(ggufs[0].path).name, chat_template, stops=stops)
    (out_dir / "Modelfile").write_text(mf)
    report = ExportReport(out_dir=str(out_dir), model=resolved, hf_files=hf_files, gguf=ggufs, modelfile=mf)
    if verify:
        t = time.monotonic()
        try:
            ref = merged_reference(out_dir, chats, max_new_tokens)
            for info in ggufs:
                rows, check = verify_gguf(out_dir, Path(info.path), info.format, chats, max_new_tokens, ref)
                report.verification += rows
                report.gguf_checks += [check]
        except LlamaCppError as exc:
            report.verify_error = str(exc)
        timings["verify_s"] = round(time.monotonic() - t, 2)
        report.verified = (
            not report.verify_error
            and len(report.gguf_checks) == len(ggufs)
            and all(c.passed for c in report.gguf_checks)
        )
    (out_dir / "README.md").write_text(
        model_card(resolved, ggufs, report.verification, hub_repo or "", report.gguf_checks, chat_template)
    )
    if hub_repo and hub_token:
        t = time.monotonic()
        (out_dir / "export_report.json").write_text(report.model_dump_json(indent=2))
        report.pushed_to = push_to_hub(out_dir, hub_repo, hub_token, endpoint=hub_endpoint)
        timings["push_s"] = round(time.monotonic() - t, 2)
    report.timings_s = timings
    (out_dir / "export_report.json").write_text(report.model_dump_json(indent=2))
    follow_umask(out_dir)
    return report
