"""Small, hand-written upstream rows (tiered trace segments, verified trajectories, gated scenarios) in the
contract's columns, so the dataset and training stages can be exercised and tested before, or without, the
upstream stages' real output."""

from __future__ import annotations

import json
from typing import Any

from bashgym_assets.rollout.transcript import HOSTNAME

TASKS = [
    (
        "count-lines",
        "files",
        "Count the lines of /home/operator/data.txt and write the number to count.txt.",
        ["wc -l < data.txt > count.txt", "cat count.txt"],
        ["3"],
    ),
    (
        "make-backup",
        "archives",
        "Create backup.tar.gz containing the reports folder.",
        ["tar -czf backup.tar.gz reports", "tar -tzf backup.tar.gz"],
        ["reports/\nreports/a.txt"],
    ),
    (
        "lock-key",
        "permissions",
        "Make secret.key readable only by its owner.",
        ["chmod 600 secret.key", "stat -c %a secret.key"],
        ["600"],
    ),
    (
        "unique-names",
        "text",
        "Write the unique names from names.txt, sorted, to unique.txt.",
        ["sort -u names.txt > unique.txt", "wc -l unique.txt"],
        ["4 unique.txt"],
    ),
]


def orientation(user: str = "operator", cwd: str = "/home/operator") -> str:
    return f"You are logged in to {HOSTNAME} as {user}. Working directory: {cwd}.\n{user}@{HOSTNAME}:{cwd}$"


def trajectory_messages(
    task: str, commands: list[str], outputs: list[str] | None = None, end_with_exit: bool = True
) -> list[dict[str, str]]:
    outputs = outputs or []
    msgs = [{"role": "system", "content": orientation()}, {"role": "user", "content": task}]
    for i, cmd in enumerate(commands):
        out = outputs[i] if i < len(outputs) else ""
        msgs += [
            {"role": "assistant", "content": cmd},
            {"role": "user", "content": f"{out}\n[exit code: 0]" if out else "[exit code: 0]"},
        ]
    if end_with_exit:
        msgs.append({"role": "assistant", "content": "exit"})
    return msgs


def trajectory(
    scenario_id: str,
    task: str,
    commands: list[str],
    kept: bool,
    sample_index: int = 0,
    category: str = "files",
    split: str = "train",
    reject_reason: str | None = None,
    outputs: list[str] | None = None,
    end_with_exit: bool = True,
) -> dict[str, Any]:
    msgs = trajectory_messages(task, commands, outputs, end_with_exit)
    return {
        "trajectory_id": f"{scenario_id}-{sample_index}",
        "scenario_id": scenario_id,
        "category": category,
        "difficulty": 1,
        "split": split,
        "operator": "reference" if kept else "synthetic-bad",
        "sample_index": sample_index,
        "kept": kept,
        "verified": kept,
        "terminated": end_with_exit,
        "commands_only": True,
        "reject_reason": None if kept else (reject_reason or "check failed"),
        "n_turns": len(commands) + int(end_with_exit),
        "duration_s": 1.0,
        "messages": msgs,
        "source": "synthetic",
    }


def step(
    index: int,
    command: str,
    output: str = "",
    exit_code: int | None = 0,
    tool: str = "Bash",
    cwd: str = "/work/repo",
) -> dict[str, Any]:
    return {
        "index": index,
        "tool_name": tool,
        "tool_use_id": f"t{index}",
        "input": json.dumps({"command": command}),
        "command": command if tool == "Bash" else None,
        "output": output,
        "exit_code": exit_code,
        "success": exit_code == 0 if exit_code is not None else None,
        "is_error": bool(exit_code),
        "cwd": cwd,
        "started_at": None,
        "finished_at": None,
        "sidechain": False,
        "agent_id": None,
        "prompt_index": 0,
    }


def segment(
    session_id: str,
    segment_index: int,
    prompt: str,
    steps: list[dict[str, Any]],
    tier: str,
    repo: str = "demo-repo",
    verification_passed: bool | None = None,
) -> dict[str, Any]:
    return {
        "segment_id": f"{session_id}:{segment_index}",
        "session_id": session_id,
        "repo": repo,
        "segment_index": segment_index,
        "prompt": prompt,
        "steps": steps,
        "tier": tier,
        "quality_score": {"gold": 0.9, "silver": 0.75, "bronze": 0.6, "failed": 0.2}[tier],
        "verification_passed": verification_passed if verification_passed is not None else tier != "failed",
        "override": None,
    }


def scenario(sid: str, task: str, split: str) -> dict[str, Any]:
    return {
        "id": sid,
        "task": task,
        "split": split,
        "category": "files",
        "difficulty": 1,
        "reference": ["true"],
        "check": "true",
    }


def demo_inputs(copies: int = 2) -> dict[str, list[dict[str, Any]]]:
    """Trajectories (kept + rejected per scenario), trace segments in two repos and the gated scenarios,
    including one held-out scenario whose trajectory must never reach a dataset."""
    trajectories, scenarios = [], []
    for sid, cat, task, cmds, outs in TASKS:
        scenarios.append(scenario(sid, task, "train"))
        for k in range(copies):
            trajectories.append(
                trajectory(sid, task, cmds, kept=True, sample_index=k, category=cat, outputs=outs)
            )
        trajectories.append(
            trajectory(
                sid,
                task,
                [f"echo 'I would run {cmds[0]}'"],
                kept=False,
                sample_index=copies,
                category=cat,
                end_with_exit=True,
            )
        )
    held_task = "Delete every file in /tmp/cache older than seven days."
    scenarios.append(scenario("purge-cache", held_task, "held_out"))
    segments = [
        segment(
            "sess-a",
            0,
            "run the tests and fix the failing import",
            [
                step(0, "pytest -q", "1 failed", 1),
                step(1, "sed -i 's/improt/import/' app.py"),
                step(2, "pytest -q", "3 passed"),
            ],
            "gold",
            repo="repo-a",
        ),
        segment(
            "sess-a",
            1,
            "show the git log",
            [step(0, "git log --oneline -3", "abc fix\ndef init")],
            "silver",
            repo="repo-a",
        ),
        segment("sess-b", 0, "build the docs", [step(0, "make docs", "ok")], "gold", repo="repo-b"),
        segment(
            "sess-c",
            0,
            "build the docs",
            [step(0, "make doc", "make: *** No rule", 2)],
            "failed",
            repo="repo-b",
        ),
    ]
    return {"trajectories": trajectories, "segments": segments, "scenarios": scenarios}
