"""The six quality metrics of a segment, from real signals in its steps. All scores are in [0, 1].

``success_score`` (30%)
    ``success_rate``: steps whose result is known (``Step.success`` not None) that succeeded / steps with a known
    result. A step fails on ``is_error`` or a non-zero exit code (the ingest adapters set ``success``). A segment
    with no known result scores 0: there is no evidence the work ran.
``verification_score`` (25%)
    Verification steps are commands that test or build (pytest, npm test, go test, cargo test/build, make test,
    tsc, mypy, ruff, eslint, ...). None ran: 0.5 (no evidence either way) and ``verification_passed`` is None.
    Otherwise ``0.5 * pass_rate + 0.5 * last_passed``: the final run decides half (the state the work was left
    in), the share of passing runs the other half; ``verification_passed`` is whether the last run passed.
``complexity_score`` (15%)
    ``0.4 * min(1, distinct tools / 4) + 0.6 * min(1, shell/edit patterns / 6)``; patterns counted once each:
    pipes, ``&&``/``||``/``;`` chains, redirections, loops or conditionals, command substitution, text tools
    (sed/awk/jq/xargs/find -exec), file edits, edits across two or more files, verification.
``length_score`` (10%)
    A bell curve on a log scale around the ideal length of 8 steps: ``exp(-(ln n - ln 8)^2 / 2)`` (1 step 0.11,
    4 steps 0.79, 8 steps 1.0, 16 steps 0.79, 64 steps 0.11).
``tool_diversity_score`` (10%)
    ``min(1, distinct tool names / 3)``.
``efficiency_score`` (10%)
    Productive steps / steps, times an output penalty. A step is unproductive when it failed, or repeats the
    previous step's exact input (a blind retry or a redundant call). The penalty ``1 - 0.5 * share of steps
    with outputs over 20,000 characters`` marks segments that dump huge outputs instead of targeted reads.

``quality_score = 0.30 success + 0.25 verification + 0.15 complexity + 0.10 length + 0.10 diversity
+ 0.10 efficiency``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pydantic import BaseModel

from bashgym_assets.sessions import Step

WEIGHTS = {
    "success_score": 0.30,
    "verification_score": 0.25,
    "complexity_score": 0.15,
    "length_score": 0.10,
    "tool_diversity_score": 0.10,
    "efficiency_score": 0.10,
}
IDEAL_LENGTH = 8
HUGE_OUTPUT = 20_000
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})

VERIFY_RE = re.compile(
    r"(?:^|[\s;&|(])(?:python3?\s+-m\s+)?(?:pytest|py\.test|unittest|tox|nox|"
    r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|build|lint|typecheck|check)|jest|vitest|mocha|"
    r"go\s+(?:test|build|vet)|cargo\s+(?:test|build|check|clippy)|make(?:\s+(?:test|check|build|all))?(?:\s|$)|"
    r"ctest|mvn\s+(?:test|verify|package)|gradle\w*\s+(?:test|build|check)|\./gradlew\s+(?:test|build|check)|"
    r"dotnet\s+(?:test|build)|rspec|phpunit|bats|shellcheck|bash\s+-n|tsc|mypy|pyright|ruff(?:\s+check)?|flake8|"
    r"pylint|eslint|cmake\s+--build)(?:\s|$|;)"
)
_PASS_COUNTS = re.compile(r"(\d+)\s+passed")
_FAIL_COUNTS = re.compile(r"(\d+)\s+(?:failed|errors?)\b")


class SegmentScores(BaseModel):
    success_score: float
    verification_score: float
    complexity_score: float
    length_score: float
    tool_diversity_score: float
    efficiency_score: float
    quality_score: float
    success_rate: float
    verification_passed: bool | None
    verification_runs: int
    num_steps: int


def is_verification(step: Step) -> bool:
    return bool(step.command) and VERIFY_RE.search(step.command or "") is not None


def verification_outcome(step: Step) -> bool | None:
    """Did this test/build run pass? Exit code first; the output's pass/fail counts when there is none."""
    if step.success is not None:
        return step.success
    if step.exit_code is not None:
        return step.exit_code == 0
    failed = sum(int(n) for n in _FAIL_COUNTS.findall(step.output or ""))
    passed = sum(int(n) for n in _PASS_COUNTS.findall(step.output or ""))
    if failed:
        return False
    return True if passed else None


def success_rate(steps: Sequence[Step]) -> float:
    known = [s.success for s in steps if s.success is not None]
    return sum(known) / len(known) if known else 0.0


def verification(steps: Sequence[Step]) -> tuple[float, bool | None, int]:
    outcomes = [o for o in (verification_outcome(s) for s in steps if is_verification(s)) if o is not None]
    if not outcomes:
        return 0.5, None, 0
    rate = sum(outcomes) / len(outcomes)
    last = outcomes[-1]
    return 0.5 * rate + 0.5 * (1.0 if last else 0.0), last, len(outcomes)


def _patterns(steps: Sequence[Step]) -> int:
    cmds = " \n".join(s.command or "" for s in steps)
    found = 0
    found += "|" in re.sub(r"\|\|", "", cmds)
    found += bool(re.search(r"&&|\|\||;", cmds))
    found += bool(re.search(r"(?<![<>=])>{1,2}\s*\S|<\s*\S|2>&1", cmds))
    found += bool(re.search(r"\b(?:for|while|until|if|case)\b", cmds))
    found += "$(" in cmds or "`" in cmds
    found += bool(re.search(r"\b(?:sed|awk|jq|xargs)\b|find\b.*-exec", cmds))
    edited = {s.input for s in steps if s.tool_name in EDIT_TOOLS}
    found += bool(edited)
    files = set()
    for s in steps:
        if s.tool_name in EDIT_TOOLS:
            m = re.search(r'"(?:file_path|notebook_path|path)"\s*:\s*"([^"]+)"', s.input or "")
            files.add(m.group(1) if m else s.input)
    found += len(files) >= 2
    found += any(is_verification(s) for s in steps)
    return found


def complexity(steps: Sequence[Step]) -> float:
    tools = len({s.tool_name for s in steps})
    return 0.4 * min(1.0, tools / 4) + 0.6 * min(1.0, _patterns(steps) / 6)


def length_score(n: int) -> float:
    if n <= 0:
        return 0.0
    return math.exp(-((math.log(n) - math.log(IDEAL_LENGTH)) ** 2) / 2)


def tool_diversity(steps: Sequence[Step]) -> float:
    return min(1.0, len({s.tool_name for s in steps}) / 3)


def efficiency(steps: Sequence[Step]) -> float:
    if not steps:
        return 0.0
    productive = 0
    prev: Step | None = None
    for s in steps:
        repeated = prev is not None and prev.tool_name == s.tool_name and prev.input == s.input
        if s.success is not False and not repeated:
            productive += 1
        prev = s
    huge = sum(len(s.output or "") > HUGE_OUTPUT for s in steps) / len(steps)
    return productive / len(steps) * (1 - 0.5 * huge)


def score_steps(steps: Sequence[Step]) -> SegmentScores:
    """The six metrics and the weighted total for one segment's steps."""
    rate = success_rate(steps)
    v_score, v_passed, v_runs = verification(steps)
    scores = {
        "success_score": rate,
        "verification_score": v_score,
        "complexity_score": complexity(steps),
        "length_score": length_score(len(steps)),
        "tool_diversity_score": tool_diversity(steps),
        "efficiency_score": efficiency(steps),
    }
    scores = {k: round(v, 4) for k, v in scores.items()}
    total = round(sum(WEIGHTS[k] * v for k, v in scores.items()), 4)
    return SegmentScores(
        **scores,
        quality_score=total,
        success_rate=round(rate, 4),
        verification_passed=v_passed,
        verification_runs=v_runs,
        num_steps=len(steps),
    )
