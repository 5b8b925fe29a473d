"""The evaluation split, recorded once: whole skills kept out of training, and the bundled held-out tasks that
count.

**Held-out families** (``unseen``). Recorded 2026-11-28, before any model was evaluated on them, with the
skill-level measure of ``scenarios/skills.py`` (55 draws a family, seed 0): the most isolated family of each of the
14 original categories where one is isolated enough (``permissions`` has none: its most isolated family,
``permissions-enter-directory``, sat at 0.21-0.22, on the bound, and trains). Every one's nearest *train* family
scores at most 0.19 (family score), below ``UNSEEN_BOUND``: the 25th percentile of the train families' own
nearest-neighbour scores when the split was recorded (0.22; median 0.28). A held-out family is further from
everything that trains than three train families in four are from their nearest train family, so it measures a
skill that no train family teaches. The bound is recorded, not re-derived: a family added later must keep every
held-out family below it (``tests/test_skills.py``), however many families it brings. The split of 2026-11-26 (chosen by name, one a category) is retired: 5 of its 14 families had a
train twin (``scripting-loop-rename`` ~ ``files-rename-pattern`` 0.50, ``scheduling-cron-add`` ~
``scheduling-cron-reschedule`` 0.50, ``files-move-older-than`` ~ ``logs-compress-old`` 0.46,
``permissions-group-write-tree`` ~ ``permissions-chown-tree`` 0.43, ``environment-path-prepend`` ~
``environment-export-variable`` 0.33); those families train now. ``tests/test_split.py`` re-measures all of this
at a smaller draw and fails when a family change makes the split unclean.

**Bundled held-out tasks with a train twin** (``BUNDLED_TRAIN_TWINS``): 23 of the pack's 35 held-out tasks have a
skill twin in a train family (same goal, same commands; e.g. ``b-logs-compress-old`` ~ ``logs-compress-old``). They
are taken out of the ``bundled`` score (the clean set is the other 12) and never guard training (their skill
trains on purpose); they still never train themselves. The evaluation of 2026-11-28 reported both numbers once
(BENCHMARKS.md, "Honest yardsticks"); only the clean one is reported since.

**Transfer** draws (``TRANSFER_SEED``): fresh tasks of *train* families under a seed no training configuration can
name (factory seeds are integers), so ``transfer`` measures "a trained skill with new values".

Changing any of this changes what every past evaluation meant, so none of it is a setting. A family name that is
not (or no longer) defined is ignored. The gate's ``split_for`` reads ``HELD_OUT_FAMILIES`` for every ``gen.`` id,
so a held-out family's tasks are held out in the lake, in dataset building and in the contamination check.
"""

from __future__ import annotations

HELD_OUT_FAMILIES: frozenset[str] = frozenset(
    {
        "archives-find-corrupt",
        "data-sqlite-update",
        "disk-truncate-logs",
        "environment-editorconfig",
        "files-symlink",
        "git-changed-files-list",
        "logs-rotate",
        "networking-listen-port-config",
        "processes-signal-daemon",
        "scheduling-cron-d-file",
        "scripting-numbered-files",
        "text-tr-convert",
        "users-list-group-members",
    }
)

# bundled held-out task -> the train family it is a skill twin of (measured 2026-11-28, see the module doc)
BUNDLED_TRAIN_TWINS: dict[str, str] = {
    "a-archives-extract-release": "archives-extract-member",
    "a-archives-gunzip-keep": "archives-compress-files",
    "a-archives-incremental-backup": "files-recent-list",
    "a-files-lowercase-extensions": "scripting-loop-rename",
    "a-files-prune-empty": "disk-empty-cleanup",
    "a-perms-ssh-key": "permissions-private-secrets",
    "a-perms-umask-bashrc": "environment-umask-profile",
    "a-perms-remove-world-write": "permissions-group-write-tree",
    "a-perms-world-writable-audit": "permissions-world-writable-report",
    "a-procs-stubborn-service": "processes-kill-by-name",
    "a-sched-monthly-cleanup-logged": "scheduling-crontab-env",
    "a-text-top-ips": "logs-top-ips",
    "a-users-regular-uids": "users-change-shell",
    "b-data-jq-active-users": "data-jq-filter",
    "b-data-sqlite-count-shipped": "data-sqlite-export-csv",
    "b-data-sqlite-export-csv": "data-sqlite-export-csv",
    "b-disk-archive-old-reports": "archives-create-excluding",
    "b-env-path-prepend": "environment-path-prepend",
    "b-git-feature-branch": "git-branch-commit",
    "b-git-restore-deleted-file": "git-restore-file",
    "b-git-revert-last": "git-revert-commit",
    "b-logs-compress-old": "logs-compress-old",
    "b-script-validate-ipv4": "scripting-usage-exit-codes",
}

TRANSFER_SEED = "transfer"
# No train family may come closer than this to a held-out family (family score; the recorded p25, see above).
UNSEEN_BOUND = 0.22


def is_held_out_family(name: str | None) -> bool:
    return name is not None and name in HELD_OUT_FAMILIES


def is_bundled_train_twin(scenario_id: str) -> bool:
    """A bundled held-out task whose skill a train family teaches: out of the clean ``bundled`` score."""
    return scenario_id in BUNDLED_TRAIN_TWINS
