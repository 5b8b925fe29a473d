"""``bashgym eval``'s run options are ``EvalSettings``' fields (issue 30): one field added there is an option of
``bashgym eval`` and ``bashgym suite eval``, with its default, and reaches the evaluator."""

from __future__ import annotations

from typing import Literal, get_args, get_origin

import pytest

from bashgym_assets.cli import build_parser
from bashgym_assets.evaluation import EvalSettings
from bashgym_assets.evaluation.cli import eval_settings

COMMANDS = [["eval"], ["suite", "eval", "some/suite"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_eval_settings_field_is_an_option_with_its_default(command):
    parsed = build_parser().parse_args(command)
    defaults = EvalSettings()
    for name in EvalSettings.model_fields:
        assert getattr(parsed, name) == getattr(defaults, name), name
        assert EvalSettings.model_fields[name].description, name  # the option's help, and the launchpad's
    assert eval_settings(parsed) == defaults


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_eval_settings_option_reaches_the_evaluator(command):
    """Each field set on the command line (``--max-turns``, ``--episode-timeout-s``, ``--no-continuous``, ...)
    is what the evaluator is given."""
    changed = {}
    argv = list(command)
    for name, field in EvalSettings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        if field.annotation is bool:
            changed[name] = not field.default
            argv.append(flag if changed[name] else "--no-" + flag[2:])
        elif get_origin(field.annotation) is Literal:  # a choice: another one than the default
            changed[name] = next(c for c in get_args(field.annotation) if c != field.default)
            argv += [flag, changed[name]]
        else:
            changed[name] = field.annotation(field.default * 2 + 1)
            argv += [flag, str(changed[name])]
    assert eval_settings(build_parser().parse_args(argv)) == EvalSettings(**changed)


def test_lockstep_still_turns_continuous_batching_off():
    assert eval_settings(build_parser().parse_args(["eval", "--lockstep"])).continuous is False
    assert eval_settings(build_parser().parse_args(["eval", "--continuous"])).continuous is True
