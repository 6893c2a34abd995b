"""What prices a run's cost: the overrides, their currency, whether to ask the Price List (stdlib only).

The training operator, the sensor and the summary operator take them as ``prices``, ``currency``
and ``use_pricing_api``; ``airflow-hetero summarize`` as ``--price``, ``--currency`` and
``--no-pricing-api``. Each makes one :class:`PriceSettings` with :meth:`PriceSettings.of`, which
checks them (a bad price or currency fails the DAG's parse, not the run), and hands it whole to
the hook's ``training_prices``, the model asset's cost and the summary. Stdlib only and no
dataclass: a DAG parse imports it (tests/package/test_parse_path.py), and
:mod:`~airflow_hetero.pricing.price_list` re-exports the checks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "PRICE_LIST_CURRENCY",
    "PriceSettings",
    "check_currency",
    "check_overrides",
    "number_or_none",
    "price_sources",
]

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


def price_sources(overrides: Iterable[str], use_api: bool, off_switch: str = "use_pricing_api=False") -> str:
    """The price sources a budget asks, in order, as its refusals name them (``off_switch``: how the Price
    List was turned off, the operator's argument or the CLI's flag)."""
    given = f"prices= ({', '.join(sorted(overrides)) or 'none given'})"
    if not use_api:
        return f"{given}; the Price List Query API was not asked ({off_switch})"
    return f"{given}, then the Price List Query API (pricing:GetProducts, {PRICE_LIST_CURRENCY})"


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


class PriceSettings:
    """Prices per instance-hour that win over the Price List (``overrides``), the ``currency`` of
    those and of the cost, and whether the Price List Query API is asked (``use_api``) for the rest.

    Make one with :meth:`of`, which checks what it is given. The Price List is in USD: with another
    currency only the overrides price anything. Immutable. (A plain class, not a dataclass or a
    NamedTuple: a DAG file makes one per task, and those build their methods at import, about
    0.5-2 ms of every forked parse; tests/package/test_parse_path.py holds the parse to that.)
    """

    __slots__ = ("currency", "overrides", "use_api")
    overrides: Mapping[str, float]
    currency: str
    use_api: bool

    def __init__(
        self, overrides: Mapping[str, float] | None = None, currency: str = PRICE_LIST_CURRENCY, use_api: bool = True
    ) -> None:
        object.__setattr__(self, "overrides", dict(overrides or {}))
        object.__setattr__(self, "currency", currency)
        object.__setattr__(self, "use_api", use_api)

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

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"PriceSettings is immutable: cannot set {name}")

    def __reduce__(self) -> tuple[type[PriceSettings], tuple[dict[str, float], str, bool]]:
        return (PriceSettings, (dict(self.overrides), self.currency, self.use_api))

    def _key(self) -> tuple[tuple[tuple[str, float], ...], str, bool]:
        return (tuple(sorted(self.overrides.items())), self.currency, self.use_api)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PriceSettings) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        overrides, currency, use_api = dict(self.overrides), self.currency, self.use_api
        return f"PriceSettings({overrides=!r}, {currency=!r}, {use_api=!r})"
