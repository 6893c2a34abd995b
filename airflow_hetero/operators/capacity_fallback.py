"""The capacity fallback's part of a run (docs/capacity.md): the chain of capacity attempts of a job with
fallbacks, the request of its next cluster (the pipeline's
:class:`~airflow_hetero.operators.pipeline.NextCluster` step), and the chain across a deferral.

The run walks its job names as ever (:func:`~airflow_hetero.operators.submission.start`); for a job with
fallbacks it keeps a :class:`~airflow_hetero.job.capacity_chain.CapacityChain` in its
:class:`~airflow_hetero.operators.run_state.TrainingRun`: each job of the walk that failed for lack of capacity
is an attempt, and the create sends the chain's next cluster, again with the next one when the create is
refused for a type's quota. Imported when the task runs, never at DAG parse.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.job.capacity_chain import CapacityChain
    from airflow_hetero.job.outcome import TrainingJobFailedError
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.task_settings import SubmitSettings


def new_chain(task: SubmitSettings, job: Submittable, new_round: bool = True) -> CapacityChain | None:
    """A new chain of capacity attempts for a job with fallbacks; None for one without (no fallback).
    ``new_round=False``: within a try already (the attempts come from the walk of the jobs)."""
    if not any(job.fallbacks.values()):
        return None
    from airflow_hetero.job.capacity_chain import CapacityChain

    return CapacityChain(limit=task.capacity_attempts, new_round=new_round)


def request_of_next(
    task: SubmitSettings, chain: CapacityChain, job: Submittable, request: dict[str, Any]
) -> dict[str, Any]:
    """``request`` on the chain's next cluster, tagged with its attempt; the capacity error when none is left."""
    from airflow_hetero.job.capacity_plan import request_for
    from airflow_hetero.job.identity import MAX_TAGS

    chain.plan_from(request, job.fallbacks)
    cluster = chain.next()
    if cluster is None and chain.new_round:
        task.log.warning("Every cluster failed for lack of capacity in an earlier try: starting again")
        chain.attempts.clear()
        cluster = chain.next()
    if cluster is None:
        raise chain.exhausted_error()
    if chain.attempts:
        task.log.warning("%s", chain.fallback_message(cluster))
        if task.capacity_retry_delay:
            time.sleep(task.capacity_retry_delay)
    sent = request_for(request, cluster)
    sent["Tags"] = [*sent.get("Tags", []), *chain.tags(cluster)]
    if len(sent["Tags"]) > MAX_TAGS:
        raise AirflowFailException(f"Task {task.task_id}: tags: no room for the capacity tags ({MAX_TAGS} at most)")
    return sent


def capacity_failed(run: TrainingRun, err: TrainingJobFailedError | Exception) -> bool:
    """True when the job failed for lack of capacity and has fallbacks: the chain goes on."""
    from airflow_hetero.job.capacity_failure import failure_of_reason

    reason = getattr(err, "failure_reason", None)
    return run.chain is not None and failure_of_reason(reason) is not None


def deferral_kwargs(run: TrainingRun) -> dict[str, Any] | None:
    """What ``execute_complete`` needs of the chain (its attempts, the task's start); None without one."""
    if run.chain is None:
        return None
    return {"capacity": {"attempts": run.chain.as_result(), "started_at": run.started_at}}


def restored_chain(task: SubmitSettings, capacity: dict[str, Any] | None) -> CapacityChain | None:
    """The chain :func:`deferral_kwargs` handed over, or None."""
    if capacity is None:
        return None
    from airflow_hetero.job.capacity_chain import CapacityChain

    chain = CapacityChain(limit=task.capacity_attempts, new_round=False)
    chain.restore(capacity.get("attempts"))
    return chain
