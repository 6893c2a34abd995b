"""The training-job actions: CreateTrainingJob, DescribeTrainingJob, StopTrainingJob, ListTrainingJobs.

Holds the job store and the running jobs; at most ``RunOptions.max_hosts`` hosts run at once, and a
CreateTrainingJob beyond that answers ``ResourceLimitExceeded``, as SageMaker does at a quota; so
does one beyond the account quota of an instance type (:class:`CapacityLedger`, which the runner
asks for the job's instances when it launches them).
Requests are plain dicts (the JSON 1.1 bodies) and answers are dicts shaped like SageMaker's, with
timestamps as epoch seconds. At start-up, a job left InProgress or Stopping by a previous endpoint
process is ended Failed with a reason saying why: its hosts were supervised by a process that is gone;
every process a previous endpoint's hosts left running (found by pid and start time, and by the
host mark in their environment) is killed and listed in :attr:`TrainingService.ended`. Shutdown is
bounded: each running job gets ``stop_grace`` plus ``SHUTDOWN_MARGIN`` seconds to end by itself,
then every process of its hosts is killed and the job recorded Failed.
"""

from __future__ import annotations

import base64
import copy
import functools
import logging
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow_hetero.job.resource_config import instance_groups
from airflow_hetero.local.api.constraints import check_constraints
from airflow_hetero.local.api.errors import (
    ServiceError,
    not_found,
    quota_exceeded,
    resource_limit_exceeded,
    validation,
)
from airflow_hetero.local.api.validators import validate_create
from airflow_hetero.local.host.process import EndedProcess, kill_tree, wait_gone
from airflow_hetero.local.training.capacity import CapacityLedger, QuotaExceeded
from airflow_hetero.local.training.clients import Clients
from airflow_hetero.local.training.layout import plan_cluster
from airflow_hetero.local.training.options import RunOptions
from airflow_hetero.local.training.runner import JobRunner
from airflow_hetero.local.training.store import TERMINAL, JobExists, JobStore, add_transition, finish
from airflow_hetero.sagemaker_facts import DEFAULT_MAX_RUNTIME_SECONDS

log = logging.getLogger(__name__)

ACCOUNT_ID = "123456789012"
MAX_SLOTS = 254
#: Seconds a job gets beyond ``stop_grace`` to end by itself at shutdown before its hosts are killed.
SHUTDOWN_MARGIN = 3.0
#: Seconds shutdown waits for the service's lock (a create holding it while it records a job) before it goes on.
SHUTDOWN_LOCK_TIMEOUT = 5.0
SHUTDOWN_REASON = (
    "InternalServerError: The local endpoint shut down while the job was running; its hosts were terminated."
)
_DEFAULTS: dict[str, Any] = {
    "HyperParameters": {},
    "StoppingCondition": {"MaxRuntimeInSeconds": DEFAULT_MAX_RUNTIME_SECONDS},
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

    def __init__(
        self,
        workdir: Path,
        *,
        seed: int = 0,
        options: RunOptions | None = None,
        capacity: CapacityLedger | None = None,
    ) -> None:
        self.workdir = workdir
        self.capacity = capacity if capacity is not None else CapacityLedger()
        """Instances of each type available and allowed (unlimited unless told): :mod:`..training.capacity`."""
        self.store = JobStore(workdir)
        self._seed = seed
        self._options = options or RunOptions()
        self._lock = threading.Lock()
        self._runners: dict[str, JobRunner] = {}
        self._slots: dict[str, int] = {}
        self._hosts_running: dict[str, int] = {}
        self._clients: Clients | None = None
        self._closing = False
        self.ended: list[EndedProcess] = []
        """Processes a previous endpoint's hosts left running, killed at start-up."""
        self.recovered = self.recover()

    def attach(self, endpoint_url: str) -> None:
        """Set the URL the service's own S3/Logs/CloudWatch calls go to (the endpoint's URL)."""
        self._clients = Clients(endpoint_url)

    # -- restart -----------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """End every job a previous endpoint process left unfinished and kill every process its hosts
        left running (listed in :attr:`ended`); return the names of the jobs."""
        recovered = []
        for record in self.store.records():
            if record["TrainingJobStatus"] in TERMINAL:
                continue
            name = record["TrainingJobName"]
            reason = self._recover_job(name, f"{record['TrainingJobStatus']} ({record.get('SecondaryStatus')})")

            def change(r: dict[str, Any], reason: str = reason) -> None:
                r["FailureReason"] = reason
                finish(r, "Failed", "Failed", "Training job failed")

            self.store.update(name, change)
            recovered.append(name)
        seen = {e.pid for e in self.ended}  # killed above, but perhaps not gone yet
        leftovers = [e for e in kill_tree(root=self.store.root) if e.pid not in seen]  # what ended jobs left
        wait_gone(leftovers)
        self.ended.extend(leftovers)
        return recovered

    def _recover_job(self, name: str, state: str) -> str:
        """Kill what is left of one unfinished job's hosts; the job's FailureReason."""
        hosts = self.store.load_hosts(name)
        alive = {h["host"]: h["pid"] for h in hosts if _still_the_host(h)}
        ended = kill_tree(alive.values(), self.store.job_dir(name) / "hosts")  # shims' trees (any session), marks
        wait_gone(ended)
        self.ended.extend(ended)
        reason = f"InternalServerError: The local endpoint was restarted while the job was {state}; "
        if not hosts:
            return reason + "no host had been started yet."
        gone = [h["host"] for h in hosts if h["host"] not in alive]
        parts = []
        if gone:
            parts.append(f"host processes {', '.join(gone)} were already gone")
        if alive:
            parts.append(f"orphaned hosts {', '.join(alive)} were terminated")
        others = len([e for e in ended if e.pid not in alive.values()])
        if others:
            parts.append(f"{others} other process(es) its hosts had started were still running and were killed")
        return reason + "; ".join(parts) + ". The job cannot be resumed."

    def describe_ended(self) -> list[str]:
        """Each process of :attr:`ended` as ``PID NAME (job host)``."""
        described = []
        for entry in self.ended:
            where = ""
            if entry.mark is not None:
                parts = Path(entry.mark).parts[-3:]
                if len(parts) == 3 and parts[1] == "hosts":
                    where = f" ({parts[0]} {parts[2]})"
            described.append(f"{entry.pid} {entry.name}{where}")
        return described

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
        if request.get("EnableManagedSpotTraining") is True:
            record["_SpotSaving"] = self._options.spot.saving  # the stand-in discount it is billed with
        instances = [(str(g.instance_type), g.instance_count) for g in instance_groups(request)]  # validated
        hosts = sum(count for _, count in instances)
        with self._lock:
            if self._closing:
                raise ServiceError("ServiceUnavailable", "The local endpoint is shutting down", 503)
            slot = next((s for s in range(1, MAX_SLOTS + 1) if s not in self._slots.values()), None)
            if slot is None:
                raise ServiceError("ResourceLimitExceeded", f"The local endpoint runs at most {MAX_SLOTS} jobs at once")
            running = sum(self._hosts_running.values())
            limit = self._options.max_hosts
            if running + hosts > limit:
                raise resource_limit_exceeded(
                    "local endpoint concurrent hosts",
                    limit,
                    running,
                    hosts,
                    "Wait for running jobs to end, or start the endpoint with a higher --max-hosts.",
                )
            try:
                self.capacity.admit(self.store.key(name), instances)
            except QuotaExceeded as exc:
                short = exc.shortage
                raise quota_exceeded(short.instance_type, short.limit, short.used, short.delta) from None
            try:
                self.store.create(record)
            except JobExists as exc:
                self.capacity.release(self.store.key(name))
                raise ServiceError(
                    "ResourceInUse",
                    "Training job names must be unique within an AWS account and region, and a training "
                    f"job with this name already exists ({exc.arn})",
                ) from None
            except OSError as exc:
                self.capacity.release(self.store.key(name))
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
                on_hosts_ended=self._release,
                capacity=self.capacity,
            )
            with self._lock:
                if self._closing:
                    raise ServiceError("ServiceUnavailable", "The local endpoint is shutting down", 503)
                self._runners[self.store.key(name)] = runner
                runner.start()  # under the lock: shutdown sees every runner that may start a host
        except Exception as exc:  # never leave a recorded job InProgress without a runner
            self._done(name)
            reason = f"InternalServerError: the local endpoint could not start the job: {exc!r}"

            def failed(r: dict[str, Any], reason: str = reason) -> None:
                r["FailureReason"] = reason
                finish(r, "Failed", "Failed", "Training job failed")

            self.store.update(name, failed)
            raise
        return {"TrainingJobArn": arn}

    def _release(self, name: str) -> None:
        """Free a job's hosts and slot for the next create: its hosts are terminated (its ending is
        recorded after this, so a job seen ended never holds hosts a create is refused for)."""
        with self._lock:
            self._slots.pop(self.store.key(name), None)
            self._hosts_running.pop(self.store.key(name), None)
            self.capacity.release(self.store.key(name))

    def _done(self, name: str) -> None:
        """A job's thread ended (or never started): forget its runner, free what it held."""
        with self._lock:
            self._runners.pop(self.store.key(name), None)
        self._release(name)

    def describe(self, request: dict[str, Any]) -> dict[str, Any]:
        """DescribeTrainingJob; ValidationException "Requested resource not found." when unknown.

        The name is checked against botocore's model first (length, pattern), as SageMaker does."""
        check_constraints("DescribeTrainingJob", request)
        record = self.store.get(str(request.get("TrainingJobName", "")))
        if record is None:
            raise not_found()
        return {k: v for k, v in record.items() if not k.startswith("_")}

    def stop(self, request: dict[str, Any]) -> dict[str, Any]:
        """StopTrainingJob: InProgress -> Stopping; the runner terminates the hosts and ends it Stopped."""
        check_constraints("StopTrainingJob", request)
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

    def interrupt(self, name: str) -> dict[str, Any]:
        """Take a running spot job's instances back (the endpoint's own action, :mod:`.spot_control`).

        ``ValidationException`` for a job that is not managed spot or not InProgress; the job is
        interrupted at its next look while it trains (at once when it trains already)."""
        check_constraints("DescribeTrainingJob", {"TrainingJobName": name})
        record = self.store.get(name)
        if record is None:
            raise not_found()
        if record.get("EnableManagedSpotTraining") is not True:
            raise validation(
                f"Training job {record['TrainingJobName']} is not a managed spot training job "
                "(EnableManagedSpotTraining is not true): only spot jobs are interrupted"
            )
        with self._lock:
            runner = self._runners.get(self.store.key(name))
        status = record["TrainingJobStatus"]
        if status != "InProgress" or runner is None or not runner.interrupt():
            name = record["TrainingJobName"]
            raise validation(f"Training job {name} is {status}: only a job InProgress is interrupted")
        return {"TrainingJobName": record["TrainingJobName"], "SecondaryStatus": record["SecondaryStatus"]}

    def list(self, request: dict[str, Any]) -> dict[str, Any]:
        """ListTrainingJobs with the name/status/time filters, sorting and NextToken paging.

        The request is checked against botocore's model first, as SageMaker does: ``SortBy`` is
        ``Name | CreationTime | Status``, ``MaxResults`` 1-100, ``StatusEquals`` its enum.
        """
        check_constraints("ListTrainingJobs", request)
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
        sort_field = {"Name": "TrainingJobName", "CreationTime": "CreationTime", "Status": "TrainingJobStatus"}[
            request.get("SortBy") or "CreationTime"
        ]
        records.sort(key=lambda r: r[sort_field], reverse=(request.get("SortOrder") or "Descending") == "Descending")
        max_results = int(request.get("MaxResults") or 10)
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
    def shutdown(self) -> None:
        """End every running job Failed (hosts terminated) because the endpoint is going away.

        Bounded: at most ``SHUTDOWN_LOCK_TIMEOUT`` seconds for the service's lock, then ``stop_grace +
        SHUTDOWN_MARGIN`` seconds for all the jobs to end by themselves; then every process of a job
        still running is killed, the job recorded Failed and a warning logged. No create is accepted
        once this has begun.
        """
        self._closing = True  # set first: a create checks it under the lock, so none starts a job after this
        locked = self._lock.acquire(timeout=SHUTDOWN_LOCK_TIMEOUT)
        try:
            runners = list(self._runners.values())
        finally:
            if locked:
                self._lock.release()
        if not locked:
            log.warning(
                "shutdown: the training service's lock was still held after %.1f s; ending the %d job(s) known now",
                SHUTDOWN_LOCK_TIMEOUT,
                len(runners),
            )
        for runner in runners:
            runner.abort(SHUTDOWN_REASON)
        deadline = time.monotonic() + self._options.stop_grace + SHUTDOWN_MARGIN
        for runner in runners:
            runner.join(max(0.0, deadline - time.monotonic()))
        for runner in runners:
            if runner.is_alive():
                killed = runner.kill_hosts()
                log.warning("job %s did not end in time at shutdown: killed %d process(es)", runner.name, len(killed))
                self.store.update(runner.name, _fail_unless_ended)


def _fail_unless_ended(record: dict[str, Any]) -> None:
    if record["TrainingJobStatus"] not in TERMINAL:
        record["FailureReason"] = SHUTDOWN_REASON
        finish(record, "Failed", "Failed", "Training job failed")


def _decode_token(token: Any) -> int:
    if not token:
        return 0
    try:
        return int(base64.urlsafe_b64decode(str(token).encode()).decode())
    except ValueError as exc:
        raise validation("Invalid pagination token") from exc


def _still_the_host(host: dict[str, Any]) -> bool:
    """True when a recorded host's main process still runs: same pid and start time, not a zombie."""
    import psutil

    pid, created = host.get("pid"), host.get("create_time")
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if created is not None and abs(proc.create_time() - created) > 0.01:
            return False  # the pid was reused by an unrelated process
        return bool(proc.status() != psutil.STATUS_ZOMBIE)  # a zombie is dead, waiting for its new parent
    except psutil.Error:
        return False
