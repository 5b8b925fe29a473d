"""Resources: the platform's settings as one Dagster resource, visible and overridable per run in the launchpad.

Each field left unset falls back to the embedded default (``bashgym_assets.config.Settings``). A setting given in
the environment when the code location loads is wired in as a Dagster ``EnvVar``, so the UI shows which variable
it comes from (and its value is read where the run executes, not baked into the definitions).
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from bashgym_assets.config import Settings
from bashgym_assets.lake import Lake

#: resource field -> environment variable it is read from when set.
ENV_FIELDS = {
    "home": "BASHGYM_HOME",
    "trace_dirs": "BASHGYM_TRACE_DIRS",
    "teacher_model": "BASHGYM_TEACHER_MODEL",
    "teacher_api_base": "BASHGYM_TEACHER_API_BASE",
    "base_model": "BASHGYM_BASE_MODEL",
    "sandbox_image": "BASHGYM_SANDBOX_IMAGE",
    "eval_suite_dirs": "BASHGYM_EVAL_SUITE_DIRS",
}


def _paths(value: str | None) -> list[Path] | None:
    if not value:
        return None
    return [Path(p).expanduser().resolve() for p in value.split(os.pathsep) if p.strip()]


class BashgymHome(dg.ConfigurableResource):
    """Where the data lives and which models, sandbox image and trace folders a run uses."""

    home: str | None = Field(
        default=None,
        description="Data folder (lake, Dagster instance, MLflow, adapters). "
        "Default: BASHGYM_HOME, else .bashgym/ in the project.",
    )
    trace_dirs: str | None = Field(
        default=None,
        description="':'-separated folders of agent session logs. "
        "Default: ~/.claude/projects and the live-capture folder.",
    )
    teacher_model: str | None = Field(
        default=None,
        description="litellm model string of the teacher "
        "(authoring, rollouts). Default: 'reference' (offline, the pack's own "
        "reference solutions).",
    )
    teacher_api_base: str | None = Field(
        default=None, description="Base URL of an OpenAI-compatible server for the teacher."
    )
    base_model: str | None = Field(
        default=None,
        description="Local folder or hub id of the base model. Default: the offline SmolLM2-135M-Instruct.",
    )
    sandbox_image: str | None = Field(
        default=None,
        description="Docker image for sandboxes. Default: "
        "bashgym-sandbox:<hash of sandbox_images/>, built by the sandbox_image asset.",
    )
    eval_suite_dirs: str | None = Field(
        default=None,
        description="':'-separated folders of external "
        "shell-task suites imported as held-out evaluation scenarios.",
    )

    def settings(self) -> Settings:
        """The plain-module settings: the resource's values over the environment's over the defaults."""
        base = Settings() if not self.home else Settings(home=Path(self.home).expanduser().resolve())
        overrides: dict[str, object] = {}
        if self.trace_dirs:
            overrides["trace_dirs_override"] = _paths(self.trace_dirs)
        if self.teacher_model:
            overrides["teacher_model"] = self.teacher_model
        if self.teacher_api_base:
            overrides["teacher_api_base"] = self.teacher_api_base
        if self.base_model:
            overrides["base_model"] = self.base_model
        if self.sandbox_image:
            overrides["sandbox_image_override"] = self.sandbox_image
        if self.eval_suite_dirs:
            overrides["eval_suite_dirs"] = _paths(self.eval_suite_dirs) or []
        return base.model_copy(update=overrides) if overrides else base

    def sandbox_image_tag(self) -> str:
        """The image sandboxes run: the configured one, else the one built from ``sandbox_images/``."""
        if self.sandbox_image:
            return self.sandbox_image
        from bashgym_assets import images

        return images.sandbox_image_tag()

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Record the process that executes this run on the run (``run_health``): if it dies, the dead-run reaper
        can tell, fail the run and free the pool slot it held."""
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
