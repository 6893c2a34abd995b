"""Run Amazon SageMaker heterogeneous-cluster training jobs from Apache Airflow.

Importing this package is cheap: Airflow, boto3 and botocore load only when an
Airflow-facing module (hook, operators, sensors, triggers) is imported.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "get_provider_info"]


def get_provider_info() -> dict[str, Any]:
    """Provider metadata read by Airflow's ProvidersManager (entry point ``apache_airflow_provider``)."""
    return {
        "package-name": "airflow-hetero",
        "name": "SageMaker heterogeneous clusters",
        "description": "Typed definitions, operators, sensors, triggers and log summaries for "
        "Amazon SageMaker heterogeneous-cluster training jobs.",
        "versions": [__version__],
        "extra-links": [
            "airflow_hetero.links.training.SageMakerTrainingJobLink",
            "airflow_hetero.links.training.TrainingJobLogsLink",
            "airflow_hetero.links.instance_groups.InstanceGroupsLink",
        ],
    }
