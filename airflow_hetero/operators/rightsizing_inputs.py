"""What a right-sizing decision needs to move a group between its ``GroupBounds.types`` (docs/rightsizing.md):
the managed groups' types as written and as the next run would use them, and each type's vCPUs and GPUs from
:mod:`airflow_hetero.logs.capacity` (the package's one table of them). Loaded only by a task that right-sizes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.definition.rightsizing import GroupFacts, RightSizing

__all__ = ["instance_facts", "type_inputs"]


def instance_facts(types: list[str]) -> dict[str, dict[str, int | None]]:
    """Instance type -> ``{"cpus": n, "gpus": n}`` (None where the table does not know)."""
    from airflow_hetero.logs.capacity import capacity

    return {t: {"cpus": c.cpus, "gpus": c.gpus} for t in types for c in (capacity(t),)}


def type_inputs(
    policy: RightSizing, groups: Mapping[str, GroupFacts], previous: Mapping[str, Any] | None, fingerprint: str
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int | None]]]:
    """(the managed groups' types as written, the types the next run would use, the facts of every type the
    groups run or may move to)."""
    from airflow_hetero.job.rightsizing_types import carried_types

    written = {g: groups[g].instance_type for g in policy.groups}
    types = carried_types(previous, fingerprint, written, policy.mode)
    listed = {t for b in policy.groups.values() for t in b.types or []}
    every = sorted({f.instance_type for f in groups.values()} | set(types.values()) | listed)
    return written, types, instance_facts(every)
