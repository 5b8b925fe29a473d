"""The ONE syntax check: bash's own parser (``bash -n``, nothing runs) on the host, under a named policy.

Which text is judged decides what bash must accept, so the policy is a parameter and each caller names its own:

* :data:`SCRIPT` (the reference gate: check scripts, setup commands, provider scripts): ``extglob`` on. A script
  or a ``bash -c`` string is parsed one command at a time, so one that runs ``shopt -s extglob`` before it uses
  ``!(...)`` works in the sandbox and must not be refused here. When bash gives no verdict here (absent, past the
  time-out) the text is let through: the sandbox's bash judges it, and a check that does not parse fails visibly.
* :data:`OPERATOR` (what a model or the reference operator types in an episode): ``extglob`` off, because that is
  what the sandbox's operator shell accepts. It is ``bash --norc --noprofile --noediting -i`` (``sandbox/session``),
  and with no rc file nothing turns ``extglob`` on (Debian's bash-completion does that in ``/etc/bash.bashrc``,
  which ``--norc`` skips); each line runs through ``eval``, which parses the whole line before running any of it,
  so even ``shopt -s extglob; ls !(*.txt)`` on one line is a syntax error there (checked on the sandbox image:
  bash 5.2.15, exit code 2). ``ls !(*.txt)`` is therefore refused for an operator, as the shell would refuse it.
  Known limit: a line that relies on ``extglob`` turned on by an *earlier* turn is refused too (the check sees one
  line, not the shell's state). No verdict here lets the line through: the sandbox's bash runs it and answers
  with its own error, so the observation stays true.
* :data:`TRAINING_DATA` (turns about to become training examples): the operator's grammar, but no verdict is a
  refusal, because nothing after this check would catch an unparseable line before a model learns it.

Every policy refuses a NUL byte: it cannot travel in the operator's line (the session sends it ANSI-C quoted,
where ``\\0`` ends the string), in a ``bash -c`` argument (setup) or in a script bash agrees to run (``cannot
execute binary file``), while ``bash -n`` on stdin would silently drop it and call the text fine. The text goes
to bash on stdin, never as an argument: an argument cannot pass 128 KiB, and raising on a long line used to lose a
whole episode as a sandbox error.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

NUL_IN_TEXT = "bash: the line holds a NUL byte, which a shell cannot read"
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SyntaxPolicy:
    """How a text is put to bash's parser: which grammar, how long bash may take, what no verdict means."""

    name: str
    extglob: bool  # ``!(...)``, ``@(...)``, ``+(...)`` patterns parse (``-O extglob``)
    timeout_s: float = DEFAULT_TIMEOUT_S
    refuse_undecided: bool = False  # bash absent or too slow: refuse (True) or let the text through (False)


SCRIPT = SyntaxPolicy("script", extglob=True)
OPERATOR = SyntaxPolicy("operator", extglob=False)
TRAINING_DATA = SyntaxPolicy("training_data", extglob=False, refuse_undecided=True)


def bash_syntax_error(text: str, *, policy: SyntaxPolicy) -> str | None:
    """bash's complaint when ``text`` does not parse under ``policy`` (``bash -n``), else None.

    The complaint reads as bash prints it (``bash: line 1: unexpected EOF while looking for matching `''``)."""
    if "\0" in text:
        return NUL_IN_TEXT
    bash = shutil.which("bash") or shutil.which("bash", path="/usr/bin:/bin")
    if bash is None:
        return "bash: no bash here to check the syntax" if policy.refuse_undecided else None
    argv = ["bash", "--norc", "--noprofile", *(["-O", "extglob"] if policy.extglob else []), "-n"]
    try:
        proc = subprocess.run(
            argv,
            executable=bash,  # argv[0] stays "bash": its messages start "bash: ", wherever it is installed
            input=text.encode(errors="surrogatepass"),  # a lone surrogate must not raise
            capture_output=True,
            timeout=policy.timeout_s,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        if not policy.refuse_undecided:
            return None
        return f"bash: no verdict from bash -n ({type(exc).__name__})"
    if proc.returncode == 0:
        return None
    return (
        proc.stderr.decode(errors="replace").strip()
        or f"bash: syntax error (bash -n exited {proc.returncode})"
    )
