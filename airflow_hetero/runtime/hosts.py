"""Reaching the other hosts: addresses from the offline endpoint's map, else DNS; a patient connect."""

from __future__ import annotations

import json
import os
import socket
import time

from .cluster import RuntimeEnvironment, environment
from .errors import HostLookupError, RuntimeConfigError

HOST_ADDRESSES_ENV = "AIRFLOW_HETERO_HOST_ADDRESSES"


def host_addresses() -> dict[str, str] | None:
    """The offline endpoint's host -> address map, or None on SageMaker (variable unset or empty)."""
    raw = os.environ.get(HOST_ADDRESSES_ENV)
    if not raw:
        return None
    try:
        mapping = json.loads(raw)
    except ValueError as exc:
        raise RuntimeConfigError(f"{HOST_ADDRESSES_ENV} is not valid JSON: {exc}") from exc
    if not isinstance(mapping, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in mapping.items()
    ):
        raise RuntimeConfigError(f"{HOST_ADDRESSES_ENV} must be a JSON object of host -> address, got {raw!r}")
    return mapping


def host_address(host: str, *, timeout: float = 0.0) -> str:
    """Address of ``host``: from the offline endpoint's map, else DNS (retried up to ``timeout`` s)."""
    mapping = host_addresses()
    if mapping is not None:
        if host not in mapping:
            known = ", ".join(sorted(mapping)) or "(none)"
            raise HostLookupError(f"host {host!r} is not in {HOST_ADDRESSES_ENV} (known hosts: {known})")
        return mapping[host]
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            return socket.gethostbyname(host)
        except OSError as exc:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HostLookupError(f"cannot resolve host {host!r}: {exc}") from exc
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 2.0)


def listen_address(env: RuntimeEnvironment | None = None) -> str:
    """Address a server on this host should bind: its own address locally, 0.0.0.0 on SageMaker."""
    if host_addresses() is None:
        return "0.0.0.0"
    return host_address((env or environment()).current_host)


def connect(host: str, port: int, *, timeout: float = 60.0) -> socket.socket:
    """Connect to ``host:port``, retrying until the peer listens or ``timeout`` s have passed."""
    deadline = time.monotonic() + timeout
    address = host_address(host, timeout=timeout)
    delay = 0.05
    while True:
        remaining = deadline - time.monotonic()
        try:
            sock = socket.create_connection((address, port), timeout=max(remaining, 1.0))
        except OSError as exc:
            if deadline - time.monotonic() <= 0:
                raise TimeoutError(f"could not connect to {host} ({address}:{port}) within {timeout}s: {exc}") from exc
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            delay = min(delay * 2, 1.0)
            continue
        sock.settimeout(None)  # the connect timeout must not linger on later reads
        return sock
