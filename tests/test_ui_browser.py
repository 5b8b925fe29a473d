"""Both UIs in a real headless browser, over a data folder that the demo's own runs filled, and the Dagster UI as
the front door: a demo run re-executed and an asset materialized from it.

The data folder: a persistent Dagster instance (the project's dagster.yaml, as `make setup` links it) filled by
`bashgym demo`'s own code (``demo.run_plan``, the quick profile) for the part of the pipeline that needs no sandbox:
the ingest chain (raw_sessions -> redacted_sessions + its blocking check -> tiered_traces) for two of the sample
repositories (all four are partitions), sft_dataset and dpo_dataset from the synthetic demo trajectories (what
the sandbox stages would have written), then base_model, sft_adapter and dpo_adapter on a tiny local model: two
versions of the registered model, SFT's and then DPO's (the newest), and no champion, as a demo leaves it. Nothing
is set by hand in MLflow or Dagster.

Then the real `dagster-webserver` (both code locations of workspace.yaml) and `mlflow server` start on loopback,
headless Chromium (Debian's `chromium`) opens each page of bashgym_assets.ui_check.default_pages and waits for
what a user looks for; a PNG of every page is saved under $BASHGYM_HOME/screenshots/. The test fails naming each
page and the text it did not show (or showed and should not: Dagster's first-visit community dialog). Last, with
`dagster-daemon` started (what `make ui`'s `dagster dev` runs beside the webserver, to start the runs the UI
queues; the sensors that would launch runs of their own are switched off first), the browser clicks "Re-execute"
on the page of the demo's sft_dataset run and "Materialize" on the page of base_model (a GPU asset), and both
runs must succeed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets import demo, ui_check
from bashgym_assets.config import Settings
from bashgym_assets.ingest import SAMPLE_TRACES_DIR
from bashgym_assets.ingest.pipeline import discover_repos
from bashgym_assets.instance import ensure_dagster_home
from bashgym_assets.lake import Lake
from bashgym_assets.testing import datasets as syn
from bashgym_assets.testing.tiny_model import build_tiny_model

pytestmark = pytest.mark.slow

MATERIALIZED_REPOS = ("webshop", "datapipe")
# the demo's plan, cut to what runs without a sandbox (gated_scenarios and verified_trajectories come from the
# synthetic demo inputs instead)
FILLED = (
    "raw_sessions",
    "redacted_sessions",
    "tiered_traces",
    "sft_dataset",
    "dpo_dataset",
    "base_model",
    "sft_adapter",
    "dpo_adapter",
)
REEXECUTED, MATERIALIZED = "sft_dataset", "base_model"
# sensors that would start runs on their own once a daemon runs (ingest of the sample traces, the eager
# evaluation and student rollouts of the adapters): off while the browser launches runs by hand
SELF_LAUNCHING = ("trace_files_sensor", "cpu_automation", "gpu_automation")


def _fill(settings: Settings) -> list[str]:
    """The demo's runs for ``FILLED``; returns every repository partition."""
    repos = discover_repos([SAMPLE_TRACES_DIR])
    assert set(MATERIALIZED_REPOS) <= set(repos)
    demo.register_partitions(repos)
    inputs = syn.demo_inputs()
    lake = Lake(settings)
    lake.write("verified_trajectories", inputs["trajectories"])
    lake.write("gated_scenarios", inputs["scenarios"])
    steps = demo.only(demo.plan(demo.asset_nodes()), FILLED)
    lines: list[str] = []
    demo.run_plan(steps, list(MATERIALIZED_REPOS), demo.demo_env(), lines.append, profile="quick")
    assert [line for line in lines if line.startswith("-->")], lines
    return repos


def test_the_page_lists_match_the_definitions() -> None:
    """The groups, sensors and schedules the browser test looks for are the ones the code locations define."""
    from bashgym_assets.definitions import defs as cpu
    from bashgym_assets.gpu_definitions import defs as gpu

    groups: dict[dg.AssetKey, set[str]] = {}
    sensors, schedules = set(), set()
    for defs in (cpu, gpu):
        repo = defs.get_repository_def()
        for node in repo.asset_graph.asset_nodes:
            groups.setdefault(node.key, set()).add(node.group_name)
        sensors |= {s.name for s in repo.sensor_defs}
        schedules |= {s.name for s in repo.schedule_defs}
    # an asset of the other location referenced as a dependency is a stub in group "default" here: the UI
    # shows it in its real group
    shown = {g for gs in groups.values() for g in (gs - {"default"} or gs)}
    assert shown == set(ui_check.ASSET_GROUPS)
    assert sensors == set(ui_check.SENSORS)
    assert schedules == set(ui_check.SCHEDULES)


def test_a_page_that_does_not_show_the_text_fails_by_name(tmp_path: Path) -> None:
    """The checker itself: waits for text that appears late, names what is missing or wrongly shown."""
    import urllib.parse

    html = (
        "<body><p>loading</p><button onclick=\"document.body.innerHTML += '<p>tab opened</p>'\">Open</button>"
        "<script>setTimeout(() => { document.querySelector('p').textContent = 'ready: 4 Partitions' }, 1500)"
        "</script><p>Join the Dagster community</p></body>"
    )
    url = "data:text/html," + urllib.parse.quote(html)
    pages = [
        ui_check.Page(
            "late-text",
            url,
            ["ready: 4 Partitions", "tab opened"],
            click=["Open"],
            gone=["loading"],
            timeout=10,
        ),
        ui_check.Page("broken", url, ["asset graph"], absent=[ui_check.DAGSTER_NUX_HEADING], timeout=3),
    ]
    with ui_check.Browser(width=800, height=600) as browser:
        ok, broken = ui_check.check_pages(browser, pages, tmp_path / "shots")
    assert ok.ok, ok.describe()
    assert not broken.ok and broken.missing == ["asset graph"]
    assert broken.present_but_absent == [ui_check.DAGSTER_NUX_HEADING]
    assert "page 'broken'" in broken.describe() and "missing ['asset graph']" in broken.describe()
    assert (tmp_path / "shots" / "broken.png").stat().st_size > 1000


def test_both_uis_in_a_headless_browser(
    bashgym_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t0 = time.monotonic()
    ui_check.find_chromium()  # fails with the set-up hint when the browser is missing
    settings = Settings(home=bashgym_home)
    settings.ensure_dirs()
    monkeypatch.setenv("BASHGYM_TRACE_DIRS", str(SAMPLE_TRACES_DIR))
    monkeypatch.setenv("DAGSTER_HOME", str(settings.dagster_home))  # restored after the test
    home = ensure_dagster_home(settings)
    assert (home / "dagster.yaml").resolve() == (Path(ui_check.PROJECT_ROOT) / "dagster.yaml").resolve()
    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(build_tiny_model(tmp_path / "tiny")))
    with (
        dg.DagsterInstance.get() as instance
    ):  # its SQLite tables created here, not raced by the webserver's start
        assert not instance.get_runs()

    # Both servers load while the pipeline fills the data folder (they read the instance and the store live).
    # ui_check prepares MLflow's store before its server starts, as `make mlflow` does: the tables exist before the
    # server and the training open them (on a fresh SQLite store both would create them, and the loser of that race
    # fails: "table ... already exists").
    with (
        ui_check.dagster_webserver(settings, wait=False) as dagster,
        ui_check.mlflow_server(settings, wait=False) as mlflow,
    ):
        repos = _fill(settings)
        filled = time.monotonic() - t0
        dagster.ready()
        mlflow.ready()
        with ui_check.Browser() as browser:
            _check_pages_and_screens(settings, browser, dagster, mlflow, repos, filled, t0)
            _launch_from_the_ui(settings, browser, dagster)
    print(f"whole test {time.monotonic() - t0:.0f}s")


def _check_pages_and_screens(
    settings: Settings, browser: ui_check.Browser, dagster, mlflow, repos: list[str], filled: float, t0: float
) -> None:
    # a fresh instance does not ask for the first-visit community dialog (dagster.yaml: nux enabled false)
    assert ui_check._graphql(dagster.url, "{ shouldShowNux }")["data"]["shouldShowNux"] is False
    from bashgym_assets.evaluation.promotion import alias_version
    from bashgym_assets.training import registry

    c = registry.client(settings)
    versions = sorted(
        c.search_model_versions(f"name='{registry.REGISTERED_MODEL}'"), key=lambda v: int(v.version)
    )
    assert [v.tags["dagster_asset"] for v in versions] == [
        "sft_adapter",
        "dpo_adapter",
    ]  # SFT's is not newest
    assert alias_version(registry.REGISTERED_MODEL, settings=settings) is None  # no champion
    pages = ui_check.default_pages(settings, dagster.url, mlflow.url, partitions=repos)
    results = ui_check.check_pages(browser, pages, settings.home / "screenshots")
    failures = [r.describe() for r in results if not r.ok]
    print(
        f"filled in {filled:.0f}s, pages checked at {time.monotonic() - t0:.0f}s; "
        + ", ".join(f"{r.page.name} {r.seconds:.1f}s" for r in results)
    )
    assert not failures, "pages that do not show what they should:\n" + "\n".join(failures)
    adapter_page = next(p for p in pages if p.name == f"dagster-{ui_check.ADAPTER_ASSET}")
    assert f"models:/{registry.REGISTERED_MODEL}/{versions[0].version}" in adapter_page.expect
    shots = sorted(p.name for p in (settings.home / "screenshots").glob("*.png"))
    assert shots == sorted(f"{p.name}.png" for p in pages)
    assert all(os.path.getsize(settings.home / "screenshots" / s) > 10_000 for s in shots)


RUN_QUERY = (
    "query($id: ID!) { runOrError(runId: $id) { ... on Run { pipelineName pipelineSnapshotId "
    "parentPipelineSnapshotId repositoryOrigin { repositoryLocationName repositoryName } } } }"
)
JOB_QUERY = (
    "query($s: PipelineSelector!) { pipelineOrError(params: $s) { __typename ... on Pipeline "
    "{ pipelineSnapshotId } } }"
)


def _wait_run(
    instance: dg.DagsterInstance, find, what: str, timeout: float = 300, finished: bool = True
) -> dg.DagsterRun:
    """The run ``find`` picks, once it has finished (``finished=False``: once it exists)."""
    deadline = time.monotonic() + timeout
    run = None
    while time.monotonic() < deadline:
        run = next((r for r in instance.get_runs(limit=50) if find(r)), None)
        if run is not None and (run.is_finished or not finished):
            return run
        time.sleep(0.5)
    state = "finished " if finished else ""
    pytest.fail(f"{what}: no {state}run after {timeout:.0f}s (last seen: {run and run.status})")


def _launch_from_the_ui(settings: Settings, browser: ui_check.Browser, dagster) -> None:
    with dg.DagsterInstance.get() as instance:
        (demo_run,) = [r for r in instance.get_runs() if r.asset_selection == {dg.AssetKey(REEXECUTED)}]
        # what the UI needs to offer "Re-execute" without a warning: the run's origin is a loaded code location
        # whose job has the snapshot the run was subset from
        shown = ui_check._graphql(dagster.url, RUN_QUERY, {"id": demo_run.run_id})["data"]["runOrError"]
        origin = shown["repositoryOrigin"]
        assert origin == {"repositoryLocationName": "bashgym_cpu", "repositoryName": "__repository__"}, shown
        job = ui_check._graphql(
            dagster.url,
            JOB_QUERY,
            {
                "s": {
                    "repositoryLocationName": origin["repositoryLocationName"],
                    "repositoryName": origin["repositoryName"],
                    "pipelineName": shown["pipelineName"],
                }
            },
        )["data"]["pipelineOrError"]
        assert job["pipelineSnapshotId"] == shown["parentPipelineSnapshotId"], (job, shown)

        assert sorted(ui_check.stop_sensors(dagster.url, SELF_LAUNCHING)) == sorted(SELF_LAUNCHING)
        before = {r.run_id for r in instance.get_runs()}
        with ui_check.dagster_daemon(settings, dagster.url):
            # "Re-execute" on the demo run's page, then "Materialize" on a GPU asset's page: the two runs go at once
            # (the run queue takes 2)
            browser.goto(f"{dagster.url}/runs/{demo_run.run_id}")
            _, missing = browser.wait_for(["Re-execute all (*)", "Success"], timeout=90)
            assert not missing, f"the demo run's page shows no {missing}"
            assert browser.evaluate(
                "[...document.querySelectorAll('button')].some(b => b.innerText.trim() === "
                "'Re-execute all (*)' && !b.disabled)"
            ), "Re-execute is disabled"
            assert browser.click_text("Re-execute all (*)", selector="button")

            def reexecution(run: dg.DagsterRun) -> bool:
                return run.parent_run_id == demo_run.run_id

            # launched (the page's request has done its work): the page can be left
            _wait_run(instance, reexecution, "the re-execution", timeout=60, finished=False)

            browser.goto(f"{dagster.url}/assets/{MATERIALIZED}")
            _, missing = browser.wait_for([MATERIALIZED, "Materialize", "bashgym_gpu"], timeout=90)
            assert not missing, f"the {MATERIALIZED} page shows no {missing}"
            assert browser.click_when_shown("Materialize", selector="button", timeout=60)
            made = _wait_run(
                instance,
                lambda r: r.run_id not in before and dg.AssetKey(MATERIALIZED) in (r.asset_selection or ()),
                "the materialization",
            )
            again = _wait_run(instance, reexecution, "the re-execution")
            browser.goto(f"{dagster.url}/runs/{again.run_id}")
            browser.wait_for(["Success"], timeout=60)
            browser.screenshot(settings.home / "screenshots" / "dagster-reexecuted-run.png", full_page=False)
            assert again.status == dg.DagsterRunStatus.SUCCESS, _run_failure(instance, again)
            assert again.remote_job_origin.location_name == "bashgym_cpu"
            assert again.asset_selection == {dg.AssetKey(REEXECUTED)}

            browser.goto(f"{dagster.url}/runs/{made.run_id}")
            browser.wait_for(["Success"], timeout=60)
            browser.screenshot(
                settings.home / "screenshots" / "dagster-materialized-run.png", full_page=False
            )
            assert made.status == dg.DagsterRunStatus.SUCCESS, _run_failure(instance, made)
            assert made.remote_job_origin.location_name == "bashgym_gpu"
            latest = instance.get_latest_materialization_event(dg.AssetKey(MATERIALIZED))
            assert latest is not None and latest.run_id == made.run_id


def _run_failure(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    events = instance.all_logs(run.run_id)
    return f"run {run.run_id} {run.status}: " + "; ".join(
        str(e.dagster_event.event_specific_data)[:500]
        for e in events
        if e.dagster_event is not None and e.dagster_event.is_failure
    )


# --- `make ui` right after `make demo` (issue 40) -------------------------------------------------------------

LEFT_FOR_THE_SENSOR = "infra-scripts"
SENSOR_TICKS = (
    "query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { __typename ... on Sensor { sensorState "
    "{ status ticks(limit: 20) { status timestamp skipReason runIds } } } } }"
)


@contextmanager
def _make_ui(settings: Settings) -> Iterator[ui_check.Server]:
    """``dagster dev -w workspace.yaml -h 127.0.0.1 -p PORT``, what ``make ui`` runs (the webserver and the daemon,
    every sensor in its default state), over the data folder's instance; ready when both code locations loaded."""
    port = ui_check.free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DAGSTER_HOME": str(settings.dagster_home), "BASHGYM_HOME": str(settings.home)}
    cmd = [ui_check._bin("dagster"), "dev", "-w", str(ui_check.PROJECT_ROOT / "workspace.yaml")]
    log = settings.home / "logs" / "make-ui.log"
    with ui_check._process("dagster dev", [*cmd, "-h", "127.0.0.1", "-p", str(port)], url, log, env) as srv:
        deadline = time.monotonic() + 240
        while True:
            srv.alive()
            try:
                entries = ui_check._graphql(url, ui_check.LOCATIONS_QUERY)["data"]["workspaceOrError"]
                if all(e["loadStatus"] == "LOADED" for e in entries["locationEntries"]):
                    break
            except (OSError, KeyError, TypeError, ValueError):
                pass
            assert time.monotonic() < deadline, f"dagster dev not ready after 240s:\n{srv.tail()}"
            time.sleep(1)
        yield srv


def _ticks(url: str, location: str, sensor: str) -> list[dict]:
    selector = {"repositoryLocationName": location, "repositoryName": "__repository__", "sensorName": sensor}
    found = ui_check._graphql(url, SENSOR_TICKS, {"s": selector})["data"]["sensorOrError"]
    assert found["__typename"] == "Sensor", found
    return found["sensorState"]["ticks"]


def test_make_ui_after_the_demo_fails_no_run(
    bashgym_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: `make ui` right after `make demo`, the sample traces as the trace folder: the trace sensor ran the
    ingest of the 4 sample repositories again, on the multiprocess executor, and the dead-run reaper (a sensor of
    both code locations) failed 3 of them while they ran, their first step's process being gone.

    The demo's own code ingests 3 of the repositories; `dagster dev` starts as `make ui` starts it; the sensor's
    first tick must ask only for the fourth, that run must succeed with the reaper ticking beside it (and the test
    reaping too, as the sensor does, while the run is in its later steps), and the Runs page shows no failure."""
    t0 = time.monotonic()
    ui_check.find_chromium()
    settings = Settings(home=bashgym_home)
    settings.ensure_dirs()
    monkeypatch.setenv("BASHGYM_TRACE_DIRS", str(SAMPLE_TRACES_DIR))
    monkeypatch.setenv("DAGSTER_HOME", str(settings.dagster_home))
    ensure_dagster_home(settings)
    repos = discover_repos([SAMPLE_TRACES_DIR])
    ingested = [r for r in repos if r != LEFT_FOR_THE_SENSOR]
    assert LEFT_FOR_THE_SENSOR in repos and len(ingested) == 3
    demo.register_partitions(repos)
    steps = demo.only(demo.plan(demo.asset_nodes()), ("raw_sessions", "redacted_sessions", "tiered_traces"))
    demo.run_plan(steps, ingested, demo.demo_env(), lambda _: None, profile="quick")
    filled = time.monotonic() - t0

    from bashgym_assets.defs import run_health

    with dg.DagsterInstance.get() as instance:
        before = {r.run_id for r in instance.get_runs()}  # the demo's
    with dg.DagsterInstance.get() as instance, _make_ui(settings) as ui:
        deadline = time.monotonic() + 240
        while not [
            t for t in _ticks(ui.url, "bashgym_cpu", "trace_files_sensor") if t["status"] != "STARTED"
        ]:
            ui.alive()
            assert time.monotonic() < deadline, f"the trace sensor never ticked:\n{ui.tail()}"
            time.sleep(1)
        ticked = _ticks(ui.url, "bashgym_cpu", "trace_files_sensor")[-1]
        launched = [
            r
            for r in instance.get_runs()
            if r.run_id not in before and r.tags.get("dagster/sensor_name") == "trace_files_sensor"
        ]
        assert [r.tags.get("dagster/partition") for r in launched] == [LEFT_FOR_THE_SENSOR], ticked

        # the sensor's run, on the CPU location's multiprocess executor, reaped (as the reaper sensor does) all along
        (run,) = launched
        reaped: list[str] = []
        while not (run := instance.get_run_by_id(run.run_id)).is_finished:
            ui.alive()
            run_health.reap_dead_runs(instance, reaped.append)
            assert time.monotonic() < deadline + 300, f"the sensor's run did not finish:\n{ui.tail()}"
            time.sleep(1)
        assert run.status == dg.DagsterRunStatus.SUCCESS, (reaped, _run_failure(instance, run))
        steps_run = {
            e.step_key for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)
        }
        assert {"raw_sessions", "redacted_sessions", "tiered_traces"} <= steps_run
        pids = {
            e.dagster_event.pid for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
        }
        assert run.tags[run_health.PID_TAG] not in {
            str(p) for p in pids
        }  # a process per step; tagged: the worker

        reaper = _ticks(ui.url, "bashgym_cpu", "dead_run_reaper")
        assert reaper and all("no dead runs" in (t["skipReason"] or "") for t in reaper), reaper
        # whatever else `make ui` started meanwhile (the datasets' automation after the new partition) ends well too
        deadline = time.monotonic() + 300
        while [r for r in instance.get_runs() if not r.is_finished]:
            assert time.monotonic() < deadline, [r.status for r in instance.get_runs()]
            time.sleep(2)
        failed = [r for r in instance.get_runs() if r.status != dg.DagsterRunStatus.SUCCESS]
        assert not failed, [_run_failure(instance, r) for r in failed]

        with ui_check.Browser() as browser:
            (result,) = ui_check.check_pages(
                browser,
                [
                    ui_check.Page(
                        "make-ui-runs",
                        f"{ui.url}/runs",
                        [LEFT_FOR_THE_SENSOR, "trace_files_sensor", "Success"],
                        absent=["Failure", "Execution failed"],
                        timeout=90,
                    )
                ],
                settings.home / "screenshots",
            )
        assert result.ok, result.describe()
    print(f"filled in {filled:.0f}s, whole test {time.monotonic() - t0:.0f}s")
