"""The Downloading phase: source code, per-host layout and channel data, before any host runs.

A job runs one of two ways. *Container* jobs name ``AlgorithmSpecification.ContainerEntrypoint``
(and ``ContainerArguments``), as the SageMaker Python SDK v3 does: that command runs on every host
as given, with the host's own tree as ``/opt/ml``, and its code arrives through channels. Otherwise
the entry point is script mode as SDK v2 submits it: ``sagemaker_program`` names the script inside
the ``sagemaker_submit_directory`` tarball in S3 (both JSON-encoded strings, as every SDK v2
hyperparameter). The tarball is checked and extracted once (file modes kept), then copied into
each host's ``code`` directory. Each host receives only the channels assigned to its group.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from airflow_hetero.job.resource_config import channel_group_names
from airflow_hetero.local.training.layout import Cluster, Host, create_layout, input_data_config
from airflow_hetero.local.training.transfer import TransferError, download_channel, fetch, safe_extract
from airflow_hetero.sagemaker_facts import PROGRAM_HP, SUBMIT_DIRECTORY_HP

CONTAINER_ROOT = "/opt/ml/"


class JobFailure(Exception):
    """Ends the job as Failed with ``reason`` as its FailureReason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class EntryPoint:
    """What every host runs: a toolkit ``program`` in its code dir, or a container ``command``."""

    program: str | None = None
    command: tuple[str, ...] | None = None


def container_command(record: dict[str, Any]) -> tuple[str, ...] | None:
    """``ContainerEntrypoint`` + ``ContainerArguments`` of the request; None when it names neither."""
    spec = record.get("AlgorithmSpecification") or {}
    entrypoint: list[str] = spec.get("ContainerEntrypoint") or []
    arguments: list[str] = spec.get("ContainerArguments") or []
    if not entrypoint and not arguments:
        return None
    if not entrypoint:
        raise JobFailure(
            "ClientError: AlgorithmSpecification.ContainerArguments needs ContainerEntrypoint on the local "
            "endpoint: it runs no image, so it does not know the image's own entry point."
        )
    return (*entrypoint, *arguments)


def _decoded(raw: dict[str, str], key: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    try:
        decoded = json.loads(value)
    except ValueError:
        decoded = value
    return str(decoded) if decoded is not None else None


def entry_point(hyperparameters: dict[str, str]) -> tuple[str, str]:
    """(program, source tarball URI) from the SDK's ``sagemaker_program``/``sagemaker_submit_directory``."""
    program = _decoded(hyperparameters, PROGRAM_HP)
    source = _decoded(hyperparameters, SUBMIT_DIRECTORY_HP)
    if not program or not source:
        raise JobFailure(
            "ClientError: The local endpoint runs script-mode training jobs, whose HyperParameters name the "
            "entry point in sagemaker_program and its source tarball in sagemaker_submit_directory "
            "(JSON-encoded strings, as the SageMaker Python SDK v2 sends them), and container jobs, whose "
            "AlgorithmSpecification names ContainerEntrypoint (as SDK v3 sends them); this job has neither."
        )
    path = PurePosixPath(program)
    if path.is_absolute() or ".." in path.parts:
        raise JobFailure(f"ClientError: The entry point {program!r} must be a path inside the source directory.")
    return program, source


def fetch_source(s3: Any, source: str, staging: Path, max_bytes: int = 1 << 30) -> None:
    """Download the source tarball and extract it, safely and at most ``max_bytes``, into ``staging``."""
    from botocore.exceptions import ClientError

    try:
        data = fetch(s3, source)
    except (ClientError, TransferError) as exc:
        raise JobFailure(f"ClientError: Could not download the source tarball {source}: {exc}") from exc
    _extract(data, source, staging, max_bytes)


def _extract(data: bytes, source: str, dest: Path, max_bytes: int) -> None:
    try:
        safe_extract(data, dest, max_bytes)
    except TransferError as exc:
        raise JobFailure(f"ClientError: The source tarball {source} was refused: {exc}. No host was started.") from exc


def prepare_hosts(
    *,
    record: dict[str, Any],
    cluster: Cluster,
    s3: Any,
    job_dir: Path,
    check_interrupt: Callable[[], None],
    max_source_bytes: int = 1 << 30,
    max_channel_bytes: int = 8 << 30,
) -> EntryPoint:
    """Lay out every host, download its channels, put the source in its code dir; return the entry point.

    A container job (:func:`container_command`) gets the layout and channels only.

    The source is an S3 tarball (checked and extracted once, then copied to every host) or, as the
    SDK submits it under network isolation, a path below ``/opt/ml/`` that a channel delivers (read
    from each host's own layout). ``check_interrupt`` is called between steps so a stop or timeout
    is honoured during downloads. A source extracting to more than ``max_source_bytes``, or a
    channel bringing more than ``max_channel_bytes`` to one host, fails the job with a reason.
    """
    hyperparameters: dict[str, str] = record.get("HyperParameters") or {}
    command = container_command(record)
    if command is not None:
        _lay_out(record, cluster, s3, check_interrupt, max_channel_bytes)
        return EntryPoint(command=command)
    program, source = entry_point(hyperparameters)
    staging: Path | None = None
    if source.startswith("s3://"):
        staging = job_dir / "source"
        fetch_source(s3, source, staging, max_source_bytes)
    elif not source.startswith(CONTAINER_ROOT):
        raise JobFailure(
            f"ClientError: sagemaker_submit_directory must be an s3:// URI or a path under {CONTAINER_ROOT}, "
            f"not {source}"
        )
    for host in cluster.hosts:
        _lay_out_host(record, cluster, host, s3, check_interrupt=check_interrupt, max_channel_bytes=max_channel_bytes)
        if staging is not None:
            try:
                shutil.copytree(staging, host.code_dir, dirs_exist_ok=True, symlinks=True)
            except (OSError, shutil.Error) as exc:
                raise JobFailure(
                    f"ClientError: Could not copy the source to host {host.name}: {exc}. "
                    "The disk holding the endpoint's workdir is probably full."
                ) from exc
        else:
            local = host.base_dir / source[len(CONTAINER_ROOT) :]
            if not local.is_file():
                raise JobFailure(f"ClientError: The source tarball {source} is not on host {host.name}.")
            _extract(local.read_bytes(), source, host.code_dir, max_source_bytes)
        if not (host.code_dir / program).is_file():
            raise JobFailure(f"ClientError: The entry point {program} is not in the source tarball {source}.")
    return EntryPoint(program=program)


def _lay_out(
    record: dict[str, Any], cluster: Cluster, s3: Any, check_interrupt: Callable[[], None], max_channel_bytes: int
) -> None:
    for host in cluster.hosts:
        _lay_out_host(record, cluster, host, s3, check_interrupt=check_interrupt, max_channel_bytes=max_channel_bytes)


def _lay_out_host(
    record: dict[str, Any],
    cluster: Cluster,
    host: Host,
    s3: Any,
    *,
    check_interrupt: Callable[[], None],
    max_channel_bytes: int,
) -> None:
    """Write the host's layout and config files, then download the channels assigned to its group."""
    from botocore.exceptions import ClientError

    check_interrupt()
    group_names = [g.name for g in cluster.groups]
    channels: list[dict[str, Any]] = record.get("InputDataConfig") or []
    mine = [c for c in channels if host.group in channel_group_names(c, group_names)]
    create_layout(
        host,
        resource=cluster.resource_config(host),
        hyperparameters=record.get("HyperParameters") or {},
        data_config=input_data_config(mine),
    )
    peers = [h.name for h in cluster.group_hosts(host.group)]
    for channel in mine:
        check_interrupt()
        s3_source = channel["DataSource"]["S3DataSource"]
        try:
            download_channel(
                s3,
                s3_source["S3Uri"],
                host.channel_dir(channel["ChannelName"]),
                shard_index=peers.index(host.name),
                shard_count=len(peers),
                sharded=s3_source.get("S3DataDistributionType") == "ShardedByS3Key",
                max_bytes=max_channel_bytes,
            )
        except (ClientError, TransferError) as exc:
            raise JobFailure(f"ClientError: Channel {channel['ChannelName']}: {exc}") from exc
