"""The sandbox container's fixed layout: its users, PATHs, the harness's folders and markers, and the error every
sandbox operation raises. Shared by the container's lifecycle (``sandbox``) and the operator's shell (``session``),
so neither imports the other for them."""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args


class SessionAccount(NamedTuple):
    """One account a session's shell can run as: made by the image (sandbox_images/base/configure-rootfs.sh) or,
    ``in_image`` False, by the container's start when a session runs as it (``account_setup_shell``)."""

    name: str
    uid: int
    group: str  # its primary group
    gid: int
    home: str
    describe: str  # how the importer's refusals and the CLI's help name it
    in_image: bool = True


# The users a session can be: the ONE definition the bundle, the sandbox, the session, the CLI and the importer of
# external suites read (``ScenarioBundle.user``, ``SandboxSpec.user``). root; the unprivileged ``operator``, a
# person's login (Debian already has a group called operator, gid 37: the image reuses it); and ``app``, a service
# account the way a daemon's looks on Debian: a system account (uid below 1000, its own group, a locked password,
# no sudo) with its home under /srv, and a shell so a session can run. Why ``app`` at uid/gid 999 rather than
# Debian's stock ``www-data``: 999 is what ``useradd --system`` gives first on a fresh Debian image, and ``app`` is
# the name container images give the account their application runs as (``groupadd --system app && useradd
# --system --gid app app``), so a suite task ending in ``USER app`` runs as this account unchanged; ``www-data``
# already plays a third party in the factory's tasks (a web root handed to it, its processes signalled by root),
# which a session as www-data would change.
# Why the image does NOT have ``app`` and a container makes it only when its session runs as it: tasks written
# elsewhere make their own ``app`` group or user (``groupadd app``), take uid 999 (``useradd -u 999 -r svc``) or
# build a tree under /srv/app as root for the operator to audit; an account baked into the image failed all three
# (the bundled pack's a-users-regular-uids and a-perms-world-writable-audit, the factory's forensics-answer-owner).
SessionUser = Literal["operator", "root", "app"]
OPERATOR_USER, SERVICE_USER = "operator", "app"
SESSION_ACCOUNTS: dict[str, SessionAccount] = {
    "root": SessionAccount("root", 0, "root", 0, "/root", "root"),
    OPERATOR_USER: SessionAccount(
        OPERATOR_USER,
        1000,
        "operator",
        37,
        "/home/operator",
        "the unprivileged user operator (uid 1000, home /home/operator)",
    ),
    SERVICE_USER: SessionAccount(
        SERVICE_USER,
        999,
        "app",
        999,
        "/srv/app",
        "the service account app (uid 999, home /srv/app)",
        in_image=False,
    ),
}
if set(SESSION_ACCOUNTS) != set(get_args(SessionUser)):  # pragma: no cover - a definition error, at import
    raise AssertionError("SessionUser and SESSION_ACCOUNTS must name the same users")
OPERATOR_UID, OPERATOR_GID = SESSION_ACCOUNTS[OPERATOR_USER].uid, SESSION_ACCOUNTS[OPERATOR_USER].gid
# Every account of the image but root owns its home: a spec's files under it are that account's (folders
# included); a session's own account (``home_owners``) owns its home too.
HOME_OWNERS = tuple(a for a in SESSION_ACCOUNTS.values() if a.uid != 0 and a.in_image)


def home_owners(session_user: str) -> tuple[SessionAccount, ...]:
    """The accounts whose homes' files a session's seed gives them: the image's, and the session's own account
    when the container makes it (files under /srv/app in an operator's session stay root's, as anywhere else)."""
    account = SESSION_ACCOUNTS[session_user]
    return HOME_OWNERS if account.in_image or account.uid == 0 else (*HOME_OWNERS, account)


def account_setup_shell(account: SessionAccount) -> str:
    """Shell (run as root) that makes ``account`` as the image would have, unless it exists: its group with its
    gid, the system user with its uid, home and a shell, the home folder private to it. Idempotent, so an imported
    Dockerfile's ``useradd app`` and the container's start can both run it; it fails (non-zero) when the name is
    free but the uid or gid is taken, rather than making a different account."""
    g, u, home = account.group, account.name, account.home
    return (
        f"{{ getent group {g} >/dev/null || groupadd --system --gid {account.gid} {g}; }} && "
        f"{{ id -u {u} >/dev/null 2>&1 || useradd --system --uid {account.uid} --gid {g} --home-dir {home} "
        f"--no-create-home --shell /bin/bash {u}; }} && "
        f"{{ [ -d {home} ] || install -d -o {u} -g {g} -m 750 {home}; }}"
    )


def account_gitconfig(account: SessionAccount) -> str:
    """The ``~/.gitconfig`` an account's home starts with (a commit needs a name; the branch is main)."""
    name = "Operator" if account.name == OPERATOR_USER else account.name
    return (
        f"[user]\n\tname = {name}\n\temail = {account.name}@sandbox.invalid\n[init]\n\tdefaultBranch = main\n"
    )


_WORDS = [a.describe for a in SESSION_ACCOUNTS.values()]
# The users a sandbox offers, in words: the importer's refusals and the CLI's help name them.
OFFERED_USERS = ", ".join(_WORDS[:-1]) + " and " + _WORDS[-1]
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
SETUP_REPORTS = f"{RUN_DIR}/.setup"  # root-only: the setup's reports, read when the engine dropped them
SEED_DIR = "/.bashgym-seed"  # root-only, on the image layer, deleted by the start script
SEED_TAR = f"{SEED_DIR}/seed.tar"
# Where a local engine's container finds the seed instead: a read-only bind of a root-only host file, on the /run
# tmpfs (in no layer diff); the start script extracts it like SEED_TAR.
SEED_MOUNT = "/run/.bashgym-seed.tar"
# Every harness exec (exec_root, setup) first waits for one line on its stdin, which the harness sends once the
# exec's stream is attached: under load the engine drops what an exec writes before its attach is wired (measured:
# 42 of 320 quick execs under CPU load came back with no output at all, 0 of 320 with this wait; BENCHMARKS.md).
# No line (EOF): the exec ends with 125 and no report, the machinery's failure, which callers retry.
ATTACHED_WAIT = "IFS= read -r _ || exit 125"
ATTACHED = b"\n"  # what the harness sends for it, before any stdin data of its own
# Every exec waits (a few ms at most) for the container's start script to have prepared /run and the home folder.
READY_WAIT = (
    f"[ -e {READY_FILE} ] || {{ i=0; while [ ! -e {READY_FILE} ] && [ $i -lt 1000 ]; do sleep 0.005; "
    "i=$((i+1)); done; }"
)


class SandboxError(RuntimeError):
    """The sandbox could not be created or driven (engine error, missing image, dead container)."""
