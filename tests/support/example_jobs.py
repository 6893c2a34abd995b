"""The example job definitions the tests share: one builder, with overrides, instead of the same dict written in
each test file.

:func:`example_job` returns a new plain dict each call (tests change theirs): by default a heterogeneous job on
the example image, ``data_group`` (2 x ml.c5.xlarge) feeding ``dnn_group`` (1 x ml.p3.2xlarge), code in S3.
``framework_version`` makes it a PyTorch framework job instead of an image job; ``groups=None`` a
single-instance job (give ``instance_type`` and ``instance_count``); any other keyword is a definition field
added or replaced as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["DATA_AND_DNN", "IMAGE", "ROLE", "SOURCE", "Group", "example_job"]

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/hetero-train:latest"
SOURCE = "s3://code/src/sourcedir.tar.gz"


class Group(NamedTuple):
    """One instance group of a definition (``extra``: more of its fields, e.g. ``fallback_instance_types``)."""

    name: str
    instance_type: str
    count: int = 1
    extra: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"instance_group_name": self.name, "instance_type": self.instance_type, "instance_count": self.count}
        return {**out, **(self.extra or {})}


DATA_AND_DNN = (Group("data_group", "ml.c5.xlarge", 2), Group("dnn_group", "ml.p3.2xlarge", 1))


def example_job(
    base_job_name: str | None = None,
    *,
    groups: Sequence[Group] | None = DATA_AND_DNN,
    output_path: str = "s3://bucket/output",
    image_uri: str = IMAGE,
    framework_version: str | None = None,
    entry_point: str | None = "train.py",
    source_dir: str | None = SOURCE,
    role: str = ROLE,
    **fields: Any,
) -> dict[str, Any]:
    """A job definition (see the module docstring): the role, the image (or, with ``framework_version``, PyTorch
    on py310), the entry point and source dir (None: none), the output path, the base job name (None: none),
    the instance groups (None: none), then ``fields`` as given."""
    job: dict[str, Any] = {"role": role}
    if framework_version is None:
        job["image_uri"] = image_uri
    else:
        job.update(framework="pytorch", framework_version=framework_version, py_version="py310")
    if entry_point is not None:
        job["entry_point"] = entry_point
    if source_dir is not None:
        job["source_dir"] = source_dir
    job["output_path"] = output_path
    if base_job_name is not None:
        job["base_job_name"] = base_job_name
    if groups is not None:
        job["instance_groups"] = [g.as_dict() for g in groups]
    job.update(fields)
    return job
