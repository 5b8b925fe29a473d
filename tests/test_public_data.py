"""Public data importers: shell-tasks through ``datasets`` (parquet and JSON Lines folders, broken files, pending
tasks proved by a solver) and NL2Bash-style pairs checked by execution equivalence in real sandboxes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from openai_server import Answer, OpenAIServer

from bashgym_assets.rollout.episode import EpisodeLimits
from bashgym_assets.rollout.operators import LiteLLMOperator
from bashgym_assets.rollout.pending import CHECK_PASSES_BEFORE, NOT_SOLVED, solve_pending
from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.gate import REFERENCE_FAILS, gate_bundle
from bashgym_assets.scenarios.nl2bash import (
    ANSWER_FILE,
    IMAGE_COMMANDS,
    NL2BASH_PREFIX,
    analyse,
    build_world,
    certify,
    load_nl2bash,
    pair_to_bundle,
    record_to_pair,
)
from bashgym_assets.scenarios.public_data import (
    SHELL_TASKS_PREFIX,
    UNPROVED_REFERENCE,
    PendingTask,
    load_shell_tasks,
)


def write_jsonl(path: Path, records: list[Any], tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + tail)
    return path


def parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    """A parquet file holding every key of every row (``from_pylist`` would take the first row's keys only)."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    pq.write_table(pa.Table.from_pylist([{k: row.get(k) for k in keys} for row in rows]), path)
    return path


def shell_task(task_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "task": f"Task {task_id}: create /tmp/{task_id}.txt",
        "setup_commands": ["mkdir -p /opt/app"],
        "success_condition": f"test -f /tmp/{task_id}.txt",
        "difficulty_level": 2,
        **extra,
    }


# ---- shell-tasks through datasets --------------------------------------------------------------------------------
def test_shell_tasks_parquet_and_jsonl_folders_keep_the_good_and_quarantine_the_broken(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "shell-tasks"
    (folder / "data").mkdir(parents=True)
    parquet(
        folder / "data" / "train-00000.parquet",
        [
            shell_task("p-solved", solution="touch /tmp/p-solved.txt"),
            shell_task("p-pending"),
            shell_task("p-list-ref", reference=["cd /tmp", "touch p-list-ref.txt"], difficulty_level=9),
            {**shell_task("p-no-check"), "success_condition": None},
        ],
    )
    pq.write_table(
        pa.table(
            {
                "task": ["x"],
                "setup_commands": [7],
                "success_condition": ["true"],
                "difficulty_level": ["hard"],
            }
        ),
        folder / "data" / "odd-types.parquet",
    )
    (folder / "data" / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet")
    write_jsonl(
        folder / "more.jsonl",
        [
            shell_task("j-pending", difficulty_level="3"),
            {"task": "no check here", "setup_commands": []},
            shell_task("j-setup-number", setup_commands=42),
            shell_task("j-task-list", task=["a", "b"]),
            shell_task("j-blank", task="   "),
            shell_task("j-solved", solution="touch /tmp/j-solved.txt\n"),
            shell_task("p-pending"),  # the same id as a parquet record: the first one wins
        ],
        tail=b'{"task_id": "j-truncated", "task": "cut off in the midd',
    )
    write_jsonl(
        folder / "mixed-encoding.jsonl",
        [shell_task("enc-good")],
        tail=b'{"task_id": "enc-bad", "task": "caf\xe9", "success_condition": "true"}\n',
    )
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "notes.txt").write_text("not data\n")
    (folder / "README.md").write_text("# shell-tasks\n")

    imported = load_shell_tasks(folder)

    assert sorted(b.id for b in imported.bundles) == ["st.j-solved", "st.p-list-ref", "st.p-solved"]
    assert sorted(p.id for p in imported.pending) == ["st.enc-good", "st.j-pending", "st.p-pending"]
    solved = {b.id: b for b in imported.bundles}
    assert solved["st.p-solved"].reference == ["touch /tmp/p-solved.txt"]
    assert solved["st.p-list-ref"].reference == ["cd /tmp", "touch p-list-ref.txt"]
    assert solved["st.p-list-ref"].difficulty == 4 and solved["st.p-solved"].user == "root"
    assert solved["st.p-solved"].source.startswith("import:shell-tasks:") and all(
        b.id.startswith(SHELL_TASKS_PREFIX) for b in imported.bundles
    )
    assert {p.id: p.difficulty for p in imported.pending}["st.j-pending"] == 3
    reasons = {Path(q.source.split(":")[0]).name + ":" + q.reason for q in imported.quarantine}
    text = "\n".join(sorted(reasons))
    for expected in (
        "train-00000.parquet:missing field: success_condition",
        "odd-types.parquet:setup_commands must be a list of shell commands",
        "corrupt.parquet:unreadable by datasets",
        "more.jsonl:missing field: success_condition",
        "more.jsonl:setup_commands must be a list of shell commands (text), got int",
        "more.jsonl:task must be text, got list",
        "more.jsonl:task is empty",
        "more.jsonl:duplicate id 'st.p-pending'",
        "more.jsonl:not valid JSON (a truncated line?)",
        "mixed-encoding.jsonl:not UTF-8 text",
        "empty.jsonl:an empty file",
        "notes.txt:not a data file",
    ):
        assert expected in text, f"{expected!r} not in:\n{text}"
    assert "README" not in text
    assert imported.counts()["bundles"] == 3 and imported.counts()["pending"] == 3


def test_a_single_jsonl_file_and_the_limit(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tasks.jsonl", [shell_task(f"t{i}") for i in range(5)])
    assert [p.id for p in load_shell_tasks(path, limit=2).pending] == ["st.t0", "st.t1"]
    operator_tasks = load_shell_tasks(path, user="operator")
    assert {p.user for p in operator_tasks.pending} == {"operator"}


def test_hub_names_are_passed_through_to_load_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    calls: list[tuple[str, dict[str, Any]]] = []

    def fake_load_dataset(name: str, **kwargs: Any) -> Any:
        calls.append((name, kwargs))
        if name == "nobody/unreachable":
            raise ConnectionError("no network here")
        return datasets.DatasetDict(
            {
                "train": datasets.Dataset.from_list([shell_task("hub-1")]),
                "test": datasets.Dataset.from_list([shell_task("hub-2", solution="true")]),
            }
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    imported = load_shell_tasks("deathbyknowledge/shell-tasks", revision="main")
    assert calls == [("deathbyknowledge/shell-tasks", {"split": None, "revision": "main"})]
    assert [p.id for p in imported.pending] == ["st.hub-1"] and [b.id for b in imported.bundles] == [
        "st.hub-2"
    ]
    assert imported.pending[0].source == "import:shell-tasks:deathbyknowledge/shell-tasks[train]:1"
    down = load_shell_tasks("nobody/unreachable", split="train")
    assert not down.bundles and not down.pending
    assert "could not load 'nobody/unreachable' with datasets: no network here" in down.quarantine[0].reason


def test_pending_tasks_are_never_bundles(tmp_path: Path) -> None:
    imported = load_shell_tasks(write_jsonl(tmp_path / "t.jsonl", [shell_task("wait")]))
    (task,) = imported.pending
    assert isinstance(task, PendingTask) and not isinstance(task, ScenarioBundle) and not imported.bundles
    assert task.draft().reference == [UNPROVED_REFERENCE]  # a do-nothing placeholder, for playing only
    proved = task.prove(["touch /tmp/wait.txt"], "litellm:teacher")
    assert proved.reference == ["touch /tmp/wait.txt"] and "[reference by litellm:teacher]" in proved.source


# ---- NL2Bash pairs: reading and static judgement ------------------------------------------------------------------
def test_pair_layouts_and_broken_records(tmp_path: Path) -> None:
    folder = tmp_path / "pairs"
    folder.mkdir()
    write_jsonl(
        folder / "nl2bash.jsonl",
        [
            {"nl": "list all text files under the current directory", "cmd": "find . -name '*.txt'"},
            {"nl": "no command here"},
            {"nl": "a number", "cmd": 42},
            {"nl": "   ", "cmd": "ls"},
            {"nl": "list all text files under the current directory", "cmd": "find . -name '*.txt'"},
            {"nl": "fetch a page", "cmd": "curl -s https://example.com -o page.html"},
            {"nl": "delete logs as root", "cmd": "sudo rm -f *.log"},
            {"nl": "fuzzy find", "cmd": "fzf --query notes"},
            {"nl": "list everything on the system", "cmd": "find / -name '*.conf'"},
            {"nl": "print the time", "cmd": "date +%H:%M"},
            {"nl": "edit notes", "cmd": "vim notes.txt"},
            {"nl": "broken quoting", "cmd": "echo 'unterminated"},
            {"nl": "kill it", "cmd": "kill -9 1234"},
        ],
        tail=b'{"nl": "truncated", "cmd": "ls -',
    )
    (folder / "alfa-test.csv").write_text(
        "nl,bash,bash2,difficulty\n"
        "count the lines of notes.txt,wc -l < notes.txt,cat notes.txt | wc -l,0\n"
        "show the first line of README.md,head -n 1 README.md,sed -n 1p README.md,2\n"
        "a row with one field too many,ls,ls -1,0,extra\n"
    )
    parquet(
        folder / "intercode.parquet",
        [{"query": "copy notes.txt into backup", "gold": "cp notes.txt backup/"}],
    )
    (folder / "latin1.jsonl").write_bytes(b'{"nl": "caf\xe9", "cmd": "ls"}\n{"nl": "list", "cmd": "ls -1"}\n')

    imported = load_nl2bash(folder)

    by_nl = {b.task.split("\n")[0]: b for b in imported.bundles}
    assert set(by_nl) == {
        "List all text files under the current directory.",
        "Count the lines of notes.txt.",
        "Show the first line of README.md.",
        "Copy notes.txt into backup.",
        "List.",
    }
    assert all(
        b.id.startswith(NL2BASH_PREFIX) and b.source.startswith("import:nl2bash:") for b in imported.bundles
    )
    alfa = by_nl["Count the lines of notes.txt."]
    assert alfa.difficulty == 1 and by_nl["Show the first line of README.md."].difficulty == 3
    assert "'cat notes.txt | wc -l'" in alfa.check  # bash2 is a second reference the check accepts
    reasons = "\n".join(q.reason for q in imported.quarantine)
    for expected in (
        "missing field(s): command",
        "cmd must be text, got int",
        "nl is empty",
        "duplicate pair",
        "needs the network",
        "needs sudo",
        "needs fzf, which the sandbox image does not have",
        "uses /, outside the seeded world",
        "depends on the moment it runs (date)",
        "vim is interactive",
        "does not parse as bash",
        "acts on processes",
        "not valid JSON (a truncated line?)",
        "not UTF-8 text",
        "a CSV row of 5 fields under a header of 4",
    ):
        assert expected in reasons, f"{expected!r} not in:\n{reasons}"


def test_printing_and_writing_commands() -> None:
    printing = pair_to_bundle(record_to_pair({"nl": "find text files", "cmd": "find . -name '*.txt'"}))
    assert printing.reference == [f"find . -name '*.txt' > {ANSWER_FILE}"] and ANSWER_FILE in printing.task
    grouped = pair_to_bundle(record_to_pair({"nl": "two listings", "cmd": "ls; ls -a"}))
    assert grouped.reference == [f"{{ ls; ls -a\n}} > {ANSWER_FILE}"]
    writing = pair_to_bundle(record_to_pair({"nl": "delete the logs", "cmd": "find . -name '*.log' -delete"}))
    assert writing.reference == ["find . -name '*.log' -delete"] and ANSWER_FILE not in writing.task
    assert analyse("sed -i 's/a/b/' x.conf").writes and not analyse("sed 's/a/b/' x.conf").writes
    assert analyse("find . -type f | xargs rm").writes and analyse("ls > listing.txt").writes
    assert not analyse("tar -tzf a.tgz").writes and analyse("tar -xzf a.tgz").writes
    assert analyse("find . -name '*.py'").unordered and not analyse("find . -name '*.py' | sort").unordered


def test_worlds_are_seeded_and_tailored_to_the_command() -> None:
    pair = record_to_pair({"nl": "copy notes", "cmd": "cp notes.txt backup/ && grep -r 'ERROR' logs"})
    one, again, other = pair_to_bundle(pair), pair_to_bundle(pair), pair_to_bundle(pair, seed=7)
    assert one == again and one.files != other.files and one.id == other.id
    home = "/home/operator/"
    assert f"{home}notes.txt" in one.files and "backup" in one.setup[0]
    assert sum("ERROR" in text for path, text in one.files.items() if path.startswith(f"{home}logs/")) >= 1
    plan = build_world("s", analyse("tar -xzf data.tar.gz && mkdir reports && cat *.csv").hints)
    assert plan.generated["data.tar.gz"].startswith("tar -czf") and "reports" not in plan.dirs
    assert (
        sum(p.endswith(".csv") and "/" not in p for p in plan.files) >= 1
    )  # a bare glob needs a top-level one
    assert len(plan.dirs) >= 3 and any(text == "" for text in plan.files.values()) and plan.links
    assert any(
        not any(p.startswith(d + "/") for p in [*plan.files, *plan.generated, *plan.dirs]) for d in plan.dirs
    )
    assert {kind for kind, _ in plan.mtimes.values()} == {"at", "ago"}
    assert len({mode for mode in plan.modes.values()}) >= 3


# ---- real sandboxes ---------------------------------------------------------------------------------------------
@pytest.mark.docker
def test_image_commands_are_the_images(sandbox_image: str) -> None:
    from bashgym_assets.sandbox import Sandbox, SandboxSpec

    with Sandbox(SandboxSpec(image=sandbox_image)) as box:
        listed = set(box.run_as_root("compgen -c", timeout_s=20).stdout.split())
    assert listed >= IMAGE_COMMANDS, sorted(IMAGE_COMMANDS - listed)


@pytest.mark.docker
def test_nl2bash_pairs_through_the_gate_and_wrong_answers_fail_the_check(sandbox_image: str) -> None:
    pairs = {
        "find": {"nl": "list the text files under the current directory", "cmd": "find . -name '*.txt'"},
        "copy": {"nl": "copy notes.txt into the backup folder", "cmd": "cp notes.txt backup/"},
        "alfa": {
            "nl": "count the lines of app.log",
            "bash": "wc -l < app.log",
            "bash2": "cat app.log | wc -l",
        },
        "noop": {"nl": "go to your home folder", "cmd": "cd ~"},
    }
    bundles = {k: pair_to_bundle(record_to_pair(v, k)) for k, v in pairs.items()}
    admitted, quarantine, _ = certify(bundles.values(), sandbox_image, max_parallel=2)
    assert [b.id for b in admitted] == [bundles[k].id for k in ("find", "copy", "alfa")]
    assert len(quarantine) == 1 and quarantine[0].reason.startswith("does nothing on its world")

    def played(key: str, command: str) -> Any:
        """The operator's answer played through the same check (the gate replays it as the reference)."""
        return gate_bundle(bundles[key].model_copy(update={"reference": [command]}), sandbox_image)

    wrong = [
        played("find", f"find . -name '*.md' > {ANSWER_FILE}"),
        played("copy", "cp notes.txt backup/notes.bak"),
        played("alfa", f"wc -w < app.log > {ANSWER_FILE}"),
    ]
    for result in wrong:
        assert not result.admitted and result.reason == REFERENCE_FAILS, result.detail
    assert "differs from what reference" in wrong[0].detail and "backup/notes.bak" in wrong[1].detail
    right = [
        played("find", f"find . -name '*.txt' | sort > {ANSWER_FILE}"),  # another order, same lines
        played("alfa", f"cat app.log | wc -l > {ANSWER_FILE}"),
    ]  # NL2SH-ALFA's second command
    assert all(r.admitted for r in right), [r.detail for r in right]


def policy(commands: list[str]) -> Callable[[dict], str | Answer]:
    def respond(body: dict) -> str | Answer:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return commands[turn] if turn < len(commands) else "exit"

    return respond


@pytest.mark.docker
def test_pending_tasks_are_proved_by_a_solver_or_stay_pending(tmp_path: Path, sandbox_image: str) -> None:
    records = [
        {
            "task_id": "sort-list",
            "task": "Sort /tmp/app/list.txt into /tmp/app/sorted.txt.",
            "setup_commands": [
                "mkdir -p /tmp/app",
                "printf 'pear\\napple\\nfig\\n' > /tmp/app/list.txt",
                "chown -R operator /tmp/app",
            ],
            "success_condition": '[ "$(cat /tmp/app/sorted.txt)" = "$(printf \'apple\\nfig\\npear\')" ]',
            "difficulty_level": 1,
        },
        {
            "task_id": "already-done",
            "task": "Make sure /tmp exists.",
            "setup_commands": [],
            "success_condition": "test -d /tmp",
            "difficulty_level": 1,
        },
    ]
    # operator tasks: the dataset's default (root) works the same, with slower tamper checks around each check
    imported = load_shell_tasks(write_jsonl(tmp_path / "tasks.jsonl", records), user="operator")
    sort_task, done_task = imported.pending
    limits = EpisodeLimits(max_turns=4, max_unusable_in_a_row=2, episode_timeout_s=60)

    # an unproved draft can never pass the gate: its placeholder reference does nothing
    assert not gate_bundle(sort_task.draft(), sandbox_image).admitted

    with OpenAIServer(
        policy(
            ["I would sort the list, then save it.", "Here is how you might do it.", "Sorting files is easy."]
        )
    ) as babbler:
        op = LiteLLMOperator(babbler.litellm_model, api_base=babbler.url)
        babbled = solve_pending([sort_task, done_task], op, sandbox_image, limits=limits, max_parallel=2)
    assert not babbled.proved and [p.id for p in babbled.pending] == [sort_task.id, done_task.id]
    assert babbled.pending[0].reason.startswith(NOT_SOLVED)
    assert babbled.pending[1].reason.startswith(CHECK_PASSES_BEFORE)

    with OpenAIServer(
        policy(["cat /tmp/app/list.txt", "sort /tmp/app/list.txt > /tmp/app/sorted.txt"])
    ) as teacher:
        op = LiteLLMOperator(teacher.litellm_model, api_base=teacher.url)
        report = solve_pending([sort_task], op, sandbox_image, limits=limits)
    (proved,) = report.proved
    assert not report.pending and report.outcomes[0].solved
    assert proved.reference == ["cat /tmp/app/list.txt", "sort /tmp/app/list.txt > /tmp/app/sorted.txt"]
    assert (
        proved.id == "st.sort-list" and proved.user == "operator" and "reference by litellm:" in proved.source
    )
    result = gate_bundle(proved, sandbox_image)  # proved, then certified like any bundle
    assert result.admitted, result.detail


def test_public_data_in_scenario_candidates_pending_kept_and_near_copies_of_eval_refused(
    tmp_path: Path, bashgym_home: Path
) -> None:
    """Wired into the asset: proved records are candidates, unproved ones wait in scenario_pending, and a record
    that near-copies a held-out pack task never becomes a training candidate."""
    import dagster as dg

    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.defs.scenarios import scenario_candidates
    from bashgym_assets.lake import Lake
    from bashgym_assets.scenarios.candidates import load_pack
    from bashgym_assets.scenarios.gate import HELD_OUT, TRAIN, split_for

    held = next(b for b in load_pack()[0] if split_for(b.id) == HELD_OUT)
    ids = iter(i for i in (f"pub-{k}" for k in range(200)) if split_for(f"st.{i}") == TRAIN)
    records = [
        {
            "id": next(ids),
            "task": "Write the word ready into /tmp/ready.txt",
            "setup_commands": [],
            "success_condition": "grep -qx ready /tmp/ready.txt",
            "difficulty_level": 1,
            "solution": "echo ready > /tmp/ready.txt",
        },
        {
            "id": next(ids),
            "task": held.task,
            "setup_commands": held.setup,
            "success_condition": held.check,
            "difficulty_level": held.difficulty,
            "solution": "\n".join(held.reference),
        },
        {
            "id": next(ids),
            "task": "Remove every .lock file in /run/zeus",
            "setup_commands": ["mkdir -p /run/zeus"],
            "success_condition": "! ls /run/zeus/*.lock",
            "difficulty_level": 1,
        },
    ]
    folder = tmp_path / "shell-tasks"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    result = dg.materialize(
        [scenario_candidates],
        resources={"bashgym": BashgymHome(home=str(bashgym_home))},
        run_config={
            "ops": {
                "scenario_candidates": {
                    "config": {"include_pack": False, "include_external": False, "shell_tasks": str(folder)}
                }
            }
        },
    )
    assert result.success
    lake = Lake(root=bashgym_home / "lake")
    candidates = {r["scenario_id"] for r in lake.read_rows("scenario_candidates")}
    assert candidates == {f"st.{records[0]['id']}"}
    assert [r["id"] for r in lake.read_rows("scenario_pending")] == [f"st.{records[2]['id']}"]
    reasons = [r["reason"] for r in lake.read_rows("scenario_candidates_quarantine")]
    assert any("of evaluation task " + held.id in r for r in reasons), reasons
