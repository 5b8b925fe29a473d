"""Resources: the platform's settings as one Dagster resource, visible and overridable per run in the launchpad.

The resource holds only what a run sets; ``bashgym_assets.config.Settings`` reads everything else (its
environment variable, else its default) and parses both the same way, so neither the defaults nor the variable
names nor the parsing are written twice. A setting given in the environment when the code location loads is wired
in as a Dagster ``EnvVar``, so the UI shows which variable it comes from (and its value is read where the run
executes, not baked into the definitions).
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg
from pydantic import Field

from bashgym_assets.config import Settings
from bashgym_assets.lake import Lake

#: resource field -> the ``Settings`` field it sets (the launchpad's names, which run configs already use).
SETTINGS_FIELDS = {
    "home": "home",
    "trace_dirs": "trace_dirs_override",
    "teacher_model": "teacher_model",
    "teacher_api_base": "teacher_api_base",
    "base_model": "base_model",
    "sandbox_image": "sandbox_image_override",
    "eval_suite_dirs": "eval_suite_dirs",
}


def env_var(settings_field: str) -> str:
    """The environment variable ``Settings`` reads a field from (its validation alias)."""
    alias = Settings.model_fields[settings_field].validation_alias
    assert isinstance(alias, str), settings_field
    return alias


#: resource field -> environment variable it is read from when set.
ENV_FIELDS = {field: env_var(target) for field, target in SETTINGS_FIELDS.items()}


def _like(settings_field: str) -> Any:
    """An optional text field described as ``Settings`` describes the field it sets (unset: Settings decides)."""
    return Field(default=None, description=Settings.model_fields[settings_field].description)


class BashgymHome(dg.ConfigurableResource):
    """Where the data lives and which models, sandbox image and trace folders a run uses."""

    home: str | None = _like("home")
    trace_dirs: str | None = _like("trace_dirs_override")
    teacher_model: str | None = _like("teacher_model")
    teacher_api_base: str | None = _like("teacher_api_base")
    base_model: str | None = _like("base_model")
    sandbox_image: str | None = _like("sandbox_image_override")
    eval_suite_dirs: str | None = _like("eval_suite_dirs")

    def settings(self) -> Settings:
        """The plain-module settings: the resource's values over the environment's over the defaults."""
        return Settings(**{target: getattr(self, field) for field, target in SETTINGS_FIELDS.items()})

    def sandbox_image_tag(self) -> str:
        """The image sandboxes run: the configured one, else the one built from ``sandbox_images/``."""
        configured = self.settings().sandbox_image_override
        if configured:
            return configured
        from bashgym_assets import images

        return images.sandbox_image_tag()

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Record this process as the run's worker when nothing did (``run_health.tag_current_run``: an in-process
        run of an executor that is not the code locations' own, whose ``RunWorkerExecutor`` records its worker
        before any step): if it dies, the dead-run reaper can tell, fail the run and free the pool slot it held."""
        from bashgym_assets.defs.run_health import tag_current_run

        tag_current_run(context.instance, context.run_id)

    def lake(self) -> Lake:
        settings = self.settings()
        settings.ensure_dirs()
        return Lake(settings)


def default_resources() -> dict[str, object]:
    """The resource with every setting present in the environment wired in as an ``EnvVar``."""
    wired = {field: dg.EnvVar(var) for field, var in ENV_FIELDS.items() if os.environ.get(var)}
    return {"bashgym": BashgymHome(**wired)}
