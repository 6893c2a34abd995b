"""The triggers on the triggerer's way out: a cancelled wait ends at once and its shared poller after the
call it has in flight; Airflow 2.11's clean-up (task state read, stop request) ends within its bound.

Nothing here waits on elapsed time for its outcome: the tests wait for events, each with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from support.task_logs import record_logs

from airflow_hetero.triggers import HeteroTrainingTrigger
from airflow_hetero.triggers import queue as queue_module
from airflow_hetero.triggers import training as training_module
from airflow_hetero.triggers.queue import HeteroServiceJobTrigger
from airflow_hetero.triggers.queue_watcher import QueueWatcher
from airflow_hetero.triggers.watcher import JobWatcher

#: The longest any wait of these tests may take.
DEADLINE = 30.0
#: The clean-up bound the tests set (always made to pass).
BOUND = 0.2


class GatedClient:
    """An AWS client whose every call waits for the test's gate, then fails for good (not transiently)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        async def call(**kwargs: Any) -> Any:
            self.calls.append(name)
            self.entered.set()
            await self.gate.wait()  # deadline: the test opens the gate in a finally
            raise ValueError(f"{name}: the test's client is gone")

        return call


class GatedHook:
    def __init__(self, client: GatedClient) -> None:
        self.client = client

    async def async_client(self) -> Any:
        client = self.client

        @contextlib.asynccontextmanager
        async def conn() -> AsyncIterator[GatedClient]:
            yield client

        return conn()


def _training(client: GatedClient, monkeypatch: pytest.MonkeyPatch) -> tuple[HeteroTrainingTrigger, Any]:
    monkeypatch.setattr(HeteroTrainingTrigger, "make_hook", lambda _: GatedHook(client))
    return HeteroTrainingTrigger("job", aws_conn_id=None, poll_interval=0.05), JobWatcher.registry


def _service(client: GatedClient, monkeypatch: pytest.MonkeyPatch) -> tuple[HeteroTrainingTrigger, Any]:
    monkeypatch.setattr(HeteroServiceJobTrigger, "make_batch_hook", lambda _: GatedHook(client))
    trigger = HeteroServiceJobTrigger("a", job_name="name-a", job_queue="q", aws_conn_id=None, poll_interval=0.05)
    return trigger, QueueWatcher.registry  # type: ignore[return-value]


async def _first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("no event")


async def _until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("make", [_training, _service], ids=["training-job", "service-job"])
async def test_a_cancelled_wait_ends_at_once_and_its_poller_after_the_call_in_flight(
    make: Callable[..., tuple[Any, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service-job trigger waits on its queue without a deadline of its own (a queued job may wait for
    days): the triggerer's cancellation is its bound, and must end it at once, with a poll in flight."""
    client = GatedClient()
    trigger, registry = make(client, monkeypatch)
    loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(_first_event(trigger))
    try:
        await asyncio.wait_for(client.entered.wait(), DEADLINE)  # the poller is inside its first call
        (poller,) = registry[loop].values()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, DEADLINE)
        assert not poller._jobs  # the trigger left its poller on the way out
        assert poller._task is not None and not poller._task.done()  # which still waits for its call
    finally:
        client.gate.set()
    await _until(lambda: not registry.get(loop))  # the call answered, the poller ends: nothing left behind
    assert poller._task is not None and poller._task.done() and not poller._task.cancelled()


@pytest.mark.parametrize(
    ("module", "make"),
    [
        (training_module, lambda: HeteroTrainingTrigger("job", aws_conn_id=None, stop_on_kill=True)),
        (
            queue_module,
            lambda: HeteroServiceJobTrigger("a", job_name="name-a", job_queue="q", aws_conn_id=None, stop_on_kill=True),
        ),
    ],
    ids=["training-job", "service-job"],
)
@pytest.mark.parametrize("stuck", ["task-state", "stop-request"])
async def test_airflow_2_cleanup_that_gets_no_answer_ends_at_its_bound_and_says_so(
    module: Any,
    make: Callable[[], Any],
    stuck: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "HAS_TRIGGER_ON_KILL", False)  # Airflow 2.11: no on_kill, the clean-up stops
    monkeypatch.setattr(module, "CLEANUP_TIMEOUT", BOUND)
    trigger = make()
    logs = record_logs(trigger)
    release = threading.Event()
    stop_asked = asyncio.Event()

    def task_left_deferral(_: Any) -> bool:
        if stuck == "task-state":  # the metadata database does not answer
            release.wait(DEADLINE)
        return True

    async def on_kill() -> None:  # AWS does not answer the stop request
        stop_asked.set()
        await asyncio.Event().wait()  # deadline: the clean-up bound under test, within wait_for(DEADLINE)

    monkeypatch.setattr(HeteroTrainingTrigger, "task_left_deferral", task_left_deferral)
    monkeypatch.setattr(trigger, "on_kill", on_kill)
    try:
        await asyncio.wait_for(trigger.cleanup(), DEADLINE)
    finally:
        release.set()
    assert stop_asked.is_set() == (stuck == "stop-request")
    said = [text for level, text in logs.records if level == "warning"]
    assert len(said) == 1 and f"did not end within {BOUND:.1f} s" in said[0] and trigger.job_name in said[0], said


async def test_airflow_2_cleanup_passes_on_a_timeout_of_the_stop_request_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the clean-up's own bound is said as one; a stop request that timed out by itself fails as before."""
    monkeypatch.setattr(training_module, "HAS_TRIGGER_ON_KILL", False)
    trigger = HeteroTrainingTrigger("job", aws_conn_id=None, stop_on_kill=True)
    logs = record_logs(trigger)

    async def on_kill() -> None:
        raise TimeoutError("read timeout")

    monkeypatch.setattr(HeteroTrainingTrigger, "task_left_deferral", lambda _: True)
    monkeypatch.setattr(trigger, "on_kill", on_kill)
    with pytest.raises(TimeoutError, match="read timeout"):
        await asyncio.wait_for(trigger.cleanup(), DEADLINE)
    assert [text for level, text in logs.records if level == "warning"] == []
