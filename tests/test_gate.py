"""The reference gate in real sandboxes: each rejection reason, provider mode, root scenarios, the stable split,
and (the long test) the whole bundled pack passing its own gate."""

from __future__ import annotations

import pytest

from bashgym_assets.scenarios.bundle import ScenarioBundle, parse_bundle
from bashgym_assets.scenarios.candidates import PACK_DIR, load_pack
from bashgym_assets.scenarios.gate import (
    CHECK_PASSES_BEFORE,
    HELD_OUT,
    REFERENCE_FAILS,
    REFERENCE_UNFINISHED,
    SETUP_FAILED,
    TRAIN,
    GateLimits,
    gate_bundle,
    gate_bundles,
    reason_counts,
    split_for,
)

pytestmark = pytest.mark.docker

COUNT = {
    "task": "Write the number of lines of ~/data/words.txt into ~/count.txt (just the number).",
    "category": "text", "difficulty": 1,
    "setup": ["mkdir -p /home/operator/data", "printf 'a\\nb\\nc\\n' > /home/operator/data/words.txt",
              "chown -R operator:operator /home/operator/data"],
    "check": "[ \"$(tr -d ' \\n' < /home/operator/count.txt)\" = 3 ] && [ \"$(stat -c %U /home/operator/count.txt)\" = operator ]",
    "reference": ["cd ~/data", "wc -l < words.txt > ~/count.txt"],
}


def bundle(**patch: object) -> ScenarioBundle:
    return parse_bundle({**COUNT, **patch})


def test_split_is_stable_and_about_a_fifth() -> None:
    ids = [f"scenario-{i}" for i in range(2000)]
    splits = [split_for(i) for i in ids]
    assert splits == [split_for(i) for i in ids]
    held = splits.count(HELD_OUT) / len(ids)
    assert 0.17 < held < 0.23
    assert set(splits) == {TRAIN, HELD_OUT}
    assert split_for("x", held_out_fraction=0.0) == TRAIN and split_for("x", held_out_fraction=1.0) == HELD_OUT


def test_admits_a_good_bundle_played_as_the_operator(sandbox_image: str) -> None:
    result = gate_bundle(bundle(id="gate-good"), sandbox_image)
    assert result.admitted, result.detail
    assert result.reason == "admitted" and result.split == split_for("gate-good") and result.reference_turns == 2
    assert parse_bundle(result.bundle_json) == bundle(id="gate-good")


@pytest.mark.parametrize(("patch", "reason", "detail"), [
    ({"setup": ["false"]}, SETUP_FAILED, "setup command 1/1 exited 1"),
    ({"check": "true"}, CHECK_PASSES_BEFORE, "untouched setup"),
    # a plausible wrong answer: counts words with wc's file name, so the check (just the number) rejects it
    ({"reference": ["wc -l ~/data/words.txt > ~/count.txt"]}, REFERENCE_FAILS, "check exit 1"),
    # written by root would be owned by root: the operator cannot even write there
    ({"reference": ["echo 3 > /root/count.txt"]}, REFERENCE_FAILS, "Permission denied"),
    ({"reference": ["sleep 30"]}, REFERENCE_UNFINISHED, "command timed out"),
])
def test_rejections_keep_their_reason(sandbox_image: str, patch: dict, reason: str, detail: str) -> None:
    result = gate_bundle(bundle(**patch), sandbox_image, GateLimits(command_timeout_s=2.0))
    assert not result.admitted and result.reason == reason and result.split == ""
    assert detail in result.detail


def test_provider_mode_and_root_user(sandbox_image: str) -> None:
    provider = {"name": "orders", "script": "#!/bin/bash\nif [ \"$1\" = --help ]; then\n"
                "  echo 'Directive: create the group auditors and write DONE into /srv/ack'\nfi\n"}
    announced = parse_bundle({
        "task": "Create group auditors and /srv/ack containing DONE.", "category": "users", "difficulty": 2,
        "user": "root", "announcement": "New orders have arrived. Run `orders --help`.", "provider": provider,
        "setup": ["mkdir -p /srv"], "check": "getent group auditors >/dev/null && grep -qx DONE /srv/ack",
        "reference": ["orders --help", "groupadd auditors", "echo DONE > /srv/ack"],
    })
    result = gate_bundle(announced, sandbox_image)
    assert result.admitted, result.detail
    # the same directives without root's capabilities fail as the operator
    as_operator = announced.model_copy(update={"user": "operator", "id": "provider-as-operator"})
    assert gate_bundle(as_operator, sandbox_image).reason == REFERENCE_FAILS


def test_parallel_gate_keeps_order_and_counts(sandbox_image: str) -> None:
    bundles = [bundle(id="p-good"), bundle(id="p-before", check="true"), bundle(id="p-setup", setup=["exit 3"])]
    results = gate_bundles(bundles, sandbox_image, max_parallel=2)
    assert [r.scenario_id for r in results] == ["p-good", "p-before", "p-setup"]
    assert reason_counts(results) == {"admitted": 1, CHECK_PASSES_BEFORE: 1, SETUP_FAILED: 1}


@pytest.mark.slow
def test_whole_pack_passes_its_own_gate(sandbox_image: str) -> None:
    """THE LONG TEST: every bundle of the pack, in parallel sandboxes; the check fails on the untouched setup and
    the reference makes it pass."""
    bundles, errors = load_pack(PACK_DIR)
    assert errors == []
    results = gate_bundles(bundles, sandbox_image, max_parallel=4)
    failed = [f"{r.scenario_id}: {r.reason}: {r.detail}" for r in results if not r.admitted]
    assert not failed, "\n".join(failed)
    assert {r.split for r in results} == {TRAIN, HELD_OUT}
