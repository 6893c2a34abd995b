"""Hourly prices of a job's instance types: overrides first, then the disk cache, then the Price List
Query API through the ``pricing`` client it is given (no boto3 import here).

When neither gives a price, the type's :class:`~airflow_hetero.pricing.price_list.Price` says why
(``reason``), and nothing else fails: a denied, throttled or unreachable Pricing API is one reason for
every type asked after it, not an error of the task.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_hetero._retry import RetryPolicy, call_with_retry, error_code, is_transient
from airflow_hetero.pricing.cache import PriceCache
from airflow_hetero.pricing.price_list import (
    FROM_OVERRIDE,
    PRICE_LIST_CURRENCY,
    SERVICE_CODE,
    Price,
    check_currency,
    check_overrides,
    price_from_products,
    training_filters,
    unknown,
)

if TYPE_CHECKING:
    from airflow_hetero.pricing.settings import PriceSettings

log = logging.getLogger(__name__)

#: Backoff for Price List calls: a few quick attempts (a summary must not wait minutes for prices).
PRICING_RETRY_POLICY = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=4.0)
#: At most this many pages per type (the filters match one product; a runaway NextToken stops here).
MAX_PAGES = 10


class _ApiFailure(Exception):
    """The Pricing API cannot answer (denied, throttled, unreachable): the same for every type."""


def _why(exc: BaseException) -> str:
    code = error_code(exc)
    if code and ("AccessDenied" in code or code in ("UnauthorizedOperation", "UnrecognizedClientException")):
        return f"the Pricing API refused the call ({code}): the connection's identity needs pricing:GetProducts"
    if is_transient(exc):
        return f"the Pricing API was unavailable or throttled every attempt ({code or type(exc).__name__}: {exc})"
    return f"the Pricing API failed ({code or type(exc).__name__}: {exc})"


def fetch_price(client: Any, instance_type: str, region: str, retry_policy: RetryPolicy | None = None) -> Price:
    """The on-demand training price from ``GetProducts``, every page read; raises :class:`_ApiFailure`."""
    entries: list[str] = []
    token: str | None = None
    for _ in range(MAX_PAGES):
        kwargs: dict[str, Any] = {
            "ServiceCode": SERVICE_CODE,
            "Filters": training_filters(instance_type, region),
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
        }
        if token:
            kwargs["NextToken"] = token
        try:
            page = call_with_retry(
                client.get_products,
                policy=retry_policy or PRICING_RETRY_POLICY,
                what=f"GetProducts {instance_type} {region}",
                **kwargs,
            )
        except Exception as exc:
            raise _ApiFailure(_why(exc)) from exc
        entries.extend(page.get("PriceList") or ())
        token = page.get("NextToken")
        if not token:
            break
    return price_from_products(entries, instance_type, region)


def resolve_prices(
    instance_types: Iterable[str | None],
    region: str,
    *,
    client: Any = None,
    overrides: Mapping[str, float] | None = None,
    currency: str = PRICE_LIST_CURRENCY,
    cache: PriceCache | None = None,
    retry_policy: RetryPolicy | None = None,
) -> dict[str, Price]:
    """instance type -> :class:`Price` for every type given (None entries skipped).

    ``overrides`` are prices per instance-hour in ``currency``; the Price List is in USD, so with
    another currency only overrides price anything. ``client`` None: the Pricing API is not asked.
    """
    check_currency(currency)
    given = check_overrides(overrides)
    out: dict[str, Price] = {}
    failure: str | None = None
    for name in dict.fromkeys(t for t in instance_types if t):
        if name in given:
            out[name] = Price(name, given[name], currency, FROM_OVERRIDE)
        elif currency != PRICE_LIST_CURRENCY:
            out[name] = unknown(name, currency, f"prices= has no {currency} price for it (the Price List is in USD)")
        elif client is None:
            out[name] = unknown(name, currency, "prices= has none for it and the Pricing API was not asked")
        elif failure is not None:
            out[name] = unknown(name, currency, failure)
        else:
            cached = cache.get(name) if cache is not None else None
            if cached is not None:
                out[name] = cached
                continue
            try:
                out[name] = fetch_price(client, name, region, retry_policy)
            except _ApiFailure as exc:
                failure = str(exc)
                log.warning("No price for %s in %s: %s", name, region, failure)
                out[name] = unknown(name, currency, failure)
                continue
            if cache is not None:
                cache.put(out[name])
    return out


def training_prices(
    instance_types: Iterable[str | None], region: str, settings: PriceSettings, *, client: Any = None
) -> dict[str, Price]:
    """:func:`resolve_prices` per ``settings``, with the disk cache of ``region`` for ``client``'s endpoint
    (``client`` None: the Pricing API is not asked): what the summary operator (through its hook), the
    asset's cost and ``airflow-hetero summarize`` all use."""
    cache = PriceCache(region, client.meta.endpoint_url) if client is not None else None
    return resolve_prices(
        instance_types, region, client=client, overrides=settings.overrides, currency=settings.currency, cache=cache
    )
