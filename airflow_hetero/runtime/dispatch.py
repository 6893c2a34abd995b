"""Which group am I, acted on: print the host's marker once, then run its group's function."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from .cluster import RuntimeEnvironment, environment
from .errors import GroupDispatchError

T = TypeVar("T")

_marker_lock = threading.Lock()
_marker_done = threading.Event()


def log_marker(env: RuntimeEnvironment | None = None) -> str:
    """Print this host's marker to stdout (flushed), once per process; returns the line."""
    line = (env or environment()).marker()
    with _marker_lock:
        if not _marker_done.is_set():
            print(line, flush=True)
            _marker_done.set()
    return line


def run_by_group(handlers: Mapping[str, Callable[[], T]], *, env: RuntimeEnvironment | None = None) -> T:
    """Print the marker, then call the function registered for this host's group; return its result."""
    env = env or environment()
    for name, handler in handlers.items():
        if not callable(handler):
            raise TypeError(f"run_by_group: the value for group {name!r} is not callable: {handler!r}")
    log_marker(env)
    chosen = handlers.get(env.current_instance_group)
    if chosen is None:
        given = ", ".join(sorted(handlers)) or "(none)"
        known = ", ".join(env.instance_groups) or "(none listed in resourceconfig.json)"
        raise GroupDispatchError(
            f"no function for instance group {env.current_instance_group!r} on host {env.current_host}: "
            f"run_by_group was given {given}; the job's instance groups are {known}"
        )
    return chosen()
