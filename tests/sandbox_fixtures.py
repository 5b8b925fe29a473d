"""What several Docker test modules share: the smallest real scenario and a container probe."""

from __future__ import annotations

import docker

# Count the lines of a 3-line file into ~/count.txt: one setup, one check, a two-command reference.
COUNT_LINES: dict = {
    "task": "Write the number of lines of ~/data/words.txt into ~/count.txt (just the number).",
    "category": "text",
    "difficulty": 1,
    "setup": [
        "mkdir -p /home/operator/data",
        "printf 'a\\nb\\nc\\n' > /home/operator/data/words.txt",
        "chown -R operator:operator /home/operator/data",
    ],
    "check": "[ \"$(tr -d ' \\n' < /home/operator/count.txt)\" = 3 ]",
    "reference": ["cd ~/data", "wc -l < words.txt > ~/count.txt"],
}


def container_exists(container_id: str) -> bool:
    try:
        docker.from_env().api.inspect_container(container_id)
        return True
    except docker.errors.NotFound:
        return False


def check_exit_after(bundle, image: str, commands, expect_user: str | None = None) -> int | None:
    """The check's exit code after ``commands`` ran, one per turn, in a fresh sandbox of ``bundle`` (its setup
    first): how the factory's tests show a wrong answer failing a check (None: the check timed out)."""
    from bashgym_assets.sandbox import Sandbox
    from bashgym_assets.scenarios.sandboxing import spec_for_bundle

    with Sandbox(spec_for_bundle(bundle, image)) as box:
        done = box.setup()
        assert done.ok, (bundle.id, done)
        session = box.session()
        if expect_user is not None:
            assert session.run("whoami").stdout == f"{expect_user}\n", bundle.id
        for command in commands:
            session.run(command)
        return box.run_check(bundle.check).exit_code


def check_exits_after(
    cases, image: str, parallel: int = 4, expect_user: str | None = None
) -> list[int | None]:
    """``check_exit_after`` of each ``(bundle, commands)`` case, ``parallel`` sandboxes at once (each mostly waits
    on the engine), in the cases' order."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(lambda c: check_exit_after(c[0], image, c[1], expect_user), cases))
