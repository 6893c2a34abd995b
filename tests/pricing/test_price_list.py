"""The pure price core: the filters, reading a GetProducts answer, checking overrides and currency."""

from __future__ import annotations

import json

import pytest
from support.price_list import answer, expected_request, product

from airflow_hetero.pricing.price_list import (
    Price,
    check_currency,
    check_overrides,
    price_from_products,
    pricing_api_region,
    training_filters,
)


def test_filters_name_the_training_product_of_a_type_in_a_region() -> None:
    assert (
        training_filters("ml.p4d.24xlarge", "eu-west-1") == expected_request("ml.p4d.24xlarge", "eu-west-1")["Filters"]
    )


@pytest.mark.parametrize(
    ("region", "endpoint"),
    [
        ("us-east-1", "us-east-1"),
        ("eu-central-1", "eu-central-1"),
        ("ap-south-1", "ap-south-1"),
        ("eu-west-1", "us-east-1"),
        ("us-west-2", "us-east-1"),
        (None, "us-east-1"),
        ("cn-north-1", "cn-northwest-1"),
    ],
)
def test_the_price_list_endpoint_region(region: str | None, endpoint: str) -> None:
    assert pricing_api_region(region) == endpoint


def test_the_on_demand_hourly_price_of_the_training_product() -> None:
    entries = answer(
        product("ml.p3.2xlarge", "us-east-1", "3.8250000000", component="Hosting"),
        product("ml.p3.2xlarge", "us-east-1", "3.8250000000", component="SpotTraining"),
        product("ml.p3.2xlarge", "eu-west-1", "4.1", component="Training"),  # a filter the service ignored
        product("ml.p3.2xlarge", "us-east-1", "3.8250000000"),
    )["PriceList"]
    assert all(isinstance(entry, str) for entry in entries)  # JSON strings, as the service sends them
    price = price_from_products(entries, "ml.p3.2xlarge", "us-east-1")
    assert price == Price(
        "ml.p3.2xlarge", 3.825, "USD", "pricing_api", "$3.8250000000 per On Demand Training ml.p3.2xlarge instance hour"
    )
    assert price.as_dict() == {
        "per_hour": 3.825,
        "currency": "USD",
        "source": "pricing_api",
        "description": "$3.8250000000 per On Demand Training ml.p3.2xlarge instance hour",
    }


def test_no_product_several_prices_and_unreadable_entries_are_reasons() -> None:
    none = price_from_products([], "ml.c5.xlarge", "us-east-1")
    assert (
        none.per_hour is None
        and none.reason == "the Price List has no on-demand training price for ml.c5.xlarge in us-east-1"
    )
    monthly = price_from_products(
        answer(product("ml.c5.xlarge", "us-east-1", "1", unit="GB-Mo"))["PriceList"], "ml.c5.xlarge", "us-east-1"
    )
    assert monthly.per_hour is None
    two = answer(product("ml.c5.xlarge", "us-east-1", "0.2"), product("ml.c5.xlarge", "us-east-1", "0.3"))
    assert price_from_products(two["PriceList"], "ml.c5.xlarge", "us-east-1").reason == (
        "the Price List has several hourly prices (0.2, 0.3)"
    )
    broken = ["{not json", json.dumps({"product": {}}), json.dumps(product("ml.c5.xlarge", "us-east-1", "free"))]
    reason = price_from_products(broken, "ml.c5.xlarge", "us-east-1").reason
    assert reason is not None and reason.endswith("(2 unreadable entries)")


def test_overrides_and_currency_are_checked() -> None:
    assert check_overrides({"ml.p4d.24xlarge": 37.69, "ml.c5.xlarge": 0}) == {
        "ml.p4d.24xlarge": 37.69,
        "ml.c5.xlarge": 0.0,
    }
    assert check_overrides(None) == {}
    for bad in (
        {"p4d": 1.0},
        {"ml.c5.xlarge": -1},
        {"ml.c5.xlarge": "1"},
        {"ml.c5.xlarge": True},
        {"ml.c5.xlarge": float("inf")},
    ):
        with pytest.raises(ValueError, match="prices: "):
            check_overrides(bad)
    assert check_currency("EUR") == "EUR"
    for bad_currency in ("eur", "EURO", "", "€"):
        with pytest.raises(ValueError, match="three-letter ISO-4217"):
            check_currency(bad_currency)
