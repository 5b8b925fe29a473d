"""The trainer: base model preparation, assistant-only tokenisation, LoRA SFT / DPO, MLflow registry.

Plain Python (no Dagster): ``defs/training.py`` calls it, and so can a shell (``python -m
bashgym_assets.training --help``).
"""
