"""``airflow-hetero local serve``: run the offline endpoint in the foreground until Ctrl-C.

``register(subparsers)`` adds the ``local`` command group to the package's CLI; each leaf parser
sets ``handler(args) -> int`` (the exit code), the package CLI's convention.
``python -m airflow_hetero.local serve`` runs the same command without the package CLI.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from airflow_hetero.local.batch.options import BatchOptions
from airflow_hetero.local.training.options import RunOptions
from airflow_hetero.local.training.spot import SpotOptions

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: The endpoint's control path of capacity and quotas (stated in ``api.control``; no import at start-up).
CAPACITY_PATH = "/_airflow-hetero/capacity"
#: The control path that interrupts a running spot job (stated in ``api.control``).
INTERRUPT_PATH = "/_airflow-hetero/interrupt"
#: Signals that stop ``local serve`` cleanly (SIGHUP: its terminal went away).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Seconds between two looks of the main thread at whether a stop signal came.
WAKE_UP = 0.1
#: What the package's ``local`` extra brings that the endpoint imports when it starts.
LOCAL_EXTRA_MODULES = ("werkzeug.serving", "moto.moto_server.werkzeug_app", "psutil")
#: Exit status of a command that needs the ``local`` extra where it is not installed.
EXIT_MISSING_EXTRA = 3


def missing_local_extra() -> str | None:
    """One line saying the ``local`` extra is needed and how to get it, or None when it is installed.

    Imports what the endpoint needs (not only finds it: moto without its ``server`` extra lacks flask).
    """
    from airflow_hetero.local.api.server import needs_local_extra

    for name in LOCAL_EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as err:
            return needs_local_extra(err)
    return None


def default_workdir() -> Path:
    """Where ``local serve`` keeps job state unless told otherwise (survives restarts)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "airflow-hetero" / "local"


def _add_serve(subparsers: Any) -> argparse.ArgumentParser:
    serve: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve the offline SageMaker endpoint (training jobs run as local processes)",
        description="Serve SageMaker training-job actions (run as local processes) and, through moto, "
        "S3, CloudWatch Logs, CloudWatch, IAM and STS on one URL, until Ctrl-C.",
    )
    serve.add_argument("--port", type=int, default=0, help="port to listen on (default: a free port)")
    serve.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help=f"job state and host directories (default: {default_workdir()})",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="bind address (default 127.0.0.1; anything else exposes code execution)",
    )
    serve.add_argument("--seed", type=int, default=0, help="seed of the host-to-group shuffle")
    run = RunOptions  # every default below is its option class's, stated there once
    serve.add_argument(
        "--max-hosts",
        type=int,
        default=run.max_hosts,
        help=f"hosts running at once over all jobs (default {run.max_hosts}); a create beyond it answers "
        "ResourceLimitExceeded",
    )
    serve.add_argument(
        "--max-request-bytes",
        type=int,
        default=run.max_request_bytes,
        help=f"largest request body (default {_size(run.max_request_bytes)}; 413 beyond)",
    )
    serve.add_argument(
        "--max-source-bytes",
        type=int,
        default=run.max_source_bytes,
        help=f"bytes a source tarball may extract to (default {_size(run.max_source_bytes)})",
    )
    serve.add_argument(
        "--max-channel-bytes",
        type=int,
        default=run.max_channel_bytes,
        help=f"bytes a channel may bring to one host (default {_size(run.max_channel_bytes)})",
    )
    serve.add_argument(
        "--stop-grace",
        type=float,
        default=run.stop_grace,
        help=f"seconds between SIGTERM and SIGKILL when hosts are stopped (default {run.stop_grace:g})",
    )
    serve.add_argument(
        "--capacity",
        type=_limits("--capacity"),
        action="append",
        default=[],
        metavar="TYPE=N,...",
        help="instances of each type that can run at once over all jobs (default: unlimited); a job beyond "
        "it fails with SageMaker's CapacityError. E.g. ml.p4d.24xlarge=0,ml.g5.12xlarge=2",
    )
    serve.add_argument(
        "--quota",
        type=_limits("--quota"),
        action="append",
        default=[],
        metavar="TYPE=N,...",
        help="the account quota of each type (default: unlimited); a create beyond it answers ResourceLimitExceeded",
    )
    serve.add_argument(
        "--batch-queue",
        type=_batch_queue,
        action="append",
        default=[],
        metavar="NAME=N",
        help="create an AWS Batch service environment NAME-env of N instances and a SAGEMAKER_TRAINING job queue "
        "NAME over it, for service jobs (repeatable; kept in the workdir)",
    )
    serve.add_argument(
        "--batch-requeue-delay",
        type=float,
        default=BatchOptions.requeue_delay,
        help="seconds a service job requeued after a CapacityError waits before it is admitted again "
        f"(default {BatchOptions.requeue_delay:g})",
    )
    _add_spot(serve)
    serve.set_defaults(handler=serve_command)
    return serve


def _size(n: int) -> str:
    """A byte count as the help says it: ``64 MiB``, ``1 GiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _batch_queue(text: str) -> tuple[str, int]:
    """argparse ``type=`` of ``--batch-queue``: ``NAME=N``, N a whole number of instances >= 1."""
    name, sep, count = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not NAME=N (e.g. gpu-queue=4)")
    try:
        size = int(count)
    except ValueError:
        size = 0
    if size < 1:
        raise argparse.ArgumentTypeError(f"{name.strip()}: N must be a whole number of instances >= 1, not '{count}'")
    return name.strip(), size


def _add_spot(serve: argparse.ArgumentParser) -> None:
    spot = serve.add_argument_group(
        "managed spot", f"interruptions of spot jobs (EnableManagedSpotTraining), also on demand: POST {INTERRUPT_PATH}"
    )
    spot.add_argument(
        "--spot-interrupt-after",
        type=float,
        action="append",
        default=[],
        metavar="SECONDS",
        help="interrupt a spot job after this many seconds of training; give it again for the next run "
        "(e.g. --spot-interrupt-after 60 --spot-interrupt-after 30: twice)",
    )
    options = SpotOptions  # every default below is its option class's, stated there once
    spot.add_argument(
        "--spot-interrupt-probability",
        type=float,
        default=options.interrupt_probability,
        help="chance of an interruption at each --spot-interrupt-interval of training "
        f"(default {options.interrupt_probability:g}; seeded by --seed)",
    )
    spot.add_argument(
        "--spot-interrupt-interval",
        type=float,
        default=options.interrupt_interval,
        help=f"seconds (default {options.interrupt_interval:g})",
    )
    spot.add_argument(
        "--spot-restart-delay",
        type=float,
        default=options.restart_delay,
        help=f"seconds an interrupted job waits before it restarts (default {options.restart_delay:g}; "
        "MaxWaitTimeInSeconds counts them)",
    )
    spot.add_argument(
        "--spot-saving",
        type=float,
        default=options.saving,
        help=f"STAND-IN discount of a spot job's BillableTimeInSeconds, not a price (default {options.saving})",
    )
    spot.add_argument(
        "--checkpoint-sync-interval",
        type=float,
        default=options.checkpoint_sync_interval,
        help="seconds between copies of CheckpointConfig.LocalPath to S3Uri "
        f"(default {options.checkpoint_sync_interval:g})",
    )


def _limits(flag: str) -> Any:
    """argparse ``type=`` of ``--capacity`` / ``--quota``: ``TYPE=N,...`` checked, a clear message when bad."""

    def parse(text: str) -> dict[str, int | None]:
        from airflow_hetero.local.training.capacity import parse_limits

        try:
            return parse_limits(text, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag}: ")) from None

    parse.__name__ = flag  # argparse names the type in its own errors
    return parse


def _merged(limits: list[dict[str, int | None]]) -> dict[str, int | None]:
    """Several ``--capacity`` (``--quota``) flags: the later wins for a type named twice."""
    merged: dict[str, int | None] = {}
    for item in limits:
        merged.update(item)
    return merged


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``local`` (with ``local serve``) to an argparse subparsers object."""
    local: argparse.ArgumentParser = subparsers.add_parser(
        "local", help="offline SageMaker endpoint that runs heterogeneous jobs on this machine"
    )
    commands = local.add_subparsers(dest="local_command", metavar="COMMAND", required=True)
    _add_serve(commands)
    return local


def describe_endpoint(endpoint: Any, out: TextIO) -> None:
    """Print the URL and how to point Airflow and boto3 at it."""
    out.write(f"airflow-hetero local endpoint listening on {endpoint.url}\n")
    out.write(f"workdir: {endpoint.workdir}\n\n")
    out.write("Airflow connection (aws_default):\n")
    out.write(f"  export AIRFLOW_CONN_AWS_DEFAULT='{endpoint.airflow_connection_json()}'\n")
    out.write("boto3 / AWS CLI:\n")
    out.write(
        f"  export AWS_ENDPOINT_URL={endpoint.url} AWS_ACCESS_KEY_ID=testing "
        f"AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION={endpoint.region}\n\n"
    )
    state = endpoint.capacity_state()
    for what in ("capacity", "quota"):
        if state[what]:
            limits = ",".join(f"{t}={n}" for t, n in state[what].items())
            out.write(f"{what} (other types unlimited): {limits}\n")
    if state["capacity"] or state["quota"]:
        example = '{"capacity": {"TYPE": N}}'
        out.write(f"change it while serving: curl -d '{example}' {endpoint.url}{CAPACITY_PATH}\n\n")
    describe_batch(endpoint, out)
    out.write(f'interrupt a spot job: curl -d \'{{"TrainingJobName": "NAME"}}\' {endpoint.url}{INTERRUPT_PATH}\n\n')
    out.write("Press Ctrl-C to stop (running jobs are stopped and marked Failed).\n")
    out.flush()


def describe_batch(endpoint: Any, out: TextIO) -> None:
    """Say which AWS Batch queues serve service jobs, or how to make one."""
    if endpoint.batch_setup:
        out.write("AWS Batch service jobs (docs/queue.md):\n")
        for line in endpoint.batch_setup:
            out.write(f"  {line}\n")
        out.write("\n")
        return
    out.write(
        "AWS Batch service jobs (docs/queue.md): no job queue yet; restart with --batch-queue NAME=N, or create one:\n"
        "  aws batch create-service-environment --service-environment-name gpu-env "
        "--service-environment-type SAGEMAKER_TRAINING --capacity-limits maxCapacity=4,capacityUnit=NUM_INSTANCES\n"
        "  aws batch create-job-queue --job-queue-name gpu-queue --priority 1 --job-queue-type SAGEMAKER_TRAINING "
        "--service-environment-order order=1,serviceEnvironment=gpu-env\n\n"
    )


def report_recovery(service: Any, out: TextIO) -> None:
    """Say which jobs and processes a previous endpoint on this workdir left behind (now ended)."""
    recovered = service.recovered
    if recovered:
        out.write(
            f"{len(recovered)} job(s) left running by a previous endpoint were marked Failed: {', '.join(recovered)}\n"
        )
    ended = service.describe_ended()
    if ended:
        out.write(f"killed {len(ended)} process(es) a previous endpoint's hosts left running: {', '.join(ended)}\n")


def _endpoint(args: argparse.Namespace) -> Any:
    from airflow_hetero.local.api.server import LocalEndpoint

    return LocalEndpoint(
        workdir=args.workdir or default_workdir(),
        port=args.port,
        host=args.host,
        seed=args.seed,
        run=RunOptions(
            stop_grace=args.stop_grace,
            max_request_bytes=args.max_request_bytes,
            max_hosts=args.max_hosts,
            max_source_bytes=args.max_source_bytes,
            max_channel_bytes=args.max_channel_bytes,
        ),
        spot=SpotOptions(  # ValueError here when one is out of range
            interrupt_after=tuple(args.spot_interrupt_after),
            interrupt_probability=args.spot_interrupt_probability,
            interrupt_interval=args.spot_interrupt_interval,
            restart_delay=args.spot_restart_delay,
            saving=args.spot_saving,
            checkpoint_sync_interval=args.checkpoint_sync_interval,
        ),
        batch=BatchOptions(requeue_delay=args.batch_requeue_delay),
        capacity=_merged(args.capacity),
        quota=_merged(args.quota),
        batch_queues=dict(args.batch_queue),
    )


def serve_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the endpoint until SIGINT/SIGTERM; return the exit code."""
    out = out or sys.stdout
    problem = missing_local_extra()
    if problem is not None:
        sys.stderr.write(f"airflow-hetero local serve: {problem}\n")
        return EXIT_MISSING_EXTRA
    if args.host not in _LOOPBACK_NAMES:
        sys.stderr.write(
            f"WARNING: binding to {args.host}: anyone who can reach it can run code on this "
            "machine (training jobs run their scripts here).\n"
        )
    try:
        endpoint = _endpoint(args)
    except ValueError as exc:  # a --spot-* or --batch-* value the endpoint refuses
        sys.stderr.write(f"airflow-hetero local serve: {exc}\n")
        return 2
    from airflow_hetero.local.stop_signals import StopSignals

    # The handler only notes the signal (it takes no lock: DESIGN 11); the loop wakes up at once through
    # the signals' wake-up socket, and every WAKE_UP seconds regardless.
    with StopSignals(STOP_SIGNALS) as stop:
        try:
            endpoint.start()
            report_recovery(endpoint.service, out)
            describe_endpoint(endpoint, out)
            while stop.wait(WAKE_UP) is None:
                pass
            out.write("stopping...\n")
            out.flush()
        finally:
            endpoint.stop()
    out.write("stopped.\n")
    out.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m airflow_hetero.local serve [...]``."""
    parser = argparse.ArgumentParser(prog="python -m airflow_hetero.local")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_serve(commands)
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code
