"""The run's cost by its BillableTimeInSeconds (the model asset's extra): every group's count x price, and why
it is unknown when it is."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_hetero.pricing.billing import billed_cost
from airflow_hetero.pricing.price_list import Price

PRICES = {
    "ml.c5.18xlarge": Price("ml.c5.18xlarge", 3.672, "USD", "pricing_api", "$3.672 per hour"),
    "ml.p4d.24xlarge": Price("ml.p4d.24xlarge", 37.688, "USD", "override"),
}

GROUPS = [
    {"name": "data_group", "type": "ml.c5.18xlarge", "count": 2},
    {"name": "dnn", "type": "ml.p4d.24xlarge", "count": 1},
]


def test_billed_cost_is_the_billable_time_of_the_whole_cluster() -> None:
    cost = billed_cost(GROUPS, 5400, PRICES, currency="USD")
    assert cost["total"] == round(1.5 * (2 * 3.672 + 37.688), 4)
    assert cost["prices"] == {"ml.c5.18xlarge": 3.672, "ml.p4d.24xlarge": 37.688}
    assert "reason" not in cost


@pytest.mark.parametrize(
    ("groups", "billable", "reason"),
    [
        (GROUPS, None, "the job reported no BillableTimeInSeconds"),
        ([], 600, "the job reported no instance groups"),
        ([*GROUPS, {"name": "x", "type": "ml.g5.xlarge", "count": 1}], 600, "no price for ml.g5.xlarge"),
        ([{"name": "x", "count": 1}], 600, "no price for an unnamed type"),
    ],
)
def test_billed_cost_unknown_says_why(groups: list[dict[str, Any]], billable: float | None, reason: str) -> None:
    cost = billed_cost(groups, billable, PRICES, currency="USD")
    assert cost["total"] is None and cost["reason"] == reason


def test_billed_cost_carries_the_price_lookups_reason() -> None:
    prices = {**PRICES, "ml.p4d.24xlarge": Price("ml.p4d.24xlarge", None, "USD", reason="the Pricing API refused")}
    cost = billed_cost(GROUPS, 600, prices, currency="USD")
    assert cost["reason"] == "no price for ml.p4d.24xlarge: the Pricing API refused"
