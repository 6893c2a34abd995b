"""Airflow operators of airflow-hetero, loaded lazily.

``from airflow_hetero.operators import HeteroTrainingOperator`` imports only the module that
defines the name asked for, so a DAG file pays for nothing it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.operators.log_summary import HeteroLogSummaryOperator
    from airflow_hetero.operators.training import HeteroTrainingOperator

__all__ = ["HeteroLogSummaryOperator", "HeteroTrainingOperator"]

_MODULES = {
    "HeteroTrainingOperator": "airflow_hetero.operators.training",
    "HeteroLogSummaryOperator": "airflow_hetero.operators.log_summary",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
