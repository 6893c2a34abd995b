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

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_hetero.definition import distribution, source

if TYPE_CHECKING:
    from airflow_hetero.definition.model import JobFields

#: The code channel path the SDK uses when network isolation is on.
CODE_CHANNEL_SOURCEDIR = "/opt/ml/input/data/code/sourcedir.tar.gz"

RESERVED = frozenset(
    {
        "sagemaker_program",
        "sagemaker_submit_directory",
        "sagemaker_container_log_level",
        "sagemaker_job_name",
        "sagemaker_region",
        "sagemaker_distribution_instance_groups",
        "sagemaker_mpi_enabled",
        "sagemaker_mpi_num_of_processes_per_host",
        "sagemaker_mpi_custom_mpi_options",
        "sagemaker_distributed_dataparallel_enabled",
        "sagemaker_distributed_dataparallel_custom_mpi_options",
        "sagemaker_instance_type",
        "sagemaker_torch_distributed_enabled",
        "sagemaker_pytorch_ddp_enabled",
        "sagemaker_pytorch_xla_multi_worker_enabled",
        "sagemaker_parameter_server_enabled",
        "sagemaker_multi_worker_mirrored_strategy_enabled",
        "mp_parameters",
    }
)


def encode(value: Any) -> str:
    """The SDK's framework encoding of one value."""
    return json.dumps(value)


def user_hyperparameters(values: Mapping[Any, Any], *, json_values: bool) -> dict[str, str]:
    """The user's hyperparameters as sent: JSON-encoded (framework jobs, or with source_dir), else ``str()``."""
    return {str(k): encode(v) if json_values else str(v) for k, v in values.items()}


def sdk_hyperparameters(job: JobFields, *, job_name: str, region: str) -> dict[str, str]:
    """The ``HyperParameters`` of the CreateTrainingJob request for ``job``."""
    framework_mode = job.framework is not None
    out = user_hyperparameters(job.hyperparameters, json_values=framework_mode or job.source_dir is not None)
    if job.entry_point is not None:
        code_dir = source.submit_directory(job, job_name)
        if job.enable_network_isolation:
            code_dir = CODE_CHANNEL_SOURCEDIR
        script_mode = {
            "sagemaker_submit_directory": code_dir,
            "sagemaker_program": source.program_name(job),
            "sagemaker_container_log_level": job.container_log_level,
            "sagemaker_job_name": job_name,
            "sagemaker_region": region,
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
    config["sagemaker_torch_distributed_enabled"] = True
    if job.instance_type is not None:
        config["sagemaker_instance_type"] = job.instance_type
    if group is not None:
        # a deliberate difference from the SDK (module docstring)
        config["sagemaker_distribution_instance_groups"] = [group]
    return config


def _framework_configuration(dist: dict[str, Any], group: str | None, instance_type: str | None) -> dict[str, Any]:
    """``Framework._distribution_configuration``: one key per strategy present, enabled or not."""
    config: dict[str, Any] = {}
    if group is not None:
        config["sagemaker_distribution_instance_groups"] = [group]
    if "pytorchxla" in dist:
        config["sagemaker_pytorch_xla_multi_worker_enabled"] = _switch(dist["pytorchxla"])
    if "parameter_server" in dist:
        config["sagemaker_parameter_server_enabled"] = _switch(dist["parameter_server"])
    if "mpi" in dist:
        mpi = dist["mpi"]
        config["sagemaker_mpi_enabled"] = _switch(mpi)
        if mpi.get("processes_per_host"):
            config["sagemaker_mpi_num_of_processes_per_host"] = mpi["processes_per_host"]
        config["sagemaker_mpi_custom_mpi_options"] = mpi.get("custom_mpi_options", "")
    if "smdistributed" in dist:
        smd = dist["smdistributed"]
        model_parallel = smd.get("modelparallel", {})
        if _switch(model_parallel) and model_parallel.get("parameters"):
            config["mp_parameters"] = model_parallel["parameters"]
        data_parallel = smd.get("dataparallel", {})
        config["sagemaker_distributed_dataparallel_enabled"] = _switch(data_parallel)
        config["sagemaker_instance_type"] = instance_type
        if _switch(data_parallel):
            config["sagemaker_distributed_dataparallel_custom_mpi_options"] = data_parallel.get(
                "custom_mpi_options", ""
            )
    if "multi_worker_mirrored_strategy" in dist:
        config["sagemaker_multi_worker_mirrored_strategy_enabled"] = _switch(dist["multi_worker_mirrored_strategy"])
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
