"""Airflow-version compatibility layer: the one place that knows where authoring classes live.

Airflow 3 is the target (``airflow.sdk``); ``airflow.providers.common.compat.sdk`` resolves the same
names on Airflow 2.11 too, so every other module imports Airflow authoring classes from here.
Importing this module costs little beyond ``airflow.sdk`` itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
else:
    try:
        from airflow.providers.common.compat.sdk import (
            AirflowException,
            AirflowFailException,
            BaseOperator,
            BaseOperatorLink,
            BaseSensorOperator,
            Context,
            PokeReturnValue,
            TaskDeferred,
            TaskInstanceKey,
            XCom,
            conf,
        )
    except ImportError:  # pragma: no cover - common-compat missing or too old: plain Airflow 3 paths
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


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` setting (False when unset), read at call time."""
    return bool(conf.getboolean("operators", "default_deferrable", fallback=False))
