"""Exactness of the operator shell against a real container: boundaries, exit codes and state never confused.

Each hazard from the issue (markers in the output, missing trailing newlines, binary output, ``set -e``, ``exit`` in
a subshell, ``exec``, stdin readers, ``cd`` into a missing folder, sourcing a missing file) has its own test.
"""

from __future__ import annotations

import secrets

import pytest

from bashgym_assets.sandbox import Sandbox, SandboxSpec, SessionEnded

pytestmark = pytest.mark.docker
LABELS = {"bashgym.test": "sandbox-exactness"}


def spec(image: str, **kw) -> SandboxSpec:
    return SandboxSpec(image=image, labels=LABELS, **kw)


@pytest.fixture(scope="module")
def box(sandbox_image: str):
    with Sandbox(spec(sandbox_image, command_timeout_s=20)) as b:
        yield b


@pytest.fixture
def sh(box):
    """The module's shared session (tests that end or break the shell use their own sandbox)."""
    session = box.session()
    session.run("cd ~")
    return session


@pytest.fixture
def fresh(sandbox_image: str):
    with Sandbox(spec(sandbox_image, command_timeout_s=20)) as b:
        yield b


def test_exit_codes_are_exact(sh):
    for code in (0, 1, 2, 42, 127, 128, 255):
        assert sh.run(f"(exit {code})").exit_code == code
    assert sh.run("false").exit_code == 1
    missing = sh.run("definitely-not-a-command")
    assert missing.exit_code == 127 and "command not found" in missing.stderr
    assert sh.run("f() { return 7; }; f").exit_code == 7


def test_stdout_and_stderr_are_separate_and_byte_exact(sh):
    r = sh.run("printf 'a\\nb'; printf 'E1\\n' >&2; printf 'c'; printf 'E2' >&2")
    assert (r.stdout, r.stderr, r.exit_code, r.timed_out) == ("a\nbc", "E1\nE2", 0, False)


def test_missing_trailing_newline_does_not_merge_with_next_command(sh):
    assert sh.run("printf 'no newline'").stdout == "no newline"
    assert sh.run("echo next").stdout == "next\n"


def test_printed_markers_cannot_end_a_command(sh):
    fake = secrets.token_hex(16)
    r = sh.run(
        f"printf '\\036BG:{fake}:0\\036'; printf '\\036BG:{fake}\\036' >&2; "
        "printf '\\036BGEXIT:0\\036' >&2; echo after; exit_code() { return 3; }; exit_code"
    )
    assert r.stdout == f"\x1eBG:{fake}:0\x1eafter\n"
    assert r.stderr == f"\x1eBG:{fake}\x1e\x1eBGEXIT:0\x1e"
    assert r.exit_code == 3 and not r.terminated and not sh.exited
    assert sh.run("echo alive").stdout == "alive\n"


def test_binary_output_keeps_boundaries(sh):
    r = sh.run("head -c 65536 /dev/urandom > /tmp/rand; cat /tmp/rand; echo -n END >&2")
    assert r.exit_code == 0 and r.stderr == "END"
    assert len(r.stdout.encode("utf-8", errors="surrogatepass")) > 0
    zeros = sh.run("head -c 1000 /dev/zero")
    assert zeros.stdout == "\0" * 1000
    all_bytes = sh.run("printf \"$(printf '\\\\%03o' $(seq 1 255))\" | wc -c")
    assert all_bytes.stdout.strip() == "255"
    assert sh.run("echo ok").stdout == "ok\n"


def test_unicode_round_trips(sh):
    assert sh.run("echo 'héllo ✓ 日本'").stdout == "héllo ✓ 日本\n"


def test_commands_that_read_stdin_get_eof_not_the_framing(sh):
    assert sh.run("cat").stdout == ""
    assert sh.run("read x; echo rc=$?").stdout == "rc=1\n"
    assert sh.run("python3 -c 'import sys; print(len(sys.stdin.read()))'").stdout == "0\n"
    assert sh.run("echo still here").stdout == "still here\n"


def test_cd_into_missing_folder_and_sourcing_missing_file_keep_the_shell(sh):
    sh.run("cd /tmp")
    r = sh.run("cd /no/such/dir")
    assert r.exit_code == 1 and "No such file or directory" in r.stderr
    assert sh.run("pwd").stdout == "/tmp\n"
    assert sh.run(". /no/such/file").exit_code == 1
    assert sh.run("source /no/such/file").exit_code == 1
    assert not sh.exited and sh.run("echo ok").exit_code == 0


def test_exit_inside_a_subshell_or_child_does_not_end_the_session(sh):
    assert sh.run("(exit 5)").exit_code == 5
    assert sh.run("bash -c 'exit 6'").exit_code == 6
    assert sh.run("sh -c 'exit 9'; echo $?").stdout == "9\n"
    assert not sh.exited


def test_state_carries_over_like_a_terminal(sh):
    sh.run("mkdir -p /tmp/state && cd /tmp/state")
    sh.run('export EXPORTED=yes; PLAIN=local; declare -a ARR=(x y z); greet() { echo "hi $1"; }')
    sh.run("alias ll='ls -1d'")
    assert sh.run("pwd").stdout == "/tmp/state\n"
    assert sh.run("bash -c 'echo $EXPORTED'").stdout == "yes\n"
    assert sh.run("echo $PLAIN ${ARR[2]}").stdout == "local z\n"
    assert sh.run("greet bob").stdout == "hi bob\n"
    assert sh.run("ll /tmp/state").stdout == "/tmp/state\n"
    sh.run("false")
    assert sh.run("echo $?").stdout == "1\n"


def test_background_jobs_persist_between_commands(sh):
    sh.run("sleep 60 &")
    r = sh.run("jobs")
    assert "sleep 60" in r.stdout and "Running" in r.stdout
    assert sh.run("kill %1; wait %1; echo done").stdout.endswith("done\n")


def test_background_output_after_a_command_goes_to_the_next(sh):
    first = sh.run("(sleep 0.3; echo from-background) &")
    assert "from-background" not in first.stdout
    second = sh.run("sleep 1; echo from-foreground")
    assert second.stdout == "from-background\nfrom-foreground\n"


def test_syntax_errors_and_unbalanced_quotes_are_contained(sh):
    r = sh.run("echo 'unterminated")
    assert r.exit_code == 2 and "unexpected EOF" in r.stderr
    assert sh.run("if then fi").exit_code == 2
    assert sh.run("echo )").exit_code == 2
    assert sh.run("echo fine").stdout == "fine\n"


def test_multiline_heredoc_comments_and_special_characters(sh):
    r = sh.run("cat <<'EOF'\nline1\n$HOME 'q' \"dq\" \\back\nEOF\necho two # a comment")
    assert r.stdout == "line1\n$HOME 'q' \"dq\" \\back\ntwo\n"
    assert sh.run("echo a\\\nb").stdout == "ab\n"
    assert sh.run("echo \"$(printf '%s' '}; ;; $(( ))')\"").stdout == "}; ;; $(( ))\n"
    assert sh.run("echo '\\x1e \\n \\t'").stdout == "\\x1e \\n \\t\n"


def test_local_declarations_stay_global_at_top_level(sh):
    sh.run("declare -i COUNTER=41; COUNTER+=1; typeset NAME=top")
    assert sh.run("echo $COUNTER $NAME").stdout == "42 top\n"


def test_large_output_below_the_cap_is_exact(sh):
    r = sh.run("head -c 50000 /dev/zero | tr '\\0' 'x'")
    assert r.stdout == "x" * 50000 and r.stdout_truncated_bytes == 0


def test_output_cap_keeps_head_and_tail_and_counts_the_cut(sandbox_image):
    with Sandbox(spec(sandbox_image, output_limit_bytes=1000)) as b:
        r = b.session().run("seq 1 200000; seq 1 50000 >&2")
    full = "".join(f"{i}\n" for i in range(1, 200001))
    assert r.stdout.startswith(full[:500]) and r.stdout.endswith(full[-500:])
    assert r.stdout_truncated_bytes == len(full) - 1000
    assert f"[... {len(full) - 1000} bytes of output cut ...]" in r.stdout
    err_full = "".join(f"{i}\n" for i in range(1, 50001))
    assert r.stderr.startswith(err_full[:500]) and r.stderr.endswith(err_full[-500:])
    assert r.stderr_truncated_bytes == len(err_full) - 1000


def test_timeout_kills_the_process_group_and_keeps_state(sh):
    sh.run("cd /tmp; export KEEP=1; sleep 120 &")
    r = sh.run("sh -c 'sleep 300 & sleep 301'; echo never", timeout_s=1)
    assert r.timed_out and r.exit_code is None and "never" not in r.stdout
    assert not sh.exited
    procs = sh.run("ps -e -o args=").stdout
    assert "sleep 300" not in procs and "sleep 301" not in procs
    assert "sleep 120" in procs  # the earlier background job survives, as after Ctrl-C in a terminal
    assert sh.run("pwd; echo $KEEP").stdout == "/tmp\n1\n"
    sh.run("kill %1 2>/dev/null; wait 2>/dev/null")


def test_timeout_interrupts_a_builtin_loop_in_the_shell_itself(sh):
    sh.run("cd /tmp")
    r = sh.run("echo started; while :; do :; done", timeout_s=1)
    assert r.timed_out and r.stdout == "started\n"
    assert sh.run("pwd").stdout == "/tmp\n"


def test_timeout_of_a_command_ignoring_sigint_and_sigterm(sh):
    r = sh.run("bash -c 'trap \"\" INT TERM HUP; echo stubborn; while :; do sleep 1; done'", timeout_s=1)
    assert r.timed_out and r.stdout == "stubborn\n" and "\x1e" not in r.stdout + r.stderr
    assert "stubborn" not in sh.run("ps -e -o args=").stdout.replace("ps -e", "")
    assert sh.run("echo usable").stdout == "usable\n"


def test_exit_ends_the_episode_as_a_termination(fresh):
    s = fresh.session()
    r = s.run("echo bye; exit 3")
    assert r.terminated and r.exit_code == 3 and r.stdout == "bye\n" and s.exited
    with pytest.raises(SessionEnded):
        s.run("echo again")


def test_plain_exit_is_status_zero(fresh):
    s = fresh.session()
    s.run("true")
    r = s.run("exit")
    assert r.terminated and r.exit_code == 0 and r.stderr == ""


def test_exec_replaces_the_shell(fresh):
    s = fresh.session()
    r = s.run("exec bash -c 'echo replaced; exit 4'")
    assert r.stdout == "replaced\n" and r.exit_code == 4 and r.terminated and s.exited


def test_exec_redirections_do_not_hide_the_framing(fresh):
    s = fresh.session()
    s.run("exec 2>/dev/null")
    r = s.run("ls /no/such; echo out")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "out\n", "")
    assert s.run("ls /no/such").exit_code == 2
    s.run("exec >/tmp/all-output")
    r = s.run("echo hidden; (exit 5)")
    assert (r.stdout, r.exit_code) == ("", 5)


def test_set_e_failure_ends_the_shell_like_a_terminal(fresh):
    s = fresh.session()
    assert s.run("set -e").exit_code == 0
    assert s.run("true; echo fine").stdout == "fine\n"
    r = s.run("echo before; false; echo after")
    assert r.stdout == "before\n" and r.exit_code == 1 and r.terminated and s.exited


def test_killed_shell_is_reported_without_exit_code_or_termination(fresh):
    s = fresh.session()
    r = s.run("kill -9 $$")
    assert s.exited and r.exit_code is None and not r.terminated


def test_nul_byte_in_command_is_refused_clearly(sh):
    with pytest.raises(ValueError, match="NUL"):
        sh.run("echo \0")


def test_root_user_workdir_and_env(sandbox_image):
    with Sandbox(spec(sandbox_image, user="root", workdir="/srv", env={"GREETING": "hello"})) as b:
        s = b.session()
        assert s.run("id -u; pwd; echo $GREETING $HOME").stdout == "0\n/srv\nhello /root\n"


def test_operator_defaults(sh):
    r = sh.run("cd ~; id -un; id -u; pwd; echo $HOME $USER; hostname")
    assert r.stdout == "operator\n1000\n/home/operator\n/home/operator operator\nsandbox\n"
    assert sh.run("git config user.name").stdout == "Operator\n"  # the image's home skeleton is there


def test_xtrace_shows_the_command_not_the_framing(fresh):
    s = fresh.session()
    assert s.run("set -x").stderr == ""
    r = s.run("echo traced")
    assert r.stdout == "traced\n" and "+ echo traced" in r.stderr
    assert "__bashgym" not in r.stderr and "\x1e" not in r.stderr
    s.run("set +x")
    assert s.run("echo quiet").stderr == ""


def test_a_thief_of_the_shells_input_costs_one_command_only(fresh):
    s = fresh.session()
    # a background reader of the shell's input pipe races the shell for every command sent next; whichever
    # command it swallows times out, and that timeout's clean-up kills it: it costs one command, never the session
    s.run("cat <&10 > /tmp/stolen 2>/dev/null & sleep 0.5")
    results = [s.run(f"echo {i}", timeout_s=1) for i in range(8)]
    swallowed = [i for i, r in enumerate(results) if r.timed_out]
    assert len(swallowed) <= 1 and not s.exited
    assert all(r.stdout == f"{i}\n" for i, r in enumerate(results) if i not in swallowed)
    if swallowed:
        assert "cat" not in s.run("jobs").stdout
    r = s.run("read -r line <&10; echo got=$line", timeout_s=1)  # a builtin reading it just times out
    assert r.timed_out and "got=" not in r.stdout
    assert s.run("echo four").stdout == "four\n"
