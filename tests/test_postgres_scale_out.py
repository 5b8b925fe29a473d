"""Scale-out on existing engines, for real: a Postgres 15 cluster started here (initdb + pg_ctl on a free loopback
port) holding the Dagster instance and the MLflow store, and a run launched into a container by dagster-docker's
``DockerRunLauncher``, all configured the way a user configures them (``BASHGYM_DAGSTER_PG_URL``,
``BASHGYM_MLFLOW_TRACKING_URI``, ``BASHGYM_RUN_LAUNCHER``)."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bashgym_assets.config import PROJECT_ROOT, Settings
from bashgym_assets.ingest import SAMPLE_TRACES_DIR
from bashgym_assets.instance import GENERATED_MARK, RUN_CONTAINER_KIND, ensure_dagster_home

REPO = "webshop"  # a repository partition of the bundled sample sessions
INGEST = ("raw_sessions", "redacted_sessions", "tiered_traces")


# ---- a throwaway Postgres ----------------------------------------------------------------------------------------
def _pg_bindir() -> Path:
    """Debian's server binaries (newest major first), else whatever ``initdb`` is on PATH."""
    for candidate in sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True
    ):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    found = shutil.which("initdb")
    if found and (Path(found).resolve().parent / "pg_ctl").exists():
        return Path(found).resolve().parent
    pytest.fail(
        "PostgreSQL server binaries (initdb, pg_ctl) not found: scripts/setup.sh installs Debian's "
        "'postgresql' package (apt-get install -y postgresql)",
        pytrace=False,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class PostgresServer:
    port: int
    user: str
    password: str

    def url(self, db: str) -> str:
        """The plain libpq form (psycopg2.connect, MLflow); Dagster's needs ``dagster_url``."""
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{db}"

    def dagster_url(self, db: str) -> str:
        return self.url(db).replace("postgresql://", "postgresql+psycopg2://", 1)

    def query(self, db: str, sql: str, args: tuple = ()) -> list[tuple]:
        """Straight to the database with psycopg2, past every bashgym and Dagster layer."""
        import psycopg2

        with psycopg2.connect(self.url(db)) as conn, conn.cursor() as cur:
            cur.execute(sql, args)
            rows = cur.fetchall()
        conn.close()
        return rows


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """initdb into a fresh folder, pg_ctl start on 127.0.0.1:<free port>, a password-protected role ``bashgym``
    owning the test databases; stopped and deleted at the end. As root the server runs as the ``postgres`` system
    user (or ``nobody``): PostgreSQL refuses to run as root."""
    import psycopg2

    bindir = _pg_bindir()
    root = Path(
        tempfile.mkdtemp(prefix="bashgym-pg-")
    )  # not under pytest's 0700 tmp: the server user reads it
    data, log, pwfile = root / "data", root / "server.log", root / "pw"
    superpw, password = secrets.token_hex(12), secrets.token_hex(12)
    pwfile.write_text(superpw + "\n")
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
        assert user, "no 'postgres' or 'nobody' user to run the server as (PostgreSQL refuses root)"
        entry = pwd.getpwnam(user)
        for path in (root, pwfile):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        prefix = ["runuser", "-u", user, "--"]
    port = _free_port()

    def run(*cmd: str) -> None:
        done = subprocess.run([*prefix, *cmd], cwd=root, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{cmd[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}\n" + (
            log.read_text()[-2000:] if log.exists() else ""
        )

    run(
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-U",
        "postgres",
        f"--pwfile={pwfile}",
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    )
    opts = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=100"
    )
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start")
    try:
        admin = psycopg2.connect(
            host="127.0.0.1", port=port, user="postgres", password=superpw, dbname="postgres"
        )
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f"CREATE ROLE bashgym LOGIN PASSWORD '{password}'")
            for db in ("dagster", "dagster_docker", "mlflow"):
                cur.execute(f"CREATE DATABASE {db} OWNER bashgym")
        admin.close()
        yield PostgresServer(port=port, user="bashgym", password=password)
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            cwd=root,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(root, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def scale_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A fresh data folder reading the bundled sample sessions, nothing else of the machine's configuration."""
    for var in list(os.environ):
        if var.startswith("BASHGYM_") or var in (
            "DAGSTER_HOME",
            "MLFLOW_TRACKING_URI",
            "MLFLOW_REGISTRY_URI",
        ):
            monkeypatch.delenv(var)
    monkeypatch.setenv("BASHGYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BASHGYM_TRACE_DIRS", str(SAMPLE_TRACES_DIR))
    monkeypatch.setenv("BASHGYM_TRACES", "0")
    return Settings()


def test_tracking_uri_setting_default_driver_and_redaction(scale_env, monkeypatch):
    from bashgym_assets.config import redact_uri
    from bashgym_assets.ui_check import UICheckError, mlflow_server

    assert (
        scale_env.mlflow_tracking_uri == f"sqlite:///{scale_env.mlflow_dir / 'mlflow.db'}"
    )  # default unchanged
    monkeypatch.setenv("BASHGYM_MLFLOW_TRACKING_URI", "postgres://ml:s3cret@db.internal:5432/mlflow")
    pg = Settings()
    assert pg.mlflow_tracking_uri == "postgresql+psycopg2://ml:s3cret@db.internal:5432/mlflow"
    assert redact_uri(pg.mlflow_tracking_uri) == "postgresql+psycopg2://ml:***@db.internal:5432/mlflow"
    assert "s3cret" not in repr(pg) and not pg.mlflow_tracks_on_server
    monkeypatch.setenv("BASHGYM_MLFLOW_TRACKING_URI", "http://mlflow.internal:5000")
    server = Settings()
    assert server.mlflow_tracks_on_server and server.mlflow_artifact_root is None
    assert redact_uri(server.mlflow_tracking_uri) == "http://mlflow.internal:5000"
    with pytest.raises(UICheckError, match="already a tracking server"), mlflow_server(server):
        pass


# ---- the Dagster instance on Postgres -----------------------------------------------------------------------------
def test_instance_config_follows_the_environment(scale_env, monkeypatch, postgres):
    home = ensure_dagster_home(scale_env)
    link = home / "dagster.yaml"
    assert link.is_symlink() and link.resolve() == PROJECT_ROOT / "dagster.yaml"  # one machine: SQLite

    monkeypatch.setenv("BASHGYM_DAGSTER_PG_URL", postgres.url("dagster"))
    with pytest.raises(ValueError, match=r"postgresql\+psycopg2://user:password@host:port/db") as bare:
        ensure_dagster_home(Settings())
    assert postgres.password not in str(bare.value)
    monkeypatch.setenv("BASHGYM_DAGSTER_PG_URL", postgres.dagster_url("dagster"))
    ensure_dagster_home(Settings())
    text = link.read_text()
    assert not link.is_symlink() and text.startswith(GENERATED_MARK)
    assert "postgres_url:\n      env: BASHGYM_DAGSTER_PG_URL" in text and postgres.password not in text
    assert "max_concurrent_runs: 2" in text and "sqlite" not in text  # the rest of the project's file is kept

    monkeypatch.setenv("BASHGYM_RUN_LAUNCHER", "kubernetes")
    with pytest.raises(ValueError, match="'default' or 'docker'"):
        ensure_dagster_home(Settings())
    monkeypatch.delenv("BASHGYM_RUN_LAUNCHER")
    monkeypatch.delenv("BASHGYM_DAGSTER_PG_URL")
    ensure_dagster_home(Settings())
    assert link.is_symlink() and link.resolve() == PROJECT_ROOT / "dagster.yaml"  # unset: back to the link


@pytest.mark.slow
def test_ingest_chain_materializes_into_a_postgres_instance(scale_env, monkeypatch, postgres):
    import dagster as dg
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    from bashgym_assets.definitions import defs

    monkeypatch.setenv("BASHGYM_DAGSTER_PG_URL", postgres.dagster_url("dagster"))
    home = ensure_dagster_home(Settings())
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        instance.add_dynamic_partitions("repos", [REPO])
        result = defs.resolve_job_def("ingest_repo_job").execute_in_process(
            partition_key=REPO, instance=instance
        )
        assert result.success
        run_id = result.run_id

        # through the instance (what the UI and the sensors read)
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS
        assert instance.get_dynamic_partitions("repos") == [REPO]
        for key in INGEST:
            event = instance.get_latest_materialization_event(dg.AssetKey(key))
            assert event is not None and event.run_id == run_id and event.dagster_event.partition == REPO, key
        check = dg.AssetCheckKey(dg.AssetKey("redacted_sessions"), "no_secrets_left")
        execution = instance.event_log_storage.get_latest_asset_check_execution_by_key([check])[check]
        assert execution.run_id == run_id and execution.status.value == "SUCCEEDED"

    # straight from Postgres with psycopg2
    assert postgres.query("dagster", "SELECT status FROM runs WHERE run_id = %s", (run_id,)) == [("SUCCESS",)]
    mats = postgres.query(
        "dagster",
        "SELECT asset_key, partition FROM event_logs WHERE run_id = %s AND "
        "dagster_event_type = 'ASSET_MATERIALIZATION' ORDER BY asset_key",
        (run_id,),
    )
    assert mats == [
        (json.dumps(["raw_sessions"]), REPO),
        (json.dumps(["redacted_sessions"]), REPO),
        (json.dumps(["tiered_traces"]), REPO),
    ]
    assert postgres.query(
        "dagster", "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'repos'"
    ) == [(REPO,)]
    assert postgres.query(
        "dagster",
        "SELECT check_name, execution_status FROM asset_check_executions WHERE run_id = %s",
        (run_id,),
    ) == [("no_secrets_left", "SUCCEEDED")]
    # nothing went to SQLite files beside it; the lake got the data
    assert not list(home.rglob("*.db"))
    assert (scale_env.lake_dir / "tiered_traces" / f"{REPO}.parquet").exists()


# ---- MLflow on Postgres and behind a tracking server -------------------------------------------------------------
def _fake_adapter(folder: Path) -> Path:
    """An adapter folder as the trainer writes it (registration never loads the weights)."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "tiny-base", "r": 4}))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    return folder


@pytest.mark.slow
def test_mlflow_registry_and_champion_on_postgres_and_through_a_server(
    scale_env, monkeypatch, postgres, tmp_path
):
    from bashgym_assets.evaluation import promotion as promo
    from bashgym_assets.training import registry
    from bashgym_assets.ui_check import mlflow_server

    monkeypatch.setenv("BASHGYM_MLFLOW_TRACKING_URI", postgres.url("mlflow"))  # bare: opened with psycopg2
    settings = Settings()
    uri = postgres.dagster_url("mlflow")
    assert (
        settings.mlflow_tracking_uri == uri and settings.mlflow_artifact_root == settings.mlflow_artifact_uri
    )
    adapter = _fake_adapter(tmp_path / "adapter")
    reg = registry.log_training_run(
        kind="sft",
        run_name="on-postgres",
        params={"learning_rate": 2e-4},
        history=[{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.25}],
        summary={"loss": 1.25},
        adapter_dir=str(adapter),
        tags={"dataset": "v1"},
        settings=settings,
    )
    assert reg.tracking_uri == uri and reg.model_uri == f"models:/{registry.REGISTERED_MODEL}/1"
    assert str(promo.alias_version(registry.REGISTERED_MODEL, promo.CANDIDATE, settings).version) == "1"
    promo.set_alias(registry.REGISTERED_MODEL, reg.model_version, promo.CHAMPION, settings)
    assert str(promo.alias_version(registry.REGISTERED_MODEL, promo.CHAMPION, settings).version) == "1"
    back = registry.download_adapter(
        f"models:/{registry.REGISTERED_MODEL}@champion", tmp_path / "back", settings
    )
    assert sorted(p.name for p in back.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]

    assert postgres.query(
        "mlflow",
        "SELECT key, value, step FROM metrics WHERE run_uuid = %s AND key = 'loss' ORDER BY step",
        (reg.run_id,),
    ) == [("loss", 2.0, 1), ("loss", 1.25, 2)]
    assert postgres.query("mlflow", "SELECT status FROM runs WHERE run_uuid = %s", (reg.run_id,)) == [
        ("FINISHED",)
    ]
    assert postgres.query(
        "mlflow",
        "SELECT alias, version FROM registered_model_aliases WHERE name = %s ORDER BY alias",
        (registry.REGISTERED_MODEL,),
    ) == [("candidate", 1), ("champion", 1)]
    assert not (settings.mlflow_dir / "mlflow.db").exists() and postgres.password not in repr(settings)

    # an MLflow tracking server on that database; bashgym pointed at it with an http:// URI
    with mlflow_server(settings) as server:
        monkeypatch.setenv("BASHGYM_MLFLOW_TRACKING_URI", server.url)
        remote = Settings()
        assert remote.mlflow_tracks_on_server and remote.mlflow_artifact_root is None
        assert str(promo.alias_version(registry.REGISTERED_MODEL, promo.CHAMPION, remote).version) == "1"
        reg2 = registry.log_training_run(
            kind="dpo",
            run_name="via-server",
            params={},
            history=[{"step": 1, "loss": 0.5}],
            summary={},
            adapter_dir=str(adapter),
            tags={},
            settings=remote,
            experiment="bashgym-remote",
        )
        assert reg2.model_version == "2" and reg2.run_link().startswith(f"{server.url}/#/experiments/")
        promo.set_alias(registry.REGISTERED_MODEL, reg2.model_version, promo.CHAMPION, remote)
    assert postgres.query(
        "mlflow", "SELECT version FROM registered_model_aliases WHERE alias = 'champion'"
    ) == [(2,)]
    # the server (its default artifact root) chose where the new experiment keeps its artifacts
    assert postgres.query(
        "mlflow", "SELECT artifact_location FROM experiments WHERE name = 'bashgym-remote'"
    ) == [(f"{settings.mlflow_artifact_uri}/2",)]


# ---- a run in a container, launched by DockerRunLauncher ---------------------------------------------------------
def _launch(instance, job_name: str, tags: dict[str, str], run_config: dict) -> str:
    """Create the run from the code location and hand it to the instance's run launcher: what the daemon does
    for a queued run (and ``dagster job launch`` with the default coordinator), without the daemon's other work
    (sensors, schedules) starting runs of their own."""
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import ModuleTarget

    target = ModuleTarget(
        module_name="bashgym_assets.definitions",
        attribute=None,
        working_directory=str(PROJECT_ROOT),
        location_name="cpu",
    )
    with WorkspaceProcessContext(instance, target) as context:
        workspace = context.create_request_context()
        location = workspace.get_code_location("cpu")
        (repo,) = location.get_repositories().values()
        job = repo.get_full_job(job_name)
        plan = location.get_execution_plan(
            job, run_config, step_keys_to_execute=None, known_state=None, instance=instance
        )
        run = instance.create_run(
            job_name=job_name,
            run_id=None,
            run_config=run_config,
            resolved_op_selection=None,
            step_keys_to_execute=plan.execution_plan_snapshot.step_keys_to_execute,
            op_selection=None,
            status=None,
            root_run_id=None,
            parent_run_id=None,
            tags=tags,
            job_snapshot=job.job_snapshot,
            execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=job.parent_job_snapshot,
            remote_job_origin=job.get_remote_origin(),
            job_code_origin=job.get_python_origin(),
            asset_selection=None,
            asset_check_selection=None,
            asset_graph=repo.asset_graph,
        )
        instance.launch_run(run.run_id, workspace)
        return run.run_id


@pytest.mark.docker
@pytest.mark.slow
def test_a_run_launched_into_a_container_by_docker_run_launcher(
    scale_env, monkeypatch, postgres, docker_engine
):
    import dagster as dg
    import docker
    from dagster_docker import DockerRunLauncher

    from bashgym_assets.training.trainer_image import build_trainer_image

    image = build_trainer_image()
    monkeypatch.setenv("BASHGYM_DAGSTER_PG_URL", postgres.dagster_url("dagster_docker"))
    monkeypatch.setenv("BASHGYM_RUN_LAUNCHER", "docker")
    monkeypatch.setenv("BASHGYM_DOCKER_GPUS", "none")
    home = ensure_dagster_home(Settings())
    assert "class: DockerRunLauncher" in (home / "dagster.yaml").read_text()
    client = docker.from_env()
    run_id = None
    try:
        with dg.DagsterInstance.get() as instance:
            assert (
                isinstance(instance.run_launcher, DockerRunLauncher) and instance.run_launcher.image == image
            )
            instance.add_dynamic_partitions("repos", [REPO])
            # the steps in the run's own process: one container, one import of the code location
            run_id = _launch(
                instance,
                "ingest_repo_job",
                {"dagster/partition": REPO},
                {"execution": {"config": {"in_process": {}}}},
            )
            deadline = time.monotonic() + 600  # a bound on the wait, not a timing assertion
            while not instance.get_run_by_id(run_id).is_finished and time.monotonic() < deadline:
                time.sleep(1)
            run = instance.get_run_by_id(run_id)
            container = client.containers.get(run.tags["docker/container_id"])
            assert run.status == dg.DagsterRunStatus.SUCCESS, container.logs(tail=80).decode(errors="replace")
            assert container.attrs["Config"]["Image"] == image and container.attrs["State"]["ExitCode"] == 0
            assert container.labels["org.bashgym.kind"] == RUN_CONTAINER_KIND
            assert container.labels["dagster/run_id"] == run_id
            assert "execute_run" in container.attrs["Config"]["Cmd"]
            for key in INGEST:
                event = instance.get_latest_materialization_event(dg.AssetKey(key))
                assert (
                    event is not None and event.run_id == run_id and event.dagster_event.partition == REPO
                ), key
        # the container wrote into the same Postgres and the same data folder as this process sees
        assert postgres.query("dagster_docker", "SELECT status FROM runs WHERE run_id = %s", (run_id,)) == [
            ("SUCCESS",)
        ]
        assert postgres.query(
            "dagster_docker",
            "SELECT count(*) FROM event_logs WHERE run_id = %s AND "
            "dagster_event_type = 'ASSET_MATERIALIZATION'",
            (run_id,),
        ) == [(3,)]
        assert (scale_env.lake_dir / "tiered_traces" / f"{REPO}.parquet").exists()
    finally:
        if run_id:
            for c in client.containers.list(all=True, filters={"label": f"dagster/run_id={run_id}"}):
                c.remove(force=True)
