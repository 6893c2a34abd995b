"""Airflow-version compatibility layer: the one place that knows where authoring classes live.

One code base runs on Airflow 2.11 and 3.x. ``airflow.providers.common.compat.sdk`` (a required
dependency, >= 1.13) resolves each name to ``airflow.sdk`` on Airflow 3 and to the Airflow 2
module on 2.11, so every other module imports Airflow authoring classes from here. Importing
this module costs little beyond the authoring classes themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import (
        Asset,
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
    from airflow.providers.common.compat.sdk import (
        AirflowException,
        AirflowFailException,
        Asset,
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

__all__ = [
    "AIRFLOW_V_3",
    "AirflowException",
    "AirflowFailException",
    "Asset",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "Context",
    "PokeReturnValue",
    "TaskDeferred",
    "TaskInstanceKey",
    "XCom",
    "airflow_version",
    "conf",
    "default_deferrable",
    "link_xcom_key",
]


def airflow_version() -> tuple[int, int]:
    """The running Airflow's (major, minor), from ``airflow.__version__`` (also with airflow-core alone)."""
    import re

    import airflow

    found = re.match(r"(\d+)\.(\d+)", str(airflow.__version__))
    if found is None:  # pragma: no cover - Airflow always has a PEP 440 version
        raise RuntimeError(f"cannot read the Airflow version from {airflow.__version__!r}")
    return int(found.group(1)), int(found.group(2))


AIRFLOW_V_3 = airflow_version() >= (3, 0)


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` setting (False when unset), read at call time."""
    return bool(conf.getboolean("operators", "default_deferrable", fallback=False))


def link_xcom_key(link: Any) -> str | None:
    """The XCom key Airflow 3 reads an extra link's URL from; None on Airflow 2 (it calls get_link)."""
    key = getattr(link, "xcom_key", None)
    return key if isinstance(key, str) else None
