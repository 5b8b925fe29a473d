"""The settings resource: environment values wired in as EnvVars, run config over environment over defaults."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets.defs.resources import ENV_FIELDS, BashgymHome, default_resources


@pytest.fixture
def clean_env(monkeypatch):
    for var in ENV_FIELDS.values():
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_unset_environment_means_embedded_defaults(clean_env):
    res = default_resources()["bashgym"]
    settings = res.settings()
    assert settings.teacher_model == "reference" and settings.base_model is None
    assert res.sandbox_image_tag().startswith("bashgym-sandbox:")


def test_environment_values_are_wired_as_env_vars_and_read_at_run_time(clean_env, tmp_path):
    clean_env.setenv("BASHGYM_TEACHER_MODEL", "openai/teacher-x")
    clean_env.setenv("BASHGYM_SANDBOX_IMAGE", "my/image:1")
    clean_env.setenv("BASHGYM_TRACE_DIRS", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    res = default_resources()["bashgym"]
    assert (
        isinstance(res.teacher_model, dg.EnvVar) and res.teacher_model.env_var_name == "BASHGYM_TEACHER_MODEL"
    )

    seen = {}

    @dg.asset
    def probe(bashgym: BashgymHome) -> None:
        s = bashgym.settings()
        seen.update(teacher=s.teacher_model, image=bashgym.sandbox_image_tag(), traces=s.trace_dirs)

    assert dg.materialize([probe], resources={"bashgym": res}).success
    assert seen == {
        "teacher": "openai/teacher-x",
        "image": "my/image:1",
        "traces": [tmp_path / "a", tmp_path / "b"],
    }


def test_run_config_overrides_the_environment(clean_env, tmp_path):
    clean_env.setenv("BASHGYM_BASE_MODEL", "from-env")
    seen = {}

    @dg.asset
    def probe(bashgym: BashgymHome) -> None:
        seen.update(base=bashgym.settings().base_model, home=bashgym.settings().home)

    defs = dg.Definitions(assets=[probe], resources=default_resources())
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        run_config={
            "resources": {"bashgym": {"config": {"base_model": "from-launchpad", "home": str(tmp_path)}}}
        }
    )
    assert result.success and seen == {"base": "from-launchpad", "home": Path(tmp_path).resolve()}


def test_every_setting_is_described_for_the_launchpad():
    fields = BashgymHome.model_fields
    assert set(ENV_FIELDS) <= set(fields)
    assert all(fields[name].description for name in ENV_FIELDS)


@pytest.mark.docker
def test_a_configured_sandbox_image_is_used_not_built(clean_env, sandbox_image, tmp_path):
    from bashgym_assets.defs.images import sandbox_image as sandbox_image_asset

    ok = dg.materialize(
        [sandbox_image_asset],
        resources={"bashgym": BashgymHome(home=str(tmp_path), sandbox_image=sandbox_image)},
    )
    meta = ok.asset_materializations_for_node("sandbox_image")[0].metadata
    assert meta["source"].value == "configured" and meta["image"].value == sandbox_image
    missing = dg.materialize(
        [sandbox_image_asset],
        raise_on_error=False,
        resources={"bashgym": BashgymHome(home=str(tmp_path), sandbox_image="bashgym-no-such-image:0")},
    )
    assert not missing.success
