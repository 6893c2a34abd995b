"""CreateTrainingJob request rules: what SageMaker refuses, refused here with its codes and messages.

Model constraints (lengths, patterns, enums, at most 5 instance groups) come from botocore's model
(:mod:`.constraints`); the rules the model cannot express (InstanceType next to InstanceGroups,
channel group references, the all-or-nothing channel rule) are written out here. A few requests
the real service accepts but this endpoint cannot run (Pipe mode, non-S3 data) are refused with a
message that says so, instead of failing later in a confusing way.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_hetero.job.resource_config import HOMOGENEOUS_GROUP, instance_groups, is_hetero
from airflow_hetero.local.api.constraints import check_constraints
from airflow_hetero.local.api.errors import validation

MAX_HOSTS = 254
"""Hosts per job on this endpoint: each gets its own loopback address 127.0.<job>.<host>."""


def _listing(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _check_resources(request: dict[str, Any]) -> list[str]:
    resource = request.get("ResourceConfig")
    if not resource:
        raise validation("ResourceConfig must be specified.")
    groups = resource.get("InstanceGroups")
    if groups:
        if resource.get("InstanceType") is not None or resource.get("InstanceCount") is not None:
            raise validation("InstanceType or InstanceCount cannot be specified with InstanceGroups")
        names = [g["InstanceGroupName"] for g in groups]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise validation(f"Instance group names must be unique within a training job: {_listing(duplicates)}")
        for group in groups:
            if int(group["InstanceCount"]) < 1:
                raise validation(f"InstanceCount of instance group {group['InstanceGroupName']} must be at least 1")
    else:
        if resource.get("InstanceType") is None or resource.get("InstanceCount") is None:
            raise validation("Either InstanceType and InstanceCount or InstanceGroups must be specified")
        if int(resource["InstanceCount"]) < 1:
            raise validation("InstanceCount must be at least 1")
        names = [HOMOGENEOUS_GROUP]
    total = sum(g.instance_count for g in instance_groups(request))
    if total > MAX_HOSTS:
        raise validation(f"The local endpoint runs at most {MAX_HOSTS} hosts per job; this job asks for {total}")
    return names


def _check_channels(request: dict[str, Any], group_names: list[str]) -> None:
    channels = request.get("InputDataConfig") or []
    names = [c["ChannelName"] for c in channels]
    unsafe = sorted({n for n in names if n in (".", "..") or "/" in n or "\\" in n or "\x00" in n})
    if unsafe:
        raise validation(
            f"Channel names {_listing(unsafe)} are not safe directory names: each channel becomes "
            "/opt/ml/input/data/<ChannelName>, so '.' and '..' are refused"
        )
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise validation(f"Channel names must be unique within a training job: {_listing(duplicates)}")
    assigned: list[str] = []
    unassigned: list[str] = []
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
        groups = source.get("InstanceGroupNames")
        if not groups:
            unassigned.append(channel["ChannelName"])
            continue
        if not is_hetero(request):
            raise validation(
                f"InstanceGroupNames in channel {channel['ChannelName']} can only be specified when "
                "ResourceConfig uses InstanceGroups"
            )
        unknown = [g for g in groups if g not in group_names]
        if unknown:
            raise validation(
                f"Instance groups {_listing(unknown)} assigned to channel {channel['ChannelName']} are not "
                f"defined in ResourceConfig.InstanceGroups {_listing(group_names)}"
            )
        assigned.append(channel["ChannelName"])
    if assigned and unassigned:
        raise validation(
            f"Some channels have assigned instance groups: {_listing(assigned)} while others not: "
            f"{_listing(unassigned)}"
        )


def _check_metric_definitions(request: dict[str, Any]) -> None:
    for definition in request["AlgorithmSpecification"].get("MetricDefinitions") or []:
        try:
            re.compile(definition["Regex"])
        except re.error as exc:
            raise validation(
                f"MetricDefinitions: the regular expression of metric {definition['Name']} is not valid: {exc}"
            ) from exc


def validate_create(request: dict[str, Any]) -> None:
    """Raise the service's ``ValidationException`` for a CreateTrainingJob request SageMaker refuses.

    Duplicate names (``ResourceInUse``) are the job store's business, not a rule of the request.
    """
    check_constraints("CreateTrainingJob", request)
    if not request.get("AlgorithmSpecification"):
        raise validation("AlgorithmSpecification must be specified.")
    if request["AlgorithmSpecification"].get("TrainingInputMode") == "Pipe":
        raise validation("The local endpoint does not support Pipe input mode")
    group_names = _check_resources(request)
    _check_channels(request, group_names)
    _check_metric_definitions(request)
    if not request["OutputDataConfig"]["S3OutputPath"].startswith("s3://"):
        raise validation("The local endpoint supports only s3:// output paths")
