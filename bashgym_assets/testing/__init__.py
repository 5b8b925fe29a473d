"""Generators for tests and benchmarks, not used by the platform itself: synthetic agent traces (``traces``),
sessions with planted secrets and decoys (``secrets``), demo-sized dataset rows (``datasets``) and a tiny,
locally built chat model (``tiny_model``). Shipped in the package so benchmarks and a user's own tests can use
them; nothing outside ``testing`` imports them (the apps layer of the contract in pyproject.toml)."""
