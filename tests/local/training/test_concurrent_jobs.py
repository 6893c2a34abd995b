"""Many jobs created at once on a fresh endpoint, on a busy machine: none fails because of the
endpoint itself (its shared clients are used by every job's threads from the first moment)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cpu_load import cpu_burners
from support.local_jobkit import BUCKET, put_source, request, unique, wait

from airflow_hetero.local import LocalEndpoint, RunOptions

pytestmark = pytest.mark.slow

JOBS = 8
#: How long the creating threads may take to meet at the barrier, and to finish their create (all cores busy).
THREAD_TIMEOUT = 60.0


@pytest.fixture
def busy_endpoint(tmp_path: Path) -> Iterator[LocalEndpoint]:
    """A fresh endpoint (no client of its own built yet), all cores busy, threads switching often."""
    before = sys.getswitchinterval()
    with (
        cpu_burners(),
        LocalEndpoint(workdir=tmp_path / "work", run=RunOptions(stop_grace=1.0, log_flush_interval=0.2)) as ep,
    ):
        sys.setswitchinterval(1e-5)
        try:
            yield ep
        finally:
            sys.setswitchinterval(before)


def test_jobs_created_at_once_all_complete(busy_endpoint: LocalEndpoint) -> None:
    s3 = busy_endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    jobs = [unique("at-once") for _ in range(JOBS)]
    bodies = [
        request(job, put_source(s3, job, "print('done')\n"), groups=(("solo", "ml.c5.xlarge", 1),)) for job in jobs
    ]
    clients = [busy_endpoint.client("sagemaker") for _ in jobs]
    start = threading.Barrier(JOBS)
    errors: list[BaseException] = []

    def create(sm: Any, body: dict[str, Any]) -> None:
        try:
            start.wait(timeout=THREAD_TIMEOUT)  # a BrokenBarrierError is one of the errors below
            sm.create_training_job(**body)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create, args=pair, daemon=True) for pair in zip(clients, bodies, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT)
    assert not [t for t in threads if t.is_alive()], f"creates still running after {THREAD_TIMEOUT:g} s"
    assert errors == []
    ended = {job: wait(clients[0], job, timeout=120) for job in jobs}
    failed = {job: d.get("FailureReason") for job, d in ended.items() if d["TrainingJobStatus"] != "Completed"}
    assert failed == {}
