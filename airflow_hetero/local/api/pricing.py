"""The Price List Query API actions the pricing client needs, answered with local stand-in prices.

``GetProducts`` answers in the service's shape (each product a JSON string in ``PriceList``, the
attributes of :mod:`airflow_hetero.pricing.price_list`) for the ``AmazonSageMaker`` training product
of any ``TrainingInstanceType`` botocore knows; ``DescribeServices`` lists that service and its
attribute names. Requests are checked against botocore's ``pricing`` model, refusals use its error
codes. The prices are stand-ins, computed from the instance size so that GPU instances cost more
than CPU ones, and every product says so in its description and usage type: they are not AWS prices.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

from airflow_hetero.local.api.constraints import constraint_error, constraint_problems, training_instance_types
from airflow_hetero.local.api.errors import ServiceError
from airflow_hetero.pricing.price_list import (
    ATTR_COMPONENT,
    ATTR_INSTANCE,
    ATTR_PRODUCT_FAMILY,
    ATTR_REGION,
    PRICE_LIST_CURRENCY,
    PRODUCT_FAMILY,
    SERVICE_CODE,
    TRAINING_COMPONENT,
)

_SIZE = re.compile(r"^(\d*)xlarge$")
_SIZE_UNITS = {"medium": 0.25, "large": 0.5}
#: Stand-in USD per size unit (one ``xlarge``) and hour: CPU families, accelerated families.
STAND_IN_RATES = (0.05, 0.5)
_ACCELERATED = ("p", "g", "trn", "inf", "dl")
STAND_IN_NOTE = "airflow-hetero local endpoint: a stand-in price, not an AWS price"


def stand_in_price(instance_type: str) -> float:
    """A made-up hourly price of ``instance_type``: size units x a CPU or accelerated rate."""
    _, family, size = instance_type.split(".", 2)
    match = _SIZE.match(size)
    units = _SIZE_UNITS.get(size, float(match.group(1) or 1) if match else 1.0)
    rate = STAND_IN_RATES[1] if family.startswith(_ACCELERATED) else STAND_IN_RATES[0]
    return round(units * rate, 4)


def _check(operation: str, body: dict[str, Any]) -> None:
    problems = constraint_problems(operation, body, "pricing")
    if problems:
        raise constraint_error(problems, "InvalidParameterException")


def _product(instance_type: str, region: str) -> str:
    price = f"{stand_in_price(instance_type):.10f}"
    sku = f"LOCAL{zlib.crc32(f'{instance_type}|{region}'.encode()):010d}"
    return json.dumps(
        {
            "product": {
                "productFamily": PRODUCT_FAMILY,
                "attributes": {
                    "servicecode": SERVICE_CODE,
                    ATTR_PRODUCT_FAMILY: PRODUCT_FAMILY,
                    ATTR_REGION: region,
                    ATTR_INSTANCE: instance_type,
                    ATTR_COMPONENT: TRAINING_COMPONENT,
                    "usagetype": f"LOCAL-Train:{instance_type}",
                    "operation": "RunInstance",
                },
                "sku": sku,
            },
            "serviceCode": SERVICE_CODE,
            "terms": {
                "OnDemand": {
                    f"{sku}.LOCAL": {
                        "priceDimensions": {
                            f"{sku}.LOCAL.HOURS": {
                                "unit": "Hrs",
                                "description": f"{STAND_IN_NOTE}: ${price} per {instance_type} training hour",
                                "pricePerUnit": {PRICE_LIST_CURRENCY: price},
                            }
                        },
                        "sku": sku,
                        "offerTermCode": "LOCAL",
                    }
                }
            },
        }
    )


def get_products(body: dict[str, Any]) -> dict[str, Any]:
    """``GetProducts``: the training product matching every TERM_MATCH filter, or none."""
    _check("GetProducts", body)
    filters = body.get("Filters") or []
    if any(item.get("Type") != "TERM_MATCH" for item in filters):
        raise ServiceError("InvalidParameterException", "the local endpoint answers TERM_MATCH filters only")
    wanted = {item["Field"]: item["Value"] for item in filters}
    instance, region = wanted.get(ATTR_INSTANCE), wanted.get(ATTR_REGION)
    fits = (
        body.get("ServiceCode") == SERVICE_CODE
        and wanted.get(ATTR_PRODUCT_FAMILY, PRODUCT_FAMILY) == PRODUCT_FAMILY
        and wanted.get(ATTR_COMPONENT, TRAINING_COMPONENT) == TRAINING_COMPONENT
        and instance in training_instance_types()
        and region is not None
        and set(wanted) <= {ATTR_PRODUCT_FAMILY, ATTR_REGION, ATTR_INSTANCE, ATTR_COMPONENT}
    )
    return {"FormatVersion": "aws_v1", "PriceList": [_product(str(instance), str(region))] if fits else []}


def describe_services(body: dict[str, Any]) -> dict[str, Any]:
    """``DescribeServices``: the one service answered here, with the attributes its products carry."""
    _check("DescribeServices", body)
    if body.get("ServiceCode") not in (None, SERVICE_CODE):
        raise ServiceError("NotFoundException", f"the local endpoint prices {SERVICE_CODE} only")
    names = sorted([ATTR_PRODUCT_FAMILY, ATTR_REGION, ATTR_INSTANCE, ATTR_COMPONENT, "usagetype", "operation"])
    return {"FormatVersion": "aws_v1", "Services": [{"ServiceCode": SERVICE_CODE, "AttributeNames": names}]}


#: ``AWSPriceListService.<Action>`` -> handler.
ACTIONS = {"GetProducts": get_products, "DescribeServices": describe_services}
