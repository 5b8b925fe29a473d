"""Partitions shared by both code locations."""

import dagster as dg

#: One partition per repository the agent sessions worked in (keys from ``bashgym_assets.repos``).
repo_partitions = dg.DynamicPartitionsDefinition(name="repos")
