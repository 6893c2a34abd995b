"""The endpoint's CreateTrainingJob validators: what SageMaker refuses, and this endpoint's own limits.

SageMaker's refusals come with its codes and messages.

Model constraints (lengths, patterns, enums, at most 5 instance groups) come from botocore's model
(:mod:`.constraints`); the rules the model cannot express (InstanceType next to InstanceGroups,
channel group references, the all-or-nothing channel rule) from the one place request mode reads
them too, :mod:`airflow_hetero.definition.raw_request.service_rules`. A few requests
the real service accepts but this endpoint cannot run (Pipe mode, non-S3 data) are refused with a
message that says so, instead of failing later in a confusing way (so is a ``CheckpointConfig.LocalPath``
outside ``/opt/ml``, which the endpoint cannot give each host a folder of its own for).
"""

from __future__ import annotations

from typing import Any

from airflow_hetero.definition.raw_request.service_rules import service_problems
from airflow_hetero.job.resource_config import instance_groups
from airflow_hetero.local.api.constraints import check_constraints
from airflow_hetero.local.api.errors import validation
from airflow_hetero.local.training.checkpoints import checkpoint_config, local_path_problem

MAX_HOSTS = 254
"""Hosts per job on this endpoint: each gets its own loopback address 127.0.<job>.<host>."""


def _listing(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _check_hosts(request: dict[str, Any]) -> None:
    total = sum(g.instance_count for g in instance_groups(request))
    if total > MAX_HOSTS:
        raise validation(f"The local endpoint runs at most {MAX_HOSTS} hosts per job; this job asks for {total}")


def _check_channels(request: dict[str, Any]) -> None:
    """What this endpoint cannot run: unsafe directory names, non-S3 data, Pipe mode."""
    channels = request.get("InputDataConfig") or []
    names = [c["ChannelName"] for c in channels]
    unsafe = sorted({n for n in names if n in (".", "..") or "/" in n or "\\" in n or "\x00" in n})
    if unsafe:
        raise validation(
            f"Channel names {_listing(unsafe)} are not safe directory names: each channel becomes "
            "/opt/ml/input/data/<ChannelName>, so '.' and '..' are refused"
        )
    for channel in channels:
        source = channel.get("DataSource", {}).get("S3DataSource")
        if source is None:
            raise validation(
                f"The local endpoint supports only S3DataSource channels; channel {channel['ChannelName']} "
                "uses another data source"
            )
        if source["S3DataType"] != "S3Prefix":
            raise validation(
                f"The local endpoint supports only S3DataType S3Prefix; channel {channel['ChannelName']} "
                f"uses {source['S3DataType']}"
            )
        if not source["S3Uri"].startswith("s3://"):
            raise validation(
                f"The local endpoint supports only s3:// URIs; channel {channel['ChannelName']} uses {source['S3Uri']}"
            )
        if channel.get("InputMode") == "Pipe":
            raise validation(f"The local endpoint does not support Pipe input mode (channel {channel['ChannelName']})")


def validate_create(request: dict[str, Any]) -> None:
    """Raise the service's ``ValidationException`` for a CreateTrainingJob request SageMaker refuses.

    Duplicate names (``ResourceInUse``) are the job store's business, not a rule of the request.
    """
    check_constraints("CreateTrainingJob", request)
    refused = service_problems(request)  # the service's own rules, from the definition's one place
    if refused:
        raise validation(refused[0].msg)
    if request["AlgorithmSpecification"].get("TrainingInputMode") == "Pipe":
        raise validation("The local endpoint does not support Pipe input mode")
    _check_hosts(request)
    _check_channels(request)
    if not request["OutputDataConfig"]["S3OutputPath"].startswith("s3://"):
        raise validation("The local endpoint supports only s3:// output paths")
    checkpoints = checkpoint_config(request)
    if checkpoints is not None and not checkpoints[0].startswith("s3://"):  # the model allows https:// too
        raise validation(f"The local endpoint supports only s3:// URIs; CheckpointConfig.S3Uri is {checkpoints[0]}")
    problem = None if checkpoints is None else local_path_problem(checkpoints[1])
    if problem is not None:
        raise validation(problem)
