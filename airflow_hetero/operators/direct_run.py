"""Direct mode of the training operator: one CreateTrainingJob per job name, then a wait in the worker or the
triggerer; a job that failed for lack of capacity is followed by the next cluster of its fallbacks.

:class:`TrainingJobs` is direct mode's :class:`~airflow_hetero.operators.submission.JobKind`; :class:`DirectRun`
is one run: the pipeline's job phase, the walk of the names (:func:`~airflow_hetero.operators.submission.start`),
the XCom and links of the job, the wait (:class:`~airflow_hetero.operators.sync_wait.SyncWait`) or the deferral
(:class:`~airflow_hetero.operators.deferred_wait.DeferredWait`). Imported when the task runs, never at DAG parse.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from airflow_hetero.operators.pipeline import DIRECT, StepContext
from airflow_hetero.xcom_keys import CAPACITY_ATTEMPTS_XCOM_KEY, JOB_NAME_XCOM_KEY

if TYPE_CHECKING:
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.operators.pipeline import Draft
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.task_settings import RunSettings


class TrainingJobs:
    """Direct mode's jobs: SageMaker training jobs, found by name, owned by their identity tag."""

    what = "Training job"

    def __init__(self, task: RunSettings, run: TrainingRun) -> None:
        self.task, self.run = task, run

    def find(self, name: str) -> list[dict[str, Any]]:
        found = self.run.hook.find_training_job(name)
        return [] if found is None else [found]

    def owner(self, found: dict[str, Any]) -> str | None:
        return self.run.hook.identity_of(found)

    def status(self, found: dict[str, Any]) -> str:
        return str(found.get("TrainingJobStatus"))

    def continuing(self) -> bool:
        chain = self.run.chain
        return chain is not None and not chain.new_round  # a fallback within this try

    def seen(self, name: str, found: dict[str, Any]) -> dict[str, Any]:
        """A stopping job of ours (a clear stopped it) is waited for; every one counts for a budget and is the
        chain's history (docs/capacity.md)."""
        if found.get("TrainingJobStatus") == "Stopping" and self.task.on_existing_job == "reattach":
            found = wait_stopped(self.task, self.run, name)
        self.run.earlier_jobs[name] = found
        chain = self.run.chain
        if chain is not None and (self.continuing() or self.task.on_existing_job == "reattach"):
            chain.observe(name, found)
        return found

    def reattachable(self, found: dict[str, Any]) -> bool:
        from airflow_hetero.job.outcome import classify

        return classify(found) in ("running", "succeeded")

    def payload(self, draft: Draft, identity: TaskIdentity) -> dict[str, Any]:
        return draft.request

    def send(self, at: StepContext, built: Draft, sent: Draft, payload: Any, identity: TaskIdentity) -> dict[str, Any]:
        """CreateTrainingJob; for a job with fallbacks, a refusal for a type's quota sends the next cluster."""
        from airflow_hetero.job.capacity_failure import failure_of_client_error
        from airflow_hetero.job.capacity_plan import cluster_of
        from airflow_hetero.job.resource_config import describe_groups, instance_groups, is_hetero
        from airflow_hetero.job.waiting import wait_limit_seconds

        run, log, name = self.run, self.task.log, built.name
        while True:
            request = sent.request
            log.info("CreateTrainingJob request for %s:\n%s", name, json.dumps(request, indent=2, default=str))
            run.active_job_name = name
            run.submitted_at = time.time()
            try:
                answer = run.hook.create_training_job(request, identity=identity.digest)
                break
            except Exception as exc:
                failure = None if run.chain is None else failure_of_client_error(exc)
                if run.chain is None or failure is None:
                    raise
                run.chain.refused(cluster_of(request), failure, str(exc.response["Error"]["Code"]))  # type: ignore[attr-defined]
                run.active_job_name = None
            sent = DIRECT.finish(at, built)
        run.wait_limit = wait_limit_seconds(request)
        groups = describe_groups(instance_groups(request)) if is_hetero(request) else ""
        how = "Adopted (the create's answer was lost)" if answer.get("Adopted") else "Submitted"
        log.info("%s training job %s (%s) %s", how, name, answer.get("TrainingJobArn"), groups)
        return {}


def wait_stopped(task: RunSettings, run: TrainingRun, name: str) -> dict[str, Any]:
    """Wait (bounded by ``stopping_timeout_seconds``) for a Stopping job to end; its last description."""
    from airflow_hetero.job.outcome import still_stopping_error

    task.log.info("Training job %s is stopping (the task was cleared or killed): waiting for it to end", name)
    since = time.monotonic()
    while True:
        describe = run.hook.describe_training_job(name)
        if describe.get("TrainingJobStatus") != "Stopping":
            return describe
        if time.monotonic() - since > task.stopping_timeout_seconds:
            raise still_stopping_error(name, task.stopping_timeout_seconds)
        time.sleep(task.check_interval)


class DirectRun:
    """One run of the training operator in direct mode."""

    def __init__(self, task: RunSettings, run: TrainingRun) -> None:
        self.task, self.run = task, run
        self.at = StepContext(task, run)

    def prepare(self, *, new_round: bool = True) -> Submittable:
        """The loaded job through the pipeline's job phase; the capacity chain of a job with fallbacks, unless
        the run has one (restored after a deferral). ``new_round=False``: within a try already (the chain's
        attempts come from the walk of the jobs)."""
        from airflow_hetero.operators.capacity_fallback import new_chain

        job = DIRECT.prepare(self.at, self.task.load_definition(self.run.context))
        if self.run.chain is None:
            self.run.chain = new_chain(self.task, job, new_round=new_round)
        return job

    def attach(self, job: Submittable) -> tuple[str, dict[str, Any] | None]:
        """Re-attach to this task instance's job or submit one; its name (and a chain's attempts) in XCom and the
        extra links (again for each new attempt). The description is None for a job just submitted."""
        from airflow_hetero.job.capacity_chain import CapacityExhaustedError
        from airflow_hetero.job.identity import TaskIdentity
        from airflow_hetero.operators.submission import start

        task, run = self.task, self.run
        ti = run.context["ti"]
        names = task.candidate_names(job, run.context)
        try:
            name, describe, submitted = start(
                self.at, TrainingJobs(task, run), pipeline=DIRECT, job=job, names=names, identity=TaskIdentity.of(ti)
            )
        except CapacityExhaustedError as err:
            ti.xcom_push(key=CAPACITY_ATTEMPTS_XCOM_KEY, value=err.attempts)
            raise
        return self.attached(name, None if submitted else describe)

    def attached(self, name: str, describe: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
        """This run follows job ``name`` (``describe`` None: just submitted): the chain's attempts and the name in
        XCom, the extra links, ``on_kill``'s job; the walk's re-attach and the task state store's alike."""
        from airflow_hetero.job.waiting import wait_limit_seconds
        from airflow_hetero.links.training import persist_job_links

        run = self.run
        ti = run.context["ti"]
        if run.chain is not None:
            run.chain.new_round = False
            ti.xcom_push(key=CAPACITY_ATTEMPTS_XCOM_KEY, value=run.chain.as_result())
        run.active_job_name = name
        if describe is not None:
            run.wait_limit = wait_limit_seconds(describe)
        persist_job_links(run.context, job_name=name, region=run.hook.conn_region_name)
        ti.xcom_push(key=JOB_NAME_XCOM_KEY, value=name)
        return name, describe

    def deadline(self) -> tuple[float | None, str | None, float | None]:
        """(trigger deadline, what it is, Airflow's own deferral timeout in seconds), from the task's start."""
        from airflow_hetero.job.waiting import deferral_deadline

        timeout = self.task.execution_timeout
        return deferral_deadline(
            self.run.started_at,
            max_ingestion_time=self.task.max_ingestion_time,
            wait_limit=self.run.wait_limit,
            execution_timeout=None if timeout is None else timeout.total_seconds(),
        )

    def defer(self, name: str) -> None:
        """Hand the wait for job ``name`` to the triggerer (raises Airflow's ``TaskDeferred``): the
        :class:`~airflow_hetero.triggers.training.HeteroTrainingTrigger` of the task's AWS settings and limits;
        ``execute_complete`` resumes (:class:`~airflow_hetero.operators.deferred_wait.DeferredWait`)."""
        from datetime import timedelta

        from airflow_hetero.operators.capacity_fallback import deferral_kwargs
        from airflow_hetero.triggers.training import HeteroTrainingTrigger

        task, run = self.task, self.run
        deadline, reason, airflow_timeout = self.deadline()
        task.defer(
            trigger=HeteroTrainingTrigger(
                name,
                **task.aws_settings(),
                poll_interval=float(task.check_interval),
                deadline=deadline,
                stop_on_kill=True,
                started_at=run.started_at,
                created_at=run.submitted_at,
                deadline_reason=reason,
                not_found_grace_seconds=task.not_found_grace_seconds,
            ),
            method_name="execute_complete",
            kwargs=deferral_kwargs(run),
            timeout=None if airflow_timeout is None else timedelta(seconds=airflow_timeout),
        )

    def execute(self) -> dict[str, Any]:
        """Submit or re-attach, then wait (or defer); the result dict."""
        job = self.prepare()
        return self.follow(job, *self.attach(job))

    def follow(self, job: Submittable, name: str, describe: dict[str, Any] | None) -> dict[str, Any]:
        """Wait for job ``name`` (or defer; ``describe`` None: just submitted) and the clusters after it; the result
        dict."""
        from airflow_hetero.job.outcome import (
            TrainingJobFailedError,
            TrainingJobLimitError,
            classify,
            resolve_outcome,
            result_dict,
        )
        from airflow_hetero.operators.budget_steps import budget_stopped
        from airflow_hetero.operators.capacity_fallback import capacity_failed
        from airflow_hetero.operators.job_store import remember_direct
        from airflow_hetero.operators.job_trace import trace_ended
        from airflow_hetero.operators.sync_wait import SyncWait, describe_fresh

        task, run = self.task, self.run
        if describe is not None and classify(describe) == "succeeded":
            task.log.info("Training job %s already completed: returning its result", name)
            run.ended = describe
            trace_ended(task, run)
            return finished(task, run, resolve_outcome(describe, fail_on_stopped=task.fail_on_stopped))
        if not task.wait_for_completion:
            return finished(task, run, result_dict(describe or describe_fresh(task, run, name)))
        if task.deferrable:
            self.defer(name)
        while True:  # a job failed for lack of capacity is followed by the next cluster's (docs/capacity.md)
            try:
                try:
                    result = SyncWait(task, run, name).until_done(describe)
                finally:
                    trace_ended(task, run)
                return finished(task, run, result)
            except TrainingJobFailedError as err:
                if not capacity_failed(run, err):
                    raise
            except TrainingJobLimitError as err:
                raise budget_stopped(task, run, err) from err.__cause__
            name, describe = self.attach(job)
            remember_direct(task, run, name)


def finished(task: RunSettings, run: TrainingRun, result: dict[str, Any]) -> dict[str, Any]:
    """The result dict finished in one place: a job with fallbacks' ``capacity_attempts`` (``[]``: the first
    cluster ran) and this run's right-sizing decision in short."""
    from airflow_hetero.operators.rightsizing_steps import decision_in_short

    if run.chain is not None:
        result["capacity_attempts"] = run.chain.as_result()
    if run.decision is not None:
        result["rightsizing"] = decision_in_short(run.decision)
    return result
