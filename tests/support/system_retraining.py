"""The example retraining DAG's scheduled runs on the system test's Airflow (tests/system/dags/system_retraining.py):
started as soon as the stack is up, run by the scheduler while the other system tests run, waited for at the end by
the test of the Runs page.

:func:`start_retraining` seeds each week's data into the endpoint's S3 (the demo's rows, parts and feature
statistics), takes the machine-wide lock of the example job's fixed port (:mod:`support.loopback`), unpauses the
DAG, and watches the endpoint from a thread: once the first run's first job has failed (the endpoint starts
without capacity for :data:`NO_CAPACITY_TYPE`, the type of the example job's training group), it gives that
capacity back through the endpoint's control path. So the first run falls back to the group's other type and the
next two run the cluster planned. :meth:`Retraining.ended_runs` waits for the three runs to end;
:meth:`Retraining.stop` ends the watch and releases the lock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from airflow_hetero.demo import NO_CAPACITY_TYPE, make_rows, seed_s3
from airflow_hetero.local.api.control import change_capacity
from support.loopback import fixed_ports
from support.process_group import wait_until
from support.system_airflow import DONE, Stack
from support.system_jobs import client

DAG_ID = "system_retraining"
#: The weeks the DAG's three scheduled runs train on (its start_date .. end_date), oldest first.
WEEKS = ("2026-01-04", "2026-01-11", "2026-01-18")
#: The example job's base_job_name (hetero_retraining/job.yaml): only this DAG's jobs carry it.
JOB_PREFIX = "hetero-retrain"
#: The port the example job's data hosts listen on (job.yaml's ``port``).
PORT = 7100
#: How long the three runs may take, from the unpause (each about 30 s beside the other system tests).
RUNS_TIMEOUT = 480.0
#: How long the DAG may take to appear after the stack is up (the dag-processor's first parse).
PARSE_TIMEOUT = 120.0


@dataclass
class Retraining:
    """The scheduled runs under way: the capacity watch and the port lock."""

    stack: Stack
    started: float
    locks: ExitStack
    stopping: threading.Event = field(default_factory=threading.Event)
    #: When the capacity was given back (monotonic seconds), None until then.
    restored_at: list[float] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    thread: threading.Thread | None = None

    def runs(self) -> list[dict[str, Any]]:
        """The DAG's runs as the REST API lists them, oldest first."""
        answer = self.stack.rest("GET", f"/api/v2/dags/{DAG_ID}/dagRuns?order_by=logical_date&limit=100")
        runs: list[dict[str, Any]] = answer["dag_runs"]
        return runs

    def ended_runs(self) -> list[dict[str, Any]]:
        """The three runs, ended (oldest first); fails after :data:`RUNS_TIMEOUT` from the unpause."""
        left = max(self.started + RUNS_TIMEOUT - time.monotonic(), 1.0)

        def ended() -> list[dict[str, Any]] | None:
            found = self.runs()
            return found if len(found) == len(WEEKS) and all(r["state"] in DONE for r in found) else None

        runs = wait_until(f"{len(WEEKS)} runs of {DAG_ID} ended", ended, left, 2, detail=self.stack.logs)
        self.stop()
        return runs

    def stop(self) -> None:
        """End the watch (at most a poll's wait) and release the port."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=30)
        self.locks.close()

    def _watch(self) -> None:
        """Give :data:`NO_CAPACITY_TYPE` back once a job of the DAG failed (the first run's first attempt)."""
        try:
            sagemaker = client(self.stack, "sagemaker")
            while not self.stopping.wait(0.5) and time.monotonic() < self.started + RUNS_TIMEOUT:
                failed = sagemaker.list_training_jobs(NameContains=JOB_PREFIX, StatusEquals="Failed")
                if failed["TrainingJobSummaries"]:
                    change_capacity(self.stack.endpoint_url, capacity={NO_CAPACITY_TYPE: None})
                    self.restored_at.append(time.monotonic())
                    return
        except BaseException as error:  # said by the test that waits for the runs
            self.errors.append(error)


def start_retraining(stack: Stack) -> Retraining:
    """Seed the weeks' data, take the port, unpause the DAG and start the capacity watch (see the module)."""
    s3 = client(stack, "s3")
    rows = make_rows(4000)  # the demo's default
    for week in WEEKS:
        seed_s3(s3, rows, week)
    locks = ExitStack()
    locks.enter_context(fixed_ports(PORT))
    try:
        wait_until(f"{DAG_ID} parsed", lambda: _exists(stack), PARSE_TIMEOUT, detail=stack.logs)
        stack.rest("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    except BaseException:
        locks.close()
        raise
    retraining = Retraining(stack, time.monotonic(), locks)
    retraining.thread = threading.Thread(target=retraining._watch, name="capacity-watch", daemon=True)
    retraining.thread.start()
    return retraining


def _exists(stack: Stack) -> bool:
    with contextlib.suppress(AssertionError):  # 404 until the dag-processor has parsed the file
        return bool(stack.rest("GET", f"/api/v2/dags/{DAG_ID}"))
    return False
