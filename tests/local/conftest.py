"""A real LocalEndpoint on 127.0.0.1 per test module, with short timings so jobs end fast.

A test module may set ``ENDPOINT_TIMINGS`` (a dict of ``LocalEndpoint`` keyword arguments) to
change the timings of its endpoint.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.local_jobkit import BUCKET

from airflow_hetero.local import LocalEndpoint

#: Endpoint timings unless the test module's ``ENDPOINT_TIMINGS`` says otherwise.
DEFAULT_TIMINGS: dict[str, float] = {"stop_grace": 2.0, "metrics_interval": 0.3, "log_flush_interval": 0.2}


@pytest.fixture(scope="module")
def endpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    timings = {**DEFAULT_TIMINGS, **getattr(request.module, "ENDPOINT_TIMINGS", {})}
    with LocalEndpoint(workdir=tmp_path_factory.mktemp("endpoint"), **timings) as ep:
        ep.client("s3").create_bucket(Bucket=BUCKET)
        yield ep


@pytest.fixture(scope="module")
def sm(endpoint: LocalEndpoint) -> Any:
    return endpoint.client("sagemaker")


@pytest.fixture(scope="module")
def s3(endpoint: LocalEndpoint) -> Any:
    return endpoint.client("s3")


@pytest.fixture(scope="module")
def logs(endpoint: LocalEndpoint) -> Any:
    return endpoint.client("logs")
