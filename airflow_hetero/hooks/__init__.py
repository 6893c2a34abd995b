"""Hooks: SageMaker training-job calls through the Amazon provider's ``AwsBaseHook`` (loaded lazily).

:mod:`airflow_hetero.job.outcome` holds the one rule that turns a job's state into a task result,
shared by the operator, the sensor and the trigger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.hooks.training import HeteroTrainingHook

__all__ = ["HeteroTrainingHook"]

__getattr__, __dir__ = lazy_exports(globals(), {"HeteroTrainingHook": "airflow_hetero.hooks.training"})
