"""Which cluster to try next when SageMaker has no capacity: the candidate clusters of a job, in order.

A heterogeneous job needs every group's capacity at once, and SageMaker's own ordered fallback
(``ResourceConfig.InstancePreferences``) cannot be used with ``InstanceGroups``, so the orchestrator
walks the groups' ``fallback_instance_types`` itself (docs/capacity.md). Pure and deterministic: the
caller keeps the attempts (:class:`Attempt`) and asks :func:`next_cluster` for the next one.

**The order.** Each group has its choices ``[its own type and count, *its fallbacks]``; a cluster
picks one choice per group, its *steps* being how far down their lists the groups are in total.
:meth:`CapacityPlan.clusters` lists every cluster by fewest steps first; among clusters of as many
steps, the one whose first group (in the job's order) is further down its list comes first, then
the second group's, and so on. For ``train: [p4d, p5, g5 x2]`` and ``data: [c5, c6i]``::

    0 steps: train=p4d     data=c5      (the job as written)
    1 step:  train=p5      data=c5
             train=p4d     data=c6i
    2 steps: train=g5 x2   data=c5
             train=p5      data=c6i
    3 steps: train=g5 x2   data=c6i

**After a failure** (:func:`next_cluster`) the next cluster is the first in that order that has not
been tried and uses no instance type a quota refusal named. So a ``CapacityError`` (which names no
type) moves one group one step, the earliest group first; a ``ResourceLimitExceeded`` naming a type
moves every group on that type at once, and that type is not tried again in the chain. None when every
cluster was tried.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from airflow_hetero.definition.rules.fallbacks import with_cluster
from airflow_hetero.job.capacity_failure import CapacityFailure
from airflow_hetero.job.resource_config import instance_groups

__all__ = [
    "Attempt",
    "CapacityPlan",
    "Choice",
    "Cluster",
    "cluster_of",
    "describe_cluster",
    "next_cluster",
    "request_for",
]


class Choice(NamedTuple):
    """One group on one of its choices: its name, instance type and instance count."""

    name: str
    instance_type: str
    instance_count: int


#: A whole cluster: one :class:`Choice` per group, in the job's group order (hashable, JSON-able).
Cluster = tuple[Choice, ...]


class Attempt(NamedTuple):
    """A cluster that was submitted and how it failed."""

    cluster: Cluster
    failure: CapacityFailure


class CapacityPlan:
    """The groups of a job and each group's choices: its own type and count, then its fallbacks."""

    def __init__(
        self, groups: Mapping[str, tuple[str, int]], fallbacks: Mapping[str, Sequence[tuple[str, int]]] | None = None
    ) -> None:
        """``groups``: name -> (instance type, count), in the job's order; ``fallbacks``: name -> the
        group's fallbacks ``[(instance type, count)]`` in order of preference (groups not named: none)."""
        unknown = sorted(set(fallbacks or {}) - set(groups))
        if unknown:
            raise ValueError(f"fallbacks for groups the job does not have: {', '.join(unknown)}")
        self.choices: tuple[tuple[Choice, ...], ...] = tuple(
            tuple(Choice(name, kind, count) for kind, count in [own, *(fallbacks or {}).get(name, ())])
            for name, own in groups.items()
        )

    @classmethod
    def for_request(
        cls, request: Mapping[str, Any], fallbacks: Mapping[str, Sequence[tuple[str, int]]] | None = None
    ) -> CapacityPlan:
        """The plan of a CreateTrainingJob request (its ``ResourceConfig.InstanceGroups``) and the
        groups' fallbacks (a :class:`~airflow_hetero.definition.submittable.Submittable`'s ``fallbacks``)."""
        groups = {g.name: (str(g.instance_type), g.instance_count) for g in instance_groups(request)}
        return cls(groups, fallbacks)

    @property
    def first(self) -> Cluster:
        """The job as written: every group on its own type and count."""
        return tuple(options[0] for options in self.choices)

    @property
    def has_fallbacks(self) -> bool:
        """True when some group has a fallback (else the plan is the one cluster)."""
        return any(len(options) > 1 for options in self.choices)

    def clusters(self) -> Iterator[Cluster]:
        """Every cluster, in the plan's order (see the module's docstring)."""
        sizes = [len(options) for options in self.choices]
        positions = _positions(sizes)
        for steps in sorted(positions, key=lambda p: (sum(p), tuple(-i for i in p))):
            yield tuple(options[i] for options, i in zip(self.choices, steps, strict=True))


def _positions(sizes: Sequence[int]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for size in sizes:
        out = [(*p, i) for p in out for i in range(size)]
    return out


def next_cluster(plan: CapacityPlan, attempts: Sequence[Attempt]) -> Cluster | None:
    """The cluster to submit after ``attempts`` (oldest first), or None when every cluster was tried.

    The first cluster of :meth:`CapacityPlan.clusters` not tried yet that uses no type a quota refusal
    of ``attempts`` named.
    """
    tried = {attempt.cluster for attempt in attempts}
    refused = {a.failure.instance_type for a in attempts if a.failure.refuses_type and a.failure.instance_type}
    for cluster in plan.clusters():
        if cluster not in tried and not any(choice.instance_type in refused for choice in cluster):
            return cluster
    return None


def cluster_of(request: Mapping[str, Any]) -> Cluster:
    """The cluster a CreateTrainingJob request or a DescribeTrainingJob answer states."""
    return tuple(Choice(g.name, str(g.instance_type), g.instance_count) for g in instance_groups(request))


def request_for(request: Mapping[str, Any], cluster: Cluster) -> dict[str, Any]:
    """A copy of ``request`` running on ``cluster``: each group's InstanceType and InstanceCount replaced,
    everything else kept (the job's one image fits: a fallback has its group's accelerator)."""
    return with_cluster(request, {c.name: (c.instance_type, c.instance_count) for c in cluster})


def describe_cluster(cluster: Cluster) -> str:
    """``train=1 x ml.p4d.24xlarge, data=2 x ml.c5.xlarge``: a cluster in one line."""
    return ", ".join(f"{c.name}={c.instance_count} x {c.instance_type}" for c in cluster)
