"""The job definition: typed models, their rules, and the CreateTrainingJob request they build.

Pure: imports neither Airflow nor boto3/botocore. The public names load lazily, so importing a
light module of this part (``naming``, ``instance_types``) does not load pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.definition.builder.definition_request import build_training_request
    from airflow_hetero.definition.errors import JobDefinitionError, Problem
    from airflow_hetero.definition.job import HeteroTrainingJob, load_job
    from airflow_hetero.definition.model import InstanceGroup, ShuffleConfig, TrainingInput

__all__ = [
    "HeteroTrainingJob",
    "InstanceGroup",
    "JobDefinitionError",
    "Problem",
    "ShuffleConfig",
    "TrainingInput",
    "build_training_request",
    "load_job",
]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "HeteroTrainingJob": "airflow_hetero.definition.job",
        "load_job": "airflow_hetero.definition.job",
        "InstanceGroup": "airflow_hetero.definition.model",
        "ShuffleConfig": "airflow_hetero.definition.model",
        "TrainingInput": "airflow_hetero.definition.model",
        "JobDefinitionError": "airflow_hetero.definition.errors",
        "Problem": "airflow_hetero.definition.errors",
        "build_training_request": "airflow_hetero.definition.builder.definition_request",
    },
)
