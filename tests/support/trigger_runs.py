"""Run a ``HeteroTrainingTrigger`` in a test: one built for a test module's connection, its first event.

``triggers_on(conn_id)`` gives a module its ``trigger(name, **kwargs)`` (fast polling and no
botocore-level retries unless a test says otherwise: the trigger's own retries are under test);
``first_event`` runs a trigger until its one event, with a timeout so a wait that never ends fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from airflow_hetero.triggers import HeteroTrainingTrigger

#: No botocore-level retries: the trigger's own retry logic is what is being tested.
NO_BOTO_RETRY = {"retries": {"total_max_attempts": 1}}


def triggers_on(conn_id: str, poll_interval: float = 0.01) -> Callable[..., HeteroTrainingTrigger]:
    """``trigger(name, **kwargs)`` for connection ``conn_id``: kwargs override the test defaults."""

    def trigger(name: str, **kwargs: Any) -> HeteroTrainingTrigger:
        kwargs.setdefault("poll_interval", poll_interval)
        kwargs.setdefault("botocore_config", NO_BOTO_RETRY)
        return HeteroTrainingTrigger(name, aws_conn_id=conn_id, **kwargs)

    return trigger


async def first_event(t: HeteroTrainingTrigger, timeout: float = 30) -> dict[str, Any]:
    """The payload of the first event ``t`` yields (AssertionError if it ends without one)."""

    async def take() -> dict[str, Any]:
        async for event in t.run():
            return dict(event.payload)
        raise AssertionError("trigger ended without an event")

    return await asyncio.wait_for(take(), timeout)
