"""The operator's capacity fallback: the next cluster after a capacity failure, as a mixin of
:class:`~airflow_hetero.operators.training.HeteroTrainingOperator` (docs/capacity.md).

The operator walks its job names as ever (:meth:`start_job`); for a job with fallbacks it keeps a
:class:`~airflow_hetero.job.capacity_chain.CapacityChain`: each job of the walk that failed for lack of
capacity is an attempt, and the create sends the chain's next cluster, again with the next one when the
create is refused for a type's quota. Importing this module loads nothing beyond the typing names.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.capacity_chain import CapacityChain
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.job.outcome import TrainingJobFailedError

#: XCom key of the job's name, pushed as soon as the job is created or re-attached, again for each
#: capacity attempt: there whatever the task's ending (a failed task pushes no ``return_value``), for the
#: summary of a failed job. Imported from :mod:`airflow_hetero.operators.training` by its readers.
JOB_NAME_XCOM_KEY = "training_job_name"
#: XCom key of a job with fallbacks' failed attempts (the result's ``capacity_attempts``), pushed with
#: each job's name and before the task fails when no cluster is left: the summary reads it.
CAPACITY_ATTEMPTS_XCOM_KEY = "capacity_attempts"


class CapacityFallbackMixin:
    """Capacity attempts of the operator's job: the chain, the create of its next cluster, the result's
    ``capacity_attempts``."""

    task_id: str
    log: Any  # the operator's logger (Airflow's types differ between versions)
    capacity_attempts: int | None
    capacity_retry_delay: float
    chain: CapacityChain | None
    active_job_name: str | None
    submitted_at: float | None
    wait_limit: float | None

    def start_job(
        self, hook: HeteroTrainingHook, job: Submittable, context: Context, region: str
    ) -> tuple[str, dict[str, Any] | None]:
        """The operator's (submit or re-attach)."""
        raise NotImplementedError

    def fit_budget(self, hook: HeteroTrainingHook, request: dict[str, Any]) -> dict[str, Any]:
        """The operator's (``request`` within ``max_cost``)."""
        raise NotImplementedError

    def set_capacity_arguments(self, attempts: int | None, delay: float) -> None:
        """Check and keep ``capacity_attempts`` and ``capacity_retry_delay``; no chain yet."""
        if (attempts is not None and attempts < 1) or delay < 0:
            raise ValueError(
                f"capacity_attempts must be None or >= 1 and capacity_retry_delay >= 0, got {attempts!r} and {delay!r}"
            )
        self.capacity_attempts = attempts
        self.capacity_retry_delay = delay
        self.chain = None  # a job with fallbacks: its capacity attempts in this try

    def create(
        self, hook: HeteroTrainingHook, job: Submittable, name: str, request: dict[str, Any], identity: TaskIdentity
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Send the CreateTrainingJob (for a job with fallbacks: of the chain's next cluster, again on a
        capacity refusal); the answer and the request sent."""
        from airflow_hetero.job.capacity_failure import failure_of_client_error

        while True:
            sent = request if self.chain is None else self.request_of_next(self.chain, job, request)
            sent = self.fit_budget(hook, sent)  # each cluster priced as it is sent (docs/cost.md)
            self.log.info("CreateTrainingJob request for %s:\n%s", name, json.dumps(sent, indent=2, default=str))
            self.active_job_name = name
            self.submitted_at = time.time()
            try:
                return hook.create_training_job(sent, identity=identity.digest), sent
            except Exception as exc:
                failure = None if self.chain is None else failure_of_client_error(exc)
                if self.chain is None or failure is None:
                    raise
                from airflow_hetero.job.capacity_plan import cluster_of

                self.chain.refused(cluster_of(sent), failure, str(exc.response["Error"]["Code"]))  # type: ignore[attr-defined]
                self.active_job_name = None

    def request_of_next(self, chain: CapacityChain, job: Submittable, request: dict[str, Any]) -> dict[str, Any]:
        """``request`` on the chain's next cluster, tagged with its attempt; the capacity error when none is left."""
        from airflow_hetero.job.capacity_plan import request_for
        from airflow_hetero.job.identity import MAX_TAGS

        chain.plan_from(request, job.fallbacks)
        cluster = chain.next()
        if cluster is None and chain.new_round:
            self.log.warning("Every cluster failed for lack of capacity in an earlier try: starting again")
            chain.attempts.clear()
            cluster = chain.next()
        if cluster is None:
            raise chain.exhausted_error()
        if chain.attempts:
            self.log.warning("%s", chain.fallback_message(cluster))
            if self.capacity_retry_delay:
                time.sleep(self.capacity_retry_delay)
        sent = request_for(request, cluster)
        sent["Tags"] = [*sent.get("Tags", []), *chain.tags(cluster)]
        if len(sent["Tags"]) > MAX_TAGS:
            raise AirflowFailException(f"Task {self.task_id}: tags: no room for the capacity tags ({MAX_TAGS} at most)")
        return sent

    def attach(self, hook: HeteroTrainingHook, job: Submittable, context: Context) -> tuple[str, dict[str, Any] | None]:
        """:meth:`start_job`, then the job's name (and a chain's attempts) in XCom and the extra links
        (again for each new attempt)."""
        from airflow_hetero.job.capacity_chain import CapacityExhaustedError
        from airflow_hetero.job.waiting import wait_limit_seconds
        from airflow_hetero.links.training import persist_job_links

        region = hook.conn_region_name
        try:
            name, describe = self.start_job(hook, job, context, region)
        except CapacityExhaustedError as err:
            context["ti"].xcom_push(key=CAPACITY_ATTEMPTS_XCOM_KEY, value=err.attempts)
            raise
        if self.chain is not None:
            self.chain.new_round = False
            context["ti"].xcom_push(key=CAPACITY_ATTEMPTS_XCOM_KEY, value=self.chain.as_result())
        self.active_job_name = name
        if describe is not None:
            self.wait_limit = wait_limit_seconds(describe)
        persist_job_links(context, job_name=name, region=region)
        context["ti"].xcom_push(key=JOB_NAME_XCOM_KEY, value=name)
        return name, describe

    def capacity_chain(self, job: Submittable, new_round: bool = True) -> CapacityChain | None:
        """A new chain of capacity attempts for a job with fallbacks; None for one without (no fallback).
        ``new_round=False``: within a try already (the attempts come from the walk of the jobs)."""
        if not any(job.fallbacks.values()):
            return None
        from airflow_hetero.job.capacity_chain import CapacityChain

        return CapacityChain(limit=self.capacity_attempts, new_round=new_round)

    def capacity_failed(self, err: TrainingJobFailedError) -> bool:
        """True when the job failed for lack of capacity and has fallbacks: the chain goes on."""
        from airflow_hetero.job.capacity_failure import failure_of_reason

        return self.chain is not None and failure_of_reason(err.failure_reason) is not None

    def with_attempts(self, result: dict[str, Any]) -> dict[str, Any]:
        """The result dict, with ``capacity_attempts`` for a job with fallbacks (``[]``: the first cluster ran)."""
        if self.chain is not None:
            result["capacity_attempts"] = self.chain.as_result()
        return result

    def deferral_kwargs(self, started_at: float) -> dict[str, Any] | None:
        """What ``execute_complete`` needs of the chain (its attempts, the task's start); None without one."""
        if self.chain is None:
            return None
        return {"capacity": {"attempts": self.chain.as_result(), "started_at": started_at}}

    def restored_chain(self, capacity: dict[str, Any] | None) -> CapacityChain | None:
        """The chain :meth:`deferral_kwargs` handed over, or None."""
        if capacity is None:
            return None
        from airflow_hetero.job.capacity_chain import CapacityChain

        chain = CapacityChain(limit=self.capacity_attempts, new_round=False)
        chain.restore(capacity.get("attempts"))
        return chain
