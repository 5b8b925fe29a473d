"""bashgym: Dagster asset-graph platform for shell-operator training data."""
