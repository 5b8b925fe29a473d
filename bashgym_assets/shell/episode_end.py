"""The ONE end-of-episode rule: which operator line only ends the session.

The episode driver ends an episode on such a line without sending it to the shell, the gate leaves it out of a
rejection's evidence, the guardrails do not classify it, and the training-data checks do not ``bash -n`` it, so all
of them must agree on what it is. It is ``exit`` or ``logout``, alone or with one status argument, optionally
followed by ``;`` and a comment:

* ``exit``, ``exit 0``, ``exit -1``, ``exit;``, ``exit 0 # done``: yes.
* ``exit $?``, ``exit "$rc"``, ``exit ${rc}``: yes. A parameter only chooses the status, which no verdict reads
  (the check judges the container), and bash exits whatever it holds (a non-number exits with status 2).
* ``logout``: yes. The banner tells the operator they are logged in, and in a login session ``logout`` is how a
  person leaves; that the sandbox's shell is not a login shell (there bash would answer ``not login shell``) is
  a detail of how the session is framed, not something a model should be taught to work around.
* ``exit $(cleanup)``, ``exit `date```, ``exit 0 && ls``, ``exit; ls``, ``exit 1 2``, ``exit foo``: no. A
  substitution runs a command first, a list runs more than the exit, with two arguments bash does not exit (``too
  many arguments``), and a word that is no status is the shell's to answer: those lines go to the shell like any
  other (and the episode ends if the shell does).
"""

from __future__ import annotations

import re

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PARAM = r"\$(?:[?#!$0-9]|" + _NAME + r"|\{(?:[?#!$0-9]|" + _NAME + r")\})"  # $?, $rc, ${rc}
_STATUS = r"(?:-?\d+|\"-?\d+\"|'-?\d+'|" + _PARAM + r"|\"" + _PARAM + r"\")"
_END_RE = re.compile(
    r"\s*(?:exit|logout)(?:[ \t]+" + _STATUS + r")?[ \t]*(?:;[ \t]*)?(?:(?<=[\s;])#[^\n]*)?\s*"
)


def is_exit_command(command: str) -> bool:
    """A line that only ends the session (``exit``, ``exit $?``, ``logout``: see the module doc)."""
    return _END_RE.fullmatch(command) is not None
