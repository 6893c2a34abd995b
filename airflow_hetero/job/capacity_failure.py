"""Is this failure about capacity? SageMaker's ways of saying "not these instances now", told apart from the rest.

Only these start a fallback (docs/capacity.md); every other error is the job's own and never does:

* a job ending ``Failed`` whose ``FailureReason`` starts ``CapacityError`` ("Unable to provision
  requested ML compute capacity. Please retry using a different ML instance type."): names no type;
* a create refused with ``ResourceLimitExceeded`` whose message names an instance type's quota ("The
  account-level service limit 'ml.p4d.24xlarge for training job usage' is 0 Instances, ..."; also the
  spot quota): names that type. Other limits (concurrent training jobs, instances over all jobs) are
  not about a type, another type would not help: not capacity;
* a create refused with one of :data:`CAPACITY_ERROR_CODES`. botocore's model lists none for
  CreateTrainingJob (its errors are ResourceInUse, ResourceLimitExceeded, ResourceNotFound); these are
  EC2's and the service's capacity codes, taken in case one is passed through. A type in the message
  is taken as the one refused.

Stdlib only: the caller reads a ClientError's code and message (``response["Error"]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CAPACITY_ERROR_CODES",
    "CAPACITY_REASON_PREFIX",
    "CapacityFailure",
    "failure_of_client_error",
    "failure_of_error",
    "failure_of_reason",
]

#: How a DescribeTrainingJob ``FailureReason`` of a job SageMaker could not place starts.
CAPACITY_REASON_PREFIX = "CapacityError"
#: The quota refusal at create.
QUOTA_ERROR_CODE = "ResourceLimitExceeded"
#: Capacity refusals at create besides a quota (EC2's ``InsufficientInstanceCapacity`` and its kin).
CAPACITY_ERROR_CODES = frozenset({"InsufficientInstanceCapacity", "InsufficientCapacityError", "CapacityError"})
_QUOTA = re.compile(r"'(?P<type>ml\.[a-z0-9-]+\.[a-z0-9-]+) for (?:spot )?training job usage'")
_TYPE = re.compile(r"\b(ml\.[a-z0-9-]+\.[a-z0-9-]+)\b")


@dataclass(frozen=True)
class CapacityFailure:
    """A capacity failure: ``kind`` ``"capacity"`` (none to place) or ``"quota"`` (the account's limit of
    ``instance_type``), the type it names (None for a ``CapacityError``) and the service's words."""

    kind: Literal["capacity", "quota"]
    instance_type: str | None
    reason: str

    @property
    def refuses_type(self) -> bool:
        """True when the failure rules its type out for the rest of the chain (a quota, or a named type)."""
        return self.instance_type is not None


def failure_of_reason(reason: str | None) -> CapacityFailure | None:
    """A failed job's ``FailureReason`` as a capacity failure, or None (not about capacity)."""
    if not reason or not reason.startswith(CAPACITY_REASON_PREFIX):
        return None
    return CapacityFailure("capacity", None, reason)


def failure_of_error(code: str | None, message: str | None) -> CapacityFailure | None:
    """A create's error (its code and message) as a capacity failure, or None (not about capacity)."""
    text = message or ""
    if code == QUOTA_ERROR_CODE:
        match = _QUOTA.search(text)
        return CapacityFailure("quota", match.group("type"), text) if match else None
    if code in CAPACITY_ERROR_CODES:
        named = _TYPE.findall(text)
        return CapacityFailure("capacity", named[0] if len(set(named)) == 1 else None, text)
    return None


def failure_of_client_error(error: BaseException) -> CapacityFailure | None:
    """:func:`failure_of_error` of a botocore ``ClientError`` (anything with its ``response``)."""
    response: Any = getattr(error, "response", None)
    details = response.get("Error") if isinstance(response, dict) else None
    if not isinstance(details, dict):
        return None
    code, message = details.get("Code"), details.get("Message")
    return failure_of_error(str(code) if code is not None else None, str(message) if message is not None else None)
