"""``capacity=``: the training operator's capacity fallback as one value (docs/capacity.md).

A module of its own, imported only when a task is given ``capacity=`` (or the old spellings it replaces), so a
DAG parse of a task without one loads none of it (tests/package/test_parse_path.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from airflow_hetero._compat import deprecated_arguments

__all__ = ["OLD_CAPACITY_ARGUMENTS", "CapacityFallback", "capacity_of"]

#: What a group's fallbacks are given as: a type (the count kept), or ``{instance_type, instance_count}``.
Fallbacks: TypeAlias = "Mapping[str, Sequence[str | Mapping[str, Any]]]"


class CapacityFallback:
    """When SageMaker has no capacity for a group's type, the next cluster to send (docs/capacity.md).

    :param types: instance group name -> the types to try, in order of preference: each a type (the count
        stays) or ``{instance_type, instance_count}``. Request mode's only way to give them; in definition mode it
        replaces the definition's list of each group it names. Templated; checked at DAG parse with the job.
    :param attempts: at most this many clusters tried in one try of the task (the job as written included);
        None: every cluster of the fallbacks.
    :param retry_delay: seconds waited before submitting the next cluster (in the worker).
    """

    __slots__ = ("attempts", "retry_delay", "types")

    def __init__(
        self, types: Fallbacks | str | None = None, *, attempts: int | None = None, retry_delay: float = 0
    ) -> None:
        whole = isinstance(attempts, int) and not isinstance(attempts, bool)
        bad_attempts = attempts is not None and not (whole and attempts >= 1)
        if bad_attempts or isinstance(retry_delay, bool) or not isinstance(retry_delay, int | float) or retry_delay < 0:
            raise ValueError(
                "capacity: attempts must be None or an integer >= 1 and retry_delay a number >= 0, "
                f"got {attempts!r} and {retry_delay!r}"
            )
        self.types = types
        self.attempts = attempts
        self.retry_delay = float(retry_delay)

    @classmethod
    def of(cls, value: CapacityFallback | Mapping[str, Any]) -> CapacityFallback:
        """A ``CapacityFallback``, or the same as a dict (``{"types", "attempts", "retry_delay"}``)."""
        if isinstance(value, CapacityFallback):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"capacity: a CapacityFallback or a dict, got {type(value).__name__}")
        unknown = sorted(set(value) - {"types", "attempts", "retry_delay"})
        if unknown:
            raise ValueError(f"capacity: unknown key(s) {unknown}: give types, attempts, retry_delay")
        return cls(value.get("types"), attempts=value.get("attempts"), retry_delay=value.get("retry_delay", 0))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CapacityFallback):
            return NotImplemented
        return (self.types, self.attempts, self.retry_delay) == (other.types, other.attempts, other.retry_delay)

    __hash__ = None  # type: ignore[assignment]  # types may be a dict

    def __repr__(self) -> str:
        return f"CapacityFallback(types={self.types!r}, attempts={self.attempts!r}, retry_delay={self.retry_delay!r})"


#: The capacity arguments before ``capacity=`` (one release more, with a warning saying what to write instead).
OLD_CAPACITY_ARGUMENTS = ("fallback_instance_types", "capacity_attempts", "capacity_retry_delay")
_CAPACITY_INSTEAD = (
    "capacity=CapacityFallback(types=..., attempts=..., retry_delay=...) "
    "(from airflow_hetero.operators import CapacityFallback)"
)


def capacity_of(capacity: Any, kwargs: dict[str, Any]) -> tuple[Any, int | None, float]:
    """(types, attempts, retry delay) of ``capacity=``, or of the old arguments (from ``kwargs`` or
    ``default_args``, with the warning)."""
    old = deprecated_arguments(kwargs, OLD_CAPACITY_ARGUMENTS, _CAPACITY_INSTEAD)
    if old and capacity is not None:
        raise ValueError(f"give capacity= or {', '.join(old)}, not both")
    if old:
        given = CapacityFallback(
            old.get("fallback_instance_types"),
            attempts=old.get("capacity_attempts"),
            retry_delay=old.get("capacity_retry_delay", 0),
        )
    else:
        given = CapacityFallback() if capacity is None else CapacityFallback.of(capacity)
    return given.types, given.attempts, given.retry_delay
