"""A task's starting state, the same for both layouts: its compose file's single service (user, working folder,
build), its Dockerfile translated, or its bare image, and the check that a build context with files has a
Dockerfile to bring them in."""

from __future__ import annotations

import posixpath
import shlex
from pathlib import Path
from typing import Any

import yaml

from bashgym_assets.scenarios.external.common import (
    ENV_PROFILE,
    Budget,
    Unimportable,
    one_line,
    read_text,
    walk_files,
)
from bashgym_assets.scenarios.external.dockerfile import (
    Environment,
    base_image_problem,
    owner_spec,
    sandbox_user,
    translate_dockerfile,
)

_ENV_DOCS = frozenset({"README.md", "README", "readme.md", ".gitkeep", ".dockerignore"})


# ---- compose ------------------------------------------------------------------------------------------------
def compose_service(path: Path) -> dict[str, Any]:
    """The single service of a compose file; Unimportable for several services (or none)."""
    try:
        data = yaml.safe_load(read_text(path, path.name, 256 << 10))
    except yaml.YAMLError as exc:
        raise Unimportable(f"{path.name} is not valid YAML: {one_line(exc)}") from exc
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict) or not services:
        raise Unimportable(f"{path.name} has no services")
    if len(services) > 1:
        raise Unimportable(
            f"docker-compose with {len(services)} services ({', '.join(sorted(map(str, services)))}):"
            " the sandbox runs one container"
        )
    service = next(iter(services.values())) or {}
    if not isinstance(service, dict):
        raise Unimportable(f"{path.name}: the service is not a mapping")
    return service


def compose_dockerfile(path: Path) -> tuple[Path | None, Path | None, str | None]:
    """(build context, Dockerfile) of the single service, or its image; Unimportable for several services."""
    service = compose_service(path)
    build = service.get("build")
    if build is None:
        image = str(service.get("image") or "")
        return None, None, image or None
    if isinstance(build, str):
        return path.parent / build, path.parent / build / "Dockerfile", None
    if isinstance(build, dict):
        ctx = path.parent / str(build.get("context") or ".")
        return ctx, ctx / str(build.get("dockerfile") or "Dockerfile"), None
    raise Unimportable(f"{path.name}: build is neither a path nor a mapping")


def _context_files(context: Path, exclude_top: frozenset[str]) -> list[str]:
    """Files of a build context that would have gone into an image (not the harness's, docs or dotfiles)."""
    if not context.is_dir():
        return []
    out = []
    for f in walk_files(context, "the build context", links=True):
        rel = f.relative_to(context).as_posix()
        if (
            rel.split("/")[0] in exclude_top
            or f.name in _ENV_DOCS
            or any(part.startswith(".") for part in rel.split("/"))
        ):
            continue
        out.append(rel)
    return sorted(out)


def build_environment(
    context: Path,
    dockerfile: Path,
    compose: Path,
    image: str,
    budget: Budget,
    exclude_top: frozenset[str],
    extra_env: dict[str, str] | None = None,
    workdir: Any = None,
    where: str = "the task folder",
    image_hint: str = "an image in docker-compose.yaml",
) -> Environment:
    compose_path = next((p for p in (compose, compose.with_suffix(".yml")) if p.is_file()), None)
    service: dict[str, Any] = {}
    if compose_path is not None:
        service = compose_service(compose_path)
        built_context, built, compose_image = compose_dockerfile(compose_path)
        if built is not None and built_context is not None:
            if not built_context.resolve().is_relative_to(context.resolve()):
                raise Unimportable(f"{compose_path.name} builds from outside the task folder")
            if not built.is_file():  # docker compose would fail to build: not an empty environment
                raise Unimportable(
                    f"{compose_path.name} builds from {built.relative_to(context).as_posix()}, "
                    "which the task folder lacks"
                )
            dockerfile, context = built, built_context
        elif compose_image and "${" not in compose_image:
            image = compose_image
    if dockerfile.is_file():
        text = read_text(dockerfile, dockerfile.name, 256 << 10)
        envx = translate_dockerfile(text, context, budget, exclude_top)
    else:
        if not image and (extras := _context_files(context, exclude_top)):
            # Both harnesses build the container from these with a Dockerfile: without one they never reach it,
            # and the task would fail for want of them (the gate would blame its reference), not for the model.
            listing = ", ".join(extras[:3]) + (f" and {len(extras) - 3} more" if len(extras) > 3 else "")
            raise Unimportable(
                f"{where} holds files ({listing}) but no Dockerfile (nor {image_hint}) says how "
                "they build the starting state"
            )
        envx = Environment()
        if image:
            problem, envx.python_base = base_image_problem(image)
            if problem:
                raise Unimportable(problem)
            if envx.python_base:
                envx.setup.append(
                    "command -v python >/dev/null || ln -s /usr/bin/python3 /usr/local/bin/python"
                )
    # docker compose runs the service as its `user`, in its `working_dir`, whatever the image says
    compose_user = service.get("user")
    if (
        compose_path is not None
        and isinstance(compose_user, (str, int))
        and str(compose_user).strip()
        and "${" not in str(compose_user)
    ):
        envx.user = sandbox_user(str(compose_user).strip(), envx.accounts, f"{compose_path.name}'s user")
        envx.owner = owner_spec(str(compose_user).strip()) if envx.user != "root" else ""
    if not (isinstance(workdir, str) and workdir.startswith("/")):
        workdir = service.get("working_dir")
    envx.env.update(extra_env or {})
    if isinstance(workdir, str) and workdir.startswith("/"):  # Harbor's [environment] workdir, compose's
        envx.workdir = posixpath.normpath(workdir)
        envx.workdir_set = True
    if envx.env:
        lines = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in envx.env.items())
        envx.files[ENV_PROFILE] = "# ENV of the imported task's Dockerfile\n" + lines
    envx.setup.append(f"mkdir -p {shlex.quote(envx.start_dir)}")
    return envx
