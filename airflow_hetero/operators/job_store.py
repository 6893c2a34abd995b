"""The task state store (Airflow 3.3+) as the training operator uses it: the job's reference, read and written
tolerantly (:mod:`~airflow_hetero.operators.durable` says what a retry does with it).

A reference is plain JSON: the mode and the training job's name with the capacity chain's attempts so far (direct
mode), or the service job's id and name (queue mode). A read that fails or finds no reference of the task's mode
answers nothing; a write that fails only warns: the walk of the task instance's names by identity finds the job
either way. Imported when the task runs, never at DAG parse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.task_settings import RunSettings

#: Statuses (SageMaker's TrainingJobStatus, Batch's service job status) of a job a retry waits for.
ACTIVE = frozenset({"InProgress", "SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING"})
#: Statuses of a job whose result a retry returns.
SUCCEEDED = frozenset({"Completed", "SUCCEEDED"})
#: What ``get_job_status`` answers for a stored job it cannot use: the mixin then calls ``submit_job`` (the walk).
NOT_FOUND, NOT_OURS, UNREADABLE = "NotFound", "NotThisTaskInstance", "Unreadable"


def mode_of(task: RunSettings) -> str:
    """``"queue"`` (``batch_queue=``) or ``"direct"``."""
    return "direct" if task.batch_queue is None else "queue"


def reference_of(task: RunSettings, value: Any) -> dict[str, Any] | None:
    """A stored value as this task's reference; None when it is not one (another mode, an older shape)."""
    if not isinstance(value, dict) or value.get("mode") != mode_of(task) or not isinstance(value.get("job_name"), str):
        return None
    if value["mode"] == "queue" and not isinstance(value.get("service_job_id"), str):
        return None
    return value


def direct_reference(run: TrainingRun, name: str) -> dict[str, Any]:
    """What a retry needs to re-attach to training job ``name``: it, and the capacity chain's attempts so far."""
    return {"mode": "direct", "job_name": name, "capacity": None if run.chain is None else run.chain.as_result()}


def queue_reference(service: dict[str, Any]) -> dict[str, Any]:
    """What a retry needs to re-attach to a service job: its id (and its name, for people)."""
    return {"mode": "queue", "service_job_id": str(service["jobId"]), "job_name": str(service.get("jobName"))}


class TolerantStore:
    """``task_state_store`` as the mixin reads and writes it: a read that fails, or finds no reference of this task's
    mode, answers nothing (the walk of the names decides); a write that fails only warns (the walk still finds the
    job)."""

    def __init__(self, task: RunSettings, store: Any) -> None:
        self.task, self.store = task, store

    def get(self, key: str, default: Any = None) -> Any:
        try:
            value = self.store.get(key)
        except Exception as exc:
            self.task.log.warning("Could not read the task state store (%s): finding the job by its names", exc)
            return default
        if value is not None and reference_of(self.task, value) is None:
            self.task.log.warning("The task state store holds no job of this mode (%r): finding it by its names", value)
            return default
        return value if value is not None else default

    def set(self, key: str, value: Any, **kwargs: Any) -> None:
        try:
            self.store.set(key, value, **kwargs)
        except Exception as exc:
            self.task.log.warning("Could not write the task state store (a retry finds the job by its names): %s", exc)


def resumable_context(task: RunSettings, context: Context) -> Context:
    """``context`` with its task state store (Airflow 3.3+) made tolerant; as it is without one."""
    store = context.get("task_state_store")
    if store is None:
        return context
    tolerant = dict(context)
    tolerant["task_state_store"] = TolerantStore(task, store)
    return cast("Context", tolerant)  # the same keys


def remember(task: RunSettings, run: TrainingRun, reference: dict[str, Any]) -> None:
    """Store ``reference`` (a capacity fallback's next job) when the task is durable and Airflow has a store."""
    store = run.context.get("task_state_store")
    if task.durable and store is not None:
        TolerantStore(task, store).set(task.external_id_key, reference)


def remember_direct(task: RunSettings, run: TrainingRun, name: str) -> None:
    """Store training job ``name`` with the chain's attempts (a capacity fallback's next cluster)."""
    remember(task, run, direct_reference(run, name))


def result_of(run: TrainingRun) -> dict[str, Any]:
    """The run's result dict, once ``execute_resumable`` returned."""
    if run.result is None:
        raise RuntimeError("the job's wait ended without a result")
    return run.result
