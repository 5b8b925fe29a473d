"""How a bundle becomes a sandbox: files, provider program, setup, user and workdir, with scenario labels.

Shared by the gate and the rollouts so a scenario is certified in exactly the container it is later played in.
"""

from __future__ import annotations

import shlex
from typing import Any

from bashgym_assets.scenarios.bundle import ScenarioBundle

LABEL_KEY = "bashgym.scenario"


def provider_path(bundle: ScenarioBundle) -> str | None:
    return f"/usr/local/bin/{bundle.provider.name}" if bundle.provider else None


def provider_launcher(program: str) -> str:
    """``/usr/local/bin/<name>`` for a provider given by path: it runs the program the setup wrote, by path."""
    return f'#!/bin/sh\nexec {shlex.quote(program)} "$@"\n'


def provider_ready_command(program: str) -> str:
    """Runs after the bundle's setup: a provider program the setup did not write fails the setup, saying so
    (instead of the operator meeting 'not found'); one it wrote without the executable bit gets it."""
    q = shlex.quote(program)
    return (
        f'[ -f {q} ] || {{ echo "provider program {program} was not written by the setup" >&2; exit 1; }}; '
        f"[ -x {q} ] || chmod a+rx {q}"
    )


def spec_kwargs(
    bundle: ScenarioBundle,
    image: str | None,
    command_timeout_s: float = 30.0,
    episode_timeout_s: float = 300.0,
    purpose: str = "gate",
) -> dict[str, Any]:
    """Keyword arguments for ``SandboxSpec``: the provider is installed as an executable before setup (its text,
    or a launcher for the program the setup writes, checked after the setup)."""
    files = dict(bundle.files)
    setup: list[str] = []
    after: list[str] = []
    path = provider_path(bundle)
    program = bundle.provider_program
    if bundle.provider and path:
        if program is None:
            files[path] = bundle.provider.script
            setup.append(f"chmod 0755 {path}")
        else:
            if program != path:  # the setup writes /usr/local/bin/<name> itself otherwise
                files[path] = provider_launcher(program)
                setup.append(f"chmod 0755 {path}")
            after.append(provider_ready_command(program))
    setup.extend(bundle.setup)
    setup.extend(after)
    return {
        "image": image,
        "files": files,
        "setup": setup,
        "user": bundle.user,
        "workdir": bundle.start_dir,
        "command_timeout_s": command_timeout_s,
        "episode_timeout_s": episode_timeout_s,
        "labels": {LABEL_KEY: bundle.id, "bashgym.purpose": purpose},
    }


def spec_for_bundle(bundle: ScenarioBundle, image: str | None, **kwargs: Any) -> Any:
    from bashgym_assets.sandbox import SandboxSpec

    return SandboxSpec(**spec_kwargs(bundle, image, **kwargs))
