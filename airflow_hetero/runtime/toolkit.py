"""The sagemaker-training toolkit's names: where the config files live, and its hyperparameter split.

Copied from sagemaker_training (``params.SAGEMAKER_PREFIX``, ``params.SAGEMAKER_HYPERPARAMETERS``
and the flags checked by ``Environment.get_distribution_instance_groups_from_resource_config``), so
the split and the distribution fallback behave the same. The offline endpoint's SM_* environment
(``airflow_hetero.local.host.toolkit_env``) uses them too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

BASE_DIR_ENV = "SAGEMAKER_BASE_DIR"
DEFAULT_BASE_DIR = "/opt/ml"
HOMOGENEOUS_GROUP = "homogeneousCluster"
RESOURCE_CONFIG_FILE = "resourceconfig.json"
HYPERPARAMETERS_FILE = "hyperparameters.json"
DISTRIBUTION_GROUPS_HP = "sagemaker_distribution_instance_groups"

TOOLKIT_PREFIX = "sagemaker_"
TOOLKIT_HYPERPARAMETERS = frozenset(
    {
        "sagemaker_program",
        "sagemaker_submit_directory",
        "sagemaker_enable_cloudwatch_metrics",
        "sagemaker_region",
        "sagemaker_container_log_level",
        "sagemaker_job_name",
        "default_user_module_name",
        "_tuning_objective_metric",
        "sagemaker_s3_output",
    }
)
DISTRIBUTION_FLAGS = (
    "sagemaker_mpi_enabled",
    "sagemaker_parameter_server_enabled",
    "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_pytorch_ddp_enabled",
    "sagemaker_pytorch_xla_multi_worker_enabled",
    "sagemaker_multi_worker_mirrored_strategy_enabled",
    "sagemaker_torch_distributed_enabled",
)


def decode_hyperparameters(raw: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-decode each value when it parses, else keep it (toolkit's read_hyperparameters)."""
    decoded: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            decoded[key] = json.loads(value)
        except (ValueError, TypeError):
            decoded[key] = value
    return decoded


def split_hyperparameters(hps: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(toolkit, framework, user)`` as the toolkit splits decoded hyperparameters.

    ``toolkit``: every ``sagemaker_*`` key and the toolkit's own keys; ``framework``: those minus
    the toolkit's own keys (its ``additional_framework_parameters``); ``user``: everything else.
    """
    toolkit = {k: v for k, v in hps.items() if k.startswith(TOOLKIT_PREFIX) or k in TOOLKIT_HYPERPARAMETERS}
    framework = {k: v for k, v in toolkit.items() if k not in TOOLKIT_HYPERPARAMETERS}
    user = {k: v for k, v in hps.items() if k not in toolkit}
    return toolkit, framework, user
