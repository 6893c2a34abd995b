"""The checks of a task's price settings (overrides, currency): stdlib only, no class built at import.

The training operator and the sensor run them in ``__init__``, so a bad price fails the DAG parse;
importing :mod:`~airflow_hetero.pricing.price_list` there instead would build its ``Price``
dataclass in every parse (a dataclass compiles its methods: about 2 ms of a forked parse).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["PRICE_LIST_CURRENCY", "check_currency", "check_overrides", "number_or_none"]

#: The Price List's currency, and every price setting's default.
PRICE_LIST_CURRENCY = "USD"


def number_or_none(value: Any) -> float | None:
    """A finite number >= 0 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def check_currency(currency: str) -> str:
    """An ISO-4217 code as the Price List writes them (``USD``); ValueError otherwise."""
    if not (isinstance(currency, str) and len(currency) == 3 and currency.isascii() and currency.isupper()):
        raise ValueError(f"currency must be a three-letter ISO-4217 code such as 'USD' or 'EUR', got {currency!r}")
    return currency


def check_overrides(prices: Mapping[str, Any] | None) -> dict[str, float]:
    """``{"ml.p4d.24xlarge": 37.69, ...}`` checked: instance types as keys, finite prices >= 0 per hour."""
    out: dict[str, float] = {}
    for name, value in (prices or {}).items():
        if not isinstance(name, str) or not name.startswith("ml."):
            raise ValueError(f"prices: {name!r} is not an instance type such as 'ml.p4d.24xlarge'")
        number = number_or_none(value)
        if number is None:
            raise ValueError(f"prices: {name} must be a price per instance-hour >= 0, got {value!r}")
        out[name] = number
    return out
