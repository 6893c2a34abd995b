"""The life of one task instance's training job: start or re-attach, bounds, and stopping it on every end.

Mixed into :class:`~airflow_hetero.operators.training.HeteroTrainingOperator`, which provides
``candidate_names``, ``submit``, ``make_hook`` and ``load_definition``. The rules (see
``docs/failure-semantics.md``): only a job carrying this task instance's identity is re-attached;
a stopping one (a clear stopped it) is waited for, boundedly, then replaced; deferral deadlines count
from the task's start and end before ``execution_timeout``; a deferral Airflow fails (``__fail__``)
stops the job first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.definition.job import HeteroTrainingJob
    from airflow_hetero.hooks.identity import TaskIdentity
    from airflow_hetero.hooks.training import HeteroTrainingHook


class JobLifecycle:
    """Start, bound and stop the job of one task instance (a mixin for the training operator)."""

    #: "Not found" from DescribeTrainingJob this soon after our own create is eventual consistency.
    not_found_grace_seconds: float = 60
    #: A job staying Stopping longer than this fails the task (with its name and state).
    stopping_timeout_seconds: float = 1800

    if TYPE_CHECKING:  # provided by the operator
        log: Any
        on_existing_job: str
        check_interval: float
        execution_timeout: timedelta | None
        max_ingestion_time: float | None
        wait_limit: float | None
        submitted_at: float | None

        def candidate_names(self, job: HeteroTrainingJob, context: Context) -> Iterator[str]: ...

        def submit(
            self, hook: HeteroTrainingHook, job: HeteroTrainingJob, name: str, region: str, identity: TaskIdentity
        ) -> None: ...

        def make_hook(self) -> HeteroTrainingHook: ...

        def load_definition(self, context: Context) -> HeteroTrainingJob: ...

    def start_job(
        self, hook: HeteroTrainingHook, job: HeteroTrainingJob, context: Context, region: str
    ) -> tuple[str, dict[str, Any] | None]:
        """Re-attach to this task instance's job or submit a new one; the name and its description.

        The description is None for a job just submitted. A job of a candidate name whose identity
        is not this task instance's counts as taken (warning, next name); a stopping one of ours
        (a clear stopped it) is waited for, then replaced.
        """
        from airflow_hetero.hooks.identity import TaskIdentity
        from airflow_hetero.hooks.outcome import classify
        from airflow_hetero.hooks.training import JobNameTakenError

        identity = TaskIdentity.of(context["ti"])
        for name in self.candidate_names(job, context):
            existing = hook.find_training_job(name)
            if existing is None:
                try:
                    self.submit(hook, job, name, region, identity)
                except JobNameTakenError as err:
                    self.log.warning("%s; trying the next name", err)
                    continue
                return name, None
            owner = hook.identity_of(existing)
            status = existing.get("TrainingJobStatus")
            if owner != identity.digest:
                self.log.warning(
                    "Training job %s (%s) belongs to another task instance (identity %s, this one %s); "
                    "trying the next name",
                    name,
                    status,
                    owner or "none",
                    identity.digest,
                )
                continue
            if self.on_existing_job == "fail":
                raise AirflowFailException(f"Training job {name} already exists ({status}) and on_existing_job='fail'")
            if status == "Stopping" and self.on_existing_job == "reattach":
                existing = self.wait_stopped(hook, name)
            state = classify(existing)
            if self.on_existing_job == "reattach" and state in ("running", "succeeded"):
                self.log.info("Re-attaching to training job %s (%s), not submitting a new one", name, status)
                return name, existing
            self.log.info("Training job %s exists (%s); trying the next name", name, existing.get("TrainingJobStatus"))
        raise AirflowFailException("Every job name for this task instance is taken")

    def wait_stopped(self, hook: HeteroTrainingHook, name: str) -> dict[str, Any]:
        """Wait (bounded) for a Stopping job to end; its last description."""
        from airflow_hetero.hooks.outcome import TrainingJobTimeoutError

        self.log.info("Training job %s is stopping (the task was cleared or killed): waiting for it to end", name)
        since = time.monotonic()
        while True:
            describe = hook.describe_training_job(name)
            if describe.get("TrainingJobStatus") != "Stopping":
                return describe
            if time.monotonic() - since > self.stopping_timeout_seconds:
                raise TrainingJobTimeoutError(
                    f"Training job {name} is still Stopping after {self.stopping_timeout_seconds:g}s "
                    "(stopping_timeout_seconds)",
                    job_name=name,
                    status="Stopping",
                )
            time.sleep(self.check_interval)

    def deferral_deadline(self, started_at: float) -> tuple[float | None, str | None, float | None]:
        """(trigger deadline, what it is, Airflow's own deferral timeout in seconds), from the task's start.

        The trigger gives up first (so ``execute_complete`` stops the job and says which limit
        passed): at ``max_ingestion_time``, else at the submitted job's MaxRuntime (+ MaxWait) +
        margin, and a little before ``execution_timeout``, which is also passed to Airflow as the
        deferral timeout (Airflow 3 does not apply ``execution_timeout`` to deferred tasks itself).
        """
        deadlines: list[tuple[float, str]] = []
        if self.max_ingestion_time is not None:
            deadlines.append(
                (started_at + self.max_ingestion_time, f"max_ingestion_time ({self.max_ingestion_time:g}s)")
            )
        elif self.wait_limit is not None:
            deadlines.append(
                (started_at + self.wait_limit, f"the job's MaxRuntime (+ MaxWait) plus margin ({self.wait_limit:g}s)")
            )
        airflow_timeout = None
        if self.execution_timeout is not None:
            limit = self.execution_timeout.total_seconds()
            margin = min(60.0, limit * 0.1)
            deadlines.append((started_at + limit - margin, f"execution_timeout ({limit:g}s)"))
            airflow_timeout = max(1.0, started_at + limit - time.time())
        if not deadlines:
            return None, None, airflow_timeout
        deadline, reason = min(deadlines)
        return deadline, reason, airflow_timeout

    def describe_fresh(self, hook: HeteroTrainingHook, name: str) -> dict[str, Any]:
        """DescribeTrainingJob, waiting out "not found" within the grace period after our own create."""
        from airflow_hetero._retry import is_not_found

        while True:
            try:
                return hook.describe_training_job(name)
            except Exception as exc:
                if not (is_not_found(exc) and self.just_created()):
                    raise
                self.log.warning("Training job %s not found yet (just created): will look again", name)
                time.sleep(min(self.check_interval, 5.0))

    def just_created(self) -> bool:
        """True within ``not_found_grace_seconds`` of this task's own CreateTrainingJob."""
        return self.submitted_at is not None and time.time() - self.submitted_at < self.not_found_grace_seconds

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """A deferral that ends in Airflow's ``__fail__`` (deferral or execution timeout, trigger
        crash) stops this task instance's running job before the task fails."""
        if next_method == "__fail__":
            try:
                self.stop_own_job(context)
            except Exception as exc:  # the failure Airflow reports must still be raised below
                self.log.error("Could not stop the training job of this task instance: %s", exc)
        return super().resume_execution(next_method, next_kwargs, context)  # type: ignore[misc]

    def stop_own_job(self, context: Context) -> str | None:
        """Find this task instance's running job by its candidate names and identity; stop it."""
        from airflow_hetero.hooks.identity import TaskIdentity
        from airflow_hetero.hooks.outcome import classify

        job = self.load_definition(context)
        hook = self.make_hook()
        digest = TaskIdentity.of(context["ti"]).digest
        for name in self.candidate_names(job, context):
            existing = hook.find_training_job(name)
            if existing is None:
                return None  # names are used in order: no later one exists
            if classify(existing) == "running" and hook.identity_of(existing) == digest:
                self.log.info("Task ends while training job %s runs: stopping it", name)
                hook.stop_training_job(name)
                return name
        return None


def past_job_limit(describe: dict[str, Any]) -> bool:
    """True when the job has existed longer than its MaxRuntime (+ MaxWait) plus margin."""
    from airflow_hetero.hooks.outcome import wait_limit_seconds

    created = describe.get("CreationTime")
    if not isinstance(created, datetime):
        return False
    return time.time() > created.timestamp() + wait_limit_seconds(describe)
