"""SFT and DPO dataset building from tiered traces and verified trajectories (plain Python, no Dagster)."""
