"""How a bundle becomes a sandbox: files, provider program, setup, user and workdir, with scenario labels.

Shared by the gate and the rollouts so a scenario is certified in exactly the container it is later played in.
"""

from __future__ import annotations

from typing import Any

from bashgym_assets.scenarios.bundle import ScenarioBundle

LABEL_KEY = "bashgym.scenario"


def provider_path(bundle: ScenarioBundle) -> str | None:
    return f"/usr/local/bin/{bundle.provider.name}" if bundle.provider else None


def spec_kwargs(bundle: ScenarioBundle, image: str | None, command_timeout_s: float = 30.0,
                episode_timeout_s: float = 300.0, purpose: str = "gate") -> dict[str, Any]:
    """Keyword arguments for ``SandboxSpec``: the provider script is installed as an executable before setup."""
    files = dict(bundle.files)
    setup: list[str] = []
    path = provider_path(bundle)
    if bundle.provider and path:
        files[path] = bundle.provider.script
        setup.append(f"chmod 0755 {path}")
    setup.extend(bundle.setup)
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
