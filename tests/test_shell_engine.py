"""The shell engine (``bashgym_assets.shell``) is the one place the shell is understood: one syntax check under a
named policy, one end-of-episode rule, one prefix table. No other module keeps its own copy (a source scan), and
every reader agrees on the cases that used to split them: a wrapped ``kill -9 1``, ``ls !(*.txt)``, ``exit $?``,
a NUL byte, a 200 KiB line."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from bashgym_assets import shell
from bashgym_assets.evaluation.failures import command_name
from bashgym_assets.guardrails import classify_command, flag_messages, unsafe_turn
from bashgym_assets.rollout.transcript import BABBLE, COMMAND, EXIT, SYNTAX_ERROR, parse_reply
from bashgym_assets.scenarios.bundle import parse_bundle
from bashgym_assets.scenarios.external.shell import program_index
from bashgym_assets.scenarios.factory.catalog import command_flags
from bashgym_assets.scenarios.gate import CHECK_DOES_NOT_PARSE, ReferenceTurn, Replay, parse_problem
from bashgym_assets.scenarios.nl2bash import Pair, pair_to_bundle
from bashgym_assets.shell import (
    NUL_IN_TEXT,
    OPERATOR,
    SCRIPT,
    TRAINING_DATA,
    bash_syntax_error,
    is_exit_command,
)
from bashgym_assets.training import grpo
from bashgym_assets.training_data import shell_render
from bashgym_assets.training_data.build import unparseable_turn

PACKAGE = Path(__file__).resolve().parents[1] / "bashgym_assets"
SHELL_PACKAGE = PACKAGE / "shell"
PLAIN_WRAPPERS = frozenset(
    {"nohup", "nice", "ionice", "timeout", "setsid", "stdbuf", "xargs", "chronic", "unbuffer"}
)
BASIC = {
    "task": "Count the lines of ~/f into ~/n.",
    "category": "text",
    "difficulty": 1,
    "setup": ["printf 'a\\n' > /home/operator/f"],
    "check": "[ -s /home/operator/n ]",
    "reference": ["wc -l < ~/f > ~/n"],
}


# ---- one home: nothing outside shell/ keeps its own copy ------------------------------------------------------------
def _strings(node: ast.AST) -> list[str]:
    return [e.value for e in ast.walk(node) if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _copies(tree: ast.AST) -> list[str]:
    """What in one module's syntax tree is a syntax check, an exit rule or a wrapper table of its own."""
    found: list[str] = []
    wrapper_names = set(shell.WRAPPERS) - {"time", "exec", "command", "env", "builtin"}  # also common words
    # (a set of privilege programs, ``sudo``/``doas``/``runuser``, is a judgement about wrappers, not a table)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in (
            "bash_syntax_error",
            "is_exit_command",
            "unwrap",
            "read_wrapper",
        ):
            found.append(f"def {node.name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "exit|logout" in node.value or "logout|exit" in node.value or "(?:exit" in node.value:
                found.append(f"an exit regex {node.value[:40]!r}")
        elif isinstance(node, ast.List | ast.Tuple) and {"bash", "-n"} <= set(_strings(node)):
            found.append("a bash -n command line")
        elif isinstance(node, ast.Set | ast.List | ast.Tuple | ast.Dict):
            keys = node.keys if isinstance(node, ast.Dict) else node.elts
            items = [k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if len(wrapper_names & set(items)) >= 3 and PLAIN_WRAPPERS & set(items):
                found.append(f"a wrapper table {sorted(wrapper_names & set(items))}")
            if "exit" in items and set(items) <= {"exit", "logout", "exit;"}:
                found.append("a set of exit words")
        elif isinstance(
            node, ast.Compare
        ):  # ``line.strip() == "exit"``: a line compared with the exit command
            sides = [node.left, *node.comparators]
            stripped = any(
                isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) and s.func.attr == "strip"
                for s in sides
            )
            exit_side = any(isinstance(s, ast.Constant) and s.value == "exit" for s in sides) or any(
                isinstance(s, ast.Name) and s.id == "EXIT_COMMAND" for s in sides
            )
            if stripped and exit_side:
                found.append("a comparison with the exit command")
    return found


def test_no_module_outside_shell_defines_a_syntax_check_an_exit_rule_or_a_wrapper_table() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if SHELL_PACKAGE not in path.parents
        and (found := _copies(ast.parse(path.read_text(encoding="utf-8"), str(path))))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("def bash_syntax_error(c):\n    return None\n", "def bash_syntax_error"),
        ('import re\n_EXIT_RE = re.compile(r"^\\s*(?:exit|logout)$")\n', "an exit regex"),
        ('EXIT_WORDS = frozenset({"exit", "logout"})\n', "a set of exit words"),
        ('_WRAPPERS = frozenset({"sudo", "nohup", "nice", "timeout"})\n', "a wrapper table"),
        ('P = ["bash", "--norc", "-n"]\n', "a bash -n command line"),
        ('ok = line.strip() == "exit"\n', "a comparison with the exit command"),
    ],
)
def test_the_scan_finds_each_kind_of_copy(source: str, what: str) -> None:
    assert any(f.startswith(what) for f in _copies(ast.parse(source)))


# ---- one prefix table: a wrapped kill is the same kill to everyone ---------------------------------------------------
@pytest.mark.parametrize("command", ["timeout 5 kill -9 1", "nice kill -9 1", "env -u X kill -9 1"])
def test_a_wrapped_kill_of_pid_1_is_kill_init_to_guardrails_and_a_hack_to_grpo(command: str) -> None:
    assert "kill_init" in classify_command(command).rules
    assert grpo.hack_in_command(command) == "tried to end the container"
    (cmd,) = shell.parse(command).commands
    assert command_name(cmd) == "kill"  # the failure classifier reads the same command
    assert "kill -9" in command_flags([command])  # and so does the factory catalog
    words = [w.value for w in cmd.words]
    assert words[program_index(words)] == "kill"  # and the external importer


def test_runuser_wraps_only_with_u_so_its_su_form_keeps_its_rule() -> None:
    """``runuser -u bob -- rm -rf /`` runs ``rm`` (before, only ``runuser``'s ``-c`` was read: not blocked);
    ``runuser bob -c '...'`` is su-style and its ``-c`` string is still analysed."""
    assert classify_command("runuser -u bob -- rm -rf /").blocked
    assert classify_command("runuser bob -c 'rm -rf /'").blocked
    assert shell.read_wrapper("runuser", ["bob", "-c", "ls"]) is None
    assert command_flags(["runuser bob -c 'ls'"]) == {"runuser -c"}


@pytest.mark.parametrize(
    ("line", "units"),
    [
        ("env LC_ALL=C sort -u f", {"env", "sort -u"}),  # before: "LC_ALL=C" counted as a command, sort lost
        ("xargs -I {} mv {} d", {"xargs -I", "mv"}),  # before: "{}" counted as a command
        ("timeout -k 5 10 cp -a a b", {"timeout -k", "cp -a"}),
        ("command -v ls", {"command -v"}),  # a lookup runs nothing
        ("while IFS= read -r l; do :; done", {"read -r", ":"}),  # before: "IFS= -r"
    ],
)
def test_the_catalog_reads_wrappers_with_the_table(line: str, units: set[str]) -> None:
    assert command_flags([line]) == units


def test_the_failure_classifier_and_the_importer_skip_option_values() -> None:
    (cmd,) = shell.parse("sudo -u bob rm x").commands
    assert command_name(cmd) == "rm"  # before: "bob"
    assert program_index(["timeout", "60", "pytest", "-x"]) == 2  # before: the timeout itself
    assert program_index(["command", "-v", "uv"]) == 0  # a lookup, not a run of uv


# ---- one syntax check: every reader of an operator's line agrees --------------------------------------------------
def test_extglob_is_a_syntax_error_in_an_operators_line_and_fine_in_a_script() -> None:
    line = "ls !(*.txt)"
    assert parse_reply(line).kind == SYNTAX_ERROR  # the episode driver
    assert shell_render.syntax_error(line) is not None  # training data
    with pytest.raises(ValueError, match="does not parse as bash"):
        pair_to_bundle(Pair(nl="list all but the text files", cmd=line))  # nl2bash references
    # a script is parsed a command at a time: shopt on one line makes the next parse (the gate's SCRIPT policy)
    assert bash_syntax_error(line, policy=SCRIPT) is None
    assert parse_problem(parse_bundle({**BASIC, "check": f"shopt -s extglob\n{line} >/dev/null"})) is None


@pytest.mark.docker
def test_the_operator_policy_matches_the_sandbox_shell(sandbox_image: str) -> None:
    """What ``OPERATOR`` refuses, the operator's shell in the sandbox refuses too (exit code 2), even with
    ``shopt -s extglob`` on the same line; what it accepts runs."""
    from bashgym_assets.sandbox import Sandbox
    from bashgym_assets.scenarios.sandboxing import spec_for_bundle

    with Sandbox(spec_for_bundle(parse_bundle(BASIC), sandbox_image)) as box:
        assert box.setup().ok
        session = box.session()
        for line in ["ls !(*.txt)", "shopt -s extglob; ls !(*.txt)", "echo 'hi", "ls ~ | wc -l"]:
            refused = bash_syntax_error(line, policy=OPERATOR) is not None
            result = session.run(line)
            assert (result.exit_code == 2 and result.stderr.startswith("bash: ")) == refused, (line, result)


def test_a_nul_byte_is_refused_by_every_policy_and_every_reader() -> None:
    text = "echo a\0b"
    assert {bash_syntax_error(text, policy=p) for p in (SCRIPT, OPERATOR, TRAINING_DATA)} == {NUL_IN_TEXT}
    assert parse_reply(text).kind == BABBLE
    # before: a check with a NUL passed bash -n on stdin (bash drops the byte) and failed later in the sandbox
    problem = parse_problem(parse_bundle({**BASIC, "check": "[ -s /home/operator/n ]\0"}))
    assert problem is not None and problem[0] == CHECK_DOES_NOT_PARSE


def test_a_200_kib_line_is_judged_not_lost() -> None:
    fine, broken = "echo " + "a" * 200 * 1024, "echo '" + "a" * 200 * 1024
    for policy in (SCRIPT, OPERATOR, TRAINING_DATA):
        assert bash_syntax_error(fine, policy=policy) is None
        assert "unexpected EOF" in (bash_syntax_error(broken, policy=policy) or "")
    assert parse_reply(fine).kind == COMMAND


def test_no_verdict_lets_a_line_through_except_for_training_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: None)
    assert bash_syntax_error("echo 'hi", policy=SCRIPT) is None  # the sandbox's bash judges it
    assert bash_syntax_error("echo 'hi", policy=OPERATOR) is None
    assert bash_syntax_error("echo hi", policy=TRAINING_DATA) is not None  # nothing later would catch it


# ---- one end-of-episode rule ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "ends"),
    [
        ("exit", True),
        ("exit 0", True),
        ("exit;", True),
        ("exit 0 # done", True),
        ("exit $?", True),
        ('exit "$rc"', True),
        ("exit ${rc}", True),
        ("logout", True),
        ("  exit 1  ", True),
        ("exit $(cleanup)", False),  # runs a command first
        ("exit `date`", False),
        ("exit 0 && ls", False),
        ("exit; ls", False),
        ("exit 1 2", False),  # bash: too many arguments, does not exit
        ("exit foo", False),
        ('exit "$rc', False),  # an unterminated quote
        ("exit#x", False),
        ("echo exit", False),
    ],
)
def test_what_ends_an_episode(line: str, ends: bool) -> None:
    assert is_exit_command(line) is ends


@pytest.mark.parametrize("line", ["exit $?", 'exit "$rc"', "exit 0 # done", "logout"])
def test_every_reader_agrees_on_an_exit_line(line: str) -> None:
    """Before: ``exit $?`` ended the gate's reference but was a command to the transcript (``exit \\d+``)."""
    reply = parse_reply(line)
    assert (reply.kind, reply.is_exit, reply.syntax_error) == (EXIT, True, None)
    turns = [
        ReferenceTurn(index=1, total=2, command="wc -l f > n", output="", exit_code=0),
        ReferenceTurn(index=2, total=2, command=line, output="", exit_code=0),
    ]
    assert line not in Replay(turns=turns).mattered()
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": line},
    ]
    assert unsafe_turn(messages) is None and flag_messages(messages).flags == []
    assert unparseable_turn(messages) is None
