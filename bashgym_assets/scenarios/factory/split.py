"""The held-out *family* split: whole skills kept out of training, chosen once and recorded here.

Why whole families: a held-out instance of a trained family only measures "a new instance of a known skill"; a
family that never trains measures "a skill never trained". Both numbers are wanted, so both exist.

Chosen once (2026-11-26), one family per category where a category has three or more families, before any model
was trained on the factory: changing this list changes what every past evaluation meant, so it is not a setting.
A family name that is not (or no longer) defined is ignored. The gate's ``split_for`` reads this for every
``gen.`` id, so a held-out family's tasks are held out in the lake, in dataset building and in the contamination
check, like the pack's held-out split.
"""

from __future__ import annotations

HELD_OUT_FAMILIES: frozenset[str] = frozenset(
    {
        "archives-extract-member",
        "data-csv-top-n",
        "disk-largest-files-report",
        "environment-path-prepend",
        "files-move-older-than",
        "git-author-commit-count",
        "logs-count-status-codes",
        "networking-hosts-entry",
        "permissions-group-write-tree",
        "processes-kill-by-name",
        "scheduling-cron-add",
        "scripting-loop-rename",
        "text-replace-in-files",
        "users-create-in-group",
    }
)


def is_held_out_family(name: str | None) -> bool:
    return name is not None and name in HELD_OUT_FAMILIES
