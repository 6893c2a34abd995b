"""The flat keywords ``LocalEndpoint`` took before its option objects; they go in the next release.

``LocalEndpoint(stop_grace=1, spot_restart_delay=0.5)`` still works: :func:`from_flat_keywords` folds
each flat keyword into the option object it belongs to (over any given one) and warns once with
``DeprecationWarning``, naming what to write instead:
``LocalEndpoint(run=RunOptions(stop_grace=1), spot=SpotOptions(restart_delay=0.5))``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from airflow_hetero.local.batch.options import BatchOptions
from airflow_hetero.local.training.options import RunOptions
from airflow_hetero.local.training.spot import SpotOptions, interrupt_after

#: Flat keyword -> (the ``LocalEndpoint`` argument, its option class's name, the field it sets).
FLAT_KEYWORDS: Mapping[str, tuple[str, str, str]] = {
    "stop_grace": ("run", "RunOptions", "stop_grace"),
    "metrics_interval": ("run", "RunOptions", "metrics_interval"),
    "log_flush_interval": ("run", "RunOptions", "log_flush_interval"),
    "max_request_bytes": ("run", "RunOptions", "max_request_bytes"),
    "max_hosts": ("run", "RunOptions", "max_hosts"),
    "max_source_bytes": ("run", "RunOptions", "max_source_bytes"),
    "max_channel_bytes": ("run", "RunOptions", "max_channel_bytes"),
    "spot_interrupt_after": ("spot", "SpotOptions", "interrupt_after"),
    "spot_interrupt_probability": ("spot", "SpotOptions", "interrupt_probability"),
    "spot_interrupt_interval": ("spot", "SpotOptions", "interrupt_interval"),
    "spot_restart_delay": ("spot", "SpotOptions", "restart_delay"),
    "spot_saving": ("spot", "SpotOptions", "saving"),
    "checkpoint_sync_interval": ("spot", "SpotOptions", "checkpoint_sync_interval"),
    "batch_requeue_delay": ("batch", "BatchOptions", "requeue_delay"),
    "batch_poll_interval": ("batch", "BatchOptions", "poll_interval"),
}


def from_flat_keywords(
    flat: Mapping[str, Any], run: RunOptions | None, spot: SpotOptions | None, batch: BatchOptions | None
) -> tuple[RunOptions | None, SpotOptions | None, BatchOptions | None]:
    """``run``, ``spot`` and ``batch`` with the flat keywords folded in; warns (DeprecationWarning).

    A name that was never a keyword of ``LocalEndpoint`` is a ``TypeError``, as Python's own; a value
    out of range the option class's ``ValueError``.
    """
    unknown = sorted(set(flat) - set(FLAT_KEYWORDS))
    if unknown:
        raise TypeError(f"LocalEndpoint() got an unexpected keyword argument {unknown[0]!r}")
    warnings.warn(deprecation_message(flat), DeprecationWarning, stacklevel=3)
    fields: dict[str, dict[str, Any]] = {"run": {}, "spot": {}, "batch": {}}
    for name, value in flat.items():
        argument, _, field = FLAT_KEYWORDS[name]
        fields[argument][field] = interrupt_after(value) if name == "spot_interrupt_after" else value
    if fields["spot"] and spot is None and run is not None:
        spot, run = run.spot, replace(run, spot=SpotOptions())  # the spot options are then given once
    if fields["run"]:
        run = replace(run or RunOptions(), **fields["run"])
    if fields["spot"]:
        spot = replace(spot or SpotOptions(), **fields["spot"])
    if fields["batch"]:
        batch = replace(batch or BatchOptions(), **fields["batch"])
    return run, spot, batch


def deprecation_message(flat: Mapping[str, Any]) -> str:
    """What the warning says: the keywords given, and the option objects to write instead."""
    given = ", ".join(f"{name}=..." for name in flat)
    objects: dict[str, tuple[str, list[str]]] = {}
    for name in flat:
        argument, cls, field = FLAT_KEYWORDS[name]
        objects.setdefault(argument, (cls, []))[1].append(f"{field}=...")
    instead = ", ".join(f"{argument}={cls}({', '.join(parts)})" for argument, (cls, parts) in objects.items())
    return (
        f"LocalEndpoint({given}) is deprecated and goes in the next release; write LocalEndpoint({instead}) "
        "(RunOptions, SpotOptions and BatchOptions: from airflow_hetero.local import ...)"
    )
