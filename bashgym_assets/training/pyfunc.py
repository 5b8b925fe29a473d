"""A registered adapter as an MLflow pyfunc model: ``mlflow.pyfunc.load_model("models:/bashgym-operator@champion")``.

The model's artifacts are the LoRA adapter folder only (a few MB). The base model is *referenced*, never copied:
its local folder or hub id is the model's ``model_config["base_model"]`` (also in the MLmodel ``metadata``), and
``load_context`` loads it from there, applies the adapter with PEFT and keeps the pair in memory. Another machine
whose base lives elsewhere overrides the reference at load time::

    mlflow.pyfunc.load_model("models:/bashgym-operator@champion", model_config={"base_model": "/models/smollm2"})

``predict`` takes a task string, one conversation (a list of ``{"role", "content"}`` messages), a list of either,
or a DataFrame with a ``messages`` or ``task`` column, and returns the model's next assistant turn: a string for
one input, a list of strings for several. ``params`` (``params_schema``: the model's signature, so MLflow passes
them on instead of dropping them with a warning): ``max_new_tokens`` bounds the reply; ``temperature`` > 0
samples (with ``top_p``), ``seed`` makes the samples reproducible; the default is greedy. A reply ends where
the operator's turn ends (``inference.turns.turn_stops``: the end-of-turn token training taught, and eos), not
at eos only: a model whose turn closes with another token would otherwise run on into a next turn.

Why a pyfunc and not ``mlflow.transformers``: the transformers flavor can save a PEFT model with the base only
referenced, but it then resolves the base through ``base_model_path``/the hub on load and, for a base that came
from a local folder (ours: SmolLM2 converted from GGUF), silently stores broken base weights unless every
argument is right (see shared ENVIRONMENT.md); it also wants a hub-style ``pipeline`` around the model. This
wrapper has no such path: it needs mlflow, torch, transformers and peft, loads exactly what training used
(``AutoModelForCausalLM.from_pretrained(base)`` + ``PeftModel.from_pretrained``), works offline and keeps the
artifact store free of base weights. It is logged as *models from code* (this file is copied into the model and
calls ``mlflow.models.set_model``), so loading it back does not need bashgym installed or unpickle anything.

The file is therefore self-contained: it imports nothing from bashgym but ``inference/turns.py``, which is logged
beside it as the module ``bashgym_turns`` (MLflow's ``code_paths``; ``registry.log_adapter_model``).
"""

from __future__ import annotations

from typing import Any

import mlflow
from mlflow.pyfunc import PythonModel

ADAPTER_ARTIFACT = "adapter"
DEFAULT_MAX_NEW_TOKENS = 128
# The name ``inference/turns.py`` is logged under (MLflow puts a model's code_paths on sys.path when it loads it).
TURNS_MODULE = "bashgym_turns"


def _turn_stops(tokenizer: Any) -> Any:
    """``inference.turns.turn_stops``: the logged copy when MLflow loads the model, the package's otherwise."""
    try:
        from bashgym_turns import turn_stops
    except ImportError:  # this file imported from the package (the registry, tests)
        from bashgym_assets.inference.turns import turn_stops
    return turn_stops(tokenizer)


def params_schema(max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> Any:
    """The ``params`` ``predict`` honours, as the signature's ``ParamSchema`` (MLflow drops any param the schema
    does not name): the reply's token budget and the sampling settings (temperature 0: greedy)."""
    from mlflow.types.schema import ParamSchema, ParamSpec

    return ParamSchema(
        [
            ParamSpec("max_new_tokens", "long", max_new_tokens),
            ParamSpec("temperature", "double", 0.0),
            ParamSpec("top_p", "double", 1.0),
            ParamSpec("seed", "long", None),
        ]
    )


def _conversations(model_input: Any) -> tuple[list[list[dict[str, str]]], bool]:
    """Normalise the accepted inputs to a list of conversations; the flag says whether ONE input was given."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - mlflow depends on pandas
        pd = None
    if pd is not None and isinstance(model_input, pd.DataFrame):
        if "messages" in model_input.columns:
            return [_conversation(m) for m in model_input["messages"]], False
        column = "task" if "task" in model_input.columns else model_input.columns[0]
        return [_conversation(str(t)) for t in model_input[column]], False
    if isinstance(model_input, str | dict):
        return [_conversation(model_input)], True
    items = list(model_input)
    if items and all(isinstance(m, dict) and "role" in m for m in items):
        return [_conversation(items)], True
    return [_conversation(item) for item in items], False


def _conversation(item: Any) -> list[dict[str, str]]:
    if isinstance(item, str):
        return [{"role": "user", "content": item}]
    if isinstance(item, dict):
        if "messages" in item:
            return _conversation(item["messages"])
        if "task" in item:
            return _conversation(str(item["task"]))
        return [{"role": str(item["role"]), "content": str(item.get("content") or "")}]
    if hasattr(item, "tolist"):  # numpy array of messages (a DataFrame cell)
        item = item.tolist()
    return [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in item]


class AdapterChatModel(PythonModel):
    """Base model (referenced by ``model_config["base_model"]``) + the logged LoRA adapter, greedy chat replies."""

    def load_context(self, context: Any) -> None:
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        config = dict(context.model_config or {})
        base = config.get("base_model")
        if not base:
            raise ValueError(
                "the model's model_config has no base_model: pass model_config={'base_model': ...}"
            )
        self.max_new_tokens = int(config.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
        # Any, as every tokenizer in the package (transformers types its calls by the union of all modes)
        self.tokenizer: Any = AutoTokenizer.from_pretrained(base)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(
            base, dtype=getattr(torch, config.get("dtype", "float32"))
        )
        self.model = PeftModel.from_pretrained(model, context.artifacts[ADAPTER_ARTIFACT])
        self.model.eval()
        self.stops = _turn_stops(self.tokenizer)

    def _reply(
        self,
        messages: list[dict[str, str]],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
    ) -> str:
        import torch

        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        enc = self.tokenizer(text, return_tensors="pt", add_special_tokens=False).to(self.model.device)
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
            if temperature > 0
            else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        )
        with torch.no_grad():
            out = self.model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.stops.ids,
                **sampling,
            )
        reply = self.stops.cut(out[0, enc["input_ids"].shape[1] :].tolist())
        return self.tokenizer.decode(reply, skip_special_tokens=True)

    def predict(self, context, model_input, params=None):  # noqa: ANN001, ANN201 - no hints: no schema enforcement
        import torch

        convs, single = _conversations(model_input)
        params = params or {}
        max_new_tokens = int(params.get("max_new_tokens") or self.max_new_tokens)
        temperature = float(params.get("temperature") or 0.0)
        top_p = float(params.get("top_p") or 1.0)
        if temperature > 0 and params.get("seed") is not None:
            torch.manual_seed(int(params["seed"]))  # the same inputs and seed: the same samples
        replies = [self._reply(c, max_new_tokens, temperature, min(1.0, top_p)) for c in convs]
        return replies[0] if single else replies


mlflow.models.set_model(AdapterChatModel())
