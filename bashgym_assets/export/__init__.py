"""Export the champion as a standalone model: merged Hugging Face folder, GGUF (the ``gguf`` package's writer),
Ollama Modelfile, model card, optional Hub push, and each GGUF verified in llama.cpp itself. No Dagster here."""

from bashgym_assets.export.exporter import (
    ExportReport,
    NoAdapterError,
    ResolvedModel,
    export_model,
    push_to_hub,
    resolve_model,
    verify_gguf,
)
from bashgym_assets.export.gguf_file import GGUFExportError, GGUFFileInfo, write_gguf
from bashgym_assets.export.llama_cpp import LlamaCppError, run_llama_cpp
from bashgym_assets.export.ollama import modelfile

__all__ = [
    "ExportReport",
    "GGUFExportError",
    "GGUFFileInfo",
    "LlamaCppError",
    "NoAdapterError",
    "ResolvedModel",
    "export_model",
    "modelfile",
    "push_to_hub",
    "resolve_model",
    "run_llama_cpp",
    "verify_gguf",
    "write_gguf",
]
