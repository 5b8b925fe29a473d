"""Generators for tests and benchmarks, not used by the platform itself: synthetic agent traces (``traces``),
sessions with planted secrets and decoys (``secrets``), demo-sized dataset rows (``datasets``) and a tiny,
locally built chat model (``tiny_model``). Not shipped: the wheel leaves this package out
(``[tool.setuptools.packages.find] exclude``), and no module of the package imports it
(tests/test_wheel_contents.py); tests and benchmarks import it from the checkout (the editable install)."""
