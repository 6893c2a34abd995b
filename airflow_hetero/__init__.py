"""Run Amazon SageMaker heterogeneous-cluster training jobs from Apache Airflow.

Importing this package is cheap: Airflow, boto3 and botocore load only when an
Airflow-facing module (hook, operators, sensors, triggers) is imported. What every part shares and
a DAG parse needs lives here, in the module every import loads anyway (so it costs a parse no
module of its own): the lazy re-exports of the package folders and the package's cache folder.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

__version__ = "0.1.0"

__all__ = ["__version__", "cache_dir", "cache_folder", "get_provider_info", "lazy_exports"]


#: The AWS guide to heterogeneous clusters, the integration's external documentation.
AWS_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/train-heterogeneous-cluster.html"
INTEGRATION = "Amazon SageMaker heterogeneous clusters"


def lazy_exports(
    namespace: dict[str, Any], names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the package whose globals are ``namespace``: each name in ``names``
    (mapped to the module that defines it) loads its module on first use.

    ``from airflow_hetero.operators import HeteroTrainingOperator`` then imports only the module that defines
    it, so a DAG file (or the offline endpoint) pays for nothing it does not use. It lives here, in the
    package every import loads anyway, so that it costs a DAG parse no module of its own.
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__


#: Where the package's caches go (validated definitions, compiled request shapes, Price List answers); ``off``:
#: nowhere.
CACHE_ENV = "AIRFLOW_HETERO_CACHE_DIR"


def cache_folder() -> str | None:
    """The package's cache folder: ``$AIRFLOW_HETERO_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-hetero`` or
    ``~/.cache/airflow-hetero``; None when ``AIRFLOW_HETERO_CACHE_DIR=off`` turns caching off. A plain string
    (no pathlib work on the parse path)."""
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "0", "false", "none") else configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "airflow-hetero")


def cache_dir() -> Path | None:
    """:func:`cache_folder` as a Path."""
    from pathlib import Path

    folder = cache_folder()
    return None if folder is None else Path(folder)


def documentation_url() -> str:
    """The ``Documentation`` entry of ``[project.urls]`` (one source for the UI and PyPI)."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        for entry in metadata("airflow-hetero").get_all("Project-URL") or []:
            label, _, url = entry.partition(",")
            if label.strip().lower() == "documentation":
                return str(url).strip()
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that is not installed
        pass
    return "https://pypi.org/project/airflow-hetero/"


def get_provider_info() -> dict[str, Any]:
    """Provider metadata read by Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

    Lists every hook, operator, sensor, trigger and extra link by module path, so ``airflow
    providers triggers`` / ``hooks`` and the UI's provider page show them; ``documentation-url`` is
    where the UI's provider link points (Airflow would otherwise build an apache.org URL that 404s).
    """

    def modules(*names: str) -> list[dict[str, Any]]:
        return [{"integration-name": INTEGRATION, "python-modules": list(names)}]

    return {
        "package-name": "airflow-hetero",
        "name": "SageMaker heterogeneous clusters",
        "description": "Typed definitions, operators, sensors, triggers and log summaries for "
        "Amazon SageMaker heterogeneous-cluster training jobs.",
        "versions": [__version__],
        "documentation-url": documentation_url(),
        "integrations": [
            {"integration-name": INTEGRATION, "external-doc-url": AWS_GUIDE, "tags": ["aws"]},
        ],
        "hooks": modules("airflow_hetero.hooks.training", "airflow_hetero.hooks.batch"),
        "operators": modules("airflow_hetero.operators.training", "airflow_hetero.operators.log_summary"),
        "sensors": modules("airflow_hetero.sensors.training"),
        "triggers": modules("airflow_hetero.triggers.training", "airflow_hetero.triggers.queue"),
        "extra-links": [
            "airflow_hetero.links.training.SageMakerTrainingJobLink",
            "airflow_hetero.links.training.TrainingJobLogsLink",
            "airflow_hetero.links.instance_groups.InstanceGroupsLink",
        ],
    }
