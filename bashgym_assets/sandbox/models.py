"""The records that cross the sandbox boundary: what defines a container, and what one command did.

Pydantic models, so the gate, rollouts and evaluation can store them (parquet) and log them as they are.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from bashgym_assets.sandbox.layout import SESSION_ACCOUNTS, SessionUser

# The only capabilities a container ever has: what root needs for setup (users, ownership, modes) and what a root
# scenario needs to do its task. The unprivileged users (the operator, the service account) hold none of them (their
# effective set is empty and no-new-privileges stops setuid binaries from granting any).
SCENARIO_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"]


class SandboxSpec(BaseModel):
    """Everything that defines one fresh container (and the shell an operator gets in it)."""

    image: str | None = None  # default: bashgym_assets.images.sandbox_image_tag()
    files: dict[str, str] = Field(
        default_factory=dict
    )  # absolute path -> content, written as root before setup
    setup: list[str] = Field(default_factory=list)  # shell commands run as root, in order
    user: SessionUser = "operator"  # layout.SESSION_ACCOUNTS: root, operator, the service account app
    workdir: str | None = None  # default: the user's home
    env: dict[str, str] = Field(default_factory=dict)
    command_timeout_s: float = 30.0
    episode_timeout_s: float = 600.0
    output_limit_bytes: int = 65536  # per stream; head and tail kept, the cut is counted
    memory_mb: int = 512
    cpus: float = 1.0
    pids_limit: int = 256
    labels: dict[str, str] = Field(default_factory=dict)
    # Additions beyond the agreed API (all optional):
    read_only_root: bool = False  # image layers read-only; only the tmpfs folders stay writable
    max_file_mb: int = 1024  # RLIMIT_FSIZE: no single file grows past this (also bounds disk fill)
    setup_timeout_s: float = 120.0  # per setup command
    tmpfs_mb: int | None = None  # size of each tmpfs folder (/tmp, /var/tmp, home); default memory_mb // 4
    disk_budget_mb: int = 2048  # growth of the writable image layer (root's /etc, /var, /srv ...; the
    # home and /tmp are size-capped tmpfs) before a watchdog ends the session
    inode_budget: int = 100_000  # files each tmpfs folder may hold, and paths the writable layer may
    # change, before the watchdog ends the session (empty files cost no bytes)
    allow_ptrace: bool = False  # ptrace/process_vm_* between sandbox processes (strace/gdb tasks only)
    lease_s: float = 600.0  # the container ends this long after its owner stopped renewing (killed,
    # stalled); renewed every lease_s/10 (at most every minute) by a thread
    # of the owner; 0: no lease, only the hard lifetime (the spec's limits
    # plus a margin)

    @field_validator("files")
    @classmethod
    def _absolute_paths(cls, files: dict[str, str]) -> dict[str, str]:
        for path in files:
            if not path.startswith("/") or "\0" in path or any(p == ".." for p in path.split("/")):
                raise ValueError(f"file path must be absolute with no '..': {path!r}")
        return files

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, workdir: str | None) -> str | None:
        if workdir is not None and not workdir.startswith("/"):
            raise ValueError(f"workdir must be an absolute path: {workdir!r}")
        return workdir

    @field_validator("command_timeout_s", "episode_timeout_s", "setup_timeout_s", "cpus")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be > 0")
        return value

    @field_validator("lease_s")
    @classmethod
    def _not_negative(cls, value: float) -> float:
        if value < 0:
            raise ValueError("must be >= 0")
        return value

    @field_validator(
        "output_limit_bytes", "memory_mb", "pids_limit", "max_file_mb", "disk_budget_mb", "inode_budget"
    )
    @classmethod
    def _positive_int(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("must be > 0")
        return value

    @property
    def home(self) -> str:
        return SESSION_ACCOUNTS[self.user].home


class CommandResult(BaseModel):
    """One command's outcome. Output is decoded as UTF-8 with replacement characters for binary bytes."""

    command: str
    stdout: str
    stderr: str
    exit_code: int | None  # None only if there is none (timed out / killed shell)
    duration_s: float
    timed_out: bool
    stdout_truncated_bytes: int = 0
    stderr_truncated_bytes: int = 0
    terminated: bool = False  # the operator ended the episode (`exit`, `exec`, `set -e` failure)


class SetupResult(BaseModel):
    """The setup commands' results, stopping at the first failure (``error`` says which and why)."""

    ok: bool
    results: list[CommandResult]
    error: str | None = None
    #: The setup exec ended without reporting every command (the container died or the engine failed): not
    #: the scenario's fault, so a caller may retry in a fresh sandbox.
    infrastructure_error: bool = False
    #: Harness commands run in the same exec after a successful setup (``Sandbox.setup(then=...)``), in order,
    #: stopping after the first that exits non-zero; empty when the setup failed.
    then: list[CommandResult] = Field(default_factory=list)
