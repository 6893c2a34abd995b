"""Typed definitions of a SageMaker heterogeneous-cluster training job, and how to load one.

:class:`HeteroTrainingJob` is the job's fields (:mod:`airflow_hetero.definition.model`) plus its
cross-field rules (:mod:`airflow_hetero.definition.rules.cross_field`). Every rule the service (or the SDK, or
the training container) would enforce later is checked here, at DAG-parse time, and all problems
are reported at once with the path of the field: see ``docs/definitions.md``.

This module imports neither Airflow nor boto3/botocore.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError, ValidatorFunctionWrapHandler, model_validator

from airflow_hetero.definition.errors import JobDefinitionError, Problem
from airflow_hetero.definition.input_file import InputLimits, read_definition_file
from airflow_hetero.definition.model import InstanceGroup, JobFields, ShuffleConfig, TrainingInput
from airflow_hetero.definition.rules import checks, cross_field

__all__ = [
    "HeteroTrainingJob",
    "InstanceGroup",
    "JobDefinitionError",
    "Problem",
    "ShuffleConfig",
    "TrainingInput",
    "load_job",
]


class HeteroTrainingJob(JobFields):
    """A whole training job: cluster, inputs, code, distribution and the rest of the estimator."""

    @model_validator(mode="wrap")
    @classmethod
    def _all_rules(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Field errors and cross-field rules together, so every problem is reported at once."""
        line_errors: list[Any] = []
        job: HeteroTrainingJob | None = None
        try:
            job = handler(data)
        except ValidationError as err:
            line_errors.extend(checks.reraisable(err))
        # cross-field rules see coerced values when the fields are valid ("3" -> 3), else the raw input
        raw = job.model_dump() if job is not None else data
        if isinstance(raw, HeteroTrainingJob):
            raw = raw.model_dump()
        if isinstance(raw, Mapping):
            line_errors.extend(map(checks.line_error, cross_field.cross_field(raw)))
        if job is not None and not line_errors:
            line_errors.extend(map(checks.line_error, after_encoding(job)))
        if line_errors:
            raise ValidationError.from_exception_data(cls.__name__, line_errors)
        return job


def after_encoding(job: JobFields) -> Iterator[Problem]:
    """The rule only the encoded request shows: the entry count, on what the SDK would send (with its
    sagemaker_* keys); needs a valid job, so it runs after the fields and the cross-field rules."""
    from airflow_hetero.definition.builder.hyperparameters import sdk_hyperparameters

    encoded = sdk_hyperparameters(job, job_name="x" * 63, region="ap-southeast-3")
    if len(encoded) > checks.MAX_HYPERPARAMETERS:
        yield Problem(
            ("hyperparameters",),
            (
                f"{len(encoded)} entries after adding the SDK's sagemaker_* keys; SageMaker allows "
                f"at most {checks.MAX_HYPERPARAMETERS}"
            ),
        )


def load_job(
    source: str | Path | Mapping[str, Any] | HeteroTrainingJob, *, limits: InputLimits | None = None
) -> HeteroTrainingJob:
    """Load a definition from a YAML/JSON file, a mapping, or pass a definition through.

    Raises :class:`JobDefinitionError` for unreadable files, syntax errors, empty files, files
    beyond ``limits`` and invalid definitions alike, so callers handle one exception type.
    """
    if isinstance(source, HeteroTrainingJob):
        return source
    if isinstance(source, Mapping):
        return HeteroTrainingJob.model_validate(dict(source))
    data = read_definition_file(Path(source), limits)
    return HeteroTrainingJob.model_validate(data)
