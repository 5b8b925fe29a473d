"""The Dagster layer: redacted_sessions -> blocking check -> tiered_traces, on a real instance and lake."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets.config import Settings
from bashgym_assets.defs.privacy import RedactionConfig, no_secrets_left, redacted_sessions
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.defs.tiers import tiered_traces
from bashgym_assets.lake import Lake
from bashgym_assets.quality.overrides import promote_trace
from bashgym_assets.quality.tiers import traces_from_table
from bashgym_assets.sessions import Prompt, Session, Step, sessions_from_table, sessions_to_table

REPO = "api"
EMAIL = "ana.lima@protonmail.com"


def _sessions() -> list[Session]:
    steps = [
        Step(
            index=0,
            tool_name="Bash",
            command="git log -1",
            input=json.dumps({"command": "git log -1"}),
            output=f"Author: Ana Lima <{EMAIL}>",
            exit_code=0,
            success=True,
            cwd="/srv/api",
            prompt_index=0,
        ),
        Step(
            index=1,
            tool_name="Bash",
            command="pytest -q",
            input=json.dumps({"command": "pytest -q"}),
            output="3 passed",
            exit_code=0,
            success=True,
            cwd="/srv/api",
            prompt_index=0,
        ),
        Step(
            index=2,
            tool_name="Bash",
            command="ls",
            input=json.dumps({"command": "ls"}),
            output="a b",
            exit_code=0,
            success=True,
            cwd="/srv/api",
            prompt_index=1,
        ),
    ]
    prompts = [Prompt(index=0, text="who wrote the last commit?"), Prompt(index=1, text="list files")]
    return [
        Session(
            session_id="s-1",
            source_format="claude_code",
            source_path="/srv/x/s-1.jsonl",
            repo=REPO,
            cwd="/srv/api",
            prompts=prompts,
            steps=steps,
        )
    ]


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("repos", [REPO])
        yield inst


def _run(instance, home: Path, disable: list[str] | None = None) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [redacted_sessions, no_secrets_left, tiered_traces],
        partition_key=REPO,
        instance=instance,
        resources={"bashgym": BashgymHome(home=str(home))},
        run_config=dg.RunConfig({"redacted_sessions": RedactionConfig(disable_detectors=disable or [])}),
        raise_on_error=False,
    )


def _check_passed(result: dg.ExecuteInProcessResult) -> bool:
    evals = result.get_asset_check_evaluations()
    assert len(evals) == 1 and evals[0].check_name == "no_secrets_left"
    return evals[0].passed


def test_clean_run_materializes_tiers(instance, settings: Settings) -> None:
    lake = Lake(settings)
    lake.write("raw_sessions", sessions_to_table(_sessions()), REPO)
    result = _run(instance, settings.home)
    assert result.success and _check_passed(result)
    red = sessions_from_table(lake.read("redacted_sessions", REPO))
    assert EMAIL not in red[0].steps[0].output and "<EMAIL_1>" in red[0].steps[0].output
    traces = traces_from_table(lake.read("tiered_traces", REPO))
    assert [t.boundary for t in traces] == ["start", "new_prompt"]
    assert traces[0].verification_passed is True and EMAIL not in json.dumps(
        [t.model_dump(mode="json") for t in traces]
    )
    mats = result.asset_materializations_for_node("tiered_traces")
    assert mats and "data:image/png;base64," in mats[0].metadata["report"].value

    # a manual promotion survives the next materialization of the whole chain
    promote_trace(traces[1].segment_id, "a perfect tiny example", settings)
    assert _run(instance, settings.home).success
    again = {t.segment_id: t for t in traces_from_table(lake.read("tiered_traces", REPO))}
    assert again[traces[1].segment_id].tier == "gold" and again[traces[1].segment_id].override == "promote"


def test_secret_slipping_through_stops_downstream(instance, settings: Settings) -> None:
    lake = Lake(settings)
    lake.write("raw_sessions", sessions_to_table(_sessions()), REPO)
    result = _run(instance, settings.home, disable=["email"])  # the e-mail detector is off: the address slips
    assert not _check_passed(result)
    evaluation = result.get_asset_check_evaluations()[0]
    assert evaluation.metadata["findings"].value == 1
    assert evaluation.metadata["by_entity"].value == {"EMAIL_ADDRESS": 1}
    assert EMAIL in sessions_from_table(lake.read("redacted_sessions", REPO))[0].steps[0].output
    # the blocking check failed, so tiered_traces never ran: nothing downstream saw the address
    assert result.asset_materializations_for_node("tiered_traces") == []
    assert not lake.exists("tiered_traces", REPO)
    materialized = {e.asset_key for e in result.get_asset_materialization_events()}
    assert materialized == {dg.AssetKey("redacted_sessions")}
    assert not result.success


def test_end_to_end_from_real_claude_code_logs(
    claude_fixtures: Path, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ingest's raw_sessions -> redacted_sessions -> blocking check -> tiered_traces on real Claude Code logs."""
    import shutil

    from bashgym_assets.defs.ingest import raw_sessions
    from bashgym_assets.ingest.pipeline import discover_repos

    traces = tmp_path / "traces" / "-home-someone-proj"
    traces.mkdir(parents=True)
    for f in claude_fixtures.glob("*.jsonl"):
        shutil.copy(f, traces / f.name)
    monkeypatch.setenv("BASHGYM_TRACE_DIRS", str(tmp_path / "traces"))
    repos = discover_repos([tmp_path / "traces"])
    assert repos
    lake = Lake(settings)
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("repos", repos)
        for repo in repos:
            result = dg.materialize(
                [raw_sessions, redacted_sessions, no_secrets_left, tiered_traces],
                partition_key=repo,
                instance=inst,
                resources={"bashgym": BashgymHome(home=str(settings.home))},
            )
            assert result.success and _check_passed(result)
            raw = sessions_from_table(lake.read("raw_sessions", repo))
            tiered = traces_from_table(lake.read("tiered_traces", repo))
            assert tiered and {t.session_id for t in tiered} <= {s.session_id for s in raw}
            assert all(t.tier in ("gold", "silver", "bronze", "failed") for t in tiered)
            assert sum(len(t.steps) for t in tiered) == sum(len(s.steps) for s in raw)
