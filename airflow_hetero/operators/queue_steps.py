"""Queue mode's steps: submit or re-attach to one service job, wait for it (or defer), decide the outcome.

:class:`QueueRun` is one run of the operator in queue mode (``batch_queue=``, docs/queue.md). It walks the task
instance's job names as direct mode does, each one a service job (found with ``ListServiceJobs``' ``JOB_NAME``
filter and owned when its identity tags are the task instance's): an unfinished or succeeded one is re-attached,
a failed one is followed by the next name, none is submitted (exactly once, see
:mod:`airflow_hetero.hooks.batch`). Its payload is the request direct mode would send, built by the job the
operator loaded, its tags moved to the service job (as the SageMaker SDK v3 does). The wait logs each state of the
service job (RUNNABLE with its place at the front of the queue), each attempt's training job, and follows that
job's log as direct mode does (:class:`~airflow_hetero.operators.sync_wait.JobFollower`). The walk of the names
and the submit block are direct mode's (:mod:`airflow_hetero.operators.submission`), with :class:`ServiceJobs` as
the kind of job and the :data:`~airflow_hetero.operators.pipeline.QUEUED` pipeline. Imported when the task runs,
never at DAG parse.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.operators.pipeline import QUEUED, StepContext
from airflow_hetero.xcom_keys import JOB_NAME_XCOM_KEY, SERVICE_JOB_XCOM_KEY

if TYPE_CHECKING:
    from collections.abc import Iterator

    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.hooks.batch import HeteroBatchHook
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.batch_queue import BatchQueue
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.operators.pipeline import Draft
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.sync_wait import JobFollower
    from airflow_hetero.operators.task_settings import RunSettings
#: States in which the latest attempt's training job exists (or is being created).
_ATTEMPT_STATES = ("SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")


class ServiceJobs:
    """Queue mode's jobs: service jobs of the task's queue, found by name (``ListServiceJobs``), owned by their
    identity tags; each sent as one SubmitServiceJob whose payload is the request direct mode would send."""

    what = "Service job"

    def __init__(self, task: RunSettings, run: TrainingRun, queue: BatchQueue) -> None:
        self.task, self.run, self.queue = task, run, queue

    @property
    def batch(self) -> HeteroBatchHook:
        return batch_hook(self.task, self.run)

    def find(self, name: str) -> list[dict[str, Any]]:
        return self.batch.find_service_jobs(name)

    def owner(self, found: dict[str, Any]) -> str | None:
        from airflow_hetero.job.service_job import identity_of_service_job

        return identity_of_service_job(found)

    def status(self, found: dict[str, Any]) -> str:
        return str(found.get("status"))

    def continuing(self) -> bool:
        return False

    def seen(self, name: str, found: dict[str, Any]) -> dict[str, Any]:
        """Describe an earlier service job's attempts' training jobs, so a budget counts what they cost."""
        from airflow_hetero.job.service_job import attempt_training_jobs

        if self.task.max_cost is not None:
            for attempt in attempt_training_jobs(found):
                if attempt not in self.run.earlier_jobs:
                    described = self.run.hook.find_training_job(attempt)
                    if described is not None:
                        self.run.earlier_jobs[attempt] = described
        return found

    def reattachable(self, found: dict[str, Any]) -> bool:
        return found.get("status") != "FAILED"

    def payload(self, draft: Draft, identity: TaskIdentity) -> dict[str, Any]:
        """The SubmitServiceJob request: the CreateTrainingJob request as its payload, its tags moved to the
        service job (as the SageMaker SDK v3 does; the identity stays in its Environment); checked against the
        queue's limits."""
        from airflow_hetero.job.batch_queue import BatchQueueError, submit_request

        request = dict(draft.request)
        tags = request.pop("Tags", [])
        try:
            return submit_request(self.queue, request, tags, identity.digest)
        except (BatchQueueError, ValueError) as err:
            raise AirflowFailException(f"Task {self.task.task_id}: {err}") from err

    def send(self, at: StepContext, built: Draft, sent: Draft, payload: Any, identity: TaskIdentity) -> dict[str, Any]:
        """SubmitServiceJob (exactly once, see :mod:`airflow_hetero.hooks.batch`); the service job's description."""
        log, name = self.task.log, built.name
        shown = {k: v for k, v in payload.items() if k != "serviceRequestPayload"}
        request = {k: v for k, v in sent.request.items() if k != "Tags"}
        log.info(
            "SubmitServiceJob %s:\n%s\nits serviceRequestPayload (CreateTrainingJob):\n%s",
            name,
            json.dumps(shown, indent=2),
            json.dumps(request, indent=2, default=str),
        )
        answer = self.batch.submit_service_job(payload, identity=identity.digest)
        how = "Adopted (the submit's answer was lost)" if answer.get("Adopted") else "Submitted"
        log.info("%s service job %s (%s) to queue %s", how, name, answer.get("jobId"), self.queue.queue)
        return self.batch.describe_service_job(str(answer["jobId"]))


def batch_hook(task: RunSettings, run: TrainingRun) -> HeteroBatchHook:
    """The run's Batch hook, built once."""
    if run.batch_hook is None:
        run.batch_hook = task.make_batch_hook()
    return run.batch_hook


class QueueRun:
    """One run of the training operator in queue mode."""

    def __init__(self, task: RunSettings, run: TrainingRun) -> None:
        if task.batch_queue is None:
            raise ValueError("queue mode needs batch_queue")
        self.task, self.run, self.queue = task, run, task.batch_queue
        self.context = run.context
        self.log = task.log
        self.at = StepContext(task, run)

    @property
    def batch(self) -> HeteroBatchHook:
        return batch_hook(self.task, self.run)

    # -- the job ---------------------------------------------------------------------------------

    def load(self) -> Submittable:
        """The task's job through the queue pipeline's job phase (fallback types refused)."""
        return QUEUED.prepare(self.at, self.task.load_definition(self.context))

    def names(self, job: Submittable) -> Iterator[str]:
        """The task instance's job names, short enough for Batch's ``AWSBatch<name><32 hex>``."""
        from airflow_hetero.definition import naming
        from airflow_hetero.sagemaker_facts import BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH as LIMIT

        if not self.task.job_name:
            ti: Any = self.context["ti"]
            base = naming.fitted_base(job.base_job_name, LIMIT)
            if base != job.base_job_name:
                self.log.info("Queue mode: job names start with %r (the base cut to fit Batch's names)", base)
            return naming.task_job_names(base, ti.dag_id, ti.task_id, ti.run_id, ti.map_index, max_length=LIMIT)
        try:
            return iter(naming.explicit_job_names(self.task.job_name, LIMIT))
        except ValueError as err:
            raise AirflowFailException(f"job_name: {err}") from err

    def execute(self) -> dict[str, Any]:
        """Submit or re-attach, then wait (or defer); the result dict."""
        return self.follow(self.start())

    def start(self) -> dict[str, Any]:
        """The task instance's service job, re-attached or submitted (the walk of its names); its description."""
        from airflow_hetero.job.identity import TaskIdentity
        from airflow_hetero.operators.submission import start

        job = self.load()
        identity = TaskIdentity.of(self.context["ti"])
        kind = ServiceJobs(self.task, self.run, self.queue)
        _, service, _ = start(self.at, kind, pipeline=QUEUED, job=job, names=self.names(job), identity=identity)
        self.attached(service)
        return service

    def follow(self, service: dict[str, Any]) -> dict[str, Any]:
        """Wait for the attached ``service`` job (or defer); the result dict."""
        task = self.task
        if service.get("status") == "SUCCEEDED":
            self.log.info("Service job %s already succeeded: returning its result", service.get("jobName"))
            return self.outcome(service)
        if not task.wait_for_completion:
            return {"service_job": _service_result(service), "status": service.get("status")}
        if task.deferrable:
            self.defer_queue(service, after_attempt=None)
        return self.wait(service)

    def attached(self, service: dict[str, Any]) -> None:
        """Keep the service job's id (on_kill terminates it) and tell XCom which it is."""
        self.run.service_job_id = str(service["jobId"])
        self.context["ti"].xcom_push(key=SERVICE_JOB_XCOM_KEY, value=_service_result(service))

    # -- waiting in the worker -------------------------------------------------------------------

    def wait(self, service: dict[str, Any]) -> dict[str, Any]:
        """Follow the service job until it ends: its states, its attempts, the latest attempt's log."""
        from airflow_hetero.job.service_job import blocked_reason

        watch = _Watch(self)
        while True:
            watch.see(service)
            blocked = blocked_reason(service)
            if blocked is not None:
                self.fail_blocked(service, blocked)
            if service.get("status") in ("SUCCEEDED", "FAILED"):
                watch.finish()
                return self.outcome(service)
            limit = self.task.max_ingestion_time
            if limit is not None and time.monotonic() - self.run.started > limit:
                self.batch.terminate_service_job(str(service["jobId"]), "max_ingestion_time passed")
                raise self.timeout_error(
                    service, f"is still {service.get('status')} after {limit:g}s (max_ingestion_time)"
                )
            time.sleep(self.task.check_interval)
            service = self.batch.describe_service_job(str(service["jobId"]))

    def fail_blocked(self, service: dict[str, Any], reason: str) -> None:
        """Terminate a job its queue can never run, and fail the task (no retry: it would wait the same)."""
        from airflow_hetero.job.service_job import blocked_message

        self.batch.terminate_service_job(str(service["jobId"]), reason[:256])
        self.run.service_job_id = None
        raise AirflowFailException(blocked_message(service, reason))

    def timeout_error(self, service: dict[str, Any], what: str) -> Exception:
        from airflow_hetero.job.outcome import ASKED_TO_STOP, TrainingJobTimeoutError

        name = str(service.get("jobName"))
        return TrainingJobTimeoutError(
            f"Service job {name} {what}{ASKED_TO_STOP}", job_name=name, status=str(service.get("status"))
        )

    def outcome(self, service: dict[str, Any]) -> dict[str, Any]:
        """SUCCEEDED: the latest attempt's result dict, with the service job and every attempt's billed time;
        FAILED: the task's error, with Batch's statusReason and SageMaker's FailureReason."""
        from airflow_hetero.job.outcome import TrainingJobBudgetError, TrainingJobFailedError, resolve_outcome
        from airflow_hetero.job.service_job import attempt_training_jobs, failure_message, latest_training_job
        from airflow_hetero.operators.direct_run import finished
        from airflow_hetero.operators.job_trace import trace_queue_attempts

        hook = self.run.hook
        self.run.service_job_id = None
        latest = latest_training_job(service)
        training = hook.find_training_job(latest) if latest else None
        trace_queue_attempts(self.task, self.run, service, {latest: training} if latest and training else {})
        if training is not None:  # the summary of a failed job too reads it
            self.context["ti"].xcom_push(key=JOB_NAME_XCOM_KEY, value=training.get("TrainingJobName"))
        if service.get("status") != "SUCCEEDED" or training is None:
            reason = (training or {}).get("FailureReason") or service.get("statusReason")
            stopped = self.budget_stop(service, training)
            if stopped is not None:
                from airflow_hetero.operators.budget_steps import record_budget_stop

                err = TrainingJobBudgetError(
                    stopped,
                    job_name=str(latest),
                    status=str(service.get("status")),
                    failure_reason=reason,
                    describe=training,
                )
                record_budget_stop(self.context, err)
                raise err
            raise TrainingJobFailedError(
                failure_message(service, training),
                job_name=latest or str(service.get("jobName")),
                status=str(service.get("status")),
                failure_reason=reason,
                describe=training,
            )
        result = resolve_outcome(training, fail_on_stopped=self.task.fail_on_stopped)
        billed = [
            (hook.find_training_job(n) or {}) if n != latest else training for n in attempt_training_jobs(service)
        ]
        result["service_job"] = _service_result(service)
        result["service_job"]["billable_seconds"] = sum(int(d.get("BillableTimeInSeconds") or 0) for d in billed)
        return finished(self.task, self.run, result)

    def budget_stop(self, service: dict[str, Any], training: dict[str, Any] | None) -> str | None:
        """The budget's message when SageMaker stopped the attempt at the runtime cap a budget set: the cap's tag
        is on the service job (queue mode moves the request's tags there); None otherwise."""
        if self.task.max_cost is None or training is None:
            return None
        from airflow_hetero.job.budget import budget_cap_in_tags, budget_stop_message

        tags = [{"Key": k, "Value": v} for k, v in (service.get("tags") or {}).items()]
        return budget_stop_message(training, budget_cap_in_tags(tags))

    # -- deferred ------------------------------------------------------------------------------

    def defer_queue(self, service: dict[str, Any], after_attempt: str | None) -> None:
        """Hand the wait in the queue to the triggerer (it returns when an attempt starts or the job ends)."""
        from airflow_hetero.triggers.queue import HeteroServiceJobTrigger

        task = self.task
        task.defer(
            trigger=HeteroServiceJobTrigger(
                str(service["jobId"]),
                job_name=str(service.get("jobName")),
                job_queue=str(self.queue.queue),
                after_attempt=after_attempt,
                **task.aws_settings(),
                poll_interval=float(task.check_interval),
                stop_on_kill=True,
            ),
            method_name="execute_queued_complete",
            kwargs={"service_job_id": str(service["jobId"]), "stage": "queue"},
        )

    def defer_attempt(self, service_job_id: str, training_job: str) -> None:
        """Hand the running attempt's training job to the training-job trigger (its kill terminates the service job)."""
        from airflow_hetero.triggers.queue import HeteroQueuedTrainingTrigger

        task = self.task
        task.defer(
            trigger=HeteroQueuedTrainingTrigger(
                training_job,
                service_job_id=service_job_id,
                **task.aws_settings(),
                poll_interval=float(task.check_interval),
                stop_on_kill=True,
                not_found_grace_seconds=task.not_found_grace_seconds,
                created_at=time.time(),
            ),
            method_name="execute_queued_complete",
            kwargs={"service_job_id": service_job_id, "stage": "training"},
        )

    def resume(self, event: dict[str, Any], service_job_id: str, stage: str) -> dict[str, Any]:
        """After a deferral: the next deferral (a new attempt, or back to the queue), or the outcome."""
        from airflow_hetero.operators.sync_wait import emit_log_tail

        batch, hook = self.batch, self.run.hook
        self.run.service_job_id = service_job_id
        if event.get("status") in ("timeout", "error"):
            batch.terminate_service_job(service_job_id, f"The Airflow task's wait ended: {event.get('status')}")
            raise AirflowFailException(
                f"Waiting for service job {service_job_id} failed: {event.get('message') or event}"
            )
        service = batch.describe_service_job(service_job_id)
        if event.get("status") == "blocked":
            self.fail_blocked(service, str(event.get("status_reason")))
        training = event.get("training_job") if stage == "queue" else event.get("job_name")
        final = service.get("status") in ("SUCCEEDED", "FAILED")
        training = real_name(hook, str(training)) if training else None
        if self.task.print_log and training and (stage == "training" or final):
            emit_log_tail(self.task, hook, training)
        if final:
            return self.outcome(service)
        if stage == "queue" and training:
            self.log.info("Service job %s: %s", service.get("jobName"), _state(service))
            self.context["ti"].xcom_push(key=JOB_NAME_XCOM_KEY, value=training)
            self.defer_attempt(service_job_id, training)
        self.log.info("Service job %s: %s (its attempt %s ended)", service.get("jobName"), _state(service), training)
        self.defer_queue(service, after_attempt=training)
        raise AssertionError("not reached: defer raises TaskDeferred")

    # -- the task ends ---------------------------------------------------------------------------

    def terminate_own(self, reason: str) -> str | None:
        """Terminate this task instance's unfinished service job (found by its names and identity)."""
        from airflow_hetero.job.identity import TaskIdentity
        from airflow_hetero.job.service_job import identity_of_service_job, is_final

        job = self.load()
        batch = self.batch
        digest = TaskIdentity.of(self.context["ti"]).digest
        for name in self.names(job):
            found = batch.find_service_jobs(name)
            if not found:
                return None
            for service in found:
                if identity_of_service_job(service) == digest and not is_final(service):
                    self.log.info("Task ends while service job %s is %s: terminating it", name, service.get("status"))
                    batch.terminate_service_job(str(service["jobId"]), reason)
                    return str(name)
        return None


def real_name(hook: HeteroTrainingHook, name: str) -> str:
    """The training job's name as SageMaker spells it (an ARN holds it lower-cased), ``name`` when not found."""
    try:
        found = hook.find_training_job(name)
    except Exception:  # the name still serves: SageMaker's names do not depend on case
        return name
    return str((found or {}).get("TrainingJobName") or name)


def _state(service: dict[str, Any], place: int | None = None) -> str:
    from airflow_hetero.job.service_job import state_line

    return state_line(service, place)


def _service_result(service: dict[str, Any]) -> dict[str, Any]:
    from airflow_hetero.job.service_job import service_job_result

    return service_job_result(service)


class _Watch:
    """What the synchronous wait has said so far: the last state, the attempt followed, its log."""

    def __init__(self, queue_run: QueueRun) -> None:
        self.queue_run, self.log = queue_run, queue_run.log
        self.state: tuple[Any, Any] | None = None
        self.attempt: str | None = None
        self.follower: JobFollower | None = None

    def see(self, service: dict[str, Any]) -> None:
        """Log what changed in ``service``; follow its latest attempt's training job."""
        from airflow_hetero.job.service_job import attempt_training_jobs, latest_training_job

        status = service.get("status")
        state = (status, service.get("statusReason"))
        name = service.get("jobName")
        if state != self.state:
            was = self.state[0] if self.state else None
            place = (
                self.queue_run.batch.queue_place(str(service.get("jobQueue")), service.get("jobArn"))
                if status == "RUNNABLE"
                else None
            )
            back = was in ("SCHEDULED", "STARTING", "RUNNING") and status == "RUNNABLE"
            self.log.info("Service job %s: %s%s", name, "back in the queue: " if back else "", _state(service, place))
            self.state = state
        latest = latest_training_job(service)
        if latest and latest != self.attempt:
            self.finish()
            count = attempt_training_jobs(service).index(latest) + 1
            self.log.info("Service job %s: attempt %d is training job %s", name, count, latest)
            if self.attempt:
                self.log.warning("Service job %s: training job %s was followed by a new attempt", name, self.attempt)
            self.attempt, self.follower = latest, None
        if latest and status in _ATTEMPT_STATES:
            self.follow(latest)

    def follow(self, name: str) -> None:
        """The attempt's SecondaryStatus transitions and ``[group/host]`` log lines so far."""
        from airflow_hetero.operators.sync_wait import JobFollower

        run = self.queue_run.run
        try:
            training = run.hook.find_training_job(name)
        except Exception as exc:
            self.log.warning("Could not describe training job %s: %s", name, exc)
            return
        if training is None:
            return
        if self.follower is None:
            name = str(training.get("TrainingJobName") or name)  # an ARN's name is lower-cased; the logs are not
            self.queue_run.context["ti"].xcom_push(key=JOB_NAME_XCOM_KEY, value=name)
            self.follower = JobFollower(self.queue_run.task, run.hook, name)
        rescan = self.follower.see(training)
        self.follower.follow(final=False, rescan=rescan)

    def finish(self) -> None:
        """Print the rest of the followed attempt's log."""
        if self.follower is not None:
            self.follower.follow(final=True)
