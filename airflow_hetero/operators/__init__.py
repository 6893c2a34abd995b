"""Airflow operators of airflow-hetero, loaded lazily (only the module of the name asked for)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.job.batch_queue import BatchQueue
    from airflow_hetero.operators.capacity_argument import CapacityFallback
    from airflow_hetero.operators.log_summary import HeteroLogSummaryOperator
    from airflow_hetero.operators.training import HeteroTrainingOperator

__all__ = ["BatchQueue", "CapacityFallback", "HeteroLogSummaryOperator", "HeteroTrainingOperator"]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "HeteroTrainingOperator": "airflow_hetero.operators.training",
        "CapacityFallback": "airflow_hetero.operators.capacity_argument",
        "HeteroLogSummaryOperator": "airflow_hetero.operators.log_summary",
        "BatchQueue": "airflow_hetero.job.batch_queue",
    },
)
