"""HeteroTrainingHook: SageMaker training-job calls through the Amazon provider's AwsBaseHook.

Building on ``AwsBaseHook`` means ``aws_conn_id``, ``region_name``, ``verify``, ``botocore_config``,
role assumption and ``endpoint_url`` from the connection extra behave exactly as in the Amazon
provider; the extra clients (CloudWatch Logs, CloudWatch, S3) come from the same session and
connection, so they reach the same region and endpoint. Calls used while polling retry transient
errors (throttling, 5xx, dropped connections) with bounded backoff; permanent errors surface.

CreateTrainingJob is the one call that is never retried blindly: it goes through a client whose
botocore retries are off, and after any ambiguous outcome (timeout, reset, 5xx, ``ResourceInUse``)
the job is looked up by name and adopted when its identity matches the task's
(:mod:`airflow_hetero.job.identity`); the request is sent again only when no such job exists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_hetero._retry import error_code, is_not_found, is_transient
from airflow_hetero.hooks.aws_base import HeteroAwsHook
from airflow_hetero.job.identity import identity_in_describe, identity_in_tags

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_hetero.logs.tail import LogTailer
    from airflow_hetero.pricing.price_list import Price
    from airflow_hetero.pricing.settings import PriceSettings

log = logging.getLogger(__name__)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key)."""
    if not uri.startswith("s3://"):
        raise ValueError(f"Not an s3:// URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket or not key:
        raise ValueError(f"S3 URI needs a bucket and a key: {uri!r}")
    return bucket, key


class JobNameTakenError(Exception):
    """A job of this name exists but belongs to another task instance (or to nobody we know)."""

    def __init__(self, name: str, found: str | None) -> None:
        super().__init__(
            f"Training job name {name} is taken by a job with another identity ({found or 'no identity tags'})"
        )
        self.name = name
        self.found = found


class BucketUnusableError(Exception):
    """An S3 bucket to have before the create exists, but in another region or as another account's."""


def _check_bucket_region(bucket: str, answer: Mapping[str, Any], region: str) -> None:
    """Raise :class:`BucketUnusableError` when a HeadBucket answer (or error) puts ``bucket`` in another
    region than ``region`` (``BucketRegion``, else the ``x-amz-bucket-region`` header; absent: unknown, fine)."""
    headers = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    found = answer.get("BucketRegion") or headers.get("x-amz-bucket-region")
    if found and found != region:
        raise BucketUnusableError(f"bucket {bucket} is in region {found}, not in {region} (the connection's)")


class HeteroTrainingHook(HeteroAwsHook):
    """Create, describe, find, stop SageMaker training jobs; clients for their logs and metrics.

    :param aws_conn_id: Airflow AWS connection (``endpoint_url`` in its extra is honoured).
    :param region_name: overrides the connection's region.
    :param retry_policy: backoff for transient errors while polling (tests use short delays).
    Other keyword arguments (``verify``, ``config``) go to ``AwsBaseHook``.
    """

    aws_service = "sagemaker"

    # -- clients -----------------------------------------------------------------------------

    def service_client(self, service: str, region_name: str | None = None) -> Any:
        """A boto3 client for ``service`` with this hook's session, region (or ``region_name``),
        endpoint, config, verify."""
        session = self.get_session(region_name=region_name or self.region_name)
        return session.client(
            service_name=service,
            endpoint_url=self.conn_config.get_service_endpoint_url(service_name=service),
            config=self._get_config(),
            verify=self.verify,
        )

    @cached_property
    def create_client(self) -> Any:
        """SageMaker client for CreateTrainingJob only: botocore's own retries off (see module doc)."""
        return self.no_retry_client()

    @cached_property
    def logs_client(self) -> Any:
        """CloudWatch Logs client (same region, endpoint and credentials as the SageMaker client)."""
        return self.service_client("logs")

    @cached_property
    def cloudwatch_client(self) -> Any:
        """CloudWatch (metrics) client (same region, endpoint and credentials)."""
        return self.service_client("cloudwatch")

    @cached_property
    def pricing_client(self) -> Any:
        """Price List Query API client, same credentials and endpoint; its region is one that answers
        the API (:func:`airflow_hetero.pricing.price_list.pricing_api_region` of the job's region)."""
        from airflow_hetero.pricing.price_list import pricing_api_region

        return self.service_client("pricing", region_name=pricing_api_region(self.conn.meta.region_name))

    def training_prices(self, instance_types: list[str], settings: PriceSettings | None = None) -> dict[str, Price]:
        """On-demand training prices of ``instance_types`` in the job's region per ``settings`` (default:
        the Price List's, in USD): their overrides, else the disk cache, else the Price List Query API
        when they allow it (see :func:`airflow_hetero.pricing.lookup.training_prices`)."""
        from airflow_hetero.pricing.lookup import training_prices
        from airflow_hetero.pricing.settings import PriceSettings

        settings = settings or PriceSettings()
        client = self.pricing_client if settings.use_api else None
        return training_prices(instance_types, self.conn.meta.region_name, settings, client=client)

    @cached_property
    def s3_client(self) -> Any:
        """S3 client (same region, endpoint and credentials), used to upload a packaged source_dir."""
        return self.service_client("s3")

    def log_tailer(
        self, job_name: str, *, emit: Callable[[str], None], describe: dict[str, Any] | None = None
    ) -> LogTailer:
        """A follower of the job's log streams through this hook's Logs client, lines ``[group/host]``-prefixed.

        ``describe`` (when known) gives the job's groups and its instance count: streams are listed
        again until every host has one.
        """
        from airflow_hetero.job.resource_config import total_instances
        from airflow_hetero.logs.tail import LogsGroupResolver, LogTailer

        return LogTailer(
            self.logs_client,
            job_name,
            emit=emit,
            resolver=LogsGroupResolver(describe),
            expected_hosts=total_instances(describe),
            retry_policy=self.retry_policy,
        )

    # -- training jobs -------------------------------------------------------------------------

    def create_training_job(self, request: dict[str, Any], *, identity: str | None = None) -> dict[str, Any]:
        """Submit ``request`` (CreateTrainingJob kwargs) exactly once; return the service's answer.

        Each attempt is one HTTP request (botocore retries off). After an ambiguous outcome
        (throttling, 5xx, timeout, reset, ``ResourceInUse``) the job is looked up by name: a job
        whose identity digest equals ``identity`` (any job when ``identity`` is None) is adopted
        (answer has ``"Adopted": True``); a job with another identity raises
        :class:`JobNameTakenError`; only when no job exists is the request sent again, up to
        ``retry_policy.max_attempts`` attempts in all.
        """
        name = request["TrainingJobName"]
        attempt = 1
        while True:
            try:
                return dict(self.create_client.create_training_job(**request))
            except Exception as exc:
                if not (is_transient(exc) or error_code(exc) == "ResourceInUse"):
                    raise
                self.log.warning("CreateTrainingJob %s: outcome unknown (%s); looking the job up by name", name, exc)
                existing = self.find_training_job(name)
                if existing is not None:
                    found = self.identity_of(existing)
                    if identity is not None and found != identity:
                        raise JobNameTakenError(name, found) from exc
                    self.log.warning("Training job %s exists with this task's identity: adopting it", name)
                    return {"TrainingJobArn": existing["TrainingJobArn"], "Adopted": True}
                if attempt >= self.retry_policy.max_attempts:
                    raise
                delay = self.retry_policy.delay(attempt)
                self.log.warning(
                    "Training job %s does not exist: sending CreateTrainingJob again in %.1fs", name, delay
                )
                time.sleep(delay)
                attempt += 1

    def identity_of(self, describe: dict[str, Any]) -> str | None:
        """The identity digest of a described job: its Environment, else its tags (ListTags)."""
        found = identity_in_describe(describe)
        if found is not None or not describe.get("TrainingJobArn"):
            return found
        arn = describe["TrainingJobArn"]
        try:
            answer = self.call(self.conn.list_tags, f"ListTags {arn}", ResourceArn=arn)
        except Exception as exc:  # unknown identity counts as another one: never re-attached
            self.log.warning("Could not read the tags of %s: %s", arn, exc)
            return None
        return identity_in_tags(list(answer.get("Tags") or ()))

    def describe_training_job(self, name: str) -> dict[str, Any]:
        """DescribeTrainingJob, with transient errors retried."""
        return dict(self.call(self.conn.describe_training_job, f"DescribeTrainingJob {name}", TrainingJobName=name))

    def find_training_job(self, name: str) -> dict[str, Any] | None:
        """DescribeTrainingJob, or None when no job has that name."""
        try:
            return self.describe_training_job(name)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    def stop_training_job(self, name: str) -> bool:
        """Ask SageMaker to stop the job; False when it was already finished or is unknown."""
        try:
            self.call(self.conn.stop_training_job, f"StopTrainingJob {name}", TrainingJobName=name)
        except Exception as exc:
            if error_code(exc) == "ValidationException":
                self.log.info("Training job %s not stopped: %s", name, exc)
                return False
            raise
        self.log.info("Requested stop of training job %s", name)
        return True

    def upload_bytes(self, data: bytes, s3_uri: str, extra_args: dict[str, Any] | None = None) -> None:
        """Put ``data`` at ``s3_uri`` (a packaged source_dir); ``extra_args`` go to PutObject (SSE)."""
        bucket, key = split_s3_uri(s3_uri)
        self.call(
            self.s3_client.put_object,
            f"PutObject {s3_uri}",
            Bucket=bucket,
            Key=key,
            Body=data,
            **(extra_args or {}),
        )

    def role_arn(self, role_name: str) -> str:
        """The ARN of the IAM role named ``role_name`` (IAM GetRole), as the Amazon provider expands a
        role name given as ``RoleArn``."""
        iam = self.service_client("iam")
        answer = self.call(iam.get_role, f"GetRole {role_name}", RoleName=role_name)
        return str(answer["Role"]["Arn"])

    def ensure_bucket(self, bucket: str) -> bool:
        """Have S3 bucket ``bucket`` in the hook's region: True when it was created, False when it exists
        already and this account can use it.

        HeadBucket first, as CreateBucket cannot tell: in us-east-1 it answers 200 for a bucket this
        account has already, in any region. A bucket in another region, or one HeadBucket refuses (403:
        another account's), raises :class:`BucketUnusableError`.
        """
        region = self.s3_client.meta.region_name
        answer = self._head_bucket(bucket, region)
        if answer is None:
            if self._create_bucket(bucket, region):
                return True
            answer = self._head_bucket(bucket, region) or {}  # created since HeadBucket, by this account
        _check_bucket_region(bucket, answer, region)
        return False

    def _head_bucket(self, bucket: str, region: str) -> dict[str, Any] | None:
        """HeadBucket's answer; None when there is no such bucket."""
        try:
            return dict(self.call(self.s3_client.head_bucket, f"HeadBucket {bucket}", Bucket=bucket))
        except Exception as err:
            code = error_code(err)
            if code in ("404", "NoSuchBucket", "NotFound"):
                return None
            if code == "403":
                raise BucketUnusableError(
                    f"bucket {bucket} exists but is not this account's (HeadBucket: 403 Forbidden)"
                ) from err
            _check_bucket_region(bucket, getattr(err, "response", {}), region)  # a redirect (301) names it
            raise

    def _create_bucket(self, bucket: str, region: str) -> bool:
        """CreateBucket in ``region``; False when this account has it already."""
        where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        try:
            self.call(self.s3_client.create_bucket, f"CreateBucket {bucket}", Bucket=bucket, **where)
        except Exception as err:
            if error_code(err) == "BucketAlreadyOwnedByYou":
                return False
            if error_code(err) == "BucketAlreadyExists":
                raise BucketUnusableError(f"bucket {bucket} is another account's (CreateBucket: {err})") from err
            raise
        return True

    def upload_path(self, path: Path, s3_uri: str, *, tar: bool) -> int:
        """Upload local file ``path`` to ``s3_uri``, or with ``tar`` a ``.tar.gz`` of it (a folder's
        entries at its root, as the Amazon provider's ``S3Upload`` does); the bytes sent."""
        import tempfile

        from airflow_hetero.definition.builder.source import write_path_tar_gz

        bucket, key = split_s3_uri(s3_uri)
        with tempfile.TemporaryFile() if tar else path.open("rb") as data:  # never held in memory
            if tar:
                write_path_tar_gz(path, data)
            size = data.seek(0, 2)

            def send() -> None:
                data.seek(0)  # each attempt sends it all
                self.s3_client.upload_fileobj(data, bucket, key)

            self.call(send, f"upload {path} to {s3_uri}")
        return size
