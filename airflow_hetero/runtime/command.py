"""``python -m airflow_hetero.runtime world|torchrun-args|torchrun``: a launch on one group's hosts.

From a copy of the folder (``python -m runtime ...``) the same commands run without the package.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any

from .dispatch import log_marker
from .errors import HostLookupError, RuntimeConfigError
from .marker import MARKER_PREFIX
from .world import DEFAULT_MASTER_PORT, DISTRIBUTION_GROUP_ENV, distribution_world


def _parser() -> Any:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m airflow_hetero.runtime", description="The distribution on one instance group."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("world", "print the group's world as JSON"),
        ("torchrun-args", "print this host's torchrun options (exit 3 outside the group)"),
        ("torchrun", "run torchrun on the group's hosts; the others run the script with plain Python"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--group", help=f"the distribution group (default: ${DISTRIBUTION_GROUP_ENV})")
        sub.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT)
        if name != "world":
            sub.add_argument("--nproc-per-node", type=int, default=1)
        if name == "torchrun":
            sub.add_argument("--others", choices=("run", "skip"), default="run", help="what other hosts do")
            sub.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...]")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``world``, ``torchrun-args`` or ``torchrun`` (which replaces this process with the launch)."""
    args = _parser().parse_args(argv)
    try:
        world = distribution_world(args.group, master_port=args.master_port)
    except (RuntimeConfigError, HostLookupError) as exc:
        print(f"airflow_hetero.runtime: {exc}", file=sys.stderr)
        return 2
    if args.command == "world":
        print(json.dumps(world.as_dict()))
        return 0
    if args.command == "torchrun-args":
        if world.node_rank is None:
            print(f"airflow_hetero.runtime: {world.current_host} is not in group {world.group}", file=sys.stderr)
            return 3
        print(shlex.join(world.torchrun_args(args.nproc_per_node)))
        return 0
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        print("airflow_hetero.runtime: torchrun needs a script: ... torchrun --group G -- train.py", file=sys.stderr)
        return 2
    log_marker()
    if world.node_rank is not None:
        command = ["torchrun", *world.torchrun_args(args.nproc_per_node), *script]
    elif args.others == "run":
        command = [sys.executable, *script]
    else:
        return 0
    print(f"{MARKER_PREFIX} launch: {shlex.join(command)}", flush=True)
    os.execvp(command[0], command)
    return 127  # not reached: exec replaced the process
