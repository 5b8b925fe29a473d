"""The seeded world a task family draws from: names, contents, dates, and varied English.

A family never calls ``random`` directly: everything goes through one ``World`` built from a seed, so a task is
reproducible from ``(family, seed)`` alone and two draws differ only where the RNG says so.

Varied English is written as *spintax*: ``"{Move|Relocate} every {file|log} ..."`` picks one alternative per
``{a|b|c}`` group (nested groups work), then ``{name}`` placeholders are filled from keyword arguments. Why a
hand-written template language rather than a library: the one feature needed (alternation inside format strings)
is ten lines, and the template libraries on PyPI (jinja2, chevron) have no seeded alternation.
"""

from __future__ import annotations

import posixpath
import random
import re
import string
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from bashgym_assets.sandbox.layout import SESSION_ACCOUNTS

T = TypeVar("T")

HOME = "/home/operator"
_ALTERNATION = re.compile(r"\{([^{}]*\|[^{}]*)\}")
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_SPACES = re.compile(r"[ \t]+")

# ---- vocabularies: realistic names, none taken from any evaluation task --------------------------------------------
PROJECTS = (
    "atlas",
    "borealis",
    "cinder",
    "delta",
    "ember",
    "falcon",
    "granite",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "meridian",
    "nimbus",
    "onyx",
    "pioneer",
    "quartz",
    "raven",
    "sierra",
    "tundra",
    "umbra",
    "vertex",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
    "acorn",
    "basalt",
    "cobalt",
    "dune",
    "echo",
    "fjord",
    "glacier",
    "hazel",
    "indigo",
    "jasper",
    "koala",
    "lotus",
    "maple",
    "nova",
    "orchid",
    "pebble",
)
SERVICES = (
    "api",
    "auth",
    "billing",
    "cache",
    "checkout",
    "gateway",
    "indexer",
    "ingest",
    "mailer",
    "metrics",
    "notifier",
    "orders",
    "payments",
    "reports",
    "scheduler",
    "search",
    "storage",
    "sync",
    "uploader",
    "worker",
    "inventory",
    "ledger",
    "profile",
    "router",
    "thumbnailer",
    "webhook",
)
FIRST_NAMES = (
    "alice",
    "bruno",
    "chen",
    "dana",
    "elif",
    "farah",
    "gus",
    "hana",
    "ivan",
    "jonas",
    "kira",
    "lena",
    "marco",
    "nadia",
    "omar",
    "priya",
    "quinn",
    "rosa",
    "sven",
    "tara",
    "ugo",
    "vera",
    "wei",
    "yara",
    "zane",
    "amir",
    "bea",
    "carlos",
    "dmitri",
    "emma",
    "femi",
    "greta",
    "hugo",
    "ines",
    "jamal",
    "kofi",
)
TEAMS = (
    "devops",
    "analytics",
    "backend",
    "frontend",
    "qa",
    "research",
    "support",
    "finance",
    "design",
    "data",
    "platform",
    "security",
    "ops",
    "web",
    "mobile",
    "ml",
)
WORDS = (
    "alpha",
    "amber",
    "anchor",
    "apple",
    "arrow",
    "banner",
    "beacon",
    "birch",
    "bridge",
    "canvas",
    "cedar",
    "circle",
    "comet",
    "coral",
    "crystal",
    "daisy",
    "desert",
    "dragon",
    "eagle",
    "engine",
    "feather",
    "forest",
    "garden",
    "harvest",
    "island",
    "jungle",
    "ladder",
    "lantern",
    "meadow",
    "mirror",
    "mountain",
    "ocean",
    "paper",
    "planet",
    "prairie",
    "puzzle",
    "river",
    "rocket",
    "saddle",
    "shadow",
    "signal",
    "silver",
    "spiral",
    "summit",
    "thunder",
    "timber",
    "valley",
    "velvet",
    "violet",
    "window",
    "winter",
    "yellow",
)
FRUITS = (
    "apple",
    "banana",
    "cherry",
    "date",
    "elderberry",
    "fig",
    "grape",
    "kiwi",
    "lemon",
    "mango",
    "nectarine",
    "orange",
    "papaya",
    "quince",
    "raspberry",
    "strawberry",
    "tangerine",
    "watermelon",
    "plum",
    "pear",
)
CITIES = (
    "Lisbon",
    "Oslo",
    "Nairobi",
    "Lima",
    "Osaka",
    "Denver",
    "Krakow",
    "Porto",
    "Seoul",
    "Austin",
    "Quito",
    "Tunis",
    "Hanoi",
    "Perth",
    "Bergen",
    "Leeds",
    "Cairo",
    "Dakar",
    "Turin",
    "Ghent",
)
LEVELS = ("INFO", "WARN", "ERROR", "DEBUG")
HTTP_PATHS = (
    "/api/users",
    "/api/orders",
    "/login",
    "/logout",
    "/health",
    "/static/app.js",
    "/api/cart",
    "/search",
    "/api/items",
    "/admin",
    "/metrics",
    "/api/pay",
    "/docs",
    "/favicon.ico",
)
EXTENSIONS = (
    "txt",
    "log",
    "csv",
    "json",
    "md",
    "conf",
    "yaml",
    "py",
    "sh",
    "dat",
    "xml",
    "ini",
    "bak",
    "tmp",
)

# intros that give a request some context; the empty one keeps plain imperatives common
INTROS = (
    "",
    "",
    "",
    "Quick one: ",
    "When you get a chance, ",
    "Hey, ",
    "Small favour: ",
    "Before the release, ",
    "For the audit, ",
    "As part of the cleanup, ",
    "Ticket: ",
    "Task: ",
    "Could you help? ",
    "I need this done: ",
    "On-call request: ",
)


def _call_site() -> str:
    """``module.py:line`` of the family code that called ``World.phrase`` (through thin ``_phrase`` wrappers)."""
    frame = sys._getframe(2)
    while frame.f_back is not None and (
        frame.f_code.co_filename == __file__ or frame.f_code.co_name.endswith("phrase")
    ):
        frame = frame.f_back
    return f"{posixpath.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class World:
    """A seeded source of everything a family draws: ``World(seed)`` always draws the same task."""

    def __init__(self, seed: int | str) -> None:
        self.seed = seed
        self.rng = random.Random(str(seed))
        self.values: list[str] = []  # names and numbers drawn, for the instruction normaliser
        self.phrasings: list[str] = []  # which whole template each ``phrase`` call picked (``phrasing_id``)
        self._used: set[str] = set()

    # ---- basic draws ----------------------------------------------------------------------------------------------
    def pick(self, seq: Sequence[T]) -> T:
        return self.rng.choice(list(seq))

    def sample(self, seq: Sequence[T], k: int) -> list[T]:
        # a range is sampled as it is (the same draws as from its list, without building a list of 100,000s)
        population: Sequence[T] = seq if isinstance(seq, range) else list(seq)  # type: ignore[assignment]
        return self.rng.sample(population, k)

    def randint(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def shuffled(self, seq: Sequence[T]) -> list[T]:
        items = list(seq)
        self.rng.shuffle(items)
        return items

    def note(self, *values: object) -> None:
        """Record drawn values (names, numbers) so the normaliser can tell 'renamed' from 'rephrased'."""
        self.values.extend(str(v) for v in values if str(v))

    def unique(self, make: object, tries: int = 50) -> str:
        """A value from ``make()`` not drawn before in this world (file names must not collide)."""
        for _ in range(tries):
            value = make() if callable(make) else str(make)
            if value not in self._used:
                self._used.add(value)
                self.note(value)
                return value
        raise ValueError("could not draw a unique value")

    # ---- names ----------------------------------------------------------------------------------------------------
    def word(self) -> str:
        return self.unique(lambda: self.pick(WORDS))

    def project(self) -> str:
        return self.unique(lambda: self.pick(PROJECTS))

    def service(self) -> str:
        return self.unique(lambda: self.pick(SERVICES))

    def person(self) -> str:
        return self.unique(lambda: self.pick(FIRST_NAMES))

    def team(self) -> str:
        return self.unique(lambda: self.pick(TEAMS))

    def username(self) -> str:
        """A login name that no Debian base account uses."""
        return self.unique(
            lambda: self.pick(FIRST_NAMES) + self.pick(("", "", str(self.randint(1, 99)), "_ops"))
        )

    def filename(self, ext: str | None = None, stem: str | None = None) -> str:
        ext = ext or self.pick(EXTENSIONS)
        return self.unique(lambda: f"{stem or self._stem()}.{ext}")

    def _stem(self) -> str:
        shape = self.randint(0, 4)
        if shape == 0:
            return self.pick(WORDS)
        if shape == 1:
            return f"{self.pick(WORDS)}_{self.pick(WORDS)}"
        if shape == 2:
            return f"{self.pick(SERVICES)}-{self.randint(1, 40)}"
        if shape == 3:
            return (
                f"{self.pick(PROJECTS)}_{self.pick(('notes', 'data', 'report', 'dump', 'export', 'draft'))}"
            )
        return f"{self.pick(WORDS)}{self.randint(1, 9)}"

    def dirname(self) -> str:
        return self.unique(
            lambda: self.pick(
                (
                    self.pick(WORDS),
                    self.pick(PROJECTS),
                    self.pick(SERVICES),
                    self.pick(TEAMS),
                    f"{self.pick(WORDS)}-{self.pick(WORDS)}",
                )
            )
        )

    def token(self, n: int = 8) -> str:
        return "".join(self.rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))

    def ip(self) -> str:
        return f"10.{self.randint(0, 255)}.{self.randint(0, 255)}.{self.randint(1, 254)}"

    def port(self) -> int:
        return self.pick((8000, 8080, 8081, 8443, 9000, 9090, 5000, 5432, 6379, 3000, 4000, 7000, 8888))

    # ---- contents -------------------------------------------------------------------------------------------------
    def date(self, start: str = "2024-01-01", days: int = 700) -> datetime:
        return datetime.fromisoformat(start) + timedelta(
            days=self.randint(0, days), seconds=self.randint(0, 86399)
        )

    def lines(self, n: int, kind: str = "words") -> list[str]:
        """``n`` plausible text lines: ``words`` (prose-ish), ``kv`` (key=value), ``numbers``."""
        out = []
        for _ in range(n):
            if kind == "kv":
                out.append(
                    f"{self.pick(WORDS)}_{self.pick(('port', 'host', 'timeout', 'mode', 'level', 'path'))}"
                    f"={self.randint(1, 9999)}"
                )
            elif kind == "numbers":
                out.append(str(self.randint(0, 99999)))
            else:
                out.append(" ".join(self.pick(WORDS) for _ in range(self.randint(2, 7))))
        return out

    def log_lines(
        self,
        n: int,
        service: str | None = None,
        start: datetime | None = None,
        levels: Sequence[str] = LEVELS,
    ) -> list[str]:
        """Timestamped application log lines ``2024-03-01T10:00:00 LEVEL service: message``."""
        t = start or self.date()
        svc = service or self.pick(SERVICES)
        msgs = (
            "request served",
            "cache miss",
            "connection reset by peer",
            "retrying upstream",
            "user logged in",
            "timeout waiting for lock",
            "disk usage at threshold",
            "job finished",
            "config reloaded",
            "slow query detected",
            "queue drained",
            "token refreshed",
            "worker started",
        )
        out = []
        for _ in range(n):
            t += timedelta(seconds=self.randint(1, 900))
            out.append(f"{t:%Y-%m-%dT%H:%M:%S} {self.pick(levels)} {svc}: {self.pick(msgs)}")
        return out

    def access_lines(self, n: int, ips: Sequence[str] | None = None) -> list[str]:
        """Common-log-format web access lines."""
        ips = list(ips or [self.ip() for _ in range(5)])
        t = self.date()
        out = []
        for _ in range(n):
            t += timedelta(seconds=self.randint(1, 120))
            status = self.pick((200, 200, 200, 201, 301, 304, 404, 500, 503))
            out.append(
                f'{self.pick(ips)} - - [{t:%d/%b/%Y:%H:%M:%S} +0000] "{self.pick(("GET", "GET", "POST"))} '
                f'{self.pick(HTTP_PATHS)} HTTP/1.1" {status} {self.randint(100, 9000)}'
            )
        return out

    # ---- English --------------------------------------------------------------------------------------------------
    def spin(self, template: str, capitalize: bool = True, **values: object) -> str:
        """Resolve ``{a|b}`` alternations (innermost first), then ``{name}`` placeholders; collapse spaces.
        The first letter is capitalised unless ``capitalize=False`` (a fragment for inside a sentence)."""
        # Placeholders become inert markers first, so one may sit inside an alternation ({the {what}|a {what}})
        # and a value holding '|' or braces is never read as spintax; they are filled in last.
        slots: list[str] = []

        def hold(m: re.Match[str]) -> str:
            if m.group(1) not in values:
                return m.group(0)
            slots.append(str(values[m.group(1)]))
            return f"\x00{len(slots) - 1}\x00"

        text = _PLACEHOLDER.sub(hold, template)
        while True:
            new = _ALTERNATION.sub(lambda m: self.rng.choice(m.group(1).split("|")), text)
            if new == text:
                break
            text = new
        text = re.sub("\x00(\\d+)\x00", lambda m: slots[int(m.group(1))], text)
        text = _SPACES.sub(" ", text).strip()
        return text[:1].upper() + text[1:] if capitalize else text

    def phrase(self, *templates: str, **values: object) -> str:
        """One of several whole phrasings (imperative, request, ticket, question), spun, with an optional intro.
        Which template was picked is recorded in ``phrasings`` (what the factory's variety counts read)."""
        template = self.pick(templates)
        self.phrasings.append(f"{_call_site()}#{templates.index(template) + 1}/{len(templates)}")
        body = self.spin(template, capitalize=True, **values)
        intro = self.pick(INTROS)
        head = body.split(" ", 1)[0]
        asks = body.lower().startswith(("could you", "can you", "would you", "please"))
        if (
            not intro
            or head.endswith(":")
            or head[1:2].isupper()
            or head.startswith(("/", "~"))
            or head in ("I", "I'm", "I've", "I'd")
            or (asks and intro.rstrip().endswith(("?", ":")))
        ):
            return body  # a ticket keeps its own heading; a path or an acronym keeps its case
        return intro + body[:1].lower() + body[1:]

    def phrasing_id(self) -> str:
        """Which whole phrasing this world's task was written from: for each ``phrase`` call, in order, the call's
        place in the family's code and the position of the template it picked (``files.py:467#2/4``), joined
        with ``+``; ``-`` when ``phrase`` was never called (the family's one fixed wording). A template is named
        by its place, not its text, because families splice drawn clauses into their templates: two tasks share a
        phrasing when they differ only in ``{a|b}`` synonyms, the intro, spliced clauses and drawn values."""
        return "+".join(self.phrasings) or "-"

    def clauses(self, parts: Sequence[str], joiner: str = "; ") -> str:
        """Constraints in a drawn order (the order of constraints must not give the skill away)."""
        return joiner.join(self.shuffled([p for p in parts if p]))

    def path_ref(self, path: str, kind: str = "folder", home: str = HOME) -> str:
        """A path as a person would give it: absolute, relative to home, or described ('the logs folder in your
        home directory'). Always unambiguous: a description is used only for a direct child of home."""
        rel = posixpath.relpath(path, home) if path.startswith(home + "/") else None
        styles = ["abs"]
        if rel:
            styles += ["tilde", "tilde"]
            if "/" not in rel:
                styles.append("describe")
        style = self.pick(styles)
        if style == "tilde":
            return f"~/{rel}"
        if style == "describe":
            noun = kind if kind != "folder" else self.pick(("folder", "directory"))
            return self.spin(
                "{the|your} " + f"{rel} {noun} " + "{in your home directory|under your home|in $HOME}",
                capitalize=False,
            )
        return path


def shell_paths(w: World) -> Callable[[str], str]:
    """How one draw's reference writes paths: ``~/x`` or ``/home/operator/x`` (drawn once per task), quoted only
    when it must be: operators write both, so the trajectories should too."""
    tilde = w.chance(0.5)

    def render(path: str) -> str:
        if not re.fullmatch(r"[\w./+-]+", path):
            return quote(path)
        return "~" + path[len(HOME) :] if tilde and path.startswith(HOME + "/") else path

    return render


def text_body(lines: Sequence[str]) -> str:
    """File content from lines, each ending with a newline."""
    return "".join(f"{line}\n" for line in lines)


def quote(value: str) -> str:
    """Single-quote for bash (``'it'\\''s'``)."""
    return "'" + value.replace("'", "'\\''") + "'"


def heredoc(path: str, lines: Sequence[str], mode: str | None = None) -> str:
    """A setup command writing ``lines`` to ``path`` exactly (printf, so no trailing-newline surprises)."""
    body = "".join(f"{line}\n" for line in lines)
    cmd = f"printf %s {quote(body)} > {quote(path)}"
    return f"{cmd} && chmod {mode} {quote(path)}" if mode else cmd


def sed_pattern(text: str, delim: str = "|") -> str:
    """``text`` as a basic sed regular expression matching itself literally (inside ``delim`` delimiters)."""
    return "".join("\\" + c if c in "\\.[]*^$" or c == delim else c for c in text)


def sed_replacement(text: str, delim: str = "|") -> str:
    """``text`` as a sed replacement that inserts itself literally (``&`` and ``\\`` escaped)."""
    return "".join("\\" + c if c in "\\&" or c == delim else c for c in text)


# ---- where a task starts, and a check that reads meaning --------------------------------------------------------------
def workplace(w: World, user: str, app: str, home_share: float = 0.2) -> tuple[str, list[str]]:
    """A working folder as real tasks come in (issue 39): sometimes the user's home, else a project folder in it,
    ``/srv/<app>``, ``/opt/<app>``, ``/app``, ``/data/<team>`` or ``/var/lib/<app>``; with the setup line that
    creates it and hands it to ``user`` (a family writes files there as root). ``user`` is any session user
    (``sandbox.layout.SESSION_ACCOUNTS``): the service account's home is /srv/app."""
    home = SESSION_ACCOUNTS[user].home
    if w.chance(home_share):
        return home, []
    kind = w.randint(0, 5)
    wd = (
        f"{home}/{app}",
        f"/srv/{app}",
        f"/opt/{app}",
        "/app",
        f"/data/{w.team() if kind == 4 else ''}",
        f"/var/lib/{app}",
    )[kind]
    w.note(wd)
    return wd, [f"mkdir -p {quote(wd)} && chown {user}:{SESSION_ACCOUNTS[user].group} {quote(wd)}"]


def session_variables(w: World, values: dict[str, str], name: str) -> dict[str, str]:
    """A file that makes the operator's shell start with ``values`` exported: every session sources
    /etc/profile.d/*.sh, as a login shell does (``sandbox/session.py``). A task can then name a folder by its
    variable alone ("the logs in $LOG_DIR"); the operator reads it (``echo "$LOG_DIR"``) or uses it as it is."""
    w.note(*values)
    return {f"/etc/profile.d/{name}.sh": "".join(f"export {k}={quote(v)}\n" for k, v in values.items())}


PY_CHECK_PRELUDE = r"""
import hashlib, json, os, re, stat, subprocess, sys
S = json.loads(sys.argv[1])
def no(why):
    print(why)
    sys.exit(1)
def text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        no(f"cannot read {path}")
def md5(path):
    try:
        with open(path, "rb") as fh:
            return hashlib.md5(fh.read()).hexdigest()
    except OSError:
        return None
for path, digest in S.get("same", {}).items():
    if md5(path) != digest:
        no(f"{path} must stay as it was")
for path, record in S.get("recorded", {}).items():  # files the setup built: their md5 recorded then (root-only)
    if md5(path) != text(record).strip():
        no(f"{path} must stay as it was")
"""


def py_check(spec: object, code: str) -> str:
    """A check in Python: the spec travels as JSON (``S``), ``no(why)`` fails with a reason the gate shows, and
    every path in ``spec["same"]`` (path -> md5, see ``md5_text``) or ``spec["recorded"]`` (path -> a root-only file
    where the setup wrote its md5) must be byte-for-byte as the setup left it."""
    import json

    return (
        "#!/bin/bash\n"
        f"python3 - {quote(json.dumps(spec, sort_keys=True))} <<'PY'\n{PY_CHECK_PRELUDE.strip()}\n{code.strip()}\nPY\n"
    )


def md5_text(body: str) -> str:
    """The md5 of a file's text, as ``py_check``'s ``same`` wants it."""
    import hashlib

    return hashlib.md5(body.encode()).hexdigest()
