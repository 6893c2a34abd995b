"""Sensors: wait for a training job started elsewhere (loaded lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.sensors.training import HeteroTrainingSensor

__all__ = ["HeteroTrainingSensor"]

__getattr__, __dir__ = lazy_exports(globals(), {"HeteroTrainingSensor": "airflow_hetero.sensors.training"})
