"""The MLflow UI over the data folder's store: what ``make mlflow`` serves, and how ``ui_check`` starts it (issue 40).

``python -m bashgym_assets.mlflow_ui [--port N]`` (``make mlflow``, ``MLFLOW_PORT=N``) runs ``mlflow server`` on the
installation's store with three things added:

- **Each experiment opens on its content.** MLflow 3.17's UI does not read an experiment's ``mlflow.experimentKind``
  tag to pick its first page (its workflow-type switch is always on): the page follows one browser-wide choice,
  ``?workflowType=`` in the address, else ``mlflow.workflowType_v1`` in the browser's local storage, else
  ``genai``. So a fresh browser profile opened every experiment, training and evaluation included, on an empty
  GenAI overview ("Traces 0 / No data") beside the assistant panel, and nothing stored in MLflow could change
  that. The server started here is MLflow's own (``mlflow server --app-name bashgym``: the ``mlflow.app`` entry
  point in pyproject.toml, ``create_app``) with one script added to its page (``EXPERIMENT_KIND_SCRIPT``): an
  experiment's own address (``#/experiments/<id>``: clicking its name in the list, its breadcrumb, a link from
  elsewhere) that names no workflow type gets the one of the experiment's kind tag, before MLflow picks the page
  (``custom_model_development``: ``machine_learning``, its runs; ``genai_development``: ``genai``, its traces).
  A workflow type the user chose (the GenAI / Model training switch puts it in the address) is kept; an
  experiment without a kind tag opens as MLflow decides. ``mlflow_store`` tags the project's experiments. The
  assistant panel, which opened by itself on a profile's first visit (it needs a model provider this offline
  installation does not have, and covered a quarter of every page), stays closed; its button stays.
- **Offline and light at start.** MLflow's gateway imports litellm, which fetches its model price list online in
  every process that imports it and retries where the network does not answer (``ui_check`` gave up after
  120 s): ``LITELLM_LOCAL_MODEL_COST_MAP=True`` uses the copy litellm ships. MLflow's job runner (judges scoring
  traces online, issue detection: they need a model provider) is off: it started 8 more processes, each importing
  MLflow, beside the server (``SERVER_ENV``). One worker: a local UI, one user.
- **Links that reach it.** It serves on ``--port``, else the port of ``BASHGYM_MLFLOW_UI_URL`` when that names
  this machine, else 5000, and records its address in the data folder (``config.MLFLOW_UI_URL_RECORD``): the run
  links that Dagster's asset metadata and the CLI give from then on point where it runs
  (``Settings.mlflow_ui_url``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bashgym_assets.config import (
    DEFAULT_MLFLOW_UI_URL,
    MLFLOW_UI_URL_RECORD,
    Settings,
    get_settings,
    redact_uri,
)
from bashgym_assets.mlflow_store import EXPERIMENT_KIND_TAG, RUNS, TRACES

APP_NAME = "bashgym"  # [project.entry-points."mlflow.app"] in pyproject.toml -> create_app
DEFAULT_PORT = urlsplit(DEFAULT_MLFLOW_UI_URL).port or 5000
#: What the server process gets on top of the caller's environment: litellm's bundled price list, and no job
#: runner (MLflow's server-side jobs: LLM judges scoring traces online, issue detection, trace archival; they need
#: a model provider, and their runner is 8 more processes, each importing MLflow, on a 2-core machine).
SERVER_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
#: Each experiment kind's page: MLflow's workflow type (its UI's ``?workflowType=``) and tab.
KIND_PAGES = {RUNS: ("machine_learning", "runs"), TRACES: ("genai", "traces")}
#: Local-storage entries a fresh profile starts with (MLflow's key and version; JSON values). The assistant panel
#: opens by itself on a browser's first visit to a local server: it needs a model provider this offline
#: installation does not have, and covers a quarter of the page; its button stays.
FIRST_VISIT_STORAGE = {"mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true"}

EXPERIMENT_KIND_SCRIPT = """(() => {
  // bashgym (bashgym_assets/mlflow_ui.py): an experiment opens on the page of its kind tag
  const PAGES = %(pages)s;
  for (const [key, value] of Object.entries(%(storage)s)) {
    try { if (window.localStorage.getItem(key) === null) window.localStorage.setItem(key, value); } catch (e) {}
  }
  const ROOT = /^#\\/experiments\\/([^/?#]+)\\/?(?:\\?(.*))?$/;
  const kinds = new Map();
  const kindOf = (id) => {
    if (!kinds.has(id)) {
      let kind = null;
      try {
        const xhr = new XMLHttpRequest();
        xhr.open("GET", "ajax-api/2.0/mlflow/experiments/get?experiment_id=" + encodeURIComponent(id), false);
        xhr.send();
        if (xhr.status === 200) {
          const tags = (JSON.parse(xhr.responseText).experiment || {}).tags || [];
          kind = (tags.find((t) => t.key === %(tag)s) || {}).value || null;
        }
      } catch (e) { /* no answer: MLflow decides */ }
      kinds.set(id, kind);
    }
    return kinds.get(id);
  };
  // the address of the page of the experiment's kind; null when it is no experiment's own address or names a
  // workflow type already
  const typed = (url) => {
    const u = new URL(url, window.location.href);
    const m = ROOT.exec(u.hash);
    if (!m) return null;
    const params = new URLSearchParams(m[2] || "");
    const page = params.has("workflowType") ? null : PAGES[kindOf(decodeURIComponent(m[1]))];
    if (!page) return null;
    params.set("workflowType", page[0]);
    u.hash = "#/experiments/" + m[1] + "/" + page[1] + "?" + params.toString();
    return u.href;
  };
  const push = window.history.pushState.bind(window.history);
  const replace = window.history.replaceState.bind(window.history);
  const retype = () => {
    const fixed = typed(window.location.href);
    if (fixed) replace(window.history.state, "", fixed);
    return fixed;
  };
  retype();  // the first address (a link from elsewhere, a typed one): before the router reads it
  window.addEventListener("popstate", retype);  // back, forward, an edited address: before the router's listener
  // a click on a link to an experiment (its name in the list, a breadcrumb): caught before the app sees it, and
  // the typed address opened instead, as if typed (MLflow, with the experiment already loaded, would pick its
  // page within the click); a click that opens a new tab goes its way (that tab's first address is typed)
  window.addEventListener("click", (event) => {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const link = event.target instanceof Element ? event.target.closest("a[href]") : null;
    if (!link || (link.target && link.target !== "_self")) return;
    const fixed = typed(link.href);
    if (!fixed) return;
    event.preventDefault();
    event.stopPropagation();
    window.location.assign(fixed);
  }, true);
  // the app's other navigations to an experiment (after creating one, say): once the router has moved, it is
  // told the typed address as a move within the same history entry
  for (const [name, original] of [["pushState", push], ["replaceState", replace]]) {
    window.history[name] = (state, unused, url) => {
      original(state, unused, url);
      if (url === undefined || url === null) return;
      const target = new URL(String(url), window.location.href).href;
      if (!ROOT.test(new URL(target).hash)) return;
      queueMicrotask(() => {
        if (window.location.href === target && retype()) {
          window.dispatchEvent(new PopStateEvent("popstate", { state: window.history.state }));
        }
      });
    };
  }
})();"""


def experiment_kind_script() -> str:
    import json

    return EXPERIMENT_KIND_SCRIPT % {
        "pages": json.dumps(KIND_PAGES),
        "storage": json.dumps(FIRST_VISIT_STORAGE),
        "tag": json.dumps(EXPERIMENT_KIND_TAG),
    }


def with_experiment_kinds(html: str) -> str:
    """MLflow's page with ``EXPERIMENT_KIND_SCRIPT`` first in its head (before the app's own scripts run)."""
    if "<head>" not in html:
        raise ValueError("MLflow's index.html has no <head>: this MLflow version is not the one pinned")
    return html.replace("<head>", f"<head><script>{experiment_kind_script()}</script>", 1)


def create_app() -> Any:
    """The ASGI app ``mlflow server --app-name bashgym`` serves (uvicorn ``--factory``): MLflow's own, its page
    (``/``, the single-page app's only HTML) served with ``with_experiment_kinds``."""
    from mlflow.server import app as flask_app
    from mlflow.server.fastapi_app import app

    static = Path(flask_app.static_folder or "")
    original = flask_app.view_functions["serve"]

    def serve() -> Any:
        index = static / "index.html"
        if not index.is_file():
            return original()  # MLflow's own message for a source install without the built UI
        html = with_experiment_kinds(index.read_text(encoding="utf-8"))
        return flask_app.response_class(html, mimetype="text/html", headers={"Cache-Control": "no-cache"})

    flask_app.view_functions["serve"] = serve
    return app


# --- starting it -----------------------------------------------------------------------------------------------


def mlflow_bin() -> str:
    here = Path(sys.executable).parent / "mlflow"
    return str(here) if here.exists() else "mlflow"


def app_installed() -> bool:
    """Whether MLflow can find ``APP_NAME`` (the package installed with this pyproject.toml's entry points)."""
    from importlib.metadata import entry_points

    return any(e.name == APP_NAME for e in entry_points(group="mlflow.app"))


def server_command(settings: Settings, port: int, host: str = "127.0.0.1") -> list[str]:
    """``mlflow server`` on the installation's store: the data folder's SQLite file (or the database
    ``BASHGYM_MLFLOW_TRACKING_URI`` names), artifacts in the data folder, this module's app, one worker."""
    if settings.mlflow_tracks_on_server:
        raise ValueError(
            f"BASHGYM_MLFLOW_TRACKING_URI is already a tracking server "
            f"({redact_uri(settings.mlflow_tracking_uri)}): open that one"
        )
    if not app_installed():
        raise RuntimeError(
            f"MLflow finds no app {APP_NAME!r} (the mlflow.app entry point of pyproject.toml): run `make setup`"
        )
    return [
        mlflow_bin(),
        "server",
        "--backend-store-uri",
        settings.mlflow_tracking_uri,
        "--default-artifact-root",
        settings.mlflow_artifact_uri,
        "-h",
        host,
        "-p",
        str(port),
        "--workers",
        "1",
        "--app-name",
        APP_NAME,
    ]


def prepare(settings: Settings) -> None:
    """The store as the UI should open it, before the server starts (never racing it to create a new store's
    tables): created in the data folder (``mlflow_store.prepare_store``), the project's experiments tagged with
    their kinds, also where an older bashgym left them without (``mlflow_store.fix_experiment_kinds``)."""
    from bashgym_assets import mlflow_store

    mlflow_store.fix_experiment_kinds(mlflow_store.client(settings))


def server_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ``base`` (default: this process's) with ``SERVER_ENV`` over it."""
    return {**(os.environ if base is None else base), **SERVER_ENV}


def default_port(settings: Settings) -> int:
    """The port of ``BASHGYM_MLFLOW_UI_URL`` when it names this machine (so the links it gives reach the UI
    served here), else ``DEFAULT_PORT``."""
    if settings.mlflow_ui_url_override:
        parts = urlsplit(settings.mlflow_ui_url)
        if parts.hostname in ("127.0.0.1", "localhost", "::1") and parts.port:
            return parts.port
    return DEFAULT_PORT


def record_url(settings: Settings, url: str) -> Path:
    """Write where the UI of the data folder's store is served (``Settings.mlflow_ui_url`` reads it back)."""
    settings.mlflow_dir.mkdir(parents=True, exist_ok=True)
    path = settings.mlflow_dir / MLFLOW_UI_URL_RECORD
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(url + "\n")
    tmp.replace(path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--port", type=int, default=None, help="default: BASHGYM_MLFLOW_UI_URL's port, else 5000")
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args(argv)
    settings = get_settings()
    port = args.port or default_port(settings)
    try:
        cmd = server_command(settings, port, args.host)
    except (ValueError, RuntimeError) as exc:
        print(exc, file=sys.stderr)
        return 1
    prepare(settings)
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host  # every address: this machine's own
    url = f"http://{shown}:{port}"
    record_url(settings, url)  # BASHGYM_MLFLOW_UI_URL, when set, still wins (a proxy in front of it, say)
    print(f"MLflow UI on {url} (run links in Dagster and the CLI: {settings.mlflow_ui_url})", flush=True)
    os.execvpe(cmd[0], cmd, server_env())
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
