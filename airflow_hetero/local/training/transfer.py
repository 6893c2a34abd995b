"""S3 side of a job: fetch and safely unpack the source, deliver channels, upload the model.

Everything goes through an ordinary boto3 S3 client (pointed at the endpoint's own URL), exactly
as the training platform would read and write the user's buckets.
"""

from __future__ import annotations

import io
import os
import posixpath
import shutil
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


def list_objects(s3: Any, uri: str) -> dict[str, int]:
    """Key -> size of every object under the prefix of ``uri`` (folder markers skipped), sorted by key."""
    bucket, prefix = parse_s3_uri(uri)
    found: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found.update({obj["Key"]: int(obj["Size"]) for obj in page.get("Contents", []) if not obj["Key"].endswith("/")})
    return dict(sorted(found.items()))


def list_keys(s3: Any, uri: str) -> list[str]:
    """Every object key under the prefix of ``uri`` (folder markers skipped), sorted."""
    return list(list_objects(s3, uri))


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
    s3: Any,
    uri: str,
    dest: Path,
    *,
    shard_index: int = 0,
    shard_count: int = 1,
    sharded: bool = False,
    max_bytes: int | None = None,
) -> list[str]:
    """Download the channel's objects into ``dest``; with ``sharded`` only this host's share.

    ShardedByS3Key gives host ``i`` of ``n`` (in its group's order) the objects ``i, i+n, ...`` of the
    sorted key list, so every object lands on exactly one host of the group. More than ``max_bytes``
    for this host (as listed, and as written) is refused. Returns the keys written.
    """
    objects = list_objects(s3, uri)
    keys = list(objects)
    if not keys:
        raise TransferError(
            f'Data download failed: No S3 objects found under S3 URL "{uri}" given in input data source. '
            "Please ensure that the bucket exists in the selected region and that objects exist under that "
            "S3 prefix."
        )
    if sharded:
        keys = keys[shard_index::shard_count]
    listed = sum(objects[k] for k in keys)
    if max_bytes is not None and listed > max_bytes:
        raise TransferError(
            f"Data download failed: {uri} holds {listed} bytes for this host, more than the local endpoint's "
            f"limit of {max_bytes} bytes per channel"
        )
    bucket, prefix = parse_s3_uri(uri)
    dest.mkdir(parents=True, exist_ok=True)
    written = 0
    for key in keys:
        target = _inside(dest, relative_key(prefix, key))
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(target))
        written += target.stat().st_size
        if max_bytes is not None and written > max_bytes:
            raise TransferError(
                f"Data download failed: {uri} grew beyond the local endpoint's limit of {max_bytes} bytes "
                "per channel while it was downloaded"
            )
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


#: Symlinks followed while resolving one path, as Linux's own limit (ELOOP beyond it).
MAX_LINK_HOPS = 40
#: Members one tarball may have.
MAX_MEMBERS = 100_000


def _member_parts(member: tarfile.TarInfo) -> tuple[str, ...]:
    path = PurePosixPath(member.name)
    if path.is_absolute() or member.name.startswith("/"):
        raise TransferError(f"member {member.name!r} has an absolute path")
    if ".." in path.parts:
        raise TransferError(f"member {member.name!r} would be extracted outside the code directory")
    parts = tuple(p for p in path.parts if p not in ("", "."))
    if not parts and not member.isdir():
        raise TransferError(f"member {member.name!r} has no name")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()) or member.issparse():
        raise TransferError(f"member {member.name!r} is not a regular file, directory or link")
    return parts


def _resolve(links: dict[tuple[str, ...], str], start: tuple[str, ...], target: str, name: str) -> tuple[str, ...]:
    """Where ``target`` (a link's text, relative to directory ``start``) lands, following the archive's
    own symlinks (``links``: path -> link text) component by component, as the kernel would.

    Raises when any step leaves the extraction directory or more than ``MAX_LINK_HOPS`` links are
    followed, so a link counts as safe only when its *fully resolved* target is inside.
    """
    if target.startswith("/"):
        raise TransferError(f"link {name!r} -> {target!r} points outside the code directory")
    hops = 0
    pending = list(PurePosixPath(target).parts)
    resolved = list(start)
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                raise TransferError(f"link {name!r} -> {target!r} points outside the code directory")
            resolved.pop()
            continue
        resolved.append(part)
        text = links.get(tuple(resolved))
        if text is not None:
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise TransferError(f"link {name!r} -> {target!r} resolves through more than {MAX_LINK_HOPS} links")
            if text.startswith("/"):
                raise TransferError(f"link {name!r} -> {target!r} points outside the code directory")
            resolved.pop()
            pending[:0] = list(PurePosixPath(text).parts)
    return tuple(resolved)


def check_members(members: list[tarfile.TarInfo], max_bytes: int) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Refuse the archive unless every member lands inside the target, every link resolves inside
    it after full resolution (through the archive's other links), nothing is below a link, and the
    files (hard links counted at their target's size) add up to at most ``max_bytes``. Checked on
    the headers alone, before anything is written. Returns each hard link's resolved target."""
    if len(members) > MAX_MEMBERS:
        raise TransferError(f"the archive has {len(members)} members; at most {MAX_MEMBERS} are accepted")
    links: dict[tuple[str, ...], str] = {}
    kinds: dict[tuple[str, ...], str] = {}
    sizes: dict[tuple[str, ...], int] = {}
    for member in members:
        parts = _member_parts(member)
        kind = "dir" if member.isdir() else "sym" if member.issym() else "file"
        if parts in kinds and (kind != "dir" or kinds[parts] != "dir"):
            raise TransferError(f"member {member.name!r} appears more than once")
        kinds[parts] = kind
        if member.issym():
            links[parts] = member.linkname
        if member.isfile():
            sizes[parts] = member.size
    for parts in kinds:
        for depth in range(1, len(parts)):
            if kinds.get(parts[:depth], "dir") != "dir":
                raise TransferError(f"member {'/'.join(parts)!r} is below a file or link")
    for parts, text in links.items():
        _resolve(links, parts[:-1], text, "/".join(parts))
    hard: dict[tuple[str, ...], tuple[str, ...]] = {}
    total = sum(sizes.values())
    for member in members:
        if member.islnk():
            target = _resolve(links, (), member.linkname, member.name)
            if kinds.get(target) != "file" or target not in sizes:
                raise TransferError(f"hard link {member.name!r} -> {member.linkname!r} does not name a file")
            hard[_member_parts(member)] = target
            total += sizes[target]
    if total > max_bytes:
        raise TransferError(f"it extracts to {total} bytes, more than the local endpoint's limit of {max_bytes}")
    return hard


def _open_new(path: Path) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    return os.open(path, flags, 0o644)


def file_mode(mode: int) -> int:
    """The mode an extracted file keeps: its permission bits without set-id, sticky or group/other write
    (as tarfile's ``data`` filter keeps them), always readable and writable by its owner."""
    return (mode & 0o755) | 0o600


def safe_extract(data: bytes, dest: Path, max_bytes: int = 1 << 30) -> list[str]:
    """Extract a (gzipped) tarball into ``dest``, refusing any member that could land outside it.

    The archive is checked as a whole first (:func:`check_members`): absolute paths, ``..``,
    device files, links whose fully resolved target is outside, more than ``max_bytes`` of files.
    Then it is written without tarfile's extraction code (so without relying on its filters):
    directories and files first, with ``O_NOFOLLOW`` and no link in place yet, each file cut off at
    its declared size and keeping its mode (:func:`file_mode`: an executable stays executable),
    hard links as copies, symlinks last; finally every symlink is resolved by
    the kernel and must still be inside ``dest``. A refused archive leaves ``dest`` empty.
    """
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            members = tar.getmembers()
            hard = check_members(members, max_bytes)
            try:
                _write_members(tar, members, dest, max_bytes, hard)
            except BaseException:
                _empty(dest)
                raise
    except (tarfile.TarError, EOFError, zlib_error()) as exc:
        _empty(dest)
        raise TransferError(f"not a valid tar archive ({exc})") from exc
    return [m.name for m in members]


def zlib_error() -> type[Exception]:
    """The error a corrupt gzip stream raises while reading."""
    import zlib

    return zlib.error


def _write_members(
    tar: tarfile.TarFile,
    members: list[tarfile.TarInfo],
    dest: Path,
    max_bytes: int,
    hard: dict[tuple[str, ...], tuple[str, ...]],
) -> None:
    written = 0
    root = dest.resolve()
    for member in members:
        target = dest.joinpath(*_member_parts(member))
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
        elif member.isfile():
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            with os.fdopen(_open_new(target), "wb") as out:
                os.fchmod(out.fileno(), file_mode(member.mode))
                left = member.size
                while left > 0:
                    piece = source.read(min(left, 1 << 20))
                    if not piece:
                        break
                    out.write(piece)
                    left -= len(piece)
                    written += len(piece)
            if written > max_bytes:
                raise TransferError(f"it extracts to more than {max_bytes} bytes (the local endpoint's limit)")
    for member in members:  # hard links: copies of files already written (never through a symlink)
        if member.islnk():
            parts = _member_parts(member)
            target = dest.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(dest.joinpath(*hard[parts]), "rb") as src, os.fdopen(_open_new(target), "wb") as out:
                os.fchmod(out.fileno(), os.fstat(src.fileno()).st_mode & 0o7777)
                shutil.copyfileobj(src, out)
    for member in members:  # symlinks last, so nothing above was written through one
        if member.issym():
            target = dest.joinpath(*_member_parts(member))
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(member.linkname, target)
    for member in members:
        if member.issym():
            real = Path(os.path.realpath(dest.joinpath(*_member_parts(member))))
            if real != root and root not in real.parents:
                raise TransferError(f"link {member.name!r} -> {member.linkname!r} points outside the code directory")


def _empty(dest: Path) -> None:
    """Remove everything inside ``dest`` (links themselves, never what they point to)."""
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


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
