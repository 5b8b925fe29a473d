"""The operator's persistent shell: one interactive bash per episode, one command at a time, exact boundaries.

Why this design (better than both seeds): the blog's persistent shell keeps real terminal state (cwd, exports,
functions, aliases, background jobs) but needs boundaries it can trust; sekft's one ``docker exec`` per command has
exact exit codes but replays state (and its POSIX hazards) and pays ~57 ms per command. Here one ``bash -i`` runs
for the whole episode behind a single ``docker exec`` socket, and each command is sent as ONE line::

    __bashgym_pre; { eval -- $'<command, escaped>'; } </dev/null; __bashgym_end <nonce>

* The command text travels ANSI-C-escaped, so quotes, heredocs, comments or a syntax error in it cannot swallow the
  framing; ``eval`` runs it at top level (``declare`` stays global, aliases and functions persist).
* ``__bashgym_end`` writes ``\\x1eBG:<nonce>:<status>\\x1e`` to a saved copy of stdout and ``\\x1eBG:<nonce>\\x1e``
  to a saved copy of stderr. The nonce is fresh random per command and never printed before the command ends, so
  no output (markers, missing newlines, binary) can fake an end; ``exec 2>/dev/null`` cannot hide it either.
* stdin is ``/dev/null`` for the command: a command that reads stdin gets EOF instead of eating the framing.
* The shell is interactive (``-i``), so SIGINT aborts even a builtin loop and returns to the prompt, as Ctrl-C does
  in a terminal. A timeout sends SIGINT to the shell's process group (background jobs ignore it, as in a terminal
  without job control), then SIGKILLs whatever the command started (except earlier background jobs), then
  re-synchronises with a fresh nonce: the session stays usable with its state.
* ``exit`` (or ``exec``, or a failure under ``set -e``) ends the shell; an EXIT trap reports the status and the
  result says ``terminated``. A shell killed by a signal is reported with no exit code and not as a termination.

* Every byte read counts against a cap whatever the framing state: output after a marker (a background flood
  while the other stream's marker is silenced) is kept head-and-tail like any command output.
* The framing functions are read-only: a command cannot redefine ``__bashgym_end`` to report a status of its
  choosing.

Known limits (all confined to the operator's own episode; the verdict comes from the checker, never from here):
output a background job prints after a command's marker is reported with the next command, as a terminal would
show it; under ``set -x`` the trace shows the command as ``+ eval -- '...'`` and one level deeper. A process that
reads the shell's input (``cat <&10 &``, or a loop reopening ``/proc/<shell>/fd/0``) swallows the next command,
which times out; the timeout's clean-up watches for holders of the shell's input for a moment and kills each with
the job around it, so the session recovers with the command after. A DEBUG trap sees the end marker's nonce
(``$BASH_COMMAND``) and can print a marker with a forged status: the shell is the operator's, so the exit codes in
an episode record are the operator's own account of them; the verdict does not depend on them.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from typing import TYPE_CHECKING

import docker

from bashgym_assets.sandbox._exec import CappedBuffer, ExecStream, command_result
from bashgym_assets.sandbox.layout import PATH, READY_WAIT, SESSION_ACCOUNTS, SESSION_DIR, SandboxError
from bashgym_assets.sandbox.models import CommandResult

if TYPE_CHECKING:
    from bashgym_assets.sandbox.sandbox import Sandbox

OUT_FD, ERR_FD = 61, 62
HOLD_BACK = 96  # bytes kept unscanned at the end of a stream, so a marker split across reads is found
XTRACE_RE = re.compile(r"^\++ (?:__bashgym_end(?: \d+)? [0-9a-f]{32}|__bashgym_rc=\d+)\n", re.M)
TCSETATTR_RE = re.compile(r"bash: \[\d+: \d+ \(\d+\)\] tcsetattr: Inappropriate ioctl for device\n")

INIT_SCRIPT = f"""\
set +H; set +o history; unset HISTFILE PROMPT_COMMAND; PS1=''; PS2=''; PS0=''; PS4='+ '
exec {OUT_FD}>&1 {ERR_FD}>&2
for __bashgym_f in /etc/profile.d/*.sh; do [ -r "$__bashgym_f" ] && . "$__bashgym_f"; done >/dev/null 2>&1
unset __bashgym_f; __bashgym_rc=0
__bashgym_pre() {{ printf '%s\\n' /proc/[0-9]* >{SESSION_DIR}/before 2>/dev/null; \
{{ [ -n "$__bashgym_x" ] && set -x; return $__bashgym_rc; }} 2>/dev/null; }}
__bashgym_end() {{ __bashgym_rc=$?; {{ __bashgym_x=; [[ $- == *x* ]] && __bashgym_x=1; set +x; }} 2>/dev/null; \
[ $# = 2 ] && {{ __bashgym_rc=$1; shift; }}; PS1=''; PS2=''; PS0=''; \
unset PROMPT_COMMAND; \
printf '\\036BG:%s:%d\\036' "$1" "$__bashgym_rc" >&{OUT_FD}; printf '\\036BG:%s\\036' "$1" >&{ERR_FD}; \
return $__bashgym_rc; }}
trap 'printf "\\036BGEXIT:%s:%d\\036" "$__bashgym_exit_tag" "$?" >&{ERR_FD}' EXIT
readonly -f __bashgym_pre __bashgym_end
__bashgym_p=; for __bashgym_d in /proc/[0-9]*; do read -r __bashgym_l < "$__bashgym_d/stat" 2>/dev/null || continue; \
set -- ${{__bashgym_l##*) }}; __bashgym_p="$__bashgym_p ${{__bashgym_d#/proc/}}:${{20}}"; done; set --
printf 'BASHGYM %s %s\\n' "$$" "$__bashgym_p"; unset __bashgym_p __bashgym_d __bashgym_l
"""

_SAFE = frozenset(
    b'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-+=.,:/@%^&*()[]{}<>|;~#$!?`"'
)


def ansi_c_quote(text: str) -> str:
    """``$'...'`` with every byte outside a safe set as ``\\xHH``: one line, no quote or escape can break out."""
    out = []
    for b in text.encode("utf-8", errors="surrogateescape"):
        out.append(chr(b) if b in _SAFE else f"\\x{b:02x}")
    return "$'" + "".join(out) + "'"


class SessionEnded(RuntimeError):
    """``run`` was called after the shell ended (``exit``, killed, episode time limit, or the check ran)."""


class _Scanner:
    """Finds one end marker in one stream and routes everything before it into a capped buffer."""

    def __init__(self, limit: int) -> None:
        self.buf = CappedBuffer(limit)
        self.limit = limit
        self.pending = bytearray()
        self.dropped = 0  # bytes after the marker cut from ``pending`` (background floods)
        self.found: re.Match[bytes] | None = None
        self.pattern: re.Pattern[bytes] | None = None
        self.discard: re.Pattern[bytes] | None = None  # an abandoned command's marker, dropped if it shows up

    def arm(self, pattern: re.Pattern[bytes], limit: int, discard: re.Pattern[bytes] | None = None) -> None:
        self.buf = CappedBuffer(limit)
        self.limit = limit
        self.discard = discard
        self.pattern, self.found = pattern, None

    def feed(self, data: bytes) -> None:
        if self.found is not None:
            # After the marker: background output, kept for the next command. Capped like any output (head and
            # tail kept): an operator that silences the other stream's marker and floods this one from a
            # background job must not grow the harness's memory until the command times out.
            self.pending += data
            if len(self.pending) > 2 * self.limit + HOLD_BACK:
                half = self.limit // 2
                cut = len(self.pending) - 2 * half
                del self.pending[half : half + cut]
                self.dropped += cut
            return
        self.pending += data
        if self.discard is not None and self.discard.search(bytes(self.pending)):
            self.pending[:] = self.discard.sub(b"", bytes(self.pending))
        assert self.pattern is not None
        match = self.pattern.search(bytes(self.pending))
        if match:
            self.buf.feed(bytes(self.pending[: match.start()]))
            self.found = match
            del self.pending[: match.end()]
            return
        if len(self.pending) > HOLD_BACK:
            cut = len(self.pending) - HOLD_BACK
            self.buf.feed(bytes(self.pending[:cut]))
            del self.pending[:cut]

    def flush(self) -> None:
        """Commit what is pending (the stream ended or the command is abandoned)."""
        if self.found is None:
            self.buf.feed(bytes(self.pending))
            self.pending.clear()

    def restart(self) -> tuple[bytes, int]:
        """Leftover bytes after the marker (background jobs' output), to count toward the next command, and how
        many bytes of it were cut."""
        rest, dropped = bytes(self.pending), self.dropped
        self.pending.clear()
        self.dropped = 0
        return rest, dropped


class SandboxSession:
    """A persistent shell as ``spec.user`` in ``spec.workdir``. One command at a time; not thread-safe."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        spec = box.spec
        self.exited = False
        self.terminated = False
        self.exit_code: int | None = None
        self.preexisting_pids: set[int] = set()
        self.shell_pid: int | None = None
        self._leftover: tuple[tuple[bytes, int], tuple[bytes, int]] = ((b"", 0), (b"", 0))
        account = SESSION_ACCOUNTS[spec.user]
        home, user = account.home, account.name
        env = {
            "PATH": PATH,
            "HOME": home,
            "USER": user,
            "LOGNAME": user,
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "PS1": "",
            "PS2": "",
            **spec.env,
        }
        cid = box.require_running()
        self.started = time.monotonic()
        self.deadline = self.started + spec.episode_timeout_s
        self._stream = ExecStream(
            box.api,
            cid,
            ["bash", "--norc", "--noprofile", "--noediting", "-i"],
            # an account the container makes (the service account) by its ids: the exec starts before the start
            # script has made it, and the shell waits for the ready marker (READY_WAIT) before anything runs
            user="0"
            if account.uid == 0
            else account.name
            if account.in_image
            else f"{account.uid}:{account.gid}",
            env=env,
            workdir=spec.workdir or home,
            stdin=True,
        )
        self._out = _Scanner(spec.output_limit_bytes)
        self._err = _Scanner(spec.output_limit_bytes)
        nonce = secrets.token_hex(16)
        # The EXIT trap's tag is per session: output alone cannot fake the end of the shell (and a fake with the
        # tag is still checked against Docker's view of the process before anything is acted on).
        tag = secrets.token_hex(8)
        self._exit_re = re.compile(rb"(?:exit\n)?\x1eBGEXIT:" + tag.encode() + rb":(\d+)\x1e")
        self._stream.send(
            f"{READY_WAIT}\n__bashgym_exit_tag={tag}\n{INIT_SCRIPT}__bashgym_end {nonce}\n".encode()
        )
        res = self._exchange(nonce, time.monotonic() + 30.0)
        if res is None or self.exited:
            self.mark_dead()
            said = (
                (
                    bytes(self._out.buf.head)
                    + bytes(self._out.pending)
                    + bytes(self._err.buf.head)
                    + bytes(self._err.pending)
                )
                .decode(errors="replace")
                .strip()[-500:]
            )
            raise SandboxError(
                f"the operator shell did not start as {spec.user} in {spec.workdir or home}: "
                f"{said or 'no output'}"
            )
        stdout = bytes(self._out.buf.head)
        line = next(
            (ln for ln in stdout.decode(errors="replace").splitlines() if ln.startswith("BASHGYM ")), ""
        )
        fields = line.split()
        if len(fields) < 2:
            self.mark_dead()
            raise SandboxError(f"the operator shell did not report its pid: {stdout[:200]!r}")
        self.shell_pid = int(fields[1])
        # pid -> start time (clock ticks) of every process that existed before the operator got the shell: the
        # setup's daemons. Listed by the shell before its first command, so the operator never touched this list;
        # the start time tells a setup daemon from an operator process that later got the same pid.
        self.preexisting: dict[int, str] = {}
        for item in fields[2:]:
            pid, _, start = item.partition(":")
            if pid.isdigit() and int(pid) != self.shell_pid:
                self.preexisting[int(pid)] = start
        self.preexisting_pids = set(self.preexisting)

    # ---- the framing -------------------------------------------------------------------------------------
    def _arm(self, nonce: str, abandoned: list[str] | None = None) -> None:
        n = re.escape(nonce.encode())
        limit = self.box.spec.output_limit_bytes
        discard = None
        if abandoned:  # markers of lines given up on (a timed-out command, earlier sync lines) are not output
            alts = b"|".join(re.escape(a.encode()) for a in abandoned)
            discard = re.compile(rb"\x1eBG:(?:" + alts + rb")(?::\d+)?\x1e")
        self._out.arm(re.compile(rb"\x1eBG:" + n + rb":(\d+)\x1e"), limit, discard)
        self._err.arm(re.compile(rb"\x1eBG:" + n + rb"\x1e"), limit, discard)
        (out_left, out_cut), (err_left, err_cut) = self._leftover
        self._leftover = ((b"", 0), (b"", 0))
        for scanner, left, cut in ((self._out, out_left, out_cut), (self._err, err_left, err_cut)):
            if left:
                scanner.feed(left)
            scanner.buf.total += cut  # reported as cut output of this command

    def _exchange(self, nonce: str, deadline: float) -> int | None:
        """Read until both markers of ``nonce`` arrived (-> status), the shell ended, or ``deadline`` (-> None)."""
        self._arm(nonce)
        return self._wait(deadline)

    def _wait(self, deadline: float) -> int | None:
        while True:
            if self._out.found is not None and self._err.found is not None:
                self._leftover = (self._out.restart(), self._err.restart())
                return int(self._out.found.group(1))
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            frames = self._stream.read(min(left, 1.0))
            if frames is None:
                self._on_eof()
                return None
            saw_err = False
            for kind, payload in frames:
                (self._err if kind == 2 else self._out).feed(payload)
                saw_err = saw_err or kind == 2
            if (
                saw_err
                and self._err.found is None
                and self._exit_re.search(bytes(self._err.pending))
                and self._shell_gone()
            ):
                # The shell is exiting: background processes may hold its pipes open, so end them now.
                self._finish_exit()
                return None

    def _shell_gone(self, wait_s: float = 1.0) -> bool:
        """Docker's word that the shell process has ended (its pipes may still be held by its children)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                if not self.box.api.exec_inspect(self._stream.exec_id).get("Running"):
                    return True
            except docker.errors.APIError:  # the container is gone, and the shell with it
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def _finish_exit(self) -> None:
        """The EXIT trap fired: kill what the operator left running so the stream closes, then read to EOF."""
        with contextlib.suppress(Exception):
            self.box.kill_new_processes(self.preexisting_pids)
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            frames = self._stream.read(end - time.monotonic())
            if frames is None:
                break
            for kind, payload in frames:
                (self._err if kind == 2 else self._out).feed(payload)
        self._on_eof()

    def _on_eof(self) -> None:
        if self.exited:
            return
        match = self._exit_re.search(bytes(self._err.pending))
        if match:
            del self._err.pending[match.start() :]
            self.exit_code = int(match.group(1))
            self.terminated = True
        else:
            code = self._stream.exit_code(wait_s=1.0)
            # exec'd programs end the shell too (exit status < 128); a signal death is not the operator's exit
            if code is not None and code < 128:
                self.exit_code, self.terminated = code, True
        self._out.flush()
        self._err.flush()
        self.exited = True
        self._stream.close()

    # ---- public ------------------------------------------------------------------------------------------
    def run(self, command: str, timeout_s: float | None = None) -> CommandResult:
        """Run one command as the operator would type it; state carries over to the next command."""
        if self.exited:
            raise SessionEnded("the shell has ended; no more commands can run in this session")
        if "\0" in command:
            raise ValueError("a command cannot contain a NUL byte (bash cannot represent it)")
        spec = self.box.spec
        start = time.monotonic()
        limit = timeout_s if timeout_s is not None else spec.command_timeout_s
        episode_left = self.deadline - start
        if episode_left <= 0:
            self._end_episode()
            return CommandResult(
                command=command,
                stdout="",
                stderr=self._episode_message(),
                exit_code=None,
                duration_s=0.0,
                timed_out=True,
            )
        hit_episode_cap = episode_left < limit
        limit = min(limit, episode_left)
        nonce = secrets.token_hex(16)
        line = f"__bashgym_pre; {{ eval -- {ansi_c_quote(command)}; }} </dev/null; __bashgym_end {nonce}\n"
        self._arm(nonce)
        try:
            self._stream.send(line.encode())
        except OSError:
            self._on_eof()
            return self._finish(command, start, None, timed_out=False)
        status = self._wait(start + limit)
        if status is not None:
            return self._finish(command, start, status, timed_out=False)
        if self.exited:
            return self._finish(
                command,
                start,
                self.exit_code if self.terminated else None,
                timed_out=False,
                terminated=self.terminated,
            )
        # Timed out: interrupt the command, keep the shell.
        self._interrupt(nonce)
        result = self._finish(command, start, None, timed_out=True)
        if hit_episode_cap and not self.exited:
            self._end_episode()
            result.stderr += ("\n" if result.stderr else "") + self._episode_message()
        return result

    def _episode_message(self) -> str:
        return f"bashgym: the episode's time limit ({self.box.spec.episode_timeout_s:g} s) is spent; the shell ended"

    def _finish(
        self, command: str, start: float, status: int | None, timed_out: bool, terminated: bool = False
    ) -> CommandResult:
        self._out.flush()
        self._err.flush()
        result = command_result(
            command,
            self._out.buf,
            self._err.buf,
            status,
            time.monotonic() - start,
            timed_out,
            terminated=terminated,
        )
        if (
            "tcsetattr" in result.stderr
        ):  # bash -i without a terminal complains after a signal death: not output
            result.stderr = TCSETATTR_RE.sub("", result.stderr)
        if (
            "__bashgym_" in result.stderr
        ):  # under `set -x`: the trace of the framing's own calls is not output
            result.stderr = XTRACE_RE.sub("", result.stderr)
        if self.box.disk_budget_exceeded or self.box.inode_budget_exceeded:
            result.stderr += ("\n" if result.stderr else "") + self.box.budget_message()
        return result

    def _interrupt(self, nonce: str) -> None:
        """Ctrl-C semantics, then escalation; the framing is re-synchronised with fresh nonces."""
        box = self.box
        pid = self.shell_pid
        out_keep, err_keep = self._out.buf, self._err.buf
        self._out.flush()
        self._err.flush()
        # 0) A command line that never ran may have been read by a thief of the shell's input (a background loop
        #    reopening /proc/<shell>/fd/0): for a moment, end every holder of that pipe with the job around it,
        #    or each later command would be swallowed the same way.
        #    As the shell's own user: root here holds no CAP_SYS_PTRACE, so it cannot see another user's fds.
        box.exec_root(
            "stdin thieves",
            STDIN_THIEVES_SCRIPT,
            [str(pid)],
            5.0,
            user=str(SESSION_ACCOUNTS[box.spec.user].uid),
        )
        # 1) SIGINT to the shell's process group: the foreground command dies and the shell drops the rest of
        #    the line (an interactive bash does so even inside a builtin loop), as Ctrl-C does in a terminal.
        box.exec_root("interrupt", 'kill -INT -- "-$1" 2>/dev/null; exit 0', [str(pid)], 5.0)
        # 2) Sync lines: each asks for a fresh marker, read at the prompt if the line was aborted, after it if not.
        #    Markers of the abandoned line and of earlier sync lines are dropped; output until the sync marker
        #    still belongs to the timed-out command. A second sync covers a line swallowed by a reading builtin.
        abandoned = [nonce]
        for attempt, wait_s in enumerate((0.3, 3.0, 2.0)):
            sync = secrets.token_hex(16)
            self._arm(sync, abandoned)
            self._out.buf, self._err.buf = out_keep, err_keep
            try:
                self._stream.send(f"__bashgym_end 130 {sync}\n".encode())
            except OSError:
                self._on_eof()
                return
            back = self._wait(time.monotonic() + wait_s) is not None
            if self.exited:
                return
            out_keep, err_keep = self._out.buf, self._err.buf
            abandoned.append(sync)
            if attempt == 0:
                # 3) SIGKILL whatever the command started and left (children that ignore SIGINT, orphans it spawned
                #    in the background): every process that did not exist before the command, except the shell and
                #    children of processes that did (earlier background jobs keep running, as after Ctrl-C).
                box.exec_root("kill command", KILL_COMMAND_SCRIPT, [str(pid)], 10.0)
            if back:
                return
        # 4) The shell itself does not come back (it ignores SIGINT inside a builtin loop): the session is over.
        self._end_episode()

    def _end_episode(self) -> None:
        with contextlib.suppress(Exception):
            self.box.kill_session_processes()
        self.mark_dead()

    def mark_dead(self) -> None:
        """No more commands: the shell is over (its sandbox killed its processes, froze them for the check, or
        was closed). Called by the ``Sandbox`` too, which ends the session's processes on those paths."""
        if not self.exited:
            self.exited = True
            self._stream.close()

    def close(self) -> None:
        """End the shell and everything it started (the container stays, e.g. for the check)."""
        if not self.exited:
            self._end_episode()


# The shell's input pipe: the read-only pipe among its descriptors (fd 0 at the prompt; bash's saved copy, fd 10,
# while a command runs with </dev/null). Sets INPUT to its /proc path, or "" when there is none.
INPUT_PIPE_FUNC = r"""
input_pipe() {
  local f n flags
  INPUT=""
  for f in /proc/$1/fd/*; do
    n=${f##*/}
    [ -p "$f" ] || continue
    flags=""
    while read -r key value; do [ "$key" = flags: ] && flags=$value && break; done < "/proc/$1/fdinfo/$n"
    [ -n "$flags" ] && [ $(( 8#$flags & 3 )) = 0 ] && { INPUT=$f; return 0; }
  done 2>/dev/null
  return 1
}
"""

# Kill what the timed-out command started. argv: the shell's pid. The shell's pre-command hook listed every process
# that existed before the command; those, their descendants and the shell survive, the rest is killed.
KILL_COMMAND_SCRIPT = (
    INPUT_PIPE_FUNC
    + r"""
shell=$1
input_pipe "$shell"
before=" $(sed 's|/proc/||' """
    + SESSION_DIR
    + r"""/before 2>/dev/null | tr '\n' ' ') "
for round in 1 2 3 4 5; do
  declare -A parent=()
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    read -r line < "$d/stat" 2>/dev/null || continue
    rest=${line##*) }; set -- $rest; parent[$p]=$2
  done
  victims=""
  for p in "${!parent[@]}"; do
    [ "$p" = "$$" ] && continue
    q=$p; spared=0
    while [ -n "$q" ] && [ "$q" != 0 ] && [ "$q" != 1 ] && [ "$q" != "$shell" ]; do
      case "$before" in *" $q "*) spared=1; break;; esac
      q=${parent[$q]}
    done
    [ "$p" = "$shell" ] || [ "$p" = 1 ] && spared=1
    [ $spared = 1 ] && continue
    victims="$victims $p"
  done
  # anything else holding the shell's input pipe would swallow the commands sent next: it goes too, with the
  # job that started it (every ancestor up to the shell), or a loop in an earlier background job reopens it
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$shell" ] || [ "$p" = "$$" ] && continue
    [ -n "$INPUT" ] || break
    for f in "$d"/fd/*; do
      if [ "$f" -ef "$INPUT" ]; then
        q=$p
        while [ -n "$q" ] && [ "$q" != 0 ] && [ "$q" != 1 ] && [ "$q" != "$shell" ] && [ "$q" != "$$" ]; do
          victims="$victims $q"; q=${parent[$q]}
        done
        break
      fi
    done 2>/dev/null
  done
  [ -z "$victims" ] && exit 0
  kill -KILL $victims 2>/dev/null
  unset parent
  sleep 0.02
done
"""
)


# Processes (other than the shell) holding the shell's input pipe, watched for a moment, are killed with every
# ancestor up to the shell: a loop that reopens /proc/<shell>/fd/0 now and then is caught while it holds it.
# argv: the shell's pid.
STDIN_THIEVES_SCRIPT = (
    INPUT_PIPE_FUNC
    + r"""
shell=$1
input_pipe "$shell" || exit 0
for round in 1 2 3 4 5 6 7 8 9 10; do
  victims=""
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$shell" ] || [ "$p" = "$$" ] && continue
    for f in "$d"/fd/*; do
      if [ "$f" -ef "$INPUT" ]; then
        q=$p     # the holder and its ancestors up to the shell, read now (it may be younger than any list)
        while [ -n "$q" ] && [ "$q" != 0 ] && [ "$q" != 1 ] && [ "$q" != "$shell" ] && [ "$q" != "$$" ]; do
          victims="$victims $q"
          read -r line < "/proc/$q/stat" 2>/dev/null || break
          set -- ${line##*) }; q=$2
        done
        break
      fi
    done 2>/dev/null
  done
  [ -n "$victims" ] && kill -KILL $victims 2>/dev/null
  sleep 0.03
done
exit 0
"""
)
