"""CPU code location: ingest, privacy, tiers, scenarios, trajectories, datasets.

Assets here run with Dagster's default multiprocess executor (a process per step), wrapped so that the run's
worker, not a step's process, is what the dead-run reaper watches (``defs/executors.py``, ``cpu_executor``).
Everything that loads model weights lives in the GPU code location (``gpu_definitions.py``) instead, so that it
always runs on the GPU executor.
"""

import dagster as dg

from bashgym_assets.defs import datasets, factory, images, ingest, privacy, scenarios, tiers, trajectories
from bashgym_assets.defs.automation import automation_sensor
from bashgym_assets.defs.executors import cpu_executor
from bashgym_assets.defs.resources import default_resources
from bashgym_assets.defs.run_health import dead_run_reaper

defs = dg.Definitions.merge(
    images.defs,
    ingest.defs,
    privacy.defs,
    tiers.defs,
    factory.defs,
    scenarios.defs,
    trajectories.defs,
    datasets.defs,
    dg.Definitions(
        resources=default_resources(),
        executor=cpu_executor,
        sensors=[automation_sensor("cpu"), dead_run_reaper],
    ),
)
