"""The endpoint's own control path: read and change instance capacity and quotas over HTTP.

(``/_airflow-hetero/interrupt``, which interrupts a spot job, is :mod:`.spot_control`'s.)

``GET /_airflow-hetero/capacity`` answers :meth:`CapacityLedger.state` as JSON; ``POST`` with
``{"capacity": {TYPE: N}, "quota": {TYPE: N}}`` (either key may be left out; ``null`` makes a type
unlimited again) changes the types named and answers the new state. A bad body answers 400 with
``{"__type": "ValidationException", "message": ...}``.

No AWS client sends a request there by accident: the JSON and query APIs post to ``/``, and an S3
path-style request starts with a bucket name, which never begins with ``_``. The path passes the same
request guard as everything else (no web page can reach it). :func:`change_capacity` is the client,
for a process other than the endpoint's (a test of a ``local serve`` endpoint, a script).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from airflow_hetero.local.api.errors import ServiceError, validation
from airflow_hetero.local.training.capacity import CapacityLedger

#: Paths under this prefix are the endpoint's own, never an AWS API's.
PREFIX = "/_airflow-hetero/"
CAPACITY_PATH = PREFIX + "capacity"
#: Interrupt a running spot job (:mod:`.spot_control` answers it).
INTERRUPT_PATH = PREFIX + "interrupt"
_KEYS = ("capacity", "quota")


def answer(ledger: CapacityLedger, path: str, method: str, raw: bytes) -> dict[str, Any]:
    """The answer to ``method path`` with body ``raw``; :class:`ServiceError` when refused."""
    if path != CAPACITY_PATH:
        raise ServiceError(
            "NotFound", f"The airflow-hetero local endpoint has no {path} (only {CAPACITY_PATH}, {INTERRUPT_PATH})", 404
        )
    if method == "POST":
        try:
            ledger.change(**_changes(raw))
        except ValueError as exc:  # an unknown type or a bad count: nothing was changed
            raise validation(str(exc)) from exc
    elif method != "GET":
        raise ServiceError("MethodNotAllowed", f"{CAPACITY_PATH} answers GET and POST, not {method}", 405)
    return ledger.state()


def _changes(raw: bytes) -> dict[str, dict[str, Any]]:
    try:
        body = json.loads(raw or b"{}")
    except ValueError as exc:
        raise validation(f"The body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict) or set(body) - set(_KEYS):
        raise validation(f'The body must be a JSON object with "capacity" and/or "quota", not {body!r:.200}')
    for key, value in body.items():
        if not isinstance(value, dict):
            raise validation(f'"{key}" must be an object of instance type -> count (null: unlimited)')
    return body


def change_capacity(
    url: str,
    *,
    capacity: dict[str, int | None] | None = None,
    quota: dict[str, int | None] | None = None,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Change the capacity / quota of the endpoint at ``url`` (only the types named); its new state.

    With neither, just read the state. Raises ``ValueError`` with the endpoint's message when refused.
    """
    changes = {key: value for key, value in (("capacity", capacity), ("quota", quota)) if value is not None}
    return call(url, CAPACITY_PATH, changes or None, "change", timeout=timeout)


def call(url: str, path: str, body: dict[str, Any] | None, what: str, *, timeout: float) -> dict[str, Any]:
    """``POST`` ``body`` as JSON to the control ``path`` of the endpoint at ``url`` (``GET`` when None); its
    JSON answer, or ``ValueError`` saying ``the endpoint refused the <what> (<HTTP status>): <its message>``."""
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url.rstrip("/") + path, data=data, method="GET" if data is None else "POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answered: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as err:
        detail = err.read().decode("utf-8", "replace")
        with contextlib.suppress(ValueError, KeyError, TypeError):
            detail = json.loads(detail)["message"]
        raise ValueError(f"the endpoint refused the {what} ({err.code}): {detail}") from None
    return answered
