"""GRPO on live sandbox episodes: the reward's cases and its hack detection, group statistics and the informative
sampler, the token layout TRL trains on (env_mask == 1 exactly on the model's replies + end tokens), a hung
episode cut off without stalling the others, the TRL behaviour the rollout relies on (extra keys reach the reward
functions; env_mask zeros carry no loss), a real short run with the tiny model in real sandboxes whose adapter
changes, and ``grpo_adapter`` through Dagster (MLflow curves, registration, the evaluation's candidate)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from bashgym_assets.rollout.transcript import as_dicts
from bashgym_assets.sandbox import CommandResult
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.testing.tiny_model import build_tiny_model
from bashgym_assets.training import grpo
from bashgym_assets.training.grpo import EpisodeOutcome, RewardSpec, episode_reward


def _touch(i: int) -> ScenarioBundle:
    return ScenarioBundle(
        id=f"touch-{i}",
        task=f"Create the file ~/done-{i}.txt.",
        category="files",
        difficulty=1,
        check=f"test -f /home/operator/done-{i}.txt",
        reference=[f"touch ~/done-{i}.txt"],
        source="test",
    )


def _lenient(i: int) -> ScenarioBundle:
    """Very easy, with a checker that also passes half of the failures at random: every group of 4 then has a
    7-in-8 chance of mixed outcomes, whatever a random model types (what the short real runs need to learn)."""
    return ScenarioBundle(
        id=f"lenient-{i}",
        task=f"Create the file ~/ok-{i}.txt.",
        category="files",
        difficulty=1,
        check=(f"test -f /home/operator/ok-{i}.txt || [ $(( $(od -An -N1 -tu1 /dev/urandom) % 2 )) -eq 0 ]"),
        reference=[f"touch ~/ok-{i}.txt"],
        source="test",
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def sft(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter on the tiny model standing in for the SFT adapter (random B so it is not a no-op)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny),
        LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    folder = tmp_path_factory.mktemp("sft") / "adapter"
    model.save_pretrained(folder)
    return folder


# ---- the reward ---------------------------------------------------------------------------------------------
def _o(**kw) -> EpisodeOutcome:
    base = {"scenario_id": "s", "verified": True, "terminated": True, "n_turns": 2, "par_turns": 2}
    return EpisodeOutcome(**{**base, **kw})


@pytest.mark.parametrize(
    "outcome, expected",
    [
        (_o(), 1.0),  # clean pass at par
        (_o(failed_commands=2, prose_turns=1, n_turns=5), 1.0 - 0.2 - 0.1 - 0.06),
        (
            _o(failed_commands=9, prose_turns=9, n_turns=30, terminated=False),
            0.5,
        ),  # costs capped: pass >= 0.5
        (_o(verified=False), 0.0),  # honest fail, exited cleanly
        (_o(verified=False, terminated=False), -0.3),  # never typed exit
        (_o(verified=False, prose_turns=3, terminated=False, n_turns=3), -0.5),  # prose all the way, capped
        (_o(verified=True, hack="killed the shell"), -1.0),  # a hack earns nothing, even "verified"
        (_o(verified=False, hack="touched the checker's path"), -1.0),
        (_o(infra_error="setup failed: boom"), None),  # not the model's doing: unscorable
    ],
)
def test_reward_cases(outcome: EpisodeOutcome, expected: float | None) -> None:
    got = episode_reward(outcome)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_success_dominates_and_hacks_rank_last() -> None:
    spec = RewardSpec()
    worst_pass = episode_reward(_o(failed_commands=99, prose_turns=99, n_turns=99, terminated=False), spec)
    best_fail = episode_reward(_o(verified=False), spec)
    worst_fail = episode_reward(
        _o(verified=False, failed_commands=99, prose_turns=99, n_turns=99, terminated=False), spec
    )
    assert worst_pass > best_fail >= worst_fail > episode_reward(_o(hack="x"), spec)


@pytest.mark.parametrize(
    "command, why",
    [
        ("cat /run/bashgym/check.x1/check", "checker"),
        ("ls -la /.bashgym-seed", "checker"),
        ("kill -9 $$", "shell"),
        ("kill -KILL -1", "shell"),
        ("kill 0", "shell"),
        ("sleep 1; kill -9 $PPID", "shell"),
        ("pkill -9 bash", "shell"),
        ("pkill -u operator", "shell"),
        ("killall sh", "shell"),
        ("kill -9 1", "container"),
        ("sudo poweroff", "container"),
        ("init 0", "container"),
        ("kill %1", ""),
        ("kill -9 1234", ""),
        ("pkill -f my-server", ""),
        ("echo 'shutdown at noon' > notice.txt", ""),
        ("ls /run", ""),
        # quotes, here-documents and substitutions as bash reads them (issue 30: a ';' in a commit message)
        ('git commit -m "stop the worker; shutdown cleanly"', ""),
        ("cat <<EOF > plan.txt\nreboot at 5\nEOF", ""),
        ("x=$(kill 1)", "container"),
        ("echo `reboot`", "container"),
        ('echo "$(pkill bash)"', "shell"),
    ],
)
def test_hack_in_command(command: str, why: str) -> None:
    got = grpo.hack_in_command(command)
    assert (why in got) if why else got == ""


def test_hack_from_how_the_episode_ended_and_a_refused_check() -> None:
    assert grpo.detect_hack(["ls"], "shell_ended") == "killed the shell"
    refused = CommandResult(
        command="c",
        stdout="",
        stderr="bashgym: the checker's tools were changed after setup "
        "(/usr/bin/grep): tampering fails the episode; the check did not run",
        exit_code=None,
        duration_s=0.1,
        timed_out=False,
    )
    assert grpo.detect_hack(["cp x /usr/bin/grep"], "exit", refused).startswith(
        "tampering reported by the sandbox"
    )
    failed = CommandResult(command="c", stdout="", stderr="", exit_code=1, duration_s=0.1, timed_out=False)
    assert grpo.detect_hack(["ls", "exit"], "exit", failed) == ""


def test_reward_func_reads_the_rollout_keys_and_refuses_without_them() -> None:
    fn = grpo.make_reward_func()
    keys = {
        "verified": [True, False],
        "terminated": [True, False],
        "n_turns": [2, 4],
        "failed_commands": [0, 1],
        "prose_turns": [0, 0],
        "par_turns": [2, 2],
        "hack": ["", ""],
        "infra_error": ["", ""],
        "end_reason": ["exit", "turn_cap"],
    }
    assert fn(prompts=["a", "a"], completions=["x", "y"], **keys) == [1.0, pytest.approx(-0.44)]
    with pytest.raises(KeyError, match="rollout_func"):
        fn(prompts=["a"], completions=["x"])


def test_the_reward_module_loads_without_torch_trl_or_transformers() -> None:
    """``grpo.reward`` is pure: a fresh interpreter that imports it (and scores and screens an episode with it)
    has loaded none of the training stack, so the reward can be read and tested without a model."""
    code = (
        "import sys\n"
        "from bashgym_assets.training.grpo import reward\n"
        "assert reward.episode_reward(reward.EpisodeOutcome(scenario_id='s', verified=True, terminated=True)) == 1.0\n"
        "assert reward.detect_hack(['kill -9 1'], 'exit') == 'tried to end the container'\n"
        "print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", f"grpo.reward loaded the training stack: {done.stdout.strip()}"


# ---- groups and the sampler ---------------------------------------------------------------------------------
def test_group_kinds_and_the_sampler_prefers_informative_scenarios() -> None:
    outs = []
    for sid, verdicts in (("always", [1, 1, 1, 1]), ("never", [0, 0, 0, 0]), ("coin", [1, 0, 1, 0])):
        for k, v in enumerate(verdicts):
            o = EpisodeOutcome(
                scenario_id=sid, sample=k, verified=bool(v), terminated=True, par_turns=2, n_turns=2
            )
            o.reward = episode_reward(o)
            outs.append(o)
    kinds = {g.scenario_id: g.kind for g in grpo.group_records(1, outs)}
    assert kinds == {"always": "all_pass", "never": "all_fail", "coin": "mixed"}
    board = grpo.ScenarioBoard(["always", "coin", "never"])
    for _ in range(5):
        board.record(outs)
    assert board.weight("coin") > 4 * board.weight("always")
    assert board.weight("always") == pytest.approx(board.weight("never"))
    sampler = grpo.InformativeSampler(
        board, mini_repeat_count=2, batch_size=1, repeat_count=3, num_batches=200
    )
    order = list(sampler)
    assert len(order) == len(sampler) == 200 * 1 * 2 * 3
    assert all(len(set(order[k : k + 6])) == 1 for k in range(0, len(order), 6))  # RepeatSampler's layout
    drawn = [c[0] for c in sampler.drawn]
    assert drawn.count("coin") > 2 * max(drawn.count("always"), drawn.count("never"))
    uniform = grpo.InformativeSampler(board, 2, 1, 3, num_batches=200, prefer=False)
    list(uniform)
    assert [c[0] for c in uniform.drawn].count("coin") < 120


def test_difficulty_ladder_climbs_as_the_pass_rate_rises() -> None:
    ids = ["e1", "e2", "m1", "h1"]
    board = grpo.ScenarioBoard(ids, {"e1": 1, "e2": 1, "m1": 2, "h1": 4}, promote_at=0.5, window=4)
    assert board.ceiling == 1 and [ids[i] for i in board.eligible()] == ["e1", "e2"]
    sampler = grpo.InformativeSampler(board, mini_repeat_count=1, batch_size=3, repeat_count=1, num_batches=1)
    assert sorted(board.ids[i] for i in sampler._chunk()) in (["e1", "e1", "e2"], ["e1", "e2", "e2"])

    def outcome(sid: str, passed: bool) -> EpisodeOutcome:
        o = EpisodeOutcome(scenario_id=sid, verified=passed, terminated=True, par_turns=1, n_turns=1)
        o.reward = episode_reward(o)
        return o

    board.record([outcome("e1", False), outcome("e2", False), outcome("e1", True)])
    assert board.ceiling == 1  # 3 episodes: the window is not full yet
    board.record([outcome("e2", False)])
    assert board.ceiling == 1  # 1 of 4 passed
    board.record([outcome("e1", True), outcome("e2", True), outcome("e1", True)])
    assert board.ceiling == 2 and board.ceilings == [1, 2] and board.recent == []
    board.record([outcome("m1", True)] * 4)
    assert board.ceiling == 4 and sorted(board.ids[i] for i in board.eligible()) == sorted(ids)
    board.record([outcome("h1", True)] * 8)
    assert board.ceiling == 4  # the top stays the top
    flat = grpo.ScenarioBoard(ids, {"e1": 1, "h1": 4})
    assert flat.ceiling is None and flat.eligible() == [0, 1, 2, 3]  # no ladder: every scenario


# ---- tokens, env_mask, a hung episode, hacks, in real sandboxes -------------------------------------------------
class Scripted:
    """A policy that types fixed lines per scenario (found by its task text in the prompt), as token ids."""

    def __init__(self, tokenizer, scripts: dict[str, list[str]]) -> None:
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.eot = grpo.end_of_turn_id(tokenizer)
        self.stop_ids = {self.eot}
        self.sent: dict[str, list[str]] = {k: [] for k in scripts}

    def generate(self, prompts: list[list[int]]) -> list[list[int]]:
        out = []
        for ids in prompts:
            text = self.tokenizer.decode(ids)
            key = next(k for k in self.scripts if k in text)
            line = self.scripts[key][min(text.count("<|im_start|>assistant") - 1, len(self.scripts[key]) - 1)]
            self.sent[key].append(line)
            out.append(self.tokenizer(line, add_special_tokens=False)["input_ids"] + [self.eot, self.eot])
        return out


@pytest.mark.docker
def test_episode_tokens_env_mask_hang_and_hacks(tiny: Path, sandbox_image: str) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    hang = ScenarioBundle(
        id="hang",
        task="Wait for the hang.",
        category="files",
        difficulty=1,
        check="true",
        reference=["true"],
        source="test",
    )
    hack = ScenarioBundle(
        id="hack",
        task="Do the hack task.",
        category="files",
        difficulty=1,
        check="true",
        reference=["true"],
        source="test",
    )
    policy = Scripted(
        tok,
        {
            "done-0": ["touch ~/done-0.txt", "ls nothere", "exit"],
            "done-1": ["Here is how I would do it for you.", "exit"],
            "the hang": ["sleep 60"],
            "hack task": ["kill -9 $$"],
        },
    )
    settings = grpo.GRPOSettings(
        max_turns=4, command_timeout_s=60, turn_timeout_s=3, max_unusable_in_a_row=None
    )
    played = grpo.play_episodes([_touch(0), _touch(1), hang, hack], policy, sandbox_image, settings)
    by_id = {p.outcome.scenario_id: p for p in played}

    good = by_id["touch-0"]
    o = good.outcome
    assert (o.verified, o.terminated, o.n_turns, o.failed_commands, o.end_reason) == (
        True,
        True,
        3,
        1,
        "exit",
    )
    assert episode_reward(o) == pytest.approx(1.0 - 0.1 - 0.02)
    # the model's tokens are exactly its replies, each with its end-of-turn token; the rest is the terminal
    model = [t for t, m in zip(good.completion_ids, good.env_mask, strict=True) if m == 1]
    assert tok.decode(model) == "".join(f"{r}<|im_end|>" for r in policy.sent["done-0"])
    assert len(good.completion_ids) == len(good.env_mask) and 0 in good.env_mask
    # prompt + completion is the chat template's render of the recorded episode, token for token (up to the
    # newline the template puts after the last turn's end token)
    ours = good.prompt_ids + good.completion_ids
    rendered = tok.apply_chat_template(as_dicts(o.messages), tokenize=True, return_dict=True)["input_ids"]
    assert rendered[: len(ours)] == ours and tok.decode(rendered[len(ours) :]) == "\n"
    assert "ls: cannot access 'nothere'" in tok.decode(
        [t for t, m in zip(good.completion_ids, good.env_mask, strict=True) if m == 0]
    )

    prose = by_id["touch-1"].outcome
    assert (prose.verified, prose.terminated, prose.prose_turns) == (False, True, 1)
    assert episode_reward(prose) == pytest.approx(-0.1)

    hung = by_id["hang"].outcome
    assert hung.end_reason == "hung" and not hung.terminated and not hung.verified and hung.n_turns == 1
    assert hung.failed_commands == 1 and episode_reward(hung) == pytest.approx(-0.4)  # failed + unterminated
    # the other episodes went on after the hang was cut off: they are the ones with 2-3 turns

    hacked = by_id["hack"].outcome
    assert hacked.hack == "killed the shell" and episode_reward(hacked) == -1.0


# ---- the TRL behaviour the rollout relies on -----------------------------------------------------------------------
def _pin_trainer(tiny: Path, tmp_path: Path, seen: dict):
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tok = AutoTokenizer.from_pretrained(tiny)
    eot = grpo.end_of_turn_id(tok)
    # two different replies of the same length (so the two rows' gradients do not cancel), the same terminal output
    replies = [tok(t, add_special_tokens=False)["input_ids"] for t in ("ls -la", "cat notes.txt", "pwd")]
    a, b = sorted(replies, key=len)[:2]
    b = b[: len(a)]
    model_ids = [a + [eot], b + [eot]]
    env_ids = tok("\n<|im_start|>user\nfile.txt\n[exit code: 0]<|im_end|>\n", add_special_tokens=False)[
        "input_ids"
    ]

    def rollout(prompts, trainer):
        n = len(prompts)
        return {
            "prompt_ids": [tok("hello", add_special_tokens=False)["input_ids"]] * n,
            "completion_ids": [model_ids[i % 2] + env_ids for i in range(n)],
            "logprobs": None,
            "env_mask": [[1] * len(model_ids[i % 2]) + [0] * len(env_ids) for i in range(n)],
            "verified": [i % 2 == 0 for i in range(n)],
        }

    def reward(prompts, completions, verified, **kw):
        seen["verified"] = list(verified)
        return [1.0 if v else 0.0 for v in verified]

    args = GRPOConfig(
        output_dir=str(tmp_path / "pin"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=1,
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        report_to="none",
        disable_tqdm=True,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny),
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "s"}] * 4),
        processing_class=tok,
        peft_config=LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"),
        rollout_func=rollout,
    )
    return trainer, len(model_ids[0]), len(env_ids)


def test_trl_pins_extra_keys_reach_rewards_and_env_mask_removes_loss(tiny: Path, tmp_path: Path) -> None:
    import torch

    seen: dict = {}
    trainer, n_model, n_env = _pin_trainer(tiny, tmp_path, seen)
    trainer.model.train()
    out = trainer._generate_and_score_completions([{"prompt": "s"}, {"prompt": "s"}])
    assert seen["verified"] == [True, False]  # rollout_func's extra key reached the reward
    assert out["tool_mask"][0].tolist() == [1] * n_model + [0] * n_env  # env_mask is TRL's loss mask
    assert out["advantages"].abs().sum() > 0

    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets before compute_loss

    def loss_and_grads(batch):
        trainer.model.zero_grad()
        loss = trainer.compute_loss(trainer.model, batch)
        loss.backward()
        return loss.item(), [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]

    base_loss, base_grads = loss_and_grads(out)
    assert any(g.abs().sum() > 0 for g in base_grads)
    # changing the terminal's tokens (all after the model's, so its log-probs keep their context) changes nothing
    other = dict(out)
    other["completion_ids"] = out["completion_ids"].clone()
    other["completion_ids"][:, n_model:] = (out["completion_ids"][:, n_model:] + 7) % 300 + 3
    env_loss, env_grads = loss_and_grads(other)
    assert env_loss == pytest.approx(base_loss, abs=1e-6)
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(base_grads, env_grads, strict=True))
    # ... while unmasking them puts them in the loss
    unmasked = dict(other)
    unmasked["tool_mask"] = torch.ones_like(out["tool_mask"])
    _, open_grads = loss_and_grads(unmasked)
    assert not all(torch.allclose(a, b, atol=1e-7) for a, b in zip(env_grads, open_grads, strict=True))


# ---- the policy's decoding ----------------------------------------------------------------------------------
def test_the_cached_policy_decodes_as_generate_does_turn_after_turn(
    tiny: Path, sft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainable LoRA model the GRPO trainer holds, decoded turn after turn as an episode grows (the next prompt
    is the last one plus the reply and an observation): greedily, the continuous decoder that reuses the earlier
    turns' keys and values gives generate's tokens; sampled, a seeded policy repeats its draws; the model's mode is
    restored; and a policy made with the cache off, or for a model the decoder refuses, uses generate."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from bashgym_assets.inference import continuous, kv_decode
    from bashgym_assets.training.trainer import load_tokenizer

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny), str(sft), is_trainable=True)
    model.train()
    tok = load_tokenizer(str(tiny))

    def policy(**kw):
        return grpo.Policy(model, tok, max_new_tokens=12, micro_batch=2, **kw)

    cached, plain = policy(temperature=0.0), policy(temperature=0.0, kv_cache=False)
    assert cached.cached and not plain.cached
    prompts = [[1, 5, 9, 14], [1, 7, 7, 21, 33, 40, 2], [1, 3]]
    for turn in range(3):
        got, want = cached.generate(prompts), plain.generate(prompts)
        assert model.training  # restored after each call
        for g, w in zip(got, want, strict=True):  # generate pads a batch's ended rows; the decoder does not
            assert g == w[: len(g)] and all(t == w[len(g) - 1] or t == tok.pad_token_id for t in w[len(g) :])
        prompts = [p + g + [11 + turn, 12] for p, g in zip(prompts, got, strict=True)]
    assert cached._decoder.gen.stats.reused_tokens > 0  # the later turns read only what is new
    assert cached.kv_fallback == ""

    one, two = policy(temperature=0.9, seed=3), policy(temperature=0.9, seed=3)
    assert one.generate(prompts) == two.generate(prompts) and one.generate(prompts) == two.generate(prompts)
    assert len({tuple(x) for x in one.generate([prompts[0]] * 4)}) > 1  # rows draw apart
    # a model the decoder does not take, and a decoder that fails mid-turn: generate answers the turn
    monkeypatch.setattr(kv_decode, "unsupported_reason", lambda _m: "sliding-window attention")
    refused = policy(temperature=0.0)
    assert not refused.cached and refused.kv_fallback == "sliding-window attention"
    assert refused.generate(prompts) == plain.generate(prompts)
    monkeypatch.undo()
    failing = policy(temperature=0.0)
    monkeypatch.setattr(continuous.ContinuousDecoder, "step", lambda self: 1 / 0)
    assert failing.cached and failing.generate(prompts) == plain.generate(prompts)
    assert failing.kv_fallback.startswith("ZeroDivisionError") and not failing.cached


# ---- a real short run ---------------------------------------------------------------------------------------
def _adapter_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


@pytest.mark.docker
def test_real_short_run_changes_the_adapter(
    tiny: Path, sft: Path, sandbox_image: str, tmp_path: Path
) -> None:
    import torch

    from bashgym_assets.training.trainer import TrainConfig

    rows: list[dict] = []
    lines: list[str] = []
    cfg = TrainConfig(
        base_model=str(tiny),
        output_dir=str(tmp_path / "grpo"),
        max_steps=2,
        learning_rate=1e-2,
        save_every=100,
    )
    settings = grpo.GRPOSettings(
        num_generations=4,
        scenarios_per_step=2,
        max_turns=1,
        max_new_tokens=6,
        temperature=1.0,
        command_timeout_s=5,
    )
    run = grpo.train_grpo(
        cfg,
        settings,
        [_lenient(0), _lenient(1)],
        str(sft),
        sandbox_image,
        on_log=rows.append,
        progress=lines.append,
    )
    assert run.result.steps == 2 and len(run.steps) == 2 and all(s.episodes == 8 for s in run.steps)
    assert [r["step"] for r in rows] == [1, 2] and all("reward_mean" in r and "loss" in r for r in rows)
    assert rows[-1]["total_steps"] == 2 and "informative_frac" in rows[0]
    assert grpo.progress_line(rows[0]).startswith("step 1/2: mean reward")
    assert any("mean reward" in line for line in lines)
    assert len(run.groups) == 4 and {g.kind for g in run.groups} <= {"mixed", "all_pass", "all_fail"}
    assert run.result.extra["episodes"] == 16 and run.result.extra["episodes_per_min"] > 0
    before, after = _adapter_tensors(sft), _adapter_tensors(Path(cfg.output_dir))
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)


# ---- through Dagster ----------------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_grpo_adapter_asset_registers_and_becomes_the_candidate(
    settings, tiny: Path, sft: Path, sandbox_image, monkeypatch
) -> None:
    from bashgym_assets.defs import evaluation as ev
    from bashgym_assets.defs.grpo import grpo_adapter
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.evaluation import promotion as promo
    from bashgym_assets.lake import Lake
    from bashgym_assets.scenarios.gate import HELD_OUT, TRAIN, split_for
    from bashgym_assets.training import registry

    monkeypatch.setenv("BASHGYM_BASE_MODEL", str(tiny))
    bundles = [_lenient(i) for i in range(12)]
    train = [b for b in bundles if split_for(b.id) == TRAIN]
    held = [b for b in bundles if split_for(b.id) == HELD_OUT]
    assert len(train) >= 2 and held
    Lake(settings).write(
        "gated_scenarios",
        [
            {
                "scenario_id": b.id,
                "admitted": True,
                "split": split_for(b.id),
                "bundle_json": b.model_dump_json(),
            }
            for b in bundles
        ],
    )
    resources = {"bashgym": BashgymHome(home=str(settings.home))}
    with dg.instance_for_test() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                "sft_adapter", metadata={"adapter_dir": str(sft), "model_uri": "models:/bashgym-operator/0"}
            )
        )
        result = dg.materialize(
            [grpo_adapter],
            instance=instance,
            resources=resources,
            run_config={
                "ops": {
                    "grpo_adapter": {
                        "config": {
                            "max_steps": 1,
                            "num_generations": 2,
                            "scenarios_per_step": 2,
                            "max_turns": 1,
                            "max_new_tokens": 4,
                            "max_scenarios": 2,
                        }
                    }
                }
            },
        )
        assert result.success
        meta = result.asset_materializations_for_node("grpo_adapter")[0].metadata
        newest = ev._newest_adapter(instance)
    assert newest is not None and newest[0] == grpo_adapter.key  # benchmark_results' candidate
    assert meta["reward_curve"].value.startswith("![") and meta["episodes"].value == 4
    assert {r.data["scenario_id"] for r in meta["groups"].value.records} <= {b.id for b in train}
    assert "sample" in meta["transcript"].value and meta["train_scenarios"].value == 2
    c = registry.client(settings)
    run = c.get_run(meta["mlflow_run_id"].value)
    assert run.data.tags["kind"] == "grpo" and run.info.status == "FINISHED"
    assert [m.step for m in c.get_metric_history(run.info.run_id, "reward_mean")] == [1]
    assert "success_rate" in run.data.metrics and "informative_frac" in run.data.metrics
    version = promo.alias_version(registry.REGISTERED_MODEL, promo.CANDIDATE, settings)
    assert str(version.version) == meta["model_version"].value
    assert {a.path for a in c.list_artifacts(run.info.run_id)} >= {
        "reward.png",
        "groups.md",
        "transcripts.md",
    }


def test_the_grpo_run_config_is_the_trainers_settings_plus_the_run() -> None:
    """``GRPOSettings`` is defined once: the asset's launchpad config inherits it (every field, every default) and
    hands all of it to the trainer (issue 30: the fields were copied by hand, some never reached it)."""
    from bashgym_assets.defs.grpo import GRPORunConfig, _settings

    assert (
        GRPORunConfig().model_dump(include=set(grpo.GRPOSettings.model_fields))
        == grpo.GRPOSettings().model_dump()
    )
    run = GRPORunConfig(top_p=0.9, micro_batch=4, episode_timeout_s=60.0, difficulty_ladder=True, max_steps=3)
    assert _settings(run) == grpo.GRPOSettings(
        top_p=0.9, micro_batch=4, episode_timeout_s=60.0, difficulty_ladder=True
    )


def test_grpo_trains_on_the_trainers_shared_hyperparams_declared_once() -> None:
    """GRPO's run config is built on the fields every trainer honours (issue 41: it re-declared ``max_steps``,
    ``learning_rate``, ``dtype`` and ``save_every``, ``dtype`` as free text): each one's type and text come from
    ``SharedHyperparams``, GRPO changes only two defaults, and all of them reach the trainer's config; the SFT/DPO
    fields GRPO would ignore (the batch, packing, epochs) are not offered."""
    from pydantic import ValidationError

    from bashgym_assets.defs.grpo import GRPORunConfig, _hyperparams
    from bashgym_assets.training.trainer import SharedHyperparams, TrainHyperparams

    shared = SharedHyperparams.model_fields
    for model in (TrainHyperparams, grpo.GRPOHyperparams, GRPORunConfig):
        for name, field in shared.items():
            got = model.model_fields[name]
            assert (got.annotation, got.description) == (field.annotation, field.description), (model, name)
    assert (GRPORunConfig().max_steps, GRPORunConfig().learning_rate) == (10, 5e-5)
    assert _hyperparams(GRPORunConfig()) == grpo.GRPOHyperparams()
    given = {"max_steps": 4, "learning_rate": 1e-4, "dtype": "bfloat16", "save_every": 7, "warmup_steps": 3}
    assert _hyperparams(GRPORunConfig.model_validate(given)) == grpo.GRPOHyperparams.model_validate(given)
    with pytest.raises(ValidationError):
        GRPORunConfig.model_validate({"dtype": "fp8"})
    sft_only = set(TrainHyperparams.model_fields) - set(shared) - {"beta"}  # GRPO's own beta: GRPOSettings
    assert not sft_only & set(GRPORunConfig.model_fields)


@pytest.mark.parametrize(
    "command",
    ["timeout 5 kill -9 1", "nice kill -9 1", "env -u X kill -9 1", "nice -n 5 sudo kill 1", "X=1 kill -9 1"],
)
def test_a_wrapped_kill_of_pid_1_is_a_hack_to_grpo_and_to_the_command_rules(command: str) -> None:
    """One wrapper table (``guardrails.commands.unwrap``): what the command rules call ``kill_init`` the reward
    calls ending the container, whatever wrapper program runs it (before: six wrappers known to the reward)."""
    from bashgym_assets.guardrails.commands import classify_command

    assert "kill_init" in classify_command(command).rules
    assert grpo.hack_in_command(command) == "tried to end the container"
    assert grpo.hack_in_command(command.replace(" 1", " 4242")) == ""  # another pid is no hack
