"""What the offline endpoint of the system test holds: the seeded bucket, the jobs per task instance.

Jobs are told apart by the identity tags the operator stamps on each one
(``airflow-hetero:dag-id``, ``run-id``, ``task-id``), read back with ListTags: the count of jobs per
task instance is what "exactly once" means.
"""

from __future__ import annotations

from typing import Any

import boto3

from support.system_airflow import REGION, Stack

BUCKET = "hetero-system"
TAG = "airflow-hetero:"


def client(stack: Stack, service: str) -> Any:
    """A boto3 client against the endpoint, with its fake credentials."""
    return boto3.client(
        service,
        endpoint_url=stack.endpoint_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def seed_bucket(stack: Stack) -> None:
    """The bucket the DAGs' jobs read from and write to, with a little training data."""
    s3 = client(stack, "s3")
    s3.create_bucket(Bucket=BUCKET)
    for part in range(2):
        s3.put_object(Bucket=BUCKET, Key=f"train/part-{part}.csv", Body=b"x,y\n1,2\n3,4\n")


def jobs_of(stack: Stack, dag_id: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every job of ``dag_id`` on the endpoint, by (run_id, task_id): name, status, tags."""
    sm = client(stack, "sagemaker")
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for page in sm.get_paginator("list_training_jobs").paginate(MaxResults=100):
        for summary in page["TrainingJobSummaries"]:
            tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=summary["TrainingJobArn"])["Tags"]}
            if tags.get(f"{TAG}dag-id") != dag_id:
                continue
            key = (tags[f"{TAG}run-id"], tags[f"{TAG}task-id"])
            found.setdefault(key, []).append(
                {"name": summary["TrainingJobName"], "status": summary["TrainingJobStatus"], "tags": tags}
            )
    return found


def describe(stack: Stack, name: str) -> dict[str, Any]:
    """DescribeTrainingJob of ``name``."""
    answer: dict[str, Any] = client(stack, "sagemaker").describe_training_job(TrainingJobName=name)
    return answer
