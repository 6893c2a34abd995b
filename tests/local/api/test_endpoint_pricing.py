"""The endpoint's Price List Query API: GetProducts in the service's shape, with stand-in prices,
requests checked against botocore's pricing model, refusals in its error codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.api.pricing import stand_in_price
from airflow_hetero.pricing.lookup import resolve_prices
from airflow_hetero.pricing.price_list import price_from_products, training_filters

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pricing(endpoint: LocalEndpoint) -> Any:
    return endpoint.client("pricing")


def test_get_products_answers_the_training_product_as_json_strings(pricing: Any) -> None:
    answer = pricing.get_products(
        ServiceCode="AmazonSageMaker", Filters=training_filters("ml.p3.2xlarge", "eu-west-1"), FormatVersion="aws_v1"
    )
    assert answer["FormatVersion"] == "aws_v1" and len(answer["PriceList"]) == 1
    assert isinstance(answer["PriceList"][0], str)
    product = json.loads(answer["PriceList"][0])
    assert product["product"]["attributes"]["usagetype"] == "LOCAL-Train:ml.p3.2xlarge"
    price = price_from_products(answer["PriceList"], "ml.p3.2xlarge", "eu-west-1")
    assert price.per_hour == stand_in_price("ml.p3.2xlarge") == 1.0
    assert price.description is not None and "a stand-in price, not an AWS price" in price.description
    assert stand_in_price("ml.c5.18xlarge") == 0.9 and stand_in_price("ml.m5.large") == 0.025


def test_the_package_reads_them_as_it_reads_aws(pricing: Any) -> None:
    prices = resolve_prices(["ml.c5.xlarge", "ml.bogus.type"], "us-east-1", client=pricing)
    assert prices["ml.c5.xlarge"].per_hour == 0.05 and prices["ml.c5.xlarge"].source == "pricing_api"
    assert (
        prices["ml.bogus.type"].reason
        == "the Price List has no on-demand training price for ml.bogus.type in us-east-1"
    )
    services = pricing.describe_services(ServiceCode="AmazonSageMaker")["Services"]
    assert services[0]["ServiceCode"] == "AmazonSageMaker" and "instanceName" in services[0]["AttributeNames"]


@pytest.mark.parametrize(
    ("kwargs", "code", "message"),
    [
        (
            {"Filters": [{"Type": "TERM_MATCH", "Field": "instanceName", "Value": "ml.c5.xlarge"}] * 51},
            "InvalidParameterException",
            "Member must have length less than or equal to 50",
        ),
        (
            {"Filters": [{"Type": "CONTAINS", "Field": "instanceName", "Value": "c5"}]},
            "InvalidParameterException",
            "TERM_MATCH filters only",
        ),
    ],
)
def test_requests_are_checked_against_the_pricing_model(
    pricing: Any, kwargs: dict[str, Any], code: str, message: str
) -> None:
    with pytest.raises(ClientError) as err:
        pricing.get_products(ServiceCode="AmazonSageMaker", **kwargs)
    assert err.value.response["Error"]["Code"] == code and message in err.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as other:
        pricing.describe_services(ServiceCode="AmazonEC2")
    assert other.value.response["Error"]["Code"] == "NotFoundException"
    with pytest.raises(ClientError) as bulk:
        pricing.list_price_lists(ServiceCode="AmazonSageMaker", EffectiveDate=0, CurrencyCode="USD")
    assert bulk.value.response["Error"]["Code"] == "InvalidParameterException"
