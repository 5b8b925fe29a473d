"""Where bashgym understands the shell: one parser, one syntax check, one end-of-episode rule, one prefix table.

An engine below guardrails, scenarios, rollout, training and evaluation (it imports nothing of bashgym's), so
every reader of a command line sees the same thing:

* ``parser``: the structural parser (words after quote removal, redirections, pipelines, substitutions, spans).
* ``syntax``: ``bash_syntax_error(text, policy=...)``, bash's own ``bash -n`` verdict under a named policy
  (``SCRIPT`` for the gate's checks and setup, ``OPERATOR`` for a line typed in an episode, ``TRAINING_DATA``).
* ``episode_end``: ``is_exit_command``, the line that only ends the session.
* ``prefixes``: the wrapper table (``sudo``, ``timeout 5``, ``env -u X``...) and ``unwrap``, the command that runs.
"""

from bashgym_assets.shell.episode_end import is_exit_command
from bashgym_assets.shell.parser import Command, Parsed, Redirect, Sub, Word, is_assignment, parse, upstream
from bashgym_assets.shell.prefixes import (
    LEAD_RESERVED,
    WRAPPERS,
    Inv,
    Wrapper,
    WrapperCall,
    base,
    read_wrapper,
    unwrap,
)
from bashgym_assets.shell.syntax import (
    NUL_IN_TEXT,
    OPERATOR,
    SCRIPT,
    TRAINING_DATA,
    SyntaxPolicy,
    bash_syntax_error,
)

__all__ = [
    "LEAD_RESERVED",
    "NUL_IN_TEXT",
    "OPERATOR",
    "SCRIPT",
    "TRAINING_DATA",
    "WRAPPERS",
    "Command",
    "Inv",
    "Parsed",
    "Redirect",
    "Sub",
    "SyntaxPolicy",
    "Word",
    "Wrapper",
    "WrapperCall",
    "base",
    "bash_syntax_error",
    "is_assignment",
    "is_exit_command",
    "parse",
    "read_wrapper",
    "unwrap",
    "upstream",
]
