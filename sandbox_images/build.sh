#!/usr/bin/env bash
# Builds (or reuses) the sandbox base image offline: debootstrap of Debian bookworm -> docker import.
# The tag is derived from the recipe's content, so an unchanged recipe is reused in about a second.
# Usage: sandbox_images/build.sh [--force] [--print-tag]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${BASHGYM_PYTHON:-$here/../.venv/bin/python}"
[ -x "$py" ] || py=python3
cd "$here/.."
exec "$py" -m bashgym_assets.images "$@"
