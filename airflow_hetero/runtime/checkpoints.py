"""This host's own checkpoint folder: ``<LocalPath>/<instance group>/<host>``.

SageMaker copies every host's ``CheckpointConfig.LocalPath`` (default ``/opt/ml/checkpoints``) to the
one ``CheckpointConfig.S3Uri`` of the job, and at a restart (a managed spot interruption) copies all of
it back to every host. Hosts that wrote to the same file names would overwrite each other in S3; a
folder per group and host keeps them apart (``<S3Uri>/<group>/<host>/...``) and gives each host back
its own files after a restart.

On the offline endpoint a script-mode host's ``/opt/ml`` is its own folder, named by
``SAGEMAKER_BASE_DIR``: a path under ``/opt/ml`` is read there.
"""

from __future__ import annotations

import os
from pathlib import Path

from .cluster import RuntimeEnvironment, environment
from .toolkit import BASE_DIR_ENV, DEFAULT_BASE_DIR

#: ``CheckpointConfig.LocalPath`` when the job gives none (SageMaker's default; sagemaker_facts holds the same).
DEFAULT_CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"


def checkpoint_dir(
    local_path: str | os.PathLike[str] | None = None,
    *,
    env: RuntimeEnvironment | None = None,
    create: bool = True,
) -> Path:
    """This host's checkpoint folder, ``<local_path>/<group>/<host>`` (created unless ``create=False``).

    ``local_path`` is the job's ``CheckpointConfig.LocalPath`` (``checkpoint_local_path`` of a
    definition), ``/opt/ml/checkpoints`` when not given; ``env`` the host's
    :func:`~.cluster.environment` (read when not given). Whatever the script finds there at start was
    restored from the job's checkpoint S3Uri: resume from it.
    """
    path = os.fspath(local_path) if local_path is not None else DEFAULT_CHECKPOINT_LOCAL_PATH
    base = os.environ.get(BASE_DIR_ENV)
    if base and (path == DEFAULT_BASE_DIR or path.startswith(DEFAULT_BASE_DIR + "/")):
        path = base.rstrip("/") + path[len(DEFAULT_BASE_DIR) :]
    host = env if env is not None else environment()
    folder = Path(path) / host.current_instance_group / host.current_host
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return folder
