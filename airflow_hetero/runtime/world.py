"""The distribution on one instance group: its hosts, this host's rank, its master and address.

SDK v3 puts every host of every group into one torchrun/MPI world (master on ``algo-1``);
:func:`distribution_world` describes the world of one group instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .cluster import RuntimeEnvironment, environment
from .errors import RuntimeConfigError
from .hosts import host_address

#: Names the distribution group when no argument does (a job's ``Environment``).
DISTRIBUTION_GROUP_ENV = "AIRFLOW_HETERO_DISTRIBUTION_GROUP"
#: torchrun's own default rendezvous port.
DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class GroupWorld:
    """One instance group as a torchrun/MPI world: its hosts in order, the master first among them."""

    group: str
    hosts: tuple[str, ...]
    current_host: str
    master_host: str
    master_addr: str
    """The master's address (the endpoint's loopback address locally, DNS on SageMaker)."""
    master_port: int

    @property
    def node_rank(self) -> int | None:
        """This host's place in the group (torchrun's ``--node_rank``); None outside the group."""
        return self.hosts.index(self.current_host) if self.current_host in self.hosts else None

    @property
    def nnodes(self) -> int:
        """Hosts in the world (torchrun's ``--nnodes``)."""
        return len(self.hosts)

    def world_size(self, processes_per_host: int = 1) -> int:
        """Processes in the world: hosts times ``processes_per_host``."""
        return self.nnodes * processes_per_host

    def torchrun_args(self, nproc_per_node: int = 1) -> list[str]:
        """torchrun's options for this host (a host outside the group raises ``RuntimeConfigError``)."""
        rank = self.node_rank
        if rank is None:
            raise RuntimeConfigError(
                f"host {self.current_host} is not in distribution group {self.group!r} "
                f"(its hosts: {', '.join(self.hosts)}): it takes no part in the torchrun world"
            )
        return [
            f"--nnodes={self.nnodes}",
            f"--node_rank={rank}",
            f"--nproc_per_node={nproc_per_node}",
            f"--master_addr={self.master_addr}",
            f"--master_port={self.master_port}",
        ]

    def mpi_hosts(self, slots: int = 1) -> str:
        """mpirun's ``-H`` list of the group (``algo-2:1,algo-4:1``), to run on the master host."""
        return ",".join(f"{host}:{slots}" for host in self.hosts)

    def as_dict(self) -> dict[str, Any]:
        """The world as JSON-ready data (what ``python -m airflow_hetero.runtime world`` prints)."""
        return {
            "group": self.group,
            "hosts": list(self.hosts),
            "current_host": self.current_host,
            "node_rank": self.node_rank,
            "nnodes": self.nnodes,
            "master_host": self.master_host,
            "master_addr": self.master_addr,
            "master_port": self.master_port,
        }


def distribution_world(
    group: str | None = None,
    *,
    master_port: int = DEFAULT_MASTER_PORT,
    env: RuntimeEnvironment | None = None,
    timeout: float = 60.0,
) -> GroupWorld:
    """The world of the distribution group: ``group``, else ``AIRFLOW_HETERO_DISTRIBUTION_GROUP``,
    else the job's one distribution group (``sagemaker_distribution_instance_groups``)."""
    env = env or environment()
    name = group or os.environ.get(DISTRIBUTION_GROUP_ENV)
    if not name and len(env.distribution_instance_groups) == 1:
        name = env.distribution_instance_groups[0]
    if not name:
        known = ", ".join(env.instance_groups) or "(none listed in resourceconfig.json)"
        raise RuntimeConfigError(
            f"name the distribution group (--group, or {DISTRIBUTION_GROUP_ENV} in the job's environment); "
            f"the job's instance groups are {known}"
        )
    try:
        hosts = env.group_hosts(name)
    except KeyError as exc:
        raise RuntimeConfigError(str(exc.args[0])) from None
    if not hosts:
        raise RuntimeConfigError(f"instance group {name!r} has no hosts in resourceconfig.json")
    master = hosts[0]
    return GroupWorld(name, hosts, env.current_host, master, host_address(master, timeout=timeout), master_port)
