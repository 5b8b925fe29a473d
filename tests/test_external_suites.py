"""External shell-task suites (Terminal-Bench 1.x, Harbor 2.x): import, quarantine, the check's pytest (the
sandbox image's own), gate, and that nothing of them can reach a training set."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from bashgym_assets.rollout.episode import run_episode
from bashgym_assets.rollout.operators import ReferenceOperator
from bashgym_assets.rollout.transcript import initial_messages
from bashgym_assets.sandbox.layout import SESSION_ACCOUNTS, account_setup_shell
from bashgym_assets.scenarios import external
from bashgym_assets.scenarios.external import (
    HARBOR,
    TB1,
    detect_layout,
    import_suite,
    import_suites,
    rewrite_script,
)
from bashgym_assets.scenarios.gate import HELD_OUT, split_for
from bashgym_assets.training_data.build import build_dpo, build_sft, contamination_violations


# ---- suite builders -------------------------------------------------------------------------------------------
def put(root: Path, rel: str, content: str | bytes, executable: bool = False) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(textwrap.dedent(content).lstrip("\n"))
    if executable:
        path.chmod(0o755)
    return path


HARBOR_TOML = """
version = "1.0"

[metadata]
author_name = "someone"
difficulty = "easy"
category = "Text Processing"
tags = ["wc"]

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 600.0

[environment]
build_timeout_sec = 600.0
docker_image = "someone/count-lines:20250101"
cpus = 1
memory_mb = 2048
allow_internet = true
mcp_servers = []
"""

HARBOR_DOCKERFILE = """
FROM python:3.12-slim-bookworm
# apt housekeeping and tools the sandbox image already has are dropped
RUN apt-get update && apt-get install -y --no-install-recommends git tmux \\
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV GREETING="hello world"
COPY data/ /app/data/
COPY tool.sh /usr/local/bin/tool
RUN mkdir -p /app/out && echo "$GREETING" > /app/greeting.txt
COPY late.txt ./late.txt
"""

HARBOR_TEST_SH = """
#!/bin/bash
apt-get update
apt-get install -y curl
mkdir -p /logs/verifier
if [ "$(cat /app/count.txt 2>/dev/null)" = "3" ] && [ -f /app/late.txt ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

UV_PYTEST_SH = """
#!/bin/bash
# Install curl
apt-get update
apt-get install -y curl

# Install uv
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
source $HOME/.local/bin/env

if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set."
    exit 1
fi

uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA

if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

PYTEST_OUTPUTS = """
import json
from pathlib import Path

import pytest


@pytest.fixture
def report():
    path = Path("/app/report.json")
    assert path.exists(), "report.json is missing"
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def words():
    yield ["alpha", "beta"]


def test_total(report):
    assert report["total"] == pytest.approx(3.0)


@pytest.mark.parametrize("word", ["alpha", "beta"])
def test_words(report, word, words):
    assert word in words and report["counts"][word] >= 1


class TestShape:
    def test_keys(self, report):
        assert sorted(report) == ["counts", "total"]

    def test_bad_key_raises(self, report):
        with pytest.raises(KeyError):
            report["missing"]
"""

PYTEST_SOLVE = """
#!/bin/bash
cat > /app/report.json <<'EOF'
{"total": 3, "counts": {"alpha": 2, "beta": 1}}
EOF
"""


def harbor_task(suite: Path, name: str, over: dict[str, str | bytes | None] | None = None) -> Path:
    """A valid Harbor 2.x task whose tests are plain shell; ``over`` replaces (or, with None, removes) files."""
    files: dict[str, str | bytes | None] = {
        "instruction.md": "Count the lines of /app/data/input.txt and write the number to /app/count.txt.\n",
        "task.toml": HARBOR_TOML,
        "environment/Dockerfile": HARBOR_DOCKERFILE,
        "environment/data/input.txt": "a\nb\nc\n",
        "environment/tool.sh": "#!/bin/sh\necho tool\n",
        "environment/late.txt": "late\n",
        "environment/unused.bin": b"\x00\x01binary-but-never-copied",
        "tests/test.sh": HARBOR_TEST_SH,
        "solution/solve.sh": "#!/bin/bash\nwc -l < /app/data/input.txt | tr -d ' ' > /app/count.txt\n",
    }
    files.update(over or {})
    root = suite / name
    for rel, content in files.items():
        if content is not None:
            put(root, rel, content, executable=rel.endswith(".sh"))
    return root


def harbor_pytest_task(suite: Path, name: str) -> Path:
    return harbor_task(
        suite,
        name,
        {
            "instruction.md": "Write /app/report.json with the word counts of the input (alpha twice, beta once) "
            "and their total.\n",
            "tests/test.sh": UV_PYTEST_SH,
            "tests/test_outputs.py": PYTEST_OUTPUTS,
            "solution/solve.sh": PYTEST_SOLVE,
        },
    )


TB1_YAML = """
descriptions:
  - key: base
    description: |
      Write the words "alpha beta" into /app/report.txt.
author_email: someone@example.com
difficulty: medium
category: file-operations
tags: [files]
parser_name: pytest
max_agent_timeout_sec: 180
max_test_timeout_sec: 30
run_tests_in_same_shell: false
"""

TB1_DOCKERFILE = """
FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620
RUN apt-get update && apt-get install -y tmux asciinema
WORKDIR /app
COPY . /app/
"""

TB1_COMPOSE = """
services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
"""

TB1_RUN_TESTS = """
#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set."
    exit 1
fi
uv venv .tbench-testing
source .tbench-testing/bin/activate
uv pip install pytest==8.3.4
uv run pytest $TEST_DIR/test_outputs.py -rA
"""

TB1_TESTS = """
from pathlib import Path

import pytest


@pytest.fixture
def report():
    return Path("/app/report.txt")


def test_exists(report):
    assert report.exists()


@pytest.mark.parametrize("word", ["alpha", "beta"])
def test_words(report, word):
    assert word in report.read_text()


def test_notes_were_copied():
    assert Path("/app/notes.txt").read_text() == "keep me\\n"
"""


def tb1_task(suite: Path, name: str, over: dict[str, str | bytes | None] | None = None) -> Path:
    files: dict[str, str | bytes | None] = {
        "task.yaml": TB1_YAML,
        "Dockerfile": TB1_DOCKERFILE,
        "docker-compose.yaml": TB1_COMPOSE,
        "notes.txt": "keep me\n",
        "run-tests.sh": TB1_RUN_TESTS,
        "tests/test_outputs.py": TB1_TESTS,
        "solution.sh": "#!/bin/bash\necho 'alpha beta' > /app/report.txt\n",
    }
    files.update(over or {})
    root = suite / name
    for rel, content in files.items():
        if content is not None:
            put(root, rel, content, executable=rel.endswith(".sh"))
    return root


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """One suite folder with valid tasks of both layouts and every kind of bad task folder."""
    root = tmp_path / "Term Bench!"
    harbor_task(root, "count-lines")
    harbor_pytest_task(root, "word-report")
    tb1_task(root, "tb1-report")
    harbor_task(
        root, "needs-network", {"environment/Dockerfile": "FROM debian:bookworm\nRUN pip install pandas\n"}
    )
    harbor_task(root, "node-image", {"environment/Dockerfile": "FROM node:20\nWORKDIR /app\n"})
    harbor_task(root, "bad-toml", {"task.toml": "[metadata\ndifficulty = 'easy'\n"})
    tb1_task(root, "bad-yaml", {"task.yaml": "descriptions: [unclosed\n  key: : :\n"})
    harbor_task(root, "no-instruction", {"instruction.md": None})
    harbor_task(root, "latin1", {"instruction.md": "Caf\xe9 task\n".encode("latin-1")})
    harbor_task(
        root,
        "foreign-user",
        {"environment/Dockerfile": "FROM debian:bookworm\nRUN useradd -m agent\nUSER agent\n"},
    )
    tb1_task(root, "no-tests", {"run-tests.sh": None, "tests/test_outputs.py": None})
    tb1_task(
        root,
        "two-services",
        {"docker-compose.yaml": ("services:\n  client:\n    build: .\n  db:\n    image: postgres:16\n")},
    )
    harbor_task(
        root,
        "numpy-tests",
        {
            "tests/test.sh": UV_PYTEST_SH.replace("-w pytest==8.4.1", "-w pytest==8.4.1 -w numpy==2.3.0"),
            "tests/test_outputs.py": PYTEST_OUTPUTS,
        },
    )
    harbor_task(
        root,
        "huge-file",
        {
            "environment/Dockerfile": "FROM debian:bookworm\nCOPY big.txt /app/\n",
            "environment/big.txt": "x" * (external.MAX_FILE_BYTES + 10),
        },
    )
    harbor_task(root, "no-solution", {"solution/solve.sh": None})
    put(root, "stray/solution.sh", "#!/bin/bash\ntrue\n")  # looks like a task, is neither layout
    put(root, "docs/README.md", "not a task\n")  # not a task at all: ignored
    return root


def test_suite_builders_use_real_paths(suite: Path) -> None:
    assert (suite / "count-lines" / "environment" / "Dockerfile").is_file()
    assert (suite / "no-tests" / "run-tests.sh").exists() is False
    assert detect_layout(suite / "count-lines") == HARBOR
    assert detect_layout(suite / "tb1-report") == TB1
    assert detect_layout(suite / "docs") is None
    assert detect_layout(suite) is None


# ---- import and quarantine --------------------------------------------------------------------------------------
def test_import_suite_imports_valid_tasks_and_quarantines_the_rest(suite: Path) -> None:
    bundles, quarantine = import_suite(suite)
    ids = sorted(b.id for b in bundles)
    assert ids == ["ext-term-bench-count-lines", "ext-term-bench-tb1-report", "ext-term-bench-word-report"]
    reasons = {q.task: q.reason for q in quarantine}
    assert "needs the network: RUN pip install pandas" in reasons["needs-network"]
    assert "needs image node:20" in reasons["node-image"] and "debian/ubuntu/python" in reasons["node-image"]
    assert "task.toml is not valid TOML" in reasons["bad-toml"]
    assert "task.yaml is not valid YAML" in reasons["bad-yaml"]
    assert reasons["no-instruction"] == "no instruction.md"
    assert "instruction.md is not UTF-8" in reasons["latin1"]
    assert reasons["foreign-user"] == (
        "the agent runs as user 'agent' (the Dockerfile's USER agent): the sandbox "
        f"offers only {external.OFFERED_USERS}"
    )
    assert "no tests" in reasons["no-tests"]
    assert "docker-compose with 2 services (client, db)" in reasons["two-services"]
    assert "tests need the network: uvx --with numpy" in reasons["numpy-tests"]
    assert "bytes (the limit is" in reasons["huge-file"]
    assert "no reference solution" in reasons["no-solution"]
    assert "not a recognised task layout" in reasons["stray"]
    assert "docs" not in reasons
    layouts = {q.task: q.layout for q in quarantine}
    assert layouts["bad-toml"] == HARBOR and layouts["bad-yaml"] == TB1
    for q in quarantine:
        err = q.to_bundle_error()
        assert (
            err.source.startswith(f"external:Term Bench!:{q.layout or 'unknown'}:") and err.reason == q.reason
        )


def test_every_imported_bundle_is_held_out_and_root(suite: Path) -> None:
    bundles, _ = import_suite(suite)
    for b in bundles:
        assert b.id.startswith("ext-") and split_for(b.id) == HELD_OUT
        assert b.user == "root" and b.source.startswith("external:Term Bench!:")


def test_harbor_mapping(suite: Path) -> None:
    bundle = external.import_task(suite / "count-lines", "tb2")
    assert bundle.id == "ext-tb2-count-lines" and bundle.source == "external:tb2:harbor2:count-lines"
    assert bundle.task.startswith("Count the lines") and bundle.difficulty == 1
    assert bundle.category == "text-processing" and bundle.workdir == "/app"
    # files copied before any surviving RUN land in place; the one after a RUN is staged and moved at its turn
    assert bundle.files["/app/data/input.txt"] == "a\nb\nc\n"
    assert bundle.files["/usr/local/bin/tool"].startswith("#!/bin/sh")
    assert "/app/late.txt" not in bundle.files and "late\n" in bundle.files.values()
    assert bundle.files[external.ENV_PROFILE].endswith("export GREETING='hello world'\n")
    setup = "\n".join(bundle.setup)
    assert "apt-get" not in setup and "tmux" not in setup  # the first RUN reduced to nothing
    assert "ln -s /usr/bin/python3 /usr/local/bin/python" in bundle.setup[0]  # a python base
    assert "export GREETING='hello world'" in setup and "cd /app" in setup
    assert f"mv -f {external.STAGE_DIR}/1 /app/late.txt" in setup
    assert bundle.setup[-2] == f"rm -rf {external.STAGE_DIR}" and bundle.setup[-1] == "mkdir -p /app"
    # the check carries the tests (curl install dropped), the reference writes and runs the solution
    assert "/logs/verifier/reward.txt" in bundle.check and "apt-get install" not in bundle.check
    assert "cat > /tests/test.sh <<'BASHGYM_EOF'" in bundle.check
    assert bundle.reference[-1] == "bash /solution/solve.sh"
    assert "cat > /solution/solve.sh" in bundle.reference[0]


def test_tb1_mapping(suite: Path) -> None:
    bundle = external.import_task(suite / "tb1-report", "tb1")
    assert bundle.task == 'Write the words "alpha beta" into /app/report.txt.'
    assert bundle.difficulty == 2 and bundle.category == "file-operations" and bundle.workdir == "/app"
    # COPY . copies the task's own files but never the harness's (tests, solution, task.yaml ...)
    assert bundle.files == {"/app/notes.txt": "keep me\n"}
    assert not any("apt-get" in c for c in bundle.setup)
    assert "BASHGYM_PYTEST" in bundle.check and "uv pip install pytest==8.3.4" not in bundle.check
    assert "pytest-report" in bundle.check  # TB 1.x passes on the pytest runs' results
    assert bundle.reference == [
        "mkdir -p /solution\ncat > /solution/solution.sh <<'BASHGYM_EOF'\n"
        "#!/bin/bash\necho 'alpha beta' > /app/report.txt\nBASHGYM_EOF\nchmod 0755 "
        "/solution/solution.sh",
        "bash /solution/solution.sh",
    ]


def test_tb1_instruction_key_solution_yaml_and_default_pytest(tmp_path: Path) -> None:
    root = tb1_task(
        tmp_path / "s",
        "plain",
        {
            "run-tests.sh": None,
            "solution.sh": None,
            "solution.yaml": "- command: echo 'alpha beta' > /app/report.txt\n  min_timeout_sec: 1\n",
            "task.yaml": "instruction: Write alpha beta.\ndifficulty: hard\n",
        },
    )
    bundle = external.import_task(root, "s")
    assert bundle.task == "Write alpha beta." and bundle.difficulty == 3 and bundle.category == "external"
    assert bundle.reference == ["echo 'alpha beta' > /app/report.txt"]
    assert '"${BASHGYM_PYTEST:-false}" "$TEST_DIR/test_outputs.py" -rA' in bundle.check


def test_published_shapes_that_never_build_or_replay_are_quarantined_with_their_reason(
    tmp_path: Path,
) -> None:
    """Shapes met in published suites: each would import as something that can never pass (an empty
    environment, keystrokes typed into bash), so each is quarantined and says why."""
    no_image = HARBOR_TOML.replace('docker_image = "someone/count-lines:20250101"\n', "")
    root = tmp_path / "s"
    harbor_task(root, "files-no-dockerfile", {"task.toml": no_image, "environment/Dockerfile": None})
    harbor_task(
        root,
        "docs-only-env",
        {
            "task.toml": no_image,
            "environment/Dockerfile": None,
            "environment/data/input.txt": None,
            "environment/tool.sh": None,
            "environment/late.txt": None,
            "environment/unused.bin": None,
            "environment/README.md": "how the image was built\n",
            "tests/test.sh": "#!/bin/bash\ntest -f /app/count.txt\n",
        },
    )
    tb1_task(root, "compose-without-dockerfile", {"Dockerfile": None})
    tb1_task(
        root,
        "keystrokes",
        {
            "solution.sh": None,
            "solution.yaml": (
                "- command: vim /app/report.txt\n- command: ialpha beta\n  append_enter: false\n- command: Escape\n"
            ),
        },
    )
    tb1_task(root, "key-name", {"solution.sh": None, "solution.yaml": "- command: C-x\n"})
    bundles, quarantine = import_suite(root)
    reasons = {q.task: q.reason for q in quarantine}
    assert reasons == {
        "files-no-dockerfile": "environment/ holds files (data/input.txt, late.txt, tool.sh and 1 more) but no "
        "Dockerfile (nor a docker_image in task.toml) says how they build the starting state",
        "compose-without-dockerfile": "docker-compose.yaml builds from Dockerfile, which the task folder lacks",
        "keystrokes": "solution.yaml types keystrokes without Enter ('ialpha beta'): an interactive session, "
        "not shell commands",
        "key-name": "solution.yaml sends the key 'C-x' to a terminal: an interactive session, not shell commands",
    }
    # no Dockerfile and nothing to build from is the bare sandbox image (the layout makes it optional)
    assert [b.id for b in bundles] == ["ext-s-docs-only-env"]


def test_tb1_copy_of_a_bookkeeping_file_is_carried_and_the_harness_files_never_are(tmp_path: Path) -> None:
    """``COPY task.yaml .`` builds under docker, so it imports; tests and solution stay out of the image."""
    root = tb1_task(
        tmp_path / "s",
        "copies-task-yaml",
        {
            "Dockerfile": TB1_DOCKERFILE.replace(
                "COPY . /app/", "COPY task.yaml .\nCOPY *.sh /app/scripts/\nCOPY notes.txt /app/"
            )
        },
    )
    bundle = external.import_task(root, "s")
    assert bundle.files["/app/task.yaml"] == textwrap.dedent(TB1_YAML).lstrip("\n")
    assert not any("solution" in path or "run-tests" in path for path in bundle.files)  # the glob skips them
    assert "/app/notes.txt" in bundle.files
    named = tb1_task(
        tmp_path / "s",
        "copies-solution",
        {"Dockerfile": TB1_DOCKERFILE.replace("COPY . /app/", "COPY solution.sh /app/")},
    )
    with pytest.raises(external.Unimportable, match="'solution.sh' is excluded from the build context"):
        external.import_task(named, "s")


def test_a_single_task_folder_is_a_suite_of_one(suite: Path) -> None:
    bundles, quarantine = import_suite(suite / "count-lines")
    assert [b.id for b in bundles] == ["ext-term-bench-count-lines"] and not quarantine
    bundles, quarantine = import_suites([suite / "count-lines", suite / "missing"])
    assert len(bundles) == 1 and quarantine[0].reason.startswith("not a folder")


def test_ids_are_sanitised_and_bounded() -> None:
    assert external.external_id("My Suite", "Task_1 (v2)") == "ext-my-suite-task_1-v2"
    long_id = external.external_id("s", "t" * 200)
    assert len(long_id) <= 96 and long_id.startswith("ext-s-ttt")
    assert external.external_id("s", "t" * 200) != external.external_id("s", "t" * 199)
    assert external.difficulty_level("Extreme") == 4 and external.difficulty_level(None) == 2
    assert (
        external.category_slug("3D / Graphics") == "d-graphics" and external.category_slug("") == "external"
    )


@pytest.mark.parametrize(
    ("dockerfile", "reason"),
    [
        (
            "FROM debian:bookworm\nRUN apt-get update && apt-get install -y imagemagick\n",
            "needs the network: RUN apt-get install imagemagick",
        ),
        (
            "FROM ubuntu:24.04\nRUN curl -fsSL https://example.com/x.sh | bash\n",
            "needs the network: RUN curl https://example.com/x.sh",
        ),
        (
            "FROM debian:bookworm\nRUN git clone https://github.com/a/b /app/b\n",
            "needs the network: RUN git clone",
        ),
        ("FROM debian:bookworm\nRUN npm install -g left-pad\n", "needs the network: RUN npm install"),
        (
            "FROM python:3.13\nRUN uv pip install --system requests\n",
            "needs the network: RUN uv pip install requests",
        ),
        ("FROM python:3.12-alpine\n", "needs image python:3.12-alpine"),
        ("FROM golang:1.22 AS build\nFROM debian:bookworm\n", "multi-stage Dockerfile"),
        ("FROM debian:bookworm\nRUN useradd -m agent\nUSER agent\n", "runs as user 'agent'"),
        ("FROM debian:bookworm\nADD https://example.com/data.csv /app/\n", "needs the network: ADD https://"),
        ("FROM debian:bookworm\nCOPY missing.txt /app/\n", "'missing.txt' is not in the build context"),
        ("FROM debian:bookworm\nCOPY ../../etc/passwd /app/\n", "outside the build context"),
    ],
)
def test_dockerfile_problems(tmp_path: Path, dockerfile: str, reason: str) -> None:
    root = harbor_task(tmp_path / "s", "t", {"environment/Dockerfile": dockerfile})
    _, quarantine = import_suite(root)
    assert len(quarantine) == 1 and reason in quarantine[0].reason, quarantine[0].reason


def test_dockerfile_translation_details(tmp_path: Path) -> None:
    dockerfile = """
    ARG VERSION=1.2
    FROM debian:bookworm-slim
    ARG NAME=demo
    ENV APP_HOME=/srv/${NAME} PATH="/srv/bin:${PATH}"
    WORKDIR $APP_HOME
    RUN ["mkdir", "-p", "logs"]
    RUN <<EOF
    echo "$NAME $VERSION" > version.txt
    EOF
    COPY --chmod=0600 secret.txt ./
    COPY <<EOF /etc/motd
    welcome
    EOF
    CMD ["sleep", "infinity"]
    """
    root = harbor_task(
        tmp_path / "s", "t", {"environment/Dockerfile": dockerfile, "environment/secret.txt": "s3cret\n"}
    )
    bundle = external.import_task(root, "s")
    assert bundle.workdir == "/srv/demo"
    setup = "\n".join(bundle.setup)
    assert "export NAME=demo" in setup and "export APP_HOME=/srv/demo" in setup
    assert "mkdir -p logs" in setup and 'echo "$NAME $VERSION" > version.txt' in setup
    assert "export PATH=/srv/bin:/usr/local/sbin" in bundle.files[external.ENV_PROFILE]
    staged = [p for p in bundle.files if p.startswith(external.STAGE_DIR)]
    assert sorted(bundle.files[p] for p in staged) == ["s3cret\n", "welcome\n"]
    assert "chmod 0600 /srv/demo/secret.txt" in setup and "/etc/motd" in setup


def test_baked_in_test_tooling_is_dropped_and_official_mirrors_accepted(tmp_path: Path) -> None:
    """Offline Harbor tasks bake pytest into the image (venv + hash-pinned lock file): that is the check's job."""
    dockerfile = """
    FROM public.ecr.aws/docker/library/debian:bookworm-slim@sha256:4724b8cc51e33e398f0e2e15e18d5ec2851ff0c2
    RUN apt-get update && apt-get install -y --no-install-recommends gawk python3 python3-pip python3-venv \\
        tmux asciinema && rm -rf /var/lib/apt/lists/* && command -v tmux >/dev/null
    COPY requirements.lock /tmp/requirements.lock
    RUN python3 -m venv /opt/verifier-venv \\
        && /opt/verifier-venv/bin/pip install --no-cache-dir --require-hashes -r /tmp/requirements.lock \\
        && rm -f /tmp/requirements.lock
    """
    lock = "pytest==8.4.1 \\\n    --hash=sha256:abc\niniconfig==2.1.0 --hash=sha256:def\npluggy==1.6.0\n"
    root = harbor_task(
        tmp_path / "s",
        "t",
        {
            "environment/Dockerfile": dockerfile,
            "environment/requirements.lock": lock,
            "task.toml": "[environment]\nworkdir = '/srv/work'\n",
        },
    )
    bundle = external.import_task(root, "s")
    assert bundle.workdir == "/srv/work" and bundle.setup[-1] == "mkdir -p /srv/work"
    setup = "\n".join(bundle.setup)
    assert "pip install" not in setup and "venv" not in setup and "tmux" not in setup
    assert "rm -f /tmp/requirements.lock" in setup  # the task's own cleanup stays
    numpy_lock = lock + "numpy==2.3.0 --hash=sha256:0\n"
    root = harbor_task(
        tmp_path / "s",
        "u",
        {"environment/Dockerfile": dockerfile, "environment/requirements.lock": numpy_lock},
    )
    _, quarantine = import_suite(root)
    assert "pip install numpy" in quarantine[0].reason
    unknown = rewrite_script("pip install -r /nowhere/requirements.txt\n", external.IMAGE)
    assert unknown.problems == ["pip install -r /nowhere/requirements.txt (a requirements file)"]


# ---- script rewriting ---------------------------------------------------------------------------------------
def test_harbor_uv_verifier_is_rewritten_offline() -> None:
    rw = rewrite_script(textwrap.dedent(UV_PYTEST_SH), external.TESTS, {"test.sh", "test_outputs.py"})
    assert not rw.problems and rw.pytest_runs == 1
    assert "curl -LsSf" not in rw.text and "apt-get" not in rw.text and "uvx" not in rw.text
    assert '"${BASHGYM_PYTEST:-false}" --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA' in rw.text
    assert "true | sh" in rw.text and "echo 1 > /logs/verifier/reward.txt" in rw.text
    result = subprocess.run(["bash", "-n"], input=rw.text, text=True, capture_output=True)
    assert result.returncode == 0, result.stderr


def test_rewrite_handles_guards_subshells_and_shared_tb1_scripts() -> None:
    script = textwrap.dedent("""
    #!/bin/bash
    if ! command -v uv &> /dev/null; then
        apt-get update && apt-get install -y curl
        (set -o pipefail; curl --fail -LsSf https://astral.sh/uv/0.10.11/install.sh | sh) || exit $?
    fi
    source $TEST_DIR/setup-uv-pytest.sh
    bash $TEST_DIR/run-uv-pytest.sh
    """)
    rw = rewrite_script(script, external.TESTS, {"test_outputs.py"})
    assert not rw.problems and rw.pytest_runs == 1
    assert "curl --fail" not in rw.text and "setup-uv-pytest" not in rw.text and "command -v uv" in rw.text
    assert subprocess.run(["bash", "-n"], input=rw.text, text=True).returncode == 0
    numpy = rewrite_script("source $TEST_DIR/setup-uv-pytest.sh\nuv add numpy==2.3.1\n", external.TESTS)
    assert numpy.problems == ["uv add numpy"]
    local_curl = rewrite_script(
        "apt-get install -y curl\ncurl -s http://localhost:8000/health\n", external.TESTS
    )
    assert local_curl.problems


def test_rewrite_keeps_what_it_does_not_understand() -> None:
    script = "cat > /tmp/x <<'EOF'\npip install never-run-this\nEOF\necho \"$(pip --version)\" && ls 2>&1 | wc -l\n"
    rw = rewrite_script(script, external.IMAGE)
    assert not rw.problems  # heredoc bodies are data; `pip --version` is dropped
    assert "pip install never-run-this" in rw.text and "$(true)" in rw.text


# ---- the check's pytest: the image's own ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def pytest_box(sandbox_image: str):
    """One sandbox of the real image that checks run in (each check cleans up after itself)."""
    from bashgym_assets.sandbox import Sandbox
    from bashgym_assets.scenarios.bundle import ScenarioBundle
    from bashgym_assets.scenarios.sandboxing import spec_for_bundle

    bundle = ScenarioBundle(
        task="t",
        category="external",
        difficulty=1,
        user="root",
        workdir="/app",
        check="true",
        reference=["true"],
    )
    with Sandbox(spec_for_bundle(bundle, sandbox_image)) as box:
        assert box.setup().ok
        assert box.run_as_root("mkdir -p /app", timeout_s=15).exit_code == 0
        yield box


def run_check_pytest(box, files: dict[str, str], *args: str) -> tuple[int, str]:
    """Runs ``files`` (written to /tests) through a TB 1.x check whose verifier is ``pytest ARGS`` as the importer
    rewrites it; returns pytest's exit status and the check's output."""
    plan = external.TestPlan(
        files={rel: (text.encode(), False) for rel, text in files.items()},
        entry=" ".join(['"$BASHGYM_PYTEST"', *args]),
        pytest=True,
        layout=TB1,
    )
    result = box.run_check(external.build_check(plan, "/app", "test"), timeout_s=60)
    output = result.stdout + result.stderr
    runs = [line for line in output.splitlines() if line.startswith("bashgym: pytest runs exited ")]
    assert len(runs) == 1, output
    status = int(runs[0].split()[4])
    assert result.exit_code == (0 if status == 0 else 1), output  # TB 1.x: passes iff every pytest run passed
    return status, output


SUITE_FEATURES = """
import os
import pytest

calls = []


@pytest.fixture(scope="module")
def shared():
    calls.append("setup")
    yield {"n": 1}
    calls.append("teardown")


@pytest.fixture(params=[1, 2])
def number(request):
    return request.param


@pytest.fixture(autouse=True)
def marker(monkeypatch):
    monkeypatch.setenv("BASHGYM_MARK", "on")


def test_autouse_and_builtin(tmp_path, capsys):
    assert os.environ["BASHGYM_MARK"] == "on"
    (tmp_path / "f").write_text("x")
    print("hello")
    assert capsys.readouterr().out == "hello\\n"


def test_param_fixture(number, shared):
    assert number in (1, 2) and shared["n"] == 1


@pytest.mark.parametrize("a,b", [(1, 2), pytest.param(2, 3, id="two"), (3, 4)])
@pytest.mark.parametrize("scale", [1, 10])
def test_stacked(a, b, scale):
    assert (b - a) * scale == scale


def test_approx_and_raises():
    assert 0.1 + 0.2 == pytest.approx(0.3)
    assert [1.0, 2.0] == pytest.approx([1.0, 2.0 + 1e-9])
    with pytest.raises(ValueError, match="bad"):
        raise ValueError("bad value")


@pytest.mark.skip(reason="not today")
def test_skipped():
    raise AssertionError


@pytest.mark.xfail
def test_expected_failure():
    assert False


class TestGroup:
    def test_method(self, shared):
        assert shared == {"n": 1}
"""


def test_the_checks_pytest_runs_what_the_suites_use_and_leaves_no_trace(pytest_box) -> None:
    """The image's pytest, with the options of the suites' plugins (pytest-json-ctrf, -timeout, -cov,
    -json-report) that the image lacks accepted and ignored, and nothing of the run left behind."""
    status, output = run_check_pytest(
        pytest_box,
        {"test_outputs.py": SUITE_FEATURES},
        '"$TEST_DIR/test_outputs.py"',
        "-rA",
        "--ctrf /nonexistent/ctrf.json --timeout 30 --cov=/app --cov-report term --json-report",
    )
    assert status == 0, output
    assert "pytest-7.2.1" in output and "11 passed, 1 skipped, 1 xfailed" in output, output
    assert (
        "test_outputs.py::test_stacked[10-1-2]" in output and "test_outputs.py::test_stacked[1-two]" in output
    )
    left = pytest_box.run_as_root(
        "ls -A /tmp; ls -d /tests /logs 2>&1; find / -xdev \\( -name .pytest_cache -o -name 'pytest-of-*' "
        "-o -path '*/__pycache__/test_outputs*' \\) 2>/dev/null",
        timeout_s=30,
    )
    assert left.stdout.splitlines() == [
        "ls: cannot access '/tests': No such file or directory",
        "ls: cannot access '/logs': No such file or directory",
    ], left.stdout


def test_the_checks_pytest_fails_and_collects_as_pytest(pytest_box) -> None:
    status, failing = run_check_pytest(
        pytest_box,
        {"test_a.py": "def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n"},
        '"$TEST_DIR"',
        "-rA",
    )
    assert status == 1 and "FAILED ../tests/test_a.py::test_bad" in failing and "assert 1 == 2" in failing
    assert "1 failed, 1 passed" in failing, failing
    status, broken = run_check_pytest(pytest_box, {"test_b.py": "import nonexistent_module\n"}, '"$TEST_DIR"')
    assert status == 2 and "ERROR collecting" in broken and "No module named 'nonexistent_module'" in broken
    status, empty = run_check_pytest(pytest_box, {"helper.py": "X = 1\n"}, '"$TEST_DIR"')
    assert status == 5 and "no tests ran" in empty, empty
    status, unknown = run_check_pytest(
        pytest_box, {"test_c.py": "def test_c():\n    pass\n"}, "--no-such-option"
    )
    assert status == 4 and "unrecognized arguments: --no-such-option" in unknown, unknown


XUNIT_SUITE = """
import pytest

LOG = []


def setup_module(module):
    module.GREETING = "hi"


class TestManifest:
    @classmethod
    def setup_class(cls):
        cls.shared = "s"

    def teardown_class(cls):  # pytest also takes it without @classmethod
        LOG.append("class down")

    def setup_method(self, method):
        self.name = method.__name__

    def teardown_method(self):
        LOG.append("method down")

    @pytest.fixture
    def own(self):
        return self.name

    def test_state(self):
        assert (GREETING, self.shared, self.name) == ("hi", "s", "test_state")

    def test_fixture_sees_the_same_instance(self, own):
        assert own == "test_fixture_sees_the_same_instance"


def setup_function(function):
    LOG.append(function.__name__)


def test_function_setup():
    assert LOG == ["method down", "method down", "class down", "test_function_setup"]


class TestBrokenSetup:
    def setup_method(self):
        raise RuntimeError("no baseline manifest")

    def test_never_runs(self):
        raise AssertionError("ran without its set-up")
"""


def test_the_checks_pytest_runs_xunit_style_setups(pytest_box) -> None:
    """Published suites keep state in ``setup_method``/``setup_class``/``setup_module`` (a Terminal-Bench task's
    ``TestManifestComparison``); a failing set-up is an ERROR of its test, which never runs."""
    status, output = run_check_pytest(pytest_box, {"test_outputs.py": XUNIT_SUITE}, '"$TEST_DIR"', "-rA")
    assert status == 1 and "3 passed, 1 error" in output, output
    assert "ERROR ../tests/test_outputs.py::TestBrokenSetup::test_never_runs" in output
    assert "no baseline manifest" in output and "AssertionError: ran without its set-up" not in output


def test_the_images_pytest_is_what_the_static_look_assumes(pytest_box) -> None:
    """``PYTEST_FIXTURES`` are exactly the fixtures the check's pytest offers (no plugin's), and every module of
    ``PYTEST_MODULES`` imports in the image: the screening of test files refuses what the image lacks, nothing more."""
    listed = pytest_box.run_as_root(
        "cd /tmp && python3 -B -m pytest -p no:cacheprovider --fixtures", timeout_s=60
    ).stdout
    fixtures = {
        line.split()[0] for line in listed.splitlines() if re.match(r"^[a-z_]+( \[\w+ scope\])? -- ", line)
    }
    assert fixtures | {"request"} == external.PYTEST_FIXTURES, listed
    modules = sorted(external.PYTEST_MODULES)
    imported = pytest_box.run_as_root(
        f"python3 -B -c 'import {', '.join(modules)}; print(\"ok\")'", timeout_s=60
    )
    assert imported.stdout.strip() == "ok", imported.stdout + imported.stderr


def test_pytest_problems_are_found_statically() -> None:
    problems = external.pytest_problems(
        {
            "test_outputs.py": "import numpy\nimport solution\nimport pytest\nimport _pytest.monkeypatch\n"
            "import pluggy\n\n"
            "def test_a(mocker):\n    pass\n\nasync def test_b():\n    pass\n\n"
            "def test_c(tmp_path, caplog, recwarn, tmpdir):\n    pytest.register_assert_rewrite('x')\n",
            "conftest.py": "pytest_plugins = ['pytest_asyncio']\n\ndef pytest_configure(config):\n    pass\n",
        },
        provided_modules=set(),
        instruction="Write /app/solution.py with a function solve().",
    )
    text = "; ".join(problems)
    # solution.py is the agent's; pytest and what it brings (_pytest, pluggy) are the image's
    assert "tests import packages not in the sandbox image: numpy, pytest_asyncio" in text
    assert "tests need a pytest plugin the sandbox image lacks:" in text
    assert "the fixture 'mocker'" in text and "async tests" in text
    # what the image's pytest has is no problem: its own fixtures, attributes, hooks
    for fine in ("tmp_path", "caplog", "recwarn", "tmpdir", "register_assert_rewrite", "pytest_configure"):
        assert fine not in text, (fine, text)
    generated = external.pytest_problems(
        {
            "conftest.py": "def pytest_generate_tests(metafunc):\n    metafunc.parametrize('word', ['a'])\n",
            "test_w.py": "import pytest\n\npytestmark = pytest.mark.parametrize('n', [1])\n\n"
            "def test_w(word, n):\n    assert word and n\n",
        },
        set(),
    )
    assert generated == []
    assert external.pytest_problems({"test_x.py": "def test_x(:\n"}, set())[0].startswith(
        "test_x.py does not parse under Python 3.11"
    )


# Uses what the clone once shipped in place of pytest lacked (its screening quarantined this task): a conftest
# hook parametrizing tests, the caplog/recwarn/tmpdir fixtures, pytest.deprecated_call, register_assert_rewrite.
PYTEST_FEATURES_CONFTEST = """
import pytest

pytest.register_assert_rewrite("helpers")


def pytest_generate_tests(metafunc):
    if "word" in metafunc.fixturenames:
        metafunc.parametrize("word", ["alpha", "beta"], ids=["first", "second"])
"""

PYTEST_FEATURES_TESTS = """
import logging
import warnings
from pathlib import Path

import pytest

REPORT = Path("/app/report.txt")


def read_words():
    logging.getLogger("report").warning("reading %s", REPORT)
    if not REPORT.exists():
        warnings.warn("no report", DeprecationWarning)
        return []
    return REPORT.read_text().split()


def test_reading_is_logged(caplog):
    with caplog.at_level(logging.WARNING):
        words = read_words()
    assert "reading /app/report.txt" in caplog.text and words


def test_word(word):
    assert word in read_words()


def test_no_warning_once_written(recwarn, tmpdir):
    tmpdir.join("copy.txt").write(REPORT.read_text())
    assert read_words() and len(recwarn) == 0


def test_warns_while_missing(tmp_path, monkeypatch):
    monkeypatch.setitem(globals(), "REPORT", tmp_path / "absent.txt")
    with pytest.deprecated_call():
        assert read_words() == []
    assert REPORT.name == "absent.txt" and Path("/app/report.txt").exists()
"""


@pytest.mark.docker
def test_a_check_using_pytest_features_the_clone_lacked_runs_on_the_images_pytest(
    tmp_path: Path, sandbox_image: str
) -> None:
    """Once quarantined ("tests use pytest features the offline runner lacks"), now imported, admitted by the gate
    and checked by the image's pytest: every test fails on the untouched state and passes after the reference."""
    from bashgym_assets.sandbox import Sandbox
    from bashgym_assets.scenarios.gate import GateLimits, gate_bundle
    from bashgym_assets.scenarios.sandboxing import spec_for_bundle

    folder = harbor_task(
        tmp_path / "s",
        "pytest-features",
        {
            "instruction.md": "Write the words alpha and beta into /app/report.txt.\n",
            "tests/test.sh": UV_PYTEST_SH,
            "tests/conftest.py": PYTEST_FEATURES_CONFTEST,
            "tests/test_outputs.py": PYTEST_FEATURES_TESTS,
            "solution/solve.sh": "#!/bin/bash\necho alpha beta > /app/report.txt\n",
        },
    )
    bundle = external.import_task(folder, "s")
    result = gate_bundle(bundle, sandbox_image, GateLimits(command_timeout_s=60, check_timeout_s=60))
    assert result.admitted, (result.reason, result.detail)
    with Sandbox(spec_for_bundle(bundle, sandbox_image)) as box:
        assert box.setup().ok
        before = box.run_check(bundle.check, timeout_s=60)
        assert before.exit_code == 1 and "reward.txt = 0" in before.stdout, before.stdout
        assert "5 failed" in before.stdout and "test_word[first]" in before.stdout, before.stdout
        for command in bundle.reference:
            assert box.run_as_root(command, timeout_s=60).exit_code == 0, command
        after = box.run_check(bundle.check, timeout_s=60)
        assert after.exit_code == 0 and "reward.txt = 1" in after.stdout, after.stdout + after.stderr
        assert (
            "5 passed in" in after.stdout
            and "PASSED ../tests/test_outputs.py::test_word[second]" in after.stdout
        )


# ---- nothing external reaches training ----------------------------------------------------------------------------
def _trajectory(scenario_id: str, kept: bool = True, split: str | None = "train") -> dict:
    return {
        "scenario_id": scenario_id,
        "trajectory_id": f"{scenario_id}-t{int(kept)}",
        "sample_index": 0,
        "kept": kept,
        "split": split,
        "category": "files",
        "messages": [
            {"role": "user", "content": "do the thing"},
            {"role": "assistant", "content": "echo done" if kept else "echo nope"},
            {"role": "user", "content": "exit code 0"},
            {"role": "assistant", "content": "exit"},
        ],
    }


def test_dataset_builders_refuse_external_rows_and_contamination_flags_them() -> None:
    rows = [_trajectory("ext-tb2-count-lines"), _trajectory("pack-files-1")]
    sft = build_sft([], rows)
    assert [r["scenario_id"] for r in sft.rows] == ["pack-files-1"]
    assert [(q.source, q.reason) for q in sft.quarantine] == [
        (
            "trajectory:ext-tb2-count-lines/ext-tb2-count-lines-t1",
            "derives from external evaluation scenario ext-tb2-count-lines (evaluation only)",
        )
    ]
    dpo = build_dpo([], [_trajectory("ext-tb2-count-lines"), _trajectory("ext-tb2-count-lines", kept=False)])
    assert not dpo.rows and len(dpo.quarantine) == 2
    assert all("external evaluation scenario" in q.reason for q in dpo.quarantine)
    # a written row that somehow holds an external id is flagged even when no held-out list names it
    written = [
        {**sft.rows[0], "example_id": "e1", "scenario_id": "ext-tb2-count-lines", "source": "x"},
        sft.rows[0],
    ]
    violations = contamination_violations(written, heldout=[])
    assert violations == [
        {
            "row": "e1",
            "source": "x",
            "reason": "derives from external evaluation scenario ext-tb2-count-lines (evaluation only)",
        }
    ]


# ---- the gate, in the real sandbox ---------------------------------------------------------------------------
@pytest.mark.docker
def test_imported_tasks_pass_the_reference_gate_held_out(suite: Path, sandbox_image: str) -> None:
    from bashgym_assets.scenarios.gate import GateLimits, gate_bundle

    bundles = {b.id: b for b in import_suite(suite)[0]}
    for scenario_id in (
        "ext-term-bench-count-lines",
        "ext-term-bench-word-report",
        "ext-term-bench-tb1-report",
    ):
        result = gate_bundle(
            bundles[scenario_id], sandbox_image, GateLimits(command_timeout_s=60, check_timeout_s=60)
        )
        assert result.admitted, (scenario_id, result.reason, result.detail)
        assert result.split == HELD_OUT


@pytest.mark.docker
def test_translated_environment_and_check_leave_no_trace(suite: Path, sandbox_image: str) -> None:
    """The Dockerfile's effects are there for the operator; the check's /tests and /logs are not."""
    from bashgym_assets.sandbox import Sandbox
    from bashgym_assets.scenarios.sandboxing import spec_for_bundle

    bundle = external.import_task(suite / "count-lines", "tb2")
    with Sandbox(spec_for_bundle(bundle, sandbox_image)) as box:
        assert box.setup().ok
        before = box.run_check(bundle.check, timeout_s=60)
        assert before.exit_code == 1 and "reward.txt = 0" in before.stdout
        session = box.session()
        state = session.run(
            "pwd; echo $GREETING; cat greeting.txt late.txt; tool; ls -d /tests /logs "
            f"{external.STAGE_DIR} 2>&1; ls /solution 2>&1; stat -c %a /app/late.txt"
        )
        assert state.stdout.splitlines() == [
            "/app",
            "hello world",
            "hello world",
            "late",
            "tool",
            "ls: cannot access '/tests': No such file or directory",
            "ls: cannot access '/logs': No such file or directory",
            f"ls: cannot access '{external.STAGE_DIR}': No such file or directory",
            "ls: cannot access '/solution': No such file or directory",
            "644",
        ], state.stdout


# ---- the Dagster assets ---------------------------------------------------------------------------------------
def _materialize_candidates(home: Path, suite: Path, monkeypatch: pytest.MonkeyPatch):
    import dagster as dg

    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.defs.scenarios import scenario_candidates

    monkeypatch.setenv("BASHGYM_EVAL_SUITE_DIRS", f"{suite}{os.pathsep}{suite.parent / 'absent'}")
    monkeypatch.delenv("BASHGYM_TEACHER_MODEL", raising=False)
    monkeypatch.delenv("BASHGYM_SCENARIO_IMPORT_DIR", raising=False)
    result = dg.materialize(
        [scenario_candidates],
        resources={"bashgym": BashgymHome(home=str(home))},
        run_config={"ops": {"scenario_candidates": {"config": {"include_pack": False}}}},
    )
    assert result.success
    return result.asset_materializations_for_node("scenario_candidates")[0].metadata


def test_scenario_candidates_imports_the_configured_suites(
    bashgym_home: Path, suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bashgym_assets.lake import Lake

    meta = _materialize_candidates(bashgym_home, suite, monkeypatch)
    assert meta["candidates"].value == 3 and meta["external_imported"].value == 3
    assert meta["by_origin"].value == {"external": 3}
    n_bad = meta["external_quarantined"].value
    assert n_bad == 14 and meta["quarantined"].value == n_bad
    table = meta["external_quarantine"].value
    assert {r.data["task"] for r in table.records} >= {"needs-network", "bad-toml", "bad-yaml"}
    assert {r.data["suite"] for r in table.records} == {"Term Bench!", "absent"}
    suites = [list(r.data.values()) for r in meta["external_suites"].records]
    assert ["Term Bench!", 3, 13] in suites and ["absent", 0, 1] in suites
    lake = Lake(root=bashgym_home / "lake")
    rows = lake.read_rows("scenario_candidates")
    assert sorted(r["scenario_id"] for r in rows) == [
        "ext-term-bench-count-lines",
        "ext-term-bench-tb1-report",
        "ext-term-bench-word-report",
    ]
    assert {r["origin"] for r in rows} == {"external"}
    quarantine = lake.read_rows("scenario_candidates_quarantine")
    assert any(
        q["source"] == "external:Term Bench!:harbor2:needs-network" and "pip install pandas" in q["reason"]
        for q in quarantine
    )


@pytest.mark.docker
def test_gated_scenarios_admits_external_tasks_as_held_out(
    bashgym_home: Path, suite: Path, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dagster as dg

    from bashgym_assets.defs.resources import BashgymHome
    from bashgym_assets.defs.scenarios import gated_scenarios
    from bashgym_assets.lake import Lake

    _materialize_candidates(bashgym_home, suite, monkeypatch)
    result = dg.materialize([gated_scenarios], resources={"bashgym": BashgymHome(home=str(bashgym_home))})
    assert result.success
    meta = result.asset_materializations_for_node("gated_scenarios")[0].metadata
    assert meta["admitted"].value == 3 and meta["held_out"].value == 3 and meta["train"].value == 0
    gated = Lake(root=bashgym_home / "lake").read_rows("gated_scenarios")
    assert {r["split"] for r in gated} == {HELD_OUT}


# ---- the user a task's Dockerfile names ---------------------------------------------------------------------------
OPERATOR_HARBOR_DOCKERFILE = """
FROM debian:bookworm
RUN useradd -m -s /bin/bash -g operator -G users operator
USER operator
WORKDIR /home/operator/project
RUN echo "made by $(whoami) in $PWD" > made.txt
"""

OPERATOR_HARBOR_TEST_SH = """
#!/bin/bash
# the verifier runs as root: /logs/verifier is root's
mkdir -p /logs/verifier
f=/home/operator/whoami.txt
if [ "$(id -u)" = 0 ] && [ "$(cat $f 2>/dev/null)" = operator ] && [ "$(stat -c %U $f)" = operator ] \\
   && [ "$(cat /home/operator/project/made.txt)" = "made by operator in /home/operator/project" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

OPERATOR_TB1_DOCKERFILE = """
FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620
RUN useradd -m -u 1000 -g operator operator
WORKDIR /app
COPY notes.txt /app/
RUN chown -R operator /app
USER 1000
"""

OPERATOR_TB1_TESTS = """
import os
import pwd
from pathlib import Path


def test_report_written_by_operator_in_its_home():
    report = Path("/home/operator/report.txt")
    assert report.read_text().split() == ["operator", "/home/operator"]
    assert pwd.getpwuid(report.stat().st_uid).pw_name == "operator"


def test_the_check_runs_as_root():
    assert os.getuid() == 0
"""


def operator_tasks(root: Path) -> tuple[Path, Path]:
    """The same kind of task in both layouts, each Dockerfile ending as the sandbox's own operator user (by name
    in the Harbor one, by uid in the Terminal-Bench 1.x one)."""
    harbor = harbor_task(
        root,
        "as-operator",
        {
            "instruction.md": "Write your user name into whoami.txt in my home directory.\n",
            "environment/Dockerfile": OPERATOR_HARBOR_DOCKERFILE,
            "tests/test.sh": OPERATOR_HARBOR_TEST_SH,
            # the harness puts the solution in /solution: the reference finds its helper there, whoever it runs as
            "solution/solve.sh": "#!/bin/bash\nbash /solution/helper.sh\n",
            "solution/helper.sh": "#!/bin/bash\nwhoami > ~/whoami.txt\n",
        },
    )
    tb1 = tb1_task(
        root,
        "tb1-as-operator",
        {
            "task.yaml": TB1_YAML.replace(
                'Write the words "alpha beta" into /app/report.txt.',
                "Write your user name and home folder into report.txt in my home.",
            ),
            "Dockerfile": OPERATOR_TB1_DOCKERFILE,
            "tests/test_outputs.py": OPERATOR_TB1_TESTS,
            "solution.sh": '#!/bin/bash\necho "$(whoami) $HOME" > ~/report.txt\n',
        },
    )
    return harbor, tb1


class _Typed(ReferenceOperator):
    """Types the commands it was given (not the bundle's reference), then ``exit``."""

    def for_scenario(self, bundle: object) -> _Typed:
        return self


def test_a_dockerfile_user_the_sandbox_offers_is_the_agent_and_in_its_prompt(tmp_path: Path) -> None:
    import typing

    from bashgym_assets.sandbox.sandbox import OPERATOR_GID, OPERATOR_UID
    from bashgym_assets.scenarios.bundle import ScenarioBundle

    # the importer's idea of the sandbox's users is the sandbox's own
    assert set(typing.get_args(ScenarioBundle.model_fields["user"].annotation)) == set(external.SANDBOX_USERS)
    assert external.SANDBOX_USERS["operator"][1:4] == (OPERATOR_UID, "operator", OPERATOR_GID)
    harbor, tb1 = operator_tasks(tmp_path / "s")
    bundle = external.import_task(harbor, "s")
    assert (bundle.user, bundle.workdir, bundle.home) == (
        "operator",
        "/home/operator/project",
        "/home/operator",
    )
    assert initial_messages(bundle)[0].content == (
        "You are logged in to sandbox as operator. Working directory: /home/operator/project.\n"
        "operator@sandbox:/home/operator/project$"
    )
    setup = "\n".join(bundle.setup)
    assert "useradd" not in setup and "usermod -aG users operator" in setup  # the image has the user already
    assert "runuser -u operator -- bash -c" in setup
    assert "cd /home/operator/project 2>/dev/null" in bundle.check  # the check starts where the agent does
    assert bundle.reference[-1] == f"bash {external.USER_SOLUTION_DIR}/solve.sh"
    assert f"bash {external.USER_SOLUTION_DIR}/helper.sh" in bundle.reference[0]
    tb1_bundle = external.import_task(tb1, "s")
    # a uid is the user the Dockerfile gave it; no WORKDIR after the USER: the WORKDIR it set before still holds
    assert (tb1_bundle.user, tb1_bundle.workdir) == ("operator", "/app")
    no_workdir = external.import_task(
        harbor_task(
            tmp_path / "s",
            "home",
            {"environment/Dockerfile": ("FROM debian:bookworm\nUSER operator:operator\n")},
        ),
        "s",
    )
    assert (no_workdir.user, no_workdir.workdir) == ("operator", "/home/operator")  # no WORKDIR: its home
    compose = external.import_task(
        tb1_task(
            tmp_path / "s",
            "compose-user",
            {"docker-compose.yaml": TB1_COMPOSE + "    user: operator\n    working_dir: /srv/job\n"},
        ),
        "s",
    )
    assert (compose.user, compose.workdir) == ("operator", "/srv/job")
    root = external.import_task(
        harbor_task(
            tmp_path / "s",
            "back-to-root",
            {"environment/Dockerfile": ("FROM debian:bookworm\nUSER operator\nWORKDIR /work\nUSER 0:0\n")},
        ),
        "s",
    )
    assert (root.user, root.workdir) == ("root", "/work")


@pytest.mark.parametrize(
    ("dockerfile", "reason"),
    [
        (
            "FROM debian:bookworm\nRUN useradd -m agent\nUSER agent\n",
            "the agent runs as user 'agent' (the Dockerfile's USER agent)",
        ),
        (
            "FROM debian:bookworm\nUSER 1001\n",
            "the agent runs as uid 1001 (a user the Dockerfile does not name",
        ),
        (
            "FROM debian:bookworm\nRUN useradd -m -u 1000 agent\nUSER 1000:1000\n",
            "the agent runs as uid 1000 (the user 'agent'",
        ),
        ("FROM debian:bookworm\nUSER operator:staff\n", "the agent runs as operator in the group 'staff'"),
        (
            "FROM debian:bookworm\nRUN useradd -m -u 1001 -g operator operator\nUSER operator\n",
            "the Dockerfile creates the user operator with uid 1001: the sandbox's operator is uid 1000",
        ),
        (
            "FROM debian:bookworm\nRUN useradd -d /work -g operator operator\nUSER operator\n",
            "the Dockerfile creates the user operator with the home /work: the sandbox's operator lives in "
            "/home/operator",
        ),
        # the service account: a service user of another name, or app made unlike the image's
        ("FROM debian:bookworm\nRUN useradd -r svc\nUSER svc\n", "the agent runs as user 'svc'"),
        (
            "FROM debian:bookworm\nRUN groupadd --system app && useradd --system --gid app --create-home app\n"
            "USER app\n",
            "the Dockerfile creates the user app with the home /home/app: the sandbox's app lives in /srv/app",
        ),
        (
            "FROM debian:bookworm\nRUN useradd -r -u 1500 app\nUSER app\n",
            "the Dockerfile creates the user app with uid 1500: the sandbox's app is uid 999",
        ),
        ("FROM debian:bookworm\nUSER app:staff\n", "the agent runs as app in the group 'staff'"),
        (
            "FROM debian:bookworm\nRUN useradd -r -u 999 agent\nUSER 999\n",
            "the agent runs as uid 999 (the user 'agent'",
        ),
    ],
)
def test_a_user_the_sandbox_cannot_offer_is_quarantined_saying_which_it_offers(
    tmp_path: Path, dockerfile: str, reason: str
) -> None:
    harbor = harbor_task(tmp_path / "s", "harbor", {"environment/Dockerfile": dockerfile})
    tb1 = tb1_task(tmp_path / "s", "tb1", {"Dockerfile": dockerfile})
    _, quarantine = import_suite(tmp_path / "s")
    assert {q.task for q in quarantine} == {"harbor", "tb1"}
    for q in quarantine:
        assert q.reason.startswith(reason), q.reason
        assert "offers only" not in reason or q.reason.endswith(f"offers only {external.OFFERED_USERS}")
        assert "root or its own operator" not in q.reason
    assert harbor.is_dir() and tb1.is_dir()


@pytest.mark.docker
def test_tasks_run_as_their_dockerfile_user_and_the_check_as_root(tmp_path: Path, sandbox_image: str) -> None:
    """Both layouts, a real container: the episode's shell is the operator in the Dockerfile's WORKDIR with its
    own home, the folder WORKDIR made is the operator's, and the verifier (which needs root) passes the reference."""
    from bashgym_assets.scenarios.gate import GateLimits, gate_bundle

    harbor, tb1 = operator_tasks(tmp_path / "s")
    for folder, start in ((harbor, "/home/operator/project"), (tb1, "/app")):
        bundle = external.import_task(folder, "s")
        result = gate_bundle(bundle, sandbox_image, GateLimits(command_timeout_s=60, check_timeout_s=60))
        assert result.admitted, (folder.name, result.reason, result.detail)
        record = run_episode(
            bundle, _Typed(["whoami; pwd; echo ~; id -g -n; stat -c %U .", *bundle.reference]), sandbox_image
        )
        assert record.messages[0].content.startswith(
            f"You are logged in to sandbox as operator. Working directory: {start}."
        )
        assert record.messages[3].content.splitlines() == [
            "operator",
            start,
            "/home/operator",
            "operator",
            "operator",
            "[exit code: 0]",
        ], record.messages[3]
        assert record.verified, (folder.name, record.reject_reason)


# ---- the service account a task's Dockerfile names -----------------------------------------------------------------
SERVICE_HARBOR_DOCKERFILE = """
FROM debian:bookworm
RUN groupadd --system app && useradd --system --gid app --shell /bin/bash app
RUN mkdir -p /srv/ledger && chown app:app /srv/ledger
USER app
WORKDIR /srv/ledger
RUN echo "made by $(whoami) in $PWD" > made.txt
"""

SERVICE_HARBOR_TEST_SH = """
#!/bin/bash
mkdir -p /logs/verifier
f=/srv/ledger/whoami.txt
if [ "$(id -u)" = 0 ] && [ "$(cat $f 2>/dev/null)" = app ] && [ "$(stat -c %U $f)" = app ] \\
   && [ "$(cat /srv/ledger/made.txt)" = "made by app in /srv/ledger" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def service_task(root: Path) -> Path:
    """A Harbor task whose Dockerfile makes a system account ``app`` and runs the agent as it, in its service's
    folder (the shape of a web app's or a worker's image)."""
    return harbor_task(
        root,
        "as-service",
        {
            "instruction.md": "Write the name of the account you run as into whoami.txt here.\n",
            "environment/Dockerfile": SERVICE_HARBOR_DOCKERFILE,
            "tests/test.sh": SERVICE_HARBOR_TEST_SH,
            "solution/solve.sh": "#!/bin/bash\nwhoami > whoami.txt\n",
        },
    )


def test_a_dockerfiles_service_user_app_is_the_sandboxs_service_account(tmp_path: Path) -> None:
    bundle = external.import_task(service_task(tmp_path / "s"), "s")
    assert (bundle.user, bundle.workdir, bundle.home) == ("app", "/srv/ledger", "/srv/app")
    assert initial_messages(bundle)[0].content == (
        "You are logged in to sandbox as app. Working directory: /srv/ledger.\napp@sandbox:/srv/ledger$"
    )
    setup = "\n".join(bundle.setup)
    # the sandbox's own account: making it again is making it as the sandbox does unless it exists (a session as
    # app has it from the container's start); RUN after USER runs as it
    assert "groupadd --system app &&" not in setup and "useradd --system --gid app --shell" not in setup
    assert setup.count(account_setup_shell(SESSION_ACCOUNTS["app"])) == 2  # the group's line and the user's
    assert "runuser -u app -- bash -c" in setup
    assert bundle.reference[-1] == f"bash {external.USER_SOLUTION_DIR}/solve.sh"
    # by uid: 999 is the app a `useradd --system app` made (no uid given); its group too; no WORKDIR: its home
    by_uid = external.import_task(
        harbor_task(
            tmp_path / "s",
            "by-uid",
            {"environment/Dockerfile": "FROM debian:bookworm\nRUN useradd -r -U app\nUSER 999:app\n"},
        ),
        "s",
    )
    assert (by_uid.user, by_uid.workdir) == ("app", "/srv/app")
    compose = external.import_task(
        tb1_task(
            tmp_path / "s",
            "compose-app",
            {"docker-compose.yaml": TB1_COMPOSE + "    user: app:app\n    working_dir: /var/lib/ledger\n"},
        ),
        "s",
    )
    assert (compose.user, compose.workdir) == ("app", "/var/lib/ledger")


@pytest.mark.docker
def test_a_service_user_task_runs_as_app_and_its_check_as_root(tmp_path: Path, sandbox_image: str) -> None:
    """A real container: the imported task's shell is the service account in the Dockerfile's WORKDIR, the RUN
    after USER made its file as app, and the verifier (root) passes the reference through the gate."""
    from bashgym_assets.scenarios.gate import GateLimits, gate_bundle

    bundle = external.import_task(service_task(tmp_path / "s"), "s")
    result = gate_bundle(bundle, sandbox_image, GateLimits(command_timeout_s=60, check_timeout_s=60))
    assert result.admitted, (result.reason, result.detail)
    record = run_episode(
        bundle, _Typed(["whoami; pwd; echo ~; id -g -n; stat -c %U .", *bundle.reference]), sandbox_image
    )
    assert record.messages[0].content.startswith(
        "You are logged in to sandbox as app. Working directory: /srv/ledger."
    )
    assert record.messages[3].content.splitlines() == [
        "app",
        "/srv/ledger",
        "/srv/app",
        "app",
        "app",
        "[exit code: 0]",
    ], record.messages[3]
    assert record.verified, record.reject_reason


# ---- a task with no Dockerfile ---------------------------------------------------------------------------------
SETUP_SH = "#!/bin/bash\nmkdir -p /app && cp /task/data.txt /app/data.txt\n"


def test_files_without_a_dockerfile_are_quarantined_alike_in_both_layouts(tmp_path: Path) -> None:
    """A folder whose files (a setup script, data) were meant to build the starting state but that has no
    Dockerfile saying how: importing it with an empty setup would make the gate blame its reference."""
    root = tmp_path / "s"
    tb1_task(
        root,
        "tb1-setup-script",
        {
            "Dockerfile": None,
            "docker-compose.yaml": None,
            "notes.txt": None,
            "setup.sh": SETUP_SH,
            "data.txt": "a\nb\n",
        },
    )
    no_image = HARBOR_TOML.replace('docker_image = "someone/count-lines:20250101"\n', "")
    harbor_task(
        root,
        "harbor-setup-script",
        {
            "task.toml": no_image,
            "environment/Dockerfile": None,
            "environment/data/input.txt": None,
            "environment/tool.sh": None,
            "environment/late.txt": None,
            "environment/unused.bin": None,
            "environment/setup.sh": SETUP_SH,
            "environment/data.txt": "a\nb\n",
        },
    )
    # the harness's own files, docs and dotfiles are no starting state: these still import, on the bare image
    tb1_task(
        root,
        "tb1-bare",
        {
            "Dockerfile": None,
            "docker-compose.yaml": None,
            "notes.txt": None,
            "README.md": "about\n",
            ".gitignore": "*.pyc\n",
        },
    )
    bundles, quarantine = import_suite(root)
    reasons = {q.task: q.reason for q in quarantine}
    assert reasons == {
        "tb1-setup-script": "the task folder holds files (data.txt, setup.sh) but no Dockerfile (nor an image in "
        "docker-compose.yaml) says how they build the starting state",
        "harbor-setup-script": "environment/ holds files (data.txt, setup.sh) but no Dockerfile (nor a "
        "docker_image in task.toml) says how they build the starting state",
    }
    assert [b.id for b in bundles] == ["ext-s-tb1-bare"]


# ---- binary fixtures and links --------------------------------------------------------------------------------
def _tarball(members: dict[str, bytes]) -> bytes:
    """A .tar.gz of ``members``, the same bytes every time."""
    import gzip
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


BINARY_FIXTURES: dict[str, bytes] = {
    "fixtures/logs.tar.gz": _tarball({"logs/app.log": b"started\nstopped\n", "logs/err.log": b"boom\n"}),
    "fixtures/wtmp": bytes(range(256)) * 8 + b"\x00" * 384,  # a utmp-style log: NULs, every byte
    "fixtures/logo.png": b"\x89PNG\r\n\x1a\n" + bytes((i * 37) % 256 for i in range(4096)),
    "fixtures/latin1.txt": "caf\xe9 cr\xe8me\n".encode("latin-1"),  # text, but not UTF-8
    "fixtures/bom.csv": "\ufeffname,count\r\nalpha,2\r\n".encode(),  # a BOM and CRLF: kept as they are
    "fixtures/sub/plain.txt": b"plain text\n",
}
FIXTURE_LINKS = {
    "fixtures/current.tar.gz": "logs.tar.gz",
    "fixtures/hostname": "/etc/hostname",
    "fixtures/subdir": "sub",
    "fixtures/dangling": "../nowhere/at/all",
}
LATE_BLOB = bytes(reversed(range(256))) * 4


def _with_fixtures(folder: Path, prefix: str) -> Path:
    for rel, data in {
        **BINARY_FIXTURES,
        "late.bin": LATE_BLOB,
        "bundle.tar.gz": _tarball({"unpacked/readme.txt": b"from ADD\n"}),
    }.items():
        put(folder, prefix + rel, data)
    for rel, target in FIXTURE_LINKS.items():
        (folder / (prefix + rel)).symlink_to(target)
    return folder


BINARY_DOCKERFILE = """
FROM debian:bookworm
WORKDIR /app
COPY fixtures/ /app/fixtures/
RUN echo ran > /app/ran.txt
COPY late.bin /app/late.bin
ADD --chown=operator bundle.tar.gz /opt/
"""

BINARY_TEST_SH = """
#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/out/logs/err.log 2>/dev/null)" = boom ] && [ -L /app/fixtures/current.tar.gz ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def binary_tasks(root: Path) -> tuple[Path, Path]:
    harbor = _with_fixtures(
        harbor_task(
            root,
            "binary-fixtures",
            {
                "instruction.md": "Unpack /app/fixtures/current.tar.gz into /app/out.\n",
                "environment/Dockerfile": BINARY_DOCKERFILE,
                "tests/test.sh": BINARY_TEST_SH,
                "solution/solve.sh": "#!/bin/bash\nmkdir -p /app/out && tar -xzf /app/fixtures/current.tar.gz -C /app/out\n",
            },
        ),
        "environment/",
    )
    tb1 = _with_fixtures(tb1_task(root, "tb1-binary-fixtures"), "")  # COPY . /app/ carries them all
    return harbor, tb1


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_binary_fixtures_and_links_are_carried_and_the_bundle_round_trips(tmp_path: Path) -> None:
    import yaml

    from bashgym_assets.scenarios.bundle import load_bundle, parse_bundle

    harbor, tb1 = binary_tasks(tmp_path / "s")
    bundles, quarantine = import_suite(tmp_path / "s")
    assert not quarantine, quarantine
    by_id = {b.id: b for b in bundles}
    bundle = by_id["ext-s-binary-fixtures"]
    assert bundle.files["/app/fixtures/sub/plain.txt"] == "plain text\n"  # text stays readable text
    setup = "\n".join(bundle.setup)
    assert "ln -sfn -- /etc/hostname /app/fixtures/hostname" in setup
    assert "ln -sfn -- ../nowhere/at/all /app/fixtures/dangling" in setup
    assert "tar -x --no-same-owner" in setup  # ADD unpacks its archive
    staged = {path: text for path, text in bundle.files.items() if path.startswith(external.STAGE_DIR)}
    assert len(staged) == 7  # 5 binary fixtures (BOM and latin-1 too), late.bin, the ADD archive, as base64
    # every form a bundle is written in gives the same bundle back
    assert parse_bundle(bundle.model_dump_json(exclude_none=True)) == bundle
    for b in bundles:
        path = tmp_path / f"{b.id}.yaml"
        path.write_text(yaml.safe_dump(b.model_dump(mode="json", exclude_none=True), allow_unicode=True))
        assert load_bundle(path) == b
    assert "ext-s-tb1-binary-fixtures" in by_id and tb1.is_dir() and harbor.is_dir()
    # a COPY of hundreds of links or binaries stays within what one exec argument may hold (128 KiB)
    assert external.chain(["a", "b"]) == ["a && b"]
    assert [len(c) for c in external.chain(["x" * 40_000] * 3)] == [40_000] * 3


def test_a_huge_binary_is_quarantined_not_loaded(tmp_path: Path) -> None:
    root = tmp_path / "s"
    harbor_task(
        root,
        "huge-binary",
        {
            "environment/Dockerfile": "FROM debian:bookworm\nCOPY big.bin /app/\n",
            "environment/big.bin": b"\x00" * (external.MAX_FILE_BYTES + 1),
        },
    )
    many = {
        f"environment/b{i}.bin": bytes([i]) * 4 + os.urandom(external.MAX_FILE_BYTES - 4) for i in range(4)
    }
    harbor_task(
        root, "many-binaries", {"environment/Dockerfile": "FROM debian:bookworm\nCOPY *.bin /app/\n", **many}
    )
    bundles, quarantine = import_suite(root)
    reasons = {q.task: q.reason for q in quarantine}
    assert not bundles
    assert reasons["huge-binary"] == (
        f"COPY source big.bin is {external.MAX_FILE_BYTES + 1} bytes (the limit is {external.MAX_FILE_BYTES})"
    )
    # base64 is what the bundle carries: four 1 MB binaries are over the task's budget
    assert reasons["many-binaries"].startswith(f"the task carries more than {external.MAX_TASK_BYTES} bytes")


@pytest.mark.docker
def test_binary_fixtures_are_byte_identical_and_links_are_links_in_the_container(
    tmp_path: Path, sandbox_image: str
) -> None:
    from bashgym_assets.sandbox import Sandbox
    from bashgym_assets.scenarios.gate import GateLimits, gate_bundle
    from bashgym_assets.scenarios.sandboxing import spec_for_bundle

    harbor, tb1 = binary_tasks(tmp_path / "s")
    expected = {f"/app/{rel}": _sha256(data) for rel, data in BINARY_FIXTURES.items()}
    expected["/app/late.bin"] = _sha256(LATE_BLOB)
    expected["/opt/unpacked/readme.txt"] = _sha256(b"from ADD\n")
    links = {f"/app/{rel}": target for rel, target in FIXTURE_LINKS.items()}
    for folder in (harbor, tb1):
        bundle = external.import_task(folder, "s")
        if folder is tb1:  # COPY . /app/ of the TB1 folder: the same fixtures at the same places
            expected.pop("/opt/unpacked/readme.txt", None)
            expected["/app/late.bin"] = _sha256(LATE_BLOB)
            expected["/app/bundle.tar.gz"] = _sha256(_tarball({"unpacked/readme.txt": b"from ADD\n"}))
        with Sandbox(spec_for_bundle(bundle, sandbox_image)) as box:
            setup = box.setup()
            assert setup.ok, setup.error
            paths = " ".join(sorted(expected))
            sums = box.run_as_root(f"sha256sum {paths}")
            assert sums.exit_code == 0, sums.stderr
            got = {line.split()[1]: line.split()[0] for line in sums.stdout.splitlines()}
            assert got == expected, folder.name
            for path, target in links.items():
                res = box.run_as_root(f"test -L {path} && readlink {path}")
                assert res.stdout.strip() == target, (folder.name, path, res.stdout, res.stderr)
            left = box.run_as_root(f"ls {external.STAGE_DIR} 2>&1; cat /app/fixtures/subdir/plain.txt")
            assert left.stdout.splitlines()[1:] == ["plain text"], left.stdout
            if folder is harbor:  # ADD unpacked its archive, owned as --chown says
                owner = box.run_as_root("stat -c %U /opt/unpacked /opt/unpacked/readme.txt; stat -c %U /opt")
                assert owner.stdout.split() == ["operator", "operator", "root"], owner.stdout
            assert "No such file" in left.stdout.splitlines()[0]
    result = gate_bundle(
        external.import_task(harbor, "s"), sandbox_image, GateLimits(command_timeout_s=60, check_timeout_s=60)
    )
    assert result.admitted, (result.reason, result.detail)
