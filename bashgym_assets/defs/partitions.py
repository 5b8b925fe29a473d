"""Partitions shared by both code locations."""

import dagster as dg

#: The name of the dynamic partitions of repositories (Dagster types a definition's ``name`` as optional).
REPO_PARTITIONS = "repos"
#: One partition per repository the agent sessions worked in (keys from ``bashgym_assets.repos``).
repo_partitions = dg.DynamicPartitionsDefinition(name=REPO_PARTITIONS)
