"""Offline SageMaker endpoint that really runs heterogeneous training jobs on one machine.

``LocalEndpoint`` (see :mod:`airflow_hetero.local.api.server`) is imported lazily, so importing this
package stays cheap; werkzeug, moto and boto3 load only when an endpoint starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero._lazy import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.local.api.server import LocalEndpoint

__all__ = ["LocalEndpoint"]

__getattr__, __dir__ = lazy_exports(globals(), {"LocalEndpoint": "airflow_hetero.local.api.server"})
