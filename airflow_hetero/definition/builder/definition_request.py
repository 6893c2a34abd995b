"""Definition -> the exact ``CreateTrainingJob`` request the SageMaker Python SDK v2 sends.

A pure function: no network, no Airflow, no boto3. Two deliberate differences from the
SDK, both where the SDK's request would misbehave (see ``docs/request.md``):

* a channel without ``instance_groups`` in a heterogeneous job is given every group
  (the service refuses a mix of channels with and without groups; the SDK sends it);
* ``torch_distributed`` names its instance group (``sagemaker_distribution_instance_groups``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_hetero.definition import naming
from airflow_hetero.definition.builder import source
from airflow_hetero.definition.builder.hyperparameters import sdk_hyperparameters
from airflow_hetero.definition.errors import JobDefinitionError, Problem
from airflow_hetero.definition.facts import images, instance_types
from airflow_hetero.definition.facts.roles import is_role_name, role_problem
from airflow_hetero.definition.rules import distribution

if TYPE_CHECKING:
    from airflow_hetero.definition.model import JobFields, TrainingInput

__all__ = ["base_job_name", "build_training_request", "training_image"]

#: Regions where the SDK turns SageMaker Debugger and the profiler off (SDK 2.257 fw_utils).
DEBUGGER_UNSUPPORTED_REGIONS = frozenset(
    {
        "us-iso-east-1",
        "us-isob-east-1",
        "ap-southeast-3",
        "ap-southeast-4",
        "eu-south-2",
        "me-central-1",
        "ap-south-2",
        "eu-central-2",
        "us-gov-east-1",
    }
)
PROFILER_UNSUPPORTED_REGIONS = DEBUGGER_UNSUPPORTED_REGIONS
#: Tags the SDK extends on p4d instances or with smdistributed (image_uris._get_image_tag, SDK 2.257).
AUTO_CONTAINER_VERSIONS = {
    "tensorflow-2.3-gpu-py37": "cu110-ubuntu18.04-v3",
    "tensorflow-2.3.1-gpu-py37": "cu110-ubuntu18.04",
    "tensorflow-2.3.2-gpu-py37": "cu110-ubuntu18.04",
    "tensorflow-1.15-gpu-py37": "cu110-ubuntu18.04-v8",
    "tensorflow-1.15.4-gpu-py37": "cu110-ubuntu18.04",
    "tensorflow-1.15.5-gpu-py37": "cu110-ubuntu18.04",
    "pytorch-1.6-gpu-py36": "cu110-ubuntu18.04-v3",
    "pytorch-1.6.0-gpu-py36": "cu110-ubuntu18.04",
    "pytorch-1.6-gpu-py3": "cu110-ubuntu18.04-v3",
    "pytorch-1.6.0-gpu-py3": "cu110-ubuntu18.04",
}
#: Framework versions from which the SDK turns on SageMaker metrics time series by default.
METRICS_TIME_SERIES_FROM = {"pytorch": (1, 3), "tensorflow": (1, 15)}


def build_training_request(
    job: JobFields, *, job_name: str, region: str, role_arn: str | None = None
) -> dict[str, Any]:
    """The ``CreateTrainingJob`` keyword arguments for ``job`` submitted as ``job_name`` in ``region``.

    ``role_arn``: the ARN a role *name* as the definition's ``role`` expands to (required then: a
    name is never sent as ``RoleArn``; the operator expands it with IAM ``GetRole``). One function
    per member of the request; an optional member is left out when it is ``None``.
    """
    problem = naming.check_job_name(job_name)
    if problem:
        raise JobDefinitionError([Problem("job_name", problem)], "invalid training job name")
    request: dict[str, Any] = {
        "AlgorithmSpecification": algorithm_specification(job, region),
        "OutputDataConfig": output_data_config(job),
        "TrainingJobName": job_name,
        "StoppingCondition": stopping_condition(job),
        "ResourceConfig": resource_config(job),
        "RoleArn": role_arn_of(job, role_arn),
    }
    optional: dict[str, Any] = {
        "InputDataConfig": input_data_config(job, job_name) or None,
        "HyperParameters": sdk_hyperparameters(job, job_name=job_name, region=region) or None,
        # the SDK sends an empty mapping (and an empty tag list) too
        "Environment": None if job.environment is None else dict(job.environment),
        "Tags": None if job.tags is None else [dict(t) for t in job.tags],
        "VpcConfig": vpc_config(job),
        "EnableNetworkIsolation": _switched_on(job.enable_network_isolation),
        "EnableInterContainerTrafficEncryption": _switched_on(job.encrypt_inter_container_traffic),
        "EnableManagedSpotTraining": _switched_on(job.use_spot_instances),
        "CheckpointConfig": checkpoint_config(job),
        "DebugHookConfig": debug_hook_config(job, region),
        "ProfilerConfig": profiler_config(job, region),
    }
    request.update((member, value) for member, value in optional.items() if value is not None)
    return request


def role_arn_of(job: JobFields, role_arn: str | None) -> str:
    """``RoleArn``: the definition's role ARN, or the ARN its role name expanded to (``role_arn``)."""
    if not is_role_name(job.role):
        return job.role
    if role_arn is None or role_problem(role_arn) is not None:
        given = "" if role_arn is None else f" (role_arn={role_arn!r} is not a role ARN)"
        msg = (
            f"'{job.role}' is a role name, not an ARN, and RoleArn must be an ARN{given}: pass role_arn= "
            "(the role's ARN, as IAM GetRole returns it) or give role as arn:aws:iam::<account>:role/<name>"
        )
        raise JobDefinitionError([Problem("role", msg)], "role name not expanded")
    return role_arn


def algorithm_specification(job: JobFields, region: str) -> dict[str, Any]:
    """``AlgorithmSpecification``: the image, File input mode, metric definitions, metrics time series."""
    try:
        image = training_image(job, region)
    except images.ImageLookupError as err:
        raise JobDefinitionError([Problem("region", str(err))], "no training image") from None
    algorithm: dict[str, Any] = {"TrainingInputMode": "File", "TrainingImage": image}
    if job.metric_definitions is not None:
        algorithm["MetricDefinitions"] = [dict(d) for d in job.metric_definitions]
    if _metrics_time_series(job):
        algorithm["EnableSageMakerMetricsTimeSeries"] = True
    return algorithm


def output_data_config(job: JobFields) -> dict[str, Any]:
    """``OutputDataConfig``: where the model goes, and the key it is encrypted with."""
    output: dict[str, Any] = {"S3OutputPath": job.output_path}
    if job.output_kms_key:
        output["KmsKeyId"] = job.output_kms_key
    return output


def stopping_condition(job: JobFields) -> dict[str, Any]:
    """``StoppingCondition``: the run time, and for spot training the wait that includes it."""
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": job.max_run}
    if job.max_wait is not None:
        stopping["MaxWaitTimeInSeconds"] = job.max_wait
    return stopping


def resource_config(job: JobFields) -> dict[str, Any]:
    """``ResourceConfig``: InstanceGroups for a heterogeneous job, never next to InstanceType/Count."""
    config: dict[str, Any] = {"VolumeSizeInGB": job.volume_size}
    if job.instance_groups is not None:
        config["InstanceGroups"] = [
            {
                "InstanceGroupName": g.instance_group_name,
                "InstanceType": g.instance_type,
                "InstanceCount": g.instance_count,
            }
            for g in job.instance_groups
        ]
    else:
        config["InstanceType"] = job.instance_type
        config["InstanceCount"] = job.instance_count
    if job.volume_kms_key:
        config["VolumeKmsKeyId"] = job.volume_kms_key
    # a warm pool and a training plan pass the checks only in a homogeneous job (definition/rules/option_rules.py)
    if job.keep_alive_period_in_seconds is not None:
        config["KeepAlivePeriodInSeconds"] = job.keep_alive_period_in_seconds
    if job.training_plan is not None:
        config["TrainingPlanArn"] = job.training_plan
    return config


def input_data_config(job: JobFields, job_name: str) -> list[dict[str, Any]]:
    """``InputDataConfig`` in definition order, plus the SDK's ``code`` channel under network isolation."""
    channels = [{"ChannelName": name, **_channel(spec)} for name, spec in job.inputs.items()]
    code_uri = source.submit_directory(job, job_name)
    if job.enable_network_isolation and job.entry_point is not None and code_uri is not None:
        s3 = {"S3DataType": "S3Prefix", "S3Uri": code_uri, "S3DataDistributionType": "FullyReplicated"}
        channels.append({"ChannelName": "code", "DataSource": {"S3DataSource": s3}})
    if job.is_hetero and any(_groups_of(c) for c in channels):
        for channel in channels:
            if not _groups_of(channel):
                # deliberate difference from the SDK: a channel without groups goes to every group
                channel["DataSource"]["S3DataSource"]["InstanceGroupNames"] = list(job.group_names)
    return channels


def _groups_of(channel: dict[str, Any]) -> list[str]:
    groups: list[str] = channel["DataSource"]["S3DataSource"].get("InstanceGroupNames", [])
    return groups


def _channel(spec: TrainingInput) -> dict[str, Any]:
    s3: dict[str, Any] = {"S3DataType": spec.s3_data_type, "S3Uri": spec.s3_data}
    explicit = "distribution" in spec.model_fields_set
    if explicit or not (spec.target_attribute_name or spec.shuffle_config):
        s3["S3DataDistributionType"] = spec.distribution
    if spec.attribute_names is not None:
        s3["AttributeNames"] = list(spec.attribute_names)
    if spec.instance_groups is not None:
        s3["InstanceGroupNames"] = list(spec.instance_groups)
    config: dict[str, Any] = {"DataSource": {"S3DataSource": s3}}
    if spec.compression is not None:
        config["CompressionType"] = spec.compression
    if spec.content_type is not None:
        config["ContentType"] = spec.content_type
    if spec.record_wrapping is not None:
        config["RecordWrapperType"] = spec.record_wrapping
    if spec.input_mode is not None:
        config["InputMode"] = spec.input_mode
    if spec.target_attribute_name is not None:
        config["TargetAttributeName"] = spec.target_attribute_name
    if spec.shuffle_config is not None:
        config["ShuffleConfig"] = {"Seed": spec.shuffle_config.seed}
    return config


def vpc_config(job: JobFields) -> dict[str, Any] | None:
    """``VpcConfig``, when the job gives both subnets and security groups."""
    if job.subnets is None or job.security_group_ids is None:
        return None
    return {"Subnets": list(job.subnets), "SecurityGroupIds": list(job.security_group_ids)}


def checkpoint_config(job: JobFields) -> dict[str, Any] | None:
    """``CheckpointConfig``, when the job syncs checkpoints to S3."""
    if not job.checkpoint_s3_uri:
        return None
    checkpoint = {"S3Uri": job.checkpoint_s3_uri}
    if job.checkpoint_local_path:
        checkpoint["LocalPath"] = job.checkpoint_local_path
    return checkpoint


def debug_hook_config(job: JobFields, region: str) -> dict[str, Any] | None:
    """``DebugHookConfig``: the SDK's default debugger hook, where it turns the hook on."""
    if not _debugger_on(job, region):
        return None
    return {"S3OutputPath": job.output_path, "CollectionConfigurations": []}


def profiler_config(job: JobFields, region: str) -> dict[str, Any]:
    """``ProfilerConfig``: always sent; the profiler is off where the SDK does not support it."""
    if region in PROFILER_UNSUPPORTED_REGIONS:
        return {"DisableProfiler": True}
    return {"S3OutputPath": job.output_path, "DisableProfiler": False}


def _switched_on(switch: bool) -> bool | None:
    """The SDK sends its ``Enable*`` switches only when they are on."""
    return True if switch else None


def training_image(job: JobFields, region: str) -> str:
    """``image_uri`` when given, otherwise the framework's Deep Learning Container for ``region``."""
    if job.image_uri:
        return job.image_uri
    assert job.framework and job.framework_version and job.py_version  # guaranteed by the spec
    instance_type = image_instance_type(job)
    uri = images.training_image_uri(job.framework, job.framework_version, job.py_version, region, instance_type)
    dist = distribution.sdk_form(job.distribution or {}, job.framework)
    if instance_types.family(instance_type) == "p4d" or "smdistributed" in dist:
        # image_uris._should_auto_select_container_version: a CUDA 11 build of some old images
        suffix = AUTO_CONTAINER_VERSIONS.get(f"{job.framework}-{uri.rpartition(':')[2]}")
        if suffix:
            uri = f"{uri}-{suffix}"
    return uri


def image_instance_type(job: JobFields) -> str:
    """The instance type that picks the image: the first GPU group's, else the first group's."""
    if job.instance_groups is None:
        assert job.instance_type is not None
        return job.instance_type
    for group in job.instance_groups:
        if instance_types.is_gpu(group.instance_type):
            return group.instance_type
    return job.instance_groups[0].instance_type


def base_job_name(job: JobFields) -> str:
    """``base_job_name``, or the SDK's default: the image's repository name."""
    if job.base_job_name:
        return job.base_job_name
    if job.image_uri:
        return naming.base_name_from_image(job.image_uri)
    return f"{job.framework}-training"


def _metrics_time_series(job: JobFields) -> bool:
    if job.framework is None or job.framework_version is None:
        return False
    parts = tuple(int(p) for p in job.framework_version.split(".") if p.isdigit())
    return parts >= METRICS_TIME_SERIES_FROM[job.framework]


def _debugger_on(job: JobFields, region: str) -> bool:
    """The SDK's default debugger hook, and where it turns the hook off."""
    if region in DEBUGGER_UNSUPPORTED_REGIONS:
        return False
    if job.framework and job.checkpoint_s3_uri and job.checkpoint_local_path:
        # SMDebug does not support checkpointing in distributed jobs; the SDK's test counts every
        # framework job as distributed (its distribution is never None), and crashes on hetero jobs
        return False
    ps = (job.distribution or {}).get("parameter_server")
    # SMDebug does not support TensorFlow's parameter server (TensorFlow._validate_and_set_debugger_configs)
    return not (job.framework == "tensorflow" and isinstance(ps, dict) and ps.get("enabled") is True)
