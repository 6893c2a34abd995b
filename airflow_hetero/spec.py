"""Typed definitions of a SageMaker heterogeneous-cluster training job.

Field names follow the SageMaker Python SDK's estimator arguments, so an estimator
moves over unchanged. Every rule the service (or the SDK, or the training container)
would enforce later is checked here, at DAG-parse time, and all problems are reported
at once with the path of the field: see ``docs/definitions.md``.

This module imports neither Airflow nor boto3/botocore.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic._internal._model_construction import ModelMetaclass

from airflow_hetero import rules
from airflow_hetero.errors import JobDefinitionError, Problem

__all__ = [
    "HeteroTrainingJob",
    "InstanceGroup",
    "JobDefinitionError",
    "Problem",
    "TrainingInput",
    "load_job",
]


class _DefinitionMeta(ModelMetaclass):
    """Constructing a definition directly raises :class:`JobDefinitionError`, like ``load_job``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as err:
            raise JobDefinitionError.from_validation_error(err, cast("type[BaseModel]", cls)) from None


class _Definition(BaseModel, metaclass=_DefinitionMeta):
    """Base for all definition models: unknown keys are errors; errors name the field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        from_attributes: bool | None = None,
        context: Any | None = None,
        **kwargs: Any,
    ) -> Self:
        try:
            return super().model_validate(
                obj, strict=strict, from_attributes=from_attributes, context=context, **kwargs
            )
        except ValidationError as err:
            raise JobDefinitionError.from_validation_error(err, cls) from None


class InstanceGroup(_Definition):
    """One instance group of a heterogeneous cluster (SDK: ``sagemaker.instance_group.InstanceGroup``)."""

    instance_group_name: str
    instance_type: str
    instance_count: int

    @field_validator("instance_group_name")
    @classmethod
    def _name(cls, value: str) -> str:
        return rules.check_group_name(value)

    @field_validator("instance_type")
    @classmethod
    def _type(cls, value: str) -> str:
        return rules.check_instance_type(value)

    @field_validator("instance_count", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        return rules.check_count(value)


class ShuffleConfig(_Definition):
    """Shuffling of S3 objects in Pipe mode (SDK: ``sagemaker.inputs.ShuffleConfig``)."""

    seed: int


class TrainingInput(_Definition):
    """One input channel (SDK: ``sagemaker.inputs.TrainingInput``), optionally bound to groups."""

    s3_data: str
    distribution: Literal["FullyReplicated", "ShardedByS3Key"] = "FullyReplicated"
    compression: Literal["None", "Gzip"] | None = None
    content_type: str | None = None
    record_wrapping: Literal["None", "RecordIO"] | None = None
    s3_data_type: Literal["S3Prefix", "ManifestFile", "AugmentedManifestFile", "Converse"] = "S3Prefix"
    instance_groups: list[str] | None = Field(default=None, min_length=1, max_length=5)
    input_mode: Literal["File", "Pipe", "FastFile"] | None = None
    attribute_names: list[str] | None = None
    target_attribute_name: str | None = None
    shuffle_config: ShuffleConfig | None = None

    @field_validator("s3_data")
    @classmethod
    def _uri(cls, value: str) -> str:
        return rules.check_s3_uri(value, allow_https=True)

    @field_validator("shuffle_config", mode="before")
    @classmethod
    def _seed(cls, value: Any) -> Any:
        return {"seed": value} if isinstance(value, int) and not isinstance(value, bool) else value


class HeteroTrainingJob(_Definition):
    """A whole training job: cluster, inputs, code, distribution and the rest of the estimator."""

    role: str
    output_path: str
    instance_groups: list[InstanceGroup] | None = Field(default=None, min_length=1, max_length=5)
    instance_type: str | None = None
    instance_count: int | None = None
    inputs: dict[str, TrainingInput] = Field(default_factory=dict, max_length=20)
    entry_point: str | None = None
    source_dir: str | None = None
    image_uri: str | None = None
    framework: Literal["pytorch", "tensorflow"] | None = None
    framework_version: str | None = None
    py_version: str | None = None
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    distribution: dict[str, Any] | None = None
    base_job_name: str | None = None
    volume_size: int = Field(default=30, ge=1)
    max_run: int = Field(default=86400, ge=1)
    use_spot_instances: bool = False
    max_wait: int | None = Field(default=None, ge=1)
    environment: dict[str, str] | None = None
    tags: list[dict[str, str]] | None = Field(default=None, max_length=50)
    subnets: list[str] | None = None
    security_group_ids: list[str] | None = None
    checkpoint_s3_uri: str | None = None
    checkpoint_local_path: str | None = None
    metric_definitions: list[dict[str, str]] | None = Field(default=None, max_length=40)
    enable_network_isolation: bool = False
    encrypt_inter_container_traffic: bool = False
    output_kms_key: str | None = None
    volume_kms_key: str | None = None
    container_log_level: int = 20

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        return rules.check_role(value)

    @field_validator("output_path", "checkpoint_s3_uri")
    @classmethod
    def _s3(cls, value: str | None) -> str | None:
        return None if value is None else rules.check_s3_uri(value)

    @field_validator("instance_type")
    @classmethod
    def _type(cls, value: str | None) -> str | None:
        return None if value is None else rules.check_instance_type(value)

    @field_validator("instance_count", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        return None if value is None else rules.check_count(value)

    @field_validator("inputs", mode="before")
    @classmethod
    def _channels(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: {"s3_data": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("framework_version", "py_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        return rules.check_version_string(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return [{"Key": str(k), "Value": str(v)} for k, v in value.items()]
        return value

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, item in value.items():
            try:
                json.dumps(item)
            except (TypeError, ValueError):
                raise ValueError(
                    f"value of '{key}' is a {type(item).__name__}, which JSON cannot encode; "
                    "use strings, numbers, booleans, lists or mappings"
                ) from None
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _all_rules(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Field errors and cross-field rules together, so every problem is reported at once."""
        line_errors: list[Any] = []
        job: HeteroTrainingJob | None = None
        try:
            job = handler(data)
        except ValidationError as err:
            line_errors.extend(rules.reraisable(err))
        raw = data.model_dump() if isinstance(data, HeteroTrainingJob) else data
        if isinstance(raw, Mapping):
            line_errors.extend(rules.line_error(loc, msg) for loc, msg in rules.cross_field(raw))
        if job is not None and not line_errors:
            line_errors.extend(rules.line_error(loc, msg) for loc, msg in rules.after_encoding(job))
        if line_errors:
            raise ValidationError.from_exception_data(cls.__name__, line_errors)
        return job

    @property
    def is_hetero(self) -> bool:
        """True for a heterogeneous cluster (``instance_groups``), False for instance_type + count."""
        return self.instance_groups is not None

    @property
    def group_names(self) -> list[str]:
        """Names of the instance groups, in definition order (empty for a homogeneous job)."""
        return [g.instance_group_name for g in self.instance_groups or []]

    @property
    def distribution_group(self) -> str | None:
        """The one instance group that runs the distribution strategy, if any."""
        return rules.distribution_group(self.distribution, self.group_names)


def load_job(source: str | Path | Mapping[str, Any] | HeteroTrainingJob) -> HeteroTrainingJob:
    """Load a definition from a YAML/JSON file, a mapping, or pass a definition through.

    Raises :class:`JobDefinitionError` for unreadable files, syntax errors, empty files
    and invalid definitions alike, so callers handle one exception type.
    """
    if isinstance(source, HeteroTrainingJob):
        return source
    if isinstance(source, Mapping):
        return HeteroTrainingJob.model_validate(dict(source))
    data = read_definition_file(Path(source))
    return HeteroTrainingJob.model_validate(data)


def read_definition_file(path: Path) -> dict[str, Any]:
    """Parse a YAML or JSON definition file into a mapping, with readable errors."""
    import yaml

    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise JobDefinitionError([Problem(where, "file not found")], "cannot read definition") from None
    except IsADirectoryError:
        raise JobDefinitionError([Problem(where, "is a directory, not a file")], "cannot read definition") from None
    except (OSError, UnicodeDecodeError) as err:
        raise JobDefinitionError([Problem(where, f"cannot be read: {err}")], "cannot read definition") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        detail = " ".join(str(err).split())
        raise JobDefinitionError([Problem(where, f"syntax error: {detail}")], "cannot parse definition") from None
    if data is None:
        raise JobDefinitionError([Problem(where, "file is empty")], "cannot parse definition")
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise JobDefinitionError(
            [Problem(where, f"top level must be a mapping of fields, not a {kind}")], "cannot parse definition"
        )
    return data
