"""The live-capture hook: Claude Code's hook JSON on stdin -> one line appended to a capture file.

Installed (``bashgym hooks install``) as ``env BASHGYM_HOME=<home> <python> -I -S <.../ingest/hook_entry.py>``:
with ``-I -S`` the interpreter loads no site-packages, no ``PYTHON*`` variables and nothing from the agent's
working directory, and ``hook_entry`` imports this module from its cached bytecode, so a call costs an
interpreter start and a few milliseconds (``benchmarks/bench_hook.py``). Keep it that way: this module imports
the standard library only, and at module level only what it needs on every call (no ``json`` package, whose
import of ``re`` alone costs more than the rest of the hook; its C scanner and encoder ``_json`` are used, with
the package as the fallback). ``python -m bashgym_assets.ingest.hook``, the command of older installs, still
works; it pays for importing the ``bashgym_assets.ingest`` package.

Claude Code runs it on PostToolUse, Stop and UserPromptSubmit (so captured sessions keep the user's task).
Each event becomes one line ``{"bashgym_captured_at": ..., **event}`` appended to
``<BASHGYM_HOME>/traces/<session_id>.hook.jsonl`` with one ``write`` on an ``O_APPEND`` descriptor under an
exclusive ``flock``, so parallel tool calls never interleave or lose lines. ``HookCaptureAdapter`` reads the
files back. A line is the one the orjson writer of earlier versions wrote, byte for byte, except that floats
from 1e-9 to 1e-4 are written as Python writes them (``1e-07``, ``6.1e-05`` where orjson wrote ``1e-7``,
``0.000061``: the same numbers) and subtrees nested deeper than 254 levels are kept rather than cut.

It never blocks or fails the agent and never writes to stdout (Claude Code adds a UserPromptSubmit hook's stdout
to the conversation): the exit status is always 0 and whatever goes wrong becomes one line in
``<BASHGYM_HOME>/hook-errors.log`` (stderr only when even that cannot be written). Stdin is read for at most
``READ_TIMEOUT_S`` and kept up to ``MAX_INPUT_BYTES``; the lock is waited for at most ``LOCK_WAIT_S``, after
which the line is still written with its single ``O_APPEND`` write (atomic against the other writers' single
writes on a local file system) and the wait is logged. Input that is not a JSON object, or over the size cap,
is kept as a ``hook_error`` line (quarantined by the importer) in ``unknown-session.hook.jsonl``. Input is
repaired as the importer repairs it (BOM, UTF-16/32, invalid UTF-8 and lone surrogates become U+FFFD; ``NaN``,
numbers beyond a double and ints over 4000 digits become null) and strings over ``MAX_FIELD_CHARS`` are cut
with a note.
"""

import fcntl
import os
import select
import sys
import time

TYPE_CHECKING = (
    False  # typing.TYPE_CHECKING without importing typing (which imports re); mypy reads it as True
)
if TYPE_CHECKING:
    import _json

_make_encoder: "type[_json.make_encoder] | None"
_make_scanner: "type[_json.make_scanner] | None"
try:  # CPython's accelerators behind the json package, without the package's imports (re, enum, ...)
    from _json import encode_basestring as _encode_basestring
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover (another interpreter: the json package does it, same output)
    _make_encoder = _make_scanner = None

HOOK_SUFFIX = ".hook.jsonl"
#: Tool outputs above this are cut (with a note) so one capture line stays a sane size.
MAX_FIELD_CHARS = 1_000_000
#: A whole line stays under the importer's 16 MB line limit: many fields each under MAX_FIELD_CHARS (a Write's
#: structuredPatch) are cut harder until it fits.
MAX_LINE_BYTES = 15 << 20
#: Strings are cut and floats cleaned down to this nesting depth (deeper subtrees are written as they came).
MAX_DEPTH = 200
#: Hook input above this many bytes is not captured (a ``hook_error`` line records it).
MAX_INPUT_BYTES = 32 << 20
READ_TIMEOUT_S = 5.0
LOCK_WAIT_S = 2.0
ERROR_LOG = "hook-errors.log"
_MAX_INT_DIGITS = 4000  # longer ints (their text, sign included) are read as null, as the importer reads them
_INT_ABOVE, _INT_BELOW = 10**_MAX_INT_DIGITS, -(10 ** (_MAX_INT_DIGITS - 1))
_SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_WHITESPACE = " \t\n\r"
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


class InputTooLarge(ValueError):
    def __init__(self, head: bytes) -> None:
        super().__init__(f"hook input over {MAX_INPUT_BYTES} bytes: not captured")
        self.head = head


def home_dir() -> str:
    """``BASHGYM_HOME`` as ``bashgym_assets.config`` reads it (default ``.bashgym`` in the project)."""
    value = os.environ.get("BASHGYM_HOME")
    if value:
        return os.path.realpath(os.path.expanduser(value))
    return os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))), ".bashgym"
    )


def capture_name(session_id: str | None) -> str:
    """``<session id>.hook.jsonl``: each run of characters outside ``[A-Za-z0-9_.-]`` becomes one ``-``."""
    sid = session_id or ""
    if not _SAFE_CHARS.issuperset(sid):
        out: list[str] = []
        in_run = False
        for ch in sid:
            if ch in _SAFE_CHARS:
                out.append(ch)
                in_run = False
            elif not in_run:
                out.append("-")
                in_run = True
        sid = "".join(out)
    sid = sid.strip(".-") or "unknown-session"
    return f"{sid[:120]}{HOOK_SUFFIX}"


def capture_path(capture_dir: str | os.PathLike, session_id: str | None):
    """``capture_dir / <safe session id>.hook.jsonl`` as a ``pathlib.Path``."""
    from pathlib import Path

    return Path(capture_dir) / capture_name(session_id)


def timestamp() -> str:
    """Now in UTC, as ``datetime.now(UTC).isoformat()`` writes it (without importing datetime)."""
    seconds, fraction = divmod(time.time_ns() // 1000, 1_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{text}.{fraction:06d}+00:00" if fraction else f"{text}+00:00"


def _decode(raw: bytes) -> str:
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            return raw.decode(encoding, errors="replace").lstrip("\ufeff")
    return raw.decode("utf-8", errors="replace").removeprefix("\ufeff")


def _null(_literal: str) -> None:
    return None


def _parse_int(text: str) -> int | None:
    return int(text) if len(text) <= _MAX_INT_DIGITS else None


class _Decoder:
    """The settings ``_json.make_scanner`` reads: ``json.JSONDecoder(parse_constant=<null>)``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _null


def _loads_slow(text: str) -> object:
    """The json package: its error messages; ints too long for ``int()`` read as null."""
    import json

    try:
        return json.loads(text, parse_constant=_null)
    except json.JSONDecodeError:
        raise
    except ValueError:
        return json.loads(text, parse_constant=_null, parse_int=_parse_int)


def loads(text: str) -> object:
    """``json.loads(text)`` with ``NaN``/``Infinity`` as null (the C scanner first, the package on any error)."""
    if _make_scanner is not None:
        try:
            start = len(text) - len(text.lstrip(_WHITESPACE))
            # typeshed types the context as make_scanner (its own TODO: any object with these attributes)
            value, end = _make_scanner(_Decoder)(text, start)  # type: ignore[arg-type]
            if not text[end:].strip(_WHITESPACE):
                return value
        except Exception:  # the error path: the json package explains what is wrong, or reads it
            pass
    return _loads_slow(text)


def _unserializable(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")


def dumps(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``."""
    if _make_encoder is not None:
        try:
            encoder = _make_encoder(
                None, _unserializable, _encode_basestring, None, ":", ",", False, False, True
            )
        except TypeError:  # pragma: no cover (the accelerator's signature changed)
            pass
        else:
            return "".join(encoder(value, 0))
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def parse_event(raw: bytes) -> dict:
    """The hook input as a dict; ``ValueError`` (or ``RecursionError``) when it is not a JSON object."""
    event = loads(_decode(raw))
    if not isinstance(event, dict):
        raise ValueError(f"hook input is a JSON {type(event).__name__}, not an object")
    return event


def _cap(value: object, depth: int = 0, limit: int = MAX_FIELD_CHARS) -> object:
    if isinstance(value, str):
        if len(value) > limit:
            return value[:limit] + f"\n[... {len(value) - limit} characters cut by bashgym hook]"
        return value
    if isinstance(value, float):
        return value if value - value == 0 else None  # inf - inf and nan - nan are nan
    if type(value) is int:
        return value if _INT_BELOW < value < _INT_ABOVE else None
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {k: _cap(v, depth + 1, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap(v, depth + 1, limit) for v in value]
    return value


def _cap_fields(event: dict, limit: int = MAX_FIELD_CHARS) -> dict:
    """``_cap(event)`` of a dict: a dict."""
    return {k: _cap(v, 1, limit) for k, v in event.items()}


def _fffd(error: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(error, UnicodeEncodeError):  # registered for encoding only (line_bytes)
        raise error
    return "\ufffd".encode() * (error.end - error.start), error.end  # the UTF-8 codec takes only ASCII str


def line_bytes(record: dict) -> bytes:
    """``record`` as one compact JSON line (UTF-8, non-ASCII as is, lone surrogates as U+FFFD)."""
    text = dumps(record)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        import codecs

        codecs.register_error("bashgym_hook_fffd", _fffd)
        return text.encode("utf-8", errors="bashgym_hook_fffd") + b"\n"


def error_line(now: str, message: str, raw: bytes) -> bytes:
    """The line kept for input that is no hook event (the importer quarantines it, with its reason)."""
    return line_bytes(
        {
            "bashgym_captured_at": now,
            "hook_error": f"invalid hook input: {message}",
            "raw": raw[:2000].decode("utf-8", errors="replace"),
        }
    )


def build_line(raw: bytes, now: str | None = None) -> tuple[str, bytes]:
    """The capture file name and the line for one hook input (``raw``: the bytes on stdin)."""
    now = now or timestamp()
    try:
        event = parse_event(raw)
    except (ValueError, RecursionError) as exc:
        return capture_name(None), error_line(now, str(exc) or type(exc).__name__, raw)
    sid = event.get("session_id")
    name = capture_name(sid if isinstance(sid, str) else None)
    try:
        line = line_bytes({"bashgym_captured_at": now, **_cap_fields(event)})
        limit = MAX_FIELD_CHARS
        while len(line) > MAX_LINE_BYTES and limit > 256:  # rare: only events of many large fields
            limit //= 8
            line = line_bytes({"bashgym_captured_at": now, **_cap_fields(event, limit)})
    except RecursionError:  # read, but too deep to write back: an error line rather than nothing
        return name, error_line(now, "nested too deep to write back", raw)
    if len(line) > MAX_LINE_BYTES:
        return name, error_line(
            now, f"an event of {len(line)} bytes even with every field cut to 256 characters", raw
        )
    return name, line


def append_locked(path: str | os.PathLike, data: bytes, lock_wait: float = LOCK_WAIT_S) -> bool:
    """Append ``data`` (one whole line) with one write under an exclusive lock; False if the wait ran out."""
    folder = os.path.dirname(os.fspath(path))
    if folder:
        os.makedirs(folder, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        locked, deadline, pause = False, time.monotonic() + lock_wait, 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)
        return locked
    finally:
        os.close(fd)


def read_input(fd: int = 0, limit: int = MAX_INPUT_BYTES, timeout: float = READ_TIMEOUT_S) -> bytes:
    """Stdin up to EOF, waiting at most ``timeout``. Past ``limit`` bytes the rest is drained (Claude Code's
    end of the pipe never breaks) and ``InputTooLarge`` raised with the first 4 KB."""
    chunks: list[bytes] = []
    size, head, deadline = 0, None, time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError(f"no end of hook input after {timeout:g} s ({size} bytes read)")
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        size += len(chunk)
        if head is None and size <= limit:
            chunks.append(chunk)
        elif head is None:
            head = (b"".join(chunks) + chunk)[:4096]
            chunks.clear()
    if head is not None:
        raise InputTooLarge(head)
    return b"".join(chunks)


def capture_event(raw: bytes, capture_dir: str | os.PathLike | None = None):
    """Record one hook event (the raw stdin bytes); returns the file it went to (a ``pathlib.Path``)."""
    from pathlib import Path

    folder = os.fspath(capture_dir) if capture_dir is not None else os.path.join(home_dir(), "traces")
    name, line = build_line(raw)
    append_locked(os.path.join(folder, name), line)
    return Path(folder, name)


def log_error(home: str | None, message: str) -> None:
    """One line in ``<home>/hook-errors.log`` (stderr, which nobody sees for a hook exiting 0, if that fails)."""
    line = f"{timestamp()} pid {os.getpid()}: {message}".replace("\n", " ")[:4000] + "\n"
    try:
        if home is None:
            raise FileNotFoundError("no data folder")
        append_locked(os.path.join(home, ERROR_LOG), line.encode("utf-8", errors="replace"), lock_wait=0.5)
    except Exception:
        try:  # noqa: SIM105 (contextlib would be one import more)
            sys.stderr.write(f"bashgym hook: {line}")
        except Exception:
            pass


def main() -> int:
    """Capture the event on stdin; always 0, nothing on stdout."""
    home = None
    try:
        home = home_dir()
        try:
            name, line = build_line(read_input())
        except InputTooLarge as exc:
            log_error(home, str(exc))
            name, line = capture_name(None), error_line(timestamp(), str(exc), exc.head)
        if not append_locked(os.path.join(home, "traces", name), line):
            log_error(home, f"lock on {name} not free after {LOCK_WAIT_S:g} s: appended without it")
    except BaseException as exc:  # never break the user's agent session
        log_error(home, f"could not capture event: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
