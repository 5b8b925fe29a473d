"""Operators (reference, litellm teacher, local transformers model) and sandboxed rollouts."""
