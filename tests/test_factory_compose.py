"""Compositions (``factory/families/compose.py``): every composed family draws reproducibly with the variety the
factory asks for, and in a real sandbox its reference passes while two wrong answers fail the check (only the
first step(s); a wrong value, a wrong selection or the steps in the wrong order)."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable

import pytest
from sandbox_fixtures import check_exit_after

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.world import quote
from bashgym_assets.scenarios.skills import state_changing_core

FAMILIES = all_families()
COMPOSED = sorted(n for n, f in FAMILIES.items() if f.category == "compose")


def _want(bundle: ScenarioBundle) -> dict:
    """The expected state a composed family's check carries (its ``WANT`` JSON)."""
    return json.loads(bundle.check.split("WANT = json.loads(r'''", 1)[1].split("''')", 1)[0])


def _backup_line(b: ScenarioBundle) -> int:
    """Where the reference copies the config to its backup."""
    name = _want(b)["backup"].rsplit("/", 1)[1]
    return next(
        i
        for i, line in enumerate(b.reference)
        if (line.startswith(("cp ", "install ")) or (line.startswith("cat ") and " > " in line))
        and line.rstrip("'").endswith(name)
    )


# ---- wrong answers: each returns the command list, given a bundle drawn by ``_draw`` ----------------------------
def _archive_only(b: ScenarioBundle) -> list[str]:
    """Packs the archive, never writes the report (nor removes the originals): all up to the ``cd`` back."""
    back = next(i for i, line in enumerate(b.reference) if line.startswith("cd ") and "&&" not in line)
    return b.reference[:back]


def _archive_everything(b: ScenarioBundle) -> list[str]:
    """Every step done, but the selection dropped: all files go into the archive and the report."""
    return [re.sub(r" -name '\*\.\w+'| -mtime \+\d+", "", line) for line in b.reference]


def _compress_only(b: ScenarioBundle) -> list[str]:
    """Compresses, writes no manifest."""
    return b.reference[:2]


def _compress_keeping_originals(b: ScenarioBundle) -> list[str]:
    """Every step done, but ``-k`` keeps the uncompressed originals beside the compressed ones."""
    tool = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}[_want(b)["suffix"]]
    return [b.reference[0], re.sub(rf"\b{tool}\b", f"{tool} -k", b.reference[1]), *b.reference[2:]]


def _json_without_report(b: ScenarioBundle) -> list[str]:
    """Extracts, filters and converts, never writes the total."""
    return [line for line in b.reference if "txt" not in line]


def _json_other_status(b: ScenarioBundle) -> list[str]:
    """Every step done with another status value: the wrong rows."""
    keep = _want(b)["rows"][0][4]
    return [line.replace(f'"{keep}"', '"nosuch"').replace(f",{keep}$", ",nosuch$") for line in b.reference]


def _folder_only(b: ScenarioBundle) -> list[str]:
    """Creates the user and the folder, never registers it."""
    return [line for line in b.reference if ">>" not in line and "tee -a" not in line]


def _registry_overwritten(b: ScenarioBundle) -> list[str]:
    """Every step done, but the registry is overwritten instead of appended to."""
    return [line.replace(">> ", "> ").replace("tee -a", "tee") for line in b.reference]


def _backup_only(b: ScenarioBundle) -> list[str]:
    """Makes the backup, changes nothing."""
    return b.reference[: _backup_line(b) + 1]


def _edit_before_backup(b: ScenarioBundle) -> list[str]:
    """The steps in the wrong order: edit first, then back up (the backup holds the new file)."""
    i = _backup_line(b)
    ref = list(b.reference)
    ref[i], ref[i + 1] = ref[i + 1], ref[i]
    return ref


def _index_of(b: ScenarioBundle, pattern: str) -> int:
    """The first reference line that matches ``pattern`` (a regex)."""
    return next(i for i, line in enumerate(b.reference) if re.search(pattern, line))


def _bump_only(b: ScenarioBundle) -> list[str]:
    """Edits the version file, never commits (nor tags)."""
    return b.reference[: _index_of(b, r"git (add|commit)")]


def _tag_before_commit(b: ScenarioBundle) -> list[str]:
    """The steps in the wrong order: tag first (the old tip), then commit."""
    i = _index_of(b, r"git (add|commit)")
    ref = list(b.reference)
    ref[i], ref[i + 1] = ref[i + 1], ref[i]
    return ref


def _copy_only(b: ScenarioBundle) -> list[str]:
    """Copies the tree without the pattern, never locks it nor writes the manifest."""
    return b.reference[: _index_of(b, r"rsync|cp -|tar -C|cpio") + 1]


def _copy_everything(b: ScenarioBundle) -> list[str]:
    """Every step done, but the copy keeps the excluded files."""
    want = _want(b)
    i = _index_of(b, r"rsync|cp -|tar -C|cpio")
    return [*b.reference[:i], f"cp -a {quote(want['src'])} {quote(want['dst'])}", *b.reference[i + 1 :]]


def _quarantine_move_only(b: ScenarioBundle) -> list[str]:
    """Moves the marked files, writes no report and locks nothing."""
    report = posixpath.basename(_want(b)["report"])
    return [line for line in b.reference if report not in line and not line.startswith("chmod")]


def _quarantine_flattened(b: ScenarioBundle) -> list[str]:
    """Every step done, but the files land flat in the quarantine (their relative paths lost)."""
    want = _want(b)
    q, base, report = quote(want["quarantine"]), quote(want["base"]), quote(want["report"])
    listing = f"find {q} -type f | wc -l" if want["kind"] == "count" else f"find {q} -type f -printf '%P\\n'"
    return [
        f"mkdir -p {q}",
        f"grep -rlZ {quote(want['marker'])} {base} | xargs -0 mv -t {q}",
        f"{listing} > {report}",
        f"chmod 700 {q}",
    ]


def _split_only(b: ScenarioBundle) -> list[str]:
    """Splits the log, never compresses the parts nor writes the index."""
    return b.reference[: _index_of(b, r"^mkdir -p") + 2]


def _index_before_compress(b: ScenarioBundle) -> list[str]:
    """The steps in the wrong order: the index is written before the parts are compressed."""
    i = _index_of(b, r"^mkdir -p") + 2  # the compress line follows the split
    ref = list(b.reference)
    ref[i], ref[i + 1] = ref[i + 1], ref[i]
    return ref


def _shared_without_dropin(b: ScenarioBundle) -> list[str]:
    """Creates the group and the folder, never the member's file."""
    return [line for line in b.reference if _want(b)["file"] not in line]


def _group_without_members(b: ScenarioBundle) -> list[str]:
    """Every step done, but the group is created empty: its members were never added."""
    group = _want(b)["group"]
    return [f"groupadd {group}" if line.startswith("groupadd") else line for line in b.reference]


# family -> (a predicate choosing a seed whose draw shows the composition at its longest, two wrong answers)
WRONG: dict[str, tuple[Callable[[ScenarioBundle], bool], Callable, Callable]] = {
    "compose-find-archive-report": (
        lambda b: b.difficulty == 4 and "**" not in " ".join(b.reference),
        _archive_only,
        _archive_everything,
    ),
    "compose-compress-manifest": (lambda b: b.difficulty == 4, _compress_only, _compress_keeping_originals),
    "compose-filter-csv-to-json": (
        lambda b: bool(_want(b)["report"]) and '"' + _want(b)["rows"][0][4] + '"' in " ".join(b.reference),
        _json_without_report,
        _json_other_status,
    ),
    "compose-user-folder-register": (lambda b: b.difficulty == 4, _folder_only, _registry_overwritten),
    "compose-bump-commit-tag": (lambda b: b.difficulty == 4, _bump_only, _tag_before_commit),
    "compose-copy-readonly-manifest": (lambda b: b.difficulty == 4, _copy_only, _copy_everything),
    "compose-quarantine-marker": (lambda b: b.difficulty == 4, _quarantine_move_only, _quarantine_flattened),
    "compose-split-log-index": (
        lambda b: b.difficulty == 4 and not b.reference[_index_of(b, r"^mkdir -p") + 3].startswith("cd "),
        _split_only,
        _index_before_compress,
    ),
    "compose-group-shared-folder": (
        lambda b: b.difficulty == 4,
        _shared_without_dropin,
        _group_without_members,
    ),
    "compose-backup-edit-patch": (  # an edit that reads the config itself, so the swapped order still runs
        lambda b: (
            b.difficulty == 4 and _want(b)["backup"].rsplit("/", 1)[1] not in b.reference[_backup_line(b) + 1]
        ),
        _backup_only,
        _edit_before_backup,
    ),
}


def _draw(name: str) -> ScenarioBundle:
    """The first draw (``compose:<i>``) whose task suits the family's wrong answers."""
    suits = WRONG[name][0]
    for i in range(200):
        bundle, _ = FAMILIES[name].make(f"compose:{i}")
        if suits(bundle):
            return bundle
    raise AssertionError(f"no suitable draw of {name}")


def test_every_composed_family_has_its_wrong_answers() -> None:
    assert len(COMPOSED) >= 10
    assert set(WRONG) == set(COMPOSED)


@pytest.mark.parametrize("name", COMPOSED)
def test_composed_family_draws_reproducibly_with_variety(name: str) -> None:
    fam = FAMILIES[name]
    assert fam.make(3)[0] == fam.make(3)[0]
    phrasings, cores, difficulties = set(), set(), set()
    for seed in range(55):
        bundle, world = fam.make_world(seed)
        phrasings.add(world.phrasing_id())
        cores.add(state_changing_core(bundle.reference))
        difficulties.add(bundle.difficulty)
        assert bundle.user in ("operator", "root")
    assert len(phrasings) >= 6, phrasings
    assert len(cores) >= 10, len(cores)
    assert difficulties == {3, 4}  # two steps are 3, three steps are 4


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name", COMPOSED)
def test_composed_reference_passes_and_two_wrong_answers_fail(name: str, sandbox_image: str) -> None:
    from bashgym_assets.scenarios.gate import gate_bundle

    bundle = _draw(name)
    result = gate_bundle(bundle, sandbox_image)
    assert result.admitted, result.detail
    for wrong in WRONG[name][1:]:
        commands = wrong(bundle)
        assert commands != bundle.reference
        code = check_exit_after(bundle, sandbox_image, commands)
        assert code not in (0, None), (wrong.__name__, commands, code)
