"""Failed (and clean) evaluation episodes as the runner records them, for the failure-detail classifier.

No failing episode of a trained student is kept in the repository or the shared fixtures (the recorded reports show
clean ones only), so these are written from what the students were seen doing (issue 38: ``cd ~/dir1`` and
``exit`` with ``dir1`` right there in ``/app``, the same ``ls -l | wc -l`` five times, ``bash -l answer.txt`` for
"write the output to answer.txt") and from the factory's task families. ``recorded`` builds the row exactly as
``runner._close`` does: the orientation and task of ``rollout.transcript``, each reply parsed by ``parse_reply``, the
shell's observations with their ``[exit code: N]``, ``metrics.classify`` for the failure class.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from bashgym_assets.evaluation.metrics import COMMAND, EvalEpisode, classify, reply_kinds
from bashgym_assets.rollout.transcript import Message, initial_messages, parse_reply
from bashgym_assets.scenarios.bundle import ScenarioBundle

_CODE = re.compile(r"\[exit code: (\d+)\]\s*$")


def bundle(
    id: str,
    task: str,
    reference: list[str],
    *,
    user: str = "operator",
    workdir: str | None = None,
    files: dict[str, str] | None = None,
    setup: list[str] | None = None,
    category: str = "files",
) -> ScenarioBundle:
    return ScenarioBundle(
        id=id,
        task=task,
        category=category,
        difficulty=2,
        user=user,  # type: ignore[arg-type]
        workdir=workdir,
        files=files or {},
        setup=setup or [],
        check="true",
        reference=reference,
    )


def recorded(
    b: ScenarioBundle,
    replies: list[tuple[str, str | None]],
    *,
    verified: bool = False,
    end_reason: str = "",
    setup_error: str = "",
    model: str = "candidate",
) -> EvalEpisode:
    """One episode of ``b``: each reply with the observation the shell answered (None: nothing ran, ``exit``)."""
    messages = initial_messages(b)
    for reply, observation in replies:
        messages.append(Message(role="assistant", content=reply.strip()))
        if observation is not None:
            messages.append(Message(role="user", content=observation))
    lines = [parse_reply(r) for r, _ in replies]
    codes = [int(m.group(1)) if o and (m := _CODE.search(o)) else None for _, o in replies]
    terminated = bool(lines) and lines[-1].is_exit
    end_reason = end_reason or ("exit" if terminated else "turn_cap")
    operated, failure = classify(
        lines,
        terminated=terminated,
        verified=verified,
        end_reason=end_reason,
        setup_failed=bool(setup_error),
        exit_codes=codes,
    )
    kinds = reply_kinds(lines, codes)
    return EvalEpisode(
        eval_id="eval-recorded",
        model=model,
        model_ref="adapters/sft-smollm2-135m",
        scenario_id=b.id,
        category=b.category,
        difficulty=b.difficulty,
        operated=operated,
        terminated=terminated,
        verified=verified,
        clean=failure == "" and operated and terminated and verified,
        n_turns=len(replies),
        n_commands=sum(k == COMMAND for k in kinds),
        reply_kinds=",".join(kinds),
        end_reason="setup_failed" if setup_error else end_reason,
        failure_class=failure,
        error=setup_error,
        messages=messages if not setup_error else initial_messages(b),
    )


class Case(BaseModel):
    """A recorded episode, its scenario and the detail class it must get (and tags it must carry besides)."""

    name: str
    scenario: ScenarioBundle
    episode: EvalEpisode
    detail: str
    also: list[str] = []


# ---- scenarios --------------------------------------------------------------------------------------------------
COUNT_DIR1 = bundle(
    "count-dir1",
    "Count the entries in dir1 and write the number to answer.txt.",
    ["ls dir1 | wc -l > answer.txt"],
    user="root",
    workdir="/app",
    setup=["mkdir -p /app/dir1 && touch /app/dir1/a /app/dir1/b /app/dir1/c"],
)
LINES_TO_ANSWER = bundle(
    "lines-to-answer",
    "Count the lines of data.csv and write the output to answer.txt.",
    ["wc -l < data.csv > answer.txt"],
    user="root",
    workdir="/app",
    files={"/app/data.csv": "id,name\n1,ada\n2,bob\n"},
)
COMPRESS_LOGS = bundle(
    "logs-compress-old",
    "In /home/operator/logs/daily, compress with gzip every .log file that was last modified more than 3 days "
    "ago (each file becomes NAME.log.gz, originals removed).",
    ["find /home/operator/logs/daily -name '*.log' -mtime +3 -exec gzip {} +"],
    setup=["mkdir -p /home/operator/logs/daily", "touch -d '5 days ago' /home/operator/logs/daily/a.log"],
    category="logs",
)
ERRORS_503 = bundle(
    "grep-status-503",
    "Write the lines of /app/access.log that contain 'status=503' to /app/errors.txt.",
    ["grep 'status=503' /app/access.log > /app/errors.txt"],
    user="root",
    workdir="/app",
    files={"/app/access.log": "GET / status=200\nGET /a status=503\nGET /b status=500\n"},
    category="text",
)
CHMOD_750 = bundle(
    "chmod-deploy",
    "Set the permissions of /home/operator/deploy.sh to 750.",
    ["chmod 750 /home/operator/deploy.sh"],
    files={"/home/operator/deploy.sh": "#!/bin/sh\necho deploy\n"},
    category="permissions",
)
TOP_3 = bundle(
    "top-scores",
    "Write the 3 highest scores of scores.txt (one per line, highest first) to top.txt.",
    ["sort -rn scores.txt | head -n 3 > top.txt"],
    files={"/home/operator/scores.txt": "10\n42\n7\n99\n13\n"},
    category="text",
)
COUNT_LINES = bundle(
    "count-lines",
    "Write the number of lines in /app/data.csv to /app/count.txt.",
    ["wc -l < /app/data.csv > /app/count.txt"],
    user="root",
    workdir="/app",
    files={"/app/data.csv": "id,name\n1,ada\n2,bob\n"},
)
SORT_NUMBERS = bundle(
    "sort-numbers",
    "Sort the numbers in /app/numbers.txt in ascending numeric order and write them to /app/sorted.txt.",
    ["sort -n /app/numbers.txt > /app/sorted.txt"],
    user="root",
    workdir="/app",
    files={"/app/numbers.txt": "10\n9\n100\n"},
    category="text",
)
CUT_NAMES = bundle(
    "cut-names",
    "users.csv holds comma-separated fields: write the second field of every line to names.txt.",
    ["cut -d, -f2 users.csv > names.txt"],
    files={"/home/operator/users.csv": "1,ada,admin\n2,bob,dev\n"},
    category="text",
)
UNIQUE_NAMES = bundle(
    "unique-names",
    "Write the distinct names of /app/names.txt, sorted, to /app/unique.txt.",
    ["sort -u /app/names.txt > /app/unique.txt"],
    user="root",
    workdir="/app",
    files={"/app/names.txt": "bob\nada\nbob\n"},
    category="text",
)
CLEAN_TMP = bundle(
    "clean-tmp",
    "Delete every .tmp file under /home/operator/cache; keep everything else.",
    ["find /home/operator/cache -name '*.tmp' -delete"],
    setup=[
        "mkdir -p /home/operator/cache/x && touch /home/operator/cache/a.tmp /home/operator/cache/x/b.tmp"
    ],
)
FIX_CONFIG = bundle(
    "config-port",
    "In /etc/app/config.ini, change the port setting from 8080 to 9090.",
    ["sed -i 's/^port=8080$/port=9090/' /etc/app/config.ini"],
    user="root",
    workdir="/root",
    files={"/etc/app/config.ini": "[server]\nhost=0.0.0.0\nport=8080\n"},
    category="config",
)
APPEND_DONE = bundle(
    "append-done",
    "Append the line 'done' to /app/status.txt.",
    ["echo done >> /app/status.txt"],
    user="root",
    workdir="/app",
    files={"/app/status.txt": "started\n"},
)

LS_DIR1 = "a\nb\nc\n[exit code: 0]"


def cases() -> list[Case]:
    """Every detail class three times (from different scenarios where the class allows), then the negatives."""
    c: list[Case] = []

    def add(
        name: str, scenario: ScenarioBundle, episode: EvalEpisode, detail: str, also: tuple[str, ...] = ()
    ) -> None:
        c.append(Case(name=name, scenario=scenario, episode=episode, detail=detail, also=list(also)))

    # -- wrong_path: ignored the working directory, or a path that is nowhere -----------------------------------
    add(
        "cd-home-dir1-then-exit",
        COUNT_DIR1,
        recorded(
            COUNT_DIR1,
            [
                ("cd ~/dir1", "bash: cd: /root/dir1: No such file or directory\n[exit code: 1]"),
                ("exit", None),
            ],
        ),
        "wrong_path",
        ("premature_exit",),
    )
    add(
        "find-in-var-log",
        COMPRESS_LOGS,
        recorded(
            COMPRESS_LOGS,
            [
                (
                    "find /var/log/daily -name '*.log' -mtime +3 -exec gzip {} +",
                    "find: '/var/log/daily': No such file or directory\n[exit code: 1]",
                ),
                ("exit", None),
            ],
        ),
        "wrong_path",
    )
    add(
        "cd-home-then-write-there",
        LINES_TO_ANSWER,
        recorded(
            LINES_TO_ANSWER,
            [
                ("cd ~", "[exit code: 0]"),
                (
                    "wc -l < data.csv > answer.txt",
                    "bash: data.csv: No such file or directory\n[exit code: 1]",
                ),
                ("exit", None),
            ],
        ),
        "wrong_path",
    )
    # -- wrong_output_file: the work, but not into the file asked for --------------------------------------------
    add(
        "bash-l-answer-txt",
        LINES_TO_ANSWER,
        recorded(
            LINES_TO_ANSWER,
            [
                ("bash -l answer.txt", "bash: answer.txt: No such file or directory\n[exit code: 127]"),
                ("exit", None),
            ],
        ),
        "wrong_output_file",
        ("value_not_copied",),
    )
    add(
        "wrote-output-txt",
        COUNT_LINES,
        recorded(
            COUNT_LINES, [("wc -l < /app/data.csv > /app/output.txt", "[exit code: 0]"), ("exit", None)]
        ),
        "wrong_output_file",
        ("value_not_copied",),
    )
    add(
        "printed-instead-of-writing",
        UNIQUE_NAMES,
        recorded(UNIQUE_NAMES, [("sort -u /app/names.txt", "ada\nbob\n[exit code: 0]"), ("exit", None)]),
        "wrong_output_file",
        ("premature_exit", "value_not_copied"),
    )
    # -- premature_exit: only looked, then left ------------------------------------------------------------------
    add(
        "ls-then-exit",
        COUNT_DIR1,
        recorded(
            COUNT_DIR1,
            [
                (
                    "ls -la",
                    "total 12\ndrwxr-xr-x 3 root root 4096 .\ndrwxr-xr-x 1 root root 4096 ..\n"
                    "drwxr-xr-x 2 root root 4096 dir1\n[exit code: 0]",
                ),
                ("exit", None),
            ],
        ),
        "premature_exit",
    )
    add("exit-at-once", CHMOD_750, recorded(CHMOD_750, [("exit", None)]), "premature_exit")
    add(
        "find-without-delete",
        CLEAN_TMP,
        recorded(
            CLEAN_TMP,
            [
                (
                    "find /home/operator/cache -name '*.tmp'",
                    "/home/operator/cache/a.tmp\n/home/operator/cache/x/b.tmp\n[exit code: 0]",
                ),
                ("exit", None),
            ],
        ),
        "premature_exit",
    )
    # -- value_not_copied: a value of the instruction that no command used ----------------------------------------
    add(
        "grep-500-not-503",
        ERRORS_503,
        recorded(
            ERRORS_503,
            [("grep 'status=500' /app/access.log > /app/errors.txt", "[exit code: 0]"), ("exit", None)],
        ),
        "value_not_copied",
    )
    add(
        "chmod-755-not-750",
        CHMOD_750,
        recorded(CHMOD_750, [("chmod 755 /home/operator/deploy.sh", "[exit code: 0]"), ("exit", None)]),
        "value_not_copied",
    )
    add(
        "head-5-not-3",
        TOP_3,
        recorded(TOP_3, [("sort -rn scores.txt | head -n 5 > top.txt", "[exit code: 0]"), ("exit", None)]),
        "value_not_copied",
    )
    # -- wrong_flag: the reference's command with other flags ----------------------------------------------------
    add(
        "wc-w-not-l",
        COUNT_LINES,
        recorded(COUNT_LINES, [("wc -w < /app/data.csv > /app/count.txt", "[exit code: 0]"), ("exit", None)]),
        "wrong_flag",
    )
    add(
        "sort-without-n",
        SORT_NUMBERS,
        recorded(
            SORT_NUMBERS, [("sort /app/numbers.txt > /app/sorted.txt", "[exit code: 0]"), ("exit", None)]
        ),
        "wrong_flag",
    )
    add(
        "cut-without-delimiter",
        CUT_NAMES,
        recorded(CUT_NAMES, [("cut -f2 users.csv > names.txt", "[exit code: 0]"), ("exit", None)]),
        "wrong_flag",
    )
    # -- repeated_command ---------------------------------------------------------------------------------------
    add(
        "ls-wc-five-times",
        COUNT_DIR1,
        recorded(COUNT_DIR1, [("ls -l | wc -l", "2\n[exit code: 0]")] * 5 + [("exit", None)]),
        "repeated_command",
        ("premature_exit",),
    )
    add(
        "cat-config-again-and-again",
        FIX_CONFIG,
        recorded(
            FIX_CONFIG,
            [
                ("cat /etc/app/config.ini", "[server]\nhost=0.0.0.0\nport=8080\n[exit code: 0]"),
                ("grep port /etc/app/config.ini", "port=8080\n[exit code: 0]"),
                ("cat /etc/app/config.ini", "[server]\nhost=0.0.0.0\nport=8080\n[exit code: 0]"),
                (
                    "sed 's/8080/9090/' /etc/app/config.ini",
                    "[server]\nhost=0.0.0.0\nport=9090\n[exit code: 0]",
                ),
                ("cat  /etc/app/config.ini", "[server]\nhost=0.0.0.0\nport=8080\n[exit code: 0]"),
                ("exit", None),
            ],
        ),
        "repeated_command",
        ("premature_exit",),
    )
    add(
        "pwd-until-the-turn-cap",
        CLEAN_TMP,
        recorded(CLEAN_TMP, [("pwd", "/home/operator\n[exit code: 0]")] * 10),
        "repeated_command",
    )
    # -- prose, prompt_echo -------------------------------------------------------------------------------------
    add(
        "a-sentence",
        COUNT_DIR1,
        recorded(COUNT_DIR1, [("I will count the files in dir1 and save the number to answer.txt.", "")] * 3),
        "prose",
    )
    add(
        "a-code-fence",
        COUNT_LINES,
        recorded(
            COUNT_LINES,
            [("```bash\nwc -l /app/data.csv > /app/count.txt\n```", "[exit code: 0]"), ("exit", None)],
        ),
        "prose",
    )
    add(
        "a-numbered-list",
        SORT_NUMBERS,
        recorded(SORT_NUMBERS, [("1. sort the file\n2. write it to sorted.txt", ""), ("exit", None)]),
        "prose",
    )
    add(
        "typed-the-banner",
        COUNT_DIR1,
        recorded(
            COUNT_DIR1,
            [
                (
                    "root@sandbox:/app# ls dir1",
                    "bash: root@sandbox:/app#: command not found\n[exit code: 127]",
                ),
                ("exit", None),
            ],
        ),
        "prompt_echo",
    )
    add(
        "typed-the-operator-banner",
        CHMOD_750,
        recorded(
            CHMOD_750,
            [
                (
                    "operator@sandbox:/home/operator$ chmod 750 deploy.sh",
                    "bash: operator@sandbox:/home/operator$: command not found\n[exit code: 127]",
                ),
                ("exit", None),
            ],
        ),
        "prompt_echo",
    )
    add(
        "a-dollar-prompt",
        SORT_NUMBERS,
        recorded(
            SORT_NUMBERS,
            [
                (
                    "$ sort -n /app/numbers.txt > /app/sorted.txt",
                    "bash: $: command not found\n[exit code: 127]",
                ),
                ("exit", None),
            ],
        ),
        "prompt_echo",
    )
    # -- forgot_exit: right result, never typed exit ---------------------------------------------------------------
    add(
        "right-but-no-exit",
        APPEND_DONE,
        recorded(
            APPEND_DONE,
            [
                ("echo done >> /app/status.txt", "[exit code: 0]"),
                ("cat /app/status.txt", "started\ndone\n[exit code: 0]"),
            ],
            verified=True,
        ),
        "forgot_exit",
    )
    add(
        "sorted-then-looked-until-the-cap",
        SORT_NUMBERS,
        recorded(
            SORT_NUMBERS,
            [
                ("sort -n /app/numbers.txt > /app/sorted.txt", "[exit code: 0]"),
                ("cat /app/sorted.txt", "9\n10\n100\n[exit code: 0]"),
                ("head -n 1 /app/sorted.txt", "9\n[exit code: 0]"),
            ],
            verified=True,
        ),
        "forgot_exit",
    )
    add(
        "chmod-then-the-time-cap",
        CHMOD_750,
        recorded(
            CHMOD_750,
            [("chmod 750 /home/operator/deploy.sh", "[exit code: 0]")],
            verified=True,
            end_reason="time_cap",
        ),
        "forgot_exit",
    )
    # -- other: a wrong result none of the rules explains -----------------------------------------------------------
    add(
        "overwrote-instead-of-appending",
        APPEND_DONE,
        recorded(APPEND_DONE, [("echo done > /app/status.txt", "[exit code: 0]"), ("exit", None)]),
        "other",
    )
    add(
        "wc-with-the-file-name",
        COUNT_LINES,
        recorded(COUNT_LINES, [("wc -l /app/data.csv > /app/count.txt", "[exit code: 0]"), ("exit", None)]),
        "other",
    )
    add(
        "cut-then-sorted",
        CUT_NAMES,
        recorded(CUT_NAMES, [("cut -d, -f2 users.csv | sort > names.txt", "[exit code: 0]"), ("exit", None)]),
        "other",
    )
    # -- negatives: clean, infrastructure and operator failures get no detail class ---------------------------------
    add(
        "clean",
        COUNT_DIR1,
        recorded(
            COUNT_DIR1, [("ls dir1 | wc -l > answer.txt", "[exit code: 0]"), ("exit", None)], verified=True
        ),
        "",
    )
    add(
        "setup-failed",
        COUNT_DIR1,
        recorded(COUNT_DIR1, [], setup_error="docker: container start timed out"),
        "",
    )
    add(
        "sandbox-error",
        COUNT_LINES,
        recorded(COUNT_LINES, [("wc -l /app/data.csv", "[exit code: 0]")], end_reason="sandbox_error"),
        "",
    )
    add(
        "operator-error",
        COUNT_LINES,
        recorded(COUNT_LINES, [], end_reason="operator_error"),
        "",
    )
    return c
