"""The MLflow UI as a person meets it (issue 40): each of the project's experiments, clicked in MLflow's list in a
fresh browser profile, opens on its runs (the rollouts' and the routing's on their traces), not on MLflow's empty
GenAI overview; the server starts without going online; the run links in Dagster's asset metadata reach the UI
where ``make mlflow`` serves it (``MLFLOW_PORT``, ``BASHGYM_MLFLOW_UI_URL``), not a fixed port 5000.

Real MLflow servers started the way ``make mlflow`` and ``ui_check`` start them, on loopback, headless Chromium
(Debian's ``chromium``) with a new profile per experiment, stores filled by the project's own code and by a bare
``MlflowClient`` playing an older bashgym.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bashgym_assets import mlflow_store, ui_check
from bashgym_assets.config import PROJECT_ROOT, Settings

# MLflow's GenAI overview, where a fresh profile opened every experiment before
GENAI_OVERVIEW = ["No data available for the selected time range", "Token Usage"]


def test_the_kinds_table_names_the_experiments_the_project_writes() -> None:
    from bashgym_assets.evaluation import tracking
    from bashgym_assets.rollout import tracing
    from bashgym_assets.training import registry

    assert set(mlflow_store.EXPERIMENT_KINDS) == {
        registry.TRAINING_EXPERIMENT,
        tracking.EVAL_EXPERIMENT,
        tracing.EVAL_EXPERIMENT,
        tracing.ROLLOUT_EXPERIMENT,
        tracing.ROUTING_EXPERIMENT,
    }
    runs = {n for n, k in mlflow_store.EXPERIMENT_KINDS.items() if k == mlflow_store.RUNS}
    assert runs == {registry.TRAINING_EXPERIMENT, tracking.EVAL_EXPERIMENT}  # they hold runs and models


def test_the_page_runs_the_kind_script_before_mlflows_app() -> None:
    from bashgym_assets import mlflow_ui

    index = Path(__import__("mlflow").__file__).parent / "server" / "js" / "build" / "index.html"
    page = mlflow_ui.with_experiment_kinds(index.read_text())
    script, app = page.index(mlflow_ui.experiment_kind_script()), page.index("static/js/main.")
    assert 0 < script < app  # in the head, before the app reads the address
    assert '"custom_model_development": ["machine_learning", "runs"]' in page
    assert '"genai_development": ["genai", "traces"]' in page


def test_make_mlflow_runs_the_checked_server_command_offline(settings: Settings, tmp_path: Path) -> None:
    """``make mlflow`` runs ``mlflow_ui`` (the command ui_check starts too), with MLFLOW_PORT as its port; the
    server gets the bundled price list whatever the caller's environment says."""
    from bashgym_assets import mlflow_ui

    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "mlflow", "MLFLOW_PORT=5050", f"BASHGYM_HOME={settings.home}"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "-m bashgym_assets.mlflow_ui --port 5050" in dry
    cmd = mlflow_ui.server_command(settings, 5050)
    assert cmd[cmd.index("--app-name") + 1] == mlflow_ui.APP_NAME and mlflow_ui.app_installed()
    assert cmd[cmd.index("--backend-store-uri") + 1] == settings.mlflow_tracking_uri
    assert cmd[cmd.index("-p") + 1] == "5050" and cmd[cmd.index("--workers") + 1] == "1"
    env = mlflow_ui.server_env({"LITELLM_LOCAL_MODEL_COST_MAP": "False", "PATH": "/bin"})
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and env["PATH"] == "/bin"
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"


def test_run_links_follow_where_mlflow_serves(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing configured: ``make mlflow``'s default port. ``make mlflow MLFLOW_PORT=N`` records its address in the
    data folder: links from then on use it. ``BASHGYM_MLFLOW_UI_URL`` (what MLFLOW_PORT exports to every make
    target) wins, and ``make mlflow`` serves on its port."""
    from bashgym_assets import mlflow_ui
    from bashgym_assets.training import registry

    monkeypatch.delenv("BASHGYM_MLFLOW_UI_URL", raising=False)
    uri = settings.mlflow_tracking_uri
    assert registry.run_url(uri, "1", "abc") == "http://127.0.0.1:5000/#/experiments/1/runs/abc"
    assert mlflow_ui.default_port(Settings(home=settings.home)) == 5000

    mlflow_ui.record_url(settings, "http://127.0.0.1:5050")
    assert registry.run_url(uri, "1", "abc") == "http://127.0.0.1:5050/#/experiments/1/runs/abc"
    assert Settings(home=settings.home).mlflow_ui_url == "http://127.0.0.1:5050"
    other = Settings(home=settings.home.parent / "other")  # another data folder: its own record, or none
    assert registry.run_url(other.mlflow_tracking_uri, "1", "abc").startswith("http://127.0.0.1:5000/")

    monkeypatch.setenv("BASHGYM_MLFLOW_UI_URL", "http://127.0.0.1:6060/")
    assert registry.run_url(uri, "1", "abc") == "http://127.0.0.1:6060/#/experiments/1/runs/abc"
    assert mlflow_ui.default_port(Settings(home=settings.home)) == 6060
    printed = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", "_links: ; @echo $$BASHGYM_MLFLOW_UI_URL", "_links"]
        + ["MLFLOW_PORT=5051"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "BASHGYM_MLFLOW_UI_URL"},
    ).stdout
    assert printed.strip() == "http://127.0.0.1:5051"


class _Blackhole:
    """A loopback TCP port that accepts connections and never answers: a proxy on a network that drops
    traffic, where an online fetch hangs instead of failing at once. Counts who connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.connections:
            c.close()


PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


@dataclass
class Served:
    """``make mlflow``'s server of the module's data folder, and what the tests look at."""

    settings: Settings
    url: str
    port: int
    proc: subprocess.Popen
    log: Path
    hole: _Blackhole
    ready_at: float  # time.monotonic() when it first answered /health
    shows: dict[str, str]  # experiment -> what it shows (``_fill_like_a_user``)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``make mlflow MLFLOW_PORT=N``'s command (``python -m bashgym_assets.mlflow_ui --port N``, on a free port that
    is not 5000) over a data folder filled as a user's is, started behind a proxy that never answers (only the
    server sees the proxy). One server for the module's three tests of it: a start is ~15 s on a loaded machine."""
    home = tmp_path_factory.mktemp("mlflow-ui") / "bashgym-home"
    settings = Settings(home=home)
    settings.ensure_dirs()
    shows = _fill_like_a_user(settings)  # before the start: `make mlflow` tags the older bashgym's experiment
    hole = _Blackhole()
    env = {
        k: v
        for k, v in os.environ.items()
        # set by other test modules' imports: the server must set it itself
        if not k.startswith("BASHGYM_") and k != "LITELLM_LOCAL_MODEL_COST_MAP"
    }
    env.update({name: f"http://127.0.0.1:{hole.port}" for name in PROXY_VARIABLES})
    env.update({"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    env.update({"BASHGYM_HOME": str(home), "BASHGYM_TRACES": "0"})
    port = ui_check.free_port()
    log = home / "logs" / "make-mlflow.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "bashgym_assets.mlflow_ui",
        "--port",
        str(port),
    ]  # the recipe of `make mlflow`
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT, env=env, start_new_session=True
        )
    try:
        _wait_ready(url, proc, log)
        yield Served(settings, url, port, proc, log, hole, time.monotonic(), shows)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        hole.close()


def _fill_like_a_user(settings: Settings) -> dict[str, str]:
    """The project's experiments with content written by its own code, one of them made by an older bashgym (no
    kind tag), as a data folder that has been used for a while holds them; returns experiment -> what it shows
    (a run's name, or '' for traces)."""
    from mlflow import MlflowClient

    from bashgym_assets.rollout import tracing
    from bashgym_assets.training import registry

    settings.mlflow_dir.mkdir(parents=True, exist_ok=True)
    old = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)  # an older bashgym: no kind tag
    legacy = old.create_experiment(
        "bashgym-evaluation", artifact_location=f"{settings.mlflow_artifact_uri}/bashgym-evaluation"
    )
    old.set_terminated(old.create_run(legacy, run_name="eval-older-bashgym").info.run_id)
    run_id = registry.start_training_run(kind="sft", run_name="sft-first-adapter", tags={}, settings=settings)
    registry.client(settings).set_terminated(run_id)
    sink = tracing.TraceSink(settings.mlflow_tracking_uri, settings.mlflow_artifact_root)
    for experiment in (tracing.ROLLOUT_EXPERIMENT, tracing.ROUTING_EXPERIMENT):
        sink.add(
            tracing.episode_trace(
                "episode",
                experiment,
                [],
                time.time_ns(),
                inputs={"task": f"a task in {experiment}"},
                outputs={"verified": True},
                attributes={"scenario_id": "s-1"},
            )
        )
    assert sink.flush() == 2, sink.errors
    return {
        "bashgym-training": "sft-first-adapter",
        "bashgym-evaluation": "eval-older-bashgym",
        "bashgym-rollouts": "",
        "bashgym-routing": "",
    }


@pytest.mark.slow
def test_each_experiment_opens_on_its_runs_in_a_fresh_browser_profile(served: Served) -> None:
    """The experiment list of the MLflow that ``make mlflow`` serves, one new browser profile per experiment:
    clicking its name opens its runs table with its run (the traces table for the traces-only ones), never the
    GenAI overview."""
    ui_check.find_chromium()
    settings, shows = served.settings, served.shows
    c = mlflow_store.client(settings)
    ids = {name: c.get_experiment_by_name(name).experiment_id for name in shows}
    failures = []
    for name, run_name in shows.items():
        if run_name:
            expect, tab = ["Run Name", "Duration", "matching run", run_name], "runs"
        else:
            expect, tab = ["Traces", "Input", "Output", "State", "a task in"], "traces"
        page = ui_check.Page(
            f"experiment-{name}",
            f"{served.url}/#/experiments",
            expect,
            absent=GENAI_OVERVIEW + ["Start tracing your LLM application"],
            click=[name],
        )
        with ui_check.Browser() as browser:  # a fresh profile: nothing chosen in MLflow's UI before
            (result,) = ui_check.check_pages(browser, [page], settings.home / "screenshots")
            where = browser.evaluate("location.hash")
        if not result.ok or not where.startswith(f"#/experiments/{ids[name]}/{tab}"):
            failures.append(f"{result.describe()} at {where}")
    # and within one visit: the experiment already loaded (its run's page seen first), its name clicked
    run = c.search_runs([ids["bashgym-training"]], max_results=1)[0]
    with ui_check.Browser() as browser:
        browser.goto(f"{served.url}/#/experiments/{ids['bashgym-training']}/runs/{run.info.run_id}")
        assert not browser.wait_for([run.info.run_name, "Finished"], timeout=90)[1]
        browser.goto(f"{served.url}/#/experiments")
        assert not browser.wait_for(["Time created", "Last modified"], timeout=60, settle=0)[1]
        training_link = (
            f'a[href$="#/experiments/{ids["bashgym-training"]}"]'  # not the sidebar's of that name
        )
        assert browser.click_when_shown("bashgym-training", selector=training_link, timeout=60)
        text, missing = browser.wait_for(["Run Name", "matching run", run.info.run_name], timeout=60)
        browser.screenshot(settings.home / "screenshots" / "experiment-loaded-before.png")
        if missing or any(a in text for a in GENAI_OVERVIEW):
            failures.append(f"loaded before: missing {missing} at {browser.evaluate('location.hash')}")
    assert not failures, "experiments that do not open on their content:\n" + "\n".join(failures)


@pytest.mark.slow
def test_the_dagster_link_reaches_mlflow_on_the_port_make_mlflow_serves(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make mlflow MLFLOW_PORT=N`` (its command, on a free port that is not 5000), then ``sft_adapter``
    materialized by Dagster from a process that was told nothing: the asset's ``mlflow_run`` link points at that
    port, and the run's page opens there."""
    import dagster as dg

    from bashgym_assets.defs import datasets as dd
    from bashgym_assets.defs import training as tr
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.lake import Lake
    from bashgym_assets.testing import datasets as syn
    from bashgym_assets.testing.tiny_model import build_tiny_model

    ui_check.find_chromium()
    monkeypatch.delenv("BASHGYM_MLFLOW_UI_URL", raising=False)
    settings, port = served.settings, served.port
    monkeypatch.setenv("BASHGYM_HOME", str(settings.home))
    tiny = str(build_tiny_model(tmp_path / "tiny"))
    demo = syn.demo_inputs()
    Lake(settings).write("verified_trajectories", demo["trajectories"])
    Lake(settings).write("gated_scenarios", demo["scenarios"])
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    monkeypatch.setenv("BASHGYM_BASE_MODEL", tiny)
    with dg.instance_for_test() as instance:
        assert dg.materialize([dd.sft_dataset], instance=instance, resources=resources).success
        result = dg.materialize(
            [tr.base_model, tr.sft_adapter],
            instance=instance,
            resources=resources,
            run_config={"ops": {"sft_adapter": {"config": {"max_steps": 1, "max_length": 256}}}},
        )
        assert result.success
    meta = result.asset_materializations_for_node("sft_adapter")[0].metadata
    link = meta["mlflow_run"].value
    assert link.startswith(f"http://127.0.0.1:{port}/#/experiments/"), link
    with ui_check.LOOPBACK.open(served.url, timeout=30) as r:  # the UI answers at the link's address
        assert r.status == 200
    page = ui_check.Page("dagster-mlflow-link", link, [meta["run_name"].value, "loss", "Finished"])
    with ui_check.Browser() as browser:
        (shown,) = ui_check.check_pages(browser, [page], settings.home / "screenshots")
    assert shown.ok, shown.describe()


@pytest.mark.slow
def test_mlflow_starts_without_going_online(served: Served) -> None:
    """``make mlflow``'s server (``ui_check`` starts the same command in the same environment) behind a proxy that
    never answers: it is ready, and nothing in it tried to reach the network (litellm's online price list was
    fetched in every worker, retried), neither at its start nor serving the pages of the tests above."""
    time.sleep(max(0.0, served.ready_at + 8 - time.monotonic()))  # litellm fetches in the background once up
    log = served.log.read_text(errors="replace")
    group = subprocess.run(
        ["ps", "-o", "args=", "-g", str(served.proc.pid)], capture_output=True, text=True
    ).stdout
    assert served.hole.connections == [], f"MLflow went online:\n{log[-3000:]}"
    assert "model cost map" not in log
    assert "huey" not in group and "_job_runner" not in group, group  # no job runner beside it


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with ui_check.LOOPBACK.open(f"{url}/health", timeout=10) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        tail = log.read_text(errors="replace")[-3000:]
        assert proc.poll() is None, f"`make mlflow`'s command exited with {proc.returncode}:\n{tail}"
        assert time.monotonic() < deadline, f"mlflow not ready after {timeout:.0f}s:\n{tail}"
        time.sleep(1)
