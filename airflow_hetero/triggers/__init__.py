"""Triggers for deferrable waits (loaded lazily).

``airflow_hetero.triggers.HeteroTrainingTrigger`` is the class path written into serialized
triggers: it must keep resolving across releases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.triggers.training import HeteroTrainingTrigger

__all__ = ["HeteroTrainingTrigger"]

__getattr__, __dir__ = lazy_exports(globals(), {"HeteroTrainingTrigger": "airflow_hetero.triggers.training"})
