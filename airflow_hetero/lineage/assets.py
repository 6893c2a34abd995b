"""The model artifact as an Airflow asset: its URI and the extra each asset event carries.

Pure: works on the result dict the operator and sensor return (``job.outcome.result_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def normalize_uri(uri: str) -> str:
    """An S3 prefix compared without its trailing slash (Airflow 3 drops it from asset URIs)."""
    return uri.rstrip("/")


def model_asset_extra(result: dict[str, Any], cost: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The asset event extra for a completed job: job name, model artifact, groups, final metrics and
    what the run cost (:func:`airflow_hetero.pricing.billing.billed_cost`; left out when not given)."""
    extra = {
        "training_job_name": result.get("training_job_name"),
        "model_artifacts": result.get("model_artifacts"),
        "instance_groups": list(result.get("instance_groups") or []),
        "final_metrics": dict(result.get("final_metrics") or {}),
    }
    if cost is not None:
        extra["cost"] = dict(cost)
    return extra


def artifact_outside_asset(asset_uri: str, result: dict[str, Any]) -> str | None:
    """Why the job's model artifact does not lie under the asset's URI, or None when it does."""
    artifact = result.get("model_artifacts")
    if not artifact:
        return "the job reported no model artifact"
    prefix = normalize_uri(asset_uri) + "/"
    if not str(artifact).startswith(prefix):
        return f"model artifact {artifact} is not under the asset URI {asset_uri}"
    return None
