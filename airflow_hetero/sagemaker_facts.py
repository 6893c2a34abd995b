"""SageMaker's constants, stated once: defaults, limits, the SDK's hyperparameter names and the vCPUs and
GPUs of an instance type (stdlib only).

definition/, job/, logs/ and local/ read them from here; the module sits on the bottom floor and imports
nothing of the package, so every part can. Two copies stay, each pinned equal by a test
(``tests/package/test_sagemaker_facts.py``): ``runtime`` ships alone into training containers and
the host-name resolver (``local/host/resolver.py``) runs inside host processes, so neither imports
the package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: MaxRuntimeInSeconds when a request or definition gives none (the SDK's and the service's default).
DEFAULT_MAX_RUNTIME_SECONDS = 86400
#: Seconds SageMaker lets a job stopped at its MaxRuntimeInSeconds save its model after SIGTERM (the
#: StoppingCondition documentation): a budget's worst case counts them after the cap.
STOP_SIGNAL_WINDOW_SECONDS = 120
#: Instance groups per heterogeneous job (botocore's ``InstanceGroups`` max).
MAX_INSTANCE_GROUPS = 5
#: The accelerator of an instance family (``ml.<family>.<size>``), by the family's first letters, first
#: match wins; every other family is CPU only. The SDK picks its GPU image for ``g*``/``p*`` families.
ACCELERATOR_FAMILY_PREFIXES = (("trn", "trainium"), ("inf", "inferentia"), ("g", "gpu"), ("p", "gpu"))
#: The kind of a family no prefix of :data:`ACCELERATOR_FAMILY_PREFIXES` matches.
CPU_ONLY = "cpu"

# The devices of an instance type: vCPUs follow EC2's size rule (``medium`` = 1, ``large`` = 2, ``xlarge`` = 4,
# ``Nxlarge`` = 4N); GPUs come from the table below (GPU families only). Anything unknown is None; the log summary
# divides utilisation by them (its ``capacity_overrides`` win) and right-sizing weighs a move between types by them.
_INSTANCE_TYPE = re.compile(r"^ml\.(?P<family>[a-z][a-z0-9-]*)\.(?P<size>[a-z0-9-]+)$")
_XLARGE = re.compile(r"^(?P<n>\d*)xlarge$")

#: GPUs per instance by family and size (``*`` = every other size of the family).
GPUS: dict[str, dict[str, int]] = {
    "p2": {"xlarge": 1, "8xlarge": 8, "16xlarge": 16},
    "p3": {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
    "p3dn": {"*": 8},
    "p4d": {"*": 8},
    "p4de": {"*": 8},
    "p5": {"*": 8},
    "p5e": {"*": 8},
    "p5en": {"*": 8},
    "p6-b200": {"*": 8},
    "g4dn": {"12xlarge": 4, "metal": 8, "*": 1},
    "g5": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8, "*": 1},
    "g6": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8, "*": 1},
    "g6e": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8, "*": 1},
}


@dataclass(frozen=True)
class Capacity:
    """Devices of one instance: vCPUs and GPUs (None when not known)."""

    cpus: int | None
    gpus: int | None


def vcpus(instance_type: str) -> int | None:
    """``ml.c5.18xlarge`` -> 72 by EC2's size rule; None for sizes the rule does not cover (metal)."""
    match = _INSTANCE_TYPE.match(instance_type)
    if not match:
        return None
    size = match.group("size")
    if size == "medium":
        return 1
    if size == "large":
        return 2
    sized = _XLARGE.match(size)
    if not sized:
        return None
    return 4 * int(sized.group("n") or 1)


def gpus(instance_type: str) -> int | None:
    """GPUs of a GPU family's instance type; 0 for other known shapes; None when not parseable."""
    match = _INSTANCE_TYPE.match(instance_type)
    if not match:
        return None
    table = GPUS.get(match.group("family"))
    if table is None:
        return 0
    return table.get(match.group("size"), table.get("*"))


def capacity(instance_type: str | None) -> Capacity:
    """vCPUs and GPUs of ``instance_type`` (both None when it is None or unknown)."""
    if not instance_type:
        return Capacity(None, None)
    return Capacity(vcpus(instance_type), gpus(instance_type))


#: The package's own variable in a (local) host: host name -> address, as JSON.
HOST_ADDRESSES_ENV = "AIRFLOW_HETERO_HOST_ADDRESSES"

# The hyperparameters the SageMaker Python SDK v2 adds in script mode (Framework._hyperparameters).
PROGRAM_HP = "sagemaker_program"
SUBMIT_DIRECTORY_HP = "sagemaker_submit_directory"
CONTAINER_LOG_LEVEL_HP = "sagemaker_container_log_level"
JOB_NAME_HP = "sagemaker_job_name"
REGION_HP = "sagemaker_region"
SCRIPT_MODE_HPS = (SUBMIT_DIRECTORY_HP, PROGRAM_HP, CONTAINER_LOG_LEVEL_HP, JOB_NAME_HP, REGION_HP)

# ... and for a distribution (Framework._distribution_configuration, PyTorch's own).
#: The instance group the distribution runs on, a JSON list of one name.
DISTRIBUTION_GROUPS_HP = "sagemaker_distribution_instance_groups"
INSTANCE_TYPE_HP = "sagemaker_instance_type"
MPI_ENABLED_HP = "sagemaker_mpi_enabled"
MPI_PROCESSES_PER_HOST_HP = "sagemaker_mpi_num_of_processes_per_host"
MPI_CUSTOM_OPTIONS_HP = "sagemaker_mpi_custom_mpi_options"
PARAMETER_SERVER_ENABLED_HP = "sagemaker_parameter_server_enabled"
DATAPARALLEL_ENABLED_HP = "sagemaker_distributed_dataparallel_enabled"
DATAPARALLEL_CUSTOM_OPTIONS_HP = "sagemaker_distributed_dataparallel_custom_mpi_options"
PYTORCH_DDP_ENABLED_HP = "sagemaker_pytorch_ddp_enabled"
PYTORCH_XLA_ENABLED_HP = "sagemaker_pytorch_xla_multi_worker_enabled"
MULTI_WORKER_MIRRORED_ENABLED_HP = "sagemaker_multi_worker_mirrored_strategy_enabled"
TORCH_DISTRIBUTED_ENABLED_HP = "sagemaker_torch_distributed_enabled"
MODEL_PARALLEL_HP = "mp_parameters"
#: The switches that launch a distribution (the training toolkit checks these, in this order).
DISTRIBUTION_FLAGS = (
    MPI_ENABLED_HP,
    PARAMETER_SERVER_ENABLED_HP,
    DATAPARALLEL_ENABLED_HP,
    PYTORCH_DDP_ENABLED_HP,
    PYTORCH_XLA_ENABLED_HP,
    MULTI_WORKER_MIRRORED_ENABLED_HP,
    TORCH_DISTRIBUTED_ENABLED_HP,
)
#: Every hyperparameter the SDK sets itself: a definition may not set them.
SDK_HYPERPARAMETERS = frozenset(
    {
        *SCRIPT_MODE_HPS,
        *DISTRIBUTION_FLAGS,
        DISTRIBUTION_GROUPS_HP,
        INSTANCE_TYPE_HP,
        MPI_PROCESSES_PER_HOST_HP,
        MPI_CUSTOM_OPTIONS_HP,
        DATAPARALLEL_CUSTOM_OPTIONS_HP,
        MODEL_PARALLEL_HP,
    }
)

# Capacity and quotas (DESIGN.md section 9; the service's wording, as clients see it).
#: FailureReason of a job SageMaker could not find instances for; it never started a host and bills nothing.
CAPACITY_ERROR_REASON = (
    "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)
#: The account quota on the instances of one type that training jobs use at once.
TRAINING_QUOTA_NAME = "{instance_type} for training job usage"
#: ``ResourceLimitExceeded`` at create: the limit's name and figures, then what to do.
SERVICE_LIMIT_MESSAGE = (
    "The account-level service limit '{name}' is {limit} Instances, with current utilization of {used} Instances "
    "and a request delta of {delta} Instances. {advice}"
)
#: What SageMaker's quota refusals advise.
QUOTA_INCREASE_ADVICE = (
    "Please use AWS Service Quotas to request an increase for this quota. If AWS Service Quotas is not available, "
    "contact AWS support to request an increase for this quota."
)

# Managed spot, warm pools, training plans, instance preferences (DESIGN.md section 9). Each is the service's
# own sentence, quoted in the refusals of both forms and the offline endpoint (definition/rules/option_rules.py).
#: botocore's ``StoppingCondition.MaxWaitTimeInSeconds`` (sagemaker 2017-07-24 model).
MAX_WAIT_AT_LEAST_RUNTIME = "It must be equal to or greater than MaxRuntimeInSeconds."
#: The SageMaker guide, "Managed Spot Training": spot needs a MaxWait.
SPOT_NEEDS_MAX_WAIT = "Set EnableManagedSpotTraining to True and specify the MaxWaitTimeInSeconds."
#: The service's ValidationException for a MaxWait without spot (as clients have reported it).
MAX_WAIT_ONLY_WITH_SPOT = (
    "Invalid MaxWaitTimeInSeconds. It is only supported when EnableManagedSpotTraining is set to true"
)
#: The SageMaker guide, "Managed Spot Training": checkpoints are recommended, not required.
SPOT_CHECKPOINT_ADVICE = "Unless your training job will complete quickly, we recommend you use checkpointing"
#: The SageMaker guide, "SageMaker AI Managed Warm Pools", Considerations: warm pools and heterogeneous clusters,
#: and (in the same list, not quoted here) warm pools and managed spot training.
WARM_POOL_NOT_HETERO = "cannot be used with heterogeneous cluster training"
WARM_POOL_NOT_SPOT = "not with managed spot training"
#: botocore's ``ResourceConfig.TrainingPlanArn``: the plan of the ResourceConfig, whose one InstanceType it reserves.
TRAINING_PLAN_DOC = "The Amazon Resource Name (ARN); of the training plan to use for this resource configuration."
#: Why a heterogeneous job cannot have one (the model itself: ``InstanceGroup`` has no plan member).
TRAINING_PLAN_NOT_HETERO = (
    "a plan reserves the one ResourceConfig.InstanceType, and InstanceGroup has no TrainingPlanArn"
)
#: botocore's ``ResourceConfig.InstancePreferences``.
INSTANCE_PREFERENCES_EXCLUSIVE = (
    "InstancePreferences is mutually exclusive with InstanceType, InstanceGroups, InstancePlacementConfig, "
    "and EnableManagedSpotTraining"
)

# AWS Batch service jobs: SageMaker Training queues (DESIGN.md section 10; botocore's ``batch`` 2016-08-10 model,
# pinned against it by tests/package/test_sagemaker_facts.py). The operator's queue mode and the offline queue
# (local/batch) both read them from here.
#: Service-job, job-queue, service-environment and scheduling-policy names: "up to 128 characters long. It can
#: contain uppercase and lowercase letters, numbers, hyphens (-), and underscores (_)".
BATCH_NAME_MAX_LENGTH = 128
BATCH_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
#: ``serviceRequestPayload``, the CreateTrainingJob request as a JSON string: at most 10 KiB (UTF-8 bytes).
BATCH_PAYLOAD_MAX_BYTES = 10 * 1024
#: Batch names each attempt's training job ``AWSBatch<payload TrainingJobName><32 hex attempt id>``.
BATCH_TRAINING_JOB_PREFIX = "AWSBatch"
BATCH_ATTEMPT_ID_HEX_LENGTH = 32
#: CreateTrainingJob's ``TrainingJobName`` max (botocore's sagemaker model).
TRAINING_JOB_NAME_MAX_LENGTH = 63
#: So the payload's own TrainingJobName has 63 - 8 - 32 = 23 characters.
BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH = (
    TRAINING_JOB_NAME_MAX_LENGTH - len(BATCH_TRAINING_JOB_PREFIX) - BATCH_ATTEMPT_ID_HEX_LENGTH
)
#: ``serviceJobType``, ``jobQueueType`` and ``serviceEnvironmentType`` of a SageMaker Training queue.
BATCH_SAGEMAKER_TRAINING = "SAGEMAKER_TRAINING"
#: The one capacity unit of a service environment that is not quota-managed.
BATCH_CAPACITY_UNIT = "NUM_INSTANCES"
#: A service job's statuses in the order it moves through them (botocore's enum also has PENDING, which a
#: SageMaker Training queue does not show); SUCCEEDED and FAILED are final.
BATCH_JOB_STATUSES = ("SUBMITTED", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")
BATCH_FINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED"})
#: Without a filter or a jobStatus, ListServiceJobs lists only this status.
BATCH_LIST_DEFAULT_STATUS = "RUNNING"
#: The service job's status for its training job's SecondaryStatus (Pending -> SCHEDULED, Downloading -> STARTING,
#: Training and Uploading -> RUNNING); a Stopped training job is a FAILED service job.
BATCH_STATUS_FOR_SECONDARY = {
    "Starting": "SCHEDULED",
    "Pending": "SCHEDULED",
    "LaunchingMLInstances": "SCHEDULED",
    "PreparingTrainingStack": "SCHEDULED",
    "Downloading": "STARTING",
    "DownloadingTrainingImage": "STARTING",
    "Training": "RUNNING",
    "Uploading": "RUNNING",
    "Restarting": "RUNNING",
    "Interrupted": "RUNNING",
}
BATCH_STATUS_FOR_TRAINING_STATUS = {"Completed": "SUCCEEDED", "Failed": "FAILED", "Stopped": "FAILED"}
#: How Batch words a status it took from the training job: the prefix, then SageMaker's FailureReason or status
#: message, with no space between (the SDK v3's default retry rule, sagemaker.train.aws_batch.constants, matches
#: ``Received status from SageMaker:InternalServerError: We encountered an internal error. Please try again.``).
BATCH_STATUS_REASON_PREFIX = "Received status from SageMaker:"
#: How Batch refuses a request naming a job queue it does not have (the name or ARN as given; seen answered
#: to SubmitJob: "JobQueue x-job-queue not found.", "JobQueue arn:aws:batch:...:job-queue/... not found.").
BATCH_QUEUE_NOT_FOUND = "JobQueue {queue} not found."
#: The reason a job larger than every service environment of its queue stays RUNNABLE.
BATCH_MISCONFIGURATION_REASON = (
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with the job queue "
    "cannot meet the capacity requirement of the job."
)
#: ``schedulingPriority``: "integers between 0 and 9999"; within a share, higher runs first.
BATCH_PRIORITY_MIN = 0
BATCH_PRIORITY_MAX = 9999
#: ``retryStrategy.attempts``: "between 1 and 10 attempts"; ``evaluateOnExit`` globs are up to 512 characters.
BATCH_RETRY_ATTEMPTS_MIN = 1
BATCH_RETRY_ATTEMPTS_MAX = 10
BATCH_ON_STATUS_REASON_MAX_LENGTH = 512
#: ``clientToken``: 1 to 64 characters; a second submit with the same token and payload is rejected.
BATCH_CLIENT_TOKEN_MAX_LENGTH = 64
#: ``jobStateTimeLimitActions.maxTimeSeconds``: "minimum value is 600 (10 minutes) and the maximum value is 86,400
#: (24 hours)"; for a SAGEMAKER_TRAINING queue the state is RUNNABLE and the only action TERMINATE.
BATCH_TIME_LIMIT_MIN_SECONDS = 600
BATCH_TIME_LIMIT_MAX_SECONDS = 86400
BATCH_TIME_LIMIT_STATE = "RUNNABLE"
BATCH_TIME_LIMIT_ACTION = "TERMINATE"
#: A fair-share policy's share weight when the policy names none (lower weight, more capacity).
BATCH_DEFAULT_WEIGHT_FACTOR = 1.0
#: ``ListServiceJobs.maxResults`` (and its default page), and GetJobQueueSnapshot's front of the queue.
BATCH_LIST_MAX_RESULTS = 100
BATCH_SNAPSHOT_FRONT_JOBS = 100
#: ``tags`` on a service job, queue or environment: 1 to 50.
BATCH_MAX_TAGS = 50

# Managed spot interruptions and checkpoints (botocore's SecondaryStatus and CheckpointConfig documentation).
#: ``CheckpointConfig.LocalPath`` when a request gives none (botocore: "The default directory is /opt/ml/checkpoints/").
DEFAULT_CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
#: The container's own tree: the offline endpoint maps it to each host's folder, so a LocalPath must be inside it.
CONTAINER_BASE_DIR = "/opt/ml"
#: StatusMessage of SecondaryStatus ``Interrupted`` (botocore's SecondaryStatus documentation).
SPOT_INTERRUPTED_MESSAGE = "The job stopped because the managed spot training instances were interrupted."
#: StatusMessage of SecondaryStatus ``MaxWaitTimeExceeded``, TrainingJobStatus ``Stopped`` (botocore's words).
MAX_WAIT_EXCEEDED_MESSAGE = "The job stopped because it exceeded the maximum allowed wait time."
#: A Starting StatusMessage botocore documents: what a restart after an interruption shows while it launches.
LAUNCHING_INSTANCES_MESSAGE = "Launching requested ML instances."
#: SecondaryStatus ``Restarting`` has no documented message: the offline endpoint's own words.
RESTARTING_MESSAGE = "Restarting the training job after its managed spot training instances were interrupted."
#: STAND-IN, not a price: the offline endpoint bills a spot job's BillableTimeInSeconds as TrainingTimeInSeconds x
#: (1 - this). Real spot savings vary by type, region and hour (SageMaker says "up to 90%"); set your own
#: (``LocalEndpoint(spot_saving=...)``, ``local serve --spot-saving``).
STAND_IN_SPOT_SAVING = 0.7
