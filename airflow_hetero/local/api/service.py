"""The training-job actions: CreateTrainingJob, DescribeTrainingJob, StopTrainingJob, ListTrainingJobs.

Holds the job store and the running jobs; at most ``RunOptions.max_hosts`` hosts run at once, and a
CreateTrainingJob beyond that answers ``ResourceLimitExceeded``, as SageMaker does at a quota.
Requests are plain dicts (the JSON 1.1 bodies) and answers are dicts shaped like SageMaker's, with
timestamps as epoch seconds. At start-up, a job left InProgress or Stopping by a previous endpoint
process is ended Failed with a reason saying why: its hosts were supervised by a process that is gone.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import logging
import os
import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow_hetero.job.resource_config import instance_groups
from airflow_hetero.local.api.errors import ServiceError, not_found, validation
from airflow_hetero.local.api.request_rules import validate_create
from airflow_hetero.local.host.process import kill_tree
from airflow_hetero.local.training.clients import Clients
from airflow_hetero.local.training.layout import plan_cluster
from airflow_hetero.local.training.runner import JobRunner, RunOptions
from airflow_hetero.local.training.store import TERMINAL, JobExists, JobStore, add_transition, finish

log = logging.getLogger(__name__)

ACCOUNT_ID = "123456789012"
MAX_SLOTS = 254
_DEFAULTS: dict[str, Any] = {
    "HyperParameters": {},
    "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    "EnableNetworkIsolation": False,
    "EnableInterContainerTrafficEncryption": False,
    "EnableManagedSpotTraining": False,
}


@functools.cache
def _describe_members() -> frozenset[str]:
    from airflow_hetero.local.api.constraints import service_model

    return frozenset(service_model().operation_model("DescribeTrainingJob").output_shape.members)


def _epoch(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise validation(f"Invalid timestamp: {value}") from exc


class TrainingService:
    """SageMaker's training-job API over a :class:`JobStore`, running jobs as local processes."""

    def __init__(self, workdir: Path, *, seed: int = 0, options: RunOptions | None = None) -> None:
        self.workdir = workdir
        self.store = JobStore(workdir)
        self._seed = seed
        self._options = options or RunOptions()
        self._lock = threading.Lock()
        self._runners: dict[str, JobRunner] = {}
        self._slots: dict[str, int] = {}
        self._hosts_running: dict[str, int] = {}
        self._clients: Clients | None = None
        self.recovered = self.recover()

    def attach(self, endpoint_url: str) -> None:
        """Set the URL the service's own S3/Logs/CloudWatch calls go to (the endpoint's URL)."""
        self._clients = Clients(endpoint_url)

    # -- restart -----------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """End every job a previous endpoint process left unfinished; return their names."""
        recovered = []
        for record in self.store.records():
            if record["TrainingJobStatus"] in TERMINAL:
                continue
            name = record["TrainingJobName"]
            hosts = self.store.load_hosts(name)
            killed = {h["host"]: _kill_if_alive(h) for h in hosts}
            survivors = [name for name, proc in killed.items() if proc is not None]
            _wait_dead([proc for proc in killed.values() if proc is not None])
            gone = [h["host"] for h in hosts if h["host"] not in survivors]
            state = f"{record['TrainingJobStatus']} ({record.get('SecondaryStatus')})"
            reason = f"InternalServerError: The local endpoint was restarted while the job was {state}; "
            if not hosts:
                reason += "no host had been started yet."
            else:
                if gone:
                    reason += f"host processes {', '.join(gone)} were already gone"
                if survivors:
                    reason += ("; " if gone else "") + f"orphaned hosts {', '.join(survivors)} were terminated"
                reason += ". The job cannot be resumed."

            def change(r: dict[str, Any], reason: str = reason) -> None:
                r["FailureReason"] = reason
                finish(r, "Failed", "Failed", "Training job failed")

            self.store.update(name, change)
            recovered.append(name)
        return recovered

    # -- actions -------------------------------------------------------------------------------
    def create(self, request: dict[str, Any], region: str) -> dict[str, Any]:
        """CreateTrainingJob: validate, record the job as InProgress/Starting, start running it."""
        if self._clients is None:
            raise ServiceError("InternalFailure", "The endpoint is not serving yet", 500)
        validate_create(request)
        name = request["TrainingJobName"]
        now = time.time()
        record = {k: copy.deepcopy(v) for k, v in request.items() if k in _describe_members()}
        for key, value in _DEFAULTS.items():
            record.setdefault(key, copy.deepcopy(value))
        record["OutputDataConfig"].setdefault("KmsKeyId", "")
        profiler = record.get("ProfilerConfig")
        record["ProfilingStatus"] = "Enabled" if profiler and not profiler.get("DisableProfiler") else "Disabled"
        arn = f"arn:aws:sagemaker:{region}:{ACCOUNT_ID}:training-job/{name.lower()}"
        record.update(
            {
                "TrainingJobName": name,
                "TrainingJobArn": arn,
                "TrainingJobStatus": "InProgress",
                "CreationTime": now,
                "LastModifiedTime": now,
                "_Region": region,
                "_Tags": copy.deepcopy(request.get("Tags") or []),
            }
        )
        add_transition(record, "Starting", "Preparing the instances for training", now)
        hosts = sum(g.instance_count for g in instance_groups(request))
        with self._lock:
            slot = next((s for s in range(1, MAX_SLOTS + 1) if s not in self._slots.values()), None)
            if slot is None:
                raise ServiceError("ResourceLimitExceeded", f"The local endpoint runs at most {MAX_SLOTS} jobs at once")
            running = sum(self._hosts_running.values())
            limit = self._options.max_hosts
            if running + hosts > limit:
                raise ServiceError(
                    "ResourceLimitExceeded",
                    f"The account-level service limit 'local endpoint concurrent hosts' is {limit} Instances, "
                    f"with current utilization of {running} Instances and a request delta of {hosts} Instances. "
                    "Wait for running jobs to end, or start the endpoint with a higher --max-hosts.",
                )
            try:
                self.store.create(record)
            except JobExists as exc:
                raise ServiceError(
                    "ResourceInUse",
                    "Training job names must be unique within an AWS account and region, and a training "
                    f"job with this name already exists ({exc.arn})",
                ) from None
            except OSError as exc:
                raise ServiceError(
                    "ResourceLimitExceeded",
                    f"The local endpoint could not record training job {name} in {self.store.root}: "
                    f"{exc.strerror or exc}. No job was created; free some space and try again.",
                ) from exc
            self._slots[self.store.key(name)] = slot
            self._hosts_running[self.store.key(name)] = hosts
        try:
            cluster = plan_cluster(
                instance_groups(request),
                seed=f"{self._seed}/{name}",
                slot=slot,
                hosts_root=self.store.job_dir(name) / "hosts",
            )
            runner = JobRunner(
                name=name,
                store=self.store,
                clients=self._clients,
                region=region,
                cluster=cluster,
                options=self._options,
                on_done=self._done,
            )
            with self._lock:
                self._runners[self.store.key(name)] = runner
            runner.start()
        except Exception as exc:  # never leave a recorded job InProgress without a runner
            self._done(name)
            reason = f"InternalServerError: the local endpoint could not start the job: {exc!r}"

            def failed(r: dict[str, Any], reason: str = reason) -> None:
                r["FailureReason"] = reason
                finish(r, "Failed", "Failed", "Training job failed")

            self.store.update(name, failed)
            raise
        return {"TrainingJobArn": arn}

    def _done(self, name: str) -> None:
        with self._lock:
            self._runners.pop(self.store.key(name), None)
            self._slots.pop(self.store.key(name), None)
            self._hosts_running.pop(self.store.key(name), None)

    def describe(self, request: dict[str, Any]) -> dict[str, Any]:
        """DescribeTrainingJob; ValidationException "Requested resource not found." when unknown."""
        record = self.store.get(str(request.get("TrainingJobName", "")))
        if record is None:
            raise not_found()
        return {k: v for k, v in record.items() if not k.startswith("_")}

    def stop(self, request: dict[str, Any]) -> dict[str, Any]:
        """StopTrainingJob: InProgress -> Stopping; the runner terminates the hosts and ends it Stopped."""
        name = str(request.get("TrainingJobName", ""))
        record = self.store.get(name)
        if record is None:
            raise not_found()
        with self._lock:
            runner = self._runners.get(self.store.key(name))

        def stopping(r: dict[str, Any]) -> None:
            # checked under the store's lock: the job may have ended since it was read above
            status = r["TrainingJobStatus"]
            if status == "InProgress" and runner is not None:
                r["TrainingJobStatus"] = "Stopping"
                add_transition(r, "Stopping", "Stopping the training job")
            elif status != "Stopping":
                raise validation(f"The request was rejected because the training job is in status {status}.")

        self.store.update(name, stopping)
        if runner is not None:
            runner.request_stop()
        return {}

    def list(self, request: dict[str, Any]) -> dict[str, Any]:
        """ListTrainingJobs with the name/status/time filters, sorting and NextToken paging."""
        records = self.store.records()
        contains = request.get("NameContains")
        if contains:
            records = [r for r in records if str(contains).lower() in r["TrainingJobName"].lower()]
        if request.get("StatusEquals"):
            records = [r for r in records if r["TrainingJobStatus"] == request["StatusEquals"]]
        bounds = (
            ("CreationTimeAfter", "CreationTime", 1),
            ("CreationTimeBefore", "CreationTime", -1),
            ("LastModifiedTimeAfter", "LastModifiedTime", 1),
            ("LastModifiedTimeBefore", "LastModifiedTime", -1),
        )
        for param, field, sign in bounds:
            if request.get(param) is not None:
                limit = _epoch(request[param])
                records = [r for r in records if (r[field] - limit) * sign > 0]
        sort_by = request.get("SortBy") or "CreationTime"
        sort_field = {
            "Name": "TrainingJobName",
            "CreationTime": "CreationTime",
            "Status": "TrainingJobStatus",
        }.get(sort_by)
        if sort_field is None:
            raise validation(f"Invalid SortBy: {sort_by}")
        records.sort(key=lambda r: r[sort_field], reverse=(request.get("SortOrder") or "Descending") == "Descending")
        max_results = int(request.get("MaxResults") or 10)
        if not 1 <= max_results <= 100:
            raise validation("MaxResults must be between 1 and 100")
        offset = _decode_token(request.get("NextToken"))
        page = records[offset : offset + max_results]
        keys = (
            "TrainingJobName",
            "TrainingJobArn",
            "CreationTime",
            "TrainingEndTime",
            "LastModifiedTime",
            "TrainingJobStatus",
            "SecondaryStatus",
        )
        answer: dict[str, Any] = {"TrainingJobSummaries": [{k: r[k] for k in keys if k in r} for r in page]}
        if offset + max_results < len(records):
            answer["NextToken"] = base64.urlsafe_b64encode(str(offset + max_results).encode()).decode()
        return answer

    # -- shutdown ------------------------------------------------------------------------------
    def shutdown(self, timeout: float = 30.0) -> None:
        """End every running job Failed (hosts terminated) because the endpoint is going away."""
        with self._lock:
            runners = list(self._runners.values())
        for runner in runners:
            runner.abort(
                "InternalServerError: The local endpoint shut down while the job was running; "
                "its hosts were terminated."
            )
        for runner in runners:
            runner.join(timeout)


def _decode_token(token: Any) -> int:
    if not token:
        return 0
    try:
        return int(base64.urlsafe_b64decode(str(token).encode()).decode())
    except ValueError as exc:
        raise validation("Invalid pagination token") from exc


def _kill_if_alive(host: dict[str, Any]) -> Any:
    """SIGKILL a host's process tree and group left by a previous endpoint process.

    Returns the psutil process when it was still running (and really is that host: same pid and
    start time), None when it was already gone.
    """
    import psutil

    pid, created = host.get("pid"), host.get("create_time")
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        if created is not None and abs(proc.create_time() - created) > 0.01:
            return None  # the pid was reused by an unrelated process
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None  # dead, only waiting to be reaped by its new parent
        kill_tree(pid)  # the host shim and everything it still holds, also in other sessions
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        return proc
    except (psutil.Error, ProcessLookupError, PermissionError):
        return None


def _wait_dead(procs: list[Any], timeout: float = 5.0) -> None:
    """Wait until every process is gone or a zombie (orphans are reaped by init, not by us)."""
    import psutil

    deadline = time.monotonic() + timeout
    for proc in procs:
        while time.monotonic() < deadline:
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.Error:
                break
            time.sleep(0.02)
