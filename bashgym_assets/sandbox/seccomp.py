"""The sandbox's seccomp profile: Docker's documented denials, plus no ptrace between sandbox processes.

Why a profile of our own: Docker's default profile allows ``ptrace`` (kernel >= 4.8) and ``process_vm_*``, and
without Yama nothing stops an operator from attaching to a daemon the setup started as the operator's own user and
running it unfrozen beside the checker. Docker accepts only one profile per container, so this one restates the
denials Docker documents for its default profile (docs.docker.com, "Seccomp security profiles for Docker",
significant syscalls blocked) and adds the ptrace family. It is a deny list (unknown syscalls are allowed, where
Docker's is an allow list): the container also runs with every capability dropped but six, no-new-privileges and
no network, so the syscalls an allow list would catch beyond these fail on capabilities anyway.
"""

from __future__ import annotations

import json
import platform
from functools import cache

EPERM, ENOSYS = 1, 38
#: The host's native architecture and its compat ones (a 32-bit syscall must meet the same rules, not a default).
ARCHITECTURES = {
    "x86_64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "aarch64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
    "arm64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
}

#: Kernel and host-level operations: none has any business in a shell task (most also need a dropped capability).
DENIED = [
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "create_module",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "get_kernel_syms",
    "get_mempolicy",
    "init_module",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioperm",
    "iopl",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mbind",
    "mount",
    "mount_setattr",
    "move_mount",
    "move_pages",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "query_module",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "request_key",
    "set_mempolicy",
    "setns",
    "settimeofday",
    "stime",
    "swapoff",
    "swapon",
    "syslog",
    "sysfs",
    "_sysctl",
    "umount",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "ustat",
    "vhangup",
    "vm86",
    "vm86old",
]
#: Reaching into another process: attach, read or write its memory, steal its descriptors, compare its objects.
PTRACE_FAMILY = ["ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "kcmp"]
#: clone() flags that would make new namespaces (each denied by its own rule: masked equality is all seccomp has).
NAMESPACE_FLAGS = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]


@cache
def profile_json(allow_ptrace: bool = False) -> str:
    """The profile as the JSON text Docker's ``--security-opt seccomp=`` takes (inline, not a path)."""
    denied = DENIED + ([] if allow_ptrace else PTRACE_FAMILY)
    rules: list[dict] = [{"names": sorted(denied), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM}]
    # clone3 carries its flags in memory seccomp cannot read: ENOSYS makes libc fall back to clone(), checked below.
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS})
    for flag in NAMESPACE_FLAGS:
        rules.append(
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": EPERM,
                "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
            }
        )
    profile = {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ARCHITECTURES.get(platform.machine(), []),
        "syscalls": rules,
    }
    return json.dumps(profile, separators=(",", ":"))
