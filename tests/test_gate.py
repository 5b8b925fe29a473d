"""The reference gate in real sandboxes: each rejection reason, provider mode, root scenarios, the stable split,
and (the long test) the whole bundled pack passing its own gate."""

from __future__ import annotations

import pytest
from sandbox_fixtures import COUNT_LINES

from bashgym_assets.scenarios.bundle import ScenarioBundle, parse_bundle
from bashgym_assets.scenarios.candidates import PACK_DIR, load_pack
from bashgym_assets.scenarios.gate import (
    CHECK_DOES_NOT_PARSE,
    CHECK_PASSES_BEFORE,
    CHECK_TIMED_OUT,
    HELD_OUT,
    REFERENCE_FAILS,
    REFERENCE_UNFINISHED,
    SETUP_FAILED,
    TRAIN,
    GateLimits,
    ReferenceTurn,
    Replay,
    gate_bundle,
    gate_bundles,
    reason_counts,
    split_for,
)

pytestmark = pytest.mark.docker

COUNT = {
    **COUNT_LINES,  # the file must also belong to the operator (a root-run reference fails it)
    "check": COUNT_LINES["check"] + ' && [ "$(stat -c %U /home/operator/count.txt)" = operator ]',
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
    assert (
        split_for("x", held_out_fraction=0.0) == TRAIN and split_for("x", held_out_fraction=1.0) == HELD_OUT
    )


def test_admits_a_good_bundle_played_as_the_operator(sandbox_image: str) -> None:
    result = gate_bundle(bundle(id="gate-good"), sandbox_image)
    assert result.admitted, result.detail
    assert (
        result.reason == "admitted" and result.split == split_for("gate-good") and result.reference_turns == 2
    )
    assert parse_bundle(result.bundle_json) == bundle(id="gate-good")


@pytest.mark.parametrize(
    ("patch", "reason", "detail"),
    [
        ({"setup": ["false"]}, SETUP_FAILED, "setup command 1/1 exited 1"),
        ({"check": "true"}, CHECK_PASSES_BEFORE, "untouched setup"),
        # a plausible wrong answer: counts words with wc's file name, so the check (just the number) rejects it
        ({"reference": ["wc -l ~/data/words.txt > ~/count.txt"]}, REFERENCE_FAILS, "check exit 1"),
        # written by root would be owned by root: the operator cannot even write there
        ({"reference": ["echo 3 > /root/count.txt"]}, REFERENCE_FAILS, "Permission denied"),
        ({"reference": ["sleep 30"]}, REFERENCE_UNFINISHED, "command timed out"),
    ],
)
def test_rejections_keep_their_reason(sandbox_image: str, patch: dict, reason: str, detail: str) -> None:
    result = gate_bundle(bundle(**patch), sandbox_image, GateLimits(command_timeout_s=2.0))
    assert not result.admitted and result.reason == reason and result.split == ""
    assert detail in result.detail


def test_provider_mode_and_root_user(sandbox_image: str) -> None:
    provider = {
        "name": "orders",
        "script": '#!/bin/bash\nif [ "$1" = --help ]; then\n'
        "  echo 'Directive: create the group auditors and write DONE into /srv/ack'\nfi\n",
    }
    announced = parse_bundle(
        {
            "task": "Create group auditors and /srv/ack containing DONE.",
            "category": "users",
            "difficulty": 2,
            "user": "root",
            "announcement": "New orders have arrived. Run `orders --help`.",
            "provider": provider,
            "setup": ["mkdir -p /srv"],
            "check": "getent group auditors >/dev/null && grep -qx DONE /srv/ack",
            "reference": ["orders --help", "groupadd auditors", "echo DONE > /srv/ack"],
        }
    )
    result = gate_bundle(announced, sandbox_image)
    assert result.admitted, result.detail
    # the same directives without root's capabilities fail as the operator
    as_operator = announced.model_copy(update={"user": "operator", "id": "provider-as-operator"})
    assert gate_bundle(as_operator, sandbox_image).reason == REFERENCE_FAILS


def test_parallel_gate_keeps_order_and_counts(sandbox_image: str) -> None:
    bundles = [
        bundle(id="p-good"),
        bundle(id="p-before", check="true"),
        bundle(id="p-setup", setup=["exit 3"]),
    ]
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


# ---- a check or setup that does not parse is reported as such, before any sandbox -----------------------------------
@pytest.mark.parametrize(
    ("patch", "reason", "detail"),
    [
        (
            {"check": "if [ -f /home/operator/count.txt ]; then\n  exit 0\n"},
            CHECK_DOES_NOT_PARSE,
            "check does not parse: bash: line 3: syntax error: unexpected end of file",
        ),
        (
            {"check": "grep -q x /home/operator/count.txt && { echo ok"},
            CHECK_DOES_NOT_PARSE,
            "check does not parse",
        ),
        (
            {"setup": ["true", "for f in a b; echo $f; done"]},
            SETUP_FAILED,
            "setup command 2/2 does not parse: for f in a b; echo $f; done\nbash: ",
        ),
        (
            {
                "provider": {"name": "orders", "script": "#!/bin/bash\ncase $1 in\n"},
                "announcement": "run orders",
            },
            SETUP_FAILED,
            "provider script orders does not parse",
        ),
    ],
)
def test_what_does_not_parse_is_blamed_not_the_reference(patch: dict, reason: str, detail: str) -> None:
    # no image at all: the verdict comes from bash -n, before a sandbox would be needed
    result = gate_bundle(bundle(**patch), "bashgym-no-such-image:never")
    assert result.reason == reason and not result.admitted and result.reference_turns == 0
    assert detail in result.detail, result.detail


def test_a_check_that_parses_with_extglob_or_heredocs_is_not_refused(sandbox_image: str) -> None:
    check = (
        'shopt -s extglob\ncase "$(cat /home/operator/count.txt)" in\n  @(3|03)) exit 0 ;;\nesac\n'
        "cat <<'EOF' >&2\nnot three )\nEOF\nexit 1\n"
    )
    result = gate_bundle(bundle(id="gate-extglob", check=check), sandbox_image)
    assert result.admitted, result.detail


# ---- the detail shows the reference turn that mattered, not the closing exit ----------------------------------------
def _turn(index: int, command: str, exit_code: int | None = 0, output: str = "") -> ReferenceTurn:
    return ReferenceTurn(index=index, total=4, command=command, output=output, exit_code=exit_code)


def test_replay_shows_the_failing_and_last_real_turns_never_exit() -> None:
    replay = Replay(
        turns=[
            _turn(1, "cd ~/data"),
            _turn(2, "sort nope > out", 2, "sort: cannot read: nope"),
            _turn(3, "echo done", 0, "done"),
            _turn(4, "exit"),
        ]
    )
    shown = replay.mattered()
    assert (
        "first failing reference turn 2/4: $ sort nope > out\nsort: cannot read: nope\n[exit code: 2]"
        in shown
    )
    assert "last reference turn 3/4: $ echo done" in shown and "$ exit" not in shown
    only = Replay(turns=[_turn(1, "wc -l f > n"), _turn(2, "exit 0")]).mattered()
    assert only == "last reference turn 1/4: $ wc -l f > n\n[exit code: 0]"
    assert Replay(turns=[_turn(1, "exit")]).mattered().endswith("$ exit\n[exit code: 0]")


@pytest.mark.parametrize(
    ("reference", "shown", "hidden"),
    [
        # every command succeeds but counts the wrong thing: the last real command is the one that mattered
        (
            ["cd ~/data", "wc -l words.txt > ~/count.txt", "exit"],
            "last reference turn 2/3: $ wc -l words.txt",
            "$ exit",
        ),
        # a command fails early: that one is shown, with its error
        (
            ["cat ~/data/missing.txt > ~/count.txt", "echo finished", "exit"],
            "first failing reference turn 1/3: $ cat ~/data/missing.txt",
            "$ exit",
        ),
    ],
)
def test_rejection_detail_shows_the_turn_that_mattered(
    sandbox_image: str, reference: list[str], shown: str, hidden: str
) -> None:
    result = gate_bundle(bundle(id="gate-detail", reference=reference), sandbox_image)
    assert result.reason == REFERENCE_FAILS
    assert result.detail.startswith("check exit 1")
    assert shown in result.detail and hidden not in result.detail, result.detail
    if "missing" in reference[0]:
        assert (
            "No such file or directory" in result.detail
            and "last reference turn 2/3: $ echo finished" in result.detail
        )


# ---- provider mode with the provider given as the path of a program the setup writes --------------------------------
PATH_PROVIDER = {
    "task": "",
    "category": "files",
    "difficulty": 2,
    "announcement": "Orders are waiting: run `orders --help`.",
    "setup": [
        "mkdir -p /opt/desk",
        "printf '#!/bin/sh\\necho \"Directive: create the folder ~/made\"\\n' > /opt/desk/orders",
    ],
    "check": "test -d /home/operator/made",
    "reference": ["orders --help", "mkdir ~/made", "exit"],
}


@pytest.mark.parametrize(
    "provider",
    [
        {"name": "orders", "script": "/opt/desk/orders"},
        {"name": "orders", "script": "#!/bin/sh\necho 'Directive: create the folder ~/made'\n"},
    ],
)
def test_provider_as_program_path_or_text_is_admitted(sandbox_image: str, provider: dict) -> None:
    announced = parse_bundle({**PATH_PROVIDER, "provider": provider})
    result = gate_bundle(announced, sandbox_image)
    assert result.admitted, result.detail


def test_provider_path_relative_to_the_workdir_runs_as_a_path(sandbox_image: str) -> None:
    announced = parse_bundle(
        {
            **PATH_PROVIDER,
            "workdir": "/srv/desk",
            "provider": {"name": "desk", "script": "./bin/orders"},
            "setup": [
                "mkdir -p /srv/desk/bin",
                "printf 'echo Directive: create ~/made\\n' > /srv/desk/bin/orders",
            ],  # no shebang, no x bit: still runs
            "reference": ["./bin/orders --help", "desk --help", "mkdir ~/made"],
        }
    )
    result = gate_bundle(announced, sandbox_image)
    assert result.admitted, result.detail


def test_provider_path_the_setup_did_not_write_fails_the_setup(sandbox_image: str) -> None:
    announced = parse_bundle(
        {
            **PATH_PROVIDER,
            "setup": ["mkdir -p /opt/desk/orders"],  # a folder, not a program
            "provider": {"name": "orders", "script": "/opt/desk/orders"},
        }
    )
    result = gate_bundle(announced, sandbox_image)
    assert result.reason == SETUP_FAILED
    assert "provider program /opt/desk/orders was not written by the setup" in result.detail, result.detail


def test_a_windows_written_check_is_admitted_and_a_missing_workdir_is_the_setups_fault(
    sandbox_image: str,
) -> None:
    """Found by a probe of scenarios written elsewhere: a CRLF check failed the reference (``count.txt\\r: No such
    file``), and a workdir no setup created failed the engine's chdir as a 'sandbox error' (retried as the
    engine's fault, then lost without a reason the author could act on)."""
    crlf = bundle(
        id="gate-crlf",
        check=COUNT["check"].replace(" && ", "\r\n") + "\r\n",
        setup=[c + "\r\n" for c in COUNT["setup"]],
    )
    assert "\r" not in crlf.check and not any("\r" in c for c in crlf.setup)
    assert gate_bundle(crlf, sandbox_image).reason == "admitted"
    elsewhere = bundle(
        id="gate-workdir",
        workdir="/srv/project",
        reference=["wc -l < ~/data/words.txt > ~/count.txt", "pwd > /tmp/where"],
    )
    result = gate_bundle(elsewhere, sandbox_image)
    assert (
        result.reason == SETUP_FAILED
        and "workdir /srv/project does not exist after the setup" in result.detail
    )
    made = bundle(
        id="gate-workdir-made",
        workdir="/srv/project",
        setup=[*COUNT["setup"], "install -d -o operator /srv/project"],
    )
    assert gate_bundle(made, sandbox_image).reason == "admitted"


@pytest.mark.parametrize(
    ("check", "when"),
    [
        ("sleep 60; exit 1", "on the untouched setup"),  # never answers
        (
            "if [ -f /home/operator/count.txt ]; then sleep 60; fi; exit 1",
            "after the reference",
        ),  # hangs once done
    ],
)
def test_a_check_that_never_answers_is_named_as_such(sandbox_image: str, check: str, when: str) -> None:
    """A hanging check used to be filed as 'reference does not pass' after waiting out the check twice."""
    result = gate_bundle(bundle(id="gate-hang", check=check), sandbox_image, GateLimits(check_timeout_s=2.0))
    assert result.reason == CHECK_TIMED_OUT and f"did not finish within 2 s {when}" in result.detail
