"""Tell transient AWS errors from permanent ones, and retry the transient ones with backoff.

Polling a training job for hours meets throttling bursts, 5xx answers and dropped connections;
none of them says anything about the job, so they are retried (bounded, logged) while a
permanent error (validation, access denied, missing job) surfaces at once. Shared by the sync
hook and the async trigger; botocore is imported only when an exception is inspected.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

# botocore's own throttling list (botocore.retries.standard) plus server-side failure codes.
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
SERVER_ERROR_CODES = frozenset(
    {
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "InternalServerException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)


def error_code(exc: BaseException) -> str | None:
    """The service error code of a botocore ``ClientError`` (or anything shaped like one)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None


def is_not_found(exc: BaseException) -> bool:
    """True when the service says the training job does not exist."""
    code = error_code(exc)
    if code in ("ResourceNotFound", "ResourceNotFoundException"):
        return True
    if code != "ValidationException":
        return False
    message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", "")).lower()
    return "not found" in message or "could not find" in message


def is_transient(exc: BaseException) -> bool:
    """True for throttling, 5xx and connection/timeouts: errors worth retrying unchanged."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = error_code(exc)
        if code in THROTTLING_CODES or code in SERVER_ERROR_CODES:
            return True
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return isinstance(status, int) and (status >= 500 or status == 429)
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    try:
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import HTTPClientError
    except ImportError:  # pragma: no cover - botocore is a hard dependency of the hook
        return False
    return isinstance(exc, BotoConnectionError | HTTPClientError)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter for transient errors."""

    max_attempts: int = 10
    base_delay: float = 1.0
    max_delay: float = 30.0

    def delay(self, attempt: int) -> float:
        """Seconds to sleep after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return random.uniform(ceiling / 2, ceiling)


def _note(what: str, exc: BaseException, attempt: int, policy: RetryPolicy, delay: float) -> None:
    log.warning(
        "%s: transient error (attempt %d of %d), retrying in %.1fs: %s",
        what,
        attempt,
        policy.max_attempts,
        delay,
        exc,
    )


def call_with_retry(fn: Callable[..., T], *args: Any, policy: RetryPolicy, what: str, **kwargs: Any) -> T:
    """Call ``fn``; retry transient errors up to ``policy.max_attempts`` times, re-raise the rest."""
    attempt = 1
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if not is_transient(exc) or attempt >= policy.max_attempts:
                raise
            delay = policy.delay(attempt)
            _note(what, exc, attempt, policy, delay)
            time.sleep(delay)
            attempt += 1


async def acall_with_retry(
    fn: Callable[..., Awaitable[T]], *args: Any, policy: RetryPolicy, what: str, **kwargs: Any
) -> T:
    """Async twin of :func:`call_with_retry` (sleeps with ``asyncio.sleep``)."""
    attempt = 1
    while True:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            if not is_transient(exc) or attempt >= policy.max_attempts:
                raise
            delay = policy.delay(attempt)
            _note(what, exc, attempt, policy, delay)
            await asyncio.sleep(delay)
            attempt += 1
