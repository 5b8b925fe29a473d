"""External suites as one path: ``bashgym suite import|gate|eval PATH``, ``bashgym eval --suite`` and the hint for a
suite folder given to ``--scenarios``, a suite refused whole (non-zero exit; loud in the Dagster assets), and
``bashgym sql`` saying when it cut rows."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from bashgym_assets import cli
from bashgym_assets.lake import Lake


# ---- a small suite: one task of each layout, and one the importer must quarantine ------------------------------
def put(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(".sh"):
            path.chmod(0o755)
    return root


def harbor_task(suite: Path, name: str, test_sh: str | None = None) -> Path:
    """Harbor 2.x: count the words of a file the Dockerfile wrote; the verifier writes the reward file."""
    return put(
        suite / name,
        {
            "instruction.md": "Count the words of /app/words.txt and write the number to /app/count.txt.\n",
            "task.toml": 'version = "1.0"\n\n[metadata]\ndifficulty = "easy"\ncategory = "Text Processing"\n',
            "environment/Dockerfile": 'FROM debian:bookworm\nWORKDIR /app\nRUN echo "alpha beta gamma" > /app/words.txt\n',
            "tests/test.sh": test_sh
            or (
                '#!/bin/bash\nmkdir -p /logs/verifier\nif [ "$(cat /app/count.txt 2>/dev/null)" = "3" ]; then\n'
                "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
            ),
            "solution/solve.sh": '#!/bin/bash\nwc -w < /app/words.txt | tr -d " " > /app/count.txt\n',
        },
    )


def tb1_task(suite: Path, name: str, dockerfile: str | None = None) -> Path:
    """Terminal-Bench 1.x: write a greeting; no pytest, so run-tests.sh's exit status decides."""
    return put(
        suite / name,
        {
            "task.yaml": "instruction: |\n  Write the word hello into /app/greeting.txt.\ndifficulty: medium\n"
            "category: file-operations\n",
            "Dockerfile": dockerfile
            or "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\nWORKDIR /app\n",
            "run-tests.sh": '#!/bin/bash\ntest "$(cat /app/greeting.txt 2>/dev/null)" = hello\n',
            "solution.sh": "#!/bin/bash\necho hello > /app/greeting.txt\n",
        },
    )


NEEDS_NETWORK = "FROM debian:bookworm\nRUN pip install pandas\n"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "My Suite"
    harbor_task(root, "count-words")
    tb1_task(root, "greet")
    tb1_task(root, "needs-net", dockerfile=NEEDS_NETWORK)
    return root


@pytest.fixture
def refused_suite(tmp_path: Path) -> Path:
    """Every task folder quarantined by the importer."""
    root = tmp_path / "all-bad"
    tb1_task(root, "needs-net", dockerfile=NEEDS_NETWORK)
    tb1_task(root, "node", dockerfile="FROM node:20\nWORKDIR /app\n")
    return root


@pytest.fixture
def gate_refused_suite(tmp_path: Path) -> Path:
    """Imports fine, but its check passes before anything is done: the gate refuses it."""
    return harbor_task(
        tmp_path / "lenient",
        "always-passes",
        test_sh="#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n",
    ).parent


# ---- import --------------------------------------------------------------------------------------------------
def test_suite_import_prints_each_task_imported_or_quarantined_with_why(
    settings, suite: Path, capsys
) -> None:
    assert cli.main(["suite", "import", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "3 task folder(s), 2 imported, 1 quarantined" in out
    assert "ext-my-suite-count-words" in out and "ext-my-suite-greet" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("needs-net"))
    assert "needs the network: RUN pip install pandas" in line
    assert not Lake(settings).assets()  # a preview: nothing written


def test_a_suite_refused_whole_ends_non_zero_with_the_reasons(
    settings, refused_suite: Path, tmp_path: Path, capsys
) -> None:
    for step in ("import", "gate", "eval"):
        assert cli.main(["suite", step, str(refused_suite)]) == 1, step
        captured = capsys.readouterr()
        assert "every task folder was quarantined (2 of 2)" in captured.err
        assert "needs the network" in captured.err and "needs the network" in captured.out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["suite", "gate", str(empty)]) == 1
    assert "no task folder found" in capsys.readouterr().err
    assert not Lake(settings).assets()  # refused before any sandbox or write


@pytest.mark.docker
def test_suite_gate_refused_by_the_gate_says_why_and_exits_non_zero(
    settings, gate_refused_suite: Path, sandbox_image: str, capsys
) -> None:
    assert cli.main(["suite", "gate", str(gate_refused_suite)]) == 1
    captured = capsys.readouterr()
    assert "refused   ext-lenient-always-passes: check_passes_before_action" in captured.out
    assert "the check exits 0 on the untouched setup" in captured.out
    assert "the gate refused every imported task (1: check_passes_before_action 1)" in captured.err
    lake = Lake(settings)
    rows = lake.read_rows("gate_rejections", "suite-lenient")
    assert [(r["scenario_id"], r["reason"]) for r in rows] == [
        ("ext-lenient-always-passes", "check_passes_before_action")
    ]
    assert lake.read_rows("gated_scenarios", "suite-lenient") == []


# ---- eval ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bashgym_assets.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.docker
def test_suite_eval_imports_gates_and_evaluates_then_eval_suite_reuses_the_gate(
    settings, suite: Path, tiny: Path, sandbox_image: str, capsys
) -> None:
    """``bashgym suite eval PATH``: import (1 quarantined), gate (2 admitted), the evaluation of ``bashgym eval``
    (a tiny model and the reference), the table; the lake holds all of it where the assets put theirs."""
    assert (
        cli.main(
            [
                "suite",
                "eval",
                str(suite),
                "--base",
                str(tiny),
                "--no-champion",
                "--reference",
                "--max-turns",
                "3",
                "--max-new-tokens",
                "8",
                "--parallel",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "gate: 2 of 2 imported task(s) admitted" in out and "needs the network" in out
    assert "| reference | 2 | 100%" in out and "| base | 2 |" in out  # the results table of `bashgym eval`
    lake = Lake(settings)
    gated = lake.read_rows("gated_scenarios", "suite-my-suite")
    assert sorted(r["scenario_id"] for r in gated) == ["ext-my-suite-count-words", "ext-my-suite-greet"]
    assert {r["split"] for r in gated} == {"held_out"}
    assert [r["source"] for r in lake.read_rows("scenario_candidates_quarantine", "suite-my-suite")] == [
        "external:My Suite:tb1:needs-net"
    ]
    partition = next(p for p in lake.partitions("eval_episodes") if p.startswith("eval-cli-suite-my-suite-"))
    episodes = lake.read_rows("eval_episodes", partition)
    assert sorted((e["model"], e["scenario_id"]) for e in episodes) == [
        ("base", "ext-my-suite-count-words"),
        ("base", "ext-my-suite-greet"),
        ("reference", "ext-my-suite-count-words"),
        ("reference", "ext-my-suite-greet"),
    ]
    assert all(e["clean"] for e in episodes if e["model"] == "reference")
    # the SQL views see the suite's rows beside the pipeline's, told apart by _partition
    con = lake.connect()
    assert con.execute(
        "select count(*) from gated_scenarios where _partition = 'suite-my-suite'"
    ).fetchone() == (2,)

    # later: what was gated, without gating again, by suite name or id prefix
    assert (
        cli.main(
            [
                "eval",
                "--suite",
                "my-suite",
                "--reference",
                "--no-base",
                "--no-champion",
                "--base",
                str(tiny),
                "--max-turns",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "gating" not in out and "| reference | 2 | 100%" in out
    assert (
        cli.main(
            [
                "eval",
                "--suite",
                "ext-my-suite-gr",
                "--reference",
                "--no-base",
                "--no-champion",
                "--base",
                str(tiny),
                "--max-turns",
                "3",
            ]
        )
        == 0
    )
    assert "| reference | 1 | 100%" in capsys.readouterr().out
    assert cli.main(["eval", "--suite", "other-suite", "--reference", "--no-base", "--base", str(tiny)]) == 1
    assert "suites there: My Suite" in capsys.readouterr().err


def test_eval_scenarios_on_a_suite_folder_says_to_use_suite_eval(settings, suite: Path, capsys) -> None:
    assert cli.main(["eval", "--scenarios", str(suite), "--reference", "--no-base"]) == 1
    err = capsys.readouterr().err
    assert "is an external shell-task suite (3 Terminal-Bench/Harbor task folder(s)" in err
    assert f"bashgym suite eval '{suite}'" in err
    # one task folder is a suite of one, too
    assert cli.main(["eval", "--scenarios", str(suite / "greet"), "--reference", "--no-base"]) == 1
    assert "bashgym suite eval" in capsys.readouterr().err


# ---- the Dagster assets say it loudly ------------------------------------------------------------------------
@pytest.mark.docker
def test_assets_warn_about_a_suite_refused_whole_and_the_run_succeeds(
    bashgym_home: Path,
    refused_suite: Path,
    gate_refused_suite: Path,
    sandbox_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dagster as dg

    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.defs.scenarios import gated_scenarios, scenario_candidates

    monkeypatch.setenv(
        "BASHGYM_EVAL_SUITE_DIRS", os.pathsep.join([str(refused_suite), str(gate_refused_suite)])
    )
    monkeypatch.delenv("BASHGYM_TEACHER_MODEL", raising=False)
    monkeypatch.delenv("BASHGYM_SCENARIO_IMPORT_DIR", raising=False)
    resources = {"bashgym": BashgymHome(home=str(bashgym_home))}
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [scenario_candidates],
            resources=resources,
            instance=instance,
            run_config={"ops": {"scenario_candidates": {"config": {"include_pack": False}}}},
        )
        assert result.success
        meta = result.asset_materializations_for_node("scenario_candidates")[0].metadata
        assert meta["external_refused_suites"].value == 1 and meta["candidates"].value == 1
        assert "every task folder was quarantined (2 of 2)" in meta["external_warnings"].value
        warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
        assert any("'all-bad'" in w and "refused whole" in w for w in warnings), warnings

        result = dg.materialize([gated_scenarios], resources=resources, instance=instance)
        assert result.success
        meta = result.asset_materializations_for_node("gated_scenarios")[0].metadata
        assert meta["external_refused_suites"].value == 1 and meta["admitted"].value == 0
        assert (
            "'lenient': the gate refused all 1 of its tasks (check_passes_before_action 1)"
            in meta["external_warnings"].value
        )
        warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
        assert any("'lenient'" in w and "refused all" in w for w in warnings), warnings


def test_refusal_checks_of_the_plain_module(suite: Path, refused_suite: Path) -> None:
    from bashgym_assets.scenarios import suite as suites
    from bashgym_assets.scenarios.gate import GateResult

    ok, bad = suites.import_folders([suite, refused_suite])
    assert ok.refusal() is None and bad.refusal() is not None
    assert [p.name for p in suites.task_folders(suite)] == ["count-words", "greet", "needs-net"]
    assert suites.task_folders(suite / "greet") == [suite / "greet"]

    def result(sid: str, source: str, admitted: bool) -> GateResult:
        return GateResult(
            scenario_id=sid,
            category="c",
            difficulty=1,
            source=source,
            admitted=admitted,
            reason="admitted" if admitted else "reference_does_not_pass",
            bundle_json="{}",
        )

    results = [
        result("ext-a-x", "external:A:tb1:x", False),
        result("ext-a-y", "external:A:tb1:y", False),
        result("ext-b-x", "external:B:tb1:x", True),
        result("ext-b-y", "external:B:tb1:y", False),
        result("pack-1", "pack", False),
    ]
    assert list(suites.refused_by_gate(results)) == ["A"]
    assert [b.id for b in suites.of_suites(ok.bundles, ["My Suite"])] == [b.id for b in ok.bundles]
    assert suites.of_suites(ok.bundles, ["ext-my-suite-count"])[0].id == "ext-my-suite-count-words"
    assert suites.of_suites(ok.bundles, ["ext-other"]) == []


# ---- bashgym sql says when it cut ------------------------------------------------------------------------------
def test_sql_says_how_many_rows_it_showed_of_how_many(settings, capsys) -> None:
    Lake(settings).write("numbers", [{"n": i} for i in range(73)])
    assert cli.main(["sql", "select n from numbers order by n"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2 + 50
    assert "50 of 73 rows shown: --max-rows N for more, --all for every row" in captured.err
    assert cli.main(["sql", "select n from numbers order by n", "--all"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2 + 73 and captured.err == ""
    assert cli.main(["sql", "select n from numbers order by n", "--max-rows", "5"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1].strip() == "4" and "5 of 73 rows shown" in captured.err
    assert cli.main(["sql", "select n from numbers", "--limit", "80"]) == 0  # the old option still works
    assert capsys.readouterr().err == ""


def test_factory_summary_counts_the_pipelines_gate_not_the_suites(settings) -> None:
    from bashgym_assets.scenarios.suite import GATED_SCHEMA, REJECTION_SCHEMA

    lake = Lake(settings)
    row = {
        "scenario_id": "gen.f.1",
        "category": "c",
        "difficulty": 1,
        "source": "s",
        "split": "train",
        "reference_turns": 1,
        "duration_s": 1.0,
        "bundle_json": "{}",
    }
    lake.write("gated_scenarios", [row], schema=GATED_SCHEMA)
    lake.write(
        "gated_scenarios",
        [{**row, "scenario_id": "ext-s-x", "split": "held_out"}],
        partition="suite-s",
        schema=GATED_SCHEMA,
    )
    lake.write(
        "gate_rejections",
        [
            {
                "scenario_id": "ext-s-y",
                "category": "c",
                "difficulty": 1,
                "source": "s",
                "reason": "setup_failed",
                "detail": "",
                "bundle_json": "{}",
            }
        ],
        partition="suite-s",
        schema=REJECTION_SCHEMA,
    )
    assert cli.factory_summary() == ["admitted by the gate: factory train 1", "rejected: none"]


def test_benchmark_results_evaluates_only_the_suites_asked_for(settings) -> None:
    """``benchmark_results`` with ``suites: [...]``: only those suites' admitted tasks; none there is a failure
    that names the suites there are, before any model loads."""
    import dagster as dg

    from bashgym_assets.defs.evaluation import benchmark_results
    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.scenarios.bundle import ScenarioBundle

    ext = ScenarioBundle(
        id="ext-my-suite-greet",
        task="say hi",
        category="external",
        difficulty=1,
        setup=["true"],
        check="true",
        reference=["echo hi"],
        source="external:My Suite:tb1:greet",
    )
    Lake(settings).write(
        "gated_scenarios",
        [
            {
                "scenario_id": ext.id,
                "split": "held_out",
                "source": ext.source,
                "bundle_json": ext.model_dump_json(),
            }
        ],
    )
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [benchmark_results],
            instance=instance,
            raise_on_error=False,
            resources={"bashgym": BashgymHome(home=str(settings.home))},
            run_config={"ops": {"benchmark_results": {"config": {"suites": ["other-suite"]}}}},
        )
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        message = failure.step_failure_data.user_failure_data.description
        assert (
            "no admitted task of the suite(s) other-suite" in message and "suites there: My Suite" in message
        )
        # the suite there is taken (the run goes on to look for an adapter to evaluate)
        result = dg.materialize(
            [benchmark_results],
            instance=instance,
            raise_on_error=False,
            resources={"bashgym": BashgymHome(home=str(settings.home))},
            run_config={"ops": {"benchmark_results": {"config": {"suites": ["my-suite"]}}}},
        )
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        assert "no adapter has been trained yet" in failure.step_failure_data.user_failure_data.description
