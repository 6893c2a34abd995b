"""Per-host SageMaker layout: host naming, loopback addresses, directories and config files.

SageMaker names hosts ``algo-1..N`` and hands them to instance groups in no particular order (a
real job had group A = [algo-2] and group B = [algo-3, algo-1]); the shuffle here is seeded so a
run can be repeated, but nothing may rely on the numbering. Each host gets the directory tree the
container would see under ``/opt/ml``, rooted at its own ``SAGEMAKER_BASE_DIR``, and the three
config files written exactly as SageMaker writes them.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_hetero.job.resource_config import GroupSpec

NETWORK_INTERFACE = "eth0"


@dataclass(frozen=True)
class Host:
    """One emulated instance: its name, group, loopback address and base directory."""

    name: str
    number: int
    group: str
    instance_type: str
    address: str
    base_dir: Path

    @property
    def config_dir(self) -> Path:
        """``/opt/ml/input/config`` of this host."""
        return self.base_dir / "input" / "config"

    @property
    def code_dir(self) -> Path:
        """``/opt/ml/code`` of this host (the extracted source)."""
        return self.base_dir / "code"

    @property
    def model_dir(self) -> Path:
        """``/opt/ml/model`` of this host."""
        return self.base_dir / "model"

    @property
    def output_dir(self) -> Path:
        """``/opt/ml/output`` of this host (``failure`` file, ``data/``)."""
        return self.base_dir / "output"

    def channel_dir(self, channel: str) -> Path:
        """``/opt/ml/input/data/<channel>`` of this host."""
        return self.base_dir / "input" / "data" / channel


@dataclass(frozen=True)
class Cluster:
    """All hosts of a job and which group each belongs to."""

    hosts: list[Host]
    """Hosts in host-number order (algo-1, algo-2, ...)."""
    groups: list[GroupSpec]
    members: dict[str, list[str]]
    """Group name -> host names in assignment order (groups in request order)."""

    def resource_config(self, host: Host) -> dict[str, Any]:
        """``resourceconfig.json`` of ``host``, shaped as SageMaker writes it for heterogeneous jobs."""
        return {
            "current_host": host.name,
            "current_instance_type": host.instance_type,
            "current_group_name": host.group,
            "hosts": [h.name for h in self.hosts],
            "instance_groups": [
                {
                    "instance_group_name": g.name,
                    "instance_type": g.instance_type,
                    "hosts": self.members[g.name],
                }
                for g in self.groups
            ],
            "network_interface_name": NETWORK_INTERFACE,
        }

    def addresses(self) -> dict[str, str]:
        """Host name -> loopback address (``AIRFLOW_HETERO_HOST_ADDRESSES``)."""
        return {h.name: h.address for h in self.hosts}

    def group_hosts(self, group: str) -> list[Host]:
        """The hosts of ``group`` in assignment order."""
        by_name = {h.name: h for h in self.hosts}
        return [by_name[name] for name in self.members[group]]


def plan_cluster(groups: list[GroupSpec], *, seed: str, slot: int, hosts_root: Path) -> Cluster:
    """Name the job's hosts algo-1..N and assign them to groups in a seeded, shuffled order.

    ``slot`` picks the job's loopback subnet: host algo-N gets ``127.0.<slot>.<N>``, so every host
    can listen on the same port as its peers.
    """
    total = sum(g.instance_count for g in groups)
    numbers = list(range(1, total + 1))
    random.Random(seed).shuffle(numbers)
    hosts: list[Host] = []
    members: dict[str, list[str]] = {}
    position = 0
    for group in groups:
        chosen = numbers[position : position + group.instance_count]
        position += group.instance_count
        members[group.name] = [f"algo-{n}" for n in chosen]
        hosts.extend(
            Host(f"algo-{n}", n, group.name, group.instance_type or "", f"127.0.{slot}.{n}", hosts_root / f"algo-{n}")
            for n in chosen
        )
    return Cluster(sorted(hosts, key=lambda h: h.number), list(groups), members)


def input_data_config(channels: list[dict[str, Any]]) -> dict[str, Any]:
    """``inputdataconfig.json`` for the channels a host receives."""
    config: dict[str, Any] = {}
    for channel in channels:
        source = channel["DataSource"]["S3DataSource"]
        entry: dict[str, Any] = {}
        if channel.get("ContentType"):
            entry["ContentType"] = channel["ContentType"]
        entry["TrainingInputMode"] = channel.get("InputMode") or "File"
        entry["S3DistributionType"] = source.get("S3DataDistributionType") or "FullyReplicated"
        entry["RecordWrapperType"] = channel.get("RecordWrapperType") or "None"
        config[channel["ChannelName"]] = entry
    return config


def create_layout(
    host: Host, *, resource: dict[str, Any], hyperparameters: dict[str, str], data_config: dict[str, Any]
) -> None:
    """Create the host's ``/opt/ml`` tree and write its three config files."""
    for path in (
        host.config_dir,
        host.code_dir,
        host.model_dir,
        host.base_dir / "input" / "data",
        host.output_dir / "data",
        host.output_dir / "intermediate",
        *(host.channel_dir(name) for name in data_config),
    ):
        path.mkdir(parents=True, exist_ok=True)
    files = {
        "resourceconfig.json": resource,
        "hyperparameters.json": hyperparameters,
        "inputdataconfig.json": data_config,
    }
    for name, content in files.items():
        (host.config_dir / name).write_text(json.dumps(content), encoding="utf-8")
