"""bashgym: Dagster asset-graph platform for shell-operator training data."""

import os

# OpenMP threads that wait by spinning (GNU libgomp's default, which torch's CPU build uses) turn a busy 2-core
# machine into a trap: every parallel region of a forward pass waits for a thread the kernel has descheduled, while
# the spinning one burns the core the other needs. Measured here at load ~8 (SmolLM2-135M, batch 8 x 32 greedy
# tokens, 2 threads): 378-408 s wall and 110-115 s of CPU spinning, versus 29-30 s wall and 12.5 s CPU with
# OMP_WAIT_POLICY=PASSIVE. Set before anything imports torch (every entry point imports this package first); a
# value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
