"""``python -m bashgym_assets.sandbox reap [--label KEY=VALUE] [--dry-run]`` removes (or lists) sandboxes left by
crashed or killed runs;
``python -m bashgym_assets.sandbox try 'command' ...`` runs commands in a fresh sandbox and prints the results."""

from __future__ import annotations

import argparse
import sys

from bashgym_assets.sandbox import Sandbox, SandboxSpec, find_leftovers, reap_leftovers
from bashgym_assets.sandbox.layout import OFFERED_USERS, SESSION_ACCOUNTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bashgym_assets.sandbox", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    reap = sub.add_parser("reap", help="remove sandbox containers whose owning process is gone")
    reap.add_argument("--label", help="only containers that also carry this label (KEY or KEY=VALUE)")
    reap.add_argument(
        "--dry-run", action="store_true", help="list what would be removed, and why; remove nothing"
    )
    trial = sub.add_parser("try", help="run commands, one per argument, in one fresh sandbox session")
    trial.add_argument("commands", nargs="+")
    trial.add_argument(
        "--user",
        choices=list(SESSION_ACCOUNTS),
        default="operator",
        help=f"who the shell runs as: {OFFERED_USERS}",
    )
    trial.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    if args.cmd == "reap":
        if args.dry_run:
            found = find_leftovers(args.label)
            for item in found:
                what = "/".join(x for x in (item.purpose, item.scenario) if x) or "-"
                print(f"{item.container_id[:12]}  {item.state:<8} {item.age_s:>8.0f} s  {what}  ({item.why})")
            print(f"would remove {len(found)} leftover sandbox container(s)")
            return 0
        print(f"removed {reap_leftovers(args.label)} leftover sandbox container(s)")
        return 0
    with Sandbox(
        SandboxSpec(user=args.user, command_timeout_s=args.timeout, labels={"bashgym.purpose": "try"})
    ) as box:
        shell = box.session()
        for command in args.commands:
            r = shell.run(command)
            print(f"$ {command}\n{r.stdout}", end="" if r.stdout.endswith("\n") or not r.stdout else "\n")
            if r.stderr:
                print(r.stderr, end="" if r.stderr.endswith("\n") else "\n", file=sys.stderr)
            print(
                f"[exit {r.exit_code}{' timed out' if r.timed_out else ''}{' terminated' if r.terminated else ''}"
                f" {r.duration_s * 1000:.1f} ms]"
            )
            if shell.exited:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
