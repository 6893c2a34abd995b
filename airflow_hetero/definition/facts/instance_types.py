"""SageMaker training instance types, read from botocore's own service model.

The list is never copied by hand: it is the ``TrainingInstanceType`` enum of the
sagemaker service model shipped with the installed botocore. Reading it from the
compressed model file directly (without importing botocore) takes about 10 ms,
cheap enough to check every definition fully at DAG-parse time.
"""

from __future__ import annotations

import functools
import json
import re

from airflow_hetero.definition.facts.service_model import InstanceTypeCatalogError, sagemaker_model_path
from airflow_hetero.sagemaker_facts import ACCELERATOR_FAMILY_PREFIXES, CPU_ONLY

_SHAPE = b'"TrainingInstanceType":'
_FAMILY = re.compile(r"^ml\.([a-z][a-z0-9-]*)\.[a-z0-9-]+$")

#: The multi-GPU instance types of smdistributed dataparallel: the SDK's own list
#: (``fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES``, which it defines but does not check).
#: ml.p5.48xlarge is not in it: the SDK allows smdistributed on p5 only with torch_distributed.
SMDDP_INSTANCE_TYPES = frozenset({"ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"})


@functools.cache
def training_instance_types() -> frozenset[str]:
    """All values of botocore's ``TrainingInstanceType`` enum."""
    import gzip

    path = sagemaker_model_path()
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    start = raw.find(_SHAPE)
    if start < 0:
        raise InstanceTypeCatalogError(f"TrainingInstanceType not found in {path}")
    text = raw[start + len(_SHAPE) :].decode("utf-8")
    shape, _ = json.JSONDecoder().raw_decode(text.lstrip())
    return frozenset(shape["enum"])


def family(instance_type: str) -> str | None:
    """``ml.p4d.24xlarge`` -> ``p4d``; None for strings that are not ``ml.<family>.<size>``."""
    match = _FAMILY.match(instance_type)
    return match.group(1) if match else None


def accelerator(instance_type: str) -> str:
    """``gpu``, ``trainium``, ``inferentia`` or ``cpu``: what the family computes on
    (:data:`~airflow_hetero.sagemaker_facts.ACCELERATOR_FAMILY_PREFIXES`); ``cpu`` for unparseable strings."""
    fam = family(instance_type) or ""
    return next((kind for prefix, kind in ACCELERATOR_FAMILY_PREFIXES if fam.startswith(prefix)), CPU_ONLY)


def is_gpu(instance_type: str) -> bool:
    """GPU families as the SageMaker SDK sees them (``g*`` and ``p*``)."""
    return accelerator(instance_type) == "gpu"


def is_trainium(instance_type: str) -> bool:
    """Trainium families (``trn*``)."""
    return accelerator(instance_type) == "trainium"


def type_problem(value: str) -> str | None:
    """Why ``value`` is not a training instance type (local mode; not in botocore's enum), or None."""
    if value.startswith("local"):
        return (
            f"'{value}' runs SageMaker's local mode, which cannot run heterogeneous clusters; "
            "keep a real instance type (e.g. ml.c5.xlarge) and point the connection at the "
            "offline endpoint instead (`airflow-hetero local serve`, see docs/local.md)"
        )
    known = training_instance_types()
    if value in known:
        return None
    hint = closest(value)
    did_you_mean = f"did you mean '{hint}'? " if hint else ""
    return (
        f"'{value}' is not a SageMaker training instance type; {did_you_mean}"
        f"allowed: the {len(known)} values of botocore's TrainingInstanceType "
        "(list them with `airflow-hetero instance-types`)"
    )


def closest(instance_type: str) -> str | None:
    """The most similar valid instance type, for 'did you mean' hints."""
    import difflib  # only when there is a problem to explain

    found = difflib.get_close_matches(instance_type, sorted(training_instance_types()), n=1, cutoff=0.6)
    return found[0] if found else None
