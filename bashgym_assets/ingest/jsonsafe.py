"""JSON in and out of the ingest without losing a line to an encoding quirk or a serializer limit.

Kept free of pydantic and pyarrow: the live-capture hook imports it on every tool call.

Reading (``lenient_loads``): ``orjson`` is tried first (the hot path). Only a line it rejects is repaired, and
only where the repair keeps everything else of the line as written:

- a UTF-16/UTF-32 document (by its BOM) is transcoded, a UTF-8 BOM is dropped;
- invalid UTF-8 bytes become U+FFFD;
- a lone surrogate escape (``"\\ud83d"`` without its pair: older Claude Code cut tool output mid-emoji) becomes
  ``"\\ufffd"``; escaped backslashes and valid pairs are left alone;
- ``NaN``/``Infinity`` literals and numbers beyond a double (``1e400``) are read as Python floats.

What was repaired is returned as a list of names so callers can count it. Anything else (truncated JSON, NUL
bytes, nesting past the parser's limit) still fails with orjson's error, for the caller to quarantine.

Writing (``json_text``/``json_bytes``): ``orjson`` first; a value it refuses (nesting deeper than its recursion
limit of 254, an int beyond 64 bits, a lone surrogate in a string) is written by the standard library after
``jsonable`` made it fit: subtrees deeper than ``MAX_JSON_DEPTH`` are cut to a marker string, surrogates
replaced, non-finite floats written as null (as orjson does).
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections import Counter
from typing import Any

import orjson

#: Nesting kept when orjson cannot serialise a value (its own limit is 254 levels).
MAX_JSON_DEPTH = 200
#: The standard library refuses ints longer than this many digits (``sys.get_int_max_str_digits``).
_MAX_INT_DIGITS = 4000
_UTF8_BOM = codecs.BOM_UTF8
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: JSON escapes, scanned left to right so an escaped backslash is consumed before it can look like ``\u``.
_ESCAPES = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def bom_encoding(head: bytes) -> str | None:
    """``utf-16``/``utf-32`` when ``head`` starts with that encoding's byte order mark, else None."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    return None


def _fix_surrogate_escape(match: re.Match[bytes]) -> bytes:
    text = match.group(0)
    return text if len(text) != 6 else b"\\ufffd"  # a backslash pair (2) or a valid pair (12) stays


def _parse_int(text: str) -> int | float:
    if len(text) <= _MAX_INT_DIGITS:
        return int(text)
    return -math.inf if text.startswith("-") else math.inf


def repair_bytes(raw: bytes) -> tuple[bytes, list[str]]:
    """``raw`` as valid UTF-8 with lone surrogate escapes replaced, and what was repaired."""
    repairs: list[str] = []
    encoding = bom_encoding(raw[:4])
    if encoding is not None:
        raw = raw.decode(encoding, errors="replace").encode("utf-8", errors="replace")
        repairs.append(encoding.replace("-", ""))
    elif raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
        repairs.append("bom")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raw = raw.decode("utf-8", errors="replace").encode("utf-8")
        repairs.append("invalid_utf8")
    if b"\\u" in raw:
        fixed = _ESCAPES.sub(_fix_surrogate_escape, raw)
        if fixed != raw:
            raw = fixed
            repairs.append("lone_surrogate")
    return raw, repairs


def lenient_loads(raw: bytes) -> tuple[Any, list[str]]:
    """Parse ``raw`` (orjson first, then the repairs above); raises ``orjson.JSONDecodeError`` if it cannot."""
    try:
        return orjson.loads(raw), []
    except orjson.JSONDecodeError as first_error:
        error = first_error
    fixed, repairs = repair_bytes(raw)
    if repairs:
        try:
            return orjson.loads(fixed), repairs
        except orjson.JSONDecodeError as exc:
            error = exc
    try:  # NaN / Infinity / 1e400: valid for Python's parser, refused by orjson
        value = json.loads(fixed.decode("utf-8"), parse_int=_parse_int)
    except (ValueError, RecursionError):
        raise error from None
    return value, [*repairs, "non_finite_number"]


def clean_str(text: str) -> str:
    """``text`` with every unpaired surrogate code unit replaced by U+FFFD (pyarrow and orjson refuse them)."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def has_surrogates(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def jsonable(value: Any, notes: Counter | None = None, depth: int = 0) -> Any:
    """A copy of ``value`` that any JSON writer accepts: depth cut at ``MAX_JSON_DEPTH``, strings cleaned."""
    if isinstance(value, str):
        if has_surrogates(value):
            if notes is not None:
                notes["json_lone_surrogates"] += 1
            return clean_str(value)
        return value
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= MAX_JSON_DEPTH and isinstance(value, dict | list | tuple):
        if notes is not None:
            notes["json_cut_too_deep"] += 1
        return f"[nested deeper than {MAX_JSON_DEPTH} levels: cut]"
    if isinstance(value, dict):
        return {
            clean_str(k) if isinstance(k, str) else str(jsonable(k, notes, depth + 1)): jsonable(
                v, notes, depth + 1
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [jsonable(v, notes, depth + 1) for v in value]
    return clean_str(str(value))


def json_bytes(value: Any, notes: Counter | None = None) -> bytes:
    """``value`` as compact JSON: orjson, or the standard library on what orjson refuses (see module doc)."""
    try:
        return orjson.dumps(value, default=str)
    except TypeError:  # orjson.JSONEncodeError: too deep, int > 64 bits, surrogates
        pass
    if notes is not None:
        notes["json_rewritten"] += 1
    return json.dumps(jsonable(value, notes), ensure_ascii=False, separators=(",", ":"), default=str).encode(
        "utf-8"
    )


def json_text(value: Any, notes: Counter | None = None) -> str:
    return json_bytes(value, notes).decode("utf-8")
