"""The operator's deferred wait: hand the job to the triggerer, then decide the outcome when it answers.

:class:`DeferredWait` is the deferrable counterpart of :class:`~airflow_hetero.operators.sync_wait.SyncWait`:
``defer`` builds the :class:`~airflow_hetero.triggers.training.HeteroTrainingTrigger` from the operator's AWS
settings and limits (deadlines counted from the task's start, :func:`airflow_hetero.job.waiting.deferral_deadline`);
``resume`` is ``execute_complete``: the same outcome rules and XCom as the synchronous wait, and a capacity
failure submits the next cluster and defers again. Imported when the task runs, never at DAG parse.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero._compat import Context


class DeferredWait:
    """The deferral of operator ``op`` (a :class:`~airflow_hetero.operators.training.HeteroTrainingOperator`)."""

    def __init__(self, op: Any) -> None:
        self.op = op

    def deadline(self, started_at: float) -> tuple[float | None, str | None, float | None]:
        """(trigger deadline, what it is, Airflow's own deferral timeout in seconds), from the task's start."""
        from airflow_hetero.job.waiting import deferral_deadline

        timeout = self.op.execution_timeout
        return deferral_deadline(
            started_at,
            max_ingestion_time=self.op.max_ingestion_time,
            wait_limit=self.op.wait_limit,
            execution_timeout=None if timeout is None else timeout.total_seconds(),
        )

    def defer(self, name: str, started_at: float | None) -> None:
        """Hand the wait for job ``name`` to the triggerer (raises Airflow's ``TaskDeferred``)."""
        from datetime import timedelta

        from airflow_hetero.triggers.training import HeteroTrainingTrigger

        op = self.op
        started_at = time.time() if started_at is None else started_at
        deadline, reason, airflow_timeout = self.deadline(started_at)
        op.defer(
            trigger=HeteroTrainingTrigger(
                name,
                **op.aws_settings(),
                poll_interval=float(op.check_interval),
                deadline=deadline,
                stop_on_kill=True,
                started_at=started_at,
                created_at=op.submitted_at,
                deadline_reason=reason,
                not_found_grace_seconds=op.not_found_grace_seconds,
            ),
            method_name="execute_complete",
            kwargs=op.deferral_kwargs(started_at),
            timeout=None if airflow_timeout is None else timedelta(seconds=airflow_timeout),
        )

    def resume(self, context: Context, event: dict[str, Any], capacity: dict[str, Any] | None) -> dict[str, Any]:
        """The trigger's ``event`` turned into the task's result (or failure). ``capacity``: a job with
        fallbacks' attempts so far and the task's start (None: resumed without them, as ``dag.test`` does)."""
        from airflow_hetero.job.limits import deferred_timeout_message
        from airflow_hetero.job.outcome import TrainingJobFailedError, TrainingJobLimitError, outcome_from_event

        op = self.op
        op.active_job_name = str(event.get("job_name"))
        hook = op.make_hook()
        if op.print_log and event.get("status") == "done":
            self.emit_log_tail(hook, op.active_job_name)
        op.chain = op.restored_chain(capacity)
        try:
            result = outcome_from_event(
                event,
                describe=hook.describe_training_job,
                stop=hook.stop_training_job,
                fail_on_stopped=op.fail_on_stopped,
                timeout_message=deferred_timeout_message(event.get("deadline_reason"), op.max_ingestion_time),
            )
        except TrainingJobLimitError as err:
            raise op.budget_stopped(hook, err) from err.__cause__
        except TrainingJobFailedError as err:
            self.next_cluster(context, err, capacity)
            raise  # not reached: next_cluster defers or raises
        op.active_job_name = None
        final: dict[str, Any] = op.with_attempts(result)
        return final

    def emit_log_tail(self, hook: Any, name: str) -> None:
        """The end of every host's log, into the task log (a log that cannot be read only warns)."""
        log = self.op.log
        tailer = hook.log_tailer(name, emit=lambda line: log.info("%s", line))
        try:
            tailer.emit_tail()
        except Exception as exc:
            log.warning("Could not read the logs of %s: %s", name, exc)

    def next_cluster(self, context: Context, err: Exception, capacity: dict[str, Any] | None) -> None:
        """After a failed job: submit the next cluster of the fallbacks and defer again, or raise ``err``."""
        op = self.op
        job = op.rightsize(op.load_definition(context), context)
        if op.chain is None and capacity is None:  # resumed without the method's kwargs (dag.test)
            op.chain = op.capacity_chain(job, new_round=False)  # rebuilt by attach's walk of the jobs
        if not op.capacity_failed(err):
            raise err
        name, _ = op.attach(op.make_hook(), job, context)
        op.defer_wait(name, (capacity or {}).get("started_at"))  # the operator's step, as a subclass may have it
