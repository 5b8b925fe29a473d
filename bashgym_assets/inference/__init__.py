"""Inference engines shared by the rollouts, the evaluation, GRPO and serving (engines layer: knows tokenizers and
models, nothing of episodes, training or Dagster)."""
