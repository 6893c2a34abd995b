"""boto3 clients the endpoint uses to talk to itself (S3, CloudWatch Logs, CloudWatch).

The endpoint reads channels, writes models, ships logs and metrics through its own URL with
ordinary boto3 calls, the way the training platform uses the user's account. Clients are built
once per (service, region) and shared: boto3 clients are thread-safe and slow to create.

One part of a botocore client is not: ``client.exceptions`` is built on first use, without a lock,
so two threads using a fresh client at once can each build their own classes, and the
``ResourceAlreadyExistsException`` one thread suppresses is not the class the client raises.
:func:`make_client` builds them before the client is handed to anyone.
"""

from __future__ import annotations

import threading
from typing import Any

FAKE_ACCESS_KEY = "testing"
FAKE_SECRET_KEY = "testing"
DEFAULT_REGION = "us-east-1"


def make_client(service: str, endpoint_url: str, region: str = DEFAULT_REGION) -> Any:
    """A boto3 client for ``service`` against ``endpoint_url`` with the endpoint's fake credentials,
    safe to share between threads from the start (its exception classes already built)."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id=FAKE_ACCESS_KEY, aws_secret_access_key=FAKE_SECRET_KEY, region_name=region
    )
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, s3={"addressing_style": "path"})
    client = session.client(service, endpoint_url=endpoint_url, config=config)
    client.exceptions  # noqa: B018 - built now, while no other thread can see the client
    return client


class Clients:
    """Cache of clients against one endpoint URL."""

    def __init__(self, endpoint_url: str) -> None:
        self.endpoint_url = endpoint_url
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], Any] = {}

    def get(self, service: str, region: str = DEFAULT_REGION) -> Any:
        """The shared client of ``service`` in ``region``."""
        with self._lock:
            client = self._cache.get((service, region))
            if client is None:
                client = make_client(service, self.endpoint_url, region)
                self._cache[(service, region)] = client
            return client
