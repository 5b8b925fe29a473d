"""Teacher authoring (sekft stage A): sample taxonomy combinations, ask a model for a bundle, validate, retry with
the error, deduplicate near-identical tasks.

The teacher only proposes: every authored bundle still has to pass the reference gate in a real sandbox, so the
authoring model is never the one that certifies a task.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Iterable

from pydantic import BaseModel

from bashgym_assets.llm import LLMError, chat_completion
from bashgym_assets.sandbox.layout import SESSION_ACCOUNTS
from bashgym_assets.scenarios.bundle import ScenarioBundle, parse_bundle

CATEGORIES = [
    "files",
    "text",
    "archives",
    "permissions",
    "users",
    "processes",
    "services",
    "logs",
    "git",
    "data",
    "disk",
    "environment",
    "scripting",
    "scheduling",
]
DIFFICULTIES = [1, 2, 3, 4]
MODES = ["direct", "announced"]
DOC_DEPTHS = ["terse", "standard", "detailed"]

SYSTEM_PROMPT = """You write shell-task scenarios for training and testing shell agents. A scenario runs in a fresh \
Debian 12 container with no network (bash, coreutils, findutils, grep, sed, gawk, tar, gzip, zip/unzip, git, jq, \
sqlite3, python3, cron, procps, util-linux, passwd). The operator is the unprivileged user `operator` (home \
/home/operator) unless the task needs root, or is a service's own work: then the service account `app` (uid 999, \
home /srv/app, private to it; it exists only when the task runs as app, so setup may then chown files to app:app).

Reply with ONE JSON object and nothing else, with these fields:
  "task": what the operator is asked to do, in plain words (omit it only in announced mode, see below)
  "category": the category you were given
  "difficulty": the integer difficulty you were given (1 easy .. 4 hard, multi-step)
  "setup": list of shell commands run as root before the operator starts (create the files, users, repos ...;
           files the operator works on must belong to the operator: chown -R operator:operator ...)
  "files": optional object {{absolute path: file content}} written before setup
  "user": {users}
  "workdir": optional absolute start directory
  "check": a bash script run as root AFTER the operator finished; exit 0 iff the task is done. It must inspect the
           final state (files, permissions, processes, databases), be deterministic, FAIL on the untouched setup,
           and reject plausible wrong answers (not only the empty one).
  "reference": list of shell commands, one per turn, that solve the task as the operator
  "announcement": (announced mode only) the text shown at login instead of the task; it points at the provider
  "provider": (announced mode only) {{"name": command name, "script": full script starting with #!/bin/bash whose
              --help prints the directives of the task}}
""".format(users=" or ".join(f'"{u}"' for u in SESSION_ACCOUNTS))


class AuthoringAxes(BaseModel):
    """One point of the taxonomy a teacher is asked to fill."""

    category: str
    difficulty: int
    mode: str = "direct"
    doc_depth: str = "standard"


class AuthoringFailure(BaseModel):
    """A request that produced no valid bundle after every retry (quarantined with its reason)."""

    axes: AuthoringAxes
    attempts: int
    reason: str
    last_output: str = ""


class AuthoringReport(BaseModel):
    bundles: list[ScenarioBundle]
    failures: list[AuthoringFailure]
    duplicates: list[str]  # ids of authored bundles dropped as near-duplicates
    attempts: int


def sample_axes(n: int, seed: int = 0) -> list[AuthoringAxes]:
    """``n`` combinations spread over the taxonomy: a shuffled walk through the full product, repeated as needed."""
    grid = list(itertools.product(CATEGORIES, DIFFICULTIES, MODES, DOC_DEPTHS))
    rng = random.Random(seed)
    rng.shuffle(grid)
    # Round-robin over categories so a small n still covers many of them.
    by_cat = {c: [g for g in grid if g[0] == c] for c in CATEGORIES}
    order = [by_cat[c][i] for i in range(len(grid) // len(CATEGORIES)) for c in CATEGORIES]
    out = [AuthoringAxes(category=c, difficulty=d, mode=m, doc_depth=p) for c, d, m, p in order]
    return [out[i % len(out)] for i in range(n)]


def request_prompt(axes: AuthoringAxes) -> str:
    depth = {
        "terse": "Keep the task text to one short sentence.",
        "standard": "Describe the task in two or three sentences.",
        "detailed": "Describe the task precisely, with exact paths, formats and edge cases.",
    }[axes.doc_depth]
    mode = (
        "Use announced mode: give an `announcement` shown at login that points at a provider program, and a "
        "`provider` whose `--help` reveals what to do; `task` may restate it briefly."
        if axes.mode == "announced"
        else "Use direct mode: no announcement, no provider."
    )
    return (
        f"Write one scenario. Category: {axes.category}. Difficulty: {axes.difficulty}. {mode} {depth} "
        "Reply with the JSON object only."
    )


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


def extract_json(text: str) -> str:
    """The JSON object in a reply: inside a code fence if there is one, else from the first ``{`` to the last ``}``."""
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    return text[start : end + 1]


def bundle_from_reply(text: str, axes: AuthoringAxes, source: str) -> ScenarioBundle:
    """Parse and validate one reply against the bundle model and the requested axes; raises ValueError."""
    try:
        data = json.loads(extract_json(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("the reply must be one JSON object")
    data.setdefault("category", axes.category)
    data.setdefault("difficulty", axes.difficulty)
    # An empty task in announced mode is the bundle model's rule (task = announcement), the same for files.
    data.pop("id", None)  # ids are content hashes for authored bundles
    data["source"] = source
    bundle = parse_bundle(data)
    if bundle.category != axes.category:
        raise ValueError(f"category must be {axes.category!r}, got {bundle.category!r}")
    if axes.mode == "announced" and not (bundle.announcement and bundle.provider):
        raise ValueError("announced mode needs both `announcement` and `provider`")
    return bundle


_WORD = re.compile(r"[a-z0-9_./-]+")


def task_tokens(bundle: ScenarioBundle) -> set[str]:
    return set(_WORD.findall((bundle.announcement or bundle.task).lower()))


def near_duplicate(a: ScenarioBundle, b: ScenarioBundle, threshold: float = 0.8) -> bool:
    """Same content hash, or task texts whose word sets overlap by ``threshold`` (Jaccard)."""
    if a.content_hash() == b.content_hash():
        return True
    ta, tb = task_tokens(a), task_tokens(b)
    if not ta or not tb:
        return False
    return len(ta & tb) / len(ta | tb) >= threshold


def dedupe(
    bundles: Iterable[ScenarioBundle], existing: Iterable[ScenarioBundle] = (), threshold: float = 0.8
) -> tuple[list[ScenarioBundle], list[str]]:
    """Keep the first of each near-duplicate group (``existing`` ones always win); return kept + dropped ids."""
    kept: list[ScenarioBundle] = []
    seen = list(existing)
    dropped: list[str] = []
    for bundle in bundles:
        if any(near_duplicate(bundle, other, threshold) for other in seen):
            dropped.append(bundle.id)
            continue
        kept.append(bundle)
        seen.append(bundle)
    return kept, dropped


def author_bundles(
    model: str,
    n: int,
    api_base: str | None = None,
    seed: int = 0,
    max_attempts: int = 3,
    existing: Iterable[ScenarioBundle] = (),
    temperature: float = 0.7,
    timeout_s: float = 120.0,
    axes: list[AuthoringAxes] | None = None,
    give_up_after: int = 3,
) -> AuthoringReport:
    """Ask ``model`` for ``n`` bundles across the taxonomy (or for the given ``axes``); malformed replies are
    retried with the validation error shown to the model. After ``give_up_after`` requests in a row end in a
    model error (server down, bad key) the rest are recorded as skipped instead of each waiting for its timeout."""
    source = f"teacher:{model}"
    authored: list[ScenarioBundle] = []
    failures: list[AuthoringFailure] = []
    attempts = 0
    model_errors_in_a_row = 0
    for point in axes if axes is not None else sample_axes(n, seed):
        if give_up_after and model_errors_in_a_row >= give_up_after:
            failures.append(
                AuthoringFailure(
                    axes=point,
                    attempts=0,
                    reason=f"skipped: the teacher failed {model_errors_in_a_row} requests in a row",
                )
            )
            continue
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": request_prompt(point)},
        ]
        reason, last, tries = "", "", 0
        while tries < max_attempts:
            tries += 1
            attempts += 1
            try:
                last = chat_completion(
                    model,
                    messages,
                    api_base=api_base,
                    temperature=temperature,
                    max_tokens=2048,
                    timeout_s=timeout_s,
                )
            except LLMError as exc:
                reason = f"model error: {exc}"
                model_errors_in_a_row += 1
                break
            model_errors_in_a_row = 0
            try:
                authored.append(bundle_from_reply(last, point, source))
                reason = ""
                break
            except ValueError as exc:
                reason = f"invalid bundle: {exc}"
                messages += [
                    {"role": "assistant", "content": last},
                    {
                        "role": "user",
                        "content": f"That is not a valid scenario: {exc}. Reply with the "
                        "corrected JSON object only.",
                    },
                ]
        if reason:
            failures.append(
                AuthoringFailure(axes=point, attempts=tries, reason=reason, last_output=last[:2000])
            )
    kept, dropped = dedupe(authored, existing)
    return AuthoringReport(bundles=kept, failures=failures, duplicates=dropped, attempts=attempts)
