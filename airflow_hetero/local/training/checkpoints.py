"""Checkpoints: each host's ``CheckpointConfig.LocalPath`` copied to ``CheckpointConfig.S3Uri``, and back.

As SageMaker does: what a host writes to its LocalPath (default ``/opt/ml/checkpoints``) is copied to
the S3Uri while the job runs (here every ``checkpoint_sync_interval`` seconds, new and changed files
only) and once more when its hosts have ended; at every start of the job (the first, and each restart
after a spot interruption) everything under the S3Uri is copied into every host's LocalPath. One S3Uri
is shared by every host of every group, as on SageMaker: a host that must not overwrite another's files
writes under a folder of its own (``airflow_hetero.runtime.checkpoint_dir()``: ``<LocalPath>/<group>/<host>``,
so ``<S3Uri>/<group>/<host>/...``). Nothing is deleted from S3.

The endpoint maps ``/opt/ml`` to each host's own folder, so a LocalPath outside ``/opt/ml`` cannot be
given a host of its own here: :func:`local_path_problem` refuses it at create.
"""

from __future__ import annotations

import time
from pathlib import Path, PurePosixPath
from typing import Any

from airflow_hetero.local.training.layout import Host
from airflow_hetero.local.training.prepare import JobFailure
from airflow_hetero.local.training.transfer import TransferError, join_uri, list_objects, parse_s3_uri, relative_key
from airflow_hetero.sagemaker_facts import CONTAINER_BASE_DIR, DEFAULT_CHECKPOINT_LOCAL_PATH

_Seen = dict[str, tuple[int, int]]


def checkpoint_config(record: dict[str, Any]) -> tuple[str, str] | None:
    """``(S3Uri, LocalPath)`` of a request or record, LocalPath defaulted; None without a CheckpointConfig."""
    config = record.get("CheckpointConfig")
    if not isinstance(config, dict) or not config.get("S3Uri"):
        return None
    return str(config["S3Uri"]), str(config.get("LocalPath") or DEFAULT_CHECKPOINT_LOCAL_PATH)


def local_path_problem(local_path: str) -> str | None:
    """Why the endpoint cannot run a job with this LocalPath (None: it can): it must lie inside ``/opt/ml``."""
    path = PurePosixPath(local_path)
    base = PurePosixPath(CONTAINER_BASE_DIR)
    if path.is_absolute() and ".." not in path.parts and base in path.parents:
        return None
    return (
        f"CheckpointConfig.LocalPath {local_path} is not inside {CONTAINER_BASE_DIR}: the local endpoint gives "
        f"each host its own folder as {CONTAINER_BASE_DIR} and can hold a host's checkpoints only there "
        f"(SageMaker's default is {DEFAULT_CHECKPOINT_LOCAL_PATH})"
    )


def host_folder(host: Host, local_path: str) -> Path:
    """Where ``local_path`` (inside /opt/ml) is on ``host``."""
    return host.base_dir.joinpath(*PurePosixPath(local_path).relative_to(CONTAINER_BASE_DIR).parts)


class CheckpointSync:
    """Copies the checkpoint folders of one job's hosts to its S3Uri, and restores them."""

    def __init__(self, s3: Any, uri: str, folders: dict[str, Path], interval: float) -> None:
        self._s3 = s3
        self.uri = uri
        self.folders = folders
        """Host name -> its LocalPath on this machine."""
        self._interval = interval
        self._seen: dict[str, _Seen] = {name: {} for name in folders}
        self._next = 0.0

    @classmethod
    def of(cls, record: dict[str, Any], hosts: list[Host], s3: Any, interval: float) -> CheckpointSync | None:
        """The job's sync, None when its request has no CheckpointConfig."""
        config = checkpoint_config(record)
        if config is None:
            return None
        uri, local_path = config
        return cls(s3, uri, {host.name: host_folder(host, local_path) for host in hosts}, interval)

    def restore(self) -> int:
        """Copy everything under the S3Uri into every host's folder (created); the files written per host."""
        from botocore.exceptions import ClientError

        try:
            folder_uri = self.uri.rstrip("/") + "/"  # s3://b/ckpt holds ckpt/..., never ckpt-old/...
            objects = list_objects(self._s3, folder_uri)
            bucket, prefix = parse_s3_uri(folder_uri)
            for host, folder in self.folders.items():
                folder.mkdir(parents=True, exist_ok=True)
                for key in objects:
                    target = _inside(folder, relative_key(prefix, key))
                    target.parent.mkdir(parents=True, exist_ok=True)
                    self._s3.download_file(bucket, key, str(target))
                self._seen[host] = _scan(folder)
        except (ClientError, TransferError, OSError) as exc:
            raise JobFailure(f"ClientError: Could not restore the checkpoints from {self.uri}: {exc}") from exc
        return len(objects)

    def maybe_sync(self, now: float | None = None) -> None:
        """:meth:`sync` when ``checkpoint_sync_interval`` has passed since the last one."""
        now = time.monotonic() if now is None else now
        if now >= self._next:
            self.sync()
            self._next = now + self._interval

    def sync(self) -> list[str]:
        """Copy each host's new and changed files to the S3Uri; the keys written."""
        from botocore.exceptions import ClientError

        written = []
        bucket, _ = parse_s3_uri(self.uri)
        for host, folder in self.folders.items():
            now = _scan(folder)
            changed = [rel for rel, stamp in now.items() if self._seen[host].get(rel) != stamp]
            for rel in changed:
                _, key = parse_s3_uri(join_uri(self.uri, rel))
                try:
                    self._s3.upload_file(str(folder / rel), bucket, key)
                except FileNotFoundError:  # removed by the script meanwhile
                    now.pop(rel, None)
                    continue
                except (ClientError, OSError) as exc:
                    raise JobFailure(
                        f"ClientError: Could not copy the checkpoints of host {host} to {self.uri}: {exc}"
                    ) from exc
                written.append(key)
            self._seen[host] = now
        return written


def _scan(folder: Path) -> _Seen:
    """Relative POSIX path -> (size, mtime in ns) of every file below ``folder``."""
    found: _Seen = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.rglob("*")):
        try:
            if path.is_file() and not path.is_symlink():
                stat = path.stat()
                found[path.relative_to(folder).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        except FileNotFoundError:
            continue
    return found


def _inside(root: Path, relative: str) -> Path:
    target = (root / relative).resolve()
    if not relative or root.resolve() not in target.parents:
        raise TransferError(f"S3 key {relative!r} would be written outside {root}")
    return target
