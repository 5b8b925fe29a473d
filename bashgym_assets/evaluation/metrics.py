"""What one evaluation episode showed, and the rates over many: the behavioural metrics that count.

Per episode (sekft's eval, extended): operated (it typed real commands and nothing else: a copied prompt banner
is not one, see ``copied_prompt``), terminated (it typed ``exit``), verified (the scenario's check passed on the final container state), clean (all three), and when not
clean, ONE failure class that says what went wrong first. Per run: each rate with a Wilson 95% interval, per
category and per difficulty, and pass@k when several samples per scenario were drawn.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, Field, field_validator

from bashgym_assets.rollout.episode import MESSAGE_TYPE
from bashgym_assets.rollout.transcript import BABBLE, COMMAND, EMPTY, EXIT, FENCED, PROSE, Message, TypedLine

# Failure classes, in the order they are assigned (the first that applies names the episode).
SETUP_FAILED = "setup_failed"  # infrastructure: the scenario could not be set up (not the model's doing)
SANDBOX_ERROR = "sandbox_error"  # infrastructure: the container broke
OPERATOR_ERROR = "operator_error"  # the model could not produce a reply (generation or API failure)
FAILURE_BABBLE = "babble"  # lists, markdown, chat tokens, repetition, cut off at the token cap
FAILURE_PROSE = "prose"  # sentences instead of commands (or commands inside a code fence)
FAILURE_PROMPT_ECHO = (
    "prompt_echo"  # typed the prompt banner (``root@sandbox:/app# ls``): the shell ran the banner
)
FAILURE_LOOP = "loop"  # the same command over and over
FAILURE_TIMEOUT = "timeout"  # the episode's wall-time cap ended it
FAILURE_NEVER_EXITS = "never_exits"  # used every turn without typing ``exit``
FAILURE_WRONG_RESULT = "wrong_result"  # exited cleanly, but the check failed
INFRASTRUCTURE = (SETUP_FAILED, SANDBOX_ERROR)
FAILURE_CLASSES = (
    SETUP_FAILED,
    SANDBOX_ERROR,
    OPERATOR_ERROR,
    FAILURE_BABBLE,
    FAILURE_PROSE,
    FAILURE_PROMPT_ECHO,
    FAILURE_LOOP,
    FAILURE_TIMEOUT,
    FAILURE_NEVER_EXITS,
    FAILURE_WRONG_RESULT,
)
# ``reply_kinds`` names a reply that starts with a copied prompt so (the transcript's parser calls it a command)
PROMPT_ECHO = "prompt_echo"
LOOP_REPEATS = 3
RATES = ("operate", "terminate", "verified", "clean")


class EvalEpisode(BaseModel):
    """One model in one held-out scenario (one sample): the lake's ``eval_episodes`` row."""

    eval_id: str
    model: str  # the role in the comparison: base | candidate | champion | any label
    model_ref: str  # what was loaded: base folder, adapter folder, model URI or litellm string
    scenario_id: str
    category: str
    difficulty: int
    source: str = ""
    sample_index: int = 0
    operated: bool = False
    terminated: bool = False
    verified: bool = False
    clean: bool = False
    n_turns: int = 0
    n_commands: int = 0
    reply_kinds: str = ""  # e.g. "command,command,exit" (what each reply was understood as)
    end_reason: str = ""
    failure_class: str = ""  # "" when clean
    error: str = ""
    wall_s: float = 0.0
    sampling: str = "{}"  # JSON of the decoding settings
    messages: list[Message] = Field(default_factory=list)
    # why it failed, beyond the failure class (``evaluation.failures``): detail classes, primary first,
    # comma-joined ("wrong_path,premature_exit"); "" when clean, not the model's doing, or in rows older than it
    failure_detail: str = ""

    @field_validator("failure_detail", mode="before")
    @classmethod
    def _old_rows_have_none(cls, value: Any) -> Any:
        """Partitions written before the field read back as null when read together with newer ones."""
        return "" if value is None else value


EVAL_EPISODE_SCHEMA = pa.schema(
    [
        ("eval_id", pa.string()),
        ("model", pa.string()),
        ("model_ref", pa.string()),
        ("scenario_id", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.int32()),
        ("source", pa.string()),
        ("sample_index", pa.int32()),
        ("operated", pa.bool_()),
        ("terminated", pa.bool_()),
        ("verified", pa.bool_()),
        ("clean", pa.bool_()),
        ("n_turns", pa.int32()),
        ("n_commands", pa.int32()),
        ("reply_kinds", pa.string()),
        ("end_reason", pa.string()),
        ("failure_class", pa.string()),
        ("error", pa.string()),
        ("wall_s", pa.float64()),
        ("sampling", pa.string()),
        ("messages", pa.list_(MESSAGE_TYPE)),
        ("failure_detail", pa.string()),
    ]
)


def is_loop(commands: Sequence[str], repeats: int = LOOP_REPEATS) -> bool:
    """The same command ``repeats`` times in a row, or a run of 2*repeats commands with at most 2 distinct ones
    (``ls; cat x; ls; cat x; ...``)."""
    run = 1
    for prev, cur in zip(commands, commands[1:], strict=False):
        run = run + 1 if cur == prev else 1
        if run >= repeats:
            return True
    window = 2 * repeats
    return any(len(set(commands[i : i + window])) <= 2 for i in range(0, max(0, len(commands) - window + 1)))


# The banner the operator is shown (``transcript.orientation``: ``user@sandbox:/dir#`` or ``...$``) or a bare ``$``
# prompt as the first word of the line: what a model that imitates the transcript instead of typing a command writes
# (``root@sandbox:/app#cat file``, ``$ ls``). A lone ``#`` is not one: ``# ls`` is a comment, and bash says so.
_PROMPT_RE = re.compile(r"^\s*(?:[\w.+-]+@[\w.-]+:[^\s#$]*[#$]|\$(?=\s|$))")
NOT_FOUND = 127


def copied_prompt(command: str, exit_code: int | None = None) -> bool:
    """Whether a reply is a copied prompt banner rather than a command: its first word is a prompt and, when the
    shell's verdict is known, bash answered 127 (``root@sandbox:/app#: command not found``).

    Decision: the reply is run exactly as typed, never with the banner stripped. The evaluation asks whether the
    model operates a real terminal, and a real shell runs a pasted prompt as a command name (exit 127, nothing
    done): stripping it would credit the model with commands no terminal would have run, and hide from the
    transcript and the failure classes the very habit (imitating the transcript's text) that the figure should
    show. So the episode goes on as a shell would take it, and such a reply does not count as operating.

    A multi-line reply is judged by its first line only (its exit code is its last line's), so the exit code is
    consulted only for a one-line reply."""
    if not _PROMPT_RE.match(command):
        return False
    one_line = "\n" not in command.strip()
    return not (one_line and exit_code is not None and exit_code != NOT_FOUND)


def reply_kinds(lines: Sequence[TypedLine], exit_codes: Sequence[int | None] | None = None) -> list[str]:
    """What each reply was understood as: the transcript's kind, with a copied prompt banner said as such."""
    codes = (
        list(exit_codes) if exit_codes is not None and len(exit_codes) == len(lines) else [None] * len(lines)
    )
    return [
        PROMPT_ECHO if line.kind == COMMAND and copied_prompt(line.command, code) else line.kind
        for line, code in zip(lines, codes, strict=True)
    ]


def classify(
    lines: Sequence[TypedLine],
    *,
    terminated: bool,
    verified: bool,
    end_reason: str,
    setup_failed: bool = False,
    exit_codes: Sequence[int | None] | None = None,
) -> tuple[bool, str]:
    """(operated, failure class) of one episode from how each reply was understood and how it ended.

    ``exit_codes``: the shell's exit code of each reply (None where nothing ran), to tell a copied prompt banner
    (127) from a command; without them the banner's shape alone decides."""
    kinds = reply_kinds(lines, exit_codes)
    n_commands = sum(k == COMMAND for k in kinds)
    operated = n_commands > 0 and all(k in (COMMAND, EXIT) for k in kinds)
    if setup_failed:
        return False, SETUP_FAILED
    if end_reason in (SANDBOX_ERROR, OPERATOR_ERROR):
        return operated, end_reason
    if operated and terminated and verified:
        return True, ""
    if BABBLE in kinds:
        return operated, FAILURE_BABBLE
    if any(k in (PROSE, FENCED) for k in kinds) or (kinds and all(k == EMPTY for k in kinds)):
        return operated, FAILURE_PROSE
    if PROMPT_ECHO in kinds:
        return operated, FAILURE_PROMPT_ECHO
    if is_loop([line.command for line, k in zip(lines, kinds, strict=True) if k == COMMAND]):
        return operated, FAILURE_LOOP
    if end_reason == "time_cap":
        return operated, FAILURE_TIMEOUT
    if not terminated:
        return operated, FAILURE_NEVER_EXITS
    if not operated:  # only exit (no command at all), empty lines or syntax errors
        return operated, FAILURE_PROSE if n_commands == 0 and len(kinds) > 1 else FAILURE_WRONG_RESULT
    return operated, FAILURE_WRONG_RESULT


# ---- rates ------------------------------------------------------------------------------------------------------
class Rate(BaseModel):
    """k successes out of n with a Wilson score interval (95%: z = 1.96), well-behaved at 0% and 100%."""

    k: int
    n: int
    rate: float
    low: float
    high: float

    def fmt(self) -> str:
        if not self.n:
            return "-"
        return f"{100 * self.rate:.0f}% [{100 * self.low:.0f}-{100 * self.high:.0f}]"


def wilson(k: int, n: int, z: float = 1.96) -> Rate:
    if n <= 0:
        return Rate(k=0, n=0, rate=0.0, low=0.0, high=0.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Rate(
        k=k,
        n=n,
        rate=round(p, 4),
        low=round(max(0.0, centre - half), 4),
        high=round(min(1.0, centre + half), 4),
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if k > n or n <= 0:
        return float("nan")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _scored(episodes: Iterable[EvalEpisode]) -> list[EvalEpisode]:
    """Episodes that say something about the model (infrastructure failures are reported, not scored)."""
    return [e for e in episodes if e.failure_class not in INFRASTRUCTURE]


def rates(episodes: Iterable[EvalEpisode]) -> dict[str, Rate]:
    eps = _scored(episodes)
    n = len(eps)
    return {
        "operate": wilson(sum(e.operated for e in eps), n),
        "terminate": wilson(sum(e.terminated for e in eps), n),
        "verified": wilson(sum(e.verified for e in eps), n),
        "clean": wilson(sum(e.clean for e in eps), n),
    }


class ModelSummary(BaseModel):
    """One model's results over one evaluation: overall rates, per category and difficulty, pass@k, failures."""

    model: str
    model_ref: str
    episodes: int
    scenarios: int
    infrastructure_failures: int
    rates: dict[str, Rate]
    by_category: dict[str, dict[str, Rate]]
    by_difficulty: dict[str, dict[str, Rate]]
    pass_at_k: dict[str, float]
    failure_classes: dict[str, int]
    mean_turns: float
    wall_s: float
    sampling: dict[str, Any] = Field(default_factory=dict)
    failure_details: dict[str, int] = Field(default_factory=dict)  # episodes per primary detail class


def summarize(
    model: str, episodes: Sequence[EvalEpisode], wall_s: float = 0.0, sampling: dict[str, Any] | None = None
) -> ModelSummary:
    eps = _scored(episodes)
    by_cat: dict[str, list[EvalEpisode]] = defaultdict(list)
    by_diff: dict[str, list[EvalEpisode]] = defaultdict(list)
    per_scenario: dict[str, list[EvalEpisode]] = defaultdict(list)
    for e in eps:
        by_cat[e.category].append(e)
        by_diff[str(e.difficulty)].append(e)
        per_scenario[e.scenario_id].append(e)
    samples = min((len(v) for v in per_scenario.values()), default=0)
    pass_k: dict[str, float] = {}
    for k in sorted({1, 2, 5, 10, samples} - {0}):
        if k <= samples:
            values = [pass_at_k(len(v), sum(e.clean for e in v), k) for v in per_scenario.values()]
            pass_k[f"pass@{k}"] = round(sum(values) / len(values), 4)
    return ModelSummary(
        model=model,
        model_ref=episodes[0].model_ref if episodes else "",
        episodes=len(episodes),
        scenarios=len({e.scenario_id for e in episodes}),
        infrastructure_failures=len(episodes) - len(eps),
        rates=rates(episodes),
        by_category={c: rates(v) for c, v in sorted(by_cat.items())},
        by_difficulty={d: rates(v) for d, v in sorted(by_diff.items())},
        pass_at_k=pass_k,
        failure_classes=dict(Counter(e.failure_class for e in episodes if e.failure_class)),
        mean_turns=round(sum(e.n_turns for e in eps) / len(eps), 2) if eps else 0.0,
        wall_s=round(wall_s, 2),
        sampling=sampling or {},
        failure_details=dict(Counter(d.split(",", 1)[0] for e in episodes if (d := e.failure_detail))),
    )
