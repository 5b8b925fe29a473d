"""A task's phrasing: its instruction with the world's names and numbers taken out.

Its own module, below both of its users: the factory's draws are distinct when their phrasings differ
(``generate``), and the skill index compares phrasings to find twins (``scenarios.skills``), which the factory's
evaluation guard in turn uses (``similarity``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_PATHLIKE = re.compile(r"(?:~|\$HOME)?/?(?:[\w.@+-]+/)+[\w.@+*-]*|[\w@+-]+\.[A-Za-z0-9]{1,5}\b|~\S*")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_NONWORD = re.compile(r"[^a-z<>]+")


def normalise_instruction(text: str, values: Iterable[str] = ()) -> str:
    """The instruction with the world's names and numbers taken out: what is left is the phrasing.

    Drawn values are replaced first (longest first, so ``alice_ops`` goes before ``alice``), then anything that
    looks like a path or a file name, quoted text and numbers; case and punctuation do not count.
    """
    out = text.lower()
    for value in sorted({v.lower() for v in values if v and len(v) > 1}, key=len, reverse=True):
        # a value absent from the text cannot match: the substring test spares compiling a pattern per value
        # (thousands of distinct values overflow re's cache; the split of the whole factory paid seconds for it)
        if value in out:
            out = re.sub(rf"(?<![\w]){re.escape(value)}(?![\w])", " <v> ", out)
    out = _QUOTED.sub(" <q> ", out)
    out = _PATHLIKE.sub(" <p> ", out)
    out = _NUMBER.sub(" <n> ", out)
    return " ".join(_NONWORD.sub(" ", out).split())
