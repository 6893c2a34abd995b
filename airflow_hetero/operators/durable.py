"""Durable jobs (Airflow 3.3's ``ResumableJobMixin``): what the training operator stores, reads and re-attaches.

The operator is a ``ResumableJobMixin`` (:mod:`airflow_hetero._compat`; below 3.3 common-compat's stand-in, which
submits on every try). Under its ``external_id_key`` it stores a *reference*: the mode and the training job's name
with the capacity chain's attempts so far (direct mode), or the service job's id and name (queue mode). A retry
reads it first, and one DescribeTrainingJob (DescribeServiceJob) decides, as the mixin says: a running job of this
task instance is re-attached (no walk of its names, no ListServiceJobs), a completed one returns its result,
anything else goes on to ``submit_job``. ``submit_job`` is the walk of the task instance's names by identity
(:func:`~airflow_hetero.operators.submission.start`), which re-attaches to a job of its own before it submits: so a
store that is empty (the worker died between the create's answer and the store write), unreadable, or behind (a
capacity fallback's create not written yet) still ends with one job (docs/failure-semantics.md). Every new
cluster of a fallback is written as it is attached (:mod:`~airflow_hetero.operators.job_store`: the reference, the
tolerant store). Imported when the task runs, never at DAG parse.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from airflow_hetero.operators.job_store import (
    NOT_FOUND,
    NOT_OURS,
    UNREADABLE,
    direct_reference,
    queue_reference,
    reference_of,
    result_of,
)

if TYPE_CHECKING:
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.task_settings import RunSettings


class DurableRun:
    """The bodies of the mixin's methods for one run of the training operator."""

    def __init__(self, task: RunSettings, run: TrainingRun) -> None:
        self.task, self.run = task, run

    def submit(self) -> dict[str, Any]:
        """``submit_job``: the walk of the names (re-attach or submit, exactly once); the job's reference."""
        from airflow_hetero.operators.direct_run import DirectRun
        from airflow_hetero.operators.queue_steps import QueueRun

        task, run = self.task, self.run
        if task.batch_queue is not None:
            queue = QueueRun(task, run)
            service = queue.start()
            run.follow = functools.partial(queue.follow, service)
            return queue_reference(service)
        direct = DirectRun(task, run)
        job = direct.prepare()
        name, describe = direct.attach(job)
        run.follow = functools.partial(direct.follow, job, name, describe)
        return direct_reference(run, name)

    def status(self, reference: Any) -> str:
        """``get_job_status``: one describe of the stored job, its status; one of :data:`NOT_FOUND`,
        :data:`NOT_OURS`, :data:`UNREADABLE` when it cannot be re-attached."""
        from airflow_hetero.job.identity import TaskIdentity
        from airflow_hetero.job.service_job import identity_of_service_job
        from airflow_hetero.operators.queue_steps import batch_hook

        task, run = self.task, self.run
        ref = reference_of(task, reference)
        if ref is None:
            return UNREADABLE
        try:
            if ref["mode"] == "queue":
                found: dict[str, Any] | None = batch_hook(task, run).describe_service_job(ref["service_job_id"])
                owner = identity_of_service_job(found or {})
            else:
                found = run.hook.find_training_job(ref["job_name"])
                owner = None if found is None else run.hook.identity_of(found)
        except Exception as exc:
            task.log.warning("Could not describe the stored job %s: %s", ref["job_name"], exc)
            return UNREADABLE
        if found is None:
            return NOT_FOUND
        if owner != TaskIdentity.of(run.context["ti"]).digest:
            return NOT_OURS
        run.described = found
        return str(found.get("status") if ref["mode"] == "queue" else found.get("TrainingJobStatus"))

    def reattach(self, reference: Any) -> None:
        """Follow the stored job :meth:`status` described (no walk of the names, no listing)."""
        from airflow_hetero.operators.capacity_fallback import restored_chain
        from airflow_hetero.operators.direct_run import DirectRun
        from airflow_hetero.operators.queue_steps import QueueRun

        task, run = self.task, self.run
        ref, described = reference_of(task, reference), run.described
        if ref is None or described is None:
            raise RuntimeError("a re-attach from the task state store needs the job get_job_status described")
        task.log.info("Re-attaching to job %s from the task state store, not submitting a new one", ref["job_name"])
        if ref["mode"] == "queue":
            queue = QueueRun(task, run)
            queue.load()  # the job phase of the pipeline (right-sizing's decision in XCom), as the walk's re-attach
            queue.attached(described)
            run.follow = functools.partial(queue.follow, described)
            return
        capacity = ref.get("capacity")
        run.chain = restored_chain(task, {"attempts": capacity} if isinstance(capacity, list) else None)
        direct = DirectRun(task, run)
        job = direct.prepare(new_round=False)
        name, describe = direct.attached(ref["job_name"], described)
        run.follow = functools.partial(direct.follow, job, name, describe)

    def without_store(self) -> None:
        """The mixin's steps where no task state store exists (``execute`` called outside Airflow's task runner,
        Airflow below 3.3 alike): the walk, then the wait."""
        self.poll(self.submit())

    def poll(self, reference: Any) -> None:
        """``poll_until_complete``: the wait (or the deferral) for the submitted or stored job."""
        if self.run.follow is None:
            self.reattach(reference)
        follow = self.run.follow
        if follow is None:  # pragma: no cover - set just above
            raise RuntimeError("no job to follow")
        self.run.result = follow()

    def result(self, reference: Any) -> dict[str, Any]:
        """``get_job_result``: the result of the wait; of the stored job when it had already completed."""
        if self.run.result is None:
            self.poll(reference)
        return result_of(self.run)
