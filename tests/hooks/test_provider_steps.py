"""The hook's part in the Amazon provider's config steps: role names, buckets, uploads (moto)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from airflow_hetero._retry import RetryPolicy
from airflow_hetero.hooks.training import HeteroTrainingHook

FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.002)
TRUST = '{"Version": "2012-10-17", "Statement": []}'


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeteroTrainingHook]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield HeteroTrainingHook(aws_conn_id=None, region_name="us-east-1", retry_policy=FAST)


def test_a_role_name_expands_to_its_arn_through_iam(hook: HeteroTrainingHook) -> None:
    made = boto3.client("iam").create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=TRUST, Path="/svc/")
    assert hook.role_arn("SageMakerRole") == made["Role"]["Arn"]
    assert made["Role"]["Arn"].endswith(":role/svc/SageMakerRole")
    with pytest.raises(ClientError) as info:
        hook.role_arn("NoSuchRole")
    assert info.value.response["Error"]["Code"] == "NoSuchEntity"


def test_a_bucket_is_created_once_and_found_the_second_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws():
        hook = HeteroTrainingHook(aws_conn_id=None, region_name="eu-west-1", retry_policy=FAST)
        assert hook.ensure_bucket("staging-eu") is True
        assert hook.ensure_bucket("staging-eu") is False  # a retry of the task: already this account's
        location = boto3.client("s3", region_name="eu-west-1").get_bucket_location(Bucket="staging-eu")
        assert location["LocationConstraint"] == "eu-west-1"


def test_uploads_a_file_as_it_is_and_a_folder_as_a_tar_of_its_entries(hook: HeteroTrainingHook, tmp_path: Path) -> None:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="bucket-b")
    (tmp_path / "data.csv").write_bytes(b"1,2,3\n")
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "weights.bin").write_bytes(b"\x00" * 1000)
    (model / "sub" / "config.json").write_text("{}")
    assert hook.upload_path(tmp_path / "data.csv", "s3://bucket-b/in/data.csv", tar=False) == 6
    assert s3.get_object(Bucket="bucket-b", Key="in/data.csv")["Body"].read() == b"1,2,3\n"
    size = hook.upload_path(model, "s3://bucket-b/in/model.tar.gz", tar=True)
    body = s3.get_object(Bucket="bucket-b", Key="in/model.tar.gz")["Body"].read()
    assert len(body) == size
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:  # the folder's entries at the root, as the provider's
        assert sorted(tar.getnames()) == ["sub", "sub/config.json", "weights.bin"]
    hook.upload_path(tmp_path / "data.csv", "s3://bucket-b/one.tar.gz", tar=True)
    with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket="bucket-b", Key="one.tar.gz")["Body"].read())) as tar:
        assert tar.getnames() == ["data.csv"]


def test_a_throttled_upload_is_sent_again_whole(hook: HeteroTrainingHook, tmp_path: Path) -> None:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="bucket-b")
    (tmp_path / "big.bin").write_bytes(bytes(range(256)) * 4096)
    real = hook.s3_client.upload_fileobj
    attempts: list[int] = []

    def flaky(data: Any, bucket: str, key: str) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            data.read(100_000)  # part of the body went before the answer was lost
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "x"}}, "PutObject")
        real(data, bucket, key)

    hook.s3_client.upload_fileobj = flaky
    assert hook.upload_path(tmp_path / "big.bin", "s3://bucket-b/big.bin", tar=False) == 256 * 4096
    assert len(attempts) == 2
    assert s3.get_object(Bucket="bucket-b", Key="big.bin")["Body"].read() == (tmp_path / "big.bin").read_bytes()
