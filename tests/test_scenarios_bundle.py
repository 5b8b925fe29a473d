"""The bundle model, one-JSON-per-file load/save, the shell-tasks importer and candidate collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bashgym_assets.scenarios.bundle import (
    ScenarioBundle,
    import_shell_tasks,
    load_bundle,
    load_folder,
    parse_bundle,
    save_bundle,
)
from bashgym_assets.scenarios.candidates import PACK_DIR, collect_candidates, load_pack, merge_candidates

GOOD = {
    "task": "Create ~/done.txt",
    "category": "files",
    "difficulty": 1,
    "check": "test -f /home/operator/done.txt",
    "reference": ["touch ~/done.txt"],
}


def test_defaults_and_stable_content_id() -> None:
    a = parse_bundle(GOOD)
    b = parse_bundle({**GOOD, "source": "elsewhere"})
    assert a.user == "operator" and a.start_dir == "/home/operator" and not a.announced
    assert a.id == b.id and a.id.startswith("s-")  # the id hashes the task, not where it came from
    assert parse_bundle({**GOOD, "task": "Create ~/other.txt"}).id != a.id
    assert parse_bundle({**GOOD, "user": "root"}).start_dir == "/root"


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"difficulty": 5}, "difficulty"),
        ({"user": "admin"}, "user"),
        ({"reference": []}, "reference"),
        ({"check": "  "}, "check"),
        ({"files": {"relative/path": "x"}}, "files"),
        ({"provider": {"name": "Bad Name", "script": "#!/bin/bash"}}, "provider.name"),
        ({"provider": {"name": "tool", "script": "echo no shebang"}}, "provider.script"),
        ({"unknown_field": 1}, "unknown_field"),
        ({"id": "Has Spaces"}, "id"),
    ],
)
def test_invalid_bundles_name_the_field(patch: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field.split(".")[0]):
        parse_bundle({**GOOD, **patch})


def test_missing_fields_and_bad_json() -> None:
    with pytest.raises(ValueError, match="task"):
        parse_bundle({k: v for k, v in GOOD.items() if k != "task"})
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_bundle("{not json")


def test_save_load_roundtrip_and_folder_quarantine(tmp_path: Path) -> None:
    bundle = parse_bundle(
        {
            **GOOD,
            "provider": {"name": "tasks", "script": "#!/bin/bash\necho hi"},
            "announcement": "Run tasks --help",
        }
    )
    path = save_bundle(bundle, tmp_path)
    assert path.name == f"{bundle.id}.json"
    assert load_bundle(path) == bundle
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    (tmp_path / "no-id.json").write_text(json.dumps({**GOOD, "task": "other"}), encoding="utf-8")
    bundles, errors = load_folder(tmp_path)
    assert sorted(b.id for b in bundles) == sorted([bundle.id, "no-id"])  # id defaults to the file stem
    assert [Path(e.source).name for e in errors] == ["broken.json"]
    assert "not valid JSON" in errors[0].reason or "Expecting" in errors[0].reason


def test_import_shell_tasks_maps_fields_and_quarantines(tmp_path: Path) -> None:
    records = [
        {
            "task": "Count lines",
            "setup_commands": ["echo a > /tmp/f"],
            "success_condition": "test -f /tmp/n",
            "difficulty_level": 3,
            "solution": "wc -l /tmp/f > /tmp/n",
        },
        {
            "task": "No solution given",
            "setup_commands": [],
            "success_condition": "true",
            "difficulty_level": 1,
        },
        {"task": "Bad level", "success_condition": "true", "difficulty_level": "hard", "reference": ["true"]},
        {"setup_commands": []},
    ]
    (tmp_path / "tasks.json").write_text(json.dumps(records), encoding="utf-8")
    (tmp_path / "more.jsonl").write_text(
        json.dumps({**records[0], "task": "Count more", "difficulty_level": 9}) + "\n{oops\n",
        encoding="utf-8",
    )
    bundles, errors = import_shell_tasks([tmp_path])
    assert [b.task for b in bundles] == ["Count more", "Count lines"]
    imported = bundles[1]
    assert imported.setup == ["echo a > /tmp/f"] and imported.check == "test -f /tmp/n"
    assert imported.difficulty == 3 and imported.reference == ["wc -l /tmp/f > /tmp/n"]
    assert imported.source == "import:tasks.json" and imported.category == "imported"
    assert bundles[0].difficulty == 4  # clamped into 1..4
    reasons = " | ".join(e.reason for e in errors)
    assert len(errors) == 4
    assert "no reference solution" in reasons and "not an integer" in reasons
    assert "missing field(s): task, success_condition" in reasons and "not valid JSON" in reasons


def test_merge_quarantines_duplicate_ids() -> None:
    a = parse_bundle({**GOOD, "id": "same", "source": "pack"})
    b = parse_bundle({**GOOD, "id": "same", "task": "different", "source": "import:x.json"})
    merged, dupes = merge_candidates([a], [b])
    assert merged == [a]
    assert "duplicate id 'same'" in dupes[0].reason and dupes[0].source == "import:x.json"


def test_collect_candidates_from_pack_and_imports(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    save_bundle(parse_bundle({**GOOD, "id": "p1"}), pack)
    imports = tmp_path / "imports"
    imports.mkdir()
    (imports / "t.json").write_text(
        json.dumps({"task": "t", "success_condition": "true", "reference": ["true"]}), encoding="utf-8"
    )
    cands = collect_candidates(pack, imports)
    assert [b.id for b in cands.bundles][0] == "p1"
    assert cands.counts_by_origin == {"pack": 1, "import": 1}
    assert cands.bundles[0].source == "bashgym-pack"


def test_bundled_pack_is_valid_and_diverse() -> None:
    bundles, errors = load_pack(PACK_DIR)
    assert errors == [], errors
    assert len(bundles) >= 1
    assert len({b.id for b in bundles}) == len(bundles)
    for b in bundles:
        assert isinstance(b, ScenarioBundle)
        assert (PACK_DIR / f"{b.id}.json").exists(), f"{b.id}: file name must be the id"


# ---- the import folder: both layouts, told apart by content ---------------------------------------------------------
ANNOUNCED = {
    "task": "",
    "category": "files",
    "difficulty": 2,
    "announcement": "Work orders are waiting: run `orders --help`.",
    "provider": {"name": "orders", "script": "#!/bin/bash\necho 'Create ~/made'"},
    "check": "test -d /home/operator/made",
    "reference": ["orders --help", "mkdir ~/made"],
}
SHELL_TASK = {
    "task": "Write 7 into ~/n.txt",
    "setup_commands": ["true"],
    "difficulty_level": 1,
    "success_condition": "grep -qx 7 /home/operator/n.txt",
    "reference": ["echo 7 > ~/n.txt"],
}


def _write(folder: Path, name: str, content: str | bytes) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def test_import_folder_takes_bundles_and_shell_tasks_by_content(tmp_path: Path) -> None:
    import yaml

    from bashgym_assets.scenarios.bundle import import_scenario_files

    imports = tmp_path / "imports"
    # the project's own bundle layout: one JSON bundle (its id from the file name, as load_bundle does) ...
    _write(imports, "lone-bundle.json", json.dumps({**GOOD, "task": "Create ~/lone.txt"}))
    # ... a YAML list of bundles under a name that says nothing ...
    _write(
        imports,
        "pack/scenarios.data",
        yaml.safe_dump(
            [{**GOOD, "id": "yaml-1", "task": "Create ~/y1.txt"}, {**ANNOUNCED, "id": "yaml-announced"}]
        ),
    )
    # ... a wrapped list, and two YAML documents in one file
    _write(imports, "wrapped.json", json.dumps({"scenarios": [{**GOOD, "id": "wrapped-1", "task": "w"}]}))
    _write(
        imports,
        "two-docs",
        "---\n"
        + yaml.safe_dump({**GOOD, "id": "doc-1", "task": "d1"})
        + "---\n"
        + yaml.safe_dump({**SHELL_TASK, "id": "doc-2"}),
    )
    # the shell-tasks layout: a JSON list with a .yaml name, JSON Lines with no extension, one YAML task
    _write(
        imports,
        "tasks.yaml",
        json.dumps([{**SHELL_TASK, "id": "st-1"}, {**SHELL_TASK, "id": "st-2", "task": "Write 8"}]),
    )
    _write(
        imports,
        "lines",
        json.dumps({**SHELL_TASK, "id": "st-3"}) + "\n\n" + json.dumps({**SHELL_TASK, "id": "st-4"}) + "\n",
    )
    _write(imports, "deep/one.yml", yaml.safe_dump({**SHELL_TASK, "id": "st-5"}))
    # malformed: each quarantined with its reason, none hides the others
    _write(imports, "broken.json", '{"task": ')
    _write(imports, "mixed.json", json.dumps({**GOOD, "success_condition": "true"}))
    _write(imports, "neither.yaml", "task: no check at all\n")
    _write(imports, "notes.txt", "just some notes about the tasks\n")
    _write(imports, "blob.bin", b"\x00\x01\x02")
    _write(imports, "bad-bundle.json", json.dumps({**GOOD, "difficulty": 9}))
    _write(imports, "empty.json", "")
    _write(imports, "half-good.jsonl", json.dumps({**SHELL_TASK, "id": "st-6"}) + "\n{oops\n")
    _write(imports, ".hidden/ignored.json", "{")  # hidden files and folders are not imports

    bundles, errors = import_scenario_files([imports])
    by_id = {b.id: b for b in bundles}
    assert set(by_id) == {
        "lone-bundle",
        "yaml-1",
        "yaml-announced",
        "wrapped-1",
        "doc-1",
        "doc-2",
        "st-1",
        "st-2",
        "st-3",
        "st-4",
        "st-5",
        "st-6",
    }, errors
    assert (
        by_id["lone-bundle"].source == "import:lone-bundle.json"
        and by_id["lone-bundle"].check == GOOD["check"]
    )
    assert by_id["yaml-1"].source == "import:pack/scenarios.data"
    assert by_id["yaml-announced"].task == ANNOUNCED["announcement"] and by_id["yaml-announced"].announced
    assert by_id["st-1"].check == SHELL_TASK["success_condition"] and by_id["st-1"].setup == ["true"]
    assert by_id["st-5"].source == "import:deep/one.yml"
    reasons = {Path(e.source.split(":")[0].split("[")[0].split("#")[0]).name: e.reason for e in errors}
    assert set(reasons) == {
        "broken.json",
        "mixed.json",
        "neither.yaml",
        "notes.txt",
        "blob.bin",
        "bad-bundle.json",
        "empty.json",
        "half-good.jsonl",
    }, errors
    assert "not valid JSON" in reasons["broken.json"]
    assert (
        "mixes the bundle layout (check) with the shell-tasks layout (success_condition)"
        in reasons["mixed.json"]
    )
    assert "neither a scenario bundle" in reasons["neither.yaml"] and "task" in reasons["neither.yaml"]
    assert "plain text" in reasons["notes.txt"]
    assert "binary" in reasons["blob.bin"]
    assert reasons["bad-bundle.json"].startswith("difficulty:")
    assert "empty file" in reasons["empty.json"]
    assert "not valid JSON" in reasons["half-good.jsonl"]


def test_collect_candidates_imports_both_layouts_from_one_folder(tmp_path: Path) -> None:
    imports = tmp_path / "imports"
    _write(imports, "bundle.json", json.dumps({**GOOD, "id": "from-bundle"}))
    _write(imports, "tasks.json", json.dumps([{**SHELL_TASK, "id": "from-shell-task"}]))
    _write(imports, "junk.json", json.dumps({"task": "no check at all"}))
    cands = collect_candidates(None, imports)
    assert sorted(b.id for b in cands.bundles) == ["from-bundle", "from-shell-task"]
    assert cands.counts_by_origin == {"import": 2}
    assert [Path(q.source).name for q in cands.quarantine] == ["junk.json"]


def test_load_bundle_reads_yaml_too(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "yaml-bundle.yaml").write_text(yaml.safe_dump(GOOD), encoding="utf-8")
    assert load_bundle(tmp_path / "yaml-bundle.yaml") == parse_bundle({**GOOD, "id": "yaml-bundle"})


# ---- one rule for announced bundles, from files and from teachers ---------------------------------------------------
@pytest.mark.parametrize("task", ["", "   ", None, "absent"])
def test_announced_bundle_with_empty_task_is_accepted_from_a_file_as_from_a_teacher(
    tmp_path: Path, task: str | None
) -> None:
    from bashgym_assets.scenarios.authoring import AuthoringAxes, bundle_from_reply
    from bashgym_assets.scenarios.bundle import import_scenario_files

    data = {k: v for k, v in ANNOUNCED.items() if k != "task"}
    if task != "absent":
        data["task"] = task
    (tmp_path / "announced.json").write_text(json.dumps(data), encoding="utf-8")
    from_file = load_bundle(tmp_path / "announced.json")
    imported, errors = import_scenario_files([tmp_path])
    authored = bundle_from_reply(
        json.dumps(data), AuthoringAxes(category="files", difficulty=2, mode="announced"), "teacher:x"
    )
    assert errors == []
    assert from_file.task == imported[0].task == authored.task == ANNOUNCED["announcement"]
    assert from_file.content_hash() == imported[0].content_hash() == authored.content_hash()


def test_empty_task_without_an_announcement_is_refused_everywhere(tmp_path: Path) -> None:
    from bashgym_assets.scenarios.authoring import AuthoringAxes, bundle_from_reply

    data = {**GOOD, "task": ""}
    with pytest.raises(ValueError, match="task: .*must not be empty"):
        parse_bundle(data)
    with pytest.raises(ValueError, match="task: .*must not be empty"):
        bundle_from_reply(json.dumps(data), AuthoringAxes(category="files", difficulty=1), "teacher:x")


# ---- provider.script: program text or the path of a program the setup writes ----------------------------------------
ORDERS_SETUP = ["mkdir -p /opt/desk", "printf '#!/bin/sh\\necho make ~/made\\n' > /opt/desk/orders"]


@pytest.mark.parametrize(
    ("script", "setup", "workdir", "program"),
    [
        ("/opt/desk/orders", ORDERS_SETUP, None, "/opt/desk/orders"),
        (
            "  /opt/desk/orders\n",
            ORDERS_SETUP,
            None,
            "/opt/desk/orders",
        ),  # surrounding blanks are not the path
        ("./orders", ["printf '#!/bin/sh\\necho hi\\n' > /srv/w/orders"], "/srv/w", "/srv/w/orders"),
        (
            "./bin/orders",
            ["mkdir -p /home/operator/bin && echo > /home/operator/bin/orders"],
            None,
            "/home/operator/bin/orders",
        ),
    ],
)
def test_provider_script_may_be_a_program_path(
    script: str, setup: list[str], workdir: str | None, program: str
) -> None:
    extra = {"workdir": workdir} if workdir else {}
    bundle = parse_bundle(
        {**ANNOUNCED, "setup": setup, "provider": {"name": "orders", "script": script}, **extra}
    )
    assert bundle.provider.is_path and bundle.provider_program == program


def test_provider_program_may_come_from_files() -> None:
    bundle = parse_bundle(
        {
            **ANNOUNCED,
            "files": {"/opt/tool/orders": "#!/bin/sh\necho hi\n"},
            "provider": {"name": "orders", "script": "/opt/tool/orders"},
        }
    )
    assert bundle.provider_program == "/opt/tool/orders"


@pytest.mark.parametrize(
    ("script", "setup", "message"),
    [
        ("echo no shebang", ORDERS_SETUP, "shebang line .* or the path of a program"),
        ("/opt/desk/orders --help", ORDERS_SETUP, "the path of a program"),  # two tokens
        ("/opt/desk/orders\n/opt/other", ORDERS_SETUP, "the path of a program"),  # two lines
        ("/opt/desk/", ORDERS_SETUP, "the path of a program"),  # a folder
        ("opt/desk/orders", ORDERS_SETUP, "the path of a program"),  # neither / nor ./
        ("/opt/desk/ordrs", ORDERS_SETUP, "no setup command or files entry writes it"),  # a typo
    ],
)
def test_provider_script_that_is_neither_is_refused(script: str, setup: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_bundle({**ANNOUNCED, "setup": setup, "provider": {"name": "orders", "script": script}})


def test_sandbox_spec_runs_a_provider_path_and_checks_the_setup_wrote_it() -> None:
    from bashgym_assets.scenarios.sandboxing import spec_kwargs

    text = spec_kwargs(parse_bundle(ANNOUNCED), None)
    assert text["files"]["/usr/local/bin/orders"] == ANNOUNCED["provider"]["script"]
    assert text["setup"] == ["chmod 0755 /usr/local/bin/orders"]
    by_path = parse_bundle(
        {**ANNOUNCED, "setup": ORDERS_SETUP, "provider": {"name": "orders", "script": "/opt/desk/orders"}}
    )
    kwargs = spec_kwargs(by_path, None)
    assert kwargs["files"]["/usr/local/bin/orders"] == '#!/bin/sh\nexec /opt/desk/orders "$@"\n'
    assert kwargs["setup"][:3] == ["chmod 0755 /usr/local/bin/orders", *ORDERS_SETUP]
    assert "was not written by the setup" in kwargs["setup"][3] and len(kwargs["setup"]) == 4
    # the program IS /usr/local/bin/<name>: no launcher over it, only the check that the setup wrote it
    own = parse_bundle(
        {
            **ANNOUNCED,
            "setup": ["echo '#!/bin/sh' > /usr/local/bin/orders"],
            "provider": {"name": "orders", "script": "/usr/local/bin/orders"},
        }
    )
    kwargs = spec_kwargs(own, None)
    assert "/usr/local/bin/orders" not in kwargs["files"] and len(kwargs["setup"]) == 2


def test_scenarios_written_elsewhere_import_and_what_is_wrong_is_still_refused(tmp_path: Path) -> None:
    """Another author's habits are read (extra fields, nulls, ids and categories in another style, a UTF-16 file);
    what cannot work (a '..' or NUL in a path, a NUL in a command, an id that is a path, a 50 MB non-JSON file fed
    to the YAML reader) is refused with its reason at load, never at the gate as a 'sandbox error'."""

    def put(name: str, data: object, encoding: str = "utf-8") -> None:
        (tmp_path / name).write_text(json.dumps(data, ensure_ascii=False), encoding=encoding)

    put(
        "extra.json",
        {
            **GOOD,
            "id": "Extract-Logs 01",
            "author": "kim",
            "tags": ["x"],
            "files": None,
            "workdir": None,
            "category": "Files & Permissions",
        },
    )
    put("accents.json", {**GOOD, "id": "journaux-été", "category": "réseau-hors-ligne"})
    put("utf16.json", {**GOOD, "id": "wide"}, encoding="utf-16")
    put("dotdot.json", {**GOOD, "id": "dotdot", "files": {"/home/operator/a/../b.txt": "x"}})
    put("nul.json", {**GOOD, "id": "nul", "reference": ["echo a\u0000b > ~/done.txt"]})
    put("path-id.json", {**GOOD, "id": "../../etc/passwd"})
    (tmp_path / "big.log").write_text("Jan 12 03:14:15 web01 sshd[2211]: accepted\n" * 60_000)
    bundles, errors = import_shell_tasks([tmp_path])
    got = {b.id: b for b in bundles}
    assert sorted(got) == ["extract-logs-01", "journaux-ete", "wide"]
    assert (
        got["extract-logs-01"].category == "files-permissions"
        and got["journaux-ete"].category == "reseau-hors-ligne"
    )
    assert got["extract-logs-01"].source == "import:extra.json [fields set aside: author, tags]"
    reasons = {e.source.rsplit("/", 1)[-1]: e.reason for e in errors}
    assert "must not hold '..' or a NUL byte" in reasons["dotdot.json"]
    assert "a command holds a NUL byte" in reasons["nul.json"]
    assert "id '../../etc/passwd' must match" in reasons["path-id.json"]
    assert "as YAML it is read only up to 2 MB" in reasons["big.log"]
    with pytest.raises(
        ValueError, match="Extra inputs are not permitted"
    ):  # the pack and teachers stay strict
        parse_bundle({**GOOD, "author": "kim"})
