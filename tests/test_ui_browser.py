"""Both UIs in a real headless browser, over a data folder that a short pipeline run filled.

The data folder: a persistent Dagster instance (the project's dagster.yaml, as `make setup` links it) in which the
ingest chain (raw_sessions -> redacted_sessions + its blocking check -> tiered_traces) ran for two of the sample
repositories (all four are partitions), sft_dataset was built from the synthetic demo trajectories, and
sft_adapter trained twice for a step on a tiny local model (two versions of the registered model, the first made
`champion` with the promotion module's alias call, the second `candidate` as registration does).

Then the real `dagster-webserver` (both code locations of workspace.yaml) and `mlflow server` start on loopback,
headless Chromium (Debian's `chromium`) opens each page of bashgym_assets.ui_check.default_pages and waits for
what a user looks for; a PNG of every page is saved under $BASHGYM_HOME/screenshots/. The test fails naming each
page and the text it did not show (or showed and should not: Dagster's first-visit community dialog).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets import ui_check
from bashgym_assets.config import Settings
from bashgym_assets.defs import datasets as dd
from bashgym_assets.defs import training as tr
from bashgym_assets.defs.ingest import raw_sessions
from bashgym_assets.defs.privacy import no_secrets_left, redacted_sessions
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.defs.tiers import tiered_traces
from bashgym_assets.evaluation import promotion
from bashgym_assets.ingest import SAMPLE_TRACES_DIR
from bashgym_assets.ingest.pipeline import discover_repos
from bashgym_assets.instance import ensure_dagster_home
from bashgym_assets.lake import Lake
from bashgym_assets.training import registry
from bashgym_assets.training.tiny import build_tiny_model
from bashgym_assets.training_data import synthetic as syn

pytestmark = pytest.mark.slow

MATERIALIZED_REPOS = ("webshop", "datapipe")


def _fill(settings: Settings, tmp_path: Path) -> list[str]:
    """The short pipeline run; returns every repository partition."""
    res = {"bashgym": BashgymHome(home=str(settings.home))}
    with dg.DagsterInstance.get() as instance:
        assert Path(instance.root_directory) == settings.dagster_home
        repos = discover_repos([SAMPLE_TRACES_DIR])
        assert set(MATERIALIZED_REPOS) <= set(repos)
        instance.add_dynamic_partitions("repos", repos)
        for repo in MATERIALIZED_REPOS:
            assert dg.materialize([raw_sessions, redacted_sessions, no_secrets_left, tiered_traces],
                                  partition_key=repo, instance=instance, resources=res).success
        demo = syn.demo_inputs()
        lake = Lake(settings)
        lake.write("verified_trajectories", demo["trajectories"])
        lake.write("gated_scenarios", demo["scenarios"])
        assert dg.materialize([dd.sft_dataset], instance=instance, resources=res).success
        cfg = {"max_steps": 1, "batch_size": 2, "grad_accum": 1, "max_length": 256}
        for i in range(2):  # version 1 (made champion below), version 2 (the newest: candidate)
            assert dg.materialize([tr.base_model, tr.sft_adapter], instance=instance, resources=res,
                                  selection=[tr.sft_adapter.key] if i else None,
                                  run_config={"ops": {"sft_adapter": {"config": cfg}}}).success
    promotion.set_alias(registry.REGISTERED_MODEL, "1", settings=settings)
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

    html = ("<body><p>loading</p><button onclick=\"document.body.innerHTML += '<p>tab opened</p>'\">Open</button>"
            "<script>setTimeout(() => { document.querySelector('p').textContent = 'ready: 4 Partitions' }, 1500)"
            "</script><p>Join the Dagster community</p></body>")
    url = "data:text/html," + urllib.parse.quote(html)
    pages = [ui_check.Page("late-text", url, ["ready: 4 Partitions", "tab opened"], click=["Open"],
                           gone=["loading"], timeout=10),
             ui_check.Page("broken", url, ["asset graph"], absent=[ui_check.DAGSTER_NUX_HEADING], timeout=3)]
    with ui_check.Browser(width=800, height=600) as browser:
        ok, broken = ui_check.check_pages(browser, pages, tmp_path / "shots")
    assert ok.ok, ok.describe()
    assert not broken.ok and broken.missing == ["asset graph"]
    assert broken.present_but_absent == [ui_check.DAGSTER_NUX_HEADING]
    assert "page 'broken'" in broken.describe() and "missing ['asset graph']" in broken.describe()
    assert (tmp_path / "shots" / "broken.png").stat().st_size > 1000


def test_both_uis_in_a_headless_browser(bashgym_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = time.monotonic()
    ui_check.find_chromium()  # fails with the set-up hint when the browser is missing
    settings = Settings(home=bashgym_home)
    settings.ensure_dirs()
    monkeypatch.setenv("BASHGYM_TRACE_DIRS", str(SAMPLE_TRACES_DIR))
    home = ensure_dagster_home(settings)  # exports DAGSTER_HOME for this process
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert (home / "dagster.yaml").resolve() == (Path(ui_check.PROJECT_ROOT) / "dagster.yaml").resolve()
    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(build_tiny_model(tmp_path / "tiny")))

    # Dagster's webserver loads while the pipeline fills the data folder (it reads the instance live). MLflow's
    # server starts after: on first open both it and the training run would create the tables of the same fresh
    # SQLite store, and the loser of that race fails ("table ... already exists").
    with ui_check.dagster_webserver(settings, wait=False) as dagster:
        repos = _fill(settings, tmp_path)
        filled = time.monotonic() - t0
        with ui_check.mlflow_server(settings, wait=False) as mlflow:
            dagster.ready()
            mlflow.ready()
            _check_pages_and_screens(settings, dagster, mlflow, repos, filled, t0)


def _check_pages_and_screens(settings: Settings, dagster, mlflow, repos: list[str], filled: float,
                             t0: float) -> None:
    # a fresh instance does not ask for the first-visit community dialog (dagster.yaml: nux enabled false)
    assert ui_check._graphql(dagster.url, "{ shouldShowNux }")["data"]["shouldShowNux"] is False
    pages = ui_check.default_pages(settings, dagster.url, mlflow.url, partitions=repos)
    with ui_check.Browser() as browser:
        results = ui_check.check_pages(browser, pages, settings.home / "screenshots")
    failures = [r.describe() for r in results if not r.ok]
    print(f"filled in {filled:.0f}s, whole test {time.monotonic() - t0:.0f}s; "
          + ", ".join(f"{r.page.name} {r.seconds:.1f}s" for r in results))
    assert not failures, "pages that do not show what they should:\n" + "\n".join(failures)
    shots = sorted(p.name for p in (settings.home / "screenshots").glob("*.png"))
    assert shots == sorted(f"{p.name}.png" for p in pages)
    assert all(os.path.getsize(settings.home / "screenshots" / s) > 10_000 for s in shots)
