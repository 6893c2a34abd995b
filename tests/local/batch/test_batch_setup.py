"""``LocalEndpoint(batch_queues=...)`` / ``local serve --batch-queue``: a set-up Batch would refuse is refused
before anything is made, with Batch's words; the queue's timing out of range too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_hetero.local import BatchOptions, LocalEndpoint
from airflow_hetero.local.batch.setup import environment_request, queue_request
from airflow_hetero.local.batch.validators import check_request


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_queues": {"gpu queue": 2}}, "batch queue 'gpu queue': .*name should match valid pattern"),
        ({"batch_queues": {"q" * 125: 2}}, "name should match valid pattern: up to 128 characters"),  # + '-env'
        ({"batch_queues": {"gpu": 0}}, "batch queue 'gpu': .*maxCapacity must be a whole number .* at least 1; got 0"),
    ],
)
def test_a_queue_batch_would_refuse_is_refused_before_anything_is_made(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    workdir = tmp_path / "endpoint"
    with pytest.raises(ValueError, match=message):
        LocalEndpoint(workdir=workdir, **options)
    assert not workdir.exists()


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        ({"poll_interval": 0}, "batch_poll_interval must be above 0 seconds, got 0"),
        ({"requeue_delay": -1}, "batch_requeue_delay must be 0 seconds or more, got -1"),
    ],
)
def test_a_queue_timing_out_of_range_is_refused(timing: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BatchOptions(**timing)


def test_the_set_up_requests_are_the_ones_batch_accepts() -> None:
    """What ``--batch-queue NAME=N`` sends to the backend passes the checks a client's request passes."""
    check_request("CreateServiceEnvironment", environment_request("gpu-queue", 4))
    check_request("CreateJobQueue", queue_request("gpu-queue"))
    assert queue_request("gpu-queue")["serviceEnvironmentOrder"][0]["serviceEnvironment"] == "gpu-queue-env"


def test_local_serve_says_why_a_batch_queue_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_hetero.cli import main

    workdir = tmp_path / "endpoint"
    assert main(["local", "serve", "--workdir", str(workdir), "--batch-queue", "gpu.queue=2"]) == 2
    err = capsys.readouterr().err
    assert "airflow-hetero local serve: batch queue 'gpu.queue': Error executing request, Exception : " in err
    assert not workdir.exists()
