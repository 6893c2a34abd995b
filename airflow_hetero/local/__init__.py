"""Offline SageMaker endpoint that really runs heterogeneous training jobs on one machine.

``LocalEndpoint`` (see :mod:`airflow_hetero.local.server`) is imported lazily, so importing this
package stays cheap; werkzeug, moto and boto3 load only when an endpoint starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.local.server import LocalEndpoint

__all__ = ["LocalEndpoint"]


def __getattr__(name: str) -> Any:
    if name == "LocalEndpoint":
        from airflow_hetero.local.server import LocalEndpoint

        return LocalEndpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
