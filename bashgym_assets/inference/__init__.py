"""Inference engines shared by the rollouts, the evaluation, GRPO and serving (engines layer: knows tokenizers and
models, nothing of episodes, training or Dagster).

Why the decoder is our own (``rollout.continuous.ContinuousDecoder`` over ``rollout.kv_generation.KVGenerator``)
and not transformers' continuous batching (``generate_batch`` / ``init_continuous_batching``, what ``transformers
serve --continuous-batching`` runs): ``benchmarks/generation_vs_transformers.py`` puts the same greedy requests
through both and a plain padded ``generate`` in one run (figures in BENCHMARKS.md), and on the project's 2-core
CPU ours wins in tokens/s and in CPU time, with token-identical outputs. Theirs has per-request budgets,
stop tokens, cancellation and streaming, but not what evaluation, student rollouts and ``bashgym serve`` also use:
a conversation's keys and values reused across turns down to the token (theirs shares whole cache pages of a live
manager only), a seed per request (one generator for the whole batch, so a seeded draw depends on its batch mates),
greedy and sampled rows in one batch (``do_sample`` is per manager), the top alternatives' log-probabilities (the
chosen token's only; ``transformers serve`` refuses ``logprobs``), prompt-lookup drafting. Re-run the benchmark
when transformers is upgraded: where theirs wins and lacks none of these, it replaces ours.
"""
