"""Tokens and a batch of episodes played on rollout's public batched-episode engine (``rollout.live``): what
TRL trains on (prompt ids, completion ids, the env mask) comes from here, kept apart from the reward (pure) and the
trainer (TRL) so the benchmark and the tests can play groups without either.

For a whole generation batch fresh sandboxes are opened in parallel, the episodes advance in lockstep with ONE
batched, sampled generation per turn on the policy (eval mode, no grad), each command runs in its own sandbox in
parallel, a command that outlives the turn deadline cuts its episode off without stalling the others, and the
check runs on each final state. The opening, the turn logic and the check are the evaluator's engine, so the
episode the model is rewarded for is exactly the episode it is later evaluated on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from pydantic import BaseModel

from bashgym_assets.inference.turns import end_of_turn_id, stop_token_ids
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
from bashgym_assets.training.grpo.reward import EpisodeOutcome, detect_hack
from bashgym_assets.training.grpo.settings import GRPOSettings, Progress

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
    """Batched sampling from a causal LM on exact token ids: the model is put in eval mode for the call and restored
    afterwards (dropout off while sampling; no grad).

    Where the model supports it (``inference.kv_decode.unsupported_reason``; ``BASHGYM_KV_CACHE`` on), the turns
    are decoded by the project's continuous decoder (``inference.continuous``): each episode's next prompt is its
    last prompt plus the reply and the observation, so the keys and values of everything it already read are
    reused instead of read again every turn, and rows leave the batch as their replies end. The reuse holds for
    one set of weights only: a ``Policy`` is made for each step's episodes (``train.ShellRollout``), before the
    optimizer step, and drops its cache with it. Elsewhere, or should the decoder fail, ``generate`` on
    micro-batches (``LocalModelOperator.generate_tokens``)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_new_tokens: int = 64,
        temperature: float = 0.8,
        top_p: float = 1.0,
        micro_batch: int = 16,
        kv_cache: bool | None = None,
        seed: int | None = None,
    ) -> None:
        from bashgym_assets.inference.kv_decode import kv_cache_enabled, unsupported_reason

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
        self.stop_ids = set(stop_token_ids(tokenizer))  # the policy operator's own stop rule
        self.seed = seed  # None: fresh draws (a trainer's step); an int: reproducible ones
        self.calls = 0
        self.kv_fallback = "" if kv_cache_enabled(kv_cache) else "off (kv_cache=False or BASHGYM_KV_CACHE=0)"
        self.kv_fallback = self.kv_fallback or unsupported_reason(model) or ""
        self._decoder: Any = None

    @property
    def cached(self) -> bool:
        """Whether the turns are decoded with the keys and values of the episode's earlier turns reused."""
        return not self.kv_fallback

    def generate(self, prompts: list[list[int]]) -> list[list[int]]:
        was_training = self.model.training
        self.model.eval()
        self.calls += 1
        try:
            if self.cached:
                try:
                    return self._continuous(prompts)
                except Exception as exc:  # noqa: BLE001 - the plain generate path still samples the turn
                    self.kv_fallback = f"{type(exc).__name__}: {exc}"
                    self._decoder = None
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

    def _continuous(self, prompts: list[list[int]]) -> list[list[int]]:
        """Every prompt's sampled reply (its new tokens, up to and including the end-of-turn token) from the
        continuous decoder, each row drawing from its own generator."""
        from bashgym_assets.inference.continuous import ContinuousDecoder
        from bashgym_assets.inference.kv_decode import KVGenerator

        if self._decoder is None:
            stop = sorted(self.stop_ids)
            pad = self.tokenizer.pad_token_id
            gen = KVGenerator(self.model, stop, pad if pad is not None else stop[0], self.op.max_new_tokens)
            self._decoder = ContinuousDecoder(gen, max_rows=max(len(prompts), self.op.micro_batch))
        sampled = self.op.temperature > 0
        for i, prompt in enumerate(prompts):
            self._decoder.submit(
                i,
                prompt,
                temperature=self.op.temperature,
                top_p=self.op.top_p,
                seed=None
                if self.seed is None or not sampled
                else self.seed * 1_000_003 + self.calls * 1_009 + i,
            )
        out: dict[int, list[int]] = {}
        while len(out) < len(prompts):
            for key, new, _ in self._decoder.step():
                out[int(key)] = list(new)
        return [out[i] for i in range(len(prompts))]


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
    limits = settings.limits()
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
            before = {i: list(jobs[i].opened.seen) for i in asking}
            futures = {}
            for i, new in zip(asking, news, strict=True):
                tokens, reply = split_reply(policy, new)
                completion[i] += tokens
                mask[i] += [1] * len(tokens)
                futures[pool.submit(apply_reply, jobs[i], reply)] = (i, tokens)
            _, late = wait(futures, timeout=settings.turn_timeout_s)
            for f in late:  # cut off: its container goes now, which also ends the command it is stuck in
                i = futures[f][0]
                hung[i] = len(getattr(jobs[i].opened.session, "results", []))
                threading.Thread(target=jobs[i].box.close, name="grpo-cutoff", daemon=True).start()
            for f, (i, tokens) in futures.items():
                if f in late:
                    continue
                j = jobs[i]
                driver = j.opened
                seen = driver.seen
                if (
                    driver.done
                    or j.sandbox_error
                    or len(seen) != len(before[i]) + 2
                    or driver.episode.n_turns >= settings.max_turns
                ):
                    continue
                ended = bool(tokens) and tokens[-1] in policy.stop_ids
                obs = observation_token_ids(tok, before[i], seen[-1].content, ended)
                if (
                    len(prompt_ids[i]) + len(completion[i]) + len(obs) + settings.max_new_tokens
                    > settings.max_context_tokens
                ):
                    driver.done = True
                    driver.episode.end_reason = "context_cap"
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
