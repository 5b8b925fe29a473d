"""Multi-turn conversations shared by the KV-reuse and continuous-batching tests: tasks of mixed lengths and
observations (empty, long, repeated lines) that make the prompts of a batch differ in length turn after turn."""

from __future__ import annotations

from bashgym_assets.rollout.transcript import Message

TASKS = [
    "list the files",
    "count the error lines in notes.txt and write the number to count.txt, then exit",
    "make a backup tar of data/ and remove logs older than seven days; check that the archive is complete",
    "chmod the key",
    "find . -name '*.log' and sort names.txt uniquely into reports/unique.txt",
]
OBSERVATIONS = [
    "",
    "total 12 drwxr-xr-x 2 operator operator 4096 Nov 22 10:00 .",
    "[exit 1] No such file or directory",
    "done\n" * 7,
    "42",
]


def start(task: str) -> list[Message]:
    return [Message(role="system", content="You are a shell operator."), Message(role="user", content=task)]
