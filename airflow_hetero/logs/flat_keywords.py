"""The flat keywords ``summarize_training_job`` took before its specs; they go in the next release.

``summarize_training_job(name, ..., series_points=30, prices=p, currency="EUR")`` still works:
:func:`from_flat_keywords` turns each flat keyword into the spec it belongs to and warns once with
``DeprecationWarning``, naming what to write instead:
``summarize_training_job(name, ..., series=SeriesSpec(points=30), cost=CostSpec(prices=p, currency="EUR"))``.
A flat keyword given beside the spec that replaces it is refused (``ValueError``): the call would say two things.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from airflow_hetero.logs.per_group import CostSpec, SeriesSpec, VerdictSpec
from airflow_hetero.logs.verdict import Thresholds
from airflow_hetero.pricing.price_list import PRICE_LIST_CURRENCY, check_currency

__all__ = ["FLAT_KEYWORDS", "deprecation_message", "from_flat_keywords"]

#: Flat keyword -> (the spec argument that replaces it, how that argument is written). The one place of the mapping.
FLAT_KEYWORDS: Mapping[str, tuple[str, str]] = {
    "series_points": ("series", "series=SeriesSpec(points=...)"),
    "verdict_thresholds": ("verdict", "verdict=VerdictSpec(Thresholds.of({...}))"),
    "prices": ("cost", "cost=CostSpec(prices=..., currency=...)"),
    "currency": ("cost", "cost=CostSpec(prices=..., currency=...)"),
}


def from_flat_keywords(
    flat: Mapping[str, Any], series: SeriesSpec | None, verdict: VerdictSpec | None, cost: CostSpec | None
) -> tuple[SeriesSpec | None, VerdictSpec | None, CostSpec | None]:
    """``series``, ``verdict`` and ``cost`` with the flat keywords turned into them; warns (DeprecationWarning).

    A name that was never a keyword of ``summarize_training_job`` is a ``TypeError``, as Python's own; a flat
    keyword beside its spec (``prices=`` and ``cost=``) a ``ValueError``; a value out of range the spec's own.
    ``currency=`` without ``prices=`` priced nothing: it is checked, and dropped.
    """
    unknown = sorted(set(flat) - set(FLAT_KEYWORDS))
    if unknown:
        raise TypeError(f"summarize_training_job() got an unexpected keyword argument {unknown[0]!r}")
    given = {"series": series, "verdict": verdict, "cost": cost}
    for name in flat:
        argument, written = FLAT_KEYWORDS[name]
        if given[argument] is not None:
            raise ValueError(
                f"summarize_training_job(): give {argument}= or the deprecated {name}=, not both "
                f"(write {written} alone)"
            )
    warnings.warn(deprecation_message(flat), DeprecationWarning, stacklevel=3)
    if flat.get("series_points") is not None:
        series = SeriesSpec(points=flat["series_points"])
    if flat.get("verdict_thresholds") is not None:
        verdict = VerdictSpec(Thresholds.of(flat["verdict_thresholds"]))
    currency = check_currency(flat.get("currency", PRICE_LIST_CURRENCY))
    if flat.get("prices") is not None:
        cost = CostSpec(flat["prices"], currency)
    return series, verdict, cost


def deprecation_message(flat: Mapping[str, Any]) -> str:
    """What the warning says: the keywords given, and the spec arguments to write instead."""
    given = ", ".join(f"{name}=..." for name in flat)
    instead = ", ".join(dict.fromkeys(FLAT_KEYWORDS[name][1] for name in flat))
    note = (
        "; currency= without prices= prices nothing and is dropped"
        if "currency" in flat and flat.get("prices") is None
        else ""
    )
    return (
        f"summarize_training_job({given}) is deprecated and goes in the next release; write "
        f"summarize_training_job({instead}){note} (SeriesSpec, VerdictSpec, CostSpec, Thresholds: "
        "from airflow_hetero.logs import ...)"
    )
