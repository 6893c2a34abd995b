"""The offline queue's operations and its scheduling thread.

:class:`BatchBackend` answers the service-job API over a :class:`~.store.BatchStore` and, in a
thread of its own, moves jobs on: SUBMITTED -> RUNNABLE, admission (:mod:`.scheduler`), each
attempt's status from its training job (:mod:`.lifecycle`), the queues' RUNNABLE time-limit
actions. The thread wakes at every request that changes something and every ``poll_interval``
seconds; a describe or list also brings the jobs it answers about up to date first, so a client
never sees a status older than its training job's.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local.batch import lifecycle, scheduler
from airflow_hetero.local.batch.exceptions import ClientException, not_found, refused
from airflow_hetero.local.batch.lifecycle import ACTIVE, Timing, TrainingJobs
from airflow_hetero.local.batch.models import (
    JobQueue,
    SchedulingPolicy,
    ServiceEnvironment,
    ServiceJob,
    arn,
    now_ms,
    payload_instances,
)
from airflow_hetero.local.batch.options import BatchOptions
from airflow_hetero.local.batch.store import BatchStore

log = logging.getLogger(__name__)

#: The decay window of a fair-share policy whose shareDecaySeconds is 0 (Batch's "default minimum").
DEFAULT_SHARE_DECAY_SECONDS = 600
#: Seconds :meth:`BatchBackend.stop` waits for the scheduling thread (its lock, then its end) before it goes on.
STOP_TIMEOUT = 5.0


class BatchBackend:
    """Service environments, job queues, fair-share policies and service jobs, run on the endpoint's training jobs."""

    def __init__(
        self,
        workdir: Path,
        training: TrainingJobs,
        options: BatchOptions | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.store = BatchStore(workdir)
        self.training = training
        self.options = options or BatchOptions()
        self.clock = clock
        """Milliseconds since the epoch (tests move time-limit actions on with their own clock)."""
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._positions: dict[str, tuple[tuple[int, int | None], int]] = {}
        """Job id -> ((its place at the front, since when it is RUNNABLE), since when it holds that place: ms).
        GetJobQueueSnapshot sees places only when asked: a job first seen since it became RUNNABLE holds its
        place since then, a job seen moving up since the snapshot that saw it there."""

    # -- the thread ------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="local-batch-queue", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """End the scheduling thread; bounded: at most ``timeout`` seconds in all, then a warning and on.

        The flag is set without the lock (the thread reads it at every pass, at least every
        ``poll_interval``): a pass that holds the lock for long delays the wake-up, never the stop.
        """
        deadline = time.monotonic() + timeout
        self._stopping = True
        if self._wake.acquire(timeout=timeout):
            try:
                self._wake.notify_all()
            finally:
                self._wake.release()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            log.warning(
                "the offline queue's scheduling thread %s did not end within %.1f s of the stop; going on without it",
                thread.name,
                timeout,
            )

    def wake(self) -> None:
        """Look at the queues now (after a change, or when a test moved the clock)."""
        with self._wake:
            self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._wake:
                if self._stopping:
                    return
                try:
                    self.tick()
                except Exception:
                    log.exception("the offline queue's scheduling pass failed")
                self._wake.wait(self.options.poll_interval)

    def _timing(self) -> Timing:
        return Timing(now=self.clock(), requeue_delay_ms=int(self.options.requeue_delay * 1000))

    def tick(self) -> None:
        """One pass: refresh active jobs, SUBMITTED -> RUNNABLE, admission, time-limit actions."""
        with self._lock:
            timing = self._timing()
            for job in list(self.store.jobs.values()):
                if job.status in ACTIVE and lifecycle.refresh(job, self.training, timing):
                    self.store.save_job(job)
                elif job.status == "SUBMITTED":
                    job.status, job.runnable_since = "RUNNABLE", timing.now
                    self.store.save_job(job)
            self._admit(timing)

    def _admit(self, timing: Timing) -> None:
        views = [self._view(queue, timing) for queue in self.store.queues.values()]
        used: Counter[str] = Counter()
        for job in self.store.jobs.values():
            if job.status in ACTIVE and job.environment is not None:
                used[job.environment] += job.instances
        plan = scheduler.plan(views, self.store.environments, used)
        for job, environment in plan.admit:
            lifecycle.start_attempt(job, environment, job.queue_arn.split(":")[3], self.training, timing)
            self.store.save_job(job)
        waiting = {j.job_id for j in plan.misconfigured} | {j.job_id for j in plan.blocked}
        for job in plan.misconfigured:
            if job.status_reason != facts.BATCH_MISCONFIGURATION_REASON:
                job.status_reason = facts.BATCH_MISCONFIGURATION_REASON
                self.store.save_job(job)
        misconfigured = {j.job_id for j in plan.misconfigured}
        for view in views:
            for job in view.runnable:
                grew = job.status == "RUNNABLE" and job.job_id not in misconfigured  # its environment grew
                if grew and job.status_reason == facts.BATCH_MISCONFIGURATION_REASON:
                    job.status_reason = None
                    self.store.save_job(job)
                self._time_limits(job, view.queue, job.job_id in waiting, timing)

    def _view(self, queue: JobQueue, timing: Timing) -> scheduler.QueueView:
        policy = self.store.policies.get(queue.scheduling_policy_arn or "")
        jobs = [j for j in self.store.jobs.values() if j.queue_arn == queue.arn]
        runnable = [j for j in jobs if j.status == "RUNNABLE" and (j.not_before or 0) <= timing.now]
        usage: Counter[str] = Counter()
        if policy is not None:
            window = (policy.share_decay_seconds or DEFAULT_SHARE_DECAY_SECONDS) * 1000
            for job in jobs:
                # attempts requeued after a CapacityError never held the capacity: they weigh nothing
                recent = [a for a in job.attempt_list() if a.counted and timing.now - a.started_at <= window]
                usage[job.share_identifier or ""] += job.instances * len(recent)
        return scheduler.QueueView(queue, sorted(runnable, key=lambda j: j.seq), policy, usage)

    def _time_limits(self, job: ServiceJob, queue: JobQueue, waiting: bool, timing: Timing) -> None:
        if not waiting:
            if job.blocked_since is not None:
                job.blocked_since = None
                self.store.save_job(job)
            return
        if job.blocked_since is None:
            job.blocked_since = timing.now
            self.store.save_job(job)
        for limit in queue.limits():
            if timing.now - job.blocked_since >= limit.max_time_seconds * 1000:
                lifecycle.terminate_now(job, limit.reason, timing)
                self.store.save_job(job)
                return

    # -- service environments ----------------------------------------------------------------------
    def _environment(self, ref: str) -> ServiceEnvironment:
        for env in self.store.environments.values():
            if ref in (env.arn, env.name):
                return env
        raise not_found("Service environment", ref)

    def create_service_environment(self, body: dict[str, Any], region: str) -> dict[str, Any]:
        with self._lock:
            name = body["serviceEnvironmentName"]
            if any(e.name == name for e in self.store.environments.values()):
                raise refused(f"Service environment {name} already exists")
            env = ServiceEnvironment(
                name=name,
                arn=arn(region, "service-environment", name),
                max_capacity=int(body["capacityLimits"][0]["maxCapacity"]),
                state=body.get("state") or "ENABLED",
                tags=body.get("tags"),
            )
            self.store.environments[env.arn] = env
            self.store.save_resources()
            return {"serviceEnvironmentName": env.name, "serviceEnvironmentArn": env.arn}

    def describe_service_environments(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            refs = body.get("serviceEnvironments")
            envs = [e for e in self.store.environments.values() if not refs or e.arn in refs or e.name in refs]
            return _paged("serviceEnvironments", [e.describe() for e in envs], body)

    def update_service_environment(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            env = self._environment(body["serviceEnvironment"])
            if body.get("state"):
                env.state = body["state"]
            if body.get("capacityLimits"):
                env.max_capacity = int(body["capacityLimits"][0]["maxCapacity"])
            self.store.save_resources()
            self._wake.notify_all()
            return {"serviceEnvironmentName": env.name, "serviceEnvironmentArn": env.arn}

    def delete_service_environment(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            env = self._environment(body["serviceEnvironment"])
            if env.state != "DISABLED":
                raise refused(f"Service environment {env.name} must be DISABLED before it is deleted")
            users = [q.name for q in self.store.queues.values() if env.arn in q.environments]
            if users:
                raise refused(f"Service environment {env.name} is still used by job queue(s) {', '.join(users)}")
            del self.store.environments[env.arn]
            self.store.save_resources()
            return {}

    # -- job queues and scheduling policies ----------------------------------------------------------
    def queue(self, ref: str) -> JobQueue:
        for queue in self.store.queues.values():
            if ref in (queue.arn, queue.name):
                return queue
        raise ClientException(facts.BATCH_QUEUE_NOT_FOUND.format(queue=ref))

    def create_job_queue(self, body: dict[str, Any], region: str) -> dict[str, Any]:
        with self._lock:
            name = body["jobQueueName"]
            if any(q.name == name for q in self.store.queues.values()):
                raise refused(f"Job queue {name} already exists")
            orders = sorted(body["serviceEnvironmentOrder"], key=lambda o: o["order"])
            envs = [self._environment(o["serviceEnvironment"]) for o in orders]
            policy = body.get("schedulingPolicyArn")
            if policy and policy not in self.store.policies:
                raise not_found("Scheduling policy", policy)
            queue = JobQueue(
                name=name,
                arn=arn(region, "job-queue", name),
                priority=int(body["priority"]),
                environments=[e.arn for e in envs],
                environment_orders=[int(o["order"]) for o in orders],
                scheduling_policy_arn=policy,
                time_limits=[dict(a) for a in body.get("jobStateTimeLimitActions") or []],
                state=body.get("state") or "ENABLED",
                tags=body.get("tags"),
            )
            self.store.queues[queue.arn] = queue
            self.store.save_resources()
            return {"jobQueueName": queue.name, "jobQueueArn": queue.arn}

    def describe_job_queues(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            refs = body.get("jobQueues")
            queues = [q for q in self.store.queues.values() if not refs or q.arn in refs or q.name in refs]
            return _paged("jobQueues", [q.describe() for q in queues], body)

    def create_scheduling_policy(self, body: dict[str, Any], region: str) -> dict[str, Any]:
        with self._lock:
            name = body["name"]
            if any(p.name == name for p in self.store.policies.values()):
                raise refused(f"Scheduling policy {name} already exists")
            fair = body.get("fairsharePolicy") or {}
            policy = SchedulingPolicy(
                name=name,
                arn=arn(region, "scheduling-policy", name),
                shares=[dict(s) for s in fair.get("shareDistribution") or []],
                share_decay_seconds=int(fair.get("shareDecaySeconds", 0)),
                compute_reservation=int(fair.get("computeReservation", 0)),
                tags=body.get("tags"),
            )
            self.store.policies[policy.arn] = policy
            self.store.save_resources()
            return {"name": policy.name, "arn": policy.arn}

    # -- service jobs --------------------------------------------------------------------------------
    def submit_service_job(self, body: dict[str, Any], region: str) -> dict[str, Any]:
        with self._lock:
            queue = self.queue(body["jobQueue"])
            if queue.state != "ENABLED":
                raise refused(f"Job queue {queue.name} is {queue.state}: it accepts no new jobs")
            fair = queue.scheduling_policy_arn is not None
            if fair and not body.get("shareIdentifier"):
                raise refused(f"shareIdentifier is required: job queue {queue.name} has a fair-share scheduling policy")
            if not fair and body.get("shareIdentifier"):
                raise refused(
                    f"shareIdentifier is not allowed: job queue {queue.name} has no fair-share scheduling policy"
                )
            token = body.get("clientToken")
            if token is not None and token in self.store.tokens:
                raise refused(
                    f"A SubmitServiceJob request with clientToken {token} was already received; the second request "
                    "is rejected (look the job up by name with ListServiceJobs)"
                )
            job_id = str(uuid.uuid4())
            timing = self._timing()
            job = ServiceJob(
                job_id=job_id,
                job_name=body["jobName"],
                job_arn=arn(queue.arn.split(":")[3] or region, "service-job", job_id),
                queue_arn=queue.arn,
                payload=body["serviceRequestPayload"],
                created_at=timing.now,
                seq=max((j.seq for j in self.store.jobs.values()), default=0) + 1,
                instances=payload_instances(body["serviceRequestPayload"]),
                retry_strategy=body.get("retryStrategy"),
                scheduling_priority=body.get("schedulingPriority"),
                share_identifier=body.get("shareIdentifier"),
                timeout_config=body.get("timeoutConfig"),
                preemption_configuration=body.get("preemptionConfiguration"),
                tags=body.get("tags"),
                client_token=token,
            )
            self.store.save_job(job)
            if token is not None:
                self.store.tokens[token] = job_id
                self.store.save_resources()
            self._wake.notify_all()
            return {"jobArn": job.job_arn, "jobName": job.job_name, "jobId": job.job_id}

    def job(self, ref: str) -> ServiceJob:
        """A job by id or ARN."""
        job = self.store.jobs.get(ref) or self.store.jobs.get(ref.rpartition("/")[2])
        if job is None:
            raise not_found("Service job", ref)
        return job

    def _fresh(self, job: ServiceJob) -> ServiceJob:
        if job.status in ACTIVE and lifecycle.refresh(job, self.training, self._timing()):
            self.store.save_job(job)
            self._wake.notify_all()
        return job

    def describe_service_job(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._fresh(self.job(body["jobId"])).describe()

    def terminate_service_job(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            job = self._fresh(self.job(body["jobId"]))
            reason = body["reason"]
            if job.final:
                return {}
            if job.status in ACTIVE:
                job.is_terminated, job.terminate_reason = True, reason
                latest = job.latest()
                if latest is not None:
                    self.training.stop(latest.training_job_name)
            else:
                lifecycle.terminate_now(job, reason, self._timing())
            self.store.save_job(job)
            self._wake.notify_all()
            return {}

    def update_service_job(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            job = self.job(body["jobId"])
            if body.get("schedulingPriority") is not None:
                job.scheduling_priority = int(body["schedulingPriority"])
                self.store.save_job(job)
                self._wake.notify_all()
            return {"jobArn": job.job_arn, "jobName": job.job_name, "jobId": job.job_id}

    def list_service_jobs(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            jobs = list(self.store.jobs.values())
            if body.get("jobQueue"):
                queue = self.queue(body["jobQueue"])
                jobs = [j for j in jobs if j.queue_arn == queue.arn]
            jobs = [self._fresh(j) for j in jobs]
            filters = body.get("filters") or []
            status = body.get("jobStatus")
            if not filters or filters[0]["name"] == "SHARE_IDENTIFIER":
                wanted = status or facts.BATCH_LIST_DEFAULT_STATUS
                jobs = [j for j in jobs if j.status == wanted]
            for item in filters:
                jobs = [j for j in jobs if _matches(j, item["name"], item["values"])]
            jobs.sort(key=lambda j: (j.created_at, j.seq), reverse=True)
            return _paged("jobSummaryList", [j.summary() for j in jobs], body)

    def get_job_queue_snapshot(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            queue = self.queue(body["jobQueue"])
            timing = self._timing()
            view = self._view(queue, timing)
            view.runnable = sorted(
                (j for j in self.store.jobs.values() if j.queue_arn == queue.arn and j.status == "RUNNABLE"),
                key=lambda j: j.seq,
            )
            front = scheduler.queue_order(view)[: facts.BATCH_SNAPSHOT_FRONT_JOBS]
            jobs = []
            for position, job in enumerate(front):
                place = (position, job.runnable_since)  # a job requeued to the same place got there anew
                seen = self._positions.get(job.job_id)
                if seen is None or seen[0] != place:
                    anew = seen is None or seen[0][1] != job.runnable_since  # first seen since it became RUNNABLE
                    seen = (place, job.runnable_since if anew and job.runnable_since is not None else timing.now)
                    self._positions[job.job_id] = seen
                jobs.append({"jobArn": job.job_arn, "earliestTimeAtPosition": seen[1]})
            at_front = {job.job_id for job in front}
            for job in self.store.jobs.values():  # forget the places of this queue's jobs no longer at the front
                if job.queue_arn == queue.arn and job.job_id not in at_front:
                    self._positions.pop(job.job_id, None)
            held = [j for j in self.store.jobs.values() if j.queue_arn == queue.arn and j.status in ACTIVE]
            usage = {"capacityUnit": facts.BATCH_CAPACITY_UNIT, "quantity": float(sum(j.instances for j in held))}
            utilization: dict[str, Any] = {"totalCapacityUsage": [usage], "lastUpdatedAt": timing.now}
            if view.policy is not None:
                shares: Counter[str] = Counter()
                for job in held:
                    shares[job.share_identifier or ""] += job.instances
                utilization["fairshareUtilization"] = {
                    "activeShareCount": len(shares),
                    "topCapacityUtilization": [
                        {
                            "shareIdentifier": share,
                            "capacityUsage": [{"capacityUnit": facts.BATCH_CAPACITY_UNIT, "quantity": float(n)}],
                        }
                        for share, n in shares.most_common()
                    ],
                }
            return {
                "frontOfQueue": {"jobs": jobs, "lastUpdatedAt": timing.now},
                "queueUtilization": utilization,
            }


def _matches(job: ServiceJob, name: str, values: list[str]) -> bool:
    """A ListServiceJobs filter: JOB_NAME is case-insensitive, a trailing ``*`` a prefix; times in ms."""
    if name == "JOB_NAME":
        own = job.job_name.lower()
        return any(own.startswith(v[:-1].lower()) if v.endswith("*") else own == v.lower() for v in values)
    if name == "SHARE_IDENTIFIER":
        return job.share_identifier in values
    try:
        bounds = [int(v) for v in values]
    except ValueError:
        raise refused(f"{name} takes milliseconds since the epoch; got {values}") from None
    if name == "BEFORE_CREATED_AT":
        return any(job.created_at < b for b in bounds)
    return any(job.created_at > b for b in bounds)


def _paged(key: str, items: list[dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
    """``{key: one page of items}`` from ``nextToken`` (an opaque offset), ``maxResults`` (default 100) long,
    with the ``nextToken`` of the next page when there is one."""
    token = body.get("nextToken")
    try:
        offset = int(base64.urlsafe_b64decode(str(token).encode()).decode()) if token else 0
    except ValueError:
        raise refused("Invalid nextToken") from None
    size = int(body.get("maxResults") or facts.BATCH_LIST_MAX_RESULTS)
    answer: dict[str, Any] = {key: items[offset : offset + size]}
    if offset + size < len(items):
        answer["nextToken"] = base64.urlsafe_b64encode(str(offset + size).encode()).decode()
    return answer
