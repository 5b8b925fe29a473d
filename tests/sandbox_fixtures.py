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
