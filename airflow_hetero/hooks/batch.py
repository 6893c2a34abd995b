"""HeteroBatchHook: AWS Batch service-job calls (queue mode) through the Amazon provider's AwsBaseHook.

The same connection, region, endpoint, ``verify`` and botocore config as the training hook (``client_type``
"batch"); no credential handling of its own. Calls used while polling retry transient errors.

SubmitServiceJob is sent exactly once, as CreateTrainingJob is: through a client whose botocore retries are off,
and after an unclear outcome (timeout, reset, 5xx, throttling, a refused ``clientToken``) the service job is looked
up by name (``ListServiceJobs`` with the ``JOB_NAME`` filter: without a filter or a status Batch lists only
RUNNING jobs) and adopted when its identity tags are the task instance's; the request is sent again (same token)
only when no such job exists.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import Any

from airflow_hetero._retry import error_code, is_transient
from airflow_hetero.hooks.aws_base import HeteroAwsHook
from airflow_hetero.hooks.training import JobNameTakenError
from airflow_hetero.job.service_job import identity_of_service_job

#: Pages of a by-name listing read at most (a name's jobs: one per submit, newest first).
NAME_LIST_MAX_PAGES = 5


def unclear_submit(exc: BaseException) -> bool:
    """True when a SubmitServiceJob error leaves open whether the job was created."""
    if is_transient(exc):
        return True
    message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", ""))
    return error_code(exc) == "ClientException" and "clienttoken" in message.lower()


class HeteroBatchHook(HeteroAwsHook):
    """Submit, find, describe, terminate service jobs; a queue's front (GetJobQueueSnapshot).

    :param aws_conn_id: Airflow AWS connection (``endpoint_url`` in its extra is honoured).
    :param region_name: overrides the connection's region.
    :param retry_policy: backoff for transient errors while polling.
    Other keyword arguments (``verify``, ``config``) go to ``AwsBaseHook``.
    """

    aws_service = "batch"

    @cached_property
    def submit_client(self) -> Any:
        """Batch client for SubmitServiceJob only: botocore's own retries off (see the module doc)."""
        return self.no_retry_client()

    def describe_service_job(self, job_id: str) -> dict[str, Any]:
        """DescribeServiceJob, transient errors retried."""
        return dict(self.call(self.conn.describe_service_job, f"DescribeServiceJob {job_id}", jobId=job_id))

    def find_service_jobs(self, name: str) -> list[dict[str, Any]]:
        """The descriptions of the service jobs named exactly ``name`` (the filter ignores case), newest first."""
        kwargs: dict[str, Any] = {"filters": [{"name": "JOB_NAME", "values": [name]}]}
        found: list[dict[str, Any]] = []
        for _ in range(NAME_LIST_MAX_PAGES):
            page = self.call(self.conn.list_service_jobs, f"ListServiceJobs {name}", **kwargs)
            found += [s for s in page.get("jobSummaryList") or [] if s.get("jobName") == name]
            token = page.get("nextToken")
            if not token:
                break
            kwargs["nextToken"] = token
        found.sort(key=lambda s: s.get("createdAt") or 0, reverse=True)
        return [self.describe_service_job(str(s["jobId"])) for s in found]

    def submit_service_job(self, request: dict[str, Any], *, identity: str) -> dict[str, Any]:
        """Submit ``request`` (SubmitServiceJob kwargs) exactly once; the answer (``"Adopted": True`` when an
        unclear outcome was followed by finding the job). A job of the name with another identity raises
        :class:`~airflow_hetero.hooks.training.JobNameTakenError`."""
        name = request["jobName"]
        attempt = 1
        while True:
            try:
                return dict(self.submit_client.submit_service_job(**request))
            except Exception as exc:
                if not unclear_submit(exc):
                    raise
                self.log.warning("SubmitServiceJob %s: outcome unknown (%s); looking the job up by name", name, exc)
                existing = self.find_service_jobs(name)
                if existing:
                    found = identity_of_service_job(existing[0])
                    if found != identity:
                        raise JobNameTakenError(name, found) from exc
                    self.log.warning("Service job %s exists with this task's identity: adopting it", name)
                    job = existing[0]
                    return {"jobId": job["jobId"], "jobArn": job.get("jobArn"), "jobName": name, "Adopted": True}
                if attempt >= self.retry_policy.max_attempts:
                    raise
                delay = self.retry_policy.delay(attempt)
                self.log.warning("Service job %s does not exist: sending SubmitServiceJob again in %.1fs", name, delay)
                time.sleep(delay)
                attempt += 1

    def terminate_service_job(self, job_id: str, reason: str) -> bool:
        """TerminateServiceJob (which stops its training job); False when Batch refused it (finished, unknown)."""
        try:
            self.call(self.conn.terminate_service_job, f"TerminateServiceJob {job_id}", jobId=job_id, reason=reason)
        except Exception as exc:
            if error_code(exc) != "ClientException":
                raise
            self.log.info("Service job %s not terminated: %s", job_id, exc)
            return False
        return True

    def queue_place(self, queue: str, job_arn: str | None) -> int | None:
        """The job's place (1-based) at the front of ``queue`` (GetJobQueueSnapshot), 0 beyond the first 100,
        None when the snapshot cannot be read (logs are a convenience)."""
        try:
            snapshot = self.call(self.conn.get_job_queue_snapshot, f"GetJobQueueSnapshot {queue}", jobQueue=queue)
        except Exception as exc:
            self.log.info("Could not read the front of queue %s: %s", queue, exc)
            return None
        return place_in_snapshot(snapshot, job_arn)


def place_in_snapshot(snapshot: dict[str, Any], job_arn: str | None) -> int:
    """The 1-based place of ``job_arn`` in a GetJobQueueSnapshot answer's front of the queue, 0 when absent."""
    jobs = (snapshot.get("frontOfQueue") or {}).get("jobs") or []
    arns = [j.get("jobArn") for j in jobs]
    return arns.index(job_arn) + 1 if job_arn in arns else 0
