"""HeteroTrainingHook: SageMaker training-job calls through the Amazon provider's AwsBaseHook.

Building on ``AwsBaseHook`` means ``aws_conn_id``, ``region_name``, ``verify``, ``botocore_config``,
role assumption and ``endpoint_url`` from the connection extra behave exactly as in the Amazon
provider; the extra clients (CloudWatch Logs, CloudWatch, S3) come from the same session and
connection, so they reach the same region and endpoint. Calls used while polling retry transient
errors (throttling, 5xx, dropped connections) with bounded backoff; permanent errors surface.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import Any, Protocol

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

from airflow_hetero._retry import RetryPolicy, call_with_retry, error_code, is_transient
from airflow_hetero.hooks.outcome import JobState, classify


def is_not_found(exc: BaseException) -> bool:
    """True when the service says the training job does not exist."""
    code = error_code(exc)
    if code in ("ResourceNotFound", "ResourceNotFoundException"):
        return True
    if code != "ValidationException":
        return False
    message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", "")).lower()
    return "not found" in message or "could not find" in message


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key)."""
    if not uri.startswith("s3://"):
        raise ValueError(f"Not an s3:// URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket or not key:
        raise ValueError(f"S3 URI needs a bucket and a key: {uri!r}")
    return bucket, key


class AwsTaskArgs(Protocol):
    """The AWS arguments an operator, sensor or trigger of this package keeps (its hook's settings)."""

    aws_conn_id: str | None
    region_name: str | None
    verify: bool | str | None
    botocore_config: dict[str, Any] | None


class HeteroTrainingHook(AwsBaseHook):
    """Create, describe, find, stop SageMaker training jobs; clients for their logs and metrics.

    :param aws_conn_id: Airflow AWS connection (``endpoint_url`` in its extra is honoured).
    :param region_name: overrides the connection's region.
    :param retry_policy: backoff for transient errors while polling (tests use short delays).
    Other keyword arguments (``verify``, ``config``) go to ``AwsBaseHook``.
    """

    #: Backoff used when no ``retry_policy`` is passed.
    default_retry_policy = RetryPolicy()

    def __init__(
        self,
        aws_conn_id: str | None = AwsBaseHook.default_conn_name,
        region_name: str | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs["client_type"] = "sagemaker"
        super().__init__(aws_conn_id=aws_conn_id, region_name=region_name, **kwargs)
        self.retry_policy = retry_policy or self.default_retry_policy

    @classmethod
    def for_task(cls, task: AwsTaskArgs, **kwargs: Any) -> HeteroTrainingHook:
        """The hook for a task's ``aws_conn_id``, ``region_name``, ``verify`` and ``botocore_config``."""
        return cls(
            aws_conn_id=task.aws_conn_id,
            region_name=task.region_name,
            verify=task.verify,
            config=task.botocore_config,
            **kwargs,
        )

    # -- clients -----------------------------------------------------------------------------

    def service_client(self, service: str) -> Any:
        """A boto3 client for ``service`` with this hook's session, region, endpoint, config, verify."""
        session = self.get_session(region_name=self.region_name)
        return session.client(
            service_name=service,
            endpoint_url=self.conn_config.get_service_endpoint_url(service_name=service),
            config=self._get_config(),
            verify=self.verify,
        )

    @cached_property
    def logs_client(self) -> Any:
        """CloudWatch Logs client (same region, endpoint and credentials as the SageMaker client)."""
        return self.service_client("logs")

    @cached_property
    def cloudwatch_client(self) -> Any:
        """CloudWatch (metrics) client (same region, endpoint and credentials)."""
        return self.service_client("cloudwatch")

    @cached_property
    def s3_client(self) -> Any:
        """S3 client (same region, endpoint and credentials), used to upload a packaged source_dir."""
        return self.service_client("s3")

    # -- training jobs -------------------------------------------------------------------------

    def call(self, fn: Any, what: str, **kwargs: Any) -> Any:
        """Call a boto3 method, retrying transient errors per ``retry_policy``."""
        return call_with_retry(fn, policy=self.retry_policy, what=what, **kwargs)

    def create_training_job(self, request: dict[str, Any]) -> dict[str, Any]:
        """Submit ``request`` (CreateTrainingJob kwargs) and return the service's answer.

        A transient error leaves it unknown whether the job was created, so before sending again
        the job is looked up by name: it is never submitted twice.
        """
        name = request["TrainingJobName"]
        attempt = 1
        while True:
            try:
                return dict(self.conn.create_training_job(**request))
            except Exception as exc:
                if not is_transient(exc) or attempt >= self.retry_policy.max_attempts:
                    raise
                delay = self.retry_policy.delay(attempt)
                self.log.warning(
                    "CreateTrainingJob %s: transient error, checking for the job in %.1fs: %s", name, delay, exc
                )
                time.sleep(delay)  # throttling needs room; the lookup below is retried on its own too
                existing = self.find_training_job(name)
                if existing is not None:
                    return {"TrainingJobArn": existing["TrainingJobArn"]}
                attempt += 1

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

    @staticmethod
    def classify(describe: dict[str, Any]) -> JobState:
        """See :func:`airflow_hetero.hooks.outcome.classify`."""
        return classify(describe)
