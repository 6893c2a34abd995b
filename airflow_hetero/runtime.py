"""Inside a training host: which instance group am I, and run the right code for it.

Standard library only, so it works in any training container (no Airflow, boto3 or pydantic).
Reads ``input/config/resourceconfig.json`` and ``hyperparameters.json`` under the SageMaker base
dir (``SAGEMAKER_BASE_DIR``, default ``/opt/ml``, as the sagemaker-training toolkit does) and
answers with the same semantics as the toolkit's ``sagemaker_training.environment.Environment``.
It also prints a one-line ``[airflow-hetero]`` marker that lets log summaries map hosts to
groups, and resolves peer host addresses both on SageMaker (DNS) and on the offline endpoint
(``AIRFLOW_HETERO_HOST_ADDRESSES``). For jobs whose launcher spans every host (SDK v3 puts all
groups into one torchrun/MPI world, master on ``algo-1``), :func:`distribution_world` describes
the world of one group, and ``python -m airflow_hetero.runtime torchrun --group G -- train.py``
(or ``python runtime.py ...`` from a copy of this one file) launches torchrun on that group only.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

__all__ = [
    "BASE_DIR_ENV",
    "DEFAULT_BASE_DIR",
    "DISTRIBUTION_FLAGS",
    "DISTRIBUTION_GROUPS_HP",
    "HOMOGENEOUS_GROUP",
    "HOST_ADDRESSES_ENV",
    "MARKER_PREFIX",
    "TOOLKIT_HYPERPARAMETERS",
    "TOOLKIT_PREFIX",
    "GroupDispatchError",
    "GroupWorld",
    "HostLookupError",
    "RuntimeConfigError",
    "RuntimeEnvironment",
    "connect",
    "decode_hyperparameters",
    "distribution_world",
    "environment",
    "format_marker",
    "host_address",
    "host_addresses",
    "listen_address",
    "log_marker",
    "parse_marker",
    "run_by_group",
    "split_hyperparameters",
]

T = TypeVar("T")

BASE_DIR_ENV = "SAGEMAKER_BASE_DIR"
DEFAULT_BASE_DIR = "/opt/ml"
HOST_ADDRESSES_ENV = "AIRFLOW_HETERO_HOST_ADDRESSES"
HOMOGENEOUS_GROUP = "homogeneousCluster"
#: Names the distribution group when no argument does (a job's ``Environment``).
DISTRIBUTION_GROUP_ENV = "AIRFLOW_HETERO_DISTRIBUTION_GROUP"
#: torchrun's own default rendezvous port.
DEFAULT_MASTER_PORT = 29500
MARKER_PREFIX = "[airflow-hetero]"
RESOURCE_CONFIG_FILE = "resourceconfig.json"
HYPERPARAMETERS_FILE = "hyperparameters.json"
DISTRIBUTION_GROUPS_HP = "sagemaker_distribution_instance_groups"

# Copied from sagemaker_training (params.SAGEMAKER_PREFIX, params.SAGEMAKER_HYPERPARAMETERS and the
# flags checked by Environment.get_distribution_instance_groups_from_resource_config), so the split
# and the distribution fallback behave the same. The offline endpoint's SM_* environment
# (airflow_hetero.local.host.toolkit_env) uses them too.
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


class RuntimeConfigError(RuntimeError):
    """The SageMaker config files (or the host address map) are missing or malformed."""


class GroupDispatchError(LookupError):
    """``run_by_group`` has no function for the current host's instance group."""


class HostLookupError(LookupError):
    """A host name could not be turned into an address."""


@dataclass(frozen=True)
class RuntimeEnvironment:
    """Read-only snapshot of what this host knows about the job's cluster (toolkit semantics)."""

    base_dir: str
    current_host: str
    current_instance_type: str
    current_instance_group: str
    hosts: tuple[str, ...]
    instance_groups: tuple[str, ...]
    current_instance_group_hosts: tuple[str, ...]
    distribution_instance_groups: tuple[str, ...]
    distribution_hosts: tuple[str, ...]
    master_hostname: str
    hyperparameters: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    resource_config: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_hetero(self) -> bool:
        """True when the job has more than one instance group."""
        return len(self.instance_groups) > 1

    @property
    def is_master(self) -> bool:
        """True on the master host (first distribution host, else first host)."""
        return self.current_host == self.master_hostname

    @property
    def instance_groups_dict(self) -> dict[str, dict[str, Any]]:
        """Group name -> the group's entry in resourceconfig.json (a fresh copy each time)."""
        groups = self.resource_config.get("instance_groups") or []
        return {group["instance_group_name"]: copy.deepcopy(dict(group)) for group in groups}

    def group_hosts(self, group: str) -> tuple[str, ...]:
        """Hosts of one instance group; raises ``KeyError`` naming the known groups."""
        entry = self.instance_groups_dict.get(group)
        if entry is None:
            known = ", ".join(self.instance_groups) or "(none listed in resourceconfig.json)"
            raise KeyError(f"unknown instance group {group!r}; the job's groups are: {known}")
        return tuple(entry["hosts"])

    def marker(self) -> str:
        """The ``[airflow-hetero]`` marker line for this host."""
        return format_marker(self.current_host, self.current_instance_group, self.current_instance_type)

    @classmethod
    def load(cls, base_dir: str | os.PathLike[str] | None = None) -> RuntimeEnvironment:
        """Read the config files under ``base_dir`` (default: ``SAGEMAKER_BASE_DIR`` or /opt/ml)."""
        if base_dir is None:
            base = os.environ.get(BASE_DIR_ENV, DEFAULT_BASE_DIR)
            origin = f"{BASE_DIR_ENV}={base}" if BASE_DIR_ENV in os.environ else f"default {base}"
        else:
            base = os.fspath(base_dir)
            origin = f"base_dir={base}"
        config_dir = os.path.join(base, "input", "config")
        rc_path = os.path.join(config_dir, RESOURCE_CONFIG_FILE)
        hp_path = os.path.join(config_dir, HYPERPARAMETERS_FILE)
        missing = (
            f"{RESOURCE_CONFIG_FILE} only exists inside a SageMaker training job or a host of the "
            f"airflow-hetero offline endpoint (base dir from {origin}; set {BASE_DIR_ENV} to read "
            "another one)"
        )
        resource_config = _read_json(rc_path, missing)
        raw_hps = _read_json(hp_path, None)
        return _build(base, rc_path, resource_config, hp_path, {} if raw_hps is None else raw_hps)


def _read_json(path: str, missing_hint: str | None) -> Any:
    """Parse a JSON file; ``None`` when it is absent and optional (``missing_hint`` is None)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        if missing_hint is None:
            return None
        raise RuntimeConfigError(f"{path} not found: {missing_hint}") from None
    except OSError as exc:
        raise RuntimeConfigError(f"cannot read {path}: {exc}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RuntimeConfigError(f"{path} is not valid JSON: {exc}") from exc


def _names(value: Any, where: str) -> tuple[str, ...]:
    """Check that ``value`` is a list of non-empty strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RuntimeConfigError(f"{where} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _optional_str(config: Mapping[str, Any], key: str, default: str, path: str) -> str:
    value = config.get(key, default)
    if not isinstance(value, str) or not value:
        raise RuntimeConfigError(f"{path}: '{key}' must be a non-empty string, got {value!r}")
    return value


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


def _build(base: str, rc_path: str, config: Any, hp_path: str, raw_hps: Any) -> RuntimeEnvironment:
    """Derive every property from the parsed files, following sagemaker_training's Environment."""
    if not isinstance(config, dict):
        raise RuntimeConfigError(f"{rc_path} must hold a JSON object, got {type(config).__name__}")
    if not isinstance(raw_hps, dict):
        raise RuntimeConfigError(f"{hp_path} must hold a JSON object, got {type(raw_hps).__name__}")
    current = config.get("current_host")
    if not isinstance(current, str) or not current:
        raise RuntimeConfigError(f"{rc_path}: 'current_host' must be a non-empty string, got {current!r}")
    if "hosts" not in config:
        raise RuntimeConfigError(f"{rc_path}: 'hosts' is missing")
    all_hosts = _names(config["hosts"], f"{rc_path}: 'hosts'")
    if not all_hosts:
        raise RuntimeConfigError(f"{rc_path}: 'hosts' is empty")
    instance_type = _optional_str(config, "current_instance_type", "local", rc_path)
    group = _optional_str(config, "current_group_name", HOMOGENEOUS_GROUP, rc_path)

    groups_config = config.get("instance_groups")
    if groups_config is None:
        groups_config = []
    if not isinstance(groups_config, list):
        raise RuntimeConfigError(f"{rc_path}: 'instance_groups' must be a list, got {groups_config!r}")
    group_hosts: list[tuple[str, tuple[str, ...]]] = []
    for i, entry in enumerate(groups_config):
        where = f"{rc_path}: instance_groups[{i}]"
        if not isinstance(entry, dict):
            raise RuntimeConfigError(f"{where} must be an object, got {entry!r}")
        name = entry.get("instance_group_name")
        if not isinstance(name, str) or not name:
            raise RuntimeConfigError(f"{where}.instance_group_name must be a non-empty string")
        group_hosts.append((name, _names(entry.get("hosts"), f"{where}.hosts")))

    _, framework, user_hps = split_hyperparameters(decode_hyperparameters(raw_hps))

    if DISTRIBUTION_GROUPS_HP in framework:
        value = framework[DISTRIBUTION_GROUPS_HP]
        # A bare string means one group (the toolkit would compare by substring instead).
        dist_groups = (
            (value,) if isinstance(value, str) and value else _names(value, f"{hp_path}: {DISTRIBUTION_GROUPS_HP}")
        )
    elif any(framework.get(flag, False) for flag in DISTRIBUTION_FLAGS):
        dist_groups = (group,)
    else:
        dist_groups = ()
    if group_hosts:
        dist_hosts = tuple(h for name, members in group_hosts if name in dist_groups for h in members)
    else:
        dist_hosts = all_hosts  # no instance_groups in resourceconfig.json: every host
    current_group_hosts = next((members for name, members in group_hosts if name == group), ())

    return RuntimeEnvironment(
        base_dir=base,
        current_host=current,
        current_instance_type=instance_type,
        current_instance_group=group,
        hosts=all_hosts,
        instance_groups=tuple(name for name, _ in group_hosts),
        current_instance_group_hosts=current_group_hosts,
        distribution_instance_groups=dist_groups,
        distribution_hosts=dist_hosts,
        master_hostname=dist_hosts[0] if dist_hosts else all_hosts[0],
        hyperparameters=MappingProxyType(user_hps),
        resource_config=MappingProxyType(copy.deepcopy(config)),
    )


_cache: dict[str, RuntimeEnvironment] = {}
_lock = threading.Lock()


def environment(base_dir: str | os.PathLike[str] | None = None, *, reload: bool = False) -> RuntimeEnvironment:
    """The environment of this host, loaded once per base dir (``reload=True`` re-reads the files)."""
    key = os.fspath(base_dir) if base_dir is not None else os.environ.get(BASE_DIR_ENV, DEFAULT_BASE_DIR)
    with _lock:
        if reload or key not in _cache:
            _cache[key] = RuntimeEnvironment.load(base_dir)
        return _cache[key]


# -- marker -------------------------------------------------------------------------------------

_MARKER_RE = re.compile(
    r"(?:^|(?<=[\s:>\]]))\[airflow-hetero\] host=([^\s=]+) group=([^\s=]+) instance_type=([^\s=]+)\s*$"
)
_marker_done = threading.Event()


def format_marker(host: str, group: str, instance_type: str) -> str:
    """``[airflow-hetero] host=<host> group=<group> instance_type=<type>`` (values %-escaped)."""
    parts = []
    for key, value in (("host", host), ("group", group), ("instance_type", instance_type)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"marker {key} must be a non-empty string, got {value!r}")
        parts.append(f"{key}={urllib.parse.quote(value, safe='')}")
    return f"{MARKER_PREFIX} {' '.join(parts)}"


def parse_marker(line: str) -> tuple[str, str] | None:
    """``(host, group)`` from a marker line, else None.

    The marker may follow a prefix ending in whitespace, ``:``, ``>`` or ``]`` (e.g. mpirun's
    ``[1,0]<stdout>:``) but must end the line.
    """
    match = _MARKER_RE.search(line)
    if match is None:
        return None
    return urllib.parse.unquote(match.group(1)), urllib.parse.unquote(match.group(2))


def log_marker(env: RuntimeEnvironment | None = None) -> str:
    """Print this host's marker to stdout (flushed), once per process; returns the line."""
    line = (env or environment()).marker()
    with _lock:
        if not _marker_done.is_set():
            print(line, flush=True)
            _marker_done.set()
    return line


def run_by_group(handlers: Mapping[str, Callable[[], T]], *, env: RuntimeEnvironment | None = None) -> T:
    """Print the marker, then call the function registered for this host's group; return its result."""
    env = env or environment()
    for name, handler in handlers.items():
        if not callable(handler):
            raise TypeError(f"run_by_group: the value for group {name!r} is not callable: {handler!r}")
    log_marker(env)
    chosen = handlers.get(env.current_instance_group)
    if chosen is None:
        given = ", ".join(sorted(handlers)) or "(none)"
        known = ", ".join(env.instance_groups) or "(none listed in resourceconfig.json)"
        raise GroupDispatchError(
            f"no function for instance group {env.current_instance_group!r} on host {env.current_host}: "
            f"run_by_group was given {given}; the job's instance groups are {known}"
        )
    return chosen()


# -- host addresses -----------------------------------------------------------------------------


def host_addresses() -> dict[str, str] | None:
    """The offline endpoint's host -> address map, or None on SageMaker (variable unset or empty)."""
    raw = os.environ.get(HOST_ADDRESSES_ENV)
    if not raw:
        return None
    try:
        mapping = json.loads(raw)
    except ValueError as exc:
        raise RuntimeConfigError(f"{HOST_ADDRESSES_ENV} is not valid JSON: {exc}") from exc
    if not isinstance(mapping, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in mapping.items()
    ):
        raise RuntimeConfigError(f"{HOST_ADDRESSES_ENV} must be a JSON object of host -> address, got {raw!r}")
    return mapping


def host_address(host: str, *, timeout: float = 0.0) -> str:
    """Address of ``host``: from the offline endpoint's map, else DNS (retried up to ``timeout`` s)."""
    mapping = host_addresses()
    if mapping is not None:
        if host not in mapping:
            known = ", ".join(sorted(mapping)) or "(none)"
            raise HostLookupError(f"host {host!r} is not in {HOST_ADDRESSES_ENV} (known hosts: {known})")
        return mapping[host]
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            return socket.gethostbyname(host)
        except OSError as exc:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HostLookupError(f"cannot resolve host {host!r}: {exc}") from exc
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 2.0)


def listen_address(env: RuntimeEnvironment | None = None) -> str:
    """Address a server on this host should bind: its own address locally, 0.0.0.0 on SageMaker."""
    if host_addresses() is None:
        return "0.0.0.0"
    return host_address((env or environment()).current_host)


def connect(host: str, port: int, *, timeout: float = 60.0) -> socket.socket:
    """Connect to ``host:port``, retrying until the peer listens or ``timeout`` s have passed."""
    deadline = time.monotonic() + timeout
    address = host_address(host, timeout=timeout)
    delay = 0.05
    while True:
        remaining = deadline - time.monotonic()
        try:
            sock = socket.create_connection((address, port), timeout=max(remaining, 1.0))
        except OSError as exc:
            if deadline - time.monotonic() <= 0:
                raise TimeoutError(f"could not connect to {host} ({address}:{port}) within {timeout}s: {exc}") from exc
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            delay = min(delay * 2, 1.0)
            continue
        sock.settimeout(None)  # the connect timeout must not linger on later reads
        return sock


# -- the distribution on one group ----------------------------------------------------------------


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


def _parser() -> Any:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m airflow_hetero.runtime", description="The distribution on one instance group."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("world", "print the group's world as JSON"),
        ("torchrun-args", "print this host's torchrun options (exit 3 outside the group)"),
        ("torchrun", "run torchrun on the group's hosts; the others run the script with plain Python"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--group", help=f"the distribution group (default: ${DISTRIBUTION_GROUP_ENV})")
        sub.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT)
        if name != "world":
            sub.add_argument("--nproc-per-node", type=int, default=1)
        if name == "torchrun":
            sub.add_argument("--others", choices=("run", "skip"), default="run", help="what other hosts do")
            sub.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...]")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``world``, ``torchrun-args`` or ``torchrun`` (which replaces this process with the launch)."""
    args = _parser().parse_args(argv)
    try:
        world = distribution_world(args.group, master_port=args.master_port)
    except (RuntimeConfigError, HostLookupError) as exc:
        print(f"airflow_hetero.runtime: {exc}", file=sys.stderr)
        return 2
    if args.command == "world":
        print(json.dumps(world.as_dict()))
        return 0
    if args.command == "torchrun-args":
        if world.node_rank is None:
            print(f"airflow_hetero.runtime: {world.current_host} is not in group {world.group}", file=sys.stderr)
            return 3
        print(shlex.join(world.torchrun_args(args.nproc_per_node)))
        return 0
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        print("airflow_hetero.runtime: torchrun needs a script: ... torchrun --group G -- train.py", file=sys.stderr)
        return 2
    log_marker()
    if world.node_rank is not None:
        command = ["torchrun", *world.torchrun_args(args.nproc_per_node), *script]
    elif args.others == "run":
        command = [sys.executable, *script]
    else:
        return 0
    print(f"{MARKER_PREFIX} launch: {shlex.join(command)}", flush=True)
    os.execvp(command[0], command)
    return 127  # not reached: exec replaced the process


if __name__ == "__main__":
    sys.exit(main())
