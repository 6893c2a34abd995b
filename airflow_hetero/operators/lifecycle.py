"""The life of one task instance's training job: start or re-attach, bounds, and stopping it on every end.

Functions of the operator (:class:`~airflow_hetero.operators.task.TrainingTask`), behind its methods
of the same names; loaded when a task runs, never when a DAG file is parsed. The rules (see
``docs/failure-semantics.md``): only a job carrying this task instance's identity is re-attached;
a stopping one (a clear stopped it) is waited for, boundedly, then replaced; deferral deadlines count
from the task's start and end before ``execution_timeout``; a deferral Airflow fails (``__fail__``)
stops the job first.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.definition.job import HeteroTrainingJob
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.operators.task import TrainingTask


def start_job(
    op: TrainingTask, hook: HeteroTrainingHook, job: HeteroTrainingJob, context: Context, region: str
) -> tuple[str, dict[str, Any] | None]:
    """Re-attach to this task instance's job or submit a new one; the name and its description.

    The description is None for a job just submitted. A job of a candidate name whose identity
    is not this task instance's counts as taken (warning, next name); a stopping one of ours
    (a clear stopped it) is waited for, then replaced.
    """
    from airflow_hetero.hooks.training import JobNameTakenError
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.job.outcome import classify

    identity = TaskIdentity.of(context["ti"])
    for name in op.candidate_names(job, context):
        existing = hook.find_training_job(name)
        if existing is None:
            try:
                op.submit(hook, job, name, region, identity)
            except JobNameTakenError as err:
                op.log.warning("%s; trying the next name", err)
                continue
            return name, None
        owner = hook.identity_of(existing)
        status = existing.get("TrainingJobStatus")
        if owner != identity.digest:
            op.log.warning(
                "Training job %s (%s) belongs to another task instance (identity %s, this one %s); "
                "trying the next name",
                name,
                status,
                owner or "none",
                identity.digest,
            )
            continue
        if op.on_existing_job == "fail":
            raise AirflowFailException(f"Training job {name} already exists ({status}) and on_existing_job='fail'")
        if status == "Stopping" and op.on_existing_job == "reattach":
            existing = op.wait_stopped(hook, name)
        state = classify(existing)
        if op.on_existing_job == "reattach" and state in ("running", "succeeded"):
            op.log.info("Re-attaching to training job %s (%s), not submitting a new one", name, status)
            return name, existing
        op.log.info("Training job %s exists (%s); trying the next name", name, existing.get("TrainingJobStatus"))
    raise AirflowFailException("Every job name for this task instance is taken")


def wait_stopped(op: TrainingTask, hook: HeteroTrainingHook, name: str) -> dict[str, Any]:
    """Wait (bounded) for a Stopping job to end; its last description."""
    from airflow_hetero.job.outcome import TrainingJobTimeoutError

    op.log.info("Training job %s is stopping (the task was cleared or killed): waiting for it to end", name)
    since = time.monotonic()
    while True:
        describe = hook.describe_training_job(name)
        if describe.get("TrainingJobStatus") != "Stopping":
            return describe
        if time.monotonic() - since > op.stopping_timeout_seconds:
            raise TrainingJobTimeoutError(
                f"Training job {name} is still Stopping after {op.stopping_timeout_seconds:g}s "
                "(stopping_timeout_seconds)",
                job_name=name,
                status="Stopping",
            )
        time.sleep(op.check_interval)


def deferral_deadline(op: TrainingTask, started_at: float) -> tuple[float | None, str | None, float | None]:
    """(trigger deadline, what it is, Airflow's own deferral timeout in seconds), from the task's start.

    The trigger gives up first (so ``execute_complete`` stops the job and says which limit
    passed): at ``max_ingestion_time``, else at the submitted job's MaxRuntime (+ MaxWait) +
    margin, and a little before ``execution_timeout``, which is also passed to Airflow as the
    deferral timeout (Airflow 3 does not apply ``execution_timeout`` to deferred tasks itself).
    """
    deadlines: list[tuple[float, str]] = []
    if op.max_ingestion_time is not None:
        deadlines.append((started_at + op.max_ingestion_time, f"max_ingestion_time ({op.max_ingestion_time:g}s)"))
    elif op.wait_limit is not None:
        deadlines.append(
            (started_at + op.wait_limit, f"the job's MaxRuntime (+ MaxWait) plus margin ({op.wait_limit:g}s)")
        )
    airflow_timeout = None
    if op.execution_timeout is not None:
        limit = op.execution_timeout.total_seconds()
        margin = min(60.0, limit * 0.1)
        deadlines.append((started_at + limit - margin, f"execution_timeout ({limit:g}s)"))
        airflow_timeout = max(1.0, started_at + limit - time.time())
    if not deadlines:
        return None, None, airflow_timeout
    deadline, reason = min(deadlines)
    return deadline, reason, airflow_timeout


def describe_fresh(op: TrainingTask, hook: HeteroTrainingHook, name: str) -> dict[str, Any]:
    """DescribeTrainingJob, waiting out "not found" within the grace period after our own create."""
    from airflow_hetero._retry import is_not_found

    while True:
        try:
            return hook.describe_training_job(name)
        except Exception as exc:
            if not (is_not_found(exc) and op.just_created()):
                raise
            op.log.warning("Training job %s not found yet (just created): will look again", name)
            time.sleep(min(op.check_interval, 5.0))


def just_created(op: TrainingTask) -> bool:
    """True within ``not_found_grace_seconds`` of this task's own CreateTrainingJob."""
    return op.submitted_at is not None and time.time() - op.submitted_at < op.not_found_grace_seconds


def stop_own_job(op: TrainingTask, context: Context) -> str | None:
    """Find this task instance's running job by its candidate names and identity; stop it."""
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.job.outcome import classify

    job = op.load_definition(context)
    hook = op.make_hook()
    digest = TaskIdentity.of(context["ti"]).digest
    for name in op.candidate_names(job, context):
        existing = hook.find_training_job(name)
        if existing is None:
            return None  # names are used in order: no later one exists
        if classify(existing) == "running" and hook.identity_of(existing) == digest:
            op.log.info("Task ends while training job %s runs: stopping it", name)
            hook.stop_training_job(name)
            return name
    return None


def past_job_limit(describe: dict[str, Any]) -> bool:
    """True when the job has existed longer than its MaxRuntime (+ MaxWait) plus margin."""
    from airflow_hetero.job.outcome import wait_limit_seconds

    created = describe.get("CreationTime")
    if not isinstance(created, datetime):
        return False
    return time.time() > created.timestamp() + wait_limit_seconds(describe)
