"""The bounds every waiting path shares: the operator's wait, its deferral, the sensor and the trigger.

How long a job may legitimately take (its own limits plus a margin), and the grace after our own
CreateTrainingJob during which "not found" is eventual consistency, not an error. Standard library
only, and nothing here is needed to parse a DAG file.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from airflow_hetero.sagemaker_facts import DEFAULT_MAX_RUNTIME_SECONDS

#: Extra seconds allowed beyond the job's own limits (provisioning, download, upload).
WAIT_MARGIN_SECONDS = 3600
#: "Not found" this soon after our own CreateTrainingJob is eventual consistency.
NOT_FOUND_GRACE_SECONDS = 60.0
#: What the bound of :func:`wait_limit_seconds` is called in every message that names it.
JOB_LIMIT = "MaxRuntime (+ MaxWait) plus margin"
#: What every waiting path logs while the job it just created is not visible yet.
NOT_FOUND_YET = "Training job %s not found yet (just created): will look again"


def wait_limit_seconds(describe_or_request: dict[str, Any]) -> int:
    """How long a job may legitimately take: MaxRuntime (+ MaxWait for spot) + a margin.

    Accepts a DescribeTrainingJob answer or a CreateTrainingJob request (same field names).
    """
    stopping = describe_or_request.get("StoppingCondition") or {}
    limit = int(stopping.get("MaxRuntimeInSeconds") or DEFAULT_MAX_RUNTIME_SECONDS)
    if describe_or_request.get("EnableManagedSpotTraining"):
        limit += int(stopping.get("MaxWaitTimeInSeconds") or 0)
    return limit + WAIT_MARGIN_SECONDS


def past_job_limit(describe: dict[str, Any]) -> bool:
    """True when the job has existed longer than its MaxRuntime (+ MaxWait) plus margin."""
    created = describe.get("CreationTime")
    if not isinstance(created, datetime):
        return False
    return time.time() > created.timestamp() + wait_limit_seconds(describe)


def not_found_yet(exc: BaseException, created_at: float | None, grace: float | None = None) -> bool:
    """True when ``exc`` says "no such job" within ``grace`` seconds (None: :data:`NOT_FOUND_GRACE_SECONDS`)
    of our own create at ``created_at``."""
    from airflow_hetero._retry import is_not_found

    if created_at is None:
        return False
    limit = NOT_FOUND_GRACE_SECONDS if grace is None else grace
    return time.time() - float(created_at) < limit and is_not_found(exc)


def deferral_deadline(
    started_at: float,
    *,
    max_ingestion_time: float | None,
    wait_limit: float | None,
    execution_timeout: float | None,
) -> tuple[float | None, str | None, float | None]:
    """(trigger deadline, what it is, Airflow's own deferral timeout in seconds), from the task's start.

    The trigger gives up first (so ``execute_complete`` stops the job and says which limit
    passed): at ``max_ingestion_time``, else at the submitted job's MaxRuntime (+ MaxWait) +
    margin (``wait_limit``), and a little before ``execution_timeout`` (seconds), which is also
    Airflow's deferral timeout (Airflow 3 does not apply ``execution_timeout`` to deferred tasks).
    """
    deadlines: list[tuple[float, str]] = []
    if max_ingestion_time is not None:
        deadlines.append((started_at + max_ingestion_time, f"max_ingestion_time ({max_ingestion_time:g}s)"))
    elif wait_limit is not None:
        deadlines.append((started_at + wait_limit, f"the job's {JOB_LIMIT} ({wait_limit:g}s)"))
    airflow_timeout = None
    if execution_timeout is not None:
        margin = min(60.0, execution_timeout * 0.1)
        deadlines.append((started_at + execution_timeout - margin, f"execution_timeout ({execution_timeout:g}s)"))
        airflow_timeout = max(1.0, started_at + execution_timeout - time.time())
    if not deadlines:
        return None, None, airflow_timeout
    deadline, reason = min(deadlines)
    return deadline, reason, airflow_timeout
