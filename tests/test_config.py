"""``Settings`` on pydantic-settings: which variable sets which field, how lists, blanks and keyword arguments are
read, and the errors a bad value gives; the Dagster resource built on it; options made from a config object."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from bashgym_assets.config import PROJECT_ROOT, Settings, add_field_options, get_settings

#: every variable Settings reads, as its docstring lists them, and the field it sets
VARIABLES = {
    "BASHGYM_HOME": "home",
    "BASHGYM_TRACE_DIRS": "trace_dirs_override",
    "BASHGYM_TEACHER_MODEL": "teacher_model",
    "BASHGYM_TEACHER_API_BASE": "teacher_api_base",
    "BASHGYM_BASE_MODEL": "base_model",
    "BASHGYM_GPU_EXECUTOR": "gpu_executor",
    "BASHGYM_SANDBOX_IMAGE": "sandbox_image_override",
    "BASHGYM_EVAL_SUITE_DIRS": "eval_suite_dirs",
    "BASHGYM_MLFLOW_TRACKING_URI": "mlflow_tracking_uri_override",
    "BASHGYM_MLFLOW_UI_URL": "mlflow_ui_url_override",
    "BASHGYM_DAGSTER_PG_URL": "dagster_pg_url",
    "BASHGYM_RUN_LAUNCHER": "run_launcher",
    "BASHGYM_TEACHER_API_KEY": "teacher_api_key",
    "BASHGYM_SCENARIO_IMPORT_DIR": "scenario_import_dir_override",
    "BASHGYM_SCENARIO_VARIANTS": "scenario_variants",
    "BASHGYM_SHELL_TASKS": "shell_tasks",
    "BASHGYM_NL2BASH": "nl2bash",
    "BASHGYM_FACTORY_PER_FAMILY": "factory_per_family",
    "BASHGYM_TRACES": "traces",
    "BASHGYM_KV_CACHE": "kv_cache",
    "BASHGYM_KV_CACHE_MB": "kv_cache_mb",
    "BASHGYM_ROUTER_STUDENT": "router_student",
    "BASHGYM_ROUTER_STUDENT_API_BASE": "router_student_api_base",
    "BASHGYM_TRAINER_IMAGE": "trainer_image_override",
    "BASHGYM_DOCKER_GPUS": "docker_gpus",
    "BASHGYM_STEP_LAUNCHER": "step_launcher",
    "BASHGYM_HF_REPO": "hf_repo",
    "BASHGYM_NODE": "node_binary",
    "BASHGYM_DEBIAN_MIRROR": "debian_mirror",
    "BASHGYM_CHROMIUM": "chromium",
    "BASHGYM_STOP_GRACE_S": "stop_grace_s",
}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No BASHGYM_* variable set, the working directory a fresh folder (relative paths resolve into it)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_each_variable_sets_its_field_and_is_named_in_the_docstring(env, tmp_path):
    assert {f.validation_alias: name for name, f in Settings.model_fields.items()} == VARIABLES
    assert all(var in (Settings.__doc__ or "") for var in VARIABLES)
    values = {
        "BASHGYM_HOME": str(tmp_path / "home"),
        "BASHGYM_TRACE_DIRS": str(tmp_path / "t"),
        "BASHGYM_TEACHER_MODEL": "openai/teacher",
        "BASHGYM_TEACHER_API_BASE": "http://127.0.0.1:8000/v1",
        "BASHGYM_BASE_MODEL": "some/hub-id",
        "BASHGYM_GPU_EXECUTOR": "docker",
        "BASHGYM_SANDBOX_IMAGE": "my/image:1",
        "BASHGYM_EVAL_SUITE_DIRS": str(tmp_path / "s"),
        "BASHGYM_MLFLOW_TRACKING_URI": "http://mlflow:5000",
        "BASHGYM_MLFLOW_UI_URL": "http://mlflow-ui:8080/",
        "BASHGYM_DAGSTER_PG_URL": "postgresql+psycopg2://u:pw@h:5432/d",
        "BASHGYM_RUN_LAUNCHER": "docker",
    }
    for name, value in values.items():
        env.setenv(name, value)
    env.setenv("BASHGYM_NOT_A_SETTING", "whatever")  # read by other modules (or nobody): never an error here
    s = get_settings()
    assert s.home == tmp_path / "home" and s.trace_dirs == [tmp_path / "t"]
    assert (s.teacher_model, s.teacher_api_base, s.base_model) == (
        "openai/teacher",
        "http://127.0.0.1:8000/v1",
        "some/hub-id",
    )
    assert (s.gpu_executor, s.run_launcher, s.sandbox_image_override) == ("docker", "docker", "my/image:1")
    assert s.eval_suite_dirs == [tmp_path / "s"] and s.mlflow_tracks_on_server
    assert s.mlflow_ui_url == "http://mlflow-ui:8080"  # over the tracking server's own address
    assert s.dagster_pg_url == values["BASHGYM_DAGSTER_PG_URL"] and "pw" not in repr(s)
    # every field carries the text the launchpad shows
    assert all(f.description for f in Settings.model_fields.values())


def test_folder_lists_are_colon_separated_not_json_and_resolved(env, tmp_path):
    env.setenv("HOME", str(tmp_path / "user"))
    env.setenv("BASHGYM_TRACE_DIRS", f" ~/logs : :relative{os.pathsep}{tmp_path / 'b'} ")
    env.setenv("BASHGYM_EVAL_SUITE_DIRS", f"{tmp_path / 'suite'}{os.pathsep}")
    s = Settings()
    assert s.trace_dirs_override == [tmp_path / "user" / "logs", tmp_path / "relative", tmp_path / "b"]
    assert s.eval_suite_dirs == [tmp_path / "suite"]
    env.setenv("BASHGYM_TRACE_DIRS", os.pathsep)  # names no folder: the defaults
    assert Settings().trace_dirs_override is None
    assert Settings().trace_dirs == [tmp_path / "user" / ".claude" / "projects", Settings().capture_dir]
    # a keyword argument given as text is read the same way (the Dagster resource passes its fields so)
    assert Settings(eval_suite_dirs=f"a{os.pathsep}b").eval_suite_dirs == [tmp_path / "a", tmp_path / "b"]


def test_empty_or_blank_variables_count_as_unset(env, tmp_path):
    (tmp_path / ".env").write_text("BASHGYM_TEACHER_MODEL=from-dotenv\n")  # never read (see Settings' doc)
    for name in VARIABLES:
        env.setenv(name, "")
    assert Settings() == Settings.model_construct()  # every field its default
    for name in VARIABLES:
        env.setenv(name, "  \t")
    s = Settings()
    assert s.home == PROJECT_ROOT / ".bashgym" and s.teacher_model == "reference" and s.base_model is None
    assert s.gpu_executor == "in_process" and s.run_launcher == "default" and s.eval_suite_dirs == []
    assert s.mlflow_tracking_uri_override is None and s.dagster_pg_url is None
    env.setenv("BASHGYM_RUN_LAUNCHER", " docker\n")  # values are stripped
    env.setenv("BASHGYM_MLFLOW_TRACKING_URI", " http://mlflow:5000 ")
    s = Settings()
    assert s.run_launcher == "docker" and s.mlflow_tracking_uri == "http://mlflow:5000"


def test_keyword_arguments_win_over_the_environment(env, tmp_path):
    env.setenv("BASHGYM_HOME", str(tmp_path / "from-env"))
    env.setenv("BASHGYM_TEACHER_MODEL", "from-env")
    env.setenv("BASHGYM_TRACE_DIRS", str(tmp_path / "env-traces"))
    env.setenv("HOME", str(tmp_path / "user"))
    s = Settings(home="~/given", trace_dirs_override=[tmp_path / "given-traces"])
    assert s.home == tmp_path / "user" / "given"  # text expanded and resolved, as from the environment
    assert s.trace_dirs == [tmp_path / "given-traces"] and s.teacher_model == "from-env"
    assert Settings(home=Path("kept/as/given")).home == Path("kept/as/given")  # a Path is taken as it is
    with pytest.raises(ValidationError):  # frozen
        s.teacher_model = "x"
    env.setenv("BASHGYM_TEACHER_MODEL", "changed")  # read afresh on every call
    assert get_settings().teacher_model == "changed"


@pytest.mark.parametrize(
    ("variable", "allowed"),
    [("BASHGYM_GPU_EXECUTOR", "'in_process' or 'docker'"), ("BASHGYM_RUN_LAUNCHER", "'default' or 'docker'")],
)
def test_a_value_outside_the_choices_is_an_error_naming_the_variable(env, variable, allowed):
    env.setenv(variable, "kubernetes")
    with pytest.raises(ValidationError) as err:
        get_settings()
    assert variable in str(err.value) and allowed in str(err.value) and "kubernetes" in str(err.value)
    assert isinstance(err.value, ValueError)  # what `bashgym` reports as "error: ..." (cli.main)


def test_the_resource_sets_settings_fields_by_settings_own_names_and_texts(env, tmp_path):
    from bashgym_assets.defs.resources import ENV_FIELDS, SETTINGS_FIELDS, BashgymHome

    for field, target in SETTINGS_FIELDS.items():
        assert ENV_FIELDS[field] == Settings.model_fields[target].validation_alias
        assert BashgymHome.model_fields[field].description == Settings.model_fields[target].description
    env.setenv("BASHGYM_TEACHER_MODEL", "from-env")
    env.setenv("BASHGYM_BASE_MODEL", "from-env")
    res = BashgymHome(home="rel-home", trace_dirs=f"a{os.pathsep}b", base_model=" ", sandbox_image="img:1")
    s = res.settings()
    assert s.home == tmp_path / "rel-home" and s.trace_dirs == [tmp_path / "a", tmp_path / "b"]
    assert s.teacher_model == "from-env" and s.base_model == "from-env"  # unset or blank: the environment's
    assert res.sandbox_image_tag() == "img:1"


def test_options_are_made_from_a_config_objects_fields():
    class Knobs(BaseModel):
        max_turns: int = Field(default=10, description="turns at most, 100% of them")
        limit: float | None = None
        mode: Literal["fast", "slow"] = "fast"
        lean: bool = Field(default=True, description="lean loss")
        folders: list[Path] = Field(default_factory=list)

    p = argparse.ArgumentParser()
    with pytest.raises(TypeError, match="Knobs.folders"):  # no option it could not parse faithfully
        add_field_options(p, Knobs)

    class Parsable(BaseModel):
        max_turns: int = Field(default=10, description="turns at most, 100% of them")
        limit: float | None = None
        mode: Literal["fast", "slow"] = "fast"
        lean: bool = Field(default=True, description="lean loss")

    p = argparse.ArgumentParser()
    add_field_options(p, Parsable, aliases={"max_turns": ["-t"]})
    assert vars(p.parse_args([])) == Parsable().model_dump()
    got = vars(p.parse_args(["-t", "3", "--limit", "0.5", "--mode", "slow", "--no-lean"]))
    assert Parsable(**got) == Parsable(max_turns=3, limit=0.5, mode="slow", lean=False)
    assert "turns at most, 100% of them (default: 10)" in " ".join(p.format_help().split())
    with pytest.raises(SystemExit):
        p.parse_args(["--mode", "medium"])

    class Stage(BaseModel):  # a second model on the same command line, under a prefix
        from_epoch: int = Field(ge=1)
        beta: float = 0.1
        control: bool = True

    add_field_options(p, Stage, prefix="dpo")
    got = vars(p.parse_args(["--dpo-from-epoch", "8", "--no-dpo-control"]))
    assert {k: v for k, v in got.items() if k.startswith("dpo_")} == {
        "dpo_from_epoch": 8,
        "dpo_beta": 0.1,
        "dpo_control": False,
    }  # a required field's default is None: the stage is asked for by giving it
    assert vars(p.parse_args([]))["dpo_from_epoch"] is None
