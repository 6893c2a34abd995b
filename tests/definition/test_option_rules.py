"""Managed spot, warm pools, training plans and instance preferences: the same rules in both forms.

A definition names its fields (``max_wait``), a request its members (``StoppingCondition.MaxWaitTimeInSeconds``);
the service's sentence is quoted in both (``sagemaker_facts``). The definition's rendered request carries the
SDK v2 members (the recorded SDK cases j and k pin their exact shape: test_sdk_equivalence.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.definition import JobDefinitionError, load_job
from airflow_hetero.definition.builder.definition_request import build_training_request
from airflow_hetero.definition.raw_request.service_rules import option_problems
from airflow_hetero.definition.raw_request.training_request import load_request

BASE = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]
V3_REQUEST = json.loads(
    (Path(__file__).parents[1] / "data" / "sdk_v3" / "two_groups_torchrun.request.json").read_text()
)
SPOT = {"use_spot_instances": True, "max_wait": 172800, "checkpoint_s3_uri": "s3://my-bucket/checkpoints"}
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/weekly-p4d"


def _request(**changes: Any) -> dict[str, Any]:
    """The SDK v3 two-group request with ``changes`` merged in (one level deep)."""
    request = copy.deepcopy(V3_REQUEST)
    for member, value in changes.items():
        if isinstance(value, dict) and isinstance(request.get(member), dict):
            request[member].update(value)
        else:
            request[member] = value
    return request


def _request_problems(request: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(JobDefinitionError) as err:
        load_request(request)
    return [(p.loc, p.msg) for p in err.value.problems]


def test_a_spot_definition_renders_the_sdk_members() -> None:
    job = load_job({**BASE, **SPOT, "max_run": 7200, "checkpoint_local_path": "/opt/ml/checkpoints"})
    request = build_training_request(job, job_name="spot-job-1", region="us-east-1")
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 172800}
    assert request["CheckpointConfig"] == {"S3Uri": "s3://my-bucket/checkpoints", "LocalPath": "/opt/ml/checkpoints"}
    assert option_problems(request) == []  # what a definition renders, request mode accepts
    assert load_request({k: v for k, v in request.items() if k != "TrainingJobName"}).request["CheckpointConfig"]


def test_max_wait_equal_to_max_run_is_enough() -> None:
    job = load_job({**BASE, **SPOT, "max_run": 7200, "max_wait": 7200})
    assert (
        build_training_request(job, job_name="j", region="us-east-1")["StoppingCondition"]["MaxWaitTimeInSeconds"]
        == 7200
    )


def test_on_demand_definitions_send_no_spot_members() -> None:
    request = build_training_request(load_job(BASE), job_name="j", region="us-east-1")
    assert not {"EnableManagedSpotTraining", "CheckpointConfig"} & set(request)
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": facts.DEFAULT_MAX_RUNTIME_SECONDS}


def test_a_spot_request_passes_through() -> None:
    spot = _request(
        EnableManagedSpotTraining=True,
        StoppingCondition={"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
        CheckpointConfig={"S3Uri": "s3://my-bucket/checkpoints"},
    )
    checked = load_request(spot)
    built = checked.build(job_name="spot-request-1")
    assert built["EnableManagedSpotTraining"] is True
    assert built["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert built["CheckpointConfig"] == {"S3Uri": "s3://my-bucket/checkpoints"}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"EnableManagedSpotTraining": True, "CheckpointConfig": {"S3Uri": "s3://b/c"}},
            [
                (
                    "StoppingCondition.MaxWaitTimeInSeconds",
                    "MaxWaitTimeInSeconds is required with EnableManagedSpotTraining: true "
                    f"(SageMaker: '{facts.SPOT_NEEDS_MAX_WAIT}')",
                )
            ],
        ),
        (
            {
                "EnableManagedSpotTraining": True,
                "StoppingCondition": {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 3600},
                "CheckpointConfig": {"S3Uri": "s3://b/c"},
            },
            [
                (
                    "StoppingCondition.MaxWaitTimeInSeconds",
                    "MaxWaitTimeInSeconds must be at least MaxRuntimeInSeconds "
                    f"(7200), since it includes the run (got 3600); SageMaker: '{facts.MAX_WAIT_AT_LEAST_RUNTIME}'",
                )
            ],
        ),
        (
            {"StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}},
            [
                (
                    "StoppingCondition.MaxWaitTimeInSeconds",
                    "MaxWaitTimeInSeconds is only allowed with EnableManagedSpotTraining: true "
                    f"(SageMaker: '{facts.MAX_WAIT_ONLY_WITH_SPOT}')",
                )
            ],
        ),
        (
            {"EnableManagedSpotTraining": True, "StoppingCondition": {"MaxWaitTimeInSeconds": 90000}},
            [
                (
                    "CheckpointConfig.S3Uri",
                    "S3Uri is required with EnableManagedSpotTraining: true: an interrupted spot job "
                    "restarts every host and resumes only from what it wrote to its checkpoint folder "
                    f"(airflow-hetero's rule; SageMaker: '{facts.SPOT_CHECKPOINT_ADVICE}')",
                )
            ],
        ),
        (
            {"ResourceConfig": {"KeepAlivePeriodInSeconds": 600}},
            [
                (
                    "ResourceConfig.KeepAlivePeriodInSeconds",
                    "KeepAlivePeriodInSeconds cannot be used with InstanceGroups "
                    f"(SageMaker guide, warm pools: '{facts.WARM_POOL_NOT_HETERO}')",
                )
            ],
        ),
        (
            {"ResourceConfig": {"TrainingPlanArn": PLAN}},
            [
                (
                    "ResourceConfig.TrainingPlanArn",
                    "TrainingPlanArn cannot be used with InstanceGroups: "
                    f"{facts.TRAINING_PLAN_NOT_HETERO} (botocore: '{facts.TRAINING_PLAN_DOC}')",
                )
            ],
        ),
        (
            {"ResourceConfig": {"InstancePreferences": [{"InstanceType": "ml.p4d.24xlarge"}]}},
            [
                (
                    "ResourceConfig.InstancePreferences",
                    "InstancePreferences cannot be used with InstanceGroups "
                    f"(SageMaker: '{facts.INSTANCE_PREFERENCES_EXCLUSIVE}')",
                )
            ],
        ),
    ],
    ids=["spot-no-wait", "wait-below-run", "wait-without-spot", "spot-no-checkpoint", "warm-pool", "plan", "prefs"],
)
def test_request_refusals_name_the_member_and_quote_the_service(
    changes: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert _request_problems(_request(**changes)) == expected


def test_a_homogeneous_request_may_keep_a_warm_pool_and_use_a_plan() -> None:
    request = _request()
    request["ResourceConfig"] = {
        "InstanceType": "ml.p4d.24xlarge",
        "InstanceCount": 1,
        "VolumeSizeInGB": 30,
        "KeepAlivePeriodInSeconds": 600,
        "TrainingPlanArn": PLAN,
    }
    for channel in request["InputDataConfig"]:
        channel["DataSource"]["S3DataSource"].pop("InstanceGroupNames", None)
    request["HyperParameters"].pop("sagemaker_distribution_instance_groups", None)
    assert load_request(request).request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600
    spot = {**request, "EnableManagedSpotTraining": True, "CheckpointConfig": {"S3Uri": "s3://b/c"}}
    spot["StoppingCondition"] = {"MaxRuntimeInSeconds": 60, "MaxWaitTimeInSeconds": 120}
    assert _request_problems(spot) == [
        (
            "ResourceConfig.KeepAlivePeriodInSeconds",
            "KeepAlivePeriodInSeconds cannot be used with EnableManagedSpotTraining: true "
            f"(SageMaker guide, warm pools: {facts.WARM_POOL_NOT_SPOT})",
        )
    ]


def test_a_homogeneous_definition_renders_its_warm_pool_and_plan() -> None:
    homogeneous = {k: v for k, v in BASE.items() if k not in ("instance_groups", "distribution", "inputs")}
    job = load_job({**homogeneous, "instance_type": "ml.p4d.24xlarge", "instance_count": 1,
                    "keep_alive_period_in_seconds": 600, "training_plan": PLAN})  # fmt: skip
    resource = build_training_request(job, job_name="j", region="us-east-1")["ResourceConfig"]
    assert resource["KeepAlivePeriodInSeconds"] == 600 and resource["TrainingPlanArn"] == PLAN


def test_every_problem_of_a_definition_at_once() -> None:
    with pytest.raises(JobDefinitionError) as err:
        load_job({**BASE, "use_spot_instances": True, "keep_alive_period_in_seconds": 60, "training_plan": PLAN,
                  "instance_preferences": [{"InstanceType": "ml.p4d.24xlarge"}]})  # fmt: skip
    assert [p.loc for p in err.value.problems] == [
        "max_wait",
        "keep_alive_period_in_seconds",
        "training_plan",
        "instance_preferences",
        "checkpoint_s3_uri",
    ]
