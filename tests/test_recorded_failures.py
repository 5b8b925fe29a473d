"""The failure-detail classifier on RECORDED episodes (issue 38): 16 failed episodes of the learning study's tuned
SmolLM2 adapters (``fit6`` at epoch 16, ``wide6`` at epoch 8), as the evaluation wrote them to ``eval_episodes``,
with the scenarios they ran (``tests/recorded_study_failures.json``). Each expected class below was read off the
transcript by hand, with the reason beside it; the classifier must agree. Four of them were misread before these
recordings existed (a reference's ``find -o`` taken for an output file, ``~/mahale-config`` taken as on the map
because home holds everything, ``u=r,go=`` not seen as mode 400, a write under the output file taken as writing it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bashgym_assets.evaluation import failures
from bashgym_assets.evaluation.metrics import EvalEpisode
from bashgym_assets.scenarios.bundle import ScenarioBundle

RECORDED = json.loads((Path(__file__).parent / "recorded_study_failures.json").read_text())

# (run, scenario hash) -> the class read by hand, and why
BY_HAND = {
    ("wide6-e8", "4ffa769cb118"): (
        "wrong_flag",
        "both names typed, but AND-ed: find without -o deletes nothing",
    ),
    ("wide6-e8", "d7d53fd61154"): ("wrong_flag", "tar -xzf on a plain tar: gzip: not in gzip format"),
    ("wide6-e8", "fdaf4f030ba3"): ("wrong_flag", "extracted with its folders: no --strip-components"),
    ("wide6-e8", "414cee7ea2c3"): ("value_not_copied", "pioneer_notes.txt typed as '~/ PionantNotes.txt'"),
    ("wide6-e8", "2e3f1ef86489"): ("wrong_output_file", "wrote ~/forest.dat/edit/*.txt, not ~/forest.dat"),
    ("wide6-e8", "2aacd73a2b52"): ("repeated_command", "the same ls of a missing folder 9 times"),
    ("wide6-e8", "1d2114e7b237"): ("prose", "unbalanced babble of $( and quotes, not a command"),
    ("fit6-e16", "1d2114e7b237"): ("value_not_copied", "deleted '*.orig' only: '*.bak' never typed"),
    ("fit6-e16", "4ffa769cb118"): ("value_not_copied", "deleted '*.DS_Store' only: '*.tmp' never typed"),
    ("fit6-e16", "7988e34c50c6"): ("premature_exit", "two finds that only listed, then exit"),
    ("fit6-e16", "c3076a1afda6"): ("value_not_copied", "chmod on the folder: the .token files never named"),
    ("fit6-e16", "2aacd73a2b52"): ("wrong_path", "~/mahale-config for ~/maple-config: No such file"),
    ("fit6-e16", "d86d982b98f9"): (
        "other",
        "u=r,go= is the 400 asked for; find also chmods subfolders' files",
    ),
    ("fit6-e16", "b9b2b22a2bee"): ("wrong_flag", "uniq -D | uniq for uniq -u"),
    ("fit6-e16", "15821d2dbb19"): ("other", "wrote the matching ids, where the count was asked for"),
    ("fit6-e16", "2e3f1ef86489"): ("wrong_output_file", "edit in place asked; wrote ~/audit.log"),
}


def _key(record: dict) -> tuple[str, str]:
    return record["run"], record["episode"]["scenario_id"].rsplit(".", 1)[1]


@pytest.mark.parametrize("record", RECORDED, ids=["-".join(_key(r)) for r in RECORDED])
def test_a_recorded_failure_gets_the_class_read_by_hand(record: dict) -> None:
    episode = EvalEpisode.model_validate(record["episode"])
    bundle = ScenarioBundle.model_validate(record["bundle"])
    expected, why = BY_HAND[_key(record)]
    d = failures.diagnose(episode, bundle)
    assert d.detail == expected, (why, d.evidence)
    assert not episode.clean and episode.eval_id.startswith("eval-cli-train-study-")


def test_every_recording_is_labelled_and_the_classes_are_varied() -> None:
    assert {_key(r) for r in RECORDED} == set(BY_HAND)
    classes = {c for c, _ in BY_HAND.values()}
    assert len(classes) >= 7 and "other" in classes  # "other" stays for what no rule explains


def test_symbolic_modes_read_as_octal() -> None:
    assert failures.octal_mode("u=rw,go=") == "600"
    assert failures.octal_mode("u=rwx,go=") == "700"
    assert failures.octal_mode("a=r") == "444"
    assert failures.octal_mode("u=r,g=r,o=") == "440"
    assert failures.octal_mode("go-rwx") is None and failures.octal_mode("600") is None
