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
from botocore.stub import Stubber
from moto import mock_aws

from airflow_hetero._retry import RetryPolicy
from airflow_hetero.hooks.training import BucketUnusableError, HeteroTrainingHook

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


def test_in_us_east_1_a_bucket_this_account_has_already_is_found_not_created(hook: HeteroTrainingHook) -> None:
    """CreateBucket answers 200 there for a bucket this account has: HeadBucket tells it apart."""
    assert hook.ensure_bucket("staging-us") is True
    assert hook.ensure_bucket("staging-us") is False


@pytest.mark.parametrize(("ours", "bucket_region"), [("us-east-1", "eu-west-1"), ("eu-west-1", "us-east-1")])
def test_a_bucket_in_another_region_is_refused_naming_both(
    ours: str, bucket_region: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", ours)
    with mock_aws():
        location = {"LocationConstraint": bucket_region}
        where = {} if bucket_region == "us-east-1" else {"CreateBucketConfiguration": location}
        boto3.client("s3", region_name=bucket_region).create_bucket(Bucket="elsewhere", **where)
        hook = HeteroTrainingHook(aws_conn_id=None, region_name=ours, retry_policy=FAST)
        with pytest.raises(BucketUnusableError, match=f"bucket elsewhere is in region {bucket_region}, not in {ours}"):
            hook.ensure_bucket("elsewhere")


def test_a_bucket_of_another_account_is_refused(hook: HeteroTrainingHook) -> None:
    """HeadBucket's 403 (another account's bucket: moto does not enforce that, S3 does), or CreateBucket's
    BucketAlreadyExists when another account took the name after HeadBucket found none."""
    with Stubber(hook.s3_client) as s3:
        s3.add_client_error("head_bucket", "403", "Forbidden", 403, expected_params={"Bucket": "theirs"})
        with pytest.raises(BucketUnusableError, match="bucket theirs exists but is not this account's"):
            hook.ensure_bucket("theirs")
        s3.add_client_error("head_bucket", "404", "Not Found", 404)
        s3.add_client_error("create_bucket", "BucketAlreadyExists", "The requested bucket name is not available", 409)
        with pytest.raises(BucketUnusableError, match="bucket theirs is another account's"):
            hook.ensure_bucket("theirs")


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
