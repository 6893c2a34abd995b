"""``smdistributed.modelparallel.parameters``, checked as the SDK's ``validate_mp_config`` does.

The SDK (2.257.7, ``fw_utils.validate_mp_config``) checks the parameters when ``fit`` runs;
here they are checked when the definition is read. :func:`problems` knows nothing of where the
mapping sits in a definition: its problems are at the parameter, and
:mod:`airflow_hetero.definition.rules.distribution` adds the path.

Pure Python: no pydantic, Airflow, boto3 or botocore.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from airflow_hetero.definition.errors import Problem

CHOICES = {
    "pipeline": ("simple", "interleaved", "_only_forward"),
    "placement_strategy": ("spread", "cluster"),
    "optimize": ("speed", "memory"),
}
POSITIVE = ("microbatches", "partitions", "active_microbatches")
BOOLEANS = ("auto_partition", "contiguous", "load_partition", "horovod", "ddp", "deterministic_server")


def problems(params: Mapping[str, Any]) -> Iterator[Problem]:
    """Every problem of a model-parallel parameters mapping: its values, its partitioning, its ddp settings."""
    yield from _values(params)
    yield from _partitioning(params)
    yield from _ddp(params)


def _values(params: Mapping[str, Any]) -> Iterator[Problem]:
    """Parameters with a fixed set of values, whole numbers and switches."""
    for key, choices in CHOICES.items():
        if key in params and params[key] not in choices:
            yield Problem(key, f"must be one of {', '.join(choices)} (got {params[key]!r})")
    for key in POSITIVE:
        if key in params and not (isinstance(params[key], int) and params[key] >= 1):
            yield Problem(key, f"must be a whole number of at least 1 (got {params[key]!r})")
    for key in BOOLEANS:
        if key in params and params[key] not in (True, False):
            yield Problem(key, f"must be true or false (got {params[key]!r})")


def _partitioning(params: Mapping[str, Any]) -> Iterator[Problem]:
    """How the model is split: a partition file, or automatic (memory_weight) or default partitioning."""
    if "partition_file" in params and not isinstance(params["partition_file"], str):
        yield Problem("partition_file", "must be a string")
    if params.get("auto_partition") is False and "default_partition" not in params:
        yield Problem("default_partition", "required when auto_partition is false")
    if "default_partition" in params:
        yield from _default_partition(params["default_partition"], params)
    if "memory_weight" in params:
        weight = params["memory_weight"]
        if not (_number(weight) and 0.0 <= weight <= 1.0):
            yield Problem("memory_weight", f"must be between 0.0 and 1.0 (got {weight!r})")


def _default_partition(default: Any, params: Mapping[str, Any]) -> Iterator[Problem]:
    """The partition of unassigned modules: a number below ``partitions``, which must be given."""
    partitions = params.get("partitions")
    if not _number(default):
        yield Problem("default_partition", f"must be a number (got {default!r})")
    elif "partitions" not in params:
        yield Problem("partitions", "required with default_partition (the SDK fails without it)")
    elif _number(partitions) and default >= partitions:
        yield Problem("default_partition", f"must be less than partitions ({partitions}); got {default}")


def _ddp(params: Mapping[str, Any]) -> Iterator[Problem]:
    """Data parallelism across model replicas: its settings need ``ddp``, which excludes horovod."""
    for key in ("ddp_port", "ddp_dist_backend"):
        if key in params and "ddp" not in params:
            yield Problem(key, "needs ddp to be set as well")
    port = params.get("ddp_port")
    if "ddp_port" in params and not (isinstance(port, int) and port >= 0):
        yield Problem("ddp_port", f"invalid port number {port!r}")
    if params.get("horovod", False) and params.get("ddp", False):
        yield Problem("ddp", "ddp and horovod cannot both be enabled")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
