"""A process with many sandboxes open holds many descriptors: the sandbox's stream must still work when its socket
is numbered past 1024 (select() refuses such a descriptor: at ~127 live sandboxes in one process, half of them failed
with 'filedescriptor out of range in select()')."""

from __future__ import annotations

import os

import pytest

from bashgym_assets.sandbox import Sandbox, SandboxSpec

pytestmark = pytest.mark.docker


def test_a_sandbox_works_when_its_descriptors_are_numbered_past_1024(sandbox_image: str) -> None:
    held = []
    try:
        while not held or held[-1] < 1100:  # push the next descriptors this process opens past 1024
            held.append(os.open(os.devnull, os.O_RDONLY))
        with Sandbox(SandboxSpec(image=sandbox_image, setup=["echo ready > /tmp/mark"])) as box:
            assert box.setup().ok
            result = box.session().run("cat /tmp/mark; echo $((6 * 7))")
            assert result.exit_code == 0 and result.stdout.split() == ["ready", "42"]
            assert box.run_check("grep -qx ready /tmp/mark").exit_code == 0
    finally:
        for fd in held:
            os.close(fd)
