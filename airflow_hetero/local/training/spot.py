"""Managed spot on the offline endpoint: when a spot job is interrupted, and what it is billed.

SageMaker interrupts a spot job when EC2 takes the capacity back; the endpoint interrupts one when
told: on demand (:meth:`SpotSchedule.request`: ``LocalEndpoint.interrupt``, ``POST
/_airflow-hetero/interrupt``), after fixed seconds of training (``interrupt_after``: the n-th entry
counts from the start of the n-th run's Training), or at random (every ``interrupt_interval`` seconds
of training, with ``interrupt_probability``, drawn from a generator seeded with the endpoint's seed and
the job's name, so a run repeats). Only jobs with ``EnableManagedSpotTraining`` are ever interrupted.

The bill is a stand-in: ``BillableTimeInSeconds`` is ``TrainingTimeInSeconds x (1 - saving)``
(:data:`~airflow_hetero.sagemaker_facts.STAND_IN_SPOT_SAVING` unless told), never a real spot price.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_hetero.sagemaker_facts import STAND_IN_SPOT_SAVING


class SpotInterruption(Exception):
    """Raised inside a running job when its spot instances are taken back; the runner restarts it."""


@dataclass(frozen=True)
class SpotOptions:
    """The endpoint's spot settings (``LocalEndpoint(spot=SpotOptions(...))``, ``local serve --spot-...``)."""

    interrupt_after: tuple[float, ...] = ()
    """Seconds of training after which a run is interrupted: entry n for run n (none: only on demand)."""
    interrupt_probability: float = 0.0
    """Chance of an interruption at each ``interrupt_interval`` seconds of training (0: never at random)."""
    interrupt_interval: float = 10.0
    restart_delay: float = 1.0
    """Seconds an interrupted job waits for capacity before it restarts (MaxWaitTimeInSeconds counts them)."""
    saving: float = STAND_IN_SPOT_SAVING
    """The stand-in discount: BillableTimeInSeconds = TrainingTimeInSeconds x (1 - saving)."""
    seed: int = 0
    """Seeds the random interruptions with the job's name; ``LocalEndpoint`` sets it to its own ``seed``."""
    checkpoint_sync_interval: float = 1.0
    """Seconds between two copies of each host's checkpoint folder to CheckpointConfig.S3Uri."""

    def __post_init__(self) -> None:
        problems = list(_problems(self))
        if problems:
            raise ValueError("; ".join(problems))


def interrupt_after(value: float | Iterable[float] | None) -> tuple[float, ...]:
    """``spot_interrupt_after`` as given (one number, several, or None) as a tuple of seconds."""
    if value is None:
        return ()
    if isinstance(value, int | float):
        return (float(value),)
    return tuple(float(v) for v in value)


def _problems(options: SpotOptions) -> Iterable[str]:
    if any(not seconds > 0 for seconds in options.interrupt_after):
        yield f"spot_interrupt_after: every entry must be above 0 seconds, got {list(options.interrupt_after)}"
    if not 0.0 <= options.interrupt_probability <= 1.0:
        yield f"spot_interrupt_probability must be between 0 and 1, got {options.interrupt_probability}"
    if not options.interrupt_interval > 0:
        yield f"spot_interrupt_interval must be above 0 seconds, got {options.interrupt_interval}"
    if not options.restart_delay >= 0:
        yield f"spot_restart_delay must be 0 seconds or more, got {options.restart_delay}"
    if not 0.0 <= options.saving < 1.0:
        yield f"spot_saving must be at least 0 and below 1 (a fraction of the on-demand time), got {options.saving}"
    if not options.checkpoint_sync_interval > 0:
        yield f"checkpoint_sync_interval must be above 0 seconds, got {options.checkpoint_sync_interval}"


def billable_seconds(training_seconds: int, saving: float | None) -> int:
    """BillableTimeInSeconds of a job trained ``training_seconds``: all of it on demand (``saving`` None), else
    ``x (1 - saving)`` rounded to whole seconds as the API states them, at least 1."""
    if saving is None:
        return training_seconds
    return max(1, round(training_seconds * (1.0 - saving)))


class SpotSchedule:
    """When one spot job is interrupted; thread-safe (:meth:`request` comes from a request thread)."""

    def __init__(self, options: SpotOptions, job_name: str) -> None:
        self._options = options
        self._rng = random.Random(f"{options.seed}/{job_name}")
        self._requested = threading.Event()
        self._runs = 0
        self._scheduled_at = float("inf")
        self._next_draw = float("inf")
        self.interruptions = 0
        """Interruptions so far, however they came."""

    def request(self) -> None:
        """Interrupt the job at its next look (during Training; a job not training yet is interrupted once it is)."""
        self._requested.set()

    def begin_training(self, now: float) -> None:
        """A run reached Training at ``now`` (monotonic seconds): the schedule counts from here."""
        after = self._options.interrupt_after
        self._runs += 1
        self._scheduled_at = now + after[self._runs - 1] if self._runs <= len(after) else float("inf")
        random_mode = self._options.interrupt_probability > 0
        self._next_draw = now + self._options.interrupt_interval if random_mode else float("inf")

    def due(self, now: float) -> bool:
        """True (and counted) when the job must be interrupted now."""
        if self._requested.is_set():
            self._requested.clear()
            return self._count()
        if now >= self._scheduled_at:
            self._scheduled_at = float("inf")
            return self._count()
        while now >= self._next_draw:
            self._next_draw += self._options.interrupt_interval
            if self._rng.random() < self._options.interrupt_probability:
                return self._count()
        return False

    def _count(self) -> bool:
        self.interruptions += 1
        return True
