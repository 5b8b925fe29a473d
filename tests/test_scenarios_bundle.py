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

GOOD = {"task": "Create ~/done.txt", "category": "files", "difficulty": 1,
        "check": "test -f /home/operator/done.txt", "reference": ["touch ~/done.txt"]}


def test_defaults_and_stable_content_id() -> None:
    a = parse_bundle(GOOD)
    b = parse_bundle({**GOOD, "source": "elsewhere"})
    assert a.user == "operator" and a.start_dir == "/home/operator" and not a.announced
    assert a.id == b.id and a.id.startswith("s-")  # the id hashes the task, not where it came from
    assert parse_bundle({**GOOD, "task": "Create ~/other.txt"}).id != a.id
    assert parse_bundle({**GOOD, "user": "root"}).start_dir == "/root"


@pytest.mark.parametrize(("patch", "field"), [
    ({"difficulty": 5}, "difficulty"),
    ({"user": "admin"}, "user"),
    ({"reference": []}, "reference"),
    ({"check": "  "}, "check"),
    ({"files": {"relative/path": "x"}}, "files"),
    ({"provider": {"name": "Bad Name", "script": "#!/bin/bash"}}, "provider.name"),
    ({"provider": {"name": "tool", "script": "echo no shebang"}}, "provider.script"),
    ({"unknown_field": 1}, "unknown_field"),
    ({"id": "Has Spaces"}, "id"),
])
def test_invalid_bundles_name_the_field(patch: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field.split(".")[0]):
        parse_bundle({**GOOD, **patch})


def test_missing_fields_and_bad_json() -> None:
    with pytest.raises(ValueError, match="task"):
        parse_bundle({k: v for k, v in GOOD.items() if k != "task"})
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_bundle("{not json")


def test_save_load_roundtrip_and_folder_quarantine(tmp_path: Path) -> None:
    bundle = parse_bundle({**GOOD, "provider": {"name": "tasks", "script": "#!/bin/bash\necho hi"},
                           "announcement": "Run tasks --help"})
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
        {"task": "Count lines", "setup_commands": ["echo a > /tmp/f"], "success_condition": "test -f /tmp/n",
         "difficulty_level": 3, "solution": "wc -l /tmp/f > /tmp/n"},
        {"task": "No solution given", "setup_commands": [], "success_condition": "true", "difficulty_level": 1},
        {"task": "Bad level", "success_condition": "true", "difficulty_level": "hard", "reference": ["true"]},
        {"setup_commands": []},
    ]
    (tmp_path / "tasks.json").write_text(json.dumps(records), encoding="utf-8")
    (tmp_path / "more.jsonl").write_text(json.dumps({**records[0], "task": "Count more", "difficulty_level": 9})
                                         + "\n{oops\n", encoding="utf-8")
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
    (imports / "t.json").write_text(json.dumps({"task": "t", "success_condition": "true", "reference": ["true"]}),
                                    encoding="utf-8")
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
