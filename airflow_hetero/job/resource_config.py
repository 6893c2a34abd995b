"""SageMaker's ResourceConfig and channel shapes, read as typed values (stdlib only).

A CreateTrainingJob request and a DescribeTrainingJob answer state a job's instances the same
way: ``ResourceConfig.InstanceGroups`` for a heterogeneous job, ``InstanceType`` and
``InstanceCount`` for a homogeneous one (which the sagemaker-training toolkit calls the
``homogeneousCluster`` group). This is the one place that reads them; the log core, the
offline endpoint and the Airflow surface all use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_hetero.runtime import HOMOGENEOUS_GROUP

__all__ = [
    "HOMOGENEOUS_GROUP",
    "GroupSpec",
    "channel_group_names",
    "describe_groups",
    "instance_groups",
    "is_hetero",
    "stated_groups",
    "total_instances",
]


@dataclass(frozen=True)
class GroupSpec:
    """One instance group: its name, instance type and instance count."""

    name: str
    instance_type: str | None
    instance_count: int


def _resource(job: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (job or {}).get("ResourceConfig") or {}


def stated_groups(job: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """``[{"name", "type", "count"}]`` exactly as the request or answer states them (None where a
    member is missing, values untouched): the result dict's ``instance_groups``. A homogeneous job
    is one ``homogeneousCluster`` group; a job that states no instances has none."""
    resource = _resource(job)
    groups = resource.get("InstanceGroups")
    if groups:
        return [
            {"name": g.get("InstanceGroupName"), "type": g.get("InstanceType"), "count": g.get("InstanceCount")}
            for g in groups
        ]
    if resource.get("InstanceType"):
        return [
            {"name": HOMOGENEOUS_GROUP, "type": resource.get("InstanceType"), "count": resource.get("InstanceCount")}
        ]
    return []


def instance_groups(job: Mapping[str, Any] | None) -> list[GroupSpec]:
    """The groups of a request or DescribeTrainingJob answer, in its order.

    A homogeneous job is one ``homogeneousCluster`` group; a job that states no instances (or
    ``None``) has none. Missing counts read as 0.
    """
    resource = _resource(job)
    groups = resource.get("InstanceGroups")
    if groups:
        return [
            GroupSpec(str(g["InstanceGroupName"]), g.get("InstanceType"), int(g.get("InstanceCount") or 0))
            for g in groups
        ]
    if resource.get("InstanceType"):
        return [GroupSpec(HOMOGENEOUS_GROUP, resource["InstanceType"], int(resource.get("InstanceCount") or 0))]
    return []


def is_hetero(job: Mapping[str, Any] | None) -> bool:
    """True when the job uses ``ResourceConfig.InstanceGroups``."""
    return bool(_resource(job).get("InstanceGroups"))


def total_instances(job: Mapping[str, Any] | None) -> int:
    """Instances in the job: the sum over its groups (InstanceCount for a homogeneous job)."""
    resource = _resource(job)
    groups = resource.get("InstanceGroups")
    if groups:
        return sum(int(g.get("InstanceCount") or 0) for g in groups)
    return int(resource.get("InstanceCount") or 0)


def describe_groups(groups: Sequence[GroupSpec]) -> str:
    """``data_group=2xml.c5.xlarge, dnn_group=1xml.p3.2xlarge``: groups in one line of a task log."""
    return ", ".join(f"{g.name}={g.instance_count}x{g.instance_type}" for g in groups)


def channel_group_names(channel: Mapping[str, Any], all_groups: Sequence[str]) -> list[str]:
    """Groups that receive ``channel``: its ``InstanceGroupNames``, or every group when it names none."""
    names = ((channel.get("DataSource") or {}).get("S3DataSource") or {}).get("InstanceGroupNames")
    return list(names) if names else list(all_groups)
