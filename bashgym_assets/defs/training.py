"""Filled in by its stage's issue."""

import dagster as dg

defs = dg.Definitions()
