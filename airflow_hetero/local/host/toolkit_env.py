"""The SM_* environment and start-up banner the sagemaker-training toolkit gives a host.

Framework containers run the toolkit, which reads the three config files, exports ``SM_*``
variables and logs a "Training Env" block and one ``SM_NAME=value`` line per variable before
invoking the entry point. The local endpoint has no container, so it computes the same values from
the same files (mirroring ``sagemaker_training.environment.Environment`` 5.x, checked side by side
in the tests) and prints the same lines into the host's log, so log readers see what they would
see on SageMaker.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from airflow_hetero.runtime import HOMOGENEOUS_GROUP, decode_hyperparameters, split_hyperparameters
from airflow_hetero.sagemaker_facts import (
    CONTAINER_LOG_LEVEL_HP,
    DISTRIBUTION_FLAGS,
    DISTRIBUTION_GROUPS_HP,
    MODEL_PARALLEL_HP,
    MPI_ENABLED_HP,
    PROGRAM_HP,
    SUBMIT_DIRECTORY_HP,
    TORCH_DISTRIBUTED_ENABLED_HP,
)


def format_value(value: Any) -> str:
    """An env var value as the toolkit renders it (strings as-is, the rest compact sorted JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _arg(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return "" if value is None else str(value)


def user_args(hyperparameters: dict[str, Any]) -> list[str]:
    """Command-line arguments the toolkit passes to the entry point (``--key value``, sorted)."""
    args: list[str] = []
    for key in sorted(hyperparameters):
        args += [f"--{key}" if len(key) > 1 else f"-{key}", _arg(hyperparameters[key])]
    return args


def _module_name(program: Any) -> Any:
    if isinstance(program, str) and program.endswith(".py"):
        return program[:-3]
    return program


def training_env(
    *,
    resource: dict[str, Any],
    data_config: dict[str, Any],
    raw_hyperparameters: dict[str, str],
    base_dir: Path,
    job_name: str | None,
    num_cpus: int | None = None,
) -> dict[str, Any]:
    """The toolkit's ``dict(Environment())`` for a host (its "Training Env" and ``SM_TRAINING_ENV``)."""
    sagemaker, framework, user = split_hyperparameters(decode_hyperparameters(raw_hyperparameters))
    current_group = resource.get("current_group_name", HOMOGENEOUS_GROUP)
    groups_config = resource.get("instance_groups", [])
    groups = [g["instance_group_name"] for g in groups_config]
    groups_dict = {g["instance_group_name"]: g for g in groups_config}
    default_distribution = [current_group] if any(framework.get(f, False) for f in DISTRIBUTION_FLAGS) else []
    distribution_groups = framework.get(DISTRIBUTION_GROUPS_HP, default_distribution)
    if groups_config:
        distribution_hosts = [
            h for g in groups_config if g["instance_group_name"] in distribution_groups for h in g["hosts"]
        ]
    else:
        distribution_hosts = list(resource["hosts"])
    master = distribution_hosts[0] if distribution_hosts else resource["hosts"][0]
    mp_parameters = format_value(user[MODEL_PARALLEL_HP]) if MODEL_PARALLEL_HP in user else None
    input_dir = base_dir / "input"
    output_dir = base_dir / "output"
    program = sagemaker.get(PROGRAM_HP)
    instance_type = resource.get("current_instance_type", "local")
    return {
        "additional_framework_parameters": framework,
        "channel_input_dirs": {name: str(input_dir / "data" / name) for name in data_config},
        "current_host": resource["current_host"],
        "current_instance_group": current_group,
        "current_instance_group_hosts": groups_dict.get(current_group, {}).get("hosts", []),
        "current_instance_type": instance_type,
        "distribution_hosts": distribution_hosts,
        "distribution_instance_groups": distribution_groups,
        "framework_module": None,
        "hosts": resource["hosts"],
        "hyperparameters": user,
        "input_config_dir": str(input_dir / "config"),
        "input_data_config": data_config,
        "input_dir": str(input_dir),
        "instance_groups": groups,
        "instance_groups_dict": groups_dict,
        "is_hetero": len(groups) > 1,
        "is_master": resource["current_host"] == master,
        "is_modelparallel_enabled": mp_parameters and mp_parameters != "{}",
        "is_smddpmprun_installed": False,
        "is_smddprun_installed": False,
        "job_name": job_name,
        "log_level": sagemaker.get(CONTAINER_LOG_LEVEL_HP, 20),
        "master_hostname": master,
        "model_dir": str(base_dir / "model"),
        "module_dir": str(sagemaker.get(SUBMIT_DIRECTORY_HP, base_dir / "code")),
        "module_name": _module_name(str(program)),
        "network_interface_name": resource.get("network_interface_name", "eth0"),
        "num_cpus": (os.cpu_count() or 1) if num_cpus is None else num_cpus,
        "num_gpus": 0,
        "num_neurons": 64 if "trn2.48xlarge" in instance_type else 0,
        "output_data_dir": str(output_dir / "data"),
        "output_dir": str(output_dir),
        "output_intermediate_dir": str(output_dir / "intermediate"),
        "resource_config": resource,
        "topology": resource.get("topology", []),
        "user_entry_point": program,
    }


def env_vars(env: dict[str, Any]) -> dict[str, str]:
    """The ``SM_*`` variables, in the order the toolkit's ``to_env_vars`` lists (and logs) them."""
    values: dict[str, Any] = {
        "hosts": env["hosts"],
        "network_interface_name": env["network_interface_name"],
        "hps": env["hyperparameters"],
        "user_entry_point": env["user_entry_point"],
        "framework_params": env["additional_framework_parameters"],
        "resource_config": env["resource_config"],
        "input_data_config": env["input_data_config"],
        "output_data_dir": env["output_data_dir"],
        "channels": sorted(env["channel_input_dirs"]),
        "current_host": env["current_host"],
        "current_instance_type": env["current_instance_type"],
        "current_instance_group": env["current_instance_group"],
        "current_instance_group_hosts": env["current_instance_group_hosts"],
        "instance_groups": env["instance_groups"],
        "instance_groups_dict": env["instance_groups_dict"],
        "distribution_instance_groups": env["distribution_instance_groups"],
        "is_hetero": env["is_hetero"],
        "module_name": env["module_name"],
        "log_level": env["log_level"],
        "framework_module": env["framework_module"],
        "input_dir": env["input_dir"],
        "input_config_dir": env["input_config_dir"],
        "output_dir": env["output_dir"],
        "num_cpus": env["num_cpus"],
        "num_gpus": env["num_gpus"],
        "num_neurons": env["num_neurons"],
        "model_dir": env["model_dir"],
        "module_dir": env["module_dir"],
        "training_env": env,
        "user_args": user_args(env["hyperparameters"]),
        "output_intermediate_dir": env["output_intermediate_dir"],
    }
    if env["topology"]:
        values["topology"] = env["topology"]
    for name, path in env["channel_input_dirs"].items():
        values[f"channel_{name}"] = path
    for key, value in env["hyperparameters"].items():
        values[f"hp_{key}"] = value
    return {f"SM_{key.upper()}": format_value(value) for key, value in values.items()}


def startup_lines(env: dict[str, Any], variables: dict[str, str], command: list[str], stamp: str) -> list[str]:
    """The toolkit's start-up log block, one line per log event, ending with the command line.

    ``stamp`` is the ``asctime`` prefix of the toolkit's log records ("2026-11-30 03:08:00,646").
    """
    prefix = f"{stamp} sagemaker-training-toolkit INFO     "
    lines = [
        f"{prefix}No GPUs detected (normal if no gpus installed)",
        f"{prefix}No Neurons detected (normal if no neurons installed)",
        f"{prefix}Invoking user script",
        "",
        "Training Env:",
        "",
        *json.dumps(env, indent=4).splitlines(),
        "",
        "Environment variables:",
        "",
        *(f"{name}={value}" for name, value in variables.items()),
        "",
        "Invoking script with the following command:",
        "",
        " ".join(command),
        "",
    ]
    return lines


#: The port the toolkit's torchrun launcher gives ``--master_port`` (sagemaker_training.torch_distributed).
TORCH_MASTER_PORT = "7777"


def launcher_env(env: dict[str, Any], addresses: dict[str, str]) -> dict[str, str]:
    """What the toolkit's launcher gives each process of a distribution-group host, one process per host.

    ``torch_distributed`` (torchrun ``--nnodes N --nproc_per_node 1 --master_addr ... --master_port
    7777 --node_rank R``): ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
    ``GROUP_RANK``, ``GROUP_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``. ``mpi`` (mpirun, one
    rank per host): ``OMPI_COMM_WORLD_SIZE``, ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_LOCAL_RANK``,
    ``OMPI_COMM_WORLD_LOCAL_SIZE``, ``OMPI_COMM_WORLD_NODE_RANK``, plus the same ``WORLD_SIZE``,
    ``RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` for scripts that read those. ``MASTER_ADDR`` is the
    master host's *address*, so that resolvers outside Python need no name. Empty for hosts outside
    the distribution group and for other strategies.
    """
    framework = env["additional_framework_parameters"]
    hosts: list[str] = env["distribution_hosts"]
    current = env["current_host"]
    torch = bool(framework.get(TORCH_DISTRIBUTED_ENABLED_HP))
    mpi = bool(framework.get(MPI_ENABLED_HP))
    if not (torch or mpi) or current not in hosts:
        return {}
    rank = hosts.index(current)
    master = env["master_hostname"]
    variables = {
        "WORLD_SIZE": str(len(hosts)),
        "RANK": str(rank),
        "LOCAL_RANK": "0",
        "MASTER_ADDR": addresses.get(master, master),
        "MASTER_PORT": TORCH_MASTER_PORT,
    }
    if torch:
        variables.update({"LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(rank), "GROUP_WORLD_SIZE": str(len(hosts))})
    if mpi:
        variables.update(
            {
                "OMPI_COMM_WORLD_SIZE": str(len(hosts)),
                "OMPI_COMM_WORLD_RANK": str(rank),
                "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
                "OMPI_COMM_WORLD_NODE_RANK": str(rank),
            }
        )
    return variables
