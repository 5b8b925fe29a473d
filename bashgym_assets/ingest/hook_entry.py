"""What the installed hook command runs: ``<python> -I -S <this file>`` (see ``bashgym_assets.ingest.hook``).

A script given by path is compiled on every run; a module is loaded from its cached bytecode. So this file only
puts its own folder last on ``sys.path`` (the standard library stays first) and imports ``hook`` from there,
without the ``bashgym_assets`` packages, whose imports cost the better part of a second.
"""

import sys

try:
    sys.path.append(__file__.rpartition("/")[0] or ".")
    from hook import main
except BaseException as exc:  # never fail the agent, not even with a broken install
    sys.stderr.write(f"bashgym hook: cannot load the hook: {type(exc).__name__}: {exc}\n")
    sys.exit(0)

sys.exit(main())
