"""The endpoint's shared boto3 clients: threads that use a fresh client at once see one set of
exception classes (botocore builds ``client.exceptions`` lazily, without a lock)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_hetero.local.training.clients import Clients

THREADS = 8
ROUNDS = 10
#: How long the threads may take to meet at the barrier, and to finish (a loaded 2-core machine; they take ms).
THREAD_TIMEOUT = 60.0


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    """Switch threads as often as the interpreter can, so that races show."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("service", ["logs", "cloudwatch"])
def test_threads_on_a_fresh_shared_client_see_the_same_exception_classes(
    service: str, tiny_switch_interval: None
) -> None:
    mismatched = 0
    for _ in range(ROUNDS):
        client = Clients("http://127.0.0.1:9").get(service)  # never called: only its classes matter
        start = threading.Barrier(THREADS)
        seen: list[Any] = []

        def look(client: Any = client, start: threading.Barrier = start, seen: list[Any] = seen) -> None:
            start.wait(timeout=THREAD_TIMEOUT)  # broken (a failure in the thread, then below) if one never comes
            seen.append(client.exceptions)

        workers = [threading.Thread(target=look, daemon=True) for _ in range(THREADS)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(THREAD_TIMEOUT)
        assert len(seen) == THREADS, f"{len(seen)} of {THREADS} threads looked within {THREAD_TIMEOUT:g} s"
        mismatched += len({id(exceptions) for exceptions in seen}) > 1 or seen[0] is not client.exceptions
    assert mismatched == 0, f"{mismatched} of {ROUNDS} rounds saw different exception classes"
