"""What a training price is, and how the AWS Price List Query API states it (pure, stdlib only).

The attribute names are those of the public Price List for ``AmazonSageMaker``: every ML instance
product has ``productFamily`` "ML Instance", the region in ``regionCode``, the instance type in
``instanceName`` (``ml.p4d.24xlarge``) and the SageMaker component in ``platoinstancetype``
("Training", "Hosting", "SpotTraining", ...; its ``usagetype`` reads ``USE1-Train:ml.p4d.24xlarge``).
``GetProducts`` answers each product as a JSON *string* in ``PriceList``; its on-demand price is
``terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD`` per ``unit`` "Hrs".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Re-exported (``as``): the checks live with the price settings, which a DAG parse imports (no dataclass).
from airflow_hetero.pricing.settings import PRICE_LIST_CURRENCY as PRICE_LIST_CURRENCY  # noqa: PLC0414
from airflow_hetero.pricing.settings import check_currency as check_currency  # noqa: PLC0414
from airflow_hetero.pricing.settings import check_overrides as check_overrides  # noqa: PLC0414
from airflow_hetero.pricing.settings import number_or_none as number_or_none  # noqa: PLC0414

SERVICE_CODE = "AmazonSageMaker"
PRODUCT_FAMILY = "ML Instance"
#: The component of a training job's instances (not "SpotTraining": spot is estimated from the job).
TRAINING_COMPONENT = "Training"
ATTR_PRODUCT_FAMILY = "productFamily"
ATTR_REGION = "regionCode"
ATTR_INSTANCE = "instanceName"
ATTR_COMPONENT = "platoinstancetype"
#: Regions whose endpoint answers the Price List Query API (api.pricing.<region>.amazonaws.com).
PRICING_API_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")
#: The China partition's one Price List endpoint.
CHINA_PRICING_REGION = "cn-northwest-1"

#: Where a price came from (``Price.source``).
FROM_OVERRIDE = "override"
FROM_API = "pricing_api"
FROM_CACHE = "cache"


@dataclass(frozen=True)
class Price:
    """An hourly price of one instance, or why there is none (``per_hour`` None, ``reason`` set)."""

    instance_type: str
    per_hour: float | None
    currency: str
    source: str | None = None
    description: str | None = None  # the Price List's own words, e.g. "$37.688 per ... hour"
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The summary's ``cost.prices`` entry (keys without a value left out; the reason of a missing
        price is the cost's, in its group)."""
        out: dict[str, Any] = {"per_hour": self.per_hour, "currency": self.currency}
        for key in ("source", "description"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def unknown(instance_type: str, currency: str, reason: str) -> Price:
    return Price(instance_type, None, currency, reason=reason)


def pricing_api_region(region: str | None) -> str:
    """The region to send Price List queries to: ``region`` when it answers them, else us-east-1
    (cn-northwest-1 in the China partition). Prices of every region are asked there."""
    if region in PRICING_API_REGIONS:
        return region
    if region and region.startswith("cn-"):
        return CHINA_PRICING_REGION
    return PRICING_API_REGIONS[0]


def training_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """``GetProducts`` filters for the on-demand training product of ``instance_type`` in ``region``."""
    pairs = (
        (ATTR_PRODUCT_FAMILY, PRODUCT_FAMILY),
        (ATTR_REGION, region),
        (ATTR_INSTANCE, instance_type),
        (ATTR_COMPONENT, TRAINING_COMPONENT),
    )
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in pairs]


def _hourly_dimensions(product: Mapping[str, Any]) -> list[tuple[float, str | None]]:
    """(USD per hour, description) of each on-demand price dimension billed in hours."""
    found = []
    for offer in ((product.get("terms") or {}).get("OnDemand") or {}).values():
        for dimension in (offer.get("priceDimensions") or {}).values():
            usd = (dimension.get("pricePerUnit") or {}).get(PRICE_LIST_CURRENCY)
            if str(dimension.get("unit", "")).lower() not in ("hrs", "hours", "hour"):
                continue
            try:
                value = number_or_none(float(usd)) if isinstance(usd, str) else None
            except ValueError:
                value = None
            if value is not None:
                found.append((value, dimension.get("description")))
    return found


def _matches(attributes: Mapping[str, Any], instance_type: str, region: str) -> bool:
    return (
        attributes.get(ATTR_INSTANCE) == instance_type
        and attributes.get(ATTR_COMPONENT) == TRAINING_COMPONENT
        and attributes.get(ATTR_REGION, region) == region
    )


def price_from_products(price_list: Iterable[str], instance_type: str, region: str) -> Price:
    """The on-demand training price in a ``GetProducts`` answer's ``PriceList``, or why there is none.

    Products of another type, region or component are ignored (a filter the service did not apply
    must not price the wrong thing); several different prices for one product are refused.
    """
    prices: dict[float, str | None] = {}
    bad = 0
    for entry in price_list:
        try:
            product = json.loads(entry) if isinstance(entry, str) else entry
            attributes = product["product"]["attributes"]
        except (ValueError, TypeError, KeyError):
            bad += 1
            continue
        if not _matches(attributes, instance_type, region):
            continue
        for value, description in _hourly_dimensions(product):
            prices.setdefault(value, description)
    if len(prices) == 1:
        value, description = next(iter(prices.items()))
        return Price(instance_type, value, PRICE_LIST_CURRENCY, FROM_API, description)
    if prices:
        listed = ", ".join(f"{v:g}" for v in sorted(prices))
        return unknown(instance_type, PRICE_LIST_CURRENCY, f"the Price List has several hourly prices ({listed})")
    why = f"the Price List has no on-demand training price for {instance_type} in {region}"
    return unknown(instance_type, PRICE_LIST_CURRENCY, why + (f" ({bad} unreadable entries)" if bad else ""))
