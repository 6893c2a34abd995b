"""Hyperparameter values as the SageMaker Python SDK v2 sends them, and the names it sets itself.

Framework estimators JSON-encode every value (``"service"`` -> ``"\\"service\\""``, ``10`` -> ``"10"``); a
plain image estimator does so only when ``source_dir`` is set (otherwise ``str()``). The request builder
(:mod:`airflow_hetero.definition.builder.hyperparameters`) sends them so, and the rules measure them so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_hetero.sagemaker_facts import SDK_HYPERPARAMETERS

__all__ = ["RESERVED", "encode", "user_hyperparameters"]

#: Set by the SDK (and so by the builder): a definition's hyperparameters may not use them.
RESERVED = SDK_HYPERPARAMETERS


def encode(value: Any) -> str:
    """The SDK's framework encoding of one value."""
    return json.dumps(value)


def user_hyperparameters(values: Mapping[Any, Any], *, json_values: bool) -> dict[str, str]:
    """The user's hyperparameters as sent: JSON-encoded (framework jobs, or with source_dir), else ``str()``."""
    return {str(k): encode(v) if json_values else str(v) for k, v in values.items()}
