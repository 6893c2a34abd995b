"""Pure parts of the local endpoint's request rules: refused as the service refuses, in its wording."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_hetero.local.api.errors import ServiceError
from airflow_hetero.local.api.validators import validate_create


def _request(**changes: object) -> dict[str, object]:
    request: dict[str, object] = {
        "TrainingJobName": "rules-job",
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://bkt/out"},
        "ResourceConfig": {
            "VolumeSizeInGB": 30,
            "InstanceGroups": [
                {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
                {"InstanceGroupName": "dnn", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
            ],
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
    }
    request.update(changes)
    return request


def _refusal(request: dict[str, object]) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        validate_create(request)
    assert info.value.code == "ValidationException"
    return info.value


def test_constraint_messages_use_the_service_wording() -> None:
    err = _refusal(_request(TrainingJobName="bad_name", HyperParameters={"k": "v" * 2501}))
    assert err.message.startswith("2 validation errors detected: ")
    assert (
        "Value 'bad_name' at 'trainingJobName' failed to satisfy constraint: Member must satisfy regular "
        "expression pattern" in err.message
    )
    assert (
        "at 'hyperParameters.k' failed to satisfy constraint: Member must have length less than or equal "
        "to 2500" in err.message
    )


def test_role_arn_and_instance_type_enum() -> None:
    groups = [{"InstanceGroupName": "g", "InstanceType": "ml.bogus", "InstanceCount": 1}]
    err = _refusal(_request(RoleArn="not-an-arn", ResourceConfig={"VolumeSizeInGB": 1, "InstanceGroups": groups}))
    assert "at 'roleArn'" in err.message
    assert (
        "Value 'ml.bogus' at 'resourceConfig.instanceGroups.1.member.instanceType' failed to satisfy "
        "constraint: Member must satisfy enum value set: [" in err.message
    )


def test_sdk_requests_are_accepted_unless_the_service_refuses_them() -> None:
    cases = sorted(Path(__file__).parents[2].glob("sdk_cases/*.request.json"))
    if not cases:
        pytest.skip("no SDK request cases")
    for path in cases:
        request = json.loads(path.read_text())
        request.setdefault("TrainingJobName", "sdk-case")
        try:
            validate_create(request)
        except ServiceError as err:  # only the service's own rule or a documented local limitation
            assert err.message.startswith(
                (
                    "Some channels have assigned instance groups",
                    "The local endpoint does not support Pipe",
                    "KeepAlivePeriodInSeconds cannot be used with InstanceGroups",
                    "TrainingPlanArn cannot be used with InstanceGroups",
                )
            ), (path.name, err.message)


def test_a_checkpoint_uri_the_endpoint_cannot_copy_to_is_refused_at_create() -> None:
    """The model allows an https:// CheckpointConfig.S3Uri; the endpoint copies checkpoints only to s3:// (a job
    created with one failed later at its first restore, contrary to the documented refusal at create)."""
    https = {"S3Uri": "https://bkt.s3.amazonaws.com/ckpt"}
    err = _refusal(_request(CheckpointConfig=https))
    assert err.message == (
        "The local endpoint supports only s3:// URIs; CheckpointConfig.S3Uri is https://bkt.s3.amazonaws.com/ckpt"
    )
    validate_create(_request(CheckpointConfig={"S3Uri": "s3://bkt/ckpt", "LocalPath": "/opt/ml/checkpoints/x"}))
    err = _refusal(_request(CheckpointConfig={"S3Uri": "s3://bkt/ckpt", "LocalPath": "/opt/mlx/ckpt"}))
    assert err.message.startswith("CheckpointConfig.LocalPath /opt/mlx/ckpt is not inside /opt/ml: ")
