"""The rules SageMaker enforces on a CreateTrainingJob request beyond its shapes (pure, no botocore).

The model (:mod:`airflow_hetero.definition.raw_request.service_shapes`) states lengths, patterns, enums and
"at most 5 instance groups"; these are the rules it cannot state: InstanceType/InstanceCount
exclusive with InstanceGroups, unique group and channel names, channel groups that exist, the
all-or-nothing channel assignment, metric regular expressions, spot's MaxWait and the options SageMaker
refuses with instance groups (warm pools, training plans, instance preferences). Each problem carries the request
path and the service's own message, so request mode (:mod:`airflow_hetero.definition.raw_request.training_request`)
and the offline endpoint (``local.api.validators``) report the same rule from this one place.
:func:`sdk_problems` adds what the SageMaker Python SDK checks before it sends a request (the
distribution group of its ``sagemaker_*`` hyperparameters): the service does not, the container does.

Every rule reads defensively: a value of the wrong type is the shape check's problem, not a crash here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from airflow_hetero.definition.errors import Loc, Problem
from airflow_hetero.definition.rules import option_rules
from airflow_hetero.sagemaker_facts import DISTRIBUTION_GROUPS_HP

__all__ = ["group_names", "option_problems", "package_problems", "sdk_problems", "service_problems"]


def _listing(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _dicts(value: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """The (index, item) pairs of a list that are objects; anything else yields nothing."""
    if isinstance(value, list):
        yield from ((i, item) for i, item in enumerate(value) if isinstance(item, dict))


def _duplicates(names: list[str]) -> list[str]:
    return sorted({n for n in names if names.count(n) > 1})


def group_names(request: dict[str, Any]) -> list[str]:
    """The job's instance group names (none for a homogeneous job)."""
    resource = request.get("ResourceConfig")
    groups = resource.get("InstanceGroups") if isinstance(resource, dict) else None
    if not groups:
        return []
    return [str(g.get("InstanceGroupName")) for _, g in _dicts(groups)]


def _count_below_one(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value < 1


def resource_problems(request: dict[str, Any]) -> list[Problem]:
    """ResourceConfig: groups or type and count, never both; unique group names; counts of at least 1."""
    resource = request.get("ResourceConfig")
    if not isinstance(resource, dict):
        return [Problem(("ResourceConfig",), "ResourceConfig must be specified.")]
    groups = resource.get("InstanceGroups")
    if not groups:
        if resource.get("InstanceType") is None or resource.get("InstanceCount") is None:
            msg = "Either InstanceType and InstanceCount or InstanceGroups must be specified"
            return [Problem(("ResourceConfig",), msg)]
        if _count_below_one(resource["InstanceCount"]):
            return [Problem(("ResourceConfig", "InstanceCount"), "InstanceCount must be at least 1")]
        return []
    out: list[Problem] = []
    for member in ("InstanceType", "InstanceCount"):
        if resource.get(member) is not None:
            msg = "InstanceType or InstanceCount cannot be specified with InstanceGroups"
            out.append(Problem(("ResourceConfig", member), msg))
    names = [str(g.get("InstanceGroupName")) for _, g in _dicts(groups)]
    repeated = _duplicates(names)
    for index, group in _dicts(groups):
        name = str(group.get("InstanceGroupName"))
        where: Loc = ("ResourceConfig", "InstanceGroups", index)
        if name in repeated and names.index(name) != index:
            msg = f"Instance group names must be unique within a training job: {_listing(repeated)}"
            out.append(Problem((*where, "InstanceGroupName"), msg))
        if _count_below_one(group.get("InstanceCount")):
            msg = f"InstanceCount of instance group {name} must be at least 1"
            out.append(Problem((*where, "InstanceCount"), msg))
    return out


def _source(channel: dict[str, Any]) -> dict[str, Any] | None:
    data = channel.get("DataSource")
    source = data.get("S3DataSource") if isinstance(data, dict) else None
    return source if isinstance(source, dict) else None


def channel_problems(request: dict[str, Any]) -> list[Problem]:
    """Channels: unique names, groups only in a heterogeneous job and only existing ones, all or none."""
    channels = request.get("InputDataConfig")
    names = [str(c.get("ChannelName")) for _, c in _dicts(channels)]
    out: list[Problem] = []
    repeated = _duplicates(names)
    known = group_names(request)
    assigned: list[str] = []
    unassigned: list[str] = []
    for index, channel in _dicts(channels):
        name = str(channel.get("ChannelName"))
        where: Loc = ("InputDataConfig", index)
        if name in repeated and names.index(name) != index:
            msg = f"Channel names must be unique within a training job: {_listing(repeated)}"
            out.append(Problem((*where, "ChannelName"), msg))
        source = _source(channel)
        groups = source.get("InstanceGroupNames") if source is not None else None
        if not groups or not isinstance(groups, list):
            unassigned.append(name)
            continue
        assigned.append(name)
        at: Loc = (*where, "DataSource", "S3DataSource", "InstanceGroupNames")
        if not known:
            msg = f"InstanceGroupNames in channel {name} can only be specified when ResourceConfig uses InstanceGroups"
            out.append(Problem(at, msg))
            continue
        unknown = [str(g) for g in groups if g not in known]
        for position, group in enumerate(groups):
            if group in unknown:
                msg = (
                    f"Instance groups {_listing(unknown)} assigned to channel {name} are not defined in "
                    f"ResourceConfig.InstanceGroups {_listing(known)}"
                )
                out.append(Problem((*at, position), msg))
                break  # one problem per channel, at its first unknown group, as the service words it
    if assigned and unassigned:
        msg = (
            f"Some channels have assigned instance groups: {_listing(assigned)} "
            f"while others not: {_listing(unassigned)}"
        )
        out.append(Problem(("InputDataConfig",), msg))
    return out


def metric_problems(request: dict[str, Any]) -> list[Problem]:
    """Every MetricDefinitions regular expression compiles."""
    algorithm = request.get("AlgorithmSpecification")
    definitions = algorithm.get("MetricDefinitions") if isinstance(algorithm, dict) else None
    out: list[Problem] = []
    for index, definition in _dicts(definitions):
        regex = definition.get("Regex")
        if not isinstance(regex, str):
            continue
        try:
            re.compile(regex)
        except re.error as exc:
            msg = f"MetricDefinitions: the regular expression of metric {definition.get('Name')} is not valid: {exc}"
            out.append(Problem(("AlgorithmSpecification", "MetricDefinitions", index, "Regex"), msg))
    return out


def service_problems(request: dict[str, Any]) -> list[Problem]:
    """Every rule the service enforces beyond the model's shapes, in the request's order."""
    out: list[Problem] = []
    if not request.get("AlgorithmSpecification"):
        out.append(Problem(("AlgorithmSpecification",), "AlgorithmSpecification must be specified."))
    out += resource_problems(request)
    out += channel_problems(request)
    out += metric_problems(request)
    out += option_problems(request)
    return out


def option_problems(request: dict[str, Any]) -> list[Problem]:
    """Spot's MaxWait, and warm pools, training plans and instance preferences where SageMaker refuses them
    (:mod:`airflow_hetero.definition.rules.option_rules`, the rules definitions read too)."""
    return list(option_rules.service_problems(option_rules.Options.of_request(request), option_rules.REQUEST))


def package_problems(request: dict[str, Any]) -> list[Problem]:
    """airflow-hetero's own rules for a request (the service accepts it; the endpoint does not check them):
    spot needs a CheckpointConfig."""
    return list(option_rules.package_problems(option_rules.Options.of_request(request), option_rules.REQUEST))


def sdk_problems(request: dict[str, Any]) -> list[Problem]:
    """The SDK's distribution rule: its distribution group hyperparameter names one existing group."""
    hyperparameters = request.get("HyperParameters")
    raw = hyperparameters.get(DISTRIBUTION_GROUPS_HP) if isinstance(hyperparameters, dict) else None
    if not isinstance(raw, str):
        return []
    where: Loc = ("HyperParameters", DISTRIBUTION_GROUPS_HP)
    try:
        groups = json.loads(raw)
    except ValueError:
        groups = None
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        return [Problem(where, f"must be a JSON list of instance group names, e.g. '[\"dnn_group\"]' (got {raw!r})")]
    if len(groups) != 1:
        return [Problem(where, f"the distribution may name only one instance group (got {len(groups)}: {raw})")]
    known = group_names(request)
    if groups[0] not in known:
        return [Problem(where, f"'{groups[0]}' is not one of the job's instance groups {_listing(known)}")]
    return []
