"""AddTags, ListTags and DeleteTags for the endpoint's training jobs (their ARNs), as SageMaker answers.

Tags sent with CreateTrainingJob are kept in the job's record (``_Tags``, never shown by Describe,
as on SageMaker). Requests are checked against botocore's model constraints first (key and value
lengths and patterns, at most 50 tags per call); a job holds at most 50 tags, and keys starting
with ``aws:`` are reserved, as on SageMaker.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from airflow_hetero.local.api.constraints import check_constraints
from airflow_hetero.local.api.errors import not_found, validation
from airflow_hetero.local.training.store import JobStore

MAX_TAGS = 50
_TRAINING_JOB_ARN = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:\d{12}:training-job/(.+)$")


def training_job_of(arn: Any) -> str | None:
    """The job name in a training-job ARN, None for any other resource (those go to moto)."""
    match = _TRAINING_JOB_ARN.match(str(arn or ""))
    return match.group(1) if match else None


def _job(store: JobStore, arn: str) -> str:
    name = training_job_of(arn)
    record = store.get(name) if name else None
    if record is None or record["TrainingJobArn"].lower() != arn.lower():
        raise not_found()
    return str(record["TrainingJobName"])


def add_tags(store: JobStore, body: dict[str, Any]) -> dict[str, Any]:
    """AddTags: add or overwrite tags; answers with every tag the job now has."""
    check_constraints("AddTags", body)
    name = _job(store, body["ResourceArn"])
    new = {t["Key"]: t.get("Value", "") for t in body["Tags"]}
    reserved = sorted(k for k in new if k.lower().startswith("aws:"))
    if reserved:
        raise validation(f"Tag keys starting with 'aws:' are reserved for AWS use: {', '.join(reserved)}")

    def change(record: dict[str, Any]) -> None:
        tags = {t["Key"]: t.get("Value", "") for t in record.get("_Tags", [])}
        tags.update(new)
        if len(tags) > MAX_TAGS:
            raise validation(f"A resource can have at most {MAX_TAGS} tags; this request would give it {len(tags)}")
        record["_Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]

    record = store.update(name, change)
    return {"Tags": record["_Tags"]}


def list_tags(store: JobStore, body: dict[str, Any]) -> dict[str, Any]:
    """ListTags with MaxResults (50 by default) and NextToken paging."""
    check_constraints("ListTags", body)
    name = _job(store, body["ResourceArn"])
    record = store.get(name)
    assert record is not None
    tags = record.get("_Tags", [])
    size = int(body.get("MaxResults") or MAX_TAGS)
    token = body.get("NextToken")
    try:
        offset = int(base64.urlsafe_b64decode(str(token).encode()).decode()) if token else 0
    except ValueError as exc:
        raise validation("Invalid pagination token") from exc
    answer: dict[str, Any] = {"Tags": tags[offset : offset + size]}
    if offset + size < len(tags):
        answer["NextToken"] = base64.urlsafe_b64encode(str(offset + size).encode()).decode()
    return answer


def delete_tags(store: JobStore, body: dict[str, Any]) -> dict[str, Any]:
    """DeleteTags: remove the given keys (unknown keys are ignored, as on SageMaker)."""
    check_constraints("DeleteTags", body)
    name = _job(store, body["ResourceArn"])
    keys = set(body["TagKeys"])

    def change(record: dict[str, Any]) -> None:
        record["_Tags"] = [t for t in record.get("_Tags", []) if t["Key"] not in keys]

    store.update(name, change)
    return {}
