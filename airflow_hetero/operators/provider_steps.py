"""What runs before the create: a request's ``S3Operations`` and the expansion of a role name (given as
a request's ``RoleArn`` or a definition's ``role``), read and checked by
:mod:`airflow_hetero.definition.raw_request.provider_config`, as the Amazon provider and the SageMaker SDK do them.

Run only when a new job is submitted, once per try (the next candidate name after a name race reuses
them): a retry that re-attaches to its running job uploads nothing. The role name is expanded when the
request is built (its ``RoleArn`` is the ARN); the buckets and uploads run after the request passed every
pre-submit policy, just before the code upload and the create, so a budget that refuses the request has
written nothing to S3 (operators/submission.py).
A service error a retry would meet again (an unknown role, AccessDenied, NoSuchBucket, a bucket in
another region or of another account) or a local path that is not there fails the task without
retries, naming the config's field; throttling, 5xx and dropped connections are the task's to retry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from airflow_hetero._compat import AirflowFailException
from airflow_hetero._retry import error_code, is_transient
from airflow_hetero.definition.raw_request.provider_config import S3_OPERATIONS

if TYPE_CHECKING:
    from airflow_hetero.definition.raw_request.provider_config import ProviderSteps, S3Upload
    from airflow_hetero.hooks.training import HeteroTrainingHook


class _TaskLog(Protocol):
    """The task's logger: a logging.Logger on Airflow 2.11, a structlog logger on Airflow 3."""

    def info(self, msg: Any, /, *args: Any) -> Any: ...


def expand_role(hook: HeteroTrainingHook, steps: ProviderSteps, log: _TaskLog) -> str | None:
    """The role's ARN when a role name was given (IAM GetRole: reads only); None without one."""
    if steps.role_name is None:
        return None
    unknown = f"{steps.role_field}: IAM has no role named '{steps.role_name}'"
    with _step(steps.role_field, f"GetRole {steps.role_name}", {"NoSuchEntity": unknown}):
        role_arn = hook.role_arn(steps.role_name)
    log.info("%s: role name %s is %s", steps.role_field, steps.role_name, role_arn)
    return role_arn


def run_s3_operations(hook: HeteroTrainingHook, steps: ProviderSteps, base_dir: Path, log: _TaskLog) -> None:
    """Create the buckets, upload the paths (relative ones from ``base_dir``, the DAG file's folder)."""
    from airflow_hetero.hooks.training import BucketUnusableError

    for index, bucket in enumerate(steps.buckets):
        loc = f"{S3_OPERATIONS}.S3CreateBucket[{index}].Bucket"
        with _step(loc, f"bucket {bucket}"):
            try:
                created = hook.ensure_bucket(bucket)
            except BucketUnusableError as err:
                raise AirflowFailException(f"{loc}: {err}") from err
        log.info("S3Operations: bucket %s %s", bucket, "created" if created else "exists")
    for upload in steps.uploads:
        path = _local_path(upload, base_dir)
        with _step(upload.loc, f"upload {path} to {upload.uri}"):
            size = hook.upload_path(path, upload.uri, tar=upload.tar)
        how = " as .tar.gz" if upload.tar else ""
        log.info("S3Operations: uploaded %s%s to %s (%d bytes)", path, how, upload.uri, size)


@contextmanager
def _step(loc: str, what: str, heads: Mapping[str, str] | None = None) -> Iterator[None]:
    """Run one step: a service error a retry would meet again fails the task without retries, naming the
    step's field (``NoSuchBucket`` its ``Bucket``; ``heads``: a code's own words). Throttling, 5xx and
    dropped connections (:func:`~airflow_hetero._retry.is_transient`) stay the task's to retry."""
    try:
        yield
    except Exception as err:
        code = error_code(err)
        if code is None or is_transient(err):
            raise
        head = (heads or {}).get(code)
        if head is not None:
            raise AirflowFailException(f"{head} ({err})") from err
        if code == "NoSuchBucket" and not loc.endswith(".Bucket"):
            loc = f"{loc}.Bucket"
        message = getattr(err, "response", {}).get("Error", {}).get("Message") or err
        raise AirflowFailException(f"{loc}: {code} ({what}: {message})") from err


def _local_path(upload: S3Upload, base_dir: Path) -> Path:
    path = Path(upload.path).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if not path.exists():
        raise AirflowFailException(f"{upload.loc}.Path: '{path}' does not exist")
    if path.is_dir() and not upload.tar:
        raise AirflowFailException(
            f"{upload.loc}.Path: '{path}' is a folder; set Tar: true to upload it as one .tar.gz of its entries"
        )
    return path
