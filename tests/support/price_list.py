"""Price List Query API answers in the public shape: each product a JSON *string* in ``PriceList``.

The product layout follows the AWS CLI's own ``aws pricing get-products`` example (awscli
examples/pricing/get-products.rst: ``product.attributes``, ``terms.OnDemand.<sku>.<offer>
.priceDimensions.<rate>.pricePerUnit.USD``, ``unit``, ``description``) with the attributes that
SageMaker ML Instance products carry in the public AmazonSageMaker offer file (``productFamily``
"ML Instance", ``regionCode``, ``location``, ``instanceName``, ``platoinstancetype``,
``usagetype`` such as ``USE1-Train:ml.p3.2xlarge``, ``instanceType``, ``vCpu``, ...).
The prices in tests are made up for the tests.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import boto3
from botocore.stub import Stubber

#: usagetype prefixes of the regions the tests use
USAGE_PREFIX = {"us-east-1": "USE1", "eu-west-1": "EU", "us-west-2": "USW2"}
LOCATION = {"us-east-1": "US East (N. Virginia)", "eu-west-1": "EU (Ireland)", "us-west-2": "US West (Oregon)"}
COMPONENT_USAGE = {"Training": "Train", "Hosting": "Host", "SpotTraining": "Train-Spot"}


def product(
    instance_type: str, region: str, usd: str, *, component: str = "Training", unit: str = "Hrs"
) -> dict[str, Any]:
    sku = f"SKU{zlib.crc32(f'{instance_type}|{region}|{component}'.encode()):010d}"
    usage = f"{USAGE_PREFIX.get(region, 'USE1')}-{COMPONENT_USAGE.get(component, component)}:{instance_type}"
    return {
        "product": {
            "productFamily": "ML Instance",
            "attributes": {
                "servicecode": "AmazonSageMaker",
                "servicename": "Amazon SageMaker",
                "productFamily": "ML Instance",
                "location": LOCATION.get(region, region),
                "locationType": "AWS Region",
                "regionCode": region,
                "instanceName": instance_type,
                "instanceType": f"{instance_type}-{component}",
                "platoinstancetype": component,
                "platoinstancename": instance_type.split(".")[1],
                "usagetype": usage,
                "operation": "RunInstance",
                "vCpu": "8",
                "currentGeneration": "Yes",
            },
            "sku": sku,
        },
        "serviceCode": "AmazonSageMaker",
        "terms": {
            "OnDemand": {
                f"{sku}.JRTCKXETXF": {
                    "priceDimensions": {
                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": unit,
                            "endRange": "Inf",
                            "description": f"${usd} per On Demand {component} {instance_type} instance hour",
                            "appliesTo": [],
                            "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": usd},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2026-11-01T00:00:00Z",
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            }
        },
        "version": "20261101000000",
        "publicationDate": "2026-11-01T00:00:00Z",
    }


def answer(*products: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    """A GetProducts answer: the products as JSON strings."""
    out: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in products]}
    if token:
        out["NextToken"] = token
    return out


def stubbed_client() -> tuple[Any, Stubber]:
    """A real botocore pricing client (us-east-1) whose answers are stubbed: requests are checked
    against the pricing service model, answers against its output shape."""
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return client, Stubber(client)


def expected_request(instance_type: str, region: str, token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "ServiceCode": "AmazonSageMaker",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "productFamily", "Value": "ML Instance"},
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
            {"Type": "TERM_MATCH", "Field": "platoinstancetype", "Value": "Training"},
        ],
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
    }
    if token:
        params["NextToken"] = token
    return params
