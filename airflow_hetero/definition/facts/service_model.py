"""Where botocore's service models lie, found without importing botocore.

The instance types come from the sagemaker model (:mod:`airflow_hetero.definition.facts.instance_types`),
the request shapes from any service's (:mod:`airflow_hetero.definition.raw_request.service_shapes`), and the
parse-time validation cache (:mod:`airflow_hetero.definition.validated`) keys on it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

__all__ = ["InstanceTypeCatalogError", "sagemaker_model_path", "service_model_path"]


class InstanceTypeCatalogError(RuntimeError):
    """botocore's sagemaker model could not be read."""


def sagemaker_model_path() -> Path:
    """The newest ``data/sagemaker/<version>/service-2.json[.gz]`` of the installed botocore."""
    return service_model_path("sagemaker")


@functools.cache
def service_model_path(service: str) -> Path:
    """The newest ``data/<service>/<version>/service-2.json[.gz]`` of the installed botocore."""
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        raise InstanceTypeCatalogError("botocore is not installed; it is needed to check instance types")
    root = os.path.join(next(iter(spec.submodule_search_locations)), "data", service)
    try:
        versions = sorted((e.path for e in os.scandir(root) if e.is_dir()), reverse=True)
    except OSError:
        versions = []
    for version in versions:
        for name in ("service-2.json.gz", "service-2.json"):
            path = os.path.join(version, name)
            if os.path.isfile(path):
                return Path(path)
    raise InstanceTypeCatalogError(f"no {service} service model found under {root}")
