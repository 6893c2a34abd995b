"""What the Amazon provider's ``SageMakerTrainingOperator`` takes in its ``config`` beyond the request.

Two additions, both carried out by the provider before it sends the request, and by
:class:`~airflow_hetero.operators.HeteroTrainingOperator` in request mode the same way, so a
provider ``config`` moves over unchanged:

* ``S3Operations``: ``S3CreateBucket`` (``[{"Bucket": ...}]``) and ``S3Upload``
  (``[{"Path": ..., "Bucket": ..., "Key": ..., "Tar": bool}]``): buckets to create and local files or
  folders to upload (``Tar``: as one ``.tar.gz`` of the path's entries) before the job is created.
  A relative ``Path`` is taken from the DAG file's folder.
* a role *name* as ``RoleArn`` (no ``/`` in it, the provider's test): expanded to the role's ARN
  through IAM ``GetRole``.

This module only reads and checks them (pure: no Airflow, no boto3); the operator runs them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_hetero.definition.errors import Problem
from airflow_hetero.definition.facts.roles import role_problem

__all__ = ["S3_OPERATIONS", "ProviderSteps", "S3Upload", "take_provider_steps"]

S3_OPERATIONS = "S3Operations"
#: S3's rules for a bucket name (general purpose buckets): 3-63 lowercase letters, digits, dots, hyphens.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
#: The ARN the shape check sees in place of a role name (the name is expanded when the task runs).
_ROLE_STAND_IN = "arn:aws:iam::000000000000:role/{name}"
_UPLOAD_KEYS = {"Path": str, "Bucket": str, "Key": str, "Tar": bool}


@dataclass(frozen=True)
class S3Upload:
    """One ``S3Upload`` entry: a local file or folder to put at ``s3://bucket/key``."""

    path: str
    bucket: str
    key: str
    tar: bool
    loc: str
    """Where it is in the config (``S3Operations.S3Upload[0]``), for errors when it runs."""

    @property
    def uri(self) -> str:
        """Where it goes, as an S3 URI."""
        return f"s3://{self.bucket}/{self.key}"


@dataclass(frozen=True)
class ProviderSteps:
    """What to do before the job is created: buckets to create, uploads, a role name to expand."""

    buckets: tuple[str, ...] = ()
    uploads: tuple[S3Upload, ...] = ()
    role_name: str | None = None
    role_field: str = "RoleArn"
    """Where the role name was given (``RoleArn`` in a request, ``role`` in a definition), for messages."""

    def __bool__(self) -> bool:
        return bool(self.buckets or self.uploads or self.role_name)

    def with_role_arn(self, request: dict[str, Any], role_arn: str | None) -> dict[str, Any]:
        """``request`` with ``RoleArn`` the ARN the role name expanded to (``role_arn``, required when
        there is a role name); unchanged without one."""
        if self.role_name is not None:
            if role_arn is None:
                name = f"{self.role_field}: the role name '{self.role_name}'"
                raise ValueError(f"{name} has not been expanded to its ARN")
            request["RoleArn"] = role_arn
        return request

    def describe(self) -> list[str]:
        """One line per step, in the order they run (for ``validate``/``render`` and the docs)."""
        role = f"{self.role_field}: role name {self.role_name} is expanded to its ARN (IAM GetRole)"
        lines = [role] if self.role_name else []
        lines += [f"S3Operations: bucket {bucket} is created (unless this account has it)" for bucket in self.buckets]
        lines += [
            f"S3Operations: {u.path} is uploaded{' as .tar.gz' if u.tar else ''} to {u.uri}" for u in self.uploads
        ]
        return lines


def take_provider_steps(config: dict[str, Any]) -> tuple[ProviderSteps, list[Problem]]:
    """Take ``S3Operations`` out of ``config`` and a role name out of its ``RoleArn`` (in place: a stand-in
    ARN takes its place for the shape check); the steps and every problem with them."""
    problems: list[Problem] = []
    buckets: list[str] = []
    uploads: list[S3Upload] = []
    operations = config.pop(S3_OPERATIONS, None)
    if operations is not None:
        buckets, uploads = _operations(operations, problems)
    role = config.get("RoleArn")
    role_name = None
    if isinstance(role, str) and "/" not in role and not role.startswith("{{"):
        problem = role_problem(role)
        if problem is None:
            role_name = role
        else:
            problems.append(Problem("RoleArn", problem))  # the one problem: the shape check sees a stand-in
        config["RoleArn"] = _ROLE_STAND_IN.format(name=role_name or "not-a-role")
    return ProviderSteps(tuple(buckets), tuple(uploads), role_name), problems


def _operations(operations: Any, problems: list[Problem]) -> tuple[list[str], list[S3Upload]]:
    if not isinstance(operations, Mapping):
        problems.append(Problem(S3_OPERATIONS, "must be a mapping with S3CreateBucket and/or S3Upload lists"))
        return [], []
    for key in operations:
        if key not in ("S3CreateBucket", "S3Upload"):
            problems.append(Problem(f"{S3_OPERATIONS}.{key}", "unknown field (allowed: S3CreateBucket, S3Upload)"))
    buckets = []
    for index, entry in enumerate(_entries(operations, "S3CreateBucket", problems)):
        loc = f"{S3_OPERATIONS}.S3CreateBucket[{index}]"
        found = _fields(entry, {"Bucket": str}, loc, problems)
        if "Bucket" in found and _bucket_ok(found["Bucket"], f"{loc}.Bucket", problems):
            buckets.append(found["Bucket"])
    uploads = []
    for index, entry in enumerate(_entries(operations, "S3Upload", problems)):
        loc = f"{S3_OPERATIONS}.S3Upload[{index}]"
        found = _fields(entry, _UPLOAD_KEYS, loc, problems)
        ok = "Bucket" in found and _bucket_ok(found["Bucket"], f"{loc}.Bucket", problems)
        for key in ("Path", "Key"):
            if key in found and not found[key]:
                problems.append(Problem(f"{loc}.{key}", "must not be empty"))
            ok = ok and bool(found.get(key))
        if ok:
            uploads.append(S3Upload(found["Path"], found["Bucket"], found["Key"], found.get("Tar", False), loc))
    return buckets, uploads


def _entries(operations: Mapping[str, Any], key: str, problems: list[Problem]) -> list[Any]:
    entries = operations.get(key, [])
    if not isinstance(entries, list):
        problems.append(Problem(f"{S3_OPERATIONS}.{key}", "must be a list"))
        return []
    return entries


def _fields(entry: Any, kinds: dict[str, type], loc: str, problems: list[Problem]) -> dict[str, Any]:
    """The entry's fields of the right type; a problem for each missing, mistyped or unknown one."""
    if not isinstance(entry, Mapping):
        problems.append(Problem(loc, f"must be a mapping with {', '.join(kinds)}"))
        return {}
    found: dict[str, Any] = {}
    for key, value in entry.items():
        kind = kinds.get(key)
        if kind is None:
            problems.append(Problem(f"{loc}.{key}", f"unknown field (allowed: {', '.join(kinds)})"))
        elif not isinstance(value, kind):
            problems.append(Problem(f"{loc}.{key}", f"must be a {'boolean' if kind is bool else 'string'}"))
        else:
            found[key] = value
    for key in kinds:
        if key != "Tar" and key not in entry:
            problems.append(Problem(f"{loc}.{key}", "field required"))
    return found


def _bucket_ok(bucket: str, loc: str, problems: list[Problem]) -> bool:
    if _BUCKET.fullmatch(bucket) and ".." not in bucket:
        return True
    problems.append(
        Problem(loc, f"'{bucket}' is not a valid S3 bucket name (3-63 lowercase letters, digits, dots and hyphens)")
    )
    return False
