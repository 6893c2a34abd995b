"""What the runtime helper raises, one type per kind of trouble a training script may catch."""

from __future__ import annotations


class RuntimeConfigError(RuntimeError):
    """The SageMaker config files (or the host address map) are missing or malformed."""


class GroupDispatchError(LookupError):
    """``run_by_group`` has no function for the current host's instance group."""


class HostLookupError(LookupError):
    """A host name could not be turned into an address."""
