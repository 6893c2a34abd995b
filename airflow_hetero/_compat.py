"""Airflow-version compatibility layer: the one place that knows where authoring classes live.

One code base runs on Airflow 2.11 and 3.x. On Airflow 3 each name comes from the Task SDK
(``airflow.sdk``), which a DAG file has already imported, so a DAG file that uses one operator pays
for nothing else; on Airflow 2.11, ``airflow.providers.common.compat.sdk`` (a required dependency,
>= 1.23) resolves the same names. Names resolve on first use; every other module imports Airflow
authoring classes from here.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import (
        Asset,
        BaseOperator,
        BaseOperatorLink,
        BaseSensorOperator,
        Context,
        PokeReturnValue,
        ResumableJobMixin,
    )
    from airflow.sdk.configuration import conf
    from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred
    from airflow.sdk.execution_time.xcom import XCom
    from airflow.sdk.types import TaskInstanceKey

__all__ = [
    "AIRFLOW_V_3",
    "DURABLE_JOBS",
    "AirflowException",
    "AirflowFailException",
    "Asset",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "Context",
    "PokeReturnValue",
    "ResumableJobMixin",
    "TaskDeferred",
    "TaskInstanceKey",
    "XCom",
    "airflow_version",
    "conf",
    "default_deferrable",
    "deprecated_arguments",
    "latest_xcom",
    "link_xcom_key",
]

#: Where each name lives in Airflow 3's Task SDK.
_TASK_SDK = {
    "BaseOperator": "airflow.sdk",
    "BaseOperatorLink": "airflow.sdk",
    "BaseSensorOperator": "airflow.sdk",
    "Context": "airflow.sdk",
    "PokeReturnValue": "airflow.sdk",
    "conf": "airflow.sdk.configuration",
    "AirflowException": "airflow.sdk.exceptions",
    "AirflowFailException": "airflow.sdk.exceptions",
    "TaskDeferred": "airflow.sdk.exceptions",
    "XCom": "airflow.sdk.execution_time.xcom",
    "TaskInstanceKey": "airflow.sdk.types",
    "Asset": "airflow.sdk",
    "ResumableJobMixin": "airflow.sdk",
}
_COMMON_COMPAT = "airflow.providers.common.compat.sdk"
#: Names the Task SDK has from Airflow 3.3 on; below it common-compat (>= 1.23) hands out its stand-in
#: (``ResumableJobMixin``'s submits a job on every try).
_SINCE_3_3 = frozenset({"ResumableJobMixin"})


def __getattr__(name: str) -> Any:
    module = _TASK_SDK.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not AIRFLOW_V_3 or (name in _SINCE_3_3 and not DURABLE_JOBS):
        module = _COMMON_COMPAT
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def airflow_version() -> tuple[int, int]:
    """The running Airflow's (major, minor), from ``airflow.__version__`` (also with airflow-core alone)."""
    import airflow

    text = str(airflow.__version__)
    major, _, rest = text.partition(".")
    minor = ""
    for char in rest:  # "11.0", "0rc1", "1.dev0": the digits right after the first dot
        if not char.isdigit():
            break
        minor += char
    if not major.isdigit() or not minor:  # pragma: no cover - Airflow always has a PEP 440 version
        raise RuntimeError(f"cannot read the Airflow version from {text!r}")
    return int(major), int(minor)


AIRFLOW_V_3 = airflow_version() >= (3, 0)
#: Airflow 3.3+: ``ResumableJobMixin`` is the Task SDK's and ``context["task_state_store"]`` exists.
DURABLE_JOBS = airflow_version() >= (3, 3)


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` setting (False when unset), read at call time."""
    conf_: Any = __getattr__("conf") if "conf" not in globals() else globals()["conf"]
    return bool(conf_.getboolean("operators", "default_deferrable", fallback=False))


def deprecated_arguments(kwargs: dict[str, Any], names: Sequence[str], instead: str) -> dict[str, Any]:
    """The deprecated keyword arguments ``names`` a task was given, popped from ``kwargs``, else read from its
    ``default_args``; a DeprecationWarning says what to write ``instead``.

    Airflow fills only the parameters of a task's signature from ``default_args`` (and passes the merged
    ``default_args`` along), so a spelling that left the signature would otherwise be dropped in silence.
    """
    default_args = kwargs.get("default_args") or {}
    found = {name: kwargs.pop(name) for name in names if name in kwargs}
    found.update({name: default_args[name] for name in names if name in default_args and name not in found})
    if found:
        import warnings

        verb = "is" if len(found) == 1 else "are"
        given = ", ".join(f"{name}=" for name in found)
        warnings.warn(f"{given} {verb} deprecated: write {instead}", DeprecationWarning, stacklevel=4)
    return found


def link_xcom_key(link: Any) -> str | None:
    """The XCom key Airflow 3 reads an extra link's URL from; None on Airflow 2 (it calls get_link)."""
    key = getattr(link, "xcom_key", None)
    return key if isinstance(key, str) else None


def latest_xcom(ti: Any, task_id: str, key: str) -> Any:
    """The newest value ``task_id`` pushed under ``key`` in this DAG run or an earlier one (Airflow's own
    metadata: ``include_prior_dates``), at ``ti``'s map index; None when there is none. With the map index
    given, Airflow 3's Task SDK and Airflow 2 both answer one value (the newest), never a list."""
    return ti.xcom_pull(task_ids=task_id, key=key, include_prior_dates=True, map_indexes=ti.map_index)
