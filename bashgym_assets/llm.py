"""One chat completion through litellm, for teacher authoring and the litellm operator.

litellm accepts any provider string (``anthropic/...``, ``ollama/...``, ``openai/<name>`` with an ``api_base``), so
switching teachers is configuration only. Every failure becomes one exception type with the provider's message.
"""

from __future__ import annotations

import os
from typing import Any

from bashgym_assets.config import get_settings


class LLMError(RuntimeError):
    """The model could not answer (HTTP error, timeout, malformed response)."""


def chat_completion(
    model: str,
    messages: list[dict[str, str]],
    api_base: str | None = None,
    api_key: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    timeout_s: float = 60.0,
    num_retries: int = 0,
) -> str:
    """The assistant's text for ``messages``; raises ``LLMError``."""
    os.environ.setdefault(
        "LITELLM_LOCAL_MODEL_COST_MAP", "True"
    )  # no network fetch of the price list at import
    import litellm

    litellm.suppress_debug_info = True  # errors are reported through LLMError, not banners on stdout
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "timeout": timeout_s,
        "num_retries": num_retries,
    }
    if api_base:
        kwargs["api_base"] = api_base
    key = api_key or get_settings().teacher_api_key or ("sk-local" if api_base else None)
    if key:
        kwargs["api_key"] = key
    try:
        response = litellm.completion(**kwargs)
    except Exception as exc:  # litellm maps provider errors onto many classes; all mean "no answer"
        raise LLMError(f"{type(exc).__name__}: {exc}") from exc
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError) as exc:
        raise LLMError(f"malformed completion response: {exc}") from exc
    if content is None:
        raise LLMError("completion had no content")
    return content
