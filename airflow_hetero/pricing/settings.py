"""What prices a run's cost: the overrides, their currency, whether to ask the Price List (stdlib only).

The training operator, the sensor and the summary operator take them as ``prices``, ``currency``
and ``use_pricing_api``; ``airflow-hetero summarize`` as ``--price``, ``--currency`` and
``--no-pricing-api``. Each makes one :class:`PriceSettings` with :meth:`PriceSettings.of`, which
checks them (a bad price or currency fails the DAG's parse, not the run), and hands it whole to
the hook's ``training_prices``, the model asset's cost and the summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from airflow_hetero.pricing.price_list import PRICE_LIST_CURRENCY, check_currency, check_overrides


class PriceSettings(NamedTuple):
    """Prices per instance-hour that win over the Price List (``overrides``), the ``currency`` of
    those and of the cost, and whether the Price List Query API is asked (``use_api``) for the rest.

    Make one with :meth:`of`, which checks what it is given. The Price List is in USD: with another
    currency only the overrides price anything. (A NamedTuple, not a dataclass: a DAG file makes one
    per task, and a frozen dataclass costs about 0.5 ms more to define at parse time.)
    """

    overrides: Mapping[str, float] = {}  # never written to: `of` gives each its own checked dict
    currency: str = PRICE_LIST_CURRENCY
    use_api: bool = True

    @classmethod
    def of(
        cls,
        prices: Mapping[str, Any] | None = None,
        currency: str = PRICE_LIST_CURRENCY,
        use_pricing_api: bool = True,
    ) -> PriceSettings:
        """Checked, from the operators' keyword arguments: ``prices`` are ``{"ml.<type>": price >= 0}``,
        ``currency`` an ISO-4217 code (ValueError otherwise)."""
        return cls(check_overrides(prices), check_currency(currency), bool(use_pricing_api))
