"""The thin Dagster layer: assets, checks, sensors and schedules that call the plain domain modules.

Each module here exposes ``defs`` (a ``dagster.Definitions``); ``definitions.py`` (CPU code location) and
``gpu_definitions.py`` (GPU code location) merge them. The domain modules below never import Dagster; outside
``defs/`` only the apps that drive it do (the two code locations, ``demo``, ``cli``, ``housekeeping``,
``pipeline_stop``, ``ui_check``). Dagster's private modules (``dagster._core`` ...) are imported by
``dagster_internals.py`` alone, which names the Dagster version it was checked against.
"""
