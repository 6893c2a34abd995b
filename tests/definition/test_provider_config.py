"""The Amazon provider's S3Operations and role names in a request-mode config: read, checked by path."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_hetero.definition.raw_request.provider_config import ProviderSteps, S3Upload, take_provider_steps


def take(config: dict[str, Any]) -> tuple[ProviderSteps, dict[str, str], dict[str, Any]]:
    rest = dict(config)
    steps, problems = take_provider_steps(rest)
    return steps, {p.loc: p.msg for p in problems}, rest


def test_every_operation_the_provider_runs_is_kept_in_order() -> None:
    steps, found, rest = take(
        {
            "RoleArn": "arn:aws:iam::123456789012:role/r",
            "S3Operations": {
                "S3CreateBucket": [{"Bucket": "a-bucket"}, {"Bucket": "b.bucket"}],
                "S3Upload": [
                    {"Path": "/abs/model", "Bucket": "a-bucket", "Key": "m/model.tar.gz", "Tar": True},
                    {"Path": "rel.csv", "Bucket": "b.bucket", "Key": "d/rel.csv"},  # Tar left out: a plain upload
                ],
            },
        }
    )
    assert found == {}
    assert steps.buckets == ("a-bucket", "b.bucket")
    assert steps.uploads == (
        S3Upload("/abs/model", "a-bucket", "m/model.tar.gz", True, "S3Operations.S3Upload[0]"),
        S3Upload("rel.csv", "b.bucket", "d/rel.csv", False, "S3Operations.S3Upload[1]"),
    )
    assert steps.role_name is None and rest == {"RoleArn": "arn:aws:iam::123456789012:role/r"}


def test_each_problem_is_named_by_its_path() -> None:
    _, found, _ = take(
        {
            "S3Operations": {
                "S3CreateBucket": [{"Bucket": "Bad_Bucket"}, "x", {}],
                "S3Upload": [
                    {"Path": "", "Bucket": "ok-bucket", "Key": "k", "Tar": "yes"},
                    {"Bucket": "ok-bucket", "Key": "k", "Extra": 1},
                ],
                "S3Delete": [],
            }
        }
    )
    assert found == {
        "S3Operations.S3CreateBucket[0].Bucket": (
            "'Bad_Bucket' is not a valid S3 bucket name (3-63 lowercase letters, digits, dots and hyphens)"
        ),
        "S3Operations.S3CreateBucket[1]": "must be a mapping with Bucket",
        "S3Operations.S3CreateBucket[2].Bucket": "field required",
        "S3Operations.S3Upload[0].Tar": "must be a boolean",
        "S3Operations.S3Upload[0].Path": "must not be empty",
        "S3Operations.S3Upload[1].Extra": "unknown field (allowed: Path, Bucket, Key, Tar)",
        "S3Operations.S3Upload[1].Path": "field required",
        "S3Operations.S3Delete": "unknown field (allowed: S3CreateBucket, S3Upload)",
    }


@pytest.mark.parametrize("operations", [[], "upload", {"S3Upload": {"Path": "x"}}])
def test_a_misshapen_s3_operations_is_one_problem(operations: Any) -> None:
    steps, found, _ = take({"S3Operations": operations})
    assert not steps
    assert len(found) == 1 and next(iter(found)).startswith("S3Operations")


@pytest.mark.parametrize(
    ("role", "name"),
    [
        ("SageMakerRole", "SageMakerRole"),
        ("svc+role=a,b.c@d-e_f", "svc+role=a,b.c@d-e_f"),
        ("arn:aws:iam::123456789012:role/SageMakerRole", None),  # an ARN: kept as it is
        ("arn:aws:iam::123456789012:role/path/to/Role", None),
        ("{{ var.value.role }}", None),  # not rendered yet: checked when it is
    ],
)
def test_a_role_name_is_kept_for_expansion_and_an_arn_stands_in(role: str, name: str | None) -> None:
    steps, found, rest = take({"RoleArn": role})
    assert found == {} and steps.role_name == name
    assert rest["RoleArn"] == (f"arn:aws:iam::000000000000:role/{name}" if name else role)


def test_neither_a_name_nor_an_arn_says_both_forms() -> None:
    steps, found, _ = take({"RoleArn": "my role!"})
    assert steps.role_name is None
    assert found == {
        "RoleArn": "'my role!' is neither an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>) nor a "
        "role name (1-64 letters, digits and +=,.@_-; expanded to its ARN when the task runs)"
    }
