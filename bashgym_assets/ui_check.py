"""Drive both UIs in a real headless browser and check what a user would look for.

``python -m bashgym_assets.ui_check`` starts ``dagster-webserver`` (both code locations of workspace.yaml) and
``mlflow server`` on loopback over the data folder, opens each page in headless Chromium (Debian's ``chromium``,
installed by ``make setup``), waits until the page shows the expected text (both UIs are single-page apps that
render after their API calls return), saves a PNG of each under ``$BASHGYM_HOME/screenshots/`` and reports every
page that does not show what it should. tests/test_ui_browser.py runs it on a freshly filled data folder.

The browser is driven through its own DevTools protocol over one websocket (``websockets``' sync client), not
Playwright: the checks need only "load a URL, wait for text, click a tab, take a screenshot", which is ~100 lines
of CDP, while Playwright is a large dependency whose browser download cannot run here anyway.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bashgym_assets.config import PROJECT_ROOT, Settings, get_settings, redact_uri

CLICKABLE = "button, a, [role=tab], [role=button]"  # what Browser.click_text looks for by default
# The heading of Dagster's first-visit "community" dialog; dagster.yaml turns it off (nux: enabled: false).
DAGSTER_NUX_HEADING = "Join the Dagster community"


class UICheckError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_chromium() -> str:
    for name in (get_settings().chromium, "chromium", "chromium-browser", "google-chrome"):
        if name and (path := shutil.which(name)):
            return path
    raise UICheckError("no chromium binary: install Debian's 'chromium' package (make setup does)")


#: Requests to the servers started here, on loopback: never through a proxy of the environment (HTTP(S)_PROXY
#: without 127.0.0.1 in NO_PROXY sent them there, and a proxy that does not answer made every server "not ready")
LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with LOOPBACK.open(url, timeout=timeout) as r:
            return 200 <= r.status < 400
    except (urllib.error.URLError, OSError):
        return False


# --- the servers ---------------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    url: str
    proc: subprocess.Popen
    log: Path
    ready: Callable[[], None] = lambda: None  # blocks until the server answers (raises when it cannot)

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise UICheckError(
                f"{self.name} exited with {self.proc.returncode}; last lines of {self.log}:\n{self.tail()}"
            )


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


@contextmanager
def _process(name: str, cmd: Sequence[str], url: str, log: Path, env: dict[str, str]) -> Iterator[Server]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=PROJECT_ROOT,
            start_new_session=True,
        )
    try:
        yield Server(name, url, proc, log)
    finally:
        # the whole process group: dagster-webserver's code-location servers and mlflow's workers too
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        with suppress(ProcessLookupError, PermissionError):  # children left behind by a leader that exited
            os.killpg(proc.pid, signal.SIGKILL)


def _graphql(
    url: str, query: str, variables: dict[str, Any] | None = None, timeout: float = 10
) -> dict[str, Any]:
    """One request to the Dagster UI's GraphQL API (what its pages call)."""
    body = {"query": query, **({"variables": variables} if variables else {})}
    req = urllib.request.Request(
        f"{url}/graphql", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with LOOPBACK.open(req, timeout=timeout) as r:
        return json.loads(r.read())


LOCATIONS_QUERY = (
    "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
    "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
)


@contextmanager
def dagster_webserver(
    settings: Settings, port: int | None = None, timeout: float = 240.0, wait: bool = True
) -> Iterator[Server]:
    """``dagster-webserver -w workspace.yaml`` over the data folder's instance; ready when both code locations
    have loaded (raises with the location's error when one fails to load). ``wait=False``: yield at once, call
    ``srv.ready()`` later (start the server, then fill the data folder while it loads)."""
    from bashgym_assets.instance import ensure_dagster_home

    home = ensure_dagster_home(settings)
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DAGSTER_HOME": str(home), "BASHGYM_HOME": str(settings.home)}
    cmd = [
        _bin("dagster-webserver"),
        "-w",
        str(PROJECT_ROOT / "workspace.yaml"),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]
    with _process("dagster-webserver", cmd, url, settings.home / "logs" / "ui-check-dagster.log", env) as srv:

        def ready() -> None:
            deadline = time.monotonic() + timeout
            state: Any = None
            while time.monotonic() < deadline:
                srv.alive()
                if _http_ok(f"{url}/server_info"):
                    try:
                        state = _graphql(url, LOCATIONS_QUERY)["data"]["workspaceOrError"]["locationEntries"]
                    except (urllib.error.URLError, OSError, KeyError, TypeError, ValueError):
                        state = None
                    if state and all(e["loadStatus"] == "LOADED" for e in state):
                        errors = [e for e in state if e["locationOrLoadError"]["__typename"] == "PythonError"]
                        if errors:
                            raise UICheckError(f"code location failed to load: {errors}")
                        return
                time.sleep(1)
            raise UICheckError(
                f"dagster-webserver not ready after {timeout:.0f}s (locations: {state}); "
                f"last lines of {srv.log}:\n{srv.tail()}"
            )

        srv.ready = ready
        if wait:
            ready()
        yield srv


@contextmanager
def dagster_daemon(
    settings: Settings, dagster_url: str | None = None, timeout: float = 240.0
) -> Iterator[Server]:
    """``dagster-daemon run -w workspace.yaml`` over the data folder's instance (what ``make ui``'s ``dagster dev``
    runs beside the webserver): it dequeues the runs the UI launches (the run queue of dagster.yaml), and runs
    the sensors and schedules that are on. With ``dagster_url``, ready when that webserver reports the run queue's
    daemon healthy."""
    from bashgym_assets.instance import ensure_dagster_home

    home = ensure_dagster_home(settings)
    env = {**os.environ, "DAGSTER_HOME": str(home), "BASHGYM_HOME": str(settings.home)}
    cmd = [_bin("dagster-daemon"), "run", "-w", str(PROJECT_ROOT / "workspace.yaml")]
    with _process(
        "dagster-daemon", cmd, "", settings.home / "logs" / "ui-check-dagster-daemon.log", env
    ) as srv:
        if dagster_url:
            deadline = time.monotonic() + timeout
            query = (
                '{ instance { daemonHealth { daemonStatus(daemonType: "QUEUED_RUN_COORDINATOR") '
                "{ healthy } } } }"
            )
            while not _graphql(dagster_url, query)["data"]["instance"]["daemonHealth"]["daemonStatus"][
                "healthy"
            ]:
                srv.alive()
                if time.monotonic() > deadline:
                    raise UICheckError(
                        f"dagster-daemon not healthy after {timeout:.0f}s; last lines of {srv.log}:\n"
                        f"{srv.tail()}"
                    )
                time.sleep(1)
        yield srv


SENSORS_QUERY = (
    "{ workspaceOrError { ... on Workspace { locationEntries { locationOrLoadError { ... on "
    "RepositoryLocation { repositories { sensors { name sensorState { id selectorId status } } } } } } } }"
    " }"
)
STOP_SENSOR = (
    "mutation($o: String, $s: String) { stopSensor(jobOriginId: $o, jobSelectorId: $s) { __typename "
    "... on StopSensorMutationResult { instigationState { status } } ... on PythonError { message } } }"
)


def stop_sensors(dagster_url: str, names: Sequence[str]) -> list[str]:
    """Turn sensors off through the UI's API (its switch on the Automation page); returns the names stopped.
    A check that launches runs by hand stops the sensors that would launch runs of their own meanwhile."""
    entries = _graphql(dagster_url, SENSORS_QUERY)["data"]["workspaceOrError"]["locationEntries"]
    sensors = [
        s
        for e in entries
        for r in (e["locationOrLoadError"] or {}).get("repositories", [])
        for s in r["sensors"]
        if s["name"] in names
    ]
    stopped = []
    for sensor in sensors:
        state = sensor["sensorState"]
        out = _graphql(dagster_url, STOP_SENSOR, {"o": state["id"], "s": state["selectorId"]}, 30)["data"][
            "stopSensor"
        ]
        if out.get("instigationState", {}).get("status") != "STOPPED":
            raise UICheckError(f"could not stop sensor {sensor['name']}: {out}")
        stopped.append(sensor["name"])
    if sorted(stopped) != sorted(names):
        raise UICheckError(f"sensors {sorted(set(names) - set(stopped))} not found")
    return stopped


@contextmanager
def mlflow_server(
    settings: Settings, port: int | None = None, timeout: float = 240.0, wait: bool = True
) -> Iterator[Server]:
    """MLflow's UI as ``make mlflow`` serves it (``mlflow_ui.server_command`` and ``server_env``: each experiment
    opening on its kind's page, litellm's bundled price list instead of an online fetch) on the installation's
    store: the data folder's SQLite file, or the database ``BASHGYM_MLFLOW_TRACKING_URI`` names. On a free port
    unless given; it records no address in the data folder (the links keep pointing at ``make mlflow``'s). The
    store is prepared first, as ``make mlflow`` prepares it (``mlflow_ui.prepare``)."""
    from bashgym_assets import mlflow_ui

    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        cmd = mlflow_ui.server_command(settings, port)
    except (ValueError, RuntimeError) as exc:
        raise UICheckError(str(exc)) from None
    mlflow_ui.prepare(settings)
    with _process(
        "mlflow", cmd, url, settings.home / "logs" / "ui-check-mlflow.log", mlflow_ui.server_env()
    ) as srv:

        def ready() -> None:
            deadline = time.monotonic() + timeout
            while not _http_ok(f"{url}/health", timeout=10):  # a loaded machine answers late, not never
                srv.alive()
                if time.monotonic() > deadline:
                    raise UICheckError(
                        f"mlflow not ready after {timeout:.0f}s; last lines of {srv.log}:\n{srv.tail()}"
                    )
                time.sleep(1)

        srv.ready = ready
        if wait:
            ready()
        yield srv


# --- the browser ---------------------------------------------------------------------------------------------


class Browser:
    """Headless Chromium driven over the DevTools protocol: one page, navigate / wait for text / click /
    screenshot."""

    def __init__(self, width: int = 1600, height: int = 1000, binary: str | None = None) -> None:
        from websockets.sync.client import connect

        self._profile = tempfile.mkdtemp(prefix="bashgym-chromium-")
        cmd = [
            binary or find_chromium(),
            "--headless=new",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--user-data-dir={self._profile}",
            f"--window-size={width},{height}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--mute-audio",
            "about:blank",
        ]
        if os.geteuid() == 0:  # Chromium refuses to run as root with its sandbox
            cmd.insert(1, "--no-sandbox")
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        ws_url, seen = None, []
        deadline = time.monotonic() + 60
        assert self.proc.stderr is not None
        while ws_url is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode(errors="replace")
            if not line and self.proc.poll() is not None:
                break
            seen.append(line)
            if "DevTools listening on " in line:
                ws_url = line.split("DevTools listening on ", 1)[1].strip()
        if ws_url is None:
            self.close()
            raise UICheckError("chromium did not start:\n" + "".join(seen[-20:]))
        # keep draining stderr so a chatty browser never blocks on a full pipe
        import threading

        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()  # type: ignore
        port = ws_url.split("//", 1)[1].split("/", 1)[0]
        targets = json.loads(LOOPBACK.open(f"http://{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        # entered by hand: the connection lives as long as this object (closed in close())
        self._ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30).__enter__()
        self._id = 0
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def send(self, method: str, timeout: float = 60.0, **params: Any) -> dict[str, Any]:
        self._id += 1
        my = self._id
        self._ws.send(json.dumps({"id": my, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self._ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == my:
                if "error" in msg:
                    raise UICheckError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def evaluate(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise UICheckError(f"javascript error: {res['exceptionDetails']}")
        return res.get("result", {}).get("value")

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def text(self) -> str:
        """What the page shows: the visible text, plus link targets (``href=...``), images (``img=...``: a plot
        is something a user sees too) and on/off switches (``running: <row>``/``stopped: <row>``)."""
        return (
            self.evaluate(
                "(() => { const b = document.body; if (!b) return '';"
                " const links = [...document.querySelectorAll('a[href]')].map(a => 'href=' + a.href);"
                " const imgs = [...document.querySelectorAll('img[src]')].map(i => 'img=' + i.src.slice(0, 40)"
                "   + ' alt=' + (i.alt || '') + ' w=' + i.naturalWidth);"
                " const switches = [...document.querySelectorAll('label[class*=formatSwitch] input[type=checkbox]')]"
                "   .map(c => { let e = c.parentElement;"
                "     while (e && !(e.innerText || '').trim()) e = e.parentElement;"
                "     return (c.checked ? 'running: ' : 'stopped: ') + (e ? e.innerText.trim().split('\\n')[0] : ''); });"
                " return [b.innerText, ...links, ...imgs, ...switches].join('\\n')"
                "   .replace(/[\\u00a0\\u202f]/g, ' '); })()"
            )
            or ""
        )

    def wait_for(
        self, expect: Sequence[str], timeout: float = 60.0, settle: float = 1.0, gone: Sequence[str] = ()
    ) -> tuple[str, list[str]]:
        """Poll until every expected string is in the page and every ``gone`` string (a loading indicator) is
        not; returns the last text and what is still missing (a ``gone`` one still shown as ``(still: ...)``)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            missing = [e for e in expect if e not in text] + [f"(still: {g})" for g in gone if g in text]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if not missing and settle:
            time.sleep(settle)  # let late requests finish drawing before a screenshot / an absence check
            text = self.text()
        return text, missing

    def click_text(self, label: str, selector: str = CLICKABLE) -> bool:
        """Click the first visible element matching ``selector`` whose text is ``label``."""
        return bool(
            self.evaluate(
                f"(() => {{ const els = [...document.querySelectorAll({json.dumps(selector)})]"
                f"  .filter(e => e.innerText && e.innerText.trim() === {json.dumps(label)} && e.offsetParent !== null);"
                " if (!els.length) return false; els[0].click(); return true; })()"
            )
        )

    def click_when_shown(self, label: str, selector: str = CLICKABLE, timeout: float = 60.0) -> bool:
        """Click ``label`` once an element of ``selector`` shows it. The text alone is not enough: it can be on the
        page before the element is (a breadcrumb of the page before, a list still drawing), so a click that finds no
        element is tried again until ``timeout`` (CI saw the one-shot click miss a list that drew a moment later)."""
        deadline = time.monotonic() + timeout
        while not self.click_text(label, selector=selector):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)
        return True

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with suppress(Exception):  # closing a browser that is gone
            self._ws.close()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- the pages and what each must show -----------------------------------------------------------------------


@dataclass
class Page:
    name: str  # also the screenshot's file name
    url: str
    expect: list[str]
    absent: list[str] = field(default_factory=list)
    click: list[str] = field(default_factory=list)  # tabs/buttons to click (in order) before checking
    gone: list[str] = field(default_factory=list)  # loading indicators to wait out
    settle: float = 1.0  # seconds to let late requests draw before the screenshot
    timeout: float = 60.0
    # texts that say the page itself has drawn, before any click: an address that differs from the one before only
    # after the '#' keeps the single-page app, which shows the previous page a moment longer
    ready: list[str] = field(default_factory=list)
    click_selector: str = CLICKABLE  # which elements ``click`` labels name


@dataclass
class PageResult:
    page: Page
    missing: list[str]
    present_but_absent: list[str]
    screenshot: Path
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.missing and not self.present_but_absent

    def describe(self) -> str:
        bits = []
        if self.missing:
            bits.append(f"missing {self.missing}")
        if self.present_but_absent:
            bits.append(f"shows {self.present_but_absent} (should not)")
        return f"page '{self.page.name}' ({self.page.url}): {'; '.join(bits) or 'ok'} [screenshot {self.screenshot}]"


def check_pages(browser: Browser, pages: Sequence[Page], out_dir: Path) -> list[PageResult]:
    results = []
    for page in pages:
        t0 = time.monotonic()
        browser.goto(page.url)
        missing: list[str] = []
        if page.ready:
            _, missing = browser.wait_for(page.ready, timeout=page.timeout, settle=0)
        for label in page.click if not missing else ():
            if not browser.click_when_shown(label, selector=page.click_selector, timeout=page.timeout):
                missing = [f"(clickable '{label}')"]
                break
        if not missing:
            text, missing = browser.wait_for(
                page.expect, timeout=page.timeout, gone=page.gone, settle=page.settle
            )
        else:
            text = browser.text()
        shown = [a for a in page.absent if a in text]
        shot = browser.screenshot(out_dir / f"{page.name}.png")
        results.append(PageResult(page, missing, shown, shot, time.monotonic() - t0))
    return results


# What the project defines (tests/test_ui_browser.py keeps these lists honest against the definitions).
CODE_LOCATIONS = ("bashgym_cpu", "bashgym_gpu")
ASSET_GROUPS = ("ingest", "privacy", "quality", "datasets", "scenarios", "sandbox", "training", "evaluation")
SENSORS = ("trace_files_sensor", "cpu_automation", "gpu_automation", "dead_run_reaper")
SCHEDULES = ("nightly_retraining",)
PARTITIONED_ASSET, PARTITIONED_ASSET_CHECK = "redacted_sessions", "no_secrets_left"
ADAPTER_ASSET = "sft_adapter"
EVALUATION_ASSET, PROMOTION_CHECK = "benchmark_results", "promotion_decision"
EXPORT_ASSET, ROUND_TRIP_CHECK = "exported_model", "gguf_round_trip"
# The home timeline: runs of a code location's asset job are shown under this label; a run without an origin (a job
# no location defines) is left off, and with no run shown it says EMPTY_TIMELINE.
HIDDEN_ASSET_JOB_LABEL, EMPTY_TIMELINE = "Jobless asset materializations", "No runs or scheduled ticks"
# An experiment opened on MLflow's GenAI overview instead of its own page (issue 40): a fresh browser profile showed
# every experiment so, training and evaluation included
GENAI_OVERVIEW = ["No data available for the selected time range", "Token Usage"]
# What an experiment's own page shows: the runs table, the traces table
RUNS_TABLE, TRACES_TABLE = ["Run Name", "Created", "Duration"], ["Input", "Output", "State"]
EMPTY_TRACES = "Start tracing your LLM application"
EXPERIMENT_LIST = [
    "Time created",
    "Last modified",
]  # MLflow's experiment list has drawn (the names are links)


def experiment_page(client: Any, experiment: Any, mlflow_url: str) -> Page:
    """Clicking an experiment's name in MLflow's list opens the page of its kind (``mlflow_store.EXPERIMENT_KINDS``,
    the ``mlflow.experimentKind`` tag that ``mlflow_ui`` serves the UI to follow), never the GenAI overview: a
    RUNS experiment its runs table with its newest run, a TRACES one its traces table."""
    from bashgym_assets.mlflow_store import EXPERIMENT_KIND_TAG, TRACES

    name = f"mlflow-experiment-{experiment.name}"
    if (experiment.tags or {}).get(EXPERIMENT_KIND_TAG) == TRACES:
        traces = client.search_traces(
            locations=[experiment.experiment_id], max_results=1, include_spans=False
        )
        expect = ["Traces", *TRACES_TABLE] if traces else [EMPTY_TRACES]
    else:
        runs = client.search_runs(
            [experiment.experiment_id], max_results=1, order_by=["attributes.start_time DESC"]
        )
        expect = (
            ["Runs", *RUNS_TABLE, "matching run", *(r.info.run_name for r in runs)]
            if runs
            else ["No runs logged"]
        )
    return Page(
        name,
        f"{mlflow_url}/#/experiments",
        expect,
        absent=GENAI_OVERVIEW,
        click=[experiment.name],
        ready=EXPERIMENT_LIST,
        # its link in the list (the sidebar keeps a link of the same name back to the list after a visit)
        click_selector=f'a[href$="#/experiments/{experiment.experiment_id}"]',
    )


def default_pages(
    settings: Settings,
    dagster_url: str,
    mlflow_url: str,
    model: str | None = None,
    partitions: Sequence[str] | None = None,
) -> list[Page]:
    """The pages a user opens, in order, and the text each must show.

    ``partitions``: the repository partitions the data folder has (default: the instance's ``repos`` dynamic
    partitions). Checked on the state the pipeline leaves, whatever it is: the adapter page must link to the
    MLflow run of ``sft_adapter``'s own newest registered version (a DPO or GRPO adapter trained after it is a newer
    version of the same model, not this asset's), and that run's page is opened through the link's path. The
    model page must show the ``champion`` alias when a version has it, and otherwise show none (the candidate
    alias only): no champion is the normal state after a demo whose candidates did not beat the base. When the
    project's MLflow experiments, clicked in MLflow's experiment list, must each open on its runs table (traces for
    the rollouts' and the routing's), never on the GenAI overview; the adapter page's MLflow link must start with
    the configured MLflow UI address (``Settings.mlflow_ui_url``). When the
    evaluation ran, its promotion check must say what it decided (kept the incumbent, or promoted) without
    failing, and the export's round trip must show as skipped when it did not run (never "Passed"). When runs
    started in the last hours, the home timeline must show them under their code locations (a run of a job no
    location defines is left off it).
    """
    from bashgym_assets.evaluation.promotion import CANDIDATE, CHAMPION, alias_version
    from bashgym_assets.mlflow_store import EXPERIMENT_KINDS
    from bashgym_assets.training import registry

    model = model or registry.REGISTERED_MODEL
    if partitions is None:
        import dagster as dg

        from bashgym_assets.instance import ensure_dagster_home

        ensure_dagster_home(settings)
        with dg.DagsterInstance.get() as instance:
            partitions = instance.get_dynamic_partitions("repos")
    c = registry.client(settings)
    versions = sorted(c.search_model_versions(f"name='{model}'"), key=lambda v: int(v.version))
    if not versions:
        raise UICheckError(
            f"no version of the registered model {model!r} in {redact_uri(settings.mlflow_tracking_uri)}"
        )
    own = [v for v in versions if (v.tags or {}).get("dagster_asset") == ADAPTER_ASSET]
    if not own:
        raise UICheckError(f"no version of {model!r} was registered by {ADAPTER_ASSET} (tag dagster_asset)")
    adapter = own[-1]
    run = c.get_run(adapter.run_id)
    run_path = f"/#/experiments/{run.info.experiment_id}/runs/{adapter.run_id}"
    champion = alias_version(model, CHAMPION, settings)
    if champion is not None:
        aliases, no_aliases = [f"@ {CHAMPION}"], []
    else:  # says so: only the candidate alias, no champion anywhere on the page
        aliases, no_aliases = [f"@ {CANDIDATE}"], [f"@ {CHAMPION}"]
    nux = [DAGSTER_NUX_HEADING]
    d, m = dagster_url, mlflow_url
    pages = [
        Page(
            "dagster-asset-graph",
            f"{d}/asset-groups",
            ["Global asset lineage", *ASSET_GROUPS],
            absent=nux,
            settle=5.0,
        ),
        Page(
            "dagster-code-locations",
            f"{d}/deployment/locations",
            [
                "2 code locations",
                *CODE_LOCATIONS,
                "bashgym_assets.definitions",
                "bashgym_assets.gpu_definitions",
                "Loaded",
            ],
            absent=nux + ["Failed", "Error"],
        ),
        Page(
            f"dagster-{PARTITIONED_ASSET}-partitions",
            f"{d}/assets/{PARTITIONED_ASSET}?view=partitions",
            [PARTITIONED_ASSET, "Partitions", f"{len(partitions)} Partitions", *partitions],
            absent=nux,
        ),
        Page(
            f"dagster-{PARTITIONED_ASSET}-checks",
            f"{d}/assets/{PARTITIONED_ASSET}?view=checks",
            ["Checks (1)", PARTITIONED_ASSET_CHECK, "This is a blocking asset check", "Passed"],
            absent=nux,
        ),
        Page(
            "dagster-automation",
            f"{d}/automation",
            [*CODE_LOCATIONS, *(f"running: {n}" for n in SENSORS + SCHEDULES), "Scheduled At 02:00 AM UTC"],
            absent=nux + [f"stopped: {n}" for n in SENSORS + SCHEDULES],
        ),
        Page(
            f"dagster-{ADAPTER_ASSET}",
            f"{d}/assets/{ADAPTER_ASSET}",
            [
                ADAPTER_ASSET,
                "bashgym_gpu",
                "Latest materialization",
                "mlflow_run",
                f"href={registry.ui_base_url(settings.mlflow_tracking_uri, settings)}{run_path}",
                "model_uri",
                f"models:/{model}/{adapter.version}",
                "final_loss",
                "loss_curve",
                # the loss plot: the markdown entry opened, an inline PNG
                "img=data:image/png;base64",
                "alt=loss curve",
            ],
            click=["[Show Markdown]"],
            absent=nux,
        ),
        Page(
            "mlflow-model",
            f"{m}/#/models/{model}",
            [
                model,
                "Versions",
                *(f"Version {v.version}" for v in versions),
                *aliases,
                "kind",
                "dagster_run_id",
                "dagster_asset",
                "dataset_version",
            ],
            absent=no_aliases,
            timeout=90,
        ),
        Page(
            "mlflow-adapter-run",
            f"{m}{run_path}",
            [run.info.run_name, "loss", "dagster_run_id", "dataset_version", "Finished", model],
        ),
        # each of the project's experiments, clicked in MLflow's list: its runs (or traces), not the GenAI overview
        *(
            experiment_page(c, e, m)
            for e in sorted(c.search_experiments(), key=lambda e: e.name)
            if e.name in EXPERIMENT_KINDS
        ),
    ]
    recent = _recent_run_rows(settings)
    if (
        recent is not None
    ):  # runs in the home timeline's window (12 hours): each on it, under its code location
        pages.insert(
            1,
            Page(
                "dagster-timeline",
                f"{d}/",
                ["Timeline", *sorted(recent)],
                absent=nux + [EMPTY_TIMELINE],
                settle=3.0,
            ),
        )
    outcome = _promotion_outcome(settings)
    if (
        outcome is not None
    ):  # the evaluation ran: its check shows what it decided, and does not fail for a "keep"
        pages.append(
            Page(
                f"dagster-{EVALUATION_ASSET}-checks",
                f"{d}/assets/{EVALUATION_ASSET}?view=checks",
                [PROMOTION_CHECK, "Latest execution", "Passed", *([outcome] if outcome else [])],
                absent=nux,
            )
        )
    export = _latest_metadata(settings, EXPORT_ASSET)
    if export is not None:  # a round trip that compared nothing shows skipped, never "Passed"
        skipped = str(export.get("round_trip_check", "")).startswith("skipped")
        pages.append(
            Page(
                f"dagster-{EXPORT_ASSET}-checks",
                f"{d}/assets/{EXPORT_ASSET}?view=checks",
                [
                    ROUND_TRIP_CHECK,
                    "Latest execution",
                    "Skipped" if skipped else "Passed" if export.get("verified") else "Failed",
                ],
                absent=nux + (["Passed"] if skipped else []),
            )
        )
    return pages


def _latest_metadata(settings: Settings, asset: str) -> dict[str, Any] | None:
    """The metadata values of the asset's latest materialization; None when it has none."""
    import dagster as dg

    from bashgym_assets.instance import ensure_dagster_home

    ensure_dagster_home(settings)
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    if event is None or event.asset_materialization is None:
        return None
    return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}


def _recent_run_rows(settings: Settings, hours: float = 11.0) -> set[str] | None:
    """What the home timeline names for the runs created in the last ``hours``: their code locations and jobs (an
    asset job under ``HIDDEN_ASSET_JOB_LABEL``); None when no run was created. A run without an origin names
    nothing: the timeline leaves it off."""
    import dagster as dg

    from bashgym_assets.instance import ensure_dagster_home

    ensure_dagster_home(settings)
    since = time.time() - hours * 3600
    with dg.DagsterInstance.get() as instance:
        records = instance.get_run_records(
            dg.RunsFilter(created_after=datetime.fromtimestamp(since, UTC)), limit=500
        )
    if not records:
        return None
    rows: set[str] = set()
    for run in (r.dagster_run for r in records):
        if run.remote_job_origin:
            rows |= {
                run.remote_job_origin.location_name,
                HIDDEN_ASSET_JOB_LABEL if run.job_name.startswith("__ASSET_JOB") else run.job_name,
            }
    return rows


def _promotion_outcome(settings: Settings) -> str | None:
    """The outcome the latest ``promotion_decision`` recorded ('' without one); None when it never ran."""
    import dagster as dg

    from bashgym_assets.instance import ensure_dagster_home

    ensure_dagster_home(settings)
    key = dg.AssetCheckKey(dg.AssetKey(EVALUATION_ASSET), PROMOTION_CHECK)
    with dg.DagsterInstance.get() as instance:
        record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key)
    if record is None or record.event is None or record.event.dagster_event is None:
        return None
    evaluation = record.event.dagster_event.event_specific_data
    outcome = getattr(evaluation, "metadata", {}).get("outcome")
    return str(outcome.value) if outcome is not None else ""


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, help="data folder (default: BASHGYM_HOME)")
    ap.add_argument("--model", default=None, help="registered model name (default: bashgym-operator)")
    args = ap.parse_args(argv)
    settings = Settings(home=args.home) if args.home else get_settings()
    out = settings.home / "screenshots"
    with dagster_webserver(settings) as dag, mlflow_server(settings) as ml, Browser() as browser:
        results = check_pages(browser, default_pages(settings, dag.url, ml.url, model=args.model), out)
    for r in results:
        print(("ok   " if r.ok else "FAIL ") + f"{r.seconds:5.1f}s " + r.describe())
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
