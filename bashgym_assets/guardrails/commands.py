"""Command-safety classifier: is this shell line something a model must never learn (or be allowed) to type?

:func:`classify_command` parses the line (``bashgym_assets.shell``: pipelines, ``;``/``&&``/``||``, subshells
and groups, here-documents, quotes), unwraps prefixes with the shell engine's one wrapper table (``sudo``, ``doas``,
``runuser -u``, ``env``, ``nice``, ``ionice``, ``timeout``, ``nohup``, ``time``, ``command``, ``exec``, ``stdbuf``,
``setsid``, ``xargs``, ``busybox``, ..., leading ``VAR=value``: ``shell.prefixes``),
follows the code a command runs (``bash -c '...'``, ``sh -c``, ``su -c``, ``eval``, ``ssh host '...'``,
``watch '...'``, ``find -exec``, ``$(...)``, backticks, ``<(...)``, a here-document fed to a shell) and applies
the rules in :data:`RULES` to every simple command and every pipeline. Quoted text is data: ``echo 'rm -rf /'``,
``grep -r ':(){ :|:& };:' .`` and comments are not commands. Input the parser finds odd (an unterminated quote,
an unbalanced parenthesis) is also scanned token by token, so a broken line cannot hide a dangerous one; the
function never raises.

Severities: ``block`` (never train on it; the guarded operator refuses to emit it) and ``warn`` (flagged and
penalised a little, still usable). What is not covered is listed in the README's Guardrails section (data flow
through files and variables across commands, obfuscation such as ``base64 -d | sh`` of an inline blob, scripts
written to disk and run later, destructive SQL or git commands, ...).
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bashgym_assets.guardrails.models import BLOCK, WARN, Finding, Severity, Verdict, clip
from bashgym_assets.shell import Command, Inv, Parsed, Word, parse, unwrap, upstream

MAX_CHARS = 200_000
MAX_DEPTH = 8  # code run by code (bash -c, eval, $(...)) followed this deep; deeper is not judged, blocked
MAX_COMMANDS = 2_000  # commands of one text judged; more is not judged, blocked
MAX_FINDINGS = 500  # a text repeating one bad command: enough evidence, and the dedup stays cheap
MAX_FUNC_BODY = 1_024  # a fork bomb is short: an unclosed function's "body" is not the rest of a 200 KB line
MAX_FUNC_DEFS = (
    256  # function definitions looked at per text (a babbling model repeats one thousands of times)
)
MAX_PIPELINE = 64  # commands of one pipeline compared pairwise


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    description: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in [
        Rule(
            "rm_root", BLOCK, "recursive delete of / or /* (any flag spelling: -rf, -fr, -r -f, --recursive)"
        ),
        Rule("rm_no_preserve_root", BLOCK, "rm with --no-preserve-root"),
        Rule(
            "rm_home",
            BLOCK,
            "recursive delete of the home directory (~, $HOME, ~/*) or of all homes (/home, /root)",
        ),
        Rule(
            "rm_system_dir",
            BLOCK,
            "recursive delete of a system directory (/etc, /usr, /bin, /var, /boot, ...)",
        ),
        Rule("rm_user_home", WARN, "recursive delete of one user's home directory (/home/<name>)"),
        Rule(
            "rm_unguarded_variable",
            WARN,
            "recursive delete of $VAR/... that becomes / or a system path when VAR is empty (use ${VAR:?})",
        ),
        Rule("mv_critical", BLOCK, "moving /, the home directory or a system directory away"),
        Rule(
            "find_delete_critical",
            BLOCK,
            "find -delete / -exec rm over /, home or a system directory with no filter",
        ),
        Rule(
            "find_delete_critical_filtered",
            WARN,
            "find -delete / -exec rm over / or a system directory, filtered",
        ),
        Rule(
            "disk_write_device",
            BLOCK,
            "writing a block device or kernel memory (dd of=, mkfs, wipefs, shred, "
            "blkdiscard, redirection or tee/cp onto /dev/sd*, /dev/nvme*, ...)",
        ),
        Rule("disk_partition", WARN, "partitioning a block device (fdisk, sfdisk, parted, gdisk)"),
        Rule(
            "too_complex_to_judge",
            BLOCK,
            "code nested deeper than 8 levels (bash -c, eval, $(...), ssh ...) or more "
            "than 2,000 commands in one text: what it runs cannot be judged, so it is "
            "neither learned nor run",
        ),
        Rule(
            "fork_bomb",
            BLOCK,
            "a function that calls itself through a pipe or in the background (:(){ :|:& };:), "
            "or an interpreter forking in a loop",
        ),
        Rule(
            "remote_code_exec",
            BLOCK,
            "downloaded content run as code: curl/wget/nc ... | sh (bash, python, perl...), "
            'bash <(curl ...), sh -c "$(curl ...)", eval "$(wget -O- ...)"',
        ),
        Rule(
            "reverse_shell",
            BLOCK,
            "a shell wired to the network (nc -e, bash -i >& /dev/tcp/..., sh | nc, socat exec:)",
        ),
        Rule(
            "chmod_world_writable_system",
            BLOCK,
            "world-writable permissions (777, a+rwx, o+w) on / or a system directory",
        ),
        Rule("chmod_recursive_root", BLOCK, "recursive chmod of /"),
        Rule("chmod_world_writable_home", WARN, "world-writable permissions on the home directory"),
        Rule("chown_recursive_system", BLOCK, "recursive chown/chgrp of / or a system directory"),
        Rule("setuid_shell", BLOCK, "setuid bit on a shell or interpreter"),
        Rule(
            "credential_exfiltration",
            BLOCK,
            "a credential (SSH key, ~/.aws/credentials, .netrc, /etc/shadow, an "
            "environment dump of secrets) sent over the network",
        ),
        Rule(
            "credential_read",
            WARN,
            "reading or copying a credential file (SSH private key, cloud credentials, "
            ".netrc, /etc/shadow, ...)",
        ),
        Rule(
            "env_secret_dump",
            WARN,
            "printing secret environment variables (env | grep TOKEN, echo $AWS_SECRET...)",
        ),
        Rule(
            "critical_file_overwrite",
            BLOCK,
            "truncating, overwriting or deleting /etc/passwd, /etc/shadow, "
            "/etc/sudoers, /etc/group, /etc/fstab, /etc/ld.so.preload, /boot/...",
        ),
        Rule(
            "critical_file_append", WARN, "appending to or replacing an account/sudo database file directly"
        ),
        Rule("kill_all_processes", BLOCK, "kill -9 -1 / kill -- -1 / killall5: signal every process"),
        Rule("kill_init", WARN, "signalling PID 1"),
        Rule("history_tamper", WARN, "clearing or disabling shell history (history -c, unset HISTFILE, ...)"),
        Rule("system_power", WARN, "shutdown, reboot, halt, poweroff"),
        Rule("crontab_remove_all", WARN, "crontab -r (removes every job, no confirmation)"),
    ]
}

# ---- vocabularies ------------------------------------------------------------------------------------------
SHELLS = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash", "rbash"}
)
_PYTHON = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)?)?$")
SCRIPTING = frozenset(
    {"perl", "ruby", "node", "nodejs", "php", "lua", "tclsh", "pwsh", "powershell", "deno", "bun", "Rscript"}
)
DOWNLOADERS = frozenset(
    {
        "curl",
        "wget",
        "fetch",
        "http",
        "https",
        "xh",
        "lwp-request",
        "GET",
        "nc",
        "ncat",
        "netcat",
        "socat",
        "aria2c",
    }
)
NET_SENDERS = frozenset(
    {
        "curl",
        "wget",
        "nc",
        "ncat",
        "netcat",
        "socat",
        "telnet",
        "scp",
        "sftp",
        "rsync",
        "ssh",
        "ftp",
        "tftp",
        "mail",
        "mailx",
        "sendmail",
        "mutt",
        "http",
        "https",
        "xh",
        "rclone",
    }
)
RAW_NET = frozenset({"nc", "ncat", "netcat", "socat", "telnet"})
READERS = frozenset(
    {
        "cat",
        "tac",
        "less",
        "more",
        "head",
        "tail",
        "base64",
        "base32",
        "basenc",
        "xxd",
        "od",
        "hexdump",
        "strings",
        "nl",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "awk",
        "gawk",
        "mawk",
        "sed",
        "cut",
        "sort",
        "uniq",
        "cp",
        "scp",
        "rsync",
        "tar",
        "zip",
        "7z",
        "gzip",
        "bzip2",
        "xz",
        "zstd",
        "openssl",
        "gpg",
        "jq",
        "yq",
        "dd",
        "install",
        "ln",
        "paste",
        "column",
        "view",
        "vi",
        "vim",
        "nano",
        "bat",
        "batcat",
        "pv",
        "sftp",
        "rclone",
    }
) - {"ln"}
ARCHIVERS = frozenset({"tar", "zip", "7z", "cp", "scp", "rsync", "rclone"})
MKFS = frozenset({"mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "mformat"})
WIPERS = frozenset({"wipefs", "shred", "blkdiscard"})
PARTITIONERS = frozenset({"fdisk", "sfdisk", "parted", "gdisk", "cfdisk", "cgdisk", "sgdisk"})
POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
SYSTEM_DIRS = frozenset(
    {
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/opt",
        "/proc",
        "/sbin",
        "/srv",
        "/sys",
        "/usr",
        "/usr/bin",
        "/usr/lib",
        "/usr/lib64",
        "/usr/local",
        "/usr/sbin",
        "/usr/share",
        "/usr/include",
        "/usr/local/bin",
        "/usr/local/lib",
        "/var",
        "/var/lib",
        "/var/log",
        "/snap",
        "/System",
        "/Library",
        "/Applications",
        "/private",
        "/private/etc",
        "/private/var",
    }
)
ALL_HOMES = frozenset({"/home", "/Users", "/root", "/var/home"})
_USER_HOME = re.compile(r"^/(?:home|Users|var/home)/[^/]+$")
_HOME_PREFIX = re.compile(r"^(/(?:home|Users|var/home)/[^/]+|/root)(?:/|$)")
DEVICE = re.compile(
    r"^/dev/(?:sd[a-z]{1,2}\d*|hd[a-z]\d*|vd[a-z]{1,2}\d*|xvd[a-z]{1,2}\d*|nvme\d+(?:n\d+(?:p\d+)?)?|"
    r"mmcblk\d+(?:p\d+|boot\d+)?|md\d+(?:p\d+)?|md/.+|dm-\d+|mapper/.+|disk/by-[a-z-]+/.+|root|sr\d+|"
    r"zd\d+|rbd\d+|bcache\d+|nbd\d+(?:p\d+)?|disk\d+(?:s\d+)?|rdisk\d+(?:s\d+)?|mem|kmem|port)$"
)
KERNEL_WRITE = frozenset({"/proc/sysrq-trigger", "/proc/sys/kernel/sysrq"})
#: files whose truncation or overwrite breaks logins, sudo or boot (appending is a warning for the account ones)
CRITICAL_FILES = re.compile(r"^/etc/(?:passwd|shadow|group|gshadow|sudoers|fstab|ld\.so\.preload)$")
ACCOUNT_FILES = re.compile(r"^/etc/(?:passwd|shadow|group|gshadow|sudoers)$")
SUDOERS_DROPIN = re.compile(r"^/etc/sudoers\.d/[^/]+$")
ALWAYS_BLOCK_FILES = frozenset({"/etc/ld.so.preload"})
SECRET_PATHS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"(?:^|/)\.ssh/(?:id_[A-Za-z0-9_*?\[\]-]+|identity|[^/]*(?:_rsa|_dsa|_ecdsa|_ed25519|\.pem|\.key))$"
        ),
        "an SSH private key",
    ),
    (re.compile(r"^/etc/ssh/ssh_host_[a-z0-9]+_key$"), "an SSH host private key"),
    (re.compile(r"(?:^|/)\.aws/credentials$"), "AWS credentials"),
    (re.compile(r"(?:^|/)\.netrc$"), "a .netrc (passwords)"),
    (re.compile(r"^/etc/g?shadow-?$"), "the password hash database"),
    (re.compile(r"(?:^|/)\.git-credentials$"), "stored git credentials"),
    (re.compile(r"(?:^|/)\.docker/config\.json$"), "docker registry credentials"),
    (re.compile(r"(?:^|/)\.kube/config$"), "a kubeconfig"),
    (re.compile(r"(?:^|/)\.pgpass$"), "PostgreSQL passwords"),
    (re.compile(r"(?:^|/)\.(?:npmrc|pypirc)$"), "package registry tokens"),
    (re.compile(r"(?:^|/)\.config/gh/hosts\.yml$"), "the GitHub CLI token"),
    (
        re.compile(
            r"(?:^|/)\.config/gcloud/(?:credentials\.db|application_default_credentials\.json|"
            r"legacy_credentials.*)$"
        ),
        "Google Cloud credentials",
    ),
    (re.compile(r"(?:^|/)\.azure/(?:accessTokens\.json|msal_token_cache\..*)$"), "Azure tokens"),
    (re.compile(r"(?:^|/)\.gnupg/(?:private-keys-v1\.d.*|secring\.gpg)$"), "GnuPG private keys"),
)
SECRET_DIRS = re.compile(r"(?:^|/)\.(?:ssh|aws|gnupg)/?$")
ENVIRON = re.compile(r"^/proc/[^/]+/environ$")
#: a variable name that holds a secret (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD; not AUTHOR or PWD)
SECRET_VAR = re.compile(
    r"(?i)(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|PASS|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|"
    r"CREDENTIALS?|KEY|AUTH|AUTH_?TOKEN)(?:_|$)"
)
#: words in a grep pattern that look for secrets among the environment
SECRET_WORD = re.compile(
    r"(?i)token|secret|passw|api_?key|access_?key|private_?key|credential|_key\b|\bkey\b|"
    r"\bauth"
)
_SECRET_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_REMOTE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9._-]*:(?!//)|^(?:rsync|sftp|scp)://")
_VAR_TARGET = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)(:?[-=?+][^}]*)?\}?(/.*)?$")
_OCTAL = re.compile(r"^[0-7]{1,4}$")
_SYMBOLIC = re.compile(
    r"^(?:[ugoa]*(?:[-+=](?:[rwxXst]*|[ugo]))+)(?:,[ugoa]*(?:[-+=](?:[rwxXst]*|[ugo]))+)*$"
)
# fork() CALLED in a loop (``while True: os.fork()``, perl's ``fork while fork``, ``while(1){fork}``), not the word
# fork near a loop (``[k for k in dir(os) if 'fork' in k]``)
_FORK_LOOP = re.compile(
    r"(?s)\b(?:while|for|loop|until)\b.{0,80}(?:\bfork\s*\(\s*\)|\bfork\s*[;}])|"
    r"\bfork\b\s*(?:while|until)\b|fork\(\)\s*(?:while|until)\b"
)
# a socket (Python, PHP fsockopen, Ruby TCPSocket, Perl IO::Socket, Node net) AND a shell or its descriptors handed
# over: a database health check that connects a socket and runs a subprocess is not a reverse shell
_PY_REVSHELL = re.compile(
    r"(?s)(?=.*(?:\bsocket\b|fsockopen|TCPSocket|IO::Socket|\bnet\.(?:connect|Socket)\b))"
    r"(?=.*(?:pty\.spawn|os\.dup2|/bin/sh|/bin/bash|\bsh\s+-i\b|cmd\.exe|child_process))"
)
_FUNC_DEF = re.compile(
    r"(?:\bfunction\s+([^\s(){}|&;<>]+)\s*(?:\(\s*\))?|(?<![^\s;&|(){}])([^\s(){}|&;<>]+)\s*\(\s*\))"
    r"\s*\{"
)


def _is_python(name: str) -> bool:
    return bool(_PYTHON.match(name))


# ---- paths ------------------------------------------------------------------------------------------------
@dataclass
class Target:
    path: str  # normalised; "~" stands for the home directory
    glob_all: bool  # "<path>/*": everything in it


def resolve(value: str, cwd: str | None, home: str | None) -> Target | None:
    """A path word as an absolute (or ``~``-rooted) normalised path, or None when it is not knowable."""
    v = value
    if not v:
        return None
    # ${HOME:?} and ${HOME:-...} guard against an empty HOME, not against deleting it: the same target as $HOME
    v = re.sub(r"^\$\{HOME(?::?[?][^}]*)?\}", "${HOME}", v)
    if v.startswith("~root") and (len(v) == 5 or v[5] == "/"):
        v = "/root" + v[5:]  # root's home is /root, not /home/root
    for prefix in ("${HOME}", "$HOME"):
        if v == prefix or v.startswith(prefix + "/"):
            v = "~" + v[len(prefix) :]
            break
    if v == "~" or v.startswith("~/"):
        pass
    elif v.startswith("~"):
        user, _, rest = v[1:].partition("/")
        if not re.match(r"^[A-Za-z0-9._-]+$", user):
            return None
        v = f"/home/{user}" + ("/" + rest if rest else "")
    if "$" in v or "`" in v:
        return None
    if not v.startswith(("/", "~")):
        if cwd is None:
            return None
        v = cwd.rstrip("/") + "/" + v
    glob_all = False
    stripped = re.sub(r"/+", "/", v)
    for tail in ("/*", "/.*", "/{*,.*}", "/{.*,*}", "/*.*", "/**"):
        if stripped.endswith(tail) and len(stripped) > len(tail) - 1:
            stripped = stripped[: -len(tail)] or "/"
            glob_all = True
            break
    if stripped in ("*", "~/*"):
        glob_all = True
    root = "~" if stripped.startswith("~") else "/"
    rest = stripped[1:].lstrip("/")
    norm = posixpath.normpath("/" + rest) if rest else "/"
    norm = re.sub(r"^/+", "/", norm)
    path = norm if root == "/" else ("~" if norm == "/" else "~" + norm)
    if home and root == "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        path = "~" + path[len(home.rstrip("/")) :]
    return Target(path, glob_all)


def critical(t: Target) -> str | None:
    """root | home | system | user_home, or None for an ordinary path."""
    p = t.path
    if p == "/":
        return "root"
    if p == "~" or p in ALL_HOMES:
        return "home"
    if p in SYSTEM_DIRS:
        return "system"
    if _USER_HOME.match(p):
        return "user_home"
    return None


def secret_kind(value: str) -> str | None:
    v = value.strip()
    if v.endswith(".pub"):
        return None
    for pattern, what in SECRET_PATHS:
        if pattern.search(v):
            return what
    return None


def _home_from_cwd(cwd: str | None) -> str | None:
    m = _HOME_PREFIX.match(cwd or "")
    return m.group(1) if m else None


# ---- analysis context -----------------------------------------------------------------------------------------
class _Ctx:
    def __init__(self, top: str, home: str | None) -> None:
        self.top = top
        self.home = home
        self.findings: list[Finding] = []
        self.seen: set[tuple[str, int, int]] = set()
        self.parsed = True
        self.notes: list[str] = []

    def add(
        self, rule: str, start: int, end: int, why: str, mapper: Callable[[int, int], tuple[int, int]]
    ) -> None:
        s, e = mapper(start, end)
        s, e = max(0, min(s, len(self.top))), max(0, min(e, len(self.top)))
        if e < s:
            s, e = e, s
        if (rule, s, e) in self.seen or len(self.findings) >= MAX_FINDINGS:
            return
        self.seen.add((rule, s, e))
        r = RULES[rule]
        self.findings.append(
            Finding(
                rule=rule, severity=r.severity, start=s, end=e, match=clip(self.top[s:e]), explanation=why
            )
        )


class _Scope:
    """One text being analysed (the line itself, or code it runs) and how its offsets map onto the top line."""

    def __init__(
        self, ctx: _Ctx, text: str, mapper: Callable[[int, int], tuple[int, int]], depth: int, cwd: str | None
    ) -> None:
        self.ctx = ctx
        self.text = text
        self.mapper = mapper
        self.depth = depth
        self.cwd = cwd

    def flag(self, rule: str, start: int, end: int, why: str) -> None:
        self.ctx.add(rule, start, end, why, self.mapper)

    def flag_cmd(self, rule: str, cmd: Command, why: str) -> None:
        self.flag(rule, cmd.start, cmd.end, why)

    def child(
        self,
        text: str,
        word: Word | None = None,
        offset: int | None = None,
        span: tuple[int, int] | None = None,
    ) -> _Scope:
        """A scope for code run by this one: verbatim at ``offset``, or found inside ``word``, else pinned to
        ``span`` (e.g. an ``eval`` of several words)."""
        if offset is None and word is not None:
            k = self.text.find(text, word.start, word.end) if text else -1
            if k >= 0:
                offset = k
            else:
                span = (word.start, word.end)
        if offset is not None:
            base_off = offset
            return _Scope(
                self.ctx, text, lambda s, e: self.mapper(base_off + s, base_off + e), self.depth + 1, self.cwd
            )
        pinned = span or (0, len(self.text))
        return _Scope(self.ctx, text, lambda s, e: self.mapper(*pinned), self.depth + 1, self.cwd)

    def resolve(self, w: Word) -> Target | None:
        return resolve(w.value, self.cwd, self.ctx.home)


def classify_command(command: str | None, cwd: str | None = None, home: str | None = None) -> Verdict:
    """Findings for one shell line (or script). ``cwd``: where it runs (``rm -rf *`` in ``/`` is ``rm -rf /*``);
    ``home``: the user's home (guessed from ``cwd`` when it is under /home, /Users or /root). Never raises."""
    text = command or ""
    note = None
    if len(text) > MAX_CHARS:
        text, note = text[:MAX_CHARS], f"only the first {MAX_CHARS} characters were checked"
    text_for_parse = _neutralise_placeholders(text)
    ctx = _Ctx(text, home or _home_from_cwd(cwd))
    cwd_t = resolve(cwd, None, ctx.home) if cwd else None
    try:
        _analyse(_Scope(ctx, text_for_parse, lambda s, e: (s, e), 0, cwd_t.path if cwd_t else None))
    except Exception as exc:  # noqa: BLE001 - a classifier bug must not take a pipeline down; scan tokens instead
        ctx.parsed = False
        ctx.notes.append(f"parser failed ({type(exc).__name__}); token scan only")
        try:
            _token_scan(_Scope(ctx, text_for_parse, lambda s, e: (s, e), 0, None))
        except Exception as exc2:  # noqa: BLE001
            ctx.notes.append(f"token scan failed ({type(exc2).__name__})")
    notes = [n for n in (note, *ctx.notes) if n]
    ordered = sorted(ctx.findings, key=lambda f: (f.severity != BLOCK, f.start, f.rule))
    return Verdict(findings=ordered, parsed=ctx.parsed, note="; ".join(notes) or None)


_PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*_\d+>")


def _neutralise_placeholders(text: str) -> str:
    """Redaction placeholders (``<USER_1>``) would read as redirections: a same-length word stands in for them."""
    if "<" not in text:
        return text
    return _PLACEHOLDER.sub(lambda m: "X" * len(m.group()), text)


_DEV_NET = re.compile(r"/dev/(?:tcp|udp)/")
_SHELL_ON_FD = re.compile(
    r"(?:^|[\s;&|(])(?:/bin/|/usr/bin/)?(?:ba|z|k|da)?sh\b[^;&|\n]*[<>]&\s*\d|"
    r"\bdo\s+(?:eval\s+)?\$\w+|\bexec\s+(?:/bin/)?(?:ba)?sh\b"
)


def _dev_net_shell(scope: _Scope) -> None:
    """A descriptor opened on /dev/tcp (``exec 196<>/dev/tcp/host/port``) that a shell then reads and writes, or
    whose lines are run (``while read l; do $l; done``): the reverse shells the per-command rules cannot see."""
    m = _DEV_NET.search(scope.text)
    if m and _SHELL_ON_FD.search(scope.text):
        scope.flag(
            "reverse_shell", 0, len(scope.text), "a shell's input and output wired to a /dev/tcp descriptor"
        )


def _analyse(scope: _Scope) -> None:
    if scope.depth > MAX_DEPTH:  # silence here would let `eval eval ... rm -rf /` through
        scope.flag(
            "too_complex_to_judge",
            0,
            len(scope.text),
            f"code nested more than {MAX_DEPTH} levels deep (bash -c, eval, $(...)): not judged",
        )
        return
    parsed = parse(scope.text)
    if not parsed.ok:
        scope.ctx.parsed = False
    _fork_bombs(scope, parsed)
    if "/dev/" in scope.text:
        _dev_net_shell(scope)
    if len(parsed.commands) > MAX_COMMANDS:
        scope.flag(
            "too_complex_to_judge",
            parsed.commands[MAX_COMMANDS].start,
            len(scope.text),
            f"more than {MAX_COMMANDS} commands in one text: the rest is not judged",
        )
    invs: list[tuple[Command, Inv | None]] = []
    for cmd in parsed.commands[:MAX_COMMANDS]:
        inv = unwrap(cmd) if cmd.words else None
        invs.append((cmd, inv))
        _redirect_rules(scope, cmd, inv)
        if inv is not None:
            _assignment_rules(scope, inv)
        if inv is not None and inv.name:
            _command_rules(scope, inv)
            _track_cwd(scope, inv)
        _recurse(scope, cmd, inv)
    _pipeline_rules(scope, invs)
    if not parsed.ok:
        _token_scan(scope)


# ---- recursion into code a command runs -----------------------------------------------------------------
_SHELL_VALUE_OPTS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _shell_c_string(inv: Inv) -> Word | None:
    """The command string of ``sh -c STRING`` (``-lc``, ``-xec``, ``-c -x STRING`` ...)."""
    seen_c = False
    skip = False
    for w in inv.args:
        v = w.value
        if skip:
            skip = False
            continue
        if not seen_c:
            if v in _SHELL_VALUE_OPTS:
                skip = True
            elif v.startswith("-") and not v.startswith("--") and "c" in v[1:]:
                seen_c = True
            elif v == "--" or not v.startswith(("-", "+")):
                return None
            continue
        if v.startswith(("-", "+")) and v != "-":
            continue
        return w
    return None


def _opt_value(inv: Inv, shorts: tuple[str, ...], longs: tuple[str, ...]) -> Word | None:
    for k, w in enumerate(inv.args):
        v = w.value
        if v in shorts or v in longs:
            return inv.args[k + 1] if k + 1 < len(inv.args) else None
        for lg in longs:
            if v.startswith(lg + "="):
                return Word(v[len(lg) + 1 :], w.start, w.end, w.quoted, w.dynamic)
    return None


_SSH_VALUES = {
    "-b",
    "-c",
    "-D",
    "-E",
    "-e",
    "-F",
    "-I",
    "-i",
    "-J",
    "-L",
    "-l",
    "-m",
    "-O",
    "-o",
    "-p",
    "-Q",
    "-R",
    "-S",
    "-W",
    "-w",
    "-B",
}


def _recurse(scope: _Scope, cmd: Command, inv: Inv | None) -> None:
    for w in cmd.words:
        for sub in w.subs:
            _analyse(scope.child(sub.text, offset=sub.start))
    for red in cmd.redirects:
        if red.target is not None:
            for sub in red.target.subs:
                _analyse(scope.child(sub.text, offset=sub.start))
    if inv is None or not inv.name:
        return
    name = inv.name
    code: Word | None = None
    if name in SHELLS:
        code = _shell_c_string(inv)
    elif name in ("su", "runuser"):
        code = _opt_value(inv, ("-c",), ("--command",))
    if code is not None:
        _analyse(scope.child(code.value, word=code))
    if name == "eval" and inv.args:
        joined = " ".join(w.value for w in inv.args)
        if len(inv.args) == 1:
            _analyse(scope.child(joined, word=inv.args[0]))
        else:
            _analyse(scope.child(joined, span=(inv.args[0].start, inv.args[-1].end)))
    if name == "ssh":
        rest = inv.positional(_SSH_VALUES)[1:]
        if rest:
            joined = " ".join(w.value for w in rest)
            _analyse(
                scope.child(joined, word=rest[0])
                if len(rest) == 1
                else scope.child(joined, span=(rest[0].start, rest[-1].end))
            )
    if name == "watch":
        rest = inv.positional({"-n", "--interval", "-d", "-q", "--equexit"})
        if rest and not inv.has_flag("x", ("--exec",)):
            joined = " ".join(w.value for w in rest)
            _analyse(
                scope.child(joined, word=rest[0])
                if len(rest) == 1
                else scope.child(joined, span=(rest[0].start, rest[-1].end))
            )
    if name == "find":
        for sub_inv in _find_execs(inv):
            _command_rules(scope, sub_inv)
            if sub_inv.name in SHELLS and (c := _shell_c_string(sub_inv)) is not None:
                _analyse(scope.child(c.value, word=c))
    if _reads_program_from_stdin(inv):
        for red in cmd.redirects:
            if red.heredoc is not None and red.op in ("<<", "<<-"):
                _analyse(scope.child(red.heredoc, offset=red.heredoc_start))
            elif red.op == "<<<" and red.target is not None:
                _analyse(scope.child(red.target.value, word=red.target))


def _find_execs(inv: Inv) -> list[Inv]:
    out = []
    args = inv.args
    k = 0
    while k < len(args):
        if args[k].value in ("-exec", "-execdir", "-ok", "-okdir"):
            j = k + 1
            while j < len(args) and args[j].value not in (";", "+", "\\;"):
                j += 1
            words = [w for w in args[k + 1 : j] if w.value != "{}"]
            if words:
                sub = Command(words=words, path=inv.cmd.path, start=words[0].start, end=words[-1].end)
                sub_inv = unwrap(sub)
                if sub_inv is not None and sub_inv.name:
                    out.append(sub_inv)
            k = j
        k += 1
    return out


# ---- fork bombs -----------------------------------------------------------------------------------------------
def _fork_bombs(scope: _Scope, parsed: Parsed) -> None:
    masked = parsed.masked
    for m in itertools.islice(_FUNC_DEF.finditer(masked), MAX_FUNC_DEFS):
        name = m.group(1) or m.group(2)
        close = masked.find("}", m.end(), m.end() + MAX_FUNC_BODY)
        if close < 0:
            close = min(len(masked), m.end() + MAX_FUNC_BODY)
        body = masked[m.end() : close]
        call = rf"(?<![^\s;&|(){{}}]){re.escape(name)}(?![^\s;&|(){{}}])"
        piped = re.search(rf"{call}\s*\|\s*{call}", body)
        calls = len(re.findall(call, body))
        if piped or (calls >= 2 and "&" in body):
            scope.flag(
                "fork_bomb",
                m.start(),
                min(close + 1, len(masked)),
                f"function {name!r} calls itself {'through a pipe' if piped else 'in the background'}: "
                "processes multiply until the machine stops",
            )


# ---- rules on one command ------------------------------------------------------------------------------------
def _command_rules(scope: _Scope, inv: Inv) -> None:
    name = inv.name
    rule = _BY_NAME.get(name)
    if rule is not None:
        rule(scope, inv)
    if name.startswith("mkfs"):
        _rule_mkfs(scope, inv)
    if _is_python(name) or name in SCRIPTING:
        _rule_interpreter_code(scope, inv)
    if name in READERS or name in NET_SENDERS:
        _rule_credentials(scope, inv)


def _rule_rm(scope: _Scope, inv: Inv) -> None:
    recursive = npr = False
    targets: list[Word] = []
    done = False
    for w in inv.args:
        v = w.value
        if not done and v == "--":
            done = True
        elif not done and v.startswith("--"):
            recursive |= v == "--recursive"
            npr |= v == "--no-preserve-root"
        elif not done and v.startswith("-") and len(v) > 1:
            recursive |= "r" in v[1:] or "R" in v[1:]
        else:
            targets.append(w)
    cmd = inv.cmd
    for t in targets:
        target = scope.resolve(t)
        if target is not None and CRITICAL_FILES.match(target.path) and not target.glob_all:
            scope.flag_cmd("critical_file_overwrite", cmd, f"deletes {target.path}")
    if not recursive:
        return
    if npr:
        scope.flag_cmd("rm_no_preserve_root", cmd, "--no-preserve-root disables rm's last protection of /")
    for t in targets:
        target = scope.resolve(t)
        if target is None:
            _unguarded_var(scope, inv, t)
            continue
        level = critical(target)
        shown = target.path + ("/*" if target.glob_all else "")
        if level == "root":
            scope.flag_cmd("rm_root", cmd, f"recursive delete of {shown}: the whole filesystem")
        elif level == "home":
            scope.flag_cmd("rm_home", cmd, f"recursive delete of {shown}: every file of the home directory")
        elif level == "system":
            scope.flag_cmd("rm_system_dir", cmd, f"recursive delete of system directory {shown}")
        elif level == "user_home":
            scope.flag_cmd("rm_user_home", cmd, f"recursive delete of the home directory {shown}")


def _unguarded_var(scope: _Scope, inv: Inv, t: Word) -> None:
    m = _VAR_TARGET.match(t.value)
    if (
        not m
        or m.group(1) in ("HOME", "PWD", "OLDPWD")
        or (m.group(2) or "").startswith((":?", "?", ":-", "-"))
    ):
        return
    rest = m.group(3) or ""
    if not rest or "$" in rest:
        return
    empty = resolve(rest, None, None)
    if empty is not None and critical(empty) in ("root", "system", "home"):
        scope.flag_cmd(
            "rm_unguarded_variable",
            inv.cmd,
            f"if ${m.group(1)} is empty or unset this deletes {rest} (guard it: ${{{m.group(1)}:?}})",
        )


def _rule_mv(scope: _Scope, inv: Inv) -> None:
    pos = inv.positional({"-t", "--target-directory", "-S", "--suffix"})
    sources = pos if inv.has_flag("t", ("--target-directory",)) else pos[:-1]
    for w in sources:
        target = scope.resolve(w)
        if target is not None and not target.glob_all and critical(target) in ("root", "home", "system"):
            scope.flag_cmd("mv_critical", inv.cmd, f"moves {target.path} away")
    if pos:
        dest = scope.resolve(pos[-1])
        if dest is not None and CRITICAL_FILES.match(dest.path):
            rule = "critical_file_overwrite" if dest.path in ALWAYS_BLOCK_FILES else "critical_file_append"
            scope.flag_cmd(rule, inv.cmd, f"replaces {dest.path} wholesale")


_FIND_FILTERS = frozenset(
    {
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-regex",
        "-iregex",
        "-user",
        "-nouser",
        "-group",
        "-nogroup",
        "-newer",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-size",
        "-perm",
        "-empty",
        "-links",
        "-inum",
        "-samefile",
        "-lname",
        "-ilname",
        "-wholename",
        "-iwholename",
        "-uid",
        "-gid",
        "-newermt",
        "-newerct",
        "-used",
        "-fstype",
        "-context",
        "-xtype",
        "-readable",
        "-writable",
        "-executable",
    }
)


def _rule_find(scope: _Scope, inv: Inv) -> None:
    starts = []
    for w in inv.args:
        if w.value.startswith(("-", "(", "!", "\\(")) or w.value in ("(", "!"):
            break
        starts.append(w)
    values = [w.value for w in inv.args]
    deletes = "-delete" in values or any(e.name in ("rm", "shred", "unlink") for e in _find_execs(inv))
    if not deletes:
        return
    filtered = any(v in _FIND_FILTERS for v in values)
    for w in starts:
        target = scope.resolve(w)
        level = critical(target) if target is not None else None
        if level == "home" and filtered:
            continue  # cleaning matching files out of one's home (build artifacts, broken links) is ordinary
        if target is not None and level in ("root", "home", "system"):
            rule = "find_delete_critical_filtered" if filtered else "find_delete_critical"
            scope.flag_cmd(
                rule,
                inv.cmd,
                f"deletes files under {target.path}"
                + (" (filtered)" if filtered else " with no filter: everything"),
            )
            return


def _is_device(value: str) -> bool:
    return bool(DEVICE.match(value)) or value in KERNEL_WRITE


def _rule_dd(scope: _Scope, inv: Inv) -> None:
    for w in inv.args:
        if w.value.startswith("of=") and _is_device(w.value[3:]):
            scope.flag_cmd("disk_write_device", inv.cmd, f"dd writes raw data onto {w.value[3:]}")


def _device_args(inv: Inv) -> list[str]:
    return [w.value for w in inv.args if _is_device(w.value) or _is_device(w.value.split("=", 1)[-1])]


def _rule_mkfs(scope: _Scope, inv: Inv) -> None:
    devs = _device_args(inv)
    if devs:
        scope.flag_cmd("disk_write_device", inv.cmd, f"{inv.name} formats {devs[0]}: its data is gone")


def _rule_wipe(scope: _Scope, inv: Inv) -> None:
    devs = _device_args(inv)
    if devs:
        scope.flag_cmd("disk_write_device", inv.cmd, f"{inv.name} destroys the contents of {devs[0]}")


def _rule_partition(scope: _Scope, inv: Inv) -> None:
    devs = _device_args(inv)
    if not devs:
        return
    if inv.name == "sgdisk" and inv.has_flag("Zzo", ("--zap-all", "--zap", "--clear")):
        scope.flag_cmd("disk_write_device", inv.cmd, f"sgdisk wipes the partition table of {devs[0]}")
        return
    listing = inv.has_flag("lds", ("--list", "--dump", "--show-size", "--print")) or any(
        w.value in ("print", "p") for w in inv.args
    )
    if not listing:
        scope.flag_cmd("disk_partition", inv.cmd, f"{inv.name} rewrites the partition table of {devs[0]}")


def _rule_tee(scope: _Scope, inv: Inv) -> None:
    append = inv.has_flag("a", ("--append",))
    for w in inv.positional():
        if _is_device(w.value):
            scope.flag_cmd("disk_write_device", inv.cmd, f"tee writes onto {w.value}")
        _critical_write(scope, inv.cmd, w.value, append, "tee")


def _rule_cp(scope: _Scope, inv: Inv) -> None:
    pos = inv.positional({"-t", "--target-directory", "-S", "--suffix"})
    if len(pos) >= 2 and not inv.has_flag("t", ("--target-directory",)):
        dest = pos[-1].value
        if _is_device(dest):
            scope.flag_cmd("disk_write_device", inv.cmd, f"{inv.name} copies onto the device {dest}")
        target = scope.resolve(pos[-1])
        if target is not None and CRITICAL_FILES.match(target.path) and inv.name in ("cp", "install"):
            rule = "critical_file_overwrite" if target.path in ALWAYS_BLOCK_FILES else "critical_file_append"
            scope.flag_cmd(rule, inv.cmd, f"replaces {target.path} wholesale")


def _critical_write(scope: _Scope, cmd_or_span: Command, value: str, append: bool, how: str) -> None:
    target = resolve(value, scope.cwd, scope.ctx.home)
    if target is None or target.glob_all:
        return
    if SUDOERS_DROPIN.match(target.path):
        scope.flag_cmd(
            "critical_file_append",
            cmd_or_span,
            f"{how} writes the sudo rule file {target.path} unchecked (visudo -f checks it)",
        )
        return
    if not CRITICAL_FILES.match(target.path):
        return
    if append and target.path not in ALWAYS_BLOCK_FILES:
        if ACCOUNT_FILES.match(target.path):
            scope.flag_cmd(
                "critical_file_append",
                cmd_or_span,
                f"{how} appends to {target.path} directly (useradd/usermod/visudo check what they write)",
            )
        return
    scope.flag_cmd("critical_file_overwrite", cmd_or_span, f"{how} overwrites {target.path}")


def _rule_truncate(scope: _Scope, inv: Inv) -> None:
    for w in inv.positional({"-s", "--size", "-r", "--reference"}):
        _critical_write(scope, inv.cmd, w.value, False, "truncate")
        if re.search(r"(?:^|/)\.\w*_?history$", w.value):
            scope.flag_cmd("history_tamper", inv.cmd, f"truncates the shell history {w.value}")


def _mode_world_writable(mode: str) -> bool:
    if _OCTAL.match(mode):
        return bool(int(mode, 8) & 0o002)
    for clause in mode.split(","):
        m = re.match(r"^([ugoa]*)(.*)$", clause)
        if not m:
            continue
        who, ops = m.group(1), m.group(2)
        for op, perms in re.findall(r"([-+=])([rwxXstugo]*)", ops):
            if op in "+=" and "w" in perms and (("o" in who) or ("a" in who)):
                return True
    return False


def _mode_setuid(mode: str) -> bool:
    if _OCTAL.match(mode):
        return len(mode) == 4 and bool(int(mode[0]) & 0o4)
    return any(
        op in "+=" and "s" in perms and (not who or "u" in who or "a" in who)
        for who, op, perms in re.findall(r"([ugoa]*)([-+=])([rwxXst]*)", mode)
    )


_INTERPRETER_BINARIES = re.compile(
    r"(?:^|/)(?:ba|da|z|k|mk|tc|c|fi|a)?sh$|(?:^|/)(?:python[\d.]*|perl|ruby|node|"
    r"php|lua|find|vim?|nano|less|env|awk|gawk)$"
)


def _rule_chmod(scope: _Scope, inv: Inv) -> None:
    recursive = False
    mode: str | None = None
    targets: list[Word] = []
    done = False
    for w in inv.args:
        v = w.value
        if not done and v == "--":
            done = True
        elif not done and (v == "--recursive" or re.match(r"^-[RcfvHLP]+$", v)):
            recursive |= "R" in v or v == "--recursive"
        elif not done and v.startswith("--"):
            continue
        elif mode is None:
            mode = v
        else:
            targets.append(w)
    if mode is None:
        return
    world = _mode_world_writable(mode)
    for t in targets:
        target = scope.resolve(t)
        if target is None:
            continue
        level = critical(target)
        if level == "root" and recursive:
            scope.flag_cmd("chmod_recursive_root", inv.cmd, f"chmod -R {mode} over the whole filesystem")
        elif (level in ("root", "system") or CRITICAL_FILES.match(target.path)) and world:
            scope.flag_cmd(
                "chmod_world_writable_system",
                inv.cmd,
                f"mode {mode} makes {target.path} writable by every user",
            )
        elif level == "home" and world:
            scope.flag_cmd(
                "chmod_world_writable_home",
                inv.cmd,
                f"mode {mode} makes {target.path} writable by every user",
            )
        if _mode_setuid(mode) and _INTERPRETER_BINARIES.search(target.path):
            scope.flag_cmd("setuid_shell", inv.cmd, f"setuid {target.path}: anyone can run it as its owner")


def _rule_chown(scope: _Scope, inv: Inv) -> None:
    if not inv.has_flag("R", ("--recursive",)):
        return
    pos = inv.positional({"--from", "--reference"})
    for t in pos[1:] if not any(w.value.startswith("--reference") for w in inv.args) else pos:
        target = scope.resolve(t)
        if target is not None and critical(target) in ("root", "system", "home") and target.path != "~":
            scope.flag_cmd(
                "chown_recursive_system", inv.cmd, f"{inv.name} -R changes owners under {target.path}"
            )


def _rule_kill(scope: _Scope, inv: Inv) -> None:
    args = [w.value for w in inv.args]
    if (
        not args
        or args[0] in ("-l", "-L", "--list", "--table")
        or (len(args) == 1 and args[0].startswith("-"))
    ):
        return
    k = 0
    if args[0] in ("-s", "-n", "--signal"):
        k = 2
    elif args[0].startswith("-") and args[0] != "--" and len(args) > 1:
        k = 1  # the signal (-9, -KILL, -SIGTERM)
    if k < len(args) and args[k] == "--":
        k += 1
    pids = args[k:]
    if "-1" in pids:
        scope.flag_cmd("kill_all_processes", inv.cmd, "pid -1 means every process the user may signal")
    elif "1" in pids:
        scope.flag_cmd("kill_init", inv.cmd, "signals PID 1 (init)")


def _rule_killall5(scope: _Scope, inv: Inv) -> None:
    scope.flag_cmd("kill_all_processes", inv.cmd, "killall5 signals every process outside its session")


def _rule_history(scope: _Scope, inv: Inv) -> None:
    if any(w.value.startswith("-") and "c" in w.value[1:] for w in inv.args):
        scope.flag_cmd("history_tamper", inv.cmd, "clears the shell history")


def _rule_unset(scope: _Scope, inv: Inv) -> None:
    if any(w.value == "HISTFILE" for w in inv.args):
        scope.flag_cmd("history_tamper", inv.cmd, "stops the shell history from being saved")


def _rule_export(scope: _Scope, inv: Inv) -> None:
    for w in inv.args:
        if _HIST_OFF.match(w.value):
            scope.flag_cmd("history_tamper", inv.cmd, f"{w.value} disables the shell history")


_HIST_OFF = re.compile(r"^(?:HISTFILE=(?:/dev/null)?|HISTSIZE=0|HISTFILESIZE=0)$")


def _assignment_rules(scope: _Scope, inv: Inv) -> None:
    for w in inv.assigns:
        if _HIST_OFF.match(w.value):
            scope.flag_cmd("history_tamper", inv.cmd, f"{w.value} disables the shell history")


def _rule_set(scope: _Scope, inv: Inv) -> None:
    vals = [w.value for w in inv.args]
    if "+o" in vals and "history" in vals:
        scope.flag_cmd("history_tamper", inv.cmd, "turns the shell history off")


def _rule_power(scope: _Scope, inv: Inv) -> None:
    scope.flag_cmd("system_power", inv.cmd, f"{inv.name} stops or restarts the machine")


def _rule_init(scope: _Scope, inv: Inv) -> None:
    if any(w.value in ("0", "6") for w in inv.args):
        scope.flag_cmd(
            "system_power", inv.cmd, f"{inv.name} {inv.args[0].value} stops or restarts the machine"
        )


def _rule_systemctl(scope: _Scope, inv: Inv) -> None:
    if any(w.value in ("poweroff", "reboot", "halt", "kexec", "emergency", "rescue") for w in inv.args):
        scope.flag_cmd("system_power", inv.cmd, "systemctl stops or restarts the machine")


def _rule_crontab(scope: _Scope, inv: Inv) -> None:
    if any(w.value.startswith("-") and not w.value.startswith("--") and "r" in w.value[1:] for w in inv.args):
        scope.flag_cmd("crontab_remove_all", inv.cmd, "crontab -r deletes every job of the user at once")


def _rule_netcat(scope: _Scope, inv: Inv) -> None:
    for w in inv.args:
        v = w.value
        if (
            v in ("-e", "-c", "--exec", "--sh-exec", "--lua-exec")
            or v.startswith(("--exec=", "--sh-exec="))
            or (re.match(r"^-[a-zA-Z]*[ec]$", v) and not v.startswith("--"))
        ):
            scope.flag_cmd(
                "reverse_shell", inv.cmd, f"{inv.name} {v} hands a program's terminal to the network"
            )
            return


def _rule_socat(scope: _Scope, inv: Inv) -> None:
    vals = [w.value.lower() for w in inv.args]
    if any(v.startswith(("exec:", "system:")) for v in vals) and any(
        re.match(r"^(?:tcp|udp|openssl|ssl|tcp4|tcp6|tcp-listen|tcp4-listen|udp-listen)[:-]", v) for v in vals
    ):
        scope.flag_cmd("reverse_shell", inv.cmd, "socat connects a program to a network socket")


def _rule_interpreter_code(scope: _Scope, inv: Inv) -> None:
    code = _opt_value(inv, ("-c", "-e", "-E", "-r"), ())
    if code is None:
        for w in inv.args:  # clustered: perl -le '...'
            if re.match(r"^-[a-zA-Z]*[ec]$", w.value):
                idx = inv.args.index(w)
                code = inv.args[idx + 1] if idx + 1 < len(inv.args) else None
                break
    text = (
        code.value
        if code is not None
        else next((m.group(1) for w in inv.args if (m := re.match(r"(?s)^-e(.+)$", w.value))), None)
    )  # ruby -e'code'
    if text is None:
        return
    if _FORK_LOOP.search(text):
        scope.flag_cmd(
            "fork_bomb", inv.cmd, f"{inv.name} forks in a loop: processes multiply until the machine stops"
        )
    if _PY_REVSHELL.search(text):
        scope.flag_cmd("reverse_shell", inv.cmd, f"{inv.name} connects a socket and runs a shell over it")


# ---- credentials -------------------------------------------------------------------------------------------
def _secret_read(scope: _Scope, inv: Inv | None, cmd: Command) -> str | None:
    """What secret this command reads (a credential file or the environment), or None."""
    for red in cmd.redirects:
        if red.op in ("<", "<>") and red.target is not None:
            if (what := secret_kind(red.target.value)) is not None:
                return what
            if ENVIRON.match(red.target.value):
                return "a process environment"
    if inv is None or not inv.name:
        return None
    name = inv.name
    if name in READERS:
        for w in _data_args(inv):
            v = w.value.split("=", 1)[1] if name == "dd" and w.value.startswith("if=") else w.value
            if (what := secret_kind(v)) is not None:
                return what
            if ENVIRON.match(v):
                return "a process environment"
            if name in ARCHIVERS and SECRET_DIRS.search(v):
                return f"the credential folder {v}"
    if _env_dump(inv):
        return "the environment (secrets included)"
    if name in ("echo", "printf") and any(
        SECRET_VAR.search(m) for w in inv.args if w.dynamic for m in _SECRET_REF.findall(w.value)
    ):
        return "a secret environment variable"
    if name == "printenv" and any(SECRET_VAR.search(w.value) for w in inv.args):
        return "a secret environment variable"
    return None


def _env_dump(inv: Inv) -> bool:
    name = inv.name
    pos = [w for w in inv.args if not w.value.startswith("-")]
    if name in ("env", "printenv") and not pos:
        return True
    if name == "set" and not inv.args:
        return True
    return name in ("export", "declare", "typeset") and (
        not inv.args or [w.value for w in inv.args] in (["-p"], ["-x"], ["-px"], ["-xp"])
    )


_SSH_FAMILY_OPTS = frozenset(
    {
        "-i",
        "-F",
        "-o",
        "-S",
        "-E",
        "-c",
        "-l",
        "-p",
        "-P",
        "-J",
        "-b",
        "-D",
        "-L",
        "-R",
        "-W",
        "-w",
        "-m",
        "-O",
        "-Q",
        "-I",
        "-B",
        "-s",
    }
)
#: per command: options whose value is a local file it writes or merely uses (an identity, a client key, where
#: output goes), not data it reads out or sends: ``ssh -i ~/.ssh/id_rsa host`` uses the key, it does not send it
_NOT_DATA_OPTS: dict[str, frozenset[str]] = {
    "ssh": _SSH_FAMILY_OPTS,
    "scp": _SSH_FAMILY_OPTS,
    "sftp": _SSH_FAMILY_OPTS,
    "rsync": frozenset({"-e", "--rsh", "--password-file", "--log-file", "--exclude-from", "--include-from"}),
    "curl": frozenset(
        {
            "-o",
            "--output",
            "-D",
            "--dump-header",
            "-c",
            "--cookie-jar",
            "-K",
            "--config",
            "--key",
            "--cert",
            "-E",
            "--cacert",
            "--capath",
            "--pubkey",
            "--netrc-file",
            "--proxy-key",
            "--proxy-cert",
            "--trace",
            "--trace-ascii",
            "--stderr",
            "--hostpubsha256",
        }
    ),
    "wget": frozenset(
        {
            "-O",
            "--output-document",
            "-o",
            "--output-file",
            "-a",
            "--append-output",
            "--certificate",
            "--private-key",
            "--ca-certificate",
            "--ca-directory",
            "-P",
            "--directory-prefix",
        }
    ),
    "openssl": frozenset({"-key", "-inkey", "-signkey", "-out", "-passin", "-cert", "-CAfile"}),
    "gpg": frozenset({"-o", "--output", "--homedir", "-r", "--recipient", "-u", "--local-user"}),
}
_ATTACHED_NOT_DATA = re.compile(
    r"^(?:-i.+|-o.+|-F.+|--rsh=.+|-e.+|--key=.+|--cert=.+|--private-key=.+|"
    r"--certificate=.+|--netrc-file=.+|--output=.+|--output-document=.+)$"
)


def _data_args(inv: Inv) -> list[Word]:
    """Arguments that are data the command reads or sends (values of identity/key/output options left out)."""
    skip_opts = _NOT_DATA_OPTS.get(inv.name)
    if not skip_opts:
        return list(inv.args)
    out = []
    skip_next = False
    for w in inv.args:
        v = w.value
        if skip_next:
            skip_next = False
            continue
        if v in skip_opts:
            skip_next = True
            continue
        if _ATTACHED_NOT_DATA.match(v) and not (inv.name == "curl" and v.startswith("-F")):
            continue
        out.append(w)
    return out


def _sends(inv: Inv) -> bool:
    """A command that sends data to another machine (scp/rsync only with a remote operand)."""
    if inv.name not in NET_SENDERS:
        return False
    if inv.name in ("scp", "rsync", "sftp", "rclone"):
        return any(
            _REMOTE.match(w.value) for w in inv.positional({"-e", "-i", "-P", "-o", "-F", "-c", "-l", "-S"})
        )
    return True


def _sender_carries_secret(scope: _Scope, inv: Inv) -> str | None:
    """A network command whose own arguments or input carry a secret (``curl -F f=@~/.ssh/id_rsa``)."""
    if not _sends(inv):
        return None
    for w in _data_args(inv):
        v = w.value
        candidates = [v, v.split("=", 1)[-1]]
        for c in candidates:
            c = c.lstrip("@<")
            if (what := secret_kind(c)) is not None:
                return what
            if inv.name in ARCHIVERS and SECRET_DIRS.search(c):
                return f"the credential folder {c}"
        for sub in w.subs:
            inner = parse(sub.text)
            for ic in inner.commands:
                if (what := _secret_read(scope, unwrap(ic) if ic.words else None, ic)) is not None:
                    return what
    for red in inv.cmd.redirects:
        if red.op in ("<", "<>") and red.target is not None and (what := secret_kind(red.target.value)):
            return what
    return None


def _rule_credentials(scope: _Scope, inv: Inv) -> None:
    if (what := _sender_carries_secret(scope, inv)) is not None:
        scope.flag_cmd("credential_exfiltration", inv.cmd, f"{inv.name} sends {what} to another machine")
        return
    if (
        inv.name in READERS
        and (what := _secret_read(scope, inv, inv.cmd)) is not None
        and what != "a process environment"
    ):
        scope.flag_cmd("credential_read", inv.cmd, f"{inv.name} reads {what}")


# ---- redirections ---------------------------------------------------------------------------------------------
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})


def _redirect_rules(scope: _Scope, cmd: Command, inv: Inv | None) -> None:
    for red in cmd.redirects:
        if red.target is None or red.op not in _WRITE_OPS:
            continue
        v = red.target.value
        if _is_device(v):
            scope.flag("disk_write_device", cmd.start, cmd.end, f"output redirected onto {v}")
        _critical_write(scope, cmd, v, red.op in (">>", "&>>"), "redirection")
        if re.search(r"(?:^|/)\.\w*_?history$", v) and red.op in (">", ">|", "&>"):
            scope.flag_cmd("history_tamper", cmd, f"truncates the shell history {v}")
        if v.startswith(("/dev/tcp/", "/dev/udp/")) and inv is not None:
            if inv.name in SHELLS or _is_python(inv.name) or inv.name in SCRIPTING:
                scope.flag_cmd("reverse_shell", cmd, f"{inv.name}'s input/output goes to {v}")
            elif (what := _secret_read(scope, inv, cmd)) is not None:
                scope.flag_cmd("credential_exfiltration", cmd, f"sends {what} to {v}")
    if inv is not None and inv.name in SHELLS:
        for red in cmd.redirects:
            if red.target is not None and red.target.value.startswith(("/dev/tcp/", "/dev/udp/")):
                scope.flag_cmd("reverse_shell", cmd, f"{inv.name} reads from {red.target.value}")
                break


def _track_cwd(scope: _Scope, inv: Inv) -> None:
    if inv.name not in ("cd", "pushd"):
        return
    pos = [w for w in inv.args if not (w.value.startswith("-") and w.value != "-")]
    if not pos or pos[0].value in ("~", "$HOME", "${HOME}"):
        scope.cwd = "~"
        return
    target = scope.resolve(pos[0])
    scope.cwd = target.path if target is not None and not target.glob_all else None


# ---- rules across a pipeline ----------------------------------------------------------------------------------
def _reads_program_from_stdin(inv: Inv) -> bool:
    name = inv.name
    if name in ("source", "."):
        return bool(inv.args) and inv.args[0].value in ("/dev/stdin", "-", "/proc/self/fd/0")
    if name in SHELLS:
        it = iter(inv.args)
        for w in it:
            v = w.value
            if v == "--":
                nxt = next(it, None)
                return nxt is None or nxt.value in ("-", "/dev/stdin")
            if v in _SHELL_VALUE_OPTS:
                next(it, None)
                continue
            if v.startswith("-") and not v.startswith("--") and len(v) > 1:
                if "c" in v[1:]:
                    return False
                if "s" in v[1:]:
                    return True
                continue
            if v.startswith(("--", "+")):
                continue
            return v in ("-", "/dev/stdin")
        return True
    if _is_python(name):
        it = iter(inv.args)
        for w in it:
            v = w.value
            if v in ("-c", "-m") or (
                v.startswith("-") and not v.startswith("--") and v[-1] in "cm" and len(v) > 1
            ):
                return False
            if v in ("-W", "-X", "-Q"):
                next(it, None)
                continue
            if v == "-":
                return True
            if v.startswith("-"):
                continue
            return v == "/dev/stdin"
        return True
    if name in SCRIPTING:
        for w in inv.args:
            v = w.value
            if v in ("-e", "-E", "-r", "-c", "--eval", "-p", "--print") or re.match(r"^-[a-zA-Z]*[eE]$", v):
                return False
            if v == "-":
                return True
            if not v.startswith("-"):
                return v == "/dev/stdin"
        return True
    return False


def _runs_code_of(inv: Inv) -> list[Word]:
    """Words whose substitution output an interpreter runs: ``bash <(curl)``, ``sh -c "$(curl)"``, ``eval``."""
    name = inv.name
    if name == "eval":
        return [w for w in inv.args if w.subs]
    if name in ("source", "."):
        return inv.args[:1]
    if name in SHELLS or _is_python(name) or name in SCRIPTING:
        code = _shell_c_string(inv) if name in SHELLS else _opt_value(inv, ("-c", "-e", "-E", "-r"), ())
        words = [code] if code is not None else []
        words += [w for w in inv.args if w.procsub == "<"]
        return words
    return []


def _downloads(inv: Inv | None) -> bool:
    return inv is not None and inv.name in DOWNLOADERS


def _text_downloads(text: str) -> bool:
    inner = parse(text)
    return any(_downloads(unwrap(c)) for c in inner.commands if c.words)


def _pipeline_rules(scope: _Scope, invs: list[tuple[Command, Inv | None]]) -> None:
    for cmd, inv in invs:
        if inv is None or not inv.name:
            continue
        for w in _runs_code_of(inv):
            if any(_text_downloads(s.text) for s in w.subs):
                scope.flag_cmd("remote_code_exec", cmd, f"{inv.name} runs code fetched from the network")
                break
        if _reads_program_from_stdin(inv) and any(
            red.op == "<"
            and red.target is not None
            and any(_text_downloads(sub.text) for sub in red.target.subs)
            for red in cmd.redirects
        ):
            scope.flag_cmd(
                "remote_code_exec", cmd, f"{inv.name} reads its program from a download (< <(curl ...))"
            )
    groups: dict[int, list[tuple[Command, Inv | None]]] = {}
    for item in invs:  # only commands of one top-level pipeline can feed each other
        groups.setdefault(item[0].path[0][0] if item[0].path else -1, []).append(item)
    feeds: dict[int, bool] = {}
    pairs = []
    for members in groups.values():
        members = members[:MAX_PIPELINE]
        for a in members:
            for b in members:
                if a[0] is not b[0] and upstream(a[0], b[0]):
                    pairs.append((a, b))
                    feeds[id(a[0])] = True
    for (ca, ia), (cb, ib) in pairs:
        if ib is None or not ib.name:
            continue
        span = (min(ca.start, cb.start), max(ca.end, cb.end))
        if ia is not None and ia.name in ("echo", "printf") and _reads_program_from_stdin(ib) and ia.args:
            # the text echoed into a shell is the program it runs: judge it as code (echo 'rm -rf /' | sh)
            code_words = [w for w in ia.args if not (ia.name == "echo" and re.match(r"^-[neE]+$", w.value))]
            if code_words:
                _analyse(
                    scope.child(
                        " ".join(w.value for w in code_words), span=(code_words[0].start, code_words[-1].end)
                    )
                )
        if _downloads(ia) and _reads_program_from_stdin(ib):
            scope.flag(
                "remote_code_exec",
                *span,
                f"{ia.name if ia else ''} output is run by {ib.name}: code from the network runs unseen",
            )
            continue
        if (
            ia is not None
            and ia.name
            and (_reads_program_from_stdin(ia) and (ia.name in SHELLS))
            and ib.name in RAW_NET
        ):
            scope.flag("reverse_shell", *span, f"a shell's output goes to {ib.name}")
            continue
        if _sends(ib) and ib.name not in ("scp", "rsync", "sftp", "rclone"):
            what = _secret_read(scope, ia, ca)
            if what is not None:
                scope.flag("credential_exfiltration", *span, f"{what} is piped to {ib.name}")
                continue
        if ib.name in ("grep", "egrep", "fgrep", "rg") and ia is not None and ia.name and _env_dump(ia):
            pattern = " ".join(w.value for w in ib.args)
            if SECRET_WORD.search(pattern):
                scope.flag("env_secret_dump", *span, "prints the secret variables of the environment")
    for cmd, inv in invs:
        if inv is None or not inv.name:
            continue
        if inv.name in ("echo", "printf", "printenv"):
            if feeds.get(id(cmd)):
                continue
            what = _secret_read(scope, inv, cmd)
            if what == "a secret environment variable":
                scope.flag_cmd("env_secret_dump", cmd, f"{inv.name} prints a secret environment variable")


# ---- fallback: tokens, when the parser found the line odd ------------------------------------------------------
_TOKEN = re.compile(r"\|\||&&|[|;&\n()`]|\$\(|[^\s|;&()`]+")


def _token_scan(scope: _Scope) -> None:
    """Commands rebuilt from whitespace tokens with quotes stripped: a broken line still gets the command rules
    (only rules the parse did not already report are added)."""
    before = len(scope.ctx.findings)
    known = {f.rule for f in scope.ctx.findings}
    _token_scan_rules(scope)
    fresh = scope.ctx.findings[before:]
    del scope.ctx.findings[before:]
    seen: set[str] = set()
    for f in fresh:
        if f.rule not in known and f.rule not in seen:
            seen.add(f.rule)
            scope.ctx.findings.append(f)


def _token_scan_rules(scope: _Scope) -> None:
    text = scope.text
    cmds: list[Command] = []
    cur = Command()
    pipeline, stage = 1, 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in ("|",):
            if cur.words:
                cur.path = ((pipeline, stage),)
                cmds.append(cur)
            cur, stage = Command(), stage + 1
            continue
        if tok in ("||", "&&", ";", "&", "\n", "(", ")", "`", "$("):
            if cur.words:
                cur.path = ((pipeline, stage),)
                cmds.append(cur)
            cur, pipeline, stage = Command(), pipeline + 1, 0
            continue
        value = tok.replace("'", "").replace('"', "")
        if not value or value.startswith("#"):
            continue
        w = Word(value, m.start(), m.end(), dynamic="$" in value)
        cur.words.append(w)
        cur.touch(w.start, w.end)
    if cur.words:
        cur.path = ((pipeline, stage),)
        cmds.append(cur)
    invs = []
    for cmd in cmds[:MAX_COMMANDS]:
        inv = unwrap(cmd)
        invs.append((cmd, inv))
        if inv is not None and inv.name:
            _command_rules(scope, inv)
    _pipeline_rules(scope, invs)


_BY_NAME: dict[str, Callable[[_Scope, Inv], None]] = {
    "rm": _rule_rm,
    "mv": _rule_mv,
    "find": _rule_find,
    "dd": _rule_dd,
    "tee": _rule_tee,
    "cp": _rule_cp,
    "install": _rule_cp,
    "truncate": _rule_truncate,
    "chmod": _rule_chmod,
    "chown": _rule_chown,
    "chgrp": _rule_chown,
    "kill": _rule_kill,
    "killall5": _rule_killall5,
    "history": _rule_history,
    "unset": _rule_unset,
    "export": _rule_export,
    "declare": _rule_export,
    "set": _rule_set,
    "shutdown": _rule_power,
    "reboot": _rule_power,
    "halt": _rule_power,
    "poweroff": _rule_power,
    "init": _rule_init,
    "telinit": _rule_init,
    "systemctl": _rule_systemctl,
    "crontab": _rule_crontab,
    "nc": _rule_netcat,
    "ncat": _rule_netcat,
    "netcat": _rule_netcat,
    "socat": _rule_socat,
    **{n: _rule_mkfs for n in MKFS},
    **{n: _rule_wipe for n in WIPERS},
    **{n: _rule_partition for n in PARTITIONERS},
}


def blocked_commands(commands: Iterable[str | None]) -> list[tuple[int, Verdict]]:
    """(position, verdict) of every command that a ``block`` rule fires on."""
    out = []
    for i, c in enumerate(commands):
        v = classify_command(c)
        if v.blocked:
            out.append((i, v))
    return out
