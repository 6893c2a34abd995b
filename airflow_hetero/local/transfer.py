"""S3 side of a job: fetch and safely unpack the source, deliver channels, upload the model.

Everything goes through an ordinary boto3 S3 client (pointed at the endpoint's own URL), exactly
as the training platform would read and write the user's buckets.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any


class TransferError(Exception):
    """A data problem that fails the job with a ``ClientError:`` reason (missing data, bad archive)."""


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key)."""
    if not uri.startswith("s3://"):
        raise TransferError(f"Not an s3:// URI: {uri}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


def join_uri(base: str, *parts: str) -> str:
    """Join S3 path parts with single slashes (``s3://b/out/`` + ``job`` -> ``s3://b/out/job``)."""
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def list_keys(s3: Any, uri: str) -> list[str]:
    """Every object key under the prefix of ``uri`` (folder markers skipped), sorted."""
    bucket, prefix = parse_s3_uri(uri)
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(obj["Key"] for obj in page.get("Contents", []) if not obj["Key"].endswith("/"))
    return sorted(keys)


def relative_key(prefix: str, key: str) -> str:
    """Where ``key`` lands inside the channel directory for S3 prefix ``prefix``.

    A key equal to the prefix (a single-object URI) keeps its file name; a key below a folder-like
    prefix keeps its path below that folder; a partial-name prefix (``data/tr`` for ``data/train/x``)
    keeps the path below the prefix's parent folder.
    """
    if key == prefix:
        return posixpath.basename(key)
    rest = key[len(prefix) :]
    if prefix.endswith("/") or rest.startswith("/"):
        return rest.lstrip("/")
    parent = posixpath.dirname(prefix)
    return key[len(parent) + 1 :] if parent else key


def _inside(root: Path, relative: str) -> Path:
    target = (root / relative).resolve()
    if target != root.resolve() and root.resolve() not in target.parents:
        raise TransferError(f"S3 key {relative!r} would be written outside {root}")
    return target


def download_channel(
    s3: Any, uri: str, dest: Path, *, shard_index: int = 0, shard_count: int = 1, sharded: bool = False
) -> list[str]:
    """Download the channel's objects into ``dest``; with ``sharded`` only this host's share.

    ShardedByS3Key gives host ``i`` of ``n`` (in its group's order) the objects ``i, i+n, ...`` of the
    sorted key list, so every object lands on exactly one host of the group. Returns the keys written.
    """
    keys = list_keys(s3, uri)
    if not keys:
        raise TransferError(
            f'Data download failed: No S3 objects found under S3 URL "{uri}" given in input data source. '
            "Please ensure that the bucket exists in the selected region and that objects exist under that "
            "S3 prefix."
        )
    if sharded:
        keys = keys[shard_index::shard_count]
    bucket, prefix = parse_s3_uri(uri)
    dest.mkdir(parents=True, exist_ok=True)
    for key in keys:
        target = _inside(dest, relative_key(prefix, key))
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(target))
    return keys


def fetch(s3: Any, uri: str) -> bytes:
    """The bytes of one S3 object."""
    bucket, key = parse_s3_uri(uri)
    body: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return body


def upload(s3: Any, uri: str, data: bytes) -> None:
    """Write ``data`` to ``uri``."""
    bucket, key = parse_s3_uri(uri)
    s3.put_object(Bucket=bucket, Key=key, Body=data)


def _check_member(member: tarfile.TarInfo) -> None:
    path = PurePosixPath(member.name)
    if path.is_absolute() or member.name.startswith("/"):
        raise TransferError(f"member {member.name!r} has an absolute path")
    if ".." in path.parts:
        raise TransferError(f"member {member.name!r} would be extracted outside the code directory")
    if member.issym() or member.islnk():
        link = PurePosixPath(member.linkname)
        base = path.parent if member.issym() else PurePosixPath()
        depth = 0
        for part in (base / link).parts if not link.is_absolute() else ("..",):
            depth += -1 if part == ".." else (0 if part == "." else 1)
            if depth < 0:
                raise TransferError(f"link {member.name!r} -> {member.linkname!r} points outside the code directory")
    elif not (member.isfile() or member.isdir()):
        raise TransferError(f"member {member.name!r} is not a regular file or directory")


def safe_extract(data: bytes, dest: Path) -> list[str]:
    """Extract a (gzipped) tarball into ``dest``, refusing any member that could land outside it.

    Absolute paths, ``..`` components, links pointing outside and device files are refused before
    anything is written; Python's ``data`` extraction filter is applied on top where available.
    """
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:  # pragma: no cover - Python without PEP 706 filters
                tar.extractall(dest, members=members)
    except tarfile.TarError as exc:
        raise TransferError(f"not a valid tar archive ({exc})") from exc
    return [m.name for m in members]


def tar_directories(dirs: list[Path]) -> bytes:
    """A ``tar.gz`` of the contents of ``dirs`` merged (later directories win on equal names)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        seen: dict[str, Path] = {}
        for root in dirs:
            for path in sorted(root.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    seen[path.relative_to(root).as_posix()] = path
        for name in sorted(seen):
            tar.add(str(seen[name]), arcname=name, recursive=False)
    return buffer.getvalue()


def has_files(dirs: list[Path]) -> bool:
    """True when any of ``dirs`` holds at least one file."""
    return any(p.is_file() for d in dirs if d.exists() for p in d.rglob("*"))
