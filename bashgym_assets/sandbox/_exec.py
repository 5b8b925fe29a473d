"""Low-level plumbing: the Docker client, raw exec sockets, stream demultiplexing and capped output buffers.

Kept apart from the sandbox logic so the framing rules (what counts as a command's output) live in one place.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from typing import Any

import docker

from bashgym_assets.sandbox.models import CommandResult

_local = threading.local()


def docker_client() -> docker.DockerClient:
    """One client per thread: the SDK's HTTP session is not meant to be shared across threads."""
    client = getattr(_local, "client", None)
    if client is None:
        client = docker.from_env(timeout=120)
        _local.client = client
    return client


class CappedBuffer:
    """Keeps the first and last bytes of a stream (``limit`` in all) and counts what was cut in between.

    Why: a command printing forever must neither exhaust the host's memory nor lose the end of its output,
    which is usually where the error is.
    """

    def __init__(self, limit: int) -> None:
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_limit > 0:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit + 65536:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def cut(self) -> int:
        kept = len(self.head) + min(len(self.tail), self.tail_limit)
        return self.total - kept

    def text(self) -> tuple[str, int]:
        """The kept output as text (binary bytes become U+FFFD) and the number of bytes cut."""
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        cut = self.cut
        if cut <= 0:
            return (bytes(self.head) + tail).decode("utf-8", errors="replace"), 0
        return (
            bytes(self.head).decode("utf-8", errors="replace")
            + f"\n[... {cut} bytes of output cut ...]\n"
            + tail.decode("utf-8", errors="replace")
        ), cut


class Demux:
    """Splits Docker's multiplexed exec stream (8-byte frame headers) into stdout and stderr payloads."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        frames = []
        while len(self._buf) >= 8:
            kind = self._buf[0]
            size = struct.unpack(">I", self._buf[4:8])[0]
            if len(self._buf) < 8 + size:
                break
            frames.append((kind, bytes(self._buf[8 : 8 + size])))
            del self._buf[: 8 + size]
        return frames


class ExecStream:
    """One running ``docker exec`` with its raw, bidirectional, multiplexed socket."""

    def __init__(
        self,
        api: Any,
        container_id: str,
        cmd: list[str],
        user: str,
        env: dict[str, str],
        workdir: str,
        stdin: bool,
    ) -> None:
        self.api = api
        self.exec_id = api.exec_create(
            container_id,
            cmd,
            stdout=True,
            stderr=True,
            stdin=stdin,
            tty=False,
            user=user,
            environment=env,
            workdir=workdir,
        )["Id"]
        raw = api.exec_start(self.exec_id, socket=True)
        self._holder = raw  # keep the response object alive with its socket
        self.sock: socket.socket = getattr(raw, "_sock", raw)
        self.sock.setblocking(True)
        # poll, not select: select() refuses a descriptor numbered 1024 or more, which one process reaches at
        # ~127 live sandboxes (about 8 descriptors each); poll has no such ceiling.
        self._poller = select.poll()
        self._poller.register(self.sock, select.POLLIN | select.POLLPRI)
        self.demux = Demux()
        self.eof = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def read(self, timeout_s: float) -> list[tuple[int, bytes]] | None:
        """Frames that arrived within ``timeout_s`` ([] if none); None once the stream has ended."""
        if self.eof:
            return None
        ready = self._poller.poll(max(0, int(timeout_s * 1000 + 0.999)))
        if not ready:
            return []
        try:
            data = self.sock.recv(1 << 20)
        except (ConnectionResetError, OSError):
            data = b""
        if not data:
            self.eof = True
            return None
        return self.demux.feed(data)

    def exit_code(self, wait_s: float = 2.0) -> int | None:
        """The exec's exit code once Docker has it (None if it is still running after ``wait_s``)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                info = self.api.exec_inspect(self.exec_id)
            except docker.errors.APIError:  # the container (and its execs) are gone
                return None
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)

    def close(self) -> None:
        for obj in (self.sock, self._holder):
            with contextlib.suppress(Exception):
                obj.close()


def collect(
    stream: ExecStream, deadline: float, limit: int, stdin_data: bytes | None = None, err: Any = None
) -> tuple[CappedBuffer, Any, bool]:
    """Read an exec to its end (or ``deadline``): capped stdout, stderr (into ``err`` when given: anything with
    ``feed``, e.g. a ``MarkerSplitter`` that finds the harness's report line), and whether it ended."""
    out = CappedBuffer(limit)
    err = CappedBuffer(limit) if err is None else err
    if stdin_data is not None:
        if stdin_data:
            stream.send(stdin_data)
        stream.close_stdin()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return out, err, False
        frames = stream.read(min(left, 1.0))
        if frames is None:
            return out, err, True
        for kind, payload in frames:
            (err if kind == 2 else out).feed(payload)


class MarkerSplitter:
    """Cuts one stream into per-command pieces at ``\\x1eBG:<nonce>:<index>[:fields]\\x1e`` markers.

    Used for batched root work (all setup commands in one exec): one exec instead of one per command.
    """

    HOLD_BACK = 160

    def __init__(self, nonce: str, limit: int) -> None:
        import re

        self.regex = re.compile(rb"\x1eBG:" + re.escape(nonce.encode()) + rb":(\d+)((?::[0-9.]+)*)\x1e")
        self.limit = limit
        self.pieces: list[tuple[CappedBuffer, list[str]]] = []
        self.indices: list[
            int
        ] = []  # each piece's index as its marker said (1, 2, ... when nothing was lost)
        self.current = CappedBuffer(limit)
        self.pending = bytearray()

    def feed(self, data: bytes) -> None:
        self.pending += data
        while True:
            match = self.regex.search(bytes(self.pending))
            if not match:
                break
            self.current.feed(bytes(self.pending[: match.start()]))
            fields = [f for f in match.group(2).decode().split(":") if f]
            self.pieces.append((self.current, fields))
            self.indices.append(int(match.group(1)))
            self.current = CappedBuffer(self.limit)
            del self.pending[: match.end()]
        if len(self.pending) > self.HOLD_BACK:
            cut = len(self.pending) - self.HOLD_BACK
            self.current.feed(bytes(self.pending[:cut]))
            del self.pending[:cut]

    def in_order(self) -> bool:
        """Whether the markers came as 1, 2, 3 ...: a gap means the engine lost part of the stream, and the pieces
        after it would be read as the wrong command's."""
        return self.indices == list(range(1, len(self.indices) + 1))

    def finish(self) -> CappedBuffer:
        """The unterminated rest (the command that was running when the stream ended)."""
        self.current.feed(bytes(self.pending))
        self.pending.clear()
        return self.current


def command_result(
    command: str,
    out: CappedBuffer,
    err: CappedBuffer,
    exit_code: int | None,
    duration: float,
    timed_out: bool,
    terminated: bool = False,
) -> CommandResult:
    """A finished command's record from its capped output buffers."""
    stdout, out_cut = out.text()
    stderr, err_cut = err.text()
    return CommandResult(
        command=command,
        stdout=stdout,
        stderr=stderr,
        exit_code=exit_code,
        duration_s=round(duration, 6),
        timed_out=timed_out,
        stdout_truncated_bytes=out_cut,
        stderr_truncated_bytes=err_cut,
        terminated=terminated,
    )
