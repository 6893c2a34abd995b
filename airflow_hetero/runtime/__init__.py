"""Inside a training host: which instance group am I, and run the right code for it.

Standard library only, so it works in any training container (no Airflow, boto3 or pydantic).
A package of small modules that import only each other, through relative imports, so the folder
works both as ``airflow_hetero.runtime`` (the operator ships it whole in ``sourcedir.tar.gz``) and
as a copied ``runtime`` folder (``import runtime``, ``python -m runtime ...``):

* :mod:`.cluster`: :func:`environment` reads ``resourceconfig.json`` and ``hyperparameters.json``
  with the sagemaker-training toolkit's semantics (names and hyperparameter split in :mod:`.toolkit`);
* :mod:`.marker` and :mod:`.dispatch`: the ``[airflow-hetero]`` marker line that maps hosts to
  groups in the log summary, and :func:`run_by_group`;
* :mod:`.hosts`: peer addresses on SageMaker (DNS) and on the offline endpoint
  (``AIRFLOW_HETERO_HOST_ADDRESSES``);
* :mod:`.checkpoints`: :func:`checkpoint_dir`, this host's own folder of the job's checkpoints;
* :mod:`.world` and :mod:`.command`: the world of one distribution group, and
  ``python -m airflow_hetero.runtime torchrun --group G -- train.py``, which launches torchrun on
  that group only.
"""

from __future__ import annotations

from .checkpoints import DEFAULT_CHECKPOINT_LOCAL_PATH, checkpoint_dir
from .cluster import RuntimeEnvironment, environment
from .command import main as main
from .dispatch import log_marker, run_by_group
from .errors import GroupDispatchError, HostLookupError, RuntimeConfigError
from .hosts import HOST_ADDRESSES_ENV, connect, host_address, host_addresses, listen_address
from .marker import MARKER_PREFIX, format_marker, parse_marker
from .toolkit import (
    BASE_DIR_ENV,
    DEFAULT_BASE_DIR,
    DISTRIBUTION_FLAGS,
    DISTRIBUTION_GROUPS_HP,
    HOMOGENEOUS_GROUP,
    TOOLKIT_HYPERPARAMETERS,
    TOOLKIT_PREFIX,
    decode_hyperparameters,
    split_hyperparameters,
)
from .toolkit import HYPERPARAMETERS_FILE as HYPERPARAMETERS_FILE
from .toolkit import RESOURCE_CONFIG_FILE as RESOURCE_CONFIG_FILE
from .world import DEFAULT_MASTER_PORT as DEFAULT_MASTER_PORT
from .world import DISTRIBUTION_GROUP_ENV as DISTRIBUTION_GROUP_ENV
from .world import GroupWorld, distribution_world

__all__ = [
    "BASE_DIR_ENV",
    "DEFAULT_BASE_DIR",
    "DEFAULT_CHECKPOINT_LOCAL_PATH",
    "DISTRIBUTION_FLAGS",
    "DISTRIBUTION_GROUPS_HP",
    "HOMOGENEOUS_GROUP",
    "HOST_ADDRESSES_ENV",
    "MARKER_PREFIX",
    "TOOLKIT_HYPERPARAMETERS",
    "TOOLKIT_PREFIX",
    "GroupDispatchError",
    "GroupWorld",
    "HostLookupError",
    "RuntimeConfigError",
    "RuntimeEnvironment",
    "checkpoint_dir",
    "connect",
    "decode_hyperparameters",
    "distribution_world",
    "environment",
    "format_marker",
    "host_address",
    "host_addresses",
    "listen_address",
    "log_marker",
    "parse_marker",
    "run_by_group",
    "split_hyperparameters",
]
