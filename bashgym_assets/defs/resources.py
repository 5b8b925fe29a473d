"""Resources: where the data folder is, so tests can point a whole run at a temporary folder."""


import os

import dagster as dg

from bashgym_assets.config import Settings
from bashgym_assets.lake import Lake


class BashgymHome(dg.ConfigurableResource):
    """The data folder every asset reads and writes (``BASHGYM_HOME`` unless configured)."""

    home: str | None = None

    def settings(self) -> Settings:
        if self.home:
            return Settings(home=os.path.abspath(self.home))
        return Settings()

    def lake(self) -> Lake:
        settings = self.settings()
        settings.ensure_dirs()
        return Lake(settings)


def default_resources() -> dict[str, object]:
    return {"bashgym": BashgymHome()}
