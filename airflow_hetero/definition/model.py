"""The shape of a SageMaker heterogeneous-cluster training-job definition (pure).

Field names follow the SageMaker Python SDK's estimator arguments, so an estimator moves over
unchanged. Each field is checked on its own here (:mod:`airflow_hetero.definition.rules.checks`); the
rules that span fields read these models from :mod:`airflow_hetero.definition.rules.cross_field`, and
:class:`airflow_hetero.definition.job.HeteroTrainingJob` puts the two together. Imports neither
Airflow nor boto3/botocore.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic._internal._model_construction import ModelMetaclass

from airflow_hetero.definition.errors import JobDefinitionError
from airflow_hetero.definition.rules import checks
from airflow_hetero.definition.rules.distribution import distribution_group
from airflow_hetero.sagemaker_facts import DEFAULT_MAX_RUNTIME_SECONDS, MAX_INSTANCE_GROUPS

__all__ = ["InstanceGroup", "JobFields", "ShuffleConfig", "TrainingInput"]


class _DefinitionMeta(ModelMetaclass):
    """Constructing a definition directly raises :class:`JobDefinitionError`, like ``load_job``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        names: tuple[str, ...] = getattr(cls, "_positional", ())
        if args:  # the SDK's positional form, e.g. InstanceGroup("data", "ml.c5.xlarge", 2)
            if len(args) > len(names):
                raise TypeError(f"{cls.__name__} takes at most {len(names)} positional arguments ({', '.join(names)})")
            kwargs = {**dict(zip(names, args, strict=False)), **kwargs}
        try:
            return super().__call__(**kwargs)
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

    _positional: ClassVar[tuple[str, ...]] = ("instance_group_name", "instance_type", "instance_count")

    instance_group_name: str = Field(description="Name of the group, 1 to 64 characters, unique in the job.")
    instance_type: str = Field(description="A SageMaker training instance type, e.g. ml.c5.18xlarge.")
    instance_count: int = Field(description="Number of instances in the group, 1 or more.")
    fallback_instance_types: list[Any] | None = Field(
        default=None,
        description="Types to try, in order, when SageMaker has no capacity for instance_type: each a type "
        "(the count stays) or {instance_type, instance_count}; at most 5, same accelerator (docs/capacity.md).",
    )

    @field_validator("instance_group_name")
    @classmethod
    def _name(cls, value: str) -> str:
        return checks.check_group_name(value)

    @field_validator("instance_type")
    @classmethod
    def _type(cls, value: str) -> str:
        return checks.check_instance_type(value)

    @field_validator("instance_count", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return checks.check_not_bool(value)

    @field_validator("instance_count")
    @classmethod
    def _count(cls, value: int) -> int:
        return checks.check_count(value)


class ShuffleConfig(_Definition):
    """Shuffling of S3 objects in Pipe mode (SDK: ``sagemaker.inputs.ShuffleConfig``)."""

    seed: int = Field(description="Seed for shuffling the S3 objects of the channel.")


class TrainingInput(_Definition):
    """One input channel (SDK: ``sagemaker.inputs.TrainingInput``), optionally bound to groups."""

    _positional: ClassVar[tuple[str, ...]] = ("s3_data",)

    s3_data: str = Field(description="S3 URI of the data (s3://bucket/prefix).")
    distribution: Literal["FullyReplicated", "ShardedByS3Key"] = Field(
        default="FullyReplicated", description="Copy all data to every host, or split objects among the hosts."
    )
    compression: Literal["None", "Gzip"] | None = Field(default=None, description="Compression of the data.")
    content_type: str | None = Field(default=None, description="MIME type of the data.")
    record_wrapping: Literal["None", "RecordIO"] | None = Field(default=None, description="Record wrapping.")
    s3_data_type: Literal["S3Prefix", "ManifestFile", "AugmentedManifestFile", "Converse"] = Field(
        default="S3Prefix", description="What s3_data points to."
    )
    instance_groups: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_INSTANCE_GROUPS,
        description="Groups that receive this channel; none means every group.",
    )
    input_mode: Literal["File", "Pipe", "FastFile"] | None = Field(
        default=None, description="Per-channel input mode (the job's default is File)."
    )
    attribute_names: list[str] | None = Field(default=None, description="Attributes of an augmented manifest.")
    target_attribute_name: str | None = Field(default=None, description="Target attribute (built-in algorithms).")
    shuffle_config: ShuffleConfig | None = Field(
        default=None, description="Shuffle the S3 objects; a seed number or {seed: N}."
    )

    @field_validator("s3_data")
    @classmethod
    def _uri(cls, value: str) -> str:
        return checks.check_s3_uri(value, allow_https=True)

    @field_validator("shuffle_config", mode="before")
    @classmethod
    def _seed(cls, value: Any) -> Any:
        return {"seed": value} if isinstance(value, int) and not isinstance(value, bool) else value


class JobFields(_Definition):
    """The fields of a whole training job, each checked on its own; the cross-field rules
    are added by :class:`airflow_hetero.definition.job.HeteroTrainingJob`."""

    role: str = Field(
        description="The IAM role SageMaker assumes for the job: its ARN, or its name (expanded to the ARN "
        "with IAM GetRole when the task runs, as the SDK's expand_role does)."
    )
    output_path: str = Field(description="S3 URI for model artifacts; local code is uploaded to its bucket.")
    instance_groups: list[InstanceGroup] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_INSTANCE_GROUPS,
        description=f"The heterogeneous cluster: 1 to {MAX_INSTANCE_GROUPS} groups.",
    )
    instance_type: str | None = Field(default=None, description="Homogeneous cluster: the instance type.")
    instance_count: int | None = Field(default=None, description="Homogeneous cluster: the instance count.")
    inputs: dict[str, TrainingInput] = Field(
        default_factory=dict,
        max_length=checks.MAX_CHANNELS,
        description="Channel name -> TrainingInput or S3 URI string.",
    )
    entry_point: str | None = Field(default=None, description="Training script, relative to source_dir.")
    source_dir: str | None = Field(
        default=None, description="Local directory (packaged and uploaded) or S3 URI of a .tar.gz."
    )
    image_uri: str | None = Field(default=None, description="Training image; wins over the framework's image.")
    framework: Literal["pytorch", "tensorflow"] | None = Field(
        default=None, description="Framework whose Deep Learning Container and toolkit run the job."
    )
    framework_version: str | None = Field(default=None, description="Framework version as a string, e.g. '2.0'.")
    py_version: str | None = Field(default=None, description="Python of the framework image, e.g. py310.")
    hyperparameters: dict[str, Any] = Field(
        default_factory=dict, description="Passed to the script, encoded as the SDK encodes them."
    )
    distribution: dict[str, Any] | None = Field(
        default=None, description="The SDK's distribution dict: a strategy (mpi, smdistributed, ...) on one group."
    )
    base_job_name: str | None = Field(
        default=None, description="Prefix of derived job names (default: the image's repository name)."
    )
    volume_size: int = Field(default=30, ge=1, description="EBS volume per instance, in GB.")
    max_run: int = Field(default=DEFAULT_MAX_RUNTIME_SECONDS, ge=1, description="Maximum run time in seconds.")
    use_spot_instances: bool = Field(
        default=False, description="Use managed spot training (needs max_wait and checkpoint_s3_uri; docs/cost.md)."
    )
    max_wait: int | None = Field(
        default=None, ge=1, description="Spot: maximum wait for capacity plus run time, seconds; at least max_run."
    )
    environment: dict[str, str] | None = Field(default=None, description="Environment variables of the container.")
    tags: list[dict[str, str]] | None = Field(
        default=None, max_length=50, description="Tags, as [{Key, Value}] or a mapping."
    )
    subnets: list[str] | None = Field(default=None, description="VPC subnets (with security_group_ids).")
    security_group_ids: list[str] | None = Field(default=None, description="VPC security groups (with subnets).")
    checkpoint_s3_uri: str | None = Field(
        default=None, description="S3 URI checkpoints are synced to (CheckpointConfig.S3Uri); required with spot."
    )
    checkpoint_local_path: str | None = Field(
        default=None, description="Checkpoint directory in the container (default /opt/ml/checkpoints)."
    )
    keep_alive_period_in_seconds: int | None = Field(
        default=None,
        description="Warm pool (ResourceConfig.KeepAlivePeriodInSeconds): homogeneous on-demand jobs only; "
        "refused with instance_groups or spot, as SageMaker refuses it.",
    )
    training_plan: str | None = Field(
        default=None,
        description="Training plan ARN (ResourceConfig.TrainingPlanArn): homogeneous jobs only; refused with "
        "instance_groups, as SageMaker refuses it.",
    )
    instance_preferences: list[Any] | None = Field(
        default=None,
        description="ResourceConfig.InstancePreferences: always refused here (SageMaker: exclusive with "
        "InstanceType, InstanceGroups and spot); use fallback_instance_types (docs/capacity.md).",
    )
    metric_definitions: list[dict[str, str]] | None = Field(
        default=None, max_length=40, description="[{Name, Regex}] metrics parsed from the logs."
    )
    enable_network_isolation: bool = Field(default=False, description="Run without network access.")
    encrypt_inter_container_traffic: bool = Field(default=False, description="Encrypt traffic between hosts.")
    output_kms_key: str | None = Field(default=None, description="KMS key for the output (and the code upload).")
    volume_kms_key: str | None = Field(default=None, description="KMS key for the instances' volumes.")
    container_log_level: int = Field(default=20, description="Log level of the training toolkit (20 = INFO).")

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        return checks.check_role(value)

    @field_validator("output_path", "checkpoint_s3_uri")
    @classmethod
    def _s3(cls, value: str | None) -> str | None:
        return None if value is None else checks.check_s3_uri(value)

    @field_validator("instance_type")
    @classmethod
    def _type(cls, value: str | None) -> str | None:
        return None if value is None else checks.check_instance_type(value)

    @field_validator(
        "instance_count",
        "volume_size",
        "max_run",
        "max_wait",
        "container_log_level",
        "keep_alive_period_in_seconds",
        mode="before",
    )
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return checks.check_not_bool(value)

    @field_validator("instance_count")
    @classmethod
    def _count(cls, value: int | None) -> int | None:
        return None if value is None else checks.check_count(value)

    @field_validator("inputs", "hyperparameters", mode="before")
    @classmethod
    def _empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("inputs", mode="before")
    @classmethod
    def _channels(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): {"s3_data": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("framework_version", "py_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        return checks.check_version_string(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return [{"Key": str(k), "Value": str(v)} for k, v in value.items()]
        return value

    @field_validator("hyperparameters", mode="before")
    @classmethod
    def _hyperparameter_keys(cls, value: Any) -> Any:
        if isinstance(value, Mapping):  # the SDK str()s keys
            return {k if isinstance(k, str) else str(k): v for k, v in value.items()}
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
        return distribution_group(self.distribution, self.group_names)
