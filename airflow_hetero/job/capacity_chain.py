"""One task instance's chain of capacity attempts: what was tried, how it failed, what comes next.

The operator keeps a :class:`CapacityChain` per run of ``execute`` (or ``execute_complete``): each job
of this task instance that ended ``Failed`` with a ``CapacityError`` and each create refused for a type's
quota is an attempt; :meth:`CapacityChain.next` is the cluster to submit next (the planner's order,
:mod:`~airflow_hetero.job.capacity_plan`), within ``capacity_attempts``. The jobs themselves are the
record: a retry of the task walks its job names and :meth:`CapacityChain.observe` rebuilds the chain
from their Describe (cluster, FailureReason); a job that ended any other way starts a new chain. The
attempts travel through a deferral as :meth:`CapacityChain.as_result` (plain dicts) and come back with
:meth:`CapacityChain.restore`. No AWS call here (docs/capacity.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_hetero._compat import AirflowException
from airflow_hetero.job.capacity_failure import CapacityFailure, failure_of_error, failure_of_reason
from airflow_hetero.job.capacity_plan import (
    Attempt,
    CapacityPlan,
    Choice,
    Cluster,
    cluster_of,
    describe_cluster,
    next_cluster,
)
from airflow_hetero.job.identity import TAG_PREFIX, tag_value

__all__ = ["ATTEMPT_TAG", "CLUSTER_TAG", "CapacityChain", "CapacityExhaustedError", "ChainAttempt"]

#: Tags of a job of a chain: its attempt number (1: the job as written) and its cluster.
ATTEMPT_TAG = f"{TAG_PREFIX}capacity-attempt"
CLUSTER_TAG = f"{TAG_PREFIX}capacity-cluster"


class CapacityExhaustedError(AirflowException):
    """Every cluster the chain may try failed for lack of capacity; ``attempts`` say which and why."""

    def __init__(self, message: str, attempts: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True)
class ChainAttempt:
    """One cluster tried: the job's name (None: the create was refused), the cluster, the failure."""

    job_name: str | None
    cluster: Cluster
    failure: CapacityFailure

    def as_dict(self) -> dict[str, Any]:
        """``{"job_name", "instance_groups", "reason"}`` (groups as the result dict states them)."""
        groups = [{"name": c.name, "type": c.instance_type, "count": c.instance_count} for c in self.cluster]
        return {"job_name": self.job_name, "instance_groups": groups, "reason": self.failure.reason}


def _attempt_of(item: Mapping[str, Any]) -> ChainAttempt | None:
    """A :meth:`ChainAttempt.as_dict` read back (None: not a capacity failure after all)."""
    cluster = tuple(Choice(str(g["name"]), str(g["type"]), int(g["count"])) for g in item["instance_groups"])
    reason, name = str(item["reason"]), item.get("job_name")
    if name is not None:
        failure = failure_of_reason(reason)
        return None if failure is None else ChainAttempt(str(name), cluster, failure)
    code, _, message = reason.partition(": ")  # a refused create: "<error code>: <message>"
    failure = failure_of_error(code, message)
    return None if failure is None else ChainAttempt(None, cluster, replace(failure, reason=reason))


@dataclass
class CapacityChain:
    """The plan of a job, the attempts so far (oldest first) and the bound on them."""

    limit: int | None = None
    #: Set from the first request built (:meth:`plan_from`): the walk of a retry needs none.
    plan: CapacityPlan | None = None
    attempts: list[ChainAttempt] = field(default_factory=list)
    #: True until the task's first job is submitted or re-attached: an earlier try's finished chain
    #: then starts a new round from the first cluster (capacity may have come back).
    new_round: bool = True

    def plan_from(self, request: Mapping[str, Any], fallbacks: Mapping[str, Sequence[tuple[str, int]]]) -> None:
        """The plan of the job (its first request and its groups' fallbacks), once."""
        if self.plan is None:
            self.plan = CapacityPlan.for_request(request, fallbacks)

    def restore(self, attempts: Sequence[Mapping[str, Any]] | None) -> None:
        """Take back the attempts of :meth:`as_result` (kept through a deferral)."""
        for item in attempts or ():
            attempt = _attempt_of(item)
            if attempt is not None and not self.knows(attempt.job_name):
                self.attempts.append(attempt)

    def knows(self, job_name: str | None) -> bool:
        """True when the job is an attempt of the chain already."""
        return job_name is not None and any(a.job_name == job_name for a in self.attempts)

    def observe(self, name: str, describe: Mapping[str, Any]) -> CapacityFailure | None:
        """Take in an ended job of this task instance found by name: a capacity failure is an attempt
        (returned); a failure of another kind or a stop starts a new chain (the task's retry after a real
        failure trains again from the first cluster). A running or completed job changes nothing: it is
        the chain's last job (a retry that finds it completed returns it, with the attempts before it)."""
        status = describe.get("TrainingJobStatus")
        if status in ("InProgress", "Stopping", "Completed"):
            return None
        failure = failure_of_reason(describe.get("FailureReason")) if status == "Failed" else None
        if failure is None:
            self.attempts.clear()
            return None
        if not self.knows(name):
            self.attempts.append(ChainAttempt(name, cluster_of(describe), failure))
        return failure

    def refused(self, cluster: Cluster, failure: CapacityFailure, code: str) -> None:
        """A create of ``cluster`` refused for capacity with error ``code`` (no job, no name used)."""
        self.attempts.append(ChainAttempt(None, cluster, replace(failure, reason=f"{code}: {failure.reason}")))

    def next(self) -> Cluster | None:
        """The cluster to submit now: the first when nothing was tried, else the planner's next one;
        None when every cluster was tried or ``limit`` attempts were made."""
        if self.plan is None:
            raise ValueError("CapacityChain.next before plan_from")
        if not self.attempts:
            return self.plan.first
        if self.limit is not None and len(self.attempts) >= self.limit:
            return None
        return next_cluster(self.plan, [Attempt(a.cluster, a.failure) for a in self.attempts])

    @property
    def number(self) -> int:
        """The attempt number of the next submit (1: the job as written)."""
        return len(self.attempts) + 1

    def tags(self, cluster: Cluster) -> list[dict[str, str]]:
        """The tags of the next submit: its attempt number and cluster (``data=2 x ml.c5.xlarge / train=...``)."""
        return [
            {"Key": ATTEMPT_TAG, "Value": str(self.number)},
            {
                "Key": CLUSTER_TAG,
                "Value": tag_value(describe_cluster(cluster).replace(", ", " / ")),
            },  # no commas in tags
        ]

    def moves(self, cluster: Cluster) -> str:
        """``train_group ml.p4d.24xlarge x1 -> ml.p5.48xlarge x1``: what changed from the last attempt."""
        last = self.attempts[-1].cluster if self.attempts else cluster
        changed = [
            f"{new.name} {old.instance_type} x{old.instance_count} -> {new.instance_type} x{new.instance_count}"
            for old, new in zip(last, cluster, strict=True)
            if old != new
        ]
        return ", ".join(changed) or "no group moved"

    def fallback_message(self, cluster: Cluster) -> str:
        """The task log's line before a fallback: which job failed how, which groups move where."""
        last = self.attempts[-1]
        what = f"job {last.job_name}" if last.job_name else "the create"
        return (
            f"Capacity: {what} ({describe_cluster(last.cluster)}) failed: {last.failure.reason.rstrip('.')}. "
            f"Attempt {self.number}: {self.moves(cluster)}"
        )

    def exhausted_error(self) -> CapacityExhaustedError:
        """The task's one error when no cluster is left: each attempt, its cluster and its reason."""
        tried = [Attempt(a.cluster, a.failure) for a in self.attempts]
        bound = self.limit is not None and self.plan is not None and next_cluster(self.plan, tried) is not None
        why = f"capacity=CapacityFallback(attempts={self.limit}) reached" if bound else "every cluster was tried"
        lines = [
            f"  {i}. {a.job_name or '(create refused, no job)'}: {describe_cluster(a.cluster)}: {a.failure.reason}"
            for i, a in enumerate(self.attempts, 1)
        ]
        return CapacityExhaustedError(
            f"No capacity for this job ({why}; docs/capacity.md), {len(self.attempts)} attempts:\n" + "\n".join(lines),
            self.as_result(),
        )

    def as_result(self) -> list[dict[str, Any]]:
        """The attempts for the result dict's ``capacity_attempts`` (and a deferral's kwargs)."""
        return [a.as_dict() for a in self.attempts]
