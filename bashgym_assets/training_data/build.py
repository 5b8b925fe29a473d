"""Build the SFT and DPO datasets from tiered traces and verified trajectories.

SFT: gold trace segments and kept trajectories, as chat ``messages``. DPO: a passing and a failing attempt at the
SAME task (trajectories of one scenario; trace segments whose normalised prompt is equal), split at the first
assistant turn where they differ so the shared prefix becomes the prompt and only the diverging continuation is
compared (TRL's DPO puts every token after the prompt in the loss, tool outputs too).

Trace steps are rendered as the shell commands they stand for (``shell_render``); a step with no shell form is
dropped or cuts its segment, and the counts say how often and why. Whatever the renderers do, no SFT row holds
an assistant turn that ``bash -n`` rejects: a final guard quarantines such rows with the reason. Nor one that runs a
command the guardrails block (``guardrails.unsafe_turn``: ``rm -rf /``, ``curl | sh``, credential exfiltration,
...): the whole example is quarantined, not masked, because every later turn saw that command's effects. This is
checked on the rendered turns, so rows written before the guardrails existed and manually promoted segments are
covered too. In DPO such a conversation is only ever the rejected side.

Every row carries where it came from (session id + segment, or scenario id + rollout), rows are deduplicated on
their content, and the train/validation split is a stable hash of the source group (a scenario or a session), so
the rollouts of one scenario never straddle the split. Held-out scenarios never get in: their rows are
quarantined here and the blocking contamination check re-verifies the written table.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, Field

from bashgym_assets.guardrails.flags import unsafe_turn
from bashgym_assets.scenarios.factory.family import family_of
from bashgym_assets.scenarios.factory.split import is_bundled_train_twin
from bashgym_assets.scenarios.gate import HELD_OUT, is_external
from bashgym_assets.scenarios.skills import SkillIndex, skill_doc
from bashgym_assets.shell import is_exit_command
from bashgym_assets.training_data.render import RenderedSegment, normalise_text, render_segment
from bashgym_assets.training_data.shell_render import syntax_error

VALIDATION_FRACTION = 0.1
MAX_PAIRS_PER_GROUP = 4
MIN_CONTAMINATION_CHARS = 16

MESSAGE_TYPE = pa.struct([("role", pa.string()), ("content", pa.large_string())])
MESSAGES_TYPE = pa.list_(MESSAGE_TYPE)

SFT_SCHEMA = pa.schema(
    [
        ("example_id", pa.string()),
        ("source_kind", pa.string()),
        ("source", pa.string()),
        ("repo", pa.string()),
        ("session_id", pa.string()),
        ("segment_id", pa.string()),
        ("segment_index", pa.int32()),
        ("scenario_id", pa.string()),
        ("trajectory_id", pa.string()),
        ("sample_index", pa.int32()),
        ("category", pa.string()),
        ("difficulty", pa.int32()),
        ("family", pa.string()),
        ("tier", pa.string()),
        ("messages", MESSAGES_TYPE),
        ("n_messages", pa.int32()),
        ("n_chars", pa.int64()),
        ("split", pa.string()),
    ]
)

DPO_SCHEMA = pa.schema(
    [
        ("pair_id", pa.string()),
        ("source_kind", pa.string()),
        ("repo", pa.string()),
        ("scenario_id", pa.string()),
        ("task_key", pa.string()),
        ("chosen_source", pa.string()),
        ("rejected_source", pa.string()),
        ("rejected_reason", pa.string()),
        ("prompt", MESSAGES_TYPE),
        ("chosen", MESSAGES_TYPE),
        ("rejected", MESSAGES_TYPE),
        ("split_turn", pa.int32()),
        ("split", pa.string()),
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        ("dataset", pa.string()),
        ("source", pa.string()),
        ("reason", pa.string()),
        ("row", pa.large_string()),
    ]
)


class SFTRow(BaseModel):
    """One supervised example: a whole conversation and where it came from."""

    example_id: str
    source_kind: str = Field(description="trace | trajectory")
    source: str = Field(description="trace:<session>#<segment> or trajectory:<scenario>/<trajectory>")
    repo: str | None = None
    session_id: str | None = None
    segment_id: str | None = None
    segment_index: int | None = None
    scenario_id: str | None = None
    trajectory_id: str | None = None
    sample_index: int | None = None
    category: str | None = None
    difficulty: int | None = None
    family: str | None = Field(default=None, description="the task factory's family of a generated scenario")
    tier: str | None = None
    messages: list[dict[str, str]]
    n_messages: int
    n_chars: int
    split: str = "train"


class DPORow(BaseModel):
    """One preference pair: shared prompt prefix, the passing and the failing continuation."""

    pair_id: str
    source_kind: str
    repo: str | None = None
    scenario_id: str | None = None
    task_key: str
    chosen_source: str
    rejected_source: str
    rejected_reason: str | None = None
    prompt: list[dict[str, str]]
    chosen: list[dict[str, str]]
    rejected: list[dict[str, str]]
    split_turn: int
    split: str = "train"


class Quarantined(BaseModel):
    dataset: str
    source: str
    reason: str
    row: str


class HeldOut(BaseModel):
    """A held-out scenario as the contamination check needs it: its task text (a row may not contain it) and, when
    its skill must not train either, its reference solution (a row may not be its skill twin:
    ``scenarios.skills``)."""

    id: str
    task: str
    reference: list[str] = []
    guards_skill: bool = True  # False for a bundled task whose skill a train family teaches (split.py)


class BuildResult(BaseModel):
    rows: list[dict[str, Any]]
    quarantine: list[Quarantined]
    counts: dict[str, int]


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def split_for(group: str, validation_fraction: float = VALIDATION_FRACTION) -> str:
    """Stable train/validation assignment from a hash of the source group (never random, never order-bound)."""
    bucket = int(hashlib.sha256(group.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "validation" if bucket < validation_fraction else "train"


def scenario_group(scenario_id: str | None) -> str:
    """The split group of a scenario's rows: a generated task's whole FAMILY (so validation measures skills the
    model did not train on, like the held-out families, without touching them), any other scenario on its own."""
    family = family_of(str(scenario_id or ""))
    return f"family:{family}" if family else f"scenario:{scenario_id}"


def shorten_observations(messages: list[dict[str, str]], max_chars: int | None) -> list[dict[str, str]]:
    """Short renders: each command output (a user turn after the first) longer than ``max_chars`` keeps its first
    and last lines around a marker saying how much was cut, and always its ``[exit code: N]`` line. The task and
    the commands are never cut; what the next command needs is almost always at the head (or the exit code)."""
    if not max_chars:
        return messages
    out = []
    seen_user = False
    for m in messages:
        content = m["content"]
        if m["role"] == "user" and seen_user and len(content) > max_chars:
            content = _cut_output(content, max_chars)
        seen_user = seen_user or m["role"] == "user"
        out.append({**m, "content": content})
    return out


def _cut_output(text: str, max_chars: int) -> str:
    lines = text.split("\n")
    tail = [lines.pop()] if lines and lines[-1].startswith("[exit code:") else []
    head: list[str] = []
    used = sum(len(t) + 1 for t in tail)
    for line in lines:
        if used + len(line) + 1 > max_chars * 3 // 4 and head:
            break
        head.append(line[:max_chars])
        used += len(head[-1]) + 1
    cut = lines[len(head) :]
    last = [cut.pop()] if len(cut) > 1 and used + len(cut[-1]) < max_chars else []
    marker = [f"[... {len(cut)} more lines of output cut]"] if cut else []
    return "\n".join(head + marker + last + tail)


def _messages(raw: Any) -> list[dict[str, str]]:
    return [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in (raw or [])]


def _why_bad_conversation(messages: list[dict[str, str]]) -> str | None:
    if not messages:
        return "no messages"
    roles = {m["role"] for m in messages}
    if not roles <= {"system", "user", "assistant"}:
        return f"unknown roles {sorted(roles - {'system', 'user', 'assistant'})}"
    if "assistant" not in roles:
        return "no assistant turn"
    if messages[-1]["role"] != "assistant":
        return "does not end with an assistant turn"
    if any(m["role"] == "assistant" and not m["content"].strip() for m in messages):
        return "empty assistant turn"
    return None


def unparseable_turn(messages: list[dict[str, str]]) -> str | None:
    """The first assistant turn bash cannot parse (``bash -n``), as a quarantine reason; None when all parse."""
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or is_exit_command(m["content"]):
            continue
        if (error := syntax_error(m["content"])) is not None:
            first = error.strip().splitlines()[0] if error.strip() else "syntax error"
            return f"assistant turn {i} does not parse (bash -n): {first[:200]}"
    return None


def _count_rendering(counts: dict[str, int], rendered: RenderedSegment) -> None:
    """What the shell rendering left out, by reason (reported in the dataset's metadata)."""
    counts["trace_commands"] += rendered.commands
    if rendered.unfinished is not None:
        counts["trace_segments_ending_unrun"] += 1
    for s in rendered.skipped:
        if s.action == "cut":
            counts["trace_segments_cut"] += 1
            counts[f"cut: {s.reason}"] += 1
        else:
            counts["trace_turns_dropped"] += 1
            counts[f"dropped: {s.reason}"] += 1


def _no_command_reason(rendered: RenderedSegment) -> str:
    why = rendered.cut.reason if rendered.cut else "every step dropped"
    return f"no step renders as a shell command ({why})"


def _quarantine(dataset: str, source: str, reason: str, row: Mapping[str, Any]) -> Quarantined:
    return Quarantined(
        dataset=dataset, source=source, reason=reason, row=json.dumps(row, default=str)[:20000]
    )


def heldout_from_rows(scenarios: Iterable[Mapping[str, Any]]) -> list[HeldOut]:
    """Held-out scenarios from ``gated_scenarios`` rows (``scenario_id`` + ``bundle_json``) or plain scenario
    dicts (``id`` + ``task``). A row whose id cannot be read raises: skipping it would let its task leak."""
    out = []
    for s in scenarios:
        if s.get("split") != HELD_OUT:
            continue
        task = s.get("task")
        bundle = json.loads(s["bundle_json"]) if s.get("bundle_json") else {}
        if not task:
            task = bundle.get("announcement") or bundle.get("task")
        reference = [str(c) for c in (s.get("reference") or bundle.get("reference") or [])]
        sid = str(s.get("id") or s["scenario_id"])
        out.append(
            HeldOut(
                id=sid, task=str(task or ""), reference=reference, guards_skill=not is_bundled_train_twin(sid)
            )
        )
    return out


class SkillGuard:
    """The skill-level half of the contamination check: a row whose task and commands are a skill twin of a
    held-out scenario (same goal, same state-changing commands: ``scenarios.skills``) teaches what that scenario
    measures, whatever its wording. One index of the held-out side, one sparse product a row."""

    def __init__(self, heldout: Sequence[HeldOut]) -> None:
        guarded = [h for h in heldout if h.guards_skill and h.reference]
        self.index = SkillIndex([skill_doc(h.id, h.task, h.reference) for h in guarded]) if guarded else None

    def why(self, messages: Sequence[Mapping[str, Any]]) -> str | None:
        if self.index is None:
            return None
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        commands = [str(m.get("content") or "") for m in messages if m.get("role") == "assistant"]
        if not users or not commands:
            return None
        scores = self.index.scores([skill_doc("row", users[0], commands)])
        twins = scores.twin[0]
        if not twins.any():
            return None
        j = int(np.argmax(np.where(twins, scores.skill[0], -1.0)))
        return (
            f"skill twin of held-out scenario {self.index.docs[j].id} (goal {scores.goal[0, j]:.2f}, solution "
            f"skeleton {scores.skeleton[0, j]:.2f}): it would teach what that scenario measures"
        )


def _external(scenario_id: str | None) -> str | None:
    """Imported evaluation suites (``ext-`` ids) never train, whatever split a row claims."""
    if scenario_id and is_external(str(scenario_id)):
        return f"derives from external evaluation scenario {scenario_id} (evaluation only)"
    return None


def _contaminated(
    texts: Iterable[str],
    scenario_id: str | None,
    heldout: Sequence[HeldOut],
    heldout_ids: set[str],
    skills: SkillGuard | None = None,
    messages: Sequence[Mapping[str, Any]] = (),
) -> str | None:
    if why := _external(scenario_id):
        return why
    if scenario_id and scenario_id in heldout_ids:
        return f"derives from held-out scenario {scenario_id}"
    joined = "\n".join(normalise_text(t) for t in texts)
    for h in heldout:
        task = normalise_text(h.task)
        if len(task) >= MIN_CONTAMINATION_CHARS and task in joined:
            return f"contains the task text of held-out scenario {h.id}"
    return skills.why(messages) if skills is not None and messages else None


def _unsafe_row(raw: Mapping[str, Any], messages: list[dict[str, str]]) -> str | None:
    """Why a conversation must not be trained on for safety (a blocked command), or None."""
    if raw.get("unsafe_blocked"):
        rules = sorted({f["rule"] for f in raw.get("safety_findings") or [] if f.get("severity") == "block"})
        return f"ran {raw['unsafe_blocked']} blocked command(s) ({', '.join(rules) or 'guardrails'})"
    return unsafe_turn(messages)


def _trace_source(seg: Mapping[str, Any]) -> str:
    return f"trace:{seg.get('session_id')}#{seg.get('segment_index')}"


def _traj_source(t: Mapping[str, Any]) -> str:
    return f"trajectory:{t.get('scenario_id')}/{t.get('trajectory_id')}"


def build_sft(
    segments: Iterable[Mapping[str, Any]],
    trajectories: Iterable[Mapping[str, Any]],
    heldout: Sequence[HeldOut] = (),
    validation_fraction: float = VALIDATION_FRACTION,
    observation_chars: int | None = None,
) -> BuildResult:
    """SFT rows from gold trace segments and kept trajectories; everything refused is quarantined with why.
    A generated task's rows are split by family (``scenario_group``); ``observation_chars`` shortens long command
    outputs of trajectories (``shorten_observations``)."""
    heldout_ids = {h.id for h in heldout}
    skills = SkillGuard(heldout)
    rows: dict[str, SFTRow] = {}
    quarantine: list[Quarantined] = []
    counts: dict[str, int] = defaultdict(int)

    def add(row: SFTRow, raw: Mapping[str, Any]) -> None:
        why = (
            _why_bad_conversation(row.messages)
            or unparseable_turn(row.messages)
            or _contaminated(
                [m["content"] for m in row.messages],
                row.scenario_id,
                heldout,
                heldout_ids,
                skills,
                row.messages,
            )
        )
        if not why and (why := _unsafe_row(raw, row.messages)):
            counts["unsafe_excluded"] += 1
        if why:
            quarantine.append(_quarantine("sft_dataset", row.source, why, raw))
            return
        if row.example_id in rows:
            counts["duplicates"] += 1
            if row.source < rows[row.example_id].source:  # keep the same representative whatever the order
                rows[row.example_id] = row
            return
        rows[row.example_id] = row
        counts["from_traces" if row.source_kind == "trace" else "from_trajectories"] += 1

    for seg in segments:
        counts["segments_seen"] += 1
        if seg.get("tier") != "gold":
            continue
        source = _trace_source(seg)
        steps = list(seg.get("steps") or [])
        prompt = (seg.get("prompt") or "").strip()
        if not prompt or not steps:
            quarantine.append(_quarantine("sft_dataset", source, "gold segment without prompt or steps", seg))
            continue
        rendered = render_segment(prompt, steps)
        _count_rendering(counts, rendered)
        if not rendered.commands:
            quarantine.append(_quarantine("sft_dataset", source, _no_command_reason(rendered), seg))
            continue
        messages = rendered.messages
        add(
            SFTRow(
                example_id=_hash(messages),
                source_kind="trace",
                source=source,
                repo=seg.get("repo"),
                session_id=seg.get("session_id"),
                segment_id=seg.get("segment_id"),
                segment_index=seg.get("segment_index"),
                tier="gold",
                messages=messages,
                n_messages=len(messages),
                n_chars=sum(len(m["content"]) for m in messages),
                split=split_for(f"session:{seg.get('session_id')}", validation_fraction),
            ),
            seg,
        )

    for t in trajectories:
        counts["trajectories_seen"] += 1
        if not t.get("kept"):
            continue
        source = _traj_source(t)
        if why := _external(t.get("scenario_id")):
            quarantine.append(_quarantine("sft_dataset", source, why, t))
            continue
        if t.get("split") not in (None, "train"):
            quarantine.append(
                _quarantine("sft_dataset", source, f"trajectory of a {t.get('split')!r} scenario", t)
            )
            continue
        messages = shorten_observations(_messages(t.get("messages")), observation_chars)
        difficulty = t.get("difficulty")
        add(
            SFTRow(
                example_id=_hash(messages),
                source_kind="trajectory",
                source=source,
                scenario_id=t.get("scenario_id"),
                trajectory_id=t.get("trajectory_id"),
                sample_index=t.get("sample_index"),
                category=t.get("category"),
                difficulty=int(difficulty) if difficulty is not None else None,
                family=family_of(str(t.get("scenario_id") or "")),
                messages=messages,
                n_messages=len(messages),
                n_chars=sum(len(m["content"]) for m in messages),
                split=split_for(scenario_group(t.get("scenario_id")), validation_fraction),
            ),
            t,
        )

    ordered = sorted(rows.values(), key=lambda r: r.source)
    counts["rows"] = len(ordered)
    counts["quarantined"] = len(quarantine)
    counts["validation"] = sum(r.split == "validation" for r in ordered)
    return BuildResult(rows=[r.model_dump() for r in ordered], quarantine=quarantine, counts=dict(counts))


def first_divergence(a: Sequence[Mapping[str, str]], b: Sequence[Mapping[str, str]]) -> int | None:
    """Index of the first assistant turn where two conversations differ (None if they never do).

    Everything before it is shared (same task, same earlier commands and so the same outputs). If the
    conversations differ first in a non-assistant turn (a different observation for the same command), the
    environment, not the operator, diverged, and the pair says nothing about behaviour: None.
    """
    for i in range(min(len(a), len(b))):
        if a[i]["role"] != b[i]["role"] or a[i]["content"] != b[i]["content"]:
            return i if a[i]["role"] == "assistant" and b[i]["role"] == "assistant" else None
    if len(a) != len(b):
        i = min(len(a), len(b))
        longer = a if len(a) > len(b) else b
        return i if longer[i]["role"] == "assistant" else None
    return None


def make_pair(
    chosen: list[dict[str, str]], rejected: list[dict[str, str]]
) -> tuple[int, list, list, list] | None:
    k = first_divergence(chosen, rejected)
    if k is None or k >= len(chosen) or k >= len(rejected):
        return None
    return k, chosen[:k], chosen[k:], rejected[k:]


def build_dpo(
    segments: Iterable[Mapping[str, Any]],
    trajectories: Iterable[Mapping[str, Any]],
    heldout: Sequence[HeldOut] = (),
    validation_fraction: float = VALIDATION_FRACTION,
    max_pairs_per_group: int = MAX_PAIRS_PER_GROUP,
) -> BuildResult:
    """Preference pairs on the same task: kept vs rejected rollouts of one scenario; passing (gold/silver or
    verified) vs failed trace segments with the same normalised prompt."""
    heldout_ids = {h.id for h in heldout}
    skills = SkillGuard(heldout)
    quarantine: list[Quarantined] = []
    counts: dict[str, int] = defaultdict(int)
    # group -> (passing [(source, messages, meta)], failing [...])
    groups: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    meta: dict[str, dict[str, Any]] = {}

    for t in trajectories:
        counts["trajectories_seen"] += 1
        source = _traj_source(t)
        if why := _external(t.get("scenario_id")):
            quarantine.append(_quarantine("dpo_dataset", source, why, t))
            continue
        if t.get("split") not in (None, "train"):
            quarantine.append(
                _quarantine("dpo_dataset", source, f"trajectory of a {t.get('split')!r} scenario", t)
            )
            continue
        messages = _messages(t.get("messages"))
        why = _why_bad_conversation(messages) if t.get("kept") else (None if messages else "no messages")
        if why:
            quarantine.append(_quarantine("dpo_dataset", source, why, t))
            continue
        key = f"scenario:{t.get('scenario_id')}"
        meta[key] = {"source_kind": "trajectory", "scenario_id": t.get("scenario_id"), "repo": None}
        kept, reason = bool(t.get("kept")), t.get("reject_reason")
        if kept and (unsafe := _unsafe_row(t, messages)):  # never the chosen side; a fine rejected one
            kept, reason = False, f"unsafe_command: {unsafe}"
            counts["unsafe_demoted_to_rejected"] += 1
        groups[key][0 if kept else 1].append((source, messages, reason))

    for seg in segments:
        counts["segments_seen"] += 1
        tier = seg.get("tier")
        passing = tier in ("gold", "silver") or (seg.get("verification_passed") is True and tier != "failed")
        if not (passing or tier == "failed"):
            continue
        prompt = (seg.get("prompt") or "").strip()
        if not prompt or not seg.get("steps"):
            continue
        rendered = render_segment(prompt, list(seg["steps"]), add_exit=passing)
        if not rendered.commands:
            counts["segments_without_shell_commands"] += 1
            continue
        label = f"tier {tier}"
        if passing and (unsafe := _unsafe_row(seg, rendered.messages)):
            passing, label = False, f"unsafe_command: {unsafe}"
            counts["unsafe_demoted_to_rejected"] += 1
        key = f"task:{seg.get('repo')}:{_hash(normalise_text(prompt))}"
        meta[key] = {"source_kind": "trace", "scenario_id": None, "repo": seg.get("repo")}
        groups[key][0 if passing else 1].append((_trace_source(seg), rendered.messages, label))

    rows: dict[str, DPORow] = {}
    for key in sorted(groups):
        good, bad = groups[key]
        if not good or not bad:
            continue
        counts["groups_with_both"] += 1
        good.sort(key=lambda x: x[0])
        bad.sort(key=lambda x: x[0])
        made = 0
        for j, (bad_src, bad_msgs, reason) in enumerate(bad):
            if made >= max_pairs_per_group:
                break
            # try the passing attempts round-robin so pairs spread over them
            for k in range(len(good)):
                good_src, good_msgs, _ = good[(j + k) % len(good)]
                pair = make_pair(good_msgs, bad_msgs)
                if pair is None:
                    continue
                turn, prompt, chosen, rejected = pair
                why = _contaminated(
                    [m["content"] for m in prompt + chosen + rejected],
                    meta[key]["scenario_id"],
                    heldout,
                    heldout_ids,
                    skills,
                    prompt + chosen,
                )
                if why:
                    quarantine.append(_quarantine("dpo_dataset", f"{good_src} vs {bad_src}", why, {}))
                    break
                pid = _hash(prompt, chosen, rejected)
                if pid in rows:
                    counts["duplicates"] += 1
                    break
                rows[pid] = DPORow(
                    pair_id=pid,
                    source_kind=meta[key]["source_kind"],
                    repo=meta[key]["repo"],
                    scenario_id=meta[key]["scenario_id"],
                    task_key=key,
                    chosen_source=good_src,
                    rejected_source=bad_src,
                    rejected_reason=reason,
                    prompt=prompt,
                    chosen=chosen,
                    rejected=rejected,
                    split_turn=turn,
                    split=split_for(
                        scenario_group(meta[key]["scenario_id"]) if meta[key]["scenario_id"] else key,
                        validation_fraction,
                    ),
                )
                made += 1
                break
            else:
                counts["pairs_without_divergence"] += 1
    ordered = sorted(rows.values(), key=lambda r: (r.task_key, r.pair_id))
    counts["rows"] = len(ordered)
    counts["quarantined"] = len(quarantine)
    counts["validation"] = sum(r.split == "validation" for r in ordered)
    return BuildResult(rows=[r.model_dump() for r in ordered], quarantine=quarantine, counts=dict(counts))


def contamination_violations(
    rows: Iterable[Mapping[str, Any]], heldout: Sequence[HeldOut]
) -> list[dict[str, str]]:
    """Rows of a written dataset (SFT or DPO) that derive from or contain a held-out scenario's task, or are a
    skill twin of one (the same goal with the same commands: ``SkillGuard``)."""
    heldout_ids = {h.id for h in heldout}
    skills = SkillGuard(heldout)
    out = []
    for r in rows:
        texts = [
            m["content"] for col in ("messages", "prompt", "chosen", "rejected") for m in (r.get(col) or [])
        ]
        conversation = list(r.get("messages") or []) or [*(r.get("prompt") or []), *(r.get("chosen") or [])]
        why = _contaminated(texts, r.get("scenario_id"), heldout, heldout_ids, skills, conversation)
        if why:
            out.append(
                {
                    "row": str(r.get("example_id") or r.get("pair_id")),
                    "source": str(r.get("source") or r.get("chosen_source")),
                    "reason": why,
                }
            )
    return out


def data_version(table: pa.Table) -> str:
    """A content hash of a dataset table: the schedule retrains only when this changes."""
    ids = table.column("example_id" if "example_id" in table.column_names else "pair_id").to_pylist()
    splits = table.column("split").to_pylist()
    return _hash(sorted(zip(ids, splits, strict=True)))


def token_stats(tokenizer: Any, rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Token counts of SFT rows under a real chat template (min/mean/p50/p95/max, total)."""
    counts = []
    for r in rows:
        msgs = r.get("messages") or (list(r.get("prompt") or []) + list(r.get("chosen") or []))
        text = tokenizer.apply_chat_template(list(msgs), tokenize=False)
        counts.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    if not counts:
        return {"total": 0}
    counts.sort()
    return {
        "total": sum(counts),
        "min": counts[0],
        "mean": round(sum(counts) / len(counts), 1),
        "p50": counts[len(counts) // 2],
        "p95": counts[min(len(counts) - 1, int(0.95 * len(counts)))],
        "max": counts[-1],
    }


def load_hf_dataset(parquet_path: str | Any) -> Any:
    """A written dataset as a ``datasets.DatasetDict`` with ``train`` and ``validation`` (from the split column)."""
    from datasets import DatasetDict, load_dataset

    full = load_dataset("parquet", data_files={"rows": str(parquet_path)})["rows"]
    return DatasetDict(
        {name: full.filter(lambda r, n=name: r["split"] == n) for name in ("train", "validation")}
    )
