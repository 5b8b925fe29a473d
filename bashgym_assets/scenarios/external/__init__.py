"""Import published shell-task suites (Terminal-Bench 1.x, Terminal-Bench 2 / Harbor) as evaluation-only bundles.

Each task folder becomes one ``ScenarioBundle`` whose id starts with ``gate.EXTERNAL_PREFIX`` (``ext-``): the gate's
``split_for`` holds such ids out forever and the dataset builders refuse them, so an imported benchmark is used to
evaluate and never reaches training. A folder that cannot be reproduced offline in the sandbox image becomes a
quarantine entry with its reason; nothing here raises on bad input.

How a task maps onto a bundle (the rules are the same for both layouts):

- **task**: ``instruction.md`` (Harbor) or ``task.yaml``'s ``instruction`` / ``descriptions[key=base]`` (TB 1.x);
  **difficulty** easy/medium/hard/extreme -> 1..4 (default 2); **category** the metadata's, as a slug, else
  ``external``.
- **user**: who the container runs the agent as, as docker decides it: the single compose service's ``user``,
  else the Dockerfile's last ``USER``, else root. The sandbox offers three users (``SANDBOX_USERS``, the sandbox's
  own ``SESSION_ACCOUNTS``): root, its unprivileged ``operator`` (uid 1000, home ``/home/operator``) and the
  service account ``app`` (uid 999, home ``/srv/app``), so ``USER operator`` (also ``USER 1000`` when the
  Dockerfile made operator that uid, ``operator:operator``) runs the agent as the operator, and ``USER app``
  (``USER 999`` for an ``app`` the Dockerfile made without a uid, as ``useradd --system app`` does,
  ``app:app``) as the service account, each with its home and ``$`` prompt: the prompt
  (``rollout.transcript.orientation``) names the bundle's user and start folder. Any other user or group is
  quarantined, naming the users the sandbox offers. ``useradd``/``adduser`` of operator in a ``RUN`` (a
  user the image already has) asserts it exists instead, of app (or ``groupadd app``) makes it as the sandbox
  does unless it exists (a session as app has it), keeping ``-G`` groups; one giving it another uid or
  home (``-d``, or the ``/home/<name>`` that ``useradd -m`` makes) is quarantined. ``RUN`` lines after a ``USER`` run as that user (``runuser``).
- **workdir** (where the agent starts, the check too): Harbor's ``[environment] workdir`` or compose's
  ``working_dir``, else the last ``WORKDIR``, else ``/app`` for root and the home for another user. A ``WORKDIR``
  under a non-root ``USER`` makes its missing folders owned by that user, at its point of the setup (BuildKit).
- **starting state**: the task's Dockerfile, translated. ``FROM`` must be a plain debian/ubuntu/python base (or
  Terminal-Bench's own python/ubuntu bases, which only add the harness's tmux): the sandbox image (Debian bookworm,
  ``sandbox_images/base/packages.txt``) stands in for it. ``RUN`` becomes a setup command (with the ``ENV``/``ARG``
  values exported and ``cd`` into the ``WORKDIR`` of that point); inside it, installs of tools the image already
  has (``apt-get install -y git``), ``apt-get update``, the harness's tmux/asciinema and test tooling baked into
  the image (a venv with pytest and its dependencies, also from a ``-r`` lock file the task copies in: the check
  runs the sandbox image's pytest) are replaced by ``true``; anything else that needs the network (apt/pip/uv/npm/...
  installs, curl, wget, remote git) makes the task un-importable. ``COPY``/``ADD`` of build-context files become
  ``files`` when they are printable UTF-8 text (written back byte for byte); any other file (a tarball, a utmp
  log, an image, a byte-order mark, Latin-1) travels as base64 text under ``STAGE_DIR`` in ``files`` and is
  decoded into place by a setup command, so it is byte-identical in the container and the bundle format stays
  text: JSON and YAML round-trip it, and every older bundle still loads. A link inside a copied folder stays a
  link with the same target, wherever it points (a setup ``ln -s``); a COPY source that is itself a link is read
  through, as docker does. ``ADD`` of a local tar archive (plain, gzip, bzip2, xz) unpacks it into the
  destination. Once a setup step whose order matters came first (a surviving ``RUN``, a ``WORKDIR`` made as a
  user, a binary or a link), later files are staged and moved into place at their point of the setup, so the
  Dockerfile's order holds. **Budget**: a file over ``MAX_FILE_BYTES`` is quarantined before it is read, and a
  task carrying over ``MAX_TASK_BYTES`` (base64 as carried, tests and solution included) or ``MAX_FILES`` entries
  is too. ``ENV`` also goes to ``/etc/profile.d`` for the operator's shell and the check.
  Multi-stage builds, ``COPY --from``, compose files with more than one service, MCP servers and GPUs are
  quarantined.
- **no Dockerfile**: a task whose build context holds files (TB 1.x: the task folder without the harness's
  task.yaml/tests/solution/run-tests.sh, docs and dotfiles; Harbor: ``environment/``) but no Dockerfile (nor an
  image: compose's, or Harbor's ``docker_image``) is quarantined, the same in both layouts: its setup script and
  data would never reach the container and the task could not pass. Without such files it runs on the bare
  sandbox image.
- **check**: the task's own verifier, run as root (whoever the agent is) after the operator finished, from the
  agent's start folder: the test files are written by the
  check itself into ``/tests`` (moved aside and restored if the task had one) and removed on exit, so nothing of
  the verifier is in the container while the operator acts. The verifier scripts are rewritten like ``RUN``
  lines: installing curl/uv/pytest is dropped, and every ``pytest`` run (``uvx -w pytest ... pytest``, ``uv run
  pytest``, ``python -m pytest``...) goes to the image's own pytest (Debian's ``python3-pytest`` 7.2), with no
  cache, its temporary folders inside the check's, and the options of plugins the image lacks (``--ctrf``,
  ``--timeout``, ``--cov``...) accepted and ignored; test code importing a package the image lacks (numpy,
  requests...), or needing a pytest plugin it lacks (its fixtures, async tests), is quarantined. **Pass rule**:
  Harbor (2.x) passes iff ``/logs/verifier/reward.txt`` holds 1 (or ``reward.json``'s reward is 1); with no
  reward file, iff the test script exits 0. TB 1.x passes iff every pytest run passed (its harness parses
  pytest's results, not the script's exit status); with no pytest run, iff ``run-tests.sh`` exits 0.
  ``run_tests_in_same_shell`` is ignored: the check always runs in its own shell.
- **reference**: the solution folder (``solution/`` or ``solution.sh``) written to ``/solution`` in one command
  and run with ``bash`` in the next (``solution.yaml``: its commands, one per turn), rewritten like ``RUN`` lines.
  It runs as the agent (as the harnesses run it); an unprivileged agent cannot make ``/solution``, so its
  solution goes to ``USER_SOLUTION_DIR`` and the solution's own mentions of ``/solution`` follow it.
- Timeouts of the suites (``[agent] timeout_sec``, ``max_agent_timeout_sec``...) are not carried: the
  evaluation's own limits apply. A test script's own wall-clock budget (``timeout 10 ...``, a test that asserts
  its duration) stays as the suite wrote it; when it runs out at the gate (the check says so: ``timeout``'s exit
  124, "timed out", ``TimeoutExpired``...), the gate measures the load and tries the task again alone
  (``scenarios.gate``), so a loaded machine does not refuse a valid task.

The package, along its seams: ``common`` (names, budgets, the verdict, reading files), ``shell`` (a lexer for the
commands of a script), ``rewrite`` (those commands made offline), ``dockerfile`` (reading a Dockerfile with
``dockerfile-parse`` and translating it, ``.dockerignore`` by docker's ``PatternMatcher``), ``environment`` (compose,
Dockerfile or bare image: the starting state), ``check`` (the verifier and its pytest), ``tasks`` (what both
layouts share), ``harbor`` and ``tb1`` (the two layouts), ``importer`` (suite folders to bundles). The names
other modules use are re-exported here: ``from bashgym_assets.scenarios.external import import_suite``.
"""

from __future__ import annotations

from bashgym_assets.scenarios.external.check import (
    PYTEST_FIXTURES,
    PYTEST_MODULES,
    TestPlan,
    build_check,
    image_has_pytest,
    options_plugin,
    pytest_problems,
    pytest_wrapper,
)
from bashgym_assets.scenarios.external.common import (
    DEFAULT_CATEGORY,
    DEFAULT_WORKDIR,
    DIFFICULTY,
    ENV_PROFILE,
    HARBOR,
    LAYOUTS,
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_INSTRUCTION_BYTES,
    MAX_SUITE_DEPTH,
    MAX_TASK_BYTES,
    MAX_UNPACKED_BYTES,
    OFFERED_USERS,
    OPERATOR,
    SANDBOX_USERS,
    SOLUTION_DIR,
    STAGE_DIR,
    TB1,
    TEST_DIR,
    USER_SOLUTION_DIR,
    ExternalQuarantine,
    Unimportable,
    as_text,
    category_slug,
    difficulty_level,
    external_id,
    image_has,
    image_packages,
    name_slug,
    write_file_command,
)
from bashgym_assets.scenarios.external.dockerfile import (
    Environment,
    Instruction,
    base_image_problem,
    chain,
    mkdir_owned,
    parse_dockerfile,
    sandbox_user,
    tar_archive,
    translate_dockerfile,
)
from bashgym_assets.scenarios.external.environment import (
    compose_dockerfile,
    compose_service,
)
from bashgym_assets.scenarios.external.importer import (
    detect_layout,
    import_suite,
    import_suites,
    import_task,
    suite_of,
)
from bashgym_assets.scenarios.external.rewrite import (
    DROP,
    IMAGE,
    KEEP,
    PROBLEM,
    REFUSE,
    REPLACE,
    TESTS,
    Action,
    Rewrite,
    account_command,
    classify,
    rewrite_script,
)
from bashgym_assets.scenarios.external.shell import (
    SimpleCommand,
    Word,
    shell_commands,
)
from bashgym_assets.scenarios.external.tasks import (
    build_reference,
    relocate_solution,
)

__all__ = [
    "Action",
    "DEFAULT_CATEGORY",
    "DEFAULT_WORKDIR",
    "DIFFICULTY",
    "DROP",
    "ENV_PROFILE",
    "Environment",
    "ExternalQuarantine",
    "HARBOR",
    "IMAGE",
    "Instruction",
    "KEEP",
    "LAYOUTS",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_INSTRUCTION_BYTES",
    "MAX_SUITE_DEPTH",
    "MAX_TASK_BYTES",
    "MAX_UNPACKED_BYTES",
    "OFFERED_USERS",
    "OPERATOR",
    "PROBLEM",
    "PYTEST_FIXTURES",
    "PYTEST_MODULES",
    "REFUSE",
    "REPLACE",
    "Rewrite",
    "SANDBOX_USERS",
    "SOLUTION_DIR",
    "STAGE_DIR",
    "SimpleCommand",
    "TB1",
    "TESTS",
    "TEST_DIR",
    "TestPlan",
    "USER_SOLUTION_DIR",
    "Unimportable",
    "Word",
    "account_command",
    "as_text",
    "base_image_problem",
    "build_check",
    "build_reference",
    "category_slug",
    "chain",
    "classify",
    "compose_dockerfile",
    "compose_service",
    "detect_layout",
    "difficulty_level",
    "external_id",
    "image_has",
    "image_has_pytest",
    "image_packages",
    "options_plugin",
    "import_suite",
    "import_suites",
    "import_task",
    "mkdir_owned",
    "name_slug",
    "parse_dockerfile",
    "pytest_problems",
    "pytest_wrapper",
    "relocate_solution",
    "rewrite_script",
    "sandbox_user",
    "shell_commands",
    "suite_of",
    "tar_archive",
    "translate_dockerfile",
    "write_file_command",
]
