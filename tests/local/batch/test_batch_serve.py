"""``local serve --batch-queue NAME=N`` makes the queue and says so; without it, the banner says how to make one."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from support.serve_process import serve

pytestmark = pytest.mark.slow


def _batch(url: str) -> object:
    return boto3.client(
        "batch", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def test_serve_with_and_without_a_batch_queue(tmp_path: Path) -> None:
    proc, url, banner, _ = serve(tmp_path / "endpoint", "--batch-queue", "gpu-queue=3", "--batch-requeue-delay", "1")
    try:
        assert (
            "  batch job queue gpu-queue (arn:aws:batch:us-east-1:123456789012:job-queue/gpu-queue) on service "
            "environment gpu-queue-env: 3 instance(s)"
        ) in banner
        envs = _batch(url).describe_service_environments()["serviceEnvironments"]  # type: ignore[attr-defined]
        assert [(e["serviceEnvironmentName"], e["capacityLimits"][0]["maxCapacity"]) for e in envs] == [
            ("gpu-queue-env", 3)
        ]
    finally:
        proc.terminate()
        proc.wait(60)
    proc, url, banner, _ = serve(tmp_path / "fresh")
    try:
        text = "\n".join(banner)
        assert "no job queue yet; restart with --batch-queue NAME=N, or create one:" in text
        assert _batch(url).describe_job_queues()["jobQueues"] == []  # type: ignore[attr-defined]
    finally:
        proc.terminate()
        proc.wait(60)
