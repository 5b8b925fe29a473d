"""Scenario variants: the same task with other names and values (train-only augmentation).

A small model trained on one reference trajectory per task learns the form of an episode but not the skill; it
needs more, and more varied, episodes per skill. A variant keeps a bundle's task and changes the names and values
the task text shares with its setup, files, check and reference - file and folder names, user and group names,
quoted words, numbers - consistently in every field, so the check still describes the task.

What may change is found, not listed per bundle: a token is a candidate when the operator can see it (task,
announcement, provider text) and the hidden machinery uses it too (setup, files, check, reference), and nothing
marks it as part of the system or the language: shell keywords, command names, flags, file extensions, dotfiles,
system paths (``/etc``, ``/usr``, ``/var`` ... and the operator's home), well-known software and accounts.
Replacement is word-boundary aware (``log`` in ``catalog`` is never touched) and simultaneous (a fresh value is
never rewritten again). Fresh values come from seeded word lists, shaped like the original (case, ``_`` parts,
digit runs) and keeping its first letter, so listings that the check expects sorted keep their order.

This module only proposes. A variant is certified like every scenario, by the reference gate in a real sandbox;
a substitution that breaks a bundle is rejected there with its reason. Variants are made of train-split bundles
only and their ids (``<parent>.var-<k>``) inherit the parent's split (``gate.scenario_family``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bashgym_assets.scenarios import gate
from bashgym_assets.scenarios.bundle import ID_RE, ScenarioBundle, parse_bundle
from bashgym_assets.scenarios.candidates import PACK_SOURCE

VARIANT_SUFFIX = "+variant"
MIN_WORD_LEN = 3
MIN_NUMBER = 3


def _words(text: str) -> list[str]:
    return text.split()


# ---- what is never substituted ------------------------------------------------------------------------------------
SHELL_WORDS = _words("""
if then else elif fi for while until do done case esac in function select time return exit break continue local
export readonly declare typeset unset set shift source eval exec trap wait true false test read echo printf cd pwd
pushd popd alias unalias type command builtin let getopts umask ulimit hash jobs fg bg kill disown shopt history
mapfile readarray compgen complete caller enable help logout suspend times coproc dirs
""")

COMMANDS = _words("""
ls cat cp mv rm mkdir rmdir touch chmod chown chgrp ln find grep egrep fgrep sed awk gawk mawk cut sort uniq wc
head tail tr tee xargs diff cmp comm paste join split csplit fold fmt nl od hexdump xxd base64 md5sum sha1sum
sha256sum sha512sum cksum stat file du df free ps pgrep pkill killall top nice renice nohup setsid sleep timeout
date cal whoami id groups users who last su sudo runuser useradd userdel usermod adduser deluser groupadd groupdel
groupmod addgroup delgroup gpasswd passwd chpasswd chage chsh chfn getent crontab cron tar gzip gunzip zcat zgrep
bzip2 bunzip2 bzcat xz unxz xzcat zip unzip zipinfo git jq sqlite3 python3 python perl bash sh dash env printenv
basename dirname realpath readlink mktemp install truncate dd shred sync mount umount lsblk blkid findmnt hostname
uname ip ss netstat ping curl wget ssh scp rsync iptables systemctl service journalctl logger logrotate less more
vi vim nano watch seq shuf rev tac expr bc factor numfmt yes column iconv locale tput stty clear reset script
strace lsof fuser flock sum tsort pr expand unexpand ptx dircolors chroot nproc arch tty link unlink mkfifo mknod
vdir dir pathchk logname stdbuf chcon runcon whereis which lastlog faillog newgrp sg pwck grpck vipw vigr nologin
pidof pstree pwdx pmap vmstat uptime tload slabtop sysctl skill snice kill chattr lsattr gpg openssl mail
""")

LANGUAGE_WORDS = _words("""
null none nil true false self this def class import from return lambda print len range open sys os json re math
int str float dict list set tuple bool input output keys values items sorted reversed enumerate zip map filter
select length substr gsub sub split index match tolower toupper sprintf printf getline next nextfile begin end
nr nf fs ofs rs ors fnr argv argc environ sort_by group_by unique_by to_entries from_entries with_entries add
tostring tonumber ascii_downcase ascii_upcase test capture has contains inside startswith endswith empty error
not and or else where insert into table create update delete order group by count as on inner outer left right
limit offset having distinct alter column drop primary key integer text real blob default unique references
exists union all case when then like glob between null is asc desc replace values
""")

# Words of the task prose too generic to be names; replacing them would garble the sentence.
STOPWORDS = _words("""
the and for with that this from into onto only each every any all none some one two three four five six seven
eight nine ten first second third last next new old file files dir dirs directory directories folder folders
line lines name names path paths word words text number numbers value values list item items entry entries
field fields row rows record records header content contents size mode type kind user users group groups owner
home root operator system service services process processes job jobs task tasks command commands script
scripts program programs shell login account accounts host hosts port ports date time day days hour hours
minute minutes week weeks month months year years total sum count copy move make keep must should not but
also then when where which what who whose how why than per via its your you are was were has have had been
out over under above below after before same other others own more most less least exactly plain single
empty full part parts main master head origin upstream remote branch tag tags stash commit commits merge
lower upper case sorted order id ids pid uid gid tmp temp local bin sbin lib share etc usr var opt srv run
dev proc sys boot mnt log logs check core
""")

# Keywords of real tools and file formats that a task may quote (git subcommands, ifupdown, haproxy, nginx,
# ssh_config, iptables, systemd ...): renaming them would make a consistent but meaningless task.
TOOL_WORDS = _words("""
status add commit log diff branch checkout switch merge rebase tag stash push pull fetch clone init remote reset
restore revert show cherry pick config blame bisect describe worktree submodule am apply
start stop restart reload enable disable mask unmask daemon
listen server server_name proxy_pass upstream location index backend frontend bind balance option iface inet
inet6 static dhcp auto address netmask gateway nameserver search domain options identityfile proxyjump
forwardagent hostname include allow deny accept drop reject chain policy filter nat mangle established related
dport sport source destination table
""")

# Well-known software, accounts, files and directories: part of the world the task is set in, never renamed.
KNOWN_NAMES = _words("""
nginx apache apache2 httpd redis postgres postgresql pg mysql mariadb mongodb mongo sqlite docker kubernetes
java jvm jdk node npm pip python git ssh sshd openssh cron crond anacron systemd syslog rsyslog journald haproxy
postfix dovecot bind named dnsmasq iptables nftables ufw openvpn wireguard elasticsearch kafka rabbitmq
memcached php ruby rails django flask gunicorn uwsgi supervisor lighttpd tomcat jenkins grafana prometheus
linux debian ubuntu zsh emacs tmux screen ifupdown eth0 lo localhost example
daemon games man lp news uucp proxy backup irc gnats nobody nogroup adm tty disk kmem dialout fax voice cdrom
floppy tape sudo audio dip video plugdev staff shadow utmp messagebus input kvm render netdev sgx
passwd gshadow hostname resolv nsswitch fstab profile bashrc bash_profile bash_logout inputrc environment
sudoers skel ssl init logrotate apt dpkg security pam motd issue release timezone localtime alternatives
network networks protocols shells defs mime crontabs wtmp btmp auth messages dmesg kern urandom random zero
stdin stdout stderr fd gitconfig gitignore gitattributes authorized_keys known_hosts id_rsa id_ed25519
id_ecdsa makefile readme license dockerfile vimrc profile_d cron_d npmrc netrc pgpass cnf inputrc interfaces
bash_history lesshst wgetrc curlrc editorconfig dockerignore xinitrc xsession
""")

# File formats and protocols: ``csv`` in ``csv2json`` is what the script does, not a name.
FORMAT_WORDS = _words("""
csv tsv json jsonl ndjson yaml yml xml html htm txt md rst pdf png jpg jpeg gif svg webp mp3 mp4 wav sql db
sqlite tar gz tgz bz2 xz zst zip log ini conf cfg toml sh bash py js ts rb go rs pl php java class jar so dll
exe deb rpm iso img bak tmp swp lock pid sock ipv4 ipv6 tcp udp http https ftp ssh dns url uri utf ascii hex
md5 sha1 sha256 base64 gzip bzip2 rules
""")

# Common English words of task prose. A name that is one of these and also appears in the task as a plain word
# ("the nightly archives in ~/archives") is renamed only where it names something (paths, quotes), and dropped
# when it is both quoted and used as a word ("the resume ... its name contains 'resume'"): who can tell which.
ENGLISH = _words("""
access account action active activity address admin agent alert alias analysis answer app application archive
archives area article asset assets audit author backend backends backup backups balance batch bill billing
binary block board body book branch bucket budget buffer bug build builds bundle cache calendar call campaign
card cart catalog category change changes channel chart check client clients cluster code collection comment
comments company config configuration conflict connection contact contacts content context contract control copy
cost counter country course credentials customer customers daily dashboard data database debug default delivery
deploy deployment design desk detail details device devices diary digest document documents domain download
downloads draft driver dump editor email emails employee employees endpoint endpoints engine entry error errors
event events example expense expenses experimental export exports feature features feed feedback filter finance
fix folder form format found frontend function gallery game gateway general global guide guest handbook health
helper history holder hotfix image images import imports incident index inbox info input instance internal
inventory invoice invoices issue issues item journal key keys label large largest latest layout ledger legacy
library license limit link links list local lock locks login logs mail main manager manifest map market master
media member members memo menu message messages metadata metrics migration mirror mobile model module monitor
monthly music network news night nightly node note notes notice offenders offline old order orders output owner
package packages page pages paid panel partner password payment payments pending people photo photos picture
pictures plan platform plugin policy pool portal post posts pretty price primary print private product products
profile project projects proxy public queue quota random range raw readme recent record records release
releases remote replica report reports repository request requests reserve resource resources restore restored
result results resume review role rules runner sales sample samples scan scans schedule schema score scores
script search secret secrets section secure security server service session sessions settings setup shared
shop site slow snapshot source spare staging stats status storage store summary support system table target
task team template temp test tests text theme ticket time tool tools top total trace tracker traffic transfer
trash tree update updates upload uploads usage user users vault vendor version video videos view volume web
website weekly window work worker workers workspace
""")


# Variables of the shell and the environment (names the shell or programs give a meaning to).
ENV_NAMES = _words("""
path home user shell pwd oldpwd lang lc_all term editor visual pager mailto tz logname hostname ps1 ps2 ifs
histsize histfilesize histcontrol java_home umask
""")

# Ports with a well-known meaning (PostgreSQL is 5432): a task that names them is not about the number.
KNOWN_NUMBERS = {
    0,
    1,
    2,
    7,
    12,
    21,
    22,
    23,
    24,
    25,
    53,
    60,
    80,
    100,
    110,
    143,
    200,
    201,
    204,
    301,
    302,
    304,
    59,
    365,
    389,
    400,
    401,
    403,
    404,
    443,
    465,
    500,
    502,
    503,
    504,
    587,
    636,
    993,
    995,
    1000,
    1024,
    1433,
    1521,
    2049,
    3306,
    5432,
    5672,
    6379,
    6443,
    8080,
    9200,
    11211,
    27017,
    65534,
    65535,
}

SYSTEM_ROOTS = {
    "etc",
    "usr",
    "var",
    "bin",
    "sbin",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "proc",
    "sys",
    "dev",
    "run",
    "boot",
}


def _image_commands() -> list[str]:
    """Program names of the sandbox image (``data/sandbox_commands.txt``); single-word ones only, a hyphenated
    one (``run-parts``) is protected as a whole where a bundle uses it."""
    path = Path(__file__).resolve().parents[1] / "data" / "sandbox_commands.txt"
    if not path.is_file():
        return []
    names = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [n for n in names if n and not n.startswith("#") and re.fullmatch(r"[a-z0-9_]+", n)]


def _image_paths() -> frozenset[str]:
    """Paths of the sandbox image (``data/sandbox_paths.txt``): below a system prefix, what is not one of these
    was made by the bundle and may be renamed (``/var/log/atlas``), what is one (``/var/log``) may not."""
    path = Path(__file__).resolve().parents[1] / "data" / "sandbox_paths.txt"
    if not path.is_file():
        return frozenset()
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return frozenset(line for line in lines if line.startswith("/"))


IMAGE_COMMANDS = _image_commands()
IMAGE_PATHS = _image_paths()
# Folders whose whole content sandbox_paths.txt lists, and the pruned ones inside them.
FULLY_LISTED = ("/etc/", "/var/", "/run/", "/usr/local/")
NOT_LISTED = (
    "/var/lib/dpkg/info/",
    "/var/cache/apt/",
    "/var/lib/apt/lists/",
    "/var/cache/debconf/",
    "/etc/ssl/certs/",
    "/var/cache/man/",
    "/etc/alternatives/",
)
PROTECTED = {
    w.lower()
    for w in SHELL_WORDS
    + COMMANDS
    + LANGUAGE_WORDS
    + STOPWORDS
    + TOOL_WORDS
    + KNOWN_NAMES
    + ENV_NAMES
    + FORMAT_WORDS
    + IMAGE_COMMANDS
}
ENGLISH_SET = set(ENGLISH)
HYPHENATED_PROTECTED = {"www-data", "run-parts", "apt-get", "ssh-keygen", "cron.d", "profile.d", "sudoers.d"}

# ---- fresh values -------------------------------------------------------------------------------------------------
NOUNS = _words("""
acorn almanac amber anchor archive arcade atrium aurora avenue
badger bamboo basalt beacon birch bison blueprint bramble bridge bronze bulletin
cactus canyon caravan cedar census chapter cinder citadel clover cobalt comet compass copper coral cosmos
dahlia delta depot digest dolphin dossier dragon drift dune
easel echo eclipse ember emerald engine estuary
falcon fennel ferry fjord flint forest fossil foundry fresco
galaxy garnet garden geyser glacier granite gravel grove
hamlet harbor harvest hazel heron horizon hollow
iceberg indigo inlet iris island ivory
jasper jetty journal juniper jungle
kayak kelp kernel kestrel kettle kiln
lagoon lantern larch ledger lemon lichen lotus lumen
magnet maple marble meadow mercury meteor mosaic
nebula nectar nettle nimbus nomad nugget
oasis ocean olive onyx orbit orchard osprey otter
paddle papyrus pebble pelican pepper pigeon pine pixel plume prairie prism
quail quarry quartz quasar quill quiver
radish raven reef ribbon ridge rocket rowan
saffron salmon sapphire sequoia sierra sonar spruce summit
tango thistle thunder timber topaz tundra tulip
umber umbra unicorn upland
valley velvet vertex violet vista voyage
walnut willow wombat walrus wharf
xenon xylo
yarrow yonder yucca
zenith zephyr zinnia zircon
""")

PEOPLE = _words("""
abel ada alma anika arlo
bea bruno boris bianca
cara cyrus cleo cosmo
dara dmitri della dorian
edna elio emeka enzo
farah felix fiona flora
gemma gideon greta gus
hana hugo hilda hector
ida igor ines ivo
jonas juno jasmin jarvis
kira kenji kofi kasia
leona lars lucia linus
mara milo mina moritz
nadia nico nora noemi
odile omar orla otto
paula pavel priya pilar
quinn quentin
rosa rafael rhea ruben
selma sven soren sunita
tamsin tariq thea tobias
ulla uma ursula
vera viktor vanya
wanda wes wilma
xena xavi
yara yusuf yvette
zara zeno zofia
""")


# Column, key and setting names.
FIELDS = _words("""
amount area age balance batch budget bonus category channel city cost country credit currency department
distance duration discount deadline energy edition email_opt feature fee grade height hours_logged income
label level location margin metric model mileage platform price priority quota rank rate rating region revenue
salary score segment station stock store tier title topic units usage vendor volume weight width yield zone
""")


def _by_initial(words: Iterable[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for word in words:
        out.setdefault(word[0], []).append(word)
    return out


NOUNS_BY_INITIAL = _by_initial(NOUNS)
PEOPLE_BY_INITIAL = _by_initial(PEOPLE)
FIELDS_BY_INITIAL = _by_initial(w for w in FIELDS if w.lower() not in PROTECTED)

# ---- recognising tokens -------------------------------------------------------------------------------------------
WORD_RE = re.compile(r"[A-Za-z0-9_]+")
NUMBER_RE = re.compile(r"(?<![\w.])\d+(?!\w|\.\d)")
# A path: absolute or under ~, starting after a delimiter (so sed's s#^\./## or $HOME/x are not taken for paths).
PATH_RE = re.compile(r"(?:(?<=[\s'\"`=:(<>,\[{])|^)(~?/[^\s'\"`;|&<>()$,\\\]}]*)")
# A relative path or a file name as written in prose: config/settings.yaml, build/, login.html, invoice_7731.pdf.
REL_PATH_RE = re.compile(r"(?<![\w./~-])([A-Za-z0-9_][\w.-]*(?:/[\w.-]+)*/?)")
QUOTED_RE = re.compile(r"'([^'\n]{1,40})'|\"([^\"\n]{1,40})\"|`([^`\n]{1,40})`")
FLAG_RE = re.compile(r"(?<![\w-])--?([A-Za-z][\w-]*)")
AFTER_DOT_RE = re.compile(r"(?<=[\w*])\.([A-Za-z][A-Za-z0-9_]*)")
RANGE_RE = re.compile(r"\b(\d+)\s*(?:-|\.\.|to)\s*(\d+)\b")
USER_CMD_RE = re.compile(r"\b(useradd|adduser|groupadd|addgroup|usermod|gpasswd|groupmod)\b([^;&|\n)]*)")
MODE_HINT_RE = re.compile(r"chmod|umask|\bmode\b|perm|install\s+-m|mkdir\s+-m", re.I)


# An escape like \n in printf or $'...' strings ends the word before it: $'project/a\nproject/b' names `project` twice.
_AFTER_ESCAPE = r"(?<=\\[ntr])"


def _word_pattern(token: str) -> str:
    """The regex of one token at word boundaries (``log`` in ``catalog`` is not ``log``)."""
    if token.isdigit():
        return rf"(?:(?<![\w.])|{_AFTER_ESCAPE}){token}(?!\w|\.\d)"
    return rf"(?:(?<![A-Za-z0-9_])|{_AFTER_ESCAPE}){re.escape(token)}(?![A-Za-z0-9_])"


@dataclass
class BundleText:
    """A bundle's strings by role: what the operator sees and what only the machinery uses."""

    visible: list[str]
    code: list[str]
    setup: list[str]
    file_keys: list[str]
    provider_name: str | None = None
    all_text: str = field(init=False)

    def __post_init__(self) -> None:
        self.all_text = "\n".join(self.visible + self.code)


def bundle_text(bundle: ScenarioBundle) -> BundleText:
    visible = [bundle.task] + ([bundle.announcement] if bundle.announcement else [])
    if bundle.provider:
        visible.append(bundle.provider.script)
    code = list(bundle.setup) + list(bundle.files) + list(bundle.files.values()) + [bundle.check]
    code += list(bundle.reference) + ([bundle.workdir] if bundle.workdir else [])
    return BundleText(
        visible=visible,
        code=code,
        setup=list(bundle.setup),
        file_keys=list(bundle.files),
        provider_name=bundle.provider.name if bundle.provider else None,
    )


def _occurs(token: str, text: str) -> bool:
    return re.search(_word_pattern(token), text) is not None


def _path_components(path: str) -> list[str]:
    return [c for c in path.lstrip("~").rstrip(".,:;").split("/") if c]


def _owned_system_path(prefix: str, created: str) -> bool:
    """A path below a system prefix that is the bundle's own: not in the image, and made by the bundle's setup or
    files, or under a folder whose whole content the image list records (so absence there means new)."""
    if prefix in IMAGE_PATHS:
        return False
    if re.search(re.escape(prefix) + r"(?![\w.-])", created):
        return True
    return prefix.startswith(FULLY_LISTED) and not prefix.startswith(NOT_LISTED)


def _system_path_tokens(text: BundleText) -> set[str]:
    """Tokens of system paths and of paths inside dot-directories (``~/.ssh/config``), except names below a system
    prefix that the bundle itself creates (``/var/log/atlas``, ``/etc/cron.d/reports``): those are its own."""
    protected: set[str] = set()
    created = "\n".join(text.setup + text.file_keys)
    for path in PATH_RE.findall(text.all_text):
        comps = _path_components(path)
        if not comps:
            continue
        system = path.startswith("/") and comps[0] in SYSTEM_ROOTS
        owned = False
        in_dot_dir = False
        for i, comp in enumerate(comps):
            tokens = WORD_RE.findall(comp)
            if in_dot_dir:
                protected.update(tokens)  # inside ~/.ssh, ~/.config, .git: names the tools define
                continue
            if comp.startswith("."):
                in_dot_dir = i < len(comps) - 1
                if not (comps[0] == "root" and i == len(comps) - 1):  # /root/.api.pid: a check's own state
                    protected.update(tokens)
                continue
            if system and not owned:
                owned = i >= 1 and _owned_system_path("/" + "/".join(comps[: i + 1]), created)
                if not owned:
                    protected.update(tokens)
    return protected


def protected_tokens(bundle: ScenarioBundle) -> set[str]:
    """Every token of this bundle that must keep its spelling (beyond the static lists)."""
    text = bundle_text(bundle)
    blob = text.all_text
    code = "\n".join(text.code + text.visible[2:])  # scripts, with the provider's
    protected = _system_path_tokens(text)
    if text.provider_name:
        protected.update(WORD_RE.findall(text.provider_name))
    for flag in FLAG_RE.findall(blob):
        protected.update(WORD_RE.findall(flag))
    protected.update(AFTER_DOT_RE.findall(blob))  # extensions, dotfiles, attributes (os.path)
    protected.update(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", blob))  # shell variables
    protected.update(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\(", code))  # functions (shell, awk, python)
    for compound in re.findall(r"[A-Za-z0-9_]+(?:[-.][A-Za-z0-9_]+)+", blob):
        if compound.lower() in HYPHENATED_PROTECTED:
            protected.update(WORD_RE.findall(compound))
    return protected


# ---- candidates -----------------------------------------------------------------------------------------------------
@dataclass
class Candidate:
    token: str
    kind: str  # name | person | field | number
    names_only: bool = False  # in the task text, rename it only where it names something (an English word)


# Options of useradd/usermod/groupadd/gpasswd: which take a value, and what that value names.
_ACCOUNT_OPTS = {
    "-g": "group",
    "-G": "group",
    "-aG": "group",
    "-Ga": "group",
    "--gid": "group",
    "--groups": "group",
    "-l": "user",
    "--login": "user",
    "-s": "",
    "-d": "",
    "-u": "",
    "-c": "",
    "-e": "",
    "-f": "",
    "-k": "",
    "-p": "",
    "-K": "",
    "-b": "",
    "--shell": "",
    "--home": "",
    "--home-dir": "",
    "--uid": "",
    "--comment": "",
    "--password": "",
    "--expiredate": "",
    "--inactive": "",
    "--key": "",
    "--base-dir": "",
}


def account_names(text: BundleText) -> tuple[set[str], set[str]]:
    """(users, groups) that setup or reference create or change: useradd/adduser NAME, groupadd NAME, -g/-G lists,
    usermod -l NEW, groupmod -n NEW, gpasswd -a USER GROUP."""
    users: set[str] = set()
    groups: set[str] = set()
    name_re = re.compile(r"[a-z_][a-z0-9_.-]*")
    for chunk in text.code:
        for cmd, args in USER_CMD_RE.findall(chunk):
            parts = [p.strip("'\"") for p in args.split()]
            bare: list[str] = []
            take: str | None = None
            for p in parts:
                if take is not None:
                    target = {"user": users, "group": groups}.get(take)
                    if target is not None:
                        target.update(x for x in p.split(",") if name_re.fullmatch(x))
                    take = None
                elif p.startswith("-"):
                    if cmd == "gpasswd" and p in {"-a", "-d"}:
                        take = "user"
                    elif cmd == "groupmod" and p in {"-n", "--new-name"}:
                        take = "group"
                    else:
                        take = _ACCOUNT_OPTS.get(p)
                else:
                    bare.append(p)
            bare = [p for p in bare if name_re.fullmatch(p)]
            if not bare:
                continue
            if cmd in ("groupadd", "addgroup", "groupmod", "gpasswd"):
                groups.add(bare[-1])
            elif cmd == "adduser" and len(bare) == 2:  # adduser USER GROUP
                users.add(bare[0])
                groups.add(bare[1])
            else:
                users.add(bare[-1])
    return users, groups


def _person_tokens(users: set[str]) -> set[str]:
    """Tokens of user names that read as a person (``alice``, ``john.doe``), not a service (``svc-backup``)."""
    return {t for u in users if re.fullmatch(r"[a-z]+(?:\.[a-z]+)?", u) for t in u.split(".")}


def _is_field(token: str, visible: str, code: str) -> bool:
    """A column, key or setting name: in a CSV header or as a JSON/ini key, or named so by the task."""
    t = re.escape(token)
    return bool(
        re.search(rf"(?m)^[\w ,]*\b{t}\b[\w ,]*,[\w ,]*$|^[\w ,]*,[\w ,]*\b{t}\b", code)
        or re.search(rf"(?m)\"{t}\"\s*:|^\s*{t}\s*=", code)
        or re.search(
            rf"\b(?:column|field|key|header|setting)s?\b[^.]{{0,40}}\b{t}\b|\b{t}\b\W{{0,3}}"
            rf"(?:column|field|key|setting)s?\b",
            visible,
        )
    )


def _names_a_file(word: str) -> bool:
    """``config/settings.yaml``, ``build/``, ``login.html``, ``app.log.1``: a relative path or a file name."""
    return "/" in word or re.search(r"\w\.[A-Za-z][A-Za-z0-9]{0,5}(?:\.|$)", word) is not None


def _visible_path_tokens(visible: str) -> set[str]:
    """Tokens of the paths and file names that the task text shows."""
    tokens: set[str] = set()
    for path in PATH_RE.findall(visible):
        for comp in _path_components(path):
            tokens.update(WORD_RE.findall(comp))
    for rel in REL_PATH_RE.findall(visible):
        if _names_a_file(rel):
            for comp in rel.split("/"):
                tokens.update(WORD_RE.findall(comp))
    return tokens


def _visible_quoted_tokens(visible: str) -> set[str]:
    """Tokens of the single words the task text quotes; a quoted phrase is prose and left alone."""
    tokens: set[str] = set()
    for groups in QUOTED_RE.findall(visible):
        quoted = next(g for g in groups if g).strip()
        if re.fullmatch(r"[A-Za-z][\w.-]*", quoted):
            tokens.update(WORD_RE.findall(quoted))
    return tokens


def name_spans(text: str) -> list[tuple[int, int]]:
    """Where a text names things: paths, file names, quoted words and hyphenated names (``atlas-sync``)."""
    spans = [m.span() for rx in (PATH_RE, QUOTED_RE) for m in rx.finditer(text)]
    spans += [m.span() for m in REL_PATH_RE.finditer(text) if _names_a_file(m.group(1))]
    spans += [m.span() for m in re.finditer(r"[\w.]+(?:-[\w.]+)+", text)]
    return spans


def _within(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(a <= start and end <= b for a, b in spans)


def _in_prose(token: str, texts: list[str]) -> bool:
    """Whether the token appears in the task text as a plain word, outside every name."""
    for text in texts:
        spans = name_spans(text)
        for form in {token, token.capitalize()}:
            if any(not _within(spans, *m.span()) for m in re.finditer(_word_pattern(form), text)):
                return True
    return False


def _is_english(token: str) -> bool:
    word = token.lower()
    return word in ENGLISH_SET or (word.endswith("s") and word[:-1] in ENGLISH_SET)


def find_candidates(bundle: ScenarioBundle) -> list[Candidate]:
    """The names and numbers this bundle's task text shares with its machinery and that may safely change."""
    text = bundle_text(bundle)
    visible = "\n".join(text.visible)
    code = "\n".join(text.code)
    protected = protected_tokens(bundle)
    protected_lower = {p.lower() for p in protected} | PROTECTED
    users, groups = account_names(text)
    people = _person_tokens(users)
    accounts = {t for n in users | groups for t in WORD_RE.findall(n)}
    visible_words = set(WORD_RE.findall(visible))

    def allowed(token: str) -> bool:
        return (
            len(token) >= MIN_WORD_LEN
            and not token.isdigit()
            and token[0].isalpha()
            and token not in protected
            and token.lower() not in protected_lower
            and bool(_fresh_pieces(token))
            and _occurs(token, code)
        )

    out: dict[str, Candidate] = {}
    in_paths = _visible_path_tokens(visible)
    quoted = _visible_quoted_tokens(visible)
    shown = in_paths | quoted
    shown |= {
        t for t in accounts if t in visible_words or t.capitalize() in visible_words
    }  # "Carol has left"
    for token in sorted(shown):
        if not allowed(token):
            continue
        if token in people:
            kind = "person"
        elif token not in accounts and token not in in_paths and _is_field(token, visible, code):
            kind = "field"
        else:
            kind = "name"
        cand = Candidate(token, kind)
        if kind != "person" and _is_english(token) and _in_prose(token, text.visible):
            if token in quoted:
                continue  # 'resume' and "the resume you wrote": the name and the word cannot be told apart
            cand.names_only = True
        out[token] = cand
    for number in _number_candidates(bundle, visible, code):
        out[number] = Candidate(number, "number")
    return list(out.values())


def _number_candidates(bundle: ScenarioBundle, visible: str, code: str) -> list[str]:
    """Numbers of the task that the check, setup or files state too; not ranges, not modes, not well-known values,
    not numbers tied to another number of the task by a multiple (every 15 minutes at :15, :30, :45)."""
    blob = visible + "\n" + code
    mode_like = MODE_HINT_RE.search(blob) is not None
    in_ranges = {n for pair in RANGE_RE.findall(visible) for n in pair}
    seen = NUMBER_RE.findall(visible)
    values = {int(s) for s in seen if not s.startswith("0")}
    stated = "\n".join([bundle.check, *bundle.setup, *bundle.files.values()])
    out: list[str] = []
    for s in sorted(set(seen)):
        if s.startswith("0") or s in in_ranges:
            continue
        n = int(s)
        if n < MIN_NUMBER or n in KNOWN_NUMBERS:
            continue
        if mode_like and re.fullmatch(r"[0-7]{3,4}", s):
            continue
        if n >= 16 and n & (n - 1) == 0:
            continue  # powers of two: sizes (1048576 bytes is 1 MiB)
        if any(v != n and v >= 2 and (v % n == 0 or n % v == 0) for v in values):
            continue
        if re.search(_word_pattern(s), stated):
            out.append(s)
    return out


# ---- fresh values ---------------------------------------------------------------------------------------------------
def _style(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word.capitalize()
    return word


def _fresh_pieces(token: str) -> list[str]:
    """The parts of a name that a variant renames: letter runs of 3+ that are not themselves protected words
    (``csv`` in ``csv2json``, ``count`` in ``error_count`` stay)."""
    return [
        p for p in re.findall(r"[A-Za-z]+", token) if len(p) >= MIN_WORD_LEN and p.lower() not in PROTECTED
    ]


@dataclass
class _Draw:
    """One variant's fresh values: a letter run maps to the same new word in every name it appears in, so
    ``vendor`` and ``vendor_files`` become ``velvet`` and ``velvet_files``."""

    rng: random.Random
    taken: set[str]
    pieces: dict[str, str] = field(default_factory=dict)

    def word(self, piece: str, kind: str) -> str | None:
        key = piece.lower()  # the first name a piece appears in decides its pool
        if key not in self.pieces:
            pool = {"person": PEOPLE_BY_INITIAL, "field": FIELDS_BY_INITIAL}.get(kind, NOUNS_BY_INITIAL)
            free = [
                w for w in pool.get(piece[0].lower(), []) if w not in self.taken
            ]  # same initial: same order
            if not free and kind == "field":  # a column's name rarely decides an order: any free one will do
                free = [w for ws in pool.values() for w in ws if w not in self.taken]
            if not free:
                return None
            self.pieces[key] = self.rng.choice(free)
            self.taken.add(self.pieces[key])
        return _style(self.pieces[key], piece)

    def name(self, token: str, kind: str) -> str | None:
        fresh = set(_fresh_pieces(token))
        out: list[str] = []
        for piece in re.findall(r"[A-Za-z]+|[^A-Za-z]+", token):
            if piece in fresh:
                word = self.word(piece, kind)
                if word is None:
                    return None
                out.append(word)
            else:
                out.append(piece)
        new = "".join(out)
        return new if new != token else None

    def number(self, token: str) -> str | None:
        """Same digit count, roughly 0.6x-1.6x (years +-6), within clock/calendar caps when small, as round as
        the original."""
        n = int(token)
        if 1970 <= n <= 2099:
            lo, hi = n - 6, min(n + 6, 2099)
        else:
            lo, hi = max(MIN_NUMBER, int(n * 0.6)), max(MIN_NUMBER + 2, int(n * 1.6) + 1)
            for cap in (12, 19, 23, 31, 59):
                if n <= cap:
                    hi = min(hi, cap)
                    break
        digits = len(token)
        lo, hi = max(lo, 10 ** (digits - 1)), min(hi, 10**digits - 1)
        step = next((s for s in (100, 10, 5) if n % s == 0 and n >= 2 * s), 1)
        choices = [
            x
            for x in range(lo + (-lo) % step, hi + 1, step)
            if x != n and str(x) not in self.taken and x not in KNOWN_NUMBERS
        ]
        if not choices:
            return None
        new = str(self.rng.choice(choices))
        self.taken.add(new)
        return new


# ---- applying a mapping -----------------------------------------------------------------------------------------------
def _forms(mapping: dict[str, str]) -> dict[str, str]:
    """Lower-case names also change where a sentence starts with them (``Atlas`` -> ``Ledger``)."""
    forms = dict(mapping)
    for old, new in mapping.items():
        if old.islower() and old.capitalize() not in forms:
            forms[old.capitalize()] = new.capitalize()
    return forms


def substitute(text: str, mapping: dict[str, str], names_only: Iterable[str] = ()) -> str:
    """Replace every token of ``mapping`` at word boundaries, all at once (a new value is never rewritten); a token
    in ``names_only`` only inside the text's names (paths, file names, quotes), not where it is a plain word."""
    if not mapping or not text:
        return text
    forms = _forms(mapping)
    base = {form: old for old in mapping for form in (old, old.capitalize()) if form in forms}
    only = set(names_only)
    spans = name_spans(text) if only else []
    pattern = re.compile("|".join(f"(?:{_word_pattern(t)})" for t in sorted(forms, key=len, reverse=True)))

    def repl(m: re.Match[str]) -> str:
        if base.get(m.group(0)) in only and not _within(spans, *m.span()):
            return m.group(0)
        return forms[m.group(0)]

    return pattern.sub(repl, text)


def apply_mapping(
    bundle: ScenarioBundle, mapping: dict[str, str], variant_id: str, names_only: Iterable[str] = ()
) -> ScenarioBundle:
    """The bundle with ``mapping`` applied to every field that names things; validated like any bundle. What the
    operator reads (task, announcement, the provider's text) keeps ``names_only`` tokens where they are words."""
    only = set(names_only)
    data = bundle.model_dump(mode="json", exclude_none=True)
    sub = lambda s: substitute(s, mapping)  # noqa: E731
    shown = lambda s: substitute(s, mapping, only)  # noqa: E731
    data["task"] = shown(bundle.task)
    data["setup"] = [sub(c) for c in bundle.setup]
    data["files"] = {sub(k): sub(v) for k, v in bundle.files.items()}
    data["check"] = sub(bundle.check)
    data["reference"] = [sub(c) for c in bundle.reference]
    if bundle.workdir:
        data["workdir"] = sub(bundle.workdir)
    if bundle.announcement:
        data["announcement"] = shown(bundle.announcement)
    if bundle.provider:
        # a program path is machinery (the setup writes it): renamed like the setup, not like prose
        script = (sub if bundle.provider.is_path else shown)(bundle.provider.script)
        data["provider"] = {"name": bundle.provider.name, "script": script}
    data["id"] = variant_id
    data["source"] = (bundle.source or "unknown") + VARIANT_SUFFIX
    return parse_bundle(data)


# ---- variants ------------------------------------------------------------------------------------------------------
def variant_id(parent_id: str, k: int) -> str:
    return f"{parent_id}.var-{k}"


def is_variant(bundle: ScenarioBundle) -> bool:
    return gate.VARIANT_RE.search(bundle.id) is not None


def draw_mapping(bundle: ScenarioBundle, candidates: list[Candidate], rng: random.Random) -> dict[str, str]:
    """Fresh values for every candidate, distinct from each other and from every token already in the bundle."""
    taken = {t.lower() for t in WORD_RE.findall(bundle_text(bundle).all_text)} | PROTECTED
    draw = _Draw(rng, taken)
    mapping: dict[str, str] = {}
    for cand in candidates:
        new = draw.number(cand.token) if cand.kind == "number" else draw.name(cand.token, cand.kind)
        if new is not None:
            mapping[cand.token] = new
    return mapping


def make_variants(bundle: ScenarioBundle, n: int, seed: int = 0) -> list[ScenarioBundle]:
    """Up to ``n`` variants ``<id>.var-1`` .. ``<id>.var-n`` of a train-split bundle (fewer when nothing is safely
    substitutable, or a draw repeats an earlier one). Deterministic for a seed; held-out bundles and variants of
    variants get none, so no near-copy of an evaluation task can reach training."""
    if n <= 0 or is_variant(bundle) or gate.split_for(bundle.id) != gate.TRAIN:
        return []
    if not ID_RE.match(variant_id(bundle.id, n)):
        return []
    candidates = find_candidates(bundle)
    if not candidates:
        return []
    out: list[ScenarioBundle] = []
    hashes = {bundle.content_hash()}
    for k in range(1, n + 1):
        rng = random.Random(f"{seed}:{bundle.id}:{k}")
        mapping = draw_mapping(bundle, candidates, rng)
        if not mapping:
            continue
        try:
            variant = apply_mapping(
                bundle,
                mapping,
                variant_id(bundle.id, k),
                names_only=[c.token for c in candidates if c.names_only],
            )
        except ValueError:
            continue
        digest = variant.content_hash()
        if digest in hashes:
            continue
        hashes.add(digest)
        out.append(variant)
    return out


def make_pack_variants(bundles: Iterable[ScenarioBundle], n: int, seed: int = 0) -> list[ScenarioBundle]:
    """Variants of the bundled pack's train-split bundles among ``bundles`` (other sources and held-out bundles get
    none): ``n`` per bundle at most, deterministic for a seed."""
    out: list[ScenarioBundle] = []
    for bundle in bundles:
        if bundle.source == PACK_SOURCE:
            out.extend(make_variants(bundle, n, seed))
    return out
