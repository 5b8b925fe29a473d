"""The thin Dagster layer: assets, checks, sensors and schedules that call the plain domain modules.

Each module here exposes ``defs`` (a ``dagster.Definitions``); ``definitions.py`` (CPU code location) and
``gpu_definitions.py`` (GPU code location) merge them. Nothing outside ``defs/`` and those two files imports
Dagster.
"""
