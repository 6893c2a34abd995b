"""How many vCPUs and GPUs an ML instance type has, to turn SageMaker's summed percentages into 0-100 (pure).

SageMaker reports ``CPUUtilization`` and ``GPUUtilization`` / ``GPUMemoryUtilization`` summed over
the instance's CPUs or GPUs (an 8-GPU host at full load reports 800). A verdict speaks of "GPUs
38% busy", so it divides by the device count. vCPUs follow EC2's size rule (``large`` = 2,
``xlarge`` = 4, ``Nxlarge`` = 4N); GPUs come from the table below (GPU families only). Anything
unknown is None, and callers may pass their own figures (``capacity=`` of the verdict).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TYPE = re.compile(r"^ml\.(?P<family>[a-z][a-z0-9-]*)\.(?P<size>[a-z0-9-]+)$")
_SIZE = re.compile(r"^(?P<n>\d*)xlarge$")

#: GPUs per instance by family and size (``*`` = every other size of the family).
GPUS: dict[str, dict[str, int]] = {
    "p2": {"xlarge": 1, "8xlarge": 8, "16xlarge": 16},
    "p3": {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
    "p3dn": {"*": 8},
    "p4d": {"*": 8},
    "p4de": {"*": 8},
    "p5": {"*": 8},
    "p5e": {"*": 8},
    "p5en": {"*": 8},
    "p6-b200": {"*": 8},
    "g4dn": {"12xlarge": 4, "metal": 8, "*": 1},
    "g5": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8, "*": 1},
    "g6": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8, "*": 1},
    "g6e": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8, "*": 1},
}


@dataclass(frozen=True)
class Capacity:
    """Devices of one instance: vCPUs and GPUs (None when not known)."""

    cpus: int | None
    gpus: int | None


def vcpus(instance_type: str) -> int | None:
    """``ml.c5.18xlarge`` -> 72 by EC2's size rule; None for sizes the rule does not cover (metal)."""
    match = _TYPE.match(instance_type)
    if not match:
        return None
    size = match.group("size")
    if size == "medium":
        return 1
    if size == "large":
        return 2
    sized = _SIZE.match(size)
    if not sized:
        return None
    return 4 * int(sized.group("n") or 1)


def gpus(instance_type: str) -> int | None:
    """GPUs of a GPU family's instance type; 0 for other known shapes; None when not parseable."""
    match = _TYPE.match(instance_type)
    if not match:
        return None
    table = GPUS.get(match.group("family"))
    if table is None:
        return 0
    return table.get(match.group("size"), table.get("*"))


def capacity(instance_type: str | None) -> Capacity:
    """vCPUs and GPUs of ``instance_type`` (both None when it is None or unknown)."""
    if not instance_type:
        return Capacity(None, None)
    return Capacity(vcpus(instance_type), gpus(instance_type))
