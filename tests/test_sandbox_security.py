"""Hostile commands against real containers: each is run through an operator session, each must stay contained
(host and a neighbouring sandbox unaffected) and the session's result must report what happened.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import docker
import pytest

from bashgym_assets.sandbox import Sandbox, SandboxSpec
from bashgym_assets.sandbox.layout import SEED_MOUNT
from bashgym_assets.sandbox.sandbox import SEED_FOLDER_PREFIX, seed_bind_ok

pytestmark = pytest.mark.docker
LABELS = {"bashgym.test": "sandbox-security"}


def spec(image: str, **kw) -> SandboxSpec:
    kw.setdefault("command_timeout_s", 20)
    return SandboxSpec(image=image, labels=LABELS, **kw)


def cgroup_value(box: Sandbox, controller: str, name: str) -> int:
    path = Path(f"/sys/fs/cgroup/{controller}/docker/{box.container_id}/{name}")
    if not path.exists():  # cgroup v2 layout
        path = Path(
            f"/sys/fs/cgroup/system.slice/docker-{box.container_id}.scope/{name.replace('pids.', 'pids.')}"
        )
    return int(path.read_text().split()[0])


@pytest.fixture(scope="module")
def neighbour(sandbox_image: str):
    """Another sandbox living through every attack: it must keep working and see nothing of them.

    Its session lives as long as the module takes, however loaded the machine: a 600 s episode cap (the default)
    ended it mid-module under load. The lease still removes it within minutes if pytest is killed."""
    with Sandbox(spec(sandbox_image, episode_timeout_s=6 * 3600)) as b:
        s = b.session()
        s.run("echo neighbour-state > ~/mine; cd /tmp")
        yield s


@pytest.fixture(autouse=True)
def host_and_neighbour_unaffected(neighbour):
    yield
    r = neighbour.run("cat ~/mine; pwd; ls /tmp | wc -l")
    assert r.stdout == "neighbour-state\n/tmp\n0\n", r
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


@pytest.fixture
def box(sandbox_image: str):
    with Sandbox(spec(sandbox_image)) as b:
        yield b


@pytest.fixture
def root_box(sandbox_image: str):
    with Sandbox(spec(sandbox_image, user="root")) as b:
        yield b


# ---- resources -----------------------------------------------------------------------------------------------
def test_fork_bomb_is_capped_by_the_pids_limit(sandbox_image):
    with Sandbox(spec(sandbox_image, pids_limit=64)) as b:
        s = b.session()
        r = s.run("bomb() { bomb | bomb & }; bomb; sleep 2; echo survived", timeout_s=8)
        assert r.timed_out or "Resource temporarily unavailable" in r.stderr or "retry" in r.stderr, r
        assert cgroup_value(b, "pids", "pids.current") <= 64
        assert cgroup_value(b, "pids", "pids.max") == 64
        # The checker gets in, and nothing of the bomb runs beside it: past FROZEN_LIMIT processes the bomb is
        # killed first, below it what is left is frozen (state T) until the check ends. Which of the two depends on
        # how many bomb processes a loaded machine had alive at that instant, so running ones are what is counted.
        check = b.run_check("echo checked; ps -e -o stat= | grep -vc '^T'")
        assert check.exit_code == 0 and check.stdout.startswith("checked\n")
        assert int(check.stdout.split()[1]) < 12
        cid = b.container_id
    assert subprocess.run(["docker", "inspect", cid], capture_output=True).returncode != 0  # removed anyway


def test_memory_bomb_is_killed_inside_the_container(sandbox_image):
    with Sandbox(spec(sandbox_image, memory_mb=256)) as b:
        s = b.session()
        r = s.run("python3 -c \"x = b'x' * (2 * 1024**3)\"; echo rc=$?")
        assert r.stdout.strip() in ("rc=137", "rc=1"), r  # OOM-killed (SIGKILL) or MemoryError
        assert cgroup_value(b, "memory", "memory.max_usage_in_bytes") <= 256 * 1024 * 1024
        assert s.run("echo alive").stdout == "alive\n"


def test_disk_fill_hits_a_size_cap_not_the_host_disk(box):
    s = box.session()
    r = s.run("dd if=/dev/zero of=~/fill bs=1M count=100000")
    assert r.exit_code == 1 and "No space left on device" in r.stderr
    size = int(s.run("stat -c %s ~/fill").stdout)
    assert size <= 128 * 1024 * 1024 + 1024 * 1024
    assert "Permission denied" in s.run("dd if=/dev/zero of=/var/fill bs=1M count=1").stderr
    assert "Read-only" in s.run("touch /proc/x /sys/x").stderr or s.run("true").exit_code == 0
    assert s.run("rm ~/fill && echo freed").stdout == "freed\n"


def test_root_disk_fill_is_capped_per_file(sandbox_image):
    with Sandbox(spec(sandbox_image, user="root", max_file_mb=32)) as b:
        r = b.session().run("dd if=/dev/zero of=/var/big bs=1M count=1000; echo rc=$?; stat -c %s /var/big")
        rc, size = r.stdout.split()[-2:]
        assert rc != "rc=0" and int(size) <= 32 * 1024 * 1024


def test_pid_exhaustion_is_contained(sandbox_image):
    with Sandbox(spec(sandbox_image, pids_limit=48)) as b:
        s = b.session()
        r = s.run("for i in $(seq 200); do sleep 300 & done; echo looped", timeout_s=6)
        assert r.timed_out or "Resource temporarily unavailable" in r.stderr, r
        assert cgroup_value(b, "pids", "pids.current") <= 48


# ---- network -------------------------------------------------------------------------------------------------
def test_no_tcp_egress(box):
    r = box.session().run(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\""
    )
    assert r.exit_code == 1 and "Network is unreachable" in r.stderr
    r = box.session().run(
        "python3 -c \"import socket; socket.create_connection(('172.17.0.1', 2375), timeout=3)\""
    )
    assert r.exit_code == 1 and "unreachable" in r.stderr


def test_no_dns(box):
    s = box.session()
    assert s.run("getent hosts deb.debian.org").exit_code == 2
    r = s.run("python3 -c \"import socket; socket.getaddrinfo('pypi.org', 443)\"")
    assert r.exit_code == 1 and "gaierror" in r.stderr


def test_no_icmp_and_only_loopback(box):
    s = box.session()
    r = s.run(
        'python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)"'
    )
    assert r.exit_code == 1 and "PermissionError" in r.stderr
    r = s.run(
        'python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); '
        "s.sendto(b'\\x08\\0\\0\\0\\0\\0\\0\\0', ('8.8.8.8', 0))\""
    )
    assert r.exit_code == 1 and ("unreachable" in r.stderr or "PermissionError" in r.stderr)
    interfaces = s.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").stdout.split()
    assert interfaces == ["lo"]


def test_no_raw_packet_sockets_even_as_root(root_box):
    r = root_box.session().run(
        'python3 -c "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))"'
    )
    assert r.exit_code == 1 and "PermissionError" in r.stderr


# ---- kernel and privileges -----------------------------------------------------------------------------------
def test_mount_is_refused_even_as_root(root_box):
    r = root_box.session().run("mkdir -p /mnt/x && mount -t tmpfs none /mnt/x")
    assert r.exit_code != 0 and "permission denied" in r.stderr.lower()


def test_sysrq_trigger_is_not_writable_even_as_root(root_box):
    r = root_box.session().run("echo h > /proc/sysrq-trigger")
    # masked read-only by Docker, or absent from this kernel: either way nothing is triggered
    assert r.exit_code == 1 and any(w in r.stderr for w in ("Read-only", "Permission denied", "No such file"))


def test_kernel_modules_cannot_be_loaded(root_box):
    r = root_box.session().run(
        'python3 -c "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); '
        "r = libc.syscall(313, -1, b'', 0); print(r, os.strerror(ctypes.get_errno()))\""
    )  # finit_module
    assert r.stdout.startswith("-1 ") and "not permitted" in r.stdout
    assert root_box.session().run("echo /tmp/x > /proc/sys/kernel/modprobe").exit_code == 1


def test_setuid_binaries_grant_nothing(sandbox_image):
    with Sandbox(
        spec(
            sandbox_image,
            setup=["cp /bin/bash /usr/local/bin/rootbash", "chmod 4755 /usr/local/bin/rootbash"],
        )
    ) as b:
        assert b.setup().ok
        s = b.session()
        assert s.run("ls -l /usr/local/bin/rootbash").stdout.startswith("-rwsr-xr-x")
        assert s.run("rootbash -p -c 'id -u'").stdout == "1000\n"
        assert s.run("su -c id root </dev/null").exit_code != 0


def test_proc_and_sys_are_not_writable(root_box):
    s = root_box.session()
    r = s.run("echo 1 > /proc/sys/kernel/panic")
    assert r.exit_code == 1 and "Read-only" in r.stderr
    r = s.run("echo 1 > /proc/sys/vm/drop_caches")
    assert r.exit_code == 1
    r = s.run("touch /sys/kernel/x; echo 1 > /sys/fs/cgroup/pids/pids.max")
    assert r.exit_code == 1 and "Read-only" in r.stderr


def test_capabilities_are_empty_for_the_operator_and_minimal_for_root(box, root_box):
    status = box.session().run("grep -E '^(Cap(Inh|Prm|Eff|Amb)|NoNewPrivs)' /proc/self/status").stdout
    for line in status.splitlines():
        key, value = line.split(":")
        assert value.strip() in ("0000000000000000", "1"), line
    assert "NoNewPrivs:\t1" in status
    root = root_box.session().run("grep CapEff /proc/self/status").stdout
    assert root.split()[1] == f"{(1 << 0) | (1 << 1) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7):016x}"


def test_host_files_are_out_of_reach(box, tmp_path):
    secret = secrets.token_hex(12)
    host_file = Path("/tmp") / f"bashgym-host-secret-{secret}"
    host_file.write_text(secret)
    try:
        s = box.session()
        assert s.run(f"cat {host_file}").exit_code == 1
        hits = s.run(f"grep -rsl {secret} /etc /home /tmp /root /var /srv /opt /mnt /media /run; echo done")
        assert hits.stdout == "done\n"
        mounts = s.run("cat /proc/mounts").stdout
        host_paths = [ln.split()[1] for ln in mounts.splitlines() if ln.split()[0].startswith("/dev/")]
        # only Docker's own per-container hosts/hostname/resolv.conf files, the read-only init binary and the
        # sandbox's own seed (a read-only bind of a root-only host file the operator cannot read)
        assert set(host_paths) <= {
            "/etc/resolv.conf",
            "/etc/hostname",
            "/etc/hosts",
            "/usr/sbin/docker-init",
            SEED_MOUNT,
        }
        assert all(
            " ro," in ln
            for ln in mounts.splitlines()
            if f" {SEED_MOUNT} " in ln or " /usr/sbin/docker-init " in ln
        )
        seed = s.run(f"cat {SEED_MOUNT} >/dev/null")
        assert seed.exit_code == 1 or "No such file" in seed.stderr, seed
        assert s.run("cat /proc/1/environ").exit_code == 1
    finally:
        host_file.unlink()


def test_no_docker_socket(box):
    s = box.session()
    assert s.run("ls /var/run/docker.sock /run/docker.sock").exit_code == 2
    assert s.run("find / -xdev -name '*.sock' 2>/dev/null").stdout == ""
    r = s.run("python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('/var/run/docker.sock')\"")
    assert r.exit_code == 1 and "FileNotFoundError" in r.stderr


def test_operator_cannot_signal_root_processes(box):
    s = box.session()
    r = s.run("kill -9 1")
    assert r.exit_code == 1 and "Operation not permitted" in r.stderr
    assert box.inspect()["State"]["Running"]


# ---- the shell and its episode ---------------------------------------------------------------------------------
def test_killing_the_shell_is_reported(box):
    s = box.session()
    r = s.run("kill -9 $$")
    assert s.exited and r.exit_code is None and not r.terminated
    assert box.run_check("true").exit_code == 0  # the container is intact for the check


def test_killing_every_own_process_is_reported(box):
    s = box.session()
    r = s.run("sleep 100 & sh -c 'kill -9 -1'")
    assert s.exited and r.exit_code is None and not r.terminated


def test_infinite_output_is_capped_and_the_session_survives(sandbox_image):
    with Sandbox(spec(sandbox_image, output_limit_bytes=4096)) as b:
        s = b.session()
        r = s.run("yes", timeout_s=2)
        assert r.timed_out and r.exit_code is None
        assert r.stdout_truncated_bytes > 1_000_000 and len(r.stdout) < 4096 + 100
        assert r.stdout.startswith("y\ny\n")
        assert s.run("echo after").stdout == "after\n"


def test_never_ending_command_times_out_and_is_gone(box):
    s = box.session()
    r = s.run("sleep infinity", timeout_s=1)
    assert r.timed_out and r.exit_code is None
    assert "sleep infinity" not in s.run("ps -e -o args=").stdout
    assert s.run("echo usable").stdout == "usable\n"


def test_command_ignoring_sigterm_and_sigint_is_killed(box):
    s = box.session()
    script = (
        "import signal, time; [signal.signal(x, signal.SIG_IGN) for x in (signal.SIGTERM, signal.SIGINT)]; "
        "print('immune', flush=True); time.sleep(1000)"
    )
    r = s.run(f'python3 -c "{script}"', timeout_s=1)
    assert r.timed_out and r.stdout == "immune\n"
    assert "immune" not in s.run("ps -e -o args=").stdout
    assert s.run("echo usable").stdout == "usable\n"


def test_background_processes_do_not_outlive_exit(box):
    s = box.session()
    r = s.run("nohup sh -c 'sleep 1; echo late > /tmp/late' >/dev/null 2>&1 & setsid sleep 300 & exit 0")
    assert r.terminated and r.exit_code == 0 and s.exited
    after = box.run_as_root("sleep 1.5; ls /tmp/late 2>&1; ps -u operator -o pid= | wc -l")
    assert "No such file" in after.stdout and after.stdout.strip().endswith("0")


def test_episode_time_cap_ends_the_session(sandbox_image):
    with Sandbox(spec(sandbox_image, episode_timeout_s=2.0)) as b:
        s = b.session()
        assert s.run("sleep 0.5; echo within").stdout == "within\n"
        r = s.run("sleep 30")
        assert r.timed_out and s.exited and "episode" in r.stderr
        assert r.duration_s < 30


def test_checker_is_invisible_and_tamper_proof(sandbox_image):
    secret = secrets.token_hex(16)
    with Sandbox(spec(sandbox_image)) as b:
        s = b.session()
        assert (
            s.run(f"grep -rs {secret} / --exclude-dir=proc --exclude-dir=sys; echo none").stdout == "none\n"
        )
        assert s.run("mkdir /run/bashgym/evil").exit_code == 1
        assert s.run("ls /run/bashgym/session >/dev/null; touch /run/bashgym/check.x").exit_code == 1
        s.run(
            "(while :; do cp -r /run/bashgym/check.* ~/stolen 2>/dev/null; cat /run/bashgym/*/check >> ~/stolen2 "
            "2>/dev/null; sleep 0.01; done) >/dev/null 2>&1 &"
        )
        s.run("printf '#!/bin/sh\\nexit 0\\n' > /tmp/check; chmod +x /tmp/check; ln -s /tmp/check ~/check")
        check = b.run_check(
            f"echo {secret} > /root/seen; test ! -e /home/operator/stolen; echo verdict-{secret}"
        )
        assert check.exit_code == 0 and check.stdout == f"verdict-{secret}\n"
        assert s.exited  # the operator's turn ended before the checker went in
        assert b.run_as_root("ls /run/bashgym").stdout == "ready\nsession\n"  # the checker is gone
        assert b.run_as_root(f"grep -rsl {secret} /home /tmp /run; echo none").stdout == "none\n"
        assert (
            b.run_as_root("test ! -e /home/operator/stolen && test ! -s /home/operator/stolen2").exit_code
            == 0
        )
        assert b.run_check("exit 3").exit_code == 3
        assert b.run_check("sleep 10", timeout_s=1).timed_out


def test_sandboxes_are_isolated_from_each_other(box, sandbox_image):
    s = box.session()
    s.run("echo theirs > /tmp/shared-name; sleep 300 &")
    with Sandbox(spec(sandbox_image)) as other:
        o = other.session()
        assert o.run("cat /tmp/shared-name").exit_code == 1
        assert "sleep 300" not in o.run("ps -e -o args=").stdout


def test_container_configuration_is_locked_down(box):
    info = box.inspect()
    hc = info["HostConfig"]
    assert hc["NetworkMode"] == "none" and hc["CapDrop"] == ["ALL"]
    assert sorted(hc["CapAdd"]) == sorted(["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"])
    assert "no-new-privileges" in hc["SecurityOpt"] and hc["Init"] is True and not hc["Privileged"]
    assert hc["Memory"] == 512 * 1024 * 1024 and hc["PidsLimit"] == 256 and hc["NanoCpus"] == 10**9
    assert not hc.get("Binds")
    # the one bind: the seed, read-only, from this process's own seed folder (sandbox.seed_bind_ok)
    binds = [m for m in info["Mounts"] if m["Type"] == "bind"]
    assert all(
        m["Destination"] == SEED_MOUNT and not m["RW"] and SEED_FOLDER_PREFIX in m["Source"] for m in binds
    ), binds
    assert len(binds) == (1 if seed_bind_ok() else 0)
    assert set(hc["Tmpfs"]) == {"/tmp", "/var/tmp", "/run", "/home/operator"}
    assert info["Config"]["Labels"]["bashgym.test"] == "sandbox-security"
    assert os.path.exists("/var/run/docker.sock")  # (the host has one; the sandbox has none, see above)


def test_root_killing_the_container_is_a_clear_sandbox_error(sandbox_image):
    from bashgym_assets.sandbox import SandboxError

    with Sandbox(spec(sandbox_image, user="root")) as b:
        b.session().run("kill -9 -1")  # as root this reaches the container's main process
        for _ in range(100):  # the container stops (and --rm removes it) shortly after
            try:
                if not b.inspect()["State"]["Running"]:
                    break
            except docker.errors.NotFound:
                break
            time.sleep(0.05)
        with pytest.raises(SandboxError, match="no longer running|gone or stopped"):
            b.run_check("true")


def test_root_disk_fill_across_many_files_is_stopped_by_the_disk_watchdog(sandbox_image):
    """The per-file cap does not bound many files; the watchdog ends the session once the layer outgrows its
    budget, long before the host disk (the loop below would write 6.4 GB)."""
    with Sandbox(spec(sandbox_image, user="root", max_file_mb=64, disk_budget_mb=256)) as b:
        s = b.session()
        r = s.run(
            "for i in $(seq 1 100); do head -c 64M /dev/zero > /var/fill$i; done; echo finished",
            timeout_s=120,
        )
        assert s.exited and b.disk_budget_exceeded, r
        assert "finished" not in r.stdout and "disk budget (256 MB" in r.stderr
        size = b.writable_layer_bytes()
        assert size is not None and size < 3 * 1024**3, f"the layer grew to {size} bytes"


def test_disk_watchdog_leaves_normal_work_alone(box):
    s = box.session()
    assert s.run("head -c 4M /dev/zero > ~/ok && sleep 1.2 && echo done").stdout == "done\n"
    assert not box.disk_budget_exceeded and not s.exited
    assert 0 <= box.writable_layer_bytes() < 64 * 1024**2  # the home is tmpfs: the layer barely grew


# ---- what the outside hardening report broke (issue 13, items 1-5) ----------------------------------------------
def test_flood_after_a_silenced_end_marker_is_capped(sandbox_image):
    """The operator silences one stream's marker and floods the other from a background job: every byte read
    still counts against a cap, so the harness's memory stays flat until the command times out."""
    import resource

    with Sandbox(spec(sandbox_image, output_limit_bytes=4096)) as b:
        s = b.session()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        r = s.run("exec 62>/dev/null; yes flood &", timeout_s=6)
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert r.timed_out and r.exit_code is None
        assert grown_mb < 48, f"the harness grew by {grown_mb:.0f} MB reading a flood"


def test_scanner_caps_output_after_its_marker():
    import re

    from bashgym_assets.sandbox.session import _Scanner

    sc = _Scanner(1024)
    sc.arm(re.compile(rb"\x1eEND\x1e"), 1024)
    sc.feed(b"before\x1eEND\x1e")
    for _ in range(2000):
        sc.feed(b"x" * 10_000 + b"\n")
    sc.feed(b"the end")
    assert len(sc.pending) <= 3 * 1024 + 200
    rest, dropped = sc.restart()
    assert rest.endswith(b"the end") and dropped > 19_000_000


HOPPER = (
    "printf '%s\\n' '#!/bin/bash' 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr \"\\\\0\" \" \" >> ~/seen' "
    "'~/hop.sh & exit 0' > ~/hop.sh; chmod +x ~/hop.sh"
)


def test_fork_and_exit_hoppers_cannot_outrun_the_freeze(sandbox_image):
    """A process that forks its successor and exits in a loop, beside stopped decoys that slow any /proc scan,
    is frozen in one kernel-side step: it never sees the checker's command line."""
    secret = secrets.token_hex(12)
    with Sandbox(spec(sandbox_image)) as b:
        s = b.session()
        s.run("for i in $(seq 40); do sleep 1000 & kill -STOP $!; done")
        s.run(HOPPER)
        s.run("for i in 1 2 3 4; do ~/hop.sh & done; sleep 0.5")
        check = b.run_check(f"bash -c 'sleep 1.5' check-{secret}; echo verdict")
        assert check.exit_code == 0 and check.stdout == "verdict\n", check
        seen = b.run_as_root(
            "cat /home/operator/seen | wc -c; grep -c check- /home/operator/seen"
        ).stdout.split()
        assert int(seen[0]) > 0 and seen[1] == "0", "a hopper read the checker's command line"
        assert "hop.sh" not in b.run_as_root("ps -e -o args=").stdout  # gone after the check


def test_setup_daemons_keep_their_state_through_the_freeze(sandbox_image):
    """The freeze stops everything, then resumes the setup's daemons that were running (pid AND start time):
    a daemon the operator paused stays paused, the others run; the operator's own processes stay frozen."""
    loop = "printf '%s\\n' '#!/bin/bash' 'while :; do sleep 1000 & wait $!; done' > /usr/local/bin/{0}; chmod 755 /usr/local/bin/{0}; runuser -u operator -- setsid -f /usr/local/bin/{0} </dev/null >/dev/null 2>&1"  # noqa: E501
    with Sandbox(
        spec(sandbox_image, setup=[loop.format("frontend"), loop.format("encoder"), "sleep 0.3"])
    ) as b:
        assert b.setup().ok
        s = b.session()
        assert s.run("kill -STOP $(pgrep -x encoder); sleep 300 &").exit_code == 0
        check = b.run_check(
            "for n in frontend encoder; do ps -o stat= -p $(pgrep -x $n) | cut -c1; done; "
            "ps -o stat= -C sleep | cut -c1 | sort | uniq -c | tr -s ' ' | sort | tail -1"
        )
        first, second, _ = check.stdout.splitlines()
        assert first != "T" and second == "T", check.stdout


def test_ptrace_between_sandbox_processes_is_denied(sandbox_image):
    attach = (
        'sleep 100 & python3 -c "import ctypes,os,sys; libc=ctypes.CDLL(None,use_errno=True); '
        'r=libc.ptrace(16,int(sys.argv[1]),0,0); print(r, os.strerror(ctypes.get_errno()))" $!'
    )
    with Sandbox(spec(sandbox_image)) as b:
        assert "Operation not permitted" in b.session().run(attach).stdout
    with Sandbox(spec(sandbox_image, user="root")) as b:  # not even root, and not on setup's daemons
        assert "Operation not permitted" in b.session().run(attach).stdout
    with Sandbox(spec(sandbox_image, allow_ptrace=True)) as b:  # a scenario that needs it says so
        assert b.session().run(attach).stdout.startswith("0 ")


def test_a_planted_tool_in_usr_local_cannot_forge_the_verdict(root_box):
    s = root_box.session()
    s.run(
        "for t in grep test bash timeout env; do printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/$t; "
        "chmod 755 /usr/local/bin/$t; done"
    )
    check = root_box.run_check("grep -q never-there /etc/hostname")
    assert check.exit_code == 1, check


@pytest.mark.parametrize(
    "tamper",
    [
        "printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/grep",
        "cp /usr/bin/grep /tmp/g && cp /usr/bin/true /usr/bin/grep && cp /tmp/g /usr/bin/grep",  # put back: still seen
        "echo /tmp/evil.so > /etc/ld.so.preload",
        "ln -sf /usr/bin/true /etc/alternatives/awk",
    ],
)
def test_tampering_with_the_checkers_tools_fails_the_episode(sandbox_image, tamper):
    with Sandbox(spec(sandbox_image, user="root")) as b:
        s = b.session()
        assert s.run(tamper).exit_code == 0
        check = b.run_check("grep -q never-there /etc/hostname || exit 1; exit 0")
        assert check.exit_code is None and "tampering" in check.stderr, check


def test_legitimate_root_work_is_not_tampering(sandbox_image):
    with Sandbox(spec(sandbox_image, user="root", setup=["cp /usr/bin/true /usr/bin/setup-tool"])) as b:
        assert b.setup().ok
        s = b.session()
        s.run(
            "printf '#!/bin/sh\\necho hi\\n' > /usr/local/bin/newtool; chmod 755 /usr/local/bin/newtool; "
            "useradd -m deploy; echo x > /etc/motd"
        )
        check = b.run_check("newtool | grep -qx hi && id deploy >/dev/null")
        assert check.exit_code == 0, check


def test_disk_written_by_setup_is_bounded(sandbox_image):
    fill = "for i in $(seq 1 100); do head -c 64M /dev/zero > /var/fill$i; done"
    with Sandbox(spec(sandbox_image, max_file_mb=64, disk_budget_mb=256, setup=[fill])) as b:
        res = b.setup()
        assert not res.ok and not res.infrastructure_error and "disk budget" in res.error, res
        size = b.writable_layer_bytes()
        assert size is None or size < 3 * 1024**3


def test_inodes_are_bounded_in_tmpfs_and_in_the_layer(sandbox_image):
    with Sandbox(spec(sandbox_image, inode_budget=2000)) as b:
        r = b.session().run("cd ~ && for i in $(seq 5000); do : > f$i || break; done; ls | wc -l")
        assert int(r.stdout.split()[-1]) < 2100 and "No space left" in r.stderr
    with Sandbox(spec(sandbox_image, user="root", inode_budget=2000)) as b:
        s = b.session()
        r = s.run(
            "mkdir /var/many && cd /var/many && i=0; while :; do : > f$i; i=$((i+1)); done; echo finished",
            timeout_s=90,
        )  # the watchdog's diff runs every 10 s: it ends this long before the time limit
        # the watchdog ended it, not the command's time limit (no wall-clock bound: a loaded machine is slower)
        assert s.exited and b.inode_budget_exceeded and not r.timed_out, r
        assert "inode budget" in r.stderr


def test_pid1_output_does_not_grow_a_host_log(root_box):
    assert root_box.inspect()["HostConfig"]["LogConfig"]["Type"] == "none"
    root_box.session().run("head -c 20M /dev/zero > /proc/1/fd/1; echo ok")
    assert root_box.inspect()["LogPath"] in ("", None) or not os.path.exists(root_box.inspect()["LogPath"])


def test_a_reader_of_the_shells_input_does_not_wedge_the_session(box):
    s = box.session()
    s.run("(while :; do timeout 0.3 cat /proc/$$/fd/0 >> /tmp/stolen 2>/dev/null; done) &")
    # The thief and the shell race for each line; whenever the thief wins one, the timeout's clean-up must end it
    # for good: one swallowed line at most, and every command after it answers.
    results = []
    for _ in range(12):
        results.append(s.run("echo alive", timeout_s=3))
        if results[-1].timed_out:
            results += [s.run("echo alive", timeout_s=3) for _ in range(3)]
            break
    assert sum(r.timed_out for r in results) <= 1, results
    assert results[-1].stdout == "alive\n" and not s.exited, results


def test_framing_functions_cannot_be_redefined(box):
    s = box.session()
    r = s.run("__bashgym_end() { printf '\\036BG:%s:0\\036' \"$1\" >&61; }; false")
    assert r.exit_code == 1 and "readonly" in r.stderr, r
    assert s.run("(exit 7)").exit_code == 7


def test_pool_start_reaps_containers_of_dead_owners(sandbox_image):
    from bashgym_assets.sandbox import SandboxPool
    from bashgym_assets.sandbox.sandbox import LABEL_OWNER, LABEL_SANDBOX

    client = docker.from_env()
    orphan = client.containers.create(
        sandbox_image, ["sleep", "300"], labels={LABEL_SANDBOX: "1", LABEL_OWNER: "nohost:999999:1", **LABELS}
    )
    from bashgym_assets.sandbox import sandbox as sandbox_module

    sandbox_module._REAPED.clear()  # once per process: earlier pools in this test session have reaped already
    SandboxPool(1).map(lambda x: x, [1])
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(orphan.id)
