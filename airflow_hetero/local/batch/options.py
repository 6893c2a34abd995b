"""``BatchOptions``: the offline queue's timing, each default stated here once.

``LocalEndpoint(batch=BatchOptions(...))`` takes them and ``local serve`` reads its flags' defaults from
them; importing this module loads nothing else of the queue.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchOptions:
    """Timing of the offline queue: seconds."""

    requeue_delay: float = 5.0
    """How long a job requeued after a CapacityError waits before it may be admitted again."""
    poll_interval: float = 0.2
    """How often the scheduling thread looks at the training jobs and the queues when nothing wakes it."""

    def __post_init__(self) -> None:
        if not self.requeue_delay >= 0:
            raise ValueError(f"batch_requeue_delay must be 0 seconds or more, got {self.requeue_delay}")
        if not self.poll_interval > 0:  # 0 would spin the scheduling thread
            raise ValueError(f"batch_poll_interval must be above 0 seconds, got {self.poll_interval}")
