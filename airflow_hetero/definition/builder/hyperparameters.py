"""Hyperparameters as the SageMaker Python SDK v2 sends them.

Framework estimators (PyTorch, TensorFlow) JSON-encode every value (``"service"`` ->
``"\\"service\\""``, ``10`` -> ``"10"``, ``True`` -> ``"true"``) and add ``sagemaker_*``
keys for the code, logging, job name, region and distribution strategy. A plain image
estimator JSON-encodes user values only when ``source_dir`` is set (otherwise ``str()``),
and its own ``sagemaker_*`` keys always.

One deliberate difference from the SDK: an enabled ``torch_distributed`` on a heterogeneous
job also gets ``sagemaker_distribution_instance_groups`` (the SDK forgets it unless
``smdistributed`` is set too, and the container then starts torchrun on every group).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_hetero.definition.builder import source
from airflow_hetero.definition.facts.encoding import encode, user_hyperparameters
from airflow_hetero.definition.rules import distribution
from airflow_hetero.sagemaker_facts import (
    CONTAINER_LOG_LEVEL_HP,
    DATAPARALLEL_CUSTOM_OPTIONS_HP,
    DATAPARALLEL_ENABLED_HP,
    DISTRIBUTION_GROUPS_HP,
    INSTANCE_TYPE_HP,
    JOB_NAME_HP,
    MODEL_PARALLEL_HP,
    MPI_CUSTOM_OPTIONS_HP,
    MPI_ENABLED_HP,
    MPI_PROCESSES_PER_HOST_HP,
    MULTI_WORKER_MIRRORED_ENABLED_HP,
    PARAMETER_SERVER_ENABLED_HP,
    PROGRAM_HP,
    PYTORCH_XLA_ENABLED_HP,
    REGION_HP,
    SUBMIT_DIRECTORY_HP,
    TORCH_DISTRIBUTED_ENABLED_HP,
)

if TYPE_CHECKING:
    from airflow_hetero.definition.model import JobFields

#: The code channel path the SDK uses when network isolation is on.
CODE_CHANNEL_SOURCEDIR = "/opt/ml/input/data/code/sourcedir.tar.gz"

def sdk_hyperparameters(job: JobFields, *, job_name: str, region: str) -> dict[str, str]:
    """The ``HyperParameters`` of the CreateTrainingJob request for ``job``."""
    framework_mode = job.framework is not None
    out = user_hyperparameters(job.hyperparameters, json_values=framework_mode or job.source_dir is not None)
    if job.entry_point is not None:
        code_dir = source.submit_directory(job, job_name)
        if job.enable_network_isolation:
            code_dir = CODE_CHANNEL_SOURCEDIR
        script_mode = {
            SUBMIT_DIRECTORY_HP: code_dir,
            PROGRAM_HP: source.program_name(job),
            CONTAINER_LOG_LEVEL_HP: job.container_log_level,
            JOB_NAME_HP: job_name,
            REGION_HP: region,
        }
        out.update({k: encode(v) for k, v in script_mode.items()})
    if framework_mode and job.distribution is not None:
        out.update({k: encode(v) for k, v in distribution_hyperparameters(job).items()})
    if job.framework == "tensorflow":
        out["model_dir"] = encode(_tensorflow_model_dir(job, job_name))
    return out


def distribution_hyperparameters(job: JobFields) -> dict[str, Any]:
    """The ``sagemaker_*`` keys that launch the job's distribution, as the SDK computes them.

    PyTorch: ``pytorchddp`` is the SDK's alias of smdistributed dataparallel; an enabled
    ``torch_distributed`` sends only its own switch, unless ``smdistributed`` is there too
    (``PyTorch._pytorch_distribution_configuration``). Everything else:
    ``Framework._distribution_configuration``.
    """
    dist = distribution.sdk_form(job.distribution or {}, job.framework)
    group = job.distribution_group if job.is_hetero else None
    if not distribution.torch_distributed_launches(dist, job.framework):
        return _framework_configuration(dist, group, job.instance_type)
    config = _framework_configuration(dist, group, job.instance_type) if "smdistributed" in dist else {}
    config[TORCH_DISTRIBUTED_ENABLED_HP] = True
    if job.instance_type is not None:
        config[INSTANCE_TYPE_HP] = job.instance_type
    if group is not None:
        # a deliberate difference from the SDK (module docstring)
        config[DISTRIBUTION_GROUPS_HP] = [group]
    return config


def _framework_configuration(dist: dict[str, Any], group: str | None, instance_type: str | None) -> dict[str, Any]:
    """``Framework._distribution_configuration``: one key per strategy present, enabled or not."""
    config: dict[str, Any] = {}
    if group is not None:
        config[DISTRIBUTION_GROUPS_HP] = [group]
    if "pytorchxla" in dist:
        config[PYTORCH_XLA_ENABLED_HP] = _switch(dist["pytorchxla"])
    if "parameter_server" in dist:
        config[PARAMETER_SERVER_ENABLED_HP] = _switch(dist["parameter_server"])
    if "mpi" in dist:
        mpi = dist["mpi"]
        config[MPI_ENABLED_HP] = _switch(mpi)
        if mpi.get("processes_per_host"):
            config[MPI_PROCESSES_PER_HOST_HP] = mpi["processes_per_host"]
        config[MPI_CUSTOM_OPTIONS_HP] = mpi.get("custom_mpi_options", "")
    if "smdistributed" in dist:
        smd = dist["smdistributed"]
        model_parallel = smd.get("modelparallel", {})
        if _switch(model_parallel) and model_parallel.get("parameters"):
            config[MODEL_PARALLEL_HP] = model_parallel["parameters"]
        data_parallel = smd.get("dataparallel", {})
        config[DATAPARALLEL_ENABLED_HP] = _switch(data_parallel)
        config[INSTANCE_TYPE_HP] = instance_type
        if _switch(data_parallel):
            config[DATAPARALLEL_CUSTOM_OPTIONS_HP] = data_parallel.get("custom_mpi_options", "")
    if "multi_worker_mirrored_strategy" in dist:
        config[MULTI_WORKER_MIRRORED_ENABLED_HP] = _switch(dist["multi_worker_mirrored_strategy"])
    return config


def _switch(options: Any) -> bool:
    """A strategy's ``enabled`` value as sent (the spec allows only true/false; missing: false)."""
    return bool(options.get("enabled", False)) if isinstance(options, dict) else False


def mpi_enabled(job: JobFields) -> bool:
    """True when the job launches its script through MPI."""
    return _switch((job.distribution or {}).get("mpi"))


def _tensorflow_model_dir(job: JobFields, job_name: str) -> str:
    if mpi_enabled(job):
        return "/opt/ml/model"
    return f"{job.output_path.rstrip('/')}/{job_name}/model"
