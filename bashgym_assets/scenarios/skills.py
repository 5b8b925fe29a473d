"""Skill-level similarity: whether two tasks teach the same skill, not whether they share words.

A held-out task measures a skill only if no training task teaches that skill. Instance-level guards (word n-grams
of the instruction, argument-level n-grams of the reference) miss the commonest leak: the same goal, reached with
the same commands, worded differently and with other file names. This module compares what a task *does*:

- the **solution skeleton**: the reference's commands, their flags, pipes and redirects, with every argument
  masked; lines that only look (``ls``, ``cat``, ``head``, a ``grep`` printing to the terminal) are dropped, so
  the skeleton is the *state-changing core* (a solution that only looks keeps its look-only lines: looking is then
  the skill). Read with the shell engine's bash parser through the factory catalog's command+flag reading.
- the **masked goal**: the instruction's content words after quoted text, paths, numbers and drawn values are
  masked, with a light suffix strip, so "compress the old logs" and "Compressing logs older than N days" meet.

Both are compared by TF-IDF cosine. The IDF is what makes a shared ``mkdir -p`` or the word "file" count little
and a shared ``gunzip -k`` or "world-writable" count much. It is written here (sparse vectors in
``scipy.sparse``) rather than with scikit-learn's ``TfidfVectorizer`` because a guard compares one new task with
a fixed index, and the new task's words that the index never saw must count *against* the match (they say its
goal is something else); scikit-learn's ``transform`` drops unknown words before it normalises, which would
inflate exactly those scores.

A pair is a **skill twin** when both similarities are high (``goal >= GOAL_TWIN`` and ``skeleton >=
SKELETON_TWIN``), or when the solution is the same (``skeleton >= SAME_SOLUTION``), says something (a rare command
or flag: ``SPECIFIC_IDF``) and the goal is related (``goal >= SAME_SOLUTION_GOAL``: ``gunzip -k`` to decompress
one file vs ``gunzip -k`` over a folder): a shared idiom under a different goal (``wc -l`` counting words vs counting users) is the skill
being *used*, not leaked, and a same-worded goal solved with other commands is a different skill. Two families
are twins when their **family score** (the mean over one family's tasks of the best pair score in the other, in
both directions, the larger taken) reaches ``FAMILY_TWIN``.

Calibration (``tests/test_skills.py`` holds the pairs; BENCHMARKS.md "Honest yardsticks" the histograms). The 10
bundled twins of the outside review score goal 0.27-0.82 and skeleton 0.52-1.0 against their train family (the
lowest goal, ``a-archives-gunzip-keep``, is caught by the same-solution rule: ``gunzip -k``, skeleton 1.0); its
3 family twins score 0.33-0.44 as families. Genuinely different skills, also in one category or sharing
commands (``git-revert-commit`` / ``git-tag-release``, ``logs-rotate`` / ``logs-top-ips``, ...), score 0.0-0.16
as families, and the best match of a bundled task that only shares an idiom with a family (``a-procs-kill-tree``
/ ``processes-renice``) stays below one of the two task thresholds. Over the whole factory the train families'
nearest-neighbour family scores have p25 0.22, median 0.28, p75 0.32: ``FAMILY_TWIN`` = 0.3 sits at the top of
that range, the task thresholds at the low edge of the twins (every one flagged). A guard that errs towards
refusing costs one draw; one that errs the other way makes a held-out number meaningless.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy import sparse

from bashgym_assets.scenarios.factory.catalog import command_units, commands_in
from bashgym_assets.scenarios.factory.phrasing import normalise_instruction
from bashgym_assets.shell import parse, upstream

# Thresholds (see the module doc for how they were chosen).
GOAL_TWIN = 0.28
SKELETON_TWIN = 0.3
SAME_SOLUTION = 0.9  # an (almost) identical skeleton needs less agreement of the goal...
SAME_SOLUTION_GOAL = 0.15  # ...but some: ``chmod -R`` alone does not make two goals one skill
FAMILY_TWIN = 0.3
# The same-solution rule needs a solution that says something: one command+flag used by fewer than about one task
# in 20 of the corpus (IDF log(20) + 1). A heredoc into a file (``cat > f <<EOF``) is how many skills end; ``gunzip
# -k`` or ``sqlite3 -csv`` is a skill.
SPECIFIC_IDF = math.log(20) + 1
BACKGROUND_DRAWS = 8  # draws a family in the IDF's background corpus

# Commands that only look at the system, unless a flag below or a redirect makes them write.
LOOK_ONLY = frozenset(
    [
        "ls",
        "cat",
        "pwd",
        "head",
        "tail",
        "wc",
        "echo",
        "printf",
        "stat",
        "file",
        "id",
        "whoami",
        "groups",
        "date",
        "tree",
        "du",
        "df",
        "ps",
        "pgrep",
        "less",
        "more",
        "diff",
        "cmp",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "find",
        "sort",
        "uniq",
        "cut",
        "awk",
        "sed",
        "tr",
        "column",
        "nl",
        "od",
        "xxd",
        "hexdump",
        "zcat",
        "zgrep",
        "bzcat",
        "xzcat",
        "jq",
        "yq",
        "getent",
        "ss",
        "netstat",
        "ip",
        "hostname",
        "uname",
        "env",
        "printenv",
        "type",
        "which",
        "readlink",
        "realpath",
        "basename",
        "dirname",
        "true",
        "test",
        "[",
        "[[",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "crontab",
        "history",
        "lsof",
        "free",
        "uptime",
        "last",
        "w",
        "who",
        "tac",
        "rev",
        "fold",
        "fmt",
        "paste",
        "join",
        "comm",
        "seq",
        "expr",
        "bc",
        "git",
        "sqlite3",
        "tar",
        "unzip",
        "zipinfo",
        "lsattr",
        "getfacl",
        "namei",
        "systemctl",
        "journalctl",
        "python3",
        "python",
        "id",
        "cd",
        "sleep",
    ]
)
# Flags (or git subcommands) with which a look-only command changes state.
MUTATING = {
    "sed": ("-i", "--in-place"),
    "find": ("-delete", "-exec", "-execdir", "-ok", "-fprint", "-fprintf"),
    "sort": ("-o", "--output"),
    "crontab": ("-r", "-e", "-"),
    "tar": ("-x", "-c", "-r", "-u", "--extract", "--create", "--append", "--delete"),
    "unzip": ("-o", "-d"),
    "awk": ("-i",),
    "sqlite3": (),  # judged by its SQL below
    "python3": ("-c",),
    "python": ("-c",),
}
_GIT_LOOK = frozenset(
    {"git status", "git log", "git show", "git diff", "git branch", "git rev-parse", "git ls-files"}
)
_SYSTEMCTL_LOOK = frozenset({"status", "is-active", "is-enabled", "list-units", "cat", "show"})
_SQL_WRITE = re.compile(r"\b(insert|update|delete|create|drop|alter|replace)\b", re.I)
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_QUIET_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})

_WORD = re.compile(r"[a-z][a-z-]*[a-z]|[a-z]")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "in",
        "on",
        "to",
        "into",
        "from",
        "for",
        "with",
        "by",
        "at",
        "as",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "every",
        "each",
        "all",
        "any",
        "some",
        "your",
        "you",
        "my",
        "me",
        "i",
        "we",
        "our",
        "us",
        "please",
        "can",
        "could",
        "would",
        "should",
        "will",
        "must",
        "only",
        "just",
        "then",
        "than",
        "so",
        "not",
        "no",
        "do",
        "does",
        "did",
        "done",
        "has",
        "have",
        "had",
        "there",
        "here",
        "which",
        "what",
        "who",
        "how",
        "when",
        "where",
        "while",
        "if",
        "but",
        "also",
        "one",
        "two",
        "out",
        "up",
        "down",
        "need",
        "needs",
        "want",
        "wants",
        "make",
        "sure",
        "get",
        "got",
        "let",
        "lets",
        "put",
        "task",
        "ticket",
        "request",
        "help",
        "hey",
        "hi",
        "thanks",
        "thank",
        "ok",
        "okay",
        "now",
        "new",
        "file",
        "files",
        "folder",
        "folders",
        "directory",
        "directories",
        "home",
        "under",
        "inside",
        "within",
        "called",
        "named",
        "v",
        "p",
        "n",
        "q",
    ]
)
_SUFFIXES = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    """A light suffix strip (no stemming library is pinned; this is all the goal comparison needs): 'compressed',
    'compressing', 'compresses' -> 'compress'."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def goal_tokens(instruction: str, values: Iterable[str] = ()) -> list[str]:
    """The instruction's content words with names, paths, numbers, quoted text and drawn ``values`` masked."""
    masked = normalise_instruction(instruction, values)
    return [_stem(w) for w in _WORD.findall(masked) if w not in _STOP and _stem(w) not in _STOP]


@dataclass(frozen=True)
class LineShape:
    """One reference line reduced to its shape: the skeleton text, the feature units, and whether it only looks."""

    skeleton: str
    units: tuple[str, ...]
    look_only: bool


def _command_name(words: list[str]) -> str:
    return posixpath.basename(words[0]) if words else ""


def _mutates(words: list[str]) -> bool:
    """Whether one look-only-named command changes state through a flag, a subcommand or its SQL."""
    name = _command_name(words)
    rest = words[1:]
    if name == "git":
        sub = next((w for w in rest if not w.startswith("-")), "")
        return f"git {sub}" not in _GIT_LOOK or (sub == "branch" and any(w.startswith("-") for w in rest))
    if name == "systemctl":
        sub = next((w for w in rest if not w.startswith("-")), "")
        return sub not in _SYSTEMCTL_LOOK
    if name == "sqlite3":
        return any(_SQL_WRITE.search(w) for w in rest)
    if name == "tar":
        first = rest[0] if rest else ""
        if first and not first.startswith("-") and re.fullmatch(r"[a-zA-Z]+", first):
            return any(c in first for c in "xcru")
    flags = MUTATING.get(name, ())
    return any(
        w == f or (f.startswith("-") and len(f) == 2 and re.fullmatch(rf"-[a-zA-Z]*{f[1]}[a-zA-Z]*", w))
        for w in rest
        for f in flags
    )


def line_shape(line: str) -> LineShape:
    """The shape of one reference line: commands with flags, pipes and output redirects, arguments masked."""
    parsed = parse(line)
    units: list[str] = []
    parts: list[str] = []
    look = True
    commands = [c for c in parsed.commands if c.words]
    names: list[str] = []
    for c in commands:
        words = [w.value for w in c.words]
        head = [w for w in words if not (w is words[0] and re.match(r"^[A-Za-z_]\w*=", w))] or words
        cmd_units: set[str] = set()
        command_units(head, cmd_units)
        name = _command_name(head)
        names.append(name)
        if name in ("for", "while", "until", "select", "case", "if"):
            units.append(f"loop:{name}")
        units.extend(sorted(cmd_units))
        for r in c.redirects:
            target = r.target.value if r.target else ""
            if r.op in _WRITE_REDIRECTS and target not in _QUIET_TARGETS and not target.startswith("&"):
                units.append(f"{name}{'>>' if r.op in ('>>', '&>>') else '>'}")
                look = False
            elif r.op in ("<<", "<<-"):
                units.append(f"{name}<<")
        if name not in LOOK_ONLY or _mutates(head):
            look = False
        for w in c.words:
            for sub in w.subs:  # a substitution's commands are part of the line's shape
                for sub_words in commands_in(sub.text):
                    sub_units: set[str] = set()
                    command_units(sub_words, sub_units)
                    units.extend(sorted(sub_units))
                    if _command_name(sub_words) not in LOOK_ONLY or _mutates(sub_words):
                        look = False
        parts.append(" ".join(sorted(cmd_units)) or name)
    for a, b in zip(commands, commands[1:], strict=False):
        if upstream(a, b):
            units.append(f"{_command_name([a.words[0].value])}|{_command_name([b.words[0].value])}")
    if not commands:
        look = True
    return LineShape(skeleton=" ; ".join(parts), units=tuple(units), look_only=look)


def solution_shapes(reference: Sequence[str]) -> list[LineShape]:
    return [line_shape(line) for line in reference if line.strip()]


def state_changing_core(reference: Sequence[str]) -> tuple[str, ...]:
    """The skeletons of the lines that change state (all lines when none does): the solution as a skill."""
    shapes = solution_shapes(reference)
    kept = [s for s in shapes if not s.look_only] or shapes
    return tuple(s.skeleton for s in kept)


def solution_skeleton(reference: Sequence[str]) -> tuple[str, ...]:
    """Every line's skeleton, look-only lines included: the solution as written, arguments masked."""
    return tuple(s.skeleton for s in solution_shapes(reference))


def skeleton_units(reference: Sequence[str]) -> list[str]:
    """The feature units of the state-changing core (for the TF-IDF comparison)."""
    shapes = solution_shapes(reference)
    kept = [s for s in shapes if not s.look_only] or shapes
    return [u for s in kept for u in s.units]


@dataclass(frozen=True)
class SkillDoc:
    """What the comparison needs of one task: its id, its group (family or source) and its two token lists."""

    id: str
    group: str
    goal: tuple[str, ...]
    skeleton: tuple[str, ...]


def skill_doc(
    task_id: str, instruction: str, reference: Sequence[str], group: str = "", values: Iterable[str] = ()
) -> SkillDoc:
    return SkillDoc(
        id=task_id,
        group=group or task_id,
        goal=tuple(goal_tokens(instruction, values)),
        skeleton=tuple(skeleton_units(reference)),
    )


class TfIdf:
    """TF-IDF over token lists with an IDF learnt from a corpus; unknown tokens get the largest IDF (see the
    module doc for why this is not scikit-learn's vectorizer). Rows are L2-normalised, so a product is a cosine."""

    def __init__(self, corpus: Iterable[Sequence[str]]) -> None:
        df: Counter[str] = Counter()
        n = 0
        for doc in corpus:
            n += 1
            df.update(set(doc))
        self.n = n
        self.vocab = {t: i for i, t in enumerate(sorted(df))}
        self.idf = np.array([math.log((1 + n) / (1 + df[t])) + 1 for t in sorted(df)], dtype=np.float64)
        self.unknown_idf = math.log(1 + n) + 1

    def rarest(self, docs: Sequence[Sequence[str]]) -> np.ndarray:
        """Each document's largest IDF (its rarest token; unknown tokens are the rarest of all), 0 when empty."""
        return np.array(
            [
                max(
                    (self.idf[self.vocab[t]] if t in self.vocab else self.unknown_idf for t in doc),
                    default=0.0,
                )
                for doc in docs
            ]
        )

    def matrix(self, docs: Sequence[Sequence[str]]) -> sparse.csr_matrix:
        """Known tokens as columns; each row's norm also counts its unknown tokens (they weigh against a match)."""
        rows, cols, vals = [], [], []
        for i, doc in enumerate(docs):
            counts = Counter(doc)
            weights: dict[int, float] = {}
            norm2 = 0.0
            for token, tf in counts.items():
                w = (1 + math.log(tf)) * (
                    self.idf[self.vocab[token]] if token in self.vocab else self.unknown_idf
                )
                norm2 += w * w
                if token in self.vocab:
                    weights[self.vocab[token]] = w
            norm = math.sqrt(norm2) or 1.0
            for j, w in weights.items():
                rows.append(i)
                cols.append(j)
                vals.append(w / norm)
        return sparse.csr_matrix((vals, (rows, cols)), shape=(len(docs), len(self.vocab)), dtype=np.float64)


@dataclass
class PairScores:
    """Cosine similarities of every left task with every right task: goal, skeleton, and the skill score.
    ``specific``: whether both solutions use a command+flag rare enough to identify a skill (see ``SPECIFIC_IDF``);
    only then does an identical skeleton count as the same solution."""

    goal: np.ndarray
    skeleton: np.ndarray
    specific: np.ndarray | bool = True

    @property
    def skill(self) -> np.ndarray:
        """Both must agree: the smaller of the two (a twin is high on both)."""
        return np.minimum(self.goal, self.skeleton)

    @property
    def twin(self) -> np.ndarray:
        return np.asarray(is_twin(self.goal, self.skeleton, self.specific))  # (arrays in: an array already)


def is_twin(
    goal: np.ndarray | float, skeleton: np.ndarray | float, specific: np.ndarray | bool = True
) -> np.ndarray | bool:
    """The twin rule (module doc): both high, or the same specific solution under a related goal."""
    return ((goal >= GOAL_TWIN) & (skeleton >= SKELETON_TWIN)) | (
        (skeleton >= SAME_SOLUTION) & (goal >= SAME_SOLUTION_GOAL) & specific
    )


@cache
def background_corpus() -> tuple[SkillDoc, ...]:
    """The documents the IDF is learnt from besides the compared ones: a few draws of every factory family and the
    bundled pack, so that how much a shared word or command counts does not depend on which few tasks happen to
    be compared (a guard over 40 tasks and a report over 5,000 then agree). Drawn under its own seed string."""
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.factory.family import all_families

    docs: list[SkillDoc] = []
    for name, fam in all_families().items():
        for i in range(BACKGROUND_DRAWS):
            try:
                b, values = fam.make(f"idf:{i}")
            except Exception:  # a broken family is the factory's report to make, not the IDF's
                continue
            docs.append(skill_doc(b.id, b.task, b.reference, group=name, values=values))
    pack, _ = load_pack()
    docs += [skill_doc(b.id, b.task, b.reference) for b in pack]
    return tuple(docs)


class SkillIndex:
    """A fixed set of tasks (the evaluation side) to compare other tasks with, one vectorised product a batch.
    The IDF comes from the ``background_corpus`` (and ``corpus`` if given), never from the compared tasks: the
    guard, the contamination check and the reports then score the same pair the same way."""

    def __init__(self, docs: Sequence[SkillDoc], corpus: Sequence[SkillDoc] = ()) -> None:
        self.docs = list(docs)
        base = [*corpus, *background_corpus()]
        self._goal = TfIdf(d.goal for d in base)
        self._skel = TfIdf(d.skeleton for d in base)
        self._g = self._goal.matrix([d.goal for d in self.docs])
        self._s = self._skel.matrix([d.skeleton for d in self.docs])
        self._specific = self._skel.rarest([d.skeleton for d in self.docs]) >= SPECIFIC_IDF

    def __len__(self) -> int:
        return len(self.docs)

    def scores(self, others: Sequence[SkillDoc]) -> PairScores:
        """Pair scores of ``others`` (rows) against the index (columns)."""
        g = self._goal.matrix([d.goal for d in others]) @ self._g.T
        s = self._skel.matrix([d.skeleton for d in others]) @ self._s.T
        specific = self._skel.rarest([d.skeleton for d in others]) >= SPECIFIC_IDF
        return PairScores(
            goal=g.toarray().astype(np.float32, copy=False),
            skeleton=s.toarray().astype(np.float32, copy=False),
            specific=np.outer(specific, self._specific),
        )


@dataclass(frozen=True)
class Match:
    """A task's nearest task on the other side."""

    id: str
    nearest: str
    goal: float
    skeleton: float
    twin: bool

    @property
    def skill(self) -> float:
        return min(self.goal, self.skeleton)


def best_matches(left: Sequence[SkillDoc], right: Sequence[SkillDoc]) -> list[Match]:
    """For each left task, its nearest right task (a twin first, then by skill score)."""
    if not left or not right:
        return [Match(d.id, "", 0.0, 0.0, False) for d in left]
    scores = SkillIndex(right).scores(left)
    skill = scores.skill + scores.twin * 10.0
    out = []
    for i, d in enumerate(left):
        j = int(np.argmax(skill[i]))
        out.append(
            Match(
                d.id,
                right[j].id,
                float(scores.goal[i, j]),
                float(scores.skeleton[i, j]),
                bool(scores.twin[i, j]),
            )
        )
    return out


def family_scores(
    groups: Mapping[str, Sequence[SkillDoc]], corpus: Sequence[SkillDoc] = ()
) -> dict[tuple[str, str], float]:
    """Family-level similarity of every ordered pair of groups: the mean over A's tasks of the best skill score in
    B. Symmetrise with ``max(s[a, b], s[b, a])`` where a symmetric figure is wanted (``family_similarity``)."""
    names = sorted(groups)
    docs = [d for n in names for d in groups[n]]
    if not docs:
        return {}
    index = SkillIndex(docs, corpus=corpus)  # corpus: only when a caller wants another IDF
    skill = index.scores(docs).skill
    bounds: dict[str, tuple[int, int]] = {}
    start = 0
    for n in names:
        bounds[n] = (start, start + len(groups[n]))
        start += len(groups[n])
    out: dict[tuple[str, str], float] = {}
    for a in names:
        a0, a1 = bounds[a]
        if a0 == a1:
            continue
        block = skill[a0:a1]
        for b in names:
            if a == b:
                continue
            b0, b1 = bounds[b]
            if b0 == b1:
                continue
            out[(a, b)] = float(block[:, b0:b1].max(axis=1).mean())
    return out


def family_similarity(scores: Mapping[tuple[str, str], float], a: str, b: str) -> float:
    return max(scores.get((a, b), 0.0), scores.get((b, a), 0.0))


def nearest_family(
    scores: Mapping[tuple[str, str], float], a: str, among: Iterable[str]
) -> tuple[str, float]:
    """The family of ``among`` nearest to ``a`` (symmetric family score), and that score."""
    best = ("", 0.0)
    for b in among:
        if b != a:
            s = family_similarity(scores, a, b)
            if s > best[1]:
                best = (b, s)
    return best
