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
from pathlib import Path
from typing import Any

from bashgym_assets.config import PROJECT_ROOT, Settings, get_settings, redact_uri

# The heading of Dagster's first-visit "community" dialog; dagster.yaml turns it off (nux: enabled: false).
DAGSTER_NUX_HEADING = "Join the Dagster community"


class UICheckError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_chromium() -> str:
    for name in (os.environ.get("BASHGYM_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and (path := shutil.which(name)):
            return path
    raise UICheckError("no chromium binary: install Debian's 'chromium' package (make setup does)")


def _http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
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
            raise UICheckError(f"{self.name} exited with {self.proc.returncode}; last lines of {self.log}:\n"
                               f"{self.tail()}")


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


@contextmanager
def _process(name: str, cmd: Sequence[str], url: str, log: Path, env: dict[str, str]) -> Iterator[Server]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=PROJECT_ROOT, start_new_session=True)
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


def _graphql(url: str, query: str) -> dict[str, Any]:
    req = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


LOCATIONS_QUERY = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus " \
                  "locationOrLoadError { __typename ... on PythonError { message } } } } } }"


@contextmanager
def dagster_webserver(settings: Settings, port: int | None = None, timeout: float = 240.0,
                      wait: bool = True) -> Iterator[Server]:
    """``dagster-webserver -w workspace.yaml`` over the data folder's instance; ready when both code locations
    have loaded (raises with the location's error when one fails to load). ``wait=False``: yield at once, call
    ``srv.ready()`` later (start the server, then fill the data folder while it loads)."""
    from bashgym_assets.instance import ensure_dagster_home

    home = ensure_dagster_home(settings)
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DAGSTER_HOME": str(home), "BASHGYM_HOME": str(settings.home)}
    cmd = [_bin("dagster-webserver"), "-w", str(PROJECT_ROOT / "workspace.yaml"), "-h", "127.0.0.1",
           "-p", str(port)]
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
            raise UICheckError(f"dagster-webserver not ready after {timeout:.0f}s (locations: {state}); "
                               f"last lines of {srv.log}:\n{srv.tail()}")

        srv.ready = ready
        if wait:
            ready()
        yield srv


@contextmanager
def mlflow_server(settings: Settings, port: int | None = None, timeout: float = 120.0,
                  wait: bool = True) -> Iterator[Server]:
    """``mlflow server`` on the installation's store (what ``make mlflow`` runs): the data folder's SQLite file, or
    the database ``BASHGYM_MLFLOW_TRACKING_URI`` names."""
    if settings.mlflow_tracks_on_server:
        raise UICheckError(f"BASHGYM_MLFLOW_TRACKING_URI is already a tracking server "
                           f"({redact_uri(settings.mlflow_tracking_uri)}): open that one")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [_bin("mlflow"), "server", "--backend-store-uri", settings.mlflow_tracking_uri,
           "--default-artifact-root", settings.mlflow_artifact_uri, "-h", "127.0.0.1", "-p", str(port),
           "--workers", "1"]
    with _process("mlflow", cmd, url, settings.home / "logs" / "ui-check-mlflow.log", dict(os.environ)) as srv:
        def ready() -> None:
            deadline = time.monotonic() + timeout
            while not _http_ok(f"{url}/health"):
                srv.alive()
                if time.monotonic() > deadline:
                    raise UICheckError(f"mlflow not ready after {timeout:.0f}s; last lines of {srv.log}:\n"
                                       f"{srv.tail()}")
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
        cmd = [binary or find_chromium(), "--headless=new", "--remote-debugging-port=0",
               "--remote-allow-origins=*", f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
               "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio",
               "about:blank"]
        if os.geteuid() == 0:  # Chromium refuses to run as root with its sandbox
            cmd.insert(1, "--no-sandbox")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
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
        targets = json.loads(urllib.request.urlopen(f"http://{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        # entered by hand: the connection lives as long as this object (closed in close())
        self._ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30).__enter__()
        self._id = 0
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

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
        return self.evaluate(
            "(() => { const b = document.body; if (!b) return '';"
            " const links = [...document.querySelectorAll('a[href]')].map(a => 'href=' + a.href);"
            " const imgs = [...document.querySelectorAll('img[src]')].map(i => 'img=' + i.src.slice(0, 40)"
            "   + ' alt=' + (i.alt || '') + ' w=' + i.naturalWidth);"
            " const switches = [...document.querySelectorAll('label[class*=formatSwitch] input[type=checkbox]')]"
            "   .map(c => { let e = c.parentElement;"
            "     while (e && !(e.innerText || '').trim()) e = e.parentElement;"
            "     return (c.checked ? 'running: ' : 'stopped: ') + (e ? e.innerText.trim().split('\\n')[0] : ''); });"
            " return [b.innerText, ...links, ...imgs, ...switches].join('\\n')"
            "   .replace(/[\\u00a0\\u202f]/g, ' '); })()") or ""

    def wait_for(self, expect: Sequence[str], timeout: float = 60.0, settle: float = 1.0,
                 gone: Sequence[str] = ()) -> tuple[str, list[str]]:
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

    def click_text(self, label: str, selector: str = "button, a, [role=tab], [role=button]") -> bool:
        """Click the first visible element matching ``selector`` whose text is ``label``."""
        return bool(self.evaluate(
            f"(() => {{ const els = [...document.querySelectorAll({json.dumps(selector)})]"
            f"  .filter(e => e.innerText && e.innerText.trim() === {json.dumps(label)} && e.offsetParent !== null);"
            " if (!els.length) return false; els[0].click(); return true; })()"))

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
    name: str                      # also the screenshot's file name
    url: str
    expect: list[str]
    absent: list[str] = field(default_factory=list)
    click: list[str] = field(default_factory=list)    # tabs/buttons to click (in order) before checking
    gone: list[str] = field(default_factory=list)     # loading indicators to wait out
    settle: float = 1.0                               # seconds to let late requests draw before the screenshot
    timeout: float = 60.0


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
        for label in page.click:
            _, missing = browser.wait_for([label], timeout=page.timeout, settle=0)
            if missing or not browser.click_text(label):
                missing = [f"(clickable '{label}')"]
                break
        if not missing:
            text, missing = browser.wait_for(page.expect, timeout=page.timeout, gone=page.gone, settle=page.settle)
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
# The address asset metadata links to (RegisteredAdapter.run_link: the `make mlflow` default)
MLFLOW_LINK_BASE = "http://127.0.0.1:5000"


def default_pages(settings: Settings, dagster_url: str, mlflow_url: str, model: str | None = None,
                  partitions: Sequence[str] | None = None) -> list[Page]:
    """The pages a user opens, in order, and the text each must show.

    ``partitions``: the repository partitions the data folder has (default: the instance's ``repos`` dynamic
    partitions). The registered model must have a ``champion``; the adapter page must link to the MLflow run of
    the model's newest version (the latest adapter), and that run's page is opened through the link's path.
    """
    from bashgym_assets.evaluation.promotion import CHAMPION
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
        raise UICheckError(f"no version of the registered model {model!r} in {redact_uri(settings.mlflow_tracking_uri)}")
    newest = versions[-1]
    run = c.get_run(newest.run_id)
    run_path = f"/#/experiments/{run.info.experiment_id}/runs/{newest.run_id}"
    nux = [DAGSTER_NUX_HEADING]
    d, m = dagster_url, mlflow_url
    return [
        Page("dagster-asset-graph", f"{d}/asset-groups",
             ["Global asset lineage", *ASSET_GROUPS], absent=nux, settle=5.0),
        Page("dagster-code-locations", f"{d}/deployment/locations",
             ["2 code locations", *CODE_LOCATIONS, "bashgym_assets.definitions", "bashgym_assets.gpu_definitions",
              "Loaded"], absent=nux + ["Failed", "Error"]),
        Page(f"dagster-{PARTITIONED_ASSET}-partitions", f"{d}/assets/{PARTITIONED_ASSET}?view=partitions",
             [PARTITIONED_ASSET, "Partitions", f"{len(partitions)} Partitions", *partitions], absent=nux),
        Page(f"dagster-{PARTITIONED_ASSET}-checks", f"{d}/assets/{PARTITIONED_ASSET}?view=checks",
             ["Checks (1)", PARTITIONED_ASSET_CHECK, "This is a blocking asset check", "Passed"], absent=nux),
        Page("dagster-automation", f"{d}/automation",
             [*CODE_LOCATIONS, *(f"running: {n}" for n in SENSORS + SCHEDULES), "Scheduled At 02:00 AM UTC"],
             absent=nux + [f"stopped: {n}" for n in SENSORS + SCHEDULES]),
        Page(f"dagster-{ADAPTER_ASSET}", f"{d}/assets/{ADAPTER_ASSET}",
             [ADAPTER_ASSET, "bashgym_gpu", "Latest materialization", "mlflow_run",
              f"href={MLFLOW_LINK_BASE}{run_path}",
              "model_uri", f"models:/{model}/{newest.version}", "final_loss", "loss_curve",
              # the loss plot: the markdown entry opened, an inline PNG
              "img=data:image/png;base64", "alt=loss curve"],
             click=["[Show Markdown]"], absent=nux),
        Page("mlflow-model", f"{m}/#/models/{model}",
             [model, "Versions", *(f"Version {v.version}" for v in versions), f"@ {CHAMPION}",
              "kind", "dagster_run_id", "dagster_asset", "dataset_version"], timeout=90),
        Page("mlflow-adapter-run", f"{m}{run_path}",
             [run.info.run_name, "loss", "dagster_run_id", "dataset_version", "Finished", model]),
    ]


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
