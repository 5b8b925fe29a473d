"""The sandbox container's fixed layout: its users, PATHs, the harness's folders and markers, and the error every
sandbox operation raises. Shared by the container's lifecycle (``sandbox``) and the operator's shell (``session``),
so neither imports the other for them."""

from __future__ import annotations

OPERATOR_UID, OPERATOR_GID = 1000, 37
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The checker's PATH: the image's own tools first, so nothing a root operator drops into /usr/local shadows them
# (a scenario's own tools in /usr/local are still found by name).
CHECK_PATH = "/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/sbin:/usr/local/bin"
BASH = "/bin/bash"  # absolute: a root operator's /usr/local/bin/bash must not run the harness
# What the checker runs from: the image's programs, libraries, loader and its configuration. Any change to these
# after setup (seen from the host in the container's layer diff, which nothing inside can forge) fails the check.
PROTECTED_PATHS = (
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/usr/libexec",
    "/usr/share/perl",
    "/usr/share/perl5",
    "/etc/alternatives",
    "/etc/ld.so.preload",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
)
RUN_DIR = "/run/bashgym"
SESSION_DIR = f"{RUN_DIR}/session"
READY_FILE = f"{RUN_DIR}/ready"
SEED_DIR = "/.bashgym-seed"  # root-only, on the image layer, deleted by the start script
SEED_TAR = f"{SEED_DIR}/seed.tar"
# Every exec waits (a few ms at most) for the container's start script to have prepared /run and the home folder.
READY_WAIT = (
    f"[ -e {READY_FILE} ] || {{ i=0; while [ ! -e {READY_FILE} ] && [ $i -lt 1000 ]; do sleep 0.005; "
    "i=$((i+1)); done; }"
)


class SandboxError(RuntimeError):
    """The sandbox could not be created or driven (engine error, missing image, dead container)."""
