"""Operator extra links: the job's SageMaker console page and its CloudWatch logs (loaded lazily).

The class paths ``airflow_hetero.links.training.<Name>`` (where they are defined, as Airflow
serializes them) are registered in ``get_provider_info()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero._lazy import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.links.training import SageMakerTrainingJobLink, TrainingJobLogsLink

__all__ = ["SageMakerTrainingJobLink", "TrainingJobLogsLink"]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "SageMakerTrainingJobLink": "airflow_hetero.links.training",
        "TrainingJobLogsLink": "airflow_hetero.links.training",
    },
)
