"""The sandbox machinery failing is never blamed on the scenario (issue 31, item 9). Real faults, injected for
real: the harness process of a setup or a check SIGKILLed from the host (as an OOM kill or a crashed engine shim
would leave it), and a freeze step that answers without its ``keep:`` line (through bash's own ``BASH_ENV`` hook,
which every root exec reads). Once: retried and admitted / kept / checked. Every time: ``infra_error``."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import docker
import pytest
from sandbox_fixtures import COUNT_LINES

from bashgym_assets.rollout.episode import run_episode
from bashgym_assets.rollout.operators import ReferenceOperator
from bashgym_assets.sandbox import Sandbox, SandboxError, SandboxSpec
from bashgym_assets.scenarios.bundle import ScenarioBundle, parse_bundle
from bashgym_assets.scenarios.gate import INFRA_ERROR, TRAIN, gate_bundle, split_for

pytestmark = pytest.mark.docker

COUNT = COUNT_LINES
# What only one harness script's command line holds (the script travels as ``bash -c`` text).
CHECK_HARNESS = b'freeze_all "$@"; umask 077'  # the operator's freeze and the check, in one exec
SETUP_HARNESS = b"BG:%s:%d:%d:%s:%s"  # every setup command, in one exec
_CONTAINER_RE = re.compile(rb"/docker[/-]([0-9a-f]{64})")


def count_bundle(prefix: str, **patch: object) -> ScenarioBundle:
    sid = next(
        f"{prefix}-{os.getpid()}-{i}"
        for i in range(1000)
        if split_for(f"{prefix}-{os.getpid()}-{i}") == TRAIN
    )
    return parse_bundle({**COUNT, "id": sid, **patch})


class HarnessKiller(threading.Thread):
    """SIGKILLs, from the host, the harness process whose command line holds ``marker``, in the containers of one
    scenario only, ``times`` times (None: every time). It waits ``settle`` seconds after finding one, so the
    harness is in the scenario's own command (which sleeps) rather than in a subshell fork of itself."""

    def __init__(self, scenario_id: str, marker: bytes, times: int | None, settle: float = 0.4) -> None:
        super().__init__(daemon=True)
        self.scenario_id, self.marker, self.times, self.settle = scenario_id, marker, times, settle
        self.kills: list[int] = []
        self.halt = threading.Event()
        self._labels: dict[str, str] = {}

    def _scenario_of(self, pid: int) -> str:
        try:
            found = _CONTAINER_RE.search(Path(f"/proc/{pid}/cgroup").read_bytes())
        except OSError:
            return ""
        if found is None:
            return ""
        cid = found.group(1).decode()
        if cid not in self._labels:
            try:
                labels = docker.from_env().api.inspect_container(cid)["Config"]["Labels"] or {}
            except docker.errors.APIError:
                labels = {}
            self._labels[cid] = labels.get("bashgym.scenario", "")
        return self._labels[cid]

    def _candidates(self) -> list[int]:
        pids = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in self.kills:
                continue
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if self.marker in cmdline and self._scenario_of(int(entry.name)) == self.scenario_id:
                pids.append(int(entry.name))
        return pids

    def run(self) -> None:
        while not self.halt.is_set() and (self.times is None or len(self.kills) < self.times):
            if self._candidates():
                time.sleep(self.settle)
                for pid in self._candidates():
                    try:
                        os.kill(pid, signal.SIGKILL)
                        self.kills.append(pid)
                    except ProcessLookupError:
                        pass  # a subshell fork of the harness, gone meanwhile
                    if self.times is not None and len(self.kills) >= self.times:
                        break
            time.sleep(0.02)

    def __enter__(self) -> HarnessKiller:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.join(10)


def test_a_check_harness_killed_once_is_retried_and_the_bundle_admitted(sandbox_image: str) -> None:
    """Before: the harness's death read as the check's exit 137, the bundle rejected as reference_does_not_pass."""
    bundle = count_bundle("infra-check", check="sleep 2; " + COUNT["check"])
    with HarnessKiller(bundle.id, CHECK_HARNESS, times=1) as killer:
        result = gate_bundle(bundle, sandbox_image)
    assert len(killer.kills) == 1
    assert result.admitted and result.reason == "admitted", result.detail


def test_a_setup_harness_killed_every_time_is_an_infra_error_not_a_setup_failure(sandbox_image: str) -> None:
    """Before: retried, then filed as setup_failed, the scenario's fault."""
    bundle = count_bundle("infra-setup", setup=[*COUNT["setup"], "sleep 3"])
    with HarnessKiller(bundle.id, SETUP_HARNESS, times=None) as killer:
        result = gate_bundle(bundle, sandbox_image)
    assert len(killer.kills) == 2  # the first attempt and its retry
    assert not result.admitted and result.reason == INFRA_ERROR, result
    assert result.detail.startswith("infra_error: ") and "never reported" in result.detail


def test_a_rollout_whose_check_harness_dies_once_is_replayed_and_kept(sandbox_image: str) -> None:
    """Before: the reference's good trajectory was thrown away as check_failed."""
    bundle = count_bundle("infra-rollout", check="sleep 2; " + COUNT["check"])
    with HarnessKiller(bundle.id, CHECK_HARNESS, times=1) as killer:
        record = run_episode(bundle, ReferenceOperator(), sandbox_image, split=TRAIN)
    assert len(killer.kills) == 1
    assert record.kept and record.verified, record.reject_reason


# The fault: bash sources $BASH_ENV before any non-interactive script, so this file runs first in every root exec
# of the sandbox (spec.env reaches them); in the freeze step it ends the exec, exit 0, before the keep: line.
ONCE = "[ -e /run/lock/fault-spent ] || { : > /run/lock/fault-spent; exit 0; }"
FREEZE_FAULT = 'case "$BASH_EXECUTION_STRING" in *"printf \'keep:"*) %s ;; esac\n'


def root_box_with_a_silent_freeze(image: str, once: bool) -> Sandbox:
    fault = FREEZE_FAULT % (ONCE if once else "exit 0")
    return Sandbox(
        SandboxSpec(
            image=image,
            user="root",
            files={"/etc/bashgym-fault.sh": fault},
            env={"BASH_ENV": "/etc/bashgym-fault.sh"},
            labels={"bashgym.test": "infra-faults"},
        )
    )


def test_a_freeze_that_answers_without_its_keep_line_once_is_retried(sandbox_image: str) -> None:
    """A root operator's turn ends with the freeze step (then the host's tamper check, then the check). Before:
    a freeze answering without its keep: line refused the check (exit None: a failed episode, a "tampering" -1 in
    GRPO). Now it is tried again, and the verdict is the check's."""
    with root_box_with_a_silent_freeze(sandbox_image, once=True) as box:
        shell = box.session()
        shell.run("echo done > /root/answer")
        result = box.run_check("grep -qx done /root/answer")
        assert box.run_as_root("test -e /run/lock/fault-spent").exit_code == 0  # the fault did fire
    assert result.exit_code == 0 and not result.timed_out, result


def test_a_freeze_that_never_answers_is_the_machinerys_failure(sandbox_image: str) -> None:
    with root_box_with_a_silent_freeze(sandbox_image, once=False) as box:
        box.session().run("echo done > /root/answer")
        with pytest.raises(
            SandboxError, match="infrastructure: the freeze step answered twice without its keep"
        ):
            box.run_check("grep -qx done /root/answer")
