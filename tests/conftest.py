"""Shared fixtures: a throw-away data folder, the real Docker engine and the real sandbox image."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bashgym_assets.config import Settings

# A suite started as a background job of a non-interactive shell (`make test &` in a script, `nohup sh -c ... &`)
# inherits SIGINT ignored, and so would every command a test starts: the tests that stop a command with SIGINT (as
# Ctrl-C) would see it ignored, rightly (`stopping` leaves an ignored SIGINT ignored). The suite tests the stop
# signals, so it runs with Python's own SIGINT handler, as from a terminal. (What the background start did to
# SIGTERM, Dagster's runs mapping it to the ignored SIGINT, the product now copes with: `stopping.sigterm_kept`,
# tested in test_stop_signals.py.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


@pytest.fixture
def bashgym_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data folder for one test, exported as BASHGYM_HOME."""
    home = tmp_path / "bashgym-home"
    home.mkdir()
    monkeypatch.setenv("BASHGYM_HOME", str(home))
    return home


@pytest.fixture
def settings(bashgym_home: Path) -> Settings:
    s = Settings(home=bashgym_home)
    s.ensure_dirs()
    return s


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The running Docker engine's version. Starts it if it is installed; fails loudly if it cannot."""
    from bashgym_assets.images import DockerUnavailable, ensure_docker_engine

    try:
        return ensure_docker_engine()
    except DockerUnavailable as exc:  # a failure, not a skip: CI must prove the sandbox for real
        pytest.fail(f"Docker engine unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def sandbox_image(docker_engine: str) -> str:
    """The sandbox base image tag, built offline from sandbox_images/ when missing."""
    from bashgym_assets.images import ImageBuildError, build_sandbox_image

    cache = Path(os.environ.get("BASHGYM_HOME", Path(__file__).resolve().parents[1] / ".bashgym")) / "cache"
    try:
        return build_sandbox_image(cache_dir=cache / "debootstrap")
    except ImageBuildError as exc:
        pytest.fail(f"sandbox image could not be built: {exc}", pytrace=False)


@pytest.fixture
def claude_fixtures() -> Path:
    folder = SHARED_FIXTURES / "claude-code"
    if not folder.is_dir():
        pytest.skip("../shared/fixtures/claude-code is not beside this checkout")
    return folder


@pytest.fixture(scope="session")
def empty_mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite store created once per session: its schema migrations take seconds, a copy into a
    test's data folder (``settings.mlflow_dir / "mlflow.db"``) takes none."""
    from mlflow import MlflowClient

    db = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    return db


@pytest.fixture
def mlflow_store_ready(settings: Settings, empty_mlflow_store: Path) -> Path:
    """The test's data folder with its MLflow store already created (a copy of ``empty_mlflow_store``), for a test
    that uses MLflow but is not about creating its store (``@pytest.mark.usefixtures("mlflow_store_ready")``).
    A store something else created first is left as it is."""
    import shutil

    db = settings.mlflow_dir / "mlflow.db"
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(empty_mlflow_store, db)
    return db


@pytest.fixture(autouse=True)
def _no_episode_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Episode traces (``rollout.tracing``) are on by default wherever an MLflow store exists, and a test without
    its own data folder would write them into the project's real one: off in tests unless a test turns them on
    (``monkeypatch.setenv("BASHGYM_TRACES", "1")``, as tests/test_tracing.py does)."""
    monkeypatch.setenv("BASHGYM_TRACES", "0")


@pytest.fixture(autouse=True)
def _no_external_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer who exported a Postgres instance, an MLflow server or the Docker run launcher for their own
    work must not have the tests write into it: every test starts on the data folder's SQLite files (the
    Postgres tests set these variables themselves)."""
    for name in ("BASHGYM_MLFLOW_TRACKING_URI", "BASHGYM_DAGSTER_PG_URL", "BASHGYM_RUN_LAUNCHER"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_leaked_defs_state_storage():
    """Dagster sets a context variable to the instance's state storage when an instance is entered; a nested
    enter of the same instance (inside Dagster's evaluators) loses the token, so after ``instance_for_test`` the
    variable can keep pointing at a deleted temporary instance and every later Definitions load fails with
    "unable to open database file". Reset it after each test."""
    yield
    from dagster._core.storage.defs_state.base import _current_storage

    _current_storage.set(None)


DOCKER_FIXTURES = {"docker_engine", "sandbox_image"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that asks for the engine or the image is a ``docker`` test wherever it lives, so ``make test-fast``
    (``-m "not docker and not slow and not model"``) never starts a container."""
    for item in items:
        if DOCKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.docker)
