"""Decide which instance group each host of a training job is in, from evidence found in its logs (pure).

Evidence is collected per stream by :class:`airflow_hetero.logs.streams.StreamLog`; this module weighs it
in order of trust and cross-checks the result with DescribeTrainingJob. Host numbers are never
used: they do not follow group order. No Airflow, boto3 or botocore here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_hetero.job.resource_config import GroupSpec
    from airflow_hetero.logs.streams import StreamLog

__all__ = ["SOURCES", "Evidence", "HostMapping", "collect_evidence", "resolve_mapping", "weigh"]


#: Mapping sources, most trusted first: the runtime marker, the toolkit's SM_CURRENT_* lines, a
#: printed ``resourceconfig.json`` (SDK v3's ``sm_train.sh``), a whole group map, a one-group job.
SOURCES = ("marker", "toolkit", "resource_config", "group_map", "single_group")


@dataclass
class HostMapping:
    """Which group each host is in, why, and what did not add up."""

    host_to_group: dict[str, str]
    source: dict[str, str]
    unmapped: list[str]
    problems: list[str]
    instance_types: dict[str, str]


def resolve_mapping(streams: Sequence[StreamLog], groups: Sequence[GroupSpec] = ()) -> HostMapping:
    """Map hosts to groups by the most trusted evidence; never guess from host numbers.

    Order of trust: the runtime helper's marker line; the toolkit's ``SM_CURRENT_HOST`` /
    ``SM_CURRENT_INSTANCE_GROUP`` lines; the ``resourceconfig.json`` line SDK v3's ``sm_train.sh``
    prints at every log level (``current_host`` / ``current_group_name``; these three only from the
    host's own streams: a line in one host's stream naming another host is ignored and listed as a
    problem); the whole map in ``SM_RESOURCE_CONFIG`` /
    ``SM_INSTANCE_GROUPS_DICT`` from any stream (covers MPI workers that print no start-up block);
    a job with a single group. Two answers at the same level leave the host to lower levels; a host
    nothing maps is unmapped. ``groups`` (from DescribeTrainingJob) is the cross-check.
    """
    evidence = collect_evidence(streams, groups)
    host_to_group, source_of, problems = weigh(evidence)
    unmapped = sorted(h for h in evidence.hosts if h not in host_to_group)
    problems = [*evidence.foreign, *problems, *_cross_check(host_to_group, groups)]
    return HostMapping(host_to_group, source_of, unmapped, problems, evidence.instance_types)


@dataclass
class Evidence:
    """What a job's streams say about its hosts' groups, before it is weighed."""

    #: source (:data:`SOURCES`) -> host -> the groups that source names for it
    claims: dict[str, dict[str, set[str]]] = field(default_factory=lambda: {s: {} for s in SOURCES})
    #: every host seen: the streams' own and those the evidence names
    hosts: set[str] = field(default_factory=set)
    #: group -> instance type, from the group maps
    instance_types: dict[str, str] = field(default_factory=dict)
    #: lines in one host's stream speaking for another host: never trusted
    foreign: list[str] = field(default_factory=list)

    def claim(self, source: str, host: str, group: str) -> None:
        self.claims[source].setdefault(host, set()).add(group)
        self.hosts.add(host)


def collect_evidence(streams: Sequence[StreamLog], groups: Sequence[GroupSpec] = ()) -> Evidence:
    """Every claim the streams make (and, for a job of one group, that group for every host)."""
    evidence = Evidence()
    for log in streams:
        evidence.hosts.add(log.host)
        _own_claims(log, evidence)
        for group, info in (log.group_map or {}).items():
            if info.get("instance_type"):
                evidence.instance_types.setdefault(group, str(info["instance_type"]))
            for host in info["hosts"]:
                evidence.claim("group_map", host, group)
    if len(groups) == 1:
        for host in evidence.hosts:
            evidence.claim("single_group", host, groups[0].name)
    return evidence


def _own_claims(log: StreamLog, evidence: Evidence) -> None:
    """The marker and the toolkit's lines of one stream: trusted only for the stream's own host."""
    for host, group in log.marker.items():
        if host != log.host:
            evidence.foreign.append(
                f"{log.stream}: marker names host {host} (group {group}), not its own host {log.host}; ignored"
            )
            continue
        evidence.claim("marker", host, group)
    if log.current_group:
        speaker = log.current_host or log.host
        if speaker != log.host:
            evidence.foreign.append(
                f"{log.stream}: SM_CURRENT_HOST={speaker} is not its own host {log.host}; its group line is ignored"
            )
        else:
            evidence.claim("toolkit", speaker, log.current_group)
    if log.config_claim is not None:
        host, group = log.config_claim
        if host != log.host:
            evidence.foreign.append(
                f"{log.stream}: resourceconfig.json names host {host}, not its own host {log.host}; ignored"
            )
        else:
            evidence.claim("resource_config", host, group)


def weigh(evidence: Evidence) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(host -> group, host -> deciding source, problems): per host, the most trusted source that
    names one group decides; a source naming several, or a lower one disagreeing, is a problem."""
    host_to_group: dict[str, str] = {}
    source_of: dict[str, str] = {}
    problems: list[str] = []
    for host in sorted(evidence.hosts):
        for source in SOURCES:
            found = evidence.claims[source].get(host)
            if not found:
                continue
            if len(found) > 1:
                problems.append(f"{host}: {source} evidence names several groups {sorted(found)}")
                continue
            group = next(iter(found))
            if host not in host_to_group:
                host_to_group[host], source_of[host] = group, source
            elif group != host_to_group[host]:
                problems.append(
                    f"{host}: {source} evidence says {group}, {source_of[host]} says "
                    f"{host_to_group[host]}; using {source_of[host]}"
                )
    return host_to_group, source_of, problems


def _cross_check(host_to_group: Mapping[str, str], groups: Sequence[GroupSpec]) -> list[str]:
    """Compare the mapping with DescribeTrainingJob: unknown groups, more hosts than instances."""
    if not groups:
        return []
    problems: list[str] = []
    members: dict[str, list[str]] = {}
    for host, group in host_to_group.items():
        members.setdefault(group, []).append(host)
    known = {g.name: g for g in groups}
    for group, group_hosts in sorted(members.items()):
        spec = known.get(group)
        if spec is None:
            problems.append(f"group {group} ({', '.join(sorted(group_hosts))}) is not in the job's ResourceConfig")
        elif spec.instance_count and len(group_hosts) > spec.instance_count:
            problems.append(
                f"group {group}: {len(group_hosts)} hosts mapped ({', '.join(sorted(group_hosts))}) "
                f"but InstanceCount is {spec.instance_count}"
            )
    return problems
