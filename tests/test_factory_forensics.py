"""The forensics families in real sandboxes: the reference passes, and the near-miss and wrong-folder answers fail.

Each family's task starts outside home; the near-miss answer acts on the look-alike (the backup, the rotated log's
file, the sibling, the example config, the stale folder a profile once named), the wrong-folder answer runs the
reference after ``cd ~`` (what the tuned model did when its working directory was ``/app``).
"""

from __future__ import annotations

import posixpath
import re

import pytest
from sandbox_fixtures import check_exits_after

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.world import quote

FAMILIES = {n: f for n, f in all_families().items() if f.category == "forensics"}
SEED = "forensics:2"


def _rel(bundle: ScenarioBundle, path: str) -> str:
    return posixpath.relpath(path, bundle.workdir) if path.startswith("/") else path


def near_miss(name: str, bundle: ScenarioBundle, v: list[str]) -> list[str]:
    """A plausible wrong answer that acts on the look-alike instead of the real target."""
    ref = bundle.reference
    if name == "forensics-config-key-owner":
        key, _old, new, _target, backup = v[-5:]
        return [f"sed -i -E 's/^({key}( = |: )|{key.upper()}=).*/\\1{new}/' {backup}"]
    if name == "forensics-log-failed-file":
        target, near, folder = v[-5], v[-2], v[-1]
        ext = "json" if ".json" in near else "sh"
        return [f"cp {near} {folder}/{target}.{ext}"]
    if name == "forensics-pick-by-attribute":
        folder, ext, target = v[-3:]
        sibling = next(
            _rel(bundle, p)
            for p in sorted(bundle.files)
            if p.startswith(f"{bundle.workdir}/{folder}/")
            and p.endswith(f".{ext}")
            and not p.endswith(target)
        )
        return [f"rm {sibling}"]
    if name == "forensics-called-script-fix":
        near = v[-4]
        return [f"sed -i '1s|.*|#!/bin/bash|' {near}", f"chmod +x {near}"]
    if name == "forensics-audit-report":
        return [*ref, f'sed -i "s|^|$PWD/|" {v[-1]}']  # the right files, but absolute paths
    if name == "forensics-answer-owner":
        stale, answer = v[-2:]
        return [f"stat -c %U {stale} > {answer}"]  # the folder the backup config names
    if name == "forensics-answer-config-value":
        answer, env_file = v[-2:]
        return [f"cat {env_file} > {answer}"]  # the whole file, not the value
    if name == "forensics-profile-variable-target":
        real, stale = v[-2:]
        strip = re.compile(r"^(\. |source )\S+( &&|;) ")
        return [strip.sub("", line).replace(f'"${v[-4]}"', stale).replace(real, stale) for line in ref]
    if name == "forensics-restore-newest-backup":
        live, newest = v[-2:]
        older = next(b for b in reversed(v[:-2]) if b != newest)
        return [f"cp {older} {live}"]
    if name == "forensics-config-missing-dirs":
        return [*ref, f"mkdir -p {' '.join(quote(x) for x in v[-2:])}"]  # the example config's folders too
    raise AssertionError(f"no near-miss answer for {name}")


# The families whose work is a service's own (its config, its log, its backups): some draws run as its account.
SERVICE_FAMILIES = (
    "forensics-config-key-owner",
    "forensics-log-failed-file",
    "forensics-restore-newest-backup",
)


def test_every_forensics_family_starts_outside_home_and_draws_both_users() -> None:
    assert len(FAMILIES) >= 10
    for name, fam in FAMILIES.items():
        users, dirs = set(), set()
        for i in range(30):
            b, _ = fam.make(i)
            assert b.workdir and not b.workdir.startswith(("/home/operator", "/tmp", "/srv/app")), (
                name,
                b.workdir,
            )
            assert b.user == "root" or not b.workdir.startswith("/root"), (name, b.workdir)
            users.add(b.user)
            dirs.add(b.workdir.split("/")[1])
        assert users == ({"root", "operator", "app"} if name in SERVICE_FAMILIES else {"root", "operator"}), (
            name
        )
        assert len(dirs) >= 3, (name, dirs)


def first_as_service_user(name: str) -> tuple[ScenarioBundle, list[str]]:
    """The first draw of a service family that runs as the service account (seeds from 0, reproducibly)."""
    fam = FAMILIES[name]
    for i in range(100):
        bundle, world = fam.make_world(f"{SEED}:{i}")
        if bundle.user == "app":
            return bundle, list(world.values)
    raise AssertionError(f"{name} drew no task as app in 100 seeds")


@pytest.mark.docker
def test_service_user_draws_pass_and_their_wrong_answers_fail(sandbox_image: str) -> None:
    """As the service account: the gate admits the draw (app owns the tree it edits), and the near-miss and the
    wrong-folder answers (``cd ~`` lands in /srv/app, the account's home) fail its check."""
    from bashgym_assets.scenarios.gate import gate_bundles

    drawn = {name: first_as_service_user(name) for name in SERVICE_FAMILIES}
    results = gate_bundles([b for b, _ in drawn.values()], sandbox_image, max_parallel=3)
    assert all(r.admitted for r in results), [(r.scenario_id, r.reason, r.detail[:300]) for r in results]
    cases = [
        (name, label, bundle, commands)
        for name, (bundle, values) in drawn.items()
        for label, commands in (
            ("near-miss", near_miss(name, bundle, values)),
            ("wrong folder", ["cd ~", *bundle.reference]),
        )
    ]
    codes = check_exits_after([(b, c) for *_, b, c in cases], sandbox_image, expect_user="app")
    passed = [
        (name, label) for (name, label, *_), code in zip(cases, codes, strict=True) if code in (0, None)
    ]
    assert not passed, passed


@pytest.mark.docker
def test_forensics_reference_passes_near_miss_and_wrong_folder_fail(sandbox_image: str) -> None:
    from bashgym_assets.scenarios.gate import gate_bundles

    drawn = {}
    for name, fam in sorted(FAMILIES.items()):
        bundle, world = fam.make_world(SEED)
        drawn[name] = (bundle, list(world.values))
    results = gate_bundles([b for b, _ in drawn.values()], sandbox_image, max_parallel=4)
    assert all(r.admitted for r in results), [(r.scenario_id, r.reason, r.detail[:300]) for r in results]

    cases = []
    for name, (bundle, values) in drawn.items():
        cases.append((name, "near-miss", near_miss(name, bundle, values)))
        cases.append((name, "wrong folder", ["cd ~", *bundle.reference]))
    codes = check_exits_after([(drawn[name][0], commands) for name, _, commands in cases], sandbox_image)
    passed = [(name, label) for (name, label, _), code in zip(cases, codes, strict=True) if code in (0, None)]
    assert not passed, passed
