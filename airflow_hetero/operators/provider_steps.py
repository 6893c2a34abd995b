"""What runs before the create: a request's ``S3Operations`` and the expansion of a role name (given as
a request's ``RoleArn`` or a definition's ``role``), read and checked by
:mod:`airflow_hetero.definition.raw_request.provider_config`, as the Amazon provider and the SageMaker SDK do them.

Run only when a new job is submitted: a retry that re-attaches to its running job uploads nothing.
A role IAM does not know, or a local path that is not there, fails the task without retries, naming
the config's field; a service error is the task's to retry.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from airflow_hetero._compat import AirflowFailException
from airflow_hetero._retry import error_code

if TYPE_CHECKING:
    from airflow_hetero.definition.raw_request.provider_config import ProviderSteps, S3Upload
    from airflow_hetero.hooks.training import HeteroTrainingHook


class _TaskLog(Protocol):
    def info(self, msg: Any, /, *args: Any) -> Any: ...


def run_provider_steps(hook: HeteroTrainingHook, steps: ProviderSteps, base_dir: Path, log: _TaskLog) -> str | None:
    """Expand the role name, create the buckets, upload the paths (relative ones from ``base_dir``, the
    DAG file's folder); the role's ARN when a name was given (None at once when there is nothing to do)."""
    role_arn = None
    if steps.role_name is not None:
        try:
            role_arn = hook.role_arn(steps.role_name)
        except Exception as err:
            if error_code(err) == "NoSuchEntity":
                missing = f"{steps.role_field}: IAM has no role named '{steps.role_name}' ({err})"
                raise AirflowFailException(missing) from err
            raise
        log.info("%s: role name %s is %s", steps.role_field, steps.role_name, role_arn)
    for bucket in steps.buckets:
        created = hook.ensure_bucket(bucket)
        log.info("S3Operations: bucket %s %s", bucket, "created" if created else "exists already (this account's)")
    for upload in steps.uploads:
        path = _local_path(upload, base_dir)
        size = hook.upload_path(path, upload.uri, tar=upload.tar)
        how = " as .tar.gz" if upload.tar else ""
        log.info("S3Operations: uploaded %s%s to %s (%d bytes)", path, how, upload.uri, size)
    return role_arn


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
