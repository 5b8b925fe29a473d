"""The trainer image for the docker GPU executor: ``sandbox_images/trainer/Dockerfile`` FROM the sandbox base.

Tagged by a hash of the recipe and the base image tag, so a changed recipe or base gives a new tag and an
unchanged one is reused. ``BASHGYM_TRAINER_IMAGE`` overrides the tag (a prebuilt image on a GPU host).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from bashgym_assets import images

RECIPE_DIR = images.PROJECT_ROOT / "sandbox_images" / "trainer"
REPOSITORY = "bashgym-trainer"


def trainer_image_tag(base_tag: str | None = None, recipe_dir: Path = RECIPE_DIR) -> str:
    override = os.environ.get("BASHGYM_TRAINER_IMAGE")
    if override:
        return override
    base_tag = base_tag or images.sandbox_image_tag()
    digest = hashlib.sha256(base_tag.encode())
    for path in sorted(p for p in recipe_dir.rglob("*") if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def build_trainer_image(force: bool = False) -> str:
    """Build (or reuse) the trainer image; builds the sandbox base first when it is missing."""
    tag = trainer_image_tag()
    if os.environ.get("BASHGYM_TRAINER_IMAGE"):
        return tag
    if images.image_exists(tag) and not force:
        return tag
    base = images.build_sandbox_image()
    done = subprocess.run(
        [
            "docker",
            "build",
            "-q",
            "--build-arg",
            f"BASE_IMAGE={base}",
            "--label",
            "org.bashgym.kind=trainer",
            "-t",
            tag,
            str(RECIPE_DIR),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise images.ImageBuildError(f"trainer image build failed: {done.stderr.strip()[-2000:]}")
    return tag


if __name__ == "__main__":
    print(build_trainer_image())
