"""Natural-language-to-command pairs (NL2Bash, NL2SH-ALFA, InterCode style) as scenarios checked by execution.

Each ``{nl, cmd}`` pair becomes a task in a seeded world: the operator is asked the ``nl``, and the check decides by
**execution equivalence**, as InterCode does: it runs the pair's reference command on the same pristine world and
compares what the operator left with what the reference leaves. Nothing about the operator's commands is read; two
different commands with the same effect both pass.

Records: JSON Lines (or JSON, CSV, parquet; a local folder or a hub dataset, through ``public_data.iter_records``
and so ``datasets``) with one natural-language field and one command field. Field names accepted, the first present
wins:

- the request: ``nl`` (NL2Bash, NL2SH-ALFA), ``query`` (InterCode), ``nl_command``, ``invocation``, ``instruction``;
- the command: ``cmd``, ``bash`` (NL2SH-ALFA, the HF copies of NL2Bash), ``gold`` (InterCode), ``command``,
  ``bash_code``;
- another correct command, also accepted by the check: ``bash2`` (NL2SH-ALFA's test set), ``cmd2``, ``gold2``;
- ``difficulty`` 0..2 (NL2SH-ALFA: easy, medium, hard) becomes 1..3; without it a guess from the command's size.

**The world.** Every pair gets a small home tree drawn from a seed (``sha256`` of the pair and ``seed``): a few
folders, some nested, files of varied names (one with a space, one upper-case, one hidden), extensions, sizes
(empty to tens of KB), modes and modification times (years ago, weeks ago, days ago), a symlink. The world is
tailored to the command so that it has something to act on: the files and folders it names, files of the
extensions it globs (``*.log``), lines holding the text it greps, real archives for the archives it opens. The same
pair and seed always give the same world. The setup builds it in ``/home/operator``, stashes a pristine copy as a
tar in ``/root/.bashgym-world`` (root-only 0700: the operator cannot read it) and re-extracts the home from that tar,
so the operator's home and every later re-creation list their entries in the same order.

**The check** (Python inside the bash check, run as root after the operator is done):

1. the manifest of the real home: every path with its type, mode, size, SHA-256 of the content, symlink target, and
   the modification time when it is an old one (before 2024: the world's, or one set explicitly), else "recent";
2. the home is saved (tar), wiped and re-extracted from the pristine stash; the reference command runs there AS THE
   OPERATOR (uid 1000, umask 022, the session's environment, stdin empty, 10 s cap); its manifest and standard
   output are taken, then the operator's home is put back;
3. pass iff the manifests are equal and, for a printing command, the saved output equals the reference's (trailing
   newlines aside; as sorted lines when the reference's order is the directory order: ``find``, ``du``,
   ``grep -r`` with no ``sort``). ``bash2`` is tried too; either reference's result passes.

A reference that changes nothing (and, for a printing task, prints nothing) on the world makes the check fail with
that reason, so the gate rejects such a pair (``certify`` turns the gate's rejections into quarantine rows).

**Printing commands** (no file written: no redirection to a file, no ``rm``/``mv``/``cp``/``sed -i``/``find
-delete``...): the operator's terminal is never read by the check, so the task text asks to save what the command
prints to ``/tmp/answer.txt``. Why there: outside the world, so writing the answer changes no manifest and does not
show up in what ``find .`` or ``ls`` print; the reference is the command with its output redirected there.

**Quarantined** with the reason, before any sandbox: commands needing the network (``curl``, ``ssh``, ``git
clone``, URLs), ``sudo``/``su`` or root-only tools, programs the sandbox image does not have (``IMAGE_COMMANDS``),
interactive programs, output that depends on the moment (``date``, ``ps``, ``$RANDOM``), paths outside the world
(``/``, ``/tmp``, ``/proc``, another user's home; read-only system paths like ``/etc`` are fine), and commands that do
not parse.

Ids are ``nl2bash.<hash of the pair>``: training sources by default (the lead routes them through the similarity
guard so that near-duplicates of evaluation tasks never reach training).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.scenarios.bundle import BundleError, ScenarioBundle, parse_bundle
from bashgym_assets.scenarios.public_data import iter_records

NL2BASH_PREFIX = "nl2bash."
HOME = "/home/operator"
ANSWER_FILE = "/tmp/answer.txt"
STASH_DIR = "/root/.bashgym-world"
STASH_TAR = f"{STASH_DIR}/world.tar"
REFERENCE_TIMEOUT_S = 10
# Modification times before this instant are compared exactly; later ones only as "recent" (a command run now and
# the same command run by the check a minute later stamp different seconds).
OLD_BEFORE = 1704067200  # 2024-01-01T00:00:00Z

NL_KEYS = ("nl", "query", "nl_command", "invocation", "instruction")
CMD_KEYS = ("cmd", "bash", "gold", "command", "bash_code")
ALT_KEYS = ("bash2", "cmd2", "gold2")

# ``compgen -c`` in the sandbox image (sandbox_images/base/packages.txt); a test compares it with the real image.
_IMAGE_COMMANDS_TEXT = """
! . : [ [[ ]] accessdb add-shell addgroup addpart adduser agetty alias apropos apt apt-cache apt-cdrom apt-config
apt-get apt-key apt-mark arch awk b2sum badblocks base32 base64 basename basenc bash bashbug bc bg bind blkdiscard
blkid blkzone blockdev break builtin bunzip2 bzcat bzcmp bzdiff bzegrep bzexe bzfgrep bzgrep bzip2 bzip2recover
bzless bzmore c_rehash caller captoinfo case cat catman cd chage chattr chcon chcpu chfn chgpasswd chgrp chmem
chmod choom chown chpasswd chroot chrt chsh cksum clear clear_console cmp col colcrt colrm column comm command
compgen complete compopt continue coproc corelist cp cpan cpan5.36-x86_64-linux-gnu cpgr cpio cppw cron crontab
csplit ctrlaltdel cut dash date dd deb-systemd-helper deb-systemd-invoke debconf debconf-apt-progress
debconf-communicate debconf-copydb debconf-escape debconf-set-selections debconf-show debugfs declare delgroup
delpart deluser df diff diff3 dir dircolors dirname dirs disown dmesg dnsdomainname do domainname done dpkg
dpkg-deb dpkg-divert dpkg-fsys-usrunmess dpkg-maintscript-helper dpkg-preconfigure dpkg-query dpkg-realpath
dpkg-reconfigure dpkg-split dpkg-statoverride dpkg-trigger du dumpe2fs e2freefrag e2fsck e2image e2label
e2mmpstatus e2scrub e2scrub_all e2undo e4crypt e4defrag echo editor egrep elif else enable enc2xs encguess env eqn
esac eval ex exec exit expand expiry export expr factor faillock faillog fallocate false fc fg fgrep fi file
filefrag fincore find findfs findmnt flock fmt fold for free fsck fsck.cramfs fsck.ext2 fsck.ext3 fsck.ext4
fsck.minix fsfreeze fstab-decode fstrim function funzip fuser gawk gawkbug geqn getconf getent getopt getopts getty
git git-receive-pack git-shell git-upload-archive git-upload-pack gpasswd gpgv gpic grep groff grog grops grotty
groupadd groupdel groupmems groupmod groups grpck grpconv grpunconv gtbl gunzip gzexe gzip h2ph h2xs hardlink hash
hd head help helpztags hexdump history hostid hostname hwclock i386 iconv iconvconfig id if in infocmp infotocap
install installkernel instmodsh invoke-rc.d ionice ipcmk ipcrm ipcs ischroot isosize jobs join jq json_pp kill
killall killall5 last lastb lastlog ld.so ldattach ldconfig ldd less lessecho lessfile lesskey lesspipe let lexgrog
libnetcfg link linux32 linux64 ln local locale localedef logger login logname logout logsave look losetup ls lsattr
lsblk lscpu lsfd lsipc lsirq lslocks lslogins lsmem lsns lzcat lzcmp lzdiff lzegrep lzfgrep lzgrep lzless lzma
lzmainfo lzmore man man-recode mandb manpath mapfile mawk mcookie md5sum md5sum.textutils mesg mkdir mke2fs mkfifo
mkfs mkfs.bfs mkfs.cramfs mkfs.ext2 mkfs.ext3 mkfs.ext4 mkfs.minix mkhomedir_helper mklost+found mknod mkswap
mktemp more mount mountpoint mt mt-gnu mv namei nawk neqn newgrp newusers nice nisdomainname nl nohup nologin nproc
nroff nsenter numfmt od openssl pager pam-auth-update pam_getenv pam_namespace_helper pam_timestamp_check partx
passwd paste patch pathchk pdb3 pdb3.11 peekfd perl perl5.36-x86_64-linux-gnu perl5.36.0 perlbug perldoc perlivp
perlthanks pgrep pic piconv pidof pidwait pinky pivot_root pkill pl2pm pldd pmap pod2html pod2man pod2text
pod2usage podchecker popd pr preconv printenv printf prlimit prove prtstat ps pslog pstree pstree.x11 ptar ptardiff
ptargrep ptx pushd pwck pwconv pwd pwdx pwhistory_helper pwunconv py3clean py3compile py3versions pydoc3 pydoc3.11
pygettext3 pygettext3.11 python3 python3.11 rbash read readarray readlink readonly readprofile realpath
remove-shell rename.ul renice reset resize2fs resizepart return rev rgrep rm rmdir rmt rmt-tar rrsync rsync
rsync-ssl rtcwake run-parts runcon runuser rview savelog scalar script scriptlive scriptreplay sdiff sed select
select-editor sensible-browser sensible-editor sensible-pager seq service set setarch setpriv setsid setterm sg sh
sha1sum sha224sum sha256sum sha384sum sha512sum shadowconfig shasum shift shopt shred shuf skill slabtop sleep
snice soelim sort source splain split sqlite3 start-stop-daemon stat stdbuf streamzip stty su sulogin sum suspend
swaplabel swapoff swapon switch_root sync sysctl tabs tac tail tar tarcat taskset tbl tee tempfile test then tic
time timeout times tload toe top touch tput tr trap tree troff true truncate tset tsort tty tune2fs type typeset
tzselect uclampset ul ulimit umask umount unalias uname uncompress unexpand uniq unix_chkpwd unix_update unlink
unlzma unset unshare until unxz unzip unzipsfx update-alternatives update-ca-certificates update-passwd update-rc.d
update-shells uptime useradd userdel usermod users utmpdump vdir vi view vigr vim.tiny vipw vmstat w wait wall
watch wc wdctl whatis whereis which which.debianutils while who whoami wipefs write x86_64 xargs xsubpp xz xzcat
xzcmp xzdiff xzegrep xzfgrep xzgrep xzless xzmore yes ypdomainname zcat zcmp zdiff zdump zegrep zfgrep zforce zgrep
zic zip zipcloak zipdetails zipgrep zipinfo zipnote zipsplit zless zmore znew zramctl { }
"""
IMAGE_COMMANDS = frozenset(_IMAGE_COMMANDS_TEXT.split())

NETWORK = frozenset(
    {
        "curl",
        "wget",
        "ssh",
        "scp",
        "sftp",
        "ftp",
        "lftp",
        "telnet",
        "nc",
        "ncat",
        "netcat",
        "socat",
        "ping",
        "ping6",
        "traceroute",
        "tracepath",
        "mtr",
        "dig",
        "nslookup",
        "host",
        "whois",
        "ifconfig",
        "ip",
        "netstat",
        "ss",
        "arp",
        "route",
        "nmap",
        "tcpdump",
        "iptables",
        "aria2c",
        "axel",
        "httpie",
        "http",
        "rsync-ssl",
        "rclone",
        "pip",
        "pip3",
        "npm",
        "yarn",
        "gem",
        "cargo",
        "go",
        "docker",
        "kubectl",
        "aws",
        "gcloud",
        "az",
        "mail",
        "mailx",
        "sendmail",
        "links",
        "lynx",
        "w3m",
        "ntpdate",
        "apt",
        "apt-get",
        "aptitude",
        "yum",
        "dnf",
        "brew",
        "snap",
        "add-apt-repository",
    }
)
GIT_NETWORK = frozenset({"clone", "pull", "push", "fetch", "ls-remote", "submodule", "remote"})
SUDO = frozenset({"sudo", "su", "doas", "pkexec", "runuser", "setpriv", "sg", "newgrp", "login"})
ROOT_ONLY = frozenset(
    {
        "useradd",
        "userdel",
        "usermod",
        "adduser",
        "deluser",
        "addgroup",
        "delgroup",
        "groupadd",
        "groupdel",
        "groupmod",
        "chpasswd",
        "passwd",
        "chsh",
        "chfn",
        "gpasswd",
        "mount",
        "umount",
        "swapon",
        "swapoff",
        "mkfs",
        "mke2fs",
        "fdisk",
        "parted",
        "shutdown",
        "reboot",
        "halt",
        "poweroff",
        "service",
        "systemctl",
        "modprobe",
        "insmod",
        "rmmod",
        "sysctl",
        "chroot",
        "visudo",
        "update-alternatives",
        "ldconfig",
        "hwclock",
        "chattr",
        "losetup",
        "unshare",
    }
)
PROCESSES = frozenset(
    {
        "kill",
        "killall",
        "pkill",
        "skill",
        "snice",
        "renice",
        "ionice",
        "taskset",
        "crontab",
        "at",
        "batch",
        "wall",
        "write",
        "mesg",
        "logger",
        "disown",
        "bg",
        "fg",
        "wait",
        "coproc",
    }
)
INTERACTIVE = frozenset(
    {
        "vi",
        "vim",
        "vim.tiny",
        "view",
        "nano",
        "emacs",
        "ed",
        "ex",
        "top",
        "htop",
        "watch",
        "info",
        "screen",
        "tmux",
        "script",
        "ssh-keygen",
        "mysql",
        "psql",
        "irb",
        "tload",
        "setterm",
        "reset",
        "clear",
        "tput",
        "tset",
        "stty",
        "tty",
    }
)
VOLATILE = frozenset(
    {
        "date",
        "ps",
        "pstree",
        "pgrep",
        "pidof",
        "pidwait",
        "uptime",
        "free",
        "vmstat",
        "w",
        "who",
        "users",
        "last",
        "lastb",
        "lastlog",
        "shuf",
        "mktemp",
        "tempfile",
        "mcookie",
        "uuidgen",
        "df",
        "lsof",
        "history",
        "jobs",
        "dmesg",
        "times",
        "hostid",
        "pwdx",
        "pmap",
        "fuser",
        "lsfd",
        "lslocks",
        "ipcs",
        "lsipc",
        "lscpu",
        "lsmem",
        "lsblk",
        "findmnt",
        "nproc",
        "prlimit",
        "env",
        "printenv",
    }
)
VOLATILE_TEXT = re.compile(
    r"\$\{?(?:RANDOM|SRANDOM|BASHPID|SECONDS|EPOCHSECONDS|EPOCHREALTIME|PPID|\$)\b|"
    r"/dev/u?random|\$\$"
)
NETWORK_TEXT = re.compile(r"\b(?:https?|ftp|ssh|git|rsync)://|/dev/(?:tcp|udp)/|\b[\w.-]+@[\w.-]+:")
# Read-only system paths: the same in every sandbox of the image, so reading them is reproducible.
SYSTEM_READ = (
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/opt",
    "/srv",
    "/var/log",
    "/var/lib",
    "/var/cache",
    "/var/backups",
    "/var/mail",
    "/var/spool",
)
DEVICES_OK = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/zero"})
ARCHIVE_EXTS = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tar", ".zip", ".gz", ".bz2", ".xz")

# Commands that write files (a task for them compares the tree only; the others print and their output is compared).
WRITERS = frozenset(
    {
        "rm",
        "rmdir",
        "mv",
        "cp",
        "mkdir",
        "touch",
        "chmod",
        "chown",
        "chgrp",
        "ln",
        "link",
        "unlink",
        "install",
        "truncate",
        "shred",
        "split",
        "csplit",
        "rename.ul",
        "mkfifo",
        "mknod",
        "patch",
        "rsync",
        "tee",
        "zip",
        "fallocate",
        "ptar",
        "uncompress",
        "znew",
        "gzexe",
    }
)
COMPRESSORS = frozenset({"gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma"})
GIT_READ = frozenset(
    {
        "status",
        "log",
        "diff",
        "show",
        "ls-files",
        "branch",
        "tag",
        "blame",
        "shortlog",
        "rev-parse",
        "describe",
        "grep",
        "config",
        "help",
        "--version",
        "version",
    }
)
READDIR_ORDER = frozenset({"find", "du", "rgrep", "hardlink"})
# Arguments that are text, not paths (programs, patterns, values): never world hints, never path problems.
TEXT_ARGS = frozenset(
    {
        "echo",
        "printf",
        "expr",
        "test",
        "[",
        "[[",
        "let",
        "export",
        "declare",
        "local",
        "seq",
        "tr",
        "bc",
        "jq",
        "sleep",
        "yes",
        "numfmt",
        "factor",
        "alias",
        "type",
        "which",
        "command",
        "help",
        "man",
        "whatis",
        "apropos",
        "true",
        "false",
        "set",
        "shopt",
        "trap",
        "return",
        "exit",
        "read",
        "printenv",
        "env",
        "id",
        "groups",
        "getent",
        "hash",
        "umask",
        "ulimit",
        "basename",
        "dirname",
        "for",
        "case",
        "in",
        "select",
        "until",
        "while",
        "if",
        "do",
        "python3",
        "perl",
        "bash",
        "sh",
        "dash",
        "rbash",
        "eval",
        "source",
        ".",
    }
)
OPTION_VALUES: dict[str, frozenset[str]] = {
    "head": frozenset({"-n", "-c"}),
    "tail": frozenset({"-n", "-c"}),
    "sort": frozenset({"-k", "-t", "-o", "-S"}),
    "cut": frozenset({"-d", "-f", "-c", "-b"}),
    "grep": frozenset({"-e", "-f", "-m", "-A", "-B", "-C"}),
    "split": frozenset({"-l", "-b", "-n", "-a"}),
    "du": frozenset({"-d", "-B", "-t"}),
    "cp": frozenset({"-t", "-S"}),
    "mv": frozenset({"-t", "-S"}),
    "ln": frozenset({"-t", "-S"}),
    "tar": frozenset({"-f", "-C", "-T", "-X", "-b", "-H"}),
    "sed": frozenset({"-e", "-f", "-l"}),
    "awk": frozenset({"-F", "-v", "-f"}),
    "uniq": frozenset({"-f", "-s", "-w"}),
    "paste": frozenset({"-d"}),
    "join": frozenset({"-t", "-1", "-2", "-j", "-o", "-a", "-v", "-e"}),
    "column": frozenset({"-s", "-c", "-o"}),
    "nl": frozenset({"-w", "-s", "-b", "-v", "-i"}),
    "fold": frozenset({"-w"}),
    "fmt": frozenset({"-w"}),
    "stat": frozenset({"-c", "--format", "--printf"}),
    "od": frozenset({"-A", "-t", "-N", "-j", "-w"}),
    "truncate": frozenset({"-s", "-r"}),
    "chmod": frozenset({"--reference"}),
    "xargs": frozenset({"-I", "-n"}),
    "find": frozenset(),
    "zip": frozenset({"-x", "-i"}),
    "diff": frozenset({"-U", "-C"}),
    "wc": frozenset(),
    "ls": frozenset({"-I", "--ignore", "-w"}),
    "tree": frozenset({"-L", "-P", "-I"}),
}
for _alias, _base in (
    ("egrep", "grep"),
    ("fgrep", "grep"),
    ("zgrep", "grep"),
    ("gawk", "awk"),
    ("mawk", "awk"),
    ("nawk", "awk"),
):
    OPTION_VALUES[_alias] = OPTION_VALUES[_base]
GREP_LIKE = frozenset({"grep", "egrep", "fgrep", "zgrep", "rgrep", "bzgrep", "xzgrep"})
PROGRAM_FIRST = frozenset({"awk", "gawk", "mawk", "nawk", "sed"})  # the first positional is a program
CREATES_ARGS = frozenset({"mkdir", "touch", "mkfifo", "mknod", "mktemp", "tee"})
LAST_IS_DESTINATION = frozenset({"cp", "mv", "ln", "rsync", "install", "link"})
DIR_ARGS = frozenset({"cd", "pushd", "ls", "du", "tree", "rmdir", "dir", "vdir"})
_EXT = re.compile(r"^(?P<stem>.+)\.(?P<ext>[A-Za-z][A-Za-z0-9]{0,5})$")
_GLOB_EXT = re.compile(r"(?:^|/)\*+\.(?P<ext>[A-Za-z][A-Za-z0-9]{0,5})$")
_SIMPLE_TEXT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9 _.:=-]{0,39}$")
_SED_SUBST = re.compile(r"^\s*(?:\d+,\d+|/[^/]*/)?\s*s(.)(.+?)\1")
_MODE = re.compile(r"^(?:[0-7]{3,4}|[ugoa]*[-+=][rwxXst]*(?:,[ugoa]*[-+=][rwxXst]*)*)$")
_ABS_IN_WORD = re.compile(r"(?:^|[=:,])(/[^\s:,'\"]*)")


# ---- reading pairs -------------------------------------------------------------------------------------------------
class Pair(BaseModel):
    """One natural-language request and the command(s) that fulfil it."""

    nl: str
    cmd: str
    alternatives: list[str] = Field(default_factory=list)
    difficulty: int | None = None
    locator: str = ""


def _first(record: dict[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    for key in keys:
        if key in record and record[key] is not None:
            return key, record[key]
    return None, None


def record_to_pair(record: Any, locator: str = "") -> Pair:
    """A record in any of the accepted layouts (module doc) as a ``Pair``; ValueError names what is wrong."""
    if not isinstance(record, dict):
        raise ValueError(f"a pair is a mapping with a request and a command, got {type(record).__name__}")
    nl_key, nl = _first(record, NL_KEYS)
    cmd_key, cmd = _first(record, CMD_KEYS)
    missing = [
        what
        for what, key in (
            ("request (" + "/".join(NL_KEYS) + ")", nl_key),
            ("command (" + "/".join(CMD_KEYS) + ")", cmd_key),
        )
        if key is None
    ]
    if missing:
        raise ValueError(
            f"missing field(s): {', '.join(missing)}; its keys: {', '.join(sorted(map(str, record)))}"
        )
    for key, value in ((nl_key, nl), (cmd_key, cmd)):
        if not isinstance(value, str):
            raise ValueError(f"{key} must be text, got {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"{key} is empty")
    alternatives = []
    for key in ALT_KEYS:
        value = record.get(key)
        if isinstance(value, str) and value.strip() and value.strip() != cmd.strip():
            alternatives.append(value.strip())
    difficulty = record.get("difficulty")
    if isinstance(difficulty, float) and difficulty.is_integer():
        difficulty = int(difficulty)
    if isinstance(difficulty, str) and difficulty.strip().isdigit():
        difficulty = int(difficulty)
    if not isinstance(difficulty, int) or isinstance(difficulty, bool):
        difficulty = None
    return Pair(
        nl=" ".join(nl.split()),
        cmd=cmd.strip(),
        alternatives=alternatives,
        difficulty=None if difficulty is None else min(3, max(0, difficulty)) + 1,
        locator=locator,
    )


def pair_id(pair: Pair) -> str:
    return NL2BASH_PREFIX + hashlib.sha256(f"{pair.nl}\0{pair.cmd}".encode()).hexdigest()[:16]


# ---- what a command does (static) ----------------------------------------------------------------------------------
@dataclass
class Hints:
    """What the world needs so that the command has something to act on (relative to the home)."""

    exts: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    anywhere: set[str] = field(default_factory=set)  # file names find looks for: placed at two depths
    dirs: set[str] = field(default_factory=set)
    patterns: set[str] = field(default_factory=set)
    avoid: set[str] = field(default_factory=set)  # paths the command creates: must not exist before


@dataclass
class Analysis:
    """A command read statically: why it cannot be a task (``problems``), whether it writes files, whether its
    output order is the directory order, the programs it runs and what its world needs."""

    problems: list[str] = field(default_factory=list)
    writes: bool = False
    readdir_order: bool = False
    sorted_output: bool = False
    programs: set[str] = field(default_factory=set)
    hints: Hints = field(default_factory=Hints)

    @property
    def unordered(self) -> bool:
        return self.readdir_order and not self.sorted_output


def _rel(value: str) -> str | None:
    """A literal path as a path relative to the home, or None (variables, globs, '..', absolute elsewhere)."""
    v = value.strip()
    for prefix in ("~/", "$HOME/", "${HOME}/", HOME + "/"):
        if v.startswith(prefix):
            v = v[len(prefix) :]
            break
    while v.startswith("./"):
        v = v[2:]
    v = v.rstrip("/") if v not in ("/",) else v
    if (
        not v
        or v in (".", "..", "~")
        or len(v) > 120
        or v.startswith(("/", "-", "~"))
        or any(c in v for c in "$`*?[]{}\n\0")
        or ".." in v.split("/")
        or "" in v.split("/")
    ):
        return None
    return v


def _is_fileish(rel: str) -> bool:
    """Whether a path names a file by its look (``notes.txt``, not ``1.5`` nor ``.bashrc``)."""
    m = _EXT.match(posixpath.basename(rel))
    return m is not None and not m.group("stem").isdigit() and not m.group("stem").startswith(".")


def _positionals(name: str, args: list[Any]) -> list[Any]:
    takes = OPTION_VALUES.get(name, frozenset())
    out, skip, done = [], False, False
    for w in args:
        v = w.value
        if skip:
            skip = False
            continue
        if done or v == "-" or not v.startswith("-"):
            out.append(w)
        elif v == "--":
            done = True
        elif v in takes:
            skip = True
    return out


def _find_parts(args: list[Any]) -> tuple[list[Any], list[str]]:
    """find's start points and its expression words."""
    starts, i = [], 0
    while i < len(args) and not args[i].value.startswith(("-", "(", "!")) and args[i].value not in ("(", "!"):
        starts.append(args[i])
        i += 1
    return starts, [w.value for w in args[i:]]


def _find_exec_commands(expr: list[str]) -> list[str]:
    """The commands ``-exec``/``-execdir``/``-ok`` run, as text to analyse like any command."""
    out = []
    i = 0
    while i < len(expr):
        if expr[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            words = []
            while j < len(expr) and expr[j] not in (";", "+"):
                words.append(expr[j])
                j += 1
            if words:
                out.append(" ".join(shlex.quote(w) for w in words))
            i = j
        i += 1
    return out


def _path_problem(value: str) -> str | None:
    """Why an absolute path in the command falls outside what execution equivalence can compare, else None."""
    for path in _ABS_IN_WORD.findall(value):
        p = posixpath.normpath(path) if path != "/" else "/"
        if p == HOME or p.startswith(HOME + "/") or p in DEVICES_OK:
            continue
        if any(p == root or p.startswith(root + "/") for root in SYSTEM_READ):
            continue
        return f"uses {path}, outside the seeded world (the home) and the read-only system folders"
    if re.match(r"^~[A-Za-z_]", value) and not value.startswith("~operator"):
        return f"uses another user's home ({value.split('/')[0]})"
    return None


def analyse(cmd: str, depth: int = 0, into: Analysis | None = None) -> Analysis:
    """Read a command (and the commands it runs: ``$(...)``, ``bash -c``, ``find -exec``, ``xargs``)."""
    from bashgym_assets.shell import parse, unwrap

    out = into or Analysis()
    if depth == 0:
        if VOLATILE_TEXT.search(cmd):
            out.problems.append(
                "its output depends on the moment it runs ($RANDOM, $$, /dev/urandom ...): no "
                "fixed answer to compare"
            )
        if NETWORK_TEXT.search(cmd):
            out.problems.append("needs the network (a URL or a remote host)")
    parsed = parse(cmd)
    defined = {name for name, _ in parsed.functions}
    for command in parsed.commands:
        for red in command.redirects:
            target = red.target.value if red.target is not None else ""
            if red.op in (">", ">>", ">|", "&>", "&>>", "<>"):
                if target not in DEVICES_OK and not target.startswith("&"):
                    out.writes = True
                    rel = _rel(target)
                    if rel:
                        out.hints.avoid.add(rel)
            elif red.op == "<" and red.target is not None:
                rel = _rel(target)
                if rel:
                    out.hints.files.add(rel)
            if red.target is not None and not red.target.dynamic:
                problem = _path_problem(target)
                if problem and problem not in out.problems:
                    out.problems.append(problem)
            if red.target is not None:
                for sub in red.target.subs:
                    if depth < 4:
                        analyse(sub.text, depth + 1, out)
        for word in command.words:
            for sub in word.subs:
                if depth < 4:
                    analyse(sub.text, depth + 1, out)
        inv = unwrap(command)
        if inv is None:
            continue
        for wrapper in inv.wrappers:
            if wrapper in SUDO:
                out.problems.append(f"needs {wrapper} (root rights the operator does not have)")
            elif wrapper in ROOT_ONLY:
                out.problems.append(f"needs root rights ({wrapper}) that the operator does not have")
            elif wrapper in ("torsocks", "proxychains", "proxychains4"):
                out.problems.append(f"needs the network ({wrapper})")
        name_word = next((w for w in command.words if w.value.rsplit("/", 1)[-1] == inv.name), None)
        if not inv.name or (name_word is not None and name_word.dynamic):
            continue
        _judge(inv, defined, out, depth)
    return out


def _judge(inv: Any, defined: set[str], out: Analysis, depth: int) -> None:
    """One invocation: problems, writing, ordering and hints."""
    name = inv.name
    args = inv.args
    values = [w.value for w in args]
    out.programs.add(name)
    if name in SUDO:
        out.problems.append(f"needs {name} (root rights the operator does not have)")
    elif (
        name in NETWORK
        or (name == "git" and any(v in GIT_NETWORK for v in values[:2]))
        or (name == "rsync" and any(re.match(r"^[\w.-]+(@[\w.-]+)?:", v) for v in values))
    ):
        out.problems.append(f"needs the network ({name})")
    elif name in ROOT_ONLY:
        out.problems.append(f"needs root rights ({name}) that the operator does not have")
    elif name in PROCESSES:
        out.problems.append(
            f"acts on processes or system state ({name}) that the world does not hold: nothing to compare"
        )
    elif name in INTERACTIVE:
        out.problems.append(f"{name} is interactive or draws on the terminal: nothing to compare")
    elif name in VOLATILE:
        out.problems.append(f"its output depends on the moment it runs ({name}): no fixed answer to compare")
    elif name not in IMAGE_COMMANDS and name not in defined:
        out.problems.append(f"needs {name}, which the sandbox image does not have")
    if name == "sort":
        out.sorted_output = True
    if (
        name in READDIR_ORDER
        or (name in GREP_LIKE and inv.has_flag("rR", ("--recursive",)))
        or (name == "ls" and inv.has_flag("Uf"))
    ):
        out.readdir_order = True
    if _writes(inv):
        out.writes = True
    # paths outside the world
    if name not in TEXT_ARGS:
        skip_first = (
            name in PROGRAM_FIRST
            and not any(v in ("-e", "-f") for v in values)
            or name in GREP_LIKE
            and not any(v in ("-e", "-f") or v.startswith("--regexp") for v in values)
        )
        for k, w in enumerate(_positionals(name, args)):
            if skip_first and k == 0 or w.dynamic:
                continue
            problem = _path_problem(w.value)
            if problem and problem not in out.problems:
                out.problems.append(problem)
    if name in SUDO or name in ("bash", "sh", "dash", "rbash"):
        for i, v in enumerate(values[:-1]):
            if v == "-c" and depth < 4:
                analyse(values[i + 1], depth + 1, out)
    if name == "find":
        for text in _find_exec_commands(values):
            if depth < 4:
                analyse(text, depth + 1, out)
    _hint(inv, out.hints)


def _writes(inv: Any) -> bool:
    """Whether this invocation writes files (then the task compares the tree, not the output)."""
    name, args = inv.name, inv.args
    values = [w.value for w in args]
    first = values[0] if values else ""
    return any(
        (
            name in WRITERS,
            name in COMPRESSORS and not inv.has_flag("clt", ("--stdout", "--to-stdout", "--list", "--test")),
            name == "tar"
            and (
                bool(re.match(r"^-?[A-Za-z]*[cxruA]", first))
                and not first.startswith("--")
                or inv.has_flag("cxruA", ("--create", "--extract", "--get", "--append", "--delete"))
            ),
            name == "unzip" and not inv.has_flag("lvtpZ"),
            name == "sed" and inv.has_flag("i", ("--in-place",)),
            name == "perl"
            and any(v.startswith("-") and not v.startswith("--") and "i" in v[1:3] for v in values),
            name in ("awk", "gawk") and "inplace" in values,
            name == "sort" and inv.has_flag("o", ("--output",)),
            name == "dd" and any(v.startswith("of=") for v in values),
            name == "git" and bool(values) and first not in GIT_READ,
            name == "cpio" and inv.has_flag("ip", ("--extract", "--pass-through")),
            name == "uniq" and len(_positionals(name, args)) >= 2,
            name == "find"
            and any(v in ("-delete", "-fprint", "-fprint0", "-fprintf", "-fls") for v in values),
        )
    )


def _hint(inv: Any, hints: Hints) -> None:
    """What the world needs for this invocation (best effort: a wrong guess only adds a file to the world)."""
    name, args = inv.name, inv.args
    for w in args:
        m = _GLOB_EXT.search(w.value)
        if m:
            hints.exts.add(m.group("ext").lower())
    if name in TEXT_ARGS or name in ("chown", "chgrp"):
        if name in ("chown", "chgrp"):
            for w in _positionals(name, args)[1:]:
                rel = _rel(w.value)
                if rel:
                    (hints.files if _is_fileish(rel) else hints.dirs).add(rel)
        return
    if name == "find":
        starts, expr = _find_parts(args)
        for w in starts:
            rel = _rel(w.value)
            if rel:
                hints.dirs.add(rel)
        wants_dir = any(
            expr[i] == "-type" and i + 1 < len(expr) and expr[i + 1] == "d" for i in range(len(expr))
        )
        for i, v in enumerate(expr[:-1]):
            if v in ("-name", "-iname"):
                target = expr[i + 1]
                m = _GLOB_EXT.search(target)
                if m:
                    hints.exts.add(m.group("ext").lower())
                elif not any(c in target for c in "*?[]/") and target.strip():
                    if wants_dir:
                        hints.dirs.add(target)
                    else:
                        hints.anywhere.add(target)
            elif v in ("-newer", "-anewer", "-cnewer"):
                rel = _rel(expr[i + 1])
                if rel:
                    hints.files.add(rel)
        return
    positionals = _positionals(name, args)
    if name in GREP_LIKE:
        explicit = [args[i + 1].value for i, w in enumerate(args[:-1]) if w.value == "-e"]
        if not explicit and positionals:
            explicit, positionals = [positionals[0].value], positionals[1:]
        for pattern in explicit:
            if _SIMPLE_TEXT.match(pattern):
                hints.patterns.add(pattern)
        recursive = inv.has_flag("rR", ("--recursive",)) or name == "rgrep"
        for w in positionals:
            rel = _rel(w.value)
            if rel:
                (hints.files if _is_fileish(rel) or not recursive else hints.dirs).add(rel)
        return
    if name == "sed":
        scripts = [args[i + 1].value for i, w in enumerate(args[:-1]) if w.value == "-e"]
        if not scripts and positionals:
            scripts = [positionals[0].value]
        for script in scripts:
            m = _SED_SUBST.match(script)
            if m and _SIMPLE_TEXT.match(m.group(2)):
                hints.patterns.add(m.group(2))
    if name in PROGRAM_FIRST and not any(w.value in ("-e", "-f") for w in args) and positionals:
        positionals = positionals[1:]
    if name == "chmod" and positionals and _MODE.match(positionals[0].value):
        positionals = positionals[1:]
    if name == "tar":
        first = args[0].value if args else ""
        bundled = bool(re.match(r"^-?[A-Za-z]+$", first)) and not first.startswith("--")
        creating = (bundled and "c" in first) or inv.has_flag("c", ("--create",))
        archive = None
        for i, w in enumerate(args):
            if w.value.startswith("--file="):
                archive = w.value.split("=", 1)[1]
            elif w.value == "-f" or (i == 0 and bundled and "f" in first):
                archive = args[i + 1].value if i + 1 < len(args) else None
        rel = _rel(archive) if archive else None
        if rel:
            (hints.avoid if creating else hints.files).add(rel)
        if creating:
            for w in positionals:
                if w.value in (archive, first) or w.dynamic:
                    continue
                rel = _rel(w.value)
                if rel:
                    (hints.files if _is_fileish(rel) else hints.dirs).add(rel)
        return
    if name == "zip" and positionals:
        rel = _rel(positionals[0].value)
        if rel:
            hints.avoid.add(rel if "." in posixpath.basename(rel) else rel + ".zip")
        positionals = positionals[1:]
    if name in CREATES_ARGS:
        for w in positionals:
            rel = _rel(w.value)
            if rel:
                hints.avoid.add(rel)
        return
    if (
        name in LAST_IS_DESTINATION
        and len(positionals) >= 2
        and not any(w.value.startswith("-t") for w in args)
    ):
        dest = positionals[-1].value
        positionals = positionals[:-1]
        rel = _rel(dest)
        if rel:
            (hints.dirs if dest.endswith("/") else hints.avoid).add(rel)
    for w in positionals:
        if w.dynamic:
            continue
        rel = _rel(w.value)
        if not rel:
            continue
        if (
            w.value.endswith("/")
            or (name in DIR_ARGS and not _is_fileish(rel))
            or inv.has_flag("rR")
            and not _is_fileish(rel)
        ):
            hints.dirs.add(rel)
        else:
            hints.files.add(rel)


# ---- the seeded world ----------------------------------------------------------------------------------------------
@dataclass
class WorldPlan:
    """A home tree: folders, files (text written through the bundle's ``files``), generated files (big ones and
    archives, made by setup commands), a symlink, modes and modification times."""

    dirs: dict[str, int] = field(default_factory=dict)  # rel -> mode
    files: dict[str, str] = field(default_factory=dict)  # rel -> text
    modes: dict[str, int] = field(default_factory=dict)  # rel -> mode (files)
    generated: dict[str, str] = field(default_factory=dict)  # rel -> shell command run in the home
    links: dict[str, str] = field(default_factory=dict)  # rel -> target
    mtimes: dict[str, tuple[str, int]] = field(
        default_factory=dict
    )  # rel -> ("at", epoch) | ("ago", seconds)

    def has(self, rel: str) -> bool:
        return rel in self.dirs or rel in self.files or rel in self.generated or rel in self.links


def _content(world: Any, ext: str, patterns: Iterable[str], lines: int) -> str:
    """Plausible text for a file of this extension, with the grep patterns in some of its lines."""
    from bashgym_assets.scenarios.factory.world import CITIES, FIRST_NAMES

    if lines == 0:
        return ""
    if ext == "log":
        body = world.log_lines(lines)
    elif ext == "csv":
        body = ["id,name,city,amount"] + [
            f"{i},{world.pick(FIRST_NAMES)},{world.pick(CITIES)},{world.randint(1, 999)}"
            for i in range(1, lines)
        ]
    elif ext == "json":
        body = [
            json.dumps(
                {
                    "name": world.pick(FIRST_NAMES),
                    "count": world.randint(0, 500),
                    "tags": world.lines(1)[0].split()[:3],
                },
                sort_keys=True,
            )
        ]
    elif ext in ("conf", "ini", "yaml", "yml", "cfg", "env", "properties"):
        body = world.lines(lines, kind="kv")
    elif ext == "sh":
        body = ["#!/bin/bash", *(f"echo {line}" for line in world.lines(max(1, lines - 1)))]
    elif ext == "py":
        body = ["#!/usr/bin/env python3", *(f"print({line!r})" for line in world.lines(max(1, lines - 1)))]
    elif ext in ("dat", "num"):
        body = world.lines(lines, kind="numbers")
    else:
        body = world.lines(lines)
    for pattern in sorted(patterns):
        body.insert(world.randint(0, len(body)), f"{world.lines(1)[0]} {pattern} {world.pick(FIRST_NAMES)}")
    return "\n".join(body) + "\n"


def _ext_of(rel: str) -> str:
    base = posixpath.basename(rel)
    return base.rsplit(".", 1)[1].lower() if "." in base.lstrip(".") else "txt"


def _archive_command(rel: str, sources: list[str]) -> str:
    """A shell command (run in the home) that makes a real archive at ``rel`` from some world files."""
    q = shlex.quote(rel)
    src = " ".join(shlex.quote(s) for s in sources)
    low = rel.lower()
    if low.endswith((".tar.gz", ".tgz")):
        return f"tar -czf {q} {src}"
    if low.endswith(".tar.bz2"):
        return f"tar -cjf {q} {src}"
    if low.endswith(".tar.xz"):
        return f"tar -cJf {q} {src}"
    if low.endswith(".tar"):
        return f"tar -cf {q} {src}"
    if low.endswith(".zip"):
        return f"zip -q -X {q} {src}"
    tool = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}[
        next(e for e in (".gz", ".bz2", ".xz") if low.endswith(e))
    ]
    return f"cat {src} | {tool} -c > {q}"


def build_world(seed: str | int, hints: Hints | None = None) -> WorldPlan:
    """The seeded home tree for one pair (same seed and hints: same world)."""
    from bashgym_assets.scenarios.factory.world import EXTENSIONS, World

    world = World(f"nl2bash:{seed}")
    hints = hints or Hints()
    plan = WorldPlan()
    avoid = {a.rstrip("/") for a in hints.avoid}
    taken: set[str] = set()

    def ok(rel: str) -> bool:
        parts = rel.split("/")
        prefixes = {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
        return (
            rel not in taken
            and not (prefixes & avoid)
            and not any(
                "/".join(parts[:i]) in plan.files or "/".join(parts[:i]) in plan.generated
                for i in range(1, len(parts))
            )
        )

    def add_dir(rel: str, mode: int = 0o755) -> bool:
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub in plan.files or sub in plan.generated or sub in plan.links or sub in avoid:
                return False
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in plan.dirs:
                plan.dirs[sub] = mode if sub == rel else 0o755
                taken.add(sub)
        return True

    def add_file(rel: str, lines: int | None = None, mode: int | None = None, hinted: bool = False) -> bool:
        if not ok(rel) or rel in plan.dirs:
            return False
        parent = posixpath.dirname(rel)
        if parent and not add_dir(parent):
            return False
        ext = _ext_of(rel)
        n = world.randint(3, 40) if lines is None else lines
        grep_lines = hints.patterns if hinted or world.chance(0.4) else ()
        plan.files[rel] = _content(world, ext, grep_lines, n)
        plan.modes[rel] = (
            mode
            if mode is not None
            else (0o755 if ext in ("sh", "py") else world.pick((0o644, 0o644, 0o644, 0o600, 0o664, 0o444)))
        )
        taken.add(rel)
        return True

    # the world's own shape: 3-4 folders, some nested, one private
    tops = [world.dirname() for _ in range(world.randint(3, 4))]
    folders = list(tops)
    for top in tops:
        for _ in range(world.randint(0, 2)):
            folders.append(f"{top}/{world.dirname()}")
    folders.append(f"{folders[-1]}/{world.dirname()}")
    for i, folder in enumerate(folders):
        add_dir(folder, 0o700 if i == 1 else world.pick((0o755, 0o755, 0o755, 0o775)))
    places = [""] + folders
    # the hinted names first, so the random ones never take them
    for rel in sorted(hints.dirs):
        if add_dir(rel):
            for _ in range(world.randint(1, 2)):
                add_file(f"{rel}/{world.filename()}")
    for rel in sorted(hints.files):
        if rel.lower().endswith(ARCHIVE_EXTS):
            continue
        add_file(rel, hinted=True)
    for name in sorted(hints.anywhere):
        add_file(name, hinted=True)
        add_file(f"{world.pick(folders)}/{name}", hinted=True)
    for ext in sorted(hints.exts):
        if ("." + ext) in ARCHIVE_EXTS:
            continue
        for place in [
            "",
            *world.sample(folders, min(2, len(folders))),
        ]:  # the top level (a bare glob) and deeper
            add_file(posixpath.join(place, world.filename(ext)), hinted=True)
    # random files of varied names, sizes, modes
    for _ in range(world.randint(9, 14)):
        add_file(posixpath.join(world.pick(places), world.filename(world.pick(EXTENSIONS))))
    add_file(world.pick(("README.md", "NOTES.txt", "TODO.md", "Makefile")))
    add_file(f"{world.pick(folders)}/{world.pick(('meeting notes', 'old draft', 'final report'))}.txt")
    add_file(world.pick((".env", ".hidden_config", ".notes")), mode=0o600)
    for _ in range(2):
        add_file(
            posixpath.join(world.pick(places), world.filename(world.pick(("txt", "log", "tmp")))), lines=0
        )
    # an empty folder (``find -empty``, ``rmdir``): files are never placed in it
    add_dir(posixpath.join(world.pick(places), world.dirname()))
    # big files (generated: the bundle stays small)
    for _ in range(world.randint(1, 2)):
        rel = posixpath.join(world.pick(places), world.filename(world.pick(("log", "dat", "csv"))))
        if ok(rel):
            plan.generated[rel] = (
                f"seq {world.randint(1, 99)} {world.randint(3000, 12000)} > {shlex.quote(rel)}"
            )
            plan.modes[rel] = 0o644
            taken.add(rel)
    # archives the command opens, made of world files
    text_files = sorted(plan.files)[:3]
    for rel in sorted(
        r
        for r in hints.files | {f"{world.word()}.{e}" for e in hints.exts if "." + e in ARCHIVE_EXTS}
        if r.lower().endswith(ARCHIVE_EXTS) or ("." + _ext_of(r)) in ARCHIVE_EXTS
    ):
        if ok(rel) and text_files:
            parent = posixpath.dirname(rel)
            if parent and not add_dir(parent):
                continue
            plan.generated[rel] = _archive_command(rel, text_files)
            plan.modes[rel] = 0o644
            taken.add(rel)
    # a symlink to a file
    target = world.pick(sorted(plan.files))
    link = world.filename("lnk", stem=world.word() + "_link")
    if ok(link):
        plan.links[link] = target
        taken.add(link)
    # modification times: years ago (exact in the check), weeks or days ago (mid-day, away from -mtime borders)
    for rel in [*plan.files, *plan.generated, *sorted(plan.dirs, key=lambda d: -d.count("/"))]:
        if world.chance(0.55):
            plan.mtimes[rel] = ("at", int(world.date("2019-01-01", 1600).timestamp()))
        else:
            plan.mtimes[rel] = ("ago", world.randint(0, 40) * 86400 + 43200 + world.randint(0, 3600))
    return plan


def world_setup(plan: WorldPlan) -> tuple[dict[str, str], list[str]]:
    """(bundle ``files``, setup commands): build the world, own it, stamp it, stash it, re-extract it."""
    q = shlex.quote
    files = {f"{HOME}/{rel}": text for rel, text in plan.files.items()}
    build = [f"cd {HOME}"]
    if plan.dirs:
        build.append("mkdir -p -- " + " ".join(q(d) for d in sorted(plan.dirs)))
    build += [
        cmd
        for _, cmd in sorted(plan.generated.items(), key=lambda kv: kv[1].startswith(("tar", "zip", "cat")))
    ]
    build += [f"ln -s {q(target)} {q(link)}" for link, target in sorted(plan.links.items())]
    build.append(f"chown -R -h operator:operator {HOME}")
    modes = [f"chmod {mode:o} {q(rel)}" for rel, mode in sorted(plan.modes.items())]
    modes += [f"chmod {mode:o} {q(rel)}" for rel, mode in sorted(plan.dirs.items()) if mode != 0o755]
    stamps = [f"cd {HOME}", "now=$(date +%s)"]
    for rel, (kind, value) in plan.mtimes.items():
        when = f"@{value}" if kind == "at" else f"@$((now - {value}))"
        stamps.append(f'touch -h -d "{when}" -- {q(rel)}')
    stash = (
        f"install -d -m 700 {STASH_DIR} && tar -C {HOME} --numeric-owner -cpf {STASH_TAR} . && "
        f"find {HOME} -mindepth 1 -delete && tar -C {HOME} --numeric-owner -xpf {STASH_TAR}"
    )
    return files, [
        " && ".join(build),
        " && ".join([f"cd {HOME}", *modes]) if modes else "true",
        " && ".join(stamps),
        stash,
    ]


# ---- the check -----------------------------------------------------------------------------------------------------
CHECK_PROGRAM = r"""
import hashlib, os, shutil, signal, stat, subprocess, sys, tempfile

HOME = "/home/operator"
NOISE = {".bash_history", ".lesshst", ".viminfo", ".python_history", ".sqlite_history", ".wget-hsts",
         ".selected_editor", ".sudo_as_admin_successful"}
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": HOME, "USER": "operator",
       "LOGNAME": "operator", "SHELL": "/bin/bash", "LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat",
       "GIT_PAGER": "cat"}


def manifest(root):
    out = {".": ("d", stat.S_IMODE(os.lstat(root).st_mode))}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel in NOISE:
                continue
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", mode)
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256()
                with open(path, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(chunk)
                when = int(st.st_mtime) if st.st_mtime < OLD_BEFORE else "recent"
                out[rel] = ("f", mode, st.st_size, digest.hexdigest(), when)
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode), mode)
    return out


def differences(a, b, limit=8):
    keys = sorted(set(a) | set(b))
    diff = [k for k in keys if a.get(k) != b.get(k)]
    lines = []
    for k in diff[:limit]:
        lines.append(f"  {k}: operator {a.get(k, 'absent')} / reference {b.get(k, 'absent')}")
    if len(diff) > limit:
        lines.append(f"  ... and {len(diff) - limit} more")
    return lines


def sh(*args):
    subprocess.run(args, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wipe_and_extract(tar):
    sh("find", HOME, "-mindepth", "1", "-delete")
    sh("tar", "-C", HOME, "--numeric-owner", "-xpf", tar)


def run_reference(command):
    def demote():
        os.umask(0o022)
    proc = subprocess.Popen(["setpriv", "--reuid=1000", "--regid=37", "--init-groups", "--",
                             "/bin/bash", "--norc", "--noprofile", "-c", command],
                            cwd=HOME, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=demote)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        out = None
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    if out is None:
        proc.communicate()
        return None
    return out.decode("utf-8", "replace")


def read_answer():
    try:
        fd = os.open(ANSWER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"no answer file {ANSWER} ({exc.strerror})"
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None, f"{ANSWER} is not a regular file"
        data = fh.read(16 << 20)
    return data.decode("utf-8", "replace"), ""


def same_output(reference, answer):
    a, b = reference.rstrip("\n"), answer.rstrip("\n")
    if a == b:
        return True
    return UNORDERED and sorted(a.splitlines()) == sorted(b.splitlines())


def main():
    real = manifest(HOME)
    answer = None
    if PRINTS:
        answer, why = read_answer()
        if answer is None:
            print(why)
            return 1
    work = tempfile.mkdtemp(prefix="bashgym-check.", dir="/root")
    saved = os.path.join(work, "home.tar")
    sh("tar", "-C", HOME, "--numeric-owner", "-cpf", saved, ".")
    verdict, notes, pristine = 1, [], None
    try:
        for number, command in enumerate(REFERENCES, 1):
            wipe_and_extract(STASH)
            pristine = manifest(HOME)
            output = run_reference(command)
            if output is None:
                notes.append(f"reference {number} did not finish in {TIMEOUT} s")
                continue
            after = manifest(HOME)
            if after == pristine and (not PRINTS or not output.strip()):
                verdict = 3
                notes.append(f"reference {number} changes nothing" + (" and prints nothing" if PRINTS else "")
                             + " on this world: " + NOOP)
                continue
            state_ok = after == real
            output_ok = not PRINTS or same_output(output, answer)
            if state_ok and output_ok:
                verdict = 0
                break
            verdict = 1
            if not state_ok:
                notes.append(f"the files differ from reference {number}'s result:")
                notes.extend(differences(real, after))
            if not output_ok:
                notes.append(f"{ANSWER} differs from what reference {number} prints "
                             f"({len(answer.splitlines())} vs {len(output.splitlines())} lines)")
    finally:
        # back to the operator's state; a pristine one from the stash itself, so its entries keep their order
        wipe_and_extract(STASH if pristine is not None and real == pristine else saved)
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(notes) if notes else ("equivalent" if verdict == 0 else "not equivalent"))
    return verdict


sys.exit(main())
"""
NOOP_MARKER = "the reference does nothing here"
CHECK_DELIMITER = "BASHGYM_NL2BASH_CHECK"


def check_script(references: list[str], prints: bool, unordered: bool) -> str:
    """The bash check: Python (in the image) fed through a quoted here-document, settings as Python literals."""
    settings = (
        f"REFERENCES = {references!r}\nPRINTS = {prints!r}\nUNORDERED = {unordered!r}\n"
        f"ANSWER = {ANSWER_FILE!r}\nSTASH = {STASH_TAR!r}\nTIMEOUT = {REFERENCE_TIMEOUT_S!r}\n"
        f"OLD_BEFORE = {OLD_BEFORE!r}\nNOOP = {NOOP_MARKER!r}\n"
    )
    return (
        f"#!/bin/bash\n# execution equivalence with the reference command on the pristine world (nl2bash)\n"
        f"exec /usr/bin/python3 - <<'{CHECK_DELIMITER}'\n{settings}{CHECK_PROGRAM}{CHECK_DELIMITER}\n"
    )


# ---- pairs to bundles ----------------------------------------------------------------------------------------------
def _category(programs: set[str]) -> str:
    if programs & {"tar", "zip", "unzip", "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zcat", "cpio"}:
        return "archives"
    if programs & {"chmod", "chown", "chgrp", "umask"}:
        return "permissions"
    if (
        programs
        & {
            "grep",
            "egrep",
            "fgrep",
            "sed",
            "awk",
            "gawk",
            "sort",
            "uniq",
            "cut",
            "tr",
            "wc",
            "paste",
            "join",
            "comm",
            "column",
            "nl",
            "rev",
            "tac",
            "fold",
            "head",
            "tail",
        }
        and "find" not in programs
    ):
        return "text"
    return "files"


def _difficulty(pair: Pair, analysis: Analysis) -> int:
    if pair.difficulty is not None:
        return pair.difficulty
    stages = pair.cmd.count("|") + pair.cmd.count("&&") + pair.cmd.count(";") + len(analysis.programs) // 3
    return min(4, 1 + stages + (1 if len(pair.cmd) > 80 else 0))


def _task_text(nl: str, prints: bool) -> str:
    text = nl[:1].upper() + nl[1:]
    if text[-1:] not in ".?!":
        text += "."
    if prints:
        text += (
            f"\n\nSave the output (exactly what the command prints on its standard output) to {ANSWER_FILE}."
        )
    return text


def _to_answer(cmd: str) -> str:
    """The command with its standard output saved to the answer file (a list is grouped so all of it goes)."""
    simple = "\n" not in cmd and "#" not in cmd and not re.search(r"[;&]|\|\|", cmd.replace("2>&1", ""))
    return f"{cmd} > {ANSWER_FILE}" if simple else f"{{ {cmd}\n}} > {ANSWER_FILE}"


def pair_to_bundle(pair: Pair, seed: int | str = 0) -> ScenarioBundle:
    """One pair as a bundle with its seeded world and equivalence check; ValueError (the quarantine reason)."""
    from bashgym_assets.shell import OPERATOR, bash_syntax_error

    usable: list[tuple[str, Analysis]] = []
    problems: list[str] = []
    for command in [pair.cmd, *pair.alternatives]:
        error = bash_syntax_error(command, policy=OPERATOR)  # the reference is typed as an operator's line
        if error:
            problems.append(f"does not parse as bash: {error.splitlines()[0]}")
            continue
        analysis = analyse(command)
        if analysis.problems:
            problems.append(analysis.problems[0])
            continue
        usable.append((command, analysis))
    if not usable:
        raise ValueError(problems[0] if problems else "no command")
    reference, analysis = usable[0]
    prints = not analysis.writes
    hints = Hints()
    for _, a in usable:
        for name in ("exts", "files", "anywhere", "dirs", "patterns", "avoid"):
            getattr(hints, name).update(getattr(a.hints, name))
    pair_hash = hashlib.sha256(f"{pair.nl}\0{pair.cmd}".encode()).hexdigest()[:16]
    seed_text = f"{seed}:{pair_hash}"
    plan = build_world(seed_text, hints)
    files, setup = world_setup(plan)
    unordered = any(a.unordered for _, a in usable)
    return parse_bundle(
        {
            "id": pair_id(pair),
            "task": _task_text(pair.nl, prints),
            "category": _category(analysis.programs),
            "difficulty": _difficulty(pair, analysis),
            "files": files,
            "setup": setup,
            "user": "operator",
            "check": check_script([c for c, _ in usable], prints, unordered),
            "reference": [_to_answer(reference) if prints else reference],
            "source": f"import:nl2bash:{pair.locator}" if pair.locator else "import:nl2bash",
        }
    )


class Nl2BashImport(BaseModel):
    """Bundles (to gate) and the quarantine with reasons."""

    source: str
    bundles: list[ScenarioBundle] = Field(default_factory=list)
    quarantine: list[BundleError] = Field(default_factory=list)
    records: int = 0

    def counts(self) -> dict[str, int]:
        return {"records": self.records, "bundles": len(self.bundles), "quarantined": len(self.quarantine)}


def pairs_to_bundles(
    records: Iterable[tuple[str, Any]], source: str = "", seed: int | str = 0, limit: int | None = None
) -> Nl2BashImport:
    """(locator, record) pairs as bundles + quarantine; a repeated pair is quarantined (the first one wins)."""
    out = Nl2BashImport(source=source)
    seen: dict[str, str] = {}
    for locator, record in records:
        if limit is not None and out.records >= limit:
            break
        if isinstance(record, Exception):
            out.quarantine.append(BundleError(source=locator, reason=str(record)))
            continue
        out.records += 1
        try:
            pair = record_to_pair(record, locator)
            bundle = pair_to_bundle(pair, seed=seed)
        except ValueError as exc:
            out.quarantine.append(BundleError(source=locator, reason=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - an odd record this module did not foresee spares the others
            out.quarantine.append(
                BundleError(source=locator, reason=f"could not be read: {type(exc).__name__}: {exc}")
            )
            continue
        if bundle.id in seen:
            out.quarantine.append(
                BundleError(source=locator, reason=f"duplicate pair (first at {seen[bundle.id]})")
            )
            continue
        seen[bundle.id] = locator
        out.bundles.append(bundle)
    return out


def load_nl2bash(
    source: str | Path,
    split: str | None = None,
    seed: int | str = 0,
    limit: int | None = None,
    **load_kwargs: Any,
) -> Nl2BashImport:
    """Pairs from a local file/folder (JSON Lines, JSON, CSV, parquet) or a hub dataset (``datasets``): bundles +
    quarantine. NL2SH-ALFA on the hub: ``load_nl2bash("westenfelder/NL2SH-ALFA", name="test", split="train")``."""
    return pairs_to_bundles(
        iter_records(source, split=split, **load_kwargs), source=str(source), seed=seed, limit=limit
    )


def certify(
    bundles: Iterable[ScenarioBundle],
    image: str | None,
    max_parallel: int | None = None,
) -> tuple[list[ScenarioBundle], list[BundleError], list[Any]]:
    """Gate the bundles in real sandboxes: (admitted, quarantine rows for the rejected with the gate's reason,
    all gate results). A pair whose reference does nothing on its world is rejected here, its reason saying so."""
    from bashgym_assets.scenarios.gate import gate_bundles

    items = list(bundles)
    results = gate_bundles(items, image, max_parallel=max_parallel)
    admitted, quarantine = [], []
    for bundle, result in zip(items, results, strict=True):
        if result.admitted:
            admitted.append(bundle)
        else:
            why = "does nothing on its world" if NOOP_MARKER in result.detail else result.reason
            quarantine.append(
                BundleError(
                    source=bundle.source or bundle.id,
                    reason=f"{why}: {' '.join(result.detail.split())[:400]}",
                )
            )
    return admitted, quarantine, results
