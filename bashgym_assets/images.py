"""Build the sandbox base image offline and keep the Docker engine running.

The image is built with no container registry: ``debootstrap --variant=minbase`` of Debian bookworm with the
packages listed in ``sandbox_images/base/packages.txt``, configured by ``sandbox_images/base/configure-rootfs.sh``
inside the root filesystem, then ``docker import``-ed. Its tag is a hash of the recipe's content, so a changed
recipe builds a new image and an unchanged one is found and reused in about a second.

Run as ``python -m bashgym_assets.images [--force] [--print-tag]`` (or ``sandbox_images/build.sh``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bashgym_assets.config import PROJECT_ROOT, get_settings

RECIPE_DIR = PROJECT_ROOT / "sandbox_images" / "base"
IMAGE_REPOSITORY = "bashgym-sandbox"
SUITE = "bookworm"
# Bump when the build procedure itself (not the recipe files) changes in a way that changes the image.
BUILD_PROCEDURE_VERSION = "1"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


class DockerUnavailable(RuntimeError):
    """The Docker engine is not installed, not running, or cannot be started here."""


class ImageBuildError(RuntimeError):
    """The sandbox image could not be built."""


# ---- the Docker engine -----------------------------------------------------------------------------------
def docker_engine_running() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True
    )
    return probe.returncode == 0 and bool(probe.stdout.strip())


def ensure_docker_engine(timeout_s: float = 60.0, log_path: Path = Path("/var/log/dockerd.log")) -> str:
    """Return the engine's version, starting ``dockerd`` in the background if it is installed but not running.

    Raises ``DockerUnavailable`` with an actionable message when the engine cannot be reached or started.
    """
    if docker_engine_running():
        return _server_version()
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise DockerUnavailable(
            "The Docker engine is not installed. On Debian run (as root): apt-get update && "
            "apt-get install -y docker.io   (or run `make setup`, which does it)."
        )
    if os.geteuid() != 0:
        raise DockerUnavailable(
            "The Docker engine is installed but not running, and only root can start it. Start it with "
            "`sudo dockerd &` or `sudo systemctl start docker`, or add yourself to the docker group."
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        subprocess.Popen(
            [dockerd], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if docker_engine_running():
            return _server_version()
        time.sleep(0.5)
    tail = ""
    if log_path.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
    raise DockerUnavailable(
        f"Started dockerd but it did not answer within {timeout_s:.0f} s. Last lines of {log_path}:\n{tail}"
    )


def _server_version() -> str:
    out = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    return out.stdout.strip()


# ---- the recipe and its tag ---------------------------------------------------------------------------
def recipe_packages(recipe_dir: Path = RECIPE_DIR) -> list[str]:
    packages = []
    for line in (recipe_dir / "packages.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            packages.append(line)
    return packages


def recipe_hash(recipe_dir: Path = RECIPE_DIR) -> str:
    """A short hash of everything that determines the image: the recipe files and the build procedure."""
    digest = hashlib.sha256(f"procedure={BUILD_PROCEDURE_VERSION};suite={SUITE}\n".encode())
    for path in sorted(p for p in recipe_dir.rglob("*") if p.is_file()):
        digest.update(path.relative_to(recipe_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def sandbox_image_tag(recipe_dir: Path = RECIPE_DIR) -> str:
    """The image name the sandbox uses: ``BASHGYM_SANDBOX_IMAGE`` or ``bashgym-sandbox:<recipe hash>``."""
    override = get_settings().sandbox_image_override
    if override:
        return override
    return f"{IMAGE_REPOSITORY}:{recipe_hash(recipe_dir)}"


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def debian_mirror() -> str:
    """The Debian mirror apt already uses here (the only registry reachable on the build machines)."""
    configured = get_settings().debian_mirror
    if configured:
        return configured
    candidates = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]
    for path in candidates:
        if not path.exists():
            continue
        text = path.read_text(errors="replace")
        for uri in re.findall(r"^URIs:\s*(\S+)", text, flags=re.M) + re.findall(
            r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)", text, flags=re.M
        ):
            if "security" not in uri:
                return uri.rstrip("/")
    return DEFAULT_MIRROR


# ---- the build --------------------------------------------------------------------------------------------
def _run(cmd: list[str], **kwargs) -> None:
    print("+", " ".join(cmd[:6]) + (" ..." if len(cmd) > 6 else ""), flush=True)
    done = subprocess.run(cmd, **kwargs)
    if done.returncode != 0:
        raise ImageBuildError(f"command failed ({done.returncode}): {' '.join(cmd)}")


def build_sandbox_image(
    force: bool = False, recipe_dir: Path = RECIPE_DIR, cache_dir: Path | None = None
) -> str:
    """Build the image if its recipe-derived tag is not in the engine yet; return the tag. Idempotent."""
    ensure_docker_engine()
    tag = f"{IMAGE_REPOSITORY}:{recipe_hash(recipe_dir)}"
    if image_exists(tag) and not force:
        print(f"sandbox image {tag} is up to date", flush=True)
        return tag
    if os.geteuid() != 0:
        raise ImageBuildError("building the sandbox image needs root (debootstrap and chroot)")
    if shutil.which("debootstrap") is None:
        raise ImageBuildError(
            "debootstrap is not installed: apt-get install -y debootstrap (or `make setup`)"
        )
    packages = recipe_packages(recipe_dir)
    mirror = debian_mirror()
    started = time.monotonic()
    print(f"building {tag} from {mirror} ({len(packages)} packages; about a minute) ...", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bashgym-rootfs-", dir="/var/tmp"))
    rootfs = work / "rootfs"
    try:
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}"]
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)
            cmd.append(f"--cache-dir={cache_dir}")
        _run([*cmd, SUITE, str(rootfs), mirror], stdout=subprocess.DEVNULL)
        shutil.copy(recipe_dir / "configure-rootfs.sh", rootfs / "configure-rootfs.sh")
        _run(["chroot", str(rootfs), "/bin/sh", "/configure-rootfs.sh"])
        (rootfs / "configure-rootfs.sh").unlink()
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE
        )
        assert tar.stdout is not None  # stdout=PIPE
        imported = subprocess.run(
            [
                "docker",
                "import",
                "--change",
                "ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--change",
                'CMD ["/bin/bash"]',
                "--change",
                f"LABEL org.bashgym.recipe={recipe_hash(recipe_dir)} org.bashgym.kind=sandbox-base",
                "-",
                tag,
            ],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
        )
        tar.stdout.close()
        tar.wait()
        if tar.returncode != 0 or imported.returncode != 0:
            raise ImageBuildError(f"docker import failed: {imported.stderr.strip()}")
        _run(["docker", "tag", tag, f"{IMAGE_REPOSITORY}:latest"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"built {tag} in {time.monotonic() - started:.0f} s", flush=True)
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build (or reuse) the bashgym sandbox base image offline.")
    parser.add_argument("--force", action="store_true", help="rebuild even if the recipe's tag exists")
    parser.add_argument("--print-tag", action="store_true", help="print the tag the recipe gives and exit")
    args = parser.parse_args(argv)
    if args.print_tag:
        print(sandbox_image_tag())
        return 0
    try:
        from bashgym_assets.config import get_settings

        build_sandbox_image(force=args.force, cache_dir=get_settings().home / "cache" / "debootstrap")
    except (DockerUnavailable, ImageBuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
