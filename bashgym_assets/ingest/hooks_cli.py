"""``python -m bashgym_assets.ingest.hooks_cli install|uninstall|status [--settings PATH]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bashgym_assets.ingest.hook_installer import (
    HookSettingsError,
    default_settings_path,
    hooks_status,
    install_hooks,
    uninstall_hooks,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bashgym hooks", description="Claude Code live-capture hooks.")
    parser.add_argument("action", choices=["install", "uninstall", "status"])
    parser.add_argument(
        "--settings",
        type=Path,
        default=None,
        help=f"Claude Code settings file (default {default_settings_path()})",
    )
    args = parser.parse_args(argv)
    try:
        if args.action == "install":
            status = install_hooks(args.settings)
            print(
                f"installed bashgym capture hooks for {', '.join(status.installed)} in {status.settings_path} "
                f"({status.other_hooks} other hooks kept)"
            )
        elif args.action == "uninstall":
            removed = uninstall_hooks(args.settings)
            print(f"removed {removed} bashgym hook entries from {args.settings or default_settings_path()}")
        else:
            status = hooks_status(args.settings)
            print(status.model_dump_json(indent=2))
            return 0 if not status.missing else 3
    except HookSettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
