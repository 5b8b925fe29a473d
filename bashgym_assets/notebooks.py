"""Run the project's notebooks top to bottom against a data folder, the way CI does (``make notebooks``).

Each notebook in ``notebooks/`` is executed with nbclient in a fresh IPython kernel of THIS interpreter (the
virtual environment's; a ``python3`` kernel spec the user installed elsewhere is never picked up), with
``BASHGYM_HOME`` set to the data folder, and saved with its outputs under ``$BASHGYM_HOME/artifacts/notebooks/``.
Any cell that raises, or runs past the per-cell timeout, fails the run (exit status 1) after every notebook has
had its turn, so one report names every broken notebook. Nothing needs the network.

    python -m bashgym_assets.notebooks                      # every notebook, the configured data folder
    python -m bashgym_assets.notebooks notebooks/traces.ipynb --home /tmp/lake --timeout 120
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import NATIVE_KERNEL_NAME, KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from pydantic import BaseModel
from traitlets import default

from bashgym_assets.config import PROJECT_ROOT, get_settings

NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
CELL_TIMEOUT_S = 600


class NotebookRun(BaseModel):
    notebook: str
    executed: str
    ok: bool
    seconds: float
    cells: int
    error: str = ""


class _ThisInterpreterKernel(KernelManager):
    """A kernel manager that sees no kernel spec folder at all: only ipykernel's built-in ``python3`` spec,
    which starts ``sys.executable -m ipykernel_launcher`` (the project's .venv when run from it)."""

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self) -> KernelSpecManager:
        return KernelSpecManager(kernel_dirs=[], ensure_native_kernel=True)


def notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def kernel_env(home: Path) -> dict[str, str]:
    """The kernel's environment: ours, with the data folder set and matplotlib left to the kernel's inline
    backend (an inherited ``MPLBACKEND=Agg`` would drop every figure from the saved outputs)."""
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["BASHGYM_HOME"] = str(home)
    return env


def run_notebook(path: Path, out_dir: Path, home: Path, timeout: int = CELL_TIMEOUT_S) -> NotebookRun:
    """Execute one notebook in its own folder; the executed copy (outputs and any error) goes to ``out_dir``."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=NATIVE_KERNEL_NAME,
        allow_errors=False,
        kernel_manager_class=_ThisInterpreterKernel,
        resources={"metadata": {"path": str(path.parent)}},
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = out_dir / path.name
    start = time.monotonic()
    error = ""
    try:
        # transport_encryption="auto": CurveZMQ between client and kernel, since ipykernel's spec supports it
        client.execute(env=kernel_env(home), transport_encryption="auto")
    except CellExecutionError as exc:  # its text is the failing cell and the traceback
        error = str(exc)
    except Exception as exc:  # a cell timeout, a dead kernel, a kernel that never started
        error = f"{type(exc).__name__}: {exc}"
    finally:
        nbformat.write(nb, executed)
    code_cells = sum(1 for c in nb.cells if c.cell_type == "code")
    return NotebookRun(
        notebook=str(path),
        executed=str(executed),
        ok=not error,
        seconds=round(time.monotonic() - start, 2),
        cells=code_cells,
        error=error,
    )


def run_all(
    paths: Sequence[Path], home: Path, out_dir: Path | None = None, timeout: int = CELL_TIMEOUT_S
) -> list[NotebookRun]:
    out_dir = out_dir or home / "artifacts" / "notebooks"
    return [run_notebook(p, out_dir, home, timeout) for p in paths]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bashgym_assets.notebooks",
        description="Run the notebooks against a data folder; exit 1 if a cell fails.",
    )
    parser.add_argument("notebooks", nargs="*", type=Path, help=f"default: every notebook in {NOTEBOOKS_DIR}")
    parser.add_argument("--home", type=Path, help="data folder (default: BASHGYM_HOME or .bashgym/)")
    parser.add_argument(
        "--out", type=Path, help="where executed copies go (default: <home>/artifacts/notebooks)"
    )
    parser.add_argument("--timeout", type=int, default=CELL_TIMEOUT_S, help="seconds per cell")
    args = parser.parse_args(argv)
    home = (args.home or get_settings().home).expanduser().resolve()
    paths = [p.resolve() for p in args.notebooks] or notebooks()
    if not paths:
        print(f"no notebook in {NOTEBOOKS_DIR}", file=sys.stderr)
        return 1
    print(f"running {len(paths)} notebook(s) against {home}", flush=True)
    failed = 0
    for path in paths:
        run = run_all([path], home, args.out, args.timeout)[0]
        status = "ok" if run.ok else "FAILED"
        print(
            f"  {status:6} {path.name}: {run.cells} code cells in {run.seconds:.1f}s -> {run.executed}",
            flush=True,
        )
        if not run.ok:
            failed += 1
            print(f"\n{path.name} failed:\n{run.error}\n", file=sys.stderr, flush=True)
    if failed:
        print(f"{failed} of {len(paths)} notebook(s) failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
