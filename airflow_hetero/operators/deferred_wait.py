"""The deferred wait of direct mode: hand the job to the triggerer, then decide the outcome when it answers.

:class:`DeferredWait` is the deferrable counterpart of :class:`~airflow_hetero.operators.sync_wait.SyncWait`:
the deferral itself is :meth:`DirectRun.defer <airflow_hetero.operators.direct_run.DirectRun.defer>`;
``resume`` is ``execute_complete``: the same outcome rules and XCom as the synchronous wait, and a capacity
failure submits the next cluster (through the same pipeline and walk as ``execute``) and defers again. Imported
when the task runs, never at DAG parse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.task_settings import RunSettings


class DeferredWait:
    """The deferral of one run of the training operator in direct mode."""

    def __init__(self, task: RunSettings, run: TrainingRun) -> None:
        self.task, self.run = task, run

    def resume(self, event: dict[str, Any], capacity: dict[str, Any] | None) -> dict[str, Any]:
        """The trigger's ``event`` turned into the task's result (or failure). ``capacity``: a job with
        fallbacks' attempts so far and the task's start (None: resumed without them, as ``dag.test`` does)."""
        from airflow_hetero.job.limits import deferred_timeout_message
        from airflow_hetero.job.outcome import TrainingJobFailedError, TrainingJobLimitError, outcome_from_event
        from airflow_hetero.operators.budget_steps import budget_stopped
        from airflow_hetero.operators.capacity_fallback import restored_chain
        from airflow_hetero.operators.direct_run import finished
        from airflow_hetero.operators.job_trace import trace_ended
        from airflow_hetero.operators.sync_wait import emit_log_tail

        task, run = self.task, self.run
        run.active_job_name = str(event.get("job_name"))
        if task.print_log and event.get("status") == "done":
            emit_log_tail(task, run.hook, run.active_job_name)
        run.chain = restored_chain(task, capacity)
        if capacity is not None and capacity.get("started_at") is not None:
            run.started_at = float(capacity["started_at"])

        def described(name: str) -> dict[str, Any]:
            run.ended = run.hook.describe_training_job(name)  # its trace, with the transitions' own times
            return run.ended

        try:
            try:
                result = outcome_from_event(
                    event,
                    describe=described,
                    stop=run.hook.stop_training_job,
                    fail_on_stopped=task.fail_on_stopped,
                    timeout_message=deferred_timeout_message(event.get("deadline_reason"), task.max_ingestion_time),
                )
            finally:
                trace_ended(task, run)
        except TrainingJobLimitError as err:
            raise budget_stopped(task, run, err) from err.__cause__
        except TrainingJobFailedError as err:
            self.next_cluster(err, capacity)
            raise  # not reached: next_cluster defers or raises
        run.active_job_name = None
        return finished(task, run, result)

    def next_cluster(self, err: Exception, capacity: dict[str, Any] | None) -> None:
        """After a failed job: submit the next cluster of the fallbacks and defer again, or raise ``err``."""
        from airflow_hetero.operators.capacity_fallback import capacity_failed
        from airflow_hetero.operators.direct_run import DirectRun

        direct = DirectRun(self.task, self.run)
        job = direct.prepare(new_round=False)  # resumed without the method's kwargs (dag.test): a chain anew
        if not capacity_failed(self.run, err):
            raise err
        from airflow_hetero.operators.job_store import remember_direct

        name, _ = direct.attach(job)
        remember_direct(self.task, self.run, name)
        direct.defer(name)
