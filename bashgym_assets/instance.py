"""The Dagster instance folder: DAGSTER_HOME under the data folder, with the project's dagster.yaml in it."""

from __future__ import annotations

import os
from pathlib import Path

from bashgym_assets.config import PROJECT_ROOT, Settings, get_settings


def ensure_dagster_home(settings: Settings | None = None) -> Path:
    """Create ``$BASHGYM_HOME/dagster`` with a link to the project's ``dagster.yaml``; export DAGSTER_HOME.

    A link (not a copy) so an edit of the project's dagster.yaml takes effect without re-running set-up.
    """
    settings = settings or get_settings()
    settings.ensure_dirs()
    home = settings.dagster_home
    target = home / "dagster.yaml"
    source = PROJECT_ROOT / "dagster.yaml"
    if target.is_symlink() and Path(os.readlink(target)) != source:
        target.unlink()
    if not target.exists() and not target.is_symlink():
        target.symlink_to(source)
    os.environ["DAGSTER_HOME"] = str(home)
    return home
