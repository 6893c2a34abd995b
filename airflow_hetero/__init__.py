"""Run Amazon SageMaker heterogeneous-cluster training jobs from Apache Airflow.

Importing this package is cheap: Airflow, boto3 and botocore load only when an
Airflow-facing module (hook, operators, sensors, triggers) is imported.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "get_provider_info"]


#: The AWS guide to heterogeneous clusters, the integration's external documentation.
AWS_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/train-heterogeneous-cluster.html"
INTEGRATION = "Amazon SageMaker heterogeneous clusters"


def documentation_url() -> str:
    """The ``Documentation`` entry of ``[project.urls]`` (one source for the UI and PyPI)."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        for entry in metadata("airflow-hetero").get_all("Project-URL") or []:
            label, _, url = entry.partition(",")
            if label.strip().lower() == "documentation":
                return str(url).strip()
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that is not installed
        pass
    return "https://pypi.org/project/airflow-hetero/"


def get_provider_info() -> dict[str, Any]:
    """Provider metadata read by Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

    Lists every hook, operator, sensor, trigger and extra link by module path, so ``airflow
    providers triggers`` / ``hooks`` and the UI's provider page show them; ``documentation-url`` is
    where the UI's provider link points (Airflow would otherwise build an apache.org URL that 404s).
    """

    def modules(*names: str) -> list[dict[str, Any]]:
        return [{"integration-name": INTEGRATION, "python-modules": list(names)}]

    return {
        "package-name": "airflow-hetero",
        "name": "SageMaker heterogeneous clusters",
        "description": "Typed definitions, operators, sensors, triggers and log summaries for "
        "Amazon SageMaker heterogeneous-cluster training jobs.",
        "versions": [__version__],
        "documentation-url": documentation_url(),
        "integrations": [
            {"integration-name": INTEGRATION, "external-doc-url": AWS_GUIDE, "tags": ["aws"]},
        ],
        "hooks": modules("airflow_hetero.hooks.training", "airflow_hetero.hooks.batch"),
        "operators": modules("airflow_hetero.operators.training", "airflow_hetero.operators.log_summary"),
        "sensors": modules("airflow_hetero.sensors.training"),
        "triggers": modules("airflow_hetero.triggers.training", "airflow_hetero.triggers.queue"),
        "extra-links": [
            "airflow_hetero.links.training.SageMakerTrainingJobLink",
            "airflow_hetero.links.training.TrainingJobLogsLink",
            "airflow_hetero.links.instance_groups.InstanceGroupsLink",
        ],
    }
