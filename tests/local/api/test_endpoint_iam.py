"""IAM's SimulatePrincipalPolicy on the endpoint (the role check of SDK v3's ModelTrainer): every action
allowed, in IAM's XML shape, requests checked against botocore's iam model; other IAM actions stay moto's."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.api import iam as iam_api
from airflow_hetero.local.api.constraints import service_model

pytestmark = pytest.mark.slow
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture(scope="module")
def iam(endpoint: LocalEndpoint) -> Any:
    return endpoint.client("iam")


def test_every_action_is_allowed_per_resource(iam: Any) -> None:
    answer = iam.simulate_principal_policy(
        PolicySourceArn=ROLE,
        ActionNames=["s3:PutObject", "sagemaker:CreateTrainingJob"],
        ResourceArns=["arn:aws:s3:::b/*", "arn:aws:s3:::c/*"],
    )
    pairs = [(r["EvalActionName"], r["EvalResourceName"], r["EvalDecision"]) for r in answer["EvaluationResults"]]
    assert pairs == [
        ("s3:PutObject", "arn:aws:s3:::b/*", "allowed"),
        ("s3:PutObject", "arn:aws:s3:::c/*", "allowed"),
        ("sagemaker:CreateTrainingJob", "arn:aws:s3:::b/*", "allowed"),
        ("sagemaker:CreateTrainingJob", "arn:aws:s3:::c/*", "allowed"),
    ]
    assert answer["IsTruncated"] is False and "Marker" not in answer
    output = service_model("iam").operation_model("SimulatePrincipalPolicy").output_shape
    parsed = {k: v for k, v in answer.items() if k != "ResponseMetadata"}
    assert not ParamValidator().validate(parsed, output).has_errors()
    plain = iam.simulate_principal_policy(PolicySourceArn=ROLE, ActionNames=["ec2:DescribeVpcs"])
    assert plain["EvaluationResults"][0]["EvalResourceName"] == "*"


def test_pages_follow_max_items_and_marker(iam: Any) -> None:
    actions = [f"s3:Action{i}" for i in range(5)]
    first = iam.simulate_principal_policy(PolicySourceArn=ROLE, ActionNames=actions, MaxItems=2)
    assert len(first["EvaluationResults"]) == 2 and first["IsTruncated"] is True and first["Marker"] == "2"
    pages = iam.get_paginator("simulate_principal_policy").paginate(
        PolicySourceArn=ROLE, ActionNames=actions, PaginationConfig={"PageSize": 2}
    )
    assert [r["EvalActionName"] for page in pages for r in page["EvaluationResults"]] == actions


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"PolicySourceArn": "arn:short", "ActionNames": ["s3:GetObject"]},
            "1 validation error detected: Value 'arn:short' at 'policySourceArn' failed to satisfy constraint: "
            "Member must have length greater than or equal to 20",
        ),
        (
            {"PolicySourceArn": ROLE, "ActionNames": ["s3:GetObject"], "MaxItems": 0},
            "Value '0' at 'maxItems' failed to satisfy constraint: Member must have value greater than or equal to 1",
        ),
    ],
)
def test_invalid_requests_are_refused_as_iam_refuses_them(
    endpoint: LocalEndpoint, kwargs: dict[str, Any], message: str
) -> None:
    # botocore checks minimums itself; the endpoint must refuse them too when a client does not
    unchecked = boto3.client(
        "iam",
        endpoint_url=endpoint.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(parameter_validation=False),
    )
    with pytest.raises(ClientError) as caught:
        unchecked.simulate_principal_policy(**kwargs)
    assert caught.value.response["Error"]["Code"] == "ValidationError"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert message in caught.value.response["Error"]["Message"]


def test_the_request_decoder_reads_the_query_protocol_and_checks_types() -> None:
    form = {
        "Action": "SimulatePrincipalPolicy",
        "PolicySourceArn": ROLE,
        "ActionNames.member.1": "a:b",
        "ActionNames.member.2": "c:d",
        "ContextEntries.member.1.ContextKeyName": "aws:x",
        "ContextEntries.member.1.ContextKeyValues.member.1": "1",
        "MaxItems": "7",
    }
    params = iam_api.decode_request("SimulatePrincipalPolicy", form)
    assert params == {
        "PolicySourceArn": ROLE,
        "ActionNames": ["a:b", "c:d"],
        "MaxItems": 7,
        "ContextEntries": [{"ContextKeyName": "aws:x", "ContextKeyValues": ["1"]}],
    }
    with pytest.raises(iam_api.ServiceError, match="Value null at 'actionNames' failed to satisfy constraint"):
        iam_api.decode_request("SimulatePrincipalPolicy", {"PolicySourceArn": ROLE})
    with pytest.raises(iam_api.ServiceError, match="Invalid type for parameter MaxItems"):
        iam_api.decode_request("SimulatePrincipalPolicy", {**form, "MaxItems": "many"})


def test_other_iam_actions_stay_motos(iam: Any) -> None:
    iam.create_role(RoleName="iam-test-role", AssumeRolePolicyDocument="{}")
    assert iam.get_role(RoleName="iam-test-role")["Role"]["Arn"].endswith(":role/iam-test-role")
