"""An Ollama ``Modelfile`` for the exported GGUF: the ChatML turn format as a Go template, and its stop tokens
(where the model's turn ends, ``inference.turns.turn_stops``, and ChatML's own markers).

Ollama does not run the Jinja chat template stored in the GGUF: it renders prompts with the Modelfile's
``TEMPLATE`` (Go ``text/template``). This one reproduces the ChatML template the model was trained on, turn by
turn (``.Messages``), ending with an open assistant turn, so ``ollama run`` prompts it exactly as training did.

A chat without a system message: the model's Jinja template decides what goes there (SmolLM2's inserts its own
default system prompt, a plain ChatML template none), and transformers, ``bashgym serve`` and llama.cpp's Jinja
rendering all follow it. The Modelfile's ``SYSTEM`` is that same default, or absent when there is none, so Ollama
prompts the model as every other runtime does (Ollama uses SYSTEM only when the request has no system message).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# ChatML, as SmolLM2-Instruct's own template renders it: <|im_start|>role\ncontent<|im_end|>\n per message, then
# an open assistant turn. ``.Messages`` includes the system message when one is given (SYSTEM or the request's).
CHATML_GO_TEMPLATE = (
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n"
    "{{ .Content }}<|im_end|>\n"
    "{{ end }}<|im_start|>assistant\n"
)
# ChatML's markers, stops whatever the tokenizer's eos: a turn closed, a next one opened, the end of a text
STOP_TOKENS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>")


def is_chatml(chat_template: str | None) -> bool:
    """Whether a Jinja chat template writes ChatML turns (the only format this Modelfile reproduces)."""
    if not chat_template:
        return False
    return "<|im_start|>" in chat_template and "<|im_end|>" in chat_template


def default_system(chat_template: str | None) -> str | None:
    """The system prompt the Jinja template inserts when a conversation has none (SmolLM2's: "You are a helpful
    AI assistant named SmolLM, trained by Hugging Face"), so Ollama behaves like transformers; None if none."""
    if not chat_template:
        return None
    m = re.search(r"<\|im_start\|>system(?:\\n|\n)(.+?)<\|im_end\|>", chat_template)  # escaped or literal
    return m.group(1) if m else None


def _quote(text: str) -> str:
    return '"""' + text.replace('"""', '\\"\\"\\"') + '"""'


def modelfile(
    gguf_name: str,
    chat_template: str | None,
    *,
    stops: Sequence[str],
    system: str | None = None,
    temperature: float = 0.0,
    num_ctx: int = 2048,
    num_predict: int = 128,
) -> str:
    """The Modelfile text: FROM the GGUF next to it, the ChatML TEMPLATE, stop tokens (``stops``: the model's
    ``inference.turns.turn_stops(...).strings``, then ChatML's), greedy defaults as the evaluation ran, and
    SYSTEM: the template's own default system prompt if it has one (what every other runtime inserts into a chat
    without a system message), else none. ``system`` overrides it, for a Modelfile meant to
    differ on purpose (the exporter never passes one)."""
    if not is_chatml(chat_template):
        raise ValueError("the model's chat template is not ChatML: no Ollama TEMPLATE is known for it")
    lines = [f"FROM ./{gguf_name}", "", f"TEMPLATE {_quote(CHATML_GO_TEMPLATE)}", ""]
    lines += [f'PARAMETER stop "{s}"' for s in dict.fromkeys([*stops, *STOP_TOKENS])]
    lines += [
        f"PARAMETER temperature {temperature:g}",
        f"PARAMETER num_ctx {num_ctx}",
        f"PARAMETER num_predict {num_predict}",
    ]
    system = system or default_system(chat_template)
    if system:
        lines += ["", f"SYSTEM {_quote(system)}"]
    return "\n".join(lines) + "\n"
