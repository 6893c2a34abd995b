"""Admission: which RUNNABLE jobs of which queues start now, on which service environment (pure).

A job holds its instances (``InstanceCount``, or the sum over ``InstanceGroups``: our reading of a
rule Batch documents only for InstanceCount) from its admission until its training job has ended.
A job is admitted while those instances fit what its environment's ``maxCapacity`` leaves; the
environments of a queue are tried in their order; queues sharing an environment are served by
descending queue priority.

Order within a queue: FIFO (submission order) without a scheduling policy; with a fair-share
policy, the share whose recent usage weighs least goes next (the instances its attempts were
admitted with over the last ``shareDecaySeconds``, 600 when 0, times its ``weightFactor``: a share
of weight 0.125 gets 8 times the capacity of one of weight 1; a simplification of Batch's decayed
instance-time), and within a share the highest ``schedulingPriority``, then submission order.
``computeReservation`` is not emulated. The head of a queue blocks the jobs behind it until it
fits (no back-filling): the order is kept, and a large job is never starved by small ones. A job
larger than every environment of its queue can never fit: it is set aside (RUNNABLE with the
MISCONFIGURATION reason) and does not block the others.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from airflow_hetero.local.batch.models import JobQueue, SchedulingPolicy, ServiceEnvironment, ServiceJob


@dataclass
class QueueView:
    """One queue as the scheduler sees it: its RUNNABLE jobs ready to go, its policy, its shares' usage."""

    queue: JobQueue
    runnable: list[ServiceJob]
    policy: SchedulingPolicy | None = None
    share_usage: Counter[str] = field(default_factory=Counter)
    """Instances admitted for each share identifier within the policy's decay window."""


@dataclass
class Plan:
    """What to do now: jobs to admit (with their environment's ARN), jobs that can never fit, jobs blocked
    at the head of their queue (time-limit actions count for the last two)."""

    admit: list[tuple[ServiceJob, str]] = field(default_factory=list)
    misconfigured: list[ServiceJob] = field(default_factory=list)
    blocked: list[ServiceJob] = field(default_factory=list)


def next_job(jobs: list[ServiceJob], policy: SchedulingPolicy | None, usage: Counter[str]) -> ServiceJob | None:
    """The job the queue's order puts first (None when there is none)."""
    if not jobs:
        return None
    if policy is None:
        return min(jobs, key=lambda j: j.seq)
    heads: dict[str, ServiceJob] = {}
    for job in sorted(jobs, key=lambda j: (-(j.scheduling_priority or 0), j.seq)):
        heads.setdefault(job.share_identifier or "", job)
    return min(
        heads.values(), key=lambda j: (usage[j.share_identifier or ""] * policy.weight(j.share_identifier), j.seq)
    )


def queue_order(view: QueueView) -> list[ServiceJob]:
    """The RUNNABLE jobs in the order the queue would start them, were capacity free for each in turn
    (GetJobQueueSnapshot's front of the queue)."""
    left, usage, ordered = list(view.runnable), Counter(view.share_usage), []
    while (job := next_job(left, view.policy, usage)) is not None:
        ordered.append(job)
        left.remove(job)
        usage[job.share_identifier or ""] += job.instances
    return ordered


def plan(views: Iterable[QueueView], environments: dict[str, ServiceEnvironment], used: Counter[str]) -> Plan:
    """Admit what fits, queue by queue (descending priority), each in its own order. ``used`` (instances
    held per environment ARN) is not changed."""
    result, used = Plan(), Counter(used)
    for view in sorted(views, key=lambda v: (-v.queue.priority, v.queue.name)):
        envs = [environments[a] for a in view.queue.environments if a in environments]
        largest = max((e.max_capacity for e in envs), default=0)
        left: list[ServiceJob] = []
        for each in view.runnable:
            (result.misconfigured if each.instances > largest else left).append(each)
        usage = Counter(view.share_usage)
        while (job := next_job(left, view.policy, usage)) is not None:
            env = next(
                (e for e in envs if e.state == "ENABLED" and used[e.arn] + job.instances <= e.max_capacity), None
            )
            if env is None:
                result.blocked.append(job)
                break
            result.admit.append((job, env.arn))
            used[env.arn] += job.instances
            usage[job.share_identifier or ""] += job.instances
            left.remove(job)
    return result
