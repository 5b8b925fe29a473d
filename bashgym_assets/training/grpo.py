"""GRPO on live sandbox episodes: TRL's ``GRPOTrainer`` with a multi-turn ``rollout_func`` that plays whole
episodes in real sandboxes, and the verifiable reward that scores them.

Why a rollout function and not TRL's tool loop: the model here types ONE shell command per turn in the plain
chat format every other stage uses (``rollout.transcript``), which TRL's tool-calling templates do not speak. TRL
1.16 lets ``rollout_func(prompts, trainer)`` return the token ids itself (``prompt_ids``, ``completion_ids``,
``logprobs`` = None without vLLM) plus ``env_mask`` (1 = the model's tokens, 0 = what the terminal printed, which
then carries no loss); every other key it returns reaches the reward functions as a keyword argument.

One prompt = one train scenario id; the trainer repeats it ``num_generations`` times (the group). For a whole
generation batch (every group of the optimizer step) fresh sandboxes are opened in parallel, the episodes advance
in lockstep with ONE batched, sampled generation per turn on the policy being trained (unwrapped, eval mode, no
grad), each command runs in its own sandbox in parallel, a command that outlives the turn deadline cuts its
episode off without stalling the others, and the check runs on each final state. The opening, the turn logic and
the check are the evaluator's (``evaluation.runner``), so the episode the model is rewarded for is exactly the
episode it is later evaluated on.

The reward (``episode_reward``; ``RewardSpec`` holds the numbers): success dominates: a verified episode earns
1.0 less small costs (failed commands, prose / babble turns, turns beyond the reference's length, not typing
``exit``), capped at 0.5 in all, so ANY pass beats ANY fail (a fail earns 0 less the same costs). Reward hacking
earns nothing and is ranked below every honest attempt (-1): touching the checker's harness (``/run/bashgym``),
killing the shell, ending the container, or tampering the sandbox itself refuses to check. Infrastructure
failures (setup failed, the container broke on its own) are unscorable (None): TRL then leaves them out of the
group's baseline and gives them no advantage. Groups whose episodes all pass or all fail carry no success signal
(only the shaping separates them): they are counted per step, and the ``InformativeSampler`` prefers scenarios
whose pass rate so far is closest to one half.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bashgym_assets.inference.turns import end_of_turn_id
from bashgym_assets.rollout.episode import EpisodeLimits
from bashgym_assets.rollout.live import LiveEpisode, apply_reply, check_and_close, open_episode
from bashgym_assets.rollout.operators import LocalModelOperator, ReferenceOperator, Reply
from bashgym_assets.rollout.transcript import (
    SYNTAX_ERROR,
    UNUSABLE,
    Message,
    as_dicts,
    initial_messages,
)
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.training.trainer import (
    LogFn,
    TrainConfig,
    TrainResult,
    history_from_log,
    load_base,
    load_tokenizer,
    pick_device,
    progress_callbacks,
    publish_adapter,
    resume_point,
    trainable_parameters,
    trainer_args,
    without_printer,
)

logger = logging.getLogger(__name__)
Progress = Callable[[str], None]


# ---- settings ---------------------------------------------------------------------------------------------------
class GRPOSettings(BaseModel):
    """What a GRPO run plays: group size, groups per optimizer step, episode caps, sampling, the sampler."""

    num_generations: int = 4  # episodes per scenario (the group whose rewards are compared)
    scenarios_per_step: int = 2  # groups per optimizer step (all played together, in lockstep)
    max_turns: int = 6
    max_new_tokens: int = 64  # per reply
    max_context_tokens: int = 2048  # prompt + episode; an episode that would outgrow it ends (unterminated)
    temperature: float = 0.8
    top_p: float = 1.0
    command_timeout_s: float = 10.0
    turn_timeout_s: float = 30.0  # a command still running after this is cut off with its episode
    episode_timeout_s: float = 120.0  # sandbox time per episode
    check_timeout_s: float = 30.0
    max_unusable_in_a_row: int | None = 3
    setup_workers: int = 4
    micro_batch: int = 16  # sequences per generate call
    beta: float = 0.0  # KL to the SFT model (0: no reference forward pass, TRL's default)
    prefer_informative: bool = True
    # A curriculum by difficulty: draw only scenarios up to a ceiling that starts at the easiest difficulty and
    # rises by one when the last ``ladder_window`` scored episodes under it pass at ``ladder_promote_at`` or more.
    difficulty_ladder: bool = False
    ladder_promote_at: float = 0.5
    ladder_window: int = 16


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
    get = o.get if isinstance(o, Mapping) else (lambda k, d=None: getattr(o, k, d))
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
    """Simple commands of a line as word lists, from the guardrails' shell parser (quotes, substitutions and
    here-documents respected: a ``;`` inside a quoted commit message is text, not a command separator)."""
    from bashgym_assets.guardrails.shell import parse

    for cmd in parse(command).commands:
        for word in cmd.words:  # what runs inside $(...), `...` and <(...) counts too
            for sub in word.subs:
                yield from _segments(sub.text)
        words = [w.value for w in cmd.words]
        while words and (
            "=" in words[0] or words[0] in ("sudo", "command", "exec", "nohup", "env", "builtin")
        ):
            words = words[1:]
        if words:
            yield words


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


# ---- tokens ---------------------------------------------------------------------------------------------------
_SENTINEL = "\u2063BASHGYM-REPLY\u2063"


def prompt_token_ids(tokenizer: Any, bundle: ScenarioBundle) -> list[int]:
    """The episode's opening (orientation + task, no scaffold) in the chat template, up to the assistant turn."""
    out = tokenizer.apply_chat_template(
        as_dicts(initial_messages(bundle)), add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    return list(out[0] if out and isinstance(out[0], list) else out)


def observation_token_ids(
    tokenizer: Any, seen: Sequence[Message], observation: str, ended: bool
) -> list[int]:
    """What the template puts between the model's reply and its next turn: the end of the reply turn (its
    end-of-turn token only when the model did not type it itself: ``ended``), the observation as a user turn, and
    the next assistant header. Rendered by the chat template with a placeholder reply, so it is byte-for-byte the
    render everything else uses; special tokens delimit it, so tokenising it alone gives the same ids."""
    msgs = [
        *as_dicts(list(seen)),
        {"role": "assistant", "content": _SENTINEL},
        {"role": "user", "content": observation},
    ]
    text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    tail = text.split(_SENTINEL, 1)[1]
    if ended:
        eot = tokenizer.convert_ids_to_tokens(end_of_turn_id(tokenizer))
        if eot and tail.startswith(eot):
            tail = tail[len(eot) :]
    return list(tokenizer(tail, add_special_tokens=False)["input_ids"])


class Policy:
    """Batched sampling from a causal LM on exact token ids (``LocalModelOperator.generate_tokens``): the model is
    put in eval mode for the call and restored afterwards (dropout off while sampling; no grad)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_new_tokens: int = 64,
        temperature: float = 0.8,
        top_p: float = 1.0,
        micro_batch: int = 16,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.op = LocalModelOperator(
            model=model,
            tokenizer=tokenizer,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            kv_cache=False,
            micro_batch=micro_batch,
            name="grpo-policy",
        )
        self.stop_ids = set(self.op._stop_ids(tokenizer))

    def generate(self, prompts: list[list[int]]) -> list[list[int]]:
        was_training = self.model.training
        self.model.eval()
        try:
            order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
            out: list[list[int]] = [[] for _ in prompts]
            for k in range(0, len(order), self.op.micro_batch):
                chunk = order[k : k + self.op.micro_batch]
                for i, new in zip(
                    chunk,
                    self.op.generate_tokens(self.model, self.tokenizer, [prompts[i] for i in chunk]),
                    strict=True,
                ):
                    out[i] = new
            return out
        finally:
            if was_training:
                self.model.train()


def split_reply(policy: Any, new: list[int]) -> tuple[list[int], Reply]:
    """The model's tokens of one turn (up to and including its end-of-turn token; padding dropped) and the reply
    text the shell gets (``truncated`` when the token cap, not the model, ended it)."""
    ended = next((i for i, t in enumerate(new) if t in policy.stop_ids), None)
    tokens = new[: ended + 1] if ended is not None else list(new)
    body = new[:ended] if ended is not None else list(new)
    text = policy.tokenizer.decode(body, skip_special_tokens=True).strip()
    return tokens, Reply(text=text, truncated=ended is None, new_tokens=len(body))


# ---- playing a batch of episodes ----------------------------------------------------------------------------------
class _Recording:
    """The operator's shell with every command's result kept, with the kind of reply it came from (failed commands
    cost reward; a prose reply the shell also ran is charged as prose only, not twice)."""

    def __init__(self, session: Any, lines: list[Any]) -> None:
        self._session = session
        self._lines = lines
        self.results: list[tuple[str, Any]] = []

    def run(self, command: str, **kwargs: Any) -> Any:
        kind = self._lines[-1].kind if self._lines else ""
        result = self._session.run(command, **kwargs)
        self.results.append((kind, result))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class PlayedEpisode(BaseModel):
    """One episode as TRL trains on it (token ids and env mask) and as the reward scores it."""

    outcome: EpisodeOutcome
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]


_UNSCAFFOLDED = ReferenceOperator()  # what ``open_episode`` asks of an operator: that it is not scaffolded


def _limits(s: GRPOSettings) -> EpisodeLimits:
    return EpisodeLimits(
        max_turns=s.max_turns,
        episode_timeout_s=s.episode_timeout_s,
        command_timeout_s=s.command_timeout_s,
        check_timeout_s=s.check_timeout_s,
        max_unusable_in_a_row=s.max_unusable_in_a_row or 0,
    )


def play_episodes(
    bundles: Sequence[ScenarioBundle],
    policy: Any,
    image: str | None,
    settings: GRPOSettings,
    samples: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> list[PlayedEpisode]:
    """Every bundle's episode (a bundle listed G times = a group of G), played in lockstep with one batched
    generation per turn; results in input order. Never raises for one episode."""
    say = progress or (lambda _m: None)
    tok = policy.tokenizer
    limits = _limits(settings)
    jobs = [
        LiveEpisode(bundle=b, sample_index=(samples[i] if samples else i), operator=_UNSCAFFOLDED)
        for i, b in enumerate(bundles)
    ]
    start = time.monotonic()
    prompt_ids = [prompt_token_ids(tok, j.bundle) for j in jobs]
    completion: list[list[int]] = [[] for _ in jobs]
    mask: list[list[int]] = [[] for _ in jobs]
    hung: dict[int, int] = {}  # cut-off episode -> how many of its commands had finished when it was cut off
    pool = ThreadPoolExecutor(max_workers=max(1, min(len(jobs), 16)), thread_name_prefix="grpo-act")
    turn = 0
    try:
        # inside the try: an exception during setup also closes the containers already opened
        with ThreadPoolExecutor(max_workers=settings.setup_workers, thread_name_prefix="grpo-setup") as ex:
            list(ex.map(lambda j: open_episode(j, image, limits), jobs))
        for j in jobs:
            if j.driver is not None:
                j.driver.session = _Recording(j.driver.session, j.driver.lines)
        while True:
            asking = [
                i
                for i, j in enumerate(jobs)
                if i not in hung and j.driver is not None and not j.sandbox_error and j.driver.wants_reply()
            ]
            if not asking:
                break
            turn += 1
            t0 = time.monotonic()
            news = policy.generate([prompt_ids[i] + completion[i] for i in asking])
            gen_s = time.monotonic() - t0
            before = {i: list(jobs[i].driver.seen) for i in asking}
            futures = {}
            for i, new in zip(asking, news, strict=True):
                tokens, reply = split_reply(policy, new)
                completion[i] += tokens
                mask[i] += [1] * len(tokens)
                futures[pool.submit(apply_reply, jobs[i], reply)] = (i, tokens)
            _, late = wait(futures, timeout=settings.turn_timeout_s)
            for f in late:  # cut off: its container goes now, which also ends the command it is stuck in
                i = futures[f][0]
                hung[i] = len(getattr(jobs[i].driver.session, "results", []))
                threading.Thread(target=jobs[i].box.close, name="grpo-cutoff", daemon=True).start()
            for f, (i, tokens) in futures.items():
                if f in late:
                    continue
                j = jobs[i]
                seen = j.driver.seen
                if (
                    j.driver.done
                    or j.sandbox_error
                    or len(seen) != len(before[i]) + 2
                    or j.driver.episode.n_turns >= settings.max_turns
                ):
                    continue
                ended = bool(tokens) and tokens[-1] in policy.stop_ids
                obs = observation_token_ids(tok, before[i], seen[-1].content, ended)
                if (
                    len(prompt_ids[i]) + len(completion[i]) + len(obs) + settings.max_new_tokens
                    > settings.max_context_tokens
                ):
                    j.driver.done = True
                    j.driver.episode.end_reason = "context_cap"
                    continue
                completion[i] += obs
                mask[i] += [0] * len(obs)
            say(
                f"turn {turn}: {len(asking)} live episodes, generation {gen_s:.1f} s"
                + (f", {len(hung)} cut off" if hung else "")
            )
        finished = [j for i, j in enumerate(jobs) if i not in hung]
        with ThreadPoolExecutor(
            max_workers=max(1, min(len(finished), 16)), thread_name_prefix="grpo-check"
        ) as ex:
            verdicts = dict(
                zip(
                    [id(j) for j in finished],
                    ex.map(lambda j: check_and_close(j, settings.check_timeout_s), finished),
                    strict=True,
                )
            )
    except BaseException:
        for j in jobs:  # a failed generation must not leave the batch's containers behind
            if j.box is not None:
                j.box.close()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    out = []
    wall = time.monotonic() - start
    for i, j in enumerate(jobs):
        o = _outcome(j, i in hung, verdicts.get(id(j), False), hung.get(i))
        o.wall_s = round(wall, 3)
        ids = completion[i]
        env = mask[i]
        if not ids:  # never got a turn (setup failed): one masked token so the batch keeps its shape
            ids, env = [end_of_turn_id(tok)], [0]
        o.model_tokens, o.env_tokens = sum(env), len(env) - sum(env)
        out.append(PlayedEpisode(outcome=o, prompt_ids=prompt_ids[i], completion_ids=ids, env_mask=env))
    return out


def _outcome(
    job: LiveEpisode, hung: bool, verified: bool, finished_commands: int | None = None
) -> EpisodeOutcome:
    b = job.bundle
    o = EpisodeOutcome(
        scenario_id=b.id,
        category=b.category,
        difficulty=b.difficulty,
        sample=job.sample_index,
        par_turns=len(b.reference) + 1,
    )
    if job.setup_error:
        o.infra_error, o.end_reason = f"setup failed: {job.setup_error}", "setup_failed"
        return o
    driver = job.driver
    if driver is None:
        o.infra_error, o.end_reason = job.sandbox_error or "no sandbox", "sandbox_error"
        return o
    lines = list(driver.lines)
    episode = driver.finish() if not hung else driver.episode
    results = list(getattr(driver.session, "results", []))
    if hung:  # what the cut-off command "returned" after we removed its container is not its doing
        results = results[: finished_commands or 0]
    commands = [line.command for line in lines if line.command]
    o.n_turns = episode.n_turns
    o.reply_kinds = ",".join(line.kind for line in lines)
    o.prose_turns = sum(line.kind in UNUSABLE for line in lines)
    o.failed_commands = (
        sum(r.exit_code != 0 for kind, r in results if kind not in UNUSABLE)
        + sum(line.kind == SYNTAX_ERROR for line in lines)
        + int(hung)
    )  # the hung one failed
    o.messages = list(episode.messages)
    o.end_reason = "hung" if hung else episode.end_reason
    o.terminated = episode.terminated and not hung
    o.verified = verified and not hung
    o.hack = detect_hack(commands, o.end_reason, job.check)
    if job.sandbox_error and not o.hack and not hung:  # it broke on its own (a cut-off one was closed by us)
        o.infra_error, o.end_reason = job.sandbox_error, "sandbox_error"
    return o


# ---- group statistics and the sampler -----------------------------------------------------------------------------
class GroupRecord(BaseModel):
    """One scenario's group at one step: the success split that says whether it can teach anything."""

    step: int
    scenario_id: str
    category: str
    difficulty: int
    n: int
    passed: int
    hacks: int
    infra: int
    mean_reward: float | None
    reward_spread: float  # max - min reward: 0 means no advantage at all for this group
    kind: str  # mixed | all_pass | all_fail | unscorable


def group_records(step: int, outcomes: Sequence[EpisodeOutcome]) -> list[GroupRecord]:
    groups: dict[str, list[EpisodeOutcome]] = {}
    for o in outcomes:
        groups.setdefault(o.scenario_id, []).append(o)
    out = []
    for sid, members in groups.items():
        scored = [m for m in members if m.reward is not None]
        rewards = [float(m.reward) for m in scored]
        passed = sum(m.verified and not m.hack for m in scored)
        kind = (
            "unscorable"
            if not scored
            else "all_pass"
            if passed == len(scored)
            else "all_fail"
            if passed == 0
            else "mixed"
        )
        out.append(
            GroupRecord(
                step=step,
                scenario_id=sid,
                category=members[0].category,
                difficulty=members[0].difficulty,
                n=len(members),
                passed=passed,
                hacks=sum(bool(m.hack) for m in members),
                infra=sum(bool(m.infra_error) for m in members),
                mean_reward=round(sum(rewards) / len(rewards), 4) if rewards else None,
                reward_spread=round(max(rewards) - min(rewards), 4) if rewards else 0.0,
                kind=kind,
            )
        )
    return out


class StepRecord(BaseModel):
    """One optimizer step's episodes in numbers (the per-step curves in MLflow)."""

    step: int
    episodes: int
    reward_mean: float
    success_rate: float
    mean_turns: float
    informative_frac: float  # groups with both passes and fails
    difficulty_ceiling: int = 0  # the curriculum's ceiling after this step (0: no ladder)
    zero_spread_frac: float  # groups whose rewards are all equal (TRL gives them no advantage)
    terminated_rate: float
    hacks: int
    infra_errors: int
    rollout_s: float
    episodes_per_min: float


class ScenarioBoard:
    """Pass counts per scenario across the run: what the sampler reads to prefer informative scenarios, and, with
    ``difficulties`` and a ladder, the difficulty ceiling of a curriculum that rises as the pass rate does."""

    def __init__(
        self,
        scenario_ids: Sequence[str],
        difficulties: Mapping[str, int] | None = None,
        promote_at: float | None = None,
        window: int = 16,
    ) -> None:
        self.ids = list(scenario_ids)
        self.passes = dict.fromkeys(self.ids, 0)
        self.tries = dict.fromkeys(self.ids, 0)
        self.difficulty = {i: int((difficulties or {}).get(i, 1)) for i in self.ids}
        levels = sorted(set(self.difficulty.values()))
        self.ceiling: int | None = levels[0] if promote_at is not None and levels else None
        self.top = levels[-1] if levels else 1
        self.promote_at = promote_at
        self.window = window
        self.recent: list[bool] = []
        self.ceilings: list[int] = [self.ceiling] if self.ceiling is not None else []
        self._lock = threading.Lock()

    def record(self, outcomes: Sequence[EpisodeOutcome]) -> None:
        with self._lock:
            for o in outcomes:
                if o.reward is None or o.scenario_id not in self.tries:
                    continue
                passed = bool(o.verified and not o.hack)
                self.tries[o.scenario_id] += 1
                self.passes[o.scenario_id] += int(passed)
                if self.ceiling is not None and self.difficulty[o.scenario_id] <= self.ceiling:
                    self.recent = (self.recent + [passed])[-self.window :]
            self._climb()

    def _climb(self) -> None:
        if self.ceiling is None or self.promote_at is None or self.ceiling >= self.top:
            return
        if len(self.recent) >= self.window and sum(self.recent) / len(self.recent) >= self.promote_at:
            self.ceiling = min(d for d in set(self.difficulty.values()) if d > self.ceiling)
            self.ceilings.append(self.ceiling)
            self.recent = []

    def eligible(self) -> list[int]:
        """Indices of the scenarios the curriculum allows now (all of them without a ladder)."""
        with self._lock:
            if self.ceiling is None:
                return list(range(len(self.ids)))
            return [i for i, s in enumerate(self.ids) if self.difficulty[s] <= self.ceiling]

    def weight(self, scenario_id: str, floor: float = 0.02) -> float:
        """p(1-p) of the smoothed pass rate (Beta(1,1) prior): 0.25 for an unseen scenario or a coin flip,
        falling as a scenario shows it is always solved or never; ``floor`` keeps every scenario reachable."""
        with self._lock:
            p = (self.passes[scenario_id] + 1) / (self.tries[scenario_id] + 2)
        return p * (1 - p) + floor


class InformativeSampler:
    """TRL's ``RepeatSampler`` layout (each chunk of ``batch_size`` scenarios, each index ``mini_repeat_count``
    times, the chunk ``repeat_count`` times), but each chunk is drawn when it is needed, without replacement,
    weighted by ``ScenarioBoard.weight`` when ``prefer`` (uniform otherwise). The data loader fetches one batch
    ahead, so a chunk sees the statistics of all but the step just before it."""

    def __init__(
        self,
        board: ScenarioBoard,
        mini_repeat_count: int,
        batch_size: int,
        repeat_count: int,
        num_batches: int,
        prefer: bool = True,
        seed: int = 0,
    ) -> None:
        import torch

        self.board = board
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = min(batch_size, len(board.ids))
        self.repeat_count = repeat_count
        self.num_batches = max(1, num_batches)
        self.prefer = prefer
        self.generator = torch.Generator().manual_seed(seed)
        self.drawn: list[list[str]] = []

    def _chunk(self) -> list[int]:
        import torch

        allowed = self.board.eligible()
        if self.prefer:
            weights = torch.tensor([self.board.weight(self.board.ids[i]) for i in allowed], dtype=torch.float)
        else:
            weights = torch.ones(len(allowed))
        picks = torch.multinomial(
            weights, min(self.batch_size, len(allowed)), replacement=False, generator=self.generator
        ).tolist()
        picks = [allowed[i] for i in picks]
        while (
            len(picks) < self.batch_size
        ):  # fewer scenarios under the ceiling than a step takes: repeat some
            picks.append(picks[len(picks) % max(1, len(allowed))])
        return picks

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.num_batches):
            chunk = self._chunk()
            self.drawn.append([self.board.ids[i] for i in chunk])
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return self.num_batches * self.batch_size * self.mini_repeat_count * self.repeat_count


# ---- the rollout function -----------------------------------------------------------------------------------------
class ShellRollout:
    """``rollout_func`` for ``GRPOTrainer``: prompts are scenario ids; returns ids, env mask and reward keys, and
    keeps every step's statistics (``steps``, ``groups``) and a few transcripts for the report."""

    def __init__(
        self,
        bundles: Mapping[str, ScenarioBundle],
        image: str | None,
        settings: GRPOSettings,
        reward: RewardSpec | None = None,
        board: ScenarioBoard | None = None,
        progress: Progress | None = None,
        policy_factory: Callable[[Any], Any] | None = None,
    ) -> None:
        self.bundles = dict(bundles)
        self.image = image
        self.settings = settings
        self.reward = reward or RewardSpec()
        self.board = board or ScenarioBoard(sorted(self.bundles))
        self.say = progress or (lambda _m: None)
        self.policy_factory = policy_factory
        self.steps: dict[int, StepRecord] = {}
        self.groups: list[GroupRecord] = []
        self.transcripts: list[EpisodeOutcome] = []
        self.episodes_played = 0
        self.rollout_s = 0.0

    def _policy(self, trainer: Any) -> Policy:
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.policy_factory is not None:
            return self.policy_factory(model)
        s = self.settings
        return Policy(
            model,
            trainer.processing_class,
            max_new_tokens=s.max_new_tokens,
            temperature=s.temperature,
            top_p=s.top_p,
            micro_batch=s.micro_batch,
        )

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any] | None]:
        step = int(trainer.state.global_step) + 1
        bundles = [self.bundles[str(p)] for p in prompts]
        counts: dict[str, int] = {}
        samples = []
        for b in bundles:
            samples.append(counts.get(b.id, 0))
            counts[b.id] = samples[-1] + 1
        t0 = time.monotonic()
        played = play_episodes(
            bundles,
            self._policy(trainer),
            self.image,
            self.settings,
            samples=samples,
            progress=lambda m: self.say(f"step {step} {m}"),
        )
        took = time.monotonic() - t0
        outcomes = [p.outcome for p in played]
        for o in outcomes:
            o.reward = episode_reward(o, self.reward)
        self.record(step, outcomes, took)
        out: dict[str, list[Any] | None] = {
            "prompt_ids": [p.prompt_ids for p in played],
            "completion_ids": [p.completion_ids for p in played],
            "logprobs": None,
            "env_mask": [p.env_mask for p in played],
        }
        for key in REWARD_KEYS:
            out[key] = [getattr(o, key) for o in outcomes]
        return out

    def record(self, step: int, outcomes: list[EpisodeOutcome], took: float) -> StepRecord:
        groups = group_records(step, outcomes)
        self.groups += groups
        self.board.record(outcomes)
        scored = [o for o in outcomes if o.reward is not None]
        n = max(1, len(scored))
        self.episodes_played += len(outcomes)
        self.rollout_s += took
        rec = StepRecord(
            step=step,
            episodes=len(outcomes),
            reward_mean=round(sum(float(o.reward) for o in scored) / n, 4),
            success_rate=round(sum(o.verified and not o.hack for o in scored) / n, 4),
            mean_turns=round(sum(o.n_turns for o in scored) / n, 3),
            informative_frac=round(sum(g.kind == "mixed" for g in groups) / max(1, len(groups)), 4),
            difficulty_ceiling=self.board.ceiling or 0,
            zero_spread_frac=round(sum(g.reward_spread == 0 for g in groups) / max(1, len(groups)), 4),
            terminated_rate=round(sum(o.terminated for o in scored) / n, 4),
            hacks=sum(bool(o.hack) for o in outcomes),
            infra_errors=sum(bool(o.infra_error) for o in outcomes),
            rollout_s=round(took, 2),
            episodes_per_min=round(60 * len(outcomes) / took, 2) if took > 0 else 0.0,
        )
        self.steps[step] = rec
        # keep the best and the worst episode of each step (the report shows the last few)
        ranked = sorted(scored, key=lambda o: float(o.reward))
        self.transcripts += [ranked[-1], ranked[0]] if len(ranked) > 1 else ranked
        self.transcripts = self.transcripts[-6:]
        self.say(
            f"step {step}: {len(outcomes)} episodes in {took:.0f} s, mean reward {rec.reward_mean:+.3f}, "
            f"success {rec.success_rate:.0%}, {rec.mean_turns:.1f} turns, informative groups "
            f"{sum(g.kind == 'mixed' for g in groups)}/{len(groups)}"
            + (f", {rec.hacks} hack(s)" if rec.hacks else "")
            + (f", {rec.infra_errors} infra" if rec.infra_errors else "")
        )
        return rec


# ---- the scenarios it trains on -------------------------------------------------------------------------------
def train_bundles(
    gated_rows: Sequence[Mapping[str, Any]],
    limit: int | None = None,
    categories: Sequence[str] = (),
    max_difficulty: int | None = None,
) -> list[ScenarioBundle]:
    """The admitted TRAIN scenarios of ``gated_scenarios`` (held-out ones never reach training), by id; optionally
    a category subset and a difficulty ceiling (a curriculum starts easy)."""
    import json

    from bashgym_assets.scenarios.gate import TRAIN

    out = []
    for row in gated_rows:
        if row.get("admitted") is False or row.get("split") != TRAIN:
            continue
        bundle = ScenarioBundle.model_validate(json.loads(row["bundle_json"]))
        if (categories and bundle.category not in categories) or (
            max_difficulty is not None and bundle.difficulty > max_difficulty
        ):
            continue
        out.append(bundle)
    out.sort(key=lambda b: b.id)
    return out[:limit] if limit else out


# ---- training -----------------------------------------------------------------------------------------------------
class GRPORun(BaseModel):
    """A finished GRPO run: the training result (history = per-step rows), the groups and a few transcripts."""

    result: TrainResult
    steps: list[StepRecord]
    groups: list[GroupRecord]
    transcripts: list[EpisodeOutcome]


def progress_line(row: Mapping[str, float]) -> str:
    """``step 3/10: mean reward +0.412 success 38% turns 3.2 informative 50% loss 0.0123 ETA 4m10s``."""
    n = f"{int(row['step'])}/{int(row['total_steps'])}" if "total_steps" in row else f"{int(row['step'])}"
    eta = row.get("eta_s")
    tail = f" ETA {int(eta // 60)}m{int(eta % 60):02d}s" if eta is not None else ""
    parts = [f"step {n}:"]
    if "reward_mean" in row:
        parts.append(
            f"mean reward {row['reward_mean']:+.3f} success {row.get('success_rate', 0.0):.0%} "
            f"turns {row.get('mean_turns', 0.0):.1f} informative {row.get('informative_frac', 0.0):.0%}"
        )
    if "loss" in row:
        parts.append(f"loss {row['loss']:.4f}")
    return " ".join(parts) + tail


def grpo_train_config(config: TrainConfig, settings: GRPOSettings) -> TrainConfig:
    """One group per micro-batch, ``scenarios_per_step`` micro-batches per optimizer step (TRL generates the whole
    step's episodes in one call, so they share every batched generation)."""
    return config.model_copy(
        update={"batch_size": settings.num_generations, "grad_accum": settings.scenarios_per_step}
    )


def train_grpo(
    config: TrainConfig,
    settings: GRPOSettings,
    bundles: Sequence[ScenarioBundle],
    sft_adapter: str,
    image: str | None,
    reward: RewardSpec | None = None,
    on_log: LogFn | None = None,
    progress: Progress | None = None,
) -> GRPORun:
    """GRPO from the SFT adapter (``PeftModel``, trainable) on the train scenarios ``bundles``, in real sandboxes.
    ``config.max_steps`` optimizer steps (required: an epoch over scenarios means nothing here)."""
    import os

    from datasets import Dataset
    from peft import PeftModel
    from trl import GRPOConfig, GRPOTrainer

    if not bundles:
        raise ValueError("no train scenario to play")
    if not config.max_steps:
        raise ValueError("GRPO needs max_steps (optimizer steps)")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    config = grpo_train_config(config, settings)
    resume, resumed_from = resume_point(config)
    tokenizer = load_tokenizer(config.base_model)
    model = PeftModel.from_pretrained(load_base(config), sft_adapter, is_trainable=True)
    by_id = {b.id: b for b in bundles}
    board = ScenarioBoard(
        sorted(by_id),
        {b.id: b.difficulty for b in bundles},
        promote_at=settings.ladder_promote_at if settings.difficulty_ladder else None,
        window=settings.ladder_window,
    )
    rollout = ShellRollout(by_id, image, settings, reward=reward, board=board, progress=progress)
    args = trainer_args(
        GRPOConfig,
        config,
        evaluate=False,
        num_generations=settings.num_generations,
        temperature=settings.temperature,
        top_p=settings.top_p,
        beta=settings.beta,
        max_completion_length=settings.max_context_tokens,
        shuffle_dataset=False,
        disable_dropout=True,
        log_completions=False,
    )
    sampler = InformativeSampler(
        board,
        settings.num_generations,
        settings.scenarios_per_step,
        repeat_count=args.steps_per_generation * args.num_iterations,
        num_batches=config.max_steps,
        prefer=settings.prefer_informative,
        seed=config.seed,
    )

    class Trainer(GRPOTrainer):
        def _get_train_sampler(self, dataset: Any = None) -> Any:
            return sampler

    def merged(row: dict[str, float]) -> None:
        rec = rollout.steps.get(int(row["step"]))
        full = {**row, **(rec.model_dump(exclude={"step"}) if rec else {})}
        if on_log is not None:
            on_log(full)

    _, callbacks = progress_callbacks(merged, None)
    trainer = without_printer(
        Trainer(
            model=model,
            reward_funcs=[make_reward_func(reward)],
            args=args,
            train_dataset=Dataset.from_list([{"prompt": sid} for sid in sorted(by_id)]),
            processing_class=tokenizer,
            rollout_func=rollout,
            callbacks=callbacks,
        )
    )
    out = trainer.train(resume_from_checkpoint=resume)
    history, _ = history_from_log(trainer.state.log_history)
    history = [
        {
            **r,
            **(
                rollout.steps[int(r["step"])].model_dump(exclude={"step"})
                if int(r["step"]) in rollout.steps
                else {}
            ),
        }
        for r in history
    ]
    publish_adapter(trainer.model, Path(config.output_dir))
    wall = float(out.metrics.get("train_runtime", 0.0))
    steps = [rollout.steps[k] for k in sorted(rollout.steps)]
    tokens = sum(r.get("tokens", 0.0) for r in history)
    first, last = (steps[0], steps[-1]) if steps else (None, None)
    extra = {
        "episodes": float(rollout.episodes_played),
        "episodes_per_min": round(60 * rollout.episodes_played / rollout.rollout_s, 3)
        if rollout.rollout_s
        else 0.0,
        "rollout_share": round(rollout.rollout_s / wall, 3) if wall else 0.0,
        "first_reward_mean": first.reward_mean if first else math.nan,
        "last_reward_mean": last.reward_mean if last else math.nan,
        "first_success_rate": first.success_rate if first else math.nan,
        "last_success_rate": last.success_rate if last else math.nan,
        "informative_frac": round(
            sum(g.kind == "mixed" for g in rollout.groups) / max(1, len(rollout.groups)), 4
        ),
        "hacks": float(sum(s.hacks for s in steps)),
        "infra_errors": float(sum(s.infra_errors for s in steps)),
    }
    if pick_device(config) == "cpu":
        import resource

        extra["peak_memory_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = TrainResult(
        kind="grpo",
        adapter_dir=config.output_dir,
        steps=trainer.state.global_step,
        resumed_from_step=resumed_from,
        history=history,
        final_loss=history[-1].get("loss") if history else None,
        train_examples=rollout.episodes_played,
        train_tokens=int(tokens),
        trained_tokens=int(tokens),
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        wall_s=wall,
        trainable_parameters=trainable_parameters(trainer.model),
        extra=extra,
    )
    return GRPORun(result=result, steps=steps, groups=rollout.groups, transcripts=rollout.transcripts)


def reward_curve_png(steps: Sequence[StepRecord], path: Path, title: str = "GRPO reward") -> Path:
    """Mean reward and success rate per step (and the informative-group fraction) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [s.step for s in steps]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    ax.plot(xs, [s.reward_mean for s in steps], marker="o", color="tab:blue", label="mean reward")
    ax.plot(xs, [s.success_rate for s in steps], marker="s", color="tab:green", label="success rate")
    ax.plot(
        xs, [s.informative_frac for s in steps], linestyle="--", color="tab:gray", label="informative groups"
    )
    ax.set_xlabel("step")
    ax.set_ylim(-1.05, 1.05)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def transcript_markdown(o: EpisodeOutcome) -> str:
    """One episode as markdown: the numbers the reward saw, then the conversation (commands as code)."""
    head = (
        f"**{o.scenario_id}** (sample {o.sample}): reward {o.reward if o.reward is not None else 'n/a'}, "
        f"verified {o.verified}, terminated {o.terminated}, {o.n_turns} turns, {o.failed_commands} failed "
        f"commands, {o.prose_turns} prose turns, end {o.end_reason or '-'}"
        + (f", HACK: {o.hack}" if o.hack else "")
        + (f", infra: {o.infra_error}" if o.infra_error else "")
    )
    body = []
    for m in o.messages:
        text = m.content if len(m.content) < 800 else m.content[:800] + " ..."
        body.append(f"- *{m.role}*:\n\n```\n{text}\n```")
    return head + "\n\n" + "\n".join(body)
