"""Instance capacity and account quotas of the offline endpoint: how many instances of each type exist.

Two limits per instance type, both unlimited for a type not named:

* **capacity**: instances the "region" can launch at once over all running jobs. A job takes its
  instances when its thread launches them (:meth:`CapacityLedger.place`); one that does not fit
  fails with SageMaker's ``CapacityError`` (:data:`~airflow_hetero.sagemaker_facts.CAPACITY_ERROR_REASON`).
  Capacity freed later does not rescue it: SageMaker does not queue.
* **quota**: the account's service limit ``'<type> for training job usage'``. A create whose
  instances, plus those of every job not ended, exceed it is refused (:meth:`CapacityLedger.admit`).

Both change while the endpoint runs (:meth:`CapacityLedger.change`). Pure and thread-safe: it
starts nothing and knows jobs only by key.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_hetero.definition.facts.instance_types import closest, training_instance_types

#: A limit per instance type; None (or a type not named) is unlimited.
Limits = Mapping[str, int | None]


@dataclass(frozen=True)
class Shortage:
    """One instance type a job asks more of than the limit leaves: ``limit``, ``used`` by other jobs,
    ``delta`` asked by this job (the figures of SageMaker's ResourceLimitExceeded message)."""

    instance_type: str
    limit: int
    used: int
    delta: int


class QuotaExceeded(Exception):
    """A create would take more instances of a type than the account's quota."""

    def __init__(self, shortage: Shortage) -> None:
        super().__init__(shortage.instance_type)
        self.shortage = shortage


class CapacityShortage(Exception):
    """A job's instances cannot all be launched now."""

    def __init__(self, shortage: Shortage) -> None:
        super().__init__(shortage.instance_type)
        self.shortage = shortage


def check_limits(limits: Mapping[str, object], what: str) -> dict[str, int | None]:
    """``limits`` checked: each key a training instance type, each value a whole number >= 0 or None.

    Raises ValueError naming ``what`` (``capacity``, ``quota``) and the bad entry.
    """
    known = training_instance_types()
    checked: dict[str, int | None] = {}
    for instance_type, value in limits.items():
        if instance_type not in known:
            hint = closest(str(instance_type))
            did_you_mean = f"; did you mean '{hint}'?" if hint else ""
            raise ValueError(f"{what}: '{instance_type}' is not a SageMaker training instance type{did_you_mean}")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{what}: {instance_type} must be a whole number of instances >= 0, not {value!r}")
        checked[instance_type] = value
    return checked


def parse_limits(text: str, what: str) -> dict[str, int | None]:
    """``ml.p4d.24xlarge=0,ml.g5.12xlarge=2`` -> ``{type: count}`` (``TYPE=unlimited`` gives None)."""
    limits: dict[str, object] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        instance_type, sep, count = item.partition("=")
        if not sep or not instance_type.strip():
            raise ValueError(f"{what}: '{item}' is not TYPE=N (e.g. ml.p4d.24xlarge=0)")
        count = count.strip()
        if count == "unlimited":
            limits[instance_type.strip()] = None
            continue
        try:
            limits[instance_type.strip()] = int(count)
        except ValueError:
            raise ValueError(
                f"{what}: {instance_type.strip()} must be a whole number of instances >= 0, not '{count}'"
            ) from None
    return check_limits(limits, what)


def _over(limits: dict[str, int], used: Counter[str], asked: Counter[str]) -> Shortage | None:
    for instance_type, delta in asked.items():
        limit = limits.get(instance_type)
        if limit is not None and used[instance_type] + delta > limit:
            return Shortage(instance_type, limit, used[instance_type], delta)
    return None


class CapacityLedger:
    """Who holds which instances, against the capacity and quota of each type (thread-safe)."""

    def __init__(self, capacity: Limits | None = None, quota: Limits | None = None) -> None:
        self._lock = threading.Lock()
        self._capacity: dict[str, int] = {}
        self._quota: dict[str, int] = {}
        self._admitted: dict[str, Counter[str]] = {}
        self._placed: dict[str, Counter[str]] = {}
        self.change(capacity=capacity, quota=quota)

    def change(self, *, capacity: Limits | None = None, quota: Limits | None = None) -> None:
        """Set the capacity / quota of the types named (None: unlimited again); the others keep theirs.

        Running jobs keep their instances even when the new capacity is below what they hold.
        """
        checked_capacity = check_limits(capacity or {}, "capacity")
        checked_quota = check_limits(quota or {}, "quota")
        with self._lock:
            for table, changes in ((self._capacity, checked_capacity), (self._quota, checked_quota)):
                for instance_type, value in changes.items():
                    if value is None:
                        table.pop(instance_type, None)
                    else:
                        table[instance_type] = value

    def admit(self, job: str, instances: Iterable[tuple[str, int]]) -> None:
        """Count a created job's instances against the quota; :class:`QuotaExceeded` (nothing counted)
        when a type would go beyond it."""
        asked = _count(instances)
        with self._lock:
            shortage = _over(self._quota, self._total(self._admitted), asked)
            if shortage is not None:
                raise QuotaExceeded(shortage)
            self._admitted[job] = asked

    def place(self, job: str) -> None:
        """Launch an admitted job's instances; :class:`CapacityShortage` (nothing taken) when they do not fit."""
        with self._lock:
            asked = self._admitted.get(job, Counter())
            shortage = _over(self._capacity, self._total(self._placed), asked)
            if shortage is not None:
                raise CapacityShortage(shortage)
            self._placed[job] = asked

    def release(self, job: str) -> None:
        """The job's instances are gone (its hosts ended, or it never got any)."""
        with self._lock:
            self._admitted.pop(job, None)
            self._placed.pop(job, None)

    def state(self) -> dict[str, dict[str, int]]:
        """``capacity`` and ``quota`` (the types limited), ``running`` (instances launched by running jobs,
        counted against capacity) and ``utilization`` (instances of every job not ended, against quota)."""
        with self._lock:
            return {
                "capacity": dict(sorted(self._capacity.items())),
                "quota": dict(sorted(self._quota.items())),
                "running": dict(sorted(self._total(self._placed).items())),
                "utilization": dict(sorted(self._total(self._admitted).items())),
            }

    @staticmethod
    def _total(holdings: dict[str, Counter[str]]) -> Counter[str]:
        total: Counter[str] = Counter()
        for held in holdings.values():
            total.update(held)
        return +total


def _count(instances: Iterable[tuple[str, int]]) -> Counter[str]:
    counted: Counter[str] = Counter()
    for instance_type, count in instances:
        counted[instance_type] += count
    return counted
