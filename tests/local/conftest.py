"""A real LocalEndpoint on 127.0.0.1 per test module, with short timings so jobs end fast.

A test module may change its endpoint's options: ``ENDPOINT_RUN`` (``RunOptions`` fields, over
``DEFAULT_RUN``'s), ``ENDPOINT_SPOT`` (a ``SpotOptions``), ``ENDPOINT_BATCH`` (a ``BatchOptions``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from support.local_jobkit import BUCKET

from airflow_hetero.local import LocalEndpoint, RunOptions

#: Endpoint timings unless the test module's ``ENDPOINT_RUN`` says otherwise.
DEFAULT_RUN = RunOptions(stop_grace=2.0, metrics_interval=0.3, log_flush_interval=0.2)


@pytest.fixture(scope="module")
def endpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    module = request.module
    with LocalEndpoint(
        workdir=tmp_path_factory.mktemp("endpoint"),
        run=replace(DEFAULT_RUN, **getattr(module, "ENDPOINT_RUN", {})),
        spot=getattr(module, "ENDPOINT_SPOT", None),
        batch=getattr(module, "ENDPOINT_BATCH", None),
    ) as ep:
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
