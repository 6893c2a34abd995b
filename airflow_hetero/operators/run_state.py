"""What lives for one run of the training operator (one ``execute``, or one resume after a deferral), typed.

The operator keeps none of it as loose attributes: :class:`TrainingRun` is made when the task starts (or
resumes), handed to the pipeline's steps, the name walk, the waits and the queue run, and read by ``on_kill``.
Imported when the task runs, never at DAG parse.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.hooks.batch import HeteroBatchHook
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.capacity_chain import CapacityChain


@dataclass
class TrainingRun:
    """One run of the training operator for the task instance of ``context``."""

    context: Context
    #: The SageMaker hook of this run (the operator's, built once per task run).
    hook: HeteroTrainingHook
    #: Epoch when the task started (deferral deadlines count from it; kept across a deferral).
    started_at: float = field(default_factory=time.time)
    #: Monotonic time when this run started (the synchronous wait's ``max_ingestion_time``).
    started: float = field(default_factory=time.monotonic)
    #: A job with fallbacks: its capacity attempts in this try (None: no fallback).
    chain: CapacityChain | None = None
    #: This task instance's jobs seen so far (by name): what a budget counts as already spent.
    earlier_jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The role ARN the provider steps expanded to (None inside: no role name), once they ran in this walk:
    #: they run at its first submit, and the next candidate name after a name race reuses them.
    steps_role_arn: tuple[str | None] | None = None
    #: True once the provider's ``S3Operations`` (buckets, uploads) ran in this walk (at its first send).
    s3_operations_done: bool = False
    #: The training job ``on_kill`` stops (None: none running that this run started or re-attached to).
    active_job_name: str | None = None
    #: Epoch of this run's own CreateTrainingJob ("not found" soon after is eventual consistency).
    submitted_at: float | None = None
    #: The submitted job's MaxRuntime (+ MaxWait) + margin: how long a wait may last at most.
    wait_limit: float | None = None
    #: This run's right-sizing decision (plain JSON, as pushed to XCom), when the task has a policy.
    decision: dict[str, Any] | None = None
    #: Queue mode: the service job ``on_kill`` terminates.
    service_job_id: str | None = None
    #: Queue mode: the Batch hook of this run (built on first use).
    batch_hook: HeteroBatchHook | None = None
    #: Durable jobs (:mod:`~airflow_hetero.operators.durable`): the wait for the job this run submitted or
    #: re-attached to, set by ``submit_job`` (or a re-attach from the task state store), run by ``poll_until_complete``.
    follow: Callable[[], dict[str, Any]] | None = None
    #: The job (or service job) description that ``get_job_status`` read from the stored reference.
    described: dict[str, Any] | None = None
    #: The task's result dict, once the wait ended.
    result: dict[str, Any] | None = None
    #: The description of a job the run saw end, until its trace is emitted (:mod:`~.job_trace`).
    ended: dict[str, Any] | None = None
