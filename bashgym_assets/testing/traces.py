"""Synthetic but realistic Claude Code sessions: the bundled demo data and the benchmark corpus.

``ClaudeSessionWriter`` writes the documented JSONL layout (2.x by default, 1.0.x with inline sidechains on
request): assistant messages split over several lines sharing ``message.id`` with repeated usage, thinking
blocks, ``tool_use``/``tool_result`` pairs with ``toolUseResult``, ``Exit code N`` failures, subagent files
under ``<sessionId>/subagents/``, and bookkeeping lines. Every writer also counts what it wrote (steps,
failures, prompts) so tests compare the parser against the generator's own tally, not against itself.

``write_sample_traces`` writes the demo set (3 repositories plus one session outside any repo, with test
runs that fail then pass, commits, a >5 minute gap, a ``cd`` elsewhere and planted secrets/PII for the
redaction stage). ``generate_corpus`` writes a large random corpus for ``benchmarks/bench_ingest.py``.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

NAMESPACE = uuid.UUID("6f1c1f7e-2b7a-4f7e-9a53-0d6f4c1b2a10")
MODEL = "claude-sonnet-4-5-20250929"


def project_folder(cwd: str) -> str:
    """Claude Code's folder name for a working directory: every non-alphanumeric character becomes ``-``."""
    return "".join(ch if ch.isalnum() else "-" for ch in cwd)


@dataclass
class Tally:
    steps: int = 0
    failed: int = 0
    bash: int = 0
    user_prompts: int = 0
    sidechain_steps: int = 0
    exit_codes: list[int] = field(default_factory=list)


class ClaudeSessionWriter:
    """Writes one Claude Code session file (and its subagent files) line by line."""

    def __init__(
        self,
        root: Path,
        cwd: str,
        start: datetime,
        name: str,
        version: str = "2.1.3",
        branch: str = "main",
        inline_sidechains: bool = False,
    ):
        self.session_id = str(uuid.uuid5(NAMESPACE, name))
        self.cwd = cwd
        self.clock = start
        self.version = version
        self.branch = branch
        self.inline = inline_sidechains
        self.folder = root / project_folder(cwd)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"{self.session_id}.jsonl"
        self._fh = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        self._out = self._fh
        self._parent: str | None = None
        self._n = 0
        self._side: tuple[str, Any] | None = None
        self.tally = Tally()

    # ---- plumbing ---------------------------------------------------------------------------------------
    def _id(self, kind: str) -> str:
        self._n += 1
        return str(uuid.uuid5(NAMESPACE, f"{self.session_id}/{kind}/{self._n}"))

    def tick(self, seconds: float) -> None:
        self.clock += timedelta(seconds=seconds)

    def _line(self, kind: str, **fields: Any) -> None:
        uid = self._id("line")
        record = {
            "parentUuid": self._parent,
            "isSidechain": self._side is not None,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": self.branch,
            "type": kind,
            **fields,
            "uuid": uid,
            "timestamp": self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
        if self._side is not None:
            record["agentId"] = self._side[0]
        self._out.write(orjson.dumps(record) + b"\n")
        self._parent = uid
        self.tick(0.4)

    def bookkeeping(self) -> None:
        self._out.write(
            orjson.dumps(
                {
                    "type": "file-history-snapshot",
                    "messageId": self._id("snap"),
                    "snapshot": {"trackedFileBackups": {}, "timestamp": self.clock.isoformat()},
                    "isSnapshotUpdate": False,
                }
            )
            + b"\n"
        )

    # ---- conversation -----------------------------------------------------------------------------------
    def prompt(self, text: str, **flags: Any) -> None:
        self._line("user", message={"role": "user", "content": text}, **flags)
        if not flags and self._side is None:
            self.tally.user_prompts += 1

    def slash(self, name: str, args: str = "") -> None:
        self.prompt(
            f"<command-message>{name} is running…</command-message>\n<command-name>/{name}</command-name>"
            + (f"\n<command-args>{args}</command-args>" if args else "")
        )
        self.tally.user_prompts -= 1
        self._line(
            "user",
            message={
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": f"Run the {name} workflow on this repository and report findings.",
                    }
                ],
            },
            isMeta=True,
        )

    def say(self, text: str, thinking: str | None = None) -> None:
        msg_id = f"msg_{self._id('msg').replace('-', '')[:24]}"
        usage = {
            "input_tokens": 12,
            "cache_creation_input_tokens": 310,
            "cache_read_input_tokens": 14_200,
            "output_tokens": 40 + len(text) // 4,
            "service_tier": "standard",
        }
        if thinking:
            self._assistant(
                msg_id, [{"type": "thinking", "thinking": thinking, "signature": "c2lnbmF0dXJl"}], usage
            )
        self._assistant(msg_id, [{"type": "text", "text": text}], usage)

    def _assistant(self, msg_id: str, content: list[dict[str, Any]], usage: dict[str, Any]) -> None:
        self._line(
            "assistant",
            requestId=f"req_{msg_id[4:]}",
            message={
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": content,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        )

    def tool(
        self,
        name: str,
        tool_input: dict[str, Any],
        output: str,
        exit_code: int = 0,
        seconds: float = 2.0,
        note: str | None = None,
        tool_error: bool = False,
    ) -> None:
        """One tool call and its result. Bash failures carry ``Exit code N``; ``tool_error`` is a non-Bash error."""
        msg_id = f"msg_{self._id('msg').replace('-', '')[:24]}"
        tool_id = f"toolu_{self._id('tool').replace('-', '')[:24]}"
        usage = {
            "input_tokens": 8,
            "cache_creation_input_tokens": 120,
            "cache_read_input_tokens": 15_000,
            "output_tokens": 90,
            "service_tier": "standard",
        }
        if note:
            self._assistant(msg_id, [{"type": "text", "text": note}], usage)
        self._assistant(
            msg_id, [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}], usage
        )
        self.tick(seconds)
        failed = exit_code != 0 or tool_error
        if name == "Bash" and exit_code != 0:
            content = f"Exit code {exit_code}\n{output}"
            result: Any = f"Error: {content}"
        elif tool_error:
            content = f"<tool_use_error>{output}</tool_use_error>"
            result = f"Error: {output}"
        elif name == "Bash":
            content = output
            result = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
        else:
            content = output
            result = {
                "type": "text",
                "file": {"filePath": tool_input.get("file_path", ""), "content": output},
            }
        block: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        if failed:
            block["is_error"] = True
        elif name == "Bash":
            block["is_error"] = False
        self._line("user", message={"role": "user", "content": [block]}, toolUseResult=result)
        self.tally.steps += 1
        self.tally.failed += failed
        self.tally.bash += name == "Bash"
        self.tally.sidechain_steps += self._side is not None
        if name == "Bash":
            self.tally.exit_codes.append(exit_code if exit_code else (1 if tool_error else 0))

    def bash(
        self, command: str, output: str, exit_code: int = 0, seconds: float = 2.0, note: str | None = None
    ) -> None:
        self.tool(
            "Bash",
            {"command": command, "description": note or command[:40]},
            output,
            exit_code,
            seconds,
            note,
        )

    # ---- subagents --------------------------------------------------------------------------------------
    def start_subagent(self, task: str) -> None:
        agent = self._id("agent").split("-")[0]
        self.tool_task_id = f"toolu_{self._id('task').replace('-', '')[:24]}"
        self._assistant(
            f"msg_{self._id('msg').replace('-', '')[:24]}",
            [
                {
                    "type": "tool_use",
                    "id": self.tool_task_id,
                    "name": "Task",
                    "input": {"description": task[:40], "prompt": task, "subagent_type": "general-purpose"},
                }
            ],
            {"input_tokens": 5, "output_tokens": 60},
        )
        self._main_parent = self._parent
        if not self.inline:
            sub = self.folder / self.session_id / "subagents"
            sub.mkdir(parents=True, exist_ok=True)
            self._out = open(sub / f"agent-{agent}.jsonl", "wb")  # noqa: SIM115 - closed by end_subagent()
        self._side = (agent, task)
        self._parent = None
        self.prompt(task)

    def end_subagent(self, summary: str) -> None:
        self.say(summary)
        if self._out is not self._fh:
            self._out.close()
        self._out = self._fh
        self._side = None
        self._parent = self._main_parent
        self._line(
            "user",
            message={
                "role": "user",
                "content": [
                    {
                        "tool_use_id": self.tool_task_id,
                        "type": "tool_result",
                        "content": [{"type": "text", "text": summary}],
                    }
                ],
            },
            toolUseResult={"content": [{"type": "text", "text": summary}], "totalDurationMs": 9000},
        )
        self.tally.steps += 1

    def close(self) -> Path:
        self._line(
            "system", subtype="stop_hook_summary", content="", level="info"
        ) if self.version >= "2" else None
        self._fh.close()
        return self.path


# ---- the bundled demo set ---------------------------------------------------------------------------------
DEMO_ROOT = "/home/demo/projects"
T0 = datetime(2026, 10, 5, 8, 30, tzinfo=UTC)

PYTEST_FAIL = """============================= test session starts ==============================
collected 3 items

tests/test_health.py .F.                                                 [100%]

=================================== FAILURES ===================================
_______________________________ test_health_body _______________________________
    def test_health_body(client):
        resp = client.get("/health")
>       assert resp.get_json() == {"status": "ok"}
E       AssertionError: assert None == {'status': 'ok'}
tests/test_health.py:14: AssertionError
=========================== short test summary info ============================
FAILED tests/test_health.py::test_health_body - AssertionError: assert None == {'status': 'ok'}
========================= 1 failed, 2 passed in 0.41s ========================="""


def _webshop_health(root: Path) -> ClaudeSessionWriter:
    w = ClaudeSessionWriter(root, f"{DEMO_ROOT}/webshop", T0, "webshop-health")
    w.bookkeeping()
    w.prompt('Add a /health endpoint to the Flask app that returns {"status": "ok"}, with a test.')
    w.say("I'll look at the app layout first.", thinking="Need to find where routes are registered.")
    w.bash(
        "ls -la && ls webshop",
        "total 32\ndrwxr-xr-x 5 demo demo 4096 Oct  5 08:29 .\n-rw-r--r-- 1 demo demo  412 "
        "Oct  5 08:29 pyproject.toml\ndrwxr-xr-x 2 demo demo 4096 Oct  5 08:29 tests\ndrwxr-xr-x 3 demo demo 4096 Oct "
        " 5 08:29 webshop\n__init__.py\napp.py\nmodels.py\nviews.py",
    )
    w.tool(
        "Read",
        {"file_path": f"{DEMO_ROOT}/webshop/webshop/app.py"},
        "     1→from flask import Flask\n     2→\n     3→def create_app():\n     4→    app = Flask(__name__)\n"
        "     5→    from . import views\n     6→    app.register_blueprint(views.bp)\n     7→    return app\n",
    )
    w.tool(
        "Edit",
        {
            "file_path": f"{DEMO_ROOT}/webshop/webshop/views.py",
            "old_string": 'bp = Blueprint("shop", __name__)',
            "new_string": 'bp = Blueprint("shop", __name__)\n\n@bp.get("/health")\ndef health():\n    return "ok"',
        },
        "The file webshop/views.py has been updated.",
    )
    w.tool(
        "Write",
        {"file_path": f"{DEMO_ROOT}/webshop/tests/test_health.py", "content": "def test_health(client): ..."},
        f"File created successfully at: {DEMO_ROOT}/webshop/tests/test_health.py",
    )
    w.bash("python -m pytest -q tests/test_health.py", PYTEST_FAIL, exit_code=1, seconds=3.1)
    w.say("The endpoint returns plain text; the test expects JSON. Fixing the view.")
    w.tool(
        "Edit",
        {
            "file_path": f"{DEMO_ROOT}/webshop/webshop/views.py",
            "old_string": '    return "ok"',
            "new_string": '    return {"status": "ok"}',
        },
        "The file webshop/views.py has been updated.",
    )
    w.bash(
        "python -m pytest -q tests/test_health.py",
        "...                                                      [100%]\n3 passed in 0.38s",
        seconds=2.9,
    )
    w.bash(
        'git add webshop/views.py tests/test_health.py && git commit -m "Add /health endpoint with tests"',
        "[main 4f2a9c1] Add /health endpoint with tests\n 2 files changed, 21 insertions(+)\n create mode 100644 "
        "tests/test_health.py",
    )
    w.say('Added `/health` returning `{"status": "ok"}` with three tests; committed as 4f2a9c1.')
    return w


def _webshop_db(root: Path) -> ClaudeSessionWriter:
    w = ClaudeSessionWriter(root, f"{DEMO_ROOT}/webshop", T0 + timedelta(hours=3), "webshop-db")
    w.prompt("The deploy script can't reach the database. Can you find out why?")
    w.bash(
        "cat .env",
        "FLASK_ENV=production\nDATABASE_URL=postgres://shop:S3cretPassw0rd!@db.internal:5432/shop\n"
        "AWS_ACCESS_KEY_ID=AKIAQ3EGRTM5VQZ7XK2P\nAWS_SECRET_ACCESS_KEY=u8Vn2zQm4L0pXr7TgS1yWc9JhEaDk3FbNo6Ki5Ht\n"
        "ADMIN_EMAIL=maria.lopez@example.com\n",
    )
    w.bash(
        "psql \"postgres://shop:S3cretPassw0rd!@db.internal:5432/shop\" -c 'select 1'",
        'psql: error: could not translate host name "db.internal" to address: Name or service not known',
        exit_code=2,
    )
    w.bash("getent hosts db.internal", "", exit_code=2)
    w.say("`db.internal` does not resolve from this machine; the DSN points at a host only the VPN knows.")
    w.tick(11 * 60)  # the user went away: a gap of more than 5 minutes
    w.prompt("ok, use the local postgres on localhost instead and re-run the tests")
    w.tool(
        "Edit",
        {"file_path": f"{DEMO_ROOT}/webshop/.env", "old_string": "db.internal", "new_string": "localhost"},
        "The file .env has been updated.",
    )
    w.bash("pg_isready -h localhost", "localhost:5432 - accepting connections")
    w.bash(
        "python -m pytest -q",
        "........................                                  [100%]\n24 passed in 2.71s",
        seconds=5,
    )
    return w


def _webshop_bump(root: Path) -> ClaudeSessionWriter:
    w = ClaudeSessionWriter(
        root,
        f"{DEMO_ROOT}/webshop",
        T0 + timedelta(days=1),
        "webshop-bump",
        version="1.0.98",
        inline_sidechains=True,
    )
    w.prompt("Bump Flask to 3.1 and make sure nothing breaks.")
    w.bash(
        "pip install 'flask==3.1.*'",
        "Collecting flask==3.1.*\n  Using cached flask-3.1.2-py3-none-any.whl\n"
        "Successfully installed flask-3.1.2 werkzeug-3.1.3",
        seconds=6,
    )
    w.start_subagent("Search the code base for uses of APIs removed in Flask 3.1 and list them.")
    w.tool(
        "Grep",
        {"pattern": "before_first_request|json_encoder", "path": f"{DEMO_ROOT}/webshop"},
        "webshop/app.py:12:    app.json_encoder = ShopJSONEncoder",
    )
    w.tool(
        "Read",
        {"file_path": f"{DEMO_ROOT}/webshop/webshop/app.py"},
        "    12→    app.json_encoder = ShopJSONEncoder",
    )
    w.end_subagent("One use of the removed `app.json_encoder` in webshop/app.py:12.")
    w.bash(
        "python -m pytest -q -x",
        "E   AttributeError: 'Flask' object has no attribute 'json_encoder'\n"
        "!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!\n1 failed, 3 passed in 0.9s",
        exit_code=1,
        seconds=3,
    )
    w.prompt("[Request interrupted by user]")
    w.tally.user_prompts -= 1
    w.prompt("Revert the bump for now, we'll do it next sprint.")
    w.bash(
        "pip install 'flask==3.0.3' && python -m pytest -q",
        "Successfully installed flask-3.0.3\n24 passed in 2.64s",
        seconds=8,
    )
    return w


BACKUP_SH = """#!/usr/bin/env bash
set -euo pipefail
dest=${BACKUP_DIR:-/var/backups/www}
mkdir -p "$dest"
tar -czf "$dest/www-$(date +%F).tar.gz" -C /var/www .
find "$dest" -name 'www-*.tar.gz' -mtime +14 -delete
"""


def _infra_backup(root: Path) -> ClaudeSessionWriter:
    w = ClaudeSessionWriter(root, f"{DEMO_ROOT}/infra-scripts", T0 + timedelta(days=2), "infra-backup")
    w.prompt(
        "Write a backup script that tars /var/www into /var/backups/www and deletes archives older than 14 days."
    )
    w.tool(
        "Write",
        {"file_path": f"{DEMO_ROOT}/infra-scripts/backup.sh", "content": BACKUP_SH},
        f"File created successfully at: {DEMO_ROOT}/infra-scripts/backup.sh",
    )
    w.bash("chmod +x backup.sh && bash -n backup.sh", "")
    w.bash("shellcheck backup.sh", "/bin/bash: line 1: shellcheck: command not found", exit_code=127)
    w.bash("BACKUP_DIR=/tmp/bk ./backup.sh && ls /tmp/bk", "www-2026-10-07.tar.gz")
    w.bash(
        "git add backup.sh && git commit -m 'Add www backup script with 14-day rotation'",
        "[main 91be03d] Add www backup script with 14-day rotation\n 1 file changed, 6 insertions(+)",
    )
    return w


def _infra_release(root: Path) -> ClaudeSessionWriter:
    w = ClaudeSessionWriter(
        root, f"{DEMO_ROOT}/infra-scripts", T0 + timedelta(days=2, hours=4), "infra-release"
    )
    w.prompt(
        "Check whether the last release of infra-scripts was published on GitHub, and who made the last commits."
    )
    w.bash(
        'curl -s -H "Authorization: token ghp_R4nd0mT0k3nF0rD3m0Purp0s3sOnly12345" '
        "https://api.github.com/repos/demo/infra-scripts/releases/latest",
        '{\n  "tag_name": "v0.4.0",\n  "published_at": "2026-09-30T16:02:11Z",\n  "draft": false\n}',
    )
    w.bash(
        "git log -3 --format='%h %an <%ae> %s'",
        "91be03d Dana Whitfield <dana.whitfield@example.com> Add www backup script with 14-day rotation\n"
        "77c01aa Dana Whitfield <dana.whitfield@example.com> Pin terraform provider\n"
        "5d2e8f0 Sam Okafor <sam.okafor@example.org> Initial import",
    )
    w.say("v0.4.0 is published. Let me compare with the webshop repo's tags too.")
    w.bash("cd ../webshop && git tag --sort=-creatordate | head -3", "v2.3.1\nv2.3.0\nv2.2.9")
    w.cwd = f"{DEMO_ROOT}/webshop"  # Claude Code keeps the shell's new directory for the following lines
    w.bash("git describe --tags --exact-match", "fatal: no tag exactly matches '4f2a9c1'", exit_code=128)
    return w


CSV_FAIL = """F...........
=================================== FAILURES ===================================
__________________________ test_quoted_comma_in_field __________________________
>       assert rows[1]["name"] == "Smith, Jane"
E       AssertionError: assert '"Smith' == 'Smith, Jane'
tests/test_parser.py:41: AssertionError
1 failed, 11 passed in 0.22s"""


def _datapipe_csv(root: Path) -> ClaudeSessionWriter:
    w = ClaudeSessionWriter(root, f"{DEMO_ROOT}/datapipe", T0 + timedelta(days=3), "datapipe-csv")
    w.prompt("test_parser.py is failing on quoted commas, please fix the CSV parser")
    w.bash("python -m pytest -q tests/test_parser.py", CSV_FAIL, exit_code=1)
    w.tool(
        "Read",
        {"file_path": f"{DEMO_ROOT}/datapipe/datapipe/parser.py"},
        '    18→def split_row(line):\n    19→    return line.rstrip("\\n").split(",")',
    )
    w.tool(
        "Edit",
        {
            "file_path": f"{DEMO_ROOT}/datapipe/datapipe/parser.py",
            "old_string": '    return line.rstrip("\\n").split(",")',
            "new_string": "    return next(csv.reader([line]))",
        },
        "The file datapipe/parser.py has been updated.",
    )
    w.bash("python -m pytest -q tests/test_parser.py", "............\n12 passed in 0.19s")
    w.start_subagent("Find other places in datapipe/ that split CSV lines by hand.")
    w.tool(
        "Grep",
        {"pattern": 'split\\(","\\)', "path": f"{DEMO_ROOT}/datapipe"},
        'datapipe/loader.py:57:        cols = header.split(",")',
    )
    w.end_subagent("datapipe/loader.py:57 splits the header by hand; same bug for quoted headers.")
    w.tool(
        "Edit",
        {
            "file_path": f"{DEMO_ROOT}/datapipe/datapipe/loader.py",
            "old_string": 'header.split(",")',
            "new_string": "next(csv.reader([header]))",
        },
        "The file datapipe/loader.py has been updated.",
    )
    w.bash("python -m pytest -q", "..............................\n30 passed in 0.61s")
    w.bash(
        "git commit -am 'Parse quoted CSV fields with the csv module'",
        "[main c0ffee1] Parse quoted CSV fields with the csv module\n 2 files changed, 3 insertions(+), 2 deletions(-)",
    )
    return w


def _datapipe_types(root: Path) -> ClaudeSessionWriter:
    w = ClaudeSessionWriter(root, f"{DEMO_ROOT}/datapipe", T0 + timedelta(days=4), "datapipe-types")
    w.slash("review", "datapipe/loader.py")
    w.bash("python -m ruff check datapipe", "All checks passed!")
    w.prompt(
        "This session is being continued from a previous conversation that ran out of context. Summary: the "
        "user asked for a review of datapipe/loader.py; ruff passes.",
        isCompactSummary=True,
    )
    w.prompt("now add type hints to loader.py and make mypy pass")
    w.tool(
        "Edit",
        {
            "file_path": f"{DEMO_ROOT}/datapipe/datapipe/loader.py",
            "old_string": "def load(path):",
            "new_string": "def load(path: str) -> list[dict[str, str]]:",
        },
        "The file datapipe/loader.py has been updated.",
    )
    w.bash(
        "mypy datapipe/loader.py",
        "datapipe/loader.py:61: error: Incompatible return value type (got "
        '"list[list[str]]", expected "list[dict[str, str]]")  [return-value]\nFound 1 error in 1 file',
        exit_code=1,
    )
    w.tool(
        "Edit",
        {
            "file_path": f"{DEMO_ROOT}/datapipe/datapipe/loader.py",
            "old_string": "return rows",
            "new_string": "return [dict(zip(cols, r, strict=True)) for r in rows]",
        },
        "String not found in file.",
        tool_error=True,
    )
    w.tool("Read", {"file_path": f"{DEMO_ROOT}/datapipe/datapipe/loader.py"}, "    61→    return out_rows")
    w.tool(
        "Edit",
        {
            "file_path": f"{DEMO_ROOT}/datapipe/datapipe/loader.py",
            "old_string": "return out_rows",
            "new_string": "return [dict(zip(cols, r, strict=True)) for r in out_rows]",
        },
        "The file datapipe/loader.py has been updated.",
    )
    w.bash(
        "mypy datapipe/loader.py && python -m pytest -q",
        "Success: no issues found in 1 source file\n..............................\n30 passed in 0.58s",
    )
    return w


def _no_repo(root: Path) -> ClaudeSessionWriter:
    w = ClaudeSessionWriter(root, "/home/demo", T0 + timedelta(days=4, hours=6), "home-port")
    w.prompt("what is listening on port 8080?")
    w.bash(
        "ss -ltnp 'sport = :8080'",
        "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
        'LISTEN 0      128    127.0.0.1:8080     0.0.0.0:*     users:(("python3",pid=48211,fd=3))',
    )
    w.bash("ps -o pid,cmd -p 48211", "    PID CMD\n  48211 python3 -m http.server 8080 --bind 127.0.0.1")
    return w


SAMPLE_SESSIONS = [
    _webshop_health,
    _webshop_db,
    _webshop_bump,
    _infra_backup,
    _infra_release,
    _datapipe_csv,
    _datapipe_types,
    _no_repo,
]


def write_sample_traces(dest: Path) -> dict[str, Tally]:
    """Write the demo sessions under ``dest`` (a ``~/.claude/projects``-like tree); returns tallies by path."""
    tallies = {}
    for script in SAMPLE_SESSIONS:
        writer = script(dest)
        path = writer.close()
        tallies[str(path.relative_to(dest))] = writer.tally
    return tallies


# ---- the benchmark corpus ---------------------------------------------------------------------------------
_WORDS = [
    "config",
    "build",
    "deploy",
    "cache",
    "index",
    "parser",
    "worker",
    "router",
    "schema",
    "client",
    "server",
    "model",
    "view",
    "test",
    "fixture",
    "session",
    "token",
    "queue",
    "retry",
    "batch",
    "export",
    "import",
    "report",
    "metric",
    "log",
    "trace",
]


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def _output(rng: random.Random) -> str:
    lines = rng.choice((2, 5, 12, 30, 80, 200))
    return "\n".join(
        f"{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py:{rng.randint(1, 400)}: {_text(rng, 8)}"
        for _ in range(lines)
    )


def generate_corpus(dest: Path, target_bytes: int, seed: int = 7, repos: int = 12) -> dict[str, Any]:
    """Random realistic sessions until ``target_bytes`` are written; returns totals for checking a parse."""
    rng = random.Random(seed)
    total = {"files": 0, "bytes": 0, "steps": 0, "failed": 0, "subagent_files": 0}
    i = 0
    while total["bytes"] < target_bytes:
        repo = f"repo{rng.randrange(repos):02d}"
        w = ClaudeSessionWriter(
            dest, f"/home/bench/src/{repo}", T0 + timedelta(minutes=17 * i), f"bench-{seed}-{i}"
        )
        w.prompt(f"please {_text(rng, 12)}")
        for _ in range(rng.randint(8, 60)):
            if rng.random() < 0.05:
                w.bookkeeping()
            if rng.random() < 0.6:
                failed = rng.random() < 0.2
                w.bash(
                    f"{rng.choice(('pytest -q', 'make', 'grep -rn', 'ls -la', 'git diff'))} {rng.choice(_WORDS)}",
                    _output(rng),
                    exit_code=rng.choice((1, 2, 127)) if failed else 0,
                    note=_text(rng, 10) if rng.random() < 0.3 else None,
                )
            else:
                tool = rng.choice(("Read", "Edit", "Grep", "Write"))
                w.tool(
                    tool,
                    {
                        "file_path": f"/home/bench/src/{repo}/{rng.choice(_WORDS)}.py",
                        "old_string": _text(rng, 6),
                    },
                    _output(rng),
                )
            if rng.random() < 0.03:
                w.start_subagent(_text(rng, 15))
                w.tool("Grep", {"pattern": rng.choice(_WORDS)}, _output(rng))
                w.end_subagent(_text(rng, 20))
                total["subagent_files"] += 1
            if rng.random() < 0.1:
                w.prompt(f"now {_text(rng, 10)}")
        path = w.close()
        total["files"] += 1
        total["steps"] += w.tally.steps
        total["failed"] += w.tally.failed
        size = path.stat().st_size
        sub = path.parent / path.stem / "subagents"
        if sub.is_dir():
            size += sum(p.stat().st_size for p in sub.iterdir())
        total["bytes"] += size
        i += 1
    return total


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write synthetic Claude Code sessions.")
    parser.add_argument("dest", type=Path)
    parser.add_argument(
        "--corpus-mb", type=float, default=0, help="a random corpus of this size instead of the demo set"
    )
    args = parser.parse_args(argv)
    if args.corpus_mb:
        print(generate_corpus(args.dest, int(args.corpus_mb * 1e6)))
    else:
        for path, tally in write_sample_traces(args.dest).items():
            print(path, tally)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
