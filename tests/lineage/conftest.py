"""The lineage tests' jobs: every job the operator submits (moto's) ends in the fixture's status."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.moto_jobs import MotoJobs, mocked_jobs


def jobs_ending(monkeypatch: pytest.MonkeyPatch, status: str) -> Iterator[MotoJobs]:
    with mocked_jobs(monkeypatch) as jobs:
        jobs.every_job = [{"status": status, "secondary": status, "BillableTimeInSeconds": 1800}]
        yield jobs


@pytest.fixture
def completing(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    yield from jobs_ending(monkeypatch, "Completed")


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    yield from jobs_ending(monkeypatch, "Failed")
