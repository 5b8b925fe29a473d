"""Inference engines shared by the rollouts, the evaluation, GRPO and serving (engines layer: knows tokenizers and
models, nothing of episodes, training or Dagster).

- ``turns``: where an assistant turn ends (the stop ids and strings every generation path uses).
- ``kv_decode``: greedy batched decoding that reuses each conversation's KV cache across turns (``KVGenerator``).
- ``continuous``: continuous batching over it (``ContinuousDecoder``: rows join and leave between decode steps),
  what the evaluation, student rollouts and ``bashgym serve`` decode with.

Why the decoder is our own (``inference.continuous.ContinuousDecoder`` over ``inference.kv_decode.KVGenerator``)
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
