"""MLflow lineage for adapters: one run per training, the adapter as an MLflow model, one registered version.

A training's run is started before it trains (``start_training_run``), is given its training and validation
data as dataset inputs (``log_dataset_inputs``: name, digest = the dataset version, context ``training`` /
``validation``), receives every step's metrics while it trains (``LiveMetrics``, the trainer's ``on_log``), and
is completed by ``log_training_run(run_id=...)`` with the params, the summary and the adapter, logged as a pyfunc
model (``pyfunc.py``: the adapter folder as its artifact, the base model only referenced) and registered as a new
version of ``bashgym-operator`` with the alias ``candidate`` (the newest adapter, awaiting evaluation; the
evaluation moves ``champion``). So the loss curves are visible live in the same run that ends up holding the
model, and ``mlflow.pyfunc.load_model("models:/bashgym-operator@champion")`` gives a model that answers chats.

Everything goes through an explicit ``MlflowClient`` on ``Settings.mlflow_tracking_uri`` (absolute SQLite in the
data folder, or ``BASHGYM_MLFLOW_TRACKING_URI``: Postgres, a tracking server) with the experiment's artifact root
in the data folder too (a tracking server: its own): MLflow's defaults would write ``./mlflow.db`` and ``./mlruns``
into whatever the current directory happens to be.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bashgym_assets.config import Settings, get_settings

# the store itself is core (``mlflow_store``); re-exported for the callers that reach MLflow through this module
from bashgym_assets.mlflow_store import DEFAULT_UI_URL, client, experiment_id, run_url, ui_base_url  # noqa: F401
from bashgym_assets.plots import png_markdown

ADAPTER_ARTIFACT_PATH = "adapter"  # the adapter folder inside the logged model: <model>/artifacts/adapter
LOGGED_MODEL_NAME = "operator"  # the logged model's name in its run
PYFUNC_CODE = Path(__file__).with_name("pyfunc.py")
CANDIDATE_ALIAS = "candidate"  # set on every newly registered version
# moved by the evaluation (``evaluation.promotion``) to the version that won; what ``bashgym serve`` loads. Here,
# below both, so that serving names it without importing the evaluation (which evaluates serving's router)
CHAMPION_ALIAS = "champion"
# Every adapter kind (SFT, DPO, GRPO) is a version of ONE registered model, tagged with its kind: they all are
# "the bashgym operator", so the evaluation's ``champion`` alias names a single version to serve.
REGISTERED_MODEL = "bashgym-operator"
TRAINING_EXPERIMENT = "bashgym-training"  # every training's run (kind: runs, mlflow_store.EXPERIMENT_KINDS)


class RegisteredAdapter(BaseModel):
    """Where an adapter's MLflow run and model version live (asset metadata links to them)."""

    run_id: str
    experiment_id: str
    run_name: str
    artifact_uri: str
    model_name: str
    model_version: str
    model_uri: str
    tracking_uri: str
    logged_model_id: str = ""
    logged_model_uri: str = ""

    def run_link(self) -> str:
        """The run's page in the MLflow UI of the configured tracking URI (``run_url``)."""
        return run_url(self.tracking_uri, self.experiment_id, self.run_id)


def _clean_params(params: Mapping[str, Any]) -> list[Any]:
    from mlflow.entities import Param

    return [Param(k, str(v)[:6000]) for k, v in sorted(params.items()) if v is not None]


def start_training_run(
    *,
    kind: str,
    run_name: str,
    tags: Mapping[str, str],
    experiment: str = TRAINING_EXPERIMENT,
    settings: Settings | None = None,
) -> str:
    """Create the run a training logs into while it trains; returns its id (``LiveMetrics``, ``log_training_run``)."""
    from bashgym_assets.processes import process_tags

    settings = settings or get_settings()
    c = client(settings)
    # the writer's process: a run it leaves RUNNING when killed is ended as KILLED (run_health.reap_dead_mlflow_runs)
    run = c.create_run(
        experiment_id(c, experiment, settings),
        run_name=run_name,
        tags={"kind": kind, **process_tags(), **{k: str(v) for k, v in tags.items()}},
    )
    return run.info.run_id


def log_dataset_inputs(
    run_id: str,
    *,
    name: str,
    version: str,
    splits: Mapping[str, Sequence[Mapping[str, Any]]],
    source: str | None = None,
    settings: Settings | None = None,
) -> list[str]:
    """Log a dataset's splits as inputs of the run (MLflow's Inputs / dataset lineage): one MLflow dataset per split,
    named ``<name>/<split>`` with digest = ``version`` (the dataset's content version), context ``training`` for
    ``train`` and the split's name otherwise (``validation``), its source the lake's parquet file. Only the name,
    digest, schema and row count reach MLflow, never the rows. Returns the logged names."""
    import json

    import pandas as pd

    # what mlflow.data.from_pandas is (set there at run time, so mypy cannot see it)
    from mlflow.data.pandas_dataset import from_pandas
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    def cell(v: Any) -> Any:
        return v if v is None or isinstance(v, str | int | float | bool) else json.dumps(v, default=str)

    inputs, names = [], []
    for split, rows in splits.items():
        if not rows:
            continue
        frame = pd.DataFrame([{k: cell(v) for k, v in r.items()} for r in rows])
        # source None (the code's location) is from_pandas' own default; its annotation omits None
        ds = from_pandas(frame, source=source, name=f"{name}/{split}", digest=version[:36])
        context = "training" if split == "train" else split
        inputs.append(DatasetInput(ds._to_mlflow_entity(), tags=[InputTag(MLFLOW_DATASET_CONTEXT, context)]))
        names.append(ds.name)
    if inputs:
        client(settings).log_inputs(run_id, datasets=inputs)
    return names


def fail_training_run(run_id: str, settings: Settings | None = None, status: str = "FAILED") -> None:
    """Mark a started run FAILED (the training raised before ``log_training_run`` could complete it), or KILLED
    (it was interrupted: Ctrl-C, a stopped command)."""
    client(settings).set_terminated(run_id, status)


# Fields the trainer adds to each on_log row for progress display: not curves
PROGRESS_FIELDS = frozenset({"step", "total_steps", "eta_s"})


def _step_metrics(row: Mapping[str, float], timestamp_ms: int) -> list[Any]:
    from mlflow.entities import Metric

    step = int(row["step"])
    return [
        Metric(k, float(v), timestamp_ms, step)
        for k, v in row.items()
        if k not in PROGRESS_FIELDS and isinstance(v, int | float) and math.isfinite(v)
    ]


class LiveMetrics:
    """An ``on_log`` sink: each row the trainer logs (a step's loss, lr, grad-norm ...; an evaluation's
    validation loss) goes to the run at once, at its step, so MLflow shows the curves while the run trains."""

    def __init__(self, run_id: str, settings: Settings | None = None) -> None:
        self.run_id = run_id
        self._client = client(settings)

    def __call__(self, row: Mapping[str, float]) -> None:
        import time

        metrics = _step_metrics(row, int(time.time() * 1000))
        if metrics:
            self._client.log_batch(self.run_id, metrics=metrics)


@contextlib.contextmanager
def _fluent_tracking(settings: Settings) -> Iterator[None]:
    """``mlflow.pyfunc.log_model`` / ``load_model`` only speak the fluent API: point its tracking and registry URIs
    at this installation's store for the call, then put back whatever the process had (globals and env vars)."""
    import mlflow
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    saved = (
        tracking_utils._tracking_uri,
        registry_utils._registry_uri,
        {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")},
    )
    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    mlflow.set_registry_uri(settings.mlflow_tracking_uri)
    try:
        yield
    finally:
        # None (the process had none) is what mlflow's body unsets; its annotation omits it
        mlflow.set_tracking_uri(saved[0])
        registry_utils._registry_uri = saved[1]
        for key, value in saved[2].items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _pip_requirements() -> list[str]:
    """Pinned to what trained it; given explicitly so logging never loads the model to infer them."""
    from importlib.metadata import PackageNotFoundError, version

    reqs = []
    for dist in ("mlflow", "torch", "transformers", "peft", "safetensors"):
        try:
            reqs.append(f"{dist}=={version(dist)}")
        except PackageNotFoundError:
            reqs.append(dist)
    return reqs


def log_adapter_model(
    run_id: str, adapter_dir: str, base_model: str, settings: Settings, max_new_tokens: int = 128
) -> Any:
    """Log the adapter as a pyfunc model of the run (``pyfunc.AdapterChatModel``): artifacts = the adapter folder,
    ``model_config``/``metadata`` = the base model's reference (not its weights), code = ``inference/turns.py``
    (where a reply stops, for whatever base the model is loaded on). Returns MLflow's ``ModelInfo``."""
    import shutil
    import tempfile

    import mlflow
    from mlflow.models import ModelSignature

    from bashgym_assets.inference import turns
    from bashgym_assets.training.pyfunc import TURNS_MODULE, params_schema

    config = {"base_model": base_model, "max_new_tokens": max_new_tokens}
    # no input schema (predict takes a string, a conversation or a batch of either); a params schema so that
    # params={"max_new_tokens": N, "temperature": T, "top_p": P, "seed": S} reach predict instead of being dropped
    signature = ModelSignature(params=params_schema(max_new_tokens))
    with tempfile.TemporaryDirectory() as tmp:
        # MLflow keeps an artifact folder's own name: stage it as "adapter" so the layout is always the same
        staged = shutil.copytree(adapter_dir, Path(tmp) / ADAPTER_ARTIFACT_PATH)
        code = Path(tmp) / "code" / f"{TURNS_MODULE}.py"
        code.parent.mkdir()
        shutil.copyfile(turns.__file__, code)
        with (
            _fluent_tracking(settings),
            mlflow.start_run(run_id=run_id, nested=mlflow.active_run() is not None),
        ):
            return mlflow.pyfunc.log_model(
                name=LOGGED_MODEL_NAME,
                python_model=str(PYFUNC_CODE),
                artifacts={ADAPTER_ARTIFACT_PATH: str(staged)},
                model_config=config,
                code_paths=[str(code)],
                metadata={"base_model": base_model, "base_model_copied": False},
                signature=signature,
                pip_requirements=_pip_requirements(),
            )


def _base_model_of(adapter_dir: str, tags: Mapping[str, str], params: Mapping[str, Any]) -> str:
    """The base the adapter was trained on: the lineage tag, the params, else PEFT's own record of it; "" when
    none says (the model is still logged; loading it then needs ``model_config={"base_model": ...}``)."""
    import json

    base = tags.get("base_model") or params.get("base_model")
    if base:
        return str(base)
    config = Path(adapter_dir) / "adapter_config.json"
    try:
        return str(json.loads(config.read_text()).get("base_model_name_or_path") or "")
    except (OSError, ValueError):
        return ""


def log_training_run(
    *,
    kind: str,
    run_name: str,
    params: Mapping[str, Any],
    history: Sequence[Mapping[str, float]],
    summary: Mapping[str, float | None],
    adapter_dir: str,
    tags: Mapping[str, str],
    extra_artifacts: Sequence[Path] = (),
    experiment: str = TRAINING_EXPERIMENT,
    model_name: str | None = None,
    settings: Settings | None = None,
    run_id: str | None = None,
    base_model: str | None = None,
) -> RegisteredAdapter:
    """Log a finished training (params, per-step metrics, the adapter as a pyfunc model) and register that model
    as a new version, aliased ``candidate``.

    With ``run_id`` (from ``start_training_run``) the run already holds the steps ``LiveMetrics`` logged while it
    trained: only the history's other steps are added (those before a resumed checkpoint), then it is completed.
    Without, a new run is created and given the whole history. The base model the pyfunc loads is ``base_model``,
    else the ``base_model`` tag or param, else the adapter's ``adapter_config.json``.
    """
    import time

    from mlflow.entities import RunTag
    from mlflow.exceptions import MlflowException

    settings = settings or get_settings()
    c = client(settings)
    base = base_model or _base_model_of(adapter_dir, tags, params)
    if run_id is None:
        rid = start_training_run(
            kind=kind, run_name=run_name, tags=tags, experiment=experiment, settings=settings
        )
        logged: set[int] = set()
    else:
        rid = run_id
        c.log_batch(rid, tags=[RunTag(k, str(v)) for k, v in tags.items()])
        logged = {m.step for m in c.get_metric_history(rid, "loss")}
    exp = c.get_run(rid).info.experiment_id
    try:
        now = int(time.time() * 1000)
        metrics = []
        for row in history:
            if int(row["step"]) not in logged:
                metrics += _step_metrics(row, now)
        metrics += _step_metrics(
            {"step": 0, **{f"final_{k}": v for k, v in summary.items() if v is not None}}, now
        )
        params_list = _clean_params(params)
        for i in range(0, max(len(metrics), len(params_list), 1), 900):  # log_batch caps at 1000 entities
            c.log_batch(
                rid,
                metrics=metrics[i : i + 900],
                params=params_list[i : i + 90] if i == 0 else [],
                tags=[RunTag("mlflow.note.content", f"{kind} adapter {run_name}")] if i == 0 else [],
            )
        if len(params_list) > 90:
            c.log_batch(rid, params=params_list[90:])
        for extra in extra_artifacts:
            c.log_artifact(rid, str(extra))
        info = log_adapter_model(rid, adapter_dir, base, settings)
        c.set_terminated(rid, "FINISHED")
    except BaseException:
        c.set_terminated(rid, "FAILED")
        raise
    name = model_name or REGISTERED_MODEL
    try:
        c.create_registered_model(
            name,
            description="bashgym operator: LoRA adapters (SFT, DPO, GRPO) as pyfunc "
            "models on a referenced base, one version per training; alias "
            "candidate = the newest version, champion = the version the "
            "evaluation promoted",
        )
    except MlflowException as exc:
        if "already exists" not in str(exc).lower() and "RESOURCE_ALREADY_EXISTS" not in str(exc):
            raise
    artifact_uri = c.get_run(rid).info.artifact_uri
    with _fluent_tracking(
        settings
    ):  # the registry resolves a models:/ source through the fluent tracking URI
        version = c.create_model_version(
            name,
            source=info.model_uri,
            run_id=rid,
            model_id=info.model_id,
            tags={"kind": kind, "base_model": base, **{k: str(v) for k, v in tags.items()}},
        )
    c.set_registered_model_alias(name, CANDIDATE_ALIAS, str(version.version))
    return RegisteredAdapter(
        run_id=rid,
        experiment_id=exp,
        run_name=run_name,
        artifact_uri=artifact_uri,
        model_name=name,
        model_version=str(version.version),
        model_uri=f"models:/{name}/{version.version}",
        tracking_uri=settings.mlflow_tracking_uri,
        logged_model_id=info.model_id,
        logged_model_uri=info.model_uri,
    )


def load_model(model_uri: str, settings: Settings | None = None, **kwargs: Any) -> Any:
    """``mlflow.pyfunc.load_model`` on this installation's registry (``models:/bashgym-operator@champion``,
    ``models:/bashgym-operator/3``): the base model is loaded from its recorded reference, then the adapter.
    ``kwargs`` go to MLflow (``model_config={"base_model": ...}`` to point at a base stored elsewhere)."""
    import mlflow.pyfunc

    with _fluent_tracking(settings or get_settings()):
        return mlflow.pyfunc.load_model(model_uri, **kwargs)


def model_version(c: Any, model_uri: str) -> tuple[str, Any]:
    """``(registered name, ModelVersion)`` of ``models:/name/version`` or ``models:/name@alias``; MLflow's own
    exception when there is no such version or alias (callers word it for their user)."""
    ref = model_uri.removeprefix("models:/")
    if "@" in ref:
        name, alias = ref.split("@", 1)
        return name, c.get_model_version_by_alias(name, alias)
    name, version = ref.rsplit("/", 1)
    return name, c.get_model_version(name, version)


def download_adapter(model_uri: str, dst: Path, settings: Settings | None = None) -> Path:
    """Fetch a registered adapter's files (``models:/name/version`` or ``models:/name@alias``) into ``dst``."""
    import mlflow.artifacts
    from mlflow.exceptions import MlflowException

    from bashgym_assets.config import redact_uri

    settings = settings or get_settings()
    c = client(settings)
    try:
        name, mv = model_version(c, model_uri)
    except MlflowException as exc:  # one clear line for the CLI (issue 31), not MLflow's traceback
        raise LookupError(
            f"{model_uri} is not in the registry at {redact_uri(settings.mlflow_tracking_uri)} "
            f"({exc.message}): pick a registered version (make mlflow shows them)"
        ) from exc
    dst.mkdir(parents=True, exist_ok=True)
    source = mv.source
    model_id = getattr(mv, "model_id", None)
    if model_id or source.startswith("models:/m-"):
        # a pyfunc model (the current layout): only its adapter folder, <model>/artifacts/adapter
        logged = c.get_logged_model(model_id or source.removeprefix("models:/").split("/", 1)[0])
        source = f"{logged.artifact_location.rstrip('/')}/artifacts/{ADAPTER_ARTIFACT_PATH}"
    # else: a version registered before adapters were logged as models, its source the run's adapter/ folder
    try:
        return Path(
            mlflow.artifacts.download_artifacts(
                artifact_uri=source, dst_path=str(dst), tracking_uri=settings.mlflow_tracking_uri
            )
        )
    except (MlflowException, OSError) as exc:
        raise FileNotFoundError(
            f"{model_uri} (version {mv.version} of {name}) is registered but its adapter files "
            f"are gone from {source}: train again, or move the alias to a version whose files "
            "exist (bashgym promote --model N)"
        ) from exc


def loss_curve_png(history: Sequence[Mapping[str, float]], path: Path, title: str = "training loss") -> Path:
    """Loss (and learning rate) per step as a PNG file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in history]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    ax.plot(steps, [r["loss"] for r in history], color="tab:blue", label="loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    if history and "learning_rate" in history[0]:
        ax2 = ax.twinx()
        ax2.plot(steps, [r["learning_rate"] for r in history], color="tab:orange", alpha=0.5, label="lr")
        ax2.set_ylabel("learning rate")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def loss_curve_markdown(path: Path, alt: str = "loss curve") -> str:
    """The saved loss curve embedded in markdown (data URI), so Dagster's UI shows it inline."""
    return png_markdown(Path(path), alt)
