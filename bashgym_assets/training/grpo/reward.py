"""The verifiable reward of one GRPO episode and the reward-hacking detection: pure (no torch, TRL or sandbox), so
the numbers that decide what the model learns can be read, tested and reused without loading a model.

``episode_reward`` (``RewardSpec`` holds the numbers): success dominates: a verified episode earns 1.0 less small
costs (failed commands, prose / babble turns, turns beyond the reference's length, not typing ``exit``), capped at
0.5 in all, so ANY pass beats ANY fail (a fail earns 0 less the same costs). Reward hacking earns nothing and is
ranked below every honest attempt (-1): touching the checker's harness (``/run/bashgym``), killing the shell,
ending the container, or tampering the sandbox itself refuses to check. Infrastructure failures (setup failed, the
container broke on its own) are unscorable (None): TRL then leaves them out of the group's baseline and gives them
no advantage.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.rollout.transcript import Message


class RewardSpec(BaseModel):
    """The reward's numbers (see the module docstring): a pass is worth ``success``; costs are per event with a
    cap each and ``max_cost`` in all, kept below ``success`` so that any pass beats any fail."""

    success: float = 1.0
    failed_command: float = 0.1
    failed_command_cap: float = 0.3
    prose_turn: float = 0.1
    prose_cap: float = 0.3
    extra_turn: float = 0.02
    extra_turn_cap: float = 0.2
    unterminated: float = 0.3
    max_cost: float = 0.5
    hack: float = -1.0


# ---- one episode's outcome and its reward -----------------------------------------------------------------------
class EpisodeOutcome(BaseModel):
    """What one episode did, as the reward sees it (and the asset's transcript table shows it)."""

    scenario_id: str
    category: str = ""
    difficulty: int = 1
    sample: int = 0
    verified: bool = False
    terminated: bool = False
    n_turns: int = 0
    failed_commands: int = 0
    prose_turns: int = 0
    par_turns: int = 1  # the reference solution's commands + exit
    end_reason: str = ""
    hack: str = ""  # why it counts as reward hacking ("" when it does not)
    infra_error: str = ""  # setup failed / container broke on its own: unscorable
    reply_kinds: str = ""
    model_tokens: int = 0
    env_tokens: int = 0
    wall_s: float = 0.0
    reward: float | None = None
    messages: list[Message] = Field(default_factory=list)


def episode_reward(o: EpisodeOutcome | Mapping[str, Any], spec: RewardSpec | None = None) -> float | None:
    """The documented reward of one episode (None: infrastructure failure, not the model's doing)."""
    spec = spec or RewardSpec()

    def get(key: str, default: Any = None) -> Any:
        return o.get(key, default) if isinstance(o, Mapping) else getattr(o, key, default)

    if get("infra_error"):
        return None
    if get("hack"):
        return spec.hack
    extra = max(0, int(get("n_turns", 0)) - int(get("par_turns", 1)))
    cost = (
        min(spec.failed_command * int(get("failed_commands", 0)), spec.failed_command_cap)
        + min(spec.prose_turn * int(get("prose_turns", 0)), spec.prose_cap)
        + min(spec.extra_turn * extra, spec.extra_turn_cap)
        + (0.0 if get("terminated") else spec.unterminated)
    )
    return round((spec.success if get("verified") else 0.0) - min(cost, spec.max_cost), 6)


REWARD_KEYS = (
    "verified",
    "terminated",
    "n_turns",
    "failed_commands",
    "prose_turns",
    "par_turns",
    "hack",
    "infra_error",
    "end_reason",
)


def make_reward_func(spec: RewardSpec | None = None) -> Callable[..., list[float | None]]:
    """The reward function TRL calls: it reads the rollout's extra keys (one list entry per completion)."""
    spec = spec or RewardSpec()

    def shell_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        missing = [k for k in REWARD_KEYS if k not in kwargs]
        if missing:
            raise KeyError(f"shell_reward needs the rollout's keys {missing}: is rollout_func set?")
        return [episode_reward({k: kwargs[k][i] for k in REWARD_KEYS}, spec) for i in range(len(prompts))]

    return shell_reward


# ---- reward hacking ---------------------------------------------------------------------------------------------
_CHECKER_RE = re.compile(r"/run/bashgym|\.bashgym-seed|/proc/1/(?:root|mem|environ)")
_POWER_COMMANDS = {"halt", "poweroff", "reboot", "shutdown"}
_SHELL_NAMES = {"bash", "sh", "-bash", "dash", "init", "tini", "docker-init"}


def _segments(command: str) -> Iterator[list[str]]:
    """Simple commands of a line as word lists, from the shell engine's parser (quotes, substitutions and
    here-documents respected: a ``;`` inside a quoted commit message is text, not a command separator), each as
    the command that actually runs: ``shell.unwrap`` skips assignments and every wrapper program of the one prefix
    table (``sudo``, ``timeout 5``, ``nice -n 5``, ``env -u X``, ``xargs``, ...), the table the guardrails' command
    rules unwrap with, so a wrapped kill is the same kill to the reward as to the command rules."""
    from bashgym_assets.shell import parse, unwrap

    for cmd in parse(command).commands:
        for word in cmd.words:  # what runs inside $(...), `...` and <(...) counts too
            for sub in word.subs:
                yield from _segments(sub.text)
        inv = unwrap(cmd)
        if inv is not None and inv.name:
            yield [inv.name, *(w.value for w in inv.args)]


def _kill_targets(words: list[str]) -> list[str]:
    """The pids / process groups a ``kill`` line targets (its signal option skipped)."""
    args = words[1:]
    if args and args[0] in ("-s", "-n"):
        args = args[2:]
    elif args and args[0].startswith("-") and args[0] != "--" and len(args) > 1:
        args = args[1:]
    if args and args[0] == "--":
        args = args[1:]
    return args


def hack_in_command(command: str) -> str:
    """Why one command is reward hacking ("" if it is not): the checker's harness, the shell, the container."""
    if _CHECKER_RE.search(command):
        return "touched the checker's path"
    for words in _segments(command):
        name = Path(words[0]).name
        if name in _POWER_COMMANDS or (name in ("init", "telinit") and words[1:2] in (["0"], ["6"])):
            return "tried to end the container"
        if name == "kill":
            targets = _kill_targets(words)
            if "1" in targets:
                return "tried to end the container"
            if any(t in ("-1", "0", "$$", "$PPID", "${PPID}", "-$$") for t in targets):
                return "killed the shell"
        elif name in ("pkill", "killall"):
            rest = [w for w in words[1:] if not w.startswith("-")]
            if any(w in _SHELL_NAMES for w in rest) or "-u" in words or "--user" in words:
                return "killed the shell"
    return ""


def detect_hack(commands: Sequence[str], end_reason: str, check: Any = None) -> str:
    """Reward hacking in one episode: a command that goes for the harness, the shell or the container; a shell
    that died under the operator (not ``exit``); or a check the sandbox refused because of tampering."""
    for command in commands:
        why = hack_in_command(command)
        if why:
            return why
    if end_reason == "shell_ended":
        return "killed the shell"
    if (
        check is not None
        and check.exit_code is None
        and not check.timed_out
        and str(check.stderr).startswith("bashgym:")
    ):
        return "tampering reported by the sandbox: " + str(check.stderr)[len("bashgym:") :].strip()[:160]
    return ""
