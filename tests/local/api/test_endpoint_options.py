"""The offline endpoint refuses at CreateTrainingJob what SageMaker refuses: spot without a MaxWait or with one below
MaxRuntime, a MaxWait without spot, and warm pools, training plans and instance preferences with instance groups.
The rules are the definitions' and request mode's (definition/rules/option_rules.py); nothing is recorded."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.local_jobkit import put_source, request, unique, wait

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.local.api.errors import ServiceError
from airflow_hetero.local.api.validators import validate_create

SOURCE = "s3://local-endpoint-tests/code/sourcedir.tar.gz"
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/weekly-p4d"

REFUSALS = [
    (
        {"EnableManagedSpotTraining": True},
        "MaxWaitTimeInSeconds is required with EnableManagedSpotTraining: true "
        f"(SageMaker: '{facts.SPOT_NEEDS_MAX_WAIT}')",
    ),
    (
        {
            "EnableManagedSpotTraining": True,
            "StoppingCondition": {"MaxRuntimeInSeconds": 60, "MaxWaitTimeInSeconds": 30},
        },
        "MaxWaitTimeInSeconds must be at least MaxRuntimeInSeconds (60), since it "
        f"includes the run (got 30); SageMaker: '{facts.MAX_WAIT_AT_LEAST_RUNTIME}'",
    ),
    (
        {"StoppingCondition": {"MaxRuntimeInSeconds": 60, "MaxWaitTimeInSeconds": 120}},
        "MaxWaitTimeInSeconds is only allowed with EnableManagedSpotTraining: true "
        f"(SageMaker: '{facts.MAX_WAIT_ONLY_WITH_SPOT}')",
    ),
    (
        {"ResourceConfig": {"KeepAlivePeriodInSeconds": 600}},
        "KeepAlivePeriodInSeconds cannot be used with InstanceGroups "
        f"(SageMaker guide, warm pools: '{facts.WARM_POOL_NOT_HETERO}')",
    ),
    (
        {"ResourceConfig": {"TrainingPlanArn": PLAN}},
        "TrainingPlanArn cannot be used with InstanceGroups: "
        f"{facts.TRAINING_PLAN_NOT_HETERO} (botocore: '{facts.TRAINING_PLAN_DOC}')",
    ),
    (
        {"ResourceConfig": {"InstancePreferences": [{"InstanceType": "ml.p4d.24xlarge"}]}},
        f"InstancePreferences cannot be used with InstanceGroups (SageMaker: '{facts.INSTANCE_PREFERENCES_EXCLUSIVE}')",
    ),
]
IDS = ["spot-no-wait", "wait-below-run", "wait-without-spot", "warm-pool", "plan", "preferences"]


def _body(name: str, changes: dict[str, Any], source: str = SOURCE) -> dict[str, Any]:
    body = request(name, source)
    for member, value in copy.deepcopy(changes).items():
        if isinstance(value, dict) and isinstance(body.get(member), dict):
            body[member].update(value)
        else:
            body[member] = value
    return body


@pytest.mark.parametrize(("changes", "message"), REFUSALS, ids=IDS)
def test_validate_create_refuses_as_the_service(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ServiceError) as err:
        validate_create(_body("options-job", changes))
    assert (err.value.code, err.value.message) == ("ValidationException", message)


def test_spot_without_a_checkpoint_is_the_services_to_accept() -> None:
    """The checkpoint location is airflow-hetero's own rule, not SageMaker's: the endpoint accepts the request."""
    spot = {
        "EnableManagedSpotTraining": True,
        "StoppingCondition": {"MaxRuntimeInSeconds": 60, "MaxWaitTimeInSeconds": 60},
    }
    validate_create(_body("spot-job", spot))


@pytest.mark.slow
def test_refused_over_http_with_nothing_recorded(sm: Any, s3: Any) -> None:
    source = put_source(s3, "options-tests", "print('ok')\n")
    for changes, message in REFUSALS:
        body = _body(unique("refused"), changes, source)
        with pytest.raises(ClientError) as err:
            sm.create_training_job(**body)
        error = err.value.response["Error"]
        assert (error["Code"], error["Message"]) == ("ValidationException", message)
        with pytest.raises(ClientError):
            sm.describe_training_job(TrainingJobName=body["TrainingJobName"])
    accepted = request(unique("spot"), source)  # the same job with spot as the service takes it runs
    accepted["EnableManagedSpotTraining"] = True
    accepted["StoppingCondition"] = {"MaxRuntimeInSeconds": 60, "MaxWaitTimeInSeconds": 120}
    sm.create_training_job(**accepted)
    done = wait(sm, accepted["TrainingJobName"], timeout=180.0)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    assert done["EnableManagedSpotTraining"] is True
    assert done["StoppingCondition"]["MaxWaitTimeInSeconds"] == 120
