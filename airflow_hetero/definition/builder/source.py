"""Training code: where a local ``source_dir`` goes in S3 and how it is packaged.

As the SageMaker SDK does: the code is tarred to ``sourcedir.tar.gz`` and uploaded to
``s3://<output_path bucket>/<job name>/source/sourcedir.tar.gz`` with KMS server-side
encryption (the output KMS key when one is set).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tarfile

    from airflow_hetero.definition.model import JobFields

_SKIP_DIRS = {"__pycache__", ".git", ".ipynb_checkpoints"}


class SourceDirError(ValueError):
    """The training code cannot be packaged (missing directory or entry point)."""


@dataclass(frozen=True)
class SourceUpload:
    """Local training code, packaged: where it goes, the tarball, and the S3 ``ExtraArgs`` of the upload."""

    uri: str
    code: bytes
    extra_args: dict[str, Any]


def is_remote(location: str | None) -> bool:
    """True when the code already sits in S3 (nothing to package)."""
    return location is not None and location.lower().startswith("s3://")


def needs_upload(job: JobFields) -> bool:
    """True when the job's code is local and must be packaged and uploaded before submission."""
    if job.entry_point is None:
        return False
    return not is_remote(job.source_dir)


def source_upload_uri(job: JobFields, job_name: str) -> str | None:
    """Where the packaged local code goes, or None when the code already is in S3 (or absent)."""
    if not needs_upload(job):
        return None
    bucket = job.output_path.split("://", 1)[1].split("/", 1)[0]
    return f"s3://{bucket}/{job_name}/source/sourcedir.tar.gz"


def submit_directory(job: JobFields, job_name: str) -> str | None:
    """The S3 URI of the code tarball the container downloads (``sagemaker_submit_directory``)."""
    if is_remote(job.source_dir):
        return job.source_dir
    return source_upload_uri(job, job_name)


def program_name(job: JobFields) -> str | None:
    """``sagemaker_program``: the entry point inside the tarball."""
    if job.entry_point is None:
        return None
    if job.source_dir is None:
        return PurePosixPath(job.entry_point.replace("\\", "/")).name
    return job.entry_point


def upload_extra_args(job: JobFields) -> dict[str, Any]:
    """S3 ``ExtraArgs`` for the upload: KMS encryption as the SDK requests it."""
    extra: dict[str, Any] = {"ServerSideEncryption": "aws:kms"}
    if job.output_kms_key:
        extra["SSEKMSKeyId"] = job.output_kms_key
    return extra


def source_upload(job: JobFields, job_name: str, base: Path | None = None) -> SourceUpload | None:
    """The local code of ``job`` packaged for ``job_name`` (paths against ``base``); None when it is in S3 or absent."""
    uri = source_upload_uri(job, job_name)
    if uri is None:
        return None
    return SourceUpload(uri, package_source_dir(job, base=base), upload_extra_args(job))


def package_source_dir(job: JobFields, base: Path | None = None, *, include_runtime: bool = True) -> bytes:
    """``sourcedir.tar.gz`` of the local code; relative paths resolve against ``base``.

    With ``source_dir`` the whole directory is packed (caches skipped); with only an
    ``entry_point`` the single file is packed at the archive root, as the SDK does. With
    ``include_runtime`` (and no ``airflow_hetero`` folder of the user's own), the standard-library
    runtime helper is added as the ``airflow_hetero/runtime/`` package (every module of it), so
    ``from airflow_hetero import runtime`` works in any training image without installing this
    package there.
    """
    if job.entry_point is None:
        raise SourceDirError("entry_point: no training code to package")
    import tarfile  # packaging happens at submission, not at DAG-parse time

    root = Path(base) if base is not None else Path.cwd()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        if job.source_dir is None:
            script = (root / job.entry_point).resolve()
            if not script.is_file():
                raise SourceDirError(f"entry_point: '{script}' does not exist or is not a file")
            tar.add(script, arcname=script.name)
        else:
            directory = (root / job.source_dir).resolve()
            if not directory.is_dir():
                raise SourceDirError(f"source_dir: '{directory}' does not exist or is not a directory")
            if not (directory / job.entry_point).is_file():
                raise SourceDirError(f"entry_point: '{job.entry_point}' is not a file inside source_dir '{directory}'")
            for path in sorted(directory.rglob("*")):
                relative = path.relative_to(directory)
                if _SKIP_DIRS.intersection(relative.parts) or path.suffix == ".pyc" or not path.is_file():
                    continue
                tar.add(path, arcname=relative.as_posix(), recursive=False)
        if include_runtime and "airflow_hetero/__init__.py" not in tar.getnames():
            _add_runtime(tar)
    return buffer.getvalue()


def _add_runtime(tar: tarfile.TarFile) -> None:
    """The runtime package whole (its ``.py`` files, sorted), under a stub ``airflow_hetero/__init__.py``."""
    from airflow_hetero import runtime

    package = Path(runtime.__file__).parent
    init = b'"""The airflow-hetero runtime helper, shipped with the training code."""\n'
    import tarfile

    info = tarfile.TarInfo("airflow_hetero/__init__.py")
    info.size = len(init)
    tar.addfile(info, io.BytesIO(init))
    for module in sorted(package.glob("*.py")):
        tar.add(module, arcname=f"airflow_hetero/runtime/{module.name}", recursive=False)


def write_path_tar_gz(path: Path, out: IO[bytes]) -> None:
    """A ``.tar.gz`` of ``path`` into ``out`` as the Amazon provider's ``S3Upload`` with ``Tar`` makes it:
    a folder's entries (recursively) at the archive root, a file as the archive's one member."""
    import tarfile

    members = sorted(path.iterdir()) if path.is_dir() else [path]
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for member in members:
            tar.add(member, arcname=member.name)
