"""Airflow-version compatibility layer: the one place that knows where authoring classes live.

On Airflow 3 each name comes from the Task SDK (``airflow.sdk``), which a DAG file has already
imported, so a DAG file that uses one operator pays for nothing else; on Airflow 2.11,
``airflow.providers.common.compat.sdk`` resolves the same names. Names resolve on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import (
        BaseOperator,
        BaseOperatorLink,
        BaseSensorOperator,
        Context,
        PokeReturnValue,
    )
    from airflow.sdk.configuration import conf
    from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred
    from airflow.sdk.execution_time.xcom import XCom
    from airflow.sdk.types import TaskInstanceKey

__all__ = [
    "AirflowException",
    "AirflowFailException",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "Context",
    "PokeReturnValue",
    "TaskDeferred",
    "TaskInstanceKey",
    "XCom",
    "conf",
    "default_deferrable",
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
}
_COMMON_COMPAT = "airflow.providers.common.compat.sdk"


def _airflow_major() -> int:
    from airflow import __version__

    return int(__version__.split(".", 1)[0])


def __getattr__(name: str) -> Any:
    module = _TASK_SDK.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _airflow_major() < 3:
        module = _COMMON_COMPAT
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` setting (False when unset), read at call time."""
    conf_: Any = __getattr__("conf") if "conf" not in globals() else globals()["conf"]
    return bool(conf_.getboolean("operators", "default_deferrable", fallback=False))
