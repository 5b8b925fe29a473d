"""The task factory: shell skills as code (families), drawn from seeded worlds at scale, deduplicated, kept away
from every evaluation task, and certified by the same reference gate as every other scenario."""
