"""Queue mode's steps: submit or re-attach to one service job, wait for it (or defer), decide the outcome.

:class:`QueueRun` is one run of the operator in queue mode (``batch_queue=``, docs/queue.md). It walks the task
instance's job names as direct mode does, each one a service job (found with ``ListServiceJobs``' ``JOB_NAME``
filter and owned when its identity tags are the task instance's): an unfinished or succeeded one is re-attached,
a failed one is followed by the next name, none is submitted (exactly once, see
:mod:`airflow_hetero.hooks.batch`). Its payload is the request direct mode would send, built by the job the
operator loaded, its tags moved to the service job (as the SageMaker SDK v3 does). The wait logs each state of the
service job (RUNNABLE with its place at the front of the queue), each attempt's training job, and follows that
job's log with the operator's own steps. Imported when the task runs, never at DAG parse.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.hooks.batch import HeteroBatchHook
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.logs.tail import LogTailer

#: XCom key of the service job (``{"job_id", "job_name", "job_queue"}``), pushed once it is submitted or found.
SERVICE_JOB_XCOM_KEY = "service_job"
#: XCom key of the latest attempt's training job (the direct mode's key: the summary operator reads it).
JOB_NAME_XCOM_KEY = "training_job_name"
#: States in which the latest attempt's training job exists (or is being created).
_ATTEMPT_STATES = ("SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")


class QueueRun:
    """One run of operator ``op`` in queue mode, for the task instance of ``context``."""

    def __init__(self, op: Any, context: Context) -> None:
        self.op = op
        self.context = context
        self.log = op.log

    # -- the job ---------------------------------------------------------------------------------

    def load(self) -> Submittable:
        """The operator's job, refused with fallback types (Batch requeues on CapacityError itself)."""
        from airflow_hetero.job.batch_queue import FALLBACKS_WITH_QUEUE

        job: Submittable = self.op.rightsize(self.op.load_definition(self.context), self.context)  # as direct mode
        if any(job.fallbacks.values()):
            raise AirflowFailException(f"Task {self.op.task_id}: {FALLBACKS_WITH_QUEUE}")
        return job

    def names(self, job: Submittable) -> Any:
        """The task instance's job names, short enough for Batch's ``AWSBatch<name><32 hex>``."""
        from airflow_hetero.definition import naming
        from airflow_hetero.sagemaker_facts import BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH as LIMIT

        if not self.op.job_name:
            ti: Any = self.context["ti"]
            base = naming.fitted_base(job.base_job_name, LIMIT)
            if base != job.base_job_name:
                self.log.info("Queue mode: job names start with %r (the base cut to fit Batch's names)", base)
            return naming.task_job_names(base, ti.dag_id, ti.task_id, ti.run_id, ti.map_index, max_length=LIMIT)
        try:
            return iter(naming.explicit_job_names(self.op.job_name, LIMIT))
        except ValueError as err:
            raise AirflowFailException(f"job_name: {err}") from err

    def run(self) -> dict[str, Any]:
        """Submit or re-attach, then wait (or defer); the result dict."""
        op = self.op
        job = self.load()
        batch = op.make_batch_hook()
        hook = op.waiting_hook = op.make_hook()
        service = self.start(batch, hook, job)
        if service.get("status") == "SUCCEEDED":
            self.log.info("Service job %s already succeeded: returning its result", service.get("jobName"))
            return self.outcome(hook, service)
        if not op.wait_for_completion:
            return {"service_job": _service_result(service), "status": service.get("status")}
        if op.deferrable:
            self.defer_queue(service, after_attempt=None)
        return self.wait(batch, hook, service)

    def start(self, batch: HeteroBatchHook, hook: HeteroTrainingHook, job: Submittable) -> dict[str, Any]:
        """This task instance's service job: re-attached (unfinished or succeeded) or submitted; its description."""
        from airflow_hetero.hooks.training import JobNameTakenError
        from airflow_hetero.job.identity import TaskIdentity
        from airflow_hetero.job.service_job import identity_of_service_job

        identity = TaskIdentity.of(self.context["ti"])
        self.op.steps_role_arn = None
        for name in self.names(job):
            found = batch.find_service_jobs(name)
            ours = [s for s in found if identity_of_service_job(s) == identity.digest]
            if found and not ours:
                owner = identity_of_service_job(found[0])
                self.log.warning(
                    "Service job %s belongs to another task instance (identity %s): trying the next name",
                    name,
                    owner or "none",
                )
                continue
            if not found:
                try:
                    return self.attached(self.submit(batch, hook, job, name, identity), batch)
                except JobNameTakenError as err:
                    self.log.warning("%s; trying the next name", err)
                    continue
            service = ours[0]
            self.remember_attempts(hook, service)
            status = service.get("status")
            if self.op.on_existing_job == "fail":
                raise AirflowFailException(f"Service job {name} already exists ({status}) and on_existing_job='fail'")
            if self.op.on_existing_job == "reattach" and status != "FAILED":
                self.log.info("Re-attaching to service job %s (%s), not submitting a new one", name, status)
                return self.attached(service, batch)
            self.log.info("Service job %s exists (%s): trying the next name", name, status)
        raise AirflowFailException("Every job name for this task instance is taken")

    def remember_attempts(self, hook: HeteroTrainingHook, service: dict[str, Any]) -> None:
        """Describe an earlier service job's attempts' training jobs, so a budget counts what they cost."""
        from airflow_hetero.job.service_job import attempt_training_jobs

        if self.op.max_cost is None:
            return
        for name in attempt_training_jobs(service):
            if name not in self.op.earlier_jobs:
                found = hook.find_training_job(name)
                if found is not None:
                    self.op.earlier_jobs[name] = found

    def submit(
        self, batch: HeteroBatchHook, hook: HeteroTrainingHook, job: Submittable, name: str, identity: TaskIdentity
    ) -> dict[str, Any]:
        """Build the payload (as direct mode's request), check it against the queue, upload the code, submit."""
        from airflow_hetero.job.batch_queue import BatchQueueError, submit_request
        from airflow_hetero.operators.provider_steps import run_provider_steps

        op = self.op
        base: Path = op.base_dir()
        try:
            if op.steps_role_arn is None:
                op.steps_role_arn = (run_provider_steps(hook, job.steps, base, self.log),)
            (role_arn,) = op.steps_role_arn
            request = identity.stamp(job.build(job_name=name, region=hook.conn_region_name, role_arn=role_arn))
            upload = job.source_upload(name, base)
            request = op.fit_budget(hook, request)
            tags = request.pop(
                "Tags", []
            )  # the service job's tags (SDK v3 moves them too); identity stays in Environment
            submit = submit_request(op.batch_queue, request, tags, identity.digest)
        except (BatchQueueError, ValueError) as err:
            raise AirflowFailException(f"Task {op.task_id}: {err}") from err
        if upload is not None:
            hook.upload_bytes(upload.code, upload.uri, upload.extra_args)
            self.log.info("Uploaded training code (%d bytes) to %s", len(upload.code), upload.uri)
        shown = {k: v for k, v in submit.items() if k != "serviceRequestPayload"}
        self.log.info(
            "SubmitServiceJob %s:\n%s\nits serviceRequestPayload (CreateTrainingJob):\n%s",
            name,
            json.dumps(shown, indent=2),
            json.dumps(request, indent=2, default=str),
        )
        answer = batch.submit_service_job(submit, identity=identity.digest)
        how = "Adopted (the submit's answer was lost)" if answer.get("Adopted") else "Submitted"
        self.log.info("%s service job %s (%s) to queue %s", how, name, answer.get("jobId"), op.batch_queue.queue)
        return batch.describe_service_job(str(answer["jobId"]))

    def attached(self, service: dict[str, Any], batch: HeteroBatchHook) -> dict[str, Any]:
        """Keep the service job's id (on_kill terminates it) and tell XCom which it is."""
        self.op.service_job_id = str(service["jobId"])
        self.context["ti"].xcom_push(key=SERVICE_JOB_XCOM_KEY, value=_service_result(service))
        return service

    # -- waiting in the worker -------------------------------------------------------------------

    def wait(self, batch: HeteroBatchHook, hook: HeteroTrainingHook, service: dict[str, Any]) -> dict[str, Any]:
        """Follow the service job until it ends: its states, its attempts, the latest attempt's log."""
        from airflow_hetero.job.service_job import blocked_reason

        watch = _Watch(self, batch, hook)
        started = time.monotonic()
        while True:
            watch.see(service)
            blocked = blocked_reason(service)
            if blocked is not None:
                self.fail_blocked(batch, service, blocked)
            if service.get("status") in ("SUCCEEDED", "FAILED"):
                watch.finish()
                return self.outcome(hook, service)
            limit = self.op.max_ingestion_time
            if limit is not None and time.monotonic() - started > limit:
                batch.terminate_service_job(str(service["jobId"]), "max_ingestion_time passed")
                raise self.timeout_error(
                    service, f"is still {service.get('status')} after {limit:g}s (max_ingestion_time)"
                )
            time.sleep(self.op.check_interval)
            service = batch.describe_service_job(str(service["jobId"]))

    def fail_blocked(self, batch: HeteroBatchHook, service: dict[str, Any], reason: str) -> None:
        """Terminate a job its queue can never run, and fail the task (no retry: it would wait the same)."""
        from airflow_hetero.job.service_job import blocked_message

        batch.terminate_service_job(str(service["jobId"]), reason[:256])
        self.op.service_job_id = None
        raise AirflowFailException(blocked_message(service, reason))

    def timeout_error(self, service: dict[str, Any], what: str) -> Exception:
        from airflow_hetero.job.outcome import ASKED_TO_STOP, TrainingJobTimeoutError

        name = str(service.get("jobName"))
        return TrainingJobTimeoutError(
            f"Service job {name} {what}{ASKED_TO_STOP}", job_name=name, status=str(service.get("status"))
        )

    def outcome(self, hook: HeteroTrainingHook, service: dict[str, Any]) -> dict[str, Any]:
        """SUCCEEDED: the latest attempt's result dict, with the service job and every attempt's billed time;
        FAILED: the task's error, with Batch's statusReason and SageMaker's FailureReason."""
        from airflow_hetero.job.outcome import TrainingJobFailedError, resolve_outcome
        from airflow_hetero.job.service_job import attempt_training_jobs, failure_message, latest_training_job

        self.op.service_job_id = None
        latest = latest_training_job(service)
        training = hook.find_training_job(latest) if latest else None
        if training is not None:  # the summary of a failed job too reads it
            self.context["ti"].xcom_push(key=JOB_NAME_XCOM_KEY, value=training.get("TrainingJobName"))
        if service.get("status") != "SUCCEEDED" or training is None:
            reason = (training or {}).get("FailureReason") or service.get("statusReason")
            raise TrainingJobFailedError(
                failure_message(service, training),
                job_name=latest or str(service.get("jobName")),
                status=str(service.get("status")),
                failure_reason=reason,
            )
        result = resolve_outcome(training, fail_on_stopped=self.op.fail_on_stopped)
        billed = [
            (hook.find_training_job(n) or {}) if n != latest else training for n in attempt_training_jobs(service)
        ]
        result["service_job"] = _service_result(service)
        result["service_job"]["billable_seconds"] = sum(int(d.get("BillableTimeInSeconds") or 0) for d in billed)
        return result

    # -- deferred ------------------------------------------------------------------------------

    def defer_queue(self, service: dict[str, Any], after_attempt: str | None) -> None:
        """Hand the wait in the queue to the triggerer (it returns when an attempt starts or the job ends)."""
        from airflow_hetero.triggers.queue import HeteroServiceJobTrigger

        op = self.op
        op.defer(
            trigger=HeteroServiceJobTrigger(
                str(service["jobId"]),
                job_name=str(service.get("jobName")),
                job_queue=str(op.batch_queue.queue),
                after_attempt=after_attempt,
                **op.aws_settings(),
                poll_interval=float(op.check_interval),
                stop_on_kill=True,
            ),
            method_name="execute_queued_complete",
            kwargs={"service_job_id": str(service["jobId"]), "stage": "queue"},
        )

    def defer_attempt(self, service_job_id: str, training_job: str) -> None:
        """Hand the running attempt's training job to the training-job trigger (its kill terminates the service job)."""
        from airflow_hetero.triggers.queue import HeteroQueuedTrainingTrigger

        op = self.op
        op.defer(
            trigger=HeteroQueuedTrainingTrigger(
                training_job,
                service_job_id=service_job_id,
                **op.aws_settings(),
                poll_interval=float(op.check_interval),
                stop_on_kill=True,
                not_found_grace_seconds=op.not_found_grace_seconds,
                created_at=time.time(),
            ),
            method_name="execute_queued_complete",
            kwargs={"service_job_id": service_job_id, "stage": "training"},
        )

    def resume(self, event: dict[str, Any], service_job_id: str, stage: str) -> dict[str, Any]:
        """After a deferral: the next deferral (a new attempt, or back to the queue), or the outcome."""
        batch = self.op.make_batch_hook()
        hook = self.op.make_hook()
        self.op.service_job_id = service_job_id
        if event.get("status") in ("timeout", "error"):
            batch.terminate_service_job(service_job_id, f"The Airflow task's wait ended: {event.get('status')}")
            raise AirflowFailException(
                f"Waiting for service job {service_job_id} failed: {event.get('message') or event}"
            )
        service = batch.describe_service_job(service_job_id)
        if event.get("status") == "blocked":
            self.fail_blocked(batch, service, str(event.get("status_reason")))
        training = event.get("training_job") if stage == "queue" else event.get("job_name")
        final = service.get("status") in ("SUCCEEDED", "FAILED")
        training = real_name(hook, str(training)) if training else None
        if self.op.print_log and training and (stage == "training" or final):
            self.show_tail(hook, training)
        if final:
            return self.outcome(hook, service)
        if stage == "queue" and training:
            self.log.info("Service job %s: %s", service.get("jobName"), _state(service))
            self.context["ti"].xcom_push(key=JOB_NAME_XCOM_KEY, value=training)
            self.defer_attempt(service_job_id, training)
        self.log.info("Service job %s: %s (its attempt %s ended)", service.get("jobName"), _state(service), training)
        self.defer_queue(service, after_attempt=training)
        raise AssertionError("not reached: defer raises TaskDeferred")

    def show_tail(self, hook: HeteroTrainingHook, name: str) -> None:
        tailer = hook.log_tailer(name, emit=lambda line: self.log.info("%s", line))
        try:
            tailer.emit_tail()
        except Exception as exc:
            self.log.warning("Could not read the logs of %s: %s", name, exc)

    # -- the task ends ---------------------------------------------------------------------------

    def terminate_own(self, reason: str) -> str | None:
        """Terminate this task instance's unfinished service job (found by its names and identity)."""
        from airflow_hetero.job.identity import TaskIdentity
        from airflow_hetero.job.service_job import identity_of_service_job, is_final

        job = self.load()
        batch = self.op.make_batch_hook()
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

    def __init__(self, run: QueueRun, batch: HeteroBatchHook, hook: HeteroTrainingHook) -> None:
        self.run, self.batch, self.hook, self.log = run, batch, hook, run.log
        self.state: tuple[Any, Any] | None = None
        self.attempt: str | None = None
        self.transitions = 0
        self.pushed = False
        self.tailer: LogTailer | None = None

    def see(self, service: dict[str, Any]) -> None:
        """Log what changed in ``service``; follow its latest attempt's training job."""
        from airflow_hetero.job.service_job import attempt_training_jobs, latest_training_job

        status = service.get("status")
        state = (status, service.get("statusReason"))
        name = service.get("jobName")
        if state != self.state:
            was = self.state[0] if self.state else None
            place = (
                self.batch.queue_place(str(service.get("jobQueue")), service.get("jobArn"))
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
            self.attempt, self.transitions, self.pushed = latest, 0, False
        if latest and status in _ATTEMPT_STATES:
            self.follow(latest)

    def follow(self, name: str) -> None:
        """The attempt's SecondaryStatus transitions and ``[group/host]`` log lines so far."""
        op = self.run.op
        try:
            training = self.hook.find_training_job(name)
        except Exception as exc:
            self.log.warning("Could not describe training job %s: %s", name, exc)
            return
        if training is None:
            return
        name = str(training.get("TrainingJobName") or name)  # an ARN's name is lower-cased; the logs are not
        if not self.pushed:
            self.run.context["ti"].xcom_push(key=JOB_NAME_XCOM_KEY, value=name)
            self.pushed = True
        seen = op.log_transitions(name, training, self.transitions)
        rescan, self.transitions = seen > self.transitions, seen
        if op.print_log and self.tailer is None:
            self.tailer = op.make_tailer(self.hook, name, training)
        if self.tailer is not None:
            try:
                self.tailer.poll(rescan=rescan)
            except Exception as exc:
                self.log.warning("Stopped following the logs of %s: %s", name, exc)
                self.tailer = None

    def finish(self) -> None:
        """Print the rest of the followed attempt's log."""
        if self.tailer is not None:
            try:
                self.tailer.flush()
            except Exception as exc:
                self.log.warning("Stopped following the logs of %s: %s", self.attempt, exc)
            self.tailer = None
