"""Sandboxes never outlive their owners for long (issue 31, item 5), against the real engine: an owner killed with
SIGKILL leaves its containers, and the next process to open a sandbox (whatever path: it is ``Sandbox.start``)
reaps them; ``reap --dry-run`` lists them first; a live owner's are left alone; SIGTERM removes an owner's own; and
with nobody to reap them, the container's backstop ends it once its lease is not renewed."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time

import docker
import pytest
from sandbox_fixtures import container_exists

from bashgym_assets.sandbox import Sandbox, SandboxSpec, closing_sandboxes, find_leftovers
from bashgym_assets.sandbox.sandbox import (
    LABEL_EXPIRES,
    LABEL_OWNER,
    LABEL_SANDBOX,
    LIFETIME_MARGIN_S,
    _boot_id,
    _pid_namespace,
    _process_start_ticks,
    owner_label,
    owner_state,
)

pytestmark = pytest.mark.docker

# An owner: opens N sandboxes (the first from the main thread, the others from a worker thread, as a pool's items
# do), prints their ids, then waits to be killed.
OWNER = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
from bashgym_assets.sandbox import Sandbox, SandboxSpec
image, run, n, lease = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def one(_=None):
    return Sandbox(SandboxSpec(image=image, lease_s=lease, labels={"bashgym.run": run})).__enter__()
boxes = [one()]
with ThreadPoolExecutor(2) as ex:
    boxes += list(ex.map(one, range(n - 1)))
print(" ".join(b.container_id for b in boxes), flush=True)
time.sleep(900)
"""
# The next owner: any process that opens a sandbox (and closes it cleanly).
NEXT = """
import sys
from bashgym_assets.sandbox import Sandbox, SandboxSpec
with Sandbox(SandboxSpec(image=sys.argv[1], labels={"bashgym.test": "sandbox-leftovers"})) as b:
    assert b.session().run("echo up").stdout == "up\\n"
"""


exists = container_exists


def start_owner(image: str, run: str, n: int, lease: float = 600.0) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, image, run, str(n), str(lease)], stdout=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline().split()
    assert len(line) == n, f"the owner did not start its sandboxes (exit {proc.poll()})"
    return proc, line


def wait_gone(ids: list[str], within_s: float) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not any(exists(c) for c in ids):
            return True
        time.sleep(0.5)
    return False


def test_a_sigkilled_owners_sandboxes_are_reaped_by_the_next_owner_and_listed_first(sandbox_image):
    run = f"leftovers-{secrets.token_hex(4)}"
    dead, dead_ids = start_owner(sandbox_image, run, 2)
    live, live_ids = start_owner(sandbox_image, run, 2)
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait(30)
        assert all(exists(c) for c in dead_ids)  # a SIGKILLed owner runs no clean-up

        listed = subprocess.run(
            [
                sys.executable,
                "-m",
                "bashgym_assets.sandbox",
                "reap",
                "--dry-run",
                "--label",
                f"bashgym.run={run}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0, listed.stderr
        assert "would remove 2 leftover sandbox container(s)" in listed.stdout
        assert all(c[:12] in listed.stdout for c in dead_ids)
        assert not any(c[:12] in listed.stdout for c in live_ids)
        assert f"its owner (pid {dead.pid} on {socket.gethostname()}) has exited" in listed.stdout
        assert all(exists(c) for c in dead_ids)  # a dry run removes nothing

        nxt = subprocess.run(
            [sys.executable, "-c", NEXT, sandbox_image], capture_output=True, text=True, timeout=180
        )
        assert nxt.returncode == 0, nxt.stderr
        assert not any(exists(c) for c in dead_ids)  # the next owner's first sandbox reaped them
        assert all(exists(c) for c in live_ids)  # a live owner's sandboxes are left alone

        live.send_signal(signal.SIGTERM)  # `kill`, `docker stop`, `timeout`: its own go with it
        assert live.wait(60) == -signal.SIGTERM
        assert not any(exists(c) for c in live_ids)
    finally:
        for proc in (dead, live):
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


def test_the_backstop_ends_a_sandbox_whose_owner_stopped_renewing_its_lease(sandbox_image):
    """Nobody reaps it: the container ends itself once the lease (here 3 s) is not renewed, not after the
    episode's worst case (an evaluation's backstop used to be `sleep 12360`)."""
    run = f"lease-{secrets.token_hex(4)}"
    owner, ids = start_owner(sandbox_image, run, 1, lease=3.0)
    owner.send_signal(signal.SIGKILL)
    owner.wait(30)
    assert wait_gone(ids, within_s=60), "the backstop did not end a sandbox whose owner was SIGKILLed"


def test_a_live_owner_keeps_a_short_lease_sandbox_past_many_leases(sandbox_image):
    with Sandbox(
        SandboxSpec(image=sandbox_image, lease_s=2.0, labels={"bashgym.test": "sandbox-leftovers"})
    ) as b:
        shell = b.session()
        shell.run("echo kept > /tmp/state")
        time.sleep(8)  # four leases: the owner's thread renewed them
        assert shell.run("cat /tmp/state").stdout == "kept\n"


def test_the_hard_lifetime_is_the_specs_limits_plus_a_margin(sandbox_image):
    spec = SandboxSpec(
        image=sandbox_image,
        setup=["true", "true"],
        episode_timeout_s=240,
        setup_timeout_s=60,
        labels={"bashgym.test": "sandbox-leftovers"},
    )
    with Sandbox(spec) as b:
        assert b.lifetime_s == int(240 + 60 * 3 + LIFETIME_MARGIN_S)
        args = b.run_as_root(
            "ps -o args= -p $(pgrep -f '^/bin/bash --norc --noprofile /run/.bashgym-backstop')"
        )
        assert args.stdout.split()[-3:] == [str(b.lifetime_s), "600", "10"], args
        labels = b.inspect()["Config"]["Labels"]
        assert int(labels[LABEL_EXPIRES]) - int(labels["bashgym.sandbox.created"]) == b.lifetime_s + 60
        assert labels[LABEL_OWNER] == owner_label()


def test_owner_labels_are_judged_only_where_they_can_be(sandbox_image):
    host, boot, ns, me = socket.gethostname(), _boot_id(), _pid_namespace(), os.getpid()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    assert owner_state(owner_label())[0] == "alive"
    assert owner_state(f"{host}:{gone}:1:{boot}:{ns}")[0] == "dead"
    assert owner_state(f"{host}:{me}:{_process_start_ticks(me)}:0000:{ns}")[0] == "dead"  # rebooted since
    assert owner_state(f"elsewhere:{me}:1:0000:{ns}")[0] == "unknown"  # another machine
    assert owner_state(f"{host}:{gone}:1:{boot}:1")[0] == "unknown"  # another pid namespace
    assert owner_state(f"{host}:{gone}:1")[0] == "dead"  # an older label
    # a container of an owner out of sight is left alone, until it is past its lifetime
    client = docker.from_env()
    run = f"judged-{secrets.token_hex(4)}"
    common = {LABEL_SANDBOX: "1", LABEL_OWNER: f"{host}:{gone}:1:{boot}:1", "bashgym.run": run}
    young = client.containers.create(sandbox_image, ["true"], labels={**common, LABEL_EXPIRES: str(2**40)})
    old = client.containers.create(sandbox_image, ["true"], labels={**common, LABEL_EXPIRES: "1000"})
    try:
        found = {x.container_id: x.why for x in find_leftovers(f"bashgym.run={run}")}
        assert list(found) == [old.id] and found[old.id].startswith("past its hard lifetime")
    finally:
        for c in (young, old):
            c.remove(force=True)


def test_a_driver_that_fails_mid_episode_leaves_no_sandbox_behind(sandbox_image):
    """The evaluation's way: sandboxes opened from worker threads and kept open across turns, then an error in the
    driver (a model that raised): ``closing_sandboxes`` removes them on the way out, not at interpreter exit."""
    from concurrent.futures import ThreadPoolExecutor

    boxes: list[Sandbox] = []

    def one(_: int) -> Sandbox:
        box = Sandbox(SandboxSpec(image=sandbox_image, labels={"bashgym.test": "sandbox-leftovers"}))
        box.start()
        boxes.append(box)
        return box

    with pytest.raises(RuntimeError, match="the model failed"), closing_sandboxes(lambda: boxes):
        with ThreadPoolExecutor(2) as ex:
            list(ex.map(one, range(2)))
        assert all(exists(b.container_id) for b in boxes)
        raise RuntimeError("the model failed")
    assert len(boxes) == 2 and not any(exists(b.container_id) for b in boxes)


def test_a_forked_child_does_not_take_its_parents_sandboxes_with_it(sandbox_image):
    """A child forked by a driver (multiprocessing's fork) runs the exit clean-up when it ends: it must not remove
    the sandboxes the parent is still using."""
    from bashgym_assets.sandbox.sandbox import _close_live_sandboxes

    with Sandbox(SandboxSpec(image=sandbox_image, labels={"bashgym.test": "sandbox-leftovers"})) as b:
        pid = os.fork()
        if pid == 0:  # the child: what its interpreter exit would do
            try:
                _close_live_sandboxes()
            finally:
                os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        assert exists(b.container_id) and b.session().run("echo mine").stdout == "mine\n"
