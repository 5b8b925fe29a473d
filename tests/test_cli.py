"""The `bashgym` command on a small lake: SQL over the views, where things are, clean errors."""

from __future__ import annotations

import pytest

from bashgym_assets import cli
from bashgym_assets.lake import Lake


def test_sql_over_the_lake_views(settings, capsys: pytest.CaptureFixture[str]) -> None:
    Lake(settings).write(
        "tiered_traces",
        [
            {"segment_id": "s1", "tier": "gold"},
            {"segment_id": "s2", "tier": "gold"},
            {"segment_id": "s3", "tier": "failed"},
        ],
        partition="webshop",
    )
    assert cli.main(["sql", "select tier, count(*) as n from tiered_traces group by 1 order by 1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["tier", "n"]
    assert [line.split() for line in out[2:]] == [["failed", "1"], ["gold", "2"]]


def test_where_names_the_data_folder(settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["where"]) == 0
    out = capsys.readouterr().out
    assert str(settings.home) in out and "make ui" in out and "make mlflow" in out


def test_unknown_trace_is_a_clean_error(settings, capsys: pytest.CaptureFixture[str]) -> None:
    Lake(settings).write("tiered_traces", [{"segment_id": "s1", "tier": "gold"}], partition="webshop")
    assert cli.main(["demote", "no-such-segment", "--reason", "bad"]) == 1
    assert "no-such-segment" in capsys.readouterr().err


@pytest.mark.usefixtures("mlflow_store_ready")  # a test of MLflow's use, not of its store's creation
def test_closing_summary_lines_say_what_the_data_became(settings):
    from bashgym_assets.cli import champion_summary, pipeline_summary
    from bashgym_assets.lake import Lake

    lake = Lake(settings)
    lake.write("tiered_traces", [{"tier": "gold"}, {"tier": "failed"}, {"tier": "gold"}], "repo-a")
    lake.write("tiered_traces", [{"tier": "silver"}], "repo-b")
    lake.write("verified_trajectories", [{"kept": True}, {"kept": False}, {"kept": True}])
    assert pipeline_summary() == [
        "trace segments by tier: gold 2, silver 1, bronze 0, failed 1",
        "trajectories: 2 kept of 3 attempts",
    ]
    assert champion_summary().startswith("champion: none yet")


def _commands(parser, prefix: str = "bashgym"):
    """(command line, parser) for the parser and each of its sub-commands, nested ones included."""
    import argparse

    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{prefix} {name}")


def test_no_command_has_an_option_and_its_seconds_spelling_for_two_settings() -> None:
    """``suite eval`` took --command-timeout (the gate's) and --command-timeout-s (the evaluation's), the check
    pair too: two settings one ``-s`` apart. No command has an option both with and without the unit suffix."""
    import argparse

    from bashgym_assets.cli import build_parser

    close = []
    for command, parser in _commands(build_parser()):
        names = sorted(
            {
                o
                for a in parser._actions
                if a.help is not argparse.SUPPRESS
                for o in a.option_strings
                if o.startswith("--")
            }
        )
        close += [f"{command}: {a} / {a}-s" for a in names if f"{a}-s" in names]
    assert close == []


def test_suite_gate_limits_have_one_name_and_the_old_names_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    from bashgym_assets.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(
        ["suite", "eval", "s", "--gate-command-timeout-s", "7", "--gate-check-timeout-s", "8",
         "--command-timeout-s", "9", "--check-timeout-s", "11"]
    )  # fmt: skip
    assert (args.gate_command_timeout_s, args.gate_check_timeout_s) == (7.0, 8.0)
    assert (args.command_timeout_s, args.check_timeout_s) == (9.0, 11.0)
    assert "deprecated" not in capsys.readouterr().err
    # the old spellings still set the gate's limits, and say what to use instead
    for command in ("gate", "eval"):
        old = parser.parse_args(["suite", command, "s", "--command-timeout", "5", "--check-timeout", "6"])
        assert (old.gate_command_timeout_s, old.gate_check_timeout_s) == (5.0, 6.0)
        err = capsys.readouterr().err
        assert "--command-timeout is deprecated" in err and "--gate-command-timeout-s" in err
        assert "--check-timeout is deprecated" in err and "--gate-check-timeout-s" in err
    defaults = parser.parse_args(["suite", "gate", "s"])
    assert (defaults.gate_command_timeout_s, defaults.gate_check_timeout_s) == (30.0, 30.0)
