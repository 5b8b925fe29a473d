"""How a sandbox's seed (its files, home skeleton, first lease) gets into the container, against the real engine.

On the engine's own machine it is a read-only bind of a root-only host file (``sandbox.seed_bind_ok``): ~8 ms of
the engine's CPU against ~100 ms for ``put_archive`` into a created container (benchmarks/bench_factory_gate.py).
Elsewhere, or when the engine refuses the bind, it is ``put_archive`` as before. Either way the operator sees the
same files, the lease is renewed, and nothing is left on the host."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import docker.api.client
import pytest

from bashgym_assets.sandbox import Sandbox, SandboxSpec
from bashgym_assets.sandbox import sandbox as sandbox_module
from bashgym_assets.sandbox.layout import SEED_MOUNT
from bashgym_assets.sandbox.sandbox import SEED_FOLDER_PREFIX, reap_seed_folders, seed_bind_ok

pytestmark = pytest.mark.docker

FILES = {"/home/operator/notes/a.txt": "alpha\n", "/etc/app/secret.conf": "token=s3cret\n"}


@pytest.fixture
def engine_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts the engine calls that write into a container or create one (any thread)."""
    seen: Counter[str] = Counter()
    lock = threading.Lock()
    for name in ("put_archive", "create_container"):
        original = getattr(docker.api.client.APIClient, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            with lock:
                seen[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(docker.api.client.APIClient, name, counted)
    yield seen


@pytest.fixture
def seed_by_put(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "seed_bind_ok", lambda: False)


def _seed_files_left() -> list[str]:
    folder = sandbox_module._SEED_BIND.get("dir")
    return sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else []


def _operator_sees_the_seed(box: Sandbox) -> None:
    shell = box.session()
    assert shell.run("cat notes/a.txt").stdout == "alpha\n"
    assert shell.run("cat /etc/app/secret.conf").stdout == "token=s3cret\n"
    assert box.run_as_root("stat -c %U /home/operator/notes/a.txt").stdout.strip() == "operator"


def test_this_machine_binds_the_seed():
    """The tests run as root beside a local engine: the fast path is the one they exercise."""
    assert os.geteuid() != 0 or seed_bind_ok()


def test_a_bound_seed_needs_no_archive_call_and_leaves_nothing_on_the_host(
    sandbox_image, engine_calls, monkeypatch
):
    monkeypatch.setitem(
        sandbox_module._SEED_BIND, "ok", True
    )  # the tests' engine is local: the bind path, always
    with Sandbox(SandboxSpec(image=sandbox_image, files=FILES)) as box:
        _operator_sees_the_seed(box)
        assert len(_seed_files_left()) == 1  # held for the engine's own archive calls until close
        # root-only and read-only in the container: the operator cannot read it, root cannot change it
        assert box.session().run(f"head -c1 {SEED_MOUNT}").exit_code == 1
        assert box.run_as_root(f"echo x >> {SEED_MOUNT}").exit_code != 0
        # the engine's archive calls still work (the lease's renewal is one)
        assert box.renew_lease()
    assert engine_calls["put_archive"] == 1  # the renewal above, nothing at start
    assert _seed_files_left() == []


def test_put_seed_still_works_where_the_bind_is_not_allowed(sandbox_image, engine_calls, seed_by_put):
    with Sandbox(SandboxSpec(image=sandbox_image, files=FILES)) as box:
        _operator_sees_the_seed(box)
        assert box.run_as_root(f"test -e {SEED_MOUNT}").exit_code == 1
    assert engine_calls["put_archive"] == 1


def test_sandboxes_starting_together_get_no_lease_renewal_before_they_start(
    sandbox_image, engine_calls, seed_by_put
):
    """The renewer, woken by each start, once took a sandbox created but not yet started for one whose lease was
    never renewed and wrote a lease into it: a second archive call (~100 ms of the engine's CPU) for about half
    the gate's tasks. With a 10-minute lease a short sandbox is renewed never."""
    count = 8

    def one(_: int) -> str:
        with Sandbox(SandboxSpec(image=sandbox_image)) as box:
            return box.run_as_root("cat /.bashgym-lease").stdout.strip()

    one(-1)  # the image's home skeleton, read once per process, is not what is counted
    engine_calls.clear()
    with ThreadPoolExecutor(4) as pool:
        leases = list(pool.map(one, range(count)))
    assert engine_calls["create_container"] == count
    assert engine_calls["put_archive"] == count  # the seed's, and nothing else
    assert leases == [f"{os.getpid()}.0"] * count


def test_an_engine_refusing_the_bind_falls_back_to_put(sandbox_image, engine_calls, monkeypatch, caplog):
    real = sandbox_module._seed_file

    def elsewhere(seed: bytes) -> str:  # a file the engine cannot see, as from another mount namespace
        path = real(seed)
        os.unlink(path)
        return path

    with Sandbox(SandboxSpec(image=sandbox_image)):
        pass  # the image's home skeleton, read once per process, is not what is counted
    engine_calls.clear()
    monkeypatch.setattr(sandbox_module, "_seed_file", elsewhere)
    monkeypatch.setitem(sandbox_module._SEED_BIND, "ok", True)
    with caplog.at_level("WARNING", logger=sandbox_module.__name__):
        for _ in range(2):
            with Sandbox(SandboxSpec(image=sandbox_image, files=FILES)) as box:
                _operator_sees_the_seed(box)
    assert engine_calls["create_container"] == 3, (
        engine_calls
    )  # refused, then created with the seed put in; then put at once
    assert engine_calls["put_archive"] == 2
    assert sandbox_module._SEED_BIND["ok"] is False  # and the process does not try again
    said = [r.getMessage() for r in caplog.records if "seed's read-only bind" in r.getMessage()]
    assert len(said) == 1 and "put_archive" in said[0] and "mount" in said[0].lower(), said  # once, with why


def test_a_killed_owners_seed_folder_is_reaped_and_a_live_ones_kept(tmp_path):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = tmp_path / f"{SEED_FOLDER_PREFIX}{gone.stdout.strip()}-abc"
    live = tmp_path / f"{SEED_FOLDER_PREFIX}{os.getppid()}-def"
    mine = tmp_path / f"{SEED_FOLDER_PREFIX}{os.getpid()}-ghi"
    other = tmp_path / "bashgym-seeds-notapid"
    for folder in (dead, live, mine, other):
        folder.mkdir()
        (folder / "x.tar").write_bytes(b"seed")
    assert reap_seed_folders(str(tmp_path)) == [dead.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, mine.name, other.name])
