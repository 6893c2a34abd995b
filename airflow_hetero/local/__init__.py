"""Offline SageMaker endpoint that really runs heterogeneous training jobs on one machine.

``LocalEndpoint`` (see :mod:`airflow_hetero.local.api.server`) and its option classes (``RunOptions``,
``SpotOptions``, ``BatchOptions``) are imported lazily, so importing this package stays cheap; werkzeug,
moto and boto3 load only when an endpoint starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.local.api.server import LocalEndpoint
    from airflow_hetero.local.batch.options import BatchOptions
    from airflow_hetero.local.training.options import RunOptions
    from airflow_hetero.local.training.spot import SpotOptions

__all__ = ["BatchOptions", "LocalEndpoint", "RunOptions", "SpotOptions"]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "LocalEndpoint": "airflow_hetero.local.api.server",
        "RunOptions": "airflow_hetero.local.training.options",
        "SpotOptions": "airflow_hetero.local.training.spot",
        "BatchOptions": "airflow_hetero.local.batch.options",
    },
)
