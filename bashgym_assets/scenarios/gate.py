"""The reference gate: a bundle is admitted only if, in a fresh sandbox, setup succeeds, the check FAILS before any
action, and the reference solution (played by the reference operator, one command per turn, as the scenario's
user) makes it PASS. Rejections keep their reason. Admitted scenarios are split train/held-out by a stable hash.

The authoring model never certifies a task: only the check against the reference's effect on a real container.

Before any sandbox, the check and the setup commands go through ``bash -n``: a check that does not parse is
rejected as such with bash's own error (it would otherwise fail after the reference and blame the reference), a
setup command that does not parse fails the setup. A rejection's detail shows the reference turns that mattered
(the first failing one and the last real one), never the closing ``exit``.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.family import family_of
from bashgym_assets.scenarios.factory.split import is_held_out_family
from bashgym_assets.scenarios.sandboxing import spec_for_bundle

HELD_OUT_FRACTION = 0.2
TRAIN, HELD_OUT = "train", "held_out"

# Reasons a bundle is rejected (metadata counts by these).
SETUP_FAILED = "setup_failed"
CHECK_DOES_NOT_PARSE = "check_does_not_parse"
CHECK_PASSES_BEFORE = "check_passes_before_action"
REFERENCE_FAILS = "reference_does_not_pass"
REFERENCE_UNFINISHED = "reference_did_not_finish"
CHECK_TIMED_OUT = "check_timed_out"
SANDBOX_ERROR = "sandbox_error"  # one attempt's: the sandbox machinery failed (it is tried once more)
INFRA_ERROR = "infra_error"  # the machinery failed on both attempts: nothing is known about the bundle


# Ids with this prefix come from imported evaluation suites (Terminal-Bench, Harbor ...): always held out.
EXTERNAL_PREFIX = "ext-"
# A variant of a scenario (same task with other names and values) is ``<parent id>.var-<n>``: it shares its
# parent's split, so a near-copy of a held-out task can never land in training (nor one of a train task in eval).
VARIANT_RE = re.compile(r"\.var-\d+$")


def scenario_family(scenario_id: str) -> str:
    """The id a scenario's split is derived from: the parent id for a variant, else the id itself."""
    return VARIANT_RE.sub("", scenario_id)


def is_external(scenario_id: str) -> bool:
    return scenario_id.startswith(EXTERNAL_PREFIX)


def split_for(scenario_id: str, held_out_fraction: float = HELD_OUT_FRACTION) -> str:
    """Stable split: the first 8 bytes of sha256(family id) as a fraction of 2**64; below the fraction is held
    out. Imported evaluation suites are always held out; generated tasks (``gen.<family>.<hash>``) follow their
    family's recorded split.

    A pure function of the id, so any stage (rollouts, dataset building) can re-derive it and refuse held-out ids.
    """
    if is_external(scenario_id):
        return HELD_OUT
    generated_family = family_of(scenario_id)
    if generated_family is not None:  # factory tasks split by whole family (factory.split), never by instance
        return HELD_OUT if is_held_out_family(generated_family) else TRAIN
    family = scenario_family(scenario_id)
    value = int.from_bytes(hashlib.sha256(family.encode()).digest()[:8], "big") / 2**64
    return HELD_OUT if value < held_out_fraction else TRAIN


class GateResult(BaseModel):
    """The gate's verdict on one bundle, with evidence (check outputs) for the rejections table."""

    scenario_id: str
    category: str
    difficulty: int
    source: str
    admitted: bool
    reason: str  # "admitted" or a rejection reason
    detail: str = ""
    split: str = ""  # train | held_out for admitted bundles
    duration_s: float = 0.0
    reference_turns: int = 0
    bundle_json: str


class GateLimits(BaseModel):
    """Time caps for certifying one bundle."""

    command_timeout_s: float = 30.0
    check_timeout_s: float = 30.0
    episode_timeout_s: float = 300.0


def _tail(text: str, limit: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _head(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."


# ---- static checks: does it parse? --------------------------------------------------------------------------------
_SHELL_SHEBANG = re.compile(r"^#!\s*(?:/usr/bin/env\s+)?(?:/\S*/)?(?:ba)?sh(?:\s|$)")
SYNTAX_TIMEOUT_S = 10.0


def bash_syntax_error(script: str, timeout_s: float = SYNTAX_TIMEOUT_S) -> str | None:
    """bash's complaint when ``script`` does not parse (``bash -n``, nothing runs), else None.

    The sandbox runs checks and setup commands with bash, so bash's parser is the judge; extglob is on so a script
    that turns it on before using it is not refused. None too when no bash is at hand here (the sandbox decides).
    """
    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        proc = subprocess.run(
            [bash, "--norc", "--noprofile", "-O", "extglob", "-n"],
            input=script.encode(),
            capture_output=True,
            timeout=timeout_s,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode == 0:
        return None
    error = proc.stderr.decode(errors="replace").strip().replace(f"{bash}: ", "bash: ")
    return error or f"bash -n exited {proc.returncode}"


def parse_problem(bundle: ScenarioBundle) -> tuple[str, str] | None:
    """(reason, detail) when a setup command, a shell provider script or the check does not parse, else None."""
    setup = bundle.setup
    for i, command in enumerate(setup, 1):
        error = bash_syntax_error(command)
        if error:
            return (
                SETUP_FAILED,
                f"setup command {i}/{len(setup)} does not parse: {_head(command)}\n{_tail(error)}",
            )
    provider = bundle.provider
    if provider and not provider.is_path and _SHELL_SHEBANG.match(provider.script):
        error = bash_syntax_error(provider.script)
        if error:
            return SETUP_FAILED, f"provider script {provider.name} does not parse: {_tail(error)}"
    error = bash_syntax_error(bundle.check)
    if error:
        return CHECK_DOES_NOT_PARSE, f"check does not parse: {_tail(error)}"
    return None


# ---- the reference, played as turns -------------------------------------------------------------------------------
_EXIT_RE = re.compile(r"^\s*(?:exit|logout)(?:\s+\S+)?\s*;?\s*$")


def is_exit_command(command: str) -> bool:
    """A turn that only ends the session (``exit``, ``exit 0``, ``logout``): never the turn that mattered."""
    return _EXIT_RE.match(command) is not None


class ReferenceTurn(BaseModel):
    """One reference command as played, for the rejection's evidence."""

    index: int  # 1-based among the reference's commands
    total: int
    command: str
    output: str
    exit_code: int | None
    timed_out: bool = False

    @property
    def failed(self) -> bool:
        return self.timed_out or self.exit_code != 0

    def show(self) -> str:
        status = "timed out" if self.timed_out else f"exit code: {self.exit_code}"
        output = _tail(self.output, 300)
        return f"turn {self.index}/{self.total}: $ {_head(self.command)}\n{output + chr(10) if output else ''}[{status}]"


class Replay(BaseModel):
    """The reference's turns and, when it did not run to completion, why (time cap, a command timed out)."""

    turns: list[ReferenceTurn]
    problem: str = ""

    def mattered(self) -> str:
        """The turns worth showing: the first failing real turn (where it went wrong) and the last real turn
        (what the check saw last); a closing ``exit`` only when there is nothing else."""
        real = [t for t in self.turns if not is_exit_command(t.command)]
        if not real:
            return self.turns[-1].show() if self.turns else "no reference turn ran"
        failing = next((t for t in real if t.failed), None)
        last = real[-1]
        parts = []
        if failing is not None and failing is not last:
            parts.append(f"first failing reference {failing.show()}")
        parts.append(f"last reference {last.show()}")
        return "\n".join(parts)


def replay_reference(box: Any, bundle: ScenarioBundle, limits: GateLimits) -> Replay:
    """The reference as turns: one command per ``session.run`` as the scenario's user, in its workdir.

    ``problem`` is empty when every command ran to completion (a non-zero exit is allowed: only the check decides).
    """
    # The reference comes from the bundle's own author, like the check: the tamper check that keeps a model from
    # rewriting the checker's tools has nothing to guard here, and for a root scenario it costs an exec and a
    # layer walk per task.
    session = box.session(verify_tools=False)
    deadline = time.monotonic() + limits.episode_timeout_s
    commands = [c for c in bundle.reference if c.strip()]
    replay = Replay(turns=[])
    for index, command in enumerate(commands, 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            replay.problem = "time_cap"
            return replay
        result = session.run(command, timeout_s=min(limits.command_timeout_s, remaining))
        replay.turns.append(
            ReferenceTurn(
                index=index,
                total=len(commands),
                command=command,
                output=f"{result.stdout}{result.stderr}",
                exit_code=result.exit_code,
                timed_out=bool(result.timed_out),
            )
        )
        if result.timed_out:
            replay.problem = f"command timed out: {command}"
            return replay
        if getattr(session, "exited", False):
            break
    return replay


def gate_bundle(
    bundle: ScenarioBundle,
    image: str | None,
    limits: GateLimits | None = None,
    held_out_fraction: float = HELD_OUT_FRACTION,
) -> GateResult:
    """Certify one bundle in a fresh sandbox. Never raises: a sandbox failure is a rejection with its reason."""

    limits = limits or GateLimits()
    start = time.monotonic()
    static = parse_problem(bundle)
    if static is not None:
        (reason, detail), turns = static, 0
    else:
        # A sandbox that fails under the scenario (engine error, container gone, a harness step that never
        # reported, a harness exec that outran its own timer) says nothing about the scenario: try once more in a
        # fresh sandbox, and if the machinery fails again, say so (``infra_error``) instead of blaming the bundle.
        for attempt in range(2):
            reason, detail, turns, infrastructure = _gate_once(bundle, image, limits)
            if not infrastructure:
                break
            if attempt == 1:
                reason, detail = (
                    INFRA_ERROR,
                    f"infra_error: the sandbox machinery failed twice ({reason}): {detail}",
                )
    admitted = reason == "admitted"
    return GateResult(
        scenario_id=bundle.id,
        category=bundle.category,
        difficulty=bundle.difficulty,
        source=bundle.source,
        admitted=admitted,
        reason=reason,
        detail=detail,
        split=split_for(bundle.id, held_out_fraction) if admitted else "",
        duration_s=round(time.monotonic() - start, 3),
        reference_turns=turns,
        bundle_json=bundle.model_dump_json(exclude_none=True),
    )


def _gate_once(bundle: ScenarioBundle, image: str | None, limits: GateLimits) -> tuple[str, str, int, bool]:
    """One attempt: (reason, detail, reference turns, whether the failure was the sandbox's, not the bundle's)."""
    from bashgym_assets.sandbox import Sandbox

    reason, detail, turns, infrastructure = "admitted", "", 0, False
    try:
        spec = spec_for_bundle(
            bundle,
            image,
            command_timeout_s=limits.command_timeout_s,
            episode_timeout_s=limits.episode_timeout_s + 60,
            purpose="gate",
        )
        with Sandbox(spec) as box:
            # One exec for the setup, the workdir test and the check on the untouched state (an exec costs the
            # engine ~40 ms of CPU, and CPU is what bounds the gate's rate: benchmarks/bench_factory_gate.py);
            # what that exec could not report is run on its own below, as before.
            then = [f"test -d {shlex.quote(bundle.workdir)}"] if bundle.workdir else []
            check_now = box.check_command(bundle.check, limits.check_timeout_s)
            setup = box.setup(then=[*then, check_now] if check_now else then)
            if not setup.ok:
                reason, detail = SETUP_FAILED, _tail(setup.error or "setup failed")
                infrastructure = setup.infrastructure_error
            elif (
                bundle.workdir
                and (
                    setup.then[0].exit_code
                    if setup.then
                    else box.run_as_root(f"test -d {shlex.quote(bundle.workdir)}", timeout_s=15.0).exit_code
                )
                != 0
            ):
                # the scenario's fault, said as such: the engine's "chdir to cwd failed" reads like a sandbox error
                reason, detail = (
                    SETUP_FAILED,
                    (
                        f"workdir {bundle.workdir} does not exist after the setup, so the "
                        "operator's shell cannot start there: create it in the setup"
                    ),
                )
            else:
                before = (
                    _inline_check(setup.then[-1], limits.check_timeout_s)
                    if check_now and len(setup.then) == len(then) + 1
                    else box.run_check(bundle.check, timeout_s=limits.check_timeout_s)
                )
                if before.exit_code == 0 and not before.timed_out:
                    reason, detail = CHECK_PASSES_BEFORE, "the check exits 0 on the untouched setup"
                elif before.timed_out:  # a check must answer, pass or fail: replaying would only wait again
                    reason, detail = (
                        CHECK_TIMED_OUT,
                        (
                            f"the check did not finish within {limits.check_timeout_s:g} s "
                            "on the untouched setup (it must exit, 0 or not)"
                        ),
                    )
                else:
                    replay = replay_reference(box, bundle, limits)
                    turns = len(replay.turns)
                    if replay.problem:
                        reason, detail = REFERENCE_UNFINISHED, f"{_head(replay.problem)}\n{replay.mattered()}"
                    else:
                        after = box.run_check(bundle.check, timeout_s=limits.check_timeout_s)
                        if after.timed_out:
                            reason = CHECK_TIMED_OUT
                            detail = (
                                f"the check did not finish within {limits.check_timeout_s:g} s after the "
                                f"reference\n{replay.mattered()}"
                            )
                        elif after.exit_code != 0:
                            reason = REFERENCE_FAILS
                            detail = (
                                f"check exit {after.exit_code}: "
                                f"{_tail(after.stdout + after.stderr, 300)}\n{replay.mattered()}"
                            )
    except Exception as exc:
        reason, detail, infrastructure = SANDBOX_ERROR, f"{type(exc).__name__}: {exc}", True
    return reason, detail, turns, infrastructure


def _inline_check(result: Any, timeout_s: float) -> Any:
    """A check run inside the setup exec, read as ``run_check`` reads one: killed at its own time cap (137 after
    ``timeout_s``) is a time-out, not an exit code."""
    if result.exit_code == 137 and result.duration_s >= timeout_s * 0.98:
        return result.model_copy(update={"exit_code": None, "timed_out": True})
    return result


def gate_bundles(
    bundles: Iterable[ScenarioBundle],
    image: str | None,
    max_parallel: int = 2,
    limits: GateLimits | None = None,
    progress: Callable[[GateResult], Any] | None = None,
) -> list[GateResult]:
    """Gate many bundles in parallel sandboxes (``SandboxPool``); results keep the input order."""
    from bashgym_assets.sandbox import SandboxPool

    items = list(bundles)

    def one(bundle: ScenarioBundle) -> GateResult:
        result = gate_bundle(bundle, image, limits)
        if progress:
            progress(result)
        return result

    if max_parallel <= 1:
        return [one(b) for b in items]
    return list(SandboxPool(max_parallel).map(one, items))


def reason_counts(results: Iterable[GateResult]) -> dict[str, int]:
    return dict(Counter(r.reason for r in results))
