"""Prices looked up through a real botocore pricing client (stubbed answers in the public shape):
overrides, the cache, pagination, and every failure becoming a reason instead of an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from support.price_list import answer, expected_request, product, stubbed_client

from airflow_hetero._retry import RetryPolicy
from airflow_hetero.pricing.cache import PriceCache
from airflow_hetero.pricing.lookup import resolve_prices

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.001)


def test_prices_from_the_api_every_page_read_then_from_the_cache(tmp_path: Path) -> None:
    client, stub = stubbed_client()
    stub.add_response("get_products", answer(token="page-2"), expected_request("ml.p3.2xlarge", "eu-west-1"))
    stub.add_response(
        "get_products",
        answer(product("ml.p3.2xlarge", "eu-west-1", "4.1340000000")),
        expected_request("ml.p3.2xlarge", "eu-west-1", token="page-2"),
    )
    cache = PriceCache("eu-west-1", None, folder=tmp_path)
    with stub:
        prices = resolve_prices(["ml.p3.2xlarge", None, "ml.p3.2xlarge"], "eu-west-1", client=client, cache=cache)
        stub.assert_no_pending_responses()
    assert list(prices) == ["ml.p3.2xlarge"]
    assert prices["ml.p3.2xlarge"].per_hour == 4.134 and prices["ml.p3.2xlarge"].source == "pricing_api"
    again = resolve_prices(["ml.p3.2xlarge"], "eu-west-1", client=client, cache=cache)  # no call: the stub has none
    assert again["ml.p3.2xlarge"].per_hour == 4.134 and again["ml.p3.2xlarge"].source == "cache"


def test_overrides_win_and_another_currency_asks_nothing() -> None:
    client, stub = stubbed_client()
    with stub:  # no responses queued: any call would fail the test
        eur = resolve_prices(
            ["ml.p4d.24xlarge", "ml.c5.xlarge"],
            "us-east-1",
            client=client,
            overrides={"ml.p4d.24xlarge": 35.1},
            currency="EUR",
        )
    assert eur["ml.p4d.24xlarge"].per_hour == 35.1 and eur["ml.p4d.24xlarge"].currency == "EUR"
    assert eur["ml.p4d.24xlarge"].source == "override"
    assert eur["ml.c5.xlarge"].per_hour is None
    assert eur["ml.c5.xlarge"].reason == "prices= has no EUR price for it (the Price List is in USD)"
    offline = resolve_prices(["ml.c5.xlarge"], "us-east-1", client=None)
    assert offline["ml.c5.xlarge"].reason == "prices= has none for it and the Pricing API was not asked"
    with pytest.raises(ValueError, match="ISO-4217"):
        resolve_prices([], "us-east-1", currency="usd")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            {"service_error_code": "AccessDeniedException", "http_status_code": 400},
            "the Pricing API refused the call (AccessDeniedException): "
            "the connection's identity needs pricing:GetProducts",
        ),
        (
            {"service_error_code": "ThrottlingException", "http_status_code": 400},
            "the Pricing API was unavailable or throttled every attempt (ThrottlingException",
        ),
        (
            {"service_error_code": "InternalErrorException", "http_status_code": 503},
            "the Pricing API was unavailable or throttled every attempt (InternalErrorException",
        ),
        (
            {"service_error_code": "InvalidParameterException", "http_status_code": 400},
            "the Pricing API failed (InvalidParameterException",
        ),
    ],
)
def test_a_failing_api_is_one_reason_for_every_type(error: dict[str, Any], reason: str) -> None:
    client, stub = stubbed_client()
    attempts = 3 if "throttled" in reason else 1
    for _ in range(attempts):
        stub.add_client_error("get_products", **error)
    with stub:
        prices = resolve_prices(["ml.c5.xlarge", "ml.p3.2xlarge"], "us-east-1", client=client, retry_policy=FAST)
        stub.assert_no_pending_responses()  # retried transient errors only, and asked once for both types
    for price in prices.values():
        assert price.per_hour is None and price.reason is not None and price.reason.startswith(reason)


def test_an_unreachable_endpoint_and_a_type_without_a_product() -> None:
    class Unreachable:
        calls = 0

        def get_products(self, **kwargs: Any) -> dict[str, Any]:
            Unreachable.calls += 1
            raise EndpointConnectionError(endpoint_url="https://api.pricing.us-east-1.amazonaws.com/")

    prices = resolve_prices(["ml.c5.xlarge"], "us-east-1", client=Unreachable(), retry_policy=FAST)
    assert Unreachable.calls == 3
    assert prices["ml.c5.xlarge"].reason is not None and "Could not connect" in prices["ml.c5.xlarge"].reason
    client, stub = stubbed_client()
    stub.add_response("get_products", answer(), expected_request("ml.bogus", "us-east-1"))
    stub.add_response(
        "get_products",
        answer(product("ml.c5.xlarge", "us-east-1", "0.204")),
        expected_request("ml.c5.xlarge", "us-east-1"),
    )
    with stub:
        found = resolve_prices(["ml.bogus", "ml.c5.xlarge"], "us-east-1", client=client)
    assert found["ml.bogus"].reason == "the Price List has no on-demand training price for ml.bogus in us-east-1"
    assert found["ml.c5.xlarge"].per_hour == 0.204  # one type without a product does not stop the others


def test_cache_expiry_corruption_and_endpoints_kept_apart(tmp_path: Path) -> None:
    from airflow_hetero.pricing.price_list import Price

    cache = PriceCache("us-east-1", None, folder=tmp_path, max_age=3600)
    cache.put(Price("ml.c5.xlarge", 0.204, "USD", "pricing_api", "$0.204 per hour"), now=1000.0)
    assert cache.get("ml.c5.xlarge", now=1000.0 + 3600) is not None
    assert cache.get("ml.c5.xlarge", now=1000.0 + 3601) is None  # expired
    local = PriceCache("us-east-1", "http://127.0.0.1:4566", folder=tmp_path)
    assert local.path != cache.path and local.get("ml.c5.xlarge") is None  # a stand-in never prices AWS
    assert cache.path is not None
    for corrupt in (
        "{not json",
        json.dumps({"format": "other", "prices": {}}),
        json.dumps([1]),
        json.dumps(
            {
                "format": "airflow-hetero prices 1",
                "region": "us-east-1",
                "prices": {"ml.c5.xlarge": {"per_hour": "0.2", "fetched": 1000.0}},
            }
        ),
    ):
        cache.path.write_text(corrupt)
        assert cache.get("ml.c5.xlarge", now=1000.0) is None
    cache.put(Price("ml.c5.xlarge", 0.204, "USD"), now=1000.0)  # a corrupt file is replaced
    assert cache.get("ml.c5.xlarge", now=1000.0) is not None
    with pytest.raises(ValueError, match="max_age"):
        PriceCache("us-east-1", max_age=float("nan"))


def test_cache_folder_from_the_environment_and_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_hetero.pricing.price_list import Price

    monkeypatch.setenv("AIRFLOW_HETERO_CACHE_DIR", str(tmp_path))
    cache = PriceCache("ap-south-1")
    assert cache.path is not None and cache.path.parent == tmp_path / "prices"
    cache.put(Price("ml.c5.xlarge", 0.2, "USD"))
    assert cache.get("ml.c5.xlarge") is not None
    monkeypatch.setenv("AIRFLOW_HETERO_CACHE_DIR", "off")
    off = PriceCache("ap-south-1")
    assert off.path is None and off.get("ml.c5.xlarge") is None
    off.put(Price("ml.c5.xlarge", 0.2, "USD"))  # nothing written, no error
    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o500)
    PriceCache("ap-south-1", folder=read_only).put(Price("ml.c5.xlarge", 0.2, "USD"))  # no cache, no error
