"""The operator refuses at DAG-parse time what SageMaker refuses for instance groups, and spot without a valid
MaxWait, in both forms, naming the path: nothing reaches AWS (docs/cost.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support.moto_jobs import hetero_request

from airflow_hetero.definition.errors import JobDefinitionError
from airflow_hetero.operators import HeteroTrainingOperator

BASE = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/weekly-p4d"


def _operator(**kwargs: Any) -> HeteroTrainingOperator:
    return HeteroTrainingOperator(task_id="train", aws_conn_id=None, deferrable=False, **kwargs)


@pytest.mark.parametrize(
    ("member", "value", "path"),
    [
        ("KeepAlivePeriodInSeconds", 600, r"ResourceConfig\.KeepAlivePeriodInSeconds: KeepAlivePeriodInSeconds cannot"),
        ("TrainingPlanArn", PLAN, r"ResourceConfig\.TrainingPlanArn: TrainingPlanArn cannot"),
        ("InstancePreferences", [{"InstanceType": "ml.p4d.24xlarge"}], r"ResourceConfig\.InstancePreferences: "),
    ],
)
def test_a_request_with_a_refused_option_fails_at_parse_time(member: str, value: Any, path: str) -> None:
    request = hetero_request("refused-job")
    request["ResourceConfig"][member] = value
    with pytest.raises(JobDefinitionError, match=path):
        _operator(request=request)
    del request["ResourceConfig"][member]
    _operator(request=request)  # the same request without it is fine


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"keep_alive_period_in_seconds": 600}, "keep_alive_period_in_seconds: cannot be used with instance_groups"),
        ({"training_plan": PLAN}, "training_plan: cannot be used with instance_groups"),
        ({"use_spot_instances": True, "checkpoint_s3_uri": "s3://b/c"}, "max_wait: is required with use_spot"),
    ],
)
def test_a_definition_with_a_refused_option_fails_at_parse_time(fields: dict[str, Any], path: str) -> None:
    with pytest.raises(JobDefinitionError, match=path):
        _operator(job={**BASE, **fields})


def test_a_valid_spot_request_passes_the_parse_time_check() -> None:
    request = hetero_request(
        "spot-job",
        EnableManagedSpotTraining=True,
        StoppingCondition={"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
        CheckpointConfig={"S3Uri": "s3://bucket/checkpoints"},
    )
    op = _operator(request=request)
    assert op.request["EnableManagedSpotTraining"] is True
