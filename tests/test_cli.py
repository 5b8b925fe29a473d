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
