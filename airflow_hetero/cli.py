"""The ``airflow-hetero`` command: validate and render definitions offline, run the local endpoint.

``validate`` and ``render`` never touch the network. Exit status: 0 when fine, 2 when the
definition (or the file holding it) has problems, printed one per line without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from airflow_hetero.definition.errors import JobDefinitionError

EXIT_INVALID = 2
#: Subcommand groups living in their own modules: (module, function adding the parser).
_PLUGINS = (("airflow_hetero.local.cli", "register"), ("airflow_hetero.demo", "register"))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_INVALID
    try:
        code: int = args.handler(args)
    except JobDefinitionError as err:
        print_problems(getattr(args, "file", None), err)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `airflow-hetero render job.yaml | head`
        sys.stderr.close()
        return 0
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-hetero", description="SageMaker heterogeneous-cluster training for Airflow."
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    validate = sub.add_parser("validate", help="check a job definition (YAML or JSON) offline")
    validate.add_argument("file", type=Path, help="definition file")
    validate.add_argument("--json", action="store_true", help="print problems as JSON")
    validate.set_defaults(handler=_validate)

    render = sub.add_parser("render", help="print the CreateTrainingJob request a definition becomes")
    render.add_argument("file", type=Path, help="definition file")
    render.add_argument("--job-name", help="training job name (default: <base_job_name>-<hash of the file>)")
    render.add_argument(
        "--region", help="AWS region (default: $AWS_DEFAULT_REGION, else us-east-1); only shapes the request"
    )
    render.set_defaults(handler=_render)

    types = sub.add_parser("instance-types", help="list the training instance types botocore knows")
    types.set_defaults(handler=_instance_types)

    for module_name, function in _PLUGINS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:
                raise
            continue
        getattr(module, function)(sub)
    return parser


def print_problems(file: Path | None, err: JobDefinitionError) -> None:
    """One line per problem on stderr, prefixed with the file when there is one."""
    prefix = f"{file}: " if file is not None else ""
    for problem in err.problems:
        where = "" if file is not None and problem.loc == str(file) else f"{problem.loc}: "
        print(f"{prefix}{where}{problem.msg}", file=sys.stderr)


def _validate(args: argparse.Namespace) -> int:
    from airflow_hetero.definition.job import load_job

    try:
        job = load_job(args.file)
    except JobDefinitionError as err:
        if args.json:
            print(json.dumps({"valid": False, "problems": err.errors()}, indent=2))
            return EXIT_INVALID
        raise
    groups = ", ".join(
        f"{g.instance_group_name} ({g.instance_count} x {g.instance_type})" for g in job.instance_groups or []
    )
    cluster = groups or f"{job.instance_count} x {job.instance_type}"
    if args.json:
        print(json.dumps({"valid": True, "problems": []}, indent=2))
    else:
        print(f"{args.file}: valid ({'heterogeneous' if job.is_hetero else 'homogeneous'} cluster: {cluster})")
    return 0


def _render(args: argparse.Namespace) -> int:
    from airflow_hetero.definition import naming
    from airflow_hetero.definition.job import load_job
    from airflow_hetero.definition.request import base_job_name, build_training_request

    job = load_job(args.file)
    region = args.region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    job_name = args.job_name or naming.derived_job_name(base_job_name(job), naming.stable_hash(args.file.read_bytes()))
    request = build_training_request(job, job_name=job_name, region=region)
    print(json.dumps(request, indent=2, sort_keys=True))
    return 0


def _instance_types(args: argparse.Namespace) -> int:
    from airflow_hetero.definition.instance_types import training_instance_types

    for name in sorted(training_instance_types()):
        print(name)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
