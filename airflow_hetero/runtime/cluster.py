"""What this host knows about the job's cluster: which group am I, read from SageMaker's files.

Reads ``input/config/resourceconfig.json`` and ``hyperparameters.json`` under the SageMaker base
dir (``SAGEMAKER_BASE_DIR``, default ``/opt/ml``, as the sagemaker-training toolkit does) and
answers with the same semantics as the toolkit's ``sagemaker_training.environment.Environment``.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import RuntimeConfigError
from .marker import format_marker
from .toolkit import (
    BASE_DIR_ENV,
    DEFAULT_BASE_DIR,
    DISTRIBUTION_FLAGS,
    DISTRIBUTION_GROUPS_HP,
    HOMOGENEOUS_GROUP,
    HYPERPARAMETERS_FILE,
    RESOURCE_CONFIG_FILE,
    decode_hyperparameters,
    split_hyperparameters,
)


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
_cache_lock = threading.Lock()


def environment(base_dir: str | os.PathLike[str] | None = None, *, reload: bool = False) -> RuntimeEnvironment:
    """The environment of this host, loaded once per base dir (``reload=True`` re-reads the files)."""
    key = os.fspath(base_dir) if base_dir is not None else os.environ.get(BASE_DIR_ENV, DEFAULT_BASE_DIR)
    with _cache_lock:
        if reload or key not in _cache:
            _cache[key] = RuntimeEnvironment.load(base_dir)
        return _cache[key]
