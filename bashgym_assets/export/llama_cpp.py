"""llama.cpp's own reading of an exported GGUF: its tokenizer, its detokenizer and its greedy replies.

transformers' GGUF loader ignores keys llama.cpp depends on (``tokenizer.ggml.pre`` above all), so a file it reads
back can still be one llama.cpp refuses or tokenizes differently. This runs llama.cpp itself: node-llama-cpp's
prebuilt linux-x64 CPU binary, pinned in ``tools/llama/package.json`` + ``package-lock.json`` and installed by
``scripts/setup.sh`` (``npm ci``), driven by ``tools/llama/llama_check.mjs`` (JSON in on stdin, JSON out). The script
never builds llama.cpp from source, never downloads, never uses a GPU: without the prebuilt binary it fails, and
so does ``run_llama_cpp``, with what to run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools" / "llama"
SCRIPT = TOOLS_DIR / "llama_check.mjs"
PACKAGE = "node-llama-cpp"
PREBUILT = "@node-llama-cpp/linux-x64"


class LlamaCppError(RuntimeError):
    """node, node-llama-cpp or its prebuilt binary is missing, or llama.cpp failed to load or run the file."""


class LlamaText(BaseModel):
    tokens: list[int]
    detokenized: str


class LlamaPrompt(BaseModel):
    prompt_tokens: list[int]
    tokens: list[int]  # greedy continuation, ending with a stop token when one came before the budget
    forced_next: list[int] = Field(default_factory=list)  # greedy choice after the prompt + forced[:i]


class LlamaCppRun(BaseModel):
    """What llama.cpp made of the texts and prompts (``run_llama_cpp``)."""

    llama_cpp: dict[str, object] = Field(
        default_factory=dict
    )  # release, build ("prebuilt"), gpu (false), threads
    texts: list[LlamaText] = Field(default_factory=list)
    prompts: list[LlamaPrompt] = Field(default_factory=list)


def node_binary() -> str:
    """``BASHGYM_NODE``, else ``node`` on PATH, else Debian's /usr/bin/node."""
    from bashgym_assets.config import get_settings

    return get_settings().node_binary or shutil.which("node") or "/usr/bin/node"


def installed_version(tools_dir: Path = TOOLS_DIR) -> str:
    """The installed node-llama-cpp version; ``LlamaCppError`` (saying what to run) when it or its
    prebuilt binary is not installed, or is not the version package.json pins."""
    modules = tools_dir / "node_modules"
    try:
        want = json.loads((tools_dir / "package.json").read_text())["dependencies"][PACKAGE]
        have = json.loads((modules / PACKAGE / "package.json").read_text())["version"]
        binary = json.loads((modules / PREBUILT / "package.json").read_text())["version"]
    except (OSError, KeyError, ValueError) as exc:
        raise LlamaCppError(
            f"llama.cpp check not installed ({exc}): run scripts/setup.sh, or "
            f"`cd {tools_dir} && npm ci --omit=optional --ignore-scripts`"
        ) from exc
    if not (have == binary == want):
        raise LlamaCppError(
            f"{tools_dir}: package.json pins {PACKAGE} {want}, installed {have} with "
            f"prebuilt {binary}: run scripts/setup.sh again"
        )
    if not Path(node_binary()).exists() and not shutil.which(node_binary()):
        raise LlamaCppError(f"node not found ({node_binary()}): install Node 20 (apt-get install nodejs)")
    return have


def run_llama_cpp(
    gguf: Path,
    texts: Sequence[str] = (),
    prompts: Sequence[str] = (),
    max_new_tokens: int = 24,
    stop_tokens: Sequence[int] = (),
    forced: Sequence[Sequence[int]] = (),
    threads: int | None = None,
    timeout_s: float = 600.0,
    tools_dir: Path = TOOLS_DIR,
) -> LlamaCppRun:
    """Load ``gguf`` in llama.cpp (CPU) and return its tokens + detokenized text of each of ``texts`` and its
    prompt tokens + greedy continuation (at most ``max_new_tokens``, ending at a stop/end-of-generation token)
    of each of ``prompts``; with ``forced`` (a reference continuation per prompt) also its greedy choice at each
    position of that continuation, fed token by token. Special tokens in a text are parsed as special; no BOS is
    added.

    One thread by default: ggml's threads spin at every barrier, and on a 2-core machine that is busy (a training
    job beside it) two of them took 10.2 s where one took 2.7 s for the same 24 tokens of SmolLM2-135M."""
    installed_version(tools_dir)
    request = {
        "model": str(Path(gguf).resolve()),
        "texts": list(texts),
        "prompts": list(prompts),
        "max_new_tokens": max_new_tokens,
        "stop_tokens": [int(t) for t in stop_tokens],
        "forced": [[int(t) for t in f] for f in forced],
        "threads": threads or 1,
    }
    env = dict(os.environ, NODE_LLAMA_CPP_SKIP_DOWNLOAD="true", NODE_LLAMA_CPP_GPU="false")
    try:
        proc = subprocess.run(
            [node_binary(), str(tools_dir / SCRIPT.name)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            cwd=tools_dir,
            env=env,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaCppError(f"llama.cpp check did not run: {exc}") from exc
    if proc.returncode != 0:
        raise LlamaCppError(
            f"llama.cpp failed on {Path(gguf).name} (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[-1500:]}"
        )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise LlamaCppError(f"llama.cpp check printed no result: {proc.stdout[-500:]} {proc.stderr[-500:]}")
    return LlamaCppRun.model_validate_json(lines[-1])
